//! One cause, one page (issue 69) on the release server, paging a webhook receiver:
//! - site outage: a router with 40 hosts depending on it goes down (one batch of results);
//!   then it recovers with 2 hosts still down. Figures: pages per cause and the time from the
//!   router's hard DOWN to its page, and from its recovery to the pages of the 2 still down.
//! - flood: 50 hosts of one site go down within a second (`alerting.flood` with `enterAt` 10
//!   within 10m, `digestEvery` 2s). Figures: pages sent (alone and as digests), alerts per
//!   page, and the time from the first DOWN to the first digest.
//!
//! Target: one page per cause, within 2 s of the parent's hard state on this machine.
//!
//! Run: `cargo bench --bench noise`.

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
#[allow(dead_code)]
#[path = "../tests/it/receiver.rs"]
mod receiver;

fn results(hosts: &[String], state: &str) -> Value {
    json!({"results": hosts.iter().map(|h| json!({"host": h, "state": state, "output": state})).collect::<Vec<_>>()})
}

/// The pages that reached `/hook` (alerts and digests), with when each arrived.
fn pages(hooks: &receiver::Receiver) -> Vec<Value> {
    hooks
        .received("/hook")
        .iter()
        .map(|r| r.json())
        .filter(|b| b["kind"] == "alert" || b["kind"] == "digest")
        .collect()
}

/// Waits until `/hook` has `n` pages (or 30 s); the time it took from `since`.
async fn pages_by(hooks: &receiver::Receiver, n: usize, since: Instant) -> Duration {
    while pages(hooks).len() < n {
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "{n} pages never came"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    since.elapsed()
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.path().join("svc.yaml");
    std::fs::write(
        &config,
        "alerting:\n  flood: {scopeLabel: site, digestEvery: 2s, leaveAt: {alerts: 5, within: 5s}}\n",
    )
    .unwrap();
    let token = common::bootstrap(&data);
    let args = ["--config".to_string(), config.display().to_string()];
    let (mut child, base) = common::start_with(&data, false, &args);
    let http = reqwest::Client::new();
    let hooks = receiver::Receiver::start().await;
    let router: Vec<String> = vec!["router".into()];
    let behind: Vec<String> = (0..40).map(|i| format!("cell{i:02}")).collect();
    let site: Vec<String> = (0..50).map(|i| format!("plant{i:02}")).collect();
    let mut bodies = vec![
        (
            "/api/v1/channels",
            json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "down", "match": "event.type == 'state_change' && event.state in ['DOWN', 'UNREACHABLE']",
            "severity": "critical", "escalationPolicy": "page"}),
        ),
        (
            "/api/v1/hosts",
            json!({"name": "router", "labels": {"site": "east"}, "spec": {}}),
        ),
    ];
    for h in &behind {
        bodies.push(("/api/v1/hosts", json!({"name": h, "labels": {"site": "east"}, "spec": {"dependsOn": [{"object": "router"}]}})));
    }
    for h in &site {
        bodies.push((
            "/api/v1/hosts",
            json!({"name": h, "labels": {"site": "west"}, "spec": {}}),
        ));
    }
    for (path, body) in bodies {
        common::post_json(&http, &base, &token, path, body).await;
    }

    println!("site outage: a router and the 40 hosts behind it go down at once");
    let mut all = router.clone();
    all.extend(behind.iter().cloned());
    let down = Instant::now();
    common::post_json(
        &http,
        &base,
        &token,
        "/api/v1/results",
        results(&all, "DOWN"),
    )
    .await;
    let to_page = pages_by(&hooks, 1, down).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let outage_pages = pages(&hooks).len();
    println!("  pages for 1 cause (41 hosts down): {outage_pages}");
    println!(
        "  router's hard DOWN to its page: {} ms",
        to_page.as_millis()
    );
    let mut up = router.clone();
    up.extend(behind[2..].iter().cloned());
    let back = Instant::now();
    common::post_json(&http, &base, &token, "/api/v1/results", results(&up, "UP")).await;
    let to_pages = pages_by(&hooks, outage_pages + 2, back).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = pages(&hooks).len() - outage_pages;
    println!("  pages when the router is back with 2 hosts still down: {after}");
    println!("  recovery to the 2 pages: {} ms", to_pages.as_millis());

    println!("flood: 50 hosts of one site go down within a second (digest every 2 s)");
    let before = pages(&hooks).len();
    let flood = Instant::now();
    for chunk in site.chunks(10) {
        common::post_json(
            &http,
            &base,
            &token,
            "/api/v1/results",
            results(chunk, "DOWN"),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let mut first_digest = None;
    while first_digest.is_none() {
        assert!(flood.elapsed() < Duration::from_secs(30), "no digest");
        if pages(&hooks)[before..]
            .iter()
            .any(|p| p["kind"] == "digest")
        {
            first_digest = Some(flood.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The flood ends 5 s after the last open with a last digest of anything still held.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let sent = &pages(&hooks)[before..];
    let alone = sent.iter().filter(|p| p["kind"] == "alert").count();
    let digests: Vec<&Value> = sent.iter().filter(|p| p["kind"] == "digest").collect();
    let in_digests: usize = digests
        .iter()
        .map(|d| {
            d["params"]["count"]
                .as_str()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    println!(
        "  pages for 50 alerts: {} ({alone} alone before the flood, {} digests of {in_digests} alerts)",
        sent.len(),
        digests.len()
    );
    println!("  alerts per page: {:.1}", 50.0 / sent.len().max(1) as f64);
    println!(
        "  first DOWN to the first digest: {} ms",
        first_digest.unwrap().as_millis()
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
