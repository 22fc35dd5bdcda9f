//! An ESPA 4.4.4 station on the far end of a pseudo-terminal, written from the standard (not
//! from the driver): as the paging system it answers a selection of its address (`2 ENQ`)
//! with ACK, checks each block's BCC (XOR from after SOH through ETX), ACKs or NAKs it, and
//! can be told to NAK or stay silent to test retransmission; as a panel it selects station
//! `1`, sends a "call to pager" block and ends with EOT.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SOH: u8 = 0x01;
const STX: u8 = 0x02;
const ETX: u8 = 0x03;
const EOT: u8 = 0x04;
const ENQ: u8 = 0x05;
const ACK: u8 = 0x06;
const NAK: u8 = 0x15;
const RS: u8 = 0x1E;
const US: u8 = 0x1F;

#[derive(Clone, Debug)]
pub struct Block {
    pub header: char,
    pub records: Vec<(char, String)>,
    /// The whole block as it came over the line, SOH to BCC.
    pub raw: Vec<u8>,
}

impl Block {
    pub fn record(&self, id: char) -> Option<&str> {
        self.records
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
pub struct PeerState {
    pub blocks: Vec<Block>,
    /// Blocks to refuse with NAK, then to ignore, before accepting.
    pub nak_next: u32,
    pub ignore_next: u32,
    pub naks_sent: u32,
    pub ignored: u32,
    pub bad_bcc: u32,
    pub eots: u32,
}

pub struct EspaPeer {
    pub state: Arc<Mutex<PeerState>>,
    port: Arc<Mutex<std::fs::File>>,
    /// Microseconds per character on the simulated line (0: unpaced).
    char_us: u64,
    /// ACK / NAK bytes while this station is the sender (panel role).
    answers: Mutex<mpsc::Receiver<u8>>,
}

fn bcc(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |a, b| a ^ b)
}

impl EspaPeer {
    /// The paging system at address `2`.
    pub fn start(path: &Path) -> EspaPeer {
        Self::start_paced(path, 0)
    }

    /// A peer whose line runs at `baud` (7E1: 10 bits a character; 0: unpaced).
    pub fn start_paced(path: &Path, baud: u64) -> EspaPeer {
        let char_us = 10_000_000u64.checked_div(baud).unwrap_or(0);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let port = Arc::new(Mutex::new(file.try_clone().unwrap()));
        let state = Arc::new(Mutex::new(PeerState::default()));
        let (tx, rx) = mpsc::channel();
        let (s, p) = (state.clone(), port.clone());
        std::thread::spawn(move || serve(file, s, p, tx, char_us));
        EspaPeer {
            state,
            port,
            char_us,
            answers: Mutex::new(rx),
        }
    }

    fn write(&self, bytes: &[u8]) {
        pace(self.char_us, bytes.len());
        let mut p = self.port.lock().unwrap();
        p.write_all(bytes).unwrap();
        p.flush().unwrap();
    }

    fn answer(&self) -> Option<u8> {
        self.answers
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(5))
            .ok()
    }

    /// As a panel: selects station `1` and sends one call; `true` when it was acknowledged.
    pub fn call(&self, address: &str, message: &str, priority: char) -> bool {
        self.write(b"1");
        self.write(&[ENQ]);
        if self.answer() != Some(ACK) {
            return false;
        }
        let mut block = vec![SOH, b'1', STX, b'1', US];
        block.extend(address.bytes());
        block.extend([RS, b'2', US]);
        block.extend(message.bytes());
        block.extend([RS, b'6', US, priority as u8, ETX]);
        let check = bcc(&block[1..]);
        block.push(check);
        self.write(&block);
        let acked = self.answer() == Some(ACK);
        self.write(&[EOT]);
        acked
    }

    pub fn wait_for(&self, limit: Duration, what: &str, done: impl Fn(&PeerState) -> bool) {
        let started = Instant::now();
        loop {
            if done(&self.state.lock().unwrap()) {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "ESPA peer: {what} did not happen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits as long as `n` characters take on the line.
fn pace(char_us: u64, n: usize) {
    if char_us > 0 {
        std::thread::sleep(Duration::from_micros(char_us * n as u64));
    }
}

fn serve(
    mut file: std::fs::File,
    state: Arc<Mutex<PeerState>>,
    port: Arc<Mutex<std::fs::File>>,
    answers: mpsc::Sender<u8>,
    char_us: u64,
) {
    let reply = |b: u8| {
        pace(char_us, 1);
        let mut p = port.lock().unwrap();
        let _ = p.write_all(&[b]);
        let _ = p.flush();
    };
    let mut previous = 0u8;
    let mut block: Option<Vec<u8>> = None;
    let mut awaiting_bcc = false;
    let mut buf = [0u8; 256];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pace(char_us, n);
        for &raw in &buf[..n] {
            let b = raw & 0x7F;
            if awaiting_bcc {
                awaiting_bcc = false;
                let body = block.take().unwrap();
                let mut st = state.lock().unwrap();
                if bcc(&body[1..]) != b {
                    st.bad_bcc += 1;
                    st.naks_sent += 1;
                    drop(st);
                    reply(NAK);
                } else if st.nak_next > 0 {
                    st.nak_next -= 1;
                    st.naks_sent += 1;
                    drop(st);
                    reply(NAK);
                } else if st.ignore_next > 0 {
                    st.ignore_next -= 1;
                    st.ignored += 1;
                } else {
                    let inner = &body[1..body.len() - 1];
                    let header = char::from(inner[0]);
                    assert_eq!(inner[1], STX, "STX after the header");
                    let records = inner[2..]
                        .split(|c| *c == RS)
                        .map(|r| {
                            assert_eq!(r[1], US, "a record is <id> US <data>");
                            (
                                char::from(r[0]),
                                String::from_utf8(r[2..].to_vec()).unwrap(),
                            )
                        })
                        .collect();
                    let mut raw_block = body.clone();
                    raw_block.push(b);
                    st.blocks.push(Block {
                        header,
                        records,
                        raw: raw_block,
                    });
                    drop(st);
                    reply(ACK);
                }
                continue;
            }
            if let Some(body) = block.as_mut() {
                body.push(b);
                if b == ETX {
                    awaiting_bcc = true;
                }
                continue;
            }
            match b {
                SOH => block = Some(vec![SOH]),
                ENQ if previous == b'2' => reply(ACK),
                ACK | NAK => {
                    let _ = answers.send(b);
                }
                EOT => state.lock().unwrap().eots += 1,
                _ => {}
            }
            previous = b;
        }
    }
}
