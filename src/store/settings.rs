//! Small per-tenant settings stored as JSON by key (branding, preferences, push subscriptions,
//! the noise controls).

use super::codec::{decode, encode};
use super::keys::scoped;
use super::kv::Readable;
use super::tables::SETTINGS;
use super::{Store, StoreError, Tx};
use crate::model::noise::{NOISE_SETTING, StoredNoise};
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

impl Store {
    pub(crate) async fn setting(
        self: &Arc<Self>,
        tenant: Uuid,
        key: String,
    ) -> Result<Option<Value>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SETTINGS)?;
            t.get(scoped(tenant, key.as_bytes()).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    /// The noise controls the tenant set itself (none: the default).
    pub(crate) async fn tenant_noise(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<StoredNoise, StoreError> {
        let value = self.setting(tenant, NOISE_SETTING.into()).await?;
        stored_noise(value)
    }

    /// The values of the tenant's settings whose keys start with `prefix`, in key order.
    pub(crate) async fn settings_under(
        self: &Arc<Self>,
        tenant: Uuid,
        prefix: String,
    ) -> Result<Vec<Value>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SETTINGS)?;
            let start = scoped(tenant, prefix.as_bytes());
            let mut out = Vec::new();
            for entry in t.range(start.as_slice()..)? {
                let (k, v) = entry?;
                if !k.value().starts_with(&start) {
                    break;
                }
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
        .await
    }
}

/// Settings in a transaction.
impl Tx<'_> {
    pub(crate) fn setting(&self, tenant: Uuid, key: &str) -> Result<Option<Value>, StoreError> {
        let t = self.open_table(SETTINGS)?;
        t.get(scoped(tenant, key.as_bytes()).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// The noise controls the tenant set itself (none: the default).
    pub(crate) fn tenant_noise(&self, tenant: Uuid) -> Result<StoredNoise, StoreError> {
        stored_noise(self.setting(tenant, NOISE_SETTING)?)
    }

    /// Stores a setting, or removes it when `value` is `None` (absent is no error).
    pub(crate) fn put_setting(
        &self,
        tenant: Uuid,
        key: &str,
        value: Option<&Value>,
    ) -> Result<(), StoreError> {
        let mut t = self.open_table(SETTINGS)?;
        let key = scoped(tenant, key.as_bytes());
        match value {
            Some(v) => t.insert(key.as_slice(), encode(v)?.as_slice())?,
            None => t.remove(key.as_slice())?,
        };
        Ok(())
    }
}

fn stored_noise(value: Option<Value>) -> Result<StoredNoise, StoreError> {
    value
        .map(serde_json::from_value)
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| StoreError::Corrupt(format!("{NOISE_SETTING}: {e}")))
}
