//! Shift handoffs: when the person a schedule puts on call changes (a rotation's handover, an
//! override starting or ending), the incoming person is told through their preferred channel,
//! as PagerDuty does and the reference never built. Each handoff is recorded with its
//! deliveries in one transaction, so a restart neither repeats nor loses one; a handover more
//! than `GRACE` old (the service was down through it) is recorded without a message.

use super::{IDLE, Notifier, escalation};
use crate::model::Timestamp;
use crate::model::event::Severity;
use crate::model::notify::Message;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::StoreError;
use crate::store::{TxResult, Wrote};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const GRACE: Duration = Duration::from_secs(600);
const DAY: Duration = Duration::from_secs(86_400);

impl Notifier {
    /// Tells every incoming on-call person not told yet; returns the next handover within a
    /// day, if any.
    pub async fn announce_handoffs(&self) -> Result<Option<Timestamp>, StoreError> {
        let now = self.clock.now();
        let mut next: Option<Timestamp> = None;
        for tenant in self.store.tenants().await? {
            let dir = self.directory(tenant.id).await?;
            for schedule in &dir.schedules {
                let roster = dir.roster(schedule);
                for s in roster.timeline(now, now.plus(DAY)) {
                    for t in [s.start, s.end] {
                        if t > now {
                            next = Some(next.map_or(t, |n| n.min(t)));
                        }
                    }
                }
                let back = Timestamp(now.0 - DAY);
                let Some(current) = roster
                    .timeline(back, now.plus(Duration::from_millis(1)))
                    .pop()
                    .filter(|s| s.end > now)
                else {
                    continue;
                };
                let announced = self.store.handoff_announced(tenant.id, schedule.id).await?;
                // A shift older than the day looked back is clipped to its start: told already.
                if announced.is_some_and(|a| a >= current.start || current.start <= back) {
                    continue;
                }
                let mut deliveries = Vec::new();
                let contact = dir.contact(&current.contact_id);
                if let (Some(c), true) = (contact, current.start.plus(GRACE) >= now) {
                    let (send, fallbacks) = dir.channel_plan(&c.body, Severity::Info, &[], now);
                    for reference in send {
                        let mut message = Message::notice(
                            "handoff",
                            format!(
                                "You are on call for {} until {}",
                                schedule.name, current.end
                            ),
                            format!(
                                "Your shift on schedule {} started at {}{}.",
                                schedule.name,
                                current.start,
                                if current.is_override {
                                    " (an override)"
                                } else {
                                    ""
                                }
                            ),
                            Severity::Info.as_str(),
                            now,
                        );
                        message.contact = c.name.clone();
                        let made = escalation::delivery(
                            &dir,
                            &reference,
                            Some((c.id, &c.body)),
                            message,
                            fallbacks.clone(),
                            self.clock.new_id(),
                            tenant.id,
                        );
                        match made {
                            Ok(d) => deliveries.push(d),
                            Err(e) => {
                                tracing::warn!(schedule = %schedule.name, error = %e, "handoff not sent")
                            }
                        }
                    }
                }
                let events: Vec<_> = deliveries
                    .iter()
                    .map(|d| d.attempt_event("pending", None, None))
                    .collect();
                let (tenant, schedule, start) = (tenant.id, schedule.id, current.start);
                self.store
                    .transact(move |tx| -> TxResult<_> {
                        if events.is_empty() {
                            tx.unrecorded("a handoff with nobody to tell");
                        }
                        tx.set_handoff(tenant, schedule, start)?;
                        for d in &deliveries {
                            tx.put_delivery(d)?;
                        }
                        tx.journal(events)?;
                        Ok(Wrote::Changed(()))
                    })
                    .await?;
            }
        }
        Ok(next)
    }
}

/// Announces handoffs at each handover; woken by catalog writes (a new override or rotation).
pub struct Handoffs {
    notifier: Arc<Notifier>,
    wake: Arc<Notify>,
}

impl Handoffs {
    pub fn new(notifier: Arc<Notifier>) -> Self {
        let wake = Arc::new(Notify::new());
        notifier
            .store
            .watch_commits(crate::store::Change::Catalog, wake.clone());
        Self { notifier, wake }
    }
}

impl Worker for Handoffs {
    fn name(&self) -> &'static str {
        "handoffs"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.notifier.announce_handoffs().await {
                Ok(Some(next)) => {
                    let now = self.notifier.clock.now();
                    let ms = u64::try_from(next.as_millis() - now.as_millis()).unwrap_or(0);
                    Wait::For(Duration::from_millis(ms).min(IDLE))
                }
                Ok(None) => Wait::For(IDLE),
                Err(e) => {
                    tracing::warn!(error = %e, "handoff announcements failed");
                    Wait::For(Duration::from_secs(5))
                }
            }
        })
    }
}
