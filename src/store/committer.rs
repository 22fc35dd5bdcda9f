//! The store's one writer thread, and its group commit. Every write is a job on one queue; the
//! thread takes what has queued up (at most `MAX_GROUP`), runs each job as its own transaction
//! committed without syncing, then makes the whole group durable with one empty transaction
//! committed durably (with quick repair), and only then answers the group's callers. Writes
//! serialize on the database's write lock anyway; one thread running them in turn shares one
//! fsync among all that arrived together, holds no thread per waiting caller, and leaves the
//! lock to nobody else. A write queued `Ahead` (the pager's, one at a time per worker) joins the
//! next group before every request write still waiting, so a page is not behind a burst. A write
//! that says it changed nothing (a timer sweep with nothing due) is aborted instead of committed,
//! and a group of only such writes is not synced: an idle box does not write. A write whose
//! caller does not wait for durability (`Promise::Committed`: results answered once queued), or
//! that only refreshed what is kept (`Promise::Refreshing` with no event: a result that changed
//! no state), is answered once committed, and a group of only such writes defers its sync: the
//! next group that is synced, or `DEFERRED_SYNC` (`REFRESH_SYNC` for writes that journaled
//! nothing) at the latest, makes it durable, so a stream of them shares one sync instead of one
//! a group. Once a group is durable, the events its writes journaled are
//! handed to the filing (event store, bus) in commit order, and each caller answered once
//! durable gets the future of their filing with the answer, and what sleeps on the tables the
//! group's writes changed is woken (`Store::committed`): no caller wakes anything by hand.

use super::audit::ChainHead;
use super::kv::Db;
use super::tx::{Tx, TxAbort, TxResult};
use super::{Filed, Store, StoreError};
use crate::model::event::Journaled;
use crate::runtime::Stopwatch;
use std::collections::{BTreeSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Weak;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

/// The most writes one sync covers: enough to empty a burst of requests, few enough that the
/// first of them does not wait long for the last.
const MAX_GROUP: usize = 16;
/// The longest a write answered once committed waits for its sync: what a crash may lose of them.
const DEFERRED_SYNC: Duration = Duration::from_millis(50);
/// The longest a write that only refreshed what is kept (`Promise::Refreshing` that journaled
/// nothing) waits for its sync, and metric samples for theirs: on a gateway's card a sync of
/// each file costs about 120 KB, a result that changes nothing a few hundred bytes of
/// information; at one sync of each per 10 minutes, 100 services once a minute write about
/// 40 MB a day (docs/performance.md, the card's wear).
pub(super) const REFRESH_SYNC: Duration = Duration::from_secs(600);
/// Writes whose sync is deferred at most: past them, the next sync is made at once.
const DEFERRED_WRITES: usize = 1024;

/// How to answer a job's caller once the group's sync is known, with the filing of the
/// group's events when it journaled any.
type Reply = Box<dyn FnOnce(Result<(), StoreError>, Option<Filed>) + Send>;
type Job = Box<dyn Write>;
type Queued = (Turn, Job);

/// Where a write joins the queue.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// Behind every write queued before it.
    InOrder,
    /// Before every `InOrder` write not yet running.
    Ahead,
}

/// When a write's caller is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promise {
    /// Once the write is durable.
    Durable,
    /// Once it is committed and readable, with no filing to wait for; it is made durable within
    /// `DEFERRED_SYNC` (`REFRESH_SYNC` when it journaled nothing), and a crash before that loses
    /// it (with its events, which are filed only once it is durable). Where a commit is not
    /// readable before its sync (PostgreSQL), it is synced at once.
    Committed,
    /// As `Durable` when it journaled events; when it journaled none (results that changed no
    /// state: a last check time, an output), as `Committed`, made durable within
    /// `REFRESH_SYNC` or by the next sync before it.
    Refreshing,
}

impl Promise {
    /// How long the sync of a write made with this promise may wait, given whether it
    /// journaled events; `None`: it is answered once durable.
    fn may_wait(self, journaled: bool) -> Option<Duration> {
        match (self, journaled) {
            (Promise::Durable, _) | (Promise::Refreshing, true) => None,
            (Promise::Committed, true) => Some(DEFERRED_SYNC),
            (Promise::Committed | Promise::Refreshing, false) => Some(REFRESH_SYNC),
        }
    }
}

/// What a write did in its transaction.
pub(super) enum Outcome {
    /// It wrote: commit it, and answer once the group is durable.
    Changed,
    /// It looked and wrote nothing: abort it, answer at once.
    Unchanged,
    /// It failed: abort it, answer at once with its error, and hand the kernel the store's
    /// failure that error carries, if any (`None`: a domain's refusal).
    Failed(Option<StoreError>),
}

/// One queued write.
pub(super) trait Write: Send {
    /// Runs the write in `tx`: what it did, and its reply.
    fn run(self: Box<Self>, tx: &Tx) -> (Outcome, Reply);
    /// Answers without running.
    fn refuse(self: Box<Self>, e: StoreError);
    fn promise(&self) -> Promise;
}

struct Pending<F, A> {
    f: F,
    answer: A,
    promise: Promise,
    /// The submitter's span (a request's, a consumer batch's): the transaction runs under it.
    caller: tracing::Span,
}

impl<F, A, T, E> Write for Pending<F, A>
where
    F: FnOnce(&Tx) -> TxResult<T, E> + Send,
    A: FnOnce(Result<T, E>, Option<Filed>) + Send + 'static,
    T: Send + 'static,
    E: TxAbort,
{
    fn run(self: Box<Self>, tx: &Tx) -> (Outcome, Reply) {
        let Pending {
            f, answer, caller, ..
        } = *self;
        let span =
            tracing::debug_span!(parent: &caller, "transaction", outcome = tracing::field::Empty);
        let out = span.in_scope(|| f(tx));
        let outcome = match &out {
            Ok(wrote) if wrote.changed() => Outcome::Changed,
            Ok(_) => Outcome::Unchanged,
            Err(e) => Outcome::Failed(e.store_error().cloned()),
        };
        span.record(
            "outcome",
            match outcome {
                Outcome::Changed => "changed",
                Outcome::Unchanged => "unchanged",
                Outcome::Failed(_) => "failed",
            },
        );
        let reply: Reply = Box::new(move |synced, filed| {
            let out = out.and_then(|wrote| synced.map(|()| wrote.into_inner()).map_err(E::from));
            answer(out, filed)
        });
        (outcome, reply)
    }

    fn refuse(self: Box<Self>, e: StoreError) {
        (self.answer)(Err(E::from(e)), None);
    }

    fn promise(&self) -> Promise {
        self.promise
    }
}

/// The queue's sending end, kept by the store.
pub(super) struct Committer {
    jobs: Sender<Queued>,
}

impl Committer {
    /// A committer whose thread starts with `spawn`.
    pub(super) fn new() -> (Committer, Receiver<Queued>) {
        let (jobs, queue) = channel();
        (Committer { jobs }, queue)
    }

    /// Starts the writer thread; it ends once the store is dropped.
    pub(super) fn spawn(store: Weak<Store>, queue: Receiver<Queued>) -> Result<(), StoreError> {
        std::thread::Builder::new()
            .name("svc-store-writer".into())
            .spawn(move || run(&store, &queue))
            .map(drop)
            .map_err(|e| StoreError::Internal(e.to_string()))
    }

    /// Queues `f` as one write transaction; `answer` has its outcome once it is durable (or
    /// committed, as `promise` says; or failed, or at once when `f` says it changed nothing),
    /// with the filing of its group's events. An answer dropped unanswered (the thread is gone,
    /// or `f` panicked) means `unanswered`.
    pub(super) fn submit<T: Send + 'static, E: TxAbort>(
        &self,
        turn: Turn,
        promise: Promise,
        f: impl FnOnce(&Tx) -> TxResult<T, E> + Send + 'static,
        answer: impl FnOnce(Result<T, E>, Option<Filed>) + Send + 'static,
    ) {
        let caller = tracing::Span::current();
        let pending = Pending {
            f,
            answer,
            promise,
            caller,
        };
        let _ = self.jobs.send((turn, Box::new(pending)));
    }
}

/// The answer of a job that never answered: its writer thread is gone or the job panicked.
pub(super) fn unanswered() -> StoreError {
    StoreError::Internal("the write was lost (store writer stopped or the write panicked)".into())
}

/// Groups committed and answered whose sync is deferred (`Promise::Committed`).
struct Unsynced {
    /// Since the first of them committed: their sync is due `due` after.
    since: Stopwatch,
    /// The least any of them may wait (`Promise::may_wait`).
    due: Duration,
    writes: usize,
    journaled: Vec<Journaled>,
    checkpoint: Option<ChainHead>,
    written: BTreeSet<String>,
}

impl Unsynced {
    fn new() -> Self {
        Self {
            since: Stopwatch::start(),
            due: REFRESH_SYNC,
            writes: 0,
            journaled: Vec::new(),
            checkpoint: None,
            written: BTreeSet::new(),
        }
    }
}

fn run(store: &Weak<Store>, queue: &Receiver<Queued>) {
    let (mut ahead, mut in_order) = (VecDeque::new(), VecDeque::new());
    let mut unsynced: Option<Unsynced> = None;
    loop {
        if ahead.is_empty() && in_order.is_empty() {
            let first = match &unsynced {
                None => queue.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(u) => queue.recv_timeout(u.due.saturating_sub(u.since.elapsed())),
            };
            match first {
                Ok(first) => file(first, &mut ahead, &mut in_order),
                Err(RecvTimeoutError::Timeout) => {
                    let Some(store) = store.upgrade() else {
                        return;
                    };
                    sync_deferred(&store, unsynced.take());
                    continue;
                }
                // The store is gone: closing the database made its commits durable (redb).
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        for queued in queue.try_iter() {
            file(queued, &mut ahead, &mut in_order);
        }
        let from_ahead = ahead.len().min(MAX_GROUP);
        let from_in_order = in_order.len().min(MAX_GROUP - from_ahead);
        let group: Vec<Job> = ahead
            .drain(..from_ahead)
            .chain(in_order.drain(..from_in_order))
            .collect();
        let Some(store) = store.upgrade() else {
            return;
        };
        commit_group(&store, group, &mut unsynced);
        // Checked after every group, so a stream of writes that sync nothing (or change
        // nothing) still makes the deferred ones durable in time.
        if unsynced
            .as_ref()
            .is_some_and(|u| u.writes >= DEFERRED_WRITES || u.since.elapsed() >= u.due)
        {
            sync_deferred(&store, unsynced.take());
        }
    }
}

fn file((turn, job): Queued, ahead: &mut VecDeque<Job>, in_order: &mut VecDeque<Job>) {
    match turn {
        Turn::Ahead => ahead.push_back(job),
        Turn::InOrder => in_order.push_back(job),
    }
}

fn commit_group(store: &Store, group: Vec<Job>, unsynced: &mut Option<Unsynced>) {
    let db = match store.handle() {
        Ok(db) => db,
        Err(e) => {
            for job in group {
                job.refuse(e.clone());
            }
            return;
        }
    };
    // Each committed write's reply, whether it journaled events (and so waits for them), and
    // whether it waits for the sync.
    let mut committed: Vec<(Reply, bool, Promise)> = Vec::with_capacity(group.len());
    let mut journaled: Vec<Journaled> = Vec::new();
    let mut checkpoint = None;
    let mut written = BTreeSet::new();
    for job in group {
        let promise = job.promise();
        match run_job(store, &db, job) {
            Ok(None) => {}
            Ok(Some(ran)) => {
                committed.push((ran.reply, !ran.journaled.is_empty(), promise));
                journaled.extend(ran.journaled);
                written.extend(ran.written);
                // An audit append that crossed a checkpoint boundary asked for one; it is
                // written once its transaction is durable.
                checkpoint = store.take_pending_checkpoint().or(checkpoint);
            }
            Err(e) => {
                store.take_pending_checkpoint();
                store.fail(&e);
            }
        }
    }
    if committed.is_empty() {
        if let Err(e) = db.discard_group() {
            store.fail(&e);
        }
        return;
    }
    let may_wait = committed
        .iter()
        .map(|(_, journaled, p)| p.may_wait(*journaled))
        .try_fold(REFRESH_SYNC, |least, wait| wait.map(|w| least.min(w)));
    if let Some(wait) = may_wait.filter(|_| db.commits_readable_unsynced()) {
        let deferred = unsynced.get_or_insert_with(Unsynced::new);
        deferred.due = deferred.due.min(wait);
        deferred.writes += committed.len();
        deferred.journaled.extend(journaled);
        deferred.checkpoint = checkpoint.or(deferred.checkpoint.take());
        deferred.written.extend(written);
        for (reply, _, _) in committed {
            reply(Ok(()), None);
        }
        return;
    }
    // This sync makes the deferred groups before it durable too; their events file first.
    if let Some(mut earlier) = unsynced.take() {
        earlier.journaled.append(&mut journaled);
        journaled = earlier.journaled;
        checkpoint = checkpoint.or(earlier.checkpoint);
        written.extend(earlier.written);
    }
    let durable = Durable {
        writes: committed.len(),
        journaled,
        checkpoint,
        written,
    };
    let (synced, filed) = sync(store, &db, durable);
    // Let go of the database before answering: a caller that closes the store next (a
    // shutdown, a reopen) finds the file's lock released.
    drop(db);
    for (reply, journaled, _) in committed {
        reply(synced.clone(), filed.clone().filter(|_| journaled));
    }
}

/// Makes the deferred groups durable, and files their events.
fn sync_deferred(store: &Store, deferred: Option<Unsynced>) {
    let Some(deferred) = deferred else {
        return;
    };
    // An offline store leaves them unfiled: their events stay journaled, and the filer stores
    // what the reopened database holds.
    let Ok(db) = store.handle() else {
        return;
    };
    // Nobody waits on the outcome: a failed sync takes the store offline (see `sync`).
    let durable = Durable {
        writes: deferred.writes,
        journaled: deferred.journaled,
        checkpoint: deferred.checkpoint,
        written: deferred.written,
    };
    let _ = sync(store, &db, durable);
}

/// What one sync makes durable: the writes committed since the last, the events they
/// journaled, the audit checkpoint they asked for and the tables they changed.
struct Durable {
    writes: usize,
    journaled: Vec<Journaled>,
    checkpoint: Option<ChainHead>,
    written: BTreeSet<String>,
}

/// Makes every write committed since the last sync durable, then writes the audit checkpoint
/// they asked for, hands their events to the filing and wakes what sleeps on the tables they
/// changed.
fn sync(store: &Store, db: &Db, durable: Durable) -> (Result<(), StoreError>, Option<Filed>) {
    let Durable {
        writes,
        journaled,
        checkpoint,
        written,
    } = durable;
    let synced = tracing::debug_span!("sync", writes).in_scope(|| db.sync(&written));
    store
        .syncs
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let filed = match &synced {
        Ok(()) => {
            if let Some(head) = checkpoint {
                store.write_checkpoint(&head);
            }
            store.committed(&written);
            store.journal_durable(journaled)
        }
        // Not known to be durable: the events stay journaled, and the filer stores what the
        // reopened database still holds.
        Err(e) => {
            store.fail(e);
            None
        }
    };
    (synced, filed)
}

/// A job committed, to be answered once synced.
struct Ran {
    reply: Reply,
    journaled: Vec<Journaled>,
    /// The tables it changed.
    written: BTreeSet<String>,
}

/// Runs one job in its own transaction and commits it without syncing: its reply, to be
/// answered once synced, the events it journaled and the tables it changed. A job that changed nothing is answered
/// here, its transaction aborted (`None`: nothing to sync). A job that failed, panicked or whose
/// commit failed is answered here, its transaction left uncommitted, and its error returned.
fn run_job(store: &Store, db: &Db, job: Job) -> Result<Option<Ran>, StoreError> {
    let tx = match db.begin_write() {
        Ok(tx) => tx,
        Err(e) => {
            job.refuse(e.clone());
            return Err(e);
        }
    };
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let kernel = Tx::new(store, &tx);
        let (outcome, reply) = job.run(&kernel);
        // A change that neither recorded itself nor said why not is a bug: the tests fail on it.
        let outcome = match outcome {
            Outcome::Changed if cfg!(debug_assertions) && !kernel.accounted_for() => {
                tracing::error!("a change without its audit entry or event; refused");
                Outcome::Failed(Some(StoreError::Internal(
                    "a change without its audit entry or event (see Tx::unrecorded)".into(),
                )))
            }
            other => other,
        };
        (outcome, reply, kernel.into_journaled())
    }));
    let Ok((outcome, reply, journaled)) = ran else {
        // The job's answer went with the unwinding.
        return Err(StoreError::Internal("a write panicked".into()));
    };
    match outcome {
        Outcome::Changed => {}
        Outcome::Unchanged => {
            drop(tx);
            reply(Ok(()), None);
            return Ok(None);
        }
        Outcome::Failed(failure) => {
            // The dropped transaction is aborted with its events; the reply carries the job's
            // own error, or this one when the job itself succeeded.
            drop(tx);
            reply(failure.clone().map_or(Ok(()), Err), None);
            return match failure {
                Some(e) => Err(e),
                // A domain's refusal: nothing failed, and nothing is left to write (an audit
                // checkpoint it asked for went with it).
                None => {
                    store.take_pending_checkpoint();
                    Ok(None)
                }
            };
        }
    }
    let written = tx.written();
    match tx.commit() {
        Ok(()) => Ok(Some(Ran {
            reply,
            journaled,
            written,
        })),
        Err(e) => {
            reply(Err(e.clone()), None);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kv::Readable;
    use super::super::{TxAbort, TxResult, Wrote};
    use super::*;
    use crate::runtime::clock::SystemClock;
    use redb::TableDefinition;
    use std::sync::Arc;

    const ROWS: TableDefinition<u32, u32> = TableDefinition::new("committer_test_rows");

    fn put(key: u32) -> impl FnOnce(&Tx) -> Result<u32, StoreError> + Send {
        move |tx| {
            tx.unrecorded("test rows");
            tx.open_table(ROWS)?.insert(key, key)?;
            Ok(key)
        }
    }

    fn queue<T: Send + 'static>(
        store: &Arc<Store>,
        turn: Turn,
        f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<T, StoreError>> {
        let store = store.clone();
        tokio::spawn(async move { store.write_in_turn(turn, f).await })
    }

    fn stored(store: &Store) -> Vec<u32> {
        let tx = store.handle().unwrap().begin_read().unwrap();
        let Ok(table) = tx.open_table(ROWS) else {
            return Vec::new();
        };
        table
            .iter()
            .unwrap()
            .map(|row| row.unwrap().0.value())
            .collect()
    }

    /// Writes queued together share a group: a failing and a panicking one among them are
    /// answered with their errors, leave nothing behind, and do not stop the others or the
    /// thread; an `Ahead` write runs before the `InOrder` ones queued before it.
    /// A domain's own error, as a transaction's body ends with one.
    #[derive(Debug)]
    enum Refusal {
        NotAllowed,
        Store(StoreError),
    }

    impl From<StoreError> for Refusal {
        fn from(e: StoreError) -> Self {
            Refusal::Store(e)
        }
    }

    impl TxAbort for Refusal {
        fn store_error(&self) -> Option<&StoreError> {
            match self {
                Refusal::Store(e) => Some(e),
                Refusal::NotAllowed => None,
            }
        }
    }

    /// A body that refuses in its domain's own error type is answered with that error, its
    /// writes undone, and the store stays online; the store's errors reach it through `?`.
    #[tokio::test]
    async fn a_domain_refusal_is_answered_as_itself_and_undoes_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let refused = store
            .transact(|tx| -> TxResult<(), Refusal> {
                put(1)(tx)?;
                Err(Refusal::NotAllowed)
            })
            .await;
        assert!(matches!(refused, Err(Refusal::NotAllowed)), "{refused:?}");
        assert!(stored(&store).is_empty());
        assert!(store.offline_reason().is_none());
        let wrote = store
            .transact(|tx| -> TxResult<u32, Refusal> { Ok(Wrote::Changed(put(2)(tx)?)) })
            .await
            .unwrap();
        assert_eq!((wrote, stored(&store)), (2, vec![2]));
    }

    #[tokio::test]
    async fn a_group_commits_each_write_alone_and_answers_each() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // Holds the thread in a write so that everything below queues behind it.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (holding, hold_started) = std::sync::mpsc::channel::<()>();
        let blocker = std::thread::spawn({
            let store = store.clone();
            move || {
                store.write_blocking(move |tx| {
                    holding.send(()).unwrap();
                    held.recv().unwrap();
                    put(0)(tx)
                })
            }
        });
        hold_started.recv().unwrap();
        let mut answers = Vec::new();
        for key in 1..=3 {
            let order = order.clone();
            answers.push(queue(&store, Turn::InOrder, move |tx| {
                order.lock().unwrap().push(key);
                put(key)(tx)
            }));
        }
        let failing = queue(&store, Turn::InOrder, |tx| {
            put(100)(tx)?;
            Err::<u32, _>(StoreError::Conflict("refused".into()))
        });
        let panicking = queue(&store, Turn::InOrder, |tx| -> Result<u32, StoreError> {
            put(200)(tx)?;
            panic!("a write that panics")
        });
        let first = {
            let order = order.clone();
            queue(&store, Turn::Ahead, move |tx| {
                order.lock().unwrap().push(9);
                put(9)(tx)
            })
        };
        // The spawned writes queue when first polled, which a yield of this single-threaded
        // runtime lets happen; then the blocker may finish.
        tokio::task::yield_now().await;
        release.send(()).unwrap();
        assert_eq!(blocker.join().unwrap().unwrap(), 0);
        assert_eq!(first.await.unwrap().unwrap(), 9);
        for (key, answer) in (1..=3).zip(answers) {
            assert_eq!(answer.await.unwrap().unwrap(), key);
        }
        assert!(matches!(
            failing.await.unwrap(),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            panicking.await.unwrap(),
            Err(StoreError::Internal(_))
        ));
        assert_eq!(*order.lock().unwrap(), [9, 1, 2, 3]);
        assert_eq!(stored(&store), [0, 1, 2, 3, 9]);
        assert_eq!(store.write(put(4)).await.unwrap(), 4, "the thread goes on");
    }

    /// A write that says it changed nothing is answered at once, leaves nothing behind (its
    /// transaction is aborted, whatever it did) and costs no sync; one that changed is synced.
    #[tokio::test]
    async fn a_write_that_changed_nothing_is_not_synced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let before = store.syncs();
        let looked = store
            .transact(|tx| -> TxResult<_> {
                put(7)(tx)?;
                Ok(Wrote::Unchanged("nothing due"))
            })
            .await
            .unwrap();
        assert_eq!(looked, "nothing due");
        assert_eq!(
            store.syncs(),
            before,
            "no sync for a write that changed nothing"
        );
        assert!(stored(&store).is_empty(), "its transaction was aborted");
        let wrote = store
            .transact(|tx| -> TxResult<_> { Ok(Wrote::Changed(put(8)(tx)?)) })
            .await
            .unwrap();
        assert_eq!(wrote, 8);
        assert_eq!(store.syncs(), before + 1);
        assert_eq!(stored(&store), [8]);
    }

    /// Records what the committer files: each group's event ids, and whether the filing ran.
    #[derive(Default)]
    struct Recorder {
        groups: std::sync::Mutex<Vec<Vec<uuid::Uuid>>>,
        filed: std::sync::atomic::AtomicUsize,
    }

    impl super::super::Filing for Recorder {
        fn file(
            self: Arc<Self>,
            journaled: Vec<Journaled>,
        ) -> futures_util::future::BoxFuture<'static, ()> {
            let ids = journaled.iter().map(|j| j.event.id).collect();
            self.groups.lock().unwrap().push(ids);
            Box::pin(async move {
                tokio::task::yield_now().await;
                self.filed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        }
    }

    fn draft(n: u32) -> crate::model::event::EventDraft {
        crate::model::event::EventDraft::new(
            uuid::Uuid::nil(),
            crate::model::event::EventType::System,
            None,
            serde_json::json!({"n": n}),
        )
    }

    /// Events leave by the kernel, never by hand: a durable write's events reach the filing in
    /// commit order and its caller is answered once they are filed; a failed or unchanged
    /// write's events go nowhere, and a write without events asks for no filing.
    #[tokio::test]
    async fn durable_writes_are_filed_in_commit_order_and_aborted_ones_never() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let recorder = Arc::new(Recorder::default());
        store.file_with(recorder.clone(), tokio::runtime::Handle::current());
        let journal = |store: &Arc<Store>, n: u32, outcome: Result<bool, StoreError>| {
            let kernel = store.clone();
            let store = store.clone();
            async move {
                store
                    .transact(move |tx| -> TxResult<_> {
                        kernel.journal(tx, vec![draft(n), draft(n + 1)])?;
                        Ok(Wrote::new(tx.journaled_ids(), outcome?))
                    })
                    .await
            }
        };
        let first = journal(&store, 1, Ok(true)).await.unwrap();
        assert_eq!(
            recorder.filed.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "answered after the filing"
        );
        assert!(matches!(
            journal(&store, 3, Err(StoreError::Conflict("no".into()))).await,
            Err(StoreError::Conflict(_))
        ));
        journal(&store, 5, Ok(false)).await.unwrap();
        store.write(put(1)).await.unwrap();
        let second = journal(&store, 7, Ok(true)).await.unwrap();
        assert_eq!(*recorder.groups.lock().unwrap(), vec![first, second]);
        assert_eq!(recorder.filed.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// Writes answered once committed are readable at once and share their syncs: a run of
    /// them one after another costs a sync per `DEFERRED_SYNC` (or per `DEFERRED_WRITES`), not
    /// one each. Their events are filed only once durable, in commit order, also when a write
    /// answered once durable makes them so; and with nothing more to write, the last of them is
    /// made durable by itself.
    #[tokio::test]
    async fn writes_answered_once_committed_share_their_syncs_and_file_in_commit_order() {
        const WRITES: u32 = 200;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let recorder = Arc::new(Recorder::default());
        store.file_with(recorder.clone(), tokio::runtime::Handle::current());
        let write = |n: u32, promise: Promise| {
            let kernel = store.clone();
            let store = store.clone();
            async move {
                store
                    .write_filing_later(promise, move |tx| {
                        kernel.journal(tx, vec![draft(n)])?;
                        tx.open_table(ROWS)?.insert(n, n)?;
                        Ok(tx.journaled_ids())
                    })
                    .await
                    .unwrap()
            }
        };
        let durable_filings = |r: &Recorder| r.groups.lock().unwrap().concat();
        let before = store.syncs();
        let mut journaled = Vec::new();
        for n in 0..WRITES {
            let (ids, filed) = write(n, Promise::Committed).await;
            assert!(stored(&store).contains(&n), "readable once answered");
            assert!(filed.is_none(), "its caller waits for no filing");
            // Whatever was filed by now was synced first.
            assert!(durable_filings(&recorder).is_empty() || store.syncs() > before);
            journaled.extend(ids);
        }
        let shared = store.syncs() - before;
        assert!(
            shared < u64::from(WRITES) / 2,
            "{shared} syncs for {WRITES} writes"
        );
        let (last, filed) = write(WRITES, Promise::Durable).await;
        journaled.extend(last);
        // Its filing comes after every deferred write's before it.
        filed.unwrap().await;
        assert_eq!(
            durable_filings(&recorder),
            journaled,
            "filed once, in commit order"
        );
        let (alone, _) = write(WRITES + 1, Promise::Committed).await;
        let synced = Stopwatch::start();
        while durable_filings(&recorder).last() != alone.last() {
            assert!(
                synced.elapsed() < Duration::from_secs(10),
                "never synced by itself"
            );
            tokio::time::sleep(DEFERRED_SYNC / 5).await;
        }
        journaled.extend(alone);
        assert_eq!(
            durable_filings(&recorder),
            journaled,
            "filed once, in order"
        );
    }

    /// Writes that only refresh (`Promise::Refreshing`, nothing journaled) are answered once
    /// committed and share a sync that waits up to `REFRESH_SYNC`, made sooner by any write
    /// that must be durable; one that journals events is answered once durable, with its
    /// filing.
    #[tokio::test]
    async fn refreshing_writes_wait_for_a_later_sync_unless_they_journal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let recorder = Arc::new(Recorder::default());
        store.file_with(recorder.clone(), tokio::runtime::Handle::current());
        let before = store.syncs();
        for n in 0..50 {
            let (_, filed) = store
                .write_filing_later(Promise::Refreshing, move |tx| {
                    tx.open_table(ROWS)?.insert(n, n)?;
                    tx.unrecorded("a test's refresh");
                    Ok(())
                })
                .await
                .unwrap();
            assert!(filed.is_none());
            assert!(stored(&store).contains(&n), "readable once answered");
        }
        tokio::time::sleep(DEFERRED_SYNC * 4).await;
        assert_eq!(store.syncs(), before, "no sync for what only refreshed");
        let kernel = store.clone();
        let (ids, filed) = store
            .write_filing_later(Promise::Refreshing, move |tx| {
                kernel.journal(tx, vec![draft(99)])?;
                Ok(tx.journaled_ids())
            })
            .await
            .unwrap();
        filed.expect("an event is filed once durable").await;
        assert_eq!(store.syncs(), before + 1, "one sync for all of them");
        assert_eq!(recorder.groups.lock().unwrap().concat(), ids);
    }
}
