//! Inventory figures for docs/performance.md: 10,000 hosts with 5 services each created through
//! `POST /api/v1/objects:batch` on the release server (objects per second), then paging through
//! `GET /api/v1/services?selector=...` (latency percentiles per page).
//!
//! Run: `cargo bench --bench objects`.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use serde_json::{Value, json};
use std::time::{Duration, Instant};

mod common;
const HOSTS: usize = 10_000;
const SERVICES_PER_HOST: usize = 5;
const HOSTS_PER_BATCH: usize = 1_000;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut child, base) = common::start(&data, false);
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let t0 = Instant::now();
        let mut created = 0u64;
        for chunk in 0..HOSTS / HOSTS_PER_BATCH {
            let range = chunk * HOSTS_PER_BATCH..(chunk + 1) * HOSTS_PER_BATCH;
            let hosts: Vec<Value> = range
                .clone()
                .map(|h| json!({"name": format!("host{h:05}"), "folder": format!("/site{}", h % 10), "labels": {"site": format!("s{}", h % 10), "env": if h % 2 == 0 { "prod" } else { "dev" }}, "spec": {"address": "127.0.0.1", "interval": "1m"}}))
                .collect();
            let services: Vec<Value> = range
                .flat_map(|h| (0..SERVICES_PER_HOST).map(move |s| json!({"name": format!("svc{s}"), "host": format!("host{h:05}"), "labels": {"site": format!("s{}", h % 10), "check": format!("c{s}")}, "spec": {"checkCommand": "tcp"}})))
                .collect();
            let res: Value = http.post(format!("{base}/api/v1/objects:batch")).bearer_auth(&token).json(&json!({"hosts": hosts, "services": services})).send().await.unwrap().json().await.unwrap();
            assert_eq!(res["failed"], 0, "{res}");
            created += res["created"].as_u64().unwrap();
        }
        let elapsed = t0.elapsed();
        println!(
            "objects:batch: {created} objects ({HOSTS} hosts x {SERVICES_PER_HOST} services) in {:.1} s: {:.0} objects/s ({HOSTS_PER_BATCH} hosts and their services per request)",
            elapsed.as_secs_f64(),
            created as f64 / elapsed.as_secs_f64()
        );
        for (selector, limit) in [("site%3Ds3", 200), ("site%3Ds3,check%20in%20(c0,c1)", 200), ("check%3Dc4", 1000)] {
            let mut lat = Vec::new();
            let mut cursor: Option<String> = None;
            let mut items = 0;
            loop {
                let mut url = format!("{base}/api/v1/services?selector={selector}&limit={limit}");
                if let Some(c) = &cursor {
                    url.push_str(&format!("&cursor={c}"));
                }
                let t = Instant::now();
                let page: Value = http.get(url).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
                lat.push(t.elapsed());
                items += page["items"].as_array().unwrap().len();
                match page["nextCursor"].as_str() {
                    Some(c) => cursor = Some(c.to_string()),
                    None => break,
                }
            }
            lat.sort();
            println!(
                "GET /services?selector={} limit {limit}: {items} services in {} pages, p50 {:.1} ms, p99 {:.1} ms",
                selector.replace("%3D", "=").replace("%20", " "),
                lat.len(),
                pct(&lat, 0.5),
                pct(&lat, 0.99)
            );
        }
    });
    let _ = child.kill();
    let _ = child.wait();
}
