//! The noise controls (issue 69): how long a person may shelve an alert, when an alert
//! chatters and shelves itself, when a scope's alerts flood. The configuration's `alerting`
//! sets them for the instance; each tenant may set its own (`/api/v1/alerting/settings`),
//! and what it leaves unset follows the configuration.

use super::Timestamp;
use super::duration::GoDuration;
use super::flood::FloodSettings;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where a tenant's own noise controls are kept (the settings table).
pub const NOISE_SETTING: &str = "alerting/noise";

/// Chatter (ISA-18.2): an alert whose source changes more than `flips` times within `within`
/// is shelved for `shelveFor`; `flips: 0` turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Chatter {
    pub flips: usize,
    pub within: GoDuration,
    pub shelve_for: GoDuration,
}

impl Default for Chatter {
    fn default() -> Self {
        Self {
            flips: 3,
            within: GoDuration::from_secs(60),
            shelve_for: GoDuration::from_secs(15 * 60),
        }
    }
}

impl Chatter {
    /// What is wrong with these values (`at` names them in the message).
    pub fn problems(&self, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.flips > 1000 {
            out.push(format!("{at}.flips: at most 1000"));
        }
        if self.flips > 0 && (self.within.0.is_zero() || self.shelve_for.0.is_zero()) {
            out.push(format!("{at}: within and shelveFor must be positive"));
        }
        out
    }
}

/// The noise controls in force for a tenant.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NoiseSettings {
    /// The longest a timed shelf may hold an alert (OPC UA's `MaxTimeShelved`).
    pub max_shelve: GoDuration,
    pub chatter: Chatter,
    pub flood: FloodSettings,
}

impl Default for NoiseSettings {
    fn default() -> Self {
        Self {
            max_shelve: GoDuration::from_secs(8 * 3600),
            chatter: Chatter::default(),
            flood: FloodSettings::default(),
        }
    }
}

impl NoiseSettings {
    /// What is wrong with these values (`at` prefixes the names in the messages).
    pub fn problems(&self, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.max_shelve.0.is_zero() {
            out.push(format!("{at}maxShelve: must be positive"));
        }
        if self.max_shelve.0 > Duration::from_secs(30 * 86_400) {
            out.push(format!("{at}maxShelve: at most 720h"));
        }
        out.extend(self.chatter.problems(&format!("{at}chatter")));
        out.extend(self.flood.problems(&format!("{at}flood")));
        out
    }

    /// These settings with what `tenant` set in their place.
    pub fn with(&self, tenant: &NoiseOverrides) -> NoiseSettings {
        NoiseSettings {
            max_shelve: tenant.max_shelve.unwrap_or(self.max_shelve),
            chatter: tenant.chatter.unwrap_or(self.chatter),
            flood: tenant.flood.clone().unwrap_or_else(|| self.flood.clone()),
        }
    }
}

/// What a tenant set of its own; a field left out (or null) follows the configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoiseOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_shelve: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatter: Option<Chatter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood: Option<FloodSettings>,
}

/// A tenant's noise controls as stored: what it set, and how often it changed them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredNoise {
    pub overrides: NoiseOverrides,
    pub version: u64,
    pub updated_at: Option<Timestamp>,
}

/// `GET /api/v1/alerting/settings`: the controls in force, and what the tenant set itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AlertingSettings {
    #[serde(flatten)]
    pub effective: NoiseSettings,
    /// The fields this tenant set (the rest follow the configuration's `alerting`).
    pub tenant: NoiseOverrides,
    /// Counts the tenant's changes; 0 while it set nothing.
    pub version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_replaces_only_what_it_sets() {
        let instance = NoiseSettings::default();
        let tenant: NoiseOverrides = serde_json::from_value(serde_json::json!({
            "maxShelve": "1h",
            "flood": {"enterAt": {"alerts": 0, "within": "1m"}}
        }))
        .unwrap();
        let mine = instance.with(&tenant);
        assert_eq!(mine.max_shelve, GoDuration::from_secs(3600));
        assert_eq!(mine.chatter, instance.chatter);
        assert_eq!(mine.flood.enter_at.alerts, 0);
        assert_eq!(instance.with(&NoiseOverrides::default()), instance);
    }

    #[test]
    fn problems_name_the_field() {
        let mut s = NoiseSettings {
            max_shelve: GoDuration::from_secs(0),
            ..NoiseSettings::default()
        };
        s.chatter.within = GoDuration::from_secs(0);
        s.flood.leave_at.alerts = 50;
        let problems = s.problems("");
        assert!(problems[0].starts_with("maxShelve:"), "{problems:?}");
        assert!(problems[1].starts_with("chatter:"), "{problems:?}");
        assert!(problems[2].starts_with("flood: leaveAt"), "{problems:?}");
        assert!(s.problems("alerting.")[0].starts_with("alerting.maxShelve"));
        let unknown =
            serde_json::from_value::<NoiseOverrides>(serde_json::json!({"maxShelf": "1h"}));
        assert!(unknown.is_err());
    }
}
