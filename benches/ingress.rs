//! Ingress on the release server: events per second through the webhook path (one event per
//! request with 64 in flight, and 100 per request) and the MQTT path (mosquitto, QoS 1) into
//! stored events the alert engine has evaluated (a rule reads every one), and SNMP v2c traps
//! per second received without loss, next to net-snmp's `snmptrapd` logging the same stream.
//!
//! Run: `cargo bench --bench ingress` (needs mosquitto, mosquitto_pub, snmptrap and snmptrapd).

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use futures_util::StreamExt;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const WEBHOOK_EVENTS: usize = 20_000;
const MQTT_EVENTS: usize = 20_000;
const TRAPS: usize = 20_000;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Bench {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Bench {
    async fn get(&self, path: &str) -> Value {
        common::get_json(&self.http, &self.base, &self.token, path).await
    }

    async fn create(&self, path: &str, body: Value) {
        let res = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{path}");
    }

    async fn received(&self, source: &str) -> u64 {
        self.get("/api/v1/system/health").await["ingress"][source]["received"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Waits until the alert engine has committed its work on event `id`.
    async fn evaluated(&self, id: &str) {
        let t0 = Instant::now();
        loop {
            let health = self.get("/api/v1/system/health").await;
            if health["consumers"]["alert-engine"]["position"]
                .as_str()
                .is_some_and(|p| p >= id)
            {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(300),
                "the engine stalled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn newest_ingress(&self) -> String {
        self.get("/api/v1/events?types=ingress&limit=1").await["items"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

async fn webhook(b: &Bench, per_request: usize, in_flight: usize) {
    let requests = WEBHOOK_EVENTS / per_request;
    let url = format!("{}/api/v1/ingest/bench", b.base);
    let t0 = Instant::now();
    let ids: Vec<String> = futures_util::stream::iter(0..requests)
        .map(|i| {
            let body: Vec<Value> = (0..per_request)
                .map(|k| json!({"summary": format!("reading {i}/{k}"), "severity": "info", "labels": {"line": "2"}}))
                .collect();
            let req = b.http.post(&url).json(&body);
            async move {
                let v: Value = req.send().await.unwrap().json().await.unwrap();
                v["eventIds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|id| id.as_str().unwrap().to_string())
                    .max()
                    .unwrap()
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let stored = t0.elapsed().as_secs_f64();
    b.evaluated(ids.iter().max().unwrap()).await;
    let evaluated = t0.elapsed().as_secs_f64();
    println!(
        "  webhook, {per_request} event(s) per request, {in_flight} in flight: {:>6.0} events/s stored, {:>6.0} events/s rule-evaluated ({WEBHOOK_EVENTS} events)",
        WEBHOOK_EVENTS as f64 / stored,
        WEBHOOK_EVENTS as f64 / evaluated
    );
}

async fn mqtt(b: &Bench) {
    let port = free_port();
    // mosquitto drops QoS 1 messages past 1,000 queued for a subscriber by default; the burst
    // is published faster than it is stored, so the queue may grow.
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        conf.path(),
        format!("listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n"),
    )
    .unwrap();
    let mut broker = Command::new("mosquitto")
        .arg("-c")
        .arg(conf.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mosquitto");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.create(
        "/api/v1/event-sources",
        json!({"name": "plant", "type": "mqtt", "config": {"url": format!("mqtt://127.0.0.1:{port}"), "topics": "plant/#"}}),
    )
    .await;
    // Wait for svc's listener: its first message is counted once it subscribed.
    let publish = move |lines: String| {
        use std::io::Write;
        let mut child = Command::new("mosquitto_pub")
            .args([
                "-p",
                &port.to_string(),
                "-q",
                "1",
                "-t",
                "plant/tank/level",
                "-l",
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("mosquitto_pub");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    };
    let t = Instant::now();
    while b.received("plant").await == 0 {
        publish("probe\n".into());
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "svc never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = b.received("plant").await;
    let lines: String = (0..MQTT_EVENTS)
        .map(|i| format!("{{\"summary\": \"tank {i}\", \"severity\": \"info\"}}\n"))
        .collect();
    let t0 = Instant::now();
    tokio::task::spawn_blocking(move || publish(lines))
        .await
        .unwrap();
    let published = t0.elapsed().as_secs_f64();
    while b.received("plant").await < base + MQTT_EVENTS as u64 {
        assert!(t0.elapsed() < Duration::from_secs(300), "MQTT stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stored = t0.elapsed().as_secs_f64();
    b.evaluated(&b.newest_ingress().await).await;
    let evaluated = t0.elapsed().as_secs_f64();
    println!(
        "  MQTT QoS 1 through mosquitto (mosquitto_pub -l): {:>6.0} events/s stored, {:>6.0} events/s rule-evaluated ({MQTT_EVENTS} messages; publishing alone took {published:.1} s)",
        MQTT_EVENTS as f64 / stored,
        MQTT_EVENTS as f64 / evaluated
    );
    let _ = broker.kill();
    let _ = broker.wait();
}

/// One v2c linkDown trap as net-snmp's snmptrap sends it, captured from a local socket.
fn captured_trap() -> Vec<u8> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = socket.local_addr().unwrap().to_string();
    let ok = Command::new("snmptrap")
        .args([
            "-v",
            "2c",
            "-c",
            "public",
            &target,
            "",
            "1.3.6.1.6.3.1.1.5.3",
            "1.3.6.1.2.1.2.2.1.1.2",
            "i",
            "2",
        ])
        .env("MIBS", "")
        .status()
        .expect("snmptrap")
        .success();
    assert!(ok);
    let mut buf = [0u8; 2048];
    let (n, _) = socket.recv_from(&mut buf).unwrap();
    buf[..n].to_vec()
}

/// Sends `TRAPS` copies of `trap` to `target` at `rate` per second; how long it took.
fn send_traps(trap: &[u8], target: &str, rate: f64) -> f64 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = Instant::now();
    for i in 0..TRAPS {
        let due = Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
        socket.send_to(trap, target).unwrap();
    }
    t0.elapsed().as_secs_f64()
}

/// Traps snmptrapd has logged: one `UDP:` transport line each.
fn logged(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("UDP:")
        .count()
}

async fn snmp(b: &Bench) {
    let trap = captured_trap();
    let svc_port = free_port();
    b.create(
        "/api/v1/event-sources",
        json!({"name": "switches", "type": "snmp", "config": {"listen": format!("127.0.0.1:{svc_port}"), "community": "public"}}),
    )
    .await;
    let svc_target = format!("127.0.0.1:{svc_port}");
    let t = Instant::now();
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    while b.received("switches").await == 0 {
        probe.send_to(&trap, &svc_target).unwrap();
        assert!(t.elapsed() < Duration::from_secs(20), "svc never bound");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("traps.log");
    let trapd_port = free_port();
    std::fs::write(
        dir.path().join("snmptrapd.conf"),
        "disableAuthorization yes\n",
    )
    .unwrap();
    let mut trapd = Command::new("snmptrapd")
        .args(["-f", "-C", "-c"])
        .arg(dir.path().join("snmptrapd.conf"))
        .arg("-Lf")
        .arg(&log)
        .arg(format!("udp:127.0.0.1:{trapd_port}"))
        .env("MIBS", "")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("snmptrapd");
    tokio::time::sleep(Duration::from_secs(1)).await;
    for rate in [2_000.0, 10_000.0] {
        let before = b.received("switches").await;
        let logged_before = logged(&log);
        let trap_svc = trap.clone();
        let target = svc_target.clone();
        let took = tokio::task::spawn_blocking(move || send_traps(&trap_svc, &target, rate))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let got = b.received("switches").await - before;
        let trap_d = trap.clone();
        let target = format!("127.0.0.1:{trapd_port}");
        tokio::task::spawn_blocking(move || send_traps(&trap_d, &target, rate))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let logged = logged(&log) - logged_before;
        println!(
            "  SNMP v2c traps sent at {rate:.0}/s ({TRAPS} in {took:.1} s): svc stored {got} ({:.1} % lost); snmptrapd logged {logged} ({:.1} % lost)",
            (TRAPS as f64 - got as f64) / TRAPS as f64 * 100.0,
            (TRAPS as f64 - logged as f64).max(0.0) / TRAPS as f64 * 100.0
        );
    }
    let _ = trapd.kill();
    let _ = trapd.wait();
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut child, base) = common::start(&data, false);
    let pid = child.id();
    let rt = common::runtime();
    rt.block_on(async {
        let b = Bench {
            http: reqwest::Client::new(),
            base,
            token,
        };
        b.create(
            "/api/v1/event-sources",
            json!({"name": "bench", "type": "webhook", "authMode": "none", "rateLimit": 1000000.0, "burst": 1000000}),
        )
        .await;
        // Every ingress event is evaluated by this rule (and none opens an alert).
        b.create(
            "/api/v1/alert-rules",
            json!({"name": "reads-all", "severity": "warning", "match": "event.type == 'ingress' && event.payload.never == 'x'"}),
        )
        .await;
        println!("svc ingress on the release server, {WEBHOOK_EVENTS} events per run:");
        webhook(&b, 1, 64).await;
        webhook(&b, 100, 4).await;
        mqtt(&b).await;
        snmp(&b).await;
        println!("  server RSS after the runs: {:.1} MiB", common::rss_mb(pid));
    });
    let _ = child.kill();
    let _ = child.wait();
}
