//! The seam through which notification and ingress act on alerts without importing
//! `alerting`: a key pressed on a call, a reply by SMS, a page from a panel. `app` hands them
//! the alerting service as `AlertActions`.

use super::PortFuture;
use crate::model::alert::{Alert, ManualAlarm, ShelveRequest};
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertAction {
    Ack,
    Resolve,
}

pub trait AlertActions: Send + Sync + 'static {
    /// Acknowledges or resolves alert `id` of `tenant` for `by`, `via` a path (`link`, `sms`,
    /// `dtmf`, `ivr`) the lifecycle event names; `None` when the alert does not exist or the
    /// action no longer applies (an ack of an alert that is not open).
    fn act(
        &self,
        tenant: Uuid,
        id: Uuid,
        action: AlertAction,
        by: String,
        via: &'static str,
    ) -> PortFuture<'_, Option<Alert>>;

    /// Shelves alert `id` of `tenant` for `by` (an action taken at a federation main); `None`
    /// when the alert does not exist, cannot be shelved, or the shelf is not one this instance
    /// takes (longer than its `maxShelve`).
    fn shelve(
        &self,
        tenant: Uuid,
        id: Uuid,
        request: ShelveRequest,
        by: String,
    ) -> PortFuture<'_, Option<Alert>>;

    /// Raises a manual alarm for `by`, `via` a path (`sms`, `ivr`).
    fn alarm(
        &self,
        tenant: Uuid,
        alarm: ManualAlarm,
        by: String,
        via: &'static str,
    ) -> PortFuture<'_, Alert>;

    /// The active alert of `tenant` whose short id (the last 8 hex digits of its id, as
    /// messages show it) is `short`.
    fn by_short_id(&self, tenant: Uuid, short: String) -> PortFuture<'_, Option<Alert>>;
}
