//! The kernel's table handles: the one face of the main database the store's files use. A
//! transaction opens a table by its definition (`tables.rs`) and reads and writes rows through
//! these handles; every call answers a `StoreError`. redb is behind them today; a second backend
//! (issue 40, PostgreSQL) implements the same handles, so the store's files and the domains above
//! them stay as they are. Keys and values keep redb's typed vocabulary (`&[u8]`, `&str`, `u64`,
//! `u128`, `i64`, `()`), which names types, not an engine.

use super::StoreError;
use redb::{Key, ReadableTable as _, ReadableTableMetadata as _, TableDefinition, Value};
use std::borrow::Borrow;
use std::ops::RangeBounds;

/// A write transaction: what one queued write runs in (see `committer`).
pub struct WriteTx(redb::WriteTransaction);

/// A read transaction: a consistent snapshot for as long as it lives.
pub struct ReadTx(redb::ReadTransaction);

/// A table opened for writing in a `WriteTx`.
pub struct Table<'t, K: Key + 'static, V: Value + 'static>(redb::Table<'t, K, V>);

/// A table opened in a `ReadTx`.
pub struct ReadOnlyTable<K: Key + 'static, V: Value + 'static>(redb::ReadOnlyTable<K, V>);

/// A stored key or value, read in place.
pub struct Guard<'a, V: Value + 'static>(redb::AccessGuard<'a, V>);

/// Rows in key order; `rev()` walks them backwards.
pub struct Range<'a, K: Key + 'static, V: Value + 'static>(redb::Range<'a, K, V>);

/// A row: its key and its value.
pub type Row<'a, K, V> = (Guard<'a, K>, Guard<'a, V>);

impl WriteTx {
    pub(super) fn new(tx: redb::WriteTransaction) -> Self {
        Self(tx)
    }

    /// The backend's transaction, for the committer's durability settings and the migrations.
    pub(super) fn backend(&mut self) -> &mut redb::WriteTransaction {
        &mut self.0
    }

    pub(super) fn into_backend(self) -> redb::WriteTransaction {
        self.0
    }

    pub fn open_table<K: Key + 'static, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<Table<'_, K, V>, StoreError> {
        self.0
            .open_table(def)
            .map(Table)
            .map_err(StoreError::from_redb)
    }
}

impl ReadTx {
    pub(super) fn new(tx: redb::ReadTransaction) -> Self {
        Self(tx)
    }

    pub fn open_table<K: Key + 'static, V: Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<ReadOnlyTable<K, V>, StoreError> {
        self.0
            .open_table(def)
            .map(ReadOnlyTable)
            .map_err(StoreError::from_redb)
    }

    /// The backend's transaction, for copying every table into a backup.
    pub(super) fn backend(&self) -> &redb::ReadTransaction {
        &self.0
    }
}

impl<V: Value + 'static> Guard<'_, V> {
    pub fn value(&self) -> V::SelfType<'_> {
        self.0.value()
    }
}

fn row<'a, K: Key + 'static, V: Value + 'static>(
    r: Result<(redb::AccessGuard<'a, K>, redb::AccessGuard<'a, V>), redb::StorageError>,
) -> Result<Row<'a, K, V>, StoreError> {
    r.map(|(k, v)| (Guard(k), Guard(v)))
        .map_err(StoreError::from_redb)
}

impl<'a, K: Key + 'static, V: Value + 'static> Iterator for Range<'a, K, V> {
    type Item = Result<Row<'a, K, V>, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(row)
    }
}

impl<K: Key + 'static, V: Value + 'static> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(row)
    }
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

    fn iter(&self) -> Result<Range<'_, K, V>, StoreError>;

    fn first(&self) -> Result<Option<Row<'_, K, V>>, StoreError>;

    fn last(&self) -> Result<Option<Row<'_, K, V>>, StoreError>;

    fn len(&self) -> Result<u64, StoreError>;
}

/// `Readable` for a handle whose `.0` is a redb table.
macro_rules! readable {
    ($handle:ty $(, $lt:lifetime)?) => {
        impl<$($lt,)? K: Key + 'static, V: Value + 'static> Readable<K, V> for $handle {
            fn get<'a>(
                &self,
                key: impl Borrow<K::SelfType<'a>>,
            ) -> Result<Option<Guard<'_, V>>, StoreError> {
                self.0
                    .get(key)
                    .map(|v| v.map(Guard))
                    .map_err(StoreError::from_redb)
            }

            fn range<'a, KR>(
                &self,
                range: impl RangeBounds<KR> + 'a,
            ) -> Result<Range<'_, K, V>, StoreError>
            where
                KR: Borrow<K::SelfType<'a>> + 'a,
            {
                self.0
                    .range(range)
                    .map(Range)
                    .map_err(StoreError::from_redb)
            }

            fn iter(&self) -> Result<Range<'_, K, V>, StoreError> {
                self.0.iter().map(Range).map_err(StoreError::from_redb)
            }

            fn first(&self) -> Result<Option<Row<'_, K, V>>, StoreError> {
                self.0
                    .first()
                    .map(|r| r.map(|(k, v)| (Guard(k), Guard(v))))
                    .map_err(StoreError::from_redb)
            }

            fn last(&self) -> Result<Option<Row<'_, K, V>>, StoreError> {
                self.0
                    .last()
                    .map(|r| r.map(|(k, v)| (Guard(k), Guard(v))))
                    .map_err(StoreError::from_redb)
            }

            fn len(&self) -> Result<u64, StoreError> {
                self.0.len().map_err(StoreError::from_redb)
            }
        }
    };
}

readable!(Table<'t, K, V>, 't);
readable!(ReadOnlyTable<K, V>);

impl<K: Key + 'static, V: Value + 'static> Table<'_, K, V> {
    /// Stores `value` under `key`; the value it replaced.
    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<Option<Guard<'_, V>>, StoreError> {
        self.0
            .insert(key, value)
            .map(|v| v.map(Guard))
            .map_err(StoreError::from_redb)
    }

    /// Removes `key`; the value it held.
    pub fn remove<'a>(
        &mut self,
        key: impl Borrow<K::SelfType<'a>>,
    ) -> Result<Option<Guard<'_, V>>, StoreError> {
        self.0
            .remove(key)
            .map(|v| v.map(Guard))
            .map_err(StoreError::from_redb)
    }

    /// Keeps the rows `keep` accepts, removing the others.
    pub fn retain<F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool>(
        &mut self,
        keep: F,
    ) -> Result<(), StoreError> {
        self.0.retain(keep).map_err(StoreError::from_redb)
    }

    /// `retain` within `range`.
    pub fn retain_in<'a, KR, F: for<'f> FnMut(K::SelfType<'f>, V::SelfType<'f>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        keep: F,
    ) -> Result<(), StoreError>
    where
        KR: Borrow<K::SelfType<'a>> + 'a,
    {
        self.0.retain_in(range, keep).map_err(StoreError::from_redb)
    }
}
