//! The event filer: the other half of the event journal. Producers that journal their events
//! with their cause store them in the month files themselves right after the commit
//! (`Events::file`); the filer forgets the journal rows of what was stored, and stores what
//! was not (left by a crash, or by a failed append) from the journal, oldest first, publishing
//! each once stored. Storing an event twice is a no-op (month-file rows are keyed by id), so
//! every committed event ends up in the event store exactly once.

use super::{Events, lock};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Journal rows (each one transaction's events) read per round of refiling.
const REFILE_BATCH: usize = 64;
/// How often stored events' journal rows are forgotten (one small transaction).
const FORGET_EVERY: Duration = Duration::from_secs(1);
/// How soon a failed refile is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(1);

pub struct EventFiler {
    events: Arc<Events>,
    store: Arc<Store>,
}

impl EventFiler {
    pub fn new(events: Arc<Events>, store: Arc<Store>) -> Self {
        Self { events, store }
    }

    /// Forgets the journal rows of events already stored.
    async fn forget_filed(&self) -> Result<(), StoreError> {
        let seqs = std::mem::take(&mut *lock(&self.events.filed));
        if seqs.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.store.forget_journaled(seqs.clone()).await {
            lock(&self.events.filed).extend(seqs);
            return Err(e);
        }
        Ok(())
    }

    /// Stores every journaled event not stored yet, oldest first, and publishes each once
    /// stored; returns how many. Run before the producers start, and after a failed append.
    pub async fn refile(&self) -> Result<usize, StoreError> {
        let refiled = self.refile_all().await;
        if let Err(e) = &refiled {
            *lock(&self.events.unfiled) = Some(e.to_string());
        }
        refiled
    }

    async fn refile_all(&self) -> Result<usize, StoreError> {
        let mut refiled = 0;
        loop {
            self.forget_filed().await?;
            let stored: HashSet<u64> = lock(&self.events.filed).iter().copied().collect();
            let rows: Vec<_> = self
                .store
                .journaled(REFILE_BATCH)
                .await?
                .into_iter()
                .filter(|j| !stored.contains(&j.seq))
                .collect();
            if rows.is_empty() {
                *lock(&self.events.unfiled) = None;
                return Ok(refiled);
            }
            refiled += rows.len();
            self.events.file(rows).await?;
        }
    }
}

impl Worker for EventFiler {
    fn name(&self) -> &'static str {
        "event-filer"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.events.filer.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if self.events.unfiled_reason().is_some() {
                match self.refile().await {
                    Ok(n) => tracing::info!(events = n, "journaled events stored"),
                    Err(e) => {
                        tracing::warn!(error = %e, "journaled events still not stored");
                        return Wait::For(RETRY_EVERY);
                    }
                }
            }
            if let Err(e) = self.forget_filed().await {
                tracing::debug!(error = %e, "journal rows not forgotten yet");
            }
            Wait::For(FORGET_EVERY)
        })
    }
}
