//! Shift-change notices (issue 70): ahead of a shift, at its end, on a schedule change, and
//! the handover digest; driven by the clock the tests move, across a kill -9.

use crate::receiver::Receiver;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The handoff notices `contact` got, in order; a delivery sent again (its sending was not
/// recorded before a kill -9: webhooks are at least once) counts once.
fn notices(hooks: &Receiver, contact: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for b in hooks.received("/hook").iter().map(|r| r.json()) {
        if b["kind"] == "handoff" && b["contact"] == contact && !out.contains(&b) {
            out.push(b);
        }
    }
    out
}

fn title(b: &Value) -> String {
    b["alert"]["title"].as_str().unwrap_or_default().to_string()
}

/// Waits until `contact` has a handoff notice whose title starts with `prefix`; returns it.
async fn notice(hooks: &Receiver, contact: &str, prefix: &str) -> Value {
    let started = Instant::now();
    loop {
        if let Some(n) = notices(hooks, contact)
            .into_iter()
            .find(|n| title(n).starts_with(prefix))
        {
            return n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{contact} never got {prefix:?}: {:?}",
            notices(hooks, contact)
                .iter()
                .map(title)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn count(hooks: &Receiver, contact: &str, prefix: &str) -> usize {
    notices(hooks, contact)
        .iter()
        .filter(|n| title(n).starts_with(prefix))
        .count()
}

async fn override_for(s: &Server, token: &str, contact: &str, start: jiff::Timestamp, hours: i64) {
    let end = start + jiff::SignedDuration::from_hours(hours);
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/schedules/ops/overrides",
        json!({"contactId": contact, "start": start.to_string(), "end": end.to_string()}),
    )
    .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
}

/// Cy asks for every shift notice (`advance: [24h, 15m]`, `offCall`, `scheduleChanged`,
/// `digest`); dan, always on call, for none. An override puts cy on call in two days for eight
/// hours: 24 hours ahead cy is told, the server is killed and started again, 15 minutes ahead
/// cy is told (neither twice); a second override moving cy's shifts tells cy they changed; at
/// the handover cy gets the digest (the open alert of the policy that pages the schedule), and
/// dan, outgoing, nothing he did not ask for; at the end cy is told she is off call and dan is
/// on call again.
#[tokio::test]
async fn a_person_is_told_ahead_of_a_shift_at_its_end_and_when_it_moves() {
    let clocked = Clocked::new();
    let token = clocked.token.clone();
    let s = clocked.start();
    let hooks = Receiver::start().await;
    let prefs = json!([{"channels": ["webhook"], "profile": "default"}]);
    create_all(
        &s,
        &token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/contacts", json!({"name": "dan", "preferences": prefs})),
            ("/api/v1/contacts", json!({"name": "cy", "preferences": prefs, "handoffNotices": {
                "advance": ["24h", "15m"], "offCall": true, "scheduleChanged": true, "digest": true}})),
            ("/api/v1/schedules", json!({"name": "ops", "timeZone": "UTC", "layers": [
                {"anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": ["dan"]}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"schedule": "ops"}}]})),
        ],
    )
    .await;
    let res = send(
        &s,
        &token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "Chlorine dosing pump stopped", "escalationPolicy": "page"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let now = advance(&s, &token, "0s").await;
    let start = now + jiff::SignedDuration::from_hours(48);
    override_for(&s, &token, "cy", start, 8).await;

    advance(&s, &token, "24h1m").await;
    let ahead = notice(&hooks, "cy", "You go on call for ops").await;
    assert!(title(&ahead).ends_with("(in 24h0m0s)"), "{ahead}");
    s.crash();
    let s = clocked.start();
    // The schedule moves: another shift for cy, next week.
    let before = count(&hooks, "cy", "Your shifts on ops changed");
    override_for(
        &s,
        &token,
        "cy",
        start + jiff::SignedDuration::from_hours(24 * 5),
        4,
    )
    .await;
    let started = Instant::now();
    while count(&hooks, "cy", "Your shifts on ops changed") == before {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no change notice"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let changed = notice(&hooks, "cy", "Your shifts on ops changed").await;
    assert!(
        changed["alert"]["summary"]
            .as_str()
            .unwrap()
            .contains("Your next shifts"),
        "{changed}"
    );

    advance(&s, &token, "23h45m").await;
    let soon = notice(&hooks, "cy", "You go on call for ops").await;
    let started = Instant::now();
    while count(&hooks, "cy", "You go on call for ops") < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no 15m notice: {soon}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ahead: Vec<String> = notices(&hooks, "cy")
        .iter()
        .map(title)
        .filter(|t| t.starts_with("You go on call"))
        .collect();
    assert_eq!(ahead.len(), 2, "each once: {ahead:?}");
    assert!(ahead[1].ends_with("(in 15m0s)"), "{ahead:?}");

    advance(&s, &token, "16m").await;
    let on = notice(&hooks, "cy", "You are on call for ops").await;
    let digest = on["alert"]["summary"].as_str().unwrap();
    assert!(
        digest.contains("1 open and 0 acknowledged alerts"),
        "{digest}"
    );
    assert!(digest.contains("Chlorine dosing pump stopped"), "{digest}");
    assert_eq!(
        count(&hooks, "dan", "You are off call"),
        0,
        "dan did not ask"
    );

    advance(&s, &token, "8h").await;
    let off = notice(&hooks, "cy", "You are off call for ops").await;
    assert!(
        off["alert"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("dan is on call now"),
        "{off}"
    );
    notice(&hooks, "dan", "You are on call for ops").await;
    assert_eq!(
        count(&hooks, "cy", "You are on call for ops"),
        1,
        "told once"
    );

    let res = send(
        &s,
        &token,
        Method::POST,
        "/api/v1/contacts",
        json!({"name": "eve", "handoffNotices": {"advance": ["10s"]}}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/handoffNotices").await;
}

/// Maintenance planned ahead (issue 70): a silence previewed before it is made (what it would
/// hold now), made to start in an hour, extended under If-Match (428 without, 409 when
/// stale), and refused once it expired; a downtime planned ahead, moved, and refused once over.
#[tokio::test]
async fn silences_and_downtimes_are_previewed_planned_and_extended() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(test_clock(&dir.path().join("clock")));
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![("/api/v1/hosts", json!({"name": "boiler", "spec": {}}))],
    )
    .await;
    for (title, site) in [("Boiler pressure low", "north"), ("Gate open", "south")] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": title, "labels": {"site": site}}),
        )
        .await;
        assert_eq!(res.status(), 201);
    }
    let preview = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/silences:preview",
            json!({"selector": "site=north"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(preview["count"], 1, "{preview}");
    assert_eq!(preview["items"][0]["title"], "Boiler pressure low");
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/silences:preview",
        json!({}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/selector").await;
    // The same from the command line, and an ack with options.
    let cli = |args: &[&str]| {
        let server = s.url("");
        let mut all = vec!["--server", server.as_str()];
        all.extend_from_slice(args);
        let (code, out, err) = svc(&all, &[("SVC_TOKEN", token), ("NO_COLOR", "1")]);
        assert_eq!(code, 0, "svc {args:?}: {err}");
        out
    };
    let out = cli(&["silence", "--selector", "site=north", "--preview"]);
    assert!(
        out.starts_with("a silence would hold 1 alerts now"),
        "{out}"
    );
    assert!(out.contains("Boiler pressure low"), "{out}");
    let id = preview["items"][0]["id"].as_str().unwrap();
    let out = cli(&["ack", id, "--expires-in", "1h", "--not-sticky"]);
    assert!(out.contains("acknowledged"), "{out}");
    let acked = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(acked["ack"]["sticky"], false, "{acked}");
    assert!(acked["ack"]["expiresAt"].is_string(), "{acked}");

    let now = advance(s, token, "0s").await;
    let at = |h: i64| (now + jiff::SignedDuration::from_hours(h)).to_string();
    let body = |expires: String| json!({"comment": "pump swap", "selector": "site=north", "startsAt": at(1), "expiresAt": expires});
    let silence = json(
        send(s, token, Method::POST, "/api/v1/silences", body(at(2))).await,
        201,
    )
    .await;
    let path = format!("/api/v1/silences/{}", silence["id"].as_str().unwrap());
    let res = send(s, token, Method::PUT, &path, body(at(3))).await;
    assert_problem(res, 428, "svc:precondition/if-match").await;
    let res = call(s, token, Method::PUT, &path)
        .header("If-Match", "\"1\"")
        .json(&body(at(3)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["etag"], "\"2\"");
    let extended = json(res, 200).await;
    assert_eq!(extended["version"], 2);
    let expires: jiff::Timestamp = extended["expiresAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires, at(3).parse::<jiff::Timestamp>().unwrap());
    let res = call(s, token, Method::PUT, &path)
        .header("If-Match", "1")
        .json(&body(at(4)))
        .send()
        .await
        .unwrap();
    assert_problem(res, 409, "svc:conflict/version").await;

    let downtime = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/downtimes",
            json!({"comment": "firmware", "selector": "site=north", "start": at(1), "end": at(2)}),
        )
        .await,
        201,
    )
    .await;
    let dpath = format!("/api/v1/downtimes/{}", downtime["id"].as_str().unwrap());
    let moved = call(s, token, Method::PUT, &dpath)
        .header("If-Match", "1")
        .json(&json!({"comment": "firmware, later", "selector": "site=north", "start": at(2), "end": at(3)}))
        .send()
        .await
        .unwrap();
    let moved = json(moved, 200).await;
    assert_eq!(
        (moved["version"].as_u64(), moved["comment"].as_str()),
        (Some(2), Some("firmware, later"))
    );

    advance(s, token, "4h").await;
    // Expired is final, whatever version the caller saw (its start and the warning before
    // its end, told meanwhile, are new versions).
    let res = call(s, token, Method::PUT, &path)
        .header("If-Match", "2")
        .json(&body(at(6)))
        .send()
        .await
        .unwrap();
    assert_problem(res, 422, "svc:validation/expiresAt").await;
    let res = call(s, token, Method::PUT, &dpath)
        .header("If-Match", "2")
        .json(&json!({"comment": "again", "selector": "site=north", "start": at(5), "end": at(6)}))
        .send()
        .await
        .unwrap();
    assert_problem(res, 422, "svc:validation/end").await;
    let events = get(s, token, "/api/v1/events?types=silence,downtime&limit=50").await;
    let updated = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["action"] == "updated")
        .count();
    assert_eq!(updated, 2, "{events}");
    let audit = audit_actions(s, token, 50).await;
    for action in ["silence.update", "downtime.update"] {
        assert!(audit.iter().any(|a| a == action), "{audit:?}");
    }
}

/// A downtime with `noticeBefore` (issue 70): ten minutes before the window whom the first step
/// of its policy pages is told; a host failing inside the window does not page; at the end
/// they are told it ended and the host, still down, pages once.
#[tokio::test]
async fn a_planned_window_is_told_ahead_and_what_still_fails_pages_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(test_clock(&dir.path().join("clock")));
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/contacts", json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]})),
            ("/api/v1/alert-rules", json!({"name": "down", "severity": "critical", "escalationPolicy": "page",
                "match": "event.type == 'state_change' && event.state == 'DOWN'"})),
            ("/api/v1/hosts", json!({"name": "pump", "spec": {}})),
        ],
    )
    .await;
    let pump = get(s, token, "/api/v1/hosts").await["items"][0]["id"].clone();
    let now = advance(s, token, "0s").await;
    let at = |m: i64| (now + jiff::SignedDuration::from_mins(m)).to_string();
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"comment": "pump swap", "objectId": pump, "start": at(60), "end": at(120), "noticeBefore": "10m"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/noticeBefore").await;
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"comment": "pump swap", "objectId": pump, "start": at(60), "end": at(120),
               "noticeBefore": "10m", "escalationPolicy": "page"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let bodies = |kind: &str| -> Vec<Value> {
        hooks
            .received("/hook")
            .iter()
            .map(|r| r.json())
            .filter(|b| b["kind"] == kind)
            .collect()
    };
    let until = |kind: &'static str, n: usize| {
        let bodies = &bodies;
        async move {
            let started = Instant::now();
            loop {
                let got = bodies(kind);
                if got.len() >= n {
                    return got;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{kind}: {got:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    advance(s, token, "49m").await;
    assert!(bodies("notice").is_empty(), "not yet");
    advance(s, token, "1m").await;
    let ahead = until("notice", 1).await;
    assert!(
        title(&ahead[0]).starts_with("Maintenance starts at"),
        "{ahead:?}"
    );
    assert_eq!(ahead[0]["contact"], "ada");

    advance(s, token, "15m").await;
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "pump", "state": "DOWN", "output": "pump DOWN"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let started = Instant::now();
    while get(s, token, "/api/v1/alerts?status=open").await["items"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(started.elapsed() < Duration::from_secs(20), "no alert");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    advance(s, token, "1m").await;
    assert!(bodies("alert").is_empty(), "held by the downtime");

    advance(s, token, "55m").await;
    let ended = until("notice", 2).await;
    assert!(
        title(&ended[1]).starts_with("Maintenance ended: pump swap"),
        "{ended:?}"
    );
    let pages = until("alert", 1).await;
    assert_eq!(pages.len(), 1, "{pages:?}");
}
