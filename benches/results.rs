//! Passive results per second, end to end (accepted → state updated → `state_change` event
//! stored: every result flips its service between OK and CRITICAL, so each one is a hard state
//! change with an event and a metric sample) for 10,000 services on the release server, with
//! 20,000 results in batches of 1 (answered once committed, then 20,000 more answered once
//! queued: `Prefer: respond-async`, Icinga 2's answer) and 500,000 in batches of 500 (answered
//! once committed, then 500,000 more answered once queued), 16 requests in flight on the
//! keep-alive connections of a lean HTTP/1.1 client (`common::load`, which shares the machine
//! with the server it measures), over plain HTTP; then the one-result phases again over HTTPS (svc's default; Icinga 2's API serves
//! nothing else). The same workload goes to Icinga 2's `process-check-result` API (50,000
//! results) in the same run when `/usr/sbin/icinga2` is installed (Debian package `icinga2`):
//! the bench starts its own daemon with a generated configuration (10,000 passive services, API
//! listener on a free port, certificates from rcgen) once svc has stopped. Icinga 2 gets a
//! warm-up round first too, so each of its measured results is a change as well.
//!
//! Run: `cargo bench --bench results`.

// A measuring program: it reads the real clock and fails loudly.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use bytes::Bytes;
use http_body_util::Full;
use hyper::Method;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
const SERVICES: usize = 10_000;
const IN_FLIGHT: usize = 16;

/// One result for service `i`, flipping its state every round.
fn result(i: usize, round: usize) -> Value {
    let state = if round.is_multiple_of(2) { 2 } else { 0 };
    json!({"host": "bench", "service": format!("s{i}"), "state": state, "output": format!("round {round} | value={round};5;10;0")})
}

/// How a submitter is answered: once the results' states are committed (the default), or once
/// they are queued (`Prefer: respond-async`, as Icinga 2 answers).
#[derive(Clone, Copy, PartialEq)]
enum Answer {
    Committed,
    Queued,
}

/// Sends `total` results in requests of `batch`, 16 in flight (`common::load`), rounds
/// numbered from `first_round` (the round before it left every service in the other state, so
/// each result is a change), until the last round's newest event is readable; returns results
/// per second. Answered once committed, one read of the newest event finds it (a read waits for
/// every event queued before it); answered once queued, the client reads until it is there.
async fn svc_rate(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    (batch, total, first_round): (usize, usize, usize),
    answer: Answer,
) -> f64 {
    let requests: Vec<common::Request> = (0..total / batch)
        .map(|r| {
            let body = serde_json::to_vec(&json!({"results": (0..batch).map(|k| { let n = r * batch + k; result(n % SERVICES, first_round + n / SERVICES) }).collect::<Vec<_>>()})).unwrap();
            let mut req = common::request(base, Method::POST, "/api/v1/results")
                .header(AUTHORIZATION, format!("Bearer {token}"))
                .header(CONTENT_TYPE, "application/json");
            if answer == Answer::Queued {
                req = req.header("prefer", "respond-async");
            }
            req.body(Full::new(Bytes::from(body))).unwrap()
        })
        .collect();
    let t0 = Instant::now();
    let sent = common::load(base, requests, IN_FLIGHT, |status, body| {
        assert_eq!(status, 202);
        serde_json::from_slice::<Accepted>(body).unwrap().accepted
    })
    .await;
    assert_eq!(sent, total / batch * batch);
    // The requests still in flight at the end all belong to the last round.
    let last = format!("round {}", first_round + (total - 1) / SERVICES);
    loop {
        let newest = common::get_json(
            http,
            base,
            token,
            "/api/v1/events?types=state_change&limit=1",
        )
        .await;
        if newest["items"][0]["payload"]["output"] == last.as_str() {
            break;
        }
        assert!(answer == Answer::Queued, "{newest}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sent as f64 / t0.elapsed().as_secs_f64()
}

#[derive(serde::Deserialize)]
struct Accepted {
    accepted: usize,
}

/// Authenticated requests per second that store nothing (`GET /api/v1/whoami`, the same client,
/// 16 in flight): the most any one-result-per-request path of this server could reach here, since
/// the load generator shares the machine's cores with it.
async fn request_floor(base: &str, token: &str, total: usize) -> f64 {
    let requests = (0..total)
        .map(|_| {
            common::request(base, Method::GET, "/api/v1/whoami")
                .header(AUTHORIZATION, format!("Bearer {token}"))
                .body(Full::default())
                .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    common::load(base, requests, IN_FLIGHT, |status, _| {
        assert_eq!(status, 200);
        1
    })
    .await;
    total as f64 / t0.elapsed().as_secs_f64()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts Icinga 2 on a generated configuration; `None` when it is not installed.
fn start_icinga(dir: &Path) -> Option<(Child, u16)> {
    if !Path::new("/usr/sbin/icinga2").exists() {
        return None;
    }
    for sub in ["data/certs", "log", "cache", "spool", "run"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    // Icinga names its API identity after the certificate's CN.
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("data/certs/localhost.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("data/certs/ca.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("data/certs/localhost.key"), key.serialize_pem()).unwrap();
    let port = free_port();
    let conf = format!(
        r#"const NodeName = "localhost"
const ZoneName = "localhost"
include <itl>
object Endpoint "localhost" {{}}
object Zone "localhost" {{ endpoints = [ "localhost" ] }}
object ApiListener "api" {{ bind_host = "127.0.0.1"; bind_port = {port}; accept_commands = true }}
object ApiUser "bench" {{ password = "bench"; permissions = [ "*" ] }}
object Host "bench" {{ check_command = "dummy"; enable_active_checks = false }}
for (i in range({SERVICES})) {{
  object Service "s" + i {{ host_name = "bench"; check_command = "dummy"; enable_active_checks = false; max_check_attempts = 1 }}
}}
"#
    );
    std::fs::write(dir.join("icinga2.conf"), conf).unwrap();
    let d = |k: &str, v: &Path| format!("-D{k}={}", v.display());
    let child = Command::new("/usr/sbin/icinga2")
        .arg("daemon")
        .arg("-c")
        .arg(dir.join("icinga2.conf"))
        .args([
            d("DataDir", &dir.join("data")),
            d("LogDir", &dir.join("log")),
            d("CacheDir", &dir.join("cache")),
            d("SpoolDir", &dir.join("spool")),
            d("InitRunDir", &dir.join("run")),
            "-DRunAsUser=root".into(),
            "-DRunAsGroup=root".into(),
        ])
        .stdout(std::fs::File::create(dir.join("icinga2.log")).unwrap())
        .stderr(Stdio::null())
        // Its own process group: the daemon forks, and stopping it means stopping them all.
        .process_group(0)
        .spawn()
        .unwrap();
    Some((child, port))
}

async fn icinga_rate(port: u16, total: usize, first_round: usize) -> f64 {
    let base = format!("https://127.0.0.1:{port}");
    let requests = (0..total)
        .map(|n| {
            let (i, round) = (n % SERVICES, first_round + n / SERVICES);
            let body = serde_json::to_vec(&json!({"type": "Service", "service": format!("bench!s{i}"), "exit_status": if round % 2 == 0 { 2 } else { 0 }, "plugin_output": format!("round {round}"), "performance_data": [format!("value={round};5;10;0")]})).unwrap();
            common::request(&base, Method::POST, "/v1/actions/process-check-result")
                // bench:bench
                .header(AUTHORIZATION, "Basic YmVuY2g6YmVuY2g=")
                .header(ACCEPT, "application/json")
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))
                .unwrap()
        })
        .collect();
    let t0 = Instant::now();
    common::load(&base, requests, IN_FLIGHT, |status, body| {
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(body));
        1
    })
    .await;
    total as f64 / t0.elapsed().as_secs_f64()
}

/// Stops Icinga 2 and every process it forked (its own process group): SIGTERM to the group,
/// up to 10 s for the child to exit, then SIGKILL to the group and to whatever still runs on
/// this bench's configuration file (some forks leave the group). Says so if any survived.
fn stop_icinga(child: &mut Child, dir: &Path) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
    let _ = Command::new("pkill")
        .args(["-KILL", "-f"])
        .arg(dir.join("icinga2.conf"))
        .status();
    std::thread::sleep(Duration::from_millis(200));
    let left = Command::new("pgrep")
        .arg("-f")
        .arg(dir.join("icinga2.conf"))
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if left {
        println!("  warning: Icinga 2 processes of this run are still running");
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let token = common::bootstrap(&data);
    let (mut child, base) = common::start(&data, false);
    let icinga_dir = dir.path().join("icinga");
    let rt = common::runtime();
    rt.block_on(async {
        let http = reqwest::Client::builder().danger_accept_invalid_certs(true).build().unwrap();
        let host = json!({"name": "bench", "spec": {}});
        let services: Vec<Value> = (0..SERVICES).map(|i| json!({"name": format!("s{i}"), "host": "bench", "spec": {}})).collect();
        let res: Value = http.post(format!("{base}/api/v1/objects:batch")).bearer_auth(&token).json(&json!({"hosts": [host], "services": services})).send().await.unwrap().json().await.unwrap();
        assert_eq!(res["failed"], 0, "{res}");
        // Warm-up: every service gets its first state (round 0); each phase then starts on the
        // round after the last one before it.
        svc_rate(&http, &base, &token, (500, SERVICES, 0), Answer::Committed).await;
        let floor = request_floor(&base, &token, 50_000).await;
        let single = svc_rate(&http, &base, &token, (1, 20_000, 1), Answer::Committed).await;
        let queued = svc_rate(&http, &base, &token, (1, 20_000, 3), Answer::Queued).await;
        let batched = svc_rate(&http, &base, &token, (500, 500_000, 5), Answer::Committed).await;
        let batched_queued = svc_rate(&http, &base, &token, (500, 500_000, 55), Answer::Queued).await;
        let events = common::get_json(&http, &base, &token, "/api/v1/events?types=state_change&limit=1").await;
        assert!(events["items"].as_array().is_some_and(|e| !e.is_empty()), "state_change events stored");
        println!("svc passive results, {SERVICES} services, {IN_FLIGHT} requests in flight, every result a state change with its event and metric sample:");
        println!("  batch 1:   {single:>9.0} results/s");
        println!("  batch 1, answered once queued (Prefer: respond-async): {queued:>9.0} results/s");
        println!("  batch 500: {batched:>9.0} results/s");
        println!("  batch 500, answered once queued (Prefer: respond-async): {batched_queued:>9.0} results/s");
        println!("  request floor, GET /api/v1/whoami (authenticated, stores nothing): {floor:>9.0} requests/s");
        let _ = child.kill();
        let _ = child.wait();
        // The one-result phases again over HTTPS, svc's default and the only transport of
        // Icinga 2's API: the same data, served again.
        let (mut child, base) = common::start_https(&data);
        let floor_https = request_floor(&base, &token, 50_000).await;
        let single_https = svc_rate(&http, &base, &token, (1, 20_000, 105), Answer::Committed).await;
        let queued_https = svc_rate(&http, &base, &token, (1, 20_000, 107), Answer::Queued).await;
        println!("svc over HTTPS (its default; the phases above are plain HTTP):");
        println!("  batch 1:   {single_https:>9.0} results/s");
        println!("  batch 1, answered once queued (Prefer: respond-async): {queued_https:>9.0} results/s");
        println!("  request floor, GET /api/v1/whoami: {floor_https:>9.0} requests/s");
        // Each server is measured alone: Icinga 2 starts once svc has stopped.
        let _ = child.kill();
        let _ = child.wait();
        match start_icinga(&icinga_dir) {
            Some((mut ic, port)) => {
                let mut ready = false;
                for _ in 0..120 {
                    if http.get(format!("https://127.0.0.1:{port}/v1/status")).basic_auth("bench", Some("bench")).send().await.is_ok_and(|r| r.status() == 200) {
                        ready = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                assert!(ready, "icinga2 did not start: {}", std::fs::read_to_string(icinga_dir.join("icinga2.log")).unwrap_or_default());
                icinga_rate(port, SERVICES, 0).await;
                let rate = icinga_rate(port, 50_000, 1).await;
                println!("Icinga 2 process-check-result (one result per request, the API's unit), same workload: {rate:>9.0} results/s");
                println!("  ratio: batch 1 {:.1}x, batch 1 answered once queued {:.1}x, batch 500 {:.1}x, batch 500 answered once queued {:.1}x, request floor {:.1}x", single / rate, queued / rate, batched / rate, batched_queued / rate, floor / rate);
                println!("  ratio over HTTPS: batch 1 {:.1}x, batch 1 answered once queued {:.1}x, request floor {:.1}x", single_https / rate, queued_https / rate, floor_https / rate);
                stop_icinga(&mut ic, &icinga_dir);
            }
            None => println!("Icinga 2 reference: not measured (/usr/sbin/icinga2 missing; apt-get install icinga2)"),
        }
    });
}
