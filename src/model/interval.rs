//! Recurring windows in Alertmanager's `time_intervals` shape: each interval narrows time by
//! `times` of day, `weekdays`, `daysOfMonth`, `months` and `years` (a list left out or empty
//! matches all), read on the wall clock of its `location` (default UTC). A set of intervals
//! holds at a moment when any of them does. Downtimes recur by them, and rules and
//! escalation policies name them (the `time-intervals` kind) to mute or to page only within.

use super::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

/// Alertmanager's `time_interval`; its snake_case field names are accepted too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeInterval {
    /// Times of day, `startTime` inclusive to `endTime` exclusive (`HH:MM`, `24:00` as an
    /// end); none: the whole day.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times: Vec<TimeOfDayRange>,
    /// `monday`, or a range `monday:friday`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weekdays: Vec<String>,
    /// `1`, `-1` (the last day), or a range `1:5`, `-3:-1`.
    #[serde(
        default,
        alias = "days_of_month",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub days_of_month: Vec<String>,
    /// `1`-`12` or names, or a range `may:august`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub months: Vec<String>,
    /// `2027`, or a range `2027:2029`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub years: Vec<String>,
    /// An IANA time zone (`Europe/Berlin`), `UTC` (the default) or `Local` (the server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeOfDayRange {
    #[serde(alias = "start_time")]
    pub start_time: String,
    #[serde(alias = "end_time")]
    pub end_time: String,
}

impl From<&str> for TimeOfDayRange {
    /// `22:00-24:00` as typed in a form or on the command line; checked where intervals are
    /// (an end left out is refused there, naming `times`).
    fn from(text: &str) -> Self {
        let (start, end) = text.split_once('-').unwrap_or((text, ""));
        TimeOfDayRange {
            start_time: start.trim().into(),
            end_time: end.trim().into(),
        }
    }
}

/// The body of a `time-intervals` document: the intervals its name stands for.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedTimeIntervals {
    #[serde(alias = "time_intervals")]
    pub time_intervals: Vec<TimeInterval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One occurrence of a recurring window, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Window {
    pub start: Timestamp,
    pub end: Timestamp,
}

/// What a rule or an escalation policy names: intervals during which it does not page, and
/// intervals outside which it does not page (Alertmanager's route fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntervalNames {
    #[serde(default)]
    pub mute_time_intervals: Vec<String>,
    #[serde(default)]
    pub active_time_intervals: Vec<String>,
}

impl IntervalNames {
    pub fn is_empty(&self) -> bool {
        self.mute_time_intervals.is_empty() && self.active_time_intervals.is_empty()
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// How far ahead occurrences are looked for (a `years` range may start years ahead).
const HORIZON_DAYS: i32 = 5 * 366;

/// How far back the window `from` lies in is looked for: a longer one shows this later a
/// start.
const LOOK_BACK_DAYS: i32 = 7;

/// An interval checked once: ranges as numbers, the zone opened.
#[derive(Clone, Debug)]
struct Compiled {
    /// Minutes of the day, `[start, end)`.
    times: Vec<(i32, i32)>,
    /// Monday 1 to Sunday 7.
    weekdays: Vec<(i8, i8)>,
    /// Negative counts from the month's end.
    days: Vec<(i8, i8)>,
    months: Vec<(i8, i8)>,
    years: Vec<(i16, i16)>,
    zone: TimeZone,
}

/// A set of intervals, checked: holds when any of them holds.
#[derive(Clone, Debug, Default)]
pub struct Recurrence(Vec<Compiled>);

/// `a` or `a:b` as two bounds, each read by `bound`.
fn range<T: Copy>(raw: &str, bound: impl Fn(&str) -> Option<T>) -> Option<(T, T)> {
    match raw.split_once(':') {
        Some((a, b)) => Some((bound(a.trim())?, bound(b.trim())?)),
        None => bound(raw.trim()).map(|v| (v, v)),
    }
}

fn name_or_number(names: &[&str], raw: &str) -> Option<i8> {
    let lower = raw.to_ascii_lowercase();
    names
        .iter()
        .position(|n| *n == lower)
        .and_then(|i| i8::try_from(i + 1).ok())
        .or_else(|| {
            raw.parse::<i8>()
                .ok()
                .filter(|n| (1..=i8::try_from(names.len()).unwrap_or(0)).contains(n))
        })
}

fn minutes(raw: &str) -> Option<i32> {
    let (h, m) = raw.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    ((0..60).contains(&m) && ((0..24).contains(&h) || (h == 24 && m == 0))).then_some(h * 60 + m)
}

/// A zone by name: `UTC`, `Local` (the server's) or an IANA name.
fn zone(name: Option<&str>) -> Option<TimeZone> {
    match name.unwrap_or("UTC") {
        "" | "UTC" => Some(TimeZone::UTC),
        "Local" => Some(TimeZone::system()),
        other => TimeZone::get(other).ok(),
    }
}

impl TimeInterval {
    /// Checks every field; the error names the field (`times`, `weekdays`, ...) and says why.
    fn compile(&self) -> Result<Compiled, (&'static str, String)> {
        let mut times = Vec::new();
        for t in &self.times {
            match (minutes(&t.start_time), minutes(&t.end_time)) {
                (Some(a), Some(b)) if a < b => times.push((a, b)),
                _ => {
                    return Err((
                        "times",
                        format!(
                            "{}-{}: times are HH:MM, the start before the end within one day (24:00 may end it)",
                            t.start_time, t.end_time
                        ),
                    ));
                }
            }
        }
        let ordered = |field: &'static str, raw: &str, found: Option<(i8, i8)>| {
            found.filter(|(a, b)| a <= b).ok_or_else(|| {
                (
                    field,
                    format!("{raw:?} is not a {field} value or ordered range"),
                )
            })
        };
        let weekdays = self
            .weekdays
            .iter()
            .map(|w| {
                ordered(
                    "weekdays",
                    w,
                    range(w, |d| {
                        super::timeperiod::weekday(d)
                            .filter(|_| d.len() > 3)
                            .and_then(|i| i8::try_from(i + 1).ok())
                    }),
                )
            })
            .collect::<Result<_, _>>()?;
        let day = |d: &str| {
            d.parse::<i8>()
                .ok()
                .filter(|n| *n != 0 && (-31..=31).contains(n))
        };
        // Ordered as in a 31-day month: `1:-1` is the whole month, `-1:5` nothing.
        let on_31 = |n: i8| if n < 0 { 32 + n } else { n };
        let days = self
            .days_of_month
            .iter()
            .map(|d| {
                range(d, day)
                    .filter(|(a, b)| on_31(*a) <= on_31(*b))
                    .ok_or_else(|| {
                        (
                            "daysOfMonth",
                            format!("{d:?} is not a day of the month (1 to 31, -1 the last) or an ordered range"),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        let months = self
            .months
            .iter()
            .map(|m| ordered("months", m, range(m, |v| name_or_number(&MONTHS, v))))
            .collect::<Result<_, _>>()?;
        let years = self
            .years
            .iter()
            .map(|y| {
                range(y, |v| {
                    v.parse::<i16>().ok().filter(|n| (1970..=9999).contains(n))
                })
                .filter(|(a, b)| a <= b)
                .ok_or_else(|| ("years", format!("{y:?} is not a year or an ordered range")))
            })
            .collect::<Result<_, _>>()?;
        let zone = zone(self.location.as_deref()).ok_or_else(|| {
            (
                "location",
                format!(
                    "unknown time zone {:?}",
                    self.location.as_deref().unwrap_or("")
                ),
            )
        })?;
        Ok(Compiled {
            times,
            weekdays,
            days,
            months,
            years,
            zone,
        })
    }
}

impl Compiled {
    /// Whether the day `date` is one of its days.
    fn on(&self, date: Date) -> bool {
        let within = |ranges: &[(i8, i8)], v: i8| {
            ranges.is_empty() || ranges.iter().any(|(a, b)| *a <= v && v <= *b)
        };
        let last = date.days_in_month();
        let day = |n: i8| if n < 0 { last + n + 1 } else { n };
        within(&self.weekdays, date.weekday().to_monday_one_offset())
            && within(&self.months, date.month())
            && (self.years.is_empty()
                || self
                    .years
                    .iter()
                    .any(|(a, b)| *a <= date.year() && date.year() <= *b))
            && (self.days.is_empty()
                || self.days.iter().any(|(a, b)| {
                    let (a, b) = (day(*a).max(1), day(*b).min(last));
                    a <= date.day() && date.day() <= b
                }))
    }

    fn contains(&self, at: Timestamp) -> bool {
        let local = at.0.to_zoned(self.zone.clone());
        let minute = i32::from(local.hour()) * 60 + i32::from(local.minute());
        self.on(local.date())
            && (self.times.is_empty()
                || self.times.iter().any(|(a, b)| *a <= minute && minute < *b))
    }

    /// The instant a minute of the day `date` is on its wall clock (`1440`: the next day's
    /// midnight; a minute a DST change skips is the first one after the change).
    fn instant(&self, date: Date, minute: i32) -> Option<Timestamp> {
        let (date, minute) = if minute >= 1440 {
            (date.tomorrow().ok()?, minute - 1440)
        } else {
            (date, minute)
        };
        let hour = i8::try_from(minute / 60).ok()?;
        let min = i8::try_from(minute % 60).ok()?;
        let dt: DateTime = date.at(hour, min, 0, 0);
        dt.to_zoned(self.zone.clone())
            .ok()
            .map(|z| Timestamp(z.timestamp()))
    }

    /// Its windows on the day `date`.
    fn windows_on(&self, date: Date, out: &mut Vec<Window>) {
        if !self.on(date) {
            return;
        }
        let whole = [(0, 1440)];
        let ranges = if self.times.is_empty() {
            &whole[..]
        } else {
            &self.times[..]
        };
        for (a, b) in ranges {
            if let (Some(start), Some(end)) = (self.instant(date, *a), self.instant(date, *b))
                && start < end
            {
                out.push(Window { start, end });
            }
        }
    }
}

impl Recurrence {
    /// The intervals checked; the error names the field of the first one wrong.
    pub fn new(intervals: &[TimeInterval]) -> Result<Recurrence, (&'static str, String)> {
        intervals
            .iter()
            .map(TimeInterval::compile)
            .collect::<Result<_, _>>()
            .map(Recurrence)
    }

    /// Stored intervals (checked when saved); one no longer readable holds never.
    pub fn stored(intervals: &[TimeInterval]) -> Recurrence {
        Recurrence(intervals.iter().filter_map(|i| i.compile().ok()).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, at: Timestamp) -> bool {
        self.0.iter().any(|c| c.contains(at))
    }

    /// Up to `count` windows, those that touch or overlap joined, that end after `from`, in
    /// order; looked for up to five years ahead (an interval that always holds gives one
    /// window to that horizon).
    pub fn windows(&self, from: Timestamp, count: usize) -> Vec<Window> {
        let firsts: Vec<Date> = self
            .0
            .iter()
            .filter_map(|c| {
                from.0
                    .to_zoned(c.zone.clone())
                    .date()
                    .checked_sub(jiff::Span::new().days(LOOK_BACK_DAYS))
                    .ok()
            })
            .collect();
        let mut found: Vec<Window> = Vec::new();
        let mut joined: Vec<Window> = Vec::new();
        for offset in 0..HORIZON_DAYS + LOOK_BACK_DAYS {
            let before = found.len();
            for (c, first) in self.0.iter().zip(&firsts) {
                if let Ok(date) = first.checked_add(jiff::Span::new().days(offset)) {
                    c.windows_on(date, &mut found);
                }
            }
            if found.len() == before {
                continue;
            }
            joined = join(&mut found, from);
            // One more than asked, so the last asked for cannot grow by a later day.
            if joined.len() > count {
                break;
            }
        }
        joined.truncate(count);
        joined
    }

    /// When it next begins or ends holding after `at`: the end of the window `at` is in, else
    /// the start of the next one.
    pub fn next_change(&self, at: Timestamp) -> Option<Timestamp> {
        let w = self.windows(at, 1).into_iter().next()?;
        Some(if w.start <= at { w.end } else { w.start })
    }
}

/// The windows sorted, those that touch or overlap joined, those over by `from` dropped.
fn join(found: &mut [Window], from: Timestamp) -> Vec<Window> {
    found.sort_by_key(|w| w.start);
    let mut joined: Vec<Window> = Vec::new();
    for w in found.iter() {
        match joined.last_mut() {
            Some(last) if w.start <= last.end => last.end = last.end.max(w.end),
            _ => joined.push(*w),
        }
    }
    joined.retain(|w| w.end > from);
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn intervals(v: serde_json::Value) -> Recurrence {
        let list: Vec<TimeInterval> = serde_json::from_value(v).unwrap();
        Recurrence::new(&list).unwrap()
    }

    #[test]
    fn saturday_night_in_berlin_follows_the_wall_clock_across_dst() {
        let r = intervals(serde_json::json!([{
            "times": [{"startTime": "22:00", "endTime": "24:00"}],
            "weekdays": ["saturday"],
            "location": "Europe/Berlin"
        }]));
        // Berlin moves to summer time on Sunday 2027-03-28.
        assert!(!r.contains(at("2027-03-20T20:59:00Z")), "21:59 CET");
        assert!(r.contains(at("2027-03-20T21:00:00Z")), "22:00 CET");
        assert!(r.contains(at("2027-04-03T20:00:00Z")), "22:00 CEST");
        assert!(!r.contains(at("2027-04-03T22:00:00Z")), "Sunday 00:00 CEST");
        let w = r.windows(at("2027-03-20T12:00:00Z"), 3);
        assert_eq!(
            w,
            vec![
                Window {
                    start: at("2027-03-20T21:00:00Z"),
                    end: at("2027-03-20T23:00:00Z")
                },
                Window {
                    start: at("2027-03-27T21:00:00Z"),
                    end: at("2027-03-27T23:00:00Z")
                },
                Window {
                    start: at("2027-04-03T20:00:00Z"),
                    end: at("2027-04-03T22:00:00Z")
                },
            ]
        );
        assert_eq!(
            r.next_change(at("2027-03-20T22:00:00Z")),
            Some(at("2027-03-20T23:00:00Z"))
        );
    }

    #[test]
    fn a_night_across_midnight_and_the_dst_gap_is_one_window() {
        let r = intervals(serde_json::json!([{
            "times": [{"start_time": "22:00", "end_time": "24:00"}],
            "weekdays": ["saturday"],
            "location": "Europe/Berlin"
        }, {
            "times": [{"startTime": "00:00", "endTime": "06:00"}],
            "weekdays": ["sunday"],
            "location": "Europe/Berlin"
        }]));
        // 22:00 CET to 06:00 CEST is seven hours.
        let w = r.windows(at("2027-03-27T00:00:00Z"), 1);
        assert_eq!(
            w,
            vec![Window {
                start: at("2027-03-27T21:00:00Z"),
                end: at("2027-03-28T04:00:00Z")
            }]
        );
    }

    #[test]
    fn days_of_month_months_and_years() {
        let r = intervals(serde_json::json!([{
            "daysOfMonth": ["-1"],
            "months": ["february", "12"],
            "years": ["2027:2028"]
        }]));
        assert!(r.contains(at("2027-02-28T10:00:00Z")));
        assert!(!r.contains(at("2027-02-27T10:00:00Z")));
        assert!(r.contains(at("2028-02-29T10:00:00Z")), "leap year");
        assert!(r.contains(at("2027-12-31T23:59:00Z")));
        assert!(!r.contains(at("2029-02-28T10:00:00Z")));
        assert!(!r.contains(at("2027-03-31T10:00:00Z")));
        let whole = intervals(serde_json::json!([{"daysOfMonth": ["1:-1"]}]));
        assert!(whole.contains(at("2027-01-15T00:00:00Z")));
        let w = r.windows(at("2026-12-04T00:00:00Z"), 2);
        assert_eq!(w[0].start, at("2027-02-28T00:00:00Z"));
        assert_eq!(w[0].end, at("2027-03-01T00:00:00Z"));
        assert_eq!(w[1].start, at("2027-12-31T00:00:00Z"));
        assert!(
            intervals(serde_json::json!([{"years": ["2020"]}]))
                .windows(at("2026-12-04T00:00:00Z"), 1)
                .is_empty()
        );
    }

    #[test]
    fn weekday_ranges_join_into_one_window() {
        let r = intervals(serde_json::json!([{"weekdays": ["monday:friday"]}]));
        // 2026-12-04 is a Friday.
        let w = r.windows(at("2026-12-04T12:00:00Z"), 2);
        assert_eq!(w[0].start, at("2026-11-30T00:00:00Z"));
        assert_eq!(w[0].end, at("2026-12-05T00:00:00Z"));
        assert_eq!(w[1].start, at("2026-12-07T00:00:00Z"));
        assert_eq!(
            r.next_change(at("2026-12-05T01:00:00Z")),
            Some(at("2026-12-07T00:00:00Z"))
        );
    }

    #[test]
    fn wrong_fields_are_named() {
        let wrong = |v: serde_json::Value| {
            let list: Vec<TimeInterval> = serde_json::from_value(v).unwrap();
            Recurrence::new(&list).unwrap_err().0
        };
        use serde_json::json;
        assert_eq!(
            wrong(json!([{"times": [{"startTime": "23:00", "endTime": "01:00"}]}])),
            "times"
        );
        assert_eq!(
            wrong(json!([{"times": [{"startTime": "9:00", "endTime": "10:00"}]}])),
            "times"
        );
        assert_eq!(wrong(json!([{"weekdays": ["friday:monday"]}])), "weekdays");
        assert_eq!(wrong(json!([{"weekdays": ["fri"]}])), "weekdays");
        assert_eq!(wrong(json!([{"daysOfMonth": ["0"]}])), "daysOfMonth");
        assert_eq!(wrong(json!([{"daysOfMonth": ["-1:5"]}])), "daysOfMonth");
        assert_eq!(wrong(json!([{"months": ["13"]}])), "months");
        assert_eq!(wrong(json!([{"years": ["2029:2027"]}])), "years");
        assert_eq!(wrong(json!([{"location": "Mars/Olympus"}])), "location");
    }
}
