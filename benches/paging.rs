//! Paging through local hardware on the release server: SMS sends per minute through the
//! simulated GSM modem and page latency through the simulated ESPA 4.4.4 paging system, at
//! 115200 and 9600 baud. A pseudo-terminal carries bytes at memory speed, so the simulators
//! pace their side of the line at the baud rate (10 bits a character), and the figures say
//! how busy the line was: near 100 % means the serial line, not svc, is the limit. Also the
//! server's RSS with all three drivers running (GSM, ESPA, a Modbus RTU check every second).
//! The simulators are the integration tests' own (tests/it), written from the standards.
//!
//! Run: `cargo bench --bench paging` (needs socat).

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
#[allow(dead_code)]
#[path = "../tests/it/espa_peer.rs"]
mod espa_peer;
#[allow(dead_code)]
#[path = "../tests/it/modem_sim.rs"]
mod modem_sim;
#[allow(dead_code)]
#[path = "../tests/it/pty.rs"]
mod pty;

/// A Modbus unit whose holding register 100 reads 215.
#[derive(Clone)]
struct Unit;

impl tokio_modbus::server::Service for Unit {
    type Request = tokio_modbus::Request<'static>;
    type Response = tokio_modbus::Response;
    type Exception = tokio_modbus::ExceptionCode;
    type Future = std::future::Ready<Result<Self::Response, Self::Exception>>;

    fn call(&self, req: Self::Request) -> Self::Future {
        std::future::ready(match req {
            tokio_modbus::Request::ReadHoldingRegisters(_, n) => {
                Ok(tokio_modbus::Response::ReadHoldingRegisters(vec![
                    215;
                    n as usize
                ]))
            }
            _ => Err(tokio_modbus::ExceptionCode::IllegalFunction),
        })
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn ready(http: &reqwest::Client, base: &str) {
    let t0 = Instant::now();
    while http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "devices never ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn run(baud: u64, messages: usize, pages: usize) {
    let gsm = pty::PtyPair::open("paging bench").expect("socat is needed");
    let espa = pty::PtyPair::open("paging bench").unwrap();
    let modbus = pty::PtyPair::open("paging bench").unwrap();
    let sim = modem_sim::ModemSim::start_paced(&gsm.theirs, baud);
    let peer = espa_peer::EspaPeer::start_paced(&espa.theirs, baud);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("svc.yaml");
    std::fs::write(
        &config,
        format!(
            "hardware:\n  gsm:\n    device: {}\n    baudRate: {baud}\n  espa:\n    device: {}\n    baudRate: {baud}\n",
            gsm.ours.display(),
            espa.ours.display()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut child, base) = common::start_with(
        &data,
        false,
        &["--config".into(), config.display().to_string()],
    );
    let pid = child.id();
    let rt = common::runtime();
    rt.block_on(async {
        let unit = tokio_modbus::server::rtu::Server::new_from_path(&modbus.theirs, baud as u32)
            .unwrap();
        tokio::spawn(unit.serve_forever(Unit));
        let http = reqwest::Client::new();
        ready(&http, &base).await;
        let device = modbus.ours.display().to_string();
        for (path, body) in [
            ("/api/v1/channels", json!({"name": "gsm", "type": "sms"})),
            ("/api/v1/channels", json!({"name": "pager", "type": "espa"})),
            ("/api/v1/contacts", json!({"name": "ada", "phone": "+491701234567", "preferences": [{"channels": ["gsm"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]})),
            ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
            ("/api/v1/services", json!({"name": "tank", "host": "plc", "spec": {"checkCommand": "modbus", "interval": 1,
                "args": ["-D", device, "-b", baud.to_string(), "-r", "100", "-w", "300"]}})),
        ] {
            common::post_json(&http, &base, &token, path, body).await;
        }
        let idle = common::rss_mb(pid);
        let peak = Arc::new(Mutex::new(idle));
        let sampling = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    {
                        let mut p = peak.lock().unwrap();
                        *p = p.max(common::rss_mb(pid));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let char_s = 10.0 / baud as f64;

        // SMS: `messages` alarms at once, each paging ada by SMS; the modem sends one at a time.
        let (in0, out0) = (
            sim.port.bytes_in.load(Ordering::Relaxed),
            sim.port.bytes_out.load(Ordering::Relaxed),
        );
        let t0 = Instant::now();
        futures_util::stream::iter(0..messages)
            .map(|i| {
                common::post_json(&http, &base, &token, "/api/v1/alerts",
                    json!({"title": format!("tank {i} level high"), "escalationPolicy": "page"}))
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        while sim.sent().len() < messages {
            assert!(t0.elapsed() < Duration::from_secs(300), "SMS stalled at {}", sim.sent().len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = t0.elapsed().as_secs_f64();
        let line_bytes = sim.port.bytes_in.load(Ordering::Relaxed) - in0
            + sim.port.bytes_out.load(Ordering::Relaxed) - out0;
        println!("svc paging through simulated devices at {baud} baud:");
        println!(
            "  SMS: {messages} in {took:.2} s = {:.0} per minute; {} line characters each, line busy {:.0} % of the time",
            messages as f64 / took * 60.0,
            line_bytes / messages as u64,
            line_bytes as f64 * char_s / took * 100.0
        );

        // ESPA: `pages` pages one after another, each answered once the paging system ACKed.
        let mut latencies = Vec::new();
        let t0 = Instant::now();
        for _ in 0..pages {
            let t = Instant::now();
            common::post_json(&http, &base, &token, "/api/v1/channels/pager:test-notification", json!({"target": "550"})).await;
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let took = t0.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        let block = peer.state.lock().unwrap().blocks[0].raw.len();
        // Selection (address, ENQ), its ACK, the block, its ACK, EOT.
        let exchange = (block + 5) as f64 * char_s * 1000.0;
        println!(
            "  ESPA page, API call to the paging system's ACK: p50 {:.1} ms, p99 {:.1} ms ({pages} pages, {:.1} per second); the exchange alone is {} characters = {exchange:.1} ms on the line",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            pages as f64 / took,
            block + 5
        );
        sampling.abort();
        println!(
            "  server RSS with GSM, ESPA and a Modbus RTU check every second: {idle:.1} MiB idle, peak {:.1} MiB",
            *peak.lock().unwrap()
        );
    });
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    run(115_200, 100, 100);
    run(9600, 40, 50);
}
