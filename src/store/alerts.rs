//! The alert engine's rows: alerts by tenant and id, and the dedup keys of active (open or
//! acked) alerts, so at most one active alert holds a key whatever races for it (every change
//! of an alert is one write transaction that reads the key first); alerts pending a rule's
//! `pendingFor`, the alert timers, heartbeat rules' last events and the alarm-storm index.
//! `alerting/` decides what happens to them, in a `Tx`; this file keeps their indexes true
//! and reads them.

use super::codec::{decode, encode, tenant_value, tenant_values_newest};
use super::keys::tenant_range;
use super::keys::{as_keys, past_prefix, scoped, stored_due_time, stored_uuid};
use super::kv::{Readable, WriteTx};
use super::tables::{
    ACTIVE_ALERT_KEYS, ALERT_TIMERS, ALERTS, CONFIG_DOCS, INCIDENTS, OBJECTS, PENDING_ALERTS,
    RECENTLY_CLEARED_ALERT_KEYS, RULE_BEATS, STATES, STORM_INCIDENTS, STORM_INDEX,
    SUPPRESSED_ALERTS,
};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertFilter};
use crate::model::config::ConfigDoc;
use crate::model::incident::Incident;
use crate::model::object::Object;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// An index of alert ids by tenant + dedup key.
type KeyIndex = redb::TableDefinition<'static, &'static [u8], &'static [u8]>;

fn active_key(tenant: Uuid, dedup_key: &str) -> Vec<u8> {
    scoped(tenant, dedup_key.as_bytes())
}

fn load(tx: &WriteTx, tenant: Uuid, id: Uuid) -> Result<Option<Alert>, StoreError> {
    tenant_value(&tx.open_table(ALERTS)?, tenant, id)
}

/// An alert a `pendingFor` rule will open at `due` unless a clear comes first.
#[derive(Serialize, Deserialize)]
pub struct PendingAlert {
    pub alert: Alert,
    pub due: Timestamp,
}

/// Timer index key: due time, tenant, alert id.
fn timer_key(until: Timestamp, tenant: Uuid, id: Uuid) -> Vec<u8> {
    let mut k = until.as_millis().to_be_bytes().to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.extend_from_slice(id.as_bytes());
    k
}

/// The timer an index key names (the inverse of `timer_key`).
fn due_timer(key: Vec<u8>) -> Result<DueTimer, StoreError> {
    let at = stored_due_time(&key, "an alert timer")?;
    let tenant = stored_uuid(
        key.get(8..24).unwrap_or_default(),
        "an alert timer's tenant",
    )?;
    let alert = stored_uuid(
        key.get(24..40).unwrap_or_default(),
        "an alert timer's alert",
    )?;
    Ok(DueTimer {
        key,
        tenant,
        alert,
        at,
    })
}

/// An alert timer that fell due: the alert's tenant and id, and when it was due.
pub struct DueTimer {
    key: Vec<u8>,
    pub tenant: Uuid,
    pub alert: Uuid,
    pub at: Timestamp,
}

/// Saves an alert and keeps its dedup key held exactly while it is active, and by a resolved
/// alert while its source firing again still counts toward its chatter. An alert's timers (a
/// snooze's end, its auto-close, its shelf's end and the warning before it, the end of that
/// window) are indexed by time;
/// entries a later change made stale are dropped when due.
fn save(tx: &WriteTx, a: &Alert) -> Result<(), StoreError> {
    let active = a.status.is_active();
    let recently_cleared = if active { None } else { a.refire_until };
    let mut timer_table = tx.open_table(ALERT_TIMERS)?;
    for at in a.timer_times() {
        timer_table.insert(timer_key(at, a.tenant_id, a.id).as_slice(), ())?;
    }
    tx.open_table(ALERTS)?.insert(
        scoped(a.tenant_id, a.id.as_bytes()).as_slice(),
        encode(a)?.as_slice(),
    )?;
    let key = active_key(a.tenant_id, &a.dedup_key);
    for (table, held) in [
        (ACTIVE_ALERT_KEYS, active),
        (RECENTLY_CLEARED_ALERT_KEYS, recently_cleared.is_some()),
    ] {
        let mut keys = tx.open_table(table)?;
        if held {
            keys.insert(key.as_slice(), a.id.as_bytes().as_slice())?;
        } else {
            let held_by_this = keys
                .get(key.as_slice())?
                .is_some_and(|v| v.value() == a.id.as_bytes().as_slice());
            if held_by_this {
                keys.remove(key.as_slice())?;
            }
        }
    }
    Ok(())
}

/// The storm index key prefix of a label pair: tenant, then the pair, length-prefixed.
fn storm_pair(tenant: Uuid, pair: &str) -> Vec<u8> {
    let mut prefix = tenant.as_bytes().to_vec();
    prefix.extend_from_slice(&u32::try_from(pair.len()).unwrap_or(u32::MAX).to_be_bytes());
    prefix.extend_from_slice(pair.as_bytes());
    prefix
}

/// The storm index's key of a pair's open at `at` (times since the epoch, big-endian: byte
/// order is time order from 0 on); the alert's id follows it.
fn open_key(prefix: &[u8], at: Timestamp) -> Vec<u8> {
    open_key_at(prefix, at.as_millis())
}

fn open_key_at(prefix: &[u8], ms: i64) -> Vec<u8> {
    let mut key = prefix.to_vec();
    key.extend_from_slice(&ms.max(0).to_be_bytes());
    key
}

/// Keys as the tables take them.
/// What the alert engine reads and writes in its transactions.
impl Tx<'_> {
    /// Reads ahead, in a few queries, the rows that deciding on a batch of alert matches reads
    /// one at a time: the alerts holding or waiting on the dedup `keys`, the `objects` (and
    /// those alerts') and their hosts with the states of both, the storm incidents of the
    /// label `pairs` (`k=v`) and the `rules`' documents. Where each read is a round trip
    /// (PostgreSQL) the decisions are then answered from what the transaction knows; nothing
    /// on redb, whose reads are local.
    pub(crate) fn read_ahead(
        &self,
        keys: &[(Uuid, &str)],
        objects: &[(Uuid, Uuid)],
        pairs: &[(Uuid, &str)],
        rules: &[(Uuid, &str)],
    ) -> Result<(), StoreError> {
        if !self.reads_are_remote() {
            return Ok(());
        }
        let active: Vec<Vec<u8>> = keys.iter().map(|(t, k)| active_key(*t, k)).collect();
        self.open_table(PENDING_ALERTS)?
            .prefetch(&as_keys(&active))?;
        let index = self.open_table(ACTIVE_ALERT_KEYS)?;
        let held = index.get_each(&as_keys(&active))?;
        let alerts: Vec<Vec<u8>> = keys
            .iter()
            .zip(held)
            .filter_map(|((t, _), id)| Some(scoped(*t, id?.value())))
            .collect();
        // The objects of the alerts held too: a clear mirrors on its object's state.
        let mut wanted: Vec<Vec<u8>> = objects
            .iter()
            .map(|(t, o)| scoped(*t, o.as_bytes()))
            .collect();
        let table = self.open_table(ALERTS)?;
        for alert in table.get_each(&as_keys(&alerts))? {
            let Some(alert) = alert else { continue };
            let alert: Alert = decode(alert.value())?;
            if let Some(o) = alert.object_id {
                wanted.push(scoped(alert.tenant_id, o.as_bytes()));
            }
        }
        let found = self
            .open_table(OBJECTS)?
            .get_each(&as_keys(&wanted))?
            .into_iter()
            .map(|v| v.map(|v| decode::<Object>(v.value())).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let hosts: Vec<Vec<u8>> = found
            .into_iter()
            .flatten()
            .filter_map(|o| Some(scoped(o.tenant_id, o.host_id?.as_bytes())))
            .collect();
        self.open_table(OBJECTS)?.prefetch(&as_keys(&hosts))?;
        wanted.extend(hosts);
        self.open_table(STATES)?.prefetch(&as_keys(&wanted))?;

        let storms: Vec<Vec<u8>> = pairs.iter().map(|(t, p)| storm_pair(*t, p)).collect();
        let incidents: Vec<Vec<u8>> = pairs
            .iter()
            .zip(
                self.open_table(STORM_INCIDENTS)?
                    .get_each(&as_keys(&storms))?,
            )
            .filter_map(|((t, _), id)| Some(scoped(*t, id?.value())))
            .collect();
        self.open_table(INCIDENTS)?.prefetch(&as_keys(&incidents))?;
        let docs: Vec<Vec<u8>> = rules
            .iter()
            .map(|(t, name)| super::config::doc_key(*t, "alert-rules", name))
            .collect();
        self.open_table(CONFIG_DOCS)?.prefetch(&as_keys(&docs))
    }

    pub(crate) fn alert(&self, tenant: Uuid, id: Uuid) -> Result<Option<Alert>, StoreError> {
        load(self, tenant, id)
    }

    /// The active alert holding `dedup_key`.
    pub(crate) fn active_alert(
        &self,
        tenant: Uuid,
        dedup_key: &str,
    ) -> Result<Option<Alert>, StoreError> {
        self.alert_by_key(ACTIVE_ALERT_KEYS, tenant, dedup_key)
    }

    /// The resolved alert holding `dedup_key` whose source firing again counts toward its
    /// chatter (`Alert::refire_until`).
    pub(crate) fn recently_cleared_alert(
        &self,
        tenant: Uuid,
        dedup_key: &str,
    ) -> Result<Option<Alert>, StoreError> {
        self.alert_by_key(RECENTLY_CLEARED_ALERT_KEYS, tenant, dedup_key)
    }

    fn alert_by_key(
        &self,
        index: KeyIndex,
        tenant: Uuid,
        dedup_key: &str,
    ) -> Result<Option<Alert>, StoreError> {
        let id = {
            let keys = self.open_table(index)?;
            keys.get(active_key(tenant, dedup_key).as_slice())?
                .map(|v| stored_uuid(v.value(), "an alert's id by its key"))
                .transpose()?
        };
        match id {
            Some(id) => load(self, tenant, id),
            None => Ok(None),
        }
    }

    /// A timer of the alert engine's at `at` for the record `id` (an alert, or a silence).
    pub(crate) fn put_alert_timer(
        &self,
        at: Timestamp,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<(), StoreError> {
        self.open_table(ALERT_TIMERS)?
            .insert(timer_key(at, tenant, id).as_slice(), ())?;
        Ok(())
    }

    /// The tenant's active (open or acked) alerts.
    pub(crate) fn active_alerts(&self, tenant: Uuid) -> Result<Vec<Alert>, StoreError> {
        let ids: Vec<Uuid> = {
            let keys = self.open_table(ACTIVE_ALERT_KEYS)?;
            let (lo, hi) = tenant_range(tenant);
            let mut ids = Vec::new();
            for row in keys.range(lo.as_slice()..hi.as_slice())? {
                ids.push(stored_uuid(row?.1.value(), "an active alert's id")?);
            }
            ids
        };
        let mut out = Vec::new();
        for id in ids {
            out.extend(load(self, tenant, id)?);
        }
        Ok(out)
    }

    /// Saves an alert's row with its indexes: its dedup key held while it is active, its timers.
    /// What its status implies for other rows is `alerting`'s (`lifecycle::store_alert`).
    pub(crate) fn save_alert(&self, alert: &Alert) -> Result<(), StoreError> {
        save(self, alert)
    }

    /// The tenant's alerts minted at or after `since` (alert ids are UUIDv7), oldest first.
    pub(crate) fn alerts_since(
        &self,
        tenant: Uuid,
        since: Timestamp,
    ) -> Result<Vec<Alert>, StoreError> {
        let first_id = crate::model::event::first_id_at(since);
        let t = self.open_table(ALERTS)?;
        let (_, hi) = tenant_range(tenant);
        let lo = scoped(tenant, first_id.as_bytes());
        let mut out = Vec::new();
        for row in t.range(lo.as_slice()..hi.as_slice())? {
            out.push(decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// The alert waiting under `dedup_key` for its rule's `pendingFor`.
    pub(crate) fn pending_alert(
        &self,
        tenant: Uuid,
        dedup_key: &str,
    ) -> Result<Option<PendingAlert>, StoreError> {
        self.open_table(PENDING_ALERTS)?
            .get(active_key(tenant, dedup_key).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    pub(crate) fn put_pending_alert(&self, pending: &PendingAlert) -> Result<(), StoreError> {
        let a = &pending.alert;
        self.open_table(PENDING_ALERTS)?.insert(
            active_key(a.tenant_id, &a.dedup_key).as_slice(),
            encode(pending)?.as_slice(),
        )?;
        Ok(())
    }

    pub(crate) fn drop_pending_alert(
        &self,
        tenant: Uuid,
        dedup_key: &str,
    ) -> Result<(), StoreError> {
        self.open_table(PENDING_ALERTS)?
            .remove(active_key(tenant, dedup_key).as_slice())?;
        Ok(())
    }

    /// Every alert waiting for its rule's `pendingFor`.
    pub(crate) fn pending_alerts(&self) -> Result<Vec<PendingAlert>, StoreError> {
        let t = self.open_table(PENDING_ALERTS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Whether an alert holds each (tenant, dedup key) or waits for it, in their order: two
    /// lookups for them all (a rule with `resolveOnOk` asks for every OK event).
    pub(crate) fn keys_in_use(&self, keys: &[(Uuid, &str)]) -> Result<Vec<bool>, StoreError> {
        let stored: Vec<Vec<u8>> = keys.iter().map(|(t, k)| active_key(*t, k)).collect();
        let stored: Vec<&[u8]> = stored.iter().map(Vec::as_slice).collect();
        let held = self.open_table(ACTIVE_ALERT_KEYS)?.contains_each(&stored)?;
        let waiting = self.open_table(PENDING_ALERTS)?.contains_each(&stored)?;
        Ok(held.iter().zip(waiting).map(|(h, w)| *h || w).collect())
    }

    /// For each (tenant, prefix, rests): the dedup keys `prefix` + one of `rests` that an
    /// alert holds or waits for, in key order. Where reads are local, a range read of the
    /// keys under each prefix; where each read is a round trip, one lookup of every candidate
    /// for them all.
    pub(crate) fn keys_in_use_under<V>(
        &self,
        asked: &[(Uuid, String, &HashMap<String, V>)],
    ) -> Result<Vec<Vec<String>>, StoreError> {
        if self.reads_are_remote() {
            let candidates: Vec<Vec<(Uuid, String)>> = asked
                .iter()
                .map(|(tenant, prefix, rests)| {
                    let mut keys: Vec<(Uuid, String)> = rests
                        .keys()
                        .map(|rest| (*tenant, format!("{prefix}{rest}")))
                        .collect();
                    keys.sort_unstable();
                    keys
                })
                .collect();
            let flat: Vec<(Uuid, &str)> = candidates
                .iter()
                .flatten()
                .map(|(t, k)| (*t, k.as_str()))
                .collect();
            let mut in_use = self.keys_in_use(&flat)?.into_iter();
            return Ok(candidates
                .into_iter()
                .map(|keys| {
                    keys.into_iter()
                        .filter(|_| in_use.next().unwrap_or(false))
                        .map(|(_, k)| k)
                        .collect()
                })
                .collect());
        }
        let active = self.open_table(ACTIVE_ALERT_KEYS)?;
        let pending = self.open_table(PENDING_ALERTS)?;
        let mut out = Vec::with_capacity(asked.len());
        for (tenant, prefix, rests) in asked {
            // The prefix ends in `/`.
            let lo = active_key(*tenant, prefix);
            let hi = past_prefix(&lo);
            let mut keys = Vec::new();
            for table in [&active, &pending] {
                for row in table.range(lo.as_slice()..hi.as_slice())? {
                    let stored = row?.0.value().to_vec();
                    let key = String::from_utf8(stored[16..].to_vec())
                        .map_err(|e| StoreError::Corrupt(format!("an alert's dedup key: {e}")))?;
                    if rests.contains_key(&key[prefix.len()..]) {
                        keys.push(key);
                    }
                }
            }
            keys.sort_unstable();
            keys.dedup();
            out.push(keys);
        }
        Ok(out)
    }

    /// The alert timers due by `now`, oldest first.
    pub(crate) fn due_alert_timers(&self, now: Timestamp) -> Result<Vec<DueTimer>, StoreError> {
        let t = self.open_table(ALERT_TIMERS)?;
        let end = (now.as_millis() + 1).to_be_bytes();
        let mut due = Vec::new();
        for row in t.range(..end.as_slice())? {
            let key = row?.0.value().to_vec();
            due.push(due_timer(key)?);
        }
        Ok(due)
    }

    pub(crate) fn drop_alert_timer(&self, timer: &DueTimer) -> Result<(), StoreError> {
        self.open_table(ALERT_TIMERS)?
            .remove(timer.key.as_slice())?;
        Ok(())
    }

    /// When the next alert timer is due.
    pub(crate) fn next_alert_timer(&self) -> Result<Option<Timestamp>, StoreError> {
        self.open_table(ALERT_TIMERS)?
            .first()?
            .map(|(k, _)| stored_due_time(k.value(), "an alert timer"))
            .transpose()
    }

    /// Heartbeat rules' last events: (tenant, rule, when).
    pub(crate) fn rule_beats(&self) -> Result<Vec<(Uuid, String, Timestamp)>, StoreError> {
        let t = self.open_table(RULE_BEATS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let (k, v) = row?;
            let key = k.value();
            let (tenant, name) = key.split_at(16.min(key.len()));
            if let (Ok(tenant), Ok(name), Some(at)) = (
                Uuid::from_slice(tenant),
                std::str::from_utf8(name),
                Timestamp::from_millis(v.value()),
            ) {
                out.push((tenant, name.to_string(), at));
            }
        }
        Ok(out)
    }

    pub(crate) fn set_rule_beat(
        &self,
        tenant: Uuid,
        rule: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.open_table(RULE_BEATS)?
            .insert(scoped(tenant, rule.as_bytes()).as_slice(), at.as_millis())?;
        Ok(())
    }

    pub(crate) fn drop_rule_beat(&self, tenant: Uuid, rule: &str) -> Result<(), StoreError> {
        self.open_table(RULE_BEATS)?
            .remove(scoped(tenant, rule.as_bytes()).as_slice())?;
        Ok(())
    }

    /// Records that `opened` opened carrying label `pair` (`k=v`; a flood's scope names a pair
    /// no label makes) and forgets the pair's opens before `since`: the index keeps a window,
    /// not every alert ever opened. The opens it forgets are the oldest, so the read stops at
    /// the window.
    pub(crate) fn record_open(
        &self,
        opened: &Alert,
        pair: &str,
        since: Timestamp,
    ) -> Result<(), StoreError> {
        let prefix = storm_pair(opened.tenant_id, pair);
        let mut index = self.open_table(STORM_INDEX)?;
        let mut mine = open_key(&prefix, opened.opened_at);
        mine.extend_from_slice(opened.id.as_bytes());
        index.insert(mine.as_slice(), ())?;
        let start = open_key(&prefix, since);
        let mut expired = Vec::new();
        for row in index.range(open_key_at(&prefix, 0).as_slice()..start.as_slice())? {
            expired.push(row?.0.value().to_vec());
        }
        for key in expired {
            index.remove(key.as_slice())?;
        }
        Ok(())
    }

    /// The pair's opens from `since` on, newest first, at most `limit`: what correlating one
    /// more open needs costs the limit, not the window's opens (a flood of thousands would
    /// read them all on each open).
    pub(crate) fn newest_opens(
        &self,
        tenant: Uuid,
        pair: &str,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Timestamp, Uuid)>, StoreError> {
        let prefix = storm_pair(tenant, pair);
        let index = self.open_table(STORM_INDEX)?;
        let start = open_key(&prefix, since);
        let end = open_key_at(&prefix, i64::MAX);
        let mut opens = Vec::new();
        for row in index.range(start.as_slice()..end.as_slice())?.rev() {
            if opens.len() >= limit {
                break;
            }
            let key = row?.0.value().to_vec();
            if key.len() == prefix.len() + 24 {
                opens.push((
                    stored_due_time(&key[prefix.len()..], "an alert's open")?,
                    stored_uuid(&key[prefix.len() + 8..], "an opened alert")?,
                ));
            }
        }
        Ok(opens)
    }

    /// The incident of the storm on label `pair` (`k=v`), if one was opened.
    pub(crate) fn storm_incident(
        &self,
        tenant: Uuid,
        pair: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        self.open_table(STORM_INCIDENTS)?
            .get(storm_pair(tenant, pair).as_slice())?
            .map(|v| stored_uuid(v.value(), "a storm's incident"))
            .transpose()
    }

    pub(crate) fn set_storm_incident(
        &self,
        tenant: Uuid,
        pair: &str,
        incident: Uuid,
    ) -> Result<(), StoreError> {
        self.open_table(STORM_INCIDENTS)?.insert(
            storm_pair(tenant, pair).as_slice(),
            incident.as_bytes().as_slice(),
        )?;
        Ok(())
    }

    pub(crate) fn incident(&self, tenant: Uuid, id: Uuid) -> Result<Option<Incident>, StoreError> {
        super::incidents::load(self, tenant, id)
    }

    /// Saves `incident` and points the alerts `joining` at it; answers those of `joining` the
    /// tenant does not have.
    #[must_use = "alerts that are not there are the caller's to decide about"]
    pub(crate) fn attach_to_incident(
        &self,
        incident: &Incident,
        joining: &[Uuid],
    ) -> Result<Vec<Uuid>, StoreError> {
        super::incidents::attach(self, incident, joining)
    }

    pub(crate) fn object(&self, tenant: Uuid, id: Uuid) -> Result<Option<Object>, StoreError> {
        super::objects::get(self, tenant, id)
    }

    /// An object's state number while it is hard (`None`: soft, or no result yet).
    pub(crate) fn hard_state(&self, tenant: Uuid, object: Uuid) -> Result<Option<u8>, StoreError> {
        super::states::hard_state(self, tenant, object)
    }

    /// A configuration document of the tenant.
    pub fn config_doc(
        &self,
        tenant: Uuid,
        kind: &str,
        name: &str,
    ) -> Result<Option<ConfigDoc>, StoreError> {
        super::config::load(self, &super::config::doc_key(tenant, kind, name))
    }

    /// Notes an alert that opened suppressed, so its chain starts when the suppression lifts.
    pub(crate) fn hold_suppressed(&self, tenant: Uuid, alert: Uuid) -> Result<(), StoreError> {
        super::notify::hold_suppressed(self, tenant, alert)
    }

    /// The alerts waiting for their suppression to lift: (tenant, alert id).
    pub(crate) fn suppressed_alerts(&self) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        super::notify::suppressed_alerts(self)
    }

    pub(crate) fn release_suppressed(&self, tenant: Uuid, alert: Uuid) -> Result<(), StoreError> {
        super::notify::release_suppressed(self, tenant, alert)
    }
}

impl Store {
    /// The alerts of (tenant, id) pairs that exist, read in one snapshot.
    pub(crate) async fn alerts_by_id(
        self: &Arc<Self>,
        ids: Vec<(Uuid, Uuid)>,
    ) -> Result<Vec<Alert>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS)?;
            let mut out = Vec::new();
            for (tenant, id) in ids {
                out.extend(tenant_value::<Alert, _>(&t, tenant, id)?);
            }
            Ok(out)
        })
        .await
    }

    /// The dedup keys under `prefix` that open or acknowledged alerts of `tenant` hold.
    pub(crate) async fn active_keys_under(
        self: &Arc<Self>,
        tenant: Uuid,
        prefix: String,
    ) -> Result<Vec<String>, StoreError> {
        self.read(move |tx| {
            let lo = active_key(tenant, &prefix);
            let hi = past_prefix(&lo);
            let mut keys = Vec::new();
            for row in tx
                .open_table(ACTIVE_ALERT_KEYS)?
                .range(lo.as_slice()..hi.as_slice())?
            {
                let stored = row?.0.value().to_vec();
                keys.push(
                    String::from_utf8(stored[16..].to_vec())
                        .map_err(|e| StoreError::Corrupt(format!("an alert's dedup key: {e}")))?,
                );
            }
            Ok(keys)
        })
        .await
    }

    /// The active alert of `tenant` holding `dedup_key`.
    pub(crate) async fn active_alert_by_key(
        self: &Arc<Self>,
        tenant: Uuid,
        dedup_key: String,
    ) -> Result<Option<Alert>, StoreError> {
        self.read(move |tx| {
            let id = tx
                .open_table(ACTIVE_ALERT_KEYS)?
                .get(active_key(tenant, &dedup_key).as_slice())?
                .map(|v| stored_uuid(v.value(), "an alert's id by its key"))
                .transpose()?;
            match id {
                Some(id) => tenant_value(&tx.open_table(ALERTS)?, tenant, id),
                None => Ok(None),
            }
        })
        .await
    }

    /// The active alert of `tenant` with short id `short` (case-insensitive).
    pub(crate) async fn active_alert_by_short_id(
        self: &Arc<Self>,
        tenant: Uuid,
        short: String,
    ) -> Result<Option<Alert>, StoreError> {
        let short = short.to_ascii_lowercase();
        self.read(move |tx| {
            let keys = tx.open_table(ACTIVE_ALERT_KEYS)?;
            let alerts = tx.open_table(ALERTS)?;
            let prefix = tenant.as_bytes().to_vec();
            for row in keys.range(prefix.as_slice()..)? {
                let (key, id) = row?;
                if !key.value().starts_with(&prefix) {
                    break;
                }
                let Ok(id) = Uuid::from_slice(id.value()) else {
                    continue;
                };
                if crate::model::alert::short_id(id) == short {
                    return tenant_value(&alerts, tenant, id);
                }
            }
            Ok(None)
        })
        .await
    }

    pub(crate) async fn alert(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Alert, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    /// How many active alerts each of a tenant's objects holds back: the alerts waiting for
    /// their page whose `suppressedBy` names the object.
    pub(crate) async fn held_back(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<HashMap<Uuid, u32>, StoreError> {
        self.read(move |tx| {
            let held = tx.open_table(SUPPRESSED_ALERTS)?;
            let alerts = tx.open_table(ALERTS)?;
            let (lo, hi) = tenant_range(tenant);
            let mut out = HashMap::new();
            for row in held.range(lo.as_slice()..hi.as_slice())? {
                let key = row?.0.value().to_vec();
                let Some(id) = key.get(16..).and_then(|k| Uuid::from_slice(k).ok()) else {
                    continue;
                };
                let by = tenant_value::<Alert, _>(&alerts, tenant, id)?
                    .filter(|a| a.status.is_active())
                    .and_then(|a| a.suppressed_by?.object_id);
                if let Some(object) = by {
                    *out.entry(object).or_insert(0) += 1;
                }
            }
            Ok(out)
        })
        .await
    }

    /// Newest first (ids are time-ordered), strictly before `before`, at most `limit` that
    /// `filter` accepts.
    pub(crate) async fn alerts(
        self: &Arc<Self>,
        tenant: Uuid,
        filter: AlertFilter,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Alert>, StoreError> {
        let active_only =
            !filter.statuses.is_empty() && filter.statuses.iter().all(|s| s.is_active());
        self.read(move |tx| {
            let t = tx.open_table(ALERTS)?;
            if !active_only {
                return tenant_values_newest(&t, tenant, before, limit, |a| filter.matches(a));
            }
            // Only open or acked alerts: their dedup-key index names them all, so the list
            // costs the active alerts, not every alert the tenant ever had.
            let (lo, hi) = tenant_range(tenant);
            let mut ids = Vec::new();
            for row in tx
                .open_table(ACTIVE_ALERT_KEYS)?
                .range(lo.as_slice()..hi.as_slice())?
            {
                let id = stored_uuid(row?.1.value(), "an alert's id by its key")?;
                if before.is_none_or(|b| id < b) {
                    ids.push(id);
                }
            }
            ids.sort_unstable_by(|a, b| b.cmp(a));
            let mut out = Vec::new();
            for id in ids {
                if let Some(alert) = tenant_value::<Alert, _>(&t, tenant, id)?
                    && filter.matches(&alert)
                {
                    out.push(alert);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Severity;
    use crate::runtime::TestClock;
    use crate::store::{TxResult, Wrote};

    #[test]
    fn a_timer_key_reads_back_and_a_damaged_one_is_corruption() {
        let at: Timestamp = "2026-03-01T08:00:00.123Z".parse().unwrap();
        let (tenant, alert) = (Uuid::from_u128(7), Uuid::from_u128(9));
        let key = timer_key(at, tenant, alert);
        let timer = due_timer(key.clone()).unwrap();
        assert_eq!((timer.at, timer.tenant, timer.alert), (at, tenant, alert));
        assert_eq!(timer.key, key);
        assert!(matches!(
            due_timer(key[..30].to_vec()),
            Err(StoreError::Corrupt(_))
        ));
    }

    /// Listing only open or acked alerts reads them through the dedup-key index: newest
    /// first, before the cursor, as many as asked, no resolved alert and no other tenant's.
    #[tokio::test]
    async fn active_alerts_are_listed_through_their_key_index() {
        use crate::model::alert::AlertStatus;
        let dir = tempfile::tempdir().unwrap();
        let start: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(start))).unwrap();
        let (tenant, other) = (Uuid::from_u128(7), Uuid::from_u128(8));
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                for n in 1..=6u128 {
                    let t = if n == 6 { other } else { tenant };
                    let mut a = Alert::open(
                        Uuid::from_u128(n),
                        t,
                        "r".into(),
                        format!("k{n}"),
                        Severity::Critical,
                        "t".into(),
                        start,
                    );
                    if n == 2 {
                        a.status = AlertStatus::Resolved;
                    }
                    if n == 4 {
                        a.status = AlertStatus::Acked;
                    }
                    save(tx, &a)?;
                }
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        let list = |statuses: Vec<AlertStatus>, before: Option<u128>, limit: usize| {
            let store = store.clone();
            async move {
                let filter = AlertFilter {
                    statuses,
                    ..Default::default()
                };
                store
                    .alerts(tenant, filter, before.map(Uuid::from_u128), limit)
                    .await
                    .unwrap()
                    .iter()
                    .map(|a| a.id.as_u128())
                    .collect::<Vec<_>>()
            }
        };
        let active = vec![AlertStatus::Open, AlertStatus::Acked];
        assert_eq!(list(active.clone(), None, 10).await, [5, 4, 3, 1]);
        assert_eq!(list(active, Some(4), 2).await, [3, 1]);
        assert_eq!(list(vec![AlertStatus::Open], None, 10).await, [5, 3, 1]);
        assert_eq!(list(vec![AlertStatus::Resolved], None, 10).await, [2]);
    }

    /// A label pair's storm index keeps the opens within the window asked for: each open
    /// removes those before it, so the index does not grow with every alert ever opened; the
    /// newest are read first, as many as asked for.
    #[tokio::test]
    async fn the_storm_index_forgets_opens_before_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let start: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(start))).unwrap();
        let at =
            move |mins: i64| Timestamp::from_millis(start.as_millis() + mins * 60_000).unwrap();
        let tenant = Uuid::from_u128(7);
        let opens = store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                let open = |n: u128, mins: i64| {
                    Alert::open(
                        Uuid::from_u128(n),
                        tenant,
                        "r".into(),
                        format!("k{n}"),
                        Severity::Critical,
                        "t".into(),
                        at(mins),
                    )
                };
                let pair = "site=north";
                let mut opens = Vec::new();
                for (n, mins, since) in [(1, 0, -5), (2, 1, -4), (3, 2, -3)] {
                    tx.record_open(&open(n, mins), pair, at(since))?;
                    opens.push(tx.newest_opens(tenant, pair, at(since), usize::MAX)?);
                }
                opens.push(tx.newest_opens(tenant, pair, at(-3), 2)?);
                tx.record_open(&open(4, 10), pair, at(5))?;
                opens.push(tx.newest_opens(tenant, pair, at(5), usize::MAX)?);
                let kept = tx.open_table(STORM_INDEX)?.len()?;
                Ok(Wrote::Changed((opens, kept)))
            })
            .await
            .unwrap();
        let ids = |ns: &[(u128, i64)]| {
            ns.iter()
                .map(|(n, mins)| (at(*mins), Uuid::from_u128(*n)))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            opens.0,
            [
                ids(&[(1, 0)]),
                ids(&[(2, 1), (1, 0)]),
                ids(&[(3, 2), (2, 1), (1, 0)]),
                ids(&[(3, 2), (2, 1)]),
                ids(&[(4, 10)]),
            ]
        );
        assert_eq!(opens.1, 1, "the three opens before the window are gone");
    }
}
