//! Event sources: how events arrive and how they map.

use super::*;

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
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

pub(super) fn yes() -> bool {
    true
}

pub(super) fn token_auth() -> String {
    "token".into()
}

/// Marks a mapping value as a CEL expression rather than a JSON path.
pub const CEL_MAPPING_PREFIX: &str = "cel:";

pub(super) fn validate_event_source(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |e: &EventSource| {
        one_of("type", &e.kind, &SOURCE_TYPES)?;
        one_of(
            "authMode",
            &e.auth_mode,
            &["token", "hmac", "basic", "none"],
        )?;
        if let Some(rate) = e.rate_limit
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(invalid(
                "rateLimit",
                format!("rateLimit {rate} must be a positive number of events a second"),
            ));
        }
        if e.burst == Some(0) {
            return Err(invalid("burst", "burst must be at least 1"));
        }
        // The sources that connect out refuse a configuration their listener could not use.
        let connection = match e.kind.as_str() {
            "email" => {
                crate::model::source_config::ImapConfig::of(&e.config, &e.secret_ref).map(drop)
            }
            "mqtt" => crate::model::source_config::MqttConfig::of(&e.config).map(drop),
            _ => Ok(()),
        };
        connection.map_err(|detail| invalid("config", detail))?;
        for (field, value) in &e.mapping {
            if let Some(expr) = value.trim().strip_prefix(CEL_MAPPING_PREFIX) {
                crate::model::cel::check(expr).map_err(|err| Invalid {
                    field: "mapping".into(),
                    detail: format!("{field}: {err}"),
                })?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sources_are_checked_by_type_auth_and_mapping() {
        assert!(
            checked(
                "event-sources",
                json!({"type": "webhook", "mapping": {"summary": "$.text"}})
            )
            .is_ok()
        );
        let pigeon = checked("event-sources", json!({"type": "carrier-pigeon"})).unwrap_err();
        assert_eq!(pigeon.field, "event-source");
        assert!(
            pigeon.detail.starts_with("type \"carrier-pigeon\""),
            "{}",
            pigeon.detail
        );
        let trust = checked(
            "event-sources",
            json!({"type": "webhook", "authMode": "trust-me"}),
        )
        .unwrap_err();
        assert_eq!(trust.field, "event-source");
        assert!(trust.detail.starts_with("authMode"), "{}", trust.detail);
        assert_eq!(
            checked(
                "event-sources",
                json!({"type": "webhook", "mapping": {"summary": "cel:event.("}})
            )
            .unwrap_err()
            .field,
            "mapping"
        );
        assert_eq!(
            checked("event-sources", json!({"type": "mqtt", "config": {}}))
                .unwrap_err()
                .field,
            "config"
        );
    }
}
