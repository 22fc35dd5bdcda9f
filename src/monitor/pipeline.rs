//! The results pipeline: passive results, active check outcomes and staleness observations
//! queue here and one worker applies them in arrival order, many submissions per transaction
//! (group commit: up to `BATCH_RESULTS` results or whatever is queued; results nobody waits on
//! gather for up to `GATHER` first). A submitter is answered once its results' states are
//! committed (or once queued, if it asked: `AnswerWhen`); their events and metric samples are
//! queued then and commit while the next group's states do (at most `STORING_GROUPS` groups
//! behind), and reads of events and metrics wait for what was queued before them, so an answer
//! after the commit is never ahead of what a client can read. The queue holds at most
//! `CAPACITY` results; a submitter waits up to `ROOM_WAIT` for room, then the pipeline counts as
//! stalled, as it does when the oldest queued submission has waited longer than `STALL_AFTER`.

use super::results::{Accepted, Job, ResultBatch, ResultError, Results};
use crate::auth::Principal;
use crate::model::health::PipelineStats;
use crate::model::state::CheckState;
use crate::runtime::intake::{Intake, Taking};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{Locked, Stopwatch};
use crate::store::{Promise, StoreError};
use futures_util::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, oneshot};

/// Queued results at most (the reference's results queue).
pub const CAPACITY: usize = 8192;
/// `/readyz` answers 503 from this depth on (SPEC 8).
pub const READY_LIMIT: usize = 8000;
/// Results applied in one transaction at most.
pub const BATCH_RESULTS: usize = 8192;
/// Applied groups whose events and samples may still be committing.
const STORING_GROUPS: usize = 4;
/// A group that nobody waits on (every submitter answered once queued) gathers for up to this
/// long, or until `GATHER_RESULTS` are queued, before it is applied: one transaction for many
/// one-result requests instead of one each.
const GATHER: Duration = Duration::from_millis(2);
const GATHER_RESULTS: usize = 256;
pub const STALL_AFTER: Duration = Duration::from_secs(10);
pub const ROOM_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("the results pipeline is stalled: {0}")]
    Stalled(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<PipelineError> for ResultError {
    fn from(e: PipelineError) -> Self {
        match e {
            PipelineError::Stalled(why) => ResultError::Stalled(why),
            PipelineError::Store(s) => ResultError::Store(s),
        }
    }
}

type Reply = oneshot::Sender<Result<Vec<CheckState>, StoreError>>;
type AppliedStates = oneshot::Receiver<Result<Vec<CheckState>, StoreError>>;

/// When a submitter of results is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerWhen {
    /// Once the results' states are durably committed: the default. Results that changed no
    /// state are answered once committed, and made durable within minutes (`Promise::Refreshing`).
    Applied,
    /// Once the results are queued (`Prefer: respond-async`), as Icinga 2's API and NSCA answer:
    /// a crash before their sync loses them, and a read right after may not show them yet. A
    /// group of only such results commits without waiting for its sync (`Promise::Committed`).
    Queued,
}

/// The states of queued jobs, once applied.
async fn states_once_applied(applied: AppliedStates) -> Result<Vec<CheckState>, PipelineError> {
    applied
        .await
        .map_err(|_| PipelineError::Stalled("the pipeline stopped".into()))?
        .map_err(PipelineError::Store)
}

struct Pending {
    jobs: Vec<Job>,
    answer: AnswerWhen,
    queued: Stopwatch,
    reply: Reply,
    permits: tokio::sync::OwnedSemaphorePermit,
    /// A submission of `POST /results` counts as taken in until its events are stored.
    taking: Option<Taking>,
}

pub struct Pipeline {
    results: Arc<Results>,
    queue: Mutex<VecDeque<Pending>>,
    room: Arc<Semaphore>,
    depth: AtomicUsize,
    applied: AtomicU64,
    batches: AtomicU64,
    wake: Arc<Notify>,
    intake: Arc<Intake>,
}

impl Pipeline {
    pub fn new(results: Arc<Results>, intake: Arc<Intake>) -> Arc<Self> {
        Arc::new(Self {
            results,
            intake,
            queue: Mutex::new(VecDeque::new()),
            room: Arc::new(Semaphore::new(CAPACITY)),
            depth: AtomicUsize::new(0),
            applied: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            wake: Arc::new(Notify::new()),
        })
    }

    pub fn results(&self) -> &Arc<Results> {
        &self.results
    }

    /// Results queued and not yet applied.
    pub fn depth(&self) -> usize {
        self.depth.load(Ordering::SeqCst)
    }

    /// Whether the oldest queued submission has waited longer than `STALL_AFTER`.
    pub fn stalled(&self) -> bool {
        self.queue
            .locked()
            .front()
            .is_some_and(|p| p.queued.elapsed() > STALL_AFTER)
    }

    pub fn stats(&self) -> PipelineStats {
        PipelineStats {
            queued: self.depth(),
            capacity: CAPACITY,
            stalled: self.stalled(),
            applied: self.applied.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }

    /// `POST /results`: checks the batch, queues what names known objects, answers once it
    /// is applied, or once it is queued when the client asked for that.
    pub async fn submit_results(
        &self,
        p: &Principal,
        batch: ResultBatch,
        answer: AnswerWhen,
    ) -> Result<Accepted, ResultError> {
        let taking = self.intake.begin(batch.results.len());
        let (jobs, rejected) = self.results.prepare(p, batch).await?;
        let accepted = jobs.len();
        let applied = self.enqueue(jobs, answer, Some(taking)).await?;
        if let (AnswerWhen::Applied, Some(applied)) = (answer, applied) {
            states_once_applied(applied).await?;
        }
        Ok(Accepted { accepted, rejected })
    }

    /// Queues jobs and waits until they are applied; returns their new states in order.
    pub async fn submit(&self, jobs: Vec<Job>) -> Result<Vec<CheckState>, PipelineError> {
        match self.enqueue(jobs, AnswerWhen::Applied, None).await? {
            Some(applied) => states_once_applied(applied).await,
            None => Ok(Vec::new()),
        }
    }

    /// Queues jobs once the queue has room for them; the answer to wait on for their states
    /// (`None`: no jobs, nothing queued).
    async fn enqueue(
        &self,
        jobs: Vec<Job>,
        answer: AnswerWhen,
        taking: Option<Taking>,
    ) -> Result<Option<AppliedStates>, PipelineError> {
        if jobs.is_empty() {
            return Ok(None);
        }
        if self.stalled() {
            return Err(PipelineError::Stalled(format!(
                "results have waited more than {}s",
                STALL_AFTER.as_secs()
            )));
        }
        // A batch larger than the whole queue waits for an empty queue.
        let wanted = u32::try_from(jobs.len().min(CAPACITY)).unwrap_or(u32::MAX);
        let permits = tokio::time::timeout(ROOM_WAIT, self.room.clone().acquire_many_owned(wanted))
            .await
            .map_err(|_| {
                PipelineError::Stalled(format!(
                    "the queue stayed full ({CAPACITY} results) for {}s",
                    ROOM_WAIT.as_secs()
                ))
            })?
            .map_err(|_| PipelineError::Stalled("the pipeline is shut down".into()))?;
        let (reply, applied) = oneshot::channel();
        self.depth.fetch_add(jobs.len(), Ordering::SeqCst);
        self.queue.locked().push_back(Pending {
            jobs,
            answer,
            queued: Stopwatch::start(),
            reply,
            permits,
            taking,
        });
        self.wake.notify_one();
        Ok(Some(applied))
    }

    /// Applies what is queued, a group of submissions per state transaction, answering each
    /// group once its states are committed; returns how many results were applied once their
    /// events and samples are stored too. Groups store in order, so the bus publishes their
    /// events in order.
    pub async fn drain(&self) -> usize {
        let mut total = 0;
        let mut storing: VecDeque<BoxFuture<'_, ()>> = VecDeque::new();
        loop {
            if storing.len() >= STORING_GROUPS {
                finish_oldest(&mut storing).await;
                continue;
            }
            if let Some(wait) = self.gathering() {
                tokio::time::sleep(wait).await;
            }
            let mut group = self.next_group();
            if group.is_empty() {
                if storing.is_empty() {
                    return total;
                }
                // A new submission starts its states while older groups still store.
                tokio::select! {
                    () = finish_oldest(&mut storing) => {}
                    () = self.wake.notified() => {}
                }
                continue;
            }
            let sizes: Vec<usize> = group.iter().map(|p| p.jobs.len()).collect();
            let jobs: Vec<Job> = group
                .iter_mut()
                .flat_map(|p| std::mem::take(&mut p.jobs))
                .collect();
            // A group nobody waits on commits without waiting for its sync, and one whose
            // results changed no state waits for it no longer than what a refresh may lose (see
            // `Promise`).
            let promise = if group.iter().all(|p| p.answer == AnswerWhen::Queued) {
                Promise::Committed
            } else {
                Promise::Refreshing
            };
            let taking: Vec<Taking> = group.iter_mut().filter_map(|p| p.taking.take()).collect();
            let apply = self.results.apply(jobs, promise);
            tokio::pin!(apply);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut apply => break outcome,
                    () = finish_oldest(&mut storing), if !storing.is_empty() => {}
                }
            };
            let states = match outcome {
                Ok(applied) => {
                    let stored = applied.stored;
                    storing.push_back(Box::pin(async move {
                        stored.await;
                        drop(taking);
                    }));
                    Ok(applied.states)
                }
                Err(e) => Err(e),
            };
            total += self.answer(group, sizes, states);
        }
    }

    /// How long the queued submissions still gather (see `GATHER`): none when one of them
    /// waits for its answer, when enough are queued, or once the oldest has waited `GATHER`.
    fn gathering(&self) -> Option<Duration> {
        let queue = self.queue.locked();
        let waited = queue.front()?.queued.elapsed();
        let gathers = waited < GATHER
            && self.depth() < GATHER_RESULTS
            && queue.iter().all(|p| p.answer == AnswerWhen::Queued);
        gathers.then(|| GATHER - waited)
    }

    /// Submissions for one state transaction: up to `BATCH_RESULTS` results, or one larger
    /// submission whole.
    fn next_group(&self) -> Vec<Pending> {
        let mut queue = self.queue.locked();
        let mut group = Vec::new();
        let mut count = 0;
        while let Some(front) = queue.front() {
            if count > 0 && count + front.jobs.len() > BATCH_RESULTS {
                break;
            }
            count += front.jobs.len();
            group.extend(queue.pop_front());
        }
        group
    }

    /// Answers a group's submitters with their states (or the failure) and frees its room in
    /// the queue; returns the number of results applied.
    fn answer(
        &self,
        group: Vec<Pending>,
        sizes: Vec<usize>,
        states: Result<Vec<CheckState>, StoreError>,
    ) -> usize {
        let count: usize = sizes.iter().sum();
        self.depth.fetch_sub(count, Ordering::SeqCst);
        self.batches.fetch_add(1, Ordering::Relaxed);
        let applied = match &states {
            Ok(_) => {
                self.applied.fetch_add(count as u64, Ordering::Relaxed);
                count
            }
            // Submitters answered once queued hear of it only here.
            Err(e) => {
                tracing::warn!(error = %e, results = count, "results not applied");
                0
            }
        };
        let mut states = states.map(Vec::into_iter);
        for (pending, size) in group.into_iter().zip(sizes) {
            let answer = match &mut states {
                Ok(iter) => Ok(iter.by_ref().take(size).collect()),
                Err(e) => Err(e.clone()),
            };
            let _ = pending.reply.send(answer);
            drop(pending.permits);
        }
        applied
    }
}

/// Waits until the oldest applied group's events and samples are stored.
async fn finish_oldest(storing: &mut VecDeque<BoxFuture<'_, ()>>) {
    if let Some(oldest) = storing.front_mut() {
        oldest.await;
        storing.pop_front();
    }
}

/// Applies queued results as they arrive.
pub struct PipelineWorker(pub Arc<Pipeline>);

impl Worker for PipelineWorker {
    fn name(&self) -> &'static str {
        "results-pipeline"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.0.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            self.0.drain().await;
            Wait::UntilWoken
        })
    }
}

/// Queues an UNKNOWN result for each object silent past its `stalenessAfter`, when the next one
/// falls due or the catalog changes (a new object to watch).
pub struct StalenessSweep {
    pipeline: Arc<Pipeline>,
    wake: Arc<Notify>,
}

/// The longest the staleness sweep sleeps without a wake: a bound, should one be missed.
const STALENESS_MAX_SLEEP: Duration = Duration::from_secs(3600);
/// After a failed sweep, the next try.
const STALENESS_RETRY: Duration = Duration::from_secs(5);

impl StalenessSweep {
    pub fn new(pipeline: Arc<Pipeline>) -> Self {
        Self {
            pipeline,
            wake: Arc::new(Notify::new()),
        }
    }
}

impl Worker for StalenessSweep {
    fn name(&self) -> &'static str {
        "staleness-sweep"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let results = &self.pipeline.results;
            match results.stale_jobs().await {
                Ok((jobs, next)) => {
                    if !jobs.is_empty()
                        && let Err(e) = self.pipeline.submit(jobs).await
                    {
                        tracing::warn!(error = %e, "stale results not applied");
                        return Wait::For(STALENESS_RETRY);
                    }
                    let now = results.now();
                    Wait::For(next.map_or(STALENESS_MAX_SLEEP, |n| {
                        n.since(now).min(STALENESS_MAX_SLEEP)
                    }))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "staleness sweep failed");
                    Wait::For(STALENESS_RETRY)
                }
            }
        })
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::object::{Object, ObjectKind};
    use crate::monitor::catalog::{Catalog, Entry};
    use crate::runtime::{Clock, TestClock};
    use crate::store::Store;
    use crate::store::metrics::MetricsStore;

    /// A pipeline on a fresh store, no worker running, and one host to make jobs for.
    fn pipeline_with_a_host() -> (Arc<Pipeline>, Arc<Entry>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let start: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let clock = Arc::new(TestClock::new(start));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let metrics = MetricsStore::open(dir.path()).unwrap();
        let catalog = Catalog::new(store.clone());
        let results = Results::new(store, catalog, metrics, clock.clone());
        let pipeline = Pipeline::new(results, Arc::default());
        let entry = Arc::new(Entry {
            object: Object {
                id: clock.new_id(),
                tenant_id: clock.new_id(),
                kind: ObjectKind::Host,
                name: "plc".into(),
                folder: "/".into(),
                host_id: None,
                labels: Default::default(),
                spec: Default::default(),
                created_at: start,
                updated_at: start,
                version: 1,
            },
            spec: Default::default(),
            config_error: None,
            host: Default::default(),
            parents: None,
            labels: Default::default(),
        });
        (pipeline, entry, dir)
    }

    /// No worker runs here: the test queues, watches the depth and stall reports, then
    /// drains by hand. Time is paused, so the waits cost nothing.
    #[tokio::test(start_paused = true)]
    async fn a_full_or_stuck_queue_is_reported_and_drains_in_order() {
        let (pipeline, entry, _dir) = pipeline_with_a_host();
        let jobs = |n: usize, state: u8| vec![Job::new(entry.clone(), state, "out", 1); n];
        let queued = pipeline.clone();
        let first = tokio::spawn({
            let jobs = jobs(READY_LIMIT, 1);
            async move { queued.submit(jobs).await }
        });
        while pipeline.depth() < READY_LIMIT {
            tokio::task::yield_now().await;
        }
        assert!(!pipeline.stalled());
        assert_eq!(pipeline.stats().queued, READY_LIMIT);
        // 8000 + 500 results do not fit in 8192: the submitter gives up after ROOM_WAIT.
        let full = pipeline.submit(jobs(500, 0)).await;
        assert!(matches!(full, Err(PipelineError::Stalled(_))), "{full:?}");
        tokio::time::advance(STALL_AFTER - ROOM_WAIT + Duration::from_secs(1)).await;
        assert!(pipeline.stalled(), "the oldest results waited over 10 s");
        let stuck = pipeline.submit(jobs(1, 0)).await;
        assert!(matches!(stuck, Err(PipelineError::Stalled(_))));
        assert_eq!(pipeline.drain().await, READY_LIMIT);
        let states = first.await.unwrap().unwrap();
        assert_eq!(states.len(), READY_LIMIT);
        assert_eq!(states[0].state, 1);
        assert_eq!((pipeline.depth(), pipeline.stalled()), (0, false));
        // With room again, a submission queues and is answered once drained.
        let again = tokio::spawn({
            let (p, jobs) = (pipeline.clone(), jobs(2, 0));
            async move { p.submit(jobs).await }
        });
        while pipeline.depth() < 2 {
            tokio::task::yield_now().await;
        }
        pipeline.drain().await;
        let states = again.await.unwrap().unwrap();
        assert_eq!(states.iter().map(|s| s.state).collect::<Vec<_>>(), [0, 0]);
    }

    /// Queues jobs whose submitter was answered once they are queued: nobody waits on them.
    async fn queue_unawaited(pipeline: &Pipeline, jobs: Vec<Job>) {
        let applied = pipeline
            .enqueue(jobs, AnswerWhen::Queued, None)
            .await
            .unwrap();
        drop(applied);
    }

    /// Submissions nobody waits on gather for up to `GATHER` into one transaction; a
    /// submitter that waits for its answer, or a gathering that is full, is applied at once.
    #[tokio::test(start_paused = true)]
    async fn unawaited_submissions_gather_into_one_transaction() {
        let (pipeline, entry, _dir) = pipeline_with_a_host();
        let jobs = |n: usize, state: u8| vec![Job::new(entry.clone(), state, "out", 1); n];
        let start = tokio::time::Instant::now();
        for state in [0, 2] {
            queue_unawaited(&pipeline, jobs(1, state)).await;
        }
        assert_eq!(pipeline.drain().await, 2);
        assert_eq!(pipeline.stats().batches, 1, "both in one transaction");
        assert!(start.elapsed() >= GATHER, "gathered first");

        let waiting = tokio::spawn({
            let (p, jobs) = (pipeline.clone(), jobs(1, 0));
            async move { p.submit(jobs).await }
        });
        while pipeline.depth() < 1 {
            tokio::task::yield_now().await;
        }
        queue_unawaited(&pipeline, jobs(1, 2)).await;
        let start = tokio::time::Instant::now();
        assert_eq!(pipeline.drain().await, 2);
        assert!(
            start.elapsed() < GATHER,
            "a waiting submitter is not kept waiting"
        );
        assert_eq!(waiting.await.unwrap().unwrap()[0].state, 0);

        queue_unawaited(&pipeline, jobs(GATHER_RESULTS, 0)).await;
        let start = tokio::time::Instant::now();
        assert_eq!(pipeline.drain().await, GATHER_RESULTS);
        assert!(
            start.elapsed() < GATHER,
            "a full gathering is applied at once"
        );
        assert_eq!(pipeline.stats().batches, 3);
    }
}
