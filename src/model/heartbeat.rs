//! Heartbeats (CONTRACT 3): something that must check in every `expectEvery` (+ `grace`),
//! like a cron job's dead man's switch.

use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub expect_every: GoDuration,
    pub grace: GoDuration,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `critical`, `warning` or `info`.
    pub severity: String,
    pub missing: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_beat: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

impl Heartbeat {
    /// Overdue when more than `expectEvery + grace` has passed since the last beat (or since
    /// the heartbeat was defined).
    pub fn overdue(&self, now: Timestamp) -> bool {
        now.since(self.last_beat.unwrap_or(self.created_at)) > self.expect_every.0 + self.grace.0
    }

    /// The first moment it is overdue, unless it beats before.
    pub fn due(&self) -> Timestamp {
        self.last_beat
            .unwrap_or(self.created_at)
            .plus(self.expect_every.0 + self.grace.0 + std::time::Duration::from_millis(1))
    }
}

/// `POST /api/v1/heartbeats`.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatBody {
    #[serde(default)]
    pub name: String,
    pub expect_every: Option<GoDuration>,
    #[serde(default)]
    pub grace: Option<GoDuration>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub severity: Option<String>,
}
