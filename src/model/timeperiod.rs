//! Time periods (the `time-periods` kind): per weekday a list of `HH:MM-HH:MM` ranges, date
//! exceptions that replace a weekday's ranges, other periods to exclude, in a time zone
//! (default UTC). Checks run only inside their object's `checkPeriod`.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimePeriod {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub days: BTreeMap<String, Vec<String>>,
    /// `YYYY-MM-DD` → ranges (empty: the whole day is outside the period).
    #[serde(default)]
    pub exceptions: BTreeMap<String, Vec<String>>,
    /// Names of periods whose times are taken out of this one (one level: their own
    /// exclusions are not followed).
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// The index (Monday 0) of a weekday named in full or by its first three letters.
pub fn weekday(name: &str) -> Option<usize> {
    let name = name.trim().to_ascii_lowercase();
    WEEKDAYS
        .iter()
        .position(|d| *d == name || (name.len() == 3 && d.starts_with(&name)))
}

/// `HH:MM-HH:MM` within one day as minutes `[start, end)`; `24:00` is allowed as an end.
pub fn parse_range(r: &str) -> Option<(u32, u32)> {
    let minutes = |t: &str| -> Option<u32> {
        let (h, m) = t.trim().split_once(':')?;
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
    };
    let (a, b) = r.split_once('-')?;
    let (a, b) = (minutes(a)?, minutes(b)?);
    (a < b).then_some((a, b))
}

impl TimePeriod {
    /// Whether `at` lies in this period's own ranges (exclusions not applied).
    pub fn covers(&self, at: Timestamp) -> bool {
        let tz = self
            .time_zone
            .as_deref()
            .and_then(|z| jiff::tz::TimeZone::get(z).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC);
        let local = at.0.to_zoned(tz);
        let date = local.date().to_string();
        let ranges = match self.exceptions.get(&date) {
            Some(r) => r,
            None => {
                let day = WEEKDAYS[local.weekday().to_monday_zero_offset() as usize];
                match self.days.get(day) {
                    Some(r) => r,
                    None => return false,
                }
            }
        };
        let minute = u32::try_from(local.hour()).unwrap_or(0) * 60
            + u32::try_from(local.minute()).unwrap_or(0);
        ranges
            .iter()
            .filter_map(|r| parse_range(r))
            .any(|(a, b)| a <= minute && minute < b)
    }

    /// Whether `at` is in the period: in its ranges and in none of the excluded periods
    /// (looked up by name; an unknown name excludes nothing).
    pub fn contains(&self, at: Timestamp, lookup: &dyn Fn(&str) -> Option<TimePeriod>) -> bool {
        self.covers(at)
            && !self
                .exclude
                .iter()
                .filter_map(|n| lookup(n))
                .any(|p| p.covers(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(v: serde_json::Value) -> TimePeriod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn weekdays_time_zones_exceptions_and_exclusions() {
        let office = period(serde_json::json!({
            "timeZone": "Europe/Berlin",
            "days": {"monday": ["08:00-12:00", "13:00-24:00"]},
            "exceptions": {"2026-12-07": []},
            "exclude": ["lunch-extra"]
        }));
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        // 2026-11-23 is a Monday; Berlin is UTC+1 in November.
        assert!(office.covers(at("2026-11-23T07:30:00Z")), "08:30 Berlin");
        assert!(!office.covers(at("2026-11-23T06:30:00Z")), "07:30 Berlin");
        assert!(!office.covers(at("2026-11-23T11:30:00Z")), "12:30 Berlin");
        assert!(office.covers(at("2026-11-23T22:59:00Z")), "23:59 Berlin");
        assert!(!office.covers(at("2026-11-24T07:30:00Z")), "Tuesday");
        assert!(!office.covers(at("2026-12-07T07:30:00Z")), "exception day");
        let extra = period(serde_json::json!({"days": {"monday": ["13:00-14:00"]}}));
        let lookup = |n: &str| (n == "lunch-extra").then(|| extra.clone());
        assert!(office.contains(at("2026-11-23T07:30:00Z"), &lookup));
        assert!(
            !office.contains(at("2026-11-23T13:30:00Z"), &lookup),
            "excluded 13:00-14:00 UTC"
        );
        assert!(office.contains(at("2026-11-23T14:30:00Z"), &lookup));
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("08:00-17:30"), Some((480, 1050)));
        assert_eq!(parse_range("00:00-24:00"), Some((0, 1440)));
        assert_eq!(parse_range("17:00-08:00"), None);
        assert_eq!(parse_range("24:30-25:00"), None);
        assert_eq!(parse_range("8-9"), None);
    }
}
