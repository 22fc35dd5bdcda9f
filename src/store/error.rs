//! Storage errors; they know nothing of HTTP (the API maps them).

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The disk failed or is full; the store is offline until it has been reopened.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("the store is locked by another process (is the server running?)")]
    Locked,
    /// Another process served the database while this one was cut off from it: this one's
    /// in-memory state is stale, so it must not serve again (it exits and starts afresh).
    #[error("another process took over the database while this one was cut off from it")]
    Superseded,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("schema migration {version} ({name}) failed: {reason}")]
    Migration {
        version: u32,
        name: &'static str,
        reason: String,
    },
    #[error("not found")]
    NotFound,
    #[error("{0} already exists")]
    Duplicate(String),
    #[error("stored version is {stored}, If-Match expected {expected}")]
    VersionConflict { stored: u64, expected: u64 },
    #[error("the e-mail address is in use")]
    EmailInUse,
    #[error("{0}")]
    Conflict(String),
    #[error("I/O error: {0}")]
    Io(String),
    /// Input the store refuses outside the API (a backup archive to restore).
    #[error("{0}")]
    Invalid(String),
    #[error("internal storage error: {0}")]
    Internal(String),
}

impl StoreError {
    /// A refusal of what was asked (it names what does not exist, clashes or is malformed),
    /// as against a failure of the store.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            StoreError::NotFound
                | StoreError::Duplicate(_)
                | StoreError::VersionConflict { .. }
                | StoreError::EmailInUse
                | StoreError::Conflict(_)
                | StoreError::Invalid(_)
        )
    }

    pub(super) fn from_redb(e: impl Into<redb::Error>) -> Self {
        match e.into() {
            redb::Error::PreviousIo => StoreError::Unavailable("a previous I/O error".into()),
            redb::Error::Io(io) => StoreError::Unavailable(io.to_string()),
            redb::Error::DatabaseAlreadyOpen => StoreError::Locked,
            redb::Error::Corrupted(msg) => StoreError::Corrupt(msg),
            other => StoreError::Internal(other.to_string()),
        }
    }

    pub(super) fn from_open(e: redb::DatabaseError) -> Self {
        Self::from_redb(e)
    }
}

impl From<StoreError> for crate::runtime::PortError {
    fn from(e: StoreError) -> Self {
        if e.is_refusal() {
            crate::runtime::PortError::refused(e)
        } else {
            crate::runtime::PortError::unavailable(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::PortError;

    #[test]
    fn a_port_caller_tells_a_refusal_from_a_failure() {
        for refusal in [
            StoreError::NotFound,
            StoreError::Duplicate("x".into()),
            StoreError::VersionConflict {
                stored: 2,
                expected: 1,
            },
            StoreError::Conflict("taken".into()),
        ] {
            assert!(matches!(PortError::from(refusal), PortError::Refused(_)));
        }
        for failure in [
            StoreError::Unavailable("disk".into()),
            StoreError::Superseded,
            StoreError::Corrupt("row".into()),
            StoreError::Internal("bug".into()),
        ] {
            assert!(matches!(
                PortError::from(failure),
                PortError::Unavailable(_)
            ));
        }
    }
}
