//! Background loops as `Worker`s run by one `Supervisor`: a panicked worker is restarted after a
//! delay, every worker's state is visible in `/api/v1/system/health`, and shutdown waits for the
//! workers up to an exit deadline.

use super::Shutdown;
use futures_util::FutureExt;
use serde::Serialize;
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
    /// One unit of work. Errors are the worker's to log; a panic is caught by the supervisor.
    fn step(&mut self) -> StepFuture<'_>;
    /// Wakes the worker before its wait is over.
    fn waker(&self) -> Option<Arc<Notify>> {
        None
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerState {
    pub name: String,
    /// `running`, `waiting`, `restarting`, `stopped` or `done`.
    pub state: &'static str,
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_panic: Option<String>,
}

type States = Arc<Mutex<BTreeMap<&'static str, WorkerState>>>;

pub struct Supervisor {
    shutdown: Shutdown,
    restart_delay: Duration,
    states: States,
    tasks: Mutex<JoinSet<()>>,
}

fn set_state(states: &States, name: &'static str, f: impl FnOnce(&mut WorkerState)) {
    let mut map = states.lock().unwrap_or_else(|e| e.into_inner());
    let entry = map.entry(name).or_insert_with(|| WorkerState {
        name: name.to_string(),
        state: "running",
        restarts: 0,
        last_panic: None,
    });
    f(entry);
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

    /// Runs `worker` until it is done or shutdown is triggered.
    pub fn spawn<W: Worker>(&self, mut worker: W) {
        let name = worker.name();
        let states = self.states.clone();
        let shutdown = self.shutdown.clone();
        let delay = self.restart_delay;
        set_state(&states, name, |s| s.state = "running");
        let waker = worker.waker().unwrap_or_default();
        let task = async move {
            loop {
                if shutdown.is_triggered() {
                    break;
                }
                set_state(&states, name, |s| s.state = "running");
                let step = AssertUnwindSafe(worker.step()).catch_unwind();
                tokio::pin!(step);
                // A step still running at shutdown (a durable consumer waiting for events) gets
                // a grace to finish, then is dropped like a crash: its work commits atomically or
                // not at all.
                let outcome = tokio::select! {
                    out = &mut step => out,
                    _ = shutdown.wait() => match tokio::time::timeout(STEP_GRACE, &mut step).await {
                        Ok(out) => out,
                        Err(_) => break,
                    },
                };
                let wait = match outcome {
                    Ok(w) => w,
                    Err(p) => {
                        let msg = panic_message(p.as_ref());
                        tracing::error!(worker = name, panic = %msg, "worker panicked; restarting after delay");
                        set_state(&states, name, |s| {
                            s.state = "restarting";
                            s.restarts += 1;
                            s.last_panic = Some(msg);
                        });
                        Wait::For(delay)
                    }
                };
                let sleep = match wait {
                    Wait::Done => {
                        set_state(&states, name, |s| s.state = "done");
                        return;
                    }
                    Wait::For(d) => d,
                    Wait::UntilWoken => Duration::MAX,
                };
                set_state(&states, name, |s| {
                    if s.state == "running" {
                        s.state = "waiting";
                    }
                });
                tokio::select! {
                    _ = shutdown.wait() => break,
                    _ = waker.notified() => {}
                    _ = tokio::time::sleep(sleep.min(Duration::from_secs(86_400 * 365))) => {}
                }
            }
            set_state(&states, name, |s| s.state = "stopped");
        };
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spawn(task.instrument(tracing::info_span!("worker", name)));
    }

    pub fn states(&self) -> Vec<WorkerState> {
        self.states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Triggers shutdown and waits for every worker, aborting those still running after `deadline`.
    pub async fn shutdown(&self, deadline: Duration) {
        self.shutdown.trigger();
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
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
        assert_eq!(st[0].state, "restarting");
        assert_eq!(st[0].restarts, 1);
        assert_eq!(st[0].last_panic.as_deref(), Some("second step fails"));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(steps.load(Ordering::SeqCst), 4);
        assert_eq!(sup.states()[0].state, "done");
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
        assert_eq!(sup.states()[0].state, "stopped");
    }
}
