//! Dashboards: tiles of saved filters, each a count or a short list.

use super::*;

/// What a tile's saved filter found.
pub enum TileItems {
    Objects(Vec<ObjectView>),
    Problems(Vec<Problem>),
    Alerts(Vec<Alert>),
    Incidents(Vec<Incident>),
    Events(Vec<Event>),
}

impl TileItems {
    pub fn len(&self) -> usize {
        match self {
            TileItems::Objects(v) => v.len(),
            TileItems::Problems(v) => v.len(),
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
    pub list: bool,
    pub found: Result<TileItems, String>,
    /// The count stopped at the tile's cap.
    pub capped: bool,
}

/// Rows a list tile shows.
const TILE_ROWS: usize = 10;

fn tile_rows(now: Timestamp, items: &TileItems) -> Markup {
    html! {
        ul.list {
            @match items {
                TileItems::Objects(v) => @for o in v.iter().take(TILE_ROWS) {
                    li { (state_badge(o.object.kind, o.state.as_ref())) span.what { a href=(format!("/objects/{}", o.object.id)) { (view_name(o)) } } }
                },
                TileItems::Problems(v) => @for p in v.iter().take(TILE_ROWS) {
                    li { (state_badge(p.object.kind, Some(&p.state))) span.what { a href=(format!("/objects/{}", p.object.id)) { (object_name(&p.object, p.host_name.as_deref())) } } }
                },
                TileItems::Alerts(v) => @for a in v.iter().take(TILE_ROWS) {
                    li { (severity_badge(a.severity)) span.what { a href=(format!("/alerts/{}", a.id)) { (a.title) } br; small { (a.status.as_str()) ", " (when(now, a.opened_at)) } } }
                },
                TileItems::Incidents(v) => @for i in v.iter().take(TILE_ROWS) {
                    li { (severity_badge(i.severity)) span.what { a href=(format!("/incidents/{}", i.id)) { (i.title) } br; small { (i.status) } } }
                },
                TileItems::Events(v) => @for e in v.iter().take(TILE_ROWS) {
                    li { span.what { strong { (e.kind.as_str()) } " " (event_summary(e)) br; small { (when(now, e.ts)) } } }
                },
            }
        }
    }
}

/// `/dashboards`: the dashboards the caller may see.
pub fn dashboards(names: &[String]) -> Markup {
    html! {
        @if names.is_empty() {
            p { "No dashboards. A dashboard is a configuration document of kind " code { "dashboards" } " whose " code { "spec" } " is the base64 of " code { "{\"tiles\": [{\"filter\": \"<saved filter>\", \"title\"?, \"show\"?: \"count\" | \"list\"}]}" } "." }
        }
        ul.list {
            @for n in names { li { span.what { a href=(format!("/dashboards/{}", encode_segment(n))) { (n) } } } }
        }
    }
}

/// `/dashboards/{name}`: its tiles.
pub fn dashboard(now: Timestamp, tiles: &[TileView]) -> Markup {
    html! {
        div.tiles {
            @for t in tiles {
                section.tile aria-label=(t.title) {
                    h2 { (t.title) }
                    @match &t.found {
                        Err(why) => p.notice.error { (why) },
                        Ok(items) => {
                            p.count { strong { (items.len()) @if t.capped { "+" } } }
                            @if t.list && !items.is_empty() { (tile_rows(now, items)) }
                        },
                    }
                }
            }
        }
    }
}
