//! Reports (SPEC 4.5, the reference's SEMANTICS 9): the `reports` document, its schedule
//! grammar, the table a rendering shows, and the archive entries of past renderings.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The report types, as the reference names them.
pub const REPORT_TYPES: &[&str] = &["availability", "sla", "alert-stats", "oncall", "audit"];

/// Renderings kept per report and format when the report sets no `keep` (SPEC 7).
pub const DEFAULT_KEEP: u32 = 12;

/// A `reports` document's body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportBody {
    /// `availability`, `sla`, `alert-stats`, `oncall` or `audit`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `selector` (objects, for availability and sla), `windowDays` (default 30), `target`
    /// (percent, default 99.9), `includeDowntimes`, `channel` (the `email` channel that mails
    /// scheduled and run renderings).
    #[serde(default)]
    pub params: Map<String, Value>,
    /// `daily[@HH:MM]`, `weekly:<day>[@HH:MM]` or `monthly[:<day>][@HH:MM]`, server-local,
    /// default 07:00; absent: rendered on request only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Addresses the renderings are mailed to.
    #[serde(default)]
    pub email: Vec<String>,
    /// Renderings kept per format (default 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
}

/// A report's `params`, read leniently: a missing or mistyped value takes its default.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportParams {
    pub selector: String,
    pub window_days: u32,
    pub target: f64,
    pub include_downtimes: bool,
    /// Leave the time an object was held back by a failed dependency out (`availability`,
    /// `sla`): the parent's outage is not the child's.
    pub exclude_dependencies: bool,
    pub channel: String,
}

impl ReportParams {
    pub fn of(params: &Map<String, Value>) -> Result<Self, String> {
        let window_days = match params.get("windowDays") {
            None | Some(Value::Null) => 30,
            Some(v) => v
                .as_u64()
                .filter(|d| (1..=366).contains(d))
                .and_then(|d| u32::try_from(d).ok())
                .ok_or("params.windowDays: expected a whole number of days from 1 to 366")?,
        };
        let target = match params.get("target") {
            None | Some(Value::Null) => 99.9,
            Some(v) => v
                .as_f64()
                .filter(|t| (0.0..=100.0).contains(t))
                .ok_or("params.target: expected a percentage from 0 to 100")?,
        };
        let text = |key: &str| -> Result<String, String> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("params.{key}: expected a string")),
            }
        };
        Ok(Self {
            selector: text("selector")?,
            window_days,
            target,
            include_downtimes: params
                .get("includeDowntimes")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            exclude_dependencies: params
                .get("excludeDependencies")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            channel: text("channel")?,
        })
    }
}

/// When a scheduled report runs, in the server's local time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    Day,
    /// The weekday, Monday 1 to Sunday 7.
    Week(i8),
    /// The day of the month; a month without it runs on its last day.
    Month(i8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportSchedule {
    pub every: Every,
    pub hour: i8,
    pub minute: i8,
}

impl std::str::FromStr for ReportSchedule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let wrong = || {
            format!(
                "schedule {s:?} must be daily[@HH:MM], weekly:<day>[@HH:MM] or monthly[:<day>][@HH:MM]"
            )
        };
        let (period, at) = match s.split_once('@') {
            Some((p, at)) => (p, Some(at)),
            None => (s, None),
        };
        let (hour, minute) = match at {
            None => (7, 0),
            Some(at) => {
                let (h, m) = at.split_once(':').ok_or_else(wrong)?;
                let h: i8 = h
                    .parse()
                    .ok()
                    .filter(|h| (0..24).contains(h))
                    .ok_or_else(wrong)?;
                let m: i8 = m
                    .parse()
                    .ok()
                    .filter(|m| (0..60).contains(m))
                    .ok_or_else(wrong)?;
                (h, m)
            }
        };
        let every = match period.split_once(':') {
            None if period == "daily" => Every::Day,
            None if period == "weekly" => Every::Week(1),
            None if period == "monthly" => Every::Month(1),
            Some(("weekly", day)) => Every::Week(weekday(day).ok_or_else(wrong)?),
            Some(("monthly", day)) => Every::Month(
                day.parse()
                    .ok()
                    .filter(|d| (1..=31).contains(d))
                    .ok_or_else(wrong)?,
            ),
            _ => return Err(wrong()),
        };
        Ok(Self {
            every,
            hour,
            minute,
        })
    }
}

fn weekday(day: &str) -> Option<i8> {
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    let day = day.to_ascii_lowercase();
    DAYS.iter()
        .position(|d| day.starts_with(d))
        .and_then(|i| i8::try_from(i + 1).ok())
}

impl ReportSchedule {
    /// The slot key of the run due at or before `now` (local time of `tz`), and when it is
    /// due: one key per period, so a run is made once however often the sweep looks.
    pub fn slot(&self, now: Timestamp, tz: &jiff::tz::TimeZone) -> Option<(String, Timestamp)> {
        let local = now.0.to_zoned(tz.clone());
        let date = local.date();
        let due_on = |d: jiff::civil::Date| {
            d.at(self.hour, self.minute, 0, 0)
                .to_zoned(tz.clone())
                .ok()
                .map(|z| z.timestamp())
        };
        let candidate = match self.every {
            Every::Day => date,
            Every::Week(wd) => {
                let back = (date.weekday().to_monday_one_offset() - wd).rem_euclid(7);
                date.checked_sub(jiff::Span::new().days(back)).ok()?
            }
            Every::Month(day) => month_day(date.year(), date.month(), day)?,
        };
        let at = due_on(candidate)?;
        let (date, at) = if at.as_millisecond() <= now.as_millis() {
            (candidate, at)
        } else {
            let earlier = match self.every {
                Every::Day => candidate.yesterday().ok()?,
                Every::Week(_) => candidate.checked_sub(jiff::Span::new().days(7)).ok()?,
                Every::Month(day) => {
                    let first = date.first_of_month().yesterday().ok()?;
                    month_day(first.year(), first.month(), day)?
                }
            };
            (earlier, due_on(earlier)?)
        };
        Some((date.to_string(), Timestamp(at)))
    }
}

impl ReportSchedule {
    fn runs_on(&self, d: jiff::civil::Date) -> bool {
        match self.every {
            Every::Day => true,
            Every::Week(wd) => d.weekday().to_monday_one_offset() == wd,
            Every::Month(day) => month_day(d.year(), d.month(), day) == Some(d),
        }
    }

    /// When the next run after `now` is due (within the next two months).
    pub fn next_due(&self, now: Timestamp, tz: &jiff::tz::TimeZone) -> Option<Timestamp> {
        let mut d = now.0.to_zoned(tz.clone()).date();
        for _ in 0..64 {
            if self.runs_on(d) {
                let due = d
                    .at(self.hour, self.minute, 0, 0)
                    .to_zoned(tz.clone())
                    .ok()?
                    .timestamp();
                if due > now.0 {
                    return Some(Timestamp(due));
                }
            }
            d = d.tomorrow().ok()?;
        }
        None
    }
}

/// `day` of a month, or its last day when it is shorter.
fn month_day(year: i16, month: i8, day: i8) -> Option<jiff::civil::Date> {
    let first = jiff::civil::Date::new(year, month, 1).ok()?;
    jiff::civil::Date::new(year, month, day.min(first.days_in_month())).ok()
}

/// What a rendering shows: the reference's JSON model plus the column names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReportTable {
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub generated_at: Timestamp,
    pub window_days: u32,
    /// The name column's heading, then one per value.
    pub columns: Vec<String>,
    pub rows: Vec<ReportRow>,
    pub totals: Map<String, Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReportRow {
    pub name: String,
    /// One per column after the name.
    pub values: Vec<String>,
    /// `ok`, `warning` or `critical` (how the HTML colours the row); empty for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub class: String,
}

/// The formats a report renders to; `pdf` is refused (501 `svc:reports/pdf`).
pub const FORMATS: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("json", "application/json"),
];

/// One archived rendering (its content is downloaded separately).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ArchivedReport {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub report: String,
    /// The period it was made for (`2026-11-24`), or `manual-<ms>` for a run on request.
    pub slot: String,
    pub format: String,
    pub content_type: String,
    pub generated_at: Timestamp,
    pub bytes: u64,
    /// Addresses it was queued to be mailed to.
    #[serde(default)]
    pub mailed_to: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp(s.parse().unwrap())
    }

    #[test]
    fn the_schedule_grammar_reads_the_references_forms() {
        let s: ReportSchedule = "daily".parse().unwrap();
        assert_eq!((s.every, s.hour, s.minute), (Every::Day, 7, 0));
        let s: ReportSchedule = "weekly:fri@16:30".parse().unwrap();
        assert_eq!((s.every, s.hour, s.minute), (Every::Week(5), 16, 30));
        let s: ReportSchedule = "monthly:31@00:05".parse().unwrap();
        assert_eq!(s.every, Every::Month(31));
        for bad in [
            "hourly",
            "daily@25:00",
            "weekly:someday",
            "monthly:0",
            "daily@7",
        ] {
            assert!(bad.parse::<ReportSchedule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_slot_is_the_latest_period_due() {
        let utc = jiff::tz::TimeZone::UTC;
        let daily: ReportSchedule = "daily@07:00".parse().unwrap();
        assert_eq!(
            daily.slot(at("2026-11-24T06:59:00Z"), &utc).unwrap().0,
            "2026-11-23"
        );
        let (slot, due) = daily.slot(at("2026-11-24T07:00:00Z"), &utc).unwrap();
        assert_eq!(
            (slot.as_str(), due),
            ("2026-11-24", at("2026-11-24T07:00:00Z"))
        );
        // 2026-11-24 is a Tuesday: the Friday run is the one of the 20th.
        let weekly: ReportSchedule = "weekly:fri".parse().unwrap();
        assert_eq!(
            weekly.slot(at("2026-11-24T12:00:00Z"), &utc).unwrap().0,
            "2026-11-20"
        );
        // The 31st of a 30-day month runs on the 30th; before it, October's 31st is due.
        let monthly: ReportSchedule = "monthly:31".parse().unwrap();
        assert_eq!(
            monthly.slot(at("2026-11-29T12:00:00Z"), &utc).unwrap().0,
            "2026-10-31"
        );
        assert_eq!(
            monthly.slot(at("2026-11-30T08:00:00Z"), &utc).unwrap().0,
            "2026-11-30"
        );
        assert_eq!(
            monthly.next_due(at("2026-11-30T08:00:00Z"), &utc),
            Some(at("2026-12-31T07:00:00Z"))
        );
        assert_eq!(
            weekly.next_due(at("2026-11-24T12:00:00Z"), &utc),
            Some(at("2026-11-27T07:00:00Z"))
        );
        assert_eq!(
            daily.next_due(at("2026-11-24T07:00:00Z"), &utc),
            Some(at("2026-11-25T07:00:00Z")),
            "the run due now is the current slot's, not the next"
        );
        // Local time: 07:00 in Berlin is 06:00 UTC in winter.
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(
            daily.next_due(at("2026-11-24T05:00:00Z"), &berlin),
            Some(at("2026-11-24T06:00:00Z"))
        );
    }

    #[test]
    fn params_default_and_refuse_what_cannot_be_read() {
        let p = ReportParams::of(&Map::new()).unwrap();
        assert_eq!((p.window_days, p.target), (30, 99.9));
        let bad: Map<String, Value> = serde_json::from_str(r#"{"windowDays": 0}"#).unwrap();
        assert!(ReportParams::of(&bad).unwrap_err().contains("windowDays"));
    }
}
