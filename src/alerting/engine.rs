//! The alert engine: a durable consumer (`alert-engine`) that runs every enabled alert rule of
//! an event's tenant over each event that reaches rules, and commits what they decided (alerts
//! opened, refreshed or resolved, with their lifecycle events) together with its position, so
//! a restart or kill -9 neither loses nor repeats a decision.

use super::Alerting;
use super::rules::{CompiledRule, compile, decide, reaches_rules};
use crate::events::{Consumer, Events};
use crate::model::cel::on_cel_stack;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::alerts::AlertMatch;
use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub const CONSUMER: &str = "alert-engine";
/// Events read and decided per transaction.
const BATCH: usize = 256;

pub struct AlertEngine {
    alerting: Arc<Alerting>,
    store: Arc<Store>,
    events: Arc<Events>,
    clock: SharedClock,
    consumer: Option<Consumer>,
    /// Compiled rules per tenant, for the catalog generation they were compiled at.
    rules: HashMap<Uuid, Arc<Vec<CompiledRule>>>,
    generation: u64,
}

impl AlertEngine {
    pub fn new(
        alerting: Arc<Alerting>,
        store: Arc<Store>,
        events: Arc<Events>,
        clock: SharedClock,
    ) -> Self {
        Self {
            alerting,
            store,
            events,
            clock,
            consumer: None,
            rules: HashMap::new(),
            generation: 0,
        }
    }

    /// The tenant's compiled rules, compiled again after any catalog change.
    async fn rules_of(&mut self, tenant: Uuid) -> Result<Arc<Vec<CompiledRule>>, StoreError> {
        let generation = self.store.catalog_generation();
        if generation != self.generation {
            self.rules.clear();
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
        let compiled = Arc::new(on_cel_stack(|| compile(docs)).unwrap_or_default());
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
        // The rules of the batch's tenants, then every event decided on one CEL-sized thread.
        let mut work = Vec::new();
        for event in batch.iter().filter(|e| reaches_rules(e)) {
            let rules = self.rules_of(event.tenant_id).await?;
            if !rules.is_empty() {
                work.push((rules, event.clone()));
            }
        }
        let (clock, now) = (self.clock.clone(), self.clock.now());
        let decided = on_cel_stack(move || {
            let mut decided = Vec::new();
            for (rules, event) in &work {
                // An expression that panics the evaluator is no match for that event only.
                let one = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    decide(rules, event, &mut || clock.new_id(), now)
                }));
                match one {
                    Ok(d) => decided.extend(d),
                    Err(_) => tracing::warn!(event = %event.id, "rule evaluation failed; no match"),
                }
            }
            decided
        })
        .unwrap_or_default();
        // Silences and downtimes matter only to the tenants with an alert to open.
        let tenants: HashSet<Uuid> = decided
            .iter()
            .filter_map(|m| match m {
                AlertMatch::Fire { alert, .. } => Some(alert.tenant_id),
                _ => None,
            })
            .collect();
        let suppressions = self.alerting.suppressions(tenants).await?;
        let journaled = self
            .store
            .apply_alert_matches(
                CONSUMER,
                through,
                decided,
                self.clock.now(),
                self.alerting.storm(),
                move |a, host| suppressions.reason(a, host),
            )
            .await?;
        if let Some(consumer) = self.consumer.as_mut() {
            consumer.advance(through);
        }
        // A failed filing stays journaled for the event filer; the decisions are committed.
        let _ = self.events.file(journaled).await;
        Ok(())
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
