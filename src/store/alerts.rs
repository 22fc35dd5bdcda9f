//! Alerts by tenant and id, and the dedup keys of active (open or acked) alerts, so at most
//! one active alert holds a key whatever races for it: every change of an alert is one write
//! transaction that reads the key first.

use super::codec::{decode, encode, tenant_values_newest};
use super::journal::save_position;
use super::keys::scoped;
use super::tables::{ACTIVE_ALERT_KEYS, ALERT_TIMERS, ALERTS, OBJECTS, PENDING_ALERTS};
use super::{Store, StoreError};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertFilter, AlertStatus, TransitionError};
use crate::model::audit::AuditDraft;
use crate::model::event::{EventDraft, Journaled};
use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// What the alert engine decided for one event.
pub enum AlertMatch {
    /// Open `alert` under its dedup key, or refresh the active alert holding the key.
    Fire {
        alert: Box<Alert>,
        event: Uuid,
        /// The rule's `pendingFor`: the alert opens only once the condition held this long.
        pending_for: Option<std::time::Duration>,
    },
    /// Resolve the active alert holding `dedup_key`, if any.
    Clear {
        tenant: Uuid,
        dedup_key: String,
        event: Uuid,
    },
}

fn active_key(tenant: Uuid, dedup_key: &str) -> Vec<u8> {
    scoped(tenant, dedup_key.as_bytes())
}

fn load(tx: &WriteTransaction, tenant: Uuid, id: Uuid) -> Result<Option<Alert>, StoreError> {
    let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
    t.get(scoped(tenant, id.as_bytes()).as_slice())
        .map_err(StoreError::from_redb)?
        .map(|v| decode(v.value()))
        .transpose()
}

/// The active alert holding `dedup_key`.
fn active(
    tx: &WriteTransaction,
    tenant: Uuid,
    dedup_key: &str,
) -> Result<Option<Alert>, StoreError> {
    let id = {
        let keys = tx
            .open_table(ACTIVE_ALERT_KEYS)
            .map_err(StoreError::from_redb)?;
        keys.get(active_key(tenant, dedup_key).as_slice())
            .map_err(StoreError::from_redb)?
            .and_then(|v| Uuid::from_slice(v.value()).ok())
    };
    match id {
        Some(id) => load(tx, tenant, id),
        None => Ok(None),
    }
}

/// An alert a `pendingFor` rule will open at `due` unless a clear comes first.
#[derive(Serialize, Deserialize)]
struct PendingAlert {
    alert: Alert,
    due: Timestamp,
}

/// Timer index key: due time, tenant, alert id.
fn timer_key(until: Timestamp, tenant: Uuid, id: Uuid) -> Vec<u8> {
    let mut k = until.as_millis().to_be_bytes().to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.extend_from_slice(id.as_bytes());
    k
}

/// Saves an alert and keeps its dedup key held exactly while it is active. An active alert's
/// timers (a snooze's end, its auto-close) are indexed by time; entries a later change made
/// stale are dropped when due.
fn save(tx: &WriteTransaction, a: &Alert) -> Result<(), StoreError> {
    if let Some(object) = a.object_id {
        let by = (a.status == AlertStatus::Acked)
            .then_some(a.acked_by.as_deref())
            .flatten();
        super::states::mirror_ack(tx, a.tenant_id, object, by)?;
    }
    if a.status.is_active() {
        let mut timers = tx.open_table(ALERT_TIMERS).map_err(StoreError::from_redb)?;
        for at in [a.snoozed_until, a.auto_close_at].into_iter().flatten() {
            timers
                .insert(timer_key(at, a.tenant_id, a.id).as_slice(), ())
                .map_err(StoreError::from_redb)?;
        }
    }
    tx.open_table(ALERTS)
        .map_err(StoreError::from_redb)?
        .insert(
            scoped(a.tenant_id, a.id.as_bytes()).as_slice(),
            encode(a)?.as_slice(),
        )
        .map_err(StoreError::from_redb)?;
    let mut keys = tx
        .open_table(ACTIVE_ALERT_KEYS)
        .map_err(StoreError::from_redb)?;
    let key = active_key(a.tenant_id, &a.dedup_key);
    if a.status.is_active() {
        keys.insert(key.as_slice(), a.id.as_bytes().as_slice())
            .map_err(StoreError::from_redb)?;
    } else {
        let held_by_this = keys
            .get(key.as_slice())
            .map_err(StoreError::from_redb)?
            .is_some_and(|v| v.value() == a.id.as_bytes().as_slice());
        if held_by_this {
            keys.remove(key.as_slice()).map_err(StoreError::from_redb)?;
        }
    }
    Ok(())
}

fn refused(e: TransitionError) -> StoreError {
    match e {
        TransitionError::NotOpen(_) => StoreError::NotFound,
        TransitionError::Closed(_) => StoreError::Conflict(e.to_string()),
    }
}

/// Opens `new` under its key, or refreshes the active alert holding it; returns the alert,
/// whether it is new, and its `alert_opened` event when it is.
fn fire(
    tx: &WriteTransaction,
    new: Alert,
    event: Option<Uuid>,
    via: Option<&str>,
) -> Result<(Alert, bool, Option<EventDraft>), StoreError> {
    let held = active(tx, new.tenant_id, &new.dedup_key)?;
    let fresh = held.is_none();
    let mut alert = match held {
        Some(mut held) => {
            held.refresh(new.severity, new.title, new.payload);
            held
        }
        None => new,
    };
    if let Some(e) = event {
        alert.remember(e);
    }
    save(tx, &alert)?;
    let opened = fresh.then(|| alert.opened(via));
    Ok((alert, fresh, opened))
}

/// Records a match of a `pendingFor` rule: a new pending alert due at `due`, or a refresh of
/// the one already waiting (its due time kept: the condition has held since then).
fn hold(
    tx: &WriteTransaction,
    alert: Alert,
    event: Uuid,
    due: Timestamp,
) -> Result<(), StoreError> {
    let key = active_key(alert.tenant_id, &alert.dedup_key);
    let mut t = tx
        .open_table(PENDING_ALERTS)
        .map_err(StoreError::from_redb)?;
    let waiting = t
        .get(key.as_slice())
        .map_err(StoreError::from_redb)?
        .map(|v| decode::<PendingAlert>(v.value()))
        .transpose()?;
    let mut pending = match waiting {
        Some(mut p) => {
            p.alert.refresh(alert.severity, alert.title, alert.payload);
            p
        }
        None => PendingAlert { alert, due },
    };
    pending.alert.remember(event);
    t.insert(key.as_slice(), encode(&pending)?.as_slice())
        .map_err(StoreError::from_redb)?;
    Ok(())
}

/// The host of an object, for a host downtime covering its services.
fn host_of(
    tx: &WriteTransaction,
    tenant: Uuid,
    object: Option<Uuid>,
) -> Result<Option<Uuid>, StoreError> {
    let Some(object) = object else {
        return Ok(None);
    };
    let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
    Ok(t.get(scoped(tenant, object.as_bytes()).as_slice())
        .map_err(StoreError::from_redb)?
        .map(|v| decode::<crate::model::object::Object>(v.value()))
        .transpose()?
        .and_then(|o| o.host_id))
}

impl Store {
    /// The alert engine's work for the events through `through`, committed with its consumer
    /// position and the lifecycle events it caused, in one transaction; `suppressed` says why
    /// a newly opened alert (given its object's host) does not page.
    pub async fn apply_alert_matches(
        self: &Arc<Self>,
        consumer: &'static str,
        through: Uuid,
        matches: Vec<AlertMatch>,
        now: Timestamp,
        suppressed: impl Fn(&Alert, Option<Uuid>) -> Option<String> + Send + 'static,
    ) -> Result<Vec<Journaled>, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let mut events = Vec::new();
            for m in matches {
                match m {
                    AlertMatch::Fire {
                        alert,
                        event,
                        pending_for: Some(wait),
                    } if active(tx, alert.tenant_id, &alert.dedup_key)?.is_none() => {
                        hold(tx, *alert, event, now.plus(wait))?;
                    }
                    AlertMatch::Fire { alert, event, .. } => {
                        let (alert, _, opened) = fire(tx, *alert, Some(event), None)?;
                        if let Some(opened) = opened {
                            events.push(opened);
                            let host = host_of(tx, alert.tenant_id, alert.object_id)?;
                            events
                                .extend(suppressed(&alert, host).map(|why| alert.suppressed(&why)));
                        }
                    }
                    AlertMatch::Clear {
                        tenant,
                        dedup_key,
                        event,
                    } => {
                        tx.open_table(PENDING_ALERTS)
                            .map_err(StoreError::from_redb)?
                            .remove(active_key(tenant, &dedup_key).as_slice())
                            .map_err(StoreError::from_redb)?;
                        if let Some(mut held) = active(tx, tenant, &dedup_key)? {
                            held.remember(event);
                            events.push(held.resolve(now).map_err(refused)?);
                            save(tx, &held)?;
                        }
                    }
                }
            }
            save_position(tx, consumer, through)?;
            store.journal(tx, events)
        })
        .await
    }

    /// A manual alarm: opens `alert`, or folds into the active alert with its dedup key
    /// (`false`: folded).
    pub async fn raise_alarm(
        self: &Arc<Self>,
        alert: Alert,
        audit: AuditDraft,
    ) -> Result<(Alert, bool, Vec<Journaled>), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let (alert, opened, event) = fire(tx, alert, None, Some("api"))?;
            let audit = audit.after(&alert);
            let journaled = store.record(tx, [audit], event.into_iter().collect())?;
            Ok((alert, opened, journaled))
        })
        .await
    }

    /// Moves an alert on (`:ack`, `:resolve`), with its lifecycle event and audit entry in the
    /// same transaction.
    pub async fn transition_alert(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        change: impl FnOnce(&mut Alert) -> Result<EventDraft, TransitionError> + Send + 'static,
        audit: AuditDraft,
    ) -> Result<(Alert, Vec<Journaled>), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old = load(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
            let mut new = old.clone();
            let event = change(&mut new).map_err(refused)?;
            save(tx, &new)?;
            let audit = audit.before(&old).after(&new);
            let journaled = store.record(tx, [audit], vec![event])?;
            Ok((new, journaled))
        })
        .await
    }

    /// Runs the alert timers due by `now`: snoozes that ran out (open again, with the wake-up
    /// event), alerts past `autoCloseAfter` (expired, no event), and pending alerts whose
    /// condition held for their rule's `pendingFor` (opened, with `suppressed` saying why one
    /// does not page: given the alert and its object's host).
    pub async fn run_alert_timers(
        self: &Arc<Self>,
        now: Timestamp,
        suppressed: impl Fn(&Alert, Option<Uuid>) -> Option<String> + Send + 'static,
    ) -> Result<Vec<Journaled>, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let due: Vec<(Vec<u8>, Uuid, Uuid, Timestamp)> = {
                let t = tx.open_table(ALERT_TIMERS).map_err(StoreError::from_redb)?;
                let end = (now.as_millis() + 1).to_be_bytes();
                let mut due = Vec::new();
                for row in t.range(..end.as_slice()).map_err(StoreError::from_redb)? {
                    let key = row.map_err(StoreError::from_redb)?.0.value().to_vec();
                    let (at, ids) = key.split_at(8);
                    let ms = i64::from_be_bytes(at.try_into().unwrap_or_default());
                    let (tenant, id) = ids.split_at(16);
                    if let (Ok(tenant), Ok(id), Some(at)) = (
                        Uuid::from_slice(tenant),
                        Uuid::from_slice(id),
                        Timestamp::from_millis(ms),
                    ) {
                        due.push((key, tenant, id, at));
                    }
                }
                due
            };
            let mut events = Vec::new();
            for (key, tenant, id, at) in due {
                tx.open_table(ALERT_TIMERS)
                    .map_err(StoreError::from_redb)?
                    .remove(key.as_slice())
                    .map_err(StoreError::from_redb)?;
                if let Some(mut alert) = load(tx, tenant, id)? {
                    if let Some(woken) = alert.wake(at) {
                        save(tx, &alert)?;
                        events.push(woken);
                    } else if alert.expire(at) {
                        save(tx, &alert)?;
                    }
                }
            }
            let ripe: Vec<(Vec<u8>, PendingAlert)> = {
                let t = tx
                    .open_table(PENDING_ALERTS)
                    .map_err(StoreError::from_redb)?;
                let mut ripe = Vec::new();
                for row in t.iter().map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    let pending: PendingAlert = decode(v.value())?;
                    if pending.due <= now {
                        ripe.push((k.value().to_vec(), pending));
                    }
                }
                ripe
            };
            for (key, pending) in ripe {
                tx.open_table(PENDING_ALERTS)
                    .map_err(StoreError::from_redb)?
                    .remove(key.as_slice())
                    .map_err(StoreError::from_redb)?;
                let mut alert = pending.alert;
                alert.opened_at = now;
                let (alert, _, opened) = fire(tx, alert, None, None)?;
                if let Some(opened) = opened {
                    events.push(opened);
                    let host = host_of(tx, alert.tenant_id, alert.object_id)?;
                    events.extend(suppressed(&alert, host).map(|why| alert.suppressed(&why)));
                }
            }
            store.journal(tx, events)
        })
        .await
    }

    pub async fn alert(self: &Arc<Self>, tenant: Uuid, id: Uuid) -> Result<Alert, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
            t.get(scoped(tenant, id.as_bytes()).as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode(v.value()))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
        .await
    }

    /// Newest first (ids are time-ordered), strictly before `before`, at most `limit` that
    /// `filter` accepts.
    pub async fn alerts(
        self: &Arc<Self>,
        tenant: Uuid,
        filter: AlertFilter,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Alert>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
            tenant_values_newest(&t, tenant, before, limit, |a| filter.matches(a))
        })
        .await
    }
}
