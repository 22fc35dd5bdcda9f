//! `/mcp`: the Model Context Protocol over its Streamable HTTP transport (revision 2025-11-25,
//! and 2025-06-18 and 2025-03-26 for older clients), with the API's credentials. Stateless:
//! every POST carries one JSON-RPC message and a request is answered in the POST's own JSON
//! body, so no session is kept and GET (a server-to-client stream) is 405. The tools are the
//! catalog of `ai::tools`, called as the caller under the tenant's policy.

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::router::Route;
use crate::ai::{ToolOutcome, tools};
use crate::model::ai::ToolMode;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub const REVISIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
const BODY_MAX: usize = 1 << 20;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// A JSON-RPC 2.0 message (MCP's `JSONRPCMessage`): a request, a notification or a response.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct JsonRpcMessage {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/mcp", post).identity().csrf_exempt().doc("mcp", "MCP endpoint (Streamable HTTP)", "One JSON-RPC 2.0 message per POST with the API's credentials (bearer token or session; 401 problem without). Requests are answered 200 `application/json`; notifications and responses 202. Methods: `initialize` (protocol 2025-11-25, 2025-06-18 or 2025-03-26; `serverInfo.version` is the server version), `ping`, `tools/list` (the tools of `GET /api/v1/ai/tools` the caller holds and the tenant's policy does not refuse), `tools/call` (runs the tool's API route as the caller: allow runs, ask queues an action in `/api/v1/ai/actions`, deny refuses; a refused or failed call is a result with `isError`). A browser's request (with `Origin`) whose `Origin` or `Host` the configuration does not name is 403 (DNS rebinding); an unsupported `MCP-Protocol-Version`, or a body that is no JSON-RPC message, is 400 with a JSON-RPC error. Not CSRF-wrapped (SPEC 5.7).")
            .no_deadline().body::<JsonRpcMessage>().answers::<Value>(200).answers_empty(202).answers::<Value>(400).fails(403, "A browser's Origin or Host the configuration does not name"),
        Route::get("/mcp", no_stream).identity().csrf_exempt().doc("mcp", "MCP server-to-client stream (not offered)", "405: the server sends nothing unasked, so it offers no stream (the transport allows this).")
            .answers_empty(405),
        Route::delete("/mcp", no_stream).identity().csrf_exempt().doc("mcp", "MCP session end (no sessions)", "405: the endpoint keeps no sessions.")
            .answers_empty(405),
    ]
}

async fn no_stream() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response()
}

fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether a `Host` (or an `Origin`'s host) is one this server answers to: a loopback name,
/// the base URL's host, the listener's address, or (when it listens on all addresses) any
/// address literal; a DNS name anything else points here is refused (DNS rebinding).
fn host_allowed(st: &AppState, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    if ["localhost", "127.0.0.1", "::1"].contains(&host.as_str()) {
        return true;
    }
    let base = url::Url::parse(&st.config.base_url).ok();
    if base
        .as_ref()
        .and_then(|u| u.host_str())
        .is_some_and(|b| b.trim_matches(['[', ']']).eq_ignore_ascii_case(&host))
    {
        return true;
    }
    let listen = host_of(&st.config.listen).to_ascii_lowercase();
    let literal = host.parse::<std::net::IpAddr>().is_ok();
    listen == host || (literal && ["0.0.0.0", "::", ""].contains(&listen.as_str()))
}

/// A browser's request (it carries `Origin`) must come from, and be addressed to, a host this
/// server answers to: DNS rebinding is a browser's doing. Other clients may name the server
/// as they reach it; they need a credential either way.
fn origin_ok(st: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let origin_ok = url::Url::parse(origin)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
        .is_some_and(|h| host_allowed(st, &h));
    let host_ok = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|h| host_allowed(st, host_of(h)));
    origin_ok && host_ok
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

fn bad_request(body: Value) -> Response {
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn post(
    State(st): State<AppState>,
    c: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    if !origin_ok(&st, &headers) {
        return Err(Problem::new(
            Code::AuthForbidden,
            "the request's Origin or Host is not one this server answers to",
        ));
    }
    if body.len() > BODY_MAX {
        return Err(Problem::new(
            Code::ValidationSize,
            "an MCP message is at most 1 MiB",
        ));
    }
    if let Some(v) = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        && !REVISIONS.contains(&v.trim())
    {
        return Ok(bad_request(error(
            Value::Null,
            INVALID_REQUEST,
            format!(
                "unsupported MCP-Protocol-Version {v}; supported: {}",
                REVISIONS.join(", ")
            ),
        )));
    }
    let Ok(value) = serde_json::from_slice::<Value>(&body) else {
        return Ok(bad_request(error(
            Value::Null,
            PARSE_ERROR,
            "the body is not JSON",
        )));
    };
    let message = match serde_json::from_value::<JsonRpcMessage>(value) {
        Ok(m) if m.jsonrpc == "2.0" => m,
        _ => {
            return Ok(bad_request(error(
                Value::Null,
                INVALID_REQUEST,
                "one JSON-RPC 2.0 message per request",
            )));
        }
    };
    let (Some(id), Some(method)) = (message.id, message.method) else {
        // A notification or a response: nothing to answer.
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let params = message.params.unwrap_or(Value::Null);
    let reply = match method.as_str() {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => tools_list(&st, &c).await,
        "tools/call" => tools_call(&st, &c, &params).await,
        other => Err((METHOD_NOT_FOUND, format!("no method {other}"))),
    };
    let answer = match reply {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error(id, code, message),
    };
    Ok(Json(answer).into_response())
}

fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = REVISIONS
        .iter()
        .find(|r| **r == asked)
        .copied()
        .unwrap_or(REVISIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "svc", "title": "svc monitoring and alerting", "version": crate::model::VERSION},
        "instructions": "Tools read and act on this monitoring service as the credential's holder. Write tools run only where the tenant's tool policy allows them; some wait for a person's approval (their result names the action).",
    })
}

async fn tools_list(st: &AppState, c: &Caller) -> Result<Value, (i64, String)> {
    let policy = st.ai.policy(c.principal.tenant).await.map_err(internal)?;
    let listed: Vec<Value> = tools::CATALOG
        .iter()
        .filter(|t| c.principal.allows(t.permission) && policy.mode(t.name, t.write) != ToolMode::Deny)
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema(),
                "annotations": {"readOnlyHint": !t.write, "destructiveHint": false, "openWorldHint": false},
            })
        })
        .collect();
    Ok(json!({"tools": listed}))
}

fn internal(e: crate::ai::AiError) -> (i64, String) {
    (-32603, e.to_string())
}

fn tool_text(value: &Value, is_error: bool) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": value.to_string()}],
        "isError": is_error,
    });
    if value.is_object() {
        result["structuredContent"] = value.clone();
    }
    result
}

async fn tools_call(st: &AppState, c: &Caller, params: &Value) -> Result<Value, (i64, String)> {
    let name = params["name"].as_str().unwrap_or_default();
    let tool =
        tools::find(name).ok_or_else(|| (INVALID_PARAMS, format!("unknown tool {name:?}")))?;
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    match st
        .ai
        .call_tool(&c.principal, &c.actor, tool, args, None)
        .await
    {
        Ok(ToolOutcome::Ran(answer)) => {
            let body = if answer.body.is_object() {
                answer.body.clone()
            } else {
                json!({"result": answer.body})
            };
            Ok(tool_text(&body, !answer.ok()))
        }
        Ok(ToolOutcome::Queued(action)) => Ok(tool_text(
            &json!({"status": "pending", "actionId": action.id, "note": "the tenant's policy makes this tool wait for a person's approval (POST /api/v1/ai/actions/{id}:approve)"}),
            false,
        )),
        Ok(ToolOutcome::Refused(why)) => Ok(tool_text(&json!({"error": why}), true)),
        Err(crate::ai::AiError::Invalid(i)) => Ok(tool_text(
            &json!({"error": format!("{}: {}", i.field, i.detail)}),
            true,
        )),
        Err(e) => Err(internal(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_without_their_ports() {
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8080"), "::1");
        assert_eq!(host_of("example.org"), "example.org");
        assert_eq!(
            initialize(&json!({"protocolVersion": "2025-06-18"}))["protocolVersion"],
            "2025-06-18"
        );
        assert_eq!(
            initialize(&json!({"protocolVersion": "1999-01-01"}))["protocolVersion"],
            "2025-11-25"
        );
    }
}
