//! Comments on alerts, objects and incidents: read with the subject's read permission,
//! written with the permission that acts on it.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, path_id};
use super::pagination::Page;
use super::router::Route;
use crate::model::comment::{Comment, CommentOn, CommentRequest};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::json;

const LIST: &str =
    "Newest first, at most 500, as `{items}`. A subject the tenant does not have is 404.";
const ADD: &str = "`{text}` (1 to 4000 characters, trimmed; else 422 `svc:validation/text`): a comment by the caller, without acknowledging or changing anything. 201 with the comment. Writes a `comment` event (`commentId`, `createdAt`, `by`, `text` and the subject's id; `sourceId` is the subject) and an audit entry in one transaction; it stands in the subject's timeline (an alert's comment also among its object's events). A subject the tenant does not have is 404.";

pub fn routes() -> Vec<Route> {
    let example = || json!({"text": "valve 3 replaced, watching the pressure"});
    vec![
        Route::get("/api/v1/alerts/{id}/comments", alert_comments)
            .permission("alerts:read")
            .doc("alerts", "List an alert's comments", LIST)
            .ok::<Page<Comment>>(),
        Route::post("/api/v1/alerts/{id}/comments", comment_alert)
            .permission("alerts:ack")
            .tool(
                "alert_comment",
                "Add a comment to an alert without acknowledging it.",
                &[
                    ("id", "string", "the alert's id"),
                    ("text", "string", "the comment"),
                ],
            )
            .doc("alerts", "Comment on an alert", ADD)
            .body::<CommentRequest>()
            .answers::<Comment>(201)
            .example(example),
        Route::get("/api/v1/objects/{id}/comments", object_comments)
            .permission("objects:read")
            .doc("objects", "List an object's comments", LIST)
            .ok::<Page<Comment>>(),
        Route::post("/api/v1/objects/{id}/comments", comment_object)
            .permission("objects:write")
            .doc("objects", "Comment on a host or service", ADD)
            .body::<CommentRequest>()
            .answers::<Comment>(201)
            .example(example),
        Route::get("/api/v1/incidents/{id}/comments", incident_comments)
            .permission("incidents:read")
            .doc("incidents", "List an incident's comments", LIST)
            .ok::<Page<Comment>>(),
        Route::post("/api/v1/incidents/{id}/comments", comment_incident)
            .permission("incidents:write")
            .doc("incidents", "Comment on an incident", ADD)
            .body::<CommentRequest>()
            .answers::<Comment>(201)
            .example(example),
    ]
}

type Listed = Result<Json<Page<Comment>>, Problem>;
type Added = Result<(StatusCode, Json<Comment>), Problem>;

async fn list(st: &AppState, c: &Caller, on: CommentOn) -> Listed {
    let items = st.alerting.comments(&c.principal, on).await?;
    Ok(Json(Page::all(items)))
}

async fn add(st: &AppState, c: &Caller, on: CommentOn, body: CommentRequest) -> Added {
    let comment = st
        .alerting
        .comment(&c.principal, &c.actor, on, &body.text)
        .await?;
    Ok((StatusCode::CREATED, Json(comment)))
}

async fn alert_comments(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Listed {
    list(&st, &c, CommentOn::Alert(path_id(&id)?)).await
}

async fn comment_alert(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CommentRequest>,
) -> Added {
    add(&st, &c, CommentOn::Alert(path_id(&id)?), body).await
}

async fn object_comments(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Listed {
    list(&st, &c, CommentOn::Object(path_id(&id)?)).await
}

async fn comment_object(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CommentRequest>,
) -> Added {
    add(&st, &c, CommentOn::Object(path_id(&id)?), body).await
}

async fn incident_comments(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Listed {
    list(&st, &c, CommentOn::Incident(path_id(&id)?)).await
}

async fn comment_incident(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CommentRequest>,
) -> Added {
    add(&st, &c, CommentOn::Incident(path_id(&id)?), body).await
}
