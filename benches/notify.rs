//! The notification path on the release server: 1,000 manual alarms opened at once against
//! a policy of 3 steps whose first step pages a contact through a webhook channel to a local
//! receiver, first with 64 posts in flight, then with 8. Figures: deliveries per second (first alarm posted to last request received),
//! p50/p99 from an alert's `openedAt` to the receiver's request, and the server's peak RSS
//! sampled during the run.
//!
//! Run: `cargo bench --bench notify`.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
const ALERTS: usize = 1000;
const IN_FLIGHT: usize = 64;

/// Arrival wall-clock time (ms) per alert id.
type Arrivals = Arc<Mutex<HashMap<String, i64>>>;

async fn receiver() -> (String, Arrivals) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let arrivals: Arrivals = Arc::default();
    let a = arrivals.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let a = a.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let a = a.clone();
                        async move {
                            use http_body_util::BodyExt;
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let at = jiff::Timestamp::now().as_millisecond();
                            let v: Value = serde_json::from_slice(&body).unwrap();
                            a.lock()
                                .unwrap()
                                .insert(v["alert"]["id"].as_str().unwrap().to_string(), at);
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                http_body_util::Full::new(bytes::Bytes::from_static(b"ok")),
                            ))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, arrivals)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Opens `ALERTS` alarms with `in_flight` posts at a time and prints what it took until the
/// receiver had every one.
async fn run(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    arrivals: &Arrivals,
    in_flight: usize,
) {
    let t0 = Instant::now();
    let opened: Vec<(String, i64, f64)> = futures_util::stream::iter(0..ALERTS)
        .map(|i| {
            let req = http
                .post(format!("{base}/api/v1/alerts"))
                .bearer_auth(token)
                .json(&json!({"title": format!("alarm {i}"), "escalationPolicy": "page"}));
            async move {
                let sent = Instant::now();
                let v: Value = req.send().await.unwrap().json().await.unwrap();
                let answered = sent.elapsed().as_secs_f64() * 1000.0;
                let at: jiff::Timestamp = v["openedAt"].as_str().unwrap().parse().unwrap();
                (
                    v["id"].as_str().unwrap().to_string(),
                    at.as_millisecond(),
                    answered,
                )
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    while arrivals.lock().unwrap().len() < ALERTS {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "deliveries stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = t0.elapsed().as_secs_f64();
    let arrivals = arrivals.lock().unwrap().clone();
    let mut latencies: Vec<f64> = opened
        .iter()
        .map(|(id, at, _)| (arrivals[id] - at).max(0) as f64)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let mut answers: Vec<f64> = opened.iter().map(|(_, _, ms)| *ms).collect();
    answers.sort_by(f64::total_cmp);
    println!(
        "svc notification path, {ALERTS} alarms opened at once ({in_flight} in flight), a 3-step policy, webhook to a local receiver:"
    );
    println!(
        "  deliveries: {:>7.0} per second (first post to last request received, {took:.2} s)",
        ALERTS as f64 / took
    );
    println!(
        "  alert opened to receiver's request: p50 {:.0} ms, p99 {:.0} ms",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
    println!(
        "  alarm POST answered (part of the above): p50 {:.0} ms, p99 {:.0} ms",
        percentile(&answers, 0.5),
        percentile(&answers, 0.99)
    );
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    // Floods off: a thousand alarms at once would otherwise be held as one (the default
    // `enterAt` is 10 alerts), and the bench measures each page's way to its receiver.
    let config = dir.path().join("svc.yaml");
    std::fs::write(
        &config,
        "alerting:\n  flood: {enterAt: {alerts: 0, within: 10m}}\n",
    )
    .unwrap();
    let args = ["--config".to_string(), config.display().to_string()];
    let (mut child, base) = common::start_with(&data, false, &args);
    let pid = child.id();
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::builder().build().unwrap();
        let (url, arrivals) = receiver().await;
        for (path, body) in [
            ("channels", json!({"name": "hook", "type": "webhook", "config": {"url": url}})),
            ("contacts", json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("escalation-policies", json!({"name": "page", "steps": [
                {"after": 0, "notify": {"contact": "ada"}},
                {"after": "10m", "notify": {"contact": "ada"}},
                {"after": "20m", "notify": {"contact": "ada"}}]})),
        ] {
            let res = http.post(format!("{base}/api/v1/{path}")).bearer_auth(&token).json(&body).send().await.unwrap();
            assert_eq!(res.status(), 201, "{path}");
        }
        let idle = common::rss_mb(pid);
        let idle_parts = (common::rss_parts(pid), common::threads(pid));
        // The highest RSS, what it held then, and the most threads seen.
        let peak = Arc::new(Mutex::new((idle, idle_parts.0.clone(), idle_parts.1)));
        let sampling = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    {
                        let (now, threads) = (common::rss_mb(pid), common::threads(pid));
                        let mut p = peak.lock().unwrap();
                        if now > p.0 {
                            (p.0, p.1) = (now, common::rss_parts(pid));
                        }
                        p.2 = p.2.max(threads);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        for in_flight in [IN_FLIGHT, 8] {
            arrivals.lock().unwrap().clear();
            run(&http, &base, &token, &arrivals, in_flight).await;
        }
        sampling.abort();
        let (peak, parts, threads) = peak.lock().unwrap().clone();
        println!("  server RSS: {idle:.1} MiB before, peak {peak:.1} MiB during the run");
        println!(
            "  before: {}, {} threads; at the peak: {parts}; most threads: {threads}",
            idle_parts.0, idle_parts.1
        );
    });
    let _ = child.kill();
    let _ = child.wait();
}
