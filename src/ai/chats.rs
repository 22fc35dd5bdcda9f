//! Chats: their owner's alone, each with its settings and messages.

use super::*;

impl Ai {
    /// The caller's chats, newest first, without their messages.
    pub async fn chats(&self, p: &Principal) -> Result<Vec<Chat>, AiError> {
        self.require_enabled()?;
        let owner = owner_of(p);
        let mut all = self.store.ai_chats(p.tenant).await?;
        all.retain(|c| c.owner == owner);
        all.reverse();
        Ok(all)
    }

    /// One of the caller's chats with its messages; another's is not found.
    pub async fn chat(&self, p: &Principal, id: &str) -> Result<Chat, AiError> {
        self.require_enabled()?;
        let owner = owner_of(p);
        self.store
            .ai_chat(p.tenant, parse_id(id)?)
            .await?
            .filter(|c| c.owner == owner)
            .ok_or(AiError::NotFound)
    }

    pub(super) async fn chat_settings(
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
    pub(super) async fn chat_title(
        &self,
        p: &Principal,
        wanted: Option<String>,
        except: Option<Uuid>,
    ) -> Result<String, AiError> {
        let others = self.chats(p).await?;
        let taken: Vec<&str> = others
            .iter()
            .filter(|c| Some(c.id) != except)
            .map(|c| c.title.as_str())
            .collect();
        chat_title(wanted, &taken)
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
        let audit = self
            .audit(p, actor, "ai.chat.create", format!("ai/chat/{}", chat.id))
            .after(&chat);
        let (tenant, stored) = (p.tenant, chat.clone());
        self.commit(tenant, audit, move |tx| tx.put_ai_chat(tenant, &stored))
            .await?;
        Ok(chat)
    }

    pub(super) fn check_free(&self, chat: Uuid) -> Result<(), AiError> {
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
        let mut summary = chat.clone();
        summary.messages.clear();
        let audit = self
            .audit(p, actor, "ai.chat.update", format!("ai/chat/{}", chat.id))
            .after(&summary);
        let tenant = p.tenant;
        self.commit(tenant, audit, move |tx| tx.put_ai_chat(tenant, &summary))
            .await?;
        Ok(chat)
    }

    pub async fn delete_chat(&self, p: &Principal, actor: &Actor, id: &str) -> Result<(), AiError> {
        let chat = self.chat(p, id).await?;
        self.check_free(chat.id)?;
        let audit = self.audit(p, actor, "ai.chat.delete", format!("ai/chat/{}", chat.id));
        let (tenant, id) = (p.tenant, chat.id);
        self.commit(tenant, audit, move |tx| tx.drop_ai_chat(tenant, id))
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
        let tenant = p.tenant;
        self.commit(tenant, audit, move |tx| {
            tx.put_ai_chat(tenant, &chat)?;
            tx.sync_ai_messages(tenant, chat.id, &chat.messages)
        })
        .await
    }
}
