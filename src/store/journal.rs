//! The event journal (transactional outbox): a mutation records its events in the same
//! transaction as the change that causes them, so a committed cause always has its events.
//! Events are stamped inside that transaction and writes are serial, so event ids follow
//! commit order; the id of the newest journaled event (the head) is kept with them, which lets
//! a durable consumer know how far the committed events reach.
//! A transaction's events are one journal row (each event's encoded row, length-prefixed): one
//! sequential write however many events a group commit carries, and one row to forget. The
//! event filer copies them into the month files (where storing one again is a no-op: rows are
//! keyed by their id) and then forgets the journal row.

use super::event_rows::{ROW_GUESS, decode_event, encode_event_into, event_id};
use super::keys::stored_uuid;
use super::kv::Readable;
use super::tables::{CONFIG_DOCS, CONSUMER_POSITIONS, EVENT_JOURNAL, META, TENANTS};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::event::{Event, EventDraft, Journaled, id_millis};
use crate::runtime::Locked;
use crate::store::{TxResult, Wrote};
use bytes::Bytes;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// Meta key of the id of the newest journaled event.
const JOURNAL_HEAD: &str = "journal_head";

/// Meta key of the next journal row's sequence (big-endian): kept, so a sequence is never used
/// twice even once every row is forgotten (readers start at a row they have passed).
const JOURNAL_NEXT: &str = "journal_next_row";

/// Meta key of the id of the newest event whose journal row was forgotten: every event after it
/// is still journaled, so a reader past it finds all it has not read in the journal alone.
const JOURNAL_FORGOTTEN: &str = "journal_forgotten_through";

/// The journal's head as this process last wrote it, good for the epoch it was written in
/// (see `WriteTx::epoch`): the next row's sequence and the newest event id. A write that rolls
/// back leaves a gap in the sequence, never a reused row or an id out of order.
#[derive(Clone, Copy)]
pub(super) struct JournalHead {
    epoch: u64,
    next: u64,
    newest: Uuid,
}

/// The smallest UUIDv7 after `id`: the next of its millisecond, or the first of the next
/// millisecond when its random bits are all ones.
fn successor(id: Uuid) -> Uuid {
    let next = Uuid::from_u128(id.as_u128().wrapping_add(1));
    if next.get_version_num() == 7 && next.get_variant() == uuid::Variant::RFC4122 {
        return next;
    }
    let ms = (id.as_u128() >> 80) + 1;
    Uuid::from_u128((ms << 80) | (0x7 << 76) | (0b10 << 62))
}

/// Events the recent rows may hold in memory at most: enough for the durable consumers, woken
/// by the commit, to read what they are behind by under a stream of full result groups (8,192
/// results a transaction, up to four groups being stored). Those groups' events are held until
/// stored anyway, so keeping them here costs little more.
const RECENT_EVENTS: usize = 32_768;

/// The events of the journal rows this process made durable lately, as they were journaled: a
/// reader takes a row's events from here instead of decoding the row again, once per reader. A
/// row is never rewritten and a sequence never reused, so a row read in any snapshot is the
/// one kept here. Rows leave once forgotten, or oldest first past `RECENT_EVENTS`.
#[derive(Default)]
pub(super) struct RecentRows(Mutex<Recent>);

#[derive(Default)]
struct Recent {
    rows: BTreeMap<u64, Arc<[Arc<Event>]>>,
    events: usize,
}

impl RecentRows {
    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.0.locked()
    }

    /// Keeps the events of durable journal rows (`journaled` in row order).
    pub(super) fn keep(&self, journaled: &[Journaled]) {
        let mut recent = self.lock();
        for row in journaled.chunk_by(|a, b| a.seq == b.seq) {
            let events: Arc<[Arc<Event>]> = row.iter().map(|j| j.event.clone()).collect();
            recent.events += events.len();
            if let Some(replaced) = recent.rows.insert(row[0].seq, events) {
                recent.events -= replaced.len();
            }
        }
        while recent.events > RECENT_EVENTS {
            let Some((_, oldest)) = recent.rows.pop_first() else {
                break;
            };
            recent.events -= oldest.len();
        }
    }

    fn get(&self, seq: u64) -> Option<Arc<[Arc<Event>]>> {
        self.lock().rows.get(&seq).cloned()
    }

    fn forget(&self, seqs: &HashSet<u64>) {
        let mut recent = self.lock();
        for seq in seqs {
            if let Some(gone) = recent.rows.remove(seq) {
                recent.events -= gone.len();
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().events
    }
}

/// What a mutation writes beside its change, in the same transaction: its audit entry and its
/// events (stamped in that transaction).
pub struct Record {
    pub audit: AuditDraft,
    pub events: Vec<EventDraft>,
}

impl Record {
    pub(crate) fn new(audit: AuditDraft, events: Vec<EventDraft>) -> Self {
        Self { audit, events }
    }
}

/// The committed events a durable consumer can see at one moment: the newest journaled
/// event's id, and the events of journal rows not yet forgotten (some may be stored already).
pub struct JournalView {
    pub head: Option<Uuid>,
    pub pending: Vec<Arc<Event>>,
    /// The first journal row not wholly at or before `after`: a reader whose position only
    /// moves on starts its next view there (rows are in commit order, so every row before it
    /// is behind the reader), instead of walking the rows it is past again.
    pub from_row: u64,
    /// The newest event whose journal row was forgotten (`None`: no row forgotten since this
    /// was first kept). A reader at or past it has every event after its position in
    /// `pending`, and need not look in the month files.
    pub forgotten_through: Option<Uuid>,
}

/// Saves a durable consumer's position in the transaction of the work it did.
/// Work for events already recorded needs no record of its own.
pub(super) fn save_position(tx: &Tx, name: &str, through: Uuid) -> Result<(), StoreError> {
    tx.unrecorded("a durable consumer's position");
    tx.open_table(CONSUMER_POSITIONS)?
        .insert(name, through.as_bytes().as_slice())?;
    Ok(())
}

/// The id of the newest journaled event, from the meta table.
fn head(meta: &impl Readable<&'static str, &'static [u8]>) -> Result<Option<Uuid>, StoreError> {
    meta_id(meta, JOURNAL_HEAD)
}

/// An event id kept in the meta table.
fn meta_id(
    meta: &impl Readable<&'static str, &'static [u8]>,
    key: &'static str,
) -> Result<Option<Uuid>, StoreError> {
    meta.get(key)?
        .map(|v| stored_uuid(v.value(), key))
        .transpose()
}

/// Whether any tenant has a configuration document of `kind`.
fn kind_in_use(
    tenants: &impl Readable<u128, &'static [u8]>,
    docs: &impl Readable<&'static [u8], &'static [u8]>,
    kind: &str,
) -> Result<bool, StoreError> {
    for row in tenants.iter()? {
        let tenant = Uuid::from_u128(row?.0.value());
        let prefix = super::config::kind_prefix(tenant, kind);
        let first = docs.range(prefix.as_slice()..)?.next().transpose()?;
        if first.is_some_and(|(k, _)| k.value().starts_with(&prefix)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The encoded events of one journal row (each length-prefixed), in order.
fn frames(seq: u64, mut packed: &[u8]) -> Result<Vec<&[u8]>, StoreError> {
    let cut = || StoreError::Corrupt(format!("journal row {seq} cut short"));
    let mut out = Vec::new();
    while !packed.is_empty() {
        let (len, rest) = packed.split_first_chunk::<4>().ok_or_else(cut)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| cut())?;
        let (row, rest) = rest.split_at_checked(len).ok_or_else(cut)?;
        out.push(row);
        packed = rest;
    }
    Ok(out)
}

/// The events of one journal row, with their encoded rows (for filing them again).
fn unpack(seq: u64, packed: &[u8]) -> Result<Vec<Journaled>, StoreError> {
    frames(seq, packed)?
        .into_iter()
        .map(|row| {
            Ok(Journaled {
                seq,
                event: Arc::new(decode_event(row)?),
                row: Bytes::copy_from_slice(row),
            })
        })
        .collect()
}

/// The events of one journal row, for a reader (no copy of their rows).
/// The events of one journal row after `after`, at most `limit`, oldest first. A row's events
/// are in id order, so the first one after is found by halving, decoding ids alone, and only
/// the events taken are decoded whole: a reader taking a large row a batch at a time decodes
/// each event once, not the whole row per batch.
fn unpack_after(
    seq: u64,
    packed: &[u8],
    after: Option<Uuid>,
    limit: usize,
) -> Result<Vec<Arc<Event>>, StoreError> {
    let frames = frames(seq, packed)?;
    let (mut lo, mut hi) = (0, frames.len());
    if let Some(after) = after {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if event_id(frames[mid])? <= after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
    }
    frames[lo..]
        .iter()
        .take(limit)
        .map(|row| Ok(Arc::new(decode_event(row)?)))
        .collect()
}

/// Of a row's events (in id order), those after `after`, at most `limit`.
fn kept_after(events: &[Arc<Event>], after: Option<Uuid>, limit: usize) -> Vec<Arc<Event>> {
    let start = after.map_or(0, |a| events.partition_point(|e| e.id <= a));
    events[start..].iter().take(limit).cloned().collect()
}

/// The id of a journal row's first event, decoding that id alone.
fn first_id(seq: u64, packed: &[u8]) -> Result<Option<Uuid>, StoreError> {
    frames(seq, packed)?
        .first()
        .map(|row| event_id(row))
        .transpose()
}

/// The id of a journal row's last event (its events are in id order), decoding that id alone.
fn last_id(seq: u64, packed: &[u8]) -> Result<Option<Uuid>, StoreError> {
    frames(seq, packed)?
        .last()
        .map(|row| event_id(row))
        .transpose()
}

impl Store {
    /// Gives a draft its id and time: the id is minted from the store's clock, after
    /// `newest` (the newest journaled id, which it becomes), and the time read back from the
    /// id, so both always agree. Ids then follow commit order across every process writing
    /// the database, whatever their clocks say: a process behind another stamps the
    /// millisecond of the newest id.
    fn stamp(&self, draft: EventDraft, newest: &mut Uuid) -> Event {
        let minted = self.clock.new_id();
        let id = if minted > *newest {
            minted
        } else {
            successor(*newest)
        };
        *newest = id;
        let ts = id_millis(&id)
            .and_then(Timestamp::from_millis)
            .unwrap_or_else(|| self.clock.now());
        draft.stamped(id, ts)
    }

    /// Stamps `drafts` and records them in `tx` as one journal row, after every row journaled
    /// before; the transaction keeps them for the committer to file once it is durable.
    pub(super) fn journal(&self, tx: &Tx, drafts: Vec<EventDraft>) -> Result<(), StoreError> {
        if drafts.is_empty() {
            return Ok(());
        }
        let mut t = tx.open_table(EVENT_JOURNAL)?;
        let mut kept = self.journal_head.locked();
        let (seq, mut newest) = match *kept {
            Some(h) if h.epoch == tx.epoch() => (h.next, h.newest),
            // Another process may have journaled since: the stored head.
            _ => {
                let meta = tx.open_table(META)?;
                let stored_next = meta
                    .get(JOURNAL_NEXT)?
                    .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes));
                // A store journaled before the next sequence was kept has only its rows.
                let after_last = t.last()?.map_or(0, |(k, _)| k.value() + 1);
                (
                    stored_next.unwrap_or(0).max(after_last),
                    head(&meta)?.unwrap_or(Uuid::nil()),
                )
            }
        };
        // The events are encoded into the journal row itself, each after its length, and each
        // keeps its row as a slice of it: one buffer a transaction, not one an event (their
        // allocations and frees on another thread were a tenth of the store writer's CPU).
        let mut packed = Vec::with_capacity(drafts.len() * (4 + ROW_GUESS));
        let mut events = Vec::with_capacity(drafts.len());
        for draft in drafts {
            let event = Arc::new(self.stamp(draft, &mut newest));
            let at = packed.len();
            packed.extend_from_slice(&[0; 4]);
            encode_event_into(&mut packed, &event)?;
            let len = u32::try_from(packed.len() - at - 4)
                .map_err(|_| StoreError::Internal("event row over 4 GiB".into()))?;
            packed[at..at + 4].copy_from_slice(&len.to_be_bytes());
            events.push((event, at + 4..packed.len()));
        }
        t.insert(seq, packed.as_slice())?;
        let packed = Bytes::from(packed);
        let out: Vec<Journaled> = events
            .into_iter()
            .map(|(event, row)| Journaled {
                seq,
                event,
                row: packed.slice(row),
            })
            .collect();
        *kept = Some(JournalHead {
            epoch: tx.epoch(),
            next: seq + 1,
            newest,
        });
        drop(kept);
        let mut meta = tx.open_table(META)?;
        meta.insert(JOURNAL_NEXT, (seq + 1).to_be_bytes().as_slice())?;
        if let Some(last) = out.last() {
            meta.insert(JOURNAL_HEAD, last.event.id.as_bytes().as_slice())?;
        }
        tx.journaled(out);
        Ok(())
    }

    /// A record's audit entries and events, written in `tx`: the one way a mutation records
    /// itself.
    pub(super) fn record(
        &self,
        tx: &Tx,
        audits: impl IntoIterator<Item = AuditDraft>,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        for audit in audits {
            self.append_audit(tx, audit)?;
            tx.audited();
        }
        self.journal(tx, events)
    }

    /// Records an audit entry (and its events) that has no change of its own: an audited read
    /// such as a backup download.
    pub(crate) async fn record_only(self: &Arc<Self>, record: Record) -> Result<(), StoreError> {
        self.write(move |tx| tx.record([record.audit], record.events))
            .await
    }

    /// Journals events that have no change of their own in the store (a system notice).
    /// Their ids, once filed.
    pub async fn journal_events(
        self: &Arc<Self>,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            store.journal(tx, drafts)?;
            Ok(tx.journaled_ids())
        })
        .await
    }

    /// The id of the newest journaled event.
    pub(crate) async fn journal_head(self: &Arc<Self>) -> Result<Option<Uuid>, StoreError> {
        self.read(|tx| head(&tx.open_table(META)?)).await
    }

    /// The head and the first `limit` events still journaled after `after` (by id), in one
    /// snapshot, looking from journal row `from_row` on (a reader's last `JournalView::from_row`,
    /// or 0).
    pub(crate) async fn journal_view(
        self: &Arc<Self>,
        after: Option<Uuid>,
        from_row: u64,
        limit: usize,
    ) -> Result<JournalView, StoreError> {
        let store = self.clone();
        self.read(move |tx| {
            let meta = tx.open_table(META)?;
            let head = head(&meta)?;
            let forgotten_through = meta_id(&meta, JOURNAL_FORGOTTEN)?;
            let t = tx.open_table(EVENT_JOURNAL)?;
            let mut pending = Vec::new();
            let mut next_from = from_row;
            for row in t.range(from_row..)? {
                let (seq, packed) = row?;
                let (seq, packed) = (seq.value(), packed.value());
                let recent = store.recent_rows.get(seq);
                // Rows the reader is past are skipped without decoding their events.
                if let Some(after) = after {
                    let last = match &recent {
                        Some(events) => events.last().map(|e| e.id),
                        None => last_id(seq, packed)?,
                    };
                    if last.is_none_or(|last| last <= after) {
                        if pending.is_empty() {
                            next_from = seq + 1;
                        }
                        continue;
                    }
                }
                let room = limit - pending.len();
                pending.extend(match recent {
                    Some(events) => kept_after(&events, after, room),
                    None => unpack_after(seq, packed, after, room)?,
                });
                if pending.len() >= limit {
                    break;
                }
            }
            Ok(JournalView {
                head,
                pending,
                from_row: next_from,
                forgotten_through,
            })
        })
        .await
    }

    /// The newest events still journaled, before `before` (by id) when given, that `keep`
    /// keeps, newest first, at most `limit`: a listing's page reads the journal's newest rows,
    /// not every event waiting to be filed, and the newest row alone when it holds the page
    /// (on PostgreSQL a range reads its rows a page of 256 at a time).
    pub(crate) async fn journal_newest(
        self: &Arc<Self>,
        before: Option<Uuid>,
        keep: impl Fn(&Event) -> bool + Send + 'static,
        limit: usize,
    ) -> Result<Vec<Arc<Event>>, StoreError> {
        let store = self.clone();
        self.read(move |tx| {
            let t = tx.open_table(EVENT_JOURNAL)?;
            let mut out = Vec::new();
            let take =
                |seq: u64, packed: &[u8], out: &mut Vec<Arc<Event>>| -> Result<(), StoreError> {
                    let recent = store.recent_rows.get(seq);
                    // Rows wholly at or after the cursor are passed over without decoding.
                    if let Some(before) = before {
                        let first = match &recent {
                            Some(events) => events.first().map(|e| e.id),
                            None => first_id(seq, packed)?,
                        };
                        if first.is_none_or(|first| first >= before) {
                            return Ok(());
                        }
                    }
                    let events = match recent {
                        Some(events) => events,
                        None => Arc::from(unpack_after(seq, packed, None, usize::MAX)?),
                    };
                    out.extend(
                        events
                            .iter()
                            .rev()
                            .filter(|e| before.is_none_or(|b| e.id < b) && keep(e))
                            .take(limit - out.len())
                            .cloned(),
                    );
                    Ok(())
                };
            let Some((newest, packed)) = t.last()? else {
                return Ok(Vec::new());
            };
            let newest = newest.value();
            take(newest, packed.value(), &mut out)?;
            if out.len() < limit {
                for row in t.range(..newest)?.rev() {
                    let (seq, packed) = row?;
                    take(seq.value(), packed.value(), &mut out)?;
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// Where durable consumer `name` stands: the id of the last event whose work it
    /// committed. A consumer seen for the first time starts at the head (what is committed
    /// from now on), and that start is saved, so nothing committed after it is skipped.
    pub(crate) async fn consumer_position(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<Uuid, StoreError> {
        let name = name.to_string();
        self.transact(move |tx| -> TxResult<_> {
            let saved = {
                let t = tx.open_table(CONSUMER_POSITIONS)?;
                t.get(name.as_str())?
                    .map(|v| stored_uuid(v.value(), "a consumer's position"))
                    .transpose()?
            };
            match saved {
                Some(at) => Ok(Wrote::Unchanged(at)),
                None => {
                    let meta = tx.open_table(META)?;
                    let head = head(&meta)?.unwrap_or(Uuid::nil());
                    save_position(tx, &name, head)?;
                    Ok(Wrote::Changed(head))
                }
            }
        })
        .await
    }

    /// Commits durable consumer `name`'s work for the events through `through`: the position
    /// and the events the work made, in one transaction.
    pub(crate) async fn consume(
        self: &Arc<Self>,
        name: &str,
        through: Uuid,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        let name = name.to_string();
        let store = self.clone();
        self.write(move |tx| {
            save_position(tx, &name, through)?;
            store.journal(tx, events)
        })
        .await
    }

    /// Moves consumer `name` to the journal head when no tenant has a document of `kind` (a
    /// webhook dispatcher with no subscriptions has nothing to read); `None` when one has.
    /// A read decides first, so an idle consumer already at the head writes nothing; the move
    /// checks again in its own transaction, so a document created meanwhile is seen and
    /// nothing after it is skipped.
    pub(crate) async fn skip_consumer_without(
        self: &Arc<Self>,
        name: &'static str,
        kind: &'static str,
    ) -> Result<Option<Uuid>, StoreError> {
        let (in_use, head_now, saved) = self
            .read(move |tx| {
                let in_use =
                    kind_in_use(&tx.open_table(TENANTS)?, &tx.open_table(CONFIG_DOCS)?, kind)?;
                let head = head(&tx.open_table(META)?)?;
                let saved = tx
                    .open_table(CONSUMER_POSITIONS)?
                    .get(name)?
                    .map(|v| stored_uuid(v.value(), "a consumer's position"))
                    .transpose()?;
                Ok((in_use, head, saved))
            })
            .await?;
        let saved = saved.unwrap_or(Uuid::nil());
        match head_now {
            _ if in_use => return Ok(None),
            Some(at) if at > saved => {}
            _ => return Ok(Some(saved)),
        }
        self.write(move |tx| {
            let in_use = kind_in_use(&tx.open_table(TENANTS)?, &tx.open_table(CONFIG_DOCS)?, kind)?;
            let at = head(&tx.open_table(META)?)?;
            match at {
                Some(at) if !in_use => {
                    save_position(tx, name, at)?;
                    Ok(Some(at))
                }
                _ => Ok(None),
            }
        })
        .await
    }

    /// The events of the oldest `rows` journal rows not in `skip` (rows already stored, about
    /// to be forgotten), in journal order.
    pub(crate) async fn journaled(
        self: &Arc<Self>,
        rows: usize,
        skip: HashSet<u64>,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(EVENT_JOURNAL)?;
            let mut out = Vec::new();
            let mut taken = 0;
            for row in t.iter()? {
                let (seq, packed) = row?;
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
    /// Rows with an event after `consumed_through` stay (durable consumers have not read them
    /// all yet, and read them from the journal's recent rows instead of the month files);
    /// returns them. A call that forgets nothing writes nothing (no sync).
    pub(crate) async fn forget_journaled(
        self: &Arc<Self>,
        seqs: Vec<u64>,
        consumed_through: Option<Uuid>,
    ) -> Result<Vec<u64>, StoreError> {
        let (Some(&lo), Some(&hi)) = (seqs.iter().min(), seqs.iter().max()) else {
            return Ok(Vec::new());
        };
        let forget: HashSet<u64> = seqs.into_iter().collect();
        self.transact(move |tx| -> TxResult<_> {
            tx.unrecorded("journal rows whose events are stored");
            let mut meta = tx.open_table(META)?;
            let before = meta_id(&meta, JOURNAL_FORGOTTEN)?;
            // A row whose last id cannot be read counts as reaching the head: readers then look
            // in the month files too, which is only slower.
            let mut unreadable = false;
            let mut newest = before;
            let (mut kept, mut forgotten) = (Vec::new(), HashSet::new());
            tx.open_table(EVENT_JOURNAL)?
                .retain_in(lo..=hi, |seq, packed| {
                    if !forget.contains(&seq) {
                        return true;
                    }
                    match last_id(seq, packed) {
                        Ok(last) if consumed_through.is_some() && last > consumed_through => {
                            kept.push(seq);
                            return true;
                        }
                        Ok(last) => newest = newest.max(last),
                        Err(_) => unreadable = true,
                    }
                    forgotten.insert(seq);
                    false
                })?;
            if unreadable {
                newest = newest.max(head(&meta)?);
            }
            if newest != before
                && let Some(through) = newest
            {
                meta.insert(JOURNAL_FORGOTTEN, through.as_bytes().as_slice())?;
            }
            let changed = !forgotten.is_empty();
            Ok(Wrote::new((kept, forgotten), changed))
        })
        .await
        .map(|(kept, forgotten)| {
            self.recent_rows.forget(&forgotten);
            kept
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{EventDraft, EventType};
    use crate::runtime::TestClock;

    fn draft() -> EventDraft {
        EventDraft::new(Uuid::nil(), EventType::Config, None, serde_json::json!({}))
    }

    /// Ids follow commit order even when the clock went back (an NTP step, a store opened
    /// by a process whose clock is behind): the next id is after the newest journaled one,
    /// in its millisecond.
    #[tokio::test]
    async fn ids_follow_the_newest_journaled_one_whatever_the_clock_says() {
        let dir = tempfile::tempdir().unwrap();
        let later: Timestamp = "2026-11-27T12:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(later))).unwrap();
        let first = store.journal_events(vec![draft()]).await.unwrap()[0];
        store.close();
        drop(store);
        let earlier: Timestamp = "2026-11-27T11:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(earlier))).unwrap();
        let next = store.journal_events(vec![draft(), draft()]).await.unwrap();
        assert!(first < next[0] && next[0] < next[1], "{first} {next:?}");
        assert_eq!(id_millis(&next[1]), id_millis(&first));
        assert_eq!(store.journal_head().await.unwrap(), Some(next[1]));
    }

    #[test]
    fn the_successor_of_an_id_is_the_next_of_its_millisecond_or_the_next_millisecond() {
        let id = Uuid::parse_str("01a21d5e-c9e4-75a5-82e6-74af1242adce").unwrap();
        let next = successor(id);
        assert_eq!(next.as_u128(), id.as_u128() + 1);
        let full = Uuid::from_u128(id.as_u128() | ((1u128 << 62) - 1));
        let after = successor(full);
        assert!(after > full);
        assert_eq!(after.get_version_num(), 7);
        assert_eq!(id_millis(&after), id_millis(&full).map(|ms| ms + 1));
    }

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
        // Rows by position and, as before them, by name, side by side.
        for (i, e) in events.iter().enumerate() {
            let row = if i % 2 == 0 {
                super::super::event_rows::encode_event(e).unwrap()
            } else {
                super::super::codec::encode(&**e).unwrap()
            };
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
        assert_eq!(
            last_id(7, &packed).unwrap(),
            Some(uuid::Uuid::from_u128(12))
        );
        assert_eq!(last_id(7, &[]).unwrap(), None);
        assert!(last_id(7, &packed[..packed.len() - 1]).is_err());
    }

    /// A listing's newest journaled events: newest first across rows, before the cursor, as
    /// many as asked of those kept, from memory and, after a restart, decoded alike.
    #[tokio::test]
    async fn the_newest_journaled_events_are_read_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let mut store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let row = vec![draft(), draft(), draft()];
            ids.extend(store.journal_events(row).await.unwrap());
        }
        let ids = Arc::new(ids);
        let at = |ids: &[Uuid], id: Uuid| ids.iter().position(|i| *i == id).unwrap();
        for restarted in [false, true] {
            if restarted {
                store.close();
                drop(store);
                store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
                assert_eq!(store.recent_rows.held(), 0, "decoded from the journal");
            }
            let newest = |before: Option<usize>, odd: bool, limit: usize| {
                let (store, ids) = (store.clone(), ids.clone());
                async move {
                    let keep = ids.clone();
                    let found = store
                        .journal_newest(
                            before.map(|i| ids[i]),
                            move |e| !odd || at(&keep, e.id) % 2 == 1,
                            limit,
                        )
                        .await
                        .unwrap();
                    found.iter().map(|e| at(&ids, e.id)).collect::<Vec<_>>()
                }
            };
            assert_eq!(newest(None, false, 4).await, [8, 7, 6, 5]);
            assert_eq!(newest(Some(6), false, 4).await, [5, 4, 3, 2]);
            assert_eq!(newest(Some(3), true, 10).await, [1]);
            assert_eq!(newest(None, true, 10).await, [7, 5, 3, 1]);
            assert!(newest(Some(0), false, 10).await.is_empty());
        }
    }

    /// A reader gets the events this process journaled as they were journaled, not decoded
    /// again, and a forgotten row leaves memory; with no row in memory (a restart), the same
    /// events are decoded from the journal.
    #[tokio::test]
    async fn readers_share_the_events_of_recent_rows_and_decode_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        let ids = store.journal_events(vec![draft(), draft()]).await.unwrap();
        assert_eq!(store.recent_rows.held(), 2);
        let view = store.journal_view(None, 0, 10).await.unwrap();
        let again = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(view.pending.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
        assert!(
            view.pending
                .iter()
                .zip(&again.pending)
                .all(|(a, b)| Arc::ptr_eq(a, b)),
            "both readers hold the journaled events themselves"
        );
        let past_first = store.journal_view(Some(ids[0]), 0, 10).await.unwrap();
        assert_eq!(past_first.pending.len(), 1);
        assert!(Arc::ptr_eq(&past_first.pending[0], &view.pending[1]));

        store.close();
        drop(store);
        let store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        assert_eq!(store.recent_rows.held(), 0);
        let decoded = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(
            decoded
                .pending
                .iter()
                .map(|e| (**e).clone())
                .collect::<Vec<_>>(),
            view.pending
                .iter()
                .map(|e| (**e).clone())
                .collect::<Vec<_>>()
        );
        store.journal_events(vec![draft()]).await.unwrap();
        assert_eq!(store.recent_rows.held(), 1);
        let rows: Vec<u64> = store
            .journaled(10, HashSet::new())
            .await
            .unwrap()
            .iter()
            .map(|j| j.seq)
            .collect();
        store.forget_journaled(rows, None).await.unwrap();
        assert_eq!(store.recent_rows.held(), 0);
        assert!(
            store
                .journal_view(None, 0, 10)
                .await
                .unwrap()
                .pending
                .is_empty()
        );
    }

    /// A reader taking a large row a few events at a time gets each event once, in order,
    /// from a row in memory and from one decoded (after a restart) alike.
    #[tokio::test]
    async fn a_row_read_a_batch_at_a_time_gives_each_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        let first = store.journal_events(vec![draft(); 3]).await.unwrap();
        let row = store.journal_events(vec![draft(); 50]).await.unwrap();
        let last = store.journal_events(vec![draft(); 2]).await.unwrap();
        let all: Vec<Uuid> = [first, row, last].concat();
        let read_all = |store: Arc<Store>| async move {
            let (mut after, mut from_row, mut read) = (None, 0, Vec::new());
            loop {
                let view = store.journal_view(after, from_row, 7).await.unwrap();
                assert!(view.pending.len() <= 7);
                let Some(newest) = view.pending.last().map(|e| e.id) else {
                    return read;
                };
                read.extend(view.pending.iter().map(|e| e.id));
                (after, from_row) = (Some(newest), view.from_row);
            }
        };
        assert_eq!(read_all(store.clone()).await, all);
        store.close();
        drop(store);
        let store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        assert_eq!(store.recent_rows.held(), 0, "every row decoded");
        assert_eq!(read_all(store).await, all);
    }

    /// The view names the newest event of the rows forgotten so far, whichever order they
    /// were forgotten in, so a reader past it knows the journal holds all it has not read.
    #[tokio::test]
    async fn the_view_names_the_newest_forgotten_event() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(now))).unwrap();
        let mut rows = Vec::new();
        for n in [2, 1, 3] {
            store.journal_events(vec![draft(); n]).await.unwrap();
            let journaled = store.journaled(10, HashSet::new()).await.unwrap();
            let newest = journaled.last().unwrap();
            rows.push((newest.seq, newest.event.id));
        }
        let view = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(view.forgotten_through, None, "nothing forgotten yet");
        assert_eq!(view.pending.len(), 6);

        store.forget_journaled(vec![rows[1].0], None).await.unwrap();
        let view = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(view.forgotten_through, Some(rows[1].1));
        store.forget_journaled(vec![rows[0].0], None).await.unwrap();
        let view = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(
            view.forgotten_through,
            Some(rows[1].1),
            "an older row forgotten later does not move it back"
        );
        assert_eq!(view.pending.len(), 3, "the third row is still journaled");
        store.forget_journaled(vec![rows[2].0], None).await.unwrap();
        let view = store.journal_view(None, 0, 10).await.unwrap();
        assert_eq!(view.forgotten_through, Some(rows[2].1));
        assert_eq!(view.head, Some(rows[2].1));
    }

    /// Past `RECENT_EVENTS`, the oldest rows go first, whole.
    #[test]
    fn recent_rows_keep_the_newest_events_up_to_their_bound() {
        let recent = RecentRows::default();
        let event = Arc::new(draft().stamped(Uuid::nil(), Timestamp::from_millis(0).unwrap()));
        let row = |seq: u64, n: usize| -> Vec<Journaled> {
            (0..n)
                .map(|_| Journaled {
                    seq,
                    event: event.clone(),
                    row: Bytes::new(),
                })
                .collect()
        };
        recent.keep(&[row(1, RECENT_EVENTS / 2), row(2, RECENT_EVENTS / 2)].concat());
        assert_eq!(recent.held(), RECENT_EVENTS);
        recent.keep(&row(3, 1));
        assert_eq!(recent.held(), RECENT_EVENTS / 2 + 1);
        assert!(recent.get(1).is_none());
        assert_eq!(recent.get(2).map(|r| r.len()), Some(RECENT_EVENTS / 2));
        recent.forget(&HashSet::from([2, 3]));
        assert_eq!(recent.held(), 0);
    }
}
