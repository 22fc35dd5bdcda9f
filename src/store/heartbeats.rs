//! Heartbeat definitions and their last beat, by tenant and name.

use super::codec::{decode, encode, tenant_values};
use super::journal::Record;
use super::keys::scoped;
use super::tables::HEARTBEATS;
use super::{Store, StoreError};
use crate::model::event::EventDraft;
use crate::model::heartbeat::Heartbeat;
use redb::{ReadableTable, WriteTransaction};
use std::sync::Arc;
use uuid::Uuid;

fn key(tenant: Uuid, name: &str) -> Vec<u8> {
    scoped(tenant, name.as_bytes())
}

fn load(tx: &WriteTransaction, tenant: Uuid, name: &str) -> Result<Option<Heartbeat>, StoreError> {
    let t = tx.open_table(HEARTBEATS).map_err(StoreError::from_redb)?;
    t.get(key(tenant, name).as_slice())
        .map_err(StoreError::from_redb)?
        .map(|v| decode(v.value()))
        .transpose()
}

fn save(tx: &WriteTransaction, h: &Heartbeat) -> Result<(), StoreError> {
    tx.open_table(HEARTBEATS)
        .map_err(StoreError::from_redb)?
        .insert(key(h.tenant_id, &h.name).as_slice(), encode(h)?.as_slice())
        .map_err(StoreError::from_redb)?;
    Ok(())
}

impl Store {
    /// Creates or replaces a definition, keeping id, creation time and beat state.
    pub async fn upsert_heartbeat(
        self: &Arc<Self>,
        mut h: Heartbeat,
        record: Record,
    ) -> Result<Heartbeat, StoreError> {
        self.mutate(record, move |tx, audit| {
            let old = load(tx, h.tenant_id, &h.name)?;
            if let Some(old) = &old {
                h.id = old.id;
                h.created_at = old.created_at;
                h.last_beat = old.last_beat;
                h.missing = old.missing;
                h.version = old.version + 1;
            }
            save(tx, &h)?;
            let audit = match &old {
                Some(o) => audit.before(o),
                None => audit,
            };
            let audit = audit.after(&h);
            Ok((h, audit))
        })
        .await
    }

    pub async fn delete_heartbeat(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
        record: Record,
    ) -> Result<(), StoreError> {
        self.mutate(record, move |tx, audit| {
            let old = load(tx, tenant, &name)?.ok_or(StoreError::NotFound)?;
            tx.open_table(HEARTBEATS)
                .map_err(StoreError::from_redb)?
                .remove(key(tenant, &name).as_slice())
                .map_err(StoreError::from_redb)?;
            Ok(((), audit.before(&old)))
        })
        .await
    }

    /// Applies `change` to one heartbeat (a beat, or the sweep marking it missing), with the
    /// events `report` makes of it before and after journaled in the same transaction.
    pub async fn touch_heartbeat(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
        change: impl FnOnce(&mut Heartbeat) + Send + 'static,
        report: impl FnOnce(&Heartbeat, &Heartbeat) -> Option<EventDraft> + Send + 'static,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old = load(tx, tenant, &name)?.ok_or(StoreError::NotFound)?;
            let mut new = old.clone();
            change(&mut new);
            save(tx, &new)?;
            let events: Vec<EventDraft> = report(&old, &new).into_iter().collect();
            if events.is_empty() {
                tx.unrecorded("a heartbeat's last beat, no transition");
            }
            store.journal(tx, events)
        })
        .await
    }

    pub async fn heartbeats(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<Heartbeat>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(HEARTBEATS).map_err(StoreError::from_redb)?;
            tenant_values(&t, tenant)
        })
        .await
    }

    /// Every tenant's heartbeats, for the sweep.
    pub async fn all_heartbeats(self: &Arc<Self>) -> Result<Vec<Heartbeat>, StoreError> {
        self.read(|tx| {
            let t = tx.open_table(HEARTBEATS).map_err(StoreError::from_redb)?;
            let mut out = Vec::new();
            for row in t.iter().map_err(StoreError::from_redb)? {
                out.push(decode(row.map_err(StoreError::from_redb)?.1.value())?);
            }
            Ok(out)
        })
        .await
    }
}
