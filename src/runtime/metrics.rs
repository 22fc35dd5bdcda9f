//! The metric registry and the names of every series, served at `/metrics` as OpenMetrics text.
//! Series keep the `np_` names of the published interface so existing dashboards work.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: String,
    /// The route template (`/api/v1/objects/{id}`), never the raw path, to bound cardinality.
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConsumerLabels {
    pub consumer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeviceLabels {
    /// `gsm` or `espa`.
    pub device: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// The event source's name.
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    /// `decode` (a stored value that does not decode) or `encode`.
    pub kind: String,
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_duration: Family<RouteLabels, Histogram>,
    /// Events the store failed to persist (they were still published on the bus).
    pub events_dropped: Counter,
    /// Frames the bus dropped for subscribers that could not keep up.
    pub bus_dropped: Family<QueueLabels, Counter>,
    /// Depth of the bus's main queue and of every subscriber's buffer, set at scrape time.
    pub queue_depth: Family<QueueLabels, Gauge>,
    pub sse_clients: Gauge,
    /// How far each durable event consumer is behind the newest committed event.
    pub consumer_lag: Family<ConsumerLabels, Gauge<f64, AtomicU64>>,
    /// Paging devices, set at scrape time: 1 while the device works (a modem also registered).
    pub device_up: Family<DeviceLabels, Gauge>,
    /// Messages (SMS, pages) sent and received since start, by device.
    pub device_sent: Family<DeviceLabels, Gauge>,
    pub device_received: Family<DeviceLabels, Gauge>,
    pub gsm_signal_dbm: Gauge,
    /// Event sources since start, set at scrape time: events stored, inputs refused, requests
    /// over the rate limit.
    pub ingress_received: Family<SourceLabels, Gauge>,
    pub ingress_refused: Family<SourceLabels, Gauge>,
    pub ingress_rate_limited: Family<SourceLabels, Gauge>,
    /// Alert rule evaluations stopped for running past their budget.
    pub rule_overruns: Counter,
    /// Faults since start (`model::fault`), set at scrape time.
    pub faults: Family<FaultLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "np_http_requests",
            "HTTP requests by method, route template and status",
            http_requests.clone(),
        );
        let http_duration = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "np_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            http_duration.clone(),
        );
        let events_dropped = Counter::default();
        registry.register(
            "np_events_dropped",
            "Events the event store failed to persist",
            events_dropped.clone(),
        );
        let bus_dropped = Family::<QueueLabels, Counter>::default();
        registry.register(
            "np_bus_frames_dropped",
            "Bus frames dropped for a slow subscriber",
            bus_dropped.clone(),
        );
        let queue_depth = Family::<QueueLabels, Gauge>::default();
        registry.register("np_queue_depth", "Queue depths", queue_depth.clone());
        let sse_clients = Gauge::default();
        registry.register(
            "np_sse_clients",
            "Connected SSE clients",
            sse_clients.clone(),
        );
        let consumer_lag = Family::<ConsumerLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "np_event_consumer_lag_seconds",
            "Time between a durable consumer's position and the newest committed event",
            consumer_lag.clone(),
        );
        let device_up = Family::<DeviceLabels, Gauge>::default();
        registry.register(
            "np_hardware_up",
            "Whether a paging device works (a GSM modem: SIM ready and registered)",
            device_up.clone(),
        );
        let device_sent = Family::<DeviceLabels, Gauge>::default();
        registry.register(
            "np_hardware_sent",
            "Messages a paging device sent since start",
            device_sent.clone(),
        );
        let device_received = Family::<DeviceLabels, Gauge>::default();
        registry.register(
            "np_hardware_received",
            "Messages and calls a paging device received since start",
            device_received.clone(),
        );
        let gsm_signal_dbm = Gauge::default();
        registry.register(
            "np_gsm_signal_dbm",
            "GSM modem signal strength (0 when unknown)",
            gsm_signal_dbm.clone(),
        );
        let ingress_received = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "np_ingress_received",
            "Ingress events an event source stored since start",
            ingress_received.clone(),
        );
        let ingress_refused = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "np_ingress_refused",
            "Inputs an event source refused since start (authentication, format, mapping, community)",
            ingress_refused.clone(),
        );
        let ingress_rate_limited = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "np_ingress_rate_limited",
            "Requests over an event source's rate limit since start",
            ingress_rate_limited.clone(),
        );
        let rule_overruns = Counter::default();
        registry.register(
            "np_alert_rule_overruns",
            "Alert rule evaluations that ran past their budget (the rule is skipped for a while)",
            rule_overruns.clone(),
        );
        let faults = Family::<FaultLabels, Gauge>::default();
        registry.register(
            "np_faults",
            "Values since start that did not decode (stored, corrupt) or encode; each is logged at ERROR",
            faults.clone(),
        );
        Self {
            registry,
            rule_overruns,
            faults,
            ingress_received,
            ingress_refused,
            ingress_rate_limited,
            device_up,
            device_sent,
            device_received,
            gsm_signal_dbm,
            http_requests,
            http_duration,
            events_dropped,
            bus_dropped,
            queue_depth,
            sse_clients,
            consumer_lag,
        }
    }

    /// The OpenMetrics text exposition, ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            tracing::error!("metric encoding failed");
        }
        out
    }
}
