//! The systemd notification protocol (`sd_notify`), without libsystemd: `READY=1` once the
//! store is open and the listener bound (with a `STATUS` that says where it serves), `WATCHDOG=1` while the service is healthy, `STOPPING=1`
//! when it drains. A datagram to `$NOTIFY_SOCKET` (a path, or `@name` in the abstract
//! namespace); outside systemd there is no socket and every call does nothing.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

fn socket_addr() -> Option<SocketAddr> {
    let target = std::env::var_os("NOTIFY_SOCKET")?;
    let bytes = target.as_encoded_bytes();
    match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name).ok()
        }
        None => SocketAddr::from_pathname(std::path::Path::new(&target)).ok(),
    }
}

/// Sends `state` (such as `READY=1`) to systemd; `false` when there is no one to tell.
pub fn notify(state: &str) -> bool {
    let Some(addr) = socket_addr() else {
        return false;
    };
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to_addr(state.as_bytes(), &addr));
    if let Err(e) = &sent {
        tracing::warn!(error = %e, state, "systemd notification failed");
    }
    sent.is_ok()
}

/// How often to feed the watchdog systemd set up for this process (half its timeout), if any.
pub fn watchdog_interval() -> Option<Duration> {
    if let Some(pid) = std::env::var("WATCHDOG_PID").ok().filter(|p| !p.is_empty())
        && pid != std::process::id().to_string()
    {
        return None;
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}
