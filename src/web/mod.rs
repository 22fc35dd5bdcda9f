//! The server-rendered UI (issue 36): pages are HTML from the binary, escaped by the template
//! language (maud), styled by one embedded stylesheet, live through one small module over the
//! event stream, and complete without JavaScript: every action is a form POST answered with a
//! redirect. The handlers are in `api/ui.rs` and `api/pages.rs`; here is only rendering, from
//! the wire types of `model`.

pub mod assets;
pub mod views;

use crate::auth::Principal;
use crate::model::VERSION;
use crate::model::flood::Flood;
use maud::{DOCTYPE, Markup, html};

/// A live page's version: what its refresh names to be told nothing changed. Relative times
/// (`<time>`'s text, "5m ago") are left out: the clock moving changes nothing a refresh
/// should fetch.
fn content_version(inner: &str) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    let mut rest = inner;
    while let Some(at) = rest.find("<time ") {
        let Some(open) = rest[at..].find('>').map(|e| at + e + 1) else {
            break;
        };
        hash.update(&rest[..open]);
        rest = &rest[open..];
        if let Some(close) = rest.find("</time>") {
            rest = &rest[close..];
        }
    }
    hash.update(rest);
    crate::model::audit::hex(&hash.finalize()[..8])
}

/// The version a live page's content carries (`data-version` of its `<main>`), if it has one.
pub fn page_version(page: &str) -> Option<&str> {
    let main = &page[page.find("<main ")?..];
    let main = &main[..main.find('>')?];
    if !main.contains("id=\"content\"") {
        return None;
    }
    let at = main.find("data-version=\"")? + "data-version=\"".len();
    let len = main[at..].find('"')?;
    Some(&main[at..at + len])
}

/// HTML text outside a template (a problem detail in plain code): the characters that could
/// open markup or leave an attribute, escaped.
pub fn escape(s: &str) -> String {
    html! { (s) }.into_string()
}

/// The parts of the UI, for the navigation: what a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Problems,
    Alerts,
    Incidents,
    Objects,
    OnCall,
    Events,
    Silences,
    Downtimes,
    Approvals,
    Sites,
    Audit,
    Users,
    Tokens,
    Config,
    Dashboards,
    Account,
    Me,
}

/// The navigation links: section, path, label, and the permission that shows it.
const NAV: &[(Section, &str, &str, &str)] = &[
    (Section::Problems, "/", "Problems", "objects:read"),
    (
        Section::Dashboards,
        "/dashboards",
        "Dashboards",
        "objects:read",
    ),
    (Section::Alerts, "/alerts", "Alerts", "alerts:read"),
    (
        Section::Incidents,
        "/incidents",
        "Incidents",
        "incidents:read",
    ),
    (Section::Objects, "/objects", "Objects", "objects:read"),
    (Section::OnCall, "/oncall", "On call", "oncall:read"),
    (Section::Events, "/events", "Events", "events:read"),
    (Section::Silences, "/silences", "Silences", "objects:read"),
    (
        Section::Downtimes,
        "/downtimes",
        "Downtimes",
        "objects:read",
    ),
    (Section::Approvals, "/approvals", "Approvals", "alerts:read"),
    (Section::Sites, "/sites", "Sites", "objects:read"),
    (Section::Audit, "/audit", "Audit", "admin:audit"),
    (Section::Users, "/users", "Users", "admin:users"),
    (Section::Tokens, "/tokens", "API tokens", "admin:tokens"),
    (Section::Config, "/config", "Configuration", "objects:read"),
];

/// The bar at the foot of a phone's screen: what a shift needs at a thumb's reach (the header's
/// links give way to it there; `/me` lists the rest).
const TAB_BAR: &[(Section, &str, &str, &str)] = &[
    (Section::Problems, "/", "Problems", "objects:read"),
    (Section::Alerts, "/alerts", "Alerts", "alerts:read"),
    (Section::OnCall, "/oncall", "On call", "oncall:read"),
];

/// The sections `principal` may read, as (path, label): the navigation, for the "Me" page.
pub fn sections(principal: &Principal) -> Vec<(&'static str, &'static str)> {
    NAV.iter()
        .filter(|(_, _, _, permission)| principal.allows(permission))
        .map(|(_, path, label, _)| (*path, *label))
        .collect()
}

/// The first page of the navigation `principal` may read (the account page when none): where
/// the start page sends someone who may not see problems.
pub fn first_page(principal: &Principal) -> &'static str {
    NAV.iter()
        .find(|(_, _, _, permission)| principal.allows(permission))
        .map_or("/account", |(_, path, _, _)| path)
}

/// A colour scheme chosen over the browser's.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Theme {
    Light,
    Dark,
}

impl Theme {
    /// `light` or `dark`; anything else (`system`, `auto`) is no choice.
    pub fn named(name: &str) -> Option<Theme> {
        match name {
            "light" => Some(Theme::Light),
            "dark" => Some(Theme::Dark),
            _ => None,
        }
    }

    fn class(self) -> &'static str {
        match self {
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }
}

/// A page of the signed-in UI.
pub struct Frame<'a> {
    pub principal: &'a Principal,
    pub section: Section,
    pub title: String,
    /// Event types that make the page fetch itself again (empty: not live).
    pub live: &'a [&'a str],
    /// A line above the content (the outcome of the last action).
    pub notice: Option<Notice>,
    pub look: &'a Look,
    /// The caller's tenant's scopes in flood: a banner on every page.
    pub floods: &'a [Flood],
    /// This site's uplink is lost: a banner on every page.
    pub uplink_lost: Option<&'a UplinkLost>,
    /// A wallboard: the content over the whole screen, without navigation.
    pub kiosk: bool,
}

/// A site's lost uplink as its banner tells it: since when on the viewer's wall clock, and how
/// many events wait to be forwarded.
pub struct UplinkLost {
    pub since: String,
    pub waiting: u64,
}

/// How pages look: the instance's branding and the caller's colour scheme.
#[derive(Clone, Default)]
pub struct Look {
    /// `None` follows the browser.
    pub theme: Option<Theme>,
    /// The name in the header and the titles; `svc` when unset.
    pub name: Option<String>,
    /// The header's background and its text colour.
    pub header: Option<(String, &'static str)>,
    /// The logo's address, when there is a logo.
    pub logo: Option<String>,
}

impl Look {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("svc")
    }
}

/// What the last action did, shown once after its redirect.
pub enum Notice {
    Done(String),
    Failed(String),
}

fn document(title: &str, look: &Look, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" class=[look.theme.map(Theme::class)] {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · " (look.name()) }
                link rel="stylesheet" href=(assets::url("app.css"));
                link rel="icon" type="image/svg+xml" href=(assets::url("favicon.svg"));
                @if let Some((background, text)) = &look.header {
                    // Both are `#rrggbb` by construction (`Branding::header_colours`).
                    style { (maud::PreEscaped(format!(":root{{--brand-bg:{background};--brand-fg:{text}}}"))) }
                }
            }
            body { (body) }
        }
    }
}

/// A signed-in page: navigation (the sections the caller may read), the title as the one
/// `h1`, the content, and the live module where the page is live.
pub fn page(frame: Frame<'_>, content: Markup) -> String {
    let live = frame.live.join(" ");
    let inner = html! {
                @if let Some(lost) = frame.uplink_lost {
                    p.notice.error role="alert" {
                        strong { "Uplink lost" } " since " (lost.since) ", " (lost.waiting) " events waiting to be forwarded. This site goes on monitoring and paging on its own. "
                        a href="/sites" { "This site" }
                    }
                }
                @for f in frame.floods {
                    p.notice.error.flood role="alert" {
                        strong { "Alarm flood" }
                        @if !f.scope.is_empty() { " at " (f.scope) }
                        ": " (f.alerts) " alerts since " (f.started_at.to_string()) "; pages go out as digests. First out: "
                        a href=(format!("/alerts/{}", f.first_out)) { (f.first_out_title) }
                        " · "
                        a href=(format!("/alerts?status=open&since={}", f.started_at)) { "its alerts" }
                    }
                }
                h1 { (frame.title) }
                @match &frame.notice {
                    Some(Notice::Done(text)) => p.notice role="status" { (text) },
                    Some(Notice::Failed(text)) => p.notice.error role="alert" { (text) },
                    None => {},
                }
                (content)
    };
    let version = (!live.is_empty()).then(|| content_version(&inner.0));
    document(
        &frame.title,
        frame.look,
        html! {
            @if !frame.kiosk {
                a.skip href="#content" { "Skip to content" }
                header {
                    nav aria-label="Main" {
                        (brand(frame.look))
                        @for (section, path, label, permission) in NAV {
                            @if frame.principal.allows(permission) {
                                a href=(path) aria-current=[(*section == frame.section).then_some("page")] { (label) }
                            }
                        }
                        a.me href="/account" aria-current=[(frame.section == Section::Account).then_some("page")] { (frame.principal.name) }
                        a href="/auth/logout" { "Sign out" }
                    }
                }
            }
            main #content class=[frame.kiosk.then_some("kiosk")] data-live=[(!live.is_empty()).then_some(live.as_str())] data-version=[version.as_deref()] {
                (inner)
            }
            @if !frame.kiosk {
                nav.tabbar aria-label="Shift" {
                    @for (section, path, label, permission) in TAB_BAR {
                        @if frame.principal.allows(permission) {
                            a href=(path) aria-current=[(*section == frame.section).then_some("page")] { (label) }
                        }
                    }
                    a href="/me" aria-current=[(frame.section == Section::Me).then_some("page")] { "Me" }
                }
                footer { "svc " (VERSION) }
            }
            @if !frame.live.is_empty() {
                script src=(assets::url("live.js")) defer {}
            }
        },
    )
    .into_string()
}

/// The header's link home: the logo, if any, and the name.
fn brand(look: &Look) -> Markup {
    html! {
        a.brand href="/" {
            @if let Some(logo) = &look.logo { img src=(logo) alt="" height="28"; }
            (look.name())
        }
    }
}

/// A page outside the signed-in UI: sign-in forms, problem explanations, errors.
fn plain(title: &str, look: &Look, content: Markup) -> String {
    document(
        title,
        look,
        html! {
            main.login #content {
                @if look.logo.is_some() || look.name.is_some() { p.brand { (brand(look)) } }
                h1 { (title) }
                (content)
            }
            footer { "svc " (VERSION) }
        },
    )
    .into_string()
}

fn message(msg: Option<&str>) -> Markup {
    html! {
        @if let Some(m) = msg { p.notice.error role="alert" { (m) } }
    }
}

/// The sign-in page; `sso` names the identity provider when OIDC is on.
pub fn login(look: &Look, msg: Option<&str>, email: &str, sso: Option<&str>) -> String {
    plain(
        "Sign in",
        look,
        html! {
            (message(msg))
            @if let Some(provider) = sso {
                p { a.button.primary href="/auth/oidc" { "Sign in with " (provider) } }
                p.muted { "Or with an account of this server:" }
            }
            form method="post" action="/login" {
                label for="email" { "E-mail" }
                input #email name="email" type="email" autocomplete="username" required value=(email);
                label for="password" { "Password" }
                input #password name="password" type="password" autocomplete="current-password" required;
                label.check { input name="remember" type="checkbox" value="1"; "Keep me signed in for 30 days" }
                button.primary type="submit" { "Sign in" }
            }
        },
    )
}

fn account_form(action: &str, button: &str, msg: Option<&str>, name: &str, email: &str) -> Markup {
    html! {
        (message(msg))
        form method="post" action=(action) {
            label for="name" { "Name" }
            input #name name="name" type="text" autocomplete="name" required value=(name);
            label for="email" { "E-mail" }
            input #email name="email" type="email" autocomplete="username" required value=(email);
            label for="password" { "Password (at least 12 characters)" }
            input #password name="password" type="password" autocomplete="new-password" minlength="12" required;
            label for="confirmation" { "Repeat the password" }
            input #confirmation name="confirmation" type="password" autocomplete="new-password" minlength="12" required;
            button.primary type="submit" { (button) }
        }
    }
}

pub fn setup(msg: Option<&str>, name: &str, email: &str) -> String {
    plain(
        "Set up svc",
        &Look::default(),
        html! {
            p { "Create the first administrator." }
            (account_form("/setup", "Create administrator", msg, name, email))
        },
    )
}

pub fn register(msg: Option<&str>, name: &str, email: &str) -> String {
    plain(
        "Create an account",
        &Look::default(),
        account_form("/register", "Create account", msg, name, email),
    )
}

/// The page a problem document's `type` URL names: what the code means and what to do.
pub fn problem(code: &str, status: u16, title: &str, explanation: &str) -> String {
    plain(
        title,
        &Look::default(),
        html! {
            p { code { (code) } " · HTTP " (status) }
            p { (explanation) }
            p { "Clients branch on " code { "code" } "; " code { "detail" } " says what was wrong with the request at hand." }
        },
    )
}

/// A failed page request as a page: what went wrong, and a way back.
pub fn error(status: u16, title: &str, detail: &str) -> String {
    plain(
        title,
        &Look::default(),
        html! {
            p role="alert" { (detail) }
            p.muted { "HTTP " (status) }
            p { a href="/" { "Back to the problems" } }
        },
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_are_escaped() {
        let html = super::login(
            &super::Look::default(),
            Some("<b>x</b>"),
            "\"><script>",
            Some("<i>idp</i>"),
        );
        assert!(!html.contains("<script>") && !html.contains("<b>") && !html.contains("<i>"));
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"));
        assert!(
            html.contains(crate::model::VERSION),
            "footer carries the version"
        );
        assert!(html.contains(super::assets::url("app.css")));
    }
}
