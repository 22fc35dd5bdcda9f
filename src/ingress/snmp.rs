//! SNMP traps, v1 and v2c, on UDP (`event-sources` of type `snmp`): `config.listen` (default
//! `0.0.0.0:162`), `config.community` (when set, traps with another community are dropped).
//! Messages are decoded with the `snmp2` crate; the well-known traps are named (coldStart,
//! warmStart, linkDown, linkUp, authenticationFailure, egpNeighborLoss), linkDown and linkUp of
//! one interface share a dedup key (`snmp/<agent>/link/<ifIndex>`) and linkUp resolves, and
//! every varbind is archived as `{oid, value}`.

use super::{Ingress, Normalized, Outcome, Source};
use crate::model::event::Severity;
use crate::runtime::worker::Task;
use serde_json::{Value, json};
use snmp2::{MessageType, Pdu, Value as Snmp};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// snmpTrapOID.0 and sysUpTime.0 (RFC 3416), and ifIndex's prefix (RFC 2863).
const TRAP_OID: &str = "1.3.6.1.6.3.1.1.4.1.0";
const UPTIME: &str = "1.3.6.1.2.1.1.3.0";
const IF_INDEX: &str = "1.3.6.1.2.1.2.2.1.1.";
/// The generic traps, by v1 number and as v2 `snmpTraps` OIDs (1.3.6.1.6.3.1.1.5.n+1).
const GENERIC: [&str; 6] = [
    "coldStart",
    "warmStart",
    "linkDown",
    "linkUp",
    "authenticationFailure",
    "egpNeighborLoss",
];

fn value_json(v: &Snmp<'_>) -> Value {
    match v {
        Snmp::Boolean(b) => json!(b),
        Snmp::Integer(n) => json!(n),
        Snmp::OctetString(s) => json!(String::from_utf8_lossy(s)),
        Snmp::ObjectIdentifier(o) => json!(o.to_string()),
        Snmp::IpAddress(a) => json!(format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])),
        Snmp::Counter32(n) | Snmp::Unsigned32(n) | Snmp::Timeticks(n) => json!(n),
        Snmp::Counter64(n) => json!(n),
        Snmp::Null => Value::Null,
        other => json!(format!("{other:?}")),
    }
}

/// The trap's name: a generic one by its number or `snmpTraps` OID, else the OID.
fn trap_name(oid: &str) -> String {
    oid.strip_prefix("1.3.6.1.6.3.1.1.5.")
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| GENERIC.get(n.checked_sub(1)?))
        .map_or_else(|| oid.to_string(), |n| n.to_string())
}

/// One trap as an event; `None` for what is not a trap or has another community.
pub fn normalize(bytes: &[u8], from: SocketAddr, community: Option<&str>) -> Option<Normalized> {
    let pdu = Pdu::from_bytes(bytes).ok()?;
    if community.is_some_and(|c| c.as_bytes() != pdu.community) {
        return None;
    }
    let varbinds: Vec<(String, Value)> = pdu
        .varbinds
        .clone()
        .map(|(oid, v)| (oid.to_string(), value_json(&v)))
        .collect();
    let (version, agent, trap_oid) = match pdu.message_type {
        MessageType::TrapV1 => {
            let info = pdu.v1_trap_info.as_ref()?;
            let oid = if info.generic_trap == 6 {
                format!("{}.0.{}", info.enterprise, info.specific_trap)
            } else {
                format!("1.3.6.1.6.3.1.1.5.{}", info.generic_trap + 1)
            };
            ("1", info.agent_addr.to_string(), oid)
        }
        MessageType::Trap | MessageType::InformRequest => {
            let oid = varbinds
                .iter()
                .find(|(o, _)| o == TRAP_OID)
                .and_then(|(_, v)| v.as_str().map(str::to_string))?;
            ("2c", from.ip().to_string(), oid)
        }
        _ => return None,
    };
    let name = trap_name(&trap_oid);
    let if_index = varbinds
        .iter()
        .find_map(|(o, v)| o.strip_prefix(IF_INDEX).map(|_| v.to_string()));
    let (severity, resolve) = match name.as_str() {
        "linkDown" | "authenticationFailure" | "egpNeighborLoss" => (Severity::Warning, false),
        "linkUp" => (Severity::Ok, true),
        "coldStart" | "warmStart" => (Severity::Info, false),
        _ => (Severity::Warning, false),
    };
    let dedup_key = match (name.as_str(), &if_index) {
        ("linkDown" | "linkUp", Some(i)) => format!("snmp/{agent}/link/{i}"),
        _ => format!("snmp/{agent}/{name}"),
    };
    let mut summary = format!("{name} from {agent}");
    if let Some(i) = &if_index {
        summary.push_str(&format!(" (interface {i})"));
    }
    Some(Normalized {
        severity,
        summary,
        dedup_key: Some(dedup_key),
        labels: BTreeMap::from([
            ("agent".into(), agent.clone()),
            ("trap".into(), name.clone()),
        ]),
        original: json!({
            "version": version,
            "agent": agent,
            "trapOid": trap_oid,
            "trapName": name,
            "uptime": varbinds.iter().find(|(o, _)| o == UPTIME).map(|(_, v)| v.clone()),
            "varbinds": varbinds.iter().map(|(oid, value)| json!({"oid": oid, "value": value})).collect::<Vec<_>>(),
        }),
        resolve,
    })
}

/// Traps received and not stored yet, at most; past it a trap is counted refused.
const QUEUE: usize = 65_536;
/// Traps stored in one transaction at most.
const BATCH: usize = 1024;
/// The socket's receive buffer: room for a burst while a batch is stored.
const RECEIVE_BUFFER: usize = 4 * 1024 * 1024;

fn bind(listen: &str) -> std::io::Result<UdpSocket> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|_| std::io::Error::other(format!("{listen:?} is not an address:port")))?;
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: the kernel caps it at net.core.rmem_max.
    let _ = socket.set_recv_buffer_size(RECEIVE_BUFFER);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

/// Binds the source's socket and makes its receiver, as a worker: one loop reads and decodes
/// datagrams, another stores what has arrived in batches, so a burst waits in memory, not in
/// the kernel's buffer. A restart keeps the socket.
pub(super) fn start(ingress: &Arc<Ingress>, source: Source) -> Result<Task, String> {
    let listen = source
        .config
        .get("listen")
        .cloned()
        .unwrap_or_else(|| "0.0.0.0:162".into());
    let socket =
        Arc::new(bind(&listen).map_err(|e| format!("cannot listen on udp {listen}: {e}"))?);
    let ingress = ingress.clone();
    Ok(super::listeners::task(&source.clone(), move || {
        Box::pin(receive(ingress.clone(), source.clone(), socket.clone()))
    }))
}

/// The receiver of one source; it runs until stopped.
async fn receive(ingress: Arc<Ingress>, source: Source, socket: Arc<UdpSocket>) {
    let (tx, mut rx) = mpsc::channel::<Normalized>(QUEUE);
    let community = source.config.get("community").cloned();
    let receive = async {
        let mut buf = vec![0u8; 65_535];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                continue;
            };
            let queued = normalize(&buf[..n], from, community.as_deref())
                .is_some_and(|event| tx.try_send(event).is_ok());
            if !queued {
                ingress.count(&source.name, Outcome::Refused);
                tracing::debug!(source = %source.name, %from, "datagram not taken (no trap for this source, or the queue is full)");
            }
        }
    };
    let store = async {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(event) => batch.push(event),
                    Err(_) => break,
                }
            }
            if let Err(e) = ingress.record_all(&source, batch).await {
                tracing::error!(source = %source.name, error = %e, "SNMP traps could not be stored and are lost");
            }
        }
    };
    tokio::join!(receive, store);
}
