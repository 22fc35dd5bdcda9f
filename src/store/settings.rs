//! Small per-tenant settings stored as JSON by key (branding, preferences, push subscriptions).

use super::codec::{decode, encode};
use super::keys::scoped;
use super::tables::SETTINGS;
use super::{Store, StoreError, Tx};
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

impl Store {
    pub async fn setting(
        self: &Arc<Self>,
        tenant: Uuid,
        key: String,
    ) -> Result<Option<Value>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SETTINGS).map_err(StoreError::from_redb)?;
            t.get(scoped(tenant, key.as_bytes()).as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }
}

/// Settings in a transaction.
impl Tx<'_> {
    /// Stores a setting, or removes it when `value` is `None` (absent is no error).
    pub fn put_setting(
        &self,
        tenant: Uuid,
        key: &str,
        value: Option<&Value>,
    ) -> Result<(), StoreError> {
        let mut t = self.open_table(SETTINGS).map_err(StoreError::from_redb)?;
        let key = scoped(tenant, key.as_bytes());
        match value {
            Some(v) => t
                .insert(key.as_slice(), encode(v)?.as_slice())
                .map_err(StoreError::from_redb)?,
            None => t.remove(key.as_slice()).map_err(StoreError::from_redb)?,
        };
        Ok(())
    }
}
