//! Live check state (CONTRACT 3 "States on the wire") and the state machine that moves an
//! object between its states (SEMANTICS 1: Nagios/Icinga soft and hard states).

use super::Timestamp;
use super::event::Severity;
use super::object::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

pub const OK: u8 = 0;
pub const UP: u8 = 0;
pub const DOWN: u8 = 1;
pub const UNREACHABLE: u8 = 2;
/// UNKNOWN for services and, for staleness only, hosts.
pub const UNKNOWN: u8 = 3;
/// `maxCheckAttempts` when the spec sets none (or a value of 0).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StateType {
    Soft,
    Hard,
}

impl StateType {
    /// As it is serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            StateType::Soft => "soft",
            StateType::Hard => "hard",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CheckState {
    pub object_id: Uuid,
    /// Services 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; hosts 0 UP, 1 DOWN, 2 UNREACHABLE.
    pub state: u8,
    pub state_type: StateType,
    pub attempt: u32,
    pub output: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub long_output: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub perfdata: String,
    pub last_check: Timestamp,
    pub last_change: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hard_change: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ok: Option<Timestamp>,
    #[serde(default)]
    pub flapping: bool,
    /// The weighted share of state changes over the recent results, in percent.
    #[serde(default)]
    pub flap_pct: f64,
    /// Whether each of the last results (bit 0 the newest) changed the raw state.
    #[serde(default, skip_serializing)]
    pub flap_history: u32,
    #[serde(default)]
    pub downtime_depth: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_by: Option<String>,
}

/// `POST /api/v1/check-commands:test`: a built-in check to run once (the reference's
/// `testCheckRequest`).
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCheck {
    /// A built-in check's name (`GET /check-commands:builtins`).
    pub builtin: String,
    /// What it checks: a host name or address (empty for `gsm`).
    #[serde(default)]
    pub address: String,
    /// Its flags, as a service's `args` (no macros, no secrets).
    #[serde(default)]
    pub args: Vec<String>,
}

/// A service state's rank, OK < WARNING < UNKNOWN < CRITICAL: the worse of two is the one
/// that ranks higher.
pub fn service_rank(state: u8) -> u8 {
    match state {
        0 => 0,
        1 => 1,
        3 => 2,
        _ => 3,
    }
}

/// The worse of two service states.
pub fn worse(a: u8, b: u8) -> u8 {
    if service_rank(b) > service_rank(a) {
        b
    } else {
        a
    }
}

/// What a test run found (the reference's `testCheckResponse`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TestCheckResult {
    /// The check's name.
    pub label: String,
    /// 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    pub state: u8,
    /// The text before `|`.
    pub output: String,
    /// The performance data after `|`, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub perfdata: String,
    /// The lines after the first (a walk's rows), if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub long_output: String,
    pub took_ms: u64,
}

/// `POST /hosts/{id}/snmp-interfaces` (issue 74): the host's SNMP agent's interfaces, and a
/// service for each when asked.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnmpInterfacesRequest {
    /// The agent's flags as an `snmp` check takes them (`-C $SECRET:snmp-community$`, or `-P 3
    /// -U … -A $SECRET:… -X $SECRET:…`); macros and secrets as in a check's, and the services
    /// made keep them as written.
    #[serde(default)]
    pub args: Vec<String>,
    /// Make a service of each interface (default: list them only). One whose name exists is
    /// left as it is, with `error`.
    #[serde(default)]
    pub create: bool,
    /// The services' check interval in seconds (default: a service's).
    #[serde(default)]
    pub interval: Option<u64>,
}

/// The interfaces found.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SnmpInterfaces {
    pub interfaces: Vec<SnmpInterface>,
}

/// One interface, and the service that watches it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SnmpInterface {
    /// Its ifIndex.
    pub index: u64,
    /// Its ifDescr.
    pub name: String,
    /// Its ifOperStatus (`up`, `down`, `lowerLayerDown`, …).
    pub status: String,
    /// The service's name: `if <name>` (`/` as `-`).
    pub service: String,
    /// The service's `args`: the request's and `--interface <name>`.
    pub args: Vec<String>,
    /// The service made, with `create`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<uuid::Uuid>,
    /// Why it was not made (its name exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SnmpInterface {
    /// The body of `POST /services` that makes it, on `host`.
    pub fn service_body(&self, host: &str, interval: Option<u64>) -> serde_json::Value {
        let mut spec = serde_json::json!({"checkCommand": "snmp", "args": self.args});
        if let Some(seconds) = interval {
            spec["interval"] = seconds.into();
        }
        serde_json::json!({"name": self.service, "host": host, "spec": spec})
    }
}

/// How many of a tenant's objects are in each state (the reference's `StateSummary`, for the
/// wallboard); objects without a result yet are in none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StateSummary {
    pub hosts_up: u64,
    pub hosts_down: u64,
    pub hosts_unreachable: u64,
    pub services_ok: u64,
    pub services_warning: u64,
    pub services_critical: u64,
    pub services_unknown: u64,
    /// Problems someone acknowledged.
    pub acked: u64,
    pub flapping: u64,
    pub in_downtime: u64,
}

impl StateSummary {
    /// Counts one object of `kind` in state `s`.
    pub fn add(&mut self, kind: super::object::ObjectKind, s: &CheckState) {
        use super::object::ObjectKind;
        let counter = match (kind, s.state) {
            (ObjectKind::Host, 0) => &mut self.hosts_up,
            (ObjectKind::Host, 1) => &mut self.hosts_down,
            (ObjectKind::Host, _) => &mut self.hosts_unreachable,
            (ObjectKind::Service, 0) => &mut self.services_ok,
            (ObjectKind::Service, 1) => &mut self.services_warning,
            (ObjectKind::Service, 2) => &mut self.services_critical,
            (ObjectKind::Service, _) => &mut self.services_unknown,
        };
        *counter += 1;
        self.acked += u64::from(s.state != 0 && s.acked_by.is_some());
        self.flapping += u64::from(s.flapping);
        self.in_downtime += u64::from(s.downtime_depth > 0);
    }
}

/// One check result for one object, already mapped to the object's state numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub state: u8,
    pub output: String,
    pub long_output: String,
    pub perfdata: String,
    /// `maxCheckAttempts` to count against; 1 makes every problem hard at once.
    pub max_attempts: u32,
    /// Flap detection thresholds `(low, high)` in percent; `None` when disabled.
    pub flap_thresholds: Option<(f64, f64)>,
}

/// Results the flap history spans (Icinga).
pub const FLAP_WINDOW: u32 = 21;
pub const FLAP_LOW: f64 = 25.0;
pub const FLAP_HIGH: f64 = 50.0;

/// The flap thresholds `(low, high)` of a resolved spec; `None` when detection is off.
pub fn flap_thresholds(spec: &super::config::ObjectSpec) -> Option<(f64, f64)> {
    (spec.enable_flap_detection != Some(false)).then(|| {
        (
            spec.flap_threshold_low.unwrap_or(FLAP_LOW),
            spec.flap_threshold_high.unwrap_or(FLAP_HIGH),
        )
    })
}

/// Icinga's weighted change rate: entry i (0 oldest … 20 newest) weighs 0.8 + 0.4·i/20. The
/// whole window counts from the first result on (entries not yet observed as no change), so a
/// single change is no flapping.
pub fn flap_pct(history: u32) -> f64 {
    let (mut changed, mut total) = (0.0, 0.0);
    for back in 0..FLAP_WINDOW {
        let i = f64::from(FLAP_WINDOW - 1 - back);
        let w = 0.8 + 0.4 * i / f64::from(FLAP_WINDOW - 1);
        total += w;
        if history & (1 << back) != 0 {
            changed += w;
        }
    }
    if total == 0.0 {
        0.0
    } else {
        100.0 * changed / total
    }
}

/// What changed, for the events: the state change (if any) and a flapping start or end.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub from: Option<u8>,
    pub to: u8,
    pub state_type: StateType,
    pub attempt: u32,
    /// Whether this result changed the state or entered a hard state.
    pub changed: bool,
    /// `Some(true)` when flapping started, `Some(false)` when it ended.
    pub flapping: Option<bool>,
}

/// The label of a state number (`CRITICAL`, `UP`...); `PENDING` before the first result.
pub fn label(kind: ObjectKind, state: Option<u8>) -> &'static str {
    match (kind, state) {
        (_, None) => "PENDING",
        (ObjectKind::Host, Some(0)) => "UP",
        (ObjectKind::Host, Some(1)) => "DOWN",
        (ObjectKind::Host, Some(2)) => "UNREACHABLE",
        (ObjectKind::Host, Some(_)) => "UNKNOWN",
        (ObjectKind::Service, Some(0)) => "OK",
        (ObjectKind::Service, Some(1)) => "WARNING",
        (ObjectKind::Service, Some(2)) => "CRITICAL",
        (ObjectKind::Service, Some(_)) => "UNKNOWN",
    }
}

/// A `state_change` event's payload as the results' transaction journals it: typed, so the
/// writer thread encodes its row straight from the fields instead of building a JSON map first
/// (`event::Payload` builds the map only once something reads it). Its encoding, in JSON and in
/// the store, is the map's: the same keys, in the same (sorted) order.
#[derive(Clone, Debug, PartialEq)]
pub struct StateChangePayload {
    pub object: String,
    pub kind: ObjectKind,
    pub from: Option<u8>,
    pub to: u8,
    pub state_type: StateType,
    pub attempt: u32,
    pub output: String,
    pub labels: BTreeMap<String, String>,
    /// The performance data.
    pub metric: String,
    /// A service's host.
    pub host: Option<String>,
}

impl StateChangePayload {
    /// The payload as the JSON object rules, selectors and the event list read.
    pub fn to_value(&self) -> Value {
        let mut fields: Vec<(&str, Value)> = vec![
            ("attempt", self.attempt.into()),
            ("from", label(self.kind, self.from).into()),
            ("fromState", self.from.into()),
            ("kind", self.kind.as_str().into()),
            (
                "labels",
                Value::Object(
                    self.labels
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect(),
                ),
            ),
            ("metric", self.metric.clone().into()),
            ("object", self.object.clone().into()),
            ("output", self.output.clone().into()),
            ("stateType", self.state_type.as_str().into()),
            ("to", label(self.kind, Some(self.to)).into()),
            ("toState", self.to.into()),
        ];
        if let Some(host) = &self.host {
            fields.push(("host", host.clone().into()));
        }
        Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }
}

impl Serialize for StateChangePayload {
    /// As `to_value()` serializes: keys in byte order, numbers as `u64`, a missing state as
    /// JSON's `null` (a unit).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Null;
        impl Serialize for Null {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_unit()
            }
        }
        let mut m = s.serialize_map(Some(11 + usize::from(self.host.is_some())))?;
        m.serialize_entry("attempt", &u64::from(self.attempt))?;
        m.serialize_entry("from", label(self.kind, self.from))?;
        match self.from {
            Some(from) => m.serialize_entry("fromState", &u64::from(from))?,
            None => m.serialize_entry("fromState", &Null)?,
        }
        if let Some(host) = &self.host {
            m.serialize_entry("host", host)?;
        }
        m.serialize_entry("kind", self.kind.as_str())?;
        m.serialize_entry("labels", &self.labels)?;
        m.serialize_entry("metric", &self.metric)?;
        m.serialize_entry("object", &self.object)?;
        m.serialize_entry("output", &self.output)?;
        m.serialize_entry("stateType", self.state_type.as_str())?;
        m.serialize_entry("to", label(self.kind, Some(self.to)))?;
        m.serialize_entry("toState", &u64::from(self.to))?;
        m.end()
    }
}

/// The event severity of a state: hosts UP ok, DOWN critical, UNREACHABLE warning (SPEC 6.2);
/// services OK ok, WARNING warning, CRITICAL critical, UNKNOWN warning.
pub fn severity(kind: ObjectKind, state: u8) -> Severity {
    match (kind, state) {
        (_, 0) => Severity::Ok,
        (ObjectKind::Host, 1) => Severity::Critical,
        (ObjectKind::Host, _) => Severity::Warning,
        (ObjectKind::Service, 2) => Severity::Critical,
        (ObjectKind::Service, _) => Severity::Warning,
    }
}

/// How bad a state is, for ordering problems: CRITICAL/DOWN, then UNKNOWN/UNREACHABLE, then
/// WARNING, then OK/UP.
pub fn badness(kind: ObjectKind, state: u8) -> u8 {
    match (kind, state) {
        (_, 0) => 0,
        (ObjectKind::Host, 1) | (ObjectKind::Service, 2) => 3,
        (ObjectKind::Host, _) | (ObjectKind::Service, 3) => 2,
        (ObjectKind::Service, _) => 1,
    }
}

/// Applies one observation to the previous state (`None`: PENDING). Returns the new state and
/// the transition to report, if the raw state changed or a hard state was entered.
pub fn step(
    object_id: Uuid,
    prev: Option<&CheckState>,
    obs: &Observation,
    now: Timestamp,
) -> (CheckState, Option<Transition>) {
    let max = if obs.max_attempts == 0 {
        DEFAULT_MAX_ATTEMPTS
    } else {
        obs.max_attempts
    };
    let (state_type, attempt, hard_change) = match prev {
        // Recovery is hard at once; it is a hard change only after a hard problem.
        _ if obs.state == OK => (
            StateType::Hard,
            1,
            prev.is_none_or(|p| p.state != OK && p.state_type == StateType::Hard),
        ),
        // OK (or nothing yet) → problem: soft, or hard at once with one attempt.
        None => hard_if(max <= 1, 1),
        Some(p) if p.state == OK => hard_if(max <= 1, 1),
        // A hard problem changing severity is a new hard state; the same one stays.
        Some(p) if p.state_type == StateType::Hard && p.state != obs.state => {
            (StateType::Hard, 1, true)
        }
        Some(p) if p.state_type == StateType::Hard => (StateType::Hard, p.attempt, false),
        // A soft problem counts attempts and turns hard at the maximum.
        Some(p) => {
            let attempt = p.attempt + 1;
            hard_if(attempt >= max, attempt)
        }
    };
    let raw_change = prev.is_none_or(|p| p.state != obs.state);
    // The history records changes between results; the first result has nothing to differ from.
    let history = prev.map_or(0, |p| {
        ((p.flap_history << 1) | u32::from(p.state != obs.state)) & ((1 << FLAP_WINDOW) - 1)
    });
    let pct = flap_pct(history);
    let was_flapping = prev.is_some_and(|p| p.flapping);
    let flapping = match obs.flap_thresholds {
        None => false,
        Some((low, high)) => {
            if was_flapping {
                pct >= low
            } else {
                pct >= high
            }
        }
    };
    let next = CheckState {
        object_id,
        state: obs.state,
        state_type,
        attempt,
        output: obs.output.clone(),
        long_output: obs.long_output.clone(),
        perfdata: obs.perfdata.clone(),
        last_check: now,
        last_change: if raw_change {
            now
        } else {
            prev.map_or(now, |p| p.last_change)
        },
        last_hard_change: if hard_change {
            Some(now)
        } else {
            prev.and_then(|p| p.last_hard_change)
        },
        last_ok: if obs.state == OK {
            Some(now)
        } else {
            prev.and_then(|p| p.last_ok)
        },
        flapping,
        flap_pct: (pct * 10.0).round() / 10.0,
        flap_history: history,
        downtime_depth: prev.map_or(0, |p| p.downtime_depth),
        // An acknowledgement ends with the problem.
        acked_by: if obs.state == OK {
            None
        } else {
            prev.and_then(|p| p.acked_by.clone())
        },
    };
    let entered_hard = state_type == StateType::Hard
        && prev.is_none_or(|p| p.state_type == StateType::Soft || p.state != obs.state);
    let changed = raw_change || entered_hard;
    let flap_change = (flapping != was_flapping).then_some(flapping);
    let transition = (changed || flap_change.is_some()).then(|| Transition {
        from: prev.map(|p| p.state),
        to: obs.state,
        state_type,
        attempt,
        changed,
        flapping: flap_change,
    });
    (next, transition)
}

fn hard_if(hard: bool, attempt: u32) -> (StateType, u32, bool) {
    if hard {
        (StateType::Hard, attempt, true)
    } else {
        (StateType::Soft, attempt, false)
    }
}

/// One problem of `GET /api/v1/problems`: an object in a non-OK state, with its host's name.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub object: super::object::Object,
    /// A service's host, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_name: Option<String>,
    pub state: CheckState,
    /// The object's effective labels (its templates', a service's host's, its own), as
    /// selectors see them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_is_worse_than_unknown_is_worse_than_warning() {
        assert_eq!(worse(2, 3), 2);
        assert_eq!(worse(3, 2), 2);
        assert_eq!(worse(0, 3), 3);
        assert_eq!(worse(1, 0), 1);
        assert_eq!(worse(3, 1), 3);
    }

    /// A typed state change encodes exactly as the JSON object it stands for, in JSON and in
    /// the store's MessagePack, so readers of either form cannot tell them apart; reading it
    /// builds that object.
    #[test]
    fn a_typed_state_change_encodes_as_its_object() {
        let service = StateChangePayload {
            object: "disk".into(),
            kind: ObjectKind::Service,
            from: Some(OK),
            to: 2,
            state_type: StateType::Hard,
            attempt: 3,
            output: "DISK CRITICAL \"quoted\" é".into(),
            labels: [
                ("env".to_string(), "prod".to_string()),
                ("a".into(), "b".into()),
            ]
            .into(),
            metric: "used=95%;90;95".into(),
            host: Some("web1".into()),
        };
        for typed in [service, host_down()] {
            let value = typed.to_value();
            assert_eq!(
                serde_json::to_string(&typed).unwrap(),
                serde_json::to_string(&value).unwrap()
            );
            let (mut a, mut b) = (Vec::new(), Vec::new());
            rmp_serde::encode::write_named(&mut a, &typed).unwrap();
            rmp_serde::encode::write_named(&mut b, &value).unwrap();
            assert_eq!(a, b);
            let payload = super::super::event::Payload::state_change(typed.clone());
            assert_eq!(*payload, value);
            assert_eq!(payload.clone().into_value(), value);
            let decoded: super::super::event::Payload = rmp_serde::from_slice(&a).unwrap();
            assert_eq!(decoded, payload);
        }
        let value = host_down().to_value();
        assert_eq!(value["fromState"], Value::Null);
        assert_eq!(value["from"], "PENDING");
        assert_eq!(value["to"], "DOWN");
        assert_eq!(value["stateType"], "soft");
        assert!(value.get("host").is_none());
    }

    fn host_down() -> StateChangePayload {
        StateChangePayload {
            object: "web1".into(),
            kind: ObjectKind::Host,
            from: None,
            to: DOWN,
            state_type: StateType::Soft,
            attempt: 1,
            output: String::new(),
            labels: BTreeMap::new(),
            metric: String::new(),
            host: None,
        }
    }

    fn obs(state: u8, max: u32) -> Observation {
        Observation {
            state,
            output: format!("s{state}"),
            long_output: String::new(),
            perfdata: String::new(),
            max_attempts: max,
            flap_thresholds: Some((FLAP_LOW, FLAP_HIGH)),
        }
    }

    fn run(states: &[u8], max: u32) -> Vec<(u8, StateType, u32, bool)> {
        let id = Uuid::nil();
        let mut prev: Option<CheckState> = None;
        let mut out = Vec::new();
        let mut now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        for &s in states {
            let (next, t) = step(id, prev.as_ref(), &obs(s, max), now);
            out.push((
                next.state,
                next.state_type,
                next.attempt,
                t.is_some_and(|t| t.changed),
            ));
            prev = Some(next);
            now = now.plus(std::time::Duration::from_secs(60));
        }
        out
    }

    use StateType::{Hard, Soft};

    #[test]
    fn soft_then_hard_at_max_attempts() {
        assert_eq!(
            run(&[0, 2, 2, 2, 2, 0], 3),
            vec![
                (0, Hard, 1, true),
                (2, Soft, 1, true),
                (2, Soft, 2, false),
                (2, Hard, 3, true),
                (2, Hard, 3, false),
                (0, Hard, 1, true)
            ]
        );
    }

    #[test]
    fn severity_changes() {
        // A soft problem changing severity keeps counting; a hard one starts a new hard state.
        assert_eq!(
            run(&[1, 2, 2], 3),
            vec![(1, Soft, 1, true), (2, Soft, 2, true), (2, Hard, 3, true)]
        );
        assert_eq!(
            run(&[2, 1], 1),
            vec![(2, Hard, 1, true), (1, Hard, 1, true)]
        );
    }

    #[test]
    fn one_attempt_is_hard_at_once_and_soft_recovery_is_silent() {
        assert_eq!(
            run(&[2, 2], 1),
            vec![(2, Hard, 1, true), (2, Hard, 1, false)]
        );
        let id = Uuid::nil();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (ok, _) = step(id, None, &obs(0, 3), t0);
        assert_eq!(
            ok.last_hard_change,
            Some(t0),
            "the first result sets the hard state"
        );
        let (soft, _) = step(
            id,
            Some(&ok),
            &obs(2, 3),
            t0.plus(std::time::Duration::from_secs(1)),
        );
        let (back, t) = step(
            id,
            Some(&soft),
            &obs(0, 3),
            t0.plus(std::time::Duration::from_secs(2)),
        );
        assert!(t.is_some(), "a raw change is reported");
        assert_eq!(back.last_hard_change, Some(t0), "but it is no hard change");
    }

    #[test]
    fn flapping_starts_high_and_ends_low() {
        assert_eq!(flap_pct(0), 0.0);
        assert_eq!(flap_pct((1 << 21) - 1), 100.0);
        assert!(flap_pct(1) > flap_pct(1 << 20), "recent changes weigh more");
        let id = Uuid::nil();
        let mut now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut prev: Option<CheckState> = None;
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let states: Vec<u8> = (0..12)
            .map(|i| (i % 2) as u8 * 2)
            .chain(std::iter::repeat_n(0, 30))
            .collect();
        for (i, s) in states.iter().enumerate() {
            let (next, t) = step(id, prev.as_ref(), &obs(*s, 1), now);
            match t.and_then(|t| t.flapping) {
                Some(true) => starts.push(i),
                Some(false) => ends.push(i),
                None => {}
            }
            prev = Some(next);
            now = now.plus(std::time::Duration::from_secs(60));
        }
        assert_eq!(starts, [10], "ten changes within the window start flapping");
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert!(ends[0] > 12 && !prev.unwrap().flapping);
        let (p, t) = step(
            id,
            None,
            &Observation {
                flap_thresholds: None,
                ..obs(2, 1)
            },
            now,
        );
        assert!(
            !p.flapping && t.unwrap().flapping.is_none(),
            "disabled detection never flaps"
        );
    }

    #[test]
    fn labels_and_severities() {
        assert_eq!(label(ObjectKind::Service, Some(2)), "CRITICAL");
        assert_eq!(label(ObjectKind::Host, Some(2)), "UNREACHABLE");
        assert_eq!(label(ObjectKind::Host, None), "PENDING");
        assert_eq!(severity(ObjectKind::Host, UNREACHABLE), Severity::Warning);
        assert_eq!(severity(ObjectKind::Host, DOWN), Severity::Critical);
        assert!(badness(ObjectKind::Service, 2) > badness(ObjectKind::Service, 3));
        assert!(badness(ObjectKind::Service, 3) > badness(ObjectKind::Service, 1));
    }
}
