//! Composition root: opens the store, builds the services, spawns the workers and the HTTP
//! server, and on SIGTERM/SIGINT shuts down in order (listener, in-flight requests, workers, store).

mod hardware;
mod recovery;
mod server;
mod start;
mod tls;

pub use start::serve;

use crate::auth::{Auth, AuthError, CryptoPolicy, SeedSettings};
use crate::config::Config;
use crate::events::Events;
use crate::inventory::secrets::MasterKey;
use crate::model::health::ConsumerLag;
use crate::monitor::pipeline::Pipeline;
use crate::runtime::clock::SharedClock;
use crate::runtime::sandbox::{Confinement, ConfinementConfig};
use crate::runtime::worker::{Lead, StepFuture, Wait, Worker};
use crate::runtime::{Metrics, SystemClock, systemd};
use crate::store::events::EventStore;
use crate::store::{Backing, Store, StoreError};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long in-flight requests may take to finish after a stop signal.
const DRAIN_DEADLINE: Duration = Duration::from_secs(20);
/// How long workers may take to stop after the requests have drained.
const WORKER_EXIT_DEADLINE: Duration = Duration::from_secs(10);
/// From the stop signal, the longest the process lives, whatever its threads do (the unit's
/// `TimeoutStopSec` is 45 s).
pub const STOP_DEADLINE: Duration = Duration::from_secs(35);
/// Delay before a panicked worker runs again.
const WORKER_RESTART_DELAY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("federation: {0}")]
    Site(String),
    #[error("{0}")]
    Internal(String),
}

/// The file whose lock marks a data directory as this process's.
const LOCK_FILE: &str = "svc.lock";

/// Takes the data directory for this process until it exits: a second server (or `svc
/// bootstrap`) on the same directory is refused even while this one shuts down, whatever its
/// threads are doing.
fn lock_data_dir(data_dir: &Path) -> Result<(), AppError> {
    std::fs::create_dir_all(data_dir).map_err(|e| AppError::Internal(e.to_string()))?;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| AppError::Internal(format!("{}: {e}", path.display())))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        // Held (and its descriptor open) until the process ends.
        Ok(lock) => {
            std::mem::forget(lock);
            Ok(())
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(StoreError::Locked.into()),
        Err((_, e)) => Err(AppError::Internal(format!("{}: {e}", path.display()))),
    }
}

/// Where `config` keeps the main database.
pub fn backing(config: &Config) -> Backing {
    match config.storage.backend.as_str() {
        #[cfg(feature = "postgres")]
        "postgres" => {
            let pg = &config.storage.postgres;
            Backing::Postgres(crate::store::kv::pg::Target {
                url: pg.url.0.clone(),
                tls_mode: pg.tls_mode.clone(),
                ca_file: pg.ca_file.clone(),
                pool_size: pg.pool_size,
            })
        }
        _ => Backing::File,
    }
}

/// Locks the data directory, then opens the store off the async runtime.
pub async fn open_store(
    data_dir: &Path,
    clock: SharedClock,
    backing: Backing,
) -> Result<Arc<Store>, AppError> {
    lock_data_dir(data_dir)?;
    let dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || Store::open_on(&dir, clock, backing))
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?
        .map_err(AppError::from)
}

/// The event store of the backing: month files beside the main database, or partitions in
/// its PostgreSQL database.
fn open_events(
    data_dir: &Path,
    backing: &Backing,
    clock: SharedClock,
    metrics: Arc<Metrics>,
) -> Result<Arc<Events>, AppError> {
    let store = EventStore::open_on(data_dir, backing)?;
    Ok(Events::new(store, clock, metrics))
}

/// The secrets master key: read from its file, or generated into it (mode 0600) on first
/// start. `None` (logged) when it can be neither read nor made; secrets then answer 503.
fn master_key(path: &Path) -> Option<MasterKey> {
    if !path.exists() {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            tracing::error!("no randomness for a master key");
            return None;
        }
        let hex = crate::model::audit::hex(&key);
        if let Err(e) = tls::write_private(path, hex.as_bytes()) {
            tracing::error!(error = %e, "could not create the secrets master key");
            return None;
        }
        tracing::info!(path = %path.display(), "generated the secrets master key");
    }
    let key = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| MasterKey::from_hex(&t));
    if key.is_none() {
        tracing::error!(path = %path.display(), "the secrets master key is unreadable or not 64 hex characters; secrets are unavailable");
    }
    key
}

/// Registers the SIGTERM/SIGINT handlers at once (so a signal right after start-up is not
/// the default "terminate") and resolves when one arrives.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Feeds systemd's watchdog while the service does its work: the store is online and the
/// results pipeline moves. A hung pipeline or a lost disk stops the feeding, and systemd
/// restarts the service.
struct Watchdog {
    store: Arc<Store>,
    pipeline: Arc<Pipeline>,
    events: Arc<Events>,
    every: Duration,
}

/// A consumer of this instance's own work whose position has not moved for this long with
/// events waiting is stuck, not slow (a batch takes seconds).
const CONSUMER_STALL_LIMIT: f64 = 120.0;

/// Why the process is unwell enough for systemd to restart it, if it is: its store offline,
/// its results pipeline stalled, or one of its consumers stuck (a process hung in part: its
/// restart moves the lead, on a shared database, to a process that is not).
fn unwell(
    store_offline: Option<String>,
    pipeline_stalled: bool,
    lags: &BTreeMap<&str, ConsumerLag>,
) -> Option<String> {
    if let Some(reason) = store_offline {
        return Some(format!("store offline: {reason}"));
    }
    if pipeline_stalled {
        return Some("results pipeline stalled".into());
    }
    lags.iter()
        .find(|(_, lag)| !lag.waits_on_peer && lag.stalled_seconds >= CONSUMER_STALL_LIMIT)
        .map(|(name, lag)| {
            format!(
                "consumer {name} stuck: no progress for {:.0} s with events waiting",
                lag.stalled_seconds
            )
        })
}

impl Worker for Watchdog {
    fn name(&self) -> &'static str {
        "systemd-watchdog"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let why = unwell(
                self.store.offline_reason(),
                self.pipeline.stats().stalled,
                &self.events.consumer_lags(),
            );
            match why {
                None => {
                    systemd::notify("WATCHDOG=1");
                }
                Some(why) => tracing::warn!(%why, "not feeding the systemd watchdog"),
            }
            Wait::For(self.every)
        })
    }
}

/// How long a start waits for the lead before serving beside another process that holds it.
const LEAD_AT_ONCE: Duration = Duration::from_secs(2);

/// Marks this process as leading once `store.lead()` answered (its task's end).
fn took_lead(lead: &Lead, taken: Result<Result<(), StoreError>, tokio::task::JoinError>) {
    match taken {
        Ok(Ok(())) => {
            tracing::info!("leading: the consumers and sweeps run in this process");
            lead.take();
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot take the lead; serving without the consumers")
        }
        Err(e) => tracing::error!(error = %e, "the lead's task failed"),
    }
}

/// How plugins and scripts are confined: nothing of the server's own (the data directory, the
/// configuration file, the TLS key and the master key wherever they are) is theirs to read.
fn confinement(config: &Config) -> Result<Confinement, AppError> {
    let protect = [
        Some(config.data_dir.clone()),
        config.source.clone(),
        config.tls.key_file.clone(),
        config.secrets.master_key_file.clone(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let confinement = Confinement::new(&ConfinementConfig {
        protect,
        allow_exec: config.programs.allow_exec.clone(),
        run_as: config.programs.run_as.clone(),
        no_landlock: !config.programs.landlock,
    })
    .map_err(AppError::Internal)?;
    let how = confinement.describe();
    if confinement.confined() {
        tracing::info!("plugins and scripts run {how}");
    } else {
        tracing::warn!("plugins and scripts run {how}");
    }
    if nix::unistd::geteuid().is_root() && config.programs.run_as.is_none() {
        tracing::warn!(
            "running as root: set programs.runAs or run svc as its own user (the packaged unit does)"
        );
    }
    Ok(confinement)
}

/// `svc bootstrap`: opens the store (failing if a running server holds it) and mints the
/// bootstrap-admin token.
pub async fn bootstrap(config: &Config) -> Result<String, AppError> {
    let clock: SharedClock = Arc::new(SystemClock);
    let backing = backing(config);
    let store = open_store(&config.data_dir, clock.clone(), backing.clone()).await?;
    let events = open_events(
        &config.data_dir,
        &backing,
        clock.clone(),
        Arc::new(Metrics::new()),
    )?;
    store.file_with(events.clone(), tokio::runtime::Handle::current());
    let auth = Auth::new(
        store.clone(),
        clock,
        crypto_policy(),
        config.auth.hash_slots(),
    );
    let minted = auth.mint_bootstrap().await;
    events.store().close();
    store.close();
    minted
        .map(|m| m.token)
        .map_err(|e| AppError::Internal(e.to_string()))
}

/// `svc migrate`: moves the main database of `data_dir` (a redb file), its event month files
/// and its metric file into an empty PostgreSQL database, then opens the store there and
/// verifies the audit chain it now holds. The master key and audit checkpoint stay in the data
/// directory, which the server on PostgreSQL keeps using.
#[cfg(feature = "postgres")]
pub async fn migrate(
    data_dir: &Path,
    target: crate::store::kv::pg::Target,
) -> Result<String, AppError> {
    lock_data_dir(data_dir)?;
    let dir = data_dir.to_path_buf();
    let to = target.clone();
    let (copied, events, series) =
        tokio::task::spawn_blocking(move || crate::store::copy_to_postgres(&dir, to))
            .await
            .map_err(|e| AppError::Internal(e.to_string()))??;
    let dir = data_dir.to_path_buf();
    let store = tokio::task::spawn_blocking(move || {
        Store::open_on(&dir, Arc::new(SystemClock), Backing::Postgres(target))
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))??;
    let verified = verify_then_close(&store, "copied, but on PostgreSQL").await?;
    Ok(format!(
        "copied {} tables, {events} events and {series} metric series of {} into PostgreSQL; audit chain verified ({verified} entries). Start the server with storage.backend: postgres and the same data directory.",
        copied.len(),
        data_dir.display(),
    ))
}

/// `svc restore`: unpacks a backup into an empty `data_dir`, opens it (migrating an older
/// schema) and verifies its audit chain; a broken chain fails the restore.
pub async fn restore(archive: &Path, data_dir: &Path) -> Result<String, AppError> {
    let file = std::fs::File::open(archive)
        .map_err(|e| AppError::Internal(format!("{}: {e}", archive.display())))?;
    let dir = data_dir.to_path_buf();
    let manifest = tokio::task::spawn_blocking(move || {
        crate::store::backup::unpack(std::io::BufReader::new(file), &dir)
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))??;
    let store = open_store(data_dir, Arc::new(SystemClock), Backing::File).await?;
    let verified = verify_then_close(&store, "restored, but").await?;
    Ok(format!(
        "restored {} files from svc {} (schema {}, taken {}, events {}) into {}; audit chain verified ({} entries)",
        manifest.files.len(),
        manifest.version,
        manifest.schema_version,
        manifest.created_at.0,
        if manifest.events {
            "included"
        } else {
            "left out"
        },
        data_dir.display(),
        verified
    ))
}

/// Verifies the audit chain of a store just restored or moved, then closes it: the entries
/// verified, or why the chain does not verify (`after` says what was done).
async fn verify_then_close(store: &Arc<Store>, after: &str) -> Result<u64, AppError> {
    let audit = store.verify_audit().await;
    store.close();
    let audit = audit?;
    if !audit.intact {
        return Err(AppError::Internal(format!(
            "{after} the audit chain does not verify: {}",
            audit.error.unwrap_or_default()
        )));
    }
    Ok(audit.verified)
}

/// `SVC_CRYPTO_POLICY=fast` selects the test preset of the secret hash; never set it in production.
fn crypto_policy() -> CryptoPolicy {
    CryptoPolicy::named(std::env::var("SVC_CRYPTO_POLICY").ok().as_deref())
}

/// SPEC 5.8: seeds a local administrator from `SVC_DEFAULT_ADMIN_*` at every start; a generated
/// password is logged once, at WARN. While the store is offline (a start on a full disk) it
/// tries again every second until the store is back.
struct DefaultAdminSeed {
    auth: Arc<Auth>,
    settings: SeedSettings,
}

impl DefaultAdminSeed {
    fn from_env(auth: Arc<Auth>) -> Self {
        let var = |k: &str| std::env::var(k).ok();
        Self {
            auth,
            settings: SeedSettings {
                disabled: var("SVC_DEFAULT_ADMIN_DISABLED"),
                email: var("SVC_DEFAULT_ADMIN_EMAIL"),
                name: var("SVC_DEFAULT_ADMIN_NAME"),
                password: var("SVC_DEFAULT_ADMIN_PASSWORD"),
            },
        }
    }

    async fn attempt(&self) -> Wait {
        match self.auth.seed_default_admin(self.settings.clone()).await {
            Ok(Some((email, password))) => {
                tracing::warn!(%email, %password, "seeded the default administrator with a generated password; sign in and change it");
                Wait::Done
            }
            Ok(None) => Wait::Done,
            Err(AuthError::Store(StoreError::Unavailable(_))) => Wait::For(Duration::from_secs(1)),
            Err(e) => {
                tracing::error!(error = %e, "default administrator seeding failed");
                Wait::Done
            }
        }
    }
}

impl Worker for DefaultAdminSeed {
    fn name(&self) -> &'static str {
        "default-admin-seed"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(self.attempt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(stalled_seconds: f64, waits_on_peer: bool) -> ConsumerLag {
        ConsumerLag {
            position: uuid::Uuid::nil(),
            lag_seconds: stalled_seconds,
            stalled_seconds,
            lost: 0,
            waits_on_peer,
        }
    }

    /// The watchdog goes unfed for a stuck consumer of this instance's own work, not for a
    /// slow one, nor for the uplink waiting on its main.
    #[test]
    fn a_stuck_consumer_starves_the_watchdog_a_slow_one_does_not() {
        let mut lags = BTreeMap::from([
            ("alert-engine", lag(119.0, false)),
            ("federation-uplink", lag(7200.0, true)),
        ]);
        assert_eq!(unwell(None, false, &lags), None);
        lags.insert("alert-engine", lag(121.0, false));
        let why = unwell(None, false, &lags).unwrap();
        assert!(why.contains("alert-engine stuck"), "{why}");
        assert!(
            unwell(Some("disk gone".into()), false, &BTreeMap::new())
                .unwrap()
                .contains("disk gone")
        );
        assert!(unwell(None, true, &BTreeMap::new()).is_some());
    }
}
