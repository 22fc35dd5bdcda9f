//! The binary, the HTTP platform's cross-cutting rules and the operations endpoints.

use crate::receiver::Receiver;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[tokio::test]
async fn healthz_and_request_ids_on_every_response() {
    let s = Server::start();
    let res = s.get("/healthz").await;
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_uuid_v7(&id);
    assert_eq!(res.text().await.unwrap(), "ok");

    let res = s.get("/no/such/route").await;
    assert_eq!(res.status(), 404);
    assert_uuid_v7(res.headers()["x-request-id"].to_str().unwrap());
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(res.text().await.unwrap().trim(), "404 page not found");

    let res = s.http.post(s.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), 405);
    assert_uuid_v7(res.headers()["x-request-id"].to_str().unwrap());
    let allow = res.headers()["allow"].to_str().unwrap();
    assert!(allow.contains("GET"), "Allow: {allow}");

    let second = s.get("/healthz").await;
    assert_ne!(
        second.headers()["x-request-id"].to_str().unwrap(),
        id,
        "ids are per request"
    );
}

#[tokio::test]
async fn readiness_info_and_health() {
    let s = Server::start();
    let res = s.get("/readyz").await;
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["ready"], true);
    let store = body["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "store")
        .unwrap();
    assert_eq!(store["ok"], true);

    let info: serde_json::Value = s.get("/api/v1/system/info").await.json().await.unwrap();
    let (_, version, _) = svc(&["version"], &[]);
    assert_eq!(info["version"], version.trim());
    assert!(info["rustVersion"].as_str().unwrap().starts_with("rustc "));
    assert_eq!(info["goVersion"], info["rustVersion"]);
    assert!(info["goroutines"].as_u64().unwrap() > 0);
    assert!(info["heapMB"].as_f64().unwrap() > 0.0);
    let backend = if super::postgres::enabled() {
        "postgres"
    } else {
        "redb"
    };
    assert_eq!(info["storage"], backend);
    assert_eq!(info["aiEnabled"], false);
    assert!(info["startedAt"].as_str().unwrap().ends_with('Z'));
    assert!(info["uptime"].as_str().unwrap().ends_with('s'));

    let health: serde_json::Value = s.get("/api/v1/system/health").await.json().await.unwrap();
    let workers = health["workers"].as_array().unwrap();
    assert!(
        workers.iter().any(|w| w["name"] == "store-recovery"),
        "{health}"
    );
    assert_eq!(health["status"], "ok");
}

#[tokio::test]
async fn metrics_are_openmetrics_with_route_templates() {
    let s = Server::start();
    s.get("/healthz").await;
    s.get("/definitely/not/here").await;
    let res = s.get("/metrics").await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = res.text().await.unwrap();
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("np_http_requests_total{") && l.contains("route=\"/healthz\""))
        .unwrap_or_else(|| panic!("no healthz counter in {text}"));
    assert!(
        line.contains("status=\"200\"") && line.ends_with(" 1"),
        "{line}"
    );
    assert!(
        text.contains("route=\"unmatched\""),
        "unmatched paths share one label"
    );
    assert!(
        !text.contains("definitely"),
        "raw paths never become labels"
    );
    assert!(text.contains("np_http_request_duration_seconds_bucket{"));
}

#[tokio::test]
async fn openapi_documents_every_route() {
    // Sign-up on, so that /register is served rather than a plain 404.
    let s = Server::start_with(Opts {
        env: vec![("SERVICE_ALLOW_SIGNUP".into(), "true".into())],
        ..Default::default()
    });
    let doc: serde_json::Value = s.get("/api/openapi.json").await.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let info: serde_json::Value = s.get("/api/v1/system/info").await.json().await.unwrap();
    assert_eq!(doc["info"]["version"], info["version"]);
    let paths = doc["paths"].as_object().unwrap();
    for must in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/openapi.json",
        "/api/v1/system/info",
        "/api/v1/system/health",
    ] {
        assert!(paths.contains_key(must), "{must} missing");
    }
    // A problem an operation answers beyond its access and input is documented with its code.
    let change = &paths["/api/v1/users/me:change-password"]["post"]["responses"]["403"];
    assert!(
        change["description"]
            .as_str()
            .unwrap()
            .contains("svc:auth/bad-password"),
        "{change}"
    );
    // Every documented operation exists on the server (answers something other than the
    // router's own 404/405), and declares its permission. An asset is asked for by the name
    // the sign-in page links.
    let login = s.get("/login").await.text().await.unwrap();
    let stylesheet = login
        .split("href=\"/assets/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the sign-in page links its stylesheet")
        .to_string();
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            assert!(op.get("x-required-permission").is_some(), "{method} {path}");
            // Problem pages exist for real codes only.
            let concrete = path
                .replace(
                    "/problems/svc/{group}/{name}",
                    "/problems/svc/auth/required",
                )
                .replace("/problems/svc/{name}", "/problems/svc/not-found")
                .replace("/assets/{file}", &format!("/assets/{stylesheet}"))
                .replace(['{', '}'], "");
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let res = s.http.request(m, s.url(&concrete)).send().await.unwrap();
            let plain_404 = res.status() == 404
                && res.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("text/plain");
            assert!(
                !plain_404 && res.status() != 405,
                "{method} {path} is documented but not routed"
            );
        }
    }
}

#[tokio::test]
async fn tls_auto_makes_and_keeps_a_self_signed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Server::start_in(
        &data,
        Opts {
            tls: true,
            ..Default::default()
        },
    );
    assert!(s.base.starts_with("https://"), "{}", s.base);
    let res = s.get("/healthz").await;
    assert_eq!(res.status(), 200);
    let cert = std::fs::read(data.join("tls/cert.pem")).unwrap();
    let key_mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(data.join("tls/key.pem"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(key_mode & 0o777, 0o600);
    assert!(s.stop().success());
    let s = Server::start_in(
        &data,
        Opts {
            tls: true,
            ..Default::default()
        },
    );
    assert_eq!(s.get("/healthz").await.status(), 200);
    assert_eq!(
        std::fs::read(data.join("tls/cert.pem")).unwrap(),
        cert,
        "certificate is reused"
    );
    // Plain HTTP against the TLS port is refused rather than served.
    let plain = s.base.replace("https://", "http://");
    let r = client().get(format!("{plain}/healthz")).send().await;
    assert!(r.is_err() || r.unwrap().status() != 200);
}

#[tokio::test]
async fn configured_certificate_files_are_used() {
    let dir = tempfile::tempdir().unwrap();
    // Made by one server start, then handed to another as configured files.
    let first = Server::start_in(
        &dir.path().join("a"),
        Opts {
            tls: true,
            ..Default::default()
        },
    );
    assert!(first.stop().success());
    let cfg = dir.path().join("svc.yaml");
    std::fs::write(
        &cfg,
        format!(
            "tls:\n  certFile: {0}/a/tls/cert.pem\n  keyFile: {0}/a/tls/key.pem\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let s = Server::start_in(
        &dir.path().join("b"),
        Opts {
            tls: true,
            args: vec!["--config".into(), cfg.display().to_string()],
            ..Default::default()
        },
    );
    assert_eq!(s.get("/healthz").await.status(), 200);
    assert!(
        !dir.path().join("b/tls").exists(),
        "no self-signed pair when files are configured"
    );
}

#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Server::start_in(&data, Opts::default());
    assert_eq!(s.get("/healthz").await.status(), 200);
    let status = s.stop();
    assert_eq!(status.code(), Some(0));
    let log = std::fs::read_to_string(data.with_extension("log")).unwrap();
    assert!(log.contains("draining") && log.contains("stopped"), "{log}");
    // The store was closed cleanly: a new server opens it at once, with the same default tenant.
    let tenant_line = |log: &str| {
        log.lines()
            .filter(|l| l.contains("default tenant created"))
            .count()
    };
    assert_eq!(tenant_line(&log), 1);
    let s = Server::start_in(&data, Opts::default());
    assert_eq!(s.get("/readyz").await.status(), 200);
    assert_eq!(
        tenant_line(&s.log()),
        1,
        "the default tenant is made only once"
    );
}

#[test]
fn version_commands_agree() {
    let (code, a, _) = svc(&["version"], &[]);
    assert_eq!(code, 0);
    let (code, b, _) = svc(&["--version"], &[]);
    assert_eq!(code, 0);
    assert_eq!(a, b);
    assert!(!a.trim().is_empty() && !a.trim().starts_with('v'));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(svc(&["--no-such-flag"], &[]).0, 2);
    assert_eq!(svc(&["no-such-command"], &[]).0, 2);
    assert_eq!(svc(&["serve", "--listen"], &[]).0, 2, "flag without value");
}

#[test]
fn config_check_names_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        "listen: 127.0.0.1:9443\nstorage:\n  eventRetentionMonths: 6\n",
    )
    .unwrap();
    let (code, out, _) = svc(
        &["config", "check", "--config", good.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{out}");

    let unknown = dir.path().join("unknown.yaml");
    std::fs::write(
        &unknown,
        "listen: 127.0.0.1:9443\ntls:\n  mode: auto\n  colour: blue\n",
    )
    .unwrap();
    let (code, _, err) = svc(
        &["config", "check", "--config", unknown.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("colour"), "{err}");

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "listen: not-an-address\ntls: {mode: maybe}\n").unwrap();
    let (code, _, err) = svc(&["config", "check", "--config", bad.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("listen:") && err.contains("tls.mode:"),
        "{err}"
    );

    // The environment is read too, and `serve` refuses to start on a bad file.
    let (code, _, err) = svc(&["config", "check"], &[("SVC_LISTEN", "nowhere")]);
    assert_eq!(code, 1);
    assert!(err.contains("listen:"), "{err}");
    let (code, _, err) = svc(
        &[
            "serve",
            "--config",
            unknown.to_str().unwrap(),
            "--data-dir",
            dir.path().join("d").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("colour"), "{err}");
}

#[test]
fn board_presets_are_valid_configurations() {
    let presets =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/firmware-config")).unwrap();
    let mut n = 0;
    for p in presets {
        let p = p.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            let (code, _, err) = svc(&["config", "check", "--config", p.to_str().unwrap()], &[]);
            assert_eq!(code, 0, "{}: {err}", p.display());
            n += 1;
        }
    }
    assert!(n > 0, "no presets found");
}

#[test]
fn the_readmes_configuration_examples_are_valid() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("## Configuration").unwrap()..];
    let section = &section[..section.find("\n## ").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for block in section.split("```yaml\n").skip(1) {
        let yaml = &block[..block.find("```").unwrap()];
        if yaml.starts_with("kind:") {
            continue; // a configuration document, applied by the SSO test
        }
        let file = dir.path().join(format!("example-{checked}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let (code, _, err) = svc(
            &["config", "check", "--config", file.to_str().unwrap()],
            &[],
        );
        assert_eq!(code, 0, "{yaml}\n{err}");
        checked += 1;
    }
    assert_eq!(checked, 3, "the OIDC, LDAP and AI examples");
}

#[tokio::test]
async fn bootstrap_refuses_while_the_server_holds_the_store() {
    let s = Server::start();
    let (code, out, err) = svc(&["bootstrap", "--data-dir", s.data.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("locked"), "{err}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// Under systemd (`Type=notify`): READY=1 once listening, WATCHDOG=1 at half the watchdog
/// timeout while healthy, STOPPING=1 on SIGTERM, over the `$NOTIFY_SOCKET` datagram socket.
#[test]
fn systemd_hears_ready_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let s = Server::start_with(Opts {
        env: vec![
            ("NOTIFY_SOCKET".into(), path.to_str().unwrap().into()),
            ("WATCHDOG_USEC".into(), "200000".into()),
        ],
        ..Default::default()
    });
    let mut heard = Vec::new();
    let mut buf = [0u8; 256];
    while heard.iter().filter(|m| *m == "WATCHDOG=1").count() < 2 {
        let n = socket.recv(&mut buf).expect("a notification within 10 s");
        heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(
        heard[0].starts_with("READY=1\nSTATUS=serving on "),
        "{heard:?}"
    );
    assert!(s.stop().success());
    let mut stopping = false;
    while let Ok(n) = socket.recv(&mut buf) {
        if &buf[..n] == b"STOPPING=1" {
            stopping = true;
            break;
        }
    }
    assert!(stopping, "STOPPING=1 on SIGTERM");
}

/// The entries of a tar archive, in order, with their bytes.
fn entries(archive: &Path) -> Vec<(String, Vec<u8>)> {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut body).unwrap();
            (name, body)
        })
        .collect()
}

/// `svc restore --from ARCHIVE --data-dir DIR`: (exit code, stdout, stderr).
fn restore(archive: &Path, data_dir: &Path) -> (i32, String, String) {
    let (archive, data_dir) = (archive.to_str().unwrap(), data_dir.to_str().unwrap());
    svc(&["restore", "--from", archive, "--data-dir", data_dir], &[])
}

/// `svc backup` copies a running server that keeps taking writes; `svc restore` makes a data
/// directory a new server starts on with the same objects, states, alerts, events, tokens and
/// master key, and an intact audit chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_running_server_restores_into_a_working_instance() {
    let a = Admin::start();
    let (s, token) = (&a.s, a.token.as_str());
    for (path, body) in [
        ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
        (
            "/api/v1/services",
            json!({"name": "pump", "host": "plc", "spec": {}}),
        ),
        ("/api/v1/alerts", json!({"title": "pump 2 dry run"})),
    ] {
        let res = call(s, token, Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{path}");
    }
    let res = call(s, token, Method::PUT, "/api/v1/secrets/modbus")
        .json(&json!({"value": "s3cret"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    let result = |state: &str| json!({"results": [{"host": "plc", "service": "pump", "state": state, "output": format!("{state} | level=3.5m")}]});
    let res = call(s, token, Method::POST, "/api/v1/results")
        .json(&result("CRITICAL"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);

    // Writes go on while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (base, token, stop) = (s.base.clone(), token.to_string(), stop.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .danger_accept_invalid_certs(true)
                .build()
                .unwrap();
            let mut accepted = 0;
            while !stop.load(Ordering::SeqCst) {
                let body = json!({"results": [{"host": "plc", "service": "pump", "state": accepted % 2 * 2, "output": "flip"}]});
                let res = http
                    .post(format!("{base}/api/v1/results"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 202);
                accepted += 1;
            }
            accepted
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("site.tar");
    let env = [("SVC_SERVER", s.base.as_str()), ("SVC_TOKEN", token)];
    let (code, out, err) = svc(
        &["--insecure", "backup", "--out", archive.to_str().unwrap()],
        &env,
    );
    stop.store(true, Ordering::SeqCst);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("site.tar"), "{out}");
    assert!(
        writer.await.unwrap() > 0,
        "no write went on during the backup"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "a backup holds secrets");
    let listed = entries(&archive);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "manifest.json");
    for want in ["svc.redb", "audit.checkpoint", "metrics.redb", "master.key"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("events-")), "{names:?}");
    let manifest: Value = serde_json::from_slice(&listed[0].1).unwrap();
    assert_eq!(manifest["format"], 1);
    assert_eq!(manifest["events"], true);
    assert!(manifest["schemaVersion"].as_u64().unwrap() > 0);
    assert_eq!(manifest["files"].as_array().unwrap().len(), names.len() - 1);

    // Restored into a new directory, a new server serves what the old one had.
    let restored = dir.path().join("restored");
    let (code, out, err) = restore(&archive, &restored);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit chain verified"), "{out}");
    assert_eq!(
        std::fs::read(restored.join("master.key")).unwrap(),
        std::fs::read(s.data.join("master.key")).unwrap()
    );
    let copy = Server::start_in(&restored, Opts::default());
    let get = |path: &'static str| {
        let (copy, token) = (&copy, token);
        async move {
            json(
                call(copy, token, Method::GET, path).send().await.unwrap(),
                200,
            )
            .await
        }
    };
    let services = get("/api/v1/services").await;
    assert_eq!(services["items"][0]["name"], "pump");
    assert!(
        services["items"][0]["state"]["state"].is_u64(),
        "{services}"
    );
    // The metric series and its last value came along (on PostgreSQL: out of its tables
    // into the archive's metric file, and into the new database's tables).
    let pump = services["items"][0]["id"].as_str().unwrap();
    let series = json(
        call(
            &copy,
            token,
            Method::GET,
            &format!("/api/v1/objects/{pump}/metrics"),
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert_eq!(series["items"][0]["metric"], "level", "{series}");
    assert_eq!(series["items"][0]["unit"], "m");
    assert_eq!(series["items"][0]["lastValue"], 3.5);
    let alerts = get("/api/v1/alerts").await;
    assert!(
        alerts["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["title"] == "pump 2 dry run")
    );
    let changes = get("/api/v1/events?types=state_change").await;
    assert!(!changes["items"].as_array().unwrap().is_empty());
    let secrets = get("/api/v1/secrets").await;
    assert!(secrets.to_string().contains("modbus"), "{secrets}");
    super::support::assert_chain_intact(&copy, token).await;
    drop(copy);

    // A directory in use, and a file that is no backup, are refused.
    let (code, _, err) = restore(&archive, &restored);
    assert_eq!(code, 1);
    assert!(err.contains("not empty"), "{err}");
    let junk = dir.path().join("junk.tar");
    std::fs::write(&junk, b"this is no archive").unwrap();
    let empty = dir.path().join("empty");
    let (code, _, err) = restore(&junk, &empty);
    assert_eq!(code, 1);
    assert!(err.contains("not an svc backup"), "{err}");

    // Without events; and only for the default tenant.
    let lean = dir.path().join("lean.tar");
    let (code, _, err) = svc(
        &[
            "--insecure",
            "backup",
            "--no-events",
            "--out",
            lean.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(code, 0, "{err}");
    let listed = entries(&lean);
    assert!(listed.iter().all(|(n, _)| !n.starts_with("events-")));
    let manifest: Value = serde_json::from_slice(&listed[0].1).unwrap();
    assert_eq!(manifest["events"], false);
    let (tenant, _) = second_tenant(s, token, "tenant-b").await;
    let (other, _) = mint_in(
        s,
        token,
        &tenant,
        json!({"name": "b-backup", "scopes": ["admin:backup"]}),
    )
    .await;
    let res = call(s, &other, Method::GET, "/api/v1/system/backup")
        .send()
        .await
        .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let res = call(s, token, Method::GET, "/api/v1/system/backup?events=maybe")
        .send()
        .await
        .unwrap();
    let p = assert_problem(res, 422, "svc:validation/query").await;
    assert!(
        p["detail"].as_str().unwrap().starts_with("events: "),
        "the detail names the parameter: {p}"
    );
}

/// The data directory of svc at schema version 16 (commit 641bd32^, before the federation
/// table), packed as a backup: a host, a service left CRITICAL with its open alert, a rule, a
/// contact, a secret, and the bootstrap token below (fast hashing, as the tests run).
const SCHEMA_16: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/schema-16.tar");
const SCHEMA_16_TOKEN: &str = "svc_f8bad248366b6eea95d24174b7c3763b40815be982db910b";

/// An upgrade: the previous schema's data directory is migrated at the first start and what it
/// held keeps working, the alert engine included.
#[tokio::test]
async fn a_data_directory_of_the_previous_schema_is_migrated_and_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, out, err) = restore(Path::new(SCHEMA_16), &data);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("schema 16"), "{out}");
    let s = Server::start_in(&data, Opts::default());
    let token = SCHEMA_16_TOKEN;
    let get = |path: &'static str| {
        let s = &s;
        async move { json(call(s, token, Method::GET, path).send().await.unwrap(), 200).await }
    };
    let hosts = get("/api/v1/hosts").await;
    assert_eq!(hosts["items"][0]["name"], "plc");
    assert_eq!(hosts["items"][0]["labels"], json!({"site": "lab"}));
    let services = get("/api/v1/services?selector=site%3Dlab").await;
    assert_eq!(services["items"][0]["name"], "pump");
    assert_eq!(services["items"][0]["state"]["state"], 2);
    let open = get("/api/v1/alerts?status=open").await;
    assert_eq!(open["items"][0]["ruleId"], "pump-critical", "{open}");
    assert_eq!(get("/api/v1/contacts").await["items"][0]["name"], "ada");
    assert!(get("/api/v1/secrets").await.to_string().contains("modbus"));
    let audit = json(
        call(&s, token, Method::POST, "/api/v1/audit:verify")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(audit["intact"], true, "{audit}");
    // What schema 17 added works on the old data.
    assert_eq!(get("/api/v1/sites:overview").await["items"], json!([]));

    // The alert engine resumes from its stored position: OK resolves the old alert.
    let res = call(&s, token, Method::POST, "/api/v1/results")
        .json(&json!({"results": [{"host": "plc", "service": "pump", "state": "OK", "output": "running"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let started = std::time::Instant::now();
    loop {
        let resolved = get("/api/v1/alerts?status=resolved").await;
        if resolved["items"].as_array().unwrap().len() == 1 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{resolved}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The old month file's state changes (rows by name, its type index a row per key, converted
    // to runs on opening) read by type beside the new one (a row by position), newest first.
    let changes = get("/api/v1/events?types=state_change").await;
    let items = changes["items"].as_array().unwrap();
    assert!(items.len() >= 2, "{changes}");
    assert_eq!(items[0]["payload"]["output"], "running", "{changes}");
    let oldest = &items[items.len() - 1];
    assert!(
        oldest["ts"].as_str().unwrap().starts_with("2026-11"),
        "{changes}"
    );
    assert_eq!(oldest["payload"]["object"], "pump", "{changes}");
    assert!(
        items.iter().all(|e| e["type"] == "state_change"),
        "{changes}"
    );
}

/// With `SVC_LOG_SPANS` a request can be followed from its log lines: the transaction it
/// commits closes inside the request's span (carrying the id the response names), the alert
/// engine's batch of the event it made commits inside the batch's span, and the webhook
/// delivery of that event closes in its own span.
#[tokio::test]
async fn spans_follow_a_request_into_its_transaction_the_batch_and_the_delivery_after_it() {
    let a = Admin::start_with(Opts {
        env: vec![
            ("SVC_LOG".into(), "info,svc=debug".into()),
            ("SVC_LOG_SPANS".into(), "1".into()),
        ],
        ..Default::default()
    });
    let hooks = Receiver::start().await;
    let res = send(
        &a.s,
        &a.token,
        Method::POST,
        "/api/v1/webhooks",
        json!({"name": "all", "url": hooks.url("/all")}),
    )
    .await;
    json(res, 201).await;
    let res = call(&a.s, &a.token, Method::POST, "/api/v1/hosts")
        .json(&json!({"name": "traced", "spec": {}}))
        .send()
        .await
        .unwrap();
    let id = res.headers()["x-request-id"].to_str().unwrap().to_string();
    json(res, 201).await;
    let request = format!("request{{id={id} method=POST route=/api/v1/hosts}}");
    hooks.wait_for("/all", 1, Duration::from_secs(10)).await;
    // The engine may read the host's events in one batch or two, and its spans close after
    // the delivery's may: wait for the batch's committed transaction itself.
    let engine_committed = |log: &str| {
        log.lines().any(|l| {
            l.contains("batch{consumer=\"alert-engine\" events=")
                && l.contains("}:transaction{outcome=\"changed\"}: ")
                && l.contains(": close time.busy=")
        })
    };
    let mut log = String::new();
    for _ in 0..200 {
        log = a.s.log();
        if engine_committed(&log) && log.contains("delivery{") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let closed = |spans: &str| {
        log.lines()
            .any(|l| l.contains(spans) && l.contains(": close time.busy="))
    };
    assert!(
        closed(&format!("{request}:transaction{{outcome=\"changed\"}}: ")),
        "the request's transaction closes in its span; log:\n{log}"
    );
    assert!(
        closed(&format!("INFO {request}: svc::api::middleware")),
        "the request span closes with its time; log:\n{log}"
    );
    assert!(
        engine_committed(&log),
        "the engine commits its batch inside the batch's span; log:\n{log}"
    );
    assert!(
        closed("delivery{id="),
        "the delivery closes in its span with its time; log:\n{log}"
    );
}

/// Kibibytes of a `/proc/<pid>/status` field.
fn status_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The server's resident file pages once under half of `from`, probing `/healthz` (which is
/// not a request that keeps it busy) every 100 ms, at most `probes` times: the last reading.
async fn file_pages_halved(s: &Server, from: u64, probes: usize) -> u64 {
    let mut now = from;
    for _ in 0..probes {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(s.get("/healthz").await.status(), 200);
        now = status_kib(s.pid(), "RssFile:");
        if now < from / 2 {
            break;
        }
    }
    now
}

/// A quiet server gives its code pages back, and a request runs it again; a quiet start gives
/// start-up's code back after a short settle, not a whole spell. The server runs
/// from a copy of the binary of its own: the kernel keeps pages other processes map (the
/// suite's other servers), so a shared binary would keep them whatever this one asked.
#[tokio::test]
async fn a_quiet_server_releases_its_code_pages_and_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("svc");
    std::fs::copy(BIN, &copy).unwrap();
    // Written pages are dirty until written back, and reclaim from madvise skips those.
    std::fs::File::open(&copy).unwrap().sync_all().unwrap();
    let from_copy = vec![
        "sh".into(),
        "-c".into(),
        format!("shift; exec '{}' \"$@\"", copy.display()),
        "sh".into(),
    ];
    let s = Server::start_with(Opts {
        args: config_args(dir.path(), "memory: {releaseAfter: 1s}\n"),
        wrapper: from_copy.clone(),
        ..Default::default()
    });
    let health: Value = s.get("/api/v1/system/health").await.json().await.unwrap();
    assert!(
        health["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "memory-release"),
        "{health}"
    );
    // Busy past start-up's settle (1 s here), so what is resident is what requests run.
    for _ in 0..15 {
        assert_eq!(s.get("/api/v1/system/health").await.status(), 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let busy = status_kib(s.pid(), "RssFile:");
    // Released 1 to 1.25 s after the last request; probes do not count as requests.
    let quiet = file_pages_halved(&s, busy, 100).await;
    assert!(
        quiet < busy / 2,
        "file pages resident: {busy} KiB busy, {quiet} KiB quiet"
    );
    assert_eq!(s.get("/api/v1/system/health").await.status(), 200);
    assert!(status_kib(s.pid(), "RssFile:") > quiet);

    let kept = Server::start_with(Opts {
        args: config_args(dir.path(), "memory: {releaseAfter: 0s}\n"),
        ..Default::default()
    });
    let health: Value = kept
        .get("/api/v1/system/health")
        .await
        .json()
        .await
        .unwrap();
    assert!(
        !health["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "memory-release"),
        "{health}"
    );
    drop(s);

    // A quiet start gives start-up's code back 2 s after it, not a spell (1 min here) later.
    let fresh = Server::start_with(Opts {
        args: config_args(dir.path(), "memory: {releaseAfter: 1m}\n"),
        wrapper: from_copy,
        ..Default::default()
    });
    let started = status_kib(fresh.pid(), "RssFile:");
    let settled = file_pages_halved(&fresh, started, 80).await;
    assert!(
        settled < started / 2,
        "file pages resident: {started} KiB started, {settled} KiB 8 s later"
    );
}

/// `write_bytes` of process `pid`, as the kernel counts it.
fn proc_write_bytes(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Issue 72, item 6: the server counts what it writes as the kernel does, and with the card's
/// endurance configured projects its life and raises an alert under the threshold.
#[tokio::test]
async fn the_storage_counts_its_writes_and_projects_the_cards_life() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("svc.yaml");
    std::fs::write(&config, "storage:\n  wear:\n    endurance: 2MB\n").unwrap();
    let a = Admin::start_with(Opts {
        args: vec!["--config".into(), config.to_str().unwrap().into()],
        ..test_clock(&dir.path().join("clock"))
    });
    let (s, token) = (&a.s, a.token.as_str());
    let before = proc_write_bytes(s.pid());
    let health = get(s, token, "/api/v1/system/health").await;
    let after = proc_write_bytes(s.pid());
    let wear = &health["wear"];
    let counted = wear["writtenTotal"].as_u64().unwrap();
    assert!(
        (before..=after).contains(&counted),
        "{before} <= {counted} <= {after}: {wear}"
    );
    assert_eq!(wear["writtenToday"], wear["writtenTotal"], "{wear}");
    assert_eq!(wear["endurance"], 2_000_000);
    assert!(
        wear.get("projectedYears").is_none(),
        "no pace within the first hour: {wear}"
    );

    // Two hours on: a pace, and 2 MB of endurance at it is far under five years.
    advance(s, token, "2h").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let alert = loop {
        let alerts = get(s, token, "/api/v1/alerts?status=open").await;
        if let Some(a) = alerts["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["dedupKey"] == "storage-wear")
        {
            break a.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no wear alert: {alerts}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        alert["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("The storage wears out in")),
        "{alert}"
    );
    let wear = get(s, token, "/api/v1/system/health").await["wear"].clone();
    assert!(wear["perDay"].as_u64().is_some_and(|d| d > 0), "{wear}");
    assert!(
        wear["projectedYears"].as_f64().is_some_and(|y| y < 5.0),
        "{wear}"
    );
    // Kept across a restart, in the data directory.
    assert!(s.data.join("wear.json").exists());

    // Restarted with a card that lasts: the alert raised before the restart is resolved at
    // the first look, though this process never raised it.
    std::fs::write(&config, "storage:\n  wear:\n    endurance: 100TB\n").unwrap();
    let s = a.s.stop_keeping_data().start(Opts {
        args: vec!["--config".into(), config.to_str().unwrap().into()],
        ..test_clock(&dir.path().join("clock"))
    });
    let id = alert["id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = get(&s, token, &format!("/api/v1/alerts/{id}")).await;
        if now["status"] == "resolved" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the wear alert stays open after a restart: {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wear = get(&s, token, "/api/v1/system/health").await["wear"].clone();
    assert!(
        wear["projectedYears"].as_f64().is_some_and(|y| y > 5.0),
        "{wear}"
    );
}
