//! Configuration documents (SPEC 4.3): twenty kinds with one CRUD shape, addressed by name.
//! A document is a JSON object: the kind's own fields plus the common metadata (`id`, `name`,
//! `tenantId`, `createdAt`, `updatedAt`, `version`). Every kind is validated to its schema:
//! SPEC's fields where it gives them, elsewhere a schema of ours following the published
//! interface's field names, for the engines of later issues to read. This file holds the kind
//! table, names, references and the stored document; each group of kinds has its own file
//! with its bodies, checks and tests.

use crate::model::notify::{
    Channel, ChannelPreference, Contact, ContactGroup, EscalationPolicy, Schedule,
    WebhookSubscription,
};
use crate::model::report::ReportBody;
use crate::model::{GoDuration, Timestamp, fault};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

mod alerting;
mod ingress;
mod notify;
mod objects;
mod sites;
mod ui;

pub use alerting::*;
pub use ingress::*;
pub use notify::*;
pub use objects::*;
pub use sites::*;
use ui::*;

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
        body_schema::<crate::model::timeperiod::TimePeriod>,
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
        && !name
            .chars()
            .any(|c| c == '/' || c.is_control() || crate::model::input::is_hidden_format(c));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            format!(
                "{name:?} is not a valid name (1-200 characters, no '/', no control, bidi or zero-width character)"
            ),
        ))
    }
}

/// Parses the body as `T` (unknown fields rejected) and writes back its normal form.
fn validate_as<T: Serialize + for<'de> Deserialize<'de>>(
    body: &mut Map<String, Value>,
) -> Result<(), Invalid> {
    let parsed: T =
        crate::model::input::from_value(Value::Object(body.clone())).map_err(|e| invalid("", e))?;
    if let Value::Object(normal) =
        serde_json::to_value(parsed).map_err(|e| invalid("", e.to_string()))?
    {
        *body = normal;
    }
    Ok(())
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
        .filter(|c| !BUILTIN_CHECKS.contains(&c.as_str()) && agent_plugin(c).is_none())
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
            .map(|s| {
                let spec = fault::decoded("a template's spec", serde_json::from_value(s.clone()));
                spec_references(&spec)
            })
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
            .parse::<crate::model::Selector>()
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
        crate::model::input::from_value(Value::Object(body.clone())).map_err(|e| invalid("", e))?;
    check(&parsed)?;
    if let Value::Object(normal) =
        serde_json::to_value(parsed).map_err(|e| invalid("", e.to_string()))?
    {
        *body = normal;
    }
    Ok(())
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
        let mut out: Map<String, Value> =
            fault::decoded("a configuration document", serde_json::from_str(&self.body));
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

/// A body of `kind` after validation, for the kinds' tests.
#[cfg(test)]
fn checked(kind: &str, body: Value) -> Result<Map<String, Value>, Invalid> {
    let mut m = body.as_object().cloned().unwrap_or_default();
    kind_by_name(kind)
        .ok_or_else(|| invalid("kind", kind))?
        .validate(&mut m)
        .map(|()| m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_name_what_is_not_built_in() {
        let names = |refs: Vec<Reference>| -> Vec<(&'static str, String)> {
            refs.into_iter().map(|r| (r.kind, r.name)).collect()
        };
        let template = checked(
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
        let builtin = checked("templates", json!({"spec": {"checkCommand": "ping"}})).unwrap();
        assert!(doc_references("templates", &builtin).is_empty());
        let rule = json!({"escalationPolicy": "oncall"});
        let refs = doc_references("alert-rules", rule.as_object().unwrap());
        assert_eq!(refs[0].field(), "escalationPolicy");
        assert!(refs[0].dangling().contains("\"oncall\" does not exist"));
        assert!(doc_references("contacts", rule.as_object().unwrap()).is_empty());
    }
}
