//! User routes (SPEC 4.1).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, path_id};
use super::pagination::Page;
use super::router::{JSON, Route};
use super::schemas;
use crate::model::identity::User;
use crate::model::identity::{ChangePassword, CreateUser, SetPassword, UpdateUser};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/users", list).permission("admin:users").doc("users", "List users", "Users of the acting tenant, without paging.")
            .ok::<Page<User>>(),
        Route::post("/api/v1/users", create).permission("admin:users").doc(
            "users",
            "Create a local user",
            "Body `{email, name, password?, roles?, disabled?}`; roles default to `[viewer]`; password at least 12 characters (422 `svc:validation/password`); e-mail unique across the instance (409 `svc:users/email-in-use`).",
        )
            .body::<CreateUser>().answers::<User>(201),
        Route::get("/api/v1/users/{id}", get).permission("admin:users").doc("users", "Get a user", "")
            .ok::<User>(),
        Route::put("/api/v1/users/{id}", update).permission("admin:users").doc(
            "users",
            "Update a user",
            "Fields given change; no If-Match (last write wins). Removing the last enabled administrator gives 409 `svc:users/last-admin`.",
        )
            .body::<UpdateUser>().ok::<User>(),
        Route::delete("/api/v1/users/{id}", delete).permission("admin:users").doc("users", "Delete a user", "204; the last enabled administrator cannot be deleted (409).")
            .answers_empty(204),
        Route::post("/api/v1/users/{id}:set-password", set_password)
            .permission("admin:users")
            .doc("users", "Set a user's password (admin reset)", "Body `{password}`; 204.")
            .body::<SetPassword>().answers_empty(204),
        Route::post("/api/v1/users/me:change-password", change_password).identity().doc(
            "users",
            "Change your own password",
            "Body `{oldPassword, newPassword}`; session users only (tokens get 401); 403 `svc:auth/bad-password` for a wrong old password; existing sessions stay valid.",
        )
            .body::<ChangePassword>().answers_as(200, JSON, schemas::literal(schemas::status))
            .fails(403, "The old password is wrong (`svc:auth/bad-password`)"),
    ]
}

async fn list(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.auth.users(&c.principal).await?)))
}

async fn create(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<CreateUser>,
) -> Result<impl IntoResponse, Problem> {
    Ok((
        StatusCode::CREATED,
        Json(st.auth.create_user(&c.principal, &c.actor, req).await?),
    ))
}

async fn get(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.auth.user(&c.principal, path_id(&raw)?).await?))
}

async fn update(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
    ApiJson(req): ApiJson<UpdateUser>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.auth
            .update_user(&c.principal, &c.actor, path_id(&raw)?, req)
            .await?,
    ))
}

async fn delete(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.auth
        .delete_user(&c.principal, &c.actor, path_id(&raw)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_password(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
    ApiJson(req): ApiJson<SetPassword>,
) -> Result<impl IntoResponse, Problem> {
    st.auth
        .set_password(&c.principal, &c.actor, path_id(&raw)?, req)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn change_password(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<ChangePassword>,
) -> Result<impl IntoResponse, Problem> {
    st.auth.change_password(&c.principal, &c.actor, req).await?;
    Ok(Json(json!({"status": "ok"})))
}
