//! The UI's dashboards: each tile's saved filter run as the list it names would run it.

use super::*;
use crate::model::dashboard::{Layout, Show};
use crate::web::views::{TileItems, TileView};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/dashboards", dashboards).permission("objects:read").doc("ui", "Dashboards page", "The tenant's dashboards: the shared ones and the caller's own (`ownerId`).")
            .answers_text(200, HTML).page(),
        Route::get("/dashboards/{name}", dashboard).permission("objects:read").doc("ui", "A dashboard", "Its `spec` is read as the base64 of `{\"tiles\": [{\"filter\": <a saved filter's name>, \"title\"?, \"show\"?: \"count\" | \"list\"}]}` (at most 24 tiles). Each tile runs its saved filter (`resource` objects, hosts, services, problems, alerts, incidents or events; `query` as that list's parameters: `selector`, `q`, `folder`, `status`, `severity`, `types`, `includeHandled`), at most 1,000 items, and shows how many match, and with `list` the first ten; a tile whose filter is missing, unreadable or beyond the caller's permissions says so; live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
    ]
}

/// Items a tile counts at most.
const TILE_CAP: usize = 1000;

/// Who may see a dashboard: everyone when it is shared, else its owner.
fn visible(doc: &Value, c: &Caller) -> bool {
    doc.get("shared").and_then(Value::as_bool) == Some(true)
        || doc
            .get("ownerId")
            .and_then(Value::as_str)
            .is_some_and(|o| c.principal.user.is_some_and(|u| u.to_string() == o))
}

async fn dashboards(State(st): State<AppState>, c: Visitor) -> Response {
    let Some(kind) = kind_by_name("dashboards") else {
        return failed(Problem::internal("the dashboards kind is missing"));
    };
    match st.inventory.list(&c.principal, kind, None, None, 500).await {
        Ok(docs) => {
            let names: Vec<String> = docs
                .iter()
                .filter(|d| visible(&d.to_json(), &c))
                .map(|d| d.name.clone())
                .collect();
            html(
                StatusCode::OK,
                web::page(
                    frame(&c, Section::Dashboards, "Dashboards".into(), &[], None),
                    views::dashboards(&names),
                ),
            )
        }
        Err(e) => failed(e),
    }
}

/// A comma-separated query value as a list (empty: none).
fn csv<T: std::str::FromStr>(raw: Option<&String>) -> Result<Vec<T>, String> {
    raw.map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| format!("{s:?} is not a value this list knows"))
        })
        .collect()
}

/// A saved filter's query read as its list's query.
fn listed<Q: serde::de::DeserializeOwned>(query: &HashMap<String, String>) -> Result<Q, String> {
    serde_json::to_value(query)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("the filter's query does not read: {e}"))
}

/// What one saved filter lists, as its list would.
async fn run_filter(st: &AppState, c: &Caller, name: &str) -> Result<TileItems, String> {
    let kind = kind_by_name("saved-filters").ok_or("the saved-filters kind is missing")?;
    let doc = st
        .inventory
        .get(&c.principal, kind, name.to_string())
        .await
        .map_err(|e| format!("the saved filter {name:?}: {}", Problem::from(e).detail))?
        .to_json();
    let resource = doc
        .get("resource")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let query: HashMap<String, String> = doc
        .get("query")
        .and_then(|q| serde_json::from_value(q.clone()).ok())
        .unwrap_or_default();
    let needs = |p: &str| {
        if c.principal.allows(p) {
            Ok(())
        } else {
            Err(format!("this tile needs permission {p}"))
        }
    };
    let refused = |e: Problem| e.detail;
    match resource {
        "objects" | "hosts" | "services" => {
            needs("objects:read")?;
            let kind = match resource {
                "hosts" => Some(ObjectKind::Host),
                "services" => Some(ObjectKind::Service),
                _ => None,
            };
            let filter = listed::<ListQuery>(&query)?.filter(kind).map_err(refused)?;
            st.inventory
                .objects(&c.principal, filter, None, TILE_CAP, true)
                .await
                .map(TileItems::Objects)
                .map_err(|e| refused(e.into()))
        }
        "problems" => {
            needs("objects:read")?;
            let handled = query.get("includeHandled").map(String::as_str) == Some("true");
            st.results
                .problems(&c.principal, handled, TILE_CAP)
                .await
                .map(TileItems::Problems)
                .map_err(|e| refused(e.into()))
        }
        "alerts" => {
            needs("alerts:read")?;
            let mut list = listed::<AlertQuery>(&query)?;
            if list.status.as_deref().is_none_or(|s| s.trim().is_empty()) {
                list.status = Some("open".into());
            }
            let filter = list
                .filter()
                .ok_or("the filter names a status, severity or id alerts do not have")?;
            st.alerting
                .list(&c.principal, filter, None, TILE_CAP)
                .await
                .map(TileItems::Alerts)
                .map_err(|e| refused(e.into()))
        }
        "incidents" => {
            needs("incidents:read")?;
            let open_only = query.get("status").map(String::as_str) != Some("all");
            st.alerting
                .incidents(&c.principal, open_only, None, TILE_CAP)
                .await
                .map(TileItems::Incidents)
                .map_err(|e| refused(e.into()))
        }
        "events" => {
            needs("events:read")?;
            let filter = EventFilter {
                tenant_id: c.principal.tenant,
                types: csv(query.get("types"))?,
                ..Default::default()
            };
            st.events
                .list_committed(&st.store, filter, None, TILE_CAP)
                .await
                .map(TileItems::Events)
                .map_err(|e| refused(e.into()))
        }
        other => Err(format!(
            "a saved filter of {other:?} is not shown on dashboards"
        )),
    }
}

async fn dashboard(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(name): ApiPath<String>,
) -> Response {
    let found = async {
        let kind = kind_by_name("dashboards")
            .ok_or_else(|| Problem::internal("the dashboards kind is missing"))?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let json = doc.to_json();
        if !visible(&json, &c) {
            return Err(Problem::not_found());
        }
        let spec = json.get("spec").and_then(Value::as_str).unwrap_or_default();
        let layout = Layout::from_spec(spec).map_err(|e| Problem::validation("dashboard", e))?;
        let mut tiles = Vec::new();
        for t in layout.tiles {
            let found = run_filter(&st, &c, &t.filter).await;
            let capped = found.as_ref().is_ok_and(|items| items.len() >= TILE_CAP);
            tiles.push(TileView {
                title: t.title.unwrap_or_else(|| t.filter.clone()),
                list: t.show == Show::List,
                found,
                capped,
            });
        }
        Ok::<_, Problem>((doc.name, tiles))
    };
    match found.await {
        Ok((name, tiles)) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Dashboards, name, ALERT_LIVE, None),
                views::dashboard(st.clock.now(), &tiles),
            ),
        ),
        Err(p) => failed(p),
    }
}
