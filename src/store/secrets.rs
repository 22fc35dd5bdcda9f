//! Sealed secrets by tenant and name.

use super::codec::{decode, encode, tenant_values};

use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::SECRETS;
use super::{Store, StoreError, Tx};
use crate::model::secret::{SecretMeta, StoredSecret};
use std::sync::Arc;
use uuid::Uuid;

/// Stores a secret in `tx`, keeping the first `createdAt` when it replaces one.
pub(super) fn put_sealed(tx: &WriteTx, secret: &mut StoredSecret) -> Result<(), StoreError> {
    let key = scoped(secret.meta.tenant_id, secret.meta.name.as_bytes());
    let mut t = tx.open_table(SECRETS)?;
    if let Some(old) = t.get(key.as_slice())? {
        secret.meta.created_at = decode::<StoredSecret>(old.value())?.meta.created_at;
    }
    t.insert(key.as_slice(), encode(&*secret)?.as_slice())?;
    Ok(())
}

/// Secrets in a transaction (`Tx::put_secret` seals and saves one).
impl Tx<'_> {
    /// Removes a secret; whether there was one.
    pub fn remove_secret(&self, tenant: Uuid, name: &str) -> Result<bool, StoreError> {
        Ok(self
            .open_table(SECRETS)?
            .take(scoped(tenant, name.as_bytes()).as_slice())?
            .is_some())
    }
}

impl Store {
    pub async fn secret(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
    ) -> Result<Option<StoredSecret>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SECRETS)?;
            t.get(scoped(tenant, name.as_bytes()).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    pub async fn secrets(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<SecretMeta>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SECRETS)?;
            Ok(tenant_values::<StoredSecret, _>(&t, tenant)?
                .into_iter()
                .map(|s| s.meta)
                .collect())
        })
        .await
    }
}
