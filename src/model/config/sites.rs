//! Federation sites as the main instance keeps them.

use super::*;

/// A federation site (SPEC 2.10) as the main instance keeps it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    pub stale_after: Option<crate::model::GoDuration>,
    /// The escalation policy of the stale-site alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    /// The site's clock may be this far off the main's before an alert (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_drift_max: Option<crate::model::GoDuration>,
    /// The site may run another bundle than the one served to it this long before an alert
    /// (default 15m); a failed apply raises it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_drift_after: Option<crate::model::GoDuration>,
    /// The bytes the site's uplink may carry per period, told to the site with each heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<crate::model::site::UplinkBudget>,
}

impl SiteBody {
    /// The body of a stored `sites` document (an unreadable one is an empty site, and a fault).
    pub fn parse(body: &str) -> SiteBody {
        crate::model::fault::decoded("a site document", serde_json::from_str(body))
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct IvrMenuBody {
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct IvrOption {
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TtsProfileBody {
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TtsAudio {
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TtsDetect {
    #[serde(default)]
    languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TtsNormalize {
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct LexiconEntry {
    from: String,
    to: String,
    #[serde(default)]
    match_case: bool,
    #[serde(default)]
    substring: bool,
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RegexRule {
    pattern: String,
    replace: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_site_takes_a_description_and_labels() {
        assert!(
            checked(
                "sites",
                json!({"description": "plant", "labels": {"region": "north"}})
            )
            .is_ok()
        );
        assert!(checked("sites", json!({"nonsense": 1})).is_err());
    }
}
