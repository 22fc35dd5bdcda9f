//! Alarm floods: the scopes in flood and the deliveries held for their digests.

use super::codec::{decode, encode, tenant_values};
use super::keys::scoped;
use super::kv::Readable;
use super::tables::{FLOOD_HELD, FLOODS};
use super::{Store, StoreError, Tx};
use crate::model::flood::Flood;
use crate::model::notify::Delivery;
use std::sync::Arc;
use uuid::Uuid;

/// The key prefix of a scope's held deliveries: tenant + scope, length-prefixed so that no
/// scope's prefix is another's.
fn held_prefix(tenant: Uuid, scope: &str) -> Vec<u8> {
    let mut local = u32::try_from(scope.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    local.extend_from_slice(scope.as_bytes());
    scoped(tenant, &local)
}

impl Tx<'_> {
    pub(crate) fn flood(&self, tenant: Uuid, scope: &str) -> Result<Option<Flood>, StoreError> {
        let t = self.open_table(FLOODS)?;
        t.get(scoped(tenant, scope.as_bytes()).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    pub(crate) fn put_flood(&self, flood: &Flood) -> Result<(), StoreError> {
        self.open_table(FLOODS)?.insert(
            scoped(flood.tenant_id, flood.scope.as_bytes()).as_slice(),
            encode(flood)?.as_slice(),
        )?;
        Ok(())
    }

    pub(crate) fn drop_flood(&self, tenant: Uuid, scope: &str) -> Result<(), StoreError> {
        self.open_table(FLOODS)?
            .remove(scoped(tenant, scope.as_bytes()).as_slice())?;
        Ok(())
    }

    /// Keeps `delivery` for the next digest of `scope` instead of the outbox.
    pub(crate) fn hold_for_digest(
        &self,
        scope: &str,
        delivery: &Delivery,
    ) -> Result<(), StoreError> {
        let mut key = held_prefix(delivery.tenant_id, scope);
        key.extend_from_slice(delivery.id.as_bytes());
        self.open_table(FLOOD_HELD)?
            .insert(key.as_slice(), encode(delivery)?.as_slice())?;
        Ok(())
    }

    /// Takes the deliveries held for `scope`'s digest, oldest first.
    pub(crate) fn take_held(&self, tenant: Uuid, scope: &str) -> Result<Vec<Delivery>, StoreError> {
        let prefix = held_prefix(tenant, scope);
        let mut end = prefix.clone();
        end.extend_from_slice(&[0xff; 17]);
        let mut t = self.open_table(FLOOD_HELD)?;
        let (mut keys, mut out) = (Vec::new(), Vec::new());
        for row in t.range(prefix.as_slice()..end.as_slice())? {
            let (k, v) = row?;
            keys.push(k.value().to_vec());
            out.push(decode(v.value())?);
        }
        for k in keys {
            t.remove(k.as_slice())?;
        }
        Ok(out)
    }
}

impl Store {
    /// Every tenant's scopes in flood, for the digests.
    pub(crate) async fn all_floods(self: &Arc<Self>) -> Result<Vec<Flood>, StoreError> {
        self.read(|tx| {
            let t = tx.open_table(FLOODS)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                out.push(decode(row?.1.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// The tenant's scopes in flood.
    pub async fn floods(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<Flood>, StoreError> {
        self.read(move |tx| tenant_values(&tx.open_table(FLOODS)?, tenant))
            .await
    }
}
