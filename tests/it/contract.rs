//! The API contract, generated from the served OpenAPI document (which the route table makes):
//! every guarded operation refuses anonymous callers, unknown credentials and callers without
//! its permission, and never tells another tenant's ids and names from ones that do not exist.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

struct Op {
    method: Method,
    path: String,
    permission: String,
    guarded: bool,
}

async fn operations(s: &Server) -> Vec<Op> {
    let doc: Value = s.get("/api/openapi.json").await.json().await.unwrap();
    let mut ops = Vec::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            ops.push(Op {
                method: method.to_uppercase().parse().unwrap(),
                path: path.clone(),
                permission: op["x-required-permission"].as_str().unwrap().to_string(),
                guarded: op.get("security") != Some(&json!([])),
            });
        }
    }
    assert!(ops.len() > 150, "{} operations", ops.len());
    ops
}

/// The path with every `{param}` replaced by `value(param)`.
fn concrete(path: &str, value: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').unwrap() + open;
        out.push_str(&rest[..open]);
        out.push_str(&value(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

const NOBODY: &str = "0190c6a4-0000-7000-8000-00000000dead";

#[tokio::test]
async fn every_guarded_route_refuses_anonymous_unknown_and_unpermitted_callers() {
    let a = Admin::start();
    let s = &a.s;
    let (viewer_of_metrics, _) = mint(
        s,
        &a.token,
        json!({"name": "narrow", "scopes": ["metrics:read"]}),
    )
    .await;
    let (viewer_of_events, _) = mint(
        s,
        &a.token,
        json!({"name": "narrow2", "scopes": ["events:read"]}),
    )
    .await;
    let mut checked = 0;
    for op in operations(s).await.into_iter().filter(|o| o.guarded) {
        let path = concrete(&op.path, |_| NOBODY.to_string());
        let what = format!("{} {}", op.method, op.path);
        let anonymous = s
            .http
            .request(op.method.clone(), s.url(&path))
            .send()
            .await
            .unwrap();
        let p = assert_problem(anonymous, 401, "svc:auth/required").await;
        assert!(p["instance"].is_string(), "{what}: {p}");
        let garbage = s
            .http
            .request(op.method.clone(), s.url(&path))
            .bearer_auth("svc_not-a-token")
            .send()
            .await
            .unwrap();
        assert_problem(garbage, 401, "svc:auth/invalid").await;
        if !op.permission.is_empty() {
            let narrow = if op.permission == "metrics:read" {
                &viewer_of_events
            } else {
                &viewer_of_metrics
            };
            let refused = call(s, narrow, op.method.clone(), &path)
                .send()
                .await
                .unwrap();
            let p = assert_problem(refused, 403, "svc:auth/forbidden").await;
            assert!(
                p["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&op.permission),
                "{what}: the 403 names {}: {p}",
                op.permission
            );
        }
        checked += 1;
    }
    assert!(checked > 150, "{checked} guarded operations");
}

/// Creates one resource of each kind that has an id or a name in a path, in the given tenant.
async fn resources(s: &Server, token: &str, secrets: &str) -> (Vec<String>, Vec<String>) {
    let created = |res: reqwest::Response| async move { json(res, 201).await };
    let post = |path: &'static str, body: Value| send(s, token, Method::POST, path, body);
    let future = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3600)).to_string();
    let mut ids = Vec::new();
    for (path, body) in [
        ("/api/v1/hosts", json!({"name": "b-host", "spec": {}})),
        ("/api/v1/incidents", json!({"title": "b incident"})),
        (
            "/api/v1/silences",
            json!({"selector": "site=b", "expiresAt": future, "comment": "b"}),
        ),
        (
            "/api/v1/downtimes",
            json!({"selector": "site=b", "start": jiff::Timestamp::now().to_string(), "end": future, "comment": "b"}),
        ),
        (
            "/api/v1/alerts",
            json!({"title": "b alarm", "dedupKey": "b"}),
        ),
        (
            "/api/v1/users",
            json!({"email": "b@example.org", "name": "B"}),
        ),
        (
            "/api/v1/api-tokens",
            json!({"name": "b-token", "scopes": ["objects:read"]}),
        ),
    ] {
        let v = created(post(path, body).await).await;
        let id = v["id"]
            .as_str()
            .or(v["meta"]["id"].as_str())
            .unwrap_or_else(|| panic!("{path}: {v}"));
        ids.push(id.to_string());
    }
    let scan = json(
        post(
            "/api/v1/discovery/scans",
            json!({"cidr": "127.0.0.1/32", "ports": [9]}),
        )
        .await,
        202,
    )
    .await;
    ids.push(scan["id"].as_str().unwrap().to_string());
    let name = "b-shared";
    for (path, body) in [
        (
            "/api/v1/contacts",
            json!({"name": name, "email": "b@example.org"}),
        ),
        (
            "/api/v1/schedules",
            json!({"name": name, "timeZone": "UTC", "layers": [{"anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": [name]}]}),
        ),
        (
            "/api/v1/channels",
            json!({"name": name, "type": "webhook", "config": {"url": "http://127.0.0.1:9/"}}),
        ),
        (
            "/api/v1/escalation-policies",
            json!({"name": name, "steps": [{"after": 0, "notify": {"contact": name}}]}),
        ),
        (
            "/api/v1/alert-rules",
            json!({"name": name, "match": "event.type == 'state_change'", "severity": "warning"}),
        ),
        (
            "/api/v1/business-services",
            json!({"name": name, "rule": "worst"}),
        ),
        (
            "/api/v1/heartbeats",
            json!({"name": name, "expectEvery": "5m"}),
        ),
        ("/api/v1/reports", json!({"name": name, "type": "audit"})),
    ] {
        created(post(path, body).await).await;
    }
    let run = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/reports/{name}:run"),
        json!({}),
    )
    .await;
    ids.push(
        json(run, 200).await["renderings"][0]["id"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    let secret = call(s, secrets, Method::PUT, &format!("/api/v1/secrets/{name}"))
        .json(&json!({"value": "s3cret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(secret.status(), 204);
    (ids, vec![name.to_string()])
}

/// The status and problem code of a request with an empty JSON body.
async fn answer(s: &Server, token: &str, method: &Method, path: String) -> (u16, Value) {
    let res = call(s, token, method.clone(), &path)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    (status, body["code"].clone())
}

#[tokio::test]
async fn another_tenants_ids_and_names_answer_like_ones_that_do_not_exist() {
    let a = Admin::start();
    let s = &a.s;
    let (b_tenant, b_token) = second_tenant(s, &a.token, "tenant-b").await;
    let (b_secrets, _) = mint_in(
        s,
        &a.token,
        &b_tenant,
        json!({"name": "b-secrets", "scopes": ["admin:secrets"]}),
    )
    .await;
    let (b_ids, b_names) = resources(s, &b_token, &b_secrets).await;
    let mut compared = 0;
    for op in operations(s)
        .await
        .into_iter()
        .filter(|o| o.guarded && o.path.contains('{'))
    {
        let what = format!("{} {}", op.method, op.path);
        let missing = answer(
            s,
            &a.token,
            &op.method,
            concrete(&op.path, |p| {
                if p == "name" {
                    "no-such-name".into()
                } else {
                    NOBODY.into()
                }
            }),
        )
        .await;
        assert!(
            !(200..300).contains(&missing.0),
            "{what}: {missing:?} for nothing"
        );
        let values: Vec<&String> = if op.path.contains("{name}") {
            b_names.iter().collect()
        } else {
            b_ids.iter().collect()
        };
        for value in values {
            let theirs = answer(
                s,
                &a.token,
                &op.method,
                concrete(&op.path, |p| {
                    if p == "name" {
                        b_names[0].clone()
                    } else {
                        value.clone()
                    }
                }),
            )
            .await;
            assert_eq!(
                theirs, missing,
                "{what} with tenant B's {value}: existence leaks"
            );
        }
        compared += 1;
    }
    assert!(compared > 60, "{compared} operations with ids or names");
}

#[tokio::test]
async fn bad_input_is_refused_with_the_field_and_the_form_it_should_have() {
    let a = Admin::start();
    let s = &a.s;
    let t = &a.token;
    let typo = send(
        s,
        t,
        Method::POST,
        "/api/v1/results",
        json!({"result": [{"host": "h", "status": 0}]}),
    )
    .await;
    let p = assert_problem(typo, 422, "svc:validation/body").await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("unknown field `result`"),
        "{p}"
    );
    let unwrapped = send(
        s,
        t,
        Method::POST,
        "/api/v1/results",
        json!({"host": "h", "status": 0}),
    )
    .await;
    let p = assert_problem(unwrapped, 422, "svc:validation/body").await;
    assert!(p["detail"].as_str().unwrap().contains("host"), "{p}");
    let empty = send(s, t, Method::POST, "/api/v1/results", json!({})).await;
    let p = assert_problem(empty, 422, "svc:validation/body").await;
    assert_eq!(p["detail"], "missing field `results`");

    let wrong_type = send(
        s,
        t,
        Method::POST,
        "/api/v1/hosts",
        json!({"name": "h1", "spec": {"maxCheckAttempts": "three"}}),
    )
    .await;
    let p = assert_problem(wrong_type, 422, "svc:validation/spec").await;
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "spec.maxCheckAttempts: invalid type: string \"three\", expected an integer"
        ),
        "{detail}"
    );
    assert!(!detail.contains("u32"), "no Rust type names: {detail}");
    let nested = send(
        s,
        t,
        Method::POST,
        "/api/v1/hosts",
        json!({"name": "h1", "spec": {"checkInterval": "1m"}}),
    )
    .await;
    let p = assert_problem(nested, 422, "svc:validation/spec").await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .starts_with("spec: unknown field `checkInterval`"),
        "{p}"
    );

    let icinga = send(
        s,
        t,
        Method::POST,
        "/api/v1/hosts",
        json!({"name": "h2", "spec": {"vars": {"http_port": 8080, "ssl": true, "path": "/"}}}),
    )
    .await;
    let host = json(icinga, 201).await;
    assert_eq!(
        host["spec"]["vars"],
        json!({"http_port": "8080", "ssl": "true", "path": "/"})
    );

    let wrong_names = send(
        s,
        t,
        Method::POST,
        "/api/v1/users/me:change-password",
        json!({"old": "x", "new": "y"}),
    )
    .await;
    let p = assert_problem(wrong_names, 422, "svc:validation/body").await;
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("unknown field") && detail.contains("`oldPassword`"),
        "{p}"
    );
    let missing = send(
        s,
        t,
        Method::POST,
        "/api/v1/users/me:change-password",
        json!({"newPassword": "a long new password"}),
    )
    .await;
    let p = assert_problem(missing, 422, "svc:validation/body").await;
    assert_eq!(p["detail"], "missing field `oldPassword`");
    let alarm = send(
        s,
        t,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "x", "sevrity": "critical"}),
    )
    .await;
    assert_problem(alarm, 422, "svc:validation/body").await;
}

#[tokio::test]
async fn problem_types_resolve_to_a_page_describing_the_code() {
    let s = Server::start();
    let p = assert_problem(s.get("/api/v1/hosts").await, 401, "svc:auth/required").await;
    let url = p["type"].as_str().unwrap();
    let path = &url[url.find("/problems/").unwrap()..];
    assert_eq!(path, "/problems/svc/auth/required");
    let page = s.get(path).await;
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let text = page.text().await.unwrap();
    assert!(
        text.contains("svc:auth/required") && text.contains("401"),
        "{text}"
    );
    for code in [
        "/problems/svc/not-found",
        "/problems/svc/validation/spec",
        "/problems/svc/validation/size",
    ] {
        assert_eq!(s.get(code).await.status(), 200, "{code}");
    }
    assert_eq!(s.get("/problems/svc/no-such/code").await.status(), 404);
}
