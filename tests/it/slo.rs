//! Service-level objectives (issue 74, part 4): an `slos` document on an object, a business
//! service or two of an object's counters; its budget and burn; the workbook's pairs opening
//! and resolving alerts as the clock the test moves runs through an outage; and who may see
//! what.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The alerts (any status) whose dedup key starts with `slo/<slo>/`.
async fn slo_alerts(s: &Server, token: &str, slo: &str) -> Vec<Value> {
    let all = get(s, token, "/api/v1/alerts?limit=500").await;
    all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            a["dedupKey"]
                .as_str()
                .is_some_and(|k| k.starts_with(&format!("slo/{slo}/")))
        })
        .cloned()
        .collect()
}

/// The open ones' dedup keys, sorted, once `done` accepts them (20 s at most).
async fn open_slo_alerts(
    s: &Server,
    token: &str,
    slo: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut open: Vec<String> = slo_alerts(s, token, slo)
            .await
            .iter()
            .filter(|a| a["status"] != "resolved")
            .map(|a| a["dedupKey"].as_str().unwrap().to_string())
            .collect();
        open.sort();
        if done(&open) {
            return open;
        }
        assert!(Instant::now() < deadline, "{slo}: still open {open:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Posts a host's result and waits until it is its live state: a result is answered once
/// queued, and the clock must not move on before it applies.
async fn host(s: &Server, token: &str, name: &str, state: &str, output: &str) {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": name, "state": state, "output": output}]}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
    let text = output.split('|').next().unwrap().trim();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let hosts = get(s, token, &format!("/api/v1/hosts?q={name}")).await;
        if hosts["items"][0]["state"]["output"] == text {
            return;
        }
        assert!(Instant::now() < deadline, "{name} not {output}: {hosts}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Posts the api host's counters and waits until both are stored: a result is answered once
/// queued, and an objective on counters reads what is stored.
async fn counters(s: &Server, token: &str, good: u64, total: u64) {
    host(
        s,
        token,
        "api",
        "UP",
        &format!("OK | good={good}c total={total}c"),
    )
    .await;
    let hosts = get(s, token, "/api/v1/hosts?q=api").await;
    let id = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let series = get(s, token, &format!("/api/v1/objects/{id}/metrics")).await;
        let last = |name: &str| {
            series["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == name)
                .and_then(|m| m["lastValue"].as_f64())
        };
        if last("good") == Some(good as f64) && last("total") == Some(total as f64) {
            return;
        }
        assert!(Instant::now() < deadline, "counters not stored: {series}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create(s: &Server, token: &str, slo: Value) {
    json(send(s, token, Method::POST, "/api/v1/slos", slo).await, 201).await;
}

async fn status(s: &Server, token: &str, slo: &str) -> Value {
    get(s, token, &format!("/api/v1/slos/{slo}/status")).await
}

#[tokio::test]
async fn objectives_burn_their_budget_and_alert_by_the_workbooks_pairs() {
    let clocked = Clocked::new();
    let token = clocked.token.clone();
    let server = clocked.start();
    let s = &server;
    let token = token.as_str();
    create_all(
        s,
        token,
        vec![
            ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
            ("/api/v1/hosts", json!({"name": "api", "spec": {}})),
        ],
    )
    .await;

    // What an objective must be.
    for (body, code) in [
        (
            json!({"name": "x", "target": 100, "object": "plc"}),
            "svc:validation/target",
        ),
        (
            json!({"name": "x", "target": 99.9}),
            "svc:validation/subject",
        ),
        (
            json!({"name": "x", "target": 99.9, "object": "plc", "businessService": "line"}),
            "svc:validation/subject",
        ),
        (
            json!({"name": "x", "target": 99.9, "object": "plc", "window": "30x"}),
            "svc:validation/window",
        ),
        (
            json!({"name": "x", "target": 99.9, "object": "plc", "window": "2h"}),
            "svc:validation/burnAlerts",
        ),
        (
            json!({"name": "x", "target": 99.9, "businessService": "line", "metric": {"good": "g", "total": "t"}}),
            "svc:validation/metric",
        ),
        (
            json!({"name": "x", "target": 99.9, "object": "plc", "burnAlerts": [{"long": "5m", "short": "1h", "burnRate": 2, "severity": "page"}]}),
            "svc:validation/burnAlerts",
        ),
        (
            json!({"name": "x", "target": 99.9, "object": "plc", "run": "x"}),
            "svc:validation",
        ),
    ] {
        let res = send(s, token, Method::POST, "/api/v1/slos", body.clone()).await;
        assert_eq!(res.status(), 422, "{body}");
        let p: Value = res.json().await.unwrap();
        assert!(p["code"].as_str().unwrap().starts_with(code), "{body}: {p}");
    }
    create(
        s,
        token,
        json!({"name": "plc-up", "target": 99.9, "window": "30d", "object": "plc",
                "labels": {"team": "ops"}}),
    )
    .await;
    create(
        s,
        token,
        json!({"name": "api-ok", "target": 99, "window": "7d", "object": "api",
                "metric": {"good": "good", "total": "total"},
                "burnAlerts": [{"long": "1h", "short": "5m", "burnRate": 10, "severity": "page"}]}),
    )
    .await;

    // An hour up: nothing spent, nothing burns.
    host(s, token, "plc", "UP", "running").await;
    advance(s, token, "1h").await;
    let st = status(s, token, "plc-up").await;
    assert_eq!(st["source"], "availability", "{st}");
    assert_eq!(st["sli"], 100.0, "{st}");
    assert_eq!(st["budgetSpent"], 0.0, "{st}");
    assert_eq!(st["budgetLeft"], 1.0, "{st}");
    let burn = st["burn"].as_array().unwrap();
    assert_eq!(burn.len(), 3, "the workbook's pairs: {st}");
    assert_eq!(burn[0]["long"], "1h0m0s");
    assert_eq!(burn[0]["burnRate"], 14.4);
    assert!(burn.iter().all(|b| b["firing"] == false), "{st}");
    assert!(slo_alerts(s, token, "plc-up").await.is_empty());

    // Down for ten minutes: 10 of 70 minutes at 99.9 % burns every window far past its rate.
    host(s, token, "plc", "DOWN", "stopped").await;
    advance(s, token, "10m").await;
    let keys = [
        "slo/plc-up/1h0m0s/5m0s",
        "slo/plc-up/6h0m0s/30m0s",
        "slo/plc-up/72h0m0s/6h0m0s",
    ];
    open_slo_alerts(s, token, "plc-up", |open| open == keys).await;
    let st = status(s, token, "plc-up").await;
    assert!(
        st["burn"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["firing"] == true),
        "{st}"
    );
    assert!(st["budgetSpent"].as_f64().unwrap() > 1.0, "overspent: {st}");
    let spent = st["budgetSpent"].as_f64().unwrap();
    assert!(
        (st["budgetLeft"].as_f64().unwrap() - (1.0 - spent)).abs() < 1e-3,
        "{st}"
    );
    let alerts = slo_alerts(s, token, "plc-up").await;
    let page = alerts.iter().find(|a| a["dedupKey"] == keys[0]).unwrap();
    assert_eq!(page["severity"], "critical", "{page}");
    assert_eq!(page["labels"]["slo"], "plc-up", "{page}");
    assert_eq!(page["labels"]["burn"], "page", "{page}");
    assert_eq!(page["labels"]["team"], "ops", "{page}");
    assert!(page["title"].as_str().unwrap().contains("plc-up"), "{page}");
    let ticket = alerts.iter().find(|a| a["dedupKey"] == keys[2]).unwrap();
    assert_eq!(ticket["severity"], "warning", "{ticket}");
    // The objectives page shows the budget overspent and the pairs burning; names escaped.
    create(
        s,
        token,
        json!({"name": "x<i>y", "target": 90, "object": "plc"}),
    )
    .await;
    let res = call(s, token, Method::GET, "/slos").send().await.unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    let row = &page[page.find(">plc-up</a>").expect("the objective's row")..];
    let row = &row[..row.find("</section>").unwrap()];
    assert!(
        row.contains("99.900 % over 30d") && row.contains("overspent"),
        "{row}"
    );
    assert!(
        row.contains("x over 1h0m0s") && row.contains("(alert at 14.4x)"),
        "{row}"
    );
    assert!(
        page.contains("x&lt;i&gt;y") && !page.contains("x<i>y"),
        "escaped: {page}"
    );
    let res = call(s, token, Method::DELETE, "/api/v1/slos/x%3Ci%3Ey")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);

    // Still down a minute later: the same alerts, none opened twice.
    advance(s, token, "1m").await;
    open_slo_alerts(s, token, "plc-up", |open| open == keys).await;
    assert_eq!(slo_alerts(s, token, "plc-up").await.len(), 3);

    // Up again: once the short windows hold no down time the page pairs resolve; the ticket's
    // six hours still burn.
    host(s, token, "plc", "UP", "running").await;
    advance(s, token, "31m").await;
    open_slo_alerts(s, token, "plc-up", |open| open == [keys[2]]).await;
    let st = status(s, token, "plc-up").await;
    let firing: Vec<bool> = st["burn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["firing"].as_bool().unwrap())
        .collect();
    assert_eq!(firing, [false, false, true], "{st}");

    // Counters: a quarter of the requests failed burns a 99 % objective at 25x; a counter that
    // restarted counts from zero, and then the errors are too few to page.
    counters(s, token, 0, 0).await;
    advance(s, token, "1m").await;
    counters(s, token, 100, 100).await;
    advance(s, token, "1m").await;
    counters(s, token, 150, 200).await;
    advance(s, token, "1m").await;
    open_slo_alerts(s, token, "api-ok", |open| {
        open == ["slo/api-ok/1h0m0s/5m0s"]
    })
    .await;
    let st = status(s, token, "api-ok").await;
    assert_eq!(st["source"], "metric", "{st}");
    assert_eq!(st["sli"], 75.0, "{st}");
    assert_eq!(st["budgetSpent"], 25.0, "{st}");
    assert_eq!(st["burn"][0]["longBurn"], 25.0, "{st}");
    counters(s, token, 10, 10).await;
    advance(s, token, "1m").await;
    counters(s, token, 4010, 4010).await;
    advance(s, token, "1m").await;
    open_slo_alerts(s, token, "api-ok", |open| open.is_empty()).await;
    let st = status(s, token, "api-ok").await;
    // 4160 good of 4210: 50 failed, 1.19 % over the 1 % allowed.
    assert_eq!(st["burn"][0]["longBurn"], 1.188, "{st}");

    // An objective on a business service reads what its SLA reads.
    let plc = get(s, token, "/api/v1/hosts").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "plc")
        .unwrap()["id"]
        .clone();
    json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/business-services",
            json!({"name": "line", "objectId": plc}),
        )
        .await,
        201,
    )
    .await;
    create(
        s,
        token,
        json!({"name": "line", "target": 99.9, "businessService": "line"}),
    )
    .await;
    let sla = get(s, token, "/api/v1/business-services/line/sla").await;
    let st = status(s, token, "line").await;
    assert_eq!(
        st["sli"].as_f64().unwrap().round(),
        sla["availability"].as_f64().unwrap().round(),
        "{st} {sla}"
    );
    // The two reads are a moment apart on a clock that runs: the same pairs firing, the
    // burns within a thousandth.
    for (a, b) in st["burn"]
        .as_array()
        .unwrap()
        .iter()
        .zip(sla["burn"].as_array().unwrap())
    {
        assert_eq!(a["firing"], b["firing"], "{st} {sla}");
        for w in ["longBurn", "shortBurn"] {
            let (x, y) = (a[w].as_f64().unwrap(), b[w].as_f64().unwrap());
            assert!((x - y).abs() <= 1e-3 * y.max(1.0), "{st} {sla}");
        }
    }

    // Another tenant sees none of it.
    let (_, other) = second_tenant(s, token, "other").await;
    assert_problem(
        call(s, &other, Method::GET, "/api/v1/slos/plc-up/status")
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        call(s, token, Method::GET, "/api/v1/slos/nowhere/status")
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;

    // An objective deleted takes its alerts with it.
    let res = call(s, token, Method::DELETE, "/api/v1/slos/plc-up")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    open_slo_alerts(s, token, "plc-up", |open| open.is_empty()).await;

    // An alert of an objective that went while no watcher saw it go (deleted while the server
    // was down, or while another process led) is resolved by the next start's first round.
    let ghost = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "left over", "dedupKey": "slo/ghost/1h0m0s/5m0s"}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(ghost["status"], "open", "{ghost}");
    server.stop();
    let server = clocked.start();
    let s = &server;
    open_slo_alerts(s, token, "ghost", |open| open.is_empty()).await;
    // The objectives still here keep theirs: api-ok's pair is not firing, line's ticket is.
    open_slo_alerts(s, token, "line", |open| open == ["slo/line/72h0m0s/6h0m0s"]).await;
}
