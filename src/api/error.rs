//! The one `Problem` type (RFC 9457), the one code table and the one mapping from every domain
//! error to it. Codes are a closed enum and every domain error is matched variant by variant,
//! so a new code or a new error variant does not compile until it has a status and a code.
//! Handlers return `Problem`; the `render_problems` middleware fills in `type` (problem base +
//! code with `:` as `/`) and `instance` (the request path), and logs every 5xx once.

use crate::ai::AiError;
use crate::alerting::AlertError;
use crate::auth::AuthError;
use crate::federation::SiteError;
use crate::ingress::webhook::IngestError;
use crate::inventory::InventoryError;
use crate::monitor::business::BusinessError;
use crate::monitor::heartbeats::HeartbeatError;
use crate::monitor::metrics::MetricError;
use crate::monitor::results::ResultError;
use crate::notify::NotifyError;
use crate::reports::ReportError;
use crate::runtime::PortError;
use crate::store::StoreError;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::borrow::Cow;
use std::time::Duration;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// The `svc:` codes of SPEC 7 that this build produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Code {
    AuthRequired,
    AuthInvalid,
    AuthForbidden,
    AuthCsrf,
    /// A cookie request to a JSON route whose body is not JSON (a form or plain text a page
    /// of another origin could send without asking).
    MediaType,
    AuthBadPassword,
    /// Too many failed token verifications from one address.
    AuthThrottled,
    /// The credential hashing queue is full.
    AuthBusy,
    NotFound,
    ConflictVersion,
    ConflictDuplicate,
    ConflictIdempotency,
    Conflict,
    AiDisabled,
    /// A turn is already streaming on the chat.
    AiBusy,
    /// The AI provider failed or refused.
    AiProvider,
    /// An approved action's call failed.
    AiExecute,
    BundleToken,
    UsersLastAdmin,
    UsersEmailInUse,
    ValidationSize,
    BundleSize,
    /// Bundle work (plan, apply, export) at its concurrency limit.
    BundleBusy,
    /// Forwarded batches at the room for them.
    SitesBusy,
    /// `svc:validation/<field>`.
    Validation(Cow<'static, str>),
    BundleApply,
    PreconditionIfMatch,
    DirectoryUnconfigured,
    DirectorySync,
    SecretsNoKey,
    StorageUnavailable,
    PipelineStalled,
    NotifyTestFailed,
    /// A check run for an answer (a host's SNMP interfaces) did not get one.
    CheckFailed,
    IngressSize,
    IngressFormat,
    IngressMapping,
    IngressRate,
    IngressUnknownSource,
    IngressDisabled,
    IngressAuth,
    SitesDisabled,
    /// A report asked for as PDF: this build renders HTML, CSV and JSON.
    ReportsPdf,
    Internal,
}

impl Code {
    pub fn as_str(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Code::AuthRequired => "svc:auth/required",
            Code::AuthInvalid => "svc:auth/invalid",
            Code::AuthForbidden => "svc:auth/forbidden",
            Code::AuthCsrf => "svc:auth/csrf",
            Code::MediaType => "svc:media-type",
            Code::AuthBadPassword => "svc:auth/bad-password",
            Code::AuthThrottled => "svc:auth/throttled",
            Code::AuthBusy => "svc:auth/busy",
            Code::NotFound => "svc:not-found",
            Code::ConflictVersion => "svc:conflict/version",
            Code::ConflictDuplicate => "svc:conflict/duplicate",
            Code::ConflictIdempotency => "svc:conflict/idempotency",
            Code::Conflict => "svc:conflict",
            Code::AiDisabled => "svc:ai/disabled",
            Code::AiBusy => "svc:ai/busy",
            Code::AiProvider => "svc:ai/provider",
            Code::AiExecute => "svc:ai/execute",
            Code::BundleToken => "svc:bundle/token",
            Code::UsersLastAdmin => "svc:users/last-admin",
            Code::UsersEmailInUse => "svc:users/email-in-use",
            Code::ValidationSize => "svc:validation/size",
            Code::BundleSize => "svc:bundle/size",
            Code::BundleBusy => "svc:bundle/busy",
            Code::SitesBusy => "svc:sites/busy",
            Code::Validation(field) => return Cow::Owned(format!("svc:validation/{field}")),
            Code::BundleApply => "svc:bundle/apply",
            Code::PreconditionIfMatch => "svc:precondition/if-match",
            Code::DirectoryUnconfigured => "svc:directory/unconfigured",
            Code::DirectorySync => "svc:directory/sync",
            Code::SecretsNoKey => "svc:secrets/nokey",
            Code::StorageUnavailable => "svc:storage/unavailable",
            Code::PipelineStalled => "svc:pipeline/stalled",
            Code::NotifyTestFailed => "svc:notify/test-failed",
            Code::CheckFailed => "svc:checks/failed",
            Code::IngressSize => "svc:ingress/size",
            Code::IngressFormat => "svc:ingress/format",
            Code::IngressMapping => "svc:ingress/mapping",
            Code::IngressRate => "svc:ingress/rate",
            Code::IngressUnknownSource => "svc:ingress/unknown-source",
            Code::IngressDisabled => "svc:ingress/disabled",
            Code::IngressAuth => "svc:ingress/auth",
            Code::SitesDisabled => "svc:sites/disabled",
            Code::ReportsPdf => "svc:reports/pdf",
            Code::Internal => "svc:internal",
        })
    }

    /// Every fixed code (validation codes are `Validation` with any field).
    const FIXED: [Code; 42] = [
        Code::AuthRequired,
        Code::AuthInvalid,
        Code::AuthForbidden,
        Code::AuthCsrf,
        Code::MediaType,
        Code::AuthBadPassword,
        Code::AuthThrottled,
        Code::AuthBusy,
        Code::NotFound,
        Code::ConflictVersion,
        Code::ConflictDuplicate,
        Code::ConflictIdempotency,
        Code::Conflict,
        Code::AiDisabled,
        Code::AiBusy,
        Code::AiProvider,
        Code::AiExecute,
        Code::BundleToken,
        Code::UsersLastAdmin,
        Code::UsersEmailInUse,
        Code::ValidationSize,
        Code::BundleSize,
        Code::BundleBusy,
        Code::SitesBusy,
        Code::BundleApply,
        Code::PreconditionIfMatch,
        Code::DirectoryUnconfigured,
        Code::DirectorySync,
        Code::SecretsNoKey,
        Code::StorageUnavailable,
        Code::PipelineStalled,
        Code::NotifyTestFailed,
        Code::CheckFailed,
        Code::IngressSize,
        Code::IngressFormat,
        Code::IngressMapping,
        Code::IngressRate,
        Code::IngressUnknownSource,
        Code::IngressDisabled,
        Code::IngressAuth,
        Code::SitesDisabled,
        Code::ReportsPdf,
    ];

    /// The code a `svc:…` string names, if any.
    pub fn parse(code: &str) -> Option<Code> {
        if let Some(fixed) = Self::FIXED.into_iter().find(|c| c.as_str() == code) {
            return Some(fixed);
        }
        if code == "svc:internal" {
            return Some(Code::Internal);
        }
        let field = code.strip_prefix("svc:validation/")?;
        let ok = !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        ok.then(|| Code::Validation(Cow::Owned(field.to_string())))
    }

    /// What the code means, for its page.
    pub fn explain(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Code::AuthRequired => {
                "The route needs a credential: an API token (Authorization: Bearer svc_…) or a signed-in session."
            }
            Code::AuthInvalid => {
                "The credential is not valid: unknown, revoked, expired, or bound to other addresses."
            }
            Code::AuthForbidden => {
                "The credential is valid but lacks the permission the route requires; the detail names it."
            }
            Code::AuthCsrf => {
                "A browser request with a session cookie came from another origin (or a form without its page's token) and was refused."
            }
            Code::MediaType => {
                "A request with a session cookie to a JSON route must send JSON (Content-Type: application/json)."
            }
            Code::AuthBadPassword => "The current password given is wrong.",
            Code::AuthThrottled => {
                "Too many failed token verifications from this address; wait for Retry-After."
            }
            Code::AuthBusy => "Credential verification is saturated; retry after Retry-After.",
            Code::NotFound => "No such resource in the acting tenant.",
            Code::ConflictVersion => {
                "The resource changed since it was read: If-Match names an older version. Read it again and retry."
            }
            Code::ConflictDuplicate => "A resource with this name already exists.",
            Code::ConflictIdempotency => {
                "The Idempotency-Key was used before with a different request body."
            }
            Code::Conflict => "The request conflicts with the resource's current state.",
            Code::AiDisabled => {
                "The AI agent is off (`ai.provider` is none), has no connection to use, has spent the month's token budget, or sheds work under load (with Retry-After)."
            }
            Code::AiBusy => "A turn is already streaming on this chat; wait for it to finish.",
            Code::AiProvider => {
                "The AI provider could not be reached or refused the request; the detail carries its answer."
            }
            Code::AiExecute => {
                "The approved action's API call failed; the action is kept as failed with the call's answer."
            }
            Code::BundleToken => {
                "The bundle's apply token is unknown or expired; plan the bundle again."
            }
            Code::UsersLastAdmin => {
                "The change would leave the instance without an enabled administrator."
            }
            Code::UsersEmailInUse => "Another user has this e-mail address.",
            Code::ValidationSize | Code::BundleSize | Code::IngressSize => {
                "The request body is larger than the route accepts."
            }
            Code::Validation(field) => {
                return Cow::Owned(format!(
                    "The request's {field} does not fit; the detail says what was expected."
                ));
            }
            Code::BundleApply => "The bundle could not be applied; nothing of it was stored.",
            Code::BundleBusy => {
                "Bundle plans, applies and exports are at their concurrency limit; retry after Retry-After."
            }
            Code::SitesBusy => {
                "Sites' forwarded batches fill the room for them (16 MiB parsed at once); send again after Retry-After."
            }
            Code::PreconditionIfMatch => {
                "The update needs an If-Match header with the version last read."
            }
            Code::DirectoryUnconfigured => "No LDAP directory is configured.",
            Code::DirectorySync => {
                "The LDAP directory could not be reached or read; the detail says why. Nothing was changed."
            }
            Code::SecretsNoKey => {
                "The secrets master key is missing or unusable, so secrets cannot be opened."
            }
            Code::StorageUnavailable => {
                "The store is not available (an I/O error or a full disk); retry later."
            }
            Code::PipelineStalled => "The results pipeline is stalled; retry later.",
            Code::NotifyTestFailed => {
                "The channel's provider refused the test notification; the detail carries its answer."
            }
            Code::CheckFailed => {
                "The check did not get the answer asked for (a device that did not answer, or refused the credentials); the detail says what happened. Nothing was changed."
            }
            Code::IngressFormat => "The event source could not read the body in its format.",
            Code::IngressMapping => {
                "The event source's mapping found no value for a required field; the detail names it."
            }
            Code::IngressRate => {
                "The event source's rate limit is exhausted; retry after Retry-After."
            }
            Code::IngressUnknownSource => "No event source of this name.",
            Code::IngressDisabled => "The event source is disabled.",
            Code::IngressAuth => "The request did not pass the event source's authentication.",
            Code::SitesDisabled => {
                "The federation site is disabled: it may neither pull its bundle nor report."
            }
            Code::ReportsPdf => {
                "PDF rendering is not available in this build; ask for format html, csv or json."
            }
            Code::Internal => {
                "An unexpected error inside the service; it is logged with the request id."
            }
        })
    }

    /// The status and title of the code table.
    pub fn classify(&self) -> (StatusCode, &'static str) {
        use StatusCode as S;
        match self {
            Code::AuthRequired => (S::UNAUTHORIZED, "Authentication required"),
            Code::AuthInvalid => (S::UNAUTHORIZED, "Invalid credentials"),
            Code::AuthForbidden => (S::FORBIDDEN, "Permission missing"),
            Code::AuthCsrf => (S::FORBIDDEN, "Cross-site request refused"),
            Code::MediaType => (S::UNSUPPORTED_MEDIA_TYPE, "Unsupported media type"),
            Code::AuthBadPassword => (S::FORBIDDEN, "Wrong password"),
            Code::AuthThrottled => (S::TOO_MANY_REQUESTS, "Too many failed verifications"),
            Code::AuthBusy => (S::SERVICE_UNAVAILABLE, "Verification busy"),
            Code::NotFound => (S::NOT_FOUND, "Not found"),
            Code::ConflictVersion => (S::CONFLICT, "Version conflict"),
            Code::ConflictDuplicate => (S::CONFLICT, "Already exists"),
            Code::ConflictIdempotency => (S::CONFLICT, "Idempotency-Key reused"),
            Code::Conflict => (S::CONFLICT, "Conflict"),
            Code::AiDisabled => (S::SERVICE_UNAVAILABLE, "AI disabled"),
            Code::AiBusy => (S::CONFLICT, "Chat busy"),
            Code::AiProvider => (S::BAD_GATEWAY, "AI provider error"),
            Code::AiExecute => (S::BAD_GATEWAY, "Action failed"),
            Code::BundleToken => (S::CONFLICT, "Unknown apply token"),
            Code::UsersLastAdmin => (S::CONFLICT, "Last administrator"),
            Code::UsersEmailInUse => (S::CONFLICT, "E-mail in use"),
            Code::ValidationSize | Code::BundleSize => (S::PAYLOAD_TOO_LARGE, "Body too large"),
            Code::BundleBusy => (S::SERVICE_UNAVAILABLE, "Bundle work busy"),
            Code::SitesBusy => (S::SERVICE_UNAVAILABLE, "Sites busy"),
            Code::Validation(_) => (S::UNPROCESSABLE_ENTITY, "Validation failed"),
            Code::BundleApply => (S::UNPROCESSABLE_ENTITY, "Bundle apply failed"),
            Code::PreconditionIfMatch => (S::PRECONDITION_REQUIRED, "If-Match required"),
            Code::DirectoryUnconfigured => (S::NOT_IMPLEMENTED, "Directory not configured"),
            Code::DirectorySync => (S::BAD_GATEWAY, "Directory sync failed"),
            Code::SecretsNoKey => (S::SERVICE_UNAVAILABLE, "No master key"),
            Code::StorageUnavailable => (S::SERVICE_UNAVAILABLE, "Storage not ready"),
            Code::PipelineStalled => (S::SERVICE_UNAVAILABLE, "Results pipeline stalled"),
            Code::NotifyTestFailed => (S::BAD_GATEWAY, "Channel test failed"),
            Code::CheckFailed => (S::BAD_GATEWAY, "Check failed"),
            Code::IngressSize => (S::PAYLOAD_TOO_LARGE, "Body too large"),
            Code::IngressFormat => (S::UNPROCESSABLE_ENTITY, "Unreadable body"),
            Code::IngressMapping => (S::UNPROCESSABLE_ENTITY, "Mapping failed"),
            Code::IngressRate => (S::TOO_MANY_REQUESTS, "Rate limit exceeded"),
            Code::IngressUnknownSource => (S::NOT_FOUND, "Unknown event source"),
            Code::IngressDisabled => (S::FORBIDDEN, "Event source disabled"),
            Code::IngressAuth => (S::UNAUTHORIZED, "Event source authentication failed"),
            Code::SitesDisabled => (S::FORBIDDEN, "Site disabled"),
            Code::ReportsPdf => (S::NOT_IMPLEMENTED, "PDF rendering unavailable"),
            Code::Internal => (S::INTERNAL_SERVER_ERROR, "Internal error"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub status: StatusCode,
    pub code: Code,
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

impl Problem {
    /// A problem with the status of `code` from the code table.
    pub fn new(code: Code, detail: impl Into<String>) -> Self {
        Self {
            status: code.classify().0,
            code,
            detail: detail.into(),
            internal: None,
            retry_after: None,
        }
    }

    /// `svc:validation/<field>`.
    pub fn validation(field: impl Into<Cow<'static, str>>, detail: impl Into<String>) -> Self {
        Self::new(Code::Validation(field.into()), detail)
    }

    pub fn not_found() -> Self {
        Self::new(Code::NotFound, "")
    }

    /// 500 `svc:internal`; `why` is logged, not sent.
    pub fn internal(why: impl Into<String>) -> Self {
        Self {
            internal: Some(why.into()),
            ..Self::new(Code::Internal, "")
        }
    }

    /// The same problem with a `Retry-After` header.
    pub fn retry_after(self, after: Duration) -> Self {
        Self {
            retry_after: Some(after.as_secs().max(1)),
            ..self
        }
    }

    pub fn title(&self) -> &'static str {
        self.code.classify().1
    }
}

/// What another domain answered through a port: the caller's request did not cause a refusal
/// there (its own domain checks what it asks), so a refusal is an internal failure.
impl From<PortError> for Problem {
    fn from(e: PortError) -> Self {
        match e {
            PortError::Refused(why) => Problem::internal(why),
            PortError::Unavailable(why) => Problem {
                internal: Some(why),
                ..Problem::new(
                    Code::StorageUnavailable,
                    "storage is not available; retry later",
                )
            },
        }
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Problem::not_found(),
            StoreError::Duplicate(what) => {
                Problem::new(Code::ConflictDuplicate, format!("{what} already exists"))
            }
            e @ StoreError::VersionConflict { .. } => {
                Problem::new(Code::ConflictVersion, e.to_string())
            }
            StoreError::EmailInUse => {
                Problem::new(Code::UsersEmailInUse, "the e-mail address is in use")
            }
            StoreError::Conflict(why) => Problem::new(Code::Conflict, why),
            StoreError::Unavailable(why) => Problem {
                internal: Some(why),
                ..Problem::new(
                    Code::StorageUnavailable,
                    "storage is not available; retry later",
                )
            },
            StoreError::Superseded => Problem {
                internal: Some(StoreError::Superseded.to_string()),
                ..Problem::new(
                    Code::StorageUnavailable,
                    "storage is not available; retry later",
                )
            },
            e @ (StoreError::Locked
            | StoreError::Corrupt(_)
            | StoreError::Migration { .. }
            | StoreError::Io(_)
            | StoreError::Invalid(_)
            | StoreError::Internal(_)) => Problem::internal(e.to_string()),
        }
    }
}

impl From<AuthError> for Problem {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Invalid(why) => Problem::new(Code::AuthInvalid, why),
            AuthError::Validation { field, detail } => Problem::validation(field, detail),
            AuthError::Forbidden(why) => Problem::new(Code::AuthForbidden, why),
            AuthError::NotFound => Problem::not_found(),
            AuthError::SessionRequired(why) => Problem::new(Code::AuthRequired, why),
            AuthError::BadPassword => {
                Problem::new(Code::AuthBadPassword, "the old password is wrong")
            }
            e @ AuthError::Throttled(after) => {
                Problem::new(Code::AuthThrottled, e.to_string()).retry_after(after)
            }
            e @ AuthError::Busy => {
                Problem::new(Code::AuthBusy, e.to_string()).retry_after(Duration::from_secs(1))
            }
            AuthError::Directory(why) => Problem::new(Code::DirectorySync, why),
            AuthError::Internal(why) => Problem::internal(why),
            e @ AuthError::LastAdmin => Problem::new(Code::UsersLastAdmin, e.to_string()),
            AuthError::Claimed(why) => Problem::new(Code::ConflictDuplicate, why),
            e @ AuthError::SetupClosed => Problem::new(Code::Conflict, e.to_string()),
            AuthError::Store(s) => s.into(),
        }
    }
}

impl From<InventoryError> for Problem {
    fn from(e: InventoryError) -> Self {
        match e {
            InventoryError::Invalid(i) => Problem::validation(i.field, i.detail),
            InventoryError::NotFound => Problem::not_found(),
            InventoryError::Store(s) => s.into(),
            InventoryError::Token => Problem::new(
                Code::BundleToken,
                "the apply token is unknown, expired or of another tenant, or what it planned has changed since",
            ),
            InventoryError::Apply(why) => Problem::new(Code::BundleApply, why),
            InventoryError::Taken(why) => Problem::new(Code::ConflictDuplicate, why),
            e @ InventoryError::Busy => {
                Problem::new(Code::BundleBusy, e.to_string()).retry_after(Duration::from_secs(5))
            }
            InventoryError::NoKey => Problem::new(
                Code::SecretsNoKey,
                "no usable master key; see secrets.masterKeyFile",
            ),
            InventoryError::Forbidden(permission) => Problem::new(Code::AuthForbidden, permission),
        }
    }
}

impl From<AiError> for Problem {
    fn from(e: AiError) -> Self {
        match e {
            AiError::Disabled(why) => Problem::new(Code::AiDisabled, why),
            e @ AiError::Shed(_) => {
                Problem::new(Code::AiDisabled, e.to_string()).retry_after(Duration::from_secs(5))
            }
            e @ AiError::Busy => Problem::new(Code::AiBusy, e.to_string()),
            AiError::Provider(why) => Problem::new(Code::AiProvider, why),
            AiError::Execute(why) => Problem::new(Code::AiExecute, why),
            AiError::Conflict(why) => Problem::new(Code::Conflict, why),
            AiError::NotFound => {
                Problem::new(Code::NotFound, "no such AI record in the acting tenant")
            }
            AiError::Forbidden(permission) => Problem::new(Code::AuthForbidden, permission),
            AiError::Invalid(i) => Problem::validation(i.field, i.detail),
            AiError::NoKey => Problem::new(
                Code::SecretsNoKey,
                "no usable master key to seal or open the connection's API key; see secrets.masterKeyFile",
            ),
            AiError::Store(s) => s.into(),
        }
    }
}

impl From<AlertError> for Problem {
    fn from(e: AlertError) -> Self {
        match e {
            AlertError::Invalid(i) => Problem::validation(i.field, i.detail),
            AlertError::Transition(_) | AlertError::NotFound => Problem::not_found(),
            AlertError::Forbidden(permission) => Problem::new(Code::AuthForbidden, permission),
            AlertError::Store(s) => s.into(),
        }
    }
}

impl From<ReportError> for Problem {
    fn from(e: ReportError) -> Self {
        match e {
            ReportError::Invalid(i) => Problem::validation(i.field, i.detail),
            ReportError::Pdf => Problem::new(Code::ReportsPdf, e.to_string()),
            ReportError::Forbidden(permission) => Problem::new(Code::AuthForbidden, permission),
            ReportError::Notify(e) => e.into(),
            ReportError::Store(s) => s.into(),
        }
    }
}

impl From<NotifyError> for Problem {
    fn from(e: NotifyError) -> Self {
        match e {
            NotifyError::Invalid(i) => Problem::validation(i.field, i.detail),
            NotifyError::TestFailed(why) => Problem::new(Code::NotifyTestFailed, why),
            NotifyError::NotFound => Problem::not_found(),
            NotifyError::Store(s) => s.into(),
        }
    }
}

impl From<IngestError> for Problem {
    fn from(e: IngestError) -> Self {
        let detail = e.to_string();
        match e {
            IngestError::UnknownSource(_) => Problem::new(Code::IngressUnknownSource, detail),
            IngestError::Disabled(_) => Problem::new(Code::IngressDisabled, detail),
            IngestError::Auth(_) => Problem::new(Code::IngressAuth, detail),
            IngestError::Rate(_) => Problem {
                retry_after: Some(5),
                ..Problem::new(Code::IngressRate, detail)
            },
            IngestError::Format(_) => Problem::new(Code::IngressFormat, detail),
            IngestError::Mapping(_) => Problem::new(Code::IngressMapping, detail),
            IngestError::Store(s) => s.into(),
        }
    }
}

impl From<SiteError> for Problem {
    fn from(e: SiteError) -> Self {
        let detail = e.to_string();
        match e {
            SiteError::NotFound => Problem::new(Code::NotFound, detail),
            SiteError::Disabled(_) => Problem::new(Code::SitesDisabled, detail),
            SiteError::OtherSite(_) => Problem::new(Code::AuthForbidden, detail),
            SiteError::Invalid(i) => Problem::validation(i.field, i.detail),
            SiteError::Busy => {
                Problem::new(Code::SitesBusy, detail).retry_after(Duration::from_secs(2))
            }
            SiteError::Alerting(e) => e.into(),
            SiteError::Store(s) => s.into(),
        }
    }
}

impl From<HeartbeatError> for Problem {
    fn from(e: HeartbeatError) -> Self {
        match e {
            HeartbeatError::Invalid(i) => Problem::validation(i.field, i.detail),
            HeartbeatError::NotFound => Problem::not_found(),
            HeartbeatError::Store(s) => s.into(),
        }
    }
}

impl From<ResultError> for Problem {
    fn from(e: ResultError) -> Self {
        match e {
            ResultError::Invalid(why) => Problem::validation("body", why),
            ResultError::Stalled(why) => Problem::new(Code::PipelineStalled, why),
            ResultError::Store(s) => s.into(),
        }
    }
}

impl From<BusinessError> for Problem {
    fn from(e: BusinessError) -> Self {
        match e {
            BusinessError::NotFound => Problem::not_found(),
            BusinessError::Store(s) => s.into(),
        }
    }
}

impl From<MetricError> for Problem {
    fn from(e: MetricError) -> Self {
        match e {
            MetricError::Invalid { field, message } => Problem::validation(field, message),
            MetricError::NotFound => Problem::not_found(),
            MetricError::Store(s) => s.into(),
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
    fn every_code_parses_back_and_has_a_page_text() {
        let mut all = Code::FIXED.to_vec();
        all.extend([Code::Internal, Code::Validation("spec".into())]);
        for code in all {
            assert_eq!(Code::parse(&code.as_str()), Some(code.clone()));
            assert!(!code.explain().is_empty());
        }
        assert_eq!(Code::parse("svc:validation/"), None);
        assert_eq!(Code::parse("svc:nothing"), None);
    }

    #[test]
    fn code_table() {
        assert_eq!(
            Problem::validation("name", "x").status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            Problem::validation("name", "x").code.as_str(),
            "svc:validation/name"
        );
        assert_eq!(
            Problem::new(Code::PreconditionIfMatch, "").status.as_u16(),
            428
        );
        assert_eq!(Problem::new(Code::ValidationSize, "").status.as_u16(), 413);
        assert_eq!(Problem::new(Code::AuthThrottled, "").status.as_u16(), 429);
        let p: Problem = StoreError::VersionConflict {
            stored: 4,
            expected: 3,
        }
        .into();
        assert_eq!(p.status.as_u16(), 409);
        assert!(p.detail.contains('4') && p.detail.contains('3'));
        let p: Problem = StoreError::Corrupt("bad page".into()).into();
        assert_eq!((p.status.as_u16(), p.detail.as_str()), (500, ""));
        assert!(p.internal.unwrap().contains("bad page"));
        let p: Problem = AuthError::Throttled(Duration::from_secs(5)).into();
        assert_eq!((p.status.as_u16(), p.retry_after), (429, Some(5)));
    }
}
