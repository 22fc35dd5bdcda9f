//! Memory figures for docs/performance.md (issue: memory on small boards), the release server's resident
//! set size: after a first start (which seeds the default administrator: one argon2id hash of
//! 64 MiB), while 100 new API tokens are verified at once (each a first verification, one
//! argon2id run) and after it, the first request after the quiet minute (the code pages given
//! back, `memory.releaseAfter`), and with 10,000 hosts and 50,000 passive services loaded.
//!
//! Run: `cargo bench --bench memory` (`SVC_HASH_CONCURRENCY=N` sets `auth.hashConcurrency`;
//! `SVC_BENCH_BIN` measures another binary, such as a static build; the server inherits the
//! environment, so `MIMALLOC_PURGE_DELAY=0` measures the allocator purging at once).

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

const TOKENS: usize = 100;
const HOSTS: usize = 10_000;
const SERVICES_PER_HOST: usize = 5;
const HOSTS_PER_BATCH: usize = 1_000;

/// The highest RSS seen while `running` holds, sampled every 10 ms.
fn watch_peak(pid: u32, running: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let mut peak: f64 = 0.0;
        while running.load(Ordering::SeqCst) {
            peak = peak.max(common::rss_mb(pid));
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    })
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut args = Vec::new();
    if let Ok(n) = std::env::var("SVC_HASH_CONCURRENCY") {
        let config = dir.path().join("svc.yaml");
        std::fs::write(&config, format!("auth:\n  hashConcurrency: {n}\n")).unwrap();
        args = vec!["--config".to_string(), config.display().to_string()];
    }
    let slots = std::env::var("SVC_HASH_CONCURRENCY").unwrap_or_else(|_| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .to_string()
    });

    // A first start seeds the default administrator (one argon2id hash).
    let started = Instant::now();
    let (mut first, _) = common::start_with(&data, true, &args);
    let pid = first.id();
    let running = Arc::new(AtomicBool::new(true));
    let peak = watch_peak(pid, running.clone());
    let mut after_first = Vec::new();
    for at in [1u64, 5, 30] {
        std::thread::sleep(Duration::from_secs(at).saturating_sub(started.elapsed()));
        after_first.push((at, common::rss_parts(pid)));
    }
    running.store(false, Ordering::SeqCst);
    let first_peak = peak.join().unwrap();
    let _ = first.kill();
    let _ = first.wait();
    println!(
        "first start (seeds the administrator), RSS: peak {first_peak:.1} MiB; {}",
        after_first
            .iter()
            .map(|(at, rss)| format!("{at} s: {rss}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let token = common::bootstrap(&data);
    let (mut child, base) = common::start_with(&data, false, &args);
    let pid = child.id();
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::new();
        // After start-up's settle (2 s), as the first start's 5 s sample.
        tokio::time::sleep(Duration::from_secs(5)).await;
        println!("restart, idle 5 s: {}", common::rss_parts(pid));
        let mut secrets = Vec::new();
        for i in 0..TOKENS {
            let minted: Value = http
                .post(format!("{base}/api/v1/api-tokens"))
                .bearer_auth(&token)
                .json(&json!({"name": format!("t{i}"), "scopes": ["objects:read"]}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            secrets.push(minted["token"].as_str().unwrap().to_string());
        }
        let whoami = async |token: &str| {
            let t = Instant::now();
            let res = http
                .get(format!("{base}/api/v1/whoami"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            t.elapsed().as_secs_f64() * 1e3
        };
        let busy_request = whoami(&token).await;
        // Minting hashed each secret; let that memory go before the burst.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let before = common::rss_mb(pid);
        let running = Arc::new(AtomicBool::new(true));
        let peak = watch_peak(pid, running.clone());
        let t0 = Instant::now();
        let answers = futures_util::future::join_all(secrets.iter().map(|s| {
            http.get(format!("{base}/api/v1/whoami"))
                .bearer_auth(s)
                .send()
        }))
        .await;
        let took = t0.elapsed();
        running.store(false, Ordering::SeqCst);
        let ok = answers
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|r| r.status() == 200))
            .count();
        println!(
            "{TOKENS} new tokens verified at once (hashConcurrency {slots}): {ok} answered 200 in {:.1} s; RSS before {before:.1} MiB, peak {:.1} MiB",
            took.as_secs_f64(),
            peak.join().unwrap()
        );
        let t1 = Instant::now();
        let mut after = Vec::new();
        for at in [5u64, 30, 60] {
            tokio::time::sleep(Duration::from_secs(at).saturating_sub(t1.elapsed())).await;
            after.push(format!("{at} s: {}", common::rss_parts(pid)));
        }
        println!("  after the burst: {}", after.join(", "));
        // The code pages were given back after the quiet spell (`memory.releaseAfter`):
        // the next request reads its code again.
        let quiet_request = whoami(&token).await;
        println!(
            "GET /api/v1/whoami: {busy_request:.1} ms while busy, {quiet_request:.1} ms as the first request after the quiet minute, then {}",
            common::rss_parts(pid)
        );

        let t2 = Instant::now();
        for chunk in 0..HOSTS / HOSTS_PER_BATCH {
            let range = chunk * HOSTS_PER_BATCH..(chunk + 1) * HOSTS_PER_BATCH;
            let hosts: Vec<Value> = range
                .clone()
                .map(|h| json!({"name": format!("host{h:05}"), "labels": {"site": format!("s{}", h % 10)}, "spec": {}}))
                .collect();
            let services: Vec<Value> = range
                .flat_map(|h| (0..SERVICES_PER_HOST).map(move |s| json!({"name": format!("svc{s}"), "host": format!("host{h:05}"), "spec": {}})))
                .collect();
            let res: Value = http
                .post(format!("{base}/api/v1/objects:batch"))
                .bearer_auth(&token)
                .json(&json!({"hosts": hosts, "services": services}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(res["failed"], 0, "{res}");
        }
        let loaded = t2.elapsed();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after_load = common::rss_parts(pid);
        // The free heap goes at the release worker's first quiet look (7.5 to 15 s).
        tokio::time::sleep(Duration::from_secs(15)).await;
        println!(
            "{HOSTS} hosts and {} passive services loaded ({:.0} s): 5 s after: {after_load}, 20 s after: {}",
            HOSTS * SERVICES_PER_HOST,
            loaded.as_secs_f64(),
            common::rss_parts(pid)
        );
    });
    let _ = child.kill();
    let _ = child.wait();
}
