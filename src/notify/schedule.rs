//! On-call resolution (SEMANTICS 4): who a schedule puts on call at a time, its timeline over
//! a range, the iCalendar feed and the hours per person. At time t the first override covering
//! t wins; else the first layer whose restriction covers t names
//! `participants[(shift index + offset) mod n]` (offset 1 for `escalateTo: backup`, which
//! ignores overrides). Daily and weekly shifts (and custom ones of whole days) hand over at the
//! anchor's wall-clock time in the schedule's zone, so a DST change moves no handover.

use crate::model::Timestamp;
use crate::model::notify::{OnCallShift, Override, Schedule};
use crate::model::timeperiod::{TimePeriod, WEEKDAYS, weekday};
use jiff::tz::TimeZone;
use jiff::{Span, Zoned};
use std::collections::BTreeMap;

/// At most this many handovers are looked at per timeline.
const MAX_POINTS: usize = 20_000;
const DAY_MS: i64 = 86_400_000;

/// A participant: a contact's id and name (or the unresolved reference, twice).
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub id: String,
    pub name: String,
}

enum Length {
    /// Whole days: handovers keep their wall-clock time.
    Days(i64),
    Millis(i64),
}

struct Layer {
    name: Option<String>,
    anchor: Zoned,
    length: Length,
    participants: Vec<Member>,
    restriction: Option<TimePeriod>,
}

pub struct Roster {
    tz: TimeZone,
    layers: Vec<Layer>,
    overrides: Vec<(Override, Member)>,
}

fn ts(z: &Zoned) -> Timestamp {
    Timestamp(z.timestamp())
}

impl Roster {
    /// `member` resolves a participant or override contact (id or name).
    pub fn new(
        schedule: &Schedule,
        overrides: &[Override],
        member: &dyn Fn(&str) -> Member,
    ) -> Roster {
        let tz = TimeZone::get(&schedule.time_zone).unwrap_or(TimeZone::UTC);
        let layers = schedule
            .layers
            .iter()
            .map(|r| {
                let length = match r.unit.as_str() {
                    "daily" => Length::Days(1),
                    "weekly" => Length::Days(7),
                    _ => {
                        let ms = r
                            .length
                            .map_or(DAY_MS, |l| i64::try_from(l.0.as_millis()).unwrap_or(DAY_MS));
                        if ms % DAY_MS == 0 {
                            Length::Days(ms / DAY_MS)
                        } else {
                            Length::Millis(ms.max(60_000))
                        }
                    }
                };
                let restriction = (!r.restriction.is_empty()).then(|| TimePeriod {
                    time_zone: Some(schedule.time_zone.clone()),
                    days: r
                        .restriction
                        .iter()
                        .filter_map(|(d, ranges)| {
                            Some((WEEKDAYS[weekday(d)?].to_string(), ranges.clone()))
                        })
                        .collect(),
                    ..TimePeriod::default()
                });
                Layer {
                    name: r.name.clone(),
                    anchor: r.anchor.0.to_zoned(tz.clone()),
                    length,
                    participants: r.participants.iter().map(|p| member(p)).collect(),
                    restriction,
                }
            })
            .collect();
        let overrides = overrides
            .iter()
            .map(|o| (o.clone(), member(&o.contact_id)))
            .collect();
        Roster {
            tz,
            layers,
            overrides,
        }
    }

    /// The shift of `layer` covering `t`: its index and bounds (none before the anchor).
    fn shift(layer: &Layer, t: Timestamp) -> Option<(i64, Timestamp, Timestamp)> {
        let anchor_ms = layer.anchor.timestamp().as_millisecond();
        let t_ms = t.as_millis();
        if t_ms < anchor_ms {
            return None;
        }
        match layer.length {
            Length::Millis(len) => {
                let k = (t_ms - anchor_ms) / len;
                let start = Timestamp::from_millis(anchor_ms + k * len)?;
                let end = Timestamp::from_millis(anchor_ms + (k + 1) * len)?;
                Some((k, start, end))
            }
            Length::Days(days) => {
                let start_of = |k: i64| -> Option<Zoned> {
                    layer.anchor.checked_add(Span::new().days(k * days)).ok()
                };
                let mut k = (t_ms - anchor_ms) / (days * DAY_MS);
                for _ in 0..4 {
                    if ts(&start_of(k)?) > t {
                        k -= 1;
                    } else if ts(&start_of(k + 1)?) <= t {
                        k += 1;
                    } else {
                        break;
                    }
                }
                Some((k, ts(&start_of(k)?), ts(&start_of(k + 1)?)))
            }
        }
    }

    /// Who is on call at `t`; `backup`: the next in rotation, overrides ignored.
    pub fn at(&self, t: Timestamp, backup: bool) -> Option<OnCallShift> {
        if !backup
            && let Some((o, m)) = self
                .overrides
                .iter()
                .find(|(o, _)| o.start <= t && t < o.end)
        {
            return Some(OnCallShift {
                contact_id: m.id.clone(),
                contact: m.name.clone(),
                start: o.start,
                end: o.end,
                layer: None,
                is_override: true,
            });
        }
        self.layers.iter().enumerate().find_map(|(i, layer)| {
            if layer.participants.is_empty()
                || layer.restriction.as_ref().is_some_and(|r| !r.covers(t))
            {
                return None;
            }
            let (k, start, end) = Self::shift(layer, t)?;
            let n = i64::try_from(layer.participants.len()).ok()?;
            let who =
                &layer.participants[usize::try_from((k + i64::from(backup)).rem_euclid(n)).ok()?];
            Some(OnCallShift {
                contact_id: who.id.clone(),
                contact: who.name.clone(),
                start,
                end,
                layer: Some(
                    layer
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("layer-{}", i + 1)),
                ),
                is_override: false,
            })
        })
    }

    /// Every moment in (`from`, `to`) at which the answer of `at` may change.
    fn change_points(&self, from: Timestamp, to: Timestamp) -> Vec<Timestamp> {
        let mut points = vec![from];
        for (o, _) in &self.overrides {
            points.extend([o.start, o.end]);
        }
        for layer in &self.layers {
            let mut t = from.max(ts(&layer.anchor));
            points.push(t);
            while t < to && points.len() < MAX_POINTS {
                match Self::shift(layer, t) {
                    Some((_, _, end)) if end > t => {
                        points.push(end);
                        t = end;
                    }
                    _ => break,
                }
            }
            if let Some(r) = &layer.restriction {
                let first = from.0.to_zoned(self.tz.clone()).date();
                let last = to.0.to_zoned(self.tz.clone()).date();
                let mut day = first.yesterday().unwrap_or(first);
                while day <= last && points.len() < MAX_POINTS {
                    let name = WEEKDAYS[day.weekday().to_monday_zero_offset() as usize];
                    for range in r.days.get(name).into_iter().flatten() {
                        if let Some((a, b)) = crate::model::timeperiod::parse_range(range) {
                            for minute in [a, b] {
                                let at = day
                                    .to_datetime(jiff::civil::Time::midnight())
                                    .checked_add(Span::new().minutes(i64::from(minute)))
                                    .ok()
                                    .and_then(|dt| dt.to_zoned(self.tz.clone()).ok());
                                points.extend(at.map(|z| ts(&z)));
                            }
                        }
                    }
                    match day.tomorrow() {
                        Ok(next) => day = next,
                        Err(_) => break,
                    }
                }
            }
        }
        points.retain(|p| *p >= from && *p < to);
        points.sort();
        points.dedup();
        points.truncate(MAX_POINTS);
        points
    }

    /// The resolved shifts between `from` and `to`, clipped to the range, gaps left out.
    pub fn timeline(&self, from: Timestamp, to: Timestamp) -> Vec<OnCallShift> {
        let points = self.change_points(from, to);
        let mut out: Vec<OnCallShift> = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let end = points.get(i + 1).copied().unwrap_or(to);
            let Some(mut s) = self.at(*p, false) else {
                continue;
            };
            s.start = *p;
            s.end = end;
            match out.last_mut() {
                Some(last)
                    if last.end == s.start
                        && last.contact_id == s.contact_id
                        && last.layer == s.layer
                        && last.is_override == s.is_override =>
                {
                    last.end = s.end;
                }
                _ => out.push(s),
            }
        }
        out
    }

    /// Hours on call per contact over the shifts, with the weekend's share (Saturday and
    /// Sunday in the schedule's zone) and the number of override shifts.
    pub fn stats(&self, shifts: &[OnCallShift]) -> Vec<serde_json::Value> {
        let mut rows: BTreeMap<(String, String), (f64, f64, u32)> = BTreeMap::new();
        for s in shifts {
            let row = rows
                .entry((s.contact_id.clone(), s.contact.clone()))
                .or_default();
            row.0 += (s.end.as_millis() - s.start.as_millis()) as f64 / 3_600_000.0;
            row.2 += u32::from(s.is_override);
            let mut t = s.start;
            while t < s.end {
                let local = t.0.to_zoned(self.tz.clone());
                let next_day = local
                    .date()
                    .tomorrow()
                    .ok()
                    .and_then(|d| d.to_zoned(self.tz.clone()).ok())
                    .map_or(s.end, |z| ts(&z).min(s.end));
                if local.weekday().to_monday_zero_offset() >= 5 {
                    row.1 += (next_day.as_millis() - t.as_millis()) as f64 / 3_600_000.0;
                }
                if next_day <= t {
                    break;
                }
                t = next_day;
            }
        }
        let round = |h: f64| (h * 100.0).round() / 100.0;
        rows.into_iter()
            .map(|((id, name), (hours, weekend, overrides))| {
                serde_json::json!({
                    "contactId": id,
                    "contact": name,
                    "hours": round(hours),
                    "weekendHours": round(weekend),
                    "overrides": overrides,
                })
            })
            .collect()
    }
}

/// A text value of an iCalendar property (RFC 5545 3.3.11).
/// Line breaks (CR, LF, CRLF) become `\n`; other control characters, which TEXT may not hold,
/// are dropped, so a value can never start a line of its own (a property, a `BEGIN`).
fn ics_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push_str("\\n");
            }
            '\n' => out.push_str("\\n"),
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Folds a content line at 75 octets (RFC 5545 3.1).
fn fold(line: &str, out: &mut String) {
    let mut width = 0;
    for c in line.chars() {
        if width + c.len_utf8() > 75 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += c.len_utf8();
    }
    out.push_str("\r\n");
}

fn ics_time(t: Timestamp) -> String {
    t.0.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// The schedule's shifts as an iCalendar feed calendar applications subscribe to.
pub fn ics(schedule: &str, schedule_id: &str, shifts: &[OnCallShift], now: Timestamp) -> String {
    let mut out = String::new();
    for line in [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//svc//on-call//EN",
        "CALSCALE:GREGORIAN",
        "METHOD:PUBLISH",
    ] {
        fold(line, &mut out);
    }
    fold(
        &format!("X-WR-CALNAME:{}", ics_text(&format!("On call: {schedule}"))),
        &mut out,
    );
    for s in shifts {
        let mut summary = format!("On call: {} ({schedule})", s.contact);
        if s.is_override {
            summary.push_str(" [override]");
        }
        let mut lines = vec![
            "BEGIN:VEVENT".to_string(),
            // Every property's value is TEXT-escaped, the UID too: a participant's id is the
            // operator's text and must not end the line.
            format!(
                "UID:{}",
                ics_text(&format!(
                    "{schedule_id}-{}-{}@svc",
                    s.start.as_millis(),
                    s.contact_id
                ))
            ),
            format!("DTSTAMP:{}", ics_time(now)),
            format!("DTSTART:{}", ics_time(s.start)),
            format!("DTEND:{}", ics_time(s.end)),
            format!("SUMMARY:{}", ics_text(&summary)),
        ];
        if let Some(layer) = &s.layer {
            lines.push(format!(
                "DESCRIPTION:{}",
                ics_text(&format!("layer {layer}"))
            ));
        }
        lines.push("END:VEVENT".into());
        for l in lines {
            fold(&l, &mut out);
        }
    }
    fold("END:VCALENDAR", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn roster(schedule: serde_json::Value, overrides: &[Override]) -> Roster {
        let s: Schedule = serde_json::from_value(schedule).unwrap();
        Roster::new(&s, overrides, &|p| Member {
            id: format!("id-{p}"),
            name: p.to_string(),
        })
    }

    #[test]
    fn weekly_handover_keeps_its_wall_clock_time_across_dst() {
        // Monday 2026-03-23 09:00 in Berlin (UTC+1); DST starts on Sunday 2026-03-29.
        let r = roster(
            json!({"timeZone": "Europe/Berlin", "layers": [{
                "anchor": "2026-03-23T08:00:00Z", "unit": "weekly",
                "participants": ["ada", "bob"]}]}),
            &[],
        );
        let first = r.at(at("2026-03-25T12:00:00Z"), false).unwrap();
        assert_eq!(first.contact, "ada");
        assert_eq!(
            first.end,
            at("2026-03-30T07:00:00Z"),
            "09:00 CEST is 07:00 UTC"
        );
        assert_eq!(
            r.at(at("2026-03-30T06:59:00Z"), false).unwrap().contact,
            "ada"
        );
        let second = r.at(at("2026-03-30T07:00:00Z"), false).unwrap();
        assert_eq!(second.contact, "bob");
        assert_eq!(second.start, at("2026-03-30T07:00:00Z"));
        assert_eq!(
            r.at(at("2026-03-30T07:00:00Z"), true).unwrap().contact,
            "ada",
            "backup"
        );
        assert!(
            r.at(at("2026-03-20T07:00:00Z"), false).is_none(),
            "before the anchor"
        );
        // Back to winter time on 2026-10-25: 09:00 CET is 08:00 UTC again.
        let autumn = r.at(at("2026-10-27T12:00:00Z"), false).unwrap();
        assert_eq!(autumn.start, at("2026-10-26T08:00:00Z"));
    }

    #[test]
    fn ics_text_cannot_start_a_line() {
        assert_eq!(
            ics_text("Ada\r\nEND:VEVENT\r\nBEGIN:VEVENT; x, y\\z\rq\u{7}"),
            "Ada\\nEND:VEVENT\\nBEGIN:VEVENT\\; x\\, y\\\\z\\nq"
        );
    }

    #[test]
    fn custom_lengths_restrictions_and_overrides() {
        let o = Override {
            id: uuid::Uuid::nil(),
            tenant_id: uuid::Uuid::nil(),
            schedule_id: uuid::Uuid::nil(),
            contact_id: "cy".into(),
            start: at("2026-11-23T10:00:00Z"),
            end: at("2026-11-23T11:00:00Z"),
            reason: None,
            created_at: at("2026-11-01T00:00:00Z"),
            created_by: "test".into(),
        };
        let r = roster(
            json!({"timeZone": "UTC", "layers": [
                {"name": "day", "anchor": "2026-11-23T08:00:00Z", "unit": "custom", "length": "12h",
                 "participants": ["ada", "bob"], "restriction": {"mon": ["08:00-18:00"]}},
                {"name": "rest", "anchor": "2026-11-02T00:00:00Z", "unit": "daily",
                 "participants": ["dan"]}]}),
            &[o],
        );
        assert_eq!(
            r.at(at("2026-11-23T09:00:00Z"), false).unwrap().contact,
            "ada"
        );
        let over = r.at(at("2026-11-23T10:30:00Z"), false).unwrap();
        assert!(over.is_override);
        assert_eq!(over.contact_id, "id-cy");
        assert_eq!(
            r.at(at("2026-11-23T19:00:00Z"), false).unwrap().contact,
            "dan"
        );
        let line = r.timeline(at("2026-11-23T00:00:00Z"), at("2026-11-24T00:00:00Z"));
        let names: Vec<(&str, String, String)> = line
            .iter()
            .map(|s| (s.contact.as_str(), s.start.to_string(), s.end.to_string()))
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "dan",
                    "2026-11-23T00:00:00.000Z".into(),
                    "2026-11-23T08:00:00.000Z".into()
                ),
                (
                    "ada",
                    "2026-11-23T08:00:00.000Z".into(),
                    "2026-11-23T10:00:00.000Z".into()
                ),
                (
                    "cy",
                    "2026-11-23T10:00:00.000Z".into(),
                    "2026-11-23T11:00:00.000Z".into()
                ),
                (
                    "ada",
                    "2026-11-23T11:00:00.000Z".into(),
                    "2026-11-23T18:00:00.000Z".into()
                ),
                (
                    "dan",
                    "2026-11-23T18:00:00.000Z".into(),
                    "2026-11-24T00:00:00.000Z".into()
                ),
            ]
        );
        let stats = r.stats(&line);
        assert_eq!(stats[0]["contact"], "ada");
        assert_eq!(stats[0]["hours"], 9.0);
        let feed = ics("ops", "s1", &line, at("2026-11-23T00:00:00Z"));
        assert!(feed.starts_with("BEGIN:VCALENDAR\r\n"));
        assert_eq!(feed.matches("BEGIN:VEVENT").count(), 5);
        assert!(feed.contains("DTSTART:20261123T100000Z\r\n"));
        assert!(feed.lines().all(|l| l.len() <= 75));
    }

    #[test]
    fn no_participant_text_starts_a_property_of_its_own() {
        let evil = "ada\r\nATTENDEE:mailto:x@evil.example\nEND:VEVENT";
        let r = roster(
            json!({"timeZone": "UTC", "layers": [{
                "anchor": "2026-11-23T00:00:00Z", "unit": "daily",
                "participants": [evil]}]}),
            &[],
        );
        let line = r.timeline(at("2026-11-23T00:00:00Z"), at("2026-11-24T00:00:00Z"));
        let feed = ics(
            "ops\r\nX-EVIL:1",
            "s1\nX-ID:1",
            &line,
            at("2026-11-23T00:00:00Z"),
        );
        let unfolded = feed.replace("\r\n ", "");
        for l in unfolded.split("\r\n") {
            assert!(
                !l.starts_with("ATTENDEE") && !l.starts_with("X-EVIL") && !l.starts_with("X-ID"),
                "{l:?} in {feed}"
            );
        }
        let ends = unfolded
            .split("\r\n")
            .filter(|l| *l == "END:VEVENT")
            .count();
        assert_eq!(ends, 1, "{feed}");
        assert!(unfolded.contains("UID:s1\\nX-ID:1-"), "{feed}");
        assert!(feed.lines().all(|l| l.len() <= 75));
    }
}
