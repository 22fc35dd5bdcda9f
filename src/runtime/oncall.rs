//! The seam through which reports read who is on call without importing `notify`: `app`
//! hands them the notifier as `OnCall`.

use std::future::Future;
use std::pin::Pin;

/// Per schedule: its name and the names of the contacts on call now.
pub type OnCallRoster = Vec<(String, Vec<String>)>;

pub type OnCallFuture<'a> = Pin<Box<dyn Future<Output = Result<OnCallRoster, String>> + Send + 'a>>;

pub trait OnCall: Send + Sync + 'static {
    fn on_call_now(&self, tenant: uuid::Uuid) -> OnCallFuture<'_>;
}
