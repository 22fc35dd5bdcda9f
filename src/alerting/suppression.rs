//! Silences and downtimes through the API, and whether one suppresses an alert (CONTRACT 3:
//! suppression never stops an alert from opening; it is recorded as a `notification` event
//! with status `suppressed` and the reason).

use super::{AlertError, Alerting, invalid};
use crate::auth::Principal;
use crate::model::alert::{Alert, AlertFilter, AlertStatus};
use crate::model::audit::AuditDraft;
use crate::model::event::EventDraft;
use crate::model::identity::Actor;
use crate::model::interval::TimeInterval;
use crate::model::selector::Selector;
use crate::model::suppression::{
    ActiveDowntimes, Downtime, DowntimeBody, Silence, SilenceBody, stored_selector,
};
use crate::model::{GoDuration, Timestamp};
use crate::store::suppressions::IdempotentAnswer;
use crate::store::{Store, StoreError, Tx, check_version};
use crate::store::{TxResult, Wrote};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// A silence expires at most this far ahead (the reference's bound).
const SILENCE_MAX: Duration = Duration::from_secs(90 * 24 * 3600);
/// Lists hold at most this many (SPEC 8).
const LIST_CAP: usize = 1000;
/// Longest accepted `textRegex`.
const REGEX_MAX: usize = 1024;

fn time(field: &str, raw: Option<&str>) -> Result<Option<Timestamp>, AlertError> {
    raw.filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<Timestamp>()
                .map_err(|_| invalid(field, format!("{field} must be an RFC 3339 time")))
        })
        .transpose()
}

fn selector(raw: Option<String>) -> Result<String, AlertError> {
    let raw = raw.unwrap_or_default();
    raw.parse::<Selector>()
        .map_err(|e| invalid("selector", e.to_string()))?;
    Ok(raw)
}

fn comment(raw: Option<String>) -> Result<String, AlertError> {
    raw.map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid("comment", "comment is required"))
}

/// What a downtime create with an `Idempotency-Key` came to.
pub enum DowntimeCreated {
    Created(Box<Downtime>),
    /// The same key and body within 24 h: the first answer, to send again.
    Replay {
        status: u16,
        body: Vec<u8>,
    },
    /// The key was used with another body.
    KeyReused,
}

/// A silence with its selector and title pattern compiled once, to match many alerts.
struct SilenceMatcher {
    silence: Silence,
    selector: Selector,
    text: Option<regex_lite::Regex>,
}

impl SilenceMatcher {
    fn new(silence: Silence) -> Self {
        let selector = stored_selector(&silence.selector);
        let text = (!silence.text_regex.is_empty())
            .then(|| regex_lite::Regex::new(&silence.text_regex).ok())
            .flatten();
        Self {
            silence,
            selector,
            text,
        }
    }

    /// Its selector matches the alert's labels (an empty one matches all) and its pattern the
    /// alert's title (a pattern that no longer compiles matches nothing).
    fn matches(&self, alert: &Alert) -> bool {
        let labels = self.silence.selector.is_empty() || self.selector.matches(&alert.labels);
        let text = self.silence.text_regex.is_empty()
            || self.text.as_ref().is_some_and(|r| r.is_match(&alert.title));
        labels && text
    }
}

/// Whether `silence` matched an alert since `since`: one active now, or one opened since.
pub(super) fn matched_since(
    tx: &Tx,
    silence: &Silence,
    since: Timestamp,
) -> Result<bool, StoreError> {
    let matcher = SilenceMatcher::new(silence.clone());
    let tenant = silence.tenant_id;
    Ok(tx.active_alerts(tenant)?.iter().any(|a| matcher.matches(a))
        || tx
            .alerts_since(tenant, since)?
            .iter()
            .any(|a| matcher.matches(a)))
}

/// What the active silences and downtimes of a tenant suppress, read once per batch.
pub struct Suppressions {
    silences: Vec<SilenceMatcher>,
    downtimes: ActiveDowntimes,
}

impl Suppressions {
    pub fn new(silences: Vec<Silence>, downtimes: Vec<Downtime>, now: Timestamp) -> Self {
        Self {
            silences: silences
                .into_iter()
                .filter(|s| s.active(now))
                .map(SilenceMatcher::new)
                .collect(),
            downtimes: ActiveDowntimes::new(downtimes, now),
        }
    }

    /// Why `alert` (of an object whose host is `host`) is suppressed, if it is.
    pub fn reason(&self, alert: &Alert, host: Option<Uuid>) -> Option<String> {
        if let Some(d) = alert
            .object_id
            .and_then(|object| self.downtimes.covering(object, host, &alert.labels).next())
        {
            return Some(format!("downtime {}: {}", d.id, d.comment));
        }
        self.silences
            .iter()
            .find(|m| m.matches(alert))
            .map(|m| format!("silence {}: {}", m.silence.id, m.silence.comment))
    }
}

/// `Suppressions` of several tenants.
pub struct TenantSuppressions(HashMap<Uuid, Suppressions>);

impl TenantSuppressions {
    pub fn reason(&self, alert: &Alert, host: Option<Uuid>) -> Option<String> {
        self.0.get(&alert.tenant_id)?.reason(alert, host)
    }
}

/// How soon an open flexible-downtime window waiting for a problem is looked at again.
const WAITING_RECHECK: Duration = Duration::from_secs(5);

/// A downtime's checked terms (`downtime_terms`).
struct DowntimeTerms {
    comment: String,
    object_id: Option<Uuid>,
    selector: String,
    kind: String,
    start: Timestamp,
    end: Timestamp,
    duration: Option<u64>,
    notice_before: Option<GoDuration>,
    escalation_policy: Option<String>,
    time_intervals: Vec<TimeInterval>,
    calendar_url: Option<String>,
    sites: Vec<String>,
    services: bool,
}

/// Longest accepted `calendarUrl`.
const URL_MAX: usize = 2048;

/// A downtime's `calendarUrl`: an `http` or `https` URL, named only by whom may write the
/// configuration (the main fetches it; that is outbound reach, as a webhook's URL is).
fn check_calendar_url(p: &Principal, raw: &str) -> Result<(), AlertError> {
    if !p.allows("config:write") {
        return Err(AlertError::Forbidden(
            "a calendarUrl needs config:write: the server fetches it".into(),
        ));
    }
    let url =
        url::Url::parse(raw).map_err(|e| invalid("calendarUrl", format!("calendarUrl: {e}")))?;
    if raw.len() > URL_MAX || !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(
            "calendarUrl",
            format!("calendarUrl is an http or https URL of at most {URL_MAX} bytes"),
        ));
    }
    Ok(())
}

/// A downtime a site's main shipped is the main's to change.
fn refuse_from_main(d: &Downtime) -> Result<(), AlertError> {
    if d.from_main {
        return Err(AlertError::Forbidden(
            "this downtime comes from the main in the site's bundle: change or end it there".into(),
        ));
    }
    Ok(())
}

/// A silence's checked terms (`silence_terms`).
struct SilenceTerms {
    comment: String,
    selector: String,
    text_regex: String,
    starts_at: Timestamp,
    expires_at: Timestamp,
    expire_when_unmatched_for: Option<GoDuration>,
}

/// A silence's selector and title pattern, checked: at least one of them.
fn silence_matchers(
    selector_text: Option<String>,
    text_regex: Option<String>,
) -> Result<(String, String), AlertError> {
    let selector = selector(selector_text)?;
    let text_regex = text_regex.unwrap_or_default();
    if text_regex.len() > REGEX_MAX {
        return Err(invalid(
            "textRegex",
            format!("textRegex is over {REGEX_MAX} bytes"),
        ));
    }
    if let Err(e) = regex_lite::Regex::new(&text_regex) {
        return Err(invalid("textRegex", e.to_string()));
    }
    if selector.trim().is_empty() && text_regex.is_empty() {
        return Err(invalid(
            "selector",
            "a silence needs a selector or a textRegex: without either it would mute every alert of the tenant",
        ));
    }
    Ok((selector, text_regex))
}

/// Starts every flexible downtime whose window is open and one of whose objects (by id, a
/// host's services included, or by selector on their labels) is in a hard problem, each with
/// its `downtime` event (`started`) and an audit entry by the system; returns when to look
/// again: a window that opens later, or soon while one is open and waiting for a problem (a
/// state change starts it). Nothing started: nothing written.
pub async fn start_flexible_downtimes(
    store: &Arc<Store>,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    store
        .transact(move |tx| -> TxResult<_> {
            let mut next: Option<Timestamp> = None;
            let mut audits = Vec::new();
            let mut events = Vec::new();
            for old in tx.all_downtimes()? {
                if old.kind != "flexible" || old.started_at.is_some() || now >= old.end {
                    continue;
                }
                if old.start > now {
                    next = Some(next.map_or(old.start, |n| n.min(old.start)));
                    continue;
                }
                let selector = stored_selector(&old.selector);
                let mut in_problem = false;
                for o in tx.tenant_objects(old.tenant_id)? {
                    if old.covers(o.id, o.host_id, &o.labels, &selector)
                        && tx.hard_problem(old.tenant_id, o.id)?
                    {
                        in_problem = true;
                        break;
                    }
                }
                if !in_problem {
                    let again = now.plus(WAITING_RECHECK);
                    next = Some(next.map_or(again, |n| n.min(again)));
                    continue;
                }
                let mut started = old.clone();
                started.started_at = Some(now);
                started.version += 1;
                tx.save_downtime(&started)?;
                let mut event: EventDraft = started.event();
                event.payload["action"] = serde_json::json!("started");
                event.payload["startedAt"] = serde_json::json!(now);
                events.push(event);
                audits.push(
                    AuditDraft::new(
                        now,
                        started.tenant_id,
                        &Actor::system("flexible-downtime"),
                        "downtime.start",
                        format!("downtime/{}", started.id),
                    )
                    .before(&old)
                    .after(&started),
                );
            }
            let changed = !events.is_empty();
            tx.record(audits, events)?;
            Ok(Wrote::new(next, changed))
        })
        .await
}

impl Alerting {
    /// The audit entry of `action` (`silence.create`...) on the record `id` of its kind.
    fn suppression_audit(
        &self,
        p: &Principal,
        actor: &Actor,
        action: &str,
        id: Uuid,
    ) -> AuditDraft {
        let kind = action.split('.').next().unwrap_or(action);
        AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            action,
            format!("{kind}/{id}"),
        )
    }

    /// A silence's terms from a request, checked at `now`.
    fn silence_terms(body: SilenceBody, now: Timestamp) -> Result<SilenceTerms, AlertError> {
        let comment = comment(body.comment)?;
        let expires_at = time("expiresAt", body.expires_at.as_deref())?.ok_or_else(|| {
            invalid(
                "expiresAt",
                "expiresAt is required: a silence always expires",
            )
        })?;
        let starts_at = time("startsAt", body.starts_at.as_deref())?.unwrap_or(now);
        if expires_at <= starts_at || expires_at <= now {
            return Err(invalid(
                "expiresAt",
                "expiresAt must be after startsAt and in the future",
            ));
        }
        if expires_at > now.plus(SILENCE_MAX) {
            return Err(invalid(
                "expiresAt",
                "a silence expires at most 90 days ahead",
            ));
        }
        let (selector, text_regex) = silence_matchers(body.selector, body.text_regex)?;
        let expire_when_unmatched_for = match body.expire_when_unmatched_for.as_deref() {
            None => None,
            Some(raw) => match raw.parse::<GoDuration>() {
                Ok(d) if !d.0.is_zero() => Some(d),
                _ => {
                    return Err(invalid(
                        "expireWhenUnmatchedFor",
                        "expireWhenUnmatchedFor must be a positive duration like 2h",
                    ));
                }
            },
        };
        Ok(SilenceTerms {
            comment,
            selector,
            text_regex,
            starts_at,
            expires_at,
            expire_when_unmatched_for,
        })
    }

    pub async fn create_silence(
        &self,
        p: &Principal,
        actor: &Actor,
        body: SilenceBody,
    ) -> Result<Silence, AlertError> {
        let now = self.clock.now();
        let t = Self::silence_terms(body, now)?;
        let started = t.starts_at <= now;
        let silence = Silence {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            comment: t.comment,
            selector: t.selector,
            text_regex: t.text_regex,
            starts_at: t.starts_at,
            expires_at: t.expires_at,
            created_at: now,
            created_by: p.name.clone(),
            version: 1,
            user_id: p.user,
            expire_when_unmatched_for: t.expire_when_unmatched_for,
            last_matched_at: None,
            told: if started {
                vec!["started".into()]
            } else {
                Vec::new()
            },
        };
        let audit = self.suppression_audit(p, actor, "silence.create", silence.id);
        let silence = self
            .store
            .transact(move |tx| -> TxResult<_> {
                tx.save_silence(&silence)?;
                let action = if started { "started" } else { "created" };
                tx.record([audit.after(&silence)], vec![silence.event(action)])?;
                Ok(Wrote::Changed(silence))
            })
            .await?;
        Ok(silence)
    }

    /// `PUT /silences/{id}` under `If-Match`: new terms for a silence not yet expired (to
    /// extend it, move its start, or change what it matches), with its `silence` event
    /// (`updated`) and audit entry. One that expired is 422.
    pub async fn update_silence(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        body: SilenceBody,
    ) -> Result<Silence, AlertError> {
        let now = self.clock.now();
        let t = Self::silence_terms(body, now)?;
        let tenant = p.tenant;
        let audit = self.suppression_audit(p, actor, "silence.update", id);
        self.store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.silence(tenant, id)?.ok_or(AlertError::NotFound)?;
                // Expired is final, whatever version the caller last saw.
                if old.expires_at <= now {
                    return Err(invalid(
                        "expiresAt",
                        "the silence has expired: create a new one",
                    ));
                }
                check_version(old.version, expected)?;
                let started = old.starts_at <= now || t.starts_at <= now;
                let mut told = old.told.clone();
                // A silence moved ahead is told again when it starts, and before it expires.
                told.retain(|k| k == "started" && t.starts_at <= now);
                if started && !told.iter().any(|k| k == "started") {
                    told.push("started".into());
                }
                let new = Silence {
                    comment: t.comment,
                    selector: t.selector,
                    text_regex: t.text_regex,
                    starts_at: t.starts_at,
                    expires_at: t.expires_at,
                    expire_when_unmatched_for: t.expire_when_unmatched_for,
                    version: old.version + 1,
                    told,
                    ..old.clone()
                };
                tx.save_silence(&new)?;
                tx.record([audit.before(&old).after(&new)], vec![new.event("updated")])?;
                Ok(Wrote::Changed(new))
            })
            .await
    }

    /// One silence of the caller's tenant.
    pub async fn silence(&self, p: &Principal, id: Uuid) -> Result<Silence, AlertError> {
        Ok(self.store.silence(p.tenant, id).await?)
    }

    /// One downtime of the caller's tenant, as the list answers it.
    pub async fn downtime(&self, p: &Principal, id: Uuid) -> Result<Downtime, AlertError> {
        let d = self.store.downtime(p.tenant, id).await?;
        Ok(d.answered(self.clock.now()))
    }

    /// Moves the expiry of a silence not expired yet `by` later, as an edit at `expected` (the
    /// version the caller saw) would.
    pub async fn extend_silence(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        by: std::time::Duration,
    ) -> Result<Silence, AlertError> {
        let old = self.silence(p, id).await?;
        let body = old.body_expiring(old.expires_at.plus(by));
        self.update_silence(p, actor, id, expected, body).await
    }

    /// `POST /silences:preview`: the tenant's open and acknowledged alerts (the newest 1000) a
    /// silence of these matchers would hold now.
    pub async fn preview_silence(
        &self,
        p: &Principal,
        body: SilenceBody,
    ) -> Result<Vec<Alert>, AlertError> {
        let (selector, text_regex) = silence_matchers(body.selector, body.text_regex)?;
        let probe = Silence {
            id: Uuid::nil(),
            tenant_id: p.tenant,
            comment: String::new(),
            selector,
            text_regex,
            starts_at: self.clock.now(),
            expires_at: self.clock.now(),
            created_at: self.clock.now(),
            created_by: String::new(),
            version: 0,
            user_id: None,
            expire_when_unmatched_for: None,
            last_matched_at: None,
            told: Vec::new(),
        };
        let filter = AlertFilter {
            statuses: vec![AlertStatus::Open, AlertStatus::Acked],
            ..Default::default()
        };
        let alerts = self.store.alerts(p.tenant, filter, None, LIST_CAP).await?;
        let m = SilenceMatcher::new(probe);
        Ok(alerts.into_iter().filter(|a| m.matches(a)).collect())
    }

    /// Every silence (at most 1000), latest expiry first; only those in effect with `active`.
    pub async fn silences(&self, p: &Principal, active: bool) -> Result<Vec<Silence>, AlertError> {
        let now = self.clock.now();
        let mut all = self.store.silences(p.tenant).await?;
        all.retain(|s| !active || s.active(now));
        all.sort_by(|a, b| b.expires_at.cmp(&a.expires_at).then(b.id.cmp(&a.id)));
        all.truncate(LIST_CAP);
        Ok(all)
    }

    /// How many of the tenant's active alerts (open or acknowledged, the newest 1000) each
    /// silence matches now, in the order given.
    pub async fn silence_reach(
        &self,
        p: &Principal,
        silences: &[Silence],
    ) -> Result<Vec<usize>, AlertError> {
        let filter = AlertFilter {
            statuses: vec![AlertStatus::Open, AlertStatus::Acked],
            ..Default::default()
        };
        let alerts = self.store.alerts(p.tenant, filter, None, LIST_CAP).await?;
        Ok(silences
            .iter()
            .map(|s| {
                let m = SilenceMatcher::new(s.clone());
                alerts.iter().filter(|a| m.matches(a)).count()
            })
            .collect())
    }

    /// The alerts of `alerts` an active silence holds now.
    pub async fn silenced(
        &self,
        p: &Principal,
        alerts: &[Alert],
    ) -> Result<HashSet<Uuid>, AlertError> {
        let now = self.clock.now();
        let matchers: Vec<SilenceMatcher> = self
            .store
            .silences(p.tenant)
            .await?
            .into_iter()
            .filter(|s| s.active(now))
            .map(SilenceMatcher::new)
            .collect();
        Ok(alerts
            .iter()
            .filter(|a| matchers.iter().any(|m| m.matches(a)))
            .map(|a| a.id)
            .collect())
    }

    pub async fn expire_silence(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), AlertError> {
        let now = self.clock.now();
        let tenant = p.tenant;
        let audit = self.suppression_audit(p, actor, "silence.expire", id);
        self.store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.silence(tenant, id)?.ok_or(AlertError::NotFound)?;
                let new = old.expired(now);
                tx.save_silence(&new)?;
                tx.record([audit.before(&old).after(&new)], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// The sites a downtime is shipped to, checked: each a site of the tenant, named by whom
    /// may write the configuration (what a site runs is), and covering by selector (an
    /// object's id is the main's own).
    async fn shipped_to(
        &self,
        p: &Principal,
        mut sites: Vec<String>,
        by_object: bool,
    ) -> Result<Vec<String>, AlertError> {
        sites.retain(|s| !s.trim().is_empty());
        sites.sort();
        sites.dedup();
        if sites.is_empty() {
            return Ok(sites);
        }
        if !p.allows("config:write") {
            return Err(AlertError::Forbidden(
                "shipping a downtime to sites needs config:write: it changes what they run".into(),
            ));
        }
        if by_object {
            return Err(invalid(
                "sites",
                "a downtime shipped to sites covers by selector, not by one of this instance's objects",
            ));
        }
        for site in &sites {
            match self.store.doc(p.tenant, "sites", site.clone(), false).await {
                Err(StoreError::NotFound) => {
                    return Err(invalid("sites", format!("site {site:?} does not exist")));
                }
                other => {
                    other?;
                }
            }
        }
        Ok(sites)
    }

    /// A downtime's terms from a request, checked (its object exists in the tenant).
    async fn downtime_terms(
        &self,
        p: &Principal,
        body: DowntimeBody,
    ) -> Result<DowntimeTerms, AlertError> {
        let comment = comment(body.comment)?;
        let start = time("start", body.start.as_deref())?
            .ok_or_else(|| invalid("start", "start is required"))?;
        let end =
            time("end", body.end.as_deref())?.ok_or_else(|| invalid("end", "end is required"))?;
        if end <= start {
            return Err(invalid("end", "end must be after start"));
        }
        let object_id = match body.object_id.as_deref().filter(|s| !s.is_empty()) {
            Some(raw) => {
                let id = Uuid::parse_str(raw)
                    .map_err(|_| invalid("objectId", "objectId is not an id"))?;
                self.store
                    .object(p.tenant, id)
                    .await
                    .map_err(|_| invalid("objectId", format!("object {id} does not exist")))?;
                Some(id)
            }
            None => None,
        };
        let selector = selector(body.selector)?;
        if object_id.is_none() && selector.is_empty() {
            return Err(invalid("objectId", "objectId or selector is required"));
        }
        let kind = body
            .kind
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "fixed".into());
        let duration = match (kind.as_str(), &body.duration) {
            ("fixed", _) => None,
            ("flexible", Some(serde_json::Value::Number(n))) => Some(
                n.as_u64()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| invalid("duration", "duration must be positive"))?,
            ),
            ("flexible", Some(serde_json::Value::String(s))) => Some(
                s.parse::<GoDuration>()
                    .ok()
                    .map(|d| d.0.as_secs())
                    .filter(|s| *s > 0)
                    .ok_or_else(|| invalid("duration", "duration must be like 2h"))?,
            ),
            ("flexible", _) => {
                return Err(invalid("duration", "a flexible downtime needs a duration"));
            }
            _ => return Err(invalid("type", "type must be fixed or flexible")),
        };
        let escalation_policy = body.escalation_policy.filter(|p| !p.is_empty());
        if let Some(policy) = &escalation_policy {
            self.policy_exists(p.tenant, policy).await?;
        }
        let notice_before = match body.notice_before.as_deref() {
            None | Some("") => None,
            Some(raw) => match raw.parse::<GoDuration>() {
                Ok(d) if !d.0.is_zero() && d.0 <= SILENCE_MAX && escalation_policy.is_some() => {
                    Some(d)
                }
                _ => {
                    return Err(invalid(
                        "noticeBefore",
                        "noticeBefore is a positive duration like 10m, at most 90 days, with an escalationPolicy to tell",
                    ));
                }
            },
        };
        let time_intervals = body.time_intervals.unwrap_or_default();
        crate::model::config::check_time_intervals(&time_intervals)
            .map_err(|e| invalid("timeIntervals", e.detail))?;
        if !time_intervals.is_empty() && kind != "fixed" {
            return Err(invalid(
                "timeIntervals",
                "a recurring downtime is fixed: its windows are its timeIntervals",
            ));
        }
        let calendar_url = body.calendar_url.filter(|u| !u.trim().is_empty());
        if let Some(url) = &calendar_url {
            check_calendar_url(p, url)?;
            if !time_intervals.is_empty() || kind != "fixed" {
                return Err(invalid(
                    "calendarUrl",
                    "a calendar downtime is fixed and takes its windows from the calendar alone (no timeIntervals)",
                ));
            }
        }
        let services = body.services.unwrap_or(true);
        let sites = self
            .shipped_to(p, body.sites.unwrap_or_default(), object_id.is_some())
            .await?;
        Ok(DowntimeTerms {
            services,
            time_intervals,
            calendar_url,
            sites,
            comment,
            object_id,
            selector,
            kind,
            start,
            end,
            duration,
            notice_before,
            escalation_policy,
        })
    }

    /// Creates a downtime; with `idempotency` (key, SHA-256 of the body) a replay within 24 h
    /// answers what the first request got.
    pub async fn create_downtime(
        &self,
        p: &Principal,
        actor: &Actor,
        body: DowntimeBody,
        idempotency: Option<(String, Vec<u8>)>,
    ) -> Result<DowntimeCreated, AlertError> {
        let now = self.clock.now();
        let DowntimeTerms {
            comment,
            object_id,
            selector,
            kind,
            start,
            end,
            duration,
            notice_before,
            escalation_policy,
            time_intervals,
            calendar_url,
            sites,
            services,
        } = self.downtime_terms(p, body).await?;
        let downtime = Downtime {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            comment,
            object_id,
            selector,
            kind,
            start,
            end,
            duration,
            started_at: None,
            created_at: now,
            created_by: p.name.clone(),
            version: 1,
            notice_before,
            escalation_policy,
            told: Vec::new(),
            time_intervals,
            told_until: None,
            calendar_url,
            calendar: None,
            occurrences: Vec::new(),
            sites,
            from_main: false,
            services,
        };
        let audit = self.suppression_audit(p, actor, "downtime.create", downtime.id);
        let tenant = p.tenant;
        let created = self
            .store
            .transact(move |tx| -> TxResult<_> {
                if let Some((key, digest)) = &idempotency
                    && let Some(kept) = tx.idempotent_answer(tenant, key, now)?
                {
                    let replay = if kept.body_sha256 == *digest {
                        DowntimeCreated::Replay {
                            status: kept.status,
                            body: kept.answer,
                        }
                    } else {
                        DowntimeCreated::KeyReused
                    };
                    return Ok(Wrote::Unchanged(replay));
                }
                tx.save_downtime(&downtime)?;
                if let Some((key, body_sha256)) = idempotency {
                    let answer = IdempotentAnswer {
                        body_sha256,
                        status: 201,
                        answer: serde_json::to_vec(&downtime)
                            .map_err(|e| StoreError::Internal(format!("encode: {e}")))?,
                        at: now,
                    };
                    tx.keep_idempotent_answer(tenant, &key, &answer)?;
                }
                tx.record([audit.after(&downtime)], vec![downtime.event()])?;
                Ok(Wrote::Changed(DowntimeCreated::Created(Box::new(downtime))))
            })
            .await?;
        Ok(match created {
            DowntimeCreated::Created(d) => DowntimeCreated::Created(Box::new(d.answered(now))),
            other => other,
        })
    }

    /// `PUT /downtimes/{id}` under `If-Match`: new terms for a downtime not yet over (to
    /// extend it, move it, or change what it covers), with its `downtime` event (`action:
    /// updated`) and audit entry. One that is over is 422.
    pub async fn update_downtime(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        body: DowntimeBody,
    ) -> Result<Downtime, AlertError> {
        let now = self.clock.now();
        let t = self.downtime_terms(p, body).await?;
        if t.end <= now {
            return Err(invalid("end", "end must be in the future"));
        }
        let tenant = p.tenant;
        let audit = self.suppression_audit(p, actor, "downtime.update", id);
        self.store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.downtime(tenant, id)?.ok_or(AlertError::NotFound)?;
                refuse_from_main(&old)?;
                if old.over(now) {
                    return Err(invalid("end", "the downtime is over: create a new one"));
                }
                check_version(old.version, expected)?;
                let new = Downtime {
                    comment: t.comment,
                    object_id: t.object_id,
                    selector: t.selector,
                    started_at: old.started_at.filter(|_| t.kind == old.kind),
                    kind: t.kind,
                    start: t.start,
                    end: t.end,
                    duration: t.duration,
                    version: old.version + 1,
                    // Moved or extended, its notices are given for its new times (the one
                    // ahead of a start that did not move is not given twice).
                    told: old
                        .told
                        .iter()
                        .filter(|n| *n == "starting" && t.start == old.start)
                        .cloned()
                        .collect(),
                    notice_before: t.notice_before,
                    escalation_policy: t.escalation_policy,
                    time_intervals: t.time_intervals,
                    // Another feed is read afresh.
                    calendar: old
                        .calendar
                        .clone()
                        .filter(|_| t.calendar_url == old.calendar_url),
                    calendar_url: t.calendar_url,
                    sites: t.sites,
                    services: t.services,
                    ..old.clone()
                };
                tx.save_downtime(&new)?;
                let mut event = new.event();
                event.payload["action"] = serde_json::json!("updated");
                tx.record([audit.before(&old).after(&new)], vec![event])?;
                Ok(Wrote::Changed(new))
            })
            .await
            .map(|d| d.answered(now))
    }

    /// Moves the end of a downtime not over yet `by` later, as an edit at `expected` (the
    /// version the caller saw) would.
    pub async fn extend_downtime(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        by: std::time::Duration,
    ) -> Result<Downtime, AlertError> {
        let old = self.downtime(p, id).await?;
        let body = old.body_ending(old.end.plus(by));
        self.update_downtime(p, actor, id, expected, body).await
    }

    /// Every downtime (at most 1000), latest start first; only those in effect with `active`.
    pub async fn downtimes(
        &self,
        p: &Principal,
        active: bool,
    ) -> Result<Vec<Downtime>, AlertError> {
        let now = self.clock.now();
        let mut all = self.store.downtimes(p.tenant).await?;
        all.retain(|d| !active || d.active(now));
        all.sort_by(|a, b| b.start.cmp(&a.start).then(b.id.cmp(&a.id)));
        all.truncate(LIST_CAP);
        Ok(all.into_iter().map(|d| d.answered(now)).collect())
    }

    /// `DELETE`: ends the downtime now.
    pub async fn end_downtime(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), AlertError> {
        let now = self.clock.now();
        let tenant = p.tenant;
        let audit = self.suppression_audit(p, actor, "downtime.delete", id);
        self.store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.downtime(tenant, id)?.ok_or(AlertError::NotFound)?;
                refuse_from_main(&old)?;
                let new = old.ended(now);
                tx.save_downtime(&new)?;
                tx.record([audit.before(&old).after(&new)], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// What suppresses alerts of these tenants now.
    pub async fn suppressions(
        &self,
        tenants: impl IntoIterator<Item = Uuid>,
    ) -> Result<TenantSuppressions, StoreError> {
        let now = self.clock.now();
        let mut by_tenant = HashMap::new();
        for tenant in tenants {
            let s = Suppressions::new(
                self.store.silences(tenant).await?,
                self.store.downtimes(tenant).await?,
                now,
            );
            by_tenant.insert(tenant, s);
        }
        Ok(TenantSuppressions(by_tenant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Severity;

    /// A saved selector that no longer parses silences nothing, where a default would have
    /// silenced the whole tenant.
    #[test]
    fn a_broken_saved_selector_silences_nothing() {
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let tenant = Uuid::from_u128(7);
        let silence = |id: u128, selector: &str| Silence {
            id: Uuid::from_u128(id),
            tenant_id: tenant,
            comment: format!("silence {id}"),
            selector: selector.into(),
            text_regex: String::new(),
            starts_at: now,
            expires_at: now.plus(Duration::from_secs(3600)),
            created_at: now,
            created_by: "test".into(),
            version: 1,
            user_id: None,
            expire_when_unmatched_for: None,
            last_matched_at: None,
            told: Vec::new(),
        };
        let alert = Alert {
            labels: [("site".to_string(), "north".to_string())].into(),
            ..Alert::open(
                Uuid::from_u128(1),
                tenant,
                "rule".into(),
                "key".into(),
                Severity::Critical,
                "pump".into(),
                now,
            )
        };
        let broken = Suppressions::new(vec![silence(2, "site in (north")], Vec::new(), now);
        assert_eq!(broken.reason(&alert, None), None);
        let south = Suppressions::new(vec![silence(3, "site=south")], Vec::new(), now);
        assert_eq!(south.reason(&alert, None), None);
        let north = Suppressions::new(vec![silence(4, "site=north")], Vec::new(), now);
        assert!(north.reason(&alert, None).is_some());

        // The title pattern and the selector must both match; an empty one matches all; a
        // pattern that no longer compiles matches nothing.
        let with_text = |selector: &str, text: &str| {
            SilenceMatcher::new(Silence {
                text_regex: text.into(),
                ..silence(5, selector)
            })
        };
        assert!(with_text("", "").matches(&alert));
        assert!(with_text("site=north", "^pu").matches(&alert));
        assert!(!with_text("site=north", "^disk").matches(&alert));
        assert!(!with_text("site=south", "^pu").matches(&alert));
        assert!(!with_text("", "(unclosed").matches(&alert));
    }
}
