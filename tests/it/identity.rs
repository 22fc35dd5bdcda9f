//! SPEC 5.1's situations, API tokens, tenants and the audit chain, against the spawned server.

use crate::support::*;
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn whoami_and_the_situation_table() {
    let a = Admin::start();
    let s = &a.s;
    let me = json(
        call(s, &a.token, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(me["actorType"], "token");
    assert_eq!(me["name"], "bootstrap-admin");
    assert_eq!(me["permissions"], json!(["*:*"]));
    let tenants = json(
        call(s, &a.token, Method::GET, "/api/v1/tenants")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let default = tenants["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["slug"] == "default")
        .unwrap();
    assert_eq!(me["tenantId"], default["id"]);
    assert_uuid_v7(default["id"].as_str().unwrap());

    // Anonymous on a route needing identity or permission.
    assert_problem(s.get("/api/v1/whoami").await, 401, "svc:auth/required").await;
    assert_problem(s.get("/api/v1/api-tokens").await, 401, "svc:auth/required").await;

    // A credential present but unknown: 401 invalid everywhere, health and metrics included.
    let unknown = format!("svc_{}", "ab".repeat(24));
    for path in [
        "/api/v1/whoami",
        "/healthz",
        "/metrics",
        "/api/v1/system/info",
    ] {
        let doc = assert_problem(
            call(s, &unknown, Method::GET, path).send().await.unwrap(),
            401,
            "svc:auth/invalid",
        )
        .await;
        assert!(doc["detail"].as_str().unwrap().contains("unknown"), "{doc}");
    }
    // Bearer values without the svc_ prefix are not inspected.
    let res = s
        .http
        .get(s.url("/healthz"))
        .bearer_auth("someone-elses-token")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // Permission missing: 403 with the permission name as detail.
    let (ro, _) = mint(
        s,
        &a.token,
        json!({"name": "reader", "scopes": ["objects:read"]}),
    )
    .await;
    let doc = assert_problem(
        call(s, &ro, Method::GET, "/api/v1/api-tokens")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    assert_eq!(doc["detail"], "admin:tokens");
    let me = json(
        call(s, &ro, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(me["permissions"], json!(["objects:read"]));

    // A session cookie: cross-site is refused before anything else; otherwise it is invalid.
    let res = s
        .http
        .get(s.url("/api/v1/whoami"))
        .header("Cookie", "svc_session=abc")
        .header("Sec-Fetch-Site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_problem(res, 403, "svc:auth/csrf").await;
    let res = s
        .http
        .get(s.url("/api/v1/whoami"))
        .header("Cookie", "svc_session=abc")
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:auth/invalid").await;
    // A token request from a cross-site context is unaffected.
    let res = call(s, &a.token, Method::GET, "/api/v1/whoami")
        .header("Sec-Fetch-Site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The raw routes of SPEC 5.7 are not wrapped: the cookie a browser sends along is not
    // read, so neither a cross-site context nor a stale session refuses an ack link or an
    // ingest; they answer as they would without it.
    for (method, path) in [
        (Method::GET, "/api/v1/ack/not-a-link"),
        (Method::POST, "/api/v1/ack/not-a-link"),
        (Method::POST, "/api/v1/ingest/no-such-source"),
    ] {
        let plain = s
            .http
            .request(method.clone(), s.url(path))
            .send()
            .await
            .unwrap()
            .status();
        for site in ["cross-site", "same-origin"] {
            let res = s
                .http
                .request(method.clone(), s.url(path))
                .header("Cookie", "svc_session=abc")
                .header("Sec-Fetch-Site", site)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), plain, "{method} {path} from {site}");
            assert_ne!(res.status(), 403);
        }
    }
}

#[tokio::test]
async fn roles_expand_into_permissions() {
    let a = Admin::start();
    let s = &a.s;
    let (viewer, meta) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(meta["roles"], json!(["viewer"]));
    let me = json(
        call(s, &viewer, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let perms: Vec<&str> = me["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        perms.contains(&"objects:read") && !perms.iter().any(|p| p.starts_with("admin")),
        "{perms:?}"
    );
    let (fam, _) = mint(s, &a.token, json!({"name": "f", "scopes": ["admin:*"]})).await;
    assert_eq!(
        call(s, &fam, Method::GET, "/api/v1/audit")
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "admin:* implies admin:audit"
    );
    assert_problem(
        call(s, &a.token, Method::POST, "/api/v1/api-tokens")
            .json(&json!({"name": "x", "roles": ["wizard"]}))
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/token",
    )
    .await;
}

#[tokio::test]
async fn token_mint_validation() {
    let a = Admin::start();
    let s = &a.s;
    let post = |body: serde_json::Value| {
        call(s, &a.token, Method::POST, "/api/v1/api-tokens")
            .json(&body)
            .send()
    };
    assert_problem(
        post(json!({"name": "x"})).await.unwrap(),
        422,
        "svc:validation/token",
    )
    .await;
    assert_problem(
        post(json!({"scopes": ["*:*"]})).await.unwrap(),
        422,
        "svc:validation/name",
    )
    .await;
    assert_problem(
        post(json!({"name": "x", "scopes": ["nonsense"]}))
            .await
            .unwrap(),
        422,
        "svc:validation/token",
    )
    .await;
    assert_problem(
        post(json!({"name": "x", "scopes": ["*:*"], "ipBind": ["300.0.0.0/8"]}))
            .await
            .unwrap(),
        422,
        "svc:validation/cidr",
    )
    .await;
    assert_problem(
        post(json!({"name": "x", "scopes": ["*:*"], "expiresAt": "tomorrow"}))
            .await
            .unwrap(),
        422,
        "svc:validation/expiresAt",
    )
    .await;
    assert_problem(
        post(json!({"name": "x", "scopes": ["*:*"], "expiresAt": "2001-01-01T00:00:00Z"}))
            .await
            .unwrap(),
        422,
        "svc:validation/expiresAt",
    )
    .await;

    let raw = |body: Vec<u8>| {
        call(s, &a.token, Method::POST, "/api/v1/api-tokens")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    assert_problem(
        raw(b"{not json".to_vec()).await.unwrap(),
        422,
        "svc:validation/body",
    )
    .await;
    let big = format!(
        "{{\"name\":\"{}\",\"scopes\":[\"*:*\"]}}",
        "x".repeat(1024 * 1024)
    );
    assert_problem(
        raw(big.into_bytes()).await.unwrap(),
        413,
        "svc:validation/size",
    )
    .await;

    // No privilege escalation through minting.
    let (limited, _) = mint(
        s,
        &a.token,
        json!({"name": "l", "scopes": ["admin:tokens"]}),
    )
    .await;
    let res = call(s, &limited, Method::POST, "/api/v1/api-tokens")
        .json(&json!({"name": "up", "scopes": ["*:*"]}))
        .send()
        .await
        .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let list = json(
        call(s, &a.token, Method::GET, "/api/v1/api-tokens")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        2,
        "failed mints stored nothing: {list}"
    );
    assert!(
        !list.to_string().contains("secretHash") && !list.to_string().contains("$"),
        "no hashes in the API"
    );
}

#[tokio::test]
async fn expiry_and_ip_binding_are_checked_on_every_request() {
    let a = Admin::start();
    let s = &a.s;
    let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(1500);
    let (short, meta) = mint(
        s,
        &a.token,
        json!({"name": "short", "scopes": ["objects:read"], "expiresAt": soon.to_string()}),
    )
    .await;
    assert!(meta["expiresAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        call(s, &short, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let doc = assert_problem(
        call(s, &short, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    assert!(doc["detail"].as_str().unwrap().contains("expired"));

    let (elsewhere, _) = mint(
        s,
        &a.token,
        json!({"name": "lan", "scopes": ["objects:read"], "ipBind": ["10.0.0.0/8"]}),
    )
    .await;
    let doc = assert_problem(
        call(s, &elsewhere, Method::GET, "/api/v1/whoami")
            .header("X-Forwarded-For", "10.1.1.1")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    assert!(doc["detail"].as_str().unwrap().contains("address"), "{doc}");
    let (local, _) = mint(
        s,
        &a.token,
        json!({"name": "lo", "scopes": ["objects:read"], "ipBind": ["127.0.0.0/8", "::1/128"]}),
    )
    .await;
    assert_eq!(
        call(s, &local, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn rotate_and_revoke_kill_the_old_secret_at_once() {
    let a = Admin::start();
    let s = &a.s;
    let (old, meta) = mint(
        s,
        &a.token,
        json!({"name": "r", "scopes": ["objects:read"]}),
    )
    .await;
    let id = meta["id"].as_str().unwrap();
    assert_eq!(
        call(s, &old, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "now cached"
    );
    let rotated = json(
        call(
            s,
            &a.token,
            Method::POST,
            &format!("/api/v1/api-tokens/{id}:rotate"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let new = rotated["token"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(rotated["meta"]["version"], 2);
    assert_problem(
        call(s, &old, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    assert_eq!(
        call(s, new, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    let res = call(
        s,
        &a.token,
        Method::DELETE,
        &format!("/api/v1/api-tokens/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 204);
    assert_problem(
        call(s, new, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    assert_problem(
        call(
            s,
            &a.token,
            Method::DELETE,
            &format!("/api/v1/api-tokens/{id}"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        call(
            s,
            &a.token,
            Method::POST,
            &format!("/api/v1/api-tokens/{id}:rotate"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        call(
            s,
            &a.token,
            Method::POST,
            "/api/v1/api-tokens/not-a-uuid:rotate",
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    // The verb belongs to the path: GET on it is 405, an unknown verb is 404.
    assert_eq!(
        call(
            s,
            &a.token,
            Method::GET,
            &format!("/api/v1/api-tokens/{id}:rotate")
        )
        .send()
        .await
        .unwrap()
        .status(),
        405
    );
    assert_eq!(
        call(
            s,
            &a.token,
            Method::POST,
            &format!("/api/v1/api-tokens/{id}:explode")
        )
        .send()
        .await
        .unwrap()
        .status(),
        405
    );
}

#[tokio::test]
async fn tenants_and_tenant_selection() {
    let a = Admin::start();
    let s = &a.s;
    let post = |body: serde_json::Value| {
        call(s, &a.token, Method::POST, "/api/v1/tenants")
            .json(&body)
            .send()
    };
    let t = json(
        post(json!({"name": "Plant B", "slug": "plant-b"}))
            .await
            .unwrap(),
        201,
    )
    .await;
    assert_uuid_v7(t["id"].as_str().unwrap());
    assert_eq!(t["version"], 1);
    assert_problem(
        post(json!({"name": "again", "slug": "plant-b"}))
            .await
            .unwrap(),
        409,
        "svc:conflict/duplicate",
    )
    .await;
    assert_problem(
        post(json!({"name": "bad", "slug": "Plant B"}))
            .await
            .unwrap(),
        422,
        "svc:validation/tenant",
    )
    .await;
    assert_problem(
        post(json!({"name": "", "slug": "ok"})).await.unwrap(),
        422,
        "svc:validation/name",
    )
    .await;
    let tb = t["id"].as_str().unwrap();

    // An admin:tenants holder acts in tenant B; whoami keeps the home tenant.
    let (b_token, b_meta) = mint_in(
        s,
        &a.token,
        tb,
        json!({"name": "in-b", "scopes": ["admin:tokens"]}),
    )
    .await;
    assert_eq!(b_meta["tenantId"], tb);
    let me = json(
        call(s, &a.token, Method::GET, "/api/v1/whoami")
            .header("X-Service-Tenant", tb)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_ne!(me["tenantId"], tb);
    let me_b = json(
        call(s, &b_token, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(me_b["tenantId"], tb);
    let in_b = json(
        call(s, &a.token, Method::GET, "/api/v1/api-tokens")
            .header("X-Service-Tenant", tb)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(in_b["items"].as_array().unwrap().len(), 1);
    assert_problem(
        call(s, &a.token, Method::GET, "/api/v1/api-tokens")
            .header("X-Service-Tenant", "0190a000-0000-7000-8000-000000000000")
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/tenant",
    )
    .await;

    // Without admin:tenants the header is ignored: B's token still sees only B.
    let default_id = default_tenant(s, &a.token).await;
    let seen = json(
        call(s, &b_token, Method::GET, "/api/v1/api-tokens")
            .header("X-Service-Tenant", &default_id)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(
        seen["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["tenantId"] == tb)
    );
    assert_problem(
        call(s, &b_token, Method::GET, "/api/v1/tenants")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
}

#[tokio::test]
async fn api_tokens_are_tenant_isolated() {
    let a = Admin::start();
    let s = &a.s;
    let (_, meta) = mint(
        s,
        &a.token,
        json!({"name": "mine", "scopes": ["objects:read"]}),
    )
    .await;
    let id = meta["id"].as_str().unwrap();
    let (_, other) = second_tenant(s, &a.token, "other").await;
    assert_isolated(
        s,
        &other,
        &[
            (Method::DELETE, format!("/api/v1/api-tokens/{id}")),
            (Method::POST, format!("/api/v1/api-tokens/{id}:rotate")),
        ],
        &["/api/v1/api-tokens", "/api/v1/audit"],
        id,
    )
    .await;
    // And it is all still there for its own tenant.
    let mine = json(
        call(s, &a.token, Method::GET, "/api/v1/api-tokens")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(mine.to_string().contains(id));
}

async fn entries(s: &Server, token: &str, query: &str) -> Vec<serde_json::Value> {
    let v = json(
        call(s, token, Method::GET, &format!("/api/v1/audit{query}"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    v["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn every_mutation_is_audited_in_a_chain() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let res = call(s, &a.token, Method::POST, "/api/v1/api-tokens")
        .json(&json!({"name": "audited", "scopes": ["objects:read"]}))
        .send()
        .await
        .unwrap();
    let request_id = res.headers()["x-request-id"].to_str().unwrap().to_string();
    let id = json(res, 201).await["meta"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    call(
        s,
        &a.token,
        Method::POST,
        &format!("/api/v1/api-tokens/{id}:rotate"),
    )
    .send()
    .await
    .unwrap();
    call(
        s,
        &a.token,
        Method::DELETE,
        &format!("/api/v1/api-tokens/{id}"),
    )
    .send()
    .await
    .unwrap();

    let all = entries(s, &a.token, "").await;
    let actions: Vec<&str> = all.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "token.delete",
            "token.rotate",
            "token.create",
            "token.create"
        ],
        "newest first"
    );
    let create = &all[2];
    assert_eq!(create["requestId"], request_id);
    assert_eq!(create["actorType"], "token");
    assert_eq!(create["sourceIp"], "127.0.0.1");
    assert_eq!(create["resource"], format!("api-token/{id}"));
    assert_eq!(create["after"]["name"], "audited");
    assert_eq!(all[3]["actorType"], "system", "bootstrap");
    assert_eq!(all[3]["prevHash"], "0".repeat(64));
    for pair in all.windows(2) {
        assert_eq!(pair[0]["prevHash"], pair[1]["hash"]);
    }
    // Filters and pagination.
    assert_eq!(entries(s, &a.token, "?action=token.rotate").await.len(), 1);
    assert_eq!(entries(s, &a.token, "?actorType=system").await.len(), 1);
    assert_eq!(entries(s, &a.token, "?afterSeq=2").await.len(), 2);
    let page = json(
        call(s, &a.token, Method::GET, "/api/v1/audit?limit=3")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(page["nextCursor"], "2");
    let rest = entries(s, &a.token, "?limit=3&cursor=2").await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["seq"], 1);
    // Export: NDJSON oldest first.
    let res = call(s, &a.token, Method::GET, "/api/v1/audit:export")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<serde_json::Value> = res
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["seq"], 1);
    let v = json(
        call(s, &a.token, Method::POST, "/api/v1/audit:verify")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(v, json!({"intact": true, "verified": 4}));
}

/// The stored audit entries of the stopped server on `data`, in order.
fn stored_audit(data: &std::path::Path) -> Vec<svc::model::audit::AuditEntry> {
    if super::postgres::enabled() {
        return super::postgres::rows(data, "audit_entry_by_seq")
            .into_iter()
            .map(|(_, v)| rmp_serde::from_slice(&v).unwrap())
            .collect();
    }
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(data.join("svc.redb")).unwrap();
    let tx = db.begin_read().unwrap();
    let t = tx.open_table(AUDIT_TABLE).unwrap();
    t.iter()
        .unwrap()
        .map(|r| rmp_serde::from_slice(r.unwrap().1.value()).unwrap())
        .collect()
}

const AUDIT_TABLE: redb::TableDefinition<u64, &[u8]> =
    redb::TableDefinition::new("audit_entry_by_seq");

/// Stores `entries` over the stopped server's, and the chain head `head` when given, behind
/// its back.
fn store_audit(
    data: &std::path::Path,
    entries: &[svc::model::audit::AuditEntry],
    head: Option<serde_json::Value>,
) {
    let head = head.map(|h| rmp_serde::to_vec_named(&h).unwrap());
    if super::postgres::enabled() {
        for e in entries {
            let row = rmp_serde::to_vec_named(e).unwrap();
            super::postgres::put(data, "audit_entry_by_seq", &e.seq.to_be_bytes(), &row);
        }
        if let Some(head) = head {
            super::postgres::put(data, "meta", b"audit_head", &head);
        }
        return;
    }
    let db = redb::Database::create(data.join("svc.redb")).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut t = tx.open_table(AUDIT_TABLE).unwrap();
        for e in entries {
            t.insert(e.seq, rmp_serde::to_vec_named(e).unwrap().as_slice())
                .unwrap();
        }
        if let Some(head) = head {
            let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
            tx.open_table(meta)
                .unwrap()
                .insert("audit_head", head.as_slice())
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

fn rewrite_audit(data: &std::path::Path, f: impl Fn(u64, &mut svc::model::audit::AuditEntry)) {
    let mut entries = stored_audit(data);
    for e in &mut entries {
        f(e.seq, e);
    }
    store_audit(data, &entries, None);
}

async fn verify(s: &Server, token: &str) -> serde_json::Value {
    json(
        call(s, token, Method::POST, "/api/v1/audit:verify")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await
}

#[tokio::test]
async fn a_tampered_store_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = bootstrap(&data);
    let s = Server::start_in(&data, Opts::default());
    for i in 0..3 {
        mint(
            &s,
            &token,
            json!({"name": format!("t{i}"), "scopes": ["objects:read"]}),
        )
        .await;
    }
    assert!(s.stop().success());

    // One altered entry.
    rewrite_audit(&data, |seq, v| {
        if seq == 2 {
            v.action = "token.innocent".into();
        }
    });
    let s = Server::start_in(&data, Opts::default());
    let v = verify(&s, &token).await;
    assert_eq!(v["intact"], false);
    assert_eq!(v["verified"], 1);
    assert!(v["error"].as_str().unwrap().contains("entry 2"), "{v}");
    assert!(s.stop().success());

    // The whole chain rewritten consistently from entry 2 on: only the checkpoint written at
    // the last clean shutdown tells.
    relink(&data);
    let s = Server::start_in(&data, Opts::default());
    let v = verify(&s, &token).await;
    assert_eq!(v["intact"], false, "{v}");
    assert!(v["error"].as_str().unwrap().contains("checkpoint"), "{v}");
}

/// Re-chains every entry after a forgery so that only the checkpoint can tell.
fn relink(data: &std::path::Path) {
    let mut entries = stored_audit(data);
    let mut prev = svc::model::audit::GENESIS_HASH.to_string();
    for e in &mut entries {
        if e.seq == 2 {
            e.action = "token.innocent".into();
        }
        e.prev_hash = prev.clone();
        e.hash = svc::model::audit::chain_hash(e);
        prev = e.hash.clone();
    }
    let head = json!({"seq": entries.last().unwrap().seq, "hash": prev});
    store_audit(data, &entries, Some(head));
}

#[tokio::test]
async fn last_used_is_recorded_off_the_request_path() {
    let a = Admin::start();
    let s = &a.s;
    let (t, meta) = mint(
        s,
        &a.token,
        json!({"name": "used", "scopes": ["objects:read"]}),
    )
    .await;
    assert!(meta.get("lastUsedAt").is_none());
    call(s, &t, Method::GET, "/api/v1/whoami")
        .send()
        .await
        .unwrap();
    let id = meta["id"].as_str().unwrap();
    for _ in 0..80 {
        let list = json(
            call(s, &a.token, Method::GET, "/api/v1/api-tokens")
                .send()
                .await
                .unwrap(),
            200,
        )
        .await;
        let me = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == id)
            .unwrap()
            .clone();
        if let Some(at) = me.get("lastUsedAt") {
            assert!(at.as_str().unwrap().ends_with('Z'));
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("lastUsedAt never recorded");
}

#[tokio::test]
async fn directory_endpoints_say_unconfigured() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    assert_problem(
        call(s, &a.token, Method::GET, "/api/v1/directory/status")
            .send()
            .await
            .unwrap(),
        501,
        "svc:directory/unconfigured",
    )
    .await;
    assert_problem(
        call(s, &a.token, Method::POST, "/api/v1/directory:sync")
            .send()
            .await
            .unwrap(),
        501,
        "svc:directory/unconfigured",
    )
    .await;
    assert_problem(
        s.get("/api/v1/directory/status").await,
        401,
        "svc:auth/required",
    )
    .await;
}

#[tokio::test]
async fn the_audit_checkpoint_is_written_every_1000_entries() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let checkpoint = s.data.join("audit.checkpoint");
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&checkpoint).unwrap()).unwrap()
    };
    assert_eq!(
        read()["seq"],
        1,
        "bootstrap closed the store with its one entry"
    );
    // bootstrap wrote entry 1; 999 more mutations reach seq 1000.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (base, token) = (s.base.clone(), a.token.clone());
            tokio::spawn(async move {
                let http = client();
                for i in 0..250 {
                    if w == 3 && i == 249 {
                        break;
                    }
                    let email = format!("cp-{w}-{i}@example.org");
                    let res = http
                        .post(format!("{base}/api/v1/users"))
                        .bearer_auth(&token)
                        .json(&json!({"name": "c", "email": email}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(res.status(), 201);
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let head = read();
    assert_eq!(
        head["seq"], 1000,
        "written while running, at the 1000th entry"
    );
    let entry = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/audit?afterSeq=999&limit=1",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(entry["items"][0]["hash"], head["hash"]);
}

#[tokio::test]
async fn branding_preferences_and_push_subscriptions_need_an_identity() {
    let a = Admin::start();
    let s = &a.s;
    for (method, path) in [
        (Method::GET, "/api/v1/branding"),
        (Method::PUT, "/api/v1/branding"),
        (Method::GET, "/api/v1/users/me/preferences"),
        (Method::PUT, "/api/v1/users/me/preferences"),
        (Method::POST, "/api/v1/push-subscriptions"),
        (Method::DELETE, "/api/v1/push-subscriptions"),
    ] {
        let anonymous = s
            .http
            .request(method.clone(), s.url(path))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_problem(anonymous, 401, "svc:auth/required").await;
    }

    let branding = "/api/v1/branding";
    assert_eq!(
        json(
            call(s, &a.token, Method::GET, branding)
                .send()
                .await
                .unwrap(),
            200
        )
        .await,
        json!({})
    );
    let set = send(
        s,
        &a.token,
        Method::PUT,
        branding,
        json!({"mode": "dark", "theme": "ocean"}),
    )
    .await;
    assert_eq!(
        json(set, 200).await,
        json!({"mode": "dark", "theme": "ocean"})
    );
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(
        json(
            call(s, &viewer, Method::GET, branding)
                .send()
                .await
                .unwrap(),
            200
        )
        .await["theme"],
        "ocean"
    );
    let refused = send(s, &viewer, Method::PUT, branding, json!({"mode": "light"})).await;
    assert_problem(refused, 403, "svc:auth/forbidden").await;
    let typo = send(s, &a.token, Method::PUT, branding, json!({"colour": "red"})).await;
    let p = assert_problem(typo, 422, "svc:validation/branding").await;
    assert!(p["detail"].as_str().unwrap().contains("colour"), "{p}");
    let no_logo = s.http.get(s.url("/branding/logo")).send().await.unwrap();
    assert_eq!(no_logo.status(), 404);
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9C0QAAAABJRU5ErkJggg==";
    let look = json!({"mode": "dark", "name": "Leitstelle Nord", "accentColor": "#0a7d3b", "logo": format!("data:image/png;base64,{png}")});
    let set = send(s, &a.token, Method::PUT, branding, look.clone()).await;
    assert_eq!(json(set, 200).await, look);
    let logo = s.http.get(s.url("/branding/logo")).send().await.unwrap();
    assert_eq!(
        logo.status(),
        200,
        "the sign-in page shows it: no identity needed"
    );
    assert_eq!(logo.headers()["content-type"], "image/png");
    assert_eq!(logo.headers()["x-content-type-options"], "nosniff");
    assert_eq!(&logo.bytes().await.unwrap()[..4], b"\x89PNG");
    for (bad, why) in [
        (json!({"name": "x".repeat(65)}), "64"),
        (json!({"name": "two\nlines"}), "control"),
        (json!({"accentColor": "red"}), "#rrggbb"),
        (json!({"accentColor": "#12345g"}), "#rrggbb"),
        (json!({"logo": "https://example.org/logo.png"}), "data: URI"),
        (
            json!({"logo": format!("data:image/svg+xml;base64,{png}")}),
            "PNG, JPEG or WebP",
        ),
        (
            json!({"logo": "data:image/png;base64,PHN2Zz48L3N2Zz4="}),
            "not a image/png",
        ),
        (
            json!({"logo": format!("data:image/png;base64,{}", "A".repeat(90_000))}),
            "64 KiB",
        ),
        (json!({"logo": "data:image/png;base64,@@@@"}), "decode"),
    ] {
        let res = send(s, &a.token, Method::PUT, branding, bad.clone()).await;
        let p = assert_problem(res, 422, "svc:validation/branding").await;
        assert!(p["detail"].as_str().unwrap().contains(why), "{bad}: {p}");
    }
    assert_eq!(
        get(s, &a.token, branding).await,
        look,
        "refused brandings leave the kept one"
    );

    let mine = "/api/v1/users/me/preferences";
    assert_eq!(
        json(
            call(s, &viewer, Method::GET, mine).send().await.unwrap(),
            200
        )
        .await,
        json!({})
    );
    let prefs = json!({"refreshIntervalMs": 5000, "extra": {"density": "compact"}});
    assert_eq!(
        json(
            send(s, &viewer, Method::PUT, mine, prefs.clone()).await,
            200
        )
        .await,
        prefs
    );
    assert_eq!(
        json(
            call(s, &viewer, Method::GET, mine).send().await.unwrap(),
            200
        )
        .await,
        prefs
    );
    assert_eq!(
        json(
            call(s, &a.token, Method::GET, mine).send().await.unwrap(),
            200
        )
        .await,
        json!({}),
        "preferences are the caller's own"
    );
    let bad = send(
        s,
        &viewer,
        Method::PUT,
        mine,
        json!({"refreshIntervalMs": "often"}),
    )
    .await;
    assert_problem(bad, 422, "svc:validation/preferences").await;
    let other = format!("/api/v1/users/{}/preferences", uuid_of_nobody());
    let forbidden = call(s, &viewer, Method::GET, &other).send().await.unwrap();
    assert_problem(forbidden, 403, "svc:auth/forbidden").await;
    let unknown = call(s, &a.token, Method::GET, &other).send().await.unwrap();
    assert_problem(unknown, 404, "svc:not-found").await;

    let subs = "/api/v1/push-subscriptions";
    let sub = json!({"endpoint": "https://push.example.org/send/abc", "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}});
    let created = send(s, &viewer, Method::POST, subs, sub.clone()).await;
    assert_eq!(json(created, 201).await, sub);
    let no_keys = send(
        s,
        &viewer,
        Method::POST,
        subs,
        json!({"endpoint": "https://push.example.org/x"}),
    )
    .await;
    assert_problem(no_keys, 422, "svc:validation/keys").await;
    let bad_endpoint = send(
        s,
        &viewer,
        Method::POST,
        subs,
        json!({"endpoint": "push me", "keys": "AAAA"}),
    )
    .await;
    assert_problem(bad_endpoint, 422, "svc:validation/endpoint").await;
    let gone = send(
        s,
        &viewer,
        Method::DELETE,
        subs,
        json!({"endpoint": "https://push.example.org/send/abc"}),
    )
    .await;
    assert_eq!(gone.status(), 204);
    let audit = entries(s, &a.token, "?action=push-subscription.create").await;
    assert_eq!(audit.len(), 1, "{audit:?}");
}

fn uuid_of_nobody() -> &'static str {
    "0190c6a4-0000-7000-8000-000000000001"
}
