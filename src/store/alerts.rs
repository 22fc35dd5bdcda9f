//! Alerts by tenant and id, and the dedup keys of active (open or acked) alerts, so at most
//! one active alert holds a key whatever races for it: every change of an alert is one write
//! transaction that reads the key first.

use super::codec::{decode, encode, tenant_value, tenant_values_newest};
use super::journal::save_position;
use super::keys::scoped;
use super::keys::tenant_range;
use super::tables::{
    ACTIVE_ALERT_KEYS, ALERT_TIMERS, ALERTS, OBJECT_NAMES, OBJECTS, PENDING_ALERTS, RULE_BEATS,
    STORM_INCIDENTS, STORM_INDEX,
};
use super::{Store, StoreError};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertCause, AlertFilter, AlertStatus, TransitionError};
use crate::model::audit::AuditDraft;
use crate::model::config::{AlertGroup, AlertRule};
use crate::model::event::EventDraft;
use crate::model::event::Severity;
use crate::model::incident::{Incident, Storm};
use crate::model::object::ObjectKind;
use crate::model::state::{DOWN, UNREACHABLE};
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
    /// An event from a heartbeat rule's source: the rule's heartbeat is armed (or kept) and
    /// its "no event" alert, if open, resolved.
    Beat {
        tenant: Uuid,
        rule: String,
        at: Timestamp,
        event: Uuid,
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
    tenant_value(
        &tx.open_table(ALERTS).map_err(StoreError::from_redb)?,
        tenant,
        id,
    )
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
    if a.status != AlertStatus::Open {
        super::notify::disarm_escalation(tx, a.id)?;
    }
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

/// Topology (SEMANTICS 7): a service's problem while its host is hard DOWN is caused by the
/// host; an UNREACHABLE host's by a parent that is hard DOWN or UNREACHABLE.
fn topology_cause(
    tx: &WriteTransaction,
    tenant: Uuid,
    object: Option<Uuid>,
) -> Result<Option<AlertCause>, StoreError> {
    let Some(id) = object else {
        return Ok(None);
    };
    let Some(o) = super::objects::get(tx, tenant, id)? else {
        return Ok(None);
    };
    if let Some(host) = o.host_id {
        if super::states::hard_state(tx, tenant, host)? == Some(DOWN) {
            let name = super::objects::get(tx, tenant, host)?
                .map(|h| h.name)
                .unwrap_or_default();
            return Ok(Some(AlertCause {
                object_id: Some(host),
                reason: format!("host {name} is DOWN"),
            }));
        }
        return Ok(None);
    }
    if super::states::hard_state(tx, tenant, id)? != Some(UNREACHABLE) {
        return Ok(None);
    }
    for parent in o.spec.parents.iter().flatten() {
        let key = super::objects::name_key(tenant, ObjectKind::Host, None, parent);
        let pid = {
            let names = tx.open_table(OBJECT_NAMES).map_err(StoreError::from_redb)?;
            names
                .get(key.as_slice())
                .map_err(StoreError::from_redb)?
                .and_then(|v| Uuid::from_slice(v.value()).ok())
        };
        if let Some(pid) = pid {
            if matches!(
                super::states::hard_state(tx, tenant, pid)?,
                Some(DOWN | UNREACHABLE)
            ) {
                return Ok(Some(AlertCause {
                    object_id: Some(pid),
                    reason: format!("parent {parent} is down"),
                }));
            }
        }
    }
    Ok(Some(AlertCause {
        object_id: None,
        reason: "unreachable through its parents".into(),
    }))
}

/// The first UUIDv7 of a millisecond: alert ids before it were minted earlier.
fn first_id_at(ms: i64) -> Uuid {
    Uuid::from_u128(u128::from(u64::try_from(ms).unwrap_or(0)) << 80)
}

/// Alarm storm (SEMANTICS 7): when `opened` makes `storm.threshold` alerts opened within
/// `storm.window` share one label pair, they are attached to one incident (the one one of
/// them has, or a new "Alarm storm" incident); returns its `incident_update` event.
fn correlate_storm(
    tx: &WriteTransaction,
    opened: &Alert,
    now: Timestamp,
    storm: Storm,
    new_id: Uuid,
) -> Result<Option<EventDraft>, StoreError> {
    let tenant = opened.tenant_id;
    let since = now.as_millis() - i64::try_from(storm.window.as_millis()).unwrap_or(i64::MAX);
    let mut index = tx.open_table(STORM_INDEX).map_err(StoreError::from_redb)?;
    let mut found = None;
    for (k, v) in &opened.labels {
        // tenant + pair + open time + id: the opens sharing a pair, in time order.
        let mut prefix = tenant.as_bytes().to_vec();
        let pair = format!("{k}={v}");
        prefix.extend_from_slice(&u32::try_from(pair.len()).unwrap_or(u32::MAX).to_be_bytes());
        prefix.extend_from_slice(pair.as_bytes());
        let at = |ms: i64| {
            let mut key = prefix.clone();
            key.extend_from_slice(&ms.to_be_bytes());
            key
        };
        let mut mine = at(opened.opened_at.as_millis());
        mine.extend_from_slice(opened.id.as_bytes());
        index
            .insert(mine.as_slice(), ())
            .map_err(StoreError::from_redb)?;
        // Opens older than the window are done with.
        index
            .retain_in(at(i64::MIN).as_slice()..at(since).as_slice(), |_, _| false)
            .map_err(StoreError::from_redb)?;
        let ids: Vec<Uuid> = index
            .range(at(since).as_slice()..at(i64::MAX).as_slice())
            .map_err(StoreError::from_redb)?
            .filter_map(|row| {
                let key = row.ok()?.0.value().to_vec();
                Uuid::from_slice(&key[key.len() - 16..]).ok()
            })
            .collect();
        if found.is_none() && ids.len() >= storm.threshold.max(1) {
            found = Some((k.clone(), v.clone(), ids, prefix));
        }
    }
    drop(index);
    if let Some((k, v, ids, pair_key)) = found {
        let cluster = format!("{k}={v}");
        // A storm already under way: only the new alert joins its incident.
        let ongoing = {
            let t = tx
                .open_table(STORM_INCIDENTS)
                .map_err(StoreError::from_redb)?;
            t.get(pair_key.as_slice())
                .map_err(StoreError::from_redb)?
                .and_then(|v| Uuid::from_slice(v.value()).ok())
        };
        let ongoing = match ongoing {
            Some(id) => super::incidents::load(tx, tenant, id)?.filter(|i| i.status != "resolved"),
            None => None,
        };
        let sharing: Vec<Alert> = match &ongoing {
            Some(_) => vec![opened.clone()],
            None => ids
                .into_iter()
                .filter_map(|id| load(tx, tenant, id).transpose())
                .collect::<Result<_, _>>()?,
        };
        let existing = match ongoing {
            Some(i) => Some(i),
            None => match sharing.iter().find_map(|a| a.incident_id) {
                Some(id) => super::incidents::load(tx, tenant, id)?,
                None => None,
            },
        };
        let mut incident = existing.unwrap_or_else(|| Incident {
            id: new_id,
            tenant_id: tenant,
            title: String::new(),
            summary: String::new(),
            severity: Severity::Critical,
            status: "open".into(),
            labels: [(k.clone(), v.clone())].into_iter().collect(),
            impact: String::new(),
            ticket_url: String::new(),
            alert_ids: Vec::new(),
            created_by: "correlation".into(),
            opened_at: now,
            updated_at: now,
            resolved_at: None,
            version: 0,
        });
        for a in &sharing {
            if !incident.alert_ids.contains(&a.id) {
                incident.alert_ids.push(a.id);
            }
        }
        if incident.created_by == "correlation" {
            incident.title = format!(
                "Alarm storm: {} alerts sharing {cluster}",
                incident.alert_ids.len()
            );
        }
        incident.updated_at = now;
        incident.version += 1;
        let joining: Vec<Uuid> = sharing
            .iter()
            .filter(|a| a.incident_id != Some(incident.id))
            .map(|a| a.id)
            .collect();
        super::incidents::attach(tx, &incident, &joining)?;
        tx.open_table(STORM_INCIDENTS)
            .map_err(StoreError::from_redb)?
            .insert(pair_key.as_slice(), incident.id.as_bytes().as_slice())
            .map_err(StoreError::from_redb)?;
        return Ok(Some(incident.storm_event(&cluster)));
    }
    Ok(None)
}

/// The dedup key of a heartbeat rule's "no event" alert (SEMANTICS 3).
fn heartbeat_key(rule: &str) -> String {
    format!("heartbeat/{rule}")
}

/// The "no event" alerts of heartbeat rules whose source has been silent longer than
/// `expectEvery` since it was last heard (SEMANTICS 3), for rules that are not open already;
/// rows of rules deleted, disabled or no longer heartbeat rules are dropped.
fn silent_sources(
    tx: &WriteTransaction,
    now: Timestamp,
    new_id: &dyn Fn() -> Uuid,
    pruned: &mut bool,
    next: &mut Option<Timestamp>,
) -> Result<Vec<Alert>, StoreError> {
    let rows: Vec<(Vec<u8>, i64)> = {
        let t = tx.open_table(RULE_BEATS).map_err(StoreError::from_redb)?;
        let mut rows = Vec::new();
        for row in t.iter().map_err(StoreError::from_redb)? {
            let (k, v) = row.map_err(StoreError::from_redb)?;
            rows.push((k.value().to_vec(), v.value()));
        }
        rows
    };
    let mut out = Vec::new();
    for (key, last_ms) in rows {
        let (tenant, name) = key.split_at(16.min(key.len()));
        let (Ok(tenant), Ok(name)) = (Uuid::from_slice(tenant), std::str::from_utf8(name)) else {
            continue;
        };
        let rule = super::config::load(tx, &super::config::doc_key(tenant, "alert-rules", name))?
            .and_then(|d| AlertRule::parse(&d.body))
            .filter(|r| !r.disabled);
        let Some((rule, beat)) = rule.and_then(|r| {
            let beat = r.heartbeat.clone()?;
            Some((r, beat))
        }) else {
            tx.open_table(RULE_BEATS)
                .map_err(StoreError::from_redb)?
                .remove(key.as_slice())
                .map_err(StoreError::from_redb)?;
            *pruned = true;
            continue;
        };
        let expect_ms = i64::try_from(beat.expect_every.0.as_millis()).unwrap_or(i64::MAX);
        let dedup_key = heartbeat_key(name);
        if active(tx, tenant, &dedup_key)?.is_some() {
            continue;
        }
        if now.as_millis() - last_ms <= expect_ms {
            let due = Timestamp::from_millis(last_ms.saturating_add(expect_ms).saturating_add(1));
            if let Some(due) = due {
                *next = Some(next.map_or(due, |n| n.min(due)));
            }
            continue;
        }
        out.push(Alert {
            labels: rule.set_labels.clone(),
            payload: serde_json::json!({"source": beat.source, "lastEventAt": Timestamp::from_millis(last_ms)}),
            escalation_policy: rule.escalation_policy.clone(),
            ..Alert::open(
                new_id(),
                tenant,
                name.to_string(),
                dedup_key,
                rule.severity.parse().unwrap_or(Severity::Warning),
                format!("No event from {} for {}", beat.source, beat.expect_every),
                now,
            )
        });
    }
    Ok(out)
}

/// How soon the alert timers look again while suppressed alerts wait: their suppression may
/// lift with time (a silence running out) or with a state change (a parent back up).
const SUPPRESSED_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// An alert group's view of one member (SEMANTICS 3, evaluated here where the reference only
/// stores groups): the group's active alerts sharing the member's `groupBy` labels, opened
/// within its window; from `minCount` of them the group alert is opened or refreshed with the
/// aggregate, below it an open group alert is resolved. Returns the events written.
fn evaluate_group(
    tx: &WriteTransaction,
    member: &Alert,
    now: Timestamp,
    new_id: Uuid,
) -> Result<Vec<EventDraft>, StoreError> {
    let Some(name) = member.group_id.as_deref() else {
        return Ok(Vec::new());
    };
    let tenant = member.tenant_id;
    let Some(group) =
        super::config::load(tx, &super::config::doc_key(tenant, "alert-groups", name))?
            .and_then(|d| AlertGroup::parse(&d.body))
    else {
        return Ok(Vec::new());
    };
    let key: Vec<(String, String)> = group
        .group_by
        .iter()
        .map(|k| (k.clone(), member.labels.get(k).cloned().unwrap_or_default()))
        .collect();
    let since = now.as_millis() - i64::try_from(group.window.0.as_millis()).unwrap_or(i64::MAX);
    let members: Vec<Alert> = {
        let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
        let (_, hi) = tenant_range(tenant);
        let lo = scoped(tenant, first_id_at(since).as_bytes());
        let mut out = Vec::new();
        for row in t
            .range(lo.as_slice()..hi.as_slice())
            .map_err(StoreError::from_redb)?
        {
            let a: Alert = decode(row.map_err(StoreError::from_redb)?.1.value())?;
            let same_key = key
                .iter()
                .all(|(k, v)| a.labels.get(k).cloned().unwrap_or_default() == *v);
            if a.status.is_active() && a.group_id.as_deref() == Some(name) && same_key {
                out.push(a);
            }
        }
        out
    };
    let key_text = key
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let dedup_key = format!("group/{name}/{key_text}");
    let min_count = usize::try_from(group.min_count.unwrap_or(2).max(1)).unwrap_or(2);
    if members.len() < min_count {
        let mut events = Vec::new();
        if let Some(mut held) = active(tx, tenant, &dedup_key)? {
            events.push(held.resolve(now).map_err(refused)?);
            save(tx, &held)?;
        }
        return Ok(events);
    }
    let aggregate = group.aggregate.clone().unwrap_or_else(|| "count".into());
    let values: Vec<f64> = members
        .iter()
        .filter_map(|a| {
            let path = group.value_path.as_deref()?;
            let mut at = &a.payload;
            for part in path.split('.').filter(|p| !p.is_empty()) {
                at = at.get(part)?;
            }
            at.as_f64().or_else(|| at.as_str()?.parse().ok())
        })
        .collect();
    let value = aggregate_of(&aggregate, members.len(), values);
    let severity = members
        .iter()
        .map(|a| a.severity)
        .max_by_key(|s| crate::model::alert::rank(*s))
        .unwrap_or(Severity::Warning);
    let value_text = value.map_or_else(|| "n/a".to_string(), |v| format!("{v}"));
    let alert = Alert {
        labels: key.into_iter().collect(),
        payload: serde_json::json!({
            "group": name,
            "count": members.len(),
            "aggregate": aggregate,
            "value": value,
            "alertIds": members.iter().map(|a| a.id).collect::<Vec<_>>(),
        }),
        ..Alert::open(
            new_id,
            tenant,
            format!("group:{name}"),
            dedup_key,
            severity,
            format!(
                "{} alerts for {key_text}: {aggregate} {value_text}",
                members.len()
            ),
            now,
        )
    };
    Ok(fire(tx, alert, None, None)?.2.into_iter().collect())
}

/// `count`, or `min`, `max`, `avg`, `median` of the values (`None` without values).
fn aggregate_of(aggregate: &str, count: usize, mut values: Vec<f64>) -> Option<f64> {
    if aggregate == "count" {
        return Some(count as f64);
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(match aggregate {
        "min" => values[0],
        "max" => values[n - 1],
        "median" if n % 2 == 1 => values[n / 2],
        "median" => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        _ => values.iter().sum::<f64>() / n as f64,
    })
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

/// Drops the clears of keys no alert holds, none is pending for and no match of the batch
/// fires (a rule with `resolveOnOk` sends one for every OK event), reading the key tables once
/// instead of once per clear.
fn without_idle_clears(
    tx: &WriteTransaction,
    matches: Vec<AlertMatch>,
) -> Result<Vec<AlertMatch>, StoreError> {
    let fired: std::collections::HashSet<Vec<u8>> = matches
        .iter()
        .filter_map(|m| match m {
            AlertMatch::Fire { alert, .. } => Some(active_key(alert.tenant_id, &alert.dedup_key)),
            _ => None,
        })
        .collect();
    let active = tx
        .open_table(ACTIVE_ALERT_KEYS)
        .map_err(StoreError::from_redb)?;
    let pending = tx
        .open_table(PENDING_ALERTS)
        .map_err(StoreError::from_redb)?;
    let mut kept = Vec::with_capacity(matches.len());
    for m in matches {
        if let AlertMatch::Clear {
            tenant, dedup_key, ..
        } = &m
        {
            let key = active_key(*tenant, dedup_key);
            let live = fired.contains(&key)
                || active
                    .get(key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .is_some()
                || pending
                    .get(key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .is_some();
            if !live {
                continue;
            }
        }
        kept.push(m);
    }
    Ok(kept)
}

impl Store {
    /// What follows a rule's alert opening: its topology cause (then it does not page on its
    /// own), else a silence or downtime covering it (`suppressed`), either as a `suppressed`
    /// notification event; then alarm-storm correlation.
    fn opened(
        &self,
        tx: &WriteTransaction,
        mut alert: Alert,
        now: Timestamp,
        storm: Storm,
        suppressed: &dyn Fn(&Alert, Option<Uuid>) -> Option<String>,
    ) -> Result<Vec<EventDraft>, StoreError> {
        let mut events = Vec::new();
        let reason = match topology_cause(tx, alert.tenant_id, alert.object_id)? {
            Some(cause) => {
                let reason = format!("caused by: {}", cause.reason);
                alert.cause = Some(cause);
                save(tx, &alert)?;
                Some(reason)
            }
            None => suppressed(&alert, host_of(tx, alert.tenant_id, alert.object_id)?),
        };
        match &reason {
            Some(why) => {
                events.push(alert.suppressed(why));
                super::notify::hold_suppressed(tx, &alert)?;
            }
            None => super::notify::arm_escalation(tx, &alert, alert.opened_at, now)?,
        }
        events.extend(correlate_storm(
            tx,
            &alert,
            now,
            storm,
            self.clock.new_id(),
        )?);
        Ok(events)
    }

    /// The alert engine's work for the events through `through`, committed with its consumer
    /// position and the lifecycle events it caused, in one transaction; `suppressed` says why
    /// a newly opened alert (given its object's host) does not page.
    pub async fn apply_alert_matches(
        self: &Arc<Self>,
        consumer: &'static str,
        through: Uuid,
        matches: Vec<AlertMatch>,
        now: Timestamp,
        storm: Storm,
        suppressed: impl Fn(&Alert, Option<Uuid>) -> Option<String> + Send + 'static,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let matches = without_idle_clears(tx, matches)?;
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
                        events.extend(evaluate_group(tx, &alert, now, store.clock.new_id())?);
                        if let Some(opened) = opened {
                            events.push(opened);
                            events.extend(store.opened(tx, alert, now, storm, &suppressed)?);
                        }
                    }
                    AlertMatch::Beat {
                        tenant,
                        rule,
                        at,
                        event,
                    } => {
                        tx.open_table(RULE_BEATS)
                            .map_err(StoreError::from_redb)?
                            .insert(scoped(tenant, rule.as_bytes()).as_slice(), at.as_millis())
                            .map_err(StoreError::from_redb)?;
                        if let Some(mut held) = active(tx, tenant, &heartbeat_key(&rule))? {
                            held.remember(event);
                            events.push(held.resolve(now).map_err(refused)?);
                            save(tx, &held)?;
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
                            events.extend(evaluate_group(tx, &held, now, store.clock.new_id())?);
                        }
                    }
                }
            }
            save_position(tx, consumer, through)?;
            store.journal(tx, events)
        })
        .await
        .inspect(|_| self.alerts_changed())
    }

    /// A manual alarm: opens `alert`, or folds into the active alert with its dedup key
    /// (`false`: folded).
    pub async fn raise_alarm(
        self: &Arc<Self>,
        alert: Alert,
        audit: AuditDraft,
        via: &'static str,
    ) -> Result<(Alert, bool), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let (alert, opened, event) = fire(tx, alert, None, Some(via))?;
            if opened {
                super::notify::arm_escalation(tx, &alert, alert.opened_at, alert.opened_at)?;
            }
            let audit = audit.after(&alert);
            store.record(tx, [audit], event.into_iter().collect())?;
            Ok((alert, opened))
        })
        .await
        .inspect(|_| self.alerts_changed())
    }

    /// Moves an alert on (`:ack`, `:resolve`), with its lifecycle event and audit entry in the
    /// same transaction.
    pub async fn transition_alert(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        change: impl FnOnce(&mut Alert) -> Result<EventDraft, TransitionError> + Send + 'static,
        audit: AuditDraft,
    ) -> Result<Alert, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old = load(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
            let mut new = old.clone();
            let event = change(&mut new).map_err(refused)?;
            save(tx, &new)?;
            let audit = audit.before(&old).after(&new);
            store.record(tx, [audit], vec![event])?;
            Ok(new)
        })
        .await
        .inspect(|_| self.alert_timers.notify_one())
    }

    /// Runs the alert timers due by `now`: snoozes that ran out (open again, with the wake-up
    /// event), alerts past `autoCloseAfter` (expired, no event), and pending alerts whose
    /// condition held for their rule's `pendingFor` (opened, with `suppressed` saying why one
    /// does not page: given the alert and its object's host).
    pub async fn run_alert_timers(
        self: &Arc<Self>,
        now: Timestamp,
        storm: Storm,
        suppressed: impl Fn(&Alert, Option<Uuid>) -> Option<String> + Send + 'static,
    ) -> Result<Option<Timestamp>, StoreError> {
        let store = self.clone();
        self.write_if_changed(move |tx| {
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
            // Whether anything was written: a sweep with nothing due is aborted, not synced.
            let mut changed = !due.is_empty();
            for (key, tenant, id, at) in due {
                tx.open_table(ALERT_TIMERS)
                    .map_err(StoreError::from_redb)?
                    .remove(key.as_slice())
                    .map_err(StoreError::from_redb)?;
                if let Some(mut alert) = load(tx, tenant, id)? {
                    if let Some(woken) = alert.wake(at) {
                        save(tx, &alert)?;
                        super::notify::arm_escalation(tx, &alert, at, now)?;
                        events.push(woken);
                    } else if alert.expire(at) {
                        save(tx, &alert)?;
                    }
                }
            }
            for (tenant, id) in super::notify::suppressed_alerts(tx)? {
                let Some(alert) = load(tx, tenant, id)? else {
                    super::notify::release_suppressed(tx, tenant, id)?;
                    changed = true;
                    continue;
                };
                let lifted = alert.status == AlertStatus::Open
                    && topology_cause(tx, tenant, alert.object_id)?.is_none()
                    && suppressed(&alert, host_of(tx, tenant, alert.object_id)?).is_none();
                if !alert.status.is_active() || lifted {
                    super::notify::release_suppressed(tx, tenant, id)?;
                    changed = true;
                }
                if lifted {
                    super::notify::arm_escalation(tx, &alert, alert.opened_at, now)?;
                }
            }
            // When to look again: the next timer, pending alert or heartbeat rule due, and soon
            // while suppressed alerts wait for their suppression to lift.
            let mut next: Option<Timestamp> = None;
            if !super::notify::suppressed_alerts(tx)?.is_empty() {
                next = Some(now.plus(SUPPRESSED_RECHECK));
            }
            for alert in silent_sources(tx, now, &|| store.clock.new_id(), &mut changed, &mut next)?
            {
                changed = true;
                let (alert, _, opened) = fire(tx, alert, None, None)?;
                if let Some(opened) = opened {
                    events.push(opened);
                    events.extend(store.opened(tx, alert, now, storm, &suppressed)?);
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
                    } else {
                        next = Some(next.map_or(pending.due, |n| n.min(pending.due)));
                    }
                }
                ripe
            };
            changed |= !ripe.is_empty();
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
                    events.extend(store.opened(tx, alert, now, storm, &suppressed)?);
                }
            }
            let timer = tx
                .open_table(ALERT_TIMERS)
                .map_err(StoreError::from_redb)?
                .first()
                .map_err(StoreError::from_redb)?
                .and_then(|(k, _)| {
                    let at: [u8; 8] = k.value().get(..8)?.try_into().ok()?;
                    Timestamp::from_millis(i64::from_be_bytes(at))
                });
            if let Some(at) = timer {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
            store.journal(tx, events)?;
            Ok((next, changed))
        })
        .await
        .inspect(|_| self.escalations.notify_one())
    }

    /// The alerts of (tenant, id) pairs that exist, read in one snapshot.
    pub async fn alerts_by_id(
        self: &Arc<Self>,
        ids: Vec<(Uuid, Uuid)>,
    ) -> Result<Vec<Alert>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
            let mut out = Vec::new();
            for (tenant, id) in ids {
                out.extend(tenant_value::<Alert, _>(&t, tenant, id)?);
            }
            Ok(out)
        })
        .await
    }

    /// The active alert of `tenant` with short id `short` (case-insensitive).
    pub async fn active_alert_by_short_id(
        self: &Arc<Self>,
        tenant: Uuid,
        short: String,
    ) -> Result<Option<Alert>, StoreError> {
        let short = short.to_ascii_lowercase();
        self.read(move |tx| {
            let keys = tx
                .open_table(ACTIVE_ALERT_KEYS)
                .map_err(StoreError::from_redb)?;
            let alerts = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
            let prefix = tenant.as_bytes().to_vec();
            for row in keys
                .range(prefix.as_slice()..)
                .map_err(StoreError::from_redb)?
            {
                let (key, id) = row.map_err(StoreError::from_redb)?;
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

    pub async fn alert(self: &Arc<Self>, tenant: Uuid, id: Uuid) -> Result<Alert, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
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
