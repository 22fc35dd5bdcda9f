//! Request extractors: the JSON body with the 1 MiB cap and the spec's error codes.

use super::error::Problem;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::DeserializeOwned;

/// Cap on JSON request bodies (SPEC 8).
pub const JSON_BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body: larger than 1 MiB → 413 `svc:validation/size`; malformed → 422 `svc:validation/body`.
pub struct ApiJson<T>(pub T);

/// Reads at most `limit` bytes of body, or answers 413 with `code`.
pub async fn read_body(req: Request, limit: usize, code: &str) -> Result<bytes::Bytes, Problem> {
    let too_large = || Problem::new(code, format!("body exceeds {limit} bytes"));
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| too_large())
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let body = read_body(req, JSON_BODY_LIMIT, "svc:validation/size").await?;
        serde_json::from_slice(&body)
            .map(ApiJson)
            .map_err(|e| Problem::validation("body", format!("malformed JSON body: {e}")))
    }
}
