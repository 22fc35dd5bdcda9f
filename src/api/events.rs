//! Event routes: the list, the NDJSON export and the live SSE stream (SPEC 6.4).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::ApiQuery;
use super::pagination::{EVENTS, Page, PageQuery};
use super::router::Route;
use crate::model::Timestamp;
use crate::model::event::{Event, EventFilter, EventType, Severity};
use crate::model::selector::Selector;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/events", list).permission("events:read").tool("events_list", "The event journal, newest first: state changes, alerts, notifications.", &[("type", "string", "event type, e.g. state_change"), ("objectId", "string", "the event's object"), ("since", "string", "RFC 3339 time"), ("limit", "integer", "at most this many")]).doc(
            "events",
            "Search events",
            "Filters `types` (CSV), `objectId`, `sourceId`, `severity`, `from`, `to` (unparseable times are ignored), `site` (events a federation site forwarded); newest first (ts, then id); limit 200 by default, at most 1000; `cursor` is the last event id of the previous page.",
        )
            .query::<EventQuery>().ok::<Page<Event>>(),
        Route::get("/api/v1/events:export", export).permission("events:read").no_deadline().doc(
            "events",
            "Export events as NDJSON",
            "The same filters as the list; oldest first; `application/x-ndjson`; stops after 100,000 events; exempt from the request deadline.",
        )
            .query::<EventQuery>().answers_text(200, "application/x-ndjson"),
        Route::get("/api/v1/stream", stream).permission("events:read").no_deadline().doc(
            "events",
            "Server-Sent Events stream",
            "Frames `event: <type>`, `id: <event id>`, `data: <Event JSON>`. Filters `types` (CSV) and `selector` (matched against `payload.labels`; unparseable: plain 400). `Last-Event-ID` replays persisted events from one second before that id, at most 500. A `: ping` comment every 15 s; `event: resync` when frames were dropped because the client was too slow.",
        )
            .query::<EventQuery>().answers_text(200, "text/event-stream"),
    ]
}

/// The event list's query, also a saved filter's.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventQuery {
    types: Option<String>,
    object_id: Option<String>,
    source_id: Option<String>,
    severity: Option<String>,
    from: Option<String>,
    to: Option<String>,
    selector: Option<String>,
    /// Only the events a federation site forwarded (on a main instance).
    site: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

/// The filter a query asks for, or `None` when it can match nothing (an unknown type, object
/// id or severity).
pub(crate) fn filter(q: &EventQuery, tenant: Uuid) -> Option<EventFilter> {
    let mut f = EventFilter {
        tenant_id: tenant,
        ..Default::default()
    };
    if let Some(types) = q.types.as_deref().filter(|t| !t.trim().is_empty()) {
        f.types = types
            .split(',')
            .filter_map(|t| t.parse::<EventType>().ok())
            .collect();
        if f.types.is_empty() {
            return None;
        }
    }
    if let Some(o) = q.object_id.as_deref().filter(|s| !s.is_empty()) {
        f.object_id = Some(Uuid::parse_str(o).ok()?);
    }
    f.source_id = q.source_id.clone().filter(|s| !s.is_empty());
    if let Some(s) = q.severity.as_deref().filter(|s| !s.is_empty()) {
        f.severity = Some(s.parse::<Severity>().ok()?);
    }
    f.from = q.from.as_deref().and_then(|s| s.parse::<Timestamp>().ok());
    f.to = q.to.as_deref().and_then(|s| s.parse::<Timestamp>().ok());
    f.site = q.site.clone().filter(|s| !s.is_empty());
    Some(f)
}

async fn list(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.page.resolve(EVENTS);
    let Some(f) = filter(&q, c.principal.tenant) else {
        return Ok(Json(Page::all(Vec::new())));
    };
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = st
        .events
        .list_committed(&st.store, f, cursor, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |e: &Event| e.id.to_string())))
}

async fn export(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Response {
    let pages = crate::events::export::ndjson(st.events.clone(), filter(&q, c.principal.tenant));
    (
        [(CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(pages),
    )
        .into_response()
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

async fn stream(
    State(st): State<AppState>,
    c: Caller,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Response {
    let selector: Selector = match q.selector.as_deref().unwrap_or("").parse() {
        Ok(s) => s,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Some(filter) = filter(
        &EventQuery {
            types: q.types.clone(),
            ..Default::default()
        },
        c.principal.tenant,
    ) else {
        return plain(
            StatusCode::BAD_REQUEST,
            format!("unknown event types {:?}", q.types.unwrap_or_default()),
        );
    };
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v.trim()).ok());
    let frames = match crate::events::sse::stream(&st.events, filter, selector, last).await {
        Ok(frames) => frames,
        Err(e) => return Problem::from(e).into_response(),
    };
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}
