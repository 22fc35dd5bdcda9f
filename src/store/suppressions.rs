//! Silences and downtimes by tenant and id, and the answers of `Idempotency-Key` requests
//! (SPEC 8: only `POST /downtimes` honours the header).

use super::codec::{decode, encode, tenant_value, tenant_values};
use super::keys::scoped;
use super::tables::{DOWNTIMES, IDEMPOTENT_ANSWERS, SILENCES};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::event::EventDraft;
use crate::model::object::Object;
use crate::model::suppression::{Downtime, Silence};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

type Table = TableDefinition<'static, &'static [u8], &'static [u8]>;

/// How long an `Idempotency-Key` answer is kept.
const IDEMPOTENCY_TTL_MS: i64 = 24 * 3600 * 1000;

/// A stored answer: the body's SHA-256, the status and the body sent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdempotentAnswer {
    pub body_sha256: Vec<u8>,
    pub status: u16,
    pub answer: Vec<u8>,
    pub at: Timestamp,
}

/// What a create with an `Idempotency-Key` came to.
pub enum Idempotent<T> {
    Created(T),
    /// The key was used before within 24 h: its answer.
    Replay(IdempotentAnswer),
}

fn load<T: DeserializeOwned>(
    tx: &WriteTransaction,
    table: Table,
    tenant: Uuid,
    id: Uuid,
) -> Result<Option<T>, StoreError> {
    tenant_value(
        &tx.open_table(table).map_err(StoreError::from_redb)?,
        tenant,
        id,
    )
}

fn save<T: Serialize>(
    tx: &WriteTransaction,
    table: Table,
    tenant: Uuid,
    id: Uuid,
    value: &T,
) -> Result<(), StoreError> {
    tx.open_table(table)
        .map_err(StoreError::from_redb)?
        .insert(
            scoped(tenant, id.as_bytes()).as_slice(),
            encode(value)?.as_slice(),
        )
        .map_err(StoreError::from_redb)?;
    Ok(())
}

/// Downtimes, and what a flexible one waits for, in a transaction.
impl Tx<'_> {
    /// Every tenant's downtimes.
    pub fn all_downtimes(&self) -> Result<Vec<Downtime>, StoreError> {
        let t = self.open_table(DOWNTIMES).map_err(StoreError::from_redb)?;
        let mut out = Vec::new();
        for row in t.iter().map_err(StoreError::from_redb)? {
            out.push(decode(row.map_err(StoreError::from_redb)?.1.value())?);
        }
        Ok(out)
    }

    pub fn save_downtime(&self, downtime: &Downtime) -> Result<(), StoreError> {
        save(self, DOWNTIMES, downtime.tenant_id, downtime.id, downtime)
    }

    /// The tenant's hosts and services.
    pub fn tenant_objects(&self, tenant: Uuid) -> Result<Vec<Object>, StoreError> {
        super::objects::tenant_objects(self, tenant)
    }

    /// Whether an object is in a hard problem (a hard state other than OK/UP).
    pub fn hard_problem(&self, tenant: Uuid, object: Uuid) -> Result<bool, StoreError> {
        super::states::hard_problem(self, tenant, object)
    }
}

impl Store {
    pub async fn create_silence(
        self: &Arc<Self>,
        silence: Silence,
        audit: AuditDraft,
    ) -> Result<Silence, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            save(tx, SILENCES, silence.tenant_id, silence.id, &silence)?;
            store.record(tx, [audit.after(&silence)], vec![silence.event()])?;
            Ok(silence)
        })
        .await
        .inspect(|_| self.alert_timers.notify_one())
    }

    /// Ends a silence now (`expiresAt` = `now` unless it ended before).
    pub async fn expire_silence(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        now: Timestamp,
        audit: AuditDraft,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old: Silence = load(tx, SILENCES, tenant, id)?.ok_or(StoreError::NotFound)?;
            let mut new = old.clone();
            new.expires_at = new.expires_at.min(now);
            new.starts_at = new.starts_at.min(new.expires_at);
            new.version += 1;
            save(tx, SILENCES, tenant, id, &new)?;
            store.record(tx, [audit.before(&old).after(&new)], Vec::new())
        })
        .await
        .inspect(|_| self.alert_timers.notify_one())
    }

    /// Every silence of the tenant.
    pub async fn silences(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<Silence>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SILENCES).map_err(StoreError::from_redb)?;
            tenant_values(&t, tenant)
        })
        .await
    }

    /// Creates a downtime; with an `Idempotency-Key` (key, body hash, the answer made of the
    /// downtime) the key is checked and its answer saved in the same transaction.
    pub async fn create_downtime(
        self: &Arc<Self>,
        downtime: Downtime,
        audit: AuditDraft,
        idempotency: Option<(String, Vec<u8>)>,
        answer: impl FnOnce(&Downtime) -> (u16, Vec<u8>) + Send + 'static,
    ) -> Result<Idempotent<Downtime>, StoreError> {
        let store = self.clone();
        self.transact(move |tx| {
            let tenant = downtime.tenant_id;
            if let Some((key, _)) = &idempotency {
                let t = tx
                    .open_table(IDEMPOTENT_ANSWERS)
                    .map_err(StoreError::from_redb)?;
                let stored = t
                    .get(scoped(tenant, key.as_bytes()).as_slice())
                    .map_err(StoreError::from_redb)?
                    .map(|v| decode::<IdempotentAnswer>(v.value()))
                    .transpose()?;
                if let Some(stored) = stored {
                    if audit.ts.as_millis() - stored.at.as_millis() < IDEMPOTENCY_TTL_MS {
                        return Ok((Idempotent::Replay(stored), false));
                    }
                }
            }
            save(tx, DOWNTIMES, tenant, downtime.id, &downtime)?;
            if let Some((key, body_sha256)) = idempotency {
                let (status, answer) = answer(&downtime);
                let stored = IdempotentAnswer {
                    body_sha256,
                    status,
                    answer,
                    at: audit.ts,
                };
                tx.open_table(IDEMPOTENT_ANSWERS)
                    .map_err(StoreError::from_redb)?
                    .insert(
                        scoped(tenant, key.as_bytes()).as_slice(),
                        encode(&stored)?.as_slice(),
                    )
                    .map_err(StoreError::from_redb)?;
            }
            let event: EventDraft = downtime.event();
            store.record(tx, [audit.after(&downtime)], vec![event])?;
            Ok((Idempotent::Created(downtime), true))
        })
        .await
        .inspect(|_| self.alert_timers.notify_one())
    }

    /// Changes a downtime: ends it now (`DELETE`), or starts a flexible one.
    pub async fn change_downtime(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        change: impl FnOnce(&mut Downtime) + Send + 'static,
        audit: AuditDraft,
    ) -> Result<Downtime, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old: Downtime = load(tx, DOWNTIMES, tenant, id)?.ok_or(StoreError::NotFound)?;
            let mut new = old.clone();
            change(&mut new);
            new.version += 1;
            save(tx, DOWNTIMES, tenant, id, &new)?;
            store.record(tx, [audit.before(&old).after(&new)], Vec::new())?;
            Ok(new)
        })
        .await
        .inspect(|_| self.alert_timers.notify_one())
    }

    /// Every downtime of the tenant.
    pub async fn downtimes(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<Downtime>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DOWNTIMES).map_err(StoreError::from_redb)?;
            tenant_values(&t, tenant)
        })
        .await
    }
}
