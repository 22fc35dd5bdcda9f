//! Metric series in their own file (`metrics.redb`) beside the main database: series by
//! tenant + object + metric name, raw samples, and 5-minute and 1-hour aggregates. One writer
//! thread group-commits the samples of many check results; reads run on any thread. At most
//! `MAX_SERIES` series: the samples of a further new series are refused and counted.
//!
//! Samples are filed late, like the event object index: every series keeps its samples and
//! aggregates on its own B-tree pages, so storing each commit's samples at once would dirty a
//! page per series per commit. A commit appends its samples as one packed journal row (and new
//! series to the series table); the writer keeps them in memory, where reads merge them in, and
//! files them in sorted bulk once `FILE_AFTER` have gathered or it has been idle for
//! `FILE_IDLE`: raw rows, the aggregates rolled forward once per series and bucket, and each
//! series' last value. Opening the file loads the journal, so nothing is lost across a crash.
//!
//! On PostgreSQL (`storage.backend: postgres`) the same tables are the database's (`pg`), so
//! every process on the database serves the same history; the writer thread and its batches
//! are the same.

use super::StoreError;
use super::codec::{decode, encode};
use super::writer::{Inbox, Writer};
use crate::model::health::MetricsStats;
use crate::model::metric::{Agg, Tier};
use crate::runtime::Locked;
use crate::runtime::Stopwatch;
use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use uuid::Uuid;

#[cfg(feature = "postgres")]
pub(super) mod pg;

pub const FILE: &str = "metrics.redb";
pub const MAX_SERIES: u64 = 100_000;

/// Series by tenant + object + metric name.
const SERIES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("series_by_tenant_object_metric");
/// `next_series_id`, `filings`.
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counter_by_name");
/// Sequence → the packed samples of one commit not yet filed (`pack`).
const UNFILED: TableDefinition<u64, &[u8]> = TableDefinition::new("samples_unfiled");
/// (series id, ms) → value.
const RAW: TableDefinition<(u64, i64), f64> = TableDefinition::new("sample_by_series_ts");
/// An aggregate as stored: (count, sum, min, max, last).
type AggRow = (u64, f64, f64, f64, f64);
/// (series id, bucket start ms) → aggregate.
const FIVE_MINUTES: TableDefinition<(u64, i64), AggRow> =
    TableDefinition::new("agg5m_by_series_bucket");
const ONE_HOUR: TableDefinition<(u64, i64), AggRow> =
    TableDefinition::new("agg1h_by_series_bucket");

/// A series and its points (bucket start or sample ms, aggregate), oldest first.
pub type SeriesPoints = (SeriesInfo, Vec<(i64, Agg)>);

const MAX_BATCH: usize = 20_000;
/// Unfiled samples that make the writer file them. A filing's cost is mostly per series (a
/// page of each tier and the series row rewritten), so the more samples each series has in one
/// filing the cheaper each sample: with 10,000 series under a stream of results, 65,536 took
/// 3.2 µs of the writer's CPU a sample and 262,144 1.3 to 1.8 (docs/performance.md). Held in
/// memory until filed: 24 bytes a sample, 6 MiB (up to twice that as the vector grows), freed
/// once filed; each read copies them.
const FILE_AFTER: usize = 262_144;
/// An idle writer files the samples it holds after this long.
const FILE_IDLE: Duration = Duration::from_secs(2);
/// Sample commits are made durable together, at most this long after the first of them: a
/// durable commit (its syncs and the allocator state kept for a quick repair, about 100 KB on a
/// gateway's card) for every small batch cost more than storing its samples. A power cut loses
/// at most this much of them, as it loses samples still queued; a clean stop files them all.
/// The same bound as the main store's refreshes.
const SYNC_WITHIN: Duration = super::committer::REFRESH_SYNC;
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// How often a store that could not be opened tries again.
const REOPEN_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub tenant: Uuid,
    pub object: Uuid,
    pub metric: String,
    pub unit: String,
    pub ms: i64,
    pub value: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeriesInfo {
    pub id: u64,
    pub metric: String,
    pub unit: String,
    pub first_ms: i64,
    pub last_ms: i64,
    pub last: f64,
}

enum Msg {
    /// Acknowledged once committed (or refused).
    Samples(Vec<Sample>, oneshot::Sender<()>),
    /// Drops data older than each tier's retention at `now_ms`, and the series of objects not
    /// among the live ones (when known); acknowledged with the rows removed.
    Prune(Prune, oneshot::Sender<Result<u64, StoreError>>),
}

/// What a prune removes.
pub struct Prune {
    pub now_ms: i64,
    /// Every (tenant, object) that exists, as seen at or after `now_ms`; `None` keeps every
    /// series. A series first seen at or after `now_ms` is kept either way: its object may be
    /// newer than the list.
    pub live: Option<HashSet<(Uuid, Uuid)>>,
}

/// The tenant and object a series key belongs to.
fn owner(key: &[u8]) -> Option<(Uuid, Uuid)> {
    Some((
        Uuid::from_slice(key.get(..16)?).ok()?,
        Uuid::from_slice(key.get(16..32)?).ok()?,
    ))
}

pub struct MetricsStore {
    backend: Box<dyn SeriesStore>,
    writer: Writer<Msg>,
    /// How long sample commits wait for their sync (`SYNC_WITHIN`).
    sync_within: Duration,
    series: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// Where series and their samples are kept: the one seam between the metric store and its
/// backends, `metrics.redb` (`MetricFile`: samples journaled, then filed into raw rows and
/// aggregates) or PostgreSQL's tables (`pg::Tables`). Blocking, on the writer thread or a
/// reader's.
trait SeriesStore: Send + Sync {
    /// Opens what it keeps (the file: repaired after a crash, its journal read back) and
    /// reads the series index.
    fn load(&self) -> Result<SeriesIndex, StoreError>;
    /// Stores the samples of known series, creating new series up to the cap; answers how
    /// many samples were refused for it.
    fn commit(&self, samples: &[Sample], index: &mut SeriesIndex) -> Result<u64, StoreError>;
    /// Whether a commit waits for a later durable one (`sync`, `file_unfiled`).
    fn durable_later(&self) -> bool;
    fn sync(&self) -> Result<(), StoreError>;
    /// Samples committed and not filed yet.
    fn unfiled(&self) -> usize;
    /// Files them in a durable commit.
    fn file_unfiled(&self, index: &SeriesIndex) -> Result<(), StoreError>;
    /// Removes what each tier no longer keeps and the series of deleted objects (with
    /// nothing unfiled); answers the rows removed.
    fn remove_expired(&self, p: &Prune, index: &mut SeriesIndex) -> Result<u64, StoreError>;
    fn series_of(&self, tenant: Uuid, object: Uuid) -> Result<Vec<SeriesInfo>, StoreError>;
    fn points(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        tier: Tier,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<SeriesPoints>, StoreError>;
    /// Writes `metrics.redb` into `dir` for a backup; `None` while nothing is open.
    fn snapshot(&self, dir: &Path) -> Result<Option<String>, StoreError>;
}

/// `metrics.redb`: the series, the journal of unfiled samples, raw rows and aggregates.
struct MetricFile {
    path: PathBuf,
    /// Set once the file is open (at start, or later by the writer thread).
    db: OnceLock<Arc<Database>>,
    unfiled: Mutex<Unfiled>,
}

/// One sample of a known series as the journal and memory hold it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    series: u64,
    ms: i64,
    value: f64,
}

const POINT_BYTES: usize = 24;

fn pack(points: &[Point]) -> Vec<u8> {
    let mut out = Vec::with_capacity(points.len() * POINT_BYTES);
    for p in points {
        out.extend_from_slice(&p.series.to_be_bytes());
        out.extend_from_slice(&p.ms.to_be_bytes());
        out.extend_from_slice(&p.value.to_bits().to_be_bytes());
    }
    out
}

fn unpack(bytes: &[u8]) -> Result<Vec<Point>, StoreError> {
    if !bytes.len().is_multiple_of(POINT_BYTES) {
        return Err(StoreError::Corrupt(
            "unfiled samples row is cut short".into(),
        ));
    }
    Ok(bytes
        .chunks_exact(POINT_BYTES)
        .map(|c| {
            let word = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&c[i * 8..i * 8 + 8]);
                b
            };
            Point {
                series: u64::from_be_bytes(word(0)),
                ms: i64::from_be_bytes(word(1)),
                value: f64::from_bits(u64::from_be_bytes(word(2))),
            }
        })
        .collect())
}

/// Samples committed to the journal and not yet filed, and how many filings the file has seen
/// (`filings` in `COUNTERS`), so a reader can tell whether its copy was filed since.
#[derive(Default)]
struct Unfiled {
    points: Vec<Point>,
    next_seq: u64,
    filings: u64,
}

/// A reader's copy of the unfiled samples, taken before it opens its snapshot.
struct UnfiledCopy {
    points: Vec<Point>,
    filings: u64,
}

impl UnfiledCopy {
    /// The copied samples of one series in arrival order, or none when the copy was filed
    /// into the snapshot `tx` reads.
    fn of(&self, series: u64, tx: &ReadTransaction) -> Result<Vec<Point>, StoreError> {
        let counters = tx.open_table(COUNTERS).map_err(StoreError::from_redb)?;
        let filings = counters
            .get("filings")
            .map_err(StoreError::from_redb)?
            .map_or(0, |v| v.value());
        if filings != self.filings {
            return Ok(Vec::new());
        }
        Ok(self
            .points
            .iter()
            .filter(|p| p.series == series)
            .copied()
            .collect())
    }
}

/// The series the writer knows: key → (id, unit), and id → key for filing.
#[derive(Default)]
struct SeriesIndex {
    by_key: HashMap<Vec<u8>, (u64, String)>,
    keys: HashMap<u64, Vec<u8>>,
    next_id: u64,
}

fn series_key(tenant: Uuid, object: Uuid, metric: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + metric.len());
    k.extend_from_slice(tenant.as_bytes());
    k.extend_from_slice(object.as_bytes());
    k.extend_from_slice(metric.as_bytes());
    k
}

fn agg_of(t: AggRow) -> Agg {
    Agg {
        count: t.0,
        sum: t.1,
        min: t.2,
        max: t.3,
        last: t.4,
    }
}

fn tuple_of(a: &Agg) -> AggRow {
    (a.count, a.sum, a.min, a.max, a.last)
}

fn counter(tx: &WriteTransaction, name: &str) -> Result<u64, StoreError> {
    let t = tx.open_table(COUNTERS).map_err(StoreError::from_redb)?;
    Ok(t.get(name)
        .map_err(StoreError::from_redb)?
        .map_or(0, |v| v.value()))
}

/// Points rolled up per bucket of `tier`, oldest bucket first; within a bucket the points fold
/// in the order given.
fn rollup(points: &[Point], tier: Tier) -> BTreeMap<i64, Agg> {
    let mut out: BTreeMap<i64, Agg> = BTreeMap::new();
    for p in points {
        out.entry(tier.bucket(p.ms))
            .and_modify(|a| a.merge(&Agg::of(p.value)))
            .or_insert_with(|| Agg::of(p.value));
    }
    out
}

/// A series row as stored.
fn stored_series(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<Option<SeriesInfo>, StoreError> {
    table
        .get(key)
        .map_err(StoreError::from_redb)?
        .map(|v| decode(v.value()))
        .transpose()
}

/// Moves a series' last value forward to the newest of its unfiled samples.
fn latest(info: &mut SeriesInfo, unfiled: &[Point]) {
    if let Some(newest) = unfiled.iter().max_by_key(|p| p.ms)
        && newest.ms >= info.last_ms
    {
        info.last_ms = newest.ms;
        info.last = newest.value;
    }
}

impl MetricsStore {
    /// Opens the file, or, when the disk refuses (full after a crash, say), starts without it:
    /// reads answer `Unavailable` and the writer thread keeps trying to open it every second,
    /// holding what is queued meanwhile.
    pub fn open(dir: &Path) -> Result<Arc<MetricsStore>, StoreError> {
        Self::open_on(dir, &super::Backing::File)
    }

    /// `open`, with the series in the main database's PostgreSQL when `backing` says so (a
    /// database that cannot be reached is tried again every second, as a file is).
    pub fn open_on(dir: &Path, backing: &super::Backing) -> Result<Arc<MetricsStore>, StoreError> {
        Self::open_syncing(dir, backing, SYNC_WITHIN)
    }

    /// `open_on`, with sample commits made durable within `sync_within`.
    fn open_syncing(
        dir: &Path,
        backing: &super::Backing,
        sync_within: Duration,
    ) -> Result<Arc<MetricsStore>, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(e.to_string()))?;
        let backend: Box<dyn SeriesStore> = match backing {
            super::Backing::File => Box::new(MetricFile {
                path: dir.join(FILE),
                db: OnceLock::new(),
                unfiled: Mutex::new(Unfiled::default()),
            }),
            #[cfg(feature = "postgres")]
            super::Backing::Postgres(target) => Box::new(pg::Tables::open(target)?),
        };
        let (writer, inbox) = Writer::new(1024);
        let store = Arc::new(MetricsStore {
            backend,
            writer,
            sync_within,
            series: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        });
        let opened = match store.load() {
            Ok(index) => Some(index),
            Err(e) => {
                tracing::error!(error = %e, "metric store not opened; retrying every second");
                None
            }
        };
        let worker = store.clone();
        store.writer.spawn("metrics-writer", move || {
            let mut inbox = inbox;
            let start = match opened {
                Some(index) => Some((index, Vec::new())),
                None => worker.reopen(&mut inbox),
            };
            if let Some((index, early)) = start {
                worker.write_loop(inbox, index, early);
            }
        })?;
        Ok(store)
    }

    /// Opens the backend and reads the series index.
    fn load(&self) -> Result<SeriesIndex, StoreError> {
        let index = self.backend.load()?;
        self.series
            .store(index.by_key.len() as u64, Ordering::Relaxed);
        Ok(index)
    }

    /// Tries `load` every second until it works, keeping the messages that arrive meanwhile;
    /// `None` once the store is closed first.
    fn reopen(&self, inbox: &mut Inbox<Msg>) -> Option<(SeriesIndex, Vec<Msg>)> {
        let mut early = Vec::new();
        loop {
            match inbox.recv_timeout(REOPEN_EVERY) {
                Ok(msg) => early.push(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
            match self.load() {
                Ok(index) => {
                    tracing::info!("metric store opened");
                    return Some((index, early));
                }
                Err(e) => tracing::debug!(error = %e, "metric store still not opened"),
            }
        }
    }

    /// Snapshots the metric database into `dir` for a backup (`metrics.redb`, whichever the
    /// backend); `None` while it is not open.
    pub fn snapshot(&self, dir: &Path) -> Result<Option<String>, StoreError> {
        self.backend.snapshot(dir)
    }

    /// Queues samples for the next group commit and resolves once they are stored; blocks
    /// while the writer is 1024 batches behind (backpressure, never a silent drop). Reads
    /// that begin after this returns wait for them (`settled`).
    pub fn record(&self, samples: Vec<Sample>) -> oneshot::Receiver<()> {
        let (ack, done) = oneshot::channel();
        if self.writer.send(Msg::Samples(samples, ack)).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        done
    }

    /// Removes what each tier no longer keeps and the series of deleted objects; resolves
    /// with the rows removed.
    pub fn prune(&self, prune: Prune) -> oneshot::Receiver<Result<u64, StoreError>> {
        let (ack, done) = oneshot::channel();
        let _ = self.writer.send(Msg::Prune(prune, ack));
        done
    }

    /// Resolves once every sample batch queued before this call is stored (or failed).
    pub(crate) async fn settled(&self) {
        self.writer.settled().await;
    }

    pub fn stats(&self) -> MetricsStats {
        MetricsStats {
            series: self.series.load(Ordering::Relaxed),
            max_series: MAX_SERIES,
            refused_samples: self.refused.load(Ordering::Relaxed),
            failed_batches: self.failed.load(Ordering::Relaxed),
        }
    }

    fn write_loop(&self, mut inbox: Inbox<Msg>, mut index: SeriesIndex, early: Vec<Msg>) {
        let mut early = early.into_iter();
        // Since the first sample commit not yet durable.
        let mut unsynced: Option<Stopwatch> = None;
        loop {
            let idle_work = (self.backend.unfiled() > 0).then_some(FILE_IDLE);
            let sync_due = unsynced.map(|since| self.sync_within.saturating_sub(since.elapsed()));
            let first = match early
                .next()
                .map_or_else(|| inbox.recv_within(sync_due.or(idle_work)), Ok)
            {
                Ok(first) => first,
                // A sync is due, else the idle filing. Filing at every sync would store each
                // small batch at once, when samples arrive a little slower than the window.
                Err(RecvTimeoutError::Timeout) => {
                    if unsynced.is_some() {
                        self.sync(&mut unsynced);
                    } else {
                        self.file(&index, &mut unsynced);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.file(&index, &mut unsynced);
                    return;
                }
            };
            let mut samples = Vec::new();
            let mut acks = Vec::new();
            let mut prune = None;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Samples(s, ack) => {
                        samples.extend(s);
                        acks.push(ack);
                    }
                    Msg::Prune(p, ack) => {
                        prune = Some((p, ack));
                        break;
                    }
                }
                if samples.len() < MAX_BATCH {
                    next = early.next().or_else(|| inbox.try_recv());
                }
            }
            if !samples.is_empty() {
                match self.commit(&samples, &mut index) {
                    Ok(()) if self.backend.durable_later() => {
                        unsynced.get_or_insert_with(Stopwatch::start);
                    }
                    Ok(()) => {}
                    Err(e) => {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(error = %e, samples = samples.len(), "metric samples not stored");
                    }
                }
            }
            for ack in acks {
                let _ = ack.send(());
            }
            if unsynced.is_some_and(|since| since.elapsed() >= self.sync_within) {
                self.sync(&mut unsynced);
            }
            if let Some((p, ack)) = prune {
                self.file(&index, &mut unsynced);
                let _ = ack.send(self.remove_expired(&p, &mut index));
            }
            inbox.finished();
            if self.backend.unfiled() >= FILE_AFTER {
                self.file(&index, &mut unsynced);
            }
        }
    }

    /// Stores the samples of known series, creating new series up to the cap.
    fn commit(&self, samples: &[Sample], index: &mut SeriesIndex) -> Result<(), StoreError> {
        let refused = self.backend.commit(samples, index)?;
        self.series
            .store(index.by_key.len() as u64, Ordering::Relaxed);
        self.refused.fetch_add(refused, Ordering::Relaxed);
        Ok(())
    }

    /// Makes the sample commits since the last durable one durable; a failure leaves them to
    /// the next try.
    fn sync(&self, unsynced: &mut Option<Stopwatch>) {
        if unsynced.is_none() {
            return;
        }
        let synced = self.backend.sync();
        match synced {
            Ok(()) => *unsynced = None,
            Err(e) => {
                tracing::error!(error = %e, "metric samples not made durable yet");
                *unsynced = Some(Stopwatch::start());
            }
        }
    }

    /// Files every unfiled sample in a durable commit, which makes the sample commits before
    /// it durable too; a failure leaves them in the journal for the next try.
    fn file(&self, index: &SeriesIndex, unsynced: &mut Option<Stopwatch>) {
        if self.backend.unfiled() == 0 {
            self.sync(unsynced);
            return;
        }
        match self.backend.file_unfiled(index) {
            Ok(()) => *unsynced = None,
            Err(e) => {
                tracing::error!(error = %e, "metric samples not filed; they stay in the journal");
                if unsynced.is_some() {
                    *unsynced = Some(Stopwatch::start());
                }
            }
        }
    }

    /// Runs with nothing unfiled (the caller files first).
    fn remove_expired(&self, p: &Prune, index: &mut SeriesIndex) -> Result<u64, StoreError> {
        let removed = self.backend.remove_expired(p, index)?;
        self.series
            .store(index.by_key.len() as u64, Ordering::Relaxed);
        Ok(removed)
    }

    /// The series of one object, by metric name.
    pub fn series_of(&self, tenant: Uuid, object: Uuid) -> Result<Vec<SeriesInfo>, StoreError> {
        self.backend.series_of(tenant, object)
    }

    /// The points of one series in `[from_ms, to_ms)` from one tier, oldest first (`None`:
    /// no such series).
    pub fn points(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        tier: Tier,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<SeriesPoints>, StoreError> {
        self.backend
            .points(tenant, object, metric, tier, from_ms, to_ms)
    }

    /// Commits what is queued and stops the writer thread.
    pub fn close(&self) {
        self.writer.close();
    }
}

impl MetricFile {
    /// The open database, or `Unavailable` while it could not be opened.
    fn db(&self) -> Result<&Arc<Database>, StoreError> {
        self.db
            .get()
            .ok_or_else(|| StoreError::Unavailable("the metric store is not open".into()))
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Unfiled> {
        self.unfiled.locked()
    }

    fn unfiled_copy(&self) -> UnfiledCopy {
        let unfiled = self.journal();
        UnfiledCopy {
            points: unfiled.points.clone(),
            filings: unfiled.filings,
        }
    }

    fn rewrite_unit(
        &self,
        series: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        key: &[u8],
        unit: &str,
    ) -> Result<(), StoreError> {
        if let Some(mut info) = stored_series(series, key)? {
            info.unit = unit.to_string();
            series
                .insert(key, encode(&info)?.as_slice())
                .map_err(StoreError::from_redb)?;
        }
        Ok(())
    }
}

impl SeriesStore for MetricFile {
    /// Opens the file (repairing it after a crash), makes its tables, reads the series index
    /// and the unfiled journal.
    fn load(&self) -> Result<SeriesIndex, StoreError> {
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        let db = builder.create(&self.path).map_err(StoreError::from_open)?;
        let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        tx.open_table(RAW).map_err(StoreError::from_redb)?;
        tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
        tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
        let mut index = SeriesIndex {
            next_id: counter(&tx, "next_series_id")?,
            ..SeriesIndex::default()
        };
        for row in tx
            .open_table(SERIES)
            .map_err(StoreError::from_redb)?
            .iter()
            .map_err(StoreError::from_redb)?
        {
            let (k, v) = row.map_err(StoreError::from_redb)?;
            let info: SeriesInfo = decode(v.value())?;
            index.keys.insert(info.id, k.value().to_vec());
            index
                .by_key
                .insert(k.value().to_vec(), (info.id, info.unit));
        }
        let mut unfiled = Unfiled {
            filings: counter(&tx, "filings")?,
            ..Unfiled::default()
        };
        for row in tx
            .open_table(UNFILED)
            .map_err(StoreError::from_redb)?
            .iter()
            .map_err(StoreError::from_redb)?
        {
            let (seq, packed) = row.map_err(StoreError::from_redb)?;
            unfiled.points.extend(unpack(packed.value())?);
            unfiled.next_seq = seq.value() + 1;
        }
        tx.commit().map_err(StoreError::from_redb)?;
        *self.journal() = unfiled;
        let _ = self.db.set(Arc::new(db));
        Ok(index)
    }

    /// Journals the samples of known series, creating new series up to the cap.
    fn commit(&self, samples: &[Sample], index: &mut SeriesIndex) -> Result<u64, StoreError> {
        let mut tx = self.db()?.begin_write().map_err(StoreError::from_redb)?;
        // Made durable by the next `sync`, filing or prune (see `SYNC_WITHIN`).
        tx.set_durability(Durability::None)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        // New series and changed units reach the index once the commit holds.
        let mut created: HashMap<Vec<u8>, (u64, String)> = HashMap::new();
        let mut units: HashMap<Vec<u8>, String> = HashMap::new();
        let mut points = Vec::with_capacity(samples.len());
        let mut refused = 0;
        let mut next_id = index.next_id;
        let seq = self.journal().next_seq;
        {
            let mut series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
            let mut count = index.by_key.len();
            for s in samples {
                let key = series_key(s.tenant, s.object, &s.metric);
                let known = match index.by_key.get(&key) {
                    Some((id, unit)) => Some((*id, units.get(&key).unwrap_or(unit))),
                    None => created.get(&key).map(|(id, unit)| (*id, unit)),
                };
                let id = match known {
                    Some((id, unit)) => {
                        if *unit != s.unit {
                            self.rewrite_unit(&mut series, &key, &s.unit)?;
                            match created.get_mut(&key) {
                                Some(entry) => entry.1.clone_from(&s.unit),
                                None => {
                                    units.insert(key, s.unit.clone());
                                }
                            }
                        }
                        id
                    }
                    None if count as u64 >= MAX_SERIES => {
                        refused += 1;
                        continue;
                    }
                    None => {
                        next_id += 1;
                        count += 1;
                        let info = SeriesInfo {
                            id: next_id,
                            metric: s.metric.clone(),
                            unit: s.unit.clone(),
                            first_ms: s.ms,
                            last_ms: s.ms,
                            last: s.value,
                        };
                        series
                            .insert(key.as_slice(), encode(&info)?.as_slice())
                            .map_err(StoreError::from_redb)?;
                        created.insert(key, (next_id, s.unit.clone()));
                        next_id
                    }
                };
                points.push(Point {
                    series: id,
                    ms: s.ms,
                    value: s.value,
                });
            }
            tx.open_table(UNFILED)
                .map_err(StoreError::from_redb)?
                .insert(seq, pack(&points).as_slice())
                .map_err(StoreError::from_redb)?;
            tx.open_table(COUNTERS)
                .map_err(StoreError::from_redb)?
                .insert("next_series_id", next_id)
                .map_err(StoreError::from_redb)?;
        }
        tx.commit().map_err(StoreError::from_redb)?;
        index.next_id = next_id;
        for (key, (id, unit)) in created {
            index.keys.insert(id, key.clone());
            index.by_key.insert(key, (id, unit));
        }
        for (key, unit) in units {
            if let Some(entry) = index.by_key.get_mut(&key) {
                entry.1 = unit;
            }
        }
        let mut unfiled = self.journal();
        unfiled.points.extend(points);
        unfiled.next_seq = seq + 1;
        Ok(refused)
    }

    /// Sample commits skip the sync; `SYNC_WITHIN` bounds how long they wait for one.
    fn durable_later(&self) -> bool {
        true
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.db().and_then(|db| super::kv::sync_redb(db))
    }

    fn unfiled(&self) -> usize {
        self.unfiled.locked().points.len()
    }

    /// Raw rows, aggregates and last values of the unfiled samples, in one transaction.
    fn file_unfiled(&self, index: &SeriesIndex) -> Result<(), StoreError> {
        let mut points = self.journal().points.clone();
        // Stable: samples of one series keep their arrival order within a millisecond.
        points.sort_by_key(|p| (p.series, p.ms));
        let mut tx = self.db()?.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        let filings = counter(&tx, "filings")? + 1;
        {
            let mut raw = tx.open_table(RAW).map_err(StoreError::from_redb)?;
            for p in &points {
                raw.insert((p.series, p.ms), p.value)
                    .map_err(StoreError::from_redb)?;
            }
            let mut five = tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
            let mut hour = tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
            let mut series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
            for run in points.chunk_by(|a, b| a.series == b.series) {
                let id = run[0].series;
                for (tier, table) in [(Tier::FiveMinutes, &mut five), (Tier::OneHour, &mut hour)] {
                    for (bucket, agg) in rollup(run, tier) {
                        let merged = table
                            .get((id, bucket))
                            .map_err(StoreError::from_redb)?
                            .map_or(agg, |v| {
                                let mut a = agg_of(v.value());
                                a.merge(&agg);
                                a
                            });
                        table
                            .insert((id, bucket), tuple_of(&merged))
                            .map_err(StoreError::from_redb)?;
                    }
                }
                let Some(key) = index.keys.get(&id) else {
                    continue;
                };
                let stored = stored_series(&series, key)?;
                if let (Some(mut info), Some(newest)) = (stored, run.last())
                    && newest.ms >= info.last_ms
                {
                    info.last_ms = newest.ms;
                    info.last = newest.value;
                    series
                        .insert(key.as_slice(), encode(&info)?.as_slice())
                        .map_err(StoreError::from_redb)?;
                }
            }
            tx.open_table(UNFILED)
                .map_err(StoreError::from_redb)?
                .retain(|_, _| false)
                .map_err(StoreError::from_redb)?;
            tx.open_table(COUNTERS)
                .map_err(StoreError::from_redb)?
                .insert("filings", filings)
                .map_err(StoreError::from_redb)?;
        }
        tx.commit().map_err(StoreError::from_redb)?;
        // Only this thread appends, so everything in memory was filed. The room goes too: a
        // burst's megabytes are not kept for the next one.
        let mut unfiled = self.journal();
        unfiled.points = Vec::new();
        unfiled.filings = filings;
        Ok(())
    }

    fn remove_expired(&self, p: &Prune, index: &mut SeriesIndex) -> Result<u64, StoreError> {
        let mut tx = self.db()?.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        let last_id = counter(&tx, "next_series_id")?;
        let mut removed = 0u64;
        let mut gone: HashMap<u64, Vec<u8>> = HashMap::new();
        {
            let mut series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
            let orphans = index.keys.iter().filter(|(_, k)| {
                owner(k).is_some_and(|o| p.live.as_ref().is_some_and(|l| !l.contains(&o)))
            });
            for (id, key) in orphans {
                let older =
                    stored_series(&series, key)?.is_some_and(|info| info.first_ms < p.now_ms);
                if older {
                    gone.insert(*id, key.clone());
                }
            }
            for key in gone.values() {
                series
                    .remove(key.as_slice())
                    .map_err(StoreError::from_redb)?;
            }
            let mut raw = tx.open_table(RAW).map_err(StoreError::from_redb)?;
            let mut five = tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
            let mut hour = tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
            for id in 1..=last_id {
                let cutoff = |tier: Tier| {
                    if gone.contains_key(&id) {
                        i64::MAX
                    } else {
                        p.now_ms - tier.retention_ms()
                    }
                };
                raw.retain_in((id, i64::MIN)..(id, cutoff(Tier::Raw)), |_, _| {
                    removed += 1;
                    false
                })
                .map_err(StoreError::from_redb)?;
                for (tier, table) in [(Tier::FiveMinutes, &mut five), (Tier::OneHour, &mut hour)] {
                    table
                        .retain_in((id, i64::MIN)..(id, cutoff(tier)), |_, _| {
                            removed += 1;
                            false
                        })
                        .map_err(StoreError::from_redb)?;
                }
            }
        }
        tx.commit().map_err(StoreError::from_redb)?;
        for (id, key) in gone {
            index.keys.remove(&id);
            index.by_key.remove(&key);
        }
        Ok(removed)
    }

    fn series_of(&self, tenant: Uuid, object: Uuid) -> Result<Vec<SeriesInfo>, StoreError> {
        let unfiled = self.unfiled_copy();
        let tx = self.db()?.begin_read().map_err(StoreError::from_redb)?;
        let t = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
        let lo = series_key(tenant, object, "");
        let mut hi = lo.clone();
        hi.push(0xff);
        let mut out = Vec::new();
        for row in t
            .range(lo.as_slice()..hi.as_slice())
            .map_err(StoreError::from_redb)?
        {
            let (_, v) = row.map_err(StoreError::from_redb)?;
            let mut info: SeriesInfo = decode(v.value())?;
            let points = unfiled.of(info.id, &tx)?;
            latest(&mut info, &points);
            out.push(info);
        }
        Ok(out)
    }

    fn points(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        tier: Tier,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<SeriesPoints>, StoreError> {
        let copy = self.unfiled_copy();
        let tx = self.db()?.begin_read().map_err(StoreError::from_redb)?;
        let series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
        let Some(mut info) = stored_series(&series, &series_key(tenant, object, metric))? else {
            return Ok(None);
        };
        let id = info.id;
        // The series' last value is its newest sample's, whatever range is asked for.
        let unfiled = copy.of(id, &tx)?;
        latest(&mut info, &unfiled);
        let unfiled: Vec<Point> = unfiled
            .into_iter()
            .filter(|p| p.ms >= tier.bucket(from_ms) && p.ms < to_ms)
            .collect();
        let range = (id, tier.bucket(from_ms))..(id, to_ms);
        let mut out: BTreeMap<i64, Agg> = BTreeMap::new();
        match tier {
            Tier::Raw => {
                let t = tx.open_table(RAW).map_err(StoreError::from_redb)?;
                for row in t.range(range).map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    out.insert(k.value().1, Agg::of(v.value()));
                }
                out.extend(unfiled.iter().map(|p| (p.ms, Agg::of(p.value))));
            }
            Tier::FiveMinutes | Tier::OneHour => {
                let def = if tier == Tier::FiveMinutes {
                    FIVE_MINUTES
                } else {
                    ONE_HOUR
                };
                let t = tx.open_table(def).map_err(StoreError::from_redb)?;
                for row in t.range(range).map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    out.insert(k.value().1, agg_of(v.value()));
                }
                for (bucket, agg) in rollup(&unfiled, tier) {
                    out.entry(bucket)
                        .and_modify(|a| a.merge(&agg))
                        .or_insert(agg);
                }
            }
        }
        Ok(Some((info, out.into_iter().collect())))
    }

    fn snapshot(&self, dir: &Path) -> Result<Option<String>, StoreError> {
        let Ok(db) = self.db() else {
            return Ok(None);
        };
        super::backup::snapshot_db(db, &dir.join(FILE), |from, to| {
            super::backup::copy_tables!(
                from,
                to,
                [SERIES, COUNTERS, UNFILED, RAW, FIVE_MINUTES, ONE_HOUR]
            )
        })?;
        Ok(Some(FILE.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metric::DAY_MS;

    #[tokio::test]
    async fn samples_roll_up_and_expire_per_tier() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetricsStore::open(dir.path()).unwrap();
        let (tenant, object) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = 1_000 * DAY_MS;
        let sample = |ms: i64, value: f64| Sample {
            tenant,
            object,
            metric: "rta".into(),
            unit: "ms".into(),
            ms,
            value,
        };
        // Four samples one minute apart in one 5-minute bucket, one in the next.
        let first = store.record((0..4).map(|i| sample(now + i * 60_000, i as f64)).collect());
        store
            .record(vec![sample(now + 300_000, 10.0)])
            .await
            .unwrap();
        first.await.unwrap();
        let (info, raw) = store
            .points(tenant, object, "rta", Tier::Raw, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!((info.last, info.unit.as_str()), (10.0, "ms"));
        assert_eq!(raw.len(), 5);
        let (_, five) = store
            .points(tenant, object, "rta", Tier::FiveMinutes, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!(five.len(), 2);
        assert_eq!(
            (five[0].1.count, five[0].1.sum, five[0].1.max),
            (4, 6.0, 3.0)
        );
        let (_, hour) = store
            .points(tenant, object, "rta", Tier::OneHour, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!((hour.len(), hour[0].1.count, hour[0].1.last), (1, 5, 10.0));
        assert!(
            store
                .points(tenant, object, "pl", Tier::Raw, 0, i64::MAX)
                .unwrap()
                .is_none()
        );
        assert_eq!(store.series_of(tenant, object).unwrap().len(), 1);
        // 31 days on, raw samples are gone and the aggregates stay.
        store
            .prune(Prune {
                now_ms: now + 31 * DAY_MS,
                live: None,
            })
            .await
            .unwrap()
            .unwrap();
        let raw = store
            .points(tenant, object, "rta", Tier::Raw, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        let five = store
            .points(tenant, object, "rta", Tier::FiveMinutes, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        assert_eq!((raw.len(), five.len()), (0, 2));
        store
            .prune(Prune {
                now_ms: now + 401 * DAY_MS,
                live: None,
            })
            .await
            .unwrap()
            .unwrap();
        let five = store
            .points(tenant, object, "rta", Tier::FiveMinutes, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        let hour = store
            .points(tenant, object, "rta", Tier::OneHour, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        assert_eq!((five.len(), hour.len()), (0, 1));
        store.close();
    }

    /// Small batches are readable as soon as they are stored, and durable together within
    /// the sync window (here half a second): a copy of the file taken while the store runs is
    /// what a crash would leave.
    #[tokio::test]
    async fn sample_batches_are_readable_at_once_and_durable_within_the_sync_window() {
        const SYNC_WITHIN: Duration = Duration::from_millis(500);
        let dir = tempfile::tempdir().unwrap();
        let (tenant, object) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = 1_000 * DAY_MS;
        let store =
            MetricsStore::open_syncing(dir.path(), &super::super::Backing::File, SYNC_WITHIN)
                .unwrap();
        let started = Stopwatch::start();
        for i in 0..20 {
            let sample = Sample {
                tenant,
                object,
                metric: "rta".into(),
                unit: "ms".into(),
                ms: now + i,
                value: 1.0,
            };
            store.record(vec![sample]).await.unwrap();
        }
        let raw = |store: &MetricsStore| {
            store
                .points(tenant, object, "rta", Tier::Raw, now, now + DAY_MS)
                .unwrap()
                .map_or(0, |(_, points)| points.len())
        };
        assert_eq!(raw(&store), 20, "readable before they are durable");
        let crashed = |name: &str| {
            let copy = dir.path().join(name);
            std::fs::create_dir(&copy).unwrap();
            std::fs::copy(dir.path().join(FILE), copy.join(FILE)).unwrap();
            let reopened = MetricsStore::open(&copy).unwrap();
            let n = raw(&reopened);
            reopened.close();
            n
        };
        let before = crashed("before");
        // A machine slow enough to take the whole window has synced already.
        if started.elapsed() < SYNC_WITHIN {
            assert_eq!(before, 0, "not yet durable: one sync for them all");
        }
        tokio::time::sleep(SYNC_WITHIN + Duration::from_millis(300)).await;
        assert_eq!(crashed("after"), 20);
        store.close();
    }

    /// Reads see journaled samples merged with filed ones, filing counts each sample once,
    /// and a journal left by a crash is loaded and filed at the next start.
    #[tokio::test]
    async fn samples_are_filed_late_and_survive_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (tenant, object) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = 1_000 * DAY_MS;
        let sample = |ms: i64, value: f64| Sample {
            tenant,
            object,
            metric: "rta".into(),
            unit: "ms".into(),
            ms,
            value,
        };
        let hour = |store: &MetricsStore| {
            let (info, points) = store
                .points(tenant, object, "rta", Tier::OneHour, now, now + DAY_MS)
                .unwrap()
                .unwrap();
            (points[0].1.count, points[0].1.sum, info.last)
        };
        let store = MetricsStore::open(dir.path()).unwrap();
        store.record(vec![sample(now, 1.0)]).await.unwrap();
        store
            .prune(Prune {
                now_ms: now,
                live: None,
            })
            .await
            .unwrap()
            .unwrap();
        assert!(store.backend.unfiled() == 0, "pruning files first");
        store.record(vec![sample(now + 60_000, 2.0)]).await.unwrap();
        assert_eq!(store.backend.unfiled(), 1);
        assert_eq!(hour(&store), (2, 3.0, 2.0), "filed and unfiled merge");
        let raw = store
            .points(tenant, object, "rta", Tier::Raw, now, now + DAY_MS)
            .unwrap()
            .unwrap()
            .1;
        assert_eq!(raw.len(), 2);
        let (before_it, _) = store
            .points(tenant, object, "rta", Tier::Raw, now, now + 1)
            .unwrap()
            .unwrap();
        assert_eq!(
            before_it.last, 2.0,
            "the last value is the newest sample's, outside the range asked for too"
        );
        store.close();
        drop(store);
        // A commit journaled just before a crash: its samples are in the journal only.
        {
            let db = Database::create(dir.path().join(FILE)).unwrap();
            let tx = db.begin_write().unwrap();
            let point = Point {
                series: 1,
                ms: now + 120_000,
                value: 4.0,
            };
            tx.open_table(UNFILED)
                .unwrap()
                .insert(7, pack(&[point]).as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let store = MetricsStore::open(dir.path()).unwrap();
        assert_eq!(hour(&store), (3, 7.0, 4.0));
        store.close();
        drop(store);
        let store = MetricsStore::open(dir.path()).unwrap();
        assert!(store.backend.unfiled() == 0);
        assert_eq!(hour(&store), (3, 7.0, 4.0), "filed once");
        let series = store.series_of(tenant, object).unwrap();
        assert_eq!((series[0].last_ms, series[0].last), (now + 120_000, 4.0));
        let in_seconds = Sample {
            unit: "s".into(),
            ..sample(now + 180_000, 0.005)
        };
        store.record(vec![in_seconds]).await.unwrap();
        assert_eq!(store.series_of(tenant, object).unwrap()[0].unit, "s");
        store.close();
    }

    /// A prune with the live objects drops every older series of the others and frees their
    /// room under the cap; a series as new as the prune stays (its object may be newer than
    /// the list), and a prune without the list keeps them all.
    #[tokio::test]
    async fn series_of_deleted_objects_go_at_the_prune() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetricsStore::open(dir.path()).unwrap();
        let tenant = Uuid::from_u128(1);
        let (kept, deleted, newer) = (Uuid::from_u128(2), Uuid::from_u128(3), Uuid::from_u128(4));
        let now = 1_000 * DAY_MS;
        let sample = |object: Uuid, metric: &str, ms: i64| Sample {
            tenant,
            object,
            metric: metric.into(),
            unit: String::new(),
            ms,
            value: 1.0,
        };
        let all = vec![
            sample(kept, "rta", now),
            sample(deleted, "rta", now),
            sample(deleted, "pl", now),
        ];
        store.record(all.clone()).await.unwrap();
        let at = now + 60_000;
        store.record(vec![sample(newer, "rta", at)]).await.unwrap();
        let prune = |live: Option<HashSet<(Uuid, Uuid)>>| Prune { now_ms: at, live };
        store.prune(prune(None)).await.unwrap().unwrap();
        assert_eq!(store.stats().series, 4);
        let removed = store
            .prune(prune(Some(HashSet::from([(tenant, kept)]))))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(removed, 2 * 3, "a raw row and two aggregates per series");
        assert_eq!(store.stats().series, 2);
        assert_eq!(store.series_of(tenant, newer).unwrap().len(), 1);
        assert!(store.series_of(tenant, deleted).unwrap().is_empty());
        assert!(
            store
                .points(tenant, deleted, "rta", Tier::Raw, 0, i64::MAX)
                .unwrap()
                .is_none()
        );
        assert_eq!(store.series_of(tenant, kept).unwrap().len(), 1);
        store.close();
        drop(store);
        let reopened = MetricsStore::open(dir.path()).unwrap();
        assert_eq!(reopened.stats().series, 2, "gone after a restart too");
        reopened.record(all).await.unwrap();
        assert_eq!(
            reopened.stats().series,
            4,
            "a recreated series starts afresh"
        );
    }

    #[tokio::test]
    async fn the_series_cap_refuses_new_series_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetricsStore::open(dir.path()).unwrap();
        let tenant = Uuid::from_u128(1);
        let samples: Vec<Sample> = (0..=MAX_SERIES)
            .map(|i| Sample {
                tenant,
                object: Uuid::from_u128(u128::from(i / 4)),
                metric: format!("m{}", i % 4),
                unit: String::new(),
                ms: 1,
                value: 1.0,
            })
            .collect();
        store.record(samples).await.unwrap();
        let stats = store.stats();
        assert_eq!((stats.series, stats.refused_samples), (MAX_SERIES, 1));
        // Known series still take samples.
        store
            .record(vec![Sample {
                tenant,
                object: Uuid::from_u128(0),
                metric: "m0".into(),
                unit: String::new(),
                ms: 2,
                value: 2.0,
            }])
            .await
            .unwrap();
        assert_eq!(store.stats().refused_samples, 1);
        store.close();
        drop(store);
        let reopened = MetricsStore::open(dir.path()).unwrap();
        assert_eq!(
            reopened.stats().series,
            MAX_SERIES,
            "the count survives a restart"
        );
    }
}
