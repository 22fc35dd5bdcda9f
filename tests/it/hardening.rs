//! Nothing a client sends may crash the server or leave a data directory that does not start:
//! the probes of issue 13, each answered with a 4xx problem, a live server and a restart that
//! works on the same data directory.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use svc::store::{TxResult, Wrote};

async fn alive(s: &Server) {
    let res = s.get("/healthz").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "ok");
}

/// Stops the server and starts it again on the same data directory.
fn restart(a: Admin) -> Admin {
    Admin {
        s: a.s.restart(),
        token: a.token,
    }
}

/// A GET answered 200 with JSON.
async fn hosts(s: &Server, token: &str) -> Value {
    get(s, token, "/api/v1/hosts").await
}

/// A POST answered 201 with JSON.
async fn create(s: &Server, token: &str, path: &str, body: Value) -> Value {
    json(send(s, token, Method::POST, path, body).await, 201).await
}

async fn post_yaml(s: &Server, token: &str, path: &str, body: String) -> reqwest::Response {
    call(s, token, Method::POST, path)
        .header("Content-Type", "application/yaml")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_template_chain_grown_link_by_link_stops_at_the_limit() {
    let a = Admin::start();
    let (s, t) = (&a.s, &a.token);
    create(
        s,
        t,
        "/api/v1/templates",
        json!({"name": "e-0", "spec": {"interval": 60}}),
    )
    .await;
    create(
        s,
        t,
        "/api/v1/hosts",
        json!({"name": "h", "spec": {"templates": ["e-0"]}}),
    )
    .await;
    // e-0 → e-1 → … → e-k: each round adds a template and makes the last link import it.
    let mut refused = None;
    for k in 1..40 {
        create(
            s,
            t,
            "/api/v1/templates",
            json!({"name": format!("e-{k}"), "spec": {}}),
        )
        .await;
        let res = call(s, t, Method::PUT, &format!("/api/v1/templates/e-{}", k - 1))
            .header("If-Match", "1")
            .json(&json!({"spec": {"templates": [format!("e-{k}")]}}))
            .send()
            .await
            .unwrap();
        if res.status() != 200 {
            let doc = assert_problem(res, 422, "svc:validation/spec").await;
            refused = Some((k, doc));
            break;
        }
    }
    let (k, doc) = refused.expect("the chain was never refused");
    assert_eq!(k, 32, "32 templates deep is the limit: {doc}");
    let detail = doc["detail"].as_str().unwrap();
    assert!(detail.contains("deeper than 32"), "{detail}");
    assert!(
        detail.contains("e-0 → e-1 → e-2") && detail.ends_with("e-31 → e-32"),
        "{detail}"
    );
    alive(s).await;

    let a = restart(a);
    alive(&a.s).await;
    let hosts = hosts(&a.s, &a.token).await;
    let id = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let eff = json(
        call(
            &a.s,
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
    assert_eq!(eff["templateChain"].as_array().unwrap().len(), 32, "{eff}");
}

/// A bundle of `n` templates, each importing the next, and a host naming the head.
fn deep_bundle(n: usize) -> String {
    let mut docs: Vec<String> = (0..n)
        .map(|i| {
            let imports = if i + 1 < n {
                format!("[d-{}]", i + 1)
            } else {
                "[]".into()
            };
            format!("kind: templates\nname: d-{i}\nbody:\n  spec: {{templates: {imports}}}\n")
        })
        .collect();
    docs.push("kind: host\nname: deep\nbody:\n  spec: {templates: [d-0]}\n".into());
    docs.join("---\n")
}

#[tokio::test]
async fn a_deep_template_chain_in_one_bundle_is_refused() {
    let a = Admin::start();
    let (s, t) = (&a.s, &a.token);
    for path in [
        "/api/v1/config/bundles:plan",
        "/api/v1/config/bundles:apply",
    ] {
        let doc = assert_problem(
            post_yaml(s, t, path, deep_bundle(2_000)).await,
            422,
            "svc:validation/bundle",
        )
        .await;
        assert!(
            doc["detail"].as_str().unwrap().contains("deeper than 32"),
            "{doc}"
        );
    }
    let cycle = "kind: templates\nname: a\nbody: {spec: {templates: [b]}}\n---\nkind: templates\nname: b\nbody: {spec: {templates: [a]}}\n";
    let doc = assert_problem(
        post_yaml(s, t, "/api/v1/config/bundles:apply", cycle.into()).await,
        422,
        "svc:validation/bundle",
    )
    .await;
    assert!(
        doc["detail"].as_str().unwrap().contains("template cycle"),
        "{doc}"
    );
    alive(s).await;
    // 32 deep applies.
    let applied = json(
        post_yaml(s, t, "/api/v1/config/bundles:apply", deep_bundle(32)).await,
        200,
    )
    .await;
    assert_eq!(applied["applied"], true);
    let a = restart(a);
    alive(&a.s).await;
    let hosts = hosts(&a.s, &a.token).await;
    assert_eq!(hosts["items"][0]["name"], "deep");
}

/// Expressions that overflowed the CEL compiler's stack or panicked in its parser.
fn hostile_cel() -> Vec<(&'static str, String)> {
    vec![
        (
            "5,000 member accesses",
            format!("event{}", ".a".repeat(5_000)),
        ),
        ("5,000 indexes", format!("event{}", "[0]".repeat(5_000))),
        (
            "5,000 size() calls",
            format!("event{}", ".size()".repeat(5_000)),
        ),
        ("a sum of 10,000 terms", format!("1{}", "+1".repeat(9_999))),
        (
            "size( 20,000 deep",
            format!("{}1{}", "size(".repeat(20_000), ")".repeat(20_000)),
        ),
        (
            "{'a': 20,000 deep",
            format!("{}1{}", "{'a':".repeat(20_000), "}".repeat(20_000)),
        ),
        // Short enough for the length limit, caught by nesting and operator count.
        (
            "40 nested calls",
            format!("{}1{}", "size(".repeat(40), ")".repeat(40)),
        ),
        ("1,100 additions", format!("1{}", "+1".repeat(1_100))),
    ]
}

#[tokio::test]
async fn cel_that_would_crash_the_compiler_is_refused_with_422() {
    let a = Admin::start();
    let (s, t) = (&a.s, &a.token);
    let (viewer, _) = mint(s, t, json!({"name": "viewer", "roles": ["viewer"]})).await;
    create(
        s,
        t,
        "/api/v1/alert-rules",
        json!({"name": "r", "match": "true", "severity": "critical"}),
    )
    .await;
    for (what, expr) in hostile_cel() {
        let rule = json!({"name": "x", "match": expr, "severity": "critical"});
        let doc = assert_problem(
            send(s, t, Method::POST, "/api/v1/alert-rules", rule.clone()).await,
            422,
            "svc:validation/match",
        )
        .await;
        assert!(
            doc["detail"].as_str().unwrap().starts_with("match: "),
            "{what}: {doc}"
        );
        let res = call(s, t, Method::PUT, "/api/v1/alert-rules/r")
            .header("If-Match", "1")
            .json(&rule)
            .send()
            .await
            .unwrap();
        assert_problem(res, 422, "svc:validation/match").await;
        let bundle = format!(
            "kind: alert-rules\nname: x\nbody:\n  match: {}\n  severity: critical\n",
            json!(expr)
        );
        let as_json = json!([{"kind": "alert-rules", "name": "x", "body": {"match": expr, "severity": "critical"}}]).to_string();
        // `:plan` needs only objects:read: a viewer could stop the server with it. (In YAML
        // the bracket bound may refuse the text first; JSON reaches the CEL check.)
        let doc = assert_problem(
            post_yaml(s, &viewer, "/api/v1/config/bundles:plan", as_json).await,
            422,
            "svc:validation/bundle",
        )
        .await;
        assert!(
            doc["detail"].as_str().unwrap().contains("match: "),
            "{what}: {doc}"
        );
        assert_problem(
            post_yaml(s, t, "/api/v1/config/bundles:apply", bundle).await,
            422,
            "svc:validation/bundle",
        )
        .await;
        alive(s).await;
    }
    let clear = json!({"name": "y", "match": "true", "clear": format!("{}1{}", "(".repeat(50), ")".repeat(50)), "severity": "critical"});
    assert_problem(
        send(s, t, Method::POST, "/api/v1/alert-rules", clear).await,
        422,
        "svc:validation/clear",
    )
    .await;
    let syntax = json!({"name": "z", "match": "event.severity ==", "severity": "critical"});
    assert_problem(
        send(s, t, Method::POST, "/api/v1/alert-rules", syntax).await,
        422,
        "svc:validation/match",
    )
    .await;
    let rule = get(s, t, "/api/v1/alert-rules/r").await;
    assert_eq!(rule["match"], "true", "nothing stored was changed");
    let a = restart(a);
    alive(&a.s).await;
}

#[tokio::test]
async fn repeated_query_parameters_and_bad_percent_encoding_are_not_plain_text() {
    let a = Admin::start();
    let (s, t) = (&a.s, &a.token);
    for name in ["h1", "h2", "h3"] {
        create(s, t, "/api/v1/hosts", json!({"name": name, "spec": {}})).await;
    }
    // The first value wins, as the reference's handlers read it.
    let page = get(s, t, "/api/v1/hosts?limit=1&limit=2").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
    let page = get(s, t, "/api/v1/hosts?q=%FF&q=h").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 0, "{page}");
    for path in [
        "/api/v1/objects/%FF",
        "/api/v1/templates/%C3%28",
        "/api/v1/users/%E2%82",
    ] {
        assert_problem(
            call(s, t, Method::GET, path).send().await.unwrap(),
            404,
            "svc:not-found",
        )
        .await;
    }
    let res = call(s, t, Method::PUT, "/api/v1/templates/%FF")
        .header("If-Match", "1")
        .json(&json!({"spec": {}}))
        .send()
        .await
        .unwrap();
    assert_problem(res, 404, "svc:not-found").await;
    alive(s).await;
}

/// A secret with a real token's lookup prefix and a random rest: each one used to cost a full
/// argon2 verification.
pub fn forged(real: &str, i: usize) -> String {
    format!("{}{:040x}", &real[..12], i as u128 * 0x9e37_79b9_7f4a_7c15)
}

#[tokio::test]
async fn failed_token_verifications_are_throttled_per_address() {
    let a = Admin::start();
    let (s, t) = (&a.s, &a.token);
    let (real, _) = mint(s, t, json!({"name": "ops", "scopes": ["objects:read"]})).await;
    get(s, &real, "/api/v1/whoami").await;
    let mut invalid = 0;
    let mut throttled = None;
    for i in 0..40 {
        let res = call(s, &forged(&real, i), Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap();
        match res.status().as_u16() {
            401 => {
                assert_problem(res, 401, "svc:auth/invalid").await;
                invalid += 1;
            }
            429 => {
                throttled = Some(res);
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(invalid, 20, "a burst of 20 failures is allowed");
    let res = throttled.expect("never throttled");
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_problem(res, 429, "svc:auth/throttled").await;
    // A token already verified keeps working from the same address; unknown prefixes cost
    // nothing and stay plain 401s.
    get(s, &real, "/api/v1/whoami").await;
    let unknown = format!("svc_{}", "0".repeat(48));
    assert_problem(
        call(s, &unknown, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    // One failure back after the refill period.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    let res = call(s, &forged(&real, 1_000), Method::GET, "/api/v1/whoami")
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:auth/invalid").await;
    alive(s).await;
}

/// Makes `old-0`, already stored, the head of a template chain `depth` deep, written straight
/// into a stopped store as one written before the limit existed could hold it.
async fn deepen_stored_chain(data: &std::path::Path, depth: usize) {
    use svc::model::Timestamp;
    use svc::model::audit::AuditDraft;
    use svc::model::config::ConfigDoc;
    use svc::model::identity::Actor;
    let now = Timestamp(jiff::Timestamp::now());
    let store = super::support::open_store(data);
    let tenant = store
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.slug == "default")
        .unwrap()
        .id;
    let audit = move |name: &str| {
        AuditDraft::new(
            now,
            tenant,
            &Actor::system("test"),
            "template.create",
            format!("templates/{name}"),
        )
    };
    for i in 1..depth {
        let name = format!("old-{i}");
        let imports: Vec<String> = (i + 1 < depth)
            .then(|| format!("old-{}", i + 1))
            .into_iter()
            .collect();
        let doc = ConfigDoc {
            id: uuid::Uuid::now_v7(),
            tenant_id: tenant,
            kind: "templates".into(),
            name: name.clone(),
            created_at: now,
            updated_at: now,
            version: 1,
            body: json!({"kind": "host", "spec": {"templates": imports}}).to_string(),
        };
        let audit = audit(&name);
        store
            .transact(move |tx| -> TxResult<_> {
                tx.insert_config_doc(&doc)?;
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
    }
    let head = json!({"kind": "host", "spec": {"templates": ["old-1"], "checkCommand": "tcp"}})
        .to_string();
    let audit = audit("old-0");
    store
        .transact(move |tx| -> TxResult<_> {
            let old = tx.config_doc(tenant, "templates", "old-0")?.unwrap();
            tx.put_config_doc(&ConfigDoc {
                body: head,
                version: old.version + 1,
                ..old
            })?;
            tx.record([audit], Vec::new())?;
            Ok(Wrote::Changed(()))
        })
        .await
        .unwrap();
    store.close();
}

async fn host_state(s: &Server, token: &str) -> Value {
    hosts(s, token).await["items"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_holding_a_chain_over_the_limit_starts_and_reports_it() {
    let a = Admin::start();
    create(
        &a.s,
        &a.token,
        "/api/v1/templates",
        json!({"name": "old-0", "spec": {}}),
    )
    .await;
    let host = create(
        &a.s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "legacy", "spec": {"templates": ["old-0"]}}),
    )
    .await;
    let id = host["id"].as_str().unwrap().to_string();
    let stopped = a.s.stop_keeping_data();
    deepen_stored_chain(&stopped.data, 2_000).await;
    let s = stopped.start(Opts::default());
    alive(&s).await;
    let t = &a.token;
    let doc = assert_problem(
        call(
            &s,
            t,
            Method::GET,
            &format!("/api/v1/objects/{id}/effective-config"),
        )
        .send()
        .await
        .unwrap(),
        422,
        "svc:validation/spec",
    )
    .await;
    assert!(
        doc["detail"].as_str().unwrap().contains("deeper than 32"),
        "{doc}"
    );
    // The object reports the configuration error as its state.
    assert_eq!(check_now(&s, t, &id).await.status(), 202);
    let mut state = Value::Null;
    for _ in 0..100 {
        state = host_state(&s, t).await;
        if !state["state"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let output = state["state"]["output"].as_str().unwrap_or_default();
    assert!(
        output.starts_with("UNKNOWN - configuration error: template chain deeper than 32"),
        "{state}"
    );
    let s = s.restart();
    alive(&s).await;
    assert!(!host_state(&s, t).await["state"].is_null());
}
