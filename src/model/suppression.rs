//! Silences (SPEC 2.9) and downtimes (SPEC 2.11, CONTRACT 3): what suppresses an alert's
//! paging without stopping it from opening.

use super::Timestamp;
use super::event::{EventDraft, EventType, Severity};
use super::selector::Selector;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Silence {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub comment: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text_regex: String,
    pub starts_at: Timestamp,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceBody {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default)]
    pub text_regex: Option<String>,
    #[serde(default)]
    pub starts_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
}

impl Silence {
    pub fn active(&self, now: Timestamp) -> bool {
        self.starts_at <= now && now < self.expires_at
    }

    pub fn event(&self) -> EventDraft {
        let mut d = EventDraft::new(
            self.tenant_id,
            EventType::Silence,
            Some(Severity::Info),
            json!({"silenceId": self.id, "comment": self.comment, "expiresAt": self.expires_at}),
        );
        d.source_id = Some(self.id.to_string());
        d
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Downtime {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub comment: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    /// `fixed` or `flexible`.
    #[serde(rename = "type")]
    pub kind: String,
    pub start: Timestamp,
    pub end: Timestamp,
    /// A flexible downtime's length, in seconds, from the first problem inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DowntimeBody {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub object_id: Option<String>,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
    /// Seconds, or a Go duration string (`2h`).
    #[serde(default)]
    pub duration: Option<serde_json::Value>,
}

impl Downtime {
    /// When it is in effect: fixed `[start, end)`; flexible from its start (the first problem
    /// inside the window) for `duration`.
    pub fn active(&self, now: Timestamp) -> bool {
        match (self.kind.as_str(), self.started_at, self.duration) {
            ("flexible", Some(started), Some(secs)) => {
                started <= now && now < started.plus(std::time::Duration::from_secs(secs))
            }
            ("flexible", _, _) => false,
            _ => self.start <= now && now < self.end,
        }
    }

    /// Whether it covers an object (whose host is `host`): by id, a host's downtime covering
    /// its services, or by `selector` (this downtime's, parsed) on the object's labels.
    pub fn covers(
        &self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &BTreeMap<String, String>,
        selector: &Selector,
    ) -> bool {
        match self.object_id {
            Some(id) => id == object || host == Some(id),
            None => !self.selector.is_empty() && selector.matches(labels),
        }
    }

    pub fn event(&self) -> EventDraft {
        let mut d = EventDraft::new(
            self.tenant_id,
            EventType::Downtime,
            Some(Severity::Info),
            json!({"downtimeId": self.id, "comment": self.comment, "start": self.start, "end": self.end}),
        );
        d.object_id = self.object_id;
        d.source_id = Some(self.id.to_string());
        d
    }
}
