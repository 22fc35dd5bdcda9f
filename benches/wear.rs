//! What a gateway's steady load writes to its card (issue 72, item 6): the release server with
//! 100 passive services, measured by the kernel's `write_bytes` of its process
//! (`/proc/<pid>/io`) over three windows: idle; 100 services reporting once a minute with no
//! state change (the results spread evenly over the minute, as independent checks arrive);
//! and a flood of alert-opening events. Each window's bytes are printed with what they make a
//! day, and the server's own counter (`/system/health`'s `wear`) is printed beside the
//! kernel's.
//!
//! The steady load runs for whole sync periods (`REFRESH_SYNC`): what only refreshes is synced
//! once a period, at its end, so a window of N periods, and a few seconds after the last for its
//! sync, holds N syncs of each file and the results they made durable; a window of any other
//! length would count a part of a period's sync for all of it or none.
//!
//! Run: `cargo bench --bench wear` (`SVC_WEAR_PERIODS` sets the load window in periods of 10
//! minutes, 2 by default; the idle window is a minute).

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

const SERVICES: usize = 100;
const FLOOD: usize = 5000;
/// The steady load's results in a day: each service once a minute.
const RESULTS_A_DAY: f64 = SERVICES as f64 * 1440.0;
/// The longest the store leaves what only refreshes unsynced (`REFRESH_SYNC` in the committer,
/// `SYNC_WITHIN` in the metric file).
const REFRESH_SYNC: Duration = Duration::from_secs(600);
/// After the load window, how long its last period's syncs take to come and finish.
const SYNC_SETTLES: Duration = Duration::from_secs(15);

fn write_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn per_day(bytes: u64, window: Duration) -> f64 {
    bytes as f64 * 86_400.0 / window.as_secs_f64() / 1e6
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let periods: u32 = std::env::var("SVC_WEAR_PERIODS")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(2);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut server, base) = common::start(&data, false);
    let pid = server.id();
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let host = json!({"name": "gw", "spec": {}});
        let services: Vec<Value> = (0..SERVICES)
            .map(|i| json!({"name": format!("s{i}"), "host": "gw", "spec": {"maxCheckAttempts": 1}}))
            .collect();
        common::post_json(&http, &base, &token, "/api/v1/objects:batch", json!({"hosts": [host], "services": services})).await;
        let results: Vec<Value> = (0..SERVICES)
            .map(|i| json!({"host": "gw", "service": format!("s{i}"), "state": 0, "output": "OK - 42 °C|temp=42;60;80"}))
            .collect();
        common::post_json(&http, &base, &token, "/api/v1/results", json!({"results": results})).await;
        tokio::time::sleep(Duration::from_secs(5)).await;

        let idle = Duration::from_secs(60);
        let w0 = write_bytes(pid);
        tokio::time::sleep(idle).await;
        let idle_bytes = write_bytes(pid) - w0;
        println!("idle, {} s: {idle_bytes} bytes written ({:.2} MB a day)", idle.as_secs(), per_day(idle_bytes, idle));

        // Once a minute per service, evenly spread: one result every 600 ms.
        let window = REFRESH_SYNC * periods;
        let every = Duration::from_millis(60_000 / SERVICES as u64);
        let w0 = write_bytes(pid);
        let start = Instant::now();
        let mut sent = 0usize;
        while start.elapsed() < window {
            let i = sent % SERVICES;
            let value = 40 + (sent / SERVICES) % 5;
            let result = json!({"results": [{"host": "gw", "service": format!("s{i}"), "state": 0,
                "output": format!("OK - {value} °C|temp={value};60;80")}]});
            common::post_json(&http, &base, &token, "/api/v1/results", result).await;
            sent += 1;
            let next = every * sent as u32;
            if let Some(wait) = next.checked_sub(start.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        // The last period's sync comes as the window ends.
        tokio::time::sleep(SYNC_SETTLES).await;
        let load_bytes = write_bytes(pid) - w0;
        let per_result = load_bytes as f64 / sent as f64;
        println!(
            "{SERVICES} services once a minute, no state change, {periods} sync periods ({} min) and their syncs: {sent} results, {load_bytes} bytes written ({per_result:.0} bytes a result, {:.1} MB a day at {RESULTS_A_DAY} results a day)",
            window.as_secs() / 60,
            per_result * RESULTS_A_DAY / 1e6,
        );

        let w0 = write_bytes(pid);
        let start = Instant::now();
        for chunk in (0..FLOOD).collect::<Vec<_>>().chunks(500) {
            let alarms: Vec<Value> = chunk
                .iter()
                .map(|n| json!({"host": "gw", "service": format!("s{}", n % SERVICES), "state": if n % 2 == 0 { 2 } else { 0 }, "output": format!("flood {n}")}))
                .collect();
            common::post_json(&http, &base, &token, "/api/v1/results", json!({"results": alarms})).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let flood_bytes = write_bytes(pid) - w0;
        println!(
            "a flood of {FLOOD} state changes in batches of 500 ({:.1} s, then 5 s to settle): {flood_bytes} bytes written ({:.0} bytes a change)",
            start.elapsed().as_secs_f64() - 5.0,
            flood_bytes as f64 / FLOOD as f64
        );
        let health = common::get_json(&http, &base, &token, "/api/v1/system/health").await;
        println!(
            "the server's own count: {} bytes since start; the kernel's: {} bytes",
            health["wear"]["writtenTotal"],
            write_bytes(pid)
        );
    });
    let _ = server.kill();
    let _ = server.wait();
}
