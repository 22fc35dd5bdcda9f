//! Operations endpoints: liveness, readiness, runtime info and health, metrics, the OpenAPI document.

use super::access::Caller;
use super::error::{Code, Problem};
use super::extract::ApiQuery;
use super::router::{JSON, Route};
use super::schemas;
use super::{AppState, openapi};
use crate::auth::Principal;
use crate::model::health::{
    Hardware, HealthReport, Overview, ProgramConfinement, QueueStats, Readiness, SourceCounters,
    Subsystem, SystemInfo,
};
use crate::model::{GoDuration, RUST_VERSION, VERSION};
use crate::monitor::pipeline::READY_LIMIT;
use crate::runtime::metrics::CONTENT_TYPE as OPENMETRICS;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use std::collections::BTreeMap;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/healthz", healthz).doc("system", "Liveness", "Body `ok` as soon as the listener is up.")
            .answers_text(200, "text/plain"),
        Route::get("/readyz", readyz).doc(
            "system",
            "Readiness",
            "`{ready, subsystems:[{name, ok, info?}]}`: `store`, `event-journal`, `event-bus`, `event-consumers` (not ok while the alert engine or the webhook dispatcher is more than 60 s behind: stuck, or not keeping up; `info` names the furthest behind; the federation uplink, which waits for the main instance when the network is down, does not count), `results-pipeline`, `workers` (not ok while a background worker waits to be restarted after a panic, with a delay that doubles from 5 s to at most 60 s while it keeps panicking; `info` names their kinds, such as `event-source`, never a tenant's source), and the configured paging devices `gsm` (SIM ready and registered) and `espa` (line open); 503 while any subsystem is not ok (the store after an I/O error until it has been reopened, a modem that is unplugged or not registered).",
        )
            .answers::<Readiness>(200).answers::<Readiness>(503),
        Route::get("/metrics", metrics).doc("system", "Metrics", "OpenMetrics text exposition. Without `metricsToken` in the configuration it answers anyone and sums the event sources' counters (`source=\"all\"`); with it, it needs `Authorization: Bearer <metricsToken>` (401 `svc:auth/required` otherwise) and names each source.")
            .answers_text(200, OPENMETRICS).fails(401, "The scrape token is configured and missing or wrong"),
        Route::get("/api/openapi.json", openapi_json).doc("system", "This document", "")
            .answers_as(200, JSON, schemas::literal(schemas::open_object)),
        Route::get("/api/v1/system/info", info).doc(
            "system",
            "Version and runtime info",
            "`goVersion` carries the Rust compiler version (also as `rustVersion`), `goroutines` the number of live async tasks, `heapMB` the resident set size, `storage` the backend, `leads` whether this process leads (its consumers and sweeps run: with several processes on one PostgreSQL database, one of them; on redb always; the courier sends in every process).",
        )
            .ok::<SystemInfo>(),
        Route::get("/api/v1/overview", overview).permission("objects:read").doc("overview", "Wallboard counters", "The acting tenant's objects by state (`summary`: hosts up, down, unreachable; services OK, warning, critical, unknown; problems acknowledged, flapping, in downtime), its open and acknowledged alerts by severity (`openAlerts`, with `alerts:read`, else empty), its open incidents (`openIncidents`, with `incidents:read`, else empty), and the instance's queues (`queues`: bus, outbox and results depths, SSE clients, dropped bus frames, agent turns running (`aiDepth`) and refused under load (`droppedAi`)).")
            .ok::<Overview>(),
        Route::get("/api/v1/system/health", health).doc("system", "Subsystem health", "Worker states, storage state, queue depths (`queues`: the bus main queue, the deepest buffer per subscriber kind, `results`), the results pipeline (`pipeline`: queued, capacity, stalled, applied, batches), the metrics store (`tsdb`: series, maxSeries, refusedSamples, failedBatches), connected SSE clients, durable event consumers (`consumers`: by name, `position` the last event whose work is committed, `lagSeconds` the age of the oldest event not done yet, `stalledSeconds` how long the position has not moved with events waiting (a stuck consumer's grows; at 120 s the process stops feeding systemd's watchdog), `waitsOnPeer` for the federation uplink, whose wait for its main is by design), notification (`notify`: `escalationTimers` armed, `outbox` deliveries waiting, `deadLetters`, and delivery attempts since start: `sent`, `failed`, `dead`), paging devices (`hardware`: `gsm` with `connected`, `sim`, `registration`, `signalDbm`, `lastSentAt`, `lastError`, `smsSent`, `smsReceived`, `calls`; `espa` with `connected`, `pagesSent`, `callsReceived`, `retransmissions`, `lastPageAt`, `lastError`; null when not configured), event sources since start (`ingress`: by source name `received`, `refused`, `rateLimited`), what this process wrote to storage as the kernel counts it (`wear`: `writtenTotal` since the data directory's first start, `writtenToday` (UTC), the last 7 `days`, `perDay` once an hour is counted, and with `storage.wear.endurance` the card's `endurance` and `projectedYears`; absent where `/proc/self/io` is not). No credential is needed; the names a tenant gave its things (event sources in `ingress`, and the workers named after them, `event-source/<name>`) are shown only to the instance's administrators (`admin:tenants` in the default tenant): anyone else gets `ingress` empty and such workers by kind (`event-source`).")
            .ok::<HealthReport>(),
        Route::get("/api/v1/system/backup", backup)
            .permission("admin:backup")
            .no_deadline()
            .doc(
                "system",
                "Back up the instance",
                "A consistent copy taken while the server runs: a tar archive (`application/x-tar`) of `manifest.json` (`{format, version, schemaVersion, createdAt, events, files}`), a snapshot of every database (each copied from one read transaction; writers carry on), the audit checkpoint of that snapshot and the secrets master key. `events=false` leaves the event month files out. Every tenant is included, so `admin:backup` is instance-wide: only principals of the default tenant hold it (others get 403). Each download is audited (`system.backup`) before it starts. Restore with `svc restore --from FILE --data-dir DIR` while no server runs on DIR.",
            )
            .query::<BackupQuery>()
            .answers_as(200, "application/x-tar", schemas::literal(schemas::binary)),
    ]
    .into_iter()
    .chain(test_clock_route())
    .collect()
}

/// `POST /api/v1/system/clock:advance {by}`: moves the test clock on (debug builds started
/// with `SVC_TEST_CLOCK` only; docs/development.md), for the instance's administrators.
fn test_clock_route() -> Option<Route> {
    #[cfg(debug_assertions)]
    if crate::runtime::clock::ShiftedClock::from_env().is_some() {
        return Some(
            Route::post("/api/v1/system/clock:advance", advance_clock)
                .permission("admin:tenants")
                .doc(
                    "system",
                    "Move the test clock on",
                    "Debug builds with `SVC_TEST_CLOCK` only.",
                )
                .body::<ClockAdvance>()
                .ok::<ClockAdvance>(),
        );
    }
    None
}

/// The test clock's move (`by`) and, answered, its time after it (`now`).
#[cfg(debug_assertions)]
#[derive(serde::Deserialize, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ClockAdvance {
    #[serde(default)]
    by: Option<GoDuration>,
    #[serde(default)]
    now: Option<crate::model::Timestamp>,
}

#[cfg(debug_assertions)]
async fn advance_clock(
    super::extract::ApiJson(body): super::extract::ApiJson<ClockAdvance>,
) -> Result<impl IntoResponse, Problem> {
    let clock = crate::runtime::clock::ShiftedClock::from_env()
        .ok_or_else(|| Problem::new(Code::NotFound, "no test clock"))?;
    let by = body.by.map_or(std::time::Duration::ZERO, |d| d.0);
    let now = clock
        .advance(by)
        .map_err(|e| Problem::new(Code::Internal, format!("the test clock's file: {e}")))?;
    Ok(Json(ClockAdvance {
        by: Some(GoDuration(by)),
        now: Some(now),
    }))
}

#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct BackupQuery {
    /// `false` leaves the event history out (default `true`).
    events: Option<bool>,
}

/// Streams the archive: the snapshots are taken first (a failure is a problem document), then
/// written to the response from a blocking thread in 64 KiB chunks.
async fn backup(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<BackupQuery>,
) -> Result<Response, Problem> {
    let with_events = q.events.unwrap_or(true);
    st.auth
        .audit_instance_read(
            &c.principal,
            &c.actor,
            "system.backup",
            format!("system/backup?events={with_events}"),
        )
        .await?;
    let backups = st.backups.clone();
    let prepared = tokio::task::spawn_blocking(move || backups.prepare(with_events))
        .await
        .map_err(|e| Problem::internal(e.to_string()))??;
    tracing::info!(actor = %c.actor.actor_id, files = ?prepared.manifest.files, "backup taken");
    let file_name = format!(
        "svc-backup-{}.tar",
        prepared.manifest.created_at.0.strftime("%Y%m%dT%H%M%SZ")
    );
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let mut body = ChunkWriter {
            tx: tx.clone(),
            chunk: Vec::with_capacity(CHUNK),
        };
        if let Err(e) = prepared.write(&mut body) {
            tracing::warn!(error = %e, "backup not sent whole");
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-tar".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file_name}\""),
            ),
        ],
        axum::body::Body::from_stream(chunks),
    )
        .into_response())
}

const CHUNK: usize = 64 * 1024;

/// A blocking writer whose bytes become response body chunks.
struct ChunkWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>,
    chunk: Vec<u8>,
}

impl std::io::Write for ChunkWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.chunk.extend_from_slice(bytes);
        if self.chunk.len() >= CHUNK {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(
            &mut self.chunk,
            Vec::with_capacity(CHUNK),
        ));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client left"))
    }
}

async fn healthz() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok")
}

/// A durable consumer further behind than this is not ready: it is stuck, or cannot keep up.
const CONSUMER_READY_LAG: f64 = 60.0;

/// The durable event consumers: not ok while one is further behind than `CONSUMER_READY_LAG`.
/// The federation uplink is left out: it waits for the main instance by design when the
/// network is down, and the site works on regardless.
fn consumers(st: &AppState) -> Subsystem {
    let lags = st.events.consumer_lags();
    let worst = lags
        .iter()
        .filter(|(_, lag)| !lag.waits_on_peer)
        .max_by(|a, b| a.1.lag_seconds.total_cmp(&b.1.lag_seconds));
    Subsystem {
        name: "event-consumers".into(),
        ok: worst.is_none_or(|(_, l)| l.lag_seconds < CONSUMER_READY_LAG),
        info: worst.map(|(name, l)| format!("{name} {:.0}s behind", l.lag_seconds)),
    }
}

fn subsystems(st: &AppState) -> Vec<Subsystem> {
    let reason = st.store.offline_reason();
    let journal = st.events.unfiled_reason();
    let bus_depth = st.events.queue_depths().first().map_or(0, |(_, d)| *d);
    let pipeline = st.pipeline.stats();
    // `/readyz` answers anyone: the kinds of worker only, never a tenant's source name.
    let mut restarting: Vec<String> = st
        .supervisor
        .restarting()
        .into_iter()
        .map(|name| name.split('/').next().unwrap_or_default().to_string())
        .collect();
    restarting.dedup();
    let mut hardware = Vec::new();
    if let Some(m) = &st.devices.modem {
        let s = m.status();
        hardware.push(Subsystem {
            name: "gsm".into(),
            ok: s.ready(),
            info: Some(match (&s.last_error, s.connected) {
                (Some(e), false) => e.clone(),
                _ => format!(
                    "SIM {}, registration {}{}",
                    s.sim,
                    s.registration,
                    s.signal_dbm
                        .map(|d| format!(", {d} dBm"))
                        .unwrap_or_default()
                ),
            }),
        });
    }
    if let Some(p) = &st.devices.pager {
        let s = p.status();
        hardware.push(Subsystem {
            name: "espa".into(),
            ok: s.connected,
            info: Some(
                s.last_error
                    .unwrap_or_else(|| format!("{} pages sent", s.pages_sent)),
            ),
        });
    }
    let mut list = vec![
        Subsystem {
            name: "store".into(),
            ok: reason.is_none(),
            info: reason,
        },
        Subsystem {
            name: "event-journal".into(),
            ok: journal.is_none(),
            info: journal,
        },
        Subsystem {
            name: "event-bus".into(),
            ok: bus_depth < crate::events::bus::MAIN_QUEUE,
            info: Some(format!("{bus_depth} queued")),
        },
        consumers(st),
        Subsystem {
            name: "results-pipeline".into(),
            ok: pipeline.queued < READY_LIMIT && !pipeline.stalled,
            info: Some(if pipeline.stalled {
                format!("stalled, {} queued", pipeline.queued)
            } else {
                format!("{} queued", pipeline.queued)
            }),
        },
        Subsystem {
            name: "workers".into(),
            ok: restarting.is_empty(),
            info: (!restarting.is_empty())
                .then(|| format!("restarting after a panic: {}", restarting.join(", "))),
        },
    ];
    list.extend(hardware);
    list
}

/// The paging devices' own reports.
fn hardware(st: &AppState) -> Hardware {
    Hardware {
        gsm: st.devices.modem.as_ref().map(|m| m.status()),
        espa: st.devices.pager.as_ref().map(|p| p.status()),
    }
}

async fn readyz(State(st): State<AppState>) -> impl IntoResponse {
    let subsystems = subsystems(&st);
    let ready = subsystems.iter().all(|s| s.ok);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(Readiness { ready, subsystems }))
}

async fn overview(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    let p = &c.principal;
    let open_alerts = if p.allows("alerts:read") {
        st.alerting.active_counts(p).await?
    } else {
        Default::default()
    };
    let open_incidents = if p.allows("incidents:read") {
        st.alerting.incidents(p, true, None, 500).await?
    } else {
        Vec::new()
    };
    let as_count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let queues = QueueStats {
        dropped_subscriber_messages: st.events.dropped(),
        events_depth: st
            .events
            .queue_depths()
            .iter()
            .map(|(_, d)| as_count(*d))
            .sum(),
        notify_depth: st.notify.health().await?.outbox,
        results_depth: as_count(st.pipeline.depth()),
        subscribers: as_count(st.events.sse_client_count()),
        ai_depth: st.ai.running(),
        dropped_ai: st.ai.shed_count(),
    };
    Ok(Json(Overview {
        open_alerts,
        open_incidents,
        queues,
        summary: st.results.summary(p).await?,
    }))
}

/// The bus queues and the results queue by name.
fn queues(st: &AppState) -> std::collections::BTreeMap<String, usize> {
    let mut queues: std::collections::BTreeMap<String, usize> =
        st.events.queue_depths().into_iter().collect();
    queues.insert("results".into(), st.pipeline.depth());
    queues
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    let token = &st.config.metrics_token.0;
    let named = !token.is_empty();
    if named {
        let given = crate::api::access::bearer_value(&headers).unwrap_or_default();
        if !crate::auth::crypto::constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return Problem::new(
                Code::AuthRequired,
                "/metrics needs the scrape token (metricsToken) as a bearer token",
            )
            .into_response();
        }
    }
    // Queue depth and consumer lag gauges are refreshed at scrape time.
    st.events.queue_depths();
    st.events.consumer_lags();
    st.metrics
        .queue_depth
        .get_or_create(&crate::runtime::metrics::QueueLabels {
            queue: "results".into(),
        })
        .set(i64::try_from(st.pipeline.depth()).unwrap_or(i64::MAX));
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    for (kind, n) in crate::model::fault::counts() {
        st.metrics
            .faults
            .get_or_create(&crate::runtime::metrics::FaultLabels { kind: kind.into() })
            .set(count(n));
    }
    let device = |name: &str| crate::runtime::metrics::DeviceLabels {
        device: name.into(),
    };
    if let Some(m) = &st.devices.modem {
        let s = m.status();
        let m = &st.metrics;
        m.device_up
            .get_or_create(&device("gsm"))
            .set(i64::from(s.ready()));
        m.device_sent
            .get_or_create(&device("gsm"))
            .set(count(s.sms_sent + s.calls));
        m.device_received
            .get_or_create(&device("gsm"))
            .set(count(s.sms_received));
        m.gsm_signal_dbm.set(i64::from(s.signal_dbm.unwrap_or(0)));
    }
    // A source's name is all a sender of events needs: only a scraper holding the token sees
    // the names; anyone else gets the sum of every source (`source="all"`).
    let mut by_source: BTreeMap<String, SourceCounters> = BTreeMap::new();
    for (name, c) in st.ingress.counters() {
        let sum = by_source
            .entry(if named { name } else { "all".into() })
            .or_default();
        sum.received += c.received;
        sum.refused += c.refused;
        sum.rate_limited += c.rate_limited;
    }
    for (name, c) in by_source {
        let source = crate::runtime::metrics::SourceLabels { source: name };
        let m = &st.metrics;
        m.ingress_received
            .get_or_create(&source)
            .set(count(c.received));
        m.ingress_refused
            .get_or_create(&source)
            .set(count(c.refused));
        m.ingress_rate_limited
            .get_or_create(&source)
            .set(count(c.rate_limited));
    }
    if let Some(p) = &st.devices.pager {
        let s = p.status();
        let m = &st.metrics;
        m.device_up
            .get_or_create(&device("espa"))
            .set(i64::from(s.connected));
        m.device_sent
            .get_or_create(&device("espa"))
            .set(count(s.pages_sent));
        m.device_received
            .get_or_create(&device("espa"))
            .set(count(s.calls_received));
    }
    ([(header::CONTENT_TYPE, OPENMETRICS)], st.metrics.encode()).into_response()
}

async fn openapi_json(headers: HeaderMap) -> Response {
    openapi::response(&headers)
}

/// Resident set size in MiB, from the kernel's own accounting.
fn resident_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

fn live_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

async fn info(State(st): State<AppState>) -> Json<SystemInfo> {
    Json(SystemInfo {
        version: VERSION.into(),
        go_version: RUST_VERSION.into(),
        rust_version: RUST_VERSION.into(),
        goroutines: live_tasks(),
        heap_mb: resident_mb(),
        started_at: st.started_at,
        uptime: GoDuration(std::time::Duration::from_secs(
            st.uptime.elapsed().as_secs(),
        )),
        storage: st.config.storage.backend.clone(),
        leads: st.lead.is_taken(),
        engine_partitions: {
            let holding = st.engine_partitions.borrow();
            (holding.count() > 1).then(|| holding.partitions().collect())
        },
        ai_enabled: st.ai.enabled(),
        programs: Some(ProgramConfinement {
            confined: st.confinement.confined(),
            how: st.confinement.describe(),
        }),
    })
}

/// Who may read the names a tenant gave its things (event sources, and the workers named after
/// them) in the health report, which answers anyone (SPEC 4.1): the instance's administrators.
/// Everyone else sees worker kinds and no per-source counters.
fn sees_names(caller: Option<&Principal>) -> bool {
    caller.is_some_and(|p| p.allows("admin:tenants"))
}

async fn health(
    State(st): State<AppState>,
    caller: Option<Extension<Principal>>,
) -> Json<HealthReport> {
    let named = sees_names(caller.as_ref().map(|c| &c.0));
    let mut workers = st.supervisor.states();
    if !named {
        for w in &mut workers {
            if let Some((kind, _)) = w.name.split_once('/') {
                w.name = kind.to_string();
            }
        }
    }
    Json(HealthReport {
        status: if st.store.offline_reason().is_none() {
            "ok"
        } else {
            "degraded"
        }
        .into(),
        subsystems: subsystems(&st),
        workers,
        queues: queues(&st),
        pipeline: st.pipeline.stats(),
        tsdb: st.metric_queries.stats(),
        sse_clients: st.events.sse_client_count(),
        consumers: st
            .events
            .consumer_lags()
            .into_iter()
            .map(|(name, lag)| (name.to_string(), lag))
            .collect(),
        notify: st.notify.health().await.ok(),
        hardware: hardware(&st),
        ingress: if named {
            st.ingress.counters()
        } else {
            Default::default()
        },
        tasks: live_tasks(),
        resident_mb: resident_mb(),
        disk: st.store.disk_space(),
        wear: st.wear.report(),
        time: st.clock.now(),
    })
}
