//! Active checks against real local peers: a TCP listener and plugin scripts run as child
//! processes with the Nagios conventions; check-now.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

async fn post(s: &Server, token: &str, path: &str, body: Value) -> Value {
    json(
        call(s, token, Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap(),
        201,
    )
    .await
}

/// Polls an object's live state until `done` holds (30 s at most: a loaded CI machine running
/// the suite on PostgreSQL once took over 10 s to store a check-now's ping).
async fn wait_state(
    s: &Server,
    token: &str,
    list: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut st = Value::Null;
    for _ in 0..300 {
        let v = json(call(s, token, Method::GET, list).send().await.unwrap(), 200).await;
        st = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()["state"]
            .clone();
        if !st.is_null() && done(&st) {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("state of {name} never matched; last {st}");
}

/// A server whose `checks.pluginDirs` is `dir` (plus `more` configuration). Its plugins are
/// shell scripts that run system tools (`sleep`) and write beside themselves, so the system's
/// program directories are allowed (`programs.allowExec`) and the configuration file, which
/// no plugin may touch, is kept in a directory of its own.
fn with_plugins_in(dir: &std::path::Path, more: &str) -> Admin {
    let etc = dir.join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    Admin::start_with(Opts {
        args: config_args(
            &etc,
            &format!(
                "checks: {{pluginDirs: [{}]{more}}}\nprograms: {{allowExec: [/usr/bin, /bin]}}\n",
                dir.display()
            ),
        ),
        ..no_seed()
    })
}

fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn tcp_checks_follow_the_listener() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    post(s, &a.token, "/api/v1/hosts", json!({"name": "plc", "spec": {"address": "127.0.0.1", "checkCommand": "tcp", "args": [port.to_string()], "interval": 1, "maxCheckAttempts": 1}})).await;
    let up = wait_state(s, &a.token, "/api/v1/hosts", "plc", |st| st["state"] == 0).await;
    assert!(up["output"].as_str().unwrap().starts_with("TCP OK"), "{up}");
    assert!(up["perfdata"].as_str().unwrap().starts_with("time="));
    drop(listener);
    let down = wait_state(s, &a.token, "/api/v1/hosts", "plc", |st| st["state"] == 1).await;
    assert!(
        down["output"].as_str().unwrap().starts_with("TCP CRITICAL"),
        "{down}"
    );
    assert_eq!(down["stateType"], "hard");

    // The same built-in run once, ad hoc; nothing stored.
    let builtins = get(s, &a.token, "/api/v1/check-commands:builtins").await;
    assert!(
        builtins.as_array().unwrap().contains(&json!("tcp")),
        "{builtins}"
    );
    let again = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = again.local_addr().unwrap().port().to_string();
    let test = |body: Value| {
        call(s, &a.token, Method::POST, "/api/v1/check-commands:test")
            .json(&body)
            .send()
    };
    let ok = json(
        test(json!({"builtin": "tcp", "address": "127.0.0.1", "args": [open]}))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(ok["state"], 0, "{ok}");
    assert_eq!(ok["label"], "tcp");
    assert!(ok["output"].as_str().unwrap().starts_with("TCP OK"), "{ok}");
    assert!(
        ok["perfdata"].as_str().unwrap().starts_with("time="),
        "{ok}"
    );
    assert!(ok["tookMs"].is_u64());
    let closed = json(
        test(json!({"builtin": "tcp", "address": "127.0.0.1", "args": [port.to_string()]}))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(closed["state"], 2, "{closed}");
    assert_problem(
        test(json!({"builtin": "nmap", "address": "127.0.0.1"}))
            .await
            .unwrap(),
        422,
        "svc:validation/builtin",
    )
    .await;
    assert_problem(
        test(json!({"builtin": "tcp", "address": " "}))
            .await
            .unwrap(),
        422,
        "svc:validation/address",
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let refused = call(s, &viewer, Method::POST, "/api/v1/check-commands:test")
        .json(&json!({"builtin": "tcp", "address": "127.0.0.1", "args": [port.to_string()]}))
        .send()
        .await
        .unwrap();
    assert_problem(refused, 403, "svc:auth/forbidden").await;

    // Checks a host's agent runs: listed for the agent, never run by the server.
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "rtu", "spec": {"address": "10.0.0.9"}}),
    )
    .await;
    post(s, &a.token, "/api/v1/services", json!({"name": "load", "host": "rtu", "spec": {
        "checkCommand": "agent:exec:check_load", "interval": 1, "timeout": 20, "vars": {"warn": "5"},
        "args": ["-w", "$vars.warn$", "-H", "$address$", "--token", "$SECRET:tok$"]}})).await;
    let agent = get(s, &a.token, "/api/v1/agent/checks?host=rtu").await;
    assert_eq!(
        agent,
        json!({"host": "rtu", "checks": [{"service": "load", "command": "check_load",
            "args": ["-w", "5", "-H", "10.0.0.9", "--token", "$SECRET:tok$"],
            "intervalSeconds": 1, "timeoutSeconds": 20}]})
    );
    let nobody = call(
        s,
        &a.token,
        Method::GET,
        "/api/v1/agent/checks?host=nowhere",
    )
    .send()
    .await
    .unwrap();
    assert_problem(nobody, 404, "svc:not-found").await;
    let unnamed = call(s, &a.token, Method::GET, "/api/v1/agent/checks")
        .send()
        .await
        .unwrap();
    assert_problem(unnamed, 422, "svc:validation/host").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let services = get(s, &a.token, "/api/v1/services?name=load").await;
    assert!(
        services["items"][0]["state"].is_null(),
        "the server never runs an agent check: {services}"
    );
}

#[tokio::test]
async fn plugins_run_with_macros_exit_codes_and_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let a = with_plugins_in(dir.path(), "");
    let s = &a.s;
    let warn = script(
        dir.path(),
        "check_warn",
        "echo \"PLUG WARNING - arg=$1 host=$2 | v=1;2;3\"\necho \"detail line\"\nexit 1",
    );
    let slow = script(dir.path(), "check_slow", "sleep 5\necho never");
    let odd = script(dir.path(), "check_odd", "echo weird\nexit 7");
    post(
        s,
        &a.token,
        "/api/v1/check-commands",
        json!({"name": "warn", "type": "plugin", "line": [warn, "$ARG1$", "$hostname$"]}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/check-commands",
        json!({"name": "slow", "type": "plugin", "line": [slow], "timeout": 1}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/check-commands",
        json!({"name": "odd", "type": "plugin", "line": [odd]}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "rtu", "spec": {}}),
    )
    .await;
    let mut ids = Vec::new();
    for (name, command) in [
        ("warn", "warn"),
        ("slow", "slow"),
        ("odd", "odd"),
        ("ghost", "no-such-command"),
    ] {
        let svc = post(s, &a.token, "/api/v1/services", json!({"name": name, "host": "rtu", "spec": {"checkCommand": command, "args": ["hello"], "interval": 3600, "maxCheckAttempts": 1}})).await;
        ids.push(svc["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        let res = check_now(s, &a.token, id).await;
        assert_eq!(res.status(), 202);
    }
    let st = wait_state(s, &a.token, "/api/v1/services", "warn", |st| {
        st["state"] == 1
    })
    .await;
    assert_eq!(st["output"], "PLUG WARNING - arg=hello host=rtu");
    assert_eq!(st["perfdata"], "v=1;2;3");
    assert_eq!(st["longOutput"], "detail line");
    let st = wait_state(s, &a.token, "/api/v1/services", "slow", |st| {
        st["state"] == 3
    })
    .await;
    assert!(st["output"].as_str().unwrap().contains("timed out"), "{st}");
    let st = wait_state(s, &a.token, "/api/v1/services", "odd", |st| {
        st["state"] == 3
    })
    .await;
    assert!(st["output"].as_str().unwrap().contains("exited 7"), "{st}");
    let st = wait_state(s, &a.token, "/api/v1/services", "ghost", |st| {
        st["state"] == 3
    })
    .await;
    assert!(
        st["output"].as_str().unwrap().contains("no-such-command"),
        "{st}"
    );
    let changes = json(
        call(
            s,
            &a.token,
            Method::GET,
            "/api/v1/events?types=state_change",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    assert!(
        changes["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["payload"]["object"] == "warn" && e["severity"] == "warning")
    );
}

/// `$SECRET:name$` in a command line or an argument is the sealed secret's value, given to the
/// plugin only; a secret that is not set makes the check UNKNOWN without running it.
#[tokio::test]
async fn plugins_get_secrets_and_an_unset_one_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let a = with_plugins_in(dir.path(), "");
    let s = &a.s;
    let login = script(
        dir.path(),
        "check_login",
        "if [ \"$1\" = 'hunter2' ] && [ \"$2\" = 'pin-0000' ]; then echo 'LOGIN OK - accepted'; exit 0; fi\necho \"LOGIN CRITICAL - refused\"\nexit 2",
    );
    let put = call(s, &a.token, Method::PUT, "/api/v1/secrets/plc-password")
        .json(&json!({"value": "hunter2"}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let put = call(s, &a.token, Method::PUT, "/api/v1/secrets/plc-pin")
        .json(&json!({"value": "pin-0000"}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    post(
        s,
        &a.token,
        "/api/v1/check-commands",
        json!({"name": "login", "type": "plugin", "line": [login, "$SECRET:plc-password$", "$ARG1$"]}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "plc", "spec": {}}),
    )
    .await;
    let mut ids = Vec::new();
    for (name, pin) in [("login", "$SECRET:plc-pin$"), ("nopin", "$SECRET:missing$")] {
        let svc = post(s, &a.token, "/api/v1/services", json!({"name": name, "host": "plc", "spec": {"checkCommand": "login", "args": [pin], "interval": 3600, "maxCheckAttempts": 1}})).await;
        ids.push(svc["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert_eq!(check_now(s, &a.token, id).await.status(), 202);
    }
    let st = wait_state(s, &a.token, "/api/v1/services", "login", |st| {
        st["state"].is_number()
    })
    .await;
    assert_eq!(st["output"], "LOGIN OK - accepted", "{st}");
    let st = wait_state(s, &a.token, "/api/v1/services", "nopin", |st| {
        st["state"].is_number()
    })
    .await;
    assert_eq!(st["state"], 3);
    assert_eq!(st["output"], "UNKNOWN - secret \"missing\" is not set");
}

/// `checks.maxConcurrent: 2`: five slow plugin checks asked for at once never run more than two
/// at a time, and all of them run.
#[tokio::test]
async fn no_more_checks_run_at_once_than_configured() {
    let dir = tempfile::tempdir().unwrap();
    // Not directly in the directory above the configuration file: no plugin may make anything
    // there, nor reach what is made there after the start.
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let log = logs.join("runs.log");
    let a = with_plugins_in(dir.path(), ", maxConcurrent: 2");
    let s = &a.s;
    let slow = script(
        dir.path(),
        "check_busy",
        &format!(
            "echo start >> {log}\nsleep 0.6\necho end >> {log}\necho 'BUSY OK'",
            log = log.display()
        ),
    );
    post(
        s,
        &a.token,
        "/api/v1/check-commands",
        json!({"name": "busy", "type": "plugin", "line": [slow]}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "box", "spec": {}}),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let svc = post(s, &a.token, "/api/v1/services", json!({"name": format!("b{i}"), "host": "box", "spec": {"checkCommand": "busy", "interval": 3600}})).await;
        ids.push(svc["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert_eq!(check_now(s, &a.token, id).await.status(), 202);
    }
    for i in 0..5 {
        wait_state(s, &a.token, "/api/v1/services", &format!("b{i}"), |st| {
            st["state"] == 0
        })
        .await;
    }
    let lines = std::fs::read_to_string(&log).unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for line in lines.lines() {
        running += if line == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    // A service's first scheduled run may come on top of its check-now.
    assert!(
        lines.lines().filter(|l| *l == "start").count() >= 5,
        "{lines}"
    );
    assert_eq!(most, 2, "{lines}");
}

#[tokio::test]
async fn check_now_needs_the_object_and_the_permission() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let host = post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "h", "spec": {}}),
    )
    .await;
    let id = host["id"].as_str().unwrap();
    assert_problem(
        check_now(s, &a.token, "0190a000-0000-7000-8000-000000000000").await,
        404,
        "svc:not-found",
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let res = check_now(s, &viewer, id).await;
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "checks:run"
    );
    let (_, other) = second_tenant(s, &a.token, "chk-iso").await;
    assert_problem(check_now(s, &other, id).await, 404, "svc:not-found").await;
}

/// Debian's monitoring-plugins, unmodified (`.ci/run` installs `monitoring-plugins-basic`).
#[tokio::test]
async fn debian_monitoring_plugins_run_unmodified() {
    let plugins = std::path::Path::new("/usr/lib/nagios/plugins");
    if !plugins.join("check_tcp").exists() {
        eprintln!(
            "SKIPPED debian_monitoring_plugins_run_unmodified: monitoring-plugins-basic is not installed"
        );
        return;
    }
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let check_tcp = plugins.join("check_tcp").display().to_string();
    let check_disk = plugins.join("check_disk").display().to_string();
    post(s, &a.token, "/api/v1/check-commands", json!({"name": "check_tcp", "type": "plugin", "line": [check_tcp, "-H", "$address$", "-p", "$ARG1$"]})).await;
    post(s, &a.token, "/api/v1/check-commands", json!({"name": "check_disk", "type": "plugin", "line": [check_disk, "-w", "1%", "-c", "0%", "-p", "/"]})).await;
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "gw", "spec": {"address": "127.0.0.1"}}),
    )
    .await;
    let tcp = post(s, &a.token, "/api/v1/services", json!({"name": "tcp", "host": "gw", "spec": {"checkCommand": "check_tcp", "args": [port.to_string()], "interval": 3600, "maxCheckAttempts": 1}})).await;
    let disk = post(s, &a.token, "/api/v1/services", json!({"name": "disk", "host": "gw", "spec": {"checkCommand": "check_disk", "interval": 3600, "maxCheckAttempts": 1}})).await;
    for svc in [&tcp, &disk] {
        let id = svc["id"].as_str().unwrap();
        assert_eq!(check_now(s, &a.token, id).await.status(), 202);
    }
    let st = wait_state(s, &a.token, "/api/v1/services", "tcp", |st| {
        st["output"]
            .as_str()
            .is_some_and(|o| o.starts_with("TCP OK"))
    })
    .await;
    assert_eq!(st["state"], 0);
    assert!(
        st["perfdata"].as_str().unwrap().starts_with("time="),
        "{st}"
    );
    let st = wait_state(s, &a.token, "/api/v1/services", "disk", |st| {
        st["output"].as_str().is_some_and(|o| o.starts_with("DISK"))
    })
    .await;
    assert!(!st["perfdata"].as_str().unwrap().is_empty(), "{st}");
    drop(listener);
}

/// Starts a real HTTP server (axum) with `/health` (200 "all good") and `/missing` (404).
async fn http_peer() -> u16 {
    let app = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "all good" }))
        .route(
            "/missing",
            axum::routing::get(|| async { (axum::http::StatusCode::NOT_FOUND, "gone") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// A TLS server whose self-signed certificate expires in 10 days, answering every request
/// with 200.
async fn tls_peer() -> u16 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    let until = std::time::SystemTime::now() + Duration::from_secs(10 * 86_400 + 3600);
    params.not_after = until.into();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = tls.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// Creates a service under `gw` and runs its check once.
async fn check_once(a: &Admin, name: &str, spec: Value) -> Value {
    let svc = post(
        &a.s,
        &a.token,
        "/api/v1/services",
        json!({"name": name, "host": "gw", "spec": spec}),
    )
    .await;
    let id = svc["id"].as_str().unwrap();
    let res = check_now(&a.s, &a.token, id).await;
    assert_eq!(res.status(), 202);
    wait_state(&a.s, &a.token, "/api/v1/services", name, |_| true).await
}

async fn gateway(a: &Admin) {
    post(
        &a.s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "gw", "spec": {"address": "127.0.0.1"}}),
    )
    .await;
}

#[tokio::test]
async fn builtin_http_checks_status_body_timing_and_certificate_expiry() {
    let a = Admin::start_with(no_seed());
    gateway(&a).await;
    let port = http_peer().await.to_string();
    let tls = tls_peer().await.to_string();
    let once = |args: Vec<&str>| json!({"checkCommand": "http", "args": args, "interval": 3600, "maxCheckAttempts": 1});
    let ok = check_once(
        &a,
        "health",
        once(vec![
            "-p", &port, "-u", "/health", "-s", "all good", "-w", "5", "-c", "10",
        ]),
    )
    .await;
    assert_eq!(ok["state"], 0, "{ok}");
    assert!(
        ok["output"]
            .as_str()
            .unwrap()
            .starts_with("HTTP OK: HTTP/1.1 200 OK"),
        "{ok}"
    );
    assert!(
        ok["perfdata"].as_str().unwrap().starts_with("time="),
        "{ok}"
    );
    assert!(ok["perfdata"].as_str().unwrap().contains("size=8B"), "{ok}");
    let missing = check_once(&a, "missing", once(vec!["-p", &port, "-u", "/missing"])).await;
    assert_eq!(missing["state"], 2, "{missing}");
    let expected = check_once(
        &a,
        "expected",
        once(vec!["-p", &port, "-u", "/missing", "-e", "404"]),
    )
    .await;
    assert_eq!(expected["state"], 0, "{expected}");
    let body = check_once(
        &a,
        "body",
        once(vec!["-p", &port, "-u", "/health", "-s", "nope"]),
    )
    .await;
    assert_eq!(body["state"], 2, "{body}");
    assert!(
        body["output"].as_str().unwrap().contains("not found"),
        "{body}"
    );
    let url = format!("http://127.0.0.1:{port}/health");
    let by_url = check_once(&a, "url", once(vec![&url])).await;
    assert_eq!(by_url["state"], 0, "{by_url}");
    let cert = check_once(&a, "cert", once(vec!["-S", "-p", &tls, "-C", "30,5"])).await;
    assert_eq!(cert["state"], 1, "10 days left is under 30: {cert}");
    assert!(
        cert["output"]
            .as_str()
            .unwrap()
            .contains("certificate expires in 10 days"),
        "{cert}"
    );
    assert!(
        cert["perfdata"]
            .as_str()
            .unwrap()
            .contains("cert_days=10;30;5"),
        "{cert}"
    );
    let fine = check_once(&a, "cert-fine", once(vec!["-S", "-p", &tls, "-C", "7"])).await;
    assert_eq!(fine["state"], 0, "{fine}");
    let closed = check_once(&a, "closed", once(vec!["-p", "1"])).await;
    assert_eq!(closed["state"], 2, "{closed}");
    let bad = check_once(&a, "bad-args", once(vec!["-p", &port, "-w", "x:y"])).await;
    assert_eq!(bad["state"], 3, "{bad}");
}

/// The Modbus TCP peer: holding register 100 is 215, input registers 7..8 hold 40.5 as f32.
#[derive(Clone)]
struct Plc;

impl tokio_modbus::server::Service for Plc {
    type Request = tokio_modbus::Request<'static>;
    type Response = tokio_modbus::Response;
    type Exception = tokio_modbus::ExceptionCode;
    type Future = std::future::Ready<Result<Self::Response, Self::Exception>>;

    fn call(&self, req: Self::Request) -> Self::Future {
        use tokio_modbus::{ExceptionCode, Request, Response};
        let words = 40.5f32.to_bits();
        std::future::ready(match req {
            Request::ReadHoldingRegisters(100, 1) => Ok(Response::ReadHoldingRegisters(vec![215])),
            Request::ReadInputRegisters(7, 2) => Ok(Response::ReadInputRegisters(vec![
                (words >> 16) as u16,
                words as u16,
            ])),
            _ => Err(ExceptionCode::IllegalDataAddress),
        })
    }
}

async fn modbus_peer() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio_modbus::server::tcp::Server::new(listener);
    tokio::spawn(async move {
        let on_connected = |stream, addr| async move {
            tokio_modbus::server::tcp::accept_tcp_connection(stream, addr, |_| Ok(Some(Plc)))
        };
        let _ = server.serve(&on_connected, |_| {}).await;
    });
    port
}

#[tokio::test]
async fn builtin_modbus_reads_registers_over_tcp_and_grades_them() {
    let a = Admin::start_with(no_seed());
    gateway(&a).await;
    let port = modbus_peer().await.to_string();
    let once = |args: Vec<&str>| json!({"checkCommand": "modbus", "args": args, "interval": 3600, "maxCheckAttempts": 1});
    let temp = check_once(
        &a,
        "temperature",
        once(vec![
            "-p",
            &port,
            "-r",
            "100",
            "-s",
            "0.1",
            "-l",
            "temperature",
            "-w",
            "25",
            "-c",
            "30",
        ]),
    )
    .await;
    assert_eq!(temp["state"], 0, "{temp}");
    assert_eq!(temp["output"], "MODBUS OK - temperature = 21.5");
    assert_eq!(temp["perfdata"], "'temperature'=21.5;25;30");
    let hot = check_once(
        &a,
        "hot",
        once(vec![
            "-p", &port, "-r", "7", "-T", "input", "-f", "f32", "-w", "25", "-c", "30",
        ]),
    )
    .await;
    assert_eq!(hot["state"], 2, "{hot}");
    assert!(
        hot["output"].as_str().unwrap().contains("value = 40.5"),
        "{hot}"
    );
    let exception = check_once(&a, "nothing-there", once(vec!["-p", &port, "-r", "9"])).await;
    assert_eq!(exception["state"], 2, "{exception}");
    assert!(
        exception["output"]
            .as_str()
            .unwrap()
            .contains("IllegalDataAddress"),
        "{exception}"
    );
    let no_register = check_once(&a, "no-register", once(vec!["-p", &port])).await;
    assert_eq!(no_register["state"], 3, "{no_register}");
}

#[tokio::test]
async fn builtin_modbus_reads_registers_over_a_serial_line() {
    let Some(pty) = crate::pty::PtyPair::open("modbus rtu") else {
        return;
    };
    let line = tokio_modbus::server::rtu::Server::new_from_path(&pty.theirs, 19200).unwrap();
    tokio::spawn(line.serve_forever(Plc));
    let device = pty.ours.display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(
            dir.path(),
            &format!("hardware: {{modbus: {{device: {device}}}}}\n"),
        ),
        ..no_seed()
    });
    gateway(&a).await;
    // Only the line the configuration names: another path is not even looked at.
    let other = check_once(
        &a,
        "other-line",
        json!({"checkCommand": "modbus", "args": ["-D", "/etc/shadow", "-r", "100"], "interval": 3600, "maxCheckAttempts": 1}),
    )
    .await;
    assert_eq!(other["state"], 3, "{other}");
    assert!(
        other["output"]
            .as_str()
            .unwrap()
            .contains("not the serial line the configuration names"),
        "{other}"
    );
    let once = |args: Vec<&str>| json!({"checkCommand": "modbus", "args": args, "interval": 3600, "maxCheckAttempts": 1});
    let temp = check_once(
        &a,
        "rtu-temperature",
        once(vec![
            "-D", &device, "-b", "19200", "-P", "E", "-r", "100", "-s", "0.1", "-w", "25",
        ]),
    )
    .await;
    assert_eq!(temp["state"], 0, "{temp}");
    assert_eq!(temp["output"], "MODBUS OK - value = 21.5");
    let hot = check_once(
        &a,
        "rtu-hot",
        once(vec![
            "-D", &device, "-b", "19200", "-r", "7", "-T", "input", "-f", "f32", "-c", "30",
        ]),
    )
    .await;
    assert_eq!(hot["state"], 2, "{hot}");
}

#[tokio::test]
async fn builtin_gsm_reports_no_modem_as_unknown() {
    let a = Admin::start_with(no_seed());
    gateway(&a).await;
    let st = check_once(
        &a,
        "gsm",
        json!({"checkCommand": "gsm", "interval": 3600, "maxCheckAttempts": 1}),
    )
    .await;
    assert_eq!(st["state"], 3, "{st}");
    assert!(
        st["output"].as_str().unwrap().contains("no GSM modem"),
        "{st}"
    );
}

#[tokio::test]
async fn builtin_ping_measures_loopback() {
    let a = Admin::start_with(no_seed());
    gateway(&a).await;
    let st = check_once(&a, "ping", json!({"checkCommand": "ping", "args": ["-p", "3"], "interval": 3600, "maxCheckAttempts": 1})).await;
    let output = st["output"].as_str().unwrap();
    if output.contains("cannot open an ICMP socket") {
        eprintln!("SKIPPED builtin_ping_measures_loopback: no ICMP socket allowed here ({output})");
        return;
    }
    assert_eq!(st["state"], 0, "{st}");
    assert!(output.starts_with("PING OK - Packet loss = 0%"), "{st}");
    assert!(st["perfdata"].as_str().unwrap().starts_with("rta="), "{st}");
    assert!(
        st["perfdata"]
            .as_str()
            .unwrap()
            .contains("pl=0%;20;60;0;100"),
        "{st}"
    );
}

/// A real DNS server: dnsmasq from Debian (`.ci/run` installs dnsmasq-base).
#[tokio::test]
async fn builtin_dns_asks_a_real_server() {
    if !std::path::Path::new("/usr/sbin/dnsmasq").exists() {
        eprintln!("SKIPPED builtin_dns_asks_a_real_server: dnsmasq is not installed");
        return;
    }
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut dnsmasq = Peer(
        std::process::Command::new("/usr/sbin/dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--listen-address=127.0.0.1",
                &format!("--port={port}"),
                "--address=/plc.svc.test/10.1.2.3",
                "--user=root",
                "--pid-file=",
            ])
            .spawn()
            .unwrap(),
    );
    // dnsmasq opens its UDP and TCP sockets together, so its TCP port says the UDP one is up.
    dnsmasq.wait_listening(port, "dnsmasq");
    let a = Admin::start_with(no_seed());
    gateway(&a).await;
    let server = format!("127.0.0.1:{port}");
    let once = |args: Vec<&str>| json!({"checkCommand": "dns", "args": args, "interval": 3600, "maxCheckAttempts": 1});
    let ok = check_once(
        &a,
        "dns",
        once(vec!["-H", "plc.svc.test", "-s", &server, "-a", "10.1.2.3"]),
    )
    .await;
    assert_eq!(ok["state"], 0, "{ok}");
    assert!(
        ok["output"]
            .as_str()
            .unwrap()
            .contains("plc.svc.test returns 10.1.2.3"),
        "{ok}"
    );
    let wrong = check_once(
        &a,
        "dns-wrong",
        once(vec!["-H", "plc.svc.test", "-s", &server, "-a", "10.9.9.9"]),
    )
    .await;
    assert_eq!(wrong["state"], 2, "{wrong}");
    let missing = check_once(
        &a,
        "dns-missing",
        once(vec!["-H", "nothing.invalid", "-s", &server]),
    )
    .await;
    assert_eq!(missing["state"], 2, "{missing}");
}

#[tokio::test]
async fn check_periods_hold_scheduled_checks_but_not_check_now() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    post(
        s,
        &a.token,
        "/api/v1/time-periods",
        json!({"name": "never", "days": {}}),
    )
    .await;
    let all_day: serde_json::Map<String, Value> = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
    .iter()
    .map(|d| (d.to_string(), json!(["00:00-24:00"])))
    .collect();
    post(
        s,
        &a.token,
        "/api/v1/time-periods",
        json!({"name": "always", "timeZone": "Europe/Berlin", "days": all_day}),
    )
    .await;
    let held = post(s, &a.token, "/api/v1/hosts", json!({"name": "held", "spec": {"address": "127.0.0.1", "checkCommand": "tcp", "args": [port], "interval": 1, "checkPeriod": "never"}})).await;
    post(s, &a.token, "/api/v1/hosts", json!({"name": "runs", "spec": {"address": "127.0.0.1", "checkCommand": "tcp", "args": [port], "interval": 1, "checkPeriod": "always"}})).await;
    wait_state(s, &a.token, "/api/v1/hosts", "runs", |st| st["state"] == 0).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let hosts = json(
        call(s, &a.token, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let held_state = hosts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "held")
        .unwrap()["state"]
        .clone();
    assert!(
        held_state.is_null(),
        "outside its period the host is not checked: {held_state}"
    );
    let id = held["id"].as_str().unwrap();
    let res = check_now(s, &a.token, id).await;
    assert_eq!(res.status(), 202);
    wait_state(s, &a.token, "/api/v1/hosts", "held", |st| st["state"] == 0).await;
    drop(listener);
}

#[tokio::test]
async fn a_service_checks_the_address_its_host_inherits_from_a_template() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    post(
        s,
        &a.token,
        "/api/v1/templates",
        json!({"name": "lan", "spec": {"address": "127.0.0.1"}}),
    )
    .await;
    post(
        s,
        &a.token,
        "/api/v1/hosts",
        json!({"name": "gw", "spec": {"templates": ["lan"]}}),
    )
    .await;
    post(s, &a.token, "/api/v1/services", json!({"name": "tcp", "host": "gw", "spec": {"checkCommand": "tcp", "args": ["-p", port], "interval": 1, "maxCheckAttempts": 1}})).await;
    let st = wait_state(s, &a.token, "/api/v1/services", "tcp", |st| {
        st["state"] == 0
    })
    .await;
    assert!(
        st["output"].as_str().unwrap().contains("on 127.0.0.1 port"),
        "{st}"
    );
    drop(listener);
}
