//! Sealed secrets by tenant and name.

use super::codec::{decode, encode, tenant_values};
use crate::store::{TxResult, Wrote};

use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::{META, SECRETS};
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
    pub(crate) fn remove_secret(&self, tenant: Uuid, name: &str) -> Result<bool, StoreError> {
        Ok(self
            .open_table(SECRETS)?
            .take(scoped(tenant, name.as_bytes()).as_slice())?
            .is_some())
    }
}

impl Store {
    pub(crate) async fn secret(
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

    pub(crate) async fn secrets(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<SecretMeta>, StoreError> {
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

/// Where the database keeps the fingerprint of the master key its secrets are sealed with.
const KEY_FINGERPRINT: &str = "master_key_fingerprint";

impl Store {
    /// Keeps `fingerprint` (of the master key this process holds) where none is kept yet, and
    /// answers the one kept when it is another: a process whose key is not the database's
    /// could open none of its secrets, and on a shared PostgreSQL database it would seal new
    /// ones the others cannot open. Reads first, and writes only the first time (a start on
    /// a full disk writes nothing).
    pub(crate) async fn keep_key_fingerprint(
        self: &Arc<Self>,
        fingerprint: String,
    ) -> Result<Option<String>, StoreError> {
        let kept = self
            .read(|tx| {
                Ok(tx
                    .open_table(META)?
                    .get(KEY_FINGERPRINT)?
                    .map(|v| String::from_utf8_lossy(v.value()).into_owned()))
            })
            .await?;
        match kept {
            Some(kept) if kept == fingerprint => Ok(None),
            Some(other) => Ok(Some(other)),
            // Another process may have kept one since the read: compared again in the write.
            None => {
                self.transact(move |tx| -> TxResult<_> {
                    let mut meta = tx.open_table(META)?;
                    let kept = meta
                        .get(KEY_FINGERPRINT)?
                        .map(|v| String::from_utf8_lossy(v.value()).into_owned());
                    if let Some(kept) = kept {
                        return Ok(Wrote::Unchanged((kept != fingerprint).then_some(kept)));
                    }
                    meta.insert(KEY_FINGERPRINT, fingerprint.as_bytes())?;
                    tx.unrecorded("the master key's fingerprint, kept once at the first start");
                    Ok(Wrote::Changed(None))
                })
                .await
            }
        }
    }
}
