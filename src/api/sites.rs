//! Federation routes (SPEC 4 sites rows): a site pulls its bundle, reports by heartbeat and
//! forwards its events; the main's overview; this instance's own side as a site.

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::etag;
use super::extract::{ApiJson, ApiPath, JSON_BODY_LIMIT, parse_json, read_body};
use super::pagination::Page;
use super::router::Route;
use super::schemas;
use crate::federation::{FORWARD_READ, Pulled, SiteError};
use crate::model::site::{
    ACTIONS_WAITING_HEADER, ActionsDone, CLOCK_OFFSET_HEADER, EdgeStatus, ForwardBatch,
    ForwardReceipt, SiteAction, SiteHeartbeat, SiteOverview, UPLINK_BUDGET_HEADER,
};
use axum::Json;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/sites/{name}:pull", pull).permission("sites:connect").doc(
            "sites",
            "Pull the site's bundle",
            "`application/yaml`: the site's `bundle` (empty when it has none), followed by a `kind: downtimes` document (named by its id) for each downtime not over that names the site in `sites`, with its terms and a calendar's windows as last read, so the site keeps them without an uplink (the site keeps them as its own, `fromMain`, and ends those no longer served); with `ETag: \"<hex of the first 16 bytes of its SHA-256>\"`; `If-None-Match` naming it gives 304. A disabled site is 403 `svc:sites/disabled`; a `sites:connect` token minted for another site (`site` in the mint payload) is 403.",
        )
            .answers_as(200, "application/yaml", schemas::literal(schemas::yaml)).answers_empty(304),
        Route::post("/api/v1/sites/{name}:heartbeat", heartbeat).permission("sites:connect").doc(
            "sites",
            "Report a site's status",
            "`{version, bundleEtag, applyError, stats: {hosts, services, alertsOpen}}`, plus `intervalSeconds` (the stale threshold is three of them unless the site sets `staleAfter`) and `forward` (store-and-forward position, pending events, the oldest unsent, the gap), `clock` (the site's clock when it sent), `roundTripMs` (its previous heartbeat's round trip) and `uplink` (the bytes it exchanged with the main: `today`, this `period` from `periodStart`, `total`, each `{sent, received}`). 204, with `X-Svc-Clock-Offset` (milliseconds, positive: the site is ahead) when it told its clock, and `X-Svc-Actions-Waiting` (how many actions taken at the main on its alerts wait for it at `:actions`) when there are any, and `X-Svc-Uplink-Budget` (the site's `uplink` budget as JSON: `{budget, period, resetDay, overBudget, warnAt, escalationPolicy}`) when it has one; past the site's `clockDriftMax` (30s) the main raises a `site-clock/<name>` alert, and a failed apply or a served bundle not applied within `configDriftAfter` (15m) a `site-config/<name>` alert. A stale site that reports again resolves its alert and emits a `system` event with `aloneSeconds`.",
        )
            .body::<SiteHeartbeat>().answers_empty(204),
        Route::post("/api/v1/sites/{name}:events", receive).permission("sites:connect").doc(
            "sites",
            "Forward a site's events",
            "`{events: [Event]}` in ascending id order, at most 1000, with the site's own ids and times. Stored as events of the tenant with `site` set (`/events?site=`, the stream), each once: an id already stored is counted in `duplicates`. An event whose time is more than 31 days before its arrival or more than a day after it (a site clock far off) is stored at the hour it arrived, under an id made of that hour and its own id (a resend within the hour is still a duplicate), with its own time and id in `payload.originalTs` and `payload.originalId`; so a site fills only the month files around now. The answer's `through` is the last id received; the site advances its position to it. Batches are parsed and stored with room for them: at most 16 MiB of forwarded JSON at once across all sites (its length as sent while it is read, then as decompressed), first come first served; a batch that waits 10 s for room (a fleet back from an outage at once), or whose body takes more than 30 s to arrive, gets 503 `svc:sites/busy` with `Retry-After: 2`, and the site sends it again.",
        )
            .body::<ForwardBatch>().ok::<ForwardReceipt>().fails(503, "forwarded batches fill the room for them"),
        Route::get("/api/v1/sites/{name}:actions", actions).permission("sites:connect").doc(
            "sites",
            "Actions the main took on a site's alerts",
            "`{items: [{id, alertId, action: ack | resolve | shelve, by, comment, at, shelf}]}` (`shelf`: a shelve's `{mode, duration, reason}`) in the order they were taken at the main (`POST /api/v1/alerts/{id}:ack` or `:resolve` of an alert the site forwarded), until the site reports them done. The site carries each out as its own (`via: main`), so its escalation stops and the change comes back as its event.",
        )
            .ok::<Page<SiteAction>>(),
        Route::post("/api/v1/sites/{name}:actions", actions_done).permission("sites:connect").doc(
            "sites",
            "A site carried out the main's actions",
            "`{done: [id]}`: the actions the site carried out, or found no longer applying (an alert resolved meanwhile); the main forgets them. 204.",
        )
            .body::<ActionsDone>().answers_empty(204),
        Route::get("/api/v1/sites:overview", overview).permission("objects:read").doc(
            "sites",
            "Sites with their connection",
            "Every site, without paging: `connected` (last heartbeat under 5 minutes old), `stale` (older than its threshold; an alert is open), the last stats, `applyError`, the served and applied bundle ETags, version and `versionSkew`, forwarded events and open alerts among them.",
        )
            .ok::<Page<SiteOverview>>(),
        Route::get("/api/v1/site:status", edge_status).permission("objects:read").doc(
            "sites",
            "This instance as a site",
            "When `site.mainUrl` is configured: the last pull and heartbeat, the applied bundle's ETag and apply error, the last failure talking to the main, and the forward queue (position, pending events counted up to 10,000, the oldest unsent). `enabled: false` otherwise.",
        )
            .ok::<EdgeStatus>(),
    ]
}

async fn pull(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    Ok(
        match st
            .sites
            .pull(&c.principal, &name, &etag::if_none_match(&headers))
            .await?
        {
            Pulled::NotModified { etag } => {
                (StatusCode::NOT_MODIFIED, etag::entity_tag(&etag)).into_response()
            }
            Pulled::Bundle { etag, text } => (
                etag::entity_tag(&etag),
                [(CONTENT_TYPE, "application/yaml")],
                text,
            )
                .into_response(),
        },
    )
}

async fn heartbeat(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(beat): ApiJson<SiteHeartbeat>,
) -> Result<impl IntoResponse, Problem> {
    let answer = st.sites.heartbeat(&c.principal, &name, beat).await?;
    let mut headers = axum::http::HeaderMap::new();
    if let Some(ms) = answer.clock_offset_ms {
        headers.insert(CLOCK_OFFSET_HEADER, ms.into());
    }
    if answer.actions_waiting > 0 {
        headers.insert(ACTIONS_WAITING_HEADER, answer.actions_waiting.into());
    }
    if let Some(v) = answer
        .uplink_budget
        .and_then(|b| axum::http::HeaderValue::try_from(b.header_value()).ok())
    {
        headers.insert(UPLINK_BUDGET_HEADER, v);
    }
    Ok((StatusCode::NO_CONTENT, headers))
}

async fn receive(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    req: Request,
) -> Result<impl IntoResponse, Problem> {
    // Read and parsed only with room for it: a fleet's backlogs arrive at once. The room is
    // taken for the length sent, and for what a gzip body grew to once it is read; the body must
    // arrive within `FORWARD_READ`.
    let sent = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .map_or(JSON_BODY_LIMIT, |n| n.min(JSON_BODY_LIMIT));
    let mut room = st.sites.forward_room(sent).await?;
    let body = tokio::time::timeout(
        FORWARD_READ,
        read_body(req, JSON_BODY_LIMIT, Code::ValidationSize),
    )
    .await
    .map_err(|_| SiteError::Busy)??;
    if body.len() > sent {
        room.merge(st.sites.forward_room(body.len() - sent).await?);
    }
    let batch: ForwardBatch = parse_json(&body)?;
    drop(body);
    Ok(Json(st.sites.receive(&c.principal, &name, batch).await?))
}

async fn actions(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(
        st.sites.actions(&c.principal, &name).await?,
    )))
}

async fn actions_done(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<ActionsDone>,
) -> Result<impl IntoResponse, Problem> {
    st.sites
        .actions_done(&c.principal, &name, body.done)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn overview(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.sites.overview(&c.principal).await?)))
}

async fn edge_status(State(st): State<AppState>, _: Caller) -> Json<EdgeStatus> {
    Json(st.sites.edge_status())
}
