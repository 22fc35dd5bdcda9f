//! Federation (SPEC 2.10, 4 sites rows): what an edge reports in its heartbeat, what the main
//! keeps of it, the overview row, and the batch of events an edge forwards upward.

use super::Timestamp;
use super::event::Event;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// What `site.fingerprint` holds.
pub const FINGERPRINT_FORM: &str =
    "the SHA-256 of the main's certificate, 64 hex digits (colons allowed)";

/// A certificate's SHA-256 from hex with optional colons (`openssl x509 -fingerprint` form).
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let hex: Vec<u8> = text.bytes().filter(|c| *c != b':').collect();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// A site counts as connected while its last heartbeat is younger than this (SEMANTICS 10).
pub const CONNECTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(300);

/// `POST /api/v1/sites/{name}:heartbeat` (the reference's `SiteHeartbeat`, plus the forward
/// position of store-and-forward).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteHeartbeat {
    /// The edge's version string.
    #[serde(default)]
    pub version: String,
    /// The ETag of the bundle the edge last applied.
    #[serde(default)]
    pub bundle_etag: String,
    /// Why the last pulled bundle was not applied; empty when it was.
    #[serde(default)]
    pub apply_error: String,
    /// `hosts`, `services`, `alertsOpen` (more keys are kept as sent).
    #[serde(default)]
    pub stats: BTreeMap<String, i64>,
    /// How often the edge sends heartbeats, in seconds (the default stale threshold is three).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward: Option<ForwardState>,
}

/// The edge's side of store-and-forward, as its heartbeat reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardState {
    /// The last event the main confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Uuid>,
    /// Events waiting to be forwarded.
    #[serde(default)]
    pub pending: u64,
    /// The time of the oldest event not forwarded yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_unsent: Option<Timestamp>,
    /// Events lost because retention removed them before they were forwarded.
    #[serde(default)]
    pub gap: u64,
}

/// What the main keeps of a site's connection, by tenant and site name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteStatus {
    pub tenant_id: Uuid,
    pub name: String,
    #[serde(default)]
    pub last_heartbeat_at: Option<Timestamp>,
    #[serde(default)]
    pub last_pull_at: Option<Timestamp>,
    #[serde(default)]
    pub heartbeat: SiteHeartbeat,
    /// The newest forwarded event stored (events are forwarded in order).
    #[serde(default)]
    pub forwarded_through: Option<Uuid>,
    #[serde(default)]
    pub forwarded: u64,
    /// Alerts opened minus alerts resolved among the forwarded events.
    #[serde(default)]
    pub forwarded_alerts_open: i64,
    /// Since when the site has been stale, while it is.
    #[serde(default)]
    pub stale_since: Option<Timestamp>,
    /// The open stale-site alert.
    #[serde(default)]
    pub stale_alert: Option<Uuid>,
    /// How long the site ran alone the last time it was stale, in seconds.
    #[serde(default)]
    pub last_alone_seconds: Option<u64>,
}

/// One row of `GET /api/v1/sites:overview`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SiteOverview {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub disabled: bool,
    pub labels: BTreeMap<String, String>,
    /// The last heartbeat is younger than 5 minutes.
    pub connected: bool,
    /// The last heartbeat is older than the site's stale threshold (an alert is open).
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_pull_at: Option<Timestamp>,
    /// The edge's version, and whether it differs from the main's.
    pub version: String,
    pub version_skew: bool,
    /// The ETag of the bundle the main serves, and whether the edge runs it.
    pub bundle_etag: String,
    pub bundle_current: bool,
    pub applied_etag: String,
    pub apply_error: String,
    pub stats: BTreeMap<String, i64>,
    /// Open alerts of the site among its forwarded events.
    pub forwarded_alerts_open: i64,
    pub forwarded_events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_through: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward: Option<ForwardState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_alone_seconds: Option<u64>,
}

/// `POST /api/v1/sites/{name}:events`: events of the edge in its order, with its ids and times.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardBatch {
    pub events: Vec<Event>,
}

/// The main's receipt for a forwarded batch; the edge advances to `through`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForwardReceipt {
    pub stored: u64,
    pub duplicates: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<Uuid>,
}

/// `GET /api/v1/site:status` on an edge: its side of the federation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EdgeStatus {
    /// Whether this instance is configured as a site.
    pub enabled: bool,
    pub main_url: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pull_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_at: Option<Timestamp>,
    pub bundle_etag: String,
    pub apply_error: String,
    /// The last failure talking to the main; empty after a success.
    pub last_error: String,
    pub forward: ForwardState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_take_hex_with_or_without_colons() {
        let hex = "ab".repeat(32);
        assert_eq!(parse_fingerprint(&hex), Some([0xab; 32]));
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(parse_fingerprint(&colons), Some([0xab; 32]));
        assert!(parse_fingerprint("abcd").is_none());
        assert!(parse_fingerprint(&"zz".repeat(32)).is_none());
        assert!(parse_fingerprint(&format!("é{}", "a".repeat(62))).is_none());
    }
}
