//! Provider connections: their keys sealed by `inventory`, the endpoints they may reach, their models.

use super::*;

impl Ai {
    pub(super) fn secret_name(id: Uuid) -> String {
        format!("ai-connection-{}", id.simple())
    }

    /// Whether the configuration lets connections reach `endpoint`.
    pub(super) fn endpoint_allowed(&self, endpoint: &str) -> bool {
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

    pub(super) fn visible(p: &Principal, c: &Connection) -> bool {
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
    pub(super) fn admit(&self, input: &ConnectionInput) -> Result<String, AiError> {
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

    pub(super) async fn name_taken(
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
    pub(super) async fn store_connection(
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

    pub(super) fn may_change(p: &Principal, c: &Connection) -> Result<(), AiError> {
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

    pub(super) async fn endpoint_of(
        &self,
        tenant: Uuid,
        c: &Connection,
    ) -> Result<Endpoint, AiError> {
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
    pub(super) fn instance_endpoint(&self) -> Option<(Endpoint, String)> {
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
}
