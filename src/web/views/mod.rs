//! The content of each UI page, from the same wire types the API answers with. Controls appear
//! only where the caller holds the permission the action's route checks again. One file per
//! group of pages; what they share is here.

mod alerts;
mod config;
mod dashboards;
mod objects;
mod people;
pub mod status;

pub use alerts::*;
pub use config::*;
pub use dashboards::*;
pub use objects::*;
pub use people::*;

use crate::model::Timestamp;
use crate::model::alert::{AckTerms, Alert, AlertStatus, Shelf, SuppressedBy};
use crate::model::audit::AuditEntry;
use crate::model::config::{CheckRun, ConfigDoc};
use crate::model::event::{Event, Severity};
use crate::model::identity::{ApiToken, Branding, MintedToken, User};
use crate::model::inbox::{Entry, Group, Level, Sort, Subject};
use crate::model::incident::Incident;
use crate::model::notify::{OnCallNow, OnCallShift};
use crate::model::object::{ObjectKind, ObjectView};
use crate::model::site::{EdgeStatus, SiteAction, SiteOverview};
use crate::model::state::{CheckState, Problem, StateType, badness, label};
use crate::model::suppression::{Downtime, Silence};
use maud::{Markup, html};
use uuid::Uuid;

/// What the caller may do on a page, decided by the handler from the caller's permissions.
#[derive(Clone, Copy, Default)]
pub struct Can {
    /// May read alerts: links to them are shown.
    pub alerts: bool,
    pub ack: bool,
    pub check_now: bool,
    pub silence: bool,
    pub downtime: bool,
    /// May write objects: comment on them.
    pub objects_write: bool,
    /// May write saved filters: save a list's narrowing as one.
    pub save_filters: bool,
}

/// The moment a page is drawn at, and the time zone its viewer reads absolute times in.
pub struct Now {
    pub at: Timestamp,
    pub zone: jiff::tz::TimeZone,
}

impl Now {
    /// The viewer's zone by its IANA name (`UTC` where it has none).
    pub fn zone_name(&self) -> &str {
        self.zone.iana_name().unwrap_or("UTC")
    }

    /// `at` on the viewer's wall clock, as short as reads unambiguously from now: `14:02`
    /// today, `Sat 27 Mar 22:00` this year, `27 Mar 2025 22:00` before.
    pub fn clock(&self, at: Timestamp) -> String {
        let here = at.0.to_zoned(self.zone.clone());
        let today = self.at.0.to_zoned(self.zone.clone());
        let format = if here.date() == today.date() {
            "%H:%M"
        } else if here.year() == today.year() {
            "%a %d %b %H:%M"
        } else {
            "%d %b %Y %H:%M"
        };
        here.strftime(format).to_string()
    }

    /// `at` on the viewer's wall clock as a `datetime-local` field takes it: `2027-03-27T22:00`.
    pub fn wall(&self, at: Timestamp) -> String {
        at.0.to_zoned(self.zone.clone())
            .strftime("%Y-%m-%dT%H:%M")
            .to_string()
    }

    /// `at` in full on the viewer's wall clock.
    pub fn local(&self, at: Timestamp) -> String {
        local(at, &self.zone)
    }
}

/// `5m ago · 14:02`, `in 2h · Sat 27 Mar 22:00`: the distance from now and the time on the
/// viewer's wall clock, both readable without hover (a touch screen has none); the full time
/// with its zone in the title.
pub fn when(now: &Now, at: Timestamp) -> Markup {
    let ms = now.at.as_millis() - at.as_millis();
    let secs = ms.unsigned_abs() / 1000;
    let span = match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=172_799 => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d", secs / 86_400),
    };
    let text = if ms >= 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    };
    html! { time datetime=(at) title=(now.local(at)) { (text) " · " (now.clock(at)) } }
}

/// The badge class of a state: `s-crit`, `s-warn`, `s-unkn`, `s-ok`.
fn state_class(kind: ObjectKind, state: Option<u8>) -> &'static str {
    match state.map(|s| badness(kind, s)) {
        Some(3) => "s-crit",
        Some(2) => "s-unkn",
        Some(1) => "s-warn",
        Some(_) => "s-ok",
        None => "s-info",
    }
}

fn state_badge(kind: ObjectKind, state: Option<&CheckState>) -> Markup {
    let s = state.map(|s| s.state);
    let soft = state.is_some_and(|s| s.state_type == StateType::Soft && s.state != 0);
    html! {
        span.badge.(state_class(kind, s)) { (label(kind, s)) }
        @if soft { " " small.muted { "soft " (state.map_or(0, |s| s.attempt)) } }
    }
}

fn severity_badge(s: Severity) -> Markup {
    let class = match s {
        Severity::Critical => "s-crit",
        Severity::Warning => "s-warn",
        Severity::Info => "s-info",
        Severity::Ok => "s-ok",
    };
    html! { span.badge.(class) { (s.as_str()) } }
}

/// Tabs between views of one list: (link, text, whether it is the one shown).
fn tabs(label: &str, items: &[(String, &str, bool)]) -> Markup {
    html! {
        nav.tabs aria-label=(label) {
            @for (href, text, current) in items {
                a href=(href) aria-current=[current.then_some("page")] { (text) }
            }
        }
    }
}

/// A one-button form posting to `action`, coming back to `back`.
fn button(action: &str, back: &str, text: &str, label_for: &str) -> Markup {
    html! {
        form method="post" action=(action) {
            input type="hidden" name="back" value=(back);
            button type="submit" aria-label=(format!("{text} {label_for}")) { (text) }
        }
    }
}

/// Where one page of a list sorted in memory stands.
#[derive(Clone, Copy, Debug)]
pub struct Offsets {
    /// How many rows earlier pages showed.
    pub from: usize,
    pub shown: usize,
    pub total: usize,
    /// Rows a page.
    pub size: usize,
    /// The list was read up to its bound: the order is among the first `total` rows.
    pub capped: bool,
}

/// How a list page goes on: by the store's cursor, or by offset through a list sorted in
/// memory.
pub enum Paging {
    Cursor(Option<String>),
    Offsets(Offsets),
}

impl Paging {
    /// How many rows the list holds: all of a sorted list, the page's of a cursor's.
    pub fn count<T>(&self, groups: &[(String, Vec<T>)]) -> usize {
        match self {
            Paging::Offsets(o) => o.total,
            Paging::Cursor(_) => groups.iter().map(|(_, rows)| rows.len()).sum(),
        }
    }

    /// The pager below a list whose address is `back` (with a query): `later` (the next page
    /// by cursor), or the offset pager.
    fn pager(&self, back: &str, later: &str) -> Markup {
        match self {
            Paging::Cursor(None) => html! {},
            Paging::Cursor(Some(cursor)) => html! {
                nav.pager aria-label="Pages" { a.button href=(format!("{back}&cursor={cursor}")) { (later) } }
            },
            Paging::Offsets(o) => offsets_pager(*o, |from| format!("{back}&from={from}")),
        }
    }
}

/// The sort and group-by choices of a list's filter form. `unsorted` names the list's own
/// order, an empty `sort`; without it the list is always sorted, worst first by default.
fn order_choices(unsorted: Option<&str>, sort: &str, group: &str) -> Markup {
    let sorted = |s: Sort| {
        s.as_str() == sort || (sort.is_empty() && unsorted.is_none() && s == Sort::Severity)
    };
    let text = |s: Sort| match s {
        Sort::Severity => "worst first",
        Sort::Newest => "newest",
        Sort::Oldest => "oldest",
        Sort::Name => "name",
    };
    html! {
        div {
            label for="sort" { "Sort" }
            select #sort name="sort" {
                @if let Some(own) = unsorted { option value="" selected[sort.is_empty()] { (own) } }
                @for s in Sort::ALL { option value=(s.as_str()) selected[sorted(s)] { (text(s)) } }
            }
        }
        div {
            label for="group" { "Group by" }
            select #group name="group" {
                option value="" selected[group.is_empty()] { "nothing" }
                @for g in Group::ALL { option value=(g.as_str()) selected[g.as_str() == group] { (g.as_str()) } }
            }
        }
    }
}

/// The pager of a list paged by offset; `href` is the list's address from an offset.
fn offsets_pager(o: Offsets, href: impl Fn(usize) -> String) -> Markup {
    let next = o.from + o.shown;
    html! {
        @if o.capped { p.muted { "In order among the first " (o.total) " that match; narrow the list to order the rest." } }
        @if o.total > o.shown && o.shown > 0 {
            nav.pager aria-label="Pages" {
                span.muted { (o.from + 1) "–" (next) " of " (o.total) }
                @if o.from > 0 { a.button href=(href(o.from.saturating_sub(o.size))) { "Previous" } }
                @if next < o.total { a.button href=(href(next)) { "Next" } }
            }
        }
    }
}

pub fn problem_name(p: &Problem) -> String {
    p.object.full_name(p.host_name.as_deref())
}

pub fn view_name(v: &ObjectView) -> String {
    v.object.full_name(v.host_name.as_deref())
}

/// What an event says, as a line: who was paged over which channel and what became of it,
/// which step escalated to whom, who acknowledged and how (the UI, the API, a link, an SMS
/// reply, a key on a call); any other event by its summary fields.
fn event_line(e: &Event) -> String {
    use crate::model::event::EventType;
    let p = &e.payload;
    let text = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let number = |k: &str| p.get(k).and_then(|v| v.as_u64());
    let names = |k: &str| -> String {
        p.get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let via = |line: &mut String| {
        let how = match text("via") {
            "ui" => "in the UI",
            "api" => "through the API",
            "link" => "by the link in a message",
            "sms" => "by an SMS reply",
            "dtmf" => "by a key on a call",
            "ivr" => "by a call to the phone menu",
            _ => "",
        };
        if !how.is_empty() {
            line.push(' ');
            line.push_str(how);
        }
    };
    match e.kind {
        EventType::Notification => {
            let mut line = match text("status") {
                "pending" => "queued".to_string(),
                "sent" => "sent".into(),
                "failed" => "failed".into(),
                "dead" => "given up".into(),
                "suppressed" => "not paged".into(),
                "held" => "held for a digest".into(),
                "digested" => "sent in a digest".into(),
                other => other.to_string(),
            };
            let whom = match text("contact") {
                "" => text("target"),
                c => c,
            };
            if !whom.is_empty() {
                line += &format!(" to {whom}");
            }
            if !text("channel").is_empty() {
                line += &format!(" over {}", text("channel"));
            }
            if let Some(step) = number("stepIndex").filter(|_| text("status") != "suppressed") {
                line += &format!(" (step {step})");
            }
            if let Some(n) = number("attempt").filter(|n| *n > 1) {
                line += &format!(", attempt {n}");
            }
            if let Some(ms) = number("latencyMs") {
                line += &format!(" in {ms} ms");
            }
            if !text("providerId").is_empty() {
                line += &format!(", id {}", text("providerId"));
            }
            if !text("error").is_empty() {
                line += &format!(": {}", text("error"));
            }
            if p.get("failover").and_then(|v| v.as_bool()) == Some(true) {
                line += "; trying the next channel";
            }
            line
        }
        EventType::Escalation if !text("summary").is_empty() => text("summary").to_string(),
        EventType::Escalation => {
            let step = number("step").unwrap_or_default();
            let mut line = format!("step {step}");
            if let Some(r) = number("repeat").filter(|r| *r > 0) {
                line += &format!(" (repeat {r})");
            }
            match (names("contacts"), names("channels")) {
                (c, _) if c.is_empty() => line += ": nobody to page",
                (c, ch) if ch.is_empty() => line += &format!(": paged {c}"),
                (c, ch) => line += &format!(": paged {c} over {ch}"),
            }
            if !text("policy").is_empty() {
                line += &format!(" ({})", text("policy"));
            }
            line
        }
        EventType::Ack => {
            let mut line = match text("action") {
                "" => "acknowledged".to_string(),
                "confirmed" => "acknowledgement confirmed".into(),
                "reminder" => format!(
                    "reminder {} to the acknowledger",
                    number("reminders").unwrap_or(1)
                ),
                why => format!("acknowledgement ended ({why})"),
            };
            if !text("by").is_empty() {
                line += &format!(" by {}", text("by"));
            }
            via(&mut line);
            if !text("comment").is_empty() {
                line += &format!(": {}", text("comment"));
            }
            line
        }
        EventType::Comment => format!("by {}: {}", text("by"), text("text")),
        EventType::AlertOpened => {
            let mut line = format!("opened: {}", text("title"));
            via(&mut line);
            line
        }
        EventType::AlertResolved => {
            let mut line = "resolved".to_string();
            if !text("by").is_empty() {
                line += &format!(" by {}", text("by"));
            }
            via(&mut line);
            for k in ["reason", "comment"] {
                if !text(k).is_empty() {
                    line += &format!(": {}", text(k));
                }
            }
            line
        }
        _ => {
            let parts: Vec<&str> = [
                "action", "summary", "title", "comment", "output", "to", "reason", "message",
            ]
            .iter()
            .map(|k| text(k))
            .filter(|s| !s.is_empty())
            .take(2)
            .collect();
            parts.join(" · ")
        }
    }
}

/// Saving a list's narrowing (`href`: the list's address with it) as a saved filter of
/// `resource`, for dashboards and for coming back to.
fn save_filter(resource: &str, href: &str) -> Markup {
    html! {
        form.save-filter method="post" action="/saved-filters" {
            input type="hidden" name="resource" value=(resource);
            input type="hidden" name="back" value=(href);
            label for="filter-name" { "Save this filter as" }
            input #filter-name type="text" name="name" required maxlength="128" placeholder="north-critical";
            button type="submit" { "Save" }
        }
    }
}

/// A comment on the page's subject: a note for the others on shift, acting on nothing.
fn comment_form(action: &str, back: &str) -> Markup {
    html! {
        form.comment method="post" action=(action) {
            input type="hidden" name="back" value=(back);
            label for="comment-text" { "Comment" }
            textarea #comment-text name="text" rows="2" maxlength="4000" required {}
            button type="submit" { "Add comment" }
        }
    }
}

fn timeline(now: &Now, events: &[Event]) -> Markup {
    html! {
        @if events.is_empty() {
            p.muted { "No events." }
        } @else {
            ul.list {
                @for e in events {
                    li {
                        @if let Some(s) = e.severity { (severity_badge(s)) }
                        span.what {
                            strong { (e.kind.as_str()) } " " (event_line(e))
                            br;
                            small { (when(now, e.ts)) }
                            @if let Some(site) = &e.site { small { " · site " (site) } }
                            @if let Some(o) = e.object_id { small { " · " a href=(format!("/objects/{o}")) { "object" } } }
                        }
                    }
                }
            }
        }
    }
}

pub use crate::model::input::path_segment as encode_segment;

/// Less time than this left on a silence or downtime is flagged on its row.
const ENDING_SOON_SECS: i64 = 3600;

/// The choices of how long a new silence or downtime lasts: value (a duration) and text.
pub const DURATIONS: &[(&str, &str)] = &[
    ("1h", "1 hour"),
    ("2h", "2 hours"),
    ("4h", "4 hours"),
    ("8h", "8 hours"),
    ("24h", "1 day"),
    ("72h", "3 days"),
    ("168h", "7 days"),
    ("720h", "30 days"),
    ("2160h", "90 days"),
];

fn duration_select(chosen: &str) -> Markup {
    html! {
        label for="duration" { "For" }
        select #duration name="duration" {
            @for (value, text) in DURATIONS {
                option value=(value) selected[*value == chosen] { (text) }
            }
        }
    }
}

/// `at` on the wall clock of `zone`, readable without hover: `Sat 27 Mar 2027 22:00 CET`.
pub fn local(at: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    at.0.to_zoned(zone.clone())
        .strftime("%a %d %b %Y %H:%M %Z")
        .to_string()
}

/// The end of a suppression: when, and flagged when it is soon.
fn ends(now: &Now, at: Timestamp, verb: &str) -> Markup {
    let left = (at.as_millis() - now.at.as_millis()) / 1000;
    html! {
        @if (0..ENDING_SOON_SECS).contains(&left) {
            strong.badge.s-warn { (verb) " " (when(now, at)) }
        } @else {
            (verb) " " (when(now, at))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventType;
    use serde_json::json;

    fn event(kind: EventType, payload: serde_json::Value) -> Event {
        Event {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            ts: Timestamp::from_millis(0).unwrap(),
            kind,
            object_id: None,
            source_id: None,
            severity: None,
            payload: payload.into(),
            site: None,
        }
    }

    /// The paging trail reads as sentences: a retried failure with its reason, a channel
    /// given up, an ack by an SMS reply, a step held by a mute window.
    #[test]
    fn a_paging_trail_reads_as_what_happened() {
        let line = |kind, payload| event_line(&event(kind, payload));
        assert_eq!(
            line(
                EventType::Notification,
                json!({"status": "failed", "contact": "ada", "channel": "sms", "stepIndex": 1,
                       "attempt": 2, "error": "modem: no carrier", "failover": true})
            ),
            "failed to ada over sms (step 1), attempt 2: modem: no carrier; trying the next channel"
        );
        assert_eq!(
            line(
                EventType::Notification,
                json!({"status": "dead", "target": "+49***12", "channel": "voice", "stepIndex": 0, "attempt": 5})
            ),
            "given up to +49***12 over voice (step 0), attempt 5"
        );
        assert_eq!(
            line(
                EventType::Ack,
                json!({"by": "ada", "via": "sms", "comment": ""})
            ),
            "acknowledged by ada by an SMS reply"
        );
        assert_eq!(
            line(EventType::Ack, json!({"action": "expired", "by": "ada"})),
            "acknowledgement ended (expired) by ada"
        );
        assert_eq!(
            line(
                EventType::Escalation,
                json!({"step": 2, "repeat": 1, "contacts": [], "channels": []})
            ),
            "step 2 (repeat 1): nobody to page"
        );
        assert_eq!(
            line(
                EventType::Escalation,
                json!({"summary": "step 1 waits until 08:00 (outside business-hours)"})
            ),
            "step 1 waits until 08:00 (outside business-hours)"
        );
        assert_eq!(
            line(
                EventType::AlertResolved,
                json!({"by": "olga", "via": "dtmf"})
            ),
            "resolved by olga by a key on a call"
        );
    }
}
