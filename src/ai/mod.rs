//! The AI agent and the tools assistants use: the tool catalog (`tools`), the tenant's tool
//! policy, provider connections, chats, conversations, the approval queue of write tools and
//! the monthly token budget. A tool call is a request to the API as the caller (`ToolRunner`,
//! implemented by `api`), so nothing here can do what the caller's route could not.

mod actions;
pub mod agent;
mod chats;
mod connections;
mod conversations;
pub mod provider;
pub mod tools;
mod turns;

use crate::auth::Principal;
use crate::config::AiConfig;
use crate::inventory::Inventory;
use crate::model::Timestamp;
use crate::model::ai::{
    Action, ActionStatus, Chat, ChatInput, Connection, ConnectionInput, Conversation, Message,
    ProviderInfo, Role, TokenUse, ToolInfo, ToolMode, ToolPolicy,
};
use crate::model::audit::AuditDraft;
use crate::model::config::Invalid;
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::fault;
use crate::model::identity::Actor;
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::secrets::SecretSource;
use crate::store::{Store, StoreError, Tx};
use crate::store::{TxResult, Wrote};
use provider::{Api, Endpoint};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tools::{ApiAnswer, ApiCall, Catalog, Tool};
use uuid::Uuid;

const POLICY: &str = "ai/policy";
const CONNECTIONS: &str = "ai/connection/";
/// Messages a chat or conversation keeps; older ones give way.
const MESSAGES_KEPT: usize = 200;
const MESSAGE_MAX: usize = 32 * 1024;
const NAME_MAX: usize = 200;
/// Conversations past their retention that one turn deletes at most.
const RETENTION_BATCH: usize = 100;
/// Share of the monthly budget at which the `system` warning is journaled.
const WARN_AT_PERCENT: u64 = 80;

/// Whether the instance is busy with work that comes before AI (results, events,
/// notifications), and why: `app` wires it to the results pipeline.
pub type Pressure = Arc<dyn Fn() -> Option<&'static str> + Send + Sync>;

/// Runs an API request as a principal, from the address its actor came from (the audit
/// entry names it): the port through which tools reach the API.
pub trait ToolRunner: Send + Sync + 'static {
    /// The tools the API's routes declare.
    fn catalog(&self) -> &Catalog;

    fn run<'a>(
        &'a self,
        principal: &'a Principal,
        actor: &'a Actor,
        call: ApiCall,
    ) -> Pin<Box<dyn Future<Output = ApiAnswer> + Send + 'a>>;
}

#[derive(Debug, thiserror::Error)]
pub enum AiError {
    #[error("{0}")]
    Disabled(String),
    /// Turns are at their limit, or other work is backed up: AI work gives way first.
    #[error("AI work gives way: {0}; retry later")]
    Shed(&'static str),
    #[error("a turn is already streaming on this chat")]
    Busy,
    #[error("{0}")]
    Provider(String),
    #[error("{0}")]
    Execute(String),
    #[error("{0}")]
    Conflict(String),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(String),
    #[error("{}: {}", .0.field, .0.detail)]
    Invalid(Invalid),
    #[error("no usable master key to seal the API key with")]
    NoKey,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &str, detail: impl Into<String>) -> AiError {
    AiError::Invalid(Invalid {
        field: field.into(),
        detail: detail.into(),
    })
}

/// The owner string of a principal's records: `user:<id>`, `token:<id>`.
pub fn owner_of(p: &Principal) -> String {
    format!("{}:{}", p.actor_type.as_str(), p.actor_id)
}

fn parse_id(id: &str) -> Result<Uuid, AiError> {
    Uuid::parse_str(id).map_err(|_| AiError::NotFound)
}

fn decode<T: DeserializeOwned>(what: &str, v: Value) -> Option<T> {
    fault::readable(what, serde_json::from_value(v).map_err(|e| e.to_string()))
}

fn encode(what: &str, v: &impl Serialize) -> Value {
    fault::encoded(what, serde_json::to_value(v))
}

/// Releases a chat, a conversation or an action being decided, and a turn's slot, when the
/// work ends, however it ends.
pub struct TurnGuard {
    ai: Arc<Ai>,
    held: Option<Uuid>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if let Some(id) = self.held {
            self.ai.busy.locked().remove(&id);
        }
    }
}

pub struct Ai {
    store: Arc<Store>,
    clock: SharedClock,
    inventory: Arc<Inventory>,
    config: AiConfig,
    http: reqwest::Client,
    busy: Mutex<HashSet<Uuid>>,
    turns: Arc<Semaphore>,
    runner: OnceLock<Arc<dyn ToolRunner>>,
    pressure: Pressure,
    shed: AtomicU64,
}

impl Ai {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        inventory: Arc<Inventory>,
        config: AiConfig,
        pressure: Pressure,
    ) -> Result<Arc<Ai>, String> {
        Ok(Arc::new(Ai {
            http: provider::http()?,
            turns: Arc::new(Semaphore::new(config.max_concurrent_turns)),
            store,
            clock,
            inventory,
            config,
            busy: Mutex::default(),
            runner: OnceLock::new(),
            pressure,
            shed: AtomicU64::new(0),
        }))
    }

    /// Connects the tools to the API (once the router exists).
    pub fn set_runner(&self, runner: Arc<dyn ToolRunner>) {
        let _ = self.runner.set(runner);
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled()
    }

    /// Turns refused because too many ran (AI work is dropped first).
    pub fn shed_count(&self) -> u64 {
        self.shed.load(Ordering::Relaxed)
    }

    /// Turns running now.
    pub fn running(&self) -> u64 {
        (self.config.max_concurrent_turns - self.turns.available_permits()) as u64
    }

    fn require_enabled(&self) -> Result<(), AiError> {
        if self.enabled() {
            Ok(())
        } else {
            Err(AiError::Disabled(
                "the AI agent is off: ai.provider is none in the configuration".into(),
            ))
        }
    }

    fn audit(&self, p: &Principal, actor: &Actor, action: &str, resource: String) -> AuditDraft {
        AuditDraft::new(self.clock.now(), p.tenant, actor, action, resource)
    }

    /// Stores (or removes) one record with its audit entry and `config` event.
    async fn keep(
        &self,
        tenant: Uuid,
        key: String,
        value: Option<Value>,
        audit: AuditDraft,
    ) -> Result<(), AiError> {
        let event = EventDraft::config(tenant, &["ai"], &audit.action, &audit.resource);
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_setting(tenant, &key, value.as_ref())?;
                let audit = match &value {
                    Some(v) => audit.after(v),
                    None => audit,
                };
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// Writes AI records in one transaction with their audit entry and `config` event.
    async fn commit(
        &self,
        tenant: Uuid,
        audit: AuditDraft,
        write: impl FnOnce(&Tx) -> Result<(), StoreError> + Send + 'static,
    ) -> Result<(), AiError> {
        let event = EventDraft::config(tenant, &["ai"], &audit.action, &audit.resource);
        self.store
            .transact(move |tx| -> TxResult<_> {
                write(tx)?;
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    async fn load<T: DeserializeOwned>(
        &self,
        tenant: Uuid,
        key: String,
    ) -> Result<Option<T>, AiError> {
        Ok(self
            .store
            .setting(tenant, key)
            .await?
            .and_then(|v| decode("an AI record", v)))
    }

    async fn load_all<T: DeserializeOwned>(
        &self,
        tenant: Uuid,
        prefix: &str,
    ) -> Result<Vec<T>, AiError> {
        Ok(self
            .store
            .settings_under(tenant, prefix.into())
            .await?
            .into_iter()
            .filter_map(|v| decode("an AI record", v))
            .collect())
    }

    // --- the tool policy and catalogs ---

    pub async fn policy(&self, tenant: Uuid) -> Result<ToolPolicy, AiError> {
        Ok(self.load(tenant, POLICY.into()).await?.unwrap_or_default())
    }

    pub async fn set_policy(
        &self,
        p: &Principal,
        actor: &Actor,
        mut policy: ToolPolicy,
    ) -> Result<ToolPolicy, AiError> {
        for (field, names) in [
            ("autoApprove", &policy.auto_approve),
            ("disabled", &policy.disabled),
            ("ask", &policy.ask),
        ] {
            let catalog = self.catalog()?;
            if let Some(unknown) = names.iter().find(|n| catalog.find(n).is_none()) {
                return Err(invalid(
                    "policy",
                    format!("{field} names {unknown:?}, which is no tool (GET /api/v1/ai/tools)"),
                ));
            }
        }
        if policy.max_rounds == 0 || policy.max_rounds > 32 {
            return Err(invalid("policy", "maxRounds is 1 to 32"));
        }
        let before = self.policy(p.tenant).await?;
        policy.version = before.version + 1;
        let audit = self
            .audit(p, actor, "ai.policy.update", "ai/policy".into())
            .before(&before);
        self.keep(
            p.tenant,
            POLICY.into(),
            Some(encode("the tool policy", &policy)),
            audit,
        )
        .await?;
        Ok(policy)
    }

    /// The catalog with the tenant's policy and whether the caller may call each tool.
    pub async fn tools(&self, p: &Principal) -> Result<Vec<ToolInfo>, AiError> {
        let policy = self.policy(p.tenant).await?;
        Ok(self
            .catalog()?
            .iter()
            .map(|t| t.info(&policy, p.allows(t.permission)))
            .collect())
    }

    pub fn providers(&self) -> Vec<ProviderInfo> {
        let available = self.enabled();
        vec![
            ProviderInfo {
                id: "openai".into(),
                name: "OpenAI-compatible (chat completions)".into(),
                api: "chat-completions".into(),
                default_endpoint: "https://api.openai.com/v1".into(),
                available,
            },
            ProviderInfo {
                id: "anthropic".into(),
                name: "Anthropic-compatible (messages)".into(),
                api: "messages".into(),
                default_endpoint: "https://api.anthropic.com/v1".into(),
                available,
            },
        ]
    }
}

/// What calling a tool came to.
pub enum ToolOutcome {
    Ran(ApiAnswer),
    Queued(Action),
    Refused(String),
}

/// A chat's title: `wanted` (trimmed), which the owner's other chats (`taken`) may not have
/// (409), or the first free "New chat", "New chat 2"...
fn chat_title(wanted: Option<String>, taken: &[&str]) -> Result<String, AiError> {
    let taken = |t: &str| taken.contains(&t);
    match wanted
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
    {
        Some(t) if taken(&t) => Err(AiError::Conflict(format!("a chat named {t:?} exists"))),
        Some(t) => Ok(t),
        None => Ok((1..)
            .map(|n| match n {
                1 => "New chat".to_string(),
                n => format!("New chat {n}"),
            })
            .find(|t| !taken(t))
            .unwrap_or_default()),
    }
}

/// Adds a turn's tokens to the month's use; answers whether the budget warning is due now (the
/// first time the use reaches `WARN_AT_PERCENT` of the budget).
fn charge(usage: &mut TokenUse, tokens: u64, budget: u64) -> bool {
    usage.tokens = usage.tokens.saturating_add(tokens);
    let due =
        !usage.warned && usage.tokens.saturating_mul(100) >= budget.saturating_mul(WARN_AT_PERCENT);
    usage.warned |= due;
    due
}

fn trim(messages: &mut Vec<Message>) {
    if messages.len() > MESSAGES_KEPT {
        messages.drain(..messages.len() - MESSAGES_KEPT);
    }
}

/// The `system` event of SPEC 6.2 once a tenant has used most of its month's tokens.
fn budget_warning(tenant: Uuid, used: u64, budget: u64) -> EventDraft {
    EventDraft::new(
        tenant,
        EventType::System,
        Some(Severity::Warning),
        json!({
            "action": "ai.budget",
            "tokens": used,
            "budget": budget,
            "summary": format!("AI monthly token budget warning: {used} of {budget} tokens used"),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_title_is_asked_for_or_the_first_free_default() {
        assert_eq!(chat_title(Some("  Pumps ".into()), &[]).unwrap(), "Pumps");
        assert!(matches!(
            chat_title(Some("Pumps".into()), &["Pumps"]),
            Err(AiError::Conflict(_))
        ));
        assert_eq!(chat_title(None, &[]).unwrap(), "New chat");
        assert_eq!(
            chat_title(Some(" ".into()), &["New chat", "New chat 2"]).unwrap(),
            "New chat 3"
        );
        assert_eq!(chat_title(None, &["New chat 2"]).unwrap(), "New chat");
    }

    /// The warning is due once, the first time the use reaches 80 % of the budget.
    #[test]
    fn the_budget_warns_once_at_eighty_percent() {
        let mut used = TokenUse::default();
        assert!(!charge(&mut used, 790, 1000));
        assert!(charge(&mut used, 10, 1000));
        assert_eq!((used.tokens, used.warned), (800, true));
        assert!(!charge(&mut used, 500, 1000), "said already");
        assert!(!charge(&mut used, u64::MAX, 1000), "no overflow");
        assert_eq!(used.tokens, u64::MAX);
    }

    #[test]
    fn a_thread_keeps_its_newest_messages() {
        let message = |n: u128| Message {
            id: Uuid::from_u128(n),
            role: Role::User,
            content: String::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: "2026-03-01T08:00:00Z".parse().unwrap(),
        };
        let mut messages: Vec<Message> = (0..MESSAGES_KEPT as u128 + 5).map(message).collect();
        trim(&mut messages);
        assert_eq!(messages.len(), MESSAGES_KEPT);
        assert_eq!(messages[0].id, Uuid::from_u128(5));
        let mut few = vec![message(1)];
        trim(&mut few);
        assert_eq!(few.len(), 1);
    }
}
