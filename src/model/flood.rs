//! Alarm floods (ISA-18.2, EEMUA 191): a scope (a tenant, or one value of a label such as
//! `site`) whose alerts open faster than one can read them. While it is flooded, the pages of
//! its alerts to people are held and sent as one digest per contact and channel every
//! `digestEvery`; the alert that opened it is its first-out.

use super::Timestamp;
use super::duration::GoDuration;
use super::event::Severity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// A count of alerts opened within a sliding window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rate {
    pub alerts: usize,
    pub within: GoDuration,
}

/// When a scope floods and when it is calm again, and how often its digest goes out.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FloodLimits {
    /// A flood starts once this many alerts opened within the window (`alerts: 0`: never).
    pub enter_at: Rate,
    /// It ends once fewer than this many opened within the window.
    pub leave_at: Rate,
    pub digest_every: GoDuration,
}

impl Default for FloodLimits {
    /// ISA-18.2's flood: more than 10 alarms in 10 minutes per operator.
    fn default() -> Self {
        Self {
            enter_at: Rate {
                alerts: 10,
                within: GoDuration::from_secs(600),
            },
            leave_at: Rate {
                alerts: 5,
                within: GoDuration::from_secs(600),
            },
            digest_every: GoDuration::from_secs(300),
        }
    }
}

impl FloodLimits {
    /// What is wrong with these limits, if anything (`at` names them in the message).
    pub fn problem(&self, at: &str) -> Option<String> {
        let (enter, leave) = (self.enter_at, self.leave_at);
        if enter.alerts == 0 {
            return None;
        }
        if enter.alerts > 10_000 {
            return Some(format!("{at}: enterAt.alerts must be at most 10000"));
        }
        if enter.within.0.is_zero() || leave.within.0.is_zero() || self.digest_every.0.is_zero() {
            return Some(format!(
                "{at}: enterAt.within, leaveAt.within and digestEvery must be positive"
            ));
        }
        if leave.alerts == 0 || leave.alerts > enter.alerts {
            return Some(format!(
                "{at}: leaveAt.alerts must be 1..enterAt.alerts ({})",
                enter.alerts
            ));
        }
        None
    }

    /// How long the opens of a scope are kept to decide on it.
    pub fn window(&self) -> Duration {
        self.enter_at.within.0.max(self.leave_at.within.0)
    }
}

/// `alerting.flood` in the configuration or a tenant's settings: the limits of each tenant, and, with `scopeLabel`,
/// each value of that label floods on its own (alerts without it count toward the tenant's
/// scope), with `overrides` by the label's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FloodSettings {
    pub enter_at: Rate,
    pub leave_at: Rate,
    pub digest_every: GoDuration,
    pub scope_label: String,
    pub overrides: BTreeMap<String, FloodLimits>,
}

impl Default for FloodSettings {
    fn default() -> Self {
        let limits = FloodLimits::default();
        Self {
            enter_at: limits.enter_at,
            leave_at: limits.leave_at,
            digest_every: limits.digest_every,
            scope_label: String::new(),
            overrides: BTreeMap::new(),
        }
    }
}

impl FloodSettings {
    /// The tenant's limits (those of every scope without an override).
    pub fn limits(&self) -> FloodLimits {
        FloodLimits {
            enter_at: self.enter_at,
            leave_at: self.leave_at,
            digest_every: self.digest_every,
        }
    }

    /// The scope of an alert with `labels`: `label=value`, or `""` for the tenant's.
    pub fn scope_of(&self, labels: &BTreeMap<String, String>) -> String {
        match labels.get(&self.scope_label) {
            Some(v) if !self.scope_label.is_empty() => format!("{}={v}", self.scope_label),
            _ => String::new(),
        }
    }

    /// The limits of `scope`: its override, or the tenant's.
    pub fn limits_of(&self, scope: &str) -> FloodLimits {
        scope
            .split_once('=')
            .and_then(|(_, value)| self.overrides.get(value))
            .copied()
            .unwrap_or_else(|| self.limits())
    }

    /// What is wrong with these settings (`at` names them in the messages).
    pub fn problems(&self, at: &str) -> Vec<String> {
        let mut out: Vec<String> = self.limits().problem(at).into_iter().collect();
        for (value, limits) in &self.overrides {
            out.extend(limits.problem(&format!("{at}.overrides.{value}")));
        }
        if !self.overrides.is_empty() && self.scope_label.is_empty() {
            out.push(format!(
                "{at}.overrides: needs scopeLabel, the label they are for"
            ));
        }
        out
    }
}

/// A scope in flood, as `GET /api/v1/floods` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Flood {
    pub tenant_id: Uuid,
    /// `label=value`, or empty for the whole tenant.
    pub scope: String,
    pub started_at: Timestamp,
    /// The alert that opened first among those that started the flood.
    pub first_out: Uuid,
    pub first_out_title: String,
    /// Alerts opened in the scope since the flood started, those that started it included.
    pub alerts: u32,
    pub worst: Severity,
    /// When the next digest goes out.
    pub digest_due: Timestamp,
    /// When the flood ends unless more alerts open (the opens in `leaveAt.within` falling
    /// below `leaveAt.alerts`).
    pub leave_at: Timestamp,
    pub digests: u32,
}

impl Flood {
    /// When the flood next needs looking at: a digest, or its end.
    pub fn next_due(&self) -> Timestamp {
        self.digest_due.min(self.leave_at)
    }

    /// The scope as people read it: "site=north", or "all alerts".
    pub fn scope_name(&self) -> &str {
        if self.scope.is_empty() {
            "all alerts"
        } else {
            &self.scope
        }
    }
}

/// When a scope with alerts opened at `opens` (ascending) is calm by `leave`: once fewer than
/// `leave.alerts` remain within `leave.within` (at once when there are fewer already).
pub fn calm_at(opens: &[Timestamp], leave: Rate, now: Timestamp) -> Timestamp {
    match opens.len().checked_sub(leave.alerts) {
        Some(i) => opens[i].plus(leave.within.0).max(now),
        None => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + secs * 1000).unwrap()
    }

    #[test]
    fn a_scope_is_calm_once_its_recent_opens_fall_below_the_leave_rate() {
        let leave = Rate {
            alerts: 2,
            within: GoDuration::from_secs(60),
        };
        let opens = [at(0), at(10), at(20), at(30)];
        // Two of the four remain within a minute until the third open is a minute old.
        assert_eq!(calm_at(&opens, leave, at(30)), at(80));
        assert_eq!(calm_at(&opens[..1], leave, at(30)), at(30));
        assert_eq!(calm_at(&opens, leave, at(100)), at(100));
    }

    #[test]
    fn a_scope_is_the_scope_labels_value_with_its_override() {
        let settings = FloodSettings {
            scope_label: "site".into(),
            overrides: BTreeMap::from([(
                "north".into(),
                FloodLimits {
                    digest_every: GoDuration::from_secs(60),
                    ..FloodLimits::default()
                },
            )]),
            ..FloodSettings::default()
        };
        let labels = |site: Option<&str>| {
            site.map(|s| BTreeMap::from([("site".to_string(), s.to_string())]))
                .unwrap_or_default()
        };
        assert_eq!(settings.scope_of(&labels(Some("north"))), "site=north");
        assert_eq!(settings.scope_of(&labels(None)), "");
        assert_eq!(
            settings.limits_of("site=north").digest_every.0.as_secs(),
            60
        );
        assert_eq!(
            settings.limits_of("site=south").digest_every.0.as_secs(),
            300
        );
        assert_eq!(settings.limits_of("").enter_at.alerts, 10);
        assert!(settings.problems("flood").is_empty());
        let loose = FloodSettings {
            leave_at: Rate {
                alerts: 11,
                within: GoDuration::from_secs(60),
            },
            ..FloodSettings::default()
        };
        assert_eq!(
            loose.problems("flood").len(),
            1,
            "{:?}",
            loose.problems("flood")
        );
    }
}
