//! Crash and disk-full behaviour of the store, through the API: no acknowledged write is lost,
//! the store always opens again, and a full disk answers 503 until space returns.

use crate::support::*;
use reqwest::Method;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

async fn slugs(s: &Server, token: &str) -> BTreeSet<String> {
    let v = json(
        call(s, token, Method::GET, "/api/v1/tenants")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["slug"].as_str().unwrap().to_string())
        .collect()
}

/// What the writers of one kill -9 round share: the signal to stop, and how many writes the
/// server has acknowledged in the round.
#[derive(Default)]
pub struct Round {
    pub stop: AtomicBool,
    pub acked: AtomicUsize,
}

impl Round {
    fn ack(&self) {
        self.acked.fetch_add(1, Ordering::SeqCst);
    }
}

/// Kills `server` with SIGKILL once its writers have `writes` acknowledged writes in `round`
/// and `then` more has passed, and tells them to stop: each crash lands under load however
/// slow the machine (a fixed time let a loaded run crash rounds before any write), and a
/// server that acknowledges none within two minutes fails the test.
pub async fn crash_under_load(server: Server, round: &Round, writes: usize, then: Duration) {
    let started = Instant::now();
    while round.acked.load(Ordering::SeqCst) < writes {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the writers got {} of {writes} writes through in two minutes",
            round.acked.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(then).await;
    server.crash();
    round.stop.store(true, Ordering::SeqCst);
}

/// A writer creating resources at `path` (the `i`th named `name(i)`, with the body `body` makes
/// of the name) until the round stops or the server is gone; returns the names acknowledged 201.
pub fn spawn_creator(
    base: &str,
    token: &str,
    round: Arc<Round>,
    path: &'static str,
    name: impl Fn(usize) -> String + Send + 'static,
    body: impl Fn(&str) -> serde_json::Value + Send + 'static,
) -> tokio::task::JoinHandle<Vec<String>> {
    let (base, token) = (base.to_string(), token.to_string());
    tokio::spawn(async move {
        let http = client();
        let mut acked = Vec::new();
        let mut i = 0;
        while !round.stop.load(Ordering::SeqCst) {
            let name = name(i);
            i += 1;
            let res = http
                .post(format!("{base}{path}"))
                .bearer_auth(&token)
                .json(&body(&name))
                .send()
                .await;
            match res {
                Ok(r) if r.status() == 201 => {
                    round.ack();
                    acked.push(name);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        acked
    })
}

/// Writers creating tenants until the round stops; returns the slugs the server acknowledged.
fn spawn_writers(
    base: &str,
    token: &str,
    n: usize,
    round: &Arc<Round>,
    number: usize,
) -> Vec<tokio::task::JoinHandle<Vec<String>>> {
    (0..n)
        .map(|w| {
            spawn_creator(
                base,
                token,
                round.clone(),
                "/api/v1/tenants",
                move |i| format!("r{number}-w{w}-{i}"),
                |slug| json!({"name": slug, "slug": slug}),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_writes_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let mut acked: Vec<String> = Vec::new();
    for round in 0..6 {
        let s = Server::start_in(&data, Opts::default());
        let present = slugs(&s, &token).await;
        for a in &acked {
            assert!(
                present.contains(a),
                "acknowledged write {a} lost after kill -9 (round {round})"
            );
        }
        assert_chain_intact(&s, &token).await;
        let writes = Arc::new(Round::default());
        let writers = spawn_writers(&s.base, &token, 4, &writes, round);
        crash_under_load(s, &writes, 4, Duration::from_millis(70 * round as u64)).await;
        for w in writers {
            acked.extend(w.await.unwrap());
        }
    }
    let s = Server::start_in(&data, Opts::default());
    let present = slugs(&s, &token).await;
    let lost: Vec<_> = acked.iter().filter(|a| !present.contains(*a)).collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert_chain_intact(&s, &token).await;
}

struct Mount(std::path::PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

async fn wait_ready(s: &Server, want: u16) -> serde_json::Value {
    for _ in 0..200 {
        let res = s.get("/readyz").await;
        if res.status() == want {
            return res.json().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("/readyz never answered {want}");
}

/// A server whose data directory is a 3 MiB tmpfs that its writes have filled.
struct FullDisk {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    mount: Mount,
    token: String,
    s: Server,
    acked: Vec<String>,
}

/// `None`, said as SKIPPED, where no tmpfs can be mounted (mounting needs root; CI has it).
async fn full_disk(test: &str) -> Option<FullDisk> {
    if super::postgres::enabled() {
        // The full disk these tests fill is the data directory's; the main database is not on
        // it with SVC_TEST_STORAGE=postgres.
        eprintln!("SKIPPED {test}: the store is in PostgreSQL, not on the filled disk");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let Some(mount) = Mount::tmpfs(&data, "3m") else {
        eprintln!("SKIPPED {test}: cannot mount a tmpfs here");
        return None;
    };
    let token = bootstrap(&data);
    let s = Server::start_in(&data, Opts::default());
    let acked = fill_the_disk(&s, &token).await;
    Some(FullDisk {
        _dir: dir,
        data,
        mount,
        token,
        s,
        acked,
    })
}

/// `/readyz` answers 503 with the store not ok and saying why.
async fn assert_store_not_ready(s: &Server) {
    let ready = wait_ready(s, 503).await;
    assert_eq!(ready["ready"], false);
    let store = ready["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "store")
        .unwrap()
        .clone();
    assert_eq!(store["ok"], false, "{ready}");
    assert!(
        store["info"].as_str().is_some_and(|i| !i.is_empty()),
        "{ready}"
    );
}

/// Creates tenants with large names until a write answers 503 `svc:storage/unavailable`;
/// returns the slugs acknowledged before.
async fn fill_the_disk(s: &Server, token: &str) -> Vec<String> {
    let mut acked = Vec::new();
    for i in 0..400 {
        let slug = format!("fill-{i}");
        let res = call(s, token, Method::POST, "/api/v1/tenants")
            .json(&json!({"name": "x".repeat(60_000), "slug": slug}))
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            201 => acked.push(slug),
            503 => {
                assert_problem(res, 503, "svc:storage/unavailable").await;
                assert!(!acked.is_empty());
                return acked;
            }
            other => panic!("unexpected {other}: {}", res.text().await.unwrap()),
        }
    }
    panic!("the disk never filled");
}

/// Gives the disk room again: the server becomes ready by itself, with every acknowledged
/// write, takes writes and keeps an intact audit chain.
async fn grow_and_recover(s: &Server, token: &str, mount: &Mount, acked: &[String]) {
    mount.resize("64m");
    wait_ready(s, 200).await;
    let present = slugs(s, token).await;
    for a in acked {
        assert!(present.contains(a), "{a} lost to the full disk");
    }
    json(
        call(s, token, Method::POST, "/api/v1/tenants")
            .json(&json!({"name": "after", "slug": "after"}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    assert_chain_intact(s, token).await;
}

#[tokio::test]
async fn a_full_disk_answers_503_loses_nothing_and_recovers() {
    let Some(FullDisk {
        _dir,
        data: _,
        mount,
        token,
        s,
        acked,
    }) = full_disk("a_full_disk_answers_503_loses_nothing_and_recovers").await
    else {
        return;
    };
    assert_store_not_ready(&s).await;
    assert_problem(
        call(&s, &token, Method::GET, "/api/v1/tenants")
            .send()
            .await
            .unwrap(),
        503,
        "svc:storage/unavailable",
    )
    .await;

    grow_and_recover(&s, &token, &mount, &acked).await;
}

#[tokio::test]
async fn a_crash_on_a_full_disk_starts_again_and_recovers_without_a_restart() {
    let Some(FullDisk {
        _dir,
        data,
        mount,
        token,
        s,
        acked,
    }) = full_disk("a_crash_on_a_full_disk_starts_again_and_recovers_without_a_restart").await
    else {
        return;
    };
    s.crash();

    // Started again on the still-full disk: alive, not ready, refusing writes.
    let s = Server::start_in(&data, Opts::default());
    let health = s.get("/healthz").await;
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");
    assert_store_not_ready(&s).await;
    assert_problem(
        call(&s, &token, Method::POST, "/api/v1/tenants")
            .json(&json!({"name": "while-full", "slug": "while-full"}))
            .send()
            .await
            .unwrap(),
        503,
        "svc:storage/unavailable",
    )
    .await;
    // Not ready for as long as writes fail: no flapping.
    for _ in 0..20 {
        assert_eq!(s.get("/readyz").await.status(), 503);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    grow_and_recover(&s, &token, &mount, &acked).await;
}

/// Every event a query of `/api/v1/events` finds (all pages), newest first.
async fn all_events(s: &Server, token: &str, query: &str) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = json(
            call(
                s,
                token,
                Method::GET,
                &format!("/api/v1/events?{query}&limit=1000{cursor}"),
            )
            .send()
            .await
            .unwrap(),
            200,
        )
        .await;
        all.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return all,
        }
    }
}

/// Every `state_change` event of an object, oldest first.
async fn state_changes(s: &Server, token: &str, object: &str) -> Vec<serde_json::Value> {
    let mut all = all_events(s, token, &format!("types=state_change&objectId={object}")).await;
    all.reverse();
    all
}

/// How often each template's creation stands in the `config` events and in the audit log.
async fn template_records(
    s: &Server,
    token: &str,
) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let mut events = BTreeMap::new();
    for e in all_events(s, token, "types=config").await {
        if e["payload"]["action"] == "template.create" {
            *events
                .entry(e["payload"]["resource"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    let audit = json(
        call(
            s,
            token,
            Method::GET,
            "/api/v1/audit?action=template.create&limit=5000",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let mut entries = BTreeMap::new();
    for e in audit["items"].as_array().unwrap() {
        *entries
            .entry(e["resource"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    (events, entries)
}

/// Live state (0 OK, 2 CRITICAL; `None` while pending) of every service, by name.
pub(super) async fn service_states(
    s: &Server,
    token: &str,
) -> BTreeMap<String, (String, Option<u64>)> {
    let list = json(
        call(s, token, Method::GET, "/api/v1/services?limit=100")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let name = o["name"].as_str().unwrap().to_string();
            let id = o["id"].as_str().unwrap().to_string();
            (name, (id, o["state"]["state"].as_u64()))
        })
        .collect()
}

/// The transactional event journal under kill -9: every acknowledged state change has exactly
/// one `state_change` event, and every acknowledged configuration write its `config` event and
/// audit entry, after any number of crashes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_state_changes_and_config_writes_loses_and_doubles_no_event() {
    const SERVICES: usize = 4;
    const ROUNDS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let s = Server::start_in(&data, Opts::default());
    json(
        call(&s, &token, Method::POST, "/api/v1/hosts")
            .json(&json!({"name": "plc", "spec": {}}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    for i in 0..SERVICES {
        json(
            call(&s, &token, Method::POST, "/api/v1/services")
                .json(&json!({"name": format!("s{i}"), "host": "plc", "spec": {}}))
                .send()
                .await
                .unwrap(),
            201,
        )
        .await;
    }
    let mut acked: BTreeMap<String, usize> = BTreeMap::new();
    let mut templates: Vec<String> = Vec::new();
    let mut s = Some(s);
    for round in 0..=ROUNDS {
        let server = s
            .take()
            .unwrap_or_else(|| Server::start_in(&data, Opts::default()));
        let states = service_states(&server, &token).await;
        for (name, (id, state)) in &states {
            let events = state_changes(&server, &token, id).await;
            let acked_here = acked.get(name).copied().unwrap_or(0);
            assert!(
                events.len() >= acked_here && events.len() <= acked_here + round,
                "{name} after {round} crashes: {} events for {acked_here} acknowledged changes",
                events.len()
            );
            let ids: BTreeSet<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
            assert_eq!(ids.len(), events.len(), "{name}: an event stored twice");
            for pair in events.windows(2) {
                assert_ne!(
                    pair[0]["payload"]["toState"], pair[1]["payload"]["toState"],
                    "{name}: a change without its event, or one event twice"
                );
            }
            if let Some(last) = events.last() {
                assert_eq!(
                    last["payload"]["toState"].as_u64(),
                    *state,
                    "{name}: the last event is the live state"
                );
            }
        }
        let (config_events, audit_entries) = template_records(&server, &token).await;
        for name in &templates {
            let resource = format!("templates/{name}");
            assert_eq!(
                config_events.get(&resource),
                Some(&1),
                "{resource}: its config event"
            );
            assert_eq!(
                audit_entries.get(&resource),
                Some(&1),
                "{resource}: its audit entry"
            );
        }
        assert!(
            config_events.values().all(|n| *n == 1),
            "a config event twice"
        );
        assert_chain_intact(&server, &token).await;
        if round == ROUNDS {
            break;
        }
        let writes = Arc::new(Round::default());
        let writers = spawn_flippers(&server, &token, states, &writes);
        let config_writer = spawn_creator(
            &server.base,
            &token,
            writes.clone(),
            "/api/v1/templates",
            move |i| format!("t{round}-{i}"),
            |name| json!({"name": name, "spec": {"interval": 60}}),
        );
        let then = Duration::from_millis((round as u64 * 37) % 140);
        crash_under_load(server, &writes, SERVICES + 1, then).await;
        for w in writers {
            let (name, flips) = w.await.unwrap();
            *acked.entry(name).or_default() += flips;
        }
        templates.extend(config_writer.await.unwrap());
    }
    // Each round crashed only after its writers got writes through; every writer did.
    assert!(
        acked.len() == SERVICES && acked.values().all(|n| *n > 0) && !templates.is_empty(),
        "a writer got nothing through: {acked:?}, {} templates",
        templates.len()
    );
}

/// The host `plc` with `count` services `s0`, `s1`, … and a rule opening one alert per
/// CRITICAL episode (a failure after a recovery opens a new one), resolved on OK.
pub(super) async fn flipped_services(s: &Server, token: &str, count: usize) {
    let mut bodies = vec![
        ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
        (
            "/api/v1/alert-rules",
            json!({"name": "critical", "match": "event.type == 'state_change' && event.state == 'CRITICAL'",
                   "severity": "critical", "resolveOnOk": true, "reopenWindow": "0s"}),
        ),
    ];
    for i in 0..count {
        bodies.push((
            "/api/v1/services",
            json!({"name": format!("s{i}"), "host": "plc", "spec": {}}),
        ));
    }
    for (path, body) in bodies {
        let res = call(s, token, Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap();
        json(res, 201).await;
    }
}

/// One writer per service of `plc`, flipping it OK/CRITICAL until the round stops or a post
/// is refused; each answers the service's name and how many flips were acknowledged (202).
pub(super) fn spawn_flippers(
    server: &Server,
    token: &str,
    states: BTreeMap<String, (String, Option<u64>)>,
    round: &Arc<Round>,
) -> Vec<tokio::task::JoinHandle<(String, usize)>> {
    states
        .into_iter()
        .map(|(name, (_, state))| {
            let (base, token, round) = (server.base.clone(), token.to_string(), round.clone());
            tokio::spawn(async move {
                let http = client();
                let mut current = state.unwrap_or(0);
                let mut flips = 0;
                while !round.stop.load(Ordering::SeqCst) {
                    let next = if current == 2 { 0 } else { 2 };
                    let res = http
                        .post(format!("{base}/api/v1/results"))
                        .bearer_auth(&token)
                        .json(&json!({"results": [{"host": "plc", "service": name, "state": next, "output": "flip"}]}))
                        .send()
                        .await;
                    match res {
                        Ok(r) if r.status() == 202 => {
                            round.ack();
                            current = next;
                            flips += 1;
                        }
                        _ => break,
                    }
                }
                (name, flips)
            })
        })
        .collect()
}

/// The alert engine under kill -9: after any number of crashes every CRITICAL episode of a
/// service has exactly one alert, open while the service is CRITICAL and resolved once it went
/// OK, each with one `alert_opened` event (and one `alert_resolved` when resolved): the engine's
/// cursor and its alerts commit together, so no alert is lost or opened twice. Chatter is off:
/// the flippers chatter, and a chattering key reopens its shelved alert by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_state_changes_loses_and_doubles_no_alert() {
    const SERVICES: usize = 4;
    const ROUNDS: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let opts = || Opts {
        args: config_args(dir.path(), "alerting:\n  chatter: {flips: 0}\n"),
        ..Opts::default()
    };
    let s = Server::start_in(&data, opts());
    flipped_services(&s, &token, SERVICES).await;
    let mut s = Some(s);
    for round in 0..=ROUNDS {
        let server = s.take().unwrap_or_else(|| Server::start_in(&data, opts()));
        let states = service_states(&server, &token).await;
        alerts_follow_states(&server, &token, &states, round).await;
        if round == ROUNDS {
            break;
        }
        let writes = Arc::new(Round::default());
        let writers = spawn_flippers(&server, &token, states, &writes);
        let then = Duration::from_millis((round as u64 * 53) % 170);
        crash_under_load(server, &writes, SERVICES, then).await;
        for w in writers {
            w.await.unwrap();
        }
    }
}

/// Waits (up to 20 s, for the engine to catch up after a start) until every service's alerts
/// match its `state_change` history, and fails naming the first that does not.
pub(super) async fn alerts_follow_states(
    s: &Server,
    token: &str,
    states: &BTreeMap<String, (String, Option<u64>)>,
    round: usize,
) {
    let started = std::time::Instant::now();
    loop {
        let Err(mismatch) = alerts_match(s, token, states).await else {
            return;
        };
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "after {round} crashes: {mismatch}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn alerts_match(
    s: &Server,
    token: &str,
    states: &BTreeMap<String, (String, Option<u64>)>,
) -> Result<(), String> {
    let mut opened: BTreeMap<String, usize> = BTreeMap::new();
    for e in all_events(s, token, "types=alert_opened").await {
        *opened
            .entry(e["payload"]["alertId"].to_string())
            .or_default() += 1;
    }
    let mut resolved: BTreeMap<String, usize> = BTreeMap::new();
    for e in all_events(s, token, "types=alert_resolved").await {
        *resolved
            .entry(e["payload"]["alertId"].to_string())
            .or_default() += 1;
    }
    for (name, (id, state)) in states {
        let to: Vec<Option<u64>> = state_changes(s, token, id)
            .await
            .iter()
            .map(|e| e["payload"]["toState"].as_u64())
            .collect();
        let episodes = (0..to.len())
            .filter(|&i| to[i] == Some(2) && (i == 0 || to[i - 1] != Some(2)))
            .count();
        let page = json(
            call(
                s,
                token,
                Method::GET,
                &format!("/api/v1/alerts?objectId={id}&limit=1000"),
            )
            .send()
            .await
            .unwrap(),
            200,
        )
        .await;
        let alerts = page["items"].as_array().unwrap();
        if alerts.len() != episodes {
            return Err(format!(
                "{name}: {} alerts for {episodes} CRITICAL episodes ({to:?})",
                alerts.len()
            ));
        }
        let open = alerts.iter().filter(|a| a["status"] == "open").count();
        let want_open = usize::from(*state == Some(2));
        if open != want_open {
            return Err(format!("{name} in state {state:?}: {open} open alerts"));
        }
        for a in alerts {
            let key = a["id"].to_string();
            if opened.get(&key) != Some(&1) {
                return Err(format!(
                    "{name}: alert {key} has {:?} alert_opened events",
                    opened.get(&key)
                ));
            }
            let closed = usize::from(a["status"] == "resolved");
            if resolved.get(&key).copied().unwrap_or(0) != closed {
                return Err(format!(
                    "{name}: alert {key} ({}) has {:?} alert_resolved events",
                    a["status"],
                    resolved.get(&key)
                ));
            }
        }
    }
    Ok(())
}
