//! Configuration documents (SPEC 4.3): twenty kinds with one CRUD shape, addressed by name.
//! A document is a JSON object: the kind's own fields plus the common metadata (`id`, `name`,
//! `tenantId`, `createdAt`, `updatedAt`, `version`). Kinds whose fields SPEC gives are
//! validated to them; the others keep their fields as given until their engine defines them.

use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

/// One configuration kind: its path segment, permissions and validation.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The URL segment and the `kinds` value of `config` events.
    pub name: &'static str,
    /// `svc:validation/<code>` for problems with the document as a whole.
    pub code: &'static str,
    pub read: &'static str,
    pub write: &'static str,
    validate: fn(&mut Map<String, Value>) -> Result<(), Invalid>,
}

/// A validation failure: the `svc:validation/<field>` and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub detail: String,
}

fn invalid(field: &str, detail: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        detail: detail.into(),
    }
}

const CONFIG: (&str, &str) = ("objects:read", "config:write");
const ONCALL: (&str, &str) = ("oncall:read", "oncall:write");
const ADMIN: (&str, &str) = ("admin:read", "admin:write");

const fn kind(
    name: &'static str,
    code: &'static str,
    perms: (&'static str, &'static str),
    validate: fn(&mut Map<String, Value>) -> Result<(), Invalid>,
) -> Kind {
    Kind {
        name,
        code,
        read: perms.0,
        write: perms.1,
        validate,
    }
}

pub const KINDS: [Kind; 20] = [
    kind("templates", "template", CONFIG, validate_template),
    kind("check-commands", "check-command", CONFIG, free_form),
    kind("time-periods", "time-period", CONFIG, free_form),
    kind("alert-rules", "alert-rule", CONFIG, free_form),
    kind("alert-groups", "alert-group", CONFIG, free_form),
    kind(
        "escalation-policies",
        "escalation-policy",
        CONFIG,
        validate_as::<EscalationPolicyBody>,
    ),
    kind("schedules", "schedule", ONCALL, free_form),
    kind("contacts", "contact", ONCALL, validate_contact),
    kind("contact-groups", "contact-group", ONCALL, free_form),
    kind("channels", "channel", CONFIG, free_form),
    kind("event-sources", "event-source", CONFIG, free_form),
    kind("business-services", "business-service", CONFIG, free_form),
    kind("dashboards", "dashboard", CONFIG, validate_dashboard),
    kind("reports", "report", CONFIG, free_form),
    kind("saved-filters", "saved-filter", CONFIG, free_form),
    kind("roles", "role", ADMIN, validate_role),
    kind("webhooks", "webhook", CONFIG, free_form),
    kind("sites", "site", CONFIG, validate_as::<SiteBody>),
    kind("ivr-menus", "ivr-menu", CONFIG, validate_as::<IvrMenuBody>),
    kind(
        "tts-profiles",
        "tts-profile",
        CONFIG,
        validate_as::<TtsProfileBody>,
    ),
];

pub fn kind_by_name(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// Keys the service owns; a body's values for them are ignored.
pub const METADATA: [&str; 6] = [
    "id",
    "name",
    "tenantId",
    "createdAt",
    "updatedAt",
    "version",
];

impl Kind {
    /// Checks and normalises a document body (metadata already removed).
    pub fn validate(&self, body: &mut Map<String, Value>) -> Result<(), Invalid> {
        (self.validate)(body).map_err(|mut e| {
            if e.field.is_empty() {
                e.field = self.code.to_string();
            }
            e
        })
    }
}

/// A name as it appears in URLs: 1 to 200 characters, no `/`, no control characters.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.trim().is_empty()
        && name.chars().count() <= 200
        && !name.chars().any(|c| c == '/' || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            format!("{name:?} is not a valid name (1-200 characters, no '/')"),
        ))
    }
}

fn free_form(_: &mut Map<String, Value>) -> Result<(), Invalid> {
    Ok(())
}

/// Parses the body as `T` (unknown fields rejected) and writes back its normal form.
fn validate_as<T: Serialize + for<'de> Deserialize<'de>>(
    body: &mut Map<String, Value>,
) -> Result<(), Invalid> {
    let parsed: T = serde_json::from_value(Value::Object(body.clone()))
        .map_err(|e| invalid("", e.to_string()))?;
    if let Value::Object(normal) =
        serde_json::to_value(parsed).map_err(|e| invalid("", e.to_string()))?
    {
        *body = normal;
    }
    Ok(())
}

/// The object spec of SPEC 2.2, shared by hosts, services and templates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vars: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// Template: `kind` (`host` or `service`, default `host`), `labels`, `spec` (required).
fn validate_template(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    let spec = body
        .get("spec")
        .cloned()
        .ok_or_else(|| invalid("spec", "spec is required"))?;
    let spec: ObjectSpec =
        serde_json::from_value(spec).map_err(|e| invalid("spec", e.to_string()))?;
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
        serde_json::to_value(labels).unwrap_or_default(),
    );
    body.insert(
        "spec".into(),
        serde_json::to_value(spec).unwrap_or_default(),
    );
    Ok(())
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EscalationPolicyBody {
    steps: Vec<EscalationStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EscalationStep {
    after: GoDuration,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    channels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_repeats: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    repeat_every: Option<GoDuration>,
    #[serde(default)]
    unless_acked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    notify: Option<EscalationTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    action: Option<EscalationAction>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EscalationTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contact: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contact_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    escalate_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schedule: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EscalationAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    servicenow: Option<ServiceNowAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ticket: Option<TicketAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    webhook: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServiceNowAction {
    assignment_group: String,
    auto_close: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TicketAction {
    channel: String,
    #[serde(default)]
    auto_close: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    params: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContactBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_id: Option<String>,
    #[serde(default)]
    preferences: Vec<Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChannelPreference {
    channels: Vec<String>,
    profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    severity: Option<String>,
}

fn validate_contact(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_as::<ContactBody>(body)?;
    let prefs = body
        .get("preferences")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let prefs: Vec<ChannelPreference> =
        serde_json::from_value(prefs).map_err(|e| invalid("preferences", e.to_string()))?;
    if let Some(tz) = body.get("timeZone").and_then(Value::as_str) {
        if jiff::tz::TimeZone::get(tz).is_err() {
            return Err(invalid("contact", format!("unknown time zone {tz:?}")));
        }
    }
    body.insert(
        "preferences".into(),
        serde_json::to_value(prefs).unwrap_or_default(),
    );
    Ok(())
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DashboardBody {
    #[serde(default)]
    shared: bool,
    /// Base64 bytes of the layout.
    spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    share_token: Option<String>,
}

fn is_base64(s: &str) -> bool {
    let t = s.trim_end_matches('=');
    s.len() % 4 == 0
        && s.len() - t.len() <= 2
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

fn validate_dashboard(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_as::<DashboardBody>(body)?;
    match body.get("spec").and_then(Value::as_str) {
        Some(s) if is_base64(s) => Ok(()),
        _ => Err(invalid("dashboard", "spec must be base64")),
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RoleBody {
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    idp_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

fn validate_role(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_as::<RoleBody>(body)?;
    let perms = body
        .get("permissions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for p in perms {
        let p = p.as_str().unwrap_or_default();
        if !super::identity::is_permission(p) {
            return Err(invalid(
                "role",
                format!("permission {p:?} is not of the form resource:action"),
            ));
        }
    }
    Ok(())
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SiteBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IvrMenuBody {
    options: Vec<IvrOption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    greeting: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pin: Option<String>,
    #[serde(default)]
    trust_caller_id: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    voice: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IvrOption {
    action: String,
    digit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    escalation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    record: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    severity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TtsProfileBody {
    engine: String,
    audio: TtsAudio,
    detect: TtsDetect,
    normalize: TtsNormalize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache_disabled: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    config: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fallback: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    voice: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    voices: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TtsAudio {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gain_db: Option<f64>,
    #[serde(default)]
    keep_silence: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lead_silence_ms: Option<i64>,
    #[serde(default)]
    no_normalize: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preroll: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sample_rate: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trail_silence_ms: Option<i64>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TtsDetect {
    #[serde(default)]
    languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TtsNormalize {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acronyms: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digits_from: Option<i64>,
    #[serde(default)]
    disabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identifiers: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip_addresses: Option<String>,
    #[serde(default)]
    no_builtin_lexicon: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    numbers: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spell_out: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    symbols: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    units: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    urls: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lexicon: Vec<LexiconEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    regex: Vec<RegexRule>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LexiconEntry {
    from: String,
    to: String,
    #[serde(default)]
    match_case: bool,
    #[serde(default)]
    substring: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegexRule {
    pattern: String,
    replace: String,
}

/// A stored configuration document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigDoc {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub kind: String,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
    /// The kind's own fields, as a JSON text (the store's codec keeps metadata typed).
    pub body: String,
}

impl ConfigDoc {
    /// The document as the API shows it: the body's fields, then the metadata.
    pub fn to_json(&self) -> Value {
        let mut out: Map<String, Value> = serde_json::from_str(&self.body).unwrap_or_default();
        out.insert("id".into(), Value::String(self.id.to_string()));
        out.insert("name".into(), Value::String(self.name.clone()));
        out.insert("tenantId".into(), Value::String(self.tenant_id.to_string()));
        out.insert(
            "createdAt".into(),
            Value::String(self.created_at.to_string()),
        );
        out.insert(
            "updatedAt".into(),
            Value::String(self.updated_at.to_string()),
        );
        out.insert("version".into(), Value::from(self.version));
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(kind: &str, body: Value) -> Result<Map<String, Value>, Invalid> {
        let mut m = body.as_object().unwrap().clone();
        kind_by_name(kind).unwrap().validate(&mut m).map(|()| m)
    }

    #[test]
    fn templates_take_the_object_spec() {
        let m = check(
            "templates",
            json!({"spec": {"interval": 60, "maxCheckAttempts": 3}}),
        )
        .unwrap();
        assert_eq!(m["spec"]["interval"], "1m0s");
        assert_eq!(m["kind"], "host");
        let e = check("templates", json!({"spec": {"intervall": 60}})).unwrap_err();
        assert_eq!(e.field, "spec");
        assert!(e.detail.contains("intervall"));
        assert_eq!(check("templates", json!({})).unwrap_err().field, "spec");
        assert_eq!(
            check("templates", json!({"spec": {}, "kind": "weird"}))
                .unwrap_err()
                .field,
            "template"
        );
    }

    #[test]
    fn spec_given_kinds_are_checked() {
        assert!(
            check(
                "escalation-policies",
                json!({"steps": [{"after": "5m", "notify": {"contact": "ada"}}]})
            )
            .is_ok()
        );
        assert_eq!(
            check("escalation-policies", json!({})).unwrap_err().field,
            "escalation-policy"
        );
        assert_eq!(
            check(
                "escalation-policies",
                json!({"steps": [{"after": 1, "action": {"servicenow": {"autoClose": true}}}]})
            )
            .unwrap_err()
            .field,
            "escalation-policy"
        );
        assert_eq!(
            check("contacts", json!({"preferences": [{"channels": ["sms"]}]}))
                .unwrap_err()
                .field,
            "preferences"
        );
        assert!(check("contacts", json!({"email": "a@b", "timeZone": "Europe/Berlin", "preferences": [{"channels": ["sms"], "profile": "default"}]})).is_ok());
        assert!(
            check(
                "dashboards",
                json!({"shared": true, "spec": "eyJhIjoxfQ=="})
            )
            .is_ok()
        );
        assert_eq!(
            check("dashboards", json!({"spec": "not base64!"}))
                .unwrap_err()
                .field,
            "dashboard"
        );
        assert_eq!(
            check("roles", json!({"permissions": ["bad"]}))
                .unwrap_err()
                .field,
            "role"
        );
        assert!(
            check(
                "tts-profiles",
                json!({"engine": "espeak", "audio": {}, "detect": {}, "normalize": {}})
            )
            .is_ok()
        );
        assert_eq!(
            check("tts-profiles", json!({"engine": "espeak"}))
                .unwrap_err()
                .field,
            "tts-profile"
        );
        assert!(
            check(
                "ivr-menus",
                json!({"options": [{"action": "ack", "digit": "4"}]})
            )
            .is_ok()
        );
        assert!(
            check(
                "sites",
                json!({"description": "plant", "labels": {"region": "north"}})
            )
            .is_ok()
        );
        assert!(check("alert-rules", json!({"anything": [1, 2]})).is_ok());
    }
}
