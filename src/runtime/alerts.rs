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

    /// The active alert of `tenant` holding `dedup_key`: one a watcher raised before a
    /// restart, so it can resolve what it no longer remembers raising.
    fn by_dedup_key(&self, tenant: Uuid, dedup_key: String) -> PortFuture<'_, Option<Alert>>;

    /// The active alert of `tenant` whose short id (the last 8 hex digits of its id, as
    /// messages show it) is `short`.
    fn by_short_id(&self, tenant: Uuid, short: String) -> PortFuture<'_, Option<Alert>>;
}

/// An alert a watcher keeps open while its condition holds (a budget used up, a card wearing
/// out), known by its dedup key. What it raised before a restart is looked up at its first
/// look, so an alert whose condition cleared meanwhile is still resolved.
pub struct HeldAlert {
    dedup_key: String,
    /// The open alert; `None` inside: none is open. `None`: not looked up since the start.
    open: Option<Option<Uuid>>,
}

impl HeldAlert {
    pub fn new(dedup_key: impl Into<String>) -> Self {
        Self {
            dedup_key: dedup_key.into(),
            open: None,
        }
    }

    /// Raises the alarm `raise` makes (its dedup key set to this one's) when `holds` and none is
    /// open, and resolves the open one when not, for `by` `via` a path.
    pub async fn hold(
        &mut self,
        alerts: &dyn AlertActions,
        tenant: Uuid,
        holds: bool,
        raise: impl FnOnce() -> ManualAlarm,
        by: &str,
        via: &'static str,
    ) -> Result<(), super::PortError> {
        let open = match self.open {
            Some(open) => open,
            None => {
                let found = alerts.by_dedup_key(tenant, self.dedup_key.clone()).await?;
                *self.open.insert(found.map(|a| a.id))
            }
        };
        match (holds, open) {
            (true, None) => {
                let alarm = ManualAlarm {
                    dedup_key: Some(self.dedup_key.clone()),
                    ..raise()
                };
                let alert = alerts.alarm(tenant, alarm, by.into(), via).await?;
                self.open = Some(Some(alert.id));
            }
            (false, Some(id)) => {
                alerts
                    .act(tenant, id, AlertAction::Resolve, by.into(), via)
                    .await?;
                self.open = Some(None);
            }
            _ => {}
        }
        Ok(())
    }
}
