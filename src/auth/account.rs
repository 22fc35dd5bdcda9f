//! What a signed-in caller keeps for themselves: console preferences and Web Push
//! subscriptions; and the instance's console branding.

use super::service::Auth;
use super::{AuthError, Principal};
use crate::model::audit::AuditDraft;
use crate::model::fault;
use crate::model::identity::{
    Actor, ActorType, Branding, Preferences, PushSubscription, PushUnsubscribe,
};
use crate::store::{TxResult, Wrote};
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

/// Branding is one setting of the instance, kept under the nil tenant.
const BRANDING: &str = "branding";
const ENDPOINT_MAX: usize = 2048;

/// Parses a body, naming `field` in the problem when it does not fit.
fn parse<T: DeserializeOwned>(field: &'static str, body: Value) -> Result<T, AuthError> {
    crate::model::input::from_value(body).map_err(|e| AuthError::validation(field, e))
}

fn own_key(p: &Principal, what: &str) -> String {
    format!("{what}/{}:{}", p.actor_type.as_str(), p.actor_id)
}

impl Auth {
    /// Stores (or with `None` removes) a setting with its audit entry and `config` event.
    async fn keep(
        &self,
        tenant: Uuid,
        key: String,
        value: Option<Value>,
        kind: &str,
        audit: AuditDraft,
    ) -> Result<(), AuthError> {
        let record = Self::record(kind, audit);
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_setting(tenant, &key, value.as_ref())?;
                let audit = match &value {
                    Some(v) => record.audit.after(v),
                    None => record.audit,
                };
                tx.record([audit], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    pub async fn branding(&self) -> Result<Branding, AuthError> {
        let stored = self.store.setting(Uuid::nil(), BRANDING.into()).await?;
        Ok(stored
            .map(|v| fault::decoded("the branding", serde_json::from_value(v)))
            .unwrap_or_default())
    }

    pub async fn set_branding(
        &self,
        p: &Principal,
        actor: &Actor,
        body: Value,
    ) -> Result<Branding, AuthError> {
        if !p.instance {
            return Err(AuthError::Forbidden(
                "the branding is the whole instance's: only the default tenant changes it".into(),
            ));
        }
        let branding: Branding = parse("branding", body)?;
        branding
            .check()
            .map_err(|e| AuthError::validation("branding", e))?;
        let audit = self.audit(p, actor, "branding.update", "branding".into());
        let value = fault::encoded("the branding", serde_json::to_value(&branding));
        self.keep(Uuid::nil(), BRANDING.into(), Some(value), "branding", audit)
            .await?;
        Ok(branding)
    }

    /// Where a user's preferences are kept: `me` (or the caller's own id) is the caller; another
    /// user of the acting tenant needs `admin:users`.
    async fn preferences_key(&self, p: &Principal, id: &str) -> Result<(Uuid, String), AuthError> {
        let own = id == "me" || (p.actor_type == ActorType::User && id == p.actor_id);
        if own {
            return Ok((p.home_tenant, own_key(p, "preferences")));
        }
        let user = Uuid::parse_str(id).map_err(|_| AuthError::NotFound)?;
        if !p.allows("admin:users") {
            return Err(AuthError::Forbidden(
                "another user's preferences need permission admin:users".into(),
            ));
        }
        self.user(p, user).await?;
        Ok((p.tenant, format!("preferences/user:{user}")))
    }

    pub async fn preferences(&self, p: &Principal, id: &str) -> Result<Preferences, AuthError> {
        let (tenant, key) = self.preferences_key(p, id).await?;
        let stored = self.store.setting(tenant, key).await?;
        Ok(stored
            .map(|v| fault::decoded("preferences", serde_json::from_value(v)))
            .unwrap_or_default())
    }

    pub async fn set_preferences(
        &self,
        p: &Principal,
        actor: &Actor,
        id: &str,
        body: Value,
    ) -> Result<Preferences, AuthError> {
        let prefs: Preferences = parse("preferences", body)?;
        let (tenant, key) = self.preferences_key(p, id).await?;
        let audit = self.draft(tenant, actor, "preferences.update", key.clone());
        let value = fault::encoded("preferences", serde_json::to_value(&prefs));
        self.keep(tenant, key, Some(value), "preferences", audit)
            .await?;
        Ok(prefs)
    }

    fn push_key(p: &Principal, endpoint: &str) -> String {
        super::push::subscription_key(&own_key(p, "push"), endpoint)
    }

    pub async fn subscribe_push(
        &self,
        p: &Principal,
        actor: &Actor,
        body: Value,
    ) -> Result<PushSubscription, AuthError> {
        let Value::Object(fields) = &body else {
            return Err(AuthError::validation(
                "body",
                "expected an object {endpoint, keys}",
            ));
        };
        if let Some(unknown) = fields.keys().find(|k| *k != "endpoint" && *k != "keys") {
            return Err(AuthError::validation(
                "body",
                format!("unknown field {unknown:?}"),
            ));
        }
        let endpoint = fields
            .get("endpoint")
            .and_then(Value::as_str)
            .unwrap_or_default();
        check_endpoint(endpoint)?;
        let keys = fields.get("keys").cloned().unwrap_or(Value::Null);
        check_keys(&keys)?;
        let sub = PushSubscription {
            endpoint: endpoint.to_string(),
            keys,
        };
        let key = Self::push_key(p, &sub.endpoint);
        let audit = self.draft(
            p.home_tenant,
            actor,
            "push-subscription.create",
            key.clone(),
        );
        let value = fault::encoded("a push subscription", serde_json::to_value(&sub));
        self.keep(p.home_tenant, key, Some(value), "push-subscriptions", audit)
            .await?;
        Ok(sub)
    }

    /// Forgets a subscription; one that is not known is gone already, which is no error.
    pub async fn unsubscribe_push(
        &self,
        p: &Principal,
        actor: &Actor,
        body: Value,
    ) -> Result<(), AuthError> {
        let req: PushUnsubscribe = parse("endpoint", body)?;
        check_endpoint(&req.endpoint)?;
        let key = Self::push_key(p, &req.endpoint);
        let audit = self.draft(
            p.home_tenant,
            actor,
            "push-subscription.delete",
            key.clone(),
        );
        self.keep(p.home_tenant, key, None, "push-subscriptions", audit)
            .await?;
        Ok(())
    }
}

fn check_endpoint(endpoint: &str) -> Result<(), AuthError> {
    let ok = (endpoint.starts_with("https://") || endpoint.starts_with("http://"))
        && endpoint.len() <= ENDPOINT_MAX
        && !endpoint
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        && endpoint
            .split_once("://")
            .is_some_and(|(_, rest)| !rest.is_empty());
    if ok {
        Ok(())
    } else if endpoint.is_empty() {
        Err(AuthError::validation("endpoint", "endpoint is required"))
    } else {
        Err(AuthError::validation(
            "endpoint",
            format!("expected the push service's http(s) URL (at most {ENDPOINT_MAX} characters)"),
        ))
    }
}

/// Keys are base64 text, or the browser's `{p256dh, auth}` with both present.
fn check_keys(keys: &Value) -> Result<(), AuthError> {
    let base64 = |s: &str| {
        !s.is_empty()
            && s.len() <= 1024
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '-' | '_' | '='))
    };
    let ok = match keys {
        Value::String(s) => base64(s),
        Value::Object(m) => ["p256dh", "auth"]
            .iter()
            .all(|k| m.get(*k).and_then(Value::as_str).is_some_and(base64)),
        _ => false,
    };
    if ok {
        Ok(())
    } else if keys.is_null() {
        Err(AuthError::validation("keys", "keys are required"))
    } else {
        Err(AuthError::validation(
            "keys",
            "expected base64 text or an object {p256dh, auth} of base64 text",
        ))
    }
}
