//! The alert engine: a durable consumer (`alert-engine`) that runs every enabled alert rule of
//! an event's tenant over each event that reaches rules, and commits what they decided (alerts
//! opened, refreshed or resolved, with their lifecycle events) together with its position, so
//! a restart or kill -9 neither loses nor repeats a decision. A batch that decided nothing
//! moves the position in memory only, saved within `SAVE_POSITION_WITHIN` (see there).
//!
//! The next batch is read and its rules run while the last batch's decisions commit (one
//! commit in flight, `Committing`): the rules' thread and the store's writer work at once.
//! No other write of the engine goes before that commit has settled, and if it fails, the
//! batch decided meanwhile is dropped and everything after the saved position read again.
//! While the engine is behind (a full batch read), its commits are answered once committed
//! and share the store's next sync; the batch that catches it up is answered once durable.
//!
//! Where several processes serve one database (PostgreSQL), each process's engine decides the
//! partitions of the event stream it leads (`store::partitions`: by tenant and object, each
//! with its own position, fenced at the generation it was taken at): it reads the journal
//! once, passes over the events of other partitions, and reads again from its partitions'
//! saved positions whenever the partitions it leads change.

use super::Alerting;
use super::evaluator::{Evaluator, Overrun, Work};
use super::lifecycle::AlertMatch;
use super::rules::{CompiledRule, RuleSet, compile, reaches_rules};
use crate::events::{Consumer, Events};
use crate::model::cel::on_cel_stack;
use crate::model::event::{Event, EventDraft, EventType, Severity, id_millis};
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{Intake, Metrics, Stopwatch};
use crate::store::{Holding, Promise, Store, StoreError};
use crate::store::{TxResult, Wrote};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;
use uuid::Uuid;

pub const CONSUMER: &str = "alert-engine";
/// Events read and decided per transaction.
const BATCH: usize = 1024;
/// The same where other processes serve the database (PostgreSQL), counted in the events of
/// the partitions a process leads: each decision's reads are round trips there, and a
/// transaction holds every process's writers for its whole length, so a shorter one lets
/// results and requests in between.
const SHARED_BATCH: usize = 256;
/// The position past batches that decided nothing is saved at most this long after the first
/// of them: with the next decision, once this long has passed under load, or once no event
/// came for this long. A burst of state changes no rule wants then costs no sync per batch;
/// a crash reads at most this much of them again, deciding nothing again (the rules are the
/// same: a change of the catalog saves the position before the next batch is decided).
const SAVE_POSITION_WITHIN: Duration = Duration::from_secs(1);
/// While a burst of results is being taken in (`runtime::intake`), the engine decides its next
/// batch once the burst is over, or once the batch's first event is this old: the burst has
/// the cores and the writer first, and the rules decide it right after. Under a steady burst
/// the engine keeps about this far behind and decides as much as without the wait; results
/// taken in now and then are decided at once.
const YIELD_TO_INTAKE: Duration = Duration::from_millis(500);

/// A position moved past batches that decided nothing, not saved yet.
struct Unsaved {
    through: Uuid,
    since: Stopwatch,
    /// The catalog generation of the rules the batches were decided under.
    generation: u64,
}

/// A batch's decisions committing, and the last event they are for.
struct Committing {
    commit: tokio::task::JoinHandle<Result<(), StoreError>>,
    through: Uuid,
}

/// Where a rule's skip is kept, by rule name, in its tenant's settings.
const SKIPPED: &str = "alerting.skipped.";

/// A rule skipped until `until`, as it was when it was skipped (`digest`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Skipped {
    rule: String,
    digest: String,
    until: crate::model::Timestamp,
}

/// What a rule is, as a short hash of its document: a skip holds only while it is the same.
fn rule_digest(rule: &CompiledRule) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(&rule.rule).unwrap_or_default();
    crate::model::audit::hex(&Sha256::digest(text.as_bytes())[..12])
}

pub struct AlertEngine {
    alerting: Arc<Alerting>,
    store: Arc<Store>,
    events: Arc<Events>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    consumer: Option<Consumer>,
    /// Compiled rules per tenant, for the catalog generation they were compiled at.
    rules: HashMap<Uuid, Arc<RuleSet>>,
    generation: u64,
    evaluator: Evaluator,
    unsaved: Option<Unsaved>,
    committing: Option<Committing>,
    /// The partitions this process leads, as they change.
    held: watch::Receiver<Arc<Holding>>,
    /// The partitions the open consumer reads for, and where each stood when it opened: an
    /// event at or before its partition's position was decided already.
    holding: Arc<Holding>,
    positions: BTreeMap<u16, Uuid>,
    intake: Arc<Intake>,
}

impl AlertEngine {
    pub fn new(
        alerting: Arc<Alerting>,
        store: Arc<Store>,
        events: Arc<Events>,
        clock: SharedClock,
        metrics: Arc<Metrics>,
        held: watch::Receiver<Arc<Holding>>,
        intake: Arc<Intake>,
    ) -> Self {
        Self {
            alerting,
            store,
            events,
            clock,
            metrics,
            consumer: None,
            rules: HashMap::new(),
            generation: 0,
            evaluator: Evaluator::new(),
            unsaved: None,
            committing: None,
            held,
            holding: Arc::new(Holding::whole(CONSUMER)),
            positions: BTreeMap::new(),
            intake,
        }
    }

    /// The tenant's compiled rules, compiled again after any catalog change.
    async fn rules_of(&mut self, tenant: Uuid) -> Result<Arc<RuleSet>, StoreError> {
        let generation = self.store.catalog_generation();
        if generation != self.generation {
            self.rules.clear();
            self.evaluator.rules_changed();
            self.generation = generation;
        }
        if let Some(r) = self.rules.get(&tenant) {
            return Ok(r.clone());
        }
        let docs: Vec<(String, String)> = self
            .store
            .docs(tenant, "alert-rules", None, usize::MAX, |_| true)
            .await?
            .into_iter()
            .map(|d| (d.name, d.body))
            .collect();
        let Some(compiled) = on_cel_stack(|| compile(docs)) else {
            // Not kept: the next batch compiles again rather than run without rules for good.
            crate::model::fault::internal("alert rules", "compiling the tenant's rules failed");
            return Err(StoreError::Internal(
                "alert rules could not be compiled".into(),
            ));
        };
        let compiled = Arc::new(compiled);
        self.restore_skips(tenant, &compiled).await?;
        self.rules.insert(tenant, compiled.clone());
        Ok(compiled)
    }

    /// The skips kept for the tenant's rules (`report`) still due and for a rule as it was
    /// then: a restart does not run again a rule that took the budget, until its skip ends or
    /// the rule changes.
    async fn restore_skips(
        &mut self,
        tenant: Uuid,
        rules: &[CompiledRule],
    ) -> Result<(), StoreError> {
        let now = self.clock.now();
        for kept in self.store.settings_under(tenant, SKIPPED.into()).await? {
            let Ok(kept) = serde_json::from_value::<Skipped>(kept) else {
                continue;
            };
            let same = rules
                .iter()
                .any(|r| r.name == kept.rule && rule_digest(r) == kept.digest);
            if same && kept.until > now {
                self.evaluator.skip(tenant, kept.rule, kept.until);
            }
        }
        Ok(())
    }

    /// Opens the consumer at the first position of the partitions led now; waits while this
    /// process leads none.
    async fn open(&mut self) -> Result<(), StoreError> {
        let holding = self.held.borrow_and_update().clone();
        if holding.is_empty() {
            return self
                .held
                .changed()
                .await
                .map_err(|_| StoreError::Internal("the partitions' thread ended".into()));
        }
        let positions = self.store.held_positions(holding.clone()).await?;
        let Some(from) = positions.values().min().copied() else {
            return Ok(());
        };
        self.consumer = Some(Consumer::open_at(
            CONSUMER,
            self.events.clone(),
            self.store.clone(),
            from,
        ));
        self.holding = holding;
        self.positions = positions;
        Ok(())
    }

    /// The partitions led changed: what is in flight commits (or is refused, once the
    /// partition's next holder took it), what passed is saved, and the consumer opens again.
    async fn let_go(&mut self) -> Result<(), StoreError> {
        let settled = self.save_position().await;
        self.consumer = None;
        self.unsaved = None;
        if let Err(e) = settled {
            tracing::info!(error = %e, "the alert engine's partitions moved before its last work was saved; their next holder decides it");
        }
        Ok(())
    }

    /// Whether this process decides `event`: it leads its partition, past where that stood.
    fn decides(&self, event: &Event) -> bool {
        let partition = self.holding.partition_of(event.tenant_id, event.object_id);
        self.positions
            .get(&partition)
            .is_some_and(|at| event.id > *at)
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        if self.consumer.is_none() {
            self.open().await?;
        }
        let save_in = self
            .unsaved
            .as_ref()
            .map(|u| SAVE_POSITION_WITHIN.saturating_sub(u.since.elapsed()));
        let batch_size = self.batch_size();
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        let committing = &mut self.committing;
        let held = &mut self.held;
        let committed = async {
            match committing.as_mut() {
                Some(c) => (&mut c.commit).await,
                None => std::future::pending().await,
            }
        };
        let save_due = async {
            match save_in {
                Some(left) => tokio::time::sleep(left).await,
                None => std::future::pending().await,
            }
        };
        // Reading is cancel-safe: it moves nothing past the position.
        let batch = tokio::select! {
            done = committed => return self.settled(done),
            () = save_due => return self.save_position().await,
            // Only while partitions can move: a whole stream's sender is gone.
            Ok(()) = held.changed() => return self.let_go().await,
            batch = consumer.next(batch_size) => batch?,
        };
        let (Some(first), Some(through)) =
            (batch.first().map(|e| e.id), batch.last().map(|e| e.id))
        else {
            return Ok(());
        };
        let span = consumer.batch_span(&batch);
        self.yield_to_intake(first).await;
        self.decide_batch(batch, through).instrument(span).await
    }

    /// Waits while a burst of results is being taken in, for as long as the batch's first
    /// event (`first`) is younger than `YIELD_TO_INTAKE`.
    async fn yield_to_intake(&self, first: Uuid) {
        if !self.intake.bursting() {
            return;
        }
        let age = id_millis(&first).map_or(i64::MAX, |at| self.clock.now().as_millis() - at);
        let left = YIELD_TO_INTAKE.saturating_sub(Duration::from_millis(
            u64::try_from(age).unwrap_or_default(),
        ));
        if !left.is_zero() {
            self.intake.quiet(left).await;
        }
    }

    /// Events read per transaction: as many as hold a batch of this process's partitions'
    /// events, so a process leading a few partitions commits as many decisions at a time as
    /// one leading all.
    fn batch_size(&self) -> usize {
        let held = self.holding.partitions().count().max(1);
        if self.store.is_shared() {
            SHARED_BATCH * usize::from(self.holding.count()) / held
        } else {
            BATCH
        }
    }

    /// Waits for the decisions in flight to commit (see `settled`).
    async fn settle(&mut self) -> Result<(), StoreError> {
        match self.committing.as_mut() {
            Some(c) => {
                let done = (&mut c.commit).await;
                self.settled(done)
            }
            None => Ok(()),
        }
    }

    /// The decisions in flight committed (the position is told) or failed.
    fn settled(
        &mut self,
        done: Result<Result<(), StoreError>, tokio::task::JoinError>,
    ) -> Result<(), StoreError> {
        let Some(c) = self.committing.take() else {
            return Ok(());
        };
        done.map_err(|e| StoreError::Internal(format!("the alert engine's commit: {e}")))??;
        if let Some(consumer) = self.consumer.as_mut() {
            consumer.advance(c.through);
        }
        Ok(())
    }

    /// Saves the position past the batches that decided nothing.
    async fn save_position(&mut self) -> Result<(), StoreError> {
        self.settle().await?;
        let (Some(unsaved), Some(consumer)) = (self.unsaved.as_ref(), self.consumer.as_mut())
        else {
            return Ok(());
        };
        self.store
            .save_held_positions(self.holding.clone(), unsaved.through)
            .await?;
        consumer.advance(unsaved.through);
        self.unsaved = None;
        Ok(())
    }

    /// Decides a batch read through `through` and commits the decisions with the position.
    async fn decide_batch(
        &mut self,
        batch: Vec<Arc<Event>>,
        through: Uuid,
    ) -> Result<(), StoreError> {
        let behind = batch.len() >= self.batch_size();
        if self
            .unsaved
            .as_ref()
            .is_some_and(|u| u.generation != self.store.catalog_generation())
        {
            self.save_position().await?;
        }
        if batch
            .iter()
            .any(|e| e.kind == EventType::StateChange && e.severity == Some(Severity::Ok))
        {
            self.alerting.recovered();
        }
        // The rules of the batch's tenants, then every event decided under the budgets.
        let mine: Vec<&Arc<Event>> = batch
            .iter()
            .filter(|e| reaches_rules(e) && self.decides(e))
            .collect();
        let mut work = Vec::new();
        for event in mine {
            let rules = self.rules_of(event.tenant_id).await?;
            if !rules.is_empty() {
                work.push(Work {
                    rules,
                    event: event.clone(),
                });
            }
        }
        let clock = self.clock.clone();
        let decided = self
            .evaluator
            .decide(work, Arc::new(move || clock.new_id()), self.clock.now())
            .await;
        self.report(decided.overruns).await;
        let decided = decided.matches;
        if decided.is_empty() {
            return self.pass(through).await;
        }
        // Silences and downtimes matter only to the tenants with an alert to open.
        let tenants: HashSet<Uuid> = decided
            .iter()
            .filter_map(|m| match m {
                AlertMatch::Fire { alert, .. } => Some(alert.tenant_id),
                _ => None,
            })
            .collect();
        let suppressors = self.alerting.suppressors(tenants).await?;
        self.settle().await?;
        let promise = if behind {
            Promise::Committed
        } else {
            Promise::Durable
        };
        let (store, now, storm) = (self.store.clone(), self.clock.now(), self.alerting.storm());
        let holding = self.holding.clone();
        let commit = tokio::spawn(
            async move {
                super::lifecycle::apply_matches(
                    &store,
                    holding,
                    through,
                    decided,
                    now,
                    storm,
                    suppressors,
                    promise,
                )
                .await
            }
            .in_current_span(),
        );
        self.committing = Some(Committing { commit, through });
        self.unsaved = None;
        if let Some(consumer) = self.consumer.as_mut() {
            consumer.read_past(through);
        }
        Ok(())
    }

    /// Moves the position past a batch that decided nothing, saving it once due.
    async fn pass(&mut self, through: Uuid) -> Result<(), StoreError> {
        // The position told is past work committed, so past the batch in flight too.
        self.settle().await?;
        let generation = self.generation;
        let unsaved = self.unsaved.get_or_insert_with(|| Unsaved {
            through,
            since: Stopwatch::start(),
            generation,
        });
        unsaved.through = through;
        let due = unsaved.since.elapsed() >= SAVE_POSITION_WITHIN;
        if let Some(consumer) = self.consumer.as_mut() {
            consumer.advance(through);
        }
        if due {
            self.save_position().await?;
        }
        Ok(())
    }
}

impl AlertEngine {
    /// Says that rules ran over their budget: a `system` event in the rule's tenant each, and
    /// the `np_alert_rule_overruns` counter.
    /// The skip is kept with the event (a setting per rule), so it outlives a restart.
    async fn report(&self, overruns: Vec<Overrun>) {
        if overruns.is_empty() {
            return;
        }
        let minutes = super::evaluator::QUARANTINE.as_secs() / 60;
        let until = self.clock.now().plus(super::evaluator::QUARANTINE);
        let mut skips = Vec::new();
        let drafts = overruns
            .iter()
            .map(|o| {
                self.metrics.rule_overruns.inc();
                let what = match &o.bound {
                    Some(bound) => format!("was not run on event {}: it {bound}", o.event),
                    None => format!(
                        "ran past its {:?} evaluation budget on event {}",
                        o.budget, o.event
                    ),
                };
                if let Some(rule) = self
                    .rules
                    .get(&o.tenant)
                    .and_then(|rules| rules.iter().find(|r| r.name == o.rule))
                {
                    let kept = Skipped {
                        rule: o.rule.clone(),
                        digest: rule_digest(rule),
                        until,
                    };
                    skips.push((o.tenant, format!("{SKIPPED}{}", o.rule), kept));
                }
                EventDraft::new(
                    o.tenant,
                    EventType::System,
                    Some(Severity::Warning),
                    serde_json::json!({
                        "summary": format!(
                            "alert rule {:?} {what}; it is skipped for {minutes} minutes or until it changes",
                            o.rule
                        ),
                        "rule": o.rule,
                        "eventId": o.event,
                        "budgetMs": o.budget.as_millis() as u64,
                        "overCost": o.bound.is_some(),
                    }),
                )
            })
            .collect();
        let kept = self
            .store
            .transact(move |tx| -> TxResult<_> {
                for (tenant, key, skip) in &skips {
                    let value = serde_json::to_value(skip)
                        .map_err(|e| StoreError::Internal(e.to_string()))?;
                    tx.put_setting(*tenant, key, Some(&value))?;
                }
                tx.journal(drafts)?;
                Ok(Wrote::Changed(()))
            })
            .await;
        if let Err(e) = kept {
            tracing::warn!(error = %e, "could not record rule overruns");
        }
    }
}

impl Worker for AlertEngine {
    fn name(&self) -> &'static str {
        "alert-engine"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run_once().await {
                Ok(()) => Wait::For(Duration::ZERO),
                Err(e) => {
                    // Refused: a partition moved to another process; read on at once.
                    let moved = matches!(e, StoreError::Conflict(_));
                    if !moved {
                        tracing::warn!(error = %e, "alert engine step failed; retrying");
                    }
                    // Read again from the committed position, once the commit in flight
                    // has ended either way: what was decided or passed after it is decided
                    // again.
                    if let Some(c) = self.committing.take() {
                        let _ = c.commit.await;
                    }
                    self.consumer = None;
                    self.unsaved = None;
                    Wait::For(if moved {
                        Duration::ZERO
                    } else {
                        Duration::from_secs(1)
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::incident::Storm;
    use crate::runtime::SystemClock;
    use crate::runtime::dependencies::NoDependencies;
    use crate::store::events::EventStore;

    fn state_change(tenant: Uuid) -> EventDraft {
        EventDraft::new(
            tenant,
            EventType::StateChange,
            Some(Severity::Critical),
            serde_json::json!({"toState": 2}),
        )
    }

    /// A store with its events and an engine over them, in `dir`.
    fn engine_in(dir: &std::path::Path) -> (Arc<Store>, AlertEngine) {
        let clock: SharedClock = Arc::new(SystemClock);
        let store = Store::open(dir, clock.clone()).unwrap();
        let metrics = Arc::new(Metrics::new());
        let events = Events::new(
            EventStore::open(dir).unwrap(),
            clock.clone(),
            metrics.clone(),
        );
        store.file_with(events.clone(), tokio::runtime::Handle::current());
        let storm = Storm {
            threshold: 100,
            window: Duration::from_secs(60),
        };
        let alerting = Alerting::new(
            store.clone(),
            clock.clone(),
            events.clone(),
            crate::alerting::Noise {
                storm,
                instance: Default::default(),
            },
            Arc::new(NoDependencies),
        );
        let whole = watch::channel(Arc::new(Holding::whole(CONSUMER))).1;
        let engine = AlertEngine::new(
            alerting,
            store.clone(),
            events,
            clock,
            metrics,
            whole,
            Arc::default(),
        );
        (store, engine)
    }

    /// Batches no rule decides move the position without a write each: it is saved once the
    /// events stop for `SAVE_POSITION_WITHIN` (or that long under load), and a restart would
    /// read on from there.
    #[tokio::test]
    async fn batches_that_decide_nothing_save_the_position_once_within_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut engine) = engine_in(dir.path());
        let tenant = Uuid::nil();
        let started_at = store.consumer_position(CONSUMER).await.unwrap();
        let first = store
            .journal_events(vec![state_change(tenant)])
            .await
            .unwrap();
        let syncs = store.syncs();
        engine.run_once().await.unwrap();
        let second = store
            .journal_events(vec![state_change(tenant), state_change(tenant)])
            .await
            .unwrap();
        let syncs = (syncs, store.syncs());
        engine.run_once().await.unwrap();
        assert_eq!(
            store.syncs(),
            syncs.1,
            "no write for a batch that decided nothing"
        );
        assert_eq!(syncs.1, syncs.0 + 1, "only the events' own write");
        assert_eq!(
            store.consumer_position(CONSUMER).await.unwrap(),
            started_at,
            "not saved yet"
        );
        // Nothing more comes: the engine saves the position once the window is over.
        engine.run_once().await.unwrap();
        let saved = store.consumer_position(CONSUMER).await.unwrap();
        assert_eq!(saved, second[1]);
        assert!(saved > first[0]);
        store.close();
    }

    /// The next batch is decided while the last one commits, and its decisions still land
    /// after it: an alert one batch opens, the next batch's clear resolves; the position is
    /// told past a batch only once its decisions are committed, and saved with them.
    #[tokio::test]
    async fn a_batch_decided_while_the_last_commits_lands_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut engine) = engine_in(dir.path());
        let tenant = Uuid::nil();
        let now = engine.clock.now();
        let rule = crate::model::config::ConfigDoc {
            id: engine.clock.new_id(),
            tenant_id: tenant,
            kind: "alert-rules".into(),
            name: "down".into(),
            created_at: now,
            updated_at: now,
            version: 1,
            body: serde_json::json!({
                "match": "event.type == 'state_change' && event.state == 'CRITICAL'",
                "severity": "critical",
            })
            .to_string(),
        };
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("a test rule");
                tx.put_config_doc(&rule)?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        // A consumer starts at what is committed after its first position is read.
        store.consumer_position(CONSUMER).await.unwrap();
        let object = Uuid::from_u128(7);
        let change = |to: &str, severity| {
            let mut e = EventDraft::new(
                tenant,
                EventType::StateChange,
                Some(severity),
                serde_json::json!({"to": to, "object": "pump"}),
            );
            e.object_id = Some(object);
            e
        };
        let down = store
            .journal_events(vec![change("CRITICAL", Severity::Critical)])
            .await
            .unwrap();
        engine.run_once().await.unwrap();
        assert!(engine.committing.is_some(), "the opening batch commits");
        let told = |engine: &AlertEngine| engine.consumer.as_ref().map(|c| c.position());
        assert!(told(&engine) < Some(down[0]), "told once committed");
        let up = store
            .journal_events(vec![change("OK", Severity::Ok)])
            .await
            .unwrap();
        // Each step settles the open's commit, or decides the clear while it commits and
        // settles that first; then the engine's own events pass (no rule reads them).
        for _ in 0..8 {
            engine.run_once().await.unwrap();
            if engine.committing.is_none()
                && store.consumer_position(CONSUMER).await.unwrap() >= up[0]
            {
                break;
            }
        }
        assert!(told(&engine) >= Some(up[0]));
        let alerts = store
            .alerts(tenant, Default::default(), None, 10)
            .await
            .unwrap();
        assert_eq!(alerts.len(), 1, "one alert");
        assert_eq!(alerts[0].dedup_key, format!("{object}/down"));
        assert_eq!(
            alerts[0].status,
            crate::model::alert::AlertStatus::Resolved,
            "opened by {}, then cleared by the next batch",
            down[0]
        );
        store.close();
    }
}
