//! Federation (SPEC 2.10, SEMANTICS 10). The main side: sites pull their bundle, report by
//! heartbeat and forward their events; the overview; a stale site raises an alert. The edge
//! side (this instance as a site) is `edge`.

pub mod edge;

use crate::auth::Principal;
use crate::events::Events;
use crate::model::alert::{Alert, AlertFilter, ManualAlarm, ShelveRequest};
use crate::model::audit::AuditDraft;
use crate::model::bundle::{BundleDoc, SHIPPED_DOWNTIMES};
use crate::model::config::{ConfigDoc, Invalid, SiteBody};
use crate::model::event::{Event, EventDraft, EventType, Severity};
use crate::model::identity::Actor;
use crate::model::mirror::{Mirror, MirrorKind, Stale};
use crate::model::object::{ObjectFilter, ObjectView};
use crate::model::site::{
    BeatAnswer, CLOCK_DRIFT_MAX, CONFIG_DRIFT_AFTER, CONNECTED_WITHIN, Drift, EdgeStatus,
    ForwardBatch, ForwardReceipt, SiteAction, SiteHeartbeat, SiteOverview, SiteStatus,
    clock_offset_ms,
};
use crate::model::state::Problem;
use crate::model::suppression::Downtime;
use crate::model::{GoDuration, Timestamp};
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::recount::Recount;
use crate::runtime::worker::StepFuture;
use crate::runtime::{AlertAction, AlertActions, Wait, Worker};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// One site's turn to store its forwarded batch.
type SiteTurn = Arc<tokio::sync::Mutex<()>>;

/// At most this many events in one forwarded batch.
pub const FORWARD_BATCH_MAX: usize = 1000;

/// Forwarded JSON (as decompressed) parsed and being stored at once, in KiB. A thousand sites
/// back from an outage each send a batch of 1,000 events at the same moment; past this room
/// each waits its turn instead of all being parsed together (docs/federation.md).
const FORWARD_ROOM_KIB: u32 = 16 * 1024;

/// How long a forwarded batch waits for room before it is refused for load (503 with
/// Retry-After; the site sends it again after its backoff).
const FORWARD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a forwarded body may take to arrive while it holds room (a slow sender must not
/// keep the room from everyone else); past it the batch is refused for load as above.
pub const FORWARD_READ: std::time::Duration = std::time::Duration::from_secs(30);

/// Room for forwarded batches' bodies being parsed and stored, by size, first come first
/// served.
struct ForwardRoom(tokio::sync::Semaphore);

impl ForwardRoom {
    fn new() -> Self {
        Self(tokio::sync::Semaphore::new(FORWARD_ROOM_KIB as usize))
    }

    /// Room for a body of `bytes`, held until dropped; `Busy` after `FORWARD_WAIT`.
    async fn take(&self, bytes: usize) -> Result<tokio::sync::SemaphorePermit<'_>, SiteError> {
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(FORWARD_ROOM_KIB)
            .clamp(1, FORWARD_ROOM_KIB);
        match tokio::time::timeout(FORWARD_WAIT, self.0.acquire_many(kib)).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(SiteError::Busy),
        }
    }
}

/// Forwarded events keep their own time when it lies within this long before their arrival (a
/// site that was offline for weeks forwards its history as it happened)...
pub const STAMP_PAST: Duration = Duration::from_secs(31 * 86_400);
/// ...and within this long after it (clocks drift).
pub const STAMP_FUTURE: Duration = Duration::from_secs(86_400);

/// A forwarded event whose time lies outside [`now - STAMP_PAST`, `now + STAMP_FUTURE`] (a
/// site's clock far off, or a hostile site) is stamped with the hour it arrived, under an id
/// made of that hour and a digest of the site and its own id, so a resend within the hour is
/// still recognised as one; its own time and id stay in `payload.originalTs` and
/// `payload.originalId`. So a site's events land in the few month files around now, and can
/// never open files for other years.
fn restamp(mut e: Event, site: &str, now: Timestamp) -> Event {
    let ahead = e.ts.as_millis() - now.as_millis();
    let window = -(STAMP_PAST.as_millis() as i64)..=STAMP_FUTURE.as_millis() as i64;
    if window.contains(&ahead) {
        return e;
    }
    let hour = now.as_millis() - now.as_millis().rem_euclid(3_600_000);
    let digest = Sha256::new()
        .chain_update(site.as_bytes())
        .chain_update(e.id.as_bytes())
        .finalize();
    let mut random = [0u8; 10];
    random.copy_from_slice(&digest[..10]);
    if let Some(payload) = e.payload.as_object_mut() {
        payload.insert("originalTs".into(), serde_json::json!(e.ts));
        payload.insert("originalId".into(), serde_json::json!(e.id));
    }
    e.id = uuid::Builder::from_unix_timestamp_millis(hour.max(0) as u64, &random).into_uuid();
    e.ts = Timestamp::from_millis(hour).unwrap_or(now);
    e
}

/// Refuses a batch a site forwarded unless its events are within the bound and in ascending
/// id order.
fn check_batch(events: &[Event]) -> Result<(), SiteError> {
    let invalid = |detail: String| {
        SiteError::Invalid(Invalid {
            field: "events".into(),
            detail,
        })
    };
    if events.len() > FORWARD_BATCH_MAX {
        return Err(invalid(format!(
            "at most {FORWARD_BATCH_MAX} events per batch"
        )));
    }
    if events.windows(2).any(|w| w[0].id >= w[1].id) {
        return Err(invalid("events must be in ascending id order".into()));
    }
    Ok(())
}

/// Counts a batch of site `site`, sent through id `through`, into its status `s` (by the
/// site's own ids, which order its events; each once, whether sent ahead or in order), and
/// answers its events as the main keeps them: of the site, their clocks marked against the
/// site's last offset (`bound`, or `CLOCK_DRIFT_MAX`), restamped where their times are out of
/// reach.
fn count_batch(
    batch: &ForwardBatch,
    through: Uuid,
    s: &mut SiteStatus,
    now: Timestamp,
    bound: Option<Duration>,
    site: &str,
) -> Vec<Event> {
    let new: Vec<(Uuid, EventType)> = batch
        .events
        .iter()
        .map(|e| (e.id, e.kind))
        .filter(|(id, _)| {
            s.forwarded_through.is_none_or(|t| *id > t) && !s.counted_ahead.contains(id)
        })
        .collect();
    let count = |kind| new.iter().filter(|(_, k)| *k == kind).count() as i64;
    let (opened, closed) = (
        count(EventType::AlertOpened),
        count(EventType::AlertResolved),
    );
    s.forwarded += new.len() as u64;
    if batch.ahead {
        s.counted_ahead.extend(new.iter().map(|(id, _)| *id));
        let over = s.counted_ahead.len().saturating_sub(COUNTED_AHEAD_MAX);
        s.counted_ahead.drain(..over);
    } else {
        s.forwarded_through = s.forwarded_through.max(Some(through));
        let position = s.forwarded_through;
        s.counted_ahead.retain(|id| Some(*id) > position);
    }
    s.forwarded_alerts_open = (s.forwarded_alerts_open + opened - closed).max(0);
    let (offset, bound) = (s.clock_offset_ms, bound.unwrap_or(CLOCK_DRIFT_MAX));
    batch
        .events
        .iter()
        .cloned()
        .map(|mut e| {
            e.tenant_id = s.tenant_id;
            e.site = Some(site.to_string());
            mark_clock(&mut e, offset, now, bound);
            restamp(e, site, now)
        })
        .collect()
}

/// Refuses a token bound to another site than `name`.
fn refuse_other_site(p: &Principal, name: &str) -> Result<(), SiteError> {
    match p.site.as_deref().filter(|s| *s != name) {
        Some(bound) => Err(SiteError::OtherSite(bound.to_string())),
        None => Ok(()),
    }
}

/// Site `name`'s document as a site that may connect: there is one, and it is not disabled.
fn usable_site(doc: Option<ConfigDoc>, name: &str) -> Result<SiteBody, SiteError> {
    let site = SiteBody::parse(&doc.ok_or(SiteError::NotFound)?.body);
    if site.disabled {
        return Err(SiteError::Disabled(name.to_string()));
    }
    Ok(site)
}

/// Marks a forwarded event whose time the site's clock makes doubtful, in
/// `payload.clockSuspect`: the site's clock was off the main's by more than `bound` at its last
/// heartbeat (`offsetMs`), or the event lies ahead of the main's clock by more than `bound`
/// (`aheadMs`). Its time, id and so its order stay as the site gave them.
fn mark_clock(e: &mut Event, offset: Option<i64>, now: Timestamp, bound: Duration) {
    let bound = bound.as_millis() as i64;
    let ahead = e.ts.as_millis() - now.as_millis();
    let mut suspect = serde_json::Map::new();
    if let Some(offset) = offset.filter(|o| o.abs() > bound) {
        suspect.insert("offsetMs".into(), json!(offset));
    }
    if ahead > bound {
        suspect.insert("aheadMs".into(), json!(ahead));
    }
    if let (false, Some(payload)) = (suspect.is_empty(), e.payload.as_object_mut()) {
        payload.insert("clockSuspect".into(), suspect.into());
    }
}

/// The most ids of events sent ahead a site's status keeps (`SiteStatus::counted_ahead`): over
/// its budget a site sends only its critical events ahead, a few; past this, the oldest may be
/// counted twice when sent again in order.
const COUNTED_AHEAD_MAX: usize = 4096;
/// The stale threshold of a site that has not said how often it beats.
const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(180);
/// The longest the stale-site sweep sleeps without a wake: a bound, should one be missed. It
/// otherwise sleeps until the next site would go stale, or until a heartbeat or a change of the
/// sites wakes it.
const MAX_SLEEP: Duration = Duration::from_secs(3600);
/// After a failed sweep, the next try.
const RETRY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("no such site")]
    NotFound,
    #[error("site {0} is disabled")]
    Disabled(String),
    /// A `sites:connect` token minted for another site.
    #[error("this token is bound to site {0}")]
    OtherSite(String),
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// No room for a forwarded batch: other batches fill it (a fleet back from an outage at once),
    /// or its body took longer than `FORWARD_READ` to arrive.
    #[error(
        "the main has no room for this batch now (other sites' batches fill it, or the body took over 30 s to arrive); send it again after Retry-After"
    )]
    Busy,
    /// `alerting` did not raise or resolve a stale site's alert.
    #[error("the stale-site alert: {0}")]
    Alerting(#[from] crate::runtime::PortError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl crate::store::TxAbort for SiteError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            SiteError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// A pull's answer.
pub enum Pulled {
    /// `If-None-Match` named the current bundle.
    NotModified {
        etag: String,
    },
    Bundle {
        etag: String,
        text: String,
    },
}

/// The ETag of a bundle: the hex of the first 16 bytes of its SHA-256 (SEMANTICS 10).
pub fn bundle_etag(text: &str) -> String {
    crate::model::audit::hex(&Sha256::digest(text.as_bytes())[..16])
}

/// The bundle a site pulls: its own as written, and after it a `downtimes` document for each
/// downtime not over at `now` that names the site (its windows, a calendar's as last read,
/// so a site without an uplink keeps them). A bundle that does not parse is served as written,
/// for the site to report.
fn served_bundle(site: &str, bundle: &str, downtimes: &[Downtime], now: Timestamp) -> String {
    let mut shipped: Vec<&Downtime> = downtimes
        .iter()
        .filter(|d| d.sites.iter().any(|s| s == site) && !d.over(now))
        .collect();
    if shipped.is_empty() {
        return bundle.to_string();
    }
    let Ok(mut docs) = crate::model::bundle::parse(bundle) else {
        return bundle.to_string();
    };
    shipped.sort_by_key(|d| d.id);
    docs.extend(shipped.into_iter().map(|d| BundleDoc {
        kind: SHIPPED_DOWNTIMES.into(),
        name: d.id.to_string(),
        host: None,
        body: crate::model::fault::encoded("a shipped downtime", serde_json::to_value(d.shipped())),
    }));
    crate::model::bundle::render(&docs)
}

pub struct Sites {
    store: Arc<Store>,
    clock: SharedClock,
    events: Arc<Events>,
    alerts: Arc<dyn AlertActions>,
    /// Forwarded batches of one site are stored one after the other; other sites' beside
    /// them, so their commits share syncs. By tenant and site name, one entry per site that
    /// forwarded (sites are configuration: the map stays as small as the fleet).
    receiving: Mutex<HashMap<(Uuid, String), SiteTurn>>,
    forward_room: ForwardRoom,
    /// This instance's own side, when it is a site.
    edge: Arc<Mutex<EdgeStatus>>,
    /// Wakes the stale-site sweep: a heartbeat may be a site's first, a change of the sites may
    /// move a threshold.
    wake: Arc<tokio::sync::Notify>,
    /// The sites the last sweep found stale: when they move, every observer's vote may have.
    stale: StaleSet,
    recount: Arc<Recount>,
}

/// Applies `change` to a site's status (a new one starts empty), with the events `report`
/// makes of it before and after journaled in the same transaction; the new status.
async fn touch_site_status(
    store: &Arc<Store>,
    tenant: Uuid,
    name: String,
    change: impl FnOnce(&mut SiteStatus) + Send + 'static,
    report: impl FnOnce(&SiteStatus, &SiteStatus) -> Vec<EventDraft> + Send + 'static,
) -> Result<SiteStatus, StoreError> {
    store
        .transact(move |tx| -> TxResult<_> {
            let old = tx.site_status(tenant, &name)?;
            let mut new = old.clone();
            change(&mut new);
            tx.save_site_status(&new)?;
            let events = report(&old, &new);
            if events.is_empty() {
                tx.unrecorded("a site's last contact, no transition");
            }
            tx.journal(events)?;
            Ok(Wrote::Changed(new))
        })
        .await
}

impl Sites {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        events: Arc<Events>,
        alerts: Arc<dyn AlertActions>,
        recount: Arc<Recount>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            events,
            alerts,
            receiving: Mutex::default(),
            forward_room: ForwardRoom::new(),
            edge: Arc::default(),
            wake: Arc::new(tokio::sync::Notify::new()),
            stale: StaleSet::default(),
            recount,
        })
    }

    /// The site `name` as the caller may use it: a token bound to another site is refused
    /// before anything is looked up, so it learns nothing of other sites.
    async fn connectable(&self, p: &Principal, name: &str) -> Result<SiteBody, SiteError> {
        refuse_other_site(p, name)?;
        let doc = match self
            .store
            .doc(p.tenant, "sites", name.to_string(), false)
            .await
        {
            Err(StoreError::NotFound) => return Err(SiteError::NotFound),
            other => other?,
        };
        usable_site(Some(doc), name)
    }

    /// `GET /sites/{name}:pull`: the site's bundle, or `NotModified` when `if_none_match`
    /// names its ETag.
    pub async fn pull(
        &self,
        p: &Principal,
        name: &str,
        if_none_match: &[String],
    ) -> Result<Pulled, SiteError> {
        let site = self.connectable(p, name).await?;
        let now = self.clock.now();
        let downtimes = self.store.downtimes(p.tenant).await?;
        let text = served_bundle(
            name,
            site.bundle.as_deref().unwrap_or_default(),
            &downtimes,
            now,
        );
        let etag = bundle_etag(&text);
        let served = etag.clone();
        touch_site_status(
            &self.store,
            p.tenant,
            name.to_string(),
            move |s| {
                s.last_pull_at = Some(now);
                if s.served_etag != served {
                    s.served_etag = served;
                    s.served_at = Some(now);
                }
            },
            |_, _| Vec::new(),
        )
        .await?;
        self.wake.notify_one();
        if if_none_match.iter().any(|t| t == "*" || *t == etag) {
            return Ok(Pulled::NotModified { etag });
        }
        Ok(Pulled::Bundle { etag, text })
    }

    /// `POST /sites/{name}:heartbeat`. A site that was stale is back: its alert resolves and a
    /// `system` event says how long it ran alone. The site's clock offset, when it told its
    /// clock, is kept for the drift sweep and answered, with how many actions wait for it.
    pub async fn heartbeat(
        &self,
        p: &Principal,
        name: &str,
        mut beat: SiteHeartbeat,
    ) -> Result<BeatAnswer, SiteError> {
        let site = self.connectable(p, name).await?;
        // The ETag as `:pull` sent it (quoted) or bare names the same bundle.
        beat.bundle_etag = crate::model::bare_entity_tag(&beat.bundle_etag);
        let now = self.clock.now();
        let offset = beat
            .clock
            .map(|clock| clock_offset_ms(clock, beat.round_trip_ms, now));
        let status = touch_site_status(
            &self.store,
            p.tenant,
            name.to_string(),
            move |s| {
                if s.stale_since.is_some() {
                    s.last_alone_seconds =
                        s.last_heartbeat_at.map(|last| now.since(last).as_secs());
                    s.stale_since = None;
                }
                s.last_heartbeat_at = Some(now);
                s.heartbeat = beat;
                s.clock_offset_ms = offset;
            },
            |before, after| {
                let back = before.stale_since.is_some() && after.stale_since.is_none();
                back.then(|| returned(after)).into_iter().collect()
            },
        )
        .await?;
        self.wake.notify_one();
        // The beat ended any staleness; an alert still recorded is resolved now.
        if let Some(alert) = status.stale_alert {
            self.resolve_stale_alert(p.tenant, name, alert).await?;
        }
        Ok(BeatAnswer {
            clock_offset_ms: offset,
            actions_waiting: status.actions.len(),
            uplink_budget: site.uplink,
        })
    }

    async fn resolve_stale_alert(
        &self,
        tenant: Uuid,
        name: &str,
        alert: Uuid,
    ) -> Result<(), SiteError> {
        self.resolve_site_alert(tenant, name, alert, "heartbeat", move |s| {
            if s.stale_alert == Some(alert) && s.stale_since.is_none() {
                s.stale_alert = None;
            }
        })
        .await
    }

    /// Resolves a site's alert `alert` (`via` what ended its condition), then `clear`s it from
    /// the site's status; one that does not resolve now is left to the next sweep.
    async fn resolve_site_alert(
        &self,
        tenant: Uuid,
        name: &str,
        alert: Uuid,
        via: &'static str,
        clear: impl FnOnce(&mut SiteStatus) + Send + 'static,
    ) -> Result<(), SiteError> {
        if let Err(why) = self
            .alerts
            .act(
                tenant,
                alert,
                AlertAction::Resolve,
                "federation".into(),
                via,
            )
            .await
        {
            tracing::warn!(site = name, error = %why, "a site's alert not resolved yet");
            return Ok(());
        }
        touch_site_status(&self.store, tenant, name.to_string(), clear, |_, _| {
            Vec::new()
        })
        .await?;
        Ok(())
    }

    /// `GET /sites:overview`: every site of the tenant with its connection.
    pub async fn overview(&self, p: &Principal) -> Result<Vec<SiteOverview>, SiteError> {
        let now = self.clock.now();
        let mut statuses: HashMap<String, SiteStatus> = self
            .store
            .site_statuses(p.tenant)
            .await?
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect();
        let docs = self
            .store
            .docs(p.tenant, "sites", None, usize::MAX, |_| true)
            .await?;
        let downtimes = self.store.downtimes(p.tenant).await?;
        Ok(docs
            .into_iter()
            .map(|doc| {
                let site = SiteBody::parse(&doc.body);
                let status = statuses.remove(&doc.name).unwrap_or_default();
                let hb = status.heartbeat.clone();
                let etag = bundle_etag(&served_bundle(
                    &doc.name,
                    site.bundle.as_deref().unwrap_or_default(),
                    &downtimes,
                    now,
                ));
                SiteOverview {
                    connected: status
                        .last_heartbeat_at
                        .is_some_and(|t| now.since(t) < CONNECTED_WITHIN),
                    stale: status.stale_since.is_some(),
                    last_heartbeat_at: status.last_heartbeat_at,
                    last_pull_at: status.last_pull_at,
                    version_skew: status.last_heartbeat_at.is_some()
                        && hb.version != crate::model::VERSION,
                    version: hb.version,
                    bundle_current: hb.bundle_etag == etag,
                    bundle_etag: etag.clone(),
                    applied_etag: hb.bundle_etag,
                    apply_error: hb.apply_error,
                    stats: hb.stats,
                    forwarded_alerts_open: status.forwarded_alerts_open,
                    forwarded_events: status.forwarded,
                    forwarded_through: status.forwarded_through,
                    forward: hb.forward,
                    uplink: hb.uplink,
                    stale_since: status.stale_since,
                    last_alone_seconds: status.last_alone_seconds,
                    clock_offset_ms: status.clock_offset_ms,
                    clock_drift: status.clock_alert.is_some(),
                    config_drift: status.config_alert.is_some(),
                    bundle_served_at: status.served_at.filter(|_| status.served_etag == etag),
                    name: doc.name,
                    description: site.description,
                    disabled: site.disabled,
                    labels: site.labels,
                }
            })
            .collect())
    }

    /// Room to read, parse and store `bytes` more of a forwarded body, held while the batch is
    /// read, parsed and stored; `Busy` when other sites' batches fill it for `FORWARD_WAIT`.
    pub async fn forward_room(
        &self,
        bytes: usize,
    ) -> Result<tokio::sync::SemaphorePermit<'_>, SiteError> {
        self.forward_room.take(bytes).await
    }

    /// `POST /sites/{name}:events`: stores what the site forwarded, as events of that site
    /// with the site's ids and times, each once however often it is sent. The site, its status
    /// and the batch's mirrored records are read in the write that counts and mirrors it.
    pub async fn receive(
        &self,
        p: &Principal,
        name: &str,
        batch: ForwardBatch,
    ) -> Result<ForwardReceipt, SiteError> {
        refuse_other_site(p, name)?;
        let Some(through) = batch.events.last().map(|e| e.id) else {
            self.connectable(p, name).await?;
            return Ok(ForwardReceipt::default());
        };
        if let Err(invalid) = check_batch(&batch.events) {
            // An unknown or disabled site is told so first, as where the batch is fine.
            self.connectable(p, name).await?;
            return Err(invalid);
        }
        let key = (p.tenant, name.to_string());
        let turn = self
            .receiving
            .locked()
            .entry(key.clone())
            .or_default()
            .clone();
        let taken = {
            let _one_at_a_time = turn.lock().await;
            self.take_batch(p.tenant, name, batch, through).await
        };
        if matches!(taken, Err(SiteError::NotFound)) {
            // Only sites that exist keep a turn.
            self.receiving.locked().remove(&key);
        }
        let events = taken?;
        let sent = events.len() as u64;
        let fresh = self.events.store_forwarded(events).await?.len() as u64;
        Ok(ForwardReceipt {
            stored: fresh,
            duplicates: sent - fresh,
            through: Some(through),
        })
    }

    /// Counts and mirrors a batch of site `name`, sent through id `through`, in one write, as
    /// `receive` describes; the events to store.
    async fn take_batch(
        &self,
        tenant: Uuid,
        name: &str,
        batch: ForwardBatch,
        through: Uuid,
    ) -> Result<Vec<Event>, SiteError> {
        let now = self.clock.now();
        let site = name.to_string();
        // Mirrored before the events are stored and published, so whoever an event wakes
        // reads the mirror it made. A crash between the two leaves the events to be stored
        // when the site sends them again; the mirrors fold every event sent, each once by its
        // id, and none is counted twice.
        self.store
            .transact(move |tx| -> TxResult<_, SiteError> {
                let events = tx.take_site_batch(tenant, &site, &batch.events, |doc, s| {
                    let body = usable_site(doc, &site)?;
                    let bound = body.clock_drift_max.map(|d| d.0);
                    Ok::<_, SiteError>(count_batch(&batch, through, s, now, bound, &site))
                })?;
                tx.unrecorded("a site's forwarded events counted and mirrored");
                Ok(Wrote::Changed(events))
            })
            .await
    }

    /// Raises the alert of every site whose last heartbeat is older than its threshold;
    /// returns when the next site would go stale (none: no site is waiting to).
    pub async fn sweep(&self) -> Result<Option<Timestamp>, SiteError> {
        let now = self.clock.now();
        let mut next: Option<Timestamp> = None;
        let mut stale_now = BTreeSet::new();
        let statuses = self.store.all_site_statuses().await?;
        // Each tenant's sites in one read, not one read a site.
        let mut sites: HashMap<Uuid, HashMap<String, SiteBody>> = HashMap::new();
        for tenant in statuses
            .iter()
            .map(|s| s.tenant_id)
            .collect::<BTreeSet<_>>()
        {
            let docs = self
                .store
                .docs(tenant, "sites", None, usize::MAX, |_| true)
                .await?;
            let bodies = docs
                .into_iter()
                .map(|d| {
                    let body = SiteBody::parse(&d.body);
                    (d.name, body)
                })
                .collect();
            sites.insert(tenant, bodies);
        }
        for status in statuses {
            if status.stale_since.is_some() {
                stale_now.insert((status.tenant_id, status.name.clone()));
            }
            let Some(site) = sites
                .get(&status.tenant_id)
                .and_then(|s| s.get(&status.name))
            else {
                continue;
            };
            if let Some(due) = self.drifts(&status, site, now).await? {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
            let Some(last) = status.last_heartbeat_at else {
                continue;
            };
            if status.stale_alert.is_some() {
                continue;
            }
            let threshold = stale_after(site, &status.heartbeat);
            if status.stale_since.is_none() {
                if site.disabled {
                    continue;
                }
                if now.since(last) <= threshold {
                    let due = last.plus(threshold + Duration::from_millis(1));
                    next = Some(next.map_or(due, |n| n.min(due)));
                    continue;
                }
                // Stale first, alert second: whoever sees the alert sees the site stale, and an
                // alert that fails to open is retried by the next sweep.
                let marked = touch_site_status(
                    &self.store,
                    status.tenant_id,
                    status.name.clone(),
                    move |s| {
                        // A heartbeat may have arrived since the read.
                        if s.last_heartbeat_at == Some(last) {
                            s.stale_since = Some(now);
                        }
                    },
                    |_, _| Vec::new(),
                )
                .await?;
                if marked.stale_since.is_none() {
                    continue;
                }
                stale_now.insert((status.tenant_id, status.name.clone()));
            }
            let alarm = site_alarm(
                site,
                &status.name,
                "critical",
                "site-stale",
                format!("Site {} is not reporting", status.name),
                format!(
                    "no heartbeat from site {} since {last} (threshold {})",
                    status.name,
                    GoDuration(threshold)
                ),
            );
            let alert = self
                .alerts
                .alarm(status.tenant_id, alarm, "federation".into(), "federation")
                .await?;
            let after = touch_site_status(
                &self.store,
                status.tenant_id,
                status.name.clone(),
                move |s| {
                    if s.stale_since.is_some() {
                        s.stale_alert = Some(alert.id);
                    }
                },
                |_, _| Vec::new(),
            )
            .await?;
            if after.stale_since.is_none() {
                self.resolve_stale_alert(status.tenant_id, &status.name, alert.id)
                    .await?;
            }
        }
        if self.stale.moved(stale_now) {
            self.recount.everything();
        }
        Ok(next)
    }

    /// Raises or resolves the site's clock-drift and config-drift alerts as its status stands;
    /// returns when its configuration would drift if nothing changes.
    async fn drifts(
        &self,
        status: &SiteStatus,
        site: &SiteBody,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, SiteError> {
        let (clock, config) = if site.disabled {
            (Drift::None, Drift::None)
        } else {
            (
                status.clock_drift(site.clock_drift_max.map_or(CLOCK_DRIFT_MAX, |d| d.0)),
                status.config_drift(
                    site.config_drift_after.map_or(CONFIG_DRIFT_AFTER, |d| d.0),
                    now,
                ),
            )
        };
        let due = match config {
            Drift::Due(at) => Some(at),
            _ => None,
        };
        self.hold(status, site, SiteCondition::Clock, clock).await?;
        self.hold(status, site, SiteCondition::Config, config)
            .await?;
        Ok(due)
    }

    /// Opens the alert of `condition` while it holds (`Drift::Now`), resolves it when it no
    /// longer does; the alert's id is kept in the site's status.
    async fn hold(
        &self,
        status: &SiteStatus,
        site: &SiteBody,
        condition: SiteCondition,
        drift: Drift,
    ) -> Result<(), SiteError> {
        let open = condition.alert(status);
        let (tenant, name) = (status.tenant_id, status.name.clone());
        match (drift, open) {
            (Drift::Now(why), None) => {
                let alarm = site_alarm(
                    site,
                    &name,
                    "warning",
                    condition.key(),
                    condition.title(&name),
                    why,
                );
                let alert = self
                    .alerts
                    .alarm(tenant, alarm, "federation".into(), "federation")
                    .await?;
                touch_site_status(
                    &self.store,
                    tenant,
                    name,
                    move |s| *condition.alert_mut(s) = Some(alert.id),
                    |_, _| Vec::new(),
                )
                .await?;
            }
            (Drift::None | Drift::Due(_), Some(alert)) => {
                self.resolve_site_alert(tenant, &name, alert, "federation", move |s| {
                    let kept = condition.alert_mut(s);
                    if *kept == Some(alert) {
                        *kept = None;
                    }
                })
                .await?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Queues `action` (`ack`, `resolve`, or `shelve` with its `shelf`) on the mirrored alert
    /// `alert_id` for the site that owns it, in order, with its audit entry; `NotFound` when no
    /// site mirrors that alert.
    pub async fn carry(
        &self,
        p: &Principal,
        actor: &Actor,
        alert_id: Uuid,
        action: &str,
        comment: Option<String>,
        shelf: Option<ShelveRequest>,
    ) -> Result<SiteAction, SiteError> {
        let (site, _) = self.mirrored_alert(p, alert_id).await?;
        let now = self.clock.now();
        let queued = SiteAction {
            id: self.clock.new_id(),
            alert_id,
            action: action.to_string(),
            by: p.name.clone(),
            comment: comment.unwrap_or_default(),
            at: now,
            shelf,
        };
        let audit = AuditDraft::new(
            now,
            p.tenant,
            actor,
            &format!("site.alert.{action}"),
            format!("site/{site}/alert/{alert_id}"),
        )
        .after(&queued);
        let (tenant, kept) = (p.tenant, queued.clone());
        self.store
            .transact(move |tx| -> TxResult<_> {
                let mut s = tx.site_status(tenant, &site)?;
                s.actions.push(kept);
                tx.save_site_status(&s)?;
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(queued)
    }

    /// The site mirroring alert `id` of the caller's tenant, and the alert as it mirrors it;
    /// `NotFound` when no site does.
    pub async fn mirrored_alert(
        &self,
        p: &Principal,
        id: Uuid,
    ) -> Result<(String, Alert), SiteError> {
        match self
            .store
            .site_mirror(p.tenant, MirrorKind::Alert, id)
            .await?
        {
            Some(Mirror::Alert { site, alert, .. }) => Ok((site, *alert)),
            _ => Err(SiteError::NotFound),
        }
    }

    /// One page of site `site`'s mirrored objects that `filter` keeps, in id order, after
    /// `after`; each marked stale by uplink while the site is.
    pub async fn mirrored_object_page(
        &self,
        p: &Principal,
        site: &str,
        filter: &ObjectFilter,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ObjectView>, SiteError> {
        let stale = self.uplink_stale(p.tenant, site).await?;
        let mirrors = self
            .store
            .site_mirrors(p.tenant, MirrorKind::Object, Some(site.to_string()))
            .await?;
        Ok(mirrors
            .into_iter()
            .filter_map(|m| match m {
                Mirror::Object { view, .. } => Some(ObjectView {
                    stale: stale.clone(),
                    ..*view
                }),
                Mirror::Alert { .. } => None,
            })
            .filter(|v| after.is_none_or(|a| v.object.id > a))
            .filter(|v| {
                filter.matches(&v.object, || v.object.labels.clone()) && filter.state_matches(v)
            })
            .take(limit)
            .collect())
    }

    /// The mirrored object `id` of the caller's tenant with its site, marked stale by uplink
    /// while the site is; `NotFound` when no site mirrors it.
    pub async fn mirrored_object(
        &self,
        p: &Principal,
        id: Uuid,
    ) -> Result<(String, ObjectView), SiteError> {
        let Some(Mirror::Object { site, view, .. }) = self
            .store
            .site_mirror(p.tenant, MirrorKind::Object, id)
            .await?
        else {
            return Err(SiteError::NotFound);
        };
        let stale = self.uplink_stale(p.tenant, &site).await?;
        Ok((site, ObjectView { stale, ..*view }))
    }

    /// The sites' objects in a problem state, as the problems inbox lists the main's own.
    pub async fn mirrored_problems(&self, p: &Principal) -> Result<Vec<Problem>, SiteError> {
        Ok(self
            .store
            .site_problem_mirrors(p.tenant)
            .await?
            .into_iter()
            .filter_map(|m| match m {
                Mirror::Object { view, .. } => {
                    let view = *view;
                    let state = view.state.filter(|s| s.state != 0)?;
                    Some(Problem {
                        labels: view.object.labels.clone(),
                        object: view.object,
                        host_name: view.host_name,
                        state,
                    })
                }
                Mirror::Alert { .. } => None,
            })
            .collect())
    }

    /// Why site `site`'s mirrors may be out of date: its uplink is lost.
    async fn uplink_stale(&self, tenant: Uuid, site: &str) -> Result<Option<Stale>, SiteError> {
        Ok(self
            .store
            .site_status(tenant, site.to_string())
            .await?
            .stale_since
            .map(|since| Stale {
                reason: "uplink".into(),
                since,
            }))
    }

    /// One page of site `site`'s mirrored alerts that `filter` keeps, newest first, strictly
    /// before `before`.
    pub async fn mirrored_alert_page(
        &self,
        p: &Principal,
        site: &str,
        filter: &AlertFilter,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Alert>, SiteError> {
        let alerts = self.mirrored_alerts(p, Some(site)).await?;
        Ok(alerts
            .into_iter()
            .rev()
            .filter(|a| before.is_none_or(|b| a.id < b) && filter.matches(a))
            .take(limit)
            .collect())
    }

    /// The open and acknowledged alerts site `site` (every site: `None`) of the caller's
    /// tenant mirrors.
    pub async fn mirrored_alerts(
        &self,
        p: &Principal,
        site: Option<&str>,
    ) -> Result<Vec<Alert>, SiteError> {
        Ok(self
            .store
            .site_mirrors(p.tenant, MirrorKind::Alert, site.map(str::to_string))
            .await?
            .into_iter()
            .filter_map(|m| match m {
                Mirror::Alert { alert, .. } => Some(*alert),
                Mirror::Object { .. } => None,
            })
            .collect())
    }

    /// `GET /sites/{name}:actions`: what the main's people did to the site's alerts, in order.
    pub async fn actions(&self, p: &Principal, name: &str) -> Result<Vec<SiteAction>, SiteError> {
        self.connectable(p, name).await?;
        self.waiting(p, name).await
    }

    /// The actions taken at the main on site `name`'s alerts that wait for the site.
    pub async fn waiting(&self, p: &Principal, name: &str) -> Result<Vec<SiteAction>, SiteError> {
        Ok(self
            .store
            .site_status(p.tenant, name.to_string())
            .await?
            .actions)
    }

    /// `POST /sites/{name}:actions`: the site carried these out; they are forgotten.
    pub async fn actions_done(
        &self,
        p: &Principal,
        name: &str,
        done: Vec<Uuid>,
    ) -> Result<(), SiteError> {
        self.connectable(p, name).await?;
        touch_site_status(
            &self.store,
            p.tenant,
            name.to_string(),
            move |s| s.actions.retain(|a| !done.contains(&a.id)),
            |_, _| Vec::new(),
        )
        .await?;
        Ok(())
    }

    /// What wakes the stale-site sweep (also to be notified on catalog changes).
    pub fn sweep_waker(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }

    /// This instance's side of the federation (`GET /site:status`).
    pub fn edge_status(&self) -> EdgeStatus {
        self.edge.locked().clone()
    }

    /// The status the edge workers keep up to date.
    pub fn edge_handle(&self) -> Arc<Mutex<EdgeStatus>> {
        self.edge.clone()
    }
}

/// The alert a site's condition raises at the main: the site's labels with `site`, its
/// escalation policy, one per site by `<key>/<site>`.
fn site_alarm(
    site: &SiteBody,
    name: &str,
    severity: &str,
    key: &str,
    title: String,
    message: String,
) -> ManualAlarm {
    ManualAlarm {
        title: Some(title),
        message: Some(message),
        severity: Some(severity.into()),
        escalation_policy: site.escalation_policy.clone(),
        labels: site
            .labels
            .clone()
            .into_iter()
            .chain([("site".to_string(), name.to_string())])
            .collect(),
        object_id: None,
        dedup_key: Some(format!("{key}/{name}")),
    }
}

/// A condition of a site that stands as one alert at the main while it holds.
#[derive(Clone, Copy)]
enum SiteCondition {
    /// Its clock is off the main's.
    Clock,
    /// It does not run the bundle served to it.
    Config,
}

impl SiteCondition {
    fn key(self) -> &'static str {
        match self {
            SiteCondition::Clock => "site-clock",
            SiteCondition::Config => "site-config",
        }
    }

    fn title(self, site: &str) -> String {
        match self {
            SiteCondition::Clock => format!("Site {site}'s clock is off"),
            SiteCondition::Config => format!("Site {site} does not run its configuration"),
        }
    }

    fn alert(self, s: &SiteStatus) -> Option<Uuid> {
        match self {
            SiteCondition::Clock => s.clock_alert,
            SiteCondition::Config => s.config_alert,
        }
    }

    fn alert_mut(self, s: &mut SiteStatus) -> &mut Option<Uuid> {
        match self {
            SiteCondition::Clock => &mut s.clock_alert,
            SiteCondition::Config => &mut s.config_alert,
        }
    }
}

/// The site's own threshold, else three of its heartbeat intervals.
fn stale_after(site: &SiteBody, beat: &SiteHeartbeat) -> Duration {
    site.stale_after.map(|d| d.0).unwrap_or_else(|| {
        beat.interval_seconds
            .map_or(DEFAULT_STALE_AFTER, |s| Duration::from_secs(s.max(1) * 3))
    })
}

/// The `system` event of a stale site that reports again.
fn returned(status: &SiteStatus) -> EventDraft {
    let alone = status.last_alone_seconds.unwrap_or(0);
    let mut draft = EventDraft::new(
        status.tenant_id,
        EventType::System,
        Some(Severity::Info),
        json!({
            "action": "site.returned",
            "site": status.name,
            "aloneSeconds": alone,
            "summary": format!("site {} reports again after {} alone", status.name, GoDuration(Duration::from_secs(alone))),
        }),
    );
    draft.source_id = Some(format!("site:{}", status.name));
    draft
}

/// The least time from one stale-site sweep's start to the next: a sweep reads every site,
/// and every heartbeat, pull and forwarded batch wakes it (its site's status changed), which a
/// fleet's thousand sites would make one sweep after another.
const SWEEP_SPACING: Duration = Duration::from_secs(1);

/// Runs the stale-site sweep when the next site would go stale, or when woken, at most once a
/// `SWEEP_SPACING`.
pub struct StaleSites {
    sites: Arc<Sites>,
    last: Option<crate::runtime::Stopwatch>,
}

impl StaleSites {
    pub fn new(sites: Arc<Sites>) -> Self {
        Self { sites, last: None }
    }
}

impl Worker for StaleSites {
    fn name(&self) -> &'static str {
        "stale-sites"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if let Some(since) = self.last.as_ref().map(crate::runtime::Stopwatch::elapsed)
                && since < SWEEP_SPACING
            {
                return Wait::For(SWEEP_SPACING - since);
            }
            self.last = Some(crate::runtime::Stopwatch::start());
            match self.sites.sweep().await {
                Ok(next) => Wait::For(next.map_or(MAX_SLEEP, |n| {
                    n.since(self.sites.clock.now()).min(MAX_SLEEP)
                })),
                Err(e) => {
                    tracing::warn!(error = %e, "stale-site sweep failed");
                    Wait::For(RETRY)
                }
            }
        })
    }

    fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.sites.wake.clone())
    }
}

/// Whether the set of stale sites moved since the last look (the stale-site sweep's, which
/// reads every status anyway): then every observer's vote may have.
#[derive(Default)]
struct StaleSet(Mutex<Option<BTreeSet<(Uuid, String)>>>);

impl StaleSet {
    fn moved(&self, now: BTreeSet<(Uuid, String)>) -> bool {
        let mut last = self.0.locked();
        let moved = last.as_ref() != Some(&now);
        *last = Some(now);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forwarded bodies take room by size: small ones pass beside a large one, a body past the
    /// room waits for it, first come first served, and after `FORWARD_WAIT` is refused (Busy);
    /// room given back lets the next in.
    #[tokio::test(start_paused = true)]
    async fn forwarded_batches_wait_for_room_by_size_then_are_refused() {
        let room = ForwardRoom::new();
        let room_bytes = FORWARD_ROOM_KIB as usize * 1024;
        let big = room.take(room_bytes - 4096).await.unwrap();
        let small = room.take(100).await.unwrap();
        let waited = tokio::time::Instant::now();
        assert!(matches!(room.take(1024 * 1024).await, Err(SiteError::Busy)));
        assert_eq!(waited.elapsed(), FORWARD_WAIT);
        // A body larger than the room waits for all of it, not forever.
        let whole = room.take(room_bytes * 4);
        drop((big, small));
        let whole = whole.await.unwrap();
        assert_eq!(whole.num_permits(), FORWARD_ROOM_KIB as usize);
        drop(whole);
        assert_eq!(room.take(0).await.unwrap().num_permits(), 1);
    }

    fn downtime(id: u128, sites: &[&str], end: &str) -> Downtime {
        serde_json::from_value(json!({
            "id": Uuid::from_u128(id), "tenantId": Uuid::from_u128(1), "comment": "works",
            "selector": "site=lab", "type": "fixed", "start": "2026-03-01T08:00:00Z", "end": end,
            "createdAt": "2026-03-01T00:00:00Z", "createdBy": "ops", "version": 1, "sites": sites,
        }))
        .unwrap()
    }

    /// A site is served its bundle as written, and after it the downtimes naming it that are
    /// not over, in id order; a bundle written as JSON is served as YAML then.
    #[test]
    fn a_site_is_served_the_downtimes_that_name_it() {
        let now: Timestamp = "2026-03-01T09:00:00Z".parse().unwrap();
        let bundle = "kind: host\nname: plc\nbody: {spec: {}}\n";
        let later = "2026-03-01T12:00:00Z";
        let downtimes = [
            downtime(3, &["north"], later),
            downtime(2, &["south", "north"], later),
            downtime(4, &["north"], "2026-03-01T08:30:00Z"),
            downtime(5, &["south"], later),
        ];
        assert_eq!(served_bundle("west", bundle, &downtimes, now), bundle);
        let served =
            crate::model::bundle::parse(&served_bundle("north", bundle, &downtimes, now)).unwrap();
        let names: Vec<(&str, &str)> = served
            .iter()
            .map(|d| (d.kind.as_str(), d.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("host", "plc"),
                (SHIPPED_DOWNTIMES, &*Uuid::from_u128(2).to_string()),
                (SHIPPED_DOWNTIMES, &*Uuid::from_u128(3).to_string()),
            ]
        );
        assert_eq!(served[1].body["selector"], "site=lab");
        assert!(served[1].body.get("sites").is_none(), "{:?}", served[1]);
        let as_json = r#"[{"kind": "host", "name": "plc", "body": {"spec": {}}}]"#;
        let served = served_bundle("south", as_json, &downtimes, now);
        assert_eq!(crate::model::bundle::parse(&served).unwrap().len(), 3);
        assert_eq!(
            served_bundle("south", "[broken", &downtimes, now),
            "[broken"
        );
    }
}
