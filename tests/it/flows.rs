//! Multi-step HTTP checks (`http-flow`, issue 74) against a small portal with a log-in: a form
//! post that sets a session cookie and answers a token, then an API that wants both.

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::{Duration, Instant};

/// With what a form has to encode (`&`, `=`, `+`, a space, a letter beyond ASCII).
const PASSWORD: &str = "s3cret&Pa=55+ ü";

/// The portal: `POST /login` (form `user`, `pass`) sets `sid`, answers `{token}` and a header
/// `x-csrf`; `GET /api/items` wants the cookie, `Authorization: Bearer <token>` and the header
/// back; `GET /slow` takes 300 ms.
async fn portal() -> String {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let header = |name: &str| {
                        parts
                            .headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string()
                    };
                    let reply = |status: u16, cookie: Option<&str>, body: Value| {
                        let mut res = hyper::Response::builder()
                            .status(status)
                            .header("content-type", "application/json");
                        if let Some(c) = cookie {
                            res = res.header("set-cookie", c).header("x-csrf", "c-9");
                        }
                        Ok::<_, Infallible>(
                            res.body(Full::new(Bytes::from(body.to_string()))).unwrap(),
                        )
                    };
                    match (parts.method.as_str(), parts.uri.path()) {
                        ("POST", "/login") => {
                            let form: Vec<(String, String)> = form_urlencoded::parse(&body)
                                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                                .collect();
                            let wanted = [
                                ("pass".to_string(), PASSWORD.to_string()),
                                ("user".to_string(), "ada".to_string()),
                            ];
                            if header("content-type") == "application/x-www-form-urlencoded"
                                && form == wanted
                            {
                                reply(
                                    200,
                                    Some("sid=s3ss; Path=/; HttpOnly"),
                                    json!({"token": "tok-42", "user": {"name": "ada"}}),
                                )
                            } else {
                                reply(401, None, json!({"error": "who are you"}))
                            }
                        }
                        ("GET", "/api/items") => {
                            if header("cookie") == "sid=s3ss"
                                && header("authorization") == "Bearer tok-42"
                                && header("x-csrf") == "c-9"
                            {
                                reply(200, None, json!({"status": "ok", "items": [{"id": 7}]}))
                            } else {
                                reply(401, None, json!({"error": "log in first"}))
                            }
                        }
                        ("GET", "/slow") => {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            reply(200, None, json!({"status": "ok"}))
                        }
                        _ => reply(404, None, json!({})),
                    }
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    base
}

/// The log-in flow as a service's spec: log in, keep the token (JSON path), the CSRF header,
/// the user's name (regex) and the cookie, list the items with them, and judge the answer.
fn login_flow(base: &str, password: &str) -> Value {
    json!({"steps": [
        {"name": "login", "method": "POST", "url": format!("{base}/login"),
         "form": {"user": "ada", "pass": password},
         "extract": {"token": {"jsonPath": "$.token"}, "csrf": {"header": "x-csrf"}, "who": {"regex": "\"name\":\"([a-z]+)\""}}},
        {"name": "items", "url": format!("{base}/api/items"),
         "headers": {"Authorization": "Bearer ${token}", "X-CSRF": "${csrf}", "X-User": "${who}"},
         "expect": {"status": [200], "contains": "items", "json": {"path": "$.items[0].id", "equals": 7}}}
    ]})
}

async fn state_of(s: &Server, token: &str, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let list = get(s, token, "/api/v1/services?limit=50").await;
        let state = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .map(|o| o["state"].clone())
            .unwrap_or_default();
        if !state.is_null() && done(&state) {
            return state;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{name} never got there: {state}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A flow that logs in (the password a secret), carries its cookie and token into the next
/// request and judges its answer is OK with a metric per step; a wrong password fails at the
/// step that refused it; a slow step is WARNING; the budget ends a flow that runs over; a
/// malformed flow is refused when saved.
#[tokio::test]
async fn a_flow_logs_in_carries_its_session_and_names_the_step_that_fails() {
    let base = portal().await;
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let put = call(s, t, Method::PUT, "/api/v1/secrets/portal-pass")
        .json(&json!({"value": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let slow = json!({"steps": [
        {"name": "slow", "url": format!("{base}/slow"), "expect": {"maxMs": 100}}
    ]});
    let over_budget = json!({"budget": "150ms", "steps": [
        {"name": "first", "url": format!("{base}/slow")}
    ]});
    let service = |name: &str, flow: Value| {
        (
            "/api/v1/services",
            json!({"name": name, "host": "portal", "spec": {"checkCommand": "http-flow", "interval": 1, "httpFlow": flow}}),
        )
    };
    create_all(
        s,
        t,
        vec![
            ("/api/v1/hosts", json!({"name": "portal", "spec": {}})),
            service("login", login_flow(&base, "$SECRET:portal-pass$")),
            service("wrong", login_flow(&base, "guess")),
            service("slow", slow),
            service("budget", over_budget),
        ],
    )
    .await;

    let ok = state_of(s, t, "login", |st| st["state"] == 0).await;
    assert!(
        ok["output"]
            .as_str()
            .unwrap()
            .starts_with("HTTP-FLOW OK - 2 steps in "),
        "{ok}"
    );
    let perf = ok["perfdata"].as_str().unwrap();
    for item in ["'login'=", "'items'=", "'total'="] {
        assert!(perf.contains(item), "{item} in {perf}");
    }
    let wrong = state_of(s, t, "wrong", |st| st["state"] == 2).await;
    assert!(
        wrong["output"]
            .as_str()
            .unwrap()
            .starts_with("HTTP-FLOW CRITICAL - step 1 \"login\": status 401 (expected a 2xx)"),
        "{wrong}"
    );
    let slow = state_of(s, t, "slow", |st| st["state"] == 1).await;
    assert!(
        slow["output"].as_str().unwrap().contains("\"slow\" took "),
        "{slow}"
    );
    let budget = state_of(s, t, "budget", |st| st["state"] == 2).await;
    assert!(
        budget["output"].as_str().unwrap().starts_with(
            "HTTP-FLOW CRITICAL - step 1 \"first\": the flow's budget of 150 ms ran out"
        ),
        "{budget}"
    );
    // A cloud's metadata address is never asked, whatever the flow says.
    let metadata =
        json!({"steps": [{"name": "steal", "url": "http://169.254.169.254/latest/meta-data/"}]});
    create_all(s, t, vec![service("metadata", metadata)]).await;
    let refused = state_of(s, t, "metadata", |st| st["state"] == 2).await;
    assert!(
        refused["output"]
            .as_str()
            .unwrap()
            .contains("is link-local (169.254.169.254): not reached"),
        "{refused}"
    );
    let everything = get(s, t, "/api/v1/services?limit=50").await.to_string();
    assert!(!everything.contains(PASSWORD), "{everything}");

    // Each step's time is a series of the service.
    let id = get(s, t, "/api/v1/services?limit=50").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "login")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let started = Instant::now();
    loop {
        let series = get(s, t, &format!("/api/v1/objects/{id}/metrics"))
            .await
            .to_string();
        if series.contains("\"login\"") && series.contains("\"items\"") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{series}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for (flow, detail) in [
        (json!({"steps": []}), "1 to 20 steps"),
        (
            json!({"steps": [{"name": "x", "url": "file:///etc/shadow"}]}),
            "http://",
        ),
        (
            json!({"steps": [{"name": "x", "url": "http://192.0.2.1/", "extract": {"v": {"jsonPath": "token"}}}]}),
            "starts with $",
        ),
    ] {
        let res = call(s, t, Method::POST, "/api/v1/services")
            .json(&json!({"name": "bad", "host": "portal", "spec": {"checkCommand": "http-flow", "httpFlow": flow}}))
            .send()
            .await
            .unwrap();
        let problem = assert_problem(res, 422, "svc:validation/httpFlow").await;
        assert!(
            problem["detail"].as_str().unwrap().contains(detail),
            "{detail}: {problem}"
        );
    }
}
