//! The caller's own things: console preferences, Web Push subscriptions; the console branding.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath};
use super::router::Route;
use crate::model::identity::{Branding, Preferences, PushKey, PushSubscription, PushUnsubscribe};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/branding", branding).identity().doc("branding", "Get this instance's console branding", "`{mode?, theme?, name?, accentColor?, logo?}`; `{}` until set.")
            .ok::<Branding>(),
        Route::put("/api/v1/branding", set_branding).permission("config:write").doc(
            "branding",
            "Set this instance's console branding",
            "Replaces `{mode?, theme?}` (each at most 200 characters) and svc's `name` (at most 64), `accentColor` (`#rrggbb`, the header's colour) and `logo` (a `data:` URI of a PNG, JPEG or WebP image of at most 64 KiB, checked by its bytes; served at `/branding/logo`); anything else is 422 `svc:validation/branding`. The branding is every tenant's console: only callers of the default tenant change it (403 otherwise). No If-Match.",
        )
            .body::<Branding>().ok::<Branding>(),
        Route::get("/api/v1/users/{id}/preferences", preferences).identity().doc(
            "users",
            "Get a user's console preferences",
            "`{id}` may be `me`; another user's needs `admin:users`. `{}` until set.",
        )
            .ok::<Preferences>(),
        Route::put("/api/v1/users/{id}/preferences", set_preferences).identity().doc(
            "users",
            "Set a user's console preferences",
            "Replaces `{refreshIntervalMs?, extra?}` (`extra` maps names to text; other fields are 422 `svc:validation/preferences`); `{id}` may be `me`; no If-Match.",
        )
            .body::<Preferences>().ok::<Preferences>(),
        Route::post("/api/v1/push-subscriptions", subscribe).identity().doc(
            "push-subscriptions",
            "Register a Web Push subscription",
            "Body `{endpoint, keys}` as the browser's `PushSubscription` gives it: `endpoint` an http(s) URL (422 `svc:validation/endpoint`), `keys` base64 text or `{p256dh, auth}` (422 `svc:validation/keys`). 201; registering the same endpoint again replaces it.",
        )
            .body::<PushSubscription>().answers::<PushSubscription>(201),
        Route::get("/api/v1/push-subscriptions/key", push_key).identity().doc(
            "push-subscriptions",
            "The key browsers subscribe with",
            "`{publicKey}`: the instance's VAPID public key (RFC 8292), base64url, for `PushManager.subscribe({applicationServerKey})`. Made on the first call (audited as `push.vapid-key.create`) and kept: every subscription is tied to it.",
        )
            .ok::<PushKey>(),
        Route::delete("/api/v1/push-subscriptions", unsubscribe).identity().doc(
            "push-subscriptions",
            "Unregister a Web Push subscription",
            "Body `{endpoint}`; 204, also when the endpoint was not registered.",
        )
            .body::<PushUnsubscribe>().answers_empty(204),
    ]
}

async fn branding(State(st): State<AppState>) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.auth.branding().await?))
}

async fn set_branding(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.auth.set_branding(&c.principal, &c.actor, body).await?,
    ))
}

async fn preferences(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.auth.preferences(&c.principal, &id).await?))
}

async fn set_preferences(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.auth
            .set_preferences(&c.principal, &c.actor, &id, body)
            .await?,
    ))
}

async fn subscribe(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    let sub = st.auth.subscribe_push(&c.principal, &c.actor, body).await?;
    Ok((StatusCode::CREATED, Json(sub)))
}

async fn push_key(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    let public_key = st.auth.push_public_key(&c.principal, &c.actor).await?;
    Ok(Json(PushKey { public_key }))
}

async fn unsubscribe(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    st.auth
        .unsubscribe_push(&c.principal, &c.actor, body)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
