//! The courier: sends due outbox deliveries, at least once across crashes (a delivery leaves
//! the outbox only in the transaction that records it sent), and retries a failure per
//! CONTRACT 3: `30 s x 2^min(n,12)` capped at 1 h, +-10 % jitter, 30 attempts, overridable per
//! channel (`config.retryMaxAttempts`, `retryBackoffSeconds`, `retryBackoffCapSeconds`). A
//! delivery out of attempts, or refused for good, is a dead letter; a contact's delivery then
//! goes on on the next channel of the contact's preferences.
//!
//! Beside other processes on one database, every process's courier sends: each claims the due
//! deliveries it can send (`Store::claim_deliveries`: their next try moves past a lease,
//! in one write naming its database session), so no two send one; the claim of a process that
//! died mid-send lapses with its session, and another sends the delivery. The leading process
//! claims every kind; the others those their devices can send.

use super::channels::phone::Speech;
use super::channels::{self, Outgoing, SendError, webpush};
use super::directory::Directory;
use super::{IDLE, Notifier, escalation};
use crate::model::Timestamp;
use crate::model::channel::{ChannelConfig, RetrySettings, VoiceConfig};
use crate::model::event::EventDraft;
use crate::model::notify::{Channel, ChannelFailures, ChannelKind, Delivery, WebhookSubscription};
use crate::runtime::Locked;
use crate::runtime::Stopwatch;
use crate::runtime::worker::{Lead, StepFuture, Wait, Worker};
use crate::store::notify::Claimable;
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::Instrument;
use uuid::Uuid;

/// Deliveries sent concurrently per step.
const BATCH: usize = 100;

/// How often a channel's deliveries are tried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
    /// Retryable failures in a row (across deliveries) after which the channel counts as
    /// down: a contact's delivery then goes to the contact's next channel at once instead of
    /// waiting for retries (an uplink that is gone should not hold a page for an hour).
    pub failover_after: u32,
}

/// How long a channel that is down is skipped before it is tried again.
const DOWN_FOR: Duration = Duration::from_secs(60);

type ChannelKey = (Uuid, String);

fn channel_key(d: &Delivery) -> ChannelKey {
    let channel = if d.channel.is_empty() {
        &d.url
    } else {
        &d.channel
    };
    (d.tenant_id, channel.clone())
}

/// Channel health: retryable failures in a row and when the last one was, by tenant and
/// channel (its name, or a bare URL). Alone on its store (redb) a process keeps it in memory;
/// beside other processes (PostgreSQL) it is in the store, written with the attempts that
/// changed it, so a channel one process found down is down for every process.
pub enum ChannelHealth {
    Local(Mutex<HashMap<ChannelKey, ChannelFailures>>),
    Shared,
}

impl ChannelHealth {
    pub fn new(store: &Store) -> Self {
        if store.is_shared() {
            Self::Shared
        } else {
            Self::Local(Mutex::default())
        }
    }

    /// The health of the channels of `due` as a batch starts.
    async fn of_batch(
        &self,
        store: &Arc<Store>,
        due: &[Delivery],
    ) -> Result<BatchHealth, StoreError> {
        let keys: HashSet<ChannelKey> = due.iter().map(channel_key).collect();
        let seen = match self {
            Self::Local(known) => {
                let known = known.locked();
                keys.into_iter()
                    .filter_map(|k| known.get(&k).map(|f| (k, *f)))
                    .collect()
            }
            Self::Shared => store.channel_failures(keys).await?,
        };
        Ok(BatchHealth {
            seen,
            changes: HashMap::new(),
        })
    }

    /// Keeps what a batch's attempts did: in memory here; in the store the attempts'
    /// transaction wrote it (`record`).
    fn settle(&self, changes: &HashMap<ChannelKey, HealthChange>) {
        if let Self::Local(known) = self {
            let mut known = known.locked();
            for (key, change) in changes {
                match change.applied(known.get(key).copied()) {
                    Some(f) => known.insert(key.clone(), f),
                    None => known.remove(key),
                };
            }
        }
    }
}

/// What a batch's attempts did to a channel's failures in a row: reset by a success (then
/// the failures after it), or more failures.
#[derive(Clone, Copy, Default)]
struct HealthChange {
    worked: bool,
    failed: u32,
    last: Option<Timestamp>,
}

impl HealthChange {
    /// The channel's failures after this change to `before`.
    fn applied(&self, before: Option<ChannelFailures>) -> Option<ChannelFailures> {
        let base = if self.worked {
            0
        } else {
            before.map_or(0, |b| b.in_a_row)
        };
        // `last` is set with each failure: none since a success clears them.
        Some(ChannelFailures {
            in_a_row: base + self.failed,
            last: self.last?,
        })
    }
}

/// The health of a batch's channels: as it started, with its own attempts counted in.
struct BatchHealth {
    seen: HashMap<ChannelKey, ChannelFailures>,
    changes: HashMap<ChannelKey, HealthChange>,
}

impl BatchHealth {
    /// Counts a retryable failure on `d`'s channel; its failures in a row now.
    fn failed(&mut self, d: &Delivery, now: Timestamp) -> u32 {
        let key = channel_key(d);
        let change = self.changes.entry(key.clone()).or_default();
        change.failed += 1;
        change.last = Some(now);
        let seen = self.seen.entry(key).or_insert(ChannelFailures {
            in_a_row: 0,
            last: now,
        });
        seen.in_a_row += 1;
        seen.last = now;
        seen.in_a_row
    }

    fn worked(&mut self, d: &Delivery) {
        let key = channel_key(d);
        self.seen.remove(&key);
        self.changes.insert(
            key,
            HealthChange {
                worked: true,
                ..Default::default()
            },
        );
    }

    /// Why `d`'s channel is skipped now: down (per `policy`) and failed within the last
    /// minute; `None` when it should be tried.
    fn down(&self, d: &Delivery, policy: &RetryPolicy, now: Timestamp) -> Option<String> {
        let key = channel_key(d);
        let f = self.seen.get(&key)?;
        let recent = now.as_millis() - f.last.as_millis()
            < i64::try_from(DOWN_FOR.as_millis()).unwrap_or(i64::MAX);
        (f.in_a_row >= policy.failover_after && recent).then(|| {
            format!(
                "channel {:?} is down ({} failures in a row)",
                key.1, f.in_a_row
            )
        })
    }
}

impl RetryPolicy {
    /// A channel's policy: its own settings, the defaults for what it leaves out. A setting
    /// saved before save checked it, and no longer read, leaves the defaults.
    pub fn of(config: &BTreeMap<String, String>) -> Self {
        let own = RetrySettings::parse(config).unwrap_or_default();
        Self {
            max_attempts: own.max_attempts.unwrap_or(30),
            base: Duration::from_secs(own.backoff_secs.map_or(30, u64::from)),
            cap: Duration::from_secs(own.backoff_cap_secs.map_or(3600, u64::from)),
            failover_after: own.failover_after.unwrap_or(1),
        }
    }

    /// The wait after the `attempts`th failed attempt; `jitter` in [-1, 1] scales +-10 %.
    pub fn backoff(&self, attempts: u32, jitter: f64) -> Duration {
        let doublings = attempts.saturating_sub(1).min(12);
        let raw = self.base.saturating_mul(1 << doublings).min(self.cap);
        raw.mul_f64(1.0 + 0.1 * jitter.clamp(-1.0, 1.0))
    }
}

fn jitter() -> f64 {
    let r = getrandom::u32().unwrap_or(u32::MAX / 2);
    f64::from(r) / f64::from(u32::MAX) * 2.0 - 1.0
}

pub struct Courier {
    pub notifier: Arc<Notifier>,
    /// Whether this process leads: then it claims every kind of delivery.
    pub lead: Arc<Lead>,
}

/// The outcome of one delivery attempt.
pub struct Attempt {
    /// The delivery as its claim left it in the outbox.
    pub claimed: Delivery,
    /// The delivery as it is after the attempt (`attempts`, `next_try`, `dead`, `last_error`).
    pub delivery: Delivery,
    /// The delivery leaves the outbox: sent, or handed to the contact's next channel.
    pub settled: bool,
    /// The next channel of the contact, after a permanent failure.
    pub fallback: Option<Delivery>,
    pub events: Vec<EventDraft>,
}

/// Records delivery attempts in one transaction, ahead of queued requests: a sent one leaves
/// the outbox, a failed one waits for its next try or becomes a dead letter, each with its
/// events; one no longer in the outbox as its claim left it (dropped, or claimed by another
/// process after the claim lapsed) is left alone.
async fn record(
    store: &Arc<Store>,
    attempts: Vec<Attempt>,
    health: Option<HashMap<ChannelKey, HealthChange>>,
) -> Result<(), StoreError> {
    store
        .transact_ahead(move |tx| -> TxResult<_> {
            let mut events = Vec::new();
            let mut changed = false;
            if let Some(health) = health.filter(|h| !h.is_empty()) {
                for ((tenant, channel), change) in &health {
                    let before = tx.channel_failures(*tenant, channel)?;
                    tx.set_channel_failures(*tenant, channel, change.applied(before).as_ref())?;
                }
                tx.unrecorded("a channel's failures in a row: the attempts' events say them");
                changed = true;
            }
            for a in attempts {
                if tx.take_claimed_delivery(&a.claimed)?.is_none() {
                    continue;
                }
                changed = true;
                if a.events.is_empty() {
                    tx.unrecorded("a subscription's delivery: its attempts are no events");
                }
                if !a.settled {
                    tx.put_delivery(&a.delivery)?;
                }
                if let Some(f) = &a.fallback {
                    tx.put_delivery(f)?;
                }
                events.extend(a.events);
            }
            tx.journal(events)?;
            Ok(Wrote::new((), changed))
        })
        .await
}

/// A delivery's channel (for a `webhooks` subscription, one made of it), if it still exists.
async fn channel_of(n: &Notifier, d: &Delivery) -> Result<Option<Channel>, StoreError> {
    if let Some(id) = d.webhook_id {
        let found = n
            .store
            .doc(d.tenant_id, "webhooks", id.to_string(), true)
            .await;
        let doc = match found {
            Ok(doc) => doc,
            Err(StoreError::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(sub) = serde_json::from_str::<WebhookSubscription>(&doc.body) else {
            return Ok(None);
        };
        return Ok(Some(Channel {
            kind: "webhook".into(),
            enabled: !sub.disabled,
            config: sub
                .secret
                .map(|s| ("secret".to_string(), s))
                .into_iter()
                .collect(),
            template: None,
        }));
    }
    if d.channel.is_empty() {
        return Ok(None);
    }
    let dir = n.directory(d.tenant_id).await?;
    Ok(dir.channel_named(&d.channel).map(|c| c.body.clone()))
}

impl Notifier {
    /// One try of one delivery.
    async fn try_send(
        &self,
        d: &Delivery,
        channel: Option<&Channel>,
    ) -> Result<channels::Sent, SendError> {
        let (kind, opened, template) = match channel {
            Some(c) if !c.enabled => {
                return Err(SendError::permanent(format!(
                    "channel {:?} is disabled",
                    d.channel
                )));
            }
            Some(c) => (
                channels::kind_of(&c.kind)?,
                channels::open_secrets(&self.secrets, d.tenant_id, &c.config).await?,
                c.template.as_deref(),
            ),
            None if !d.url.is_empty() => (
                channels::kind_of(&d.kind)?,
                channels::open_secrets(&self.secrets, d.tenant_id, &BTreeMap::new()).await?,
                None,
            ),
            None => {
                return Err(SendError::permanent(format!(
                    "channel {:?} does not exist",
                    d.channel
                )));
            }
        };
        let config = channels::config_of(kind, &opened)?;
        let speech = self.speech(d.tenant_id, &config).await;
        let push = self.push_recipient(d.tenant_id, kind, &d.target).await?;
        let out = Outgoing {
            config: &config,
            template,
            delivery: d,
            speech: speech.as_ref(),
            push: push.as_ref(),
        };
        let outcome = opened.masked(channels::send(&self.senders, &out).await);
        if let (Some(push), Ok(user)) = (&push, Uuid::parse_str(&d.target)) {
            let gone = std::mem::take(&mut *push.gone.locked());
            if let Err(e) = crate::auth::push::forget_gone(
                &self.store,
                self.clock.now(),
                d.tenant_id,
                user,
                gone,
            )
            .await
            {
                tracing::warn!(error = %e, "could not forget gone push subscriptions");
            }
        }
        outcome
    }

    /// A voice channel's `config.ttsProfile`, read from the tenant's `tts-profiles`.
    pub(super) async fn speech(&self, tenant: Uuid, config: &ChannelConfig) -> Option<Speech> {
        let ChannelConfig::Voice(VoiceConfig {
            tts_profile: Some(name),
        }) = config
        else {
            return None;
        };
        let dir = self.directory(tenant).await.ok()?;
        dir.tts_profile(name).map(Speech::of)
    }

    /// A push channel's recipient: the instance's VAPID key and the subscriptions of the user
    /// `target` names; `None` for other channels, or when either is missing.
    pub(super) async fn push_recipient(
        &self,
        tenant: Uuid,
        kind: ChannelKind,
        target: &str,
    ) -> Result<Option<webpush::Recipient>, SendError> {
        let Some(user) = (kind == ChannelKind::Push)
            .then(|| Uuid::parse_str(target).ok())
            .flatten()
        else {
            return Ok(None);
        };
        let unavailable =
            |e: StoreError| SendError::retry(format!("reading push subscriptions: {e}"));
        let Some(vapid) = crate::auth::push::vapid(&self.store)
            .await
            .map_err(unavailable)?
        else {
            return Ok(None);
        };
        let subscriptions = crate::auth::push::subscriptions_of(&self.store, tenant, user)
            .await
            .map_err(unavailable)?;
        Ok(Some(webpush::Recipient {
            vapid,
            subscriptions,
            services: self.senders.push_services.clone(),
            now: self.clock.now().as_millis() / 1000,
            gone: Default::default(),
        }))
    }

    /// The next channel of a failed contact delivery that can take it.
    fn fallback(
        &self,
        dir: &Directory,
        failed: &Delivery,
        now: Timestamp,
        events: &mut Vec<crate::model::event::EventDraft>,
    ) -> Option<Delivery> {
        let contact = dir.contact(&failed.contact_id?.to_string())?;
        let mut payload = failed.payload.clone();
        payload.at = now;
        let mut rest = failed.fallbacks.clone();
        while !rest.is_empty() {
            let reference = rest.remove(0);
            match escalation::delivery(
                dir,
                &reference,
                Some((contact.id, &contact.body)),
                payload.clone(),
                rest.clone(),
                self.clock.new_id(),
                failed.tenant_id,
            ) {
                Ok(d) => {
                    events.push(d.attempt_event("pending", None, None));
                    return Some(d);
                }
                Err(e) => {
                    let mut skipped = failed.clone();
                    skipped.channel = reference;
                    skipped.channel_id = None;
                    skipped.attempts = 0;
                    events.push(skipped.attempt_event("failed", Some(&e), None));
                }
            }
        }
        None
    }

    /// The deliveries this process's courier takes: every kind while it leads, else those its
    /// devices can send (a delivery no process can send still fails at the leader's).
    fn claimable(&self, leading: bool) -> Claimable {
        let senders = self.senders.clone();
        Arc::new(move |d: &Delivery| {
            leading || ChannelKind::parse(&d.kind).is_none_or(|k| senders.can_send(k))
        })
    }

    /// Sends what is due and this process may claim; returns how many deliveries it tried.
    pub async fn deliver_due(&self, leading: bool) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let due = self
            .store
            .claim_deliveries(now, BATCH, self.claimable(leading))
            .await?;
        if due.is_empty() {
            return Ok(0);
        }
        let mut health = self.health.of_batch(&self.store, &due).await?;
        let mut channels: HashMap<(Uuid, String), Option<Channel>> = HashMap::new();
        for d in &due {
            let key = (d.tenant_id, d.channel.clone());
            if let Entry::Vacant(e) = channels.entry(key) {
                e.insert(channel_of(self, d).await?);
            }
        }
        let sends = due.iter().map(|d| {
            let channel = channels
                .get(&(d.tenant_id, d.channel.clone()))
                .cloned()
                .flatten();
            let policy = RetryPolicy::of(channel.as_ref().map_or(&BTreeMap::new(), |c| &c.config));
            let skip = (!d.fallbacks.is_empty())
                .then(|| health.down(d, &policy, now))
                .flatten();
            let span = tracing::debug_span!(
                "delivery",
                id = %d.id,
                channel = %d.channel,
                attempt = d.attempts + 1,
                alert = %d.payload.alert_id.map(|a| a.to_string()).unwrap_or_default(),
            );
            async move {
                let watch = Stopwatch::start();
                let skipped = skip.is_some();
                let outcome = match skip {
                    Some(why) => Err(SendError::retry(why)),
                    None => self.try_send(d, channel.as_ref()).await,
                };
                (outcome, watch.elapsed(), policy, skipped)
            }
            .instrument(span)
        });
        let outcomes = futures_util::future::join_all(sends).await;
        let now = self.clock.now();
        let mut attempts = Vec::new();
        let mut replies = Vec::new();
        for (claimed, (outcome, took, policy, skipped)) in due.into_iter().zip(outcomes) {
            // Whatever the attempt leaves in the outbox is no one's claim.
            let mut d = Delivery {
                claimed_by: None,
                ..claimed.clone()
            };
            d.attempts += 1;
            let latency = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
            let mut events = Vec::new();
            let mut fallback = None;
            // A skip is no new failure: the channel is tried again a minute after its last one.
            let failures = match &outcome {
                _ if skipped => policy.failover_after,
                Err(e) if e.retryable => health.failed(&d, now),
                _ => 0,
            };
            let settled = match outcome {
                Ok(sent) => {
                    health.worked(&d);
                    if let (Some(action), Some(alert)) = (sent.action, d.payload.alert_id) {
                        replies.push((d.tenant_id, alert, action, d.payload.contact.clone()));
                    }
                    let mut event = d.attempt_event("sent", None, latency);
                    if let Some(id) = sent.provider_id {
                        event.payload["providerId"] = serde_json::json!(id);
                    }
                    events.push(event);
                    self.sent.fetch_add(1, Ordering::Relaxed);
                    true
                }
                Err(e)
                    if e.retryable
                        && !d.fallbacks.is_empty()
                        && failures >= policy.failover_after =>
                {
                    d.last_error = Some(e.message.clone());
                    let mut event = d.attempt_event("failed", Some(&e.message), latency);
                    event.payload["failover"] = serde_json::json!(true);
                    events.push(event);
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    let dir = self.directory(d.tenant_id).await?;
                    fallback = self.fallback(&dir, &d, now, &mut events);
                    true
                }
                Err(e) if e.retryable && d.attempts < policy.max_attempts => {
                    d.next_try = now.plus(policy.backoff(d.attempts, jitter()));
                    d.last_error = Some(e.message.clone());
                    events.push(d.attempt_event("failed", Some(&e.message), latency));
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    false
                }
                Err(e) => {
                    d.dead = true;
                    d.last_error = Some(e.message.clone());
                    events.push(d.attempt_event("dead", Some(&e.message), latency));
                    self.dead.fetch_add(1, Ordering::Relaxed);
                    if !d.fallbacks.is_empty() {
                        let dir = self.directory(d.tenant_id).await?;
                        fallback = self.fallback(&dir, &d, now, &mut events);
                    }
                    false
                }
            };
            if d.webhook_id.is_some() {
                // A subscription's own attempts would be events it subscribes to.
                events.clear();
            }
            attempts.push(Attempt {
                claimed,
                delivery: d,
                settled,
                fallback,
                events,
            });
        }
        let tried = attempts.len();
        let changes = health.changes;
        let in_store = matches!(self.health, ChannelHealth::Shared).then(|| changes.clone());
        record(&self.store, attempts, in_store).await?;
        self.health.settle(&changes);
        // After the attempt is recorded: the ack stops the chain this delivery belongs to.
        for (tenant, alert, action, by) in replies {
            if let Err(e) = self.alerts.act(tenant, alert, action, by, "dtmf").await {
                tracing::warn!(%alert, error = %e, "acting on a key pressed on a call failed");
            }
        }
        Ok(tried)
    }
}

impl Worker for Courier {
    fn name(&self) -> &'static str {
        "courier"
    }

    fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.notifier.courier_wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let leading = self.lead.is_taken();
            match self.notifier.deliver_due(leading).await {
                Ok(n) if n >= BATCH => return Wait::For(Duration::ZERO),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "delivering notifications failed");
                    return Wait::For(Duration::from_secs(1));
                }
            }
            let now = self.notifier.clock.now();
            let next = self
                .notifier
                .store
                .next_claimable_delivery(self.notifier.claimable(leading))
                .await;
            match next {
                Ok(Some(next)) => Wait::For(
                    Duration::from_millis(
                        u64::try_from(next.as_millis() - now.as_millis()).unwrap_or(0),
                    )
                    .min(IDLE),
                ),
                _ => Wait::For(IDLE),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Clock, TestClock};

    /// A sent delivery leaves the outbox, a failed one waits for its next try with its
    /// fallback beside it, and one no longer in the outbox stays out.
    #[tokio::test]
    async fn attempts_settle_retry_or_fall_back_and_never_resurrect() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now) = (Uuid::from_u128(7), clock.now());
        let [sent, failed, fallback, gone] =
            [(); 4].map(|()| Delivery::test_notice(clock.new_id(), tenant, now));
        let queued = [sent.clone(), failed.clone()];
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                for d in &queued {
                    tx.put_delivery(d)?;
                }
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        let retry = Delivery {
            attempts: 1,
            next_try: now.plus(Duration::from_secs(30)),
            last_error: Some("503".into()),
            ..failed.clone()
        };
        let attempt = |claimed: &Delivery, delivery: Delivery, settled, fallback| Attempt {
            claimed: claimed.clone(),
            events: vec![delivery.attempt_event("sent", None, None)],
            delivery,
            settled,
            fallback,
        };
        record(
            &store,
            vec![
                attempt(&sent, sent.clone(), true, None),
                attempt(&failed, retry, false, Some(fallback.clone())),
                attempt(&gone, gone.clone(), true, None),
            ],
            None,
        )
        .await
        .unwrap();
        let due_now: Vec<Uuid> = store
            .deliveries_due(now, 10)
            .await
            .unwrap()
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(due_now, [fallback.id]);
        let later = store
            .deliveries_due(now.plus(Duration::from_secs(30)), 10)
            .await
            .unwrap();
        assert_eq!(later.len(), 2);
        let retried = later.iter().find(|d| d.id == failed.id).unwrap();
        assert_eq!(retried.attempts, 1);
        assert_eq!(retried.last_error.as_deref(), Some("503"));
    }

    /// A channel's failures count in a row across a batch's attempts, a success resets them,
    /// and a channel past `failoverAfter` within the last minute is down. Where processes
    /// share the store, the attempts' transaction keeps them, and another process's next
    /// batch finds the channel down.
    #[tokio::test]
    async fn channel_failures_count_in_a_row_and_are_shared_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now) = (Uuid::from_u128(7), clock.now());
        let on = |channel: &str| Delivery {
            channel: channel.into(),
            ..Delivery::test_notice(clock.new_id(), tenant, now)
        };
        let (hook, sms) = (on("hook"), on("sms"));
        let policy = RetryPolicy {
            failover_after: 2,
            ..RetryPolicy::of(&BTreeMap::new())
        };
        for health in [
            ChannelHealth::Local(Mutex::default()),
            ChannelHealth::Shared,
        ] {
            let mut batch = health
                .of_batch(&store, std::slice::from_ref(&hook))
                .await
                .unwrap();
            assert_eq!(batch.failed(&hook, now), 1);
            assert_eq!(batch.down(&hook, &policy, now), None, "one of two");
            batch.worked(&sms);
            assert_eq!(batch.failed(&hook, now), 2);
            assert!(
                batch
                    .down(&hook, &policy, now)
                    .unwrap()
                    .contains("2 failures")
            );
            let shared = matches!(health, ChannelHealth::Shared);
            record(&store, Vec::new(), shared.then(|| batch.changes.clone()))
                .await
                .unwrap();
            health.settle(&batch.changes);

            // The next batch (in the store: any process's) starts from them.
            let next = health
                .of_batch(&store, &[hook.clone(), sms.clone()])
                .await
                .unwrap();
            assert!(next.down(&hook, &policy, now).is_some());
            assert_eq!(next.down(&sms, &policy, now), None);
            let a_minute_on = now.plus(DOWN_FOR);
            assert_eq!(next.down(&hook, &policy, a_minute_on), None, "tried again");
            let mut worked = next;
            worked.worked(&hook);
            record(&store, Vec::new(), shared.then(|| worked.changes.clone()))
                .await
                .unwrap();
            health.settle(&worked.changes);
            let after = health
                .of_batch(&store, std::slice::from_ref(&hook))
                .await
                .unwrap();
            assert!(after.seen.is_empty(), "a success clears them");
        }
    }

    #[test]
    fn backoff_doubles_to_its_cap_with_jitter() {
        let p = RetryPolicy::of(&BTreeMap::new());
        assert_eq!(p.max_attempts, 30);
        assert_eq!(p.backoff(1, 0.0), Duration::from_secs(30));
        assert_eq!(p.backoff(2, 0.0), Duration::from_secs(60));
        assert_eq!(p.backoff(7, 0.0), Duration::from_secs(1920));
        assert_eq!(
            p.backoff(8, 0.0),
            Duration::from_secs(3600),
            "capped at 1 h"
        );
        assert_eq!(p.backoff(29, 0.0), Duration::from_secs(3600));
        assert_eq!(p.backoff(1, 1.0), Duration::from_secs(33));
        assert_eq!(p.backoff(1, -1.0), Duration::from_secs(27));
        let custom = RetryPolicy::of(&BTreeMap::from([
            ("retryMaxAttempts".to_string(), "3".to_string()),
            ("retryBackoffSeconds".to_string(), "1".to_string()),
            ("retryBackoffCapSeconds".to_string(), "2".to_string()),
        ]));
        assert_eq!(custom.max_attempts, 3);
        assert_eq!(custom.backoff(1, 0.0), Duration::from_secs(1));
        assert_eq!(custom.backoff(5, 0.0), Duration::from_secs(2));
    }
}
