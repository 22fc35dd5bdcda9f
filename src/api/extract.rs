//! Request extractors: the JSON body with the 1 MiB cap, query parameters and path segments,
//! each refusing bad input with a problem document (never axum's plain-text 400).

use super::error::{Code, Problem};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use std::collections::HashSet;

/// Cap on JSON request bodies (SPEC 8).
pub const JSON_BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body: larger than 1 MiB → 413 `svc:validation/size`; malformed → 422 `svc:validation/body`.
pub struct ApiJson<T>(pub T);

/// How much of an oversized body is read and discarded before answering 413, so that a client
/// still sending gets the answer instead of a reset connection.
const DRAIN_CAP: usize = 64 * 1024 * 1024;

/// Reads at most `limit` bytes of body, or answers 413 with `code`. A body sent with
/// `Content-Encoding: gzip` (a site's forwarded batches) is read as it decompresses, and the
/// limit holds for what it decompresses to; any other encoding is 415.
pub async fn read_body(req: Request, limit: usize, code: Code) -> Result<bytes::Bytes, Problem> {
    let too_large = || Problem::new(code.clone(), format!("body exceeds {limit} bytes"));
    let encoding = req
        .headers()
        .get(axum::http::header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase());
    let gzip = match encoding.as_deref() {
        None | Some("identity") | Some("") => false,
        Some("gzip") => true,
        Some(other) => {
            return Err(Problem::new(
                Code::MediaType,
                format!("Content-Encoding {other:?}: gzip or none"),
            ));
        }
    };
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
    if !gzip {
        return Ok(buf.freeze());
    }
    use std::io::Read as _;
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&buf[..])
        .take(limit as u64 + 1)
        .read_to_end(&mut plain)
        .map_err(|e| {
            Problem::validation("body", format!("the gzip body does not decompress: {e}"))
        })?;
    if plain.len() > limit {
        return Err(too_large());
    }
    Ok(plain.into())
}

/// A JSON body; an empty body reads as `null`, so `Option<T>` takes an optional body.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    let body: &[u8] = if body.trim_ascii().is_empty() {
        b"null"
    } else {
        body
    };
    crate::model::input::from_slice(body).map_err(|e| Problem::validation("body", e))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let body = read_body(req, JSON_BODY_LIMIT, Code::ValidationSize).await?;
        parse_json(&body).map(ApiJson)
    }
}

/// A JSON body with the SHA-256 of its bytes (what an `Idempotency-Key` is stored with).
pub struct ApiJsonDigest<T>(pub T, pub Vec<u8>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJsonDigest<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        use sha2::Digest;
        let body = read_body(req, JSON_BODY_LIMIT, Code::ValidationSize).await?;
        let digest = sha2::Sha256::digest(&body).to_vec();
        parse_json(&body).map(|v| ApiJsonDigest(v, digest))
    }
}

/// A resource id from the path: anything that is not a UUID names nothing, so it is 404.
pub fn path_id(raw: &str) -> Result<uuid::Uuid, Problem> {
    uuid::Uuid::parse_str(raw).map_err(|_| Problem::not_found())
}

/// Query parameters. A repeated parameter takes its first value (as the reference's Go handlers
/// read them), malformed percent-encoding decodes lossily, and a value that still does not fit
/// is 422 `svc:validation/query`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let raw = parts.uri.query().unwrap_or_default();
        let mut seen = HashSet::new();
        let mut first = form_urlencoded::Serializer::new(String::new());
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            if seen.insert(key.clone()) {
                first.append_pair(&key, &value);
            }
        }
        let query = first.finish();
        let parameters =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(parameters)
            .map(ApiQuery)
            .map_err(|e| {
                // The detail names the parameter (`events: ...`), as body details name the field.
                let detail = match e.path().to_string() {
                    p if p == "." => e.inner().to_string(),
                    p => format!("{p}: {}", e.inner()),
                };
                Problem::validation("query", detail)
            })
    }
}

/// Path parameters. A segment whose percent-encoding is not UTF-8 names nothing: 404.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| Problem::new(Code::NotFound, e.body_text()))
    }
}
