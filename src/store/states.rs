//! Live check states by tenant and object id.

use super::codec::{decode, encode, tenant_values};
use super::keys::scoped;
use super::tables::STATES;
use super::{Store, StoreError};
use crate::model::Timestamp;
use crate::model::state::{CheckState, Observation, Transition};
use redb::ReadableTable;
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// The state machine the store applies inside its transaction.
pub type Step =
    fn(Uuid, Option<&CheckState>, &Observation, Timestamp) -> (CheckState, Option<Transition>);

impl Store {
    /// Applies observations (tenant, object id, observation) in order in one transaction;
    /// returns each new state and its transition.
    pub async fn apply_observations(
        self: &Arc<Self>,
        items: Vec<(Uuid, Uuid, Observation)>,
        now: Timestamp,
        step: Step,
    ) -> Result<Vec<(CheckState, Option<Transition>)>, StoreError> {
        self.write(move |tx| {
            let mut t = tx.open_table(STATES).map_err(StoreError::from_redb)?;
            let mut out = Vec::with_capacity(items.len());
            for (tenant, id, obs) in items {
                let key = scoped(tenant, id.as_bytes());
                let prev: Option<CheckState> = t
                    .get(key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .map(|v| decode(v.value()))
                    .transpose()?;
                let (next, transition) = step(id, prev.as_ref(), &obs, now);
                t.insert(key.as_slice(), encode(&next)?.as_slice())
                    .map_err(StoreError::from_redb)?;
                out.push((next, transition));
            }
            Ok(out)
        })
        .await
    }

    /// The live states of the given objects (absent: no result yet).
    pub async fn states(
        self: &Arc<Self>,
        tenant: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<HashMap<Uuid, CheckState>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(STATES).map_err(StoreError::from_redb)?;
            let mut out = HashMap::new();
            for id in ids {
                if let Some(v) = t
                    .get(scoped(tenant, id.as_bytes()).as_slice())
                    .map_err(StoreError::from_redb)?
                {
                    out.insert(id, decode(v.value())?);
                }
            }
            Ok(out)
        })
        .await
    }

    /// Every live state of a tenant.
    pub async fn all_states(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<CheckState>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(STATES).map_err(StoreError::from_redb)?;
            tenant_values(&t, tenant)
        })
        .await
    }
}
