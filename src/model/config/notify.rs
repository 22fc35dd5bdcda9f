//! Contacts, schedules, escalation policies, channels and webhook subscriptions.

use super::*;

pub(super) fn validate_contact(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    if let Some(prefs) = body.get("preferences").filter(|p| !p.is_null()) {
        crate::model::input::from_value_at::<Vec<ChannelPreference>>("preferences", prefs.clone())
            .map_err(|e| invalid("preferences", e))?;
    }
    validate_with(body, |c: &Contact| {
        if let Some(tz) = &c.time_zone
            && jiff::tz::TimeZone::get(tz).is_err()
        {
            return Err(invalid("contact", format!("unknown time zone {tz:?}")));
        }
        for p in &c.preferences {
            if let Some(s) = &p.severity {
                s.parse::<crate::model::event::Severity>()
                    .map_err(|_| invalid("preferences", format!("unknown severity {s:?}")))?;
            }
        }
        if let Some(n) = &c.handoff_notices {
            let bad = n.advance.iter().find(|a| {
                a.0 < std::time::Duration::from_secs(60)
                    || a.0 > crate::model::notify::HANDOFF_HORIZON
            });
            if n.advance.len() > 5 || bad.is_some() {
                return Err(invalid(
                    "handoffNotices",
                    "handoffNotices.advance: at most 5, each 1m to 336h",
                ));
            }
        }
        Ok(())
    })
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DashboardBody {
    #[serde(default)]
    shared: bool,
    /// Base64 bytes of the layout.
    spec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    share_token: Option<String>,
}

pub(super) fn is_base64(s: &str) -> bool {
    let t = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - t.len() <= 2
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

/// An on-call schedule: layers of rotations in a time zone.
/// Rotation units: whole days (`daily`, `weekly`) keep the handover's wall-clock time.
pub const ROTATION_UNITS: [&str; 3] = ["daily", "weekly", "custom"];

pub(super) fn validate_schedule(body: &mut Map<String, Value>) -> Result<(), Invalid> {
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
                if crate::model::timeperiod::weekday(day).is_none() {
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

pub(super) fn validate_escalation_policy(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |p: &EscalationPolicy| {
        for (field, value) in [
            ("ackTimeout", p.ack_timeout),
            ("ackReminder", p.ack_reminder),
            ("unackIfNoResponse", p.unack_if_no_response),
        ] {
            if value.is_some_and(|d| d.0.as_secs() < 1) {
                return Err(invalid(field, format!("{field} must be at least 1s")));
            }
        }
        if p.unack_if_no_response.is_some() && p.ack_reminder.is_none() {
            return Err(invalid(
                "unackIfNoResponse",
                "unackIfNoResponse follows a reminder: it needs ackReminder",
            ));
        }
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

pub(super) fn validate_channel(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |c: &Channel| {
        let Some(kind) = ChannelKind::parse(&c.kind) else {
            return one_of("type", &c.kind, &ChannelKind::ALL.map(ChannelKind::as_str));
        };
        check_channel_config(kind, &c.config).map_err(|e| invalid("config", e))?;
        if let Some(t) = &c.template {
            crate::model::template::check(t)
                .map_err(|e| invalid("template", format!("template: {e}")))?;
        }
        Ok(())
    })
}

/// A channel's configuration, as far as it can be checked without sending: what its kind reads
/// (`ChannelConfig::parse`), and the URL a kind that posts needs. The message names the key
/// (`config.port: ...`).
pub fn check_channel_config(
    kind: ChannelKind,
    config: &BTreeMap<String, String>,
) -> Result<(), String> {
    crate::model::channel::RetrySettings::parse(config)?;
    let parsed = crate::model::channel::ChannelConfig::parse(kind, config)?;
    if kind.posts_to_url() && parsed.url().is_none() {
        return Err(format!(
            "config.url: a {} channel needs the URL it posts to",
            kind.as_str()
        ));
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
        // A number (a PIN) is a credential too, and is sealed as its text.
        if let Value::Number(n) = value {
            *value = Value::String(n.to_string());
        }
        if let Value::String(plain) = value
            && !plain.is_empty()
            && !crate::model::secret::has_reference(plain)
        {
            let secret = format!("{label}.{name}.{field}");
            let reference = crate::model::secret::reference(&secret);
            taken.push((secret, std::mem::replace(plain, reference)));
        }
    };
    match kind {
        "channels" => {
            if let Some(Value::Object(config)) = body.get_mut("config") {
                for (key, value) in config.iter_mut() {
                    if crate::model::secret::is_credential_key(key) {
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
    let probe = url.replace(crate::model::secret::REFERENCE_PREFIX, "secret-");
    let parsed = url::Url::parse(&probe).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} must be http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

pub(super) fn validate_webhook(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |w: &WebhookSubscription| {
        check_url(&w.url).map_err(|e| invalid("", format!("url: {e}")))?;
        if crate::model::secret::has_reference(crate::model::secret::url_authority(&w.url)) {
            return Err(invalid(
                "",
                "url: $SECRET:name$ may stand only in the URL's path",
            ));
        }
        check_selector(w.selector.as_deref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_contacts_and_webhooks_are_checked() {
        assert!(
            checked(
                "escalation-policies",
                json!({"steps": [{"after": "5m", "notify": {"contact": "ada"}}]})
            )
            .is_ok()
        );
        assert_eq!(
            checked("escalation-policies", json!({})).unwrap_err().field,
            "escalation-policy"
        );
        assert_eq!(
            checked(
                "escalation-policies",
                json!({"steps": [{"after": 1, "action": {"servicenow": {"autoClose": true}}}]})
            )
            .unwrap_err()
            .field,
            "escalation-policy"
        );
        assert_eq!(
            checked("contacts", json!({"preferences": [{"channels": ["sms"]}]}))
                .unwrap_err()
                .field,
            "preferences"
        );
        assert!(checked("contacts", json!({"email": "a@b", "timeZone": "Europe/Berlin", "preferences": [{"channels": ["sms"], "profile": "default"}]})).is_ok());
        assert!(
            checked(
                "tts-profiles",
                json!({"engine": "espeak", "audio": {}, "detect": {}, "normalize": {}})
            )
            .is_ok()
        );
        assert_eq!(
            checked("tts-profiles", json!({"engine": "espeak"}))
                .unwrap_err()
                .field,
            "tts-profile"
        );
        assert!(
            checked(
                "ivr-menus",
                json!({"options": [{"action": "ack", "digit": "4"}]})
            )
            .is_ok()
        );
        assert_eq!(
            checked("webhooks", json!({"url": "http://x", "types": ["nope"]}))
                .unwrap_err()
                .field,
            "webhook"
        );
    }
}
