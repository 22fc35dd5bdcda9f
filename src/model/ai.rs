//! The AI agent's records as the API shows them: the tool policy, the tool and provider
//! catalogs, provider connections, chats, conversations and proposed actions. Field names are
//! the reference's (`ToolPolicy`, `ConnectionInput`, `chatInput`, `sendInput`,
//! `converseRequest`); what it leaves out is ours.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

/// What the tenant's policy lets a tool do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Runs when the caller holds the tool's permission.
    Allow,
    /// Becomes an action in `/ai/actions` that a person approves or denies.
    Ask,
    /// Refused.
    Deny,
}

/// `GET`/`PUT /api/v1/ai/policy`: the tenant's tool policy. Read tools run unless `disabled`
/// names them; write tools are refused unless `autoApprove` (they run) or `ask` (they wait
/// for a person's approval) names them; `disabled` wins over both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct ToolPolicy {
    /// Write tools that run without asking.
    pub auto_approve: Vec<String>,
    /// Tools refused whatever else says.
    pub disabled: Vec<String>,
    /// Write tools whose calls wait for a person's approval (ours).
    pub ask: Vec<String>,
    /// Model and tool rounds in one turn, 1 to 32.
    pub max_rounds: u32,
    /// Counts the policy's changes (read-only: PUT needs no If-Match, SPEC 9).
    pub version: i64,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        Self {
            auto_approve: Vec::new(),
            disabled: Vec::new(),
            ask: Vec::new(),
            max_rounds: 8,
            version: 0,
        }
    }
}

impl ToolPolicy {
    pub fn mode(&self, tool: &str, write: bool) -> ToolMode {
        let named = |list: &[String]| list.iter().any(|t| t == tool);
        if named(&self.disabled) {
            ToolMode::Deny
        } else if !write || named(&self.auto_approve) {
            ToolMode::Allow
        } else if named(&self.ask) {
            ToolMode::Ask
        } else {
            ToolMode::Deny
        }
    }
}

/// One entry of `GET /api/v1/ai/tools` (and of MCP's `tools/list`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// The permission of the API route the tool calls.
    pub permission: String,
    /// Whether it changes anything.
    pub write: bool,
    /// What the tenant's policy lets it do.
    pub policy: ToolMode,
    /// Whether the caller holds `permission`.
    pub permitted: bool,
    /// The API route it calls, `METHOD /path`.
    pub route: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
}

/// One entry of `GET /api/v1/ai/providers`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    /// The value of a connection's `provider`.
    pub id: String,
    pub name: String,
    /// The wire format: `chat-completions` or `messages`.
    pub api: String,
    pub default_endpoint: String,
    /// Whether the instance's configuration lets connections use it (`ai.provider` set).
    pub available: bool,
}

/// `POST`/`PUT /api/v1/ai/connections`: the reference's `ConnectionInput`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionInput {
    pub name: String,
    /// `openai` or `anthropic` (`GET /ai/providers`).
    pub provider: String,
    /// Write-only: sealed as a secret of the tenant, never returned. Left out on PUT, the
    /// stored key stays; an empty string removes it.
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub default_model: Option<String>,
    #[serde(default)]
    pub disabled: bool,
    /// Base URL; the provider's default when left out. Must be one the configuration names.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Extra request headers for the provider (`OpenAI-Organization`, `anthropic-version`).
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
    /// Tenant-wide (needs `admin:ai`) rather than the caller's own.
    #[serde(default)]
    pub shared: bool,
}

/// A provider connection as stored and shown (the key never is).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub id: Uuid,
    pub name: String,
    pub provider: String,
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    pub disabled: bool,
    pub extra: BTreeMap<String, String>,
    pub shared: bool,
    /// The owner's actor id (`user:<id>`, `token:<id>`); none when shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Whether a key is stored.
    pub has_api_key: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// `POST`/`PUT /api/v1/ai/chats`: the reference's `chatInput`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatInput {
    #[serde(default)]
    pub connection_id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// Opaque settings of the client (base64), kept as given.
    #[serde(default)]
    pub settings: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
}

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    Tool,
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: Uuid,
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// With `tool`: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub created_at: Timestamp,
}

/// A chat (`GET /ai/chats/{id}` adds its `messages`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Chat {
    pub id: Uuid,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The owner's actor id: chats are their owner's alone.
    pub owner: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
}

/// `POST /api/v1/ai/chat`: the reference's `sendInput` (the AI SDK's chat request: `trigger`
/// `submit-message` or `regenerate-message`, `messageId` the message regenerated from).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SendInput {
    pub chat_id: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub trigger: Option<String>,
}

/// `POST /api/v1/ai/conversations`: the reference's `converseRequest`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConverseRequest {
    #[serde(default)]
    pub conversation_id: Option<String>,
    pub message: String,
}

/// A conversation with the assistant through the instance connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: Uuid,
    pub title: String,
    pub owner: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// In the transcript (`GET /ai/conversations/{id}` and the answer of a POST).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// The assistant's answer to this POST's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ActionStatus {
    /// Waiting for a person.
    Pending,
    /// Approved and run.
    Executed,
    /// Approved, and the call failed.
    Failed,
    Denied,
}

impl ActionStatus {
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(Value::String(s.to_string())).ok()
    }
}

/// A write tool's call waiting for (or decided by) a person: `GET /api/v1/ai/actions`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub id: Uuid,
    pub tool: String,
    pub arguments: Value,
    /// `METHOD /path` it will call.
    pub route: String,
    pub status: ActionStatus,
    /// Who proposed it: the actor type and id of the caller (`ai_agent` for an AI token).
    pub proposed_by: String,
    /// The chat it came from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<Uuid>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Timestamp>,
    /// The HTTP status of the call once run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<u16>,
    /// The call's answer once run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// A tenant's token use in one calendar month (UTC), and whether it was warned of its budget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUse {
    pub tokens: u64,
    pub warned: bool,
}

/// `POST /api/v1/ai/connections/{id}:test`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTest {
    pub ok: bool,
    /// Models the provider lists.
    pub models: usize,
    pub latency_ms: u64,
}

/// One entry of `GET /api/v1/ai/connections/{id}/models`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_tools_are_refused_until_the_policy_names_them() {
        let mut p = ToolPolicy::default();
        assert_eq!(p.mode("alerts_list", false), ToolMode::Allow);
        assert_eq!(p.mode("alert_ack", true), ToolMode::Deny);
        p.ask.push("alert_ack".into());
        assert_eq!(p.mode("alert_ack", true), ToolMode::Ask);
        p.auto_approve.push("alert_ack".into());
        assert_eq!(p.mode("alert_ack", true), ToolMode::Allow);
        p.disabled
            .extend(["alert_ack".to_string(), "alerts_list".into()]);
        assert_eq!(p.mode("alert_ack", true), ToolMode::Deny);
        assert_eq!(p.mode("alerts_list", false), ToolMode::Deny);
    }
}
