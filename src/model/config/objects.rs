//! Hosts', services' and templates' specs, check commands and time periods.

use super::*;

/// The object spec of SPEC 2.2, shared by hosts, services and templates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_period: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contact_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contacts: Option<Vec<String>>,
    /// What the object needs (see `model::dependency`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<crate::model::dependency::DependsOn>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_checks: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_flap_detection: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_notifications: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flap_threshold_high: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flap_threshold_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_check_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notification_period: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_on: Option<Vec<String>>,
    /// The steps of an `http-flow` check (`model::flow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_flow: Option<crate::model::flow::HttpFlow>,
    /// Sites that vote on the object's state (at a main; `model::observers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observers: Option<crate::model::observers::Observers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parents: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runbook: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staleness_after: Option<GoDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staleness_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
    /// Text values; numbers and booleans (as Icinga configurations carry them) are kept as text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "vars_as_text"
    )]
    #[cfg_attr(test, schemars(schema_with = "vars_schema"))]
    pub vars: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A template document's labels.
pub fn template_labels(body: &str) -> BTreeMap<String, String> {
    template_field(body, "labels")
}

/// The object spec inside a template document's body text (empty if it has none).
pub fn template_spec(body: &str) -> ObjectSpec {
    template_field(body, "spec")
}

/// A field of a template document's body text; empty when absent, and a fault when the body
/// does not decode.
fn template_field<T: serde::de::DeserializeOwned + Default>(body: &str, field: &str) -> T {
    let value = serde_json::from_str::<Value>(body).and_then(|b| match b.get(field) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()),
    });
    crate::model::fault::decoded("a template document", value)
}

pub(super) fn vars_as_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    use serde::de::Error;
    let raw: Option<BTreeMap<String, Value>> = Option::deserialize(d)?;
    raw.map(|vars| {
        vars.into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                Value::Number(n) => Ok((k, n.to_string())),
                Value::Bool(b) => Ok((k, b.to_string())),
                _ => Err(D::Error::custom(format!(
                    "vars.{k}: expected text, a number or a boolean"
                ))),
            })
            .collect()
    })
    .transpose()
}

#[cfg(test)]
pub(super) fn vars_schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean"]},
        "description": "numbers and booleans are stored as text"
    })
}

/// The schema of what `validate_template` reads.
#[cfg(test)]
pub(super) fn template_schema(g: &mut SchemaGenerator) -> Schema {
    let spec = g.subschema_for::<ObjectSpec>();
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": false,
        "required": ["spec"],
        "properties": {
            "kind": {"enum": ["host", "service"], "description": "default host"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "spec": spec
        }
    })
}

#[cfg(not(test))]
pub(super) fn template_schema() {}

/// Template: `kind` (`host` or `service`, default `host`), `labels`, `spec` (required).
pub(super) fn validate_template(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    let spec = body
        .get("spec")
        .cloned()
        .ok_or_else(|| invalid("spec", "spec is required"))?;
    let spec: ObjectSpec =
        crate::model::input::from_value_at("spec", spec).map_err(|e| invalid("spec", e))?;
    let kind = body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("host")
        .to_string();
    if kind != "host" && kind != "service" {
        return Err(invalid("template", "kind must be host or service"));
    }
    let labels: BTreeMap<String, String> = match body.get("labels") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(l) => serde_json::from_value(l.clone())
            .map_err(|_| invalid("template", "labels must map strings to strings"))?,
    };
    if let Some(unknown) = body
        .keys()
        .find(|k| !["kind", "labels", "spec"].contains(&k.as_str()))
    {
        return Err(invalid("template", format!("unknown field {unknown:?}")));
    }
    body.insert("kind".into(), Value::String(kind));
    body.insert(
        "labels".into(),
        crate::model::fault::encoded("a template's labels", serde_json::to_value(labels)),
    );
    body.insert(
        "spec".into(),
        crate::model::fault::encoded("a template's spec", serde_json::to_value(spec)),
    );
    Ok(())
}

/// A check command the host's agent runs and reports (SEMANTICS 11): `agent:exec:<plugin>`.
/// The server never runs it; `GET /agent/checks?host=` tells the agent what to run.
pub const AGENT_EXEC: &str = "agent:exec:";

/// The plugin an `agent:exec:` check command names.
/// Where an object's check runs, by its effective spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckRun {
    /// This instance runs its `checkCommand`.
    Here,
    /// Its host's agent runs it (`agent:exec:`) and reports the result.
    Agent,
    /// No command: it takes passive results only.
    Passive,
    /// `enableChecks: false`.
    Off,
}

impl ObjectSpec {
    pub fn check_run(&self) -> CheckRun {
        match self.check_command.as_deref().filter(|c| !c.is_empty()) {
            None => CheckRun::Passive,
            Some(c) if agent_plugin(c).is_some() => CheckRun::Agent,
            Some(_) if self.enable_checks == Some(false) => CheckRun::Off,
            Some(_) => CheckRun::Here,
        }
    }
}

pub fn agent_plugin(command: &str) -> Option<&str> {
    command.strip_prefix(AGENT_EXEC).filter(|p| !p.is_empty())
}

/// `GET /api/v1/agent/checks?host=`: the `agent:exec:` checks a host's agent runs (the
/// reference's `AgentChecksResponse`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentChecks {
    pub host: String,
    pub checks: Vec<AgentCheck>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentCheck {
    /// The service the result is reported for.
    pub service: String,
    /// The plugin the agent runs (from its own allowlist).
    pub command: String,
    /// Its arguments, macros expanded except `$SECRET:name$`, which stays for the agent.
    pub args: Vec<String>,
    pub interval_seconds: u64,
    pub timeout_seconds: u64,
}

/// Built-in checks a check command may name instead of a plugin. The runner
/// (`monitor::checks`) matches on this without a catch-all, so a check named here runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinCheck {
    Ping,
    Tcp,
    Http,
    Dns,
    Modbus,
    Gsm,
    Snmp,
    SnmpWalk,
    HttpFlow,
}

impl BuiltinCheck {
    pub const ALL: [BuiltinCheck; 9] = [
        Self::Ping,
        Self::Tcp,
        Self::Http,
        Self::Dns,
        Self::Modbus,
        Self::Gsm,
        Self::Snmp,
        Self::SnmpWalk,
        Self::HttpFlow,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Tcp => "tcp",
            Self::Http => "http",
            Self::Dns => "dns",
            Self::Modbus => "modbus",
            Self::Gsm => "gsm",
            Self::Snmp => "snmp",
            Self::SnmpWalk => "snmp-walk",
            Self::HttpFlow => "http-flow",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// The built-in checks' names, in `BuiltinCheck::ALL`'s order.
pub const BUILTIN_CHECKS: [&str; BuiltinCheck::ALL.len()] = {
    let mut names = [""; BuiltinCheck::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = BuiltinCheck::ALL[i].as_str();
        i += 1;
    }
    names
};

/// A check command: `type: plugin` runs `line` (argv with `$macro$`s) as a Nagios plugin;
/// `type: builtin` names a built-in check in `line[0]`, its options after it.
#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CheckCommandBody {
    #[serde(rename = "type")]
    kind: String,
    line: Vec<String>,
    /// Pass macros to plugins as environment variables too.
    #[serde(default)]
    env: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<GoDuration>,
}

pub(super) fn validate_check_command(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |c: &CheckCommandBody| {
        one_of("type", &c.kind, &["plugin", "builtin"])?;
        match (c.kind.as_str(), c.line.first()) {
            (_, None) => Err(invalid("", "line must not be empty")),
            ("builtin", Some(b)) => one_of("builtin", b, &BUILTIN_CHECKS),
            _ => Ok(()),
        }
    })
}

/// `HH:MM-HH:MM` within one day (`24:00` allowed as an end).
pub(super) fn check_range(r: &str) -> Result<(), Invalid> {
    crate::model::timeperiod::parse_range(r)
        .map(|_| ())
        .ok_or_else(|| invalid("", format!("{r:?} is not a range such as 08:00-17:00")))
}

pub(super) fn validate_time_period(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |t: &crate::model::timeperiod::TimePeriod| {
        if let Some(tz) = &t.time_zone {
            check_time_zone(tz)?;
        }
        for (day, ranges) in &t.days {
            one_of("day", day, &crate::model::timeperiod::WEEKDAYS)?;
            ranges.iter().try_for_each(|r| check_range(r))?;
        }
        for (date, ranges) in &t.exceptions {
            date.parse::<jiff::civil::Date>()
                .map_err(|_| invalid("", format!("exception {date:?} is not a date")))?;
            ranges.iter().try_for_each(|r| check_range(r))?;
        }
        Ok(())
    })
}

pub(super) fn validate_time_intervals(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |t: &crate::model::interval::NamedTimeIntervals| {
        if t.time_intervals.is_empty() {
            return Err(invalid("timeIntervals", "timeIntervals lists at least one"));
        }
        check_time_intervals(&t.time_intervals)
    })
}

/// Recurring windows, checked: `svc:validation/timeIntervals` naming the field that is wrong.
pub fn check_time_intervals(
    intervals: &[crate::model::interval::TimeInterval],
) -> Result<(), Invalid> {
    crate::model::interval::Recurrence::new(intervals)
        .map(|_| ())
        .map_err(|(field, why)| invalid("timeIntervals", format!("timeIntervals {field}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_checks_are_named_once() {
        for (check, name) in BuiltinCheck::ALL.into_iter().zip(BUILTIN_CHECKS) {
            assert_eq!(BuiltinCheck::parse(name), Some(check));
        }
        assert_eq!(BuiltinCheck::parse("nmap"), None);
    }
    use serde_json::json;

    #[test]
    fn templates_take_the_object_spec() {
        let m = checked(
            "templates",
            json!({"spec": {"interval": 60, "maxCheckAttempts": 3}}),
        )
        .unwrap();
        assert_eq!(m["spec"]["interval"], "1m0s");
        assert_eq!(m["kind"], "host");
        let e = checked("templates", json!({"spec": {"intervall": 60}})).unwrap_err();
        assert_eq!(e.field, "spec");
        assert!(e.detail.contains("intervall"));
        assert_eq!(checked("templates", json!({})).unwrap_err().field, "spec");
        assert_eq!(
            checked("templates", json!({"spec": {}, "kind": "weird"}))
                .unwrap_err()
                .field,
            "template"
        );
    }

    #[test]
    fn time_periods_and_check_commands_are_checked() {
        assert!(checked("time-periods", json!({"timeZone": "Europe/Berlin", "days": {"monday": ["08:00-12:00", "13:00-17:00"]}, "exceptions": {"2026-12-24": []}})).is_ok());
        for days in [json!({"monday": ["17:00-08:00"]}), json!({"moonday": []})] {
            assert_eq!(
                checked("time-periods", json!({"days": days}))
                    .unwrap_err()
                    .field,
                "time-period"
            );
        }
        assert!(
            checked(
                "check-commands",
                json!({"type": "builtin", "line": ["http", "--expect", "200"]})
            )
            .is_ok()
        );
        assert_eq!(
            checked(
                "check-commands",
                json!({"type": "builtin", "line": ["telepathy"]})
            )
            .unwrap_err()
            .field,
            "check-command"
        );
    }
}
