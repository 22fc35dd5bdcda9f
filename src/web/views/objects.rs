//! Objects with their history and graphs, events, silences, downtimes and sites.

use super::*;
use crate::model::interval::TimeInterval;
use crate::model::observers::{Ballot, Verdict};

/// The object list's filters as the form shows them.
pub struct ObjectsFilter<'a> {
    pub q: &'a str,
    pub selector: &'a str,
    pub folder: &'a str,
    pub state: &'a str,
    pub sort: &'a str,
    pub group: &'a str,
    /// A federation site: its objects as mirrored here.
    pub site: &'a str,
}

/// The state filter's choices: (value of `state`, text). Hosts and services share the
/// worst-first order of their labels.
const STATE_CHOICES: [(&str, &str); 7] = [
    ("", "Any"),
    ("CRITICAL,DOWN", "Critical or down"),
    ("WARNING,UNREACHABLE", "Warning or unreachable"),
    ("UNKNOWN", "Unknown"),
    ("PENDING", "Pending (no result yet)"),
    ("OK,UP", "OK or up"),
    ("CRITICAL,DOWN,WARNING,UNREACHABLE,UNKNOWN", "Not OK"),
];

/// `/objects`: search and filter on the server, paged.
pub fn objects(
    now: &Now,
    groups: &[(String, Vec<ObjectView>)],
    paging: &Paging,
    filter: &ObjectsFilter<'_>,
    can: Can,
) -> Markup {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in [
        ("q", filter.q),
        ("selector", filter.selector),
        ("folder", filter.folder),
        ("state", filter.state),
        ("sort", filter.sort),
        ("group", filter.group),
        ("site", filter.site),
    ] {
        if !value.is_empty() {
            query.append_pair(name, value);
        }
    }
    let back = format!("/objects?{}", query.finish());
    let empty = groups.iter().all(|(_, rows)| rows.is_empty());
    html! {
        form.filters method="get" action="/objects" role="search" {
            div { label for="q" { "Name contains" } input #q type="search" name="q" value=(filter.q); }
            div { label for="selector" { "Labels" } input #selector type="text" name="selector" value=(filter.selector) placeholder="site=north,role=db"; }
            div { label for="folder" { "Folder" } input #folder type="text" name="folder" value=(filter.folder) placeholder="north/pumps"; }
            div { label for="site" { "Site (its objects as mirrored here)" } input #site type="text" name="site" value=(filter.site) placeholder="north"; }
            div {
                label for="state" { "State" }
                select #state name="state" {
                    @for (value, text) in STATE_CHOICES {
                        option value=(value) selected[filter.state.eq_ignore_ascii_case(value)] { (text) }
                    }
                }
            }
            (order_choices(Some("as created"), filter.sort, filter.group))
            button type="submit" { "Filter" }
        }
        @if can.save_filters { (save_filter("objects", &back)) }
        @if empty {
            p { "Nothing matches." }
        } @else {
            @if can.downtime {
                form #bulk method="post" action="/objects/downtime" {
                    input type="hidden" name="back" value=(back);
                }
            }
            @for (group, views) in groups {
                @if !filter.group.is_empty() { h2 { (group) " " small.muted { "(" (views.len()) ")" } } }
                ul.list {
                    @for v in views {
                        li {
                            @if can.downtime && filter.site.is_empty() {
                                input type="checkbox" name="object" value=(v.object.id) form="bulk" aria-label=(format!("Select {}", view_name(v)));
                            }
                            (state_badge(v.object.kind, v.state.as_ref()))
                            span.what {
                                // A site's object has its mirrored page under the site's id.
                                a href=(format!("/objects/{}", v.object.id)) { (view_name(v)) }
                                @if let Some(stale) = &v.stale { " " span.handled { "stale (" (stale.reason) ") since " (when(now, stale.since)) } }
                                @if let Some(s) = &v.state {
                                    " " small { (s.output) } br; small { "checked " (when(now, s.last_check)) }
                                }
                            }
                        }
                    }
                }
            }
            @if can.downtime && filter.site.is_empty() {
                div.acts.bulk {
                    label for="bulk-for" { "Downtime for the selected, for" }
                    select #bulk-for name="duration" form="bulk" {
                        @for (value, text) in &DURATIONS[..5] { option value=(value) selected[*value == "2h"] { (text) } }
                    }
                    label for="bulk-comment" { "because" }
                    input #bulk-comment type="text" name="comment" form="bulk" required maxlength="1000";
                    button form="bulk" type="submit" { "Start downtime" }
                }
            }
        }
        (paging.pager(&back, "Next"))
    }
}

/// `/objects/{id}`: the object's state and output, its services (a host), its recent events.
/// What the object page shows of one object.
pub struct ObjectPage<'a> {
    pub view: &'a ObjectView,
    /// A host's services.
    pub services: &'a [ObjectView],
    /// Its state changes of the last day, for the history bar.
    pub changes: &'a [Event],
    pub graphs: &'a [Graph],
    pub events: &'a [Event],
    /// Where its check runs: "Check now" only for one that runs here.
    pub check_run: CheckRun,
    /// The time its graphs show.
    pub window: GraphWindow,
    /// Its open and acknowledged alerts.
    pub alerts: &'a [Alert],
    /// Who observes it, when several sites vote on its state.
    pub observers: Option<&'a Verdict>,
    /// The federation site whose object this is, mirrored here (nothing is done to it here).
    pub site: Option<&'a str>,
}

pub fn object(now: &Now, page: ObjectPage<'_>, can: Can) -> Markup {
    let ObjectPage {
        view: v,
        services,
        changes,
        graphs,
        events,
        check_run,
        window,
        alerts,
        observers,
        site,
    } = page;
    let segments = history(now.at, v.state.as_ref().map(|s| s.state), changes);
    let here = format!("/objects/{}", v.object.id);
    html! {
        @if let Some(site) = site {
            p.notice {
                "This object is site " strong { (site) } "'s, mirrored here: its state is what the site forwarded, and the site checks and pages it."
                @if let Some(stale) = &v.stale { " Its uplink is lost since " (when(now, stale.since)) ": the state may be out of date." }
            }
        }
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
        @if let Some(verdict) = observers { (observer_votes(now, v.object.kind, verdict)) }
        h2 { "The last day" }
        (history_bar(v.object.kind, &segments))
        @if !graphs.is_empty() {
            h2 { "Metrics" }
            (graph_ranges(now, &here, window))
            @for g in graphs { (graph(g, now)) }
        }
        @if let Some(s) = &v.state {
            @if !s.long_output.is_empty() { h2 { "Long output" } pre { (s.long_output) } }
            @if !s.perfdata.is_empty() { h2 { "Performance data" } pre { (s.perfdata) } }
        }
        @if site.is_none() { div.acts {
            @match check_run {
                CheckRun::Here => @if can.check_now { (button(&format!("{here}/check-now"), &here, "Check now", &v.object.name)) },
                CheckRun::Passive if observers.is_some() => p.muted { "Its state is its observers' verdict." },
                CheckRun::Passive => p.muted { "No check runs here: it takes passive results only." },
                CheckRun::Agent => p.muted { "Its host's agent runs the check and reports the result." },
                CheckRun::Off => p.muted { "Its checks are off (enableChecks: false)." },
            }
            @if can.downtime {
                a.button href=(format!("/downtimes/new?object={}", v.object.id)) { "Schedule downtime" }
            }
            @if can.alerts {
                a.button href=(format!("/alerts?status=open&objectId={}", v.object.id)) { "Its alerts" }
            }
        } }
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
        @if !alerts.is_empty() {
            h2 { "Its alerts" }
            ul.list {
                @for a in alerts {
                    (alert_line(now, a, html! {
                        @if can.ack && a.status == AlertStatus::Open { (ack_form(a, &here)) }
                    }))
                }
            }
        }
        h2 { "Recent events" }
        @if can.objects_write && site.is_none() { (comment_form(&format!("{here}/comment"), &here)) }
        (timeline(now, events))
        p { a href=(format!("/events?objectId={}", v.object.id)) { "All its events" } }
    }
}

/// Which site sees what of an object several sites vote on, and what their votes make.
fn observer_votes(now: &Now, kind: ObjectKind, verdict: &Verdict) -> Markup {
    html! {
        h2 { "Observers" }
        p {
            (verdict.failing) " of " (verdict.voting) " voting observers fail, " (verdict.needed) " needed. "
            @if verdict.down {
                "They agree: it is down."
            } @else if let Some(at) = verdict.down_at {
                "They agree; it goes down " (when(now, at)) " if they still do."
            } @else {
                "Not enough agree: it is up."
            }
        }
        table {
            caption { "Each observer's vote" }
            thead { tr {
                th scope="col" { "Site" } th scope="col" { "Vote" } th scope="col" { "Sees" } th scope="col" { "Since" }
            } }
            tbody {
                @for vote in &verdict.votes {
                    tr {
                        th scope="row" { a href=(format!("/objects?site={}", encode_segment(&vote.site))) { (vote.site) } }
                        td {
                            @match vote.vote {
                                Ballot::Failing => span.badge.s-crit { "failing" },
                                Ballot::Ok => span.badge.s-ok { "ok" },
                                Ballot::Abstains => span.badge.s-info { "abstains" },
                            }
                            @if let Some(why) = &vote.missing { " " small.muted { (why) } }
                        }
                        td {
                            @if let Some(state) = vote.state {
                                span.badge.(state_class(kind, Some(state))) { (label(kind, Some(state))) }
                                " " (vote.output)
                            } @else { span.muted { "nothing yet" } }
                        }
                        td { @if let Some(at) = vote.since { (when(now, at)) } }
                    }
                }
            }
        }
    }
}

/// The filters an events page shows, as its URL gave them.
pub struct EventsFilter<'a> {
    pub kind: &'a str,
    pub severity: &'a str,
    pub object_id: &'a str,
    pub q: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    /// The page's address with these filters, for the next page.
    pub link: String,
}

/// `/events`: newest first, each as what it says (who was paged, over what, what became of
/// it), filtered by type, severity, object, words and a time range.
pub fn events(now: &Now, items: &[Event], f: &EventsFilter<'_>, next: Option<&str>) -> Markup {
    use crate::model::event::Severity;
    html! {
        form.filters method="get" action="/events" {
            div {
                label for="q" { "Search" }
                input #q type="search" name="q" value=(f.q) placeholder="words in the event";
            }
            div {
                label for="types" { "Type" }
                select #types name="types" {
                    option value="" selected[f.kind.is_empty()] { "All" }
                    @for t in crate::model::event::EventType::ALL {
                        option value=(t.as_str()) selected[f.kind == t.as_str()] { (t.as_str()) }
                    }
                }
            }
            div {
                label for="severity" { "Severity" }
                select #severity name="severity" {
                    option value="" selected[f.severity.is_empty()] { "All" }
                    @for s in [Severity::Critical, Severity::Warning, Severity::Info, Severity::Ok] {
                        option value=(s.as_str()) selected[f.severity == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            div {
                label for="from" { "From" }
                input #from type="datetime-local" name="from" value=(f.from);
            }
            div {
                label for="to" { "To" }
                input #to type="datetime-local" name="to" value=(f.to);
            }
            @if !f.object_id.is_empty() {
                input type="hidden" name="objectId" value=(f.object_id);
            }
            button type="submit" { "Filter" }
            @if !f.object_id.is_empty() {
                " " a href=(format!("/objects/{}", f.object_id)) { "its object" }
                " · " a href="/events" { "all objects" }
            }
        }
        (timeline(now, items))
        @if let Some(cursor) = next {
            nav.pager aria-label="Pages" {
                a.button href=(format!("{}&cursor={cursor}", f.link)) { "Older" }
            }
        }
    }
}

/// Extending a running or planned silence or downtime at the version the page showed (a
/// change made since is refused, as `If-Match` is).
fn extend_form(action: &str, back: &str, version: u64, what: &str) -> Markup {
    html! {
        form.extend method="post" action=(action) {
            input type="hidden" name="back" value=(back);
            input type="hidden" name="version" value=(version);
            select name="by" aria-label=(format!("Extend {what} by")) {
                option value="1h" selected { "1 hour" }
                option value="4h" { "4 hours" }
                option value="24h" { "1 day" }
                option value="168h" { "7 days" }
            }
            " "
            button type="submit" aria-label=(format!("Extend {what}")) { "Extend" }
        }
    }
}

/// A silence or downtime as its edit form shows it, at the version the page read: why, when
/// (on the viewer's wall clock, `2027-03-27T22:00`), and a silence's matchers; what a downtime
/// covers and how it repeats stay as they are.
pub struct SuppressionEdit {
    /// `silences` or `downtimes`.
    pub kind: &'static str,
    pub id: Uuid,
    pub version: u64,
    /// A silence's selector and title pattern.
    pub matchers: Option<(String, String)>,
    /// What a downtime covers, and how.
    pub cover: Option<DowntimeCover>,
    pub comment: String,
    pub starts: String,
    pub ends: String,
}

/// What a downtime's edit form shows of what it covers, and how.
#[derive(Clone, Debug, Default)]
pub struct DowntimeCover {
    /// The one object it covers, by name; none: `selector` covers.
    pub object: Option<String>,
    pub selector: String,
    /// A host's downtime covers its services too.
    pub services: bool,
    /// A flexible downtime's length (`1h`); empty: fixed.
    pub flexible: String,
    /// None: windows one form cannot show, kept as they are.
    pub repeat: Option<Repeat>,
    /// The zone its windows' times are in.
    pub zone: String,
}

impl DowntimeCover {
    /// `d`'s cover, its one object named `object`; windows without a zone are in `zone`.
    pub fn of(d: &Downtime, object: Option<String>, zone: &str) -> DowntimeCover {
        let flexible = d.duration.filter(|_| d.kind == "flexible").map(|secs| {
            if secs % 3600 == 0 {
                format!("{}h", secs / 3600)
            } else {
                format!("{}m", secs.div_ceil(60))
            }
        });
        DowntimeCover {
            object,
            selector: d.selector.clone(),
            services: d.services,
            flexible: flexible.unwrap_or_default(),
            repeat: Repeat::of(d),
            zone: d
                .time_intervals
                .first()
                .and_then(|i| i.location.clone())
                .unwrap_or_else(|| zone.to_string()),
        }
    }
}

impl SuppressionEdit {
    pub fn silence(s: &Silence, now: &Now) -> SuppressionEdit {
        SuppressionEdit {
            kind: "silences",
            id: s.id,
            version: s.version,
            matchers: Some((s.selector.clone(), s.text_regex.clone())),
            cover: None,
            comment: s.comment.clone(),
            starts: now.wall(s.starts_at),
            ends: now.wall(s.expires_at),
        }
    }

    /// `d`'s form, its one object named `object`.
    pub fn downtime(d: &Downtime, object: Option<String>, now: &Now) -> SuppressionEdit {
        SuppressionEdit {
            kind: "downtimes",
            id: d.id,
            version: d.version,
            matchers: None,
            cover: Some(DowntimeCover::of(d, object, now.zone_name())),
            comment: d.comment.clone(),
            starts: now.wall(d.start),
            ends: now.wall(d.end),
        }
    }
}

/// `/silences/{id}/edit`, `/downtimes/{id}/edit`: the form saving `e` at the version shown.
pub fn suppression_edit_form(e: &SuppressionEdit) -> Markup {
    html! {
        form method="post" action=(format!("/{}/{}", e.kind, e.id)) {
            input type="hidden" name="version" value=(e.version);
            @if let Some((selector, text_regex)) = &e.matchers {
                label for="selector" { "Alert labels (a selector; empty: any)" }
                input #selector type="text" name="selector" value=(selector);
                label for="textRegex" { "Alert title matches (a regular expression; empty: any)" }
                input #textRegex type="text" name="textRegex" value=(text_regex);
            }
            @if let Some(cover) = &e.cover {
                @if let Some(object) = &cover.object {
                    p { "For " strong { (object) } "." }
                    label for="selector" { "Or instead, objects with the labels (a selector; empty: " (object) ")" }
                    input #selector type="text" name="selector" value=(cover.selector) placeholder="site=north";
                } @else {
                    label for="selector" { "Objects with the labels (a selector)" }
                    input #selector type="text" name="selector" required value=(cover.selector);
                }
                (services_select(cover.services))
            }
            label for="starts" { "Starts (your time zone)" }
            input #starts type="datetime-local" name="starts" required value=(e.starts);
            label for="ends" { "Ends (your time zone)" }
            input #ends type="datetime-local" name="ends" required value=(e.ends);
            @if let Some(cover) = &e.cover {
                (flexible_select(&cover.flexible))
                @match &cover.repeat {
                    Some(repeat) => (repeat_fields(repeat, Some(&cover.zone))),
                    None => p.muted { "It repeats as set through the API (several windows, years or a calendar feed); saving here keeps that." },
                }
            }
            label for="comment" { "Why (required)" }
            input #comment type="text" name="comment" required maxlength="1000" value=(e.comment);
            p { button.primary type="submit" { "Save" } " " a href=(format!("/{}", e.kind)) { "Back" } }
        }
    }
}

/// `/silences`: active (with how many active alerts each matches now), upcoming, expired.
pub fn silences(now: &Now, items: &[(Silence, usize)], can_write: bool) -> Markup {
    let active: Vec<_> = items.iter().filter(|(s, _)| s.active(now.at)).collect();
    let upcoming: Vec<_> = items.iter().filter(|(s, _)| s.starts_at > now.at).collect();
    let expired: Vec<_> = items
        .iter()
        .filter(|(s, _)| s.expires_at <= now.at)
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
                        @if s.expires_at > now.at { (ends(now, s.expires_at, "expires")) } @else { "expired " (when(now, s.expires_at)) }
                    }
                    @if let Some(n) = reach { br; small { "matches " (n) " active alert" @if n != 1 { "s" } " now" } }
                }
                span.acts {
                    @if can_write && s.expires_at > now.at {
                        a.button href=(format!("/silences/{}/edit", s.id)) aria-label=(format!("Edit {}", s.comment)) { "Edit" }
                        (extend_form(&format!("/silences/{}/extend", s.id), "/silences", s.version, &s.comment))
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
    /// A downtime's start as typed.
    pub start: String,
    pub repeat: Repeat,
    /// A flexible downtime's length as chosen (empty: fixed).
    pub flexible: String,
    /// Federation sites a downtime is shipped to, as typed; offered to whom may write the
    /// configuration.
    pub sites: Option<String>,
    /// A host's downtime covers its services too.
    pub services: bool,
}

/// A recurring downtime's windows as the form's fields show them, comma-separated.
#[derive(Clone, Debug, Default)]
pub struct Repeat {
    pub weekdays: String,
    pub days_of_month: String,
    pub months: String,
    pub times: String,
}

impl Repeat {
    /// `d`'s windows as the form's fields; none when one form cannot show them (several
    /// intervals, years, a calendar feed), which an edit keeps as they are.
    pub fn of(d: &Downtime) -> Option<Repeat> {
        if d.calendar_url.is_some() || d.time_intervals.len() > 1 {
            return None;
        }
        let Some(i) = d.time_intervals.first() else {
            return Some(Repeat::default());
        };
        if !i.years.is_empty() {
            return None;
        }
        let times: Vec<String> = i
            .times
            .iter()
            .map(|t| format!("{}-{}", t.start_time, t.end_time))
            .collect();
        Some(Repeat {
            weekdays: i.weekdays.join(", "),
            days_of_month: i.days_of_month.join(", "),
            months: i.months.join(", "),
            times: times.join(", "),
        })
    }
}

/// The fields of a downtime's recurrence; `zone`, where known, is the one its times are in.
fn repeat_fields(r: &Repeat, zone: Option<&str>) -> Markup {
    html! {
        fieldset {
            legend {
                "Repeat within that time (optional"
                @if let Some(zone) = zone { "; times in " (zone) }
                ")"
            }
            label for="weekdays" { "On weekdays (e.g. saturday, or monday:friday)" }
            input #weekdays type="text" name="weekdays" value=(r.weekdays);
            label for="daysOfMonth" { "On days of the month (e.g. 1, 15:20, -1 for the last)" }
            input #daysOfMonth type="text" name="daysOfMonth" value=(r.days_of_month);
            label for="months" { "In months (e.g. december, or june:august)" }
            input #months type="text" name="months" value=(r.months);
            label for="times" { "Between (e.g. 22:00-24:00; empty: all day)" }
            input #times type="text" name="times" value=(r.times);
        }
    }
}

/// Whether a downtime is flexible, and for how long (`chosen`; empty: fixed).
fn flexible_select(chosen: &str) -> Markup {
    let offered = DURATIONS[..4].iter().any(|(value, _)| *value == chosen);
    html! {
        label for="flexible" { "Flexible: from the first problem within that time, for" }
        select #flexible name="flexible" {
            option value="" selected[chosen.is_empty()] { "no: the whole time (fixed)" }
            @for (value, text) in &DURATIONS[..4] {
                option value=(value) selected[chosen == *value] { (text) }
            }
            @if !chosen.is_empty() && !offered { option value=(chosen) selected { (chosen) } }
        }
    }
}

/// Whether a host's downtime covers its services (`services`) or the host alone.
fn services_select(services: bool) -> Markup {
    html! {
        label for="services" { "A host's downtime covers" }
        select #services name="services" {
            option value="" selected[services] { "the host and its services" }
            option value="alone" selected[!services] { "the host alone" }
        }
    }
}

/// When a silence or downtime starts (ahead, on the viewer's wall clock) and for how long.
fn when_field(d: &SuppressionDraft) -> Markup {
    html! {
        label for="start" { "Starts (your time zone; empty: now)" }
        input #start type="datetime-local" name="start" value=(d.start);
        (duration_select(if d.duration.is_empty() { "2h" } else { &d.duration }))
    }
}

/// `/silences/new`: labels and title pattern (pre-filled from an alert), when it starts, how
/// long, why.
/// The new silence form; with `preview`, what a silence of its matchers would hold now.
pub fn silence_form(d: &SuppressionDraft, preview: Option<&[Alert]>) -> Markup {
    html! {
        @if let Some(held) = preview {
            section aria-labelledby="preview" {
                h2 #preview { "It would hold " (held.len()) " alerts now" }
                ul.list {
                    @for a in held.iter().take(10) {
                        li { (severity_badge(a.severity)) " " a href=(format!("/alerts/{}", a.id)) { (a.title) } }
                    }
                }
            }
        }
        form method="post" action="/silences" {
            label for="selector" { "Alert labels (a selector; empty: any)" }
            input #selector type="text" name="selector" value=(d.selector) placeholder="site=north,team=ops";
            label for="textRegex" { "Alert title matches (a regular expression; empty: any)" }
            input #textRegex type="text" name="textRegex" value=(d.text_regex);
            (when_field(d))
            label for="comment" { "Why (required)" }
            input #comment type="text" name="comment" required maxlength="1000" value=(d.comment);
            p {
                button.primary type="submit" { "Create silence" }
                " "
                button type="submit" formmethod="get" formaction="/silences/new" { "Preview" }
            }
        }
        p.muted { "A silence never stops an alert from opening; it holds its pages while it lasts." }
    }
}

/// `/downtimes`: active, upcoming and ended downtimes.
pub fn downtimes(now: &Now, items: &[Downtime], can_write: bool) -> Markup {
    let active: Vec<_> = items.iter().filter(|d| d.active(now.at)).collect();
    let upcoming: Vec<_> = items
        .iter()
        .filter(|d| !d.active(now.at) && d.end > now.at)
        .collect();
    let ended: Vec<_> = items.iter().filter(|d| d.end <= now.at).take(50).collect();
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
                        @if d.start > now.at { "starts " (when(now, d.start)) " · " }
                        @if d.end > now.at { (ends(now, d.end, "ends")) } @else { "ended " (when(now, d.end)) }
                    }
                    @if d.from_main || !d.sites.is_empty() {
                        br;
                        small {
                            @if d.from_main { "from the main (changed there)" }
                            @else { "shipped to sites " (d.sites.join(", ")) }
                        }
                    }
                    @if d.recurs() {
                        br;
                        small {
                            @if d.calendar_url.is_some() {
                                "windows from a calendar"
                                @if let Some(read) = d.calendar.as_ref().and_then(|c| c.read_at) { ", read " (when(now, read)) }
                                @if let Some(error) = d.calendar.as_ref().and_then(|c| c.error.as_deref()) { " (last read failed: " (error) ")" }
                            } @else {
                                "recurs " (recurrence(&d.time_intervals))
                            }
                        }
                        @if !d.occurrences.is_empty() {
                            ul {
                                @for w in d.occurrences.iter().take(3) {
                                    li { small { (now.local(w.start)) " – " (now.local(w.end)) } }
                                }
                            }
                        }
                    }
                }
                span.acts {
                    @if can_write && d.end > now.at && !d.from_main {
                        a.button href=(format!("/downtimes/{}/edit", d.id)) aria-label=(format!("Edit {}", d.comment)) { "Edit" }
                        (extend_form(&format!("/downtimes/{}/extend", d.id), "/downtimes", d.version, &d.comment))
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

/// Recurring windows in words: `saturday 22:00-24:00 (Europe/Berlin)`; intervals joined by
/// "or".
fn recurrence(intervals: &[TimeInterval]) -> String {
    intervals
        .iter()
        .map(|i| {
            let times: Vec<String> = i
                .times
                .iter()
                .map(|t| format!("{}-{}", t.start_time, t.end_time))
                .collect();
            let parts: Vec<String> = [
                i.weekdays.join(", "),
                if i.days_of_month.is_empty() {
                    String::new()
                } else {
                    format!("days {}", i.days_of_month.join(", "))
                },
                if i.months.is_empty() {
                    String::new()
                } else {
                    format!("in {}", i.months.join(", "))
                },
                i.years.join(", "),
                if times.is_empty() {
                    "all day".into()
                } else {
                    times.join(", ")
                },
            ]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
            format!(
                "{} ({})",
                parts.join(" "),
                i.location.as_deref().unwrap_or("UTC")
            )
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `/downtimes/new`: one object (from its page) or a selector, from now for how long, why.
pub fn downtime_form(d: &SuppressionDraft) -> Markup {
    html! {
        form method="post" action="/downtimes" {
            @if let Some((id, name)) = &d.object {
                input type="hidden" name="objectId" value=(id);
                p { "For " strong { (name) } "." }
                (services_select(d.services))
            } @else {
                label for="selector" { "Objects with the labels (a selector)" }
                input #selector type="text" name="selector" required value=(d.selector) placeholder="site=north";
            }
            (when_field(d))
            (flexible_select(&d.flexible))
            (repeat_fields(&d.repeat, None))
            @if let (None, Some(sites)) = (&d.object, &d.sites) {
                label for="sites" { "Ship to federation sites (e.g. north, south; they keep it without an uplink)" }
                input #sites type="text" name="sites" value=(sites);
            }
            label for="comment" { "Why (required)" }
            input #comment type="text" name="comment" required maxlength="1000" value=(d.comment);
            p { button.primary type="submit" { "Schedule downtime" } }
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

/// The windows a graph shows, as the links above the graphs name them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GraphSpan {
    Hour,
    SixHours,
    #[default]
    Day,
    Week,
    Month,
}

impl GraphSpan {
    pub const ALL: [GraphSpan; 5] = [
        GraphSpan::Hour,
        GraphSpan::SixHours,
        GraphSpan::Day,
        GraphSpan::Week,
        GraphSpan::Month,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GraphSpan::Hour => "1h",
            GraphSpan::SixHours => "6h",
            GraphSpan::Day => "24h",
            GraphSpan::Week => "7d",
            GraphSpan::Month => "30d",
        }
    }

    pub fn parse(text: &str) -> Option<GraphSpan> {
        GraphSpan::ALL.into_iter().find(|s| s.name() == text)
    }

    pub fn secs(self) -> i64 {
        match self {
            GraphSpan::Hour => 3600,
            GraphSpan::SixHours => 6 * 3600,
            GraphSpan::Day => 24 * 3600,
            GraphSpan::Week => 7 * 24 * 3600,
            GraphSpan::Month => 30 * 24 * 3600,
        }
    }
}

/// The time an object page's graphs show: a span ending at `end` (`None`: now).
#[derive(Clone, Copy, Debug, Default)]
pub struct GraphWindow {
    pub span: GraphSpan,
    pub end: Option<Timestamp>,
}

impl GraphWindow {
    /// `[from, to]` of the window at `now`; an end in the future is now.
    pub fn bounds(&self, now: Timestamp) -> (Timestamp, Timestamp) {
        let to = self.end.filter(|e| *e < now).unwrap_or(now);
        let from = Timestamp::from_millis(to.as_millis() - self.span.secs() * 1000).unwrap_or(to);
        (from, to)
    }

    fn query(span: GraphSpan, end: Option<Timestamp>) -> String {
        match end {
            Some(e) => format!("?range={}&end={e}", span.name()),
            None => format!("?range={}", span.name()),
        }
    }
}

/// The range links above an object's graphs: the spans (zooming in or out around the window's
/// end) and a step earlier or later.
fn graph_ranges(now: &Now, here: &str, w: GraphWindow) -> Markup {
    let (from, to) = w.bounds(now.at);
    let later = to.as_millis() + w.span.secs() * 1000;
    let later = (later < now.at.as_millis())
        .then(|| Timestamp::from_millis(later))
        .flatten();
    html! {
        nav.ranges aria-label="Graph range" {
            @for s in GraphSpan::ALL {
                @if s == w.span {
                    a href=(format!("{here}{}", GraphWindow::query(s, w.end))) aria-current="page" { (s.name()) }
                } @else {
                    a href=(format!("{here}{}", GraphWindow::query(s, w.end))) { (s.name()) }
                }
            }
            a href=(format!("{here}{}", GraphWindow::query(w.span, Some(from)))) { "← earlier" }
            @if w.end.is_some_and(|e| e < now.at) {
                a href=(format!("{here}{}", GraphWindow::query(w.span, later))) { "later →" }
            }
        }
    }
}

/// One metric series of an object, for its graph.
pub struct Graph {
    /// The caption: the metric on its object's page, object and metric on a dashboard.
    pub label: String,
    pub unit: String,
    /// Aggregates of the window, oldest first: each the mean of its bucket.
    pub points: Vec<(Timestamp, f64)>,
    /// The window drawn.
    pub from: Timestamp,
    pub to: Timestamp,
    /// The value of the object's last result, when it reported this metric.
    pub current: Option<f64>,
    /// Where the warning and critical ranges of that result begin.
    pub warn: Vec<f64>,
    pub crit: Vec<f64>,
}

/// A value as an operator reads it: three or four significant digits, no float noise
/// (`97.2`, `52.8`, `0.0042`, `1234567`).
pub fn figure(v: f64) -> String {
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (2 - a.log10().floor() as i32).clamp(2, 9) as usize
    };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    if text == "-0" { "0".into() } else { text }
}

fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "" => figure(v),
        "%" => format!("{} %", figure(v)),
        u => format!("{} {u}", figure(v)),
    }
}

/// A line graph as inline SVG: rendered by the server, so it needs no script and no library.
/// Dashed lines mark the warning and critical thresholds; each sample's slice carries its time
/// and value as a title (shown on hover, and by `live.js` on a tap).
pub(super) fn graph(g: &Graph, now: &Now) -> Markup {
    const W: f64 = 600.0;
    const H: f64 = 120.0;
    let short = |t: Timestamp| {
        t.0.to_zoned(now.zone.clone())
            .strftime("%a %d %b %H:%M")
            .to_string()
    };
    let Some(last) = g.points.last() else {
        return html! { p.muted { (g.label) ": no samples from " (short(g.from)) " to " (short(g.to)) "." } };
    };
    let (t0, t1) = (g.from.as_millis() as f64, g.to.as_millis() as f64);
    let (lo, hi) = g
        .points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, v)| {
            (lo.min(*v), hi.max(*v))
        });
    // The thresholds are part of the scale, so the distance to them is seen.
    let (bottom, top) = g
        .warn
        .iter()
        .chain(&g.crit)
        .fold((lo, hi), |(b, t), v| (b.min(*v), t.max(*v)));
    let pad = if top > bottom {
        (top - bottom) * 0.05
    } else {
        1.0
    };
    let (bottom, top) = (bottom - pad, top + pad);
    let x = |t: Timestamp| {
        if t1 > t0 {
            ((t.as_millis() as f64 - t0) / (t1 - t0) * W).clamp(0.0, W)
        } else {
            W
        }
    };
    let y = |v: f64| H - (v - bottom) / (top - bottom) * H;
    let mut line: Vec<String> = g
        .points
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    // One sample is a short dash where it was taken, not an invisible point.
    if g.points.len() == 1 {
        let at = x(last.0);
        line = vec![
            format!("{:.1},{:.1}", (at - 6.0).max(0.0), y(last.1)),
            format!("{:.1},{:.1}", (at + 6.0).min(W), y(last.1)),
        ];
    }
    let now = g.current.unwrap_or(last.1);
    let unit = g.unit.as_str();
    // Each sample owns the slice between the midpoints to its neighbours.
    let xs: Vec<f64> = g.points.iter().map(|(t, _)| x(*t)).collect();
    let slices = g.points.iter().enumerate().map(|(i, (t, v))| {
        let left = if i == 0 {
            0.0
        } else {
            (xs[i - 1] + xs[i]) / 2.0
        };
        let right = if i + 1 == xs.len() {
            W
        } else {
            (xs[i] + xs[i + 1]) / 2.0
        };
        (
            left,
            (right - left).max(0.5),
            format!("{} · {}", short(*t), with_unit(*v, unit)),
        )
    });
    let thresholds = g
        .warn
        .iter()
        .map(|v| ("warn", *v))
        .chain(g.crit.iter().map(|v| ("crit", *v)));
    let limits = {
        let mut parts = Vec::new();
        if !g.warn.is_empty() {
            let w: Vec<String> = g.warn.iter().map(|v| figure(*v)).collect();
            parts.push(format!("warning at {}", w.join(" and ")));
        }
        if !g.crit.is_empty() {
            let c: Vec<String> = g.crit.iter().map(|v| figure(*v)).collect();
            parts.push(format!("critical at {}", c.join(" and ")));
        }
        parts.join(", ")
    };
    let describe = format!(
        "{} from {} to {}: between {} and {}, now {}{}",
        g.label,
        short(g.from),
        short(g.to),
        with_unit(lo, unit),
        with_unit(hi, unit),
        with_unit(now, unit),
        if limits.is_empty() {
            String::new()
        } else {
            format!("; {limits}")
        }
    );
    html! {
        figure.graph {
            figcaption {
                strong { (g.label) } " " (with_unit(now, unit)) " now"
                " " small.muted {
                    @if hi > lo { (with_unit(lo, unit)) " – " (with_unit(hi, unit)) } @else { "one level" }
                    @if !limits.is_empty() { " · " (limits) }
                }
                " " output.muted {}
            }
            svg viewBox=(format!("0 0 {W} {H}")) preserveAspectRatio="none" width="100%" height="120" role="img" aria-label=(describe) {
                @for (class, v) in thresholds {
                    line.(class) x1="0" x2=(W) y1=(format!("{:.1}", y(v))) y2=(format!("{:.1}", y(v))) vector-effect="non-scaling-stroke" {}
                }
                polyline points=(line.join(" ")) fill="none" stroke="currentColor" stroke-width="2" vector-effect="non-scaling-stroke" {}
                @for (left, width, title) in slices {
                    rect x=(format!("{left:.1}")) width=(format!("{width:.1}")) height=(H) { title { (title) } }
                }
            }
            p.muted.span { small { (short(g.from)) } small { (short(g.to)) } }
        }
    }
}

/// `/sites`: each field site as the main sees it.
/// A clock offset in words: `2m0s ahead`, `150ms behind`.
fn offset_words(ms: i64) -> String {
    let d = crate::model::GoDuration(std::time::Duration::from_millis(ms.unsigned_abs()));
    if ms >= 0 {
        format!("{d} ahead")
    } else {
        format!("{d} behind")
    }
}

/// `/sites`: this instance's own uplink when it is a site (`edge`), and the sites of a main
/// with their connection, clock and configuration.
pub fn sites(now: &Now, items: &[SiteOverview], edge: &EdgeStatus) -> Markup {
    html! {
        @if edge.enabled {
            section aria-labelledby="this-site" {
                h2 #this-site { "This site: " (edge.name) }
                p {
                    "Main " code { (edge.main_url) } " · heartbeat "
                    @if let Some(at) = edge.last_heartbeat_at { (when(now, at)) } @else { "never answered" }
                    " · " (edge.forward.pending) " events waiting to be forwarded"
                    @if let Some(ms) = edge.clock_offset_ms { " · clock " (offset_words(ms)) " of the main's" }
                }
                @if let Some(since) = edge.uplink_lost_since { p { strong { "Uplink lost " } (when(now, since)) } }
                @if !edge.last_error.is_empty() { p { strong { "Last failure: " } (edge.last_error) } }
                @if !edge.apply_error.is_empty() { p { strong { "The bundle was not applied: " } (edge.apply_error) } }
            }
        }
        @if items.is_empty() {
            @if !edge.enabled {
                p { "No sites. A site is a configuration document of kind " code { "sites" } "." }
            }
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
                                @if s.config_drift { " " strong { "(drifted)" } }
                                @if !s.apply_error.is_empty() { " · " strong { "apply failed: " (s.apply_error) } }
                                @if let Some(ms) = s.clock_offset_ms {
                                    " · clock " @if s.clock_drift { strong { (offset_words(ms)) } } @else { (offset_words(ms)) }
                                }
                                " · " (s.forwarded_alerts_open) " open alerts forwarded"
                            }
                        }
                    }
                }
            }
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
            payload: json!({"fromState": from, "toState": to}).into(),
            site: None,
        }
    }

    /// Values read as an operator says them, never with float noise.
    #[test]
    fn figures_are_rounded_to_what_is_read() {
        assert_eq!(figure(52.81111111111111), "52.8");
        assert_eq!(figure(97.2), "97.2");
        assert_eq!(figure(100.0), "100");
        assert_eq!(figure(1234567.89), "1234568");
        assert_eq!(figure(4.56789), "4.57");
        assert_eq!(figure(0.004213), "0.00421");
        assert_eq!(figure(0.0), "0");
        assert_eq!(figure(-0.0001), "-0.0001");
        assert_eq!(figure(-12.34), "-12.3");
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
}
