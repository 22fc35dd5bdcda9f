//! Status pages (issue 74, part 3): the public page, its feeds and summary, subscribing by
//! e-mail with double opt-in against a real SMTP server (aiosmtpd), an incident's public
//! updates mailed to the confirmed subscribers, leaving by the mail's link, the throttle, and
//! who may see and change what.

use crate::notify::SmtpServer;
use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};

/// A mail's headers and its body, a quoted-printable one decoded.
fn mail_text(mail: &Value) -> String {
    let raw = mail["data"].as_str().unwrap().replace("\r\n", "\n");
    let (head, body) = raw.split_once("\n\n").unwrap();
    if !head.contains("Content-Transfer-Encoding: quoted-printable") {
        return raw;
    }
    let soft = body.replace("=\n", "");
    let mut out = Vec::new();
    let bytes = soft.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&soft[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    format!("{head}\n\n{}", String::from_utf8_lossy(&out))
}

/// The path and query of the first link in `text` to `/status/{page}/{what}`.
fn link(text: &str, what: &str) -> String {
    let at = text
        .find(&format!("/status/acme/{what}?"))
        .unwrap_or_else(|| panic!("no {what} link in {text}"));
    text[at..]
        .split(|c: char| c.is_whitespace() || c == '>')
        .next()
        .unwrap()
        .to_string()
}

async fn subscribe(s: &Server, email: &str) -> reqwest::Response {
    post_form(s, "/status/acme/subscribe", &[("email", email)]).await
}

async fn subscribers(s: &Server, token: &str) -> Vec<Value> {
    get(s, token, "/api/v1/status-pages/acme/subscribers").await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_status_page_shows_its_components_and_tells_its_subscribers() {
    let Some(smtp) = SmtpServer::start() else {
        peer_missing("python3-aiosmtpd");
        return;
    };
    let a = Admin::start_with(trusting_ca(&smtp.ca));
    let (s, token) = (&a.s, a.token.as_str());
    let res = send(
        s,
        token,
        Method::PUT,
        "/api/v1/secrets/smtp-password",
        json!({"value": "mail-secret"}),
    )
    .await;
    assert!(res.status().is_success());
    create_all(
        s,
        token,
        vec![
            ("/api/v1/channels", json!({"name": "mail", "type": "email", "config": {"host": "localhost",
                "port": smtp.port.to_string(), "tls": "starttls", "from": "status <status@example.com>", "username": "svc",
                "password": "$SECRET:smtp-password$", "caFile": smtp.ca.to_str().unwrap()}})),
            ("/api/v1/hosts", json!({"name": "web1", "labels": {"tier": "web"}, "spec": {}})),
            ("/api/v1/hosts", json!({"name": "db1", "spec": {}})),
            ("/api/v1/business-services", json!({"name": "shop", "selector": "tier=web"})),
        ],
    )
    .await;

    // The page: a business service, an object by name, and one that names nothing.
    for (body, code) in [
        (
            json!({"name": "x", "components": []}),
            "svc:validation/status-page",
        ),
        (
            json!({"name": "x", "components": [{"name": "A"}]}),
            "svc:validation/status-page",
        ),
        (
            json!({"name": "x", "components": [{"name": "A", "object": "db1", "businessService": "shop"}]}),
            "svc:validation/status-page",
        ),
        (
            json!({"name": "x", "components": [{"name": "A", "object": "db1"}], "script": "x"}),
            "svc:validation/status-page",
        ),
    ] {
        assert_problem(
            send(s, token, Method::POST, "/api/v1/status-pages", body).await,
            422,
            code,
        )
        .await;
    }
    let page = json!({"name": "acme", "title": "Acme <Status>", "description": "Shop & stock",
        "emailChannel": "mail", "components": [
            {"name": "Shop", "businessService": "shop"},
            {"name": "Database", "object": "db1", "description": "Orders & stock"},
            {"name": "Ghost", "object": "nowhere"}]});
    json(
        send(s, token, Method::POST, "/api/v1/status-pages", page).await,
        201,
    )
    .await;
    let (_, other) = second_tenant(s, token, "other").await;
    assert_problem(
        send(
            s,
            &other,
            Method::POST,
            "/api/v1/status-pages",
            json!({"name": "acme", "components": [{"name": "A", "object": "x"}]}),
        )
        .await,
        409,
        "svc:conflict/duplicate",
    )
    .await;
    send(
        s,
        token,
        Method::POST,
        "/api/v1/results",
        json!({"results": [{"host": "web1", "state": "UP"}, {"host": "db1", "state": "DOWN", "output": "disk full"}]}),
    )
    .await;

    let res = s.get("/status/acme").await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(res.headers().contains_key("content-security-policy"));
    let html = res.text().await.unwrap();
    assert!(html.len() < 40 * 1024, "{} bytes", html.len());
    assert!(!html.contains("<script"), "no script");
    assert!(html.contains("Acme &lt;Status&gt;"), "escaped: {html}");
    assert!(
        !html.contains("disk full"),
        "an object's output is not public"
    );
    assert!(
        html.contains("Major outage"),
        "the database is down: {html}"
    );
    assert!(html.contains("Operational"), "the shop is up");
    assert!(html.contains("Unknown"), "the ghost binds nothing");
    assert!(html.contains("name=\"viewport\""), "a phone's width");
    assert!(html.contains("action=\"/status/acme/subscribe\""));
    assert!(html.contains("No incidents in the last 90 days."));
    let summary = json(s.get("/status/acme/summary.json").await, 200).await;
    assert_eq!(summary["status"], "outage");
    assert_eq!(summary["title"], "Acme <Status>");
    let states: Vec<&str> = summary["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["operational", "outage", "unknown"]);
    let db_days = summary["components"][1]["days"].as_array().unwrap();
    assert_eq!(db_days.len(), 90);
    assert!(
        db_days[..89].iter().all(Value::is_null),
        "no data before today"
    );
    assert!(db_days[89].as_f64().unwrap() < 100.0);
    // A page route answers HTML also when there is no such page, as its document says.
    let missing = s.get("/status/nowhere").await;
    assert_eq!(missing.status(), 404);
    assert!(
        missing.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let missing = post_form(s, "/status/nowhere/unsubscribe?s=0&t=", &[]).await;
    assert_eq!(missing.status(), 404);
    assert!(
        missing.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );

    // Double opt-in: a mail with a link whose page must be confirmed by a button.
    // A form's refusal is a page of the status page's, for the browser that posted it.
    let bad = subscribe(s, "not-an-address\"<i>").await;
    assert_eq!(bad.status(), 422);
    let bad = bad.text().await.unwrap();
    assert!(
        bad.contains("Not an e-mail address") && bad.contains("&lt;i&gt;"),
        "{bad}"
    );
    assert!(bad.contains("href=\"/status/acme\""), "{bad}");
    let res = subscribe(s, "alice@example.com").await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Check your e-mail"));
    let mails = smtp.messages(1).await;
    assert_eq!(mails[0]["to"], json!(["alice@example.com"]));
    let text = mail_text(&mails[0]);
    assert!(
        text.contains("Subject: Confirm your subscription to Acme <Status>"),
        "{text}"
    );
    let confirm = link(&text, "confirm");
    assert_eq!(subscribers(s, token).await[0]["confirmedAt"], Value::Null);
    let page = s.get(&confirm).await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<form method=\"post\""));
    assert_eq!(
        subscribers(s, token).await[0]["confirmedAt"],
        Value::Null,
        "opening the link confirms nothing"
    );
    let forged = format!(
        "{}0",
        confirm.trim_end_matches(|c: char| c.is_ascii_hexdigit())
    );
    assert_eq!(post_form(s, &forged, &[]).await.status(), 404);
    let unsubscribe_with_confirm = confirm.replace("/confirm?", "/unsubscribe?");
    assert_eq!(
        post_form(s, &unsubscribe_with_confirm, &[]).await.status(),
        404,
        "a confirmation link does not unsubscribe"
    );
    let done = post_form(s, &confirm, &[]).await;
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains("Subscribed"));
    assert!(subscribers(s, token).await[0]["confirmedAt"].is_string());
    // Asking again says the same and sends nothing.
    assert_eq!(subscribe(s, "alice@example.com").await.status(), 200);
    // Bob never confirms.
    assert_eq!(subscribe(s, "bob@example.com").await.status(), 200);
    smtp.messages(2).await;

    // An incident's public update reaches the confirmed subscriber only.
    let incident = json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/incidents",
            json!({"title": "Database down"}),
        )
        .await,
        201,
    )
    .await;
    let updates = format!(
        "/api/v1/incidents/{}/status-updates",
        incident["id"].as_str().unwrap()
    );
    for body in [
        json!({"status": "fixed", "message": "x", "pages": ["acme"]}),
        json!({"status": "investigating", "message": "", "pages": ["acme"]}),
        json!({"status": "investigating", "message": "x", "pages": ["nowhere"]}),
        json!({"status": "investigating", "message": "x", "pages": ["acme"], "components": ["Kitchen"]}),
    ] {
        assert_problem(
            send(s, token, Method::POST, &updates, body).await,
            422,
            "svc:validation/statusUpdate",
        )
        .await;
    }
    assert_problem(
        send(
            s,
            &other,
            Method::POST,
            &updates,
            json!({"status": "investigating", "message": "x", "pages": ["acme"]}),
        )
        .await,
        404,
        "svc:not-found",
    )
    .await;
    let posted = json(
        send(s, token, Method::POST, &updates, json!({"status": "investigating",
            "message": "Orders are delayed <b>now</b>", "pages": ["acme"], "components": ["Database"]})).await,
        201,
    )
    .await;
    assert_eq!(posted["mailed"], 1, "{posted}");
    let mails = smtp.messages(3).await;
    assert_eq!(mails[2]["to"], json!(["alice@example.com"]));
    let text = mail_text(&mails[2]);
    assert!(
        text.contains("Subject: [Acme <Status>] Database down (investigating)"),
        "{text}"
    );
    assert!(
        text.contains("INVESTIGATING: Orders are delayed <b>now</b>"),
        "{text}"
    );
    assert!(
        text.contains("List-Unsubscribe-Post: List-Unsubscribe=One-Click"),
        "{text}"
    );
    let leave = link(&text, "unsubscribe");
    assert!(text.contains("List-Unsubscribe: <http"), "{text}");

    let html = s.get("/status/acme").await.text().await.unwrap();
    assert!(html.contains("Active incidents"), "{html}");
    assert!(
        html.contains("Orders are delayed &lt;b&gt;now&lt;/b&gt;"),
        "{html}"
    );
    let atom = s.get("/status/acme/feed.atom").await;
    assert_eq!(atom.headers()["content-type"], "application/atom+xml");
    let atom = atom.text().await.unwrap();
    assert!(
        atom.contains("<title>Database down: investigating</title>"),
        "{atom}"
    );
    assert!(
        atom.contains("Orders are delayed &lt;b&gt;now&lt;/b&gt;"),
        "{atom}"
    );
    let rss = s.get("/status/acme/feed.rss").await;
    assert_eq!(rss.headers()["content-type"], "application/rss+xml");
    assert!(
        rss.text()
            .await
            .unwrap()
            .contains("<item><title>Database down: investigating</title>")
    );
    let summary = json(s.get("/status/acme/summary.json").await, 200).await;
    assert_eq!(summary["incidents"][0]["status"], "investigating");

    // The mail client's one-click unsubscribe (RFC 8058).
    let res = client()
        .post(s.url(&leave))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{leave} in {text}");
    let left: Vec<String> = subscribers(s, token)
        .await
        .iter()
        .map(|s| s["email"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["bob@example.com"]);
    assert_eq!(
        post_form(s, &leave, &[]).await.status(),
        404,
        "gone already"
    );

    // The tenant's people see and remove subscribers; another tenant's see nothing of them.
    assert_eq!(
        call(
            s,
            &other,
            Method::GET,
            "/api/v1/status-pages/acme/subscribers"
        )
        .send()
        .await
        .unwrap()
        .status(),
        404
    );
    let bob = subscribers(s, token).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = call(
        s,
        token,
        Method::DELETE,
        &format!("/api/v1/status-pages/acme/subscribers/{bob}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 204);
    assert!(subscribers(s, token).await.is_empty());

    // Five requests from one address, then it must wait.
    for i in 0..2 {
        assert_eq!(
            subscribe(s, &format!("c{i}@example.com")).await.status(),
            200
        );
    }
    let res = subscribe(s, "c9@example.com").await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "600");

    // A page deleted takes its subscribers with it.
    assert_eq!(subscribers(s, token).await.len(), 2);
    let res = call(s, token, Method::DELETE, "/api/v1/status-pages/acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    json(
        send(
            s,
            token,
            Method::POST,
            "/api/v1/status-pages",
            json!({"name": "acme", "components": [{"name": "A", "object": "db1"}]}),
        )
        .await,
        201,
    )
    .await;
    assert!(subscribers(s, token).await.is_empty());

    let actions = audit_actions(s, token, 50).await;
    for action in [
        "status.subscribe",
        "status.confirm",
        "status.unsubscribe",
        "incident.status-update",
    ] {
        assert!(actions.iter().any(|a| a == action), "{action}: {actions:?}");
    }
}
