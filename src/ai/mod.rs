//! The AI agent and the tools assistants use: the tool catalog (`tools`), the tenant's tool
//! policy, provider connections, chats, conversations, the approval queue of write tools and
//! the monthly token budget. A tool call is a request to the API as the caller (`ToolRunner`,
//! implemented by `api`), so nothing here can do what the caller's route could not.

pub mod agent;
pub mod provider;
pub mod tools;

use crate::auth::Principal;
use crate::config::AiConfig;
use crate::inventory::Inventory;
use crate::model::Timestamp;
use crate::model::ai::{
    Action, ActionStatus, Chat, ChatInput, Connection, ConnectionInput, Conversation, Message,
    ProviderInfo, Role, ToolInfo, ToolMode, ToolPolicy,
};
use crate::model::audit::AuditDraft;
use crate::model::config::Invalid;
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::fault;
use crate::model::identity::Actor;
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::secrets::SecretSource;
use crate::store::{Store, StoreError};
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
const CHATS: &str = "ai/chat/";
const CONVERSATIONS: &str = "ai/conversation/";
const ACTIONS: &str = "ai/action/";
const USAGE: &str = "ai/usage/";
/// Messages a chat or conversation keeps; older ones give way.
const MESSAGES_KEPT: usize = 200;
const MESSAGE_MAX: usize = 32 * 1024;
const NAME_MAX: usize = 200;
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

/// Monthly token use of a tenant.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    tokens: u64,
    warned: bool,
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
                    Some(v) => audit.after(without_messages(v)),
                    None => audit,
                };
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

    // --- calling a tool under the policy ---

    /// Calls `tool` as `p` under the tenant's policy: runs it (allow), queues it as an action
    /// (ask) or refuses it (deny). What the caller or the model reads back.
    pub async fn call_tool(
        &self,
        p: &Principal,
        actor: &Actor,
        tool: &Tool,
        args: Value,
        chat: Option<Uuid>,
    ) -> Result<ToolOutcome, AiError> {
        let call = tool.request(&args).map_err(|e| invalid("arguments", e))?;
        if !p.allows(tool.permission) {
            return Ok(ToolOutcome::Refused(format!(
                "the caller lacks the permission {} the tool needs",
                tool.permission
            )));
        }
        match self.policy(p.tenant).await?.mode(tool.name, tool.write) {
            ToolMode::Deny => Ok(ToolOutcome::Refused(format!(
                "the tenant's tool policy does not allow {}",
                tool.name
            ))),
            ToolMode::Ask => {
                let action = self.propose(p, actor, tool, args, chat).await?;
                Ok(ToolOutcome::Queued(action))
            }
            ToolMode::Allow => Ok(ToolOutcome::Ran(self.runner()?.run(p, actor, call).await)),
        }
    }

    fn runner(&self) -> Result<&Arc<dyn ToolRunner>, AiError> {
        self.runner
            .get()
            .ok_or_else(|| AiError::Execute("the tools are not connected yet".into()))
    }

    /// The tools, as the API's routes declare them.
    pub fn catalog(&self) -> Result<&Catalog, AiError> {
        Ok(self.runner()?.catalog())
    }

    async fn propose(
        &self,
        p: &Principal,
        actor: &Actor,
        tool: &Tool,
        arguments: Value,
        chat: Option<Uuid>,
    ) -> Result<Action, AiError> {
        let id = self.clock.new_id();
        let action = Action {
            id,
            tool: tool.name.into(),
            arguments,
            route: tool.route(),
            status: ActionStatus::Pending,
            proposed_by: owner_of(p),
            chat_id: chat,
            created_at: self.clock.now(),
            decided_by: None,
            decided_at: None,
            result_status: None,
            result: None,
        };
        let audit = self.audit(p, actor, "ai.action.propose", format!("ai/action/{id}"));
        self.keep(
            p.tenant,
            format!("{ACTIONS}{id}"),
            Some(encode("an action", &action)),
            audit,
        )
        .await?;
        Ok(action)
    }

    pub async fn actions(
        &self,
        tenant: Uuid,
        status: Option<ActionStatus>,
    ) -> Result<Vec<Action>, AiError> {
        let mut all: Vec<Action> = self.load_all(tenant, ACTIONS).await?;
        all.retain(|a| status.is_none_or(|s| a.status == s));
        all.reverse();
        Ok(all)
    }

    async fn pending_action(&self, tenant: Uuid, id: &str) -> Result<Action, AiError> {
        let id = parse_id(id)?;
        let action: Action = self
            .load(tenant, format!("{ACTIONS}{id}"))
            .await?
            .ok_or(AiError::NotFound)?;
        if action.status != ActionStatus::Pending {
            return Err(AiError::Conflict(
                format!("the action is {:?} already", action.status).to_lowercase(),
            ));
        }
        Ok(action)
    }

    /// Approves a pending action and runs it as the approver, with the approver's
    /// permissions: a person answers for what runs.
    pub async fn approve(
        self: &Arc<Self>,
        p: &Principal,
        actor: &Actor,
        id: &str,
    ) -> Result<Action, AiError> {
        let _held = self.hold(parse_id(id)?)?;
        let mut action = self.pending_action(p.tenant, id).await?;
        let tool = self
            .catalog()?
            .find(&action.tool)
            .ok_or_else(|| AiError::Execute("the tool no longer exists".into()))?;
        if !p.allows(tool.permission) {
            return Err(AiError::Forbidden(tool.permission.into()));
        }
        let call = tool.request(&action.arguments).map_err(AiError::Execute)?;
        let answer = self.runner()?.run(p, actor, call).await;
        let status = if answer.ok() {
            ActionStatus::Executed
        } else {
            ActionStatus::Failed
        };
        action.result_status = Some(answer.status);
        action.result = Some(answer.body.clone());
        let action = self.decided(p, actor, action, status, "approve").await?;
        if !answer.ok() {
            let detail = answer.body["detail"]
                .as_str()
                .map_or_else(|| answer.body.to_string(), str::to_string);
            return Err(AiError::Execute(format!(
                "{} answered {}: {detail}",
                action.route, answer.status
            )));
        }
        Ok(action)
    }

    pub async fn deny(
        self: &Arc<Self>,
        p: &Principal,
        actor: &Actor,
        id: &str,
    ) -> Result<Action, AiError> {
        let _held = self.hold(parse_id(id)?)?;
        let action = self.pending_action(p.tenant, id).await?;
        self.decided(p, actor, action, ActionStatus::Denied, "deny")
            .await
    }

    /// Keeps a person's decision on an action, with its audit entry (`ai.action.<verb>`).
    async fn decided(
        &self,
        p: &Principal,
        actor: &Actor,
        mut action: Action,
        status: ActionStatus,
        verb: &str,
    ) -> Result<Action, AiError> {
        action.status = status;
        action.decided_by = Some(owner_of(p));
        action.decided_at = Some(self.clock.now());
        let audit = self.audit(
            p,
            actor,
            &format!("ai.action.{verb}"),
            format!("ai/action/{}", action.id),
        );
        self.keep(
            p.tenant,
            format!("{ACTIONS}{}", action.id),
            Some(encode("an action", &action)),
            audit,
        )
        .await?;
        Ok(action)
    }

    // --- connections ---

    fn secret_name(id: Uuid) -> String {
        format!("ai-connection-{}", id.simple())
    }

    /// Whether the configuration lets connections reach `endpoint`.
    fn endpoint_allowed(&self, endpoint: &str) -> bool {
        let named = self.config.instance_endpoint().into_iter().chain(
            self.config
                .endpoints
                .iter()
                .map(|e| e.trim_end_matches('/').to_string()),
        );
        let defaults =
            ["https://api.openai.com/v1", "https://api.anthropic.com/v1"].map(String::from);
        named.chain(defaults).any(|allowed| allowed == endpoint)
    }

    fn visible(p: &Principal, c: &Connection) -> bool {
        c.shared || c.owner.as_deref() == Some(owner_of(p).as_str())
    }

    pub async fn connections(&self, p: &Principal) -> Result<Vec<Connection>, AiError> {
        self.require_enabled()?;
        let mut all: Vec<Connection> = self.load_all(p.tenant, CONNECTIONS).await?;
        all.retain(|c| Self::visible(p, c));
        Ok(all)
    }

    pub async fn connection(&self, p: &Principal, id: &str) -> Result<Connection, AiError> {
        self.require_enabled()?;
        let id = parse_id(id)?;
        self.load(p.tenant, format!("{CONNECTIONS}{id}"))
            .await?
            .filter(|c| Self::visible(p, c))
            .ok_or(AiError::NotFound)
    }

    /// Checks an input and says the connection's endpoint.
    fn admit(&self, input: &ConnectionInput) -> Result<String, AiError> {
        let name = input.name.trim();
        if name.is_empty() || name.len() > NAME_MAX || name.chars().any(char::is_control) {
            return Err(invalid("name", "1 to 200 printable characters"));
        }
        let default = match input.provider.as_str() {
            "openai" => "https://api.openai.com/v1",
            "anthropic" => "https://api.anthropic.com/v1",
            other => {
                return Err(invalid(
                    "provider",
                    format!("{other:?} is not openai or anthropic (GET /api/v1/ai/providers)"),
                ));
            }
        };
        let endpoint = input
            .endpoint
            .as_deref()
            .filter(|e| !e.is_empty())
            .unwrap_or(default)
            .trim_end_matches('/')
            .to_string();
        if !self.endpoint_allowed(&endpoint) {
            return Err(invalid(
                "endpoint",
                format!("{endpoint} is not named by the configuration (ai.endpoint, ai.endpoints)"),
            ));
        }
        for (k, v) in &input.extra {
            let header_ok = reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(v).is_ok();
            let reserved = [
                "authorization",
                "x-api-key",
                "host",
                "content-length",
                "content-type",
                "transfer-encoding",
                "connection",
            ]
            .contains(&k.to_ascii_lowercase().as_str());
            if !header_ok || reserved {
                return Err(invalid(
                    "extra",
                    format!("{k:?} is not a header a connection may set"),
                ));
            }
        }
        Ok(endpoint)
    }

    async fn name_taken(
        &self,
        p: &Principal,
        name: &str,
        shared: bool,
        except: Option<Uuid>,
    ) -> Result<bool, AiError> {
        let owner = owner_of(p);
        let all: Vec<Connection> = self.load_all(p.tenant, CONNECTIONS).await?;
        Ok(all.iter().any(|c| {
            Some(c.id) != except
                && c.name == name
                && c.shared == shared
                && (shared || c.owner.as_deref() == Some(owner.as_str()))
        }))
    }

    pub async fn create_connection(
        &self,
        p: &Principal,
        actor: &Actor,
        input: ConnectionInput,
    ) -> Result<Connection, AiError> {
        self.require_enabled()?;
        if input.shared && !p.allows("admin:ai") {
            return Err(AiError::Forbidden("admin:ai".into()));
        }
        let endpoint = self.admit(&input)?;
        let name = input.name.trim().to_string();
        if self.name_taken(p, &name, input.shared, None).await? {
            return Err(AiError::Conflict(format!(
                "a connection named {name:?} exists"
            )));
        }
        let id = self.clock.new_id();
        let now = self.clock.now();
        let key = input.api_key.filter(|k| !k.is_empty());
        let sealed = match &key {
            Some(k) => Some(
                self.inventory
                    .seal(p.tenant, &Self::secret_name(id), k)
                    .map_err(|_| AiError::NoKey)?,
            ),
            None => None,
        };
        let connection = Connection {
            id,
            name,
            provider: input.provider,
            endpoint,
            default_model: input.default_model.filter(|m| !m.is_empty()),
            disabled: input.disabled,
            extra: input.extra,
            shared: input.shared,
            owner: (!input.shared).then(|| owner_of(p)),
            has_api_key: sealed.is_some(),
            created_at: now,
            updated_at: now,
        };
        self.store_connection(
            p,
            actor,
            "ai.connection.create",
            &connection,
            None,
            sealed,
            false,
        )
        .await?;
        Ok(connection)
    }

    #[allow(clippy::too_many_arguments)]
    async fn store_connection(
        &self,
        p: &Principal,
        actor: &Actor,
        action: &str,
        connection: &Connection,
        before: Option<&Connection>,
        sealed: Option<crate::model::secret::StoredSecret>,
        remove_key: bool,
    ) -> Result<(), AiError> {
        let tenant = p.tenant;
        let key = format!("{CONNECTIONS}{}", connection.id);
        let secret = Self::secret_name(connection.id);
        let value = encode("a connection", connection);
        let mut audit = self
            .audit(p, actor, action, format!("ai/connection/{}", connection.id))
            .after(&value);
        if let Some(b) = before {
            audit = audit.before(b);
        }
        let event = EventDraft::config(tenant, &["ai"], action, &audit.resource);
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_setting(tenant, &key, Some(&value))?;
                if let Some(mut s) = sealed {
                    tx.put_secret(&mut s)?;
                } else if remove_key {
                    tx.remove_secret(tenant, &secret)?;
                }
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    fn may_change(p: &Principal, c: &Connection) -> Result<(), AiError> {
        if c.shared && !p.allows("admin:ai") {
            return Err(AiError::Forbidden("admin:ai".into()));
        }
        Ok(())
    }

    pub async fn update_connection(
        &self,
        p: &Principal,
        actor: &Actor,
        id: &str,
        input: ConnectionInput,
    ) -> Result<Connection, AiError> {
        let before = self.connection(p, id).await?;
        Self::may_change(p, &before)?;
        if input.shared != before.shared {
            return Err(invalid(
                "shared",
                "a connection stays personal or shared; create another",
            ));
        }
        let endpoint = self.admit(&input)?;
        let name = input.name.trim().to_string();
        if self
            .name_taken(p, &name, before.shared, Some(before.id))
            .await?
        {
            return Err(AiError::Conflict(format!(
                "a connection named {name:?} exists"
            )));
        }
        let (sealed, remove_key, has_api_key) = match input.api_key.as_deref() {
            None => (None, false, before.has_api_key),
            Some("") => (None, true, false),
            Some(k) => (
                Some(
                    self.inventory
                        .seal(p.tenant, &Self::secret_name(before.id), k)
                        .map_err(|_| AiError::NoKey)?,
                ),
                false,
                true,
            ),
        };
        let connection = Connection {
            name,
            provider: input.provider,
            endpoint,
            default_model: input.default_model.filter(|m| !m.is_empty()),
            disabled: input.disabled,
            extra: input.extra,
            has_api_key,
            updated_at: self.clock.now(),
            ..before.clone()
        };
        self.store_connection(
            p,
            actor,
            "ai.connection.update",
            &connection,
            Some(&before),
            sealed,
            remove_key,
        )
        .await?;
        Ok(connection)
    }

    pub async fn delete_connection(
        &self,
        p: &Principal,
        actor: &Actor,
        id: &str,
        shared: bool,
    ) -> Result<(), AiError> {
        let c = self.connection(p, id).await?;
        if shared && !c.shared {
            return Err(AiError::NotFound);
        }
        Self::may_change(p, &c)?;
        let tenant = p.tenant;
        let key = format!("{CONNECTIONS}{}", c.id);
        let secret = Self::secret_name(c.id);
        let audit = self
            .audit(
                p,
                actor,
                "ai.connection.delete",
                format!("ai/connection/{}", c.id),
            )
            .before(&c);
        let event = EventDraft::config(tenant, &["ai"], &audit.action, &audit.resource);
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_setting(tenant, &key, None)?;
                tx.remove_secret(tenant, &secret)?;
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    async fn endpoint_of(&self, tenant: Uuid, c: &Connection) -> Result<Endpoint, AiError> {
        let api = Api::of(&c.provider)
            .ok_or_else(|| AiError::Provider(format!("unknown provider {}", c.provider)))?;
        let api_key = if c.has_api_key {
            Some(
                self.inventory
                    .secret(tenant, &Self::secret_name(c.id))
                    .await
                    .ok_or(AiError::NoKey)?,
            )
        } else {
            None
        };
        Ok(Endpoint {
            api,
            base: c.endpoint.clone(),
            api_key,
            extra: c.extra.clone(),
        })
    }

    /// The instance connection of the configuration, if it names a model.
    fn instance_endpoint(&self) -> Option<(Endpoint, String)> {
        let api = Api::of(&self.config.provider)?;
        let model = self.config.model.clone()?;
        Some((
            Endpoint {
                api,
                base: self.config.instance_endpoint()?,
                api_key: (!self.config.api_key.is_empty()).then(|| self.config.api_key.0.clone()),
                extra: Default::default(),
            },
            model,
        ))
    }

    pub async fn models(&self, p: &Principal, id: &str) -> Result<Vec<String>, AiError> {
        let c = self.connection(p, id).await?;
        let endpoint = self.endpoint_of(p.tenant, &c).await?;
        endpoint
            .models(&self.http)
            .await
            .map_err(|e| AiError::Provider(e.to_string()))
    }

    // --- chats ---

    /// The caller's records under `prefix`, without what a list leaves out.
    async fn own_records<T: Owned>(&self, p: &Principal, prefix: &str) -> Result<Vec<T>, AiError> {
        self.require_enabled()?;
        let owner = owner_of(p);
        let mut all: Vec<T> = self.load_all(p.tenant, prefix).await?;
        all.retain(|r| r.owner() == owner);
        for r in &mut all {
            r.summarise();
        }
        Ok(all)
    }

    /// One of the caller's records; another's is not found.
    async fn own_record<T: Owned>(
        &self,
        p: &Principal,
        prefix: &str,
        id: &str,
    ) -> Result<T, AiError> {
        self.require_enabled()?;
        let id = parse_id(id)?;
        let owner = owner_of(p);
        self.load::<T>(p.tenant, format!("{prefix}{id}"))
            .await?
            .filter(|r| r.owner() == owner)
            .ok_or(AiError::NotFound)
    }

    /// The caller's chats, newest first.
    pub async fn chats(&self, p: &Principal) -> Result<Vec<Chat>, AiError> {
        let mut all: Vec<Chat> = self.own_records(p, CHATS).await?;
        all.reverse();
        Ok(all)
    }

    pub async fn chat(&self, p: &Principal, id: &str) -> Result<Chat, AiError> {
        self.own_record(p, CHATS, id).await
    }

    async fn chat_settings(
        &self,
        p: &Principal,
        input: &ChatInput,
    ) -> Result<Option<Uuid>, AiError> {
        if let Some(t) = &input.title
            && (t.len() > NAME_MAX || t.chars().any(char::is_control))
        {
            return Err(invalid("title", "at most 200 printable characters"));
        }
        if let Some(s) = &input.settings
            && s.len() > 16 * 1024
        {
            return Err(invalid("settings", "at most 16 KiB"));
        }
        match input.connection_id.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => Ok(Some(
                self.connection(p, c)
                    .await
                    .map_err(|e| match e {
                        AiError::NotFound => invalid("connectionId", "no such connection"),
                        e => e,
                    })?
                    .id,
            )),
            None => Ok(None),
        }
    }

    /// A chat's title: the one asked for, which none of the owner's other chats may have
    /// (409), or the first free "New chat", "New chat 2"...
    async fn chat_title(
        &self,
        p: &Principal,
        wanted: Option<String>,
        except: Option<Uuid>,
    ) -> Result<String, AiError> {
        let others: Vec<Chat> = self.own_records(p, CHATS).await?;
        let taken = |t: &str| others.iter().any(|c| Some(c.id) != except && c.title == t);
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

    pub async fn create_chat(
        &self,
        p: &Principal,
        actor: &Actor,
        input: ChatInput,
    ) -> Result<Chat, AiError> {
        self.require_enabled()?;
        let connection_id = self.chat_settings(p, &input).await?;
        let title = self.chat_title(p, input.title, None).await?;
        let now = self.clock.now();
        let chat = Chat {
            id: self.clock.new_id(),
            title,
            connection_id,
            model: input.model.filter(|m| !m.is_empty()),
            settings: input.settings,
            owner: owner_of(p),
            created_at: now,
            updated_at: now,
            messages: Vec::new(),
        };
        let audit = self.audit(p, actor, "ai.chat.create", format!("ai/chat/{}", chat.id));
        self.keep(
            p.tenant,
            format!("{CHATS}{}", chat.id),
            Some(encode("a chat", &chat)),
            audit,
        )
        .await?;
        Ok(chat)
    }

    fn check_free(&self, chat: Uuid) -> Result<(), AiError> {
        if self.busy.locked().contains(&chat) {
            return Err(AiError::Busy);
        }
        Ok(())
    }

    pub async fn update_chat(
        &self,
        p: &Principal,
        actor: &Actor,
        id: &str,
        input: ChatInput,
    ) -> Result<Chat, AiError> {
        let mut chat = self.chat(p, id).await?;
        self.check_free(chat.id)?;
        let connection_id = self.chat_settings(p, &input).await?;
        if input.title.is_some() {
            chat.title = self.chat_title(p, input.title, Some(chat.id)).await?;
        }
        if input.connection_id.is_some() {
            chat.connection_id = connection_id;
        }
        if let Some(m) = input.model {
            chat.model = Some(m).filter(|m| !m.is_empty());
        }
        if input.settings.is_some() {
            chat.settings = input.settings;
        }
        chat.updated_at = self.clock.now();
        let audit = self.audit(p, actor, "ai.chat.update", format!("ai/chat/{}", chat.id));
        self.keep(
            p.tenant,
            format!("{CHATS}{}", chat.id),
            Some(encode("a chat", &chat)),
            audit,
        )
        .await?;
        Ok(chat)
    }

    pub async fn delete_chat(&self, p: &Principal, actor: &Actor, id: &str) -> Result<(), AiError> {
        let chat = self.chat(p, id).await?;
        self.check_free(chat.id)?;
        let audit = self.audit(p, actor, "ai.chat.delete", format!("ai/chat/{}", chat.id));
        self.keep(p.tenant, format!("{CHATS}{}", chat.id), None, audit)
            .await
    }

    pub async fn delete_message(
        &self,
        p: &Principal,
        actor: &Actor,
        id: &str,
        message: &str,
    ) -> Result<(), AiError> {
        let mut chat = self.chat(p, id).await?;
        self.check_free(chat.id)?;
        let message = parse_id(message)?;
        let before = chat.messages.len();
        chat.messages.retain(|m| m.id != message);
        if chat.messages.len() == before {
            return Err(AiError::NotFound);
        }
        chat.updated_at = self.clock.now();
        let audit = self.audit(
            p,
            actor,
            "ai.chat.message.delete",
            format!("ai/chat/{}/messages/{message}", chat.id),
        );
        self.keep(
            p.tenant,
            format!("{CHATS}{}", chat.id),
            Some(encode("a chat", &chat)),
            audit,
        )
        .await
    }

    // --- turns ---

    /// Takes a turn slot holding `held` (a chat or conversation): busy while another turn
    /// holds it; shed, and counted, under pressure or at the limit.
    fn slot(self: &Arc<Self>, held: Option<Uuid>) -> Result<TurnGuard, AiError> {
        let busy = |id: Uuid| self.busy.locked().contains(&id);
        if held.is_some_and(busy) {
            return Err(AiError::Busy);
        }
        let shed = |why| {
            self.shed.fetch_add(1, Ordering::Relaxed);
            AiError::Shed(why)
        };
        if let Some(why) = (self.pressure)() {
            return Err(shed(why));
        }
        let permit = self
            .turns
            .clone()
            .try_acquire_owned()
            .map_err(|_| shed("ai.maxConcurrentTurns turns are running"))?;
        if let Some(id) = held
            && !self.busy.locked().insert(id)
        {
            return Err(AiError::Busy);
        }
        Ok(TurnGuard {
            ai: self.clone(),
            held,
            _permit: Some(permit),
        })
    }

    /// Holds an action while a person's decision on it is carried out, so it runs once.
    fn hold(self: &Arc<Self>, id: Uuid) -> Result<TurnGuard, AiError> {
        if !self.busy.locked().insert(id) {
            return Err(AiError::Conflict("the action is being decided".into()));
        }
        Ok(TurnGuard {
            ai: self.clone(),
            held: Some(id),
            _permit: None,
        })
    }

    fn month(now: Timestamp) -> String {
        now.0.strftime("%Y-%m").to_string()
    }

    async fn check_budget(&self, tenant: Uuid) -> Result<(), AiError> {
        let usage: Usage = self
            .load(tenant, format!("{USAGE}{}", Self::month(self.clock.now())))
            .await?
            .unwrap_or_default();
        if usage.tokens >= self.config.monthly_token_budget {
            return Err(AiError::Disabled(format!(
                "this month's AI token budget ({} tokens, ai.monthlyTokenBudget) is spent",
                self.config.monthly_token_budget
            )));
        }
        Ok(())
    }

    /// Starts a chat turn: checks it may run, keeps the user's message, and returns what
    /// the turn needs; `agent::run` does the rest.
    pub async fn begin_chat_turn(
        self: &Arc<Self>,
        p: &Principal,
        input: crate::model::ai::SendInput,
    ) -> Result<(agent::TurnPlan, TurnGuard), AiError> {
        self.require_enabled()?;
        // The chat is held before it is read, so no turn starts from messages another turn
        // is about to replace.
        let guard = self.slot(Some(parse_id(&input.chat_id)?))?;
        let mut chat = self.chat(p, &input.chat_id).await?;
        let regenerate = input.trigger.as_deref() == Some("regenerate-message");
        let text = input.message.clone().unwrap_or_default();
        if !regenerate && text.trim().is_empty() {
            return Err(invalid("message", "the message is empty"));
        }
        if text.len() > MESSAGE_MAX {
            return Err(invalid("message", "at most 32 KiB"));
        }
        self.check_budget(p.tenant).await?;
        let (endpoint, model) = self.chat_endpoint(p, &chat).await?;
        if let Some(from) = input.message_id.as_deref().filter(|_| regenerate) {
            let from = parse_id(from)?;
            let at = chat
                .messages
                .iter()
                .position(|m| m.id == from)
                .ok_or_else(|| invalid("messageId", "no such message in the chat"))?;
            chat.messages.truncate(at);
        }
        if !regenerate {
            chat.messages.push(Message {
                id: self.clock.new_id(),
                role: Role::User,
                content: text,
                tool_calls: Vec::new(),
                tool_call_id: None,
                created_at: self.clock.now(),
            });
        }
        let policy = self.policy(p.tenant).await?;
        Ok((
            agent::TurnPlan {
                endpoint,
                model,
                history: chat.messages.clone(),
                max_rounds: policy.max_rounds,
                target: agent::Target::Chat(chat),
            },
            guard,
        ))
    }

    async fn chat_endpoint(
        &self,
        p: &Principal,
        chat: &Chat,
    ) -> Result<(Endpoint, String), AiError> {
        let Some(id) = chat.connection_id else {
            return self.instance_endpoint().ok_or_else(|| {
                AiError::Disabled("the chat names no connection and the configuration has no instance connection (ai.model)".into())
            });
        };
        let c = self
            .connection(p, &id.to_string())
            .await
            .map_err(|e| match e {
                AiError::NotFound => AiError::Provider("the chat's connection is gone".into()),
                e => e,
            })?;
        if c.disabled {
            return Err(AiError::Provider(format!(
                "the connection {} is disabled",
                c.name
            )));
        }
        let model = chat
            .model
            .clone()
            .or_else(|| c.default_model.clone())
            .ok_or_else(|| invalid("model", "neither the chat nor its connection names a model"))?;
        Ok((self.endpoint_of(p.tenant, &c).await?, model))
    }

    /// Keeps what a turn produced, with its token use, in one transaction.
    pub async fn finish_turn(
        &self,
        p: &Principal,
        actor: &Actor,
        target: agent::Target,
        messages: Vec<Message>,
        tokens: u64,
    ) -> Result<agent::Target, AiError> {
        let tenant = p.tenant;
        let now = self.clock.now();
        let conversation = matches!(target, agent::Target::Conversation(_));
        let (key, value, action, resource, target) = match target {
            agent::Target::Chat(mut chat) => {
                chat.messages = messages;
                trim(&mut chat.messages);
                chat.updated_at = now;
                let id = chat.id;
                (
                    format!("{CHATS}{id}"),
                    encode("a chat", &chat),
                    "ai.chat.turn",
                    format!("ai/chat/{id}"),
                    agent::Target::Chat(chat),
                )
            }
            agent::Target::Conversation(mut c) => {
                c.messages = messages;
                trim(&mut c.messages);
                c.updated_at = now;
                let id = c.id;
                (
                    format!("{CONVERSATIONS}{id}"),
                    encode("a conversation", &c),
                    "ai.conversation.turn",
                    format!("ai/conversation/{id}"),
                    agent::Target::Conversation(c),
                )
            }
        };
        let audit = self
            .audit(p, actor, action, resource)
            .after(json!({"tokens": tokens}));
        let event = EventDraft::config(tenant, &["ai"], action, &audit.resource);
        let usage_key = format!("{USAGE}{}", Self::month(now));
        let budget = self.config.monthly_token_budget;
        self.store
            .transact(move |tx| -> TxResult<_> {
                // Only the messages are the turn's: what else changed meanwhile stays, and a
                // chat deleted meanwhile is not brought back.
                let kept = match tx.setting(tenant, &key)? {
                    Some(mut stored) => {
                        stored["messages"] = value["messages"].clone();
                        stored["updatedAt"] = value["updatedAt"].clone();
                        Some(stored)
                    }
                    // A conversation's first turn stores it; none is ever deleted.
                    None if conversation => Some(value),
                    None => None,
                };
                if let Some(kept) = &kept {
                    tx.put_setting(tenant, &key, Some(kept))?;
                }
                let mut usage: Usage = tx
                    .setting(tenant, &usage_key)?
                    .and_then(|v| decode("the AI token use", v))
                    .unwrap_or_default();
                usage.tokens += tokens;
                let mut events = vec![event];
                if !usage.warned && usage.tokens * 100 >= budget * WARN_AT_PERCENT {
                    usage.warned = true;
                    events.push(budget_warning(tenant, usage.tokens, budget));
                }
                tx.put_setting(
                    tenant,
                    &usage_key,
                    Some(&encode("the AI token use", &usage)),
                )?;
                tx.record([audit], events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(target)
    }

    // --- conversations ---

    /// The caller's conversations, the latest changed first.
    pub async fn conversations(&self, p: &Principal) -> Result<Vec<Conversation>, AiError> {
        let mut all: Vec<Conversation> = self.own_records(p, CONVERSATIONS).await?;
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.cmp(&a.id)));
        Ok(all)
    }

    pub async fn conversation(&self, p: &Principal, id: &str) -> Result<Conversation, AiError> {
        self.own_record(p, CONVERSATIONS, id).await
    }

    /// Starts a conversation turn through the instance connection (or the tenant's first
    /// shared one).
    pub async fn begin_conversation_turn(
        self: &Arc<Self>,
        p: &Principal,
        conversation: Option<String>,
        message: String,
    ) -> Result<(agent::TurnPlan, TurnGuard), AiError> {
        self.require_enabled()?;
        if message.trim().is_empty() || message.len() > MESSAGE_MAX {
            return Err(invalid("message", "1 byte to 32 KiB"));
        }
        let existing = conversation.filter(|c| !c.is_empty());
        let id = match &existing {
            Some(id) => parse_id(id)?,
            None => self.clock.new_id(),
        };
        self.check_budget(p.tenant).await?;
        let (endpoint, model) = match self.instance_endpoint() {
            Some(e) => e,
            None => self.shared_endpoint(p).await?,
        };
        // Held before it is read, as a chat is.
        let guard = self.slot(Some(id))?;
        let mut c = match existing {
            Some(id) => self.conversation(p, &id).await?,
            None => {
                let now = self.clock.now();
                Conversation {
                    id,
                    title: message.chars().take(60).collect(),
                    owner: owner_of(p),
                    created_at: now,
                    updated_at: now,
                    messages: Vec::new(),
                    reply: None,
                }
            }
        };
        c.messages.push(Message {
            id: self.clock.new_id(),
            role: Role::User,
            content: message,
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: self.clock.now(),
        });
        let policy = self.policy(p.tenant).await?;
        Ok((
            agent::TurnPlan {
                endpoint,
                model,
                history: c.messages.clone(),
                max_rounds: policy.max_rounds,
                target: agent::Target::Conversation(c),
            },
            guard,
        ))
    }

    async fn shared_endpoint(&self, p: &Principal) -> Result<(Endpoint, String), AiError> {
        let all: Vec<Connection> = self.load_all(p.tenant, CONNECTIONS).await?;
        let c = all
            .into_iter()
            .find(|c| c.shared && !c.disabled && c.default_model.is_some())
            .ok_or_else(|| {
                AiError::Disabled("no instance connection (ai.model) and no shared connection with a default model".into())
            })?;
        let model = c.default_model.clone().unwrap_or_default();
        Ok((self.endpoint_of(p.tenant, &c).await?, model))
    }

    /// `:test`: lists the models, timed.
    pub async fn test_connection(
        &self,
        p: &Principal,
        id: &str,
    ) -> Result<crate::model::ai::ConnectionTest, AiError> {
        let watch = crate::runtime::Stopwatch::start();
        let models = self.models(p, id).await?;
        Ok(crate::model::ai::ConnectionTest {
            ok: true,
            models: models.len(),
            latency_ms: u64::try_from(watch.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The `:summarize` proposal of an incident: one call without tools, nothing stored.
    pub async fn summarize(
        self: &Arc<Self>,
        p: &Principal,
        incident: &Value,
    ) -> Result<String, AiError> {
        self.require_enabled()?;
        self.check_budget(p.tenant).await?;
        let (endpoint, model) = match self.instance_endpoint() {
            Some(e) => e,
            None => self.shared_endpoint(p).await?,
        };
        let _guard = self.slot(None)?;
        let history = vec![Message {
            id: self.clock.new_id(),
            role: Role::User,
            content: format!(
                "Summarise this incident for the people on call in two or three sentences: what is affected, since when, and what is known.\n\n{}",
                agent::clip(incident.to_string())
            ),
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: self.clock.now(),
        }];
        let reply = endpoint
            .complete(
                &self.http,
                &model,
                agent::SYSTEM_PROMPT,
                &history,
                &[],
                &mut |_| {},
            )
            .await
            .map_err(|e| AiError::Provider(e.to_string()))?;
        Ok(reply.text)
    }
}

/// A record of one owner (a chat, a conversation): listed and read by its owner alone.
trait Owned: DeserializeOwned {
    fn owner(&self) -> &str;
    /// Leaves out what a list does not show (the messages).
    fn summarise(&mut self);
}

impl Owned for Chat {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn summarise(&mut self) {
        self.messages.clear();
    }
}

impl Owned for Conversation {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn summarise(&mut self) {
        self.messages.clear();
    }
}

/// What calling a tool came to.
pub enum ToolOutcome {
    Ran(ApiAnswer),
    Queued(Action),
    Refused(String),
}

/// A record as its audit entry shows it: what was said stays in the chat, not in the log.
fn without_messages(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("messages");
    }
    v
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
