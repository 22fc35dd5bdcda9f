//! Check results (CONTRACT 3): passive results mapped to each object's state numbers, every
//! result (passive, active, stale) run through the state machine in one transaction,
//! transitions reported as `state_change` and flapping events, performance data recorded as
//! metric samples. Live state and the problem list read from here too.

use super::catalog::{Catalog, Entry};
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::event::{EventDraft, EventType, Payload, Severity};
use crate::model::metric::{PerfValue, parse_perfdata};
use crate::model::object::ObjectKind;
use crate::model::state::{
    self, CheckState, DOWN, Observation, Problem, StateChangePayload, StateSummary, StateType,
    Transition, UNREACHABLE, UP, badness, severity,
};
use crate::runtime::clock::SharedClock;
use crate::store::metrics::{MetricsStore, Sample};
use crate::store::{Promise, Store, StoreError, Tx};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// Output of a stale object when its spec has no `stalenessText`.
pub const STALE_TEXT: &str = "UNKNOWN - check result is stale (freshness threshold exceeded)";
/// How soon an object outside its check period is looked at again (when a period begins is not
/// worked out; this bounds the delay).
const PERIOD_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// The batch is refused whole; `.0` says which result and why.
    #[error("{0}")]
    Invalid(String),
    /// The pipeline could not take the results (SPEC 7: 503).
    #[error("{0}")]
    Stalled(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultBatch {
    pub results: Vec<ResultItem>,
}

#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultItem {
    pub host: String,
    #[serde(default)]
    pub service: Option<String>,
    /// 0..3 or a name (`OK`, `WARNING`/`WARN`, `CRITICAL`/`CRIT`, `UNKNOWN`/`UNKN`, `UP`,
    /// `DOWN`, `UNREACHABLE`/`UNREACH`).
    pub state: Value,
    #[serde(default)]
    pub output: String,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Accepted {
    pub accepted: usize,
    /// `host` or `host/service` of each result naming no known object.
    pub rejected: Vec<String>,
}

/// What `Results::apply` did: the new states, and the commit of their events and samples.
pub struct Applied<'a> {
    pub states: Vec<CheckState>,
    pub stored: BoxFuture<'a, ()>,
}

/// A result's state in the object's numbers: services 0..3; hosts UP, DOWN or UNREACHABLE
/// (OK and WARNING are up, CRITICAL and UNKNOWN down, as a plugin's exit code reads).
fn map_state(kind: ObjectKind, raw: &Value) -> Option<u8> {
    let service = match raw {
        Value::Number(n) => u8::try_from(n.as_u64()?).ok().filter(|s| *s <= 3)?,
        Value::String(s) => match s.trim().to_ascii_uppercase().as_str() {
            "OK" | "UP" => 0,
            "WARNING" | "WARN" => 1,
            "CRITICAL" | "CRIT" | "DOWN" => 2,
            "UNKNOWN" | "UNKN" => 3,
            "UNREACHABLE" | "UNREACH" if kind == ObjectKind::Host => return Some(UNREACHABLE),
            _ => return None,
        },
        _ => return None,
    };
    Some(match (kind, raw) {
        (ObjectKind::Service, _) => service,
        // Numbers for hosts are the host states themselves (0 UP, 1 DOWN, 2 UNREACHABLE; 3 down).
        (ObjectKind::Host, Value::Number(_)) => match service {
            0 => UP,
            2 => UNREACHABLE,
            _ => DOWN,
        },
        (ObjectKind::Host, _) => {
            if service <= 1 {
                UP
            } else {
                DOWN
            }
        }
    })
}

/// Plugin output: the first line is the text, a `|` starts performance data, further lines
/// are long output.
pub(crate) fn split_output(output: &str) -> (String, String, String) {
    let mut lines = output.lines();
    let first = lines.next().unwrap_or_default();
    let (text, perf) = match first.split_once('|') {
        Some((t, p)) => (t.trim().to_string(), p.trim().to_string()),
        None => (first.trim().to_string(), String::new()),
    };
    (text, lines.collect::<Vec<_>>().join("\n"), perf)
}

/// One observation of one catalog object, on its way through the pipeline.
#[derive(Clone, Debug)]
pub struct Job {
    pub entry: Arc<Entry>,
    pub obs: Observation,
    /// The observation's performance data, parsed where the job is made (the request's or the
    /// check's task), not by the pipeline between one transaction and the next.
    perf: Vec<PerfValue>,
}

impl Job {
    /// A check's outcome as an observation of `entry`, with its resolved attempts and flap
    /// thresholds (`max_attempts`: what to count against when the spec sets nothing).
    pub fn new(entry: Arc<Entry>, state: u8, output: &str, max_attempts: u32) -> Self {
        let (output, long_output, perfdata) = split_output(output);
        let obs = Observation {
            state,
            output,
            long_output,
            perfdata,
            max_attempts: entry.spec.max_check_attempts.unwrap_or(max_attempts),
            flap_thresholds: state::flap_thresholds(&entry.spec),
        };
        let perf = parse_perfdata(&obs.perfdata);
        Job { entry, obs, perf }
    }
}

pub struct Results {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    metrics: Arc<MetricsStore>,
    clock: SharedClock,
}

impl Results {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<Catalog>,
        metrics: Arc<MetricsStore>,
        clock: SharedClock,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            catalog,
            metrics,
            clock,
        })
    }

    /// Checks a batch of passive results and turns it into jobs: all of them or (on a
    /// malformed one) none. Results naming no object are left out and listed by name.
    pub async fn prepare(
        &self,
        p: &Principal,
        batch: ResultBatch,
    ) -> Result<(Vec<Job>, Vec<String>), ResultError> {
        let snapshot = self.catalog.snapshot().await?;
        let catalog = snapshot.tenant(p.tenant);
        let mut jobs = Vec::with_capacity(batch.results.len());
        let mut rejected = Vec::new();
        for (i, r) in batch.results.iter().enumerate() {
            let service = r.service.as_deref().filter(|s| !s.is_empty());
            let Some(entry) = catalog.and_then(|c| c.by_name(&r.host, service)) else {
                rejected.push(match service {
                    Some(s) => format!("{}/{s}", r.host),
                    None => r.host.clone(),
                });
                continue;
            };
            let state = map_state(entry.object.kind, &r.state).ok_or_else(|| {
                ResultError::Invalid(format!(
                    "result {}: state {} is not a check state",
                    i + 1,
                    r.state
                ))
            })?;
            // Passive results are hard at once unless the object asks for attempts (Icinga).
            jobs.push(Job::new(entry.clone(), state, &r.output, 1));
        }
        Ok((jobs, rejected))
    }

    /// Runs jobs through the state machine in one transaction, in order, journals the
    /// transitions' events in it, then queues them for the event store (one append) and the
    /// performance data as metric samples;
    /// returns each job's new state, once durable or committed (`promise`), and a future that
    /// resolves once the events (of a durable write: a deferred one's are filed by the store
    /// once it syncs) and samples are stored too. Events and samples of successive calls are
    /// stored in call order, so the next call may run while this one's are still committing.
    pub async fn apply(&self, jobs: Vec<Job>, promise: Promise) -> Result<Applied<'_>, StoreError> {
        let now = self.clock.now();
        // A state keeps its observation's performance data, so each job's samples are known.
        let mut samples = Vec::new();
        let (entries, items): (Vec<Arc<Entry>>, Vec<_>) = jobs
            .into_iter()
            .map(|j| {
                let o = &j.entry.object;
                samples.extend(j.perf.into_iter().map(|v| Sample {
                    tenant: o.tenant_id,
                    object: o.id,
                    metric: v.label,
                    unit: v.unit,
                    ms: now.as_millis(),
                    value: v.value,
                }));
                let item = (o.tenant_id, o.id, j.obs);
                (j.entry, item)
            })
            .unzip();
        // The hosts that may come back, with the hosts behind them: an UNREACHABLE child is
        // looked at again once one is back.
        let behind: Vec<(Uuid, Vec<Arc<Entry>>)> = {
            let up: Vec<&Arc<Entry>> = entries
                .iter()
                .zip(&items)
                .filter(|(e, (_, _, obs))| e.object.kind == ObjectKind::Host && obs.state == UP)
                .map(|(e, _)| e)
                .collect();
            if up.is_empty() {
                Vec::new()
            } else {
                let snapshot = self.catalog.snapshot().await?;
                up.into_iter()
                    .filter_map(|e| {
                        let children = snapshot.tenant(e.object.tenant_id)?.children(e.object.id);
                        (!children.is_empty()).then(|| (e.object.id, children.to_vec()))
                    })
                    .collect()
            }
        };
        // Transitions become events inside the state transaction, journaled with it.
        let (stepped, events_filed) = self
            .store
            .write_filing_later(promise, move |tx| {
                let mut items = items;
                derive_unreachable(tx, &entries, &mut items)?;
                let objects: Vec<(Uuid, Uuid)> =
                    items.iter().map(|(tenant, id, _)| (*tenant, *id)).collect();
                let stepped = step_all(&items, tx.live_states(&objects)?, now);
                let tenants = objects.iter().map(|(tenant, _)| *tenant);
                tx.save_live_states(tenants.zip(stepped.iter().map(|(s, _)| s)))?;
                let mut events: Vec<EventDraft> = stepped
                    .iter()
                    .zip(&entries)
                    .filter_map(|((next, t), e)| t.as_ref().map(|t| report(e, next, t)))
                    .flatten()
                    .collect();
                let back: Vec<Uuid> = stepped
                    .iter()
                    .zip(&entries)
                    .filter(|((next, t), _)| {
                        t.as_ref().is_some_and(|t| t.changed)
                            && next.state == UP
                            && next.state_type == StateType::Hard
                    })
                    .map(|(_, e)| e.object.id)
                    .collect();
                events.extend(down_again(tx, &behind, &back, now)?);
                if events.is_empty() {
                    tx.unrecorded("live states without a transition");
                }
                tx.journal(events)?;
                Ok(stepped)
            })
            .await?;
        // The event and metric files commit in parallel.
        let samples_stored = self.metrics.record(samples);
        let stored = Box::pin(async move {
            if let Some(filed) = events_filed {
                filed.await;
            }
            let _ = samples_stored.await;
        });
        Ok(Applied {
            states: stepped.into_iter().map(|(s, _)| s).collect(),
            stored,
        })
    }

    /// The time on the results' clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Observations of the objects that have been silent for longer than their
    /// `stalenessAfter`: UNKNOWN with their `stalenessText` (Nagios freshness), outside their
    /// `checkPeriod` none. Not forced hard: with attempts they go soft first. Also when the next
    /// object would go stale (none: no object is watched).
    pub async fn stale_jobs(&self) -> Result<(Vec<Job>, Option<Timestamp>), StoreError> {
        let now = self.clock.now();
        let snapshot = self.catalog.snapshot().await?;
        let mut jobs = Vec::new();
        let mut next: Option<Timestamp> = None;
        let mut due = |at: Timestamp| next = Some(next.map_or(at, |n: Timestamp| n.min(at)));
        for (tenant, catalog) in snapshot.tenants() {
            let (watched, off): (Vec<&Arc<Entry>>, Vec<&Arc<Entry>>) = catalog
                .entries
                .iter()
                .filter(|e| e.spec.staleness_after.is_some_and(|d| !d.0.is_zero()))
                .partition(|e| catalog.in_period(e.spec.check_period.as_deref(), now));
            if !off.is_empty() {
                due(now.plus(PERIOD_RECHECK));
            }
            if watched.is_empty() {
                continue;
            }
            let states = self
                .store
                .states(*tenant, watched.iter().map(|e| e.object.id).collect())
                .await?
                .covered_by_object(&*snapshot.labels_of(*tenant));
            for e in watched {
                let after = e.spec.staleness_after.map(|d| d.0).unwrap_or_default();
                let last = states
                    .get(&e.object.id)
                    .map_or(e.object.created_at, |s| s.last_check);
                if now.since(last) <= after {
                    due(last.plus(after + std::time::Duration::from_millis(1)));
                    continue;
                }
                // Its stale result counts as its last check.
                due(now.plus(after));
                let output = e
                    .spec
                    .staleness_text
                    .clone()
                    .unwrap_or_else(|| STALE_TEXT.to_string());
                let state = match e.object.kind {
                    ObjectKind::Service => state::UNKNOWN,
                    ObjectKind::Host => DOWN,
                };
                jobs.push(Job::new(
                    e.clone(),
                    state,
                    &output,
                    state::DEFAULT_MAX_ATTEMPTS,
                ));
            }
        }
        Ok((jobs, next))
    }

    /// The live states of these objects.
    pub async fn states(
        &self,
        p: &Principal,
        ids: Vec<Uuid>,
    ) -> Result<HashMap<Uuid, CheckState>, StoreError> {
        let labels = self.catalog.snapshot().await?.labels_of(p.tenant);
        Ok(self
            .store
            .states(p.tenant, ids)
            .await?
            .covered_by_object(&*labels))
    }

    /// Objects not OK/UP: unhandled before handled (acknowledged or in downtime, listed only
    /// with `include_handled`), then worst state first, then oldest hard change.
    /// How many of the tenant's objects are in each state.
    pub async fn summary(&self, p: &Principal) -> Result<StateSummary, StoreError> {
        let snapshot = self.catalog.snapshot().await?;
        let Some(catalog) = snapshot.tenant(p.tenant) else {
            return Ok(StateSummary::default());
        };
        let mut summary = StateSummary::default();
        for s in self
            .store
            .all_states(p.tenant)
            .await?
            .covered(&*snapshot.labels_of(p.tenant))
        {
            if let Some(o) = catalog.get(s.object_id) {
                summary.add(o.object.kind, &s);
            }
        }
        Ok(summary)
    }

    pub async fn problems(
        &self,
        p: &Principal,
        include_handled: bool,
        limit: usize,
    ) -> Result<Vec<Problem>, StoreError> {
        let snapshot = self.catalog.snapshot().await?;
        let Some(catalog) = snapshot.tenant(p.tenant) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<Problem> = self
            .store
            .all_states(p.tenant)
            .await?
            .covered(&*snapshot.labels_of(p.tenant))
            .into_iter()
            .filter(|s| s.state != 0 && (include_handled || !handled(s)))
            .filter_map(|s| {
                let entry = catalog.get(s.object_id)?;
                let object = entry.object.clone();
                let host_name = object
                    .host_id
                    .and_then(|h| catalog.get(h))
                    .map(|h| h.object.name.clone());
                Some(Problem {
                    object,
                    host_name,
                    state: s,
                    labels: entry.labels.clone(),
                })
            })
            .collect();
        let rank = |p: &Problem| {
            (
                handled(&p.state),
                std::cmp::Reverse(badness(p.object.kind, p.state.state)),
                p.state.last_hard_change,
            )
        };
        out.sort_by_key(rank);
        out.truncate(limit);
        Ok(out)
    }
}

/// The events of one transition: `flapping_start`/`flapping_end`, `state_change`.
/// A DOWN host all of whose parents are hard non-UP is UNREACHABLE instead. A parent's result
/// earlier in the same batch counts over its stored state, which is read in the results'
/// transaction (all of the batch's parents in one read).
fn derive_unreachable(
    tx: &Tx,
    entries: &[Arc<Entry>],
    items: &mut [(Uuid, Uuid, Observation)],
) -> Result<(), StoreError> {
    fn down_with_parents<'e>(e: &'e Entry, obs: &Observation) -> Option<&'e [Uuid]> {
        (e.object.kind == ObjectKind::Host && obs.state == DOWN)
            .then_some(e.parents.as_deref())
            .flatten()
    }
    let parents: Vec<(Uuid, Uuid)> = entries
        .iter()
        .zip(items.iter())
        .filter_map(|(e, (tenant, _, obs))| {
            down_with_parents(e, obs).map(|ps| ps.iter().map(|p| (*tenant, *p)).collect::<Vec<_>>())
        })
        .flatten()
        .collect();
    if parents.is_empty() {
        return Ok(());
    }
    let stored: HashMap<Uuid, bool> = parents
        .iter()
        .zip(tx.live_states(&parents)?)
        .map(|((_, id), s)| {
            let down = s.is_some_and(|s| s.state != UP && s.state_type == StateType::Hard);
            (*id, down)
        })
        .collect();
    // Host id → down and hard at once, as observed so far in this batch.
    let mut seen: HashMap<Uuid, bool> = HashMap::new();
    for (e, (_, id, obs)) in entries.iter().zip(items.iter_mut()) {
        if e.object.kind != ObjectKind::Host {
            continue;
        }
        if let Some(parents) = down_with_parents(e, obs) {
            let down = |p: &Uuid| seen.get(p).or(stored.get(p)).copied().unwrap_or(false);
            if parents.iter().all(down) {
                obs.state = UNREACHABLE;
            }
        }
        seen.insert(*id, obs.state != UP && obs.max_attempts <= 1);
    }
    Ok(())
}

/// The hosts behind the hosts `back` (hard UP again) that are still hard UNREACHABLE, but not
/// all of whose parents are down any more: DOWN again, as their last result said, so an
/// outage behind a router that recovered is not lost until the host's next result (a passive
/// one may be long in coming). Returns their events.
fn down_again(
    tx: &Tx,
    behind: &[(Uuid, Vec<Arc<Entry>>)],
    back: &[Uuid],
    now: Timestamp,
) -> Result<Vec<EventDraft>, StoreError> {
    let mut children: Vec<&Arc<Entry>> = behind
        .iter()
        .filter(|(host, _)| back.contains(host))
        .flat_map(|(_, children)| children)
        .collect();
    children.sort_by_key(|e| e.object.id);
    children.dedup_by_key(|e| e.object.id);
    if children.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<(Uuid, Uuid)> = children
        .iter()
        .map(|e| (e.object.tenant_id, e.object.id))
        .collect();
    let mut entries = Vec::new();
    let mut items = Vec::new();
    let mut stored = Vec::new();
    for (e, state) in children.into_iter().zip(tx.live_states(&keys)?) {
        let Some(state) =
            state.filter(|s| s.state == UNREACHABLE && s.state_type == StateType::Hard)
        else {
            continue;
        };
        let tenant = e.object.tenant_id;
        let parents: Vec<(Uuid, Uuid)> = e.parents.iter().flatten().map(|p| (tenant, *p)).collect();
        let all_down = tx.live_states(&parents)?.iter().all(|p| {
            p.as_ref()
                .is_some_and(|p| p.state != UP && p.state_type == StateType::Hard)
        });
        if all_down {
            continue;
        }
        let obs = Observation {
            state: DOWN,
            output: state.output.clone(),
            long_output: state.long_output.clone(),
            perfdata: state.perfdata.clone(),
            max_attempts: 1,
            flap_thresholds: None,
        };
        items.push((tenant, e.object.id, obs));
        entries.push(e.clone());
        stored.push(Some(state));
    }
    let stepped = step_all(&items, stored, now);
    let tenants = items.iter().map(|(tenant, _, _)| *tenant);
    tx.save_live_states(tenants.zip(stepped.iter().map(|(s, _)| s)))?;
    Ok(stepped
        .iter()
        .zip(&entries)
        .filter_map(|((next, t), e)| t.as_ref().map(|t| report(e, next, t)))
        .flatten()
        .collect())
}

/// Steps each item's state machine (tenant, object, observation) from the state before it:
/// the same object's earlier item in this batch, else its stored state.
fn step_all(
    items: &[(Uuid, Uuid, Observation)],
    stored: Vec<Option<CheckState>>,
    now: Timestamp,
) -> Vec<(CheckState, Option<Transition>)> {
    let mut stepped: Vec<(CheckState, Option<Transition>)> = Vec::with_capacity(items.len());
    // The item each object was last seen at in this batch.
    let mut last_item: HashMap<(Uuid, Uuid), usize> = HashMap::new();
    for (i, ((tenant, id, obs), before)) in items.iter().zip(stored).enumerate() {
        let prev = match last_item.get(&(*tenant, *id)) {
            Some(&j) => stepped.get(j).map(|(s, _)| s),
            None => before.as_ref(),
        };
        let next = state::step(*id, prev, obs, now);
        last_item.insert((*tenant, *id), i);
        stepped.push(next);
    }
    stepped
}

fn report(e: &Entry, next: &CheckState, t: &Transition) -> Vec<EventDraft> {
    let o = &e.object;
    let mut drafts = Vec::new();
    if let Some(started) = t.flapping {
        let kind = if started {
            EventType::FlappingStart
        } else {
            EventType::FlappingEnd
        };
        let payload = json!({"object": o.name, "flapPct": next.flap_pct, "labels": e.labels});
        let mut draft = EventDraft::new(o.tenant_id, kind, Some(Severity::Info), payload);
        draft.object_id = Some(o.id);
        drafts.push(draft);
    }
    if t.changed {
        let payload = StateChangePayload {
            object: o.name.clone(),
            kind: o.kind,
            from: t.from,
            to: t.to,
            state_type: t.state_type,
            attempt: t.attempt,
            output: next.output.clone(),
            labels: e.labels.clone(),
            metric: next.perfdata.clone(),
            host: (o.kind == ObjectKind::Service).then(|| e.host.name.clone()),
        };
        let mut draft = EventDraft::new(
            o.tenant_id,
            EventType::StateChange,
            Some(severity(o.kind, t.to)),
            Payload::state_change(payload),
        );
        draft.object_id = Some(o.id);
        drafts.push(draft);
    }
    drafts
}

fn handled(s: &CheckState) -> bool {
    s.acked_by.is_some() || s.downtime_depth > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(state: u8) -> Observation {
        Observation {
            state,
            output: "x".into(),
            long_output: String::new(),
            perfdata: "v=1".into(),
            max_attempts: state::DEFAULT_MAX_ATTEMPTS,
            flap_thresholds: Some((25.0, 50.0)),
        }
    }

    /// A batch that carries one object twice steps the second result from the first's state,
    /// not from the stored one.
    #[test]
    fn an_object_twice_in_a_batch_steps_from_the_state_before_it() {
        let now: Timestamp = "2026-03-01T08:00:00.123Z".parse().unwrap();
        let (tenant, a, b) = (Uuid::from_u128(2), Uuid::from_u128(3), Uuid::from_u128(4));
        let (ok, _) = state::step(a, None, &observation(0), now);
        let items = [
            (tenant, a, observation(2)),
            (tenant, b, observation(2)),
            (tenant, a, observation(2)),
        ];
        let stepped = step_all(&items, vec![Some(ok.clone()), None, Some(ok)], now);
        let attempts: Vec<u32> = stepped.iter().map(|(s, _)| s.attempt).collect();
        assert_eq!(attempts[0] + 1, attempts[2], "{attempts:?}");
        assert_eq!(stepped[2].0.state, 2);
        assert!(stepped[0].1.is_some() && stepped[1].1.is_some());
    }

    /// A state change's payload, the fields rules, selectors and the event list read.
    #[test]
    fn a_state_change_reports_its_fields() {
        let at = Timestamp::from_millis(0).unwrap();
        let object = crate::model::object::Object {
            id: Uuid::from_u128(2),
            tenant_id: Uuid::from_u128(1),
            kind: ObjectKind::Service,
            name: "disk".into(),
            folder: "/".into(),
            host_id: Some(Uuid::from_u128(3)),
            labels: Default::default(),
            spec: Default::default(),
            created_at: at,
            updated_at: at,
            version: 1,
        };
        let entry = Entry {
            object,
            spec: Default::default(),
            config_error: None,
            host: crate::monitor::checks::HostInfo {
                name: "web1".into(),
                address: None,
            },
            parents: None,
            labels: [("env".to_string(), "prod".to_string())].into(),
        };
        let next: CheckState = serde_json::from_value(json!({
            "objectId": Uuid::from_u128(2), "state": 2, "stateType": "hard", "attempt": 1,
            "output": "DISK CRITICAL", "perfdata": "used=95%",
            "lastCheck": at, "lastChange": at,
        }))
        .unwrap();
        let t = Transition {
            from: Some(0),
            to: 2,
            state_type: StateType::Hard,
            attempt: 1,
            changed: true,
            flapping: None,
        };
        let drafts = report(&entry, &next, &t);
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].kind, EventType::StateChange);
        assert_eq!(drafts[0].object_id, Some(Uuid::from_u128(2)));
        assert_eq!(
            *drafts[0].payload,
            json!({
                "object": "disk", "kind": "service", "host": "web1",
                "fromState": 0, "toState": 2, "from": "OK", "to": "CRITICAL",
                "stateType": "hard", "attempt": 1, "output": "DISK CRITICAL",
                "labels": {"env": "prod"}, "metric": "used=95%",
            })
        );
    }

    #[test]
    fn state_mapping() {
        assert_eq!(map_state(ObjectKind::Service, &json!(2)), Some(2));
        assert_eq!(map_state(ObjectKind::Service, &json!("warn")), Some(1));
        assert_eq!(map_state(ObjectKind::Service, &json!(4)), None);
        assert_eq!(map_state(ObjectKind::Service, &json!("UNREACHABLE")), None);
        assert_eq!(
            map_state(ObjectKind::Host, &json!("DOWN")),
            Some(DOWN),
            "DOWN is down, not WARNING"
        );
        assert_eq!(map_state(ObjectKind::Host, &json!(1)), Some(DOWN));
        assert_eq!(map_state(ObjectKind::Host, &json!(2)), Some(UNREACHABLE));
        assert_eq!(map_state(ObjectKind::Host, &json!("WARNING")), Some(UP));
        assert_eq!(map_state(ObjectKind::Host, &json!("CRITICAL")), Some(DOWN));
        assert_eq!(map_state(ObjectKind::Host, &json!(true)), None);
    }

    #[test]
    fn output_split() {
        let (t, l, p) = split_output("DISK OK - 42% used | /=42%;80;90\nline two\nline three");
        assert_eq!(t, "DISK OK - 42% used");
        assert_eq!(p, "/=42%;80;90");
        assert_eq!(l, "line two\nline three");
    }
}
