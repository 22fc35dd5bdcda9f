//! Incidents by tenant and id; attaching alerts sets their `incidentId` in the same
//! transaction, and answers the ids of alerts that are not there.

use super::codec::{decode, encode, tenant_value, tenant_values_newest};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::{ALERTS, INCIDENTS};
use super::{Store, StoreError, Tx};
use crate::model::alert::Alert;
use crate::model::incident::Incident;
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn load(tx: &WriteTx, tenant: Uuid, id: Uuid) -> Result<Option<Incident>, StoreError> {
    tenant_value(&tx.open_table(INCIDENTS)?, tenant, id)
}

/// Saves the incident and points the alerts `ids` at it; answers the ids of those the tenant
/// does not have, which whoever names them decides about.
pub(super) fn attach(tx: &WriteTx, i: &Incident, ids: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
    tx.open_table(INCIDENTS)?.insert(
        scoped(i.tenant_id, i.id.as_bytes()).as_slice(),
        encode(i)?.as_slice(),
    )?;
    let mut alerts = tx.open_table(ALERTS)?;
    let mut missing = Vec::new();
    for id in ids {
        let key = scoped(i.tenant_id, id.as_bytes());
        let found: Option<Alert> = alerts
            .get(key.as_slice())?
            .map(|v| decode(v.value()))
            .transpose()?;
        let Some(mut alert) = found else {
            missing.push(*id);
            continue;
        };
        if alert.incident_id != Some(i.id) {
            alert.incident_id = Some(i.id);
            alerts.insert(key.as_slice(), encode(&alert)?.as_slice())?;
        }
    }
    Ok(missing)
}

impl Tx<'_> {
    /// Saves an incident and points each of its alerts at it; answers the alert ids the tenant
    /// does not have.
    #[must_use = "an incident naming alerts the tenant does not have is the caller's to refuse"]
    pub(crate) fn save_incident(&self, incident: &Incident) -> Result<Vec<Uuid>, StoreError> {
        attach(self, incident, &incident.alert_ids)
    }

    /// The newest unresolved incident `created_by` opened: the one a rule's alerts join.
    pub(crate) fn open_incident_by(
        &self,
        tenant: Uuid,
        created_by: &str,
    ) -> Result<Option<Incident>, StoreError> {
        let t = self.open_table(INCIDENTS)?;
        Ok(tenant_values_newest(&t, tenant, None, 1, |i: &Incident| {
            i.status != "resolved" && i.created_by == created_by
        })?
        .pop())
    }

    /// Stops the escalation chain of an alert (its incident was resolved).
    pub(crate) fn disarm_escalation(&self, alert: Uuid) -> Result<(), StoreError> {
        super::notify::disarm_escalation(self, alert)
    }
}

impl Store {
    pub(crate) async fn incident(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Incident, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(INCIDENTS)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    /// Newest first, strictly before `before`; only unresolved ones with `open_only`.
    pub(crate) async fn incidents(
        self: &Arc<Self>,
        tenant: Uuid,
        open_only: bool,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Incident>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(INCIDENTS)?;
            tenant_values_newest(&t, tenant, before, limit, |i: &Incident| {
                !open_only || i.status != "resolved"
            })
        })
        .await
    }
}
