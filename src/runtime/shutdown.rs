//! The shutdown token: one trigger, many waiters; and the hard deadline of a stop.

use std::time::Duration;
use tokio::sync::watch;

/// Ends the process `after` from now whatever its threads are doing (a stop that the orderly
/// path could not finish in time): exit status 1, after saying so. A plain thread sleeps here,
/// not a task, so a runtime with every worker blocked still ends.
#[allow(clippy::disallowed_methods)]
pub fn exit_after(after: Duration) {
    let spawned = std::thread::Builder::new()
        .name("stop-deadline".into())
        .spawn(move || {
            std::thread::sleep(after);
            eprintln!("svc: the stop took longer than {after:?}; exiting now");
            std::process::exit(1);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "no stop deadline thread");
    }
}

#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: std::sync::Arc<watch::Sender<bool>>,
    rx: watch::Receiver<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        let (tx, rx) = watch::channel(false);
        Self {
            tx: std::sync::Arc::new(tx),
            rx,
        }
    }

    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once `trigger` has been called (at once if it already was).
    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        // An error means every sender is gone, which only happens when shutting down anyway.
        let _ = rx.wait_for(|v| *v).await;
    }
}
