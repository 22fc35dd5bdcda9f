//! What the benchmarks share: the server binary, bootstrapping a data dir, starting the server.

// Each benchmark is its own crate and uses only part of this.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The server binary: `SVC_BENCH_BIN` (a static build, say), else this build's release binary.
pub fn bin() -> String {
    std::env::var("SVC_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_svc").to_string())
}

/// `svc bootstrap` on `data`: the bootstrap-admin secret.
pub fn bootstrap(data: &Path) -> String {
    bootstrap_in(data, &[])
}

/// The environment of a main server whose store is in PostgreSQL: `SVC_BENCH_MAIN_POSTGRES_URL`
/// (benches that run a main and an edge; the edge keeps redb). Empty when unset.
pub fn main_storage() -> Vec<(&'static str, String)> {
    std::env::var("SVC_BENCH_MAIN_POSTGRES_URL")
        .map(|url| {
            vec![
                ("SERVICE_STORAGE_BACKEND", "postgres".to_string()),
                ("SERVICE_STORAGE_POSTGRES_URL", url),
            ]
        })
        .unwrap_or_default()
}

/// `bootstrap` with more environment (`main_storage`).
pub fn bootstrap_in(data: &Path, env: &[(&str, String)]) -> String {
    let out = Command::new(bin())
        .args(["bootstrap", "--data-dir"])
        .arg(data)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("bootstrap");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        token.starts_with("svc_"),
        "bootstrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    token
}

/// The multi-threaded runtime a bench's client runs on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Stops a server as its service manager would (SIGTERM) and waits for it to exit.
pub fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}

/// Starts the server on `data` over plain HTTP on a free port; returns it and its base URL.
pub fn start(data: &Path, seed_admin: bool) -> (Child, String) {
    start_with(data, seed_admin, &[])
}

/// The same with more `serve` arguments (`--config FILE`).
pub fn start_with(data: &Path, seed_admin: bool, args: &[String]) -> (Child, String) {
    start_at(data, "127.0.0.1:0", seed_admin, args)
}

/// The same on a given listen address (a server that must come back on its port).
pub fn start_at(data: &Path, listen: &str, seed_admin: bool, args: &[String]) -> (Child, String) {
    start_in(data, listen, seed_admin, args, &[])
}

/// Another process's data directory `to` for the database `from`'s process serves: on one
/// database they share its master key, made by the first one's start.
pub fn beside(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("master.key"), to.join("master.key")).unwrap();
}

/// `start_at` with more environment (`main_storage`).
pub fn start_in(
    data: &Path,
    listen: &str,
    seed_admin: bool,
    args: &[String],
    env: &[(&str, String)],
) -> (Child, String) {
    launch(data, listen, "off", seed_admin, args, env)
}

/// `start`, serving HTTPS as svc does by default (a self-signed certificate).
pub fn start_https(data: &Path) -> (Child, String) {
    launch(data, "127.0.0.1:0", "auto", false, &[], &[])
}

/// Where a server's warnings go: appended to the file `SVC_BENCH_LOG` names, else nowhere.
fn server_log() -> Stdio {
    let Ok(path) = std::env::var("SVC_BENCH_LOG") else {
        return Stdio::null();
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

fn launch(
    data: &Path,
    listen: &str,
    tls: &str,
    seed_admin: bool,
    args: &[String],
    env: &[(&str, String)],
) -> (Child, String) {
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--listen", listen, "--tls", tls, "--data-dir"])
        .arg(data)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("SVC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(server_log());
    if !seed_admin {
        cmd.env("SVC_DEFAULT_ADMIN_DISABLED", "1");
    }
    let mut child = cmd.spawn().expect("start svc");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let base = loop {
        let line = lines.next().expect("svc exited").expect("read");
        if let Some(url) = line.strip_prefix("svc listening on ") {
            break url.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, base)
}

/// A field of `/proc/<pid>/status` in MiB.
fn status_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The process's thread count.
pub fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Resident set size of a process in MiB.
pub fn rss_mb(pid: u32) -> f64 {
    status_mb(pid, "VmRSS:")
}

/// The resident set as `RSS MiB (anon A, file F)`: memory the process allocated, and the
/// binary's pages mapped from the page cache (clean, shared, reclaimable).
pub fn rss_parts(pid: u32) -> String {
    format!(
        "{:.1} MiB (anon {:.1}, file {:.1})",
        rss_mb(pid),
        status_mb(pid, "RssAnon:"),
        status_mb(pid, "RssFile:")
    )
}

/// `POST {base}{path}` with the token and a JSON body, asserting success: the answer's JSON
/// (`null` when it has none).
pub async fn post_json(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    let res = http
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// `GET {base}{path}` with the token: its JSON body.
pub async fn get_json(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
) -> serde_json::Value {
    http.get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// One prepared request of a load run: method, path, headers and body, built before the clock
/// starts.
pub type Request = hyper::Request<http_body_util::Full<bytes::Bytes>>;

/// A request to `path` of the server at `base` (its `Host` header from `base`).
pub fn request(base: &str, method: hyper::Method, path: &str) -> hyper::http::request::Builder {
    let host = base.split("://").nth(1).unwrap_or(base);
    hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, host)
}

/// Sends `requests` to `base` (`http://` or `https://`, any certificate) over `connections`
/// keep-alive HTTP/1.1 connections, each sending its next request once the answer to its last
/// is in; returns the sum of what `answered` makes of each status and body.
///
/// The load generator of the throughput benches, lean on purpose: it runs on the machine it
/// measures, so every microsecond it spends a request is taken from the server. It is hyper's
/// client connection and nothing else (no pool, no URL parsing, no redirects), and it measures
/// svc and Icinga 2 alike.
pub async fn load(
    base: &str,
    requests: Vec<Request>,
    connections: usize,
    answered: impl Fn(hyper::StatusCode, &[u8]) -> usize + Send + Sync + 'static,
) -> usize {
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};
    let queue = Arc::new(Mutex::new(requests.into_iter()));
    let answered = Arc::new(answered);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let mut sender = connect(base).await;
        let (queue, answered) = (queue.clone(), answered.clone());
        tasks.push(tokio::spawn(async move {
            let mut sum = 0;
            loop {
                let next = queue.lock().unwrap().next();
                let Some(req) = next else {
                    return sum;
                };
                sender.ready().await.unwrap();
                let res = sender.send_request(req).await.unwrap();
                let status = res.status();
                let body = res.into_body().collect().await.unwrap().to_bytes();
                sum += answered(status, &body);
            }
        }));
    }
    let mut sum = 0;
    for t in tasks {
        sum += t.await.unwrap();
    }
    sum
}

/// A keep-alive HTTP/1.1 connection to `base`, its driver spawned.
async fn connect(
    base: &str,
) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>> {
    use hyper_util::rt::TokioIo;
    let (tls, addr) = match base.split_once("://") {
        Some(("https", addr)) => (true, addr),
        Some((_, addr)) => (false, addr),
        None => (false, base),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    if !tls {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(conn);
        return sender;
    }
    let config = svc::runtime::tls::client_config(|_| Ok(())).unwrap();
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
    let name = rustls_pki_types::ServerName::try_from(host).unwrap();
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}
