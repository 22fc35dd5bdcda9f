//! Local paging hardware end to end: the server drives a simulated GSM modem and a simulated
//! ESPA 4.4.4 paging system over socat pseudo-terminals.

use crate::espa_peer::EspaPeer;
use crate::modem_sim::{Callee, ModemSim, ring_lines};
use crate::pty::PtyPair;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ADA: &str = "+491701234567";

/// An administrator's server with `hardware` configuration (YAML under the key).
fn start_with_hardware(hardware: &str) -> (Admin, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), &format!("hardware:\n{hardware}")),
        ..Default::default()
    });
    (a, dir)
}

/// Polls `path` until `done` holds for its JSON (or fails after 15 s).
async fn until(s: &Server, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let v = get(s, token, path).await;
        if done(&v) {
            return v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{path} never got there: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The readiness entry of a device.
async fn subsystem(s: &Server, name: &str) -> (u16, Value) {
    let res = s.get("/readyz").await;
    let status = res.status().as_u16();
    let v: Value = res.json().await.unwrap();
    let entry = v["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .cloned()
        .unwrap_or(Value::Null);
    (status, entry)
}

pub(crate) async fn ready(s: &Server, name: &str) {
    let started = Instant::now();
    loop {
        let (status, entry) = subsystem(s, name).await;
        if status == 200 && entry["ok"] == true {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{name} never became ready: {entry}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn result(s: &Server, token: &str, state: &str) {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge", "service": "disk", "state": state, "output": format!("DISK {state}")}]}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
}

/// A host and a service whose CRITICAL opens an alert paged by `policy`.
fn monitored(policy: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("/api/v1/hosts", json!({"name": "edge", "spec": {}})),
        (
            "/api/v1/services",
            json!({"name": "disk", "host": "edge", "spec": {}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "disk-critical", "match": "event.type == 'state_change' && event.state == 'CRITICAL'",
                   "severity": "critical", "title": "disk full on edge", "escalationPolicy": policy}),
        ),
    ]
}

async fn only_alert(s: &Server, token: &str, query: &str) -> Value {
    until(s, token, &format!("/api/v1/alerts{query}"), |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 1)
    })
    .await["items"][0]
        .clone()
}

async fn test_on(s: &Server, token: &str, channel: &str, target: &str) -> reqwest::Response {
    send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/channels/{channel}:test-notification"),
        json!({"target": target}),
    )
    .await
}

fn short_id(alert: &Value) -> String {
    let id = alert["id"].as_str().unwrap().replace('-', "");
    id[id.len() - 8..].to_string()
}

#[tokio::test]
async fn a_critical_result_pages_the_on_call_person_by_sms_and_an_ack_reply_stops_the_chain() {
    let Some(pty) = PtyPair::open("sms end to end") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    sim.state.lock().unwrap().pin = Some("4711".into());
    let (a, _config) = start_with_hardware(&format!(
        "  gsm:\n    device: {}\n    pin: \"4711\"\n    profile: simcom\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    let mut items = vec![
        (
            "/api/v1/channels",
            json!({"name": "gsm", "type": "sms", "config": {"provider": "modem"}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "phone": "+49 170 1234567", "preferences": [{"channels": ["sms"], "profile": "default"}]}),
        ),
        (
            "/api/v1/schedules",
            json!({"name": "ops", "timeZone": "UTC", "layers": [
                {"anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": ["ada"]}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [
                {"after": 0, "notify": {"schedule": "ops"}},
                {"after": "8s", "notify": {"schedule": "ops"}}]}),
        ),
    ];
    items.extend(monitored("page"));
    create_all(s, token, items).await;

    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    let alert = only_alert(s, token, "?status=open").await;
    let short = short_id(&alert);
    sim.wait_for(Duration::from_secs(10), "the page by SMS", |st| {
        !st.sent.is_empty()
    });
    let page = &sim.sent()[0];
    assert_eq!(page.to, ADA, "the contact's phone, as the modem dials it");
    assert_eq!(page.mode, "text-gsm");
    assert!(
        page.text.starts_with("CRITICAL: disk full on edge"),
        "{}",
        page.text
    );
    assert!(
        page.text
            .ends_with(&format!("Reply ACK {short} or RES {short}")),
        "{}",
        page.text
    );

    // The reply comes from the same number in its international form.
    let index = sim.deliver(ADA, &format!("ack {short}"));
    let acked = only_alert(s, token, "?status=acked").await;
    assert_eq!(acked["id"], alert["id"]);
    assert_eq!(acked["ackedBy"], "ada");
    let acks = get(s, token, "/api/v1/events?types=ack").await;
    assert_eq!(acks["items"][0]["payload"]["via"], "sms");
    sim.wait_for(
        Duration::from_secs(5),
        "the message deleted and answered",
        |st| !st.storage.contains_key(&index) && st.sent.len() == 2,
    );
    assert!(
        sim.sent()[1]
            .text
            .starts_with(&format!("Acknowledged {short}"))
    );

    // The ack stopped the chain: the second step (8 s after the page, well after the reply
    // even on a loaded machine) pages no one.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(sim.sent().len(), 2, "{:?}", sim.sent());
    let escalations = get(s, token, "/api/v1/events?types=escalation").await;
    assert_eq!(escalations["items"].as_array().unwrap().len(), 1);

    // With `manualAlarm` on the sms source, other texts from a contact raise an alarm.
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "alarms", "type": "sms", "config": {"manualAlarm": "true", "severity": "warning"}}),
        )],
    )
    .await;
    sim.deliver(ADA, "Pumpe 7 ausgefallen\nbitte kommen");
    let alarm = only_alert(s, token, "?status=open").await;
    assert_eq!(alarm["title"], "Pumpe 7 ausgefallen");
    assert_eq!(alarm["severity"], "warning");
    assert_eq!(
        alarm["payload"]["message"],
        "Pumpe 7 ausgefallen\nbitte kommen"
    );
    let opened = get(s, token, "/api/v1/events?types=alert_opened").await;
    assert_eq!(opened["items"][0]["payload"]["via"], "sms");
    sim.wait_for(Duration::from_secs(5), "the alarm confirmed", |st| {
        st.sent
            .iter()
            .any(|m| m.text.starts_with("Alarm raised: Pumpe 7 ausgefallen."))
    });
}

#[tokio::test]
async fn sms_encoding_errors_and_inbound_texts_follow_the_standards() {
    let Some(pty) = PtyPair::open("sms encoding") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    // A message that arrived while the service was down is swept at start.
    sim.state
        .lock()
        .unwrap()
        .storage
        .insert(3, ("+4930123456".into(), "pump 2 pressure low".into()));
    let (a, _config) = start_with_hardware(&format!(
        "  gsm:\n    device: {}\n    baudRate: 9600\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    create_all(
        s,
        token,
        vec![(
            "/api/v1/channels",
            json!({"name": "gsm", "type": "sms", "template": "{{ .Title }}"}),
        )],
    )
    .await;
    let swept = until(s, token, "/api/v1/events?types=ingress", |v| {
        !v["items"].as_array().unwrap().is_empty()
    })
    .await;
    let event = &swept["items"][0];
    assert_eq!(
        event["sourceId"], "sms",
        "no sms source yet: the built-in one, by name"
    );
    assert_eq!(event["payload"]["summary"], "pump 2 pressure low");
    assert_eq!(event["payload"]["payload"]["from"], "+4930123456");
    sim.wait_for(Duration::from_secs(5), "the swept message deleted", |st| {
        st.storage.is_empty()
    });
    create_all(
        s,
        token,
        vec![(
            "/api/v1/event-sources",
            json!({"name": "field-sms", "type": "sms", "labels": {"site": "pumps"}}),
        )],
    )
    .await;
    sim.deliver("+4930123456", "Pumpe 3 Übertemperatur");
    let later = until(s, token, "/api/v1/events?types=ingress", |v| {
        v["items"].as_array().unwrap().len() == 2
    })
    .await;
    let event = &later["items"][0];
    assert_eq!(
        event["sourceId"],
        get(s, token, "/api/v1/event-sources/field-sms").await["id"],
        "a source with a document: its id"
    );
    assert_eq!(event["payload"]["labels"]["site"], "pumps");
    assert_eq!(
        event["payload"]["summary"], "Pumpe 3 Übertemperatur",
        "a UCS2 message read back as text"
    );

    let long = format!("{} @ {}", "x".repeat(150), "y".repeat(150));
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/channels",
                json!({"name": "umlauts", "type": "sms", "template": "Störung: Pumpe 2 läuft nicht"}),
            ),
            (
                "/api/v1/channels",
                json!({"name": "long", "type": "sms", "template": long}),
            ),
        ],
    )
    .await;
    // Plain text goes in text mode; umlauts in UCS2; a long text in concatenated PDUs.
    assert_eq!(test_on(s, token, "gsm", "+4930111").await.status(), 200);
    let sent = sim.sent();
    assert_eq!(
        (sent[0].to.as_str(), sent[0].mode.as_str()),
        ("+4930111", "text-gsm")
    );

    assert_eq!(test_on(s, token, "umlauts", "+4930111").await.status(), 200);
    let sent = sim.sent();
    assert_eq!(sent[1].mode, "text-ucs2");
    assert_eq!(sent[1].text, "Störung: Pumpe 2 läuft nicht");

    assert_eq!(test_on(s, token, "long", "0301112").await.status(), 200);
    let sent = sim.sent();
    assert_eq!(sent[2].mode, "pdu 2");
    assert_eq!(sent[2].to, "0301112");
    assert_eq!(sent[2].text, long, "the parts reassemble to the text");
    assert_eq!(
        sim.state.lock().unwrap().pdu_length_errors,
        0,
        "AT+CMGS=<n> counts TPDU octets"
    );
    assert!(
        sim.state
            .lock()
            .unwrap()
            .commands
            .iter()
            .any(|c| c == "AT+CMGF=1"),
        "back to text mode"
    );

    // +CMS ERROR 38 (network out of order) may pass later; 1 (unassigned number) never will.
    sim.state.lock().unwrap().cms_errors.push_back(38);
    let res = test_on(s, token, "gsm", "+4930111").await;
    let problem = assert_problem(res, 502, "svc:notify/test-failed").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("38"),
        "{problem}"
    );
    assert_eq!(test_on(s, token, "gsm", "+4930111").await.status(), 200);
}

#[tokio::test]
async fn a_call_acknowledged_with_dtmf_4_stops_the_chain_and_an_unanswered_call_is_retried() {
    let Some(pty) = PtyPair::open("voice") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    sim.state.lock().unwrap().callee = Callee::NoAnswer;
    let (a, _config) = start_with_hardware(&format!(
        "  gsm:\n    device: {}\n    profile: simcom\n    keyTimeout: 3s\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    let mut items = vec![
        (
            "/api/v1/tts-profiles",
            json!({"name": "site", "engine": "simcom", "audio": {}, "detect": {}, "normalize": {
                "lexicon": [{"from": "edge", "to": "the edge router"}],
                "regex": [{"pattern": "CRITICAL|critical", "replace": "urgent"}]}}),
        ),
        (
            "/api/v1/channels",
            json!({"name": "call", "type": "voice", "config": {"retryBackoffSeconds": "1", "ttsProfile": "site"}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "phone": ADA, "preferences": [{"channels": ["call"], "profile": "default"}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}, {"after": "20s", "notify": {"contact": "ada"}}]}),
        ),
    ];
    items.extend(monitored("page"));
    create_all(s, token, items).await;
    result(s, token, "CRITICAL").await;
    let alert = only_alert(s, token, "?status=open").await;

    // Nobody answers the first call; the outbox calls again and ada presses 4.
    sim.wait_for(Duration::from_secs(10), "the first call", |st| {
        st.dialled.len() == 1
    });
    sim.state.lock().unwrap().callee = Callee::Presses('4');
    let acked = only_alert(s, token, "?status=acked").await;
    assert_eq!(acked["id"], alert["id"]);
    assert_eq!(acked["ackedBy"], "ada");
    let (dialled, spoken) = {
        let st = sim.state.lock().unwrap();
        (st.dialled.clone(), st.spoken.clone())
    };
    assert_eq!(dialled, vec![ADA, ADA]);
    assert!(
        spoken[0].starts_with("urgent alert. disk full on the edge router."),
        "the profile's lexicon and regex rewrite the text: {spoken:?}"
    );
    assert!(spoken[0].ends_with("Press 4 to acknowledge, 6 to resolve."));
    let acks = get(s, token, "/api/v1/events?types=ack").await;
    assert_eq!(acks["items"][0]["payload"]["via"], "dtmf");
    let failed = get(s, token, "/api/v1/events?types=notification").await;
    let statuses: Vec<&str> = failed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.contains(&"failed") && statuses.contains(&"sent"),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn the_modem_reports_its_health_and_comes_back_after_it_is_unplugged() {
    let Some(mut pty) = PtyPair::open("modem health") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    sim.state.lock().unwrap().pin = Some("1234".into());
    // No PIN configured: the modem stays unavailable and says why.
    let (a, config_dir) =
        start_with_hardware(&format!("  gsm:\n    device: {}\n", pty.ours.display()));
    let (s, token) = (&a.s, a.token.as_str());
    let started = Instant::now();
    loop {
        let (status, entry) = subsystem(s, "gsm").await;
        if entry["info"].as_str().is_some_and(|i| i.contains("PIN")) {
            assert_eq!(status, 503);
            assert_eq!(entry["ok"], false);
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{entry}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let health = get(s, token, "/api/v1/system/health").await;
    assert_eq!(health["hardware"]["gsm"]["sim"], "pin required");
    assert_eq!(health["hardware"]["espa"], Value::Null);
    // The driver is a supervised worker.
    let drivers: Vec<&Value> = health["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["name"] == "gsm-modem")
        .collect();
    assert_eq!(drivers.len(), 1, "{}", health["workers"]);
    assert_eq!(drivers[0]["restarts"], 0);

    // The PIN as a secret of the default tenant, read at the next start.
    let res = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/sim-pin",
        json!({"value": "1234"}),
    )
    .await;
    assert!(res.status().is_success(), "{}", res.status());
    let token = a.token.clone();
    let stopped = a.s.stop_keeping_data();
    let sim = {
        drop(sim);
        pty.plug();
        let sim = ModemSim::start(&pty.theirs);
        let mut st = sim.state.lock().unwrap();
        st.pin = Some("1234".into());
        st.rssi = 20;
        st.creg = 2;
        drop(st);
        sim
    };
    let config = config_dir.path().join("with-pin.yaml");
    std::fs::write(
        &config,
        format!(
            "hardware:\n  gsm:\n    device: {}\n    pin: $SECRET:sim-pin$\n",
            pty.ours.display()
        ),
    )
    .unwrap();
    let server = stopped.start(Opts {
        args: vec!["--config".into(), config.display().to_string()],
        ..Default::default()
    });
    let (s, token) = (&server, token.as_str());
    // Still searching for a network: connected, not ready; once roaming, ready on its own.
    let started = Instant::now();
    loop {
        let (status, entry) = subsystem(s, "gsm").await;
        if entry["info"]
            .as_str()
            .is_some_and(|i| i.contains("registration searching"))
        {
            assert_eq!((status, &entry["ok"]), (503, &json!(false)));
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{entry}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sim.state.lock().unwrap().creg = 5;
    ready(s, "gsm").await;
    let health = get(s, token, "/api/v1/system/health").await;
    let gsm = &health["hardware"]["gsm"];
    assert_eq!(gsm["registration"], "roaming");
    assert_eq!(gsm["signalDbm"], -73, "+CSQ 20 is -113 + 2 x 20 dBm");
    assert_eq!(gsm["connected"], true);
    // The built-in `gsm` check turns the same report into a service state.
    create_all(
        s,
        token,
        vec![
            ("/api/v1/hosts", json!({"name": "gw", "spec": {}})),
            (
                "/api/v1/services",
                json!({"name": "modem", "host": "gw", "spec": {"checkCommand": "gsm", "args": ["-w", "-70"], "interval": 1, "maxCheckAttempts": 1}}),
            ),
        ],
    )
    .await;
    let services = until(s, token, "/api/v1/services", |v| {
        !v["items"][0]["state"].is_null()
    })
    .await;
    let state = &services["items"][0]["state"];
    assert_eq!(state["state"], 1, "-73 dBm is under the -70 floor: {state}");
    assert!(
        state["output"]
            .as_str()
            .unwrap()
            .starts_with("GSM WARNING - registered roaming, signal -73 dBm"),
        "{state}"
    );
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("np_hardware_up{device=\"gsm\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("np_gsm_signal_dbm -73"));

    // The USB modem disappears: not ready; it re-enumerates: ready again on its own.
    pty.unplug();
    drop(sim);
    let started = Instant::now();
    loop {
        let (status, entry) = subsystem(s, "gsm").await;
        if status == 503 && entry["ok"] == false {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{entry}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pty.plug();
    let _sim = ModemSim::start(&pty.theirs);
    ready(s, "gsm").await;
}

#[tokio::test]
async fn a_modem_that_answers_its_first_probe_late_is_not_misread_afterwards() {
    let Some(pty) = PtyPair::open("late probe") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    {
        let mut st = sim.state.lock().unwrap();
        // The first probe times out; its OK comes with the second probe's, and that second OK
        // must not be taken for the answer to the next command.
        st.first_probe_held = true;
        st.rssi = 17;
        st.creg = 5;
    }
    let (a, _config) =
        start_with_hardware(&format!("  gsm:\n    device: {}\n", pty.ours.display()));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    let health = get(s, token, "/api/v1/system/health").await;
    let gsm = &health["hardware"]["gsm"];
    assert_eq!(gsm["sim"], "ready", "{gsm}");
    assert_eq!(gsm["registration"], "roaming", "{gsm}");
    assert_eq!(gsm["signalDbm"], -113 + 2 * 17, "{gsm}");

    create_all(
        s,
        token,
        vec![(
            "/api/v1/channels",
            json!({"name": "sms", "type": "sms", "config": {"provider": "modem"}}),
        )],
    )
    .await;
    let res = test_on(s, token, "sms", ADA).await;
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let sent = sim.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].to, ADA);
}

#[tokio::test]
async fn when_the_uplink_is_down_the_contact_is_paged_by_sms_at_once() {
    let Some(pty) = PtyPair::open("failover") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    let (a, _config) =
        start_with_hardware(&format!("  gsm:\n    device: {}\n", pty.ours.display()));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    // A webhook to an address nothing listens on: the uplink is gone.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", gone.local_addr().unwrap());
    drop(gone);
    let mut items = vec![
        (
            "/api/v1/channels",
            json!({"name": "hook", "type": "webhook", "config": {"url": url}}),
        ),
        ("/api/v1/channels", json!({"name": "gsm", "type": "sms"})),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "phone": ADA, "preferences": [
                {"channels": ["hook"], "profile": "default"},
                {"channels": ["gsm"], "profile": "default"}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
        ),
    ];
    items.extend(monitored("page"));
    create_all(s, token, items).await;
    let started = Instant::now();
    result(s, token, "CRITICAL").await;
    sim.wait_for(
        Duration::from_secs(10),
        "the SMS after the webhook failed",
        |st| !st.sent.is_empty(),
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no 30 s retry wait before the next channel"
    );
    let events = get(s, token, "/api/v1/events?types=notification").await;
    let hook_failed = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["payload"]["channel"] == "hook" && e["payload"]["status"] == "failed")
        .unwrap_or_else(|| panic!("the webhook attempt is recorded as failed: {events}"));
    assert_eq!(hook_failed["payload"]["failover"], true, "{events}");
    let dead = get(s, token, "/api/v1/notifications/dead-letters").await;
    assert_eq!(
        dead["items"].as_array().unwrap().len(),
        0,
        "handed over, not dead"
    );
}

#[tokio::test]
async fn espa_pages_reach_the_paging_system_and_panel_calls_open_alerts() {
    let Some(pty) = PtyPair::open("espa") else {
        return;
    };
    let peer = EspaPeer::start(&pty.theirs);
    let (a, _config) = start_with_hardware(&format!(
        "  espa:\n    device: {}\n    replyTimeout: 500ms\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "espa").await;
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "pager", "type": "espa"})),
            (
                "/api/v1/contacts",
                json!({"name": "ada", "pager": "550", "preferences": [{"channels": ["pager"], "profile": "default"}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
            ),
            (
                "/api/v1/alert-rules",
                json!({"name": "panel", "match": "event.type == 'ingress' && event.source == 'espa' && event.payload.priority == '3'",
                       "severity": "critical", "title": "Störung {{ .event.summary }}", "escalationPolicy": "page"}),
            ),
        ],
    )
    .await;

    // The paging system NAKs the first block and ignores the second: sent a third time.
    {
        let mut st = peer.state.lock().unwrap();
        st.nak_next = 1;
        st.ignore_next = 1;
    }
    // A fire panel calls in: the block becomes an ingress event, the rule opens an alert,
    // and the alert pages ada's pager.
    assert!(
        peer.call("204", "FIRE ZONE 4", '3'),
        "svc acknowledged the call"
    );
    let alert = only_alert(s, token, "?status=open").await;
    assert_eq!(alert["title"], "Störung FIRE ZONE 4");
    let ingress = get(s, token, "/api/v1/events?types=ingress").await;
    let event = &ingress["items"][0];
    assert_eq!(event["severity"], "critical");
    assert_eq!(event["payload"]["dedupKey"], "espa/204");
    assert_eq!(event["payload"]["payload"]["callAddress"], "204");

    // The transfer ends with EOT after the block's ACK: wait for both.
    peer.wait_for(Duration::from_secs(10), "the page and its EOT", |st| {
        !st.blocks.is_empty() && st.eots >= 1
    });
    let short = short_id(&alert);
    let (counts, page, eots) = {
        let st = peer.state.lock().unwrap();
        (
            (st.naks_sent, st.ignored, st.bad_bcc),
            st.blocks[0].clone(),
            st.eots,
        )
    };
    assert_eq!(counts, (1, 1, 0));
    assert_eq!(page.header, '1', "call to pager");
    assert_eq!(page.record('1'), Some("550"));
    assert_eq!(
        page.record('2'),
        Some(format!("CRITICAL Stoerung FIRE ZONE 4 Reply ACK {short} or RES {short}").as_str()),
        "7-bit text"
    );
    assert_eq!(
        page.record('6'),
        Some("3"),
        "critical pages with alarm priority"
    );
    assert!(page.raw.iter().all(|b| *b < 0x80));
    assert!(eots >= 1, "the transfer ends with EOT");
    let health = get(s, token, "/api/v1/system/health").await;
    assert_eq!(health["hardware"]["espa"]["pagesSent"], 1);
    assert_eq!(health["hardware"]["espa"]["retransmissions"], 2);
    assert_eq!(health["hardware"]["espa"]["callsReceived"], 1);
}

#[tokio::test]
async fn a_known_caller_acknowledges_the_newest_alert_through_the_ivr_menu_on_a_quectel_modem() {
    let Some(pty) = PtyPair::open("ivr") else {
        return;
    };
    let sim = ModemSim::start(&pty.theirs);
    sim.state.lock().unwrap().callee = Callee::Presses('1');
    let (a, _config) = start_with_hardware(&format!(
        "  gsm:\n    device: {}\n    profile: quectel\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "gsm").await;
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/contacts",
                json!({"name": "ada", "phone": ADA, "preferences": []}),
            ),
            (
                "/api/v1/ivr-menus",
                json!({"name": "main", "greeting": "This is svc.", "trustCallerId": true, "options": [
                    {"digit": "1", "action": "ack", "label": "acknowledge the newest alert"},
                    {"digit": "6", "action": "resolve", "label": "resolve it"},
                    {"digit": "9", "action": "alarm", "title": "Alarm by phone", "severity": "warning"}]}),
            ),
            ("/api/v1/alerts", json!({"title": "pump 2 stopped"})),
        ],
    )
    .await;
    // A stranger is hung up on; ada hears the menu and presses 1. Her call rings in the same
    // write as the modem's OK to the hang-up: lines already read must not wait for more.
    sim.state.lock().unwrap().with_ok_to = Some(("ATH".into(), ring_lines(ADA).to_vec()));
    sim.ring("+4911111111");
    sim.wait_for(Duration::from_secs(5), "the stranger hung up on", |st| {
        st.commands.iter().any(|c| c == "ATH")
    });
    sim.wait_for(Duration::from_secs(15), "ada's call answered", |st| {
        st.commands.iter().any(|c| c == "ATA")
    });
    let acked = only_alert(s, token, "?status=acked").await;
    assert_eq!(acked["title"], "pump 2 stopped");
    assert_eq!(acked["ackedBy"], "ada");
    let spoken = sim.state.lock().unwrap().spoken.clone();
    assert_eq!(
        spoken,
        vec![
            "This is svc. Press 1 to acknowledge the newest alert. Press 6 to resolve it. Press 9 to Alarm by phone."
        ]
    );
    let acks = get(s, token, "/api/v1/events?types=ack").await;
    assert_eq!(acks["items"][0]["payload"]["via"], "ivr");

    // 9 raises a manual alarm by phone; 6 then resolves the newest alert, that alarm.
    sim.state.lock().unwrap().callee = Callee::Presses('9');
    sim.ring(ADA);
    let alarm = only_alert(s, token, "?status=open").await;
    assert_eq!(alarm["title"], "Alarm by phone");
    assert_eq!(alarm["severity"], "warning");
    let opened = get(s, token, "/api/v1/events?types=alert_opened").await;
    assert_eq!(opened["items"][0]["payload"]["via"], "ivr");
    sim.state.lock().unwrap().callee = Callee::Presses('6');
    sim.ring(ADA);
    let resolved = only_alert(s, token, "?status=resolved").await;
    assert_eq!(resolved["id"], alarm["id"]);
    let acked = only_alert(s, token, "?status=acked").await;
    assert_eq!(
        acked["title"], "pump 2 stopped",
        "the acked alert is not the newest open one"
    );
}

#[tokio::test]
async fn espa_pages_go_through_a_serial_server_over_tcp() {
    let Some(pty) = PtyPair::open("espa over tcp") else {
        return;
    };
    drop(pty);
    // A serial server: socat accepts the TCP connection and carries its bytes to a pty.
    let dir = tempfile::tempdir().unwrap();
    let peer_tty = dir.path().join("paging-system");
    let port = free_port();
    let mut server = std::process::Command::new("socat")
        .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr"))
        .arg(format!("pty,raw,echo=0,link={}", peer_tty.display()))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (a, _config) = start_with_hardware(&format!(
        "  espa:\n    device: tcp://127.0.0.1:{port}\n    replyTimeout: 500ms\n"
    ));
    let (s, token) = (&a.s, a.token.as_str());
    let started = Instant::now();
    while !peer_tty.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "svc never connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peer = EspaPeer::start(&peer_tty);
    ready(s, "espa").await;
    create_all(
        s,
        token,
        vec![("/api/v1/channels", json!({"name": "pager", "type": "espa"}))],
    )
    .await;
    let res = test_on(s, token, "pager", "777").await;
    assert_eq!(res.status(), 200);
    let page = peer.state.lock().unwrap().blocks[0].clone();
    assert_eq!(page.record('1'), Some("777"));
    assert_eq!(
        page.record('6'),
        Some("1"),
        "a test message has normal priority"
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// A flood pages an ESPA pager once (issue 69): twelve hosts going down at once flood the
/// tenant (2 alerts within a minute), and the paging system gets one digest block, with alarm
/// priority, instead of a page per alert; at most one alert paged before the flood did.
#[tokio::test]
async fn a_flood_pages_an_espa_pager_once_with_a_digest() {
    let Some(pty) = PtyPair::open("espa flood digest") else {
        return;
    };
    let peer = EspaPeer::start(&pty.theirs);
    let (a, _config) = start_with_hardware(&format!(
        "  espa:\n    device: {}\n    replyTimeout: 500ms\nalerting:\n  flood: {{enterAt: {{alerts: 2, within: 1m}}, leaveAt: {{alerts: 1, within: 3s}}, digestEvery: 2s}}\n",
        pty.ours.display()
    ));
    let (s, token) = (&a.s, a.token.as_str());
    ready(s, "espa").await;
    let mut items = vec![
        ("/api/v1/channels", json!({"name": "pager", "type": "espa"})),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "pager": "550", "preferences": [{"channels": ["pager"], "profile": "default"}]}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "down", "match": "event.type == 'state_change' && event.state == 'DOWN'",
                   "severity": "critical", "escalationPolicy": "page"}),
        ),
    ];
    let hosts: Vec<String> = (0..12).map(|i| format!("pump{i:02}")).collect();
    for h in &hosts {
        items.push(("/api/v1/hosts", json!({"name": h, "spec": {}})));
    }
    create_all(s, token, items).await;
    let down: Vec<Value> = hosts
        .iter()
        .map(|h| json!({"host": h, "state": "DOWN", "output": "DOWN"}))
        .collect();
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": down}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
    until(s, token, "/api/v1/events?types=flood_ended", |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 1)
    })
    .await;
    peer.wait_for(Duration::from_secs(10), "the digest", |st| {
        st.blocks.iter().any(|b| {
            b.record('2')
                .is_some_and(|t| t.starts_with("CRITICAL Flood: "))
        })
    });
    let blocks = peer.state.lock().unwrap().blocks.clone();
    let digests: Vec<_> = blocks
        .iter()
        .filter(|b| {
            b.record('2')
                .is_some_and(|t| t.starts_with("CRITICAL Flood: "))
        })
        .collect();
    assert_eq!(digests.len(), 1, "one digest: {blocks:?}");
    let alone = blocks.len() - 1;
    assert!(alone <= 1, "paged alone: {blocks:?}");
    let text = digests[0].record('2').unwrap();
    assert_eq!(text, format!("CRITICAL Flood: {} alerts", 12 - alone));
    assert_eq!(digests[0].record('1'), Some("550"));
    assert_eq!(digests[0].record('6'), Some("3"), "alarm priority");
}
