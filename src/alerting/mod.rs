//! Alerting: the alert engine (a durable consumer of the event journal that runs the alert
//! rules) and the alert operations of the API (list, get, manual alarm, ack, resolve).

mod calendars;
mod comments;
pub mod engine;
pub mod evaluator;
mod flood;
mod incidents;
pub mod lifecycle;
mod rule_test;
pub mod rules;
pub mod suppression;

pub use calendars::Calendars;
pub use engine::AlertEngine;

/// The longest the alert timers sleep without a wake: a bound, should one be missed. They
/// otherwise sleep until the next timer falls due (a snooze's end to the millisecond, where
/// CONTRACT 3 allows 5 s), or a write that may bring one forward wakes them.
pub const TIMERS_MAX_SLEEP: Duration = Duration::from_secs(3600);
/// After a failed run, the next try.
const TIMERS_RETRY: Duration = Duration::from_secs(5);

use crate::auth::Principal;
use crate::events::Events;
use crate::model::alert::{
    AckRequest, Alert, AlertFilter, MANUAL_RULE, ManualAlarm, Shelf, ShelveMode, ShelveRequest,
    SnoozeRequest,
};
use crate::model::audit::AuditDraft;
use crate::model::config::Invalid;
use crate::model::event::{EventDraft, Severity};
use crate::model::flood::Flood;
use crate::model::identity::Actor;
use crate::model::incident::Storm;
use crate::model::noise::{
    AlertingSettings, NOISE_SETTING, NoiseOverrides, NoiseSettings, StoredNoise,
};
use crate::model::{GoDuration, Timestamp};
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{AlertAction, AlertActions, ObjectDependencies};
use crate::runtime::{PortError, PortFuture};
use crate::store::{Store, StoreError, TxResult, Wrote};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// The alert is not in a status the change starts from: CONTRACT 3 answers it as an alert
    /// that does not exist, as the reference does (`svc:conflict` is reserved for name
    /// clashes, SPEC 7).
    #[error(transparent)]
    Transition(#[from] crate::model::alert::TransitionError),
    /// The alert, incident, silence or downtime a change names does not exist in the tenant.
    #[error("not found")]
    NotFound,
    /// A field the caller's permissions do not reach; the detail names the permission.
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl crate::store::TxAbort for AlertError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            AlertError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<AlertError> for PortError {
    fn from(e: AlertError) -> Self {
        match e {
            AlertError::Store(e) => e.into(),
            refusal => PortError::refused(refusal),
        }
    }
}

fn invalid(field: &str, detail: impl Into<String>) -> AlertError {
    AlertError::Invalid(Invalid {
        field: field.into(),
        detail: detail.into(),
    })
}

/// How alerts are kept from paging too much (`alerting` in the configuration): alarm storms
/// gathered into an incident, and the noise controls of every tenant that sets none of its
/// own.
#[derive(Clone, Debug)]
pub struct Noise {
    pub storm: Storm,
    pub instance: NoiseSettings,
}

pub struct Alerting {
    store: Arc<Store>,
    clock: SharedClock,
    /// The stored events, for testing rules against history.
    history: Arc<Events>,
    noise: Noise,
    /// Wakes the alert timers: the application has the store notify it after commits that
    /// may bring a timer forward (`Change::AlertTimers`, `Change::Catalog`).
    timers_wake: Arc<tokio::sync::Notify>,
    /// The objects' dependencies (the monitor's catalog).
    dependencies: Arc<dyn ObjectDependencies>,
    /// Alerts wait for what holds their page back to lift (as the timers last saw).
    pages_held: AtomicBool,
}

impl Alerting {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        history: Arc<Events>,
        noise: Noise,
        dependencies: Arc<dyn ObjectDependencies>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            history,
            noise,
            timers_wake: Arc::default(),
            dependencies,
            pages_held: AtomicBool::new(false),
        })
    }

    /// A recovery may lift what holds pages back: the timers look at once rather than at
    /// their next recheck.
    pub(crate) fn recovered(&self) {
        if self.pages_held.load(Ordering::Relaxed) {
            self.timers_wake.notify_one();
        }
    }

    /// What may hold back the pages of the `tenants`' alerts, as of now.
    async fn suppressors(
        &self,
        tenants: impl IntoIterator<Item = Uuid>,
    ) -> Result<lifecycle::Suppressors, StoreError> {
        let tenants: Vec<Uuid> = tenants.into_iter().collect();
        let suppressions = self.suppressions(tenants.iter().copied()).await?;
        let mut noise = HashMap::new();
        for tenant in tenants {
            noise.insert(tenant, self.noise_of(tenant).await?);
        }
        Ok(lifecycle::Suppressors {
            suppressed: Box::new(move |a, host| suppressions.reason(a, host)),
            dependencies: self.dependencies.dependencies().await,
            noise: lifecycle::TenantNoise::new(self.noise.instance.clone(), noise),
        })
    }

    /// 422 `svc:validation/escalationPolicy` unless the tenant has the policy `policy`.
    async fn policy_exists(&self, tenant: Uuid, policy: &str) -> Result<(), AlertError> {
        let found = self
            .store
            .doc(tenant, "escalation-policies", policy.to_string(), false)
            .await;
        if matches!(found, Err(StoreError::NotFound)) {
            return Err(invalid(
                "escalationPolicy",
                format!("escalation policy {policy:?} does not exist"),
            ));
        }
        found?;
        Ok(())
    }

    /// The noise controls in force for `tenant`.
    async fn noise_of(&self, tenant: Uuid) -> Result<NoiseSettings, StoreError> {
        let stored = self.store.tenant_noise(tenant).await?;
        Ok(self.noise.instance.with(&stored.overrides))
    }

    /// `GET /api/v1/alerting/settings`: the tenant's noise controls in force, and what it set.
    pub async fn settings(&self, p: &Principal) -> Result<AlertingSettings, AlertError> {
        let stored = self.store.tenant_noise(p.tenant).await?;
        Ok(AlertingSettings {
            effective: self.noise.instance.with(&stored.overrides),
            tenant: stored.overrides,
            version: stored.version,
            updated_at: stored.updated_at,
        })
    }

    /// `PUT /api/v1/alerting/settings`: replaces what the tenant sets itself (a field left
    /// out follows the configuration again), with its audit entry and `config` event.
    pub async fn set_settings(
        &self,
        p: &Principal,
        actor: &Actor,
        overrides: NoiseOverrides,
    ) -> Result<AlertingSettings, AlertError> {
        let effective = self.noise.instance.with(&overrides);
        if let Some(problem) = effective.problems("").into_iter().next() {
            let field = problem
                .split([':', '.'])
                .next()
                .unwrap_or("settings")
                .to_string();
            return Err(invalid(&field, problem));
        }
        let (tenant, now) = (p.tenant, self.clock.now());
        let audit = AuditDraft::new(
            now,
            tenant,
            actor,
            "alerting.settings.update",
            NOISE_SETTING.to_string(),
        );
        let event = EventDraft::config(tenant, &["alerting"], &audit.action, &audit.resource);
        let stored = self
            .store
            .transact(move |tx| -> TxResult<_> {
                let before = tx.tenant_noise(tenant)?;
                let stored = StoredNoise {
                    overrides,
                    version: before.version + 1,
                    updated_at: Some(now),
                };
                let value = serde_json::to_value(&stored)
                    .map_err(|e| StoreError::Corrupt(format!("{NOISE_SETTING}: {e}")))?;
                tx.put_setting(tenant, NOISE_SETTING, Some(&value))?;
                tx.record(
                    [audit.before(&before.overrides).after(&stored.overrides)],
                    vec![event],
                )?;
                Ok(Wrote::Changed(stored))
            })
            .await?;
        Ok(AlertingSettings {
            effective,
            tenant: stored.overrides,
            version: stored.version,
            updated_at: stored.updated_at,
        })
    }

    /// Alarm-storm correlation settings.
    pub fn storm(&self) -> Storm {
        self.noise.storm
    }

    fn audit(&self, p: &Principal, actor: &Actor, action: &str, id: Uuid) -> AuditDraft {
        AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            action,
            format!("alert/{id}"),
        )
    }

    pub async fn list(
        &self,
        p: &Principal,
        filter: AlertFilter,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Alert>, AlertError> {
        let alerts = self.store.alerts(p.tenant, filter, before, limit).await?;
        self.with_dependents(p.tenant, alerts).await
    }

    /// Each active alert with how many alerts its object holds back (`dependents`).
    async fn with_dependents(
        &self,
        tenant: Uuid,
        mut alerts: Vec<Alert>,
    ) -> Result<Vec<Alert>, AlertError> {
        if !alerts
            .iter()
            .any(|a| a.status.is_active() && a.object_id.is_some())
        {
            return Ok(alerts);
        }
        let held = self.store.held_back(tenant).await?;
        for a in alerts.iter_mut().filter(|a| a.status.is_active()) {
            a.dependents = a.object_id.and_then(|o| held.get(&o)).copied().unwrap_or(0);
        }
        Ok(alerts)
    }

    /// The tenant's open and acknowledged alerts counted by severity.
    pub async fn active_counts(
        &self,
        p: &Principal,
    ) -> Result<std::collections::BTreeMap<String, u64>, AlertError> {
        const PAGE: usize = 1000;
        let filter = AlertFilter {
            statuses: vec![
                crate::model::alert::AlertStatus::Open,
                crate::model::alert::AlertStatus::Acked,
            ],
            ..Default::default()
        };
        let mut counts = std::collections::BTreeMap::new();
        let mut before = None;
        loop {
            let page = self
                .store
                .alerts(p.tenant, filter.clone(), before, PAGE)
                .await?;
            for a in &page {
                *counts.entry(a.severity.as_str().to_string()).or_insert(0) += 1;
            }
            match page.last() {
                Some(last) if page.len() == PAGE => before = Some(last.id),
                _ => return Ok(counts),
            }
        }
    }

    pub async fn get(&self, p: &Principal, id: Uuid) -> Result<Alert, AlertError> {
        let alert = match self.store.alert(p.tenant, id).await {
            Err(StoreError::NotFound) => return Err(AlertError::NotFound),
            found => found?,
        };
        let mut alerts = self.with_dependents(p.tenant, vec![alert]).await?;
        alerts.pop().ok_or(AlertError::NotFound)
    }

    /// The caller's tenant's scopes in flood, scope order.
    pub async fn floods(&self, p: &Principal) -> Result<Vec<Flood>, AlertError> {
        Ok(self.store.floods(p.tenant).await?)
    }

    /// A manual alarm (CONTRACT 3); `false` when it folded into the active alert with its
    /// dedup key.
    pub async fn raise(
        &self,
        p: &Principal,
        actor: &Actor,
        req: ManualAlarm,
    ) -> Result<(Alert, bool), AlertError> {
        self.raise_via(p, actor, req, "api").await
    }

    /// A manual alarm raised `via` a path its `alert_opened` event names (`api`, `sms`, `ivr`).
    async fn raise_via(
        &self,
        p: &Principal,
        actor: &Actor,
        req: ManualAlarm,
        via: &'static str,
    ) -> Result<(Alert, bool), AlertError> {
        let title = req
            .title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| invalid("title", "title is required"))?;
        let severity: Severity = match req.severity.as_deref() {
            None | Some("") => Severity::Critical,
            Some(s) => s
                .parse()
                .map_err(|_| invalid("severity", "severity must be critical, warning or info"))?,
        };
        if let Some(policy) = &req.escalation_policy {
            self.policy_exists(p.tenant, policy).await?;
        }
        if let Some(o) = req.object_id {
            match self.store.object(p.tenant, o).await {
                Err(StoreError::NotFound) => {
                    return Err(invalid("objectId", format!("object {o} does not exist")));
                }
                found => {
                    found?;
                }
            }
        }
        let id = self.clock.new_id();
        let dedup_key = req
            .dedup_key
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| format!("{MANUAL_RULE}/{id}"));
        let opened = Alert::open(
            id,
            p.tenant,
            MANUAL_RULE.into(),
            dedup_key,
            severity,
            title,
            self.clock.now(),
        );
        let alert = Alert {
            object_id: req.object_id,
            labels: req.labels,
            payload: serde_json::json!({"message": req.message.unwrap_or_default()}),
            escalation_policy: req.escalation_policy,
            ..opened
        };
        let audit = self.audit(p, actor, "alert.create", id);
        let (alert, opened) = lifecycle::raise_alarm(
            &self.store,
            alert,
            audit,
            via,
            self.noise.storm,
            self.noise_of(p.tenant).await?.flood,
        )
        .await?;
        Ok((alert, opened))
    }

    /// `:ack` on the request's terms (`sticky`, `expiresIn`), else the alert's policy's, `via`
    /// the API or the UI.
    pub async fn ack(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        request: AckRequest,
        via: &'static str,
    ) -> Result<Alert, AlertError> {
        if request.expires_in.is_some_and(|d| d.0.as_secs() < 1) {
            return Err(invalid("expiresIn", "expiresIn must be at least 1s"));
        }
        let audit = self.audit(p, actor, "alert.ack", id);
        let ack = lifecycle::Acknowledgement {
            by: p.name.clone(),
            user: p.user,
            via: via.into(),
            request,
        };
        lifecycle::acknowledge(&self.store, p.tenant, id, ack, audit).await
    }

    /// `:shelve` (OPC UA Part 9 `TimedShelve`/`OneShotShelve`): the alert stops paging until
    /// the shelf ends, at its time (at most `maxShelve` away) or when the alert clears.
    pub async fn shelve(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        req: ShelveRequest,
    ) -> Result<Alert, AlertError> {
        let now = self.clock.now();
        let reason = req
            .reason
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .ok_or_else(|| invalid("reason", "a shelf needs a reason"))?;
        if reason.chars().count() > 1000 {
            return Err(invalid("reason", "at most 1000 characters"));
        }
        let (mode, until) = match req.mode.as_deref() {
            Some("timed") => {
                let d = req
                    .duration
                    .as_deref()
                    .ok_or_else(|| invalid("duration", "a timed shelf needs a duration"))?
                    .parse::<GoDuration>()
                    .map_err(|_| invalid("duration", "duration must be like 2h"))?
                    .0;
                if d.is_zero() {
                    return Err(invalid("duration", "duration must be positive"));
                }
                let max = self.noise_of(p.tenant).await?.max_shelve;
                if d > max.0 {
                    return Err(invalid(
                        "duration",
                        format!("at most {max} (the tenant's maxShelve)"),
                    ));
                }
                (ShelveMode::Timed, Some(now.plus(d)))
            }
            Some("oneShot") if req.duration.is_none() => (ShelveMode::OneShot, None),
            Some("oneShot") => {
                return Err(invalid(
                    "duration",
                    "a one-shot shelf ends when the alert clears, not after a duration",
                ));
            }
            _ => return Err(invalid("mode", "mode must be timed or oneShot")),
        };
        let shelf = Shelf {
            mode,
            until,
            reason,
            by: p.name.clone(),
            user_id: p.user,
            at: now,
            warned: false,
        };
        let audit = self.audit(p, actor, "alert.shelve", id);
        lifecycle::transition(&self.store, p.tenant, id, move |a| a.shelve(shelf), audit).await
    }

    /// `:unshelve`: the alert pages again (from the first step) if it is still open.
    pub async fn unshelve(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<Alert, AlertError> {
        let by = p.name.clone();
        let audit = self.audit(p, actor, "alert.unshelve", id);
        lifecycle::transition(&self.store, p.tenant, id, move |a| a.unshelve(&by), audit).await
    }

    /// `:snooze` (CONTRACT 3): `until` (in the future) or `duration` from now.
    pub async fn snooze(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        req: SnoozeRequest,
    ) -> Result<Alert, AlertError> {
        let now = self.clock.now();
        let until = match (req.until.as_deref(), req.duration.as_deref()) {
            (Some(u), _) => u
                .parse::<Timestamp>()
                .map_err(|_| invalid("until", "until must be an RFC 3339 time"))?,
            (None, Some(d)) => now.plus(
                d.parse::<GoDuration>()
                    .map_err(|_| invalid("duration", "duration must be like 30m"))?
                    .0,
            ),
            (None, None) => return Err(invalid("until", "until or duration is required")),
        };
        if until <= now {
            return Err(invalid("until", "until must be in the future"));
        }
        let by = p.name.clone();
        let audit = self.audit(p, actor, "alert.snooze", id);
        let alert = lifecycle::transition(
            &self.store,
            p.tenant,
            id,
            move |a| a.snooze(&by, until, now),
            audit,
        )
        .await?;
        Ok(alert)
    }

    /// Runs the alert timers that are due (flexible downtimes that start, snoozes, auto-close,
    /// pending alerts, silent heartbeat rules, suppressions that lift); returns when the next
    /// one falls due (none: nothing waits).
    pub async fn run_timers(&self) -> Result<Option<Timestamp>, AlertError> {
        let downtimes =
            suppression::start_flexible_downtimes(&self.store, self.clock.now()).await?;
        let tenants = self.store.tenants().await?.into_iter().map(|t| t.id);
        let suppressors = self.suppressors(tenants).await?;
        let (timers, held) =
            lifecycle::run_timers(&self.store, self.clock.now(), self.noise.storm, suppressors)
                .await?;
        self.pages_held.store(held, Ordering::Relaxed);
        Ok(match (downtimes, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// An acknowledgement or resolution by a contact `via` a path that is not the API (an ack
    /// link, an SMS reply, a key on a call); `None` when the alert is gone or the action no
    /// longer applies.
    pub async fn act_for(
        &self,
        tenant: Uuid,
        id: Uuid,
        action: AlertAction,
        by: String,
        via: &'static str,
    ) -> Result<Option<Alert>, AlertError> {
        let now = self.clock.now();
        let actor = Actor::system(via);
        let verb = match action {
            AlertAction::Ack => "alert.ack",
            AlertAction::Resolve => "alert.resolve",
        };
        let audit = AuditDraft::new(now, tenant, &actor, verb, format!("alert/{id}"));
        let done = match action {
            // The policy's terms: a link, a reply or a key says nothing of its own.
            AlertAction::Ack => {
                let ack = lifecycle::Acknowledgement {
                    by,
                    user: None,
                    via: via.into(),
                    request: AckRequest::default(),
                };
                lifecycle::acknowledge(&self.store, tenant, id, ack, audit).await
            }
            AlertAction::Resolve => {
                let resolve = move |a: &mut Alert| {
                    let mut event = a.resolve(now)?;
                    event.payload["via"] = serde_json::json!(via);
                    event.payload["by"] = serde_json::json!(by);
                    Ok(event)
                };
                lifecycle::transition(&self.store, tenant, id, resolve, audit).await
            }
        };
        match done {
            Ok(alert) => Ok(Some(alert)),
            Err(
                AlertError::Transition(_)
                | AlertError::NotFound
                | AlertError::Store(StoreError::NotFound),
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn resolve(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<Alert, AlertError> {
        let now = self.clock.now();
        let audit = self.audit(p, actor, "alert.resolve", id);
        let by = p.name.clone();
        let resolve = move |a: &mut Alert| {
            let mut event = a.resolve(now)?;
            event.payload["by"] = serde_json::json!(by);
            Ok(event)
        };
        let alert = lifecycle::transition(&self.store, p.tenant, id, resolve, audit).await?;
        Ok(alert)
    }
}

impl AlertActions for Alerting {
    fn act(
        &self,
        tenant: Uuid,
        id: Uuid,
        action: AlertAction,
        by: String,
        via: &'static str,
    ) -> PortFuture<'_, Option<Alert>> {
        Box::pin(async move { Ok(self.act_for(tenant, id, action, by, via).await?) })
    }

    fn shelve(
        &self,
        tenant: Uuid,
        id: Uuid,
        request: ShelveRequest,
        by: String,
    ) -> PortFuture<'_, Option<Alert>> {
        Box::pin(async move {
            let p = Principal::system(tenant, by);
            match Alerting::shelve(self, &p, &Actor::system("main"), id, request).await {
                Ok(alert) => Ok(Some(alert)),
                Err(
                    AlertError::Transition(_)
                    | AlertError::NotFound
                    | AlertError::Invalid(_)
                    | AlertError::Store(StoreError::NotFound),
                ) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn alarm(
        &self,
        tenant: Uuid,
        alarm: ManualAlarm,
        by: String,
        via: &'static str,
    ) -> PortFuture<'_, Alert> {
        Box::pin(async move {
            let p = Principal::system(tenant, by);
            let (alert, _) = self.raise_via(&p, &Actor::system(via), alarm, via).await?;
            Ok(alert)
        })
    }

    fn by_dedup_key(&self, tenant: Uuid, dedup_key: String) -> PortFuture<'_, Option<Alert>> {
        Box::pin(async move { Ok(self.store.active_alert_by_key(tenant, dedup_key).await?) })
    }

    fn by_short_id(&self, tenant: Uuid, short: String) -> PortFuture<'_, Option<Alert>> {
        Box::pin(async move { Ok(self.store.active_alert_by_short_id(tenant, short).await?) })
    }
}

/// Runs the alert timers when the next falls due, or when a write wakes them.
pub struct AlertTimers(pub Arc<Alerting>);

impl Worker for AlertTimers {
    fn name(&self) -> &'static str {
        "alert-timers"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.0.run_timers().await {
                Ok(next) => Wait::For(next.map_or(TIMERS_MAX_SLEEP, |n| {
                    n.since(self.0.clock.now()).min(TIMERS_MAX_SLEEP)
                })),
                Err(e) => {
                    tracing::warn!(error = %e, "alert timers failed");
                    Wait::For(TIMERS_RETRY)
                }
            }
        })
    }

    fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.0.timers_wake.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_through_a_port_see_alerting_refuse_or_fail() {
        assert!(matches!(
            PortError::from(AlertError::NotFound),
            PortError::Refused(_)
        ));
        assert!(matches!(
            PortError::from(invalid("duration", "too long")),
            PortError::Refused(why) if why == "too long"
        ));
        assert!(matches!(
            PortError::from(AlertError::Store(StoreError::Unavailable("disk".into()))),
            PortError::Unavailable(_)
        ));
    }
}
