//! Events: filing journaled events into the event store and publishing them, the event filer,
//! durable consumers, the bus, the SSE hub's client bookkeeping, export pages and month-file
//! retention.

pub mod bus;
pub mod consumer;
pub mod export;
pub mod filer;
pub mod relay;
pub mod retention;
pub mod sse;

pub use bus::{Bus, Delivery, Dispatcher, SSE_BUFFER, Subscription};
pub use consumer::Consumer;
pub use filer::EventFiler;
pub use relay::EventRelay;
pub use retention::RetentionWorker;

use crate::model::Timestamp;
use crate::model::event::{Event, EventFilter, Journaled, id_millis};
use crate::model::health::ConsumerLag;
use crate::runtime::Locked;
use crate::runtime::Metrics;
use crate::runtime::clock::SharedClock;
use crate::store::events::{EventKey, EventStore, Position};
use crate::store::{Filing, Store, StoreError};
use futures_util::future::BoxFuture;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, oneshot};
use uuid::Uuid;

/// SSE replay starts this long before the `Last-Event-ID` event.
pub const REPLAY_LOOKBACK_MS: i64 = 1000;
pub const REPLAY_MAX: usize = 500;

pub struct Events {
    store: Arc<EventStore>,
    bus: Arc<Bus>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    sse_clients: AtomicUsize,
    /// Journal rows whose events are stored, for the filer to forget.
    filed: Mutex<Vec<u64>>,
    /// Why journaled events could not be stored; the filer stores them from the journal.
    unfiled: Mutex<Option<String>>,
    /// The filer's waker: notified after every filing (rows to forget), after a failed one
    /// (rows to store) and once journaled events are durable (rows that may be left unfiled).
    filer: Arc<Notify>,
    /// Resolves once the last durable group handed over is published: the next one publishes
    /// after it, so the bus sees groups in commit order.
    published: Mutex<oneshot::Receiver<()>>,
    /// Where each durable consumer stands, for `/metrics` and the health report.
    consumers: Mutex<BTreeMap<&'static str, Standing>>,
    /// Set where other processes write the same database: committed events reach the bus
    /// through the relay (every process's, in commit order), not as they are filed here.
    relayed: std::sync::atomic::AtomicBool,
    /// The newest event the relay published: a write answers once its events are on the bus,
    /// as where it publishes them itself.
    relayed_through: tokio::sync::watch::Sender<Uuid>,
}

/// The longest a write waits for the relay to publish its events before it answers anyway
/// (they reach the bus later).
const RELAY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a durable consumer stands. Its lag is the age of `oldest`, taken when asked for, so
/// a consumer stuck on an event shows a lag that grows.
#[derive(Clone, Copy)]
struct Standing {
    position: Uuid,
    /// Events retention removed before the consumer read them, since this process started.
    lost: u64,
    /// The time of the oldest event it has read and not done yet.
    oldest: Option<Timestamp>,
    /// When it last moved on or had nothing to do: with work waiting and no move since, it
    /// stalls (a slow consumer moves batch by batch; a stuck one does not).
    moved_at: Timestamp,
    /// Its work waits on another instance by design (the federation uplink while the main is
    /// away): neither its lag nor its stall says this instance is unwell.
    waits_on_peer: bool,
}

/// Counts one connected SSE client while alive.
pub struct SseClient(Arc<Events>);

impl Drop for SseClient {
    fn drop(&mut self) {
        self.0.sse_clients.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.sse_clients.dec();
    }
}

impl Events {
    pub fn new(store: Arc<EventStore>, clock: SharedClock, metrics: Arc<Metrics>) -> Arc<Events> {
        Arc::new(Events {
            store,
            bus: Bus::new(metrics.clone()),
            clock,
            metrics,
            sse_clients: AtomicUsize::new(0),
            filed: Mutex::default(),
            unfiled: Mutex::default(),
            filer: Arc::new(Notify::new()),
            published: Mutex::new(oneshot::channel().1),
            consumers: Mutex::default(),
            relayed: Default::default(),
            relayed_through: tokio::sync::watch::Sender::new(Uuid::nil()),
        })
    }

    pub fn bus(&self) -> &Arc<Bus> {
        &self.bus
    }

    /// Stores journaled events and publishes them once stored; their journal rows are
    /// forgotten once stored, and a failed store leaves them journaled for the filer (and is
    /// counted). The append is queued when this is called, not when the future is first
    /// polled, so appends keep call order.
    fn file(
        &self,
        journaled: Vec<Journaled>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + '_ {
        let queued = self.queue(journaled);
        self.publish_stored(queued)
    }

    /// Queues the append of journaled events to their month files.
    fn queue(&self, journaled: Vec<Journaled>) -> Queued {
        let mut seqs: Vec<u64> = journaled.iter().map(|j| j.seq).collect();
        seqs.dedup();
        let events: Vec<Arc<Event>> = journaled.iter().map(|j| j.event.clone()).collect();
        let rows = journaled.into_iter().map(|j| (j.event, j.row)).collect();
        let stored = (!events.is_empty()).then(|| self.store.append_journaled(rows));
        Queued {
            seqs,
            events,
            stored,
        }
    }

    /// Once the queued append is done: publishes the events and hands their rows to the filer
    /// to forget, or, when it failed, to store again.
    async fn publish_stored(&self, queued: Queued) -> Result<(), StoreError> {
        let Queued {
            seqs,
            events,
            stored,
        } = queued;
        let Some(stored) = stored else {
            return Ok(());
        };
        let result = stored
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("event writer gone".into())));
        match &result {
            Ok(()) => {
                if self.relayed.load(Ordering::SeqCst) {
                    let last = events.iter().map(|e| e.id).max().unwrap_or_default();
                    let mut relayed = self.relayed_through.subscribe();
                    let _ =
                        tokio::time::timeout(RELAY_WAIT, relayed.wait_for(|at| *at >= last)).await;
                } else {
                    for event in &events {
                        self.bus.publish(event.clone()).await;
                    }
                }
                self.filed.locked().extend(seqs);
                self.filer.notify_one();
            }
            Err(e) => {
                self.metrics.events_dropped.inc_by(events.len() as u64);
                tracing::error!(error = %e, count = events.len(), "journaled events not stored yet; the filer retries");
                *self.unfiled.locked() = Some(e.to_string());
                self.filer.notify_one();
            }
        }
        result
    }

    /// Stores the events a federation site forwarded, with their own ids and times, leaving
    /// out those already stored (a replay after a crash on either side), and publishes the
    /// new ones (through every process's relay where processes share the store); returns them.
    /// The caller serialises the batches of one site.
    pub async fn store_forwarded(&self, events: Vec<Event>) -> Result<Vec<Arc<Event>>, StoreError> {
        let store = self.store.clone();
        let fresh = crate::store::blocking(move || {
            let keys: Vec<EventKey> = events.iter().map(EventKey::of).collect();
            let stored = store.stored(&keys)?;
            Ok(events
                .into_iter()
                .filter(|e| !stored.contains(&e.id))
                .map(Arc::new)
                .collect::<Vec<_>>())
        })
        .await?;
        if fresh.is_empty() {
            return Ok(fresh);
        }
        self.store
            .append(fresh.clone())
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("event writer gone".into())))?;
        // Where processes share the store, the others' relays publish them once announced.
        if self.relayed.load(Ordering::SeqCst) {
            self.announce(&fresh).await;
        }
        for event in &fresh {
            self.bus.publish(event.clone()).await;
        }
        Ok(fresh)
    }

    /// Announces stored forwarded events to the other processes' relays.
    async fn announce(&self, fresh: &[Arc<Event>]) {
        let (store, stored) = (self.store.clone(), fresh.to_vec());
        if let Err(e) = crate::store::blocking(move || store.announce_forwarded(&stored)).await {
            tracing::warn!(error = %e, "forwarded events stored but not announced to the other processes");
        }
    }

    /// The stored events of `tenants` strictly after event `after`, oldest first, at most
    /// `limit`, merged across tenants in id (commit) order.
    pub async fn stored_after(
        &self,
        tenants: Vec<Uuid>,
        after: Uuid,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let store = self.store.clone();
        let after = Position::of_id(after);
        crate::store::blocking(move || {
            let mut out = Vec::new();
            for tenant_id in tenants {
                let filter = EventFilter {
                    tenant_id,
                    ..Default::default()
                };
                out.extend(store.oldest(&filter, after, limit)?);
            }
            out.sort_by_key(|e| e.id);
            out.truncate(limit);
            Ok(out)
        })
        .await
    }

    /// Records where durable consumer `name` stands: at `position`, with `oldest` the
    /// oldest committed event it has not done yet.
    pub fn report_lag(&self, name: &'static str, position: Uuid, oldest: Option<&Event>) {
        let now = self.clock.now();
        let mut consumers = self.consumers.locked();
        let before = consumers.get(name);
        let (lost, waits_on_peer) = before.map_or((0, false), |c| (c.lost, c.waits_on_peer));
        let moved_at = match before {
            Some(b) if b.position == position && b.oldest.is_some() && oldest.is_some() => {
                b.moved_at
            }
            _ => now,
        };
        consumers.insert(
            name,
            Standing {
                position,
                lost,
                oldest: oldest.map(|e| e.ts),
                moved_at,
                waits_on_peer,
            },
        );
    }

    /// Records consumer `name` moved on to `position` after work it committed, or past
    /// events it has none for (skipped without reading): the filer keeps what it has not read.
    pub fn consumer_moved(&self, name: &'static str, position: Uuid) {
        if let Some(standing) = self.consumers.locked().get_mut(name)
            && position > standing.position
        {
            standing.position = position;
            standing.moved_at = self.clock.now();
        }
    }

    /// How far every durable consumer of this process has read (`None`: none reads), those
    /// waiting on a peer by design left out.
    pub fn consumed_through(&self) -> Option<Uuid> {
        self.consumers
            .locked()
            .values()
            .filter(|s| !s.waits_on_peer)
            .map(|s| s.position)
            .min()
    }

    /// Records consumer `name` opened at `position`. Opened again where it stood (a retry
    /// after a failed batch), it keeps its standing: a consumer failing on the same batch over
    /// and over stalls as one stuck on it does.
    pub fn consumer_opened(&self, name: &'static str, position: Uuid) {
        let reopened = self
            .consumers
            .locked()
            .get(name)
            .is_some_and(|s| s.position == position);
        if !reopened {
            self.report_lag(name, position, None);
        }
    }

    /// Marks consumer `name` as one whose work waits on another instance by design.
    pub fn waits_on_peer(&self, name: &'static str) {
        if let Some(standing) = self.consumers.locked().get_mut(name) {
            standing.waits_on_peer = true;
        }
    }

    /// Counts events of month files about to be removed that a consumer has not read yet.
    fn count_lost_before_removal(&self, months: &[u32]) {
        let mut consumers = self.consumers.locked();
        for standing in consumers.values_mut() {
            let Some(at) = Position::of_id(standing.position) else {
                continue;
            };
            for month in months {
                match self.store.count_after(*month, at) {
                    Ok(n) => standing.lost += n,
                    Err(e) => {
                        tracing::warn!(month, error = %e, "could not count unread events of an expiring month")
                    }
                }
            }
        }
    }

    /// Every durable consumer's lag, by name, as of now (also set in `/metrics`).
    pub fn consumer_lags(&self) -> BTreeMap<&'static str, ConsumerLag> {
        let now = self.clock.now();
        let standings = self.consumers.locked().clone();
        standings
            .into_iter()
            .map(|(name, s)| {
                let seconds_since =
                    |ts: Timestamp| (now.as_millis() - ts.as_millis()).max(0) as f64 / 1000.0;
                let lag = ConsumerLag {
                    position: s.position,
                    lag_seconds: s.oldest.map_or(0.0, seconds_since),
                    stalled_seconds: if s.oldest.is_some() {
                        seconds_since(s.moved_at)
                    } else {
                        0.0
                    },
                    lost: s.lost,
                    waits_on_peer: s.waits_on_peer,
                };
                self.metrics
                    .consumer_lag
                    .get_or_create(&crate::runtime::metrics::ConsumerLabels {
                        consumer: name.into(),
                    })
                    .set(lag.lag_seconds);
                (name, lag)
            })
            .collect()
    }

    /// Why journaled events wait to be stored, if they do.
    pub fn unfiled_reason(&self) -> Option<String> {
        self.unfiled.locked().clone()
    }

    /// Newest first, strictly older than the event `cursor`. Like every read here, it sees
    /// each event emitted before it began, committed or still queued then.
    pub async fn list(
        &self,
        filter: EventFilter,
        cursor: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.store.settled().await;
        let store = self.store.clone();
        let before = cursor.and_then(Position::of_id);
        crate::store::blocking(move || store.newest(&filter, before, limit)).await
    }

    /// `list` with the committed events not filed yet (still journal rows in `main`) merged
    /// in, so an event is listed as soon as the change that made it can be read. The journal
    /// is read first: a row filed after that read is in the month files read next.
    pub async fn list_committed(
        &self,
        main: &Arc<Store>,
        filter: EventFilter,
        cursor: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let kept = filter.clone();
        let pending = main
            .journal_newest(cursor, move |e| kept.matches(e), limit)
            .await?;
        let mut items = self.list(filter, cursor, limit).await?;
        let listed: HashSet<Uuid> = items.iter().map(|e| e.id).collect();
        items.extend(
            pending
                .iter()
                .filter(|e| !listed.contains(&e.id))
                .map(|e| (**e).clone()),
        );
        items.sort_by_key(|e| std::cmp::Reverse((e.ts, e.id)));
        items.truncate(limit);
        Ok(items)
    }

    /// Oldest first, strictly after `after` (export pages, SSE replay).
    pub async fn ascending(
        &self,
        filter: EventFilter,
        after: Option<Position>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.store.settled().await;
        let store = self.store.clone();
        crate::store::blocking(move || store.oldest(&filter, after, limit)).await
    }

    /// The persisted events a reconnecting SSE client missed: from one second before
    /// `last_id`, at most 500.
    pub async fn replay(
        &self,
        filter: EventFilter,
        last_id: Uuid,
    ) -> Result<Vec<Event>, StoreError> {
        let Some(ms) = id_millis(&last_id) else {
            return Ok(Vec::new());
        };
        let from = Position {
            ms: ms - REPLAY_LOOKBACK_MS,
            id: Uuid::nil(),
        };
        self.ascending(filter, Some(from), REPLAY_MAX).await
    }

    pub fn subscribe(&self, name: &'static str, capacity: usize) -> Subscription {
        self.bus.subscribe(name, capacity)
    }

    pub fn sse_client(self: &Arc<Self>) -> SseClient {
        self.sse_clients.fetch_add(1, Ordering::SeqCst);
        self.metrics.sse_clients.inc();
        SseClient(self.clone())
    }

    pub fn sse_client_count(&self) -> usize {
        self.sse_clients.load(Ordering::SeqCst)
    }

    pub fn queue_depths(&self) -> Vec<(String, usize)> {
        self.bus.depths()
    }

    /// Frames the bus dropped for subscribers that could not keep up, since start.
    pub fn dropped(&self) -> u64 {
        self.bus.dropped()
    }

    pub fn store(&self) -> &Arc<EventStore> {
        &self.store
    }
}

/// An append on its way to the month files, and what to do once it is done.
struct Queued {
    seqs: Vec<u64>,
    events: Vec<Arc<Event>>,
    stored: Option<oneshot::Receiver<Result<(), StoreError>>>,
}

/// The store hands every durable group's events here, in commit order.
impl Filing for Events {
    fn file(self: Arc<Self>, journaled: Vec<Journaled>) -> BoxFuture<'static, ()> {
        let queued = self.queue(journaled);
        let (published, next_turn) = oneshot::channel();
        let turn = std::mem::replace(&mut *self.published.locked(), next_turn);
        Box::pin(async move {
            // The group before is published, or its filing is gone.
            let _ = turn.await;
            let _ = self.publish_stored(queued).await;
            let _ = published.send(());
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{EventDraft, EventType};
    use crate::runtime::{Clock, TestClock};

    fn events_on_a_test_clock() -> (Arc<Events>, Arc<TestClock>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-11-26T10:00:00Z".parse().unwrap()));
        let events = Events::new(
            EventStore::open(dir.path()).unwrap(),
            clock.clone(),
            Arc::new(Metrics::new()),
        );
        (events, clock, dir)
    }

    /// A consumer that reported an event it has not done shows a lag that grows with the time
    /// asked, not the time it last reported: a stuck consumer is seen as stuck.
    #[tokio::test]
    async fn a_stuck_consumer_lags_more_the_longer_it_is_stuck() {
        let (events, clock, _dir) = events_on_a_test_clock();
        let start = clock.now();
        let stuck = EventDraft::new(Uuid::nil(), EventType::Ingress, None, serde_json::json!({}))
            .stamped(clock.new_id(), start);
        events.report_lag("engine", Uuid::nil(), Some(&stuck));
        clock.advance(std::time::Duration::from_secs(90));
        assert_eq!(events.consumer_lags()["engine"].lag_seconds, 90.0);
        clock.advance(std::time::Duration::from_secs(30));
        assert_eq!(events.consumer_lags()["engine"].lag_seconds, 120.0);
        events.report_lag("engine", stuck.id, None);
        assert_eq!(events.consumer_lags()["engine"].lag_seconds, 0.0);
    }

    /// A consumer stalls while its position stays put with work waiting: opening it again and
    /// reading the same batch (a retry) does not reset it, a batch done does, and so does
    /// running dry. A slow consumer behind by minutes but moving batch by batch does not
    /// stall.
    #[tokio::test]
    async fn a_consumer_stalls_while_it_does_not_move_with_work_waiting() {
        let (events, clock, _dir) = events_on_a_test_clock();
        let start = clock.now();
        let event = |n: u64| {
            EventDraft::new(Uuid::nil(), EventType::Ingress, None, serde_json::json!({})).stamped(
                clock.new_id(),
                start.plus(std::time::Duration::from_secs(n)),
            )
        };
        let stalled = |name: &str| events.consumer_lags()[name].stalled_seconds;
        let (first, second) = (event(0), event(1));
        events.report_lag("engine", Uuid::nil(), None);
        clock.advance(std::time::Duration::from_secs(600));
        assert_eq!(stalled("engine"), 0.0, "idle is not stalled");
        events.report_lag("engine", Uuid::nil(), Some(&first));
        clock.advance(std::time::Duration::from_secs(60));
        events.consumer_opened("engine", Uuid::nil());
        events.report_lag("engine", Uuid::nil(), Some(&first));
        clock.advance(std::time::Duration::from_secs(70));
        assert_eq!(
            stalled("engine"),
            130.0,
            "opened again and the same batch read again is no move"
        );
        events.report_lag("engine", first.id, Some(&second));
        assert_eq!(stalled("engine"), 0.0, "a batch done");
        assert!(
            events.consumer_lags()["engine"].lag_seconds > 600.0,
            "yet behind"
        );
        clock.advance(std::time::Duration::from_secs(5));
        events.report_lag("engine", second.id, None);
        clock.advance(std::time::Duration::from_secs(300));
        assert_eq!(stalled("engine"), 0.0, "caught up");

        events.report_lag("uplink", Uuid::nil(), Some(&first));
        events.waits_on_peer("uplink");
        clock.advance(std::time::Duration::from_secs(300));
        events.report_lag("uplink", Uuid::nil(), Some(&first));
        let uplink = events.consumer_lags()["uplink"];
        assert!(uplink.waits_on_peer, "kept across reports");
        assert_eq!(uplink.stalled_seconds, 300.0);
    }
}
