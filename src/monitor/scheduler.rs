//! The active check scheduler: every object with a `checkCommand` (and `enableChecks` not
//! false) is checked every `interval` (default 60 s), first at a deterministic splay within the
//! interval (so a restart causes no check storm), after a soft problem again after
//! `retryInterval` (default 15 s), at most `checks.maxConcurrent` (configuration, default 32) at
//! once. `check-now` runs one at once. An object whose templates do not resolve is not checked:
//! at the same cadence it is given UNKNOWN with the configuration error as output.
//! The scheduler sleeps until its next due check; a catalog change, a check-now and a finished
//! check (a retry to schedule, a slot freed) wake it.

use super::catalog::{Catalog, Entry};
use super::checks::{self, Command};
use super::pipeline::Pipeline;
use super::results::Job;
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::config::{AgentCheck, AgentChecks, CheckRun, agent_plugin};
use crate::model::dependency::{Group, Holds, ParentState, failed};
use crate::model::identity::Actor;
use crate::model::object::ObjectKind;
use crate::model::state::{self, DOWN, SnmpInterface, StateType, UP};
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_RETRY: Duration = Duration::from_secs(15);
/// The longest the scheduler sleeps without a wake: a bound, should a wake ever be missed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

type Key = (Uuid, Uuid);

pub struct Scheduler {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    clock: SharedClock,
    pipeline: Arc<Pipeline>,
    runners: checks::Runners,
    due: Mutex<HashMap<Key, Timestamp>>,
    /// Objects a check-now asked for, with the catalog generation it was asked at: they run
    /// even outside their check period, and stay asked for until a catalog that new has them.
    forced: Mutex<HashMap<Key, u64>>,
    running: Mutex<HashSet<Key>>,
    slots: Arc<Semaphore>,
    wake: Arc<Notify>,
    /// Set where several processes serve one database: scheduled checks run in the leading one.
    lead: std::sync::OnceLock<Arc<crate::runtime::worker::Lead>>,
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

fn earlier(a: Option<Timestamp>, b: Timestamp) -> Option<Timestamp> {
    Some(a.map_or(b, |a| a.min(b)))
}

impl Scheduler {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<Catalog>,
        clock: SharedClock,
        pipeline: Arc<Pipeline>,
        runners: checks::Runners,
        max_running: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            catalog,
            clock,
            pipeline,
            runners,
            due: Mutex::new(HashMap::new()),
            forced: Mutex::new(HashMap::new()),
            running: Mutex::new(HashSet::new()),
            slots: Arc::new(Semaphore::new(max_running)),
            wake: Arc::new(Notify::new()),
            lead: std::sync::OnceLock::new(),
        })
    }

    /// A built-in check run once, ad hoc (`check-commands:test`): its outcome and how long it
    /// took.
    pub async fn test_builtin(
        &self,
        p: &Principal,
        actor: &Actor,
        name: &str,
        address: &str,
        args: &[String],
    ) -> Result<(checks::Outcome, std::time::Duration), StoreError> {
        self.audit_run(
            p,
            actor,
            "check-command.test",
            format!("check-commands/{name}"),
        )
        .await?;
        let started = crate::runtime::Stopwatch::start();
        let outcome =
            checks::run_builtin(name, address, args, &self.runners, self.clock.now()).await;
        Ok((outcome, started.elapsed()))
    }

    /// The interfaces of host `id`'s SNMP agent, asked with `args` (an `snmp` check's flags),
    /// for a service each (issue 74), with the host's name; the outer error is the store's or
    /// an unknown host, the inner one what the agent did instead of answering.
    pub async fn snmp_interfaces(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        args: &[String],
    ) -> Result<(String, Result<Vec<SnmpInterface>, String>), StoreError> {
        let snapshot = self.catalog.snapshot().await?;
        let entry = snapshot
            .tenant(p.tenant)
            .and_then(|c| c.get(id))
            .filter(|e| e.object.kind == ObjectKind::Host)
            .cloned()
            .ok_or(StoreError::NotFound)?;
        self.audit_run(p, actor, "host.snmp-interfaces", format!("objects/{id}"))
            .await?;
        let now = self.clock.now();
        let found = checks::snmp_interfaces(
            &entry.object,
            &entry.host,
            &entry.spec,
            args,
            &self.runners,
            now,
        )
        .await;
        Ok((entry.object.name.clone(), found))
    }

    /// Records who ran a check by hand (check-now, a check command's test): every run a
    /// person asks for is audited; the scheduled ones are the configuration's doing.
    async fn audit_run(
        &self,
        p: &Principal,
        actor: &Actor,
        action: &str,
        resource: String,
    ) -> Result<(), StoreError> {
        let audit = AuditDraft::new(self.clock.now(), p.tenant, actor, action, resource);
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await
    }

    /// The `agent:exec:` checks of host `host`'s services, for its agent to run: the plugin,
    /// its arguments with macros expanded (`$SECRET:name$` left for the agent), the interval
    /// and timeout. `None` when the tenant has no such host.
    pub async fn agent_checks(
        &self,
        tenant: Uuid,
        host: &str,
    ) -> Result<Option<AgentChecks>, StoreError> {
        let snapshot = self.catalog.snapshot().await?;
        let Some(catalog) = snapshot.tenant(tenant) else {
            return Ok(None);
        };
        let Some(h) = catalog.by_name(host, None) else {
            return Ok(None);
        };
        let mut checks = Vec::new();
        for entry in &catalog.entries {
            let spec = &entry.spec;
            let Some(plugin) = spec.check_command.as_deref().and_then(agent_plugin) else {
                continue;
            };
            if entry.object.host_id != Some(h.object.id) || spec.enable_checks == Some(false) {
                continue;
            }
            let args: Vec<String> = spec.args.iter().flatten().cloned().collect();
            let kept: HashMap<String, String> = checks::secret_names(&args)
                .into_iter()
                .map(|name| (name.clone(), format!("$SECRET:{name}$")))
                .collect();
            let secs = |d: Option<crate::model::GoDuration>, default: Duration| {
                d.map_or(default, |d| d.0).as_secs()
            };
            checks.push(AgentCheck {
                service: entry.object.name.clone(),
                command: plugin.to_string(),
                args: args
                    .iter()
                    .map(|a| checks::expand(a, &entry.object, &entry.host, spec, &kept))
                    .collect(),
                interval_seconds: secs(spec.interval, DEFAULT_INTERVAL),
                timeout_seconds: secs(spec.timeout, checks::DEFAULT_TIMEOUT),
            });
        }
        checks.sort_by(|a, b| a.service.cmp(&b.service));
        Ok(Some(AgentChecks {
            host: host.to_string(),
            checks,
        }))
    }

    /// `check-now`: runs the object's check as soon as possible, inside its check period or
    /// not; another tenant's object or an unknown one is `NotFound`.
    pub async fn check_now(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), StoreError> {
        let tenant = p.tenant;
        self.store.object(tenant, id).await?;
        self.audit_run(p, actor, "object.check-now", format!("objects/{id}"))
            .await?;
        let asked_at = self.store.catalog_generation();
        // Forced first: a tick ending in between keeps a due time only for a forced object.
        self.forced.locked().insert((tenant, id), asked_at);
        self.due.locked().insert((tenant, id), self.clock.now());
        self.wake.notify_one();
        Ok(())
    }

    /// Runs one check, feeds its result through the pipeline, and frees its slot.
    async fn check(
        self: Arc<Self>,
        entry: Arc<Entry>,
        command: Option<Command>,
        slot: OwnedSemaphorePermit,
    ) {
        let o = &entry.object;
        let spec = &entry.spec;
        let outcome = match (&entry.config_error, &command) {
            (Some(why), _) => checks::Outcome {
                code: 3,
                output: format!("UNKNOWN - configuration error: {why}"),
            },
            (None, Some(c)) => {
                let now = self.clock.now();
                checks::run(c, o, &entry.host, spec, &self.runners, now).await
            }
            (None, None) => checks::Outcome {
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
        let key = (o.tenant_id, o.id);
        let job = Job::new(
            entry.clone(),
            state,
            &outcome.output,
            state::DEFAULT_MAX_ATTEMPTS,
        );
        match self.pipeline.submit(vec![job]).await {
            // After a soft problem, look again sooner.
            Ok(states) => {
                if states
                    .first()
                    .is_some_and(|s| s.state != 0 && s.state_type == StateType::Soft)
                {
                    let retry = spec.retry_interval.map_or(DEFAULT_RETRY, |r| r.0);
                    self.due.locked().insert(key, self.clock.now().plus(retry));
                }
            }
            Err(e) => tracing::warn!(object = %o.id, error = %e, "check result not applied"),
        }
        // Slot and object are free before the scheduler is woken to use them.
        drop(slot);
        self.running.locked().remove(&key);
        self.wake.notify_one();
    }

    /// Runs the scheduled checks only while `lead` is taken (several processes on one
    /// database); the checks asked for with `check_now` run wherever they were asked.
    pub fn run_while_leading(&self, lead: Arc<crate::runtime::worker::Lead>) {
        let _ = self.lead.set(lead);
    }

    fn leads(&self) -> bool {
        self.lead.get().is_none_or(|l| l.is_taken())
    }

    /// The waker of the scheduler's worker, for whoever changes what is due.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Whether a failed dependency with `effect: checks` pauses an object's active checks (as
    /// a check outside its period, the run is skipped and the cadence kept).
    async fn paused(
        &self,
        tenant: Uuid,
        groups: Option<&Arc<[Group]>>,
    ) -> Result<bool, StoreError> {
        let Some(groups) = groups.filter(|g| g.iter().any(|g| g.holds(Holds::Checks))) else {
            return Ok(false);
        };
        let parents: Vec<Uuid> = groups
            .iter()
            .flat_map(|g| g.members.iter().map(|m| m.object))
            .collect();
        let states: HashMap<Uuid, ParentState> = self
            .store
            .states(tenant, parents)
            .await?
            .states
            .into_iter()
            .map(|s| (s.object_id, ParentState::of(&s)))
            .collect();
        Ok(failed(groups, Holds::Checks, &|p| states.get(&p).copied()).is_some())
    }

    /// Starts every check that is due; returns when the next one is due (none: nothing to
    /// check until woken). Running checks and checks waiting for a slot are not counted: their
    /// end wakes the scheduler.
    pub async fn tick(self: &Arc<Self>) -> Result<Option<Timestamp>, StoreError> {
        let now = self.clock.now();
        let snapshot = self.catalog.snapshot().await?;
        let mut next_due: Option<Timestamp> = None;
        let mut live = HashSet::new();
        for (tenant, catalog) in snapshot.tenants() {
            for entry in &catalog.entries {
                let spec = &entry.spec;
                // A configuration error is reported as the object's UNKNOWN by a run here.
                let runs = match spec.check_run() {
                    CheckRun::Here => true,
                    CheckRun::Passive => {
                        entry.config_error.is_some() && spec.enable_checks != Some(false)
                    }
                    CheckRun::Agent | CheckRun::Off => false,
                };
                if !runs {
                    continue;
                }
                let name = spec.check_command.as_deref().filter(|c| !c.is_empty());
                let key = (*tenant, entry.object.id);
                live.insert(key);
                // Beside the leading process, only the checks asked for here run.
                if !self.leads() && !self.forced.locked().contains_key(&key) {
                    continue;
                }
                let interval = spec
                    .interval
                    .map(|i| i.0)
                    .filter(|i| !i.is_zero())
                    .unwrap_or(DEFAULT_INTERVAL);
                let due = *self
                    .due
                    .locked()
                    .entry(key)
                    .or_insert_with(|| first_due(now, entry.object.id, interval));
                if self.running.locked().contains(&key) {
                    continue;
                }
                if due > now {
                    next_due = earlier(next_due, due);
                    continue;
                }
                let forced = self.forced.locked().contains_key(&key);
                let in_period = catalog.in_period(spec.check_period.as_deref(), now)
                    && !self
                        .paused(*tenant, catalog.dependencies(entry.object.id))
                        .await?;
                let slot = if in_period || forced {
                    match self.slots.clone().try_acquire_owned() {
                        Ok(slot) => Some(slot),
                        // All slots busy: it stays due (and known) for the next tick.
                        Err(_) => continue,
                    }
                } else {
                    None
                };
                // Drift-free: the next run is one interval after this one was due. Outside the
                // check period the run is skipped and the cadence kept.
                let next = if now.since(due) > interval {
                    now.plus(interval)
                } else {
                    due.plus(interval)
                };
                self.due.locked().insert(key, next);
                let Some(slot) = slot else {
                    next_due = earlier(next_due, next);
                    continue;
                };
                self.forced.locked().remove(&key);
                self.running.locked().insert(key);
                let command = name.and_then(|n| catalog.command(n));
                let me = self.clone();
                let entry = entry.clone();
                tokio::spawn(me.check(entry, command, slot));
            }
        }
        // Forget objects that were deleted or lost their check. A check-now asked for after this
        // snapshot was loaded may name an object it does not have yet (one just created): it
        // stays until a snapshot that new has seen it.
        let seen = snapshot.generation();
        let mut forced = self.forced.locked();
        forced.retain(|k, asked_at| live.contains(k) || *asked_at > seen);
        self.due
            .locked()
            .retain(|k, _| live.contains(k) || forced.contains_key(k));
        Ok(next_due)
    }
}

/// Runs the scheduler when its next check is due, or at once when woken.
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
            match self.0.tick().await {
                Ok(next) => {
                    let now = self.0.clock.now();
                    Wait::For(next.map_or(MAX_SLEEP, |at| {
                        at.since(now).clamp(Duration::ZERO, MAX_SLEEP)
                    }))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler tick failed");
                    Wait::For(Duration::from_secs(1))
                }
            }
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
