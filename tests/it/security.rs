//! The attacks of issue 33, each against the spawned server: refused (or without effect), with
//! the data left as it was. Who may act in which tenant, what runs, where secrets go, what a
//! link does, whose events an ingest URL takes, what outbound requests follow, what one event
//! costs, what readers and sites may make the box hold, and what lands in a spreadsheet, a
//! calendar or a terminal.

use crate::receiver::Receiver;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn executable(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A server whose `checks.pluginDirs` is `plugins` (and `notify.scriptDir` `scripts`, if any).
fn with_program_dirs(dir: &Path, plugins: &Path, scripts: Option<&Path>) -> Admin {
    let scripts = scripts
        .map(|d| format!("notify: {{scriptDir: {}}}\n", d.display()))
        .unwrap_or_default();
    Admin::start_with(Opts {
        args: config_args(
            dir,
            &format!("checks: {{pluginDirs: [{}]}}\n{scripts}", plugins.display()),
        ),
        ..no_seed()
    })
}

/// Polls the live state of service `name` until it has output.
async fn checked_output(s: &Server, token: &str, name: &str) -> String {
    let started = Instant::now();
    loop {
        let v = get(s, token, "/api/v1/services").await;
        let state = &v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()["state"];
        if let Some(out) = state["output"].as_str() {
            return out.to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{name} was never checked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A tenant's `admin` role governs its tenant only: no backup, no other tenant's tokens, no
/// tenants, whatever `X-Service-Tenant` says; the default tenant's admin keeps all of it, and
/// every backup download is audited.
#[tokio::test]
async fn tenant_admins_govern_only_their_tenant() {
    let a = Admin::start_with(no_seed());
    let (s, admin) = (&a.s, a.token.as_str());
    let default = default_tenant(s, admin).await;
    let b = json(
        send(
            s,
            admin,
            Method::POST,
            "/api/v1/tenants",
            json!({"name": "b", "slug": "b"}),
        )
        .await,
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (b_admin, _) = mint_in(s, admin, &b, json!({"name": "b-admin", "roles": ["admin"]})).await;
    let (b_viewer, _) = mint_in(
        s,
        admin,
        &b,
        json!({"name": "b-viewer", "roles": ["viewer"]}),
    )
    .await;
    let tokens_before = get(s, admin, "/api/v1/api-tokens").await;

    for tenant in [None, Some(default.as_str())] {
        let with = |req: reqwest::RequestBuilder| match tenant {
            Some(t) => req.header("X-Service-Tenant", t),
            None => req,
        };
        let backup = with(call(s, &b_admin, Method::GET, "/api/v1/system/backup"))
            .send()
            .await
            .unwrap();
        assert_problem(backup, 403, "svc:auth/forbidden").await;
        for (method, path) in [
            (Method::GET, "/api/v1/tenants"),
            (Method::POST, "/api/v1/tenants"),
        ] {
            let res = with(call(s, &b_admin, method, path))
                .json(&json!({"name": "c", "slug": "c"}))
                .send()
                .await
                .unwrap();
            assert_problem(res, 403, "svc:auth/forbidden").await;
        }
    }
    // Naming the default tenant is refused outright, not quietly ignored.
    for (method, body) in [
        (Method::GET, Value::Null),
        (Method::POST, json!({"name": "mine", "scopes": ["*:*"]})),
    ] {
        let res = call(s, &b_admin, method, "/api/v1/api-tokens")
            .header("X-Service-Tenant", &default)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(res, 403, "svc:auth/forbidden").await;
    }
    // The branding is every tenant's console: B's admin cannot rename or recolour it.
    let branding = send(
        s,
        &b_admin,
        Method::PUT,
        "/api/v1/branding",
        json!({"name": "Enter your password here"}),
    )
    .await;
    assert_problem(branding, 403, "svc:auth/forbidden").await;
    assert_eq!(get(s, admin, "/api/v1/branding").await, json!({}));
    let own = get(s, &b_admin, "/api/v1/api-tokens").await;
    assert!(
        !own.to_string().contains("bootstrap-admin"),
        "B's admin lists B's tokens only: {own}"
    );
    // A viewer's header asks for nothing: ignored (SPEC 5.3).
    let whoami = json(
        call(s, &b_viewer, Method::GET, "/api/v1/whoami")
            .header("X-Service-Tenant", &default)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(whoami["tenantId"], b);
    assert_eq!(
        get(s, admin, "/api/v1/api-tokens").await,
        tokens_before,
        "the default tenant's tokens are untouched"
    );
    assert_eq!(
        get(s, admin, "/api/v1/tenants").await["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // The default tenant's admin: every tenant, and backups, each one audited.
    let res = call(s, admin, Method::GET, "/api/v1/system/backup?events=false")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(!res.bytes().await.unwrap().is_empty());
    let audit = get(s, admin, "/api/v1/audit?action=system.backup").await;
    let entries = audit["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["resource"], "system/backup?events=false");
    let in_b = json(
        call(s, admin, Method::GET, "/api/v1/api-tokens")
            .header("X-Service-Tenant", &b)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(in_b.to_string().contains("b-admin"));
    let openapi = json(s.get("/api/openapi.json").await, 200).await;
    assert_eq!(
        openapi["paths"]["/api/v1/system/backup"]["get"]["x-instance-wide"],
        true
    );
}

/// Plugin check commands and script channels run only programs inside the configured
/// directories: anything else is refused at save naming the field and never stored; a program
/// swapped for a link out of its directory after saving is not run (the directories are the
/// operator's, so a swap racing a run is outside what this guards); a plugin sees a scrubbed
/// environment.
#[tokio::test]
async fn programs_run_only_from_the_configured_directories() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let outside = executable(dir.path(), "outside", "echo outside ran");
    std::os::unix::fs::symlink(&outside, plugins.join("escape")).unwrap();
    executable(
        &plugins,
        "check_env",
        "echo \"ENV OK - home=${HOME:-none} path=$PATH svc=${SVC_CONFIG:-none}\"",
    );
    let swapped = executable(&plugins, "check_swapped", "echo SWAPPED OK");
    let a = with_program_dirs(dir.path(), &plugins, None);
    let (s, token) = (&a.s, a.token.as_str());

    for (line, why) in [
        (json!(["/bin/cat", "/etc/passwd"]), "resolves outside"),
        (json!(["/bin/sh", "-c", "id"]), "resolves outside"),
        (json!(["escape"]), "resolves outside"),
        (json!(["../outside"]), "resolves outside"),
        (json!(["$ARG1$"]), "without macros"),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/check-commands",
            json!({"name": "evil", "type": "plugin", "line": line}),
        )
        .await;
        let doc = assert_problem(res, 422, "svc:validation/line").await;
        assert!(doc["detail"].as_str().unwrap().contains(why), "{doc}");
    }
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "evil", "type": "script", "config": {"command": "/bin/cat", "args": "/etc/passwd"}}),
    )
    .await;
    let doc = assert_problem(res, 422, "svc:validation/config").await;
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("notify.scriptDir names no directory"),
        "{doc}"
    );
    let bundle =
        "kind: check-commands\nname: evil\nbody: {type: plugin, line: [/bin/sh, -c, id]}\n";
    let res = apply_bundle(s, token, bundle).await;
    assert_problem(res, 422, "svc:validation/bundle").await;
    for kind in ["check-commands", "channels"] {
        let list = get(s, token, &format!("/api/v1/{kind}")).await;
        assert_eq!(list["items"], json!([]), "nothing stored: {list}");
    }

    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/check-commands",
                json!({"name": "env", "type": "plugin", "line": ["check_env"]}),
            ),
            (
                "/api/v1/check-commands",
                json!({"name": "swapped", "type": "plugin", "line": [swapped]}),
            ),
            ("/api/v1/hosts", json!({"name": "rtu", "spec": {}})),
        ],
    )
    .await;
    // Once saved, the program is replaced by a link out of the directory.
    std::fs::remove_file(plugins.join("check_swapped")).unwrap();
    std::os::unix::fs::symlink(&outside, plugins.join("check_swapped")).unwrap();
    let mut ids = Vec::new();
    for name in ["env", "swapped"] {
        let svc = json(
            send(
                s,
                token,
                Method::POST,
                "/api/v1/services",
                json!({"name": name, "host": "rtu", "spec": {"checkCommand": name, "interval": 3600, "maxCheckAttempts": 1}}),
            )
            .await,
            201,
        )
        .await;
        ids.push(svc["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert_eq!(check_now(s, token, id).await.status(), 202);
    }
    let env = checked_output(s, token, "env").await;
    assert_eq!(
        env, "ENV OK - home=none path=/usr/local/bin:/usr/bin:/bin svc=none",
        "the environment is scrubbed"
    );
    let out = checked_output(s, token, "swapped").await;
    assert!(
        out.starts_with("UNKNOWN - not run:") && out.contains("resolves outside"),
        "{out}"
    );
}

/// Issue 67, 1: a plugin, whatever its arguments, runs no program outside the configured
/// directories and reads nothing of the data directory. Wrappers that exist to run their
/// arguments (`negate`, `urlize`, `check_by_ssh -o`) are refused at save; a plugin that runs
/// its arguments anyway (a shell script doing `exec "$@"`) is stopped where the child is made.
#[tokio::test]
async fn plugins_are_confined_whatever_their_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    executable(&plugins, "negate", "exec \"$@\"");
    executable(&plugins, "check_run", "exec \"$@\"");
    executable(
        &plugins,
        "check_probe",
        "read -r key < \"$1\" && echo \"PROBE OK - read $key\" || echo 'PROBE OK - no read'",
    );
    let a = with_program_dirs(dir.path(), &plugins, None);
    let (s, token) = (&a.s, a.token.as_str());
    let info = get(s, token, "/api/v1/system/info").await;
    if info["programs"]["confined"] != true {
        eprintln!("SKIPPED plugins_are_confined_whatever_their_arguments: {info}");
        return;
    }
    assert!(
        info["programs"]["how"]
            .as_str()
            .unwrap()
            .contains("Landlock"),
        "{info}"
    );
    let key_file = s.data.join("master.key");
    let key = std::fs::read_to_string(&key_file).unwrap();
    let key_head: String = key.trim().chars().take(16).collect();
    let steal = format!("echo OK - $(head -c 16 {})", key_file.display());

    for (line, why) in [
        (
            json!(["negate", "/bin/sh", "-c", steal]),
            "negate runs the command line",
        ),
        (json!(["urlize", "http://x", "/bin/sh"]), "urlize runs"),
        (
            json!(["check_by_ssh", "-H", "h", "-o", "ProxyCommand=sh -c id"]),
            "check_by_ssh",
        ),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/check-commands",
            json!({"name": "evil", "type": "plugin", "line": line}),
        )
        .await;
        let doc = assert_problem(res, 422, "svc:validation/line").await;
        assert!(doc["detail"].as_str().unwrap().contains(why), "{doc}");
    }
    let key_arg = key_file.display().to_string();
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/check-commands",
                json!({"name": "shell", "type": "plugin", "line": ["check_run", "/bin/sh", "-c", steal]}),
            ),
            (
                "/api/v1/check-commands",
                json!({"name": "head", "type": "plugin", "line": ["check_run", "/usr/bin/head", "-c", "16", key_arg]}),
            ),
            (
                "/api/v1/check-commands",
                json!({"name": "probe", "type": "plugin", "line": ["check_probe", key_arg]}),
            ),
            // The option comes in through an argument macro: refused before running.
            (
                "/api/v1/check-commands",
                json!({"name": "ssh", "type": "plugin", "line": ["check_by_ssh", "-H", "h", "$ARG1$"]}),
            ),
            ("/api/v1/hosts", json!({"name": "rtu", "spec": {}})),
        ],
    )
    .await;
    let mut ids = Vec::new();
    for (name, args) in [
        ("shell", json!([])),
        ("head", json!([])),
        ("probe", json!([])),
        ("ssh", json!(["-oProxyCommand=/bin/sh -c id"])),
    ] {
        let svc = json(
            send(
                s,
                token,
                Method::POST,
                "/api/v1/services",
                json!({"name": name, "host": "rtu", "spec": {"checkCommand": name, "args": args, "interval": 3600, "maxCheckAttempts": 1}}),
            )
            .await,
            201,
        )
        .await;
        ids.push(svc["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert_eq!(check_now(s, token, id).await.status(), 202);
    }
    let (viewer, _) = mint(s, token, json!({"name": "viewer", "roles": ["viewer"]})).await;
    for name in ["shell", "head", "probe", "ssh"] {
        let out = checked_output(s, &viewer, name).await;
        assert!(!out.contains(&key_head), "{name} read the key: {out}");
        match name {
            "probe" => assert_eq!(out, "PROBE OK - no read"),
            "ssh" => assert!(out.starts_with("UNKNOWN - not run: check_by_ssh"), "{out}"),
            _ => {}
        }
    }
    // Every run a person asks for is audited.
    let actions = audit_actions(s, token, 100).await;
    let runs = actions.iter().filter(|a| *a == "object.check-now").count();
    assert_eq!(runs, 4, "{actions:?}");
}

/// Issue 67, 3: a document that names a secret, or an object whose check sends one, decides
/// where the value goes, so saving one needs `admin:secrets`; an editor's own plain-text
/// credential is still sealed for it, and an admin's document works as before.
#[tokio::test]
async fn only_secret_holders_choose_where_a_secret_goes() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let res = call(s, token, Method::PUT, "/api/v1/secrets/db")
        .json(&json!({"value": "TOPSECRET-1234"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let (editor, _) = mint(s, token, json!({"name": "ed", "roles": ["editor"]})).await;
    let (operator, _) = mint(s, token, json!({"name": "op", "roles": ["operator"]})).await;
    let forbidden = |res| async move {
        let doc = assert_problem(res, 403, "svc:auth/forbidden").await;
        assert_eq!(doc["detail"], "admin:secrets");
    };
    // A secret in an http check's URL path or in a webhook URL, the host the caller's own.
    forbidden(
        send(
            s,
            &editor,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "evil", "spec": {
            "address": "127.0.0.1", "checkCommand": "http",
            "args": ["url=http://127.0.0.1:9/$SECRET:db$"]}}),
        )
        .await,
    )
    .await;
    forbidden(
        send(
            s,
            &operator,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "evil", "spec": {
            "checkCommand": "http", "args": ["url=http://127.0.0.1:9/$SECRET:db$"]}}),
        )
        .await,
    )
    .await;
    forbidden(
        send(
            s,
            &editor,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "evil", "type": "webhook",
            "config": {"url": "http://127.0.0.1:9/hook/$SECRET:db$"}}),
        )
        .await,
    )
    .await;
    // An IMAP source logs in with its `secretRef` on the host its document names.
    forbidden(
        send(
            s,
            &editor,
            Method::POST,
            "/api/v1/event-sources",
            json!({"name": "mail", "type": "email",
            "secretRef": "db", "config": {"url": "imap://127.0.0.1:9", "username": "x"}}),
        )
        .await,
    )
    .await;
    let bundle = "kind: channels\nname: evil\nbody: {type: webhook, config: {url: 'http://127.0.0.1:9/$SECRET:db$'}}\n";
    forbidden(apply_bundle(s, &editor, bundle).await).await;
    // The admin's check command sends the secret to the host's address: re-pointing a host
    // that uses it is choosing where the secret goes too.
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/check-commands",
                json!({"name": "login", "type": "plugin", "line": ["check_http", "-H", "$address$", "-a", "u:$SECRET:db$"]}),
            ),
            ("/api/v1/hosts", json!({"name": "plc", "spec": {"address": "127.0.0.1", "checkCommand": "login"}})),
        ],
    )
    .await;
    let plc = get(s, token, "/api/v1/hosts").await["items"][0].clone();
    forbidden(
        call(
            s,
            &editor,
            Method::PUT,
            &format!("/api/v1/objects/{}", plc["id"].as_str().unwrap()),
        )
        .header("If-Match", format!("\"{}\"", plc["version"]))
        .json(&json!({"name": "plc", "spec": {"address": "evil.example", "checkCommand": "login"}}))
        .send()
        .await
        .unwrap(),
    )
    .await;
    for kind in ["channels", "event-sources"] {
        let list = get(s, token, &format!("/api/v1/{kind}")).await;
        assert_eq!(list["items"], json!([]), "nothing stored: {list}");
    }
    let hosts = get(s, token, "/api/v1/hosts").await;
    assert_eq!(hosts["items"].as_array().unwrap().len(), 1, "{hosts}");
    assert_eq!(hosts["items"][0]["spec"]["address"], "127.0.0.1");
    // The legitimate uses: an editor's own plain-text credential is sealed for it, and an
    // editor may save a host whose check sends no secret.
    let own = json(
        send(
            s,
            &editor,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "mine", "type": "webhook",
            "config": {"url": "http://127.0.0.1:9/hook", "header.Authorization": "Bearer mine"}}),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(
        own["config"]["header.Authorization"],
        "$SECRET:channel.mine.header.Authorization$"
    );
    json(
        send(
            s,
            &editor,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "plain", "spec": {"address": "127.0.0.1"}}),
        )
        .await,
        201,
    )
    .await;
    // Saving the same channel back as read (naming the sealed secret) without its value is
    // choosing where the stored value goes: refused without `admin:secrets`, fine for an admin.
    forbidden(
        call(s, &editor, Method::PUT, "/api/v1/channels/mine")
            .header("If-Match", "1")
            .json(&json!({"name": "mine", "type": "webhook", "config": {
                "url": "http://127.0.0.1:8/elsewhere",
                "header.Authorization": "$SECRET:channel.mine.header.Authorization$"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let res = call(s, token, Method::PUT, "/api/v1/channels/mine")
        .header("If-Match", "1")
        .json(&json!({"name": "mine", "type": "webhook", "config": {
            "url": "http://127.0.0.1:8/elsewhere",
            "header.Authorization": "$SECRET:channel.mine.header.Authorization$"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// Issue 67, 4 and 8: a request with a session cookie comes from this server's own origin:
/// fetch metadata saying `cross-site`, an `Origin` of another port or `null`, and a JSON route
/// sent a form or plain text are refused; UI forms carry their page's token; a request with
/// neither `Origin` nor fetch metadata keeps working, and tokens are not concerned. Signed-in
/// pages are kept by no cache, and an action's `back` with a control character goes home.
#[tokio::test]
async fn cookie_requests_come_only_from_this_origin() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/users",
        json!({"email": "eve@example.org", "name": "Eve", "roles": ["admin"], "password": "a long enough password"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let (session, _) =
        session_of(&login(s, "eve@example.org", "a long enough password", false).await);
    let cookie = format!("svc_session={session}");
    let other_port = {
        let (scheme_host, port) = s.base.rsplit_once(':').unwrap();
        format!("{scheme_host}:{}", port.parse::<u16>().unwrap() ^ 1)
    };
    let host = |name: &str| json!({"name": name, "spec": {}}).to_string();
    let post = |headers: Vec<(&'static str, String)>, body: String| {
        let mut req = s
            .http
            .post(s.url("/api/v1/hosts"))
            .header("Cookie", &cookie)
            .body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    let json_type = ("Content-Type", "application/json".to_string());
    for (headers, status, code) in [
        (
            vec![json_type.clone(), ("Sec-Fetch-Site", "cross-site".into())],
            403,
            "svc:auth/csrf",
        ),
        (
            vec![
                json_type.clone(),
                ("Sec-Fetch-Site", "same-site".into()),
                ("Origin", other_port.clone()),
            ],
            403,
            "svc:auth/csrf",
        ),
        (
            vec![json_type.clone(), ("Origin", "https://evil.example".into())],
            403,
            "svc:auth/csrf",
        ),
        (
            vec![json_type.clone(), ("Origin", "null".into())],
            403,
            "svc:auth/csrf",
        ),
        (
            vec![
                json_type.clone(),
                ("Origin", "null".into()),
                ("Sec-Fetch-Site", "cross-site".into()),
            ],
            403,
            "svc:auth/csrf",
        ),
        (
            vec![("Content-Type", "text/plain".into())],
            415,
            "svc:media-type",
        ),
        (
            vec![("Content-Type", "application/x-www-form-urlencoded".into())],
            415,
            "svc:media-type",
        ),
        (vec![], 415, "svc:media-type"),
    ] {
        assert_problem(
            post(headers.clone(), host("refused")).await.unwrap(),
            status,
            code,
        )
        .await;
    }
    let hosts = get(s, token, "/api/v1/hosts").await;
    assert_eq!(hosts["items"], json!([]), "nothing stored: {hosts}");
    let own = vec![
        json_type.clone(),
        ("Origin", s.base.clone()),
        ("Sec-Fetch-Site", "same-origin".into()),
    ];
    assert_eq!(post(own, host("from-the-ui")).await.unwrap().status(), 201);
    assert_eq!(
        post(vec![json_type.clone()], host("from-a-script"))
            .await
            .unwrap()
            .status(),
        201
    );
    // A token's request is not a browser's: its content type is its own business.
    let res = call(s, token, Method::POST, "/api/v1/hosts")
        .header("Content-Type", "text/plain")
        .body(host("by-token"))
        .send()
        .await
        .unwrap();
    assert!(
        ![403, 415].contains(&res.status().as_u16()),
        "{}",
        res.status()
    );

    // `/mcp` takes a browser's session only from this very origin, not another local port.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let mcp = |origin: String| {
        s.http
            .post(s.url("/mcp"))
            .header("Cookie", &cookie)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Origin", origin)
            .body(ping.clone())
            .send()
    };
    assert_eq!(
        mcp(other_port.replace("127.0.0.1", "localhost"))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(mcp(s.base.clone()).await.unwrap().status(), 200);

    // UI forms: the page's token, or 403; the page itself is kept by no cache.
    let page = s
        .http
        .get(s.url("/account"))
        .header("Cookie", &cookie)
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.headers()["cache-control"], "private, no-store");
    let page = page.text().await.unwrap();
    let marker = "name=\"csrf\" value=\"";
    let at = page.find(marker).expect("a form token") + marker.len();
    let form_token = &page[at..at + 64];
    let form = |body: String| {
        s.http
            .post(s.url("/account/preferences"))
            .header("Cookie", &cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    assert_eq!(form("theme=dark".into()).await.unwrap().status(), 403);
    // What a browser sends with a form posted from our page under our own
    // `Referrer-Policy: no-referrer`: `Origin: null`, and fetch metadata saying same-origin.
    let res = s
        .http
        .post(s.url("/account/preferences"))
        .header("Cookie", &cookie)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Origin", "null")
        .header("Sec-Fetch-Site", "same-origin")
        .body(format!("theme=dark&csrf={form_token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let forged = format!("theme=dark&csrf={}", "0".repeat(64));
    assert_eq!(form(forged).await.unwrap().status(), 403);
    let back = "/\t/evil.example";
    let res = form(format!(
        "theme=dark&back={}&csrf={form_token}",
        back.replace('\t', "%09")
    ))
    .await
    .unwrap();
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().unwrap();
    assert!(
        location.starts_with("/?") || location.starts_with("/account"),
        "{location}"
    );
    assert!(!location.contains("evil"), "{location}");
}

/// Issue 67, 5: an event source's name is all a sender of events needs, so `/metrics` names
/// sources only to a scraper holding `metricsToken`; with the token configured, nobody else
/// reads it at all.
#[tokio::test]
async fn metrics_name_sources_only_to_the_scraper() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), "metricsToken: scrape-4f9a2c\n"),
        ..no_seed()
    });
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/event-sources",
        json!({"name": "secret-door", "type": "webhook", "authMode": "none"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let res = s
        .http
        .post(s.url("/api/v1/ingest/secret-door"))
        .json(&json!({"title": "knock", "severity": "info"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    for bearer in [None, Some("wrong"), Some(token)] {
        let mut req = s.http.get(s.url("/metrics"));
        if let Some(b) = bearer {
            req = req.header("Authorization", format!("Bearer {b}"));
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401, "{bearer:?}");
    }
    let scraped = s
        .http
        .get(s.url("/metrics"))
        .header("Authorization", "Bearer scrape-4f9a2c")
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    let text = scraped.text().await.unwrap();
    assert!(
        text.contains("np_ingress_received{source=\"secret-door\"} 1"),
        "{text}"
    );
}

/// Issue 67, 6: a UDP listener is one tenant's: another tenant's source may not bind an
/// address that overlaps it (409, as a taken name is), and a port below 1024 needs the
/// instance's configuration to hand it out (`ingress.privilegedPorts`, SNMP's 162 by default).
#[tokio::test]
async fn listeners_belong_to_one_tenant_and_take_only_ports_handed_out() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let (_, other) = second_tenant(s, token, "udp-b").await;
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let source = |name: &str, listen: String| json!({"name": name, "type": "snmp", "authMode": "none", "config": {"listen": listen}});
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/event-sources",
        source("traps-a", format!("127.0.0.1:{port}")),
    )
    .await;
    assert_eq!(res.status(), 201);
    for listen in [format!("127.0.0.1:{port}"), format!("0.0.0.0:{port}")] {
        let res = send(
            s,
            &other,
            Method::POST,
            "/api/v1/event-sources",
            source("traps-b", listen),
        )
        .await;
        assert_problem(res, 409, "svc:conflict/duplicate").await;
    }
    let bundle = format!(
        "kind: event-sources\nname: traps-b\nbody: {{type: snmp, authMode: none, config: {{listen: '0.0.0.0:{port}'}}}}\n"
    );
    let res = apply_bundle(s, &other, &bundle).await;
    assert_problem(res, 409, "svc:conflict/duplicate").await;
    for listen in ["127.0.0.1:22", "0.0.0.0:53"] {
        let res = send(
            s,
            &other,
            Method::POST,
            "/api/v1/event-sources",
            source("traps-b", listen.into()),
        )
        .await;
        let doc = assert_problem(res, 422, "svc:validation/config").await;
        assert!(
            doc["detail"].as_str().unwrap().contains("below 1024"),
            "{doc}"
        );
    }
    let list = get(s, &other, "/api/v1/event-sources").await;
    assert_eq!(list["items"], json!([]), "nothing stored: {list}");
    // Another address, or another port, is the other tenant's to take; so is 162.
    let res = send(
        s,
        &other,
        Method::POST,
        "/api/v1/event-sources",
        source("traps-b", format!("127.0.0.2:{port}")),
    )
    .await;
    assert_eq!(res.status(), 201);
    let res = send(
        s,
        &other,
        Method::POST,
        "/api/v1/event-sources",
        source("traps-c", "127.0.0.3:162".into()),
    )
    .await;
    assert_eq!(res.status(), 201);
}

/// Issue 67, 9: the database keeps its master key's fingerprint; a process holding another
/// key (a second server on a shared PostgreSQL database with its own `master.key`) refuses to
/// start, naming the problem, instead of starting and opening no secret.
#[tokio::test]
async fn a_process_with_another_master_key_does_not_start() {
    let stopped = Server::start_with(no_seed()).stop_keeping_data();
    std::fs::write(stopped.data.join("master.key"), "ab".repeat(32)).unwrap();
    let Err(starting) = Server::spawn_in(&stopped.data, no_seed()).within(Duration::from_secs(30))
    else {
        panic!("a server started with another master key");
    };
    drop(starting);
    let log = std::fs::read_to_string(stopped.data.with_extension("log")).unwrap();
    assert!(
        log.contains("is not the one this database's secrets are sealed with"),
        "{log}"
    );
}

/// Issue 67, 8: e-mail addresses are unique across the instance (SPEC 5.9), so a tenant may
/// claim its domains: an address at a claimed domain is the claiming tenant's alone, and
/// another tenant's admin gets the same 422 whether or not the address exists, and cannot take
/// it first. Only the default tenant's admins set claims.
#[tokio::test]
async fn claimed_email_domains_are_their_tenants_alone() {
    let a = Admin::start_with(no_seed());
    let (s, admin) = (&a.s, a.token.as_str());
    let default = default_tenant(s, admin).await;
    let (b, b_admin) = second_tenant(s, admin, "plant-b").await;
    let user = |email: &str| json!({"email": email, "name": "Someone", "password": "correct horse battery"});
    let created = json(
        send(
            s,
            &b_admin,
            Method::POST,
            "/api/v1/users",
            user("op@plant.example"),
        )
        .await,
        201,
    )
    .await;

    // Claims: the default tenant's admin only; a domain another tenant holds addresses at is taken.
    let claim = |tenant: &str, domains: Value| {
        let path = format!("/api/v1/tenants/{tenant}");
        async move {
            send(
                s,
                admin,
                Method::PUT,
                &path,
                json!({"emailDomains": domains}),
            )
            .await
        }
    };
    let res = send(
        s,
        &b_admin,
        Method::PUT,
        &format!("/api/v1/tenants/{b}"),
        json!({"emailDomains": ["plant.example"]}),
    )
    .await;
    assert_problem(res, 403, "svc:auth/forbidden").await;
    assert_problem(
        claim(&default, json!(["plant.example"])).await,
        409,
        "svc:conflict/duplicate",
    )
    .await;
    assert_problem(
        claim(&default, json!(["corp\u{202E}.example"])).await,
        422,
        "svc:validation/emailDomains",
    )
    .await;
    assert_problem(
        claim("00000000-0000-0000-0000-00000000beef", json!(["x.example"])).await,
        404,
        "svc:not-found",
    )
    .await;
    let renamed = send(
        s,
        admin,
        Method::PUT,
        &format!("/api/v1/tenants/{b}"),
        json!({"name": "plant\u{202E}b"}),
    )
    .await;
    assert_problem(renamed, 422, "svc:validation/name").await;
    let claimed = json(claim(&default, json!(["Corp.Example"])).await, 200).await;
    assert_eq!(claimed["emailDomains"], json!(["corp.example"]));
    assert_eq!(claimed["version"], 2);
    assert_problem(
        claim(&b, json!(["corp.example"])).await,
        409,
        "svc:conflict/duplicate",
    )
    .await;
    let b_claim = json(claim(&b, json!(["plant.example"])).await, 200).await;
    assert_eq!(b_claim["emailDomains"], json!(["plant.example"]));

    // An address at the default tenant's domain: B's admin learns nothing and takes nothing.
    json(
        send(
            s,
            admin,
            Method::POST,
            "/api/v1/users",
            user("alice@corp.example"),
        )
        .await,
        201,
    )
    .await;
    let mut answers = Vec::new();
    for email in [
        "alice@corp.example",
        "nobody@corp.example",
        "carol@Corp.Example.",
    ] {
        let res = send(s, &b_admin, Method::POST, "/api/v1/users", user(email)).await;
        assert_eq!(res.status(), 422, "{email}");
        let doc: Value = res.json().await.unwrap();
        assert_eq!(doc["code"], "svc:validation/email");
        answers.push(doc["detail"].clone());
    }
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "the same answer either way: {answers:?}"
    );
    let moved = send(
        s,
        &b_admin,
        Method::PUT,
        &format!("/api/v1/users/{}", created["id"].as_str().unwrap()),
        json!({"email": "alice2@corp.example"}),
    )
    .await;
    assert_problem(moved, 422, "svc:validation/email").await;
    // A tenant that claims domains holds addresses at them only; at its own, as before.
    for (token, email) in [
        (admin, "carol@free.example"),
        (b_admin.as_str(), "x@free.example"),
    ] {
        let res = send(s, token, Method::POST, "/api/v1/users", user(email)).await;
        assert_problem(res, 422, "svc:validation/email").await;
    }
    json(
        send(
            s,
            &b_admin,
            Method::POST,
            "/api/v1/users",
            user("op2@plant.example"),
        )
        .await,
        201,
    )
    .await;
    let audit = get(s, admin, "/api/v1/audit?action=tenant.update").await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
}

/// Issue 67, 8: what the probe saved that it should not have is 422 at save, naming the field,
/// and nothing of it is stored.
#[tokio::test]
async fn malformed_documents_are_refused_at_save() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let in_an_hour = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string();
    let mut accepted = Vec::new();
    for (path, method, body, code) in [
        (
            "/api/v1/channels",
            Method::POST,
            json!({"name": "hook", "type": "webhook", "config": {}}),
            "svc:validation/config",
        ),
        (
            "/api/v1/channels",
            Method::POST,
            json!({"name": "hook", "type": "webhook", "config": {"url": "http://127.0.0.1:9/", "header.Host": "evil.example"}}),
            "svc:validation/config",
        ),
        (
            "/api/v1/channels",
            Method::POST,
            json!({"name": "hook", "type": "webhook", "config": {"url": "http://127.0.0.1:9/", "header.Authorization": "${secret:db}"}}),
            "svc:validation/config",
        ),
        (
            "/api/v1/channels",
            Method::POST,
            json!({"name": "hook", "type": "webhook", "config": {"url": "http://127.0.0.1:9/", "header.Authorization": "$SECRET:nope$"}}),
            "svc:validation/config",
        ),
        (
            "/api/v1/event-sources",
            Method::POST,
            json!({"name": "src", "type": "webhook", "authMode": "none", "rateLimit": 0}),
            "svc:validation/rateLimit",
        ),
        (
            "/api/v1/silences",
            Method::POST,
            json!({"comment": "all of it", "expiresAt": in_an_hour}),
            "svc:validation/selector",
        ),
        (
            "/api/v1/reports",
            Method::POST,
            json!({"name": "weekly", "type": "alert-stats", "email": ["ops@example.org\r\nBcc: x@evil.example"]}),
            "svc:validation/email",
        ),
        (
            "/api/v1/hosts",
            Method::POST,
            json!({"name": "plc\u{202E}gpj.exe", "spec": {}}),
            "svc:validation/name",
        ),
        (
            "/api/v1/hosts",
            Method::POST,
            json!({"name": "plc\u{200B}", "spec": {}}),
            "svc:validation/name",
        ),
        (
            "/api/v1/branding",
            Method::PUT,
            json!({"mode": "<script>"}),
            "svc:validation/branding",
        ),
        (
            "/api/v1/incidents",
            Method::POST,
            json!({"title": "pump station", "status": "bogus"}),
            "svc:validation/status",
        ),
        (
            "/api/v1/tenants",
            Method::POST,
            json!({"name": "plant\u{202E}gpj", "slug": "plant"}),
            "svc:validation/name",
        ),
    ] {
        let res = send(s, token, method.clone(), path, body.clone()).await;
        let status = res.status().as_u16();
        let doc: Value = res.json().await.unwrap_or_default();
        if status != 422 || doc["code"] != code {
            accepted.push(format!("{path} {body}: {status} {doc}"));
        }
    }
    assert!(accepted.is_empty(), "{accepted:#?}");
    // A bundle saves as the routes do.
    let bundle = "kind: channels\nname: hook\nbody: {type: webhook, config: {url: 'http://127.0.0.1:9/', token: '$SECRET:nope$'}}\n";
    let res = apply_bundle(s, token, bundle).await;
    assert_problem(res, 422, "svc:validation/config").await;
    for kind in [
        "channels",
        "event-sources",
        "silences",
        "reports",
        "hosts",
        "incidents",
    ] {
        let list = get(s, token, &format!("/api/v1/{kind}")).await;
        assert_eq!(list["items"], json!([]), "nothing stored: {list}");
    }
}

/// Secret values are write-only: a plain-text credential in a channel is stored as a secret
/// and only its reference comes back (GET, export, audit); a secret a check used is masked in
/// its output; no secret may stand in a URL's host; what a provider echoes is masked too.
#[tokio::test]
async fn secrets_stay_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    executable(
        &plugins,
        "check_login",
        "echo \"LOGIN CRITICAL - string $1 not found\"\nexit 2",
    );
    let a = with_program_dirs(dir.path(), &plugins, None);
    let (s, token) = (&a.s, a.token.as_str());
    let (viewer, _) = mint(s, token, json!({"name": "viewer", "roles": ["viewer"]})).await;
    let res = call(s, token, Method::PUT, "/api/v1/secrets/db")
        .json(&json!({"value": "TOPSECRET-1234"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);

    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/check-commands",
                json!({"name": "login", "type": "plugin", "line": ["check_login", "$SECRET:db$"]}),
            ),
            ("/api/v1/hosts", json!({"name": "plc", "spec": {}})),
        ],
    )
    .await;
    let svc = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/services",
            json!({"name": "login", "host": "plc", "spec": {"checkCommand": "login", "interval": 3600, "maxCheckAttempts": 1}}),
        )
        .await,
        201,
    )
    .await;
    let res = check_now(s, token, svc["id"].as_str().unwrap()).await;
    assert_eq!(res.status(), 202);
    let out = checked_output(s, &viewer, "login").await;
    assert_eq!(out, "LOGIN CRITICAL - string ******** not found");

    let hooks = Receiver::start().await;
    hooks.echo_headers("/hook");
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "hook", "type": "webhook", "config": {
            "url": hooks.url("/hook"),
            "secret": "hmac-key-plain",
            "header.Authorization": "Bearer tok-plain",
            "header.X-Env": "lab"
        }}),
    )
    .await;
    let created = json(res, 201).await;
    assert_eq!(created["config"]["secret"], "$SECRET:channel.hook.secret$");
    assert_eq!(
        created["config"]["header.Authorization"],
        "$SECRET:channel.hook.header.Authorization$"
    );
    assert_eq!(created["config"]["header.X-Env"], "lab");
    let seen = [
        get(s, &viewer, "/api/v1/channels/hook").await.to_string(),
        call(s, &viewer, Method::GET, "/api/v1/config/bundles:export")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        get(s, token, "/api/v1/audit?limit=100").await.to_string(),
        get(s, token, "/api/v1/events?limit=1000").await.to_string(),
    ];
    for text in &seen {
        for plain in ["hmac-key-plain", "tok-plain", "TOPSECRET"] {
            assert!(!text.contains(plain), "{plain} leaked: {text}");
        }
    }
    let names = get(s, token, "/api/v1/secrets").await.to_string();
    assert!(names.contains("channel.hook.secret"), "{names}");

    // The secrets still work where they are meant for; what the provider says back is masked.
    let tested = json(
        call(
            s,
            token,
            Method::POST,
            "/api/v1/channels/hook:test-notification",
        )
        .send()
        .await
        .unwrap(),
        200,
    )
    .await;
    let got = hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    assert_eq!(got[0].headers["authorization"], "Bearer tok-plain");
    let detail = tested["detail"].as_str().unwrap();
    assert!(!detail.contains("tok-plain"), "{detail}");
    assert!(
        detail.len() <= 200,
        "a test answers a short excerpt: {detail}"
    );

    for (config, field) in [
        (
            json!({"url": "https://$SECRET:db$/x"}),
            "svc:validation/config",
        ),
        (
            json!({"url": "http://127.0.0.1:99999/x"}),
            "svc:validation/config",
        ),
        (
            json!({"url": "ftp://example.org/x"}),
            "svc:validation/config",
        ),
        (
            json!({"url": "http://example.org/", "port": "99999"}),
            "svc:validation/config",
        ),
    ] {
        let res = send(
            s,
            token,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "bad", "type": "webhook", "config": config}),
        )
        .await;
        assert_problem(res, 422, field).await;
    }
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "bad", "type": "webhook", "config": {"url": "http://example.org/"}, "template": "{{.Title"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/template").await;
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/channels",
        json!({"name": "bad", "type": "email", "config": {"host": "relay", "port": "0"}}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/config").await;
    assert_eq!(
        get(s, token, "/api/v1/channels").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "none of the refused channels is stored"
    );
}

/// An ack link shows what it acknowledges and acts only on POST (a scanner's GET or HEAD does
/// nothing); it dies with its alert; a reader who may not acknowledge sees dead letters' links
/// masked.
#[tokio::test]
async fn ack_links_need_a_person() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let (viewer, _) = mint(s, token, json!({"name": "viewer", "roles": ["viewer"]})).await;
    let hooks = Receiver::start().await;
    hooks.answer("/gone", 404);
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}})),
            ("/api/v1/channels", json!({"name": "gone", "type": "webhook", "config": {"url": hooks.url("/gone")}})),
            ("/api/v1/contacts", json!({"name": "ada", "preferences": [{"channels": ["hook"], "profile": "default"}]})),
            ("/api/v1/contacts", json!({"name": "bob", "preferences": [{"channels": ["gone"], "profile": "default"}]})),
            ("/api/v1/escalation-policies", json!({"name": "page", "steps": [{"after": 0, "notify": {"contact": "ada"}}, {"after": 0, "notify": {"contact": "bob"}}]})),
        ],
    )
    .await;
    let alert = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Pump <b>4</b> tripped", "escalationPolicy": "page"}),
        )
        .await,
        201,
    )
    .await;
    let id = alert["id"].as_str().unwrap();
    let got = hooks.wait_for("/hook", 1, Duration::from_secs(10)).await;
    let url = got[0].json()["ackUrl"].as_str().unwrap().to_string();
    let link = s.url(&format!(
        "/api/v1/ack/{}",
        url.rsplit_once("/api/v1/ack/").unwrap().1
    ));

    for _ in 0..3 {
        assert_eq!(s.http.head(&link).send().await.unwrap().status(), 200);
        let page = s.http.get(&link).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let csp = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        let text = page.text().await.unwrap();
        assert!(text.contains("Pump &lt;b&gt;4&lt;/b&gt; tripped"), "{text}");
        assert!(text.contains("ada"), "{text}");
    }
    assert_eq!(
        get(s, token, &format!("/api/v1/alerts/{id}")).await["status"],
        "open",
        "GET and HEAD acknowledge nothing"
    );

    // Bob's channel refuses for good: a dead letter holding his link.
    let started = Instant::now();
    let letters = loop {
        let v = get(s, token, "/api/v1/notifications/dead-letters").await;
        if !v["items"].as_array().unwrap().is_empty() {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no dead letter"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let full = letters["items"][0]["payload"]["ackUrl"].as_str().unwrap();
    assert!(full.contains("/api/v1/ack/"), "{letters}");
    let masked = get(s, &viewer, "/api/v1/notifications/dead-letters").await;
    let shown = masked["items"][0]["payload"]["ackUrl"].as_str().unwrap();
    assert!(shown.ends_with("/***") && !shown.contains(id), "{shown}");

    let res = s.http.post(&link).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        get(s, token, &format!("/api/v1/alerts/{id}")).await["status"],
        "acked"
    );
    let res = send(
        s,
        token,
        Method::POST,
        &format!("/api/v1/alerts/{id}:resolve"),
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 200);
    for method in [Method::GET, Method::POST] {
        let res = s.http.request(method, &link).send().await.unwrap();
        assert_eq!(res.status(), 404, "the link died with its alert");
    }
}

/// Event-source names are the instance's: another tenant cannot take one, and a token-mode
/// source takes its own token only, never an API token of its tenant (nor another tenant's).
#[tokio::test]
async fn ingest_belongs_to_one_tenant() {
    let a = Admin::start_with(no_seed());
    let (s, admin) = (&a.s, a.token.as_str());
    let (b_id, b) = second_tenant(s, admin, "b").await;
    let (_, c) = second_tenant(s, admin, "c").await;
    let res = call(s, admin, Method::PUT, "/api/v1/secrets/grafana-token")
        .header("X-Service-Tenant", &b_id)
        .json(&json!({"value": "b-source-token"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    json(
        send(
            s,
            &b,
            Method::POST,
            "/api/v1/event-sources",
            json!({"name": "grafana", "type": "webhook", "authMode": "token", "secretRef": "grafana-token"}),
        )
        .await,
        201,
    )
    .await;
    let res = send(
        s,
        &c,
        Method::POST,
        "/api/v1/event-sources",
        json!({"name": "grafana", "type": "webhook", "authMode": "none"}),
    )
    .await;
    assert_problem(res, 409, "svc:conflict/duplicate").await;
    let (b_viewer, _) = mint(s, &b, json!({"name": "v", "scopes": ["objects:read"]})).await;
    let event = json!({"summary": "pump 4 tripped", "severity": "critical"});
    for token in [c.as_str(), b_viewer.as_str(), "wrong-token"] {
        let res = s
            .http
            .post(s.url("/api/v1/ingest/grafana"))
            .bearer_auth(token)
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_problem(res, 401, "svc:ingress/auth").await;
    }
    let stored = |t: String| async move {
        get(s, &t, "/api/v1/events?types=ingress").await["items"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(stored(b.clone()).await, 0);
    assert_eq!(stored(c.clone()).await, 0);
    let res = s
        .http
        .post(s.url("/api/v1/ingest/grafana"))
        .header("X-Svc-Token", "b-source-token")
        .json(&event)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    assert_eq!(stored(b).await, 1);
    assert_eq!(stored(c).await, 0, "never in another tenant");
    let res = s
        .http
        .post(s.url("/api/v1/ingest/grafana"))
        .header("X-Svc-Token", "b-source-token")
        .json(&json!({"summary": "x", "labels": (0..65).map(|i| (format!("l{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}))
        .send()
        .await
        .unwrap();
    let doc = assert_problem(res, 422, "svc:ingress/format").await;
    assert!(
        doc["detail"].as_str().unwrap().contains("65 labels"),
        "{doc}"
    );
}

/// A provider answering with a redirect is a failed attempt naming the status; the redirect's
/// target never hears from us (with or without the channel's headers); a reader cannot test a
/// channel.
#[tokio::test]
async fn outbound_http_follows_no_redirect() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let (viewer, _) = mint(s, token, json!({"name": "viewer", "roles": ["viewer"]})).await;
    let elsewhere = Receiver::start().await;
    let hooks = Receiver::start().await;
    hooks.answer("/hook", 302);
    hooks.reply("/hook", &[("location", &elsewhere.url("/stolen"))], b"");
    json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/channels",
            json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook"), "header.X-Api-Key": "k-123456"}}),
        )
        .await,
        201,
    )
    .await;
    let res = call(
        s,
        &viewer,
        Method::POST,
        "/api/v1/channels/hook:test-notification",
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let res = call(
        s,
        token,
        Method::POST,
        "/api/v1/channels/hook:test-notification",
    )
    .send()
    .await
    .unwrap();
    let doc = assert_problem(res, 502, "svc:notify/test-failed").await;
    assert!(
        doc["detail"].as_str().unwrap().contains("HTTP 302"),
        "{doc}"
    );
    assert_eq!(hooks.received("/hook").len(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        elsewhere.received("/stolen").is_empty(),
        "the redirect is not followed"
    );
}

/// One event cannot stall the engine: a rule that would loop for minutes over one event is
/// stopped at its budget and skipped (a `system` event and the metric say so), the other rules
/// and tenants go on; what rules may loop over is bounded at save and at ingress; SIGTERM ends
/// the process while that evaluation still runs; a second server cannot take the data
/// directory meanwhile.
#[tokio::test]
async fn no_event_stalls_the_engine() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/alert-rules",
        json!({"name": "cubic", "match": "event.labels.all(a, event.labels.all(b, event.labels.all(c, a != b)))", "severity": "critical"}),
    )
    .await;
    let doc = assert_problem(res, 422, "svc:validation/match").await;
    assert!(
        doc["detail"].as_str().unwrap().contains("comprehensions"),
        "{doc}"
    );
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/alert-rules",
        json!({"name": "late", "match": "event.type == 'ingress'", "severity": "warning", "pendingFor": "100000000h"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/alert-rule").await;
    create_all(
        s,
        token,
        vec![
            ("/api/v1/event-sources", json!({"name": "hooks", "type": "webhook", "authMode": "none"})),
            // Quadratic over the payload's list, four times over: minutes in a debug build.
            ("/api/v1/alert-rules", json!({"name": "heavy", "severity": "critical", "match":
                (0..4).map(|i| format!("event.payload.items.all(x, event.payload.items.all(y, x + y != '{i}'))")).collect::<Vec<_>>().join(" && ")})),
            ("/api/v1/alert-rules", json!({"name": "plain", "severity": "warning", "match": "event.type == 'ingress'", "dedupKey": "{{ .event.summary }}"})),
        ],
    )
    .await;
    let items: Vec<String> = (0..1000).map(|i| format!("item-{i}")).collect();
    let res = s
        .http
        .post(s.url("/api/v1/ingest/hooks"))
        .json(&json!({"summary": "heavy", "items": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let res = s
        .http
        .post(s.url("/api/v1/ingest/hooks"))
        .json(&json!({"summary": "light"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let started = Instant::now();
    let alerts = loop {
        let v = get(s, token, "/api/v1/alerts").await;
        if v["items"].as_array().unwrap().len() >= 2 {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the engine is stuck: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut rules: Vec<&str> = alerts["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ruleId"].as_str().unwrap())
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        ["plain", "plain"],
        "both events decided, the heavy rule skipped"
    );
    let system = get(s, token, "/api/v1/events?types=system").await;
    let notice = &system["items"][0]["payload"];
    assert_eq!(notice["rule"], "heavy", "{system}");
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("np_alert_rule_overruns_total 1"),
        "{metrics}"
    );
    assert_eq!(s.get("/readyz").await.status(), 200);

    // A second server on the same data directory is refused while this one lives.
    let (code, _, err) = svc(&["bootstrap", "--data-dir", s.data.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("locked by another process"), "{err}");

    // The heavy rule never ran: its bound on the event was past the budget (issue 67, 2).
    assert_eq!(notice["overCost"], true, "{system}");
    assert!(
        notice["summary"].as_str().unwrap().contains("was not run"),
        "{system}"
    );
    assert!(
        cel_threads(s.pid()) == 0,
        "no evaluation outlives its answer"
    );

    // The skip outlives a restart: the same event after it is not evaluated again.
    let stopping = Instant::now();
    let s = a.s.restart();
    assert!(stopping.elapsed() < Duration::from_secs(35));
    for summary in ["heavy again", "light again"] {
        let res = s
            .http
            .post(s.url("/api/v1/ingest/hooks"))
            .json(&json!({"summary": summary, "items": items}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 202);
    }
    let started = Instant::now();
    while get(&s, token, "/api/v1/alerts").await["items"]
        .as_array()
        .unwrap()
        .len()
        < 4
    {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the engine is stuck"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let system = get(&s, token, "/api/v1/events?types=system").await;
    let notices = system["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["rule"] == "heavy")
        .count();
    assert_eq!(notices, 1, "skipped since, not tried again: {system}");
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("np_alert_rule_overruns_total 0"),
        "{metrics}"
    );
}

/// The evaluation threads (`cel`) a server process has now.
fn cel_threads(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "cel")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The resident memory of a process, in KiB.
fn resident_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// Issue 67, 2: a viewer's rule test that would build strings without bound, or loop for
/// minutes, is refused before it runs (422, `svc:validation/rule`), its memory never taken and
/// no thread left running after the answer.
#[tokio::test]
async fn a_rule_test_is_bounded_before_it_runs() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let (viewer, _) = mint(s, token, json!({"name": "viewer", "roles": ["viewer"]})).await;
    let items: Vec<String> = (0..1000).map(|i| format!("{i:0>200}")).collect();
    let demo =
        json!([{"type": "ingress", "payload": {"items": items, "blob": "b".repeat(200_000)}}]);
    let idle = resident_kib(s.pid());
    for rule in [
        // Strings: a million of them, each 200 kB.
        "event.payload.items.map(i, event.payload.items.map(j, event.payload.blob + i + j)).size() > 0",
        // CPU: a million concatenations each compared with the blob.
        "event.payload.items.all(i, event.payload.items.all(j, i + j != event.payload.blob))",
    ] {
        let asked = Instant::now();
        let res = send(
            s,
            &viewer,
            Method::POST,
            "/api/v1/alert-rules:test",
            json!({"rule": {"name": "probe", "match": rule, "severity": "critical"}, "demoEvents": demo}),
        )
        .await;
        let doc = assert_problem(res, 422, "svc:validation/rule").await;
        assert!(
            doc["detail"].as_str().unwrap().contains("is not run"),
            "{doc}"
        );
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(cel_threads(s.pid()), 0, "no evaluation outlives its answer");
    }
    let grown = resident_kib(s.pid()).saturating_sub(idle);
    assert!(grown < 64 * 1024, "grew by {grown} KiB");
    // An ordinary rule on the same event still runs.
    let res = send(
        s,
        &viewer,
        Method::POST,
        "/api/v1/alert-rules:test",
        json!({"rule": {"name": "plain", "match": "event.payload.items.exists(i, i.endsWith('999'))", "severity": "critical"}, "demoEvents": demo}),
    )
    .await;
    let test = json(res, 200).await;
    assert_eq!(test["matched"], 1, "{test}");
}

/// Readers and sites cannot make the box hold unbounded work: bundle work waits its turn and is
/// refused with 503 past a wait; a site's events far from now land at their arrival's hour,
/// opening no month file of another year.
#[tokio::test]
async fn readers_and_sites_get_bounded_work() {
    let a = Admin::start_with(no_seed());
    let (s, admin) = (&a.s, a.token.as_str());
    let (viewer, _) = mint(s, admin, json!({"name": "viewer", "roles": ["viewer"]})).await;
    // Two plans whose bodies never finish hold both places.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(bytes::Bytes::from_static(b"kind: host\n"))
            .await
            .unwrap();
        let req = call(s, &viewer, Method::POST, "/api/v1/config/bundles:plan")
            .header("content-type", "application/yaml")
            .body(reqwest::Body::wrap(Trickle(rx)))
            .send();
        held.push((tx, tokio::spawn(req)));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waited = Instant::now();
    let res = call(s, &viewer, Method::POST, "/api/v1/config/bundles:plan")
        .header("content-type", "application/yaml")
        .body("kind: host\nname: x\nbody: {spec: {}}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["retry-after"], "5");
    assert_problem(res, 503, "svc:bundle/busy").await;
    assert!(waited.elapsed() >= Duration::from_secs(9));
    drop(held);

    // A site stamping its events in 1990 and 2300.
    create_all(s, admin, vec![("/api/v1/sites", json!({"name": "north"}))]).await;
    let (north, _) = mint(
        s,
        admin,
        json!({"name": "north-edge", "scopes": ["sites:connect"], "site": "north"}),
    )
    .await;
    let events: Vec<Value> = [631_152_000_000u64, 10_413_792_000_000]
        .iter()
        .enumerate()
        .map(|(n, ms)| {
            let hex = format!("{ms:012x}7{n:03x}8{n:015x}");
            let id = format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            );
            let ts = jiff::Timestamp::from_millisecond(*ms as i64)
                .unwrap()
                .to_string();
            json!({"id": id, "tenantId": "00000000-0000-0000-0000-000000000000", "ts": ts,
                "type": "alert_opened", "payload": {"title": "far off"}})
        })
        .collect();
    let receipt = json(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:events",
            json!({"events": events}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(receipt["stored"], 2);
    let listed = get(s, admin, "/api/v1/events?site=north").await;
    let now = jiff::Timestamp::now();
    for e in listed["items"].as_array().unwrap() {
        let ts: jiff::Timestamp = e["ts"].as_str().unwrap().parse().unwrap();
        assert!(
            (now.as_second() - ts.as_second()).abs() <= 3600,
            "stamped at the arrival's hour: {e}"
        );
        assert!(e["payload"]["originalTs"].is_string(), "{e}");
    }
    let again = json(
        send(
            s,
            &north,
            Method::POST,
            "/api/v1/sites/north:events",
            json!({"events": events}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(again["duplicates"], 2, "a resend is still recognised");
    let months: Vec<String> = walk(&s.data)
        .into_iter()
        .filter(|n| n.starts_with("events-"))
        .collect();
    assert!(
        months
            .iter()
            .all(|m| !m.contains("1990") && !m.contains("2300")),
        "{months:?}"
    );
}

/// A request body that sends what its channel gives and ends only when the channel closes.
struct Trickle(tokio::sync::mpsc::Receiver<bytes::Bytes>);

impl hyper::body::Body for Trickle {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// Every file name under `dir`.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

/// What the service writes cannot be turned against its readers: HTML pages forbid framing and
/// sniffing, a CSV cell is never a formula, a contact's name cannot add a calendar event, the
/// command-line client prints no terminal control sequence from the server.
#[tokio::test]
async fn outputs_cannot_be_turned_against_their_readers() {
    let a = Admin::start_with(no_seed());
    let (s, token) = (&a.s, a.token.as_str());
    let login = s.get("/login").await;
    let h = login.headers();
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(
        get_raw(s, token, "/api/v1/whoami").await["x-content-type-options"],
        "nosniff"
    );

    let formula = "=HYPERLINK(\"evil.example\",\"open\")";
    create_all(
        s,
        token,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": formula, "labels": {"site": "x"}, "spec": {}}),
            ),
            (
                "/api/v1/reports",
                json!({"name": "avail", "type": "availability", "params": {"selector": "site=x"}}),
            ),
            ("/api/v1/contacts", json!({"name": "ada"})),
        ],
    )
    .await;
    let csv = call(
        s,
        token,
        Method::POST,
        "/api/v1/reports/avail:render?format=csv",
    )
    .send()
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(csv.contains("\"'=HYPERLINK("), "{csv}");
    assert!(!csv.lines().any(|l| l.starts_with('=')), "{csv}");

    // A layer's name is free text, and the feed shows it.
    json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/schedules",
            json!({"name": "ops", "timeZone": "UTC", "layers": [{"name": "day\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nSUMMARY:forged", "unit": "weekly", "anchor": "2026-01-05T08:00:00Z", "participants": ["ada"]}]}),
        )
        .await,
        201,
    )
    .await;
    let ics = call(s, token, Method::GET, "/api/v1/schedules/ops/ics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let begins = ics.matches("\r\nBEGIN:VEVENT").count();
    let ends = ics.matches("\r\nEND:VEVENT").count();
    assert!(begins > 0 && begins == ends, "{ics}");
    assert!(
        ics.contains("DESCRIPTION:layer day\\nEND:VEVENT\\nBEGIN:VEVENT"),
        "{ics}"
    );
    assert!(!ics.contains("\r\nSUMMARY:forged"), "{ics}");
    assert!(!ics.replace("\r\n", "").contains('\r'), "no bare CR");

    json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": "Boiler \u{1b}[2J\u{1b}]0;owned\u{7} low"}),
        )
        .await,
        201,
    )
    .await;
    let (code, out, err) = svc(
        &["--server", &s.base, "get", "alerts"],
        &[("SVC_TOKEN", token), ("NO_COLOR", "1")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Boiler"), "{out}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
}

async fn get_raw(s: &Server, token: &str, path: &str) -> reqwest::header::HeaderMap {
    call(s, token, Method::GET, path)
        .send()
        .await
        .unwrap()
        .headers()
        .clone()
}
