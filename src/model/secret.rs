//! Secrets as stored and as listed: the value exists only sealed.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What `GET /api/v1/secrets` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretMeta {
    pub tenant_id: Uuid,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSecret {
    pub meta: SecretMeta,
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSecret")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}
