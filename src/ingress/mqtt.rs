//! MQTT subscriptions (`event-sources` of type `mqtt`): one listener per source, connected to
//! `config.url` (`mqtt://host[:1883]`, or `mqtts://host[:8883]` over TLS trusting the system
//! roots or `config.caFile`) with `config.topics` (comma-separated, `+` and `#`
//! wildcards) at QoS 1 with a persistent session, so the broker keeps what arrives while the
//! site is offline. The client library acknowledges a message on receipt (with manual
//! acknowledgement, rumqttc 0.25 stopped reading after about 90 messages of a burst), so a
//! crash between receipt and store can lose the messages in hand. JSON payloads go
//! through the source's `mapping` (like webhooks), other payloads become the summary; the
//! topic is the `topic` label. Listeners reconnect with backoff (1 s doubling to 60 s, with
//! jitter).

use super::mapping::Mapping;
use super::webhook::{map_document, severity_named};
use super::{Ingress, Normalized, Outcome, Source, trust};
use crate::model::event::Severity;
use crate::model::source_config::MqttConfig;
use crate::runtime::worker::Task;
use rumqttc::{
    AsyncClient, Event, EventLoop, MqttOptions, Packet, Publish, QoS, TlsConfiguration, Transport,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Messages stored in one transaction at most.
const BATCH: usize = 256;

/// Where to connect and what to read, from a source's `config`.
#[derive(Clone, Debug)]
struct Subscription {
    broker: MqttConfig,
    /// The TLS configuration of an `mqtts://` broker.
    tls: Option<Arc<rustls::ClientConfig>>,
    client_id: String,
    /// The secret holding the password, opened at each connection.
    secret_ref: Option<String>,
}

fn subscription(source: &Source, secret_ref: &Option<String>) -> Result<Subscription, String> {
    let broker = MqttConfig::of(&source.config)?;
    Ok(Subscription {
        tls: broker
            .tls
            .then(|| trust(source).map(Arc::new))
            .transpose()?,
        client_id: broker
            .client_id
            .clone()
            .unwrap_or_else(|| format!("svc-{}", source.name)),
        secret_ref: secret_ref.clone(),
        broker,
    })
}

/// One message as an event: JSON through the mapping, anything else as text.
fn message(
    source: &Source,
    mapping: &Mapping,
    topic: &str,
    payload: &[u8],
) -> Result<Normalized, String> {
    let default = source
        .config
        .get("severity")
        .and_then(|s| severity_named(s))
        .unwrap_or(Severity::Warning);
    let mut event = match serde_json::from_slice::<Value>(payload) {
        Ok(doc @ Value::Object(_)) => {
            map_document(&doc, mapping, &source.name, default).map_err(|e| e.to_string())?
        }
        _ => {
            let text = String::from_utf8_lossy(payload).trim().to_string();
            Normalized {
                severity: default,
                summary: text.clone(),
                dedup_key: None,
                labels: BTreeMap::new(),
                original: json!({"text": text}),
                resolve: false,
            }
        }
    };
    event.labels.insert("topic".into(), topic.to_string());
    Ok(event)
}

impl Ingress {
    /// Listens to one source until the task is aborted.
    async fn listen_mqtt(
        self: Arc<Self>,
        source: Source,
        mapping: Arc<Mapping>,
        sub: Subscription,
    ) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let mut options = MqttOptions::new(&sub.client_id, &sub.broker.host, sub.broker.port);
            options
                .set_keep_alive(Duration::from_secs(30))
                .set_clean_session(false);
            if let Some(tls) = &sub.tls {
                options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
                    tls.clone(),
                )));
            }
            if let Some(user) = &sub.broker.username {
                let password = match &sub.secret_ref {
                    Some(name) => self.secrets.secret(source.tenant, name).await,
                    None => None,
                };
                options.set_credentials(user, password.unwrap_or_default());
            }
            let (client, events) = AsyncClient::new(options, 64);
            for topic in &sub.broker.topics {
                let _ = client.subscribe(topic, QoS::AtLeastOnce).await;
            }
            // The event loop is polled on its own task, so keep-alives and acknowledgements go
            // on while a message is being stored.
            let (tx, mut incoming) = mpsc::channel(256);
            let poller = Poller(tokio::spawn(poll(events, tx)));
            let mut held = None;
            loop {
                let next = match held.take() {
                    Some(next) => next,
                    None => match incoming.recv().await {
                        Some(next) => next,
                        None => break,
                    },
                };
                let first = match next {
                    Incoming::Connected => {
                        backoff = Duration::from_secs(1);
                        tracing::info!(source = %source.name, host = %sub.broker.host, "MQTT connected");
                        continue;
                    }
                    Incoming::Lost(e) => {
                        tracing::warn!(source = %source.name, error = %e, "MQTT connection lost");
                        break;
                    }
                    Incoming::Message(p) => p,
                };
                // What has arrived meanwhile is stored in the same transaction.
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match incoming.try_recv() {
                        Ok(Incoming::Message(p)) => batch.push(p),
                        Ok(other) => {
                            held = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let mut events = Vec::with_capacity(batch.len());
                for p in &batch {
                    match message(&source, &mapping, &p.topic, &p.payload) {
                        Ok(event) => events.push(event),
                        Err(why) => {
                            self.count(&source.name, Outcome::Refused);
                            tracing::warn!(source = %source.name, topic = %p.topic, %why, "MQTT message dropped");
                        }
                    }
                }
                if !events.is_empty()
                    && let Err(e) = self.record_all(&source, events).await
                {
                    tracing::error!(source = %source.name, error = %e, "MQTT messages could not be stored and are lost");
                }
            }
            drop(poller);
            let jitter = f64::from(getrandom::u32().unwrap_or(0) % 1000) / 1000.0;
            tokio::time::sleep(backoff.mul_f64(0.75 + jitter / 2.0)).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// The task driving a client's event loop; ended with the listener that owns it, whether the
/// listener goes on to reconnect or is stopped (its future dropped).
struct Poller(JoinHandle<()>);

impl Drop for Poller {
    fn drop(&mut self) {
        self.0.abort();
    }
}

enum Incoming {
    Connected,
    Message(Publish),
    Lost(String),
}

/// Drives the client's event loop, handing connections and messages on until it fails.
async fn poll(mut events: EventLoop, tx: mpsc::Sender<Incoming>) {
    loop {
        let next = match events.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => Incoming::Connected,
            Ok(Event::Incoming(Packet::Publish(p))) => Incoming::Message(p),
            Ok(_) => continue,
            Err(e) => {
                let _ = tx.send(Incoming::Lost(e.to_string())).await;
                return;
            }
        };
        if tx.send(next).await.is_err() {
            return;
        }
    }
}

/// The listener of an `mqtt` source, as a worker.
pub(super) fn start(
    ingress: &Arc<Ingress>,
    source: Source,
    mapping: &BTreeMap<String, String>,
    secret_ref: &Option<String>,
) -> Result<Task, String> {
    let sub = subscription(&source, secret_ref)?;
    let mapping = Arc::new(Mapping::compile(mapping)?);
    let ingress = ingress.clone();
    Ok(super::listeners::task(&source.clone(), move || {
        Box::pin(
            ingress
                .clone()
                .listen_mqtt(source.clone(), mapping.clone(), sub.clone()),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(config: &[(&str, &str)]) -> Source {
        Source::configured("plant", config)
    }

    #[test]
    fn the_client_id_defaults_to_the_source_and_mqtts_gets_tls() {
        let s = subscription(&source(&[("url", "mqtt://b"), ("topics", "x")]), &None).unwrap();
        assert_eq!(s.client_id, "svc-plant");
        assert!(s.tls.is_none());
        let s = subscription(&source(&[("url", "mqtts://b"), ("topics", "x")]), &None).unwrap();
        assert!(s.tls.is_some());
    }

    #[test]
    fn plain_payloads_become_the_summary() {
        let e = message(&source(&[]), &Mapping::default(), "plant/p1", b"pump 1 hot").unwrap();
        assert_eq!(e.summary, "pump 1 hot");
        assert_eq!(e.labels["topic"], "plant/p1");
        assert_eq!(e.severity, Severity::Warning);
    }
}
