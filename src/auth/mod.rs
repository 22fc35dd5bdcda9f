//! Identity and access: token secrets and passwords (argon2id on a bounded pool), permissions
//! and built-in roles, principals, tenants and the audit log's domain side.

mod account;
pub mod crypto;
pub mod directory;
pub mod jws;
pub mod oidc;
pub mod permissions;
mod principal;
pub mod push;
pub mod ratelimit;
mod service;
pub mod sessions;
pub mod sso;
mod tokens;
pub mod users;

pub use crypto::CryptoPolicy;
pub use permissions::Permissions;
pub use principal::Principal;
pub use service::{Auth, LastUsedWorker};
pub use sessions::{NewSession, SeedSettings, SessionPurgeWorker};

use crate::store::StoreError;

/// Domain errors of identity and access; `api` maps them to problem documents.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A credential was presented but is not valid; the text says why.
    #[error("{0}")]
    Invalid(String),
    #[error("{detail}")]
    Validation { field: &'static str, detail: String },
    /// The caller lacks this permission.
    #[error("{0}")]
    Forbidden(String),
    #[error("not found")]
    NotFound,
    /// Needs a signed-in user, not a token.
    #[error("{0}")]
    SessionRequired(String),
    #[error("the old password is wrong")]
    BadPassword,
    /// Too many failed token verifications from this client address; try again after this long.
    #[error("too many failed token verifications from this address")]
    Throttled(std::time::Duration),
    /// The hashing pool's queue is full: answered at once instead of queueing.
    #[error("credential verification is busy; retry shortly")]
    Busy,
    /// The LDAP directory could not be reached or read; the text says why.
    #[error("{0}")]
    Directory(String),
    /// The service could not do what is its own part (no randomness for a key).
    #[error("{0}")]
    Internal(String),
    /// The change would leave the tenant without an enabled administrator.
    #[error("the change would leave no enabled administrator")]
    LastAdmin,
    /// An e-mail domain another tenant claims or holds addresses at; the text says which.
    #[error("{0}")]
    Claimed(String),
    /// First-run setup was completed meanwhile (a racing second request).
    #[error("setup already completed")]
    SetupClosed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl crate::store::TxAbort for AuthError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            AuthError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl AuthError {
    pub fn validation(field: &'static str, detail: impl Into<String>) -> Self {
        AuthError::Validation {
            field,
            detail: detail.into(),
        }
    }
}
