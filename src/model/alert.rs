//! Alerts (SPEC 2.12, 3; CONTRACT 3): the record, its transitions and the lifecycle events
//! each transition writes.

use super::GoDuration;
use super::Timestamp;
use super::event::{EventDraft, EventType, Severity};
use super::noise::Chatter;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

/// How many triggering event ids an alert keeps.
pub const EVENT_IDS_KEPT: usize = 50;
/// The rule id of alerts raised by hand.
pub const MANUAL_RULE: &str = "manual";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AlertStatus {
    Open,
    Acked,
    Resolved,
    Expired,
}

impl AlertStatus {
    /// The wire name (`open`, `acked`, `resolved`, `expired`).
    pub fn as_str(self) -> &'static str {
        match self {
            AlertStatus::Open => "open",
            AlertStatus::Acked => "acked",
            AlertStatus::Resolved => "resolved",
            AlertStatus::Expired => "expired",
        }
    }

    /// Open and acked alerts hold their dedup key.
    pub fn is_active(self) -> bool {
        matches!(self, AlertStatus::Open | AlertStatus::Acked)
    }
}

impl std::str::FromStr for AlertStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "open" => Ok(AlertStatus::Open),
            "acked" => Ok(AlertStatus::Acked),
            "resolved" => Ok(AlertStatus::Resolved),
            "expired" => Ok(AlertStatus::Expired),
            other => Err(format!("unknown alert status {other:?}")),
        }
    }
}

/// The reference's `Alert`, with `payload` the triggering event's payload as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub rule_id: String,
    pub dedup_key: String,
    pub status: AlertStatus,
    pub severity: Severity,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub payload: Value,
    /// The last `EVENT_IDS_KEPT` triggering events, oldest first.
    #[serde(default)]
    pub event_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident_id: Option<Uuid>,
    pub opened_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snoozed_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Timestamp>,
    /// When an active alert expires (its rule's `autoCloseAfter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_close_at: Option<Timestamp>,
    /// The alert group (`alert-groups` name) of the rule that opened it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Topology (SEMANTICS 7): the problem is caused by another object (a service's DOWN
    /// host, an unreachable host's parent), so the alert does not page on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<AlertCause>,
    /// What holds the alert's page back while it lasts (a failed dependency); cleared when it
    /// lifts and the alert pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppressed_by: Option<SuppressedBy>,
    /// How many alerts this alert's object holds back (their `suppressedBy` names it): worked
    /// out when the alert is read, not stored.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dependents: u32,
    /// Shelved (OPC UA Part 9): the alert does not page until the shelf ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shelved: Option<Shelf>,
    /// When its source last changed between firing and clear, within `chatter.within`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flips: Vec<Timestamp>,
    /// Until when its source firing again counts toward this resolved alert's chatter
    /// (`chatter.within` after it cleared): the new alert takes its flips over, or, while its
    /// chatter shelf holds, this alert reopens, still shelved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refire_until: Option<Timestamp>,
    /// The alert that opened first among those that started an alarm flood (ISA-18.2's
    /// first-out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_out: bool,
    /// Until when its source firing again reopens this resolved alert (its rule's
    /// `reopenWindow` after it cleared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopen_until: Option<Timestamp>,
    /// How often it reopened.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reopened: u32,
    /// How its acknowledgement holds (issue 70): kept after it ends, for the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack: Option<AckTerms>,
}

/// How an acknowledgement holds: sticky or not, when it lapses (`expiresIn`, the policy's
/// `ackTimeout`), when its holder is reminded (`ackReminder`) and, after a reminder nobody
/// answers, when it is withdrawn (`unackIfNoResponse`). When it ends the alert opens again
/// and its escalation resumes at `step`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AckTerms {
    /// false: the next state or severity change clears it (Icinga's non-sticky ack).
    pub sticky: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unack_if_no_response: Option<GoDuration>,
    /// A reminder is waiting for an answer (an `:ack` again): unanswered, the ack is withdrawn
    /// then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdraw_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reminders: u32,
    /// The escalation step it was acknowledged at.
    pub step: u32,
    /// How: `api`, `link`, `sms`, `dtmf`, `ivr`, `agi`.
    pub via: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<Uuid>,
    /// When it ended without a resolve, why: `expired`, `withdrawn` or `cleared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// What an escalation policy says of the acknowledgements of its alerts (issue 70).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AckPolicy {
    pub timeout: Option<GoDuration>,
    pub reminder: Option<GoDuration>,
    pub unack_if_no_response: Option<GoDuration>,
}

/// An acknowledgement ending without a person resolving it: the alert is open again, and its
/// escalation resumes at `step`.
#[derive(Debug)]
pub struct Unacked {
    pub event: EventDraft,
    pub step: u32,
}

/// `shelved.by` of a chatter shelf.
pub const CHATTER_SHELVER: &str = "chatter";

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why an alert does not page (`kind: dependency`: the `object` it depends on has failed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SuppressedBy {
    pub kind: String,
    /// The object, `host` or `host/service`.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redundancy_group: Option<String>,
}

/// How a shelf ends: at its time, or when the alert's source clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ShelveMode {
    Timed,
    OneShot,
    /// Shelved by the service because its source chatters; ends at `until` like `timed`.
    Chatter,
}

/// A shelved alert's shelf.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Shelf {
    pub mode: ShelveMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    pub reason: String,
    pub by: String,
    /// The shelver's user, told before a timed shelf ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<Uuid>,
    pub at: Timestamp,
    /// The shelver was told it is about to end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warned: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AlertCause {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    pub reason: String,
}

/// Why a transition is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// CONTRACT 3: acknowledging an alert that is not open answers as if it did not exist.
    #[error("alert is {0:?}, not open")]
    NotOpen(AlertStatus),
    #[error("alert is already {0:?}")]
    Closed(AlertStatus),
    #[error("alert is not shelved")]
    NotShelved,
}

/// How long before a timed shelf ends its shelver is warned.
pub const SHELF_WARNING: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// When the shelver of a shelf ending at `until` is warned.
pub fn shelf_warning_at(until: Timestamp) -> Timestamp {
    let ms = i64::try_from(SHELF_WARNING.as_millis()).unwrap_or(i64::MAX);
    Timestamp::from_millis(until.as_millis().saturating_sub(ms)).unwrap_or(until)
}

/// `:shelve` body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShelveRequest {
    /// `timed` (ends after `duration`) or `oneShot` (ends when the alert's source clears).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// For `timed`: how long (`2h`), at most `alerting.maxShelve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Alert {
    /// A new open alert with nothing optional set yet.
    pub fn open(
        id: Uuid,
        tenant_id: Uuid,
        rule_id: String,
        dedup_key: String,
        severity: Severity,
        title: String,
        opened_at: Timestamp,
    ) -> Alert {
        Alert {
            id,
            tenant_id,
            rule_id,
            dedup_key,
            status: AlertStatus::Open,
            severity,
            title,
            object_id: None,
            labels: BTreeMap::new(),
            payload: Value::Null,
            event_ids: Vec::new(),
            escalation_policy: None,
            incident_id: None,
            opened_at,
            acked_at: None,
            acked_by: None,
            snoozed_until: None,
            resolved_at: None,
            auto_close_at: None,
            group_id: None,
            cause: None,
            suppressed_by: None,
            dependents: 0,
            shelved: None,
            flips: Vec::new(),
            refire_until: None,
            first_out: false,
            reopen_until: None,
            reopened: 0,
            ack: None,
        }
    }

    /// A fresh match of the same problem: the severity only rises, title and payload are
    /// replaced.
    pub fn refresh(&mut self, severity: Severity, title: String, payload: Value) {
        if rank(severity) > rank(self.severity) {
            self.severity = severity;
        }
        self.title = title;
        self.payload = payload;
    }

    pub fn remember(&mut self, event: Uuid) {
        self.event_ids.push(event);
        let excess = self.event_ids.len().saturating_sub(EVENT_IDS_KEPT);
        self.event_ids.drain(..excess);
    }

    /// `:ack`, only from open (CONTRACT 3), on `terms`; returns the `ack` event. An acked alert
    /// whose reminder waits for an answer takes an `:ack` again as that answer (`action:
    /// confirmed`).
    pub fn ack(
        &mut self,
        by: &str,
        comment: Option<String>,
        now: Timestamp,
        terms: AckTerms,
    ) -> Result<EventDraft, TransitionError> {
        if self.status == AlertStatus::Acked
            && let Some(held) = self.ack.as_mut().filter(|a| a.withdraw_at.is_some())
        {
            held.withdraw_at = None;
            return Ok(self.event(
                EventType::Ack,
                Severity::Info,
                json!({"alertId": self.id, "by": by, "action": "confirmed",
                       "comment": comment.unwrap_or_default(), "via": terms.via}),
            ));
        }
        if self.status != AlertStatus::Open {
            return Err(TransitionError::NotOpen(self.status));
        }
        self.status = AlertStatus::Acked;
        self.acked_at = Some(now);
        self.acked_by = Some(by.to_string());
        let mut payload = json!({"alertId": self.id, "by": by, "comment": comment.unwrap_or_default(),
                                 "sticky": terms.sticky, "step": terms.step, "via": terms.via});
        if let Some(at) = terms.expires_at {
            payload["expiresAt"] = json!(at);
        }
        self.ack = Some(terms);
        Ok(self.event(EventType::Ack, Severity::Info, payload))
    }

    /// The terms of an ack by `by` at `now` (`via` a path, as `user`), at escalation `step`:
    /// the request's `sticky` and `expiresIn`, else the policy's.
    pub fn ack_terms(
        now: Timestamp,
        req: &AckRequest,
        policy: AckPolicy,
        step: u32,
        via: &str,
        user: Option<Uuid>,
    ) -> AckTerms {
        let expires_in = req.expires_in.or(policy.timeout).filter(|d| !d.0.is_zero());
        let remind_every = policy.reminder.filter(|d| !d.0.is_zero());
        AckTerms {
            sticky: req.sticky.unwrap_or(true),
            expires_at: expires_in.map(|d| now.plus(d.0)),
            remind_every,
            remind_at: remind_every.map(|d| now.plus(d.0)),
            unack_if_no_response: policy.unack_if_no_response.filter(|d| !d.0.is_zero()),
            withdraw_at: None,
            reminders: 0,
            step,
            via: via.to_string(),
            user_id: user,
            ended: None,
        }
    }

    /// What of its acknowledgement is due at `due`: a reminder (its `ack` event, the alert
    /// stays acked), or its end by expiry or an unanswered reminder (open again).
    pub fn ack_due(&mut self, due: Timestamp) -> Option<Result<EventDraft, Unacked>> {
        if self.status != AlertStatus::Acked {
            return None;
        }
        let terms = self.ack.as_mut()?;
        let ending = [
            (terms.expires_at, "expired"),
            (terms.withdraw_at, "withdrawn"),
        ]
        .into_iter()
        .find(|(at, _)| at.is_some_and(|at| at <= due));
        if let Some((_, why)) = ending {
            return Some(Err(self.unack(why)));
        }
        let every = terms.remind_every?;
        if terms.remind_at.is_none_or(|at| at > due) {
            return None;
        }
        terms.reminders += 1;
        terms.remind_at = Some(due.plus(every.0));
        if let Some(wait) = terms.unack_if_no_response
            && terms.withdraw_at.is_none()
        {
            terms.withdraw_at = Some(due.plus(wait.0));
        }
        let payload = json!({
            "alertId": self.id,
            "action": "reminder",
            "by": self.acked_by,
            "userId": terms.user_id,
            "title": self.title,
            "reminders": terms.reminders,
            "withdrawAt": terms.withdraw_at,
        });
        Some(Ok(self.event(EventType::Ack, Severity::Info, payload)))
    }

    /// What a silence of alerts like this one matches: its labels whose values a selector can
    /// carry as they are, and its exact title as a pattern.
    pub fn silence_matchers(&self) -> (String, String) {
        let plain = |v: &str| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        };
        let selector: Vec<String> = self
            .labels
            .iter()
            .filter(|(k, v)| plain(k) && plain(v))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut title = String::from("^");
        for c in self.title.chars() {
            if "\\.+*?()|[]{}^$".contains(c) {
                title.push('\\');
            }
            title.push(c);
        }
        title.push('$');
        (selector.join(","), title)
    }

    /// A non-sticky ack ends when the alert's source changes state or severity again.
    pub fn clear_loose_ack(&mut self) -> Option<Unacked> {
        let loose =
            self.status == AlertStatus::Acked && self.ack.as_ref().is_some_and(|a| !a.sticky);
        loose.then(|| self.unack("cleared"))
    }

    /// Ends the acknowledgement (`why`): open again, with the `ack` event telling the one
    /// who acked, and the step its escalation resumes at.
    fn unack(&mut self, why: &str) -> Unacked {
        let by = self.acked_by.take();
        self.status = AlertStatus::Open;
        self.acked_at = None;
        let (step, user) = match self.ack.as_mut() {
            Some(terms) => {
                terms.ended = Some(why.to_string());
                terms.remind_at = None;
                terms.withdraw_at = None;
                (terms.step, terms.user_id)
            }
            None => (0, None),
        };
        let payload = json!({
            "alertId": self.id,
            "action": why,
            "by": by,
            "userId": user,
            "title": self.title,
            "step": step,
        });
        Unacked {
            event: self.event(EventType::Ack, Severity::Warning, payload),
            step,
        }
    }

    /// When something about it falls due (the alert timers): a snooze's end, its
    /// auto-close, a shelf's end and warning, its acknowledgement's reminder and end, and, once
    /// it cleared, the end of its chatter window.
    pub fn timer_times(&self) -> Vec<Timestamp> {
        let active = self.status.is_active();
        let shelf = self.shelved.as_ref().and_then(|s| s.until);
        let mut out = vec![shelf];
        if active {
            let warning = self
                .shelved
                .as_ref()
                .filter(|s| !s.warned)
                .and(shelf)
                .map(shelf_warning_at);
            out.extend([self.snoozed_until, self.auto_close_at, warning]);
            if self.status == AlertStatus::Acked
                && let Some(terms) = &self.ack
            {
                out.extend([terms.expires_at, terms.remind_at, terms.withdraw_at]);
            }
        } else {
            // A resolved alert's chatter shelf still ends (its notice) and its window lapses.
            out.push(self.refire_until);
        }
        out.into_iter().flatten().collect()
    }

    /// `:snooze`, from open or acked: acked until `until`; returns the `ack` event with a
    /// comment stating the wake time.
    pub fn snooze(
        &mut self,
        by: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<EventDraft, TransitionError> {
        if !self.status.is_active() {
            return Err(TransitionError::Closed(self.status));
        }
        self.status = AlertStatus::Acked;
        self.acked_at = Some(now);
        self.acked_by = Some(by.to_string());
        self.snoozed_until = Some(until);
        self.ack = None;
        Ok(self.event(
            EventType::Ack,
            Severity::Info,
            json!({"alertId": self.id, "by": by, "comment": format!("snoozed until {until}")}),
        ))
    }

    /// A snooze that has run out: open again, with the `escalation` wake-up event (CONTRACT
    /// 3); `None` when the alert is no longer snoozed until `due` or earlier.
    pub fn wake(&mut self, due: Timestamp) -> Option<EventDraft> {
        if self.status != AlertStatus::Acked || self.snoozed_until.is_none_or(|u| u > due) {
            return None;
        }
        self.status = AlertStatus::Open;
        self.snoozed_until = None;
        self.acked_at = None;
        self.acked_by = None;
        Some(self.event(
            EventType::Escalation,
            Severity::Info,
            json!({
                "alertId": self.id,
                "title": self.title,
                "comment": "snooze expired — alarm re-armed",
                "policy": self.escalation_policy,
            }),
        ))
    }

    /// Puts an active alert on a shelf (OPC UA Part 9): it does not page until the shelf ends.
    /// A shelved alert may be shelved again (the new shelf replaces the old).
    pub fn shelve(&mut self, shelf: Shelf) -> Result<EventDraft, TransitionError> {
        if !self.status.is_active() {
            return Err(TransitionError::Closed(self.status));
        }
        let payload = json!({
            "alertId": self.id,
            "action": "shelved",
            "mode": shelf.mode,
            "until": shelf.until,
            "reason": shelf.reason,
            "by": shelf.by,
            "title": self.title,
        });
        self.shelved = Some(shelf);
        Ok(self.event(EventType::Shelve, Severity::Info, payload))
    }

    /// Takes an alert off its shelf (`by` a person, or `shelf expired`).
    pub fn unshelve(&mut self, by: &str) -> Result<EventDraft, TransitionError> {
        if !self.status.is_active() {
            return Err(TransitionError::Closed(self.status));
        }
        let shelf = self.shelved.take().ok_or(TransitionError::NotShelved)?;
        Ok(self.unshelved(&shelf, by))
    }

    fn unshelved(&self, shelf: &Shelf, by: &str) -> EventDraft {
        self.event(
            EventType::Shelve,
            Severity::Info,
            json!({
                "alertId": self.id,
                "action": "unshelved",
                "mode": shelf.mode,
                "by": by,
                "shelvedBy": shelf.by,
                "status": self.status,
                "title": self.title,
            }),
        )
    }

    /// A shelf's timer at `due`: the shelf ends once its time has come (an open alert pages
    /// again; a resolved one's chatter shelf just ends), and `SHELF_WARNING` before a person's
    /// timed shelf ends its shelver is warned, once.
    pub fn shelf_due(&mut self, due: Timestamp) -> Option<EventDraft> {
        let shelf = self.shelved.as_mut()?;
        let until = shelf.until?;
        if until <= due {
            let shelf = self.shelved.take()?;
            return Some(self.unshelved(&shelf, "shelf expired"));
        }
        if shelf.warned
            || shelf.mode != ShelveMode::Timed
            || !self.status.is_active()
            || shelf_warning_at(until) > due
        {
            return None;
        }
        shelf.warned = true;
        let payload = json!({
            "alertId": self.id,
            "action": "expiring",
            "until": until,
            "by": shelf.by,
            "userId": shelf.user_id,
            "title": self.title,
        });
        Some(self.event(EventType::Shelve, Severity::Info, payload))
    }

    /// Its source changed (cleared, or fired again) at `now`: counted toward chatter, the
    /// changes older than `chatter.within` forgotten.
    pub fn flip(&mut self, now: Timestamp, chatter: &Chatter) {
        if chatter.flips == 0 {
            return;
        }
        self.flips.retain(|t| t.plus(chatter.within.0) > now);
        self.flips.push(now);
    }

    /// Its source cleared at `now`: resolved (a chatter shelf first if the change makes it
    /// chatter); with chatter watched, its source firing again within `chatter.within`, or
    /// before its chatter shelf ends, still counts toward its chatter.
    pub fn clear(
        &mut self,
        now: Timestamp,
        chatter: &Chatter,
        reopen_window: std::time::Duration,
    ) -> Result<Vec<EventDraft>, TransitionError> {
        if !self.status.is_active() {
            return Err(TransitionError::Closed(self.status));
        }
        let mut events = Vec::new();
        self.flip(now, chatter);
        events.extend(self.chatter_shelf(now, chatter));
        events.push(self.resolve(now)?);
        self.reopen_until = (!reopen_window.is_zero()).then(|| now.plus(reopen_window));
        let chatter_window = (chatter.flips > 0).then(|| now.plus(chatter.within.0));
        let shelf = self.shelved.as_ref().and_then(|s| s.until);
        self.refire_until = [chatter_window, shelf, self.reopen_until]
            .into_iter()
            .flatten()
            .max();
        Ok(events)
    }

    /// Its source fired again at `now` within its rule's `reopenWindow` after it cleared, or
    /// while its chatter shelf holds: open again (still shelved, for the latter), with an
    /// `alert_opened` event that says `reopened`, and shelved if the change makes it chatter.
    pub fn reopen(&mut self, now: Timestamp, chatter: &Chatter) -> Option<Vec<EventDraft>> {
        let shelved = self.shelved.as_ref().is_some_and(|s| {
            s.mode == ShelveMode::Chatter && s.until.is_some_and(|until| until > now)
        });
        let within = self.reopen_until.is_some_and(|until| until > now);
        if self.status != AlertStatus::Resolved || !(shelved || within) {
            return None;
        }
        self.status = AlertStatus::Open;
        self.resolved_at = None;
        self.acked_at = None;
        self.acked_by = None;
        self.ack = None;
        self.refire_until = None;
        self.reopen_until = None;
        self.reopened += 1;
        self.flip(now, chatter);
        let mut event = self.opened(None);
        event.payload["reopened"] = json!(true);
        Some(
            [event]
                .into_iter()
                .chain(self.chatter_shelf(now, chatter))
                .collect(),
        )
    }

    /// Its source fired again at `now` and opens a new alert: the changes it had within
    /// `chatter.within` pass to that alert, and this one no longer counts.
    pub fn hand_over_flips(&mut self, now: Timestamp, chatter: &Chatter) -> Vec<Timestamp> {
        self.refire_until = None;
        let mut flips = std::mem::take(&mut self.flips);
        flips.retain(|t| t.plus(chatter.within.0) > now);
        flips
    }

    /// More than `chatter.flips` changes within `chatter.within`: shelved for
    /// `chatter.shelve_for` (unless a shelf holds it already), with its `shelve` event.
    pub fn chatter_shelf(&mut self, now: Timestamp, chatter: &Chatter) -> Option<EventDraft> {
        if chatter.flips == 0 || self.flips.len() <= chatter.flips || self.shelved.is_some() {
            return None;
        }
        let shelf = Shelf {
            mode: ShelveMode::Chatter,
            until: Some(now.plus(chatter.shelve_for.0)),
            reason: format!(
                "chattering: {} state changes within {}",
                self.flips.len(),
                chatter.within
            ),
            by: CHATTER_SHELVER.into(),
            user_id: None,
            at: now,
            warned: false,
        };
        self.shelve(shelf).ok()
    }

    /// An active alert past its `autoCloseAfter` becomes `expired`, with no event (SEMANTICS
    /// 3); `false` when it is not due by `due`.
    pub fn expire(&mut self, due: Timestamp) -> bool {
        if !self.status.is_active() || self.auto_close_at.is_none_or(|at| at > due) {
            return false;
        }
        self.status = AlertStatus::Expired;
        self.resolved_at = Some(due);
        self.snoozed_until = None;
        self.shelved = None;
        true
    }

    /// `:resolve` or a clear, from open or acked; returns the `alert_resolved` event.
    /// What messages show and replies name (`ACK 1a2b3c4d`): the last 8 hex digits of the
    /// id, its random part (the first digits of a UUIDv7 are its time, shared by alerts of
    /// the same minute).
    pub fn short_id(&self) -> String {
        short_id(self.id)
    }

    pub fn resolve(&mut self, now: Timestamp) -> Result<EventDraft, TransitionError> {
        if !self.status.is_active() {
            return Err(TransitionError::Closed(self.status));
        }
        self.status = AlertStatus::Resolved;
        self.resolved_at = Some(now);
        self.snoozed_until = None;
        // A one-shot shelf ends when its source clears; any shelf ends with the alert but a
        // chatter shelf, which holds the alert through its flips until its time.
        if self
            .shelved
            .as_ref()
            .is_none_or(|s| s.mode != ShelveMode::Chatter)
        {
            self.shelved = None;
        }
        Ok(self.event(
            EventType::AlertResolved,
            Severity::Ok,
            json!({"alertId": self.id, "title": self.title, "rule": self.rule_id}),
        ))
    }

    /// The `alert_opened` event of a new alert (SPEC 6.2).
    pub fn opened(&self, via: Option<&str>) -> EventDraft {
        let mut payload = json!({
            "alertId": self.id,
            "title": self.title,
            "severity": self.severity,
            "rule": self.rule_id,
            "labels": self.labels,
        });
        if let Some(via) = via {
            payload["via"] = json!(via);
        }
        self.event(EventType::AlertOpened, self.severity, payload)
    }

    /// The `notification` event of an alert opened while a silence or downtime covers it
    /// (CONTRACT 3): it opens, and does not page.
    pub fn suppressed(&self, reason: &str) -> EventDraft {
        self.event(
            EventType::Notification,
            Severity::Info,
            json!({
                "alertId": self.id,
                "stepIndex": 0,
                "channel": "",
                "status": "suppressed",
                "attempt": 0,
                "error": reason,
            }),
        )
    }

    /// A lifecycle event; it carries the alert's labels, so selectors (SSE, webhook
    /// subscriptions) follow an alert through its whole life.
    fn event(&self, kind: EventType, severity: Severity, mut payload: Value) -> EventDraft {
        if !self.labels.is_empty() && payload.get("labels").is_none() {
            payload["labels"] = json!(self.labels);
        }
        let mut draft = EventDraft::new(self.tenant_id, kind, Some(severity), payload);
        draft.object_id = self.object_id;
        draft.source_id = Some(self.id.to_string());
        draft
    }
}

/// Severity order for "only rises".
pub fn rank(s: Severity) -> u8 {
    match s {
        Severity::Ok => 0,
        Severity::Info => 1,
        Severity::Warning => 2,
        Severity::Critical => 3,
    }
}

/// `POST /api/v1/alerts` (CONTRACT 3).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManualAlarm {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default, alias = "summary")]
    pub message: Option<String>,
    #[serde(default)]
    pub severity: Option<String>,
    #[serde(default)]
    pub escalation_policy: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub object_id: Option<Uuid>,
    #[serde(default)]
    pub dedup_key: Option<String>,
}

pub fn short_id(id: Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_string()
}

/// `:snooze` body: `until`, or `duration` from now.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SnoozeRequest {
    #[serde(default)]
    pub until: Option<String>,
    #[serde(default)]
    pub duration: Option<String>,
}

/// `POST /alert-rules:test` (the reference's `ruleTestRequest`): a rule, and demo events or
/// a history window (default the last 24 hours).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleTestRequest {
    #[serde(default)]
    pub rule: Option<Value>,
    #[serde(default)]
    pub demo_events: Option<Vec<Value>>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
}

/// `:ack` body.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AckRequest {
    #[serde(default)]
    pub comment: Option<String>,
    /// Default true: held until the alert resolves; false: the next state or severity change
    /// clears it.
    #[serde(default)]
    pub sticky: Option<bool>,
    /// The ack lapses after this long (default: the policy's `ackTimeout`, else never).
    #[serde(default)]
    pub expires_in: Option<GoDuration>,
}

/// The alert list's filters (SPEC 4.4).
#[derive(Clone, Debug, Default)]
pub struct AlertFilter {
    pub object_id: Option<Uuid>,
    pub rule_id: Option<String>,
    pub incident_id: Option<Uuid>,
    pub statuses: Vec<AlertStatus>,
    pub severities: Vec<Severity>,
    pub since: Option<Timestamp>,
}

impl AlertFilter {
    pub fn matches(&self, a: &Alert) -> bool {
        self.object_id.is_none_or(|o| a.object_id == Some(o))
            && self.rule_id.as_ref().is_none_or(|r| &a.rule_id == r)
            && self.incident_id.is_none_or(|i| a.incident_id == Some(i))
            && (self.statuses.is_empty() || self.statuses.contains(&a.status))
            && (self.severities.is_empty() || self.severities.contains(&a.severity))
            && self.since.is_none_or(|s| a.opened_at >= s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        Alert::open(
            Uuid::from_u128(1),
            Uuid::from_u128(2),
            "r".into(),
            "k".into(),
            Severity::Warning,
            "t".into(),
            Timestamp(jiff::Timestamp::UNIX_EPOCH),
        )
    }

    #[test]
    fn refresh_only_raises_and_keeps_the_last_fifty_events() {
        let mut a = alert();
        for i in 0..60u128 {
            a.refresh(Severity::Info, format!("t{i}"), json!(i));
            a.remember(Uuid::from_u128(i));
        }
        assert_eq!(a.severity, Severity::Warning, "never lowered");
        a.refresh(Severity::Critical, "c".into(), Value::Null);
        a.remember(Uuid::from_u128(99));
        assert_eq!(a.severity, Severity::Critical);
        assert_eq!(a.event_ids.len(), EVENT_IDS_KEPT);
        assert_eq!(a.event_ids.last(), Some(&Uuid::from_u128(99)));
        assert_eq!(a.event_ids[0], Uuid::from_u128(11));
    }

    fn terms(now: Timestamp, req: AckRequest, policy: AckPolicy) -> AckTerms {
        Alert::ack_terms(now, &req, policy, 1, "api", None)
    }

    #[test]
    fn ack_only_from_open_and_resolve_from_open_or_acked() {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let mut a = alert();
        let t = || terms(now, AckRequest::default(), AckPolicy::default());
        assert!(a.ack("ops", None, now, t()).is_ok());
        assert_eq!(
            a.ack("ops", None, now, t()),
            Err(TransitionError::NotOpen(AlertStatus::Acked))
        );
        assert!(a.resolve(now).is_ok());
        assert_eq!(
            a.resolve(now),
            Err(TransitionError::Closed(AlertStatus::Resolved))
        );
    }

    #[test]
    fn an_ack_lapses_at_its_time_and_resumes_at_its_step() {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let mut a = alert();
        let policy = AckPolicy {
            timeout: Some(GoDuration::from_secs(3600)),
            ..AckPolicy::default()
        };
        let req = AckRequest {
            expires_in: Some(GoDuration::from_secs(600)),
            ..AckRequest::default()
        };
        a.ack("ops", None, now, terms(now, req, policy)).unwrap();
        let lapse = now.plus(std::time::Duration::from_secs(600));
        assert_eq!(a.timer_times(), [lapse], "the request's expiresIn wins");
        assert!(
            a.ack_due(now.plus(std::time::Duration::from_secs(599)))
                .is_none()
        );
        let Some(Err(unacked)) = a.ack_due(lapse) else {
            panic!("lapsed")
        };
        assert_eq!((a.status, unacked.step), (AlertStatus::Open, 1));
        assert_eq!(unacked.event.payload["action"], "expired");
        assert_eq!(unacked.event.payload["by"], "ops");
        assert_eq!(a.ack.as_ref().unwrap().ended.as_deref(), Some("expired"));
        assert!(a.acked_by.is_none() && a.timer_times().is_empty());
        let mut b = alert();
        b.ack("ops", None, now, terms(now, AckRequest::default(), policy))
            .unwrap();
        assert_eq!(
            b.ack.as_ref().unwrap().expires_at,
            Some(now.plus(std::time::Duration::from_secs(3600))),
            "the policy's ackTimeout otherwise"
        );
    }

    #[test]
    fn a_reminder_unanswered_withdraws_the_ack_and_an_answer_keeps_it() {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let min = |m: u64| now.plus(std::time::Duration::from_secs(60 * m));
        let policy = AckPolicy {
            reminder: Some(GoDuration::from_secs(1800)),
            unack_if_no_response: Some(GoDuration::from_secs(300)),
            ..AckPolicy::default()
        };
        let mut a = alert();
        a.ack("ops", None, now, terms(now, AckRequest::default(), policy))
            .unwrap();
        let Some(Ok(reminder)) = a.ack_due(min(30)) else {
            panic!("reminded")
        };
        assert_eq!(reminder.payload["action"], "reminder");
        assert_eq!(a.status, AlertStatus::Acked);
        assert_eq!(a.ack.as_ref().unwrap().withdraw_at, Some(min(35)));
        let answer = a.ack(
            "ops",
            Some("still on it".into()),
            min(32),
            terms(min(32), AckRequest::default(), policy),
        );
        assert_eq!(answer.unwrap().payload["action"], "confirmed");
        assert_eq!(a.ack.as_ref().unwrap().withdraw_at, None);
        assert!(a.ack_due(min(35)).is_none(), "answered: nothing due");
        assert!(
            matches!(a.ack_due(min(60)), Some(Ok(_))),
            "the next reminder"
        );
        let Some(Err(withdrawn)) = a.ack_due(min(65)) else {
            panic!("withdrawn")
        };
        assert_eq!(withdrawn.event.payload["action"], "withdrawn");
        assert_eq!(a.status, AlertStatus::Open);
    }

    #[test]
    fn a_loose_ack_is_cleared_by_the_next_change_and_a_sticky_one_is_not() {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let loose = AckRequest {
            sticky: Some(false),
            ..AckRequest::default()
        };
        let mut a = alert();
        a.ack("ops", None, now, terms(now, loose, AckPolicy::default()))
            .unwrap();
        let cleared = a.clear_loose_ack().expect("cleared");
        assert_eq!(cleared.event.payload["action"], "cleared");
        assert_eq!(a.status, AlertStatus::Open);
        let mut b = alert();
        b.ack(
            "ops",
            None,
            now,
            terms(now, AckRequest::default(), AckPolicy::default()),
        )
        .unwrap();
        assert!(b.clear_loose_ack().is_none());
        assert_eq!(b.status, AlertStatus::Acked);
    }

    #[test]
    fn a_cleared_alert_reopens_within_its_window_only() {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let off = Chatter {
            flips: 0,
            ..Chatter::default()
        };
        let window = std::time::Duration::from_secs(900);
        let mut a = alert();
        a.clear(now, &off, window).unwrap();
        assert_eq!(a.refire_until, Some(now.plus(window)));
        let mut late = a.clone();
        assert!(
            late.reopen(now.plus(window), &off).is_none(),
            "past its window"
        );
        let event = a
            .reopen(now.plus(std::time::Duration::from_secs(60)), &off)
            .unwrap();
        assert_eq!(event[0].payload["reopened"], true);
        assert_eq!((a.status, a.reopened), (AlertStatus::Open, 1));
        let mut never = alert();
        never.clear(now, &off, std::time::Duration::ZERO).unwrap();
        assert!(never.refire_until.is_none() && never.reopen(now, &off).is_none());
    }
}
