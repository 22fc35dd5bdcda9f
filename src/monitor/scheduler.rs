//! The active check scheduler: every object with a `checkCommand` (and `enableChecks` not
//! false) is checked every `interval` (default 60 s), first at a deterministic splay within the
//! interval (so a restart causes no check storm), after a soft problem again after
//! `retryInterval` (default 15 s), at most `MAX_RUNNING` at once. `check-now` runs one at once.

use super::checks::{self, Command, HostInfo, Outcome};
use super::results::Results;
use crate::model::Timestamp;
use crate::model::config::{BUILTIN_CHECKS, ObjectSpec};
use crate::model::object::{Object, ObjectKind, resolve};
use crate::model::state::{self, DOWN, Observation, StateType, UP};
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_RETRY: Duration = Duration::from_secs(15);
/// Checks running at once.
pub const MAX_RUNNING: usize = 32;
const TICK: Duration = Duration::from_secs(1);

type Key = (Uuid, Uuid);

pub struct Scheduler {
    store: Arc<Store>,
    clock: SharedClock,
    results: Arc<Results>,
    due: Mutex<HashMap<Key, Timestamp>>,
    running: Mutex<HashSet<Key>>,
    slots: Arc<Semaphore>,
    wake: Arc<Notify>,
}

/// A stable offset within the interval from the object id (FNV-1a), so first runs spread out
/// and land on the same offset after every restart.
fn splay(id: Uuid, interval: Duration) -> Duration {
    let hash = id.as_bytes().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    let ms = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Duration::from_millis(hash % ms)
}

/// The first due time: the start of the current interval plus the object's splay.
fn first_due(now: Timestamp, id: Uuid, interval: Duration) -> Timestamp {
    let ms = i64::try_from(interval.as_millis())
        .unwrap_or(i64::MAX)
        .max(1);
    let start =
        Timestamp::from_millis(now.as_millis() - now.as_millis().rem_euclid(ms)).unwrap_or(now);
    start.plus(splay(id, interval))
}

impl Scheduler {
    pub fn new(store: Arc<Store>, clock: SharedClock, results: Arc<Results>) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            results,
            due: Mutex::new(HashMap::new()),
            running: Mutex::new(HashSet::new()),
            slots: Arc::new(Semaphore::new(MAX_RUNNING)),
            wake: Arc::new(Notify::new()),
        })
    }

    /// `check-now`: runs the object's check as soon as possible; another tenant's object or
    /// an unknown one is `NotFound`.
    pub async fn check_now(&self, tenant: Uuid, id: Uuid) -> Result<(), StoreError> {
        self.store.object(tenant, id).await?;
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((tenant, id), self.clock.now());
        self.wake.notify_one();
        Ok(())
    }

    /// The command a spec names: a built-in check, or a `check-commands` document.
    async fn command(&self, tenant: Uuid, name: &str) -> Result<Option<Command>, StoreError> {
        if BUILTIN_CHECKS.contains(&name) {
            return Ok(Some(Command::Builtin(name.to_string())));
        }
        let doc = match self
            .store
            .doc(tenant, "check-commands", name.to_string(), false)
            .await
        {
            Ok(d) => d.to_json(),
            Err(StoreError::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        let line: Vec<String> = serde_json::from_value(doc["line"].clone()).unwrap_or_default();
        Ok(Some(if doc["type"] == "builtin" {
            Command::Builtin(line.first().cloned().unwrap_or_default())
        } else {
            let timeout = doc["timeout"]
                .as_str()
                .and_then(|t| t.parse::<crate::model::GoDuration>().ok())
                .map(|d| d.0);
            Command::Plugin { line, timeout }
        }))
    }

    /// Runs one check and feeds its result through the state machine.
    async fn check(
        self: Arc<Self>,
        o: Object,
        host: HostInfo,
        spec: ObjectSpec,
        command: Option<Command>,
    ) {
        let outcome = match &command {
            Some(c) => checks::run(c, &o, &host, &spec).await,
            None => Outcome {
                code: 3,
                output: format!(
                    "UNKNOWN - no check command {:?}",
                    spec.check_command.clone().unwrap_or_default()
                ),
            },
        };
        let state = match o.kind {
            ObjectKind::Service => outcome.code,
            ObjectKind::Host if outcome.code <= 1 => UP,
            ObjectKind::Host => DOWN,
        };
        let (output, long_output, perfdata) = super::results::split_output(&outcome.output);
        let obs = Observation {
            state,
            output,
            long_output,
            perfdata,
            max_attempts: spec
                .max_check_attempts
                .unwrap_or(state::DEFAULT_MAX_ATTEMPTS),
            flap_thresholds: state::flap_thresholds(&spec),
        };
        let key = (o.tenant_id, o.id);
        let tenant = o.tenant_id;
        if let Err(e) = self
            .results
            .apply(tenant, std::slice::from_ref(&o), vec![(o.id, obs)])
            .await
        {
            tracing::warn!(object = %o.id, error = %e, "check result not applied");
        }
        // After a soft problem, look again sooner.
        if let Ok(states) = self.store.states(tenant, vec![o.id]).await {
            if states
                .get(&o.id)
                .is_some_and(|s| s.state != 0 && s.state_type == StateType::Soft)
            {
                let retry = spec.retry_interval.map_or(DEFAULT_RETRY, |r| r.0);
                self.due
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, self.clock.now().plus(retry));
            }
        }
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Starts every check that is due; returns how many started.
    pub async fn tick(self: &Arc<Self>) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut started = 0;
        let mut live = HashSet::new();
        for tenant in self.store.tenants().await? {
            let templates = self.store.template_specs(tenant.id).await?;
            let objects = self
                .store
                .objects(tenant.id, None, usize::MAX, |_| true)
                .await?;
            let hosts: HashMap<Uuid, HostInfo> = objects
                .iter()
                .filter(|o| o.kind == ObjectKind::Host)
                .map(|o| {
                    (
                        o.id,
                        HostInfo {
                            name: o.name.clone(),
                            address: o.spec.address.clone(),
                        },
                    )
                })
                .collect();
            for o in objects {
                let spec = resolve(&o.spec, &|n: &str| templates.get(n).cloned())
                    .map(|e| e.spec)
                    .unwrap_or_else(|_| o.spec.clone());
                let Some(name) = spec.check_command.clone().filter(|c| !c.is_empty()) else {
                    continue;
                };
                if spec.enable_checks == Some(false) {
                    continue;
                }
                let key = (tenant.id, o.id);
                live.insert(key);
                let interval = spec
                    .interval
                    .map(|i| i.0)
                    .filter(|i| !i.is_zero())
                    .unwrap_or(DEFAULT_INTERVAL);
                let due = *self
                    .due
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key)
                    .or_insert_with(|| first_due(now, o.id, interval));
                if due > now
                    || self
                        .running
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains(&key)
                {
                    continue;
                }
                let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                    break;
                };
                // Drift-free: the next run is one interval after this one was due.
                let next = if now.since(due) > interval {
                    now.plus(interval)
                } else {
                    due.plus(interval)
                };
                self.due
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, next);
                self.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key);
                let command = self.command(tenant.id, &name).await?;
                let host = match o.host_id {
                    Some(h) => hosts.get(&h).cloned().unwrap_or_default(),
                    None => HostInfo {
                        name: o.name.clone(),
                        address: o.spec.address.clone(),
                    },
                };
                let me = self.clone();
                tokio::spawn(async move {
                    me.check(o, host, spec, command).await;
                    drop(slot);
                });
                started += 1;
            }
        }
        // Forget objects that were deleted or lost their check.
        self.due
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| live.contains(k));
        Ok(started)
    }
}

/// Ticks the scheduler every second, or at once after a check-now.
pub struct SchedulerWorker(pub Arc<Scheduler>);

impl Worker for SchedulerWorker {
    fn name(&self) -> &'static str {
        "check-scheduler"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.0.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if let Err(e) = self.0.tick().await {
                tracing::warn!(error = %e, "scheduler tick failed");
            }
            Wait::For(TICK)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splay_is_stable_and_within_the_interval() {
        let id = Uuid::from_u128(42);
        let i = Duration::from_secs(60);
        assert_eq!(splay(id, i), splay(id, i));
        assert!(splay(id, i) < i);
        let spread: HashSet<u64> = (0..100u128)
            .map(|n| splay(Uuid::from_u128(n * 7919), i).as_secs())
            .collect();
        assert!(spread.len() > 30, "ids spread over the interval");
        let now: Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let due = first_due(now, id, i);
        assert!(
            due >= "2026-01-01T00:00:00Z".parse().unwrap()
                && due < "2026-01-01T00:01:00Z".parse().unwrap()
        );
    }
}
