//! Incident routes (SPEC 4.4, CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::etag::{IfMatch, etag};
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{INCIDENTS, Page, PageQuery};
use super::router::Route;
use crate::model::incident::{
    Incident, IncidentBody, IncidentDetail, MergeRequest, SummaryProposal,
};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/incidents", list).permission("incidents:read").tool("incidents_list", "Incidents, newest first.", &[("status", "string", "open or resolved"), ("limit", "integer", "at most this many")]).doc(
            "incidents",
            "List incidents",
            "`open=true` keeps the unresolved ones; newest first (id descending); limit 50 by default, at most 500; `cursor` is the last incident id of the previous page.",
        )
            .query::<IncidentQuery>().ok::<Page<Incident>>(),
        Route::post("/api/v1/incidents", create).permission("incidents:write").doc(
            "incidents",
            "Create an incident",
            "`{title (required), summary, severity (default critical), labels, impact, ticketUrl, alertIds, status (open by default; acked or resolved, else 422 `svc:validation/status`)}`; 201 with `ETag`. Listed alerts (the tenant's, else 422 `svc:validation/alertIds`) get its `incidentId`. Writes an `incident_update` event with `action: created`.",
        )
            .body::<IncidentBody>().answers::<Incident>(201)
            .example(|| json!({"title": "North site unreachable", "summary": "uplink down since 03:10", "labels": {"site": "north"}})),
        Route::get("/api/v1/incidents/{id}", get).permission("incidents:read").tool("incident_get", "One incident with its alerts and timeline.", &[("id", "string", "the incident's id")]).doc(
            "incidents",
            "Get an incident with its alerts and timeline",
            "The incident's fields (as the list's), `alerts` (its alerts), and `timeline`: its `incident_update` events and its alerts' events (opened, acknowledged, escalated, notified, resolved), newest first, at most 200. With `ETag: \"<version>\"`.",
        )
            .ok::<IncidentDetail>(),
        Route::put("/api/v1/incidents/{id}", update).permission("incidents:write").doc(
            "incidents",
            "Update an incident",
            "`If-Match` required (428 `svc:precondition/if-match`; stale: 409 `svc:conflict/version`). Replaces the fields the body names, `status` (open, acked, resolved) included. Writes an `incident_update` event with `action: updated`.",
        )
            .body::<IncidentBody>().ok::<Incident>(),
        Route::post("/api/v1/incidents/{id}:resolve", resolve).permission("incidents:write").tool("incident_resolve", "Resolve an incident.", &[("id", "string", "the incident's id")]).doc(
            "incidents",
            "Resolve an incident and its alerts",
            "The incident and its open or acknowledged alerts are resolved in one transaction: an `incident_update` event (`action: resolved`), an `alert_resolved` event and an audit entry per alert, their escalations stopped. An incident resolved already answers as it is. No If-Match.",
        )
            .no_body().ok::<Incident>(),
        Route::post("/api/v1/incidents/{id}:merge", merge).permission("incidents:write").tool("incident_merge", "Merge other incidents into this one.", &[("id", "string", "the incident kept"), ("sourceIds", "array", "the incidents merged into it")]).doc(
            "incidents",
            "Merge incidents into this one",
            "`{sourceIds}`: the alerts of those incidents move into this one and they are resolved, in one transaction; `incident_update` events with `action: merged` say so on both sides (`merged` on this one, `mergedInto` on each source). A source the tenant does not have is 404; none, or this incident itself, is 422 `svc:validation/sourceIds`.",
        )
            .body::<MergeRequest>().ok::<Incident>(),
        Route::post("/api/v1/incidents/{id}:summarize", summarize).permission("incidents:write").doc(
            "incidents",
            "Propose a summary (AI)",
            "`{summary}` proposed by the instance connection (`ai.model`), else the tenant's first shared connection with a default model, from the incident, its alerts and timeline; the incident is not changed. 503 `svc:ai/disabled` with `ai.provider: none` or no connection, 502 `svc:ai/provider` when the provider fails.",
        )
            .no_body().ok::<SummaryProposal>().fails(502, "The provider failed (`svc:ai/provider`)").fails(503, "No AI provider is configured (`svc:ai/disabled`)"),
    ]
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct IncidentQuery {
    open: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

async fn list(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<IncidentQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.page.resolve(INCIDENTS);
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let open_only = q.open.as_deref() == Some("true");
    let items = st
        .alerting
        .incidents(&c.principal, open_only, cursor, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |i: &Incident| {
        i.id.to_string()
    })))
}

async fn create(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<IncidentBody>,
) -> Result<impl IntoResponse, Problem> {
    let i = st
        .alerting
        .create_incident(&c.principal, &c.actor, body)
        .await?;
    Ok((StatusCode::CREATED, etag(i.version), Json(i)))
}

async fn get(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let detail = st
        .alerting
        .incident_detail(&c.principal, path_id(&id)?)
        .await?;
    Ok((etag(detail.incident.version), Json(detail)))
}

async fn resolve(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let i = st
        .alerting
        .resolve_incident(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok((etag(i.version), Json(i)))
}

async fn merge(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<MergeRequest>,
) -> Result<impl IntoResponse, Problem> {
    let i = st
        .alerting
        .merge_incidents(&c.principal, &c.actor, path_id(&id)?, body.source_ids)
        .await?;
    Ok((etag(i.version), Json(i)))
}

/// A summary proposed by the AI provider from the incident, its alerts and timeline; nothing
/// is stored.
async fn summarize(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let detail = st
        .alerting
        .incident_detail(&c.principal, path_id(&id)?)
        .await?;
    let incident = serde_json::to_value(&detail).map_err(|e| Problem::internal(e.to_string()))?;
    let summary = st.ai.summarize(&c.principal, &incident).await?;
    Ok(Json(SummaryProposal { summary }))
}

async fn update(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    IfMatch(expected): IfMatch,
    ApiJson(body): ApiJson<IncidentBody>,
) -> Result<impl IntoResponse, Problem> {
    let i = st
        .alerting
        .update_incident(&c.principal, &c.actor, path_id(&id)?, expected, body)
        .await?;
    Ok((etag(i.version), Json(i)))
}
