//! Calendar downtimes: the main reads each running downtime's `calendarUrl` (an iCalendar
//! feed) every 15 minutes and keeps the windows it gives on the downtime. A read that gives
//! what the downtime holds writes nothing; one that fails keeps the last windows and says why.

use super::Alerting;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::ical;
use crate::model::identity::Actor;
use crate::model::suppression::{CalendarState, Downtime};
use crate::runtime::outbound;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{StoreError, TxResult, Wrote};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How often a feed is read.
pub const REFRESH: Duration = Duration::from_secs(15 * 60);
/// How far ahead a feed's windows are kept, and how many.
const HORIZON: Duration = Duration::from_secs(90 * 86_400);
const WINDOWS_MAX: usize = 500;
/// The most of a feed that is read.
const BODY_MAX: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(20);

/// Reads the calendar downtimes' feeds when due; woken by a downtime's write.
pub struct Calendars {
    alerting: Arc<Alerting>,
    wake: Arc<tokio::sync::Notify>,
    /// When each downtime's feed was last read by this process (a restart reads all again).
    read_at: HashMap<Uuid, Timestamp>,
}

impl Calendars {
    pub fn new(alerting: Arc<Alerting>) -> Self {
        Self {
            alerting,
            wake: Arc::default(),
            read_at: HashMap::new(),
        }
    }

    /// Reads the feeds due; when the next is.
    async fn run(&mut self) -> Result<Option<Timestamp>, StoreError> {
        let now = self.alerting.clock.now();
        let downtimes = self.alerting.store.calendar_downtimes(now).await?;
        self.read_at
            .retain(|id, _| downtimes.iter().any(|d| d.id == *id));
        let mut next: Option<Timestamp> = None;
        for d in downtimes {
            // Never read (new, or its feed changed): now.
            let unread = d.calendar.is_none();
            let due = match self.read_at.get(&d.id) {
                Some(at) if !unread => at.plus(REFRESH),
                _ => now,
            };
            if due > now {
                next = Some(next.map_or(due, |n| n.min(due)));
                continue;
            }
            let Some(url) = d.calendar_url.clone() else {
                continue;
            };
            let read = read(&url, now).await;
            self.keep(&d, read, now).await?;
            self.read_at.insert(d.id, now);
            let again = now.plus(REFRESH);
            next = Some(next.map_or(again, |n| n.min(again)));
        }
        Ok(next)
    }

    /// Keeps what a read gave on the downtime, unless it holds that already or changed feed
    /// since; with its `downtime` event (`action: calendar`) and the system's audit entry.
    async fn keep(
        &self,
        read_from: &Downtime,
        read: Result<ical::Feed, String>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (tenant, id, url) = (
            read_from.tenant_id,
            read_from.id,
            read_from.calendar_url.clone(),
        );
        self.alerting
            .store
            .transact(move |tx| -> TxResult<_> {
                let Some(old) = tx.downtime(tenant, id)? else {
                    return Ok(Wrote::Unchanged(()));
                };
                if old.calendar_url != url {
                    return Ok(Wrote::Unchanged(()));
                }
                let was = old.calendar.clone().unwrap_or_default();
                let state = match read {
                    Ok(feed) => CalendarState {
                        windows: feed.windows,
                        read_at: Some(now),
                        error: None,
                        warnings: feed.warnings,
                    },
                    Err(error) => CalendarState {
                        error: Some(error),
                        read_at: Some(now),
                        ..was.clone()
                    },
                };
                let same = old.calendar.is_some()
                    && state.windows == was.windows
                    && state.error == was.error
                    && state.warnings == was.warnings;
                if same {
                    return Ok(Wrote::Unchanged(()));
                }
                let mut new = old.clone();
                new.calendar = Some(state);
                new.version += 1;
                tx.save_downtime(&new)?;
                let mut event = new.event();
                let state = new.calendar.as_ref();
                event.payload["action"] = serde_json::json!("calendar");
                event.payload["windows"] = serde_json::json!(state.map_or(0, |c| c.windows.len()));
                event.payload["error"] = serde_json::json!(state.and_then(|c| c.error.clone()));
                let audit = AuditDraft::new(
                    now,
                    tenant,
                    &Actor::system("calendar"),
                    "downtime.calendar",
                    format!("downtime/{id}"),
                )
                .before(&old)
                .after(&new);
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await
    }
}

/// The feed at `url` as windows from a day back to `HORIZON` ahead; what failed, in words.
async fn read(url: &str, now: Timestamp) -> Result<ical::Feed, String> {
    let http = outbound::client(TIMEOUT)
        .build()
        .map_err(|e| outbound::error_text(&e))?;
    let mut res = http
        .get(url)
        .header("accept", "text/calendar")
        .send()
        .await
        .map_err(|e| outbound::error_text(&e))?;
    if !res.status().is_success() {
        return Err(format!("the feed answered {}", res.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(|e| outbound::error_text(&e))? {
        if body.len() + chunk.len() > BODY_MAX {
            return Err(format!("the feed is over {BODY_MAX} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&body);
    ical::windows(
        &text,
        now.minus(Duration::from_secs(86_400)),
        now.plus(HORIZON),
        WINDOWS_MAX,
    )
}

impl Worker for Calendars {
    fn name(&self) -> &'static str {
        "calendars"
    }

    fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run().await {
                Ok(Some(next)) => Wait::For(next.since(self.alerting.clock.now())),
                Ok(None) => Wait::UntilWoken,
                Err(e) => {
                    tracing::warn!(error = %e, "calendar downtimes failed");
                    Wait::For(Duration::from_secs(30))
                }
            }
        })
    }
}
