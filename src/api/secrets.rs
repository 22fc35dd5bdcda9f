//! Secret routes: values go in, never out.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath};
use super::pagination::Page;
use super::router::Route;
use crate::inventory::secrets::SecretBody;
use crate::model::secret::SecretMeta;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/secrets", list).permission("admin:secrets").doc("secrets", "List secrets", "`{items: [{name, tenantId, createdAt, updatedAt}]}`; values are never returned. 503 `svc:secrets/nokey` without a usable master key.")
            .ok::<Page<SecretMeta>>(),
        Route::put("/api/v1/secrets/{name}", put).permission("admin:secrets").doc(
            "secrets",
            "Store a secret",
            "Body `{value}`; 204; no If-Match (last write wins). Sealed with XChaCha20-Poly1305 under the master key (`secrets.masterKeyFile`, generated with mode 0600 on first start) and bound to its tenant and name. Check arguments and channel configuration refer to a secret as `$SECRET:NAME$`, opened only when used.",
        )
            .body::<SecretBody>().answers_empty(204),
        Route::delete("/api/v1/secrets/{name}", delete).permission("admin:secrets").doc("secrets", "Delete a secret", "204.")
            .answers_empty(204),
    ]
}

async fn list(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.inventory.secrets(&c.principal).await?)))
}

async fn put(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<SecretBody>,
) -> Result<impl IntoResponse, Problem> {
    st.inventory
        .put_secret(&c.principal, &c.actor, name, body)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.inventory
        .delete_secret(&c.principal, &c.actor, name)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
