//! Request extractors: the JSON body with the 1 MiB cap and the spec's error codes.

use super::error::Problem;
use axum::extract::{FromRequest, Request};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

/// Cap on JSON request bodies (SPEC 8).
pub const JSON_BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body: larger than 1 MiB → 413 `svc:validation/size`; malformed → 422 `svc:validation/body`.
pub struct ApiJson<T>(pub T);

/// How much of an oversized body is read and discarded before answering 413, so that a client
/// still sending gets the answer instead of a reset connection.
const DRAIN_CAP: usize = 64 * 1024 * 1024;

/// Reads at most `limit` bytes of body, or answers 413 with `code`.
pub async fn read_body(req: Request, limit: usize, code: &str) -> Result<bytes::Bytes, Problem> {
    let too_large = || Problem::new(code, format!("body exceeds {limit} bytes"));
    let mut body = req.into_body();
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(Problem::validation(
                "body",
                "the request body could not be read",
            ));
        };
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen <= limit {
                buf.extend_from_slice(&data);
            } else if seen > DRAIN_CAP {
                break;
            }
        }
    }
    if seen > limit {
        return Err(too_large());
    }
    Ok(buf.freeze())
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

/// A resource id from the path: anything that is not a UUID names nothing, so it is 404.
pub fn path_id(raw: &str) -> Result<uuid::Uuid, Problem> {
    uuid::Uuid::parse_str(raw).map_err(|_| Problem::not_found())
}
