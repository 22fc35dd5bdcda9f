//! Live check states by tenant and object id, stored as compact rows: fields by position,
//! times in milliseconds, the object id only in the key, and the flap history the wire leaves
//! out.

use super::codec::{decode, encode_positional, tenant_values};
use super::keys::{scoped, tenant_range};
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{DOWNTIMES, OBJECTS, STATES};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::object::Object;
use crate::model::state::{CheckState, StateType};
use crate::model::suppression::{Downtime, LiveStates};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// Written by position (`encode_positional`): no field is skipped, and a new one goes at the
/// end with `#[serde(default)]`. Rows written by name before read the same.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateRow<'a> {
    state: u8,
    state_type: StateType,
    attempt: u32,
    output: Cow<'a, str>,
    #[serde(default)]
    long_output: Cow<'a, str>,
    #[serde(default)]
    perfdata: Cow<'a, str>,
    last_check: i64,
    last_change: i64,
    #[serde(default)]
    last_hard_change: Option<i64>,
    #[serde(default)]
    last_ok: Option<i64>,
    #[serde(default)]
    flapping: bool,
    #[serde(default)]
    flap_pct: f64,
    #[serde(default)]
    flap_history: u32,
    #[serde(default)]
    downtime_depth: u32,
    #[serde(default)]
    acked_by: Option<Cow<'a, str>>,
}

fn encode_state(s: &CheckState) -> Result<Vec<u8>, StoreError> {
    encode_positional(&row_of(s))
}

fn row_of(s: &CheckState) -> StateRow<'_> {
    StateRow {
        state: s.state,
        state_type: s.state_type,
        attempt: s.attempt,
        output: Cow::Borrowed(&s.output),
        long_output: Cow::Borrowed(&s.long_output),
        perfdata: Cow::Borrowed(&s.perfdata),
        last_check: s.last_check.as_millis(),
        last_change: s.last_change.as_millis(),
        last_hard_change: s.last_hard_change.map(|t| t.as_millis()),
        last_ok: s.last_ok.map(|t| t.as_millis()),
        flapping: s.flapping,
        flap_pct: s.flap_pct,
        flap_history: s.flap_history,
        downtime_depth: s.downtime_depth,
        acked_by: s.acked_by.as_deref().map(Cow::Borrowed),
    }
}

fn decode_state(object_id: Uuid, bytes: &[u8]) -> Result<CheckState, StoreError> {
    let r: StateRow = decode(bytes)?;
    let time = |ms: i64| {
        Timestamp::from_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("state time {ms} out of range")))
    };
    Ok(CheckState {
        object_id,
        state: r.state,
        state_type: r.state_type,
        attempt: r.attempt,
        output: r.output.into_owned(),
        long_output: r.long_output.into_owned(),
        perfdata: r.perfdata.into_owned(),
        last_check: time(r.last_check)?,
        last_change: time(r.last_change)?,
        last_hard_change: r.last_hard_change.map(time).transpose()?,
        last_ok: r.last_ok.map(time).transpose()?,
        flapping: r.flapping,
        flap_pct: r.flap_pct,
        flap_history: r.flap_history,
        downtime_depth: r.downtime_depth,
        acked_by: r.acked_by.map(Cow::into_owned),
    })
}

/// The object id of a state key (tenant, then object).
fn object_of(key: &[u8]) -> Result<Uuid, StoreError> {
    key.get(16..)
        .and_then(|b| Uuid::from_slice(b).ok())
        .ok_or_else(|| StoreError::Corrupt("state key is not tenant + object".into()))
}

/// Migration: rewrites the rows of the first state layout (the wire form, times as text, no
/// flap history) as compact rows.
pub(super) fn compact_rows(tx: &WriteTx) -> Result<(), StoreError> {
    let mut t = tx.open_table(STATES)?;
    let mut rows = Vec::new();
    for row in t.iter()? {
        let (k, v) = row?;
        let state: CheckState = decode(v.value())?;
        rows.push((k.value().to_vec(), encode_state(&state)?));
    }
    for (k, v) in rows {
        t.insert(k.as_slice(), v.as_slice())?;
    }
    Ok(())
}

/// Whether an object is in a hard non-OK (non-UP) state.
/// An object's state number while it is hard (`None`: soft, or no result yet).
pub(super) fn hard_state(
    tx: &WriteTx,
    tenant: Uuid,
    object: Uuid,
) -> Result<Option<u8>, StoreError> {
    let t = tx.open_table(STATES)?;
    let Some(v) = t.get(scoped(tenant, object.as_bytes()).as_slice())? else {
        return Ok(None);
    };
    let s = decode_state(object, v.value())?;
    Ok((s.state_type == StateType::Hard).then_some(s.state))
}

pub(super) fn hard_problem(tx: &WriteTx, tenant: Uuid, object: Uuid) -> Result<bool, StoreError> {
    Ok(hard_state(tx, tenant, object)?.is_some_and(|s| s != 0))
}

/// Sets who acknowledged the problem of an object's live state (`ackedBy`; `None` clears it);
/// the state machine clears it on recovery.
fn set_acked_by(
    tx: &WriteTx,
    tenant: Uuid,
    object: Uuid,
    by: Option<&str>,
) -> Result<(), StoreError> {
    let mut t = tx.open_table(STATES)?;
    let key = scoped(tenant, object.as_bytes());
    let Some(mut state) = t
        .get(key.as_slice())?
        .map(|v| decode_state(object, v.value()))
        .transpose()?
    else {
        return Ok(());
    };
    if state.acked_by.as_deref() == by {
        return Ok(());
    }
    state.acked_by = by.map(str::to_string);
    t.insert(key.as_slice(), encode_state(&state)?.as_slice())?;
    Ok(())
}

impl Tx<'_> {
    /// Sets who acknowledged the problem of an object's live state (`ackedBy`; `None` clears
    /// it), if the object has one.
    pub(crate) fn set_acked_by(
        &self,
        tenant: Uuid,
        object: Uuid,
        by: Option<&str>,
    ) -> Result<(), StoreError> {
        set_acked_by(self, tenant, object, by)
    }
}

impl Tx<'_> {
    /// The stored live states of (tenant, object) pairs, in one read (one round trip on
    /// PostgreSQL); `None` where an object has no result yet.
    pub(crate) fn live_states(
        &self,
        objects: &[(Uuid, Uuid)],
    ) -> Result<Vec<Option<CheckState>>, StoreError> {
        let t = self.open_table(STATES)?;
        let keys: Vec<Vec<u8>> = objects
            .iter()
            .map(|(tenant, id)| scoped(*tenant, id.as_bytes()))
            .collect();
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        objects
            .iter()
            .zip(t.get_each(&key_refs)?)
            .map(|((_, id), v)| v.map(|v| decode_state(*id, v.value())).transpose())
            .collect()
    }

    /// Saves live states of a tenant's objects, in order (a later state of the same object
    /// wins).
    pub(crate) fn save_live_states<'s>(
        &self,
        states: impl IntoIterator<Item = (Uuid, &'s CheckState)>,
    ) -> Result<(), StoreError> {
        let mut t = self.open_table(STATES)?;
        for (tenant, state) in states {
            let key = scoped(tenant, state.object_id.as_bytes());
            t.insert(key.as_slice(), encode_state(state)?.as_slice())?;
        }
        Ok(())
    }
}

impl Store {
    /// The live states of the given objects (absent: no result yet), with what their downtime
    /// depth is worked out from (`LiveStates::covered`).
    pub(crate) async fn states(
        self: &Arc<Self>,
        tenant: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<LiveStates, StoreError> {
        let at = self.clock.now();
        self.read(move |tx| {
            let t = tx.open_table(STATES)?;
            let mut states = Vec::new();
            for id in ids {
                if let Some(v) = t.get(scoped(tenant, id.as_bytes()).as_slice())? {
                    states.push(decode_state(id, v.value())?);
                }
            }
            with_downtimes(tx, tenant, states, at)
        })
        .await
    }

    /// Every live state of a tenant, as `states` reads them.
    pub(crate) async fn all_states(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<LiveStates, StoreError> {
        let at = self.clock.now();
        self.read(move |tx| {
            let t = tx.open_table(STATES)?;
            let (lo, hi) = tenant_range(tenant);
            let mut states = Vec::new();
            for row in t.range(lo.as_slice()..hi.as_slice())? {
                let (k, v) = row?;
                states.push(decode_state(object_of(k.value())?, v.value())?);
            }
            with_downtimes(tx, tenant, states, at)
        })
        .await
    }
}

/// The states with the tenant's downtimes and, when it has any, their objects' hosts and own
/// labels, from the same snapshot.
fn with_downtimes(
    tx: &ReadTx,
    tenant: Uuid,
    states: Vec<CheckState>,
    at: Timestamp,
) -> Result<LiveStates, StoreError> {
    let downtimes = tenant_values::<Downtime, _>(&tx.open_table(DOWNTIMES)?, tenant)?;
    let mut placement = HashMap::new();
    if !downtimes.is_empty() {
        let objects = tx.open_table(OBJECTS)?;
        for s in &states {
            if let Some(row) = objects.get(scoped(tenant, s.object_id.as_bytes()).as_slice())? {
                let o: Object = decode(row.value())?;
                placement.insert(o.id, (o.host_id, o.labels));
            }
        }
    }
    Ok(LiveStates {
        states,
        downtimes,
        placement,
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::super::codec::encode;
    use super::*;
    use redb::{Database, ReadableDatabase};

    /// What is saved is what is read back, the flap history (not on the wire) with it, and
    /// a later state of the same object in one save wins.
    #[tokio::test]
    async fn live_states_are_saved_and_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-03-01T08:00:00.123Z".parse().unwrap();
        let clock = Arc::new(crate::runtime::clock::TestClock::new(now));
        let store = Store::open(dir.path(), clock).unwrap();
        let (tenant, object) = (Uuid::from_u128(2), Uuid::from_u128(3));
        let mut first = soft_state();
        first.flap_history = 0b01;
        let mut last = soft_state();
        last.flap_history = 0b10;
        let saved = last.clone();
        let read = store
            .write(move |tx| {
                tx.unrecorded("live states without a transition");
                tx.save_live_states([(tenant, &first), (tenant, &saved)])?;
                tx.live_states(&[(tenant, object), (tenant, Uuid::from_u128(9))])
            })
            .await
            .unwrap();
        assert_eq!(read, [Some(last.clone()), None]);
        let stored = store.states(tenant, vec![object]).await.unwrap();
        assert_eq!(stored.states, [last.clone()]);
        assert!(stored.downtimes.is_empty() && stored.placement.is_empty());
        assert_eq!(store.all_states(tenant).await.unwrap().states, [last]);
    }

    /// A soft state with some fields empty, which rows written by name left out.
    fn soft_state() -> CheckState {
        let at: Timestamp = "2026-03-01T08:00:00.5Z".parse().unwrap();
        CheckState {
            object_id: Uuid::from_u128(3),
            state: 2,
            state_type: StateType::Soft,
            attempt: 2,
            output: "CRIT".into(),
            long_output: "more".into(),
            perfdata: String::new(),
            last_check: at,
            last_change: at,
            last_hard_change: None,
            last_ok: Some(at),
            flapping: false,
            flap_pct: 0.0,
            flap_history: 0,
            downtime_depth: 0,
            acked_by: Some("ops".into()),
        }
    }

    /// A row written by position reads as the same state as one written by name (every row
    /// before positions, which left out empty fields), in well under the room.
    #[test]
    fn rows_by_position_and_by_name_read_alike() {
        let state = soft_state();
        let by_position = encode_state(&state).unwrap();
        let by_name = encode(&row_of(&state)).unwrap();
        let mut skipped: serde_json::Map<String, serde_json::Value> = decode(&by_name).unwrap();
        skipped.remove("perfdata");
        skipped.remove("lastHardChange");
        let by_name_skipping_empty = encode(&skipped).unwrap();
        for row in [&by_position, &by_name, &by_name_skipping_empty] {
            assert_eq!(decode_state(state.object_id, row).unwrap(), state);
        }
        assert!(
            by_position.len() * 2 < by_name_skipping_empty.len(),
            "{} bytes by position, {} by name",
            by_position.len(),
            by_name_skipping_empty.len()
        );
    }

    #[test]
    fn rows_of_the_first_layout_are_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("s.redb")).unwrap();
        let old = soft_state();
        let key = scoped(Uuid::from_u128(2), old.object_id.as_bytes());
        let tx = WriteTx::from_redb(db.begin_write().unwrap());
        tx.open_table(STATES)
            .unwrap()
            .insert(key.as_slice(), encode(&old).unwrap().as_slice())
            .unwrap();
        compact_rows(&tx).unwrap();
        tx.commit().unwrap();
        let tx = db.begin_read().unwrap();
        let t = tx.open_table(STATES).unwrap();
        let row = t.get(key.as_slice()).unwrap().unwrap();
        assert_eq!(decode_state(old.object_id, row.value()).unwrap(), old);
        assert!(row.value().len() < encode(&old).unwrap().len());
    }
}
