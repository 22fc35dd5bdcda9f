//! Event figures for docs/performance.md:
//! - durable events appended per second through the producer path (journaled in a main-store
//!   transaction, group commit with fsync, then filed by the store: month-file group commit,
//!   then publish) with 1, 8 and 64 concurrent producers, in process;
//! - latency from append to delivery on 100 concurrent SSE clients of the release server
//!   (event `ts`, stamped just before the append, to the client reading the frame);
//! - the server's resident memory with those clients connected.
//!
//! Run: `cargo bench --bench events`.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use svc::events::Events;
use svc::model::event::{EventDraft, EventType, Severity};
use svc::runtime::{Metrics, Shutdown, Supervisor, SystemClock};
use svc::store::events::EventStore;

mod common;

/// Durable appends per second. `window` events per producer are in flight at once; each is
/// counted only when its group commit has completed.
async fn appends(producers: usize, window: usize, seconds: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store = EventStore::open(dir.path()).unwrap();
    let main = svc::store::Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let events = Events::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Metrics::new()),
    );
    main.file_with(events.clone(), tokio::runtime::Handle::current());
    let sup = Supervisor::new(Shutdown::new(), Duration::from_secs(1));
    sup.spawn(events.bus().dispatcher().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tenant = uuid::Uuid::from_u128(1);
    let tasks: Vec<_> = (0..producers)
        .map(|p| {
            let (main, stop, count) = (main.clone(), stop.clone(), count.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                let mut in_flight = futures_util::stream::FuturesUnordered::new();
                while !stop.load(Ordering::Relaxed) {
                    while in_flight.len() < window {
                        let payload = serde_json::json!({"summary": "bench", "producer": p, "n": i, "labels": {"site": "bench"}});
                        let draft = EventDraft::new(tenant, EventType::Ingress, Some(Severity::Info), payload);
                        let main = main.clone();
                        in_flight.push(async move {
                            main.journal_events(vec![draft]).await.unwrap();
                        });
                        i += 1;
                    }
                    if futures_util::StreamExt::next(&mut in_flight).await.is_some() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }
                while futures_util::StreamExt::next(&mut in_flight).await.is_some() {}
            })
        })
        .collect();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let rate = count.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64();
    sup.shutdown(Duration::from_secs(2)).await;
    store.close();
    rate
}

async fn sse_latency(clients: usize, events_per_second: u64, seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut child, base) = common::start(&data, false);
    let http = reqwest::Client::new();
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<f64>::new()));
    let mut readers = Vec::new();
    for _ in 0..clients {
        let mut res = http
            .get(format!("{base}/api/v1/stream?types=config"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let lat = latencies.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = String::new();
            while let Ok(Some(chunk)) = res.chunk().await {
                let now = jiff::Timestamp::now();
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                        let v: serde_json::Value = serde_json::from_str(data).unwrap();
                        let ts: jiff::Timestamp = v["ts"].as_str().unwrap().parse().unwrap();
                        lat.lock()
                            .unwrap()
                            .push((now - ts).total(jiff::Unit::Millisecond).unwrap());
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "resident memory with {clients} SSE clients connected: {:.1} MiB",
        common::rss_mb(child.id())
    );
    let interval = Duration::from_micros(1_000_000 / events_per_second);
    let mut tick = tokio::time::interval(interval);
    for i in 0..events_per_second * seconds {
        tick.tick().await;
        let (http, base, token) = (http.clone(), base.clone(), token.clone());
        tokio::spawn(async move {
            let body =
                serde_json::json!({"name": "bench", "email": format!("bench-{i}@example.org")});
            let _ = http
                .post(format!("{base}/api/v1/users"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await;
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "resident memory after the run: {:.1} MiB",
        common::rss_mb(child.id())
    );
    let _ = child.kill();
    let _ = child.wait();
    for r in readers {
        r.abort();
    }
    let mut l = latencies.lock().unwrap().clone();
    l.sort_by(f64::total_cmp);
    let pct = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)];
    println!(
        "append to SSE delivery, {clients} clients, {events_per_second} events/s for {seconds} s: {} deliveries, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        l.len(),
        pct(0.50),
        pct(0.99),
        l[l.len() - 1]
    );
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = common::runtime();
    rt.block_on(async {
        for window in [1, 16] {
            for producers in [1, 8, 64] {
                let rate = appends(producers, window, 5).await;
                println!("durable appends, {producers:>2} producers, {window:>2} in flight each: {rate:>9.0} events/s");
            }
        }
        sse_latency(100, 200, 5).await;
    });
}
