//! GSM modem driver (AT commands, 3GPP TS 27.007 and 27.005). One task owns the serial port:
//! it runs the start-up sequence (echo off, verbose errors, SIM PIN, registration, signal),
//! sends short messages and places voice calls one at a time, reports new messages and
//! incoming calls, and reopens the port after the device disappears (USB modems
//! re-enumerate). What a message or a key press means is decided by its callers.

use super::serial::{self, BoxedLine, LineSettings};
use super::sms;
pub use crate::model::hardware::Profile;
use crate::model::health::ModemStatus;
use crate::runtime::clock::SharedClock;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

/// A command's answer time, unless it talks to the network.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Sending a message waits for the service centre.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);
const CTRL_Z: u8 = 0x1A;
/// Silence that ends the wait for a late answer after a command timed out.
const QUIET: Duration = Duration::from_millis(300);
/// How often registration is read again while the modem has none.
const SEARCHING_REFRESH: Duration = Duration::from_secs(5);
/// Longest spoken text, in characters.
const SPEECH_MAX: usize = 400;

#[derive(Clone, Debug)]
pub struct ModemSettings {
    pub device: String,
    pub line: LineSettings,
    pub pin: Option<String>,
    pub profile: Profile,
    /// How long a dialled call may ring before it counts as not answered.
    pub ring_timeout: Duration,
    /// How long a key press is awaited after the message was spoken.
    pub key_timeout: Duration,
    /// How often registration and signal are read again.
    pub refresh_every: Duration,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum GsmError {
    #[error("modem unavailable: {0}")]
    Unavailable(String),
    #[error("the modem did not answer within {0:?}")]
    Timeout(Duration),
    #[error("+CMS ERROR: {0}")]
    Cms(String),
    #[error("+CME ERROR: {0}")]
    Cme(String),
    #[error("the modem answered ERROR to {0}")]
    Error(String),
    /// A call ended without being answered: `NO CARRIER`, `BUSY`, `NO ANSWER`.
    #[error("call not answered: {0}")]
    NotAnswered(String),
    #[error("{0}")]
    Invalid(String),
    #[error("serial port: {0}")]
    Port(String),
}

impl GsmError {
    /// Whether another attempt may succeed: everything but a refused message or number.
    pub fn retryable(&self) -> bool {
        match self {
            GsmError::Cms(code) => match code.trim().parse::<u16>() {
                Ok(n) => sms::cms_retryable(n),
                Err(_) => sms::cms_text_retryable(code),
            },
            GsmError::Invalid(_) => false,
            _ => true,
        }
    }
}

/// Something that arrived from the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    /// A short message at storage `index`: delete it with [`Modem::delete_sms`] once acted on.
    Sms {
        index: u32,
        from: String,
        text: String,
    },
    /// A call ringing from `from`: answer it with [`Modem::answer`] or [`Modem::hang_up`].
    Call { from: String },
}

/// A request to the driver, answered on its `reply`.
pub enum Job {
    Sms {
        to: String,
        text: String,
        reply: oneshot::Sender<Result<u32, GsmError>>,
    },
    Call {
        to: String,
        speech: String,
        /// Speech commands for this call instead of the modem's profile.
        engine: Option<Profile>,
        reply: oneshot::Sender<Result<Option<char>, GsmError>>,
    },
    Answer {
        speech: String,
        reply: oneshot::Sender<Result<Option<char>, GsmError>>,
    },
    HangUp,
    Delete(u32),
}

impl Job {
    fn refuse(self, e: GsmError) {
        match self {
            Job::Sms { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Job::Call { reply, .. } | Job::Answer { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Job::HangUp | Job::Delete(_) => {}
        }
    }
}

/// The handle of a running modem driver.
#[derive(Clone)]
pub struct Modem {
    jobs: mpsc::Sender<Job>,
    status: watch::Receiver<ModemStatus>,
}

impl Modem {
    /// The modem's handle, the receiver of inbound messages and calls, and the driver, a worker
    /// for the supervisor to run.
    pub fn start(
        settings: ModemSettings,
        clock: SharedClock,
    ) -> (Modem, mpsc::Receiver<Inbound>, ModemDriver) {
        let (jobs, job_rx) = mpsc::channel(64);
        let (inbound_tx, inbound) = mpsc::channel(64);
        let (status_tx, status) = watch::channel(ModemStatus {
            device: settings.device.clone(),
            profile: format!("{:?}", settings.profile).to_lowercase(),
            sim: "unknown".into(),
            registration: "unknown".into(),
            ..ModemStatus::default()
        });
        let line = ModemLine {
            settings,
            status: status_tx,
            inbound: inbound_tx,
            clock,
        };
        let driver = serial::LineDriver::new(line, job_rx);
        (Modem { jobs, status }, inbound, driver)
    }

    pub fn status(&self) -> ModemStatus {
        self.status.borrow().clone()
    }

    async fn ask<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, GsmError>>) -> Job,
    ) -> Result<T, GsmError> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(job(tx))
            .await
            .map_err(|_| GsmError::Unavailable("the modem driver stopped".into()))?;
        rx.await
            .map_err(|_| GsmError::Unavailable("the modem driver stopped".into()))?
    }

    /// Sends `text` to `to` (several messages when it is long); the last message reference.
    pub async fn send_sms(&self, to: &str, text: &str) -> Result<u32, GsmError> {
        let (to, text) = (to.to_string(), text.to_string());
        self.ask(|reply| Job::Sms { to, text, reply }).await
    }

    /// Calls `to`, speaks `speech` once answered and waits for a key: the key pressed, or
    /// `None` when the call ended or timed out without one.
    /// `engine` overrides the modem's profile for the speech commands of this call.
    pub async fn call(
        &self,
        to: &str,
        speech: &str,
        engine: Option<Profile>,
    ) -> Result<Option<char>, GsmError> {
        let (to, speech) = (to.to_string(), speech.to_string());
        self.ask(|reply| Job::Call {
            to,
            speech,
            engine,
            reply,
        })
        .await
    }

    /// Answers the ringing call, speaks `speech` and waits for a key, then hangs up.
    pub async fn answer(&self, speech: &str) -> Result<Option<char>, GsmError> {
        let speech = speech.to_string();
        self.ask(|reply| Job::Answer { speech, reply }).await
    }

    pub async fn hang_up(&self) {
        let _ = self.jobs.send(Job::HangUp).await;
    }

    pub async fn delete_sms(&self, index: u32) {
        let _ = self.jobs.send(Job::Delete(index)).await;
    }
}

/// The modem's side of its line: its settings, the status its handle shows, and where inbound
/// messages and calls go.
pub struct ModemLine {
    settings: ModemSettings,
    status: watch::Sender<ModemStatus>,
    inbound: mpsc::Sender<Inbound>,
    clock: SharedClock,
}

/// The modem's driver, a supervised worker.
pub type ModemDriver = serial::LineDriver<ModemLine>;

impl serial::LineProtocol for ModemLine {
    type Job = Job;
    type Error = GsmError;
    const WORKER: &'static str = "gsm-modem";
    const DEVICE: &'static str = "GSM modem";

    fn device(&self) -> &str {
        &self.settings.device
    }

    fn line(&self) -> LineSettings {
        self.settings.line
    }

    async fn serve(
        &mut self,
        port: BoxedLine,
        jobs: &mut mpsc::Receiver<Job>,
    ) -> Result<(), GsmError> {
        let mut session = Session {
            port,
            buf: Vec::new(),
            urcs: VecDeque::new(),
            settings: &self.settings,
            status: &self.status,
            inbound: &self.inbound,
            clock: &self.clock,
            reference: 0,
            caller: None,
        };
        session.serve(jobs).await
    }

    fn connected(&self) -> bool {
        self.status.borrow().connected
    }

    fn port_error(e: std::io::Error) -> GsmError {
        GsmError::Port(e.to_string())
    }

    fn down(&mut self, why: &str) {
        self.status.send_modify(|s| {
            s.connected = false;
            s.last_error = Some(why.to_string());
        });
    }

    fn refuse(job: Job, why: &str) {
        job.refuse(GsmError::Unavailable(why.to_string()));
    }
}

/// A final result code ends a command's answer.
enum Final {
    Ok,
    Failed(GsmError),
}

fn final_code(line: &str, command: &str) -> Option<Final> {
    let call = |s: &str| Some(Final::Failed(GsmError::NotAnswered(s.into())));
    match line {
        "OK" => Some(Final::Ok),
        "ERROR" => Some(Final::Failed(GsmError::Error(command.into()))),
        "NO CARRIER" | "BUSY" | "NO ANSWER" | "NO DIALTONE" => call(line),
        _ => {
            if let Some(code) = line.strip_prefix("+CMS ERROR:") {
                Some(Final::Failed(GsmError::Cms(code.trim().into())))
            } else {
                line.strip_prefix("+CME ERROR:")
                    .map(|code| Final::Failed(GsmError::Cme(code.trim().into())))
            }
        }
    }
}

/// Lines the modem sends on its own, whenever they happen.
fn unsolicited(line: &str) -> bool {
    [
        "+CMTI:",
        "RING",
        "+CRING:",
        "+CLIP:",
        "+DTMF:",
        "+QTONEDET:",
    ]
    .iter()
    .any(|p| line.starts_with(p))
}

/// The fields of `+XXX: a,"b",c` with quotes removed (commas inside quotes kept).
fn fields(line: &str) -> Vec<String> {
    let rest = line.split_once(':').map_or(line, |(_, r)| r).trim();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in rest.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|f| f.trim().to_string()).collect()
}

/// The key of a key-press line: `+DTMF: 4` or Quectel's `+QTONEDET: 52` (ASCII code).
fn key_of(line: &str) -> Option<char> {
    if line.starts_with("+DTMF:") {
        return fields(line).first()?.chars().next();
    }
    if line.starts_with("+QTONEDET:") {
        let code: u8 = fields(line).first()?.parse().ok()?;
        return Some(char::from(code));
    }
    None
}

/// Text a modem can speak: no quotes or control characters, bounded.
fn speakable(text: &str) -> String {
    text.chars()
        .map(|c| if c == '"' || c.is_control() { ' ' } else { c })
        .take(SPEECH_MAX)
        .collect()
}

fn registration_of(stat: &str) -> &'static str {
    match stat {
        "1" => "home",
        "5" => "roaming",
        "2" => "searching",
        "3" => "denied",
        "0" => "not registered",
        _ => "unknown",
    }
}

/// The number as the modem dials it: digits with an optional leading `+`, the separators
/// people write (spaces, dashes, dots, slashes, parentheses) removed.
fn dialable(number: &str) -> Result<String, GsmError> {
    let cleaned: String = number
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '/' | '(' | ')'))
        .collect();
    let digits = cleaned.strip_prefix('+').unwrap_or(&cleaned);
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GsmError::Invalid(format!(
            "phone number {number:?} must be digits with an optional leading +"
        )));
    }
    Ok(cleaned)
}

struct Session<'a> {
    port: BoxedLine,
    buf: Vec<u8>,
    urcs: VecDeque<String>,
    settings: &'a ModemSettings,
    status: &'a watch::Sender<ModemStatus>,
    inbound: &'a mpsc::Sender<Inbound>,
    clock: &'a SharedClock,
    /// Concatenated message reference, per message.
    reference: u8,
    /// The number of the call ringing now, once reported.
    caller: Option<String>,
}

impl Session<'_> {
    /// Reads what the port has; a closed port is an error. Cancel-safe: bytes are only
    /// taken once read.
    async fn read_more(&mut self) -> Result<(), GsmError> {
        let mut chunk = [0u8; 512];
        let n = self
            .port
            .read(&mut chunk)
            .await
            .map_err(|e| GsmError::Port(e.to_string()))?;
        if n == 0 {
            return Err(GsmError::Port("the device closed the line".into()));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// The next complete, non-empty line in the buffer.
    fn take_line(&mut self) -> Option<String> {
        loop {
            let end = self.buf.iter().position(|b| *b == b'\n')?;
            let raw: Vec<u8> = self.buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&raw).trim().to_string();
            if !line.is_empty() {
                return Some(line);
            }
        }
    }

    async fn next_line(&mut self) -> Result<String, GsmError> {
        loop {
            if let Some(line) = self.take_line() {
                return Ok(line);
            }
            self.read_more().await?;
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), GsmError> {
        self.port
            .write_all(bytes)
            .await
            .map_err(|e| GsmError::Port(e.to_string()))?;
        self.port
            .flush()
            .await
            .map_err(|e| GsmError::Port(e.to_string()))
    }

    /// Reads an answer up to its final result code; the information lines before it.
    async fn answer_of(
        &mut self,
        command: &str,
        within: Duration,
    ) -> Result<Vec<String>, GsmError> {
        let collect = async {
            let mut lines = Vec::new();
            loop {
                let line = self.next_line().await?;
                if line == command {
                    continue; // echo, before ATE0 took effect
                }
                match final_code(&line, command) {
                    Some(Final::Ok) => return Ok(lines),
                    Some(Final::Failed(e)) => return Err(e),
                    None if unsolicited(&line) => self.urcs.push_back(line),
                    None => lines.push(line),
                }
            }
        };
        tokio::time::timeout(within, collect)
            .await
            .map_err(|_| GsmError::Timeout(within))?
    }

    async fn command_within(
        &mut self,
        command: &str,
        within: Duration,
    ) -> Result<Vec<String>, GsmError> {
        self.write(format!("{command}\r").as_bytes()).await?;
        let answer = self.answer_of(command, within).await;
        if matches!(answer, Err(GsmError::Timeout(_))) {
            self.settle().await?;
        }
        answer
    }

    /// Reads until the line is quiet (at most `COMMAND_TIMEOUT`), keeping unsolicited lines:
    /// the late answer to a command that timed out would otherwise be taken for the next
    /// command's, and every answer after it would be off by one.
    async fn settle(&mut self) -> Result<(), GsmError> {
        let drain = async {
            loop {
                while let Some(line) = self.take_line() {
                    if unsolicited(&line) {
                        self.urcs.push_back(line);
                    }
                }
                match tokio::time::timeout(QUIET, self.read_more()).await {
                    Ok(read) => read?,
                    Err(_) => return Ok(()),
                }
            }
        };
        tokio::time::timeout(COMMAND_TIMEOUT, drain)
            .await
            .unwrap_or(Ok(()))
    }

    /// Key presses left over from an earlier call must not answer this one.
    fn forget_keys(&mut self) {
        self.urcs.retain(|l| key_of(l).is_none());
    }

    async fn command(&mut self, command: &str) -> Result<Vec<String>, GsmError> {
        self.command_within(command, COMMAND_TIMEOUT).await
    }

    /// `AT+CMGS=...`, the `> ` prompt, the body and Ctrl-Z; the message reference.
    async fn submit(&mut self, command: &str, body: &str) -> Result<u32, GsmError> {
        self.write(format!("{command}\r").as_bytes()).await?;
        let prompt = async {
            loop {
                while matches!(self.buf.first(), Some(b'\r' | b'\n')) {
                    self.buf.remove(0);
                }
                if self.buf.first() == Some(&b'>') {
                    let skip = if self.buf.get(1) == Some(&b' ') { 2 } else { 1 };
                    self.buf.drain(..skip.min(self.buf.len()));
                    return Ok(());
                }
                if let Some(line) = self.take_line() {
                    if let Some(Final::Failed(e)) = final_code(&line, command) {
                        return Err(e);
                    }
                    if unsolicited(&line) {
                        self.urcs.push_back(line);
                    }
                    continue;
                }
                self.read_more().await?;
            }
        };
        tokio::time::timeout(COMMAND_TIMEOUT, prompt)
            .await
            .map_err(|_| GsmError::Timeout(COMMAND_TIMEOUT))??;
        let mut bytes = body.as_bytes().to_vec();
        bytes.push(CTRL_Z);
        self.write(&bytes).await?;
        let lines = self.answer_of(command, SEND_TIMEOUT).await?;
        Ok(lines
            .iter()
            .find(|l| l.starts_with("+CMGS:"))
            .and_then(|l| fields(l).first()?.parse().ok())
            .unwrap_or(0))
    }

    async fn serve(&mut self, jobs: &mut mpsc::Receiver<Job>) -> Result<(), GsmError> {
        self.start_up().await?;
        self.sweep().await?;
        let mut refresh_at = tokio::time::Instant::now() + self.refresh_period();
        loop {
            // Lines read together with a command's final code are in the buffer already: a
            // call or an SMS notice among them must not wait for the next bytes to arrive.
            while let Some(line) = self.take_line() {
                self.urcs.push_back(line);
            }
            self.handle_urcs().await?;
            tokio::select! {
                job = jobs.recv() => match job {
                    Some(job) => self.run(job).await?,
                    None => return Ok(()),
                },
                read = self.read_more() => read?,
                _ = tokio::time::sleep_until(refresh_at) => {
                    self.refresh().await?;
                    refresh_at = tokio::time::Instant::now() + self.refresh_period();
                }
            }
        }
    }

    /// Registration is looked at every `refresh_every`, every 5 s while there is none (so a
    /// modem that finds the network is ready soon after).
    fn refresh_period(&self) -> Duration {
        if self.status.borrow().registered() {
            self.settings.refresh_every
        } else {
            SEARCHING_REFRESH.min(self.settings.refresh_every)
        }
    }

    async fn start_up(&mut self) -> Result<(), GsmError> {
        let mut alive = Err(GsmError::Timeout(COMMAND_TIMEOUT));
        let mut probes = 0;
        while probes < 3 && alive.is_err() {
            probes += 1;
            alive = self.command_within("AT", Duration::from_secs(2)).await;
        }
        alive?;
        if probes > 1 {
            // The timed-out probe's answer may have come with this one's.
            self.settle().await?;
        }
        self.command("ATE0").await?;
        self.command("AT+CMEE=2").await?;
        self.unlock_sim().await?;
        for setup in [
            "AT+CMGF=1",
            "AT+CSCS=\"GSM\"",
            "AT+CSDH=1",
            "AT+CNMI=2,1,0,0,0",
            "AT+CLIP=1",
            "AT+COLP=1",
        ] {
            self.command(setup).await?;
        }
        let keys = match self.settings.profile {
            Profile::Simcom => Some("AT+DDET=1"),
            Profile::Quectel => Some("AT+QTONEDET=1"),
            Profile::Generic => None,
        };
        if let Some(keys) = keys
            && let Err(e) = self.command(keys).await
        {
            tracing::warn!(error = %e, "the modem refused key detection; calls cannot be acknowledged");
        }
        self.refresh().await?;
        self.status.send_modify(|s| {
            s.connected = true;
            s.last_error = None;
        });
        tracing::info!(device = %self.settings.device, "GSM modem ready");
        Ok(())
    }

    async fn unlock_sim(&mut self) -> Result<(), GsmError> {
        let state = match self.command("AT+CPIN?").await {
            Ok(lines) => lines
                .iter()
                .find(|l| l.starts_with("+CPIN:"))
                .map(|l| l["+CPIN:".len()..].trim().to_string())
                .unwrap_or_default(),
            Err(GsmError::Cme(e)) => {
                self.status.send_modify(|s| s.sim = "absent".into());
                return Err(GsmError::Unavailable(format!("SIM: {e}")));
            }
            Err(e) => return Err(e),
        };
        match state.as_str() {
            "READY" => {}
            "SIM PIN" => {
                let Some(pin) = self.settings.pin.clone().filter(|p| !p.is_empty()) else {
                    self.status.send_modify(|s| s.sim = "pin required".into());
                    return Err(GsmError::Unavailable(
                        "the SIM wants a PIN and hardware.gsm.pin is not set".into(),
                    ));
                };
                if let Err(e) = self.command(&format!("AT+CPIN=\"{pin}\"")).await {
                    self.status.send_modify(|s| s.sim = "pin required".into());
                    return Err(GsmError::Unavailable(format!(
                        "the SIM refused the PIN: {e}"
                    )));
                }
            }
            "SIM PUK" => {
                self.status.send_modify(|s| s.sim = "puk required".into());
                return Err(GsmError::Unavailable(
                    "the SIM is locked (PUK required)".into(),
                ));
            }
            other => {
                self.status.send_modify(|s| s.sim = "unknown".into());
                return Err(GsmError::Unavailable(format!("SIM state {other:?}")));
            }
        }
        self.status.send_modify(|s| s.sim = "ready".into());
        Ok(())
    }

    /// Registration (`+CREG`, then `+CEREG` for LTE-only modems) and signal (`+CSQ`).
    async fn refresh(&mut self) -> Result<(), GsmError> {
        let mut registration = "unknown";
        for query in ["AT+CREG?", "AT+CEREG?"] {
            match self.command(query).await {
                Ok(lines) => {
                    if let Some(stat) = lines.iter().find(|l| l.starts_with('+')).map(|l| fields(l))
                    {
                        registration = registration_of(stat.get(1).map_or("", String::as_str));
                    }
                }
                Err(e) if matches!(e, GsmError::Port(_) | GsmError::Timeout(_)) => return Err(e),
                Err(_) => {}
            }
            if matches!(registration, "home" | "roaming") {
                break;
            }
        }
        let signal = match self.command("AT+CSQ").await {
            Ok(lines) => lines
                .iter()
                .find(|l| l.starts_with("+CSQ:"))
                .and_then(|l| fields(l).first()?.parse::<i32>().ok())
                .filter(|rssi| (0..=31).contains(rssi))
                .map(|rssi| -113 + 2 * rssi),
            Err(e) if matches!(e, GsmError::Port(_) | GsmError::Timeout(_)) => return Err(e),
            Err(_) => None,
        };
        self.status.send_modify(|s| {
            s.registration = registration.into();
            s.signal_dbm = signal;
        });
        Ok(())
    }

    /// Messages stored while nobody listened.
    async fn sweep(&mut self) -> Result<(), GsmError> {
        let lines = self.command_within("AT+CMGL=\"ALL\"", SEND_TIMEOUT).await?;
        let indexes: Vec<u32> = lines
            .iter()
            .filter(|l| l.starts_with("+CMGL:"))
            .filter_map(|l| fields(l).first()?.parse().ok())
            .collect();
        for index in indexes {
            self.read_message(index).await?;
        }
        Ok(())
    }

    async fn read_message(&mut self, index: u32) -> Result<(), GsmError> {
        let lines = match self.command(&format!("AT+CMGR={index}")).await {
            Ok(lines) => lines,
            Err(e @ (GsmError::Port(_) | GsmError::Timeout(_))) => return Err(e),
            Err(e) => {
                tracing::warn!(index, error = %e, "cannot read a stored message");
                return Ok(());
            }
        };
        let Some(at) = lines.iter().position(|l| l.starts_with("+CMGR:")) else {
            return Ok(());
        };
        let header = fields(&lines[at]);
        let from = header.get(1).cloned().unwrap_or_default();
        let dcs: u8 = header.get(7).and_then(|d| d.parse().ok()).unwrap_or(0);
        let raw = lines[at + 1..].join("\n");
        let text = if dcs & 0xCC == 0x08 {
            sms::from_ucs2_hex(&raw).unwrap_or(raw)
        } else {
            raw
        };
        self.status.send_modify(|s| s.sms_received += 1);
        let _ = self.inbound.send(Inbound::Sms { index, from, text }).await;
        Ok(())
    }

    async fn handle_urcs(&mut self) -> Result<(), GsmError> {
        while let Some(line) = self.urcs.pop_front() {
            if line.starts_with("+CMTI:") {
                if let Some(index) = fields(&line).get(1).and_then(|i| i.parse().ok()) {
                    self.read_message(index).await?;
                }
            } else if line.starts_with("+CLIP:") {
                let from = fields(&line).first().cloned().unwrap_or_default();
                if self.caller.as_deref() != Some(from.as_str()) {
                    self.caller = Some(from.clone());
                    let _ = self.inbound.send(Inbound::Call { from }).await;
                }
            } else if line == "NO CARRIER" {
                self.caller = None;
            }
        }
        Ok(())
    }

    async fn run(&mut self, job: Job) -> Result<(), GsmError> {
        match job {
            Job::Sms { to, text, reply } => {
                let sent = self.send_sms(&to, &text).await;
                if sent.is_ok() {
                    let now = self.clock.now();
                    self.status.send_modify(|s| {
                        s.sms_sent += 1;
                        s.last_sent_at = Some(now);
                    });
                }
                finish(sent, reply)
            }
            Job::Call {
                to,
                speech,
                engine,
                reply,
            } => {
                let outcome = self.call(&to, &speech, engine).await;
                self.status.send_modify(|s| s.calls += 1);
                finish(outcome, reply)
            }
            Job::Answer { speech, reply } => {
                self.forget_keys();
                let outcome = match self.command("ATA").await {
                    Ok(_) => self.converse(&speech, None).await,
                    Err(e) => Err(e),
                };
                self.caller = None;
                finish(outcome, reply)
            }
            Job::HangUp => {
                self.caller = None;
                passes(self.command("ATH").await)
            }
            Job::Delete(index) => passes(self.command(&format!("AT+CMGD={index}")).await),
        }
    }

    async fn send_sms(&mut self, to: &str, text: &str) -> Result<u32, GsmError> {
        let to = &dialable(to)?;
        match sms::fits_text_mode(text) {
            Some(sms::Encoding::Gsm7) => self.submit(&format!("AT+CMGS=\"{to}\""), text).await,
            Some(sms::Encoding::Ucs2) => {
                self.command("AT+CSCS=\"UCS2\"").await?;
                let mut sent = self.command("AT+CSMP=17,167,0,8").await.map(|_| 0);
                if sent.is_ok() {
                    let command = format!("AT+CMGS=\"{}\"", sms::ucs2_hex(to));
                    sent = self.submit(&command, &sms::ucs2_hex(text)).await;
                }
                let restored = self
                    .restore(&["AT+CSCS=\"GSM\"", "AT+CSMP=17,167,0,0"])
                    .await;
                restored.and(sent)
            }
            None => {
                self.reference = self.reference.wrapping_add(1);
                let pdus = sms::submit_pdus(to, text, self.reference).map_err(GsmError::Invalid)?;
                self.command("AT+CMGF=0").await?;
                let mut sent = Ok(0);
                for pdu in pdus {
                    sent = self
                        .submit(&format!("AT+CMGS={}", pdu.octets), &pdu.hex)
                        .await;
                    if sent.is_err() {
                        break;
                    }
                }
                let restored = self.restore(&["AT+CMGF=1"]).await;
                restored.and(sent)
            }
        }
    }

    /// Puts settings back after a message that changed them; only a lost port fails.
    async fn restore(&mut self, commands: &[&str]) -> Result<(), GsmError> {
        for c in commands {
            match self.command(c).await {
                Err(e @ GsmError::Port(_)) => return Err(e),
                Err(e) => tracing::warn!(command = c, error = %e, "modem setting not restored"),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    async fn call(
        &mut self,
        to: &str,
        speech: &str,
        engine: Option<Profile>,
    ) -> Result<Option<char>, GsmError> {
        let to = &dialable(to)?;
        self.forget_keys();
        // With +COLP=1 the dial's OK means the callee answered.
        self.command_within(&format!("ATD{to};"), self.settings.ring_timeout)
            .await?;
        let key = self.converse(speech, engine).await;
        let _ = self.command("ATH").await;
        key
    }

    /// Speaks to the connected party and waits for one key press.
    async fn converse(
        &mut self,
        speech: &str,
        engine: Option<Profile>,
    ) -> Result<Option<char>, GsmError> {
        let text = speakable(speech);
        let say = match engine.unwrap_or(self.settings.profile) {
            Profile::Simcom => Some(format!("AT+CTTS=2,\"{text}\"")),
            Profile::Quectel => Some(format!("AT+QTTS=2,\"{text}\"")),
            Profile::Generic => None,
        };
        if let Some(say) = say {
            self.command(&say).await?;
        }
        let within = self.settings.key_timeout;
        let wait = async {
            loop {
                // Other unsolicited lines (a new SMS, a second caller) stay for the main loop.
                if let Some(at) = self.urcs.iter().position(|l| key_of(l).is_some()) {
                    return Ok(self.urcs.remove(at).as_deref().and_then(key_of));
                }
                let line = self.next_line().await?;
                if line == "NO CARRIER" || line == "BUSY" {
                    return Ok(None);
                }
                self.urcs.push_back(line);
            }
        };
        match tokio::time::timeout(within, wait).await {
            Ok(key) => key,
            Err(_) => Ok(None),
        }
    }
}

fn finish<T>(
    outcome: Result<T, GsmError>,
    reply: oneshot::Sender<Result<T, GsmError>>,
) -> Result<(), GsmError> {
    let lost = match &outcome {
        Err(e @ GsmError::Port(_)) => Some(e.clone()),
        _ => None,
    };
    let _ = reply.send(outcome);
    lost.map_or(Ok(()), Err)
}

fn passes(outcome: Result<Vec<String>, GsmError>) -> Result<(), GsmError> {
    match outcome {
        Err(e @ GsmError::Port(_)) => Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "modem command failed");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_split_into_fields_and_keys() {
        assert_eq!(
            fields("+CMGR: \"REC UNREAD\",\"+4917\",,\"24/11/26,10:00:00+04\",145,4,0,8"),
            vec![
                "REC UNREAD",
                "+4917",
                "",
                "24/11/26,10:00:00+04",
                "145",
                "4",
                "0",
                "8"
            ]
        );
        assert_eq!(key_of("+DTMF: 4"), Some('4'));
        assert_eq!(key_of("+QTONEDET: 54"), Some('6'));
        assert_eq!(key_of("+CSQ: 20,99"), None);
        assert!(unsolicited("+CMTI: \"SM\",3"));
        assert!(!unsolicited("+CMGS: 4"));
    }

    #[test]
    fn errors_say_whether_to_try_again() {
        assert!(GsmError::Cms("38".into()).retryable());
        assert!(!GsmError::Cms("1".into()).retryable());
        assert!(!GsmError::Cms("operation not allowed".into()).retryable());
        assert!(GsmError::NotAnswered("NO CARRIER".into()).retryable());
        assert!(!GsmError::Invalid("x".into()).retryable());
        assert_eq!(dialable("+49 (170) 123-45").unwrap(), "+4917012345");
        assert!(dialable("+49 170 x").is_err());
        assert!(dialable("").is_err());
        assert_eq!(registration_of("5"), "roaming");
        assert_eq!(speakable("say \"hi\"\n"), "say  hi  ");
    }
}
