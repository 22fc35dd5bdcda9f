//! The event filer: the other half of the event journal. Producers that journal their events
//! with their cause store them in the month files themselves right after the commit
//! (`Events::file`); the filer forgets the journal rows of what was stored, and stores what
//! was not (left by a crash, or by a failed append) from the journal, oldest first, publishing
//! each once stored. Storing an event twice is a no-op (month-file rows are keyed by id), so
//! every committed event ends up in the event store exactly once.

use super::Events;
use crate::model::Timestamp;
use crate::model::event::{Journaled, first_id_at};
use crate::runtime::Locked;
use crate::runtime::Stopwatch;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Journal rows (each one transaction's events) read per round of refiling.
const REFILE_BATCH: usize = 64;
/// Stored events' journal rows are forgotten at most this often (one small transaction for a
/// burst of filings).
const FORGET_EVERY: Duration = Duration::from_secs(1);
/// A stored row that a durable consumer has not read all of is kept this long after its
/// events were stamped: a consumer a moment behind the filer then reads it from the journal's
/// recent rows in memory, instead of decoding it from the month files. (Under batches of 500
/// results, forgetting each second all that was stored left the alert engine, 0.1 s behind,
/// decoding from the month files what it had not read: up to half the request threads' CPU.)
const KEEP_FOR_CONSUMERS: Duration = Duration::from_secs(10);
/// How soon a failed refile is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// A journal row still there this long after its events were stamped lost its producer before
/// it filed them (a dropped request, say): the filer stores them instead.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// What a look for abandoned journal rows found.
#[derive(Debug, PartialEq, Eq)]
pub struct Abandoned {
    /// Rows' events stored because their producer left them.
    pub stored: usize,
    /// When the youngest row still waiting for its producer would be abandoned.
    pub next_look: Option<Timestamp>,
}

/// Sleeps until something is due: forgetting stored rows, or a journal row becoming abandoned.
/// It is woken by filings and by durable journal writes; an idle box wakes it never.
pub struct EventFiler {
    events: Arc<Events>,
    store: Arc<Store>,
    last_forget: Option<Stopwatch>,
    next_look: Option<Timestamp>,
}

impl EventFiler {
    pub fn new(events: Arc<Events>, store: Arc<Store>) -> Self {
        store.watch_journal(&events.filer);
        Self {
            events,
            store,
            last_forget: None,
            next_look: None,
        }
    }

    /// Forgets the journal rows of events already stored, once the month files hold them
    /// durably (they commit journaled events without syncing), but those the durable consumers
    /// have not read yet, for up to `KEEP_FOR_CONSUMERS`: they stay to be forgotten later.
    async fn forget_filed(&self) -> Result<(), StoreError> {
        let seqs = std::mem::take(&mut *self.events.filed.locked());
        if seqs.is_empty() {
            return Ok(());
        }
        let old = first_id_at(self.events.clock.now().minus(KEEP_FOR_CONSUMERS));
        let through = self.events.consumed_through().map(|c| c.max(old));
        let forgotten = async {
            self.events.store.sync().await?;
            self.store.forget_journaled(seqs.clone(), through).await
        };
        match forgotten.await {
            Ok(kept) => {
                self.events.filed.locked().extend(kept);
                Ok(())
            }
            Err(e) => {
                self.events.filed.locked().extend(seqs);
                Err(e)
            }
        }
    }

    /// Stores every journaled event not stored yet, oldest first, and publishes each once
    /// stored; returns how many. Run before the producers start, and after a failed append.
    pub async fn refile(&self) -> Result<usize, StoreError> {
        let refiled = self.refile_all().await;
        if let Err(e) = &refiled {
            *self.events.unfiled.locked() = Some(e.to_string());
        }
        refiled
    }

    /// The events of the oldest journal rows not stored yet.
    async fn unstored(&self) -> Result<Vec<Journaled>, StoreError> {
        let stored: HashSet<u64> = self.events.filed.locked().iter().copied().collect();
        self.store.journaled(REFILE_BATCH, stored).await
    }

    /// Stores the events of journal rows older than `ABANDONED_AFTER` that nobody filed.
    pub async fn file_abandoned(&self) -> Result<Abandoned, StoreError> {
        let horizon = self.events.clock.now().as_millis()
            - i64::try_from(ABANDONED_AFTER.as_millis()).unwrap_or(i64::MAX);
        let (abandoned, waiting): (Vec<_>, Vec<_>) = self
            .unstored()
            .await?
            .into_iter()
            .partition(|j| j.event.ts.as_millis() < horizon);
        let stored = abandoned.len();
        if stored > 0 {
            self.events.file(abandoned).await?;
        }
        let next_look = waiting
            .iter()
            .map(|j| j.event.ts)
            .min()
            .map(|ts| ts.plus(ABANDONED_AFTER));
        Ok(Abandoned { stored, next_look })
    }

    async fn refile_all(&self) -> Result<usize, StoreError> {
        let mut refiled = 0;
        loop {
            self.forget_filed().await?;
            let rows = self.unstored().await?;
            if rows.is_empty() {
                *self.events.unfiled.locked() = None;
                return Ok(refiled);
            }
            refiled += rows.len();
            self.events.file(rows).await?;
        }
    }
}

impl EventFiler {
    /// Forgets stored rows unless it did less than `FORGET_EVERY` ago; how long until it may.
    async fn forget_when_due(&mut self) -> Option<Duration> {
        if self.events.filed.locked().is_empty() {
            return None;
        }
        let since = self.last_forget.map_or(FORGET_EVERY, |at| at.elapsed());
        if since < FORGET_EVERY {
            return Some(FORGET_EVERY - since);
        }
        self.last_forget = Some(Stopwatch::start());
        match self.forget_filed().await {
            Ok(()) if self.events.filed.locked().is_empty() => None,
            Ok(()) => Some(FORGET_EVERY),
            Err(e) => {
                tracing::debug!(error = %e, "journal rows not forgotten yet");
                Some(FORGET_EVERY)
            }
        }
    }

    /// Looks for abandoned rows once one may be: a wake means a durable journal write or a
    /// filing, whose rows are abandoned at the earliest `ABANDONED_AFTER` from now. How long
    /// until the next look.
    async fn look_when_due(&mut self) -> Option<Duration> {
        let now = self.events.clock.now();
        let due = *self.next_look.get_or_insert(now.plus(ABANDONED_AFTER));
        if due > now {
            return Some(until(now, due));
        }
        match self.file_abandoned().await {
            Ok(found) => {
                if found.stored > 0 {
                    tracing::warn!(
                        events = found.stored,
                        "stored journaled events their producer left"
                    );
                }
                self.next_look = found.next_look;
            }
            Err(e) => {
                tracing::debug!(error = %e, "abandoned journal rows not stored yet");
                self.next_look = Some(now.plus(RETRY_EVERY));
            }
        }
        self.next_look.map(|due| until(now, due))
    }
}

/// The time from `now` to `due`, nothing when it has passed.
fn until(now: Timestamp, due: Timestamp) -> Duration {
    Duration::from_millis(u64::try_from(due.as_millis() - now.as_millis()).unwrap_or(0))
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
            let forget = self.forget_when_due().await;
            let look = self.look_when_due().await;
            match forget.into_iter().chain(look).min() {
                Some(d) => Wait::For(d),
                None => Wait::UntilWoken,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::event::{EventDraft, EventFilter, EventType};
    use crate::runtime::{Clock, Metrics, TestClock};
    use crate::store::events::EventStore;
    use crate::store::{TxResult, Wrote};
    use uuid::Uuid;

    struct Rig {
        clock: Arc<TestClock>,
        store: Arc<Store>,
        events: Arc<Events>,
        tenant: Uuid,
    }

    async fn rig(dir: &std::path::Path) -> Rig {
        let start: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let clock = Arc::new(TestClock::new(start));
        let store = Store::open(dir, clock.clone()).unwrap();
        let tenant = store.tenants().await.unwrap()[0].id;
        let events = Events::new(
            EventStore::open(dir).unwrap(),
            clock.clone(),
            Arc::new(Metrics::new()),
        );
        Rig {
            clock,
            store,
            events,
            tenant,
        }
    }

    /// Journals event `n` with a change in one transaction (one journal row), not filed.
    async fn journal_one(rig: &Rig, n: u32) {
        let (clock, tenant) = (&rig.clock, rig.tenant);
        let draft = EventDraft::new(tenant, EventType::System, None, serde_json::json!({"n": n}));
        let audit = crate::model::audit::AuditDraft::new(
            clock.now(),
            tenant,
            &crate::model::identity::Actor::system("test"),
            "template.create",
            format!("templates/t{n}"),
        );
        let doc = crate::model::config::ConfigDoc {
            id: clock.new_id(),
            tenant_id: tenant,
            kind: "templates".into(),
            name: format!("t{n}"),
            created_at: clock.now(),
            updated_at: clock.now(),
            version: 1,
            body: r#"{"spec":{}}"#.into(),
        };
        rig.store
            .transact(move |tx| -> TxResult<_> {
                tx.insert_config_doc(&doc)?;
                tx.record([audit], vec![draft])?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap()
    }

    /// Events journaled by a producer that never filed them reach the event store through the
    /// filer, at start-up and once they are old enough, each once.
    #[tokio::test]
    async fn journaled_events_nobody_filed_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let rig = rig(dir.path()).await;
        let (clock, events, tenant) = (rig.clock.clone(), rig.events.clone(), rig.tenant);
        let journal_one = |n| journal_one(&rig, n);
        let filter = EventFilter {
            tenant_id: tenant,
            types: vec![EventType::System],
            ..Default::default()
        };
        let filer = EventFiler::new(events.clone(), rig.store.clone());
        // Left by a "crash": stored at start-up.
        journal_one(1).await;
        assert_eq!(filer.refile().await.unwrap(), 1);
        // Left by a dropped request: stored once old enough, not before.
        let journaled_at = clock.now();
        journal_one(2).await;
        assert_eq!(
            filer.file_abandoned().await.unwrap(),
            Abandoned {
                stored: 0,
                next_look: Some(journaled_at.plus(ABANDONED_AFTER)),
            },
            "looked at again once it would be abandoned"
        );
        clock.advance(ABANDONED_AFTER + Duration::from_secs(1));
        assert_eq!(filer.file_abandoned().await.unwrap().stored, 1);
        filer.forget_filed().await.unwrap();
        assert_eq!(
            filer.file_abandoned().await.unwrap(),
            Abandoned {
                stored: 0,
                next_look: None,
            },
            "forgotten once stored, and nothing left to look at"
        );
        assert_eq!(filer.refile().await.unwrap(), 0);
        let stored = events.list(filter, None, 10).await.unwrap();
        let mut ns: Vec<_> = stored
            .iter()
            .map(|e| e.payload["n"].as_u64().unwrap())
            .collect();
        ns.sort_unstable();
        assert_eq!(ns, [1, 2]);
    }

    /// Stored rows that a durable consumer has not read all of stay journaled, for it to read
    /// from memory, until it has read them or they are `KEEP_FOR_CONSUMERS` old.
    #[tokio::test]
    async fn rows_a_consumer_has_not_read_stay_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let rig = rig(dir.path()).await;
        let filer = EventFiler::new(rig.events.clone(), rig.store.clone());
        let journaled = || async {
            let view = rig.store.journal_view(None, 0, 10).await.unwrap();
            view.pending.iter().map(|e| e.id).collect::<Vec<_>>()
        };
        for n in 1..=3 {
            journal_one(&rig, n).await;
        }
        let ids = journaled().await;
        assert_eq!(ids.len(), 3);
        rig.events.report_lag("reader", ids[0], None);
        assert_eq!(filer.refile().await.unwrap(), 3, "stored");
        filer.forget_filed().await.unwrap();
        assert_eq!(
            journaled().await,
            ids[1..],
            "the rows after the reader stay"
        );
        rig.events.report_lag("reader", ids[1], None);
        filer.forget_filed().await.unwrap();
        assert_eq!(journaled().await, ids[2..], "and go once it read them");
        rig.clock
            .advance(KEEP_FOR_CONSUMERS + Duration::from_secs(1));
        filer.forget_filed().await.unwrap();
        assert!(journaled().await.is_empty(), "or once they are old");
        assert!(rig.events.filed.locked().is_empty());
    }
}
