//! What follows a commit, derived from the tables it changed: this process's own commits (the
//! committer names the tables a durable group wrote, `Store::committed`) and, with several
//! processes on one database (PostgreSQL, `docs/storage.md`), the others'. Every process serves
//! the API and writes (its groups take turns, `kv::pg`); one leads, and its consumers run. Each
//! commit is announced with the tables it changed, and on that notice this process wakes what
//! sleeps on those tables and drops what it cached from them. On redb one process opens the
//! file: it leads at once and hears no one. No domain wakes anything by hand after a write.

#[cfg(feature = "postgres")]
use super::Backing;
#[cfg(feature = "postgres")]
use super::kv::pg::Notice;
use super::{Store, StoreError, tables};
use crate::runtime::Locked;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::Notify;

/// What a commit changed, for whoever sleeps on it or caches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Tenants, objects, configuration documents, schedule overrides, settings.
    Catalog,
    /// Tokens, users, sessions.
    Credentials,
    /// The event journal: committed events to read.
    Journal,
    /// Snoozes, pending, suppressed and heartbeat-rule alerts, silences and downtimes.
    AlertTimers,
    Escalations,
    Deliveries,
    Heartbeats,
    Sites,
    /// A scope flooded, or its digest or end moved.
    Floods,
    /// Events a federation site forwarded were stored (by any process): `take_forwarded`.
    Forwarded,
}

/// The change a write to table `name` is.
fn change_of(name: &str) -> Option<Change> {
    use redb::TableHandle as _;
    let kinds = [
        (tables::TENANTS.name(), Change::Catalog),
        (tables::CONFIG_DOCS.name(), Change::Catalog),
        (tables::OBJECTS.name(), Change::Catalog),
        (tables::OVERRIDES.name(), Change::Catalog),
        (tables::SETTINGS.name(), Change::Catalog),
        (tables::TOKENS.name(), Change::Credentials),
        (tables::USERS.name(), Change::Credentials),
        (tables::SESSIONS.name(), Change::Credentials),
        (tables::EVENT_JOURNAL.name(), Change::Journal),
        (tables::ALERT_TIMERS.name(), Change::AlertTimers),
        (tables::PENDING_ALERTS.name(), Change::AlertTimers),
        (tables::RULE_BEATS.name(), Change::AlertTimers),
        (tables::SILENCES.name(), Change::AlertTimers),
        (tables::DOWNTIMES.name(), Change::AlertTimers),
        (tables::SUPPRESSED_ALERTS.name(), Change::AlertTimers),
        (tables::ESCALATIONS_DUE.name(), Change::Escalations),
        (tables::DELIVERIES_DUE.name(), Change::Deliveries),
        (tables::HEARTBEATS.name(), Change::Heartbeats),
        (tables::SITE_STATUS.name(), Change::Sites),
        (tables::FLOODS.name(), Change::Floods),
    ];
    kinds.into_iter().find(|(n, _)| *n == name).map(|(_, c)| c)
}

impl Store {
    /// Has `waker` notified once a commit of a change of `change` is durable, this process's or
    /// another's (a sweep whose next due time it may bring forward, a catalog to rebuild).
    pub(crate) fn watch_commits(&self, change: Change, waker: Arc<Notify>) {
        self.commit_watchers.locked().push((change, waker));
    }

    /// This process's group that changed the tables named `written` is durable: what sleeps on
    /// them is woken (the journal's watchers are told by the filing, `journal_durable`).
    pub(super) fn committed(&self, written: &std::collections::BTreeSet<String>) {
        let changed: Vec<Change> = written.iter().filter_map(|t| change_of(t)).collect();
        self.wake_on(|c| changed.contains(&c));
    }

    /// Wakes the watchers of the changes `touches` accepts; a catalog change moves the
    /// catalog's generation first, so what the watchers read is the new catalog.
    fn wake_on(&self, touches: impl Fn(Change) -> bool) {
        if touches(Change::Catalog) {
            self.catalog_generation.fetch_add(1, Ordering::SeqCst);
        }
        for (change, waker) in self.commit_watchers.locked().iter() {
            if touches(*change) {
                waker.notify_one();
            }
        }
    }

    /// Moves on when another process changes tokens, users or sessions: a credential verified
    /// at an older generation is read again before it is trusted.
    pub(crate) fn credentials_generation(&self) -> u64 {
        self.credentials_generation.load(Ordering::SeqCst)
    }

    /// The announcements of events a federation site forwarded since the last call (see
    /// `EventStore::announce_forwarded`, `EventKey::parse_announcement`), in their order.
    pub(crate) fn take_forwarded(&self) -> Vec<String> {
        std::mem::take(&mut *self.forwarded.locked())
    }

    #[cfg(feature = "postgres")]
    /// Another process committed changes to `changed` (`None`: anything, as after notices
    /// were lost).
    fn others_committed(&self, changed: Option<&[Change]>) {
        let touches = |c: Change| changed.is_none_or(|list| list.contains(&c));
        if touches(Change::Credentials) {
            self.credentials_generation.fetch_add(1, Ordering::SeqCst);
        }
        if touches(Change::Journal) {
            self.notify_journal_watchers();
        }
        self.wake_on(touches);
    }

    /// Follows the other processes' commits for as long as this store lives (a thread of its
    /// own); nothing on redb.
    pub(crate) fn follow_others(self: &Arc<Self>) -> Result<(), StoreError> {
        #[cfg(feature = "postgres")]
        if let Backing::Postgres(target) = &self.backing {
            let store = Arc::downgrade(self);
            let target = target.clone();
            std::thread::Builder::new()
                .name("svc-commits".into())
                .spawn(move || {
                    super::kv::pg::follow_commits(&target, |notice| {
                        let Some(store) = store.upgrade() else {
                            return false;
                        };
                        match notice {
                            Notice::Lost => store.others_committed(None),
                            Notice::Committed(payload) => {
                                let (process, names) =
                                    payload.split_once(' ').unwrap_or((&payload, ""));
                                if store.process_id().as_deref() != Some(process) {
                                    let changed: Vec<Change> =
                                        names.split(',').filter_map(change_of).collect();
                                    store.others_committed(Some(&changed));
                                }
                            }
                            // This process's own too: its relay tells them apart.
                            Notice::Forwarded(payload) => {
                                store.forwarded.locked().push(payload);
                                store.others_committed(Some(&[Change::Forwarded]));
                            }
                        }
                        true
                    })
                })
                .map_err(|e| StoreError::Internal(e.to_string()))?;
        }
        Ok(())
    }

    /// Whether other processes may serve this store beside this one (PostgreSQL): what one
    /// takes from a shared queue it must claim first.
    pub(crate) fn is_shared(&self) -> bool {
        #[cfg(feature = "postgres")]
        if let Backing::Postgres(_) = &self.backing {
            return true;
        }
        false
    }

    /// This process's name in its commit notices (the open pool's).
    #[cfg(feature = "postgres")]
    fn process_id(&self) -> Option<String> {
        match self.handle().ok()?.as_ref() {
            super::Db::Pg(pool) => Some(pool.process.clone()),
            super::Db::Redb(_) => None,
        }
    }

    /// Resolves once this process leads: at once on redb; on PostgreSQL once it holds the
    /// lease, which it then keeps (taking it back after a lost session, unless another
    /// process took it meanwhile: then this store stops serving, `Superseded`).
    pub(crate) async fn lead(self: &Arc<Self>) -> Result<(), StoreError> {
        #[cfg(feature = "postgres")]
        if let Backing::Postgres(target) = &self.backing {
            let (taken, led) = tokio::sync::oneshot::channel();
            let store = Arc::downgrade(self);
            let target = target.clone();
            std::thread::Builder::new()
                .name("svc-lease".into())
                .spawn(move || hold_lease(&store, &target, taken))
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            return led
                .await
                .map_err(|_| StoreError::Internal("the lease's thread ended".into()))?;
        }
        Ok(())
    }
}

/// Takes the lease, says so through `taken`, and holds it: after a lost session it is taken
/// back (the same generation) unless another process took it, which supersedes this store.
#[cfg(feature = "postgres")]
fn hold_lease(
    store: &std::sync::Weak<Store>,
    target: &super::kv::pg::Target,
    taken: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
) {
    let mut lease = match super::kv::pg::Lease::take(target) {
        Ok(lease) => lease,
        Err(e) => {
            let _ = taken.send(Err(e));
            return;
        }
    };
    if let Some(store) = store.upgrade() {
        store.lead.store(lease.generation, Ordering::SeqCst);
        if let Ok(db) = store.handle()
            && let super::Db::Pg(pool) = db.as_ref()
        {
            pool.fence(lease.generation);
        }
    }
    let _ = taken.send(Ok(()));
    loop {
        match lease.hold(target) {
            Ok(again) => lease = again,
            Err(e) => {
                tracing::error!(error = %e, "lost the lead to another process");
                if let Some(store) = store.upgrade() {
                    store.fail(&StoreError::Superseded);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::clock::SystemClock;
    use crate::store::{TxResult, Wrote};
    use std::time::Duration;

    /// Whether `waker` has been notified (its permit taken).
    async fn woken(waker: &Notify) -> bool {
        tokio::time::timeout(Duration::from_millis(50), waker.notified())
            .await
            .is_ok()
    }

    /// What follows a commit is derived from the tables it changed, through any transaction:
    /// a settings row written with plain `transact` moves the catalog's generation and wakes
    /// the catalog's watchers, not the courier's; a delivery row wakes the courier; a write
    /// that only read, or changed nothing, wakes no one.
    #[tokio::test]
    async fn a_commit_wakes_what_sleeps_on_the_tables_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(SystemClock)).unwrap();
        let (catalog, courier) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        store.watch_commits(Change::Catalog, catalog.clone());
        store.watch_commits(Change::Deliveries, courier.clone());
        let before = store.catalog_generation();

        store
            .transact(|tx| -> TxResult<_> {
                tx.unrecorded("a test row");
                tx.open_table(tables::SETTINGS)?
                    .insert(b"tenant/key".as_slice(), b"value".as_slice())?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        assert!(store.catalog_generation() > before);
        assert!(woken(&catalog).await, "the catalog's watcher");
        assert!(!woken(&courier).await, "the courier");

        store
            .transact(|tx| -> TxResult<_> {
                tx.unrecorded("a test row");
                tx.open_table(tables::DELIVERIES_DUE)?
                    .insert(b"due".as_slice(), ())?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        assert!(woken(&courier).await, "the courier");
        assert!(!woken(&catalog).await, "the catalog's watcher");

        let generation = store.catalog_generation();
        store
            .transact(|tx| -> TxResult<_> {
                tx.open_table(tables::SETTINGS)?;
                Ok(Wrote::Unchanged(()))
            })
            .await
            .unwrap();
        store
            .transact(|tx| -> TxResult<_> {
                tx.unrecorded("a read only");
                tx.open_table(tables::SETTINGS)?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        assert_eq!(store.catalog_generation(), generation);
        assert!(!woken(&catalog).await && !woken(&courier).await);
    }
}
