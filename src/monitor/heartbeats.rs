//! Heartbeats: definitions, beats, and the sweep that reports a missed one once and its
//! recovery once (`heartbeat_missed`, the recovery with `resolve: true` and severity ok).

use crate::auth::Principal;
use crate::model::GoDuration;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::config::{Invalid, check_name};
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::heartbeat::{Heartbeat, HeartbeatBody};
use crate::model::identity::Actor;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The longest the sweep sleeps without a definition or a beat to wake it: a bound, should a
/// wake ever be missed. It otherwise sleeps until the next heartbeat is due (SPEC 3's 5 s sweep,
/// to the millisecond, and no wake-ups in between).
pub const MAX_SLEEP: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// No heartbeat of this name in the tenant.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl crate::store::TxAbort for HeartbeatError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            HeartbeatError::Store(e) => Some(e),
            _ => None,
        }
    }
}

pub struct Heartbeats {
    store: Arc<Store>,
    clock: SharedClock,
    /// Wakes the sweep when a definition changes (its next due time may be sooner).
    wake: Arc<Notify>,
}

fn severity(s: &str) -> Severity {
    match s {
        "critical" => Severity::Critical,
        "info" => Severity::Info,
        _ => Severity::Warning,
    }
}

impl Heartbeats {
    pub fn new(store: Arc<Store>, clock: SharedClock) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            wake: Arc::new(Notify::new()),
        })
    }

    /// Creates or replaces a definition by name.
    pub async fn upsert(
        &self,
        p: &Principal,
        actor: &Actor,
        body: HeartbeatBody,
    ) -> Result<Heartbeat, HeartbeatError> {
        check_name(&body.name).map_err(HeartbeatError::Invalid)?;
        let invalid = |detail: &str| {
            HeartbeatError::Invalid(Invalid {
                field: "heartbeat".into(),
                detail: detail.into(),
            })
        };
        let expect_every = body
            .expect_every
            .filter(|d| !d.0.is_zero())
            .ok_or_else(|| invalid("expectEvery is required and must be positive"))?;
        let severity = body.severity.unwrap_or_else(|| "warning".into());
        if !["critical", "warning", "info"].contains(&severity.as_str()) {
            return Err(invalid("severity must be critical, warning or info"));
        }
        let now = self.clock.now();
        let h = Heartbeat {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            name: body.name.clone(),
            expect_every,
            grace: body.grace.unwrap_or(GoDuration::from_secs(0)),
            labels: body.labels,
            severity,
            missing: false,
            last_beat: None,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        let (audit, event) = record(AuditDraft::new(
            now,
            p.tenant,
            actor,
            "heartbeat.upsert",
            format!("heartbeat/{}", body.name),
        ));
        let saved = self
            .store
            .transact(move |tx| -> TxResult<_> {
                let old = tx.heartbeat(h.tenant_id, &h.name)?;
                let new = match &old {
                    Some(old) => h.replacing(old),
                    None => h,
                };
                tx.save_heartbeat(&new)?;
                let audit = match &old {
                    Some(o) => audit.before(o),
                    None => audit,
                };
                tx.record([audit.after(&new)], vec![event])?;
                Ok(Wrote::Changed(new))
            })
            .await?;
        self.wake.notify_one();
        Ok(saved)
    }

    pub async fn delete(
        &self,
        p: &Principal,
        actor: &Actor,
        name: String,
    ) -> Result<(), HeartbeatError> {
        let (audit, event) = record(AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            "heartbeat.delete",
            format!("heartbeat/{name}"),
        ));
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, HeartbeatError> {
                let old = tx
                    .remove_heartbeat(tenant, &name)?
                    .ok_or(HeartbeatError::NotFound)?;
                tx.record([audit.before(&old)], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    pub async fn list(&self, p: &Principal) -> Result<Vec<Heartbeat>, HeartbeatError> {
        Ok(self.store.heartbeats(p.tenant).await?)
    }

    /// Records a beat; a beat that ends a miss reports the recovery.
    pub async fn beat(&self, p: &Principal, name: String) -> Result<(), HeartbeatError> {
        let now = self.clock.now();
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, HeartbeatError> {
                let old = tx
                    .heartbeat(tenant, &name)?
                    .ok_or(HeartbeatError::NotFound)?;
                let mut new = old.clone();
                new.last_beat = Some(now);
                new.missing = false;
                tx.save_heartbeat(&new)?;
                match old.missing {
                    true => tx.journal(vec![report(&new, true)])?,
                    false => tx.unrecorded("a heartbeat's last beat, no transition"),
                }
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// Marks every newly overdue heartbeat missing and reports it once; returns when the next
    /// one falls due (none: nothing is waiting).
    pub async fn sweep(&self) -> Result<Option<Timestamp>, StoreError> {
        let now = self.clock.now();
        let mut next: Option<Timestamp> = None;
        for h in self.store.all_heartbeats().await? {
            if h.missing {
                continue;
            }
            if !h.overdue(now) {
                next = Some(next.map_or(h.due(), |n| n.min(h.due())));
                continue;
            }
            // Re-checked inside the write: a beat may have arrived since the read.
            self.store
                .transact(move |tx| -> TxResult<_> {
                    let Some(mut stored) = tx.heartbeat(h.tenant_id, &h.name)? else {
                        return Ok(Wrote::Unchanged(()));
                    };
                    if stored.missing || !stored.overdue(now) {
                        return Ok(Wrote::Unchanged(()));
                    }
                    stored.missing = true;
                    tx.save_heartbeat(&stored)?;
                    tx.journal(vec![report(&stored, false)])?;
                    Ok(Wrote::Changed(()))
                })
                .await?;
        }
        Ok(next)
    }
}

/// The audit entry of a definition's change with its `config` event.
fn record(audit: AuditDraft) -> (AuditDraft, EventDraft) {
    let event = EventDraft::config(
        audit.tenant_id,
        &["heartbeats"],
        &audit.action,
        &audit.resource,
    );
    (audit, event)
}

/// The `heartbeat_missed` event of a miss, or of its recovery.
fn report(h: &Heartbeat, recovered: bool) -> EventDraft {
    let (severity, summary) = if recovered {
        (
            Severity::Ok,
            format!("heartbeat {} is beating again", h.name),
        )
    } else {
        (
            severity(&h.severity),
            format!(
                "no heartbeat from {} for more than {}",
                h.name,
                GoDuration(h.expect_every.0 + h.grace.0)
            ),
        )
    };
    let mut payload = json!({"heartbeat": h.name, "labels": h.labels, "summary": summary});
    if recovered {
        payload["resolve"] = json!(true);
    }
    let mut draft = EventDraft::new(
        h.tenant_id,
        EventType::HeartbeatMissed,
        Some(severity),
        payload,
    );
    draft.source_id = Some(h.id.to_string());
    draft
}

/// Runs the sweep when the next heartbeat falls due, or a definition changes.
pub struct HeartbeatSweep(pub Arc<Heartbeats>);

impl Worker for HeartbeatSweep {
    fn name(&self) -> &'static str {
        "heartbeat-sweep"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.0.sweep().await {
                Ok(next) => Wait::For(until(next, self.0.clock.now())),
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat sweep failed");
                    Wait::For(RETRY)
                }
            }
        })
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.0.wake.clone())
    }
}

/// After a failed sweep, the next try.
const RETRY: Duration = Duration::from_secs(5);

/// How long to sleep until `next` (at most `MAX_SLEEP`).
fn until(next: Option<Timestamp>, now: Timestamp) -> Duration {
    next.map_or(MAX_SLEEP, |n| n.since(now).min(MAX_SLEEP))
}
