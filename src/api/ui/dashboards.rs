//! The UI's dashboards: each tile's saved filter run as the list it names would run it.

use super::*;
use crate::model::dashboard::{Layout, MAX_TILES, Show, Tile};
use crate::web::views::{TileItems, TileView};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/dashboards", dashboards).permission("objects:read").doc("ui", "Dashboards page", "The tenant's dashboards: the shared ones and the caller's own (`ownerId`).")
            .answers_text(200, HTML).page(),
        Route::get("/dashboards/new", new_dashboard).identity().doc("ui", "New dashboard form", "The dashboard editor, empty: a name, shared or the caller's own, and rows of tiles (a saved filter, a title, count, list or graph, a graph's metric). Needs the dashboards kind's `write` permission.")
            .answers_text(200, HTML).answers_text(403, HTML).page(),
        Route::post("/dashboards", create_dashboard).identity().doc("ui", "Create a dashboard", "Form: `name`, `shared` (`on`), rows `filter{i}`, `title{i}`, `show{i}` (`count`, `list`, `graph`), `metric{i}` for i from 0 (a row without a filter is left out; at most 24). As `POST /api/v1/dashboards` with the layout as base64 JSON in `spec` and the caller as `ownerId`; 303 to the dashboard. Needs the dashboards kind's `write` permission.")
            .form::<HashMap<String, String>>().answers_empty(303).answers_text(403, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::get("/dashboards/{name}/edit", edit_dashboard).identity().doc("ui", "Dashboard editor", "The dashboard's tiles as rows of a form, with three empty rows to add tiles. Needs the dashboards kind's `write` permission and a dashboard the caller sees.")
            .answers_text(200, HTML).answers_text(403, HTML).answers_text(404, HTML).page(),
        Route::post("/dashboards/{name}", update_dashboard).identity().doc("ui", "Change a dashboard", "Form: as creating one, with `version` (the version the editor showed: a change since is 409), without `name`. As `PUT /api/v1/dashboards/{name}` with `If-Match`; 303 to the dashboard.")
            .form::<HashMap<String, String>>().answers_empty(303).answers_text(403, HTML).answers_text(404, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/saved-filters", save_filter).identity().doc("ui", "Save a list's filter", "Form: `name`, `resource` (`problems`, `alerts` or `objects`), `back` (the list's address: its query, less what only arranges the page (`sort`, `group`, `cursor`, `from`, `select`), becomes the filter's `query`; `handled=1` of problems becomes `includeHandled`). As `POST /api/v1/saved-filters` (the saved-filters kind's write permission); 303 to `back`; a taken or bad name is 409 or 422 with the reason.")
            .form::<SaveFilterForm>().answers_empty(303).answers_text(403, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::get("/tactical", tactical).permission("objects:read").doc("ui", "Tactical overview", "Icinga's tactical overview as a wallboard: hosts and services by state, each with how many of the bad ones are neither acknowledged nor in downtime, the problems of each site (by the `site` label), and (with `alerts:read`) the open alerts by severity; each count leads to its list. `kiosk=1` fills the screen without navigation; live.")
            .query::<BoardQuery>().answers_text(200, HTML).page(),
        Route::get("/slos", objectives).permission("objects:read").doc("ui", "Objectives page", "Each objective (`slos`) of the tenant: its target over its window, its indicator now, the error budget left, and the burn-rate pairs firing (`GET /api/v1/slos/{name}/status`).")
            .answers_text(200, HTML)
            .page(),
        Route::get("/dashboards/{name}", dashboard).permission("objects:read").doc("ui", "A dashboard", "Its `spec` is read as the base64 of `{\"tiles\": [{\"filter\": <a saved filter's name>, \"title\"?, \"show\"?: \"count\" | \"list\" | \"graph\", \"metric\"?}]}` (at most 24 tiles; a graph names its metric). Each tile runs its saved filter (`resource` objects, hosts, services, problems, alerts, incidents or events; `query` as that list's parameters: `selector`, `q`, `folder`, `status`, `severity`, `types`, `includeHandled`; a problems filter narrows the problems page's inbox, event alerts included, by `q`, `severity`, `selector`, `age` and `includeHandled` as that page does), at most 1,000 items, and shows how many match, with `list` the first ten, with `graph` the last day of `metric` for the first four objects (a filter of objects, hosts, services or problems; `metrics:read`); a count leads to the page that lists it; a tile whose filter is missing, unreadable or beyond the caller's permissions says so; `kiosk=1` fills the screen without navigation (a wallboard); live.")
            .query::<BoardQuery>().answers_text(200, HTML).answers_text(404, HTML).page(),
    ]
}

/// A wallboard's query: what was just done, and whether it fills the screen.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct BoardQuery {
    did: Option<String>,
    /// `1`: without navigation, over the whole screen.
    kiosk: Option<String>,
}

impl BoardQuery {
    fn kiosk(&self) -> bool {
        self.kiosk.as_deref() == Some("1")
    }
}

/// Objects, problems and alerts the tactical overview counts at most.
const TACTICAL_CAP: usize = 5000;

async fn tactical(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<BoardQuery>,
) -> Response {
    let found = async {
        let p = &c.principal;
        let objects = st
            .inventory
            .objects(p, ObjectFilter::default(), None, TACTICAL_CAP, true)
            .await?;
        let problems = st.results.problems(p, true, TACTICAL_CAP).await?;
        let alerts = if p.allows("alerts:read") {
            let open = AlertFilter {
                statuses: vec![AlertStatus::Open],
                ..Default::default()
            };
            Some(st.alerting.list(p, open, None, TACTICAL_CAP).await?)
        } else {
            None
        };
        Ok::<_, Problem>(crate::model::tactical::Tactical::of(
            &objects,
            &problems,
            alerts.as_deref(),
        ))
    };
    let overview = match found.await {
        Ok(t) => t,
        Err(p) => return failed(p),
    };
    let kiosk = q.kiosk();
    html(
        StatusCode::OK,
        web::page(
            Frame {
                kiosk,
                ..frame(
                    &c,
                    Section::Dashboards,
                    "Tactical overview".into(),
                    ALERT_LIVE,
                    q.did.as_deref(),
                )
            },
            views::tactical(&overview, (!kiosk).then_some("/tactical?kiosk=1")),
        ),
    )
}

async fn objectives(State(st): State<AppState>, c: Visitor) -> Response {
    match st.slos.list(&c.principal).await {
        Ok(slos) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Dashboards, "Objectives".into(), &[], None),
                views::objectives(&slos),
            ),
        ),
        Err(e) => failed(e),
    }
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
                    views::dashboards(&names, c.principal.allows(kind.write)),
                ),
            )
        }
        Err(e) => failed(e),
    }
}

/// A saved filter's query read as its list's query.
fn listed<Q: serde::de::DeserializeOwned>(query: &HashMap<String, String>) -> Result<Q, String> {
    serde_json::to_value(query)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("the filter's query does not read: {e}"))
}

/// The page that lists what a saved filter of `resource` with `query` finds: where its tile
/// leads.
fn list_link(resource: &str, query: &HashMap<String, String>) -> Option<String> {
    let (path, keys): (&str, &[(&str, &str)]) = match resource {
        "objects" | "hosts" | "services" => (
            "/objects",
            &[
                ("q", "q"),
                ("selector", "selector"),
                ("folder", "folder"),
                ("state", "state"),
            ],
        ),
        "problems" => (
            "/",
            &[
                ("q", "q"),
                ("severity", "severity"),
                ("selector", "selector"),
                ("age", "age"),
            ],
        ),
        "alerts" => (
            "/alerts",
            &[
                ("status", "status"),
                ("severity", "severity"),
                ("selector", "selector"),
                ("objectId", "objectId"),
                ("ruleId", "ruleId"),
            ],
        ),
        "incidents" => ("/incidents", &[]),
        "events" => (
            "/events",
            &[
                ("types", "types"),
                ("severity", "severity"),
                ("objectId", "objectId"),
            ],
        ),
        _ => return None,
    };
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (from, to) in keys {
        if let Some(v) = query.get(*from).filter(|v| !v.trim().is_empty()) {
            out.append_pair(to, v);
        }
    }
    match resource {
        "problems" if query.get("includeHandled").map(String::as_str) == Some("true") => {
            out.append_pair("handled", "1");
        }
        "incidents" if query.get("status").map(String::as_str) == Some("all") => {
            out.append_pair("all", "1");
        }
        _ => {}
    }
    let q = out.finish();
    Some(if q.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{q}")
    })
}

/// What one saved filter lists, as its list would, and the page that lists it.
async fn run_filter(
    st: &AppState,
    c: &Caller,
    name: &str,
) -> Result<(TileItems, Option<String>), String> {
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
    let link = list_link(resource, &query);
    let items = match resource {
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
            let text = |key: &str| query.get(key).map_or("", |v| v.trim()).to_string();
            let typed = views::InboxQuery {
                q: text("q"),
                severity: text("severity"),
                selector: text("selector"),
                age: text("age"),
                handled: text("includeHandled") == "true",
                ..Default::default()
            };
            let (narrowing, _) = super::alerts::narrowing(&typed).map_err(refused)?;
            let entries = super::alerts::inbox_entries(st, c).await.map_err(refused)?;
            let mut found = inbox::narrowed(entries, &narrowing, st.clock.now());
            found.truncate(TILE_CAP);
            Ok(TileItems::Inbox(found))
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
            let list = listed::<crate::api::events::EventQuery>(&query)?;
            let filter = crate::api::events::filter(&list, c.principal.tenant)
                .ok_or("the filter names a type, object or severity events do not have")?;
            st.events
                .list_committed(&st.store, filter, None, TILE_CAP)
                .await
                .map(TileItems::Events)
                .map_err(|e| refused(e.into()))
        }
        other => Err(format!(
            "a saved filter of {other:?} is not shown on dashboards"
        )),
    }?;
    Ok((items, link))
}

/// Objects a graph tile draws at most.
const GRAPHED_OBJECTS: usize = 4;

/// A graph tile's lines: `metric` of the first objects its filter found, each captioned with
/// its object.
async fn tile_graphs(
    st: &AppState,
    c: &Caller,
    items: &TileItems,
    metric: &str,
) -> Result<Vec<views::Graph>, String> {
    let objects: Vec<(Uuid, String, &str)> = match items {
        TileItems::Objects(v) => v
            .iter()
            .map(|o| {
                let perf = o.state.as_ref().map_or("", |s| s.perfdata.as_str());
                (o.object.id, views::view_name(o), perf)
            })
            .collect(),
        TileItems::Inbox(v) => v
            .iter()
            .filter_map(inbox::Entry::problem)
            .map(|p| {
                (
                    p.object.id,
                    views::problem_name(p),
                    p.state.perfdata.as_str(),
                )
            })
            .collect(),
        _ => {
            return Err(
                "a graph tile needs a saved filter of objects, hosts, services or problems".into(),
            );
        }
    };
    if !c.principal.allows("metrics:read") {
        return Err("this tile needs permission metrics:read".into());
    }
    let mut graphs = Vec::new();
    for (id, name, perf) in objects.into_iter().take(GRAPHED_OBJECTS) {
        let found = object_graphs(st, c, id, Some(metric), perf, Default::default())
            .await
            .map_err(|p| p.detail)?;
        graphs.extend(found.into_iter().map(|mut g| {
            g.label = format!("{name} · {}", g.label);
            g
        }));
    }
    Ok(graphs)
}

async fn dashboard(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<BoardQuery>,
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
            let (mut found, link) = match run_filter(&st, &c, &t.filter).await {
                Ok((items, link)) => (Ok(items), link),
                Err(why) => (Err(why), None),
            };
            let capped = found.as_ref().is_ok_and(|items| items.len() >= TILE_CAP);
            let mut graphs = Vec::new();
            if let (Show::Graph, Some(metric), Ok(items)) = (t.show, &t.metric, &found) {
                match tile_graphs(&st, &c, items, metric).await {
                    Ok(g) => graphs = g,
                    Err(why) => found = Err(why),
                }
            }
            tiles.push(TileView {
                title: t.title.unwrap_or_else(|| t.filter.clone()),
                show: t.show,
                found,
                capped,
                graphs,
                link,
            });
        }
        Ok::<_, Problem>((doc.name, kind, tiles))
    };
    match found.await {
        Ok((name, kind, tiles)) => {
            let edit = c
                .principal
                .allows(kind.write)
                .then(|| format!("/dashboards/{}/edit", views::encode_segment(&name)));
            html(
                StatusCode::OK,
                web::page(
                    Frame {
                        kiosk: q.kiosk(),
                        ..frame(
                            &c,
                            Section::Dashboards,
                            name.clone(),
                            ALERT_LIVE,
                            q.did.as_deref(),
                        )
                    },
                    views::dashboard(
                        &c.now(&st),
                        &tiles,
                        edit.as_deref().filter(|_| !q.kiosk()),
                        (!q.kiosk())
                            .then(|| {
                                format!("/dashboards/{}?kiosk=1", views::encode_segment(&name))
                            })
                            .as_deref(),
                    ),
                ),
            )
        }
        Err(p) => failed(p),
    }
}

/// The dashboards kind, if the caller may write it.
fn writable(c: &Caller) -> Result<&'static Kind, Problem> {
    let kind = kind_by_name("dashboards")
        .ok_or_else(|| Problem::internal("the dashboards kind is missing"))?;
    if !c.principal.allows(kind.write) {
        return Err(Problem::new(Code::AuthForbidden, kind.write));
    }
    Ok(kind)
}

/// The saved filters the editor offers: name and what each lists; none when the caller may
/// not read them (the field still takes a typed name).
async fn filter_choices(st: &AppState, c: &Caller) -> Vec<(String, String)> {
    let Some(kind) = kind_by_name("saved-filters").filter(|k| c.principal.allows(k.read)) else {
        return Vec::new();
    };
    match st.inventory.list(&c.principal, kind, None, None, 500).await {
        Ok(docs) => docs
            .iter()
            .map(|d| {
                let resource = d.to_json()["resource"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (d.name.clone(), resource)
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %Problem::from(e).detail, "could not list the saved filters");
            Vec::new()
        }
    }
}

fn editor(c: &Visitor, title: String, draft: &views::DashboardDraft<'_>) -> Response {
    html(
        StatusCode::OK,
        web::page(
            frame(c, Section::Dashboards, title, &[], None),
            views::dashboard_editor(draft),
        ),
    )
}

async fn new_dashboard(State(st): State<AppState>, c: Visitor) -> Response {
    if let Err(p) = writable(&c) {
        return failed(p);
    }
    let filters = filter_choices(&st, &c).await;
    let draft = views::DashboardDraft {
        name: None,
        shared: true,
        version: 0,
        tiles: &[],
        filters: &filters,
    };
    editor(&c, "New dashboard".into(), &draft)
}

async fn edit_dashboard(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(name): ApiPath<String>,
) -> Response {
    let found = async {
        let kind = writable(&c)?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let json = doc.to_json();
        if !visible(&json, &c) {
            return Err(Problem::not_found());
        }
        // A layout that does not read starts over rather than locking the dashboard.
        let layout =
            Layout::from_spec(json["spec"].as_str().unwrap_or_default()).unwrap_or_default();
        Ok::<_, Problem>((doc, json["shared"].as_bool() == Some(true), layout))
    };
    match found.await {
        Ok((doc, shared, layout)) => {
            let filters = filter_choices(&st, &c).await;
            let draft = views::DashboardDraft {
                name: Some(&doc.name),
                shared,
                version: doc.version,
                tiles: &layout.tiles,
                filters: &filters,
            };
            editor(&c, format!("Edit {}", doc.name), &draft)
        }
        Err(p) => failed(p),
    }
}

/// The editor's rows as a layout: rows without a filter left out.
fn edited_layout(f: &HashMap<String, String>) -> Result<Layout, Problem> {
    let field = |name: String| f.get(&name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut tiles = Vec::new();
    for i in 0..MAX_TILES + views::SPARE_ROWS {
        let Some(filter) = field(format!("filter{i}")) else {
            continue;
        };
        let show = match field(format!("show{i}")) {
            None => Show::default(),
            Some(s) => Show::ALL
                .into_iter()
                .find(|v| v.as_str() == s)
                .ok_or_else(|| {
                    Problem::validation(
                        "dashboard",
                        format!("tile {}: show {s:?} is not count, list or graph", i + 1),
                    )
                })?,
        };
        tiles.push(Tile {
            title: field(format!("title{i}")).map(str::to_string),
            filter: filter.to_string(),
            show,
            metric: field(format!("metric{i}")).map(str::to_string),
        });
    }
    let layout = Layout { tiles };
    layout
        .check()
        .map_err(|e| Problem::validation("dashboard", e))?;
    Ok(layout)
}

/// The "save this filter" form of a list page.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct SaveFilterForm {
    name: Option<String>,
    /// `problems`, `alerts` or `objects`.
    resource: Option<String>,
    /// The list's address with its narrowing: its query becomes the filter's.
    back: Option<String>,
}

/// Parameters of a list page that are its view, not what it lists.
const VIEW_ONLY: &[&str] = &["cursor", "from", "select", "did", "sort", "group"];

/// Saves a list page's narrowing as a saved filter, as `POST /api/v1/saved-filters` would.
async fn save_filter(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = form::<SaveFilterForm>(&body)?;
    let kind = kind_by_name("saved-filters")
        .ok_or_else(|| Problem::internal("the saved-filters kind is missing"))?;
    if !c.principal.allows(kind.write) {
        return Err(Problem::new(Code::AuthForbidden, kind.write).into());
    }
    let resource = match f.resource.as_deref() {
        Some(r @ ("problems" | "alerts" | "objects")) => r,
        _ => {
            return Err(Problem::validation(
                "resource",
                "resource must be problems, alerts or objects",
            )
            .into());
        }
    };
    let back = f.back.as_deref().unwrap_or("/");
    let mut query = serde_json::Map::new();
    if let Some((_, raw)) = back.split_once('?') {
        for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
            if VIEW_ONLY.contains(&k.as_ref()) || v.trim().is_empty() {
                continue;
            }
            match (resource, k.as_ref()) {
                ("problems", "handled") => {
                    query.insert(
                        "includeHandled".into(),
                        Value::String((v == "1").to_string()),
                    );
                }
                _ => {
                    query.insert(k.into_owned(), Value::String(v.into_owned()));
                }
            }
        }
    }
    let value = serde_json::json!({
        "name": f.name.as_deref().map(str::trim).unwrap_or_default(),
        "resource": resource,
        "query": query,
    });
    st.inventory
        .create(&c.principal, &c.actor, kind, value)
        .await?;
    Ok(Done::back(Some(back), "saved-filter"))
}

async fn create_dashboard(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let kind = writable(&c)?;
    let f: HashMap<String, String> = form(&body)?;
    let layout = edited_layout(&f)?;
    let mut value = serde_json::json!({
        "name": f.get("name").map(|n| n.trim()).unwrap_or_default(),
        "shared": f.get("shared").map(String::as_str) == Some("on"),
        "spec": layout.to_spec(),
    });
    if let Some(user) = c.principal.user {
        value["ownerId"] = Value::String(user.to_string());
    }
    let doc = st
        .inventory
        .create(&c.principal, &c.actor, kind, value)
        .await?;
    let to = format!("/dashboards/{}", views::encode_segment(&doc.name));
    Ok(Done::to(to, "saved"))
}

async fn update_dashboard(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(name): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let kind = writable(&c)?;
    let f: HashMap<String, String> = form(&body)?;
    let layout = edited_layout(&f)?;
    let doc = st.inventory.get(&c.principal, kind, name.clone()).await?;
    let mut value = doc.to_json();
    if !visible(&value, &c) {
        return Err(Problem::not_found().into());
    }
    value["shared"] = Value::Bool(f.get("shared").map(String::as_str) == Some("on"));
    value["spec"] = Value::String(layout.to_spec());
    let version = f.get("version").and_then(|v| v.parse().ok()).unwrap_or(0);
    let doc = st
        .inventory
        .update(&c.principal, &c.actor, kind, name, version, value)
        .await?;
    let to = format!("/dashboards/{}", views::encode_segment(&doc.name));
    Ok(Done::to(to, "saved"))
}
