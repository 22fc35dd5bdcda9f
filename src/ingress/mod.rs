//! Inbound event sources: what arrives from outside (a short message, a call, a page from a
//! nurse-call or fire panel) becomes an `ingress` event of the tenant's event source of that
//! type (SPEC 6.2: source, receivedAt, dedupKey, severity, summary, labels, the original as
//! payload, resolve), or, for replies from a known contact's phone, an action on an alert.
//! HTTP sources (generic webhooks, the Alertmanager receiver) arrive through `webhook`.

pub mod email;
pub mod espa;
pub mod listeners;
pub mod mapping;
pub mod mqtt;
pub mod phone;
pub mod snmp;
pub mod webhook;

use crate::model::config::EventSource;
use crate::model::event::{EventDraft, EventType, Severity, check_labels, check_payload};
use crate::model::health::SourceCounters;
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::paths::AllowedDirs;
use crate::runtime::{AlertActions, SecretSource};
use crate::store::{Store, StoreError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

pub struct Ingress {
    store: Arc<Store>,
    clock: SharedClock,
    alerts: Arc<dyn AlertActions>,
    secrets: Arc<dyn SecretSource>,
    buckets: webhook::Buckets,
    counters: Mutex<BTreeMap<String, SourceCounters>>,
    mappings: mapping::Compiled,
    /// Where a source's `caFile` may be.
    ca_files: AllowedDirs,
}

#[derive(Clone, Copy)]
pub enum Outcome {
    Received(u64),
    Refused,
    RateLimited,
}

/// An event source as an adapter uses it: where its events go and its settings.
#[derive(Clone, Debug)]
pub struct Source {
    pub tenant: Uuid,
    /// The `event-sources` document's id; none for a built-in source without one (SMS or
    /// calls with no document of their kind).
    pub id: Option<Uuid>,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub config: BTreeMap<String, String>,
}

impl Source {
    pub fn of(tenant: Uuid, id: Uuid, name: String, body: &EventSource) -> Self {
        Self {
            tenant,
            id: Some(id),
            name,
            labels: body.labels.clone(),
            config: body.config.clone(),
        }
    }

    pub fn flag(&self, key: &str) -> bool {
        self.config
            .get(key)
            .is_some_and(|v| matches!(v.trim(), "true" | "yes" | "1"))
    }
}

#[cfg(test)]
impl Source {
    /// A source of the nil tenant with `config`, for the adapters' unit tests.
    pub fn configured(name: &str, config: &[(&str, &str)]) -> Self {
        Self {
            tenant: Uuid::nil(),
            id: None,
            name: name.into(),
            labels: BTreeMap::new(),
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

/// Trust for the TLS peer of a source that connects out (an IMAP server, an MQTT broker):
/// `config.caFile`, else the system roots; `config.tlsInsecure: "true"` accepts any certificate.
fn trust(source: &Source) -> Result<rustls::ClientConfig, String> {
    crate::runtime::tls::trusting(
        source.config.get("caFile").map(String::as_str),
        source.flag("tlsInsecure"),
    )
    .map_err(|e| format!("config.{e}"))
}

/// One inbound event, normalised.
#[derive(Clone, Debug)]
pub struct Normalized {
    pub severity: Severity,
    pub summary: String,
    pub dedup_key: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// The original, archived as the event's `payload`.
    pub original: Value,
    pub resolve: bool,
}

/// Whether an inbound event (with its source's labels) stays within what alert rules are sized
/// for: labels and the payload's lists and maps (`model::event` bounds).
pub fn bounds(source: &Source, event: &Normalized) -> Result<(), String> {
    let mut labels = source.labels.clone();
    labels.extend(event.labels.clone());
    check_labels(&labels)?;
    check_payload(&event.original)
}

impl Ingress {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        alerts: Arc<dyn AlertActions>,
        secrets: Arc<dyn SecretSource>,
        ca_files: AllowedDirs,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            alerts,
            secrets,
            buckets: webhook::Buckets::default(),
            counters: Mutex::default(),
            mappings: mapping::Compiled::default(),
            ca_files,
        })
    }

    /// The source with its `caFile` found inside `tls.caDirs` (as its real path), or why not.
    pub fn confined(&self, mut source: Source) -> Result<Source, String> {
        if let Some(ca) = source.config.get_mut("caFile") {
            let real = self
                .ca_files
                .resolve_file(ca)
                .map_err(|why| format!("config.caFile: {why}"))?;
            *ca = real.display().to_string();
        }
        Ok(source)
    }

    /// Counts what happened to an input of `source`.
    pub fn count(&self, source: &str, outcome: Outcome) {
        let mut counters = self.counters.locked();
        let c = counters.entry(source.to_string()).or_default();
        match outcome {
            Outcome::Received(n) => c.received += n,
            Outcome::Refused => c.refused += 1,
            Outcome::RateLimited => c.rate_limited += 1,
        }
    }

    /// Counters by source name since start, for `/metrics` and `/system/health`.
    pub fn counters(&self) -> BTreeMap<String, SourceCounters> {
        self.counters.locked().clone()
    }

    /// The enabled `event-sources` of type `kind` in `tenant`, or in every tenant; when there
    /// is none, one named after the type in `tenant` (or the default tenant), so a configured
    /// device is never deaf.
    pub async fn sources(
        &self,
        kind: &'static str,
        tenant: Option<Uuid>,
    ) -> Result<Vec<Source>, StoreError> {
        let tenants = match tenant {
            Some(t) => vec![t],
            None => self
                .store
                .tenants()
                .await?
                .into_iter()
                .map(|t| t.id)
                .collect(),
        };
        let mut found = Vec::new();
        for t in tenants {
            for doc in self
                .store
                .docs(t, "event-sources", None, usize::MAX, |_| true)
                .await?
            {
                let Ok(body) = serde_json::from_str::<EventSource>(&doc.body) else {
                    continue;
                };
                if body.kind == kind && body.enabled {
                    found.push(Source::of(t, doc.id, doc.name, &body));
                }
            }
        }
        if found.is_empty() {
            let tenant = match tenant {
                Some(t) => t,
                None => self.store.default_tenant().await?.id,
            };
            found.push(Source {
                tenant,
                id: None,
                name: kind.to_string(),
                labels: BTreeMap::new(),
                config: BTreeMap::new(),
            });
        }
        Ok(found)
    }

    /// Stores one `ingress` event of `source`; the alert engine reads it from there.
    pub async fn record(&self, source: &Source, event: Normalized) -> Result<(), StoreError> {
        self.record_all(source, vec![event]).await.map(|_| ())
    }

    /// Stores `events` of `source` in one transaction (all or none); their ids.
    pub async fn record_all(
        &self,
        source: &Source,
        events: Vec<Normalized>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let now = self.clock.now();
        // What no adapter may store: an event past the bounds is left out (HTTP ingest refuses
        // it with 422 before it gets here).
        let (events, refused): (Vec<Normalized>, Vec<Normalized>) =
            events.into_iter().partition(|e| bounds(source, e).is_ok());
        for e in &refused {
            if let Err(why) = bounds(source, e) {
                tracing::warn!(source = %source.name, %why, "inbound event over the bounds; not stored");
                self.count(&source.name, Outcome::Refused);
            }
        }
        let drafts = events
            .into_iter()
            .map(|event| {
                let mut labels = source.labels.clone();
                labels.extend(event.labels);
                let mut payload = json!({
                    "source": source.name,
                    "receivedAt": now,
                    "severity": event.severity,
                    "summary": event.summary,
                    "labels": labels,
                    "payload": event.original,
                });
                if let Some(key) = event.dedup_key {
                    payload["dedupKey"] = json!(key);
                }
                if event.resolve {
                    payload["resolve"] = json!(true);
                }
                let mut draft = EventDraft::new(
                    source.tenant,
                    EventType::Ingress,
                    Some(event.severity),
                    payload,
                );
                // SPEC 6.1: the event source's id; a built-in source without a document is
                // known by its name.
                draft.source_id = Some(
                    source
                        .id
                        .map_or_else(|| source.name.clone(), |id| id.to_string()),
                );
                draft
            })
            .collect();
        let ids = self.store.journal_events(drafts).await?;
        self.count(&source.name, Outcome::Received(ids.len() as u64));
        Ok(ids)
    }
}
