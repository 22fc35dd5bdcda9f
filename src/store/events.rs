//! The event store: one redb file per month (`events-YYYYMM.redb`) in the data dir, indexed by
//! tenant + time, object, source and type; or, with `storage.backend: postgres`, one table
//! range-partitioned by month (`pg.rs`). One writer thread groups the appends of many producers
//! into one commit per month, so durable throughput is not one fsync per event.
//!
//! The object index is filed late, in runs of keys per object (`runs`): every object keeps its
//! newest keys on its own B-tree page, so inserting each event's key at once dirties a page per
//! event. A commit's keys are first appended to an unfiled journal table as one row
//! (sequential, in the same transaction as the events) and kept in memory, where reads merge
//! them in; the writer files them into the runs in sorted bulk once `FILE_AFTER` have gathered
//! or it has been idle for `FILE_IDLE`, a chunk of `FILE_CHUNK` keys at a time between commits
//! of events, so appends are not held up for the whole filing. Opening a file loads its
//! journal, so nothing is lost across a crash.
//!
//! Journaled events are committed without syncing: until their journal rows in the main
//! database are forgotten, those rows are their durable copy, and the filer forgets them only
//! after `sync` has made the month files durable (at most once a second, under load). A crash
//! before that loses month-file rows the filer stores again from the journal on the next start.
//! Events with no other copy (a federation site's, forwarded) are committed durably.

use super::StoreError;
use super::event_rows::decode_event;
use super::writer::{Inbox, Writer};
use crate::model::Timestamp;
use crate::model::event::{Event, EventFilter, EventType, id_millis};
use crate::runtime::Locked;
use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use uuid::Uuid;

#[cfg(feature = "postgres")]
pub mod pg;
mod runs;

/// Events by tenant + ts + id.
const MAIN: TableDefinition<&[u8], &[u8]> = TableDefinition::new("event_by_tenant_ts_id");
/// tenant + source length (2 bytes) + source + ts + id → ().
const BY_SOURCE: TableDefinition<&[u8], ()> = TableDefinition::new("event_key_by_source");
/// Sequence → the object keys of one commit not yet filed in the runs, concatenated
/// (`RUN_KEY_LEN` bytes each).
const UNFILED: TableDefinition<u64, &[u8]> = TableDefinition::new("event_object_key_unfiled");
/// The key of an index kept in runs (`runs`): tenant, object (or type), time and id.
const RUN_KEY_LEN: usize = 16 + 16 + 24;
type RunKey = [u8; RUN_KEY_LEN];

/// Tenant and object: an object's keys in the object index.
fn object_prefix(tenant: &Uuid, object: &Uuid) -> [u8; 32] {
    let mut p = [0u8; 32];
    p[..16].copy_from_slice(tenant.as_bytes());
    p[16..].copy_from_slice(object.as_bytes());
    p
}

/// Tenant and type code, padded to the object index's prefix: a type's keys in the type index.
fn type_prefix(tenant: &Uuid, kind: EventType) -> [u8; 32] {
    let mut p = [0u8; 32];
    p[..16].copy_from_slice(tenant.as_bytes());
    p[16] = kind.code();
    p
}

/// Unfiled object keys per file that make the writer file them.
const FILE_AFTER: usize = 262_144;
/// An idle writer files the object keys it holds after this long.
const FILE_IDLE: Duration = Duration::from_secs(2);
/// Keys filed in one transaction, between two commits of events: filing 262,144 at once held
/// appends up for about 0.4 s. Tests file a few at a time, so every filing takes chunks.
const FILE_CHUNK: usize = if cfg!(test) { 3 } else { 32_768 };

/// At most this many events go into one commit.
const MAX_BATCH: usize = 8192;
const FILE_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// Events per page while copying a month between backends.
#[cfg(feature = "postgres")]
const COPY_PAGE: usize = 4096;
/// What takes each page of a month being copied: its events with their stored rows.
#[cfg(feature = "postgres")]
type EachPage<'a> = dyn FnMut(&[(Event, Vec<u8>)]) -> Result<(), StoreError> + 'a;

/// A month as `YYYYMM`.
pub(crate) fn month_of(ts: Timestamp) -> u32 {
    let dt = ts.0.to_zoned(jiff::tz::TimeZone::UTC);
    (dt.year() as u32) * 100 + dt.month() as u32
}

fn file_name(month: u32) -> String {
    format!("events-{month}.redb")
}

fn ts_bytes(ms: i64) -> [u8; 8] {
    u64::try_from(ms).unwrap_or(0).to_be_bytes()
}

/// `ts` and `id` as the 24-byte key suffix every index shares.
fn suffix(ms: i64, id: &Uuid) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&ts_bytes(ms));
    k[8..].copy_from_slice(id.as_bytes());
    k
}

fn source_prefix(tenant: &Uuid, source: &str) -> Vec<u8> {
    let mut p = tenant.as_bytes().to_vec();
    let len = u16::try_from(source.len()).unwrap_or(u16::MAX);
    p.extend_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&source.as_bytes()[..usize::from(len)]);
    p
}

fn cat(prefix: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(rest);
    k
}

/// A position in time order: events strictly before (descending) or after (ascending) it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub ms: i64,
    pub id: Uuid,
}

impl Position {
    /// The position of an event id (its time is part of it).
    pub fn of_id(id: Uuid) -> Option<Self> {
        Some(Self {
            ms: id_millis(&id)?,
            id,
        })
    }
}

/// Where a stored event is: its tenant, time and id (the key of the months' tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventKey {
    pub tenant: Uuid,
    pub ts: Timestamp,
    pub id: Uuid,
}

impl EventKey {
    pub fn of(event: &Event) -> Self {
        Self {
            tenant: event.tenant_id,
            ts: event.ts,
            id: event.id,
        }
    }

    /// `tenant:millisecond:id`, as a notice carries it (see `parse_list`).
    pub fn to_text(&self) -> String {
        format!(
            "{}:{}:{}",
            self.tenant.simple(),
            self.ts.as_millis(),
            self.id.simple()
        )
    }

    /// Who announced stored forwarded events and their keys: an announcement is the
    /// announcer's name, then a `parse_list` list.
    pub fn parse_announcement(text: &str) -> (&str, Vec<Self>) {
        let (announcer, keys) = text.split_once(' ').unwrap_or((text, ""));
        (announcer, Self::parse_list(keys))
    }

    /// The keys of a space-separated list of `to_text`s, leaving out what does not parse.
    pub fn parse_list(text: &str) -> Vec<Self> {
        text.split(' ')
            .filter_map(|key| {
                let mut parts = key.split(':');
                let tenant = Uuid::try_parse(parts.next()?).ok()?;
                let ts = Timestamp::from_millis(parts.next()?.parse().ok()?)?;
                let id = Uuid::try_parse(parts.next()?).ok()?;
                parts.next().is_none().then_some(Self { tenant, ts, id })
            })
            .collect()
    }
}

/// Bounds (exclusive), direction and size of one read.
#[derive(Clone, Copy, Debug)]
struct Scan {
    lo: Option<Position>,
    hi: Option<Position>,
    descending: bool,
    limit: usize,
}

type Ack = oneshot::Sender<Result<(), StoreError>>;

/// What the writer thread is asked to do.
enum Msg {
    Append(Append),
    /// Make every commit so far durable.
    Sync(Ack),
}

/// Where a read finds its keys.
enum Index {
    /// An index in runs (`runs`): the object's, merged with its unfiled keys, or the type's.
    Runs(TableDefinition<'static, &'static [u8], &'static [u8]>),
    /// The source's index, a row per key.
    Source,
    /// None: the events, in time order.
    Events,
}

/// Events and their encoded rows: producers encode, so the one writer thread only writes.
struct Append {
    events: Vec<(Arc<Event>, Bytes)>,
    /// Committed durably: the events have no journal rows to be stored again from.
    durable: bool,
    ack: Ack,
}

/// One open month file and its object keys not yet filed in its runs.
struct MonthFile {
    db: Database,
    unfiled: Mutex<Unfiled>,
    /// Whether a commit since the last durable one was not synced.
    unsynced: AtomicBool,
}

#[derive(Default)]
struct Unfiled {
    /// The keys of each journal row not yet filed, by the row's sequence, as its commit made
    /// them: a commit hands its keys over in one move, and a read by object or a filing sorts
    /// what it takes. (An ordered set of every unfiled key cost each key of a commit a walk of
    /// a tree of up to `FILE_AFTER` keys, comparing 56 bytes a step: about a tenth of the event
    /// writer's CPU at batches of 500 results.) A filing's rows stay until its last chunk.
    rows: Vec<(u64, Vec<RunKey>)>,
    /// The keys in `rows`.
    len: usize,
    next_seq: u64,
    /// The filing under way: the keys of the journal rows through `through`, in key order,
    /// filed up to `next`. Keys journaled after it began wait for the next filing.
    filing: Option<Filing>,
}

impl Unfiled {
    fn push(&mut self, seq: u64, keys: Vec<RunKey>) {
        self.len += keys.len();
        self.rows.push((seq, keys));
    }

    /// Keys not in the object index yet: those held, less the filing's chunks filed so far.
    fn waiting(&self) -> usize {
        self.len
            .saturating_sub(self.filing.as_ref().map_or(0, |f| f.next))
    }

    /// The keys held in `lo..hi`, in key order, each once.
    fn range(&self, lo: &[u8], hi: &[u8]) -> Vec<RunKey> {
        let mut keys: Vec<RunKey> = self
            .rows
            .iter()
            .flat_map(|(_, keys)| keys)
            .filter(|k| lo <= k.as_slice() && k.as_slice() < hi)
            .copied()
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Every key held, in key order, each once (an event stored again has its key twice).
    fn sorted(&self) -> Vec<RunKey> {
        let mut keys: Vec<RunKey> = Vec::with_capacity(self.len);
        for (_, row) in &self.rows {
            keys.extend_from_slice(row);
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Lets go of the rows through `seq`, filed.
    fn filed_through(&mut self, seq: u64) {
        self.rows.retain(|(s, _)| *s > seq);
        self.len = self.rows.iter().map(|(_, keys)| keys.len()).sum();
    }
}

struct Filing {
    through: u64,
    keys: Vec<RunKey>,
    next: usize,
}

impl MonthFile {
    fn unfiled(&self) -> std::sync::MutexGuard<'_, Unfiled> {
        self.unfiled.locked()
    }

    /// The unfiled object keys in `lo..hi`, in the scan's direction.
    fn unfiled_in(&self, lo: &[u8], hi: &[u8], descending: bool) -> Vec<Vec<u8>> {
        let range = self.unfiled().range(lo, hi);
        if descending {
            range.iter().rev().map(|k| k.to_vec()).collect()
        } else {
            range.iter().map(|k| k.to_vec()).collect()
        }
    }

    /// Makes the commits since the last durable one durable.
    fn sync(&self) -> Result<(), StoreError> {
        if !self.unsynced.load(Ordering::SeqCst) {
            return Ok(());
        }
        super::kv::sync_redb(&self.db)?;
        self.unsynced.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Moves unfiled object keys into the object index: the next `FILE_CHUNK` of the filing
    /// under way, or of one begun with every key journaled so far. The filing's last chunk
    /// also removes its journal rows, which then hold only filed keys. Whether a filing is
    /// still under way.
    fn file_object_keys(&self) -> Result<bool, StoreError> {
        let (chunk, last, through) = {
            let mut unfiled = self.unfiled();
            if unfiled.filing.is_none() {
                if unfiled.rows.is_empty() {
                    return Ok(false);
                }
                unfiled.filing = Some(Filing {
                    through: unfiled.next_seq.saturating_sub(1),
                    keys: unfiled.sorted(),
                    next: 0,
                });
            }
            let Some(filing) = &unfiled.filing else {
                return Ok(false);
            };
            let end = (filing.next + FILE_CHUNK).min(filing.keys.len());
            (
                filing.keys[filing.next..end].to_vec(),
                end == filing.keys.len(),
                filing.through,
            )
        };
        let mut tx = self.db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        {
            let mut by_object = tx.open_table(runs::RUNS).map_err(StoreError::from_redb)?;
            runs::file(&mut by_object, &chunk)?;
            if last {
                let mut journal = tx.open_table(UNFILED).map_err(StoreError::from_redb)?;
                journal
                    .retain_in(..=through, |_, _| false)
                    .map_err(StoreError::from_redb)?;
            }
        }
        tx.commit().map_err(StoreError::from_redb)?;
        self.unsynced.store(false, Ordering::SeqCst);
        // Readers copy the unfiled keys before they open their snapshot, so a key leaves
        // memory only once a snapshot would find it filed: the filing's rows go with its last
        // chunk (until then a read finds its filed keys twice, and counts each once).
        let mut unfiled = self.unfiled();
        if last {
            unfiled.filed_through(through);
            unfiled.filing = None;
        } else if let Some(filing) = &mut unfiled.filing {
            filing.next += chunk.len();
        }
        Ok(!last)
    }
}

pub struct EventStore {
    backend: Box<dyn MonthStore>,
    writer: Writer<Msg>,
    /// This process's name in its announcements of forwarded events (`announce_forwarded`).
    announcer: String,
}

/// Where the months of events are kept: the one seam between the event store and its
/// backends, one redb file per month in the data directory (`MonthFiles`) or a table
/// partitioned by month in PostgreSQL (`pg::Partitions`). Blocking, on the writer thread or a
/// reader's.
trait MonthStore: Send + Sync {
    /// Months holding events, oldest first.
    fn months(&self) -> Vec<u32>;
    /// Commits one month's events; `durable` asks for them to be synced with it.
    fn commit(
        &self,
        month: u32,
        events: &[(&Event, &[u8])],
        durable: bool,
    ) -> Result<(), StoreError>;
    /// Makes the commits so far durable.
    fn sync(&self) -> Result<(), StoreError>;
    /// Whether object keys wait to be filed into their runs (then the writer comes back when
    /// idle); `file_object_keys` files them, all with `force`.
    fn has_unfiled_keys(&self) -> bool;
    fn file_object_keys(&self, force: bool);
    /// Tells the processes sharing the store that forwarded events are stored, as `announcer`
    /// stored them; false where none shares it.
    fn announce_forwarded(
        &self,
        announcer: &str,
        events: &[Arc<Event>],
    ) -> Result<bool, StoreError>;
    fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError>;
    fn stored(&self, keys: &[EventKey]) -> Result<HashSet<Uuid>, StoreError>;
    fn read(&self, filter: &EventFilter, scan: Scan) -> Result<Vec<Event>, StoreError>;
    fn count_after(&self, month: u32, after: Position) -> Result<u64, StoreError>;
    /// Removes the months before `keep_from` whole; answers those removed.
    fn remove_months_before(&self, keep_from: u32) -> Vec<u32>;
    /// Snapshots every month into `dir` as redb month files; their names.
    fn snapshot(&self, dir: &Path) -> Result<Vec<String>, StoreError>;
    /// Lets go of what it holds open.
    fn close(&self);
    /// The month files, for the tests that look inside one.
    #[cfg(test)]
    fn files(&self) -> Option<&MonthFiles> {
        None
    }
}

/// The month files of a data directory, opened as they are first used.
struct MonthFiles {
    dir: PathBuf,
    files: Mutex<BTreeMap<u32, Arc<MonthFile>>>,
}

impl EventStore {
    /// Opens the month files already in `dir` lazily and starts the writer thread.
    pub fn open(dir: &Path) -> Result<Arc<EventStore>, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(e.to_string()))?;
        Self::start(Box::new(MonthFiles::new(dir)))
    }

    /// The event store of a backing: the data directory's month files, or PostgreSQL's (its
    /// partitioned table made by the schema's migrations, which opening the main store applied).
    pub fn open_on(dir: &Path, backing: &super::Backing) -> Result<Arc<EventStore>, StoreError> {
        match backing {
            super::Backing::File => Self::open(dir),
            #[cfg(feature = "postgres")]
            super::Backing::Postgres(target) => {
                Self::start(Box::new(pg::Partitions::open(target)?))
            }
        }
    }

    fn start(backend: Box<dyn MonthStore>) -> Result<Arc<EventStore>, StoreError> {
        let (writer, inbox) = Writer::new(16_384);
        let mut announcer = [0u8; 8];
        getrandom::fill(&mut announcer).map_err(|e| StoreError::Internal(e.to_string()))?;
        let store = Arc::new(EventStore {
            backend,
            writer,
            announcer: crate::model::audit::hex(&announcer),
        });
        let worker = store.clone();
        store
            .writer
            .spawn("event-writer", move || worker.write_loop(inbox))?;
        Ok(store)
    }

    /// Snapshots every month into `dir` for a backup, one redb month file each (whichever the
    /// backend: a backup restores into a data directory); the file names.
    pub fn snapshot(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        self.backend.snapshot(dir)
    }

    /// Months holding events (PostgreSQL: partitions, one made ahead), oldest first.
    pub fn months(&self) -> Vec<u32> {
        self.backend.months()
    }

    fn write_loop(&self, mut inbox: Inbox<Msg>) {
        let idle = || self.backend.has_unfiled_keys().then_some(FILE_IDLE);
        let file_keys = |force: bool| self.backend.file_object_keys(force);
        loop {
            let first = match inbox.recv_within(idle()) {
                Ok(first) => first,
                Err(RecvTimeoutError::Timeout) => {
                    file_keys(true);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    file_keys(true);
                    if let Err(e) = self.sync_files() {
                        tracing::error!(error = %e, "event month files not synced at close");
                    }
                    return;
                }
            };
            // Appends queued together commit together; a sync covers the appends before it.
            let (mut batch, mut count, mut sync) = (Vec::new(), 0, None);
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Append(a) => {
                        count += a.events.len();
                        batch.push(a);
                    }
                    Msg::Sync(ack) => {
                        sync = Some(ack);
                        break;
                    }
                }
                if count < MAX_BATCH {
                    next = inbox.try_recv();
                }
            }
            if !batch.is_empty() {
                self.commit_batch(batch);
            }
            inbox.finished();
            file_keys(false);
            // Answered after the filing step, so whoever waits on a sync finds the writer
            // between messages.
            if let Some(ack) = sync {
                let _ = ack.send(self.sync_files());
            }
        }
    }

    /// Commits a batch of appends, one commit per month, and answers each.
    fn commit_batch(&self, batch: Vec<Append>) {
        let durable = batch.iter().any(|a| a.durable);
        let mut by_month: BTreeMap<u32, Vec<(&Event, &[u8])>> = BTreeMap::new();
        for a in &batch {
            for (e, row) in &a.events {
                by_month
                    .entry(month_of(e.ts))
                    .or_default()
                    .push((e, &row[..]));
            }
        }
        let result = by_month
            .into_iter()
            .try_for_each(|(month, events)| self.backend.commit(month, &events, durable));
        for a in batch {
            let _ = a.ack.send(result.clone());
        }
    }

    /// Makes the month files' commits durable (PostgreSQL's are at once).
    fn sync_files(&self) -> Result<(), StoreError> {
        self.backend.sync()
    }

    /// Resolves once every event stored before this call is durable.
    pub(crate) async fn sync(&self) -> Result<(), StoreError> {
        let (ack, done) = oneshot::channel();
        if self.writer.send(Msg::Sync(ack)).is_err() {
            return Err(StoreError::Unavailable("event store closed".into()));
        }
        done.await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("event writer gone".into())))
    }

    /// Queues events with no other copy (forwarded by a federation site) for the next group
    /// commit; the receiver resolves once they are durable.
    pub fn append(&self, events: Vec<Arc<Event>>) -> oneshot::Receiver<Result<(), StoreError>> {
        let encoded: Result<Vec<_>, StoreError> = events
            .into_iter()
            .map(|e| super::event_rows::encode_event(&e).map(|row| (e, Bytes::from(row))))
            .collect();
        match encoded {
            Ok(events) => self.queue(events, true),
            Err(e) => {
                let (ack, done) = oneshot::channel();
                let _ = ack.send(Err(e));
                done
            }
        }
    }

    /// Queues journaled events (encoded once, for the journal) for the next group commit; the
    /// receiver resolves once they are committed, durable once `sync` has returned after it.
    pub(crate) fn append_journaled(
        &self,
        events: Vec<(Arc<Event>, Bytes)>,
    ) -> oneshot::Receiver<Result<(), StoreError>> {
        self.queue(events, false)
    }

    /// Reads that begin after this returns wait for the events (`settled`).
    fn queue(
        &self,
        events: Vec<(Arc<Event>, Bytes)>,
        durable: bool,
    ) -> oneshot::Receiver<Result<(), StoreError>> {
        let (ack, done) = oneshot::channel();
        let append = Append {
            events,
            durable,
            ack,
        };
        if let Err(Msg::Append(refused)) = self.writer.send(Msg::Append(append)) {
            let _ = refused
                .ack
                .send(Err(StoreError::Unavailable("event store closed".into())));
        }
        done
    }

    /// Tells every process on the database that `events` (forwarded by a federation site,
    /// stored with the site's ids, so not in the journal the relays read) are stored: the
    /// other processes' relays publish them (`Store::take_forwarded`), and this process's relay
    /// leaves what it announced (`announcer`) to the caller. False where no other process
    /// shares the store (the month files). Blocking.
    pub(crate) fn announce_forwarded(&self, events: &[Arc<Event>]) -> Result<bool, StoreError> {
        self.backend.announce_forwarded(&self.announcer, events)
    }

    /// This process's name in its announcements of forwarded events.
    pub(crate) fn announcer(&self) -> &str {
        &self.announcer
    }

    /// The stored events of `keys`, in id order; keys of events no longer stored are left
    /// out. Blocking.
    pub(crate) fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError> {
        let mut found = self.backend.by_keys(keys)?;
        found.sort_by_key(|e| e.id);
        Ok(found)
    }

    /// The ids of the events of `keys` that are stored. Blocking.
    pub fn stored(&self, keys: &[EventKey]) -> Result<HashSet<Uuid>, StoreError> {
        self.backend.stored(keys)
    }

    /// Resolves once every append queued before this call is committed (or failed).
    pub(crate) async fn settled(&self) {
        self.writer.settled().await;
    }

    /// Newest first: at most `limit` events matching `filter` strictly before `before`.
    /// Blocking.
    pub fn newest(
        &self,
        filter: &EventFilter,
        before: Option<Position>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.read(
            filter,
            Scan {
                lo: None,
                hi: before,
                descending: true,
                limit,
            },
        )
    }

    /// Oldest first: at most `limit` events matching `filter` strictly after `after`. Blocking.
    pub fn oldest(
        &self,
        filter: &EventFilter,
        after: Option<Position>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.read(
            filter,
            Scan {
                lo: after,
                hi: None,
                descending: false,
                limit,
            },
        )
    }

    fn read(&self, filter: &EventFilter, scan: Scan) -> Result<Vec<Event>, StoreError> {
        self.backend.read(filter, scan)
    }

    /// How many events of `month` (all tenants) lie after `after`. Blocking.
    pub fn count_after(&self, month: u32, after: Position) -> Result<u64, StoreError> {
        self.backend.count_after(month, after)
    }

    /// Removes the months older than `keep_from` (a `YYYYMM`), whole files or partitions;
    /// returns the months removed.
    pub fn remove_months_before(&self, keep_from: u32) -> Vec<u32> {
        self.backend.remove_months_before(keep_from)
    }

    /// Stops the writer after it has committed everything queued, and closes the files.
    pub fn close(&self) {
        self.writer.close();
        self.backend.close();
    }
}

impl MonthStore for MonthFiles {
    /// Month files present on disk, oldest first.
    fn months(&self) -> Vec<u32> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot list the event month files");
                return Vec::new();
            }
        };
        let mut months: Vec<u32> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_prefix("events-")?
                    .strip_suffix(".redb")?
                    .parse()
                    .ok()
            })
            .collect();
        months.sort_unstable();
        months
    }

    /// Commits events to `month`'s file, synced or not (see the module's comment).
    fn commit(
        &self,
        month: u32,
        events: &[(&Event, &[u8])],
        durable: bool,
    ) -> Result<(), StoreError> {
        let file = self.file(month, true)?.ok_or(StoreError::NotFound)?;
        let seq = file.unfiled().next_seq;
        let mut object_keys = Vec::new();
        let mut type_keys = Vec::with_capacity(events.len());
        let mut tx = file.db.begin_write().map_err(StoreError::from_redb)?;
        if durable {
            tx.set_quick_repair(true);
        } else {
            tx.set_durability(redb::Durability::None)
                .map_err(|e| StoreError::Internal(e.to_string()))?;
        }
        {
            let mut main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
            let mut by_source = tx.open_table(BY_SOURCE).map_err(StoreError::from_redb)?;
            for (e, row) in events {
                let t = e.tenant_id.as_bytes();
                let sfx = suffix(e.ts.as_millis(), &e.id);
                main.insert(cat(t, &sfx).as_slice(), *row)
                    .map_err(StoreError::from_redb)?;
                if let Some(o) = e.object_id {
                    object_keys.push(runs::key(&object_prefix(&e.tenant_id, &o), &sfx));
                }
                if let Some(s) = &e.source_id {
                    by_source
                        .insert(cat(&source_prefix(&e.tenant_id, s), &sfx).as_slice(), ())
                        .map_err(StoreError::from_redb)?;
                }
                type_keys.push(runs::key(&type_prefix(&e.tenant_id, e.kind), &sfx));
            }
            // A type's keys mostly extend its last run: a row or two per type a commit.
            type_keys.sort_unstable();
            type_keys.dedup();
            runs::file(
                &mut tx
                    .open_table(runs::TYPE_RUNS)
                    .map_err(StoreError::from_redb)?,
                &type_keys,
            )?;
            if !object_keys.is_empty() {
                tx.open_table(UNFILED)
                    .map_err(StoreError::from_redb)?
                    .insert(seq, object_keys.concat().as_slice())
                    .map_err(StoreError::from_redb)?;
            }
        }
        tx.commit().map_err(StoreError::from_redb)?;
        file.unsynced.store(!durable, Ordering::SeqCst);
        let mut unfiled = file.unfiled();
        unfiled.next_seq = seq + 1;
        if !object_keys.is_empty() {
            unfiled.push(seq, object_keys);
        }
        Ok(())
    }

    /// Makes every open month file's commits durable.
    fn sync(&self) -> Result<(), StoreError> {
        self.open_files().iter().try_for_each(|f| f.sync())
    }

    /// Whether an open month file holds object keys not yet filed.
    fn has_unfiled_keys(&self) -> bool {
        self.files
            .locked()
            .values()
            .any(|f| f.unfiled().waiting() > 0)
    }

    fn file_object_keys(&self, force: bool) {
        MonthFiles::file_object_keys(self, force);
    }

    fn announce_forwarded(&self, _: &str, _: &[Arc<Event>]) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError> {
        MonthFiles::by_keys(self, keys)
    }

    /// One read of each month the keys fall in.
    fn stored(&self, keys: &[EventKey]) -> Result<HashSet<Uuid>, StoreError> {
        let mut by_month: BTreeMap<u32, Vec<&EventKey>> = BTreeMap::new();
        for k in keys {
            by_month.entry(month_of(k.ts)).or_default().push(k);
        }
        let mut found = HashSet::new();
        for (month, keys) in by_month {
            let Some(file) = self.file(month, false)? else {
                continue;
            };
            let tx = file.db.begin_read().map_err(StoreError::from_redb)?;
            let main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
            for k in keys {
                let key = cat(k.tenant.as_bytes(), &suffix(k.ts.as_millis(), &k.id));
                if main
                    .get(key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .is_some()
                {
                    found.insert(k.id);
                }
            }
        }
        Ok(found)
    }

    /// Reads the month files that can hold events between the scan's and the filter's
    /// bounds, newest month first when descending, until `limit` events matched. Blocking.
    fn read(&self, filter: &EventFilter, scan: Scan) -> Result<Vec<Event>, StoreError> {
        let month_at = |ms: i64| {
            month_of(Timestamp::from_millis(ms).unwrap_or(Timestamp(jiff::Timestamp::MIN)))
        };
        let lower = scan
            .lo
            .map(|p| p.ms)
            .or(filter.from.map(|f| f.as_millis()))
            .map(month_at);
        let upper = scan
            .hi
            .map(|p| p.ms)
            .or(filter.to.map(|t| t.as_millis()))
            .map(month_at);
        let mut months: Vec<u32> = self
            .months()
            .into_iter()
            .filter(|m| lower.is_none_or(|l| *m >= l) && upper.is_none_or(|u| *m <= u))
            .collect();
        if scan.descending {
            months.reverse();
        }
        let mut out = Vec::new();
        for month in months {
            if let Some(file) = self.file(month, false)? {
                Self::scan_month(&file, filter, scan, &mut out)?;
            }
            if out.len() >= scan.limit {
                break;
            }
        }
        Ok(out)
    }

    /// How many events of `month` (all tenants) lie after `after`. Blocking; reads the whole
    /// file when `after` is in or before it.
    fn count_after(&self, month: u32, after: Position) -> Result<u64, StoreError> {
        let Some(file) = self.file(month, false)? else {
            return Ok(0);
        };
        let from = suffix(after.ms, &after.id);
        let tx = file.db.begin_read().map_err(StoreError::from_redb)?;
        let main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
        let mut n = 0;
        for row in main.iter().map_err(StoreError::from_redb)? {
            let (k, _) = row.map_err(StoreError::from_redb)?;
            if k.value().get(16..).is_some_and(|s| s > from.as_slice()) {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Deletes the month files older than `keep_from` (a `YYYYMM`); returns the months removed.
    fn remove_months_before(&self, keep_from: u32) -> Vec<u32> {
        let mut removed = Vec::new();
        for month in self.months().into_iter().filter(|m| *m < keep_from) {
            self.files.locked().remove(&month);
            match std::fs::remove_file(self.dir.join(file_name(month))) {
                Ok(()) => removed.push(month),
                Err(e) => {
                    tracing::error!(month, error = %e, "could not remove an expired event file")
                }
            }
        }
        removed
    }

    fn snapshot(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let mut names = Vec::new();
        for month in self.months() {
            let Some(file) = self.file(month, false)? else {
                continue;
            };
            let name = file_name(month);
            super::backup::snapshot_db(&file.db, &dir.join(&name), |from, to| {
                super::backup::copy_tables!(
                    from,
                    to,
                    [MAIN, runs::RUNS, runs::TYPE_RUNS, BY_SOURCE, UNFILED]
                )
            })?;
            names.push(name);
        }
        Ok(names)
    }

    fn close(&self) {
        self.files.locked().clear();
    }

    #[cfg(test)]
    fn files(&self) -> Option<&MonthFiles> {
        Some(self)
    }
}

impl MonthFiles {
    fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            files: Mutex::new(BTreeMap::new()),
        }
    }

    fn file(&self, month: u32, create: bool) -> Result<Option<Arc<MonthFile>>, StoreError> {
        let mut files = self.files.locked();
        if let Some(file) = files.get(&month) {
            return Ok(Some(file.clone()));
        }
        let path = self.dir.join(file_name(month));
        if !create && !path.exists() {
            return Ok(None);
        }
        let mut builder = Database::builder();
        builder.set_cache_size(FILE_CACHE_BYTES);
        let db = builder.create(&path).map_err(StoreError::from_open)?;
        let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        runs::convert_rows_per_key(&tx)?;
        for t in [runs::RUNS, runs::TYPE_RUNS] {
            tx.open_table(t).map_err(StoreError::from_redb)?;
        }
        tx.open_table(BY_SOURCE).map_err(StoreError::from_redb)?;
        tx.open_table(MAIN).map_err(StoreError::from_redb)?;
        let mut unfiled = Unfiled::default();
        {
            let journal = tx.open_table(UNFILED).map_err(StoreError::from_redb)?;
            for row in journal.iter().map_err(StoreError::from_redb)? {
                let (seq, keys) = row.map_err(StoreError::from_redb)?;
                if keys.value().len() % RUN_KEY_LEN != 0 {
                    return Err(StoreError::Corrupt("unfiled object keys cut short".into()));
                }
                unfiled.push(
                    seq.value(),
                    keys.value()
                        .chunks_exact(RUN_KEY_LEN)
                        .filter_map(|k| RunKey::try_from(k).ok())
                        .collect(),
                );
                unfiled.next_seq = seq.value() + 1;
            }
        }
        tx.commit().map_err(StoreError::from_redb)?;
        let file = Arc::new(MonthFile {
            db,
            unfiled: Mutex::new(unfiled),
            unsynced: AtomicBool::new(false),
        });
        files.insert(month, file.clone());
        Ok(Some(file))
    }

    /// Files the object keys of every open month file (`force`), or the next chunk of those
    /// filing or holding `FILE_AFTER` or more.
    fn file_object_keys(&self, force: bool) {
        for f in self.open_files() {
            let due = {
                let unfiled = f.unfiled();
                unfiled.filing.is_some()
                    || unfiled.waiting() > 0 && (force || unfiled.waiting() >= FILE_AFTER)
            };
            if !due {
                continue;
            }
            // Forced, until every key is filed (only this thread journals more).
            loop {
                match f.file_object_keys() {
                    Ok(more) if force && (more || f.unfiled().waiting() > 0) => {}
                    Ok(_) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "object index not updated; keys stay unfiled");
                        break;
                    }
                }
            }
        }
    }

    /// The open month files, outside the lock.
    fn open_files(&self) -> Vec<Arc<MonthFile>> {
        self.files.locked().values().cloned().collect()
    }

    fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError> {
        let mut found = Vec::with_capacity(keys.len());
        for k in keys {
            let Some(file) = self.file(month_of(k.ts), false)? else {
                continue;
            };
            let tx = file.db.begin_read().map_err(StoreError::from_redb)?;
            let main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
            let key = cat(k.tenant.as_bytes(), &suffix(k.ts.as_millis(), &k.id));
            if let Some(row) = main.get(key.as_slice()).map_err(StoreError::from_redb)? {
                found.push(decode_event(row.value())?);
            }
        }
        Ok(found)
    }

    /// The index the filter reads and the prefix of its keys there: the index of the filter's
    /// object, source or single type, else the events themselves.
    fn plan(filter: &EventFilter) -> (Index, Vec<u8>) {
        if let Some(o) = filter.object_id {
            return (
                Index::Runs(runs::RUNS),
                object_prefix(&filter.tenant_id, &o).to_vec(),
            );
        }
        if let Some(s) = &filter.source_id {
            return (Index::Source, source_prefix(&filter.tenant_id, s));
        }
        if let [only] = filter.types.as_slice() {
            return (
                Index::Runs(runs::TYPE_RUNS),
                type_prefix(&filter.tenant_id, *only).to_vec(),
            );
        }
        (Index::Events, filter.tenant_id.as_bytes().to_vec())
    }

    /// Reads one month file: matching events between the scan's bounds, in its direction.
    fn scan_month(
        file: &MonthFile,
        filter: &EventFilter,
        scan: Scan,
        out: &mut Vec<Event>,
    ) -> Result<(), StoreError> {
        let Scan {
            lo,
            hi,
            descending,
            limit,
        } = scan;
        let (index, prefix) = Self::plan(filter);
        let from_ms = filter.from.map_or(0, |f| f.as_millis());
        let lo_key = match lo {
            Some(p) => {
                // Exclusive: the key just after p.
                let mut k = cat(&prefix, &suffix(p.ms, &p.id));
                k.push(0);
                k
            }
            None => cat(&prefix, &suffix(from_ms, &Uuid::nil())),
        };
        let lo_key = lo_key.max(cat(&prefix, &suffix(from_ms, &Uuid::nil())));
        let to_key = filter
            .to
            .map(|t| cat(&prefix, &suffix(t.as_millis(), &Uuid::max())));
        let hi_key = match hi {
            Some(p) => cat(&prefix, &suffix(p.ms, &p.id)),
            None => {
                let mut k = cat(&prefix, &[0xff; 24]);
                k.push(0xff);
                k
            }
        };
        let hi_key = match to_key {
            Some(t) => {
                let mut t = t;
                t.push(0);
                hi_key.min(t)
            }
            None => hi_key,
        };
        if lo_key >= hi_key {
            return Ok(());
        }
        // Copied before the snapshot opens: see `MonthFile::file_object_keys`.
        let unfiled = if filter.object_id.is_some() {
            file.unfiled_in(&lo_key, &hi_key, descending)
        } else {
            Vec::new()
        };
        let tx = file.db.begin_read().map_err(StoreError::from_redb)?;
        let main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
        let filed: Box<dyn Iterator<Item = Result<Vec<u8>, StoreError>>> = match index {
            Index::Runs(runs) => {
                let table = tx.open_table(runs).map_err(StoreError::from_redb)?;
                let keys = runs::Keys::new(&table, &prefix, &lo_key, &hi_key, descending)?;
                Box::new(keys.map(|k| k.map(|k| k.to_vec())))
            }
            Index::Source => {
                let table = tx.open_table(BY_SOURCE).map_err(StoreError::from_redb)?;
                let keys = table
                    .range(lo_key.as_slice()..hi_key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .map(|row| {
                        row.map(|(k, _)| k.value().to_vec())
                            .map_err(StoreError::from_redb)
                    });
                if descending {
                    Box::new(keys.rev())
                } else {
                    Box::new(keys)
                }
            }
            Index::Events => {
                let range = main
                    .range(lo_key.as_slice()..hi_key.as_slice())
                    .map_err(StoreError::from_redb)?;
                let rows: Box<dyn Iterator<Item = _>> = if descending {
                    Box::new(range.rev())
                } else {
                    Box::new(range)
                };
                for row in rows {
                    let (_, v) = row.map_err(StoreError::from_redb)?;
                    let e = decode_event(v.value())?;
                    if filter.matches(&e) {
                        out.push(e);
                        if out.len() >= limit {
                            break;
                        }
                    }
                }
                return Ok(());
            }
        };
        let mut take = |key: &[u8]| -> Result<bool, StoreError> {
            let sfx = &key[key.len() - 24..];
            let main_key = cat(filter.tenant_id.as_bytes(), sfx);
            if let Some(v) = main
                .get(main_key.as_slice())
                .map_err(StoreError::from_redb)?
            {
                let e = decode_event(v.value())?;
                if filter.matches(&e) {
                    out.push(e);
                }
            }
            Ok(out.len() >= limit)
        };
        let mut filed = filed.peekable();
        let mut unfiled = unfiled.into_iter().peekable();
        // Filed and unfiled keys merged in the scan's order; a key in both counts once.
        loop {
            let (from_filed, in_both) = match (filed.peek(), unfiled.peek()) {
                (None, None) => break,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => (true, false),
                (None, Some(_)) => (false, false),
                (Some(Ok(f)), Some(u)) => (if descending { f >= u } else { f <= u }, f == u),
            };
            if in_both {
                unfiled.next();
            }
            let key = if from_filed {
                filed.next().transpose()?
            } else {
                unfiled.next()
            };
            match key {
                Some(key) if !take(&key)? => {}
                _ => break,
            }
        }
        Ok(())
    }

    /// Hands every event of `month` to `each`, a page at a time, in key order.
    #[cfg(feature = "postgres")]
    fn each_of_month(&self, month: u32, each: &mut EachPage<'_>) -> Result<(), StoreError> {
        let Some(file) = self.file(month, false)? else {
            return Ok(());
        };
        let tx = file.db.begin_read().map_err(StoreError::from_redb)?;
        let main = tx.open_table(MAIN).map_err(StoreError::from_redb)?;
        let mut page = Vec::new();
        for row in main.iter().map_err(StoreError::from_redb)? {
            let (_, v) = row.map_err(StoreError::from_redb)?;
            let row = v.value().to_vec();
            page.push((decode_event(&row)?, row));
            if page.len() == COPY_PAGE {
                each(&page)?;
                page.clear();
            }
        }
        if page.is_empty() { Ok(()) } else { each(&page) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{EventType, Severity};
    use serde_json::json;

    fn ev(
        tenant: Uuid,
        ts: &str,
        kind: EventType,
        object: Option<Uuid>,
        source: Option<&str>,
    ) -> Event {
        let ts: Timestamp = ts.parse().unwrap();
        let ms = u64::try_from(ts.as_millis()).unwrap();
        let id = Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            ms / 1000,
            ((ms % 1000) * 1_000_000) as u32,
        ));
        Event {
            id,
            tenant_id: tenant,
            ts,
            kind,
            object_id: object,
            source_id: source.map(String::from),
            severity: Some(Severity::Info),
            payload: json!({"labels": {"a": "b"}}).into(),
            site: None,
        }
    }

    #[tokio::test]
    async fn events_are_found_by_their_keys_as_a_notice_carries_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = EventStore::open(dir.path()).unwrap();
        let t = Uuid::from_u128(1);
        let later = ev(t, "2026-02-03T00:00:00Z", EventType::Ingress, None, None);
        let earlier = ev(t, "2026-01-31T23:59:59Z", EventType::Config, None, None);
        store
            .append(vec![Arc::new(later.clone()), Arc::new(earlier.clone())])
            .await
            .unwrap()
            .unwrap();
        let never_stored = [
            ev(t, "2026-02-03T00:00:01Z", EventType::Ingress, None, None),
            ev(t, "2025-07-01T00:00:00Z", EventType::Ingress, None, None),
        ];
        let keys: Vec<EventKey> = [&later, &never_stored[0], &earlier, &never_stored[1]]
            .into_iter()
            .map(EventKey::of)
            .collect();
        let text: Vec<String> = keys.iter().map(EventKey::to_text).collect();
        let noted = format!(
            "{} not:a:key {}:x:{}",
            text.join(" "),
            t.simple(),
            t.simple()
        );
        assert_eq!(
            EventKey::parse_list(&noted),
            keys,
            "what does not parse is left out"
        );
        assert_eq!(
            EventKey::parse_announcement(&format!("0a1b2c {noted}")),
            ("0a1b2c", keys.clone()),
            "an announcement names its announcer first"
        );
        let found = store.by_keys(&keys).unwrap();
        assert_eq!(
            found.iter().map(|e| e.id).collect::<Vec<_>>(),
            [earlier.id, later.id],
            "the stored ones, in id order"
        );
        assert_eq!(found[1].payload, later.payload);
    }

    #[tokio::test]
    async fn month_files_indexes_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = EventStore::open(dir.path()).unwrap();
        let t = Uuid::from_u128(1);
        let other = Uuid::from_u128(2);
        let obj = Uuid::from_u128(9);
        let events = [
            ev(t, "2026-01-31T23:59:59Z", EventType::Config, None, None),
            ev(
                t,
                "2026-02-01T00:00:01Z",
                EventType::StateChange,
                Some(obj),
                None,
            ),
            ev(
                t,
                "2026-02-03T00:00:00Z",
                EventType::Ingress,
                None,
                Some("hook"),
            ),
            ev(
                other,
                "2026-02-04T00:00:00Z",
                EventType::Ingress,
                None,
                Some("hook"),
            ),
            ev(
                t,
                "2026-03-01T00:00:00Z",
                EventType::StateChange,
                Some(obj),
                None,
            ),
        ];
        store
            .append(events.iter().cloned().map(Arc::new).collect())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(store.months(), vec![202601, 202602, 202603]);
        let all = EventFilter {
            tenant_id: t,
            ..Default::default()
        };
        let newest = store.newest(&all, None, 10).unwrap();
        let ids: Vec<Uuid> = newest.iter().map(|e| e.id).collect();
        assert_eq!(
            ids,
            vec![events[4].id, events[2].id, events[1].id, events[0].id]
        );
        // Keyset continuation.
        let page = store
            .newest(&all, Position::of_id(events[2].id), 10)
            .unwrap();
        assert_eq!(
            page.iter().map(|e| e.id).collect::<Vec<_>>(),
            vec![events[1].id, events[0].id]
        );
        let by_obj = EventFilter {
            object_id: Some(obj),
            ..all.clone()
        };
        assert_eq!(store.newest(&by_obj, None, 10).unwrap().len(), 2);
        let by_src = EventFilter {
            source_id: Some("hook".into()),
            ..all.clone()
        };
        assert_eq!(
            store.newest(&by_src, None, 10).unwrap().len(),
            1,
            "tenant isolation on the source index"
        );
        let by_type = EventFilter {
            types: vec![EventType::StateChange],
            ..all.clone()
        };
        assert_eq!(
            store.oldest(&by_type, None, 10).unwrap()[0].id,
            events[1].id
        );
        // The type index's runs, both ways, from a position, one tenant's and one type's alone.
        let ids = |found: Vec<Event>| found.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(
            ids(store.newest(&by_type, None, 10).unwrap()),
            [events[4].id, events[1].id]
        );
        assert_eq!(
            ids(store
                .newest(&by_type, Position::of_id(events[4].id), 10)
                .unwrap()),
            [events[1].id]
        );
        let ingress = EventFilter {
            types: vec![EventType::Ingress],
            ..all.clone()
        };
        assert_eq!(
            ids(store.oldest(&ingress, None, 10).unwrap()),
            [events[2].id]
        );
        let window = EventFilter {
            from: Some("2026-02-01T00:00:00Z".parse().unwrap()),
            to: Some("2026-02-28T00:00:00Z".parse().unwrap()),
            ..all.clone()
        };
        assert_eq!(store.newest(&window, None, 10).unwrap().len(), 2);
        assert_eq!(
            store
                .oldest(&window, Position::of_id(events[1].id), 10)
                .unwrap()[0]
                .id,
            events[2].id
        );
        assert_eq!(store.remove_months_before(202602), vec![202601]);
        assert_eq!(store.months(), vec![202602, 202603]);
        assert_eq!(store.newest(&all, None, 10).unwrap().len(), 3);
        store.close();
    }

    /// Journaled events are readable once committed and durable only after `sync`, which a
    /// copy of the file taken while the store runs shows (it is what a crash would leave);
    /// events with no other copy are durable when their append resolves.
    #[tokio::test]
    async fn journaled_events_are_durable_after_a_sync_and_forwarded_ones_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let t = Uuid::from_u128(1);
        let all = EventFilter {
            tenant_id: t,
            ..Default::default()
        };
        let event = |s: u32| {
            let e = ev(
                t,
                &format!("2026-03-01T00:00:{s:02}Z"),
                EventType::System,
                None,
                None,
            );
            let row = super::super::codec::encode(&e).unwrap();
            (Arc::new(e), Bytes::from(row))
        };
        let store = EventStore::open(dir.path()).unwrap();
        let crashed = |name: &str| {
            let copy = dir.path().join(name);
            std::fs::create_dir(&copy).unwrap();
            std::fs::copy(
                dir.path().join(file_name(202603)),
                copy.join(file_name(202603)),
            )
            .unwrap();
            let reopened = EventStore::open(&copy).unwrap();
            let n = reopened.newest(&all, None, 10).unwrap().len();
            reopened.close();
            n
        };
        store.append(vec![event(0).0]).await.unwrap().unwrap();
        assert_eq!(
            crashed("forwarded"),
            1,
            "a forwarded event is durable at once"
        );
        for s in 1..4 {
            store
                .append_journaled(vec![event(s)])
                .await
                .unwrap()
                .unwrap();
        }
        assert_eq!(
            store.newest(&all, None, 10).unwrap().len(),
            4,
            "readable at once"
        );
        assert_eq!(crashed("committed"), 1, "journaled ones wait for a sync");
        store.sync().await.unwrap();
        assert_eq!(crashed("synced"), 4);
        store.sync().await.unwrap();
        store.close();
    }

    const TENANT: Uuid = Uuid::from_u128(1);
    const OBJECT: Uuid = Uuid::from_u128(9);

    /// State changes of one object, a second apart, at the seconds of `range` on 2026-03-01.
    fn object_events(range: std::ops::Range<u32>) -> Vec<Arc<Event>> {
        range
            .map(|s| {
                let at = format!("2026-03-01T00:00:{s:02}Z");
                Arc::new(ev(TENANT, &at, EventType::StateChange, Some(OBJECT), None))
            })
            .collect()
    }

    /// The events of that object.
    fn object_filter() -> EventFilter {
        EventFilter {
            tenant_id: TENANT,
            object_id: Some(OBJECT),
            ..Default::default()
        }
    }

    /// Appends, then waits until the writer's filing steps have run: the writer files the
    /// next chunk of a filing under way after each message and answers a sync only after that
    /// step, so a test that files by hand next is the only filer (two would take the same
    /// chunk).
    async fn append_settled(store: &EventStore, events: Vec<Arc<Event>>) {
        store.append(events).await.unwrap().unwrap();
        store.sync().await.unwrap();
    }

    /// The open month file of March 2026.
    fn march_file(store: &EventStore) -> Arc<MonthFile> {
        store
            .backend
            .files()
            .unwrap()
            .file(202603, false)
            .unwrap()
            .unwrap()
    }

    /// A filing takes the keys journaled when it began, a chunk per call; keys journaled
    /// meanwhile wait for the next, and only the filing's own journal rows go with its last
    /// chunk. Reads by object see every event throughout, and after a crash mid-way.
    #[tokio::test]
    async fn object_keys_are_filed_a_chunk_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (batch, by_object) = (object_events, object_filter());
        let ids = |events: Vec<Event>| events.iter().map(|e| e.id).collect::<Vec<_>>();
        let store = EventStore::open(dir.path()).unwrap();
        let first = batch(0..4);
        append_settled(&store, first.clone()).await;
        let file = march_file(&store);
        assert!(file.file_object_keys().unwrap(), "a chunk of 3 of the 4");
        assert_eq!(file.unfiled().waiting(), 1);
        let second = batch(4..6);
        append_settled(&store, second.clone()).await;
        let all: Vec<Uuid> = first.iter().chain(&second).map(|e| e.id).collect();
        assert_eq!(ids(store.oldest(&by_object, None, 10).unwrap()), all);
        assert!(
            file.unfiled().filing.is_none(),
            "the writer filed the filing's last key after the append"
        );
        assert_eq!(file.unfiled().waiting(), 2, "journaled after it began");
        let journal_rows = |file: &MonthFile| {
            let tx = file.db.begin_read().unwrap();
            tx.open_table(UNFILED).unwrap().iter().unwrap().count()
        };
        assert_eq!(journal_rows(&file), 1, "the second append's row stays");
        assert_eq!(ids(store.oldest(&by_object, None, 10).unwrap()), all);
        drop(file);
        store.close();
        drop(store);

        // A crash in the middle of a filing: its chunks filed so far are in the index and
        // still in the journal. Opening loads them again; a read counts each once, and filing
        // them again changes nothing.
        let path = dir.path().join(file_name(202603));
        {
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            {
                let index = tx.open_table(runs::RUNS).unwrap();
                let row: Vec<u8> = runs::all(&index).into_iter().take(3).flatten().collect();
                drop(index);
                tx.open_table(UNFILED)
                    .unwrap()
                    .insert(7, row.as_slice())
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        let store = EventStore::open(dir.path()).unwrap();
        let file = march_file(&store);
        assert_eq!(file.unfiled().waiting(), 3);
        assert_eq!(ids(store.oldest(&by_object, None, 10).unwrap()), all);
        while file.file_object_keys().unwrap() {}
        assert_eq!(journal_rows(&file), 0);
        let newest_first: Vec<Uuid> = all.into_iter().rev().collect();
        assert_eq!(
            ids(store.newest(&by_object, None, 10).unwrap()),
            newest_first
        );
    }

    #[tokio::test]
    async fn object_keys_are_filed_late_and_survive_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (batch, by_object) = (object_events, object_filter());
        let store = EventStore::open(dir.path()).unwrap();
        let first = batch(0..4);
        append_settled(&store, first.clone()).await;
        let file = march_file(&store);
        assert_eq!(file.unfiled().waiting(), 4, "not filed yet");
        assert_eq!(store.newest(&by_object, None, 10).unwrap().len(), 4);
        while file.file_object_keys().unwrap() {}
        assert_eq!(file.unfiled().waiting(), 0);
        let second = batch(4..7);
        store.append(second.clone()).await.unwrap().unwrap();
        // Filed and unfiled keys merge in time order, both ways, with pages.
        let expected: Vec<Uuid> = first.iter().chain(&second).map(|e| e.id).collect();
        let ids = |events: Vec<Event>| events.iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(store.oldest(&by_object, None, 10).unwrap()), expected);
        let newest = ids(store.newest(&by_object, None, 5).unwrap());
        assert_eq!(
            newest,
            expected.iter().rev().take(5).copied().collect::<Vec<_>>()
        );
        let before = Position::of_id(newest[4]);
        assert_eq!(
            ids(store.newest(&by_object, before, 5).unwrap()),
            vec![expected[1], expected[0]]
        );
        drop(file);
        store.close();

        // A crash between an append and its filing: the commit's keys are only in the journal.
        let path = dir.path().join(file_name(202603));
        {
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            {
                let mut index = tx.open_table(runs::RUNS).unwrap();
                let mut filed = runs::all(&index);
                let row: Vec<u8> = filed.split_off(filed.len() - 2).concat();
                index.retain(|_, _| false).unwrap();
                runs::file(&mut index, &filed).unwrap();
                tx.open_table(UNFILED)
                    .unwrap()
                    .insert(0, row.as_slice())
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        let store = EventStore::open(dir.path()).unwrap();
        assert_eq!(ids(store.oldest(&by_object, None, 10).unwrap()), expected);
        store.close();
        let db = Database::create(&path).unwrap();
        let tx = db.begin_read().unwrap();
        assert_eq!(
            runs::all(&tx.open_table(runs::RUNS).unwrap()).len(),
            7,
            "filed at close"
        );
        use redb::ReadableTableMetadata;
        assert!(tx.open_table(UNFILED).unwrap().is_empty().unwrap());
    }
}
