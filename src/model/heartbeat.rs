//! Heartbeats (CONTRACT 3): something that must check in every `expectEvery` (+ `grace`),
//! like a cron job's dead man's switch.

use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

    /// This definition replacing the stored `old` of the same name: it keeps the old one's
    /// identity, creation and beats (a redefinition is not a beat and does not end a miss).
    pub fn replacing(self, old: &Heartbeat) -> Heartbeat {
        Heartbeat {
            id: old.id,
            created_at: old.created_at,
            last_beat: old.last_beat,
            missing: old.missing,
            version: old.version + 1,
            ..self
        }
    }

    /// The first moment it is overdue, unless it beats before.
    pub fn due(&self) -> Timestamp {
        self.last_beat
            .unwrap_or(self.created_at)
            .plus(self.expect_every.0 + self.grace.0 + std::time::Duration::from_millis(1))
    }
}

/// `POST /api/v1/heartbeats`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(id: u128, every: u64, created_at: &str) -> Heartbeat {
        let at: Timestamp = created_at.parse().unwrap();
        Heartbeat {
            id: Uuid::from_u128(id),
            tenant_id: Uuid::from_u128(9),
            name: "backup".into(),
            expect_every: GoDuration::from_secs(every),
            grace: GoDuration::from_secs(0),
            labels: BTreeMap::new(),
            severity: "warning".into(),
            missing: false,
            last_beat: None,
            created_at: at,
            updated_at: at,
            version: 1,
        }
    }

    #[test]
    fn a_redefinition_keeps_identity_and_beats_and_takes_the_new_terms() {
        let mut old = heartbeat(1, 60, "2026-03-01T08:00:00Z");
        old.last_beat = Some("2026-03-01T08:30:00Z".parse().unwrap());
        old.missing = true;
        old.version = 3;
        let new = heartbeat(2, 3600, "2026-03-01T09:00:00Z").replacing(&old);
        assert_eq!((new.id, new.created_at), (old.id, old.created_at));
        assert_eq!((new.last_beat, new.missing), (old.last_beat, true));
        assert_eq!(new.expect_every, GoDuration::from_secs(3600));
        assert_eq!(new.updated_at, "2026-03-01T09:00:00Z".parse().unwrap());
        assert_eq!(new.version, 4);
    }

    #[test]
    fn overdue_after_every_and_grace_since_the_last_beat_or_creation() {
        let h = heartbeat(1, 60, "2026-03-01T08:00:00Z");
        assert!(!h.overdue("2026-03-01T08:01:00Z".parse().unwrap()));
        assert!(h.overdue("2026-03-01T08:01:00.001Z".parse().unwrap()));
        assert_eq!(h.due(), "2026-03-01T08:01:00.001Z".parse().unwrap());
    }
}
