//! Platform figures for docs/performance.md: binary size, start-up time to `/healthz`, idle resident
//! memory, and requests per second with latency percentiles for an authenticated
//! `GET /api/v1/whoami` (token, cached verification) against an unauthenticated `GET /healthz`,
//! measured in one run against the release binary.
//!
//! Run: `cargo bench --bench platform` (client and server share this machine's cores).

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

const CONNECTIONS: usize = 32;
const SECONDS: u64 = 5;

/// Whether `GET /healthz` answers 200 on `addr`.
fn healthz_ok(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).is_ok() && &buf == b"HTTP/1.1 200"
}

/// Starts the server (seeding the default admin, as a first start does); returns it, its base
/// URL and the time until `/healthz` answered 200.
fn start(data: &std::path::Path) -> (Child, String, Duration) {
    let t0 = Instant::now();
    let (child, base) = common::start(data, true);
    let addr = base.trim_start_matches("http://").to_string();
    while !healthz_ok(&addr) {
        std::thread::sleep(Duration::from_millis(1));
    }
    (child, base, t0.elapsed())
}

struct Load {
    rps: f64,
    p50: Duration,
    p99: Duration,
    errors: usize,
}

async fn load(url: String, token: Option<String>) -> Load {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let (client, url, token, stop) = (client.clone(), url.clone(), token.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let mut req = client.get(&url);
                if let Some(tok) = &token {
                    req = req.bearer_auth(tok);
                }
                match req.send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        lat.push(t.elapsed());
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs(SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.expect("task");
        all.extend(lat);
        errors += e;
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Load {
        rps: all.len() as f64 / SECONDS as f64,
        p50: pct(0.50),
        p99: pct(0.99),
        errors,
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let bin = common::bin();
    let size = std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0);
    println!("binary: {bin} ({:.1} MiB)", size as f64 / 1_048_576.0);

    let (mut first, _, first_start) = start(&data);
    let _ = first.kill();
    let _ = first.wait();
    let token = common::bootstrap(&data);

    let (mut child, base, restart) = start(&data);
    println!(
        "start-up to /healthz 200: first start {:.0} ms (creates the store, seeds the default admin: one argon2id hash), restart {:.0} ms",
        first_start.as_secs_f64() * 1e3,
        restart.as_secs_f64() * 1e3
    );
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "resident memory, idle after start: {:.1} MiB",
        common::rss_mb(child.id())
    );

    let rt = common::runtime();
    rt.block_on(async {
        // Warm up both paths; the first token request pays one argon2id verification.
        let _ = load(format!("{base}/healthz"), None).await;
        let _ = load(format!("{base}/api/v1/whoami"), Some(token.clone())).await;
        println!("{CONNECTIONS} connections, {SECONDS} s each:");
        for (name, path, tok) in [
            ("GET /healthz (anonymous)", "/healthz", None),
            (
                "GET /api/v1/whoami (token, cached)",
                "/api/v1/whoami",
                Some(token.clone()),
            ),
        ] {
            let l = load(format!("{base}{path}"), tok).await;
            println!(
                "  {name:<36} {:>8.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  errors {}",
                l.rps,
                l.p50.as_secs_f64() * 1e3,
                l.p99.as_secs_f64() * 1e3,
                l.errors
            );
        }
    });
    println!(
        "resident memory after load: {:.1} MiB",
        common::rss_mb(child.id())
    );
    let _ = child.kill();
    let _ = child.wait();
}
