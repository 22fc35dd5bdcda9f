//! Dashboards: tiles of saved filters, each a count or a short list.

use super::*;
use crate::model::dashboard::{MAX_TILES, Show, Tile};
use crate::model::slo::SloStatus;
use crate::model::tactical::{StateCount, Tactical};

/// What a tile's saved filter found.
pub enum TileItems {
    Objects(Vec<ObjectView>),
    /// The problems page's entries: problems, and alerts no problem stands for.
    Inbox(Vec<Entry>),
    Alerts(Vec<Alert>),
    Incidents(Vec<Incident>),
    Events(Vec<Event>),
}

impl TileItems {
    pub fn len(&self) -> usize {
        match self {
            TileItems::Objects(v) => v.len(),
            TileItems::Inbox(v) => v.len(),
            TileItems::Alerts(v) => v.len(),
            TileItems::Incidents(v) => v.len(),
            TileItems::Events(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One tile as shown: its title, and what its filter found or why it could not be read.
pub struct TileView {
    pub title: String,
    pub show: Show,
    pub found: Result<TileItems, String>,
    /// The count stopped at the tile's cap.
    pub capped: bool,
    /// A graph tile's lines.
    pub graphs: Vec<Graph>,
    /// The page that lists what its filter finds.
    pub link: Option<String>,
}

/// Rows a list tile shows.
const TILE_ROWS: usize = 10;

fn tile_rows(now: &Now, items: &TileItems) -> Markup {
    html! {
        ul.list {
            @match items {
                TileItems::Objects(v) => @for o in v.iter().take(TILE_ROWS) {
                    li { (state_badge(o.object.kind, o.state.as_ref())) span.what { a href=(format!("/objects/{}", o.object.id)) { (view_name(o)) } } }
                },
                TileItems::Inbox(v) => @for e in v.iter().take(TILE_ROWS) {
                    @match &e.subject {
                        Subject::Problem(p, _) => li { (state_badge(p.object.kind, Some(&p.state))) span.what { a href=(format!("/objects/{}", p.object.id)) { (problem_name(p)) } } },
                        Subject::Alert(a) => li { (severity_badge(a.severity)) span.what { a href=(format!("/alerts/{}", a.id)) { (a.title) } } },
                    }
                },
                TileItems::Alerts(v) => @for a in v.iter().take(TILE_ROWS) {
                    li { (severity_badge(a.severity)) span.what { a href=(format!("/alerts/{}", a.id)) { (a.title) } br; small { (a.status.as_str()) ", " (when(now, a.opened_at)) } } }
                },
                TileItems::Incidents(v) => @for i in v.iter().take(TILE_ROWS) {
                    li { (severity_badge(i.severity)) span.what { a href=(format!("/incidents/{}", i.id)) { (i.title) } br; small { (i.status) } } }
                },
                TileItems::Events(v) => @for e in v.iter().take(TILE_ROWS) {
                    li { span.what { strong { (e.kind.as_str()) } " " (event_line(e)) br; small { (when(now, e.ts)) } } }
                },
            }
        }
    }
}

/// `/dashboards`: the dashboards the caller may see, and a link to make one.
pub fn dashboards(names: &[String], can_write: bool) -> Markup {
    html! {
        p.acts {
            a.button href="/tactical" { "Tactical overview" }
            a.button href="/slos" { "Objectives" }
            @if can_write { a.button href="/dashboards/new" { "New dashboard" } }
        }
        @if names.is_empty() {
            p { "No dashboards. A dashboard is a configuration document of kind " code { "dashboards" } " whose " code { "spec" } " is the base64 of " code { "{\"tiles\": [{\"filter\": \"<saved filter>\", \"title\"?, \"show\"?: \"count\" | \"list\" | \"graph\", \"metric\"?}]}" } "." }
        }
        ul.list {
            @for n in names { li { span.what { a href=(format!("/dashboards/{}", encode_segment(n))) { (n) } } } }
        }
    }
}

/// `/dashboards/{name}`: its tiles, and links to change them (`edit`: the editor's address)
/// and to show them over the whole screen (`full_screen`).
pub fn dashboard(
    now: &Now,
    tiles: &[TileView],
    edit: Option<&str>,
    full_screen: Option<&str>,
) -> Markup {
    html! {
        @if edit.is_some() || full_screen.is_some() {
            p.acts {
                @if let Some(href) = edit { a.button href=(href) { "Edit" } }
                @if let Some(href) = full_screen { a.button href=(href) { "Full screen" } }
            }
        }
        @if tiles.is_empty() { p { "No tiles yet." } }
        div.tiles {
            @for t in tiles {
                section.tile aria-label=(t.title) {
                    h2 { (t.title) }
                    @match &t.found {
                        Err(why) => p.notice.error { (why) },
                        Ok(items) => {
                            p.count {
                                @if let Some(href) = &t.link {
                                    a href=(href) aria-label=(format!("{}: {}{}, listed", t.title, items.len(), if t.capped { "+" } else { "" })) { strong { (items.len()) @if t.capped { "+" } } }
                                } @else {
                                    strong { (items.len()) @if t.capped { "+" } }
                                }
                            }
                            @match t.show {
                                Show::List if !items.is_empty() => (tile_rows(now, items)),
                                Show::Graph if t.graphs.is_empty() => p.muted { "No data for this metric yet." },
                                Show::Graph => @for g in &t.graphs { (super::objects::graph(g, now)) },
                                _ => {},
                            }
                        },
                    }
                }
            }
        }
    }
}

/// The problems page's severity of a state's badness: where its unhandled ones are listed.
fn severity_of(badness: u8) -> &'static str {
    match badness {
        3 => "critical",
        2 => "unknown",
        _ => "warning",
    }
}

fn state_rows(counts: &[StateCount]) -> Markup {
    html! {
        table {
            thead { tr { th scope="col" { "State" } th scope="col" { "Objects" } th scope="col" { "Unhandled" } } }
            tbody {
                @for c in counts {
                    tr {
                        th scope="row" { span.badge.(match c.badness { 3 => "s-crit", 2 => "s-unkn", 1 => "s-warn", _ => if c.state == "PENDING" { "s-info" } else { "s-ok" } }) { (c.state) } }
                        td { a href=(format!("/objects?state={}", c.state)) { (c.total) } }
                        td {
                            @if c.unhandled > 0 {
                                a href=(format!("/?severity={}", severity_of(c.badness))) { strong { (c.unhandled) } }
                            } @else { "0" }
                        }
                    }
                }
            }
        }
    }
}

/// `/tactical`: Icinga's tactical overview, as a wallboard: hosts and services by state with
/// the unhandled ones, the problems of each site, the open alerts by severity; every count
/// leads to its list.
pub fn tactical(t: &Tactical, full_screen: Option<&str>) -> Markup {
    html! {
        @if let Some(href) = full_screen { p { a.button href=(href) { "Full screen" } } }
        div.tiles {
            section.tile aria-labelledby="hosts" { h2 #hosts { "Hosts" } (state_rows(&t.hosts)) }
            section.tile aria-labelledby="services" { h2 #services { "Services" } (state_rows(&t.services)) }
            @if !t.alerts.is_empty() {
                section.tile aria-labelledby="alerts" {
                    h2 #alerts { "Open alerts" }
                    table {
                        tbody {
                            @for (sev, n) in &t.alerts {
                                tr {
                                    th scope="row" { (severity_badge(*sev)) }
                                    td { a href=(format!("/alerts?status=open&severity={}", sev.as_str())) { (n) } }
                                }
                            }
                        }
                    }
                }
            }
            section.tile aria-labelledby="sites" {
                h2 #sites { "Problems by site" }
                @if t.sites.is_empty() {
                    p.muted { "No problems." }
                } @else {
                    table {
                        thead { tr { th scope="col" { "Site" } th scope="col" { "Critical" } th scope="col" { "Warning" } th scope="col" { "Unknown" } th scope="col" { "Unhandled" } } }
                        tbody {
                            @for site in &t.sites {
                                tr {
                                    th scope="row" {
                                        @if site.site.is_empty() { "(no site)" } @else {
                                            a href=(format!("/?selector={}", form_urlencoded::byte_serialize(format!("site={}", site.site).as_bytes()).collect::<String>())) { (site.site) }
                                        }
                                    }
                                    td { (site.critical) } td { (site.warning) } td { (site.unknown) } td { strong { (site.unhandled) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `/slos`: each objective with its indicator, the budget left and the pairs that burn.
pub fn objectives(slos: &[SloStatus]) -> Markup {
    let percent = |v: f64| format!("{:.3} %", v);
    html! {
        @if slos.is_empty() {
            p { "No objectives. An objective is a configuration document of kind " code { "slos" } ": a " code { "target" } " over a " code { "window" } " on a business service or an object." }
        } @else {
            div.tiles {
                @for (i, o) in slos.iter().enumerate() {
                    section.tile aria-labelledby=(format!("slo{i}")) {
                        h2 id=(format!("slo{i}")) { a href=(format!("/config/slos/{}", encode_segment(&o.name))) { (o.name) } }
                        dl {
                            dt { "Target" } dd { (percent(o.target)) " over " (o.window) }
                            dt { "Indicator" } dd { @match o.sli { Some(v) => (percent(v)), None => span.muted { "no data" } } " " span.muted { "(" (o.source) ")" } }
                            dt { "Budget left" }
                            dd {
                                @match o.budget_left {
                                    Some(left) => {
                                        meter min="0" max="1" low="0.25" optimum="1" value=(left.clamp(0.0, 1.0)) aria-hidden="true" {}
                                        " " @if left < 0.0 { strong { "overspent " (format!("{:.0} %", -left * 100.0)) } } @else { (format!("{:.0} %", left * 100.0)) }
                                    }
                                    None => span.muted { "no data" },
                                }
                            }
                            dt { "Burning" }
                            dd {
                                @let firing: Vec<_> = o.burn.iter().filter(|b| b.firing).collect();
                                @if firing.is_empty() { span.muted { "no" } }
                                @for b in firing {
                                    (severity_badge(if b.alert.severity == "page" { Severity::Critical } else { Severity::Warning }))
                                    " " (b.long_burn) "x over " (b.alert.long) ", " (b.short_burn) "x over " (b.alert.short) " (alert at " (b.alert.burn_rate) "x)"
                                    br;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What the dashboard editor starts from.
pub struct DashboardDraft<'a> {
    /// `None` for a new dashboard (the form asks for its name).
    pub name: Option<&'a str>,
    pub shared: bool,
    pub version: u64,
    pub tiles: &'a [Tile],
    /// The saved filters to choose from: name and what they list.
    pub filters: &'a [(String, String)],
}

/// Empty rows the editor offers past the tiles there are.
pub const SPARE_ROWS: usize = 3;

/// `/dashboards/new`, `/dashboards/{name}/edit`: the tiles as rows of a form (a row without a
/// filter is left out), so it works without script.
pub fn dashboard_editor(d: &DashboardDraft<'_>) -> Markup {
    let action = match d.name {
        Some(n) => format!("/dashboards/{}", encode_segment(n)),
        None => "/dashboards".to_string(),
    };
    let rows = (d.tiles.len() + SPARE_ROWS).min(MAX_TILES);
    html! {
        form method="post" action=(action) {
            @if d.name.is_none() {
                label for="name" { "Name" }
                input #name type="text" name="name" required;
            }
            input type="hidden" name="version" value=(d.version);
            label.check { input type="checkbox" name="shared" value="on" checked[d.shared]; "Shared with everyone in the tenant (otherwise only mine)" }
            datalist #filters {
                @for (name, resource) in d.filters { option value=(name) { (resource) } }
            }
            @for i in 0..rows {
                @let t = d.tiles.get(i);
                fieldset.tile-row {
                    legend { "Tile " (i + 1) }
                    label for=(format!("filter{i}")) { "Saved filter (empty: no tile)" }
                    input id=(format!("filter{i}")) type="text" name=(format!("filter{i}")) list="filters" value=[t.map(|t| t.filter.as_str())];
                    label for=(format!("title{i}")) { "Title (empty: the filter's name)" }
                    input id=(format!("title{i}")) type="text" name=(format!("title{i}")) value=[t.and_then(|t| t.title.as_deref())];
                    label for=(format!("show{i}")) { "Show" }
                    select id=(format!("show{i}")) name=(format!("show{i}")) {
                        @for s in Show::ALL {
                            option value=(s.as_str()) selected[t.map_or(Show::List, |t| t.show) == s] { (s.as_str()) }
                        }
                    }
                    label for=(format!("metric{i}")) { "Metric (a graph's)" }
                    input id=(format!("metric{i}")) type="text" name=(format!("metric{i}")) placeholder="load1" value=[t.and_then(|t| t.metric.as_deref())];
                }
            }
            p { button.primary type="submit" { "Save" } }
        }
    }
}
