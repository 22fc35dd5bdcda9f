//! The only module that knows redb. One database file in the data dir; every write is one
//! transaction, run by the store's writer thread and made durable with the others that queued
//! beside it by one commit with quick repair (so opening after a crash takes seconds), and an I/O
//! error (disk full) takes the store offline until the recovery worker has reopened it.

mod ai;
pub mod alerts;
mod audit;
pub mod backup;
mod codec;
mod committer;
mod config;
mod discovery;
mod error;
mod event_rows;
pub mod events;
mod floods;
mod heartbeats;
mod incidents;
pub mod journal;
mod keys;
pub mod kv;
pub mod metrics;
mod migrations;
pub mod notify;
pub mod objects;
mod partitions;
mod processes;
mod ratelimits;
mod readers;
pub mod reports;
mod secrets;
mod settings;
mod sites;
pub mod states;
pub mod status;
pub mod suppressions;
mod tables;
mod tenants;
mod tokens;
mod tx;
mod users;
pub mod wear;
mod writer;

pub use committer::Promise;
pub use error::StoreError;
pub use partitions::{Holding, PARTITIONS, partition_of};
pub use processes::Change;
pub use tx::{Tx, TxAbort, TxResult, Wrote};

use crate::model::event::Journaled;
use crate::model::health::DiskSpace;
use crate::runtime::clock::SharedClock;
use crate::runtime::{Locked, RwLocked};
use futures_util::future::{BoxFuture, FutureExt, Shared};
#[cfg(feature = "postgres")]
use kv::Readable;
use kv::{Db, ReadTx};
use redb::Database;
use std::path::{Path, PathBuf};
#[cfg(feature = "postgres")]
use std::sync::atomic::AtomicI64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use tokio::sync::Notify;

/// Runs blocking storage work (a redb transaction, an event or metric file read) off the async
/// runtime, on the store's reader threads (`readers`).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    readers::run(f).await
}

/// Refuses a change made against another version than the stored one (`If-Match`).
pub(crate) fn check_version(stored: u64, expected: u64) -> Result<(), StoreError> {
    if stored == expected {
        Ok(())
    } else {
        Err(StoreError::VersionConflict { stored, expected })
    }
}

/// The filing of a durable group's events (event store, bus): resolves once they are filed, or
/// left journaled for the event filer when that failed.
pub type Filed = Shared<BoxFuture<'static, ()>>;

/// Where the events of durable writes go: the events service, registered at start
/// (`Store::file_with`). The store depends on no domain, so the seam points this way.
pub trait Filing: Send + Sync + 'static {
    /// Called on the writer thread once a group is durable, with its events in commit order;
    /// queues them (it must not block) and returns their filing, which the store drives.
    fn file(self: Arc<Self>, journaled: Vec<Journaled>) -> BoxFuture<'static, ()>;
}

/// Where the main database lives.
#[derive(Clone)]
pub enum Backing {
    /// A redb file in the data directory (`storage.backend: redb`).
    File,
    /// A PostgreSQL database (`storage.backend: postgres`).
    #[cfg(feature = "postgres")]
    Postgres(kv::pg::Target),
}

/// File name of the database inside the data dir.
pub const DB_FILE: &str = "svc.redb";

/// Page cache: small enough for a 1 GB board, large enough to keep hot tables resident.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

pub struct Store {
    path: PathBuf,
    /// Stamps journaled events and makes the default tenant, should the store have to.
    clock: SharedClock,
    /// Where the main database lives.
    backing: Backing,
    db: RwLock<Option<Arc<Db>>>,
    offline_reason: RwLock<Option<String>>,
    needs_recovery: AtomicBool,
    recovery: Arc<Notify>,
    /// Set by an audit append that crossed a checkpoint boundary; written after the commit.
    pending_checkpoint: Mutex<Option<audit::ChainHead>>,
    /// Bumped after every durable commit that changed the catalog's tables (`Change::Catalog`),
    /// this process's or another's, so in-memory catalogs know when to rebuild.
    catalog_generation: AtomicU64,
    /// Notified once a commit of a change of their kind is durable (`watch_commits`).
    commit_watchers: Mutex<Vec<(Change, Arc<Notify>)>>,
    /// The writer thread's queue: every write goes through it.
    committer: committer::Committer,
    /// Durable syncs of the main database since it opened (a group commit's one each).
    syncs: AtomicU64,
    /// On PostgreSQL, the lease generation while this process leads (0: it does not).
    #[cfg(feature = "postgres")]
    lead: AtomicI64,
    /// Another process took the lead this one held: its writes stop, and it starts again.
    superseded: AtomicBool,
    /// Bumped when another process changed tokens, users or sessions: verified credentials
    /// kept in memory are checked against the store again.
    credentials_generation: AtomicU64,
    /// Announcements of events a federation site forwarded that some process stored, for this
    /// process's relay to publish the others' (`Change::Forwarded`).
    forwarded: Mutex<Vec<String>>,
    /// Files the events of durable groups, on the runtime that drives their filing.
    filing: RwLock<Option<(Arc<dyn Filing>, tokio::runtime::Handle)>>,
    /// Notified once events journaled are durable (durable consumers and the event filer);
    /// held weakly, so a consumer that is dropped stops being notified.
    journal_watchers: Mutex<Vec<Weak<Notify>>>,
    /// The journal's head as this process last wrote it, read from the journal by the first
    /// write that journals and again after another process wrote (on PostgreSQL a round trip
    /// each write would cost).
    journal_head: Mutex<Option<journal::JournalHead>>,
    /// The events of the journal rows this process made durable lately, for its readers.
    recent_rows: journal::RecentRows,
}

/// Room a recovered store must find free before it serves writes again: the largest request
/// body fits, so a disk that is still full keeps the store offline (and `/readyz` at 503)
/// instead of flapping between reopened and failed.
const HEADROOM: usize = 1024 * 1024;

/// Writes, syncs and removes a file of `HEADROOM` bytes in `dir`.
fn check_headroom(dir: &Path) -> Result<(), StoreError> {
    use std::io::Write;
    let probe = dir.join(".space-probe");
    let written = std::fs::File::create(&probe).and_then(|mut f| {
        f.write_all(&vec![0u8; HEADROOM])?;
        f.sync_all()
    });
    let _ = std::fs::remove_file(&probe);
    written.map_err(|e| StoreError::Unavailable(format!("the data directory has no room: {e}")))
}

fn open_db(path: &Path) -> Result<Database, StoreError> {
    let mut builder = Database::builder();
    builder.set_cache_size(CACHE_BYTES);
    builder.set_repair_callback(|session| {
        tracing::warn!(
            progress = session.progress(),
            "repairing the database after an unclean stop"
        );
    });
    builder.create(path).map_err(StoreError::from_open)
}

/// Copies the redb store of `data_dir` into the empty PostgreSQL database of `target` (`svc
/// migrate`): every table, from one snapshot, in one transaction, then the event month files
/// into the event partitions and the metric file into the metric tables; the names of the
/// tables, the number of events and of metric series. Refuses a
/// database that already holds a store. Blocking; nothing may have the files open.
#[cfg(feature = "postgres")]
pub(crate) fn copy_to_postgres(
    data_dir: &Path,
    target: kv::pg::Target,
) -> Result<(Vec<String>, u64, u64), StoreError> {
    let file = open_db(&data_dir.join(DB_FILE))?;
    migrations::apply(&file, migrations::MIGRATIONS)?;
    let postgres = Db::Pg(Arc::new(kv::pg::Pool::open(target.clone())?));
    if !postgres
        .begin_read()?
        .open_table(tables::TENANTS)?
        .is_empty()?
    {
        return Err(StoreError::Conflict(
            "the PostgreSQL database already holds a store; migrate into an empty one".into(),
        ));
    }
    let file = Db::Redb(file);
    let from = file.begin_read()?;
    let to = postgres.begin_write()?;
    let copied = tables::copy_all(&from, &to)?;
    let written = to.written();
    to.commit()?;
    postgres.sync(&written)?;
    let events = events::pg::copy_month_files(data_dir, &target)?;
    let series = metrics::pg::copy_file(data_dir, &target)?;
    Ok((copied, events, series))
}

impl Store {
    /// Free and total space where the store lives; `None` when the file system will not say.
    // The widths of statvfs's fields differ between targets (32-bit on armv7).
    #[allow(clippy::useless_conversion)]
    pub(crate) fn disk_space(&self) -> Option<DiskSpace> {
        let dir = self.path.parent().unwrap_or(&self.path);
        let st = nix::sys::statvfs::statvfs(dir).ok()?;
        let block = u64::from(st.fragment_size());
        Some(DiskSpace {
            free_bytes: u64::from(st.blocks_available()).saturating_mul(block),
            total_bytes: u64::from(st.blocks()).saturating_mul(block),
        })
    }

    /// Opens (or creates) the store in `data_dir`, applies pending migrations and makes sure the
    /// default tenant exists. When the disk refuses
    /// (full, say, after a crash) the store starts offline and the recovery worker brings it up
    /// once the disk takes writes. Blocking: call from `spawn_blocking` or before the runtime
    /// serves.
    pub fn open(data_dir: &Path, clock: SharedClock) -> Result<Arc<Store>, StoreError> {
        Self::open_on(data_dir, clock, Backing::File)
    }

    /// `open`, with the main database where `backing` says.
    pub fn open_on(
        data_dir: &Path,
        clock: SharedClock,
        backing: Backing,
    ) -> Result<Arc<Store>, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|e| StoreError::Io(e.to_string()))?;
        let (committer, queue) = committer::Committer::new();
        let store = Arc::new(Store {
            path: data_dir.join(DB_FILE),
            backing,
            clock,
            db: RwLock::new(None),
            offline_reason: RwLock::new(None),
            needs_recovery: AtomicBool::new(false),
            recovery: Arc::new(Notify::new()),
            pending_checkpoint: Mutex::new(None),
            catalog_generation: AtomicU64::new(1),
            commit_watchers: Mutex::default(),
            committer,
            syncs: AtomicU64::new(0),
            #[cfg(feature = "postgres")]
            lead: AtomicI64::new(0),
            superseded: AtomicBool::new(false),
            credentials_generation: AtomicU64::new(0),
            forwarded: Mutex::default(),
            filing: RwLock::default(),
            journal_watchers: Mutex::default(),
            journal_head: Mutex::default(),
            recent_rows: journal::RecentRows::default(),
        });
        committer::Committer::spawn(Arc::downgrade(&store), queue)?;
        match store.bring_online() {
            Ok(()) => {}
            Err(e @ StoreError::Unavailable(_)) => store.fail(&e),
            Err(e) => return Err(e),
        }
        Ok(store)
    }

    /// Proves the disk has room, opens the file (repairing it after a crash), migrates it and
    /// ensures the default tenant, then serves from it.
    fn bring_online(&self) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        backup::remove_scratch(dir);
        check_headroom(dir)?;
        let db = match &self.backing {
            Backing::File => {
                let db = open_db(&self.path)?;
                migrations::apply(&db, migrations::MIGRATIONS)?;
                let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
                tx.set_quick_repair(true);
                tables::touch_meta(&tx)?;
                tx.commit().map_err(StoreError::from_redb)?;
                Db::Redb(db)
            }
            #[cfg(feature = "postgres")]
            Backing::Postgres(target) => {
                if self.superseded.load(Ordering::SeqCst) {
                    return Err(StoreError::Superseded);
                }
                let pool = kv::pg::Pool::open(target.clone())?;
                pool.fence(self.lead.load(Ordering::SeqCst));
                Db::Pg(Arc::new(pool))
            }
        };
        *self.db.write_now() = Some(Arc::new(db));
        *self.offline_reason.write_now() = None;
        self.needs_recovery.store(false, Ordering::SeqCst);
        self.ensure_default_tenant_blocking(self.clock.new_id(), self.clock.now())?;
        Ok(())
    }

    /// `None` when the store is serving, else why it is not.
    pub(crate) fn offline_reason(&self) -> Option<String> {
        self.offline_reason.read_now().clone()
    }

    fn handle(&self) -> Result<Arc<Db>, StoreError> {
        self.db
            .read_now()
            .clone()
            .ok_or_else(|| StoreError::Unavailable(self.offline_reason().unwrap_or_default()))
    }

    /// Takes the store offline after an I/O error or once another process took the lead this
    /// one held (`Superseded`: it does not come back); the recovery worker reopens it.
    fn fail(&self, err: &StoreError) {
        let reason = match err {
            StoreError::Unavailable(reason) => reason.clone(),
            StoreError::Superseded => {
                self.superseded.store(true, Ordering::SeqCst);
                err.to_string()
            }
            _ => return,
        };
        if !self.needs_recovery.swap(true, Ordering::SeqCst) {
            tracing::error!(%reason, "storage I/O failed; store offline until it can be reopened");
            *self.offline_reason.write_now() = Some(reason);
            self.db.write_now().take();
            self.recovery.notify_one();
        }
    }

    /// One write transaction, durable when this returns. Blocking (see `committer`).
    fn write_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.committer.submit(
            committer::Turn::InOrder,
            Promise::Durable,
            move |tx| f(tx).map(Wrote::Changed),
            move |out, _filed| {
                let _ = answer.send(out);
            },
        );
        answered
            .recv()
            .unwrap_or_else(|_| Err(committer::unanswered()))
    }

    fn read_blocking<T>(
        &self,
        f: impl FnOnce(&ReadTx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.handle()?;
        let result = db.begin_read().and_then(|tx| f(&tx));
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    /// One write transaction, durable and its events filed when this resolves (see
    /// `committer`).
    async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_in_turn(committer::Turn::InOrder, f).await
    }

    async fn write_in_turn<T: Send + 'static>(
        &self,
        turn: committer::Turn,
        f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.submit(turn, move |tx| f(tx).map(Wrote::Changed)).await
    }

    /// One write transaction whose body is domain code (see `Tx`): `f` says whether it changed
    /// anything (`Wrote`), and one that did not is aborted and costs no sync (a timer sweep with
    /// nothing due). It fails with the caller's own error type (`TxAbort`): a domain refuses in
    /// its own terms, and the store's errors reach it through `?`. Durable, and its events
    /// filed, when this resolves.
    pub async fn transact<T: Send + 'static, E: TxAbort>(
        &self,
        f: impl FnOnce(&Tx) -> TxResult<T, E> + Send + 'static,
    ) -> Result<T, E> {
        self.submit(committer::Turn::InOrder, f).await
    }

    /// `transact` for a worker that has one write in flight at a time and must not wait behind
    /// a burst of requests (the pager's outbox): it passes the queued requests.
    pub(crate) async fn transact_ahead<T: Send + 'static, E: TxAbort>(
        &self,
        f: impl FnOnce(&Tx) -> TxResult<T, E> + Send + 'static,
    ) -> Result<T, E> {
        self.submit(committer::Turn::Ahead, f).await
    }

    /// A write answered once durable (or committed, as `promise` says), with the filing of its
    /// events still under way (`None` when it journaled none): for a producer that overlaps
    /// filing with its next write (the results pipeline).
    pub(crate) async fn write_filing_later<T: Send + 'static>(
        &self,
        promise: Promise,
        f: impl FnOnce(&Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<(T, Option<Filed>), StoreError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.committer.submit(
            committer::Turn::InOrder,
            promise,
            move |tx| f(tx).map(Wrote::Changed),
            move |out, filed| {
                let _ = answer.send(out.map(|v| (v, filed)));
            },
        );
        answered
            .await
            .unwrap_or_else(|_| Err(committer::unanswered()))
    }

    async fn submit<T: Send + 'static, E: TxAbort>(
        &self,
        turn: committer::Turn,
        f: impl FnOnce(&Tx) -> TxResult<T, E> + Send + 'static,
    ) -> Result<T, E> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.committer
            .submit(turn, Promise::Durable, f, move |out, filed| {
                let _ = answer.send((out, filed));
            });
        let (out, filed) = answered
            .await
            .unwrap_or_else(|_| (Err(E::from(committer::unanswered())), None));
        if let Some(filed) = filed {
            filed.await;
        }
        out
    }

    /// Durable syncs of the main database since it opened: what an idle box should not make.
    #[cfg(test)]
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Has `watcher` notified (one permit, kept until it waits) once events journaled after
    /// this are durable, for as long as the caller holds it.
    pub(crate) fn watch_journal(&self, watcher: &Arc<Notify>) {
        let mut watchers = self.journal_watchers.locked();
        watchers.retain(|w| w.strong_count() > 0);
        watchers.push(Arc::downgrade(watcher));
    }

    /// Has `filing` file the events of every durable group from now on, driven on `runtime`.
    pub fn file_with(&self, filing: Arc<dyn Filing>, runtime: tokio::runtime::Handle) {
        *self.filing.write_now() = Some((filing, runtime));
    }

    /// After a durable group: files the events it journaled (in commit order) and tells the
    /// journal's watchers; the filing, when there was any.
    fn journal_durable(&self, journaled: Vec<Journaled>) -> Option<Filed> {
        if journaled.is_empty() {
            return None;
        }
        self.recent_rows.keep(&journaled);
        let filed = self.filing.read_now().as_ref().map(|(filing, runtime)| {
            let filed = filing.clone().file(journaled).shared();
            runtime.spawn(filed.clone());
            filed
        });
        self.notify_journal_watchers();
        filed
    }

    /// Tells the journal's watchers that committed events wait to be read.
    fn notify_journal_watchers(&self) {
        let watchers = self.journal_watchers.locked();
        for watcher in watchers.iter().filter_map(Weak::upgrade) {
            watcher.notify_one();
        }
    }

    /// Changes with every committed catalog write; read it before reading the catalog.
    pub(crate) fn catalog_generation(&self) -> u64 {
        self.catalog_generation.load(Ordering::SeqCst)
    }

    /// Runs a read transaction off the async runtime.
    async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&ReadTx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        blocking(move || store.read_blocking(f)).await
    }

    /// Whether an I/O error has taken the store offline.
    pub(crate) fn needs_recovery(&self) -> bool {
        self.needs_recovery.load(Ordering::SeqCst)
    }

    /// Notified when the store goes offline, to wake whoever reopens it.
    pub(crate) fn recovery_waker(&self) -> Arc<Notify> {
        self.recovery.clone()
    }

    /// Brings the store back after an I/O error, or after a start on a disk that refused.
    /// Succeeds only once the disk has room again and every in-flight transaction has let go
    /// of the old handle. Blocking.
    pub(crate) fn try_reopen(&self) -> Result<(), StoreError> {
        if !self.needs_recovery.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.bring_online()?;
        tracing::info!("store reopened; serving again");
        Ok(())
    }

    /// Writes the audit checkpoint and closes the database file. Later calls answer `Unavailable`.
    pub fn close(&self) {
        self.checkpoint_now();
        *self.offline_reason.write_now() = Some("shut down".into());
        self.db.write_now().take();
    }
}
