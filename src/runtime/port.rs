//! What a port's call answers: the future every port method returns, and its error in terms a
//! caller in another domain can act on without knowing the implementing domain's error type.

use std::future::Future;
use std::pin::Pin;

pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, PortError>> + Send + 'a>>;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// The implementing domain refused the request as asked (invalid, not allowed, in
    /// conflict, naming what does not exist): asked again unchanged, it fails again.
    #[error("{0}")]
    Refused(String),
    /// The implementing domain could not answer now (its storage failed, it is at its limit):
    /// the same request may succeed later.
    #[error("{0}")]
    Unavailable(String),
}

impl PortError {
    pub fn refused(why: impl std::fmt::Display) -> Self {
        PortError::Refused(why.to_string())
    }

    pub fn unavailable(why: impl std::fmt::Display) -> Self {
        PortError::Unavailable(why.to_string())
    }
}
