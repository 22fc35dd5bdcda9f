//! Alerts: rules open, refresh and clear alerts from real results through the engine (a
//! durable consumer of the event journal); manual alarms fold by dedup key; ack and resolve
//! follow CONTRACT 3; every transition writes its event; a restart resumes where it stopped.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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

/// Polls the alert list until `done` holds for it.
async fn alerts_until(
    s: &Server,
    token: &str,
    query: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let v = get(s, token, &format!("/api/v1/alerts{query}")).await;
        let items = v["items"].as_array().unwrap().clone();
        if done(&items) {
            return items;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "alerts{query} never got there: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn events_of(s: &Server, token: &str, types: &str) -> Vec<Value> {
    let v = get(
        s,
        token,
        &format!("/api/v1/events?types={types}&limit=1000"),
    )
    .await;
    let mut items = v["items"].as_array().unwrap().clone();
    items.reverse();
    items
}

async fn setup(s: &Server, token: &str) -> String {
    create_all(s, token, vec![
        (
            "/api/v1/hosts",
            json!({"name": "edge", "labels": {"site": "north"}, "spec": {}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "disk", "host": "edge", "labels": {"site": "north"}, "spec": {}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({
                "name": "disk-critical",
                "match": "event.type == 'state_change' && event.state == 'CRITICAL' && event.labels.site == 'north'",
                "severity": "critical",
                "title": "{{ .event.object }} on {{ .event.host }} is {{ .event.state }}",
                "setLabels": {"team": "ops"},
                // Each failure after a recovery is a new alert here (no reopening).
                "reopenWindow": "0s",
            }),
        ),
        // A rule whose expression reads a key events do not have never matches.
        (
            "/api/v1/alert-rules",
            json!({"name": "never", "match": "event.payload.nothing == 'x'", "severity": "warning"}),
        ),
    ])
    .await;
    let services = get(s, token, "/api/v1/services").await;
    services["items"][0]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn rules_open_refresh_and_clear_alerts_and_resume_after_a_restart() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let disk = setup(s, token).await;

    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    let open = alerts_until(s, token, "?status=open", |a| !a.is_empty()).await;
    assert_eq!(open.len(), 1);
    let alert = &open[0];
    assert_eq!(alert["ruleId"], "disk-critical");
    assert_eq!(alert["status"], "open");
    assert_eq!(alert["severity"], "critical");
    assert_eq!(alert["title"], "disk on edge is CRITICAL");
    assert_eq!(alert["objectId"], disk);
    assert_eq!(alert["dedupKey"], format!("{disk}/disk-critical"));
    assert_eq!(alert["labels"], json!({"site": "north", "team": "ops"}));
    assert_eq!(alert["payload"]["to"], "CRITICAL");
    let id = alert["id"].as_str().unwrap().to_string();
    let changes = events_of(s, token, "state_change").await;
    let one = get(s, token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(one["eventIds"], json!([changes.last().unwrap()["id"]]));
    let opened = events_of(s, token, "alert_opened").await;
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0]["payload"]["alertId"], id.as_str());
    assert_eq!(opened[0]["payload"]["rule"], "disk-critical");

    // WARNING neither matches nor clears; CRITICAL again refreshes the same alert.
    result(s, token, "WARNING").await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "", |_| true).await;
    let refreshed = loop {
        let one = get(s, token, &format!("/api/v1/alerts/{id}")).await;
        if one["eventIds"].as_array().unwrap().len() == 2 {
            break one;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refreshed["status"], "open");
    // Acknowledging mirrors onto the object's live state, which makes it handled.
    json(
        call(s, token, Method::POST, &format!("/api/v1/alerts/{id}:ack"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let services = get(s, token, "/api/v1/services").await;
    assert_eq!(services["items"][0]["state"]["ackedBy"], "bootstrap-admin");
    assert!(
        get(s, token, "/api/v1/problems").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(s, token, "/api/v1/alerts").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // OK does not match the rule but clears it (resolveOnOk is on by default).
    result(s, token, "OK").await;
    alerts_until(s, token, "?status=resolved", |a| a.len() == 1).await;
    let resolved = events_of(s, token, "alert_resolved").await;
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["payload"]["alertId"], id.as_str());
    assert_eq!(resolved[0]["severity"], "ok");

    // Filters: an unknown status matches nothing; rule and object filters find it.
    assert!(
        alerts_until(s, token, "?status=bogus", |_| true)
            .await
            .is_empty()
    );
    assert_eq!(
        alerts_until(
            s,
            token,
            &format!("?ruleId=disk-critical&objectId={disk}"),
            |_| true
        )
        .await
        .len(),
        1
    );

    // After a restart the engine goes on after its position: a new problem opens a new alert,
    // and nothing before it is decided twice.
    let s = a.s.restart();
    result(&s, token, "CRITICAL").await;
    let all = alerts_until(&s, token, "", |a| a.len() == 2).await;
    assert_eq!(all[0]["status"], "open", "newest first");
    assert_eq!(all[1]["id"], id.as_str());
    assert_eq!(events_of(&s, token, "alert_opened").await.len(), 2);
    assert_eq!(events_of(&s, token, "alert_resolved").await.len(), 1);
}

#[tokio::test]
async fn manual_alarms_fold_and_ack_and_resolve_follow_the_contract() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let missing = send(
        s,
        token,
        Method::POST,
        "/api/v1/alerts",
        json!({"message": "no title"}),
    )
    .await;
    assert_problem(missing, 422, "svc:validation/title").await;
    let unknown_policy = send(
        s,
        token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "x", "escalationPolicy": "nope"}),
    )
    .await;
    assert_problem(unknown_policy, 422, "svc:validation/escalationPolicy").await;
    let unknown_object = send(
        s,
        token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "x", "objectId": uuid::Uuid::now_v7()}),
    )
    .await;
    assert_problem(unknown_object, 422, "svc:validation/objectId").await;

    let body = json!({"title": "Fire in hall 2", "summary": "smoke detector 7", "dedupKey": "fire-hall-2", "labels": {"site": "north"}});
    let first = json(
        send(s, token, Method::POST, "/api/v1/alerts", body.clone()).await,
        201,
    )
    .await;
    assert_eq!(first["ruleId"], "manual");
    assert_eq!(first["severity"], "critical");
    assert_eq!(first["payload"]["message"], "smoke detector 7");
    let id = first["id"].as_str().unwrap().to_string();
    let folded = json(
        send(s, token, Method::POST, "/api/v1/alerts", body.clone()).await,
        200,
    )
    .await;
    assert_eq!(folded["id"], id.as_str(), "folds into the active alert");

    let acked = json(
        send(
            s,
            token,
            Method::POST,
            &format!("/api/v1/alerts/{id}:ack"),
            json!({"comment": "on my way"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(acked["status"], "acked");
    assert_eq!(acked["ackedBy"], "bootstrap-admin");
    // Only from open: acked is answered as not found (CONTRACT 3). An acked alert still folds.
    let again = call(s, token, Method::POST, &format!("/api/v1/alerts/{id}:ack"))
        .send()
        .await
        .unwrap();
    assert_problem(again, 404, "svc:not-found").await;
    json(
        send(s, token, Method::POST, "/api/v1/alerts", body.clone()).await,
        200,
    )
    .await;

    let resolved = json(
        call(
            s,
            token,
            Method::POST,
            &format!("/api/v1/alerts/{id}:resolve"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(resolved["status"], "resolved");
    let twice = call(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:resolve"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(twice, 404, "svc:not-found").await;
    // Resolved frees the key: the same alarm opens a new alert.
    let reopened = json(
        send(s, token, Method::POST, "/api/v1/alerts", body).await,
        201,
    )
    .await;
    assert_ne!(reopened["id"], id.as_str());

    let acks = events_of(s, token, "ack").await;
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0]["payload"]["comment"], "on my way");
    assert_eq!(events_of(s, token, "alert_opened").await.len(), 2);
    assert_eq!(events_of(s, token, "alert_resolved").await.len(), 1);
    let audit = get(s, token, "/api/v1/audit?limit=50").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    for action in ["alert.create", "alert.ack", "alert.resolve"] {
        assert!(actions.contains(&action), "{action} audited: {actions:?}");
    }
    let unknown = call(s, token, Method::GET, "/api/v1/alerts/not-a-uuid")
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "svc:not-found").await;

    // Twenty alarms with one key at once: one opens, the others fold into it.
    let storm = json!({"title": "Pump 3 dry run", "dedupKey": "pump-3"});
    let answers = futures_util::future::join_all(
        (0..20).map(|_| send(s, token, Method::POST, "/api/v1/alerts", storm.clone())),
    )
    .await;
    let mut statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [&[200u16; 19][..], &[201]].concat());
    let active = get(s, token, "/api/v1/alerts?status=open,acked").await;
    let pumps: Vec<&Value> = active["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["dedupKey"] == "pump-3")
        .collect();
    assert_eq!(pumps.len(), 1, "one active alert per dedup key: {active}");

    // Paging open alerts one at a time (read through the active alerts' index): newest first,
    // the resolved one left out, the cursor carrying on where the page ended.
    let mut opened = Vec::new();
    for n in 0..3 {
        let alarm = json!({"title": format!("Valve {n} stuck"), "dedupKey": format!("valve-{n}")});
        let created = send(s, token, Method::POST, "/api/v1/alerts", alarm).await;
        assert_eq!(created.status(), 201);
        let id = created.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        opened.push(id);
    }
    let resolved = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{}:resolve", opened[1]),
        json!({}),
    )
    .await;
    assert_eq!(resolved.status(), 200);
    let mut paged = Vec::new();
    let mut path = "/api/v1/alerts?status=open&limit=1".to_string();
    loop {
        let page = get(s, token, &path).await;
        assert!(page["items"].as_array().unwrap().len() <= 1, "{page}");
        paged.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_string()),
        );
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/api/v1/alerts?status=open&limit=1&cursor={cursor}"),
            None => break,
        }
    }
    let valves: Vec<&String> = paged.iter().filter(|id| opened.contains(id)).collect();
    assert_eq!(
        valves,
        [&opened[2], &opened[0]],
        "newest first, the resolved one left out"
    );
    assert!(paged.iter().all(|id| *id != opened[1]));
}

#[tokio::test]
async fn a_snoozed_alert_is_acked_until_it_wakes_open_again() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let alert = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Pump 3 pressure"}),
        )
        .await,
        201,
    )
    .await;
    let id = alert["id"].as_str().unwrap();
    let path = format!("/api/v1/alerts/{id}:snooze");
    let past = send(
        s,
        token,
        Method::POST,
        &path,
        json!({"until": "2020-01-01T00:00:00Z"}),
    )
    .await;
    assert_problem(past, 422, "svc:validation/until").await;
    let nothing = send(s, token, Method::POST, &path, json!({})).await;
    assert_problem(nothing, 422, "svc:validation/until").await;

    let snoozed = json(
        send(s, token, Method::POST, &path, json!({"duration": "2s"})).await,
        200,
    )
    .await;
    assert_eq!(snoozed["status"], "acked");
    assert!(snoozed["snoozedUntil"].is_string());
    let acks = events_of(s, token, "ack").await;
    assert!(
        acks[0]["payload"]["comment"]
            .as_str()
            .unwrap()
            .starts_with("snoozed until ")
    );

    // Woken by the 5 s timer: open again, with the wake-up event.
    let woken = alerts_until(s, token, "?status=open", |a| a.len() == 1).await;
    assert_eq!(woken[0]["id"], id);
    assert!(woken[0].get("snoozedUntil").is_none());
    let wake = events_of(s, token, "escalation").await;
    assert_eq!(wake.len(), 1);
    assert_eq!(
        wake[0]["payload"]["comment"],
        "snooze expired — alarm re-armed"
    );
    assert_eq!(wake[0]["payload"]["alertId"], id);
}

#[tokio::test]
async fn incidents_carry_versions_alerts_and_update_events() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let alert = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Line 4 stopped"}),
        )
        .await,
        201,
    )
    .await;
    let alert_id = alert["id"].as_str().unwrap();
    let untitled = send(
        s,
        token,
        Method::POST,
        "/api/v1/incidents",
        json!({"summary": "x"}),
    )
    .await;
    assert_problem(untitled, 422, "svc:validation/title").await;
    let stranger = send(
        s,
        token,
        Method::POST,
        "/api/v1/incidents",
        json!({"title": "x", "alertIds": [uuid::Uuid::now_v7()]}),
    )
    .await;
    assert_problem(stranger, 422, "svc:validation/alertIds").await;

    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/incidents",
        json!({"title": "Packaging hall down", "summary": "two lines", "labels": {"site": "north"}, "alertIds": [alert_id]}),
    )
    .await;
    assert_eq!(res.headers()["etag"], "\"1\"");
    let incident = json(res, 201).await;
    assert_eq!(incident["status"], "open");
    assert_eq!(incident["severity"], "critical");
    assert_eq!(incident["createdBy"], "bootstrap-admin");
    let id = incident["id"].as_str().unwrap().to_string();
    let attached = get(s, token, &format!("/api/v1/alerts?incidentId={id}")).await;
    assert_eq!(attached["items"][0]["id"], alert_id);

    let path = format!("/api/v1/incidents/{id}");
    let res = call(s, token, Method::GET, &path).send().await.unwrap();
    assert_eq!(res.headers()["etag"], "\"1\"");
    let bare = send(s, token, Method::PUT, &path, json!({"status": "resolved"})).await;
    assert_problem(bare, 428, "svc:precondition/if-match").await;
    let stale = call(s, token, Method::PUT, &path)
        .header("If-Match", "\"5\"")
        .json(&json!({"status": "resolved"}))
        .send()
        .await
        .unwrap();
    assert_problem(stale, 409, "svc:conflict/version").await;
    let bad = call(s, token, Method::PUT, &path)
        .header("If-Match", "1")
        .json(&json!({"status": "gone"}))
        .send()
        .await
        .unwrap();
    assert_problem(bad, 422, "svc:validation/status").await;
    let res = call(s, token, Method::PUT, &path)
        .header("If-Match", "W/\"1\"")
        .json(&json!({"status": "resolved"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["etag"], "\"2\"");
    let resolved = json(res, 200).await;
    assert_eq!(resolved["status"], "resolved");
    assert_eq!(
        resolved["title"], "Packaging hall down",
        "fields not named stay"
    );
    assert!(resolved["resolvedAt"].is_string());

    assert!(
        get(s, token, "/api/v1/incidents?open=true").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(s, token, "/api/v1/incidents").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let updates = events_of(s, token, "incident_update").await;
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0]["payload"]["action"], "created");
    assert_eq!(updates[0]["payload"]["summary"], "two lines");
    assert_eq!(updates[1]["payload"]["status"], "resolved");
    assert_eq!(updates[1]["severity"], "ok");
    // Resolving the incident by PUT resolved its alert too.
    let line4 = get(s, token, &format!("/api/v1/alerts/{alert_id}")).await;
    assert_eq!(line4["status"], "resolved", "{line4}");

    // The reference's incident verbs: merge, resolve, summarize; the detail with alerts and
    // timeline.
    let raise = |title: &'static str| async move {
        json(
            send(
                s,
                token,
                Method::POST,
                "/api/v1/alerts",
                json!({"title": title, "dedupKey": title}),
            )
            .await,
            201,
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (pump, valve) = (raise("pump").await, raise("valve").await);
    let create = |title: &str, alert: &str| {
        send(
            s,
            token,
            Method::POST,
            "/api/v1/incidents",
            json!({"title": title, "alertIds": [alert]}),
        )
    };
    let main = json(create("Water supply", &pump).await, 201).await;
    let side = json(create("Valve", &valve).await, 201).await;
    let (main_id, side_id) = (main["id"].as_str().unwrap(), side["id"].as_str().unwrap());
    let merge_path = format!("/api/v1/incidents/{main_id}:merge");
    let merge = |body: Value| send(s, token, Method::POST, &merge_path, body);
    assert_problem(
        merge(json!({"sourceIds": []})).await,
        422,
        "svc:validation/sourceIds",
    )
    .await;
    assert_problem(
        merge(json!({"sourceIds": [main_id]})).await,
        422,
        "svc:validation/sourceIds",
    )
    .await;
    assert_problem(
        merge(json!({"sourceIds": [uuid::Uuid::now_v7()]})).await,
        404,
        "svc:not-found",
    )
    .await;
    let merged = json(merge(json!({"sourceIds": [side_id]})).await, 200).await;
    assert_eq!(merged["alertIds"], json!([pump, valve]));
    let side = get(s, token, &format!("/api/v1/incidents/{side_id}")).await;
    assert_eq!(side["status"], "resolved");
    assert_eq!(side["alerts"], json!([]), "its alerts moved");
    assert_eq!(
        get(s, token, &format!("/api/v1/alerts/{valve}")).await["incidentId"],
        main_id
    );
    let detail = get(s, token, &format!("/api/v1/incidents/{main_id}")).await;
    assert_eq!(detail["title"], "Water supply");
    assert_eq!(detail["alerts"].as_array().unwrap().len(), 2);
    let kinds: Vec<&str> = detail["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"incident_update") && kinds.contains(&"alert_opened"),
        "{kinds:?}"
    );
    assert_eq!(detail["timeline"][0]["payload"]["action"], "merged");
    let summary = call(
        s,
        token,
        Method::POST,
        &format!("/api/v1/incidents/{main_id}:summarize"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(summary, 503, "svc:ai/disabled").await;
    let resolve = || {
        call(
            s,
            token,
            Method::POST,
            &format!("/api/v1/incidents/{main_id}:resolve"),
        )
        .send()
    };
    let done = json(resolve().await.unwrap(), 200).await;
    assert_eq!(done["status"], "resolved");
    for alert in [&pump, &valve] {
        assert_eq!(
            get(s, token, &format!("/api/v1/alerts/{alert}")).await["status"],
            "resolved"
        );
    }
    let again = json(resolve().await.unwrap(), 200).await;
    assert_eq!(
        again["version"], done["version"],
        "resolved already: as it is"
    );
    let audit = get(s, token, "/api/v1/audit?limit=20").await.to_string();
    assert!(
        audit.contains("incident.resolve") && audit.contains("incident.merge"),
        "{audit}"
    );

    // A rule with `incident: true` puts its alerts into its incident.
    setup(s, token).await;
    create_all(s, token, vec![(
        "/api/v1/alert-rules",
        json!({"name": "disk-incident", "incident": true, "severity": "critical",
            "match": "event.type == 'state_change' && event.state == 'CRITICAL'", "title": "disk full"}),
    )])
    .await;
    result(s, token, "CRITICAL").await;
    let opened = alerts_until(s, token, "?status=open", |a| {
        a.iter()
            .any(|x| x["ruleId"] == "disk-incident" && x["incidentId"].is_string())
    })
    .await;
    let alert = opened
        .iter()
        .find(|x| x["ruleId"] == "disk-incident")
        .unwrap();
    let incident = get(
        s,
        token,
        &format!(
            "/api/v1/incidents/{}",
            alert["incidentId"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(incident["createdBy"], "rule:disk-incident");
    assert_eq!(incident["title"], "disk full");
    assert_eq!(incident["alertIds"], json!([alert["id"]]));

    // The wallboard's counters.
    let overview = get(s, token, "/api/v1/overview").await;
    assert_eq!(overview["summary"]["servicesCritical"], 1, "{overview}");
    assert_eq!(
        overview["summary"]["hostsUp"], 0,
        "edge has no result of its own"
    );
    assert_eq!(
        overview["openAlerts"]["critical"], 2,
        "the two rules' alerts: {overview}"
    );
    let open: Vec<&str> = overview["openIncidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["createdBy"].as_str().unwrap())
        .collect();
    assert_eq!(open, ["rule:disk-incident"]);
    assert!(overview["queues"]["resultsDepth"].is_u64());
    assert_eq!(overview["queues"]["aiDepth"], 0);
}

fn at(offset_secs: i64) -> String {
    (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(offset_secs)).to_string()
}

#[tokio::test]
async fn silences_and_downtimes_suppress_paging_never_opening() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    setup(s, token).await;
    let hosts = get(s, token, "/api/v1/hosts").await;
    let host = hosts["items"][0]["id"].as_str().unwrap().to_string();

    for (body, code) in [
        (json!({"comment": "x"}), "svc:validation/expiresAt"),
        (json!({"expiresAt": at(3600)}), "svc:validation/comment"),
        (
            json!({"comment": "x", "expiresAt": at(-60)}),
            "svc:validation/expiresAt",
        ),
        (
            json!({"comment": "x", "expiresAt": at(3600), "selector": "site in (a"}),
            "svc:validation/selector",
        ),
        (
            json!({"comment": "x", "expiresAt": at(3600), "textRegex": "("}),
            "svc:validation/textRegex",
        ),
    ] {
        assert_problem(
            send(s, token, Method::POST, "/api/v1/silences", body).await,
            422,
            code,
        )
        .await;
    }
    for (body, code) in [
        (
            json!({"comment": "x", "start": at(-60), "end": at(3600)}),
            "svc:validation/objectId",
        ),
        (
            json!({"comment": "x", "start": at(60), "end": at(-60), "objectId": host}),
            "svc:validation/end",
        ),
        (
            json!({"comment": "x", "start": at(-60), "end": at(60), "selector": "site=north", "type": "flexible"}),
            "svc:validation/duration",
        ),
    ] {
        assert_problem(
            send(s, token, Method::POST, "/api/v1/downtimes", body).await,
            422,
            code,
        )
        .await;
    }

    // A host downtime, created idempotently, covers the host's services.
    let body =
        json!({"comment": "firmware update", "start": at(-60), "end": at(3600), "objectId": host});
    let create = |body: Value| {
        call(s, token, Method::POST, "/api/v1/downtimes")
            .header("Idempotency-Key", "fw-1")
            .json(&body)
            .send()
    };
    let first = create(body.clone()).await.unwrap();
    assert!(first.headers().get("idempotency-replayed").is_none());
    let downtime = json(first, 201).await;
    let replay = create(body.clone()).await.unwrap();
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    assert_eq!(json(replay, 201).await["id"], downtime["id"]);
    let other =
        create(json!({"comment": "other", "start": at(-60), "end": at(3600), "objectId": host}))
            .await
            .unwrap();
    assert_problem(other, 409, "svc:conflict/idempotency").await;
    assert_eq!(
        get(s, token, "/api/v1/downtimes?active=true").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        events_of(s, token, "downtime").await.len(),
        1,
        "the replay wrote nothing"
    );

    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "?status=open", |a| a.len() == 1).await;
    let suppressed = loop {
        let n = events_of(s, token, "notification").await;
        if !n.is_empty() {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(suppressed[0]["payload"]["status"], "suppressed");
    assert!(
        suppressed[0]["payload"]["error"]
            .as_str()
            .unwrap()
            .starts_with("downtime ")
    );
    // The service is in its host's downtime: handled, so not a problem unless asked for.
    let services = get(s, token, "/api/v1/services").await;
    assert_eq!(services["items"][0]["state"]["downtimeDepth"], 1);
    assert!(
        get(s, token, "/api/v1/problems").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(s, token, "/api/v1/problems?includeHandled=true").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let id = downtime["id"].as_str().unwrap();
    let ended = call(s, token, Method::DELETE, &format!("/api/v1/downtimes/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status().as_u16(), 204);
    assert!(
        get(s, token, "/api/v1/downtimes?active=true").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(s, token, "/api/v1/services").await["items"][0]["state"]["downtimeDepth"],
        0
    );
    assert_eq!(
        get(s, token, "/api/v1/problems").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A silence on the labels: the next alert opens, suppressed by it.
    let silence = json(
        send(s, token, Method::POST, "/api/v1/silences", json!({"comment": "known issue", "expiresAt": at(3600), "selector": "site=north", "textRegex": "^disk"})).await,
        201,
    )
    .await;
    assert_eq!(silence["createdBy"], "bootstrap-admin");
    assert_eq!(silence["version"], 1);
    assert_eq!(events_of(s, token, "silence").await.len(), 1);
    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "", |a| a.len() == 2 && a[0]["status"] == "open").await;
    let suppressed = loop {
        let n = events_of(s, token, "notification").await;
        if n.len() == 2 {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        suppressed[1]["payload"]["error"]
            .as_str()
            .unwrap()
            .starts_with("silence ")
    );

    // Expired: the next alert is not suppressed.
    let sid = silence["id"].as_str().unwrap();
    let gone = call(s, token, Method::DELETE, &format!("/api/v1/silences/{sid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status().as_u16(), 204);
    assert!(
        get(s, token, "/api/v1/silences?active=true").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        get(s, token, "/api/v1/silences").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "", |a| a.len() == 3 && a[0]["status"] == "open").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events_of(s, token, "notification").await.len(), 2);
}

/// Labels reach events, rules and the effective configuration through templates and hosts:
/// a template's, then the host's, then the object's own, later ones winning.
#[tokio::test]
async fn effective_labels_come_from_templates_and_the_host() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    create_all(s, token, vec![
        (
            "/api/v1/templates",
            json!({"name": "ops-owned", "kind": "service", "labels": {"team": "ops", "tier": "gold"}, "spec": {}}),
        ),
        (
            "/api/v1/hosts",
            json!({"name": "edge", "labels": {"site": "lab", "tier": "silver"}, "spec": {}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "disk", "host": "edge", "labels": {"tier": "bronze"}, "spec": {"templates": ["ops-owned"]}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "lab", "match": "event.labels.site == 'lab' && event.labels.team == 'ops' && event.state == 'CRITICAL'", "severity": "warning"}),
        ),
    ])
    .await;
    let id = get(s, token, "/api/v1/services").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let effective = get(s, token, &format!("/api/v1/objects/{id}/effective-config")).await;
    let want = json!({"team": "ops", "site": "lab", "tier": "bronze"});
    assert_eq!(effective["labels"], want);
    let listed = get(
        s,
        token,
        "/api/v1/objects?selector=team%3Dops,tier%3Dbronze",
    )
    .await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["items"][0]["id"], id.as_str());
    let silver = get(s, token, "/api/v1/services?selector=tier%3Dsilver").await;
    assert_eq!(silver["items"], json!([]), "the service's own tier wins");
    result(s, token, "CRITICAL").await;
    let alerts = alerts_until(s, token, "", |a| !a.is_empty()).await;
    assert_eq!(alerts[0]["labels"], want);
    let changes = events_of(s, token, "state_change").await;
    assert_eq!(changes[0]["payload"]["labels"], want);
}

/// `pendingFor` holds an alert until the condition has lasted (and the wait survives a
/// restart); a clear drops it; `autoCloseAfter` expires an alert nobody closed.
#[tokio::test]
async fn pending_alerts_survive_a_restart_and_old_ones_expire() {
    let a = Admin::start();
    let token = a.token.clone();
    create_all(&a.s, &token, vec![
        ("/api/v1/hosts", json!({"name": "edge", "spec": {}})),
        (
            "/api/v1/services",
            json!({"name": "disk", "host": "edge", "spec": {}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "slow", "match": "event.state == 'CRITICAL'", "severity": "critical", "pendingFor": "1s", "autoCloseAfter": "2s"}),
        ),
    ])
    .await;
    result(&a.s, &token, "CRITICAL").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        get(&a.s, &token, "/api/v1/alerts").await["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "pending, not open"
    );
    let s = a.s.restart();
    let opened = alerts_until(&s, &token, "", |a| !a.is_empty()).await;
    assert_eq!(opened.len(), 1);
    assert_eq!(events_of(&s, &token, "alert_opened").await.len(), 1);
    let expired = alerts_until(&s, &token, "?status=expired", |a| a.len() == 1).await;
    assert!(expired[0]["resolvedAt"].is_string());
    assert!(
        events_of(&s, &token, "alert_resolved").await.is_empty(),
        "expiry writes no event"
    );

    // A clear before pendingFor ran out drops the pending alert.
    result(&s, &token, "OK").await;
    result(&s, &token, "CRITICAL").await;
    result(&s, &token, "OK").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        get(&s, &token, "/api/v1/alerts").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn rules_are_tested_against_demo_events_and_history() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    setup(s, token).await;
    let rule = json!({"name": "hot", "match": "event.type == 'ingress' && event.payload.temp > 80", "severity": "warning", "dedupKey": "{{ .event.payload.sensor }}"});
    let demo = json!([
        {"type": "ingress", "payload": {"payload": {"temp": 90, "sensor": "t1"}}},
        {"type": "ingress", "payload": {"payload": {"temp": 95, "sensor": "t1"}}},
        {"type": "ingress", "payload": {"payload": {"temp": 20, "sensor": "t2"}}},
        {"type": "ingress", "payload": {"payload": {"sensor": "t3"}}},
    ]);
    let tested = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alert-rules:test",
            json!({"rule": rule, "demoEvents": demo}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(tested["matched"], 2, "a missing key is no match: {tested}");
    assert_eq!(
        tested["wouldOpen"].as_array().unwrap().len(),
        1,
        "one dedup key"
    );
    assert_eq!(tested["wouldOpen"][0]["dedupKey"], "t1");
    assert_eq!(
        tested["sampleViews"][0]["payload"]["temp"], 90,
        "ingress payload hoisted"
    );
    let bad = send(
        s,
        token,
        Method::POST,
        "/api/v1/alert-rules:test",
        json!({"rule": {"match": "event.x ==", "severity": "warning"}}),
    )
    .await;
    assert_problem(bad, 422, "svc:validation/match").await;

    // The stored rule against what happened.
    result(s, token, "OK").await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "", |a| !a.is_empty()).await;
    let history = json(
        call(
            s,
            token,
            Method::POST,
            "/api/v1/alert-rules/disk-critical:test",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        history["matched"], 2,
        "the CRITICAL opens, the OK before it clears: {history}"
    );
    assert_eq!(history["wouldOpen"].as_array().unwrap().len(), 1);
    let unknown = call(s, token, Method::POST, "/api/v1/alert-rules/nope:test")
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "svc:not-found").await;
}

/// Topology: a service's problem on a DOWN host is caused by the host and does not page on
/// its own. Alarm storm: five alerts sharing a label pair within 120 s become one incident.
#[tokio::test]
async fn topology_causes_and_alarm_storms_are_correlated() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let mut bodies = vec![
        (
            "/api/v1/hosts",
            json!({"name": "rack1", "labels": {"rack": "r1"}, "spec": {}}),
        ),
        ("/api/v1/hosts", json!({"name": "edge", "spec": {}})),
        (
            "/api/v1/services",
            json!({"name": "disk", "host": "edge", "spec": {}}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "down", "match": "event.state in ['CRITICAL', 'DOWN']", "severity": "critical"}),
        ),
    ];
    for i in 0..5 {
        bodies.push((
            "/api/v1/services",
            json!({"name": format!("psu{i}"), "host": "rack1", "spec": {}}),
        ));
    }
    create_all(s, token, bodies).await;
    let post = |items: Value| {
        send(
            s,
            token,
            Method::POST,
            "/api/v1/results",
            json!({"results": items}),
        )
    };
    assert_eq!(
        post(json!([{"host": "edge", "state": "DOWN", "output": "no route"}]))
            .await
            .status()
            .as_u16(),
        202
    );
    alerts_until(s, token, "", |a| a.len() == 1).await;
    assert_eq!(
        post(
            json!([{"host": "edge", "service": "disk", "state": "CRITICAL", "output": "timeout"}])
        )
        .await
        .status()
        .as_u16(),
        202
    );
    let both = alerts_until(s, token, "", |a| a.len() == 2).await;
    let hosts = get(s, token, "/api/v1/hosts?limit=10").await;
    let edge = hosts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "edge")
        .unwrap()["id"]
        .clone();
    assert_eq!(both[0]["cause"]["objectId"], edge);
    assert_eq!(both[0]["cause"]["reason"], "host edge is DOWN");
    assert!(
        both[1].get("cause").is_none(),
        "the host's own alert has no cause"
    );
    let notices = events_of(s, token, "notification").await;
    assert_eq!(notices.len(), 1);
    assert_eq!(
        notices[0]["payload"]["error"],
        "caused by: host edge is DOWN"
    );

    let storm: Vec<Value> = (0..5).map(|i| json!({"host": "rack1", "service": format!("psu{i}"), "state": "CRITICAL", "output": "no power"})).collect();
    assert_eq!(post(Value::Array(storm)).await.status().as_u16(), 202);
    alerts_until(s, token, "", |a| a.len() == 7).await;
    let incidents = loop {
        let i = get(s, token, "/api/v1/incidents").await["items"]
            .as_array()
            .unwrap()
            .clone();
        if i.first()
            .is_some_and(|i| i["alertIds"].as_array().unwrap().len() == 5)
        {
            break i;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(incidents.len(), 1, "one incident for the storm");
    assert_eq!(
        incidents[0]["title"],
        "Alarm storm: 5 alerts sharing rack=r1"
    );
    assert_eq!(incidents[0]["createdBy"], "correlation");
    let id = incidents[0]["id"].as_str().unwrap();
    assert_eq!(
        alerts_until(s, token, &format!("?incidentId={id}"), |_| true)
            .await
            .len(),
        5
    );
    let updates = events_of(s, token, "incident_update").await;
    assert_eq!(updates[0]["payload"]["cluster"], "rack=r1");
    assert_eq!(updates[0]["severity"], "critical");
}

#[tokio::test]
async fn business_services_evaluate_live_with_impact_and_sla() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    create_all(s, token, vec![
        (
            "/api/v1/hosts",
            json!({"name": "web1", "labels": {"tier": "web"}, "spec": {}}),
        ),
        (
            "/api/v1/hosts",
            json!({"name": "web2", "labels": {"tier": "web"}, "spec": {}}),
        ),
        ("/api/v1/hosts", json!({"name": "db1", "spec": {}})),
        (
            "/api/v1/business-services",
            json!({"name": "shop", "rule": "worst", "slaWindow": "month"}),
        ),
        (
            "/api/v1/business-services",
            json!({"name": "frontend", "parentId": "shop", "selector": "tier=web", "rule": "quorum", "quorumPct": 50}),
        ),
    ])
    .await;
    let db1 = get(s, token, "/api/v1/hosts?limit=10").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "db1")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shop = get(s, token, "/api/v1/business-services/shop").await;
    let shop_id = shop["id"].as_str().unwrap();
    for body in [
        json!({"name": "database", "parentId": shop_id, "objectId": db1}),
        json!({"name": "database-planned", "objectId": db1, "excludeDowntimes": true, "slaTarget": 99.0,
               "burnAlerts": [{"long": "2h", "short": "10m", "burnRate": 10, "severity": "page"}]}),
    ] {
        assert_eq!(
            send(s, token, Method::POST, "/api/v1/business-services", body)
                .await
                .status()
                .as_u16(),
            201
        );
    }
    for (body, code) in [
        (
            json!({"name": "x", "rule": "bogus"}),
            "svc:validation/business-service",
        ),
        (
            json!({"name": "y", "slaWindow": "fortnight"}),
            "svc:validation/slaWindow",
        ),
        (
            json!({"name": "z", "burnAlerts": [{"long": "5m", "short": "1h", "burnRate": 14.4, "severity": "page"}]}),
            "svc:validation/burnAlerts",
        ),
        (
            json!({"name": "w", "burnAlerts": [{"long": "1h", "short": "5m", "burnRate": 14.4, "severity": "sms"}]}),
            "svc:validation/burnAlerts",
        ),
    ] {
        assert_problem(
            send(s, token, Method::POST, "/api/v1/business-services", body).await,
            422,
            code,
        )
        .await;
    }
    let post = |items: Value| {
        send(
            s,
            token,
            Method::POST,
            "/api/v1/results",
            json!({"results": items}),
        )
    };
    post(json!([{"host": "web1", "state": "UP"}, {"host": "web2", "state": "DOWN"}, {"host": "db1", "state": "UP"}])).await;
    let roots = get(s, token, "/api/v1/business-services:tree").await;
    let names: Vec<&str> = roots
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["service"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["database-planned", "shop"]);
    let tree = get(s, token, "/api/v1/business-services/shop:tree").await;
    assert_eq!(
        tree["state"], 0,
        "half the web tier is enough for the quorum: {tree}"
    );
    assert_eq!(tree["children"].as_array().unwrap().len(), 2);

    // A planned outage of the database: down for the SLA of one service, excused for the other.
    let downtime =
        json!({"comment": "upgrade", "start": at(-60), "end": at(3600), "objectId": db1});
    assert_eq!(
        send(s, token, Method::POST, "/api/v1/downtimes", downtime)
            .await
            .status()
            .as_u16(),
        201
    );
    post(json!([{"host": "db1", "state": "DOWN", "output": "gone"}])).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tree = get(s, token, "/api/v1/business-services/shop:tree").await;
    assert_eq!(tree["state"], 2);
    assert_eq!(tree["causes"], json!(["db1"]));
    let impact = get(s, token, &format!("/api/v1/objects/{db1}/impact")).await;
    assert_eq!(impact, json!(["database", "database-planned", "shop"]));
    let sla = get(s, token, "/api/v1/business-services/database/sla").await;
    assert_eq!(sla["windowDays"], 30);
    assert_eq!(sla["target"], 99.9);
    // The database's first result came a moment ago: the 30 days before it are no data, so
    // the budget is 0.1 % of that moment (a few milliseconds at most), not of 30 days (issue 37).
    let budget = sla["budgetTotal"].as_str().unwrap();
    assert!(
        budget == "0s"
            || budget
                .strip_suffix("ms")
                .is_some_and(|ms| ms.parse::<u32>().is_ok_and(|ms| ms < 10)),
        "{sla}"
    );
    let availability = sla["availability"].as_f64().unwrap();
    assert!(availability < 100.0 && availability > 0.0, "{sla}");
    assert_ne!(sla["budgetSpent"], "0s");
    // The database has been down for most of the moment it has data: every one of the
    // workbook's pairs burns far over its rate.
    let pairs: Vec<(&str, &str, f64, &str, bool)> = sla["burn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["long"].as_str().unwrap(),
                p["short"].as_str().unwrap(),
                p["burnRate"].as_f64().unwrap(),
                p["severity"].as_str().unwrap(),
                p["firing"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("1h0m0s", "5m0s", 14.4, "page", true),
            ("6h0m0s", "30m0s", 6.0, "page", true),
            ("72h0m0s", "6h0m0s", 1.0, "ticket", true),
        ],
        "{sla}"
    );
    assert!(sla["burn"][0]["longBurn"].as_f64().unwrap() > 14.4, "{sla}");
    let planned = get(s, token, "/api/v1/business-services/database-planned/sla").await;
    assert_eq!(planned["availability"], 100.0, "{planned}");
    assert_eq!(planned["budgetSpent"], "0s");
    // Its own pair; the downtime excuses the outage, so nothing burns.
    assert_eq!(
        planned["burn"],
        json!([{"long": "2h0m0s", "short": "10m0s", "burnRate": 10.0, "severity": "page",
                "longBurn": 0.0, "shortBurn": 0.0, "firing": false}]),
        "{planned}"
    );
    let unknown = call(s, token, Method::GET, "/api/v1/business-services/nope/sla")
        .send()
        .await
        .unwrap();
    assert_problem(unknown, 404, "svc:not-found").await;
}

/// A flexible downtime starts at the first hard problem inside its window and then lasts its
/// duration.
#[tokio::test]
async fn a_flexible_downtime_starts_with_the_first_problem() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    assert_eq!(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "plc", "labels": {"line": "4"}, "spec": {}})
        )
        .await
        .status()
        .as_u16(),
        201
    );
    let body = json!({"comment": "maintenance window", "start": at(-60), "end": at(7200), "selector": "line=4", "type": "flexible", "duration": "30m"});
    let d = json(
        send(s, token, Method::POST, "/api/v1/downtimes", body).await,
        201,
    )
    .await;
    assert_eq!(d["duration"], 1800);
    assert!(
        get(s, token, "/api/v1/downtimes?active=true").await["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "not started"
    );
    send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "plc", "state": "DOWN"}]}),
    )
    .await;
    let started = Instant::now();
    let active = loop {
        let v = get(s, token, "/api/v1/downtimes?active=true").await["items"]
            .as_array()
            .unwrap()
            .clone();
        if !v.is_empty() {
            break v;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(active[0]["startedAt"].is_string());
    assert_eq!(
        get(s, token, "/api/v1/hosts").await["items"][0]["state"]["downtimeDepth"],
        1
    );
    // The start is a change like any other: its event and audit entry.
    let id = active[0]["id"].as_str().unwrap();
    let events = get(s, token, "/api/v1/events?types=downtime").await;
    let start = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["payload"]["action"] == "started")
        .expect("a downtime started event");
    assert_eq!(start["payload"]["downtimeId"], id);
    assert_eq!(start["payload"]["startedAt"], active[0]["startedAt"]);
    let audit = get(s, token, "/api/v1/audit?action=downtime.start").await;
    let entry = &audit["items"][0];
    assert_eq!(entry["resource"], format!("downtime/{id}"));
    assert_eq!(entry["actorId"], "flexible-downtime");
}

/// A heartbeat rule arms on its source's first event, opens "No event from …" once the source
/// has been silent longer than `expectEvery`, and its next event resolves it.
#[tokio::test]
async fn heartbeat_rules_open_on_silence_and_resolve_on_the_next_event() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    let disk = setup(s, token).await;
    let rule = json!({"name": "disk-alive", "heartbeat": {"source": disk, "expectEvery": "1s"}, "severity": "warning"});
    assert_eq!(
        send(s, token, Method::POST, "/api/v1/alert-rules", rule)
            .await
            .status()
            .as_u16(),
        201
    );
    let no_source = json!({"name": "bad", "heartbeat": {"source": "", "expectEvery": "1s"}, "severity": "warning"});
    assert_problem(
        send(s, token, Method::POST, "/api/v1/alert-rules", no_source).await,
        422,
        "svc:validation/heartbeat",
    )
    .await;
    result(s, token, "WARNING").await;
    let silent = alerts_until(s, token, "?ruleId=disk-alive", |a| !a.is_empty()).await;
    assert_eq!(silent[0]["dedupKey"], "heartbeat/disk-alive");
    assert_eq!(silent[0]["title"], format!("No event from {disk} for 1s"));
    assert_eq!(silent[0]["severity"], "warning");
    result(s, token, "OK").await;
    alerts_until(s, token, "?ruleId=disk-alive&status=resolved", |a| {
        a.len() == 1
    })
    .await;
}

/// Alert groups are evaluated: from `minCount` active alerts of the group's rules sharing the
/// `groupBy` labels a group alert opens with the aggregate; below it, it resolves.
#[tokio::test]
async fn alert_groups_aggregate_their_members() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    create_all(s, token, vec![
        (
            "/api/v1/hosts",
            json!({"name": "edge", "labels": {"site": "north"}, "spec": {}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "s1", "host": "edge", "spec": {}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "s2", "host": "edge", "spec": {}}),
        ),
        (
            "/api/v1/alert-groups",
            json!({"name": "by-site", "groupBy": ["site"], "window": "5m", "aggregate": "max", "minCount": 2, "valuePath": "toState"}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "problems", "match": "event.state in ['WARNING', 'CRITICAL']", "severity": "warning", "groupId": "by-site"}),
        ),
    ])
    .await;
    let post = |service: &str, state: &str| {
        send(
            s,
            token,
            Method::POST,
            "/api/v1/results",
            json!({"results": [{"host": "edge", "service": service, "state": state}]}),
        )
    };
    post("s1", "WARNING").await;
    alerts_until(s, token, "?ruleId=problems", |a| a.len() == 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        get(s, token, "/api/v1/alerts?ruleId=group:by-site").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    post("s2", "CRITICAL").await;
    let group = alerts_until(s, token, "?ruleId=group:by-site", |a| a.len() == 1).await;
    assert_eq!(group[0]["title"], "2 alerts for site=north: max 2");
    assert_eq!(group[0]["dedupKey"], "group/by-site/site=north");
    assert_eq!(group[0]["payload"]["count"], 2);
    assert_eq!(group[0]["labels"], json!({"site": "north"}));
    post("s2", "OK").await;
    alerts_until(s, token, "?ruleId=group:by-site&status=resolved", |a| {
        a.len() == 1
    })
    .await;
}

#[tokio::test]
async fn a_downtime_selector_matches_a_service_by_its_hosts_labels() {
    let a = Admin::start();
    let (s, token) = (&a.s, &a.token);
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": "plc", "labels": {"site": "lab"}, "spec": {}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "pump", "host": "plc", "spec": {}}),
            ),
        ],
    )
    .await;
    let res = send(s, token, Method::POST, "/api/v1/results",
        json!({"results": [{"host": "plc", "service": "pump", "state": "CRITICAL", "output": "stalled"}]})).await;
    assert_eq!(res.status().as_u16(), 202);
    let res = send(s, token, Method::POST, "/api/v1/downtimes",
        json!({"comment": "maintenance", "start": at(-60), "end": at(3600), "selector": "site=lab"})).await;
    assert_eq!(res.status().as_u16(), 201);
    let started = Instant::now();
    loop {
        let handled = get(s, token, "/api/v1/problems?includeHandled=true").await;
        let items = handled["items"].as_array().unwrap().clone();
        if let Some(p) = items.iter().find(|p| p["object"]["name"] == "pump") {
            assert_eq!(p["state"]["downtimeDepth"], 1, "{p}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{items:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let unhandled = get(s, token, "/api/v1/problems").await;
    assert!(
        unhandled["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["object"]["name"] != "pump"),
        "a service in its host's labelled downtime is handled: {unhandled}"
    );
    // The object lists select by effective labels too, and their states see the downtime.
    let listed = get(s, token, "/api/v1/services?selector=site%3Dlab").await;
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["name"], "pump");
    assert_eq!(items[0]["state"]["downtimeDepth"], 1, "{listed}");
    let none = get(s, token, "/api/v1/services?selector=site%3Dplant").await;
    assert_eq!(none["items"], json!([]));
}

/// A steady burst of results (1,200 state changes a round, rounds back to back) does not hold
/// the alert engine back for its length: the engine decides once the burst pauses or its events
/// are half a second old, so alerts open while the burst goes on, and every decision is made
/// once it ends; a result alone after it is decided at once.
#[tokio::test]
async fn alerts_open_during_a_long_burst_of_results_and_none_is_lost() {
    const SERVICES: usize = 1200;
    // Each service flips for the whole burst: not shelved for chattering here.
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), "alerting:\n  chatter: {flips: 0}\n"),
        ..Opts::default()
    });
    let (s, token) = (&a.s, a.token.as_str());
    create_all(s, token, vec![
        ("/api/v1/hosts", json!({"name": "plant", "spec": {}})),
        (
            "/api/v1/alert-rules",
            json!({"name": "failed", "match": "event.state == 'CRITICAL'", "severity": "critical"}),
        ),
    ])
    .await;
    let valve = send(
        s,
        token,
        Method::POST,
        "/api/v1/services",
        json!({"name": "valve", "host": "plant", "spec": {}}),
    )
    .await;
    let valve = json(valve, 201).await["id"].as_str().unwrap().to_string();
    for chunk in (0..SERVICES).collect::<Vec<_>>().chunks(500) {
        let services: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"name": format!("pump{i}"), "host": "plant", "spec": {}}))
            .collect();
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/objects:batch",
            json!({"services": services}),
        )
        .await;
        assert_eq!(json(res, 200).await["failed"], 0);
    }
    // Four clients, each a quarter of the services, posting back to back so one is always in
    // flight, until an alert has opened (or for 30 s); each one's odd rounds CRITICAL, even
    // ones OK, and its last one CRITICAL.
    const CLIENTS: usize = 4;
    let started = Instant::now();
    let opened = std::sync::OnceLock::new();
    let client = |quarter: usize| {
        let opened = &opened;
        async move {
            let mut rounds = 0;
            while (opened.get().is_none() && started.elapsed() < Duration::from_secs(30))
                || rounds % 2 == 0
            {
                rounds += 1;
                let state = if rounds % 2 == 1 { "CRITICAL" } else { "OK" };
                let share = SERVICES / CLIENTS;
                let results: Vec<Value> = (quarter * share..(quarter + 1) * share)
                    .map(|i| json!({"host": "plant", "service": format!("pump{i}"), "state": state, "output": format!("round {rounds}")}))
                    .collect();
                let res = send(
                    s,
                    token,
                    Method::POST,
                    "/api/v1/results",
                    json!({"results": results}),
                )
                .await;
                assert_eq!(res.status().as_u16(), 202);
            }
            rounds
        }
    };
    let watch = async {
        while started.elapsed() < Duration::from_secs(30) {
            let any = get(s, token, "/api/v1/events?types=alert_opened&limit=1").await;
            if !any["items"].as_array().unwrap().is_empty() {
                let _ = opened.set(started.elapsed());
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (rounds, ()) = tokio::join!(
        futures_util::future::join_all((0..CLIENTS).map(client)),
        watch
    );
    assert!(
        opened.get().is_some(),
        "no alert opened in 30 s of the burst ({rounds:?} rounds)"
    );
    // The last round was CRITICAL: every service has its alert open, once.
    let waited = Instant::now();
    loop {
        let mut objects = open_alert_objects(s, token).await;
        let all = objects.len();
        objects.dedup();
        assert_eq!(objects.len(), all, "one open alert an object");
        if all == SERVICES {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "{all} of {SERVICES} alerts open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Alone, one result is decided at once.
    let res = send(s, token, Method::POST, "/api/v1/results", json!({"results": [{"host": "plant", "service": "valve", "state": "CRITICAL", "output": "stuck"}]})).await;
    assert_eq!(res.status().as_u16(), 202);
    let query = format!("?status=open&objectId={valve}");
    alerts_until(s, token, &query, |items| items.len() == 1).await;
}

/// The objects of the open alerts, sorted, read a page of 1,000 at a time.
async fn open_alert_objects(s: &Server, token: &str) -> Vec<String> {
    let mut objects = Vec::new();
    let mut path = "/api/v1/alerts?status=open&limit=1000".to_string();
    loop {
        let page = get(s, token, &path).await;
        for alert in page["items"].as_array().unwrap() {
            objects.push(alert["objectId"].as_str().unwrap().to_string());
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/api/v1/alerts?status=open&limit=1000&cursor={cursor}"),
            None => break,
        }
    }
    objects.sort_unstable();
    objects
}

/// The first requests a new server answers reach the alert engine: on PostgreSQL the engine
/// opens once its process holds partitions, about a second after the listener serves, and
/// its position was the journal's head at that moment, so the events before it were passed.
#[tokio::test]
async fn the_first_result_a_new_server_takes_opens_its_alert() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    create_all(s, token, vec![
        ("/api/v1/hosts", json!({"name": "edge", "spec": {}})),
        ("/api/v1/services", json!({"name": "disk", "host": "edge", "spec": {}})),
        (
            "/api/v1/alert-rules",
            json!({"name": "failed", "match": "event.state == 'CRITICAL'", "severity": "critical"}),
        ),
    ])
    .await;
    result(s, token, "CRITICAL").await;
    alerts_until(s, token, "?status=open", |items| items.len() == 1).await;
}
