//! `POST /api/v1/ingest/{source}`: generic JSON webhooks and the Alertmanager receiver. The
//! source is an `event-sources` document; it authenticates the caller its own way (`token`,
//! `hmac`, `basic` or `none`, the secret named by `secretRef`), is rate limited by a token
//! bucket (`rateLimit`/s, `burst`; 50 and 200 by default), and maps the body onto the
//! normalised event: `mapping` gives JSON paths (`$.alert.level`) for `severity`, `summary`,
//! `dedupKey`, `labels` and `resolve`. Every event of a request is stored in one transaction,
//! or none is.

use super::bounds;
use super::mapping::Mapping;
use super::{Ingress, Normalized, Outcome, Source};
use crate::auth::crypto::constant_time_eq;
use crate::model::Timestamp;
use crate::model::config::EventSource;
use crate::model::event::Severity;
use crate::model::event::check_payload;
use crate::runtime::Locked;
use crate::store::StoreError;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use uuid::Uuid;

/// Events one request may carry (an Alertmanager group, an array).
pub const EVENTS_PER_REQUEST: usize = 1000;
const DEFAULT_RATE: f64 = 50.0;
const DEFAULT_BURST: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("no event source {0:?}")]
    UnknownSource(String),
    #[error("event source {0:?} is disabled")]
    Disabled(String),
    #[error("{0}")]
    Auth(String),
    #[error("event source {0:?} is over its rate limit")]
    Rate(String),
    #[error("{0}")]
    Format(String),
    #[error("{0}")]
    Mapping(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the request brought to authenticate with.
#[derive(Debug, Default)]
pub struct Credentials {
    /// `Authorization: Bearer` that is not an API token, or `X-Svc-Token`.
    pub token: Option<String>,
    /// `Authorization: Basic` decoded.
    pub basic: Option<(String, String)>,
    /// `X-Svc-Signature` (or `X-Hub-Signature-256`): `sha256=<hex>`.
    pub signature: Option<String>,
}

/// Token buckets per tenant and source.
#[derive(Default)]
pub struct Buckets(Mutex<HashMap<(Uuid, String), (f64, Timestamp)>>);

impl Buckets {
    /// Takes one token; `false` when the bucket is empty.
    fn take(&self, key: (Uuid, String), rate: f64, burst: u32, now: Timestamp) -> bool {
        let mut buckets = self.0.locked();
        let burst = f64::from(burst.max(1));
        let (tokens, last) = buckets.entry(key).or_insert((burst, now));
        let elapsed = (now.as_millis() - last.as_millis()).max(0) as f64 / 1000.0;
        *tokens = (*tokens + elapsed * rate.max(0.0)).min(burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A JSON path subset: `$.a.b[0].c`, `a.b`, `$` for the whole document.
pub fn path<'a>(doc: &'a Value, p: &str) -> Option<&'a Value> {
    let p = p.trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut at = doc;
    for part in p.split('.').filter(|s| !s.is_empty()) {
        let (name, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            at = at.get(name)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let i: usize = index.trim_end_matches(']').parse().ok()?;
            at = at.get(i)?;
        }
    }
    Some(at)
}

/// A severity by its usual names in monitoring tools.
pub fn severity_named(name: &str) -> Option<Severity> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "critical" | "crit" | "error" | "err" | "fatal" | "emergency" | "alert" | "high" | "p1" => {
            Severity::Critical
        }
        "warning" | "warn" | "medium" | "p2" | "p3" => Severity::Warning,
        "info" | "informational" | "notice" | "debug" | "low" | "p4" | "p5" => Severity::Info,
        "ok" | "resolved" | "clear" | "normal" => Severity::Ok,
        _ => return None,
    })
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn labels_of(v: &Value) -> Option<BTreeMap<String, String>> {
    v.as_object()?
        .iter()
        .map(|(k, v)| Some((k.clone(), text(v)?)))
        .collect()
}

fn truthy(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => Some(matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "true" | "resolved" | "ok" | "clear" | "closed" | "1"
        )),
        Value::Number(n) => Some(n.as_f64() != Some(0.0)),
        _ => None,
    }
}

/// One document through the source's mapping; a configured path that is missing or holds
/// the wrong kind of value is the 422 reason.
pub(super) fn map_document(
    doc: &Value,
    mapping: &Mapping,
    source: &str,
    default_severity: Severity,
) -> Result<Normalized, IngestError> {
    let resolved = mapping.resolve(doc).map_err(IngestError::Mapping)?;
    let mapped = |field: &str| resolved.get(field);
    let wrong = |field: &str, v: &Value, want: &str| {
        IngestError::Mapping(format!("{field}: {v} is not {want}"))
    };
    let severity = match mapped("severity") {
        Some(v) => text(v)
            .and_then(|s| severity_named(&s))
            .ok_or_else(|| wrong("severity", v, "a severity (critical, warning, info, ok)"))?,
        None => doc
            .get("severity")
            .and_then(Value::as_str)
            .and_then(severity_named)
            .unwrap_or(default_severity),
    };
    let summary = match mapped("summary") {
        Some(v) => text(v).ok_or_else(|| wrong("summary", v, "text"))?,
        None => ["summary", "title", "message", "text"]
            .iter()
            .find_map(|k| doc.get(*k).and_then(text))
            .unwrap_or_else(|| format!("{source} event")),
    };
    let dedup_key = match mapped("dedupKey") {
        Some(v) => Some(text(v).ok_or_else(|| wrong("dedupKey", v, "text"))?),
        None => doc.get("dedupKey").and_then(text),
    };
    let labels = match mapped("labels") {
        Some(v) => labels_of(v).ok_or_else(|| wrong("labels", v, "an object of values"))?,
        None => doc.get("labels").and_then(labels_of).unwrap_or_default(),
    };
    let resolve = match mapped("resolve") {
        Some(v) => truthy(v).ok_or_else(|| wrong("resolve", v, "a boolean or a status"))?,
        None => doc.get("resolve").and_then(Value::as_bool).unwrap_or(false),
    };
    Ok(Normalized {
        severity,
        summary,
        dedup_key,
        labels,
        original: doc.clone(),
        resolve,
    })
}

/// The Alertmanager webhook payload (version 4): one event per alert.
fn alertmanager(doc: &Value) -> Result<Vec<Normalized>, IngestError> {
    let not_am = |why: &str| {
        IngestError::Format(format!(
            "not an Alertmanager webhook payload (version 4): {why}"
        ))
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| not_am("the body is not an object"))?;
    if let Some(v) = obj.get("version")
        && v != "4"
    {
        return Err(not_am(&format!("version {v}")));
    }
    let alerts = obj
        .get("alerts")
        .and_then(Value::as_array)
        .ok_or_else(|| not_am("no alerts array"))?;
    let common: BTreeMap<String, String> = obj
        .get("commonLabels")
        .and_then(labels_of)
        .unwrap_or_default();
    alerts
        .iter()
        .map(|a| {
            let labels = a
                .get("labels")
                .and_then(labels_of)
                .ok_or_else(|| not_am("an alert without labels"))?;
            let annotations = a.get("annotations").and_then(labels_of).unwrap_or_default();
            let resolved = a.get("status").and_then(Value::as_str) == Some("resolved");
            let name = labels.get("alertname").cloned().unwrap_or_default();
            let summary = annotations
                .get("summary")
                .or(annotations.get("description"))
                .cloned()
                .unwrap_or_else(|| name.clone());
            let severity = labels
                .get("severity")
                .and_then(|s| severity_named(s))
                .unwrap_or(Severity::Warning);
            let fingerprint = a
                .get("fingerprint")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| {
                    let joined: Vec<String> =
                        labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    let digest = Sha256::digest(joined.join(",").as_bytes());
                    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
                });
            let mut all = common.clone();
            all.extend(labels);
            let mut original = a.clone();
            if let Some(o) = original.as_object_mut() {
                for k in ["receiver", "groupKey", "externalURL"] {
                    if let Some(v) = obj.get(k) {
                        o.insert(k.to_string(), v.clone());
                    }
                }
            }
            Ok(Normalized {
                severity: if resolved { Severity::Ok } else { severity },
                summary,
                dedup_key: Some(fingerprint),
                labels: all,
                original,
                resolve: resolved,
            })
        })
        .collect()
}

impl Ingress {
    /// The event source named `name` (unique across tenants: the ingest URL names no
    /// tenant): its tenant, id, body and version.
    async fn source_doc(&self, name: &str) -> Result<(Uuid, Uuid, EventSource, u64), IngestError> {
        let unknown = || IngestError::UnknownSource(name.to_string());
        let (t, doc) = self
            .store
            .doc_in_any_tenant("event-sources", name)
            .await?
            .ok_or_else(unknown)?;
        let body = serde_json::from_str(&doc.body).map_err(|_| unknown())?;
        Ok((t, doc.id, body, doc.version))
    }

    async fn authenticate(
        &self,
        tenant: Uuid,
        source: &EventSource,
        creds: &Credentials,
        body: &[u8],
    ) -> Result<(), IngestError> {
        let mode = source.auth_mode.as_str();
        if mode == "none" {
            return Ok(());
        }
        let secret = match &source.secret_ref {
            Some(name) => self.secrets.secret(tenant, name).await,
            None => None,
        };
        let Some(secret) = secret else {
            return Err(IngestError::Auth(format!(
                "the source authenticates by {mode} and its secretRef names no secret that is set"
            )));
        };
        let fail = |why: &str| Err(IngestError::Auth(why.to_string()));
        match mode {
            "token" => match &creds.token {
                Some(t) if constant_time_eq(t.as_bytes(), secret.as_bytes()) => Ok(()),
                Some(_) => fail("the token does not match"),
                None => fail("a token is required (Authorization: Bearer or X-Svc-Token)"),
            },
            "basic" => match &creds.basic {
                Some((user, password)) => {
                    let user_ok = source
                        .config
                        .get("username")
                        .is_none_or(|u| constant_time_eq(u.as_bytes(), user.as_bytes()));
                    if user_ok && constant_time_eq(password.as_bytes(), secret.as_bytes()) {
                        Ok(())
                    } else {
                        fail("wrong user name or password")
                    }
                }
                None => fail("basic authentication is required"),
            },
            "hmac" => {
                let Some(sig) = &creds.signature else {
                    return fail("a signature is required (X-Svc-Signature: sha256=<hex>)");
                };
                let hex = sig.trim().strip_prefix("sha256=").unwrap_or(sig.trim());
                let given = crate::auth::crypto::unhex(hex).unwrap_or_default();
                let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
                    return fail("the secret cannot key an HMAC");
                };
                mac.update(body);
                if mac.verify_slice(&given).is_ok() {
                    Ok(())
                } else {
                    fail("the signature does not match the body")
                }
            }
            other => fail(&format!("unknown authMode {other:?}")),
        }
    }

    /// Takes one request for source `name`; the ids of the events it stored. Counted per
    /// source (an unknown source is not: its name is the caller's).
    pub async fn ingest(
        &self,
        name: &str,
        creds: Credentials,
        body: &[u8],
    ) -> Result<Vec<Uuid>, IngestError> {
        let outcome = self.accept(name, creds, body).await;
        match &outcome {
            Ok(_) => {}
            Err(IngestError::Rate(_)) => self.count(name, Outcome::RateLimited),
            Err(
                IngestError::Auth(_)
                | IngestError::Disabled(_)
                | IngestError::Format(_)
                | IngestError::Mapping(_),
            ) => self.count(name, Outcome::Refused),
            Err(IngestError::UnknownSource(_) | IngestError::Store(_)) => {}
        }
        outcome
    }

    async fn accept(
        &self,
        name: &str,
        creds: Credentials,
        body: &[u8],
    ) -> Result<Vec<Uuid>, IngestError> {
        let (tenant, id, source, version) = self.source_doc(name).await?;
        if !source.enabled {
            return Err(IngestError::Disabled(name.to_string()));
        }
        self.authenticate(tenant, &source, &creds, body).await?;
        let rate = source.rate_limit.unwrap_or(DEFAULT_RATE);
        let burst = source.burst.unwrap_or(DEFAULT_BURST);
        if !self
            .buckets
            .take((tenant, name.to_string()), rate, burst, self.clock.now())
        {
            return Err(IngestError::Rate(name.to_string()));
        }
        let doc: Value = serde_json::from_slice(body)
            .map_err(|e| IngestError::Format(format!("the body is not JSON: {e}")))?;
        check_payload(&doc).map_err(IngestError::Format)?;
        let default_severity = source
            .config
            .get("severity")
            .and_then(|s| severity_named(s))
            .unwrap_or(Severity::Warning);
        let events = if source.kind == "alertmanager" {
            alertmanager(&doc)?
        } else {
            let docs = match &doc {
                Value::Array(items) => items.clone(),
                Value::Object(_) => vec![doc.clone()],
                _ => {
                    return Err(IngestError::Format(
                        "the body must be a JSON object or an array of objects".into(),
                    ));
                }
            };
            let mapping = self.mapping_of(tenant, name, version, &source)?;
            // Mapping expressions run off the async workers (they may loop over the body).
            let source_name = name.to_string();
            tokio::task::spawn_blocking(move || {
                docs.iter()
                    .map(|d| map_document(d, &mapping, &source_name, default_severity))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|_| IngestError::Mapping("the mapping could not be evaluated".into()))??
        };
        if events.len() > EVENTS_PER_REQUEST {
            return Err(IngestError::Format(format!(
                "at most {EVENTS_PER_REQUEST} events per request"
            )));
        }
        let source = Source::of(tenant, id, name.to_string(), &source);
        for (i, e) in events.iter().enumerate() {
            bounds(&source, e)
                .map_err(|why| IngestError::Format(format!("event {}: {why}", i + 1)))?;
        }
        Ok(self.record_all(&source, events).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_reach_into_objects_and_arrays() {
        let doc = json!({"alert": {"tags": [{"name": "db"}], "level": "crit"}});
        assert_eq!(path(&doc, "$.alert.level"), Some(&json!("crit")));
        assert_eq!(path(&doc, "alert.tags[0].name"), Some(&json!("db")));
        assert_eq!(path(&doc, "$.alert.nothing"), None);
        assert_eq!(path(&doc, "$"), Some(&doc));
    }

    #[test]
    fn a_mapping_names_what_it_cannot_read() {
        let raw = BTreeMap::from([("severity".to_string(), "$.level".to_string())]);
        let mapping = Mapping::compile(&raw).unwrap();
        let n = map_document(
            &json!({"level": "WARN", "title": "t"}),
            &mapping,
            "s",
            Severity::Info,
        )
        .unwrap();
        assert_eq!((n.severity, n.summary.as_str()), (Severity::Warning, "t"));
        let missing = map_document(&json!({}), &mapping, "s", Severity::Info).unwrap_err();
        assert_eq!(missing.to_string(), "severity: $.level is not in the body");
        let bad =
            map_document(&json!({"level": "purple"}), &mapping, "s", Severity::Info).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("severity: \"purple\" is not a severity")
        );
    }

    #[test]
    fn alertmanager_alerts_become_events_keyed_by_fingerprint() {
        let doc = json!({"version": "4", "status": "firing", "receiver": "svc", "commonLabels": {"env": "prod"},
            "alerts": [
                {"status": "firing", "labels": {"alertname": "DiskFull", "severity": "critical"}, "annotations": {"summary": "disk full"}, "fingerprint": "abc"},
                {"status": "resolved", "labels": {"alertname": "Load"}, "annotations": {}, "fingerprint": "def"}]});
        let events = alertmanager(&doc).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].dedup_key.as_deref(), Some("abc"));
        assert_eq!(events[0].severity, Severity::Critical);
        assert_eq!(events[0].labels["env"], "prod");
        assert_eq!(events[0].original["receiver"], "svc");
        assert!(events[1].resolve);
        assert!(alertmanager(&json!({"version": "3", "alerts": []})).is_err());
        assert!(alertmanager(&json!({"hello": 1})).is_err());
    }
}
