//! Composition root: opens the store, builds the services, spawns the workers and the HTTP
//! server, and on SIGTERM/SIGINT shuts down in order (listener, in-flight requests, workers, store).

mod hardware;
mod recovery;
mod server;
mod tls;

use crate::alerting::{AlertEngine, AlertTimers, Alerting};
use crate::api::{AppContext, build_router};
use crate::auth::{
    Auth, AuthError, CryptoPolicy, LastUsedWorker, SeedSettings, SessionPurgeWorker,
};
use crate::config::Config;
use crate::events::{EventFiler, Events, RetentionWorker};
use crate::federation::edge::{EdgeSync, EdgeUplink, MainLink};
use crate::federation::{Sites, StaleSites};
use crate::ingress::Ingress;
use crate::ingress::listeners::SourceListeners;
use crate::inventory::Inventory;
use crate::inventory::secrets::MasterKey;
use crate::model::health::ConsumerLag;
use crate::model::incident::Storm;
use crate::monitor::business::BusinessServices;
use crate::monitor::catalog::Catalog;
use crate::monitor::checks::Runners;
use crate::monitor::discovery::{Discovery, DiscoveryWorker};
use crate::monitor::heartbeats::{HeartbeatSweep, Heartbeats};
use crate::monitor::metrics::{MetricQueries, MetricsRetention};
use crate::monitor::pipeline::{Pipeline, PipelineWorker, StalenessSweep};
use crate::monitor::results::Results;
use crate::monitor::scheduler::{Scheduler, SchedulerWorker};
use crate::notify::{Courier, Escalator, Handoffs, Notifier, Senders, WebhookDispatcher};
use crate::reports::{ReportScheduler, Reports, ReportsParts};
use crate::runtime::clock::SharedClock;
use crate::runtime::memory::{Activity, MemoryRelease, release_memory};
use crate::runtime::paths::{Allowed, AllowedDirs};
use crate::runtime::sandbox::{Confinement, ConfinementConfig};
use crate::runtime::worker::{Lead, Led, StepFuture, Wait, Worker};
use crate::runtime::{Metrics, Shutdown, Stopwatch, Supervisor, SystemClock, systemd};
use crate::store::events::EventStore;
use crate::store::metrics::MetricsStore;
use crate::store::{Backing, Change, Store, StoreError};
use recovery::RecoveryWorker;
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

/// `worker`, run only while this process leads.
fn led<W>(lead: &Arc<Lead>, worker: W) -> Led<W> {
    Led {
        worker,
        lead: lead.clone(),
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

/// Runs the service until a stop signal.
pub async fn serve(config: Config) -> Result<(), AppError> {
    // Outgoing TLS (notification channels) uses ring, like everything else here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clock: SharedClock = Arc::new(SystemClock);
    let uptime = Stopwatch::start();
    let backing = backing(&config);
    let store = open_store(&config.data_dir, clock.clone(), backing.clone()).await?;
    store.follow_others()?;
    let shutdown = Shutdown::new();
    let supervisor = Arc::new(Supervisor::new(shutdown.clone(), WORKER_RESTART_DELAY));
    supervisor.spawn(RecoveryWorker::new(store.clone()));
    // The consumers and sweeps run in the process that leads (on redb: this one).
    let lead = Arc::new(Lead::default());
    // Where no other process leads, this one leads before its consumers start and its
    // listener binds, as on redb; else it serves beside the leader and leads when that ends.
    let mut leading = tokio::spawn({
        let store = store.clone();
        async move { store.lead().await }
    });
    let led_at_once = match tokio::time::timeout(LEAD_AT_ONCE, &mut leading).await {
        Ok(taken) => {
            took_lead(&lead, taken);
            true
        }
        Err(_) => false,
    };

    let tls = match config.tls.mode.as_str() {
        "off" => None,
        _ => {
            let (acceptor, fingerprint) = tls::acceptor(&config, clock.now())?;
            // For an edge to pin (`site.fingerprint`) and for people to compare.
            println!("svc TLS certificate SHA-256 {fingerprint}");
            tracing::info!(%fingerprint, "TLS certificate");
            Some(acceptor)
        }
    };
    let listener = server::listen(&config.listen).map_err(|source| AppError::Listen {
        addr: config.listen.clone(),
        source,
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| AppError::Internal(e.to_string()))?;
    let scheme = if tls.is_some() { "https" } else { "http" };

    let metrics = Arc::new(Metrics::new());
    let events = open_events(&config.data_dir, &backing, clock.clone(), metrics.clone())?;
    // Every durable write's events reach the event store and the bus from here on.
    store.file_with(events.clone(), tokio::runtime::Handle::current());
    if let Some(dispatcher) = events.bus().dispatcher() {
        supervisor.spawn(dispatcher);
    }
    // Beside other processes, the bus gets every process's events from the journal.
    #[cfg(feature = "postgres")]
    if matches!(backing, Backing::Postgres(_)) {
        supervisor.spawn(crate::events::EventRelay::new(
            events.clone(),
            store.clone(),
        ));
    }
    // Events journaled before a crash reach the event store before anything new is produced.
    let filer = EventFiler::new(events.clone(), store.clone());
    match filer.refile().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            events = n,
            "stored the events journaled before the last stop"
        ),
        Err(e) => tracing::error!(error = %e, "journaled events not stored yet; the filer retries"),
    }
    supervisor.spawn(filer);
    supervisor.spawn(led(
        &lead,
        RetentionWorker::new(
            events.clone(),
            clock.clone(),
            config.storage.event_retention_months,
            jiff::tz::TimeZone::system(),
        ),
    ));
    let auth = Auth::new(
        store.clone(),
        clock.clone(),
        crypto_policy(),
        config.auth.hash_slots(),
    );
    supervisor.spawn(LastUsedWorker::new(auth.clone()));
    supervisor.spawn(led(&lead, SessionPurgeWorker(auth.clone())));
    let seed = DefaultAdminSeed::from_env(auth.clone());
    if seed.attempt().await != Wait::Done {
        supervisor.spawn(seed);
    }
    let key = master_key(&config.master_key_file());
    // A store that cannot be read now (a full disk) is not a reason to stay down: the check is
    // made at the next start.
    let kept = match &key {
        Some(key) => store
            .keep_key_fingerprint(key.fingerprint())
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not compare the master key with the database's");
                None
            }),
        None => None,
    };
    if let (Some(key), Some(kept)) = (&key, kept) {
        return Err(AppError::Internal(format!(
            "the master key {} (fingerprint {}) is not the one this database's secrets are sealed with (fingerprint {kept}): give this process the same secrets.masterKeyFile as the others, or restore the key that belongs to the database",
            config.master_key_file().display(),
            key.fingerprint()
        )));
    }
    let heartbeats = Heartbeats::new(store.clone(), clock.clone());
    let heartbeat_sweep = HeartbeatSweep(heartbeats.clone());
    if let Some(wake) = heartbeat_sweep.waker() {
        store.watch_commits(Change::Heartbeats, wake);
    }
    supervisor.spawn(led(&lead, heartbeat_sweep));
    let storm = Storm {
        threshold: config.alerting.storm_threshold,
        window: config.alerting.storm_window.0,
    };
    let alerting = Alerting::new(store.clone(), clock.clone(), events.clone(), storm);
    let alert_timers = AlertTimers(alerting.clone());
    if let Some(wake) = alert_timers.waker() {
        store.watch_commits(Change::AlertTimers, wake.clone());
        // A changed heartbeat rule may move its timer.
        store.watch_commits(Change::Catalog, wake);
    }
    supervisor.spawn(led(&lead, alert_timers));
    supervisor.spawn(led(
        &lead,
        AlertEngine::new(
            alerting.clone(),
            store.clone(),
            events.clone(),
            clock.clone(),
            metrics.clone(),
        ),
    ));
    let metric_store = MetricsStore::open_on(&config.data_dir, &backing)?;
    let catalog = Catalog::new(store.clone());
    supervisor.spawn(led(
        &lead,
        MetricsRetention {
            metrics: metric_store.clone(),
            catalog: catalog.clone(),
            clock: clock.clone(),
        },
    ));
    let results = Results::new(
        store.clone(),
        catalog.clone(),
        metric_store.clone(),
        clock.clone(),
    );
    let pipeline = Pipeline::new(results.clone());
    supervisor.spawn(PipelineWorker(pipeline.clone()));
    let staleness = StalenessSweep::new(pipeline.clone());
    if let Some(wake) = staleness.waker() {
        store.watch_commits(Change::Catalog, wake);
    }
    supervisor.spawn(led(&lead, staleness));
    let confinement = confinement(&config)?;
    let programs = Allowed {
        plugins: AllowedDirs::new("checks.pluginDirs", config.checks.plugin_dirs.clone())
            .confined(confinement.clone()),
        scripts: AllowedDirs::new(
            "notify.scriptDir",
            config.notify.script_dir.iter().cloned().collect(),
        )
        .confined(confinement.clone()),
        ca_files: AllowedDirs::new("tls.caDirs", config.tls.ca_dirs.clone()),
    };
    let inventory = Inventory::new(
        store.clone(),
        clock.clone(),
        key,
        catalog.clone(),
        programs.clone(),
        config.strict_references,
        config.ingress.privileged_ports.clone(),
    );
    let business = BusinessServices::new(
        store.clone(),
        catalog.clone(),
        events.clone(),
        clock.clone(),
    );
    let secrets: Arc<dyn crate::runtime::SecretSource> = inventory.clone();
    let hardware = hardware::start(&config, &store, &secrets, &clock, &supervisor).await;
    let devices = hardware.devices.clone();
    let object_labels: Arc<dyn crate::runtime::ObjectLabels> = catalog.clone();
    let scheduler = Scheduler::new(
        store.clone(),
        catalog,
        clock.clone(),
        pipeline.clone(),
        Runners {
            secrets: inventory.clone(),
            devices: devices.clone(),
            plugins: programs.plugins.clone(),
        },
        config.checks.max_concurrent,
    );
    store.watch_commits(Change::Catalog, scheduler.waker());
    scheduler.run_while_leading(lead.clone());
    let scheduler_waker = scheduler.waker();
    supervisor.spawn(SchedulerWorker(scheduler.clone()));
    let metric_queries = MetricQueries::new(store.clone(), metric_store.clone(), clock.clone());
    let ingress = Ingress::new(
        store.clone(),
        clock.clone(),
        alerting.clone(),
        secrets.clone(),
        programs.ca_files.clone(),
    );
    hardware.listen(&supervisor, &ingress);
    let sites = Sites::new(
        store.clone(),
        clock.clone(),
        events.clone(),
        alerting.clone(),
    );
    store.watch_commits(Change::Catalog, sites.sweep_waker());
    store.watch_commits(Change::Sites, sites.sweep_waker());
    supervisor.spawn(led(&lead, StaleSites(sites.clone())));
    match MainLink::from_config(&config.site) {
        Ok(Some(link)) => {
            supervisor.spawn(led(
                &lead,
                EdgeSync::new(
                    link.clone(),
                    &config.site,
                    store.clone(),
                    events.clone(),
                    clock.clone(),
                    inventory.clone(),
                    sites.edge_handle(),
                ),
            ));
            supervisor.spawn(led(
                &lead,
                EdgeUplink::new(
                    link,
                    &config.site,
                    store.clone(),
                    events.clone(),
                    sites.edge_handle(),
                ),
            ));
        }
        Ok(None) => {}
        Err(why) => return Err(AppError::Site(why)),
    }
    supervisor.spawn(led(
        &lead,
        SourceListeners::new(ingress.clone(), supervisor.clone()),
    ));
    let notify = Notifier::new(
        store.clone(),
        clock.clone(),
        secrets,
        alerting.clone(),
        Senders::new(
            devices.clone(),
            programs.scripts.clone(),
            programs.ca_files.clone(),
            config.notify.push_services.clone(),
        )
        .map_err(|e| AppError::Internal(format!("the notification HTTP client: {e}")))?,
        config.base_url.clone(),
    );
    let escalator = Escalator(notify.clone());
    if let Some(wake) = escalator.waker() {
        store.watch_commits(Change::Escalations, wake);
    }
    supervisor.spawn(led(&lead, escalator));
    // Every process's courier sends, claiming what it takes (the leader's takes every kind).
    let courier = Courier {
        notifier: notify.clone(),
        lead: lead.clone(),
    };
    if let Some(wake) = courier.waker() {
        store.watch_commits(Change::Deliveries, wake);
    }
    supervisor.spawn(courier);
    supervisor.spawn(led(&lead, Handoffs::new(notify.clone())));
    supervisor.spawn(led(
        &lead,
        WebhookDispatcher::new(notify.clone(), events.clone()),
    ));
    let reports = Reports::new(ReportsParts {
        store: store.clone(),
        events: events.clone(),
        labels: object_labels,
        oncall: notify.clone(),
        clock: clock.clone(),
        base_url: config.base_url.clone(),
    });
    supervisor.spawn(led(&lead, ReportScheduler::new(reports.clone())));
    let backups = Arc::new(crate::store::backup::Backups {
        store: store.clone(),
        events: events.store().clone(),
        metrics: metric_store.clone(),
        master_key: config.master_key_file(),
    });
    let oidc = crate::auth::oidc::Oidc::new(&config.oidc, &config.base_url, clock.clone())
        .map_err(AppError::Internal)?
        .map(Arc::new);
    let directory =
        crate::auth::directory::Directory::new(&config.ldap).map_err(AppError::Internal)?;
    if let Some(directory) = &directory {
        supervisor.spawn(led(
            &lead,
            crate::auth::directory::DirectorySync {
                auth: auth.clone(),
                directory: directory.clone(),
            },
        ));
    }
    let backlog = pipeline.clone();
    let pressure: crate::ai::Pressure = Arc::new(move || {
        (backlog.depth() > crate::monitor::pipeline::CAPACITY / 2 || backlog.stalled())
            .then_some("the results pipeline is backed up")
    });
    let ai = crate::ai::Ai::new(
        store.clone(),
        clock.clone(),
        inventory.clone(),
        config.ai.clone(),
        pressure,
    )
    .map_err(|e| AppError::Internal(format!("the AI HTTP client: {e}")))?;
    let discovery = Discovery::new(clock.clone(), store.clone());
    supervisor.spawn(DiscoveryWorker::new(discovery.clone()));
    let activity = Arc::new(Activity::default());
    let release_after = config.memory.release_after.0;
    if !release_after.is_zero() {
        supervisor.spawn(MemoryRelease::new(
            activity.clone(),
            release_after,
            release_memory,
        ));
    }
    let ctx = Arc::new(AppContext {
        ai,
        oidc,
        directory,
        problem_base: config.problem_base(),
        config,
        store: store.clone(),
        auth,
        inventory,
        events: events.clone(),
        heartbeats,
        alerting,
        notify,
        devices,
        confinement,
        ingress,
        sites,
        business,
        results,
        pipeline: pipeline.clone(),
        scheduler,
        discovery,
        reports,
        metric_queries,
        backups,
        metrics,
        supervisor: supervisor.clone(),
        activity,
        lead: lead.clone(),
        started_at: clock.now(),
        clock,
        uptime,
    });
    let router = build_router(ctx);
    if !led_at_once {
        let (taken, scheduler) = (lead.clone(), scheduler_waker);
        tokio::spawn(async move {
            took_lead(&taken, leading.await);
            scheduler.notify_one();
        });
    }
    let stop_requested = stop_signal();
    // The one line scripts and tests read to find the bound address.
    println!("svc listening on {scheme}://{addr}");
    tracing::info!(%addr, scheme, version = crate::model::VERSION, "listening");
    systemd::notify(&format!("READY=1\nSTATUS=serving on {scheme}://{addr}"));
    if let Some(every) = systemd::watchdog_interval() {
        supervisor.spawn(Watchdog {
            store: store.clone(),
            pipeline: pipeline.clone(),
            events: events.clone(),
            every,
        });
    }

    let stop = Shutdown::new();
    let trigger = stop.clone();
    tokio::spawn(async move {
        stop_requested.await;
        crate::runtime::shutdown::exit_after(STOP_DEADLINE);
        tracing::info!("stop signal received; draining");
        systemd::notify("STOPPING=1");
        trigger.trigger();
    });
    server::run(listener, tls, router, stop, DRAIN_DEADLINE).await;
    supervisor.shutdown(WORKER_EXIT_DEADLINE).await;
    events.store().close();
    metric_store.close();
    store.close();
    tracing::info!("stopped");
    Ok(())
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
