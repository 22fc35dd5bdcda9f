//! Configuration bundles: plan, apply (body or token, dry run, prune, all or nothing), export
//! round trips between instances.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

const BUNDLE: &str = r#"
kind: templates
name: linux
body:
  spec: {interval: 60, vars: {os: linux}}
---
kind: contacts
name: ada
body:
  email: ada@example.org
  preferences: [{channels: [sms], profile: default}]
---
kind: host
name: web1
body:
  folder: /dc
  labels: {env: prod}
  spec: {address: 127.0.0.1, templates: [linux]}
---
kind: service
host: web1
name: http
body:
  spec: {checkCommand: http}
"#;

async fn post_text(s: &Server, token: &str, path: &str, body: &str) -> reqwest::Response {
    call(s, token, Method::POST, path)
        .header("Content-Type", "application/yaml")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn export(s: &Server, token: &str) -> String {
    let res = call(s, token, Method::GET, "/api/v1/config/bundles:export")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/yaml");
    res.text().await.unwrap()
}

fn actions(v: &Value) -> Vec<String> {
    v["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {} {}",
                a["action"].as_str().unwrap(),
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn plan_apply_and_round_trip_to_a_fresh_instance() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let plan = json(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", BUNDLE).await,
        200,
    )
    .await;
    assert_eq!(
        actions(&plan),
        [
            "create templates linux",
            "create contacts ada",
            "create host web1",
            "create service http"
        ]
    );
    assert!(plan["applyToken"].is_string());
    // Planning changed nothing.
    assert!(
        json(
            call(s, &a.token, Method::GET, "/api/v1/hosts")
                .send()
                .await
                .unwrap(),
            200
        )
        .await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let dry = json(
        post_text(
            s,
            &a.token,
            "/api/v1/config/bundles:apply?dryRun=true",
            BUNDLE,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(dry["applied"], false);
    assert!(
        json(
            call(s, &a.token, Method::GET, "/api/v1/hosts")
                .send()
                .await
                .unwrap(),
            200
        )
        .await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let applied = json(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", BUNDLE).await,
        200,
    )
    .await;
    assert_eq!(applied["applied"], true);
    let hosts = json(
        call(s, &a.token, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let id = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let eff = json(
        call(
            s,
            &a.token,
            Method::GET,
            &format!("/api/v1/objects/{id}/effective-config"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(eff["templateChain"], json!(["linux"]));
    assert_eq!(eff["spec"]["interval"], "1m0s");

    // Applying again changes nothing.
    let again = json(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", BUNDLE).await,
        200,
    )
    .await;
    assert!(
        actions(&again).iter().all(|a| a.starts_with("unchanged")),
        "{again}"
    );

    // Export, apply to a fresh instance, export again: identical.
    let exported = export(s, &a.token).await;
    let b = Admin::start_with(no_seed());
    json(
        post_text(&b.s, &b.token, "/api/v1/config/bundles:apply", &exported).await,
        200,
    )
    .await;
    assert_eq!(export(&b.s, &b.token).await, exported);
    let audit = json(
        call(
            &b.s,
            &b.token,
            Method::GET,
            "/api/v1/audit?action=bundle.apply",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn tokens_prune_and_all_or_nothing() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    json(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", BUNDLE).await,
        200,
    )
    .await;
    json(
        call(s, &a.token, Method::POST, "/api/v1/hosts")
            .json(&json!({"name": "stray", "spec": {}}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;

    // A token applies exactly its plan, once.
    let smaller = BUNDLE.split("---").take(3).collect::<Vec<_>>().join("---");
    let plan = json(
        post_text(
            s,
            &a.token,
            "/api/v1/config/bundles:plan?prune=true",
            &smaller,
        )
        .await,
        200,
    )
    .await;
    let acts = actions(&plan);
    assert!(
        acts.contains(&"delete service http".to_string())
            && acts.contains(&"delete host stray".to_string()),
        "{acts:?}"
    );
    let token = plan["applyToken"].as_str().unwrap();
    let body = json!({"applyToken": token}).to_string();
    let (_, other) = second_tenant(s, &a.token, "bundle-iso").await;
    assert_problem(
        post_text(s, &other, "/api/v1/config/bundles:apply", &body).await,
        409,
        "svc:bundle/token",
    )
    .await;
    json(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", &body).await,
        200,
    )
    .await;
    assert_problem(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", &body).await,
        409,
        "svc:bundle/token",
    )
    .await;
    assert_problem(
        post_text(
            s,
            &a.token,
            "/api/v1/config/bundles:apply",
            &json!({"applyToken": "nope"}).to_string(),
        )
        .await,
        409,
        "svc:bundle/token",
    )
    .await;
    // A token applies exactly its plan: once the state changed under it, nothing.
    let plan = json(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", BUNDLE).await,
        200,
    )
    .await;
    let stale = json!({"applyToken": plan["applyToken"]}).to_string();
    json(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", BUNDLE).await,
        200,
    )
    .await;
    assert_problem(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", &stale).await,
        409,
        "svc:bundle/token",
    )
    .await;
    json(
        post_text(
            s,
            &a.token,
            "/api/v1/config/bundles:apply?prune=true",
            &smaller,
        )
        .await,
        200,
    )
    .await;
    let objects = json(
        call(s, &a.token, Method::GET, "/api/v1/objects")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let names: Vec<&str> = objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web1"]);

    // All or nothing: the service's host does not exist, so the new template is not kept either.
    let before = export(s, &a.token).await;
    let failing = "kind: templates\nname: fresh\nbody: {spec: {}}\n---\nkind: service\nhost: ghost\nname: ping\nbody: {spec: {}}\n";
    let doc = assert_problem(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", failing).await,
        422,
        "svc:bundle/apply",
    )
    .await;
    assert!(doc["detail"].as_str().unwrap().contains("ghost"), "{doc}");
    assert_eq!(export(s, &a.token).await, before);
}

#[tokio::test]
async fn bundle_validation_and_limits() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let bad = "kind: templates\nname: t\nbody: {spec: {bogus: 1}}\n---\nkind: gizmos\nname: g\n---\nkind: host\nname: h\nbody: {spec: {templates: [nowhere]}}\n";
    let doc = assert_problem(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", bad).await,
        422,
        "svc:validation/bundle",
    )
    .await;
    let detail = doc["detail"].as_str().unwrap();
    assert_eq!(
        detail.matches("; ").count(),
        2,
        "three problems joined: {detail}"
    );
    assert!(
        detail.contains("bogus") && detail.contains("gizmos") && detail.contains("nowhere"),
        "{detail}"
    );
    assert_problem(
        post_text(
            s,
            &a.token,
            "/api/v1/config/bundles:plan",
            "kind: [unclosed",
        )
        .await,
        422,
        "svc:validation/bundle",
    )
    .await;
    let huge = format!(
        "kind: templates\nname: big\nbody: {{description: \"{}\"}}\n",
        "x".repeat(8 * 1024 * 1024)
    );
    assert_problem(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", &huge).await,
        413,
        "svc:bundle/size",
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(
        post_text(s, &viewer, "/api/v1/config/bundles:plan", BUNDLE)
            .await
            .status(),
        200,
        "planning only reads"
    );
    assert_problem(
        post_text(s, &viewer, "/api/v1/config/bundles:apply", BUNDLE).await,
        403,
        "svc:auth/forbidden",
    )
    .await;
}

/// Names nothing defines are saved as written (reference clients rely on it) and the plan warns
/// about each; a name the bundle itself defines, or the tenant already has, is no warning.
#[tokio::test]
async fn the_plan_warns_about_names_nothing_defines() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/time-periods",
        json!({"name": "office", "timeZone": "UTC", "days": {"monday": ["08:00-17:00"]}}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let bundle = r#"
kind: check-commands
name: check_plc
body: {type: plugin, line: [/usr/lib/nagios/plugins/check_dummy, "0"]}
---
kind: alert-rules
name: paged
body: {match: "event.type == 'state_change'", severity: critical, escalationPolicy: nobody}
---
kind: host
name: plc1
body:
  spec: {checkCommand: check_plc, checkPeriod: office}
---
kind: service
host: plc1
name: pressure
body:
  spec: {checkCommand: check_pressure, checkPeriod: shifts}
"#;
    let plan = json(
        post_text(s, &a.token, "/api/v1/config/bundles:plan", bundle).await,
        200,
    )
    .await;
    let warnings = plan["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 3, "{plan}");
    for (warning, names) in warnings.iter().zip([
        "escalation policy \"nobody\"",
        "check command \"check_pressure\"",
        "time period \"shifts\"",
    ]) {
        assert!(warning.as_str().unwrap().contains(names), "{warning}");
    }
    assert!(
        warnings[1]
            .as_str()
            .unwrap()
            .starts_with("service plc1/pressure:")
    );
    let applied = json(
        post_text(s, &a.token, "/api/v1/config/bundles:apply", bundle).await,
        200,
    )
    .await;
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(applied["warnings"], plan["warnings"]);
}

/// `strictReferences: true` turns those warnings into refusals, as Icinga refuses such a
/// config: a single save naming a check command, check period or escalation policy nothing
/// defines is 422 naming the field, the same save succeeds once the document exists, and the
/// plan refuses the bundle that `:apply` would refuse, storing nothing.
#[tokio::test]
async fn strict_references_refuse_names_nothing_defines() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), "strictReferences: true\n"),
        ..no_seed()
    });
    let (s, token) = (&a.s, a.token.as_str());
    let saves = [
        (
            "/api/v1/hosts",
            json!({"name": "plc1", "spec": {"checkCommand": "check_plc"}}),
            "svc:validation/spec",
            "spec.checkCommand: check command \"check_plc\"",
        ),
        (
            "/api/v1/hosts",
            json!({"name": "plc2", "spec": {"checkCommand": "ping", "checkPeriod": "office"}}),
            "svc:validation/spec",
            "spec.checkPeriod: time period \"office\"",
        ),
        (
            "/api/v1/templates",
            json!({"name": "plc", "spec": {"checkCommand": "check_plc"}}),
            "svc:validation/spec",
            "check command \"check_plc\"",
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": "paged", "match": "event.type == 'state_change'", "severity": "critical", "escalationPolicy": "nobody"}),
            "svc:validation/escalationPolicy",
            "escalation policy \"nobody\"",
        ),
    ];
    for (path, body, code, says) in &saves {
        let res = send(s, token, Method::POST, path, body.clone()).await;
        let p = assert_problem(res, 422, code).await;
        assert!(p["detail"].as_str().unwrap().contains(says), "{body}: {p}");
    }
    // A built-in check names no document.
    create_all(
        s,
        token,
        vec![(
            "/api/v1/hosts",
            json!({"name": "gw", "spec": {"checkCommand": "ping"}}),
        )],
    )
    .await;
    let host = get(s, token, "/api/v1/hosts?name=gw").await["items"][0].clone();
    let res = call(
        s,
        token,
        Method::PUT,
        &format!("/api/v1/objects/{}", host["id"].as_str().unwrap()),
    )
    .header("If-Match", format!("\"{}\"", host["version"]))
    .json(&json!({"name": "gw", "spec": {"checkCommand": "check_gw"}}))
    .send()
    .await
    .unwrap();
    assert_problem(res, 422, "svc:validation/spec").await;

    let bundle = r#"
kind: host
name: plc3
body:
  spec: {checkCommand: check_pressure}
"#;
    let res = post_text(s, token, "/api/v1/config/bundles:plan", bundle).await;
    let p = assert_problem(res, 422, "svc:validation/bundle").await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("host plc3: check command \"check_pressure\""),
        "{p}"
    );
    let res = post_text(s, token, "/api/v1/config/bundles:apply", bundle).await;
    assert_problem(res, 422, "svc:validation/bundle").await;

    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/check-commands",
                json!({"name": "check_plc", "type": "plugin", "line": ["check_dummy", "0"]}),
            ),
            (
                "/api/v1/time-periods",
                json!({"name": "office", "timeZone": "UTC", "days": {"monday": ["08:00-17:00"]}}),
            ),
            (
                "/api/v1/escalation-policies",
                json!({"name": "nobody", "steps": [{"after": 0, "notify": {"contact": "ada"}}]}),
            ),
        ],
    )
    .await;
    create_all(
        s,
        token,
        saves
            .iter()
            .map(|(path, body, ..)| (*path, body.clone()))
            .collect(),
    )
    .await;
    let hosts = get(s, token, "/api/v1/hosts").await;
    let names: Vec<&str> = hosts["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        3,
        "plc3 of the refused bundle was not stored: {names:?}"
    );
    assert!(!names.contains(&"plc3"));
}
