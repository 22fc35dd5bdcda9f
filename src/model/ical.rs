//! The windows of an iCalendar feed (RFC 5545) for a downtime's `calendarUrl`: each `VEVENT`'s
//! `DTSTART` to `DTEND` (or `DURATION`; an all-day event lasts its days), repeated by its
//! `RRULE` (`FREQ` daily, weekly, monthly or yearly with `INTERVAL`, `COUNT`, `UNTIL`, and
//! `BYDAY` for weekly ones) less its `EXDATE`s, on the wall clock of its `TZID` (none, or one
//! not known: UTC). A cancelled event counts for nothing; an event whose rule asks for more
//! than this reads is left out and named in the warnings.

use super::Timestamp;
use super::interval::Window;
use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::TimeZone;
use jiff::{Span, ToSpan};

/// An iCalendar feed read: its windows in the range asked for, and what it could not read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Feed {
    pub windows: Vec<Window>,
    pub warnings: Vec<String>,
}

/// Occurrences of one event looked at, at most (a rule without an end stops here).
const MAX_OCCURRENCES: usize = 10_000;

/// A property: its name, parameters and value.
struct Property<'a> {
    name: String,
    params: Vec<(String, &'a str)>,
    value: &'a str,
}

impl<'a> Property<'a> {
    fn parse(line: &'a str) -> Option<Property<'a>> {
        let colon = line.find(':')?;
        let (head, value) = (&line[..colon], &line[colon + 1..]);
        let mut parts = head.split(';');
        let name = parts.next()?.trim().to_ascii_uppercase();
        let params = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_uppercase(), v.trim_matches('"')))
            .collect();
        Some(Property {
            name,
            params,
            value,
        })
    }

    fn param(&self, name: &str) -> Option<&'a str> {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }
}

/// A date or date-time value on its zone's wall clock; `date_only` for `VALUE=DATE`.
#[derive(Clone)]
struct When {
    at: DateTime,
    zone: TimeZone,
    date_only: bool,
}

fn when(p: &Property<'_>, warnings: &mut Vec<String>) -> Option<When> {
    let raw = p.value.trim();
    let (raw, utc) = match raw.strip_suffix('Z') {
        Some(r) => (r, true),
        None => (raw, false),
    };
    let zone = if utc {
        TimeZone::UTC
    } else {
        match p.param("TZID") {
            Some(id) => TimeZone::get(id).unwrap_or_else(|_| {
                warnings.push(format!("time zone {id:?} is not known: read as UTC"));
                TimeZone::UTC
            }),
            None => TimeZone::UTC,
        }
    };
    let number = |s: &str| s.parse::<i16>().ok();
    let date = |s: &str| -> Option<Date> {
        if s.len() != 8 {
            return None;
        }
        Date::new(
            number(&s[..4])?,
            i8::try_from(number(&s[4..6])?).ok()?,
            i8::try_from(number(&s[6..8])?).ok()?,
        )
        .ok()
    };
    match raw.split_once('T') {
        None => Some(When {
            at: date(raw)?.at(0, 0, 0, 0),
            zone,
            date_only: true,
        }),
        Some((d, t)) if t.len() == 6 => {
            let part = |i: usize| number(&t[i..i + 2]).and_then(|n| i8::try_from(n).ok());
            let at = DateTime::new(
                date(d)?.year(),
                date(d)?.month(),
                date(d)?.day(),
                part(0)?,
                part(2)?,
                part(4)?.min(59),
                0,
            )
            .ok()?;
            Some(When {
                at,
                zone,
                date_only: false,
            })
        }
        _ => None,
    }
}

impl When {
    fn instant(&self, at: DateTime) -> Option<Timestamp> {
        at.to_zoned(self.zone.clone())
            .ok()
            .map(|z| Timestamp(z.timestamp()))
    }
}

/// A rule this reads: its frequency, interval, end and weekdays.
struct Rule {
    step: Span,
    count: Option<usize>,
    until: Option<DateTime>,
    weekdays: Vec<Weekday>,
}

fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}

fn rule(raw: &str, start: &When, warnings: &mut Vec<String>) -> Option<Rule> {
    let mut freq = None;
    let (mut interval, mut count, mut until, mut weekdays) = (1i64, None, None, Vec::new());
    for part in raw.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=')?;
        match k.to_ascii_uppercase().as_str() {
            "FREQ" => freq = Some(v.to_ascii_uppercase()),
            "INTERVAL" => interval = v.parse().ok().filter(|n| *n > 0)?,
            "COUNT" => count = v.parse().ok(),
            "UNTIL" => {
                let p = Property {
                    name: "UNTIL".into(),
                    params: Vec::new(),
                    value: v,
                };
                let end = when(&p, warnings)?;
                // UNTIL in UTC is compared on the event's own wall clock.
                let instant = end.instant(end.at)?;
                until = Some(instant.0.to_zoned(start.zone.clone()).datetime());
            }
            "BYDAY" => {
                weekdays = v
                    .split(',')
                    .map(|d| weekday(d.trim()))
                    .collect::<Option<Vec<_>>>()?;
            }
            "WKST" => {}
            other => {
                warnings.push(format!(
                    "RRULE part {other} is not read: the event is left out"
                ));
                return None;
            }
        }
    }
    let step = match freq.as_deref()? {
        "DAILY" => interval.days(),
        "WEEKLY" => interval.weeks(),
        "MONTHLY" => interval.months(),
        "YEARLY" => interval.years(),
        other => {
            warnings.push(format!(
                "RRULE FREQ={other} is not read: the event is left out"
            ));
            return None;
        }
    };
    if !weekdays.is_empty() && freq.as_deref() != Some("WEEKLY") {
        warnings.push("RRULE BYDAY is read for weekly rules only: the event is left out".into());
        return None;
    }
    Some(Rule {
        step,
        count,
        until,
        weekdays,
    })
}

/// The starts of one event's occurrences on its wall clock, in order, up to `until`.
fn starts(start: &When, rule: Option<&Rule>, until: DateTime) -> Vec<DateTime> {
    let Some(rule) = rule else {
        return vec![start.at];
    };
    let mut out = Vec::new();
    let limit = rule.count.unwrap_or(MAX_OCCURRENCES).min(MAX_OCCURRENCES);
    let last = rule.until.map_or(until, |u| u.min(until));
    for n in 0..MAX_OCCURRENCES {
        let Ok(base) = start.at.checked_add(
            rule.step
                .checked_mul(i64::try_from(n).unwrap_or(0))
                .unwrap_or_default(),
        ) else {
            break;
        };
        // A weekly rule's weekdays within the week of `base` (Monday first), else `base`.
        let mut week: Vec<DateTime> = if rule.weekdays.is_empty() {
            vec![base]
        } else {
            let monday = base
                .date()
                .checked_sub(i64::from(base.date().weekday().to_monday_zero_offset()).days())
                .unwrap_or(base.date());
            rule.weekdays
                .iter()
                .filter_map(|d| {
                    monday
                        .checked_add(i64::from(d.to_monday_zero_offset()).days())
                        .ok()
                })
                .map(|d| d.to_datetime(base.time()))
                .filter(|at| *at >= start.at)
                .collect()
        };
        week.sort();
        if base
            .date()
            .checked_sub(7.days())
            .is_ok_and(|d| d.to_datetime(base.time()) > last)
        {
            break;
        }
        for at in week {
            if at > last || out.len() >= limit {
                return out;
            }
            out.push(at);
        }
    }
    out
}

/// The windows of the feed `text` that end after `from` and start before `until`, sorted, at
/// most `cap` (the earliest).
pub fn windows(text: &str, from: Timestamp, until: Timestamp, cap: usize) -> Result<Feed, String> {
    let unfolded = text
        .replace("\r\n", "\n")
        .replace("\n ", "")
        .replace("\n\t", "");
    if !unfolded.trim_start().starts_with("BEGIN:VCALENDAR") {
        return Err("not an iCalendar feed (no BEGIN:VCALENDAR)".into());
    }
    let mut feed = Feed::default();
    let mut event: Option<Vec<Property<'_>>> = None;
    for line in unfolded.lines() {
        let Some(p) = Property::parse(line) else {
            continue;
        };
        match (p.name.as_str(), p.value.trim()) {
            ("BEGIN", "VEVENT") => event = Some(Vec::new()),
            ("END", "VEVENT") => {
                if let Some(props) = event.take() {
                    event_windows(&props, from, until, &mut feed);
                }
            }
            _ => {
                if let Some(props) = event.as_mut() {
                    props.push(p);
                }
            }
        }
    }
    feed.windows.sort_by_key(|w| w.start);
    feed.windows.truncate(cap);
    Ok(feed)
}

fn event_windows(props: &[Property<'_>], from: Timestamp, until: Timestamp, feed: &mut Feed) {
    let get = |name: &str| props.iter().find(|p| p.name == name);
    if get("STATUS").is_some_and(|p| p.value.trim().eq_ignore_ascii_case("CANCELLED")) {
        return;
    }
    let summary = get("SUMMARY").map_or("an event", |p| p.value.trim());
    let warnings = &mut feed.warnings;
    let Some(start) = get("DTSTART").and_then(|p| when(p, warnings)) else {
        warnings.push(format!("{summary}: no DTSTART it can read"));
        return;
    };
    let length: Span = if let Some(end) = get("DTEND").and_then(|p| when(p, warnings)) {
        match start.at.until(end.at) {
            Ok(span) => span,
            Err(_) => return,
        }
    } else if let Some(d) = get("DURATION") {
        match d.value.trim().parse::<Span>() {
            Ok(span) => span,
            Err(_) => {
                warnings.push(format!("{summary}: DURATION {:?} is not read", d.value));
                return;
            }
        }
    } else if start.date_only {
        1.day()
    } else {
        return;
    };
    let rule = match get("RRULE") {
        Some(r) => match rule(r.value.trim(), &start, warnings) {
            Some(rule) => Some(rule),
            None => return,
        },
        None => None,
    };
    let excluded: Vec<DateTime> = props
        .iter()
        .filter(|p| p.name == "EXDATE")
        .flat_map(|p| {
            p.value.split(',').filter_map(|v| {
                let one = Property {
                    name: "EXDATE".into(),
                    params: p.params.clone(),
                    value: v,
                };
                let w = when(&one, &mut Vec::new())?;
                let instant = w.instant(w.at)?;
                Some(instant.0.to_zoned(start.zone.clone()).datetime())
            })
        })
        .collect();
    let last = until.0.to_zoned(start.zone.clone()).datetime();
    for at in starts(&start, rule.as_ref(), last) {
        if excluded.contains(&at) {
            continue;
        }
        let (Some(s), Some(e)) = (
            start.instant(at),
            at.checked_add(length)
                .ok()
                .and_then(|end| start.instant(end)),
        ) else {
            continue;
        };
        if s < e && e > from && s < until {
            feed.windows.push(Window { start: s, end: e });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const FEED: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n\
BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:PLC backup\r\n\
DTSTART;TZID=Europe/Berlin:20270320T220000\r\nDTEND;TZID=Europe/Berlin:20270321T000000\r\n\
RRULE:FREQ=WEEKLY;BYDAY=SA;COUNT=4\r\nEXDATE;TZID=Europe/Berlin:20270327T220000\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:2\r\nSUMMARY:Switch firmware\r\nDTSTART:20270402T060000Z\r\nDURATION:PT1H30M\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:3\r\nSUMMARY:Called off\r\nSTATUS:CANCELLED\r\nDTSTART:20270401T060000Z\r\nDURATION:PT1H\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:4\r\nSUMMARY:Holiday\r\nDTSTART;VALUE=DATE:20270405\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:5\r\nSUMMARY:Odd\r\nDTSTART:20270406T060000Z\r\nDURATION:PT1H\r\n\
RRULE:FREQ=MONTHLY;BYSETPOS=-1\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    #[test]
    fn events_rules_exceptions_and_zones_become_windows() {
        let feed = windows(
            FEED,
            at("2027-03-01T00:00:00Z"),
            at("2027-06-01T00:00:00Z"),
            100,
        )
        .unwrap();
        let w = |s: &str, e: &str| Window {
            start: at(s),
            end: at(e),
        };
        assert_eq!(
            feed.windows,
            vec![
                w("2027-03-20T21:00:00Z", "2027-03-20T23:00:00Z"),
                // 2027-03-27 is excluded; Berlin is on summer time from the 28th.
                w("2027-04-02T06:00:00Z", "2027-04-02T07:30:00Z"),
                w("2027-04-03T20:00:00Z", "2027-04-03T22:00:00Z"),
                w("2027-04-05T00:00:00Z", "2027-04-06T00:00:00Z"),
                w("2027-04-10T20:00:00Z", "2027-04-10T22:00:00Z"),
            ]
        );
        assert_eq!(feed.warnings.len(), 1, "{:?}", feed.warnings);
        assert!(feed.warnings[0].contains("BYSETPOS"));
        let later = windows(
            FEED,
            at("2027-04-04T00:00:00Z"),
            at("2027-04-08T00:00:00Z"),
            100,
        )
        .unwrap();
        assert_eq!(later.windows.len(), 1, "only the holiday: {later:?}");
        assert!(
            windows(
                "<html>",
                at("2027-04-04T00:00:00Z"),
                at("2027-04-08T00:00:00Z"),
                1
            )
            .is_err()
        );
    }

    #[test]
    fn an_endless_daily_rule_stops_at_the_range() {
        let text = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20270101T020000Z\nDTEND:20270101T030000Z\nRRULE:FREQ=DAILY;INTERVAL=2\nEND:VEVENT\nEND:VCALENDAR\n";
        let feed = windows(
            text,
            at("2027-01-01T00:00:00Z"),
            at("2027-01-11T00:00:00Z"),
            100,
        )
        .unwrap();
        assert_eq!(feed.windows.len(), 5);
        assert_eq!(feed.windows[4].start, at("2027-01-09T02:00:00Z"));
        let capped = windows(
            text,
            at("2027-01-01T00:00:00Z"),
            at("2028-01-01T00:00:00Z"),
            3,
        )
        .unwrap();
        assert_eq!(capped.windows.len(), 3);
    }
}
