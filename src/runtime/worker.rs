//! Background loops as `Worker`s run by one `Supervisor`: a panicked worker is restarted after a
//! delay that doubles while it keeps panicking, every worker's state is visible in
//! `/api/v1/system/health` (and one restarting makes `/readyz` not ready), and shutdown waits
//! for the workers up to an exit deadline. A worker can also be stopped alone, by its handle (an
//! event source's listener when the source goes). `Task` runs a long-lived future as a worker.

use super::Shutdown;
use super::locks::Locked;
use crate::model::health::{WorkerState, WorkerStatus};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::Instrument;

pub type StepFuture<'a> = Pin<Box<dyn Future<Output = Wait> + Send + 'a>>;

/// How long a step still running at shutdown may go on.
const STEP_GRACE: Duration = Duration::from_secs(2);

/// The longest wait before restarting a worker that keeps panicking.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(60);

/// What a worker waits for before its next step. A wake-up on the worker's `Notify` ends any wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Step again after this long.
    For(Duration),
    /// Step again only when woken.
    UntilWoken,
    /// The worker has finished for good.
    Done,
}

pub trait Worker: Send + 'static {
    fn name(&self) -> &'static str;
    /// Which one of several workers of a kind this is (an event source's listener): shown as
    /// `name/instance`.
    fn instance(&self) -> Option<String> {
        None
    }
    /// One unit of work. Errors are the worker's to log; a panic is caught by the supervisor.
    fn step(&mut self) -> StepFuture<'_>;
    /// Wakes the worker before its wait is over.
    fn waker(&self) -> Option<Arc<Notify>> {
        None
    }
}

/// Whether this process leads (several processes on one PostgreSQL database): taken once,
/// awaited by the `Led` workers.
#[derive(Default)]
pub struct Lead {
    taken: std::sync::atomic::AtomicBool,
    changed: Notify,
}

impl Lead {
    pub fn take(&self) {
        self.taken.store(true, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    pub fn is_taken(&self) -> bool {
        self.taken.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves once this process leads.
    pub async fn taken(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.is_taken() {
                return;
            }
            changed.await;
        }
    }
}

/// A worker only the leading process runs (a consumer, a sweep, a courier): its first step
/// waits for the lead.
pub struct Led<W> {
    pub worker: W,
    pub lead: Arc<Lead>,
}

impl<W: Worker> Worker for Led<W> {
    fn name(&self) -> &'static str {
        self.worker.name()
    }

    fn instance(&self) -> Option<String> {
        self.worker.instance()
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            self.lead.taken().await;
            self.worker.step().await
        })
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        self.worker.waker()
    }
}

type States = Arc<Mutex<BTreeMap<String, WorkerState>>>;

pub struct Supervisor {
    shutdown: Shutdown,
    restart_delay: Duration,
    states: States,
    tasks: Mutex<JoinSet<()>>,
}

/// Stops one worker, whatever the others do.
pub struct WorkerHandle {
    stop: Shutdown,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl WorkerHandle {
    /// Ends the worker: its step gets the grace of a shutdown, and it leaves the health report.
    pub fn stop(&self) {
        self.stop.trigger();
    }

    /// The worker is done, or stopped.
    pub fn is_finished(&self) -> bool {
        self.finished.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A long-lived future run as a worker: `start` makes it afresh for every (re)start, and its
/// whole run is one step; one that ends is started again after `again`, one that panics after
/// the supervisor's back-off.
pub struct Task {
    name: &'static str,
    instance: Option<String>,
    start: Box<dyn FnMut() -> BoxFuture<'static, ()> + Send>,
    again: Duration,
}

impl Task {
    pub fn new(
        name: &'static str,
        instance: Option<String>,
        again: Duration,
        start: impl FnMut() -> BoxFuture<'static, ()> + Send + 'static,
    ) -> Self {
        Self {
            name,
            instance,
            start: Box::new(start),
            again,
        }
    }
}

impl Worker for Task {
    fn name(&self) -> &'static str {
        self.name
    }

    fn instance(&self) -> Option<String> {
        self.instance.clone()
    }

    fn step(&mut self) -> StepFuture<'_> {
        let run = (self.start)();
        let again = self.again;
        Box::pin(async move {
            run.await;
            Wait::For(again)
        })
    }
}

fn set_state(states: &States, name: &str, f: impl FnOnce(&mut WorkerState)) {
    let mut map = states.locked();
    let entry = map.entry(name.to_string()).or_insert_with(|| WorkerState {
        name: name.to_string(),
        state: WorkerStatus::Running,
        restarts: 0,
        last_panic: None,
    });
    f(entry);
}

/// The wait before restart number `panics` in a row: the base delay, doubled for each panic
/// before it, at most `MAX_RESTART_DELAY`.
fn restart_delay(base: Duration, panics: u32) -> Duration {
    base.saturating_mul(1 << panics.saturating_sub(1).min(16))
        .min(MAX_RESTART_DELAY)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

impl Supervisor {
    pub fn new(shutdown: Shutdown, restart_delay: Duration) -> Self {
        Self {
            shutdown,
            restart_delay,
            states: Arc::default(),
            tasks: Mutex::new(JoinSet::new()),
        }
    }

    /// Runs `worker` until it is done, stopped by the handle, or shutdown is triggered.
    pub fn spawn<W: Worker>(&self, mut worker: W) -> WorkerHandle {
        let kind = worker.name();
        let name = match worker.instance() {
            Some(instance) => format!("{kind}/{instance}"),
            None => kind.to_string(),
        };
        let states = self.states.clone();
        let global = self.shutdown.clone();
        let own = Shutdown::new();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handle = WorkerHandle {
            stop: own.clone(),
            finished: finished.clone(),
        };
        let stopping = move || {
            let (global, own) = (global.clone(), own.clone());
            async move {
                tokio::select! {
                    _ = global.wait() => {}
                    _ = own.wait() => {}
                }
            }
        };
        let stopped_alone = handle.stop.clone();
        let delay = self.restart_delay;
        set_state(&states, &name, |s| s.state = WorkerStatus::Running);
        let waker = worker.waker().unwrap_or_default();
        let span = tracing::info_span!("worker", name = %name);
        let task = async move {
            let shutdown = stopping;
            let mut panics = 0u32;
            loop {
                if stopped_alone.is_triggered() || shutdown().now_or_never().is_some() {
                    break;
                }
                set_state(&states, &name, |s| s.state = WorkerStatus::Running);
                // Listening from before the step: a test clock moved while it runs ends the
                // wait after it, rather than being missed for a wait worked out on the old time.
                let moved = super::clock::moved().notified();
                tokio::pin!(moved);
                moved.as_mut().enable();
                let step = AssertUnwindSafe(worker.step()).catch_unwind();
                tokio::pin!(step);
                // A step still running at shutdown (a durable consumer waiting for events) gets
                // a grace to finish, then is dropped like a crash: its work commits atomically or
                // not at all.
                let outcome = tokio::select! {
                    out = &mut step => out,
                    _ = shutdown() => match tokio::time::timeout(STEP_GRACE, &mut step).await {
                        Ok(out) => out,
                        Err(_) => break,
                    },
                };
                let wait = match outcome {
                    Ok(w) => {
                        panics = 0;
                        w
                    }
                    Err(p) => {
                        panics += 1;
                        let msg = panic_message(p.as_ref());
                        let after = restart_delay(delay, panics);
                        tracing::error!(worker = %name, panic = %msg, ?after, "worker panicked; restarting after a delay");
                        set_state(&states, &name, |s| {
                            s.state = WorkerStatus::Restarting;
                            s.restarts += 1;
                            s.last_panic = Some(msg);
                        });
                        Wait::For(after)
                    }
                };
                let sleep = match wait {
                    Wait::Done => {
                        set_state(&states, &name, |s| s.state = WorkerStatus::Done);
                        finished.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    Wait::For(d) => d,
                    Wait::UntilWoken => Duration::MAX,
                };
                set_state(&states, &name, |s| {
                    if s.state == WorkerStatus::Running {
                        s.state = WorkerStatus::Waiting;
                    }
                });
                tokio::select! {
                    _ = shutdown() => break,
                    _ = waker.notified() => {}
                    _ = &mut moved => {}
                    _ = tokio::time::sleep(sleep.min(Duration::from_secs(86_400 * 365))) => {}
                }
            }
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            if stopped_alone.is_triggered() {
                states.locked().remove(&name);
            } else {
                set_state(&states, &name, |s| s.state = WorkerStatus::Stopped);
            }
        };
        let mut tasks = self.tasks.locked();
        // Workers stopped alone have ended; their entries go.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task.instrument(span));
        handle
    }

    /// Workers waiting to be restarted after a panic: what keeps `/readyz` from ready.
    pub fn restarting(&self) -> Vec<String> {
        self.states
            .locked()
            .values()
            .filter(|s| s.state == WorkerStatus::Restarting)
            .map(|s| s.name.clone())
            .collect()
    }

    pub fn states(&self) -> Vec<WorkerState> {
        self.states.locked().values().cloned().collect()
    }

    /// Triggers shutdown and waits for every worker, aborting those still running after `deadline`.
    pub async fn shutdown(&self, deadline: Duration) {
        self.shutdown.trigger();
        let mut tasks = std::mem::take(&mut *self.tasks.locked());
        let all = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!("workers still running at the exit deadline; aborting them");
            tasks.abort_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Flaky {
        steps: Arc<AtomicU32>,
    }

    impl Worker for Flaky {
        fn name(&self) -> &'static str {
            "flaky"
        }
        fn step(&mut self) -> StepFuture<'_> {
            Box::pin(async move {
                let n = self.steps.fetch_add(1, Ordering::SeqCst);
                assert!(n != 1, "second step fails");
                if n >= 3 {
                    Wait::Done
                } else {
                    Wait::For(Duration::from_millis(1))
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicked_worker_is_restarted_and_reported() {
        let sup = Supervisor::new(Shutdown::new(), Duration::from_secs(5));
        let steps = Arc::new(AtomicU32::new(0));
        sup.spawn(Flaky {
            steps: steps.clone(),
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            steps.load(Ordering::SeqCst),
            2,
            "waits out the restart delay"
        );
        let st = sup.states();
        assert_eq!(st[0].state, WorkerStatus::Restarting);
        assert_eq!(st[0].restarts, 1);
        assert_eq!(st[0].last_panic.as_deref(), Some("second step fails"));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(steps.load(Ordering::SeqCst), 4);
        assert_eq!(sup.states()[0].state, WorkerStatus::Done);
    }

    struct Stubborn;
    impl Worker for Stubborn {
        fn name(&self) -> &'static str {
            "stubborn"
        }
        fn step(&mut self) -> StepFuture<'_> {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Wait::Done
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_running_at_shutdown_gets_its_grace_then_is_dropped() {
        let sup = Supervisor::new(Shutdown::new(), Duration::from_secs(1));
        sup.spawn(Stubborn);
        tokio::task::yield_now().await;
        let before = tokio::time::Instant::now();
        sup.shutdown(Duration::from_secs(10)).await;
        assert_eq!(
            before.elapsed(),
            STEP_GRACE,
            "well before the exit deadline"
        );
        assert_eq!(sup.states()[0].state, WorkerStatus::Stopped);
    }

    #[test]
    fn restarts_back_off_while_a_worker_keeps_panicking() {
        let base = Duration::from_secs(5);
        let delays: Vec<u64> = (1..=6).map(|n| restart_delay(base, n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 60, 60]);
        assert_eq!(restart_delay(base, u32::MAX), MAX_RESTART_DELAY);
    }

    /// A task that panics on its first run, then runs until stopped.
    #[tokio::test(start_paused = true)]
    async fn a_task_is_restarted_after_a_panic_and_stopped_alone_by_its_handle() {
        let sup = Supervisor::new(Shutdown::new(), Duration::from_secs(1));
        let starts = Arc::new(AtomicU32::new(0));
        let counted = starts.clone();
        let handle = sup.spawn(Task::new(
            "listener",
            Some("plant".into()),
            Duration::from_secs(1),
            move || {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    assert!(n != 0, "first run fails");
                    std::future::pending::<()>().await;
                })
            },
        ));
        sup.spawn(Stubborn);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(sup.restarting(), ["listener/plant"]);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 2, "restarted once");
        assert!(sup.restarting().is_empty());
        assert!(!handle.is_finished());
        handle.stop();
        tokio::time::sleep(STEP_GRACE + Duration::from_secs(1)).await;
        assert!(handle.is_finished());
        let names: Vec<String> = sup.states().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["stubborn"],
            "a worker stopped alone leaves the report"
        );
    }
}
