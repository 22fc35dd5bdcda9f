//! The alert engine: a durable consumer (`alert-engine`) that runs every enabled alert rule of
//! an event's tenant over each event that reaches rules, and commits what they decided (alerts
//! opened, refreshed or resolved, with their lifecycle events) together with its position, so
//! a restart or kill -9 neither loses nor repeats a decision.

use super::Alerting;
use super::evaluator::{Evaluator, Overrun, Work};
use super::lifecycle::AlertMatch;
use super::rules::{CompiledRule, compile, reaches_rules};
use crate::events::{Consumer, Events};
use crate::model::cel::on_cel_stack;
use crate::model::event::{Event, EventDraft, EventType, Severity};
use crate::runtime::Metrics;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;
use uuid::Uuid;

pub const CONSUMER: &str = "alert-engine";
/// Events read and decided per transaction.
const BATCH: usize = 256;

pub struct AlertEngine {
    alerting: Arc<Alerting>,
    store: Arc<Store>,
    events: Arc<Events>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    consumer: Option<Consumer>,
    /// Compiled rules per tenant, for the catalog generation they were compiled at.
    rules: HashMap<Uuid, Arc<Vec<CompiledRule>>>,
    generation: u64,
    evaluator: Evaluator,
}

impl AlertEngine {
    pub fn new(
        alerting: Arc<Alerting>,
        store: Arc<Store>,
        events: Arc<Events>,
        clock: SharedClock,
        metrics: Arc<Metrics>,
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
        }
    }

    /// The tenant's compiled rules, compiled again after any catalog change.
    async fn rules_of(&mut self, tenant: Uuid) -> Result<Arc<Vec<CompiledRule>>, StoreError> {
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
        self.rules.insert(tenant, compiled.clone());
        Ok(compiled)
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        if self.consumer.is_none() {
            self.consumer =
                Some(Consumer::open(CONSUMER, self.events.clone(), self.store.clone()).await?);
        }
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        let batch = consumer.next(BATCH).await?;
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(());
        };
        let span = consumer.batch_span(&batch);
        self.decide_batch(batch, through).instrument(span).await
    }

    /// Decides a batch read through `through` and commits the decisions with the position.
    async fn decide_batch(
        &mut self,
        batch: Vec<Arc<Event>>,
        through: Uuid,
    ) -> Result<(), StoreError> {
        // The rules of the batch's tenants, then every event decided under the budgets.
        let mut work = Vec::new();
        for event in batch.iter().filter(|e| reaches_rules(e)) {
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
        // Silences and downtimes matter only to the tenants with an alert to open.
        let tenants: HashSet<Uuid> = decided
            .iter()
            .filter_map(|m| match m {
                AlertMatch::Fire { alert, .. } => Some(alert.tenant_id),
                _ => None,
            })
            .collect();
        let suppressions = self.alerting.suppressions(tenants).await?;
        super::lifecycle::apply_matches(
            &self.store,
            CONSUMER,
            through,
            decided,
            self.clock.now(),
            self.alerting.storm(),
            Box::new(move |a, host| suppressions.reason(a, host)),
        )
        .await?;
        if let Some(consumer) = self.consumer.as_mut() {
            consumer.advance(through);
        }
        Ok(())
    }
}

impl AlertEngine {
    /// Says that rules ran over their budget: a `system` event in the rule's tenant each, and
    /// the `np_alert_rule_overruns` counter.
    async fn report(&self, overruns: Vec<Overrun>) {
        if overruns.is_empty() {
            return;
        }
        let drafts = overruns
            .iter()
            .map(|o| {
                self.metrics.rule_overruns.inc();
                EventDraft::new(
                    o.tenant,
                    EventType::System,
                    Some(Severity::Warning),
                    serde_json::json!({
                        "summary": format!(
                            "alert rule {:?} ran past its {:?} evaluation budget on event {}; it is skipped for {} minutes or until the rules change",
                            o.rule, o.budget, o.event, super::evaluator::QUARANTINE.as_secs() / 60
                        ),
                        "rule": o.rule,
                        "eventId": o.event,
                        "budgetMs": o.budget.as_millis() as u64,
                    }),
                )
            })
            .collect();
        if let Err(e) = self.store.journal_events(drafts).await {
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
                    tracing::warn!(error = %e, "alert engine step failed; retrying");
                    // Read again from the committed position.
                    self.consumer = None;
                    Wait::For(Duration::from_secs(1))
                }
            }
        })
    }
}
