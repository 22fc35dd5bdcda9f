//! Incident routes (SPEC 4.4, CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::etag::{IfMatch, etag};
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{INCIDENTS, Page, PageQuery};
use super::router::Route;
use crate::model::incident::{Incident, IncidentBody};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/incidents", list).permission("incidents:read").doc(
            "incidents",
            "List incidents",
            "`open=true` keeps the unresolved ones; newest first (id descending); limit 50 by default, at most 500; `cursor` is the last incident id of the previous page.",
        )
            .query::<IncidentQuery>().ok::<Page<Incident>>(),
        Route::post("/api/v1/incidents", create).permission("incidents:write").doc(
            "incidents",
            "Create an incident",
            "`{title (required), summary, severity (default critical), labels, impact, ticketUrl, alertIds}`; 201 with `ETag`. Listed alerts (the tenant's, else 422 `svc:validation/alertIds`) get its `incidentId`. Writes an `incident_update` event with `action: created`.",
        )
            .body::<IncidentBody>().answers::<Incident>(201)
            .example(json!({"title": "North site unreachable", "summary": "uplink down since 03:10", "labels": {"site": "north"}})),
        Route::get("/api/v1/incidents/{id}", get).permission("incidents:read").doc(
            "incidents",
            "Get an incident",
            "With `ETag: \"<version>\"`.",
        )
            .ok::<Incident>(),
        Route::put("/api/v1/incidents/{id}", update).permission("incidents:write").doc(
            "incidents",
            "Update an incident",
            "`If-Match` required (428 `svc:precondition/if-match`; stale: 409 `svc:conflict/version`). Replaces the fields the body names, `status` (open, acked, resolved) included. Writes an `incident_update` event with `action: updated`.",
        )
            .body::<IncidentBody>().ok::<Incident>(),
    ]
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
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
    let i = st.alerting.incident(&c.principal, path_id(&id)?).await?;
    Ok((etag(i.version), Json(i)))
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
