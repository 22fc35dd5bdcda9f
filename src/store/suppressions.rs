//! Silences and downtimes by tenant and id, and the answers of `Idempotency-Key` requests
//! (SPEC 8: only `POST /downtimes` honours the header).

use super::codec::{decode, encode, tenant_value, tenant_values};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::{DOWNTIMES, IDEMPOTENT_ANSWERS, SILENCES};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::object::Object;
use crate::model::suppression::{Downtime, Silence};
use redb::TableDefinition;
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
fn load<T: DeserializeOwned>(
    tx: &WriteTx,
    table: Table,
    tenant: Uuid,
    id: Uuid,
) -> Result<Option<T>, StoreError> {
    tenant_value(&tx.open_table(table)?, tenant, id)
}

fn save<T: Serialize>(
    tx: &WriteTx,
    table: Table,
    tenant: Uuid,
    id: Uuid,
    value: &T,
) -> Result<(), StoreError> {
    tx.open_table(table)?.insert(
        scoped(tenant, id.as_bytes()).as_slice(),
        encode(value)?.as_slice(),
    )?;
    Ok(())
}

/// Downtimes, and what a flexible one waits for, in a transaction.
impl Tx<'_> {
    pub(crate) fn silence(&self, tenant: Uuid, id: Uuid) -> Result<Option<Silence>, StoreError> {
        load(self, SILENCES, tenant, id)
    }

    /// Saves a silence with what is due for it indexed among the alert timers (its start, the
    /// warning before it expires, its unmatched check); entries a later change made stale are
    /// dropped when due.
    pub(crate) fn save_silence(&self, silence: &Silence) -> Result<(), StoreError> {
        for at in silence.timers() {
            self.put_alert_timer(at, silence.tenant_id, silence.id)?;
        }
        save(self, SILENCES, silence.tenant_id, silence.id, silence)
    }

    pub(crate) fn downtime(&self, tenant: Uuid, id: Uuid) -> Result<Option<Downtime>, StoreError> {
        load(self, DOWNTIMES, tenant, id)
    }

    pub(crate) fn all_downtimes(&self) -> Result<Vec<Downtime>, StoreError> {
        let t = self.open_table(DOWNTIMES)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(decode(row?.1.value())?);
        }
        Ok(out)
    }

    pub(crate) fn tenant_downtimes(&self, tenant: Uuid) -> Result<Vec<Downtime>, StoreError> {
        tenant_values(&self.open_table(DOWNTIMES)?, tenant)
    }

    pub(crate) fn save_downtime(&self, downtime: &Downtime) -> Result<(), StoreError> {
        for at in downtime.timers() {
            self.put_alert_timer(at, downtime.tenant_id, downtime.id)?;
        }
        save(self, DOWNTIMES, downtime.tenant_id, downtime.id, downtime)
    }

    /// The answer kept for the tenant's `Idempotency-Key` `key`, unless older than 24 h at
    /// `now` (then the key is free again).
    pub(crate) fn idempotent_answer(
        &self,
        tenant: Uuid,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<IdempotentAnswer>, StoreError> {
        let t = self.open_table(IDEMPOTENT_ANSWERS)?;
        let stored = t
            .get(scoped(tenant, key.as_bytes()).as_slice())?
            .map(|v| decode::<IdempotentAnswer>(v.value()))
            .transpose()?;
        Ok(stored.filter(|a| now.as_millis() - a.at.as_millis() < IDEMPOTENCY_TTL_MS))
    }

    /// Keeps the answer a request with the tenant's `Idempotency-Key` `key` got.
    pub(crate) fn keep_idempotent_answer(
        &self,
        tenant: Uuid,
        key: &str,
        answer: &IdempotentAnswer,
    ) -> Result<(), StoreError> {
        self.open_table(IDEMPOTENT_ANSWERS)?.insert(
            scoped(tenant, key.as_bytes()).as_slice(),
            encode(answer)?.as_slice(),
        )?;
        Ok(())
    }

    pub(crate) fn tenant_objects(&self, tenant: Uuid) -> Result<Vec<Object>, StoreError> {
        super::objects::tenant_objects(self, tenant)
    }

    pub(crate) fn hard_problem(&self, tenant: Uuid, object: Uuid) -> Result<bool, StoreError> {
        super::states::hard_problem(self, tenant, object)
    }
}

impl Store {
    pub(crate) async fn silence(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Silence, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SILENCES)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    pub(crate) async fn downtime(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Downtime, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DOWNTIMES)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    pub(crate) async fn silences(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Silence>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SILENCES)?;
            tenant_values(&t, tenant)
        })
        .await
    }

    /// The downtimes of every tenant that name a calendar (their own, not one a main read
    /// for this site) and are not over by `now`.
    pub(crate) async fn calendar_downtimes(
        self: &Arc<Self>,
        now: Timestamp,
    ) -> Result<Vec<Downtime>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DOWNTIMES)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                let d: Downtime = decode(row?.1.value())?;
                if d.calendar_url.is_some() && !d.from_main && !d.over(now) {
                    out.push(d);
                }
            }
            Ok(out)
        })
        .await
    }

    pub(crate) async fn downtimes(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Downtime>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DOWNTIMES)?;
            tenant_values(&t, tenant)
        })
        .await
    }
}
