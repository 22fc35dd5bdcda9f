//! Hosts and services: CRUD, the rename guard, If-Match, cascades, list filters on real lists,
//! batches with partial failure, effective configuration and tenant isolation.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

async fn post(s: &Server, token: &str, path: &str, body: Value) -> reqwest::Response {
    call(s, token, Method::POST, path)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn hosts_and_services_lifecycle() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let res = post(s, &a.token, "/api/v1/hosts", json!({"name": "web1", "folder": "/plant/line1", "labels": {"env": "prod"}, "spec": {"address": "127.0.0.1", "interval": "1m", "maxCheckAttempts": 3}})).await;
    assert_eq!(res.headers()["etag"], "\"1\"");
    let host = json(res, 201).await;
    assert_eq!(host["kind"], "host");
    assert_eq!(host["spec"]["interval"], "1m0s");
    assert_uuid_v7(host["id"].as_str().unwrap());
    let hid = host["id"].as_str().unwrap().to_string();

    let svc = json(
        post(
            s,
            &a.token,
            "/api/v1/services",
            json!({"name": "http", "host": "web1", "spec": {"checkCommand": "http"}}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(svc["kind"], "service");
    assert_eq!(svc["hostId"], hid);
    // POST /hosts with a host field makes a service too; names are unique per host.
    json(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "disk", "host": "web1", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/services",
            json!({"name": "http", "host": "web1", "spec": {}}),
        )
        .await,
        409,
        "svc:conflict/duplicate",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "web1", "spec": {}}),
        )
        .await,
        409,
        "svc:conflict/duplicate",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/services",
            json!({"name": "x", "spec": {}}),
        )
        .await,
        422,
        "svc:validation/host",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/services",
            json!({"name": "x", "host": "nope", "spec": {}}),
        )
        .await,
        422,
        "svc:validation/host",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "h", "spec": {"bogus": true}}),
        )
        .await,
        422,
        "svc:validation/spec",
    )
    .await;
    assert_problem(
        post(s, &a.token, "/api/v1/hosts", json!({"name": "h"})).await,
        422,
        "svc:validation/spec",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "", "spec": {}}),
        )
        .await,
        422,
        "svc:validation/name",
    )
    .await;
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "h", "spec": {}, "colour": 1}),
        )
        .await,
        422,
        "svc:validation/body",
    )
    .await;

    let item = format!("/api/v1/objects/{hid}");
    let got = call(s, &a.token, Method::GET, &item).send().await.unwrap();
    assert_eq!(got.headers()["etag"], "\"1\"");
    let update = json!({"name": "web1", "folder": "/plant", "labels": {"env": "staging"}, "spec": {"address": "127.0.0.2"}});
    assert_problem(
        call(s, &a.token, Method::PUT, &item)
            .json(&update)
            .send()
            .await
            .unwrap(),
        428,
        "svc:precondition/if-match",
    )
    .await;
    let renamed = json!({"name": "web2", "spec": {}});
    assert_problem(
        call(s, &a.token, Method::PUT, &item)
            .header("If-Match", "1")
            .json(&renamed)
            .send()
            .await
            .unwrap(),
        422,
        "svc:validation/name",
    )
    .await;
    let v2 = json(
        call(s, &a.token, Method::PUT, &item)
            .header("If-Match", "\"1\"")
            .json(&update)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(v2["version"], 2);
    assert_eq!(v2["labels"]["env"], "staging");
    assert_problem(
        call(s, &a.token, Method::PUT, &item)
            .header("If-Match", "1")
            .json(&update)
            .send()
            .await
            .unwrap(),
        409,
        "svc:conflict/version",
    )
    .await;

    // Deleting the host deletes its services.
    assert_eq!(
        call(s, &a.token, Method::DELETE, &item)
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let left = json(
        call(s, &a.token, Method::GET, "/api/v1/objects")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(left["items"].as_array().unwrap().is_empty(), "{left}");
    assert_problem(
        call(s, &a.token, Method::GET, &item).send().await.unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    let actions = json(
        call(s, &a.token, Method::GET, "/api/v1/audit?limit=100")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await
    .to_string();
    for want in [
        "host.create",
        "service.create",
        "host.update",
        "host.delete",
    ] {
        assert!(actions.contains(want), "{want} not audited");
    }
}

#[tokio::test]
async fn lists_filter_by_every_selector_operator() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    for (name, folder, labels) in [
        ("db1", "/dc/a", json!({"env": "prod", "tier": "db"})),
        ("db2", "/dc/b", json!({"env": "dev", "tier": "db"})),
        ("web1", "/dc/a", json!({"env": "prod", "tier": "web"})),
        ("edge", "/field", json!({"env": "prod"})),
    ] {
        json(
            post(
                s,
                &a.token,
                "/api/v1/hosts",
                json!({"name": name, "folder": folder, "labels": labels, "spec": {}}),
            )
            .await,
            201,
        )
        .await;
    }
    let web1 = json(
        call(s, &a.token, Method::GET, "/api/v1/hosts?q=WEB")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let web1_id = web1["items"][0]["id"].as_str().unwrap().to_string();
    json(
        post(
            s,
            &a.token,
            "/api/v1/services",
            json!({"name": "http", "host": "web1", "labels": {"tier": "web"}, "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    let list = |q: String| {
        let s = &a.s;
        let t = a.token.clone();
        async move {
            json(
                call(s, &t, Method::GET, &format!("/api/v1/hosts{q}"))
                    .send()
                    .await
                    .unwrap(),
                200,
            )
            .await
        }
    };
    for (q, want) in [
        ("?selector=env%3Dprod", vec!["db1", "web1", "edge"]),
        ("?selector=env%3D%3Dprod", vec!["db1", "web1", "edge"]),
        ("?selector=env!%3Dprod", vec!["db2"]),
        ("?selector=tier%20in%20(db,web)", vec!["db1", "db2", "web1"]),
        ("?selector=tier%20notin%20(db)", vec!["web1", "edge"]),
        ("?selector=tier", vec!["db1", "db2", "web1"]),
        ("?selector=!tier", vec!["edge"]),
        ("?selector=env%3Dprod,tier%3Ddb", vec!["db1"]),
        ("?folder=/dc", vec!["db1", "db2", "web1"]),
        ("?folder=/dc/a", vec!["db1", "web1"]),
        ("?q=db", vec!["db1", "db2"]),
    ] {
        assert_eq!(names(&list(q.to_string()).await), want, "{q}");
    }
    assert_problem(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/hosts?selector=env%20in%20(",
        )
        .send()
        .await
        .unwrap(),
        422,
        "svc:validation/selector",
    )
    .await;
    let services = json(
        call(
            s,
            &a.token,
            Method::GET,
            &format!("/api/v1/services?hostId={web1_id}"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&services), ["http"]);
    assert_eq!(services["items"][0]["hostName"], "web1");
    let all = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/objects?selector=tier%3Dweb",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&all), ["web1", "http"]);
    // Keyset pages in id (creation) order.
    let p1 = json(
        call(s, &a.token, Method::GET, "/api/v1/objects?limit=2")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&p1), ["db1", "db2"]);
    let cursor = p1["nextCursor"].as_str().unwrap();
    let p2 = json(
        call(
            s,
            &a.token,
            Method::GET,
            &format!("/api/v1/objects?limit=2&cursor={cursor}"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&p2), ["web1", "edge"]);
    let p3 = json(
        call(
            s,
            &a.token,
            Method::GET,
            &format!(
                "/api/v1/objects?limit=2&cursor={}",
                p2["nextCursor"].as_str().unwrap()
            ),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(names(&p3), ["http"]);
    assert!(p3.get("nextCursor").is_none());
}

#[tokio::test]
async fn batches_report_each_item() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    json(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "exists", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    let body = json!({
        "hosts": [{"name": "b1", "spec": {}}, {"name": "exists", "spec": {}}, {"name": "b2", "spec": {"nope": 1}}, {"name": "b3", "spec": {}}],
        "services": [{"name": "ping", "host": "b1", "spec": {}}, {"name": "ping", "host": "ghost", "spec": {}}],
    });
    let r = json(post(s, &a.token, "/api/v1/objects:batch", body).await, 200).await;
    assert_eq!(r["created"], 3);
    assert_eq!(r["failed"], 3);
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    for item in results {
        assert!(item["name"].is_string());
        assert!(
            item.get("id").is_some() != item.get("error").is_some(),
            "{item}"
        );
    }
    let hosts = json(
        call(s, &a.token, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(hosts["items"].as_array().unwrap().len(), 3);
    // Upsert replaces instead of failing.
    let up = json(post(s, &a.token, "/api/v1/objects:batch", json!({"mode": "upsert", "hosts": [{"name": "exists", "labels": {"v": "2"}, "spec": {}}]})).await, 200).await;
    assert_eq!(up["created"], 1);
    let again = json(
        call(s, &a.token, Method::GET, "/api/v1/hosts?selector=v%3D2")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(again["items"][0]["version"], 2);
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/objects:batch",
            json!({"mode": "merge"}),
        )
        .await,
        422,
        "svc:validation/batch",
    )
    .await;
    // A large batch goes through in bounded transactions.
    let many: Vec<Value> = (0..1200)
        .map(|i| json!({"name": format!("bulk{i}"), "spec": {}}))
        .collect();
    let r = json(
        post(s, &a.token, "/api/v1/objects:batch", json!({"hosts": many})).await,
        200,
    )
    .await;
    assert_eq!(r["created"], 1200);
}

#[tokio::test]
async fn effective_config_follows_the_template_chain() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    json(post(s, &a.token, "/api/v1/templates", json!({"name": "base", "spec": {"interval": 300, "timeout": 10, "vars": {"team": "ops", "tier": "any"}}})).await, 201).await;
    json(post(s, &a.token, "/api/v1/templates", json!({"name": "linux", "spec": {"templates": ["base"], "interval": 60, "vars": {"os": "linux"}}})).await, 201).await;
    json(
        post(
            s,
            &a.token,
            "/api/v1/templates",
            json!({"name": "prod", "spec": {"maxCheckAttempts": 5, "vars": {"tier": "prod"}}}),
        )
        .await,
        201,
    )
    .await;
    let host = json(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "h", "spec": {"templates": ["linux", "prod"], "timeout": 20}}),
        )
        .await,
        201,
    )
    .await;
    let id = host["id"].as_str().unwrap();
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
    assert_eq!(eff["templateChain"], json!(["base", "linux", "prod"]));
    assert_eq!(eff["spec"]["interval"], "1m0s");
    assert_eq!(eff["spec"]["timeout"], "20s");
    assert_eq!(eff["spec"]["maxCheckAttempts"], 5);
    assert_eq!(
        eff["spec"]["vars"],
        json!({"team": "ops", "tier": "prod", "os": "linux"})
    );

    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "x", "spec": {"templates": ["missing"]}}),
        )
        .await,
        422,
        "svc:validation/spec",
    )
    .await;
    // A cycle is refused when a template would close it.
    let res = call(s, &a.token, Method::PUT, "/api/v1/templates/base")
        .header("If-Match", "1")
        .json(&json!({"spec": {"templates": ["linux"]}}))
        .send()
        .await
        .unwrap();
    let doc = assert_problem(res, 422, "svc:validation/spec").await;
    assert!(doc["detail"].as_str().unwrap().contains("cycle"), "{doc}");
    assert_problem(
        post(
            s,
            &a.token,
            "/api/v1/templates",
            json!({"name": "self", "spec": {"templates": ["self"]}}),
        )
        .await,
        422,
        "svc:validation/spec",
    )
    .await;
}

#[tokio::test]
async fn objects_are_tenant_isolated_and_need_permissions() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let host = json(
        post(
            s,
            &a.token,
            "/api/v1/hosts",
            json!({"name": "mine", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    let id = host["id"].as_str().unwrap();
    let (_, other) = second_tenant(s, &a.token, "obj-iso").await;
    let item = format!("/api/v1/objects/{id}");
    assert_isolated(
        s,
        &other,
        &[
            (Method::GET, item.clone()),
            (Method::DELETE, item.clone()),
            (Method::GET, format!("{item}/effective-config")),
        ],
        &["/api/v1/objects", "/api/v1/hosts", "/api/v1/services"],
        id,
    )
    .await;
    assert_problem(
        call(s, &other, Method::PUT, &item)
            .header("If-Match", "1")
            .json(&json!({"name": "mine", "spec": {}}))
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        post(
            s,
            &other,
            "/api/v1/services",
            json!({"name": "x", "host": "mine", "spec": {}}),
        )
        .await,
        422,
        "svc:validation/host",
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_eq!(
        call(s, &viewer, Method::GET, "/api/v1/objects")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let res = post(
        s,
        &viewer,
        "/api/v1/hosts",
        json!({"name": "no", "spec": {}}),
    )
    .await;
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "objects:write"
    );
}

/// A discovery scan over loopback finds the port a test listener holds (and not a closed one),
/// suggests checks for it, bounds its ranges, and is the scanning tenant's alone.
#[tokio::test]
async fn discovery_scans_find_open_ports_and_stay_in_their_tenant() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = listener.local_addr().unwrap().port();
    let closed = free_port();
    let scan = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/discovery/scans",
            json!({"cidr": "127.0.0.1/32", "ports": [closed, open]}),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(scan["status"], "running");
    assert_eq!(scan["cidr"], "127.0.0.1/32");
    let path = format!("/api/v1/discovery/scans/{}", scan["id"].as_str().unwrap());
    let started = std::time::Instant::now();
    let done = loop {
        let now = json(
            call(s, token, Method::GET, &path).send().await.unwrap(),
            200,
        )
        .await;
        if now["status"] == "done" {
            break now;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{now}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        (done["probed"].as_u64(), done["probes"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(
        done["found"],
        json!([{"address": "127.0.0.1", "openPorts": [open], "suggest": ["ping", format!("tcp -p {open}")]}])
    );
    assert!(done["doneAt"].is_string());
    let listed = json(
        call(s, token, Method::GET, "/api/v1/discovery/scans")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(listed["items"][0]["id"], scan["id"]);

    for (body, field) in [
        (json!({"cidr": "10.0.0.0/8"}), "cidr"),
        (json!({"cidr": "10.0.0.1"}), "cidr"),
        (json!({"cidr": "web01/24"}), "cidr"),
        (json!({"cidr": "10.0.0.0/24", "ports": []}), "ports"),
        (json!({"cidr": "10.0.0.0/24", "ports": [0]}), "ports"),
        (json!({"cidr": "10.0.0.0/24", "port": [22]}), "body"),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/discovery/scans",
            body.clone(),
        )
        .await;
        assert_problem(res, 422, &format!("svc:validation/{field}")).await;
    }

    let (_, other) = second_tenant(s, token, "other").await;
    let res = call(s, &other, Method::GET, &path).send().await.unwrap();
    assert_problem(res, 404, "svc:not-found").await;
    let theirs = json(
        call(s, &other, Method::GET, "/api/v1/discovery/scans")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(theirs["items"], json!([]));
}
