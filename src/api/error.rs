//! The one `Problem` type (RFC 9457) and the one code table. Handlers return `Problem`; the
//! `render_problems` middleware fills in `type` (problem base + code with `:` as `/`) and
//! `instance` (the request path), and logs every 5xx once.

use crate::store::StoreError;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub status: StatusCode,
    pub code: String,
    pub detail: String,
    /// Logged, never sent: what went wrong inside.
    pub internal: Option<String>,
    /// Seconds for the `Retry-After` header (429 and some 503 answers).
    pub retry_after: Option<u64>,
}

/// The document as sent.
#[derive(Serialize)]
pub struct ProblemDoc<'a> {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: &'static str,
    pub status: u16,
    pub code: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub detail: &'a str,
    pub instance: &'a str,
}

/// The code table: every code's status and title.
pub fn classify(code: &str) -> (StatusCode, &'static str) {
    use StatusCode as S;
    match code {
        "svc:auth/required" => (S::UNAUTHORIZED, "Authentication required"),
        "svc:auth/invalid" => (S::UNAUTHORIZED, "Invalid credentials"),
        "svc:auth/forbidden" => (S::FORBIDDEN, "Permission missing"),
        "svc:auth/csrf" => (S::FORBIDDEN, "Cross-site request refused"),
        "svc:auth/scope" => (S::FORBIDDEN, "Outside the role's scope"),
        "svc:auth/bad-password" => (S::FORBIDDEN, "Wrong password"),
        "svc:not-found" => (S::NOT_FOUND, "Not found"),
        "svc:conflict/version" => (S::CONFLICT, "Version conflict"),
        "svc:conflict/duplicate" => (S::CONFLICT, "Already exists"),
        "svc:conflict/idempotency" => (S::CONFLICT, "Idempotency key reused"),
        "svc:conflict" => (S::CONFLICT, "Conflict"),
        "svc:ai/busy" => (S::CONFLICT, "Chat busy"),
        "svc:bundle/token" => (S::CONFLICT, "Unknown apply token"),
        "svc:users/last-admin" => (S::CONFLICT, "Last administrator"),
        "svc:users/email-in-use" => (S::CONFLICT, "E-mail in use"),
        "svc:validation/size" | "svc:bundle/size" | "svc:ingress/size" => {
            (S::PAYLOAD_TOO_LARGE, "Body too large")
        }
        "svc:ingress/mapping" => (S::UNPROCESSABLE_ENTITY, "Mapping failed"),
        "svc:ingress/format" => (S::UNPROCESSABLE_ENTITY, "Unrecognised payload"),
        "svc:bundle/apply" => (S::UNPROCESSABLE_ENTITY, "Bundle apply failed"),
        c if c.starts_with("svc:validation/") => (S::UNPROCESSABLE_ENTITY, "Validation failed"),
        "svc:precondition/if-match" => (S::PRECONDITION_REQUIRED, "If-Match required"),
        "svc:ingress/rate" => (S::TOO_MANY_REQUESTS, "Rate limited"),
        "svc:auth/throttled" => (S::TOO_MANY_REQUESTS, "Too many failed verifications"),
        "svc:reports/pdf" => (S::NOT_IMPLEMENTED, "PDF rendering unavailable"),
        "svc:directory/unconfigured" => (S::NOT_IMPLEMENTED, "Directory not configured"),
        "svc:notify/test-failed" => (S::BAD_GATEWAY, "Test notification failed"),
        "svc:ai/provider" => (S::BAD_GATEWAY, "AI provider error"),
        "svc:ai/execute" => (S::BAD_GATEWAY, "Action failed"),
        "svc:directory/sync" => (S::BAD_GATEWAY, "Directory sync failed"),
        "svc:secrets/nokey" => (S::SERVICE_UNAVAILABLE, "No master key"),
        "svc:ai/disabled" => (S::SERVICE_UNAVAILABLE, "AI disabled"),
        "svc:storage/unavailable" => (S::SERVICE_UNAVAILABLE, "Storage not ready"),
        "svc:pipeline/stalled" => (S::SERVICE_UNAVAILABLE, "Results pipeline stalled"),
        "svc:auth/busy" => (S::SERVICE_UNAVAILABLE, "Verification busy"),
        "svc:ingress/unknown-source" => (S::NOT_FOUND, "Unknown event source"),
        "svc:ingress/disabled" => (S::FORBIDDEN, "Event source disabled"),
        "svc:ingress/auth" => (S::UNAUTHORIZED, "Event source authentication failed"),
        "svc:ingress/caller" => (S::FORBIDDEN, "Caller not allowed"),
        "svc:sites/disabled" => (S::FORBIDDEN, "Site disabled"),
        _ => (S::INTERNAL_SERVER_ERROR, "Internal error"),
    }
}

impl Problem {
    /// A problem with the status of `code` from the code table.
    pub fn new(code: impl Into<String>, detail: impl Into<String>) -> Self {
        let code = code.into();
        let (status, _) = classify(&code);
        Self {
            status,
            code,
            detail: detail.into(),
            internal: None,
            retry_after: None,
        }
    }

    /// The same problem with a `Retry-After` header.
    pub fn retry_after(self, after: std::time::Duration) -> Self {
        Self {
            retry_after: Some(after.as_secs().max(1)),
            ..self
        }
    }

    /// `svc:validation/<field>`.
    pub fn validation(field: &str, detail: impl Into<String>) -> Self {
        Self::new(format!("svc:validation/{field}"), detail)
    }

    pub fn not_found() -> Self {
        Self::new("svc:not-found", "")
    }

    /// 500 `svc:internal`; `why` is logged, not sent.
    pub fn internal(why: impl Into<String>) -> Self {
        Self {
            internal: Some(why.into()),
            ..Self::new("svc:internal", "")
        }
    }

    pub fn title(&self) -> &'static str {
        classify(&self.code).1
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Problem::not_found(),
            StoreError::Duplicate(what) => {
                Problem::new("svc:conflict/duplicate", format!("{what} already exists"))
            }
            e @ StoreError::VersionConflict { .. } => {
                Problem::new("svc:conflict/version", e.to_string())
            }
            StoreError::EmailInUse => {
                Problem::new("svc:users/email-in-use", "the e-mail address is in use")
            }
            StoreError::LastAdmin => Problem::new(
                "svc:users/last-admin",
                "the change would leave no enabled administrator",
            ),
            StoreError::Conflict(why) => Problem::new("svc:conflict", why),
            StoreError::Unavailable(why) => Problem {
                internal: Some(why),
                ..Problem::new(
                    "svc:storage/unavailable",
                    "storage is not available; retry later",
                )
            },
            other => Problem::internal(other.to_string()),
        }
    }
}

/// The response carries the problem as an extension; `render_problems` writes the body.
impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut res = (self.status, [(header::CONTENT_TYPE, PROBLEM_CONTENT_TYPE)]).into_response();
        if let Some(after) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(after));
        }
        res.extensions_mut().insert(self);
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_table() {
        assert_eq!(
            Problem::validation("name", "x").status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            Problem::new("svc:precondition/if-match", "")
                .status
                .as_u16(),
            428
        );
        assert_eq!(Problem::new("svc:validation/size", "").status.as_u16(), 413);
        assert_eq!(Problem::new("svc:ingress/rate", "").status.as_u16(), 429);
        assert_eq!(Problem::new("svc:nonsense", "").status.as_u16(), 500);
        let p: Problem = StoreError::VersionConflict {
            stored: 4,
            expected: 3,
        }
        .into();
        assert_eq!(p.status.as_u16(), 409);
        assert!(p.detail.contains('4') && p.detail.contains('3'));
    }
}
