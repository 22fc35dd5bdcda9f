//! The acknowledgement lifecycle (issue 70): acks that lapse, remind and are withdrawn,
//! non-sticky acks, and alerts that reopen within their rule's window; driven by the clock
//! the tests move, across a kill -9.

use crate::receiver::Receiver;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A webhook channel to `/hook`, contacts `ada` and `bob` paged on it, and `policy` (a body
/// of `escalation-policies` named `page`).
fn paging(hooks: &Receiver, policy: Value) -> Vec<(&'static str, Value)> {
    let mut policy = policy;
    policy["name"] = json!("page");
    vec![
        (
            "/api/v1/channels",
            json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "bob", "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        ),
        ("/api/v1/escalation-policies", policy),
    ]
}

/// Waits until the alert satisfies `done`.
async fn alert_until(s: &Server, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let a = get(s, token, &format!("/api/v1/alerts/{id}")).await;
        if done(&a) {
            return a;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{a}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `ack` events of an alert's timeline, by `payload.action` (`acked` for the ack itself).
async fn ack_actions(s: &Server, token: &str) -> Vec<String> {
    let events = get(s, token, "/api/v1/events?types=ack&limit=100").await;
    let mut out: Vec<String> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["payload"]["action"]
                .as_str()
                .unwrap_or("acked")
                .to_string()
        })
        .collect();
    out.reverse();
    out
}

/// Acknowledges through an ack link, as its button does.
async fn ack_by_link(s: &Server, url: &str) {
    let path = format!("/api/v1/ack/{}", url.rsplit_once("/api/v1/ack/").unwrap().1);
    let res = s.http.post(s.url(&path)).send().await.unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
}

/// PagerDuty's acknowledgement timeout, through a kill -9: ada is paged, then bob at step 1;
/// ada acknowledges by her link (the policy's `ackTimeout: 30m` applies); the server is killed
/// and started again; 30 minutes on the clock the test moves, the ack lapses: the alert is open
/// again, escalation resumes at step 1 (bob paged again, ada not), and ada is told.
#[tokio::test]
async fn an_ack_that_lapses_re_escalates_from_its_step_and_tells_the_acker() {
    let clocked = Clocked::new();
    let token = clocked.token.clone();
    let s = clocked.start();
    let hooks = Receiver::start().await;
    let policy = json!({"ackTimeout": "30m", "steps": [
        {"after": 0, "notify": {"contact": "ada"}},
        {"after": "10m", "notify": {"contact": "bob"}}]});
    create_all(&s, &token, paging(&hooks, policy)).await;
    let alert = json(
        send(
            &s,
            &token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Boiler pressure low", "escalationPolicy": "page"}),
        )
        .await,
        201,
    )
    .await;
    let id = alert["id"].as_str().unwrap().to_string();
    let ada = hooks.until_bodies("/hook", "alert", "ada", 1).await;
    advance(&s, &token, "10m").await;
    hooks.until_bodies("/hook", "alert", "bob", 1).await;
    ack_by_link(&s, ada[0]["ackUrl"].as_str().unwrap()).await;
    let acked = get(&s, &token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(acked["status"], "acked", "{acked}");
    assert_eq!(acked["ack"]["via"], "link");
    assert_eq!(acked["ack"]["step"], 1, "acknowledged at step 1");
    assert_eq!(acked["ack"]["sticky"], true);
    let expires: jiff::Timestamp = acked["ack"]["expiresAt"].as_str().unwrap().parse().unwrap();
    let acked_at: jiff::Timestamp = acked["ackedAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires.duration_since(acked_at).as_secs(), 1800, "{acked}");

    s.crash();
    let s = clocked.start();
    advance(&s, &token, "29m").await;
    let held = get(&s, &token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(held["status"], "acked", "not yet: {held}");
    advance(&s, &token, "2m").await;
    let open = alert_until(&s, &token, &id, |a| a["status"] == "open").await;
    assert_eq!(open["ack"]["ended"], "expired", "{open}");
    assert!(open["ackedBy"].is_null());
    hooks.until_bodies("/hook", "alert", "bob", 2).await;
    let told = hooks.until_bodies("/hook", "notice", "ada", 1).await;
    assert!(
        told[0]["alert"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Your acknowledgement expired: Boiler pressure low"),
        "{told:?}"
    );
    assert_eq!(
        hooks.bodies("/hook", "alert", "ada").len(),
        1,
        "step 0 not again"
    );
    assert_eq!(ack_actions(&s, &token).await, ["acked", "expired"]);
    let audit = audit_actions(&s, &token, 20).await;
    assert!(audit.contains(&"alert.ack".to_string()), "{audit:?}");
    assert!(
        audit.contains(&"alert.ack.expired".to_string()),
        "{audit:?}"
    );
}

/// Grafana OnCall's acknowledge reminder with "unacknowledge if no response": an hour after
/// ada acked she is reminded, with a link that answers; answered, the ack holds; the next
/// reminder goes unanswered and five minutes later the ack is withdrawn and she is paged again.
#[tokio::test]
async fn a_reminder_nobody_answers_withdraws_the_ack() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(test_clock(&dir.path().join("clock")));
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    let policy = json!({"ackReminder": "1h", "unackIfNoResponse": "5m",
        "steps": [{"after": 0, "notify": {"contact": "ada"}}]});
    create_all(s, token, paging(&hooks, policy)).await;
    let alert = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Pump 3 tripped", "escalationPolicy": "page"}),
        )
        .await,
        201,
    )
    .await;
    let id = alert["id"].as_str().unwrap().to_string();
    let page = hooks.until_bodies("/hook", "alert", "ada", 1).await;
    ack_by_link(s, page[0]["ackUrl"].as_str().unwrap()).await;
    advance(s, token, "1h").await;
    let reminder = hooks.until_bodies("/hook", "notice", "ada", 1).await;
    assert!(
        reminder[0]["alert"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Reminder: you acknowledged Pump 3 tripped"),
        "{reminder:?}"
    );
    let reminded = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(reminded["status"], "acked");
    assert_eq!(reminded["ack"]["reminders"], 1);
    assert!(reminded["ack"]["withdrawAt"].is_string(), "{reminded}");
    ack_by_link(s, reminder[0]["ackUrl"].as_str().unwrap()).await;
    let answered = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert!(answered["ack"]["withdrawAt"].is_null(), "{answered}");
    advance(s, token, "10m").await;
    assert_eq!(
        get(s, token, &format!("/api/v1/alerts/{id}")).await["status"],
        "acked",
        "answered: held"
    );
    advance(s, token, "50m").await;
    hooks.until_bodies("/hook", "notice", "ada", 2).await;
    advance(s, token, "5m").await;
    let open = alert_until(s, token, &id, |a| a["status"] == "open").await;
    assert_eq!(open["ack"]["ended"], "withdrawn", "{open}");
    hooks.until_bodies("/hook", "alert", "ada", 2).await;
    let told = hooks.until_bodies("/hook", "notice", "ada", 3).await;
    assert!(
        told[2]["alert"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Your acknowledgement was withdrawn"),
        "{told:?}"
    );
    assert_eq!(
        ack_actions(s, token).await,
        ["acked", "reminder", "confirmed", "reminder", "withdrawn"]
    );
    let audit = audit_actions(s, token, 50).await;
    for action in ["alert.ack.reminder", "alert.ack.withdrawn"] {
        assert!(audit.iter().any(|a| a == action), "{action}: {audit:?}");
    }
    // Open again it is acknowledged as before; acknowledged with no reminder waiting, an ack
    // again is what it always was: 404.
    let again = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:ack"),
        json!({}),
    )
    .await;
    assert_eq!(again.status(), 200);
    let twice = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:ack"),
        json!({}),
    )
    .await;
    assert_problem(twice, 404, "svc:not-found").await;
}

fn service_result(service: &str, state: &str) -> Value {
    json!({"host": "boiler", "service": service, "state": state, "output": format!("{service} {state}")})
}

async fn post_results(s: &Server, token: &str, items: Vec<Value>) {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": items}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
}

/// The rule's alert of `service`, once `done` holds for it.
async fn service_alert(
    s: &Server,
    token: &str,
    service: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let alerts = get(s, token, "/api/v1/alerts?limit=100").await;
        let found = alerts["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["title"].as_str().unwrap_or_default().starts_with(service) && done(a))
            .cloned();
        if let Some(a) = found {
            return a;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{alerts}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Icinga's non-sticky acknowledgement and a rule's `reopenWindow`: a non-sticky ack is
/// cleared by the service's next change (WARNING to CRITICAL) and escalation resumes; a sticky
/// one holds. A service that recovers and fails again within 15 minutes reopens its alert (the
/// same id, `reopened`, an `alert_opened` event saying so); after the window, a new alert
/// opens. A bad `expiresIn` and bad policy values are refused.
#[tokio::test]
async fn a_loose_ack_clears_on_the_next_change_and_an_alert_reopens_within_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(test_clock(&dir.path().join("clock")));
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    let policy = json!({"steps": [{"after": 0, "notify": {"contact": "ada"}}]});
    let mut bodies = paging(&hooks, policy);
    bodies.push(("/api/v1/hosts", json!({"name": "boiler", "spec": {}})));
    for name in ["pressure", "flame"] {
        bodies.push((
            "/api/v1/services",
            json!({"name": name, "host": "boiler", "spec": {"maxCheckAttempts": 1}}),
        ));
    }
    bodies.push((
        "/api/v1/alert-rules",
        json!({"name": "problems", "severity": "warning", "escalationPolicy": "page",
               "match": "event.type == 'state_change' && event.state in ['WARNING', 'CRITICAL']",
               "title": "{{ .event.object }} is {{ .event.state }}"}),
    ));
    create_all(s, token, bodies).await;
    post_results(
        s,
        token,
        vec![
            service_result("pressure", "WARNING"),
            service_result("flame", "WARNING"),
        ],
    )
    .await;
    let loose = service_alert(s, token, "pressure", |a| a["status"] == "open").await;
    let sticky = service_alert(s, token, "flame", |a| a["status"] == "open").await;
    hooks.until_bodies("/hook", "alert", "ada", 2).await;
    let ack = |id: &Value, body: Value| {
        let path = format!("/api/v1/alerts/{}:ack", id.as_str().unwrap());
        async move { send(s, token, Method::POST, &path, body).await }
    };
    let res = ack(&loose["id"], json!({"expiresIn": "0s"})).await;
    assert_problem(res, 422, "svc:validation/expiresIn").await;
    let res = ack(&loose["id"], json!({"sticky": false, "comment": "looking"})).await;
    assert_eq!(json(res, 200).await["ack"]["sticky"], false);
    assert_eq!(ack(&sticky["id"], json!({})).await.status(), 200);
    post_results(
        s,
        token,
        vec![
            service_result("pressure", "CRITICAL"),
            service_result("flame", "CRITICAL"),
        ],
    )
    .await;
    let id = loose["id"].as_str().unwrap();
    let cleared = alert_until(s, token, id, |a| a["status"] == "open").await;
    assert_eq!(cleared["ack"]["ended"], "cleared", "{cleared}");
    let audit = audit_actions(s, token, 50).await;
    assert!(audit.iter().any(|a| a == "alert.ack.cleared"), "{audit:?}");
    hooks.until_bodies("/hook", "alert", "ada", 3).await;
    let held = get(
        s,
        token,
        &format!("/api/v1/alerts/{}", sticky["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(held["status"], "acked", "a sticky ack holds: {held}");

    // Recovers, fails again within the window: the same alert, reopened.
    post_results(s, token, vec![service_result("pressure", "OK")]).await;
    alert_until(s, token, id, |a| a["status"] == "resolved").await;
    advance(s, token, "5m").await;
    post_results(s, token, vec![service_result("pressure", "CRITICAL")]).await;
    let reopened = alert_until(s, token, id, |a| a["status"] == "open").await;
    assert_eq!(reopened["reopened"], 1, "{reopened}");
    let opened = get(s, token, "/api/v1/events?types=alert_opened&limit=100").await;
    let reopen_events = opened["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["alertId"] == id && e["payload"]["reopened"] == true)
        .count();
    assert_eq!(reopen_events, 1, "{opened}");
    // After the window: a new alert.
    post_results(s, token, vec![service_result("pressure", "OK")]).await;
    alert_until(s, token, id, |a| a["status"] == "resolved").await;
    advance(s, token, "16m").await;
    post_results(s, token, vec![service_result("pressure", "WARNING")]).await;
    let fresh = service_alert(s, token, "pressure", |a| a["status"] == "open").await;
    assert_ne!(fresh["id"], id, "past the window: a new alert");

    for (policy, code) in [
        (
            json!({"ackTimeout": "0s", "steps": []}),
            "svc:validation/ackTimeout",
        ),
        (
            json!({"unackIfNoResponse": "5m", "steps": []}),
            "svc:validation/unackIfNoResponse",
        ),
    ] {
        let mut body = policy;
        body["name"] = json!("bad");
        let res = send(s, token, Method::POST, "/api/v1/escalation-policies", body).await;
        assert_problem(res, 422, code).await;
    }
}
