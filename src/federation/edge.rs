//! This instance as a federation site (CONTRACT 2 `site {...}`): it pulls its bundle from the
//! main (conditional), applies it to the default tenant without prune, sends heartbeats, and
//! forwards its alert lifecycle, state changes and notification outcomes as a durable consumer
//! whose position advances only once the main confirmed receipt. When the main is unreachable
//! it backs off with jitter and keeps running on what it has.

use super::FORWARD_BATCH_MAX;
use crate::config::SiteConfig;
use crate::events::{Consumer, Events};
use crate::model::Timestamp;
use crate::model::alert::ManualAlarm;
use crate::model::event::{Event, EventType, Severity};
use crate::model::mirror::{MirrorKind, key_of};
use crate::model::site::{
    ACTIONS_WAITING_HEADER, ActionsDone, CLOCK_OFFSET_HEADER, EdgeStatus, FINGERPRINT_FORM,
    ForwardBatch, ForwardReceipt, SiteAction, SiteHeartbeat, UPLINK_BUDGET_HEADER, UplinkBudget,
    UplinkUsage, parse_fingerprint,
};
use crate::runtime::Locked;
use crate::runtime::clock::{SharedClock, Stopwatch};
use crate::runtime::worker::StepFuture;
use crate::runtime::{AlertAction, AlertActions, HeldAlert, SiteBundles, Wait, Worker};
use crate::store::Store;
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, ETAG, HeaderMap, HeaderValue, IF_NONE_MATCH,
};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
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
                | EventType::Shelve
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
    /// Where every exchange's bytes are counted (`EdgeStatus::uplink`).
    status: Arc<Mutex<EdgeStatus>>,
    clock: SharedClock,
    /// Where the counts are kept across restarts, and when they were last written there.
    usage_file: Option<Arc<UsageFile>>,
    /// Woken when the site goes over its budget or back under it.
    budget_moved: Arc<tokio::sync::Notify>,
}

/// The uplink's counts in a file of the data directory (`uplink-usage.json`), written at most
/// every `USAGE_SAVE_EVERY` and when a day begins: a power cut forgets at most that much
/// traffic, and a quiet uplink writes nothing.
pub struct UsageFile {
    path: std::path::PathBuf,
    saved: Mutex<Option<(Stopwatch, String)>>,
}

const USAGE_SAVE_EVERY: Duration = Duration::from_secs(600);

impl UsageFile {
    pub fn new(data_dir: &std::path::Path) -> Self {
        Self {
            path: data_dir.join("uplink-usage.json"),
            saved: Mutex::new(None),
        }
    }

    /// The counts saved before, if any.
    fn load(&self) -> Option<UplinkUsage> {
        let text = std::fs::read(&self.path).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Writes `usage` when it is time to (atomically: a new file renamed over the old).
    fn keep(&self, usage: &UplinkUsage) {
        let mut saved = self.saved.locked();
        let due = saved
            .as_ref()
            .is_none_or(|(at, day)| at.elapsed() >= USAGE_SAVE_EVERY || *day != usage.day);
        if !due {
            return;
        }
        let tmp = self.path.with_extension("json.new");
        let written = serde_json::to_vec(usage)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        match written {
            Ok(()) => *saved = Some((Stopwatch::start(), usage.day.clone())),
            Err(e) => {
                tracing::warn!(error = %e, path = %self.path.display(), "the uplink's counts were not saved")
            }
        }
    }
}

/// An answer of the main, read whole (and decompressed).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
}

/// Bodies at least this long go compressed (a heartbeat's few hundred bytes would not shrink
/// by more than gzip's frame).
const COMPRESS_FROM: usize = 512;
/// The most an answer of the main may decompress to.
const ANSWER_MAX: u64 = 64 * 1024 * 1024;

/// The bytes of a request as it goes: request line, headers, body.
fn request_bytes(req: &reqwest::Request) -> u64 {
    let line = req.method().as_str().len() + req.url().as_str().len() + 12;
    let body = req.body().and_then(|b| b.as_bytes()).map_or(0, <[u8]>::len);
    (line + header_bytes(req.headers()) + body) as u64
}

fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum()
}

fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = out.write_all(body);
    out.finish().unwrap_or_default()
}

impl MainLink {
    /// `None` when this instance is not a site; its traffic is counted in `status`.
    pub fn from_config(
        site: &SiteConfig,
        status: Arc<Mutex<EdgeStatus>>,
        clock: SharedClock,
        usage_file: Option<UsageFile>,
    ) -> Result<Option<MainLink>, String> {
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
            status,
            clock,
            usage_file: usage_file.map(Arc::new),
            budget_moved: Arc::new(tokio::sync::Notify::new()),
        }))
    }

    /// The counts saved before, kept in the status.
    fn restore_usage(&self) {
        if let Some(usage) = self.usage_file.as_ref().and_then(|f| f.load()) {
            self.status.locked().uplink = usage;
        }
    }

    /// Sends `req` with the site's token, reads the answer whole and counts both ways' bytes;
    /// a gzip answer is decompressed (bounded).
    async fn exchange(&self, req: reqwest::RequestBuilder) -> Result<Answer, String> {
        let req = req
            .bearer_auth(&self.token)
            .header(ACCEPT_ENCODING, "gzip")
            .build()
            .map_err(MainLink::transport)?;
        let sent = request_bytes(&req);
        let res = self.http.execute(req).await.map_err(MainLink::transport)?;
        let (status, headers) = (res.status(), res.headers().clone());
        let raw = res.bytes().await.map_err(MainLink::transport)?;
        let received = (header_bytes(&headers) + raw.len() + 17) as u64;
        let now = self.clock.now();
        let usage = {
            let mut s = self.status.locked();
            let reset_day = s.uplink_budget.as_ref().map_or(1, |b| b.reset_day);
            s.uplink.count(now, reset_day, sent, received);
            s.uplink.clone()
        };
        if let Some(file) = &self.usage_file {
            file.keep(&usage);
        }
        let gzipped = headers
            .get(CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let body = if gzipped {
            use std::io::Read as _;
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&raw[..])
                .take(ANSWER_MAX)
                .read_to_end(&mut plain)
                .map_err(|e| format!("main's answer does not decompress: {e}"))?;
            plain.into()
        } else {
            raw
        };
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// GETs the site's `verb`, with `headers`.
    async fn get(&self, verb: &str, headers: HeaderMap) -> Result<Answer, String> {
        self.exchange(self.http.get(self.url(verb)).headers(headers))
            .await
    }

    fn url(&self, verb: &str) -> String {
        format!("{}/api/v1/sites/{}:{verb}", self.base, self.name)
    }

    /// POSTs `body` as JSON to the site's `verb`, gzip-compressed when it is long enough to
    /// gain; a refusal is an error saying why.
    async fn post(&self, verb: &str, body: &impl serde::Serialize) -> Result<Answer, String> {
        let body = serde_json::to_vec(body).map_err(|e| e.to_string())?;
        let mut req = self
            .http
            .post(self.url(verb))
            .header(CONTENT_TYPE, "application/json");
        let body = if body.len() >= COMPRESS_FROM {
            req = req.header(CONTENT_ENCODING, "gzip");
            gzip(&body)
        } else {
            body
        };
        let answer = self.exchange(req.body(body)).await?;
        if !answer.status.is_success() {
            return Err(MainLink::refused(&answer));
        }
        Ok(answer)
    }

    /// A failed exchange as one line for the status and the log.
    fn refused(answer: &Answer) -> String {
        let body = String::from_utf8_lossy(&answer.body);
        let detail = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let code = v.get("code")?.as_str()?.to_string();
                let detail = v.get("detail").and_then(|d| d.as_str()).unwrap_or("");
                Some(format!("{code}: {detail}"))
            })
            .unwrap_or_else(|| body.to_string());
        format!("main answered {}: {detail}", answer.status)
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
    /// The budget alerts raised here: at the warning share, and over the budget.
    budget_alerts: [HeldAlert; 2],
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
        link.restore_usage();
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
            budget_alerts: [
                HeldAlert::new("uplink-budget/warning"),
                HeldAlert::new("uplink-budget/critical"),
            ],
        }
    }

    /// One conditional pull; a new bundle is applied, and a refused one reported.
    async fn pull(&self) -> Result<(), String> {
        let etag = self.status.locked().bundle_etag.clone();
        let mut headers = HeaderMap::new();
        if !etag.is_empty()
            && let Ok(v) = HeaderValue::from_str(&format!("\"{etag}\""))
        {
            headers.insert(IF_NONE_MATCH, v);
        }
        let res = self.link.get("pull", headers).await?;
        let now = self.clock.now();
        match res.status {
            StatusCode::NOT_MODIFIED => {
                self.status.locked().last_pull_at = Some(now);
                Ok(())
            }
            StatusCode::OK => {
                let served = res
                    .headers
                    .get(ETAG)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.trim_start_matches("W/").trim_matches('"').to_string())
                    .unwrap_or_default();
                let text = String::from_utf8(res.body.to_vec())
                    .map_err(|_| "the main's bundle is not UTF-8".to_string())?;
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
            _ => Err(MainLink::refused(&res)),
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
            uplink: Some(self.status.locked().uplink.clone()),
        };
        let trip = Stopwatch::start();
        let res = self.link.post("heartbeat", &beat).await?;
        self.round_trip_ms = Some(trip.elapsed().as_millis() as u64);
        let header = |name: &str| {
            res.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        let (offset, waiting) = (header(CLOCK_OFFSET_HEADER), header(ACTIONS_WAITING_HEADER));
        let budget = res
            .headers
            .get(UPLINK_BUDGET_HEADER)
            .and_then(|v| serde_json::from_slice::<UplinkBudget>(v.as_bytes()).ok());
        {
            let mut s = self.status.locked();
            s.last_heartbeat_at = Some(self.clock.now());
            s.clock_offset_ms = offset;
            s.uplink_lost_since = None;
            s.uplink_budget = budget;
        }
        self.watch_budget(tenant).await;
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
        let res = self.link.get("actions", HeaderMap::new()).await?;
        if !res.status.is_success() {
            return Err(MainLink::refused(&res));
        }
        let page: ActionPage = serde_json::from_slice(&res.body).map_err(|e| e.to_string())?;
        let mut done = Vec::new();
        for a in page.items {
            let by = format!("{} at the main", a.by);
            let carried = match (a.action.as_str(), a.shelf) {
                ("shelve", shelf) => {
                    let shelf = shelf.unwrap_or_default();
                    self.alerts.shelve(tenant, a.alert_id, shelf, by).await
                }
                ("resolve", _) => {
                    let resolve = AlertAction::Resolve;
                    self.alerts
                        .act(tenant, a.alert_id, resolve, by, "main")
                        .await
                }
                _ => {
                    let ack = AlertAction::Ack;
                    self.alerts.act(tenant, a.alert_id, ack, by, "main").await
                }
            };
            match carried {
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

    /// Raises this site's budget alerts as its period's use stands (at the warning share, and
    /// over the budget), resolves them once it no longer does, and wakes the uplink when the
    /// site goes over its budget or back under it (a new period, a raised budget).
    async fn watch_budget(&mut self, tenant: Uuid) {
        let now = self.clock.now();
        let (budget, pct, was_over) = {
            let mut s = self.status.locked();
            let reset_day = s.uplink_budget.as_ref().map_or(1, |b| b.reset_day);
            s.uplink.roll(now, reset_day);
            let pct = s.uplink_budget.as_ref().map(|b| b.used_pct(&s.uplink));
            (s.uplink_budget.clone(), pct.unwrap_or(0.0), s.over_budget)
        };
        let over = budget.is_some() && pct >= 100.0;
        if over != was_over {
            self.status.locked().over_budget = over;
            self.link.budget_moved.notify_one();
        }
        let warn = budget.as_ref().is_some_and(|b| pct >= f64::from(b.warn_at));
        let policy = budget.and_then(|b| b.escalation_policy);
        let site = self.link.name.clone();
        let [warning, critical] = &mut self.budget_alerts;
        for (held, holds, severity, title) in [
            (
                warning,
                warn,
                "warning",
                format!("Uplink budget {pct:.0} % used"),
            ),
            (
                critical,
                over,
                "critical",
                "Uplink budget used up: only critical events go up".to_string(),
            ),
        ] {
            let raise = || ManualAlarm {
                title: Some(title),
                message: Some(format!(
                    "site {site} used {pct:.0} % of its uplink budget this period"
                )),
                severity: Some(severity.into()),
                escalation_policy: policy.clone(),
                labels: [("site".to_string(), site.clone())].into(),
                ..ManualAlarm::default()
            };
            let held = held
                .hold(
                    &*self.alerts,
                    tenant,
                    holds,
                    raise,
                    "federation",
                    "federation",
                )
                .await;
            if let Err(e) = held {
                tracing::warn!(error = %e, severity, "the uplink budget alert was not raised or resolved");
            }
        }
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
    /// Over the budget, events wait behind the committed position while later critical ones
    /// went ahead.
    holding: bool,
    /// The alerts with an event waiting: their acks wait too, so the main never hears of an
    /// ack before the alert it acknowledges.
    held_alerts: HashSet<Uuid>,
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
            holding: false,
            held_alerts: HashSet::new(),
            backoff: Backoff { failures: 0 },
            retry_cap: site.heartbeat_interval.map_or(DEFAULT_INTERVAL, |d| d.0),
        }
    }

    /// Sends the next batch; `Ok` once the main confirmed it (or it held nothing to send).
    /// Over the budget only critical events and acks go, read ahead of the committed position,
    /// which stays before the first event held back; back under it, reading starts again from
    /// there, so what waited goes up in order (what went ahead is stored once at the main).
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
        let over = self.status.locked().over_budget;
        if !over && self.holding {
            self.holding = false;
            self.held_alerts.clear();
            self.consumer = None;
        }
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
        let moved = self.link.budget_moved.clone();
        let batch = tokio::select! {
            batch = consumer.next(BATCH) => batch.map_err(|e| e.to_string())?,
            _ = moved.notified() => return Ok(()),
        };
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(());
        };
        let span = consumer.batch_span(&batch);
        let mut events: Vec<Event> = batch
            .iter()
            .filter(|e| e.tenant_id == tenant && forwarded(e))
            .map(|e| (**e).clone())
            .collect();
        // Read again: the budget may have moved while the batch was awaited.
        if self.status.locked().over_budget {
            let before = events.len();
            events.retain(|e| goes_ahead(e, &mut self.held_alerts));
            self.holding |= events.len() < before;
        }
        let (link, status, holding) = (&self.link, &self.status, self.holding);
        async move {
            debug_assert!(events.len() <= FORWARD_BATCH_MAX);
            if let Some(first) = events.first() {
                if !holding {
                    status.locked().forward.oldest_unsent = Some(first.ts);
                }
                let batch = ForwardBatch {
                    events,
                    ahead: holding,
                };
                let res = link.post("events", &batch).await?;
                serde_json::from_slice::<ForwardReceipt>(&res.body)
                    .map_err(|e| format!("main's receipt unreadable: {e}"))?;
            }
            if holding {
                consumer.advance(through);
                return Ok(());
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

/// Whether an event goes up over the budget: critical events and acks (heartbeats go anyway),
/// but nothing of an alert with an event waiting in `held` (an ack of a warning held back
/// waits with it); what waits adds its alert there.
fn goes_ahead(e: &Event, held: &mut HashSet<Uuid>) -> bool {
    let alert = match key_of(e) {
        Some((MirrorKind::Alert, id)) => Some(id),
        _ => None,
    };
    let essential = e.severity == Some(Severity::Critical) || e.kind == EventType::Ack;
    if essential && alert.is_none_or(|id| !held.contains(&id)) {
        return true;
    }
    held.extend(alert);
    false
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

    /// The counts are written at the first exchange and when a day begins, not at every one,
    /// and read back at start.
    #[test]
    fn uplink_counts_are_kept_across_restarts_without_a_write_per_exchange() {
        let dir = tempfile::tempdir().unwrap();
        let file = UsageFile::new(dir.path());
        assert_eq!(file.load(), None);
        let mut usage = UplinkUsage::default();
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        usage.count(at("2026-12-05T10:00:00Z"), 1, 100, 50);
        file.keep(&usage);
        assert_eq!(file.load(), Some(usage.clone()));
        let first = usage.clone();
        usage.count(at("2026-12-05T10:00:01Z"), 1, 100, 50);
        file.keep(&usage);
        assert_eq!(
            file.load(),
            Some(first),
            "not written again within the interval"
        );
        usage.count(at("2026-12-06T00:00:01Z"), 1, 1, 1);
        file.keep(&usage);
        assert_eq!(file.load(), Some(usage), "a new day is written");
    }

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

    /// Over the budget a critical alert's events and acks of alerts the main knows go ahead;
    /// a warning waits, and so does its ack, which would reach the main before its alert.
    #[test]
    fn an_ack_waits_with_the_alert_it_acknowledges() {
        let alert = |n: u128, kind, severity| Event {
            id: Uuid::from_u128(100 + n),
            tenant_id: Uuid::nil(),
            ts: "2026-12-05T10:00:00Z".parse().unwrap(),
            kind,
            object_id: None,
            source_id: None,
            severity: Some(severity),
            payload: serde_json::json!({"alertId": Uuid::from_u128(n)}).into(),
            site: None,
        };
        let mut held = HashSet::new();
        let batch = [
            alert(1, EventType::AlertOpened, Severity::Critical),
            alert(2, EventType::AlertOpened, Severity::Warning),
            alert(2, EventType::Ack, Severity::Info),
            alert(1, EventType::Ack, Severity::Info),
            alert(3, EventType::Ack, Severity::Info),
            alert(1, EventType::AlertResolved, Severity::Info),
            alert(1, EventType::Ack, Severity::Info),
        ];
        let ahead: Vec<(u128, EventType)> = batch
            .iter()
            .filter(|e| goes_ahead(e, &mut held))
            .map(|e| (e.id.as_u128() - 100, e.kind))
            .collect();
        assert_eq!(
            ahead,
            [
                (1, EventType::AlertOpened),
                (1, EventType::Ack),
                (3, EventType::Ack)
            ]
        );
        assert_eq!(held, [Uuid::from_u128(2), Uuid::from_u128(1)].into());
    }
}
