//! Outgoing event subscriptions (`webhooks` kind): a durable consumer (`webhooks`) of the
//! event journal that turns every event a subscription wants (its `types`, its `selector`
//! over the event's labels) into an outbox delivery, committed with its position, so the
//! courier's retries and dead letters apply and a restart neither loses nor repeats one.
//! These deliveries write no `notification` events, which would feed back into them.

use super::Notifier;
use crate::events::{Consumer, Events};
use crate::model::event::Event;
use crate::model::notify::{Delivery, Message, WebhookSubscription};
use crate::model::{Selector, Timestamp};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub const CONSUMER: &str = "webhooks";
/// With no subscription anywhere, the dispatcher looks again this often.
const IDLE_CHECK: Duration = Duration::from_secs(1);
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
}

impl WebhookDispatcher {
    pub fn new(notifier: Arc<Notifier>, events: Arc<Events>) -> Self {
        Self {
            notifier,
            events,
            consumer: None,
            subscriptions: HashMap::new(),
            generation: 0,
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
                let body: WebhookSubscription = serde_json::from_str(&d.body).ok()?;
                let selector = match body.selector.as_deref() {
                    Some(s) => Some(s.parse().ok()?),
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

    /// One batch; `false` when no tenant has a subscription (the position then moves to the
    /// journal head without reading).
    async fn run_once(&mut self) -> Result<bool, StoreError> {
        if self.consumer.is_none() {
            let store = self.notifier.store.clone();
            self.consumer = Some(Consumer::open(CONSUMER, self.events.clone(), store).await?);
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
            return Ok(false);
        }
        let batch = match self.consumer.as_mut() {
            Some(c) => c.next(BATCH).await?,
            None => return Ok(true),
        };
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(true);
        };
        let now = self.notifier.clock.now();
        let mut deliveries = Vec::new();
        for event in &batch {
            for sub in self.of(event.tenant_id).await?.iter() {
                if sub.wants(event) {
                    deliveries.push(self.delivery(sub, event, now));
                }
            }
        }
        let any = !deliveries.is_empty();
        self.notifier
            .store
            .enqueue_deliveries(deliveries, Vec::new(), Some((CONSUMER, through)))
            .await?;
        if let Some(c) = self.consumer.as_mut() {
            c.advance(through);
        }
        if any {
            self.notifier.courier_wake.notify_one();
        }
        Ok(true)
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

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run_once().await {
                Ok(true) => Wait::For(Duration::ZERO),
                Ok(false) => Wait::For(IDLE_CHECK),
                Err(e) => {
                    tracing::warn!(error = %e, "webhook dispatch failed; retrying");
                    self.consumer = None;
                    Wait::For(Duration::from_secs(1))
                }
            }
        })
    }
}
