//! `svc serve` in named steps: the store and the lead, the listener, the event path, identity,
//! then each domain with its workers, the API, and serving until a stop signal. The order is
//! the one the steps' comments give reasons for: events are filed before anything produces
//! one, the lead is asked for before the consumers start.

use super::{
    AppError, DRAIN_DEADLINE, LEAD_AT_ONCE, STOP_DEADLINE, WORKER_EXIT_DEADLINE,
    WORKER_RESTART_DELAY, Watchdog, backing, confinement, crypto_policy, hardware, master_key,
    open_events, open_store, server, stop_signal, tls, took_lead,
};
use crate::alerting::{AlertEngine, AlertTimers, Alerting, Calendars, Noise};
use crate::api::{AppContext, build_router};
use crate::auth::{Auth, LastUsedWorker, SessionPurgeWorker};
use crate::config::Config;
use crate::events::{EventFiler, Events, RetentionWorker};
use crate::federation::edge::UsageFile;
use crate::federation::edge::{EdgeSync, EdgeUplink, MainLink};
use crate::federation::{Sites, StaleSites};
use crate::ingress::Ingress;
use crate::ingress::listeners::SourceListeners;
use crate::inventory::Inventory;
use crate::inventory::secrets::MasterKey;
use crate::model::incident::Storm;
use crate::monitor::business::BusinessServices;
use crate::monitor::catalog::Catalog;
use crate::monitor::checks::Runners;
use crate::monitor::discovery::{Discovery, DiscoveryWorker};
use crate::monitor::heartbeats::{HeartbeatSweep, Heartbeats};
use crate::monitor::metrics::{MetricQueries, MetricsRetention};
use crate::monitor::observers::{VoteCounter, Votes};
use crate::monitor::pipeline::{Pipeline, PipelineWorker, StalenessSweep};
use crate::monitor::results::Results;
use crate::monitor::scheduler::{Scheduler, SchedulerWorker};
use crate::monitor::slo::{SloWatch, Slos};
use crate::notify::digests::Digests;
use crate::notify::notices::Notices;
use crate::notify::{Courier, Escalator, Handoffs, Notifier, Senders, WebhookDispatcher};
use crate::reports::{ReportScheduler, Reports, ReportsParts};
use crate::runtime::clock::SharedClock;
use crate::runtime::memory::{Activity, MemoryRelease, release_memory};
use crate::runtime::paths::{Allowed, AllowedDirs};
use crate::runtime::sandbox::Confinement;
use crate::runtime::worker::{Lead, Led, Wait, Worker};
use crate::runtime::{Intake, Metrics, Shutdown, Stopwatch, Supervisor, SystemClock, systemd};
use crate::store::Holding;
use crate::store::metrics::MetricsStore;
use crate::store::wear::{Wear, WearWatch};
use crate::store::{Backing, Change, Store, StoreError};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What every step starts things in: the store, the clock, the supervisor of the workers, and
/// the lead the led workers wait for.
struct Core {
    clock: SharedClock,
    uptime: Stopwatch,
    backing: Backing,
    store: Arc<Store>,
    supervisor: Arc<Supervisor>,
    lead: Arc<Lead>,
    /// The partitions of the event stream whose alerts this process decides.
    engine_partitions: watch::Receiver<Arc<Holding>>,
    /// Taking the lead, when it was not taken at once: another process holds it.
    leading: Option<JoinHandle<Result<(), StoreError>>>,
}

/// The listener, bound before the services start so a taken port fails the start early.
struct Bound {
    tls: Option<tokio_rustls::TlsAcceptor>,
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    scheme: &'static str,
}

/// The monitoring services the API and later steps use.
struct Monitoring {
    heartbeats: Arc<Heartbeats>,
    alerting: Arc<Alerting>,
    metric_store: Arc<MetricsStore>,
    catalog: Arc<Catalog>,
    results: Arc<Results>,
    pipeline: Arc<Pipeline>,
    programs: Allowed,
    confinement: Confinement,
    inventory: Arc<Inventory>,
    business: Arc<BusinessServices>,
    slos: Arc<Slos>,
    devices: crate::hw::Devices,
    scheduler: Arc<Scheduler>,
    metric_queries: Arc<MetricQueries>,
}

/// The event sources and the federation's services.
struct Federated {
    ingress: Arc<Ingress>,
    sites: Arc<Sites>,
    votes: Arc<Votes>,
}

/// Runs the service until a stop signal.
pub async fn serve(config: Config) -> Result<(), AppError> {
    // Outgoing TLS (notification channels) uses ring, like everything else here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut core = Core::open(&config).await?;
    let bound = bind(&config, &core.clock)?;
    let metrics = Arc::new(Metrics::new());
    let events = core.start_events(&config, &metrics).await?;
    let (auth, key) = core.start_auth(&config).await?;
    let (monitoring, hardware) = core
        .start_monitoring(&config, &events, &metrics, key)
        .await?;
    let Federated {
        ingress,
        sites,
        votes,
    } = core.start_ingress_and_sites(&config, &events, &monitoring, hardware)?;
    let notify = core.start_notify(&config, &events, &monitoring)?;
    let reports = Reports::new(ReportsParts {
        store: core.store.clone(),
        events: events.clone(),
        labels: monitoring.catalog.clone(),
        dependencies: monitoring.catalog.clone(),
        oncall: notify.clone(),
        outbox: notify.clone(),
        clock: core.clock.clone(),
        base_url: config.base_url.clone(),
    });
    core.supervisor
        .spawn(core.led(ReportScheduler::new(reports.clone())));
    let backups = Arc::new(crate::store::backup::Backups {
        store: core.store.clone(),
        events: events.store().clone(),
        metrics: monitoring.metric_store.clone(),
        master_key: config.master_key_file(),
    });
    let oidc = crate::auth::oidc::Oidc::new(&config.oidc, &config.base_url, core.clock.clone())
        .map_err(AppError::Internal)?
        .map(Arc::new);
    let directory =
        crate::auth::directory::Directory::new(&config.ldap).map_err(AppError::Internal)?;
    if let Some(directory) = &directory {
        core.supervisor
            .spawn(core.led(crate::auth::directory::DirectorySync {
                auth: auth.clone(),
                directory: directory.clone(),
            }));
    }
    let backlog = monitoring.pipeline.clone();
    let pressure: crate::ai::Pressure = Arc::new(move || {
        (backlog.depth() > crate::monitor::pipeline::CAPACITY / 2 || backlog.stalled())
            .then_some("the results pipeline is backed up")
    });
    let ai = crate::ai::Ai::new(
        core.store.clone(),
        core.clock.clone(),
        monitoring.inventory.clone(),
        config.ai.clone(),
        pressure,
    )
    .map_err(|e| AppError::Internal(format!("the AI HTTP client: {e}")))?;
    let discovery = Discovery::new(core.clock.clone(), core.store.clone());
    core.supervisor
        .spawn(DiscoveryWorker::new(discovery.clone()));
    let activity = Arc::new(Activity::default());
    let release_after = config.memory.release_after.0;
    if !release_after.is_zero() {
        core.supervisor.spawn(MemoryRelease::new(
            activity.clone(),
            release_after,
            release_memory,
        ));
    }
    let wear = Wear::open(
        &config.data_dir,
        core.clock.clone(),
        config.storage.wear.endurance.map(|e| e.0),
        config.storage.wear.alert_under_years,
        core.store.clone(),
        monitoring.alerting.clone(),
    );
    core.supervisor.spawn(WearWatch::new(wear.clone()));
    let scheduler_waker = monitoring.scheduler.waker();
    let (pipeline, metric_store) = (monitoring.pipeline.clone(), monitoring.metric_store.clone());
    let ctx = Arc::new(AppContext {
        ai,
        oidc,
        directory,
        problem_base: config.problem_base(),
        config,
        store: core.store.clone(),
        auth,
        inventory: monitoring.inventory,
        events: events.clone(),
        heartbeats: monitoring.heartbeats,
        alerting: monitoring.alerting,
        notify,
        devices: monitoring.devices,
        confinement: monitoring.confinement,
        ingress,
        sites,
        votes,
        business: monitoring.business,
        slos: monitoring.slos,
        results: monitoring.results,
        pipeline: pipeline.clone(),
        scheduler: monitoring.scheduler,
        discovery,
        reports,
        metric_queries: monitoring.metric_queries,
        backups,
        metrics,
        wear,
        supervisor: core.supervisor.clone(),
        activity,
        lead: core.lead.clone(),
        engine_partitions: core.engine_partitions.clone(),
        started_at: core.clock.now(),
        clock: core.clock.clone(),
        uptime: core.uptime,
    });
    let router = build_router(ctx);
    if let Some(leading) = core.leading.take() {
        let taken = core.lead.clone();
        tokio::spawn(async move {
            took_lead(&taken, leading.await);
            scheduler_waker.notify_one();
        });
    }
    serve_until_stopped(
        &core.store,
        &core.supervisor,
        bound,
        router,
        &pipeline,
        &events,
    )
    .await;
    events.store().close();
    metric_store.close();
    core.store.close();
    tracing::info!("stopped");
    Ok(())
}

/// The wall clock, or in a debug build started with `SVC_TEST_CLOCK`, the one the tests move.
fn server_clock() -> SharedClock {
    #[cfg(debug_assertions)]
    if let Some(shifted) = crate::runtime::clock::ShiftedClock::from_env() {
        tracing::warn!("SVC_TEST_CLOCK: the clock is the one the tests move");
        return shifted;
    }
    Arc::new(SystemClock)
}

impl Core {
    /// Opens the store, starts the supervisor, and asks for the lead: where no other process
    /// leads, this one leads before its consumers start and its listener binds, as on redb;
    /// else it serves beside the leader and leads when that ends.
    async fn open(config: &Config) -> Result<Core, AppError> {
        let clock = server_clock();
        let uptime = Stopwatch::start();
        let backing = backing(config);
        let store = open_store(&config.data_dir, clock.clone(), backing.clone()).await?;
        store.follow_others()?;
        let supervisor = Arc::new(Supervisor::new(Shutdown::new(), WORKER_RESTART_DELAY));
        supervisor.spawn(super::recovery::RecoveryWorker::new(store.clone()));
        // The consumers and sweeps run in the process that leads (on redb: this one).
        let lead = Arc::new(Lead::default());
        let mut leading = tokio::spawn({
            let store = store.clone();
            async move { store.lead().await }
        });
        let leading = match tokio::time::timeout(LEAD_AT_ONCE, &mut leading).await {
            Ok(taken) => {
                took_lead(&lead, taken);
                None
            }
            Err(_) => Some(leading),
        };
        // The consumers every process runs start where the journal stands now, before the
        // listener serves: one that first opens later (on PostgreSQL, once its process holds
        // partitions or leads) still decides the events of the requests served meanwhile. A
        // store offline at start takes no write either, and the process serves its 503s.
        let positions = async {
            for consumer in [
                crate::alerting::engine::CONSUMER,
                crate::notify::notices::CONSUMER,
                crate::notify::webhooks::CONSUMER,
            ] {
                store.consumer_position(consumer).await?;
            }
            Ok::<_, crate::store::StoreError>(())
        };
        match tokio::time::timeout(LEAD_AT_ONCE, positions).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the consumers' positions start once they open")
            }
            Err(_) => {
                tracing::warn!("the store was slow: the consumers' positions start once they open")
            }
        }
        let engine_partitions = store.hold_partitions(crate::alerting::engine::CONSUMER)?;
        Ok(Core {
            clock,
            uptime,
            backing,
            store,
            supervisor,
            lead,
            engine_partitions,
            leading,
        })
    }

    /// `worker`, run only while this process leads.
    fn led<W>(&self, worker: W) -> Led<W> {
        Led {
            worker,
            lead: self.lead.clone(),
        }
    }

    /// The event store and the bus; every durable write's events reach them from here on,
    /// and what a crash left in the journal is stored before anything new is produced.
    async fn start_events(
        &self,
        config: &Config,
        metrics: &Arc<Metrics>,
    ) -> Result<Arc<Events>, AppError> {
        let events = open_events(
            &config.data_dir,
            &self.backing,
            self.clock.clone(),
            metrics.clone(),
        )?;
        self.store
            .file_with(events.clone(), tokio::runtime::Handle::current());
        if let Some(dispatcher) = events.bus().dispatcher() {
            self.supervisor.spawn(dispatcher);
        }
        // Beside other processes, the bus gets every process's events from the journal.
        #[cfg(feature = "postgres")]
        if matches!(self.backing, Backing::Postgres(_)) {
            self.supervisor.spawn(crate::events::EventRelay::new(
                events.clone(),
                self.store.clone(),
            ));
        }
        let filer = EventFiler::new(events.clone(), self.store.clone());
        match filer.refile().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                events = n,
                "stored the events journaled before the last stop"
            ),
            Err(e) => {
                tracing::error!(error = %e, "journaled events not stored yet; the filer retries")
            }
        }
        self.supervisor.spawn(filer);
        self.supervisor.spawn(self.led(RetentionWorker::new(
            events.clone(),
            self.clock.clone(),
            config.storage.event_retention_months,
            jiff::tz::TimeZone::system(),
        )));
        Ok(events)
    }

    /// Identity and the master key: a key that is not the one the database's secrets are
    /// sealed with stops the start.
    async fn start_auth(
        &self,
        config: &Config,
    ) -> Result<(Arc<Auth>, Option<MasterKey>), AppError> {
        let auth = Auth::new(
            self.store.clone(),
            self.clock.clone(),
            crypto_policy(),
            config.auth.hash_slots(),
        );
        self.supervisor.spawn(LastUsedWorker::new(auth.clone()));
        self.supervisor
            .spawn(self.led(SessionPurgeWorker(auth.clone())));
        let seed = super::DefaultAdminSeed::from_env(auth.clone());
        if seed.attempt().await != Wait::Done {
            self.supervisor.spawn(seed);
        }
        let key = master_key(&config.master_key_file());
        // A store that cannot be read now (a full disk) is not a reason to stay down: the
        // check is made at the next start.
        let kept = match &key {
            Some(key) => self
                .store
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
        Ok((auth, key))
    }

    /// Heartbeats, the alert engine and its timers, the results pipeline, the inventory, the
    /// paging hardware and the check scheduler.
    async fn start_monitoring(
        &self,
        config: &Config,
        events: &Arc<Events>,
        metrics: &Arc<Metrics>,
        key: Option<MasterKey>,
    ) -> Result<(Monitoring, hardware::Hardware), AppError> {
        let (store, clock, supervisor) = (&self.store, &self.clock, &self.supervisor);
        let heartbeats = Heartbeats::new(store.clone(), clock.clone());
        let heartbeat_sweep = HeartbeatSweep(heartbeats.clone());
        if let Some(wake) = heartbeat_sweep.waker() {
            store.watch_commits(Change::Heartbeats, wake);
        }
        supervisor.spawn(self.led(heartbeat_sweep));
        let storm = Storm {
            threshold: config.alerting.storm_threshold,
            window: config.alerting.storm_window.0,
        };
        let catalog = Catalog::new(store.clone());
        let alerting = Alerting::new(
            store.clone(),
            clock.clone(),
            events.clone(),
            Noise {
                storm,
                instance: config.alerting.noise(),
            },
            catalog.clone(),
        );
        let alert_timers = AlertTimers(alerting.clone());
        if let Some(wake) = alert_timers.waker() {
            store.watch_commits(Change::AlertTimers, wake.clone());
            // A changed heartbeat rule may move its timer.
            store.watch_commits(Change::Catalog, wake);
        }
        supervisor.spawn(self.led(alert_timers));
        let calendars = Calendars::new(alerting.clone());
        if let Some(wake) = calendars.waker() {
            store.watch_commits(Change::AlertTimers, wake);
        }
        supervisor.spawn(self.led(calendars));
        // In every process: each decides the partitions of the stream it leads.
        let intake = Arc::new(Intake::default());
        supervisor.spawn(AlertEngine::new(
            alerting.clone(),
            store.clone(),
            events.clone(),
            clock.clone(),
            metrics.clone(),
            self.engine_partitions.clone(),
            intake.clone(),
        ));
        let metric_store = MetricsStore::open_on(&config.data_dir, &self.backing)?;
        supervisor.spawn(self.led(MetricsRetention {
            metrics: metric_store.clone(),
            catalog: catalog.clone(),
            clock: clock.clone(),
        }));
        let results = Results::new(
            store.clone(),
            catalog.clone(),
            metric_store.clone(),
            clock.clone(),
        );
        let pipeline = Pipeline::new(results.clone(), intake);
        supervisor.spawn(PipelineWorker(pipeline.clone()));
        let staleness = StalenessSweep::new(pipeline.clone());
        if let Some(wake) = staleness.waker() {
            store.watch_commits(Change::Catalog, wake);
        }
        supervisor.spawn(self.led(staleness));
        let confinement = confinement(config)?;
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
        let slos = Slos::new(
            store.clone(),
            business.clone(),
            metric_store.clone(),
            clock.clone(),
        );
        supervisor.spawn(self.led(SloWatch::new(slos.clone(), alerting.clone(), events)));
        let secrets: Arc<dyn crate::runtime::SecretSource> = inventory.clone();
        let hardware = hardware::start(config, store, &secrets, clock, supervisor).await;
        let scheduler = Scheduler::new(
            store.clone(),
            catalog.clone(),
            clock.clone(),
            pipeline.clone(),
            Runners {
                secrets: inventory.clone(),
                devices: hardware.devices.clone(),
                plugins: programs.plugins.clone(),
                counters: Default::default(),
            },
            config.checks.max_concurrent,
        );
        store.watch_commits(Change::Catalog, scheduler.waker());
        scheduler.run_while_leading(self.lead.clone());
        supervisor.spawn(SchedulerWorker(scheduler.clone()));
        let metric_queries = MetricQueries::new(store.clone(), metric_store.clone(), clock.clone());
        let devices = hardware.devices.clone();
        let monitoring = Monitoring {
            heartbeats,
            alerting,
            metric_store,
            catalog,
            results,
            pipeline,
            programs,
            confinement,
            inventory,
            business,
            slos,
            devices,
            scheduler,
            metric_queries,
        };
        Ok((monitoring, hardware))
    }

    /// Event sources (and the hardware's calls in), the federation sites seen from a main,
    /// and an edge's sync and uplink when the configuration names a main.
    fn start_ingress_and_sites(
        &self,
        config: &Config,
        events: &Arc<Events>,
        m: &Monitoring,
        hardware: hardware::Hardware,
    ) -> Result<Federated, AppError> {
        let (store, clock, supervisor) = (&self.store, &self.clock, &self.supervisor);
        let ingress = Ingress::new(
            store.clone(),
            clock.clone(),
            m.alerting.clone(),
            m.inventory.clone(),
            m.programs.ca_files.clone(),
        );
        hardware.listen(supervisor, &ingress);
        let votes = Votes::new(store.clone(), m.catalog.clone(), clock.clone());
        supervisor.spawn(self.led(VoteCounter::new(votes.clone(), m.pipeline.clone(), events)));
        let sites = Sites::new(
            store.clone(),
            clock.clone(),
            events.clone(),
            m.alerting.clone(),
            votes.recount(),
        );
        store.watch_commits(Change::Catalog, sites.sweep_waker());
        store.watch_commits(Change::Sites, sites.sweep_waker());
        supervisor.spawn(self.led(StaleSites::new(sites.clone())));
        match MainLink::from_config(
            &config.site,
            sites.edge_handle(),
            clock.clone(),
            Some(UsageFile::new(&config.data_dir)),
        ) {
            Ok(Some(link)) => {
                supervisor.spawn(self.led(EdgeSync::new(
                    link.clone(),
                    &config.site,
                    store.clone(),
                    events.clone(),
                    clock.clone(),
                    m.inventory.clone(),
                    sites.edge_handle(),
                    m.alerting.clone(),
                )));
                supervisor.spawn(self.led(EdgeUplink::new(
                    link,
                    &config.site,
                    store.clone(),
                    events.clone(),
                    sites.edge_handle(),
                )));
            }
            Ok(None) => {}
            Err(why) => return Err(AppError::Site(why)),
        }
        supervisor.spawn(self.led(SourceListeners::new(ingress.clone(), supervisor.clone())));
        Ok(Federated {
            ingress,
            sites,
            votes,
        })
    }

    /// Escalations (in every process, for its partitions), the outbox courier (in every
    /// process, claiming what it takes), shift handoffs and webhook subscriptions.
    fn start_notify(
        &self,
        config: &Config,
        events: &Arc<Events>,
        m: &Monitoring,
    ) -> Result<Arc<Notifier>, AppError> {
        let (store, supervisor) = (&self.store, &self.supervisor);
        let notify = Notifier::new(
            store.clone(),
            self.clock.clone(),
            m.inventory.clone(),
            m.alerting.clone(),
            Senders::new(
                m.devices.clone(),
                m.programs.scripts.clone(),
                m.programs.ca_files.clone(),
                config.notify.push_services.clone(),
            )
            .map_err(|e| AppError::Internal(format!("the notification HTTP client: {e}")))?,
            config.base_url.clone(),
            Arc::new(config.alerting.noise()),
        );
        // In every process, for the partitions its alert engine leads.
        let escalator = Escalator {
            notifier: notify.clone(),
            held: self.engine_partitions.clone(),
        };
        if let Some(wake) = escalator.waker() {
            store.watch_commits(Change::Escalations, wake.clone());
            let mut held = self.engine_partitions.clone();
            tokio::spawn(async move {
                while held.changed().await.is_ok() {
                    wake.notify_one();
                }
            });
        }
        supervisor.spawn(escalator);
        let courier = Courier {
            notifier: notify.clone(),
            lead: self.lead.clone(),
        };
        if let Some(wake) = courier.waker() {
            store.watch_commits(Change::Deliveries, wake);
        }
        supervisor.spawn(courier);
        supervisor.spawn(self.led(Handoffs::new(notify.clone())));
        supervisor.spawn(self.led(WebhookDispatcher::new(notify.clone(), events.clone())));
        supervisor.spawn(self.led(Notices::new(notify.clone(), events.clone())));
        supervisor.spawn(self.led(Digests::new(notify.clone())));
        Ok(notify)
    }
}

/// Binds the listener, with TLS unless `tls.mode` is `off`.
fn bind(config: &Config, clock: &SharedClock) -> Result<Bound, AppError> {
    let tls = match config.tls.mode.as_str() {
        "off" => None,
        _ => {
            let (acceptor, fingerprint) = tls::acceptor(config, clock.now())?;
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
    Ok(Bound {
        tls,
        listener,
        addr,
        scheme,
    })
}

/// Says it is ready, serves until a stop signal, drains the requests and stops the workers.
async fn serve_until_stopped(
    store: &Arc<Store>,
    supervisor: &Arc<Supervisor>,
    bound: Bound,
    router: axum::Router,
    pipeline: &Arc<Pipeline>,
    events: &Arc<Events>,
) {
    let stop_requested = stop_signal();
    let Bound {
        tls,
        listener,
        addr,
        scheme,
    } = bound;
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
}
