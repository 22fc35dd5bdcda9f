//! The one ETag / If-Match helper (SPEC 9): versions (and content digests) out as `ETag: "<n>"`; `If-Match` in, bare,
//! quoted or weak; missing or 0 → 428 `svc:precondition/if-match`; `If-None-Match` tag lists.

use super::error::{Code, Problem};
use crate::model::bare_entity_tag;
use axum::extract::FromRequestParts;
use axum::http::header::{ETAG, IF_MATCH, IF_NONE_MATCH};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};

/// The `ETag` header pair for a version.
pub fn etag(version: u64) -> [(axum::http::HeaderName, HeaderValue); 1] {
    entity_tag(&version.to_string())
}

/// The `ETag` header pair for an entity tag (a version, or a digest of the content).
pub fn entity_tag(tag: &str) -> [(axum::http::HeaderName, HeaderValue); 1] {
    let value =
        HeaderValue::from_str(&format!("\"{tag}\"")).unwrap_or(HeaderValue::from_static("\"0\""));
    [(ETAG, value)]
}

/// The entity tags of `If-None-Match` (a list; bare, quoted or weak).
pub fn if_none_match(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(bare_entity_tag)
        .filter(|t| !t.is_empty())
        .collect()
}

/// The version a client expects, from `If-Match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfMatch(pub u64);

/// Parses an `If-Match` value: `3`, `"3"`, `W/"3"`, with spaces ignored. `None` means absent or 0.
pub fn parse_if_match(headers: &HeaderMap) -> Result<Option<u64>, Problem> {
    let Some(raw) = headers.get(IF_MATCH) else {
        return Ok(None);
    };
    let text = raw
        .to_str()
        .map_err(|_| Problem::new(Code::PreconditionIfMatch, "If-Match is not text"))?;
    let version = bare_entity_tag(text).parse::<u64>().map_err(|_| {
        Problem::new(
            Code::PreconditionIfMatch,
            format!("If-Match {text:?} is not a version number"),
        )
    })?;
    Ok((version != 0).then_some(version))
}

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parse_if_match(&parts.headers)?.map(IfMatch).ok_or_else(|| {
            Problem::new(
                Code::PreconditionIfMatch,
                "this update requires an If-Match header with the current version",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(IF_MATCH, HeaderValue::from_str(v).unwrap());
        m
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(parse_if_match(&h("3")).unwrap(), Some(3));
        assert_eq!(parse_if_match(&h("\"3\"")).unwrap(), Some(3));
        assert_eq!(parse_if_match(&h("W/\"3\"")).unwrap(), Some(3));
        assert_eq!(parse_if_match(&h(" \" 12 \" ")).unwrap(), Some(12));
        assert_eq!(parse_if_match(&h("0")).unwrap(), None);
        assert_eq!(parse_if_match(&HeaderMap::new()).unwrap(), None);
        assert_eq!(parse_if_match(&h("abc")).unwrap_err().status.as_u16(), 428);
        assert_eq!(etag(7)[0].1, "\"7\"");
    }
}
