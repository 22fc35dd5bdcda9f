//! The table handles on PostgreSQL (`storage.backend: postgres`). Every table of the store is a
//! table `kv_<name>` of byte keys and values: keys in an order-preserving encoding (integers
//! big-endian, the sign bit flipped), so `bytea` order is the key order redb keeps, and values in
//! redb's own encoding of their type, so a row reads back the same on either backend.
//!
//! Writes keep redb's model: one writer at a time. The store's writer thread runs a group of
//! writes as one PostgreSQL transaction, each write under a savepoint (released when it commits,
//! rolled back when it aborts), and the group's sync is the `COMMIT`. Several processes serve
//! one database: a group holds a transaction-scoped advisory lock (the writers' turn, so
//! groups commit one after another across processes), counts itself in `svc_commits` (a
//! process that finds the count moved since its last group reloads its in-memory heads) and
//! announces its commit with the tables it changed (`NOTIFY`), on which the other processes
//! wake and drop what they cached. One process leads (a session advisory lock, `Lease`): its
//! consumers run, and its groups check the lease is still theirs. Reads run in
//! `REPEATABLE READ READ ONLY` transactions on a small pool of connections: a consistent
//! snapshot, as a redb read is.

use super::super::StoreError;
use crate::runtime::Locked;
use redb::{Key, TypeName, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

mod tls;

/// The advisory lock a group of writes holds: one writer at a time across every process.
const WRITER_LOCK: i64 = 0x5356_4300_0001;

/// The advisory lock the leading process holds for as long as its lease's session lives: its
/// consumers run; the other processes serve beside it and try this lock to lead.
const INSTANCE_LOCK: i64 = 0x5356_4300_0002;

/// How often a process serving beside the leader tries to take the lead. Not a blocking
/// `pg_advisory_lock`: a statement waiting for a lock keeps its snapshot for as long as it
/// waits, and with it PostgreSQL keeps every row version the processes replaced since: the
/// rows each commit updates (the journal's head, the consumers' positions, the sites' statuses)
/// piled up thousands of dead versions, which every read of them walked (0.58 ms a read of
/// `kv_meta` against 0.04 of a site status, docs/performance.md, Fleet).
const LEAD_TRY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Waiting for the lease or the commit notices tries again after this long once the database
/// is lost, doubling up to the most.
const RECONNECT_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
const RECONNECT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Rows fetched per round trip while walking a range.
const PAGE: i64 = 256;

/// The schema of the PostgreSQL backend, forward-only, each step in its own transaction.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, "key-value tables for every table of the store"),
    (2, "events, range-partitioned by month"),
    (3, "the lease of the serving process"),
    (
        4,
        "metric series, raw samples and their 5-minute and 1-hour aggregates",
    ),
    (5, "the count of committed write groups"),
    (
        6,
        "tables the store gained since: rate-limit buckets, discovery scans",
    ),
    (7, "tables the store gained since: channel failures"),
    (
        8,
        "tables the store gained since: the AI agent's records, moved out of the settings",
    ),
    (
        9,
        "tables the store gained since: recently cleared alert keys, floods, site mirrors and their indexes",
    ),
    (
        10,
        "tables the store gained since: status page subscribers and updates",
    ),
];

/// The channel every committed group is announced on (`NOTIFY`), with its process and the
/// tables it changed, so the other processes on the database wake and drop what they cached.
const COMMITS_CHANNEL: &str = "svc_commits";

/// The channel events a federation site forwarded are announced on once stored, so every
/// process's SSE clients get them (they are stored with the site's ids, not journaled).
pub(in crate::store) const FORWARDED_CHANNEL: &str = "svc_forwarded";

/// A notice heard on a listening connection.
pub(in crate::store) enum Notice {
    /// Another process's (or this one's) committed group: its process and changed tables.
    Committed(String),
    /// Forwarded events stored by some process: their keys.
    Forwarded(String),
    /// The listening connection was lost and made again: notices sent meanwhile are lost.
    Lost,
}

/// How to reach the database: the URL (`postgres://…`), the TLS mode and the readers' pool.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    /// `disable`, `prefer` or `require`, or empty for the URL's `sslmode` (else `prefer`); TLS
    /// always verifies the server's certificate and name, against `ca_file` when given, else
    /// the system roots.
    pub tls_mode: String,
    pub ca_file: Option<String>,
    pub pool_size: usize,
}

/// A statement sent and not yet answered.
type Sent = std::pin::Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// Rows asked for ahead of their reading (`Table::fetch_ahead`): the table, the keys asked,
/// and the answer to come.
struct Fetch {
    table: String,
    keys: Vec<Vec<u8>>,
    rows: std::pin::Pin<
        Box<dyn Future<Output = Result<Vec<tokio_postgres::Row>, tokio_postgres::Error>> + Send>,
    >,
}

/// Statements sent ahead of their answers at most, before a write waits for them.
const MAX_SENT: usize = 1024;

/// Row changes kept at most before they are sent: a large write's go out as it goes.
const UNSENT_MAX: usize = 1024;

/// One connection, with the statements it has prepared and the writes sent on it whose
/// answers are not read yet.
pub(in crate::store) struct Conn {
    client: Arc<Client>,
    statements: HashMap<String, Statement>,
    /// A write's row changes go out without waiting (PostgreSQL answers a connection's
    /// statements in the order they came, so a later read sees them); their answers are read
    /// when the write commits (`flush`), so a write costs a round trip per read it makes, not
    /// per row it changes.
    sent: Vec<Sent>,
    /// Row changes of the open write not sent yet, by table (stored key: new value, `None`
    /// for a row removed): the last change of a row is the one sent (see `send_changes`).
    unsent: BTreeMap<String, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// How many changes `unsent` took since it was last sent.
    unsent_rows: usize,
    /// Reads sent ahead whose rows are learnt (into `known`) before anything else waits on
    /// the connection: several tables' rows in the round trip of the next read.
    fetching: Vec<Fetch>,
    /// Rows of the open transaction already read or written (see `Known`).
    known: Known,
}

/// Rows one transaction has read or written, by table and stored key (`None`: no such row),
/// so reading one again costs no round trip. True for the transaction's length only: while a
/// group holds the writers' turn no other process changes a row (every change to these tables
/// is a group's), and a read's snapshot does not move. Forgotten when a transaction begins or
/// a write rolls back to its savepoint.
#[derive(Default)]
struct Known {
    rows: HashMap<String, HashMap<Vec<u8>, Option<Vec<u8>>>>,
    /// About what `rows` holds, in bytes.
    size: usize,
}

/// About the most a transaction keeps known, in bytes: a large group (a bundle's thousands of
/// objects) stops learning new rows and keeps those it knows true.
const KNOWN_MAX_BYTES: usize = 16 << 20;

/// What one known row costs beside its key and value.
const KNOWN_ROW_BYTES: usize = 64;

fn known_size(key: &[u8], value: &Option<Vec<u8>>) -> usize {
    KNOWN_ROW_BYTES + key.len() + value.as_ref().map_or(0, Vec::len)
}

impl Known {
    fn get(&self, table: &str, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.rows.get(table)?.get(key)
    }

    /// Records what `key` holds now.
    fn learn(&mut self, table: &str, key: Vec<u8>, value: Option<Vec<u8>>) {
        if let Some(slot) = self.rows.get_mut(table).and_then(|t| t.get_mut(&key)) {
            self.size = self.size + known_size(&key, &value) - known_size(&key, slot);
            *slot = value;
        } else if self.size < KNOWN_MAX_BYTES {
            self.size += known_size(&key, &value);
            self.rows
                .entry(table.to_string())
                .or_default()
                .insert(key, value);
        }
    }

    /// Forgets one table's rows (a change this does not follow row by row).
    fn forget_table(&mut self, table: &str) {
        if let Some(rows) = self.rows.remove(table) {
            self.size -= rows.iter().map(|(k, v)| known_size(k, v)).sum::<usize>();
        }
    }

    fn forget(&mut self) {
        self.rows.clear();
        self.size = 0;
    }
}

impl Conn {
    fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        // The connection hands answers over in the order they came, and holds the rest back
        // while one is not taken: the rows of a read sent ahead, past what its channel holds,
        // would keep the preparing's answer from this thread for ever (an alert batch's
        // objects did, with two processes' locks waiting behind its group).
        self.learn_fetched()?;
        let prepared = block_on(self.client.prepare(sql));
        let s = self.answered(prepared)?;
        self.statements.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    /// An answer as the store's; a failure after statements sent ahead is theirs when they
    /// failed first (the transaction refuses everything after its first error).
    fn answered<T>(&mut self, answer: Result<T, tokio_postgres::Error>) -> Result<T, StoreError> {
        match answer {
            Ok(out) => Ok(out),
            Err(e) => {
                self.flush()?;
                Err(from_pg(e))
            }
        }
    }

    pub(in crate::store) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        self.send_changes()?;
        let s = self.statement(sql)?;
        let client = self.client.clone();
        let mut answer = std::pin::pin!(client.query(&s, params));
        // Sent before the reads asked ahead are waited for: one round trip for them all.
        let sent = poll_once(answer.as_mut());
        self.learn_fetched()?;
        let answer = match sent {
            Poll::Ready(answer) => answer,
            Poll::Pending => block_on(answer),
        };
        self.answered(answer)
    }

    /// Sends a read of `keys` of `table` (`sql`: their rows as `k, v`) ahead of its answer,
    /// learnt before the next statement that waits.
    fn fetch_ahead(
        &mut self,
        table: &str,
        sql: &str,
        keys: Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        self.send_changes()?;
        let s = self.statement(sql)?;
        let client = self.client.clone();
        let asked = keys.clone();
        let mut rows: std::pin::Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(async move { client.query(&s, &[&asked]).await });
        let sent = poll_once(rows.as_mut());
        self.fetching.push(Fetch {
            table: table.to_string(),
            keys,
            rows: match sent {
                Poll::Ready(answer) => Box::pin(std::future::ready(answer)),
                Poll::Pending => rows,
            },
        });
        Ok(())
    }

    /// Learns the reads sent ahead when one is of `table`, before `table` is read.
    fn learn_fetched_of(&mut self, table: &str) -> Result<(), StoreError> {
        if self.fetching.iter().any(|f| f.table == table) {
            self.learn_fetched()?;
        }
        Ok(())
    }

    /// Learns the rows of the reads sent ahead. Every change waits for this first (`change`),
    /// so what they answered is what the rows hold; a key learnt since keeps what it learnt.
    fn learn_fetched(&mut self) -> Result<(), StoreError> {
        let mut first = Ok(());
        for fetch in std::mem::take(&mut self.fetching) {
            match block_on(fetch.rows) {
                Ok(rows) => {
                    let mut found: HashMap<Vec<u8>, Vec<u8>> = rows
                        .into_iter()
                        .map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1)))
                        .collect();
                    for key in fetch.keys {
                        if self.known.get(&fetch.table, &key).is_none() {
                            let value = found.remove(&key);
                            self.known.learn(&fetch.table, key, value);
                        }
                    }
                }
                Err(e) if first.is_ok() => first = Err(from_pg(e)),
                Err(_) => {}
            }
        }
        first
    }

    pub(in crate::store) fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.send_changes()?;
        self.learn_fetched()?;
        let s = self.statement(sql)?;
        let answer = block_on(self.client.execute(&s, params));
        self.answered(answer)
    }

    /// Takes session advisory lock `key` unless another session holds it.
    fn try_lock(&mut self, key: i64) -> Result<bool, StoreError> {
        let rows = self.query("SELECT pg_try_advisory_lock($1)", &[&key])?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    pub(in crate::store) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.send_changes()?;
        self.learn_fetched()?;
        let answer = block_on(self.client.batch_execute(sql));
        self.answered(answer)
    }

    /// Runs simple statements in one round trip; the text of the first column of every row
    /// they answered, in order.
    fn batch_rows(&mut self, sql: &str) -> Result<Vec<String>, StoreError> {
        self.send_changes()?;
        self.learn_fetched()?;
        let answer = block_on(self.client.simple_query(sql));
        Ok(self
            .answered(answer)?
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    Some(row.get(0).unwrap_or_default().to_string())
                }
                _ => None,
            })
            .collect())
    }

    /// Keeps a row change of table `sql_table` (`None`: the row goes) to be sent with the
    /// write's others (`send_changes`).
    fn change(
        &mut self,
        sql_table: &str,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), StoreError> {
        // A read sent ahead is learnt first: learnt after, it would teach the row as it was
        // before this change.
        self.learn_fetched()?;
        self.unsent
            .entry(sql_table.to_string())
            .or_default()
            .insert(key, value);
        self.unsent_rows += 1;
        if self.unsent_rows >= UNSENT_MAX {
            self.send_changes()?;
        }
        Ok(())
    }

    /// Sends the row changes kept, without waiting for their answer (`flush` reads it): per
    /// table one upsert of every row written and one delete of every row removed, so a write's
    /// rows cost the database a statement a table, not one a row. Sent before anything else
    /// goes out on the connection, so whatever follows sees them.
    fn send_changes(&mut self) -> Result<(), StoreError> {
        self.unsent_rows = 0;
        for (sql_table, rows) in std::mem::take(&mut self.unsent) {
            let (mut written, mut removed) = (Vec::new(), Vec::new());
            let mut values = Vec::new();
            for (key, value) in rows {
                match value {
                    Some(v) => {
                        written.push(key);
                        values.push(v);
                    }
                    None => removed.push(key),
                }
            }
            if !written.is_empty() {
                let sql = format!(
                    "INSERT INTO {sql_table} (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                     ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
                );
                self.send(&sql, vec![written, values])?;
            }
            if !removed.is_empty() {
                let sql = format!("DELETE FROM {sql_table} WHERE k = ANY($1)");
                self.send(&sql, vec![removed])?;
            }
        }
        Ok(())
    }

    /// Sends a statement of `bytea[]` parameters without waiting for its answer.
    fn send(&mut self, sql: &str, params: Vec<Vec<Vec<u8>>>) -> Result<(), StoreError> {
        let s = self.statement(sql)?;
        let client = self.client.clone();
        self.sent_ahead(Box::pin(async move {
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            client.execute(&s, &refs).await.map(drop)
        }))
    }

    /// Sends simple statements (a savepoint's) without waiting for their answer.
    fn send_batch(&mut self, sql: &'static str) -> Result<(), StoreError> {
        self.send_changes()?;
        let client = self.client.clone();
        self.sent_ahead(Box::pin(async move { client.batch_execute(sql).await }))
    }

    /// Polls `statement` once, which puts it on the connection's queue in order, and keeps it
    /// for its answer unless that came at once.
    fn sent_ahead(&mut self, mut statement: Sent) -> Result<(), StoreError> {
        match poll_once(statement.as_mut()) {
            Poll::Ready(answer) => return self.answered(answer),
            Poll::Pending => self.sent.push(statement),
        }
        if self.sent.len() >= MAX_SENT {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads the answers of the statements sent ahead; the first failure among them.
    fn flush(&mut self) -> Result<(), StoreError> {
        self.send_changes()?;
        let mut first = self.learn_fetched();
        for statement in std::mem::take(&mut self.sent) {
            if let Err(e) = block_on(statement)
                && first.is_ok()
            {
                first = Err(from_pg(e));
            }
        }
        first
    }

    /// Forgets what the write sent or kept to send (it rolls back): the answers are dropped as
    /// they come.
    fn forget_sent(&mut self) {
        self.unsent.clear();
        self.unsent_rows = 0;
        self.fetching.clear();
        self.sent.clear();
    }

    /// Runs `work` in one transaction opened by `begin` (`BEGIN` and its options): committed
    /// when it succeeds, else rolled back.
    pub(in crate::store) fn transaction<T>(
        &mut self,
        begin: &str,
        work: impl FnOnce(&mut Conn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.batch(begin)?;
        match work(self) {
            Ok(out) => self.batch("COMMIT").map(|()| out),
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

type Shared = Arc<Mutex<Conn>>;

fn lock(conn: &Shared) -> MutexGuard<'_, Conn> {
    conn.locked()
}

/// A PostgreSQL error as the store's: a lost connection or a refused one takes the store
/// offline until it reconnects, as an I/O error does on redb.
fn from_pg(e: tokio_postgres::Error) -> StoreError {
    // With its causes: "error performing TLS handshake" alone does not say which certificate.
    let mut why = format!("PostgreSQL: {e}");
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        why.push_str(&format!(": {c}"));
        cause = c.source();
    }
    // Class 08 (connection exception) and 57P (the server shutting down, or an administrator
    // ending the session) are the database going away, not a wrong statement.
    let gone = e
        .code()
        .is_none_or(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
    if e.is_closed() || gone {
        StoreError::Unavailable(why)
    } else {
        StoreError::Internal(why)
    }
}

/// The connections of one store: the writer's, and the readers' pool.
pub struct Pool {
    target: Target,
    /// The TLS client every connection uses (its roots read once, at open).
    tls: tls::Connector,
    /// This process among the database's: its commit notices carry it, so it skips its own.
    pub process: String,
    writer: Shared,
    group: Mutex<Group>,
    /// Counts up each time a group finds that another process committed since this one's last
    /// group (and once for a new pool): the store's in-memory heads hold for one epoch.
    epoch: std::sync::atomic::AtomicU64,
    /// The lease generation while this process leads, else 0: its groups check that the lease
    /// is still theirs (the fence).
    lead: std::sync::atomic::AtomicI64,
    readers: Mutex<Vec<Shared>>,
}

/// The writer's group: whether one is open, and the commit count it will leave.
#[derive(Default)]
struct Group {
    open: bool,
    /// Groups committed on the database (`svc_commits`) when this process's last group
    /// committed; `None` before its first.
    committed: Option<i64>,
    /// The count the open group leaves when it commits.
    counting: i64,
}

/// Epochs are unique across the pools of a process (a store reopened gets a new pool).
static EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Pool {
    /// Connects the writer and applies the schema's pending migrations. Any number of
    /// processes may hold a pool on one database: their groups take turns (`WRITER_LOCK`).
    pub(crate) fn open(target: Target) -> Result<Pool, StoreError> {
        let tls =
            tls::Connector::new(target.ca_file.as_deref()).map_err(StoreError::Unavailable)?;
        let mut writer = connect(&target, &tls)?;
        migrate(&mut writer)?;
        let mut process = [0u8; 8];
        getrandom::fill(&mut process).map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(Pool {
            target,
            tls,
            process: crate::model::audit::hex(&process),
            writer: Arc::new(Mutex::new(writer)),
            group: Mutex::default(),
            epoch: EPOCHS
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
                .into(),
            lead: 0.into(),
            readers: Mutex::default(),
        })
    }

    /// The epoch of the open group: the same while no other process commits between this
    /// one's groups.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Fences this process's groups by the lease's `generation` while it leads (see `Lease`).
    pub(in crate::store) fn fence(&self, generation: i64) {
        self.lead
            .store(generation, std::sync::atomic::Ordering::SeqCst);
    }

    /// A write of the current group, under its own savepoint; the first opens the group: it
    /// waits for the writers' turn, counts the commit and, while this process leads, checks
    /// the lease is still its own.
    pub(super) fn begin_write(&self) -> Result<Write, StoreError> {
        let mut group = self.group.locked();
        let mut conn = lock(&self.writer);
        if !group.open {
            let lead = self.lead.load(std::sync::atomic::Ordering::SeqCst);
            let fence = if lead == 0 {
                String::new()
            } else {
                "; SELECT generation FROM svc_lease FOR SHARE".into()
            };
            let rows = conn.batch_rows(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({WRITER_LOCK}); \
                 UPDATE svc_commits SET n = n + 1 RETURNING n{fence}"
            ))?;
            let number = |i: usize| rows.get(i).and_then(|v| v.parse::<i64>().ok());
            let counting =
                number(1).ok_or_else(|| StoreError::Corrupt("svc_commits has no row".into()))?;
            if lead != 0 && number(2) != Some(lead) {
                let _ = conn.batch("ROLLBACK");
                return Err(StoreError::Superseded);
            }
            if group.committed != Some(counting - 1) {
                self.epoch.store(
                    EPOCHS.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                    std::sync::atomic::Ordering::SeqCst,
                );
            }
            group.counting = counting;
            group.open = true;
            conn.known.forget();
        }
        conn.send_batch("SAVEPOINT write")?;
        Ok(Write {
            conn: self.writer.clone(),
            done: false,
            epoch: self.epoch(),
        })
    }

    /// Ends the group: `COMMIT` when it keeps what it wrote, announcing it with the tables its
    /// committed writes changed (`written`), else (`None`) `ROLLBACK`. Nothing to do outside a
    /// group.
    pub(super) fn end_group(
        &self,
        written: Option<&std::collections::BTreeSet<String>>,
    ) -> Result<(), StoreError> {
        let mut group = self.group.locked();
        if !group.open {
            return Ok(());
        }
        group.open = false;
        let mut conn = lock(&self.writer);
        conn.known.forget();
        // Every write of the group read its answers as it committed or forgot them as it
        // rolled back; what is left is a write's that ended neither way.
        let answered = conn.flush();
        let ended = if let Some(written) = written {
            // Table names are the store's constants and the process a hex string: nothing
            // to quote. PostgreSQL delivers the notice when (and only if) the group commits.
            let tables = written
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",");
            conn.batch(&format!(
                "SELECT pg_notify('{COMMITS_CHANNEL}', '{} {tables}'); COMMIT",
                self.process
            ))
        } else {
            conn.batch("ROLLBACK")
        };
        if written.is_some() && answered.is_ok() && ended.is_ok() {
            group.committed = Some(group.counting);
        }
        answered.and(ended)
    }

    pub(super) fn begin_read(self: &Arc<Self>) -> Result<Read, StoreError> {
        let pooled = self.readers.locked().pop();
        // The last read's `COMMIT` was sent ahead: its answer is read here, and a connection
        // it found broken is not used again.
        let usable = |c: &Shared| {
            let mut c = lock(c);
            !c.client.is_closed() && c.flush().is_ok()
        };
        let conn = match pooled {
            Some(c) if usable(&c) => c,
            _ => Arc::new(Mutex::new(connect(&self.target, &self.tls)?)),
        };
        {
            let mut c = lock(&conn);
            c.known.forget();
            // Sent ahead too: it reaches the database before the read's first query, whose
            // round trip it shares.
            c.send_batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        }
        Ok(Read {
            conn,
            pool: self.clone(),
        })
    }
}

/// The lease of the leading process, whose consumers run (the alert engine, escalations,
/// couriers, timers, retention): a session advisory lock on a connection of its own, and the
/// generation of the lease row, counted up by each taking: the fence its groups check.
pub(in crate::store) struct Lease {
    pub generation: i64,
    _conn: Conn,
    /// Disconnected when the lease's session ends.
    ended: std::sync::mpsc::Receiver<(String, String)>,
}

impl Lease {
    /// Waits while another process holds the lease, then takes it. Waiting outlives the
    /// database's restarts (connecting again with a back-off). Blocking.
    pub(in crate::store) fn take(target: &Target) -> Result<Lease, StoreError> {
        let tls =
            tls::Connector::new(target.ca_file.as_deref()).map_err(StoreError::Unavailable)?;
        let mut retry = RECONNECT_FIRST;
        loop {
            match Self::try_take(target, &tls, None) {
                Err(StoreError::Unavailable(why)) => {
                    tracing::warn!(%why, ?retry, "waiting for the lease lost the database; connecting again");
                    pause(retry)?;
                    retry = (retry * 2).min(RECONNECT_MAX);
                }
                taken => return taken,
            }
        }
    }

    /// Takes the lease: waiting for it, or, given the generation this process held (`since`),
    /// only if no other process took it meanwhile (else `Superseded`).
    fn try_take(
        target: &Target,
        tls: &tls::Connector,
        since: Option<i64>,
    ) -> Result<Lease, StoreError> {
        let (notices, ended) = std::sync::mpsc::channel();
        let mut conn = connect_with(target, tls, Some(notices))?;
        if !conn.try_lock(INSTANCE_LOCK)? {
            if since.is_some() {
                return Err(StoreError::Superseded);
            }
            let (holder, at) = conn
                .query("SELECT holder, since::text FROM svc_lease", &[])?
                .first()
                .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                .unwrap_or_default();
            tracing::info!(%holder, since = %at, "another process leads on this database; serving beside it, ready to lead when its session ends");
            // Free the moment the holder's session ends; tried, not waited on (`LEAD_TRY_EVERY`).
            while !conn.try_lock(INSTANCE_LOCK)? {
                pause(LEAD_TRY_EVERY)?;
            }
            tracing::info!(previous = %holder, "took the lead");
        }
        // Taking it back keeps the generation, so this process's fence holds throughout.
        let taken = match since {
            None => conn.query(
                "UPDATE svc_lease SET generation = generation + 1, holder = $1, since = now() \
                 RETURNING generation",
                &[&holder_name()],
            )?,
            Some(held) => conn.query(
                "UPDATE svc_lease SET holder = $1 WHERE generation = $2 RETURNING generation",
                &[&holder_name(), &held],
            )?,
        };
        let generation = taken
            .first()
            .map(|r| r.get::<_, i64>(0))
            .ok_or(StoreError::Superseded)?;
        Ok(Lease {
            generation,
            _conn: conn,
            ended,
        })
    }

    /// Blocks while the lease's session lives; then takes the lease again, with its
    /// generation, unless another process took it meanwhile (`Superseded`), retrying while
    /// the database is away.
    pub(in crate::store) fn hold(self, target: &Target) -> Result<Lease, StoreError> {
        while self.ended.recv().is_ok() {}
        tracing::warn!("the lead's session ended; taking the lead again");
        // A process serving beside this one, whose session lives, takes the lead first: it
        // tries it within `LEAD_TRY_EVERY`.
        pause(2 * LEAD_TRY_EVERY)?;
        let tls =
            tls::Connector::new(target.ca_file.as_deref()).map_err(StoreError::Unavailable)?;
        let mut retry = RECONNECT_FIRST;
        loop {
            match Self::try_take(target, &tls, Some(self.generation)) {
                Err(StoreError::Unavailable(why)) => {
                    tracing::warn!(%why, ?retry, "the lead cannot reach the database; trying again");
                    pause(retry)?;
                    retry = (retry * 2).min(RECONNECT_MAX);
                }
                other => return other,
            }
        }
    }
}

/// The advisory locks of the processes sharing a partitioned consumer (the alert engine):
/// each holds one member lock (a slot of `MEMBER_LOCKS`) while its session lives, so every
/// process can count the others, and one lock per partition it leads. PostgreSQL drops a
/// session's locks the moment it ends, a process killed included.
pub(in crate::store) struct PartitionLocks {
    conn: Conn,
    /// Disconnected when the session ends: every lock is lost with it.
    ended: std::sync::mpsc::Receiver<(String, String)>,
}

/// The first member lock; a process takes the first free slot of this many.
const MEMBER_LOCKS: i64 = 0x5356_4301_0000;
const MEMBER_SLOTS: i64 = 1024;
/// The first partition lock.
const PARTITION_LOCKS: i64 = 0x5356_4302_0000;

impl PartitionLocks {
    /// Connects and takes a member slot. Blocking.
    pub(in crate::store) fn join(target: &Target) -> Result<PartitionLocks, StoreError> {
        let tls =
            tls::Connector::new(target.ca_file.as_deref()).map_err(StoreError::Unavailable)?;
        let (notices, ended) = std::sync::mpsc::channel();
        let mut conn = connect_with(target, &tls, Some(notices))?;
        for slot in 0..MEMBER_SLOTS {
            if conn.try_lock(MEMBER_LOCKS + slot)? {
                return Ok(PartitionLocks { conn, ended });
            }
        }
        Err(StoreError::Unavailable(format!(
            "more than {MEMBER_SLOTS} processes serve this database"
        )))
    }

    /// How many processes hold a member lock on this database, this one included.
    pub(in crate::store) fn members(&mut self) -> Result<usize, StoreError> {
        // A bigint advisory key shows as its high half (`classid`) and low half (`objid`).
        let rows = self.conn.query(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
             WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted \
             AND l.objsubid = 1 AND l.classid::bigint = $1 AND l.objid::bigint >= $2 \
             AND l.objid::bigint < $3",
            &[
                &(MEMBER_LOCKS >> 32),
                &(MEMBER_LOCKS & 0xffff_ffff),
                &((MEMBER_LOCKS & 0xffff_ffff) + MEMBER_SLOTS),
            ],
        )?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)).max(1) as usize)
    }

    /// Takes partition `partition`'s lock unless another process holds it.
    pub(in crate::store) fn try_take(&mut self, partition: u16) -> Result<bool, StoreError> {
        self.conn.try_lock(PARTITION_LOCKS + i64::from(partition))
    }

    /// Gives partition `partition`'s lock up.
    pub(in crate::store) fn release(&mut self, partition: u16) -> Result<(), StoreError> {
        let key = PARTITION_LOCKS + i64::from(partition);
        self.conn
            .execute("SELECT pg_advisory_unlock($1)", &[&key])
            .map(drop)
    }

    /// Waits up to `how_long`; false once the session has ended.
    pub(in crate::store) fn wait(&self, how_long: std::time::Duration) -> bool {
        loop {
            match self.ended.recv_timeout(how_long) {
                Ok(_) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }
}

/// Sleeps `how_long` on the I/O runtime's clock (this thread blocks).
pub(in crate::store) fn pause(how_long: std::time::Duration) -> Result<(), StoreError> {
    // The timer is made on the runtime: this thread has none.
    let slept = io_runtime()?.spawn(async move { tokio::time::sleep(how_long).await });
    block_on(slept).map_err(|e| StoreError::Internal(e.to_string()))
}

/// Follows the commit and forwarded-event notices of every process on the database
/// (`COMMITS_CHANNEL`, `FORWARDED_CHANNEL`), each to `notice`, and `Notice::Lost` after
/// connecting again. Returns once `notice` answers false. Blocking.
pub(in crate::store) fn follow_commits(target: &Target, mut notice: impl FnMut(Notice) -> bool) {
    let mut retry = RECONNECT_FIRST;
    let mut again = false;
    loop {
        let (notices, received) = std::sync::mpsc::channel();
        let listening = tls::Connector::new(target.ca_file.as_deref())
            .map_err(StoreError::Unavailable)
            .and_then(|tls| connect_with(target, &tls, Some(notices)))
            .and_then(|mut conn| {
                conn.batch(&format!(
                    "LISTEN {COMMITS_CHANNEL}; LISTEN {FORWARDED_CHANNEL}"
                ))
                .map(|()| conn)
            });
        match listening {
            Ok(_conn) => {
                retry = RECONNECT_FIRST;
                if again && !notice(Notice::Lost) {
                    return;
                }
                again = true;
                for (channel, payload) in received.iter() {
                    let heard = if channel == FORWARDED_CHANNEL {
                        Notice::Forwarded(payload)
                    } else {
                        Notice::Committed(payload)
                    };
                    if !notice(heard) {
                        return;
                    }
                }
                tracing::warn!("lost the commit notices of the other processes; listening again");
            }
            Err(e) => {
                tracing::warn!(error = %e, ?retry, "cannot listen for the other processes' commits; trying again")
            }
        }
        if pause(retry).is_err() {
            return;
        }
        retry = (retry * 2).min(RECONNECT_MAX);
    }
}

/// Connections to the database for work beside the key-value tables (the event partitions):
/// each call takes an idle one or connects, and gives it back unless it broke.
pub(in crate::store) struct Connections {
    target: Target,
    tls: tls::Connector,
    idle: Mutex<Vec<Conn>>,
}

impl Connections {
    pub(in crate::store) fn open(target: &Target) -> Result<Self, StoreError> {
        let tls =
            tls::Connector::new(target.ca_file.as_deref()).map_err(StoreError::Unavailable)?;
        Ok(Self {
            target: target.clone(),
            tls,
            idle: Mutex::default(),
        })
    }

    pub(in crate::store) fn with<T>(
        &self,
        work: impl FnOnce(&mut Conn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = self.idle.locked().pop();
        let mut conn = match idle {
            Some(c) if !c.client.is_closed() => c,
            _ => {
                let mut c = connect(&self.target, &self.tls)?;
                // The month partitions grow from empty, and a plan cached while one was small
                // (a hash join over a scan of the whole month, where a lookup of a few keys
                // wants the primary key) would stay until the partition is next analyzed: a
                // minute or more of every month's start, and all of a short benchmark's run,
                // spent scanning. Each statement is planned for what the partitions hold now.
                c.batch("SET plan_cache_mode = force_custom_plan")?;
                c
            }
        };
        let out = work(&mut conn);
        let mut idle = self.idle.locked();
        if !conn.client.is_closed() && idle.len() < self.target.pool_size.max(1) {
            idle.push(conn);
        }
        out
    }
}

fn connect(target: &Target, tls: &tls::Connector) -> Result<Conn, StoreError> {
    connect_with(target, tls, None)
}

/// A connection whose session's notices (`NOTIFY` payloads) go to `notices`, which is
/// dropped when the session ends: the receiver then knows it ended.
fn connect_with(
    target: &Target,
    tls: &tls::Connector,
    notices: Option<std::sync::mpsc::Sender<(String, String)>>,
) -> Result<Conn, StoreError> {
    use tokio_postgres::config::SslMode;
    let mut config: tokio_postgres::Config = target
        .url
        .parse()
        .map_err(|e| StoreError::Unavailable(format!("storage.postgres.url: {e}")))?;
    match target.tls_mode.as_str() {
        "disable" => config.ssl_mode(SslMode::Disable),
        "require" => config.ssl_mode(SslMode::Require),
        "prefer" => config.ssl_mode(SslMode::Prefer),
        // Unset: the URL's `sslmode`, else `prefer`.
        _ => &mut config,
    };
    config.application_name("svc");
    config.connect_timeout(std::time::Duration::from_secs(10));
    // A database (or a network) gone silent fails a call within half a minute instead of the
    // kernel's quarter of an hour: the store goes offline and a cut-off server steps down.
    config.keepalives_idle(std::time::Duration::from_secs(10));
    config.keepalives_interval(std::time::Duration::from_secs(5));
    config.keepalives_retries(3);
    config.tcp_user_timeout(std::time::Duration::from_secs(30));
    // The same on the server's side of the session, so a host that dies without closing its
    // connections (power, a network cut) releases the lead within half a minute, not after
    // the kernel's two hours, whatever `postgresql.conf` says. Options the URL gives come
    // after these, so they win (the last `-c` of a setting does).
    let server_side = "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 \
                       -c tcp_keepalives_count=3 -c tcp_user_timeout=30000";
    let options = match config.get_options() {
        Some(given) if !given.is_empty() => format!("{server_side} {given}"),
        _ => server_side.to_string(),
    };
    config.options(&options);
    let tls = tls.clone();
    let runtime = io_runtime()?;
    let connecting = runtime.spawn(async move {
        let (client, mut connection) = config.connect(tls).await?;
        // The connection does the socket's I/O on this runtime until its client is dropped.
        tokio::spawn(async move {
            loop {
                let message = std::future::poll_fn(|cx| connection.poll_message(cx)).await;
                match message {
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                        if let Some(to) = &notices {
                            let _ = to.send((n.channel().to_string(), n.payload().to_string()));
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
        });
        Ok::<_, tokio_postgres::Error>(client)
    });
    let client = block_on(connecting)
        .map_err(|e| StoreError::Internal(e.to_string()))?
        .map_err(from_pg)?;
    Ok(Conn {
        client: Arc::new(client),
        statements: HashMap::new(),
        sent: Vec::new(),
        unsent: BTreeMap::new(),
        unsent_rows: 0,
        fetching: Vec::new(),
        known: Known::default(),
    })
}

/// The runtime on a thread of its own that does the connections' socket I/O. The store's calls
/// block (as redb's do) on a client's requests, which reach the connection through channels;
/// so a store call works the same on the server's runtime, a blocking thread or the writer's.
fn io_runtime() -> Result<&'static tokio::runtime::Handle, StoreError> {
    static RUNTIME: std::sync::OnceLock<Result<tokio::runtime::Handle, String>> =
        std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("svc-postgres".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .map_err(|e| e.to_string())?;
            Ok(handle)
        })
        .as_ref()
        .map_err(|e| StoreError::Unavailable(format!("PostgreSQL I/O thread: {e}")))
}

/// Wakes the thread that waits in `block_on`.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` once, which puts a statement on the connection's queue in order.
fn poll_once<F: Future + ?Sized>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    future.poll(&mut Context::from_waker(&waker))
}

/// Runs `future` to its end on this thread, parking it while the future waits.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// Applies the schema's pending migrations, each with its version in one transaction, under the
/// writers' lock (two processes starting together migrate once).
fn migrate(conn: &mut Conn) -> Result<(), StoreError> {
    conn.batch("CREATE TABLE IF NOT EXISTS svc_schema (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")?;
    for (version, name) in MIGRATIONS {
        conn.batch(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({WRITER_LOCK})"
        ))?;
        let applied = conn
            .query("SELECT 1 FROM svc_schema WHERE version = $1", &[version])?
            .is_empty();
        let step = if applied {
            apply(conn, *version).and_then(|()| {
                conn.execute(
                    "INSERT INTO svc_schema (version, name) VALUES ($1, $2)",
                    &[version, name],
                )
                .map(drop)
            })
        } else {
            Ok(())
        };
        match step {
            Ok(()) => conn.batch("COMMIT")?,
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(StoreError::Migration {
                    version: *version as u32,
                    name,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(())
}

fn apply(conn: &mut Conn, version: i32) -> Result<(), StoreError> {
    match version {
        1 | 6 | 7 | 10 => store_tables(conn),
        8 => store_tables(conn).and_then(|()| move_ai_records(conn)),
        9 => store_tables(conn).and_then(|()| index_mirrors(conn)),
        // Keys as the month files' are (tenant, time, id), so a page reads one index range;
        // the other indexes serve the filters the month files index. Times are milliseconds,
        // the partition key: each month is a partition `events_YYYYMM` made as it is first
        // written (and the next one with it), dropped whole by retention.
        2 => conn.batch(
            "CREATE TABLE events (
                tenant uuid NOT NULL,
                ts bigint NOT NULL,
                id uuid NOT NULL,
                object_id uuid,
                source_id text,
                type smallint NOT NULL,
                severity text,
                site text,
                body bytea NOT NULL,
                PRIMARY KEY (tenant, ts, id)
            ) PARTITION BY RANGE (ts);
            CREATE INDEX events_by_object ON events (tenant, object_id, ts, id) WHERE object_id IS NOT NULL;
            CREATE INDEX events_by_source ON events (tenant, source_id, ts, id) WHERE source_id IS NOT NULL;
            CREATE INDEX events_by_type ON events (tenant, type, ts, id);",
        ),
        // One row: who serves the database and since when, and how many times it has been
        // taken (the fencing token).
        3 => conn.batch(
            "CREATE TABLE svc_lease (
                only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
                generation bigint NOT NULL,
                holder text NOT NULL,
                since timestamptz NOT NULL
            );
            INSERT INTO svc_lease VALUES (true, 0, '', now());",
        ),
        // The metric file's tables as columns: a series by tenant, object and name (in byte
        // order, as the file's keys), its samples by (series, time), and each tier's
        // aggregates by (series, bucket start).
        4 => conn.batch(
            "CREATE TABLE metric_series (
                id bigserial PRIMARY KEY,
                tenant uuid NOT NULL,
                object uuid NOT NULL,
                metric text COLLATE \"C\" NOT NULL,
                unit text NOT NULL,
                first_ms bigint NOT NULL,
                last_ms bigint NOT NULL,
                last double precision NOT NULL,
                UNIQUE (tenant, object, metric)
            );
            CREATE TABLE metric_raw (
                series bigint NOT NULL,
                ms bigint NOT NULL,
                value double precision NOT NULL,
                PRIMARY KEY (series, ms)
            );
            CREATE TABLE metric_5m (
                series bigint NOT NULL,
                bucket bigint NOT NULL,
                count bigint NOT NULL,
                sum double precision NOT NULL,
                min double precision NOT NULL,
                max double precision NOT NULL,
                last double precision NOT NULL,
                PRIMARY KEY (series, bucket)
            );
            CREATE TABLE metric_1h (LIKE metric_5m INCLUDING ALL);",
        ),
        // One row: how many groups committed, across every process.
        5 => conn.batch(
            "CREATE TABLE svc_commits (
                only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
                n bigint NOT NULL
            );
            INSERT INTO svc_commits VALUES (true, 0);",
        ),
        other => Err(StoreError::Internal(format!("no migration {other}"))),
    }
}

/// A key-value table for every table of the store, those it gained since included; the
/// tables are then those of the redb schema's latest version, and META says so, as a redb
/// store's does (backups and `svc migrate` carry it).
fn store_tables(conn: &mut Conn) -> Result<(), StoreError> {
    let tables = super::super::tables::names();
    for name in &tables {
        conn.batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} (k bytea PRIMARY KEY, v bytea NOT NULL)",
            table(name)
        ))?;
    }
    let meta = table(tables.first().copied().unwrap_or("meta"));
    // Big-endian, so a later version sorts after an earlier one.
    let version = super::super::migrations::latest().to_be_bytes().to_vec();
    conn.execute(
        &format!(
            "INSERT INTO {meta} (k, v) VALUES ($1, $2) \
             ON CONFLICT (k) DO UPDATE SET v = excluded.v WHERE {meta}.v < excluded.v"
        ),
        &[
            &super::super::migrations::SCHEMA_VERSION.as_bytes(),
            &version,
        ],
    )
    .map(drop)
}

/// The redb store's migration 21 on PostgreSQL: the AI agent's old records leave the settings
/// table for their own tables, as `store::ai::moved_rows` plans them.
fn move_ai_records(conn: &mut Conn) -> Result<(), StoreError> {
    use super::super::ai::{is_old_record, moved_rows};
    let settings = table(redb::TableHandle::name(&super::super::tables::SETTINGS));
    for row in conn.query(&format!("SELECT k, v FROM {settings}"), &[])? {
        let (key, value): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
        let Some(local) = key.get(16..).and_then(|l| std::str::from_utf8(l).ok()) else {
            continue;
        };
        if !is_old_record(local) {
            continue;
        }
        let tenant = super::super::keys::stored_uuid(&key[..16], "a setting's tenant")?;
        let value: serde_json::Value = super::super::codec::decode(&value)?;
        match moved_rows(tenant, local, value) {
            Ok(rows) => {
                insert_planned(conn, rows)?;
                conn.execute(&format!("DELETE FROM {settings} WHERE k = $1"), &[&key])?;
            }
            Err(why) => {
                tracing::warn!(setting = local, %why, "an AI record no longer reads; it stays in the settings");
            }
        }
    }
    Ok(())
}

/// The redb store's migration 25 on PostgreSQL: the site mirrors stored before their indexes
/// get their rows, as `store::sites::mirror_index` plans them.
fn index_mirrors(conn: &mut Conn) -> Result<(), StoreError> {
    let mirrors = table(redb::TableHandle::name(&super::super::tables::SITE_MIRRORS));
    for row in conn.query(&format!("SELECT k, v FROM {mirrors}"), &[])? {
        let (key, value): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
        insert_planned(conn, super::super::sites::mirror_index(&key, &value)?)?;
    }
    Ok(())
}

/// Writes the rows a migration planned (`migrations::PlannedRow`); one already there stays.
fn insert_planned(
    conn: &mut Conn,
    rows: Vec<super::super::migrations::PlannedRow>,
) -> Result<(), StoreError> {
    for r in rows {
        conn.execute(
            &format!(
                "INSERT INTO {} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING",
                table(redb::TableHandle::name(&r.table))
            ),
            &[&r.key, &r.value],
        )?;
    }
    Ok(())
}

/// Who holds the lease, for the lease row and the other processes' log: host and process.
fn holder_name() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    format!("{host} pid {}", std::process::id())
}

/// The PostgreSQL table of a store table (names are the store's own constants).
fn table(name: &str) -> String {
    format!("\"kv_{name}\"")
}

/// A write in the group's transaction; dropped without `commit`, it rolls back to its savepoint.
pub struct Write {
    conn: Shared,
    done: bool,
    /// The pool's epoch when the write began.
    pub epoch: u64,
}

impl Write {
    /// Releases the savepoint and reads the answers of every row change sent ahead; when one
    /// failed, the write rolls back to its savepoint as it is dropped, alone.
    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        let released = {
            let mut conn = lock(&self.conn);
            conn.send_batch("RELEASE SAVEPOINT write")
                .and_then(|()| conn.flush())
        };
        self.done = released.is_ok();
        released
    }

    pub(super) fn table<K: Key + 'static, V: Value + 'static>(&self, name: &str) -> Table<K, V> {
        Table::new(self.conn.clone(), name)
    }

    /// This write's database session (its backend's pid) and every session on the database
    /// now: what a claim names, and which claims still have their session.
    pub(super) fn sessions(&self) -> Result<(i64, HashSet<i64>), StoreError> {
        let rows = lock(&self.conn).batch_rows(
            "SELECT pg_backend_pid(); \
             SELECT pid FROM pg_stat_activity WHERE datname = current_database()",
        )?;
        let mut pids = rows.iter().filter_map(|pid| pid.parse::<i64>().ok());
        let own = pids
            .next()
            .ok_or_else(|| StoreError::Internal("pg_backend_pid() answered nothing".into()))?;
        Ok((own, pids.chain([own]).collect()))
    }
}

impl Drop for Write {
    fn drop(&mut self) {
        if !self.done {
            // A failure here leaves the group's transaction failed: its COMMIT then fails and
            // every write of the group answers the error.
            let mut conn = lock(&self.conn);
            conn.forget_sent();
            conn.known.forget();
            let _ = conn.batch("ROLLBACK TO SAVEPOINT write; RELEASE SAVEPOINT write");
        }
    }
}

/// A read-only snapshot; its connection goes back to the pool when it ends.
pub struct Read {
    conn: Shared,
    pool: Arc<Pool>,
}

impl Read {
    pub(super) fn table<K: Key + 'static, V: Value + 'static>(&self, name: &str) -> Table<K, V> {
        Table::new(self.conn.clone(), name)
    }
}

impl Drop for Read {
    fn drop(&mut self) {
        // Sent without waiting for its answer: the connection's next read reads it first.
        let ended = lock(&self.conn).send_batch("COMMIT").is_ok();
        // A handle that outlived its transaction keeps the connection; it is not reused.
        if ended && Arc::strong_count(&self.conn) == 1 {
            let mut readers = self.pool.readers.locked();
            if readers.len() < self.pool.target.pool_size {
                readers.push(self.conn.clone());
            }
        }
    }
}

/// A table of a write or a read.
pub struct Table<K: Key + 'static, V: Value + 'static> {
    conn: Shared,
    name: String,
    sql_table: String,
    key: KeyCoding,
    _types: PhantomData<fn() -> (K, V)>,
}

/// Rows as (key, value) in redb's encodings.
pub type Pair = (Vec<u8>, Vec<u8>);

impl<K: Key + 'static, V: Value + 'static> Table<K, V> {
    fn new(conn: Shared, name: &str) -> Self {
        Self {
            conn,
            name: name.to_string(),
            sql_table: table(name),
            key: KeyCoding::of(&K::type_name()),
            _types: PhantomData,
        }
    }

    /// A key's bytes as stored here.
    pub(crate) fn ordered<'a>(&self, key: &K::SelfType<'a>) -> Vec<u8> {
        self.key.ordered(K::as_bytes(key).as_ref())
    }

    pub(crate) fn get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        let mut conn = lock(&self.conn);
        conn.learn_fetched_of(&self.name)?;
        if let Some(known) = conn.known.get(&self.name, &key) {
            return Ok(known.clone());
        }
        let sql = format!("SELECT v FROM {} WHERE k = $1", self.sql_table);
        let rows = conn.query(&sql, &[&key])?;
        let value = rows.first().map(|r| r.get::<_, Vec<u8>>(0));
        conn.known.learn(&self.name, key, value.clone());
        Ok(value)
    }

    /// Whether each of `keys` (stored keys) is here, in one query for those not known yet.
    pub(crate) fn contains_each(&self, keys: Vec<Vec<u8>>) -> Result<Vec<bool>, StoreError> {
        let mut conn = lock(&self.conn);
        conn.learn_fetched_of(&self.name)?;
        let unknown: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| conn.known.get(&self.name, k).is_none())
            .collect();
        let mut held = HashSet::new();
        if !unknown.is_empty() {
            let sql = format!("SELECT k FROM {} WHERE k = ANY($1)", self.sql_table);
            held = conn
                .query(&sql, &[&unknown])?
                .iter()
                .map(|r| r.get::<_, Vec<u8>>(0))
                .collect();
            // A key not found is known to be absent; one found is present, its value unread.
            for k in unknown.into_iter().filter(|k| !held.contains(*k)) {
                conn.known.learn(&self.name, k.clone(), None);
            }
        }
        Ok(keys
            .iter()
            .map(|k| match conn.known.get(&self.name, k) {
                Some(known) => known.is_some(),
                None => held.contains(k),
            })
            .collect())
    }

    /// The value of each of `keys` (stored keys), in one query for those not known yet.
    pub(crate) fn get_each(&self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut conn = lock(&self.conn);
        conn.learn_fetched_of(&self.name)?;
        let unknown: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| conn.known.get(&self.name, k).is_none())
            .collect();
        let mut found: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        if !unknown.is_empty() {
            let sql = format!("SELECT k, v FROM {} WHERE k = ANY($1)", self.sql_table);
            let rows = conn.query(&sql, &[&unknown])?;
            found = unknown.iter().map(|k| ((*k).clone(), None)).collect();
            for r in rows {
                found.insert(r.get::<_, Vec<u8>>(0), Some(r.get::<_, Vec<u8>>(1)));
            }
            for (k, v) in &found {
                conn.known.learn(&self.name, k.clone(), v.clone());
            }
        }
        Ok(keys
            .iter()
            .map(|k| match found.get(k) {
                Some(v) => v.clone(),
                None => conn.known.get(&self.name, k).cloned().flatten(),
            })
            .collect())
    }

    /// Sends a read of `keys` (stored keys) not known yet ahead of its answer: their rows are
    /// learnt with the next read's round trip (of any table), so later reads of them cost none.
    pub(crate) fn fetch_ahead(&self, keys: Vec<Vec<u8>>) -> Result<(), StoreError> {
        let mut conn = lock(&self.conn);
        // Rows of this table asked for already are learnt first, so none is asked for twice.
        conn.learn_fetched_of(&self.name)?;
        let unknown: Vec<Vec<u8>> = keys
            .into_iter()
            .filter(|k| conn.known.get(&self.name, k).is_none())
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let sql = format!("SELECT k, v FROM {} WHERE k = ANY($1)", self.sql_table);
        conn.fetch_ahead(&self.name, &sql, unknown)
    }

    /// Stores `value` under `key`, sent ahead of its answer (`Write::commit` reads it).
    pub(crate) fn put(&self, key: Vec<u8>, value: &[u8]) -> Result<(), StoreError> {
        let mut conn = lock(&self.conn);
        conn.change(&self.sql_table, key.clone(), Some(value.to_vec()))?;
        conn.known.learn(&self.name, key, Some(value.to_vec()));
        Ok(())
    }

    /// Removes `key`, sent ahead of its answer.
    pub(crate) fn delete(&self, key: Vec<u8>) -> Result<(), StoreError> {
        let mut conn = lock(&self.conn);
        conn.change(&self.sql_table, key.clone(), None)?;
        conn.known.learn(&self.name, key, None);
        Ok(())
    }

    /// Removes `key`; the value it held.
    pub(crate) fn take(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        let sql = format!("DELETE FROM {} WHERE k = $1 RETURNING v", self.sql_table);
        let mut conn = lock(&self.conn);
        let rows = conn.query(&sql, &[&key])?;
        conn.known.learn(&self.name, key, None);
        Ok(rows.first().map(|r| r.get::<_, Vec<u8>>(0)))
    }

    pub(crate) fn count(&self) -> Result<u64, StoreError> {
        let sql = format!("SELECT count(*) FROM {}", self.sql_table);
        let rows = lock(&self.conn).query(&sql, &[])?;
        Ok(rows
            .first()
            .map_or(0, |r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }

    /// The rows between `lo` and `hi` (stored keys), fetched a page at a time.
    pub(crate) fn range(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Range {
        Range {
            conn: self.conn.clone(),
            sql_table: self.sql_table.clone(),
            key: self.key,
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            exhausted: false,
        }
    }

    /// Removes the rows between `lo` and `hi` that `keep` refuses (given redb's encodings).
    pub(crate) fn retain_in(
        &self,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        mut keep: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        for row in self.range(lo, hi) {
            let (k, v) = row?;
            if !keep(&k, &v) {
                doomed.push(self.key.ordered(&k));
            }
        }
        let sql = format!("DELETE FROM {} WHERE k = ANY($1)", self.sql_table);
        let mut conn = lock(&self.conn);
        conn.known.forget_table(&self.name);
        for chunk in doomed.chunks(1024) {
            conn.execute(&sql, &[&chunk])?;
        }
        Ok(())
    }
}

/// Rows in key order, fetched a page at a time from either end.
pub struct Range {
    conn: Shared,
    sql_table: String,
    key: KeyCoding,
    /// What is not yet fetched lies between these (stored keys).
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    front: VecDeque<Pair>,
    back: VecDeque<Pair>,
    /// Nothing is left between `lo` and `hi`.
    exhausted: bool,
}

impl Range {
    /// Fetches the next page from the low end (`ascending`) or the high end into its buffer.
    fn fetch(&mut self, ascending: bool) -> Result<(), StoreError> {
        let mut clauses = Vec::new();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
        for (bound, lower) in [(&self.lo, true), (&self.hi, false)] {
            let (op, key) = match (bound, lower) {
                (Bound::Included(k), true) => (">=", k),
                (Bound::Excluded(k), true) => (">", k),
                (Bound::Included(k), false) => ("<=", k),
                (Bound::Excluded(k), false) => ("<", k),
                (Bound::Unbounded, _) => continue,
            };
            params.push(key);
            clauses.push(format!("k {op} ${}", params.len()));
        }
        let filter = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let order = if ascending { "ASC" } else { "DESC" };
        let sql = format!(
            "SELECT k, v FROM {} {filter} ORDER BY k {order} LIMIT {PAGE}",
            self.sql_table
        );
        let rows = lock(&self.conn).query(&sql, &params)?;
        if rows.len() < PAGE as usize {
            self.exhausted = true;
        }
        let mut last = None;
        for row in rows {
            let k: Vec<u8> = row.get(0);
            let v: Vec<u8> = row.get(1);
            let pair = (self.key.unordered(&k), v);
            last = Some(k);
            if ascending {
                self.front.push_back(pair);
            } else {
                self.back.push_front(pair);
            }
        }
        if let Some(k) = last {
            if ascending {
                self.lo = Bound::Excluded(k);
            } else {
                self.hi = Bound::Excluded(k);
            }
        }
        Ok(())
    }

    fn step(&mut self, ascending: bool) -> Option<Result<Pair, StoreError>> {
        let take = |r: &mut Self| {
            if ascending {
                r.front.pop_front().or_else(|| r.back.pop_front())
            } else {
                r.back.pop_back().or_else(|| r.front.pop_back())
            }
        };
        let buffered = if ascending { &self.front } else { &self.back };
        if buffered.is_empty()
            && !self.exhausted
            && let Err(e) = self.fetch(ascending)
        {
            self.exhausted = true;
            return Some(Err(e));
        }
        take(self).map(Ok)
    }
}

impl Iterator for Range {
    type Item = Result<Pair, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

/// How a key type's redb encoding maps to bytes that sort as the keys do.
#[derive(Clone, Copy)]
enum KeyCoding {
    /// Byte strings and text: stored as they are.
    Bytes,
    /// Little-endian unsigned integers: stored big-endian.
    Unsigned,
    /// Little-endian signed integers: stored big-endian with the sign bit flipped.
    Signed,
}

impl KeyCoding {
    fn of(name: &TypeName) -> Self {
        match name.name() {
            "u8" | "u16" | "u32" | "u64" | "u128" => Self::Unsigned,
            "i8" | "i16" | "i32" | "i64" | "i128" => Self::Signed,
            _ => Self::Bytes,
        }
    }

    fn ordered(self, redb: &[u8]) -> Vec<u8> {
        let mut out: Vec<u8> = redb.to_vec();
        if !matches!(self, Self::Bytes) {
            out.reverse();
        }
        if let (Self::Signed, Some(first)) = (self, out.first_mut()) {
            *first ^= 0x80;
        }
        out
    }

    fn unordered(self, stored: &[u8]) -> Vec<u8> {
        let mut out = stored.to_vec();
        if let (Self::Signed, Some(first)) = (self, out.first_mut()) {
            *first ^= 0x80;
        }
        if !matches!(self, Self::Bytes) {
            out.reverse();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored<K: Key + 'static>(key: K::SelfType<'_>) -> Vec<u8> {
        KeyCoding::of(&K::type_name()).ordered(K::as_bytes(&key).as_ref())
    }

    #[test]
    fn stored_keys_sort_as_the_keys_do() {
        let unsigned = [0u64, 1, 255, 256, 65_536, u64::MAX - 1, u64::MAX];
        let mut keys: Vec<Vec<u8>> = unsigned.iter().rev().map(|&k| stored::<u64>(k)).collect();
        keys.sort();
        assert_eq!(keys, unsigned.map(stored::<u64>).to_vec());
        let signed = [i64::MIN, -65_536, -1, 0, 1, 255, i64::MAX];
        let mut keys: Vec<Vec<u8>> = signed.iter().rev().map(|&k| stored::<i64>(k)).collect();
        keys.sort();
        assert_eq!(keys, signed.map(stored::<i64>).to_vec());
        assert_eq!(stored::<&str>("audit_head"), b"audit_head");
        assert_eq!(stored::<&[u8]>(&[3, 1, 2]), vec![3, 1, 2]);
    }

    #[test]
    fn stored_keys_read_back_as_redb_encodes_them() {
        for coding in [KeyCoding::Unsigned, KeyCoding::Signed, KeyCoding::Bytes] {
            for redb in [vec![1, 2, 3, 4, 5, 6, 7, 0x80], vec![0xff; 16], vec![]] {
                assert_eq!(coding.unordered(&coding.ordered(&redb)), redb);
            }
        }
        let k = 0x0102_0304_0506_0708u64;
        let coding = KeyCoding::of(&<u64 as Value>::type_name());
        assert_eq!(coding.ordered(&k.to_le_bytes()), k.to_be_bytes());
    }

    /// What a transaction knows follows its writes, counts its size, and stops growing at its
    /// budget while keeping true what it already knows.
    #[test]
    fn known_rows_follow_writes_within_a_budget() {
        let mut known = Known::default();
        known.learn("t", b"a".to_vec(), Some(b"1".to_vec()));
        known.learn("t", b"b".to_vec(), None);
        assert_eq!(known.get("t", b"a"), Some(&Some(b"1".to_vec())));
        assert_eq!(known.get("t", b"b"), Some(&None), "known absent");
        assert_eq!(known.get("t", b"c"), None, "not known");
        assert_eq!(known.get("u", b"a"), None, "another table's");
        known.learn("t", b"a".to_vec(), None);
        assert_eq!(known.get("t", b"a"), Some(&None), "a delete is followed");
        assert_eq!(known.size, 2 * (KNOWN_ROW_BYTES + 1));
        known.forget_table("t");
        assert_eq!((known.get("t", b"b"), known.size), (None, 0));

        let big = vec![0u8; KNOWN_MAX_BYTES];
        known.learn("t", b"big".to_vec(), Some(big));
        known.learn("t", b"late".to_vec(), Some(b"x".to_vec()));
        assert_eq!(
            known.get("t", b"late"),
            None,
            "past the budget nothing new is learned"
        );
        known.learn("t", b"big".to_vec(), None);
        assert_eq!(
            known.get("t", b"big"),
            Some(&None),
            "what is known stays true"
        );
        known.forget();
        assert_eq!((known.get("t", b"big"), known.size), (None, 0));
    }
}
