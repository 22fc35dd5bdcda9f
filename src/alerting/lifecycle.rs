//! What happens to alerts, decided here and committed through the store's kernel (`Tx`): the
//! alert engine's matches (fire under a dedup key, hold for `pendingFor`, clear, a heartbeat
//! rule's beat), the alert timers (snoozes ending, auto-close, pending alerts ripening, silent
//! heartbeat rules, suppressions lifting), a manual alarm, and an operator's transition. What an
//! opened alert sets going is decided here too: its topology cause, suppression, escalation,
//! alarm-storm correlation and its alert group. Each is one transaction with its events (and,
//! for an operator's action, its audit entry).

use super::AlertError;
use crate::model::Timestamp;
use crate::model::alert::{
    AckRequest, Alert, AlertCause, AlertStatus, SuppressedBy, TransitionError,
};
use crate::model::audit::AuditDraft;
use crate::model::config::{AlertGroup, AlertRule};
use crate::model::dependency::{Holds, ParentState, failed};
use crate::model::event::{EventDraft, Severity};
use crate::model::flood::FloodSettings;
use crate::model::identity::Actor;
use crate::model::incident::{Incident, Storm};
use crate::model::noise::NoiseSettings;
use crate::model::notify::{EscalationPolicy, EscalationTimer};
use crate::model::state::DOWN;
use crate::runtime::DependenciesOf;
use crate::store::alerts::PendingAlert;
use crate::store::{Holding, Promise, Store, StoreError, Tx};
use crate::store::{TxResult, Wrote};
use std::collections::{HashMap, HashSet};
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
    /// Resolve the active alert holding `dedup_key`, if any; firing again within
    /// `reopen_window` reopens it.
    Clear {
        tenant: Uuid,
        dedup_key: String,
        event: Uuid,
        reopen_window: std::time::Duration,
    },
    /// A `Clear` of `{object}/{rule}` for each of `rules` (by name, with its reopen window):
    /// an object's clear event, for the rules whose clear needs no run. The transaction turns
    /// it into clears of the keys in use only (`expand_object_clears`).
    ClearObject {
        tenant: Uuid,
        object: Uuid,
        event: Uuid,
        rules: Arc<HashMap<String, std::time::Duration>>,
    },
}

/// Why an alert does not page on its own: given the alert and its object's host, the silence
/// or downtime covering it.
pub type Suppressed = dyn Fn(&Alert, Option<Uuid>) -> Option<String> + Send;

/// What may hold an alert's page back, read before the transaction that decides: the
/// silences and downtimes, the objects' dependencies, and the alert's own chatter.
pub struct Suppressors {
    pub suppressed: Box<Suppressed>,
    pub dependencies: DependenciesOf,
    /// When an alert chatters and shelves itself, and when its scope floods.
    pub noise: TenantNoise,
}

/// The noise controls in force for each tenant of a batch.
pub struct TenantNoise {
    instance: NoiseSettings,
    tenants: HashMap<Uuid, NoiseSettings>,
}

impl TenantNoise {
    /// `tenants`' own controls; any other tenant has the `instance`'s.
    pub fn new(instance: NoiseSettings, tenants: HashMap<Uuid, NoiseSettings>) -> Self {
        Self { instance, tenants }
    }

    pub fn of(&self, tenant: Uuid) -> &NoiseSettings {
        self.tenants.get(&tenant).unwrap_or(&self.instance)
    }
}

/// `suppressedBy.kind` of an alert held back by a failed dependency.
const DEPENDENCY: &str = "dependency";

/// How soon the alert timers look again while suppressed alerts wait: their suppression may
/// lift with time (a silence running out) or with a state change (a parent back up).
const SUPPRESSED_RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Saves an alert with what its status implies for other rows, in the same transaction: a
/// chain stops once the alert is no longer open, and its object's live state shows who
/// acknowledged it (cleared again when it is not acknowledged). Every change to an alert is
/// saved through here. A shelved alert's chain stops too.
pub(super) fn store_alert(tx: &Tx, a: &Alert) -> Result<(), StoreError> {
    tx.save_alert(a)?;
    // Only an alert with a policy is ever armed (`arm_escalation`), and a policy is not taken
    // off an alert: one without has no timers to look for.
    if (a.status != AlertStatus::Open || a.shelved.is_some()) && a.escalation_policy.is_some() {
        tx.disarm_escalation(a.id)?;
    }
    if let Some(object) = a.object_id {
        let by = (a.status == AlertStatus::Acked)
            .then_some(a.acked_by.as_deref())
            .flatten();
        tx.set_acked_by(a.tenant_id, object, by)?;
    }
    Ok(())
}

/// Starts the escalation chain of an open alert with a policy afresh, at step 0 due `now`,
/// counting the steps' `after` from `base`; an alert without a policy has no chain.
pub(super) fn arm_escalation(
    tx: &Tx,
    alert: &Alert,
    base: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    if alert.escalation_policy.is_none()
        || alert.status != AlertStatus::Open
        || alert.shelved.is_some()
    {
        return Ok(());
    }
    tx.disarm_escalation(alert.id)?;
    tx.put_escalation_timer(&EscalationTimer {
        tenant_id: alert.tenant_id,
        alert_id: alert.id,
        object_id: alert.object_id,
        step: 0,
        repeat: 0,
        base,
        due: now,
    })
}

/// An alert the active-key index holds refused to resolve: its row and its index disagree.
fn inconsistent(e: TransitionError) -> StoreError {
    StoreError::Corrupt(format!("an active alert would not resolve: {e}"))
}

/// The dedup key of a heartbeat rule's "no event" alert (SEMANTICS 3).
/// The alerts attached to an incident were read or written in the same transaction: one that
/// is not there is a damaged store.
fn attached(missing: Vec<Uuid>) -> Result<(), StoreError> {
    match missing.first() {
        None => Ok(()),
        Some(id) => Err(StoreError::Corrupt(format!(
            "alert {id} vanished within its transaction"
        ))),
    }
}

fn heartbeat_key(rule: &str) -> String {
    format!("heartbeat/{rule}")
}

/// Opens `new` under its key, or refreshes the active alert holding it; returns the alert,
/// whether it is new, and its `alert_opened` event when it is.
fn fire(
    tx: &Tx,
    new: Alert,
    event: Option<Uuid>,
    via: Option<&str>,
) -> Result<(Alert, bool, Option<EventDraft>), StoreError> {
    let held = tx.active_alert(new.tenant_id, &new.dedup_key)?;
    let fresh = held.is_none();
    let mut unacked = None;
    let mut alert = match held {
        Some(mut held) => {
            let severity = held.severity;
            held.refresh(new.severity, new.title, new.payload);
            // A rule's alert fires again on its source's next change; a manual alarm folds
            // in, a change only when its severity rises.
            if event.is_some() || held.severity != severity {
                let before = held.clone();
                unacked = held.clear_loose_ack().map(|u| (before, u));
            }
            held
        }
        None => new,
    };
    if let Some(e) = event {
        alert.remember(e);
    }
    store_alert(tx, &alert)?;
    if let Some((before, unacked)) = unacked {
        let now = tx.now();
        resume_escalation(tx, &alert, unacked.step, now)?;
        let audit = ack_audit(&before, &alert, &unacked.event, now);
        tx.record([audit], vec![unacked.event])?;
    }
    let opened = fresh.then(|| alert.opened(via));
    Ok((alert, fresh, opened))
}

/// The audit entry of an acknowledgement the alert timers or a state change moved on
/// (`alert.ack.reminder`, `.expired`, `.withdrawn`, `.cleared`), by the system.
fn ack_audit(before: &Alert, after: &Alert, event: &EventDraft, now: Timestamp) -> AuditDraft {
    let action = event.payload["action"].as_str().unwrap_or("changed");
    AuditDraft::new(
        now,
        after.tenant_id,
        &Actor::system("alert-timers"),
        &format!("alert.ack.{action}"),
        format!("alert/{}", after.id),
    )
    .before(before)
    .after(after)
}

/// Resumes an open alert's escalation at `step` (after its ack ended): the step fires now and
/// the later ones keep their spacing from it. A shelf still holds it.
fn resume_escalation(tx: &Tx, alert: &Alert, step: u32, now: Timestamp) -> Result<(), StoreError> {
    if alert.status != AlertStatus::Open || alert.shelved.is_some() {
        return Ok(());
    }
    let Some(policy) = policy_of(tx, alert)? else {
        return Ok(());
    };
    let step = step.min(u32::try_from(policy.steps.len().saturating_sub(1)).unwrap_or(0));
    let after = policy
        .steps
        .get(step as usize)
        .map_or(std::time::Duration::ZERO, |s| s.after.0);
    tx.disarm_escalation(alert.id)?;
    tx.put_escalation_timer(&EscalationTimer {
        tenant_id: alert.tenant_id,
        alert_id: alert.id,
        object_id: alert.object_id,
        step,
        repeat: 0,
        base: now.minus(after),
        due: now,
    })
}

/// The escalation policy of an alert, as stored now.
fn policy_of(tx: &Tx, alert: &Alert) -> Result<Option<EscalationPolicy>, StoreError> {
    let Some(name) = &alert.escalation_policy else {
        return Ok(None);
    };
    Ok(tx
        .config_doc(alert.tenant_id, "escalation-policies", name)?
        .and_then(|doc| EscalationPolicy::parse(&doc.body)))
}

/// The step an alert's escalation has reached: the latest that fired, as its armed timers
/// tell (a step's repeat is armed once it fired, the next step's first firing once it did);
/// with none armed, the chain has run out at its last step.
fn reached_step(
    tx: &Tx,
    alert: &Alert,
    policy: Option<&EscalationPolicy>,
) -> Result<u32, StoreError> {
    let timers = tx.escalation_timers(alert.id)?;
    let reached = timers
        .iter()
        .map(|t| {
            if t.repeat > 0 {
                t.step
            } else {
                t.step.saturating_sub(1)
            }
        })
        .max();
    Ok(reached.unwrap_or_else(|| {
        policy.map_or(0, |p| {
            u32::try_from(p.steps.len().saturating_sub(1)).unwrap_or(0)
        })
    }))
}

/// `:ack` by a person, a link, an SMS reply or a DTMF key: on the request's terms, else the
/// policy's, at the step its escalation reached, with its event and audit entry in one
/// transaction. An acked alert whose reminder waits takes it as the answer.
pub async fn acknowledge(
    store: &Arc<Store>,
    tenant: Uuid,
    id: Uuid,
    ack: Acknowledgement,
    audit: AuditDraft,
) -> Result<Alert, AlertError> {
    store
        .transact(move |tx| -> TxResult<_, AlertError> {
            let old = tx.alert(tenant, id)?.ok_or(AlertError::NotFound)?;
            let mut new = old.clone();
            let policy = policy_of(tx, &old)?;
            let step = if old.status == AlertStatus::Open {
                reached_step(tx, &old, policy.as_ref())?
            } else {
                0
            };
            let now = tx.now();
            let ack_policy = policy
                .as_ref()
                .map(EscalationPolicy::ack_policy)
                .unwrap_or_default();
            let terms = Alert::ack_terms(now, &ack.request, ack_policy, step, &ack.via, ack.user);
            let mut event = new.ack(&ack.by, ack.request.comment, now, terms)?;
            if ack.via != "api" {
                event.payload["via"] = serde_json::json!(ack.via);
            }
            store_alert(tx, &new)?;
            tx.record([audit.before(&old).after(&new)], vec![event])?;
            Ok(Wrote::Changed(new))
        })
        .await
}

/// Who acknowledges, how, and on what terms.
pub struct Acknowledgement {
    pub by: String,
    pub user: Option<Uuid>,
    /// `api`, or the path: `link`, `sms`, `dtmf`, `ivr`, `agi`.
    pub via: String,
    pub request: AckRequest,
}

/// Records a match of a `pendingFor` rule: a new pending alert due at `due`, or a refresh of
/// the one already waiting (its due time kept: the condition has held since then).
fn hold(tx: &Tx, alert: Alert, event: Uuid, due: Timestamp) -> Result<(), StoreError> {
    let mut pending = match tx.pending_alert(alert.tenant_id, &alert.dedup_key)? {
        Some(mut p) => {
            p.alert.refresh(alert.severity, alert.title, alert.payload);
            p
        }
        None => PendingAlert { alert, due },
    };
    pending.alert.remember(event);
    tx.put_pending_alert(&pending)
}

/// Topology (SEMANTICS 7) and dependencies: a service's problem while its host is hard DOWN
/// is caused by the host; an object's whose dependency has failed (its `dependsOn`, a host's
/// `parents`) by the failed parent. Returns the cause and what holds the page back.
fn topology_cause(
    tx: &Tx,
    tenant: Uuid,
    object: Option<Uuid>,
    dependencies: &DependenciesOf,
) -> Result<Option<(AlertCause, SuppressedBy)>, StoreError> {
    let Some(id) = object else {
        return Ok(None);
    };
    let Some(o) = tx.object(tenant, id)? else {
        return Ok(None);
    };
    if let Some(host) = o.host_id
        && tx.hard_state(tenant, host)? == Some(DOWN)
    {
        let name = tx.object(tenant, host)?.map(|h| h.name).unwrap_or_default();
        let cause = AlertCause {
            object_id: Some(host),
            reason: format!("host {name} is DOWN"),
        };
        let by = SuppressedBy {
            kind: DEPENDENCY.into(),
            object: name,
            object_id: Some(host),
            redundancy_group: None,
        };
        return Ok(Some((cause, by)));
    }
    let Some(groups) = dependencies(tenant, id) else {
        return Ok(None);
    };
    let parents: Vec<(Uuid, Uuid)> = groups
        .iter()
        .flat_map(|g| g.members.iter().map(|m| (tenant, m.object)))
        .collect();
    let states: HashMap<Uuid, ParentState> = parents
        .iter()
        .zip(tx.live_states(&parents)?)
        .filter_map(|((_, parent), s)| Some((*parent, ParentState::of(&s?))))
        .collect();
    let Some((group, member)) = failed(&groups, Holds::Notifications, &|p| states.get(&p).copied())
    else {
        return Ok(None);
    };
    let reason = match group.redundancy_group.as_deref() {
        Some("parents") => format!("parent {} is down", member.name),
        Some(g) if group.members.len() > 1 => {
            let names: Vec<&str> = group.members.iter().map(|m| m.name.as_str()).collect();
            format!("every member of {g} has failed ({})", names.join(", "))
        }
        _ => format!("{} has failed", member.name),
    };
    let cause = AlertCause {
        object_id: Some(member.object),
        reason,
    };
    let by = SuppressedBy {
        kind: DEPENDENCY.into(),
        object: member.name.clone(),
        object_id: Some(member.object),
        redundancy_group: group.redundancy_group.clone(),
    };
    Ok(Some((cause, by)))
}

/// The host of an object, for a host downtime covering its services.
fn host_of(tx: &Tx, tenant: Uuid, object: Option<Uuid>) -> Result<Option<Uuid>, StoreError> {
    let Some(object) = object else {
        return Ok(None);
    };
    Ok(tx.object(tenant, object)?.and_then(|o| o.host_id))
}

/// Alarm storm (SEMANTICS 7): when `opened` makes `storm.threshold` alerts opened within
/// `storm.window` share one label pair, they are attached to one incident (the one one of
/// them has, or a new "Alarm storm" incident); returns its `incident_update` event.
fn correlate_storm(
    tx: &Tx,
    opened: &Alert,
    now: Timestamp,
    storm: Storm,
) -> Result<Option<EventDraft>, StoreError> {
    let tenant = opened.tenant_id;
    let since = Timestamp::from_millis(
        now.as_millis() - i64::try_from(storm.window.as_millis()).unwrap_or(i64::MAX),
    )
    .unwrap_or(now);
    let threshold = storm.threshold.max(1);
    let mut found = None;
    for (k, v) in &opened.labels {
        let pair = format!("{k}={v}");
        tx.record_open(opened, &pair, since)?;
        // Whether the pair storms needs only its threshold's newest opens.
        if found.is_none() && tx.newest_opens(tenant, &pair, since, threshold)?.len() >= threshold {
            found = Some((k.clone(), v.clone(), pair));
        }
    }
    let Some((k, v, cluster)) = found else {
        return Ok(None);
    };
    // A storm already under way: only the new alert joins its incident.
    let recorded = tx.storm_incident(tenant, &cluster)?;
    let ongoing = match recorded {
        Some(id) => tx.incident(tenant, id)?.filter(|i| i.status != "resolved"),
        None => None,
    };
    let sharing: Vec<Alert> = match &ongoing {
        Some(_) => vec![opened.clone()],
        // A storm starting: every open of the window joins it, oldest first.
        None => tx
            .newest_opens(tenant, &cluster, since, usize::MAX)?
            .into_iter()
            .rev()
            .filter_map(|(_, id)| tx.alert(tenant, id).transpose())
            .collect::<Result<_, _>>()?,
    };
    let existing = match ongoing {
        Some(i) => Some(i),
        None => match sharing.iter().find_map(|a| a.incident_id) {
            Some(id) => tx.incident(tenant, id)?,
            None => None,
        },
    };
    let mut incident = existing.unwrap_or_else(|| Incident {
        id: tx.new_id(),
        tenant_id: tenant,
        title: String::new(),
        summary: String::new(),
        severity: Severity::Critical,
        status: "open".into(),
        labels: [(k, v)].into_iter().collect(),
        impact: String::new(),
        ticket_url: String::new(),
        alert_ids: Vec::new(),
        created_by: "correlation".into(),
        opened_at: now,
        updated_at: now,
        resolved_at: None,
        version: 0,
    });
    let fresh = incident.alert_ids.is_empty();
    for a in &sharing {
        if !incident.alert_ids.contains(&a.id) {
            incident.alert_ids.push(a.id);
        }
    }
    if incident.created_by == "correlation" {
        // The storm's labels are those all its alerts share, so a later storm that joins it
        // (through one pair) does not keep the title of another site.
        let mut shared = match fresh {
            true => sharing
                .first()
                .map(|a| a.labels.clone())
                .unwrap_or_default(),
            false => incident.labels.clone(),
        };
        for a in &sharing {
            shared.retain(|k, v| a.labels.get(k) == Some(v));
        }
        incident.labels = shared;
        incident.title = storm_title(incident.alert_ids.len(), &incident.labels);
    }
    incident.updated_at = now;
    incident.version += 1;
    let joining: Vec<Uuid> = sharing
        .iter()
        .filter(|a| a.incident_id != Some(incident.id))
        .map(|a| a.id)
        .collect();
    attached(tx.attach_to_incident(&incident, &joining)?)?;
    if recorded != Some(incident.id) {
        tx.set_storm_incident(tenant, &cluster, incident.id)?;
    }
    Ok(Some(incident.storm_event(&cluster)))
}

/// "Alarm storm: 12 alerts sharing site=north, zone=b" (or no labels, when they share none).
fn storm_title(count: usize, labels: &std::collections::BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    match pairs.is_empty() {
        true => format!("Alarm storm: {count} alerts"),
        false => format!("Alarm storm: {count} alerts sharing {}", pairs.join(", ")),
    }
}

/// The "no event" alerts of heartbeat rules whose source has been silent longer than
/// `expectEvery` since it was last heard (SEMANTICS 3), for rules that are not open already;
/// rows of rules deleted, disabled or no longer heartbeat rules are dropped (`pruned`).
fn silent_sources(
    tx: &Tx,
    now: Timestamp,
    pruned: &mut bool,
    next: &mut Option<Timestamp>,
) -> Result<Vec<Alert>, StoreError> {
    let mut out = Vec::new();
    for (tenant, name, last) in tx.rule_beats()? {
        let rule = tx
            .config_doc(tenant, "alert-rules", &name)?
            .and_then(|d| AlertRule::parse(&d.body))
            .filter(|r| !r.disabled);
        let Some((rule, beat)) = rule.and_then(|r| {
            let beat = r.heartbeat.clone()?;
            Some((r, beat))
        }) else {
            tx.drop_rule_beat(tenant, &name)?;
            *pruned = true;
            continue;
        };
        let dedup_key = heartbeat_key(&name);
        if tx.active_alert(tenant, &dedup_key)?.is_some() {
            continue;
        }
        let due = last
            .plus(beat.expect_every.0)
            .plus(std::time::Duration::from_millis(1));
        if now < due {
            *next = Some(next.map_or(due, |n| n.min(due)));
            continue;
        }
        out.push(Alert {
            labels: rule.set_labels.clone(),
            payload: serde_json::json!({"source": beat.source, "lastEventAt": last}),
            escalation_policy: rule.escalation_policy.clone(),
            ..Alert::open(
                tx.new_id(),
                tenant,
                name.clone(),
                dedup_key,
                rule.severity.parse().unwrap_or(Severity::Warning),
                format!("No event from {} for {}", beat.source, beat.expect_every),
                now,
            )
        });
    }
    Ok(out)
}

/// An alert group's view of one member (SEMANTICS 3, evaluated here where the reference only
/// stores groups): the group's active alerts sharing the member's `groupBy` labels, opened
/// within its window; from `minCount` of them the group alert is opened or refreshed with the
/// aggregate, below it an open group alert is resolved. Returns the events written.
fn evaluate_group(tx: &Tx, member: &Alert, now: Timestamp) -> Result<Vec<EventDraft>, StoreError> {
    let Some(name) = member.group_id.as_deref() else {
        return Ok(Vec::new());
    };
    let tenant = member.tenant_id;
    let Some(group) = tx
        .config_doc(tenant, "alert-groups", name)?
        .and_then(|d| AlertGroup::parse(&d.body))
    else {
        return Ok(Vec::new());
    };
    let key: Vec<(String, String)> = group
        .group_by
        .iter()
        .map(|k| (k.clone(), member.labels.get(k).cloned().unwrap_or_default()))
        .collect();
    let since = Timestamp::from_millis(
        now.as_millis() - i64::try_from(group.window.0.as_millis()).unwrap_or(i64::MAX),
    )
    .unwrap_or(now);
    let members: Vec<Alert> = tx
        .alerts_since(tenant, since)?
        .into_iter()
        .filter(|a| {
            let same_key = key
                .iter()
                .all(|(k, v)| a.labels.get(k).cloned().unwrap_or_default() == *v);
            a.status.is_active() && a.group_id.as_deref() == Some(name) && same_key
        })
        .collect();
    let key_text = key
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let dedup_key = format!("group/{name}/{key_text}");
    let min_count = usize::try_from(group.min_count.unwrap_or(2).max(1)).unwrap_or(2);
    if members.len() < min_count {
        let mut events = Vec::new();
        if let Some(mut held) = tx.active_alert(tenant, &dedup_key)? {
            events.push(held.resolve(now).map_err(inconsistent)?);
            store_alert(tx, &held)?;
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
            tx.new_id(),
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

/// Turns each `ClearObject` into the `Clear`s of its object's keys that an alert holds, one is
/// pending for, or a match of the batch fires: a read of the keys under the object, not a
/// lookup per rule.
fn expand_object_clears(tx: &Tx, matches: Vec<AlertMatch>) -> Result<Vec<AlertMatch>, StoreError> {
    let asked: Vec<(Uuid, String, &HashMap<String, std::time::Duration>)> = matches
        .iter()
        .filter_map(|m| match m {
            AlertMatch::ClearObject {
                tenant,
                object,
                rules,
                ..
            } => Some((*tenant, format!("{object}/"), rules.as_ref())),
            _ => None,
        })
        .collect();
    if asked.is_empty() {
        return Ok(matches);
    }
    let mut in_use = tx.keys_in_use_under(&asked)?.into_iter();
    // The batch's fired keys by tenant and what precedes their first `/` (an object's id in
    // the keys of rules keyed by object).
    let mut fired: HashMap<(Uuid, &str), Vec<&str>> = HashMap::new();
    for m in &matches {
        if let AlertMatch::Fire { alert, .. } = m
            && let Some((object, _)) = alert.dedup_key.split_once('/')
        {
            fired
                .entry((alert.tenant_id, object))
                .or_default()
                .push(alert.dedup_key.as_str());
        }
    }
    // Each object clear's keys, with the reopen window of the rule each is of.
    let mut clears_of: Vec<Vec<(String, std::time::Duration)>> = Vec::with_capacity(asked.len());
    for (tenant, prefix, rules) in &asked {
        let mut keys = in_use.next().unwrap_or_default();
        let object = prefix.trim_end_matches('/');
        keys.extend(
            fired
                .get(&(*tenant, object))
                .into_iter()
                .flatten()
                .map(|k| k.to_string()),
        );
        keys.sort_unstable();
        keys.dedup();
        clears_of.push(
            keys.into_iter()
                .filter_map(|k| {
                    let window = *rules.get(&k[prefix.len()..])?;
                    Some((k, window))
                })
                .collect(),
        );
    }
    let mut clears_of = clears_of.into_iter();
    let mut out = Vec::with_capacity(matches.len());
    for m in matches {
        let AlertMatch::ClearObject { tenant, event, .. } = m else {
            out.push(m);
            continue;
        };
        for (dedup_key, reopen_window) in clears_of.next().unwrap_or_default() {
            out.push(AlertMatch::Clear {
                tenant,
                dedup_key,
                event,
                reopen_window,
            });
        }
    }
    Ok(out)
}

/// Drops the clears of keys no alert holds, none is pending for and no match of the batch
/// fires (a rule with `resolveOnOk` sends one for every OK event).
fn without_idle_clears(tx: &Tx, matches: Vec<AlertMatch>) -> Result<Vec<AlertMatch>, StoreError> {
    let fired: HashSet<(Uuid, String)> = matches
        .iter()
        .filter_map(|m| match m {
            AlertMatch::Fire { alert, .. } => Some((alert.tenant_id, alert.dedup_key.clone())),
            _ => None,
        })
        .collect();
    let clears: Vec<(Uuid, &str)> = matches
        .iter()
        .filter_map(|m| match m {
            AlertMatch::Clear {
                tenant, dedup_key, ..
            } => Some((*tenant, dedup_key.as_str())),
            _ => None,
        })
        .collect();
    let live: Vec<bool> = clears
        .iter()
        .zip(tx.keys_in_use(&clears)?)
        .map(|((tenant, key), in_use)| in_use || fired.contains(&(*tenant, key.to_string())))
        .collect();
    let mut live = live.into_iter();
    Ok(matches
        .into_iter()
        .filter(|m| !matches!(m, AlertMatch::Clear { .. }) || live.next().unwrap_or(false))
        .collect())
}

/// What follows a rule's alert opening: whether it pages (`hold_or_page`), then alarm-storm
/// correlation, the rule's incident, and, when it pages, its scope's flood count (last: a
/// flood starting marks its first-out alert in the store).
fn opened(
    tx: &Tx,
    alert: Alert,
    now: Timestamp,
    storm: Storm,
    by: &Suppressors,
) -> Result<Vec<EventDraft>, StoreError> {
    let base = alert.opened_at;
    let (alert, mut events, pages) = hold_or_page(tx, alert, base, now, by)?;
    events.extend(correlate_storm(tx, &alert, now, storm)?);
    events.extend(rule_incident(tx, &alert, now)?);
    if pages && alert.shelved.is_none() {
        let flood = &by.noise.of(alert.tenant_id).flood;
        events.extend(super::flood::count_open(tx, &alert, now, flood)?);
    }
    Ok(events)
}

/// An alert opening (or reopening) pages, its chain's steps counted from `base`, unless its
/// topology cause holds it back (then it does not page on its own) or a silence or downtime
/// covers it (`suppressed`), either written as a `suppressed` notification event; says
/// whether it pages.
fn hold_or_page(
    tx: &Tx,
    mut alert: Alert,
    base: Timestamp,
    now: Timestamp,
    by: &Suppressors,
) -> Result<(Alert, Vec<EventDraft>, bool), StoreError> {
    let mut events = Vec::new();
    let reason = match topology_cause(tx, alert.tenant_id, alert.object_id, &by.dependencies)? {
        Some((cause, held)) => {
            let reason = format!("caused by: {}", cause.reason);
            alert.cause = Some(cause);
            alert.suppressed_by = Some(held);
            store_alert(tx, &alert)?;
            Some(reason)
        }
        None => (by.suppressed)(&alert, host_of(tx, alert.tenant_id, alert.object_id)?),
    };
    match &reason {
        Some(why) => {
            events.push(alert.suppressed(why));
            // Only a chain waits for the suppression to lift.
            if alert.escalation_policy.is_some() {
                tx.hold_suppressed(alert.tenant_id, alert.id)?;
            }
        }
        None => arm_escalation(tx, &alert, base, now)?,
    }
    Ok((alert, events, reason.is_none()))
}

/// What the source of an alert firing again after a recent clear continues (chatter watched).
enum Refire {
    /// The cleared alert's chatter shelf still held: it opened again, still shelved.
    Reopened(Box<Alert>, Vec<EventDraft>),
    /// A new alert opens, and takes over these changes of its key's last alert.
    New(Vec<Timestamp>),
}

/// The source of `new` fired again: if the alert last holding its key cleared within
/// `chatter.within`, its changes count toward the new alert's chatter; while its chatter shelf
/// holds, it reopens instead, refreshed and still shelved.
fn refire(
    tx: &Tx,
    new: &Alert,
    event: Uuid,
    now: Timestamp,
    by: &Suppressors,
) -> Result<Refire, StoreError> {
    let chatter = &by.noise.of(new.tenant_id).chatter;
    if tx.active_alert(new.tenant_id, &new.dedup_key)?.is_some() {
        return Ok(Refire::New(Vec::new()));
    }
    let Some(mut alert) = tx.recently_cleared_alert(new.tenant_id, &new.dedup_key)? else {
        return Ok(Refire::New(Vec::new()));
    };
    let Some(reopened) = alert.reopen(now, chatter) else {
        let flips = alert.hand_over_flips(now, chatter);
        store_alert(tx, &alert)?;
        return Ok(Refire::New(flips));
    };
    alert.refresh(new.severity, new.title.clone(), new.payload.clone());
    alert.remember(event);
    store_alert(tx, &alert)?;
    let (alert, events, _) = hold_or_page(tx, alert, now, now, by)?;
    Ok(Refire::Reopened(
        Box::new(alert),
        reopened.into_iter().chain(events).collect(),
    ))
}

/// A rule with `incident: true` puts its new alert into an incident (unless correlation did):
/// the rule's open incident, else a new one titled as the alert, `createdBy: rule:<name>`.
fn rule_incident(tx: &Tx, alert: &Alert, now: Timestamp) -> Result<Option<EventDraft>, StoreError> {
    let tenant = alert.tenant_id;
    let Some(alert) = tx
        .alert(tenant, alert.id)?
        .filter(|a| a.incident_id.is_none())
    else {
        return Ok(None);
    };
    let wanted = tx
        .config_doc(tenant, "alert-rules", &alert.rule_id)?
        .and_then(|doc| AlertRule::parse(&doc.body))
        .is_some_and(|rule| rule.incident);
    if !wanted {
        return Ok(None);
    }
    let by = format!("rule:{}", alert.rule_id);
    let (mut incident, action) = match tx.open_incident_by(tenant, &by)? {
        Some(i) => (i, "alert-added"),
        None => (
            Incident {
                id: tx.new_id(),
                tenant_id: tenant,
                title: alert.title.clone(),
                summary: String::new(),
                severity: alert.severity,
                status: "open".into(),
                labels: alert.labels.clone(),
                impact: String::new(),
                ticket_url: String::new(),
                alert_ids: Vec::new(),
                created_by: by,
                opened_at: now,
                updated_at: now,
                resolved_at: None,
                version: 0,
            },
            "created",
        ),
    };
    incident.alert_ids.push(alert.id);
    incident.updated_at = now;
    incident.version += 1;
    attached(tx.attach_to_incident(&incident, &[alert.id])?)?;
    let mut event = incident.update_event(action);
    event.payload["alertId"] = serde_json::json!(alert.id);
    Ok(Some(event))
}

/// Reads ahead what deciding on `matches` reads row by row (`Tx::read_ahead`).
fn read_ahead(tx: &Tx, matches: &[AlertMatch]) -> Result<(), StoreError> {
    let (mut keys, mut objects, mut pairs, mut rules) = (vec![], vec![], vec![], vec![]);
    for m in matches {
        match m {
            AlertMatch::Fire { alert, .. } => {
                let tenant = alert.tenant_id;
                keys.push((tenant, alert.dedup_key.as_str()));
                objects.extend(alert.object_id.map(|o| (tenant, o)));
                pairs.extend(
                    alert
                        .labels
                        .iter()
                        .map(|(k, v)| (tenant, format!("{k}={v}"))),
                );
                rules.push((tenant, alert.rule_id.as_str()));
            }
            AlertMatch::Clear {
                tenant, dedup_key, ..
            } => keys.push((*tenant, dedup_key.as_str())),
            AlertMatch::Beat { .. } | AlertMatch::ClearObject { .. } => {}
        }
    }
    keys.sort_unstable();
    keys.dedup();
    objects.sort_unstable();
    objects.dedup();
    pairs.sort_unstable();
    pairs.dedup();
    rules.sort_unstable();
    rules.dedup();
    let pairs: Vec<(Uuid, &str)> = pairs.iter().map(|(t, p)| (*t, p.as_str())).collect();
    tx.read_ahead(&keys, &objects, &pairs, &rules)
}

/// The alert engine's work for the events through `through`, committed with the positions of
/// the partitions it holds (refused if another process took one since) and the lifecycle
/// events it caused, in one transaction, answered as `promise` says; once durable, after its
/// events are filed too.
#[allow(clippy::too_many_arguments)]
pub async fn apply_matches(
    store: &Arc<Store>,
    holding: Arc<Holding>,
    through: Uuid,
    matches: Vec<AlertMatch>,
    now: Timestamp,
    storm: Storm,
    by: Suppressors,
    promise: Promise,
) -> Result<(), StoreError> {
    let ((), filed) = store
        .write_filing_later(promise, move |tx| {
            let mut events = Vec::new();
            let matches = expand_object_clears(tx, matches)?;
            read_ahead(tx, &matches)?;
            for m in without_idle_clears(tx, matches)? {
                match m {
                    AlertMatch::Fire {
                        alert,
                        event,
                        pending_for: Some(wait),
                    } if tx
                        .active_alert(alert.tenant_id, &alert.dedup_key)?
                        .is_none() =>
                    {
                        hold(tx, *alert, event, now.plus(wait))?;
                    }
                    AlertMatch::Fire { alert, event, .. } => {
                        let flips = match refire(tx, &alert, event, now, &by)? {
                            Refire::Reopened(reopened, more) => {
                                events.extend(more);
                                events.extend(evaluate_group(tx, &reopened, now)?);
                                continue;
                            }
                            Refire::New(flips) => flips,
                        };
                        let (mut alert, _, opened_event) = fire(tx, *alert, Some(event), None)?;
                        events.extend(evaluate_group(tx, &alert, now)?);
                        if let Some(e) = opened_event {
                            events.push(e);
                            if !flips.is_empty() {
                                let chatter = &by.noise.of(alert.tenant_id).chatter;
                                alert.flips = flips;
                                alert.flip(now, chatter);
                                events.extend(alert.chatter_shelf(now, chatter));
                                store_alert(tx, &alert)?;
                            }
                            events.extend(opened(tx, alert, now, storm, &by)?);
                        }
                    }
                    AlertMatch::Beat {
                        tenant,
                        rule,
                        at,
                        event,
                    } => {
                        tx.set_rule_beat(tenant, &rule, at)?;
                        if let Some(mut held) = tx.active_alert(tenant, &heartbeat_key(&rule))? {
                            held.remember(event);
                            events.push(held.resolve(now).map_err(inconsistent)?);
                            store_alert(tx, &held)?;
                        }
                    }
                    AlertMatch::Clear {
                        tenant,
                        dedup_key,
                        event,
                        reopen_window,
                    } => {
                        tx.drop_pending_alert(tenant, &dedup_key)?;
                        if let Some(mut held) = tx.active_alert(tenant, &dedup_key)? {
                            held.remember(event);
                            let chatter = &by.noise.of(tenant).chatter;
                            let cleared = held.clear(now, chatter, reopen_window);
                            events.extend(cleared.map_err(inconsistent)?);
                            store_alert(tx, &held)?;
                            events.extend(evaluate_group(tx, &held, now)?);
                        }
                    }
                    // Expanded into `Clear`s above.
                    AlertMatch::ClearObject { .. } => {}
                }
            }
            tx.save_held_positions(&holding, through)?;
            tx.journal(events)?;
            Ok(())
        })
        .await?;
    if let (Promise::Durable, Some(filed)) = (promise, filed) {
        filed.await;
    }
    Ok(())
}

/// A manual alarm: opens `alert`, or folds into the active alert with its dedup key
/// (`false`: folded), with its audit entry.
pub async fn raise_alarm(
    store: &Arc<Store>,
    alert: Alert,
    audit: AuditDraft,
    via: &'static str,
    storm: Storm,
    flood: FloodSettings,
) -> Result<(Alert, bool), StoreError> {
    store
        .transact(move |tx| -> TxResult<_> {
            let (alert, fresh, event) = fire(tx, alert, None, Some(via))?;
            let mut events: Vec<EventDraft> = event.into_iter().collect();
            if fresh {
                arm_escalation(tx, &alert, alert.opened_at, alert.opened_at)?;
                // A manual alarm counts toward a storm as a rule's alert does.
                events.extend(correlate_storm(tx, &alert, alert.opened_at, storm)?);
                events.extend(super::flood::count_open(
                    tx,
                    &alert,
                    alert.opened_at,
                    &flood,
                )?);
            }
            let alert = tx.alert(alert.tenant_id, alert.id)?.unwrap_or(alert);
            tx.record([audit.after(&alert)], events)?;
            Ok(Wrote::Changed((alert, fresh)))
        })
        .await
}

/// Moves an alert on (`:ack`, `:snooze`, `:resolve`), with its lifecycle event and audit entry
/// in the same transaction.
pub async fn transition(
    store: &Arc<Store>,
    tenant: Uuid,
    id: Uuid,
    change: impl FnOnce(&mut Alert) -> Result<EventDraft, TransitionError> + Send + 'static,
    audit: AuditDraft,
) -> Result<Alert, AlertError> {
    store
        .transact(move |tx| -> TxResult<_, AlertError> {
            let old = tx.alert(tenant, id)?.ok_or(AlertError::NotFound)?;
            let mut new = old.clone();
            let event = change(&mut new)?;
            store_alert(tx, &new)?;
            if old.shelved.is_some() && new.shelved.is_none() {
                // Off the shelf and still open: it pages again, from the first step.
                let now = tx.now();
                arm_escalation(tx, &new, now, now)?;
            }
            tx.record([audit.before(&old).after(&new)], vec![event])?;
            Ok(Wrote::Changed(new))
        })
        .await
}

/// Runs the alert timers due by `now`: snoozes that ran out (open again, with the wake-up
/// event), alerts past `autoCloseAfter` (expired, no event), suppressions that lifted (the
/// chain starts), silent heartbeat rules and pending alerts whose condition held for their
/// rule's `pendingFor` (opened). Returns when the next is due and whether alerts wait for
/// their suppression to lift; a run with nothing due writes nothing.
pub async fn run_timers(
    store: &Arc<Store>,
    now: Timestamp,
    storm: Storm,
    by: Suppressors,
) -> Result<(Option<Timestamp>, bool), StoreError> {
    store
        .transact(move |tx| -> TxResult<_> {
            let mut events = Vec::new();
            let due = tx.due_alert_timers(now)?;
            let mut changed = !due.is_empty();
            for timer in due {
                tx.drop_alert_timer(&timer)?;
                if let Some(mut alert) = tx.alert(timer.tenant, timer.alert)? {
                    let before = alert.clone();
                    if let Some(woken) = alert.wake(timer.at) {
                        store_alert(tx, &alert)?;
                        arm_escalation(tx, &alert, timer.at, now)?;
                        events.push(woken);
                    } else if let Some(due) = alert.ack_due(timer.at) {
                        store_alert(tx, &alert)?;
                        let event = match due {
                            Ok(reminder) => reminder,
                            Err(unacked) => {
                                resume_escalation(tx, &alert, unacked.step, now)?;
                                unacked.event
                            }
                        };
                        tx.record([ack_audit(&before, &alert, &event, now)], vec![event])?;
                    } else if alert.expire(timer.at) {
                        store_alert(tx, &alert)?;
                    } else {
                        let shelf = alert.shelf_due(timer.at);
                        let lapsed = !alert.status.is_active()
                            && alert.refire_until.is_some_and(|u| u <= timer.at);
                        if lapsed {
                            alert.refire_until = None;
                        }
                        if shelf.is_some() || lapsed {
                            store_alert(tx, &alert)?;
                        }
                        if let Some(shelf) = shelf {
                            if alert.shelved.is_none() {
                                arm_escalation(tx, &alert, now, now)?;
                            }
                            events.push(shelf);
                        }
                    }
                } else if let Some(mut silence) = tx.silence(timer.tenant, timer.alert)? {
                    let (copy, mut failed) = (silence.clone(), None);
                    let told = silence.due(timer.at, |since| {
                        super::suppression::matched_since(tx, &copy, since).unwrap_or_else(|e| {
                            failed = Some(e);
                            true
                        })
                    });
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    if silence != copy {
                        tx.save_silence(&silence)?;
                    }
                    events.extend(told);
                } else if let Some(mut downtime) = tx.downtime(timer.tenant, timer.alert)? {
                    let told = downtime.due(now);
                    if !told.is_empty() {
                        tx.save_downtime(&downtime)?;
                        events.extend(told);
                    }
                }
            }
            for (tenant, id) in tx.suppressed_alerts()? {
                let Some(alert) = tx.alert(tenant, id)? else {
                    tx.release_suppressed(tenant, id)?;
                    changed = true;
                    continue;
                };
                let lifted = alert.status == AlertStatus::Open
                    && topology_cause(tx, tenant, alert.object_id, &by.dependencies)?.is_none()
                    && (by.suppressed)(&alert, host_of(tx, tenant, alert.object_id)?).is_none();
                if !alert.status.is_active() || lifted {
                    tx.release_suppressed(tenant, id)?;
                    changed = true;
                }
                if lifted {
                    // Paged now, once: what held it back is over.
                    let mut alert = alert;
                    if alert.suppressed_by.take().is_some() {
                        store_alert(tx, &alert)?;
                    }
                    arm_escalation(tx, &alert, alert.opened_at, now)?;
                }
            }
            // When to look again: the next timer, pending alert or heartbeat rule due, and soon
            // while suppressed alerts wait for their suppression to lift.
            let mut next: Option<Timestamp> = None;
            let held = !tx.suppressed_alerts()?.is_empty();
            if held {
                next = Some(now.plus(SUPPRESSED_RECHECK));
            }
            for alert in silent_sources(tx, now, &mut changed, &mut next)? {
                changed = true;
                let (alert, _, opened_event) = fire(tx, alert, None, None)?;
                if let Some(e) = opened_event {
                    events.push(e);
                    events.extend(opened(tx, alert, now, storm, &by)?);
                }
            }
            for pending in tx.pending_alerts()? {
                if pending.due > now {
                    next = Some(next.map_or(pending.due, |n| n.min(pending.due)));
                    continue;
                }
                changed = true;
                let mut alert = pending.alert;
                tx.drop_pending_alert(alert.tenant_id, &alert.dedup_key)?;
                alert.opened_at = now;
                let (alert, _, opened_event) = fire(tx, alert, None, None)?;
                if let Some(e) = opened_event {
                    events.push(e);
                    events.extend(opened(tx, alert, now, storm, &by)?);
                }
            }
            if let Some(at) = tx.next_alert_timer()? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
            if events.is_empty() {
                // Auto-close has no event (as the reference's); a suppression lifting starts a
                // chain whose steps record themselves; a deleted rule's beat is bookkeeping.
                tx.unrecorded("alert expiry, suppressions lifting, stale heartbeat rows");
            }
            tx.journal(events)?;
            Ok(Wrote::new((next, held), changed))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::ConfigDoc;
    use crate::model::identity::Actor;
    use crate::runtime::{Clock, TestClock};
    use std::time::Duration;

    struct Rig {
        store: Arc<Store>,
        clock: Arc<TestClock>,
        tenant: Uuid,
        _dir: tempfile::TempDir,
    }

    const STORM: Storm = Storm {
        threshold: 3,
        window: Duration::from_secs(60),
    };

    fn unsuppressed() -> Suppressors {
        Suppressors {
            suppressed: Box::new(|_, _| None),
            dependencies: crate::runtime::dependencies::no_dependencies(),
            noise: TenantNoise::new(
                NoiseSettings {
                    flood: FloodSettings {
                        enter_at: crate::model::flood::Rate {
                            alerts: 0,
                            within: crate::model::duration::GoDuration::from_secs(60),
                        },
                        ..FloodSettings::default()
                    },
                    ..NoiseSettings::default()
                },
                HashMap::new(),
            ),
        }
    }

    fn rig() -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        Rig {
            store: Store::open(dir.path(), clock.clone()).unwrap(),
            clock,
            tenant: Uuid::from_u128(7),
            _dir: dir,
        }
    }

    impl Rig {
        fn alert(&self, key: &str, labels: &[(&str, &str)]) -> Alert {
            Alert {
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Alert::open(
                    self.clock.new_id(),
                    self.tenant,
                    "rule".into(),
                    key.into(),
                    Severity::Critical,
                    format!("{key} is bad"),
                    self.clock.now(),
                )
            }
        }

        async fn apply(&self, m: AlertMatch) {
            apply_matches(
                &self.store,
                Arc::new(Holding::whole("test")),
                self.clock.new_id(),
                vec![m],
                self.clock.now(),
                STORM,
                unsuppressed(),
                Promise::Durable,
            )
            .await
            .unwrap();
        }

        async fn fire(&self, alert: Alert, pending_for: Option<Duration>) {
            let event = self.clock.new_id();
            self.apply(AlertMatch::Fire {
                alert: Box::new(alert),
                event,
                pending_for,
            })
            .await;
        }

        async fn clear(&self, key: &str) {
            let event = self.clock.new_id();
            self.apply(AlertMatch::Clear {
                tenant: self.tenant,
                dedup_key: key.into(),
                event,
                reopen_window: std::time::Duration::ZERO,
            })
            .await;
        }

        /// Reads in a transaction that writes nothing (it is aborted).
        async fn read<T: Send + 'static>(
            &self,
            f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
        ) -> T {
            self.store
                .transact(|tx| -> TxResult<_> { Ok(Wrote::Unchanged(f(tx)?)) })
                .await
                .unwrap()
        }

        async fn active(&self, key: &str) -> Option<Alert> {
            let (tenant, key) = (self.tenant, key.to_string());
            self.read(move |tx| tx.active_alert(tenant, &key)).await
        }

        async fn timers(&self) -> Option<Timestamp> {
            run_timers(&self.store, self.clock.now(), STORM, unsuppressed())
                .await
                .unwrap()
                .0
        }
    }

    /// A timed shelf stops the chain, warns its shelver 15 minutes before it ends (once) and,
    /// when it ends, the alert pages again from the first step.
    #[tokio::test]
    async fn a_timed_shelf_warns_before_it_ends_and_then_the_alert_pages_again() {
        use crate::model::alert::{Shelf, ShelveMode};
        let rig = rig();
        let alert = Alert {
            escalation_policy: Some("page".into()),
            ..rig.alert("pump", &[])
        };
        rig.fire(alert, None).await;
        let id = rig.active("pump").await.unwrap().id;
        let armed = move |tx: &Tx| Ok(tx.escalation_timer(id, 0)?.is_some());
        assert!(
            rig.read(armed).await,
            "an open alert with a policy is armed"
        );
        let until = rig.clock.now().plus(Duration::from_secs(3600));
        let shelf = Shelf {
            mode: ShelveMode::Timed,
            until: Some(until),
            reason: "pump maintenance".into(),
            by: "ops".into(),
            user_id: None,
            at: rig.clock.now(),
            warned: false,
        };
        let audit = AuditDraft::new(
            rig.clock.now(),
            rig.tenant,
            &Actor::system("test"),
            "alert.shelve",
            format!("alert/{id}"),
        );
        transition(&rig.store, rig.tenant, id, move |a| a.shelve(shelf), audit)
            .await
            .unwrap();
        assert!(!rig.read(armed).await, "a shelved alert does not page");
        let warning = crate::model::alert::shelf_warning_at(until);
        assert_eq!(rig.timers().await, Some(warning));
        rig.clock.advance(Duration::from_secs(45 * 60));
        assert_eq!(rig.timers().await, Some(until), "warned; the end is next");
        let shelved = rig.active("pump").await.unwrap().shelved.unwrap();
        assert!(shelved.warned);
        assert!(!rig.read(armed).await);
        rig.clock.advance(Duration::from_secs(15 * 60));
        rig.timers().await;
        let back = rig.active("pump").await.unwrap();
        assert!(back.shelved.is_none());
        assert!(rig.read(armed).await, "off the shelf it pages again");
    }

    /// A source that flips 20 times in under two minutes opens three alerts: the fourth change
    /// within a minute shelves the third, which then holds every change (no page while it
    /// chatters, clears included), and when the shelf ends with the source firing it pages.
    #[tokio::test]
    async fn a_chattering_alert_shelves_itself_and_pages_when_its_shelf_ends() {
        use crate::model::alert::ShelveMode;
        let rig = rig();
        let start = rig.clock.now();
        let pump = || Alert {
            escalation_policy: Some("page".into()),
            ..rig.alert("pump", &[])
        };
        rig.fire(pump(), None).await;
        let id = rig.active("pump").await.unwrap().id;
        let armed = move |tx: &Tx| Ok(tx.escalation_timer(id, 0)?.is_some());
        assert!(rig.read(armed).await);
        for flip in 0..20 {
            rig.clock.advance(Duration::from_secs(5));
            if flip % 2 == 0 {
                rig.clear("pump").await;
            } else {
                rig.fire(pump(), None).await;
            }
        }
        let tenant = rig.tenant;
        let all = rig.read(move |tx| tx.alerts_since(tenant, start)).await;
        assert_eq!(all.len(), 3, "{all:?}");
        let alert = rig.active("pump").await.expect("the last change fired");
        assert_ne!(alert.id, id);
        assert!(alert.flips.len() > 3, "its changes: {:?}", alert.flips);
        let id = alert.id;
        let armed = move |tx: &Tx| Ok(tx.escalation_timer(id, 0)?.is_some());
        let shelf = alert.shelved.expect("chattering shelves it");
        assert_eq!(shelf.mode, ShelveMode::Chatter);
        assert!(shelf.reason.starts_with("chattering"), "{}", shelf.reason);
        assert!(!rig.read(armed).await, "a chattering alert does not page");
        let until = shelf.until.unwrap();
        assert_eq!(until, shelf.at.plus(Duration::from_secs(900)));
        rig.clock.advance(Duration::from_secs(900));
        rig.timers().await;
        let back = rig.active("pump").await.unwrap();
        assert!(back.shelved.is_none(), "the shelf ended");
        assert!(rig.read(armed).await, "still firing, it pages again");
    }

    /// A chatter shelf outlives a clear: the alert resolved while shelved reopens still
    /// shelved, and once the shelf and the reopening window have passed, a new firing is a new
    /// alert.
    #[tokio::test]
    async fn a_chatter_shelf_holds_through_a_clear_and_then_lapses() {
        let rig = rig();
        for flip in 0..5 {
            rig.clock.advance(Duration::from_secs(5));
            if flip % 2 == 0 {
                rig.fire(rig.alert("fan", &[]), None).await;
            } else {
                rig.clear("fan").await;
            }
        }
        let first = rig.active("fan").await.unwrap();
        assert!(first.shelved.is_some(), "five changes in 25 s chatter");
        rig.clock.advance(Duration::from_secs(5));
        rig.clear("fan").await;
        assert!(rig.active("fan").await.is_none());
        let (tenant, id) = (rig.tenant, first.id);
        let resolved = rig.read(move |tx| tx.alert(tenant, id)).await.unwrap();
        assert!(
            resolved.shelved.is_some(),
            "resolved, still on its chatter shelf"
        );
        rig.clock.advance(Duration::from_secs(5));
        rig.fire(rig.alert("fan", &[]), None).await;
        let again = rig.active("fan").await.unwrap();
        assert_eq!(again.id, first.id, "reopened while the shelf holds");
        assert!(again.shelved.is_some());
        rig.clear("fan").await;
        rig.clock.advance(Duration::from_secs(901));
        rig.timers().await;
        let ended = rig.read(move |tx| tx.alert(tenant, id)).await.unwrap();
        assert!(ended.shelved.is_none() && ended.refire_until.is_none());
        rig.fire(rig.alert("fan", &[]), None).await;
        assert_ne!(rig.active("fan").await.unwrap().id, first.id, "a new alert");
    }

    #[test]
    fn aggregates_count_and_summarise_the_values() {
        let v = || vec![3.0, 1.0, 4.0, 2.0];
        assert_eq!(aggregate_of("count", 7, v()), Some(7.0));
        assert_eq!(aggregate_of("min", 4, v()), Some(1.0));
        assert_eq!(aggregate_of("max", 4, v()), Some(4.0));
        assert_eq!(aggregate_of("avg", 4, v()), Some(2.5));
        assert_eq!(aggregate_of("median", 4, v()), Some(2.5));
        assert_eq!(aggregate_of("median", 3, vec![5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(aggregate_of("max", 2, Vec::new()), None);
    }

    /// One active alert per dedup key: a second match refreshes it, a clear resolves it and
    /// frees the key for a new alert.
    #[tokio::test]
    async fn a_key_holds_one_active_alert_until_it_is_cleared() {
        let rig = rig();
        rig.fire(rig.alert("pump", &[]), None).await;
        let first = rig.active("pump").await.unwrap();
        rig.fire(rig.alert("pump", &[]), None).await;
        let refreshed = rig.active("pump").await.unwrap();
        assert_eq!(refreshed.id, first.id);
        assert_eq!(refreshed.event_ids.len(), 2);
        rig.clear("pump").await;
        assert!(rig.active("pump").await.is_none());
        let (tenant, id) = (rig.tenant, first.id);
        let resolved = rig.read(move |tx| tx.alert(tenant, id)).await.unwrap();
        assert_eq!(resolved.status, AlertStatus::Resolved);
        rig.fire(rig.alert("pump", &[]), None).await;
        assert_ne!(rig.active("pump").await.unwrap().id, first.id);
    }

    /// An object's clear clears its rules' keys in use, an alert held or pending and one
    /// fired earlier in the same batch, and leaves other rules' keys and other objects alone.
    #[tokio::test]
    async fn an_object_clear_clears_its_rules_keys_in_use_only() {
        let rig = rig();
        let (object, other) = (Uuid::from_u128(41), Uuid::from_u128(42));
        let key = |o: Uuid, rule: &str| format!("{o}/{rule}");
        for k in [
            key(object, "held"),
            key(object, "manual"),
            key(other, "held"),
        ] {
            rig.fire(rig.alert(&k, &[]), None).await;
        }
        rig.fire(
            rig.alert(&key(object, "waiting"), &[]),
            Some(Duration::from_secs(300)),
        )
        .await;
        let rules: HashMap<String, Duration> = ["held", "waiting", "batch", "idle"]
            .into_iter()
            .map(|r| (r.to_string(), Duration::ZERO))
            .collect();
        apply_matches(
            &rig.store,
            Arc::new(Holding::whole("test")),
            rig.clock.new_id(),
            vec![
                AlertMatch::Fire {
                    alert: Box::new(rig.alert(&key(object, "batch"), &[])),
                    event: rig.clock.new_id(),
                    pending_for: None,
                },
                AlertMatch::ClearObject {
                    tenant: rig.tenant,
                    object,
                    event: rig.clock.new_id(),
                    rules: Arc::new(rules),
                },
            ],
            rig.clock.now(),
            STORM,
            unsuppressed(),
            Promise::Durable,
        )
        .await
        .unwrap();
        assert!(rig.active(&key(object, "held")).await.is_none());
        assert!(rig.active(&key(object, "batch")).await.is_none());
        assert!(
            rig.active(&key(object, "manual")).await.is_some(),
            "not its rule"
        );
        assert!(
            rig.active(&key(other, "held")).await.is_some(),
            "another object"
        );
        let (tenant, waiting) = (rig.tenant, key(object, "waiting"));
        let in_use = rig
            .read(move |tx| tx.keys_in_use(&[(tenant, waiting.as_str())]))
            .await;
        assert_eq!(in_use, [false], "the pending alert is dropped");
    }

    /// `threshold` alerts opened within the window sharing a label pair make one incident; a
    /// later one joins it; one with other labels stays out.
    #[tokio::test]
    async fn an_alarm_storm_gathers_its_alerts_into_one_incident() {
        let rig = rig();
        rig.fire(rig.alert("a", &[("site", "north")]), None).await;
        rig.fire(rig.alert("b", &[("site", "north")]), None).await;
        assert!(rig.active("b").await.unwrap().incident_id.is_none());
        rig.fire(rig.alert("other", &[("site", "south")]), None)
            .await;
        rig.fire(rig.alert("c", &[("site", "north")]), None).await;
        let incident = rig.active("c").await.unwrap().incident_id.unwrap();
        for key in ["a", "b"] {
            assert_eq!(rig.active(key).await.unwrap().incident_id, Some(incident));
        }
        assert!(rig.active("other").await.unwrap().incident_id.is_none());
        rig.fire(rig.alert("d", &[("site", "north")]), None).await;
        assert_eq!(rig.active("d").await.unwrap().incident_id, Some(incident));
        let tenant = rig.tenant;
        let i = rig
            .read(move |tx| tx.incident(tenant, incident))
            .await
            .unwrap();
        assert_eq!(i.alert_ids.len(), 4);
        assert_eq!(i.title, "Alarm storm: 4 alerts sharing site=north");
        // Past the window the count starts again: one alert is no storm.
        rig.clock.advance(Duration::from_secs(120));
        rig.fire(rig.alert("e", &[("site", "north")]), None).await;
        assert!(rig.active("e").await.unwrap().incident_id.is_none());
    }

    /// A storm's incident is titled and labelled by what all its alerts share: a later alert
    /// of another site joining through a pair they share takes the site out of both.
    #[tokio::test]
    async fn a_storm_incident_follows_the_labels_its_alerts_share() {
        let rig = rig();
        for key in ["a", "b", "c"] {
            rig.fire(rig.alert(key, &[("site", "north"), ("kind", "pump")]), None)
                .await;
        }
        let incident = rig.active("c").await.unwrap().incident_id.unwrap();
        let tenant = rig.tenant;
        let read = move |tx: &Tx| tx.incident(tenant, incident);
        let i = rig.read(read).await.unwrap();
        assert_eq!(
            i.title,
            "Alarm storm: 3 alerts sharing kind=pump, site=north"
        );
        rig.fire(rig.alert("d", &[("site", "south"), ("kind", "pump")]), None)
            .await;
        assert_eq!(rig.active("d").await.unwrap().incident_id, Some(incident));
        let i = rig.read(read).await.unwrap();
        assert_eq!(i.title, "Alarm storm: 4 alerts sharing kind=pump");
        assert_eq!(i.labels.len(), 1);
    }

    /// A `pendingFor` match opens nothing until the condition has held that long; the timers
    /// say when that is and open it then.
    #[tokio::test]
    async fn a_pending_alert_opens_once_its_condition_held_long_enough() {
        let rig = rig();
        let wait = Duration::from_secs(30);
        rig.fire(rig.alert("slow", &[]), Some(wait)).await;
        assert!(rig.active("slow").await.is_none());
        let due = rig.clock.now().plus(wait);
        assert_eq!(rig.timers().await, Some(due));
        rig.clock.advance(Duration::from_secs(10));
        rig.fire(rig.alert("slow", &[]), Some(wait)).await;
        assert_eq!(
            rig.timers().await,
            Some(due),
            "a repeat keeps the first due time"
        );
        rig.clock.advance(Duration::from_secs(21));
        assert_eq!(rig.timers().await, None);
        let opened = rig.active("slow").await.unwrap();
        assert_eq!(opened.event_ids.len(), 2);
        assert_eq!(opened.opened_at, rig.clock.now());
        // A clear before the time drops a pending alert.
        rig.fire(rig.alert("flappy", &[]), Some(wait)).await;
        rig.clear("flappy").await;
        rig.clock.advance(Duration::from_secs(31));
        rig.timers().await;
        assert!(rig.active("flappy").await.is_none());
    }

    /// From `minCount` members sharing the group's labels the group alert opens with the
    /// aggregate; below it, it is resolved.
    #[tokio::test]
    async fn an_alert_group_opens_from_min_count_and_resolves_below_it() {
        let rig = rig();
        let now = rig.clock.now();
        let body = r#"{"groupBy":["site"],"window":"10m","minCount":2,"aggregate":"max","valuePath":"temp"}"#;
        let doc = ConfigDoc {
            id: rig.clock.new_id(),
            tenant_id: rig.tenant,
            kind: "alert-groups".into(),
            name: "pumps".into(),
            created_at: now,
            updated_at: now,
            version: 1,
            body: body.into(),
        };
        let audit = AuditDraft::new(
            now,
            rig.tenant,
            &Actor::system("test"),
            "config.create",
            "alert-groups/pumps".into(),
        );
        rig.store
            .transact(move |tx| -> TxResult<_> {
                tx.insert_config_doc(&doc)?;
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        let member = |key: &str, temp: u32| Alert {
            group_id: Some("pumps".into()),
            payload: serde_json::json!({"temp": temp}),
            ..rig.alert(key, &[("site", "north")])
        };
        rig.fire(member("p1", 70), None).await;
        assert!(rig.active("group/pumps/site=north").await.is_none());
        rig.fire(member("p2", 80), None).await;
        let group = rig.active("group/pumps/site=north").await.unwrap();
        assert_eq!(group.payload["count"], 2);
        assert_eq!(group.payload["value"], 80.0);
        assert_eq!(group.title, "2 alerts for site=north: max 80");
        rig.clear("p2").await;
        assert!(rig.active("group/pumps/site=north").await.is_none());
    }
}
