//! The content of each UI page, from the same wire types the API answers with. Controls appear
//! only where the caller holds the permission the action's route checks again. One file per
//! group of pages; what they share is here.

mod alerts;
mod config;
mod dashboards;
mod objects;
mod people;

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
use crate::model::site::SiteOverview;
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
}

/// The moment a page is drawn at, and the time zone its viewer reads absolute times in.
pub struct Now {
    pub at: Timestamp,
    pub zone: jiff::tz::TimeZone,
}

impl Now {
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

/// `host / service`, or the host's name.
fn object_name(o: &crate::model::object::Object, host_name: Option<&str>) -> String {
    match host_name {
        Some(h) => format!("{h} / {}", o.name),
        None => o.name.clone(),
    }
}

pub fn problem_name(p: &Problem) -> String {
    object_name(&p.object, p.host_name.as_deref())
}

pub fn view_name(v: &ObjectView) -> String {
    object_name(&v.object, v.host_name.as_deref())
}

fn event_summary(e: &Event) -> String {
    let p = &e.payload;
    let text = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or_default();
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
                            strong { (e.kind.as_str()) } " " (event_summary(e))
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

/// A path segment with what would end or escape it encoded.
pub fn encode_segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

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
