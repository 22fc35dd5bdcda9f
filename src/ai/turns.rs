//! A turn: its slot, the budget, and keeping what it produced.

use super::*;

impl Ai {
    /// Takes a turn slot holding `held` (a chat or conversation): busy while another turn
    /// holds it; shed, and counted, under pressure or at the limit.
    pub(super) fn slot(self: &Arc<Self>, held: Option<Uuid>) -> Result<TurnGuard, AiError> {
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
    pub(super) fn hold(self: &Arc<Self>, id: Uuid) -> Result<TurnGuard, AiError> {
        if !self.busy.locked().insert(id) {
            return Err(AiError::Conflict("the action is being decided".into()));
        }
        Ok(TurnGuard {
            ai: self.clone(),
            held: Some(id),
            _permit: None,
        })
    }

    pub(super) fn month(now: Timestamp) -> String {
        now.0.strftime("%Y-%m").to_string()
    }

    pub(super) async fn check_budget(&self, tenant: Uuid) -> Result<(), AiError> {
        let usage = self
            .store
            .ai_token_use(tenant, Self::month(self.clock.now()))
            .await?;
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
            chat.messages.push(self.user_message(text));
        }
        let history = chat.messages.clone();
        let plan = self
            .plan(
                p.tenant,
                endpoint,
                model,
                history,
                agent::Target::Chat(chat),
            )
            .await?;
        Ok((plan, guard))
    }

    /// The caller's new message as a history keeps it.
    pub(super) fn user_message(&self, content: String) -> Message {
        Message {
            id: self.clock.new_id(),
            role: Role::User,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: self.clock.now(),
        }
    }

    /// A turn on `history` for `target`, under the tenant's limit of rounds.
    pub(super) async fn plan(
        &self,
        tenant: Uuid,
        endpoint: Endpoint,
        model: String,
        history: Vec<Message>,
        target: agent::Target,
    ) -> Result<agent::TurnPlan, AiError> {
        let policy = self.policy(tenant).await?;
        Ok(agent::TurnPlan {
            endpoint,
            model,
            history,
            max_rounds: policy.max_rounds,
            target,
        })
    }

    pub(super) async fn chat_endpoint(
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

    /// Keeps what a turn produced, with its token use, in one transaction: the messages it
    /// added (and those trimmed away go), the thread's `updatedAt`; a conversation's turn also
    /// lets the tenant's conversations past their retention go.
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
        let mut messages = messages;
        trim(&mut messages);
        let (action, resource, target) = match target {
            agent::Target::Chat(mut chat) => {
                chat.messages = messages.clone();
                chat.updated_at = now;
                let id = chat.id;
                (
                    "ai.chat.turn",
                    format!("ai/chat/{id}"),
                    agent::Target::Chat(chat),
                )
            }
            agent::Target::Conversation(mut c) => {
                c.messages = messages.clone();
                c.updated_at = now;
                let id = c.id;
                (
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
        let month = Self::month(now);
        let budget = self.config.monthly_token_budget;
        let retention = std::time::Duration::from_secs(
            u64::from(self.config.conversation_retention_days) * 86_400,
        );
        let stored = target.clone();
        self.store
            .transact(move |tx| -> TxResult<_> {
                // Only the messages are the turn's: what else changed meanwhile stays, and a
                // chat deleted meanwhile is not brought back.
                match stored {
                    agent::Target::Chat(chat) => {
                        if let Some(mut kept) = tx.ai_chat(tenant, chat.id)? {
                            kept.updated_at = now;
                            tx.put_ai_chat(tenant, &kept)?;
                            tx.sync_ai_messages(tenant, chat.id, &messages)?;
                        }
                    }
                    agent::Target::Conversation(c) => {
                        tx.drop_ai_conversations_before(
                            tenant,
                            now.minus(retention),
                            RETENTION_BATCH,
                        )?;
                        let kept = match tx.ai_conversation(tenant, c.id)? {
                            Some(mut kept) => {
                                kept.updated_at = now;
                                kept
                            }
                            // A conversation's first turn stores it.
                            None => c,
                        };
                        tx.put_ai_conversation(tenant, &kept)?;
                        tx.sync_ai_messages(tenant, kept.id, &messages)?;
                    }
                }
                let mut usage = tx.ai_token_use(tenant, &month)?;
                let mut events = vec![event];
                if charge(&mut usage, tokens, budget) {
                    events.push(budget_warning(tenant, usage.tokens, budget));
                }
                tx.put_ai_token_use(tenant, &month, &usage)?;
                tx.record([audit], events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(target)
    }
}
