//! The content of each UI page, from the same wire types the API answers with. Controls appear
//! only where the caller holds the permission the action's route checks again.

use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertStatus};
use crate::model::audit::AuditEntry;
use crate::model::config::ConfigDoc;
use crate::model::event::{Event, Severity};
use crate::model::identity::{ApiToken, MintedToken, User};
use crate::model::incident::Incident;
use crate::model::notify::{OnCallNow, OnCallShift};
use crate::model::object::{ObjectKind, ObjectView};
use crate::model::site::SiteOverview;
use crate::model::state::{CheckState, Problem, StateType, badness, label};
use crate::model::suppression::{Downtime, Silence};
use maud::{Markup, html};
use std::collections::HashMap;
use uuid::Uuid;

/// What the caller may do on a page, decided by the handler from the caller's permissions.
#[derive(Clone, Copy, Default)]
pub struct Can {
    pub ack: bool,
    pub check_now: bool,
    pub silence: bool,
    pub downtime: bool,
}

/// The new-silence form pre-filled to match alerts like `a`: its labels whose values a
/// selector can carry as they are, and its exact title.
pub fn silence_like(a: &Alert) -> String {
    let plain = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
    };
    let selector: Vec<String> = a
        .labels
        .iter()
        .filter(|(k, v)| plain(k) && plain(v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut title = String::from("^");
    for c in a.title.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            title.push('\\');
        }
        title.push(c);
    }
    title.push('$');
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("selector", &selector.join(","))
        .append_pair("textRegex", &title)
        .finish();
    format!("/silences/new?{query}")
}

/// `5m ago`, `in 2h`: the distance from `now`, with the exact time in the element's title.
pub fn when(now: Timestamp, at: Timestamp) -> Markup {
    let ms = now.as_millis() - at.as_millis();
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
    html! { time datetime=(at) title=(at) { (text) } }
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

pub fn view_name(v: &ObjectView) -> String {
    object_name(&v.object, v.host_name.as_deref())
}

/// A problem object's open alert: the acknowledge button acts on it.
pub struct OpenAlert {
    pub id: Uuid,
    /// An active silence holds it.
    pub silenced: bool,
}

/// Whether someone has a problem in hand: acknowledged, in downtime, or its open alert
/// silenced (the API's `/problems` knows the first two; the page adds silences, as
/// Alertmanager's users expect).
pub fn handled(p: &Problem, open: &HashMap<Uuid, OpenAlert>) -> bool {
    p.state.acked_by.is_some()
        || p.state.downtime_depth > 0
        || open.get(&p.object.id).is_some_and(|a| a.silenced)
}

/// `/`: what is wrong now, as the domain orders it (unhandled first, worst first); `open`
/// maps an object to its open alert, for the acknowledge button.
pub fn problems(
    now: Timestamp,
    items: &[Problem],
    handled_shown: bool,
    open: &HashMap<Uuid, OpenAlert>,
    can: Can,
) -> Markup {
    let back = if handled_shown { "/?handled=1" } else { "/" };
    html! {
        nav.tabs aria-label="Which problems" {
            a href="/" aria-current=[(!handled_shown).then_some("page")] { "Unhandled" }
            a href="/?handled=1" aria-current=[handled_shown.then_some("page")] { "All, handled too" }
        }
        @if items.is_empty() {
            p { "No problems. Everything checked is OK or UP." }
        } @else {
            ul.list {
                @for p in items {
                    @let name = object_name(&p.object, p.host_name.as_deref());
                    li {
                        (state_badge(p.object.kind, Some(&p.state)))
                        span.what {
                            a href=(format!("/objects/{}", p.object.id)) { (name) }
                            " " small { (p.state.output) }
                            br;
                            small { "since " (when(now, p.state.last_hard_change.unwrap_or(p.state.last_change))) }
                            @if let Some(by) = &p.state.acked_by { " " span.handled { "✓ acknowledged by " (by) } }
                            @if p.state.downtime_depth > 0 { " " span.handled { "⏸ in downtime" } }
                            @if open.get(&p.object.id).is_some_and(|a| a.silenced) { " " span.handled { "🔕 silenced" } }
                        }
                        span.acts {
                            @if let (true, Some(alert)) = (can.ack, open.get(&p.object.id)) {
                                (button(&format!("/alerts/{}/ack", alert.id), back, "Acknowledge", &name))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The status tabs of the alert list, with the query value each stands for.
const ALERT_TABS: &[(&str, &str)] = &[
    ("open", "Open"),
    ("acked", "Acknowledged"),
    ("resolved,expired", "Closed"),
];

/// `/alerts`: one status at a time, newest first, paged; open ones can be acknowledged in bulk.
pub fn alerts(
    now: Timestamp,
    items: &[Alert],
    status: &str,
    next: Option<&str>,
    can: Can,
) -> Markup {
    let back = format!("/alerts?status={status}");
    let bulk = can.ack && status == "open" && !items.is_empty();
    html! {
        nav.tabs aria-label="Alert status" {
            @for (value, text) in ALERT_TABS {
                a href=(format!("/alerts?status={value}")) aria-current=[(*value == status).then_some("page")] { (text) }
            }
        }
        @if items.is_empty() {
            p { "No alerts here." }
        } @else {
            form #bulk method="post" action="/alerts/ack" {
                input type="hidden" name="back" value=(back);
            }
            ul.list {
                @for a in items {
                    li {
                        @if bulk {
                            input type="checkbox" name="id" value=(a.id) form="bulk" aria-label=(format!("Select {}", a.title));
                        }
                        (severity_badge(a.severity))
                        span.what {
                            a href=(format!("/alerts/{}", a.id)) { (a.title) }
                            br;
                            small { (a.status.as_str()) ", opened " (when(now, a.opened_at)) }
                            @if let Some(by) = &a.acked_by { " " span.handled { "✓ " (by) } }
                            @if let Some(until) = a.snoozed_until { " " span.handled { "snoozed until " (when(now, until)) } }
                        }
                        span.acts {
                            @if can.ack && a.status == AlertStatus::Open {
                                (button(&format!("/alerts/{}/ack", a.id), &back, "Acknowledge", &a.title))
                            }
                        }
                    }
                }
            }
            @if bulk {
                p { button form="bulk" type="submit" { "Acknowledge selected" } }
            }
        }
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" {
                a.button href=(format!("/alerts?status={status}&cursor={cursor}")) { "Older" }
            }
        }
    }
}

/// `/alerts/{id}`: the alert, its facts, what triggered it, and what may be done with it.
pub fn alert(
    now: Timestamp,
    a: &Alert,
    object: Option<&str>,
    open_incidents: Option<&[Incident]>,
    events: &[Event],
    can: Can,
) -> Markup {
    let here = format!("/alerts/{}", a.id);
    let active = matches!(a.status, AlertStatus::Open | AlertStatus::Acked);
    html! {
        dl.facts {
            dt { "Status" } dd { (a.status.as_str()) }
            dt { "Severity" } dd { (severity_badge(a.severity)) }
            dt { "Opened" } dd { (when(now, a.opened_at)) }
            @if let Some(by) = &a.acked_by { dt { "Acknowledged by" } dd { (by) } }
            @if let Some(at) = a.acked_at { dt { "Acknowledged" } dd { (when(now, at)) } }
            @if let Some(until) = a.snoozed_until { dt { "Snoozed until" } dd { (when(now, until)) } }
            @if let Some(at) = a.resolved_at { dt { "Closed" } dd { (when(now, at)) } }
            @if let Some(o) = a.object_id { dt { "Object" } dd { a href=(format!("/objects/{o}")) { (object.unwrap_or("its object")) } } }
            @if let Some(p) = &a.escalation_policy { dt { "Escalation policy" } dd { (p) } }
            @if let Some(cause) = &a.cause { dt { "Caused by" } dd { (cause.reason) } }
            dt { "Rule" } dd { (a.rule_id) }
            @for (k, v) in &a.labels { dt { (k) } dd { (v) } }
        }
        @if can.ack && active {
            h2 { "Act" }
            div.acts {
                @if a.status == AlertStatus::Open {
                    form method="post" action=(format!("{here}/ack")) {
                        input type="hidden" name="back" value=(here);
                        label for="comment" { "Comment (optional)" }
                        input #comment type="text" name="comment" maxlength="1000";
                        " "
                        button.primary type="submit" { "Acknowledge" }
                    }
                }
                form method="post" action=(format!("{here}/snooze")) {
                    input type="hidden" name="back" value=(here);
                    label for="duration" { "Snooze for" }
                    select #duration name="duration" {
                        option value="30m" { "30 minutes" }
                        option value="1h" selected { "1 hour" }
                        option value="4h" { "4 hours" }
                        option value="24h" { "24 hours" }
                    }
                    " "
                    button type="submit" { "Snooze" }
                }
                (button(&format!("{here}/resolve"), &here, "Resolve", &a.title))
            }
        }
        @if can.silence && active {
            p { a.button href=(silence_like(a)) { "Silence alerts like this" } }
        }
        @if let Some(open) = open_incidents { (assign_to_incident(a, open)) }
        h2 { "Timeline" }
        (timeline(now, events))
    }
}

fn event_summary(e: &Event) -> String {
    let p = &e.payload;
    let text = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let parts: Vec<&str> = [
        "summary", "title", "comment", "output", "to", "reason", "message",
    ]
    .iter()
    .map(|k| text(k))
    .filter(|s| !s.is_empty())
    .take(2)
    .collect();
    parts.join(" · ")
}

fn timeline(now: Timestamp, events: &[Event]) -> Markup {
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

/// `/objects`: search and filter on the server, paged.
pub fn objects(
    now: Timestamp,
    items: &[ObjectView],
    q: &str,
    selector: &str,
    next: Option<&str>,
) -> Markup {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("q", q)
        .append_pair("selector", selector)
        .finish();
    html! {
        form.filters method="get" action="/objects" role="search" {
            div { label for="q" { "Name contains" } input #q type="search" name="q" value=(q); }
            div { label for="selector" { "Labels" } input #selector type="text" name="selector" value=(selector) placeholder="site=north,role=db"; }
            button type="submit" { "Filter" }
        }
        @if items.is_empty() {
            p { "Nothing matches." }
        } @else {
            ul.list {
                @for v in items {
                    li {
                        (state_badge(v.object.kind, v.state.as_ref()))
                        span.what {
                            a href=(format!("/objects/{}", v.object.id)) { (view_name(v)) }
                            @if let Some(s) = &v.state {
                                " " small { (s.output) } br; small { "checked " (when(now, s.last_check)) }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" {
                a.button href=(format!("/objects?{query}&cursor={cursor}")) { "Next" }
            }
        }
    }
}

/// `/objects/{id}`: the object's state and output, its services (a host), its recent events.
pub fn object(
    now: Timestamp,
    v: &ObjectView,
    services: &[ObjectView],
    changes: &[Event],
    graphs: &[Graph],
    events: &[Event],
    can: Can,
) -> Markup {
    let segments = history(now, v.state.as_ref().map(|s| s.state), changes);
    let here = format!("/objects/{}", v.object.id);
    html! {
        dl.facts {
            dt { "State" } dd { (state_badge(v.object.kind, v.state.as_ref())) }
            @if let Some(s) = &v.state {
                dt { "Output" } dd { (s.output) }
                dt { "Last check" } dd { (when(now, s.last_check)) }
                dt { "Last change" } dd { (when(now, s.last_change)) }
                @if let Some(by) = &s.acked_by { dt { "Acknowledged by" } dd { (by) } }
                @if s.downtime_depth > 0 { dt { "Downtime" } dd { "in downtime" } }
                @if s.flapping { dt { "Flapping" } dd { (format!("{:.0} %", s.flap_pct)) } }
            }
            @if let Some(h) = &v.host_name {
                dt { "Host" } dd { a href=(format!("/objects/{}", v.object.host_id.map(|h| h.to_string()).unwrap_or_default())) { (h) } }
            }
            @for (k, val) in &v.object.labels { dt { (k) } dd { (val) } }
        }
        h2 { "The last day" }
        (history_bar(v.object.kind, &segments))
        @for g in graphs { (graph(g)) }
        @if let Some(s) = &v.state {
            @if !s.long_output.is_empty() { h2 { "Long output" } pre { (s.long_output) } }
            @if !s.perfdata.is_empty() { h2 { "Performance data" } pre { (s.perfdata) } }
        }
        div.acts {
            @if can.check_now {
                (button(&format!("{here}/check-now"), &here, "Check now", &v.object.name))
            }
            @if can.downtime {
                a.button href=(format!("/downtimes/new?object={}", v.object.id)) { "Schedule downtime" }
            }
        }
        @if v.object.kind == ObjectKind::Host {
            h2 { "Services" }
            @if services.is_empty() {
                p.muted { "No services." }
            } @else {
                ul.list {
                    @for s in services {
                        li {
                            (state_badge(s.object.kind, s.state.as_ref()))
                            span.what {
                                a href=(format!("/objects/{}", s.object.id)) { (s.object.name) }
                                @if let Some(st) = &s.state { " " small { (st.output) } }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Recent events" }
        (timeline(now, events))
    }
}

/// One schedule's shifts over the coming days, for the on-call page.
pub struct Upcoming {
    pub schedule: String,
    pub shifts: Vec<OnCallShift>,
}

/// A form taking `shift` of `schedule` over for the caller.
fn take_over(schedule: &str, shift: &OnCallShift) -> Markup {
    html! {
        form method="post" action=(format!("/oncall/{}/take-over", encode_segment(schedule))) {
            input type="hidden" name="start" value=(shift.start);
            input type="hidden" name="end" value=(shift.end);
            button type="submit" aria-label=(format!("Take over {}'s shift in {schedule}", shift.contact)) { "Take over" }
        }
    }
}

/// A path segment with what would end or escape it encoded.
fn encode_segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// `/oncall`: my shifts; who is on call now in each schedule, until when, and how to reach
/// them; each schedule's next days. `me` is the caller's contact; `can_take` whether they may
/// take a shift over (an override, `oncall:write`).
pub fn on_call(
    now: Timestamp,
    schedules: &[OnCallNow],
    upcoming: &[Upcoming],
    me: Option<&str>,
    can_take: bool,
) -> Markup {
    let mine: Vec<(&str, &OnCallShift)> = upcoming
        .iter()
        .flat_map(|u| u.shifts.iter().map(move |s| (u.schedule.as_str(), s)))
        .filter(|(_, s)| Some(s.contact.as_str()) == me)
        .collect();
    let takes = |shift: &OnCallShift| can_take && me.is_some_and(|m| m != shift.contact);
    html! {
        @if me.is_some() {
            h2 { "My shifts, the next 7 days" }
            @if mine.is_empty() {
                p.muted { "None." }
            } @else {
                ul.list {
                    @for (schedule, s) in &mine {
                        li { span.what { strong { (schedule) } br; small { (when(now, s.start)) " until " (when(now, s.end)) } } }
                    }
                }
            }
        }
        @if schedules.is_empty() {
            p { "No schedules." }
        }
        @for s in schedules {
            section aria-labelledby=(format!("schedule-{}", s.schedule)) {
                h2 id=(format!("schedule-{}", s.schedule)) { (s.schedule) }
                @if s.shifts.is_empty() {
                    p.muted { "Nobody is on call now." }
                } @else {
                    ul.list {
                        @for shift in &s.shifts {
                            @let contact = s.contacts.iter().find(|c| c.get("name").and_then(|n| n.as_str()) == Some(shift.contact.as_str()));
                            li {
                                span.what {
                                    strong { (shift.contact) }
                                    @if Some(shift.contact.as_str()) == me { " " span.badge.s-ok { "you" } }
                                    @if shift.is_override { " " span.handled { "(override)" } }
                                    @if let Some(layer) = &shift.layer { " " small { (layer) } }
                                    br;
                                    small { "now, until " (when(now, shift.end)) }
                                }
                                span.acts {
                                    @if let Some(phone) = contact.and_then(|c| c.get("phone")).and_then(|p| p.as_str()) {
                                        a.button href=(format!("tel:{phone}")) { "Call " (phone) }
                                    }
                                    @if let Some(email) = contact.and_then(|c| c.get("email")).and_then(|p| p.as_str()) {
                                        a.button href=(format!("mailto:{email}")) { "E-mail" }
                                    }
                                    @if takes(shift) { (take_over(&s.schedule, shift)) }
                                }
                            }
                        }
                    }
                }
                @if let Some(u) = upcoming.iter().find(|u| u.schedule == s.schedule) {
                    h3 { "Next 7 days" }
                    ul.list {
                        @for shift in u.shifts.iter().filter(|sh| sh.start > now) {
                            li {
                                span.what {
                                    strong { (shift.contact) }
                                    @if Some(shift.contact.as_str()) == me { " " span.badge.s-ok { "you" } }
                                    @if shift.is_override { " " span.handled { "(override)" } }
                                    br;
                                    small { (when(now, shift.start)) " until " (when(now, shift.end)) }
                                }
                                span.acts { @if takes(shift) { (take_over(&s.schedule, shift)) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `/events`: the tenant's event feed, newest first, filtered by type, paged, live.
pub fn events(now: Timestamp, items: &[Event], kind: &str, next: Option<&str>) -> Markup {
    html! {
        form.filters method="get" action="/events" {
            div {
                label for="types" { "Type" }
                select #types name="types" {
                    option value="" selected[kind.is_empty()] { "All" }
                    @for t in crate::model::event::EventType::ALL {
                        option value=(t.as_str()) selected[kind == t.as_str()] { (t.as_str()) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        (timeline(now, items))
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" {
                a.button href=(format!("/events?types={kind}&cursor={cursor}")) { "Older" }
            }
        }
    }
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

/// The end of a suppression: when, and flagged when it is soon.
fn ends(now: Timestamp, at: Timestamp, verb: &str) -> Markup {
    let left = (at.as_millis() - now.as_millis()) / 1000;
    html! {
        @if (0..ENDING_SOON_SECS).contains(&left) {
            strong.badge.s-warn { (verb) " " (when(now, at)) }
        } @else {
            (verb) " " (when(now, at))
        }
    }
}

/// `/silences`: active (with how many active alerts each matches now), upcoming, expired.
pub fn silences(now: Timestamp, items: &[(Silence, usize)], can_write: bool) -> Markup {
    let active: Vec<_> = items.iter().filter(|(s, _)| s.active(now)).collect();
    let upcoming: Vec<_> = items.iter().filter(|(s, _)| s.starts_at > now).collect();
    let expired: Vec<_> = items
        .iter()
        .filter(|(s, _)| s.expires_at <= now)
        .take(50)
        .collect();
    let row = |s: &Silence, reach: Option<usize>| {
        html! {
            li {
                span.what {
                    strong { (s.comment) }
                    br;
                    small {
                        @if !s.selector.is_empty() { "labels " code { (s.selector) } " " }
                        @if !s.text_regex.is_empty() { "title ~ " code { (s.text_regex) } " " }
                        @if s.selector.is_empty() && s.text_regex.is_empty() { "every alert " }
                        "· by " (s.created_by) " · "
                        @if s.expires_at > now { (ends(now, s.expires_at, "expires")) } @else { "expired " (when(now, s.expires_at)) }
                    }
                    @if let Some(n) = reach { br; small { "matches " (n) " active alert" @if n != 1 { "s" } " now" } }
                }
                span.acts {
                    @if can_write && s.expires_at > now {
                        (button(&format!("/silences/{}/expire", s.id), "/silences", "Expire", &s.comment))
                    }
                }
            }
        }
    };
    html! {
        @if can_write { p { a.button href="/silences/new" { "New silence" } } }
        h2 { "Active" }
        @if active.is_empty() { p.muted { "None." } } @else {
            ul.list { @for (s, n) in &active { (row(s, Some(*n))) } }
        }
        @if !upcoming.is_empty() {
            h2 { "Upcoming" }
            ul.list { @for (s, _) in &upcoming { (row(s, None)) } }
        }
        h2 { "Expired" }
        @if expired.is_empty() { p.muted { "None." } } @else {
            ul.list { @for (s, _) in &expired { (row(s, None)) } }
        }
    }
}

/// What a new silence or downtime form shows again after a refusal, or pre-filled.
#[derive(Default)]
pub struct SuppressionDraft {
    pub selector: String,
    pub text_regex: String,
    pub comment: String,
    pub duration: String,
    /// A downtime of one object: its id and name.
    pub object: Option<(Uuid, String)>,
}

/// `/silences/new`: labels and title pattern (pre-filled from an alert), how long, why.
pub fn silence_form(d: &SuppressionDraft) -> Markup {
    html! {
        form method="post" action="/silences" {
            label for="selector" { "Alert labels (a selector; empty: any)" }
            input #selector type="text" name="selector" value=(d.selector) placeholder="site=north,team=ops";
            label for="textRegex" { "Alert title matches (a regular expression; empty: any)" }
            input #textRegex type="text" name="textRegex" value=(d.text_regex);
            (duration_select(if d.duration.is_empty() { "2h" } else { &d.duration }))
            label for="comment" { "Why (required)" }
            input #comment type="text" name="comment" required maxlength="1000" value=(d.comment);
            p { button.primary type="submit" { "Create silence" } }
        }
        p.muted { "A silence never stops an alert from opening; it holds its pages while it lasts." }
    }
}

/// `/downtimes`: active, upcoming and ended downtimes.
pub fn downtimes(now: Timestamp, items: &[Downtime], can_write: bool) -> Markup {
    let active: Vec<_> = items.iter().filter(|d| d.active(now)).collect();
    let upcoming: Vec<_> = items
        .iter()
        .filter(|d| !d.active(now) && d.end > now)
        .collect();
    let ended: Vec<_> = items.iter().filter(|d| d.end <= now).take(50).collect();
    let row = |d: &Downtime| {
        html! {
            li {
                span.what {
                    strong { (d.comment) }
                    br;
                    small {
                        @if let Some(o) = d.object_id { a href=(format!("/objects/{o}")) { "one object" } " " }
                        @if !d.selector.is_empty() { "labels " code { (d.selector) } " " }
                        "· " (d.kind) " · by " (d.created_by) " · "
                        @if d.start > now { "starts " (when(now, d.start)) " · " }
                        @if d.end > now { (ends(now, d.end, "ends")) } @else { "ended " (when(now, d.end)) }
                    }
                }
                span.acts {
                    @if can_write && d.end > now {
                        (button(&format!("/downtimes/{}/end", d.id), "/downtimes", "End now", &d.comment))
                    }
                }
            }
        }
    };
    html! {
        @if can_write { p { a.button href="/downtimes/new" { "New downtime" } } }
        h2 { "Active" }
        @if active.is_empty() { p.muted { "None." } } @else { ul.list { @for d in &active { (row(d)) } } }
        @if !upcoming.is_empty() {
            h2 { "Upcoming or waiting for a problem" }
            ul.list { @for d in &upcoming { (row(d)) } }
        }
        h2 { "Ended" }
        @if ended.is_empty() { p.muted { "None." } } @else { ul.list { @for d in &ended { (row(d)) } } }
    }
}

/// `/downtimes/new`: one object (from its page) or a selector, from now for how long, why.
pub fn downtime_form(d: &SuppressionDraft) -> Markup {
    html! {
        form method="post" action="/downtimes" {
            @if let Some((id, name)) = &d.object {
                input type="hidden" name="objectId" value=(id);
                p { "For " strong { (name) } " (a host's downtime covers its services)." }
            } @else {
                label for="selector" { "Objects with the labels (a selector)" }
                input #selector type="text" name="selector" required value=(d.selector) placeholder="site=north";
            }
            (duration_select(if d.duration.is_empty() { "2h" } else { &d.duration }))
            label for="comment" { "Why (required)" }
            input #comment type="text" name="comment" required maxlength="1000" value=(d.comment);
            p { button.primary type="submit" { "Start downtime now" } }
        }
    }
}

/// The last day of an object's states, for its history bar.
pub const HISTORY_SECS: i64 = 24 * 3600;

/// The state history over `[now - HISTORY_SECS, now]` as (state, share of the window) from the
/// oldest: `changes` are the object's `state_change` events in the window, newest first (as the
/// event list gives them). Before the first change the object was in that change's `fromState`;
/// `None` is time without data (before its first result).
pub fn history(now: Timestamp, current: Option<u8>, changes: &[Event]) -> Vec<(Option<u8>, f64)> {
    let start = now.as_millis() - HISTORY_SECS * 1000;
    let span = (HISTORY_SECS * 1000) as f64;
    let state_of = |e: &Event, key: &str| {
        e.payload
            .get(key)
            .and_then(|v| v.as_u64())
            .and_then(|v| u8::try_from(v).ok())
    };
    let mut oldest_first: Vec<&Event> = changes
        .iter()
        .filter(|e| e.ts.as_millis() >= start && e.ts.as_millis() <= now.as_millis())
        .collect();
    oldest_first.sort_by_key(|e| e.ts);
    let mut out: Vec<(Option<u8>, f64)> = Vec::new();
    let mut at = start;
    let mut state = match oldest_first.first() {
        Some(e) => state_of(e, "fromState"),
        None => current,
    };
    for e in oldest_first {
        let t = e.ts.as_millis();
        if t > at {
            out.push((state, (t - at) as f64 / span));
        }
        at = t;
        state = state_of(e, "toState");
    }
    out.push((state, (now.as_millis() - at) as f64 / span));
    // Neighbours in the same state become one segment.
    let mut merged: Vec<(Option<u8>, f64)> = Vec::new();
    for (s, share) in out {
        match merged.last_mut() {
            Some((last, total)) if *last == s => *total += share,
            _ => merged.push((s, share)),
        }
    }
    merged.retain(|(_, share)| *share > 0.0);
    merged
}

fn history_bar(kind: ObjectKind, segments: &[(Option<u8>, f64)]) -> Markup {
    let summary: Vec<String> = segments
        .iter()
        .map(|(s, share)| format!("{} {:.0} %", label(kind, *s), share * 100.0))
        .collect();
    html! {
        div.bar role="img" aria-label=(format!("The last 24 hours: {}", summary.join(", "))) {
            @for (s, share) in segments {
                span.(state_class(kind, *s)) style=(format!("width:{:.3}%", share * 100.0)) title=(format!("{} {:.1} %", label(kind, *s), share * 100.0)) {}
            }
        }
        p.muted.span { small { "24 hours ago" } small { "now" } }
    }
}

/// One metric series of an object, for its graph.
pub struct Graph {
    pub metric: String,
    pub unit: String,
    pub points: Vec<(Timestamp, f64)>,
}

/// A line graph as inline SVG: rendered by the server, so it needs no script and no library,
/// and costs a few hundred bytes.
fn graph(g: &Graph) -> Markup {
    const W: f64 = 600.0;
    const H: f64 = 120.0;
    let (Some(first), Some(last)) = (g.points.first(), g.points.last()) else {
        return html! {};
    };
    let (t0, t1) = (first.0.as_millis() as f64, last.0.as_millis() as f64);
    let (lo, hi) = g
        .points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, v)| {
            (lo.min(*v), hi.max(*v))
        });
    let x = |t: Timestamp| {
        if t1 > t0 {
            (t.as_millis() as f64 - t0) / (t1 - t0) * W
        } else {
            W
        }
    };
    let y = |v: f64| {
        if hi > lo {
            H - (v - lo) / (hi - lo) * H
        } else {
            H / 2.0
        }
    };
    let mut line: Vec<String> = g
        .points
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    // One sample is a level across the graph, not an invisible point.
    if g.points.len() == 1 {
        line = vec![
            format!("0,{:.1}", y(first.1)),
            format!("{W},{:.1}", y(first.1)),
        ];
    }
    let describe = format!(
        "{} over the last day: from {lo} to {hi} {unit}, now {} {unit}",
        g.metric,
        last.1,
        unit = g.unit
    );
    html! {
        figure {
            figcaption { strong { (g.metric) } " " small.muted { (format!("{} {}", last.1, g.unit)) " now · " (lo) "–" (hi) } }
            svg viewBox=(format!("0 0 {W} {H}")) preserveAspectRatio="none" width="100%" height="120" role="img" aria-label=(describe) {
                polyline points=(line.join(" ")) fill="none" stroke="currentColor" stroke-width="2" vector-effect="non-scaling-stroke" {}
            }
        }
    }
}

/// `/incidents`: open incidents (or all), newest first.
pub fn incidents(now: Timestamp, items: &[Incident], all: bool, next: Option<&str>) -> Markup {
    html! {
        nav.tabs aria-label="Which incidents" {
            a href="/incidents" aria-current=[(!all).then_some("page")] { "Open" }
            a href="/incidents?all=1" aria-current=[all.then_some("page")] { "All" }
        }
        @if items.is_empty() {
            p { "No incidents here." }
        } @else {
            ul.list {
                @for i in items {
                    li {
                        (severity_badge(i.severity))
                        span.what {
                            a href=(format!("/incidents/{}", i.id)) { (i.title) }
                            br;
                            small { (i.status) " · " (i.alert_ids.len()) " alert" @if i.alert_ids.len() != 1 { "s" } " · opened " (when(now, i.opened_at)) }
                        }
                    }
                }
            }
        }
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" {
                a.button href=(format!("/incidents?all={}&cursor={cursor}", u8::from(all))) { "Older" }
            }
        }
    }
}

/// `/incidents/{id}`: the incident, its alerts, its timeline, and its status to change.
pub fn incident(
    now: Timestamp,
    i: &Incident,
    alerts: &[Alert],
    events: &[Event],
    can_write: bool,
) -> Markup {
    let here = format!("/incidents/{}", i.id);
    html! {
        dl.facts {
            dt { "Status" } dd { (i.status) }
            dt { "Severity" } dd { (severity_badge(i.severity)) }
            dt { "Opened" } dd { (when(now, i.opened_at)) " by " (i.created_by) }
            @if let Some(at) = i.resolved_at { dt { "Resolved" } dd { (when(now, at)) } }
            @if !i.impact.is_empty() { dt { "Impact" } dd { (i.impact) } }
            @if !i.ticket_url.is_empty() { dt { "Ticket" } dd { (i.ticket_url) } }
            @for (k, v) in &i.labels { dt { (k) } dd { (v) } }
        }
        @if !i.summary.is_empty() { p { (i.summary) } }
        @if can_write {
            form.acts method="post" action=(format!("{here}/status")) {
                input type="hidden" name="version" value=(i.version);
                div {
                    label for="status" { "Status" }
                    select #status name="status" {
                        @for s in ["open", "acked", "resolved"] {
                            option value=(s) selected[i.status == s] { (s) }
                        }
                    }
                }
                button.primary type="submit" { "Change status" }
            }
        }
        h2 { "Alerts" }
        @if alerts.is_empty() {
            p.muted { "None." }
        } @else {
            ul.list {
                @for a in alerts {
                    li {
                        (severity_badge(a.severity))
                        span.what {
                            a href=(format!("/alerts/{}", a.id)) { (a.title) }
                            br; small { (a.status.as_str()) ", opened " (when(now, a.opened_at)) }
                        }
                    }
                }
            }
        }
        h2 { "Timeline" }
        (timeline(now, events))
    }
}

/// On an alert's page: add it to an open incident, or open one for it.
pub fn assign_to_incident(a: &Alert, open: &[Incident]) -> Markup {
    let here = format!("/alerts/{}", a.id);
    html! {
        h2 { "Incident" }
        @if let Some(id) = a.incident_id {
            p { "Part of " a href=(format!("/incidents/{id}")) { "an incident" } "." }
        } @else {
            div.acts {
                @if !open.is_empty() {
                    form method="post" action=(format!("{here}/incident")) {
                        label for="incident" { "Add to an open incident" }
                        select #incident name="incident" {
                            @for i in open { option value=(i.id) { (i.title) } }
                        }
                        " "
                        button type="submit" { "Add" }
                    }
                }
                form method="post" action=(format!("{here}/incident")) {
                    input type="hidden" name="incident" value="new";
                    button type="submit" { "Open an incident for it" }
                }
            }
        }
    }
}

/// `/sites`: each field site as the main sees it.
pub fn sites(now: Timestamp, items: &[SiteOverview]) -> Markup {
    html! {
        @if items.is_empty() {
            p { "No sites. A site is a configuration document of kind " code { "sites" } "." }
        } @else {
            ul.list {
                @for s in items {
                    li {
                        @if s.disabled {
                            span.badge.s-info { "disabled" }
                        } @else if s.stale {
                            span.badge.s-crit { "stale" }
                        } @else if s.connected {
                            span.badge.s-ok { "connected" }
                        } @else {
                            span.badge.s-warn { "quiet" }
                        }
                        span.what {
                            strong { (s.name) }
                            @if let Some(d) = &s.description { " " small { (d) } }
                            br;
                            small {
                                "heartbeat "
                                @if let Some(at) = s.last_heartbeat_at { (when(now, at)) } @else { "never" }
                                " · version " (s.version)
                                @if s.version_skew { " " strong { "(differs from the main)" } }
                                " · bundle " @if s.bundle_current { "current" } @else { strong { "behind" } }
                                @if !s.apply_error.is_empty() { " · " strong { "apply failed: " (s.apply_error) } }
                                " · " (s.forwarded_alerts_open) " open alerts forwarded"
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `/audit`: the hash-chained log, newest first.
pub fn audit(items: &[AuditEntry], next: Option<&str>) -> Markup {
    html! {
        @if items.is_empty() {
            p { "No entries." }
        } @else {
            ul.list {
                @for e in items {
                    li {
                        span.what {
                            strong { (e.action) } " " code { (e.resource) }
                            br;
                            small { time datetime=(e.ts) { (e.ts) } " · " (e.actor_type.as_str()) " " (e.actor_id) @if !e.source_ip.is_empty() { " from " (e.source_ip) } " · #" (e.seq) }
                        }
                    }
                }
            }
        }
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" { a.button href=(format!("/audit?cursor={cursor}")) { "Older" } }
        }
    }
}

/// What the account page shows of the caller's and the instance's look.
pub struct Looks<'a> {
    /// The caller's theme preference (`light`, `dark`, or empty: the browser's).
    pub theme: &'a str,
    pub live: bool,
    /// The instance's branding mode, when the caller may change it (`config:write`).
    pub branding: Option<&'a str>,
}

fn scheme_select(id: &str, name: &str, chosen: &str, auto: &str) -> Markup {
    html! {
        select id=(id) name=(name) {
            option value="" selected[chosen != "light" && chosen != "dark"] { (auto) }
            option value="light" selected[chosen == "light"] { "Light" }
            option value="dark" selected[chosen == "dark"] { "Dark" }
        }
    }
}

/// `/account`: who is signed in, the look of their pages, the password form for local
/// accounts, and the instance's look for those who may change it.
pub fn account(
    name: &str,
    tenant: Uuid,
    permissions: &[String],
    session_user: bool,
    looks: &Looks<'_>,
) -> Markup {
    html! {
        dl.facts {
            dt { "Name" } dd { (name) }
            dt { "Tenant" } dd { (tenant) }
            dt { "Permissions" } dd { (permissions.join(", ")) }
        }
        h2 { "My pages" }
        form method="post" action="/account/preferences" {
            label for="theme" { "Colours" }
            (scheme_select("theme", "theme", looks.theme, "As the device is set"))
            label for="live" { "Lists" }
            select #live name="live" {
                option value="on" selected[looks.live] { "Update live" }
                option value="off" selected[!looks.live] { "Update when reloaded" }
            }
            p { button type="submit" { "Save" } }
        }
        @if let Some(mode) = looks.branding {
            h2 { "Every user's pages" }
            form method="post" action="/account/branding" {
                label for="mode" { "Colours, unless a user chose" }
                (scheme_select("mode", "mode", mode, "As each device is set"))
                p { button type="submit" { "Save for everyone" } }
            }
        }
        @if session_user {
            h2 { "Change the password" }
            form method="post" action="/account/password" {
                label for="oldPassword" { "Current password" }
                input #oldPassword type="password" name="oldPassword" autocomplete="current-password" required;
                label for="newPassword" { "New password (at least 12 characters)" }
                input #newPassword type="password" name="newPassword" autocomplete="new-password" minlength="12" required;
                p { button.primary type="submit" { "Change password" } }
            }
        }
        p { a.button href="/auth/logout" { "Sign out" } }
    }
}

/// The built-in roles, offered in the role fields (custom roles are typed).
const BUILTIN_ROLES: &[&str] = &["viewer", "operator", "editor", "admin"];

fn role_field(id: &str, value: &str) -> Markup {
    html! {
        label for=(id) { "Role" }
        input id=(id) type="text" name="role" list=(format!("{id}-list")) required value=(value);
        datalist id=(format!("{id}-list")) {
            @for r in BUILTIN_ROLES { option value=(r) {} }
        }
    }
}

/// `/users`: the tenant's users, to enable, disable and add.
pub fn users(now: Timestamp, items: &[User], me: Option<Uuid>) -> Markup {
    html! {
        ul.list {
            @for u in items {
                li {
                    @if u.disabled { span.badge.s-info { "disabled" } } @else { span.badge.s-ok { "active" } }
                    span.what {
                        strong { (u.name) } " " small { (u.email) }
                        br;
                        small {
                            (u.roles.join(", "))
                            @if u.local { " · local" } @else { " · single sign-on" }
                            " · last seen " @if let Some(at) = u.last_seen_at { (when(now, at)) } @else { "never" }
                        }
                    }
                    span.acts {
                        @if Some(u.id) != me {
                            @if u.disabled {
                                (button(&format!("/users/{}/enable", u.id), "/users", "Enable", &u.name))
                            } @else {
                                (button(&format!("/users/{}/disable", u.id), "/users", "Disable", &u.name))
                            }
                        }
                    }
                }
            }
        }
        h2 { "Add a user" }
        form method="post" action="/users" {
            label for="name" { "Name" }
            input #name type="text" name="name" required autocomplete="off";
            label for="email" { "E-mail" }
            input #email type="email" name="email" required autocomplete="off";
            (role_field("role", "viewer"))
            label for="password" { "Password (at least 12 characters; empty: single sign-on only)" }
            input #password type="password" name="password" minlength="12" autocomplete="new-password";
            p { button.primary type="submit" { "Add user" } }
        }
    }
}

/// `/tokens`: the tenant's API tokens (never their secrets), to revoke, rotate and mint.
pub fn tokens(now: Timestamp, items: &[ApiToken]) -> Markup {
    html! {
        @if items.is_empty() { p { "No API tokens." } }
        ul.list {
            @for t in items {
                li {
                    span.what {
                        strong { (t.name) } " " code { (t.prefix) "…" }
                        br;
                        small {
                            @if !t.roles.is_empty() { "roles " (t.roles.join(", ")) " " }
                            @if !t.scopes.is_empty() { "scopes " (t.scopes.join(", ")) " " }
                            "· last used " @if let Some(at) = t.last_used_at { (when(now, at)) } @else { "never" }
                            @if let Some(at) = t.expires_at { " · " (ends(now, at, "expires")) }
                        }
                    }
                    span.acts {
                        (button(&format!("/tokens/{}/rotate", t.id), "/tokens", "Rotate", &t.name))
                        (button(&format!("/tokens/{}/revoke", t.id), "/tokens", "Revoke", &t.name))
                    }
                }
            }
        }
        h2 { "Mint a token" }
        form method="post" action="/tokens" {
            label for="name" { "Name" }
            input #name type="text" name="name" required autocomplete="off";
            (role_field("role", "viewer"))
            label for="days" { "Expires after (days; empty: never)" }
            input #days type="number" name="days" min="1" max="3650";
            p { button.primary type="submit" { "Mint token" } }
        }
    }
}

/// The secret of a token just minted or rotated: shown on this page once, never again.
pub fn token_secret(minted: &MintedToken) -> Markup {
    html! {
        p.notice role="status" { "Copy the secret now: it is not shown again." }
        dl.facts {
            dt { "Token" } dd { (minted.meta.name) }
            dt { "Secret" } dd { code { (minted.token) } }
        }
        p { a.button href="/tokens" { "Back to the tokens" } }
    }
}

/// `/config`: the kinds of configuration document the caller may read.
pub fn config_kinds(kinds: &[&str]) -> Markup {
    html! {
        ul.list {
            @for k in kinds {
                li { span.what { a href=(format!("/config/{k}")) { (k) } } }
            }
        }
        p.muted { "Whole configurations move as YAML bundles: " code { "svc apply -f" } "." }
    }
}

/// `/config/{kind}`: its documents by name.
pub fn config_list(now: Timestamp, kind: &str, docs: &[ConfigDoc]) -> Markup {
    html! {
        @if docs.is_empty() { p { "No documents of this kind." } }
        ul.list {
            @for d in docs {
                li {
                    span.what {
                        a href=(format!("/config/{kind}/{}", encode_segment(&d.name))) { (d.name) }
                        br; small { "version " (d.version) " · changed " (when(now, d.updated_at)) }
                    }
                }
            }
        }
    }
}

/// `/config/{kind}/{name}`: the document as YAML, and a form to change it (planned first).
pub fn config_doc(kind: &str, d: &ConfigDoc, yaml: &str, can_write: bool) -> Markup {
    let here = format!("/config/{kind}/{}", encode_segment(&d.name));
    html! {
        p.muted { "version " (d.version) " · id " code { (d.id) } }
        @if can_write {
            form method="post" action=(format!("{here}/plan")) {
                input type="hidden" name="version" value=(d.version);
                label for="yaml" { "The document (YAML; the name and the service's fields are kept)" }
                textarea #yaml name="yaml" rows="20" spellcheck="false" { (yaml) }
                p { button.primary type="submit" { "Plan the change" } }
            }
        } @else {
            pre { (yaml) }
        }
    }
}

/// The lines of `new` against `old`: `' '` kept, `'-'` removed, `'+'` added, in order (the
/// longest common subsequence of lines; documents are short).
pub fn diff_lines<'a>(old: &'a str, new: &'a str) -> Vec<(char, &'a str)> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(('-', a[i]));
            i += 1;
        } else {
            out.push(('+', b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| ('-', *l)));
    out.extend(b[j..].iter().map(|l| ('+', *l)));
    out
}

/// The plan of a change: the difference, and the form that applies exactly this text at the
/// version it was planned against.
pub fn config_plan(kind: &str, name: &str, old: &str, new: &str, version: u64) -> Markup {
    let here = format!("/config/{kind}/{}", encode_segment(name));
    let diff = diff_lines(old, new);
    let changed = diff.iter().any(|(c, _)| *c != ' ');
    html! {
        @if changed {
            pre.diff aria-label="The change" {
                @for (c, line) in &diff {
                    @match c {
                        '+' => ins { "+ " (line) "\n" },
                        '-' => del { "- " (line) "\n" },
                        _ => span { "  " (line) "\n" },
                    }
                }
            }
            form method="post" action=(here) {
                input type="hidden" name="version" value=(version);
                input type="hidden" name="yaml" value=(new);
                button.primary type="submit" { "Apply" }
                " "
                a.button href=(here) { "Cancel" }
            }
        } @else {
            p { "Nothing changes." }
            p { a.button href=(here) { "Back" } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventType;
    use serde_json::json;

    fn change(now: Timestamp, secs_ago: i64, from: Option<u8>, to: u8) -> Event {
        Event {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            ts: Timestamp::from_millis(now.as_millis() - secs_ago * 1000).unwrap_or(now),
            kind: EventType::StateChange,
            object_id: None,
            source_id: None,
            severity: None,
            payload: json!({"fromState": from, "toState": to}),
            site: None,
        }
    }

    #[test]
    fn the_history_bar_is_the_day_in_state_segments() {
        let now: Timestamp = "2026-11-26T12:00:00Z"
            .parse()
            .unwrap_or_else(|_| unreachable!());
        let share = |h: f64| h * 3600.0 / HISTORY_SECS as f64;
        // No change in the day: all of it in the current state, or no data.
        assert_eq!(history(now, Some(0), &[]), vec![(Some(0), 1.0)]);
        assert_eq!(history(now, None, &[]), vec![(None, 1.0)]);
        // Created 6 h ago (no state before its first result), CRITICAL 6 h, then OK for 3 h.
        let changes = [
            change(now, 3 * 3600, Some(2), 0),
            change(now, 6 * 3600, None, 2),
        ];
        let got = history(now, Some(0), &changes);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, None);
        assert!((got[0].1 - share(18.0)).abs() < 1e-9);
        assert_eq!(got[1].0, Some(2));
        assert!((got[1].1 - share(3.0)).abs() < 1e-9);
        assert_eq!(got[2].0, Some(0));
        assert!((got[2].1 - share(3.0)).abs() < 1e-9);
        // A soft change back and forth within one state merges; changes older than the day
        // are left out.
        let changes = [
            change(now, 3600, Some(2), 2),
            change(now, 7200, Some(0), 2),
            change(now, 30 * 3600, Some(1), 0),
        ];
        let got = history(now, Some(2), &changes);
        assert_eq!(
            got.iter().map(|s| s.0).collect::<Vec<_>>(),
            [Some(0), Some(2)]
        );
        assert!((got.iter().map(|s| s.1).sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_silence_link_escapes_the_title_and_keeps_only_plain_labels() {
        let now: Timestamp = "2026-11-26T12:00:00Z"
            .parse()
            .unwrap_or_else(|_| unreachable!());
        let mut a = Alert::open(
            Uuid::nil(),
            Uuid::nil(),
            "rule".into(),
            "key".into(),
            Severity::Critical,
            "disk (/var) 95%".into(),
            now,
        );
        a.labels.insert("site".into(), "north".into());
        a.labels.insert("note".into(), "a, b".into());
        let link = silence_like(&a);
        let query: Vec<(String, String)> = form_urlencoded::parse(
            link.split_once('?')
                .map(|(_, q)| q)
                .unwrap_or_default()
                .as_bytes(),
        )
        .into_owned()
        .collect();
        assert_eq!(query[0], ("selector".into(), "site=north".into()));
        assert_eq!(
            query[1],
            ("textRegex".into(), "^disk \\(/var\\) 95%$".into())
        );
    }

    #[test]
    fn a_plan_shows_removed_and_added_lines_in_order() {
        let old = "a: 1\nb: 2\nc: 3";
        let new = "a: 1\nb: 20\nc: 3\nd: 4";
        assert_eq!(
            diff_lines(old, new),
            [
                (' ', "a: 1"),
                ('-', "b: 2"),
                ('+', "b: 20"),
                (' ', "c: 3"),
                ('+', "d: 4")
            ]
        );
        assert!(diff_lines(old, old).iter().all(|(c, _)| *c == ' '));
        assert_eq!(diff_lines("", "x"), [('+', "x")]);
    }
}
