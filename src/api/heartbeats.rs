//! Heartbeat routes (CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath};
use super::pagination::Page;
use super::router::{JSON, Route};
use super::schemas;
use crate::model::heartbeat::Heartbeat;
use crate::model::heartbeat::HeartbeatBody;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

pub fn routes() -> Vec<Route> {
    const BEAT: &str = "200 `{\"status\": \"ok\"}`; an unknown name is 404. A beat after a miss emits `heartbeat_missed` with `resolve: true` and severity ok.";
    vec![
        Route::get("/api/v1/heartbeats", list).permission("objects:read").doc("heartbeats", "List heartbeats", "All of the tenant's heartbeats, without paging.")
            .ok::<Page<Heartbeat>>(),
        Route::post("/api/v1/heartbeats", upsert).permission("config:write").doc(
            "heartbeats",
            "Create or replace a heartbeat",
            "Upsert by name: `{name, expectEvery, grace?, labels?, severity?}` (grace 0, severity warning by default); 201. Overdue when more than `expectEvery + grace` passed since the last beat (or the definition); a sweep run when the next heartbeat falls due emits `heartbeat_missed` once.",
        )
            .body::<HeartbeatBody>().answers::<Heartbeat>(201),
        Route::delete("/api/v1/heartbeats/{name}", delete).permission("config:write").doc("heartbeats", "Delete a heartbeat", "204.")
            .answers_empty(204),
        Route::get("/api/v1/heartbeats/{name}/beat", beat).permission("objects:write").doc("heartbeats", "Record a beat (GET, for cron)", BEAT)
            .answers_as(200, JSON, schemas::literal(schemas::status)),
        Route::post("/api/v1/heartbeats/{name}/beat", beat).permission("objects:write").doc("heartbeats", "Record a beat", BEAT)
            .no_body().answers_as(200, JSON, schemas::literal(schemas::status)),
    ]
}

async fn list(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.heartbeats.list(&c.principal).await?)))
}

async fn upsert(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<HeartbeatBody>,
) -> Result<impl IntoResponse, Problem> {
    Ok((
        StatusCode::CREATED,
        Json(st.heartbeats.upsert(&c.principal, &c.actor, body).await?),
    ))
}

async fn delete(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.heartbeats.delete(&c.principal, &c.actor, name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn beat(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.heartbeats.beat(&c.principal, name).await?;
    Ok(Json(json!({"status": "ok"})))
}
