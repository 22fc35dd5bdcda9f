//! Reports: rendered from real state changes, alerts and users; run into the archive with its
//! retention; mailed through a real SMTP server; PDF refused with 501.

use crate::notify::SmtpServer;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn result(s: &Server, token: &str, service: &str, state: &str) {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "plc", "service": service, "state": state, "output": state}]}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 202);
}

async fn render(s: &Server, token: &str, name: &str, format: &str) -> reqwest::Response {
    call(
        s,
        token,
        Method::POST,
        &format!("/api/v1/reports/{name}:render?format={format}"),
    )
    .send()
    .await
    .unwrap()
}

/// Renders `name` as JSON until `done` holds for it (state changes reach the event store
/// asynchronously).
async fn table_until(s: &Server, token: &str, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let t = json(render(s, token, name, "json").await, 200).await;
        if done(&t) {
            return t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "report {name} never got there: {t}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn row<'a>(t: &'a Value, name: &str) -> &'a Value {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {t}"))
}

#[tokio::test]
async fn reports_render_from_real_data_and_pdf_is_refused() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/hosts", json!({"name": "plc", "labels": {"site": "north"}, "spec": {}})),
            ("/api/v1/services", json!({"name": "pump", "host": "plc", "labels": {"site": "north"}, "spec": {"maxCheckAttempts": 1}})),
            ("/api/v1/services", json!({"name": "valve", "host": "plc", "labels": {"site": "north"}, "spec": {"maxCheckAttempts": 1}})),
            ("/api/v1/services", json!({"name": "other", "host": "plc", "labels": {"site": "south"}, "spec": {}})),
            ("/api/v1/services", json!({"name": "tank", "host": "plc", "labels": {"site": "north"}, "spec": {"maxCheckAttempts": 2}})),
            ("/api/v1/reports", json!({"name": "north", "type": "availability", "params": {"selector": "site=north", "windowDays": 7, "target": 100}})),
            ("/api/v1/reports", json!({"name": "north-sla", "type": "sla", "params": {"selector": "site=north", "target": 99.5}})),
            ("/api/v1/reports", json!({"name": "alarms", "type": "alert-stats"})),
            ("/api/v1/reports", json!({"name": "people", "type": "audit"})),
            ("/api/v1/contacts", json!({"name": "ada", "email": "ada@example.com"})),
            ("/api/v1/schedules", json!({"name": "night", "timeZone": "UTC", "layers": [{"name": "all", "unit": "daily", "anchor": "2026-01-01T00:00:00Z", "participants": ["ada"]}]})),
            ("/api/v1/schedules", json!({"name": "empty", "timeZone": "UTC", "layers": []})),
            ("/api/v1/reports", json!({"name": "rota", "type": "oncall"})),
        ],
    )
    .await;
    result(s, token, "pump", "OK").await;
    result(s, token, "valve", "OK").await;
    result(s, token, "pump", "CRITICAL").await;
    // Issue 37's case: first results soft CRITICAL, then hard CRITICAL, then OK for a while.
    for state in ["CRITICAL", "CRITICAL", "OK"] {
        result(s, token, "tank", state).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    // The pump has been down since its hard CRITICAL; the valve and the host never were.
    let t = table_until(s, token, "north", |t| {
        t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "plc/pump" && r["class"] == "critical")
    })
    .await;
    assert_eq!(t["type"], "availability");
    assert_eq!(t["windowDays"], 7);
    assert_eq!(t["columns"][0], "object");
    assert_eq!(row(&t, "plc/valve")["class"], "ok");
    assert_eq!(row(&t, "plc/valve")["values"][1], "100.000");
    assert_eq!(row(&t, "plc")["values"][0], "host");
    assert!(
        t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "plc/other"),
        "the selector leaves the south service out: {t}"
    );
    assert_eq!(t["totals"]["objects"], 4);
    assert_eq!(t["totals"]["belowTarget"], 2);
    // Only the time with data counts: the pump has been down nearly all of its, the tank a
    // moment of its; the seven days before their first results are neither.
    let percent = |name: &str| {
        row(&t, name)["values"][1]
            .as_str()
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    assert!(percent("plc/pump") < 50.0, "{t}");
    let tank = percent("plc/tank");
    assert!(tank > 50.0 && tank < 100.0, "not 0 % and 168 h down: {t}");
    let tank_down = row(&t, "plc/tank")["values"][2]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        tank_down.ends_with("ms") || tank_down == "0s" || tank_down.starts_with("1s"),
        "{tank_down}"
    );

    let sla = json(render(s, token, "north-sla", "json").await, 200).await;
    assert_eq!(sla["windowDays"], 30, "the default window");
    assert_eq!(
        sla["columns"],
        json!([
            "object",
            "kind",
            "availability %",
            "target %",
            "budget",
            "down",
            "budget left"
        ])
    );
    assert_eq!(row(&sla, "plc/pump")["class"], "critical");
    assert_eq!(
        row(&sla, "plc/pump")["values"][3],
        "0s",
        "0.5 % of the seconds it had data, not of 30 days"
    );

    // HTML and CSV carry the same rows.
    let res = render(s, token, "north", "html").await;
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
    let page = res.text().await.unwrap();
    assert!(page.contains("<h1>north</h1>"), "{page}");
    assert!(
        page.contains("<tr class=\"critical\"><td>plc/pump</td>"),
        "{page}"
    );
    let res = render(s, token, "north", "csv").await;
    assert_eq!(res.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = res.text().await.unwrap();
    assert!(
        csv.starts_with("object,kind,availability %,down\r\n"),
        "{csv}"
    );
    assert!(
        csv.contains("\r\nplc/valve,service,100.000,0s\r\n"),
        "{csv}"
    );
    // No format is HTML.
    let res = call(s, token, Method::POST, "/api/v1/reports/north:render")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");

    let p = assert_problem(
        render(s, token, "north", "pdf").await,
        501,
        "svc:reports/pdf",
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains("html"), "{p}");
    assert_problem(
        render(s, token, "north", "xml").await,
        422,
        "svc:validation/format",
    )
    .await;
    assert_problem(
        render(s, token, "nothing", "json").await,
        404,
        "svc:not-found",
    )
    .await;

    // Alert statistics: two alarms of one title, one acknowledged, and a third of another.
    let mut ids = Vec::new();
    for title in ["Tank high", "Tank high", "Door open"] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": title}),
        )
        .await;
        ids.push(json(res, 201).await["id"].as_str().unwrap().to_string());
    }
    let res = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{}:ack", ids[0]),
        json!({}),
    )
    .await;
    assert_eq!(res.status().as_u16(), 200);
    let stats = json(render(s, token, "alarms", "json").await, 200).await;
    assert_eq!(
        stats["rows"][0]["name"], "Tank high",
        "the most frequent first: {stats}"
    );
    assert_eq!(stats["rows"][0]["values"][0], "2");
    assert_eq!(stats["rows"][0]["values"][1], "1", "acknowledged");
    assert_eq!(
        row(&stats, "Door open")["values"][4],
        "-",
        "none resolved: no MTTR"
    );
    assert_eq!(stats["totals"]["alerts"], 3);
    assert_eq!(stats["totals"]["acknowledged"], 1);
    assert_eq!(stats["totals"]["bySeverity"]["critical"], 3);

    let people = json(render(s, token, "people", "json").await, 200).await;
    assert_eq!(people["totals"]["users"], 1);
    assert_eq!(people["rows"][0]["values"][1], "admin");

    let rota = json(render(s, token, "rota", "json").await, 200).await;
    assert_eq!(row(&rota, "night")["values"][0], "ada");
    assert_eq!(row(&rota, "empty")["class"], "critical");
    assert_eq!(rota["totals"]["uncovered"], 1);

    // What a reference client sends is accepted; what no report type is, refused.
    for (body, code) in [
        (
            json!({"name": "r1", "type": "weather"}),
            "svc:validation/report",
        ),
        (
            json!({"name": "r2", "type": "sla", "schedule": "hourly"}),
            "svc:validation/schedule",
        ),
        (
            json!({"name": "r3", "type": "sla", "params": {"windowDays": 0}}),
            "svc:validation/params",
        ),
    ] {
        let res = send(s, token, Method::POST, "/api/v1/reports", body).await;
        assert_problem(res, 422, code).await;
    }
    let res = send(s, token, Method::POST, "/api/v1/reports",
        json!({"name": "weekly", "type": "alert-stats", "schedule": "weekly:mon@06:30", "email": [], "keep": 4})).await;
    assert_eq!(res.status().as_u16(), 201);
}

#[tokio::test]
async fn a_run_archives_html_and_csv_keeps_the_newest_and_mails_them() {
    let smtp = SmtpServer::start();
    if smtp.is_none() {
        peer_missing("python3-aiosmtpd");
    }
    let a = Admin::start_with(
        smtp.as_ref()
            .map_or_else(Opts::default, |m| trusting_ca(&m.ca)),
    );
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![(
            "/api/v1/reports",
            json!({"name": "people", "type": "audit", "keep": 2}),
        )],
    )
    .await;
    let run = |name: &'static str| async move {
        let res = call(
            s,
            token,
            Method::POST,
            &format!("/api/v1/reports/{name}:run"),
        )
        .send()
        .await
        .unwrap();
        json(res, 200).await
    };
    let first = run("people").await;
    let renderings = first["renderings"].as_array().unwrap();
    assert_eq!(renderings.len(), 2);
    assert_eq!(renderings[0]["format"], "html");
    assert_eq!(renderings[1]["format"], "csv");
    assert!(
        renderings[0]["slot"]
            .as_str()
            .unwrap()
            .starts_with("manual-")
    );
    run("people").await;
    run("people").await;

    // keep 2: the newest two of each format, newest first.
    let archive = get(s, token, "/api/v1/reports/people/archive").await;
    let items = archive["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{archive}");
    assert_eq!(items.iter().filter(|i| i["format"] == "csv").count(), 2);
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    let mut newest_first = ids.clone();
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, newest_first);
    assert!(
        !ids.contains(&renderings[0]["id"].as_str().unwrap()),
        "the first run's renderings were pruned"
    );
    let page = get(s, token, "/api/v1/reports/people/archive?limit=3").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 3);
    let rest = get(
        s,
        token,
        &format!(
            "/api/v1/reports/people/archive?limit=3&cursor={}",
            page["nextCursor"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);

    // A rendering downloads as it was made.
    let csv = items.iter().find(|i| i["format"] == "csv").unwrap();
    let res = call(
        s,
        token,
        Method::GET,
        &format!(
            "/api/v1/reports/people/archive/{}",
            csv["id"].as_str().unwrap()
        ),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.headers()["content-type"], "text/csv; charset=utf-8");
    let body = res.text().await.unwrap();
    assert!(body.starts_with("user,name,roles,"), "{body}");
    assert_eq!(csv["bytes"].as_u64().unwrap(), body.len() as u64);
    assert_problem(
        call(
            s,
            token,
            Method::GET,
            &format!(
                "/api/v1/reports/people/archive/{}",
                renderings[0]["id"].as_str().unwrap()
            ),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        call(s, token, Method::GET, "/api/v1/reports/nothing/archive")
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    let audit = get(s, token, "/api/v1/audit?action=report.run").await;
    assert_eq!(
        audit["items"].as_array().unwrap().len(),
        3,
        "one audit entry per run"
    );

    // Mailing needs an email channel; with one, each address gets the report.
    let Some(smtp) = smtp else { return };
    let res = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/smtp-password",
        json!({"value": "mail-secret"}),
    )
    .await;
    assert!(res.status().is_success());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "mail", "type": "email", "config": {"host": "localhost",
                "port": smtp.port.to_string(), "tls": "starttls", "from": "svc <svc@example.com>", "username": "svc",
                "password": "$SECRET:smtp-password$", "caFile": smtp.ca.to_str().unwrap()}})),
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": "http://127.0.0.1:9/"}})),
            ("/api/v1/reports", json!({"name": "mailed", "type": "audit", "email": ["ops@example.com", "boss@example.com"], "params": {"channel": "mail"}})),
            ("/api/v1/reports", json!({"name": "no-channel", "type": "audit", "email": ["ops@example.com"]})),
            ("/api/v1/reports", json!({"name": "hooked", "type": "audit", "email": ["ops@example.com"], "params": {"channel": "hook"}})),
            ("/api/v1/reports", json!({"name": "nowhere", "type": "audit", "email": ["ops@example.com"], "params": {"channel": "absent"}})),
        ],
    )
    .await;
    for name in ["no-channel", "hooked", "nowhere"] {
        let res = call(
            s,
            token,
            Method::POST,
            &format!("/api/v1/reports/{name}:run"),
        )
        .send()
        .await
        .unwrap();
        assert_problem(res, 422, "svc:validation/params").await;
    }
    let mailed = run("mailed").await;
    assert_eq!(
        mailed["renderings"][0]["mailedTo"],
        json!(["ops@example.com", "boss@example.com"])
    );
    let mails = smtp.messages(2).await;
    let mut to: Vec<&str> = mails.iter().map(|m| m["to"][0].as_str().unwrap()).collect();
    to.sort_unstable();
    assert_eq!(to, ["boss@example.com", "ops@example.com"]);
    let data = mails[0]["data"].as_str().unwrap();
    assert!(data.contains("Report mailed (manual-"), "{data}");
    assert!(data.contains("/api/v1/reports/mailed/archive/"), "{data}");
}

#[tokio::test]
async fn a_scheduled_report_runs_once_in_its_slot() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    // The next whole minute in the server's (this machine's) local time.
    let tz = jiff::tz::TimeZone::system();
    let next = jiff::Timestamp::now()
        .to_zoned(tz)
        .checked_add(jiff::SignedDuration::from_secs(60))
        .unwrap();
    let schedule = format!("daily@{:02}:{:02}", next.hour(), next.minute());
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/reports",
                json!({"name": "daily", "type": "audit", "schedule": schedule}),
            ),
            // Due at 07:00, but made after today's: nothing runs for it until tomorrow.
            (
                "/api/v1/reports",
                json!({"name": "later", "type": "audit", "schedule": "daily@00:00"}),
            ),
        ],
    )
    .await;
    let started = Instant::now();
    let items = loop {
        let archive = get(s, token, "/api/v1/reports/daily/archive").await;
        let items = archive["items"].as_array().unwrap().clone();
        if !items.is_empty() {
            break items;
        }
        assert!(
            started.elapsed() < Duration::from_secs(75),
            "the {schedule} run never came"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let today = next.date().to_string();
    assert_eq!(items.len(), 2, "html and csv: {items:?}");
    assert!(
        items.iter().all(|i| i["slot"] == today.as_str()),
        "{items:?}"
    );
    let later = get(s, token, "/api/v1/reports/later/archive").await;
    assert_eq!(later["items"], json!([]));
    // The slot ran once: the sweep woken by a configuration change does not run it again.
    create_all(
        s,
        token,
        vec![("/api/v1/reports", json!({"name": "nudge", "type": "audit"}))],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let archive = get(s, token, "/api/v1/reports/daily/archive").await;
    assert_eq!(archive["items"].as_array().unwrap().len(), 2);
    let audit = get(s, token, "/api/v1/audit?action=report.run").await;
    assert_eq!(audit["items"][0]["actorId"], "report-schedule", "{audit}");
}

/// `excludeDependencies` (issue 69): a pump behind a router was down only while the router
/// was; the availability report that leaves dependency-held time out counts the pump fully
/// available and the router not, while the plain report counts both down.
#[tokio::test]
async fn availability_can_leave_the_time_held_back_by_a_dependency_out() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/hosts", json!({"name": "router", "labels": {"site": "east"}, "spec": {}})),
            ("/api/v1/hosts", json!({"name": "pump", "labels": {"site": "east"},
                "spec": {"dependsOn": [{"object": "router"}]}})),
            ("/api/v1/reports", json!({"name": "plain", "type": "availability", "params": {"selector": "site=east"}})),
            ("/api/v1/reports", json!({"name": "fair", "type": "sla",
                "params": {"selector": "site=east", "excludeDependencies": true}})),
        ],
    )
    .await;
    let hosts = |states: [(&'static str, &'static str); 2]| json!({"results": states.map(|(h, st)| json!({"host": h, "state": st, "output": st}))});
    for (states, pause) in [
        ([("router", "UP"), ("pump", "UP")], 300),
        ([("router", "DOWN"), ("pump", "DOWN")], 1000),
        ([("pump", "UP"), ("router", "UP")], 0),
    ] {
        let res = send(s, token, Method::POST, "/api/v1/results", hosts(states)).await;
        assert_eq!(res.status().as_u16(), 202);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let recovered = |t: &Value| {
        let rows = t["rows"].as_array().unwrap();
        rows.len() == 2
            && rows
                .iter()
                .all(|r| r["class"] == "critical" || r["name"] == "pump")
    };
    let plain = table_until(s, token, "plain", |t| {
        recovered(t) && row(t, "pump")["class"] == "critical"
    })
    .await;
    assert_eq!(row(&plain, "router")["class"], "critical", "{plain}");
    let fair = table_until(s, token, "fair", |t| recovered(t)).await;
    assert_eq!(row(&fair, "pump")["values"][1], "100.000", "{fair}");
    assert_eq!(row(&fair, "router")["class"], "critical", "{fair}");
}
