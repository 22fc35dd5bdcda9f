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
        .stderr(Stdio::null());
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
