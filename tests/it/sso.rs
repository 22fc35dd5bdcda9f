//! OpenID Connect sign-in against a real provider: node-oidc-provider (OpenID Certified, from
//! npm, `tests/peers/oidc`), driven through its own sign-in form as a browser would, with the
//! browser's cookies kept per host and port.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const SECRET: &str = "a-client-secret-for-the-sso-tests";

/// The provider, stopped when dropped.
struct Provider {
    _child: Peer,
    issuer: String,
    state: PathBuf,
}

impl Provider {
    /// Rewrites the accounts and the tamper mode (read again on every request).
    fn set(&self, accounts: &Value, tamper: Option<&str>) {
        let mut state: Value =
            serde_json::from_str(&std::fs::read_to_string(&self.state).unwrap()).unwrap();
        state["accounts"] = accounts.clone();
        state["tamper"] = json!(tamper);
        std::fs::write(&self.state, state.to_string()).unwrap();
    }
}

/// Starts the provider for a relying party at `svc_base`, or `None` (a skip; a failure in CI)
/// when its npm packages are not installed (`npm ci` in `tests/peers/oidc`, as `.ci/run` does).
fn provider(dir: &Path, svc_base: &str, accounts: Value) -> Option<Provider> {
    let peer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/oidc");
    if !peer.join("node_modules/oidc-provider").is_dir() {
        peer_missing("oidc-provider (npm ci in tests/peers/oidc)");
        return None;
    }
    let port = free_port();
    let state = dir.join("oidc-state.json");
    std::fs::write(
        &state,
        json!({
            "clients": [{
                "client_id": "svc",
                "client_secret": SECRET,
                "redirect_uris": [format!("{svc_base}/auth/callback")],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
            }],
            "accounts": accounts,
            "tamper": null,
        })
        .to_string(),
    )
    .unwrap();
    let child = Command::new("node")
        .arg(peer.join("provider.mjs"))
        .arg(port.to_string())
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        peer_missing("node");
        return None;
    };
    let mut provider = Provider {
        _child: Peer(child),
        issuer: format!("http://127.0.0.1:{port}"),
        state,
    };
    provider._child.wait_listening(port, "the OIDC provider");
    wait_discovery(port);
    Some(provider)
}

/// Waits until the provider on `port` serves its discovery document: listening is not yet
/// serving, and node compiles a route at its first request. Beside a whole CI run the sign-in's
/// start once answered 502, most likely its discovery past the relying party's 10-s timeout.
fn wait_discovery(port: u16) {
    let started = std::time::Instant::now();
    loop {
        let answer = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
            // A provider that accepts but never answers must not outlast the deadline.
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            let request = format!(
                "GET /.well-known/openid-configuration HTTP/1.1\r\n\
                 Host: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
            );
            c.write_all(request.as_bytes())?;
            let mut answer = String::new();
            c.read_to_string(&mut answer)?;
            Ok(answer)
        });
        if answer.is_ok_and(|a| a.starts_with("HTTP/1.1 200")) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the OIDC provider did not serve its discovery document within a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server whose `baseUrl` is its own address, signing in with `provider`'s client `svc`.
fn relying_party(dir: &Path, port: u16, issuer: &str, extra: &str) -> Opts {
    let yaml = format!(
        "baseUrl: http://127.0.0.1:{port}\noidc:\n  issuer: {issuer}\n  clientId: svc\n  clientSecret: {SECRET}\n  adminGroup: ops-admins\n{extra}"
    );
    Opts {
        listen: Some(format!("127.0.0.1:{port}")),
        args: config_args(dir, &yaml),
        ..Default::default()
    }
}

/// A browser: cookies per host and port, redirects followed by hand.
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<(String, String), String>,
}

fn origin_of(url: &str) -> String {
    let u = reqwest::Url::parse(url).unwrap();
    format!(
        "{}:{}",
        u.host_str().unwrap(),
        u.port_or_known_default().unwrap()
    )
}

impl Browser {
    fn new() -> Self {
        Browser {
            http: client(),
            cookies: BTreeMap::new(),
        }
    }

    fn cookie(&self, url: &str, name: &str) -> Option<String> {
        self.cookies
            .get(&(origin_of(url), name.to_string()))
            .cloned()
    }

    fn set_cookie(&mut self, url: &str, name: &str, value: &str) {
        self.cookies
            .insert((origin_of(url), name.to_string()), value.to_string());
    }

    async fn send(&mut self, req: reqwest::RequestBuilder, url: &str) -> reqwest::Response {
        let origin = origin_of(url);
        let jar: Vec<String> = self
            .cookies
            .iter()
            .filter(|((o, _), _)| *o == origin)
            .map(|((_, n), v)| format!("{n}={v}"))
            .collect();
        let req = if jar.is_empty() {
            req
        } else {
            req.header("Cookie", jar.join("; "))
        };
        let res = req.send().await.unwrap();
        for set in res.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, attrs) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            let key = (origin.clone(), name.trim().to_string());
            if attrs.to_ascii_lowercase().contains("max-age=0") || value.is_empty() {
                self.cookies.remove(&key);
            } else {
                self.cookies.insert(key, value.to_string());
            }
        }
        res
    }

    /// `GET /api/v1/whoami` on `svc` with this browser's cookies, expecting 200.
    async fn whoami(&mut self, svc: &Server) -> Value {
        let req = self.http.get(svc.url("/api/v1/whoami"));
        json(self.send(req, &svc.url("/")).await, 200).await
    }

    async fn get(&mut self, url: &str) -> reqwest::Response {
        let req = self.http.get(url).header("Accept", "text/html");
        self.send(req, url).await
    }

    /// Follows the sign-in from `/auth/oidc` through the provider's form (as `login`) up to
    /// the callback URL on svc, which it returns without opening.
    async fn sign_in_up_to_callback(&mut self, svc: &Server, login: &str) -> String {
        let start = self.get(&svc.url("/auth/oidc")).await;
        assert_eq!(start.status(), 302, "{}", start.text().await.unwrap());
        let mut url = location(&svc.url("/auth/oidc"), &start);
        for _ in 0..10 {
            if url.starts_with(&svc.url("/auth/callback")) {
                return url;
            }
            let res = self.get(&url).await;
            if res.status().is_redirection() {
                url = location(&url, &res);
                continue;
            }
            assert_eq!(res.status(), 200, "{url}: {}", res.text().await.unwrap());
            assert!(url.contains("/interaction/"), "{url}");
            let req = self
                .http
                .post(&url)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(
                    serde_urlencoded::to_string([
                        ("prompt", "login"),
                        ("login", login),
                        ("password", "any"),
                    ])
                    .unwrap(),
                );
            let res = self.send(req, &url).await;
            assert!(
                res.status().is_redirection(),
                "{}",
                res.text().await.unwrap()
            );
            url = location(&url, &res);
        }
        panic!("the sign-in did not come back to svc");
    }
}

fn location(from: &str, res: &reqwest::Response) -> String {
    let to = res.headers()["location"].to_str().unwrap();
    reqwest::Url::parse(from)
        .unwrap()
        .join(to)
        .unwrap()
        .to_string()
}

/// Signs `login` in through the provider; the callback's answer.
async fn sign_in(b: &mut Browser, svc: &Server, login: &str) -> reqwest::Response {
    let callback = b.sign_in_up_to_callback(svc, login).await;
    b.get(&callback).await
}

async fn user_by_email(s: &Server, token: &str, email: &str) -> Value {
    let users = get(s, token, "/api/v1/users").await;
    users["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == email)
        .cloned()
        .unwrap_or(Value::Null)
}

fn accounts(alice_groups: Value) -> Value {
    json!({
        "alice": {"email": "Alice@Example.org", "name": "Alice Admin", "groups": alice_groups},
        "carol": {"email": "carol@example.org", "name": "", "groups": []},
        "dave": {"email": "dave@example.org", "name": "Dave", "groups": ["noc"]},
        "mallory": {"email": "local@example.org", "name": "Mallory", "groups": ["ops-admins"]},
    })
}

#[tokio::test]
async fn oidc_sign_in_maps_groups_to_roles_again_at_each_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let Some(idp) = provider(dir.path(), &base, accounts(json!(["noc", "field"]))) else {
        return;
    };
    let a = Admin::start_with(relying_party(dir.path(), port, &idp.issuer, ""));
    let s = &a.s;
    // The README's role document, applied as it stands there.
    let readme = include_str!("../../README.md");
    let at = readme.find("kind: roles").unwrap();
    let role = &readme[at..at + readme[at..].find("```").unwrap()];
    let res = apply_bundle(s, &a.token, role).await;
    assert_eq!(res.status(), 200, "{role}: {}", res.text().await.unwrap());
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/roles",
        json!({"name": "field", "permissions": ["objects:read"], "idpGroups": ["field", "techs"]}),
    )
    .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());

    // The sign-in page offers the provider.
    let page = s.get("/login").await.text().await.unwrap();
    assert!(
        page.contains("href=\"/auth/oidc\"") && page.contains("Sign in with 127.0.0.1"),
        "{page}"
    );

    // The flow's cookies: scoped to /auth, HttpOnly, ten minutes, not Secure over plain HTTP.
    let mut b = Browser::new();
    let start = b.get(&s.url("/auth/oidc")).await;
    // The problem document names the cause when the provider could not be asked.
    if start.status() != 302 {
        panic!(
            "the sign-in's start answered {}: {}",
            start.status(),
            start.text().await.unwrap()
        );
    }
    let sent: Vec<String> = start
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    for name in ["svc_oidc_state", "svc_oidc_verifier"] {
        let c = sent
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {sent:?}"));
        assert!(
            c.contains("Path=/auth")
                && c.contains("HttpOnly")
                && c.contains("Max-Age=600")
                && !c.contains("Secure"),
            "{c}"
        );
    }
    let to = location(&s.url("/auth/oidc"), &start);
    let auth = reqwest::Url::parse(&to).unwrap();
    assert!(to.starts_with(&format!("{}/auth?", idp.issuer)), "{to}");
    let q: BTreeMap<String, String> = auth.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["client_id"], "svc");
    assert_eq!(q["redirect_uri"], format!("{base}/auth/callback"));
    assert_eq!(q["scope"], "openid profile email groups");
    assert!(!q["nonce"].is_empty() && q["nonce"] != q["code_challenge"]);

    // Alice's groups name two roles: she gets both, and is provisioned as an SSO account.
    let mut alice = Browser::new();
    let res = sign_in(&mut alice, s, "alice").await;
    assert_eq!(res.status(), 302, "{}", res.text().await.unwrap());
    assert_eq!(res.headers()["location"], "/");
    let set: Vec<&str> = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    let session = set.iter().find(|c| c.starts_with("svc_session=")).unwrap();
    assert!(
        session.contains("Max-Age=43200")
            && session.contains("HttpOnly")
            && session.contains("SameSite=Lax"),
        "{session}"
    );
    assert!(
        set.iter()
            .any(|c| c.starts_with("svc_oidc_state=;") && c.contains("Max-Age=0")),
        "{set:?}"
    );
    let me = alice.whoami(s).await;
    assert_eq!(me["name"], "Alice Admin");
    let user = user_by_email(s, &a.token, "alice@example.org").await;
    assert_eq!(user["roles"], json!(["field", "noc"]), "{user}");
    assert_eq!(user["local"], false);
    assert_eq!(user["subject"], format!("{}|alice", idp.issuer));
    assert_eq!(me["actorId"], user["id"]);

    // Her groups change at the provider: her roles follow at the next sign-in, not before.
    idp.set(&accounts(json!(["ops-admins"])), None);
    let old = me["permissions"].clone();
    let again = alice.whoami(s).await;
    assert_eq!(
        again["permissions"], old,
        "roles change at the next sign-in"
    );
    let mut alice2 = Browser::new();
    assert_eq!(sign_in(&mut alice2, s, "alice").await.status(), 302);
    let user = user_by_email(s, &a.token, "alice@example.org").await;
    assert_eq!(user["roles"], json!(["admin"]), "{user}");
    let me2 = alice2.whoami(s).await;
    assert_eq!(me2["permissions"], json!(["*:*"]));
    let users = get(s, &a.token, "/api/v1/users").await;
    assert_eq!(
        users["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["email"] == "alice@example.org")
            .count(),
        1,
        "one account per subject"
    );

    // An SSO account has no password here to set.
    let alice_id = user["id"].as_str().unwrap();
    let res = send(
        s,
        &a.token,
        Method::POST,
        &format!("/api/v1/users/{alice_id}:set-password"),
        json!({"password": "a-long-enough-password"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/password").await;

    // No matching group: viewer; no name: the e-mail address.
    let mut carol = Browser::new();
    assert_eq!(sign_in(&mut carol, s, "carol").await.status(), 302);
    let user = user_by_email(s, &a.token, "carol@example.org").await;
    assert_eq!(user["roles"], json!(["viewer"]));
    assert_eq!(user["name"], "carol@example.org");

    // Audited: provisioning, the role change with before and after, each sign-in.
    let actions = audit_actions(s, &a.token, 100).await;
    assert_eq!(
        actions.iter().filter(|a| **a == "login.oidc").count(),
        3,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| **a == "user.provision").count(),
        2,
        "{actions:?}"
    );
    let updates = get(s, &a.token, "/api/v1/audit?action=user.update").await;
    let update = &updates["items"][0];
    assert_eq!(update["before"]["roles"], json!(["field", "noc"]));
    assert_eq!(update["after"]["roles"], json!(["admin"]));

    // A disabled account is refused at the callback.
    let carol_id = user["id"].as_str().unwrap();
    let res = send(
        s,
        &a.token,
        Method::PUT,
        &format!("/api/v1/users/{carol_id}"),
        json!({"disabled": true}),
    )
    .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let mut carol2 = Browser::new();
    let res = sign_in(&mut carol2, s, "carol").await;
    assert_eq!(res.status(), 401);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("this account is disabled")
    );

    // An e-mail address a local account holds is not taken over.
    let res = send(s, &a.token, Method::POST, "/api/v1/users", json!({"email": "local@example.org", "name": "Local", "password": "a-long-enough-password"})).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let mut mallory = Browser::new();
    let res = sign_in(&mut mallory, s, "mallory").await;
    assert_eq!(res.status(), 401);
    assert!(mallory.cookie(&s.url("/"), "svc_session").is_none());
    let local = user_by_email(s, &a.token, "local@example.org").await;
    assert_eq!(local["local"], true);
    assert_eq!(local["roles"], json!(["viewer"]));
}

#[tokio::test]
async fn oidc_refuses_what_a_strict_relying_party_must() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let Some(idp) = provider(dir.path(), &base, accounts(json!(["noc"]))) else {
        return;
    };
    // No token and no local account: the setup gate is open and stays open after SSO sign-ins.
    let s = Server::start_with(Opts {
        env: vec![("SVC_DEFAULT_ADMIN_DISABLED".into(), "1".into())],
        ..relying_party(dir.path(), port, &idp.issuer, "trustProxy: true\n")
    });
    let refused = |res: reqwest::Response| async move {
        let status = res.status().as_u16();
        let cookies: Vec<String> = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert!(
            !cookies.iter().any(|c| c.starts_with("svc_session=")),
            "{cookies:?}"
        );
        assert!(
            cookies.iter().any(|c| c.starts_with("svc_oidc_verifier=;")),
            "the flow is cleared: {status} {cookies:?}"
        );
        (status, res.text().await.unwrap())
    };

    // The callback's state is not the one this browser started.
    let mut b = Browser::new();
    let callback = b.sign_in_up_to_callback(&s, "dave").await;
    let state = reqwest::Url::parse(&callback)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .to_string();
    let forged = callback.replace(&format!("state={state}"), "state=forged");
    let (status, page) = refused(b.get(&forged).await).await;
    assert_eq!(status, 401);
    assert!(page.contains("state does not match"), "{page}");

    // A callback without the flow's cookies (another browser, or after ten minutes).
    let mut b = Browser::new();
    let callback = b.sign_in_up_to_callback(&s, "dave").await;
    let mut other = Browser::new();
    let (status, page) = refused(other.get(&callback).await).await;
    assert_eq!(status, 401);
    assert!(page.contains("was not started here"), "{page}");

    // The wrong PKCE verifier: the provider refuses the code.
    let mut b = Browser::new();
    let callback = b.sign_in_up_to_callback(&s, "dave").await;
    b.set_cookie(&s.url("/"), "svc_oidc_verifier", &"x".repeat(43));
    let (status, page) = refused(b.get(&callback).await).await;
    assert_eq!(status, 401);
    assert!(page.contains("invalid_grant"), "{page}");

    // A code is good once: the same callback again is refused.
    let mut b = Browser::new();
    let callback = b.sign_in_up_to_callback(&s, "dave").await;
    let (state_cookie, verifier_cookie) = (
        b.cookie(&s.url("/"), "svc_oidc_state").unwrap(),
        b.cookie(&s.url("/"), "svc_oidc_verifier").unwrap(),
    );
    assert_eq!(b.get(&callback).await.status(), 302);
    b.set_cookie(&s.url("/"), "svc_oidc_state", &state_cookie);
    b.set_cookie(&s.url("/"), "svc_oidc_verifier", &verifier_cookie);
    let (status, _) = refused(b.get(&callback).await).await;
    assert_eq!(status, 401);

    // id_tokens with one thing wrong, each refused by svc's verification.
    for (tamper, says) in [
        ("aud", "audience"),
        ("expired", "expired"),
        ("nonce", "nonce"),
        ("issuer", "issuer"),
        ("signature", "signature"),
    ] {
        idp.set(&accounts(json!(["noc"])), Some(tamper));
        let mut b = Browser::new();
        let (status, page) = refused(sign_in(&mut b, &s, "dave").await).await;
        assert_eq!(status, 401, "{tamper}");
        assert!(page.to_lowercase().contains(says), "{tamper}: {page}");
    }
    idp.set(&accounts(json!(["noc"])), None);

    // The provider sends the browser back with an error: only its code is shown.
    let (status, page) = refused(Browser::new().get(&s.url("/auth/callback?error=access_denied&error_description=%3Cb%3Ecall%20us%3C%2Fb%3E&state=x")).await).await;
    assert_eq!(status, 401);
    assert!(
        page.contains("access_denied") && !page.contains("call us"),
        "{page}"
    );

    // Behind a TLS proxy that says so (trustProxy), the flow's cookies are Secure.
    let res = s
        .http
        .get(s.url("/auth/oidc"))
        .header("X-Forwarded-Proto", "https")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    let set: Vec<&str> = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(set.len(), 2, "{set:?}");
    assert!(set.iter().all(|c| c.ends_with("; Secure")), "{set:?}");

    // SSO accounts do not close the setup gate: it waits for a local administrator.
    assert_eq!(s.get("/setup").await.status(), 200);
}

#[tokio::test]
async fn oidc_answers_502_while_the_provider_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let down = free_port();
    let s = Server::start_with(relying_party(
        dir.path(),
        port,
        &format!("http://127.0.0.1:{down}"),
        "",
    ));
    let res = s.get("/auth/oidc").await;
    assert_eq!(res.status(), 502);
    assert!(res.text().await.unwrap().contains("could not be reached"));
    // The sign-in page still offers the local form.
    let page = s.get("/login").await.text().await.unwrap();
    assert!(page.contains("action=\"/login\""));
}
