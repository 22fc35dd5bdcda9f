//! Clients of the two published wire formats a connection may speak: OpenAI's chat
//! completions (streamed, with tool calls; what most local model servers and gateways serve)
//! and Anthropic's messages (one answer per call, with tool use). Outbound through svc's own
//! client: rustls, no redirects, a deadline, answers capped.

use crate::model::ai::{Message, Role, ToolCall};
use crate::runtime::outbound;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The most a provider's answer may be.
const ANSWER_MAX: usize = 4 << 20;
const TIMEOUT: Duration = Duration::from_secs(120);
const ANTHROPIC_VERSION: &str = "2023-06-01";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    ChatCompletions,
    Messages,
}

impl Api {
    pub fn of(provider: &str) -> Option<Api> {
        match provider {
            "openai" => Some(Api::ChatCompletions),
            "anthropic" => Some(Api::Messages),
            _ => None,
        }
    }
}

/// Where and how to reach one provider.
#[derive(Clone)]
pub struct Endpoint {
    pub api: Api,
    /// The base URL, without a trailing slash (`…/v1`).
    pub base: String,
    pub api_key: Option<String>,
    pub extra: BTreeMap<String, String>,
}

/// A tool as the model sees it.
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// What the model answered in one call.
#[derive(Debug, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub tokens: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the provider answered {status}: {detail}")]
    Refused { status: u16, detail: String },
    #[error("the provider's answer does not read: {0}")]
    Malformed(String),
}

pub fn http() -> Result<reqwest::Client, String> {
    outbound::client(TIMEOUT)
        .build()
        .map_err(|e| outbound::error_text(&e))
}

impl Endpoint {
    fn request(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let mut r = http.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.api_key {
            r = match self.api {
                Api::ChatCompletions => r.bearer_auth(key),
                Api::Messages => r.header("x-api-key", key),
            };
        }
        if self.api == Api::Messages && !self.extra.contains_key("anthropic-version") {
            r = r.header("anthropic-version", ANTHROPIC_VERSION);
        }
        for (k, v) in &self.extra {
            r = r.header(k.as_str(), v.as_str());
        }
        r
    }

    fn post_json(
        &self,
        http: &reqwest::Client,
        path: &str,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        self.request(http, reqwest::Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Result<reqwest::Response, ProviderError> {
        let res = r
            .send()
            .await
            .map_err(|e| ProviderError::Unreachable(outbound::error_text(&e)))?;
        let status = res.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(res);
        }
        let body = read_capped(res).await.unwrap_or_default();
        let detail = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| {
                v.pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
        Err(ProviderError::Refused { status, detail })
    }

    /// The models the provider lists (`GET /models`, in both formats).
    pub async fn models(&self, http: &reqwest::Client) -> Result<Vec<String>, ProviderError> {
        let res = self
            .send(self.request(http, reqwest::Method::GET, "/models"))
            .await?;
        let body: Value = serde_json::from_slice(&read_capped(res).await?)
            .map_err(|e| ProviderError::Malformed(e.to_string()))?;
        let data = body["data"]
            .as_array()
            .ok_or_else(|| ProviderError::Malformed("no data list".into()))?;
        Ok(data
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect())
    }

    /// One call: the conversation so far and the tools, answered with text and tool calls;
    /// `delta` sees the text as it streams.
    pub async fn complete(
        &self,
        http: &reqwest::Client,
        model: &str,
        system: &str,
        history: &[Message],
        tools: &[ToolSpec],
        delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Reply, ProviderError> {
        match self.api {
            Api::ChatCompletions => {
                let body = chat_completions_body(model, system, history, tools);
                let res = self
                    .send(self.post_json(http, "/chat/completions", &body))
                    .await?;
                read_stream(res, delta).await
            }
            Api::Messages => {
                let body = messages_body(model, system, history, tools);
                let res = self.send(self.post_json(http, "/messages", &body)).await?;
                let body: Value = serde_json::from_slice(&read_capped(res).await?)
                    .map_err(|e| ProviderError::Malformed(e.to_string()))?;
                let reply = messages_reply(&body)?;
                if !reply.text.is_empty() {
                    delta(&reply.text);
                }
                Ok(reply)
            }
        }
    }
}

async fn read_capped(mut res: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
    let mut out = Vec::new();
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| ProviderError::Unreachable(outbound::error_text(&e)))?
    {
        out.extend_from_slice(&chunk);
        if out.len() > ANSWER_MAX {
            return Err(ProviderError::Malformed(
                "the answer is larger than 4 MiB".into(),
            ));
        }
    }
    Ok(out)
}

fn chat_completions_body(
    model: &str,
    system: &str,
    history: &[Message],
    tools: &[ToolSpec],
) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system})];
    for m in history {
        messages.push(match m.role {
            Role::User => json!({"role": "user", "content": m.content}),
            Role::Assistant if m.tool_calls.is_empty() => {
                json!({"role": "assistant", "content": m.content})
            }
            Role::Assistant => json!({
                "role": "assistant",
                "content": if m.content.is_empty() { Value::Null } else { Value::String(m.content.clone()) },
                "tool_calls": m.tool_calls.iter().map(|c| json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments.to_string()},
                })).collect::<Vec<_>>(),
            }),
            Role::Tool => json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id,
                "content": m.content,
            }),
        });
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    body
}

/// A tool call as it streams: its id and name come first, its arguments in pieces.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Reads a chat-completions event stream (`data: {chunk}` lines, `data: [DONE]` last).
async fn read_stream(
    mut res: reqwest::Response,
    delta: &mut (dyn FnMut(&str) + Send),
) -> Result<Reply, ProviderError> {
    let mut pending = Vec::new();
    let mut read = 0usize;
    let mut reply = Reply::default();
    let mut calls: BTreeMap<u64, PartialCall> = BTreeMap::new();
    'stream: while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| ProviderError::Unreachable(outbound::error_text(&e)))?
    {
        read += chunk.len();
        if read > ANSWER_MAX {
            return Err(ProviderError::Malformed(
                "the answer is larger than 4 MiB".into(),
            ));
        }
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                break 'stream;
            }
            let v: Value =
                serde_json::from_str(data).map_err(|e| ProviderError::Malformed(e.to_string()))?;
            take_chunk(&v, &mut reply, &mut calls, delta);
        }
    }
    for (_, c) in calls {
        let arguments = if c.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments))
        };
        reply.tool_calls.push(ToolCall {
            id: c.id,
            name: c.name,
            arguments,
        });
    }
    Ok(reply)
}

fn take_chunk(
    v: &Value,
    reply: &mut Reply,
    calls: &mut BTreeMap<u64, PartialCall>,
    delta: &mut (dyn FnMut(&str) + Send),
) {
    if let Some(total) = v.pointer("/usage/total_tokens").and_then(Value::as_u64) {
        reply.tokens = total;
    }
    let Some(d) = v.pointer("/choices/0/delta") else {
        return;
    };
    if let Some(text) = d["content"].as_str().filter(|t| !t.is_empty()) {
        reply.text.push_str(text);
        delta(text);
    }
    for c in d["tool_calls"].as_array().into_iter().flatten() {
        let call = calls.entry(c["index"].as_u64().unwrap_or(0)).or_default();
        if let Some(id) = c["id"].as_str() {
            call.id = id.to_string();
        }
        if let Some(name) = c.pointer("/function/name").and_then(Value::as_str) {
            call.name.push_str(name);
        }
        if let Some(args) = c.pointer("/function/arguments").and_then(Value::as_str) {
            call.arguments.push_str(args);
        }
    }
}

fn messages_body(model: &str, system: &str, history: &[Message], tools: &[ToolSpec]) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in history {
        let (role, blocks) = match m.role {
            Role::User => ("user", vec![json!({"type": "text", "text": m.content})]),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                ("assistant", blocks)
            }
            Role::Tool => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}),
                ],
            ),
        };
        // Consecutive blocks of one role are one message in this format.
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": 2048,
        "system": system,
        "messages": messages,
    });
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

fn messages_reply(body: &Value) -> Result<Reply, ProviderError> {
    let content = body["content"]
        .as_array()
        .ok_or_else(|| ProviderError::Malformed("no content".into()))?;
    let mut reply = Reply::default();
    for block in content {
        match block["type"].as_str() {
            Some("text") => reply
                .text
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => reply.tool_calls.push(ToolCall {
                id: block["id"].as_str().unwrap_or_default().to_string(),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                arguments: block["input"].clone(),
            }),
            _ => {}
        }
    }
    reply.tokens = body
        .pointer("/usage/input_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        + body
            .pointer("/usage/output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use uuid::Uuid;

    fn msg(role: Role, content: &str, calls: Vec<ToolCall>, call_id: Option<&str>) -> Message {
        Message {
            id: Uuid::nil(),
            role,
            content: content.into(),
            tool_calls: calls,
            tool_call_id: call_id.map(str::to_string),
            created_at: Timestamp(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    fn history() -> Vec<Message> {
        let call = ToolCall {
            id: "c1".into(),
            name: "alerts_list".into(),
            arguments: json!({"status": "open"}),
        };
        vec![
            msg(Role::User, "what is open?", vec![], None),
            msg(Role::Assistant, "", vec![call], None),
            msg(Role::Tool, "{\"items\":[]}", vec![], Some("c1")),
        ]
    }

    #[test]
    fn chat_completions_carry_tool_calls_and_results() {
        let body = chat_completions_body("m", "sys", &history(), &[]);
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"status\":\"open\"}"
        );
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(m[3]["tool_call_id"], "c1");
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn streamed_chunks_assemble_text_and_calls() {
        let mut reply = Reply::default();
        let mut calls = BTreeMap::new();
        let mut seen = String::new();
        let mut delta = |t: &str| seen.push_str(t);
        for chunk in [
            json!({"choices": [{"delta": {"content": "Look"}}]}),
            json!({"choices": [{"delta": {"content": "ing"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c9", "function": {"name": "alert_ack", "arguments": "{\"id\":"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"a1\"}"}}]}}]}),
            json!({"choices": [], "usage": {"total_tokens": 42}}),
        ] {
            take_chunk(&chunk, &mut reply, &mut calls, &mut delta);
        }
        assert_eq!(seen, "Looking");
        assert_eq!(reply.text, "Looking");
        assert_eq!(reply.tokens, 42);
        let c = &calls[&0];
        assert_eq!(
            (c.id.as_str(), c.name.as_str(), c.arguments.as_str()),
            ("c9", "alert_ack", "{\"id\":\"a1\"}")
        );
    }

    #[test]
    fn messages_merge_tool_results_into_one_user_turn() {
        let body = messages_body("m", "sys", &history(), &[]);
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["content"][0]["type"], "tool_use");
        assert_eq!(m[2]["role"], "user");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "c1");
        let reply = messages_reply(&json!({
            "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "n", "input": {"a": 1}}],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }))
        .unwrap();
        assert_eq!(reply.tokens, 7);
        assert_eq!(reply.tool_calls[0].arguments, json!({"a": 1}));
    }
}
