//! The twenty configuration kinds through one table-driven test, If-Match rules, permissions,
//! tenant isolation and custom roles.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

/// Every kind with a valid body and an invalid one (and the code it gets).
fn kinds() -> Vec<(&'static str, Value, Value, &'static str)> {
    vec![
        (
            "templates",
            json!({"kind": "service", "labels": {"os": "linux"}, "spec": {"interval": "1m", "maxCheckAttempts": 3}}),
            json!({"spec": {"bogus": 1}}),
            "svc:validation/spec",
        ),
        (
            "check-commands",
            json!({"type": "plugin", "line": ["/usr/lib/nagios/plugins/check_ping", "-H", "$address$"], "timeout": 10}),
            json!({"type": "plugin", "line": []}),
            "svc:validation/check-command",
        ),
        (
            "time-periods",
            json!({"timeZone": "Europe/Berlin", "days": {"monday": ["08:00-17:00"]}}),
            json!({"days": {"monday": ["25:00-26:00"]}}),
            "svc:validation/time-period",
        ),
        (
            "alert-rules",
            json!({"match": "event.severity == 'critical'", "severity": "critical", "pendingFor": 60}),
            json!({"severity": "critical"}),
            "svc:validation/alert-rule",
        ),
        (
            "alert-groups",
            json!({"groupBy": ["site"], "window": "5m"}),
            json!({"groupBy": ["site"]}),
            "svc:validation/alert-group",
        ),
        (
            "escalation-policies",
            json!({"steps": [{"after": 0, "notify": {"contact": "ada"}}, {"after": "15m", "repeatEvery": 300, "maxRepeats": 2, "unlessAcked": true, "channels": ["sms"]}]}),
            json!({"steps": [{"notify": {}}]}),
            "svc:validation/escalation-policy",
        ),
        (
            "schedules",
            json!({"timeZone": "UTC", "layers": [{"anchor": "2026-01-05T08:00:00Z", "unit": "weekly", "participants": ["ada"]}]}),
            json!({"timeZone": "Mars/Olympus"}),
            "svc:validation/schedule",
        ),
        (
            "contacts",
            json!({"email": "ada@example.org", "phone": "+4912345", "timeZone": "Europe/Berlin", "preferences": [{"channels": ["sms", "email"], "profile": "default", "severity": "critical"}]}),
            json!({"preferences": [{"profile": "x"}]}),
            "svc:validation/preferences",
        ),
        (
            "contact-groups",
            json!({"members": ["ada"]}),
            json!({}),
            "svc:validation/contact-group",
        ),
        (
            "channels",
            json!({"type": "webhook", "config": {"url": "http://127.0.0.1:9/hook", "token": "plain-hook-token"}}),
            json!({"type": "pigeon"}),
            "svc:validation/channel",
        ),
        (
            "event-sources",
            json!({"type": "webhook", "authMode": "hmac", "mapping": {"summary": "$.title"}}),
            json!({"type": "webhook", "authMode": "wink"}),
            "svc:validation/event-source",
        ),
        (
            "business-services",
            json!({"selector": "tier=web", "rule": "any"}),
            json!({"selector": "tier in ("}),
            "svc:validation/selector",
        ),
        (
            "dashboards",
            json!({"shared": true, "spec": "eyJ3aWRnZXRzIjpbXX0="}),
            json!({"spec": "%%%"}),
            "svc:validation/dashboard",
        ),
        (
            "reports",
            json!({"type": "sla", "schedule": "weekly", "params": {"window": "7d"}}),
            json!({"type": "poetry"}),
            "svc:validation/report",
        ),
        (
            "saved-filters",
            json!({"resource": "alerts", "query": {"status": "open"}}),
            json!({"resource": "alerts", "query": {"selector": "a in ("}}),
            "svc:validation/selector",
        ),
        (
            "roles",
            json!({"permissions": ["objects:read", "alerts:ack"], "idpGroups": ["noc"]}),
            json!({"permissions": ["Not A Permission"]}),
            "svc:validation/role",
        ),
        (
            "webhooks",
            json!({"url": "http://127.0.0.1:9/out", "types": ["alert_opened"]}),
            json!({"url": "ftp://example.org"}),
            "svc:validation/webhook",
        ),
        (
            "sites",
            json!({"description": "plant north", "labels": {"region": "north"}, "disabled": false}),
            json!({"disabled": "yes"}),
            "svc:validation/site",
        ),
        (
            "ivr-menus",
            json!({"greeting": "hello", "options": [{"digit": "4", "action": "ack"}]}),
            json!({"options": [{"digit": "4"}]}),
            "svc:validation/ivr-menu",
        ),
        (
            "tts-profiles",
            json!({"engine": "espeak-ng", "language": "de", "audio": {"sampleRate": 8000}, "detect": {"languages": ["de", "en"]}, "normalize": {"lexicon": [{"from": "svc", "to": "S V C"}]}}),
            json!({"engine": "x", "audio": {}}),
            "svc:validation/tts-profile",
        ),
    ]
}

fn named(body: &Value, name: &str) -> Value {
    let mut b = body.clone();
    b["name"] = json!(name);
    b
}

#[tokio::test]
async fn every_kind_has_the_crud_shape() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    for (kind, body, bad, bad_code) in kinds() {
        let base = format!("/api/v1/{kind}");
        let res = call(s, &a.token, Method::POST, &base)
            .json(&named(&body, "first"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.headers().get("etag").map(|v| v.to_str().unwrap()),
            Some("\"1\""),
            "{kind}"
        );
        let doc = json(res, 201).await;
        assert_eq!(doc["name"], "first", "{kind}");
        assert_eq!(doc["version"], 1);
        assert_uuid_v7(doc["id"].as_str().unwrap());
        assert!(doc["createdAt"].as_str().unwrap().ends_with('Z'));
        assert!(doc["tenantId"].is_string());

        assert_problem(
            call(s, &a.token, Method::POST, &base)
                .json(&named(&body, "first"))
                .send()
                .await
                .unwrap(),
            409,
            "svc:conflict/duplicate",
        )
        .await;
        let bad_body = if bad.is_object() {
            named(&bad, "bad")
        } else {
            bad.clone()
        };
        assert_problem(
            call(s, &a.token, Method::POST, &base)
                .json(&bad_body)
                .send()
                .await
                .unwrap(),
            422,
            bad_code,
        )
        .await;
        assert_problem(
            call(s, &a.token, Method::POST, &base)
                .json(&named(&body, ""))
                .send()
                .await
                .unwrap(),
            422,
            "svc:validation/name",
        )
        .await;

        let item = format!("{base}/first");
        let got = call(s, &a.token, Method::GET, &item).send().await.unwrap();
        assert_eq!(got.headers()["etag"], "\"1\"");
        assert_eq!(json(got, 200).await, doc);

        // If-Match: required, bare/quoted/weak accepted, stale refused naming both versions.
        let renamed = named(&body, "ignored-body-name");
        assert_problem(
            call(s, &a.token, Method::PUT, &item)
                .json(&renamed)
                .send()
                .await
                .unwrap(),
            428,
            "svc:precondition/if-match",
        )
        .await;
        assert_problem(
            call(s, &a.token, Method::PUT, &item)
                .header("If-Match", "0")
                .json(&renamed)
                .send()
                .await
                .unwrap(),
            428,
            "svc:precondition/if-match",
        )
        .await;
        let doc2 = json(
            call(s, &a.token, Method::PUT, &item)
                .header("If-Match", "W/\"1\"")
                .json(&renamed)
                .send()
                .await
                .unwrap(),
            200,
        )
        .await;
        assert_eq!(doc2["name"], "first", "{kind}: the path name wins");
        assert_eq!(doc2["version"], 2);
        assert_eq!(doc2["id"], doc["id"]);
        let stale = assert_problem(
            call(s, &a.token, Method::PUT, &item)
                .header("If-Match", "\"1\"")
                .json(&renamed)
                .send()
                .await
                .unwrap(),
            409,
            "svc:conflict/version",
        )
        .await;
        let detail = stale["detail"].as_str().unwrap();
        assert!(detail.contains('2') && detail.contains('1'), "{detail}");
        let doc3 = json(
            call(s, &a.token, Method::PUT, &item)
                .header("If-Match", "2")
                .json(&renamed)
                .send()
                .await
                .unwrap(),
            200,
        )
        .await;
        assert_eq!(doc3["version"], 3);
        assert_problem(
            call(s, &a.token, Method::PUT, &format!("{base}/missing"))
                .header("If-Match", "1")
                .json(&body)
                .send()
                .await
                .unwrap(),
            404,
            "svc:not-found",
        )
        .await;

        let list = json(
            call(s, &a.token, Method::GET, &base).send().await.unwrap(),
            200,
        )
        .await;
        assert_eq!(list["items"].as_array().unwrap().len(), 1, "{kind}");
        assert_eq!(
            call(s, &a.token, Method::DELETE, &item)
                .send()
                .await
                .unwrap()
                .status(),
            204
        );
        assert_problem(
            call(s, &a.token, Method::GET, &item).send().await.unwrap(),
            404,
            "svc:not-found",
        )
        .await;
        assert_problem(
            call(s, &a.token, Method::DELETE, &item)
                .send()
                .await
                .unwrap(),
            404,
            "svc:not-found",
        )
        .await;
    }
    assert_problem(
        call(s, &a.token, Method::POST, "/api/v1/channels")
            .json(&json!([1]))
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/body",
    )
    .await;
    // Every mutation was audited and became a config event naming its kind.
    let audit = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/audit?action=template.create",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1);
    let events = json(
        call(s, &a.token, Method::GET, "/api/v1/events?limit=1000")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    for (kind, ..) in kinds() {
        let n = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["payload"]["kinds"] == json!([kind]))
            .count();
        assert_eq!(n, 4, "{kind}: create, two updates, delete");
    }
}

#[tokio::test]
async fn lists_order_filter_and_page_by_name() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    for name in ["delta", "alpha", "echo", "charlie", "bravo"] {
        let body = json!({"name": name, "resource": "objects", "query": {"q": format!("team={name}-ops")}});
        json(
            call(s, &a.token, Method::POST, "/api/v1/saved-filters")
                .json(&body)
                .send()
                .await
                .unwrap(),
            201,
        )
        .await;
    }
    let names = |v: &Value| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let page = json(
        call(s, &a.token, Method::GET, "/api/v1/saved-filters?limit=2")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&page), ["alpha", "bravo"]);
    assert_eq!(page["nextCursor"], "bravo");
    let next = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/saved-filters?limit=2&cursor=bravo",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&next), ["charlie", "delta"]);
    let last = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/saved-filters?limit=2&cursor=delta",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&last), ["echo"]);
    assert!(last.get("nextCursor").is_none());
    let q = json(
        call(s, &a.token, Method::GET, "/api/v1/saved-filters?q=CHAR")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&q), ["charlie"]);
    let q = json(
        call(s, &a.token, Method::GET, "/api/v1/saved-filters?q=echo-ops")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&q), ["echo"], "q matches the document text too");
    let all = json(
        call(s, &a.token, Method::GET, "/api/v1/saved-filters?limit=9999")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        names(&all).len(),
        5,
        "a limit above the maximum falls back to the default"
    );
}

#[tokio::test]
async fn templates_are_also_addressed_by_id() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let doc = json(
        call(s, &a.token, Method::POST, "/api/v1/templates")
            .json(&json!({"name": "linux", "spec": {"timeout": 30}}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    assert_eq!(
        doc["spec"]["timeout"], "30s",
        "durations are written in Go's format"
    );
    let id = doc["id"].as_str().unwrap();
    let by_id = json(
        call(s, &a.token, Method::GET, &format!("/api/v1/templates/{id}"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(by_id["name"], "linux");
    let other = json(
        call(s, &a.token, Method::POST, "/api/v1/contacts")
            .json(&json!({"name": "ada"}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let cid = other["id"].as_str().unwrap();
    assert_problem(
        call(s, &a.token, Method::GET, &format!("/api/v1/contacts/{cid}"))
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
}

#[tokio::test]
async fn permissions_follow_the_kind() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let (editor, _) = mint(s, &a.token, json!({"name": "e", "roles": ["editor"]})).await;
    assert_eq!(
        call(s, &viewer, Method::GET, "/api/v1/templates")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let res = call(s, &viewer, Method::POST, "/api/v1/templates")
        .json(&json!({"name": "t", "spec": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "config:write"
    );
    assert_eq!(
        call(s, &editor, Method::POST, "/api/v1/templates")
            .json(&json!({"name": "t", "spec": {}}))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let res = call(s, &viewer, Method::POST, "/api/v1/contacts")
        .json(&json!({"name": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "oncall:write"
    );
    assert_eq!(
        call(s, &editor, Method::POST, "/api/v1/contacts")
            .json(&json!({"name": "c"}))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let res = call(s, &editor, Method::GET, "/api/v1/roles")
        .send()
        .await
        .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "admin:read"
    );
    assert_problem(s.get("/api/v1/templates").await, 401, "svc:auth/required").await;
}

#[tokio::test]
async fn every_kind_is_tenant_isolated() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let (_, other) = second_tenant(s, &a.token, "cfg-iso").await;
    for (kind, body, ..) in kinds() {
        let doc = json(
            call(s, &a.token, Method::POST, &format!("/api/v1/{kind}"))
                .json(&named(&body, "secret-doc"))
                .send()
                .await
                .unwrap(),
            201,
        )
        .await;
        let item = format!("/api/v1/{kind}/secret-doc");
        let id = doc["id"].as_str().unwrap();
        // The other tenant may hold a document of the same name (not an event source).
        let requests = [(Method::GET, item.clone()), (Method::DELETE, item.clone())];
        assert_isolated(s, &other, &requests, &[&format!("/api/v1/{kind}")], id).await;
        let res = call(s, &other, Method::PUT, &item)
            .header("If-Match", "1")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(res, 404, "svc:not-found").await;
        let res = call(s, &other, Method::POST, &format!("/api/v1/{kind}"))
            .json(&named(&body, "secret-doc"))
            .send()
            .await
            .unwrap();
        if kind == "event-sources" {
            // The ingest URL names a source without its tenant: names are the instance's.
            assert_problem(res, 409, "svc:conflict/duplicate").await;
        } else {
            json(res, 201).await;
        }
        let mine = json(
            call(s, &a.token, Method::GET, &item).send().await.unwrap(),
            200,
        )
        .await;
        assert_eq!(mine["id"], id, "{kind}: untouched by the other tenant");
    }
}

#[tokio::test]
async fn custom_roles_apply_at_once() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    json(
        call(s, &a.token, Method::POST, "/api/v1/roles")
            .json(&json!({"name": "noc", "permissions": ["objects:read", "alerts:ack"]}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let (noc, meta) = mint(s, &a.token, json!({"name": "noc-token", "roles": ["noc"]})).await;
    assert_eq!(meta["roles"], json!(["noc"]));
    let perms = |v: &Value| {
        v["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let me = json(
        call(s, &noc, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(perms(&me), ["alerts:ack", "objects:read"]);
    assert_problem(
        call(s, &noc, Method::GET, "/api/v1/events")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    json(
        call(s, &a.token, Method::PUT, "/api/v1/roles/noc")
            .header("If-Match", "1")
            .json(&json!({"permissions": ["objects:read", "events:read"]}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let me = json(
        call(s, &noc, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        perms(&me),
        ["events:read", "objects:read"],
        "the cached token sees the change at once"
    );
    assert_eq!(
        call(s, &noc, Method::GET, "/api/v1/events")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_problem(
        call(s, &a.token, Method::POST, "/api/v1/api-tokens")
            .json(&json!({"name": "x", "roles": ["nope"]}))
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/token",
    )
    .await;
    let u = call(s, &a.token, Method::POST, "/api/v1/users")
        .json(&json!({"email": "noc@example.org", "name": "Noc", "roles": ["noc"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(json(u, 201).await["roles"], json!(["noc"]));
    // A deleted role grants nothing any more.
    assert_eq!(
        call(s, &a.token, Method::DELETE, "/api/v1/roles/noc")
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let me = json(
        call(s, &noc, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(perms(&me).is_empty());
}

#[tokio::test]
async fn secrets_are_sealed_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let s = Server::start_in(&data, no_seed());
    let key_file = data.join("master.key");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let put = |name: &str, body: Value| {
        call(&s, &token, Method::PUT, &format!("/api/v1/secrets/{name}"))
            .json(&body)
            .send()
    };
    assert_eq!(
        put(
            "smtp-password",
            json!({"value": "correct horse battery staple"})
        )
        .await
        .unwrap()
        .status(),
        204
    );
    assert_eq!(
        put("smtp-password", json!({"value": "rotated value"}))
            .await
            .unwrap()
            .status(),
        204,
        "no If-Match needed"
    );
    assert_problem(
        put("x", json!({})).await.unwrap(),
        422,
        "svc:validation/body",
    )
    .await;
    let list = json(
        call(&s, &token, Method::GET, "/api/v1/secrets")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["name"], "smtp-password");
    assert!(items[0]["updatedAt"].is_string());
    assert!(
        !list.to_string().contains("rotated"),
        "values are never shown"
    );
    assert!(s.stop().success());
    // At rest the value is sealed.
    let raw = if super::postgres::enabled() {
        super::postgres::rows(&data, "secret_by_tenant_name")
            .into_iter()
            .flat_map(|(_, v)| v)
            .collect()
    } else {
        std::fs::read(data.join("svc.redb")).unwrap()
    };
    assert!(
        !raw.windows(13).any(|w| w == b"rotated value"),
        "plaintext in the database file"
    );
    // Without a usable key: 503 svc:secrets/nokey, and the rest of the service still runs.
    std::fs::write(&key_file, "not a key").unwrap();
    let s = Server::start_in(&data, no_seed());
    assert_problem(
        call(&s, &token, Method::GET, "/api/v1/secrets")
            .send()
            .await
            .unwrap(),
        503,
        "svc:secrets/nokey",
    )
    .await;
    let put = call(&s, &token, Method::PUT, "/api/v1/secrets/x")
        .json(&json!({"value": "v"}))
        .send()
        .await
        .unwrap();
    assert_problem(put, 503, "svc:secrets/nokey").await;
    assert_eq!(
        call(&s, &token, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (viewer, _) = mint(&s, &token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_problem(
        call(&s, &viewer, Method::GET, "/api/v1/secrets")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
}
