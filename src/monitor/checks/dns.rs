//! `dns`: asks a DNS server over UDP for a name's addresses, as check_dns does. Flags: `-H` the
//! name to look up (default: the object's address), `-s` the server (default: the first
//! `nameserver` of /etc/resolv.conf), `-q A|AAAA` (default A), `-a` the expected addresses
//! (comma list, any order), `-w`/`-c` response-time ranges in seconds.

use super::{Builtin, Outcome, status_word};
use crate::runtime::Stopwatch;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const A: u16 = 1;
const AAAA: u16 = 28;

fn resolv_conf_server() -> Option<IpAddr> {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()?
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .find_map(|a| a.trim().parse().ok())
}

/// `host` or `host:port` or `[v6]:port`, port 53 by default.
fn server_addr(text: &str) -> Option<SocketAddr> {
    text.parse::<SocketAddr>().ok().or_else(|| {
        text.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, 53))
    })
}

fn query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, String> {
    let mut q = Vec::with_capacity(32 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|l| (1..64).contains(l))
            .ok_or_else(|| format!("{name:?} is not a domain name"))?;
        q.push(len);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    Ok(q)
}

/// Skips a (possibly compressed) name; returns the offset after it.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + l as usize,
        }
    }
}

fn be16(msg: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

/// The response code and the addresses of the answer section.
fn parse_answer(msg: &[u8], id: u16) -> Result<(u8, Vec<IpAddr>), String> {
    let bad = || "malformed DNS response".to_string();
    if be16(msg, 0) != Some(id) {
        return Err("response id does not match the query".into());
    }
    let rcode = msg.get(3).ok_or_else(bad)? & 0x0f;
    let questions = be16(msg, 4).ok_or_else(bad)?;
    let answers = be16(msg, 6).ok_or_else(bad)?;
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(msg, at).ok_or_else(bad)? + 4;
    }
    let mut out = Vec::new();
    for _ in 0..answers {
        at = skip_name(msg, at).ok_or_else(bad)?;
        let rtype = be16(msg, at).ok_or_else(bad)?;
        let len = be16(msg, at + 8).ok_or_else(bad)? as usize;
        let data = msg.get(at + 10..at + 10 + len).ok_or_else(bad)?;
        match (rtype, data.len()) {
            (A, 4) => out.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (AAAA, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(data);
                out.push(IpAddr::V6(Ipv6Addr::from(b)));
            }
            _ => {}
        }
        at += 10 + len;
    }
    Ok((rcode, out))
}

fn rcode_name(code: u8) -> String {
    match code {
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        c => format!("rcode {c}"),
    }
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let Some(name) = ctx.target() else {
        return Outcome::unknown("DNS", "no name to look up (-H)");
    };
    let server = match ctx.args.get(&["-s", "--server"]) {
        Some(s) => match server_addr(s) {
            Some(a) => a,
            None => return Outcome::unknown("DNS", format!("-s {s:?} is not an address")),
        },
        None => SocketAddr::new(
            resolv_conf_server().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            53,
        ),
    };
    let qtype = match ctx.args.get(&["-q", "--querytype"]).unwrap_or("A") {
        t if t.eq_ignore_ascii_case("A") => A,
        t if t.eq_ignore_ascii_case("AAAA") => AAAA,
        t => return Outcome::unknown("DNS", format!("query type {t:?} is not A or AAAA")),
    };
    let expected: Option<Vec<IpAddr>> = match ctx.args.get(&["-a", "--expected-address"]) {
        None => None,
        Some(list) => match list.split(',').map(|a| a.trim().parse()).collect() {
            Ok(v) => Some(v),
            Err(_) => {
                return Outcome::unknown("DNS", format!("-a {list:?} is not a list of addresses"));
            }
        },
    };
    let limits = match ctx.limits() {
        Ok(l) => l,
        Err(e) => return Outcome::unknown("DNS", e),
    };
    let mut id = [0u8; 2];
    let _ = getrandom::fill(&mut id);
    let id = u16::from_be_bytes(id);
    let packet = match query(id, &name, qtype) {
        Ok(p) => p,
        Err(e) => return Outcome::unknown("DNS", e),
    };
    let watch = Stopwatch::start();
    let exchange = async {
        let bind: SocketAddr = if server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = tokio::net::UdpSocket::bind(bind).await?;
        socket.connect(server).await?;
        socket.send(&packet).await?;
        let mut buf = vec![0u8; 4096];
        loop {
            let n = socket.recv(&mut buf).await?;
            // Answers to someone else's id are ignored, as a resolver does.
            if be16(&buf[..n], 0) == Some(id) {
                return Ok::<_, std::io::Error>(buf[..n].to_vec());
            }
        }
    };
    let reply = match tokio::time::timeout(ctx.timeout, exchange).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Outcome::new(2, format!("DNS CRITICAL - {server}: {e}")),
        Err(_) => {
            return Outcome::new(
                2,
                format!(
                    "DNS CRITICAL - no answer from {server} within {}s",
                    ctx.timeout.as_secs()
                ),
            );
        }
    };
    let secs = watch.elapsed().as_secs_f64();
    let (rcode, mut addresses) = match parse_answer(&reply, id) {
        Ok(a) => a,
        Err(e) => return Outcome::new(2, format!("DNS CRITICAL - {e}")),
    };
    if rcode != 0 {
        return Outcome::new(
            2,
            format!(
                "DNS CRITICAL - {server} returned {} for {name}",
                rcode_name(rcode)
            ),
        );
    }
    if addresses.is_empty() {
        return Outcome::new(
            2,
            format!("DNS CRITICAL - {server} has no address for {name}"),
        );
    }
    addresses.sort();
    let list = addresses
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut code = limits.grade(secs);
    let mut note = String::new();
    if let Some(mut want) = expected {
        want.sort();
        if want != addresses {
            code = 2;
            let want = want
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(",");
            note = format!(" (expected {want})");
        }
    }
    Outcome::new(
        code,
        format!(
            "DNS {} - {secs:.3} seconds response time. {name} returns {list}{note} | time={secs:.6}s;{};0",
            status_word(code),
            limits.perf(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_with_compressed_names() {
        let q = query(0x1234, "svc.test", A).unwrap();
        let mut msg = q.clone();
        msg[2] = 0x81;
        msg[3] = 0x80;
        msg[7] = 2;
        for ip in [[10, 1, 2, 3], [10, 1, 2, 4]] {
            msg.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            msg.extend_from_slice(&ip);
        }
        let (rcode, addrs) = parse_answer(&msg, 0x1234).unwrap();
        assert_eq!(rcode, 0);
        assert_eq!(
            addrs,
            [
                "10.1.2.3".parse::<IpAddr>().unwrap(),
                "10.1.2.4".parse().unwrap()
            ]
        );
        assert!(parse_answer(&msg, 0x9999).is_err());
        assert!(parse_answer(&msg[..20], 0x1234).is_err());
        assert!(query(1, "a..b", A).is_err());
    }
}
