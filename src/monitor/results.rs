//! Passive check results (CONTRACT 3): mapped to each object's state numbers, run through the
//! state machine in one transaction, reported as `state_change` events. Live state and the
//! problem list read from here too.

use crate::auth::Principal;
use crate::model::event::{EventDraft, EventType};
use crate::model::object::{Object, ObjectKind, resolve};
use crate::model::state::{
    self, CheckState, DOWN, Observation, StateType, Transition, UNREACHABLE, UP, badness, label,
    severity,
};
use crate::runtime::EventSink;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// Output of a stale object when its spec has no `stalenessText`.
pub const STALE_TEXT: &str = "UNKNOWN - check result is stale (freshness threshold exceeded)";
/// How often silent objects are looked for.
pub const STALENESS_SWEEP: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// The batch is refused whole; `.0` says which result and why.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultBatch {
    #[serde(default)]
    pub results: Vec<ResultItem>,
}

#[derive(Clone, Debug, Deserialize)]
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
pub struct Accepted {
    pub accepted: usize,
    /// `host` or `host/service` of each result naming no known object.
    pub rejected: Vec<String>,
}

/// One problem of `GET /api/v1/problems`.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    pub object: Object,
    pub state: CheckState,
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
pub(super) fn split_output(output: &str) -> (String, String, String) {
    let mut lines = output.lines();
    let first = lines.next().unwrap_or_default();
    let (text, perf) = match first.split_once('|') {
        Some((t, p)) => (t.trim().to_string(), p.trim().to_string()),
        None => (first.trim().to_string(), String::new()),
    };
    (text, lines.collect::<Vec<_>>().join("\n"), perf)
}

pub struct Results {
    store: Arc<Store>,
    clock: SharedClock,
    sink: Arc<dyn EventSink>,
}

impl Results {
    pub fn new(store: Arc<Store>, clock: SharedClock, sink: Arc<dyn EventSink>) -> Arc<Self> {
        Arc::new(Self { store, clock, sink })
    }

    /// Applies a batch of passive results: all of them or (on a malformed one) none.
    pub async fn submit(&self, p: &Principal, batch: ResultBatch) -> Result<Accepted, ResultError> {
        let names = batch
            .results
            .iter()
            .map(|r| (r.host.clone(), r.service.clone().filter(|s| !s.is_empty())))
            .collect();
        let objects = self.store.objects_by_name(p.tenant, names).await?;
        let templates = self.store.template_specs(p.tenant).await?;
        let mut items = Vec::new();
        let mut rejected = Vec::new();
        let mut targets = Vec::new();
        for (i, (r, object)) in batch.results.iter().zip(objects).enumerate() {
            let Some(o) = object else {
                rejected.push(match &r.service {
                    Some(s) if !s.is_empty() => format!("{}/{s}", r.host),
                    _ => r.host.clone(),
                });
                continue;
            };
            let state = map_state(o.kind, &r.state).ok_or_else(|| {
                ResultError::Invalid(format!(
                    "result {}: state {} is not a check state",
                    i + 1,
                    r.state
                ))
            })?;
            let spec = resolve(&o.spec, &|n: &str| templates.get(n).cloned())
                .map(|e| e.spec)
                .unwrap_or_else(|_| o.spec.clone());
            // Passive results are hard at once unless the object asks for attempts (Icinga).
            let max_attempts = spec.max_check_attempts.unwrap_or(1);
            let flap_thresholds = state::flap_thresholds(&spec);
            let (output, long_output, perfdata) = split_output(&r.output);
            items.push((
                o.id,
                Observation {
                    state,
                    output,
                    long_output,
                    perfdata,
                    max_attempts,
                    flap_thresholds,
                },
            ));
            targets.push(o);
        }
        let applied = self.apply(p.tenant, &targets, items).await?;
        Ok(Accepted {
            accepted: applied,
            rejected,
        })
    }

    /// Runs observations of `targets` through the state machine in one transaction and reports
    /// the transitions; returns how many were applied.
    pub async fn apply(
        &self,
        tenant: Uuid,
        targets: &[Object],
        mut items: Vec<(Uuid, Observation)>,
    ) -> Result<usize, StoreError> {
        self.derive_unreachable(tenant, targets, &mut items).await?;
        let now = self.clock.now();
        let applied = self
            .store
            .apply_observations(tenant, items, now, state::step)
            .await?;
        let hosts = self.host_names(tenant, targets).await?;
        for (o, (next, transition)) in targets.iter().zip(&applied) {
            if let Some(t) = transition {
                self.report(o, next, t, hosts.get(&o.host_id.unwrap_or(o.id)))
                    .await;
            }
        }
        Ok(applied.len())
    }

    /// A DOWN host all of whose parents are hard non-UP is UNREACHABLE instead. A parent's
    /// result earlier in the same batch counts over its stored state.
    async fn derive_unreachable(
        &self,
        tenant: Uuid,
        targets: &[Object],
        items: &mut [(Uuid, Observation)],
    ) -> Result<(), StoreError> {
        // Host name → (state, hard at once) as observed so far in this batch.
        let mut seen: HashMap<String, (u8, bool)> = HashMap::new();
        for (o, (_, obs)) in targets.iter().zip(items.iter_mut()) {
            let parents = o.spec.parents.clone().unwrap_or_default();
            if o.kind == ObjectKind::Host && obs.state == DOWN && !parents.is_empty() {
                let found = self
                    .store
                    .objects_by_name(tenant, parents.iter().map(|p| (p.clone(), None)).collect())
                    .await?;
                if found.iter().all(Option::is_some) {
                    let ids: Vec<Uuid> = found.iter().flatten().map(|h| h.id).collect();
                    let stored = self.store.states(tenant, ids.clone()).await?;
                    let down = |name: &String, id: &Uuid| match seen.get(name) {
                        Some((state, hard)) => *state != UP && *hard,
                        None => stored
                            .get(id)
                            .is_some_and(|s| s.state != UP && s.state_type == StateType::Hard),
                    };
                    if parents.iter().zip(&ids).all(|(n, id)| down(n, id)) {
                        obs.state = UNREACHABLE;
                    }
                }
            }
            if o.kind == ObjectKind::Host {
                seen.insert(o.name.clone(), (obs.state, obs.max_attempts <= 1));
            }
        }
        Ok(())
    }

    async fn host_names(
        &self,
        tenant: Uuid,
        objects: &[Object],
    ) -> Result<HashMap<Uuid, String>, StoreError> {
        let ids = objects.iter().filter_map(|o| o.host_id).collect();
        let mut names = self.store.host_names(tenant, ids).await?;
        for o in objects.iter().filter(|o| o.kind == ObjectKind::Host) {
            names.insert(o.id, o.name.clone());
        }
        Ok(names)
    }

    async fn report(&self, o: &Object, next: &CheckState, t: &Transition, host: Option<&String>) {
        if let Some(started) = t.flapping {
            let kind = if started {
                EventType::FlappingStart
            } else {
                EventType::FlappingEnd
            };
            let payload = json!({"object": o.name, "flapPct": next.flap_pct, "labels": o.labels});
            let mut draft = EventDraft::new(
                o.tenant_id,
                kind,
                Some(crate::model::event::Severity::Info),
                payload,
            );
            draft.object_id = Some(o.id);
            self.sink.emit(draft).await;
        }
        if !t.changed {
            return;
        }
        let kind = match o.kind {
            ObjectKind::Host => "host",
            ObjectKind::Service => "service",
        };
        let mut payload = json!({
            "object": o.name,
            "kind": kind,
            "fromState": t.from,
            "toState": t.to,
            "from": label(o.kind, t.from),
            "to": label(o.kind, Some(t.to)),
            "stateType": t.state_type,
            "attempt": t.attempt,
            "output": next.output,
            "labels": o.labels,
            "metric": next.perfdata,
        });
        if o.kind == ObjectKind::Service {
            payload["host"] = json!(host);
        }
        let mut draft = EventDraft::new(
            o.tenant_id,
            EventType::StateChange,
            Some(severity(o.kind, t.to)),
            payload,
        );
        draft.object_id = Some(o.id);
        self.sink.emit(draft).await;
    }

    /// Turns objects that have been silent for longer than their `stalenessAfter` UNKNOWN
    /// with their `stalenessText` (Nagios freshness). Not forced hard: with attempts it goes
    /// soft first. Returns how many objects went stale.
    pub async fn sweep_stale(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut stale_total = 0;
        for tenant in self.store.tenants().await? {
            let templates = self.store.template_specs(tenant.id).await?;
            let objects = self
                .store
                .objects(tenant.id, None, usize::MAX, |_| true)
                .await?;
            let states = self
                .store
                .states(tenant.id, objects.iter().map(|o| o.id).collect())
                .await?;
            let mut items = Vec::new();
            let mut targets = Vec::new();
            for o in objects {
                let spec = resolve(&o.spec, &|n: &str| templates.get(n).cloned())
                    .map(|e| e.spec)
                    .unwrap_or_else(|_| o.spec.clone());
                let Some(after) = spec.staleness_after.filter(|d| !d.0.is_zero()) else {
                    continue;
                };
                let last = states.get(&o.id).map_or(o.created_at, |s| s.last_check);
                if now.since(last) <= after.0 {
                    continue;
                }
                let output = spec
                    .staleness_text
                    .clone()
                    .unwrap_or_else(|| STALE_TEXT.to_string());
                let flap_thresholds = state::flap_thresholds(&spec);
                let max_attempts = spec
                    .max_check_attempts
                    .unwrap_or(state::DEFAULT_MAX_ATTEMPTS);
                items.push((
                    o.id,
                    Observation {
                        state: state::UNKNOWN,
                        output,
                        long_output: String::new(),
                        perfdata: String::new(),
                        max_attempts,
                        flap_thresholds,
                    },
                ));
                targets.push(o);
            }
            if items.is_empty() {
                continue;
            }
            stale_total += self.apply(tenant.id, &targets, items).await?;
        }
        Ok(stale_total)
    }

    /// The live states of these objects.
    pub async fn states(
        &self,
        p: &Principal,
        ids: Vec<Uuid>,
    ) -> Result<HashMap<Uuid, CheckState>, StoreError> {
        self.store.states(p.tenant, ids).await
    }

    /// Objects not OK/UP: unhandled before handled (acknowledged or in downtime, listed only
    /// with `include_handled`), then worst state first, then oldest hard change.
    pub async fn problems(
        &self,
        p: &Principal,
        include_handled: bool,
        limit: usize,
    ) -> Result<Vec<Problem>, StoreError> {
        let states: Vec<CheckState> = self
            .store
            .all_states(p.tenant)
            .await?
            .into_iter()
            .filter(|s| s.state != 0 && (include_handled || !handled(s)))
            .collect();
        let ids = states.iter().map(|s| s.object_id).collect::<Vec<_>>();
        let mut objects: HashMap<Uuid, Object> = HashMap::new();
        for id in ids {
            if let Ok(o) = self.store.object(p.tenant, id).await {
                objects.insert(id, o);
            }
        }
        let mut out: Vec<Problem> = states
            .into_iter()
            .filter_map(|s| {
                objects
                    .remove(&s.object_id)
                    .map(|object| Problem { object, state: s })
            })
            .collect();
        out.sort_by(|a, b| {
            (
                handled(&a.state),
                std::cmp::Reverse(badness(a.object.kind, a.state.state)),
                a.state.last_hard_change,
            )
                .cmp(&(
                    handled(&b.state),
                    std::cmp::Reverse(badness(b.object.kind, b.state.state)),
                    b.state.last_hard_change,
                ))
        });
        out.truncate(limit);
        Ok(out)
    }
}

fn handled(s: &CheckState) -> bool {
    s.acked_by.is_some() || s.downtime_depth > 0
}

/// Runs the staleness sweep every 5 s.
pub struct StalenessSweep(pub Arc<Results>);

impl Worker for StalenessSweep {
    fn name(&self) -> &'static str {
        "staleness-sweep"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if let Err(e) = self.0.sweep_stale().await {
                tracing::warn!(error = %e, "staleness sweep failed");
            }
            Wait::For(STALENESS_SWEEP)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
