//! The event journal (transactional outbox): a mutation records its events in the same
//! transaction as the change that causes them, so a committed cause always has its events.
//! A transaction's events are one journal row (each event's encoded row, length-prefixed): one
//! sequential write however many events a group commit carries, and one row to forget. The
//! event filer copies them into the month files (where storing one again is a no-op: rows are
//! keyed by their id) and then forgets the journal row.

use super::codec::{decode, encode};
use super::tables::EVENT_JOURNAL;
use super::{Store, StoreError};
use crate::model::audit::AuditDraft;
use crate::model::event::{Event, Journaled};
use redb::{ReadableTable, WriteTransaction};
use std::collections::HashSet;
use std::sync::Arc;

/// What a mutation writes beside its change, in the same transaction: its audit entry and its
/// events (stamped by the caller).
pub struct Record {
    pub audit: AuditDraft,
    pub events: Vec<Arc<Event>>,
}

/// Records `events` in `tx` as one journal row, after every row journaled before; returns them
/// with that row's sequence number.
pub(super) fn journal(
    tx: &WriteTransaction,
    events: Vec<Arc<Event>>,
) -> Result<Vec<Journaled>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut t = tx
        .open_table(EVENT_JOURNAL)
        .map_err(StoreError::from_redb)?;
    let seq = t
        .last()
        .map_err(StoreError::from_redb)?
        .map_or(0, |(k, _)| k.value() + 1);
    let mut out = Vec::with_capacity(events.len());
    let mut packed = Vec::new();
    for event in events {
        let row = encode(&*event)?;
        let len = u32::try_from(row.len())
            .map_err(|_| StoreError::Internal("event row over 4 GiB".into()))?;
        packed.extend_from_slice(&len.to_be_bytes());
        packed.extend_from_slice(&row);
        out.push(Journaled { seq, event, row });
    }
    t.insert(seq, packed.as_slice())
        .map_err(StoreError::from_redb)?;
    Ok(out)
}

/// The events of one journal row.
fn unpack(seq: u64, mut packed: &[u8]) -> Result<Vec<Journaled>, StoreError> {
    let cut = || StoreError::Corrupt(format!("journal row {seq} cut short"));
    let mut out = Vec::new();
    while !packed.is_empty() {
        let (len, rest) = packed.split_first_chunk::<4>().ok_or_else(cut)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| cut())?;
        let (row, rest) = rest.split_at_checked(len).ok_or_else(cut)?;
        out.push(Journaled {
            seq,
            event: Arc::new(decode::<Event>(row)?),
            row: row.to_vec(),
        });
        packed = rest;
    }
    Ok(out)
}

impl Store {
    /// One mutation of the catalog (objects, configuration documents): `change` in one
    /// transaction with the record's audit entry (which `change` completes with what it saw)
    /// and the record's events journaled; the events come back with their journal sequence,
    /// for the caller to file.
    pub(super) async fn mutate_catalog<T: Send + 'static>(
        self: &Arc<Self>,
        record: Record,
        change: impl FnOnce(&WriteTransaction, AuditDraft) -> Result<(T, AuditDraft), StoreError>
        + Send
        + 'static,
    ) -> Result<(T, Vec<Journaled>), StoreError> {
        let store = self.clone();
        self.write_catalog(move |tx| {
            let (out, audit) = change(tx, record.audit)?;
            store.append_audit(tx, audit)?;
            Ok((out, journal(tx, record.events)?))
        })
        .await
    }

    /// The events of the oldest `rows` journal rows not in `skip` (rows already stored, about
    /// to be forgotten), in journal order.
    pub async fn journaled(
        self: &Arc<Self>,
        rows: usize,
        skip: HashSet<u64>,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.read(move |tx| {
            let t = tx
                .open_table(EVENT_JOURNAL)
                .map_err(StoreError::from_redb)?;
            let mut out = Vec::new();
            let mut taken = 0;
            for row in t.iter().map_err(StoreError::from_redb)? {
                let (seq, packed) = row.map_err(StoreError::from_redb)?;
                if skip.contains(&seq.value()) {
                    continue;
                }
                out.extend(unpack(seq.value(), packed.value())?);
                taken += 1;
                if taken == rows {
                    break;
                }
            }
            Ok(out)
        })
        .await
    }

    /// Forgets journal rows whose events are stored in their month files: one pass over the
    /// span they cover (they are mostly contiguous). A row's events are stored together.
    pub async fn forget_journaled(self: &Arc<Self>, seqs: Vec<u64>) -> Result<(), StoreError> {
        let (Some(&lo), Some(&hi)) = (seqs.iter().min(), seqs.iter().max()) else {
            return Ok(());
        };
        let forget: HashSet<u64> = seqs.into_iter().collect();
        self.write(move |tx| {
            tx.open_table(EVENT_JOURNAL)
                .map_err(StoreError::from_redb)?
                .retain_in(lo..=hi, |seq, _| !forget.contains(&seq))
                .map_err(StoreError::from_redb)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{EventDraft, EventType};

    #[test]
    fn a_row_holds_its_events_in_order() {
        let events: Vec<Arc<Event>> = (0..3u128)
            .map(|i| {
                let draft = EventDraft::new(
                    uuid::Uuid::from_u128(1),
                    EventType::Config,
                    None,
                    serde_json::json!({"n": i}),
                );
                let ts = crate::model::Timestamp::from_millis(i as i64).unwrap();
                Arc::new(draft.stamped(uuid::Uuid::from_u128(i + 10), ts))
            })
            .collect();
        let mut packed = Vec::new();
        for e in &events {
            let row = encode(&**e).unwrap();
            packed.extend_from_slice(&(row.len() as u32).to_be_bytes());
            packed.extend_from_slice(&row);
        }
        let back = unpack(7, &packed).unwrap();
        assert_eq!(back.len(), 3);
        assert!(back.iter().all(|j| j.seq == 7));
        let ids: Vec<_> = back.iter().map(|j| j.event.id).collect();
        assert_eq!(ids, events.iter().map(|e| e.id).collect::<Vec<_>>());
        assert!(
            unpack(7, &packed[..packed.len() - 1]).is_err(),
            "a cut row is corrupt"
        );
    }
}
