//! Outgoing event subscriptions (`webhooks` kind): a durable consumer (`webhooks`) of the
//! event journal that turns every event a subscription wants (its `types`, its `selector`
//! over the event's labels) into an outbox delivery, committed with its position, so the
//! courier's retries and dead letters apply and a restart neither loses nor repeats one.
//! These deliveries write no `notification` events, which would feed back into them.

use super::Notifier;
use crate::events::{Consumer, Events};
use crate::model::event::Event;
use crate::model::notify::{Delivery, Message, WebhookSubscription};
use crate::model::{Selector, Timestamp, fault};
use crate::runtime::Stopwatch;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::StoreError;
use crate::store::{TxResult, Wrote};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::Instrument;
use uuid::Uuid;

pub const CONSUMER: &str = "webhooks";
/// With no subscription anywhere, the dispatcher moves its position past new events at most
/// this often (one small write for a burst of them), and not at all while nothing happens.
const IDLE_SKIP_EVERY: Duration = Duration::from_secs(1);
const BATCH: usize = 256;

struct Subscription {
    id: Uuid,
    /// Events before the subscription existed are not its.
    since: Timestamp,
    body: WebhookSubscription,
    selector: Option<Selector>,
}

impl Subscription {
    fn wants(&self, e: &Event) -> bool {
        let empty = serde_json::Map::new();
        !self.body.disabled
            && e.ts >= self.since
            && (self.body.types.is_empty() || self.body.types.contains(&e.kind))
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(e.labels().unwrap_or(&empty)))
    }
}

pub struct WebhookDispatcher {
    notifier: Arc<Notifier>,
    events: Arc<Events>,
    consumer: Option<Consumer>,
    subscriptions: HashMap<Uuid, Arc<Vec<Subscription>>>,
    generation: u64,
    /// Notified after catalog writes (a subscription may have come) and durable journal
    /// writes (events to pass over while there is none).
    wake: Arc<Notify>,
    /// When the position was last moved past events nobody subscribed to.
    last_skip: Option<Stopwatch>,
}

impl WebhookDispatcher {
    pub fn new(notifier: Arc<Notifier>, events: Arc<Events>) -> Self {
        let wake = Arc::new(Notify::new());
        notifier
            .store
            .watch_commits(crate::store::Change::Catalog, wake.clone());
        notifier.store.watch_journal(&wake);
        Self {
            notifier,
            events,
            consumer: None,
            subscriptions: HashMap::new(),
            generation: 0,
            wake,
            last_skip: None,
        }
    }

    /// The tenant's subscriptions, read again after any catalog change.
    async fn of(&mut self, tenant: Uuid) -> Result<Arc<Vec<Subscription>>, StoreError> {
        let store = &self.notifier.store;
        let generation = store.catalog_generation();
        if generation != self.generation {
            self.subscriptions.clear();
            self.generation = generation;
        }
        if let Some(s) = self.subscriptions.get(&tenant) {
            return Ok(s.clone());
        }
        let subs: Vec<Subscription> = store
            .docs(tenant, "webhooks", None, usize::MAX, |_| true)
            .await?
            .into_iter()
            .filter_map(|d| {
                let body: WebhookSubscription =
                    fault::readable("a webhook subscription", serde_json::from_str(&d.body))?;
                let selector = match body.selector.as_deref() {
                    Some(s) => Some(fault::readable(
                        "a webhook subscription's selector",
                        s.parse::<Selector>(),
                    )?),
                    None => None,
                };
                Some(Subscription {
                    id: d.id,
                    since: d.created_at,
                    body,
                    selector,
                })
            })
            .collect();
        let subs = Arc::new(subs);
        self.subscriptions.insert(tenant, subs.clone());
        Ok(subs)
    }

    /// One batch, or with no subscription anywhere the position moved to the journal head
    /// without reading: how long until the next step.
    async fn run_once(&mut self) -> Result<Wait, StoreError> {
        if self.consumer.is_none() {
            let store = self.notifier.store.clone();
            self.consumer = Some(Consumer::open(CONSUMER, self.events.clone(), store).await?);
        }
        if let Some(since) = self.last_skip.map(|at| at.elapsed())
            && since < IDLE_SKIP_EVERY
        {
            return Ok(Wait::For(IDLE_SKIP_EVERY - since));
        }
        let moved = self
            .notifier
            .store
            .skip_consumer_without(CONSUMER, "webhooks")
            .await?;
        if let Some(at) = moved {
            if let Some(c) = self.consumer.as_mut() {
                c.advance(at);
            }
            self.last_skip = Some(Stopwatch::start());
            return Ok(Wait::UntilWoken);
        }
        self.last_skip = None;
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(Wait::For(Duration::ZERO));
        };
        let batch = consumer.next(BATCH).await?;
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(Wait::For(Duration::ZERO));
        };
        let span = consumer.batch_span(&batch);
        self.enqueue_batch(batch, through).instrument(span).await?;
        Ok(Wait::For(Duration::ZERO))
    }

    /// Queues a delivery for each subscription each event of a batch read through `through`
    /// is for, with the position.
    async fn enqueue_batch(
        &mut self,
        batch: Vec<Arc<Event>>,
        through: Uuid,
    ) -> Result<(), StoreError> {
        let now = self.notifier.clock.now();
        let mut deliveries = Vec::new();
        for event in &batch {
            for sub in self.of(event.tenant_id).await?.iter() {
                if sub.wants(event) {
                    deliveries.push(self.delivery(sub, event, now));
                }
            }
        }
        self.notifier
            .store
            .transact(move |tx| -> TxResult<_> {
                for d in &deliveries {
                    tx.put_delivery(d)?;
                }
                tx.save_position(CONSUMER, through)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        if let Some(c) = self.consumer.as_mut() {
            c.advance(through);
        }
        Ok(())
    }

    fn delivery(&self, sub: &Subscription, event: &Event, now: Timestamp) -> Delivery {
        let summary = event
            .payload
            .get("summary")
            .or_else(|| event.payload.get("title"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let severity = event.severity.map_or("info", |s| s.as_str());
        let title = format!("{} {summary}", event.kind.as_str())
            .trim()
            .to_string();
        let mut message = Message::notice("event", title, summary.to_string(), severity, now);
        message.object_id = event.object_id;
        message.event = serde_json::to_value(event).ok();
        Delivery {
            webhook_id: Some(sub.id),
            url: sub.body.url.clone(),
            ..Delivery::new(
                self.notifier.clock.new_id(),
                event.tenant_id,
                "webhook",
                message,
            )
        }
    }
}

impl Worker for WebhookDispatcher {
    fn name(&self) -> &'static str {
        "webhook-dispatcher"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run_once().await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook dispatch failed; retrying");
                    self.consumer = None;
                    Wait::For(Duration::from_secs(1))
                }
            }
        })
    }
}
