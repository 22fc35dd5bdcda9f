//! Keeps one listener per enabled event source that listens or polls on its own (`mqtt`,
//! `snmp`, `email`), each a supervised worker (`event-source/<source>` in the health
//! report, restarted with back-off after a panic), started when the source is saved and
//! restarted or stopped only when that source changes or goes: the catalog's generation says
//! when to look.

use super::{Ingress, Source, email, mqtt, snmp};
use crate::model::config::EventSource;
use crate::runtime::Supervisor;
use crate::runtime::worker::{StepFuture, Task, Wait, Worker, WorkerHandle};
use crate::store::StoreError;
use futures_util::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// Source types that run a listener.
const LISTENING: [&str; 3] = ["mqtt", "snmp", "email"];

/// How soon a listener that ended (it keeps reconnecting by itself, so only a bug ends it) is
/// started again.
const RESTART: Duration = Duration::from_secs(5);

/// A source's listener as a worker, `event-source/<source>` in the health report (source
/// names are unique across tenants, so no tenant id shows): `run` makes its future afresh for
/// every start.
pub(super) fn task(
    source: &Source,
    run: impl FnMut() -> BoxFuture<'static, ()> + Send + 'static,
) -> Task {
    Task::new("event-source", Some(source.name.clone()), RESTART, run)
}

pub struct SourceListeners {
    ingress: Arc<Ingress>,
    supervisor: Arc<Supervisor>,
    wake: Arc<Notify>,
    generation: Option<u64>,
    /// By tenant and source name: the document body it was started from, and its worker.
    running: HashMap<(Uuid, String), (String, WorkerHandle)>,
}

impl SourceListeners {
    pub fn new(ingress: Arc<Ingress>, supervisor: Arc<Supervisor>) -> Self {
        let wake = Arc::new(Notify::new());
        ingress
            .store
            .watch_commits(crate::store::Change::Catalog, wake.clone());
        Self {
            ingress,
            supervisor,
            wake,
            generation: None,
            running: HashMap::new(),
        }
    }

    async fn reconcile(&mut self) -> Result<(), StoreError> {
        let store = &self.ingress.store;
        let mut wanted = HashMap::new();
        for tenant in store.tenants().await? {
            for doc in store
                .docs(tenant.id, "event-sources", None, usize::MAX, |_| true)
                .await?
            {
                let Ok(body) = serde_json::from_str::<EventSource>(&doc.body) else {
                    continue;
                };
                if LISTENING.contains(&body.kind.as_str()) && body.enabled {
                    wanted.insert(
                        (tenant.id, doc.name.clone()),
                        (doc.body.clone(), (doc.id, body)),
                    );
                }
            }
        }
        self.running.retain(|key, (version, worker)| {
            let keep = wanted.get(key).is_some_and(|(v, _)| v == version) && !worker.is_finished();
            if !keep {
                worker.stop();
            }
            keep
        });
        for (key, (version, (id, body))) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            let source = match self
                .ingress
                .confined(Source::of(key.0, id, key.1.clone(), &body))
            {
                Ok(source) => source,
                Err(why) => {
                    tracing::warn!(source = %key.1, %why, "event source not started");
                    continue;
                }
            };
            let started = match body.kind.as_str() {
                "mqtt" => mqtt::start(&self.ingress, source, &body.mapping, &body.secret_ref),
                "email" => email::start(&self.ingress, source, &body.mapping, &body.secret_ref),
                _ => snmp::start(&self.ingress, source),
            };
            match started {
                Ok(task) => {
                    self.running
                        .insert(key, (version, self.supervisor.spawn(task)));
                }
                Err(why) => tracing::warn!(source = %key.1, %why, "event source not started"),
            }
        }
        Ok(())
    }
}

impl Worker for SourceListeners {
    fn name(&self) -> &'static str {
        "source-listeners"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let generation = self.ingress.store.catalog_generation();
            if self.generation != Some(generation) {
                if let Err(e) = self.reconcile().await {
                    tracing::warn!(error = %e, "event sources not read");
                    return Wait::For(Duration::from_secs(5));
                }
                self.generation = Some(generation);
            }
            Wait::UntilWoken
        })
    }
}

impl Drop for SourceListeners {
    fn drop(&mut self) {
        for (_, (_, worker)) in self.running.drain() {
            worker.stop();
        }
    }
}
