//! Heartbeat definitions and their last beat, by tenant and name.

use super::codec::{decode, encode, tenant_values};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::HEARTBEATS;
use super::{Store, StoreError, Tx};
use crate::model::heartbeat::Heartbeat;
use std::sync::Arc;
use uuid::Uuid;

fn key(tenant: Uuid, name: &str) -> Vec<u8> {
    scoped(tenant, name.as_bytes())
}

fn load(tx: &WriteTx, tenant: Uuid, name: &str) -> Result<Option<Heartbeat>, StoreError> {
    let t = tx.open_table(HEARTBEATS)?;
    t.get(key(tenant, name).as_slice())?
        .map(|v| decode(v.value()))
        .transpose()
}

fn save(tx: &WriteTx, h: &Heartbeat) -> Result<(), StoreError> {
    tx.open_table(HEARTBEATS)?
        .insert(key(h.tenant_id, &h.name).as_slice(), encode(h)?.as_slice())?;
    Ok(())
}

impl Tx<'_> {
    pub(crate) fn heartbeat(
        &self,
        tenant: Uuid,
        name: &str,
    ) -> Result<Option<Heartbeat>, StoreError> {
        load(self, tenant, name)
    }

    pub(crate) fn save_heartbeat(&self, heartbeat: &Heartbeat) -> Result<(), StoreError> {
        save(self, heartbeat)
    }

    /// Removes a definition; the definition, when there was one.
    pub(crate) fn remove_heartbeat(
        &self,
        tenant: Uuid,
        name: &str,
    ) -> Result<Option<Heartbeat>, StoreError> {
        let old = load(self, tenant, name)?;
        if old.is_some() {
            self.open_table(HEARTBEATS)?
                .remove(key(tenant, name).as_slice())?;
        }
        Ok(old)
    }
}

impl Store {
    pub(crate) async fn heartbeats(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Heartbeat>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(HEARTBEATS)?;
            tenant_values(&t, tenant)
        })
        .await
    }

    /// Every tenant's heartbeats, for the sweep.
    pub(crate) async fn all_heartbeats(self: &Arc<Self>) -> Result<Vec<Heartbeat>, StoreError> {
        self.read(|tx| {
            let t = tx.open_table(HEARTBEATS)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                out.push(decode(row?.1.value())?);
            }
            Ok(out)
        })
        .await
    }
}
