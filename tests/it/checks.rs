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

/// Polls an object's live state until `done` holds (10 s at most).
async fn wait_state(
    s: &Server,
    token: &str,
    list: &str,
    name: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut st = Value::Null;
    for _ in 0..100 {
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
}

#[tokio::test]
async fn plugins_run_with_macros_exit_codes_and_timeouts() {
    let a = Admin::start_with(no_seed());
    let s = &a.s;
    let dir = tempfile::tempdir().unwrap();
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
        let res = call(
            s,
            &a.token,
            Method::POST,
            &format!("/api/v1/objects/{id}/check-now"),
        )
        .send()
        .await
        .unwrap();
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
        call(
            s,
            &a.token,
            Method::POST,
            "/api/v1/objects/0190a000-0000-7000-8000-000000000000/check-now",
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let res = call(
        s,
        &viewer,
        Method::POST,
        &format!("/api/v1/objects/{id}/check-now"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(
        assert_problem(res, 403, "svc:auth/forbidden").await["detail"],
        "checks:run"
    );
    let (_, other) = second_tenant(s, &a.token, "chk-iso").await;
    assert_problem(
        call(
            s,
            &other,
            Method::POST,
            &format!("/api/v1/objects/{id}/check-now"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
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
        assert_eq!(
            call(
                s,
                &a.token,
                Method::POST,
                &format!("/api/v1/objects/{id}/check-now")
            )
            .send()
            .await
            .unwrap()
            .status(),
            202
        );
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
