//! Who acts: actor types, API tokens, the whoami view, tenants' create payload.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    User,
    Token,
    AiAgent,
    System,
}

impl ActorType {
    pub fn as_str(&self) -> &'static str {
        match self {
            ActorType::User => "user",
            ActorType::Token => "token",
            ActorType::AiAgent => "ai_agent",
            ActorType::System => "system",
        }
    }
}

/// Who performs a mutation, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub actor_type: ActorType,
    pub actor_id: String,
    /// TCP peer address (never X-Forwarded-For).
    pub source_ip: String,
    pub request_id: String,
}

impl Actor {
    /// The service itself (start-up seeding, `svc bootstrap`).
    pub fn system(what: &str) -> Self {
        Self {
            actor_type: ActorType::System,
            actor_id: what.to_string(),
            source_ip: String::new(),
            request_id: String::new(),
        }
    }
}

/// An API token's metadata; the secret's hash is never part of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    /// The first 8 hex characters of the secret, for lookup and for people to recognise it.
    pub prefix: String,
    pub scopes: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub ip_bind: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    #[serde(default)]
    pub ai_agent: bool,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
}

/// `POST /api/v1/api-tokens`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub ip_bind: Vec<String>,
    /// Kept as text so a bad value is a `svc:validation/expiresAt`, not a body error.
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub ai_agent: bool,
}

/// A freshly minted or rotated token: the secret, shown once, and its metadata.
#[derive(Clone, Debug, Serialize)]
pub struct MintedToken {
    pub token: String,
    pub meta: ApiToken,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Whoami {
    pub actor_type: ActorType,
    pub actor_id: String,
    pub name: String,
    pub tenant_id: Uuid,
    pub permissions: Vec<String>,
}

/// `POST /api/v1/tenants`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
}

/// A token as stored: its metadata and the argon2id hash of its secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredToken {
    pub meta: ApiToken,
    pub secret_hash: String,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}
