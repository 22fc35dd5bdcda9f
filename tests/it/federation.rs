//! Federation: a main and real edge processes. Sites pull their bundle (conditional), report
//! by heartbeat, forward their events exactly once across outages and crashes, and a silent
//! site raises an alert on the main.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};

const BUNDLE_ONE: &str = "kind: host\nname: edge-a\nbody:\n  spec: {address: 127.0.0.1}\n";
const BUNDLE_TWO: &str = "kind: host\nname: edge-a\nbody:\n  spec: {address: 127.0.0.1}\n---\nkind: host\nname: edge-b\nbody:\n  spec: {address: 127.0.0.1}\n";
/// Parses, but names a template that does not exist: the edge refuses to apply it.
const BUNDLE_BROKEN: &str = "kind: host\nname: edge-c\nbody:\n  spec: {templates: [nowhere]}\n";

/// Polls `path` until `done` holds for its JSON (20 s at most).
async fn until(
    s: &Server,
    token: &str,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let res = call(s, token, Method::GET, path).send().await;
        if let Ok(res) = res
            && res.status() == 200
        {
            let v: Value = res.json().await.unwrap();
            if done(&v) {
                return v;
            }
            if Instant::now() > deadline {
                panic!("{what}: still {v}");
            }
        } else if Instant::now() > deadline {
            panic!("{what}: {path} did not answer");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn create_site(s: &Server, token: &str, body: Value) {
    json(
        send(s, token, Method::POST, "/api/v1/sites", body).await,
        201,
    )
    .await;
}

/// Replaces a site's bundle (read, then PUT under If-Match).
async fn set_bundle(s: &Server, token: &str, name: &str, bundle: &str) {
    set_site_field(s, token, name, "bundle", json!(bundle)).await;
}

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

fn overview_of<'a>(overview: &'a Value, name: &str) -> &'a Value {
    overview["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {overview}"))
}

pub fn forwarded_event(id_ms: u64, n: u64) -> Value {
    // A UUIDv7 with the given time, as an edge mints them.
    let hex = format!("{id_ms:012x}7{:03x}8{:015x}", n & 0xfff, n);
    let id = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    let ts = jiff::Timestamp::from_millisecond(id_ms as i64).unwrap();
    json!({"id": id, "tenantId": "00000000-0000-0000-0000-000000000000", "ts": ts.to_string(),
           "type": "alert_opened", "severity": "critical", "payload": {"n": n}})
}

/// A token that connects any site, as a fleet's edges share one.
async fn fleet_token(s: &Server, admin: &str) -> String {
    let body = json!({"name": "fleet", "scopes": ["sites:connect"]});
    mint(s, admin, body).await.0
}

/// The wall clock in milliseconds, which forwarded events' ids carry.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Many sites forward at once (each its batches one after the other, as an edge does): every
/// batch is stored and counted for its own site, none waits for another site's turn to be
/// counted wrong, and one site's events never land on another.
#[tokio::test]
async fn many_sites_forwarding_at_once_are_each_counted_for_themselves() {
    let a = Admin::start();
    let (s, admin) = (&a.s, a.token.as_str());
    const SITES: u64 = 12;
    const BATCHES: u64 = 5;
    const PER_BATCH: u64 = 20;
    for i in 0..SITES {
        create_site(s, admin, json!({"name": format!("s{i}")})).await;
    }
    let (fleet, now_ms) = (fleet_token(s, admin).await, now_ms());
    let sending = (0..SITES).map(|i| {
        let fleet = fleet.clone();
        async move {
            for b in 0..BATCHES {
                // Each site's ids in its own stretch of milliseconds, ascending.
                let events: Vec<Value> = (0..PER_BATCH)
                    .map(|n| {
                        let k = b * PER_BATCH + n;
                        forwarded_event(now_ms - 600_000 + i * 1_000 + k, k)
                    })
                    .collect();
                let path = format!("/api/v1/sites/s{i}:events");
                let receipt = json(
                    send(s, &fleet, Method::POST, &path, json!({"events": events})).await,
                    200,
                )
                .await;
                assert_eq!(receipt["stored"], PER_BATCH, "s{i} batch {b}: {receipt}");
            }
        }
    });
    futures_util::future::join_all(sending).await;
    let overview = get(s, admin, "/api/v1/sites:overview").await;
    for i in 0..SITES {
        let site = overview_of(&overview, &format!("s{i}"));
        assert_eq!(site["forwardedEvents"], BATCHES * PER_BATCH, "s{i}: {site}");
        let listed = get(s, admin, &format!("/api/v1/events?site=s{i}&limit=1000")).await;
        let items = listed["items"].as_array().unwrap();
        assert_eq!(items.len() as u64, BATCHES * PER_BATCH, "s{i}'s events");
        assert!(items.iter().all(|e| e["site"] == format!("s{i}")));
    }
}

/// A site's mirrors are found by the site's id without reading every site's (their index):
/// `GET /alerts/{id}` and `GET /objects/{id}` answer them as the lists do, and the inbox
/// lists a site's object while it is a problem, not once it is OK again.
#[tokio::test]
async fn a_sites_mirrors_are_found_by_id_and_the_inbox_lists_its_problems() {
    let a = Admin::start();
    let (s, admin) = (&a.s, a.token.as_str());
    for name in ["east", "west"] {
        create_site(s, admin, json!({"name": name})).await;
    }
    let (fleet, now_ms) = (fleet_token(s, admin).await, now_ms());
    let (pump, valve, alarm) = (
        "0190f0a0-0000-7000-8000-00000000a001",
        "0190f0a0-0000-7000-8000-00000000a002",
        "0190f0a0-0000-7000-8000-00000000a003",
    );
    let event = |n: u64, kind: &str, severity: &str, object: &str, payload: Value| {
        let mut e = forwarded_event(now_ms - 60_000 + n, n);
        e["type"] = json!(kind);
        e["severity"] = json!(severity);
        e["objectId"] = json!(object);
        e["payload"] = payload;
        e
    };
    let forward = |site: &'static str, events: Vec<Value>| {
        let fleet = fleet.clone();
        async move {
            let path = format!("/api/v1/sites/{site}:events");
            json(
                send(s, &fleet, Method::POST, &path, json!({"events": events})).await,
                200,
            )
            .await;
        }
    };
    let changed = |n, object, name: &str, to: u8| {
        event(
            n,
            "state_change",
            if to == 0 { "ok" } else { "critical" },
            object,
            json!({"kind": "host", "object": name, "toState": to, "stateType": "hard", "output": format!("{name} is {to}")}),
        )
    };
    forward(
        "east",
        vec![
            changed(1, pump, "pump-7", 1),
            event(
                2,
                "alert_opened",
                "critical",
                pump,
                json!({"alertId": alarm, "title": "pump pressure low", "rule": "pressure"}),
            ),
        ],
    )
    .await;
    forward("west", vec![changed(3, valve, "valve-3", 0)]).await;

    let object = get(s, admin, &format!("/api/v1/objects/{pump}")).await;
    assert_eq!(object["id"], pump, "{object}");
    assert_eq!(object["labels"]["site"], "east", "{object}");
    assert_eq!(object["state"]["state"], 1, "{object}");
    let other = get(s, admin, &format!("/api/v1/objects/{valve}")).await;
    assert_eq!(other["labels"]["site"], "west", "{other}");
    let alert = get(s, admin, &format!("/api/v1/alerts/{alarm}")).await;
    assert_eq!(alert["title"], "pump pressure low", "{alert}");
    assert_eq!(alert["status"], "open", "{alert}");
    assert_eq!(alert["labels"]["site"], "east", "{alert}");
    let nowhere = "0190f0a0-0000-7000-8000-00000000a0ff";
    for path in [
        format!("/api/v1/objects/{nowhere}"),
        format!("/api/v1/alerts/{nowhere}"),
        // An object's id is not an alert's, nor the other way round.
        format!("/api/v1/alerts/{pump}"),
        format!("/api/v1/objects/{alarm}"),
    ] {
        let res = call(s, admin, Method::GET, &path).send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
    }
    let inbox = || async {
        let res = call(s, admin, Method::GET, "/").send().await.unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    let listed = inbox().await;
    assert!(listed.contains("pump-7"), "the site's problem: {listed}");
    assert!(!listed.contains("valve-3"), "an OK object is no problem");

    // The pump recovers and its alert resolves: the inbox drops it, the alert leaves.
    forward(
        "east",
        vec![
            changed(4, pump, "pump-7", 0),
            event(5, "alert_resolved", "ok", pump, json!({"alertId": alarm})),
        ],
    )
    .await;
    assert!(!inbox().await.contains("pump-7"), "recovered");
    let object = get(s, admin, &format!("/api/v1/objects/{pump}")).await;
    assert_eq!(object["state"]["state"], 0, "{object}");
    let res = call(s, admin, Method::GET, &format!("/api/v1/alerts/{alarm}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404, "a resolved mirror is no longer kept");
}

/// The main side on its own: pull with ETag and 304, heartbeat and overview, disabled sites,
/// tokens bound to one site, forwarded events stored once.
#[tokio::test]
async fn sites_pull_report_and_forward_on_the_main() {
    let a = Admin::start();
    let (s, admin) = (&a.s, a.token.as_str());
    create_site(
        s,
        admin,
        json!({"name": "north", "bundle": BUNDLE_ONE, "labels": {"region": "n"}}),
    )
    .await;
    create_site(s, admin, json!({"name": "south", "disabled": true})).await;
    create_site(s, admin, json!({"name": "west"})).await;
    let (north, meta) = mint(
        s,
        admin,
        json!({"name": "north-edge", "scopes": ["sites:connect"], "site": "north"}),
    )
    .await;
    assert_eq!(meta["site"], "north");

    let res = call(s, &north, Method::GET, "/api/v1/sites/north:pull")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/yaml");
    let etag = res.headers()["etag"].to_str().unwrap().to_string();
    let expected: String = Sha256::digest(BUNDLE_ONE.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(etag, format!("\"{expected}\""));
    assert_eq!(res.text().await.unwrap(), BUNDLE_ONE);
    for tag in [
        etag.clone(),
        expected.clone(),
        format!("W/{etag}"),
        "\"other\", ".to_string() + &etag,
    ] {
        let res = call(s, &north, Method::GET, "/api/v1/sites/north:pull")
            .header("If-None-Match", tag)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 304);
        assert_eq!(res.headers()["etag"].to_str().unwrap(), etag);
        assert!(res.text().await.unwrap().is_empty());
    }
    let res = call(s, &north, Method::GET, "/api/v1/sites/north:pull")
        .header("If-None-Match", "\"stale\"")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "another ETag gets the bundle");
    // A site without a bundle serves an empty one.
    let res = call(s, admin, Method::GET, "/api/v1/sites/west:pull")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().is_empty());

    // Nobody has reported yet.
    let overview = get(s, admin, "/api/v1/sites:overview").await;
    assert_eq!(overview["items"].as_array().unwrap().len(), 3);
    assert_eq!(overview_of(&overview, "north")["connected"], false);

    let beat = json!({"version": "9.9.9", "bundleEtag": expected, "applyError": "", "stats": {"hosts": 4, "services": 9, "alertsOpen": 1}});
    let res = send(
        s,
        &north,
        Method::POST,
        "/api/v1/sites/north:heartbeat",
        beat.clone(),
    )
    .await;
    assert_eq!(res.status(), 204);
    let overview = get(s, admin, "/api/v1/sites:overview").await;
    let n = overview_of(&overview, "north");
    assert_eq!(n["connected"], true, "{n}");
    assert_eq!(n["stale"], false);
    assert_eq!(
        n["stats"],
        json!({"hosts": 4, "services": 9, "alertsOpen": 1})
    );
    assert_eq!(n["version"], "9.9.9");
    assert_eq!(n["versionSkew"], true);
    assert_eq!(n["bundleCurrent"], true);
    assert_eq!(n["labels"], json!({"region": "n"}));
    // The ETag echoed as `:pull` wrote it (quoted, or weak) names the same bundle.
    for echoed in [format!("\"{expected}\""), format!("W/\"{expected}\"")] {
        let mut quoted = beat.clone();
        quoted["bundleEtag"] = json!(echoed);
        let res = send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:heartbeat",
            quoted,
        )
        .await;
        assert_eq!(res.status(), 204);
        let overview = get(s, admin, "/api/v1/sites:overview").await;
        let n = overview_of(&overview, "north");
        assert_eq!(n["bundleCurrent"], true, "{echoed}: {n}");
        assert_eq!(n["appliedEtag"], expected.as_str());
    }
    assert!(n["lastHeartbeatAt"].is_string() && n["lastPullAt"].is_string());
    assert_eq!(overview_of(&overview, "west")["connected"], false);

    // A disabled site may neither pull nor report, whoever asks.
    for token in [admin, north.as_str()] {
        if token == north {
            continue;
        }
        assert_problem(
            call(s, token, Method::GET, "/api/v1/sites/south:pull")
                .send()
                .await
                .unwrap(),
            403,
            "svc:sites/disabled",
        )
        .await;
        assert_problem(
            send(
                s,
                token,
                Method::POST,
                "/api/v1/sites/south:heartbeat",
                json!({}),
            )
            .await,
            403,
            "svc:sites/disabled",
        )
        .await;
    }
    // North's token cannot act for another site, existing or not.
    for other in ["west", "south", "nowhere"] {
        assert_problem(
            call(
                s,
                &north,
                Method::GET,
                &format!("/api/v1/sites/{other}:pull"),
            )
            .send()
            .await
            .unwrap(),
            403,
            "svc:auth/forbidden",
        )
        .await;
        assert_problem(
            send(
                s,
                &north,
                Method::POST,
                &format!("/api/v1/sites/{other}:heartbeat"),
                beat.clone(),
            )
            .await,
            403,
            "svc:auth/forbidden",
        )
        .await;
    }
    assert_problem(
        call(s, admin, Method::GET, "/api/v1/sites/nowhere:pull")
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    // Without sites:connect, no pull; sites:connect alone reads nothing else.
    let (reader, _) = mint(
        s,
        admin,
        json!({"name": "reader", "scopes": ["objects:read"]}),
    )
    .await;
    assert_problem(
        call(s, &reader, Method::GET, "/api/v1/sites/north:pull")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    assert_eq!(
        call(s, &reader, Method::GET, "/api/v1/sites:overview")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_problem(
        call(s, &north, Method::GET, "/api/v1/sites:overview")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    assert_problem(
        call(s, admin, Method::POST, "/api/v1/api-tokens")
            .json(&json!({"name": "x", "scopes": ["sites:connect"], "site": "no/slash"}))
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/site",
    )
    .await;
    assert_problem(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:heartbeat",
            json!({"stats": {"hosts": "many"}}),
        )
        .await,
        422,
        "svc:validation/body",
    )
    .await;

    // Forwarded events: stored with the site's ids and times, each once (an hour old: within
    // the window of times kept as the site sent them).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let base = now_ms - 3_600_000;
    let first: Vec<Value> = (0..3).map(|n| forwarded_event(base + n, n)).collect();
    let receipt = json(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:events",
            json!({"events": first}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(receipt["stored"], 3);
    assert_eq!(receipt["duplicates"], 0);
    assert_eq!(receipt["through"], first[2]["id"]);
    let again: Vec<Value> = (0..4).map(|n| forwarded_event(base + n, n)).collect();
    let receipt = json(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:events",
            json!({"events": again}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        (receipt["stored"].as_u64(), receipt["duplicates"].as_u64()),
        (Some(1), Some(3))
    );
    // Issue 72: batches may come gzip-compressed; the body limit holds for what they
    // decompress to, and another encoding is refused.
    let gz = |body: &[u8]| {
        use std::io::Write;
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(body).unwrap();
        z.finish().unwrap()
    };
    let encoded = |encoding: &str, body: Vec<u8>| {
        call(s, &north, Method::POST, "/api/v1/sites/north:events")
            .header("Content-Type", "application/json")
            .header("Content-Encoding", encoding)
            .body(body)
            .send()
    };
    let same = serde_json::to_vec(&json!({"events": again})).unwrap();
    let receipt = json(encoded("gzip", gz(&same)).await.unwrap(), 200).await;
    assert_eq!(receipt["duplicates"], 4, "{receipt}");
    let bomb = gz(&vec![b' '; 2 * 1024 * 1024]);
    assert!(bomb.len() < 10_000);
    let problem = json(encoded("gzip", bomb).await.unwrap(), 413).await;
    assert_eq!(problem["code"], "svc:validation/size");
    let problem = json(encoded("gzip", b"not gzip".to_vec()).await.unwrap(), 422).await;
    assert_eq!(problem["code"], "svc:validation/body");
    let problem = json(encoded("br", same).await.unwrap(), 415).await;
    assert_eq!(problem["code"], "svc:media-type");
    let listed = get(s, admin, "/api/v1/events?site=north").await;
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    let mut sent: Vec<&str> = again.iter().map(|e| e["id"].as_str().unwrap()).collect();
    sent.reverse();
    assert_eq!(ids, sent, "newest first, with the site's ids");
    let e = &listed["items"][0];
    assert_eq!(e["site"], "north");
    // The same instant (jiff writes 980 ms as ".98", the server always three digits).
    let instant = |v: &Value| v.as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    assert_eq!(instant(&e["ts"]), instant(&again[3]["ts"]));
    assert_ne!(
        e["tenantId"], "00000000-0000-0000-0000-000000000000",
        "stored in the site's tenant"
    );
    assert_eq!(
        get(s, admin, "/api/v1/events?site=west").await["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let overview = get(s, admin, "/api/v1/sites:overview").await;
    assert_eq!(overview_of(&overview, "north")["forwardedEvents"], 4);
    assert_eq!(overview_of(&overview, "north")["forwardedAlertsOpen"], 4);
    let mut backwards = again.clone();
    backwards.reverse();
    assert_problem(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:events",
            json!({"events": backwards}),
        )
        .await,
        422,
        "svc:validation/events",
    )
    .await;
    // A site that is not there is said so before what its batch holds.
    assert_problem(
        send(
            s,
            admin,
            Method::POST,
            "/api/v1/sites/nowhere:events",
            json!({"events": backwards}),
        )
        .await,
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/west:events",
            json!({"events": []}),
        )
        .await,
        403,
        "svc:auth/forbidden",
    )
    .await;
    // Forwarded alerts are the site's history: they open nothing on the main.
    assert_eq!(
        get(s, admin, "/api/v1/alerts").await["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// Every event id the list at `path` holds, oldest first (all its pages).
async fn event_ids(s: &Server, token: &str, path: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = get(s, token, &format!("{path}&limit=1000{cursor}")).await;
        ids.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_string()),
        );
        match page["nextCursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => break,
        }
    }
    ids.reverse();
    ids
}

/// The SHA-256 of the main's self-signed certificate, as `site.fingerprint` pins it.
pub(crate) fn fingerprint(main_data: &Path) -> String {
    let pem = std::fs::read_to_string(main_data.join("tls/cert.pem")).unwrap();
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    Sha256::digest(der.as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// How an edge trusts its main's certificate.
pub(crate) enum Trust<'a> {
    Pinned(&'a str),
    CaFile(&'a Path),
}

/// An edge process configured as site `north` of `main_url`.
pub(crate) fn edge_config(dir: &Path, main_url: &str, token: &str, trust: Trust) -> String {
    site_config(dir, "north", main_url, token, trust)
}

/// An edge process configured as site `name` of `main_url`.
fn site_config(dir: &Path, name: &str, main_url: &str, token: &str, trust: Trust) -> String {
    let path = dir.join("edge.yaml");
    let trust = match trust {
        Trust::Pinned(pin) => format!("fingerprint: \"{pin}\""),
        Trust::CaFile(ca) => format!("caFile: {}", ca.display()),
    };
    std::fs::write(
        &path,
        format!("site:\n  mainUrl: {main_url}\n  name: {name}\n  token: {token}\n  pullInterval: 1s\n  heartbeatInterval: 1s\n  {trust}\n"),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// A main's `tls` configuration with a certificate of a private CA; returns the configuration
/// file and the CA's certificate (what an edge's `caFile` names).
fn main_with_private_ca(dir: &Path) -> (String, std::path::PathBuf) {
    let (ca, cert_file, key_file) = private_ca(dir);
    let config = dir.join("main.yaml");
    std::fs::write(
        &config,
        format!(
            "tls:\n  mode: auto\n  certFile: {}\n  keyFile: {}\n",
            cert_file.display(),
            key_file.display()
        ),
    )
    .unwrap();
    (config.to_str().unwrap().to_string(), ca)
}

/// Two processes, TLS on the main, the edge pinning its certificate: bundle changes arrive,
/// a broken one keeps the old configuration and is reported, the overview follows the
/// heartbeats, the edge's alerts arrive on the main, and a silent edge raises an alert there
/// that clears when it returns.
#[tokio::test]
async fn an_edge_follows_its_main_and_is_watched() {
    let main = Admin::start_with(Opts {
        tls: true,
        ..Default::default()
    });
    let (m, admin) = (&main.s, main.token.as_str());
    create_site(
        m,
        admin,
        json!({"name": "north", "bundle": BUNDLE_ONE, "staleAfter": "3s"}),
    )
    .await;
    let site_token = north_token(m, admin).await;
    let dir = tempfile::tempdir().unwrap();
    let pin = fingerprint(&m.data);
    // The main names its certificate's fingerprint at start, for edges to pin.
    assert!(m.log().contains(&pin), "fingerprint {pin} not logged");
    let x509 = std::process::Command::new("openssl")
        .args([
            "x509",
            "-noout",
            "-subject",
            "-startdate",
            "-enddate",
            "-ext",
            "subjectAltName",
            "-in",
        ])
        .arg(m.data.join("tls/cert.pem"))
        .output()
        .unwrap();
    let x509 = String::from_utf8_lossy(&x509.stdout);
    assert!(
        x509.contains("DNS:localhost") && x509.contains("IP Address:127.0.0.1"),
        "{x509}"
    );
    assert!(!x509.contains("rcgen self signed cert"), "{x509}");
    // Valid for a year: not ending within 364 days, ending within 367.
    let ends_within = |days: u64| {
        !std::process::Command::new("openssl")
            .args([
                "x509",
                "-noout",
                "-checkend",
                &(days * 86_400).to_string(),
                "-in",
            ])
            .arg(m.data.join("tls/cert.pem"))
            .status()
            .unwrap()
            .success()
    };
    assert!(!ends_within(364) && ends_within(367), "{x509}");
    let config = edge_config(dir.path(), &m.base, &site_token, Trust::Pinned(&pin));
    let edge = Admin::start_with(Opts {
        args: vec!["--config".into(), config.clone()],
        ..Default::default()
    });
    let (e, local) = (&edge.s, edge.token.as_str());

    until(e, local, "/api/v1/hosts", "the first bundle applied", |v| {
        names(v) == ["edge-a"]
    })
    .await;
    let status = until(e, local, "/api/v1/site:status", "the edge's status", |v| {
        v["lastHeartbeatAt"].is_string()
    })
    .await;
    assert_eq!(status["enabled"], true);
    assert_eq!(status["name"], "north");
    assert_eq!(status["applyError"], "");
    // Every exchange with the main is counted, today, this month and in all.
    let uplink = &status["uplink"];
    assert!(uplink["today"]["sent"].as_u64().unwrap() > 200, "{status}");
    assert!(
        uplink["today"]["received"].as_u64().unwrap() > 100,
        "{status}"
    );
    assert_eq!(uplink["period"], uplink["total"], "{status}");
    assert_eq!(
        uplink["periodStart"].as_str().unwrap(),
        format!("{}-01", &uplink["day"].as_str().unwrap()[..7])
    );
    let overview = until(
        m,
        admin,
        "/api/v1/sites:overview",
        "the edge reporting",
        |v| {
            let n = overview_of(v, "north");
            n["connected"] == true && n["stats"]["hosts"] == 1 && n["bundleCurrent"] == true
        },
    )
    .await;
    assert_eq!(overview_of(&overview, "north")["versionSkew"], false);
    assert!(
        overview_of(&overview, "north")["uplink"]["total"]["sent"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "the site's uplink bytes shown at the main: {overview}"
    );
    // The operator's view from both ends.
    let (code, out, err) = svc(
        &["--server", &m.base, "--token", admin, "--insecure", "sites"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("north"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains("connected") && row.contains("current"),
        "{out}"
    );
    let (code, out, err) = svc(
        &["--server", &e.base, "--token", local, "site", "status"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&m.base) && out.contains("queue depth"),
        "{out}"
    );
    let (code, _, err) = svc(
        &[
            "--server",
            &m.base,
            "--token",
            admin,
            "--insecure",
            "site",
            "status",
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("not a federation site"), "{err}");

    set_bundle(m, admin, "north", BUNDLE_TWO).await;
    until(
        e,
        local,
        "/api/v1/hosts",
        "the changed bundle applied",
        |v| names(v) == ["edge-a", "edge-b"],
    )
    .await;
    set_bundle(m, admin, "north", BUNDLE_BROKEN).await;
    let overview = until(
        m,
        admin,
        "/api/v1/sites:overview",
        "the apply error reported",
        |v| {
            overview_of(v, "north")["applyError"]
                .as_str()
                .is_some_and(|e| !e.is_empty())
        },
    )
    .await;
    let n = overview_of(&overview, "north");
    assert!(n["applyError"].as_str().unwrap().contains("nowhere"), "{n}");
    assert_eq!(n["bundleCurrent"], false);
    assert_eq!(
        names(&get(e, local, "/api/v1/hosts").await),
        ["edge-a", "edge-b"],
        "the old configuration stays"
    );

    // What happens on the edge reaches the main with the edge's ids.
    let alarm = json(
        send(
            e,
            local,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "door open", "severity": "critical", "dedupKey": "door"}),
        )
        .await,
        201,
    )
    .await;
    let opened = until(
        m,
        admin,
        "/api/v1/events?site=north&types=alert_opened",
        "the edge's alert forwarded",
        |v| v["items"].as_array().unwrap().len() == 1,
    )
    .await;
    let local_event = &get(e, local, "/api/v1/events?types=alert_opened").await["items"][0];
    assert_eq!(opened["items"][0]["id"], local_event["id"]);
    assert_eq!(
        opened["items"][0]["payload"]["alertId"], alarm["id"],
        "{opened}"
    );

    // Issue 72, item 1: the main mirrors the site's objects and open alerts, by the site's ids.
    let res = send(
        e,
        local,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge-a", "state": "DOWN", "output": "no route"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let mirrored = until(
        m,
        admin,
        "/api/v1/objects?site=north",
        "edge-a mirrored",
        |v| {
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o["name"] == "edge-a" && o["state"]["state"] == 1)
        },
    )
    .await;
    let local_host = &get(e, local, "/api/v1/hosts?name=edge-a").await["items"][0];
    let mirror = &mirrored["items"][0];
    assert_eq!(mirror["id"], local_host["id"], "the site's id: {mirrored}");
    assert_eq!(mirror["labels"]["site"], "north");
    assert_eq!(mirror["state"]["output"], "no route");
    assert!(mirror.get("stale").is_none(), "{mirror}");
    let (code, out, err) = svc(
        &[
            "--server",
            &m.base,
            "--token",
            admin,
            "--insecure",
            "get",
            "hosts",
            "--site",
            "north",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("edge-a") && out.contains("DOWN"), "{out}");
    let down = get(m, admin, "/api/v1/objects?site=north&state=DOWN").await;
    assert_eq!(down["items"].as_array().unwrap().len(), 1, "{down}");
    let up = get(m, admin, "/api/v1/objects?site=north&state=UP").await;
    assert!(up["items"].as_array().unwrap().is_empty(), "{up}");
    assert!(
        get(m, admin, "/api/v1/objects?site=south").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let door = until(
        m,
        admin,
        "/api/v1/alerts?site=north",
        "the door alert mirrored",
        |v| {
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["title"] == "door open")
        },
    )
    .await;
    let door = door["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "door open")
        .unwrap()
        .clone();
    assert_eq!(door["id"], alarm["id"], "{door}");
    assert_eq!(door["status"], "open");
    assert_eq!(door["labels"]["site"], "north");
    // The main's pages show it: the inbox, the alerts page narrowed to the site, its page.
    let door_id = alarm["id"].as_str().unwrap();
    let page = |path: String| async move {
        let res = call(m, admin, Method::GET, &path).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        res.text().await.unwrap()
    };
    assert!(page("/".into()).await.contains("door open"), "the inbox");
    let listed = page("/alerts?site=north".into()).await;
    assert!(
        listed.contains(&format!("href=\"/alerts/{door_id}\"")),
        "{listed}"
    );
    let own = page(format!("/alerts/{door_id}")).await;
    assert!(
        own.contains("This alert is site <strong>north</strong>"),
        "{own}"
    );
    let objects = page("/objects?site=north".into()).await;
    let local_id = local_host["id"].as_str().unwrap();
    assert!(
        objects.contains(&format!("href=\"/objects/{local_id}\"")),
        "a site's object leads to its mirrored page: {objects}"
    );
    let mirrored_page = page(format!("/objects/{local_id}")).await;
    assert!(
        mirrored_page.contains("This object is site <strong>north</strong>")
            && mirrored_page.contains("no route")
            && !mirrored_page.contains("Check now"),
        "{mirrored_page}"
    );
    // The site's problem stands in the main's inbox with its alert.
    let inbox = page("/".into()).await;
    assert!(
        inbox.contains(&format!("href=\"/objects/{local_id}\"")),
        "{inbox}"
    );
    // Acknowledged at the main, the ack is the site's: queued, carried out there, and back
    // as the site's own event.
    let queued = json(
        send(
            m,
            admin,
            Method::POST,
            &format!("/api/v1/alerts/{door_id}:ack"),
            json!({"comment": "on my way"}),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(queued["alertId"], door_id, "{queued}");
    assert_eq!(queued["action"], "ack");
    let local_door = until(
        e,
        local,
        &format!("/api/v1/alerts/{door_id}"),
        "the ack carried out",
        |v| v["status"] == "acked",
    )
    .await;
    assert!(
        local_door["ackedBy"]
            .as_str()
            .unwrap()
            .ends_with("at the main"),
        "{local_door}"
    );
    let acks = get(e, local, "/api/v1/events?types=ack").await;
    assert_eq!(acks["items"][0]["payload"]["via"], "main", "{acks}");
    until(
        m,
        admin,
        "/api/v1/alerts?site=north&status=acked",
        "the ack mirrored",
        |v| {
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["title"] == "door open")
        },
    )
    .await;
    until(
        m,
        admin,
        "/api/v1/sites/north:actions",
        "the action forgotten",
        |v| v["items"].as_array().unwrap().is_empty(),
    )
    .await;
    let audit = get(m, admin, "/api/v1/audit?action=site.alert.ack").await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
    // Shelved at the main: the site keeps the shelf, and the mirror shows it.
    let shelve = format!("/api/v1/alerts/{door_id}:shelve");
    let res = send(m, admin, Method::POST, &shelve, json!({"mode": "oneShot"})).await;
    assert_eq!(json(res, 422).await["code"], "svc:validation/reason");
    let queued = json(
        send(
            m,
            admin,
            Method::POST,
            &shelve,
            json!({"mode": "oneShot", "reason": "the fitter is on site"}),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(queued["action"], "shelve", "{queued}");
    assert_eq!(queued["shelf"]["reason"], "the fitter is on site");
    let local_door = until(
        e,
        local,
        &format!("/api/v1/alerts/{door_id}"),
        "the shelf carried out",
        |v| v["shelved"].is_object(),
    )
    .await;
    assert!(
        local_door["shelved"]["by"]
            .as_str()
            .is_some_and(|b| b.ends_with("at the main")),
        "{local_door}"
    );
    until(
        m,
        admin,
        "/api/v1/alerts?site=north&status=acked",
        "the shelf mirrored",
        |v| {
            v["items"].as_array().unwrap().iter().any(|a| {
                a["title"] == "door open" && a["shelved"]["reason"] == "the fitter is on site"
            })
        },
    )
    .await;
    let res = send(
        m,
        admin,
        Method::POST,
        "/api/v1/alerts/01a245c1-c508-7765-a14e-a081ddafabf3:ack",
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 404, "no site holds that alert either");
    let main_own = get(m, admin, "/api/v1/alerts?status=open,acked").await;
    assert!(
        !main_own["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["title"] == "door open"),
        "a mirror is not the main's own alert: {main_own}"
    );

    // The edge goes dark: the main pages; it returns: the alert clears. (The bundle it could
    // not apply stands as its own config-drift alert meanwhile.)
    let stale = |a: &&Value| a["dedupKey"] == "site-stale/north";
    let stopped = edge.s.stop_keeping_data();
    let alerts = until(
        m,
        admin,
        "/api/v1/alerts?status=open",
        "the stale-site alert",
        |v| v["items"].as_array().unwrap().iter().any(|a| stale(&a)),
    )
    .await;
    let alert = alerts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(stale)
        .unwrap();
    assert!(
        alerts["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["dedupKey"] == "site-stale/north" || a["dedupKey"] == "site-config/north"),
        "{alerts}"
    );
    assert_eq!(alert["labels"]["site"], "north");
    assert_eq!(
        overview_of(&get(m, admin, "/api/v1/sites:overview").await, "north")["stale"],
        true
    );
    // Its objects keep their last state, stale by uplink, and raise nothing each.
    let mirrored = get(m, admin, "/api/v1/objects?site=north").await;
    let mirror = &mirrored["items"][0];
    assert_eq!(mirror["state"]["state"], 1, "{mirror}");
    assert_eq!(mirror["stale"]["reason"], "uplink", "{mirror}");
    assert!(mirror["stale"]["since"].is_string(), "{mirror}");
    // An action taken while the site is cut off waits, in order, and is carried out on its
    // return.
    let res = send(
        m,
        admin,
        Method::POST,
        &format!("/api/v1/alerts/{door_id}:resolve"),
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let waiting = get(m, admin, "/api/v1/sites/north:actions").await;
    assert_eq!(waiting["items"][0]["action"], "resolve", "{waiting}");
    let own = page(format!("/alerts/{door_id}")).await;
    assert!(own.contains("Waiting for the site: resolve by"), "{own}");
    let objects = page("/objects?site=north".into()).await;
    assert!(objects.contains("stale (uplink) since"), "{objects}");
    let mirrored_page = page(format!("/objects/{local_id}")).await;
    assert!(
        mirrored_page.contains("Its uplink is lost since"),
        "{mirrored_page}"
    );
    let _edge = stopped.start(Opts {
        args: vec!["--config".into(), config],
        ..Default::default()
    });
    let id = alert["id"].as_str().unwrap();
    until(
        m,
        admin,
        &format!("/api/v1/alerts/{id}"),
        "the stale-site alert resolved",
        |v| v["status"] == "resolved",
    )
    .await;
    // Back, the site carried out the waiting resolve: its alert left the mirrors.
    until(
        m,
        admin,
        "/api/v1/alerts?site=north&status=open,acked",
        "the resolve carried out",
        |v| {
            !v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["id"] == door_id)
        },
    )
    .await;
    until(
        m,
        admin,
        "/api/v1/sites/north:actions",
        "the resolve forgotten",
        |v| v["items"].as_array().unwrap().is_empty(),
    )
    .await;
    let n = overview_of(&get(m, admin, "/api/v1/sites:overview").await, "north").clone();
    assert_eq!(n["stale"], false);
    assert!(n["lastAloneSeconds"].as_u64().unwrap() >= 3, "{n}");
    let returned = get(m, admin, "/api/v1/events?types=system&sourceId=site:north").await;
    assert!(
        returned["items"][0]["payload"]["aloneSeconds"]
            .as_u64()
            .unwrap()
            >= 3,
        "{returned}"
    );
}

/// The main (TLS with a private CA's certificate, trusted by the edge's `caFile`) is down while
/// the edge produces 1,000 events, and the edge is killed with SIGKILL while it replays them:
/// every one arrives exactly once, in order.
#[tokio::test]
async fn forwarding_is_exactly_once_across_outages_and_crashes() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // Over TLS with a private CA's certificate, which the edge trusts through `caFile`.
    let dir = tempfile::tempdir().unwrap();
    let (main_config, ca) = main_with_private_ca(dir.path());
    let main_opts = || Opts {
        tls: true,
        listen: Some(listen.clone()),
        args: vec!["--config".into(), main_config.clone()],
        ..Default::default()
    };
    let main = Admin::start_with(main_opts());
    let admin = main.token.clone();
    create_site(&main.s, &admin, json!({"name": "north"})).await;
    let site_token = north_token(&main.s, &admin).await;
    let config = edge_config(dir.path(), &main.s.base, &site_token, Trust::CaFile(&ca));
    let config_args = || Opts {
        args: vec!["--config".into(), config.clone()],
        ..Default::default()
    };
    // The edge's data outlives its crash.
    let edge_data = dir.path().join("edge");
    std::fs::create_dir_all(&edge_data).unwrap();
    let local = bootstrap(&edge_data);
    let edge = Server::start_in(&edge_data, config_args());
    until(
        &edge,
        &local,
        "/api/v1/site:status",
        "the edge connected",
        |v| v["lastHeartbeatAt"].is_string(),
    )
    .await;

    let main_down = main.s.stop_keeping_data();
    for n in 0..1000 {
        let res = send(
            &edge,
            &local,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": format!("alarm {n}"), "dedupKey": format!("k{n}")}),
        )
        .await;
        assert_eq!(res.status(), 201);
    }
    let produced = event_ids(&edge, &local, "/api/v1/events?types=alert_opened").await;
    assert_eq!(produced.len(), 1000);
    // Issue 72, item 1: the edge says on every page that its uplink is lost, and what waits.
    let status = until(
        &edge,
        &local,
        "/api/v1/site:status",
        "the uplink lost",
        |v| v["uplinkLostSince"].is_string() && v["forward"]["pending"].as_u64() >= Some(1000),
    )
    .await;
    let page = call(&edge, &local, Method::GET, "/alerts")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    let pending = status["forward"]["pending"].as_u64().unwrap();
    assert!(
        page.contains("<strong>Uplink lost</strong> since")
            && page.contains(&format!("{pending} events waiting to be forwarded")),
        "{page}"
    );

    let main = main_down.start(main_opts());
    // Killed as soon as the replay has begun.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = get(
            &main,
            &admin,
            "/api/v1/events?site=north&types=alert_opened&limit=1000",
        )
        .await["items"]
            .as_array()
            .unwrap()
            .len();
        if n > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the replay did not begin");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    edge.crash();
    let _edge = Server::start_in(&edge_data, config_args());

    let mut received: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.len() < 1000 {
        assert!(
            Instant::now() < deadline,
            "only {} of 1000 arrived",
            received.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        received = event_ids(
            &main,
            &admin,
            "/api/v1/events?site=north&types=alert_opened",
        )
        .await;
    }
    assert_eq!(received, produced, "every event once, in the edge's order");
    // The site's count is written after the events it counts: it catches up, and no further.
    let overview = until(
        &main,
        &admin,
        "/api/v1/sites:overview",
        "the forwarded count",
        |v| overview_of(v, "north")["forwardedEvents"].as_u64() >= Some(1000),
    )
    .await;
    assert_eq!(
        overview_of(&overview, "north")["forwardedEvents"].as_u64(),
        Some(1000)
    );
}

/// Replaces one field of a site's document (read, then PUT under If-Match).
async fn set_site_field(s: &Server, token: &str, name: &str, field: &str, value: Value) {
    let mut site = get(s, token, &format!("/api/v1/sites/{name}")).await;
    site[field] = value;
    let version = site["version"].to_string();
    json(
        call(s, token, Method::PUT, &format!("/api/v1/sites/{name}"))
            .header("If-Match", version)
            .json(&site)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
}

/// A `sites:connect` token for site `north` of `m`.
async fn north_token(m: &Server, admin: &str) -> String {
    mint(
        m,
        admin,
        json!({"name": "north-edge", "scopes": ["sites:connect"], "site": "north"}),
    )
    .await
    .0
}

/// An edge process as site `north` of `m` (which has the site), on the clock the test moves.
async fn clocked_edge(m: &Server, admin: &str, dir: &Path) -> Admin {
    let site_token = north_token(m, admin).await;
    let config = edge_config(
        dir,
        &m.base,
        &site_token,
        Trust::Pinned(&fingerprint(&m.data)),
    );
    Admin::start_with(Opts {
        args: vec!["--config".into(), config],
        ..test_clock(&dir.join("clock"))
    })
}

/// The open alert of the main titled `title`, once there is one.
async fn open_alert_titled(s: &Server, token: &str, title: &str) -> Value {
    let alerts = until(s, token, "/api/v1/alerts?status=open", title, |v| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["title"] == title)
    })
    .await;
    alerts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == title)
        .unwrap()
        .clone()
}

/// Issue 72, items 3 and 4: a site whose clock runs 2 minutes ahead (its test clock moved)
/// is told its offset, the main shows it and raises one alert, and marks the events it
/// forwards without reordering them; a wider bound resolves the alert. A bundle the site
/// cannot apply raises a config-drift alert naming the served and applied versions and the
/// error; the site applying a good one resolves it.
#[tokio::test]
async fn a_sites_clock_and_configuration_drift_raise_alerts_at_the_main() {
    let main = Admin::start_with(Opts {
        tls: true,
        ..Default::default()
    });
    let (m, admin) = (&main.s, main.token.as_str());
    create_site(m, admin, json!({"name": "north", "bundle": BUNDLE_ONE})).await;
    let dir = tempfile::tempdir().unwrap();
    let edge = clocked_edge(m, admin, dir.path()).await;
    let (e, local) = (&edge.s, edge.token.as_str());
    until(
        m,
        admin,
        "/api/v1/sites:overview",
        "the edge reporting",
        |v| {
            let n = overview_of(v, "north");
            n["connected"] == true && n["bundleCurrent"] == true && n["clockOffsetMs"].is_i64()
        },
    )
    .await;
    let n = get(m, admin, "/api/v1/sites:overview").await;
    let offset = overview_of(&n, "north")["clockOffsetMs"].as_i64().unwrap();
    assert!(offset.abs() < 5_000, "clocks agree: {offset}");
    assert_eq!(overview_of(&n, "north")["clockDrift"], false);

    advance(e, local, "2m").await;
    let n = until(m, admin, "/api/v1/sites:overview", "the drift seen", |v| {
        overview_of(v, "north")["clockDrift"] == true
    })
    .await;
    let offset = overview_of(&n, "north")["clockOffsetMs"].as_i64().unwrap();
    assert!((115_000..125_000).contains(&offset), "{offset}");
    let alert = open_alert_titled(m, admin, "Site north's clock is off").await;
    assert_eq!(alert["labels"]["site"], "north", "{alert}");
    assert!(
        alert["payload"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ahead of the main's")),
        "{alert}"
    );
    let status = until(e, local, "/api/v1/site:status", "the site told", |v| {
        v["clockOffsetMs"].as_i64().is_some_and(|o| o > 100_000)
    })
    .await;
    assert!(
        status["clockOffsetMs"].as_i64().unwrap() < 125_000,
        "{status}"
    );

    // What the site forwards now is marked, in its own order and times.
    let res = send(
        e,
        local,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge-a", "state": "DOWN", "output": "unplugged"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let events = until(
        m,
        admin,
        "/api/v1/events?site=north&type=state_change",
        "the state change forwarded",
        |v| !v["items"].as_array().unwrap().is_empty(),
    )
    .await;
    let change = &events["items"][0];
    let marked = change["payload"]["clockSuspect"]["offsetMs"]
        .as_i64()
        .unwrap_or_else(|| panic!("not marked: {change}"));
    assert!(marked > 100_000, "{change}");
    let ts: jiff::Timestamp = change["ts"].as_str().unwrap().parse().unwrap();
    assert!(
        ts > jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60),
        "its own time is kept: {change}"
    );

    set_site_field(m, admin, "north", "clockDriftMax", json!("5m")).await;
    until(
        m,
        admin,
        "/api/v1/alerts?status=open",
        "the clock alert resolved",
        |v| {
            !v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["title"] == "Site north's clock is off")
        },
    )
    .await;

    // A bundle the site cannot apply: an alert at once, naming both versions and the error.
    set_bundle(m, admin, "north", BUNDLE_BROKEN).await;
    let alert = open_alert_titled(m, admin, "Site north does not run its configuration").await;
    let n = until(m, admin, "/api/v1/sites:overview", "the drift shown", |v| {
        overview_of(v, "north")["configDrift"] == true
    })
    .await;
    let (served, applied) = (
        overview_of(&n, "north")["bundleEtag"]
            .as_str()
            .unwrap()
            .to_string(),
        overview_of(&n, "north")["appliedEtag"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let message = alert["payload"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&served) && message.contains(&applied) && message.contains("nowhere"),
        "{alert}"
    );
    set_bundle(m, admin, "north", BUNDLE_TWO).await;
    until(
        m,
        admin,
        "/api/v1/alerts?status=open",
        "the config alert resolved",
        |v| {
            !v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["title"] == "Site north does not run its configuration")
        },
    )
    .await;
}

/// Reports `state` for `web/http` at an edge.
async fn observe(e: &Server, token: &str, state: &str) {
    let res = send(
        e,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "web", "service": "http", "state": state, "output": format!("http {state}")}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
}

/// Issue 72, item 2: three sites observe `web/http`; the main's object is down only once two
/// agree for a minute (the main's clock moved by the test), up again when one recovers, and a
/// site whose uplink is cut abstains instead of failing (or fails, when told to).
#[tokio::test]
async fn several_sites_vote_on_an_objects_state() {
    let clock_dir = tempfile::tempdir().unwrap();
    let main = Admin::start_with(Opts {
        tls: true,
        ..test_clock(&clock_dir.path().join("clock"))
    });
    let (m, admin) = (&main.s, main.token.as_str());
    let pin = fingerprint(&m.data);
    let bundle = "kind: host\nname: web\nbody:\n  spec: {address: 127.0.0.1}\n---\nkind: service\nname: http\nhost: web\nbody: {spec: {maxCheckAttempts: 1}}\n";
    let mut edges = Vec::new();
    for name in ["north", "south", "west"] {
        create_site(
            m,
            admin,
            json!({"name": name, "bundle": bundle, "labels": {"probe": "http"}, "staleAfter": "1h"}),
        )
        .await;
        let (token, _) = mint(
            m,
            admin,
            json!({"name": format!("{name}-edge"), "scopes": ["sites:connect"], "site": name}),
        )
        .await;
        let dir = tempfile::tempdir().unwrap();
        let config = site_config(dir.path(), name, &m.base, &token, Trust::Pinned(&pin));
        let edge = Admin::start_with(Opts {
            args: vec!["--config".into(), config],
            ..Default::default()
        });
        edges.push((edge, dir));
    }
    json(
        send(
            m,
            admin,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "web", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    let bad = send(
        m,
        admin,
        Method::POST,
        "/api/v1/services",
        json!({"name": "http", "host": "web", "spec": {"observers": {"sites": "probe=http"}}}),
    )
    .await;
    let problem = json(bad, 422).await;
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("minFailing or failingPct")),
        "{problem}"
    );
    let service = json(
        send(
            m,
            admin,
            Method::POST,
            "/api/v1/services",
            json!({"name": "http", "host": "web", "spec": {"observers":
                {"sites": "probe=http", "minFailing": 2, "for": "1m"}}}),
        )
        .await,
        201,
    )
    .await;
    let id = service["id"].as_str().unwrap().to_string();
    let votes_path = format!("/api/v1/objects/{id}/observers");
    let object_path = format!("/api/v1/objects/{id}");
    for (edge, _) in &edges {
        until(
            &edge.s,
            &edge.token,
            "/api/v1/services",
            "the bundle applied",
            |v| names(v) == ["http"],
        )
        .await;
        observe(&edge.s, &edge.token, "OK").await;
    }
    let verdict = until(m, admin, &votes_path, "three observers voting", |v| {
        v["voting"] == 3
    })
    .await;
    assert_eq!(verdict["failing"], 0, "{verdict}");
    until(m, admin, &object_path, "the verdict OK", |v| {
        v["state"]["state"] == 0
    })
    .await;

    // Two of three fail: agreed, not yet down; a minute later, down.
    let (north, south) = (&edges[0].0, &edges[1].0);
    observe(&north.s, &north.token, "CRITICAL").await;
    observe(&south.s, &south.token, "CRITICAL").await;
    let verdict = until(m, admin, &votes_path, "two failing", |v| v["failing"] == 2).await;
    assert_eq!(verdict["down"], false, "{verdict}");
    assert!(verdict["downAt"].is_string(), "{verdict}");
    let west_vote = verdict["votes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["site"] == "west")
        .unwrap();
    assert_eq!(west_vote["vote"], "ok", "{verdict}");
    assert_eq!(
        get(m, admin, &object_path).await["state"]["state"],
        0,
        "not down before the hold"
    );
    advance(m, admin, "61s").await;
    let down = until(m, admin, &object_path, "down after the hold", |v| {
        v["state"]["state"] == 2
    })
    .await;
    let output = down["state"]["output"].as_str().unwrap();
    assert!(output.starts_with("2 of 3 observers failing"), "{down}");
    let long = down["state"]["longOutput"].as_str().unwrap();
    assert!(
        long.contains("north failing: http CRITICAL") && long.contains("west ok"),
        "{down}"
    );
    // The main's own state change, once: its rules and history see the verdict.
    let changes = get(
        m,
        admin,
        &format!("/api/v1/events?objectId={id}&type=state_change"),
    )
    .await;
    let to_critical = changes["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["to"] == "CRITICAL")
        .count();
    assert_eq!(to_critical, 1, "{changes}");

    // One recovers: one failing is not enough.
    observe(&south.s, &south.token, "OK").await;
    until(m, admin, &object_path, "up again", |v| {
        v["state"]["state"] == 0
    })
    .await;

    // West's uplink is cut while north fails: it abstains, it does not fail.
    drop(edges.pop());
    advance(m, admin, "2h").await;
    let verdict = until(
        m,
        admin,
        &votes_path,
        "west abstaining, the others back",
        |v| {
            v["votes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|vote| (vote["site"] == "west") == (vote["vote"] == "abstains"))
        },
    )
    .await;
    let west_vote = verdict["votes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["site"] == "west")
        .unwrap()
        .clone();
    assert_eq!(west_vote["vote"], "abstains", "{verdict}");
    assert!(
        west_vote["missing"]
            .as_str()
            .is_some_and(|m| m.starts_with("uplink lost since")),
        "{verdict}"
    );
    assert_eq!(
        (verdict["failing"].clone(), verdict["down"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(get(m, admin, &object_path).await["state"]["state"], 0);
    // The object's page says who sees what.
    let res = call(m, admin, Method::GET, &format!("/objects/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("1 of 2 voting observers fail, 2 needed"),
        "{page}"
    );
    assert!(
        page.contains("<a href=\"/objects?site=west\">west</a>"),
        "{page}"
    );
    assert!(
        page.contains(">abstains</span> <small class=\"muted\">uplink lost since"),
        "{page}"
    );
    assert!(page.contains("Its state is its observers"), "{page}");

    // Told to count a lost observer as failing: north and west agree, down after the hold.
    let current = get(m, admin, &object_path).await;
    let version = current["version"].as_u64().unwrap();
    let res = call(m, admin, Method::PUT, &object_path)
        .header("If-Match", format!("\"{version}\""))
        .json(&json!({"name": "http", "host": "web", "spec": {"observers":
            {"sites": "probe=http", "minFailing": 2, "for": "1m", "missingObserver": "failing"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let verdict = until(m, admin, &votes_path, "west counted failing", |v| {
        v["failing"] == 2
    })
    .await;
    assert_eq!(verdict["down"], false, "{verdict}");
    advance(m, admin, "61s").await;
    until(
        m,
        admin,
        &object_path,
        "down with the lost observer failing",
        |v| v["state"]["state"] == 2,
    )
    .await;
}

/// The open alerts of `s` titled starting with `title`.
async fn alerts_titled(s: &Server, token: &str, title: &str) -> Vec<Value> {
    get(s, token, "/api/v1/alerts?status=open").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["title"].as_str().is_some_and(|t| t.starts_with(title)))
        .cloned()
        .collect()
}

/// Issue 72, item 5: the edge counts its uplink's bytes; past the budget's warning share it
/// raises a warning, over the budget only critical events go up and the rest waits, in order,
/// until the period resets (the edge's clock moved by the test).
#[tokio::test]
async fn an_uplink_budget_warns_then_holds_all_but_critical_events_until_it_resets() {
    let main = Admin::start_with(Opts {
        tls: true,
        ..Default::default()
    });
    let (m, admin) = (&main.s, main.token.as_str());
    let bundle = "kind: host\nname: plant\nbody:\n  spec: {address: 127.0.0.1}\n---\nkind: service\nname: door\nhost: plant\nbody: {spec: {maxCheckAttempts: 1}}\n---\nkind: service\nname: temp\nhost: plant\nbody: {spec: {maxCheckAttempts: 1}}\n";
    create_site(m, admin, json!({"name": "north", "bundle": bundle})).await;
    for (uplink, why) in [
        (json!({"budget": "5 parsecs"}), "unknown unit"),
        (json!({"budget": "1MB", "resetDay": 30}), "1 to 28"),
    ] {
        let mut site = get(m, admin, "/api/v1/sites/north").await;
        site["uplink"] = uplink;
        let res = call(m, admin, Method::PUT, "/api/v1/sites/north")
            .header("If-Match", site["version"].to_string())
            .json(&site)
            .send()
            .await
            .unwrap();
        let problem = json(res, 422).await;
        assert!(
            problem["detail"].as_str().is_some_and(|d| d.contains(why)),
            "{problem}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let edge = clocked_edge(m, admin, dir.path()).await;
    let (e, local) = (&edge.s, edge.token.as_str());
    until(e, local, "/api/v1/services", "the bundle applied", |v| {
        names(v) == ["door", "temp"]
    })
    .await;
    let used = |status: &Value| {
        status["uplink"]["period"]["sent"].as_u64().unwrap()
            + status["uplink"]["period"]["received"].as_u64().unwrap()
    };
    let status = get(e, local, "/api/v1/site:status").await;
    let so_far = used(&status);
    assert!(so_far > 0, "{status}");

    // A tenth used: over the warning share of 5 %, far from the budget.
    set_site_field(
        m,
        admin,
        "north",
        "uplink",
        json!({"budget": so_far * 10, "warnAt": 5}),
    )
    .await;
    let status = until(e, local, "/api/v1/site:status", "the budget told", |v| {
        v["uplinkBudget"]["budget"] == so_far * 10
    })
    .await;
    assert_eq!(status["overBudget"], false);
    until(e, local, "/api/v1/alerts?status=open", "the warning", |v| {
        v["items"].as_array().unwrap().iter().any(|a| {
            a["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Uplink budget"))
                && a["severity"] == "warning"
        })
    })
    .await;

    // Used up: only critical events and acks go.
    let now_used = used(&get(e, local, "/api/v1/site:status").await);
    set_site_field(m, admin, "north", "uplink", json!({"budget": now_used})).await;
    until(e, local, "/api/v1/site:status", "over the budget", |v| {
        v["overBudget"] == true
    })
    .await;
    // The flag is set before the alert is raised: the alert follows.
    until(
        e,
        local,
        "/api/v1/alerts?status=open",
        "the critical alert",
        |v| {
            v["items"].as_array().unwrap().iter().any(|a| {
                a["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Uplink budget used up"))
            })
        },
    )
    .await;
    let over = alerts_titled(e, local, "Uplink budget used up").await;
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!(over[0]["severity"], "critical");
    let result = |service: &str, state: &str| json!({"results": [{"host": "plant", "service": service, "state": state, "output": format!("{service} {state}")}]});
    let res = send(
        e,
        local,
        Method::POST,
        "/api/v1/results",
        result("temp", "WARNING"),
    )
    .await;
    assert_eq!(res.status(), 202);
    let res = send(
        e,
        local,
        Method::POST,
        "/api/v1/results",
        result("door", "CRITICAL"),
    )
    .await;
    assert_eq!(res.status(), 202);
    let changes = "/api/v1/events?site=north&type=state_change";
    let at_main = until(m, admin, changes, "the critical change forwarded", |v| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["payload"]["object"] == "door" && e["payload"]["to"] == "CRITICAL")
    })
    .await;
    assert!(
        !at_main["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["payload"]["object"] == "temp" && e["payload"]["to"] == "WARNING"),
        "the warning waits: {at_main}"
    );
    let status = until(
        e,
        local,
        "/api/v1/site:status",
        "the held change counted",
        |v| v["forward"]["pending"].as_u64().is_some_and(|n| n >= 1),
    )
    .await;
    assert_eq!(status["overBudget"], true, "{status}");

    // A new period begins while the edge is stopped, and the budget is raised: the process
    // that starts sends up what waited, in the site's order, and resolves the alerts its
    // predecessor raised.
    let period_before = status["uplink"]["periodStart"].clone();
    let clock = dir.path().join("clock");
    let offset: u64 = std::fs::read_to_string(&clock)
        .map(|ms| ms.trim().parse().unwrap())
        .unwrap_or(0);
    let stopped = edge.s.stop_keeping_data();
    std::fs::write(&clock, (offset + 744 * 3_600_000).to_string()).unwrap();
    let e = &stopped.start(Opts {
        args: vec![
            "--config".into(),
            dir.path().join("edge.yaml").display().to_string(),
        ],
        ..test_clock(&clock)
    });
    // The new period's first exchanges (a pull of the whole bundle, the backlog) may outgrow a
    // budget this small again: raised, so the alerts must end.
    set_site_field(
        m,
        admin,
        "north",
        "uplink",
        json!({"budget": now_used * 1000}),
    )
    .await;
    let at_main = until(m, admin, changes, "the held change forwarded", |v| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["payload"]["object"] == "temp" && e["payload"]["to"] == "WARNING")
    })
    .await;
    let order: Vec<&str> = at_main["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["to"] == "CRITICAL" || e["payload"]["to"] == "WARNING")
        .map(|e| e["payload"]["object"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["door", "temp"],
        "newest first, by the site's ids: {at_main}"
    );
    let status = until(
        e,
        local,
        "/api/v1/site:status",
        "under the budget again",
        |v| v["overBudget"] == false,
    )
    .await;
    let total = status["uplink"]["total"]["sent"].as_u64().unwrap()
        + status["uplink"]["total"]["received"].as_u64().unwrap();
    assert!(
        used(&status) < total && status["uplink"]["periodStart"] != period_before,
        "a new period counts afresh: {status}"
    );
    // Each forwarded event is counted once at the main: those that went ahead, and those that
    // waited and came later with older ids.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let stored = get(m, admin, "/api/v1/events?site=north&limit=1000").await["items"]
            .as_array()
            .unwrap()
            .len();
        let overview = get(m, admin, "/api/v1/sites:overview").await;
        let counted = overview["items"][0]["forwardedEvents"].as_u64().unwrap();
        if counted == stored as u64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{counted} counted, {stored} stored: {overview}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    until(
        e,
        local,
        "/api/v1/alerts?status=open",
        "the budget alerts resolved",
        |v| {
            !v["items"].as_array().unwrap().iter().any(|a| {
                a["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Uplink budget"))
            })
        },
    )
    .await;
}

/// Issue 72, item 5: the budget's warning reaches the site's people by SMS through the site's
/// own GSM modem (simulated on a pseudo-terminal), through the escalation policy the budget
/// names, with no uplink needed for it.
#[tokio::test]
async fn an_uplink_budget_warning_reaches_the_sites_contact_by_sms() {
    let Some(pty) = crate::pty::PtyPair::open("an uplink budget warning by SMS") else {
        return;
    };
    let sim = crate::modem_sim::ModemSim::start(&pty.theirs);
    let main = Admin::start_with(Opts {
        tls: true,
        ..Default::default()
    });
    let (m, admin) = (&main.s, main.token.as_str());
    create_site(m, admin, json!({"name": "north"})).await;
    let site_token = north_token(m, admin).await;
    let dir = tempfile::tempdir().unwrap();
    let pin = fingerprint(&m.data);
    let config = edge_config(dir.path(), &m.base, &site_token, Trust::Pinned(&pin));
    let mut yaml = std::fs::read_to_string(&config).unwrap();
    yaml.push_str(&format!(
        "hardware:\n  gsm:\n    device: {}\n    profile: simcom\n",
        pty.ours.display()
    ));
    std::fs::write(&config, yaml).unwrap();
    let edge = Admin::start_with(Opts {
        args: vec!["--config".into(), config],
        ..Default::default()
    });
    let (e, local) = (&edge.s, edge.token.as_str());
    crate::hardware::ready(e, "gsm").await;
    for (path, body) in [
        (
            "/api/v1/channels",
            json!({"name": "gsm", "type": "sms", "config": {"provider": "modem"}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "field-tech", "phone": "+49 170 7654321",
                   "preferences": [{"channels": ["sms"], "profile": "default"}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "field", "steps": [{"after": 0, "notify": {"contact": "field-tech"}}]}),
        ),
    ] {
        let res = send(e, local, Method::POST, path, body).await;
        assert_eq!(res.status(), 201, "{path}: {}", res.text().await.unwrap());
    }
    let status = until(e, local, "/api/v1/site:status", "some bytes counted", |v| {
        v["uplink"]["period"]["sent"]
            .as_u64()
            .is_some_and(|n| n > 0)
    })
    .await;
    let used = status["uplink"]["period"]["sent"].as_u64().unwrap()
        + status["uplink"]["period"]["received"].as_u64().unwrap();
    // Nine tenths of this budget used: past the warning share of 80 %.
    set_site_field(
        m,
        admin,
        "north",
        "uplink",
        json!({"budget": used * 10 / 9, "escalationPolicy": "field"}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let sms = loop {
        if let Some(sms) = sim
            .sent()
            .into_iter()
            .find(|sms| sms.text.contains("Uplink budget"))
        {
            break sms;
        }
        assert!(
            Instant::now() < deadline,
            "no budget warning by SMS; the edge's alerts: {}",
            get(e, local, "/api/v1/alerts").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(sms.to, "+491707654321", "{sms:?}");
    assert!(sms.text.contains("% used"), "{sms:?}");
}
