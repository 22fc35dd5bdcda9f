//! One cause, one page (issue 69): dependencies hold their children's pages back while the
//! parent has failed and let those still failing page once when it is back; redundancy
//! groups fail together; a dependency loop is refused at save.

use crate::receiver::Receiver;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A webhook channel to the receiver's `/hook`, a contact `ada` paged on it, a policy `page`
/// paging her at once and a rule paging every host or service problem through it.
fn paging(hooks: &Receiver) -> Vec<(&'static str, Value)> {
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
        (
            "/api/v1/alert-rules",
            json!({"name": "problems", "match": "event.type == 'state_change' && event.state in ['DOWN', 'UNREACHABLE', 'CRITICAL']",
                   "severity": "critical", "escalationPolicy": "page"}),
        ),
    ]
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

fn host_result(host: &str, state: &str) -> Value {
    json!({"host": host, "state": state, "output": format!("{host} {state}")})
}

async fn alerts_until(s: &Server, token: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let v = get(s, token, "/api/v1/alerts?limit=200").await;
        let items = v["items"].as_array().unwrap().clone();
        if done(&items) {
            return items;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "alerts never got there: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pages per alert title that reached `/hook`.
fn pages(hooks: &Receiver) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for r in hooks.received("/hook") {
        let title = r.json()["alert"]["title"].as_str().unwrap().to_string();
        // A page composed once its alert's dependents are counted names them: the same page.
        let title = match title.split_once(" (and ") {
            Some((alert, rest)) if rest.ends_with(" dependents)") => alert.to_string(),
            _ => title,
        };
        *out.entry(title).or_default() += 1;
    }
    out
}

fn active_titled<'a>(alerts: &'a [Value], title: &str) -> Option<&'a Value> {
    alerts
        .iter()
        .find(|a| a["title"].as_str().unwrap().starts_with(title) && a["status"] == "open")
}

/// A router with 40 hosts behind it (20 by `dependsOn`, 20 by `parents`) goes down: one page,
/// for the router, which holds the other 40 back. It comes back with 2 hosts still down: those
/// 2 page then, once each.
#[tokio::test]
async fn a_failed_router_pages_once_and_what_is_still_down_behind_it_pages_when_it_is_back() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    bodies.push(("/api/v1/hosts", json!({"name": "router", "spec": {}})));
    for i in 0..20 {
        bodies.push((
            "/api/v1/hosts",
            json!({"name": format!("d{i}"), "spec": {"dependsOn": [{"object": "router"}]}}),
        ));
        bodies.push((
            "/api/v1/hosts",
            json!({"name": format!("p{i}"), "spec": {"parents": ["router"]}}),
        ));
    }
    create_all(s, token, bodies).await;

    post_results(s, token, vec![host_result("router", "DOWN")]).await;
    let children: Vec<Value> = (0..20)
        .flat_map(|i| {
            [
                host_result(&format!("d{i}"), "DOWN"),
                host_result(&format!("p{i}"), "DOWN"),
            ]
        })
        .collect();
    post_results(s, token, children).await;
    let alerts = alerts_until(s, token, |a| a.len() == 41).await;
    hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    let router = active_titled(&alerts, "router is DOWN").unwrap();
    let d3 = active_titled(&alerts, "d3 is DOWN").unwrap();
    assert_eq!(d3["suppressedBy"]["kind"], "dependency");
    assert_eq!(d3["suppressedBy"]["object"], "router");
    assert_eq!(d3["suppressedBy"]["objectId"], router["objectId"]);
    let p3 = active_titled(&alerts, "p3 is UNREACHABLE").unwrap();
    assert_eq!(p3["suppressedBy"]["object"], "router");
    assert_eq!(p3["cause"]["reason"], "parent router is down");
    let router = get(
        s,
        token,
        &format!("/api/v1/alerts/{}", router["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        router["dependents"], 40,
        "the router's alert says what it holds back"
    );
    // Past the suppressed alerts' recheck: still the router's page alone.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        pages(&hooks),
        HashMap::from([("router is DOWN".to_string(), 1)])
    );

    // All but d5 and p5 come back, then the router.
    let back: Vec<Value> = (0..20)
        .filter(|i| *i != 5)
        .flat_map(|i| {
            [
                host_result(&format!("d{i}"), "UP"),
                host_result(&format!("p{i}"), "UP"),
            ]
        })
        .collect();
    post_results(s, token, back).await;
    alerts_until(s, token, |a| {
        a.iter().filter(|a| a["status"] == "open").count() == 3
    })
    .await;
    post_results(s, token, vec![host_result("router", "UP")]).await;
    let started = Instant::now();
    while pages(&hooks).len() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "d5 and p5 never paged: {:?}",
            pages(&hooks)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // p5 was UNREACHABLE by its last (passive) result: it is DOWN again, as that result said.
    let p5 = alerts_until(s, token, |a| active_titled(a, "p5 is DOWN").is_some()).await;
    assert!(
        active_titled(&p5, "p5 is DOWN")
            .unwrap()
            .get("suppressedBy")
            .is_none()
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    let got = pages(&hooks);
    assert_eq!(got.get("router is DOWN"), Some(&1));
    assert_eq!(got.get("d5 is DOWN"), Some(&1), "{got:?}");
    assert_eq!(
        got.get("p5 is UNREACHABLE").or(got.get("p5 is DOWN")),
        Some(&1),
        "{got:?}"
    );
    assert_eq!(got.values().sum::<usize>(), 3, "{got:?}");
}

/// Two uplinks in one redundancy group: with one up the site behind them is not held back
/// (its problem is its own and pages); with both down it is. A service names a service.
#[tokio::test]
async fn a_redundancy_group_holds_back_only_when_every_member_has_failed() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    for name in ["uplink-a", "uplink-b", "db"] {
        bodies.push(("/api/v1/hosts", json!({"name": name, "spec": {}})));
    }
    bodies.push((
        "/api/v1/hosts",
        json!({"name": "site", "spec": {"dependsOn": [
            {"object": "uplink-a", "redundancyGroup": "uplinks"},
            {"object": "uplink-b", "redundancyGroup": "uplinks"}]}}),
    ));
    bodies.push((
        "/api/v1/services",
        json!({"name": "disk", "host": "db", "spec": {}}),
    ));
    bodies.push((
        "/api/v1/services",
        json!({"name": "app", "host": "site", "spec": {"dependsOn": [{"object": "db/disk"}]}}),
    ));
    create_all(s, token, bodies).await;

    post_results(s, token, vec![host_result("uplink-a", "DOWN")]).await;
    post_results(s, token, vec![host_result("site", "DOWN")]).await;
    let alerts = alerts_until(s, token, |a| a.len() == 2).await;
    assert!(
        active_titled(&alerts, "site is DOWN")
            .unwrap()
            .get("suppressedBy")
            .is_none()
    );
    hooks.wait_for("/hook", 2, Duration::from_secs(10)).await;
    post_results(s, token, vec![host_result("site", "UP")]).await;
    post_results(s, token, vec![host_result("uplink-b", "DOWN")]).await;
    post_results(s, token, vec![host_result("site", "DOWN")]).await;
    // Down again within its rule's reopenWindow: the site's alert reopens, held back now.
    let alerts = alerts_until(s, token, |a| {
        a.len() == 3 && active_titled(a, "site is DOWN").is_some_and(|s| s["reopened"] == 1)
    })
    .await;
    let held = active_titled(&alerts, "site is DOWN").unwrap();
    assert_eq!(held["suppressedBy"]["redundancyGroup"], "uplinks");
    assert!(
        held["cause"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("every member of uplinks has failed")
    );

    // A service parent fails when CRITICAL, not when WARNING.
    let service = |host: &str, svc: &str, state: &str| json!({"host": host, "service": svc, "state": state, "output": state});
    post_results(s, token, vec![host_result("site", "UP")]).await;
    post_results(s, token, vec![service("db", "disk", "CRITICAL")]).await;
    post_results(s, token, vec![service("site", "app", "CRITICAL")]).await;
    let alerts = alerts_until(s, token, |a| a.len() == 5).await;
    let app = active_titled(&alerts, "site/app is CRITICAL").unwrap();
    assert_eq!(app["suppressedBy"]["object"], "db/disk");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = pages(&hooks);
    assert_eq!(got.values().sum::<usize>(), 4, "{got:?}");
    assert!(!got.contains_key("site/app is CRITICAL"), "{got:?}");
}

/// A dependency loop is refused at save with the loop named; an entry naming neither an
/// object nor a selector, or a state that is none, is refused too.
#[tokio::test]
async fn a_dependency_loop_is_refused_with_the_loop_named() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": "a", "labels": {"tier": "core"}, "spec": {}}),
            ),
            (
                "/api/v1/hosts",
                json!({"name": "b", "spec": {"dependsOn": [{"object": "a"}]}}),
            ),
            (
                "/api/v1/hosts",
                json!({"name": "c", "spec": {"dependsOn": [{"object": "b"}]}}),
            ),
        ],
    )
    .await;
    let hosts = get(s, token, "/api/v1/hosts?name=a").await;
    let id = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let version = hosts["items"][0]["version"].as_u64().unwrap();
    let res = call(s, token, Method::PUT, &format!("/api/v1/objects/{id}"))
        .header("If-Match", format!("\"{version}\""))
        .json(&json!({"labels": {"tier": "core"}, "spec": {"dependsOn": [{"object": "c"}]}}))
        .send()
        .await
        .unwrap();
    let problem = assert_problem(res, 422, "svc:validation/spec").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("a → c → b → a"),
        "{problem}"
    );
    // By selector too: d depends on every core host, and a would depend on d.
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/hosts",
        json!({"name": "d", "labels": {"tier": "edge"}, "spec": {"dependsOn": [{"selector": "tier=core"}]}}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 201);
    let res = call(s, token, Method::PUT, &format!("/api/v1/objects/{id}"))
        .header("If-Match", format!("\"{version}\""))
        .json(&json!({"labels": {"tier": "core"}, "spec": {"dependsOn": [{"selector": "tier=edge"}]}}))
        .send()
        .await
        .unwrap();
    let problem = assert_problem(res, 422, "svc:validation/spec").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("a → d → a"),
        "{problem}"
    );
    for bad in [json!([{}]), json!([{"object": "a", "states": ["BROKEN"]}])] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "e", "spec": {"dependsOn": bad}}),
        )
        .await;
        assert_problem(res, 422, "svc:validation/spec").await;
    }
}

async fn shelve_call(
    s: &Server,
    token: &str,
    id: &str,
    verb: &str,
    body: Value,
) -> reqwest::Response {
    send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:{verb}"),
        body,
    )
    .await
}

/// Shelving by people (OPC UA Part 9): a shelved alert keeps its status and does not page;
/// unshelved while open it pages again; a one-shot shelf ends when the alert clears; bad
/// shelves are refused with the field named; every change is an event and an audit entry.
#[tokio::test]
async fn a_shelved_alert_does_not_page_until_it_is_unshelved_or_clears() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    bodies.push(("/api/v1/hosts", json!({"name": "pump", "spec": {}})));
    create_all(s, token, bodies).await;
    post_results(s, token, vec![host_result("pump", "DOWN")]).await;
    let alerts = alerts_until(s, token, |a| a.len() == 1).await;
    let id = alerts[0]["id"].as_str().unwrap().to_string();
    hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;

    for (body, field) in [
        (json!({"mode": "timed", "duration": "1h"}), "reason"),
        (json!({"mode": "forever", "reason": "x"}), "mode"),
        (json!({"mode": "timed", "reason": "x"}), "duration"),
        (
            json!({"mode": "timed", "duration": "9h", "reason": "x"}),
            "duration",
        ),
        (
            json!({"mode": "oneShot", "duration": "1h", "reason": "x"}),
            "duration",
        ),
    ] {
        let res = shelve_call(s, token, &id, "shelve", body).await;
        assert_problem(res, 422, &format!("svc:validation/{field}")).await;
    }
    let res = shelve_call(
        s,
        token,
        &id,
        "shelve",
        json!({"mode": "timed", "duration": "1h", "reason": "pump swap"}),
    )
    .await;
    let shelved = json(res, 200).await;
    assert_eq!(shelved["status"], "open", "shelving keeps the status");
    assert_eq!(shelved["shelved"]["mode"], "timed");
    assert_eq!(shelved["shelved"]["reason"], "pump swap");
    assert!(shelved["shelved"]["until"].is_string());
    assert!(shelved["shelved"]["by"].is_string());
    // Still DOWN: refreshed, not paged.
    post_results(
        s,
        token,
        vec![json!({"host": "pump", "state": "DOWN", "output": "still down"})],
    )
    .await;
    // Another tenant's administrator can neither unshelve nor shelve it.
    let (_, other) = second_tenant(s, token, "elsewhere").await;
    for (verb, body) in [
        ("unshelve", json!({})),
        ("shelve", json!({"mode": "oneShot", "reason": "not mine"})),
    ] {
        let res = shelve_call(s, &other, &id, verb, body).await;
        assert_problem(res, 404, "svc:not-found").await;
    }
    let res = shelve_call(s, token, &id, "unshelve", json!({})).await;
    let back = json(res, 200).await;
    assert!(back.get("shelved").is_none());
    hooks.wait_for("/hook", 2, Duration::from_secs(10)).await;
    let res = shelve_call(s, token, &id, "unshelve", json!({})).await;
    assert_problem(res, 404, "svc:not-found").await;

    let res = shelve_call(
        s,
        token,
        &id,
        "shelve",
        json!({"mode": "oneShot", "reason": "known"}),
    )
    .await;
    assert_eq!(json(res, 200).await["shelved"]["mode"], "oneShot");
    post_results(s, token, vec![host_result("pump", "UP")]).await;
    let alerts = alerts_until(s, token, |a| a[0]["status"] == "resolved").await;
    assert!(
        alerts[0].get("shelved").is_none(),
        "a one-shot shelf ends when it clears"
    );
    let res = shelve_call(
        s,
        token,
        &id,
        "shelve",
        json!({"mode": "oneShot", "reason": "late"}),
    )
    .await;
    assert_problem(res, 404, "svc:not-found").await;
    post_results(s, token, vec![host_result("pump", "DOWN")]).await;
    hooks.wait_for("/hook", 3, Duration::from_secs(10)).await;
    assert_eq!(
        hooks.received("/hook").len(),
        3,
        "one page per time it was not shelved"
    );

    let events = get(s, token, "/api/v1/events?types=shelve&limit=10").await;
    let actions: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "shelved").count(),
        2,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| **a == "unshelved").count(),
        1,
        "{actions:?}"
    );
    let audit = audit_actions(s, token, 50).await;
    assert!(audit.iter().any(|a| a == "alert.shelve"));
    assert!(audit.iter().any(|a| a == "alert.unshelve"));
}

/// The webhook bodies of kind `notice` that reached `/hook`: (contact, title).
fn notices(hooks: &Receiver) -> Vec<(String, String)> {
    hooks
        .received("/hook")
        .iter()
        .map(|r| r.json())
        .filter(|b| b["kind"] == "notice")
        .map(|b| {
            let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (field(&b["contact"]), field(&b["alert"]["title"]))
        })
        .collect()
}

/// Waits until `/hook` has a notice whose title starts with `prefix`.
async fn notice_starting(hooks: &Receiver, prefix: &str) -> (String, String) {
    let started = Instant::now();
    loop {
        if let Some(n) = notices(hooks)
            .into_iter()
            .find(|(_, t)| t.starts_with(prefix))
        {
            return n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no notice {prefix:?}: {:?}",
            notices(hooks)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A chattering source (ISA-18.2): a host flipping DOWN/UP 20 times is one alert (each
/// failure within the rule's `reopenWindow` reopens it), paged at most for its first two
/// problems; the fourth change within a minute shelves it, and the shelf holds every later
/// change, with one notice to the first step saying so and one when the shelf ends, after
/// which the still-DOWN host pages again, once. Every flip stays an event.
#[tokio::test]
async fn a_chattering_alert_shelves_itself_with_a_notice_and_pages_when_its_shelf_ends() {
    let dir = tempfile::tempdir().unwrap();
    // The shelf lasts an hour on the clock the test moves: a loaded machine posting the
    // flips slowly cannot outlast it.
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), "alerting:\n  chatter: {shelveFor: 1h}\n"),
        ..test_clock(&dir.path().join("clock"))
    });
    let (s, token) = (&a.s, &a.token);
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    bodies.push(("/api/v1/hosts", json!({"name": "pump", "spec": {}})));
    create_all(s, token, bodies).await;
    for i in 0..20 {
        let state = if i % 2 == 0 { "DOWN" } else { "UP" };
        post_results(s, token, vec![host_result("pump", state)]).await;
    }
    post_results(s, token, vec![host_result("pump", "DOWN")]).await;
    // Eleven failures: one alert, reopened ten times.
    let alerts = alerts_until(s, token, |a| {
        a.len() == 1 && a[0]["status"] == "open" && a[0]["reopened"] == 10
    })
    .await;
    let open = &alerts[0];
    assert_eq!(open["shelved"]["mode"], "chatter", "{open}");
    assert_eq!(open["shelved"]["by"], "chatter");
    let shelved = notice_starting(&hooks, "Chattering, shelved: pump is DOWN").await;
    assert_eq!(shelved.0, "ada", "the first step is told");
    advance(s, token, "1h").await;
    let ended = notice_starting(&hooks, "Chatter shelf ended: pump is DOWN").await;
    assert_eq!(ended.0, "ada");
    let alerts = alerts_until(s, token, |a| {
        a.iter()
            .any(|a| a["status"] == "open" && a.get("shelved").is_none())
    })
    .await;
    assert_eq!(alerts.len(), 1, "the one alert held every later change");
    // The journal's order: at most two escalations before the shelf, none while it held, one
    // after it ended.
    let timeline = || async {
        let events = get(s, token, "/api/v1/events?types=escalation,shelve&limit=100").await;
        let mut out: Vec<String> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| match e["type"].as_str().unwrap() {
                "shelve" => e["payload"]["action"].as_str().unwrap().to_string(),
                other => other.to_string(),
            })
            .collect();
        out.reverse();
        out
    };
    let started = Instant::now();
    let timeline = loop {
        let all = timeline().await;
        if all.last().is_some_and(|k| k == "escalation") {
            break all;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no page after the shelf: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let shelved = timeline.iter().position(|k| k == "shelved").unwrap();
    let unshelved = timeline.iter().position(|k| k == "unshelved").unwrap();
    assert!(shelved <= 2, "at most two pages before: {timeline:?}");
    assert_eq!(unshelved, shelved + 1, "none while shelved: {timeline:?}");
    assert_eq!(timeline.len(), unshelved + 2, "one after: {timeline:?}");
    assert_eq!(notices(&hooks).len(), 2, "{:?}", notices(&hooks));
    let changes = get(s, token, "/api/v1/events?types=state_change&limit=100").await;
    assert_eq!(changes["items"].as_array().unwrap().len(), 21);
}

/// The people behind a shelf or a silence are told (issue 69): a timed shelf ending within 15
/// minutes warns its shelver at once; a silence tells its creator it started, and one with
/// `expireWhenUnmatchedFor` that matched nothing ends and says so, while one that matches the
/// open alert stays. Each notice reaches the contacts linked to the person's user.
#[tokio::test]
async fn the_shelver_and_the_silencer_are_told_on_their_own_contacts() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    bodies.push(("/api/v1/hosts", json!({"name": "pump", "spec": {}})));
    create_all(s, token, bodies).await;
    let ola = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/users",
            json!({"email": "ola@example.org", "name": "Ola", "roles": ["operator"], "password": "a long enough password"}),
        )
        .await,
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    create_all(
        s,
        token,
        vec![(
            "/api/v1/contacts",
            json!({"name": "ola", "userId": ola, "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        )],
    )
    .await;
    let (cookie, _) =
        session_of(&login(s, "ola@example.org", "a long enough password", false).await);
    let as_ola = |path: &str, body: Value| {
        s.http
            .post(s.url(path))
            .header("Cookie", format!("svc_session={cookie}"))
            .header("Sec-Fetch-Site", "same-origin")
            .json(&body)
            .send()
    };
    post_results(s, token, vec![host_result("pump", "DOWN")]).await;
    let alerts = alerts_until(s, token, |a| a.len() == 1).await;
    let id = alerts[0]["id"].as_str().unwrap();
    hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;

    let shelf = json!({"mode": "timed", "duration": "10m", "reason": "pump swap"});
    let res = as_ola(&format!("/api/v1/alerts/{id}:shelve"), shelf)
        .await
        .unwrap();
    assert_eq!(json(res, 200).await["shelved"]["by"], "Ola");
    let warned = notice_starting(&hooks, "Your shelf ends at").await;
    assert_eq!(warned, (String::from("ola"), warned.1.clone()));
    assert!(warned.1.ends_with("pump is DOWN"), "{}", warned.1);

    let expires = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600)).to_string();
    let lonely = json!({"comment": "nothing here", "textRegex": "^boiler", "expiresAt": expires,
                        "expireWhenUnmatchedFor": "1s"});
    let res = as_ola("/api/v1/silences", lonely).await.unwrap();
    let lonely = json(res, 201).await;
    assert_eq!(lonely["expireWhenUnmatchedFor"], "1s");
    let busy = json!({"comment": "pump work", "textRegex": "^pump", "expiresAt": expires,
                      "expireWhenUnmatchedFor": "1s"});
    let busy = json(as_ola("/api/v1/silences", busy).await.unwrap(), 201).await;
    let started = notice_starting(&hooks, "Your silence has started: pump work").await;
    assert_eq!(started.0, "ola");
    let ended = notice_starting(&hooks, "Your silence has ended: nothing here").await;
    assert_eq!(ended.0, "ola");
    // The busy silence was made after the lonely one: its check may come a moment later.
    let waited = Instant::now();
    let listed = loop {
        let listed = get(s, token, "/api/v1/silences").await;
        let items = listed["items"].as_array().unwrap();
        if items
            .iter()
            .any(|x| x["id"] == busy["id"] && x["lastMatchedAt"].is_string())
            || waited.elapsed() > Duration::from_secs(10)
        {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let listed = |id: &Value| {
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == *id)
            .cloned()
            .unwrap()
    };
    let ended = listed(&lonely["id"]);
    let ended_at: jiff::Timestamp = ended["expiresAt"].as_str().unwrap().parse().unwrap();
    assert!(
        ended_at <= jiff::Timestamp::now(),
        "ended when it matched nothing"
    );
    let kept = listed(&busy["id"]);
    assert_eq!(
        kept["expiresAt"], busy["expiresAt"],
        "it matches the open alert"
    );
    assert!(kept["lastMatchedAt"].is_string(), "{kept}");
    assert!(
        notices(&hooks).iter().all(|(c, _)| c == "ola"),
        "{:?}",
        notices(&hooks)
    );
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/silences",
        json!({"comment": "x", "textRegex": "x", "expiresAt": expires, "expireWhenUnmatchedFor": "soon"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/expireWhenUnmatchedFor").await;
}

/// The webhook bodies of kind `digest` that reached `/hook`.
fn digests(hooks: &Receiver) -> Vec<Value> {
    hooks
        .received("/hook")
        .iter()
        .map(|r| r.json())
        .filter(|b| b["kind"] == "digest")
        .collect()
}

/// An alarm flood (ISA-18.2) across a crash: 30 hosts going down at once flood the tenant (2
/// alerts within a minute); the first to open is marked first-out; the server is killed (-9)
/// mid-flood and started again; each of the contact's channels (the webhook and an SMS by the
/// GSM modem) then gets one digest instead of a page per alert, the SMS within one part, and
/// the flood ends once calm. At most one alert paged on its own before the flood; no alert is
/// paged twice or left out; every held page is recorded against its alert.
#[tokio::test]
async fn a_flood_pages_a_digest_per_channel_with_its_first_out_and_survives_a_crash() {
    let Some(pty) = crate::pty::PtyPair::open("flood digests by SMS") else {
        return;
    };
    let sim = crate::modem_sim::ModemSim::start(&pty.theirs);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let yaml = format!(
        "hardware:\n  gsm:\n    device: {}\n    profile: simcom\nalerting:\n  chatter: {{flips: 0}}\n  flood: {{enterAt: {{alerts: 2, within: 1m}}, leaveAt: {{alerts: 1, within: 8s}}, digestEvery: 4s}}\n",
        pty.ours.display()
    );
    let opts = || Opts {
        args: config_args(dir.path(), &yaml),
        ..Opts::default()
    };
    let s = Server::start_in(&data, opts());
    crate::hardware::ready(&s, "gsm").await;
    let hooks = Receiver::start().await;
    let mut bodies = paging(&hooks);
    bodies[1].1 = json!({"name": "ada", "phone": "+49 170 1234567",
        "preferences": [{"channels": ["webhook", "sms"], "profile": "default"}]});
    bodies.push((
        "/api/v1/channels",
        json!({"name": "gsm", "type": "sms", "config": {"provider": "modem"}}),
    ));
    for i in 0..30 {
        bodies.push((
            "/api/v1/hosts",
            json!({"name": format!("h{i:02}"), "spec": {}}),
        ));
    }
    create_all(&s, &token, bodies).await;
    let started = Instant::now();
    let down = (0..30)
        .map(|i| host_result(&format!("h{i:02}"), "DOWN"))
        .collect();
    post_results(&s, &token, down).await;
    let alerts = alerts_until(&s, &token, |a| a.len() == 30).await;
    let first_out: Vec<&Value> = alerts.iter().filter(|a| a["firstOut"] == true).collect();
    assert_eq!(first_out.len(), 1, "one first-out: {alerts:?}");
    let oldest = alerts
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .min()
        .unwrap();
    assert_eq!(
        first_out[0]["id"], oldest,
        "the first to open is the first-out"
    );
    let floods = get(&s, &token, "/api/v1/floods").await;
    assert_eq!(floods["items"].as_array().unwrap().len(), 1, "{floods}");
    assert_eq!(floods["items"][0]["scope"], "");
    assert_eq!(floods["items"][0]["firstOut"], first_out[0]["id"]);
    assert!(digests(&hooks).is_empty(), "no digest before digestEvery");

    // What was read survives the crash, not what a sync under way would have made durable.
    durable_so_far(&s, &token).await;
    s.crash();
    let s = Server::start_in(&data, opts());
    crate::hardware::ready(&s, "gsm").await;
    let mut ended = Value::Null;
    while ended.is_null() {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "the flood never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let events = get(&s, &token, "/api/v1/events?types=flood_ended").await;
        ended = events["items"][0].clone();
    }
    // The last digest is queued with `flood_ended`; its sends follow.
    let count = |d: &Value| {
        d["params"]["count"]
            .as_str()
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    let sms_digests = || {
        sim.sent()
            .into_iter()
            .filter(|m| m.text.starts_with("CRITICAL: Flood: "))
            .count()
    };
    let (alone, digests) = loop {
        let alone: Vec<Value> = hooks
            .received("/hook")
            .iter()
            .map(|r| r.json())
            .filter(|b| b["kind"] == "alert")
            .collect();
        let digests = digests(&hooks);
        let in_digests: usize = digests.iter().map(count).sum();
        if in_digests + alone.len() >= 30 && sms_digests() >= digests.len() {
            break (alone, digests);
        }
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "every alert paged once: {} alone, {in_digests} in {} digests, {} by SMS",
            alone.len(),
            digests.len(),
            sms_digests()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(alone.len() <= 1, "paged alone: {alone:?}");
    // The crash came before the first digest was due; the calm came within two more.
    assert!(
        (1..=2).contains(&digests.len()),
        "one digest per digestEvery: {digests:?}"
    );
    let in_digests: usize = digests.iter().map(count).sum();
    assert_eq!(in_digests + alone.len(), 30, "every alert paged once");
    assert!(
        digests[0]["alert"]["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "First out: {}",
                first_out[0]["title"].as_str().unwrap()
            )),
        "{}",
        digests[0]
    );
    assert_eq!(digests[0]["params"]["firstOut"], first_out[0]["id"]);
    assert_eq!(ended["payload"]["firstOut"], first_out[0]["id"]);
    let sms: Vec<_> = sim.sent();
    let sms_digests: Vec<_> = sms
        .iter()
        .filter(|m| m.text.starts_with("CRITICAL: Flood: "))
        .collect();
    assert_eq!(sms_digests.len(), digests.len(), "{sms:?}");
    assert_eq!(sms.len(), sms_digests.len() + alone.len(), "{sms:?}");
    for m in &sms_digests {
        assert_eq!(m.mode, "text-gsm", "one GSM part: {m:?}");
        assert!(m.text.chars().count() <= 160, "{m:?}");
    }
    let notifications = get(&s, &token, "/api/v1/events?types=notification&limit=1000").await;
    let with_status = |status: &str| {
        notifications["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["payload"]["status"] == status)
            .count()
    };
    let held = 2 * (30 - alone.len());
    assert_eq!(
        with_status("held"),
        held,
        "each channel's page held per alert"
    );
    assert_eq!(with_status("digested"), held, "and sent in a digest");
    let started = get(&s, &token, "/api/v1/events?types=flood_started").await;
    assert_eq!(started["items"].as_array().unwrap().len(), 1);
    let floods = get(&s, &token, "/api/v1/floods").await;
    assert!(floods["items"].as_array().unwrap().is_empty(), "{floods}");
}

/// Raises a manual alert titled `title` with `labels`, paged through the policy `page`.
async fn raise_labelled(s: &Server, token: &str, title: &str, labels: Value) -> Value {
    let body = json!({"title": title, "escalationPolicy": "page", "labels": labels});
    json(
        send(s, token, Method::POST, "/api/v1/alerts", body).await,
        201,
    )
    .await
}

/// The scopes in flood that `token`'s tenant sees.
async fn flood_scopes(s: &Server, token: &str) -> Vec<String> {
    let floods = get(s, token, "/api/v1/floods").await;
    floods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["scope"].as_str().unwrap().to_string())
        .collect()
}

/// Each tenant sets its own noise controls (issue 69): the configuration turns floods off
/// for the instance; one tenant turns them on for itself, by `site`, with a shorter
/// `maxShelve`. Its alerts flood by site (a manual alarm's page held, another site's sent)
/// and its hosts flood its own scope, while the other tenant's alerts page one by one and its
/// shelves keep the configuration's limit. Bad values are refused with the field named,
/// writing needs `config:write`, every change is audited, and `{}` follows the configuration
/// again.
#[tokio::test]
async fn each_tenant_sets_its_own_noise_controls() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(
            dir.path(),
            "alerting:\n  flood: {enterAt: {alerts: 0, within: 1m}}\n",
        ),
        ..Opts::default()
    });
    let s = &a.s;
    let (_, b) = second_tenant(s, &a.token, "north-water").await;
    let hooks = Receiver::start().await;
    create_all(s, &a.token, paging(&hooks)).await;
    let mut theirs = paging(&hooks);
    theirs.push(("/api/v1/hosts", json!({"name": "pump-a", "spec": {}})));
    theirs.push(("/api/v1/hosts", json!({"name": "pump-b", "spec": {}})));
    create_all(s, &b, theirs).await;

    let instance = get(s, &b, "/api/v1/alerting/settings").await;
    assert_eq!(instance["maxShelve"], "8h0m0s", "{instance}");
    assert_eq!(instance["chatter"]["flips"], 3);
    assert_eq!(instance["flood"]["enterAt"]["alerts"], 0);
    assert_eq!(instance["tenant"], json!({}));
    assert_eq!(instance["version"], 0);
    let own = json!({
        "maxShelve": "30m",
        "flood": {"enterAt": {"alerts": 2, "within": "1m"}, "leaveAt": {"alerts": 1, "within": "1h"},
                  "digestEvery": "1h", "scopeLabel": "site"}
    });
    let set = send(s, &b, Method::PUT, "/api/v1/alerting/settings", own.clone()).await;
    let set = json(set, 200).await;
    assert_eq!(set["maxShelve"], "30m0s", "{set}");
    assert_eq!(set["flood"]["scopeLabel"], "site");
    assert_eq!(
        set["chatter"], instance["chatter"],
        "chatter follows the configuration"
    );
    assert_eq!(set["tenant"]["maxShelve"], "30m0s");
    assert!(set["tenant"].get("chatter").is_none(), "{set}");
    assert_eq!(set["version"], 1);
    assert_eq!(get(s, &b, "/api/v1/alerting/settings").await, set);
    let other = get(s, &a.token, "/api/v1/alerting/settings").await;
    assert_eq!(other["flood"]["enterAt"]["alerts"], 0, "{other}");
    assert_eq!(other["version"], 0);

    // Tenant B: two alerts at the north site flood it; the third's page is held, the south
    // site's goes out. Its hosts, without a site, flood the tenant's own scope.
    raise_labelled(s, &b, "north 1", json!({"site": "north"})).await;
    raise_labelled(s, &b, "north 2", json!({"site": "north"})).await;
    assert_eq!(flood_scopes(s, &b).await, ["site=north"]);
    let held = raise_labelled(s, &b, "north 3", json!({"site": "north"})).await;
    let south = raise_labelled(s, &b, "south 1", json!({"site": "south"})).await;
    post_results(
        s,
        &b,
        vec![host_result("pump-a", "DOWN"), host_result("pump-b", "DOWN")],
    )
    .await;
    // Tenant A: three alerts at one site, each paged.
    let mut ours = Vec::new();
    for i in 0..3 {
        ours.push(
            raise_labelled(s, &a.token, &format!("ours {i}"), json!({"site": "north"})).await,
        );
    }
    let started = Instant::now();
    loop {
        let paged = pages(&hooks);
        let scopes = flood_scopes(s, &b).await;
        if ["ours 0", "ours 1", "ours 2", "south 1"]
            .iter()
            .all(|t| paged.contains_key(*t))
            && scopes.len() == 2
        {
            assert_eq!(scopes, ["", "site=north"]);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "paged {paged:?}, floods {scopes:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        flood_scopes(s, &a.token).await.is_empty(),
        "A does not flood"
    );
    let notifications = get(s, &b, "/api/v1/events?types=notification&limit=1000").await;
    let held_for = |id: &Value| {
        notifications["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["payload"]["alertId"] == *id && e["payload"]["status"] == "held")
            .map(|e| e["payload"]["flood"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(held_for(&held["id"]), [json!("site=north")]);
    assert!(held_for(&south["id"]).is_empty());
    assert!(!pages(&hooks).contains_key("north 3"));

    // maxShelve: the tenant's 30m for B, the configuration's 8h for A.
    let shelve = |token: &str, id: &Value, duration: &str| {
        let (token, id) = (token.to_string(), id.as_str().unwrap().to_string());
        let body = json!({"mode": "timed", "duration": duration, "reason": "pump swap"});
        async move { shelve_call(s, &token, &id, "shelve", body).await }
    };
    let res = shelve(&b, &south["id"], "1h").await;
    let problem = assert_problem(res, 422, "svc:validation/duration").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("30m"),
        "{problem}"
    );
    assert_eq!(shelve(&b, &south["id"], "20m").await.status(), 200);
    assert_eq!(shelve(&a.token, &ours[0]["id"], "2h").await.status(), 200);

    for (body, code) in [
        (json!({"maxShelve": "0s"}), "svc:validation/maxShelve"),
        (json!({"maxShelve": "1000h"}), "svc:validation/maxShelve"),
        (
            json!({"chatter": {"flips": 5000}}),
            "svc:validation/chatter",
        ),
        (
            json!({"flood": {"overrides": {"north": {"digestEvery": "1m"}}}}),
            "svc:validation/flood",
        ),
        (
            json!({"flood": {"enterAt": {"alerts": 5, "within": "1m"}, "leaveAt": {"alerts": 9, "within": "1m"}}}),
            "svc:validation/flood",
        ),
    ] {
        let res = send(
            s,
            &b,
            Method::PUT,
            "/api/v1/alerting/settings",
            body.clone(),
        )
        .await;
        assert_problem(res, 422, code).await;
    }
    let res = send(
        s,
        &b,
        Method::PUT,
        "/api/v1/alerting/settings",
        json!({"maxShelf": "1h"}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 422, "an unknown field");
    assert_eq!(
        get(s, &b, "/api/v1/alerting/settings").await,
        set,
        "nothing half-written"
    );
    let (reader, _) = mint(s, &b, json!({"name": "reader", "scopes": ["alerts:read"]})).await;
    assert_eq!(
        get(s, &reader, "/api/v1/alerting/settings").await["version"],
        1
    );
    let res = send(
        s,
        &reader,
        Method::PUT,
        "/api/v1/alerting/settings",
        json!({}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 403);

    let reset = send(s, &b, Method::PUT, "/api/v1/alerting/settings", json!({})).await;
    let reset = json(reset, 200).await;
    assert_eq!(reset["maxShelve"], "8h0m0s", "{reset}");
    assert_eq!(reset["tenant"], json!({}));
    assert_eq!(reset["version"], 2);
    let audit = audit_actions(s, &b, 50).await;
    let updates = audit
        .iter()
        .filter(|a| *a == "alerting.settings.update")
        .count();
    assert_eq!(updates, 2, "{audit:?}");
}
