//! The AI agent and `/mcp`: every `/ai` route with its permission and codes, the tool policy's
//! allow, ask and deny, the approval queue, streaming turns against a provider speaking the
//! published chat-completions and messages formats (`tests/peers/ai/provider.py`, written
//! apart from svc's client), and the official MCP Python client (`tests/peers/mcp`).

use crate::support::*;
use reqwest::Method;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const KEY: &str = "sk-test-key-for-the-agent";

struct Provider {
    _child: Peer,
    base: String,
    log: PathBuf,
}

impl Provider {
    fn start(dir: &Path) -> Provider {
        let port = free_port();
        let log = dir.join("provider.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ai/provider.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(KEY)
            .arg(&log)
            .spawn()
            .expect("python3 runs the provider");
        let mut child = Peer(child);
        child.wait_listening(port, "the model provider");
        Provider {
            _child: child,
            base: format!("http://127.0.0.1:{port}/v1"),
            log,
        }
    }

    /// The requests it received, oldest first.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A server with AI on: its instance connection is the provider, which `ai.endpoints` names.
fn start(dir: &Path, provider: &Provider, extra: &str) -> Admin {
    let yaml = format!(
        "ai:\n  provider: openai\n  endpoint: {base}\n  model: fake-1\n  apiKey: {KEY}\n  endpoints: [{base}]\n{extra}",
        base = provider.base
    );
    Admin::start_with(Opts {
        args: config_args(dir, &yaml),
        ..Default::default()
    })
}

/// The `data:` objects of an event stream.
fn frames(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

async fn turn(s: &Server, token: &str, chat: &str, message: &str) -> Vec<Value> {
    let res = send(
        s,
        token,
        Method::POST,
        "/api/v1/ai/chat",
        json!({"chatId": chat, "message": message}),
    )
    .await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["x-vercel-ai-ui-message-stream"], "v1");
    frames(&res.text().await.unwrap())
}

/// The catalog entry of `name` in a `GET /ai/tools` page.
fn tool<'a>(tools: &'a Value, name: &str) -> &'a Value {
    tools["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

/// The output of a turn's first tool call.
fn tool_output(events: &[Value]) -> &Value {
    &events
        .iter()
        .find(|e| e["type"] == "tool-output-available")
        .expect("a tool's output")["output"]
}

/// A POST expected to create (201), its answer.
async fn created(s: &Server, token: &str, path: &str, body: Value) -> Value {
    json(send(s, token, Method::POST, path, body).await, 201).await
}

/// A POST without a body (the `:verb` routes).
async fn post_empty(s: &Server, token: &str, path: &str) -> reqwest::Response {
    send(s, token, Method::POST, path, Value::Null).await
}

async fn set_policy(s: &Server, token: &str, policy: Value) -> Value {
    json(
        send(s, token, Method::PUT, "/api/v1/ai/policy", policy).await,
        200,
    )
    .await
}

async fn open_alert(s: &Server, token: &str, key: &str) -> String {
    let a = created(
        s,
        token,
        "/api/v1/alerts",
        json!({"title": "Disk full", "dedupKey": key}),
    )
    .await;
    a["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn with_ai_off_the_catalogs_answer_and_the_agent_is_refused() {
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let tools = get(s, t, "/api/v1/ai/tools").await;
    let names: Vec<&str> = tools["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"alerts_list") && names.contains(&"alert_ack"),
        "{names:?}"
    );
    let ack = tool(&tools, "alert_ack");
    assert_eq!(
        ack["policy"], "deny",
        "write tools are off until the policy names them"
    );
    assert_eq!(ack["permission"], "alerts:ack");
    assert_eq!(ack["route"], "POST /api/v1/alerts/{id}:ack");
    let page = get(s, t, "/api/v1/ai/tools?limit=2").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let next = get(
        s,
        t,
        &format!(
            "/api/v1/ai/tools?limit=2&cursor={}",
            page["nextCursor"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(next["items"][0]["name"], tools["items"][2]["name"]);
    let providers = get(s, t, "/api/v1/ai/providers").await;
    assert_eq!(providers["items"][0]["id"], "openai");
    assert_eq!(providers["items"][0]["available"], false);
    assert_eq!(get(s, t, "/api/v1/ai/policy").await["maxRounds"], 8);
    assert_eq!(get(s, t, "/api/v1/system/info").await["aiEnabled"], false);
    for (method, path, body) in [
        (Method::GET, "/api/v1/ai/chats", Value::Null),
        (Method::POST, "/api/v1/ai/chats", json!({"title": "x"})),
        (
            Method::POST,
            "/api/v1/ai/chat",
            json!({"chatId": uuid::Uuid::now_v7(), "message": "hi"}),
        ),
        (Method::GET, "/api/v1/ai/connections", Value::Null),
        (
            Method::POST,
            "/api/v1/ai/connections",
            json!({"name": "x", "provider": "openai"}),
        ),
        (Method::GET, "/api/v1/ai/conversations", Value::Null),
        (
            Method::POST,
            "/api/v1/ai/conversations",
            json!({"message": "hi"}),
        ),
    ] {
        let res = send(s, t, method, path, body).await;
        assert_problem(res, 503, "svc:ai/disabled").await;
    }
    assert_eq!(get(s, t, "/api/v1/ai/actions").await["items"], json!([]));
    assert_problem(
        send(
            s,
            t,
            Method::GET,
            "/api/v1/ai/actions?status=maybe",
            Value::Null,
        )
        .await,
        422,
        "svc:validation/status",
    )
    .await;

    // Who may call what: the reference's permissions.
    let (viewer, _) = mint(s, t, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_problem(
        call(s, &viewer, Method::GET, "/api/v1/ai/policy")
            .send()
            .await
            .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    assert_problem(
        send(s, &viewer, Method::PUT, "/api/v1/ai/policy", json!({})).await,
        403,
        "svc:auth/forbidden",
    )
    .await;
    get(s, &viewer, "/api/v1/ai/tools").await;
    assert_problem(
        s.http.get(s.url("/api/v1/ai/tools")).send().await.unwrap(),
        401,
        "svc:auth/required",
    )
    .await;
    let permitted = get(s, &viewer, "/api/v1/ai/tools").await;
    let ack = tool(&permitted, "alert_ack");
    assert_eq!(ack["permitted"], false, "a viewer cannot acknowledge");

    // The policy: names are checked, the version counts.
    assert_problem(
        send(
            s,
            t,
            Method::PUT,
            "/api/v1/ai/policy",
            json!({"autoApprove": ["rm_rf"]}),
        )
        .await,
        422,
        "svc:validation/policy",
    )
    .await;
    assert_problem(
        send(
            s,
            t,
            Method::PUT,
            "/api/v1/ai/policy",
            json!({"maxRounds": 0}),
        )
        .await,
        422,
        "svc:validation/policy",
    )
    .await;
    let p = set_policy(s, t, json!({"ask": ["alert_ack"], "maxRounds": 4})).await;
    assert_eq!(
        (p["version"].as_i64(), p["maxRounds"].as_i64()),
        (Some(1), Some(4))
    );
    assert!(
        audit_actions(s, t, 5)
            .await
            .contains(&"ai.policy.update".to_string())
    );
    let tools = get(s, t, "/api/v1/ai/tools").await;
    let ack = tool(&tools, "alert_ack");
    assert_eq!(ack["policy"], "ask");
}

#[tokio::test]
async fn connections_keep_their_keys_and_reach_only_named_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path());
    let a = start(dir.path(), &provider, "");
    let (s, t) = (&a.s, a.token.as_str());
    assert_eq!(get(s, t, "/api/v1/system/info").await["aiEnabled"], true);
    let elsewhere = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/connections",
        json!({"name": "x", "provider": "openai", "endpoint": "http://169.254.169.254/latest"}),
    )
    .await;
    assert_problem(elsewhere, 422, "svc:validation/endpoint").await;
    assert_problem(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/ai/connections",
            json!({"name": "x", "provider": "cohere"}),
        )
        .await,
        422,
        "svc:validation/provider",
    )
    .await;
    let body = json!({"name": "local", "provider": "openai", "endpoint": provider.base, "apiKey": KEY, "defaultModel": "fake-2"});
    let c = json(
        send(s, t, Method::POST, "/api/v1/ai/connections", body.clone()).await,
        201,
    )
    .await;
    assert_eq!(c["hasApiKey"], true);
    assert!(
        !c.to_string().contains(KEY),
        "the key is never returned: {c}"
    );
    let id = c["id"].as_str().unwrap().to_string();
    assert_problem(
        send(s, t, Method::POST, "/api/v1/ai/connections", body).await,
        409,
        "svc:conflict",
    )
    .await;
    let listed = get(s, t, "/api/v1/ai/connections").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains(KEY));
    let models = get(s, t, &format!("/api/v1/ai/connections/{id}/models")).await;
    assert_eq!(models["items"], json!([{"id": "fake-1"}, {"id": "fake-2"}]));
    let test = json(
        post_empty(s, t, &format!("/api/v1/ai/connections/{id}:test")).await,
        200,
    )
    .await;
    assert_eq!(
        (test["ok"].as_bool(), test["models"].as_i64()),
        (Some(true), Some(2))
    );
    assert!(
        provider
            .requests()
            .iter()
            .all(|r| r["authorization"] == format!("Bearer {KEY}"))
    );

    // A wrong key: the provider's refusal comes back as 502 svc:ai/provider.
    let updated = json(
        send(s, t, Method::PUT, &format!("/api/v1/ai/connections/{id}"), json!({"name": "local", "provider": "openai", "endpoint": provider.base, "apiKey": "wrong"})).await,
        200,
    )
    .await;
    assert_eq!(updated["hasApiKey"], true);
    let refused = post_empty(s, t, &format!("/api/v1/ai/connections/{id}:test")).await;
    let p = assert_problem(refused, 502, "svc:ai/provider").await;
    assert!(p["detail"].as_str().unwrap().contains("401"), "{p}");

    // Personal connections are their owner's; shared ones need admin:ai.
    let (user, _) = mint(s, t, json!({"name": "op", "roles": ["operator"]})).await;
    assert_eq!(
        get(s, &user, "/api/v1/ai/connections").await["items"],
        json!([])
    );
    assert_problem(
        call(
            s,
            &user,
            Method::GET,
            &format!("/api/v1/ai/connections/{id}/models"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        send(
            s,
            &user,
            Method::POST,
            "/api/v1/ai/connections",
            json!({"name": "team", "provider": "openai", "shared": true}),
        )
        .await,
        403,
        "svc:auth/forbidden",
    )
    .await;
    let shared = created(s, t, "/api/v1/ai/connections", json!({"name": "team", "provider": "anthropic", "endpoint": provider.base, "apiKey": KEY, "shared": true})).await;
    assert_eq!(
        get(s, &user, "/api/v1/ai/connections").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let sid = shared["id"].as_str().unwrap();
    assert_problem(
        call(
            s,
            &user,
            Method::DELETE,
            &format!("/api/v1/ai/connections/{sid}"),
        )
        .send()
        .await
        .unwrap(),
        403,
        "svc:auth/forbidden",
    )
    .await;
    assert_problem(
        call(
            s,
            t,
            Method::DELETE,
            &format!("/api/v1/ai/connections/{id}?shared=true"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_eq!(
        call(
            s,
            t,
            Method::DELETE,
            &format!("/api/v1/ai/connections/{id}")
        )
        .send()
        .await
        .unwrap()
        .status(),
        204
    );
    let secrets = get(s, t, "/api/v1/secrets").await;
    assert_eq!(
        secrets["items"].as_array().unwrap().len(),
        1,
        "the deleted connection's key went with it: {secrets}"
    );
    let actions = audit_actions(s, t, 10).await;
    for a in [
        "ai.connection.create",
        "ai.connection.update",
        "ai.connection.delete",
    ] {
        assert!(actions.contains(&a.to_string()), "{a}: {actions:?}");
    }
}

#[tokio::test]
async fn a_turn_streams_calls_tools_under_the_policy_and_waits_for_approval() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path());
    let a = start(dir.path(), &provider, "");
    let (s, t) = (&a.s, a.token.as_str());
    let chat = created(s, t, "/api/v1/ai/chats", json!({"title": "night shift"})).await;
    let chat = chat["id"].as_str().unwrap().to_string();
    // Names: one per owner (409 svc:conflict), untitled chats numbered.
    let clash = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/chats",
        json!({"title": "night shift"}),
    )
    .await;
    assert_problem(clash, 409, "svc:conflict").await;
    let mut untitled = Vec::new();
    for _ in 0..2 {
        let c = created(s, t, "/api/v1/ai/chats", json!({})).await;
        untitled.push((
            c["id"].as_str().unwrap().to_string(),
            c["title"].as_str().unwrap().to_string(),
        ));
    }
    assert_eq!(
        (untitled[0].1.as_str(), untitled[1].1.as_str()),
        ("New chat", "New chat 2")
    );
    let rename = send(
        s,
        t,
        Method::PUT,
        &format!("/api/v1/ai/chats/{}", untitled[1].0),
        json!({"title": "New chat"}),
    )
    .await;
    assert_problem(rename, 409, "svc:conflict").await;
    let (other, _) = mint(s, t, json!({"name": "other", "roles": ["operator"]})).await;
    created(
        s,
        &other,
        "/api/v1/ai/chats",
        json!({"title": "night shift"}),
    )
    .await;

    let events = turn(s, t, &chat, "hello").await;
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "echo: hello");
    assert_eq!(events[0]["type"], "start");
    assert_eq!(events[1], json!({"type": "text-start", "id": "text-0"}));
    assert_eq!(events.last().unwrap()["type"], "finish");
    assert_eq!(events.last().unwrap()["messageMetadata"]["tokens"], 10);
    let kept = get(s, t, &format!("/api/v1/ai/chats/{chat}")).await;
    let roles: Vec<&str> = kept["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"]);
    // Regenerating answers again from a message of the chat, and only from one.
    let unknown = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/chat",
        json!({"chatId": chat, "trigger": "regenerate-message", "messageId": uuid::Uuid::now_v7()}),
    )
    .await;
    assert_problem(unknown, 422, "svc:validation/messageId").await;
    let empty = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/chat",
        json!({"chatId": chat, "message": " "}),
    )
    .await;
    assert_problem(empty, 422, "svc:validation/message").await;
    let answer = kept["messages"][1]["id"].as_str().unwrap();
    let again = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/chat",
        json!({"chatId": chat, "trigger": "regenerate-message", "messageId": answer}),
    )
    .await;
    assert_eq!(again.status(), 201);
    assert_eq!(
        frames(&again.text().await.unwrap()).last().unwrap()["type"],
        "finish"
    );
    let kept = get(s, t, &format!("/api/v1/ai/chats/{chat}")).await;
    let messages = kept["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "the old answer gave way to the new one");
    assert_ne!(messages[1]["id"], answer);
    assert_eq!(messages[1]["content"], "echo: hello");
    let sent = provider.requests().pop().unwrap();
    assert_eq!(sent["body"]["model"], "fake-1");
    assert_eq!(sent["body"]["stream"], true);
    let offered: Vec<&str> = sent["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"alerts_list") && !offered.contains(&"alert_ack"),
        "denied tools are not offered: {offered:?}"
    );

    // A read tool runs as the caller.
    let alert = open_alert(s, t, "disk-1").await;
    let events = turn(s, t, &chat, "list").await;
    let input = events
        .iter()
        .find(|e| e["type"] == "tool-input-available")
        .unwrap();
    assert_eq!(input["toolName"], "alerts_list");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool-output-available")
        .unwrap();
    assert_eq!(result["toolCallId"], input["toolCallId"]);
    assert_eq!(result["output"]["outcome"], "ran");
    assert_eq!(result["output"]["body"]["items"][0]["id"], alert.as_str());
    assert!(
        events.iter().any(
            |e| e["type"] == "text-delta" && e["delta"].as_str().unwrap().contains("tool said")
        )
    );

    // A write tool the policy does not name is refused; the alert stays open.
    let events = turn(s, t, &chat, &format!("ack {alert}")).await;
    assert_eq!(tool_output(&events)["outcome"], "refused");
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "open"
    );

    // Ask: the call becomes an action; denying it runs nothing.
    set_policy(s, t, json!({"ask": ["alert_ack"]})).await;
    let events = turn(s, t, &chat, &format!("ack {alert}")).await;
    let queued = tool_output(&events);
    assert_eq!(queued["outcome"], "queued");
    let action = queued["actionId"].as_str().unwrap().to_string();
    let pending = get(s, t, "/api/v1/ai/actions?status=pending").await;
    assert_eq!(pending["items"][0]["id"], action.as_str());
    assert_eq!(pending["items"][0]["tool"], "alert_ack");
    assert_eq!(pending["items"][0]["chatId"], chat.as_str());
    let denied = json(
        post_empty(s, t, &format!("/api/v1/ai/actions/{action}:deny")).await,
        200,
    )
    .await;
    assert_eq!(denied["status"], "denied");
    assert_problem(
        post_empty(s, t, &format!("/api/v1/ai/actions/{action}:approve")).await,
        409,
        "svc:conflict",
    )
    .await;
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "open"
    );

    // Approved, it runs as the approver, who must hold the tool's permission.
    let events = turn(s, t, &chat, &format!("ack {alert}")).await;
    let action = tool_output(&events)["actionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (viewer, _) = mint(s, t, json!({"name": "v", "roles": ["viewer"]})).await;
    assert_problem(
        post_empty(s, &viewer, &format!("/api/v1/ai/actions/{action}:approve")).await,
        403,
        "svc:auth/forbidden",
    )
    .await;
    let done = json(
        post_empty(s, t, &format!("/api/v1/ai/actions/{action}:approve")).await,
        200,
    )
    .await;
    assert_eq!(
        (done["status"].as_str(), done["resultStatus"].as_u64()),
        (Some("executed"), Some(200))
    );
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "acked"
    );
    let actions = audit_actions(s, t, 10).await;
    assert!(
        actions.contains(&"ai.action.approve".to_string())
            && actions.contains(&"ai.action.propose".to_string()),
        "{actions:?}"
    );

    // An approved call that fails: 502 svc:ai/execute, and the action says so.
    let events = turn(s, t, &chat, &format!("ack {alert}")).await;
    let action = tool_output(&events)["actionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_problem(
        post_empty(s, t, &format!("/api/v1/ai/actions/{action}:approve")).await,
        502,
        "svc:ai/execute",
    )
    .await;
    assert_eq!(
        get(s, t, "/api/v1/ai/actions?status=failed").await["items"][0]["id"],
        action.as_str()
    );

    // The UI's approvals page shows a waiting call to those who may decide it; denied there,
    // nothing runs.
    let events = turn(s, t, &chat, &format!("ack {alert}")).await;
    let action = tool_output(&events)["actionId"]
        .as_str()
        .unwrap()
        .to_string();
    let page = |token: &str| {
        call(s, token, Method::GET, "/approvals")
            .header("Accept", "text/html")
            .send()
    };
    let html = page(t).await.unwrap().text().await.unwrap();
    assert!(
        html.contains(&format!("/approvals/{action}/approve"))
            && html.contains(&format!("/approvals/{action}/deny"))
            && html.contains("alert_ack"),
        "{html}"
    );
    let seen = page(&viewer).await.unwrap();
    assert_eq!(seen.status(), 200);
    let seen = seen.text().await.unwrap();
    assert!(
        seen.contains("alert_ack") && !seen.contains("/approve\""),
        "{seen}"
    );
    let denied = call(s, t, Method::POST, &format!("/approvals/{action}/deny"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("back=%2Fapprovals")
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 303);
    assert_eq!(denied.headers()["location"], "/approvals?did=deny");
    let decided = get(s, t, "/api/v1/ai/actions?status=denied").await;
    assert!(
        decided["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == action.as_str())
    );
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "acked",
        "acknowledged by the approval before, not again"
    );

    // Allow: it runs at once.
    set_policy(s, t, json!({"autoApprove": ["alert_resolve", "alert_ack"]})).await;
    let other = open_alert(s, t, "disk-2").await;
    let events = turn(s, t, &chat, &format!("ack {other}")).await;
    assert_eq!(tool_output(&events)["outcome"], "ran");
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{other}")).await["status"],
        "acked"
    );

    // One turn at a time per chat.
    let slow = {
        let (http, url, token, chat) = (
            s.http.clone(),
            s.url("/api/v1/ai/chat"),
            t.to_string(),
            chat.clone(),
        );
        tokio::spawn(async move {
            let res = http
                .post(url)
                .bearer_auth(token)
                .json(&json!({"chatId": chat, "message": "slow"}))
                .send()
                .await
                .unwrap();
            res.text().await.unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let busy = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/chat",
        json!({"chatId": chat, "message": "again"}),
    )
    .await;
    assert_problem(busy, 409, "svc:ai/busy").await;
    assert_problem(
        call(s, t, Method::DELETE, &format!("/api/v1/ai/chats/{chat}"))
            .send()
            .await
            .unwrap(),
        409,
        "svc:ai/busy",
    )
    .await;
    let said: String = frames(&slow.await.unwrap())
        .iter()
        .filter(|e| e["type"] == "text-delta")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, "echo: slow");

    // A provider failure is the stream's last event; the user's message is kept.
    let events = turn(s, t, &chat, "fail").await;
    let last = events.last().unwrap();
    assert_eq!(
        (
            last["type"].as_str(),
            last["errorText"]
                .as_str()
                .map(|t| t.starts_with("svc:ai/provider: "))
        ),
        (Some("error"), Some(true))
    );
    let kept = get(s, t, &format!("/api/v1/ai/chats/{chat}")).await;
    let messages = kept["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "fail");

    // Chats are their owner's; messages can be deleted; chats updated and deleted.
    let (op, _) = mint(s, t, json!({"name": "op", "roles": ["operator"]})).await;
    assert_problem(
        call(s, &op, Method::GET, &format!("/api/v1/ai/chats/{chat}"))
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_eq!(get(s, &op, "/api/v1/ai/chats").await["items"], json!([]));
    let msg = messages[0]["id"].as_str().unwrap();
    assert_eq!(
        call(
            s,
            t,
            Method::DELETE,
            &format!("/api/v1/ai/chats/{chat}/messages/{msg}")
        )
        .send()
        .await
        .unwrap()
        .status(),
        204
    );
    assert_problem(
        call(
            s,
            t,
            Method::DELETE,
            &format!("/api/v1/ai/chats/{chat}/messages/{msg}"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    let renamed = json(
        send(
            s,
            t,
            Method::PUT,
            &format!("/api/v1/ai/chats/{chat}"),
            json!({"title": "day shift"}),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(renamed["title"], "day shift");
    let logged = get(s, t, "/api/v1/audit?action=ai.chat.update").await;
    let after = &logged["items"][0]["after"];
    assert_eq!(after["title"], "day shift");
    assert!(
        after.get("messages").is_none(),
        "what was said stays out of the log: {after}"
    );
    let mine = get(s, t, "/api/v1/ai/chats").await;
    let titles: Vec<&str> = mine["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        ["New chat 2", "New chat", "day shift"],
        "newest first, the owner's only"
    );
    assert_eq!(
        call(s, t, Method::DELETE, &format!("/api/v1/ai/chats/{chat}"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_problem(
        call(s, t, Method::GET, &format!("/api/v1/ai/chats/{chat}"))
            .send()
            .await
            .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    assert_problem(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/ai/chat",
            json!({"chatId": chat, "message": "x"}),
        )
        .await,
        404,
        "svc:not-found",
    )
    .await;
}

#[tokio::test]
async fn conversations_use_the_instance_connection_and_the_budget_holds() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path());
    let a = start(
        dir.path(),
        &provider,
        "  monthlyTokenBudget: 35\n  maxConcurrentTurns: 1\n",
    );
    let (s, t) = (&a.s, a.token.as_str());
    let c = created(
        s,
        t,
        "/api/v1/ai/conversations",
        json!({"message": "hello"}),
    )
    .await;
    assert_eq!(c["reply"], "echo: hello");
    let id = c["id"].as_str().unwrap();
    // One turn at a time per conversation, and here one in the instance: another
    // conversation's is shed at once, and counted.
    let slow = {
        let (http, url, token) = (
            s.http.clone(),
            s.url("/api/v1/ai/conversations"),
            t.to_string(),
        );
        let body = json!({"conversationId": id, "message": "slow"});
        tokio::spawn(async move {
            let res = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            res.status().as_u16()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let busy = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/conversations",
        json!({"conversationId": id, "message": "x"}),
    )
    .await;
    assert_problem(busy, 409, "svc:ai/busy").await;
    let shed = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/conversations",
        json!({"message": "hello"}),
    )
    .await;
    assert_eq!(shed.headers()["retry-after"], "5");
    assert_problem(shed, 503, "svc:ai/disabled").await;
    let queues = get(s, t, "/api/v1/overview").await["queues"].clone();
    assert_eq!(
        (queues["droppedAi"].as_u64(), queues["aiDepth"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(slow.await.unwrap(), 201);
    let again = created(
        s,
        t,
        "/api/v1/ai/conversations",
        json!({"conversationId": id, "message": "more"}),
    )
    .await;
    assert_eq!(again["messages"].as_array().unwrap().len(), 6);
    let listed = get(s, t, "/api/v1/ai/conversations").await;
    assert_eq!(listed["items"][0]["id"], id);
    assert_eq!(
        get(s, t, &format!("/api/v1/ai/conversations/{id}")).await["messages"][5]["content"],
        "echo: more"
    );
    let (op, _) = mint(s, t, json!({"name": "op", "roles": ["operator"]})).await;
    assert_problem(
        call(
            s,
            &op,
            Method::GET,
            &format!("/api/v1/ai/conversations/{id}"),
        )
        .send()
        .await
        .unwrap(),
        404,
        "svc:not-found",
    )
    .await;
    // 30 of 35 tokens: the month's warning is a `system` event.
    let events = get(s, t, "/api/v1/events?types=system").await;
    let warning = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["payload"]["action"] == "ai.budget")
        .expect("a budget warning");
    assert_eq!(warning["severity"], "warning");
    created(
        s,
        t,
        "/api/v1/ai/conversations",
        json!({"message": "third"}),
    )
    .await;
    let spent = send(
        s,
        t,
        Method::POST,
        "/api/v1/ai/conversations",
        json!({"message": "fourth"}),
    )
    .await;
    let p = assert_problem(spent, 503, "svc:ai/disabled").await;
    assert!(p["detail"].as_str().unwrap().contains("budget"), "{p}");
    assert_problem(
        send(
            s,
            t,
            Method::POST,
            "/api/v1/ai/conversations",
            json!({"message": ""}),
        )
        .await,
        422,
        "svc:validation/message",
    )
    .await;
}

#[tokio::test]
async fn the_messages_format_carries_tool_use_and_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path());
    let yaml = format!(
        "ai:\n  provider: anthropic\n  endpoint: {base}\n  model: fake-claude\n  apiKey: {KEY}\n",
        base = provider.base
    );
    let a = Admin::start_with(Opts {
        args: config_args(dir.path(), &yaml),
        ..Default::default()
    });
    let (s, t) = (&a.s, a.token.as_str());
    open_alert(s, t, "disk-9").await;
    let c = created(s, t, "/api/v1/ai/conversations", json!({"message": "list"})).await;
    assert!(
        c["reply"].as_str().unwrap().starts_with("tool said:"),
        "{c}"
    );
    let sent = provider.requests();
    let last = sent.last().unwrap();
    assert_eq!(last["path"], "/v1/messages");
    assert_eq!(last["x-api-key"], KEY);
    assert_eq!(last["anthropic-version"], "2023-06-01");
    assert_eq!(
        last["body"]["messages"][2]["content"][0]["type"],
        "tool_result"
    );

    let incident = created(s, t, "/api/v1/incidents", json!({"title": "Storage"})).await;
    let id = incident["id"].as_str().unwrap();
    let summary = json(
        post_empty(s, t, &format!("/api/v1/incidents/{id}:summarize")).await,
        200,
    )
    .await;
    assert!(
        summary["summary"]
            .as_str()
            .unwrap()
            .starts_with("echo: Summarise this incident"),
        "{summary}"
    );
    assert_eq!(
        get(s, t, &format!("/api/v1/incidents/{id}")).await["summary"],
        "",
        "nothing is stored"
    );
}

/// The official MCP client, or `None` (a skip; a failure in CI) without its virtualenv.
fn mcp_python() -> Option<PathBuf> {
    let python = std::env::var_os("SVC_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-venv/bin/python")
        });
    let ok = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        peer_missing("the MCP Python SDK (pip install -r tests/peers/mcp/requirements.txt)");
        return None;
    }
    Some(python)
}

async fn out_version(s: &Server, t: &str) -> Value {
    get(s, t, "/api/v1/system/info").await["version"].clone()
}

/// Runs the official client in its default mode (`server/discover`, the 2026-07-28
/// revision), or with `MCP_MODE=legacy` (the `initialize` handshake).
fn mcp_client(python: &Path, s: &Server, token: &str, calls: &[(&str, Value)]) -> Value {
    mcp_client_in("auto", python, s, token, calls)
}

fn mcp_client_in(
    mode: &str,
    python: &Path,
    s: &Server,
    token: &str,
    calls: &[(&str, Value)],
) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/mcp/client.py");
    let mut cmd = Command::new(python);
    cmd.env("MCP_MODE", mode)
        .arg(script)
        .arg(s.url("/mcp"))
        .arg(token);
    for (name, args) in calls {
        cmd.arg(name).arg(args.to_string());
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn the_official_mcp_client_lists_and_calls_tools_as_its_credential() {
    let Some(python) = mcp_python() else { return };
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let alert = open_alert(s, t, "mcp-1").await;
    let (agent, _) = mint(
        s,
        t,
        json!({"name": "assistant", "roles": ["operator"], "aiAgent": true}),
    )
    .await;
    let (viewer, _) = mint(
        s,
        t,
        json!({"name": "reader", "roles": ["viewer"], "aiAgent": true}),
    )
    .await;

    let out = mcp_client(
        &python,
        s,
        &agent,
        &[
            ("alerts_list", json!({"status": "open"})),
            ("alert_ack", json!({"id": alert})),
        ],
    );
    assert_eq!(out["protocolVersion"], "2026-07-28");
    assert_eq!(out["serverName"], "svc");
    assert_eq!(
        out["serverVersion"],
        get(s, t, "/api/v1/system/info").await["version"]
    );
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"alerts_list") && !tools.contains(&"alert_ack"),
        "write tools are off: {tools:?}"
    );
    assert_eq!(out["results"][0]["isError"], false);
    assert_eq!(
        out["results"][0]["structured"]["items"][0]["id"],
        alert.as_str()
    );
    assert_eq!(
        out["results"][1]["isError"], true,
        "the policy refuses the write"
    );
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "open"
    );

    // Allowed by the policy, the write runs, audited as the AI agent it is.
    set_policy(s, t, json!({"autoApprove": ["alert_ack"]})).await;
    let out = mcp_client(
        &python,
        s,
        &agent,
        &[("alert_ack", json!({"id": alert, "comment": "seen"}))],
    );
    assert_eq!(out["results"][0]["isError"], false, "{out}");
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{alert}")).await["status"],
        "acked"
    );
    let audit = get(s, t, "/api/v1/audit?action=alert.ack").await;
    assert_eq!(audit["items"][0]["actorType"], "ai_agent", "{audit}");

    // Without the permission, the policy does not help.
    let other = open_alert(s, t, "mcp-2").await;
    let out = mcp_client_in(
        "legacy",
        &python,
        s,
        &viewer,
        &[("alert_ack", json!({"id": other}))],
    );
    assert_eq!(out["protocolVersion"], "2025-11-25", "the handshake, too");
    assert_eq!(out["serverVersion"], out_version(s, t).await);
    assert!(
        !out["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("alert_ack"))
    );
    assert_eq!(out["results"][0]["isError"], true);
    assert!(
        out["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alerts:ack")
    );
    assert_eq!(
        get(s, t, &format!("/api/v1/alerts/{other}")).await["status"],
        "open"
    );

    // Ask: the call waits in the approval queue.
    set_policy(s, t, json!({"ask": ["alert_ack"]})).await;
    let out = mcp_client(&python, s, &agent, &[("alert_ack", json!({"id": other}))]);
    assert_eq!(out["results"][0]["structured"]["status"], "pending");
    let action = out["results"][0]["structured"]["actionId"]
        .as_str()
        .unwrap();
    let pending = get(s, t, "/api/v1/ai/actions").await;
    assert_eq!(pending["items"][0]["id"], action);
    assert!(
        pending["items"][0]["proposedBy"]
            .as_str()
            .unwrap()
            .starts_with("ai_agent:")
    );
}

#[tokio::test]
async fn mcp_speaks_json_rpc_with_the_apis_credentials() {
    let a = Admin::start();
    let (s, t) = (&a.s, a.token.as_str());
    let rpc = |body: Value| s.http.post(s.url("/mcp")).bearer_auth(t).json(&body);
    assert_problem(
        s.http
            .post(s.url("/mcp"))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap(),
        401,
        "svc:auth/required",
    )
    .await;
    let init = json(rpc(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})).send().await.unwrap(), 200).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        false
    );
    let note = rpc(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(note.status(), 202);
    let unknown = json(
        rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32601);
    let bad_tool = json(
        rpc(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(bad_tool["error"]["code"], -32602);
    let version = rpc(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
        .header("MCP-Protocol-Version", "1999-01-01")
        .send()
        .await
        .unwrap();
    assert_eq!(version.status(), 400);
    let garbage = s
        .http
        .post(s.url("/mcp"))
        .bearer_auth(t)
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(json(garbage, 400).await["error"]["code"], -32700);
    let rebinding = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_problem(rebinding, 403, "svc:auth/forbidden").await;
    let rebound_host = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .header("Origin", "http://localhost")
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_problem(rebound_host, 403, "svc:auth/forbidden").await;
    let same_origin = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .header("Origin", s.base.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(json(same_origin, 200).await["result"], json!({}));
    let other_name = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .header("Host", "svc.internal:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(
        other_name.status(),
        200,
        "a client that is no browser names the server as it reaches it"
    );
    // The 2026-07-28 envelope: checked against its headers, no handshake needed.
    let envelope = |method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
        rpc(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method)
    };
    let discovered = json(
        envelope("server/discover", json!({})).send().await.unwrap(),
        200,
    )
    .await;
    assert!(
        discovered["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert_eq!(discovered["result"]["resultType"], "complete");
    assert_eq!(
        discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "svc"
    );
    let listed = json(envelope("tools/list", json!({})).send().await.unwrap(), 200).await;
    assert!(listed["result"]["tools"].as_array().unwrap().len() > 5);
    assert_eq!(listed["result"]["ttlMs"], 0);
    let mismatch = envelope(
        "tools/call",
        json!({"name": "problems_list", "arguments": {}}),
    )
    .header("Mcp-Name", "alerts_list")
    .send()
    .await
    .unwrap();
    assert_eq!(json(mismatch, 400).await["error"]["code"], -32020);
    let called = envelope(
        "tools/call",
        json!({"name": "problems_list", "arguments": {}}),
    )
    .header("Mcp-Name", "problems_list")
    .send()
    .await
    .unwrap();
    assert_eq!(json(called, 200).await["result"]["isError"], false);
    let unknown = json(
        envelope("prompts/list", json!({})).send().await.unwrap(),
        404,
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32601);
    let old_version = rpc(json!({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}}))
        .header("MCP-Protocol-Version", "2030-01-01")
        .header("Mcp-Method", "ping")
        .send()
        .await
        .unwrap();
    let refused = json(old_version, 400).await;
    assert_eq!(refused["error"]["code"], -32022);
    assert_eq!(refused["error"]["data"]["requested"], "2030-01-01");
    let no_meta = rpc(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        .header("MCP-Protocol-Version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(json(no_meta, 400).await["error"]["code"], -32602);

    let get = s
        .http
        .get(s.url("/mcp"))
        .bearer_auth(t)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    // A session works as well as a token, and a cross-site fetch is not a CSRF refusal here.
    let viewer = created(
        s,
        t,
        "/api/v1/users",
        json!({"email": "v@example.org", "name": "V", "password": "a long enough password", "roles": ["viewer"]}),
    )
    .await;
    assert!(viewer["id"].is_string());
    let res = login(s, "v@example.org", "a long enough password", false).await;
    let (cookie, _) = session_of(&res);
    let listed = json(
        s.http
            .post(s.url("/mcp"))
            .header("cookie", format!("svc_session={cookie}"))
            .header("sec-fetch-site", "cross-site")
            .json(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"problems_list") && !names.contains(&"alert_ack"));
}
