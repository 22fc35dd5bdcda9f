//! How often an idle server syncs its disk (issue 35: gateways boot from SD cards): the release
//! server with objects, alert rules with a heartbeat rule, a pending rule, a snoozed alert, a
//! schedule, a heartbeat, a silence, a flexible downtime and a federation site, left alone
//! after a warm-up; `strace -c` counts its system calls over the window: the syncs, the
//! runtime's wake-ups (epoll waits) and all of them.
//!
//! Run: `cargo bench --bench idle` (needs `strace`; `SVC_IDLE_SECONDS` sets the window, 60 by
//! default).

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

mod common;

/// System calls of `pid` (and its threads) over `window`, by name, as `strace -c` counts them.
fn syscalls(pid: u32, window: Duration) -> std::collections::BTreeMap<String, u64> {
    let out = tempfile::NamedTempFile::new().expect("tempfile");
    let status = Command::new("timeout")
        .arg(window.as_secs().to_string())
        .args(["strace", "-qq", "-f", "-c", "-o"])
        .arg(out.path())
        .args(["-p", &pid.to_string()])
        .status()
        .expect("strace (Debian: strace)");
    // `timeout` ends strace with SIGTERM (exit 124), after which it writes its summary.
    assert!(
        status.code() == Some(124) || status.success(),
        "strace: {status}"
    );
    // Rows: `% time, seconds, usecs/call, calls, [errors,] syscall`; the last row is the total.
    std::fs::read_to_string(out.path())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let calls = fields.get(3)?.parse::<u64>().ok()?;
            Some((fields.last()?.to_string(), calls))
        })
        .collect()
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let window = Duration::from_secs(
        std::env::var("SVC_IDLE_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut server, base) = common::start(&data, false);
    let client = reqwest::Client::new();
    let now = jiff::Timestamp::now();
    let later = |h: i64| (now + jiff::SignedDuration::from_hours(h)).to_string();
    for (path, body) in [
        (
            "/api/v1/hosts",
            json!({"name": "gw", "labels": {"site": "north"}, "spec": {"address": "127.0.0.1", "stalenessAfter": 3600}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "door", "host": "gw", "spec": {"stalenessAfter": 3600}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "crit", "match": "event.type == 'state_change' && event.state == 'CRITICAL'", "severity": "critical"}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "slow", "match": "event.type == 'ingress'", "severity": "warning", "pendingFor": "2h"}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "pulse", "severity": "critical", "heartbeat": {"source": "plc", "expectEvery": "2h"}}),
        ),
        ("/api/v1/contacts", json!({"name": "ada"})),
        (
            "/api/v1/schedules",
            json!({"name": "ops", "timeZone": "UTC", "layers": [{"unit": "weekly", "anchor": "2026-01-05T08:00:00Z", "participants": ["ada"]}]}),
        ),
        (
            "/api/v1/heartbeats",
            json!({"name": "backup-job", "expectEvery": "2h"}),
        ),
        (
            "/api/v1/silences",
            json!({"comment": "lab", "selector": "site=lab", "expiresAt": later(4)}),
        ),
        (
            "/api/v1/downtimes",
            json!({"comment": "maintenance", "selector": "site=north", "type": "flexible", "duration": "1h", "start": later(-1), "end": later(3)}),
        ),
        ("/api/v1/sites", json!({"name": "south"})),
        (
            "/api/v1/event-sources",
            json!({"name": "hooks", "type": "webhook", "authMode": "none"}),
        ),
    ] {
        common::post_json(&client, &base, &token, path, body).await;
    }
    // A snoozed alert, and an event held by the pending rule.
    let alert: Value = client
        .post(format!("{base}/api/v1/alerts"))
        .bearer_auth(&token)
        .json(&json!({"title": "Compressor stopped"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = alert["id"].as_str().unwrap();
    common::post_json(
        &client,
        &base,
        &token,
        &format!("/api/v1/alerts/{id}:snooze"),
        json!({"duration": "3h"}),
    )
    .await;
    common::post_json(
        &client,
        &base,
        &token,
        "/api/v1/ingest/hooks",
        json!({"summary": "held"}),
    )
    .await;
    common::post_json(
        &client,
        &base,
        &token,
        "/api/v1/results",
        json!({"results": [{"host": "gw", "service": "door", "state": 0, "output": "OK"}]}),
    )
    .await;
    // What the writes above set going (journal filing, consumers) settles first.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let calls = syscalls(server.id(), window);
    let count = |names: &[&str]| -> u64 { names.iter().filter_map(|n| calls.get(*n)).sum() };
    let per_minute = |n: u64| n as f64 * 60.0 / window.as_secs_f64();
    let syncs = count(&["fsync", "fdatasync"]);
    let waits = count(&["epoll_wait", "epoll_pwait", "epoll_pwait2"]);
    let all = count(&["total"]);
    println!(
        "idle server (objects, rules incl. pending and heartbeat rules, a snoozed alert, a schedule, a heartbeat, a silence, a flexible downtime, a site):"
    );
    let secs = window.as_secs();
    println!(
        "  fsync + fdatasync in {secs} s: {syncs} ({:.1} a minute)",
        per_minute(syncs)
    );
    println!(
        "  epoll waits (wake-ups of the runtime) in {secs} s: {waits} ({:.1} a minute)",
        per_minute(waits)
    );
    println!(
        "  system calls in {secs} s: {all} ({:.1} a minute)",
        per_minute(all)
    );
    let _ = server.kill();
    let _ = server.wait();
}
