//! The event journal (transactional outbox): a mutation records its events in the same
//! transaction as the change that causes them, so a committed cause always has its events.
//! The event filer copies journal rows into the month files (where storing one again is a
//! no-op: rows are keyed by their id) and then forgets them here.

use super::codec::{decode, encode};
use super::tables::EVENT_JOURNAL;
use super::{Store, StoreError};
use crate::model::audit::AuditDraft;
use crate::model::event::{Event, Journaled};
use redb::{ReadableTable, WriteTransaction};
use std::sync::Arc;

/// What a mutation writes beside its change, in the same transaction: its audit entry and its
/// events (stamped by the caller).
pub struct Record {
    pub audit: AuditDraft,
    pub events: Vec<Arc<Event>>,
}

/// Records `events` in `tx`, after every event journaled before; returns them with their
/// sequence numbers.
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
    let first = t
        .last()
        .map_err(StoreError::from_redb)?
        .map_or(0, |(k, _)| k.value() + 1);
    let mut out = Vec::with_capacity(events.len());
    for (seq, event) in (first..).zip(events) {
        let row = encode(&*event)?;
        t.insert(seq, row.as_slice())
            .map_err(StoreError::from_redb)?;
        out.push(Journaled { seq, event, row });
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

    /// The oldest `limit` journaled events, in journal order.
    pub async fn journaled(self: &Arc<Self>, limit: usize) -> Result<Vec<Journaled>, StoreError> {
        self.read(move |tx| {
            let t = tx
                .open_table(EVENT_JOURNAL)
                .map_err(StoreError::from_redb)?;
            let mut out = Vec::new();
            for row in t.iter().map_err(StoreError::from_redb)?.take(limit) {
                let (seq, bytes) = row.map_err(StoreError::from_redb)?;
                out.push(Journaled {
                    seq: seq.value(),
                    event: Arc::new(decode::<Event>(bytes.value())?),
                    row: bytes.value().to_vec(),
                });
            }
            Ok(out)
        })
        .await
    }

    /// Forgets journal rows whose events are stored in their month files: one pass over the
    /// span they cover (they are mostly contiguous).
    pub async fn forget_journaled(self: &Arc<Self>, seqs: Vec<u64>) -> Result<(), StoreError> {
        let (Some(&lo), Some(&hi)) = (seqs.iter().min(), seqs.iter().max()) else {
            return Ok(());
        };
        let forget: std::collections::HashSet<u64> = seqs.into_iter().collect();
        self.write(move |tx| {
            tx.open_table(EVENT_JOURNAL)
                .map_err(StoreError::from_redb)?
                .retain_in(lo..=hi, |seq, _| !forget.contains(&seq))
                .map_err(StoreError::from_redb)
        })
        .await
    }
}
