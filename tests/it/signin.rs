//! Browser sign-in, the setup gate, default administrator seeding, users and sessions.

use crate::support::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn first_run_setup_gate() {
    let s = Server::start_with(no_seed());
    let page = s.get("/setup").await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<form"));
    let short = post_form(
        &s,
        "/setup",
        &[
            ("name", "Ada"),
            ("email", "ada@example.org"),
            ("password", "short"),
            ("confirmation", "short"),
        ],
    )
    .await;
    assert_eq!(short.status(), 422);
    let mismatch = post_form(
        &s,
        "/setup",
        &[
            ("name", "Ada"),
            ("email", "ada@example.org"),
            ("password", "long enough pw 1"),
            ("confirmation", "long enough pw 2"),
        ],
    )
    .await;
    assert_eq!(mismatch.status(), 422);

    // Racing submissions: exactly one wins. One that the server was handling while another
    // was is 409; one that reached it only after the winner was done is sent to sign in (the
    // client cannot make them overlap at the server; `racing_setups_make_one_admin_and_one_
    // conflict` shows the 409 without timing).
    let good = [
        ("name", "Ada"),
        ("email", "ada@example.org"),
        ("password", "a good long password"),
        ("confirmation", "a good long password"),
    ];
    let answers =
        futures_util::future::join_all((0..4).map(|_| post_form(&s, "/setup", &good))).await;
    let location = |r: &reqwest::Response| {
        r.headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (mut winners, mut others) = (Vec::new(), Vec::new());
    for r in answers {
        if r.status() == 302 && location(&r) == "/" {
            winners.push(r);
        } else {
            others.push((r.status().as_u16(), location(&r)));
        }
    }
    assert_eq!(winners.len(), 1, "exactly one setup wins: {others:?}");
    for other in &others {
        assert!(
            *other == (409, String::new()) || *other == (302, "/login".to_string()),
            "a loser is 409 or sent to sign in: {other:?}"
        );
    }
    let winner = winners.remove(0);
    let (session, header) = session_of(&winner);
    assert_eq!(session.len(), 64);
    for attr in ["Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=43200"] {
        assert!(header.contains(attr), "{header}");
    }
    assert!(!header.contains("Secure"), "plain HTTP: no Secure");
    let me = json(whoami_cookie(&s, &session).await, 200).await;
    assert_eq!(me["actorType"], "user");
    assert_eq!(me["name"], "Ada");
    assert_eq!(me["permissions"], json!(["*:*"]));

    let closed = s.get("/setup").await;
    assert_eq!(closed.status(), 302);
    assert_eq!(closed.headers()["location"], "/login");
    let again = post_form(&s, "/setup", &good).await;
    assert_eq!(
        again.status(),
        302,
        "a POST after setup completed goes to sign-in"
    );
    assert_eq!(again.headers()["location"], "/login");
}

#[tokio::test]
async fn default_admin_seeding() {
    // Unset password: a generated one, logged once at WARN.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = Server::start_in(&data, Opts::default());
    let log = s.log();
    let line = log
        .lines()
        .find(|l| l.contains("generated password"))
        .expect("seeding logged");
    assert!(line.contains("WARN"));
    let password = line
        .split("password=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .trim_matches('"')
        .to_string();
    assert_eq!(password.len(), 32);
    let res = login(&s, "admin@localhost", &password, false).await;
    assert_eq!(res.status(), 302);
    assert_eq!(
        s.get("/setup").await.status(),
        302,
        "a local user closes the gate"
    );
    assert!(s.stop().success());
    let s = Server::start_in(&data, Opts::default());
    assert_eq!(
        s.log().matches("generated password").count(),
        1,
        "seeded only once"
    );
    drop(s);

    // Given values are used.
    let env = |pairs: &[(&str, &str)]| Opts {
        env: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    let s = Server::start_with(env(&[
        ("SVC_DEFAULT_ADMIN_EMAIL", "ops@plant.example"),
        ("SVC_DEFAULT_ADMIN_PASSWORD", "a very fine password"),
        ("SVC_DEFAULT_ADMIN_NAME", "Ops"),
    ]));
    let res = login(&s, "ops@plant.example", "a very fine password", false).await;
    assert_eq!(res.status(), 302);
    let me = json(whoami_cookie(&s, &session_of(&res).0).await, 200).await;
    assert_eq!(me["name"], "Ops");
    assert!(!s.log().contains("generated password"));

    // Set but empty: no seeding, the gate stays open.
    let s = Server::start_with(env(&[("SVC_DEFAULT_ADMIN_PASSWORD", "")]));
    assert_eq!(s.get("/setup").await.status(), 200);
}

#[tokio::test]
async fn login_sessions_and_logout() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let opts = Opts {
        env: vec![(
            "SVC_DEFAULT_ADMIN_PASSWORD".into(),
            "the admin password".into(),
        )],
        ..Default::default()
    };
    let s = Server::start_in(&data, opts.clone());
    let page = s.get("/login").await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("name=\"password\""));

    let wrong = login(&s, "admin@localhost", "not the password", false).await;
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let unknown = login(&s, "nobody@localhost", "not the password", false).await;
    assert_eq!(unknown.status(), 401);
    let unknown_body = unknown
        .text()
        .await
        .unwrap()
        .replace("nobody@localhost", "admin@localhost");
    assert_eq!(
        wrong.text().await.unwrap(),
        unknown_body,
        "unknown and wrong look the same"
    );

    let res = login(&s, "ADMIN@localhost", "the admin password", true).await;
    assert_eq!(res.status(), 302, "e-mail matching ignores case");
    let (session, header) = session_of(&res);
    assert!(
        header.contains("Max-Age=2592000"),
        "remember-me: 30 days: {header}"
    );
    assert_eq!(whoami_cookie(&s, &session).await.status(), 200);
    let home = s
        .http
        .get(s.url("/"))
        .header("Cookie", format!("svc_session={session}"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), 200);
    assert!(home.text().await.unwrap().contains("Administrator"));

    // Sessions live in the store and survive a restart.
    assert!(s.stop().success());
    let s = Server::start_in(&data, opts);
    assert_eq!(whoami_cookie(&s, &session).await.status(), 200);

    let out = s
        .http
        .get(s.url("/auth/logout"))
        .header("Cookie", format!("svc_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 302);
    assert_eq!(out.headers()["location"], "/login");
    let cleared = out.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("svc_session=;") && cleared.contains("Max-Age=-1"),
        "{cleared}"
    );
    assert_problem(whoami_cookie(&s, &session).await, 401, "svc:auth/invalid").await;
}

#[tokio::test]
async fn anonymous_pages_redirect_but_the_api_never_does() {
    let s = Server::start();
    let res = s
        .http
        .get(s.url("/"))
        .header("Accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/login");
    let res = s
        .http
        .get(s.url("/api/v1/whoami"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_problem(res, 401, "svc:auth/required").await;
    // A stale cookie on a page: back to the sign-in form.
    let res = s
        .http
        .get(s.url("/"))
        .header("Accept", "text/html")
        .header("Cookie", "svc_session=stale")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    let res = s.get("/auth/oidc").await;
    assert_eq!(res.status(), 501);
    assert_eq!(res.text().await.unwrap(), "SSO not configured");
}

#[tokio::test]
async fn sign_in_is_throttled_per_client() {
    let opts = Opts {
        env: vec![(
            "SVC_DEFAULT_ADMIN_PASSWORD".into(),
            "the admin password".into(),
        )],
        ..Default::default()
    };
    let s = Server::start_with(opts);
    for _ in 0..8 {
        assert_eq!(
            login(&s, "admin@localhost", "wrong wrong wrong", false)
                .await
                .status(),
            401
        );
    }
    let res = login(&s, "admin@localhost", "the admin password", false).await;
    assert_eq!(res.status(), 429, "even the right password waits");
    assert_eq!(res.headers()["retry-after"], "30");
    assert!(res.text().await.unwrap().contains("Too many"));
}

#[tokio::test]
async fn users_api_and_its_guards() {
    let a = Admin::start();
    let s = &a.s;
    let post = |body: serde_json::Value| {
        call(s, &a.token, Method::POST, "/api/v1/users")
            .json(&body)
            .send()
    };
    let u = json(
        post(json!({"email": "Bob@Example.org", "name": "Bob", "password": "bobs long password"}))
            .await
            .unwrap(),
        201,
    )
    .await;
    assert_eq!(u["roles"], json!(["viewer"]));
    assert_eq!(u["local"], true);
    assert!(!u.to_string().contains("password"), "no hash: {u}");
    let id = u["id"].as_str().unwrap().to_string();
    assert_problem(
        post(json!({"email": "bob@example.org", "name": "Other"}))
            .await
            .unwrap(),
        409,
        "svc:users/email-in-use",
    )
    .await;
    assert_problem(
        post(json!({"email": "c@example.org", "name": "C", "password": "elevenchars"}))
            .await
            .unwrap(),
        422,
        "svc:validation/password",
    )
    .await;
    assert_problem(
        post(json!({"email": "not-an-address", "name": "C"}))
            .await
            .unwrap(),
        422,
        "svc:validation/user",
    )
    .await;
    assert_problem(
        post(json!({"email": "c@example.org", "name": "C", "roles": ["overlord"]}))
            .await
            .unwrap(),
        422,
        "svc:validation/user",
    )
    .await;

    let got = json(
        call(s, &a.token, Method::GET, &format!("/api/v1/users/{id}"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(got["email"], "Bob@Example.org");
    let upd = json(
        call(s, &a.token, Method::PUT, &format!("/api/v1/users/{id}"))
            .json(&json!({"name": "Robert", "roles": ["operator"]}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(upd["name"], "Robert");
    assert_eq!(upd["version"], 2);

    // Bob signs in; disabling him ends his session at his next request.
    let res = login(s, "bob@example.org", "bobs long password", false).await;
    let (bob, _) = session_of(&res);
    let me = json(whoami_cookie(s, &bob).await, 200).await;
    assert!(
        me["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("alerts:ack"))
    );
    json(
        call(s, &a.token, Method::PUT, &format!("/api/v1/users/{id}"))
            .json(&json!({"disabled": true}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let doc = assert_problem(whoami_cookie(s, &bob).await, 401, "svc:auth/invalid").await;
    assert!(doc["detail"].as_str().unwrap().contains("disabled"));
    assert_eq!(
        login(s, "bob@example.org", "bobs long password", false)
            .await
            .status(),
        401
    );
    json(
        call(s, &a.token, Method::PUT, &format!("/api/v1/users/{id}"))
            .json(&json!({"disabled": false}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;

    // Admin reset, then Bob changes his own password; his session stays valid.
    let res = call(
        s,
        &a.token,
        Method::POST,
        &format!("/api/v1/users/{id}:set-password"),
    )
    .json(&json!({"password": "reset by the admin"}))
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 204);
    assert_problem(
        call(
            s,
            &a.token,
            Method::POST,
            &format!("/api/v1/users/{id}:set-password"),
        )
        .json(&json!({"password": "short"}))
        .send()
        .await
        .unwrap(),
        422,
        "svc:validation/password",
    )
    .await;
    let res = login(s, "bob@example.org", "reset by the admin", false).await;
    assert_eq!(res.status(), 302);
    let (bob, _) = session_of(&res);
    let change = |old: &str, new: &str| {
        s.http
            .post(s.url("/api/v1/users/me:change-password"))
            .header("Cookie", format!("svc_session={bob}"))
            .json(&json!({"oldPassword": old, "newPassword": new}))
            .send()
    };
    assert_problem(
        change("wrong old password", "a brand new password")
            .await
            .unwrap(),
        403,
        "svc:auth/bad-password",
    )
    .await;
    assert_problem(
        change("reset by the admin", "short").await.unwrap(),
        422,
        "svc:validation/password",
    )
    .await;
    assert_eq!(
        change("reset by the admin", "a brand new password")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        whoami_cookie(s, &bob).await.status(),
        200,
        "password change keeps sessions"
    );
    assert_eq!(
        login(s, "bob@example.org", "a brand new password", false)
            .await
            .status(),
        302
    );
    // Tokens cannot change a password.
    let res = call(
        s,
        &a.token,
        Method::POST,
        "/api/v1/users/me:change-password",
    )
    .json(&json!({"oldPassword": "x", "newPassword": "y"}))
    .send()
    .await
    .unwrap();
    assert_problem(res, 401, "svc:auth/required").await;
    assert_problem(
        s.http
            .post(s.url("/api/v1/users/me:change-password"))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/required",
    )
    .await;

    // The seeded administrator is the only one: it cannot be demoted, disabled or deleted.
    let users = json(
        call(s, &a.token, Method::GET, "/api/v1/users")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let admin = users["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == "admin@localhost")
        .unwrap();
    let aid = admin["id"].as_str().unwrap();
    for body in [json!({"roles": ["viewer"]}), json!({"disabled": true})] {
        let res = call(s, &a.token, Method::PUT, &format!("/api/v1/users/{aid}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(res, 409, "svc:users/last-admin").await;
    }
    assert_problem(
        call(s, &a.token, Method::DELETE, &format!("/api/v1/users/{aid}"))
            .send()
            .await
            .unwrap(),
        409,
        "svc:users/last-admin",
    )
    .await;
    // With a second administrator it can.
    json(
        call(s, &a.token, Method::PUT, &format!("/api/v1/users/{id}"))
            .json(&json!({"roles": ["admin"]}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(
        call(s, &a.token, Method::DELETE, &format!("/api/v1/users/{aid}"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_problem(
        call(s, &a.token, Method::GET, &format!("/api/v1/users/{aid}"))
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;

    let actions: Vec<String> = json(
        call(s, &a.token, Method::GET, "/api/v1/audit?limit=100")
            .send()
            .await
            .unwrap(),
        200,
    )
    .await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect();
    for want in [
        "user.seed",
        "user.create",
        "user.update",
        "login.local",
        "user.set-password",
        "user.change-password",
        "user.delete",
    ] {
        assert!(
            actions.iter().any(|a| a == want),
            "{want} not audited: {actions:?}"
        );
    }
}

#[tokio::test]
async fn users_are_tenant_isolated() {
    let a = Admin::start();
    let s = &a.s;
    let u = json(
        call(s, &a.token, Method::POST, "/api/v1/users")
            .json(&json!({"email": "iso@example.org", "name": "Iso"}))
            .send()
            .await
            .unwrap(),
        201,
    )
    .await;
    let id = u["id"].as_str().unwrap();
    let (_, other) = second_tenant(s, &a.token, "isolated").await;
    assert_isolated(
        s,
        &other,
        &[
            (Method::GET, format!("/api/v1/users/{id}")),
            (Method::PUT, format!("/api/v1/users/{id}")),
            (Method::DELETE, format!("/api/v1/users/{id}")),
            (Method::POST, format!("/api/v1/users/{id}:set-password")),
        ],
        &["/api/v1/users"],
        id,
    )
    .await;
}

#[tokio::test]
async fn self_registration() {
    let off = Server::start();
    assert_eq!(off.get("/register").await.status(), 404);
    let opts = Opts {
        env: vec![("SERVICE_ALLOW_SIGNUP".into(), "true".into())],
        ..Default::default()
    };
    let s = Server::start_with(opts);
    assert_eq!(s.get("/register").await.status(), 200);
    let f = [
        ("name", "Vic"),
        ("email", "vic@example.org"),
        ("password", "vics long password"),
        ("confirmation", "vics long password"),
    ];
    let res = post_form(&s, "/register", &f).await;
    assert_eq!(res.status(), 302);
    let me = json(whoami_cookie(&s, &session_of(&res).0).await, 200).await;
    assert!(
        !me["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().starts_with("admin"))
    );
    assert_eq!(
        post_form(&s, "/register", &f).await.status(),
        409,
        "e-mail in use"
    );

    let gate_open = Server::start_with(Opts {
        env: vec![
            ("SERVICE_ALLOW_SIGNUP".into(), "true".into()),
            ("SVC_DEFAULT_ADMIN_DISABLED".into(), "1".into()),
        ],
        ..Default::default()
    });
    let res = gate_open.get("/register").await;
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/setup");
}

#[tokio::test]
async fn cookies_are_secure_over_tls_and_behind_a_trusted_proxy() {
    let opts = Opts {
        tls: true,
        env: vec![(
            "SVC_DEFAULT_ADMIN_PASSWORD".into(),
            "the admin password".into(),
        )],
        ..Default::default()
    };
    let s = Server::start_with(opts);
    let res = login(&s, "admin@localhost", "the admin password", false).await;
    assert!(session_of(&res).1.contains("Secure"));

    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_with(Opts {
        args: config_args(dir.path(), "trustProxy: true\n"),
        env: vec![(
            "SVC_DEFAULT_ADMIN_PASSWORD".into(),
            "the admin password".into(),
        )],
        ..Default::default()
    });
    let body = "email=admin%40localhost&password=the+admin+password";
    let res = s
        .http
        .post(s.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("X-Forwarded-Proto", "https")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    assert!(session_of(&res).1.contains("Secure"));
    let plain = login(&s, "admin@localhost", "the admin password", false).await;
    assert!(!session_of(&plain).1.contains("Secure"));
}

/// A request carrying only the given `svc_session` cookie.
async fn with_cookie(s: &Server, method: Method, path: &str, session: &str) -> reqwest::Response {
    s.http
        .request(method, s.url(path))
        .header("Cookie", format!("svc_session={session}"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap()
}

fn clears_session(res: &reqwest::Response) -> bool {
    res.headers().get_all("set-cookie").iter().any(|v| {
        let v = v.to_str().unwrap();
        v.starts_with("svc_session=;") && v.contains("Max-Age=-1")
    })
}

#[tokio::test]
async fn a_stale_session_cookie_locks_nobody_out() {
    let s = Server::start_with(Opts {
        env: vec![
            (
                "SVC_DEFAULT_ADMIN_PASSWORD".into(),
                "the admin password".into(),
            ),
            ("SERVICE_ALLOW_SIGNUP".into(), "true".into()),
        ],
        ..Default::default()
    });
    // A session that was valid once, then ended; and one that never was.
    let (ended, _) = session_of(&login(&s, "admin@localhost", "the admin password", false).await);
    assert_eq!(
        with_cookie(&s, Method::GET, "/auth/logout", &ended)
            .await
            .status(),
        302
    );
    for stale in [ended.as_str(), "not-a-session"] {
        let page = with_cookie(&s, Method::GET, "/login", stale).await;
        assert_eq!(page.status(), 200, "/login serves the form");
        assert!(clears_session(&page), "and clears the cookie");
        assert!(page.text().await.unwrap().contains("name=\"password\""));

        for (path, status, location) in [
            ("/setup", 302, Some("/login")),
            ("/register", 200, None),
            ("/auth/logout", 302, Some("/login")),
            ("/", 302, Some("/login")),
        ] {
            let res = with_cookie(&s, Method::GET, path, stale).await;
            assert_eq!(res.status(), status, "{path}");
            assert_eq!(
                res.headers().get("location").map(|l| l.to_str().unwrap()),
                location,
                "{path}"
            );
            assert!(clears_session(&res), "{path} clears the stale cookie");
        }

        let res = s
            .http
            .post(s.url("/login"))
            .header("Cookie", format!("svc_session={stale}"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("email=admin%40localhost&password=the+admin+password")
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            302,
            "the right password signs in despite the stale cookie"
        );
        assert_eq!(res.headers()["location"], "/");
        assert!(!clears_session(&res));
        let (fresh, _) = session_of(&res);
        json(whoami_cookie(&s, &fresh).await, 200).await;

        // The API still refuses the stale credential.
        assert_problem(whoami_cookie(&s, stale).await, 401, "svc:auth/invalid").await;
    }
}
