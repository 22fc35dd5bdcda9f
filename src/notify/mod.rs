//! Notification: the escalation engine (persisted step timers fired by the `escalator`
//! worker), on-call schedules and overrides, channels, the outbox sent by the `courier`
//! worker with retries, dead letters and ack links. Alerting arms and disarms the chains in
//! the transactions of alert changes; this module only reads alerts.

pub mod acklink;
pub mod channels;
mod courier;
pub mod digests;
pub mod directory;
pub mod escalation;
mod handoff;
pub mod notices;
pub mod schedule;
pub mod status;
pub mod webhooks;

pub use channels::Senders;
pub use courier::Courier;
pub use escalation::Links;
pub use handoff::Handoffs;
pub use webhooks::WebhookDispatcher;

use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::alert::Alert;
use crate::model::audit::AuditDraft;
use crate::model::config::Invalid;
use crate::model::event::Severity;
use crate::model::health::NotifyHealth;
use crate::model::identity::Actor;
use crate::model::noise::NoiseSettings;
use crate::model::notify::{
    Channel, Contact, ContactDisclosure, Delivery, Message, OnCallNow, OnCallShift, Override,
    OverrideBody, TestSend, mask,
};
use crate::runtime::Locked;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{AlertActions, SecretSource};
use crate::store::{Holding, Store, StoreError};
use crate::store::{TxResult, Wrote};
use directory::{Directory, contact_target};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OnceCell, watch};
use uuid::Uuid;

/// How far `timeline` and `stats` look by default, and at most.
const TIMELINE_DAYS: u64 = 14;
const STATS_DAYS: u64 = 30;
const MAX_RANGE_DAYS: u64 = 366;
/// The iCalendar feed covers a week back and 60 days ahead.
const ICS_BACK_DAYS: u64 = 7;
const ICS_AHEAD_DAYS: u64 = 60;
/// The escalator and the courier look for due work at least this often.
const IDLE: Duration = Duration::from_secs(60);
/// Escalation timers fired per step of the escalator.
const TIMERS_PER_STEP: usize = 200;

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// A channel test the provider refused (502 `svc:notify/test-failed`).
    #[error("{0}")]
    TestFailed(String),
    /// The contact, schedule, override, policy or dead letter named does not exist in the
    /// tenant.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl crate::store::TxAbort for NotifyError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            NotifyError::Store(e) => Some(e),
            _ => None,
        }
    }
}

fn invalid(field: &str, detail: impl Into<String>) -> NotifyError {
    NotifyError::Invalid(Invalid {
        field: field.into(),
        detail: detail.into(),
    })
}

/// A valid ack link: the alert it is for and the person it was sent to.
pub struct AckLink {
    pub alert: Alert,
    pub by: String,
}

/// How much of a provider's answer a channel test quotes.
const TEST_EXCERPT: usize = 120;

pub struct Notifier {
    store: Arc<Store>,
    clock: SharedClock,
    secrets: Arc<dyn SecretSource>,
    alerts: Arc<dyn AlertActions>,
    senders: Senders,
    base_url: String,
    links: OnceCell<Links>,
    /// The instance's noise controls: which alerts flood together, and how often their digest
    /// goes out (a tenant's own are read in the transaction that applies them).
    noise: Arc<NoiseSettings>,
    /// Wake the courier and the escalator: the application has the store notify them after
    /// commits that queue a delivery or arm a step (`Change::Deliveries`, `Change::Escalations`).
    courier_wake: Arc<Notify>,
    escalations_wake: Arc<Notify>,
    /// Directories per tenant, for the catalog generation they were read at (overrides are
    /// catalog writes too).
    directories: Mutex<(u64, HashMap<Uuid, Arc<Directory>>)>,
    health: courier::ChannelHealth,
    /// Delivery attempts since start, by outcome.
    sent: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    /// Status page subscriptions per client address: 5, then one each 10 minutes.
    subscribe_limit: crate::auth::ratelimit::RateLimiter,
}

impl Notifier {
    /// `message` to contact `c`, once per channel: the step's `channels` if it names any, else
    /// the contact's preferred ones (with their fallbacks). A channel it cannot reach is logged.
    pub(super) fn notice_to(
        &self,
        dir: &Directory,
        tenant: Uuid,
        c: &directory::Named<crate::model::notify::Contact>,
        channels: &[String],
        mut message: crate::model::notify::Message,
        now: Timestamp,
    ) -> Vec<Delivery> {
        message.contact = c.name.clone();
        let (send, fallbacks) = dir.channel_plan(&c.body, Severity::Info, channels, now);
        let mut out = Vec::new();
        for reference in send {
            match escalation::delivery(
                dir,
                &reference,
                Some((c.id, &c.body)),
                message.clone(),
                fallbacks.clone(),
                self.clock.new_id(),
                tenant,
            ) {
                Ok(d) => out.push(d),
                Err(e) => {
                    tracing::warn!(contact = %c.name, kind = %message.kind, error = %e, "notice not sent")
                }
            }
        }
        out
    }

    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        secrets: Arc<dyn SecretSource>,
        alerts: Arc<dyn AlertActions>,
        senders: Senders,
        base_url: String,
        noise: Arc<NoiseSettings>,
    ) -> Arc<Self> {
        Arc::new(Self {
            health: courier::ChannelHealth::new(&store),
            subscribe_limit: crate::auth::ratelimit::RateLimiter::new(
                "status-subscribe",
                5,
                Duration::from_secs(600),
                &store,
            ),
            store,
            clock,
            secrets,
            alerts,
            senders,
            base_url,
            links: OnceCell::new(),
            noise,
            courier_wake: Arc::new(Notify::new()),
            escalations_wake: Arc::new(Notify::new()),
            directories: Mutex::default(),
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dead: AtomicU64::new(0),
        })
    }

    /// The links of messages, with the installation's ack-link key (made on first use).
    pub async fn links(&self) -> Result<&Links, StoreError> {
        self.links
            .get_or_try_init(|| async {
                Ok(Links {
                    base_url: self.base_url.clone(),
                    key: self.store.install_key(acklink::KEY_NAME).await?,
                })
            })
            .await
    }

    /// For `/system/health`: armed escalation timers, the outbox, dead letters, and delivery
    /// attempts since start by outcome.
    pub async fn health(&self) -> Result<NotifyHealth, StoreError> {
        let (escalation_timers, outbox, dead_letters) = self.store.notify_counts().await?;
        Ok(NotifyHealth {
            escalation_timers,
            outbox,
            dead_letters,
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dead: self.dead.load(Ordering::Relaxed),
        })
    }

    /// The tenant's people and channels as of the latest catalog write.
    /// Everything held about contact `name` (a data subject's disclosure): the contact, the
    /// audit entries of its changes, the schedules naming it, and the `notification` events of
    /// deliveries to it (read from the event store, at most `EXPORT_EVENTS` of the tenant's
    /// notification events, newest first).
    pub async fn contact_disclosure(
        &self,
        p: &Principal,
        name: &str,
        events: &crate::events::Events,
    ) -> Result<ContactDisclosure, NotifyError> {
        const EXPORT_EVENTS: usize = 100_000;
        const PAGE: usize = 1000;
        let dir = self.directory(p.tenant).await?;
        let contact = dir.contact(name).ok_or(NotifyError::NotFound)?;
        let audit = self
            .store
            .audit_entries(
                crate::model::audit::AuditFilter {
                    tenant_id: Some(p.tenant),
                    resource: Some(format!("contacts/{}", contact.name)),
                    ..Default::default()
                },
                PAGE,
            )
            .await?;
        let quoted = Value::String(contact.name.clone()).to_string();
        let schedules = dir
            .schedules
            .iter()
            .filter(|s| s.doc.to_string().contains(&quoted))
            .map(|s| s.name.clone())
            .collect();
        let id = contact.id.to_string();
        let filter = crate::model::event::EventFilter {
            tenant_id: p.tenant,
            types: vec![crate::model::event::EventType::Notification],
            ..Default::default()
        };
        let (mut notifications, mut cursor, mut read) = (Vec::new(), None, 0);
        while read < EXPORT_EVENTS {
            let page = events.list(filter.clone(), cursor, PAGE).await?;
            read += page.len();
            cursor = page.last().map(|e| e.id);
            let full = page.len() == PAGE;
            notifications.extend(page.into_iter().filter(|e| {
                e.payload.get("contactId").and_then(Value::as_str) == Some(id.as_str())
            }));
            if !full {
                break;
            }
        }
        Ok(ContactDisclosure {
            generated_at: self.clock.now(),
            contact: contact.doc.clone(),
            audit,
            schedules,
            notifications,
        })
    }

    pub async fn directory(&self, tenant: Uuid) -> Result<Arc<Directory>, StoreError> {
        let generation = self.store.catalog_generation();
        {
            let cache = self.directories.locked();
            if cache.0 == generation
                && let Some(d) = cache.1.get(&tenant)
            {
                return Ok(d.clone());
            }
        }
        let dir = Arc::new(Directory::load(&self.store, tenant).await?);
        let mut cache = self.directories.locked();
        if cache.0 != generation {
            *cache = (generation, HashMap::new());
        }
        cache.1.insert(tenant, dir.clone());
        Ok(dir)
    }

    fn audit(&self, p: &Principal, actor: &Actor, action: &str, resource: String) -> AuditDraft {
        AuditDraft::new(self.clock.now(), p.tenant, actor, action, resource)
    }

    async fn schedule_of(
        &self,
        tenant: Uuid,
        name: &str,
    ) -> Result<
        (
            Arc<Directory>,
            directory::Named<crate::model::notify::Schedule>,
        ),
        NotifyError,
    > {
        let dir = self.directory(tenant).await?;
        let schedule = dir
            .schedules
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or(NotifyError::NotFound)?;
        Ok((dir, schedule))
    }

    /// `GET /oncall/now` (CONTRACT 3): per schedule the shift now and its contacts.
    pub async fn on_call_now(&self, p: &Principal) -> Result<Vec<OnCallNow>, NotifyError> {
        let dir = self.directory(p.tenant).await?;
        let now = self.clock.now();
        Ok(dir
            .schedules
            .iter()
            .map(|s| {
                let shifts: Vec<OnCallShift> = dir.roster(s).at(now, false).into_iter().collect();
                let contacts: Vec<Value> = shifts
                    .iter()
                    .filter_map(|sh| dir.contact(&sh.contact_id))
                    .map(|c| c.doc.clone())
                    .collect();
                OnCallNow {
                    schedule: s.name.clone(),
                    shifts,
                    contacts,
                }
            })
            .collect())
    }

    /// The contact that is the caller (its `userId` is the caller's user), with its name:
    /// whose shifts are "mine", whose shift notices they see, and who takes a shift over.
    pub async fn own_contact(
        &self,
        p: &Principal,
    ) -> Result<Option<(String, Contact)>, NotifyError> {
        let Some(user) = p.user else {
            return Ok(None);
        };
        let dir = self.directory(p.tenant).await?;
        let user = user.to_string();
        Ok(dir
            .contacts
            .iter()
            .find(|c| c.body.user_id.as_deref() == Some(user.as_str()))
            .map(|c| (c.name.clone(), c.body.clone())))
    }

    /// The range asked for, defaulting to `now .. now + default_days`.
    fn range(
        &self,
        from: Option<&str>,
        to: Option<&str>,
        default_days: u64,
    ) -> Result<(Timestamp, Timestamp), NotifyError> {
        let parse = |s: Option<&str>, field: &str| -> Result<Option<Timestamp>, NotifyError> {
            s.filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<Timestamp>()
                        .map_err(|_| invalid(field, format!("{field} must be an RFC 3339 time")))
                })
                .transpose()
        };
        let from = parse(from, "from")?.unwrap_or_else(|| self.clock.now());
        let to = parse(to, "to")?.unwrap_or_else(|| from.plus(days(default_days)));
        if to <= from {
            return Err(invalid("to", "to must be after from"));
        }
        if to > from.plus(days(MAX_RANGE_DAYS)) {
            return Err(invalid("to", "the range is at most 366 days"));
        }
        Ok((from, to))
    }

    pub async fn timeline(
        &self,
        p: &Principal,
        name: &str,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<OnCallShift>, NotifyError> {
        let (from, to) = self.range(from, to, TIMELINE_DAYS)?;
        let (dir, schedule) = self.schedule_of(p.tenant, name).await?;
        Ok(dir.roster(&schedule).timeline(from, to))
    }

    pub async fn stats(
        &self,
        p: &Principal,
        name: &str,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<Value>, NotifyError> {
        let (from, to) = self.range(from, to, STATS_DAYS)?;
        let (dir, schedule) = self.schedule_of(p.tenant, name).await?;
        let roster = dir.roster(&schedule);
        Ok(roster.stats(&roster.timeline(from, to)))
    }

    /// The schedule's iCalendar feed, a week back and 60 days ahead.
    pub async fn ics(&self, p: &Principal, name: &str) -> Result<String, NotifyError> {
        let now = self.clock.now();
        let from = Timestamp(now.0 - days(ICS_BACK_DAYS));
        let (dir, schedule) = self.schedule_of(p.tenant, name).await?;
        let shifts = dir
            .roster(&schedule)
            .timeline(from, now.plus(days(ICS_AHEAD_DAYS)));
        Ok(schedule::ics(
            &schedule.name,
            &schedule.id.to_string(),
            &shifts,
            now,
        ))
    }

    pub async fn overrides(&self, p: &Principal, name: &str) -> Result<Vec<Override>, NotifyError> {
        let (dir, schedule) = self.schedule_of(p.tenant, name).await?;
        Ok(dir.overrides(schedule.id))
    }

    pub async fn create_override(
        &self,
        p: &Principal,
        actor: &Actor,
        name: &str,
        body: OverrideBody,
    ) -> Result<Override, NotifyError> {
        if let Some(other) = body.schedule.as_deref().filter(|s| *s != name) {
            return Err(invalid(
                "override",
                format!("the body names schedule {other:?}, the path {name:?}"),
            ));
        }
        let (dir, schedule) = self.schedule_of(p.tenant, name).await?;
        let time = |v: Option<String>, field: &str| -> Result<Timestamp, NotifyError> {
            v.ok_or_else(|| invalid("override", format!("{field} is required")))?
                .parse()
                .map_err(|_| invalid("override", format!("{field} must be an RFC 3339 time")))
        };
        let contact = body
            .contact_id
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| invalid("override", "contactId is required"))?;
        let contact = dir
            .contact(&contact)
            .ok_or_else(|| invalid("override", format!("contact {contact:?} does not exist")))?;
        let (start, end) = (time(body.start, "start")?, time(body.end, "end")?);
        if end <= start {
            return Err(invalid("override", "end must be after start"));
        }
        let id = self.clock.new_id();
        let o = Override {
            id,
            tenant_id: p.tenant,
            schedule_id: schedule.id,
            contact_id: contact.id.to_string(),
            start,
            end,
            reason: body.reason.filter(|r| !r.is_empty()),
            created_at: self.clock.now(),
            created_by: p.name.clone(),
        };
        let audit = self.audit(
            p,
            actor,
            "override.create",
            format!("schedule/{name}/override/{id}"),
        );
        let o = self
            .store
            .transact(move |tx| -> TxResult<_> {
                tx.put_override(&o)?;
                tx.record([audit.after(&o)], Vec::new())?;
                Ok(Wrote::Changed(o))
            })
            .await?;
        Ok(o)
    }

    pub async fn delete_override(
        &self,
        p: &Principal,
        actor: &Actor,
        name: &str,
        id: Uuid,
    ) -> Result<(), NotifyError> {
        let (_, schedule) = self.schedule_of(p.tenant, name).await?;
        let audit = self.audit(
            p,
            actor,
            "override.delete",
            format!("schedule/{name}/override/{id}"),
        );
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, NotifyError> {
                let old = tx
                    .remove_override(tenant, schedule.id, id)?
                    .ok_or(NotifyError::NotFound)?;
                tx.record([audit.before(&old)], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// `:simulate`: the policy's steps for an alert of `severity` opened now.
    pub async fn simulate(
        &self,
        p: &Principal,
        name: String,
        severity: Option<String>,
    ) -> Result<Value, NotifyError> {
        let severity = match severity.as_deref() {
            None | Some("") => Severity::Critical,
            Some(s) => s
                .parse()
                .map_err(|_| invalid("severity", "severity must be critical, warning or info"))?,
        };
        let dir = self.directory(p.tenant).await?;
        let policy = dir.policy(&name).ok_or(NotifyError::NotFound)?;
        let steps = escalation::simulate(&dir, &policy.body, severity, self.clock.now());
        Ok(json!({"policy": policy.name, "steps": steps}))
    }

    pub async fn dead_letters(
        &self,
        p: &Principal,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Delivery>, NotifyError> {
        let mut letters = self.store.dead_letters(p.tenant, before, limit).await?;
        // An ack link acts for whoever holds it: readers who may not acknowledge never see one.
        if !p.allows("alerts:ack") {
            for d in letters.iter_mut().filter(|d| !d.payload.ack_url.is_empty()) {
                d.payload.ack_url = mask(&d.payload.ack_url);
            }
        }
        Ok(letters)
    }

    /// `:replay`: the dead letter goes back to the outbox, due now.
    pub async fn replay(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<Delivery, NotifyError> {
        let audit = self.audit(p, actor, "notification.replay", format!("dead-letter/{id}"));
        let now = self.clock.now();
        let tenant = p.tenant;
        let d = self
            .store
            .transact(move |tx| -> TxResult<_, NotifyError> {
                let mut d = tx
                    .take_dead_letter(tenant, id)?
                    .ok_or(NotifyError::NotFound)?;
                let audit = audit.before(&d);
                d.dead = false;
                d.attempts = 0;
                d.next_try = now;
                d.last_error = None;
                tx.put_delivery(&d)?;
                tx.record([audit.after(&d)], Vec::new())?;
                Ok(Wrote::Changed(d))
            })
            .await?;
        Ok(d)
    }

    /// `:test-notification`: one message through the channel now, its outcome the answer.
    pub async fn test_channel(
        &self,
        p: &Principal,
        actor: &Actor,
        name: String,
        body: TestSend,
    ) -> Result<Value, NotifyError> {
        let doc = self.store.doc(p.tenant, "channels", name, false).await?;
        // A test sends (or runs a script) at a person's asking: audited, whatever it answers.
        let audit = self.audit(p, actor, "channel.test", format!("channels/{}", doc.name));
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        let channel: Channel =
            serde_json::from_str(&doc.body).map_err(|e| StoreError::Internal(e.to_string()))?;
        let target = body.target.filter(|t| !t.trim().is_empty());
        if target.is_none()
            && contact_target(&channel.kind, &crate::model::notify::Contact::default()).is_some()
        {
            return Err(invalid(
                "target",
                format!("a {} channel needs a target to test", channel.kind),
            ));
        }
        let message = Message::notice(
            "test",
            format!("test of channel {} by {}", doc.name, p.name),
            "If you can read this, the channel works.".into(),
            Severity::Info.as_str(),
            self.clock.now(),
        );
        let delivery = Delivery {
            channel_id: Some(doc.id),
            channel: doc.name.clone(),
            target: target.unwrap_or_default(),
            ..Delivery::new(self.clock.new_id(), p.tenant, &channel.kind, message)
        };
        let opened = channels::open_secrets(&self.secrets, p.tenant, &channel.config)
            .await
            .map_err(|e| NotifyError::TestFailed(e.message))?;
        let kind =
            channels::kind_of(&channel.kind).map_err(|e| NotifyError::TestFailed(e.message))?;
        let config =
            channels::config_of(kind, &opened).map_err(|e| NotifyError::TestFailed(e.message))?;
        let speech = self.speech(p.tenant, &config).await;
        let push = self
            .push_recipient(p.tenant, kind, &delivery.target)
            .await
            .map_err(|e| NotifyError::TestFailed(e.message))?;
        let out = channels::Outgoing {
            config: &config,
            template: channel.template.as_deref(),
            delivery: &delivery,
            speech: speech.as_ref(),
            push: push.as_ref(),
        };
        // A test answers with a short excerpt of what the provider said, never its whole answer.
        let excerpt = |text: &str| text.chars().take(TEST_EXCERPT).collect::<String>();
        match opened.masked(channels::send(&self.senders, &out).await) {
            Ok(sent) => Ok(json!({"result": "sent", "detail": excerpt(&sent.detail)})),
            Err(e) => Err(NotifyError::TestFailed(excerpt(&e.message))),
        }
    }

    /// The alert of a genuine, unexpired ack link whose alert is still open or acknowledged,
    /// and who the link was sent to; `None` for any other link.
    pub async fn ack_claim(&self, token: &str) -> Result<Option<AckLink>, NotifyError> {
        let links = self.links().await?;
        let Some(claim) = acklink::verify(&links.key, token, self.clock.now()) else {
            return Ok(None);
        };
        for tenant in self.store.tenants().await? {
            match self.store.alert(tenant.id, claim.alert).await {
                Ok(alert) if alert.status.is_active() => {
                    let by = match claim.contact {
                        Some(c) => self
                            .directory(tenant.id)
                            .await?
                            .contact(&c.to_string())
                            .map_or_else(|| c.to_string(), |c| c.name.clone()),
                        None => "ack link".to_string(),
                    };
                    return Ok(Some(AckLink { alert, by }));
                }
                Ok(_) => return Ok(None),
                Err(StoreError::NotFound) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// Fires the escalation timers due now of the alerts whose partitions `holding` holds, in
    /// one transaction; returns how many it looked at. Another process firing one of them too
    /// (a partition moving) is harmless: a firing commits only for the timer it was planned for.
    pub async fn fire_due(&self, holding: Arc<Holding>) -> Result<usize, NotifyError> {
        let now = self.clock.now();
        let timers = self
            .store
            .escalations_due(now, TIMERS_PER_STEP, holding)
            .await?;
        if timers.is_empty() {
            return Ok(0);
        }
        let links = self.links().await?.clone();
        let mut alerts: HashMap<Uuid, Alert> = self
            .store
            .alerts_by_id(timers.iter().map(|t| (t.tenant_id, t.alert_id)).collect())
            .await?
            .into_iter()
            .map(|a| (a.id, a))
            .collect();
        // A page says how many alerts its object holds back ("and 23 dependents").
        let tenants: std::collections::BTreeSet<Uuid> = alerts
            .values()
            .filter(|a| a.object_id.is_some())
            .map(|a| a.tenant_id)
            .collect();
        for tenant in tenants {
            let held = self.store.held_back(tenant).await?;
            for a in alerts.values_mut().filter(|a| a.tenant_id == tenant) {
                a.dependents = a.object_id.and_then(|o| held.get(&o)).copied().unwrap_or(0);
            }
        }
        let mut firings = Vec::new();
        for timer in &timers {
            let alert = alerts.get(&timer.alert_id);
            let dir = self.directory(timer.tenant_id).await?;
            let policy = alert
                .and_then(|a| a.escalation_policy.as_deref())
                .and_then(|name| dir.policy(name))
                .map(|p| &p.body);
            let ctx = escalation::Ctx {
                dir: &dir,
                links: &links,
                now,
                new_id: &|| self.clock.new_id(),
            };
            firings.push((timer.clone(), escalation::plan(&ctx, alert, policy, timer)));
        }
        escalation::commit(&self.store, firings, self.noise.clone()).await?;
        Ok(timers.len())
    }
}

/// Fires escalation steps as they fall due, in every process for the alerts of the partitions
/// of the event stream it leads (`store::partitions`), as the alert engine decides them; woken
/// by the store after writes that arm a chain and when its partitions change, otherwise
/// sleeping until its next timer.
pub struct Escalator {
    pub notifier: Arc<Notifier>,
    pub held: watch::Receiver<Arc<Holding>>,
}

impl Worker for Escalator {
    fn name(&self) -> &'static str {
        "escalator"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.notifier.escalations_wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let holding = self.held.borrow_and_update().clone();
            match self.notifier.fire_due(holding.clone()).await {
                Ok(n) if n >= TIMERS_PER_STEP => return Wait::For(Duration::ZERO),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "escalation failed");
                    return Wait::For(Duration::from_secs(1));
                }
            }
            let now = self.notifier.clock.now();
            match self.notifier.store.next_escalation_due(holding).await {
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

impl crate::runtime::Outbox for Notifier {
    fn compose_mails(
        &self,
        tenant: Uuid,
        channel: String,
        to: Vec<String>,
        mail: crate::runtime::Mail,
    ) -> crate::runtime::PortFuture<'_, Vec<Delivery>> {
        Box::pin(async move {
            let mails = to.into_iter().map(|t| (t, mail.clone())).collect();
            self.email_deliveries(tenant, channel, mails).await
        })
    }
}

impl crate::runtime::OnCall for Notifier {
    fn on_call_now(
        &self,
        tenant: Uuid,
    ) -> crate::runtime::PortFuture<'_, crate::runtime::OnCallRoster> {
        Box::pin(async move {
            let dir = self.directory(tenant).await?;
            let now = self.clock.now();
            Ok(dir
                .schedules
                .iter()
                .map(|s| {
                    let names = dir
                        .roster(s)
                        .at(now, false)
                        .into_iter()
                        .filter_map(|sh| dir.contact(&sh.contact_id))
                        .filter_map(|c| c.doc["name"].as_str().map(str::to_string))
                        .collect();
                    (s.name.clone(), names)
                })
                .collect())
        })
    }
}
