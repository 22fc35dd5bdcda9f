//! The object and type indexes of a month file, in runs: an object's (or a type's) event keys
//! (time and id, 24 bytes each) are kept in runs of up to `RUN_KEYS`, one row per run, keyed by
//! the object (the type) and the run's last key; its runs never overlap, so they are in time
//! order both by key and by content. A filing rewrites a row or two per object or type it
//! touches instead of inserting a row per event: with a row per event, filing each batch of
//! 262,144 object keys walked the tree as often and was half of the event writer's CPU at
//! batches of 500 results, and the type index's insert per event a fifth of it after that.

use super::{RUN_KEY_LEN, RunKey};
use crate::store::StoreError;
use redb::{ReadOnlyTable, ReadableTable, Table, TableDefinition, TableHandle};

/// Tenant + object + the run's last time and id → the run's times and ids, ascending.
pub(super) const RUNS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("event_key_runs_by_object");
/// Tenant + type code, padded to the object's 16 bytes with zeros, + the run's last time and id
/// → the run's times and ids, ascending.
pub(super) const TYPE_RUNS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("event_key_runs_by_type");
/// Tenant and object (or type).
const PREFIX: usize = 32;
/// Time and id.
const SUFFIX: usize = RUN_KEY_LEN - PREFIX;
/// Keys a run holds at most: a run that is not full takes the next keys after it, so a row
/// is rewritten at most this many keys long (1.5 KiB).
const RUN_KEYS: usize = 64;

type Suffix = [u8; SUFFIX];

fn suffixes(run: &[u8]) -> Result<Vec<Suffix>, StoreError> {
    if run.is_empty() || !run.len().is_multiple_of(SUFFIX) {
        return Err(StoreError::Corrupt("object index run cut short".into()));
    }
    Ok(run
        .chunks_exact(SUFFIX)
        .filter_map(|s| Suffix::try_from(s).ok())
        .collect())
}

/// A prefix (tenant and object, or tenant and type) and a suffix (time and id) as one key.
pub(super) fn key(prefix: &[u8], suffix: &[u8]) -> RunKey {
    let mut k = [0u8; RUN_KEY_LEN];
    k[..PREFIX].copy_from_slice(prefix);
    k[PREFIX..].copy_from_slice(suffix);
    k
}

/// The last possible key of an object (a type).
fn object_end(prefix: &[u8]) -> RunKey {
    key(prefix, &[0xff; SUFFIX])
}

/// Files keys (sorted, each once) into the runs. A key already filed stays once, so filing
/// again after a crash changes nothing.
pub(super) fn file(table: &mut Table<&[u8], &[u8]>, keys: &[RunKey]) -> Result<(), StoreError> {
    for object in keys.chunk_by(|a, b| a[..PREFIX] == b[..PREFIX]) {
        file_object(table, object)?;
    }
    Ok(())
}

/// Files one object's (or type's) keys: they are merged with the runs they overlap and with the run just
/// before them unless it is full, and written back as runs of `RUN_KEYS`.
fn file_object(table: &mut Table<&[u8], &[u8]>, keys: &[RunKey]) -> Result<(), StoreError> {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return Ok(());
    };
    let prefix = &first[..PREFIX];
    let mut replaced: Vec<Vec<u8>> = Vec::new();
    let mut merged: Vec<Suffix> = Vec::with_capacity(keys.len());
    if let Some(row) = table
        .range::<&[u8]>(prefix..first.as_slice())
        .map_err(StoreError::from_redb)?
        .next_back()
    {
        let (k, v) = row.map_err(StoreError::from_redb)?;
        if v.value().len() < RUN_KEYS * SUFFIX {
            replaced.push(k.value().to_vec());
            merged.extend(suffixes(v.value())?);
        }
    }
    let end = object_end(prefix);
    for row in table
        .range::<&[u8]>(first.as_slice()..=end.as_slice())
        .map_err(StoreError::from_redb)?
    {
        let (k, v) = row.map_err(StoreError::from_redb)?;
        let run = suffixes(v.value())?;
        if run[0].as_slice() > &last[PREFIX..] {
            break;
        }
        replaced.push(k.value().to_vec());
        merged.extend(run);
    }
    merged.extend(
        keys.iter()
            .filter_map(|k| Suffix::try_from(&k[PREFIX..]).ok()),
    );
    merged.sort_unstable();
    merged.dedup();
    for k in &replaced {
        table.remove(k.as_slice()).map_err(StoreError::from_redb)?;
    }
    for run in merged.chunks(RUN_KEYS) {
        let Some(run_last) = run.last() else { continue };
        table
            .insert(key(prefix, run_last).as_slice(), run.concat().as_slice())
            .map_err(StoreError::from_redb)?;
    }
    Ok(())
}

/// An index of a row per key kept before runs.
struct RowsPerKey {
    name: &'static str,
    /// The runs it becomes.
    runs: TableDefinition<'static, &'static [u8], &'static [u8]>,
    /// Its keys' prefix (padded to `PREFIX` in the runs).
    prefix: usize,
}

const ROWS_PER_KEY: [RowsPerKey; 2] = [
    RowsPerKey {
        name: "event_key_by_object",
        runs: RUNS,
        prefix: PREFIX,
    },
    // Tenant and type code.
    RowsPerKey {
        name: "event_key_by_type",
        runs: TYPE_RUNS,
        prefix: 16 + 1,
    },
];

/// Converts a file's indexes of a row per key (before runs) into runs, in the transaction that
/// opens the file, and drops them. Their keys are in order, so runs are written as they fill:
/// memory holds one run, however large the file.
pub(super) fn convert_rows_per_key(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    let names: Vec<String> = tx
        .list_tables()
        .map_err(StoreError::from_redb)?
        .map(|t| t.name().to_string())
        .collect();
    for RowsPerKey { name, runs, prefix } in ROWS_PER_KEY {
        if !names.iter().any(|n| n == name) {
            continue;
        }
        let rows: TableDefinition<&[u8], ()> = TableDefinition::new(name);
        {
            let old = tx.open_table(rows).map_err(StoreError::from_redb)?;
            let mut runs = tx.open_table(runs).map_err(StoreError::from_redb)?;
            let mut run: Vec<RunKey> = Vec::with_capacity(RUN_KEYS);
            for row in old.iter().map_err(StoreError::from_redb)? {
                let (k, _) = row.map_err(StoreError::from_redb)?;
                let k = k.value();
                if k.len() != prefix + SUFFIX {
                    return Err(StoreError::Corrupt(format!(
                        "{name} key of {} bytes",
                        k.len()
                    )));
                }
                let mut padded = [0u8; PREFIX];
                padded[..prefix].copy_from_slice(&k[..prefix]);
                let k = key(&padded, &k[prefix..]);
                if run.len() == RUN_KEYS || run.first().is_some_and(|f| f[..PREFIX] != k[..PREFIX])
                {
                    file(&mut runs, &run)?;
                    run.clear();
                }
                run.push(k);
            }
            file(&mut runs, &run)?;
        }
        tx.delete_table(rows).map_err(StoreError::from_redb)?;
    }
    Ok(())
}

/// An object's filed keys in `lo..hi` (both full keys of the object), in key order or
/// reversed, read a run at a time.
pub(super) struct Keys {
    runs: Box<dyn Iterator<Item = Result<Vec<u8>, StoreError>>>,
    prefix: Vec<u8>,
    lo: Vec<u8>,
    hi: Vec<u8>,
    descending: bool,
    /// The keys of the run being read, in the scan's order.
    pending: std::vec::IntoIter<RunKey>,
    done: bool,
}

impl Keys {
    pub(super) fn new(
        table: &ReadOnlyTable<&'static [u8], &'static [u8]>,
        prefix: &[u8],
        lo: &[u8],
        hi: &[u8],
        descending: bool,
    ) -> Result<Self, StoreError> {
        let end = object_end(prefix);
        let values = |range: redb::Range<'static, &'static [u8], &'static [u8]>| {
            range.map(|row| {
                row.map(|(_, v)| v.value().to_vec())
                    .map_err(StoreError::from_redb)
            })
        };
        // Runs end at their last key, so the first run reaching `lo` is the first to read;
        // descending, the first run reaching `hi` is the last that can hold a key below it.
        let runs: Box<dyn Iterator<Item = _>> = if lo >= hi || lo > end.as_slice() {
            Box::new(std::iter::empty())
        } else if descending {
            let first_reaching_hi = if hi > end.as_slice() {
                None
            } else {
                table
                    .range::<&[u8]>(hi..=end.as_slice())
                    .map_err(StoreError::from_redb)?
                    .next()
                    .transpose()
                    .map_err(StoreError::from_redb)?
                    .map(|(k, _)| k.value().to_vec())
            };
            let top = first_reaching_hi.unwrap_or_else(|| end.to_vec());
            let range = table
                .range::<&[u8]>(lo..=top.as_slice())
                .map_err(StoreError::from_redb)?;
            Box::new(values(range).rev())
        } else {
            let range = table
                .range::<&[u8]>(lo..=end.as_slice())
                .map_err(StoreError::from_redb)?;
            Box::new(values(range))
        };
        Ok(Self {
            runs,
            prefix: prefix.to_vec(),
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            descending,
            pending: Vec::new().into_iter(),
            done: false,
        })
    }
}

impl Iterator for Keys {
    type Item = Result<RunKey, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if let Some(k) = self.pending.next() {
                let (before, after) = (
                    k.as_slice() < self.lo.as_slice(),
                    k.as_slice() >= self.hi.as_slice(),
                );
                match (self.descending, before, after) {
                    (_, false, false) => return Some(Ok(k)),
                    (false, _, true) | (true, true, _) => self.done = true,
                    _ => {}
                }
                continue;
            }
            let run = match self.runs.next()? {
                Ok(run) => run,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let keys = match suffixes(&run) {
                Ok(s) => s,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let mut keys: Vec<RunKey> = keys.iter().map(|s| key(&self.prefix, s)).collect();
            if self.descending {
                keys.reverse();
            }
            self.pending = keys.into_iter();
        }
        None
    }
}

/// Every filed key, in order (tests and checks).
#[cfg(test)]
pub(super) fn all(table: &impl ReadableTable<&'static [u8], &'static [u8]>) -> Vec<RunKey> {
    let mut out = Vec::new();
    for row in table.iter().unwrap() {
        let (k, v) = row.unwrap();
        let prefix = &k.value()[..PREFIX];
        out.extend(suffixes(v.value()).unwrap().iter().map(|s| key(prefix, s)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{Database, ReadableDatabase};

    fn k(object: u8, n: u16) -> RunKey {
        let mut k = [0u8; RUN_KEY_LEN];
        k[31] = object;
        k[PREFIX..PREFIX + 2].copy_from_slice(&n.to_be_bytes());
        k
    }

    fn file_all(db: &Database, keys: &[RunKey]) {
        let tx = db.begin_write().unwrap();
        file(&mut tx.open_table(RUNS).unwrap(), keys).unwrap();
        tx.commit().unwrap();
    }

    fn read(db: &Database, object: u8, lo: u16, hi: u16, descending: bool) -> Vec<u16> {
        let tx = db.begin_read().unwrap();
        let table = tx.open_table(RUNS).unwrap();
        let (prefix, lo, hi) = (&k(object, 0)[..PREFIX], k(object, lo), k(object, hi));
        Keys::new(&table, prefix, &lo, &hi, descending)
            .unwrap()
            .map(|k| {
                let k = k.unwrap();
                u16::from_be_bytes([k[PREFIX], k[PREFIX + 1]])
            })
            .collect()
    }

    fn run_lengths(db: &Database) -> Vec<usize> {
        let tx = db.begin_read().unwrap();
        let table = tx.open_table(RUNS).unwrap();
        table
            .iter()
            .unwrap()
            .map(|r| r.unwrap().1.value().len() / SUFFIX)
            .collect()
    }

    /// Keys filed in order fill runs of `RUN_KEYS`; keys filed late, out of order or again
    /// merge into the runs they overlap; every range reads alike both ways.
    #[test]
    fn runs_fill_merge_and_read_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("runs.redb")).unwrap();
        // Object 1 in filings of 26 (as 10,000 objects at 262,144 keys a filing), object 2 once.
        for f in 0..10u16 {
            let keys: Vec<RunKey> = (f * 26..f * 26 + 26).map(|n| k(1, n * 2)).collect();
            file_all(&db, &keys);
        }
        file_all(&db, &[k(2, 5)]);
        assert_eq!(run_lengths(&db), vec![64, 64, 64, 64, 4, 1]);
        // Late keys between filed ones, and filed ones again.
        file_all(&db, &[k(1, 3), k(1, 4), k(1, 301), k(1, 519)]);
        let mut expected: Vec<u16> = (0..260).map(|n| n * 2).chain([3, 301, 519]).collect();
        expected.sort_unstable();
        assert_eq!(read(&db, 1, 0, u16::MAX, false), expected);
        let lengths = run_lengths(&db);
        assert_eq!(lengths.iter().sum::<usize>(), 263 + 1, "and object 2's");
        assert!(lengths.iter().all(|l| *l <= RUN_KEYS));
        for (lo, hi) in [
            (0, 1),
            (3, 4),
            (100, 300),
            (127, 129),
            (301, 302),
            (500, 600),
        ] {
            let want: Vec<u16> = expected
                .iter()
                .copied()
                .filter(|n| lo <= *n && *n < hi)
                .collect();
            assert_eq!(read(&db, 1, lo, hi, false), want, "{lo}..{hi}");
            let rev: Vec<u16> = want.iter().rev().copied().collect();
            assert_eq!(read(&db, 1, lo, hi, true), rev, "{lo}..{hi} descending");
        }
        assert_eq!(read(&db, 2, 0, u16::MAX, true), vec![5]);
        assert!(read(&db, 3, 0, u16::MAX, true).is_empty());
        assert!(read(&db, 1, 9, 9, false).is_empty());
    }

    /// A file indexed a row per key (before runs), by object and by type, is converted when
    /// opened, and reads alike.
    #[test]
    fn rows_per_key_become_runs() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("old.redb")).unwrap();
        let by_object: TableDefinition<&[u8], ()> = TableDefinition::new("event_key_by_object");
        let by_type: TableDefinition<&[u8], ()> = TableDefinition::new("event_key_by_type");
        let keys: Vec<RunKey> = (0..150).map(|n| k(1, n)).chain([k(2, 1)]).collect();
        // The type index's keys: tenant (here 0), type code, time and id.
        let type_keys: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| [&[0u8; 16][..], &[key[31] + 4], &key[PREFIX..]].concat())
            .collect();
        let tx = db.begin_write().unwrap();
        {
            let mut table = tx.open_table(by_object).unwrap();
            for key in &keys {
                table.insert(key.as_slice(), ()).unwrap();
            }
            let mut table = tx.open_table(by_type).unwrap();
            for key in &type_keys {
                table.insert(key.as_slice(), ()).unwrap();
            }
        }
        tx.commit().unwrap();
        let tx = db.begin_write().unwrap();
        convert_rows_per_key(&tx).unwrap();
        tx.commit().unwrap();
        let tx = db.begin_read().unwrap();
        assert_eq!(all(&tx.open_table(RUNS).unwrap()), keys);
        assert_eq!(run_lengths(&db), vec![64, 64, 22, 1]);
        // Type 5 (object 1's keys) and type 6 (object 2's), the code padded to the prefix.
        let typed: Vec<RunKey> = keys
            .iter()
            .map(|key| {
                let mut t = [0u8; RUN_KEY_LEN];
                t[16] = key[31] + 4;
                t[PREFIX..].copy_from_slice(&key[PREFIX..]);
                t
            })
            .collect();
        assert_eq!(all(&tx.open_table(TYPE_RUNS).unwrap()), typed);
        let mut tables: Vec<String> = tx
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_string())
            .collect();
        tables.sort();
        assert_eq!(
            tables,
            ["event_key_runs_by_object", "event_key_runs_by_type"]
        );
    }
}
