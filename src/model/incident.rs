//! Incidents (SPEC 2.12, CONTRACT 3): the reference's `Incident` plus `labels` and `alertIds`.

use super::Timestamp;
use super::event::{EventDraft, EventType, Severity};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use uuid::Uuid;

pub const STATUSES: [&str; 3] = ["open", "acked", "resolved"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Incident {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub title: String,
    #[serde(default)]
    pub summary: String,
    pub severity: Severity,
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub impact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ticket_url: String,
    #[serde(default)]
    pub alert_ids: Vec<Uuid>,
    pub created_by: String,
    pub opened_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Timestamp>,
    pub version: u64,
}

/// `POST` and `PUT /api/v1/incidents` (the reference's `incidentBody`, plus `labels`, and
/// `status` on `PUT`).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncidentBody {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub severity: Option<String>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub impact: Option<String>,
    #[serde(default)]
    pub ticket_url: Option<String>,
    #[serde(default)]
    pub alert_ids: Option<Vec<Uuid>>,
    #[serde(default)]
    pub status: Option<String>,
}

/// `GET /api/v1/incidents/{id}`: the incident with its alerts and what happened to both,
/// newest first (the reference's "incident with alerts + timeline").
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct IncidentDetail {
    #[serde(flatten)]
    pub incident: Incident,
    pub alerts: Vec<super::alert::Alert>,
    /// Its `incident_update` events and its alerts' events (opened, acknowledged, escalated,
    /// notified, resolved), newest first, at most 200.
    pub timeline: Vec<super::event::Event>,
}

/// `POST /api/v1/incidents/{id}:merge` (the reference's `mergeRequest`): the incidents whose
/// alerts move into this one; they are resolved.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MergeRequest {
    pub source_ids: Vec<Uuid>,
}

/// `POST /api/v1/incidents/{id}:summarize` with an AI provider: the summary it proposes (the
/// incident is not changed). This build has no provider and answers 503 instead.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SummaryProposal {
    pub summary: String,
}

/// Alarm-storm correlation (SEMANTICS 7): this many alerts opened within `window` sharing one
/// label pair become one incident (`alerting.stormThreshold`, default 5, and
/// `alerting.stormWindow`, default 120 s, in the configuration file).
#[derive(Clone, Copy, Debug)]
pub struct Storm {
    pub threshold: usize,
    pub window: std::time::Duration,
}

impl Incident {
    /// The `incident_update` event of the correlator: the alerts it holds and the label pair
    /// they share, critical.
    pub fn storm_event(&self, cluster: &str) -> EventDraft {
        let mut draft = EventDraft::new(
            self.tenant_id,
            EventType::IncidentUpdate,
            Some(Severity::Critical),
            json!({
                "incidentId": self.id,
                "title": self.title,
                "createdBy": self.created_by,
                "status": self.status,
                "alerts": self.alert_ids,
                "cluster": cluster,
            }),
        );
        draft.source_id = Some(self.id.to_string());
        draft
    }

    /// The `incident_update` event of a change (SPEC 6.2): `action` `created` adds the summary
    /// and labels.
    pub fn update_event(&self, action: &str) -> EventDraft {
        let mut payload = json!({
            "incidentId": self.id,
            "title": self.title,
            "createdBy": self.created_by,
            "status": self.status,
            "action": action,
        });
        if action == "created" {
            payload["summary"] = json!(self.summary);
            payload["labels"] = json!(self.labels);
        }
        let severity = if self.status == "resolved" {
            Severity::Ok
        } else {
            self.severity
        };
        let mut draft = EventDraft::new(
            self.tenant_id,
            EventType::IncidentUpdate,
            Some(severity),
            payload,
        );
        draft.source_id = Some(self.id.to_string());
        draft
    }
}
