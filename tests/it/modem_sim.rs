//! A GSM modem on the far end of a pseudo-terminal, written from 3GPP TS 27.007 / 27.005 and
//! TS 23.040 / 23.038 (not from the driver): V.250 command lines ended by CR, answers framed
//! in CR LF, `+CPIN`, `+CREG`/`+CEREG`, `+CSQ`, SMS in text mode (GSM and UCS2 character
//! sets) and PDU mode (decoded and reassembled here), `+CMTI` indications with `+CMGR`,
//! `+CMGL`, `+CMGD`, calls with `+COLP`, SIMCom (`+CTTS`, `+DTMF`) and Quectel (`+QTTS`,
//! `+QTONEDET` with the key's ASCII code) speech and key reports, `RING`/`+CLIP`.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What happens to a call the modem dials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callee {
    /// Answers and presses this key once the message was spoken.
    Presses(char),
    NoAnswer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentSms {
    pub to: String,
    pub text: String,
    /// `text-gsm`, `text-ucs2` or `pdu` (with the number of parts).
    pub mode: String,
}

pub struct SimState {
    pub pin: Option<String>,
    unlocked: bool,
    /// `+CREG` stat: 1 home, 5 roaming, 2 searching, 0 not registered.
    pub creg: u8,
    pub rssi: u8,
    echo: bool,
    text_mode: bool,
    charset: String,
    dcs: u8,
    pub storage: BTreeMap<u32, (String, String)>,
    pub sent: Vec<SentSms>,
    /// Concatenated parts by reference: (total, parts so far).
    parts: BTreeMap<u8, (u8, BTreeMap<u8, String>)>,
    /// `+CMS ERROR` codes for the next sends, in order.
    pub cms_errors: VecDeque<u16>,
    pub dialled: Vec<String>,
    pub callee: Callee,
    pub spoken: Vec<String>,
    pub commands: Vec<String>,
    /// Quectel key reports (`+QTONEDET: <ASCII code>`) once `AT+QTONEDET=1` enabled them.
    quectel: bool,
    /// The length `AT+CMGS=<n>` announced, checked against the PDU that follows.
    announced: Option<usize>,
    pub pdu_length_errors: usize,
    /// The first `AT` is answered only together with the second (a modem still booting).
    pub first_probe_held: bool,
    probe_held: bool,
    /// Lines the modem says in the same write as its `OK` to the named command, as unsolicited
    /// lines that follow an answer at once do: the driver has them read before it waits for more.
    pub with_ok_to: Option<(String, Vec<String>)>,
}

/// The simulator's end of the line, paced at a baud rate when one is set (a pty carries
/// bytes at memory speed; a real serial line does not), counting what crosses it.
pub struct Port {
    file: Mutex<std::fs::File>,
    /// Microseconds per character (10 bits: start, 8 data, stop), 0 for no pacing.
    char_us: u64,
    pub bytes_in: std::sync::atomic::AtomicU64,
    pub bytes_out: std::sync::atomic::AtomicU64,
}

impl Port {
    fn write(&self, bytes: &[u8]) {
        self.pace(bytes.len());
        self.bytes_out
            .fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut f = self.file.lock().unwrap();
        let _ = f.write_all(bytes);
        let _ = f.flush();
    }

    /// Waits as long as `n` characters take on the line.
    fn pace(&self, n: usize) {
        if self.char_us > 0 {
            std::thread::sleep(Duration::from_micros(self.char_us * n as u64));
        }
    }
}

pub struct ModemSim {
    pub state: Arc<Mutex<SimState>>,
    pub port: Arc<Port>,
}

/// The GSM 7-bit default alphabet (TS 23.038 6.2.1) and its extension table.
fn gsm_char(code: u8, escaped: bool) -> char {
    const BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\u{1b}ÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
    if escaped {
        return match code {
            0x0A => '\u{c}',
            0x14 => '^',
            0x28 => '{',
            0x29 => '}',
            0x2F => '\\',
            0x3C => '[',
            0x3D => '~',
            0x3E => ']',
            0x40 => '|',
            0x65 => '€',
            _ => ' ',
        };
    }
    BASIC.chars().nth(code as usize).unwrap_or('?')
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn utf16be(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// A decoded SMS-SUBMIT: destination, text of this part, concatenation (ref, total, seq).
fn decode_submit(hex: &str) -> (String, String, Option<(u8, u8, u8)>, usize) {
    let b = unhex(hex);
    let sca = b[0] as usize;
    let mut i = 1 + sca;
    let tpdu_len = b.len() - i;
    let first = b[i];
    assert_eq!(first & 0x03, 0x01, "TP-MTI must be SMS-SUBMIT");
    let udhi = first & 0x40 != 0;
    let vpf = (first >> 3) & 0x03;
    i += 2; // first octet, TP-MR
    let digits = b[i] as usize;
    let toa = b[i + 1];
    i += 2;
    let mut number = String::new();
    if toa == 0x91 {
        number.push('+');
    }
    for k in 0..digits {
        let octet = b[i + k / 2];
        let nibble = if k % 2 == 0 { octet & 0x0F } else { octet >> 4 };
        number.push(char::from(b'0' + nibble));
    }
    i += digits.div_ceil(2);
    let dcs = b[i + 1];
    i += 2;
    i += match vpf {
        2 => 1,
        1 | 3 => 7,
        _ => 0,
    };
    let udl = b[i] as usize;
    let ud = &b[i + 1..];
    let (header, udh_octets) = if udhi {
        let udhl = ud[0] as usize;
        let h = &ud[1..1 + udhl];
        let concat = (h[0] == 0x00).then(|| (h[2], h[3], h[4]));
        (concat, udhl + 1)
    } else {
        (None, 0)
    };
    let text = if dcs == 0x00 {
        // Unpack udl septets, then drop the ones the header (with fill bits) takes.
        let mut septets = Vec::new();
        for k in 0..udl {
            let bit = k * 7;
            let lo = ud[bit / 8] as u16;
            let hi = *ud.get(bit / 8 + 1).unwrap_or(&0) as u16;
            septets.push((((hi << 8 | lo) >> (bit % 8)) & 0x7F) as u8);
        }
        let skip = (udh_octets * 8).div_ceil(7);
        let mut out = String::new();
        let mut escaped = false;
        for s in &septets[skip..] {
            if *s == 0x1B && !escaped {
                escaped = true;
                continue;
            }
            out.push(gsm_char(*s, escaped));
            escaped = false;
        }
        out
    } else {
        assert_eq!(dcs, 0x08, "UCS2 when not GSM 7-bit");
        assert_eq!(udl, ud.len(), "UDL counts octets for UCS2");
        utf16be(&ud[udh_octets..])
    };
    (number, text, header, tpdu_len)
}

impl ModemSim {
    pub fn start(path: &Path) -> ModemSim {
        Self::start_paced(path, 0)
    }

    /// A simulator whose line runs at `baud` (0: unpaced).
    pub fn start_paced(path: &Path, baud: u64) -> ModemSim {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let state = Arc::new(Mutex::new(SimState {
            pin: None,
            unlocked: false,
            creg: 1,
            rssi: 21,
            echo: true,
            text_mode: false,
            charset: "IRA".into(),
            dcs: 0,
            storage: BTreeMap::new(),
            sent: Vec::new(),
            parts: BTreeMap::new(),
            cms_errors: VecDeque::new(),
            dialled: Vec::new(),
            callee: Callee::Presses('4'),
            spoken: Vec::new(),
            commands: Vec::new(),
            quectel: false,
            announced: None,
            pdu_length_errors: 0,
            first_probe_held: false,
            probe_held: false,
            with_ok_to: None,
        }));
        let port = Arc::new(Port {
            file: Mutex::new(file.try_clone().unwrap()),
            char_us: 10_000_000u64.checked_div(baud).unwrap_or(0),
            bytes_in: Default::default(),
            bytes_out: Default::default(),
        });
        let sim = ModemSim { state, port };
        let (state, port) = (sim.state.clone(), sim.port.clone());
        std::thread::spawn(move || serve(file, state, port));
        sim
    }

    /// A message arriving from the network: stored, announced with `+CMTI`.
    pub fn deliver(&self, from: &str, text: &str) -> u32 {
        let index = {
            let mut st = self.state.lock().unwrap();
            let index = st.storage.keys().max().map_or(1, |k| k + 1);
            st.storage
                .insert(index, (from.to_string(), text.to_string()));
            index
        };
        say(&self.port, &format!("+CMTI: \"SM\",{index}"));
        index
    }

    /// A call ringing from `from`.
    pub fn ring(&self, from: &str) {
        for line in ring_lines(from) {
            say(&self.port, &line);
        }
    }

    /// Waits until `done` holds for the state, or fails after `limit`.
    pub fn wait_for(&self, limit: Duration, what: &str, done: impl Fn(&SimState) -> bool) {
        let started = Instant::now();
        loop {
            let st = self.state.lock().unwrap();
            if done(&st) {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "modem simulator: {what} did not happen; commands so far: {:?}",
                st.commands
            );
            drop(st);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn sent(&self) -> Vec<SentSms> {
        self.state.lock().unwrap().sent.clone()
    }
}

/// What a modem says when a call rings from `from` (with `AT+CLIP=1`).
pub fn ring_lines(from: &str) -> [String; 2] {
    ["RING".to_string(), format!("+CLIP: \"{from}\",145,,,,0")]
}

/// One answer line framed as V.250 says (CR LF before and after).
fn framed(line: &str) -> String {
    format!("\r\n{line}\r\n")
}

/// Writes one answer line, framed.
fn say(port: &Arc<Port>, line: &str) {
    port.write(framed(line).as_bytes());
}

fn serve(mut file: std::fs::File, state: Arc<Mutex<SimState>>, port: Arc<Port>) {
    let mut line = Vec::new();
    let mut body: Option<Vec<u8>> = None;
    let mut buf = [0u8; 256];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        port.pace(n);
        port.bytes_in
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        for &b in &buf[..n] {
            if let Some(text) = body.as_mut() {
                match b {
                    0x1A => {
                        let text = String::from_utf8_lossy(&std::mem::take(text)).into_owned();
                        body = None;
                        finish_send(&state, &port, &text);
                    }
                    0x1B => {
                        body = None;
                        say(&port, "OK");
                    }
                    _ => text.push(b),
                }
                continue;
            }
            if state.lock().unwrap().echo {
                port.write(&[b]);
            }
            match b {
                b'\r' => {
                    let command = String::from_utf8_lossy(&std::mem::take(&mut line))
                        .trim()
                        .to_string();
                    if command.is_empty() {
                        continue;
                    }
                    if command_line(&command, &state, &port) {
                        body = Some(Vec::new());
                    }
                }
                b'\n' => {}
                _ => line.push(b),
            }
        }
    }
}

/// Runs one command line; `true` when it opened a message body (`> ` prompt).
fn command_line(cmd: &str, state: &Arc<Mutex<SimState>>, port: &Arc<Port>) -> bool {
    let upper = cmd.to_ascii_uppercase();
    let mut st = state.lock().unwrap();
    st.commands.push(cmd.to_string());
    let quoted = |s: &str| s.split('"').nth(1).unwrap_or_default().to_string();
    let locked = st.pin.is_some() && !st.unlocked;
    let needs_sim =
        upper.starts_with("AT+CMG") || upper.starts_with("AT+CREG") || upper.starts_with("ATD");
    if locked && needs_sim {
        drop(st);
        say(port, "+CME ERROR: SIM PIN required");
        return false;
    }
    let reply: Vec<String> = match upper.as_str() {
        "AT" if st.first_probe_held => {
            st.first_probe_held = false;
            st.probe_held = true;
            return false;
        }
        "AT" if st.probe_held => {
            st.probe_held = false;
            drop(st);
            say(port, "OK");
            say(port, "OK");
            return false;
        }
        "AT" => vec![],
        "ATE0" => {
            st.echo = false;
            vec![]
        }
        "AT+CPIN?" => vec![format!(
            "+CPIN: {}",
            if locked { "SIM PIN" } else { "READY" }
        )],
        "AT+CREG?" => vec![format!("+CREG: 0,{}", st.creg)],
        "AT+CEREG?" => vec![format!("+CEREG: 0,{}", st.creg)],
        "AT+CSQ" => vec![format!("+CSQ: {},99", st.rssi)],
        "ATH" => vec![],
        "ATA" => {
            if let Callee::Presses(key) = st.callee {
                press_later(port, key, st.quectel);
            }
            vec![]
        }
        _ if upper.starts_with("AT+CPIN=") => {
            if Some(quoted(cmd)) == st.pin {
                st.unlocked = true;
                vec![]
            } else {
                drop(st);
                say(port, "+CME ERROR: incorrect password");
                return false;
            }
        }
        _ if upper.starts_with("AT+CMGF=") => {
            st.text_mode = upper.ends_with('1');
            vec![]
        }
        _ if upper.starts_with("AT+CSCS=") => {
            st.charset = quoted(cmd);
            vec![]
        }
        _ if upper.starts_with("AT+CSMP=") => {
            st.dcs = upper.rsplit(',').next().unwrap().parse().unwrap();
            vec![]
        }
        _ if [
            "AT+CMEE=", "AT+CSDH=", "AT+CNMI=", "AT+CLIP=", "AT+COLP=", "AT+DDET=",
        ]
        .iter()
        .any(|p| upper.starts_with(p)) =>
        {
            vec![]
        }
        _ if upper.starts_with("AT+CMGL") => st
            .storage
            .iter()
            .flat_map(|(i, (from, text))| {
                [
                    format!(
                        "+CMGL: {i},\"REC UNREAD\",\"{from}\",,\"26/11/24,10:00:00+04\",145,{}",
                        text.len()
                    ),
                    text.clone(),
                ]
            })
            .collect(),
        _ if upper.starts_with("AT+CMGR=") => {
            let index: u32 = upper[8..].parse().unwrap();
            match st.storage.get(&index) {
                Some((from, text)) => {
                    let gsm = text.is_ascii();
                    let (dcs, body) = if gsm {
                        (0, text.clone())
                    } else {
                        (8, text.encode_utf16().map(|u| format!("{u:04X}")).collect())
                    };
                    vec![
                        format!(
                            "+CMGR: \"REC UNREAD\",\"{from}\",,\"26/11/24,10:00:00+04\",145,4,0,{dcs},\"+491710760000\",145,{}",
                            text.chars().count()
                        ),
                        body,
                    ]
                }
                None => vec!["+CMGR: 0,,0".to_string()],
            }
        }
        _ if upper.starts_with("AT+CMGD=") => {
            let index: u32 = upper[8..].parse().unwrap();
            st.storage.remove(&index);
            vec![]
        }
        _ if upper.starts_with("AT+CMGS=") => {
            st.announced = (!st.text_mode).then(|| upper[8..].parse().unwrap());
            if st.text_mode {
                let mut to = quoted(cmd);
                if st.charset == "UCS2" {
                    to = utf16be(&unhex(&to));
                }
                st.commands.push(format!("to:{to}"));
            }
            drop(st);
            port.write(b"\r\n> ");
            return true;
        }
        "AT+QTONEDET=1" => {
            st.quectel = true;
            vec![]
        }
        _ if upper.starts_with("AT+CTTS=") || upper.starts_with("AT+QTTS=") => {
            st.spoken.push(quoted(cmd));
            vec![]
        }
        _ if upper.starts_with("ATD") => {
            let number = cmd[3..].trim_end_matches(';').to_string();
            st.dialled.push(number.clone());
            let (callee, quectel) = (st.callee, st.quectel);
            drop(st);
            let port = port.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                match callee {
                    Callee::NoAnswer => say(&port, "NO ANSWER"),
                    Callee::Presses(_) => {
                        say(&port, &format!("+COLP: \"{number}\",145"));
                        say(&port, "OK");
                    }
                }
                if let Callee::Presses(key) = callee {
                    press_later(&port, key, quectel);
                }
            });
            return false;
        }
        _ => {
            drop(st);
            say(port, "ERROR");
            return false;
        }
    };
    let after = match st.with_ok_to.take() {
        Some((command, lines)) if command == upper => lines,
        other => {
            st.with_ok_to = other;
            Vec::new()
        }
    };
    drop(st);
    for l in reply {
        say(port, &l);
    }
    let said: String = std::iter::once("OK")
        .chain(after.iter().map(String::as_str))
        .map(framed)
        .collect();
    port.write(said.as_bytes());
    false
}

/// The person on the line presses `key` once the message had time to be spoken.
fn press_later(port: &Arc<Port>, key: char, quectel: bool) {
    let port = port.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        if quectel {
            say(&port, &format!("+QTONEDET: {}", key as u32));
        } else {
            say(&port, &format!("+DTMF: {key}"));
        }
    });
}

/// The body of `AT+CMGS` ended with Ctrl-Z: decode it per the current mode and answer.
fn finish_send(state: &Arc<Mutex<SimState>>, port: &Arc<Port>, body: &str) {
    let mut st = state.lock().unwrap();
    if let Some(code) = st.cms_errors.pop_front() {
        drop(st);
        say(port, &format!("+CMS ERROR: {code}"));
        return;
    }
    let mr = st.sent.len() + 1;
    if st.text_mode {
        let to = st
            .commands
            .iter()
            .rev()
            .find_map(|c| c.strip_prefix("to:"))
            .unwrap_or_default()
            .to_string();
        let (text, mode) = if st.charset == "UCS2" {
            assert_eq!(st.dcs, 8, "UCS2 text needs +CSMP with DCS 8");
            (utf16be(&unhex(body)), "text-ucs2")
        } else {
            (body.to_string(), "text-gsm")
        };
        st.sent.push(SentSms {
            to,
            text,
            mode: mode.into(),
        });
    } else {
        let (to, text, concat, tpdu_len) = decode_submit(body.trim());
        if st.announced != Some(tpdu_len) {
            st.pdu_length_errors += 1;
        }
        match concat {
            None => st.sent.push(SentSms {
                to,
                text,
                mode: "pdu 1".into(),
            }),
            Some((reference, total, seq)) => {
                let entry = st
                    .parts
                    .entry(reference)
                    .or_insert((total, BTreeMap::new()));
                entry.1.insert(seq, text);
                if entry.1.len() == usize::from(entry.0) {
                    let (total, parts) = st.parts.remove(&reference).unwrap();
                    st.sent.push(SentSms {
                        to,
                        text: parts.into_values().collect(),
                        mode: format!("pdu {total}"),
                    });
                }
            }
        }
    }
    drop(st);
    say(port, &format!("+CMGS: {mr}"));
    say(port, "OK");
}
