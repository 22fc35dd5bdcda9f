//! Passive results through the state machine: soft → hard, passive hard at once, recovery,
//! unreachable through parents, events, live state in lists, problems, restarts, tenants.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

async fn post(s: &Server, token: &str, path: &str, body: Value) -> Value {
    let res = call(s, token, Method::POST, path)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let v: Value = res.json().await.unwrap();
    assert!(status == 201 || status == 202, "{path}: {status} {v}");
    v
}

async fn results(s: &Server, token: &str, items: Value) -> Value {
    post(s, token, "/api/v1/results", json!({"results": items})).await
}

async fn state_of(s: &Server, token: &str, list: &str, name: &str) -> Value {
    let v = json(call(s, token, Method::GET, list).send().await.unwrap(), 200).await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap()["state"]
        .clone()
}

async fn changes(s: &Server, token: &str) -> Vec<Value> {
    let v = json(
        call(
            s,
            token,
            Method::GET,
            "/api/v1/events?types=state_change&limit=1000",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let mut items = v["items"].as_array().unwrap().clone();
    items.reverse();
    items
}

async fn setup(s: &Server, token: &str) {
    post(
        s,
        token,
        "/api/v1/templates",
        json!({"name": "three-tries", "spec": {"maxCheckAttempts": 3}}),
    )
    .await;
    post(
        s,
        token,
        "/api/v1/hosts",
        json!({"name": "core", "spec": {}}),
    )
    .await;
    post(
        s,
        token,
        "/api/v1/hosts",
        json!({"name": "edge", "labels": {"site": "north"}, "spec": {"parents": ["core"]}}),
    )
    .await;
    post(s, token, "/api/v1/services", json!({"name": "http", "host": "edge", "labels": {"tier": "web"}, "spec": {"templates": ["three-tries"]}})).await;
    post(
        s,
        token,
        "/api/v1/services",
        json!({"name": "disk", "host": "edge", "spec": {}}),
    )
    .await;
}

#[tokio::test]
async fn soft_to_hard_recovery_and_events() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    assert!(
        state_of(s, &a.token, "/api/v1/services", "http")
            .await
            .is_null(),
        "PEND: no state before the first result"
    );

    let ok = results(s, &a.token, json!([{"host": "edge", "service": "http", "state": "OK", "output": "HTTP OK | time=0.1s"}])).await;
    assert_eq!(ok, json!({"accepted": 1, "rejected": []}));
    let st = state_of(s, &a.token, "/api/v1/services", "http").await;
    assert_eq!(
        (
            st["state"].clone(),
            st["stateType"].clone(),
            st["perfdata"].clone()
        ),
        (json!(0), json!("hard"), json!("time=0.1s"))
    );

    // maxCheckAttempts 3 from the template: soft 1, soft 2, hard 3.
    for (attempt, kind) in [(1, "soft"), (2, "soft"), (3, "hard")] {
        results(s, &a.token, json!([{"host": "edge", "service": "http", "state": 2, "output": "HTTP CRITICAL\nlong line"}])).await;
        let st = state_of(s, &a.token, "/api/v1/services", "http").await;
        assert_eq!(st["state"], 2);
        assert_eq!(st["stateType"], kind);
        assert_eq!(st["attempt"], attempt);
        assert_eq!(st["longOutput"], "long line");
    }
    // No attempts set: a passive result is hard at once.
    results(
        s,
        &a.token,
        json!([{"host": "edge", "service": "disk", "state": "WARN", "output": "DISK WARNING"}]),
    )
    .await;
    let st = state_of(s, &a.token, "/api/v1/services", "disk").await;
    assert_eq!(
        (
            st["state"].clone(),
            st["stateType"].clone(),
            st["attempt"].clone()
        ),
        (json!(1), json!("hard"), json!(1))
    );

    results(
        s,
        &a.token,
        json!([{"host": "edge", "service": "http", "state": "OK", "output": "HTTP OK"}]),
    )
    .await;
    let st = state_of(s, &a.token, "/api/v1/services", "http").await;
    assert_eq!(
        (st["state"].clone(), st["stateType"].clone()),
        (json!(0), json!("hard"))
    );

    let ev = changes(s, &a.token).await;
    let http: Vec<&Value> = ev
        .iter()
        .filter(|e| e["payload"]["object"] == "http")
        .collect();
    // PENDING→OK, OK→CRITICAL soft, entering hard, CRITICAL→OK.
    assert_eq!(http.len(), 4, "{http:?}");
    assert_eq!(http[0]["payload"]["from"], "PENDING");
    let soft = &http[1];
    assert_eq!(soft["severity"], "critical");
    assert_eq!(soft["payload"]["stateType"], "soft");
    assert_eq!(
        (
            soft["payload"]["fromState"].clone(),
            soft["payload"]["toState"].clone()
        ),
        (json!(0), json!(2))
    );
    assert_eq!(
        (
            soft["payload"]["from"].clone(),
            soft["payload"]["to"].clone()
        ),
        (json!("OK"), json!("CRITICAL"))
    );
    assert_eq!(soft["payload"]["host"], "edge");
    assert_eq!(soft["payload"]["kind"], "service");
    assert_eq!(soft["payload"]["labels"]["tier"], "web");
    assert!(soft["objectId"].is_string());
    assert_eq!(http[2]["payload"]["stateType"], "hard");
    assert_eq!(http[2]["payload"]["attempt"], 3);
    assert_eq!(http[3]["severity"], "ok");
}

#[tokio::test]
async fn hosts_down_and_unreachable_through_parents() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    // DOWN is down (state 1, critical), not WARNING.
    results(
        s,
        &a.token,
        json!([{"host": "core", "state": "DOWN", "output": "PING CRITICAL"}]),
    )
    .await;
    let core = state_of(s, &a.token, "/api/v1/hosts", "core").await;
    assert_eq!(
        (core["state"].clone(), core["stateType"].clone()),
        (json!(1), json!("hard"))
    );
    // Its child, down too, is UNREACHABLE (warning).
    results(
        s,
        &a.token,
        json!([{"host": "edge", "state": 2, "output": "timeout"}]),
    )
    .await;
    assert_eq!(
        state_of(s, &a.token, "/api/v1/hosts", "edge").await["state"],
        2
    );
    let ev = changes(s, &a.token).await;
    assert_eq!(ev[0]["severity"], "critical");
    assert_eq!(ev[1]["payload"]["to"], "UNREACHABLE");
    assert_eq!(ev[1]["severity"], "warning");
    // Once the parent is up, the child's DOWN is plain DOWN.
    results(s, &a.token, json!([{"host": "core", "state": 0, "output": "PING OK"}, {"host": "edge", "state": "DOWN", "output": "down"}])).await;
    assert_eq!(
        state_of(s, &a.token, "/api/v1/hosts", "edge").await["state"],
        1
    );
}

#[tokio::test]
async fn rejects_unknowns_and_refuses_malformed_batches_whole() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    let r = results(
        s,
        &a.token,
        json!([
            {"host": "edge", "service": "disk", "state": 0, "output": "ok"},
            {"host": "ghost", "state": 0, "output": "?"},
            {"host": "edge", "service": "nope", "state": 0, "output": "?"},
        ]),
    )
    .await;
    assert_eq!(
        r,
        json!({"accepted": 1, "rejected": ["ghost", "edge/nope"]})
    );
    let bad = call(s, &a.token, Method::POST, "/api/v1/results")
        .json(&json!({"results": [{"host": "edge", "service": "disk", "state": 2, "output": "x"}, {"host": "edge", "state": "PURPLE", "output": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_problem(bad, 422, "svc:validation/body").await;
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "disk").await["state"],
        0,
        "nothing of the refused batch applied"
    );
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let res = call(s, &viewer, Method::POST, "/api/v1/results")
        .json(&json!({"results": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "objects:write"
    );
    // Another tenant's results never touch these objects.
    let (_, other) = second_tenant(s, &a.token, "res-iso").await;
    let r = results(
        s,
        &other,
        json!([{"host": "edge", "service": "disk", "state": 2, "output": "x"}]),
    )
    .await;
    assert_eq!(r["rejected"], json!(["edge/disk"]));
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "disk").await["state"],
        0
    );
    let theirs = json(
        call(s, &other, Method::GET, "/api/v1/problems")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(theirs["items"].as_array().unwrap().is_empty());
}

/// `Prefer: respond-async` (RFC 7240): answered once queued, with `Preference-Applied`; the
/// results still apply. Without it, or with other preferences, the answer waits for the commit.
#[tokio::test]
async fn respond_async_answers_once_queued_and_the_results_still_apply() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    let submit = |prefer: &'static str, state: u8| {
        call(s, &a.token, Method::POST, "/api/v1/results")
            .header("Prefer", prefer)
            .json(&json!({"results": [
                {"host": "edge", "service": "disk", "state": state, "output": "x"},
                {"host": "ghost", "state": 0, "output": "?"},
            ]}))
            .send()
    };
    let res = submit("wait=5, Respond-Async; x=1", 2).await.unwrap();
    assert_eq!(res.status(), 202);
    assert_eq!(res.headers()["preference-applied"], "respond-async");
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"accepted": 1, "rejected": ["ghost"]})
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state_of(s, &a.token, "/api/v1/services", "disk").await["state"] != 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "a queued result was never applied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let res = submit("return=minimal, respond-asynchronously", 0)
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    assert!(!res.headers().contains_key("preference-applied"));
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "disk").await["state"],
        0,
        "without respond-async the answer comes once applied"
    );
}

#[tokio::test]
async fn problems_order_live_state_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let s = Server::start_in(&data, no_seed());
    setup(&s, &token).await;
    results(
        &s,
        &token,
        json!([
            {"host": "edge", "service": "disk", "state": "WARNING", "output": "w"},
            {"host": "core", "state": "UP", "output": "up"},
            {"host": "edge", "state": "UP", "output": "up"},
        ]),
    )
    .await;
    for _ in 0..3 {
        results(
            &s,
            &token,
            json!([{"host": "edge", "service": "http", "state": "CRITICAL", "output": "c"}]),
        )
        .await;
    }
    let p = json(
        call(&s, &token, Method::GET, "/api/v1/problems")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let names: Vec<&str> = p["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["object"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["http", "disk"], "worst first");
    assert_eq!(p["items"][0]["state"]["state"], 2);
    assert!(
        p["items"][0]["hostName"].is_string(),
        "services name their host"
    );
    assert_eq!(
        json(
            call(
                &s,
                &token,
                Method::GET,
                "/api/v1/problems?includeHandled=true"
            )
            .send()
            .await
            .unwrap(),
            200
        )
        .await["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let plain = json(
        call(&s, &token, Method::GET, "/api/v1/services?withState=false")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(
        plain["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o.get("state").is_none())
    );

    assert!(s.stop().success());
    let s = Server::start_in(&data, no_seed());
    let st = state_of(&s, &token, "/api/v1/services", "http").await;
    assert_eq!(
        (
            st["state"].clone(),
            st["stateType"].clone(),
            st["attempt"].clone()
        ),
        (json!(2), json!("hard"), json!(3)),
        "state survives a restart"
    );
    // Deleting an object takes its state with it.
    let hosts = json(
        call(&s, &token, Method::GET, "/api/v1/hosts?q=edge")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let edge = hosts["items"][0]["id"].as_str().unwrap();
    assert_eq!(
        call(
            &s,
            &token,
            Method::DELETE,
            &format!("/api/v1/objects/{edge}")
        )
        .send()
        .await
        .unwrap()
        .status(),
        204
    );
    let p = json(
        call(&s, &token, Method::GET, "/api/v1/problems")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(p["items"].as_array().unwrap().is_empty(), "{p}");
}

async fn events_of(s: &Server, token: &str, types: &str) -> Vec<Value> {
    let v = json(
        call(
            s,
            token,
            Method::GET,
            &format!("/api/v1/events?types={types}&limit=1000"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    v["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn flapping_starts_and_ends_once() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    post(
        s,
        &a.token,
        "/api/v1/services",
        json!({"name": "calm", "host": "edge", "spec": {"enableFlapDetection": false}}),
    )
    .await;
    for i in 0..12 {
        let state = if i % 2 == 0 { "OK" } else { "CRITICAL" };
        results(s, &a.token, json!([{"host": "edge", "service": "disk", "state": state, "output": "x"}, {"host": "edge", "service": "calm", "state": state, "output": "x"}])).await;
        if i == 2 {
            let st = state_of(s, &a.token, "/api/v1/services", "disk").await;
            assert_eq!(st["flapping"], false, "two changes are no flapping: {st}");
        }
    }
    let st = state_of(s, &a.token, "/api/v1/services", "disk").await;
    assert_eq!(st["flapping"], true, "{st}");
    assert!(st["flapPct"].as_f64().unwrap() >= 50.0);
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "calm").await["flapping"],
        false,
        "detection disabled"
    );
    for _ in 0..25 {
        results(
            s,
            &a.token,
            json!([{"host": "edge", "service": "disk", "state": "OK", "output": "x"}]),
        )
        .await;
    }
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "disk").await["flapping"],
        false
    );
    let starts = events_of(s, &a.token, "flapping_start").await;
    let ends = events_of(s, &a.token, "flapping_end").await;
    assert_eq!((starts.len(), ends.len()), (1, 1));
    assert_eq!(starts[0]["payload"]["object"], "disk");
    assert_eq!(starts[0]["severity"], "info");
    assert!(starts[0]["payload"]["flapPct"].as_f64().unwrap() >= 50.0);
    assert!(ends[0]["payload"]["flapPct"].as_f64().unwrap() < 25.0);
}

#[tokio::test]
async fn a_silent_object_goes_stale() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    post(s, &a.token, "/api/v1/services", json!({"name": "cron", "host": "edge", "spec": {"stalenessAfter": 1, "stalenessText": "no result from the backup job", "maxCheckAttempts": 1}})).await;
    post(
        s,
        &a.token,
        "/api/v1/services",
        json!({"name": "cron3", "host": "edge", "spec": {"stalenessAfter": "1s"}}),
    )
    .await;
    results(s, &a.token, json!([{"host": "edge", "service": "cron", "state": "OK", "output": "backup done"}, {"host": "edge", "service": "cron3", "state": "OK", "output": "ok"}])).await;
    // The two go stale independently (each its own transition): wait for both.
    let (mut st, mut other) = (Value::Null, Value::Null);
    for _ in 0..100 {
        st = state_of(s, &a.token, "/api/v1/services", "cron").await;
        other = state_of(s, &a.token, "/api/v1/services", "cron3").await;
        if st["state"] == 3 && other["state"] == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(st["state"], 3, "{st}");
    assert_eq!(st["output"], "no result from the backup job");
    assert_eq!(st["stateType"], "hard");
    assert_eq!(
        (
            other["state"].clone(),
            other["stateType"].clone(),
            other["output"].clone()
        ),
        (
            json!(3),
            json!("soft"),
            json!("UNKNOWN - check result is stale (freshness threshold exceeded)")
        ),
        "not forced hard"
    );
    let changes = events_of(s, &a.token, "state_change").await;
    assert!(
        changes
            .iter()
            .any(|e| e["payload"]["object"] == "cron" && e["payload"]["to"] == "UNKNOWN")
    );
    // A fresh result brings it back.
    results(
        s,
        &a.token,
        json!([{"host": "edge", "service": "cron", "state": 0, "output": "backup done"}]),
    )
    .await;
    assert_eq!(
        state_of(s, &a.token, "/api/v1/services", "cron").await["state"],
        0
    );
}

#[tokio::test]
async fn performance_data_becomes_queryable_series() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    setup(s, &a.token).await;
    for rta in [1.0, 2.0, 6.0] {
        results(s, &a.token, json!([{"host": "edge", "service": "disk", "state": 0, "output": format!("OK | rta={rta}ms;200;500;0 'free space'=40%")}])).await;
    }
    let services = json(
        call(s, &a.token, Method::GET, "/api/v1/services")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let disk = services["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "disk")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The single object carries its live state and host's name, as the lists do.
    let one = call(s, &a.token, Method::GET, &format!("/api/v1/objects/{disk}"))
        .send()
        .await
        .unwrap();
    assert_eq!(one.headers()["etag"], "\"1\"");
    let one = json(one, 200).await;
    assert_eq!(one["state"]["state"], 0, "{one}");
    assert_eq!(one["state"]["output"], "OK");
    assert_eq!(one["hostName"], "edge");
    assert_eq!(one["name"], "disk");
    let series = json(
        call(
            s,
            &a.token,
            Method::GET,
            &format!("/api/v1/objects/{disk}/metrics"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let names: Vec<&str> = series["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["free space", "rta"], "{series}");
    assert_eq!(series["items"][1]["unit"], "ms");
    assert_eq!(series["items"][1]["lastValue"], 6.0);
    let now = jiff::Timestamp::now();
    let hour_ago = (now - jiff::SignedDuration::from_hours(1)).to_string();
    let soon = (now + jiff::SignedDuration::from_mins(1)).to_string();
    let query = |body: Value| {
        call(s, &a.token, Method::POST, "/api/v1/metrics/query")
            .json(&body)
            .send()
    };
    let raw = json(
        query(json!({"objectId": disk, "metric": "rta", "from": hour_ago, "to": soon}))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(raw["resolution"], "raw", "{raw}");
    assert_eq!(raw["stepSeconds"], 0);
    let values: Vec<f64> = raw["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["v"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [1.0, 2.0, 6.0], "{raw}");
    let max = json(query(json!({"objectId": disk, "metric": "rta", "from": hour_ago, "to": soon, "stepSeconds": 3600, "agg": "max"})).await.unwrap(), 200).await;
    assert_eq!(max["resolution"], "1h", "{max}");
    assert_eq!(
        max["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["v"].as_f64().unwrap())
            .fold(0.0, f64::max),
        6.0
    );
    let five = json(query(json!({"objectId": disk, "metric": "rta", "from": hour_ago, "to": soon, "stepSeconds": 300})).await.unwrap(), 200).await;
    assert_eq!(five["resolution"], "5m", "{five}");
    let total: f64 = five["points"].as_array().unwrap().len() as f64;
    assert!(
        (1.0..=2.0).contains(&total),
        "3 samples within a minute fall in one or two buckets: {five}"
    );
    let year_ago = (now - jiff::SignedDuration::from_hours(24 * 500)).to_string();
    let old = json(
        query(json!({"objectId": disk, "metric": "rta", "from": year_ago, "to": soon}))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        old["resolution"], "1h",
        "beyond 400 days only hourly aggregates: {old}"
    );
    assert_problem(
        query(json!({"objectId": disk, "metric": "rta", "from": soon, "to": hour_ago}))
            .await
            .unwrap(),
        422,
        "svc:validation/window",
    )
    .await;
    assert_problem(query(json!({"objectId": disk, "metric": "rta", "from": hour_ago, "to": soon, "agg": "median"})).await.unwrap(), 422, "svc:validation/agg").await;
    assert_problem(
        query(json!({"objectId": disk, "from": hour_ago, "to": soon}))
            .await
            .unwrap(),
        422,
        "svc:validation/metric",
    )
    .await;
    assert_problem(
        query(json!({"objectId": disk, "metric": "nope", "from": hour_ago, "to": soon}))
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        query(
            json!({"objectId": uuid::Uuid::nil(), "metric": "rta", "from": hour_ago, "to": soon}),
        )
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    // Permission and tenant isolation.
    json(
        call(s, &a.token, Method::POST, "/api/v1/roles")
            .json(&json!({"name": "no-metrics", "permissions": ["objects:read"]}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let (blind, _) = mint(
        s,
        &a.token,
        json!({"name": "blind", "roles": ["no-metrics"]}),
    )
    .await;
    let res = call(
        s,
        &blind,
        Method::GET,
        &format!("/api/v1/objects/{disk}/metrics"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let (_, other) = second_tenant(s, &a.token, "other").await;
    let res = call(
        s,
        &other,
        Method::GET,
        &format!("/api/v1/objects/{disk}/metrics"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 404, "svc:not-found").await;
    // The pipeline and the metrics store report in health and readiness.
    let health = json(s.get("/api/v1/system/health").await, 200).await;
    assert_eq!(health["pipeline"]["queued"], 0, "{health}");
    assert_eq!(health["pipeline"]["capacity"], 8192);
    assert!(health["pipeline"]["applied"].as_u64().unwrap() >= 3);
    assert_eq!(health["queues"]["results"], 0);
    assert_eq!(health["tsdb"]["series"], 2);
    assert_eq!(health["tsdb"]["maxSeries"], 100000);
    let ready = json(s.get("/readyz").await, 200).await;
    let pipeline = ready["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "results-pipeline")
        .unwrap()
        .clone();
    assert_eq!(
        pipeline,
        json!({"name": "results-pipeline", "ok": true, "info": "0 queued"})
    );
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("np_queue_depth{queue=\"results\"} 0"),
        "{metrics}"
    );
    for kind in ["decode", "encode", "internal"] {
        assert!(
            metrics.contains(&format!("np_faults{{kind=\"{kind}\"}} 0")),
            "a healthy server shows no {kind} fault: {metrics}"
        );
    }
}
