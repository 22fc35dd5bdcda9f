//! Notification records: escalation timers (indexed by alert and by due time), deliveries
//! (the outbox, indexed by next try; dead letters by tenant), schedule overrides, handoffs,
//! and the alerts whose chain waits for their suppression to lift. `notify/` decides what a
//! firing, an attempt or a handoff writes and commits it in a `Tx` with its events; this file
//! keeps the rows and their due-time indexes true and reads them.

use super::codec::{decode, encode, tenant_values_newest};
use super::keys::{scoped, tenant_range};
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{
    DEAD_LETTERS, DELIVERIES, DELIVERIES_DUE, ESCALATIONS, ESCALATIONS_DUE, HANDOFFS, META,
    OVERRIDES, SUPPRESSED_ALERTS,
};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertStatus};
use crate::model::notify::{Delivery, EscalationTimer, Override};
use std::sync::Arc;
use uuid::Uuid;

fn timer_key(alert: Uuid, step: u32) -> Vec<u8> {
    let mut k = alert.as_bytes().to_vec();
    k.extend_from_slice(&step.to_be_bytes());
    k
}

fn due_key(at: Timestamp, id: &[u8]) -> Vec<u8> {
    let mut k = at.as_millis().to_be_bytes().to_vec();
    k.extend_from_slice(id);
    k
}

/// Sets (or replaces) an escalation timer.
fn put_timer(tx: &WriteTx, t: &EscalationTimer) -> Result<(), StoreError> {
    let key = timer_key(t.alert_id, t.step);
    drop_timer(tx, &key)?;
    tx.open_table(ESCALATIONS)?
        .insert(key.as_slice(), encode(t)?.as_slice())?;
    tx.open_table(ESCALATIONS_DUE)?
        .insert(due_key(t.due, &key).as_slice(), ())?;
    Ok(())
}

/// Removes the timer at `key` and its due entry; returns it.
fn drop_timer(tx: &WriteTx, key: &[u8]) -> Result<Option<EscalationTimer>, StoreError> {
    let old: Option<EscalationTimer> = tx
        .open_table(ESCALATIONS)?
        .take(key)?
        .map(|v| decode(v.value()))
        .transpose()?;
    if let Some(old) = &old {
        tx.open_table(ESCALATIONS_DUE)?
            .remove(due_key(old.due, key).as_slice())?;
    }
    Ok(old)
}

/// Starts an alert's escalation chain at step 0, counting `after` from `base`; the escalator
/// fires the step when it is due. An alert without a policy has no chain.
pub(super) fn arm_escalation(
    tx: &WriteTx,
    alert: &Alert,
    base: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    if alert.escalation_policy.is_none() || alert.status != AlertStatus::Open {
        return Ok(());
    }
    disarm_escalation(tx, alert.id)?;
    put_timer(
        tx,
        &EscalationTimer {
            tenant_id: alert.tenant_id,
            alert_id: alert.id,
            step: 0,
            repeat: 0,
            base,
            due: now,
        },
    )
}

/// Stops an alert's chain: ack, resolve, snooze, expiry, incident resolve.
pub(super) fn disarm_escalation(tx: &WriteTx, alert: Uuid) -> Result<(), StoreError> {
    let keys: Vec<Vec<u8>> = {
        let t = tx.open_table(ESCALATIONS)?;
        let lo = timer_key(alert, 0);
        let hi = timer_key(alert, u32::MAX);
        let mut keys = Vec::new();
        for row in t.range(lo.as_slice()..=hi.as_slice())? {
            keys.push(row?.0.value().to_vec());
        }
        keys
    };
    for key in keys {
        drop_timer(tx, &key)?;
    }
    Ok(())
}

/// Notes an alert that opened suppressed, so its chain starts when the suppression lifts.
pub(super) fn hold_suppressed(tx: &WriteTx, alert: &Alert) -> Result<(), StoreError> {
    if alert.escalation_policy.is_some() {
        tx.open_table(SUPPRESSED_ALERTS)?
            .insert(scoped(alert.tenant_id, alert.id.as_bytes()).as_slice(), ())?;
    }
    Ok(())
}

/// The alerts waiting for their suppression to lift: (tenant, alert id).
pub(super) fn suppressed_alerts(tx: &WriteTx) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
    let t = tx.open_table(SUPPRESSED_ALERTS)?;
    let mut out = Vec::new();
    for row in t.iter()? {
        let key = row?.0.value().to_vec();
        if let (Ok(tenant), Ok(id)) = (Uuid::from_slice(&key[..16]), Uuid::from_slice(&key[16..])) {
            out.push((tenant, id));
        }
    }
    Ok(out)
}

pub(super) fn release_suppressed(
    tx: &WriteTx,
    tenant: Uuid,
    alert: Uuid,
) -> Result<(), StoreError> {
    tx.open_table(SUPPRESSED_ALERTS)?
        .remove(scoped(tenant, alert.as_bytes()).as_slice())?;
    Ok(())
}

/// Writes a delivery to the outbox (due at its `next_try`) or, dead, to the dead letters.
pub(super) fn put_delivery(tx: &WriteTx, d: &Delivery) -> Result<(), StoreError> {
    if d.dead {
        tx.open_table(DEAD_LETTERS)?.insert(
            scoped(d.tenant_id, d.id.as_bytes()).as_slice(),
            encode(d)?.as_slice(),
        )?;
        return Ok(());
    }
    tx.open_table(DELIVERIES)?
        .insert(d.id.as_bytes().as_slice(), encode(d)?.as_slice())?;
    tx.open_table(DELIVERIES_DUE)?
        .insert(due_key(d.next_try, d.id.as_bytes()).as_slice(), ())?;
    Ok(())
}

/// Takes a delivery out of the outbox; `None` when it is no longer there.
fn take_delivery(tx: &WriteTx, id: Uuid) -> Result<Option<Delivery>, StoreError> {
    let old: Option<Delivery> = tx
        .open_table(DELIVERIES)?
        .take(id.as_bytes().as_slice())?
        .map(|v| decode(v.value()))
        .transpose()?;
    if let Some(old) = &old {
        tx.open_table(DELIVERIES_DUE)?
            .remove(due_key(old.next_try, old.id.as_bytes()).as_slice())?;
    }
    Ok(old)
}

/// The earliest due key of a `ms + ...` index.
fn first_due(
    tx: &ReadTx,
    table: redb::TableDefinition<&[u8], ()>,
) -> Result<Option<Timestamp>, StoreError> {
    let t = tx.open_table(table)?;
    let first = t.first()?;
    Ok(first.and_then(|(k, _)| {
        let ms = i64::from_be_bytes(k.value().get(..8)?.try_into().ok()?);
        Timestamp::from_millis(ms)
    }))
}

/// The rows of `items` whose `ms + key` entry in `due` is at or before `now`, earliest first,
/// at most `max`.
fn due_rows<T: serde::de::DeserializeOwned>(
    tx: &ReadTx,
    due: redb::TableDefinition<&[u8], ()>,
    items: redb::TableDefinition<&[u8], &[u8]>,
    now: Timestamp,
    max: usize,
) -> Result<Vec<T>, StoreError> {
    let due = tx.open_table(due)?;
    let items = tx.open_table(items)?;
    let end = (now.as_millis() + 1).to_be_bytes();
    let mut out = Vec::new();
    for row in due.range(..end.as_slice())? {
        let key = row?.0.value().to_vec();
        if let Some(v) = items.get(&key[8..])? {
            out.push(decode(v.value())?);
        }
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// What the notifier writes in its transactions.
impl Tx<'_> {
    /// The armed timer of an alert's escalation step.
    pub fn escalation_timer(
        &self,
        alert: Uuid,
        step: u32,
    ) -> Result<Option<EscalationTimer>, StoreError> {
        self.open_table(ESCALATIONS)?
            .get(timer_key(alert, step).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// Sets (or replaces) an escalation timer.
    pub fn put_escalation_timer(&self, timer: &EscalationTimer) -> Result<(), StoreError> {
        put_timer(self, timer)
    }

    /// Removes an escalation timer.
    pub fn drop_escalation_timer(&self, alert: Uuid, step: u32) -> Result<(), StoreError> {
        drop_timer(self, &timer_key(alert, step)).map(drop)
    }

    /// Writes a delivery to the outbox (due at its `next_try`) or, dead, to the dead letters.
    pub fn put_override(&self, o: &Override) -> Result<(), StoreError> {
        let mut key = scoped(o.tenant_id, o.schedule_id.as_bytes());
        key.extend_from_slice(o.id.as_bytes());
        self.open_table(OVERRIDES)?
            .insert(key.as_slice(), encode(o)?.as_slice())?;
        Ok(())
    }

    /// Removes a schedule's override; the override, when there was one.
    pub fn remove_override(
        &self,
        tenant: Uuid,
        schedule: Uuid,
        id: Uuid,
    ) -> Result<Option<Override>, StoreError> {
        let mut key = scoped(tenant, schedule.as_bytes());
        key.extend_from_slice(id.as_bytes());
        self.open_table(OVERRIDES)?
            .take(key.as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    pub fn put_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        put_delivery(self, delivery)
    }

    /// Takes a delivery out of the outbox; `None` when it is no longer there.
    pub fn take_delivery(&self, id: Uuid) -> Result<Option<Delivery>, StoreError> {
        take_delivery(self, id)
    }

    /// Takes a dead letter out of the tenant's dead letters.
    pub fn take_dead_letter(&self, tenant: Uuid, id: Uuid) -> Result<Option<Delivery>, StoreError> {
        self.open_table(DEAD_LETTERS)?
            .take(scoped(tenant, id.as_bytes()).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// Notes that the incoming person of the schedule's shift starting at `start` was told.
    pub fn set_handoff(
        &self,
        tenant: Uuid,
        schedule: Uuid,
        start: Timestamp,
    ) -> Result<(), StoreError> {
        self.open_table(HANDOFFS)?.insert(
            scoped(tenant, schedule.as_bytes()).as_slice(),
            start.as_millis(),
        )?;
        Ok(())
    }
}

impl Store {
    /// When the next escalation timer and the next delivery are due.
    pub async fn notify_due(
        self: &Arc<Self>,
    ) -> Result<(Option<Timestamp>, Option<Timestamp>), StoreError> {
        self.read(|tx| {
            Ok((
                first_due(tx, ESCALATIONS_DUE)?,
                first_due(tx, DELIVERIES_DUE)?,
            ))
        })
        .await
    }

    /// How many escalation timers are armed, deliveries wait in the outbox, and dead letters
    /// are kept.
    pub async fn notify_counts(self: &Arc<Self>) -> Result<(u64, u64, u64), StoreError> {
        self.read(|tx| {
            let len = |t: redb::TableDefinition<&[u8], &[u8]>| tx.open_table(t)?.len();
            Ok((len(ESCALATIONS)?, len(DELIVERIES)?, len(DEAD_LETTERS)?))
        })
        .await
    }

    /// Escalation timers due by `now`, earliest first, at most `max`.
    pub async fn escalations_due(
        self: &Arc<Self>,
        now: Timestamp,
        max: usize,
    ) -> Result<Vec<EscalationTimer>, StoreError> {
        self.read(move |tx| due_rows(tx, ESCALATIONS_DUE, ESCALATIONS, now, max))
            .await
    }

    /// Deliveries due by `now`, earliest first, at most `max`.
    pub async fn deliveries_due(
        self: &Arc<Self>,
        now: Timestamp,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |tx| due_rows(tx, DELIVERIES_DUE, DELIVERIES, now, max))
            .await
    }

    /// The start of the last shift of a schedule whose incoming person was told.
    pub async fn handoff_announced(
        self: &Arc<Self>,
        tenant: Uuid,
        schedule: Uuid,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(HANDOFFS)?;
            Ok(t.get(scoped(tenant, schedule.as_bytes()).as_slice())?
                .and_then(|v| Timestamp::from_millis(v.value())))
        })
        .await
    }

    /// Dead letters, newest first, strictly before `before`.
    pub async fn dead_letters(
        self: &Arc<Self>,
        tenant: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DEAD_LETTERS)?;
            tenant_values_newest(&t, tenant, before, limit, |_: &Delivery| true)
        })
        .await
    }

    /// Every override of a tenant (for on-call resolution across its schedules).
    pub async fn tenant_overrides(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Override>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OVERRIDES)?;
            let (lo, hi) = tenant_range(tenant);
            let mut out: Vec<Override> = Vec::new();
            for row in t.range(lo.as_slice()..hi.as_slice())? {
                out.push(decode(row?.1.value())?);
            }
            out.sort_by_key(|o| (o.start, o.id));
            Ok(out)
        })
        .await
    }

    /// A 32-byte key of this installation stored under `name`, made on first use (for
    /// signing ack links).
    pub async fn install_key(self: &Arc<Self>, name: &'static str) -> Result<Vec<u8>, StoreError> {
        self.transact(move |tx| {
            let mut meta = tx.open_table(META)?;
            if let Some(v) = meta.get(name)? {
                return Ok((v.value().to_vec(), false));
            }
            let mut key = vec![0u8; 32];
            getrandom::fill(&mut key).map_err(|e| StoreError::Internal(e.to_string()))?;
            meta.insert(name, key.as_slice())?;
            tx.unrecorded("an installation key, made on first use");
            Ok((key, true))
        })
        .await
    }
}
