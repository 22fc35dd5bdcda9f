//! Events (SPEC 6): the unit of history. Append-only; the id is a UUIDv7 minted from the event's
//! own `ts`, so an id alone locates an event in time (cursors, `Last-Event-ID`).

use super::Timestamp;
use super::state::StateChangePayload;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

/// Most labels an event (an ingress event, an object) may carry: alert rules loop over them.
pub const MAX_LABELS: usize = 64;
/// Longest label name and value, in bytes.
pub const MAX_LABEL_NAME: usize = 128;
pub const MAX_LABEL_VALUE: usize = 1024;
/// Most members of any one list or map in an inbound event's payload: rules loop over them.
pub const MAX_MEMBERS: usize = 1000;

/// Whether labels stay within what rules are sized for (`MAX_LABELS`, `MAX_LABEL_NAME`,
/// `MAX_LABEL_VALUE`); the message says which bound is passed.
pub fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!(
            "{} labels; at most {MAX_LABELS} are accepted",
            labels.len()
        ));
    }
    for (k, v) in labels {
        if k.len() > MAX_LABEL_NAME || v.len() > MAX_LABEL_VALUE {
            return Err(format!(
                "label {:?} is longer than {MAX_LABEL_NAME} bytes of name or {MAX_LABEL_VALUE} of value",
                k.chars().take(40).collect::<String>()
            ));
        }
    }
    Ok(())
}

/// Whether every list and map of an inbound payload has at most `MAX_MEMBERS` members.
pub fn check_payload(payload: &Value) -> Result<(), String> {
    let mut pending = vec![payload];
    while let Some(v) = pending.pop() {
        let members = match v {
            Value::Array(a) => {
                pending.extend(a);
                a.len()
            }
            Value::Object(o) => {
                pending.extend(o.values());
                o.len()
            }
            _ => 0,
        };
        if members > MAX_MEMBERS {
            return Err(format!(
                "the payload has a list or map of {members} members; at most {MAX_MEMBERS} are accepted"
            ));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    StateChange,
    FlappingStart,
    FlappingEnd,
    Ingress,
    HeartbeatMissed,
    AlertOpened,
    AlertResolved,
    Ack,
    Escalation,
    Notification,
    IncidentUpdate,
    Downtime,
    Silence,
    Config,
    System,
    AiAction,
    Comment,
    Anomaly,
    Forecast,
    /// An alert shelved, its timed shelf about to end, or unshelved (`payload.action`).
    Shelve,
    /// A scope's alerts opened faster than the flood limit: pages go out as digests.
    FloodStarted,
    FloodEnded,
}

impl EventType {
    pub const ALL: [EventType; 22] = [
        EventType::StateChange,
        EventType::FlappingStart,
        EventType::FlappingEnd,
        EventType::Ingress,
        EventType::HeartbeatMissed,
        EventType::AlertOpened,
        EventType::AlertResolved,
        EventType::Ack,
        EventType::Escalation,
        EventType::Notification,
        EventType::IncidentUpdate,
        EventType::Downtime,
        EventType::Silence,
        EventType::Config,
        EventType::System,
        EventType::AiAction,
        EventType::Comment,
        EventType::Anomaly,
        EventType::Forecast,
        EventType::Shelve,
        EventType::FloodStarted,
        EventType::FloodEnded,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            EventType::StateChange => "state_change",
            EventType::FlappingStart => "flapping_start",
            EventType::FlappingEnd => "flapping_end",
            EventType::Ingress => "ingress",
            EventType::HeartbeatMissed => "heartbeat_missed",
            EventType::AlertOpened => "alert_opened",
            EventType::AlertResolved => "alert_resolved",
            EventType::Ack => "ack",
            EventType::Escalation => "escalation",
            EventType::Notification => "notification",
            EventType::IncidentUpdate => "incident_update",
            EventType::Downtime => "downtime",
            EventType::Silence => "silence",
            EventType::Config => "config",
            EventType::System => "system",
            EventType::AiAction => "ai_action",
            EventType::Comment => "comment",
            EventType::Anomaly => "anomaly",
            EventType::Forecast => "forecast",
            EventType::Shelve => "shelve",
            EventType::FloodStarted => "flood_started",
            EventType::FloodEnded => "flood_ended",
        }
    }

    /// A stable small number for index keys.
    pub fn code(&self) -> u8 {
        Self::ALL.iter().position(|t| t == self).unwrap_or(0) as u8
    }
}

impl FromStr for EventType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|t| t.as_str() == s.trim())
            .copied()
            .ok_or_else(|| format!("unknown event type {s:?}"))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
    Ok,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Ok => "ok",
        }
    }
}

impl FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "critical" => Ok(Severity::Critical),
            "warning" => Ok(Severity::Warning),
            "info" => Ok(Severity::Info),
            "ok" => Ok(Severity::Ok),
            other => Err(format!("unknown severity {other:?}")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub ts: Timestamp,
    #[serde(rename = "type")]
    pub kind: EventType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    pub payload: Payload,
    /// On a main instance: the federation site that forwarded the event (with the edge's own
    /// id and time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

impl Event {
    /// The labels selectors match against: `payload.labels`.
    pub fn labels(&self) -> Option<&serde_json::Map<String, Value>> {
        self.payload.get("labels").and_then(Value::as_object)
    }
}

/// An event's payload: a JSON object, read as a `Value`. A state change journaled by the
/// results' transaction keeps its typed fields instead (`StateChangePayload`): its row is
/// encoded from them on the writer thread, and the `Value` is built the first time something
/// reads it (a rule, a selector, a view), on that reader's thread. Both encode alike.
#[derive(Clone)]
pub struct Payload {
    /// The payload, unless `typed` holds it.
    json: Value,
    /// A state change's fields, and their `Value` once built (shared by the event's clones).
    typed: Option<Arc<(StateChangePayload, OnceLock<Value>)>>,
}

impl Payload {
    pub fn state_change(fields: StateChangePayload) -> Self {
        Self {
            json: Value::Null,
            typed: Some(Arc::new((fields, OnceLock::new()))),
        }
    }

    /// A state change's typed fields, when the payload holds them.
    pub fn as_state_change(&self) -> Option<&StateChangePayload> {
        self.typed.as_ref().map(|typed| &typed.0)
    }

    /// The payload as a `Value` of its own.
    pub fn into_value(self) -> Value {
        match self.typed {
            None => self.json,
            Some(typed) => match Arc::try_unwrap(typed) {
                Ok((fields, built)) => built.into_inner().unwrap_or_else(|| fields.to_value()),
                Err(shared) => shared.1.get_or_init(|| shared.0.to_value()).clone(),
            },
        }
    }
}

impl From<Value> for Payload {
    fn from(json: Value) -> Self {
        Self { json, typed: None }
    }
}

impl std::ops::Deref for Payload {
    type Target = Value;
    fn deref(&self) -> &Value {
        match &self.typed {
            None => &self.json,
            Some(typed) => typed.1.get_or_init(|| typed.0.to_value()),
        }
    }
}

impl std::ops::DerefMut for Payload {
    /// A typed payload becomes a plain `Value` first.
    fn deref_mut(&mut self) -> &mut Value {
        if let Some(typed) = self.typed.take() {
            self.json = Self {
                json: Value::Null,
                typed: Some(typed),
            }
            .into_value();
        }
        &mut self.json
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.typed {
            None => self.json.serialize(s),
            Some(typed) => typed.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
impl schemars::JsonSchema for Payload {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        Value::schema_name()
    }

    fn inline_schema() -> bool {
        Value::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Value::json_schema(generator)
    }
}

/// The time part of a UUIDv7, in milliseconds.
pub fn id_millis(id: &Uuid) -> Option<i64> {
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    i64::try_from(secs)
        .ok()
        .map(|s| s * 1000 + i64::from(nanos / 1_000_000))
}

/// The smallest UUIDv7 of time `at` or later: every id minted at or after `at` sorts at or
/// after it, every one minted before, before it.
pub fn first_id_at(at: super::Timestamp) -> Uuid {
    Uuid::from_u128(u128::from(u64::try_from(at.as_millis()).unwrap_or(0)) << 80)
}

/// Filters of the event list, export and stream.
#[derive(Clone, Debug, Default)]
pub struct EventFilter {
    pub tenant_id: Uuid,
    pub types: Vec<EventType>,
    pub object_id: Option<Uuid>,
    pub source_id: Option<String>,
    pub severity: Option<Severity>,
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
    /// Only the events forwarded by this site.
    pub site: Option<String>,
}

impl EventFilter {
    pub fn matches(&self, e: &Event) -> bool {
        e.tenant_id == self.tenant_id
            && (self.types.is_empty() || self.types.contains(&e.kind))
            && self.object_id.is_none_or(|o| e.object_id == Some(o))
            && self
                .source_id
                .as_ref()
                .is_none_or(|s| e.source_id.as_ref() == Some(s))
            && self.severity.is_none_or(|s| e.severity == Some(s))
            && self.from.is_none_or(|f| e.ts >= f)
            && self.to.is_none_or(|t| e.ts <= t)
            && self
                .site
                .as_ref()
                .is_none_or(|s| e.site.as_ref() == Some(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_round_trip() {
        for t in EventType::ALL {
            assert_eq!(t.as_str().parse::<EventType>().unwrap(), t);
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
            assert_eq!(EventType::ALL[t.code() as usize], t);
        }
        assert!("nope".parse::<EventType>().is_err());
    }
}

/// An event recorded in the transaction of its cause: its place in the journal, the event, and
/// its row as stored (encoded once, for the journal and the month file alike: a slice of its
/// journal row, which holds the rows of the transaction's events in one buffer).
#[derive(Clone, Debug)]
pub struct Journaled {
    pub seq: u64,
    pub event: std::sync::Arc<Event>,
    pub row: bytes::Bytes,
}

/// What a producer hands over; the events service stamps id and time.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub tenant_id: Uuid,
    pub kind: EventType,
    pub object_id: Option<Uuid>,
    pub source_id: Option<String>,
    pub severity: Option<Severity>,
    pub payload: Payload,
}

impl EventDraft {
    /// The event with its id and time.
    pub fn stamped(self, id: Uuid, ts: super::Timestamp) -> Event {
        Event {
            id,
            tenant_id: self.tenant_id,
            ts,
            kind: self.kind,
            object_id: self.object_id,
            source_id: self.source_id,
            severity: self.severity,
            payload: self.payload,
            site: None,
        }
    }

    pub fn new(
        tenant_id: Uuid,
        kind: EventType,
        severity: Option<Severity>,
        payload: impl Into<Payload>,
    ) -> Self {
        Self {
            tenant_id,
            kind,
            object_id: None,
            source_id: None,
            severity,
            payload: payload.into(),
        }
    }

    /// The `config` event of a configuration mutation (SPEC 6.2).
    pub fn config(tenant_id: Uuid, kinds: &[&str], action: &str, resource: &str) -> Self {
        Self::new(
            tenant_id,
            EventType::Config,
            Some(Severity::Info),
            serde_json::json!({"kinds": kinds, "action": action, "resource": resource}),
        )
    }
}
