//! Silence and downtime routes (SPEC 2.9, 2.11, 4.2, 8; CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::etag::{IfMatch, etag};
use super::extract::{ApiJson, ApiJsonDigest, ApiPath, ApiQuery, path_id};
use super::pagination::Page;
use super::router::Route;
use crate::alerting::suppression::DowntimeCreated;
use crate::model::suppression::{Downtime, Silence, SilencePreview};
use crate::model::suppression::{DowntimeBody, SilenceBody};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/silences", silences).permission("objects:read").tool("silences_list", "Silences, active and future.", &[]).doc(
            "silences",
            "List silences",
            "All of the tenant's silences (at most 1000), latest `expiresAt` first; `active=true` keeps those in effect now.",
        )
            .query::<ActiveQuery>().ok::<Page<Silence>>(),
        Route::post("/api/v1/silences", create_silence).permission("silences:write").tool("silence_create", "Silence alerts matching a selector until a time.", &[("selector", "string", "label selector of the alerts silenced"), ("expiresAt", "string", "RFC 3339 time"), ("comment", "string", "why")]).doc(
            "silences",
            "Create a silence",
            "`{comment (required), expiresAt (required, in the future, at most 90 days ahead), startsAt (default now), selector (labels of the alert), textRegex (matched against the alert title)}`; 201 with `id, tenantId, createdAt, createdBy, version`; a `silence` event. A silence never stops an alert from opening: an alert it matches gets a `notification` event with status `suppressed`.",
        )
            .body::<SilenceBody>().answers::<Silence>(201)
            .example(|| json!({"selector": "site=north", "textRegex": "^disk", "expiresAt": "2026-12-01T18:00:00Z", "comment": "known issue, ticket 4711"})),
        Route::put("/api/v1/silences/{id}", update_silence).permission("silences:write").doc(
            "silences",
            "Edit or extend a silence",
            "Under `If-Match` (428 without, 409 `svc:conflict/version` when stale): the whole silence body as for create (`comment`, `expiresAt` required, `startsAt`, `selector`, `textRegex`, `expireWhenUnmatchedFor`), checked as for create; for a silence that has not expired (to extend one that runs, move one ahead, or change what it matches). 200 with the new `version` and `ETag`; a `silence` event with `action: updated` and the audit entry (`silence.update`). An expired silence is 422 `svc:validation/expiresAt`: create a new one.",
        )
            .body::<SilenceBody>().ok::<Silence>(),
        Route::post("/api/v1/silences:preview", preview_silence).permission("alerts:read").doc(
            "silences",
            "Preview a silence",
            "`{selector, textRegex}` (as for create; the rest is ignored): the open and acknowledged alerts (of the newest 1000) a silence of these would hold now, `{items, count}`. Refused as create refuses them (422 for a selector that does not parse, a bad pattern, or neither).",
        )
            .body::<SilenceBody>().ok::<SilencePreview>(),
        Route::delete("/api/v1/silences/{id}", expire_silence).permission("silences:write").doc(
            "silences",
            "Expire a silence now",
            "204; `expiresAt` becomes now.",
        )
            .answers_empty(204),
        Route::get("/api/v1/downtimes", downtimes).permission("objects:read").tool("downtimes_list", "Scheduled downtimes.", &[]).doc(
            "downtimes",
            "List downtimes",
            "All of the tenant's downtimes (at most 1000), latest `start` first; `active=true` keeps those in effect now.",
        )
            .query::<ActiveQuery>().ok::<Page<Downtime>>(),
        Route::post("/api/v1/downtimes", create_downtime).permission("downtimes:write").tool("downtime_create", "Schedule a downtime for an object or a selector.", &[("objectId", "string", "the object"), ("selector", "string", "or a label selector"), ("start", "string", "RFC 3339 time"), ("end", "string", "RFC 3339 time"), ("comment", "string", "why")]).doc(
            "downtimes",
            "Create a downtime",
            "`{comment, start, end (required), objectId or selector, services (a host's downtime: `true`, the default, covers its services too; `false` holds the host alone, as Icinga's host downtime without `all_services`), type fixed (default) or flexible with duration (seconds or `2h`), noticeBefore (`10m`) with escalationPolicy (whose first step is told that long before the window and at its end), timeIntervals (Alertmanager's `time_intervals`: `times` of `{startTime, endTime}`, `weekdays`, `daysOfMonth`, `months`, `years`, `location`; the downtime is then in effect between `start` and `end` only within their windows, each window's notices given, and the answer lists its next `occurrences`), calendarUrl (an iCalendar feed whose events are its windows, read by the server at once and every 15 minutes into `calendar: {windows, readAt, error?, warnings?}`; needs `config:write` too, else 403; only `http` and `https`, else 422 `svc:validation/calendarUrl`)}`; 201; a `downtime` event. A host downtime covers its services. `Idempotency-Key`: the same key and body within 24 h replays the first answer with `Idempotency-Replayed: true`; another body is 409 `svc:conflict/idempotency`.",
        )
            .body::<DowntimeBody>().answers::<Downtime>(201)
            .example(|| json!({"selector": "site=north", "type": "fixed", "start": "2026-12-01T22:00:00Z", "end": "2026-12-02T02:00:00Z", "comment": "maintenance window"})),
        Route::put("/api/v1/downtimes/{id}", update_downtime).permission("downtimes:write").doc(
            "downtimes",
            "Edit or extend a downtime",
            "Under `If-Match` (428 without, 409 `svc:conflict/version` when stale): the whole downtime body as for create, checked as for create, `end` in the future; for a downtime not over yet (to extend one that runs, move one ahead, or change what it covers). 200 with the new `version` and `ETag`; a `downtime` event with `action: updated` and the audit entry (`downtime.update`). One that is over is 422 `svc:validation/end`.",
        )
            .body::<DowntimeBody>().ok::<Downtime>(),
        Route::delete("/api/v1/downtimes/{id}", end_downtime).permission("downtimes:write").doc(
            "downtimes",
            "End a downtime now",
            "204; `end` becomes now.",
        )
            .answers_empty(204),
    ]
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ActiveQuery {
    active: Option<String>,
}

async fn silences(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ActiveQuery>,
) -> Result<impl IntoResponse, Problem> {
    let active = q.active.as_deref() == Some("true");
    Ok(Json(Page::all(
        st.alerting.silences(&c.principal, active).await?,
    )))
}

async fn create_silence(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<SilenceBody>,
) -> Result<impl IntoResponse, Problem> {
    let silence = st
        .alerting
        .create_silence(&c.principal, &c.actor, body)
        .await?;
    Ok((StatusCode::CREATED, Json(silence)))
}

async fn update_silence(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    IfMatch(expected): IfMatch,
    ApiJson(body): ApiJson<SilenceBody>,
) -> Result<impl IntoResponse, Problem> {
    let silence = st
        .alerting
        .update_silence(&c.principal, &c.actor, path_id(&id)?, expected, body)
        .await?;
    Ok((etag(silence.version), Json(silence)))
}

async fn preview_silence(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<SilenceBody>,
) -> Result<impl IntoResponse, Problem> {
    let items = st.alerting.preview_silence(&c.principal, body).await?;
    Ok(Json(SilencePreview {
        count: items.len(),
        items,
    }))
}

async fn update_downtime(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    IfMatch(expected): IfMatch,
    ApiJson(body): ApiJson<DowntimeBody>,
) -> Result<impl IntoResponse, Problem> {
    let downtime = st
        .alerting
        .update_downtime(&c.principal, &c.actor, path_id(&id)?, expected, body)
        .await?;
    Ok((etag(downtime.version), Json(downtime)))
}

async fn expire_silence(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.alerting
        .expire_silence(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn downtimes(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ActiveQuery>,
) -> Result<impl IntoResponse, Problem> {
    let active = q.active.as_deref() == Some("true");
    Ok(Json(Page::all(
        st.alerting.downtimes(&c.principal, active).await?,
    )))
}

async fn create_downtime(
    State(st): State<AppState>,
    c: Caller,
    headers: HeaderMap,
    ApiJsonDigest(body, digest): ApiJsonDigest<DowntimeBody>,
) -> Result<Response, Problem> {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let idempotency = key.map(|k| (k, digest));
    match st
        .alerting
        .create_downtime(&c.principal, &c.actor, body, idempotency)
        .await?
    {
        DowntimeCreated::Created(d) => Ok((StatusCode::CREATED, Json(d)).into_response()),
        DowntimeCreated::Replay { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::CREATED);
            Ok((
                status,
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    ),
                    (
                        header::HeaderName::from_static("idempotency-replayed"),
                        HeaderValue::from_static("true"),
                    ),
                ],
                body,
            )
                .into_response())
        }
        DowntimeCreated::KeyReused => Err(Problem::new(
            Code::ConflictIdempotency,
            "this Idempotency-Key was used with another body in the last 24 hours",
        )),
    }
}

async fn end_downtime(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.alerting
        .end_downtime(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
