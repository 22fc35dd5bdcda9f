//! `/mcp`: the Model Context Protocol over its Streamable HTTP transport with the API's
//! credentials. Both eras: the stateless revision 2026-07-28 (every request carries its
//! protocol version and capabilities, `server/discover` instead of a handshake) and the
//! `initialize` handshake of 2025-11-25, 2025-06-18 and 2025-03-26. Either way one JSON-RPC
//! message per POST, a request answered in the POST's own JSON body, no session kept, so GET
//! (a server-to-client stream) is 405. The tools are the catalog of `ai::tools`, called as the
//! caller under the tenant's policy.

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::router::Route;
use crate::ai::ToolOutcome;
use crate::model::ai::ToolMode;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The revisions of the `initialize` handshake, newest first.
pub const REVISIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The stateless revision: every request self-contained, `server/discover` instead of a
/// handshake.
const MODERN: &str = "2026-07-28";
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const BODY_MAX: usize = 1 << 20;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A JSON-RPC 2.0 message (MCP's `JSONRPCMessage`): a request, a notification or a response.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JsonRpcMessage {
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
}

/// A JSON-RPC 2.0 response as `/mcp` answers (its shape in the OpenAPI document): `result`
/// on success, `error` otherwise.
#[derive(serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JsonRpcResponse {
    /// Always `2.0`.
    pub jsonrpc: String,
    /// The request's id (`null` when the request could not be read).
    pub id: Value,
    /// The method's result (`tools/list`: `{tools}`, `tools/call`: `{content, isError?}`...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonRpcError>,
}

/// A JSON-RPC 2.0 error object.
#[derive(serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JsonRpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/mcp", post).identity().csrf_exempt().doc("mcp", "MCP endpoint (Streamable HTTP)", "One JSON-RPC 2.0 message per POST with the API's credentials (bearer token or session; 401 problem without). Requests are answered 200 `application/json`; notifications and responses 202. Protocol 2026-07-28 (stateless: `params._meta` carries the protocol version and client capabilities, mirrored by `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`; `server/discover`; errors answered 400, or 404 for an unknown method) or the `initialize` handshake of 2025-11-25, 2025-06-18 or 2025-03-26 (`serverInfo.version` is the server version). Methods: `ping`, `tools/list` (the tools of `GET /api/v1/ai/tools` the caller holds and the tenant's policy does not refuse), `tools/call` (runs the tool's API route as the caller: allow runs, ask queues an action in `/api/v1/ai/actions`, deny refuses; a refused or failed call is a result with `isError`). A browser's request (with `Origin`) whose `Origin` or `Host` the configuration does not name is 403 (DNS rebinding); an unsupported `MCP-Protocol-Version`, or a body that is no JSON-RPC message, is 400 with a JSON-RPC error. Not CSRF-wrapped (SPEC 5.7).")
            .no_deadline().body::<JsonRpcMessage>().answers::<JsonRpcResponse>(200).answers_empty(202).answers::<JsonRpcResponse>(400).answers::<JsonRpcResponse>(404).fails(403, "A browser's Origin or Host the configuration does not name"),
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

/// A browser's request (it carries `Origin`) must come from this server's own origin (not
/// another port of a loopback name) and be addressed to a host this server answers to: DNS
/// rebinding is a browser's doing. Other clients may name the server as they reach it; they
/// need a credential either way.
fn origin_ok(st: &AppState, headers: &HeaderMap, secure: bool) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let origin = origin.to_str().unwrap_or("null");
    let origin_ok = url::Url::parse(origin)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
        .is_some_and(|h| host_allowed(st, &h))
        && super::access::own_origin(st, headers, secure, origin);
    let host_ok = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|h| host_allowed(st, host_of(h)));
    origin_ok && host_ok
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// A JSON-RPC error as the transport sends it: 404 for an unknown method, 400 for a request
/// that does not fit (the 2026-07-28 table; earlier revisions read the body either way).
fn rpc_error(id: Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Response {
    let mut body = error(id, code, message);
    if let Some(d) = data {
        body["error"]["data"] = d;
    }
    let status = match code {
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, Json(body)).into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The 2026-07-28 envelope of a request: every request carries its protocol version and the
/// client's capabilities in `params._meta`, mirrored by the `MCP-Protocol-Version`,
/// `Mcp-Method` and (for `tools/call`) `Mcp-Name` headers; no handshake, no session.
fn check_envelope(
    headers: &HeaderMap,
    method: &str,
    params: &Value,
) -> Result<(), (i64, String, Option<Value>)> {
    let meta = &params["_meta"];
    let (Some(version), true) = (meta.get(VERSION_KEY), meta.get(CAPABILITIES_KEY).is_some())
    else {
        return Err((
            INVALID_PARAMS,
            format!("params._meta must carry {VERSION_KEY:?} and {CAPABILITIES_KEY:?}"),
            None,
        ));
    };
    if header(headers, "mcp-protocol-version") != version.as_str() {
        return Err((
            HEADER_MISMATCH,
            "the MCP-Protocol-Version header does not match params._meta".into(),
            None,
        ));
    }
    if header(headers, "mcp-method") != Some(method) {
        return Err((
            HEADER_MISMATCH,
            "the Mcp-Method header does not match the method".into(),
            None,
        ));
    }
    if method == "tools/call"
        && let Some(name) = params["name"].as_str()
        && header(headers, "mcp-name") != Some(name)
    {
        return Err((
            HEADER_MISMATCH,
            "the Mcp-Name header does not match the tool's name".into(),
            None,
        ));
    }
    if version.as_str() != Some(MODERN) {
        let supported: Vec<&str> = REVISIONS.iter().copied().chain([MODERN]).collect();
        return Err((
            UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported protocol version".into(),
            Some(json!({"supported": supported, "requested": version})),
        ));
    }
    Ok(())
}

async fn post(
    State(st): State<AppState>,
    c: Caller,
    tls: Option<axum::Extension<super::access::DirectTls>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let secure = super::access::reached_securely(&st, tls.is_some_and(|t| t.0.0), &headers);
    if !origin_ok(&st, &headers, secure) {
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
    let Ok(value) = serde_json::from_slice::<Value>(&body) else {
        return Ok(rpc_error(
            Value::Null,
            PARSE_ERROR,
            "the body is not JSON",
            None,
        ));
    };
    let message = match serde_json::from_value::<JsonRpcMessage>(value) {
        Ok(m) if m.jsonrpc == "2.0" => m,
        _ => {
            return Ok(rpc_error(
                Value::Null,
                INVALID_REQUEST,
                "one JSON-RPC 2.0 message per request",
                None,
            ));
        }
    };
    let (Some(id), Some(method)) = (message.id, message.method) else {
        // A notification or a response: nothing to answer.
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let params = message.params.unwrap_or(Value::Null);
    let version_header = header(&headers, "mcp-protocol-version");
    let modern = version_header == Some(MODERN) || params["_meta"].get(VERSION_KEY).is_some();
    if modern {
        if let Err((code, message, data)) = check_envelope(&headers, &method, &params) {
            return Ok(rpc_error(id, code, message, data));
        }
    } else if let Some(v) = version_header
        && !REVISIONS.contains(&v)
    {
        let supported: Vec<&str> = REVISIONS.iter().copied().chain([MODERN]).collect();
        return Ok(rpc_error(
            id,
            INVALID_REQUEST,
            format!(
                "unsupported MCP-Protocol-Version {v}; supported: {}",
                supported.join(", ")
            ),
            None,
        ));
    }
    let reply = match method.as_str() {
        "initialize" if !modern => Ok(initialize(&params)),
        "server/discover" if modern => Ok(discover()),
        "ping" => Ok(json!({})),
        "tools/list" => tools_list(&st, &c).await,
        "tools/call" => tools_call(&st, &c, &params).await,
        other => Err((METHOD_NOT_FOUND, format!("no method {other}"))),
    };
    match reply {
        Ok(mut result) => {
            if modern {
                // Required on the 2026-07-28 wire; lists and discovery say how long they keep.
                result["resultType"] = json!("complete");
                if matches!(method.as_str(), "tools/list" | "server/discover") {
                    result["ttlMs"] = json!(0);
                    result["cacheScope"] = json!("private");
                }
            }
            Ok(Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response())
        }
        Err((METHOD_NOT_FOUND, message)) if modern => {
            Ok(rpc_error(id, METHOD_NOT_FOUND, message, None))
        }
        // Earlier revisions answer every request in a 200 body.
        Err((code, message)) => Ok(Json(error(id, code, message)).into_response()),
    }
}

const INSTRUCTIONS: &str = "Tools read and act on this monitoring service as the credential's holder. Write tools run only where the tenant's tool policy allows them; some wait for a person's approval (their result names the action).";

fn server_info() -> Value {
    json!({"name": "svc", "title": "svc monitoring and alerting", "version": crate::model::VERSION})
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
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// `server/discover` (2026-07-28): what `initialize` says, without a handshake.
fn discover() -> Value {
    let supported: Vec<&str> = [MODERN].into_iter().chain(REVISIONS).collect();
    json!({
        "supportedVersions": supported,
        "capabilities": {"tools": {"listChanged": false}},
        "instructions": INSTRUCTIONS,
        "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
    })
}

async fn tools_list(st: &AppState, c: &Caller) -> Result<Value, (i64, String)> {
    let policy = st.ai.policy(c.principal.tenant).await.map_err(internal)?;
    let listed: Vec<Value> = st
        .ai
        .catalog()
        .map_err(internal)?
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
    let catalog = st.ai.catalog().map_err(internal)?;
    let tool = catalog
        .find(name)
        .ok_or_else(|| (INVALID_PARAMS, format!("unknown tool {name:?}")))?;
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
