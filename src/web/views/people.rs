//! On call, the account and its look, users, API tokens and the audit log.

use super::*;
use crate::model::notify::HandoffNotices;

/// One schedule's shifts over the coming days, for the on-call page.
pub struct Upcoming {
    pub schedule: String,
    pub shifts: Vec<OnCallShift>,
}

/// What `/me` shows.
pub struct MinePage {
    /// The alerts the caller acknowledged that are still acknowledged.
    pub alerts: Vec<Alert>,
    /// Their shifts of the next 7 days, with the schedule of each.
    pub shifts: Vec<(String, OnCallShift)>,
    /// The open incidents they opened.
    pub incidents: Vec<Incident>,
    /// Every section they may read, as (path, label).
    pub sections: Vec<(&'static str, &'static str)>,
    pub reads_alerts: bool,
    pub reads_on_call: bool,
    pub reads_incidents: bool,
}

/// `/me`: what is mine on this shift, and the way to everything else.
pub fn mine(now: &Now, m: &MinePage) -> Markup {
    html! {
        @if m.reads_alerts {
            h2 { "Acknowledged by me" }
            @if m.alerts.is_empty() {
                p.muted { "None." }
            } @else {
                ul.list {
                    @for a in &m.alerts {
                        (alert_line(now, a, html! {
                            @if let Some(at) = a.acked_at { small { " · acknowledged " (when(now, at)) } }
                        }))
                    }
                }
            }
        }
        @if m.reads_on_call {
            h2 { "My shifts, the next 7 days" }
            @if m.shifts.is_empty() {
                p.muted { "None." }
            } @else {
                ul.list {
                    @for (schedule, s) in &m.shifts {
                        li { span.what { a href=(format!("/oncall/{}/calendar", encode_segment(schedule))) { (schedule) } br; small { (when(now, s.start)) " until " (when(now, s.end)) } } }
                    }
                }
            }
        }
        @if m.reads_incidents {
            h2 { "Incidents I opened" }
            @if m.incidents.is_empty() {
                p.muted { "None open." }
            } @else {
                ul.list {
                    @for i in &m.incidents {
                        li {
                            (severity_badge(i.severity))
                            span.what {
                                a href=(format!("/incidents/{}", i.id)) { (i.title) }
                                br; small { (i.status) ", opened " (when(now, i.opened_at)) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Everything" }
        ul.list.sections {
            @for (path, label) in &m.sections { li { a href=(path) { (label) } } }
            li { a href="/account" { "My account" } }
            li { a href="/auth/logout" { "Sign out" } }
        }
    }
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

/// `/oncall`: my shifts; who is on call now in each schedule, until when, and how to reach
/// them; each schedule's next days. `me` is the caller's contact; `can_take` whether they may
/// take a shift over (an override, `oncall:write`).
pub fn on_call(
    now: &Now,
    schedules: &[OnCallNow],
    upcoming: &[Upcoming],
    me: Option<&str>,
    notices: Option<&HandoffNotices>,
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
            p { "Shift notices: " (shift_notices(notices)) }
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
                p { a href=(format!("/oncall/{}/calendar", encode_segment(&s.schedule))) { "Calendar of " (s.schedule) } }
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
                        @for shift in u.shifts.iter().filter(|sh| sh.start > now.at) {
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

/// What a contact's `handoffNotices` tell them, in words.
fn shift_notices(notices: Option<&HandoffNotices>) -> String {
    let Some(n) = notices else {
        return "none (an editor sets them on your contact: handoffNotices)".into();
    };
    let mut told: Vec<String> = n.advance.iter().map(|d| format!("{d} ahead")).collect();
    if n.off_call {
        told.push("when you go off call".into());
    }
    if n.schedule_changed {
        told.push("when a change moves your shifts".into());
    }
    if n.digest {
        told.push("with the handover digest".into());
    }
    if told.is_empty() {
        "none".into()
    } else {
        told.join(", ")
    }
}

/// `/oncall/{schedule}/calendar`: who is on call when, day by day from today, in the
/// viewer's time zone; a shift across midnight is shown on each day it covers.
pub fn schedule_calendar(now: &Now, schedule: &str, shifts: &[OnCallShift], days: i16) -> Markup {
    let zone = &now.zone;
    let today = now.at.0.to_zoned(zone.clone()).date();
    let day_start = |d: jiff::civil::Date| {
        d.to_zoned(zone.clone())
            .map(|z| Timestamp(z.timestamp()))
            .ok()
    };
    let rows: Vec<(jiff::civil::Date, Vec<&OnCallShift>)> = (0..days)
        .filter_map(|i| today.checked_add(jiff::Span::new().days(i)).ok())
        .map(|d| {
            let (from, to) = (day_start(d), d.tomorrow().ok().and_then(&day_start));
            let on: Vec<&OnCallShift> = shifts
                .iter()
                .filter(|s| from.is_some_and(|f| s.end > f) && to.is_some_and(|t| s.start < t))
                .collect();
            (d, on)
        })
        .collect();
    html! {
        p { "Times in " (zone.iana_name().unwrap_or("UTC")) " (set yours on " a href="/account" { "your account" } ")." }
        table {
            caption { "Who is on call in " (schedule) ", the next " (days) " days" }
            thead { tr { th scope="col" { "Day" } th scope="col" { "On call" } } }
            tbody {
                @for (day, on) in &rows {
                    tr {
                        th scope="row" { (day.strftime("%a %d %b %Y")) }
                        td {
                            @if on.is_empty() { span.muted { "nobody" } }
                            @for s in on {
                                div {
                                    strong { (s.contact) }
                                    @if s.is_override { " " span.handled { "(override)" } }
                                    " " (now.local(s.start)) " – " (now.local(s.end))
                                }
                            }
                        }
                    }
                }
            }
        }
        p { a href="/oncall" { "Back to on call" } }
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
    /// The caller's time zone preference (empty: UTC).
    pub time_zone: &'a str,
    /// The instance's branding, when the caller may change it (`config:write` in the default
    /// tenant).
    pub branding: Option<&'a Branding>,
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
            label for="timeZone" { "Time zone of absolute times (e.g. Europe/Berlin; empty: UTC)" }
            input #timeZone type="text" name="timeZone" value=(looks.time_zone) autocomplete="off";
            p { button type="submit" { "Save" } }
        }
        @if let Some(b) = looks.branding {
            h2 { "Every user's pages" }
            form method="post" action="/account/branding" enctype="multipart/form-data" {
                label for="mode" { "Colours, unless a user chose" }
                (scheme_select("mode", "mode", b.mode.as_deref().unwrap_or_default(), "As each device is set"))
                label for="brandName" { "Name in the header and titles (empty: svc)" }
                input #brandName type="text" name="name" maxlength="64" value=[b.name.as_deref()];
                label.check { input type="checkbox" name="accent" value="on" checked[b.accent_color.is_some()]; "Colour the header" }
                label for="accentColor" { "Header colour" }
                input #accentColor type="color" name="accentColor" value=(b.accent_color.as_deref().unwrap_or("#0b57c2"));
                label for="logo" { "Logo (PNG, JPEG or WebP, at most 64 KiB; none chosen keeps the current one)" }
                input #logo type="file" name="logo" accept="image/png,image/jpeg,image/webp";
                @if b.logo.is_some() {
                    label.check { input type="checkbox" name="removeLogo" value="on"; "Remove the logo" }
                }
                p { button type="submit" { "Save for everyone" } }
            }
        }
        @if session_user {
            section #push aria-labelledby="push-heading" {
                h2 #push-heading { "Notifications on this device" }
                p data-state { "Web Push needs JavaScript: with it off, notifications come by the other channels." }
                p {
                    button type="button" data-on hidden { "Turn on" }
                    button type="button" data-off hidden { "Turn off" }
                }
                p.muted { "A contact whose user is you gets its push channel's notifications here, with an Acknowledge action." }
            }
            script src=(crate::web::assets::url("push.js")) defer {}
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
pub fn users(now: &Now, items: &[User], me: Option<Uuid>) -> Markup {
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
                            @if u.local { " · local" } @else if u.is_directory_account() { " · directory" } @else { " · single sign-on" }
                            " · last seen " @if let Some(at) = u.last_seen_at { (when(now, at)) } @else { "never" }
                        }
                    }
                    span.acts {
                        @if Some(u.id) != me {
                            @if u.disabled {
                                (button(&format!("/users/{}/enable", u.id), "/users", "Enable", &u.name))
                            } @else {
                                form method="post" action=(format!("/users/{}/disable", u.id)) {
                                    label.check { input type="checkbox" name="confirm" value="on" required; "Sign " (u.name) " out and lock them out" }
                                    button type="submit" aria-label=(format!("Disable {}", u.name)) { "Disable" }
                                }
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
pub fn tokens(now: &Now, items: &[ApiToken]) -> Markup {
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
