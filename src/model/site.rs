//! Federation (SPEC 2.10, 4 sites rows): what an edge reports in its heartbeat, what the main
//! keeps of it, the overview row, and the batch of events an edge forwards upward.

use super::Timestamp;
use super::event::Event;
use super::size::ByteSize;
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
    /// The site's clock when it sent this heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Timestamp>,
    /// The round trip of the site's previous heartbeat as it measured it, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<u64>,
    /// The bytes of the site's uplink traffic so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<UplinkUsage>,
}

/// A site's clock may be this far off the main's before it raises an alert, unless the site
/// says otherwise (`clockDriftMax`).
pub const CLOCK_DRIFT_MAX: std::time::Duration = std::time::Duration::from_secs(30);
/// A site may run another bundle than the one served to it this long before it raises an
/// alert, unless the site says otherwise (`configDriftAfter`).
pub const CONFIG_DRIFT_AFTER: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The site's clock against the main's in milliseconds (positive: ahead), as NTP reads it from
/// one message: the site's clock when it sent, plus half the round trip it measured (the way
/// there), against the main's clock when the message arrived. Off by at most half the round
/// trip's asymmetry.
pub fn clock_offset_ms(
    site_clock: Timestamp,
    round_trip_ms: Option<u64>,
    arrived: Timestamp,
) -> i64 {
    let half = round_trip_ms.unwrap_or(0) as i64 / 2;
    site_clock.as_millis() + half - arrived.as_millis()
}

/// The header of a heartbeat's answer that tells the site its clock offset in milliseconds.
pub const CLOCK_OFFSET_HEADER: &str = "x-svc-clock-offset";
/// The header of a heartbeat's answer that tells the site how many actions the main's people
/// took on its alerts wait for it (`GET /sites/{name}:actions`); absent: none.
pub const ACTIONS_WAITING_HEADER: &str = "x-svc-actions-waiting";

/// What the main answers a heartbeat with, in its headers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeatAnswer {
    /// The site's clock offset, when it told its clock.
    pub clock_offset_ms: Option<i64>,
    /// Actions taken at the main on the site's alerts that wait for it.
    pub actions_waiting: usize,
    /// The site's uplink budget (`UPLINK_BUDGET_HEADER`).
    pub uplink_budget: Option<UplinkBudget>,
}

/// The heartbeat answer's header carrying the site's uplink budget (JSON), when it has one.
pub const UPLINK_BUDGET_HEADER: &str = "x-svc-uplink-budget";

/// A site's uplink budget (`uplink` of a site at the main, told to the site with each
/// heartbeat's answer): the bytes its uplink may carry per period, as cellular plans cap them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UplinkBudget {
    /// Bytes both ways per period: a number, or `500MB`, `2GB`, `300KB` (powers of 1000) or
    /// `512MiB` (powers of 1024).
    pub budget: ByteSize,
    /// `month` (the only period yet: a plan's billing month).
    #[serde(default = "month")]
    pub period: String,
    /// The day of the month the period starts (1-28, UTC; default 1).
    #[serde(default = "first_day")]
    pub reset_day: u8,
    /// What goes up once the budget is used: `critical-only` (critical events, acks and
    /// heartbeats; the rest waits in order until the period resets or the budget is raised).
    #[serde(default = "critical_only")]
    pub over_budget: String,
    /// The share used, in percent, that raises a warning at the site (default 80).
    #[serde(default = "eighty")]
    pub warn_at: u8,
    /// The site's escalation policy for its budget alerts (its contacts, by SMS where there
    /// is a modem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
}

fn month() -> String {
    "month".into()
}

fn first_day() -> u8 {
    1
}

fn critical_only() -> String {
    "critical-only".into()
}

fn eighty() -> u8 {
    80
}

impl UplinkBudget {
    /// The budget as `UPLINK_BUDGET_HEADER` carries it: JSON with every character a header
    /// value cannot hold (past ASCII, and DEL) escaped (`\uXXXX`), so a policy's name in any
    /// script fits.
    pub fn header_value(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        let mut out = String::with_capacity(json.len());
        for c in json.chars() {
            if c.is_ascii_graphic() || c == ' ' {
                out.push(c);
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out
    }

    /// Why the budget cannot be kept, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.period != "month" {
            return Err(format!("uplink.period {:?}: month", self.period));
        }
        if !(1..=28).contains(&self.reset_day) {
            return Err("uplink.resetDay: 1 to 28".into());
        }
        if self.over_budget != "critical-only" {
            return Err(format!(
                "uplink.overBudget {:?}: critical-only",
                self.over_budget
            ));
        }
        if !(1..=100).contains(&self.warn_at) {
            return Err("uplink.warnAt: 1 to 100 (percent)".into());
        }
        if self.budget.0 == 0 {
            return Err("uplink.budget: more than 0 bytes".into());
        }
        Ok(())
    }

    /// How much of the budget `usage`'s period used, in percent.
    pub fn used_pct(&self, usage: &UplinkUsage) -> f64 {
        (usage.period.sent + usage.period.received) as f64 * 100.0 / self.budget.0 as f64
    }
}

/// Whether a site stands drifted from the main, or when it will if nothing changes.
#[derive(Clone, Debug, PartialEq)]
pub enum Drift {
    None,
    Due(Timestamp),
    /// Drifted, and why.
    Now(String),
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

/// An action on one of a site's alerts taken at the main, waiting for the site to carry it
/// out (the site owns the alert: its ack stops the site's escalation, and comes back as the
/// site's own event).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SiteAction {
    pub id: Uuid,
    /// The site's alert.
    pub alert_id: Uuid,
    /// `ack`, `resolve` or `shelve`.
    pub action: String,
    /// Who took it at the main.
    pub by: String,
    #[serde(default)]
    pub comment: String,
    pub at: Timestamp,
    /// A `shelve`'s terms, as the main's people asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shelf: Option<crate::model::alert::ShelveRequest>,
}

/// `POST /api/v1/sites/{name}:actions`: the actions the site carried out (or found no longer
/// applying), which the main then forgets.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionsDone {
    pub done: Vec<Uuid>,
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
    /// Events past `forwarded_through` already counted: sent ahead while the site held older
    /// ones back (`ForwardBatch::ahead`), so they count once when sent again in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted_ahead: Vec<Uuid>,
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
    /// The site's clock against the main's at its last heartbeat (see `clock_offset_ms`).
    #[serde(default)]
    pub clock_offset_ms: Option<i64>,
    /// The open clock-drift alert.
    #[serde(default)]
    pub clock_alert: Option<Uuid>,
    /// The ETag of the bundle last served to the site, and since when it has been served.
    #[serde(default)]
    pub served_etag: String,
    #[serde(default)]
    pub served_at: Option<Timestamp>,
    /// The open config-drift alert.
    #[serde(default)]
    pub config_alert: Option<Uuid>,
    /// Actions on the site's alerts taken at the main, in order, until the site has carried
    /// them out.
    #[serde(default)]
    pub actions: Vec<SiteAction>,
}

impl SiteStatus {
    /// Why the site's clock stands drifted from the main's by more than `max`, while it does.
    pub fn clock_drift(&self, max: std::time::Duration) -> Drift {
        match self.clock_offset_ms {
            Some(offset) if offset.unsigned_abs() > max.as_millis() as u64 => {
                let way = if offset > 0 { "ahead of" } else { "behind" };
                Drift::Now(format!(
                    "the clock of site {} is {} {way} the main's (at most {} allowed)",
                    self.name,
                    super::GoDuration(std::time::Duration::from_millis(offset.unsigned_abs())),
                    super::GoDuration(max),
                ))
            }
            _ => Drift::None,
        }
    }

    /// Why the site stands drifted from the configuration served to it: its apply failed, or
    /// it has run another bundle for longer than `after` since the served one was first
    /// served.
    pub fn config_drift(&self, after: std::time::Duration, now: Timestamp) -> Drift {
        if self.served_etag.is_empty() || self.last_heartbeat_at.is_none() {
            return Drift::None;
        }
        let applied = match self.heartbeat.bundle_etag.as_str() {
            "" => "none",
            etag => etag,
        };
        if !self.heartbeat.apply_error.is_empty() {
            return Drift::Now(format!(
                "site {} could not apply the bundle served to it ({}): {}; it runs {applied}",
                self.name, self.served_etag, self.heartbeat.apply_error
            ));
        }
        if self.heartbeat.bundle_etag == self.served_etag {
            return Drift::None;
        }
        let since = self.served_at.unwrap_or(now);
        let due = since.plus(after);
        if now < due {
            return Drift::Due(due);
        }
        Drift::Now(format!(
            "site {} has not applied the bundle served to it since {since} ({}); it runs {applied}",
            self.name, self.served_etag
        ))
    }
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
    /// The bytes of the site's uplink traffic, as its last heartbeat told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<UplinkUsage>,
    /// The site's clock against the main's at its last heartbeat, in milliseconds (positive:
    /// ahead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
    /// The clock is off by more than the site's `clockDriftMax` (an alert is open).
    pub clock_drift: bool,
    /// The site's apply failed, or it has not applied the served bundle within its
    /// `configDriftAfter` (an alert is open).
    pub config_drift: bool,
    /// Since when the main has served the bundle it serves now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_served_at: Option<Timestamp>,
}

/// `POST /api/v1/sites/{name}:events`: events of the edge in its order, with its ids and times.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardBatch {
    pub events: Vec<Event>,
    /// Sent ahead of events the site still holds back (over its uplink budget): the main
    /// counts them, but its position stays, for the held ones come later with older ids.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ahead: bool,
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
    /// This site's clock against the main's, as the main answered the last heartbeat, in
    /// milliseconds (positive: ahead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
    /// Since when heartbeats fail to reach the main, while they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_lost_since: Option<Timestamp>,
    /// The bytes this site exchanged with its main.
    pub uplink: UplinkUsage,
    /// The budget the main set for them, as its last heartbeat answer told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_budget: Option<UplinkBudget>,
    /// The budget's period is used up: only critical events and acks go up, the rest waits.
    pub over_budget: bool,
}

/// Bytes a site exchanged with its main over HTTP (request and status lines, headers, bodies
/// as sent: compressed where they were; without TLS and TCP framing, which a router's
/// counter adds, typically 5-10 %), today (UTC), this month and since the process started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UplinkUsage {
    /// The UTC day `today` counts (`2026-12-05`).
    pub day: String,
    pub today: Bytes,
    /// The UTC day the period `period` counts began (`2026-12-01`).
    pub period_start: String,
    pub period: Bytes,
    pub total: Bytes,
}

/// Bytes each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Bytes {
    pub sent: u64,
    pub received: u64,
}

impl Bytes {
    fn add(&mut self, sent: u64, received: u64) {
        self.sent += sent;
        self.received += received;
    }
}

impl UplinkUsage {
    /// Counts one exchange at `now` in periods starting on `reset_day` of the month; a new
    /// day or period starts its count afresh.
    pub fn count(&mut self, now: Timestamp, reset_day: u8, sent: u64, received: u64) {
        self.roll(now, reset_day);
        self.today.add(sent, received);
        self.period.add(sent, received);
        self.total.add(sent, received);
    }

    /// Starts the day's and the period's counts afresh when `now` is past them.
    pub fn roll(&mut self, now: Timestamp, reset_day: u8) {
        let date = now.0.to_zoned(jiff::tz::TimeZone::UTC).date();
        let day = date.to_string();
        if day != self.day {
            self.today = Bytes::default();
            self.day = day;
        }
        let reset = i8::try_from(reset_day.clamp(1, 28)).unwrap_or(1);
        let this_month = date
            .first_of_month()
            .saturating_add(jiff::Span::new().days(reset - 1));
        let start = if date >= this_month {
            this_month
        } else {
            this_month.saturating_sub(jiff::Span::new().months(1))
        }
        .to_string();
        if start != self.period_start {
            self.period = Bytes::default();
            self.period_start = start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// A site 2 minutes ahead, heard 40 ms after it sent with a round trip of 80 ms: the
    /// way there is counted, and the drift stands past 30 s but not under it.
    #[test]
    fn a_clock_offset_counts_the_way_there_and_drifts_past_its_bound() {
        let sent = at("2026-03-01T12:02:00Z");
        let arrived = at("2026-03-01T12:00:00.040Z");
        assert_eq!(clock_offset_ms(sent, Some(80), arrived), 120_000);
        assert_eq!(clock_offset_ms(sent, None, arrived), 119_960);
        let mut status = SiteStatus {
            name: "north".into(),
            clock_offset_ms: Some(120_000),
            ..Default::default()
        };
        match status.clock_drift(CLOCK_DRIFT_MAX) {
            Drift::Now(why) => assert!(why.contains("2m0s ahead of"), "{why}"),
            other => panic!("{other:?}"),
        }
        status.clock_offset_ms = Some(-29_000);
        assert_eq!(status.clock_drift(CLOCK_DRIFT_MAX), Drift::None);
        status.clock_offset_ms = Some(-31_000);
        assert!(
            matches!(status.clock_drift(CLOCK_DRIFT_MAX), Drift::Now(w) if w.contains("behind"))
        );
    }

    /// A served bundle not applied drifts after its time; an apply failure at once; the
    /// served one applied, none.
    #[test]
    fn config_drift_waits_for_its_time_but_not_for_a_failure() {
        let served = at("2026-03-01T12:00:00Z");
        let mut status = SiteStatus {
            name: "north".into(),
            served_etag: "b2".into(),
            served_at: Some(served),
            last_heartbeat_at: Some(served),
            heartbeat: SiteHeartbeat {
                bundle_etag: "b1".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let after = CONFIG_DRIFT_AFTER;
        assert_eq!(
            status.config_drift(after, served),
            Drift::Due(at("2026-03-01T12:15:00Z"))
        );
        match status.config_drift(after, at("2026-03-01T12:15:00Z")) {
            Drift::Now(why) => assert!(why.contains("(b2); it runs b1"), "{why}"),
            other => panic!("{other:?}"),
        }
        status.heartbeat.apply_error = "hosts: unknown template".into();
        match status.config_drift(after, served) {
            Drift::Now(why) => assert!(
                why.contains("could not apply") && why.contains("unknown template"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        status.heartbeat.apply_error.clear();
        status.heartbeat.bundle_etag = "b2".into();
        assert_eq!(
            status.config_drift(after, at("2026-03-02T00:00:00Z")),
            Drift::None
        );
    }

    /// Each exchange counts today, this month and in all; a new day and a new month start
    /// their counts afresh.
    #[test]
    fn uplink_bytes_count_by_day_and_month() {
        let mut u = UplinkUsage::default();
        u.count(at("2026-11-30T23:59:00Z"), 1, 100, 10);
        u.count(at("2026-11-30T23:59:30Z"), 1, 50, 5);
        assert_eq!(
            (u.day.as_str(), u.today),
            (
                "2026-11-30",
                Bytes {
                    sent: 150,
                    received: 15
                }
            )
        );
        assert_eq!(u.period_start, "2026-11-01");
        u.count(at("2026-12-01T00:00:01Z"), 1, 7, 3);
        assert_eq!(
            u.today,
            Bytes {
                sent: 7,
                received: 3
            }
        );
        assert_eq!(
            (u.period_start.as_str(), u.period),
            (
                "2026-12-01",
                Bytes {
                    sent: 7,
                    received: 3
                }
            )
        );
        assert_eq!(
            u.total,
            Bytes {
                sent: 157,
                received: 18
            }
        );
        u.count(at("2026-12-02T08:00:00Z"), 1, 1, 1);
        assert_eq!(
            u.today,
            Bytes {
                sent: 1,
                received: 1
            }
        );
        assert_eq!(
            u.period,
            Bytes {
                sent: 8,
                received: 4
            }
        );
        // A plan billed from the 15th: the 2nd of January is in the period of December 15th.
        u.count(at("2027-01-02T08:00:00Z"), 15, 5, 5);
        assert_eq!(
            (u.period_start.as_str(), u.period),
            (
                "2026-12-15",
                Bytes {
                    sent: 5,
                    received: 5
                }
            )
        );
        u.roll(at("2027-01-15T00:00:00Z"), 15);
        assert_eq!(
            (u.period_start.as_str(), u.period),
            ("2027-01-15", Bytes::default())
        );
    }

    /// A policy named in any script still makes a header value, and reads back the same.
    #[test]
    fn a_budget_travels_in_a_header_as_ascii() {
        let b: UplinkBudget = serde_json::from_value(
            serde_json::json!({"budget": "1MB", "escalationPolicy": "Störung 🚨\u{7f}"}),
        )
        .unwrap();
        let value = b.header_value();
        assert!(value.is_ascii(), "{value}");
        assert!(
            axum::http::HeaderValue::try_from(value.clone()).is_ok(),
            "{value}"
        );
        assert_eq!(serde_json::from_str::<UplinkBudget>(&value).unwrap(), b);
    }

    #[test]
    fn a_budget_reads_its_units_and_refuses_what_it_cannot_keep() {
        let b: UplinkBudget =
            serde_json::from_value(serde_json::json!({"budget": "500MB"})).unwrap();
        assert_eq!((b.budget.0, b.reset_day, b.warn_at), (500_000_000, 1, 80));
        assert_eq!(b.over_budget, "critical-only");
        assert_eq!("512MiB".parse::<ByteSize>().unwrap().0, 512 * 1024 * 1024);
        assert_eq!("1.5 kb".parse::<ByteSize>().unwrap().0, 1500);
        assert!("5 parsecs".parse::<ByteSize>().is_err());
        let mut usage = UplinkUsage::default();
        usage.count(at("2026-12-01T00:00:00Z"), 1, 300_000_000, 100_000_000);
        assert_eq!(b.used_pct(&usage), 80.0);
        for (field, value, why) in [
            ("resetDay", serde_json::json!(31), "1 to 28"),
            ("period", serde_json::json!("week"), "month"),
            ("overBudget", serde_json::json!("nothing"), "critical-only"),
            ("budget", serde_json::json!(0), "more than 0"),
        ] {
            let mut v = serde_json::json!({"budget": "1MB"});
            v[field] = value;
            let b: UplinkBudget = serde_json::from_value(v).unwrap();
            assert!(b.check().unwrap_err().contains(why), "{field}");
        }
    }

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
