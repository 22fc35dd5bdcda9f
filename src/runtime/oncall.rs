//! The seam through which reports read who is on call without importing `notify`: `app`
//! hands them the notifier as `OnCall`.

use super::PortFuture;

/// Per schedule: its name and the names of the contacts on call now.
pub type OnCallRoster = Vec<(String, Vec<String>)>;

pub trait OnCall: Send + Sync + 'static {
    fn on_call_now(&self, tenant: uuid::Uuid) -> PortFuture<'_, OnCallRoster>;
}
