//! The HTTP API (axum): the route table, the Problem type, extractors, pagination, ETags, the
//! OpenAPI document and thin handlers that call one domain function each.

pub mod access;
mod account;
mod ai;
mod alerts;
mod bundles;
mod business;
mod comments;
mod config;
mod discovery;
pub mod error;
pub mod etag;
mod events;
pub mod extract;
mod heartbeats;
mod identity;
mod incidents;
mod ingest;
mod mcp;
mod metrics;
pub mod middleware;
mod multipart;
mod notify;
mod objects;
pub mod openapi;
mod pages;
pub mod pagination;
mod problem_pages;
mod reports;
mod results;
pub mod router;
mod schemas;
mod secrets;
mod sites;
mod status;
mod suppressions;
mod system;
mod ui;
mod users;

use crate::alerting::Alerting;
use crate::auth::Auth;
use crate::config::Config;
use crate::events::Events;
use crate::inventory::Inventory;
use crate::model::Timestamp;
use crate::monitor::business::BusinessServices;
use crate::monitor::discovery::Discovery;
use crate::monitor::heartbeats::Heartbeats;
use crate::monitor::metrics::MetricQueries;
use crate::monitor::pipeline::Pipeline;
use crate::monitor::results::Results;
use crate::monitor::scheduler::Scheduler;
use crate::notify::Notifier;
use crate::runtime::clock::SharedClock;
use crate::runtime::{Metrics, Stopwatch, Supervisor};
use crate::store::Store;
use std::sync::Arc;

pub use error::Problem;
pub use router::build_router;

/// Everything a handler may reach, built once by `app`.
pub struct AppContext {
    pub config: Config,
    pub store: Arc<Store>,
    pub auth: Arc<Auth>,
    pub events: Arc<Events>,
    pub inventory: Arc<Inventory>,
    pub heartbeats: Arc<Heartbeats>,
    pub alerting: Arc<Alerting>,
    pub notify: Arc<Notifier>,
    /// The paging devices, for their health.
    pub devices: crate::hw::Devices,
    /// How plugins and scripts are confined, for `/system/info`.
    pub confinement: crate::runtime::sandbox::Confinement,
    pub ingress: Arc<crate::ingress::Ingress>,
    pub sites: Arc<crate::federation::Sites>,
    pub wear: Arc<crate::store::wear::Wear>,
    pub votes: Arc<crate::monitor::observers::Votes>,
    pub business: Arc<BusinessServices>,
    pub slos: Arc<crate::monitor::slo::Slos>,
    pub results: Arc<Results>,
    pub pipeline: Arc<Pipeline>,
    pub scheduler: Arc<Scheduler>,
    pub discovery: Arc<Discovery>,
    pub reports: Arc<crate::reports::Reports>,
    pub metric_queries: Arc<MetricQueries>,
    pub backups: Arc<crate::store::backup::Backups>,
    pub metrics: Arc<Metrics>,
    pub supervisor: Arc<Supervisor>,
    /// Requests end the quiet spell after which memory is given back.
    pub activity: Arc<crate::runtime::memory::Activity>,
    /// Whether this process leads (its consumers run).
    pub lead: Arc<crate::runtime::worker::Lead>,
    /// The partitions of the event stream whose alerts this process decides.
    pub engine_partitions: tokio::sync::watch::Receiver<Arc<crate::store::Holding>>,
    pub clock: SharedClock,
    pub started_at: Timestamp,
    pub uptime: Stopwatch,
    pub problem_base: String,
    /// OpenID Connect sign-in, when `oidc.issuer` is set.
    pub oidc: Option<Arc<crate::auth::oidc::Oidc>>,
    /// The LDAP directory, when `ldap.url` is set.
    pub directory: Option<Arc<crate::auth::directory::Directory>>,
    /// The AI agent and the tool catalog `/mcp` shares.
    pub ai: Arc<crate::ai::Ai>,
}

pub type AppState = Arc<AppContext>;
