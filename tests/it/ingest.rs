//! `POST /api/v1/ingest/{source}`: per-source authentication, limits, mapping, the
//! Alertmanager receiver, and events that open and close alerts through the rules.

use crate::support::*;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use std::time::{Duration, Instant};

fn post(s: &Server, source: &str) -> reqwest::RequestBuilder {
    s.http.post(s.url(&format!("/api/v1/ingest/{source}")))
}

async fn ingress_events(s: &Server, token: &str) -> Vec<Value> {
    let res = call(
        s,
        token,
        Method::GET,
        "/api/v1/events?types=ingress&limit=1000",
    )
    .send()
    .await
    .unwrap();
    json(res, 200).await["items"].as_array().unwrap().clone()
}

/// The id of event source `name`: what its events carry as `sourceId` (SPEC 6.1).
async fn source_id(s: &Server, token: &str, name: &str) -> String {
    get(s, token, &format!("/api/v1/event-sources/{name}")).await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn sources_authenticate_their_own_way_and_refuse_with_the_spec_codes() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/hook-token",
        json!({"value": "s3cret"}),
    )
    .await;
    assert!(res.status().is_success());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/event-sources", json!({"name": "hooks", "type": "webhook", "authMode": "token", "secretRef": "hook-token", "labels": {"site": "lab"}})),
            ("/api/v1/event-sources", json!({"name": "signed", "type": "webhook", "authMode": "hmac", "secretRef": "hook-token"})),
            ("/api/v1/event-sources", json!({"name": "basic", "type": "webhook", "authMode": "basic", "secretRef": "hook-token", "config": {"username": "plc"}})),
            ("/api/v1/event-sources", json!({"name": "off", "type": "webhook", "authMode": "none", "enabled": false})),
            ("/api/v1/event-sources", json!({"name": "slow", "type": "webhook", "authMode": "none", "rateLimit": 0.01, "burst": 2})),
        ],
    )
    .await;
    let body = json!({"summary": "pump 4 tripped", "severity": "critical", "dedupKey": "pump-4", "labels": {"line": "2"}});

    assert_problem(
        post(s, "nothing").json(&body).send().await.unwrap(),
        404,
        "svc:ingress/unknown-source",
    )
    .await;
    assert_problem(
        post(s, "off").json(&body).send().await.unwrap(),
        403,
        "svc:ingress/disabled",
    )
    .await;
    assert_problem(
        post(s, "hooks").json(&body).send().await.unwrap(),
        401,
        "svc:ingress/auth",
    )
    .await;
    assert_problem(
        post(s, "hooks")
            .bearer_auth("wrong")
            .json(&body)
            .send()
            .await
            .unwrap(),
        401,
        "svc:ingress/auth",
    )
    .await;
    // An API token that is not valid is refused by the platform before the source looks.
    assert_problem(
        post(s, "hooks")
            .bearer_auth("svc_nope")
            .json(&body)
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;

    let res = post(s, "hooks")
        .bearer_auth("s3cret")
        .json(&body)
        .send()
        .await
        .unwrap();
    let accepted = json(res, 202).await;
    assert_eq!(accepted["accepted"], 1);
    let res = post(s, "hooks")
        .header("X-Svc-Token", "s3cret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let res = post(s, "hooks")
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:ingress/auth").await;
    let events = ingress_events(s, token).await;
    assert_eq!(
        events.len(),
        2,
        "an API token of the tenant is not the source's token"
    );
    let e = &events[0];
    assert_eq!(e["sourceId"], source_id(s, token, "hooks").await);
    assert_eq!(e["severity"], "critical");
    assert_eq!(e["payload"]["summary"], "pump 4 tripped");
    assert_eq!(e["payload"]["dedupKey"], "pump-4");
    assert_eq!(e["payload"]["labels"], json!({"site": "lab", "line": "2"}));
    assert_eq!(e["payload"]["payload"], body, "the original is archived");
    assert_eq!(accepted["eventIds"][0], events[1]["id"]);

    let raw = serde_json::to_vec(&body).unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
    mac.update(&raw);
    let sig: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let res = post(s, "signed")
        .header("X-Svc-Signature", format!("sha256={sig}"))
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let res = post(s, "signed")
        .header("X-Svc-Signature", "sha256=00")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:ingress/auth").await;
    let res = post(s, "basic")
        .basic_auth("plc", Some("s3cret"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let res = post(s, "basic")
        .basic_auth("plc", Some("guess"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:ingress/auth").await;

    // Limits: 1 MiB, JSON, the source's token bucket.
    let big = format!("{{\"summary\": \"{}\"}}", "x".repeat(1024 * 1024));
    let res = post(s, "hooks")
        .bearer_auth("s3cret")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_problem(res, 413, "svc:ingress/size").await;
    let res = post(s, "hooks")
        .bearer_auth("s3cret")
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_problem(res, 422, "svc:ingress/format").await;
    for _ in 0..2 {
        assert_eq!(
            post(s, "slow").json(&body).send().await.unwrap().status(),
            202
        );
    }
    let res = post(s, "slow").json(&body).send().await.unwrap();
    assert_eq!(res.headers()["retry-after"], "5");
    assert_problem(res, 429, "svc:ingress/rate").await;

    let anonymous = json(s.get("/api/v1/system/health").await, 200).await;
    assert_eq!(
        anonymous["ingress"],
        json!({}),
        "a tenant's source names are for the instance's administrators"
    );
    let health = get(s, token, "/api/v1/system/health").await;
    assert_eq!(
        health["ingress"]["hooks"],
        json!({"received": 2, "refused": 4, "rateLimited": 0})
    );
    assert_eq!(
        health["ingress"]["slow"],
        json!({"received": 2, "refused": 0, "rateLimited": 1})
    );
    assert!(
        health["ingress"].get("nothing").is_none(),
        "unknown names are not counted"
    );
    // Without a scrape token, `/metrics` answers anyone, so it sums the sources: their names
    // are what a sender of events needs (security::metrics_name_sources_only_to_the_scraper).
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("np_ingress_rate_limited{source=\"all\"} 1"),
        "{metrics}"
    );
    let received: u64 = health["ingress"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["received"].as_u64().unwrap())
        .sum();
    assert!(
        metrics.contains(&format!("np_ingress_received{{source=\"all\"}} {received}")),
        "{metrics}"
    );
    assert!(
        !metrics.contains("source=\"hooks\"") && !metrics.contains("source=\"slow\""),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_mapping_reads_the_body_or_says_why_not_and_stores_all_or_nothing() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "plc", "type": "webhook", "authMode": "none",
                   "mapping": {"severity": "$.alarm.level", "summary": "$.alarm.text", "dedupKey": "$.alarm.tag", "resolve": "$.alarm.state"}}),
        )],
    )
    .await;
    let good =
        json!({"alarm": {"level": "WARN", "text": "tank 3 high", "tag": "T3", "state": "active"}});
    let res = post(s, "plc").json(&good).send().await.unwrap();
    assert_eq!(res.status(), 202);
    let events = ingress_events(s, token).await;
    assert_eq!(events[0]["severity"], "warning");
    assert_eq!(events[0]["payload"]["summary"], "tank 3 high");
    assert_eq!(events[0]["payload"]["dedupKey"], "T3");
    assert!(events[0]["payload"]["resolve"].is_null());

    let missing = json!({"alarm": {"level": "WARN", "tag": "T3", "state": "active"}});
    let res = post(s, "plc").json(&missing).send().await.unwrap();
    let p = assert_problem(res, 422, "svc:ingress/mapping").await;
    assert_eq!(p["detail"], "summary: $.alarm.text is not in the body");
    let bad = json!({"alarm": {"level": "purple", "text": "x", "tag": "T3", "state": "active"}});
    let p = assert_problem(
        post(s, "plc").json(&bad).send().await.unwrap(),
        422,
        "svc:ingress/mapping",
    )
    .await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .starts_with("severity: \"purple\""),
        "{p}"
    );
    // One bad document refuses the whole array: nothing is half-stored.
    let res = post(s, "plc")
        .json(&json!([good, missing]))
        .send()
        .await
        .unwrap();
    assert_problem(res, 422, "svc:ingress/mapping").await;
    assert_eq!(ingress_events(s, token).await.len(), 1);
    let cleared = json!([{"alarm": {"level": "ok", "text": "tank 3 normal", "tag": "T3", "state": "resolved"}}]);
    assert_eq!(
        post(s, "plc").json(&cleared).send().await.unwrap().status(),
        202
    );
    assert_eq!(
        ingress_events(s, token).await[0]["payload"]["resolve"],
        true
    );
}

/// Mapping values prefixed `cel:` are CEL expressions over the body: checked at save, and a
/// body an expression cannot read is refused like a missing path.
#[tokio::test]
async fn cel_mappings_compute_fields_from_the_body() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let bad = send(s, token, Method::POST, "/api/v1/event-sources",
        json!({"name": "broken", "type": "webhook", "authMode": "none", "mapping": {"severity": "cel:body.level >="}})).await;
    let p = assert_problem(bad, 422, "svc:validation/mapping").await;
    assert!(
        p["detail"].as_str().unwrap().starts_with("severity: "),
        "{p}"
    );
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "scada", "type": "webhook", "authMode": "none", "mapping": {
                "severity": "cel:body.prio <= 1 ? 'critical' : (body.prio <= 3 ? 'warning' : 'info')",
                "summary": "cel:body.station + ': ' + body.msg",
                "dedupKey": "cel:body.station + '/' + string(body.point)",
                "labels": "cel:{'station': body.station}",
                "resolve": "cel:body.state == 'gone'"}}),
        )],
    )
    .await;
    let alarm =
        json!({"station": "pumpwerk-7", "point": 12, "prio": 1, "msg": "dry run", "state": "come"});
    assert_eq!(
        post(s, "scada").json(&alarm).send().await.unwrap().status(),
        202
    );
    let events = ingress_events(s, token).await;
    assert_eq!(events[0]["severity"], "critical");
    assert_eq!(events[0]["payload"]["summary"], "pumpwerk-7: dry run");
    assert_eq!(events[0]["payload"]["dedupKey"], "pumpwerk-7/12");
    assert_eq!(events[0]["payload"]["labels"]["station"], "pumpwerk-7");
    let gone =
        json!({"station": "pumpwerk-7", "point": 12, "prio": 5, "msg": "dry run", "state": "gone"});
    assert_eq!(
        post(s, "scada").json(&gone).send().await.unwrap().status(),
        202
    );
    let events = ingress_events(s, token).await;
    assert_eq!(events[0]["payload"]["resolve"], true);
    assert_eq!(events[0]["severity"], "info");
    let unreadable = json!({"station": "pumpwerk-7", "prio": 1, "msg": "dry run", "state": "come"});
    let p = assert_problem(
        post(s, "scada").json(&unreadable).send().await.unwrap(),
        422,
        "svc:ingress/mapping",
    )
    .await;
    assert!(
        p["detail"].as_str().unwrap().starts_with("dedupKey: "),
        "{p}"
    );
}

#[tokio::test]
async fn alertmanager_firing_and_resolved_open_and_close_the_same_alert() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/event-sources", json!({"name": "prometheus", "type": "alertmanager", "authMode": "none"})),
            ("/api/v1/alert-rules", json!({"name": "from-prometheus", "severity": "critical", "match": "event.type == 'ingress' && event.source == 'prometheus'",
                "title": "{{ .event.summary }}"})),
        ],
    )
    .await;
    let payload = |status: &str| {
        json!({"version": "4", "groupKey": "{}:{alertname=\"DiskFull\"}", "status": status, "receiver": "svc",
            "groupLabels": {"alertname": "DiskFull"}, "commonLabels": {"job": "node"}, "commonAnnotations": {},
            "externalURL": "http://am:9093", "truncatedAlerts": 0,
            "alerts": [{"status": status, "labels": {"alertname": "DiskFull", "instance": "db1", "severity": "critical"},
                "annotations": {"summary": "disk full on db1"}, "startsAt": "2026-11-24T10:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prom/graph", "fingerprint": "4a1b2c3d"}]})
    };
    assert_eq!(
        post(s, "prometheus")
            .json(&payload("firing"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let alert = wait_alert(s, token, "open").await;
    assert_eq!(alert["title"], "disk full on db1");
    assert_eq!(alert["severity"], "critical");
    assert_eq!(alert["dedupKey"], "from-prometheus/4a1b2c3d");
    assert_eq!(alert["labels"]["instance"], "db1");
    assert_eq!(alert["labels"]["job"], "node");
    assert_eq!(
        post(s, "prometheus")
            .json(&payload("resolved"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let resolved = wait_alert(s, token, "resolved").await;
    assert_eq!(resolved["id"], alert["id"]);

    let res = post(s, "prometheus")
        .json(&json!({"hello": "world"}))
        .send()
        .await
        .unwrap();
    let p = assert_problem(res, 422, "svc:ingress/format").await;
    assert!(
        p["detail"].as_str().unwrap().contains("Alertmanager"),
        "{p}"
    );
}

async fn wait_alert(s: &Server, token: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let res = call(
            s,
            token,
            Method::GET,
            &format!("/api/v1/alerts?status={status}"),
        )
        .send()
        .await
        .unwrap();
        let v = json(res, 200).await;
        if let Some(a) = v["items"].as_array().and_then(|i| i.first()) {
            return a.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no {status} alert"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A mosquitto broker on a free local port, or `None` where it is not installed (CI installs
/// it and must not skip).
struct Broker {
    _child: Peer,
    port: u16,
    /// With TLS: the broker's files, and its CA's certificate that clients trust.
    tls: Option<(tempfile::TempDir, std::path::PathBuf)>,
}

impl Broker {
    fn start(port: Option<u16>) -> Option<Broker> {
        let port = port.unwrap_or_else(free_port);
        Self::spawn(
            std::process::Command::new("mosquitto").args(["-p", &port.to_string()]),
            port,
            None,
        )
    }

    fn spawn(
        command: &mut std::process::Command,
        port: u16,
        tls: Option<(tempfile::TempDir, std::path::PathBuf)>,
    ) -> Option<Broker> {
        let mut child = Peer(spawn_peer(command, "mosquitto")?);
        child.wait_listening(port, "mosquitto");
        Some(Broker {
            _child: child,
            port,
            tls,
        })
    }

    /// A broker that speaks only TLS, with a certificate of a private CA, and signs in only
    /// `plant` with the password `hunter2`.
    fn start_tls() -> Option<Broker> {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = private_ca(dir.path());
        let port = free_port();
        let config = dir.path().join("mosquitto.conf");
        let passwords = dir.path().join("passwords");
        let made = std::process::Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&passwords)
            .args(["plant", "hunter2"])
            .status();
        if made.is_err() {
            peer_missing("mosquitto");
            return None;
        }
        // `user root`: as root, read the files in the private directory (no effect otherwise).
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\ncertfile {}\nkeyfile {}\nallow_anonymous false\npassword_file {}\nuser root\n",
                cert.display(),
                key.display(),
                passwords.display()
            ),
        )
        .unwrap();
        Self::spawn(
            std::process::Command::new("mosquitto")
                .arg("-c")
                .arg(&config),
            port,
            Some((dir, ca)),
        )
    }

    /// How `mosquitto_pub` reaches the broker.
    fn client_args(&self) -> Vec<String> {
        let mut args = vec![
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            self.port.to_string(),
        ];
        if let Some((_, ca)) = &self.tls {
            let ca = ca.display().to_string();
            args.extend(["--cafile", &ca, "-u", "plant", "-P", "hunter2"].map(String::from));
        }
        args
    }

    /// Publishes each line of `lines` as one message (`mosquitto_pub -l`).
    fn publish_lines(&self, topic: &str, lines: &str) {
        use std::io::Write;
        let mut child = std::process::Command::new("mosquitto_pub")
            .args(self.client_args())
            .args(["-q", "1", "-t", topic, "-l"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "mosquitto_pub -l failed");
    }

    fn publish(&self, topic: &str, message: &str) {
        let ok = std::process::Command::new("mosquitto_pub")
            .args(self.client_args())
            .args(["-q", "1", "-t", topic, "-m", message])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mosquitto_pub failed");
    }
}

async fn wait_events(s: &Server, token: &str, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let events = ingress_events(s, token).await;
        if events.len() >= n {
            return events;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{} of {n} events",
            events.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An `mqtts://` source trusts its broker's private CA by `caFile` and signs in with the
/// password of its `secretRef`; one without the CA refuses the broker (the system roots do not
/// know that CA).
#[tokio::test]
async fn mqtt_over_tls_trusts_the_configured_ca() {
    let Some(broker) = Broker::start_tls() else {
        return;
    };
    let ca_file = broker.tls.as_ref().unwrap().1.clone();
    let ca = ca_file.display().to_string();
    let a = Admin::start_with(trusting_ca(&ca_file));
    let (s, token) = (&a.s, a.token.as_str());
    let put = call(s, token, Method::PUT, "/api/v1/secrets/broker")
        .json(&json!({"value": "hunter2"}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let url = format!("mqtts://127.0.0.1:{}", broker.port);
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/event-sources",
                json!({"name": "secure", "type": "mqtt", "secretRef": "broker",
                       "config": {"url": url, "topics": "secure/#", "caFile": ca, "username": "plant"}}),
            ),
            (
                "/api/v1/event-sources",
                json!({"name": "untrusting", "type": "mqtt", "secretRef": "broker",
                       "config": {"url": url, "topics": "untrusting/#", "username": "plant"}}),
            ),
        ],
    )
    .await;
    let started = Instant::now();
    while ingress_events(s, token).await.is_empty() {
        broker.publish("secure/door", "door forced");
        broker.publish("untrusting/door", "door forced");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the TLS listener never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The other listener started with it; had it connected, these would arrive.
    for _ in 0..5 {
        broker.publish("untrusting/door", "door forced");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let events = ingress_events(s, token).await;
    let secure = source_id(s, token, "secure").await;
    assert!(events.iter().all(|e| e["sourceId"] == secure), "{events:?}");
    assert_eq!(events[0]["payload"]["summary"], "door forced");
}

#[tokio::test]
async fn mqtt_messages_become_events_across_a_broker_restart() {
    let Some(broker) = Broker::start(None) else {
        return;
    };
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "plant", "type": "mqtt", "labels": {"site": "north"},
                   "config": {"url": format!("mqtt://127.0.0.1:{}", broker.port), "topics": "plant/+/alarm"},
                   "mapping": {"summary": "$.text", "severity": "$.level"}}),
        )],
    )
    .await;
    // The listener subscribes shortly after the source is saved; publish until it is there.
    let started = Instant::now();
    loop {
        broker.publish(
            "plant/pump1/alarm",
            r#"{"text": "pump 1 hot", "level": "critical"}"#,
        );
        if !ingress_events(s, token).await.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the listener never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let e = &ingress_events(s, token).await[0];
    assert_eq!(e["sourceId"], source_id(s, token, "plant").await);
    assert_eq!(e["severity"], "critical");
    assert_eq!(e["payload"]["summary"], "pump 1 hot");
    assert_eq!(
        e["payload"]["labels"],
        json!({"site": "north", "topic": "plant/pump1/alarm"})
    );
    broker.publish("plant/other/status", "not subscribed");
    broker.publish("plant/valve2/alarm", "valve 2 stuck");
    // Found by its text: a "pump 1 hot" published by the loop above may still arrive after it.
    let summary = |e: &Value| e["payload"]["summary"].clone();
    let started = Instant::now();
    let (valve, events) = loop {
        let events = ingress_events(s, token).await;
        if let Some(valve) = events.iter().find(|e| summary(e) == "valve 2 stuck") {
            break (valve.clone(), events);
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "valve 2's alarm never arrived: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        valve["payload"]["payload"],
        json!({"text": "valve 2 stuck"})
    );
    assert!(
        events.iter().all(|e| summary(e) != "not subscribed"),
        "an unsubscribed topic became an event: {events:?}"
    );

    // A burst: every message is stored once, none is stuck behind its acknowledgement.
    let before = ingress_events(s, token).await.len();
    let burst: String = (0..1000).map(|i| format!("reading {i}\n")).collect();
    broker.publish_lines("plant/tank/alarm", &burst);
    let started = Instant::now();
    loop {
        let health = get(s, token, "/api/v1/system/health").await;
        if health["ingress"]["plant"]["received"].as_u64().unwrap() >= (before + 1000) as u64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "burst stuck: {}",
            health["ingress"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The broker goes away and comes back on the same port: the listener reconnects.
    let port = broker.port;
    drop(broker);
    let broker = Broker::start(Some(port)).unwrap();
    let received = |v: &Value| v["ingress"]["plant"]["received"].as_u64().unwrap();
    let count = received(&get(s, token, "/api/v1/system/health").await);
    let started = Instant::now();
    loop {
        broker.publish("plant/pump3/alarm", "pump 3 dry run");
        if received(&get(s, token, "/api/v1/system/health").await) > count {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no reconnect");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The listener is a supervised worker of its own, and leaves with its source.
    let listeners = |v: &Value| -> Vec<String> {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["name"].as_str())
            .filter(|n| *n == "event-source/plant")
            .map(String::from)
            .collect()
    };
    let health = get(s, token, "/api/v1/system/health").await;
    assert_eq!(listeners(&health).len(), 1, "{}", health["workers"]);
    let anonymous = json(s.get("/api/v1/system/health").await, 200).await;
    let kinds = anonymous["workers"].to_string();
    assert!(
        listeners(&anonymous).is_empty() && kinds.contains("\"event-source\""),
        "workers by kind without credentials: {kinds}"
    );
    let gone = call(s, token, Method::DELETE, "/api/v1/event-sources/plant")
        .send()
        .await
        .unwrap();
    assert!(gone.status().is_success(), "{}", gone.status());
    let started = Instant::now();
    while !listeners(&get(s, token, "/api/v1/system/health").await).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the listener outlived its source"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let count = received(&get(s, token, "/api/v1/system/health").await);
    broker.publish("plant/pump4/alarm", "after the source went");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        received(&get(s, token, "/api/v1/system/health").await),
        count,
        "nothing is received for a deleted source"
    );
}

/// `snmptrap` from net-snmp (Debian `snmp`): `false` where it is not installed.
fn snmptrap(args: &[&str]) -> bool {
    match std::process::Command::new("snmptrap")
        .args(args)
        .env("MIBS", "")
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(s) => {
            assert!(s.success(), "snmptrap {args:?} failed");
            true
        }
        Err(_) => {
            peer_missing("snmp (snmptrap)");
            false
        }
    }
}

#[tokio::test]
async fn snmp_traps_v1_and_v2c_become_events_and_link_up_resolves_link_down() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let link = |community: &str, trap: &str| {
        snmptrap(&[
            "-v",
            "2c",
            "-c",
            community,
            &target,
            "",
            trap,
            "1.3.6.1.2.1.2.2.1.1.2",
            "i",
            "2",
        ])
    };
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "switches", "type": "snmp", "authMode": "none", "labels": {"site": "north"},
                   "config": {"listen": target, "community": "public"}}),
        )],
    )
    .await;
    // The listener binds shortly after the source is saved; send until it hears.
    let started = Instant::now();
    loop {
        if !link("public", "1.3.6.1.6.3.1.1.5.3") {
            return;
        }
        if !ingress_events(s, token).await.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no trap heard");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let e = ingress_events(s, token).await.last().unwrap().clone();
    assert_eq!(e["sourceId"], source_id(s, token, "switches").await);
    assert_eq!(
        e["payload"]["summary"],
        "linkDown from 127.0.0.1 (interface 2)"
    );
    assert_eq!(e["payload"]["dedupKey"], "snmp/127.0.0.1/link/2");
    assert_eq!(
        e["payload"]["labels"],
        json!({"site": "north", "agent": "127.0.0.1", "trap": "linkDown"})
    );
    assert_eq!(e["payload"]["payload"]["version"], "2c");
    let varbinds = e["payload"]["payload"]["varbinds"].as_array().unwrap();
    assert!(
        varbinds
            .iter()
            .any(|v| v["oid"] == "1.3.6.1.2.1.2.2.1.1.2" && v["value"] == 2),
        "{varbinds:?}"
    );

    let count = ingress_events(s, token).await.len();
    // Another community is dropped; a v1 coldStart from agent 10.1.2.3 and a linkUp are heard.
    link("private", "1.3.6.1.6.3.1.1.5.3");
    snmptrap(&[
        "-v",
        "1",
        "-c",
        "public",
        &target,
        "1.3.6.1.4.1.8072.3.2.10",
        "10.1.2.3",
        "0",
        "0",
        "",
    ]);
    link("public", "1.3.6.1.6.3.1.1.5.4");
    let events = wait_events(s, token, count + 2).await;
    assert_eq!(
        events.len(),
        count + 2,
        "the other community's trap is not an event"
    );
    let up = &events[0];
    assert_eq!(up["payload"]["labels"]["trap"], "linkUp");
    assert_eq!(up["payload"]["resolve"], true);
    assert_eq!(up["payload"]["dedupKey"], "snmp/127.0.0.1/link/2");
    let cold = &events[1];
    assert_eq!(cold["payload"]["summary"], "coldStart from 10.1.2.3");
    assert_eq!(cold["payload"]["payload"]["version"], "1");
    assert_eq!(cold["severity"], "info");
}

/// Prometheus Alertmanager (Debian `prometheus-alertmanager`) with svc as its webhook
/// receiver, or `None` where it is not installed.
struct Alertmanager {
    _child: Peer,
    url: String,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    fn start(receiver: &str, token: &str) -> Option<Alertmanager> {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            format!(
                "route:\n  receiver: svc\n  group_by: [alertname]\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n\
                 receivers:\n  - name: svc\n    webhook_configs:\n      - url: {receiver}\n        send_resolved: true\n\
                 \x20       http_config:\n          authorization:\n            credentials: {token}\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let mut child = Peer(spawn_peer(
            std::process::Command::new("prometheus-alertmanager")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.path={}", dir.path().display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--cluster.listen-address="),
            "prometheus-alertmanager",
        )?);
        child.wait_listening(port, "alertmanager");
        Some(Alertmanager {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        })
    }

    /// Fires (or, with `ends`, resolves) one alert through Alertmanager's API.
    async fn post(&self, ends: bool) {
        let now = jiff::Timestamp::now();
        let mut alert = json!({"labels": {"alertname": "DiskFull", "instance": "db1", "severity": "critical"},
            "annotations": {"summary": "disk full on db1"}, "startsAt": now.checked_sub(jiff::SignedDuration::from_secs(60)).unwrap().to_string()});
        if ends {
            alert["endsAt"] = json!(now.to_string());
        }
        let res = client()
            .post(format!("{}/api/v2/alerts", self.url))
            .json(&json!([alert]))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "alertmanager: {}", res.status());
    }
}

#[tokio::test]
async fn a_real_alertmanager_fires_and_resolves_an_alert_in_svc() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/am-token",
        json!({"value": "am-s3cret"}),
    )
    .await;
    assert!(res.status().is_success());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/event-sources", json!({"name": "prometheus", "type": "alertmanager", "authMode": "token", "secretRef": "am-token"})),
            ("/api/v1/alert-rules", json!({"name": "from-prometheus", "severity": "critical",
                "match": "event.type == 'ingress' && event.source == 'prometheus'", "title": "{{ .event.summary }}"})),
        ],
    )
    .await;
    let Some(am) = Alertmanager::start(&s.url("/api/v1/ingest/prometheus"), "am-s3cret") else {
        return;
    };
    am.post(false).await;
    let alert = wait_alert(s, token, "open").await;
    assert_eq!(alert["title"], "disk full on db1");
    assert_eq!(alert["labels"]["instance"], "db1");
    am.post(true).await;
    let resolved = wait_alert(s, token, "resolved").await;
    assert_eq!(
        resolved["id"], alert["id"],
        "the resolved notification closes the same alert"
    );
}

/// A Dovecot IMAP server on free local ports (IMAPS and IMAP with STARTTLS; plain sign-in
/// refused) with the mailbox `ops`/`secret` in Maildir form, its certificate signed by a private
/// CA; `None` where it is not installed (CI installs it and must not skip).
struct Dovecot {
    _child: Peer,
    dir: tempfile::TempDir,
    imaps: u16,
    imap: u16,
}

/// Whom the mailbox belongs to: as root, `nobody` (Dovecot refuses uid 0 for mail).
fn mail_owner() -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/self").unwrap();
    if me.uid() == 0 {
        (65534, 65534)
    } else {
        (me.uid(), me.gid())
    }
}

impl Dovecot {
    fn start() -> Option<Dovecot> {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (_, cert, key) = private_ca(d);
        let (imaps, imap) = (free_port(), free_port());
        let (uid, gid) = mail_owner();
        let (login_user, internal_user) = if uid == 65534 {
            ("dovenull".to_string(), "dovecot".to_string())
        } else {
            let me = std::env::var("USER").unwrap_or_else(|_| uid.to_string());
            (me.clone(), me)
        };
        std::fs::create_dir_all(d.join("run")).unwrap();
        std::fs::write(d.join("passwd"), "ops:{PLAIN}secret\n").unwrap();
        for folder in ["", ".Processed/"] {
            for sub in ["new", "cur", "tmp"] {
                std::fs::create_dir_all(d.join(format!("home/ops/Maildir/{folder}{sub}"))).unwrap();
            }
        }
        let config = format!(
            "base_dir = {d}/run\nstate_dir = {d}/run\nlog_path = {d}/dovecot.log\n\
             protocols = imap\nlisten = 127.0.0.1\nssl = required\n\
             ssl_cert = <{cert}\nssl_key = <{key}\ndisable_plaintext_auth = yes\n\
             default_login_user = {login_user}\ndefault_internal_user = {internal_user}\n\
             service imap-login {{\n  chroot =\n  inet_listener imap {{\n    port = {imap}\n  }}\n\
               inet_listener imaps {{\n    port = {imaps}\n    ssl = yes\n  }}\n}}\n\
             service anvil {{\n  chroot =\n}}\n\
             passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN {d}/passwd\n}}\n\
             userdb {{\n  driver = static\n  args = uid={uid} gid={gid} home={d}/home/%u\n}}\n\
             mail_location = maildir:~/Maildir\n",
            d = d.display(),
            cert = cert.display(),
            key = key.display(),
        );
        std::fs::write(d.join("dovecot.conf"), config).unwrap();
        let mut server = Dovecot {
            _child: Peer(spawn_peer(
                std::process::Command::new("dovecot")
                    .arg("-F")
                    .arg("-c")
                    .arg(d.join("dovecot.conf")),
                "dovecot-imapd",
            )?),
            dir,
            imaps,
            imap,
        };
        server.own();
        server._child.wait_listening(imaps, "dovecot");
        Some(server)
    }

    fn ca(&self) -> String {
        self.dir.path().join("ca.pem").display().to_string()
    }

    fn maildir(&self, folder: &str) -> std::path::PathBuf {
        self.dir.path().join("home/ops/Maildir").join(folder)
    }

    /// Hands the mailbox to its owner (a root test writes as root).
    fn own(&mut self) {
        let (uid, gid) = mail_owner();
        let mut stack = vec![self.dir.path().join("home")];
        while let Some(path) = stack.pop() {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            }
        }
    }

    /// Delivers a mail the Maildir way: written in tmp, renamed into new.
    fn deliver(&mut self, name: &str, mail: &str) {
        let tmp = self.maildir("tmp").join(name);
        std::fs::write(&tmp, mail.replace('\n', "\r\n")).unwrap();
        std::fs::rename(&tmp, self.maildir("new").join(name)).unwrap();
        self.own();
    }

    /// The flags of the mails in `folder` (Maildir's `:2,FLAGS` suffix), unread ones as `new`.
    fn flags(&self, folder: &str) -> Vec<String> {
        let mut flags: Vec<String> = ["new", "cur"]
            .iter()
            .flat_map(|sub| {
                std::fs::read_dir(self.maildir(folder).join(sub))
                    .unwrap()
                    .map(move |e| {
                        let name = e.unwrap().file_name().to_string_lossy().to_string();
                        match name.split_once(":2,") {
                            Some((_, f)) if *sub == "cur" => f.to_string(),
                            _ => "new".to_string(),
                        }
                    })
            })
            .collect();
        flags.sort();
        flags
    }
}

fn mail(from: &str, subject: &str, id: &str, text: &str) -> String {
    format!(
        "From: {from}\nTo: ops@example.org\nSubject: {subject}\nMessage-ID: <{id}>\nDate: Wed, 25 Nov 2026 03:00:00 +0000\n\n{text}\n"
    )
}

#[tokio::test]
async fn mails_in_an_imap_mailbox_become_events_and_are_marked_or_moved() {
    let Some(mut dovecot) = Dovecot::start() else {
        return;
    };
    let a = Admin::start_with(trusting_ca(std::path::Path::new(&dovecot.ca())));
    let (s, token) = (&a.s, a.token.as_str());
    let set_password = |value: &'static str| async move {
        let put = call(s, token, Method::PUT, "/api/v1/secrets/mailbox")
            .json(&json!({"value": value}))
            .send()
            .await
            .unwrap();
        assert!(put.status().is_success(), "{}", put.status());
    };
    set_password("wrong").await;
    dovecot.deliver(
        "1.plc",
        &mail(
            "PLC <plc@plant.example>",
            "=?UTF-8?Q?Pumpe_1_=C3=BCberhitzt?= CRIT",
            "1@plant",
            "Pump 1 at 95 C",
        ),
    );
    dovecot.deliver(
        "2.ups",
        &mail("ups@plant.example", "On battery", "2@plant", "Mains lost"),
    );
    let source = |url: String, extra: Value| {
        let mut config =
            json!({"url": url, "username": "ops", "caFile": dovecot.ca(), "pollInterval": "1s"});
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"name": "vendor", "type": "email", "secretRef": "mailbox", "labels": {"site": "north"},
               "config": config,
               "mapping": {"dedupKey": "$.messageId",
                           "severity": "cel:body.subject.contains('CRIT') ? 'critical' : 'warning'"}})
    };
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            source(format!("imaps://127.0.0.1:{}", dovecot.imaps), json!({})),
        )],
    )
    .await;
    // Refused sign-ins read nothing; the right password, set later, is used at the next poll.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(ingress_events(s, token).await.is_empty());
    assert_eq!(dovecot.flags(""), ["new", "new"]);
    set_password("secret").await;
    // Dovecot delays a client after failed sign-ins (up to 15 s).
    let started = Instant::now();
    let events = loop {
        let events = ingress_events(s, token).await;
        if events.len() >= 2 {
            break events;
        }
        assert!(started.elapsed() < Duration::from_secs(40), "{events:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let by_key = |key: &str| {
        events
            .iter()
            .find(|e| e["payload"]["dedupKey"] == key)
            .unwrap_or_else(|| panic!("no event {key}: {events:?}"))
            .clone()
    };
    let pump = by_key("1@plant");
    assert_eq!(pump["sourceId"], source_id(s, token, "vendor").await);
    assert_eq!(pump["severity"], "critical");
    assert_eq!(pump["payload"]["summary"], "Pumpe 1 überhitzt CRIT");
    assert_eq!(
        pump["payload"]["labels"],
        json!({"site": "north", "from": "plc@plant.example"})
    );
    assert_eq!(pump["payload"]["payload"]["text"], "Pump 1 at 95 C");
    assert_eq!(by_key("2@plant")["severity"], "warning");
    // Stored, then marked seen on the server; read once however often the mailbox is polled.
    let started = Instant::now();
    while dovecot.flags("") != ["S", "S"] {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            dovecot.flags("")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(ingress_events(s, token).await.len(), 2);

    // Changed to STARTTLS and to moving what it read: the listener restarts with it.
    let res = call(s, token, Method::PUT, "/api/v1/event-sources/vendor")
        .header("If-Match", "1")
        .json(&source(
            format!("imap://127.0.0.1:{}", dovecot.imap),
            json!({"moveTo": "Processed"}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    dovecot.deliver(
        "3.door",
        &mail("door@plant.example", "Door open", "3@plant", "Hall 2"),
    );
    let events = wait_events(s, token, 3).await;
    assert_eq!(events[0]["payload"]["summary"], "Door open");
    let started = Instant::now();
    while dovecot.flags(".Processed") != ["S"] {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            dovecot.flags(".Processed")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The copy shows before the original is expunged from the inbox.
    while dovecot.flags("") != ["S", "S"] {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "moved, not copied: {:?}",
            dovecot.flags("")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_source_that_connects_out_is_refused_a_configuration_its_listener_cannot_use() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    for (body, says) in [
        (
            json!({"name": "pop", "type": "email", "secretRef": "pw", "config": {"url": "pop3://mail.example", "username": "ops"}}),
            "imaps://",
        ),
        (
            json!({"name": "anon", "type": "email", "secretRef": "pw", "config": {"url": "imaps://mail.example"}}),
            "config.username",
        ),
        (
            json!({"name": "nopw", "type": "email", "config": {"url": "imaps://mail.example", "username": "ops"}}),
            "secretRef",
        ),
        (
            json!({"name": "deaf", "type": "mqtt", "config": {"url": "mqtt://broker"}}),
            "config.topics",
        ),
        (
            json!({"name": "ws", "type": "mqtt", "config": {"url": "ws://broker", "topics": "a/#"}}),
            "mqtt://",
        ),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/event-sources",
            body.clone(),
        )
        .await;
        let p = assert_problem(res, 422, "svc:validation/config").await;
        assert!(p["detail"].as_str().unwrap().contains(says), "{body}: {p}");
    }
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "ok", "type": "mqtt", "config": {"url": "mqtt://127.0.0.1:9", "topics": "a/#"}}),
        )],
    )
    .await;
    let list = get(s, token, "/api/v1/event-sources").await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        1,
        "nothing refused was stored"
    );
}
