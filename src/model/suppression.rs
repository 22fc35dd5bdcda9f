//! Silences (SPEC 2.9) and downtimes (SPEC 2.11, CONTRACT 3): what suppresses an alert's
//! paging without stopping it from opening.

use super::Timestamp;
use super::event::{EventDraft, EventType, Severity};
use super::selector::Selector;
use super::state::CheckState;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

    /// This silence expired at `now` (`DELETE`): it ends no later than now, and one that had
    /// not begun never does.
    pub fn expired(&self, now: Timestamp) -> Silence {
        let mut s = self.clone();
        s.expires_at = s.expires_at.min(now);
        s.starts_at = s.starts_at.min(s.expires_at);
        s.version += 1;
        s
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

    /// This downtime ended at `now` (`DELETE`): its window closes no later than now, and a
    /// started flexible one lasts only as long as it ran.
    pub fn ended(&self, now: Timestamp) -> Downtime {
        let mut d = self.clone();
        d.end = d.end.min(now);
        d.start = d.start.min(d.end);
        if let Some(started) = d.started_at {
            let ran = now.since(started).as_secs();
            d.duration = d.duration.map(|secs| secs.min(ran));
        }
        d.version += 1;
        d
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

/// A saved selector, parsed; one that no longer parses (a grammar change) matches nothing,
/// and says so in the log.
pub fn stored_selector(text: &str) -> Selector {
    text.parse().unwrap_or_else(|e| {
        tracing::error!(selector = text, error = %e, "a saved selector no longer parses; it matches nothing");
        Selector::nothing()
    })
}

/// The downtimes in effect at one moment, each with its selector parsed once: what covers an
/// object, for its live state's `downtimeDepth` and for holding its alerts' notifications.
pub struct ActiveDowntimes(Vec<(Downtime, Selector)>);

impl ActiveDowntimes {
    pub fn new(downtimes: Vec<Downtime>, now: Timestamp) -> Self {
        Self(
            downtimes
                .into_iter()
                .filter(|d| d.active(now))
                .map(|d| {
                    let selector = stored_selector(&d.selector);
                    (d, selector)
                })
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Those covering an object whose host is `host` and whose effective labels are `labels`.
    pub fn covering<'a>(
        &'a self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Downtime> {
        self.0
            .iter()
            .filter(move |(d, selector)| d.covers(object, host, labels, selector))
            .map(|(d, _)| d)
    }

    /// How many cover that object: its live state's `downtimeDepth`.
    pub fn depth(
        &self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &BTreeMap<String, String>,
    ) -> u32 {
        u32::try_from(self.covering(object, host, labels).count()).unwrap_or(u32::MAX)
    }
}

/// Live states as one read found them, with what their downtime depth is worked out from: the
/// downtimes stored, each state's object's host and own labels (read only when a downtime is
/// stored), and the moment of the read.
pub struct LiveStates {
    pub states: Vec<CheckState>,
    pub downtimes: Vec<Downtime>,
    pub placement: HashMap<Uuid, (Option<Uuid>, BTreeMap<String, String>)>,
    pub at: Timestamp,
}

impl LiveStates {
    /// The states, each with its `downtimeDepth`: how many downtimes in effect at the read
    /// cover its object, on the object's effective labels from `labels`, else its own. A state
    /// whose object is gone keeps depth 0.
    pub fn covered(
        self,
        labels: &dyn Fn(Uuid) -> Option<BTreeMap<String, String>>,
    ) -> Vec<CheckState> {
        let active = ActiveDowntimes::new(self.downtimes, self.at);
        let mut states = self.states;
        if active.is_empty() {
            return states;
        }
        for s in &mut states {
            if let Some((host, own)) = self.placement.get(&s.object_id) {
                let effective = labels(s.object_id);
                s.downtime_depth =
                    active.depth(s.object_id, *host, effective.as_ref().unwrap_or(own));
            }
        }
        states
    }

    /// `covered`, by object id.
    pub fn covered_by_object(
        self,
        labels: &dyn Fn(Uuid) -> Option<BTreeMap<String, String>>,
    ) -> HashMap<Uuid, CheckState> {
        self.covered(labels)
            .into_iter()
            .map(|s| (s.object_id, s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn silence(starts_at: &str, expires_at: &str) -> Silence {
        Silence {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            comment: "maintenance".into(),
            selector: "env=prod".into(),
            text_regex: String::new(),
            starts_at: at(starts_at),
            expires_at: at(expires_at),
            created_at: at("2026-03-01T00:00:00Z"),
            created_by: "ops".into(),
            version: 3,
        }
    }

    fn downtime(kind: &str, started_at: Option<&str>, duration: Option<u64>) -> Downtime {
        Downtime {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            comment: "patching".into(),
            object_id: Some(Uuid::from_u128(3)),
            selector: String::new(),
            kind: kind.into(),
            start: at("2026-03-01T08:00:00Z"),
            end: at("2026-03-01T12:00:00Z"),
            duration,
            started_at: started_at.map(at),
            created_at: at("2026-03-01T00:00:00Z"),
            created_by: "ops".into(),
            version: 1,
        }
    }

    #[test]
    fn an_expired_silence_ends_now_and_one_not_begun_never_begins() {
        let now = at("2026-03-01T09:00:00Z");
        let running = silence("2026-03-01T08:00:00Z", "2026-03-01T10:00:00Z").expired(now);
        assert_eq!(running.expires_at, now);
        assert_eq!(running.starts_at, at("2026-03-01T08:00:00Z"));
        assert_eq!(running.version, 4);
        assert!(!running.active(now));
        let ahead = silence("2026-03-02T08:00:00Z", "2026-03-02T10:00:00Z").expired(now);
        assert_eq!((ahead.starts_at, ahead.expires_at), (now, now));
        let past = silence("2026-03-01T06:00:00Z", "2026-03-01T07:00:00Z").expired(now);
        assert_eq!(past.expires_at, at("2026-03-01T07:00:00Z"));
    }

    #[test]
    fn an_ended_downtime_closes_its_window_and_keeps_what_a_flexible_one_ran() {
        let now = at("2026-03-01T09:00:00Z");
        let fixed = downtime("fixed", None, None).ended(now);
        assert_eq!((fixed.start, fixed.end), (at("2026-03-01T08:00:00Z"), now));
        assert!(!fixed.active(now));
        assert_eq!(fixed.version, 2);
        let flexible = downtime("flexible", Some("2026-03-01T08:30:00Z"), Some(7200)).ended(now);
        assert_eq!(flexible.duration, Some(1800));
        assert!(!flexible.active(now));
        let early = downtime("fixed", None, None).ended(at("2026-03-01T07:00:00Z"));
        assert_eq!(early.start, early.end);
    }

    #[test]
    fn active_downtimes_count_what_covers_an_object() {
        let now = at("2026-03-01T09:00:00Z");
        let (host, service) = (Uuid::from_u128(3), Uuid::from_u128(4));
        let mut by_selector = downtime("fixed", None, None);
        by_selector.object_id = None;
        by_selector.selector = "site=north".into();
        let mut broken = by_selector.clone();
        broken.selector = "site in (".into();
        let mut later = downtime("fixed", None, None);
        later.start = at("2026-03-01T10:00:00Z");
        let active = ActiveDowntimes::new(
            vec![downtime("fixed", None, None), by_selector, broken, later],
            now,
        );
        let north: BTreeMap<String, String> = [("site".into(), "north".into())].into();
        let south: BTreeMap<String, String> = [("site".into(), "south".into())].into();
        assert_eq!(active.depth(host, None, &north), 2, "by id and by selector");
        assert_eq!(active.depth(service, Some(host), &south), 1, "its host's");
        assert_eq!(active.depth(Uuid::from_u128(9), None, &south), 0);
        assert!(ActiveDowntimes::new(Vec::new(), now).is_empty());
    }

    /// Depth counts on the effective labels where the caller knows them, else the object's
    /// own; a state whose object the read did not find keeps 0.
    #[test]
    fn live_states_are_covered_on_effective_labels() {
        let state = |id: u128| -> CheckState {
            serde_json::from_value(json!({
                "objectId": Uuid::from_u128(id), "state": 1, "stateType": "hard", "attempt": 1,
                "output": "down", "lastCheck": "2026-03-01T08:30:00Z",
                "lastChange": "2026-03-01T08:30:00Z",
            }))
            .unwrap()
        };
        let mut by_selector = downtime("fixed", None, None);
        by_selector.object_id = None;
        by_selector.selector = "site=north".into();
        let own_north: BTreeMap<String, String> = [("site".into(), "north".into())].into();
        let read = LiveStates {
            states: vec![state(5), state(6), state(7)],
            downtimes: vec![by_selector],
            placement: [
                (Uuid::from_u128(5), (None, own_north.clone())),
                (Uuid::from_u128(6), (None, BTreeMap::new())),
            ]
            .into(),
            at: at("2026-03-01T09:00:00Z"),
        };
        let effective = |id: Uuid| (id == Uuid::from_u128(6)).then(|| own_north.clone());
        let depths: Vec<u32> = read
            .covered(&effective)
            .iter()
            .map(|s| s.downtime_depth)
            .collect();
        assert_eq!(depths, [1, 1, 0], "own labels, effective labels, no object");
    }
}
