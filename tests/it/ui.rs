//! The web UI over HTTP as a browser without JavaScript uses it: sign in with the form, read
//! the pages, act through form POSTs and follow their redirects; the same permissions, the
//! same cross-site check and the same audit entries as the API.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A field of a multipart form: its name, the file's name and type if it is a file, its bytes.
type Field<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a [u8]);

/// A browser session: the cookie a form sign-in set, and the token its pages' forms carry.
struct Browser<'a> {
    s: &'a Server,
    cookie: String,
    token: String,
}

/// The token the first form of `page` carries (`csrf`).
fn form_token(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no form token in {page}"));
    let rest = &page[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

impl<'a> Browser<'a> {
    async fn sign_in(s: &'a Server, email: &str, password: &str) -> Browser<'a> {
        let res = login(s, email, password, false).await;
        assert_eq!(res.status(), 302, "signed in as {email}");
        let (session, _) = session_of(&res);
        let mut b = Browser {
            s,
            cookie: format!("svc_session={session}"),
            token: String::new(),
        };
        // The account page has forms for everyone who can sign in.
        let (_, page) = b.page("/account").await;
        b.token = form_token(&page);
        b
    }

    /// A form's fields as the page posts them: with the page's token.
    fn with_token(&self, body: &str) -> String {
        let sep = if body.is_empty() { "" } else { "&" };
        format!("{body}{sep}csrf={}", self.token)
    }

    async fn page(&self, path: &str) -> (u16, String) {
        let res = self
            .s
            .http
            .get(self.s.url(path))
            .header("Cookie", &self.cookie)
            .header("Accept", "text/html")
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        if status == 200 {
            assert_eq!(
                res.headers()["content-type"],
                "text/html; charset=utf-8",
                "{path}"
            );
        }
        (status, res.text().await.unwrap())
    }

    /// Posts a form as the page would, same-origin; the status and where it redirects.
    async fn post(&self, path: &str, body: &str, site: &str) -> (u16, Option<String>, String) {
        let res = self
            .s
            .http
            .post(self.s.url(path))
            .header("Cookie", &self.cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Sec-Fetch-Site", site)
            .body(self.with_token(body))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let location = res
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_string());
        (status, location, res.text().await.unwrap())
    }

    /// Posts a `multipart/form-data` form as a browser sends one with a file input.
    async fn post_multipart(
        &self,
        path: &str,
        fields: &[Field<'_>],
    ) -> (u16, Option<String>, String) {
        let boundary = "----svcFormBoundary7MA4YWxk";
        let mut body = Vec::new();
        let token: Field<'_> = ("csrf", None, self.token.as_bytes());
        for (name, file, data) in fields.iter().chain([&token]) {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match file {
                Some((filename, media)) => body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {media}\r\n\r\n").as_bytes()),
                None => body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes()),
            }
            body.extend_from_slice(data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let res = self
            .s
            .http
            .post(self.s.url(path))
            .header("Cookie", &self.cookie)
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .header("Sec-Fetch-Site", "same-origin")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let location = res
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_string());
        (status, location, res.text().await.unwrap())
    }
}

async fn user(a: &Admin, email: &str, role: &str) {
    let res = send(
        &a.s,
        &a.token,
        Method::POST,
        "/api/v1/users",
        json!({"email": email, "name": format!("{role} <b>user</b>"), "roles": [role], "password": "a long enough password"}),
    )
    .await;
    assert_eq!(res.status(), 201);
}

/// A user added as `user` does, and their id.
async fn user_id(a: &Admin, email: &str, role: &str) -> String {
    user(a, email, role).await;
    user_id_of(a, email).await
}

/// The id of the user with `email`.
async fn user_id_of(a: &Admin, email: &str) -> String {
    let users = get(&a.s, &a.token, "/api/v1/users").await;
    users["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == email)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn result(s: &Server, token: &str, service: &str, state: &str) {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge", "service": service, "state": state, "output": format!("{service} <script>alert(1)</script> full")}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
}

async fn critical(s: &Server, token: &str, service: &str) {
    result(s, token, service, "CRITICAL").await;
}

/// Polls the open alerts until there are `n`.
async fn open_alerts(s: &Server, token: &str, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let v = get(s, token, "/api/v1/alerts?status=open").await;
        let items = v["items"].as_array().unwrap().clone();
        if items.len() == n {
            return items;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{n} open alerts never came: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn setup(a: &Admin) {
    create_all(
        &a.s,
        &a.token,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": "edge", "labels": {"site": "north"}, "spec": {}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "disk", "host": "edge", "spec": {}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "load", "host": "edge", "spec": {}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "swap", "host": "edge", "spec": {}}),
            ),
            (
                "/api/v1/alert-rules",
                json!({
                    "name": "critical",
                    "match": "event.type == 'state_change' && event.state == 'CRITICAL'",
                    "severity": "critical",
                    "title": "{{ .event.object }} is {{ .event.state }}",
                }),
            ),
        ],
    )
    .await;
    user(a, "olga@example.org", "operator").await;
    user(a, "vera@example.org", "viewer").await;
}

#[tokio::test]
async fn an_operator_runs_a_shift_without_javascript() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    critical(s, &a.token, "swap").await;
    let alerts = open_alerts(s, &a.token, 3).await;
    let id_of = |service: &str| {
        alerts
            .iter()
            .find(|x| x["title"].as_str().unwrap().starts_with(service))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;

    // The problems page: three unhandled, counted in the title, output escaped, each with
    // its alert's acknowledge button; the stylesheet by its hashed name; the live module.
    let (status, home) = olga.page("/").await;
    assert_eq!(status, 200);
    assert!(home.contains("<title>(3) Problems · svc</title>"), "{home}");
    assert!(home.contains("edge / disk") && home.contains("edge / swap"));
    assert!(!home.contains("<script>alert(1)"), "output is escaped");
    assert!(home.contains("&lt;script&gt;"));
    assert!(!home.contains("<b>user</b>"), "the user's name is escaped");
    let disk = id_of("disk");
    assert!(home.contains(&format!("action=\"/alerts/{disk}/ack\"")));
    assert!(home.contains("data-live=\"state_change"));
    assert_eq!(home.matches("<h1").count(), 1, "one h1");
    assert!(home.contains("<html lang=\"en\">"));
    let css = home
        .split("href=\"/assets/app.")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(|rest| format!("/assets/app.{rest}"))
        .expect("the stylesheet is linked");
    let res = s
        .http
        .get(s.url(&css))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "assets need no session");
    assert_eq!(
        res.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(res.headers()["content-encoding"], "gzip");
    assert_eq!(res.headers()["content-type"], "text/css; charset=utf-8");
    assert_eq!(
        s.get("/assets/app.css").await.status(),
        404,
        "only hashed names"
    );
    // Pages are gzipped for browsers that take it, and only for them.
    let zipped = s
        .http
        .get(s.url("/"))
        .header("Cookie", &olga.cookie)
        .header("Accept-Encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    let bytes = zipped.bytes().await.unwrap();
    assert!(
        bytes.len() * 2 < home.len(),
        "{} of {}",
        bytes.len(),
        home.len()
    );
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "a gzip stream");

    // Acknowledge from the row: 303 back with a notice; the API sees the same change, with
    // its audit entry by the user.
    let (status, to, _) = olga
        .post(&format!("/alerts/{disk}/ack"), "back=%2F", "same-origin")
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/?did=ack"));
    let alert = get(s, &a.token, &format!("/api/v1/alerts/{disk}")).await;
    assert_eq!(alert["status"], "acked");
    let audit = get(s, &a.token, "/api/v1/audit?limit=20").await;
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"].as_str().unwrap_or_default().contains("ack")
                && e["actorType"] == "user"
                && e["resource"].as_str().unwrap_or_default().contains(&disk)),
        "{audit}"
    );
    let (_, home) = olga.page("/?did=ack").await;
    assert!(home.contains("Acknowledged."), "the notice is shown");
    let (_, home) = olga.page("/?did=%3Cb%3Ehello").await;
    assert!(
        !home.contains("role=\"status\"") && !home.contains("hello"),
        "a notice is never the query's text"
    );

    // The alert page: facts, timeline with the acknowledgement, snooze and resolve.
    let load = id_of("load");
    let (status, page) = olga.page(&format!("/alerts/{load}")).await;
    assert_eq!(status, 200);
    assert!(page.contains("alert_opened"), "timeline: {page}");
    assert!(page.contains(&format!("action=\"/alerts/{load}/snooze\"")));
    let (status, to, _) = olga
        .post(
            &format!("/alerts/{load}/snooze"),
            &format!("duration=30m&back=%2Falerts%2F{load}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to, Some(format!("/alerts/{load}?did=snooze")));
    assert!(get(s, &a.token, &format!("/api/v1/alerts/{load}")).await["snoozedUntil"].is_string());
    let (status, _, _) = olga
        .post(
            &format!("/alerts/{load}/resolve"),
            "back=%2Falerts",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (_, page) = olga.page(&format!("/alerts/{load}")).await;
    assert!(
        page.contains("alert_resolved") && page.contains(">ack<"),
        "{page}"
    );
    // Resolving it again is refused as by the API, as a page.
    let (status, _, body) = olga
        .post(
            &format!("/alerts/{load}/resolve"),
            "back=%2F",
            "same-origin",
        )
        .await;
    assert_eq!(status, 404);
    assert!(body.contains("<h1>"), "an HTML page: {body}");

    // Bulk acknowledge from the alert list; a foreign redirect target is not followed.
    result(s, &a.token, "load", "OK").await;
    critical(s, &a.token, "load").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let (status, list) = olga.page("/alerts?status=open").await;
    assert_eq!(status, 200);
    assert!(list.contains("Acknowledge selected"));
    let ids: Vec<String> = alerts
        .iter()
        .map(|x| format!("id={}", x["id"].as_str().unwrap()))
        .collect();
    let (status, to, _) = olga
        .post(
            "/alerts/ack",
            &format!("{}&back=https%3A%2F%2Fevil.example%2F", ids.join("&")),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/?did=ack-some"));
    open_alerts(s, &a.token, 0).await;
    let (_, home) = olga.page("/").await;
    assert!(
        home.contains("<title>Problems · svc</title>"),
        "all handled: {home}"
    );
    let (_, all) = olga.page("/?handled=1").await;
    assert!(all.contains("acknowledged by"), "{all}");

    // Objects: the list filters on the server; a host with its services.
    let (status, objects) = olga.page("/objects?q=swa").await;
    assert_eq!(status, 200);
    assert!(objects.contains("edge / swap") && !objects.contains("edge / disk"));
    let host = get(s, &a.token, "/api/v1/hosts?name=edge").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, page) = olga.page(&format!("/objects/{host}")).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(">disk<") && page.contains(">swap<") && page.contains("CRITICAL"),
        "{page}"
    );
    let (status, _) = olga.page("/objects?selector=site%3D%3D%3D").await;
    assert_eq!(status, 422, "a bad selector is a page saying so");

    // The other pages answer.
    for path in ["/oncall", "/events", "/events?types=ack", "/account"] {
        let (status, page) = olga.page(path).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(page.matches("<h1").count(), 1, "{path}");
    }
    let (status, _) = olga.page(&format!("/alerts/{}", uuid_like())).await;
    assert_eq!(status, 404);
}

fn uuid_like() -> &'static str {
    "0190f2a4-0000-7000-8000-000000000000"
}

#[tokio::test]
async fn the_ui_keeps_the_apis_permissions_and_cross_site_rule() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    let id = open_alerts(s, &a.token, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Someone whose role reads on-call only starts there, not on a refusal.
    create_all(
        s,
        &a.token,
        vec![(
            "/api/v1/roles",
            json!({"name": "pager-only", "permissions": ["oncall:read"]}),
        )],
    )
    .await;
    user(&a, "pat@example.org", "pager-only").await;
    let pat = Browser::sign_in(s, "pat@example.org", "a long enough password").await;
    let res = s
        .http
        .get(s.url("/"))
        .header("Cookie", &pat.cookie)
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/oncall");

    // A viewer sees the problem but no acknowledge button, and cannot post one.
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (status, home) = vera.page("/").await;
    assert_eq!(status, 200);
    assert!(home.contains("edge / disk"));
    assert!(
        !home.contains("/ack\""),
        "no acknowledge control for a viewer"
    );
    let (status, _, body) = vera
        .post(&format!("/alerts/{id}/ack"), "back=%2F", "same-origin")
        .await;
    assert_eq!(status, 403);
    assert!(
        body.contains("<h1>") && body.contains("alerts:ack"),
        "{body}"
    );
    assert_eq!(
        get(s, &a.token, &format!("/api/v1/alerts/{id}")).await["status"],
        "open"
    );

    // An operator's form posted from another site is refused before anything happens.
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (status, _, _) = olga
        .post(&format!("/alerts/{id}/ack"), "back=%2F", "cross-site")
        .await;
    assert_eq!(status, 403);
    assert_eq!(
        get(s, &a.token, &format!("/api/v1/alerts/{id}")).await["status"],
        "open"
    );

    // Anonymous: every page load goes to the sign-in form, routed or not; the API and the
    // assets never redirect.
    for path in ["/", "/alerts", "/objects", "/no-such-page", "/alerts/x/y/z"] {
        let res = s
            .http
            .get(s.url(path))
            .header("Accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 302, "{path}");
        assert_eq!(res.headers()["location"], "/login", "{path}");
    }
    let res = s
        .http
        .head(s.url("/no-such-page"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302, "HEAD too");
    let res = s.get("/no-such-page").await;
    assert_eq!(res.status(), 404, "not a page load: the plain 404");
    assert_eq!(res.text().await.unwrap(), "404 page not found\n");
    let res = s
        .http
        .get(s.url("/assets/nothing.css"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    // A repeated query parameter takes its first value, as the API's do (not a plain-text 400).
    let (status, page) = olga
        .page("/alerts?status=acked&status=open&cursor=x&cursor=y")
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Acknowledged alerts"),
        "the first status: {page}"
    );
    // Signed in, an unknown page is the plain 404, not the sign-in form.
    let (status, _) = olga.page("/no-such-page").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn silences_and_downtimes_from_an_alert_and_an_object() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    let alert = open_alerts(s, &a.token, 1).await.remove(0);
    let id = alert["id"].as_str().unwrap();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;

    // The alert page links a silence form pre-filled with its exact title.
    let (_, page) = olga.page(&format!("/alerts/{id}")).await;
    let link = page
        .split("href=\"/silences/new?")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a silence link")
        .replace("&amp;", "&");
    let (status, form) = olga.page(&format!("/silences/new?{link}")).await;
    assert_eq!(status, 200);
    assert!(form.contains("value=\"^disk is CRITICAL$\""), "{form}");
    // The form previews what it would hold (issue 70), and its Preview button asks for that.
    assert!(form.contains("It would hold 1 alerts now"), "{form}");
    assert!(form.contains(&format!("href=\"/alerts/{id}\"")), "{form}");
    assert!(form.contains("formaction=\"/silences/new\""), "{form}");
    let (_, none) = olga
        .page("/silences/new?textRegex=%5Enothing&comment=x")
        .await;
    assert!(none.contains("It would hold 0 alerts now"), "{none}");
    assert!(none.contains("value=\"x\""), "the comment is kept: {none}");

    // Without a reason it is refused and the form comes back with what was typed.
    let (status, _, again) = olga
        .post(
            "/silences",
            "textRegex=%5Edisk&duration=1h&comment=",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    assert!(
        again.contains("value=\"^disk\"") && again.contains("role=\"alert\""),
        "{again}"
    );
    let (status, to, _) = olga
        .post(
            "/silences",
            "textRegex=%5Edisk&duration=30m&comment=disk+swap+tomorrow",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/silences?did=silence"));
    let (_, list) = olga.page("/silences").await;
    assert!(
        list.contains("disk swap tomorrow") && list.contains("matches 1 active alert now"),
        "{list}"
    );
    assert!(
        list.contains("badge s-warn"),
        "ending within the hour is flagged: {list}"
    );
    // The silenced alert's problem is handled.
    let (_, home) = olga.page("/").await;
    assert!(home.contains("<title>Problems · svc</title>"), "{home}");
    let (_, all) = olga.page("/?handled=1").await;
    assert!(all.contains("silenced"), "{all}");
    let silence = get(s, &a.token, "/api/v1/silences?active=true").await["items"][0].clone();
    assert_eq!(silence["textRegex"], "^disk");
    let sid = silence["id"].as_str().unwrap();
    let (status, _, _) = olga
        .post(
            &format!("/silences/{sid}/expire"),
            "back=%2Fsilences",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert!(
        get(s, &a.token, "/api/v1/silences?active=true").await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // A downtime from the object page; the problem becomes handled.
    let object = alert["objectId"].as_str().unwrap();
    let (_, page) = olga.page(&format!("/objects/{object}")).await;
    assert!(page.contains(&format!("/downtimes/new?object={object}")));
    let (status, form) = olga.page(&format!("/downtimes/new?object={object}")).await;
    assert_eq!(status, 200);
    assert!(form.contains("edge / disk"));
    let (status, to, _) = olga
        .post(
            "/downtimes",
            &format!("objectId={object}&duration=2h&comment=replacing+the+disk"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{to:?}");
    let (_, list) = olga.page("/downtimes").await;
    assert!(list.contains("replacing the disk"));
    let started = Instant::now();
    loop {
        let (_, home) = olga.page("/").await;
        if home.contains("<title>Problems · svc</title>") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the downtime never handled the problem: {home}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let downtime = get(s, &a.token, "/api/v1/downtimes?active=true").await["items"][0].clone();
    let did = downtime["id"].as_str().unwrap();
    let (status, _, _) = olga
        .post(
            &format!("/downtimes/{did}/end"),
            "back=%2Fdowntimes",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);

    // A viewer reads both lists without the controls, and cannot open the forms.
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (status, list) = vera.page("/silences").await;
    assert_eq!(status, 200);
    assert!(!list.contains("New silence") && !list.contains("/expire"));
    let (status, _) = vera.page("/silences/new").await;
    assert_eq!(status, 403);
    let (status, _) = vera.page("/downtimes").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn an_alert_goes_into_an_incident_whose_status_changes_by_version() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let (first, second) = (
        alerts[0]["id"].as_str().unwrap().to_string(),
        alerts[1]["id"].as_str().unwrap().to_string(),
    );
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;

    let (_, page) = olga.page(&format!("/alerts/{first}")).await;
    assert!(page.contains("Open an incident for it"), "{page}");
    let (status, to, _) = olga
        .post(
            &format!("/alerts/{first}/incident"),
            "incident=new",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let to = to.unwrap();
    let incident = to
        .strip_prefix("/incidents/")
        .and_then(|r| r.split('?').next())
        .unwrap()
        .to_string();
    // The second alert joins it from its own page.
    let (_, page) = olga.page(&format!("/alerts/{second}")).await;
    assert!(
        page.contains(&format!("<option value=\"{incident}\"")),
        "{page}"
    );
    let (status, _, _) = olga
        .post(
            &format!("/alerts/{second}/incident"),
            &format!("incident={incident}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let stored = get(s, &a.token, &format!("/api/v1/incidents/{incident}")).await;
    assert_eq!(stored["alertIds"].as_array().unwrap().len(), 2, "{stored}");
    let version = stored["version"].as_u64().unwrap();

    let (status, page) = olga.page(&format!("/incidents/{incident}")).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("/alerts/{first}")) && page.contains(&format!("/alerts/{second}"))
    );
    assert!(page.contains("incident_update"), "timeline: {page}");
    let (_, list) = olga.page("/incidents").await;
    assert!(list.contains("2 alerts"), "{list}");

    // A status change from a page shown before the last change is refused, as If-Match is.
    let (status, _, body) = olga
        .post(
            &format!("/incidents/{incident}/status"),
            &format!("status=acked&version={}", version - 1),
            "same-origin",
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, _, _) = olga
        .post(
            &format!("/incidents/{incident}/status"),
            &format!("status=acked&version={version}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        get(s, &a.token, &format!("/api/v1/incidents/{incident}")).await["status"],
        "acked"
    );

    // A viewer reads incidents but gets no forms.
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (status, page) = vera.page(&format!("/incidents/{incident}")).await;
    assert_eq!(status, 200);
    assert!(!page.contains("Change status"));
    let (_, page) = vera.page(&format!("/alerts/{first}")).await;
    assert!(!page.contains("Open an incident for it"));
}

#[tokio::test]
async fn account_password_audit_and_sites_pages() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    user(&a, "ada@example.org", "admin").await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;

    // The password form: a wrong current password is refused on the page, the right one
    // changes it, and the new one signs in.
    let (status, page) = olga.page("/account").await;
    assert_eq!(status, 200);
    assert!(page.contains("action=\"/account/password\""));
    let (status, _, body) = olga
        .post(
            "/account/password",
            "oldPassword=wrong+password+here&newPassword=another+long+password",
            "same-origin",
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("role=\"alert\""), "{body}");
    let (status, to, _) = olga
        .post(
            "/account/password",
            "oldPassword=a+long+enough+password&newPassword=another+long+password",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/account?did=password"));
    Browser::sign_in(s, "olga@example.org", "another long password").await;

    // The look: a user's own theme and live updates; the instance's colours for everyone who
    // chose none.
    let (_, home) = olga.page("/").await;
    assert!(home.contains("<html lang=\"en\">") && home.contains("data-live"));
    let (status, to, _) = olga
        .post("/account/preferences", "theme=dark&live=off", "same-origin")
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/account?did=look"));
    let (_, home) = olga.page("/").await;
    assert!(home.contains("<html lang=\"en\" class=\"dark\">"), "{home}");
    assert!(
        !home.contains("data-live") && !home.contains("live."),
        "not live: {home}"
    );
    let ada = Browser::sign_in(s, "ada@example.org", "a long enough password").await;
    assert_eq!(
        olga.post("/account/branding", "mode=light", "same-origin")
            .await
            .0,
        403,
        "the instance's colours are config:write"
    );
    let (_, page) = olga.page("/account").await;
    assert!(
        !page.contains("/account/branding"),
        "no branding form: {page}"
    );
    let (_, page) = ada.page("/account").await;
    assert!(
        page.contains(r#"action="/account/branding" enctype="multipart/form-data""#),
        "{page}"
    );
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc`\x18\x05\xa3\x60\x14\x0c\x02\0\0\x05\0\x01\xd4\xe1\xe1\xc6\0\0\0\0IEND\xaeB`\x82\r\n";
    let (status, to, body) = ada
        .post_multipart(
            "/account/branding",
            &[
                ("mode", None, b"light"),
                ("name", None, b"Leitstelle <Nord>"),
                ("accent", None, b"on"),
                ("accentColor", None, b"#0a7d3b"),
                ("logo", Some(("logo.png", "image/png")), png),
            ],
        )
        .await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(to.as_deref(), Some("/account?did=look"));
    let (_, page) = ada.page("/").await;
    assert!(page.contains("class=\"light\""), "{page}");
    assert!(
        page.contains("Problems · Leitstelle &lt;Nord&gt;</title>"),
        "{page}"
    );
    assert!(
        page.contains(":root{--brand-bg:#0a7d3b;--brand-fg:#fff}"),
        "white reads on dark green: {page}"
    );
    let logo = page
        .split("<img src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the header shows the logo")
        .to_string();
    assert!(logo.starts_with("/branding/logo?v="), "{logo}");
    let res = s.http.get(s.url(&logo)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        res.bytes().await.unwrap().as_ref(),
        png,
        "the file as uploaded"
    );
    let login = s.http.get(s.url("/login")).send().await.unwrap();
    let login = login.text().await.unwrap();
    assert!(
        login.contains(&logo) && login.contains("Sign in · Leitstelle &lt;Nord&gt;"),
        "the sign-in page is branded: {login}"
    );
    let (_, home) = olga.page("/").await;
    assert!(home.contains("class=\"dark\""), "a user's choice wins");
    assert!(
        home.contains("--brand-bg:#0a7d3b"),
        "the header colour is everyone's"
    );

    // A file that is not an image is refused and the branding stays; the logo can go.
    let (status, _, body) = ada
        .post_multipart(
            "/account/branding",
            &[("logo", Some(("x.gif", "image/gif")), b"GIF89a....")],
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("PNG, JPEG or WebP"), "{body}");
    let kept = get(s, &a.token, "/api/v1/branding").await;
    assert_eq!(kept["name"], "Leitstelle <Nord>");
    assert!(
        kept["logo"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBORw0KGgo")
    );
    let (status, _, _) = ada
        .post_multipart(
            "/account/branding",
            &[
                ("mode", None, b"light"),
                ("logo", Some(("", "application/octet-stream")), b""),
                ("removeLogo", None, b"on"),
                ("accentColor", None, b"#0a7d3b"),
            ],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        get(s, &a.token, "/api/v1/branding").await,
        json!({"mode": "light"}),
        "no name, no colour without the box ticked, no logo"
    );
    let (_, page) = ada.page("/").await;
    assert!(
        !page.contains("<img") && !page.contains("--brand-bg") && page.contains("· svc</title>")
    );
    assert_eq!(s.http.get(s.url(&logo)).send().await.unwrap().status(), 404);

    // The audit log is the instance administrators' and the tenant admins': an operator has
    // neither the link nor the page.
    let (_, home) = olga.page("/").await;
    assert!(!home.contains("href=\"/audit\""));
    assert_eq!(olga.page("/audit").await.0, 403);
    let (status, audit) = ada.page("/audit").await;
    assert_eq!(status, 200);
    assert!(
        audit.contains("user.password") || audit.contains("password"),
        "{audit}"
    );

    // Sites: none yet, then one that has never reported.
    let (status, sites) = olga.page("/sites").await;
    assert_eq!(status, 200);
    assert!(sites.contains("No sites"));
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/sites",
        json!({"name": "north-gw", "description": "the <north> gateway"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let (_, sites) = olga.page("/sites").await;
    assert!(
        sites.contains("north-gw") && sites.contains("heartbeat never"),
        "{sites}"
    );
    assert!(sites.contains("the &lt;north&gt; gateway"));
}

#[tokio::test]
async fn an_administrator_manages_users_and_tokens() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    user(&a, "ada@example.org", "admin").await;
    let ada = Browser::sign_in(s, "ada@example.org", "a long enough password").await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    assert_eq!(
        olga.page("/users").await.0,
        403,
        "an operator manages no users"
    );
    assert_eq!(olga.page("/tokens").await.0, 403);

    // Users: add one with a role, disable another (who is out at once), not oneself.
    let (status, page) = ada.page("/users").await;
    assert_eq!(status, 200);
    assert!(page.contains("olga@example.org") && page.contains("datalist"));
    let (status, to, _) = ada
        .post(
            "/users",
            "name=Tom&email=tom%40example.org&role=operator&password=a+long+enough+password",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{to:?}");
    Browser::sign_in(s, "tom@example.org", "a long enough password").await;
    let (status, _, body) = ada
        .post(
            "/users",
            "name=Bad&email=not-an-address&role=viewer",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("role=\"alert\"") && body.contains("olga@example.org"));
    let (olga_id, ada_id) = (
        user_id_of(&a, "olga@example.org").await,
        user_id_of(&a, "ada@example.org").await,
    );
    let (_, page) = ada.page("/users").await;
    assert!(
        !page.contains(&format!("/users/{ada_id}/disable")),
        "not oneself"
    );
    assert!(
        page.contains("name=\"confirm\" value=\"on\" required"),
        "disabling asks first: {page}"
    );
    let (status, _, body) = ada
        .post(&format!("/users/{olga_id}/disable"), "", "same-origin")
        .await;
    assert_eq!(status, 422, "not without the ticked box");
    assert!(body.contains("tick the box"), "{body}");
    let (status, _, _) = ada
        .post(
            &format!("/users/{olga_id}/disable"),
            "confirm=on",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let res = s
        .http
        .get(s.url("/"))
        .header("Cookie", &olga.cookie)
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302, "a disabled user's session ends at once");
    let (status, _, _) = ada
        .post(&format!("/users/{olga_id}/enable"), "", "same-origin")
        .await;
    assert_eq!(status, 303);

    // Tokens: minted with the secret shown once and kept by no cache; it works; revoked, it
    // does not.
    let res = s
        .http
        .post(s.url("/tokens"))
        .header("Cookie", &ada.cookie)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept-Encoding", "gzip")
        .body(ada.with_token("name=ci+runner&role=viewer&days=30"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert!(
        res.headers().get("content-encoding").is_none(),
        "a page with a secret is never compressed"
    );
    let page = res.text().await.unwrap();
    let secret = page
        .split("<code>")
        .nth(1)
        .and_then(|r| r.split("</code>").next())
        .unwrap()
        .to_string();
    let who = call(s, &secret, Method::GET, "/api/v1/whoami")
        .send()
        .await
        .unwrap();
    assert_eq!(who.status(), 200);
    let (_, list) = ada.page("/tokens").await;
    assert!(
        list.contains("ci runner") && !list.contains(&secret),
        "secrets are never listed"
    );
    let token_id = get(s, &a.token, "/api/v1/api-tokens").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ci runner")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _, _) = ada
        .post(&format!("/tokens/{token_id}/revoke"), "", "same-origin")
        .await;
    assert_eq!(status, 303);
    let who = call(s, &secret, Method::GET, "/api/v1/whoami")
        .send()
        .await
        .unwrap();
    assert_eq!(who.status(), 401);
}

#[tokio::test]
async fn an_operator_takes_over_the_current_shift() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    // Taking a shift over needs oncall:write, which editors have.
    let eve = user_id(&a, "eve@example.org", "editor").await;
    create_all(s, &a.token, vec![
        ("/api/v1/contacts", json!({"name": "ada", "phone": "+4930123456"})),
        ("/api/v1/contacts", json!({"name": "eve", "email": "eve@example.org", "userId": eve})),
        (
            "/api/v1/schedules",
            json!({"name": "primary", "timeZone": "UTC", "layers": [{"unit": "weekly", "anchor": "2026-01-05T00:00:00Z", "participants": ["ada"]}]}),
        ),
    ])
    .await;
    let eve_browser = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    let (status, page) = eve_browser.page("/oncall").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("My shifts") && page.contains("href=\"tel:+4930123456\""),
        "{page}"
    );
    let form = page
        .split("action=\"/oncall/primary/take-over\"")
        .nth(1)
        .expect("a take-over form for ada's shift");
    let field = |name: &str| {
        form.split(&format!("name=\"{name}\" value=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .to_string()
    };
    let body = format!(
        "start={}&end={}",
        field("start").replace(':', "%3A"),
        field("end").replace(':', "%3A")
    );
    let (status, to, body) = eve_browser
        .post("/oncall/primary/take-over", &body, "same-origin")
        .await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(to.as_deref(), Some("/oncall?did=takeover"));
    let now = get(s, &a.token, "/api/v1/oncall/now").await;
    assert_eq!(now[0]["shifts"][0]["contact"], "eve", "{now}");
    let (_, page) = eve_browser.page("/oncall").await;
    assert!(page.contains("badge s-ok\">you"), "{page}");

    // An operator (no oncall:write) sees no take-over control.
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (_, page) = olga.page("/oncall").await;
    assert!(!page.contains("take-over"));
}

#[tokio::test]
async fn a_configuration_document_is_planned_then_applied_at_its_version() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    user(&a, "eve@example.org", "editor").await;
    let eve = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    let (status, kinds) = eve.page("/config").await;
    assert_eq!(status, 200);
    assert!(kinds.contains("href=\"/config/alert-rules\""));
    let (status, list) = eve.page("/config/alert-rules").await;
    assert_eq!(status, 200);
    assert!(
        list.contains("href=\"/config/alert-rules/critical\""),
        "{list}"
    );
    let (status, doc) = eve.page("/config/alert-rules/critical").await;
    assert_eq!(status, 200);
    assert!(
        doc.contains("severity: critical") && doc.contains("Plan the change"),
        "{doc}"
    );
    let version = get(s, &a.token, "/api/v1/alert-rules/critical").await["version"]
        .as_u64()
        .unwrap();
    let yaml = "name: critical\nmatch: event.type == 'state_change' && event.state == 'CRITICAL'\nseverity: warning\ntitle: '{{ .event.object }} is {{ .event.state }}'\n";
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("yaml", yaml)
        .append_pair("version", &version.to_string())
        .finish();
    let (status, _, plan) = eve
        .post("/config/alert-rules/critical/plan", &form, "same-origin")
        .await;
    assert_eq!(status, 200, "{plan}");
    assert!(
        plan.contains("<del>- severity: critical") && plan.contains("<ins>+ severity: warning"),
        "{plan}"
    );
    assert_eq!(
        get(s, &a.token, "/api/v1/alert-rules/critical").await["severity"],
        "critical",
        "a plan changes nothing"
    );
    let (status, to, _) = eve
        .post("/config/alert-rules/critical", &form, "same-origin")
        .await;
    assert_eq!(status, 303);
    assert_eq!(
        to.as_deref(),
        Some("/config/alert-rules/critical?did=saved")
    );
    assert_eq!(
        get(s, &a.token, "/api/v1/alert-rules/critical").await["severity"],
        "warning"
    );
    // The same plan applied again is stale: the document changed since.
    let (status, _, _) = eve
        .post("/config/alert-rules/critical", &form, "same-origin")
        .await;
    assert_eq!(status, 409);
    // YAML that does not read, and a document the kind refuses, say so.
    let (status, _, _) = eve
        .post(
            "/config/alert-rules/critical/plan",
            "yaml=%5B&version=1",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    // An operator reads rules but may not change them, and sees no form.
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (status, doc) = olga.page("/config/alert-rules/critical").await;
    assert_eq!(status, 200);
    assert!(!doc.contains("Plan the change"));
    let (status, _, _) = olga
        .post("/config/alert-rules/critical/plan", &form, "same-origin")
        .await;
    assert_eq!(status, 403);
    assert_eq!(olga.page("/config/no-such-kind").await.0, 404);
    let (_, list) = olga.page("/config/alert-rules").await;
    assert!(!list.contains("New document"), "no create form: {list}");
    let (status, _, _) = olga
        .post(
            "/config/alert-rules",
            "name=mine&yaml=match%3A+%22true%22",
            "same-origin",
        )
        .await;
    assert_eq!(status, 403);

    // Created from the list page; a refusal keeps the text typed; deleted at its version.
    let (_, list) = eve.page("/config/alert-rules").await;
    assert!(list.contains("New document"), "{list}");
    let yaml = "match: \"event.type == 'state_change'\"\nseverity: loud\ntitle: x\n";
    let typed: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("name", "noisy")
        .append_pair("yaml", yaml)
        .finish();
    let (status, _, body) = eve.post("/config/alert-rules", &typed, "same-origin").await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("severity: loud") && body.contains("value=\"noisy\""),
        "the form again, as typed: {body}"
    );
    let typed = typed.replace("loud", "warning");
    let (status, to, body) = eve.post("/config/alert-rules", &typed, "same-origin").await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(to.as_deref(), Some("/config/alert-rules/noisy?did=created"));
    assert_eq!(
        get(s, &a.token, "/api/v1/alert-rules/noisy").await["severity"],
        "warning"
    );
    let (status, _, _) = eve.post("/config/alert-rules", &typed, "same-origin").await;
    assert_eq!(status, 409, "the name is taken");
    let (_, doc) = eve.page("/config/alert-rules/noisy").await;
    assert!(doc.contains("/config/alert-rules/noisy/delete"), "{doc}");
    let (status, _, _) = eve
        .post(
            "/config/alert-rules/noisy/delete",
            "version=1",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "not confirmed");
    let (status, _, _) = eve
        .post(
            "/config/alert-rules/noisy/delete",
            "confirm=on&version=7",
            "same-origin",
        )
        .await;
    assert_eq!(status, 409, "a stale page");
    let (status, _, _) = olga
        .post(
            "/config/alert-rules/noisy/delete",
            "confirm=on&version=1",
            "same-origin",
        )
        .await;
    assert_eq!(status, 403);
    let (status, to, _) = eve
        .post(
            "/config/alert-rules/noisy/delete",
            "confirm=on&version=1",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/config/alert-rules?did=deleted"));
    let gone = call(s, &a.token, Method::GET, "/api/v1/alert-rules/noisy")
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    let audit = get(s, &a.token, "/api/v1/audit?limit=5").await.to_string();
    assert!(audit.contains("\"alert-rule.delete\""), "{audit}");
}

#[tokio::test]
async fn a_dashboard_shows_its_saved_filters_as_counts_and_lists() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "swap").await;
    open_alerts(s, &a.token, 2).await;
    let layout = json!({"tiles": [
        {"filter": "open-alerts", "title": "Open alerts"},
        {"filter": "north-services", "show": "count"},
        {"filter": "no-such-filter"},
        {"filter": "tenant-audit"},
    ]});
    create_all(s, &a.token, vec![
        ("/api/v1/saved-filters", json!({"name": "open-alerts", "resource": "alerts", "query": {"status": "open"}, "shared": true})),
        ("/api/v1/saved-filters", json!({"name": "north-services", "resource": "services", "query": {"selector": "site=north"}})),
        ("/api/v1/saved-filters", json!({"name": "tenant-audit", "resource": "events", "query": {"types": "ack"}})),
        ("/api/v1/dashboards", json!({"name": "noc", "shared": true, "spec": base64_of(layout.to_string().as_bytes(), false)})),
        ("/api/v1/dashboards", json!({"name": "private", "shared": false, "ownerId": "someone-else", "spec": base64_of(b"{\"tiles\":[]}", false)})),
        ("/api/v1/dashboards", json!({"name": "broken", "shared": true, "spec": base64_of(b"{\"a\":1}", false)})),
    ])
    .await;
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (status, list) = vera.page("/dashboards").await;
    assert_eq!(status, 200);
    assert!(
        list.contains("/dashboards/noc") && !list.contains("/dashboards/private"),
        "{list}"
    );
    let (status, page) = vera.page("/dashboards/noc").await;
    assert_eq!(status, 200);
    // Two open alerts, listed; the services labelled site=north, counted; a tile whose filter
    // is missing says so and the others still show.
    assert!(
        page.contains("<h2>Open alerts</h2>") && page.contains("disk is CRITICAL"),
        "{page}"
    );
    assert!(page.contains("<strong>2</strong>"), "{page}");
    assert!(page.contains("<h2>north-services</h2>"));
    assert!(
        page.contains("no-such-filter") && page.contains("notice error"),
        "{page}"
    );
    assert!(page.contains("data-live"));
    assert_eq!(
        vera.page("/dashboards/private").await.0,
        404,
        "another's private dashboard"
    );
    assert_eq!(
        vera.page("/dashboards/broken").await.0,
        422,
        "a layout that does not read"
    );

    // An editor makes a dashboard in the UI: a graph of a metric of the objects a saved
    // filter finds, and a count.
    assert!(!list.contains("/dashboards/new"), "a viewer makes none");
    assert_eq!(vera.page("/dashboards/new").await.0, 403);
    user(&a, "eve@example.org", "editor").await;
    let eve = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    create_all(
        s,
        &a.token,
        vec![(
            "/api/v1/saved-filters",
            json!({"name": "edge-load", "resource": "services", "query": {"q": "load"}}),
        )],
    )
    .await;
    for load in [0.5, 1.5] {
        let res = send(
            s,
            &a.token,
            Method::POST,
            "/api/v1/results",
            json!({"results": [{"host": "edge", "service": "load", "state": "OK", "output": format!("OK | load1={load};4;8")}]}),
        )
        .await;
        assert_eq!(res.status(), 202);
    }
    let (status, editor) = eve.page("/dashboards/new").await;
    assert_eq!(status, 200);
    assert!(
        editor.contains(r#"<option value="edge-load">services</option>"#),
        "the saved filters are offered: {editor}"
    );
    let tiles = "filter0=edge-load&title0=Load&show0=graph&metric0=load1&filter1=open-alerts&show1=count&filter2=&show2=list";
    let (status, _, body) = eve
        .post(
            "/dashboards",
            &tiles.replace("metric0=load1", "metric0="),
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "a graph names its metric: {body}");
    let (status, to, body) = eve
        .post(
            "/dashboards",
            &format!("name=loads&shared=on&version=0&{tiles}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(to.as_deref(), Some("/dashboards/loads?did=saved"));
    let (status, page) = vera.page("/dashboards/loads").await;
    assert_eq!(status, 200);
    assert!(page.contains("<h2>Load</h2>"), "{page}");
    assert!(
        page.contains("<strong>edge / load · load1</strong>") && page.contains("<polyline"),
        "the graph of load1 on edge / load: {page}"
    );
    assert!(page.contains("<h2>open-alerts</h2>"));
    assert!(
        !page.contains("/dashboards/loads/edit"),
        "a viewer edits nothing"
    );
    let stored = get(s, &a.token, "/api/v1/dashboards/loads").await;
    assert_eq!(stored["shared"], true);
    assert!(stored["ownerId"].is_string(), "{stored}");

    let (_, page) = eve.page("/dashboards/loads").await;
    assert!(page.contains(r#"href="/dashboards/loads/edit""#));
    let (status, editor) = eve.page("/dashboards/loads/edit").await;
    assert_eq!(status, 200);
    assert!(
        editor.contains(r#"value="edge-load""#)
            && editor.contains(r#"<option value="graph" selected>"#)
            && editor.contains(r#"value="load1""#),
        "{editor}"
    );
    let (status, _, _) = eve
        .post(
            "/dashboards/loads",
            "version=1&shared=on&filter0=open-alerts&show0=list",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (status, _, _) = eve
        .post(
            "/dashboards/loads",
            "version=1&shared=on&filter0=open-alerts&show0=count",
            "same-origin",
        )
        .await;
    assert_eq!(status, 409, "the editor showed version 1; it is at 2");
    let (status, _, _) = vera
        .post("/dashboards/loads", "version=2&filter0=x", "same-origin")
        .await;
    assert_eq!(status, 403);
    let (_, page) = vera.page("/dashboards/loads").await;
    assert!(
        !page.contains("<figure") && page.contains("disk is CRITICAL"),
        "{page}"
    );
}

#[tokio::test]
async fn lists_are_paged_and_filtered_on_the_server() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let services: Vec<Value> = (0..117)
        .map(|i| json!({"name": format!("p{i:03}"), "host": "edge", "folder": if i < 3 { "north/pumps" } else { "south" }, "spec": {}}))
        .collect();
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/objects:batch",
        json!({"services": services, "mode": "upsert"}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let results: Vec<Value> = (0..117)
        .map(|i| json!({"host": "edge", "service": format!("p{i:03}"), "state": "WARNING", "output": "warm"}))
        .collect();
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/results",
        json!({"results": results}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (status, first) = olga.page("/").await;
    assert_eq!(status, 200);
    assert!(
        first.contains("<title>(117) Problems · svc</title>"),
        "{first}"
    );
    assert!(
        first.contains("1–100 of 117") && first.contains("href=\"/?from=100\""),
        "{first}"
    );
    assert_eq!(first.matches("class=\"badge s-warn\"").count(), 100);
    let (_, second) = olga.page("/?from=100").await;
    assert!(
        second.contains("101–117 of 117") && second.contains("href=\"/\">Previous"),
        "{second}"
    );
    assert_eq!(second.matches("class=\"badge s-warn\"").count(), 17);
    assert!(!second.contains(">Next<"));
    let (status, past) = olga.page("/?from=5000").await;
    assert_eq!(status, 200, "past the end is an empty page, not an error");
    assert!(past.contains("No more problems past this point"), "{past}");

    critical(s, &a.token, "p001").await;
    critical(s, &a.token, "p004").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let api = get(s, &a.token, "/api/v1/services?state=critical").await;
    let names: Vec<&str> = api["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{api}");
    assert!(names.contains(&"p001") && names.contains(&"p004"));
    let api = get(
        s,
        &a.token,
        "/api/v1/services?state=WARNING,PENDING&limit=300",
    )
    .await;
    assert_eq!(
        api["items"].as_array().unwrap().len(),
        115 + 3,
        "the warm ones and the three without a result"
    );
    let api = get(s, &a.token, "/api/v1/objects?state=CRITICAL&limit=1").await;
    assert_eq!(api["items"].as_array().unwrap().len(), 1);
    let after = api["nextCursor"].as_str().expect("a second page");
    let api = get(
        s,
        &a.token,
        &format!("/api/v1/objects?state=CRITICAL&limit=1&cursor={after}"),
    )
    .await;
    assert_eq!(api["items"].as_array().unwrap().len(), 1, "{api}");
    let api = get(s, &a.token, "/api/v1/objects?state=SIDEWAYS").await;
    assert_eq!(api["items"], json!([]), "an unknown state matches nothing");

    let (_, page) = olga
        .page("/objects?state=CRITICAL%2CDOWN&folder=north")
        .await;
    assert!(page.contains(">edge / p001<"), "{page}");
    assert!(
        !page.contains(">edge / p004<"),
        "p004 is in the south folder"
    );
    assert!(!page.contains(">edge / p000<"), "p000 is only warm");
    assert!(
        page.contains(r#"<option value="CRITICAL,DOWN" selected>"#),
        "the form shows the filter: {page}"
    );
    let (_, page) = olga.page("/alerts?severity=critical").await;
    for alert in &alerts {
        assert!(page.contains(alert["id"].as_str().unwrap()), "{page}");
    }
    assert!(
        page.contains(r#"href="/alerts?status=acked&amp;severity=critical""#),
        "the tabs keep the filter: {page}"
    );
    let (_, page) = olga.page("/alerts?severity=info").await;
    assert!(page.contains("No alerts here."), "{page}");
    let object = alerts[0]["objectId"].as_str().unwrap();
    let (_, page) = olga.page(&format!("/objects/{object}")).await;
    assert!(
        page.contains(&format!(
            r#"href="/alerts?status=open&amp;objectId={object}""#
        )),
        "the object page links its alerts: {page}"
    );
    let (_, page) = olga
        .page(&format!("/alerts?objectId={object}&severity=critical"))
        .await;
    assert!(page.contains(alerts[0]["id"].as_str().unwrap()));
    assert!(!page.contains(alerts[1]["id"].as_str().unwrap()), "{page}");
    let (status, page) = olga.page("/alerts?severity=loud").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("No alerts here."),
        "an unknown severity matches nothing"
    );
}

/// The noise controls without JavaScript (issue 69): two alerts within a minute flood the
/// tenant, and every page says so with a link to the first-out, which its row marks; an
/// operator shelves an alert for a time from its page (the page says by whom and why, and
/// offers to unshelve), then until it clears (the form's duration is left out), then
/// unshelves it; a viewer may not shelve.
#[tokio::test]
async fn the_flood_banner_first_out_and_shelving_work_from_plain_pages() {
    let dir = tempfile::tempdir().unwrap();
    let a = Admin::start_with(Opts {
        args: config_args(
            dir.path(),
            "alerting:\n  flood: {enterAt: {alerts: 2, within: 1m}, leaveAt: {alerts: 1, within: 1h}}\n",
        ),
        ..Opts::default()
    });
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let first = alerts
        .iter()
        .find(|a| a["firstOut"] == true)
        .expect("a first-out");
    let id = first["id"].as_str().unwrap();
    let (_, other) = second_tenant(s, &a.token, "elsewhere").await;
    let theirs = get(s, &other, "/api/v1/floods").await;
    assert!(theirs["items"].as_array().unwrap().is_empty(), "{theirs}");
    let ours = get(s, &a.token, "/api/v1/floods").await;
    assert_eq!(ours["items"][0]["firstOut"], id, "{ours}");
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    for path in ["/", "/alerts", "/incidents"] {
        let (status, page) = olga.page(path).await;
        assert_eq!(status, 200, "{path}");
        assert!(page.contains("Alarm flood"), "{path}: {page}");
        assert!(page.contains(&format!("href=\"/alerts/{id}\"")), "{path}");
    }
    let (_, list) = olga.page("/alerts").await;
    assert_eq!(list.matches("first out").count(), 1, "{list}");

    let here = format!("/alerts/{id}");
    let (_, page) = olga.page(&here).await;
    assert!(page.contains("First out"), "{page}");
    assert!(
        page.contains(&format!("action=\"{here}/shelve\"")),
        "{page}"
    );
    let (status, location, _) = olga
        .post(
            &format!("{here}/shelve"),
            &format!("mode=timed&duration=1h&reason=pump+swap&back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(
        (status, location.as_deref()),
        (303, Some(format!("{here}?did=shelve").as_str()))
    );
    let (_, page) = olga.page(&here).await;
    assert!(page.contains("Shelved"), "{page}");
    assert!(page.contains("pump swap"), "{page}");
    assert!(
        page.contains(&format!("action=\"{here}/unshelve\"")),
        "{page}"
    );
    let (status, _, _) = olga
        .post(
            &format!("{here}/shelve"),
            &format!("mode=oneShot&duration=1h&reason=until+fixed&back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "a one-shot shelf from the form");
    let shelved = get(s, &a.token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(shelved["shelved"]["mode"], "oneShot", "{shelved}");
    assert!(shelved["shelved"].get("until").is_none(), "{shelved}");
    let (status, _, _) = olga
        .post(
            &format!("{here}/unshelve"),
            &format!("back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let back = get(s, &a.token, &format!("/api/v1/alerts/{id}")).await;
    assert!(back.get("shelved").is_none(), "{back}");

    // The ack options of issue 70 from the plain form: it lasts an hour and is not sticky.
    let (_, page) = olga.page(&here).await;
    assert!(page.contains("name=\"expires_in\""), "{page}");
    assert!(page.contains("name=\"loose\""), "{page}");
    let (status, _, _) = olga
        .post(
            &format!("{here}/ack"),
            &format!("comment=on+it&expires_in=1h&loose=1&back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let acked = get(s, &a.token, &format!("/api/v1/alerts/{id}")).await;
    assert_eq!(acked["status"], "acked", "{acked}");
    assert_eq!(acked["ack"]["sticky"], false, "{acked}");
    assert_eq!(acked["ack"]["via"], "ui", "acknowledged in the UI");
    assert!(acked["ack"]["expiresAt"].is_string(), "{acked}");
    let (_, page) = olga.page(&here).await;
    assert!(page.contains("cleared by the next change"), "{page}");
    let (status, _, _) = olga
        .post(
            &format!("{here}/ack"),
            &format!("expires_in=soon&back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "a duration that is none");

    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (_, page) = vera.page(&here).await;
    assert!(!page.contains("/shelve\""), "a viewer gets no shelve form");
    let (status, _, _) = vera
        .post(
            &format!("{here}/shelve"),
            &format!("mode=timed&duration=1h&reason=no&back={here}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 403);
}

/// Times in the viewer's zone (issue 70): eve reads absolute times in Europe/Berlin, set on
/// her account (an unknown zone is refused with the reason); the on-call page says which shift
/// notices she gets and links each schedule's calendar, which lists who is on call day by day
/// in her zone; a downtime planned from the form recurs every Saturday night on Berlin's
/// clock, and the list shows its next windows.
#[tokio::test]
async fn a_schedule_calendar_and_recurring_downtimes_read_in_the_viewers_zone() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let eve = user_id(&a, "eve@example.org", "editor").await;
    create_all(s, &a.token, vec![
        ("/api/v1/contacts", json!({"name": "ada"})),
        ("/api/v1/contacts", json!({"name": "eve", "email": "eve@example.org", "userId": eve,
            "handoffNotices": {"advance": ["24h", "15m"], "offCall": true}})),
        (
            "/api/v1/schedules",
            json!({"name": "primary", "timeZone": "UTC", "layers": [{"unit": "daily", "anchor": "2026-01-05T00:00:00Z", "participants": ["ada", "eve"]}]}),
        ),
    ])
    .await;
    let eve_browser = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    let (status, _, page) = eve_browser
        .post(
            "/account/preferences",
            "theme=&live=on&timeZone=Mars%2FOlympus",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    assert!(page.contains("unknown time zone"), "{page}");
    let (status, _, _) = eve_browser
        .post(
            "/account/preferences",
            "theme=&live=on&timeZone=Europe%2FBerlin",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (_, account) = eve_browser.page("/account").await;
    assert!(account.contains("value=\"Europe/Berlin\""), "{account}");
    // Times on a page read in that zone without hover: the distance and the wall clock.
    critical(s, &a.token, "disk").await;
    let started = Instant::now();
    let (problems, changed) = loop {
        let (_, page) = eve_browser.page("/").await;
        let found = get(s, &a.token, "/api/v1/problems").await;
        let changed = found["items"][0]["state"]["lastChange"]
            .as_str()
            .map(str::to_string);
        if let Some(changed) = changed.filter(|_| page.contains("edge / disk")) {
            break (page, changed);
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let berlin = changed
        .parse::<jiff::Timestamp>()
        .unwrap()
        .in_tz("Europe/Berlin")
        .unwrap();
    assert!(
        problems.contains(&format!(" ago · {}</time>", berlin.strftime("%H:%M")))
            && (problems.contains(" CET\">") || problems.contains(" CEST\">")),
        "{problems}"
    );

    let (_, oncall) = eve_browser.page("/oncall").await;
    assert!(
        oncall.contains("Shift notices: 24h0m0s ahead, 15m0s ahead, when you go off call"),
        "{oncall}"
    );
    assert!(oncall.contains("href=\"/oncall/primary/calendar\""));
    let (status, calendar) = eve_browser.page("/oncall/primary/calendar").await;
    assert_eq!(status, 200);
    assert!(calendar.contains("Times in Europe/Berlin"), "{calendar}");
    // Daily shifts of ada and eve from midnight UTC: 01:00 or 02:00 in Berlin.
    assert!(
        calendar.contains("<strong>ada</strong>") && calendar.contains("<strong>eve</strong>"),
        "{calendar}"
    );
    assert!(
        calendar.contains(" 01:00 CET") || calendar.contains(" 02:00 CEST"),
        "{calendar}"
    );
    assert_eq!(calendar.matches("<th scope=\"row\">").count(), 14);
    let (status, _) = eve_browser.page("/oncall/nothing/calendar").await;
    assert_eq!(status, 404);

    let (status, to, body) = eve_browser
        .post(
            "/downtimes",
            "selector=site%3Dnorth&duration=2160h&weekdays=saturday&times=22%3A00-24%3A00&comment=weekly+backup",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{to:?} {body}");
    let listed = get(s, &a.token, "/api/v1/downtimes").await;
    assert_eq!(
        listed["items"][0]["timeIntervals"],
        json!([{"times": [{"startTime": "22:00", "endTime": "24:00"}],
            "weekdays": ["saturday"], "location": "Europe/Berlin"}])
    );
    let (_, page) = eve_browser.page("/downtimes").await;
    assert!(
        page.contains("recurs saturday 22:00-24:00 (Europe/Berlin)"),
        "{page}"
    );
    assert!(
        page.contains(" 22:00 CET – Sun ") || page.contains(" 22:00 CEST – Sun "),
        "{page}"
    );
    let (status, _, page) = eve_browser
        .post(
            "/downtimes",
            "selector=site%3Dnorth&duration=2h&weekdays=someday&comment=x",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    assert!(
        page.contains("value=\"someday\""),
        "the form again as typed: {page}"
    );
    // Days of the month, and (to whom may change what sites run) the sites it is shipped to.
    let (_, form) = eve_browser.page("/downtimes/new").await;
    assert!(
        ["daysOfMonth", "months", "sites"]
            .iter()
            .all(|f| form.contains(&format!("name=\"{f}\""))),
        "{form}"
    );
    let (status, _, page) = eve_browser
        .post(
            "/downtimes",
            "selector=site%3Dnorth&duration=2h&sites=nowhere&comment=x",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    assert!(page.contains("value=\"nowhere\""), "{page}");
    let (status, to, body) = eve_browser
        .post(
            "/downtimes",
            "selector=site%3Dnorth&duration=2160h&daysOfMonth=1%2C+-1&months=January%3Ajune&times=02%3A00-04%3A00&comment=monthly+patching",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{to:?} {body}");
    let listed = get(s, &a.token, "/api/v1/downtimes").await;
    let monthly = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["comment"] == "monthly patching")
        .unwrap();
    let interval = &monthly["timeIntervals"][0];
    assert_eq!(interval["daysOfMonth"], json!(["1", "-1"]), "{monthly}");
    assert_eq!(interval["months"], json!(["january:june"]), "{monthly}");
    let (_, page) = eve_browser.page("/downtimes").await;
    assert!(
        page.contains("recurs days 1, -1 in january:june 02:00-04:00"),
        "{page}"
    );
}

/// Issue 71, item 2: the Alerts and Objects pages sort and group as the problems page does
/// (by host, site, severity), the order and groups in the URL, paged by offset; an order it
/// does not know is 422.
#[tokio::test]
async fn the_alerts_and_objects_pages_sort_and_group() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    create_all(
        s,
        &a.token,
        vec![(
            "/api/v1/hosts",
            json!({"name": "pump", "labels": {"site": "south"}, "spec": {}}),
        )],
    )
    .await;
    for (title, severity, labels) in [
        (
            "b door opened",
            "info",
            json!({"site": "south", "host": "pump"}),
        ),
        (
            "a pressure low",
            "warning",
            json!({"site": "south", "host": "pump"}),
        ),
        (
            "c valve stuck",
            "critical",
            json!({"site": "north", "host": "edge"}),
        ),
    ] {
        let res = send(
            s,
            &a.token,
            Method::POST,
            "/api/v1/alerts",
            json!({"title": title, "severity": severity, "labels": labels}),
        )
        .await;
        assert_eq!(res.status(), 201);
    }
    critical(s, &a.token, "disk").await;
    result(s, &a.token, "load", "WARNING").await;
    result(s, &a.token, "swap", "OK").await;
    open_alerts(s, &a.token, 4).await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let at = |page: &str, names: &[&str]| -> Vec<usize> {
        names
            .iter()
            .map(|n| page.find(n).unwrap_or_else(|| panic!("{n} in {page}")))
            .collect()
    };

    let (status, worst) = olga.page("/alerts?sort=severity").await;
    assert_eq!(status, 200);
    let order = at(
        &worst,
        &["c valve stuck", "a pressure low", "b door opened"],
    );
    assert!(order.is_sorted(), "worst first: {order:?}");
    assert!(
        worst.contains("<option value=\"severity\" selected>worst first</option>"),
        "{worst}"
    );
    let (_, named) = olga.page("/alerts?sort=name").await;
    let order = at(
        &named,
        &["a pressure low", "b door opened", "c valve stuck"],
    );
    assert!(order.is_sorted(), "by title: {order:?}");
    let (_, by_site) = olga.page("/alerts?group=site&sort=name").await;
    let order = at(
        &by_site,
        &[
            "<h2>south",
            "a pressure low",
            "b door opened",
            "<h2>north",
            "c valve stuck",
        ],
    );
    assert!(order.is_sorted(), "south's first title leads: {order:?}");
    assert!(
        by_site.contains("<h2>south <small class=\"muted\">(2)</small></h2>"),
        "{by_site}"
    );
    let (_, by_host) = olga.page("/alerts?group=host&q=pressure").await;
    assert!(
        by_host.contains("<h2>pump <small class=\"muted\">(1)</small></h2>")
            && !by_host.contains("valve"),
        "grouped after the search: {by_host}"
    );
    // The order stays in the tabs' and the saved filter's addresses.
    assert!(by_site.contains("group=site"), "{by_site}");
    let (status, bad) = olga.page("/alerts?group=colour").await;
    assert_eq!(status, 422);
    assert!(bad.contains("group"), "{bad}");

    let (status, objects) = olga.page("/objects?sort=severity").await;
    assert_eq!(status, 200);
    let order = at(&objects, &["edge / disk", "edge / load", "edge / swap"]);
    assert!(order.is_sorted(), "worst state first: {order:?}");
    let (_, by_state) = olga.page("/objects?group=severity&sort=name").await;
    assert!(
        by_state.contains("<h2>PENDING <small class=\"muted\">(2)</small></h2>")
            && by_state.contains("<h2>CRITICAL <small class=\"muted\">(1)</small></h2>")
            && by_state.contains("<h2>OK <small class=\"muted\">(1)</small></h2>"),
        "{by_state}"
    );
    // A service is grouped by its host's site: effective labels, not only its own.
    let (_, by_site) = olga.page("/objects?group=site&sort=name").await;
    assert!(
        by_site.contains("<h2>north <small class=\"muted\">(4)</small></h2>")
            && by_site.contains("<h2>south <small class=\"muted\">(1)</small></h2>"),
        "edge and its three services, and pump: {by_site}"
    );
    let (status, _) = olga.page("/objects?sort=sideways").await;
    assert_eq!(status, 422);

    // Sorted lists page by offset.
    for i in 0..120 {
        create_all(
            s,
            &a.token,
            vec![(
                "/api/v1/hosts",
                json!({"name": format!("node-{i:03}"), "spec": {}}),
            )],
        )
        .await;
    }
    let (_, first) = olga.page("/objects?sort=name").await;
    assert!(first.contains("1–100 of 125"), "{first}");
    assert!(
        first.contains("href=\"/objects?sort=name&amp;from=100\""),
        "{first}"
    );
    let (_, second) = olga.page("/objects?sort=name&from=100").await;
    assert!(
        second.contains("101–125 of 125")
            && second.contains("pump")
            && !second.contains("node-000"),
        "{second}"
    );
}

/// Issue 71, items 1, 2 and 8: the problems page is one inbox. An alert from an event (a
/// SCADA webhook) stands with the object problems and is counted in the title; the list is
/// searched, filtered, sorted and grouped by its URL; open alerts are acknowledged or
/// shelved together (select all without a script); a live refresh naming the page's
/// version is answered 304 until something changes.
#[tokio::test]
async fn the_problems_page_is_one_inbox_narrowed_and_acted_on_together() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    create_all(
        s,
        &a.token,
        vec![
            ("/api/v1/event-sources", json!({"name": "scada", "type": "webhook", "authMode": "none", "labels": {"site": "south"}})),
            ("/api/v1/alert-rules", json!({"name": "scada", "match": "event.type == 'ingress' && event.source == 'scada'",
                "severity": "critical", "title": "{{ .event.summary }}", "dedupKey": "{{ .event.dedupKey }}"})),
        ],
    )
    .await;
    critical(s, &a.token, "disk").await;
    result(s, &a.token, "load", "WARNING").await;
    let res = s
        .http
        .post(s.url("/api/v1/ingest/scada"))
        .json(&json!({"summary": "pump station 3 <pressure>", "severity": "critical", "dedupKey": "ps3"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let alerts = open_alerts(s, &a.token, 2).await;
    let pump = alerts
        .iter()
        .find(|x| x["objectId"].is_null())
        .expect("the pump station's alert has no object")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;

    let (status, home) = olga.page("/").await;
    assert_eq!(status, 200);
    assert!(
        home.contains("<title>(3) Problems · svc</title>"),
        "two objects and the event's alert: {home}"
    );
    assert!(
        home.contains("pump station 3 &lt;pressure&gt;") && home.contains("from scada"),
        "{home}"
    );
    assert!(
        home.contains(&format!("value=\"{pump}\" form=\"bulk\"")),
        "{home}"
    );
    let order: Vec<usize> = ["edge / disk", "pump station 3", "edge / load"]
        .iter()
        .map(|n| home.find(n).unwrap_or_else(|| panic!("{n} in {home}")))
        .collect();
    assert!(
        order[0] < order[2] && order[1] < order[2],
        "worst first: {order:?}"
    );

    // Narrowing lives in the URL.
    let (_, found) = olga.page("/?q=pressure").await;
    assert!(
        found.contains("pump station 3") && !found.contains("edge / disk"),
        "{found}"
    );
    let (_, warn) = olga.page("/?severity=warning").await;
    assert!(
        warn.contains("edge / load") && !warn.contains("edge / disk"),
        "{warn}"
    );
    let (_, south) = olga.page("/?selector=site%3Dsouth").await;
    assert!(
        south.contains("pump station 3") && !south.contains("edge / load"),
        "{south}"
    );
    let (_, named) = olga.page("/?sort=name&age=%3C1h").await;
    let (disk, pump_at) = (
        named.find("edge / disk").unwrap(),
        named.find("pump station").unwrap(),
    );
    assert!(
        disk < pump_at && named.find("edge / load").unwrap() < pump_at,
        "{named}"
    );
    let (_, grouped) = olga.page("/?group=site").await;
    assert!(
        grouped.contains("<h2>north <small class=\"muted\">(2)</small></h2>")
            && grouped.contains("<h2>south <small class=\"muted\">(1)</small></h2>"),
        "{grouped}"
    );
    let (status, bad) = olga.page("/?sort=sideways").await;
    assert_eq!(status, 422);
    assert!(bad.contains("sort"), "{bad}");
    let (status, _) = olga.page("/?selector=site%3D%3D%3D").await;
    assert_eq!(status, 422);

    // Select all, without a script: every open alert's box ticked, and the problem's that has
    // none (for a downtime).
    let (_, all) = olga.page("/?select=all").await;
    assert_eq!(all.matches("form=\"bulk\" checked").count(), 3, "{all}");
    assert_eq!(
        all.matches("type=\"checkbox\" name=\"id\"").count(),
        2,
        "{all}"
    );
    let ids: Vec<String> = get(s, &a.token, "/api/v1/alerts?status=open").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    let shelve = format!("id={}&id=not-an-alert-gone&duration=4h&back=%2F", ids[0]);
    let (status, _, _) = olga.post("/alerts/shelve", &shelve, "same-origin").await;
    assert_eq!(status, 404, "an id that is no alert's is refused");
    let shelve = format!("id={}&duration=4h&back=%2F", ids[0]);
    let (status, to, _) = olga.post("/alerts/shelve", &shelve, "same-origin").await;
    assert_eq!((status, to.as_deref()), (303, Some("/?did=shelve-some")));
    let alert = get(s, &a.token, &format!("/api/v1/alerts/{}", ids[0])).await;
    assert_eq!(alert["shelved"]["mode"], "timed", "{alert}");
    let (_, home) = olga.page("/").await;
    assert!(
        home.contains("<title>(2) Problems · svc</title>"),
        "shelved is handled: {home}"
    );
    let ack = format!("id={}&id={}&back=%2F", ids[1], ids[0]);
    let (status, _, _) = olga.post("/alerts/ack", &ack, "same-origin").await;
    assert_eq!(status, 303);
    let (_, home) = olga.page("/").await;
    assert!(home.contains("<title>(1) Problems · svc</title>"), "{home}");
    let (_, handled) = olga.page("/?handled=1").await;
    assert_eq!(handled.matches("<li data-key=").count(), 3, "{handled}");

    // A live refresh names the version it shows: 304 until something changes.
    let version = |page: &str| {
        let at = page.find("data-version=\"").unwrap() + "data-version=\"".len();
        page[at..at + page[at..].find('"').unwrap()].to_string()
    };
    let live = |v: String| {
        s.http
            .get(s.url("/?handled=1"))
            .header("Cookie", &olga.cookie)
            .header("Accept", "text/html")
            .header("If-None-Match", format!("\"{v}\""))
            .send()
    };
    let v = version(&handled);
    let res = live(v.clone()).await.unwrap();
    assert_eq!(res.status(), 304);
    assert!(res.bytes().await.unwrap().is_empty());
    result(s, &a.token, "swap", "CRITICAL").await;
    let started = Instant::now();
    loop {
        let res = live(v.clone()).await.unwrap();
        if res.status() == 200 {
            assert_ne!(res.headers()["etag"].to_str().unwrap(), format!("\"{v}\""));
            assert!(res.text().await.unwrap().contains("edge / swap"));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the page never changed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 71, item 12: the favicon is served (linked by its hashed name, and at the
/// conventional address, to anyone); "Check now" is offered only where a check runs here,
/// and an object that takes passive results says so instead, also when one is asked for.
#[tokio::test]
async fn the_favicon_and_what_check_now_says_where_nothing_runs() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    create_all(
        s,
        &a.token,
        vec![(
            "/api/v1/services",
            json!({"name": "ping", "host": "edge", "spec": {"checkCommand": "hostalive"}}),
        )],
    )
    .await;
    let res = s.http.get(s.url("/favicon.ico")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/svg+xml");
    assert!(res.text().await.unwrap().starts_with("<svg"));
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (_, home) = olga.page("/").await;
    assert!(
        home.contains("<link rel=\"icon\" type=\"image/svg+xml\" href=\"/assets/favicon."),
        "{home}"
    );
    let services = get(s, &a.token, "/api/v1/services").await;
    let id_of = |name: &str| {
        services["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (disk, ping) = (id_of("disk"), id_of("ping"));
    let (_, passive) = olga.page(&format!("/objects/{disk}")).await;
    assert!(
        passive.contains("No check runs here: it takes passive results only.")
            && !passive.contains("/check-now\""),
        "{passive}"
    );
    let (_, active) = olga.page(&format!("/objects/{ping}")).await;
    assert!(
        active.contains(&format!("/objects/{ping}/check-now\"")),
        "{active}"
    );
    let back = format!("back=%2Fobjects%2F{disk}");
    let (status, to, _) = olga
        .post(&format!("/objects/{disk}/check-now"), &back, "same-origin")
        .await;
    assert_eq!(status, 303);
    let (_, page) = olga.page(&to.unwrap()).await;
    assert!(
        page.contains("Nothing runs: this object takes passive results only."),
        "{page}"
    );
}

#[tokio::test]
async fn an_objects_graphs_show_the_current_value_thresholds_and_any_range() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    // Three results within one bucket of the day's graph: the bucket's mean is 52.5, the disk
    // is at 97.2 now.
    for used in ["10", "50.3", "97.2"] {
        let res = send(
            s,
            &a.token,
            Method::POST,
            "/api/v1/results",
            json!({"results": [{"host": "edge", "service": "disk", "state": "CRITICAL", "output": format!("DISK CRITICAL | used={used}%;90;95;0;100")}]}),
        )
        .await;
        assert_eq!(res.status(), 202);
    }
    let services = get(s, &a.token, "/api/v1/services?q=disk").await;
    let disk = services["items"][0]["id"].as_str().unwrap().to_string();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let started = Instant::now();
    let page = loop {
        let (status, page) = olga.page(&format!("/objects/{disk}")).await;
        assert_eq!(status, 200);
        if page.contains("97.2 % now") && page.contains("<figure") {
            break page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the graph never showed the last value: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        page.contains("warning at 90, critical at 95")
            && page.contains("<line class=\"warn\"")
            && page.contains("<line class=\"crit\"")
            && page.contains("<rect ")
            && page.contains("<title>")
            && !page.contains("52.8111"),
        "the thresholds and the samples' values: {page}"
    );
    assert!(
        page.contains(r#"aria-current="page">24h</a>"#)
            && page.contains(&format!("href=\"/objects/{disk}?range=7d\""))
            && page.contains(&format!("href=\"/objects/{disk}?range=24h&amp;end=")),
        "the ranges and a step earlier: {page}"
    );
    assert!(!page.contains("later →"), "nothing is later than now");
    let (status, week) = olga.page(&format!("/objects/{disk}?range=7d")).await;
    assert_eq!(status, 200);
    assert!(
        week.contains(r#"aria-current="page">7d</a>"#) && week.contains("97.2 % now"),
        "{week}"
    );
    // A window long before the first result has no samples, and can step later again.
    let (status, before) = olga
        .page(&format!(
            "/objects/{disk}?range=1h&end=2026-01-01T00:00:00Z"
        ))
        .await;
    assert_eq!(status, 200);
    assert!(
        before.contains("later →")
            && !before.contains("<figure")
            && before.contains("used: no samples from"),
        "nothing was recorded then: {before}"
    );
    let (status, _) = olga.page(&format!("/objects/{disk}?range=2d")).await;
    assert_eq!(status, 422);
    let (status, _) = olga.page(&format!("/objects/{disk}?end=yesterday")).await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn an_alerts_page_and_the_events_page_tell_the_paging_trail() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let hooks = crate::receiver::Receiver::start().await;
    create_all(s, &a.token, crate::notify::paging_ada(&hooks)).await;
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/alerts",
        json!({"title": "pump station 4 pressure low", "severity": "critical", "escalationPolicy": "page"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let alert: Value = res.json().await.unwrap();
    let id = alert["id"].as_str().unwrap();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let started = Instant::now();
    let page = loop {
        let (_, page) = olga.page(&format!("/alerts/{id}")).await;
        if page.contains("sent to ada over hook (step 0)") {
            break page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the page never said ada was paged: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        page.contains("step 0: paged ada over hook (page)")
            && page.contains("queued to ada over hook (step 0)")
            && page.contains("opened: pump station 4 pressure low through the API"),
        "who was paged, over what, what became of it: {page}"
    );
    let back = format!("back=%2Falerts%2F{id}&comment=on+my+way");
    let (status, _, _) = olga
        .post(&format!("/alerts/{id}/ack"), &back, "same-origin")
        .await;
    assert_eq!(status, 303);
    let (_, page) = olga.page(&format!("/alerts/{id}")).await;
    assert!(
        page.contains("acknowledged by operator &lt;b&gt;user&lt;/b&gt; in the UI: on my way"),
        "who acknowledged and how: {page}"
    );
    // The events page: the same lines, narrowed by type, words, severity and time.
    let (_, sent) = olga.page("/events?types=notification&q=ada+sent").await;
    assert!(
        sent.contains("sent to ada over hook") && !sent.contains("queued to ada"),
        "{sent}"
    );
    let (_, none) = olga.page("/events?q=nothing+like+this").await;
    assert!(none.contains("No events."), "{none}");
    let (_, critical) = olga.page("/events?severity=critical").await;
    assert!(
        critical.contains("opened: pump station 4 pressure low")
            && !critical.contains("sent to ada"),
        "{critical}"
    );
    let (_, later) = olga.page("/events?from=2999-01-01T00%3A00").await;
    assert!(later.contains("No events."), "{later}");
    let (_, earlier) = olga.page("/events?to=2000-01-01T00%3A00").await;
    assert!(earlier.contains("No events."), "{earlier}");
    let (_, all) = olga.page("/events?from=2000-01-01T00%3A00").await;
    assert!(all.contains("sent to ada"), "{all}");
    for bad in [
        "/events?types=nonsense",
        "/events?severity=loud",
        "/events?objectId=x",
        "/events?from=yesterday",
    ] {
        assert_eq!(olga.page(bad).await.0, 422, "{bad}");
    }
}

#[tokio::test]
async fn comments_on_alerts_objects_and_incidents_and_acting_from_the_object_page() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    let alert = open_alerts(s, &a.token, 1).await.remove(0);
    let (alert_id, disk) = (
        alert["id"].as_str().unwrap().to_string(),
        alert["objectId"].as_str().unwrap().to_string(),
    );
    // The API: a comment acts on nothing, lists newest first, keeps its subject's tenant
    // and permissions, and refuses what is empty or too long.
    let (viewer, _) = mint(s, &a.token, json!({"name": "v", "roles": ["viewer"]})).await;
    let (operator, _) = mint(s, &a.token, json!({"name": "op", "roles": ["operator"]})).await;
    let path = format!("/api/v1/alerts/{alert_id}/comments");
    for text in ["valve 3 replaced", "watching the pressure"] {
        let res = send(s, &operator, Method::POST, &path, json!({"text": text})).await;
        assert_eq!(res.status(), 201);
        let c: Value = res.json().await.unwrap();
        assert_eq!(c["text"], text);
        assert_eq!(c["by"], "op");
        assert_eq!(c["alertId"], alert_id.as_str());
    }
    let listed = get(s, &viewer, &path).await;
    let texts: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["watching the pressure", "valve 3 replaced"]);
    let still = get(s, &a.token, &format!("/api/v1/alerts/{alert_id}")).await;
    assert_eq!(still["status"], "open", "a comment acknowledges nothing");
    let res = send(s, &viewer, Method::POST, &path, json!({"text": "x"})).await;
    assert_eq!(res.status(), 403);
    for (body, code) in [
        (json!({"text": "  "}), "svc:validation/text"),
        (json!({"text": "x".repeat(4001)}), "svc:validation/text"),
    ] {
        let res = send(s, &operator, Method::POST, &path, body).await;
        assert_eq!(res.status(), 422);
        let p: Value = res.json().await.unwrap();
        assert_eq!(p["code"], code, "{p}");
    }
    let res = send(
        s,
        &operator,
        Method::POST,
        "/api/v1/alerts/01a244ec-1fc9-74e1-89a8-e2302540f4e1/comments",
        json!({"text": "x"}),
    )
    .await;
    assert_eq!(res.status(), 404);
    let (_, other) = second_tenant(s, &a.token, "elsewhere").await;
    let res = send(s, &other, Method::POST, &path, json!({"text": "x"})).await;
    assert_eq!(res.status(), 404, "another tenant's alert is not there");
    let audit = get(s, &a.token, "/api/v1/audit?action=alert.comment").await;
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "alert.comment"),
        "{audit}"
    );
    let res = send(
        s,
        &operator,
        Method::POST,
        "/api/v1/incidents",
        json!({"title": "north pumps", "alertIds": [alert_id]}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let incident: Value = res.json().await.unwrap();
    let incident_id = incident["id"].as_str().unwrap();
    let res = send(
        s,
        &operator,
        Method::POST,
        &format!("/api/v1/incidents/{incident_id}/comments"),
        json!({"text": "crew on the way"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let detail = get(s, &a.token, &format!("/api/v1/incidents/{incident_id}")).await;
    assert!(
        detail["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "comment" && e["payload"]["text"] == "crew on the way"),
        "{detail}"
    );

    // The UI: a comment from the object's page; the alert acknowledged from there too.
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let here = format!("/objects/{disk}");
    let (_, page) = olga.page(&here).await;
    assert!(
        page.contains("<h2>Its alerts</h2>")
            && page.contains(&format!("action=\"/alerts/{alert_id}/ack\""))
            && page.contains(&format!("action=\"{here}/comment\"")),
        "{page}"
    );
    let back = format!("%2Fobjects%2F{disk}");
    let (status, to, _) = olga
        .post(
            &format!("{here}/comment"),
            &format!("text=disk+swapped+at+noon&back={back}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (_, page) = olga.page(&to.unwrap()).await;
    assert!(
        page.contains("Comment added.")
            && page.contains("by operator &lt;b&gt;user&lt;/b&gt;: disk swapped at noon")
            && page.contains("by op: watching the pressure"),
        "the object's comment, and its alert's: {page}"
    );
    let (status, _, refused) = olga
        .post(
            &format!("{here}/comment"),
            &format!("text=&back={back}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    let (status, _, _) = olga
        .post(
            &format!("/alerts/{alert_id}/ack"),
            &format!("comment=from+the+object&back={back}"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let acked = get(s, &a.token, &format!("/api/v1/alerts/{alert_id}")).await;
    assert_eq!(acked["status"], "acked");
    let (_, alert_page) = olga.page(&format!("/alerts/{alert_id}")).await;
    assert!(
        alert_page.contains("by op: valve 3 replaced")
            && alert_page.contains(&format!("action=\"/alerts/{alert_id}/comment\"")),
        "{alert_page}"
    );
    let (_, incident_page) = olga.page(&format!("/incidents/{incident_id}")).await;
    assert!(
        incident_page.contains("by op: crew on the way"),
        "{incident_page}"
    );
    // A viewer reads them and is offered no form.
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (_, page) = vera.page(&here).await;
    assert!(
        page.contains("disk swapped at noon") && !page.contains("/comment\""),
        "{page}"
    );
}

#[tokio::test]
async fn an_alerts_page_tells_its_story() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    create_all(
        s,
        &a.token,
        vec![
            (
                "/api/v1/services",
                json!({"name": "pump", "host": "edge", "spec": {"runbook": "https://wiki.example.org/runbooks/pump?id=1&x=2"}}),
            ),
            (
                "/api/v1/services",
                json!({"name": "valve", "host": "edge", "spec": {"runbook": "javascript:alert(1)"}}),
            ),
        ],
    )
    .await;
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge", "service": "pump", "state": "CRITICAL", "output": "pressure 0.4 bar <low> | pressure=0.4bar;1;0.5"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    critical(s, &a.token, "valve").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let id_of = |title: &str| {
        alerts
            .iter()
            .find(|x| x["title"].as_str().unwrap().starts_with(title))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (pump, valve) = (id_of("pump"), id_of("valve"));
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/incidents",
        json!({"title": "north station <pumps>", "alertIds": [pump, valve]}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (_, page) = olga.page(&format!("/alerts/{pump}")).await;
    assert!(
        page.contains(r#"<a href="https://wiki.example.org/runbooks/pump?id=1&amp;x=2" rel="noopener noreferrer">"#),
        "the runbook as a link: {page}"
    );
    assert!(
        page.contains(
            "<code>event.type == 'state_change' &amp;&amp; event.state == 'CRITICAL'</code>"
        ),
        "the rule's expression: {page}"
    );
    assert!(
        page.contains("<h2>Its object now</h2>")
            && page.contains("pressure 0.4 bar &lt;low&gt;")
            && page.contains("pressure=0.4bar;1;0.5")
            && page.contains(">edge / pump</a> <span class=\"badge s-crit\">"),
        "the object's output, performance data and state: {page}"
    );
    assert!(
        page.contains(">north station &lt;pumps&gt;</a> (open)"),
        "the incident by its title: {page}"
    );
    assert!(
        page.contains("<h2>Related alerts</h2>")
            && page.contains(&format!("href=\"/alerts/{valve}\""))
            && page.contains(" · same incident"),
        "the other alert of its incident: {page}"
    );
    // The alerts list searches titles and labels.
    let (_, found) = olga.page("/alerts?status=open&q=PUMP").await;
    assert!(
        found.contains(&format!("href=\"/alerts/{pump}\""))
            && !found.contains(&format!("href=\"/alerts/{valve}\"")),
        "{found}"
    );
    let (_, both) = olga
        .page("/alerts?status=open&q=site%3Dnorth+critical")
        .await;
    assert!(
        both.contains(&format!("href=\"/alerts/{pump}\""))
            && both.contains(&format!("href=\"/alerts/{valve}\"")),
        "{both}"
    );
    let (_, page) = olga.page(&format!("/alerts/{valve}")).await;
    assert!(
        page.contains("<dd>javascript:alert(1)</dd>") && !page.contains("href=\"javascript:"),
        "a runbook that is no web address is only text: {page}"
    );
    // A viewer without objects:read is not told about the object or its runbook.
    let (limited, _) = mint(
        s,
        &a.token,
        json!({"name": "alerts only", "scopes": ["alerts:read"]}),
    )
    .await;
    let res = s
        .http
        .get(s.url(&format!("/alerts/{pump}")))
        .bearer_auth(&limited)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(
        text.contains("<h1>pump is CRITICAL</h1>")
            && !text.contains("wiki.example.org")
            && !text.contains("Its object now"),
        "{text}"
    );
}

#[tokio::test]
async fn a_phone_reaches_the_shift_from_a_bottom_bar_and_me_shows_what_is_mine() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let olga_id = user_id_of(&a, "olga@example.org").await;
    create_all(
        s,
        &a.token,
        vec![
            (
                "/api/v1/contacts",
                json!({"name": "olga", "email": "olga@example.org", "userId": olga_id}),
            ),
            (
                "/api/v1/schedules",
                json!({"name": "north <night>", "timeZone": "UTC", "layers": [{"unit": "daily", "anchor": "2026-01-05T00:00:00Z", "participants": ["olga"]}]}),
            ),
        ],
    )
    .await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let mine = alerts[0]["id"].as_str().unwrap();
    let (status, _, _) = olga
        .post(&format!("/alerts/{mine}/ack"), "back=%2Fme", "same-origin")
        .await;
    assert_eq!(status, 303);
    // Another's ack is not mine.
    let other = alerts[1]["id"].as_str().unwrap();
    let res = send(
        s,
        &a.token,
        Method::POST,
        &format!("/api/v1/alerts/{other}:ack"),
        json!({}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let (status, _, _) = olga
        .post(
            &format!("/alerts/{mine}/incident"),
            "incident=new",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (status, page) = olga.page("/me").await;
    assert_eq!(status, 200);
    let title_of = |id: &str| {
        alerts.iter().find(|x| x["id"] == id).unwrap()["title"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let section = |name: &str| {
        let start = page
            .find(&format!("<h2>{name}</h2>"))
            .unwrap_or_else(|| panic!("no {name}: {page}"));
        let rest = &page[start + 4..];
        rest[..rest.find("<h2>").unwrap_or(rest.len())].to_string()
    };
    let acked = section("Acknowledged by me");
    assert!(
        acked.contains(&title_of(mine)) && !acked.contains(&title_of(other)),
        "{acked}"
    );
    let shifts = section("My shifts, the next 7 days");
    assert!(
        shifts.contains("href=\"/oncall/north%20%3Cnight%3E/calendar\"")
            && shifts.contains("north &lt;night&gt;"),
        "{shifts}"
    );
    let incidents = section("Incidents I opened");
    assert!(incidents.contains(&title_of(mine)), "{incidents}");
    let everything = section("Everything");
    assert!(
        everything.contains("href=\"/events\"")
            && everything.contains("href=\"/account\"")
            && everything.contains("href=\"/auth/logout\"")
            && !everything.contains("href=\"/users\""),
        "every section olga may read, and no other: {everything}"
    );
    // Every page carries the bar; a viewer's lacks nothing it may read and names the page.
    assert!(
        page.contains(r#"<nav class="tabbar" aria-label="Shift"><a href="/">Problems</a><a href="/alerts">Alerts</a><a href="/oncall">On call</a><a href="/me" aria-current="page">Me</a></nav>"#),
        "{page}"
    );
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (_, page) = vera.page("/me").await;
    assert!(
        page.contains("<h2>Acknowledged by me</h2>") && page.contains("None."),
        "{page}"
    );
}

#[tokio::test]
async fn silences_planned_ahead_and_silences_and_downtimes_extended_from_their_lists() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (status, _, refused) = olga
        .post(
            "/silences",
            "selector=site%3Dnorth&textRegex=&start=2027-01-10T10%3A00&duration=2h&comment=pump+swap",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let silences = get(s, &a.token, "/api/v1/silences").await;
    let silence = silences["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["comment"] == "pump swap")
        .unwrap()
        .clone();
    assert_eq!(silence["startsAt"], "2027-01-10T10:00:00.000Z");
    assert_eq!(silence["expiresAt"], "2027-01-10T12:00:00.000Z");
    let id = silence["id"].as_str().unwrap();
    let (_, list) = olga.page("/silences").await;
    assert!(
        list.contains(&format!("action=\"/silences/{id}/extend\"")),
        "an upcoming silence can be extended: {list}"
    );
    let version = silence["version"].as_u64().unwrap();
    let (status, _, _) = olga
        .post(
            &format!("/silences/{id}/extend"),
            &format!("by=1h&version={version}&back=%2Fsilences"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let silences = get(s, &a.token, "/api/v1/silences").await;
    let extended = silences["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(
        extended["expiresAt"], "2027-01-10T13:00:00.000Z",
        "{extended}"
    );
    assert_eq!(extended["startsAt"], "2027-01-10T10:00:00.000Z");
    assert_eq!(extended["selector"], "site=north");
    // The page's version is stale now.
    let (status, _, _) = olga
        .post(
            &format!("/silences/{id}/extend"),
            &format!("by=1h&version={version}&back=%2Fsilences"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 409);
    let (status, _, _) = olga
        .post(
            &format!("/silences/{id}/extend"),
            "by=soon&version=2&back=%2Fsilences",
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);
    // Its edit form shows it on the wall clock, and saves it at the version shown.
    let (status, form) = olga.page(&format!("/silences/{id}/edit")).await;
    assert_eq!(status, 200);
    assert!(
        form.contains(r#"name="starts" required value="2027-01-10T10:00""#)
            && form.contains(r#"name="ends" required value="2027-01-10T13:00""#)
            && form.contains(r#"name="version" value="2""#),
        "{form}"
    );
    let edit = "selector=site%3Dnorth&textRegex=%5Epump&comment=pump+swap+and+valves&starts=2027-01-10T10%3A00&ends=2027-01-10T15%3A00";
    let (status, to, _) = olga
        .post(
            &format!("/silences/{id}"),
            &format!("{edit}&version=2"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/silences?did=silence-saved"));
    let silences = get(s, &a.token, "/api/v1/silences").await;
    let saved = silences["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(saved["comment"], "pump swap and valves");
    assert_eq!(saved["textRegex"], "^pump");
    assert_eq!(saved["expiresAt"], "2027-01-10T15:00:00.000Z");
    let (status, _, again) = olga
        .post(
            &format!("/silences/{id}"),
            &format!("{edit}&version=2"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 409, "a stale version: {again}");
    assert!(
        again.contains("name=\"comment\""),
        "the form again: {again}"
    );
    assert_eq!(
        olga.page("/silences/01a244ec-1fc9-74e1-89a8-e2302540f4e1/edit")
            .await
            .0,
        404
    );

    let services = get(s, &a.token, "/api/v1/services?q=disk").await;
    let disk = services["items"][0]["id"].as_str().unwrap();
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"objectId": disk, "type": "fixed", "start": "2026-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z", "comment": "disk swap"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let downtime: Value = res.json().await.unwrap();
    let id = downtime["id"].as_str().unwrap();
    let (status, _, _) = olga
        .post(
            &format!("/downtimes/{id}/extend"),
            &format!("by=24h&version={}&back=%2Fdowntimes", downtime["version"]),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    let extended = downtimes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(extended["end"], "2099-01-02T00:00:00.000Z", "{extended}");
    assert_eq!(extended["start"], "2026-01-01T00:00:00.000Z");
    assert_eq!(extended["objectId"], disk);
    let audit = get(s, &a.token, "/api/v1/audit?action=downtime.update").await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
    // Its edit form changes why and when, and keeps what it covers.
    let (status, form) = olga.page(&format!("/downtimes/{id}/edit")).await;
    assert_eq!(status, 200);
    assert!(
        form.contains(r#"name="ends" required value="2099-01-02T00:00""#),
        "{form}"
    );
    let (status, _, refused) = olga
        .post(
            &format!("/downtimes/{id}"),
            "comment=disk+swap%2C+both+bays&starts=2026-01-01T00%3A00&ends=2099-01-03T00%3A00&version=2",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    let saved = downtimes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(saved["comment"], "disk swap, both bays");
    assert_eq!(saved["end"], "2099-01-03T00:00:00.000Z");
    assert_eq!(saved["objectId"], disk);
    let (status, _, _) = olga
        .post(
            &format!("/downtimes/{id}"),
            "comment=x&starts=2026-01-01T00%3A00&ends=2099-01-03T00%3A00&version=2",
            "same-origin",
        )
        .await;
    assert_eq!(status, 409);
    // A flexible one: it waits within its time for the first problem, then lasts its length.
    let (status, _, refused) = olga
        .post(
            "/downtimes",
            &format!("objectId={disk}&start=&duration=8h&flexible=1h&comment=flexible+swap"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    let flexible = downtimes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["comment"] == "flexible swap")
        .unwrap()
        .clone();
    assert_eq!(flexible["type"], "flexible", "{flexible}");
    assert_eq!(flexible["duration"], 3600, "{flexible}");
    // A viewer is offered neither.
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (_, page) = vera.page("/downtimes").await;
    assert!(!page.contains("/extend\""), "{page}");
}

/// Issue 71, item 6: a downtime's edit form changes what it covers (its one object for a
/// selector, a host with or without its services), whether it is flexible, and its
/// recurrence, read in the zone its windows are in; windows one form cannot show (several,
/// from the API) are kept as they are.
#[tokio::test]
async fn a_downtimes_cover_and_recurrence_are_edited_in_the_browser() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let token = a.token.as_str();
    let read = |id: String| async move {
        let all = get(s, token, "/api/v1/downtimes").await;
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id.as_str())
            .unwrap()
            .clone()
    };
    let (status, _, _) = olga
        .post(
            "/account/preferences",
            "theme=&live=on&timeZone=Europe%2FBerlin",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (status, _, refused) = olga
        .post(
            "/downtimes",
            "selector=site%3Dnorth&start=2099-01-01T00%3A00&duration=720h&weekdays=saturday&times=22%3A00-24%3A00&comment=backups",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    let d = downtimes["items"][0].clone();
    let id = d["id"].as_str().unwrap();
    assert_eq!(d["timeIntervals"][0]["location"], "Europe/Berlin", "{d}");

    let (status, form) = olga.page(&format!("/downtimes/{id}/edit")).await;
    assert_eq!(status, 200);
    for field in [
        r#"name="selector" required value="site=north""#,
        r#"name="weekdays" value="saturday""#,
        r#"name="times" value="22:00-24:00""#,
        "times in Europe/Berlin",
        r#"<option value="" selected>the host and its services</option>"#,
        r#"<option value="" selected>no: the whole time (fixed)</option>"#,
    ] {
        assert!(form.contains(field), "{field} in {form}");
    }
    let body = format!(
        "version={}&selector=site%3Dsouth&services=alone&flexible=2h&weekdays=sunday&daysOfMonth=&months=&times=01%3A00-05%3A00&comment=backups%2C+moved&starts=2099-01-01T00%3A00&ends=2099-01-31T00%3A00",
        d["version"]
    );
    let (status, _, refused) = olga
        .post(&format!("/downtimes/{id}"), &body, "same-origin")
        .await;
    assert_eq!(status, 422, "a flexible downtime does not recur: {refused}");
    assert!(
        refused.contains(r#"name="weekdays" value="sunday""#),
        "the form again as sent: {refused}"
    );
    let (status, _, refused) = olga
        .post(
            &format!("/downtimes/{id}"),
            &body.replace("flexible=2h", "flexible="),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let saved = read(id.to_string()).await;
    assert_eq!(saved["selector"], "site=south", "{saved}");
    assert_eq!(saved["services"], false, "{saved}");
    assert_eq!(saved["type"], "fixed");
    assert_eq!(saved["comment"], "backups, moved");
    assert_eq!(saved["timeIntervals"][0]["weekdays"], json!(["sunday"]));
    assert_eq!(
        saved["timeIntervals"][0]["times"],
        json!([{"startTime": "01:00", "endTime": "05:00"}])
    );
    assert_eq!(saved["timeIntervals"][0]["location"], "Europe/Berlin");
    assert_eq!(
        saved["start"], "2098-12-31T23:00:00.000Z",
        "Berlin's midnight"
    );
    // Emptied, it no longer recurs.
    let body = format!(
        "version={}&selector=site%3Dsouth&services=alone&flexible=&weekdays=&daysOfMonth=&months=&times=&comment=backups&starts=2099-01-01T00%3A00&ends=2099-01-31T00%3A00",
        saved["version"]
    );
    let (status, _, refused) = olga
        .post(&format!("/downtimes/{id}"), &body, "same-origin")
        .await;
    assert_eq!(status, 303, "{refused}");
    let saved = read(id.to_string()).await;
    assert!(saved.get("timeIntervals").is_none(), "{saved}");

    // One object's downtime: a selector given replaces it; flexible stays a choice.
    let hosts = get(s, &a.token, "/api/v1/hosts?q=edge").await;
    let edge = hosts["items"][0]["id"].as_str().unwrap();
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"objectId": edge, "type": "flexible", "duration": 5400, "start": "2099-01-01T00:00:00Z", "end": "2099-01-02T00:00:00Z", "comment": "router swap"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let one: Value = res.json().await.unwrap();
    let one_id = one["id"].as_str().unwrap();
    let (_, form) = olga.page(&format!("/downtimes/{one_id}/edit")).await;
    assert!(
        form.contains("For <strong>edge</strong>.")
            && form.contains(r#"<option value="90m" selected>90m</option>"#)
            && !form.contains(r#"name="selector" required"#),
        "{form}"
    );
    let body = format!(
        "version={}&selector=&services=&flexible=90m&weekdays=&daysOfMonth=&months=&times=&comment=router+swap&starts=2099-01-01T01%3A00&ends=2099-01-02T01%3A00",
        one["version"]
    );
    let (status, _, refused) = olga
        .post(&format!("/downtimes/{one_id}"), &body, "same-origin")
        .await;
    assert_eq!(status, 303, "{refused}");
    let saved = read(one_id.to_string()).await;
    assert_eq!(
        saved["objectId"], edge,
        "an empty selector keeps its object: {saved}"
    );
    assert_eq!(saved["duration"], 5400);

    // Windows from the API that one form cannot show are kept.
    let windows = json!([
        {"weekdays": ["saturday"], "times": [{"startTime": "22:00", "endTime": "24:00"}]},
        {"daysOfMonth": ["1"]}
    ]);
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"selector": "site=north", "type": "fixed", "start": "2099-01-01T00:00:00Z", "end": "2099-03-01T00:00:00Z", "comment": "two windows", "timeIntervals": windows}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let two: Value = res.json().await.unwrap();
    let two_id = two["id"].as_str().unwrap();
    let (_, form) = olga.page(&format!("/downtimes/{two_id}/edit")).await;
    assert!(
        form.contains("It repeats as set through the API") && !form.contains(r#"name="weekdays""#),
        "{form}"
    );
    let body = format!(
        "version={}&selector=site%3Dnorth&services=&flexible=&comment=two+windows%2C+kept&starts=2099-01-01T01%3A00&ends=2099-03-01T01%3A00",
        two["version"]
    );
    let (status, _, refused) = olga
        .post(&format!("/downtimes/{two_id}"), &body, "same-origin")
        .await;
    assert_eq!(status, 303, "{refused}");
    let saved = read(two_id.to_string()).await;
    assert_eq!(
        saved["timeIntervals"].as_array().map(Vec::len),
        Some(2),
        "{saved}"
    );
    assert_eq!(saved["comment"], "two windows, kept");
}

#[tokio::test]
async fn wallboards_a_tactical_overview_kiosk_mode_and_tiles_that_lead_to_their_lists() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    create_all(
        s,
        &a.token,
        vec![
            (
                "/api/v1/hosts",
                json!({"name": "south-gw", "labels": {"site": "south"}, "spec": {}}),
            ),
            (
                "/api/v1/saved-filters",
                json!({"name": "critical-alerts", "resource": "alerts", "query": {"status": "open", "severity": "critical"}}),
            ),
        ],
    )
    .await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    result(s, &a.token, "swap", "WARNING").await;
    open_alerts(s, &a.token, 2).await;
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "south-gw", "state": "DOWN", "output": "no answer"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let started = Instant::now();
    let page = loop {
        let (status, page) = olga.page("/tactical").await;
        assert_eq!(status, 200);
        if page.contains(">south</a>") {
            break page;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let row = |state: &str| {
        let at = page
            .find(&format!(">{state}</span></th>"))
            .unwrap_or_else(|| panic!("no {state} row: {page}"));
        page[at..at + page[at..].find("</tr>").unwrap()].to_string()
    };
    assert!(
        row("CRITICAL").contains(r#"<a href="/objects?state=CRITICAL">2</a>"#)
            && row("CRITICAL").contains(r#"<a href="/?severity=critical"><strong>2</strong></a>"#),
        "{}",
        row("CRITICAL")
    );
    assert!(row("WARNING").contains(">1</a>"), "{}", row("WARNING"));
    assert!(row("DOWN").contains(">1</a>"), "{}", row("DOWN"));
    assert!(
        page.contains(r#"<a href="/?selector=site%3Dnorth">north</a>"#)
            && page.contains(r#"<a href="/?selector=site%3Dsouth">south</a>"#),
        "the problems of each site: {page}"
    );
    assert!(
        page.contains(r#"<a href="/alerts?status=open&amp;severity=critical">2</a>"#),
        "{page}"
    );
    assert!(page.contains("href=\"/tactical?kiosk=1\"") && page.contains("<header>"));
    let (_, kiosk) = olga.page("/tactical?kiosk=1").await;
    assert!(
        kiosk.contains(r#"<main id="content" class="kiosk""#)
            && !kiosk.contains("<header>")
            && !kiosk.contains("class=\"tabbar\"")
            && !kiosk.contains("Full screen"),
        "{kiosk}"
    );
    // A dashboard's count leads to its list; kiosk mode drops the navigation and the editing.
    user(&a, "eve@example.org", "editor").await;
    let eve = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    let (status, to, _) = eve
        .post(
            "/dashboards",
            "name=wall&shared=on&filter0=critical-alerts&title0=Critical&show0=count",
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (_, board) = eve.page(&to.unwrap()).await;
    assert!(
        board.contains(r#"<a href="/alerts?status=open&amp;severity=critical" aria-label="Critical: 2, listed"><strong>2</strong></a>"#),
        "{board}"
    );
    assert!(board.contains("href=\"/dashboards/wall?kiosk=1\"") && board.contains(">Edit</a>"));
    let (_, wall) = eve.page("/dashboards/wall?kiosk=1").await;
    assert!(
        !wall.contains("<header>")
            && !wall.contains(">Edit</a>")
            && wall.contains("<strong>2</strong>"),
        "{wall}"
    );
    let (_, list) = olga.page("/alerts?status=open&severity=critical").await;
    assert!(
        list.contains("disk is CRITICAL") && list.contains("load is CRITICAL"),
        "{list}"
    );
}

#[tokio::test]
async fn selected_problems_silenced_and_put_in_downtime_together() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    critical(s, &a.token, "disk").await;
    critical(s, &a.token, "load").await;
    result(s, &a.token, "swap", "WARNING").await;
    let alerts = open_alerts(s, &a.token, 2).await;
    let id_of = |title: &str| {
        alerts.iter().find(|x| x["title"] == title).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (disk, load) = (id_of("disk is CRITICAL"), id_of("load is CRITICAL"));
    let services = get(s, &a.token, "/api/v1/services?q=swap").await;
    let swap = services["items"][0]["id"].as_str().unwrap().to_string();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let started = Instant::now();
    loop {
        let (_, page) = olga.page("/").await;
        if page.contains(&format!("name=\"object\" value=\"{swap}\"")) {
            assert!(
                page.contains("formaction=\"/alerts/silence\"")
                    && page.contains("formaction=\"/objects/downtime\""),
                "{page}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no box for the warning without an alert: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _, refused) = olga
        .post(
            "/alerts/silence",
            &format!("id={disk}&duration=4h&back=%2F"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 422, "a silence needs a reason: {refused}");
    let (status, to, _) = olga
        .post(
            "/alerts/silence",
            &format!("id={disk}&duration=4h&comment=replacing+disks&back=%2F"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(to.as_deref(), Some("/?did=silence-some"));
    let silences = get(s, &a.token, "/api/v1/silences").await;
    let silence = &silences["items"][0];
    assert_eq!(silence["textRegex"], "^disk is CRITICAL$", "{silences}");
    assert_eq!(silence["selector"], "site=north");
    assert_eq!(silence["comment"], "replacing disks");
    let (status, _, _) = olga
        .post(
            "/objects/downtime",
            &format!("id={load}&object={swap}&duration=1h&comment=swapping+boards&back=%2F"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    let mut covered: Vec<String> = downtimes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["objectId"].as_str().unwrap().to_string())
        .collect();
    covered.sort();
    let load_object = alerts.iter().find(|x| x["id"] == load.as_str()).unwrap()["objectId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut expected = vec![load_object, swap.clone()];
    expected.sort();
    assert_eq!(covered, expected, "{downtimes}");
    // The alerts and objects pages select as the inbox does.
    let (_, alerts_page) = olga.page("/alerts?status=open").await;
    assert!(
        alerts_page.contains("formaction=\"/alerts/silence\"")
            && alerts_page.contains("formaction=\"/alerts/shelve\""),
        "{alerts_page}"
    );
    let (_, objects_page) = olga.page("/objects").await;
    assert!(
        objects_page.contains(&format!("name=\"object\" value=\"{swap}\""))
            && objects_page.contains("action=\"/objects/downtime\""),
        "{objects_page}"
    );
    let vera = Browser::sign_in(s, "vera@example.org", "a long enough password").await;
    let (_, objects_page) = vera.page("/objects").await;
    assert!(
        !objects_page.contains("name=\"object\""),
        "a viewer selects nothing"
    );
    let (status, _, _) = vera
        .post(
            "/objects/downtime",
            &format!("object={swap}&comment=x&back=%2F"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_lists_narrowing_is_saved_as_a_saved_filter() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    user(&a, "eve@example.org", "editor").await;
    let eve = Browser::sign_in(s, "eve@example.org", "a long enough password").await;
    let (_, page) = eve.page("/?severity=critical&handled=1&sort=newest").await;
    assert!(page.contains("action=\"/saved-filters\""), "{page}");
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (_, page) = olga.page("/").await;
    assert!(
        !page.contains("action=\"/saved-filters\""),
        "an operator saves none"
    );
    let (status, _, _) = olga
        .post(
            "/saved-filters",
            "name=x&resource=problems&back=%2F",
            "same-origin",
        )
        .await;
    assert_eq!(status, 403);
    let save = |name: &str, resource: &str, back: &str| {
        format!(
            "name={name}&resource={resource}&back={}",
            form_urlencoded::byte_serialize(back.as_bytes()).collect::<String>()
        )
    };
    let (status, to, _) = eve
        .post(
            "/saved-filters",
            &save(
                "north-critical",
                "problems",
                "/?severity=critical&selector=site%3Dnorth&handled=1&sort=newest&select=all",
            ),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    assert!(to.unwrap().contains("did=saved-filter"));
    let (status, _, _) = eve
        .post(
            "/saved-filters",
            &save(
                "disks",
                "objects",
                "/objects?q=disk&selector=&folder=&state=CRITICAL",
            ),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let (status, _, _) = eve
        .post(
            "/saved-filters",
            &save(
                "open-critical",
                "alerts",
                "/alerts?status=open&severity=critical",
            ),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let saved = get(s, &a.token, "/api/v1/saved-filters").await;
    let query_of = |name: &str| {
        saved["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {saved}"))
            .clone()
    };
    let problems = query_of("north-critical");
    assert_eq!(problems["resource"], "problems");
    assert_eq!(
        problems["query"],
        json!({"severity": "critical", "selector": "site=north", "includeHandled": "true"})
    );
    assert_eq!(
        query_of("disks")["query"],
        json!({"q": "disk", "state": "CRITICAL"})
    );
    assert_eq!(
        query_of("open-critical")["query"],
        json!({"status": "open", "severity": "critical"})
    );
    let (status, _, _) = eve
        .post(
            "/saved-filters",
            &save("disks", "objects", "/objects"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 409, "the name is taken");
    let (status, _, _) = eve
        .post(
            "/saved-filters",
            &save("other", "tokens", "/"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 422);

    // A dashboard's tile of a problems filter counts and lists what the problems page narrowed
    // to, and leads there.
    critical(s, &a.token, "disk").await;
    result(s, &a.token, "load", "WARNING").await;
    open_alerts(s, &a.token, 1).await;
    let (status, _, _) = eve
        .post(
            "/saved-filters",
            &save("disk-problems", "problems", "/?q=disk&sort=name"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303);
    let layout =
        json!({"tiles": [{"filter": "disk-problems", "title": "Disk problems", "show": "list"}]});
    create_all(
        s,
        &a.token,
        vec![(
            "/api/v1/dashboards",
            json!({"name": "disks", "shared": true, "spec": base64_of(layout.to_string().as_bytes(), false)}),
        )],
    )
    .await;
    let (status, board) = eve.page("/dashboards/disks").await;
    assert_eq!(status, 200);
    assert!(
        board.contains("edge / disk") && !board.contains("edge / load"),
        "{board}"
    );
    assert!(board.contains("href=\"/?q=disk\""), "{board}");
}

#[tokio::test]
async fn a_hosts_downtime_with_or_without_its_services() {
    let a = Admin::start();
    let s = &a.s;
    setup(&a).await;
    let hosts = get(s, &a.token, "/api/v1/hosts").await;
    let edge = hosts["items"][0]["id"].as_str().unwrap().to_string();
    let olga = Browser::sign_in(s, "olga@example.org", "a long enough password").await;
    let (_, form) = olga.page(&format!("/downtimes/new?object={edge}")).await;
    assert!(
        form.contains("<option value=\"alone\">the host alone</option>"),
        "{form}"
    );
    let (status, _, refused) = olga
        .post(
            "/downtimes",
            &format!("objectId={edge}&services=alone&duration=2h&comment=router+swap"),
            "same-origin",
        )
        .await;
    assert_eq!(status, 303, "{refused}");
    let downtimes = get(s, &a.token, "/api/v1/downtimes").await;
    assert_eq!(downtimes["items"][0]["services"], false, "{downtimes}");
    let depth = |v: &Value| v["state"]["downtimeDepth"].as_u64().unwrap_or(0);
    result(s, &a.token, "disk", "CRITICAL").await;
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "edge", "state": "DOWN", "output": "gone"}]}),
    )
    .await;
    assert_eq!(res.status(), 202);
    let started = Instant::now();
    loop {
        let host = get(s, &a.token, &format!("/api/v1/objects/{edge}")).await;
        let disk = get(s, &a.token, "/api/v1/services?q=disk").await["items"][0].clone();
        if depth(&host) == 1 {
            assert_eq!(depth(&disk), 0, "the host alone: {disk}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{host}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The default covers the services too.
    let res = send(
        s,
        &a.token,
        Method::POST,
        "/api/v1/downtimes",
        json!({"objectId": edge, "type": "fixed", "start": "2026-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z", "comment": "all of it"}),
    )
    .await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    assert!(
        created.get("services").is_none(),
        "the default is not written out: {created}"
    );
    let started = Instant::now();
    loop {
        let disk = get(s, &a.token, "/api/v1/services?q=disk").await["items"][0].clone();
        if depth(&disk) == 1 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{disk}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
