//! Problems, alerts and incidents.

use super::*;

/// The new-silence form pre-filled to match alerts like `a` (`Alert::silence_matchers`).
pub fn silence_like(a: &Alert) -> String {
    let (selector, title) = a.silence_matchers();
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("selector", &selector)
        .append_pair("textRegex", &title)
        .finish();
    format!("/silences/new?{query}")
}

/// The problems page's narrowing as typed, for its form and its links.
#[derive(Clone, Default)]
pub struct InboxQuery {
    pub q: String,
    pub severity: String,
    pub selector: String,
    /// `<1h`, `<24h`, `>24h`, `>168h`, or empty.
    pub age: String,
    pub sort: String,
    pub group: String,
    pub handled: bool,
    /// Every open alert's box ticked (`select=all`), so selecting all needs no script.
    pub select_all: bool,
}

impl InboxQuery {
    /// The page's address with these filters (and `handled` as given), from `from`.
    pub fn href(&self, handled: bool, from: usize) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("q", self.q.as_str()),
            ("severity", &self.severity),
            ("selector", &self.selector),
            ("age", &self.age),
            ("sort", &self.sort),
            ("group", &self.group),
        ] {
            if !value.is_empty() {
                query.append_pair(name, value);
            }
        }
        if handled {
            query.append_pair("handled", "1");
        }
        if from > 0 {
            query.append_pair("from", &from.to_string());
        }
        let query = query.finish();
        if query.is_empty() {
            "/".into()
        } else {
            format!("/?{query}")
        }
    }
}

/// One page of the inbox: its entries (in groups when grouped), after how many, of how many.
pub struct InboxPage<'a> {
    pub groups: &'a [(String, Vec<Entry>)],
    pub offsets: Offsets,
    pub query: &'a InboxQuery,
}

const AGE_CHOICES: &[(&str, &str)] = &[
    ("", "Any age"),
    ("<1h", "New in the last hour"),
    ("<24h", "New in the last day"),
    (">24h", "Standing over a day"),
    (">168h", "Standing over a week"),
];

/// `/`: the inbox: what is wrong now and the alerts no object stands for, unhandled first,
/// worst first; narrowed, sorted and grouped as `page.query` says; open alerts can be
/// acknowledged or shelved in bulk.
pub fn problems(now: &Now, page: InboxPage<'_>, can: Can) -> Markup {
    let InboxPage {
        groups,
        offsets,
        query,
    } = page;
    let Offsets {
        from, shown, total, ..
    } = offsets;
    let back = query.href(query.handled, from);
    let back = back.as_str();
    let choice = |value: &str, chosen: &str| value == chosen;
    html! {
        (tabs("Which problems", &[(query.href(false, 0), "Unhandled", !query.handled), (query.href(true, 0), "All, handled too", query.handled)]))
        form.filters method="get" action="/" role="search" {
            @if query.handled { input type="hidden" name="handled" value="1"; }
            div { label for="q" { "Search" } input #q type="search" name="q" value=(query.q) placeholder="name, output, label=value" accesskey="/"; }
            div {
                label for="severity" { "Severity" }
                select #severity name="severity" {
                    option value="" selected[query.severity.is_empty()] { "Any" }
                    @for level in Level::ALL {
                        option value=(level.as_str()) selected[choice(level.as_str(), &query.severity)] { (level.as_str()) }
                    }
                }
            }
            div { label for="selector" { "Labels" } input #selector type="text" name="selector" value=(query.selector) placeholder="site=north"; }
            div {
                label for="age" { "Age" }
                select #age name="age" {
                    @for (value, text) in AGE_CHOICES { option value=(value) selected[choice(value, &query.age)] { (text) } }
                }
            }
            (order_choices(None, &query.sort, &query.group))
            button type="submit" { "Filter" }
            @if query.href(query.handled, 0) != "/" { " " a href="/" { "Clear" } }
        }
        @if shown == 0 && total > 0 {
            p { "No more problems past this point. " a href=(query.href(query.handled, 0)) { "Back to the first" } }
        } @else if shown == 0 {
            p { "No problems here. Everything checked is OK or UP, and no alert is open." }
        } @else {
            @if can.ack {
                form #bulk method="post" action="/alerts/ack" {
                    input type="hidden" name="back" value=(back);
                }
            }
            @for (group, entries) in groups {
                @if !query.group.is_empty() { h2 { (group) " " small.muted { "(" (entries.len()) ")" } } }
                ul.list {
                    @for e in entries { (inbox_row(now, e, back, can, query.select_all)) }
                }
            }
            @if can.ack {
                div.acts.bulk {
                    @if query.select_all {
                        a.button href=(back) { "Select none" }
                    } @else {
                        a.button href=(format!("{back}{}select=all", if back.contains('?') { "&" } else { "?" })) { "Select all" }
                    }
                    (bulk_actions(can))
                }
            }
        }
        @if can.save_filters { (save_filter("problems", &query.href(query.handled, 0))) }
        (offsets_pager(offsets, |from| query.href(query.handled, from)))
    }
}

/// What may be done to the rows selected into the `#bulk` form: acknowledge or shelve their
/// alerts, silence alerts like them, put their objects in downtime.
fn bulk_actions(can: Can) -> Markup {
    html! {
        button form="bulk" type="submit" { "Acknowledge selected" }
        label for="bulk-for" { "or, for" }
        select #bulk-for name="duration" form="bulk" {
            option value="1h" selected { "1 hour" }
            option value="4h" { "4 hours" }
            option value="8h" { "8 hours" }
        }
        button form="bulk" type="submit" formaction="/alerts/shelve" { "Shelve selected" }
        @if can.silence || can.downtime {
            label for="bulk-comment" { "because (a silence or downtime needs it)" }
            input #bulk-comment type="text" name="comment" form="bulk" maxlength="1000";
        }
        @if can.silence { button form="bulk" type="submit" formaction="/alerts/silence" { "Silence alerts like the selected" } }
        @if can.downtime { button form="bulk" type="submit" formaction="/objects/downtime" { "Downtime for the selected" } }
    }
}

/// How an inbox entry's alert is held: silenced, snoozed, held back, shelved.
fn entry_marks(now: &Now, e: &Entry) -> Markup {
    html! {
        @if e.silenced { " " span.handled { "🔕 silenced" } }
        @if let Some(a) = e.alert() {
            @if let Some(until) = a.snoozed_until.filter(|u| *u > now.at) { " " span.handled { "snoozed until " (when(now, until)) } }
            (noise_marks(now, a))
        }
    }
}

/// A line of the inbox: the object's state or the alert's severity, what it is, since when,
/// how it is handled; its alert to select, and to acknowledge.
fn inbox_row(now: &Now, e: &Entry, back: &str, can: Can, select_all: bool) -> Markup {
    let name = e.name();
    let alert = e.alert();
    html! {
        li data-key=(alert.map(|a| a.id).or(e.problem().map(|p| p.object.id)).unwrap_or_default()) {
            @match (can.ack, alert, e.problem()) {
                (true, Some(a), _) if a.status == AlertStatus::Open => {
                    input type="checkbox" name="id" value=(a.id) form="bulk" checked[select_all] aria-label=(format!("Select {name}"));
                }
                // A problem without an open alert is selected for a downtime of its object.
                (true, None, Some(p)) if can.downtime => {
                    input type="checkbox" name="object" value=(p.object.id) form="bulk" checked[select_all] aria-label=(format!("Select {name}"));
                }
                _ => {}
            }
            @match &e.subject {
                Subject::Problem(p, _) => {
                    (state_badge(p.object.kind, Some(&p.state)))
                    span.what {
                        a href=(format!("/objects/{}", p.object.id)) { (name) }
                        " " small { (p.state.output) }
                        br;
                        small { "since " (when(now, e.since())) }
                        @if let Some(by) = &p.state.acked_by { " " span.handled { "✓ acknowledged by " (by) } }
                        @if p.state.downtime_depth > 0 { " " span.handled { "⏸ in downtime" } }
                        (entry_marks(now, e))
                    }
                }
                Subject::Alert(a) => {
                    (severity_badge(a.severity))
                    span.what {
                        a href=(format!("/alerts/{}", a.id)) { (name) }
                        @if let Some(source) = a.payload.get("source").and_then(|v| v.as_str()) { " " small { "from " (source) } }
                        br;
                        small { "alert, opened " (when(now, e.since())) }
                        @if let Some(by) = &a.acked_by { " " span.handled { "✓ acknowledged by " (by) } }
                        (entry_marks(now, e))
                    }
                }
            }
            span.acts {
                @if let (true, Some(a)) = (can.ack, alert) {
                    @if a.status == AlertStatus::Open {
                        (button(&format!("/alerts/{}/ack", a.id), back, "Acknowledge", &name))
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

/// The alert list's filters as the page shows them.
pub struct AlertsFilter<'a> {
    /// The tab: `open`, `acked` or `resolved,expired`.
    pub status: &'a str,
    pub severity: &'a str,
    pub rule_id: &'a str,
    pub object_id: &'a str,
    /// Words in the title or labels.
    pub q: &'a str,
    pub sort: &'a str,
    pub group: &'a str,
    /// A federation site: its mirrored alerts.
    pub site: &'a str,
}

impl AlertsFilter<'_> {
    /// The list's address with these filters and `status`.
    fn href(&self, status: &str) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("status", status);
        for (name, value) in [
            ("q", self.q),
            ("severity", self.severity),
            ("ruleId", self.rule_id),
            ("objectId", self.object_id),
            ("sort", self.sort),
            ("group", self.group),
            ("site", self.site),
        ] {
            if !value.is_empty() {
                query.append_pair(name, value);
            }
        }
        format!("/alerts?{}", query.finish())
    }
}

/// The severity filter's choices: (value of `severity`, text).
const SEVERITY_CHOICES: [(&str, &str); 5] = [
    ("", "Any"),
    ("critical", "Critical"),
    ("warning", "Warning"),
    ("critical,warning", "Critical or warning"),
    ("info", "Info"),
];

/// `/alerts`: one status at a time, filtered by severity, rule or object, newest first,
/// paged; open ones can be acknowledged in bulk.
pub fn alerts(
    now: &Now,
    groups: &[(String, Vec<Alert>)],
    paging: &Paging,
    filter: &AlertsFilter<'_>,
    can: Can,
) -> Markup {
    let status = filter.status;
    let back = filter.href(status);
    let empty = groups.iter().all(|(_, rows)| rows.is_empty());
    let bulk = can.ack && status == "open" && !empty;
    html! {
        (tabs("Alert status", &ALERT_TABS.iter().map(|(value, text)| (filter.href(value), *text, *value == status)).collect::<Vec<_>>()))
        form.filters method="get" action="/alerts" {
            input type="hidden" name="status" value=(status);
            @if !filter.object_id.is_empty() { input type="hidden" name="objectId" value=(filter.object_id); }
            div { label for="q" { "Search" } input #q type="search" name="q" value=(filter.q) placeholder="title, label=value"; }
            div { label for="site" { "Site (its alerts as mirrored here)" } input #site type="text" name="site" value=(filter.site) placeholder="north"; }
            div {
                label for="severity" { "Severity" }
                select #severity name="severity" {
                    @for (value, text) in SEVERITY_CHOICES {
                        option value=(value) selected[filter.severity == value] { (text) }
                    }
                }
            }
            div { label for="rule" { "Rule" } input #rule type="text" name="ruleId" value=(filter.rule_id) placeholder="disk-full"; }
            (order_choices(Some("newest first"), filter.sort, filter.group))
            button type="submit" { "Filter" }
            @if !filter.object_id.is_empty() { a href=(AlertsFilter { object_id: "", ..*filter }.href(status)) { "All objects" } }
        }
        @if can.save_filters { (save_filter("alerts", &back)) }
        @if empty {
            p { "No alerts here." }
        } @else {
            form #bulk method="post" action="/alerts/ack" {
                input type="hidden" name="back" value=(back);
            }
            @for (group, alerts) in groups {
                @if !filter.group.is_empty() { h2 { (group) " " small.muted { "(" (alerts.len()) ")" } } }
                ul.list {
                    @for a in alerts { (alert_row(now, a, &back, bulk, can)) }
                }
            }
            @if bulk {
                div.acts.bulk { (bulk_actions(can)) }
            }
        }
        (paging.pager(&back, "Older"))
    }
}

/// A line of the alerts list: its severity and title, status and age, who has it; a box to
/// select it and its acknowledge button.
fn alert_row(now: &Now, a: &Alert, back: &str, bulk: bool, can: Can) -> Markup {
    html! {
        li data-key=(a.id) {
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
                (noise_marks(now, a))
            }
            span.acts {
                @if can.ack && a.status == AlertStatus::Open {
                    (button(&format!("/alerts/{}/ack", a.id), back, "Acknowledge", &a.title))
                }
            }
        }
    }
}

/// What an alert's page tells beside the alert itself.
pub struct AlertStory {
    /// Its object as it is now, while it exists.
    pub object: Option<ObjectView>,
    /// The object's runbook (its own or its templates').
    pub runbook: Option<String>,
    /// The expression of the rule that raised it, when a stored rule did.
    pub rule_match: Option<String>,
    pub incident: Option<Incident>,
    /// The other alerts of its object and its incident, newest first.
    pub related: Vec<Alert>,
    /// A federation site's alert mirrored here: the site, and the actions taken here that wait
    /// for it.
    pub site: Option<(String, Vec<SiteAction>)>,
}

/// A runbook as a link when it is a web address, else as text: no other scheme becomes a link.
fn runbook(r: &str) -> Markup {
    let web = r.starts_with("https://") || r.starts_with("http://");
    html! {
        @if web { a href=(r) rel="noopener noreferrer" { (r) } } @else { (r) }
    }
}

/// `/alerts/{id}`: the alert, its facts, what triggered it, and what may be done with it.
pub fn alert(
    now: &Now,
    a: &Alert,
    story: &AlertStory,
    open_incidents: Option<&[Incident]>,
    events: &[Event],
    can: Can,
) -> Markup {
    let here = format!("/alerts/{}", a.id);
    let active = matches!(a.status, AlertStatus::Open | AlertStatus::Acked);
    let object = story.object.as_ref();
    html! {
        @if let Some((site, waiting)) = &story.site {
            p.notice role="status" {
                "This alert is site " strong { (site) } "'s, as its forwarded events tell it: acknowledging or resolving it here is carried out there."
                @for w in waiting { br; "Waiting for the site: " (w.action) " by " (w.by) ", " (when(now, w.at)) "." }
            }
        }
        dl.facts {
            dt { "Status" } dd { (a.status.as_str()) }
            dt { "Severity" } dd { (severity_badge(a.severity)) }
            dt { "Opened" } dd { (when(now, a.opened_at)) }
            @if let Some(by) = &a.acked_by { dt { "Acknowledged by" } dd { (by) } }
            @if let Some(at) = a.acked_at { dt { "Acknowledged" } dd { (when(now, at)) } }
            @if let Some(until) = a.snoozed_until { dt { "Snoozed until" } dd { (when(now, until)) } }
            @if let Some(at) = a.resolved_at { dt { "Closed" } dd { (when(now, at)) } }
            @if let Some(o) = a.object_id {
                dt { "Object" }
                dd {
                    a href=(format!("/objects/{o}")) { (object.map_or("its object".to_string(), view_name)) }
                    @if let Some(v) = object { " " (state_badge(v.object.kind, v.state.as_ref())) }
                }
            }
            @if let Some(r) = &story.runbook { dt { "Runbook" } dd { (runbook(r)) } }
            @if let Some(i) = &story.incident { dt { "Incident" } dd { a href=(format!("/incidents/{}", i.id)) { (i.title) } " (" (i.status) ")" } }
            @if let Some(p) = &a.escalation_policy { dt { "Escalation policy" } dd { (p) } }
            @if let Some(cause) = &a.cause { dt { "Caused by" } dd { (cause.reason) } }
            @if a.first_out { dt { "First out" } dd { "The first alert of an alarm flood" } }
            @if let Some(by) = &a.suppressed_by { dt { "Held back by" } dd { (suppressed_by(by)) } }
            @if a.dependents > 0 { dt { "Holds back" } dd { (a.dependents) " dependent alerts" } }
            @if let Some(shelf) = &a.shelved { dt { "Shelved" } dd { (shelf_text(now, shelf)) } }
            @if let Some(terms) = &a.ack { dt { "Acknowledgement" } dd { (ack_text(now, terms)) } }
            @if a.reopened > 0 { dt { "Reopened" } dd { (a.reopened) " times" } }
            dt { "Rule" } dd {
                (a.rule_id)
                @if let Some(m) = &story.rule_match { br; code { (m) } }
            }
            @for (k, v) in &a.labels { dt { (k) } dd { (v) } }
        }
        @if let Some(s) = object.and_then(|v| v.state.as_ref()) {
            h2 { "Its object now" }
            p { (s.output) br; small.muted { "checked " (when(now, s.last_check)) } }
            @if !s.long_output.is_empty() { pre { (s.long_output) } }
            @if !s.perfdata.is_empty() { pre { (s.perfdata) } }
        }
        @if can.ack && active {
            h2 { "Act" }
            div.acts {
                @if a.status == AlertStatus::Open { (ack_form(a, &here)) }
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
            (shelve_controls(a, &here))
        }
        @if can.silence && active {
            p { a.button href=(silence_like(a)) { "Silence alerts like this" } }
        }
        @if let Some(open) = open_incidents { (assign_to_incident(a, open)) }
        @if !story.related.is_empty() {
            h2 { "Related alerts" }
            ul.list {
                @for r in &story.related {
                    (alert_line(now, r, html! {
                        @if r.object_id.is_some() && r.object_id == a.object_id { small { " · same object" } }
                        @if r.incident_id.is_some() && r.incident_id == a.incident_id { small { " · same incident" } }
                    }))
                }
            }
        }
        h2 { "Timeline" }
        @if can.ack { (comment_form(&format!("{here}/comment"), &here)) }
        (timeline(now, events))
    }
}

/// What keeps an alert from paging, on its row: first-out of a flood, held back by a
/// dependency, shelved.
fn noise_marks(now: &Now, a: &Alert) -> Markup {
    html! {
        @if a.first_out { " " span.handled { "first out" } }
        @if let Some(by) = &a.suppressed_by { " " span.handled { "held back by " (suppressed_by(by)) } }
        @if let Some(shelf) = &a.shelved { " " span.handled { "shelved " (shelf_text(now, shelf)) } }
    }
}

fn suppressed_by(by: &SuppressedBy) -> String {
    match &by.redundancy_group {
        Some(group) => format!("{} {} (redundancy group {group})", by.kind, by.object),
        None => format!("{} {}", by.kind, by.object),
    }
}

/// "until 14:00 by ada: maintenance", or "until it clears by ada: ...".
fn shelf_text(now: &Now, shelf: &Shelf) -> Markup {
    html! {
        @match shelf.until {
            Some(until) => { "until " (when(now, until)) }
            None => { "until it clears" }
        }
        " by " (shelf.by) ": " (shelf.reason)
    }
}

/// An acknowledgement's terms: sticky or not, its end, its reminders, or how it ended.
fn ack_text(now: &Now, terms: &AckTerms) -> Markup {
    html! {
        @if let Some(ended) = &terms.ended {
            (ended) " (was at step " (terms.step) ", by " (terms.via) ")"
        } @else {
            @if terms.sticky { "sticky" } @else { "cleared by the next change" }
            @if let Some(at) = terms.expires_at { ", lapses " (when(now, at)) }
            @if let Some(every) = terms.remind_every { ", reminded every " (every) }
            @if terms.reminders > 0 { " (" (terms.reminders) " so far)" }
            @if let Some(at) = terms.withdraw_at { ", withdrawn " (when(now, at)) " unless answered" }
            ", step " (terms.step) ", by " (terms.via)
        }
    }
}

/// Shelve (timed or until the alert clears, with a reason) or unshelve.
fn shelve_controls(a: &Alert, here: &str) -> Markup {
    html! {
        @if a.shelved.is_some() {
            (button(&format!("{here}/unshelve"), here, "Unshelve", &a.title))
        } @else {
            form method="post" action=(format!("{here}/shelve")) {
                input type="hidden" name="back" value=(here);
                label for="shelve-mode" { "Shelve" }
                select #shelve-mode name="mode" {
                    option value="timed" selected { "for a time" }
                    option value="oneShot" { "until it clears" }
                }
                " "
                label for="shelve-duration" { "for" }
                select #shelve-duration name="duration" {
                    option value="30m" { "30 minutes" }
                    option value="1h" selected { "1 hour" }
                    option value="4h" { "4 hours" }
                    option value="8h" { "8 hours" }
                }
                " "
                label for="shelve-reason" { "Reason" }
                input #shelve-reason type="text" name="reason" required maxlength="1000";
                " "
                button type="submit" { "Shelve" }
            }
        }
    }
}

/// `/incidents`: open incidents (or all), newest first.
pub fn incidents(now: &Now, items: &[Incident], all: bool, next: Option<&str>) -> Markup {
    html! {
        (tabs("Which incidents", &[("/incidents".into(), "Open", !all), ("/incidents?all=1".into(), "All", all)]))
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
    now: &Now,
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
                @for a in alerts { (alert_line(now, a, html! {})) }
            }
        }
        h2 { "Timeline" }
        @if can_write { (comment_form(&format!("{here}/comment"), &here)) }
        (timeline(now, events))
    }
}

/// An alert as a line of a list: its severity, its title leading to it, its status and age,
/// and `more` after them.
pub fn alert_line(now: &Now, a: &Alert, more: Markup) -> Markup {
    html! {
        li {
            (severity_badge(a.severity))
            span.what {
                a href=(format!("/alerts/{}", a.id)) { (a.title) }
                br; small { (a.status.as_str()) ", opened " (when(now, a.opened_at)) }
                (more)
            }
        }
    }
}

/// Acknowledging an open alert with the terms of the on-call lifecycle: a comment, how long it
/// lasts, whether the next change clears it. Its fields are named by the alert, so several
/// stand on one page (an object's).
pub fn ack_form(a: &Alert, back: &str) -> Markup {
    let id = |field: &str| format!("{field}-{}", a.id);
    html! {
        form method="post" action=(format!("/alerts/{}/ack", a.id)) {
            input type="hidden" name="back" value=(back);
            label for=(id("comment")) { "Comment (optional)" }
            input id=(id("comment")) type="text" name="comment" maxlength="1000";
            " "
            label for=(id("expires_in")) { "Lasts" }
            select id=(id("expires_in")) name="expires_in" {
                option value="" selected { "as the policy says" }
                option value="1h" { "1 hour" }
                option value="4h" { "4 hours" }
                option value="24h" { "24 hours" }
            }
            " "
            label { input type="checkbox" name="loose" value="1"; " Clear it at the next change" }
            " "
            button.primary type="submit" aria-label=(format!("Acknowledge {}", a.title)) { "Acknowledge" }
        }
    }
}

/// On an alert's page: add it to an open incident, or open one for it.
pub fn assign_to_incident(a: &Alert, open: &[Incident]) -> Markup {
    let here = format!("/alerts/{}", a.id);
    html! {
        h2 { "Incident" }
        @if let Some(id) = a.incident_id {
            p { "Part of " a href=(format!("/incidents/{id}")) { "its incident" } "." }
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

/// `/approvals`: the write tool calls the tool policy made wait, and the last 50 decided.
pub fn approvals(
    now: &Now,
    items: &[crate::model::ai::Action],
    can_approve: bool,
    can_deny: bool,
) -> Markup {
    use crate::model::ai::ActionStatus;
    let pending: Vec<_> = items
        .iter()
        .filter(|a| a.status == ActionStatus::Pending)
        .collect();
    let decided: Vec<_> = items
        .iter()
        .filter(|a| a.status != ActionStatus::Pending)
        .take(50)
        .collect();
    let row = |a: &crate::model::ai::Action| {
        let status = match a.status {
            ActionStatus::Pending => "waiting",
            ActionStatus::Executed => "approved and run",
            ActionStatus::Failed => "approved, and the call failed",
            ActionStatus::Denied => "denied",
        };
        html! {
            li {
                span.what {
                    strong { (a.tool) } " " code { (a.route) }
                    br;
                    small { code { (a.arguments.to_string()) } }
                    br;
                    small {
                        "proposed by " (a.proposed_by) " " (when(now, a.created_at)) " · " (status)
                        @if let Some(by) = &a.decided_by { " by " (by) }
                        @if let Some(code) = a.result_status { " · answered " (code) }
                    }
                }
                span.acts {
                    @if a.status == ActionStatus::Pending {
                        @if can_approve { (button(&format!("/approvals/{}/approve", a.id), "/approvals", "Approve", a.tool.as_str())) }
                        @if can_deny { (button(&format!("/approvals/{}/deny", a.id), "/approvals", "Deny", a.tool.as_str())) }
                    }
                }
            }
        }
    };
    html! {
        p.muted { "Calls of write tools, by an assistant or the agent, that the tenant's tool policy makes wait for a person. Approving runs the call as you, with your permissions." }
        h2 { "Waiting" }
        @if pending.is_empty() { p.muted { "None." } } @else {
            ul.list { @for a in &pending { (row(a)) } }
        }
        h2 { "Decided" }
        @if decided.is_empty() { p.muted { "None." } } @else {
            ul.list { @for a in &decided { (row(a)) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
