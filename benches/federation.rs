//! Store-and-forward on release servers: an edge whose main is down accumulates the backlog of
//! a busy day (87,000 state changes: a site at one forwardable event a second for 24 hours),
//! then the main comes back; measured are the events forwarded per second over the one
//! connection of the uplink until the backlog is gone, and the edge's resident memory while it
//! replays (sampled every 100 ms), and the uplink bytes sent per forwarded event (the edge's own
//! count, compressed batches with their heartbeats and pulls) against the JSON of an
//! uncompressed batch.
//!
//! Run: `cargo bench --bench federation`; with `SVC_BENCH_MAIN_POSTGRES_URL=postgres://…` the
//! main keeps its store in that (empty) PostgreSQL database.

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

const SERVICES: usize = 1000;
const ROUNDS: usize = 87;
const FORWARDED_TYPES: &str = "state_change,flapping_start,flapping_end,heartbeat_missed,alert_opened,alert_resolved,ack,escalation,notification,incident_update";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A check's output as plugins write them, its figures different in every result, so the
/// compressor sees what a site sends rather than one line again and again.
fn output(service: usize, round: usize, state: u8) -> String {
    let x = (service * 7919 + round * 104_729) % 1000;
    let (word, free) = (if state == 2 { "CRITICAL" } else { "OK" }, 12_000 - x * 11);
    format!(
        "DISK {word} - /var/lib/svc {}.{} % used ({free} MB free), inodes {} %|used={}.{}%;90;95 free={free}MB;;;0;13300",
        x / 10,
        x % 10,
        (x * 37) % 100,
        x / 10,
        x % 10
    )
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let (main_data, edge_data) = (dir.path().join("main"), dir.path().join("edge"));
    let main_env = common::main_storage();
    let main_token = common::bootstrap_in(&main_data, &main_env);
    let edge_token = common::bootstrap(&edge_data);
    let listen = format!("127.0.0.1:{}", free_port());
    let (mut main, main_base) = common::start_in(&main_data, &listen, false, &[], &main_env);
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::new();
        common::post_json(&http, &main_base, &main_token, "/api/v1/sites", json!({"name": "north"})).await;
        let minted = common::post_json(&http, &main_base, &main_token, "/api/v1/api-tokens", json!({"name": "north", "scopes": ["sites:connect"], "site": "north"})).await;
        let site_token = minted["token"].as_str().unwrap().to_string();
        common::stop(&mut main);

        let config = dir.path().join("edge.yaml");
        std::fs::write(&config, format!("site:\n  mainUrl: {main_base}\n  name: north\n  token: {site_token}\n  pullInterval: 1s\n  heartbeatInterval: 1s\n")).unwrap();
        let (mut edge, edge_base) = common::start_with(&edge_data, false, &["--config".into(), config.to_str().unwrap().into()]);
        let host = json!({"name": "bench", "spec": {}});
        let services: Vec<Value> = (0..SERVICES).map(|i| json!({"name": format!("s{i}"), "host": "bench", "spec": {"maxCheckAttempts": 1}})).collect();
        common::post_json(&http, &edge_base, &edge_token, "/api/v1/objects:batch", json!({"hosts": [host], "services": services})).await;
        for round in 0..ROUNDS {
            let state = if round % 2 == 0 { 2 } else { 0 };
            for chunk in (0..SERVICES).collect::<Vec<_>>().chunks(500) {
                let results: Vec<Value> = chunk.iter().map(|i| json!({"host": "bench", "service": format!("s{i}"), "state": state, "output": output(*i, round, state)})).collect();
                common::post_json(&http, &edge_base, &edge_token, "/api/v1/results", json!({"results": results})).await;
            }
        }
        // The backlog is complete once the newest forwardable event is stored.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let newest = common::get_json(&http, &edge_base, &edge_token, &format!("/api/v1/events?types={FORWARDED_TYPES}&limit=1")).await["items"][0]["id"].as_str().unwrap().to_string();
        let pending = common::get_json(&http, &edge_base, &edge_token, "/api/v1/site:status").await;
        println!("backlog on the edge: {} forwardable events pending (counted up to 10,000), main down; edge RSS {:.1} MiB", pending["forward"]["pending"], common::rss_mb(edge.id()));

        // What today's uncompressed forwarding sends per event: the JSON of a batch of 200.
        let sample = common::get_json(&http, &edge_base, &edge_token, &format!("/api/v1/events?types={FORWARDED_TYPES}&limit=200")).await;
        let sample = sample["items"].as_array().unwrap().clone();
        let raw_per_event = serde_json::to_vec(&json!({"events": sample})).unwrap().len() as f64 / sample.len() as f64;
        let sent_before = pending["uplink"]["total"]["sent"].as_u64().unwrap_or(0);

        let (mut main, _) = common::start_in(&main_data, &listen, false, &[], &main_env);
        let edge_pid = edge.id();
        let (mut first, mut t0) = (None::<(u64, Instant)>, Instant::now());
        let mut peak_rss: f64 = 0.0;
        let mut samples: Vec<f64> = Vec::new();
        let limit = Instant::now() + Duration::from_secs(900);
        let forwarded = loop {
            assert!(Instant::now() < limit, "the backlog was not forwarded within 15 minutes");
            tokio::time::sleep(Duration::from_millis(100)).await;
            let rss = common::rss_mb(edge_pid);
            let overview = common::get_json(&http, &main_base, &main_token, "/api/v1/sites:overview").await;
            let count = overview["items"][0]["forwardedEvents"].as_u64().unwrap_or(0);
            if count > 0 && first.is_none() {
                // The clock starts at the first batch received: before it, the edge waited out
                // its back-off from the outage.
                first = Some((count, Instant::now()));
                t0 = Instant::now();
            }
            if first.is_some() {
                peak_rss = peak_rss.max(rss);
                samples.push(rss);
            }
            let status = common::get_json(&http, &edge_base, &edge_token, "/api/v1/site:status").await;
            if status["forward"]["position"].as_str().is_some_and(|p| p >= newest.as_str()) {
                break count;
            }
        };
        let elapsed = t0.elapsed().as_secs_f64();
        let (first_count, _) = first.unwrap();
        let median = {
            samples.sort_by(f64::total_cmp);
            samples.get(samples.len() / 2).copied().unwrap_or(0.0)
        };
        println!("forwarded {forwarded} events over one connection (batches of 200, each confirmed before the position moves):");
        println!("  {:>9.0} events/s ({} events in {elapsed:.1} s after the first batch)", (forwarded - first_count) as f64 / elapsed.max(0.001), forwarded - first_count);
        println!("  edge RSS while replaying: median {median:.1} MiB, peak {peak_rss:.1} MiB");
        let status = common::get_json(&http, &edge_base, &edge_token, "/api/v1/site:status").await;
        let sent = status["uplink"]["total"]["sent"].as_u64().unwrap_or(0) - sent_before;
        let per_event = sent as f64 / forwarded.max(1) as f64;
        println!("uplink bytes sent while replaying (gzip batches, heartbeats and pulls included): {sent} bytes");
        println!("  {per_event:>9.1} bytes per forwarded event, against {raw_per_event:.1} of uncompressed batch JSON ({:.1} %)", per_event / raw_per_event * 100.0);
        common::stop(&mut edge);
        common::stop(&mut main);
    });
}
