//! Incidents by tenant and id; attaching alerts sets their `incidentId` in the same
//! transaction.

use super::codec::{decode, encode, tenant_value, tenant_values_newest};
use super::keys::scoped;
use super::tables::{ALERTS, INCIDENTS};
use super::{Store, StoreError};
use crate::model::alert::Alert;
use crate::model::audit::AuditDraft;
use crate::model::incident::Incident;
use redb::{ReadableTable, WriteTransaction};
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn load(
    tx: &WriteTransaction,
    tenant: Uuid,
    id: Uuid,
) -> Result<Option<Incident>, StoreError> {
    tenant_value(
        &tx.open_table(INCIDENTS).map_err(StoreError::from_redb)?,
        tenant,
        id,
    )
}

/// Saves the incident and points each of its alerts at it; an alert id the tenant does not
/// have is refused.
pub(super) fn save(tx: &WriteTransaction, i: &Incident) -> Result<(), StoreError> {
    attach(tx, i, &i.alert_ids)
}

/// Saves the incident and points the alerts `ids` at it.
pub(super) fn attach(tx: &WriteTransaction, i: &Incident, ids: &[Uuid]) -> Result<(), StoreError> {
    tx.open_table(INCIDENTS)
        .map_err(StoreError::from_redb)?
        .insert(
            scoped(i.tenant_id, i.id.as_bytes()).as_slice(),
            encode(i)?.as_slice(),
        )
        .map_err(StoreError::from_redb)?;
    let mut alerts = tx.open_table(ALERTS).map_err(StoreError::from_redb)?;
    for id in ids {
        let key = scoped(i.tenant_id, id.as_bytes());
        let mut alert: Alert = match alerts.get(key.as_slice()).map_err(StoreError::from_redb)? {
            Some(v) => decode(v.value())?,
            None => return Err(StoreError::Conflict(format!("alert {id} does not exist"))),
        };
        if alert.incident_id != Some(i.id) {
            alert.incident_id = Some(i.id);
            alerts
                .insert(key.as_slice(), encode(&alert)?.as_slice())
                .map_err(StoreError::from_redb)?;
        }
    }
    Ok(())
}

impl Store {
    /// Creates an incident with its audit entry and `incident_update` event.
    pub async fn create_incident(
        self: &Arc<Self>,
        incident: Incident,
        audit: AuditDraft,
    ) -> Result<Incident, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            save(tx, &incident)?;
            let event = incident.update_event("created");
            store.record(tx, [audit.after(&incident)], vec![event])?;
            Ok(incident)
        })
        .await
    }

    /// Changes an incident if `expected` is its stored version.
    pub async fn update_incident(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        expected: u64,
        change: impl FnOnce(&mut Incident) + Send + 'static,
        audit: AuditDraft,
    ) -> Result<Incident, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            let old = load(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
            super::check_version(old.version, expected)?;
            let mut new = old.clone();
            change(&mut new);
            new.version = old.version + 1;
            save(tx, &new)?;
            if new.status == "resolved" && old.status != "resolved" {
                for alert in &new.alert_ids {
                    super::notify::disarm_escalation(tx, *alert)?;
                }
            }
            let event = new.update_event("updated");
            store.record(tx, [audit.before(&old).after(&new)], vec![event])?;
            Ok(new)
        })
        .await
    }

    pub async fn incident(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Incident, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(INCIDENTS).map_err(StoreError::from_redb)?;
            tenant_value(&t, tenant, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    /// Newest first, strictly before `before`; only unresolved ones with `open_only`.
    pub async fn incidents(
        self: &Arc<Self>,
        tenant: Uuid,
        open_only: bool,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Incident>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(INCIDENTS).map_err(StoreError::from_redb)?;
            tenant_values_newest(&t, tenant, before, limit, |i: &Incident| {
                !open_only || i.status != "resolved"
            })
        })
        .await
    }
}
