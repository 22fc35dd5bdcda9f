//! The alert path on the release server: 10,000 passive services flipping between OK and
//! CRITICAL through the results pipeline, first with no alert rules, then with 200 enabled CEL
//! rules (each service's labels match exactly one; every CRITICAL opens an alert, every OK
//! clears it). Figures: results per second without and with the rules (end to end: results
//! accepted and their events stored), state changes the alert engine evaluates per second
//! (until its consumer position reaches the newest event), and p50/p99 from a result accepted
//! to its `alert_opened` alert readable. The same alerts go to Prometheus Alertmanager's
//! `POST /api/v2/alerts` when `/usr/bin/prometheus-alertmanager` is installed (Debian package
//! `prometheus-alertmanager`): alerts per second accepted, and p50/p99 from the post to the
//! alert readable on `GET /api/v2/alerts`.
//!
//! Run: `cargo bench --bench alerts`; with `SVC_BENCH_MAIN_POSTGRES_URL=postgres://…` the server
//! keeps its store in that (empty) PostgreSQL database, and a second process serves beside it
//! (`SVC_BENCH_PROCESSES`, default 2, says how many serve in all; the alert engine's partitions
//! are shared out among them before anything is measured); the latency is then also measured
//! with the results posted to the second process and the alerts read there.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
const SERVICES: usize = 10_000;
const RULES: usize = 200;
const BATCH: usize = 500;
const IN_FLIGHT: usize = 16;
const LATENCY_SAMPLES: usize = 200;

fn result(i: usize, round: usize) -> Value {
    let state = if round.is_multiple_of(2) { 2 } else { 0 };
    json!({"host": "bench", "service": format!("s{i}"), "state": state, "output": format!("round {round}")})
}

/// Posts `rounds` flips of every service in batches; returns results per second once the
/// last result's event is stored (an event read waits for everything queued before it).
async fn flip(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    first_round: usize,
    rounds: usize,
) -> f64 {
    let total = SERVICES * rounds;
    let bodies: Vec<Vec<u8>> = (0..total / BATCH)
        .map(|r| {
            let items: Vec<Value> = (0..BATCH)
                .map(|k| {
                    let n = r * BATCH + k;
                    result(n % SERVICES, first_round + n / SERVICES)
                })
                .collect();
            serde_json::to_vec(&json!({ "results": items })).unwrap()
        })
        .collect();
    let t0 = Instant::now();
    futures_util::stream::iter(bodies)
        .map(|body| {
            let req = http
                .post(format!("{base}/api/v1/results"))
                .bearer_auth(token)
                .header("Content-Type", "application/json")
                .body(body);
            async move { assert_eq!(req.send().await.unwrap().status(), 202) }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    common::get_json(http, base, token, "/api/v1/events?limit=1").await;
    total as f64 / t0.elapsed().as_secs_f64()
}

/// Waits until the alert engine's position reaches the newest event in every process.
async fn engine_caught_up(http: &reqwest::Client, bases: &[String], token: &str) {
    for base in bases {
        engine_caught_up_in(http, &bases[0], base, token).await;
    }
}

async fn engine_caught_up_in(http: &reqwest::Client, first: &str, base: &str, token: &str) {
    loop {
        let newest = common::get_json(http, first, token, "/api/v1/events?limit=1").await;
        let newest = newest["items"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let health: Value = http
            .get(format!("{base}/api/v1/system/health"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let position = health["consumers"]["alert-engine"]["position"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if position >= newest {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until every process leads its share of the alert engine's partitions (nothing to
/// wait for where one process serves).
async fn partitions_shared(http: &reqwest::Client, bases: &[String], token: &str) {
    if bases.len() < 2 {
        return;
    }
    let share = 16usize.div_ceil(bases.len());
    let started = Instant::now();
    loop {
        let mut held = Vec::new();
        for base in bases {
            let info = common::get_json(http, base, token, "/api/v1/system/info").await;
            held.push(info["enginePartitions"].as_array().map_or(0, Vec::len));
        }
        if held.iter().sum::<usize>() == 16 && held.iter().all(|n| *n <= share) {
            println!("  the alert engine's partitions led by each process: {held:?}");
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "partitions never shared: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// p50 and p99 in ms from posting one result to its alert being readable.
async fn svc_latency(http: &reqwest::Client, base: &str, token: &str, round: usize) -> (f64, f64) {
    let services = common::get_json(http, base, token, "/api/v1/services?limit=5000").await;
    let ids: std::collections::HashMap<String, String> = services["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut samples = Vec::new();
    for i in 0..LATENCY_SAMPLES {
        let name = format!("s{i}");
        let body = json!({"results": [result(i, round)]});
        let t0 = Instant::now();
        let res = http
            .post(format!("{base}/api/v1/results"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202);
        // Round by round every alert is cleared, so the sample's service has an open one
        // only once its result was decided (reopened, by the rule's default window).
        let open = format!("/api/v1/alerts?status=open&objectId={}&limit=1", ids[&name]);
        loop {
            let v = common::get_json(http, base, token, &open).await;
            if v["items"][0]["objectId"] == ids[&name].as_str() {
                break;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        samples.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_alertmanager(dir: &std::path::Path) -> Option<(Child, u16)> {
    let bin = "/usr/bin/prometheus-alertmanager";
    if !std::path::Path::new(bin).exists() {
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("alertmanager.yml");
    std::fs::write(
        &config,
        "route:\n  receiver: none\n  group_wait: 1h\nreceivers:\n  - name: none\n",
    )
    .unwrap();
    let port = free_port();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    Some((child, port))
}

fn am_alert(i: usize) -> Value {
    json!({"labels": {"alertname": format!("r{}", i % RULES), "service": format!("s{i}"), "severity": "critical"}, "annotations": {"summary": format!("bench/s{i} is CRITICAL")}})
}

async fn alertmanager(http: &reqwest::Client, port: u16) -> (f64, f64, f64) {
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if http
            .get(format!("{base}/-/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let total = SERVICES * 4;
    let bodies: Vec<Vec<u8>> = (0..total / BATCH)
        .map(|r| {
            serde_json::to_vec(
                &(0..BATCH)
                    .map(|k| am_alert((r * BATCH + k) % SERVICES))
                    .collect::<Vec<_>>(),
            )
            .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    futures_util::stream::iter(bodies)
        .map(|body| {
            let req = http
                .post(format!("{base}/api/v2/alerts"))
                .header("Content-Type", "application/json")
                .body(body);
            async move { assert_eq!(req.send().await.unwrap().status(), 200) }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let rate = total as f64 / t0.elapsed().as_secs_f64();
    let mut samples = Vec::new();
    for i in 0..LATENCY_SAMPLES {
        let alert = json!([{"labels": {"alertname": "latency", "sample": format!("{i}")}}]);
        let t0 = Instant::now();
        assert_eq!(
            http.post(format!("{base}/api/v2/alerts"))
                .json(&alert)
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let url = format!("{base}/api/v2/alerts?filter=sample%3D%22{i}%22");
        loop {
            let v: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
            if v.as_array().is_some_and(|a| !a.is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        samples.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    (rate, percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let main_env = common::main_storage();
    let token = common::bootstrap_in(&data, &main_env);
    let (mut child, base) = common::start_in(&data, "127.0.0.1:0", false, &[], &main_env);
    // On PostgreSQL, more processes on the database, serving beside the first.
    let processes: usize = match std::env::var("SVC_BENCH_PROCESSES") {
        Ok(n) => n.parse().expect("SVC_BENCH_PROCESSES: a number"),
        Err(_) if main_env.is_empty() => 1,
        Err(_) => 2,
    };
    let beside: Vec<(Child, String)> = (1..processes)
        .map(|n| {
            let data_n = dir.path().join(format!("beside{n}"));
            common::beside(&data, &data_n);
            common::start_in(&data_n, "127.0.0.1:0", false, &[], &main_env)
        })
        .collect();
    if !beside.is_empty() {
        println!("{processes} svc processes serve the same database");
    }
    let bases: Vec<String> = std::iter::once(base.clone())
        .chain(beside.iter().map(|(_, b)| b.clone()))
        .collect();
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::builder().build().unwrap();
        partitions_shared(&http, &bases, &token).await;
        let host = json!({"name": "bench", "spec": {}});
        let services: Vec<Value> = (0..SERVICES)
            .map(|i| json!({"name": format!("s{i}"), "host": "bench", "labels": {"shard": format!("{}", i % RULES)}, "spec": {}}))
            .collect();
        let res: Value = http.post(format!("{base}/api/v1/objects:batch")).bearer_auth(&token).json(&json!({"hosts": [host], "services": services})).send().await.unwrap().json().await.unwrap();
        assert_eq!(res["failed"], 0, "{res}");
        // Round 1 (OK) gives every service its first state.
        flip(&http, &base, &token, 1, 1).await;
        let without = flip(&http, &base, &token, 2, 4).await;
        for k in 0..RULES {
            let rule = json!({"name": format!("r{k}"), "match": format!("event.type == 'state_change' && event.labels.shard == '{k}' && event.state == 'CRITICAL'"), "severity": "critical"});
            assert_eq!(http.post(format!("{base}/api/v1/alert-rules")).bearer_auth(&token).json(&rule).send().await.unwrap().status(), 201);
        }
        engine_caught_up(&http, &bases, &token).await;
        let t0 = Instant::now();
        let with = flip(&http, &base, &token, 6, 4).await;
        engine_caught_up(&http, &bases, &token).await;
        let evaluated = (SERVICES * 4) as f64 / t0.elapsed().as_secs_f64();
        let alerts: Value = http.get(format!("{base}/api/v1/alerts?limit=1000")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        assert!(alerts["items"].as_array().is_some_and(|a| !a.is_empty()), "alerts opened");
        // Round 9 was OK: every alert is cleared; round 10 (CRITICAL) opens one per sample.
        let (p50, p99) = svc_latency(&http, &base, &token, 10).await;
        println!("svc alert path, {SERVICES} services flipping OK/CRITICAL, {RULES} CEL rules, batches of {BATCH}, {IN_FLIGHT} in flight:");
        println!("  results without rules: {without:>9.0} results/s");
        println!("  results with rules:    {with:>9.0} results/s ({:+.1} %)", (with / without - 1.0) * 100.0);
        println!("  state changes evaluated by the alert engine (to caught up): {evaluated:>9.0} events/s");
        println!("  result accepted to alert readable: p50 {p50:.1} ms, p99 {p99:.1} ms ({LATENCY_SAMPLES} samples)");
        if let Some((_, second_base)) = beside.first() {
            // Round 11 (OK) clears every alert; round 12 opens them, through the second process.
            flip(&http, &base, &token, 11, 1).await;
            engine_caught_up(&http, &bases, &token).await;
            let (p50, p99) = svc_latency(&http, second_base, &token, 12).await;
            println!("  the same, posted to and read from the second process: p50 {p50:.1} ms, p99 {p99:.1} ms");
        }
        // Those beside first: one would take the lead from the killed server.
        for (mut process, _) in beside {
            let _ = process.kill();
            let _ = process.wait();
        }
        let _ = child.kill();
        let _ = child.wait();
        match start_alertmanager(&dir.path().join("alertmanager")) {
            Some((mut am, port)) => {
                let (rate, p50, p99) = alertmanager(&http, port).await;
                println!("Prometheus Alertmanager POST /api/v2/alerts, same alerts in batches of {BATCH}: {rate:>9.0} alerts/s; post to readable p50 {p50:.1} ms, p99 {p99:.1} ms");
                let _ = am.kill();
                let _ = am.wait();
            }
            None => println!("Alertmanager reference: not measured (apt-get install prometheus-alertmanager)"),
        }
    });
}
