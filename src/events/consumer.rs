//! Durable consumers: what must not miss an event (the alert engine, the notifier, webhooks,
//! the federation uplink) reads every committed event in commit order from the store, after a
//! position saved in the transaction of the work it did for the events before it. The store
//! wakes it once journaled events are durable, filed or not (it never looks on a timer);
//! restarting resumes after the last committed position, and "resync" is simply reading on
//! from it.
//!
//! What a consumer can see: the journal head (the newest committed event) and the journal rows
//! not yet forgotten, read in one snapshot, and then the month files up to that head. An event
//! committed by then is in one or the other (its journal row is forgotten only once it is
//! stored), and events are stamped in their transaction, so id order is commit order: nothing
//! committed at or before the head can appear later behind the position. A consumer at or past
//! the newest event of a forgotten row (named in the same snapshot) has nothing to find in the
//! month files, and does not read them.

use super::Events;
use crate::model::event::{Event, EventDraft};
use crate::store::{Store, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Notify;
use uuid::Uuid;

pub struct Consumer {
    name: &'static str,
    events: Arc<Events>,
    store: Arc<Store>,
    /// Where its next read starts.
    position: Uuid,
    /// Where it stood before the batches whose work still commits (`read_past`), if any.
    committing_after: Option<Uuid>,
    /// The journal row its next read starts at (see `JournalView::from_row`).
    journal_from: u64,
    /// Notified by the store once events journaled are durable.
    wake: Arc<Notify>,
}

impl Consumer {
    /// Consumer `name` at its saved position (a new one starts at what is committed next).
    pub async fn open(
        name: &'static str,
        events: Arc<Events>,
        store: Arc<Store>,
    ) -> Result<Self, StoreError> {
        let position = store.consumer_position(name).await?;
        Ok(Self::open_at(name, events, store, position))
    }

    /// Consumer `name` reading after `position`, for a consumer that saves its positions
    /// itself (the partitioned alert engine, `Store::held_positions`).
    pub fn open_at(
        name: &'static str,
        events: Arc<Events>,
        store: Arc<Store>,
        position: Uuid,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        store.watch_journal(&wake);
        events.consumer_opened(name, position);
        Self {
            name,
            events,
            store,
            position,
            committing_after: None,
            journal_from: 0,
            wake,
        }
    }

    /// The id of the last event whose work is committed.
    pub fn position(&self) -> Uuid {
        self.committing_after.unwrap_or(self.position)
    }

    /// The next committed events after the position, oldest first, at most `max`; waits
    /// until there is one. A journal write made durable while it reads leaves a wake behind,
    /// so none is missed between the read and the wait.
    pub async fn next(&mut self, max: usize) -> Result<Vec<Arc<Event>>, StoreError> {
        loop {
            let batch = self.read(max.max(1)).await?;
            if !batch.is_empty() {
                return Ok(batch);
            }
            self.wake.notified().await;
        }
    }

    /// The span a batch's work runs in, so its transactions and deliveries can be followed
    /// back to the events that caused them.
    pub fn batch_span(&self, batch: &[Arc<Event>]) -> tracing::Span {
        let id = |e: Option<&Arc<Event>>| e.map(|e| e.id.to_string()).unwrap_or_default();
        tracing::debug_span!(
            "batch",
            consumer = self.name,
            events = batch.len(),
            first = %id(batch.first()),
            through = %id(batch.last()),
        )
    }

    /// Reads go on after `through` while the work for the events through it still commits;
    /// the position is told (`advance`) once it has.
    pub fn read_past(&mut self, through: Uuid) {
        self.committing_after.get_or_insert(self.position);
        self.position = self.position.max(through);
    }

    /// After the work for the events through `through` committed with the position (a store
    /// mutation that saved it in its transaction), reads go on after them.
    pub fn advance(&mut self, through: Uuid) {
        self.position = self.position.max(through);
        self.committing_after = None;
        self.events.consumer_moved(self.name, self.position);
    }

    /// Commits the position with the events the work made, in one transaction, and files
    /// them: for consumers whose work is events, or is outside the store.
    pub async fn commit(
        &mut self,
        through: Uuid,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        self.store.consume(self.name, through, events).await?;
        self.advance(through);
        Ok(())
    }

    /// The committed events after the position, at most `max`. Events a federation site
    /// forwarded are history of that site, not work of this instance: they are passed over
    /// (the position moves past a batch of nothing else without a commit; passing them again
    /// after a restart is harmless).
    async fn read(&mut self, max: usize) -> Result<Vec<Arc<Event>>, StoreError> {
        loop {
            let batch = self.read_committed(max).await?;
            let Some(last) = batch.last().map(|e| e.id) else {
                return Ok(batch);
            };
            let local: Vec<Arc<Event>> = batch.into_iter().filter(|e| e.site.is_none()).collect();
            if !local.is_empty() {
                return Ok(local);
            }
            self.position = last;
        }
    }

    async fn read_committed(&mut self, max: usize) -> Result<Vec<Arc<Event>>, StoreError> {
        let (head, batch) = committed_after(
            &self.events,
            &self.store,
            self.position,
            &mut self.journal_from,
            max,
        )
        .await?;
        let oldest = head.and(batch.first().map(|e| &**e));
        self.events.report_lag(self.name, self.position(), oldest);
        Ok(batch)
    }
}

/// The committed events after `position`, oldest first, at most `max`: the journal rows not
/// yet forgotten (from row `from_row`, moved on past the rows wholly behind `position`) and
/// the stored events, read up to the journal's head (in one snapshot), with the head when it is
/// past `position`.
pub(super) async fn committed_after(
    events: &Events,
    store: &Arc<Store>,
    position: Uuid,
    from_row: &mut u64,
    max: usize,
) -> Result<(Option<Uuid>, Vec<Arc<Event>>), StoreError> {
    let view = store.journal_view(Some(position), *from_row, max).await?;
    *from_row = view.from_row;
    let Some(head) = view.head.filter(|h| *h > position) else {
        return Ok((None, Vec::new()));
    };
    // Past every forgotten row, all it has not read is still journaled: the month files hold
    // nothing more (but what federation sites forwarded, which readers pass over).
    let stored = if view.forgotten_through.is_some_and(|f| f <= position) {
        Vec::new()
    } else {
        let tenants = store
            .tenants()
            .await?
            .into_iter()
            .map(|t| t.id)
            .chain([Uuid::nil()])
            .collect();
        events.stored_after(tenants, position, max).await?
    };
    let mut merged: BTreeMap<Uuid, Arc<Event>> =
        stored.into_iter().map(|e| (e.id, Arc::new(e))).collect();
    merged.extend(view.pending.into_iter().map(|e| (e.id, e)));
    let batch = merged
        .into_values()
        .filter(|e| e.id <= head)
        .take(max)
        .collect();
    Ok((Some(head), batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventType;
    use crate::runtime::Locked;
    use crate::runtime::{Metrics, SystemClock};
    use crate::store::events::EventStore;
    use serde_json::json;
    use std::collections::HashSet;
    use std::time::Duration;

    struct Rig {
        store: Arc<Store>,
        events: Arc<Events>,
        tenant: Uuid,
    }

    /// Files all but every fifth durable group: the others stay journaled, as if their
    /// process had died between the commit and the filing.
    struct Lossy {
        events: Arc<Events>,
        groups: std::sync::atomic::AtomicUsize,
    }

    impl crate::store::Filing for Lossy {
        fn file(
            self: Arc<Self>,
            journaled: Vec<crate::model::event::Journaled>,
        ) -> futures_util::future::BoxFuture<'static, ()> {
            let n = self
                .groups
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n % 5 == 4 {
                return Box::pin(async {});
            }
            crate::store::Filing::file(self.events.clone(), journaled)
        }
    }

    fn rig(dir: &std::path::Path) -> Rig {
        let clock = Arc::new(SystemClock);
        let store = Store::open(dir, clock.clone()).unwrap();
        let events = Events::new(
            EventStore::open(dir).unwrap(),
            clock,
            Arc::new(Metrics::new()),
        );
        let lossy = Lossy {
            events: events.clone(),
            groups: Default::default(),
        };
        store.file_with(Arc::new(lossy), tokio::runtime::Handle::current());
        Rig {
            store,
            events,
            tenant: Uuid::nil(),
        }
    }

    /// Producers journal `per_task` events each from `tasks` tasks; every fifth group is
    /// never filed (see `Lossy`). Returns the committed ids.
    async fn produce(rig: &Rig, tasks: usize, per_task: usize) -> Vec<Uuid> {
        let mut handles = Vec::new();
        for t in 0..tasks {
            let (store, tenant) = (rig.store.clone(), rig.tenant);
            handles.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..per_task {
                    let draft = EventDraft::new(
                        tenant,
                        EventType::System,
                        None,
                        json!({"input": true, "task": t, "n": n}),
                    );
                    ids.extend(store.journal_events(vec![draft]).await.unwrap());
                }
                ids
            }));
        }
        let mut ids = Vec::new();
        for h in handles {
            ids.extend(h.await.unwrap());
        }
        ids.sort();
        ids
    }

    /// The consumer's work: one `done` event per input event, committed with the position.
    async fn work(consumer: &mut Consumer, batch: &[Arc<Event>], per_event: Duration) {
        let mut done = Vec::new();
        for e in batch {
            if e.payload.get("input").is_some() {
                tokio::time::sleep(per_event).await;
                done.push(EventDraft::new(
                    e.tenant_id,
                    EventType::System,
                    None,
                    json!({"done": e.id}),
                ));
            }
        }
        let through = batch.last().map(|e| e.id).unwrap_or_default();
        consumer.commit(through, done).await.unwrap();
    }

    /// The `done` events the consumer committed, by the input they were for, in commit order.
    async fn done_for(rig: &Rig) -> Vec<Uuid> {
        read_after(rig, Uuid::nil(), 1000)
            .await
            .iter()
            .filter_map(|e| e.payload.get("done")?.as_str()?.parse::<Uuid>().ok())
            .collect()
    }

    /// Every event after `position`, read by a consumer standing there, `max` at a time (a new
    /// consumer starts at the head: it is moved to `position` instead).
    async fn read_after(rig: &Rig, position: Uuid, max: usize) -> Vec<Arc<Event>> {
        let mut reader = Consumer::open("reader", rig.events.clone(), rig.store.clone())
            .await
            .unwrap();
        reader.position = position;
        let mut out = Vec::new();
        loop {
            let batch = reader.read(max).await.unwrap();
            let Some(last) = batch.last() else {
                return out;
            };
            reader.position = last.id;
            out.extend(batch);
        }
    }

    /// Reads until the consumer has done every input in `inputs` and read everything after
    /// them (its own `done` events).
    async fn catch_up(consumer: &mut Consumer, inputs: &[Uuid], per_event: Duration) {
        let last = *inputs.last().unwrap();
        while consumer.position() < last {
            let batch = tokio::time::timeout(Duration::from_secs(30), consumer.next(16))
                .await
                .expect("the consumer is woken or polls")
                .unwrap();
            work(consumer, &batch, per_event).await;
        }
        loop {
            let batch = consumer.read(16).await.unwrap();
            if batch.is_empty() {
                return;
            }
            work(consumer, &batch, per_event).await;
        }
    }

    /// Once journal rows are forgotten, a reader behind them finds their events in the month
    /// files, and a reader past them reads the journal alone; each sees every event after its
    /// position once, in commit order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_behind_and_past_forgotten_rows_see_every_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let rig = rig(dir.path());
        let first = produce(&rig, 2, 10).await;
        rig.events.store.sync().await.unwrap();
        let filed = std::mem::take(&mut *rig.events.filed.locked());
        assert!(!filed.is_empty(), "the lossy filer filed most groups");
        rig.store.forget_journaled(filed, None).await.unwrap();
        let forgotten = rig
            .store
            .journal_view(None, 0, 100)
            .await
            .unwrap()
            .forgotten_through
            .expect("the newest forgotten event");
        let later = produce(&rig, 1, 10).await;

        let rig = &rig;
        let read_ids = |position| async move {
            let events = read_after(rig, position, 7).await;
            events.iter().map(|e| e.id).collect::<Vec<_>>()
        };
        let mut all = first.clone();
        all.extend(&later);
        assert_eq!(read_ids(Uuid::nil()).await, all, "from the start");
        let past: Vec<Uuid> = all.iter().copied().filter(|id| *id > forgotten).collect();
        assert!(past.len() >= later.len());
        assert_eq!(read_ids(forgotten).await, past, "from the mark");
        assert_eq!(read_ids(first[0]).await, all[1..], "from the first");
    }

    /// A consumer that sleeps per event, running while producers commit concurrently (some
    /// never filing), does every committed event exactly once, in commit order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_consumer_does_every_event_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let rig = rig(dir.path());
        let mut consumer = Consumer::open("slow", rig.events.clone(), rig.store.clone())
            .await
            .unwrap();
        let producing = {
            let rig = Rig {
                store: rig.store.clone(),
                events: rig.events.clone(),
                tenant: rig.tenant,
            };
            tokio::spawn(async move { produce(&rig, 4, 40).await })
        };
        let mut done = 0;
        while !producing.is_finished() || done == 0 {
            let batch = consumer.next(16).await.unwrap();
            done += batch.len();
            work(&mut consumer, &batch, Duration::from_millis(2)).await;
        }
        let inputs = producing.await.unwrap();
        catch_up(&mut consumer, &inputs, Duration::from_millis(2)).await;
        assert_eq!(
            done_for(&rig).await,
            inputs,
            "each input done once, in order"
        );
        assert_eq!(
            rig.events.consumer_lags()["slow"].lag_seconds,
            0.0,
            "caught up"
        );
    }

    /// A consumer killed mid-batch, again and again, resumes after its last committed
    /// position: every event is done exactly once, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_consumer_killed_mid_batch_does_every_event_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let rig = rig(dir.path());
        Consumer::open("killed", rig.events.clone(), rig.store.clone())
            .await
            .unwrap();
        let inputs = produce(&rig, 2, 100).await;
        for kill in 0..12u64 {
            let (events, store) = (rig.events.clone(), rig.store.clone());
            let task = tokio::spawn(async move {
                let mut consumer = Consumer::open("killed", events, store).await.unwrap();
                loop {
                    let batch = consumer.next(16).await.unwrap();
                    work(&mut consumer, &batch, Duration::from_millis(1)).await;
                }
            });
            // Killed at a different moment each time: inside a batch's work or its commit.
            tokio::time::sleep(Duration::from_millis(5 + kill * 3)).await;
            task.abort();
            let _ = task.await;
        }
        let mut consumer = Consumer::open("killed", rig.events.clone(), rig.store.clone())
            .await
            .unwrap();
        catch_up(&mut consumer, &inputs, Duration::ZERO).await;
        let done = done_for(&rig).await;
        assert_eq!(done.len(), inputs.len(), "nothing done twice or missed");
        assert_eq!(
            done.iter().collect::<HashSet<_>>().len(),
            inputs.len(),
            "no input done twice"
        );
        assert_eq!(done, inputs, "in commit order");
    }
}
