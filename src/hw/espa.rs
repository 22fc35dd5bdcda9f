//! ESPA 4.4.4 (serial data interface for paging equipment, on ISO 1745 basic mode). A data
//! block is `SOH <header> STX <records> ETX <BCC>`: records `<identifier> US <data>` separated
//! by RS, the BCC the XOR of every character after SOH up to and including ETX. A station with
//! a block selects its peer with `<address> ENQ`, sends once the peer ACKs, sends again on NAK
//! or silence, and ends with EOT. One task owns the line in both roles: pages go out as "call
//! to pager" blocks, and blocks that come in (a nurse-call or fire panel calling us) are
//! handed to the caller. The line is a serial port or a serial server (`tcp://host:port`).

use super::serial::{self, BoxedLine, LineSettings};
use crate::model::health::EspaStatus;
use crate::runtime::clock::SharedClock;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

pub const SOH: u8 = 0x01;
pub const STX: u8 = 0x02;
pub const ETX: u8 = 0x03;
pub const EOT: u8 = 0x04;
pub const ENQ: u8 = 0x05;
pub const ACK: u8 = 0x06;
pub const NAK: u8 = 0x15;
pub const RS: u8 = 0x1E;
pub const US: u8 = 0x1F;

/// Block header 1: call to pager.
pub const CALL_TO_PAGER: u8 = b'1';
/// Record identifiers.
pub const CALL_ADDRESS: u8 = b'1';
pub const DISPLAY_MESSAGE: u8 = b'2';
pub const PRIORITY: u8 = b'6';
/// Limits of the records this driver writes: call address and display message lengths.
pub const ADDRESS_MAX: usize = 16;
pub const MESSAGE_MAX: usize = 128;
/// How long an incoming transfer may pause before the line is taken back.
const RECEIVE_IDLE: Duration = Duration::from_secs(10);

/// Record 6: `1` normal, `2` high, `3` alarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    Normal,
    High,
    Alarm,
}

impl Priority {
    fn code(self) -> u8 {
        match self {
            Priority::Normal => b'1',
            Priority::High => b'2',
            Priority::Alarm => b'3',
        }
    }
}

/// The XOR of `bytes` (ISO 1745 block check).
pub fn bcc(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |acc, b| acc ^ b)
}

/// Text in the 7-bit character set: printable ASCII, German letters spelt out, anything
/// else `?`; control characters (which would end a record) become spaces.
pub fn seven_bit(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            ' '..='~' => out.push(c),
            'Ä' => out.push_str("Ae"),
            'Ö' => out.push_str("Oe"),
            'Ü' => out.push_str("Ue"),
            'ä' => out.push_str("ae"),
            'ö' => out.push_str("oe"),
            'ü' => out.push_str("ue"),
            'ß' => out.push_str("ss"),
            c if c.is_control() || c.is_whitespace() => out.push(' '),
            _ => out.push('?'),
        }
    }
    out
}

/// A complete data block with its BCC.
pub fn block(header: u8, records: &[(u8, &str)]) -> Vec<u8> {
    let mut b = vec![SOH, header, STX];
    for (i, (id, data)) in records.iter().enumerate() {
        if i > 0 {
            b.push(RS);
        }
        b.extend([*id, US]);
        b.extend(data.bytes());
    }
    b.push(ETX);
    let check = bcc(&b[1..]);
    b.push(check);
    b
}

/// One page: the pager's call address, the display message and the priority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub address: String,
    pub text: String,
    pub priority: Priority,
}

impl Page {
    /// The "call to pager" block, message in the 7-bit set and cut to the limit.
    pub fn block(&self) -> Result<Vec<u8>, EspaError> {
        let address = self.address.trim();
        if address.is_empty()
            || address.len() > ADDRESS_MAX
            || !address.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(EspaError::Invalid(format!(
                "call address {address:?} must be 1 to {ADDRESS_MAX} printable characters"
            )));
        }
        let text: String = seven_bit(&self.text).chars().take(MESSAGE_MAX).collect();
        let priority = [self.priority.code()];
        let priority = std::str::from_utf8(&priority).unwrap_or("1");
        Ok(block(
            CALL_TO_PAGER,
            &[
                (CALL_ADDRESS, address),
                (DISPLAY_MESSAGE, text.trim_end()),
                (PRIORITY, priority),
            ],
        ))
    }
}

/// A block received from the line: its header and records, by identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub header: char,
    pub records: Vec<(char, String)>,
}

impl Received {
    pub fn record(&self, id: char) -> Option<&str> {
        self.records
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads the records of a block from `header` to ETX (SOH already consumed, BCC checked by
/// the caller).
fn parse(body: &[u8]) -> Option<Received> {
    let (&header, rest) = body.split_first()?;
    let rest = rest.strip_prefix(&[STX])?.strip_suffix(&[ETX])?;
    let records = rest
        .split(|b| *b == RS)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (&id, data) = r.split_first()?;
            let data = data.strip_prefix(&[US]).unwrap_or(data);
            Some((char::from(id), String::from_utf8_lossy(data).into_owned()))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Received {
        header: char::from(header),
        records,
    })
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum EspaError {
    #[error("paging system unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Invalid(String),
    #[error("serial line: {0}")]
    Port(String),
}

impl EspaError {
    pub fn retryable(&self) -> bool {
        !matches!(self, EspaError::Invalid(_))
    }
}

#[derive(Clone, Debug)]
pub struct EspaSettings {
    pub device: String,
    pub line: LineSettings,
    /// Our station address (`1`, the telephone or computer system, by the standard's advice).
    pub address: u8,
    /// The paging system's address (`2`).
    pub peer: u8,
    /// How long to wait for an answer before sending again.
    pub reply_timeout: Duration,
    /// Transmissions of a select or a block before giving up.
    pub attempts: u32,
}

/// A page to send, answered on its `reply`.
pub struct PageJob {
    page: Page,
    reply: oneshot::Sender<Result<(), EspaError>>,
}

/// The handle of a running ESPA line driver.
#[derive(Clone)]
pub struct Pager {
    jobs: mpsc::Sender<PageJob>,
    status: watch::Receiver<EspaStatus>,
}

impl Pager {
    /// The line's handle, the receiver of blocks called in by the peer, and the driver, a
    /// worker for the supervisor to run.
    pub fn start(
        settings: EspaSettings,
        clock: SharedClock,
    ) -> (Pager, mpsc::Receiver<Received>, EspaDriver) {
        let (jobs, job_rx) = mpsc::channel(64);
        let (calls_tx, calls) = mpsc::channel(64);
        let (status_tx, status) = watch::channel(EspaStatus {
            device: settings.device.clone(),
            ..EspaStatus::default()
        });
        let line = EspaLine {
            settings,
            status: status_tx,
            calls: calls_tx,
            clock,
        };
        let driver = serial::LineDriver::new(line, job_rx);
        (Pager { jobs, status }, calls, driver)
    }

    pub fn status(&self) -> EspaStatus {
        self.status.borrow().clone()
    }

    /// Sends one page; `Ok` once the paging system acknowledged the block.
    pub async fn page(&self, page: Page) -> Result<(), EspaError> {
        page.block()?;
        let (reply, rx) = oneshot::channel();
        let stopped = || EspaError::Unavailable("the ESPA driver stopped".into());
        self.jobs
            .send(PageJob { page, reply })
            .await
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

/// The line's ESPA side: its settings, the status its handle shows, and where blocks the peer
/// calls in go.
pub struct EspaLine {
    settings: EspaSettings,
    status: watch::Sender<EspaStatus>,
    calls: mpsc::Sender<Received>,
    clock: SharedClock,
}

/// The line's driver, a supervised worker.
pub type EspaDriver = serial::LineDriver<EspaLine>;

impl serial::LineProtocol for EspaLine {
    type Job = PageJob;
    type Error = EspaError;
    const WORKER: &'static str = "espa-line";
    const DEVICE: &'static str = "ESPA line";

    fn device(&self) -> &str {
        &self.settings.device
    }

    fn line(&self) -> LineSettings {
        self.settings.line
    }

    async fn serve(
        &mut self,
        port: BoxedLine,
        jobs: &mut mpsc::Receiver<PageJob>,
    ) -> Result<(), EspaError> {
        self.status.send_modify(|s| {
            s.connected = true;
            s.last_error = None;
        });
        let mut line = Line {
            port,
            pending: Vec::new(),
            settings: &self.settings,
        };
        line.serve(jobs, &self.status, &self.calls, &self.clock)
            .await
    }

    fn connected(&self) -> bool {
        self.status.borrow().connected
    }

    fn port_error(e: std::io::Error) -> EspaError {
        EspaError::Port(e.to_string())
    }

    fn down(&mut self, why: &str) {
        self.status.send_modify(|s| {
            s.connected = false;
            s.last_error = Some(why.to_string());
        });
    }

    fn refuse(job: PageJob, why: &str) {
        let _ = job.reply.send(Err(EspaError::Unavailable(why.to_string())));
    }
}

struct Line<'a> {
    port: BoxedLine,
    /// Bytes read and not consumed yet.
    pending: Vec<u8>,
    settings: &'a EspaSettings,
}

impl Line<'_> {
    /// Reads more bytes; a closed line is an error. Cancel-safe.
    async fn fill(&mut self) -> Result<(), EspaError> {
        let mut chunk = [0u8; 256];
        let n = self
            .port
            .read(&mut chunk)
            .await
            .map_err(|e| EspaError::Port(e.to_string()))?;
        if n == 0 {
            return Err(EspaError::Port("the line was closed".into()));
        }
        self.pending.extend(chunk[..n].iter().map(|b| b & 0x7F));
        Ok(())
    }

    /// The next byte, or `None` after `within` of silence.
    async fn byte(&mut self, within: Duration) -> Result<Option<u8>, EspaError> {
        if self.pending.is_empty() {
            match tokio::time::timeout(within, self.fill()).await {
                Ok(r) => r?,
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(self.pending.remove(0)))
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), EspaError> {
        self.port
            .write_all(bytes)
            .await
            .map_err(|e| EspaError::Port(e.to_string()))?;
        self.port
            .flush()
            .await
            .map_err(|e| EspaError::Port(e.to_string()))
    }

    async fn serve(
        &mut self,
        jobs: &mut mpsc::Receiver<PageJob>,
        status: &watch::Sender<EspaStatus>,
        calls: &mpsc::Sender<Received>,
        clock: &SharedClock,
    ) -> Result<(), EspaError> {
        loop {
            while !self.pending.is_empty() {
                self.listen(status, calls).await?;
            }
            tokio::select! {
                job = jobs.recv() => {
                    let Some(job) = job else { return Ok(()) };
                    let mut retransmissions = 0;
                    let sent = self.transmit(&job.page, &mut retransmissions).await;
                    let now = clock.now();
                    status.send_modify(|s| {
                        s.retransmissions += retransmissions;
                        match &sent {
                            Ok(()) => {
                                s.pages_sent += 1;
                                s.last_page_at = Some(now);
                            }
                            Err(e) => s.last_error = Some(e.to_string()),
                        }
                    });
                    let lost = match &sent {
                        Err(e @ EspaError::Port(_)) => Some(e.clone()),
                        _ => None,
                    };
                    let _ = job.reply.send(sent);
                    if let Some(e) = lost {
                        return Err(e);
                    }
                }
                read = self.fill() => read?,
            }
        }
    }

    /// Waits for ACK or NAK; `None` on silence or anything else.
    async fn answer(&mut self) -> Result<Option<u8>, EspaError> {
        loop {
            match self.byte(self.settings.reply_timeout).await? {
                None => return Ok(None),
                Some(b @ (ACK | NAK | EOT)) => return Ok(Some(b)),
                Some(_) => {}
            }
        }
    }

    /// Select the paging system, send the block until it is acknowledged, end with EOT.
    async fn transmit(&mut self, page: &Page, retransmissions: &mut u64) -> Result<(), EspaError> {
        let block = page.block()?;
        let attempts = self.settings.attempts.max(1);
        let mut selected = false;
        for attempt in 0..attempts {
            if attempt > 0 {
                *retransmissions += 1;
            }
            self.send(&[self.settings.peer, ENQ]).await?;
            if self.answer().await? == Some(ACK) {
                selected = true;
                break;
            }
        }
        if !selected {
            self.send(&[EOT]).await?;
            return Err(EspaError::Refused(format!(
                "the paging system did not accept the selection after {attempts} attempts"
            )));
        }
        for attempt in 0..attempts {
            if attempt > 0 {
                *retransmissions += 1;
            }
            self.send(&block).await?;
            match self.answer().await? {
                Some(ACK) => {
                    self.send(&[EOT]).await?;
                    return Ok(());
                }
                Some(EOT) => break,
                _ => {}
            }
        }
        self.send(&[EOT]).await?;
        Err(EspaError::Refused(format!(
            "the paging system did not acknowledge the block after {attempts} transmissions"
        )))
    }

    /// Handles what the peer starts: a selection of our address, then blocks until EOT.
    async fn listen(
        &mut self,
        status: &watch::Sender<EspaStatus>,
        calls: &mpsc::Sender<Received>,
    ) -> Result<(), EspaError> {
        let Some(first) = self.byte(RECEIVE_IDLE).await? else {
            return Ok(());
        };
        if first != self.settings.address {
            return Ok(()); // EOT, another station's traffic, or noise
        }
        if self.byte(RECEIVE_IDLE).await? != Some(ENQ) {
            return Ok(());
        }
        self.send(&[ACK]).await?;
        loop {
            let Some(b) = self.byte(RECEIVE_IDLE).await? else {
                return Ok(());
            };
            match b {
                EOT => return Ok(()),
                SOH => {}
                _ => continue,
            }
            let mut body = Vec::new();
            loop {
                let Some(b) = self.byte(RECEIVE_IDLE).await? else {
                    return Ok(());
                };
                body.push(b);
                if b == ETX {
                    break;
                }
            }
            let Some(check) = self.byte(RECEIVE_IDLE).await? else {
                return Ok(());
            };
            match parse(&body).filter(|_| bcc(&body) == check) {
                Some(received) => {
                    self.send(&[ACK]).await?;
                    status.send_modify(|s| s.calls_received += 1);
                    let _ = calls.send(received).await;
                }
                None => self.send(&[NAK]).await?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_one_call_to_pager_block_with_its_bcc() {
        let page = Page {
            address: "550".into(),
            text: "CALL ME 101".into(),
            priority: Priority::Alarm,
        };
        let b = page.block().unwrap();
        let expected_body = b"1\x021\x1f550\x1e2\x1fCALL ME 101\x1e6\x1f3\x03";
        assert_eq!(b[0], SOH);
        assert_eq!(&b[1..b.len() - 1], expected_body);
        assert_eq!(b[b.len() - 1], bcc(expected_body));
        let parsed = parse(&b[1..b.len() - 1]).unwrap();
        assert_eq!(parsed.header, '1');
        assert_eq!(parsed.record('2'), Some("CALL ME 101"));
    }

    #[test]
    fn text_is_cut_to_the_seven_bit_set_and_the_limits() {
        assert_eq!(seven_bit("Störung\tÜ €"), "Stoerung Ue ?");
        let long = Page {
            address: "1".into(),
            text: "x".repeat(300),
            priority: Priority::Normal,
        };
        let b = long.block().unwrap();
        let parsed = parse(&b[1..b.len() - 1]).unwrap();
        assert_eq!(parsed.record('2').unwrap().len(), MESSAGE_MAX);
        let bad = Page {
            address: "12345678901234567".into(),
            ..long
        };
        assert!(matches!(bad.block(), Err(EspaError::Invalid(_))));
    }
}
