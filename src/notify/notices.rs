//! Notices to the people who look after an alert or a silence (issues 69, 70): a durable
//! consumer (`notices`) of the journal that turns each `shelve`, `silence` or `ack` event
//! meant for someone into deliveries over their channels, committed with its position, so a
//! restart neither loses nor repeats one:
//! - an ack's reminder (with the ack link that answers it), and an ack that expired, was
//!   withdrawn or cleared: the one who acked (the contacts whose `userId` is theirs, else the
//!   contact of their name);
//! - a person's timed shelf about to end: its shelver (the contacts whose `userId` is theirs);
//! - an alert shelving itself because it chatters, and that shelf ending: whom the first step
//!   of the alert's escalation policy pages now, over that step's channels;
//! - a silence starting, about to expire, or ended because it matched nothing: its creator;
//! - a downtime with `noticeBefore` about to start, and ended: whom the first step of its
//!   `escalationPolicy` pages now.
//!
//! Everything else is passed over; the position is saved with the batches that made notices,
//! else at most every `SAVE_EVERY` (a restart reads those events again, and finds nothing).

use super::directory::Directory;
use super::{Notifier, escalation};
use crate::events::{Consumer, Events};
use crate::model::Timestamp;
use crate::model::event::{Event, EventType, Severity};
use crate::model::notify::{Delivery, Message};
use crate::runtime::Stopwatch;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::StoreError;
use crate::store::{TxResult, Wrote};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::Instrument;
use uuid::Uuid;

pub const CONSUMER: &str = "notices";
const BATCH: usize = 256;
/// With events that make no notice, the position moves at most this often.
const SAVE_EVERY: Duration = Duration::from_secs(10);

/// Who a notice is for.
enum To {
    /// The contacts whose `userId` is this user.
    User(Uuid),
    /// The contact of this name (one who acked by a link, an SMS reply or a key).
    Contact(String),
    /// Whom the first step of this escalation policy pages now.
    FirstStep(String),
}

/// One notice: for whom, its title and text, the alert it is about, and whether it carries
/// the alert's ack link (a reminder is answered by acknowledging again).
struct Notice {
    to: To,
    title: String,
    text: String,
    alert: Option<Uuid>,
    ack_link: bool,
}

fn text(payload: &Value, field: &str) -> String {
    payload
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The id in the payload's `field`, if it holds one.
fn id(payload: &Value, field: &str) -> Option<Uuid> {
    payload
        .get(field)
        .and_then(Value::as_str)
        .and_then(|u| u.parse().ok())
}

fn user(payload: &Value) -> Option<Uuid> {
    id(payload, "userId")
}

/// The notice a silence event makes for its creator, if any.
fn silence_notice(payload: &Value) -> Option<Notice> {
    let to = To::User(user(payload)?);
    let comment = text(payload, "comment");
    let expires = text(payload, "expiresAt");
    let (title, text) = match text(payload, "action").as_str() {
        "started" => (
            format!("Your silence has started: {comment}"),
            format!("It holds the pages of the alerts it matches until {expires}."),
        ),
        "expiring" => (
            format!("Your silence expires at {expires}: {comment}"),
            "Extend it if its alerts should stay quiet.".to_string(),
        ),
        "unmatched" => (
            format!("Your silence has ended: {comment}"),
            format!(
                "It matched no alert for {}, so it expired (expireWhenUnmatchedFor).",
                text(payload, "unmatchedFor")
            ),
        ),
        _ => return None,
    };
    Some(Notice {
        to,
        title,
        text,
        alert: None,
        ack_link: false,
    })
}

/// The notice a `downtime` event with `noticeBefore` makes for whom the first step of its
/// policy pages now: ahead of the window, and at its end.
fn downtime_notice(payload: &Value) -> Option<Notice> {
    let policy = Some(text(payload, "escalationPolicy")).filter(|p| !p.is_empty())?;
    let comment = text(payload, "comment");
    let (title, body) = match text(payload, "action").as_str() {
        "starting" => (
            format!(
                "Maintenance starts at {}: {comment}",
                text(payload, "start")
            ),
            format!(
                "Its alerts do not page from then until {}.",
                text(payload, "end")
            ),
        ),
        "ended" => (
            format!("Maintenance ended: {comment}"),
            "What still fails pages now, once.".to_string(),
        ),
        _ => return None,
    };
    Some(Notice {
        to: To::FirstStep(policy),
        title,
        text: body,
        alert: None,
        ack_link: false,
    })
}

/// The notice an `ack` event makes for the one who acked, if any: a reminder, or the ack
/// ending without them (expired, withdrawn, cleared).
fn ack_notice(payload: &Value) -> Option<Notice> {
    let to = match user(payload) {
        Some(user) => To::User(user),
        None => To::Contact(Some(text(payload, "by")).filter(|b| !b.is_empty())?),
    };
    let title = text(payload, "title");
    let step = payload.get("step").and_then(Value::as_u64).unwrap_or(0);
    let (heading, body) = match text(payload, "action").as_str() {
        "reminder" => (
            format!("Reminder: you acknowledged {title}"),
            match payload.get("withdrawAt").and_then(Value::as_str) {
                Some(at) => format!(
                    "It is still open. Acknowledge it again by {at}, or your acknowledgement is withdrawn and it escalates."
                ),
                None => "It is still open.".to_string(),
            },
        ),
        "expired" => (
            format!("Your acknowledgement expired: {title}"),
            format!("The alert is open again and escalates from step {step}."),
        ),
        "withdrawn" => (
            format!("Your acknowledgement was withdrawn: {title}"),
            format!("Nobody answered the reminder; the alert escalates from step {step}."),
        ),
        "cleared" => (
            format!("Your acknowledgement was cleared: {title}"),
            format!(
                "The alert changed and the acknowledgement was not sticky; it escalates from step {step}."
            ),
        ),
        _ => return None,
    };
    Some(Notice {
        to,
        title: heading,
        text: body,
        alert: id(payload, "alertId"),
        ack_link: text(payload, "action") == "reminder",
    })
}

/// The notice a `shelve` event makes, if any; `policy` is the alert's escalation policy.
fn shelve_notice(payload: &Value, policy: impl FnOnce() -> Option<String>) -> Option<Notice> {
    let alert = id(payload, "alertId");
    let title = text(payload, "title");
    let chatter = text(payload, "mode") == "chatter";
    let (to, heading, body) = match text(payload, "action").as_str() {
        "expiring" => (
            To::User(user(payload)?),
            format!("Your shelf ends at {}: {title}", text(payload, "until")),
            "The alert pages again when it ends if it is still open.".to_string(),
        ),
        "shelved" if chatter => (
            To::FirstStep(policy()?),
            format!("Chattering, shelved: {title}"),
            format!(
                "{} It does not page until {}; its changes are still recorded.",
                text(payload, "reason"),
                text(payload, "until")
            ),
        ),
        "unshelved" if chatter => (
            To::FirstStep(policy()?),
            format!("Chatter shelf ended: {title}"),
            if text(payload, "status") == "resolved" {
                "The alert is resolved.".to_string()
            } else {
                "The alert is still firing and pages again.".to_string()
            },
        ),
        _ => return None,
    };
    Some(Notice {
        to,
        title: heading,
        text: body,
        alert,
        ack_link: false,
    })
}

pub struct Notices {
    notifier: Arc<Notifier>,
    events: Arc<Events>,
    consumer: Option<Consumer>,
    wake: Arc<Notify>,
    /// When the position was last saved.
    saved: Option<Stopwatch>,
}

impl Notices {
    pub fn new(notifier: Arc<Notifier>, events: Arc<Events>) -> Self {
        let wake = Arc::new(Notify::new());
        notifier.store.watch_journal(&wake);
        Self {
            notifier,
            events,
            consumer: None,
            wake,
            saved: None,
        }
    }

    /// The notice `event` makes, if any.
    async fn notice(&self, event: &Event) -> Result<Option<Notice>, StoreError> {
        Ok(match event.kind {
            EventType::Silence => silence_notice(&event.payload),
            EventType::Ack => ack_notice(&event.payload),
            EventType::Downtime => downtime_notice(&event.payload),
            EventType::Shelve => {
                let mut policy = None;
                let chatter = text(&event.payload, "mode") == "chatter";
                if let (true, Some(id)) = (chatter, id(&event.payload, "alertId")) {
                    policy = match self.notifier.store.alert(event.tenant_id, id).await {
                        Ok(alert) => alert.escalation_policy,
                        Err(StoreError::NotFound) => None,
                        Err(e) => return Err(e),
                    };
                }
                shelve_notice(&event.payload, || policy)
            }
            _ => None,
        })
    }

    /// The deliveries of `notice`: one per channel of each contact it is for.
    fn deliveries(
        &self,
        dir: &Directory,
        tenant: Uuid,
        notice: &Notice,
        links: &escalation::Links,
        now: Timestamp,
    ) -> Vec<Delivery> {
        let (contacts, step_channels) = match &notice.to {
            To::User(user) => {
                let user = user.to_string();
                let mine = dir
                    .contacts
                    .iter()
                    .filter(|c| c.body.user_id.as_deref() == Some(user.as_str()))
                    .collect();
                (mine, Vec::new())
            }
            To::Contact(name) => {
                let named = dir.contacts.iter().filter(|c| &c.name == name).collect();
                (named, Vec::new())
            }
            To::FirstStep(policy) => {
                let Some(step) = dir.policy(policy).and_then(|p| p.body.steps.first()) else {
                    return Vec::new();
                };
                let contacts = step
                    .notify
                    .as_ref()
                    .and_then(|t| dir.targets(t, now).ok())
                    .unwrap_or_default();
                (contacts, step.channels.clone())
            }
        };
        let mut out = Vec::new();
        for c in contacts {
            let mut message = Message::notice(
                "notice",
                notice.title.clone(),
                notice.text.clone(),
                Severity::Info.as_str(),
                now,
            );
            message.alert_id = notice.alert;
            if let Some(alert) = notice.alert {
                message.alert_url = links.alert_url(alert);
                if notice.ack_link {
                    message.ack_url = links.ack_url(alert, Some(c.id), now);
                }
            }
            let n = &self.notifier;
            out.extend(n.notice_to(dir, tenant, c, &step_channels, message, now));
        }
        out
    }

    async fn run_once(&mut self) -> Result<Wait, StoreError> {
        if self.consumer.is_none() {
            let store = self.notifier.store.clone();
            self.consumer = Some(Consumer::open(CONSUMER, self.events.clone(), store).await?);
        }
        let Some(consumer) = self.consumer.as_mut() else {
            return Ok(Wait::For(Duration::ZERO));
        };
        let batch = consumer.next(BATCH).await?;
        let Some(through) = batch.last().map(|e| e.id) else {
            return Ok(Wait::UntilWoken);
        };
        let span = consumer.batch_span(&batch);
        self.notify_batch(batch, through).instrument(span).await
    }

    /// Queues the notices of a batch read through `through`, with the position.
    async fn notify_batch(
        &mut self,
        batch: Vec<Arc<Event>>,
        through: Uuid,
    ) -> Result<Wait, StoreError> {
        let now = self.notifier.clock.now();
        let mut deliveries = Vec::new();
        for event in &batch {
            let Some(notice) = self.notice(event).await? else {
                continue;
            };
            let dir = self.notifier.directory(event.tenant_id).await?;
            let links = self.notifier.links().await?;
            deliveries.extend(self.deliveries(&dir, event.tenant_id, &notice, links, now));
        }
        let due = self.saved.is_none_or(|at| at.elapsed() >= SAVE_EVERY);
        if deliveries.is_empty() && !due {
            if let Some(c) = self.consumer.as_mut() {
                c.advance(through);
            }
            // Looks again for the rest, and saves the position once it is due.
            return Ok(Wait::For(Duration::ZERO));
        }
        let events: Vec<_> = deliveries
            .iter()
            .map(|d| d.attempt_event("pending", None, None))
            .collect();
        self.notifier
            .store
            .transact(move |tx| -> TxResult<_> {
                for d in &deliveries {
                    tx.put_delivery(d)?;
                }
                tx.save_position(CONSUMER, through)?;
                tx.journal(events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        self.saved = Some(Stopwatch::start());
        if let Some(c) = self.consumer.as_mut() {
            c.advance(through);
        }
        Ok(Wait::For(Duration::ZERO))
    }
}

impl Worker for Notices {
    fn name(&self) -> &'static str {
        "notices"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run_once().await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "notices failed; retrying");
                    self.consumer = None;
                    Wait::For(Duration::from_secs(1))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_shelf_about_to_end_is_told_to_its_shelver_and_a_chatter_shelf_to_the_first_step() {
        let user = Uuid::from_u128(5);
        let expiring = json!({"action": "expiring", "userId": user, "title": "pump", "until": "t"});
        let n = shelve_notice(&expiring, || None).unwrap();
        assert!(matches!(n.to, To::User(u) if u == user));
        assert!(n.title.contains("pump"), "{}", n.title);
        let chatter = json!({"action": "shelved", "mode": "chatter", "title": "pump", "reason": "chattering: 4 state changes within 1m"});
        let n = shelve_notice(&chatter, || Some("page".into())).unwrap();
        assert!(matches!(n.to, To::FirstStep(ref p) if p == "page"));
        assert!(n.text.starts_with("chattering"), "{}", n.text);
        let ended = json!({"action": "unshelved", "mode": "chatter", "status": "resolved", "title": "pump"});
        let n = shelve_notice(&ended, || Some("page".into())).unwrap();
        assert_eq!(n.text, "The alert is resolved.");
        let by_hand = json!({"action": "shelved", "mode": "timed", "userId": user});
        assert!(
            shelve_notice(&by_hand, || None).is_none(),
            "the shelver knows"
        );
        assert!(
            shelve_notice(&chatter, || None).is_none(),
            "no policy, nobody to tell"
        );
    }

    #[test]
    fn a_silence_tells_its_creator_when_it_starts_expires_soon_or_ends_unmatched() {
        let user = Uuid::from_u128(9);
        for action in ["started", "expiring", "unmatched"] {
            let p = json!({"action": action, "userId": user, "comment": "pump swap"});
            let n = silence_notice(&p).unwrap();
            assert!(matches!(n.to, To::User(u) if u == user));
            assert!(n.title.contains("pump swap"), "{}", n.title);
        }
        assert!(silence_notice(&json!({"action": "created", "userId": user})).is_none());
        assert!(
            silence_notice(&json!({"action": "started"})).is_none(),
            "no creator"
        );
    }
}
