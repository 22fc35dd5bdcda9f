//! Serial lines: opens a device path with its line settings, or a `tcp://host:port` serial
//! server that carries the same bytes, and keeps one exchange at a time on each path.

pub use crate::model::hardware::LineSettings;
use crate::runtime::Locked;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

pub trait Line: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Line for T {}

pub type BoxedLine = Box<dyn Line>;

/// Opens `device`: a serial port, or a serial server at `tcp://host:port`.
pub async fn open(device: &str, settings: LineSettings) -> io::Result<BoxedLine> {
    if let Some(addr) = device.strip_prefix("tcp://") {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        return Ok(Box::new(stream));
    }
    Ok(Box::new(open_port(device, settings)?))
}

/// Opens a serial port with its settings.
pub fn open_port(device: &str, s: LineSettings) -> io::Result<tokio_serial::SerialStream> {
    let parity = match s.parity {
        'E' => tokio_serial::Parity::Even,
        'O' => tokio_serial::Parity::Odd,
        _ => tokio_serial::Parity::None,
    };
    let data_bits = if s.data_bits == 7 {
        tokio_serial::DataBits::Seven
    } else {
        tokio_serial::DataBits::Eight
    };
    let stop_bits = if s.stop_bits == 2 {
        tokio_serial::StopBits::Two
    } else {
        tokio_serial::StopBits::One
    };
    let builder = tokio_serial::new(device, s.baud)
        .parity(parity)
        .data_bits(data_bits)
        .stop_bits(stop_bits)
        .flow_control(tokio_serial::FlowControl::None);
    tokio_serial::SerialStream::open(&builder)
        .map_err(|e| io::Error::other(format!("{device}: {e}")))
}

/// What a driver does on one opening of its line (the GSM modem's AT session, the ESPA
/// protocol); `LineDriver` does the rest the same for both: opening, reopening after a pause,
/// refusing jobs meanwhile, and being the supervised worker.
pub trait LineProtocol: Send + 'static {
    type Job: Send + 'static;
    type Error: std::fmt::Display + Send;
    /// The worker's name.
    const WORKER: &'static str;
    /// What the log calls the device.
    const DEVICE: &'static str;

    fn device(&self) -> &str;
    fn line(&self) -> LineSettings;
    /// Serves jobs on the open port until it fails, or (`Ok`) until every handle is gone.
    fn serve<'a>(
        &'a mut self,
        port: BoxedLine,
        jobs: &'a mut mpsc::Receiver<Self::Job>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'a;
    /// Whether the session that just failed had got the line working: the next opening then
    /// waits the least again.
    fn connected(&self) -> bool;
    fn port_error(e: io::Error) -> Self::Error;
    /// The line is down, and why (its status says so until the next session).
    fn down(&mut self, why: &str);
    /// Answers a job that arrived while the line was down.
    fn refuse(job: Self::Job, why: &str);
}

/// A line's driver, a supervised worker: each step is a session on one opening of the port,
/// then (when it failed) the wait before the next, refusing jobs while the port is gone. A
/// panic loses the session only: the queue and the protocol's state stay with the worker.
pub struct LineDriver<P: LineProtocol> {
    protocol: P,
    jobs: mpsc::Receiver<P::Job>,
    reopen: Reopen,
}

impl<P: LineProtocol> LineDriver<P> {
    pub fn new(protocol: P, jobs: mpsc::Receiver<P::Job>) -> Self {
        Self {
            protocol,
            jobs,
            reopen: Reopen::default(),
        }
    }

    /// One session; `false` once the line's handles are all gone.
    async fn session(&mut self) -> bool {
        let opened = open(self.protocol.device(), self.protocol.line()).await;
        let failure = match opened {
            Ok(port) => match self.protocol.serve(port, &mut self.jobs).await {
                Ok(()) => return false,
                Err(e) => {
                    if self.protocol.connected() {
                        self.reopen.reset();
                    }
                    e
                }
            },
            Err(e) => P::port_error(e),
        };
        let why = failure.to_string();
        tracing::warn!(device = %self.protocol.device(), error = %why, "{} unavailable; reopening", P::DEVICE);
        self.protocol.down(&why);
        self.reopen
            .wait(&mut self.jobs, |job| P::refuse(job, &why))
            .await
    }
}

impl<P: LineProtocol> Worker for LineDriver<P> {
    fn name(&self) -> &'static str {
        P::WORKER
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if self.session().await {
                Wait::For(Duration::ZERO)
            } else {
                Wait::Done
            }
        })
    }
}

/// When a driver opens its port again after losing it: from 1 s, doubling to 30 s, and from 1 s
/// again once a session worked.
pub struct Reopen(std::time::Duration);

const FIRST_REOPEN: std::time::Duration = std::time::Duration::from_secs(1);
const REOPEN_MAX: std::time::Duration = std::time::Duration::from_secs(30);

impl Default for Reopen {
    fn default() -> Self {
        Self(FIRST_REOPEN)
    }
}

impl Reopen {
    /// A session worked: the next loss waits the least again.
    pub fn reset(&mut self) {
        self.0 = FIRST_REOPEN;
    }

    /// Waits before the next opening, answering each job that arrives meanwhile with `refuse`
    /// (so senders fail fast and retry); `false` once the job queue is closed and the driver
    /// should stop.
    pub async fn wait<J>(
        &mut self,
        jobs: &mut tokio::sync::mpsc::Receiver<J>,
        refuse: impl FnMut(J),
    ) -> bool {
        let go = wait_to_reopen(self.0, jobs, refuse).await;
        self.0 = (self.0 * 2).min(REOPEN_MAX);
        go
    }
}

async fn wait_to_reopen<J>(
    pause: std::time::Duration,
    jobs: &mut tokio::sync::mpsc::Receiver<J>,
    mut refuse: impl FnMut(J),
) -> bool {
    let pause = tokio::time::sleep(pause);
    tokio::pin!(pause);
    loop {
        tokio::select! {
            _ = &mut pause => return true,
            job = jobs.recv() => match job {
                Some(job) => refuse(job),
                None => return false,
            },
        }
    }
}

/// The lock of one device path: whoever holds it owns the line for one exchange, so checks
/// sharing a Modbus RTU line never interleave their frames.
pub fn owner(device: &str) -> Arc<tokio::sync::Mutex<()>> {
    static OWNERS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut owners = OWNERS.get_or_init(Mutex::default).locked();
    owners.entry(device.to_string()).or_default().clone()
}

/// The time one character takes on a line, for pacing and timeouts that scale with speed.
pub fn char_time(s: LineSettings) -> std::time::Duration {
    let bits = 1 + u32::from(s.data_bits) + u32::from(s.parity != 'N') + u32::from(s.stop_bits);
    std::time::Duration::from_micros(u64::from(bits) * 1_000_000 / u64::from(s.baud.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_takes_its_bits_over_the_baud_rate() {
        assert_eq!(
            char_time(LineSettings::new(9600, "8N1").unwrap()).as_micros(),
            1041
        );
    }
}
