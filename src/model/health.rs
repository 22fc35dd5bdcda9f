//! What the server says about itself (`/system/info`, `/system/health`, `/readyz`): the wire
//! types the server fills in and `svc doctor` reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{GoDuration, Timestamp};

/// `GET /api/v1/system/info`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SystemInfo {
    pub version: String,
    /// The reference's name for the toolchain version; the same as `rust_version`.
    pub go_version: String,
    pub rust_version: String,
    /// Live runtime tasks (the reference counts goroutines).
    pub goroutines: usize,
    #[serde(rename = "heapMB")]
    pub heap_mb: Option<f64>,
    pub started_at: Timestamp,
    pub uptime: GoDuration,
    /// Where the main database is: `redb` or `postgres` (`storage.backend`).
    pub storage: String,
    /// Whether this process leads: its consumers and sweeps run (the courier runs in every
    /// process). Several processes may serve one PostgreSQL database and one leads; on redb
    /// always true.
    #[serde(default)]
    pub leads: bool,
    /// Where several processes serve one PostgreSQL database: the partitions of the event
    /// stream (0 to 15, by tenant and object) whose alerts this process's engine decides,
    /// shared out evenly among the processes. Absent on redb, where one process decides all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_partitions: Option<Vec<u16>>,
    pub ai_enabled: bool,
    /// How plugins and scripts are confined (docs/security.md); absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs: Option<ProgramConfinement>,
}

/// Whether the programs API users name (plugins, scripts) run confined, and how.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ProgramConfinement {
    pub confined: bool,
    /// In a sentence: `confined by Landlock (ABI 7)`, `confined to user nobody...`,
    /// `unconfined: ...`.
    pub how: String,
}

/// One line of readiness: a part of the server and whether it can do its work now.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Subsystem {
    pub name: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
}

/// `GET /readyz`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Readiness {
    pub ready: bool,
    pub subsystems: Vec<Subsystem>,
}

/// Where a supervised worker is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WorkerStatus {
    Running,
    /// Between runs of a periodic worker, or waiting to be woken.
    Waiting,
    /// Panicked; restarts after its back-off.
    Restarting,
    Stopped,
    /// Finished and will not run again.
    Done,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkerState {
    pub name: String,
    pub state: WorkerStatus,
    pub restarts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_panic: Option<String>,
}

/// The results queue's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PipelineStats {
    pub queued: usize,
    pub capacity: usize,
    pub stalled: bool,
    pub applied: u64,
    pub batches: u64,
}

/// The metrics store's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricsStats {
    pub series: u64,
    pub max_series: u64,
    /// Samples refused because the series cap was reached.
    pub refused_samples: u64,
    /// Sample batches that failed to commit.
    pub failed_batches: u64,
}

/// Where a durable consumer stands: the last event it committed the work of, and the age of
/// the oldest committed event it has not done (0 when it has caught up).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConsumerLag {
    pub position: Uuid,
    pub lag_seconds: f64,
    /// How long its position has not moved while it had events to do (0 when caught up): a
    /// stuck consumer's grows, a slow one's falls back with each batch done.
    #[serde(default)]
    pub stalled_seconds: f64,
    /// Events retention removed before the consumer read them, since this process started.
    pub lost: u64,
    /// Its work waits on another instance by design (the federation uplink while its main is
    /// away): its lag and stall do not make this instance unready.
    #[serde(default)]
    pub waits_on_peer: bool,
}

/// `GET /api/v1/overview`: the wallboard's counters (the reference's `overview`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// Open and acknowledged alerts by severity.
    pub open_alerts: std::collections::BTreeMap<String, u64>,
    pub open_incidents: Vec<super::incident::Incident>,
    pub queues: QueueStats,
    pub summary: super::state::StateSummary,
}

/// The instance's queues as the reference's `Stats` names them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    /// Agent turns running now.
    pub ai_depth: u64,
    /// Agent turns refused since start because `ai.maxConcurrentTurns` ran (AI work gives
    /// way first).
    pub dropped_ai: u64,
    /// Events the bus dropped for subscribers that could not keep up, since start.
    pub dropped_subscriber_messages: u64,
    /// Events waiting in the bus's queues.
    pub events_depth: u64,
    /// Deliveries waiting in the outbox.
    pub notify_depth: u64,
    /// Results waiting to be applied.
    pub results_depth: u64,
    /// Live event stream (SSE) clients.
    pub subscribers: u64,
}

/// Notification's figures: armed escalation timers, the outbox, dead letters, and delivery
/// attempts since start by outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NotifyHealth {
    pub escalation_timers: u64,
    pub outbox: u64,
    pub dead_letters: u64,
    pub sent: u64,
    pub failed: u64,
    pub dead: u64,
}

/// What the GSM modem last said about itself.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModemStatus {
    pub device: String,
    pub profile: String,
    /// The port is open and the start-up sequence passed.
    pub connected: bool,
    /// `ready`, `pin required`, `puk required`, `absent` or `unknown`.
    pub sim: String,
    /// `home`, `roaming`, `searching`, `denied`, `not registered` or `unknown`.
    pub registration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_dbm: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sent_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub sms_sent: u64,
    pub sms_received: u64,
    pub calls: u64,
}

impl ModemStatus {
    /// Connected, SIM ready and registered: a message would go out now.
    pub fn ready(&self) -> bool {
        self.connected && self.sim == "ready" && self.registered()
    }

    pub fn registered(&self) -> bool {
        matches!(self.registration.as_str(), "home" | "roaming")
    }
}

/// What the ESPA 4.4.4 link last said about itself.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EspaStatus {
    pub device: String,
    pub connected: bool,
    pub pages_sent: u64,
    pub calls_received: u64,
    /// Blocks sent again after a NAK or silence.
    pub retransmissions: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_page_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The paging devices; `None` where one is not configured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Hardware {
    pub gsm: Option<ModemStatus>,
    pub espa: Option<EspaStatus>,
}

/// An event source's requests since start: accepted, refused (authentication, format,
/// mapping, community), over the rate limit.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SourceCounters {
    pub received: u64,
    pub refused: u64,
    pub rate_limited: u64,
}

/// The space of the file system holding the data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiskSpace {
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// `GET /api/v1/system/health`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    /// `ok`, or `degraded` while the store is offline.
    pub status: String,
    pub subsystems: Vec<Subsystem>,
    pub workers: Vec<WorkerState>,
    /// The bus main queue, the deepest buffer per subscriber kind, and `results`.
    pub queues: BTreeMap<String, usize>,
    pub pipeline: PipelineStats,
    pub tsdb: MetricsStats,
    pub sse_clients: usize,
    pub consumers: BTreeMap<String, ConsumerLag>,
    /// `None` when the store could not be read.
    pub notify: Option<NotifyHealth>,
    pub hardware: Hardware,
    /// By event source name; empty for callers who may not see the names.
    pub ingress: BTreeMap<String, SourceCounters>,
    pub tasks: usize,
    #[serde(rename = "residentMB")]
    pub resident_mb: Option<f64>,
    pub disk: Option<DiskSpace>,
    /// What this process wrote to storage and the card's projected life (`runtime::wear`);
    /// none where the kernel does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wear: Option<super::wear::WearReport>,
    pub time: Timestamp,
}
