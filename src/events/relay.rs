//! The relay: where several processes write one database (PostgreSQL), each process's bus (its
//! SSE clients) gets every committed event, its own and the others', from the journal in
//! commit order, as a durable consumer reads it but from an in-memory position: it starts at
//! the head when the process starts (an SSE client resumes from the event store by its
//! `Last-Event-ID`). The store wakes it after this process's durable groups and on the
//! others' commit notices. A write of this process answers once the relay published its
//! events (see `Events`), as where a process publishes its own. Events a federation site
//! forwarded keep the site's ids and are not journaled: the process that stored them publishes
//! them and announces their keys, and every other process's relay reads and publishes them.

use super::Events;
use super::consumer::committed_after;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::events::EventKey;
use crate::store::{Change, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// Events read and published per step.
const BATCH: usize = 1000;

/// A failed read is tried again after this long (or at the next wake).
const RETRY_EVERY: Duration = Duration::from_secs(1);

pub struct EventRelay {
    events: Arc<Events>,
    store: Arc<Store>,
    /// The newest event published; read from the journal's head at the first step.
    position: Option<Uuid>,
    /// The journal row its next read starts at (see `JournalView::from_row`).
    journal_from: u64,
    /// Forwarded events announced and not published yet.
    forwarded: Vec<EventKey>,
    wake: Arc<Notify>,
}

impl EventRelay {
    /// From now on, the bus of `events` gets committed events from this relay only.
    pub fn new(events: Arc<Events>, store: Arc<Store>) -> Self {
        let wake = Arc::new(Notify::new());
        store.watch_journal(&wake);
        store.watch_commits(Change::Forwarded, wake.clone());
        events
            .relayed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Self {
            events,
            store,
            position: None,
            journal_from: 0,
            forwarded: Vec::new(),
            wake,
        }
    }

    /// Publishes the forwarded events other processes announced since its last step (this
    /// process published its own as it stored them).
    async fn relay_forwarded(&mut self) -> Result<(), StoreError> {
        let own = self.events.store.announcer().to_string();
        for announced in self.store.take_forwarded() {
            let (announcer, keys) = EventKey::parse_announcement(&announced);
            if announcer != own {
                self.forwarded.extend(keys);
            }
        }
        if self.forwarded.is_empty() {
            return Ok(());
        }
        let (store, keys) = (self.events.store.clone(), self.forwarded.clone());
        let found = crate::store::blocking(move || store.by_keys(&keys)).await?;
        self.forwarded.clear();
        for event in found {
            self.events.bus.publish(Arc::new(event)).await;
        }
        Ok(())
    }

    /// Publishes the next committed events; whether it read a whole batch (more may wait).
    async fn relay(&mut self) -> Result<bool, StoreError> {
        self.relay_forwarded().await?;
        let position = match self.position {
            Some(at) => at,
            None => {
                let head = self.store.journal_head().await?.unwrap_or(Uuid::nil());
                // What was committed before is not live; its filing does not wait for this.
                self.events.relayed_through.send_replace(head);
                *self.position.insert(head)
            }
        };
        let (_, batch) = committed_after(
            &self.events,
            &self.store,
            position,
            &mut self.journal_from,
            BATCH,
        )
        .await?;
        for event in &batch {
            self.events.bus.publish(event.clone()).await;
        }
        if let Some(last) = batch.last() {
            self.position = Some(last.id);
            self.events.relayed_through.send_replace(last.id);
        }
        Ok(batch.len() == BATCH)
    }
}

impl Worker for EventRelay {
    fn name(&self) -> &'static str {
        "event-relay"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.relay().await {
                Ok(true) => Wait::For(Duration::ZERO),
                Ok(false) => Wait::UntilWoken,
                Err(e) => {
                    tracing::debug!(error = %e, "committed events not relayed yet");
                    Wait::For(RETRY_EVERY)
                }
            }
        })
    }
}
