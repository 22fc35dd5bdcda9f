//! The in-memory bus (SPEC 6.3): one main queue of 16384 that blocks producers when full, fanned
//! out to every subscriber's bounded buffer (while nobody subscribes, nothing is queued). A subscriber that cannot keep up loses frames and is
//! told to resync. No topics: subscribers filter by tenant, type and selector themselves.

use crate::model::event::Event;
use crate::runtime::Metrics;
use crate::runtime::metrics::QueueLabels;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{Locked, RwLocked};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;

pub const MAIN_QUEUE: usize = 16_384;
/// Per-client buffer of the SSE hub.
pub const SSE_BUFFER: usize = 512;

struct Slot {
    name: &'static str,
    capacity: usize,
    tx: mpsc::Sender<Arc<Event>>,
    resync: AtomicBool,
    dropped: AtomicU64,
}

pub struct Bus {
    tx: mpsc::Sender<Arc<Event>>,
    rx: Mutex<Option<mpsc::Receiver<Arc<Event>>>>,
    slots: RwLock<Vec<Arc<Slot>>>,
    metrics: Arc<Metrics>,
    /// Frames dropped for subscribers that could not keep up, since start.
    dropped: AtomicU64,
}

/// What a subscriber receives.
#[derive(Debug)]
pub enum Delivery {
    Event(Arc<Event>),
    /// Frames were dropped since the last delivery.
    Resync,
}

pub struct Subscription {
    rx: mpsc::Receiver<Arc<Event>>,
    slot: Arc<Slot>,
}

impl Subscription {
    /// The next delivery; `None` once the bus is gone.
    pub async fn recv(&mut self) -> Option<Delivery> {
        if self.slot.resync.swap(false, Ordering::SeqCst) {
            return Some(Delivery::Resync);
        }
        self.rx.recv().await.map(Delivery::Event)
    }
}

impl Bus {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Bus> {
        let (tx, rx) = mpsc::channel(MAIN_QUEUE);
        Arc::new(Bus {
            tx,
            rx: Mutex::new(Some(rx)),
            slots: RwLock::new(Vec::new()),
            metrics,
            dropped: AtomicU64::new(0),
        })
    }

    /// Waits for room in the main queue when it is full. With no subscriber the event goes no
    /// further: it is stored before it is published, and a subscriber that comes later reads
    /// what it missed from the store (SSE's `Last-Event-ID`).
    pub async fn publish(&self, event: Arc<Event>) {
        if self.slots.read_now().is_empty() {
            return;
        }
        if self.tx.send(event).await.is_err() {
            tracing::error!("event bus closed; event not published");
        }
    }

    pub fn subscribe(&self, name: &'static str, capacity: usize) -> Subscription {
        let (tx, rx) = mpsc::channel(capacity);
        let slot = Arc::new(Slot {
            name,
            capacity,
            tx,
            resync: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        });
        self.slots.write_now().push(slot.clone());
        Subscription { rx, slot }
    }

    fn fan_out(&self, event: &Arc<Event>) {
        let mut closed = false;
        for slot in self.slots.read_now().iter() {
            match slot.tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    slot.resync.store(true, Ordering::SeqCst);
                    slot.dropped.fetch_add(1, Ordering::Relaxed);
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.metrics
                        .bus_dropped
                        .get_or_create(&QueueLabels {
                            queue: slot.name.to_string(),
                        })
                        .inc();
                }
                Err(mpsc::error::TrySendError::Closed(_)) => closed = true,
            }
        }
        if closed {
            self.slots.write_now().retain(|s| !s.tx.is_closed());
        }
    }

    /// Depth of the main queue and the deepest buffer of each subscriber kind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn depths(&self) -> Vec<(String, usize)> {
        let mut out = vec![("main".to_string(), MAIN_QUEUE - self.tx.capacity())];
        for slot in self.slots.read_now().iter() {
            let depth = slot.capacity - slot.tx.capacity();
            match out.iter_mut().find(|(n, _)| n == slot.name) {
                Some((_, d)) => *d = (*d).max(depth),
                None => out.push((slot.name.to_string(), depth)),
            }
        }
        for (name, depth) in &out {
            self.metrics
                .queue_depth
                .get_or_create(&QueueLabels {
                    queue: format!("bus_{name}"),
                })
                .set(i64::try_from(*depth).unwrap_or(i64::MAX));
        }
        out
    }

    /// The worker that moves events from the main queue to the subscribers.
    pub fn dispatcher(self: &Arc<Self>) -> Option<Dispatcher> {
        let rx = self.rx.locked().take()?;
        Some(Dispatcher {
            bus: self.clone(),
            rx,
        })
    }
}

pub struct Dispatcher {
    bus: Arc<Bus>,
    rx: mpsc::Receiver<Arc<Event>>,
}

impl Worker for Dispatcher {
    fn name(&self) -> &'static str {
        "event-bus"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            // Waits for the next event however long it takes (an idle box wakes for nothing);
            // the supervisor ends the wait at shutdown.
            match self.rx.recv().await {
                Some(first) => {
                    self.bus.fan_out(&first);
                    for _ in 0..1024 {
                        match self.rx.try_recv() {
                            Ok(e) => self.bus.fan_out(&e),
                            Err(_) => break,
                        }
                    }
                    Wait::For(Duration::ZERO)
                }
                None => Wait::Done,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventType;
    use uuid::Uuid;

    fn event(n: u128) -> Arc<Event> {
        Arc::new(Event {
            id: Uuid::from_u128(n),
            tenant_id: Uuid::nil(),
            ts: "2026-01-01T00:00:00Z".parse().unwrap(),
            kind: EventType::System,
            object_id: None,
            source_id: None,
            severity: None,
            payload: serde_json::json!({}).into(),
            site: None,
        })
    }

    #[tokio::test]
    async fn a_slow_subscriber_loses_frames_and_is_told_to_resync() {
        let bus = Bus::new(Arc::new(Metrics::new()));
        let mut d = bus.dispatcher().unwrap();
        let mut slow = bus.subscribe("slow", 2);
        let mut fast = bus.subscribe("fast", 16);
        for n in 0..5 {
            bus.publish(event(n)).await;
        }
        d.step().await;
        assert!(matches!(slow.recv().await, Some(Delivery::Resync)));
        let mut got = Vec::new();
        for _ in 0..2 {
            if let Some(Delivery::Event(e)) = slow.recv().await {
                got.push(e.id.as_u128());
            }
        }
        assert_eq!(got, vec![0, 1]);
        for n in 0..5 {
            assert!(matches!(fast.recv().await, Some(Delivery::Event(e)) if e.id.as_u128() == n));
        }
        let depths = bus.depths();
        assert_eq!(depths[0], ("main".to_string(), 0));
        drop(fast);
        bus.publish(event(9)).await;
        d.step().await;
        assert_eq!(
            bus.slots.read().unwrap().len(),
            1,
            "closed subscribers are removed"
        );
    }

    /// With nobody subscribed, publishing queues nothing: more events than the main queue
    /// holds go through without a dispatcher draining it. A subscriber gets what comes after.
    #[tokio::test]
    async fn events_nobody_listens_to_are_not_queued() {
        let bus = Bus::new(Arc::new(Metrics::new()));
        let mut d = bus.dispatcher().unwrap();
        let published = tokio::time::timeout(Duration::from_secs(5), async {
            for n in 0..(MAIN_QUEUE as u128 + 10) {
                bus.publish(event(n)).await;
            }
        })
        .await;
        assert!(published.is_ok(), "a full main queue blocked the producer");
        assert_eq!(bus.depths()[0], ("main".to_string(), 0));
        let mut late = bus.subscribe("late", 4);
        bus.publish(event(1 << 20)).await;
        d.step().await;
        assert!(matches!(late.recv().await, Some(Delivery::Event(e)) if e.id.as_u128() == 1 << 20));
    }
}
