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
    let alerts = alerts_until(s, token, |a| a.len() == 4).await;
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
    let alerts = alerts_until(s, token, |a| a.len() == 6).await;
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
