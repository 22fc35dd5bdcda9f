//! Serial lines: opens a device path with its line settings, or a `tcp://host:port` serial
//! server that carries the same bytes, and keeps one exchange at a time on each path.

pub use crate::model::hardware::LineSettings;
use crate::runtime::Locked;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncRead, AsyncWrite};

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
