//! The command-line client (SPEC 4.6) run as a child process against the real server: every
//! command in table and JSON form, and its exit codes.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

/// Runs a client command against `s` with `token`.
fn client(s: &Server, token: &str, args: &[&str]) -> (i32, String, String) {
    let server = s.url("");
    let mut all = vec!["--server", server.as_str()];
    all.extend_from_slice(args);
    svc(&all, &[("SVC_TOKEN", token), ("NO_COLOR", "1")])
}

fn ok(s: &Server, token: &str, args: &[&str]) -> String {
    let (code, out, err) = client(s, token, args);
    assert_eq!(code, 0, "svc {args:?}: {err}");
    out
}

fn json_of(s: &Server, token: &str, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(s, token, &all)).unwrap()
}

#[tokio::test]
async fn every_command_prints_a_table_or_the_apis_json() {
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("site.yaml");
    std::fs::write(
        &bundle,
        "kind: host\nname: web01\nbody: {labels: {site: lab}, spec: {address: 192.0.2.1}}\n---\nkind: service\nname: disk\nhost: web01\nbody: {spec: {}}\n",
    )
    .unwrap();
    let planned = ok(
        s,
        t,
        &["apply", "-f", bundle.to_str().unwrap(), "--dry-run"],
    );
    assert!(
        planned.contains("create   host      web01") && planned.contains("not applied"),
        "{planned}"
    );
    assert!(
        json_of(s, t, &["get", "hosts"])["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a dry run stores nothing"
    );
    let applied = ok(s, t, &["apply", "-f", bundle.to_str().unwrap()]);
    assert!(applied.ends_with("applied\n"), "{applied}");

    let hosts = ok(s, t, &["get", "hosts"]);
    let lines: Vec<&str> = hosts.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("STATE"),
        "{hosts}"
    );
    assert!(
        lines[1].starts_with("web01") && lines[1].contains("PEND") && lines[1].contains("site=lab"),
        "{hosts}"
    );
    let host_json = json_of(s, t, &["get", "hosts"]);
    let o_json: Value = serde_json::from_str(&ok(s, t, &["get", "hosts", "-o", "json"])).unwrap();
    assert_eq!(o_json, host_json, "-o json is --json");
    let wide = ok(s, t, &["get", "hosts", "-o", "wide"]);
    let wide_lines: Vec<&str> = wide.lines().collect();
    assert!(wide_lines[0].ends_with("FOLDER   CHECK   ID"), "{wide}");
    assert!(
        wide_lines[1].ends_with(host_json["items"][0]["id"].as_str().unwrap()),
        "{wide}"
    );
    let api: Value = call(s, t, Method::GET, "/api/v1/hosts?limit=500")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(host_json, api, "--json prints the API's JSON unchanged");
    let host_id = api["items"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        ok(s, t, &["get", "hosts", "-l", "site=lab"])
            .lines()
            .count(),
        2
    );
    assert_eq!(
        ok(s, t, &["get", "hosts", "-l", "site=elsewhere"])
            .lines()
            .count(),
        1,
        "the header only"
    );

    let res = send(s, t, Method::POST, "/api/v1/results", json!({"results": [{"host": "web01", "service": "disk", "state": "CRITICAL", "output": "DISK CRITICAL - 99% used"}]})).await;
    assert_eq!(res.status(), 202);
    let services = ok(s, t, &["get", "services"]);
    assert!(
        services.lines().nth(1).unwrap().contains("CRIT"),
        "{services}"
    );
    let problems = ok(s, t, &["get", "problems"]);
    assert!(
        problems.contains("web01/disk") && problems.contains("DISK CRITICAL"),
        "{problems}"
    );

    let described = ok(s, t, &["describe", &host_id]);
    assert!(
        described.contains("Name:           web01") && described.contains("address"),
        "{described}"
    );
    assert!(ok(s, t, &["check-now", &host_id]).contains("scheduled"));

    let alarm = json(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Fire in hall 2", "severity": "critical"}),
        )
        .await,
        201,
    )
    .await;
    let alert_id = alarm["id"].as_str().unwrap();
    assert!(ok(s, t, &["get", "alerts"]).contains("Fire in hall 2"));
    let wide_alerts = ok(s, t, &["get", "alerts", "-o", "wide"]);
    assert!(
        wide_alerts.contains("DEDUP KEY")
            && wide_alerts.contains(alarm["dedupKey"].as_str().unwrap()),
        "{wide_alerts}"
    );
    assert!(ok(s, t, &["ack", alert_id, "-m", "on my way"]).contains("acknowledged"));
    let acked = json_of(s, t, &["get", "alerts"]);
    assert_eq!(acked["items"][0]["status"], "acked");
    assert!(ok(s, t, &["resolve", alert_id]).contains("resolved"));

    // Names instead of ids: a host, a host's service, and the alert of an object.
    assert!(ok(s, t, &["describe", "web01"]).contains("Id:             ".to_string().as_str()));
    let disk = ok(s, t, &["describe", "web01/disk"]);
    assert!(disk.starts_with("Name:           disk"), "{disk}");
    assert_eq!(ok(s, t, &["describe", "service", "web01/disk"]), disk);
    assert!(ok(s, t, &["describe", "host", "web01"]).starts_with("Name:           web01"));
    let disk_id = json_of(s, t, &["get", "services"])["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let on_disk = json!({"title": "Disk alarm", "objectId": disk_id, "dedupKey": "disk"});
    let on_disk = json(
        send(s, t, Method::POST, "/api/v1/alerts", on_disk).await,
        201,
    )
    .await;
    let acked = ok(s, t, &["ack", "web01/disk"]);
    assert_eq!(
        acked,
        format!("alert {} acknowledged\n", on_disk["id"].as_str().unwrap())
    );
    let (code, _, err) = client(s, t, &["describe", "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("no host named \"nosuch\""), "{err}");

    assert!(
        ok(
            s,
            t,
            &[
                "downtime", "--object", &host_id, "--hours", "1", "-m", "patching"
            ]
        )
        .starts_with("downtime ")
    );
    assert!(ok(s, t, &["get", "downtimes"]).contains("patching"));
    // Recurring: every Saturday 22:00 to midnight in Berlin for 90 days, its windows listed.
    let weekly = ok(
        s,
        t,
        &[
            "downtime",
            "--selector",
            "site=lab",
            "--hours",
            "2160",
            "--weekdays",
            "saturday",
            "--times",
            "22:00-24:00",
            "--location",
            "Europe/Berlin",
            "-m",
            "weekly backup",
        ],
    );
    assert_eq!(weekly.matches("  in effect ").count(), 5, "{weekly}");
    let recurring = json_of(s, t, &["get", "downtimes"]);
    let listed = recurring["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["comment"] == "weekly backup")
        .unwrap()
        .clone();
    assert_eq!(
        listed["timeIntervals"],
        json!([{"times": [{"startTime": "22:00", "endTime": "24:00"}],
            "weekdays": ["saturday"], "location": "Europe/Berlin"}])
    );
    let (code, _, err) = client(
        s,
        t,
        &[
            "downtime",
            "--selector",
            "site=lab",
            "--weekdays",
            "someday",
            "-m",
            "x",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("svc:validation/timeIntervals"), "{err}");
    // Shipped to a federation site, which keeps it without an uplink.
    json(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/sites",
            json!({"name": "north"}),
        )
        .await,
        201,
    )
    .await;
    let shipped = ok(
        s,
        t,
        &[
            "downtime",
            "--selector",
            "site=lab",
            "--site",
            "north",
            "-m",
            "mast work",
        ],
    );
    assert!(shipped.contains("  shipped to north"), "{shipped}");
    assert!(
        ok(s, t, &["silence", "--selector", "site=lab", "-m", "tests"]).starts_with("silence ")
    );
    let silences = json_of(s, t, &["get", "silences"]);
    assert_eq!(silences["items"][0]["selector"], "site=lab");
    assert!(ok(s, t, &["get", "incidents"]).starts_with("ID"));
    assert!(ok(s, t, &["get", "events"]).contains("state_change"));
    assert!(ok(s, t, &["oncall"]).starts_with("SCHEDULE"));
    assert!(ok(s, t, &["audit", "verify"]).starts_with("audit chain intact"));
    assert!(ok(s, t, &["audit", "tail"]).contains("bundle.apply"));
    let exported = ok(s, t, &["export"]);
    assert!(exported.contains("name: web01"), "{exported}");
    let doctor = ok(s, t, &["doctor"]);
    assert!(
        doctor.contains("reachable, version") && doctor.contains("results-pipeline"),
        "{doctor}"
    );
    let clock = doctor
        .lines()
        .find(|l| l.starts_with("clock"))
        .unwrap_or_else(|| panic!("{doctor}"));
    assert!(
        clock.contains(" ok ") && clock.contains("this machine's"),
        "{doctor}"
    );
    assert!(
        doctor
            .lines()
            .any(|l| l.starts_with("disk") && l.contains("GiB free of")),
        "{doctor}"
    );
}

#[tokio::test]
async fn errors_exit_one_with_the_problem_and_usage_errors_two() {
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    assert_eq!(svc(&["bogus"], &[]).0, 2, "unknown command");
    assert_eq!(svc(&["--bogus", "get", "hosts"], &[]).0, 2, "unknown flag");
    assert_eq!(svc(&["--server"], &[]).0, 2, "flag without value");
    assert_eq!(
        client(s, t, &["get", "--json", "hosts"]).0,
        2,
        "global flags precede the command"
    );
    assert_eq!(
        client(s, t, &["downtime", "--object", "x"]).0,
        2,
        "-m is required"
    );

    let (narrow, _) = mint(s, t, json!({"name": "narrow", "scopes": ["events:read"]})).await;
    let (code, out, err) = client(s, &narrow, &["get", "hosts"]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(
        err.contains("Permission missing")
            && err.contains("svc:auth/forbidden")
            && err.contains("objects:read"),
        "{err}"
    );
    let (code, _, err) = client(s, "", &["get", "hosts"]);
    assert_eq!(code, 1);
    assert!(err.contains("svc:auth/required"), "{err}");
    let (code, _, err) = client(s, t, &["ack", "0190c6a4-0000-7000-8000-00000000dead"]);
    assert_eq!(code, 1);
    assert!(err.contains("svc:not-found"), "{err}");

    let port = free_port();
    let (code, _, err) = svc(
        &[
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "get",
            "hosts",
        ],
        &[("SVC_TOKEN", t)],
    );
    assert_eq!(code, 1);
    assert!(err.contains("cannot connect to http://127.0.0.1:"), "{err}");
}

#[test]
fn shells_get_completions() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = svc(&["completion", shell], &[]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("downtime") && out.contains("check-now"),
            "{shell}"
        );
    }
}

#[tokio::test]
async fn watch_follows_new_events_as_they_happen() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let mut child = Command::new(BIN)
        .args(["--server", &s.url(""), "get", "events", "--watch"])
        .env("SVC_TOKEN", t)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let header = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
    assert!(header.starts_with("TIME"), "{header}");
    // The stream connects just after the first listing; an alarm raised before that is not
    // streamed, so raise one each second until one shows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut seen = Vec::new();
    let mut raised = 0;
    while std::time::Instant::now() < deadline {
        match rx.recv_timeout(std::time::Duration::from_secs(1)) {
            Ok(line) if line.contains("alert_opened") && line.contains("watch me") => {
                seen.push(line);
                break;
            }
            Ok(line) => seen.push(line),
            Err(_) => {
                raised += 1;
                let alarm = json!({"title": format!("watch me {raised}"), "dedupKey": format!("w{raised}")});
                json(send(s, t, Method::POST, "/api/v1/alerts", alarm).await, 201).await;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.iter()
            .any(|l| l.contains("alert_opened") && l.contains("watch me")),
        "{seen:?}"
    );
}

/// Runs the client with `stdin` as its input and `home` as its configuration directory.
fn with_input(home: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(BIN)
        .args(args)
        .env("XDG_CONFIG_HOME", home)
        .env_remove("SVC_TOKEN")
        .env_remove("SVC_SERVER")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `svc login` signs in like `gh auth login` and keeps a personal token (mode 0600) that acts
/// as the user; `svc logout` revokes it; `svc token` mints, lists and revokes tokens.
#[tokio::test]
async fn login_keeps_a_personal_token_and_logout_revokes_it() {
    use std::os::unix::fs::PermissionsExt;
    let a = Admin::start();
    let (s, admin) = (&a.s, a.token.as_str());
    let user = json(
        send(s, admin, Method::POST, "/api/v1/users", json!({"email": "vera@example.org", "name": "Vera", "roles": ["viewer"], "password": "a long enough password"})).await,
        201,
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let server = s.url("");
    let run = |args: &[&str], stdin: &str| {
        let mut all = vec!["--server", server.as_str()];
        all.extend_from_slice(args);
        with_input(home.path(), &all, stdin)
    };

    let (code, _, err) = run(&["login"], "vera@example.org\nwrong password\n");
    assert_eq!(code, 1);
    assert!(err.contains("refused"), "{err}");
    let (code, out, err) = run(&["login"], "vera@example.org\na long enough password\n");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("signed in to") && out.contains("svc-cli on"),
        "{out}"
    );
    let stored = home.path().join("svc/config");
    assert_eq!(
        std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let credentials: Value = serde_json::from_slice(&std::fs::read(&stored).unwrap()).unwrap();
    let secret = credentials["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("svc_"));

    // Used without --token: the stored token acts as Vera, a viewer.
    let (code, out, err) = with_input(home.path(), &["--server", &server, "get", "hosts"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    let whoami = json(
        call(s, &secret, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        whoami["permissions"],
        json!([
            "alerts:read",
            "events:read",
            "incidents:read",
            "metrics:read",
            "objects:read",
            "oncall:read"
        ])
    );
    assert_problem(
        send(
            s,
            &secret,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "h"}),
        )
        .await,
        403,
        "svc:auth/forbidden",
    )
    .await;
    let (code, out, err) = run(&["token", "list", "--mine"], "");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("svc-cli on") && out.contains("as its user"),
        "{out}"
    );
    // A viewer mints personal tokens only.
    let (code, _, err) = run(
        &["token", "create", "deploy", "--scope", "objects:write"],
        "",
    );
    assert_eq!(code, 1);
    assert!(err.contains("svc:auth/forbidden"), "{err}");
    let (code, out, err) = run(&["--json", "token", "create", "laptop"], "");
    assert_eq!(code, 0, "{err}");
    let laptop: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(laptop["meta"]["owner"], user["id"]);
    let laptop_secret = laptop["token"].as_str().unwrap().to_string();

    let (code, out, err) = run(&["logout"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("token revoked"), "{out}");
    assert!(!stored.exists());
    assert_problem(
        call(s, &secret, Method::GET, "/api/v1/whoami")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    let (code, _, err) = run(&["logout"], "");
    assert_eq!(code, 1);
    assert!(err.contains("not signed in"), "{err}");

    // A personal token is its user: disabled user, dead token.
    assert_eq!(
        call(s, &laptop_secret, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    json(send(s, admin, Method::PUT, &format!("/api/v1/users/{}", user["id"].as_str().unwrap()), json!({"email": "vera@example.org", "name": "Vera", "roles": ["viewer"], "disabled": true})).await, 200).await;
    assert_problem(
        call(s, &laptop_secret, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
    // Personal-token routes need a user behind the credential.
    assert_problem(
        call(s, admin, Method::GET, "/api/v1/users/me/api-tokens")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/required",
    )
    .await;

    // Tenant tokens for scripts, by an administrator.
    let (code, out, err) = client(
        s,
        admin,
        &["token", "create", "ci", "--scope", "objects:read"],
    );
    assert_eq!(code, 0, "{err}");
    let ci_secret = out.lines().last().unwrap().to_string();
    assert!(ci_secret.starts_with("svc_"), "{out}");
    let listed = ok(s, admin, &["token", "list"]);
    let row = listed
        .lines()
        .find(|l| l.contains(" ci "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("objects:read"), "{listed}");
    let id = row.split_whitespace().next().unwrap();
    assert_eq!(
        call(s, &ci_secret, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    ok(s, admin, &["token", "revoke", id]);
    assert_problem(
        call(s, &ci_secret, Method::GET, "/api/v1/hosts")
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/invalid",
    )
    .await;
}

/// Colour only on a terminal (a real pseudo-terminal from `script`), and never with NO_COLOR.
#[tokio::test]
async fn states_are_coloured_on_a_terminal_only() {
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    json(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "web01", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    json(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/results",
            json!({"results": [{"host": "web01", "state": "DOWN", "output": "no ping"}]}),
        )
        .await,
        202,
    )
    .await;
    let on_terminal = |no_color: &str| {
        let command = format!("{BIN} --server {} get hosts", s.url(""));
        let out = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env("SVC_TOKEN", t)
            .env("XDG_CONFIG_HOME", "/nonexistent/svc-tests")
            .env("NO_COLOR", no_color)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_terminal("");
    assert!(coloured.contains("\x1b[31mDOWN\x1b[0m"), "{coloured:?}");
    assert!(!coloured.contains("\x1b[31mNAME"), "the header stays plain");
    let plain = on_terminal("1");
    assert!(
        plain.contains("DOWN") && !plain.contains('\x1b'),
        "{plain:?}"
    );
    let (code, piped, err) = svc(
        &["--server", &s.url(""), "get", "hosts"],
        &[("SVC_TOKEN", t)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        piped.contains("DOWN") && !piped.contains('\x1b'),
        "{piped:?}"
    );
}
