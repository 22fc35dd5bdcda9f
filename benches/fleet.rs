//! A fleet against its main: `SITES` simulated sites speak the site protocol to a main on
//! release servers (each pulls its bundle, reports by heartbeat every `HEARTBEAT` with its
//! forward position, and forwards its state changes in one batch a second, as an edge's
//! forwarder does), `RATE` state changes a second each, spread over `OBJECTS` objects per site,
//! held for `HOLD`. Then every site loses its uplink for `OUTAGE` (no heartbeats: the main
//! raises a stale-site alert for each) while its state changes go on into its backlog, and all
//! come back at once, each sending its backlog in batches of 1,000 (`FORWARD_BATCH_MAX`) before
//! it goes on live.
//!
//! Figures: events forwarded and stored a second while held (against what the sites offered),
//! the forward answer's p50/p99, a site's alert readable as a mirror at the main (p50/p99 from
//! its batch sent to `GET /api/v1/alerts?site=` at the main listing it, while held and from the
//! sites' return on; one probe alert a second, resolved once found), the most any site had
//! waiting, the main's peak RSS, and after the outage the backlog and the time until every site
//! had sent all of it.
//!
//! The sites are tasks of this process, not servers: they send what an edge sends, with the
//! site's own event ids (UUIDv7 at the site's clock) and times, gzipped, through one HTTP/1.1
//! connection each (an edge's uplink is one connection).
//!
//! Run: `cargo bench --bench fleet`. Sizes: `SVC_BENCH_FLEET_SITES` (1000),
//! `SVC_BENCH_FLEET_RATE` (5 state changes a second per site), `SVC_BENCH_FLEET_HOLD` (60
//! seconds), `SVC_BENCH_FLEET_OUTAGE` (60 seconds). With
//! `SVC_BENCH_MAIN_POSTGRES_URL=postgres://…` the main keeps its store in that (empty)
//! PostgreSQL database and `SVC_BENCH_FLEET_PROCESSES` (2) processes serve it, the sites spread
//! over them.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

const OBJECTS: u64 = 50;
const HEARTBEAT: Duration = Duration::from_secs(10);
/// At most this many events in one forwarded batch (the main's `FORWARD_BATCH_MAX`).
const BATCH_MAX: usize = 1000;
/// How often the probe's mirror is asked for while it is not there yet.
const PROBE_POLL: Duration = Duration::from_millis(5);

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// A UUIDv7 at `ms` with `n` in its random bits, as an edge mints its events' ids.
fn uuid7(ms: u64, n: u64) -> String {
    let hex = format!(
        "{ms:012x}7{:03x}8{:015x}",
        (n >> 60) & 0xfff,
        n & 0x0fff_ffff_ffff_ffff
    );
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn ts(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .unwrap()
        .to_string()
}

/// What the fleet is told to do, and what it measured.
#[derive(Default)]
struct Fleet {
    /// Sites forward nothing and send no heartbeat while set.
    outage: AtomicBool,
    /// Sites stop once set.
    done: AtomicBool,
    stored: AtomicU64,
    offered: AtomicU64,
    /// The most events any site had waiting when it sent.
    most_waiting: AtomicU64,
    /// Posts the main refused for load (503, 429), each tried again.
    refused: AtomicU64,
    /// Sites whose backlog is gone since the outage ended.
    caught_up: AtomicU64,
    answers: Mutex<Vec<f64>>,
    /// From a probe alert's batch sent to the alert readable at the main, in ms.
    probe_waits: Mutex<Vec<f64>>,
    /// Probe alerts found at the main, for the probe site to resolve.
    found: Mutex<Vec<String>>,
    /// Probes still waiting.
    probing: AtomicU64,
    /// Where the probes read, and with which token.
    probe_at: (String, String),
}

/// One site: its own event ids and objects, its backlog, one connection to its main.
struct Site {
    index: u64,
    name: String,
    base: String,
    token: String,
    rate: u64,
    /// Counts the site's events, so its ids are unique within a millisecond.
    minted: u64,
    backlog: std::collections::VecDeque<Value>,
    flips: u64,
}

/// A body as an edge sends it: gzipped from 512 bytes on, with its `Content-Encoding`.
fn encoded(body: &Value) -> (Vec<u8>, &'static str) {
    use std::io::Write as _;
    let plain = serde_json::to_vec(body).unwrap();
    if plain.len() < 512 {
        return (plain, "identity");
    }
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    out.write_all(&plain).unwrap();
    (out.finish().unwrap(), "gzip")
}

impl Site {
    fn object_id(&self, object: u64) -> String {
        format!("{:08x}-0000-4000-8000-{:012x}", self.index, object)
    }

    fn event(&mut self, kind: &str, object: Option<u64>, payload: Value) -> Value {
        let ms = now_ms();
        self.minted += 1;
        let mut e = json!({
            "id": uuid7(ms, (self.index << 32) | (self.minted & 0xffff_ffff)),
            "tenantId": "00000000-0000-0000-0000-000000000000",
            "ts": ts(ms), "type": kind, "payload": payload,
        });
        if let Some(object) = object {
            e["objectId"] = json!(self.object_id(object));
        }
        e
    }

    /// This second's state changes: each a host flipping between UP and DOWN.
    fn changes(&mut self) {
        for _ in 0..self.rate {
            self.flips += 1;
            let object = self.flips % OBJECTS;
            let state = (self.flips / OBJECTS) % 2;
            let payload = json!({"object": format!("h{object}"), "kind": "host",
                "toState": state, "stateType": "hard", "fromState": 1 - state,
                "output": format!("PING {} - rta {}.{} ms", if state == 0 { "OK" } else { "CRITICAL" }, self.flips % 97, self.flips % 10)});
            let e = self.event("state_change", Some(object), payload);
            self.backlog.push_back(e);
        }
    }

    /// Posts to the site's route; a refusal for load (503, 429) is tried again as an edge
    /// does, from a second on, doubling up to the heartbeat interval.
    async fn post(
        &self,
        http: &reqwest::Client,
        fleet: &Fleet,
        path: &str,
        body: &Value,
    ) -> reqwest::Response {
        let (bytes, encoding) = encoded(body);
        let mut wait = Duration::from_secs(1);
        loop {
            let res = http
                .post(format!("{}/api/v1/sites/{}:{path}", self.base, self.name))
                .bearer_auth(&self.token)
                .header("content-type", "application/json")
                .header("content-encoding", encoding)
                .body(bytes.clone())
                .send()
                .await
                .unwrap();
            let status = res.status();
            if status == 503 || status == 429 {
                fleet.refused.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(HEARTBEAT);
                continue;
            }
            assert!(status.is_success(), "{path}: {status}");
            return res;
        }
    }

    /// Sends what waits, in batches of at most `BATCH_MAX`, each confirmed before the next.
    async fn forward(&mut self, http: &reqwest::Client, fleet: &Fleet) {
        fleet
            .most_waiting
            .fetch_max(self.backlog.len() as u64, Ordering::Relaxed);
        while !self.backlog.is_empty() {
            let n = self.backlog.len().min(BATCH_MAX);
            let events: Vec<Value> = self.backlog.iter().take(n).cloned().collect();
            let sent = Instant::now();
            let receipt: Value = self
                .post(http, fleet, "events", &json!({"events": events}))
                .await
                .json()
                .await
                .unwrap();
            fleet
                .answers
                .lock()
                .unwrap()
                .push(sent.elapsed().as_secs_f64() * 1000.0);
            let stored =
                receipt["stored"].as_u64().unwrap() + receipt["duplicates"].as_u64().unwrap();
            fleet.stored.fetch_add(stored, Ordering::Relaxed);
            self.backlog.drain(..n);
        }
    }

    async fn heartbeat(&self, http: &reqwest::Client, fleet: &Fleet) {
        let beat = json!({"version": "bench", "stats": {"hosts": OBJECTS, "services": 0, "alertsOpen": 0},
            "intervalSeconds": HEARTBEAT.as_secs(), "clock": ts(now_ms()),
            "forward": {"pending": self.backlog.len()}});
        self.post(http, fleet, "heartbeat", &beat).await;
    }

    async fn run(mut self, fleet: Arc<Fleet>) {
        // One connection, as an edge's uplink.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let res = http
            .get(format!("{}/api/v1/sites/{}:pull", self.base, self.name))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "pull");
        // Spread over the second and over the heartbeat interval, as sites started apart are.
        let offset = Duration::from_millis((self.index * 7919) % 1000);
        tokio::time::sleep(offset).await;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let beat_every = HEARTBEAT.as_secs();
        let (mut second, mut was_out) = (self.index, false);
        while !fleet.done.load(Ordering::Relaxed) {
            tick.tick().await;
            second += 1;
            self.changes();
            fleet.offered.fetch_add(self.rate, Ordering::Relaxed);
            if fleet.outage.load(Ordering::Relaxed) {
                was_out = true;
                continue;
            }
            // The probe site opens an alert each second and resolves those found at the main
            // (not in the second it sends its backlog: that is measured below).
            let mut sent_probe = None;
            if self.index == 0 && !was_out {
                let found = std::mem::take(&mut *fleet.found.lock().unwrap());
                for alert in found {
                    let e = self.event("alert_resolved", Some(0), json!({"alertId": alert}));
                    self.backlog.push_back(e);
                }
                let alert = uuid7(now_ms(), 0xa1e7 << 32 | second);
                let e = self.event("alert_opened", Some(0), json!({"alertId": alert, "title": "probe", "rule": "bench", "severity": "critical"}));
                self.backlog.push_back(e);
                sent_probe = Some(alert);
            }
            if was_out || second.is_multiple_of(beat_every) {
                self.heartbeat(&http, &fleet).await;
            }
            let sent = Instant::now();
            self.forward(&http, &fleet).await;
            if let Some(alert) = sent_probe {
                fleet.probing.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(await_probe(fleet.clone(), alert, sent));
            }
            if was_out {
                was_out = false;
                fleet.caught_up.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Waits until the probe alert `alert`, sent at `sent`, is listed among the probe site's
/// alerts at the main (`GET /api/v1/alerts?site=s0`, as an operator's client reads a site's).
async fn await_probe(fleet: Arc<Fleet>, alert: String, sent: Instant) {
    let http = reqwest::Client::new();
    let (base, token) = &fleet.probe_at;
    loop {
        let listed = common::get_json(&http, base, token, "/api/v1/alerts?site=s0&limit=100").await;
        let items = listed["items"].as_array().unwrap();
        if items.iter().any(|a| a["id"] == alert.as_str()) {
            let wait = sent.elapsed().as_secs_f64() * 1000.0;
            fleet.probe_waits.lock().unwrap().push(wait);
            fleet.found.lock().unwrap().push(alert);
            fleet.probing.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(60),
            "probe {alert} never arrived"
        );
        tokio::time::sleep(PROBE_POLL).await;
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sites = setting("SVC_BENCH_FLEET_SITES", 1000);
    let rate = setting("SVC_BENCH_FLEET_RATE", 5);
    let hold = Duration::from_secs(setting("SVC_BENCH_FLEET_HOLD", 60));
    let outage = Duration::from_secs(setting("SVC_BENCH_FLEET_OUTAGE", 60));
    let env = common::main_storage();
    let processes = if env.is_empty() {
        1
    } else {
        setting("SVC_BENCH_FLEET_PROCESSES", 2)
    };
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<_> = (0..processes)
        .map(|i| dir.path().join(format!("main{i}")))
        .collect();
    let admin = common::bootstrap_in(&data[0], &env);
    let mut mains = vec![common::start_in(&data[0], "127.0.0.1:0", false, &[], &env)];
    for d in &data[1..] {
        common::beside(&data[0], d);
        mains.push(common::start_in(d, "127.0.0.1:0", false, &[], &env));
    }
    let bases: Vec<String> = mains.iter().map(|(_, b)| b.clone()).collect();
    let pids: Vec<u32> = mains.iter().map(|(c, _)| c.id()).collect();
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let base = &bases[0];
        let setup = Instant::now();
        // The first request verifies the token; the rest find it verified.
        common::get_json(&http, base, &admin, "/api/v1/sites").await;
        futures_util::stream::iter(0..sites)
            .map(|i| {
                let http = http.clone();
                let (base, admin) = (base.clone(), admin.clone());
                async move {
                    common::post_json(&http, &base, &admin, "/api/v1/sites", json!({"name": format!("s{i}"), "labels": {"region": format!("r{}", i % 10)}})).await;
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        let minted = common::post_json(&http, base, &admin, "/api/v1/api-tokens", json!({"name": "fleet", "scopes": ["sites:connect"]})).await;
        let token = minted["token"].as_str().unwrap().to_string();
        // A read-only token for the probe, as an operator's.
        let minted = common::post_json(&http, base, &admin, "/api/v1/api-tokens", json!({"name": "probe", "scopes": ["alerts:read"]})).await;
        let reader = minted["token"].as_str().unwrap().to_string();
        println!("svc main, {processes} process(es) on {}, {sites} sites at {rate} state changes a second each ({} a second), set up in {:.1} s:",
            if env.is_empty() { "redb" } else { "PostgreSQL" }, sites * rate, setup.elapsed().as_secs_f64());

        let fleet = Arc::new(Fleet { probe_at: (bases[bases.len() - 1].clone(), reader), ..Fleet::default() });
        let tasks: Vec<_> = (0..sites)
            .map(|i| {
                let site = Site { index: i, name: format!("s{i}"), base: bases[i as usize % bases.len()].clone(), token: token.clone(), rate, minted: 0, backlog: Default::default(), flips: 0 };
                tokio::spawn(site.run(fleet.clone()))
            })
            .collect();
        let peak = Arc::new(Mutex::new(vec![0.0f64; pids.len()]));
        let sampler = {
            let (peak, pids) = (peak.clone(), pids.clone());
            tokio::spawn(async move {
                loop {
                    for (p, pid) in peak.lock().unwrap().iter_mut().zip(&pids) {
                        *p = p.max(common::rss_mb(*pid));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };

        // Warm up for one heartbeat interval, then hold.
        tokio::time::sleep(HEARTBEAT).await;
        fleet.answers.lock().unwrap().clear();
        fleet.probe_waits.lock().unwrap().clear();
        peak.lock().unwrap().iter_mut().for_each(|p| *p = 0.0);
        let (stored0, offered0, t0) = (fleet.stored.load(Ordering::Relaxed), fleet.offered.load(Ordering::Relaxed), Instant::now());
        tokio::time::sleep(hold).await;
        let held = t0.elapsed().as_secs_f64();
        let stored = fleet.stored.load(Ordering::Relaxed) - stored0;
        let offered = fleet.offered.load(Ordering::Relaxed) - offered0;
        let mut answers = std::mem::take(&mut *fleet.answers.lock().unwrap());
        answers.sort_by(f64::total_cmp);
        println!("  held {held:.0} s: {:.0} events/s stored of {:.0} offered; forward answered p50 {:.1} ms, p99 {:.1} ms; most waiting at a site: {}; refused for load: {}",
            stored as f64 / held, offered as f64 / held, percentile(&answers, 0.5), percentile(&answers, 0.99), fleet.most_waiting.load(Ordering::Relaxed), fleet.refused.swap(0, Ordering::Relaxed));
        println!("  main RSS peak while held: {}", peak.lock().unwrap().iter().map(|p| format!("{p:.1} MiB")).collect::<Vec<_>>().join(", "));

        // The outage: every site keeps its changes; then all come back at once.
        fleet.outage.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let held_waits = std::mem::take(&mut *fleet.probe_waits.lock().unwrap());
        tokio::time::sleep(outage.saturating_sub(Duration::from_secs(2))).await;
        let overview = common::get_json(&http, base, &admin, "/api/v1/sites:overview").await;
        let stale = overview["items"].as_array().unwrap().iter().filter(|s| s["stale"] == true).count();
        let backlog = sites * rate * outage.as_secs();
        let (stored1, back) = (fleet.stored.load(Ordering::Relaxed), Instant::now());
        fleet.outage.store(false, Ordering::Relaxed);
        while fleet.caught_up.load(Ordering::Relaxed) < sites {
            assert!(back.elapsed() < Duration::from_secs(1800), "the backlog did not drain within 30 minutes");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let drained = back.elapsed().as_secs_f64();
        let sent = fleet.stored.load(Ordering::Relaxed) - stored1;
        println!("  after {} s without uplink ({stale} sites stale at the main): about {backlog} events waiting; all back at once, every backlog sent in {drained:.1} s ({:.0} events/s; refused for load: {})",
            outage.as_secs(), sent as f64 / drained, fleet.refused.load(Ordering::Relaxed));
        fleet.done.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        while fleet.probing.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let after_waits = std::mem::take(&mut *fleet.probe_waits.lock().unwrap());
        if std::env::var_os("SVC_BENCH_FLEET_WAITS").is_some() {
            println!("  probe waits in order (ms): held {held_waits:.0?}, after {after_waits:.0?}");
        }
        for (when, mut waits) in [("while held", held_waits), ("from the sites' return on", after_waits)] {
            waits.sort_by(f64::total_cmp);
            println!("  a site's alert listed at the main {when} (its batch sent to the list showing it): p50 {:.1} ms, p99 {:.1} ms, most {:.1} ms ({} samples)",
                percentile(&waits, 0.5), percentile(&waits, 0.99), percentile(&waits, 1.0), waits.len());
        }
        sampler.abort();
        println!("  main RSS peak over the run: {}", peak.lock().unwrap().iter().map(|p| format!("{p:.1} MiB")).collect::<Vec<_>>().join(", "));
    });
    for (mut child, _) in mains {
        common::stop(&mut child);
    }
}
