//! Conversations with the assistant through the instance connection, and incident summaries.

use super::*;

impl Ai {
    /// The caller's conversations, the latest changed first.
    pub async fn conversations(&self, p: &Principal) -> Result<Vec<Conversation>, AiError> {
        self.require_enabled()?;
        let owner = owner_of(p);
        let mut all = self.store.ai_conversations(p.tenant).await?;
        all.retain(|c| c.owner == owner);
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.cmp(&a.id)));
        Ok(all)
    }

    /// One of the caller's conversations with its messages; another's is not found.
    pub async fn conversation(&self, p: &Principal, id: &str) -> Result<Conversation, AiError> {
        self.require_enabled()?;
        let owner = owner_of(p);
        self.store
            .ai_conversation(p.tenant, parse_id(id)?)
            .await?
            .filter(|c| c.owner == owner)
            .ok_or(AiError::NotFound)
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
        c.messages.push(self.user_message(message));
        let history = c.messages.clone();
        let plan = self
            .plan(
                p.tenant,
                endpoint,
                model,
                history,
                agent::Target::Conversation(c),
            )
            .await?;
        Ok((plan, guard))
    }

    pub(super) async fn shared_endpoint(
        &self,
        p: &Principal,
    ) -> Result<(Endpoint, String), AiError> {
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
