//! Small per-tenant settings stored as JSON by key (branding, preferences, push subscriptions).

use super::codec::{decode, encode};
use super::journal::Record;
use super::keys::scoped;
use super::tables::SETTINGS;
use super::{Store, StoreError};
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

    /// Stores a setting, or removes it when `value` is `None` (absent is no error).
    pub async fn put_setting(
        self: &Arc<Self>,
        tenant: Uuid,
        key: String,
        value: Option<Value>,
        record: Record,
    ) -> Result<(), StoreError> {
        self.mutate(record, move |tx, audit| {
            let mut t = tx.open_table(SETTINGS).map_err(StoreError::from_redb)?;
            let key = scoped(tenant, key.as_bytes());
            let audit = match &value {
                Some(v) => {
                    t.insert(key.as_slice(), encode(v)?.as_slice())
                        .map_err(StoreError::from_redb)?;
                    audit.after(v)
                }
                None => {
                    t.remove(key.as_slice()).map_err(StoreError::from_redb)?;
                    audit
                }
            };
            Ok(((), audit))
        })
        .await
    }
}
