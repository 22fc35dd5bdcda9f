//! The worker that brings the store back after an I/O error, once the disk takes writes again.

use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const RETRY_EVERY: Duration = Duration::from_secs(1);
/// The exit status of a process another took the database from (`EX_TEMPFAIL`).
const EXIT_SUPERSEDED: i32 = 75;

pub struct RecoveryWorker {
    store: Arc<Store>,
}

impl RecoveryWorker {
    pub fn new(store: Arc<Store>) -> Self {
        Self { store }
    }
}

impl Worker for RecoveryWorker {
    fn name(&self) -> &'static str {
        "store-recovery"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.store.recovery_waker())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if !self.store.needs_recovery() {
                return Wait::UntilWoken;
            }
            let store = self.store.clone();
            match tokio::task::spawn_blocking(move || store.try_reopen()).await {
                Ok(Ok(())) => Wait::UntilWoken,
                Ok(Err(StoreError::Superseded)) => {
                    // Fencing: another process took the lead this one held while it was cut
                    // off. Exiting non-zero lets systemd start it again, beside the new leader.
                    tracing::error!(
                        "another process took the lead while this one was cut off from the database; exiting to start again beside it"
                    );
                    std::process::exit(EXIT_SUPERSEDED)
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "store not reopened yet");
                    Wait::For(RETRY_EVERY)
                }
                Err(e) => {
                    tracing::error!(error = %e, "store reopen task failed");
                    Wait::For(RETRY_EVERY)
                }
            }
        })
    }
}
