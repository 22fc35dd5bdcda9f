//! The kernel's table handles: the one face of the main database the store's files use. A
//! transaction opens a table by its definition (`tables.rs`) and reads and writes rows through
//! these handles; every call answers a `StoreError`. Two backends stand behind them: redb (a file
//! in the data directory, the default and the only one on a gateway) and PostgreSQL (`pg`, the
//! `postgres` cargo feature, for a central instance), so the store's files and the domains above
//! them are the same on both. Keys and values keep redb's typed vocabulary (`&[u8]`, `&str`,
//! `u64`, `u128`, `i64`, `()`), which names types, not an engine.

use super::StoreError;
use redb::{
    Durability, Key, ReadableTable as _, ReadableTableMetadata as _, TableDefinition, Value,
};
use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};
use std::ops::RangeBounds;
#[cfg(feature = "postgres")]
use {redb::TableHandle as _, std::marker::PhantomData, std::ops::Bound, std::sync::Arc};

#[cfg(feature = "postgres")]
pub mod pg;

/// An open main database.
pub(super) enum Db {
    Redb(redb::Database),
    #[cfg(feature = "postgres")]
    Pg(Arc<pg::Pool>),
}

impl Db {
    /// A write of the writer thread's current group (see `committer`).
    pub(super) fn begin_write(&self) -> Result<WriteTx, StoreError> {
        match self {
            Db::Redb(db) => {
                let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
                // Refused only with persistent savepoints, which this store never makes; the
                // commit is then durable by itself.
                let _ = tx.set_durability(Durability::None);
                Ok(WriteTx::new(WriteInner::Redb(Box::new(tx))))
            }
            #[cfg(feature = "postgres")]
            Db::Pg(pool) => pool.begin_write().map(|w| WriteTx::new(WriteInner::Pg(w))),
        }
    }

    pub(super) fn begin_read(&self) -> Result<ReadTx, StoreError> {
        match self {
            Db::Redb(db) => {
                use redb::ReadableDatabase as _;
                db.begin_read()
                    .map(|tx| ReadTx(ReadInner::Redb(tx)))
                    .map_err(StoreError::from_redb)
            }
            #[cfg(feature = "postgres")]
            Db::Pg(pool) => pool.begin_read().map(|r| ReadTx(ReadInner::Pg(r))),
        }
    }

    /// Makes every write committed since the last sync durable: on redb an empty transaction
    /// committed durably (with quick repair), on PostgreSQL the group's `COMMIT`, announced to
    /// the other processes with the tables its writes changed (`written`).
    pub(super) fn sync(&self, written: &BTreeSet<String>) -> Result<(), StoreError> {
        match self {
            Db::Redb(db) => {
                let _ = written;
                sync_redb(db)
            }
            #[cfg(feature = "postgres")]
            Db::Pg(pool) => pool.end_group(Some(written)),
        }
    }

    /// Whether a committed write is readable before its sync (redb); on PostgreSQL the group's
    /// writes become readable with its `COMMIT`, which is the sync.
    pub(super) fn commits_readable_unsynced(&self) -> bool {
        match self {
            Db::Redb(_) => true,
            #[cfg(feature = "postgres")]
            Db::Pg(_) => false,
        }
    }

    /// Ends a group none of whose writes committed: nothing is written.
    pub(super) fn discard_group(&self) -> Result<(), StoreError> {
        match self {
            Db::Redb(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Db::Pg(pool) => pool.end_group(None),
        }
    }
}

/// A write transaction: what one queued write runs in (see `committer`), with the names of
/// the tables it changed, from which what follows its commit is derived (`Store::committed`).
pub struct WriteTx(WriteInner, RefCell<BTreeSet<String>>);

enum WriteInner {
    /// Boxed: redb's transaction is large, and a write moves it once.
    Redb(Box<redb::WriteTransaction>),
    #[cfg(feature = "postgres")]
    Pg(pg::Write),
}

/// A read transaction: a consistent snapshot for as long as it lives.
pub struct ReadTx(ReadInner);

enum ReadInner {
    Redb(redb::ReadTransaction),
    #[cfg(feature = "postgres")]
    Pg(pg::Read),
}

/// A table opened for writing in a `WriteTx`, which its first change names to the transaction.
pub struct Table<'t, K: Key + 'static, V: Value + 'static>(
    TableInner<'t, K, V>,
    Changing<'t, K, V>,
);

/// Where a table's first change is written down: its transaction's set of changed tables.
struct Changing<'t, K: Key + 'static, V: Value + 'static> {
    def: TableDefinition<'t, K, V>,
    written: &'t RefCell<BTreeSet<String>>,
    told: bool,
}

enum TableInner<'t, K: Key + 'static, V: Value + 'static> {
    Redb(redb::Table<'t, K, V>),
    #[cfg(feature = "postgres")]
    Pg(pg::Table<K, V>, PhantomData<&'t ()>),
}

/// A table opened in a `ReadTx`.
pub struct ReadOnlyTable<K: Key + 'static, V: Value + 'static>(ReadOnlyInner<K, V>);

enum ReadOnlyInner<K: Key + 'static, V: Value + 'static> {
    Redb(redb::ReadOnlyTable<K, V>),
    #[cfg(feature = "postgres")]
    Pg(pg::Table<K, V>),
}

/// A stored key or value.
pub struct Guard<'a, V: Value + 'static>(GuardInner<'a, V>);

enum GuardInner<'a, V: Value + 'static> {
    /// Read in place from redb's pages.
    Redb(redb::AccessGuard<'a, V>),
    /// Fetched, in redb's encoding of the type.
    #[cfg(feature = "postgres")]
    Fetched(Vec<u8>),
}

/// Rows in key order; `rev()` walks them backwards.
pub struct Range<'a, K: Key + 'static, V: Value + 'static>(RangeInner<'a, K, V>);

enum RangeInner<'a, K: Key + 'static, V: Value + 'static> {
    Redb(redb::Range<'a, K, V>),
    #[cfg(feature = "postgres")]
    Pg(pg::Range, PhantomData<fn() -> (K, V)>),
}

/// A row: its key and its value.
pub type Row<'a, K, V> = (Guard<'a, K>, Guard<'a, V>);

impl WriteTx {
    fn new(inner: WriteInner) -> Self {
        Self(inner, RefCell::default())
    }

    /// A redb transaction as a kernel one (the migrations', which run before the writer does).
    pub(super) fn from_redb(tx: redb::WriteTransaction) -> Self {
        Self::new(WriteInner::Redb(Box::new(tx)))
    }

    /// The names of the tables this transaction changed.
    pub(super) fn written(&self) -> BTreeSet<String> {
        self.1.borrow().clone()
    }

    /// Commits this write: on redb a commit the group's sync makes durable, on PostgreSQL the
    /// release of its savepoint in the group's transaction.
    pub(super) fn commit(self) -> Result<(), StoreError> {
        match self.0 {
            WriteInner::Redb(tx) => tx.commit().map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(w) => w.commit(),
        }
    }

    /// Whether each read is a round trip to a server (PostgreSQL), so reading rows ahead in
    /// one query pays; redb's reads are local.
    pub(super) fn reads_are_remote(&self) -> bool {
        match &self.0 {
            WriteInner::Redb(_) => false,
            #[cfg(feature = "postgres")]
            WriteInner::Pg(_) => true,
        }
    }

    /// This write's database session and the sessions on the database now, where other
    /// processes may serve beside this one (PostgreSQL); `None` on redb, which one process
    /// opens.
    pub(super) fn sessions(&self) -> Result<Option<(i64, HashSet<i64>)>, StoreError> {
        match &self.0 {
            WriteInner::Redb(_) => Ok(None),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(w) => w.sessions().map(Some),
        }
    }

    /// The same number for the writes between which no other process committed (always
    /// the same on redb, which one process opens): what the store keeps in memory about the
    /// stored rows (the journal's head) holds for one epoch.
    pub(super) fn epoch(&self) -> u64 {
        match &self.0 {
            WriteInner::Redb(_) => 0,
            #[cfg(feature = "postgres")]
            WriteInner::Pg(w) => w.epoch,
        }
    }

    pub(crate) fn open_table<'t, K: Key + 'static, V: Value + 'static>(
        &'t self,
        def: TableDefinition<'t, K, V>,
    ) -> Result<Table<'t, K, V>, StoreError> {
        let changing = Changing {
            def,
            written: &self.1,
            told: false,
        };
        match &self.0 {
            WriteInner::Redb(tx) => tx
                .open_table(def)
                .map(|t| Table(TableInner::Redb(t), changing))
                .map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(w) => Ok(Table(
                TableInner::Pg(w.table(def.name()), PhantomData),
                changing,
            )),
        }
    }
}

impl ReadTx {
    pub(crate) fn open_table<K: Key + 'static, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<ReadOnlyTable<K, V>, StoreError> {
        match &self.0 {
            ReadInner::Redb(tx) => tx
                .open_table(def)
                .map(|t| ReadOnlyTable(ReadOnlyInner::Redb(t)))
                .map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            ReadInner::Pg(r) => Ok(ReadOnlyTable(ReadOnlyInner::Pg(r.table(def.name())))),
        }
    }

    /// `open_table`, or `None` for a table this snapshot does not have (a redb file written
    /// before the table was added).
    pub(crate) fn open_existing<K: Key + 'static, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Option<ReadOnlyTable<K, V>>, StoreError> {
        match &self.0 {
            ReadInner::Redb(tx) => match tx.open_table(def) {
                Ok(t) => Ok(Some(ReadOnlyTable(ReadOnlyInner::Redb(t)))),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(StoreError::from_redb(e)),
            },
            #[cfg(feature = "postgres")]
            ReadInner::Pg(_) => self.open_table(def).map(Some),
        }
    }

    /// A redb snapshot as a kernel one.
    pub(super) fn from_redb(tx: redb::ReadTransaction) -> Self {
        Self(ReadInner::Redb(tx))
    }

    /// The redb snapshot, for what only a file has (backups).
    pub(super) fn redb(&self) -> Option<&redb::ReadTransaction> {
        match &self.0 {
            ReadInner::Redb(tx) => Some(tx),
            #[cfg(feature = "postgres")]
            ReadInner::Pg(_) => None,
        }
    }
}

impl<V: Value + 'static> Guard<'_, V> {
    pub(crate) fn value(&self) -> V::SelfType<'_> {
        match &self.0 {
            GuardInner::Redb(g) => g.value(),
            #[cfg(feature = "postgres")]
            GuardInner::Fetched(bytes) => V::from_bytes(bytes),
        }
    }
}

/// Makes a redb file's commits since its last durable one durable: an empty transaction
/// committed durably, with quick repair (the main database, the month files, the metric file).
pub(super) fn sync_redb(db: &redb::Database) -> Result<(), StoreError> {
    let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
    tx.set_quick_repair(true);
    tx.commit().map_err(StoreError::from_redb)
}

fn redb_guard<V: Value + 'static>(g: redb::AccessGuard<'_, V>) -> Guard<'_, V> {
    Guard(GuardInner::Redb(g))
}

#[cfg(feature = "postgres")]
fn fetched<'a, V: Value + 'static>(bytes: Vec<u8>) -> Guard<'a, V> {
    Guard(GuardInner::Fetched(bytes))
}

impl<'a, K: Key + 'static, V: Value + 'static> Iterator for Range<'a, K, V> {
    type Item = Result<Row<'a, K, V>, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            RangeInner::Redb(r) => r.next().map(redb_row),
            #[cfg(feature = "postgres")]
            RangeInner::Pg(r, _) => r.next().map(pg_row),
        }
    }
}

impl<K: Key + 'static, V: Value + 'static> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            RangeInner::Redb(r) => r.next_back().map(redb_row),
            #[cfg(feature = "postgres")]
            RangeInner::Pg(r, _) => r.next_back().map(pg_row),
        }
    }
}

type RedbRow<'a, K, V> = (redb::AccessGuard<'a, K>, redb::AccessGuard<'a, V>);

fn redb_pair<K: Key + 'static, V: Value + 'static>((k, v): RedbRow<'_, K, V>) -> Row<'_, K, V> {
    (redb_guard(k), redb_guard(v))
}

fn redb_row<'a, K: Key + 'static, V: Value + 'static>(
    r: Result<RedbRow<'a, K, V>, redb::StorageError>,
) -> Result<Row<'a, K, V>, StoreError> {
    r.map(redb_pair).map_err(StoreError::from_redb)
}

#[cfg(feature = "postgres")]
fn pg_row<'a, K: Key + 'static, V: Value + 'static>(
    r: Result<pg::Pair, StoreError>,
) -> Result<Row<'a, K, V>, StoreError> {
    r.map(|(k, v)| (fetched(k), fetched(v)))
}

/// A range's bounds as stored keys.
#[cfg(feature = "postgres")]
fn pg_bounds<'a, K: Key + 'static, V: Value + 'static, KR: Borrow<K::SelfType<'a>> + 'a>(
    t: &pg::Table<K, V>,
    range: &(impl RangeBounds<KR> + 'a),
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let bound = |b: Bound<&KR>| b.map(|k| t.ordered(k.borrow()));
    (bound(range.start_bound()), bound(range.end_bound()))
}

#[cfg(feature = "postgres")]
fn pg_first<'a, K: Key + 'static, V: Value + 'static>(
    t: &pg::Table<K, V>,
    last: bool,
) -> Result<Option<Row<'a, K, V>>, StoreError> {
    let mut rows = t.range(Bound::Unbounded, Bound::Unbounded);
    let row = if last { rows.next_back() } else { rows.next() };
    row.map(pg_row).transpose()
}

/// What both kinds of table answer.
pub trait Readable<K: Key + 'static, V: Value + 'static> {
    fn get<'a>(
        &self,
        key: impl Borrow<K::SelfType<'a>>,
    ) -> Result<Option<Guard<'_, V>>, StoreError>;

    fn range<'a, KR>(
        &self,
        range: impl RangeBounds<KR> + 'a,
    ) -> Result<Range<'_, K, V>, StoreError>
    where
        KR: Borrow<K::SelfType<'a>> + 'a;

    fn iter(&self) -> Result<Range<'_, K, V>, StoreError> {
        self.range::<K::SelfType<'_>>(..)
    }

    fn first(&self) -> Result<Option<Row<'_, K, V>>, StoreError>;

    fn last(&self) -> Result<Option<Row<'_, K, V>>, StoreError>;

    /// Whether the table holds each of `keys`, in their order: one query on PostgreSQL, where
    /// `get` is a round trip per key.
    fn contains_each<'a>(&self, keys: &[K::SelfType<'a>]) -> Result<Vec<bool>, StoreError>;

    /// The value of each of `keys`, in their order: one query on PostgreSQL.
    fn get_each<'a>(
        &self,
        keys: &[K::SelfType<'a>],
    ) -> Result<Vec<Option<Guard<'_, V>>>, StoreError>;

    /// Reads `keys` ahead in one query where each read is a round trip (PostgreSQL), so this
    /// transaction's later reads of them are answered from what it knows; nothing on redb,
    /// whose reads are local. The query is sent without waiting: its answer comes with the
    /// next read's, so the reads ahead of several tables cost one round trip together.
    fn prefetch<'a>(&self, keys: &[K::SelfType<'a>]) -> Result<(), StoreError>;

    fn len(&self) -> Result<u64, StoreError>;

    fn is_empty(&self) -> Result<bool, StoreError> {
        self.len().map(|n| n == 0)
    }
}

/// `Readable` for a table handle whose two variants are `Redb` and `Pg`.
macro_rules! readable {
    ($handle:ident, $inner:ident $(, $lt:lifetime)?; $($pg_extra:pat)?) => {
        impl<$($lt,)? K: Key + 'static, V: Value + 'static> Readable<K, V> for $handle<$($lt,)? K, V> {
            fn get<'a>(
                &self,
                key: impl Borrow<K::SelfType<'a>>,
            ) -> Result<Option<Guard<'_, V>>, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => t
                        .get(key)
                        .map(|v| v.map(redb_guard))
                        .map_err(StoreError::from_redb),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => t
                        .get(t.ordered(key.borrow()))
                        .map(|v| v.map(fetched)),
                }
            }

            fn range<'a, KR>(
                &self,
                range: impl RangeBounds<KR> + 'a,
            ) -> Result<Range<'_, K, V>, StoreError>
            where
                KR: Borrow<K::SelfType<'a>> + 'a,
            {
                match &self.0 {
                    $inner::Redb(t) => t
                        .range(range)
                        .map(|r| Range(RangeInner::Redb(r)))
                        .map_err(StoreError::from_redb),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => {
                        let (lo, hi) = pg_bounds(t, &range);
                        Ok(Range(RangeInner::Pg(t.range(lo, hi), PhantomData)))
                    }
                }
            }

            fn first(&self) -> Result<Option<Row<'_, K, V>>, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => t.first().map(|r| r.map(redb_pair)).map_err(StoreError::from_redb),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => pg_first(t, false),
                }
            }

            fn last(&self) -> Result<Option<Row<'_, K, V>>, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => t.last().map(|r| r.map(redb_pair)).map_err(StoreError::from_redb),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => pg_first(t, true),
                }
            }

            fn len(&self) -> Result<u64, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => t.len().map_err(StoreError::from_redb),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => t.count(),
                }
            }

            fn contains_each<'a>(&self, keys: &[K::SelfType<'a>]) -> Result<Vec<bool>, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => keys
                        .iter()
                        .map(|k| t.get(k).map(|v| v.is_some()).map_err(StoreError::from_redb))
                        .collect(),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => {
                        t.contains_each(keys.iter().map(|k| t.ordered(k)).collect())
                    }
                }
            }

            #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
            fn prefetch<'a>(&self, keys: &[K::SelfType<'a>]) -> Result<(), StoreError> {
                match &self.0 {
                    $inner::Redb(_) => Ok(()),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => {
                        t.fetch_ahead(keys.iter().map(|k| t.ordered(k)).collect())
                    }
                }
            }

            fn get_each<'a>(
                &self,
                keys: &[K::SelfType<'a>],
            ) -> Result<Vec<Option<Guard<'_, V>>>, StoreError> {
                match &self.0 {
                    $inner::Redb(t) => keys
                        .iter()
                        .map(|k| t.get(k).map(|v| v.map(redb_guard)).map_err(StoreError::from_redb))
                        .collect(),
                    #[cfg(feature = "postgres")]
                    $inner::Pg(t $(, $pg_extra)?) => Ok(t
                        .get_each(keys.iter().map(|k| t.ordered(k)).collect())?
                        .into_iter()
                        .map(|v| v.map(fetched))
                        .collect()),
                }
            }
        }
    };
}

readable!(Table, TableInner, 't; _);
readable!(ReadOnlyTable, ReadOnlyInner;);

impl<K: Key + 'static, V: Value + 'static> Changing<'_, K, V> {
    /// Names the table to its transaction, once: it is about to change.
    fn tell(&mut self) {
        use redb::TableHandle as _;
        if !self.told {
            self.told = true;
            self.written
                .borrow_mut()
                .insert(self.def.name().to_string());
        }
    }
}

impl<K: Key + 'static, V: Value + 'static> Table<'_, K, V> {
    /// Stores `value` under `key`. On PostgreSQL the row goes out without waiting for its
    /// answer, which the write reads as it commits: use `replace` to learn what was there.
    pub(crate) fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<(), StoreError> {
        self.1.tell();
        match &mut self.0 {
            TableInner::Redb(t) => t
                .insert(key, value)
                .map(drop)
                .map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t, _) => t.put(
                t.ordered(key.borrow()),
                V::as_bytes(value.borrow()).as_ref(),
            ),
        }
    }

    /// Removes `key` (on PostgreSQL without waiting, as `insert`): use `take` to learn what
    /// it held.
    pub(crate) fn remove<'a>(
        &mut self,
        key: impl Borrow<K::SelfType<'a>>,
    ) -> Result<(), StoreError> {
        self.1.tell();
        match &mut self.0 {
            TableInner::Redb(t) => t.remove(key).map(drop).map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t, _) => t.delete(t.ordered(key.borrow())),
        }
    }

    /// Removes `key`; the value it held.
    pub(crate) fn take<'a>(
        &mut self,
        key: impl Borrow<K::SelfType<'a>>,
    ) -> Result<Option<Guard<'_, V>>, StoreError> {
        self.1.tell();
        match &mut self.0 {
            TableInner::Redb(t) => t
                .remove(key)
                .map(|v| v.map(redb_guard))
                .map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t, _) => t.take(t.ordered(key.borrow())).map(|v| v.map(fetched)),
        }
    }

    /// Keeps the rows `keep` accepts, removing the others.
    pub(crate) fn retain<F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool>(
        &mut self,
        keep: F,
    ) -> Result<(), StoreError> {
        self.retain_in::<K::SelfType<'_>, F>(.., keep)
    }

    /// `retain` within `range`.
    pub(crate) fn retain_in<'a, KR, F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        keep: F,
    ) -> Result<(), StoreError>
    where
        KR: Borrow<K::SelfType<'a>> + 'a,
    {
        self.1.tell();
        match &mut self.0 {
            TableInner::Redb(t) => t.retain_in(range, keep).map_err(StoreError::from_redb),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t, _) => {
                let (lo, hi) = pg_bounds(t, &range);
                let mut keep = keep;
                t.retain_in(lo, hi, |k, v| keep(K::from_bytes(k), V::from_bytes(v)))
            }
        }
    }
}
