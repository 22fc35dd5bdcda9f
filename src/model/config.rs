//! Configuration documents (SPEC 4.3): twenty kinds with one CRUD shape, addressed by name.
//! A document is a JSON object: the kind's own fields plus the common metadata (`id`, `name`,
//! `tenantId`, `createdAt`, `updatedAt`, `version`). Every kind is validated to its schema:
//! SPEC's fields where it gives them, elsewhere a schema of ours following the published
//! interface's field names, for the engines of later issues to read.

use super::notify::{
    Channel, ChannelPreference, Contact, ContactGroup, EscalationPolicy, Schedule,
    WebhookSubscription,
};
use super::report::ReportBody;
use super::{GoDuration, Timestamp};
use schemars::{JsonSchema, Schema, SchemaGenerator};
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
    /// The JSON Schema of a document's body (without the service's metadata).
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

fn body_schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// Kinds whose names are unique across all tenants, not just within one: event sources, since
/// the ingest URL (`/api/v1/ingest/{source}`) names a source without a tenant.
pub fn unique_across_tenants(kind: &str) -> bool {
    kind == "event-sources"
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
    schema: fn(&mut SchemaGenerator) -> Schema,
) -> Kind {
    Kind {
        name,
        code,
        read: perms.0,
        write: perms.1,
        validate,
        schema,
    }
}

pub const KINDS: [Kind; 20] = [
    kind(
        "templates",
        "template",
        CONFIG,
        validate_template,
        template_schema,
    ),
    kind(
        "check-commands",
        "check-command",
        CONFIG,
        validate_check_command,
        body_schema::<CheckCommandBody>,
    ),
    kind(
        "time-periods",
        "time-period",
        CONFIG,
        validate_time_period,
        body_schema::<super::timeperiod::TimePeriod>,
    ),
    kind(
        "alert-rules",
        "alert-rule",
        CONFIG,
        validate_alert_rule,
        body_schema::<AlertRule>,
    ),
    kind(
        "alert-groups",
        "alert-group",
        CONFIG,
        validate_as::<AlertGroup>,
        body_schema::<AlertGroup>,
    ),
    kind(
        "escalation-policies",
        "escalation-policy",
        CONFIG,
        validate_escalation_policy,
        body_schema::<EscalationPolicy>,
    ),
    kind(
        "schedules",
        "schedule",
        ONCALL,
        validate_schedule,
        body_schema::<Schedule>,
    ),
    kind(
        "contacts",
        "contact",
        ONCALL,
        validate_contact,
        body_schema::<Contact>,
    ),
    kind(
        "contact-groups",
        "contact-group",
        ONCALL,
        validate_as::<ContactGroup>,
        body_schema::<ContactGroup>,
    ),
    kind(
        "channels",
        "channel",
        CONFIG,
        validate_channel,
        body_schema::<Channel>,
    ),
    kind(
        "event-sources",
        "event-source",
        CONFIG,
        validate_event_source,
        body_schema::<EventSource>,
    ),
    kind(
        "business-services",
        "business-service",
        CONFIG,
        validate_business_service,
        body_schema::<BusinessService>,
    ),
    kind(
        "dashboards",
        "dashboard",
        CONFIG,
        validate_dashboard,
        body_schema::<DashboardBody>,
    ),
    kind(
        "reports",
        "report",
        CONFIG,
        validate_report,
        body_schema::<ReportBody>,
    ),
    kind(
        "saved-filters",
        "saved-filter",
        CONFIG,
        validate_saved_filter,
        body_schema::<SavedFilterBody>,
    ),
    kind(
        "roles",
        "role",
        ADMIN,
        validate_role,
        body_schema::<RoleBody>,
    ),
    kind(
        "webhooks",
        "webhook",
        CONFIG,
        validate_webhook,
        body_schema::<WebhookSubscription>,
    ),
    kind(
        "sites",
        "site",
        CONFIG,
        validate_as::<SiteBody>,
        body_schema::<SiteBody>,
    ),
    kind(
        "ivr-menus",
        "ivr-menu",
        CONFIG,
        validate_as::<IvrMenuBody>,
        body_schema::<IvrMenuBody>,
    ),
    kind(
        "tts-profiles",
        "tts-profile",
        CONFIG,
        validate_as::<TtsProfileBody>,
        body_schema::<TtsProfileBody>,
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

/// Parses the body as `T` (unknown fields rejected) and writes back its normal form.
fn validate_as<T: Serialize + for<'de> Deserialize<'de>>(
    body: &mut Map<String, Value>,
) -> Result<(), Invalid> {
    let parsed: T =
        super::input::from_value(Value::Object(body.clone())).map_err(|e| invalid("", e))?;
    if let Value::Object(normal) =
        serde_json::to_value(parsed).map_err(|e| invalid("", e.to_string()))?
    {
        *body = normal;
    }
    Ok(())
}

/// The object spec of SPEC 2.2, shared by hosts, services and templates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Text values; numbers and booleans (as Icinga configurations carry them) are kept as text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "vars_as_text"
    )]
    #[schemars(schema_with = "vars_schema")]
    pub vars: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A template document's labels.
pub fn template_labels(body: &str) -> BTreeMap<String, String> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| serde_json::from_value(b["labels"].clone()).ok())
        .unwrap_or_default()
}

/// The object spec inside a template document's body text (empty if it has none).
pub fn template_spec(body: &str) -> ObjectSpec {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| serde_json::from_value(b["spec"].clone()).ok())
        .unwrap_or_default()
}

/// A name one piece of configuration uses for a document of another kind. One that nothing
/// defines is saved as written by default (the reference does; a bundle may name what a later
/// one adds) and refused at save under `strictReferences`, as Icinga refuses such a config.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Where in the body the name stands; its first segment is the field a refusal names
    /// (`svc:validation/<field>`).
    pub path: &'static str,
    /// The kind of document the name must be.
    pub kind: &'static str,
    pub name: String,
}

impl Reference {
    /// The top-level field the name stands in.
    pub fn field(&self) -> &'static str {
        self.path.split('.').next().unwrap_or(self.path)
    }

    /// What it means that nothing defines the name.
    pub fn dangling(&self) -> String {
        let name = &self.name;
        match self.kind {
            "check-commands" => format!(
                "check command {name:?} is neither built in nor a check-commands document, the check cannot run"
            ),
            "time-periods" => {
                format!("time period {name:?} does not exist and restricts nothing")
            }
            "escalation-policies" => {
                format!("escalation policy {name:?} does not exist, its alerts page no one")
            }
            kind => format!("{kind} document {name:?} does not exist"),
        }
    }
}

/// The documents a host's, service's or template's own spec names: its check command unless
/// built in, and its check period. (Its templates are always checked, see `resolve`.)
pub fn spec_references(spec: &ObjectSpec) -> Vec<Reference> {
    let command = spec
        .check_command
        .iter()
        .filter(|c| !BUILTIN_CHECKS.contains(&c.as_str()))
        .map(|c| Reference {
            path: "spec.checkCommand",
            kind: "check-commands",
            name: c.clone(),
        });
    let period = spec.check_period.iter().map(|p| Reference {
        path: "spec.checkPeriod",
        kind: "time-periods",
        name: p.clone(),
    });
    command.chain(period).collect()
}

/// The documents a saved document of `kind` names (its body already validated).
pub fn doc_references(kind: &str, body: &Map<String, Value>) -> Vec<Reference> {
    match kind {
        "templates" => body
            .get("spec")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .map(|spec| spec_references(&spec))
            .unwrap_or_default(),
        "alert-rules" => body
            .get("escalationPolicy")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .map(|p| Reference {
                path: "escalationPolicy",
                kind: "escalation-policies",
                name: p.to_string(),
            })
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

fn vars_as_text<'de, D: serde::Deserializer<'de>>(
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

fn vars_schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean"]},
        "description": "numbers and booleans are stored as text"
    })
}

/// The schema of what `validate_template` reads.
fn template_schema(g: &mut SchemaGenerator) -> Schema {
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

/// Template: `kind` (`host` or `service`, default `host`), `labels`, `spec` (required).
fn validate_template(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    let spec = body
        .get("spec")
        .cloned()
        .ok_or_else(|| invalid("spec", "spec is required"))?;
    let spec: ObjectSpec =
        super::input::from_value_at("spec", spec).map_err(|e| invalid("spec", e))?;
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

fn validate_contact(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    if let Some(prefs) = body.get("preferences").filter(|p| !p.is_null()) {
        super::input::from_value_at::<Vec<ChannelPreference>>("preferences", prefs.clone())
            .map_err(|e| invalid("preferences", e))?;
    }
    validate_with(body, |c: &Contact| {
        if let Some(tz) = &c.time_zone {
            if jiff::tz::TimeZone::get(tz).is_err() {
                return Err(invalid("contact", format!("unknown time zone {tz:?}")));
            }
        }
        for p in &c.preferences {
            if let Some(s) = &p.severity {
                s.parse::<super::event::Severity>()
                    .map_err(|_| invalid("preferences", format!("unknown severity {s:?}")))?;
            }
        }
        Ok(())
    })
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

/// A federation site (SPEC 2.10) as the main instance keeps it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteBody {
    /// The site's configuration bundle (YAML, the format of `config/bundles:apply`), served by
    /// `:pull`. Kept as written: a bundle the edge cannot apply is reported by its heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// A site whose last heartbeat is older than this is stale and raises an alert (default:
    /// 3 heartbeat intervals as the site reports them, 3 minutes until it has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<super::GoDuration>,
    /// The escalation policy of the stale-site alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
}

impl SiteBody {
    /// The body of a stored `sites` document (an unreadable one is an empty site).
    pub fn parse(body: &str) -> SiteBody {
        serde_json::from_str(body).unwrap_or_default()
    }
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TtsDetect {
    #[serde(default)]
    languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LexiconEntry {
    from: String,
    to: String,
    #[serde(default)]
    match_case: bool,
    #[serde(default)]
    substring: bool,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegexRule {
    pattern: String,
    replace: String,
}

fn one_of(field: &str, value: &str, allowed: &[&str]) -> Result<(), Invalid> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            "",
            format!("{field} {value:?} must be one of {}", allowed.join(", ")),
        ))
    }
}

fn check_time_zone(tz: &str) -> Result<(), Invalid> {
    jiff::tz::TimeZone::get(tz)
        .map(|_| ())
        .map_err(|_| invalid("", format!("unknown time zone {tz:?}")))
}

fn check_selector(selector: Option<&str>) -> Result<(), Invalid> {
    match selector {
        Some(s) => s
            .parse::<super::Selector>()
            .map(|_| ())
            .map_err(|e| invalid("selector", e.to_string())),
        None => Ok(()),
    }
}

/// Parses and normalises, then runs `check` on the typed body.
fn validate_with<T: Serialize + for<'de> Deserialize<'de>>(
    body: &mut Map<String, Value>,
    check: impl FnOnce(&T) -> Result<(), Invalid>,
) -> Result<(), Invalid> {
    let parsed: T =
        super::input::from_value(Value::Object(body.clone())).map_err(|e| invalid("", e))?;
    check(&parsed)?;
    if let Value::Object(normal) =
        serde_json::to_value(parsed).map_err(|e| invalid("", e.to_string()))?
    {
        *body = normal;
    }
    Ok(())
}

/// Built-in checks a check command may name instead of a plugin.
pub const BUILTIN_CHECKS: [&str; 6] = ["ping", "tcp", "http", "dns", "modbus", "gsm"];

/// A check command: `type: plugin` runs `line` (argv with `$macro$`s) as a Nagios plugin;
/// `type: builtin` names a built-in check in `line[0]`, its options after it.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CheckCommandBody {
    #[serde(rename = "type")]
    kind: String,
    line: Vec<String>,
    /// Pass macros to plugins as environment variables too.
    #[serde(default)]
    env: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<GoDuration>,
}

fn validate_check_command(body: &mut Map<String, Value>) -> Result<(), Invalid> {
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
fn check_range(r: &str) -> Result<(), Invalid> {
    super::timeperiod::parse_range(r)
        .map(|_| ())
        .ok_or_else(|| invalid("", format!("{r:?} is not a range such as 08:00-17:00")))
}

fn validate_time_period(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |t: &super::timeperiod::TimePeriod| {
        if let Some(tz) = &t.time_zone {
            check_time_zone(tz)?;
        }
        for (day, ranges) in &t.days {
            one_of("day", day, &super::timeperiod::WEEKDAYS)?;
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

/// An alert rule: `match` (CEL over `event`) opens an alert, `clear` (CEL) resolves it.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertRule {
    /// Required unless the rule is a `heartbeat` rule.
    #[serde(rename = "match", default, skip_serializing_if = "String::is_empty")]
    pub matches: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<String>,
    pub severity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<RuleHeartbeat>,
    #[serde(default)]
    pub incident: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_for: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_close_after: Option<GoDuration>,
    /// Default true (the reference's): a clear event resolves the rule's alert even when it
    /// does not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_on_ok: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub disabled: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleHeartbeat {
    pub source: String,
    pub expect_every: GoDuration,
}

impl AlertRule {
    /// A rule as a client sends it (the reference's `AlertRule`, record fields ignored),
    /// validated as a saved one is.
    pub fn from_request(value: Value) -> Result<AlertRule, Invalid> {
        let Value::Object(mut body) = value else {
            return Err(invalid("rule", "rule is a JSON object"));
        };
        for key in METADATA {
            body.remove(key);
        }
        validate_alert_rule(&mut body)?;
        super::input::from_value(Value::Object(body)).map_err(|e| invalid("rule", e))
    }

    /// A stored rule document's body (validated at save).
    pub fn parse(body: &str) -> Option<AlertRule> {
        let mut v: Value = serde_json::from_str(body).ok()?;
        if let Some(m) = v.as_object_mut() {
            m.remove("name");
        }
        serde_json::from_value(v).ok()
    }
}

/// A CEL expression within the bounds that compiles; any fault is `svc:validation/<field>`.
fn check_cel(field: &str, source: &str) -> Result<(), Invalid> {
    super::cel::check(source).map_err(|e| invalid(field, format!("{field}: {e}")))
}

fn validate_alert_rule(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |r: &AlertRule| {
        match &r.heartbeat {
            Some(h) if h.expect_every.0.is_zero() => {
                return Err(invalid(
                    "heartbeat",
                    "heartbeat.expectEvery must be positive",
                ));
            }
            Some(h) if h.source.is_empty() => {
                return Err(invalid("heartbeat", "heartbeat.source is required"));
            }
            Some(_) if r.matches.is_empty() => {}
            None if r.matches.is_empty() => {
                return Err(invalid(
                    "",
                    "match is required unless the rule has a heartbeat",
                ));
            }
            _ => check_cel("match", &r.matches)?,
        }
        if let Some(c) = &r.clear {
            check_cel("clear", c)?;
        }
        one_of("severity", &r.severity, &["critical", "warning", "info"])
    })
}

/// An alert group: the alerts of the rules naming it (`groupId`) that share the `groupBy`
/// labels within `window` are aggregated; from `minCount` (default 2) of them a group alert
/// opens, carrying `aggregate` (`count` by default, or `min`, `max`, `avg`, `median` of the
/// number at `valuePath` in each alert's payload).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertGroup {
    pub group_by: Vec<String>,
    pub window: GoDuration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_path: Option<String>,
}

impl AlertGroup {
    pub fn parse(body: &str) -> Option<AlertGroup> {
        serde_json::from_str(body).ok()
    }
}

/// An on-call schedule: layers of rotations in a time zone.
/// Rotation units: whole days (`daily`, `weekly`) keep the handover's wall-clock time.
pub const ROTATION_UNITS: [&str; 3] = ["daily", "weekly", "custom"];

fn validate_schedule(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |s: &Schedule| {
        check_time_zone(&s.time_zone)?;
        for r in &s.layers {
            one_of("unit", &r.unit, &ROTATION_UNITS)?;
            if r.participants.is_empty() {
                return Err(invalid("", "a rotation needs participants"));
            }
            if r.length.is_some_and(|l| l.0.as_secs() < 60) {
                return Err(invalid("", "a rotation's length must be at least 1m"));
            }
            for (day, ranges) in &r.restriction {
                if super::timeperiod::weekday(day).is_none() {
                    return Err(invalid(
                        "",
                        format!("restriction day {day:?} is not a weekday"),
                    ));
                }
                ranges.iter().try_for_each(|r| check_range(r))?;
            }
        }
        Ok(())
    })
}

fn validate_escalation_policy(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |p: &EscalationPolicy| {
        for (i, step) in p.steps.iter().enumerate() {
            if step.repeat_every.is_some_and(|r| r.0.as_secs() < 1) {
                return Err(invalid(
                    "",
                    format!("step {i}: repeatEvery must be at least 1s"),
                ));
            }
        }
        Ok(())
    })
}

pub const CHANNEL_TYPES: [&str; 11] = [
    "email",
    "webhook",
    "sms",
    "voice",
    "espa",
    "slack",
    "teams",
    "ntfy",
    "gotify",
    "servicenow",
    "script",
];

fn validate_channel(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |c: &Channel| {
        one_of("type", &c.kind, &CHANNEL_TYPES)?;
        check_channel_config(&c.kind, &c.config).map_err(|e| invalid("config", e))?;
        if let Some(t) = &c.template {
            super::template::check(t).map_err(|e| invalid("template", format!("template: {e}")))?;
        }
        Ok(())
    })
}

/// A channel's configuration, as far as it can be checked without sending: where secrets are
/// named, header names and values, the URL, the port, an e-mail relay's host and TLS mode, a
/// script's command. The message names the key (`config.port: ...`).
pub fn check_channel_config(kind: &str, config: &BTreeMap<String, String>) -> Result<(), String> {
    for (key, value) in config {
        if !super::secret::reference_allowed(key, value) {
            return Err(format!(
                "config.{key}: $SECRET:name$ may stand only in credential fields, headers, script arguments and a URL's path"
            ));
        }
        if let Some(header) = key.strip_prefix("header.") {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if header.is_empty() || !header.bytes().all(token) {
                return Err(format!("config.{key}: {header:?} is not a header name"));
            }
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(format!("config.{key}: a header value is one line"));
            }
        }
    }
    let given = |key: &str| {
        config
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    if let Some(url) = given("url") {
        check_url(url).map_err(|e| format!("config.url: {e}"))?;
    }
    if let Some(port) = given("port") {
        if !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(format!("config.port: {port:?} is not a port (1-65535)"));
        }
    }
    match kind {
        "email" => {
            let host = given("host").ok_or("config.host: the SMTP relay is required")?;
            if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '$') {
                return Err(format!("config.host: {host:?} is not a host name"));
            }
            if let Some(tls) = given("tls") {
                if !["starttls", "tls", "none"].contains(&tls) {
                    return Err(format!(
                        "config.tls: {tls:?} must be one of starttls, tls, none"
                    ));
                }
            }
        }
        "script" => {
            let command =
                given("command").ok_or("config.command: the program to run is required")?;
            if command.contains('$') {
                return Err(format!(
                    "config.command: {command:?} is written out in full, without macros or secrets"
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Takes the credentials a channel or a webhook subscription carries in plain text out of its
/// body: each becomes a reference to a secret named after the document and the field
/// (`channel.ops.password`), and is returned with that name to be sealed. Values that already
/// name a secret stay as they are.
pub fn take_credentials(
    kind: &str,
    name: &str,
    body: &mut Map<String, Value>,
) -> Vec<(String, String)> {
    let mut taken = Vec::new();
    let mut take = |field: &str, value: &mut Value, label: &str| {
        if let Value::String(plain) = value {
            if !plain.is_empty() && !super::secret::has_reference(plain) {
                let secret = format!("{label}.{name}.{field}");
                let reference = super::secret::reference(&secret);
                taken.push((secret, std::mem::replace(plain, reference)));
            }
        }
    };
    match kind {
        "channels" => {
            if let Some(Value::Object(config)) = body.get_mut("config") {
                for (key, value) in config.iter_mut() {
                    if super::secret::is_credential_key(key) {
                        take(key, value, "channel");
                    }
                }
            }
        }
        "webhooks" => {
            if let Some(value) = body.get_mut("secret") {
                take("secret", value, "webhook");
            }
        }
        _ => {}
    }
    taken
}

/// An outbound URL: http or https with a host; a `$SECRET:name$` may stand in its path.
pub fn check_url(url: &str) -> Result<(), String> {
    let probe = url.replace(super::secret::REFERENCE_PREFIX, "secret-");
    let parsed = url::Url::parse(&probe).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} must be http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

pub const SOURCE_TYPES: [&str; 8] = [
    "webhook",
    "alertmanager",
    "email",
    "snmp",
    "mqtt",
    "espa",
    "espax",
    "sms",
];

/// An inbound event source (the `event-sources` kind): how events arrive and how they map
/// onto the normalised event.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventSource {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `token` (bearer secret), `hmac` (signature over the body), `basic` or `none`.
    #[serde(default = "token_auth")]
    pub auth_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// Events per second the source's token bucket refills; `burst` its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Normalised field (`severity`, `summary`, `dedupKey`, `labels`, `resolve`) → a JSON path
    /// into the original (`summary: "$.alert.title"`) or a CEL expression over it as `body`,
    /// prefixed `cel:` (`severity: "cel:body.level >= 3 ? 'critical' : 'warning'"`).
    #[serde(default)]
    pub mapping: BTreeMap<String, String>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

fn token_auth() -> String {
    "token".into()
}

/// Marks a mapping value as a CEL expression rather than a JSON path.
pub const CEL_MAPPING_PREFIX: &str = "cel:";

fn validate_event_source(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |e: &EventSource| {
        one_of("type", &e.kind, &SOURCE_TYPES)?;
        one_of(
            "authMode",
            &e.auth_mode,
            &["token", "hmac", "basic", "none"],
        )?;
        // The sources that connect out refuse a configuration their listener could not use.
        let connection = match e.kind.as_str() {
            "email" => super::source_config::ImapConfig::of(&e.config, &e.secret_ref).map(drop),
            "mqtt" => super::source_config::MqttConfig::of(&e.config).map(drop),
            _ => Ok(()),
        };
        connection.map_err(|detail| invalid("config", detail))?;
        for (field, value) in &e.mapping {
            if let Some(expr) = value.trim().strip_prefix(CEL_MAPPING_PREFIX) {
                super::cel::check(expr).map_err(|err| Invalid {
                    field: "mapping".into(),
                    detail: format!("{field}: {err}"),
                })?;
            }
        }
        Ok(())
    })
}

/// A business service (the reference's `BusinessService`): a node of the business process
/// tree over objects (by `objectId` or `selector`) and child services (whose `parentId` names
/// this one by document id or name).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BusinessService {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// `worst` (default), `best`, `quorum` (OK when at least `quorumPct` of the inputs are),
    /// `weighted` (the same share by `weight`); `all` and `any` are read as worst and best.
    #[serde(default = "worst_rule")]
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_target: Option<f64>,
    /// `month`, `quarter`, `year` (30, 90, 365 days) or a duration (`720h`); default month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_window: Option<String>,
    #[serde(default)]
    pub exclude_downtimes: bool,
}

fn worst_rule() -> String {
    "worst".into()
}

impl BusinessService {
    /// A stored document's body (validated at save).
    pub fn parse(body: &str) -> Option<BusinessService> {
        serde_json::from_str(body).ok()
    }

    /// The SLA window.
    pub fn window(&self) -> std::time::Duration {
        let days = |d: u64| std::time::Duration::from_secs(d * 86_400);
        match self.sla_window.as_deref() {
            None | Some("") | Some("month") => days(30),
            Some("quarter") => days(90),
            Some("year") => days(365),
            Some(d) => d.parse::<GoDuration>().map_or(days(30), |d| d.0),
        }
    }
}

fn validate_business_service(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |b: &BusinessService| {
        check_selector(b.selector.as_deref())?;
        one_of(
            "rule",
            &b.rule,
            &["worst", "best", "quorum", "weighted", "all", "any"],
        )?;
        if let Some(w) = b.sla_window.as_deref() {
            let named = ["month", "quarter", "year"].contains(&w);
            if !named && w.parse::<GoDuration>().map_or(true, |d| d.0.is_zero()) {
                return Err(invalid(
                    "slaWindow",
                    "slaWindow must be month, quarter, year or a duration",
                ));
            }
        }
        if b.quorum_pct.is_some_and(|q| !(0.0..=100.0).contains(&q)) {
            return Err(invalid("quorumPct", "quorumPct must be 0..100"));
        }
        if b.sla_target.is_some_and(|t| !(0.0..=100.0).contains(&t)) {
            return Err(invalid("slaTarget", "slaTarget must be 0..100"));
        }
        Ok(())
    })
}

fn validate_report(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    use super::report::{REPORT_TYPES, ReportParams, ReportSchedule};
    validate_with(body, |r: &ReportBody| {
        one_of("type", &r.kind, REPORT_TYPES)?;
        ReportParams::of(&r.params).map_err(|e| invalid("params", e))?;
        if let Some(s) = &r.schedule {
            s.parse::<ReportSchedule>()
                .map_err(|e| invalid("schedule", e))?;
        }
        if r.keep == Some(0) {
            return Err(invalid("keep", "keep must be at least 1"));
        }
        Ok(())
    })
}

/// A saved list filter of the UI: which list and its query parameters.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SavedFilterBody {
    resource: String,
    #[serde(default)]
    query: BTreeMap<String, String>,
    #[serde(default)]
    shared: bool,
}

fn validate_saved_filter(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |f: &SavedFilterBody| {
        one_of(
            "resource",
            &f.resource,
            &[
                "objects",
                "hosts",
                "services",
                "problems",
                "alerts",
                "incidents",
                "events",
            ],
        )?;
        check_selector(f.query.get("selector").map(String::as_str))
    })
}

fn validate_webhook(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |w: &WebhookSubscription| {
        check_url(&w.url).map_err(|e| invalid("", format!("url: {e}")))?;
        if super::secret::has_reference(super::secret::url_authority(&w.url)) {
            return Err(invalid(
                "",
                "url: $SECRET:name$ may stand only in the URL's path",
            ));
        }
        check_selector(w.selector.as_deref())
    })
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
    fn references_name_what_is_not_built_in() {
        let names = |refs: Vec<Reference>| -> Vec<(&'static str, String)> {
            refs.into_iter().map(|r| (r.kind, r.name)).collect()
        };
        let template = check(
            "templates",
            json!({"spec": {"checkCommand": "check_plc", "checkPeriod": "office"}}),
        )
        .unwrap();
        assert_eq!(
            names(doc_references("templates", &template)),
            [
                ("check-commands", "check_plc".to_string()),
                ("time-periods", "office".to_string())
            ]
        );
        assert_eq!(doc_references("templates", &template)[1].field(), "spec");
        let builtin = check("templates", json!({"spec": {"checkCommand": "ping"}})).unwrap();
        assert!(doc_references("templates", &builtin).is_empty());
        let rule = json!({"escalationPolicy": "oncall"});
        let refs = doc_references("alert-rules", rule.as_object().unwrap());
        assert_eq!(refs[0].field(), "escalationPolicy");
        assert!(refs[0].dangling().contains("\"oncall\" does not exist"));
        assert!(doc_references("contacts", rule.as_object().unwrap()).is_empty());
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
        assert!(check("alert-rules", json!({"match": "event.severity == 'critical' && event.labels.site == 'north'", "severity": "critical"})).is_ok());
        let bad = check(
            "alert-rules",
            json!({"match": "event.severity ==", "severity": "critical"}),
        )
        .unwrap_err();
        assert_eq!(bad.field, "match");
        assert!(bad.detail.starts_with("match:"), "{}", bad.detail);
        assert_eq!(
            check(
                "alert-rules",
                json!({"match": "true", "clear": "(", "severity": "info"})
            )
            .unwrap_err()
            .field,
            "clear"
        );
        assert_eq!(
            check("alert-rules", json!({"anything": [1, 2]}))
                .unwrap_err()
                .field,
            "alert-rule"
        );
        assert!(check("time-periods", json!({"timeZone": "Europe/Berlin", "days": {"monday": ["08:00-12:00", "13:00-17:00"]}, "exceptions": {"2026-12-24": []}})).is_ok());
        assert_eq!(
            check("time-periods", json!({"days": {"monday": ["17:00-08:00"]}}))
                .unwrap_err()
                .field,
            "time-period"
        );
        assert_eq!(
            check("time-periods", json!({"days": {"moonday": []}}))
                .unwrap_err()
                .field,
            "time-period"
        );
        assert_eq!(
            check("business-services", json!({"selector": "a in ("}))
                .unwrap_err()
                .field,
            "selector"
        );
        assert_eq!(
            check("webhooks", json!({"url": "http://x", "types": ["nope"]}))
                .unwrap_err()
                .field,
            "webhook"
        );
        assert!(
            check(
                "check-commands",
                json!({"type": "builtin", "line": ["http", "--expect", "200"]})
            )
            .is_ok()
        );
        assert_eq!(
            check(
                "check-commands",
                json!({"type": "builtin", "line": ["telepathy"]})
            )
            .unwrap_err()
            .field,
            "check-command"
        );
    }
}
