//! The hash-chained audit log's entries.

use super::Timestamp;
use super::identity::{Actor, ActorType};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// `prevHash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub seq: u64,
    pub ts: Timestamp,
    pub tenant_id: Uuid,
    pub actor_type: ActorType,
    pub actor_id: String,
    /// `resource.verb`, e.g. `token.create`, `tenant.create`, `login.local`.
    pub action: String,
    pub resource: String,
    #[serde(default)]
    pub source_ip: String,
    #[serde(default)]
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    pub prev_hash: String,
    pub hash: String,
}

/// What a mutation hands the store; the store adds seq and the hashes in the same transaction.
#[derive(Clone, Debug)]
pub struct AuditDraft {
    pub ts: Timestamp,
    pub tenant_id: Uuid,
    pub actor: Actor,
    pub action: String,
    pub resource: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl AuditDraft {
    pub fn new(
        ts: Timestamp,
        tenant_id: Uuid,
        actor: &Actor,
        action: &str,
        resource: String,
    ) -> Self {
        Self {
            ts,
            tenant_id,
            actor: actor.clone(),
            action: action.to_string(),
            resource,
            before: None,
            after: None,
        }
    }

    pub fn before(mut self, v: impl Serialize) -> Self {
        self.before = serde_json::to_value(v).ok();
        self
    }

    pub fn after(mut self, v: impl Serialize) -> Self {
        self.after = serde_json::to_value(v).ok();
        self
    }
}

/// Result of `POST /api/v1/audit:verify`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct AuditVerification {
    pub intact: bool,
    pub verified: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Filters of `GET /api/v1/audit`.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub tenant_id: Option<Uuid>,
    pub actor_id: Option<String>,
    pub actor_type: Option<String>,
    pub action: Option<String>,
    pub resource: Option<String>,
    pub after_seq: Option<u64>,
    /// Descending pagination: only entries below this seq.
    pub before_seq: Option<u64>,
}

impl AuditFilter {
    pub fn matches(&self, e: &AuditEntry) -> bool {
        self.tenant_id.is_none_or(|t| t == e.tenant_id)
            && self.actor_id.as_ref().is_none_or(|a| *a == e.actor_id)
            && self
                .actor_type
                .as_ref()
                .is_none_or(|a| a == e.actor_type.as_str())
            && self.action.as_ref().is_none_or(|a| *a == e.action)
            && self.resource.as_ref().is_none_or(|r| *r == e.resource)
            && self.after_seq.is_none_or(|s| e.seq > s)
            && self.before_seq.is_none_or(|s| e.seq < s)
    }
}

/// SHA-256 over the previous hash and the canonical JSON of the entry without its own hash
/// (struct fields in declaration order, object keys sorted), hex encoded.
pub fn chain_hash(entry: &AuditEntry) -> String {
    use sha2::{Digest, Sha256};
    let mut unhashed = entry.clone();
    unhashed.hash = String::new();
    let canonical = super::fault::encoded("an audit entry", serde_json::to_vec(&unhashed));
    let mut h = Sha256::new();
    h.update(entry.prev_hash.as_bytes());
    h.update(&canonical);
    hex(&h.finalize())
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
