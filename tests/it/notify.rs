//! Notification through real peers: a local HTTP receiver that checks HMAC signatures and
//! fails on demand stands in for webhook providers. Escalation chains from alert to contact
//! to on-call person, ack links that stop them, retries, dead letters, replay and channel
//! fallback, schedules with overrides, and deliveries that survive kill -9.

use crate::receiver::{Received, Receiver};
use crate::support::*;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn verify_signature(r: &Received, secret: &str) {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        r.headers.get("x-svc-signature").map(String::as_str),
        Some(format!("sha256={expected}").as_str()),
        "the body is signed with the channel's secret"
    );
}

/// A webhook channel `hook` to the receiver's `/hook`, a contact `ada` paged on it, and a
/// policy `page` paging her at once.
pub(crate) fn paging_ada(hooks: &Receiver) -> Vec<(&'static str, Value)> {
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
            "/api/v1/escalation-policies",
            json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
        ),
    ]
}

/// Waits until every alert of `raised` has paged through `/hook`, asserting none went out more
/// than twice.
async fn each_paged_once_or_twice(hooks: &Receiver, raised: &[String]) {
    let started = Instant::now();
    loop {
        let mut per_alert: HashMap<String, usize> = HashMap::new();
        for r in hooks.received("/hook") {
            *per_alert
                .entry(r.json()["alert"]["id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        if raised.iter().all(|id| per_alert.contains_key(id)) {
            for id in raised {
                assert!(per_alert[id] <= 2, "{id} delivered {} times", per_alert[id]);
            }
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not every alert was delivered: {per_alert:?} of {raised:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the alert `id` has paged through `/hook` at least once.
async fn paged(hooks: &Receiver, id: &str) {
    let started = Instant::now();
    while !hooks
        .received("/hook")
        .iter()
        .any(|r| r.json()["alert"]["id"] == id)
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "alert {id} never paged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn raise(s: &Server, token: &str, title: &str, policy: &str) -> Value {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": title, "escalationPolicy": policy, "labels": {"site": "lab"}}),
    )
    .await;
    json(res, 201).await
}

async fn events_of(s: &Server, token: &str, types: &str) -> Vec<Value> {
    get(
        s,
        token,
        &format!("/api/v1/events?types={types}&limit=1000"),
    )
    .await["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// `channel:status` of the notification events on the channels `keep` accepts, oldest first,
/// once there are `n` of them (or after 10 s).
pub async fn notifications(
    s: &Server,
    token: &str,
    n: usize,
    keep: impl Fn(&str) -> bool,
) -> Vec<String> {
    let started = Instant::now();
    loop {
        let statuses: Vec<String> = events_of(s, token, "notification")
            .await
            .iter()
            .rev()
            .map(|e| {
                (
                    e["payload"]["channel"].as_str().unwrap().to_string(),
                    e["payload"]["status"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(c, _)| keep(c))
            .map(|(c, st)| format!("{c}:{st}"))
            .collect();
        if statuses.len() >= n || started.elapsed() > Duration::from_secs(10) {
            return statuses;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path and query of an ack URL (the base URL is the configured one, not the test's).
fn ack_path(url: &str) -> String {
    format!("/api/v1/ack/{}", url.rsplit_once("/api/v1/ack/").unwrap().1)
}

#[tokio::test]
async fn a_chain_pages_the_contact_then_the_on_call_person_until_an_ack_link_stops_it() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "enabled": true,
                "config": {"url": hooks.url("/hook"), "secret": "s3cret", "header.X-Team": "ops"}})),
            ("/api/v1/contacts", json!({"name": "ada", "email": "ada@example.com",
                "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/contacts", json!({"name": "bob",
                "preferences": [{"channels": ["hook"], "profile": "default"}]})),
            ("/api/v1/schedules", json!({"name": "ops", "timeZone": "Europe/Berlin", "layers": [
                {"name": "primary", "anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": ["bob"]}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [
                {"after": 0, "notify": {"contact": "ada"}},
                {"after": "2s", "notify": {"schedule": "ops"}},
                {"after": "5s", "notify": {"contact": "ada"}}]})),
        ],
    )
    .await;
    let alert = raise(s, token, "Boiler pressure low", "page").await;
    let id = alert["id"].as_str().unwrap();

    let first = hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    verify_signature(&first[0], "s3cret");
    assert_eq!(first[0].headers["x-team"], "ops");
    let body = first[0].json();
    assert_eq!(body["version"], 1);
    assert_eq!(body["alert"]["id"], id);
    assert_eq!(body["alert"]["title"], "Boiler pressure low");
    assert_eq!(body["alert"]["severity"], "critical");
    assert_eq!(body["contact"], "ada");
    assert_eq!(body["step"], 0);

    let second = hooks.wait_for("/hook", 2, Duration::from_secs(10)).await;
    let body = second[1].json();
    assert_eq!(
        body["contact"], "bob",
        "step 2 pages the schedule's on-call person"
    );
    assert_eq!(body["step"], 1);

    // Opening the link (as a mail scanner would, or HEAD) shows what it acknowledges and acts
    // on nothing; the page's button POSTs.
    let link = s.url(&ack_path(body["ackUrl"].as_str().unwrap()));
    let head = s.http.head(&link).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let res = s.http.get(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = res.text().await.unwrap();
    assert!(
        page.contains("Boiler pressure low") && page.contains("bob"),
        "{page}"
    );
    assert!(page.contains("<form method=\"post\">"), "{page}");
    let still = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(still["status"], "open", "GET and HEAD never act");
    let res = s.http.post(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Acknowledged"));
    let acked = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(acked["status"], "acked");
    assert_eq!(acked["ackedBy"], "bob");
    let ack = events_of(s, token, "ack").await;
    assert_eq!(ack[0]["payload"]["via"], "link");

    // Step 3 would have fired 5 s after opening: the ack stopped it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(hooks.received("/hook").len(), 2, "no step after the ack");
    let again = s.http.post(&link).send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert!(again.text().await.unwrap().contains("no longer open"));
    let forged = s
        .http
        .post(s.url(&format!("/api/v1/ack/{id}.-.9999999999.00ff")))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 404);

    let escalations = events_of(s, token, "escalation").await;
    let steps: Vec<(i64, Value)> = escalations
        .iter()
        .rev()
        .map(|e| {
            (
                e["payload"]["step"].as_i64().unwrap(),
                e["payload"]["contacts"].clone(),
            )
        })
        .collect();
    assert_eq!(steps, vec![(0, json!(["ada"])), (1, json!(["bob"]))]);
    let statuses = notifications(s, token, 4, |_| true).await;
    assert_eq!(
        statuses,
        ["hook:pending", "hook:sent", "hook:pending", "hook:sent"]
    );
    let notes = events_of(s, token, "notification").await;
    assert!(notes[0]["payload"]["latencyMs"].is_u64());

    // What the service holds about ada, for her data request.
    let export = get(s, token, "/api/v1/contacts/ada:data-export").await;
    assert_eq!(export["contact"]["name"], "ada");
    let ada = export["contact"]["id"].as_str().unwrap();
    let sent = export["notifications"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "her pending and sent notice: {export}");
    assert!(sent.iter().all(|e| e["payload"]["contactId"] == ada));
    assert_eq!(export["audit"][0]["action"], "contact.create", "{export}");
    let (viewer, _) = mint(s, token, json!({"name": "v", "roles": ["viewer"]})).await;
    let refused = call(s, &viewer, Method::GET, "/api/v1/contacts/ada:data-export")
        .send()
        .await
        .unwrap();
    let p = assert_problem(refused, 403, "svc:auth/forbidden").await;
    assert!(p["detail"].as_str().unwrap().contains("admin:audit"), "{p}");
    let missing = call(s, token, Method::GET, "/api/v1/contacts/nobody:data-export")
        .send()
        .await
        .unwrap();
    assert_problem(missing, 404, "svc:not-found").await;
}

#[tokio::test]
async fn failures_are_retried_then_dead_lettered_replayed_or_passed_to_the_next_channel() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    hooks.queue("/flaky", &[503]);
    hooks.answer("/down", 500);
    hooks.answer("/refuse", 400);
    let fast = |path: &str| json!({"url": hooks.url(path), "retryBackoffSeconds": "1", "retryMaxAttempts": "2"});
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/channels",
                json!({"name": "flaky", "type": "webhook", "config": fast("/flaky")}),
            ),
            (
                "/api/v1/channels",
                json!({"name": "down", "type": "webhook", "config": fast("/down")}),
            ),
            (
                "/api/v1/channels",
                json!({"name": "refuse", "type": "webhook", "config": fast("/refuse")}),
            ),
            (
                "/api/v1/channels",
                json!({"name": "spare", "type": "slack", "config": {"url": hooks.url("/spare")}}),
            ),
            (
                "/api/v1/contacts",
                json!({"name": "cy", "preferences": [
                {"channels": ["refuse"], "profile": "primary"},
                {"channels": ["spare"], "profile": "backup"}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "flaky", "steps": [
                {"after": 0, "channels": ["flaky"], "notify": {"contact": "cy"}}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "down", "steps": [
                {"after": 0, "channels": ["down"], "notify": {"contact": "cy"}}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "prefs", "steps": [
                {"after": 0, "notify": {"contact": "cy"}}]}),
            ),
        ],
    )
    .await;

    // 503 once, then sent on the retry a second later.
    raise(s, token, "flaky", "flaky").await;
    let got = hooks.wait_for("/flaky", 2, Duration::from_secs(15)).await;
    assert_eq!((got[0].status, got[1].status), (503, 200));

    // 500 twice: dead after its two attempts, then replayed once the provider is back.
    let down = raise(s, token, "down", "down").await;
    hooks.wait_for("/down", 2, Duration::from_secs(15)).await;
    let started = Instant::now();
    let dead = loop {
        let v = get(s, token, "/api/v1/notifications/dead-letters").await;
        if let Some(d) = v["items"].as_array().unwrap().first() {
            break d.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no dead letter"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(dead["dead"], true);
    let health = json(s.get("/api/v1/system/health").await, 200).await;
    assert_eq!(health["notify"]["deadLetters"], 1, "{health}");
    assert!(
        health["notify"]["failed"].as_u64().unwrap() >= 2,
        "{health}"
    );
    assert_eq!(dead["attempts"], 2);
    assert_eq!(dead["kind"], "webhook");
    assert_eq!(dead["payload"]["alertId"], down["id"]);
    assert!(
        dead["lastError"].as_str().unwrap().contains("HTTP 500"),
        "{dead}"
    );
    for key in ["id", "tenantId", "channelId", "nextTry", "createdAt"] {
        assert!(!dead[key].is_null(), "{key} in {dead}");
    }
    hooks.answer("/down", 200);
    let id = dead["id"].as_str().unwrap();
    let res = call(
        s,
        token,
        Method::POST,
        &format!("/api/v1/notifications/dead-letters/{id}:replay"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 202);
    let got = hooks.wait_for("/down", 3, Duration::from_secs(10)).await;
    assert_eq!(got[2].status, 200);
    let v = get(s, token, "/api/v1/notifications/dead-letters").await;
    assert_eq!(v["items"], json!([]));
    let again = call(
        s,
        token,
        Method::POST,
        &format!("/api/v1/notifications/dead-letters/{id}:replay"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(again, 404, "svc:not-found").await;

    // 400 is permanent: dead at once, and the contact's next preference takes over.
    raise(s, token, "prefs", "prefs").await;
    let refused = hooks.wait_for("/refuse", 1, Duration::from_secs(10)).await;
    assert_eq!(refused.len(), 1, "a permanent failure is not retried");
    let spare = hooks.wait_for("/spare", 1, Duration::from_secs(10)).await;
    let text = spare[0].json()["text"].as_str().unwrap().to_string();
    assert!(text.contains("[CRITICAL] prefs"), "{text}");
    assert!(text.contains("/api/v1/ack/"), "{text}");
    let statuses = notifications(s, token, 4, |c| c == "refuse" || c == "spare").await;
    assert_eq!(
        statuses,
        [
            "refuse:pending",
            "refuse:dead",
            "spare:pending",
            "spare:sent"
        ]
    );
}

#[tokio::test]
async fn schedules_take_the_reference_shape_with_overrides_feeds_and_simulation() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/contacts",
                json!({"name": "ada", "timeZone": "Europe/Berlin"}),
            ),
            (
                "/api/v1/contacts",
                json!({"name": "bob", "preferences": [
                {"channels": ["sms"], "profile": "night", "period": "night"},
                {"channels": ["email"], "profile": "day"}]}),
            ),
        ],
    )
    .await;
    let ada = get(s, token, "/api/v1/contacts/ada").await;
    let ada_id = ada["id"].as_str().unwrap();
    // Participants as contact ids (the reference's form) and names.
    let res = send(s, token, Method::POST, "/api/v1/schedules", json!({"name": "ops", "timeZone": "Europe/Berlin",
        "layers": [{"name": "week", "anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": [ada_id, "bob"]}]})).await;
    assert_eq!(res.status(), 201);
    let res = send(s, token, Method::POST, "/api/v1/schedules", json!({"name": "old", "timeZone": "UTC",
        "layers": [{"anchor": "2026-01-05T08:00:00Z", "unit": "fortnight", "participants": ["ada"]}]})).await;
    assert_problem(res, 422, "svc:validation/schedule").await;

    let now = get(s, token, "/api/v1/oncall/now").await;
    let ops = &now.as_array().unwrap()[0];
    assert_eq!(ops["schedule"], "ops");
    let shift = &ops["shifts"][0];
    assert_eq!(shift["override"], false);
    assert_eq!(shift["layer"], "week");
    let on_call = shift["contactId"].as_str().unwrap().to_string();
    assert_eq!(ops["contacts"][0]["id"], on_call);
    let other = if on_call == ada_id { "bob" } else { "ada" };

    // An override puts the other one on call now.
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    let end = start + jiff::SignedDuration::from_secs(3600);
    let res = send(s, token, Method::POST, "/api/v1/schedules/ops/overrides",
        json!({"schedule": "ops", "contactId": other, "start": start.to_string(), "end": end.to_string(), "reason": "swap"})).await;
    let o = json(res, 200).await;
    for key in [
        "id",
        "tenantId",
        "scheduleId",
        "contactId",
        "start",
        "end",
        "createdAt",
        "createdBy",
    ] {
        assert!(!o[key].is_null(), "{key} in {o}");
    }
    let now = get(s, token, "/api/v1/oncall/now").await;
    assert_eq!(now[0]["shifts"][0]["override"], true);
    assert_eq!(now[0]["shifts"][0]["contact"], other);
    let list = get(s, token, "/api/v1/schedules/ops/overrides").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    for bad in [
        json!({"contactId": "nobody", "start": start.to_string(), "end": end.to_string()}),
        json!({"contactId": "ada", "start": end.to_string(), "end": start.to_string()}),
        json!({"contactId": "ada", "start": "soon", "end": end.to_string()}),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/schedules/ops/overrides",
            bad,
        )
        .await;
        assert_problem(res, 422, "svc:validation/override").await;
    }
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/schedules/none/overrides",
        json!({"contactId": "ada", "start": start.to_string(), "end": end.to_string()}),
    )
    .await;
    assert_problem(res, 404, "svc:not-found").await;

    let timeline = get(s, token, "/api/v1/schedules/ops/timeline").await;
    let shifts = timeline.as_array().unwrap();
    assert!(
        shifts[0]["override"] == true && shifts[1]["override"] == false,
        "{timeline}"
    );
    assert_eq!(shifts[0]["end"], shifts[1]["start"]);
    let stats = get(s, token, "/api/v1/schedules/ops/stats").await;
    let hours: f64 = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hours"].as_f64().unwrap())
        .sum();
    assert!((hours - 30.0 * 24.0).abs() < 0.1, "{stats}");
    let ics = call(s, token, Method::GET, "/api/v1/schedules/ops/ics")
        .send()
        .await
        .unwrap();
    assert_eq!(ics.status(), 200);
    assert!(
        ics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/calendar")
    );
    let feed = ics.text().await.unwrap();
    assert!(feed.starts_with("BEGIN:VCALENDAR\r\n") && feed.trim_end().ends_with("END:VCALENDAR"));
    assert!(feed.contains("SUMMARY:On call: ada (ops)"), "{feed}");

    let id = o["id"].as_str().unwrap();
    let res = call(
        s,
        token,
        Method::DELETE,
        &format!("/api/v1/schedules/ops/overrides/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 204);
    let res = call(
        s,
        token,
        Method::DELETE,
        &format!("/api/v1/schedules/ops/overrides/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 404, "svc:not-found").await;

    create_all(
        s,
        token,
        vec![(
            "/api/v1/escalation-policies",
            json!({"name": "p", "steps": [
        {"after": "5m", "notify": {"schedule": "ops"}, "repeatEvery": "10m", "maxRepeats": 2},
        {"after": "30m", "notify": {"contact": "bob"}}]}),
        )],
    )
    .await;
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/escalation-policies/p:simulate",
    )
    .send()
    .await
    .unwrap();
    let sim = json(res, 200).await;
    let steps = sim["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["repeats"].as_array().unwrap().len(), 2);
    assert_eq!(steps[1]["contacts"][0]["contact"], "bob");
    assert!(["sms", "email"].contains(&steps[1]["contacts"][0]["channels"][0].as_str().unwrap()));
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/escalation-policies/none:simulate",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 404, "svc:not-found").await;
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/escalation-policies/p:simulate",
        json!({"severity": "dire"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/severity").await;
    let res = call(
        s,
        token,
        Method::GET,
        "/api/v1/schedules/ops/timeline?from=soon",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 422, "svc:validation/from").await;
    let res = call(
        s,
        token,
        Method::GET,
        "/api/v1/schedules/ops/timeline?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 422, "svc:validation/to").await;
}

#[tokio::test]
async fn a_channel_test_answers_what_the_provider_said() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    hooks.answer("/broken", 500);
    // A channel may only name a secret that is set; one deleted after fails at send.
    let put = call(s, token, Method::PUT, "/api/v1/secrets/nope")
        .json(&json!({"value": "short-lived"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 204);
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "ok", "type": "webhook", "config": {"url": hooks.url("/ok")}})),
            ("/api/v1/channels", json!({"name": "broken", "type": "webhook", "config": {"url": hooks.url("/broken")}})),
            ("/api/v1/channels", json!({"name": "mail", "type": "email", "config": {"host": "localhost"}})),
            ("/api/v1/channels", json!({"name": "secret", "type": "webhook", "config": {"url": hooks.url("/ok"), "secret": "$SECRET:nope$"}})),
        ],
    )
    .await;
    let gone = call(s, token, Method::DELETE, "/api/v1/secrets/nope")
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 204);
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/channels/ok:test-notification",
    )
    .send()
    .await
    .unwrap();
    let v = json(res, 200).await;
    assert_eq!(v["result"], "sent");
    assert_eq!(hooks.received("/ok")[0].json()["kind"], "test");
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels/broken:test-notification",
        json!({}),
    )
    .await;
    let p = assert_problem(res, 502, "svc:notify/test-failed").await;
    assert!(p["detail"].as_str().unwrap().contains("HTTP 500"), "{p}");
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/channels/mail:test-notification",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 422, "svc:validation/target").await;
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/channels/secret:test-notification",
    )
    .send()
    .await
    .unwrap();
    let p = assert_problem(res, 502, "svc:notify/test-failed").await;
    assert!(p["detail"].as_str().unwrap().contains("nope"), "{p}");
    let actions = audit_actions(s, token, 100).await;
    let tests = actions.iter().filter(|a| *a == "channel.test").count();
    assert_eq!(tests, 4, "every test is audited, sent or not: {actions:?}");
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/channels/none:test-notification",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 404, "svc:not-found").await;
}

#[tokio::test]
async fn a_snoozed_alert_pages_again_from_step_zero_when_it_wakes() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(s, token, paging_ada(&hooks)).await;
    let alert = raise(s, token, "snoozy", "page").await;
    hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    let id = alert["id"].as_str().unwrap();
    let res = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:snooze"),
        json!({"duration": "1s"}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let got = hooks.wait_for("/hook", 2, Duration::from_secs(15)).await;
    assert_eq!(got[1].json()["step"], 0, "the chain restarts at step 0");
    assert_eq!(
        get(s, token, &format!("/api/v1/alerts/{id}")).await["status"],
        "open"
    );
}

#[tokio::test]
async fn deliveries_survive_kill_9_at_any_moment_at_least_once_at_most_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let hooks = Receiver::start().await;
    let mut s = Server::start_in(&data, Opts::default());
    create_all(&s, &token, paging_ada(&hooks)).await;
    let mut raised = Vec::new();
    for round in 0..6u64 {
        let alert = raise(&s, &token, &format!("round {round}"), "page").await;
        raised.push(alert["id"].as_str().unwrap().to_string());
        tokio::time::sleep(Duration::from_millis(round * 7 % 30)).await;
        s.crash();
        s = Server::start_in(&data, Opts::default());
        // One crash per page in flight: a page a second crash also caught may go out once
        // more, which is still at least once, but not what this test counts.
        paged(&hooks, &raised[raised.len() - 1]).await;
    }
    each_paged_once_or_twice(&hooks, &raised).await;
    drop(s);
}

#[tokio::test]
async fn webhook_subscriptions_receive_the_events_they_select_signed() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/webhooks",
                json!({"name": "lab", "url": hooks.url("/lab"), "types": ["alert_opened", "ack"],
                "selector": "site=lab", "secret": "w3bhook"}),
            ),
            (
                "/api/v1/webhooks",
                json!({"name": "other", "url": hooks.url("/other"), "selector": "site=elsewhere"}),
            ),
        ],
    )
    .await;
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "Door open", "labels": {"site": "lab"}}),
    )
    .await;
    let alert = json(res, 201).await;
    let got = hooks.wait_for("/lab", 1, Duration::from_secs(10)).await;
    verify_signature(&got[0], "w3bhook");
    let body = got[0].json();
    assert_eq!(body["kind"], "event");
    assert_eq!(body["event"]["type"], "alert_opened");
    assert_eq!(body["event"]["payload"]["alertId"], alert["id"]);
    let id = alert["id"].as_str().unwrap();
    let res = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:ack"),
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let got = hooks.wait_for("/lab", 2, Duration::from_secs(10)).await;
    assert_eq!(got[1].json()["event"]["type"], "ack");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        hooks.received("/other").is_empty(),
        "the selector keeps other sites out"
    );
    assert_eq!(hooks.received("/lab").len(), 2, "only the subscribed types");
}

#[tokio::test]
async fn an_alert_opened_under_a_silence_starts_its_chain_when_the_silence_ends() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(
        s,
        token,
        [
            paging_ada(&hooks),
            vec![
            ("/api/v1/hosts", json!({"name": "plc", "labels": {"site": "lab"}, "spec": {}})),
            ("/api/v1/services", json!({"name": "pump", "host": "plc", "spec": {}})),
            ("/api/v1/alert-rules", json!({"name": "crit", "match": "event.type == 'state_change' && event.state == 'CRITICAL'",
                "severity": "critical", "escalationPolicy": "page"})),
            ],
        ]
        .concat(),
    )
    .await;
    let expires = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600)).to_string();
    let silence = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/silences",
            json!({"comment": "maintenance", "expiresAt": expires, "selector": "site=lab"}),
        )
        .await,
        201,
    )
    .await;
    let res = send(s, token, Method::POST, "/api/v1/results",
        json!({"results": [{"host": "plc", "service": "pump", "state": "CRITICAL", "output": "pump stalled"}]})).await;
    assert_eq!(res.status(), 202);
    let suppressed = notifications(s, token, 1, |_| true).await;
    assert_eq!(suppressed, [":suppressed"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        hooks.received("/hook").is_empty(),
        "a silenced alert does not page"
    );
    let id = silence["id"].as_str().unwrap();
    let res = call(s, token, Method::DELETE, &format!("/api/v1/silences/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let got = hooks.wait_for("/hook", 1, Duration::from_secs(15)).await;
    assert_eq!(
        got[0].json()["alert"]["title"]
            .as_str()
            .map(|t| !t.is_empty()),
        Some(true)
    );
    assert_eq!(
        got[0].json()["alert"]["labels"]["site"],
        "lab",
        "effective labels reach the message"
    );
}

/// aiosmtpd (Debian `python3-aiosmtpd`) with STARTTLS and AUTH required, or `None` when it is
/// not installed.
pub struct SmtpServer {
    child: std::process::Child,
    pub port: u16,
    mailbox: std::path::PathBuf,
    pub ca: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl SmtpServer {
    pub fn start() -> Option<SmtpServer> {
        let python = "/usr/bin/python3";
        let has = std::process::Command::new(python)
            .args(["-c", "import aiosmtpd"])
            .status()
            .is_ok_and(|s| s.success());
        if !has {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (ca, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&ca, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        let mailbox = dir.path().join("mailbox.jsonl");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/smtp_server.py");
        let mut child = std::process::Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .arg(&ca)
            .arg(&key)
            .arg(&mailbox)
            .args(["svc", "mail-secret"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        Some(SmtpServer {
            child,
            port,
            mailbox,
            ca,
            _dir: dir,
        })
    }

    pub async fn messages(&self, n: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.mailbox).unwrap_or_default();
            let got: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{} of {n} messages arrived",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 68, item 4: a channel's settings are read by its kind. A number or a boolean is taken
/// as the reference's text, a credential given as a number is sealed like any other, and a
/// setting its kind cannot read is refused at save with the key named.
#[tokio::test]
async fn channel_settings_are_typed_by_their_kind() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    let typed = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "bell", "type": "ntfy",
                "config": {"url": hooks.url("/topic"), "token": 4711, "priority": 5}}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(
        typed["config"]["token"], "$SECRET:channel.bell.token$",
        "{typed}"
    );
    assert_eq!(
        typed["config"]["priority"], "5",
        "answered as the reference's text: {typed}"
    );
    let sent = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels/bell:test-notification",
        json!({}),
    )
    .await;
    assert_eq!(json(sent, 200).await["result"], "sent");
    let got = hooks.received("/topic");
    assert_eq!(got[0].headers["authorization"], "Bearer 4711");
    let mail = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "mail", "type": "email",
            "config": {"host": "localhost", "port": 2525, "tlsInsecure": true}}),
    )
    .await;
    assert_eq!(mail.status(), 201);
    for (config, key) in [
        (json!({"host": "localhost", "port": 0}), "config.port"),
        (json!({"host": "localhost", "port": "smtp"}), "config.port"),
        (json!({"host": "localhost", "tls": "ssl"}), "config.tls"),
        (
            json!({"host": "localhost", "tlsInsecure": "yes"}),
            "config.tlsInsecure",
        ),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "odd", "type": "email", "config": config}),
        )
        .await;
        let p = assert_problem(res, 422, "svc:validation/config").await;
        assert!(p["detail"].as_str().unwrap().contains(key), "{config}: {p}");
    }
    // A setting that is no text, number or boolean does not fit the document's shape.
    let nested = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "odd", "type": "email", "config": {"host": "localhost", "from": {"name": "ops"}}}),
    )
    .await;
    let p = assert_problem(nested, 422, "svc:validation/channel").await;
    assert!(p["detail"].as_str().unwrap().contains("config.from"), "{p}");
    let sms = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "text", "type": "sms", "config": {"provider": "twilio"}}),
    )
    .await;
    assert_problem(sms, 422, "svc:validation/config").await;
}

#[tokio::test]
async fn e_mail_goes_through_a_real_smtp_server_with_starttls_and_authentication() {
    let Some(smtp) = SmtpServer::start() else {
        eprintln!(
            "SKIPPED e_mail_goes_through_a_real_smtp_server: python3-aiosmtpd is not installed"
        );
        return;
    };
    let a = Admin::start_with(trusting_ca(&smtp.ca));
    let (s, token) = (&a.s, a.token.as_str());
    let put = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/smtp-password",
        json!({"value": "mail-secret"}),
    )
    .await;
    assert!(put.status().is_success(), "{}", put.text().await.unwrap());
    let config = |password: &str| {
        json!({"host": "localhost", "port": smtp.port, "tls": "starttls", "from": "svc <svc@example.com>",
            "username": "svc", "password": password, "caFile": smtp.ca.to_str().unwrap(),
            "retryBackoffSeconds": "1", "retryMaxAttempts": "2"})
    };
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "mail", "type": "email", "config": config("$SECRET:smtp-password$"),
                "template": "Subject: {{.Severity}} {{.Title}}\n\nSee {{.AckURL}}\nlabels {{json .Labels}}"})),
            ("/api/v1/channels", json!({"name": "wrong", "type": "email", "config": config("guess")})),
            ("/api/v1/contacts", json!({"name": "ada", "email": "ada@example.com",
                "preferences": [{"channels": ["mail"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]})),
        ],
    )
    .await;
    raise(s, token, "Tank level high", "page").await;
    let mail = &smtp.messages(1).await[0];
    assert_eq!(mail["tls"], true, "STARTTLS");
    assert_eq!(mail["user"], "svc", "authenticated");
    assert_eq!(mail["to"], json!(["ada@example.com"]));
    let data = mail["data"].as_str().unwrap();
    assert!(data.contains("Subject: CRITICAL Tank level high"), "{data}");
    assert!(data.contains("/api/v1/ack/"), "{data}");
    assert!(data.contains(r#"labels {"site":"lab"}"#), "{data}");

    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels/mail:test-notification",
        json!({"target": "bob@example.com"}),
    )
    .await;
    assert_eq!(json(res, 200).await["result"], "sent");
    assert_eq!(smtp.messages(2).await[1]["to"], json!(["bob@example.com"]));
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels/wrong:test-notification",
        json!({"target": "bob@example.com"}),
    )
    .await;
    let p = assert_problem(res, 502, "svc:notify/test-failed").await;
    assert!(p["detail"].as_str().unwrap().contains("SMTP"), "{p}");
}

#[tokio::test]
async fn the_incoming_on_call_person_is_told_at_the_handover() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let hooks = Receiver::start().await;
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/contacts", json!({"name": "cy", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/contacts", json!({"name": "dan", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/schedules", json!({"name": "ops", "timeZone": "UTC", "layers": [
                {"anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": ["dan"]}]})),
        ],
    )
    .await;
    // Dan's shift began long ago: nobody is told about it now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(hooks.received("/hook").is_empty());
    let start = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
    let end = start + jiff::SignedDuration::from_secs(3600);
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/schedules/ops/overrides",
        json!({"contactId": "cy", "start": start.to_string(), "end": end.to_string()}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let got = hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    let body = got[0].json();
    assert_eq!(body["kind"], "handoff");
    assert_eq!(body["contact"], "cy");
    assert!(
        body["alert"]["title"]
            .as_str()
            .unwrap()
            .contains("on call for ops"),
        "{body}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(hooks.received("/hook").len(), 1, "told once");
}

#[tokio::test]
async fn a_restart_between_steps_loses_and_repeats_none_and_a_resolved_incident_stops_its_chains() {
    let a = Admin::start();
    let token = a.token.clone();
    let hooks = Receiver::start().await;
    create_all(
        &a.s,
        &token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/contacts", json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "two", "steps": [
                {"after": 0, "notify": {"contact": "ada"}},
                {"after": "3s", "notify": {"contact": "ada"}}]})),
        ],
    )
    .await;
    let first = raise(&a.s, &token, "across a restart", "two").await;
    hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    let s = a.s.stop_keeping_data().start(Opts::default());
    let got = hooks.wait_for("/hook", 2, Duration::from_secs(10)).await;
    assert_eq!(got[1].json()["alert"]["id"], first["id"]);
    assert_eq!(
        got[1].json()["step"],
        1,
        "the second step fires after the restart"
    );

    let second = raise(&s, &token, "in an incident", "two").await;
    hooks.wait_for("/hook", 3, Duration::from_secs(10)).await;
    let incident = json(
        send(
            &s,
            &token,
            Method::POST,
            "/api/v1/incidents",
            json!({"title": "hall", "alertIds": [second["id"]]}),
        )
        .await,
        201,
    )
    .await;
    let id = incident["id"].as_str().unwrap();
    let res = call(&s, &token, Method::PUT, &format!("/api/v1/incidents/{id}"))
        .header("If-Match", format!("\"{}\"", incident["version"]))
        .json(&json!({"title": "hall", "status": "resolved", "alertIds": [second["id"]]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let got = hooks.received("/hook");
    assert_eq!(
        got.len(),
        3,
        "no repeat of the first alert's steps, no step 2 of the resolved incident's alert"
    );
}

#[tokio::test]
async fn a_script_channel_gets_the_message_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    // The script runs `cat`; the configuration file, which no script may touch, is kept in a
    // directory of its own.
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(
            &etc,
            &format!(
                "notify: {{scriptDir: {}}}\nprograms: {{allowExec: [/usr/bin]}}\n",
                dir.path().display()
            ),
        ),
        ..Default::default()
    });
    let (s, token) = (&a.s, a.token.as_str());
    let script = dir.path().join("page.sh");
    let out = out_dir.join("paged.txt");
    std::fs::write(
        &script,
        "#!/bin/sh\n{ echo \"$SVC_ALERT_SEVERITY $SVC_CONTACT\"; cat; } > \"$1\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "pager", "type": "script",
                "config": {"command": script.to_str().unwrap(), "args": out.to_str().unwrap()}})),
            ("/api/v1/contacts", json!({"name": "ada", "preferences": [{"channels": ["script"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}]})),
        ],
    )
    .await;
    raise(s, token, "Compressor stopped", "page").await;
    let started = Instant::now();
    let text = loop {
        if let Ok(t) = std::fs::read_to_string(&out)
            && t.contains("Acknowledge")
        {
            break t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the script never ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        text.starts_with("critical ada\n[CRITICAL] Compressor stopped"),
        "{text}"
    );
}

/// A fixed-offset zone (`Etc/GMT∓n`) whose local hour is `hour` now, and the local time there.
fn zone_at_hour(hour: i8) -> (String, jiff::Zoned) {
    let now = jiff::Timestamp::now();
    let utc_hour = now.to_zoned(jiff::tz::TimeZone::UTC).hour();
    let mut offset = (hour - utc_hour).rem_euclid(24);
    if offset > 14 {
        offset -= 24;
    }
    // POSIX-style names: Etc/GMT-3 is three hours ahead of UTC.
    let name = match offset {
        0 => "Etc/GMT".to_string(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    };
    let local = now.to_zoned(jiff::tz::TimeZone::get(&name).unwrap());
    assert_eq!(local.hour(), hour, "{name}");
    (name, local)
}

/// A contact's preferences choose the channel at delivery (SEMANTICS 4): those whose minimum
/// severity the alert does not reach are skipped, the first whose period contains now wins,
/// else the first without a period; the built-in `night` (weekdays before 08:00 and from 18:00,
/// weekends) is read in the contact's own time zone.
#[tokio::test]
async fn preferences_pick_the_channel_by_severity_and_the_contacts_own_night() {
    let hooks = Receiver::start().await;
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let (night_zone, _) = zone_at_hour(3);
    let (day_zone, day) = zone_at_hour(13);
    let weekend = matches!(
        day.weekday(),
        jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday
    );
    let preferences = json!([
        {"channels": ["teams"], "profile": "urgent at night", "severity": "critical", "period": "night"},
        {"channels": ["slack"], "profile": "quiet hours", "period": "night"},
        {"channels": ["webhook"], "profile": "default"}
    ]);
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/channels", json!({"name": "chat", "type": "slack", "config": {"url": hooks.url("/chat")}})),
            ("/api/v1/channels", json!({"name": "team", "type": "teams", "config": {"url": hooks.url("/team")}})),
            ("/api/v1/contacts", json!({"name": "nina", "timeZone": night_zone, "preferences": preferences})),
            ("/api/v1/contacts", json!({"name": "dan", "timeZone": day_zone, "preferences": preferences})),
            ("/api/v1/escalation-policies", json!({"name": "page-nina", "steps": [{"after": 0, "notify": {"contact": "nina"}}]})),
            ("/api/v1/escalation-policies", json!({"name": "page-dan", "steps": [{"after": 0, "notify": {"contact": "dan"}}]})),
        ],
    )
    .await;
    let alarm = |title: &str, severity: &str, policy: &str| json!({"title": title, "severity": severity, "escalationPolicy": policy});
    for body in [
        alarm("valve 1 sticks", "warning", "page-nina"),
        alarm("valve 2 sticks", "warning", "page-dan"),
        alarm("boiler 3 overpressure", "critical", "page-nina"),
    ] {
        json(
            send(s, token, Method::POST, "/api/v1/alerts", body).await,
            201,
        )
        .await;
    }
    let within = Duration::from_secs(10);
    // nina at 03:00: the warning skips the critical-only preference and takes her night's.
    let chat = hooks.wait_for("/chat", 1, within).await;
    assert!(String::from_utf8_lossy(&chat[0].body).contains("valve 1 sticks"));
    // The critical alert reaches the critical-only night preference.
    let team = hooks.wait_for("/team", 1, within).await;
    assert!(String::from_utf8_lossy(&team[0].body).contains("boiler 3 overpressure"));
    // dan at 13:00: night only on a weekend, else the preference without a period.
    let dans = if weekend { "/chat" } else { "/hook" };
    let got = hooks
        .wait_for(dans, if weekend { 2 } else { 1 }, within)
        .await;
    assert!(
        got.iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("valve 2 sticks")),
        "dan's warning on {dans} ({day_zone}, {:?})",
        day.weekday()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let total: usize = ["/hook", "/chat", "/team"]
        .iter()
        .map(|p| hooks.received(p).len())
        .sum();
    assert_eq!(total, 3, "one delivery per alert");
}

/// A browser's push subscription as the test's own push service holds it: the key pair and
/// authentication secret the browser would make (RFC 8291 section 3), and the decryption a
/// browser does, written from the RFC apart from svc's sender.
struct TestBrowser {
    private: Option<ring::agreement::EphemeralPrivateKey>,
    public: Vec<u8>,
    auth: [u8; 16],
}

impl TestBrowser {
    fn new() -> TestBrowser {
        use ring::rand::SecureRandom;
        let rng = ring::rand::SystemRandom::new();
        let private =
            ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::ECDH_P256, &rng)
                .unwrap();
        let public = private.compute_public_key().unwrap().as_ref().to_vec();
        let mut auth = [0u8; 16];
        rng.fill(&mut auth).unwrap();
        TestBrowser {
            private: Some(private),
            public,
            auth,
        }
    }

    fn keys(&self) -> Value {
        json!({"p256dh": base64_of(&self.public, true), "auth": base64_of(&self.auth, true)})
    }

    /// The message of an `aes128gcm` body (one record), opened with this browser's key.
    fn open(&mut self, body: &[u8]) -> Vec<u8> {
        use ring::hkdf::{HKDF_SHA256, KeyType, Salt};
        struct Len(usize);
        impl KeyType for Len {
            fn len(&self) -> usize {
                self.0
            }
        }
        let expand = |salt: &[u8], ikm: &[u8], info: &[u8], n: usize| {
            let mut out = vec![0u8; n];
            Salt::new(HKDF_SHA256, salt)
                .extract(ikm)
                .expand(&[info], Len(n))
                .unwrap()
                .fill(&mut out)
                .unwrap();
            out
        };
        let salt = &body[..16];
        let record_size = u32::from_be_bytes(body[16..20].try_into().unwrap());
        let id_len = body[20] as usize;
        let sender = &body[21..21 + id_len];
        let record = &body[21 + id_len..];
        assert!(record.len() <= record_size as usize, "one record");
        let secret = ring::agreement::agree_ephemeral(
            self.private
                .take()
                .expect("one message per key in this test"),
            &ring::agreement::UnparsedPublicKey::new(&ring::agreement::ECDH_P256, sender),
            |s| s.to_vec(),
        )
        .unwrap();
        let info = [b"WebPush: info\0".as_slice(), &self.public, sender].concat();
        let ikm = expand(&self.auth, &secret, &info, 32);
        let key = expand(salt, &ikm, b"Content-Encoding: aes128gcm\0", 16);
        let nonce = expand(salt, &ikm, b"Content-Encoding: nonce\0", 12);
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &key).unwrap(),
        );
        let mut data = record.to_vec();
        let plain = key
            .open_in_place(
                ring::aead::Nonce::try_assume_unique_for_key(&nonce).unwrap(),
                ring::aead::Aad::empty(),
                &mut data,
            )
            .expect("the record opens with the browser's key and secret");
        let (delimiter, message) = plain.split_last().unwrap();
        assert_eq!(*delimiter, 2, "the last record's delimiter, no padding");
        message.to_vec()
    }
}

fn unb64url(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | A.iter().position(|a| *a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// The push channel as a browser's push service sees it: a request to the subscription's
/// endpoint only when the configuration names the service, encrypted for the browser (the
/// test opens it with the browser's key), carrying a VAPID token for the service's origin
/// that verifies with the key the browser subscribed with, and the alert's ack link, which
/// acknowledges when the notification's action posts it.
#[tokio::test]
async fn a_push_channel_reaches_a_users_browser_encrypted_and_signed() {
    let service = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(
            dir.path(),
            &format!("notify: {{pushServices: [\"{}\"]}}\n", service.base),
        ),
        ..Default::default()
    });
    let (s, token) = (&a.s, a.token.as_str());
    let pia = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/users",
            json!({"email": "pia@example.org", "name": "Pia", "roles": ["operator"], "password": "a long enough password"}),
        )
        .await,
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let login = s
        .http
        .post(s.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("email=pia%40example.org&password=a+long+enough+password")
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let as_pia = |method: Method, path: &str| {
        s.http
            .request(method, s.url(path))
            .header("Cookie", &cookie)
            .header("Sec-Fetch-Site", "same-origin")
    };
    let key = json(
        as_pia(Method::GET, "/api/v1/push-subscriptions/key")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await["publicKey"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(unb64url(&key).len(), 65, "an uncompressed P-256 point");
    let again = json(
        call(s, token, Method::GET, "/api/v1/push-subscriptions/key")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(again["publicKey"], key.as_str(), "one key for the instance");
    let mut browser = TestBrowser::new();
    // Registered, but on no push service the configuration names: never sent to.
    let elsewhere = Receiver::start().await;
    for (endpoint, keys) in [
        (service.url("/push/pia"), browser.keys()),
        (elsewhere.url("/push/pia"), TestBrowser::new().keys()),
    ] {
        let res = as_pia(Method::POST, "/api/v1/push-subscriptions")
            .json(&json!({"endpoint": endpoint, "keys": keys}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
    }
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/channels",
                json!({"name": "browser", "type": "push", "enabled": true, "config": {"subject": "mailto:ops@example.org"}}),
            ),
            (
                "/api/v1/contacts",
                json!({"name": "pia", "userId": pia, "preferences": [{"channels": ["push"], "profile": "default"}]}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "page-pia", "steps": [{"after": 0, "notify": {"contact": "pia"}}]}),
            ),
        ],
    )
    .await;
    let bad = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "odd", "type": "push", "config": {"subject": "ops"}}),
    )
    .await;
    assert_problem(bad, 422, "svc:validation/config").await;

    let alert = raise(s, token, "Pump 3 <dry>", "page-pia").await;
    let got = service
        .wait_for("/push/pia", 1, Duration::from_secs(10))
        .await;
    assert_eq!(got.len(), 1, "one push to the subscription");
    let push = &got[0];
    assert_eq!(push.headers["content-encoding"], "aes128gcm");
    assert_eq!(push.headers["urgency"], "high", "a critical alert");
    assert_eq!(push.headers["ttl"], "86400");
    let authorization = &push.headers["authorization"];
    let (jwt, k) = authorization
        .strip_prefix("vapid t=")
        .and_then(|rest| rest.split_once(", k="))
        .unwrap_or_else(|| panic!("{authorization}"));
    assert_eq!(k, key, "signed with the key the browser subscribed with");
    let parts: Vec<&str> = jwt.split('.').collect();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, unb64url(k))
        .verify(
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
            &unb64url(parts[2]),
        )
        .expect("the VAPID token verifies");
    let claims: Value = serde_json::from_slice(&unb64url(parts[1])).unwrap();
    assert_eq!(claims["aud"], service.base.as_str());
    assert_eq!(claims["sub"], "mailto:ops@example.org");
    assert!(claims["exp"].as_i64().unwrap() > jiff::Timestamp::now().as_second());
    let message: Value = serde_json::from_slice(&browser.open(&push.body)).unwrap();
    assert_eq!(message["title"], "[CRITICAL] Pump 3 <dry>");
    assert_eq!(message["tag"], alert["id"]);
    let ack_url = message["ackUrl"].as_str().unwrap();
    assert!(ack_url.contains("/api/v1/ack/"), "{message}");
    assert_eq!(
        notifications(s, token, 2, |c| c == "browser").await,
        ["browser:pending", "browser:sent"]
    );
    let escalation = events_of(s, token, "escalation").await;
    assert_eq!(
        escalation[0]["payload"]["channels"],
        json!(["browser"]),
        "the escalation names the channel used, not its type"
    );
    assert!(
        elsewhere.received("/push/pia").is_empty(),
        "a service the configuration does not name is never reached"
    );

    // The notification's Acknowledge action, as the service worker makes it.
    let res = s.http.post(s.url(&ack_path(ack_url))).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let alert = get(
        s,
        token,
        &format!("/api/v1/alerts/{}", alert["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(alert["status"], "acked");

    // A push service that says the subscription is gone (410): it is forgotten, audited.
    service.answer("/push/pia", 410);
    raise(s, token, "Pump 4 dry", "page-pia").await;
    let started = Instant::now();
    loop {
        let audit = get(s, token, "/api/v1/audit?limit=50").await.to_string();
        if audit.contains("push-subscription.gone") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the gone subscription was not forgotten: {audit}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The service worker the UI registers, at the root.
    let sw = s.http.get(s.url("/sw.js")).send().await.unwrap();
    assert_eq!(sw.status(), 200);
    assert_eq!(sw.headers()["service-worker-allowed"], "/");
    assert!(sw.text().await.unwrap().contains("showNotification"));
}

/// Two servers on one PostgreSQL database under kill -9: each round both take writes, an
/// alarm is raised through the one that does not lead, and the leading one is killed; the
/// other leads, and the killed one comes back beside it. Every acknowledged write is there,
/// the audit chain holds, and every alert raised pages its person at least once and at most
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_under_kill_9_lose_no_write_and_no_page() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    if !crate::postgres::enabled() {
        eprintln!("SKIPPED: runs with SVC_TEST_STORAGE=postgres");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut leader_dir = dir.path().join("a");
    let mut other_dir = dir.path().join("b");
    std::fs::create_dir_all(&leader_dir).unwrap();
    let token = bootstrap(&leader_dir);
    let hooks = Receiver::start().await;
    let mut leader = Server::start_in(&leader_dir, Opts::default());
    create_all(&leader, &token, paging_ada(&hooks)).await;
    std::fs::create_dir_all(&other_dir).unwrap();
    std::fs::copy(
        leader_dir.with_extension("pgdb"),
        other_dir.with_extension("pgdb"),
    )
    .unwrap();
    std::fs::copy(leader_dir.join("master.key"), other_dir.join("master.key")).unwrap();
    let mut other = Server::start_in(&other_dir, Opts::default());
    let (mut acked, mut raised) = (Vec::<String>::new(), Vec::<String>::new());
    for round in 0..5u64 {
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = [&leader, &other]
            .into_iter()
            .enumerate()
            .map(|(n, s)| {
                let (base, token, stop) = (s.base.clone(), token.clone(), stop.clone());
                tokio::spawn(async move {
                    let http = client();
                    let mut done = Vec::new();
                    for i in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let name = format!("r{round}-{n}-{i}");
                        let res = http
                            .post(format!("{base}/api/v1/hosts"))
                            .bearer_auth(&token)
                            .json(&json!({"name": name, "spec": {"address": "192.0.2.9"}}))
                            .send()
                            .await;
                        match res {
                            Ok(r) if r.status() == 201 => done.push(name),
                            _ => break,
                        }
                    }
                    done
                })
            })
            .collect();
        let alert = raise(&other, &token, &format!("round {round}"), "page").await;
        raised.push(alert["id"].as_str().unwrap().to_string());
        tokio::time::sleep(Duration::from_millis(100 + round * 37 % 150)).await;
        leader.crash();
        let took = std::time::Instant::now();
        while !leads(&other, &token).await {
            assert!(
                took.elapsed() < Duration::from_secs(30),
                "round {round}: no one leads"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::SeqCst);
        for writer in writers {
            acked.extend(writer.await.unwrap());
        }
        leader = other;
        std::mem::swap(&mut leader_dir, &mut other_dir);
        paged(&hooks, &raised[raised.len() - 1]).await;
        let names = host_names(&leader, &token).await;
        for name in &acked {
            assert!(
                names.contains(name),
                "acknowledged write {name} lost in takeover {round}"
            );
        }
        assert_chain_intact(&leader, &token).await;
        other = Server::start_in(&other_dir, Opts::default());
    }
    assert!(
        acked.len() > 10,
        "the writers got only {} writes through",
        acked.len()
    );
    each_paged_once_or_twice(&hooks, &raised).await;
    drop(other);
}
