//! What a main keeps of each site's objects and open alerts (issue 72): mirrors owned by the
//! site, folded from the events it forwards, in their order. The main lists them with the
//! site's own ids, labelled `site`; it never checks, pages or changes them itself.

use super::Timestamp;
use super::alert::{Alert, AlertStatus, Shelf, ShelveMode};
use super::event::{Event, EventType, Severity};
use super::object::{Object, ObjectKind, ObjectView};
use super::state::{CheckState, StateType};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

/// One mirrored record: a site's object with its last state, or one of its open alerts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "mirror")]
pub enum Mirror {
    Object {
        site: String,
        /// The last event folded in: an event at or before it changes nothing (a resend).
        through: Uuid,
        view: Box<ObjectView>,
        /// Since when the object has been in a hard problem state (what an observer's vote
        /// counts from; `model::observers`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failing_since: Option<Timestamp>,
    },
    Alert {
        site: String,
        through: Uuid,
        alert: Box<Alert>,
    },
}

/// What a mirrored record is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorKind {
    Object,
    Alert,
}

/// Which record an event changes, by its kind and the site's id.
pub fn key_of(e: &Event) -> Option<(MirrorKind, Uuid)> {
    match e.kind {
        EventType::StateChange | EventType::FlappingStart | EventType::FlappingEnd => {
            e.object_id.map(|id| (MirrorKind::Object, id))
        }
        EventType::AlertOpened | EventType::Ack | EventType::Shelve | EventType::AlertResolved => e
            .payload
            .get("alertId")
            .and_then(Value::as_str)
            .and_then(|s| Uuid::parse_str(s).ok())
            .map(|id| (MirrorKind::Alert, id)),
        _ => None,
    }
}

fn text(p: &Value, key: &str) -> String {
    p.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn labels(p: &Value, site: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = p
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    out.insert("site".into(), site.to_string());
    out
}

impl Mirror {
    /// A site's object in a problem state (not OK), as the problems inbox lists them.
    pub fn is_problem(&self) -> bool {
        match self {
            Mirror::Object { view, .. } => view.state.as_ref().is_some_and(|s| s.state != 0),
            Mirror::Alert { .. } => false,
        }
    }

    fn through(&self) -> Uuid {
        match self {
            Mirror::Object { through, .. } | Mirror::Alert { through, .. } => *through,
        }
    }
}

/// `record` after the site's event `e` (of `tenant` at the main); `None`: no record (an
/// alert resolved leaves the mirror, its history stays in the events). An event at or before
/// the record's last one leaves it as it is, so a batch sent again folds to the same.
pub fn fold(tenant: Uuid, site: &str, record: Option<Mirror>, e: &Event) -> Option<Mirror> {
    if record.as_ref().is_some_and(|r| e.id <= r.through()) {
        return record;
    }
    let p: &Value = &e.payload;
    match (e.kind, record) {
        (EventType::StateChange, old) => {
            let id = e.object_id?;
            let kind = match text(p, "kind").as_str() {
                "host" => ObjectKind::Host,
                _ => ObjectKind::Service,
            };
            let state = p.get("toState").and_then(Value::as_u64).unwrap_or(3) as u8;
            let state_type = match text(p, "stateType").as_str() {
                "soft" => StateType::Soft,
                _ => StateType::Hard,
            };
            let (first_seen, was_failing) = match &old {
                Some(Mirror::Object {
                    view,
                    failing_since,
                    ..
                }) => (view.object.created_at, *failing_since),
                _ => (e.ts, None),
            };
            let failing_since = match (state, state_type) {
                (0, _) => None,
                (_, StateType::Hard) => was_failing.or(Some(e.ts)),
                (_, StateType::Soft) => was_failing,
            };
            let host = Some(text(p, "host")).filter(|h| !h.is_empty());
            let view = ObjectView {
                object: Object {
                    id,
                    tenant_id: tenant,
                    kind,
                    name: text(p, "object"),
                    folder: "/".into(),
                    host_id: None,
                    labels: labels(p, site),
                    spec: Default::default(),
                    created_at: first_seen,
                    updated_at: e.ts,
                    version: 0,
                },
                host_name: host,
                state: Some(CheckState {
                    object_id: id,
                    state,
                    state_type,
                    attempt: p.get("attempt").and_then(Value::as_u64).unwrap_or(1) as u32,
                    output: text(p, "output"),
                    long_output: String::new(),
                    perfdata: text(p, "metric"),
                    last_check: e.ts,
                    last_change: e.ts,
                    last_hard_change: (state_type == StateType::Hard).then_some(e.ts),
                    last_ok: None,
                    flapping: false,
                    flap_pct: 0.0,
                    flap_history: 0,
                    downtime_depth: 0,
                    acked_by: None,
                }),
                stale: None,
            };
            Some(Mirror::Object {
                site: site.to_string(),
                through: e.id,
                view: Box::new(view),
                failing_since,
            })
        }
        (
            EventType::FlappingStart | EventType::FlappingEnd,
            Some(Mirror::Object {
                site,
                mut view,
                failing_since,
                ..
            }),
        ) => {
            if let Some(s) = view.state.as_mut() {
                s.flapping = e.kind == EventType::FlappingStart;
            }
            Some(Mirror::Object {
                site,
                through: e.id,
                view,
                failing_since,
            })
        }
        (EventType::AlertOpened, _) => {
            let (_, id) = key_of(e)?;
            let severity = e.severity.unwrap_or(Severity::Warning);
            let mut alert = Alert::open(
                id,
                tenant,
                text(p, "rule"),
                format!("site/{site}/{id}"),
                severity,
                text(p, "title"),
                e.ts,
            );
            alert.labels = labels(p, site);
            alert.object_id = e.object_id;
            Some(Mirror::Alert {
                site: site.to_string(),
                through: e.id,
                alert: Box::new(alert),
            })
        }
        (
            EventType::Ack,
            Some(Mirror::Alert {
                site, mut alert, ..
            }),
        ) => {
            alert.status = AlertStatus::Acked;
            alert.acked_at = Some(e.ts);
            alert.acked_by = Some(text(p, "by")).filter(|b| !b.is_empty());
            Some(Mirror::Alert {
                site,
                through: e.id,
                alert,
            })
        }
        (
            EventType::Shelve,
            Some(Mirror::Alert {
                site, mut alert, ..
            }),
        ) => {
            match text(p, "action").as_str() {
                "shelved" => {
                    alert.shelved = Some(Shelf {
                        mode: p
                            .get("mode")
                            .and_then(|m| serde_json::from_value(m.clone()).ok())
                            .unwrap_or(ShelveMode::Timed),
                        until: p
                            .get("until")
                            .and_then(|u| serde_json::from_value(u.clone()).ok()),
                        reason: text(p, "reason"),
                        by: text(p, "by"),
                        user_id: None,
                        at: e.ts,
                        warned: false,
                    })
                }
                "unshelved" => alert.shelved = None,
                _ => {}
            }
            Some(Mirror::Alert {
                site,
                through: e.id,
                alert,
            })
        }
        (EventType::AlertResolved, Some(Mirror::Alert { .. })) => None,
        (_, record) => record,
    }
}

/// Why an object's last state may no longer be what it is: its site stopped reporting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stale {
    /// `uplink`: the site's heartbeat is overdue.
    pub reason: String,
    pub since: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(id: u128, kind: EventType, object: Option<u128>, payload: Value) -> Event {
        Event {
            id: Uuid::from_u128(id),
            tenant_id: Uuid::nil(),
            ts: Timestamp::from_millis(1_700_000_000_000 + id as i64).unwrap(),
            kind,
            object_id: object.map(Uuid::from_u128),
            source_id: None,
            severity: Some(Severity::Critical),
            payload: payload.into(),
            site: Some("north".into()),
        }
    }

    /// A site's object follows its state changes; its alert opens, is acknowledged and leaves
    /// the mirror when resolved; an event sent again changes nothing.
    #[test]
    fn a_sites_objects_and_alerts_fold_from_its_events_once() {
        let tenant = Uuid::from_u128(9);
        let down = event(
            10,
            EventType::StateChange,
            Some(1),
            json!({"object": "pump", "kind": "host", "toState": 1, "stateType": "hard",
                   "output": "no answer", "labels": {"role": "pump"}}),
        );
        let object = fold(tenant, "north", None, &down).unwrap();
        let Mirror::Object { view, .. } = &object else {
            panic!("{object:?}")
        };
        assert_eq!(view.object.name, "pump");
        assert_eq!(view.object.labels["site"], "north");
        assert_eq!(view.object.labels["role"], "pump");
        assert_eq!(view.state.as_ref().unwrap().state, 1);
        let up = event(
            12,
            EventType::StateChange,
            Some(1),
            json!({"object": "pump", "kind": "host", "toState": 0, "stateType": "hard", "output": "ok"}),
        );
        let Mirror::Object { failing_since, .. } = &object else {
            panic!("{object:?}")
        };
        assert_eq!(*failing_since, Some(down.ts), "failing since the hard DOWN");
        let object = fold(tenant, "north", Some(object), &up).unwrap();
        let Mirror::Object { failing_since, .. } = &object else {
            panic!("{object:?}")
        };
        assert_eq!(*failing_since, None);
        let again = fold(tenant, "north", Some(object.clone()), &down).unwrap();
        assert_eq!(again, object, "an older event changes nothing");

        let opened = event(
            20,
            EventType::AlertOpened,
            Some(1),
            json!({"alertId": Uuid::from_u128(5), "title": "pump down", "severity": "critical", "rule": "r"}),
        );
        let alert = fold(tenant, "north", None, &opened).unwrap();
        let acked = event(
            21,
            EventType::Ack,
            None,
            json!({"alertId": Uuid::from_u128(5), "by": "ada"}),
        );
        let alert = fold(tenant, "north", Some(alert), &acked).unwrap();
        let shelved = event(
            22,
            EventType::Shelve,
            None,
            json!({"alertId": Uuid::from_u128(5), "action": "shelved", "mode": "oneShot",
                   "reason": "known", "by": "ada at the main"}),
        );
        let alert = fold(tenant, "north", Some(alert), &shelved).unwrap();
        let Mirror::Alert { alert: a, .. } = &alert else {
            panic!("{alert:?}")
        };
        let shelf = a.shelved.as_ref().unwrap();
        assert_eq!(
            (shelf.mode, shelf.reason.as_str(), shelf.by.as_str()),
            (ShelveMode::OneShot, "known", "ada at the main")
        );
        let Mirror::Alert { alert: a, .. } = &alert else {
            panic!("{alert:?}")
        };
        assert_eq!(
            (a.status, a.acked_by.as_deref()),
            (AlertStatus::Acked, Some("ada"))
        );
        assert_eq!(
            key_of(&acked),
            Some((MirrorKind::Alert, Uuid::from_u128(5)))
        );
        let resolved = event(
            23,
            EventType::AlertResolved,
            None,
            json!({"alertId": Uuid::from_u128(5)}),
        );
        assert_eq!(fold(tenant, "north", Some(alert), &resolved), None);
    }
}
