//! This instance as a federation site (CONTRACT 2 `site {...}`): it pulls its bundle from the
//! main (conditional), applies it to the default tenant without prune, sends heartbeats, and
//! forwards its alert lifecycle, state changes and notification outcomes as a durable consumer
//! whose position advances only once the main confirmed receipt. When the main is unreachable
//! it backs off with jitter and keeps running on what it has.

use super::FORWARD_BATCH_MAX;
use crate::config::SiteConfig;
use crate::events::{Consumer, Events};
use crate::model::Timestamp;
use crate::model::event::{Event, EventType};
use crate::model::site::{
    ACTIONS_WAITING_HEADER, ActionsDone, CLOCK_OFFSET_HEADER, EdgeStatus, FINGERPRINT_FORM,
    ForwardBatch, ForwardReceipt, SiteAction, SiteHeartbeat, parse_fingerprint,
};
use crate::runtime::Locked;
use crate::runtime::clock::{SharedClock, Stopwatch};
use crate::runtime::worker::StepFuture;
use crate::runtime::{AlertAction, AlertActions, SiteBundles, Wait, Worker};
use crate::store::Store;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;
use uuid::Uuid;

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Events per forwarded batch (well under the main's limit and its 1 MiB body limit).
const BATCH: usize = 200;
/// The first retry after a failure; doubled per failure up to the interval (or a minute).
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Pending events are counted up to this many for the heartbeat.
const PENDING_COUNT_MAX: usize = 10_000;
pub const UPLINK: &str = "federation-uplink";

/// What goes upward: what the central on-call needs to see of a site.
fn forwarded(e: &Event) -> bool {
    e.site.is_none()
        && matches!(
            e.kind,
            EventType::StateChange
                | EventType::FlappingStart
                | EventType::FlappingEnd
                | EventType::HeartbeatMissed
                | EventType::AlertOpened
                | EventType::AlertResolved
                | EventType::Ack
                | EventType::Escalation
                | EventType::Notification
                | EventType::IncidentUpdate
        )
}

/// The connection to the main: its URL, this site's name and token, and a client that trusts
/// the main's certificate as configured.
#[derive(Clone)]
pub struct MainLink {
    http: reqwest::Client,
    base: String,
    name: String,
    token: String,
}

impl MainLink {
    /// `None` when this instance is not a site.
    pub fn from_config(site: &SiteConfig) -> Result<Option<MainLink>, String> {
        if site.main_url.is_empty() {
            return Ok(None);
        }
        let builder = crate::runtime::outbound::client(REQUEST_TIMEOUT)
            .user_agent(concat!("svc-site/", env!("CARGO_PKG_VERSION")));
        let builder = if !site.fingerprint.is_empty() {
            // Exactly the pinned certificate, whoever signed it (a private CA, self-signed).
            let pin = parse_fingerprint(&site.fingerprint).ok_or_else(|| {
                format!(
                    "site.fingerprint {:?}: {FINGERPRINT_FORM}",
                    site.fingerprint
                )
            })?;
            let tls = crate::runtime::tls::client_config(move |cert| {
                if Sha256::digest(cert.as_ref()).as_slice() == pin {
                    Ok(())
                } else {
                    Err("the main's certificate does not match site.fingerprint".into())
                }
            })?;
            builder.use_preconfigured_tls(tls)
        } else if !site.ca_file.is_empty() {
            let pem = std::fs::read(&site.ca_file)
                .map_err(|e| format!("site.caFile {}: {e}", site.ca_file))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("site.caFile {}: {e}", site.ca_file))?;
            builder.tls_certs_only(certs)
        } else {
            builder
        };
        let http = builder.build().map_err(|e| e.to_string())?;
        Ok(Some(MainLink {
            http,
            base: site.main_url.trim_end_matches('/').to_string(),
            name: site.name.clone(),
            token: site.token.0.clone(),
        }))
    }

    fn url(&self, verb: &str) -> String {
        format!("{}/api/v1/sites/{}:{verb}", self.base, self.name)
    }

    /// POSTs `body` as JSON to the site's `verb`; a refusal is an error saying why.
    async fn post(
        &self,
        verb: &str,
        body: &impl serde::Serialize,
    ) -> Result<reqwest::Response, String> {
        let body = serde_json::to_vec(body).map_err(|e| e.to_string())?;
        let res = self
            .http
            .post(self.url(verb))
            .bearer_auth(&self.token)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(MainLink::transport)?;
        if !res.status().is_success() {
            return Err(MainLink::refused(res).await);
        }
        Ok(res)
    }

    /// A failed exchange as one line for the status and the log.
    async fn refused(res: reqwest::Response) -> String {
        let status = res.status();
        let body = res.text().await.unwrap_or_default();
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let code = v.get("code")?.as_str()?.to_string();
                let detail = v.get("detail").and_then(|d| d.as_str()).unwrap_or("");
                Some(format!("{code}: {detail}"))
            })
            .unwrap_or(body);
        format!("main answered {status}: {detail}")
    }

    fn transport(e: reqwest::Error) -> String {
        format!(
            "main unreachable: {}",
            crate::runtime::outbound::error_text(&e)
        )
    }
}

/// Retry delays after consecutive failures: doubling from a second up to `cap`, with up to a
/// quarter of jitter so many sites do not return in step.
struct Backoff {
    failures: u32,
}

impl Backoff {
    fn next(&mut self, cap: Duration) -> Duration {
        let base = FIRST_RETRY
            .saturating_mul(1 << self.failures.min(16))
            .min(cap.min(MAX_RETRY));
        self.failures = self.failures.saturating_add(1);
        let mut r = [0u8; 2];
        let _ = getrandom::fill(&mut r);
        let quarter = base / 4;
        base - quarter
            + quarter.mul_f64(f64::from(u16::from_le_bytes(r)) / f64::from(u16::MAX) * 2.0)
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// `GET /sites/{name}:actions`' answer.
#[derive(serde::Deserialize)]
struct ActionPage {
    items: Vec<SiteAction>,
}

/// Pulls the bundle and sends heartbeats, each on its own interval.
pub struct EdgeSync {
    link: MainLink,
    store: Arc<Store>,
    events: Arc<Events>,
    clock: SharedClock,
    bundles: Arc<dyn SiteBundles>,
    status: Arc<Mutex<EdgeStatus>>,
    pull_every: Duration,
    beat_every: Duration,
    next_pull: Option<Timestamp>,
    next_beat: Option<Timestamp>,
    pull_backoff: Backoff,
    beat_backoff: Backoff,
    /// The last heartbeat's round trip, told in the next for the main's clock offset.
    round_trip_ms: Option<u64>,
    /// Carries out what the main's people did to this site's alerts.
    alerts: Arc<dyn AlertActions>,
}

impl EdgeSync {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        link: MainLink,
        site: &SiteConfig,
        store: Arc<Store>,
        events: Arc<Events>,
        clock: SharedClock,
        bundles: Arc<dyn SiteBundles>,
        status: Arc<Mutex<EdgeStatus>>,
        alerts: Arc<dyn AlertActions>,
    ) -> Self {
        {
            let mut s = status.locked();
            s.enabled = true;
            s.main_url = link.base.clone();
            s.name = link.name.clone();
        }
        Self {
            link,
            store,
            events,
            clock,
            bundles,
            status,
            pull_every: site.pull_interval.map_or(DEFAULT_INTERVAL, |d| d.0),
            beat_every: site.heartbeat_interval.map_or(DEFAULT_INTERVAL, |d| d.0),
            next_pull: None,
            next_beat: None,
            pull_backoff: Backoff { failures: 0 },
            beat_backoff: Backoff { failures: 0 },
            round_trip_ms: None,
            alerts,
        }
    }

    /// One conditional pull; a new bundle is applied, and a refused one reported.
    async fn pull(&self) -> Result<(), String> {
        let etag = self.status.locked().bundle_etag.clone();
        let mut req = self
            .link
            .http
            .get(self.link.url("pull"))
            .bearer_auth(&self.link.token);
        if !etag.is_empty() {
            req = req.header(IF_NONE_MATCH, format!("\"{etag}\""));
        }
        let res = req.send().await.map_err(MainLink::transport)?;
        let now = self.clock.now();
        match res.status() {
            StatusCode::NOT_MODIFIED => {
                self.status.locked().last_pull_at = Some(now);
                Ok(())
            }
            StatusCode::OK => {
                let served = res
                    .headers()
                    .get(ETAG)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.trim_start_matches("W/").trim_matches('"').to_string())
                    .unwrap_or_default();
                let text = res.text().await.map_err(MainLink::transport)?;
                // An empty bundle still ends the downtimes the main no longer ships.
                let applied = self.bundles.apply_site_bundle(text).await;
                let mut s = self.status.locked();
                s.last_pull_at = Some(now);
                match applied {
                    Ok(()) => {
                        s.bundle_etag = served;
                        s.apply_error.clear();
                    }
                    Err(why) => {
                        tracing::warn!(etag = %served, error = %why, "the pulled bundle was not applied; keeping the previous configuration");
                        s.apply_error = why.to_string();
                    }
                }
                Ok(())
            }
            _ => Err(MainLink::refused(res).await),
        }
    }

    async fn heartbeat(&mut self) -> Result<(), String> {
        let tenant = self
            .store
            .default_tenant()
            .await
            .map_err(|e| e.to_string())?
            .id;
        let counts = self
            .store
            .site_counts(tenant)
            .await
            .map_err(|e| e.to_string())?;
        let mut forward = self.status.locked().forward.clone();
        forward.gap = self
            .events
            .consumer_lags()
            .get(UPLINK)
            .map_or(0, |lag| lag.lost);
        if let Some(position) = forward.position {
            let pending = self
                .events
                .stored_after(vec![tenant], position, PENDING_COUNT_MAX)
                .await
                .map_err(|e| e.to_string())?;
            let pending: Vec<&Event> = pending.iter().filter(|e| forwarded(e)).collect();
            forward.pending = pending.len() as u64;
            forward.oldest_unsent = pending.first().map(|e| e.ts);
        }
        {
            // The queue is known whether or not the main hears of it.
            let mut s = self.status.locked();
            s.forward.pending = forward.pending;
            s.forward.oldest_unsent = forward.oldest_unsent;
            s.forward.gap = forward.gap;
        }
        let (etag, apply_error) = {
            let s = self.status.locked();
            (s.bundle_etag.clone(), s.apply_error.clone())
        };
        let beat = SiteHeartbeat {
            version: crate::model::VERSION.to_string(),
            bundle_etag: etag,
            apply_error,
            stats: [
                ("hosts".to_string(), counts.hosts),
                ("services".to_string(), counts.services),
                ("alertsOpen".to_string(), counts.alerts_open),
            ]
            .into(),
            interval_seconds: Some(self.beat_every.as_secs().max(1)),
            forward: Some(forward.clone()),
            clock: Some(self.clock.now()),
            round_trip_ms: self.round_trip_ms,
        };
        let trip = Stopwatch::start();
        let res = self.link.post("heartbeat", &beat).await?;
        self.round_trip_ms = Some(trip.elapsed().as_millis() as u64);
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        let (offset, waiting) = (header(CLOCK_OFFSET_HEADER), header(ACTIONS_WAITING_HEADER));
        {
            let mut s = self.status.locked();
            s.last_heartbeat_at = Some(self.clock.now());
            s.clock_offset_ms = offset;
            s.uplink_lost_since = None;
        }
        // Only when the main says some wait: a metered uplink pays for no empty asks. Those
        // that cannot be fetched now wait for the next heartbeat.
        if waiting.is_some_and(|n| n > 0)
            && let Err(why) = self.carry_out(tenant).await
        {
            self.failed("carrying out the main's actions", why);
        }
        Ok(())
    }

    /// Carries out the actions the main's people took on this site's alerts, in their order,
    /// as this site's own (`via: main`), and tells the main which are done: carried out, or no
    /// longer applying (the alert gone or not open). One that fails here stops the rest until
    /// the next heartbeat, so they stay in order.
    async fn carry_out(&self, tenant: Uuid) -> Result<(), String> {
        let res = self
            .link
            .http
            .get(self.link.url("actions"))
            .bearer_auth(&self.link.token)
            .send()
            .await
            .map_err(MainLink::transport)?;
        if !res.status().is_success() {
            return Err(MainLink::refused(res).await);
        }
        let body = res.bytes().await.map_err(MainLink::transport)?;
        let page: ActionPage = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let mut done = Vec::new();
        for a in page.items {
            let action = match a.action.as_str() {
                "resolve" => AlertAction::Resolve,
                _ => AlertAction::Ack,
            };
            let by = format!("{} at the main", a.by);
            match self
                .alerts
                .act(tenant, a.alert_id, action, by, "main")
                .await
            {
                Ok(_) => done.push(a.id),
                Err(why) => {
                    tracing::warn!(alert = %a.alert_id, error = %why, "the main's action waits");
                    break;
                }
            }
        }
        if done.is_empty() {
            return Ok(());
        }
        self.link.post("actions", &ActionsDone { done }).await?;
        Ok(())
    }

    fn failed(&self, what: &str, why: String) {
        tracing::warn!(error = %why, "site {what} failed");
        self.status.locked().last_error = why;
    }
}

impl Worker for EdgeSync {
    fn name(&self) -> &'static str {
        "site-sync"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let now = self.clock.now();
            if self.next_pull.is_none_or(|t| t <= now) {
                let wait = match self.pull().await {
                    Ok(()) => {
                        self.pull_backoff.reset();
                        self.status.locked().last_error.clear();
                        self.pull_every
                    }
                    Err(why) => {
                        self.failed("pull", why);
                        self.pull_backoff.next(self.pull_every)
                    }
                };
                self.next_pull = Some(self.clock.now().plus(wait));
            }
            if self.next_beat.is_none_or(|t| t <= now) {
                let wait = match self.heartbeat().await {
                    Ok(()) => {
                        self.beat_backoff.reset();
                        self.beat_every
                    }
                    Err(why) => {
                        self.failed("heartbeat", why);
                        self.status.locked().uplink_lost_since.get_or_insert(now);
                        self.beat_backoff.next(self.beat_every)
                    }
                };
                self.next_beat = Some(self.clock.now().plus(wait));
            }
            let now = self.clock.now();
            let due = [self.next_pull, self.next_beat]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now);
            Wait::For(if due > now {
                due.since(now)
            } else {
                Duration::ZERO
            })
        })
    }
}

/// Forwards events to the main; the position is committed only after the main's receipt.
pub struct EdgeUplink {
    link: MainLink,
    store: Arc<Store>,
    events: Arc<Events>,
    status: Arc<Mutex<EdgeStatus>>,
    consumer: Option<Consumer>,
    tenant: Option<Uuid>,
    backoff: Backoff,
    /// Retries come at least this often (the heartbeat interval), so the backlog starts
    /// moving soon after the main is back.
    retry_cap: Duration,
}

impl EdgeUplink {
    pub fn new(
        link: MainLink,
        site: &SiteConfig,
        store: Arc<Store>,
        events: Arc<Events>,
        status: Arc<Mutex<EdgeStatus>>,
    ) -> Self {
        Self {
            link,
            store,
            events,
            status,
            consumer: None,
            tenant: None,
            backoff: Backoff { failures: 0 },
            retry_cap: site.heartbeat_interval.map_or(DEFAULT_INTERVAL, |d| d.0),
        }
    }

    /// Sends the next batch; `Ok` once the main confirmed it (or it held nothing to send).
    async fn forward_once(&mut self) -> Result<(), String> {
        let tenant = match self.tenant {
            Some(t) => t,
            None => {
                let t = self
                    .store
                    .default_tenant()
                    .await
                    .map_err(|e| e.to_string())?
                    .id;
                self.tenant = Some(t);
                t
            }
        };
        if self.consumer.is_none() {
            let consumer = Consumer::open(UPLINK, self.events.clone(), self.store.clone())
                .await
                .map_err(|e| e.to_string())?;
            self.status.locked().forward.position = Some(consumer.position());
            self.events.waits_on_peer(UPLINK);
            self.consumer = Some(consumer);
        }
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(());
        };
        let batch = consumer.next(BATCH).await.map_err(|e| e.to_string())?;
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(());
        };
        let span = consumer.batch_span(&batch);
        let (link, status) = (&self.link, &self.status);
        async move {
            let events: Vec<Event> = batch
                .iter()
                .filter(|e| e.tenant_id == tenant && forwarded(e))
                .map(|e| (**e).clone())
                .collect();
            debug_assert!(events.len() <= FORWARD_BATCH_MAX);
            if let Some(first) = events.first() {
                status.locked().forward.oldest_unsent = Some(first.ts);
                let res = link.post("events", &ForwardBatch { events }).await?;
                let body = res.bytes().await.map_err(MainLink::transport)?;
                serde_json::from_slice::<ForwardReceipt>(&body)
                    .map_err(|e| format!("main's receipt unreadable: {e}"))?;
            }
            consumer
                .commit(through, Vec::new())
                .await
                .map_err(|e| e.to_string())?;
            let mut s = status.locked();
            s.forward.position = Some(through);
            s.forward.oldest_unsent = None;
            Ok(())
        }
        .instrument(span)
        .await
    }
}

impl Worker for EdgeUplink {
    fn name(&self) -> &'static str {
        "site-uplink"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.forward_once().await {
                Ok(()) => {
                    self.backoff.reset();
                    Wait::For(Duration::ZERO)
                }
                Err(why) => {
                    tracing::warn!(error = %why, "forwarding events to the main failed");
                    self.status.locked().last_error = why;
                    Wait::For(self.backoff.next(self.retry_cap))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_the_cap() {
        let mut b = Backoff { failures: 0 };
        let first = b.next(Duration::from_secs(60));
        assert!(first >= Duration::from_millis(750) && first <= Duration::from_millis(1250));
        for _ in 0..10 {
            b.next(Duration::from_secs(60));
        }
        let capped = b.next(Duration::from_secs(10));
        assert!(capped >= Duration::from_millis(7500) && capped <= Duration::from_millis(12_500));
        b.reset();
        assert!(b.next(Duration::from_secs(60)) <= Duration::from_millis(1250));
    }
}
