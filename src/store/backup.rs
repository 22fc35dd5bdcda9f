//! Backups taken while the server runs: every database is copied table by table from one read
//! transaction into a fresh file (a consistent snapshot; writers carry on), and the copies, the
//! audit checkpoint of that snapshot, the secrets master key and a manifest go into a tar
//! archive. Restore unpacks an archive into an empty data directory.

use super::audit::{CHECKPOINT_FILE, read_head_ro};
use super::events::EventStore;
use super::kv::{ReadTx, Readable, WriteTx};
use super::metrics::MetricsStore;
use super::{DB_FILE, Store, StoreError, migrations};
use crate::model::{Timestamp, VERSION};
use redb::{Database, Key, ReadableDatabase, TableDefinition, TableHandle, Value};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MANIFEST: &str = "manifest.json";
const MASTER_KEY: &str = "master.key";
/// The archive layout; a restore refuses another.
const FORMAT: u32 = 1;

/// What an archive holds, its first entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupManifest {
    pub format: u32,
    /// The server version that wrote it.
    pub version: String,
    /// The database schema version of the snapshot; a newer svc migrates it on restore.
    pub schema_version: u32,
    pub created_at: Timestamp,
    /// Whether the event month files are included.
    pub events: bool,
    /// The entries after the manifest.
    pub files: Vec<String>,
}

/// Copies every row of `def` the snapshot has (a table it lacks is skipped) and answers its
/// name: into a backup's file, or from one backend to the other (`svc migrate`).
pub(super) fn copy_table<K: Key + 'static, V: Value + 'static>(
    from: &ReadTx,
    to: &WriteTx,
    def: TableDefinition<K, V>,
) -> Result<String, StoreError> {
    let Some(source) = from.open_existing(def)? else {
        return Ok(def.name().to_string());
    };
    let mut target = to.open_table(def)?;
    for row in source.iter()? {
        let (k, v) = row?;
        target.insert(k.value(), v.value())?;
    }
    Ok(def.name().to_string())
}

/// Copies a list of tables, answering their names: `copy_tables!(from, to, [A, B])`.
macro_rules! copy_tables {
    ($from:expr, $to:expr, [$($table:expr),* $(,)?]) => {{
        Ok(vec![$($crate::store::backup::copy_table($from, $to, $table)?),*])
    }};
}
pub(super) use copy_tables;

/// A database's table list, as one copy function.
pub(super) type CopyTables = fn(&ReadTx, &WriteTx) -> Result<Vec<String>, StoreError>;

/// Copies the snapshot `from` into a new database at `dst`. A table of the snapshot the list
/// does not name fails the backup, so a table added later cannot be left out silently.
pub(super) fn snapshot_into(from: &ReadTx, dst: &Path, copy: CopyTables) -> Result<(), StoreError> {
    let target = Database::create(dst).map_err(StoreError::from_open)?;
    let tx = WriteTx::from_redb(target.begin_write().map_err(StoreError::from_redb)?);
    let copied = copy(from, &tx)?;
    if let Some(file) = from.redb() {
        for table in file.list_tables().map_err(StoreError::from_redb)? {
            if !copied.iter().any(|name| name == table.name()) {
                return Err(StoreError::Internal(format!(
                    "table {} is not in the backup's table list",
                    table.name()
                )));
            }
        }
    }
    tx.commit()
}

/// Snapshots a whole database file into `dst`.
pub(super) fn snapshot_db(db: &Database, dst: &Path, copy: CopyTables) -> Result<(), StoreError> {
    let from = ReadTx::from_redb(db.begin_read().map_err(StoreError::from_redb)?);
    snapshot_into(&from, dst, copy)
}

const SCRATCH_PREFIX: &str = ".backup-";

/// The scratch directory of one backup, removed when dropped.
struct Scratch(PathBuf);

/// Removes the scratch directories of backups a crash interrupted (at open, before any runs).
pub(super) fn remove_scratch(data_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(SCRATCH_PREFIX)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Everything a backup reads: the three stores and the master key file.
pub struct Backups {
    pub store: Arc<Store>,
    pub events: Arc<EventStore>,
    pub metrics: Arc<MetricsStore>,
    pub master_key: PathBuf,
}

impl Backups {
    /// Snapshots every database into a scratch directory beside them. Blocking; the databases
    /// stay writable throughout. Event month files are snapshotted after the main database,
    /// so they may hold events of the moments the copy took beyond it (never fewer).
    pub(crate) fn prepare(&self, with_events: bool) -> Result<Prepared, StoreError> {
        let dir = self.store.path.parent().unwrap_or(Path::new("."));
        let scratch = Scratch(dir.join(format!("{SCRATCH_PREFIX}{}", self.store.clock.new_id())));
        std::fs::create_dir_all(&scratch.0).map_err(|e| StoreError::Io(e.to_string()))?;
        let db = self.store.handle()?;
        // On PostgreSQL too the archive holds a redb store (the same tables, copied from one
        // snapshot): it restores into a data directory, which `svc migrate` moves back.
        let snapshot = db.begin_read()?;
        snapshot_into(&snapshot, &scratch.0.join(DB_FILE), super::tables::copy_all)?;
        let head = read_head_ro(&snapshot)?;
        let schema_version = migrations::current_version(&snapshot)?;
        drop(snapshot);
        let mut files = vec![DB_FILE.to_string()];
        if head.seq > 0 {
            let body =
                serde_json::to_vec(&head).map_err(|e| StoreError::Internal(e.to_string()))?;
            write_file(&scratch.0.join(CHECKPOINT_FILE), &body)?;
            files.push(CHECKPOINT_FILE.into());
        }
        if let Some(name) = self.metrics.snapshot(&scratch.0)? {
            files.push(name);
        }
        if with_events {
            files.extend(self.events.snapshot(&scratch.0)?);
        }
        if let Ok(key) = std::fs::read(&self.master_key) {
            write_file(&scratch.0.join(MASTER_KEY), &key)?;
            files.push(MASTER_KEY.into());
        }
        let manifest = BackupManifest {
            format: FORMAT,
            version: VERSION.to_string(),
            schema_version,
            created_at: self.store.clock.now(),
            events: with_events,
            files,
        };
        Ok(Prepared { scratch, manifest })
    }
}

/// Snapshots ready to be archived; removed when dropped.
pub struct Prepared {
    scratch: Scratch,
    pub manifest: BackupManifest,
}

impl Prepared {
    /// Writes the tar archive (manifest first) to `out`. Blocking.
    pub(crate) fn write(self, out: impl Write) -> Result<(), StoreError> {
        let failed = |e: std::io::Error| StoreError::Io(format!("writing the archive: {e}"));
        let mut archive = tar::Builder::new(out);
        let body = serde_json::to_vec_pretty(&self.manifest)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        append(
            &mut archive,
            MANIFEST,
            &mut body.as_slice(),
            body.len() as u64,
        )?;
        for name in &self.manifest.files {
            let mut file = std::fs::File::open(self.scratch.0.join(name)).map_err(failed)?;
            let len = file.metadata().map_err(failed)?.len();
            append(&mut archive, name, &mut file, len)?;
        }
        archive
            .into_inner()
            .and_then(|mut w| w.flush())
            .map_err(failed)
    }
}

fn write_file(path: &Path, body: &[u8]) -> Result<(), StoreError> {
    std::fs::write(path, body).map_err(|e| StoreError::Io(e.to_string()))
}

fn append(
    archive: &mut tar::Builder<impl Write>,
    name: &str,
    body: &mut impl Read,
    len: u64,
) -> Result<(), StoreError> {
    let mut header = tar::Header::new_ustar();
    header.set_size(len);
    header.set_mode(0o600);
    header.set_entry_type(tar::EntryType::Regular);
    archive
        .append_data(&mut header, name, body)
        .map_err(|e| StoreError::Io(format!("writing the archive: {e}")))
}

/// Whether `name` is an entry a backup writes (no paths: nothing lands outside the directory).
fn known_entry(name: &str) -> bool {
    let month = name
        .strip_prefix("events-")
        .and_then(|m| m.strip_suffix(".redb"))
        .is_some_and(|m| m.len() == 6 && m.bytes().all(|b| b.is_ascii_digit()));
    month
        || [
            MANIFEST,
            DB_FILE,
            CHECKPOINT_FILE,
            MASTER_KEY,
            super::metrics::FILE,
        ]
        .contains(&name)
}

/// Unpacks an archive into `data_dir`, which must be empty or absent. The databases are not
/// opened here: the caller opens the store (migrating an older schema) and verifies the audit
/// chain. Blocking.
pub(crate) fn unpack(archive: impl Read, data_dir: &Path) -> Result<BackupManifest, StoreError> {
    let occupied = std::fs::read_dir(data_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if occupied {
        return Err(StoreError::Invalid(format!(
            "{} is not empty; restore into a new directory",
            data_dir.display()
        )));
    }
    std::fs::create_dir_all(data_dir).map_err(|e| StoreError::Io(e.to_string()))?;
    let bad = |detail: String| StoreError::Invalid(format!("not an svc backup: {detail}"));
    let mut entries = tar::Archive::new(archive);
    let mut manifest: Option<BackupManifest> = None;
    for entry in entries.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry
            .path()
            .map_err(|e| bad(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        if !known_entry(&name) || entry.header().entry_type() != tar::EntryType::Regular {
            return Err(bad(format!("unexpected entry {name:?}")));
        }
        if name == MANIFEST {
            let m: BackupManifest =
                serde_json::from_reader(&mut entry).map_err(|e| bad(format!("manifest: {e}")))?;
            if m.format != FORMAT {
                return Err(bad(format!(
                    "archive format {} (this svc reads {FORMAT})",
                    m.format
                )));
            }
            let newest = migrations::MIGRATIONS.last().map_or(0, |m| m.version);
            if m.schema_version > newest {
                return Err(StoreError::Invalid(format!(
                    "the backup has schema version {} from svc {}; this svc knows up to {newest}",
                    m.schema_version, m.version
                )));
            }
            manifest = Some(m);
            continue;
        }
        if manifest.is_none() {
            return Err(bad("the manifest is not the first entry".into()));
        }
        let path = data_dir.join(&name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::Io(format!("{}: {e}", path.display())))?;
        set_private(&file);
        std::io::copy(&mut entry, &mut file).map_err(|e| StoreError::Io(e.to_string()))?;
        file.sync_all().map_err(|e| StoreError::Io(e.to_string()))?;
    }
    let manifest = manifest.ok_or_else(|| bad("no manifest".into()))?;
    for name in &manifest.files {
        if !data_dir.join(name).exists() {
            return Err(bad(format!("{name} is listed but missing")));
        }
    }
    Ok(manifest)
}

/// Restored files hold secrets (the master key, token hashes): owner only.
fn set_private(file: &std::fs::File) {
    use std::os::unix::fs::PermissionsExt;
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_entries_a_backup_writes_are_unpacked() {
        for name in [
            "manifest.json",
            "svc.redb",
            "metrics.redb",
            "events-202611.redb",
            "master.key",
            "audit.checkpoint",
        ] {
            assert!(known_entry(name), "{name}");
        }
        for name in [
            "../svc.redb",
            "/etc/passwd",
            "events-2026.redb",
            "events-20261a.redb",
            "sub/svc.redb",
            "",
        ] {
            assert!(!known_entry(name), "{name}");
        }
    }

    #[test]
    fn an_interrupted_backups_scratch_is_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".backup-1")).unwrap();
        std::fs::write(dir.path().join(".backup-1/svc.redb"), b"half a copy").unwrap();
        std::fs::write(dir.path().join("svc.redb"), b"live data").unwrap();
        remove_scratch(dir.path());
        assert!(!dir.path().join(".backup-1").exists());
        assert!(dir.path().join("svc.redb").exists());
    }

    #[test]
    fn a_non_empty_directory_is_refused_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("svc.redb"), b"live data").unwrap();
        let err = unpack(std::io::empty(), dir.path()).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join("svc.redb")).unwrap(),
            b"live data"
        );
    }
}
