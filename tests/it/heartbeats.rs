//! Heartbeats: upsert, beat, list, delete; a missed beat is reported once, the recovery once.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn missed(s: &Server, token: &str) -> Vec<Value> {
    let v = json(
        call(
            s,
            token,
            Method::GET,
            "/api/v1/events?types=heartbeat_missed",
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
async fn a_missed_heartbeat_is_reported_once_and_so_is_its_recovery() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let post = |body: Value| {
        call(s, &a.token, Method::POST, "/api/v1/heartbeats")
            .json(&body)
            .send()
    };
    let h = json(post(json!({"name": "nightly-backup", "expectEvery": 1, "labels": {"site": "north"}, "severity": "critical"})).await.unwrap(), 201).await;
    assert_eq!(h["expectEvery"], "1s");
    assert_eq!(h["grace"], "0s");
    assert_eq!(h["missing"], false);
    assert_uuid_v7(h["id"].as_str().unwrap());
    assert_problem(
        post(json!({"name": "x"})).await.unwrap(),
        422,
        "svc:validation/heartbeat",
    )
    .await;
    assert_problem(
        post(json!({"name": "x", "expectEvery": "1m", "severity": "loud"}))
            .await
            .unwrap(),
        422,
        "svc:validation/heartbeat",
    )
    .await;
    // Upsert keeps the identity.
    let again = json(post(json!({"name": "nightly-backup", "expectEvery": "1s", "grace": 0, "severity": "critical", "labels": {"site": "north"}})).await.unwrap(), 201).await;
    assert_eq!(again["id"], h["id"]);
    assert_eq!(again["version"], 2);

    // The sweep wakes when the heartbeat falls due; the miss is reported once.
    let mut events = Vec::new();
    for _ in 0..120 {
        events = missed(s, &a.token).await;
        if !events.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    // Reported when it fell due (1 s after the definition), not at a later tick of a sweep.
    let due: jiff::Timestamp = h["createdAt"].as_str().unwrap().parse().unwrap();
    let reported: jiff::Timestamp = e["ts"].as_str().unwrap().parse().unwrap();
    let late = reported.duration_since(due) - jiff::SignedDuration::from_secs(1);
    assert!(
        late < jiff::SignedDuration::from_millis(900),
        "reported {late:?} after it fell due"
    );
    assert_eq!(e["severity"], "critical");
    assert_eq!(e["sourceId"], h["id"]);
    assert_eq!(e["payload"]["heartbeat"], "nightly-backup");
    assert_eq!(e["payload"]["labels"]["site"], "north");
    assert!(e["payload"].get("resolve").is_none());
    let list = json(
        call(s, &a.token, Method::GET, "/api/v1/heartbeats")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(list["items"][0]["missing"], true);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        missed(s, &a.token).await.len(),
        1,
        "reported once, not at every sweep"
    );

    // A beat (GET works too, for cron) recovers it, reported once with severity ok.
    let res = call(
        s,
        &a.token,
        Method::GET,
        "/api/v1/heartbeats/nightly-backup/beat",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(json(res, 200).await, json!({"status": "ok"}));
    let events = missed(s, &a.token).await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["severity"], "ok");
    assert_eq!(events[0]["payload"]["resolve"], true);
    json(
        call(
            s,
            &a.token,
            Method::POST,
            "/api/v1/heartbeats/nightly-backup/beat",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        missed(s, &a.token).await.len(),
        2,
        "a beat while healthy reports nothing"
    );
    let list = json(
        call(s, &a.token, Method::GET, "/api/v1/heartbeats")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(list["items"][0]["missing"], false);
    assert!(list["items"][0]["lastBeat"].is_string());

    assert_problem(
        call(s, &a.token, Method::POST, "/api/v1/heartbeats/nope/beat")
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_eq!(
        call(
            s,
            &a.token,
            Method::DELETE,
            "/api/v1/heartbeats/nightly-backup"
        )
        .send()
        .await
        .unwrap()
        .status(),
        204
    );
    assert_problem(
        call(
            s,
            &a.token,
            Method::DELETE,
            "/api/v1/heartbeats/nightly-backup",
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
}

#[tokio::test]
async fn heartbeats_are_tenant_isolated_and_need_permissions() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let h = json(
        call(s, &a.token, Method::POST, "/api/v1/heartbeats")
            .json(&json!({"name": "hb", "expectEvery": "1h"}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let (_, other) = second_tenant(s, &a.token, "hb-iso").await;
    assert_isolated(
        s,
        &other,
        &[
            (Method::POST, "/api/v1/heartbeats/hb/beat".into()),
            (Method::DELETE, "/api/v1/heartbeats/hb".into()),
        ],
        &["/api/v1/heartbeats"],
        h["id"].as_str().unwrap(),
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(
        call(s, &viewer, Method::GET, "/api/v1/heartbeats")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let res = call(s, &viewer, Method::POST, "/api/v1/heartbeats/hb/beat")
        .send()
        .await
        .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "objects:write"
    );
}
