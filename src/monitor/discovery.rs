//! Network discovery (`/discovery/scans`): a TCP connect sweep of an address range, at most a
//! /20 (SEMANTICS 12), that lists which addresses answer on which ports and suggests checks.
//! Scans run in the background and are kept in memory, the newest 50 per tenant: they are
//! suggestions to act on, not configuration, and a restart forgets them.

use crate::model::config::Invalid;
use crate::model::discovery::{DiscoveryHit, DiscoveryScan, ScanRequest};
use crate::runtime::clock::SharedClock;
use futures_util::StreamExt;
use ipnet::IpNet;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// The widest range: 4,096 addresses, an IPv4 /20.
const MAX_HOST_BITS: u8 = 12;
const MAX_PORTS: usize = 64;
const DEFAULT_PORTS: [u16; 7] = [22, 23, 80, 443, 502, 8080, 8443];
/// Connection attempts in flight at once, over all scans.
const IN_FLIGHT: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const KEPT_PER_TENANT: usize = 50;

pub struct Discovery {
    clock: SharedClock,
    scans: Mutex<HashMap<Uuid, VecDeque<DiscoveryScan>>>,
    slots: Arc<tokio::sync::Semaphore>,
}

fn invalid(field: &str, detail: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        detail: detail.into(),
    }
}

/// The addresses of `cidr` (without network and broadcast addresses of IPv4 ranges wider than
/// a /31).
fn addresses(cidr: &str) -> Result<Vec<IpAddr>, Invalid> {
    let net: IpNet = cidr.trim().parse().map_err(|_| {
        invalid(
            "cidr",
            format!("{cidr:?} is not a CIDR range (such as 192.168.1.0/24)"),
        )
    })?;
    let host_bits = net.max_prefix_len() - net.prefix_len();
    if host_bits > MAX_HOST_BITS {
        let count = match host_bits {
            0..64 => (1u64 << host_bits).to_string(),
            _ => format!("2^{host_bits}"),
        };
        return Err(invalid(
            "cidr",
            format!(
                "{cidr} has {count} addresses; at most a /{} ({} addresses) is scanned",
                net.max_prefix_len() - MAX_HOST_BITS,
                1u64 << MAX_HOST_BITS
            ),
        ));
    }
    Ok(net.hosts().collect())
}

/// The checks to suggest for an address with `open` ports.
fn suggestions(open: &[u16]) -> Vec<String> {
    let mut suggest = vec!["ping".to_string()];
    for port in open {
        suggest.push(match port {
            80 => "http".into(),
            443 => "http -S".into(),
            8080 => "http -p 8080".into(),
            8443 => "http -S -p 8443".into(),
            502 => "modbus".into(),
            p => format!("tcp -p {p}"),
        });
    }
    suggest
}

impl Discovery {
    pub fn new(clock: SharedClock) -> Arc<Self> {
        Arc::new(Self {
            clock,
            scans: Mutex::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
        })
    }

    fn scans(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, VecDeque<DiscoveryScan>>> {
        self.scans.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks the request and starts the sweep; the scan as it starts.
    pub fn start(
        self: &Arc<Self>,
        tenant: Uuid,
        req: ScanRequest,
    ) -> Result<DiscoveryScan, Invalid> {
        let targets = addresses(&req.cidr)?;
        let mut ports = req.ports.unwrap_or_else(|| DEFAULT_PORTS.to_vec());
        ports.sort_unstable();
        ports.dedup();
        if ports.is_empty() || ports.len() > MAX_PORTS {
            return Err(invalid(
                "ports",
                format!("between 1 and {MAX_PORTS} ports, not {}", ports.len()),
            ));
        }
        if ports.contains(&0) {
            return Err(invalid("ports", "port 0 cannot be scanned"));
        }
        let scan = DiscoveryScan {
            id: self.clock.new_id(),
            tenant_id: tenant,
            cidr: req.cidr.trim().to_string(),
            ports: ports.clone(),
            status: "running".into(),
            started_at: self.clock.now(),
            done_at: None,
            found: Vec::new(),
            probed: 0,
            probes: targets.len() * ports.len(),
        };
        {
            let mut all = self.scans();
            let kept = all.entry(tenant).or_default();
            kept.push_front(scan.clone());
            kept.truncate(KEPT_PER_TENANT);
        }
        tokio::spawn(self.clone().sweep(tenant, scan.id, targets, ports));
        Ok(scan)
    }

    /// Tries every port of every address, recording progress and hits as they come.
    async fn sweep(self: Arc<Self>, tenant: Uuid, id: Uuid, targets: Vec<IpAddr>, ports: Vec<u16>) {
        // Made as they are taken: a /20 on 64 ports is 262,144 of them.
        let probes = targets.into_iter().flat_map(move |ip| {
            ports
                .clone()
                .into_iter()
                .map(move |port| SocketAddr::new(ip, port))
        });
        let mut results = futures_util::stream::iter(probes)
            .map(|addr| {
                let slots = self.slots.clone();
                async move {
                    let _slot = slots.acquire_owned().await;
                    let open = matches!(
                        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
                            .await,
                        Ok(Ok(_))
                    );
                    (addr, open)
                }
            })
            .buffer_unordered(IN_FLIGHT);
        let mut open: BTreeMap<IpAddr, Vec<u16>> = BTreeMap::new();
        let mut probed = 0;
        while let Some((addr, is_open)) = results.next().await {
            probed += 1;
            if is_open {
                open.entry(addr.ip()).or_default().push(addr.port());
            }
            if is_open || probed % 256 == 0 {
                self.update(tenant, id, |scan| {
                    scan.probed = probed;
                    scan.found = hits(&open);
                });
            }
        }
        let now = self.clock.now();
        self.update(tenant, id, |scan| {
            scan.probed = probed;
            scan.found = hits(&open);
            scan.status = "done".into();
            scan.done_at = Some(now);
        });
    }

    fn update(&self, tenant: Uuid, id: Uuid, change: impl FnOnce(&mut DiscoveryScan)) {
        if let Some(scan) = self
            .scans()
            .get_mut(&tenant)
            .and_then(|kept| kept.iter_mut().find(|s| s.id == id))
        {
            change(scan);
        }
    }

    /// The tenant's scans, newest first, after `cursor` (a scan id), at most `limit`.
    pub fn list(&self, tenant: Uuid, cursor: Option<Uuid>, limit: usize) -> Vec<DiscoveryScan> {
        self.scans()
            .get(&tenant)
            .map(|kept| {
                kept.iter()
                    .filter(|s| cursor.is_none_or(|c| s.id < c))
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One of the tenant's scans.
    pub fn get(&self, tenant: Uuid, id: Uuid) -> Option<DiscoveryScan> {
        self.scans()
            .get(&tenant)
            .and_then(|kept| kept.iter().find(|s| s.id == id).cloned())
    }
}

fn hits(open: &BTreeMap<IpAddr, Vec<u16>>) -> Vec<DiscoveryHit> {
    open.iter()
        .map(|(ip, ports)| {
            let mut ports = ports.clone();
            ports.sort_unstable();
            DiscoveryHit {
                address: ip.to_string(),
                suggest: suggestions(&ports),
                open_ports: ports,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_bounded_at_a_slash_twenty() {
        assert_eq!(addresses("192.0.2.0/30").unwrap().len(), 2);
        assert_eq!(addresses("192.0.2.7/32").unwrap().len(), 1);
        assert_eq!(addresses("10.0.0.0/20").unwrap().len(), 4094);
        let e = addresses("10.0.0.0/19").unwrap_err();
        assert_eq!(e.field, "cidr");
        assert!(e.detail.contains("8192 addresses"), "{}", e.detail);
        assert!(addresses("2001:db8::/116").is_ok());
        assert!(
            addresses("2001:db8::/64")
                .unwrap_err()
                .detail
                .contains("/116")
        );
        assert!(addresses("::/0").unwrap_err().detail.contains("2^128"));
        assert!(addresses("10.0.0.300/24").is_err());
        assert!(addresses("web01").is_err());
    }

    #[test]
    fn open_ports_suggest_checks() {
        assert_eq!(
            suggestions(&[22, 443, 502]),
            ["ping", "tcp -p 22", "http -S", "modbus"]
        );
    }
}
