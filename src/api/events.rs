//! Event routes: the list, the NDJSON export and the live SSE stream (SPEC 6.4).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::ApiQuery;
use super::pagination::{EVENTS, Page, PageQuery};
use super::router::Route;
use crate::events::{Delivery, SSE_BUFFER};
use crate::model::Timestamp;
use crate::model::event::{Event, EventFilter, EventType, Severity};
use crate::model::selector::Selector;
use crate::store::events::Position;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use std::collections::{HashSet, VecDeque};
use std::time::Duration;
use uuid::Uuid;

/// Export pages and the export's hard stop (SPEC 8).
const EXPORT_PAGE: usize = 1000;
const EXPORT_MAX: usize = 100_000;
const PING_EVERY: Duration = Duration::from_secs(15);

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/events", list).permission("events:read").doc(
            "events",
            "Search events",
            "Filters `types` (CSV), `objectId`, `sourceId`, `severity`, `from`, `to` (unparseable times are ignored); newest first (ts, then id); limit 200 by default, at most 1000; `cursor` is the last event id of the previous page.",
        ),
        Route::get("/api/v1/events:export", export).permission("events:read").no_deadline().doc(
            "events",
            "Export events as NDJSON",
            "The same filters as the list; oldest first; `application/x-ndjson`; stops after 100,000 events; exempt from the request deadline.",
        ),
        Route::get("/api/v1/stream", stream).permission("events:read").no_deadline().doc(
            "events",
            "Server-Sent Events stream",
            "Frames `event: <type>`, `id: <event id>`, `data: <Event JSON>`. Filters `types` (CSV) and `selector` (matched against `payload.labels`; unparseable: plain 400). `Last-Event-ID` replays persisted events from one second before that id, at most 500. A `: ping` comment every 15 s; `event: resync` when frames were dropped because the client was too slow.",
        ),
    ]
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct EventQuery {
    types: Option<String>,
    object_id: Option<String>,
    source_id: Option<String>,
    severity: Option<String>,
    from: Option<String>,
    to: Option<String>,
    selector: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

/// The filter a query asks for, or `None` when it can match nothing (an unknown type, object
/// id or severity).
fn filter(q: &EventQuery, tenant: Uuid) -> Option<EventFilter> {
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
    let items = st.events.list(f, cursor, page.limit).await?;
    Ok(Json(Page::new(items, &page, |e: &Event| e.id.to_string())))
}

fn ndjson_line(e: &Event) -> Vec<u8> {
    let mut line = serde_json::to_vec(e).unwrap_or_default();
    line.push(b'\n');
    line
}

async fn export(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<EventQuery>,
) -> Response {
    let f = filter(&q, c.principal.tenant);
    // State: the position after which the next page starts, and how many were sent.
    let pages =
        futures_util::stream::unfold(f.map(|f| (f, None::<Position>, 0usize)), move |state| {
            let st = st.clone();
            async move {
                let (f, after, sent) = state?;
                let want = EXPORT_PAGE.min(EXPORT_MAX - sent);
                if want == 0 {
                    return None;
                }
                match st.events.ascending(f.clone(), after, want).await {
                    Ok(events) if events.is_empty() => None,
                    Ok(events) => {
                        let next = events.last().and_then(|e| Position::of_id(e.id));
                        let chunk: Vec<u8> = events.iter().flat_map(ndjson_line).collect();
                        let sent = sent + events.len();
                        let more = events.len() == want && sent < EXPORT_MAX;
                        Some((
                            Ok::<_, std::io::Error>(Bytes::from(chunk)),
                            more.then_some((f, next, sent)),
                        ))
                    }
                    Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
                }
            }
        });
    (
        [(CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(pages),
    )
        .into_response()
}

fn frame(e: &Event) -> Bytes {
    let data = serde_json::to_string(e).unwrap_or_default();
    Bytes::from(format!(
        "event: {}\nid: {}\ndata: {data}\n\n",
        e.kind.as_str(),
        e.id
    ))
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

struct Live {
    sub: crate::events::Subscription,
    replay: VecDeque<Event>,
    replayed: HashSet<Uuid>,
    filter: EventFilter,
    selector: Selector,
    ping: tokio::time::Interval,
    _client: crate::events::SseClient,
}

impl Live {
    fn wanted(&self, e: &Event) -> bool {
        let labels_match = match e.labels() {
            Some(labels) => self.selector.matches(labels),
            None => self.selector.matches(&serde_json::Map::new()),
        };
        self.filter.matches(e) && labels_match
    }

    async fn next_frame(&mut self) -> Option<Bytes> {
        if let Some(e) = self.replay.pop_front() {
            return Some(frame(&e));
        }
        loop {
            tokio::select! {
                _ = self.ping.tick() => return Some(Bytes::from_static(b": ping\n\n")),
                d = self.sub.recv() => match d? {
                    Delivery::Resync => return Some(Bytes::from_static(b"event: resync\ndata: {}\n\n")),
                    Delivery::Event(e) if self.wanted(&e) && !self.replayed.contains(&e.id) => return Some(frame(&e)),
                    Delivery::Event(_) => {}
                },
            }
        }
    }
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
    // Subscribe before reading the replay, so nothing falls between the two.
    let sub = st.events.subscribe("sse", SSE_BUFFER);
    let client = st.events.sse_client();
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v.trim()).ok());
    let replay = match last {
        Some(id) => match st.events.replay(filter.clone(), id).await {
            Ok(events) => events,
            Err(e) => return Problem::from(e).into_response(),
        },
        None => Vec::new(),
    };
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut live = Live {
        sub,
        replayed: replay.iter().map(|e| e.id).collect(),
        replay: VecDeque::new(),
        filter,
        selector,
        ping,
        _client: client,
    };
    let replay: VecDeque<Event> = replay.into_iter().filter(|e| live.wanted(e)).collect();
    live.replay = replay;
    let frames = futures_util::stream::unfold(live, |mut live| async move {
        let f = live.next_frame().await?;
        Some((Ok::<_, std::io::Error>(f), live))
    });
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}
