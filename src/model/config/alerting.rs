//! Alert rules, alert groups and business services.

use super::*;

/// An alert rule: `match` (CEL over `event`) opens an alert, `clear` (CEL) resolves it.
#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    /// An alert of this rule firing again within this long after it resolved reopens (the
    /// same alert, its timeline says so) rather than opening a new one; default 15m, `0s`
    /// never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopen_window: Option<GoDuration>,
    /// Named `time-intervals` during which an alert of this rule does not page (Alertmanager's
    /// `mute_time_intervals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mute_time_intervals: Vec<String>,
    /// Named `time-intervals` outside which an alert of this rule does not page (Alertmanager's
    /// `active_time_intervals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_time_intervals: Vec<String>,
}

/// How long after it resolved an alert reopens when its source fires again, unless its rule
/// says otherwise.
pub const REOPEN_WINDOW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
        crate::model::input::from_value(Value::Object(body)).map_err(|e| invalid("rule", e))
    }

    /// How long after it resolved an alert of this rule reopens.
    pub fn reopen_window(&self) -> std::time::Duration {
        self.reopen_window.map_or(REOPEN_WINDOW, |d| d.0)
    }

    /// A stored rule document's body (validated at save).
    pub fn parse(body: &str) -> Option<AlertRule> {
        let mut v: Value = fault::readable("an alert rule", serde_json::from_str(body))?;
        if let Some(m) = v.as_object_mut() {
            m.remove("name");
        }
        fault::readable("an alert rule", serde_json::from_value(v))
    }
}

/// A CEL expression within the bounds that compiles; any fault is `svc:validation/<field>`.
pub(super) fn check_cel(field: &str, source: &str) -> Result<(), Invalid> {
    crate::model::cel::check(source).map_err(|e| invalid(field, format!("{field}: {e}")))
}

pub(super) fn validate_alert_rule(body: &mut Map<String, Value>) -> Result<(), Invalid> {
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
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
        fault::readable("an alert group", serde_json::from_str(body))
    }
}

/// A business service (the reference's `BusinessService`): a node of the business process
/// tree over objects (by `objectId` or `selector`) and child services (whose `parentId` names
/// this one by document id or name).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    /// Leave the time a bound object was held back by a failed dependency out of the SLA.
    #[serde(default)]
    pub exclude_dependencies: bool,
    /// The pairs of windows whose error-budget burn the SLA shows (`model::slo`); default the
    /// SRE workbook's (14.4x over 1h and 5m, 6x over 6h and 30m: page; 1x over 3d and 6h:
    /// ticket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn_alerts: Option<Vec<crate::model::slo::BurnAlert>>,
}

pub(super) fn worst_rule() -> String {
    "worst".into()
}

impl BusinessService {
    /// A stored document's body (validated at save).
    pub fn parse(body: &str) -> Option<BusinessService> {
        fault::readable("a business service", serde_json::from_str(body))
    }

    /// Its burn-rate pairs: its own, else the workbook's.
    pub fn burn_alerts(&self) -> Vec<crate::model::slo::BurnAlert> {
        self.burn_alerts
            .clone()
            .unwrap_or_else(crate::model::slo::workbook)
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

pub(super) fn validate_business_service(body: &mut Map<String, Value>) -> Result<(), Invalid> {
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
        crate::model::slo::check_pairs(b.burn_alerts.as_deref().unwrap_or_default())
            .map_err(|e| invalid("burnAlerts", e))
    })?;
    // Durations come back in one form, Go's (CONTRACT 3): a window given as one is kept so.
    if let Some(Value::String(w)) = body.get_mut("slaWindow")
        && let Ok(d) = w.parse::<GoDuration>()
    {
        *w = d.to_string();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_business_service_window_is_kept_as_go_writes_durations() {
        let kept = |w: &str| {
            let mut body = json!({"rule": "worst", "slaWindow": w});
            let map = body.as_object_mut().unwrap();
            validate_business_service(map).unwrap();
            map["slaWindow"].clone()
        };
        assert_eq!(kept("720h"), "720h0m0s");
        assert_eq!(kept("3600"), "1h0m0s");
        assert_eq!(kept("quarter"), "quarter");
    }

    #[test]
    fn rules_compile_and_business_services_parse_their_selector() {
        assert!(checked("alert-rules", json!({"match": "event.severity == 'critical' && event.labels.site == 'north'", "severity": "critical"})).is_ok());
        let bad = checked(
            "alert-rules",
            json!({"match": "event.severity ==", "severity": "critical"}),
        )
        .unwrap_err();
        assert_eq!(bad.field, "match");
        assert!(bad.detail.starts_with("match:"), "{}", bad.detail);
        assert_eq!(
            checked(
                "alert-rules",
                json!({"match": "true", "clear": "(", "severity": "info"})
            )
            .unwrap_err()
            .field,
            "clear"
        );
        assert_eq!(
            checked("alert-rules", json!({"anything": [1, 2]}))
                .unwrap_err()
                .field,
            "alert-rule"
        );
        assert_eq!(
            checked("business-services", json!({"selector": "a in ("}))
                .unwrap_err()
                .field,
            "selector"
        );
    }
}
