//! Network discovery (`/discovery/scans`): a TCP connect sweep of an address range, at most a
//! /20 (SEMANTICS 12), that lists which addresses answer on which ports and suggests checks.
//! Port 161 is probed with SNMP instead (`checks::discover_snmp`), which suggests a check of
//! the agent and one per interface.
//! Scans run in the process that was asked (its supervised `DiscoveryWorker`) and are kept in
//! the store, the newest 50 per tenant, so every process serving it answers for them. Progress
//! is written at most once a second; a scan that stopped recording it (its process ended)
//! reads as `failed`.

use crate::model::Timestamp;
use crate::model::config::Invalid;
use crate::model::discovery::{DiscoveryHit, DiscoveryScan, ScanRequest};
use crate::runtime::Locked;
use crate::runtime::Stopwatch;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::StepFuture;
use crate::runtime::{Wait, Worker};
use crate::store::{Store, StoreError};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// The widest range: 4,096 addresses, an IPv4 /20.
const MAX_HOST_BITS: u8 = 12;
const MAX_PORTS: usize = 64;
const DEFAULT_PORTS: [u16; 8] = [22, 23, 80, 161, 443, 502, 8080, 8443];
/// SNMP's port, probed over UDP.
const SNMP: u16 = 161;
/// Connection attempts in flight at once, over all scans.
const IN_FLIGHT: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const KEPT_PER_TENANT: usize = 50;
/// A running scan writes its progress at most this often (and always when it ends).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// A running scan whose progress is older than this has lost its process: every probe ends
/// within `CONNECT_TIMEOUT`, so a live sweep records progress every second or two.
const LOST_AFTER: Duration = Duration::from_secs(30);

pub struct Discovery {
    clock: SharedClock,
    store: Arc<Store>,
    slots: Arc<tokio::sync::Semaphore>,
    /// Scans started and not yet taken by the worker, with their addresses and SNMP community.
    queued: Mutex<Vec<Queued>>,
    wake: Arc<Notify>,
}

/// A scan started, for the worker to sweep.
struct Queued {
    scan: DiscoveryScan,
    targets: Vec<IpAddr>,
    community: Option<String>,
}

/// Why a scan could not start.
#[derive(Debug)]
pub enum ScanError {
    Invalid(Invalid),
    Store(StoreError),
}

/// A scan as it reads at `now`: one still `running` whose progress stopped long ago lost the
/// process that ran it.
fn as_seen(mut scan: DiscoveryScan, now: Timestamp) -> DiscoveryScan {
    let touched = scan.updated_at.unwrap_or(scan.started_at);
    if scan.status == "running" && now.since(touched) > LOST_AFTER {
        scan.status = "failed".into();
        scan.error = Some("the process running the scan stopped before it finished".into());
    }
    scan
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
    // The SNMP probe suggests 161's checks itself.
    for port in open.iter().filter(|p| **p != SNMP) {
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
    pub fn new(clock: SharedClock, store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            clock,
            store,
            slots: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
            queued: Mutex::default(),
            wake: Arc::new(Notify::new()),
        })
    }

    /// Checks the request, keeps the scan and starts the sweep; the scan as it starts.
    pub async fn start(
        self: &Arc<Self>,
        tenant: Uuid,
        req: ScanRequest,
    ) -> Result<DiscoveryScan, ScanError> {
        let targets = addresses(&req.cidr).map_err(ScanError::Invalid)?;
        let mut ports = req.ports.unwrap_or_else(|| DEFAULT_PORTS.to_vec());
        ports.sort_unstable();
        ports.dedup();
        if ports.is_empty() || ports.len() > MAX_PORTS {
            return Err(ScanError::Invalid(invalid(
                "ports",
                format!("between 1 and {MAX_PORTS} ports, not {}", ports.len()),
            )));
        }
        if ports.contains(&0) {
            return Err(ScanError::Invalid(invalid(
                "ports",
                "port 0 cannot be scanned",
            )));
        }
        let now = self.clock.now();
        let scan = DiscoveryScan {
            id: self.clock.new_id(),
            tenant_id: tenant,
            cidr: req.cidr.trim().to_string(),
            ports: ports.clone(),
            status: "running".into(),
            started_at: now,
            done_at: None,
            error: None,
            found: Vec::new(),
            probed: 0,
            probes: targets.len() * ports.len(),
            updated_at: Some(now),
        };
        self.store
            .start_discovery_scan(scan.clone(), KEPT_PER_TENANT)
            .await
            .map_err(ScanError::Store)?;
        self.queued.locked().push(Queued {
            scan: scan.clone(),
            targets,
            community: req.snmp_community,
        });
        self.wake.notify_one();
        Ok(scan)
    }

    /// Tries every port of every address, recording progress and hits as they come.
    async fn sweep(self: Arc<Self>, queued: Queued) {
        let Queued {
            mut scan,
            targets,
            community,
        } = queued;
        let ports = scan.ports.clone();
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
                let community = community.clone();
                async move {
                    let _slot = slots.acquire_owned().await;
                    if addr.port() == SNMP {
                        let found = crate::monitor::checks::discover_snmp(
                            addr.ip(),
                            community.as_deref(),
                            CONNECT_TIMEOUT,
                        )
                        .await;
                        return (addr, found.is_some(), found);
                    }
                    let open = matches!(
                        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
                            .await,
                        Ok(Ok(_))
                    );
                    (addr, open, None)
                }
            })
            .buffer_unordered(IN_FLIGHT);
        let mut open: BTreeMap<IpAddr, Vec<u16>> = BTreeMap::new();
        let mut snmp: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
        let mut since_saved = Stopwatch::start();
        while let Some((addr, is_open, checks)) = results.next().await {
            scan.probed += 1;
            if is_open {
                open.entry(addr.ip()).or_default().push(addr.port());
            }
            if let Some(checks) = checks {
                snmp.insert(addr.ip(), checks);
            }
            if since_saved.elapsed() >= PROGRESS_EVERY {
                scan.found = hits(&open, &snmp);
                self.save(&scan).await;
                since_saved = Stopwatch::start();
            }
        }
        scan.found = hits(&open, &snmp);
        scan.status = "done".into();
        scan.done_at = Some(self.clock.now());
        self.save(&scan).await;
    }

    async fn save(&self, scan: &DiscoveryScan) {
        let mut scan = scan.clone();
        scan.updated_at = Some(self.clock.now());
        if let Err(e) = self.store.save_discovery_scan(scan).await {
            tracing::warn!(error = %e, "a discovery scan's progress was not kept");
        }
    }

    /// The tenant's scans, newest first, after `cursor` (a scan id), at most `limit`.
    pub async fn list(
        &self,
        tenant: Uuid,
        cursor: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<DiscoveryScan>, StoreError> {
        let now = self.clock.now();
        let scans = self.store.discovery_scans(tenant, cursor, limit).await?;
        Ok(scans.into_iter().map(|s| as_seen(s, now)).collect())
    }

    /// One of the tenant's scans.
    pub async fn get(&self, tenant: Uuid, id: Uuid) -> Result<Option<DiscoveryScan>, StoreError> {
        let now = self.clock.now();
        let scan = self.store.discovery_scan(tenant, id).await?;
        Ok(scan.map(|s| as_seen(s, now)))
    }
}

/// Runs the sweeps of the scans this process started, side by side, under the supervisor: a
/// sweep still running at shutdown (or when a panic restarts the worker) ends there, and its
/// scan reads as failed once its progress is half a minute old.
pub struct DiscoveryWorker {
    discovery: Arc<Discovery>,
    sweeps: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl DiscoveryWorker {
    pub fn new(discovery: Arc<Discovery>) -> Self {
        Self {
            discovery,
            sweeps: FuturesUnordered::new(),
        }
    }
}

impl Worker for DiscoveryWorker {
    fn name(&self) -> &'static str {
        "discovery"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.discovery.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            loop {
                let queued = std::mem::take(&mut *self.discovery.queued.locked());
                for scan in queued {
                    let sweep = self.discovery.clone().sweep(scan);
                    self.sweeps.push(Box::pin(sweep));
                }
                if self.sweeps.is_empty() {
                    return Wait::UntilWoken;
                }
                tokio::select! {
                    _ = self.sweeps.next() => {}
                    () = self.discovery.wake.notified() => {}
                }
            }
        })
    }
}

/// The addresses that answered, with the checks to suggest (the SNMP probe's for port 161).
fn hits(
    open: &BTreeMap<IpAddr, Vec<u16>>,
    snmp: &BTreeMap<IpAddr, Vec<String>>,
) -> Vec<DiscoveryHit> {
    open.iter()
        .map(|(ip, ports)| {
            let mut ports = ports.clone();
            ports.sort_unstable();
            let mut suggest = suggestions(&ports);
            suggest.extend(snmp.get(ip).into_iter().flatten().cloned());
            DiscoveryHit {
                address: ip.to_string(),
                suggest,
                open_ports: ports,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Clock, TestClock};

    /// Scans are kept in the store, the newest 50 per tenant; one whose progress stopped for
    /// half a minute while running reads as failed, a finished one never does.
    #[tokio::test]
    async fn scans_are_kept_fifty_a_tenant_and_a_lost_one_reads_failed() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let discovery = Discovery::new(clock.clone(), store.clone());
        let (tenant, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let scan = |tenant: Uuid| DiscoveryScan {
            id: clock.new_id(),
            tenant_id: tenant,
            cidr: "192.0.2.0/30".into(),
            ports: vec![22],
            status: "running".into(),
            started_at: clock.now(),
            done_at: None,
            error: None,
            found: Vec::new(),
            probed: 0,
            probes: 2,
            updated_at: Some(clock.now()),
        };
        let theirs = scan(other);
        store
            .start_discovery_scan(theirs.clone(), 50)
            .await
            .unwrap();
        let mut ids = Vec::new();
        for _ in 0..52 {
            let s = scan(tenant);
            ids.push(s.id);
            store.start_discovery_scan(s, 50).await.unwrap();
        }
        let kept = discovery.list(tenant, None, 100).await.unwrap();
        let newest: Vec<Uuid> = ids.iter().rev().take(50).copied().collect();
        assert_eq!(kept.iter().map(|s| s.id).collect::<Vec<_>>(), newest);
        assert!(
            discovery.get(tenant, ids[0]).await.unwrap().is_none(),
            "pruned"
        );
        assert!(discovery.get(other, theirs.id).await.unwrap().is_some());
        assert!(
            discovery.get(other, ids[51]).await.unwrap().is_none(),
            "not theirs"
        );

        let mut done = scan(tenant);
        done.status = "done".into();
        store.save_discovery_scan(done.clone()).await.unwrap();
        clock.advance(Duration::from_secs(31));
        let lost = discovery.get(tenant, ids[51]).await.unwrap().unwrap();
        assert_eq!(lost.status, "failed");
        assert!(lost.error.unwrap().contains("stopped"));
        let finished = discovery.get(tenant, done.id).await.unwrap().unwrap();
        assert_eq!((finished.status.as_str(), finished.error), ("done", None));
    }

    /// Scans started are swept by the worker side by side; with none left it waits for a wake.
    #[tokio::test]
    async fn the_worker_sweeps_every_scan_started() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let discovery = Discovery::new(clock.clone(), store.clone());
        let tenant = Uuid::from_u128(1);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut started = Vec::new();
        for ports in [vec![open], vec![open, closed]] {
            let req = ScanRequest {
                cidr: "127.0.0.1/32".into(),
                ports: Some(ports),
                snmp_community: None,
            };
            started.push(discovery.start(tenant, req).await.unwrap());
        }
        let mut worker = DiscoveryWorker::new(discovery.clone());
        assert_eq!(worker.step().await, Wait::UntilWoken);
        for scan in started {
            let swept = discovery.get(tenant, scan.id).await.unwrap().unwrap();
            assert_eq!(swept.status, "done");
            assert_eq!(swept.probed, swept.probes);
            assert_eq!(swept.found.len(), 1);
            assert_eq!(swept.found[0].open_ports, [open]);
        }
    }

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
            suggestions(&[22, 161, 443, 502]),
            ["ping", "tcp -p 22", "http -S", "modbus"],
            "161's checks are the SNMP probe's"
        );
    }
}
