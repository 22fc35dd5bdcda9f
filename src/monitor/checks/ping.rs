//! `ping`: ICMP echo, as check_ping does. It uses an unprivileged datagram ICMP socket (Linux
//! `net.ipv4.ping_group_range`), falling back to a raw socket where the process may open one
//! (root or CAP_NET_RAW). Flags: `-H` address, `-p` packets (default 5), `-w`/`-c`
//! `RTA_MS,LOSS%` (defaults 200,20% and 1000,60%). Packet loss and round-trip average are
//! reported as performance data (`rta` in ms, `pl` in %).

use super::{Builtin, Outcome, status_word};
use crate::runtime::Stopwatch;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

const PAYLOAD: &[u8; 16] = b"svc-ping-payload";
/// Time between echo requests.
const SPACING: Duration = Duration::from_millis(200);

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn echo_request(v6: bool, id: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![if v6 { 128 } else { 8 }, 0, 0, 0];
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(PAYLOAD);
    // The kernel fills in the ICMPv6 checksum itself.
    if !v6 {
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

struct Pinger {
    socket: tokio::net::UdpSocket,
    /// Raw sockets see every ICMP packet (IPv4 ones with their IP header) and keep our id.
    raw: bool,
    v6: bool,
    id: u16,
}

fn open(v6: bool) -> std::io::Result<(Socket, bool)> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => Ok((s, false)),
        Err(dgram) => Socket::new(domain, Type::RAW, Some(proto))
            .map(|s| (s, true))
            .map_err(|_| dgram),
    }
}

impl Pinger {
    fn new(v6: bool) -> std::io::Result<Pinger> {
        let (socket, raw) = open(v6)?;
        socket.set_nonblocking(true)?;
        let socket = tokio::net::UdpSocket::from_std(std::net::UdpSocket::from(socket))?;
        let mut id = [0u8; 2];
        let _ = getrandom::fill(&mut id);
        Ok(Pinger {
            socket,
            raw,
            v6,
            id: u16::from_be_bytes(id),
        })
    }

    /// Sends one echo request and waits for its reply; the round trip, or `None` when lost.
    async fn echo(
        &self,
        to: IpAddr,
        seq: u16,
        wait: Duration,
    ) -> std::io::Result<Option<Duration>> {
        let watch = Stopwatch::start();
        self.socket
            .send_to(&echo_request(self.v6, self.id, seq), SocketAddr::new(to, 0))
            .await?;
        let reply_type = if self.v6 { 129 } else { 0 };
        let mut buf = [0u8; 1500];
        let receive = async {
            loop {
                let (n, from) = self.socket.recv_from(&mut buf).await?;
                let mut icmp = &buf[..n];
                if self.raw && !self.v6 {
                    let header = usize::from(icmp.first().map_or(0, |b| b & 0x0f)) * 4;
                    icmp = icmp.get(header..).unwrap_or_default();
                }
                if icmp.len() < 8 || from.ip() != to || icmp[0] != reply_type {
                    continue;
                }
                let id = u16::from_be_bytes([icmp[4], icmp[5]]);
                let got = u16::from_be_bytes([icmp[6], icmp[7]]);
                // A datagram socket's id is the kernel's and replies are only ours.
                if got == seq && (!self.raw || id == self.id) {
                    return Ok::<_, std::io::Error>(watch.elapsed());
                }
            }
        };
        match tokio::time::timeout(wait, receive).await {
            Ok(Ok(rtt)) => Ok(Some(rtt)),
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
        }
    }
}

/// `RTA,LOSS%` of check_ping.
fn limits(text: Option<&str>, default: (f64, f64)) -> Result<(f64, f64), String> {
    let Some(text) = text else {
        return Ok(default);
    };
    let (rta, loss) = text
        .split_once(',')
        .ok_or_else(|| format!("{text:?} is not RTA,LOSS%"))?;
    let number = |s: &str| {
        s.trim()
            .trim_end_matches(|c: char| c == '%' || c.is_ascii_alphabetic())
            .parse::<f64>()
            .map_err(|_| format!("{text:?} is not RTA,LOSS%"))
    };
    Ok((number(rta)?, number(loss)?))
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let Some(target) = ctx.target() else {
        return Outcome::unknown("PING", "no address");
    };
    let (warn, crit) = match (
        limits(ctx.args.get(&["-w", "--warning"]), (200.0, 20.0)),
        limits(ctx.args.get(&["-c", "--critical"]), (1000.0, 60.0)),
    ) {
        (Ok(w), Ok(c)) => (w, c),
        (Err(e), _) | (_, Err(e)) => return Outcome::unknown("PING", e),
    };
    let packets: u16 = match ctx.number(&["-p", "--packets"], 5) {
        Ok(p) if p > 0 => p,
        Ok(_) => return Outcome::unknown("PING", "-p must be at least 1"),
        Err(e) => return Outcome::unknown("PING", e),
    };
    let to = match tokio::net::lookup_host((target.as_str(), 0)).await {
        Ok(mut addrs) => match addrs.next() {
            Some(a) => a.ip(),
            None => return Outcome::new(2, format!("PING CRITICAL - {target} has no address")),
        },
        Err(e) => return Outcome::new(2, format!("PING CRITICAL - cannot resolve {target}: {e}")),
    };
    let pinger = match Pinger::new(to.is_ipv6()) {
        Ok(p) => p,
        Err(e) => {
            return Outcome::unknown(
                "PING",
                format!(
                    "cannot open an ICMP socket ({e}); allow the service's group in net.ipv4.ping_group_range"
                ),
            );
        }
    };
    // Every packet gets an equal share of the timeout, at most one second.
    let wait = (ctx.timeout / u32::from(packets)).min(Duration::from_secs(1));
    let mut rtts = Vec::new();
    for seq in 0..packets {
        let started = Stopwatch::start();
        match pinger.echo(to, seq, wait).await {
            Ok(Some(rtt)) => rtts.push(rtt.as_secs_f64() * 1000.0),
            Ok(None) => {}
            Err(e) => return Outcome::new(2, format!("PING CRITICAL - {to}: {e}")),
        }
        if seq + 1 < packets {
            tokio::time::sleep(SPACING.saturating_sub(started.elapsed())).await;
        }
    }
    let loss = 100.0 * f64::from(packets - rtts.len() as u16) / f64::from(packets);
    if rtts.is_empty() {
        return Outcome::new(
            2,
            format!(
                "PING CRITICAL - Packet loss = 100% | rta=;{:.3};{:.3};0 pl=100%;{};{};0;100",
                warn.0, crit.0, warn.1, crit.1
            ),
        );
    }
    let rta = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let code = if rta > crit.0 || loss > crit.1 {
        2
    } else if rta > warn.0 || loss > warn.1 {
        1
    } else {
        0
    };
    Outcome::new(
        code,
        format!(
            "PING {} - Packet loss = {loss:.0}%, RTA = {rta:.2} ms | rta={rta:.6}ms;{:.6};{:.6};0 pl={loss:.0}%;{};{};0;100",
            status_word(code),
            warn.0,
            crit.0,
            warn.1,
            crit.1
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_requests_carry_a_valid_checksum() {
        let p = echo_request(false, 0x1234, 7);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to zero");
        assert_eq!(&p[4..8], &[0x12, 0x34, 0, 7]);
        assert_eq!(echo_request(true, 1, 1)[0], 128);
        assert_eq!(limits(Some("100.0,20%"), (0.0, 0.0)), Ok((100.0, 20.0)));
        assert!(limits(Some("100"), (0.0, 0.0)).is_err());
    }
}
