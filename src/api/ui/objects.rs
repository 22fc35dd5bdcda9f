//! The UI's objects, events, silences, downtimes and sites.

use super::*;
use crate::inventory::InventoryError;
use crate::model::config::CheckRun;
use crate::model::interval::{TimeInterval, TimeOfDayRange};

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/objects", objects).permission("objects:read").doc("ui", "Objects page", "The filters of `GET /api/v1/objects` (the form has `q`: name contains, `selector`: labels, `folder`, `state`), `cursor`; hosts and services with their state, 100 a page; `sort` (`severity`: worst state first, unhandled before handled; `newest`, `oldest`: by the last hard change; `name`) and `group` (`host`, `site`: the `site` label, `severity`: the state) read the whole list (at most 5000 objects), sort it and page it by `from`; a value it does not know is 422. Objects can be selected for a downtime together. `site` lists a federation site's objects as mirrored here (stale by uplink while the site is silent), each leading to its forwarded events.")
            .query::<ObjectsQuery>().answers_text(200, HTML).answers_text(422, HTML).page(),
        Route::get("/objects/{id}", object).permission("objects:read").doc("ui", "Object page", "State, output, long output and performance data, a host's services, the object's recent events, check now; live. Its metric graphs show `range` (`1h`, `6h`, `24h`: the default, `7d`, `30d`) ending at `end` (RFC 3339; none: now), with the current value of the last result and its warning and critical thresholds; another range or end is 422.")
            .query::<ObjectQuery>().answers_text(200, HTML).answers_text(404, HTML).answers_text(422, HTML).page(),
        Route::post("/objects/{id}/check-now", check_now).permission("checks:run").doc("ui", "Check an object now", "Form: `back`. As `POST /api/v1/objects/{id}/check-now`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/events", events).permission("events:read").doc("ui", "Events page", "The tenant's events, newest first, 50 a page, each as what it says (a notification: its status, contact, channel, step, attempt, error; an escalation: its step, contacts and channels; an ack: by whom and how). Filters: `types` (one event type), `severity`, `objectId`, `q` (words every event shown has in its type or payload; a search reads at most 5000 events a page), `from` and `to` (on the caller's wall clock, `2027-03-27T22:00`); `cursor`. An unknown type, severity, id or time is 422; live.")
            .query::<EventsQuery>().answers_text(200, HTML).answers_text(422, HTML).page(),
        Route::get("/silences", silences).permission("objects:read").doc("ui", "Silences page", "Active silences with how many active alerts each matches now and a warning when one ends within the hour, upcoming ones, the last 50 expired; expire.")
            .answers_text(200, HTML).page(),
        Route::get("/silences/new", new_silence).permission("silences:write").doc("ui", "New silence form", "Pre-filled from the query: `selector`, `textRegex` (the alert page links it with the alert's labels and title), `comment`, `duration`; with a selector or a pattern and `alerts:read`, it lists the alerts such a silence would hold now (its Preview button submits the form here).")
            .query::<SilenceDraftQuery>().answers_text(200, HTML).page(),
        Route::post("/silences", create_silence).permission("silences:write").doc("ui", "Create a silence", "Form: `selector`, `textRegex`, `start` (on the caller's wall clock, `2027-03-27T22:00`; empty: now), `duration` (from the start), `comment`. As `POST /api/v1/silences` (`startsAt`, `expiresAt`); 303 to `/silences`; a refusal shows the form again with the reason (422).")
            .form::<SuppressionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/silences/{id}/edit", edit_silence).permission("silences:write").doc("ui", "Edit a silence", "The silence's form: what it matches (`selector`, `textRegex`), when it starts and expires on the caller's wall clock, why; at its version. An unknown silence is 404.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/silences/{id}", update_silence).permission("silences:write").doc("ui", "Save a silence", "Form: `selector`, `textRegex`, `comment`, `starts` and `ends` (the caller's wall clock, `2027-03-27T22:00`), `version` (the version the form showed). As `PUT /api/v1/silences/{id}` with `If-Match` (its `expireWhenUnmatchedFor` kept); 303 to `/silences`; a refusal shows the form again with the reason (409 after a change since, 422 for what the API refuses, an expired silence included).")
            .form::<EditForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/silences/{id}/extend", extend_silence).permission("silences:write").doc("ui", "Extend a silence", "Form: `by` (a duration: `1h`, `4h`, `24h`, `168h`), `version` (the version the page showed: a change made since is 409, as `If-Match` on `PUT /api/v1/silences/{id}`), `back`. Its expiry moves that much later, as that edit would; 303 to `back`. An expired one is 422.")
            .form::<ExtendForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/silences/{id}/expire", expire_silence).permission("silences:write").doc("ui", "Expire a silence", "Form: `back`. As `DELETE /api/v1/silences/{id}`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/downtimes", downtimes).permission("objects:read").doc("ui", "Downtimes page", "Active downtimes (flagged when ending within the hour), upcoming or waiting ones, the last 50 ended; end now.")
            .answers_text(200, HTML).page(),
        Route::get("/downtimes/new", new_downtime).permission("downtimes:write").doc("ui", "New downtime form", "`object` (an object id: the object page links it) or a selector field.")
            .query::<DowntimeDraftQuery>().answers_text(200, HTML).page(),
        Route::post("/downtimes", create_downtime).permission("downtimes:write").doc("ui", "Schedule a downtime", "Form: `objectId` or `selector`, `start` (`2027-03-27T22:00` on the caller's wall clock, their `timeZone` preference else UTC; empty: now), `duration` (from the start), `weekdays`, `daysOfMonth`, `months` and `times` (`saturday`, `-1`, `december`, `22:00-24:00`; comma-separated; any of them makes it recur within that time, in the caller's zone), `flexible` (a duration: a flexible downtime that starts with the first problem within the time and lasts that long; empty: fixed), `services` (`alone`: a host's downtime without its services; else with them), `sites` (with `config:write`: federation sites it is shipped to), `comment`. As `POST /api/v1/downtimes` (fixed); 303 to `/downtimes`; a refusal shows the form again with the reason (422).")
            .form::<SuppressionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/downtimes/{id}/edit", edit_downtime).permission("downtimes:write").doc("ui", "Edit a downtime", "The downtime's form: when it starts and ends on the caller's wall clock, why; at its version (what it covers and how it repeats stay). An unknown downtime is 404.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/downtimes/{id}", update_downtime).permission("downtimes:write").doc("ui", "Save a downtime", "Form: `comment`, `starts` and `ends` (the caller's wall clock), `version` (the version the form showed); what it covers: `selector` (for a downtime of one object, a selector given replaces the object; empty keeps it), `services` (`alone`: a host without its services); `flexible` (a length; empty: fixed); its recurrence `weekdays`, `daysOfMonth`, `months`, `times` (as the new downtime form; all empty: it does not recur; read in the zone of its windows, else the caller's), which a downtime whose windows one form cannot show (several intervals, years, a calendar feed) keeps as they are. As `PUT /api/v1/downtimes/{id}` with `If-Match`, the rest of the downtime as it is; 303 to `/downtimes`; a refusal shows the form again with the reason (409 after a change since, 422 for what the API refuses: one over, one from the main).")
            .form::<EditForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/downtimes/{id}/extend", extend_downtime).permission("downtimes:write").doc("ui", "Extend a downtime", "Form: `by` (a duration: `1h`, `4h`, `24h`, `168h`), `version` (the version the page showed: a change made since is 409, as `If-Match` on `PUT /api/v1/downtimes/{id}`), `back`. Its end moves that much later, as that edit would; 303 to `back`. One that is over, or one from the main, is 422.")
            .form::<ExtendForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/downtimes/{id}/end", end_downtime).permission("downtimes:write").doc("ui", "End a downtime", "Form: `back`. As `DELETE /api/v1/downtimes/{id}`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/sites", sites).permission("objects:read").doc("ui", "Sites page", "Each field site as the main sees it: connected, quiet or stale, its last heartbeat, version, bundle, apply error, open alerts forwarded; live.")
            .answers_text(200, HTML).page(),
    ]
}

/// The objects page's query: the API's filters, and the order.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ObjectsQuery {
    #[serde(flatten)]
    list: ListQuery,
    /// `severity`, `newest`, `oldest` or `name`.
    sort: Option<String>,
    /// `host`, `site` or `severity`.
    group: Option<String>,
    /// How many objects earlier pages of a sorted list showed.
    from: Option<String>,
}

async fn objects(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<ObjectsQuery>,
) -> Response {
    let text = |v: &Option<String>| v.as_deref().unwrap_or_default().trim().to_string();
    let (sort_by, group_by) = (text(&q.sort), text(&q.group));
    let order = list_order(&sort_by, &group_by);
    let (filter, (sort, group)) = match q.list.filter(None).and_then(|f| Ok((f, order?))) {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    // Sorted or grouped, the list is read whole (up to its bound) and paged by offset.
    let ordered = sort.is_some() || group.is_some();
    let cursor = q.list.page.cursor.clone().filter(|_| !ordered);
    let req = ui_page(cursor, 100, OBJECTS);
    let (batch, want) = if ordered {
        (SORT_BATCH, SEARCHED)
    } else {
        (req.limit, req.limit)
    };
    let site = q.list.site();
    let read = |after, limit| {
        let filter = filter.clone();
        let (st, c) = (&st, &c);
        async move { crate::api::objects::object_page(st, c, site, filter, after, limit, true).await }
    };
    let found = search_pages(
        id_cursor(&req),
        batch,
        want,
        |v: &ObjectView| v.object.id,
        |_| true,
        read,
    );
    let items = match found.await {
        Ok(items) => items,
        Err(p) => return failed(p),
    };
    let (groups, paging) = if ordered {
        let effective = st.inventory.labels_of(&c.principal).await;
        let mut items: Vec<inbox::ListedObject> = items
            .into_iter()
            .map(|view| inbox::ListedObject {
                labels: effective(view.object.id).unwrap_or_else(|| view.object.labels.clone()),
                view,
            })
            .collect();
        inbox::sort(&mut items, sort.unwrap_or_default(), st.clock.now());
        let from = q.from.as_deref().and_then(|f| f.parse().ok()).unwrap_or(0);
        let (groups, offsets) = offset_page(items, group, from, 100);
        let groups = groups
            .into_iter()
            .map(|(key, rows)| (key, rows.into_iter().map(|o| o.view).collect()))
            .collect();
        (groups, views::Paging::Offsets(offsets))
    } else {
        let page = Page::new(items, &req, |v| v.object.id.to_string());
        let paging = views::Paging::Cursor(page.next_cursor);
        (vec![(String::new(), page.items)], paging)
    };
    let shown = views::ObjectsFilter {
        q: q.list.q.as_deref().unwrap_or_default(),
        selector: q.list.selector.as_deref().unwrap_or_default(),
        folder: q.list.folder.as_deref().unwrap_or_default(),
        state: q.list.state.as_deref().unwrap_or_default(),
        sort: &sort_by,
        group: &group_by,
        site: site.unwrap_or_default(),
    };
    let content = views::objects(&c.now(&st), &groups, &paging, &shown, can(&c));
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Objects, "Objects".into(), &[], None),
            content,
        ),
    )
}

/// The object page's query: what was just done, and the time its graphs show.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ObjectQuery {
    did: Option<String>,
    /// `1h`, `6h`, `24h` (the default), `7d` or `30d`.
    range: Option<String>,
    /// The end of the graphs' window (RFC 3339); none: now.
    end: Option<String>,
}

impl ObjectQuery {
    fn window(&self) -> Result<views::GraphWindow, Problem> {
        let span = match self.range.as_deref() {
            None | Some("") => views::GraphSpan::default(),
            Some(r) => views::GraphSpan::parse(r).ok_or_else(|| {
                Problem::validation("range", format!("{r:?} is not one of 1h, 6h, 24h, 7d, 30d"))
            })?,
        };
        let end = match self.end.as_deref() {
            None | Some("") => None,
            Some(e) => Some(
                e.parse()
                    .map_err(|e: String| Problem::validation("end", e))?,
            ),
        };
        Ok(views::GraphWindow { span, end })
    }
}

async fn object(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ObjectQuery>,
) -> Response {
    let id = match path_id(&id) {
        Ok(id) => id,
        Err(p) => return failed(p),
    };
    let window = match q.window() {
        Ok(w) => w,
        Err(p) => return failed(p),
    };
    let view = match st.inventory.view(&c.principal, id).await {
        Ok(v) => v,
        Err(InventoryError::NotFound) => {
            return mirrored_object(&st, &c, id, window).await;
        }
        Err(e) => return failed(e),
    };
    let services = if view.object.kind == ObjectKind::Host {
        let filter = ObjectFilter {
            kind: Some(ObjectKind::Service),
            host_id: Some(id),
            ..Default::default()
        };
        match st
            .inventory
            .objects(
                &c.principal,
                filter,
                None,
                OBJECTS.max.unwrap_or(5000),
                true,
            )
            .await
        {
            Ok(s) => s,
            Err(e) => return failed(e),
        }
    } else {
        Vec::new()
    };
    let (changes, events) = match object_events(&st, &c, id).await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let perfdata = view.state.as_ref().map_or("", |s| s.perfdata.as_str());
    let graphs = match object_graphs(&st, &c, id, None, perfdata, window).await {
        Ok(g) => g,
        Err(p) => return failed(p),
    };
    // Its alerts are a courtesy of `alerts:read`.
    let alerts = if c.principal.allows("alerts:read") {
        let filter = AlertFilter {
            object_id: Some(id),
            statuses: vec![AlertStatus::Open, AlertStatus::Acked],
            ..Default::default()
        };
        match st.alerting.list(&c.principal, filter, None, UI_PAGE).await {
            Ok(a) => a,
            Err(e) => return failed(e),
        }
    } else {
        Vec::new()
    };
    let check_run = match st.inventory.effective(&c.principal, id).await {
        Ok(e) => e.spec.check_run(),
        Err(e) => return failed(e),
    };
    let observers = match st.votes.verdict(&c.principal, id).await {
        Ok(v) => v,
        Err(e) => return failed(e),
    };
    let title = views::view_name(&view);
    let content = views::object(
        &c.now(&st),
        views::ObjectPage {
            view: &view,
            services: &services,
            changes: &changes,
            graphs: &graphs,
            events: &events,
            check_run,
            window,
            alerts: &alerts,
            observers: observers.as_ref(),
            site: None,
        },
        can(&c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Objects,
                title,
                &[
                    "state_change",
                    "downtime",
                    "ack",
                    "alert_opened",
                    "alert_resolved",
                    "comment",
                ],
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

/// A federation site's object as the main mirrors it (`/objects/{id}` with the site's id): its
/// state, its forwarded history and the site's open alerts on it; nothing is done to it here.
async fn mirrored_object(
    st: &AppState,
    c: &Visitor,
    id: Uuid,
    window: views::GraphWindow,
) -> Response {
    let (site, view) = match st.sites.mirrored_object(&c.principal, id).await {
        Ok(found) => found,
        Err(e) => return failed(e),
    };
    let (changes, events) = match object_events(st, c, id).await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let alerts = if c.principal.allows("alerts:read") {
        match st.sites.mirrored_alerts(&c.principal, Some(&site)).await {
            Ok(a) => a.into_iter().filter(|a| a.object_id == Some(id)).collect(),
            Err(e) => return failed(e),
        }
    } else {
        Vec::new()
    };
    let title = views::view_name(&view);
    let content = views::object(
        &c.now(st),
        views::ObjectPage {
            view: &view,
            services: &[],
            changes: &changes,
            graphs: &[],
            events: &events,
            check_run: CheckRun::Passive,
            window,
            alerts: &alerts,
            observers: None,
            site: Some(&site),
        },
        can(c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                c,
                Section::Objects,
                title,
                &["state_change", "alert_opened", "alert_resolved"],
                None,
            ),
            content,
        ),
    )
}

/// An object's state changes of the last day (for its history bar) and its latest events;
/// none without `events:read`.
async fn object_events(
    st: &AppState,
    c: &Caller,
    id: Uuid,
) -> Result<(Vec<Event>, Vec<Event>), Problem> {
    if !c.principal.allows("events:read") {
        return Ok((Vec::new(), Vec::new()));
    }
    let now = st.clock.now();
    let day = EventFilter {
        tenant_id: c.principal.tenant,
        object_id: Some(id),
        types: vec![EventType::StateChange],
        from: Timestamp::from_millis(now.as_millis() - views::HISTORY_SECS * 1000),
        ..Default::default()
    };
    let changes = st.events.list_committed(&st.store, day, None, 1000).await?;
    let latest = EventFilter {
        tenant_id: c.principal.tenant,
        object_id: Some(id),
        ..Default::default()
    };
    let events = st
        .events
        .list_committed(&st.store, latest, None, 20)
        .await?;
    Ok((changes, events))
}

async fn check_now(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    let id = path_id(&id)?;
    // As the API: asked for and audited; the page says when nothing will run.
    st.scheduler.check_now(&c.principal, &c.actor, id).await?;
    let done = match st
        .inventory
        .effective(&c.principal, id)
        .await?
        .spec
        .check_run()
    {
        CheckRun::Here => "check",
        CheckRun::Passive => "check-passive",
        CheckRun::Agent => "check-agent",
        CheckRun::Off => "check-off",
    };
    Ok(Done::back(f.back.as_deref(), done))
}

/// `2027-03-27T22:00`, as a form's `datetime-local` gives it, on the wall clock of `zone`.
fn wall_clock(
    field: &'static str,
    raw: &str,
    zone: &jiff::tz::TimeZone,
) -> Result<Timestamp, Problem> {
    raw.trim()
        .parse::<jiff::civil::DateTime>()
        .ok()
        .and_then(|dt| dt.to_zoned(zone.clone()).ok())
        .map(|z| Timestamp(z.timestamp()))
        .ok_or_else(|| Problem::validation(field, format!("{raw:?} is not a date and time")))
}

/// The events page's filters, all in its URL.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct EventsQuery {
    types: Option<String>,
    severity: Option<String>,
    /// Events of one object.
    object_id: Option<String>,
    /// Words every shown event has in its type, object or payload.
    q: Option<String>,
    /// From and to, on the caller's wall clock (`2027-03-27T22:00`).
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
}

impl EventsQuery {
    fn given(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }

    fn filter(&self, tenant: Uuid, zone: &jiff::tz::TimeZone) -> Result<EventFilter, Problem> {
        let mut f = EventFilter {
            tenant_id: tenant,
            ..Default::default()
        };
        if let Some(t) = Self::given(&self.types) {
            f.types = vec![t.parse::<EventType>().map_err(|_| {
                Problem::validation("types", format!("{t:?} is not an event type"))
            })?];
        }
        if let Some(s) = Self::given(&self.severity) {
            f.severity = Some(s.parse().map_err(|_| {
                Problem::validation("severity", format!("{s:?} is not a severity"))
            })?);
        }
        if let Some(o) = Self::given(&self.object_id) {
            f.object_id = Some(
                Uuid::parse_str(o)
                    .map_err(|_| Problem::validation("objectId", "objectId is not an id"))?,
            );
        }
        f.from = Self::given(&self.from)
            .map(|t| wall_clock("from", t, zone))
            .transpose()?;
        f.to = Self::given(&self.to)
            .map(|t| wall_clock("to", t, zone))
            .transpose()?;
        Ok(f)
    }

    /// The lower-cased words of `q`.
    fn words(&self) -> Vec<String> {
        Self::given(&self.q)
            .map(|q| q.split_whitespace().map(str::to_lowercase).collect())
            .unwrap_or_default()
    }

    /// The query again, without its cursor: where the next page adds one.
    fn link(&self) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("types", &self.types),
            ("severity", &self.severity),
            ("objectId", &self.object_id),
            ("q", &self.q),
            ("from", &self.from),
            ("to", &self.to),
        ] {
            if let Some(v) = Self::given(v) {
                q.append_pair(k, v);
            }
        }
        format!("/events?{}", q.finish())
    }
}

/// Whether `e` has every word in its type, object name or payload.
fn has_words(e: &Event, words: &[String]) -> bool {
    if words.is_empty() {
        return true;
    }
    let text = format!("{} {}", e.kind.as_str(), *e.payload).to_lowercase();
    words.iter().all(|w| text.contains(w.as_str()))
}

async fn events(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Response {
    let filter = match q.filter(c.principal.tenant, &c.zone) {
        Ok(f) => f,
        Err(p) => return failed(p),
    };
    let words = q.words();
    let req = ui_page(q.cursor.clone(), UI_PAGE, EVENTS);
    let items = {
        let st = &st;
        let read = |cursor, limit| {
            let filter = filter.clone();
            async move {
                st.events
                    .list_committed(&st.store, filter, cursor, limit)
                    .await
                    .map_err(Problem::from)
            }
        };
        let found = search_pages(
            id_cursor(&req),
            req.limit,
            req.limit,
            |e: &Event| e.id,
            |e| has_words(e, &words),
            read,
        );
        match found.await {
            Ok(items) => items,
            Err(p) => return failed(p),
        }
    };
    let page = Page::new(items, &req, |e| e.id.to_string());
    let live: &[&str] = if page.next_cursor.is_none() || req.cursor.is_none() {
        &[
            "state_change",
            "alert_opened",
            "alert_resolved",
            "ack",
            "escalation",
            "notification",
            "ingress",
            "downtime",
            "silence",
            "config",
            "system",
            "heartbeat_missed",
            "incident_update",
        ]
    } else {
        &[]
    };
    let shown = views::EventsFilter {
        kind: EventsQuery::given(&q.types).unwrap_or_default(),
        severity: EventsQuery::given(&q.severity).unwrap_or_default(),
        object_id: EventsQuery::given(&q.object_id).unwrap_or_default(),
        q: EventsQuery::given(&q.q).unwrap_or_default(),
        from: EventsQuery::given(&q.from).unwrap_or_default(),
        to: EventsQuery::given(&q.to).unwrap_or_default(),
        link: q.link(),
    };
    let content = views::events(
        &c.now(&st),
        &page.items,
        &shown,
        page.next_cursor.as_deref(),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Events, "Events".into(), live, None),
            content,
        ),
    )
}

async fn silences(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let result = async {
        let all = st.alerting.silences(&c.principal, false).await?;
        let reach = st.alerting.silence_reach(&c.principal, &all).await?;
        Ok::<_, Problem>(all.into_iter().zip(reach).collect::<Vec<_>>())
    };
    match result.await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Silences,
                    "Silences".into(),
                    &["silence", "alert_opened", "alert_resolved"],
                    q.did.as_deref(),
                ),
                views::silences(&c.now(&st), &items, c.principal.allows("silences:write")),
            ),
        ),
        Err(p) => failed(p),
    }
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct SilenceDraftQuery {
    selector: Option<String>,
    text_regex: Option<String>,
    comment: Option<String>,
    duration: Option<String>,
    /// When it starts, on the caller's wall clock (`2027-03-27T22:00`; empty: now).
    start: Option<String>,
}

async fn new_silence(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<SilenceDraftQuery>,
) -> Response {
    let draft = SuppressionDraft {
        selector: q.selector.unwrap_or_default(),
        text_regex: q.text_regex.unwrap_or_default(),
        comment: q.comment.unwrap_or_default(),
        duration: q.duration.unwrap_or_default(),
        start: q.start.unwrap_or_default(),
        ..Default::default()
    };
    // What it would hold, for a form with matchers and a visitor who may read alerts.
    let matchers = !draft.selector.is_empty() || !draft.text_regex.is_empty();
    let preview = if matchers && c.principal.allows("alerts:read") {
        let body = SilenceBody {
            selector: Some(draft.selector.clone()),
            text_regex: Some(draft.text_regex.clone()),
            ..SilenceBody::default()
        };
        match st.alerting.preview_silence(&c.principal, body).await {
            Ok(held) => Some(held),
            Err(e) => {
                let form = views::silence_form(&draft, None);
                return form_again(&c, Section::Silences, "New silence", e.into(), form);
            }
        }
    } else {
        None
    };
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Silences, "New silence".into(), &[], None),
            views::silence_form(&draft, preview.as_deref()),
        ),
    )
}

/// The new silence and new downtime forms.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct SuppressionForm {
    selector: Option<String>,
    text_regex: Option<String>,
    /// A downtime of one object.
    object_id: Option<String>,
    /// How long from now: `2h`, `24h`...
    duration: Option<String>,
    comment: Option<String>,
    /// A downtime's start on the viewer's wall clock (`2027-03-27T22:00`); empty: now.
    start: Option<String>,
    /// A recurring downtime's weekdays (`saturday`, `monday:friday`, comma-separated).
    weekdays: Option<String>,
    /// A recurring downtime's times of day (`22:00-24:00`, comma-separated).
    times: Option<String>,
    /// A recurring downtime's days of the month (`1`, `15:20`, `-1`, comma-separated).
    days_of_month: Option<String>,
    /// A recurring downtime's months (`december`, `june:august`, comma-separated).
    months: Option<String>,
    /// Federation sites to ship a downtime to (comma-separated).
    sites: Option<String>,
    /// A flexible downtime's length (`1h`): it starts with the first problem within the
    /// window and lasts this long; empty: fixed, the whole window.
    flexible: Option<String>,
    /// A host's downtime: `alone` holds the host without its services.
    services: Option<String>,
}

/// A downtime form's recurrence fields as typed.
fn repeat(
    weekdays: &Option<String>,
    days_of_month: &Option<String>,
    months: &Option<String>,
    times: &Option<String>,
) -> views::Repeat {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    views::Repeat {
        weekdays: text(weekdays),
        days_of_month: text(days_of_month),
        months: text(months),
        times: text(times),
    }
}

/// A recurring downtime's windows from its form's fields, their times in `location` (an IANA
/// zone); none when no field is given.
fn intervals(r: &views::Repeat, location: &str) -> Option<Vec<TimeInterval>> {
    let split = |raw: &str| items(&Some(raw.to_string()));
    let (weekdays, times, days_of_month, months) = (
        split(&r.weekdays.to_ascii_lowercase()),
        split(&r.times),
        split(&r.days_of_month),
        split(&r.months.to_ascii_lowercase()),
    );
    if weekdays.is_empty() && times.is_empty() && days_of_month.is_empty() && months.is_empty() {
        return None;
    }
    Some(vec![TimeInterval {
        times: times
            .iter()
            .map(|t| TimeOfDayRange::from(t.as_str()))
            .collect(),
        weekdays,
        days_of_month,
        months,
        location: Some(location.to_string()),
        ..TimeInterval::default()
    }])
}

/// A downtime form's `flexible` length; none: fixed.
fn flexible(raw: &Option<String>) -> Option<String> {
    raw.as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
}

/// A form field's comma-separated items, trimmed.
fn items(raw: &Option<String>) -> Vec<String> {
    raw.as_deref()
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

impl SuppressionForm {
    /// The end of the suppression: `from` plus the chosen duration.
    fn end(&self, from: Timestamp) -> Result<Timestamp, Problem> {
        let raw = self.duration.as_deref().unwrap_or("2h");
        let d: GoDuration = raw
            .parse()
            .map_err(|_| Problem::validation("duration", format!("{raw:?} is not a duration")))?;
        Ok(from.plus(d.0))
    }

    /// A silence's or downtime's start: the form's, read on the wall clock of `zone`, else now.
    fn start(&self, now: Timestamp, zone: &jiff::tz::TimeZone) -> Result<Timestamp, Problem> {
        match self
            .start
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => Ok(now),
            Some(raw) => wall_clock("start", raw, zone),
        }
    }

    /// Its recurrence fields as typed.
    fn repeat(&self) -> views::Repeat {
        repeat(
            &self.weekdays,
            &self.days_of_month,
            &self.months,
            &self.times,
        )
    }

    fn draft(&self, object: Option<(Uuid, String)>, c: &Visitor) -> SuppressionDraft {
        SuppressionDraft {
            selector: self.selector.clone().unwrap_or_default(),
            text_regex: self.text_regex.clone().unwrap_or_default(),
            comment: self.comment.clone().unwrap_or_default(),
            duration: self.duration.clone().unwrap_or_default(),
            object,
            start: self.start.clone().unwrap_or_default(),
            repeat: self.repeat(),
            flexible: self.flexible.clone().unwrap_or_default(),
            services: self.services.as_deref() != Some("alone"),
            sites: c
                .principal
                .allows("config:write")
                .then(|| self.sites.clone().unwrap_or_default()),
        }
    }
}

async fn create_silence(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let f = match form::<SuppressionForm>(&body) {
        Ok(f) => f,
        Err(p) => return failed(p),
    };
    let result = async {
        let start = f.start(st.clock.now(), &c.zone)?;
        let body = SilenceBody {
            comment: f.comment.clone(),
            selector: f.selector.clone(),
            text_regex: f.text_regex.clone(),
            starts_at: Some(start.to_string()),
            expires_at: Some(f.end(start)?.to_string()),
            expire_when_unmatched_for: None,
        };
        st.alerting
            .create_silence(&c.principal, &c.actor, body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/silences", "silence").into_response(),
        Err(p) => form_again(
            &c,
            Section::Silences,
            "New silence",
            p,
            views::silence_form(&f.draft(None, &c), None),
        ),
    }
}

async fn edit_downtime(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let found = async {
        let d = st.alerting.downtime(&c.principal, path_id(&id)?).await?;
        let object = downtime_object_name(&st, &c, &d).await;
        Ok::<_, Problem>((d, object))
    };
    match found.await {
        Ok((d, object)) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Downtimes, "Edit downtime".into(), &[], None),
                views::suppression_edit_form(&views::SuppressionEdit::downtime(
                    &d,
                    object,
                    &c.now(&st),
                )),
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn edit_silence(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let found = async { Ok::<_, Problem>(st.alerting.silence(&c.principal, path_id(&id)?).await?) };
    match found.await {
        Ok(s) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Silences, "Edit silence".into(), &[], None),
                views::suppression_edit_form(&views::SuppressionEdit::silence(&s, &c.now(&st))),
            ),
        ),
        Err(p) => failed(p),
    }
}

/// The name of the one object a downtime covers: its name while it can be read, else its id.
async fn downtime_object_name(st: &AppState, c: &Caller, d: &Downtime) -> Option<String> {
    let id = d.object_id?;
    Some(match st.inventory.view(&c.principal, id).await {
        Ok(v) => views::view_name(&v),
        Err(_) => id.to_string(),
    })
}

/// A silence's or downtime's edit form: a silence's matchers, a downtime's cover (`selector`
/// also), flexibility and recurrence.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct EditForm {
    selector: Option<String>,
    text_regex: Option<String>,
    comment: Option<String>,
    /// On the caller's wall clock (`2027-03-27T22:00`).
    starts: Option<String>,
    ends: Option<String>,
    version: Option<u64>,
    /// A host's downtime: `alone` holds the host without its services.
    services: Option<String>,
    /// A flexible downtime's length (`1h`); empty: fixed.
    flexible: Option<String>,
    weekdays: Option<String>,
    days_of_month: Option<String>,
    months: Option<String>,
    times: Option<String>,
}

impl EditForm {
    /// Its start and end, read on the wall clock of `zone`, and the version it was shown at.
    fn terms(&self, zone: &jiff::tz::TimeZone) -> Result<(Timestamp, Timestamp, u64), Problem> {
        let at = |field: &'static str, v: &Option<String>| {
            wall_clock(field, v.as_deref().unwrap_or_default(), zone)
        };
        let version = self
            .version
            .ok_or_else(|| Problem::validation("version", "the form names no version"))?;
        Ok((
            at("starts", &self.starts)?,
            at("ends", &self.ends)?,
            version,
        ))
    }

    /// A downtime's body as `old` is but for what the form changes: its times and comment,
    /// what it covers (a selector given replaces its one object), services, flexibility, and
    /// its recurrence where the form could show it (`zone`: its windows' times). With the
    /// version the form was shown at.
    fn downtime(
        &self,
        old: &Downtime,
        zone: &jiff::tz::TimeZone,
        windows_zone: &str,
    ) -> Result<(DowntimeBody, u64), Problem> {
        let (start, end, version) = self.terms(zone)?;
        let mut body = old.body_ending(end);
        body.start = Some(start.to_string());
        body.comment = self.comment.clone();
        let selector = self.selector.as_deref().map(str::trim).unwrap_or_default();
        if !selector.is_empty() || old.object_id.is_none() {
            body.selector = Some(selector.to_string());
            body.object_id = None;
        }
        body.services = Some(self.services.as_deref() != Some("alone"));
        let flexible = flexible(&self.flexible);
        body.kind = Some(
            if flexible.is_some() {
                "flexible"
            } else {
                "fixed"
            }
            .into(),
        );
        body.duration = flexible.map(Value::String);
        if views::Repeat::of(old).is_some() {
            body.time_intervals = intervals(&self.repeat(), windows_zone);
        }
        Ok((body, version))
    }

    fn repeat(&self) -> views::Repeat {
        repeat(
            &self.weekdays,
            &self.days_of_month,
            &self.months,
            &self.times,
        )
    }

    /// The form again as it was sent, for `kind` (`silences` or `downtimes`); a downtime's
    /// `cover` as shown before, with what the form changed.
    fn shown(
        &self,
        kind: &'static str,
        id: Uuid,
        cover: Option<views::DowntimeCover>,
    ) -> views::SuppressionEdit {
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let cover = cover.map(|c| views::DowntimeCover {
            selector: text(&self.selector),
            services: self.services.as_deref() != Some("alone"),
            flexible: text(&self.flexible),
            repeat: c.repeat.as_ref().map(|_| self.repeat()),
            ..c
        });
        views::SuppressionEdit {
            kind,
            id,
            version: self.version.unwrap_or_default(),
            matchers: (kind == "silences").then(|| (text(&self.selector), text(&self.text_regex))),
            cover,
            comment: text(&self.comment),
            starts: text(&self.starts),
            ends: text(&self.ends),
        }
    }
}

async fn update_downtime(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Response {
    let (f, id) = match (form::<EditForm>(&body), path_id(&id)) {
        (Ok(f), Ok(id)) => (f, id),
        (Err(p), _) | (_, Err(p)) => return failed(p),
    };
    let old = match st.alerting.downtime(&c.principal, id).await {
        Ok(d) => d,
        Err(e) => return failed(Problem::from(e)),
    };
    let now = c.now(&st);
    let cover = views::DowntimeCover::of(
        &old,
        downtime_object_name(&st, &c, &old).await,
        now.zone_name(),
    );
    let result = async {
        let (body, version) = f.downtime(&old, &c.zone, &cover.zone)?;
        st.alerting
            .update_downtime(&c.principal, &c.actor, id, version, body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/downtimes", "downtime-saved").into_response(),
        Err(p) => {
            let form = views::suppression_edit_form(&f.shown("downtimes", id, Some(cover)));
            form_again(&c, Section::Downtimes, "Edit downtime", p, form)
        }
    }
}

async fn update_silence(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Response {
    let (f, id) = match (form::<EditForm>(&body), path_id(&id)) {
        (Ok(f), Ok(id)) => (f, id),
        (Err(p), _) | (_, Err(p)) => return failed(p),
    };
    let result = async {
        let old = st.alerting.silence(&c.principal, id).await?;
        let (start, end, version) = f.terms(&c.zone)?;
        let mut body = old.body_expiring(end);
        body.starts_at = Some(start.to_string());
        body.comment = f.comment.clone();
        body.selector = f.selector.clone();
        body.text_regex = f.text_regex.clone();
        st.alerting
            .update_silence(&c.principal, &c.actor, id, version, body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/silences", "silence-saved").into_response(),
        Err(p) => {
            let form = views::suppression_edit_form(&f.shown("silences", id, None));
            form_again(&c, Section::Silences, "Edit silence", p, form)
        }
    }
}

async fn expire_silence(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    st.alerting
        .expire_silence(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(Done::back(f.back.as_deref(), "expire"))
}

/// Extending a silence or downtime: by how long, at the version the page showed.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ExtendForm {
    /// A Go duration (`4h`).
    by: Option<String>,
    version: Option<u64>,
    /// The page to return to: a path of this server.
    back: Option<String>,
}

impl ExtendForm {
    fn read(body: &Bytes) -> Result<(ExtendForm, std::time::Duration, u64), Problem> {
        let f = form::<ExtendForm>(body)?;
        let by =
            f.by.as_deref()
                .and_then(|b| b.parse::<GoDuration>().ok())
                .filter(|d| !d.0.is_zero())
                .ok_or_else(|| Problem::validation("by", "by must be a duration like 4h"))?;
        let version = f
            .version
            .ok_or_else(|| Problem::validation("version", "the form names no version"))?;
        Ok((f, by.0, version))
    }
}

async fn extend_silence(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let (f, by, version) = ExtendForm::read(&body)?;
    st.alerting
        .extend_silence(&c.principal, &c.actor, path_id(&id)?, version, by)
        .await?;
    Ok(Done::back(f.back.as_deref(), "extend"))
}

async fn extend_downtime(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let (f, by, version) = ExtendForm::read(&body)?;
    st.alerting
        .extend_downtime(&c.principal, &c.actor, path_id(&id)?, version, by)
        .await?;
    Ok(Done::back(f.back.as_deref(), "extend"))
}

async fn downtimes(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    match st.alerting.downtimes(&c.principal, false).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Downtimes,
                    "Downtimes".into(),
                    &["downtime"],
                    q.did.as_deref(),
                ),
                views::downtimes(&c.now(&st), &items, c.principal.allows("downtimes:write")),
            ),
        ),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct DowntimeDraftQuery {
    /// The object the downtime is for.
    object: Option<String>,
}

/// The object a downtime form is for, by id, with the name its page shows.
async fn downtime_object(
    st: &AppState,
    c: &Caller,
    raw: Option<&str>,
) -> Result<Option<(Uuid, String)>, Problem> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let v = st.inventory.view(&c.principal, path_id(raw)?).await?;
    Ok(Some((v.object.id, views::view_name(&v))))
}

async fn new_downtime(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DowntimeDraftQuery>,
) -> Response {
    let object = match downtime_object(&st, &c, q.object.as_deref()).await {
        Ok(o) => o,
        Err(p) => return failed(p),
    };
    let draft = SuppressionDraft {
        object,
        sites: c.principal.allows("config:write").then(String::new),
        services: true,
        ..Default::default()
    };
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Downtimes, "New downtime".into(), &[], None),
            views::downtime_form(&draft),
        ),
    )
}

async fn create_downtime(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let f = match form::<SuppressionForm>(&body) {
        Ok(f) => f,
        Err(p) => return failed(p),
    };
    let object = match downtime_object(&st, &c, f.object_id.as_deref()).await {
        Ok(o) => o,
        Err(p) => return failed(p),
    };
    let result = async {
        let start = f.start(st.clock.now(), &c.zone)?;
        let flexible = flexible(&f.flexible);
        let body = DowntimeBody {
            comment: f.comment.clone(),
            object_id: object.as_ref().map(|(id, _)| id.to_string()),
            selector: if object.is_some() {
                None
            } else {
                f.selector.clone()
            },
            kind: Some(
                if flexible.is_some() {
                    "flexible"
                } else {
                    "fixed"
                }
                .into(),
            ),
            notice_before: None,
            escalation_policy: None,
            start: Some(start.to_string()),
            end: Some(f.end(start)?.to_string()),
            duration: flexible.map(Value::String),
            time_intervals: intervals(&f.repeat(), c.now(&st).zone_name()),
            calendar_url: None,
            sites: Some(items(&f.sites)).filter(|s| !s.is_empty()),
            services: (f.services.as_deref() == Some("alone")).then_some(false),
        };
        st.alerting
            .create_downtime(&c.principal, &c.actor, body, None)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/downtimes", "downtime").into_response(),
        Err(p) => {
            let form = views::downtime_form(&f.draft(object, &c));
            form_again(&c, Section::Downtimes, "New downtime", p, form)
        }
    }
}

async fn end_downtime(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    st.alerting
        .end_downtime(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(Done::back(f.back.as_deref(), "end"))
}

async fn sites(State(st): State<AppState>, c: Visitor) -> Response {
    match st.sites.overview(&c.principal).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Sites, "Sites".into(), &["system"], None),
                views::sites(&c.now(&st), &items, &st.sites.edge_status()),
            ),
        ),
        Err(e) => failed(e),
    }
}
