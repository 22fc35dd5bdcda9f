//! Silences (SPEC 2.9) and downtimes (SPEC 2.11, CONTRACT 3): what suppresses an alert's
//! paging without stopping it from opening.

use super::event::{EventDraft, EventType, Severity};
use super::interval::{Recurrence, TimeInterval, Window};
use super::selector::Selector;
use super::state::CheckState;
use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Silence {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub comment: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text_regex: String,
    pub starts_at: Timestamp,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
    /// The creator's user: told when the silence starts and before it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<Uuid>,
    /// The silence ends once it has matched no alert for this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_when_unmatched_for: Option<GoDuration>,
    /// When it last matched an alert, as its `expireWhenUnmatchedFor` check saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_matched_at: Option<Timestamp>,
    /// What its creator was told already (`started`, `expiring`, `unmatched`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub told: Vec<String>,
}

/// How long before a silence expires its creator is told (when it lasts longer than that).
pub const SILENCE_WARNING: std::time::Duration = std::time::Duration::from_secs(15 * 60);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceBody {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default)]
    pub text_regex: Option<String>,
    #[serde(default)]
    pub starts_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    /// A Go duration (`2h`): the silence ends once it has matched no alert for this long.
    #[serde(default)]
    pub expire_when_unmatched_for: Option<String>,
}

/// `POST /api/v1/silences:preview`: the alerts a silence would hold now.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SilencePreview {
    pub count: usize,
    pub items: Vec<super::alert::Alert>,
}

impl Silence {
    /// Its body as written, expiring at `expires_at` instead: what extending it sends through
    /// the update.
    pub fn body_expiring(&self, expires_at: Timestamp) -> SilenceBody {
        let given = |s: &str| (!s.is_empty()).then(|| s.to_string());
        SilenceBody {
            comment: given(&self.comment),
            selector: given(&self.selector),
            text_regex: given(&self.text_regex),
            starts_at: Some(self.starts_at.to_string()),
            expires_at: Some(expires_at.to_string()),
            expire_when_unmatched_for: self.expire_when_unmatched_for.map(|d| d.to_string()),
        }
    }

    pub fn active(&self, now: Timestamp) -> bool {
        self.starts_at <= now && now < self.expires_at
    }

    /// This silence expired at `now` (`DELETE`): it ends no later than now, and one that had
    /// not begun never does.
    pub fn expired(&self, now: Timestamp) -> Silence {
        let mut s = self.clone();
        s.expires_at = s.expires_at.min(now);
        s.starts_at = s.starts_at.min(s.expires_at);
        s.version += 1;
        s
    }

    /// A `silence` event: `action` `created` (starts later), `started`, `expiring` (within
    /// `SILENCE_WARNING`) or `unmatched` (ended by `expireWhenUnmatchedFor`).
    pub fn event(&self, action: &str) -> EventDraft {
        let mut d = EventDraft::new(
            self.tenant_id,
            EventType::Silence,
            Some(Severity::Info),
            json!({
                "silenceId": self.id,
                "action": action,
                "comment": self.comment,
                "startsAt": self.starts_at,
                "expiresAt": self.expires_at,
                "createdBy": self.created_by,
                "userId": self.user_id,
                "unmatchedFor": self.expire_when_unmatched_for,
            }),
        );
        d.source_id = Some(self.id.to_string());
        d
    }

    /// When its creator is told it is about to expire; none for a silence shorter than that.
    fn warning_at(&self) -> Option<Timestamp> {
        let ms = i64::try_from(SILENCE_WARNING.as_millis()).unwrap_or(i64::MAX);
        let at = Timestamp::from_millis(self.expires_at.as_millis().saturating_sub(ms))?;
        (at > self.starts_at).then_some(at)
    }

    /// When its `expireWhenUnmatchedFor` is checked next.
    fn unmatched_check_at(&self) -> Option<Timestamp> {
        let d = self.expire_when_unmatched_for?;
        Some(self.last_matched_at.unwrap_or(self.starts_at).plus(d.0))
    }

    fn told(&self, what: &str) -> bool {
        self.told.iter().any(|t| t == what)
    }

    /// The times something is due for this silence before it expires: its start and the
    /// warning (each untold), its next unmatched check; none once it ended unmatched.
    pub fn timers(&self) -> Vec<Timestamp> {
        if self.told("unmatched") {
            return Vec::new();
        }
        let start = (!self.told("started")).then_some(self.starts_at);
        let warning = self.warning_at().filter(|_| !self.told("expiring"));
        [start, warning, self.unmatched_check_at()]
            .into_iter()
            .flatten()
            .filter(|at| *at < self.expires_at)
            .collect()
    }

    /// What is due by `at`: its creator told it started or is about to expire, and with
    /// `expireWhenUnmatchedFor` the check, `matched_since(t)` answering whether it matched an
    /// alert since `t`: it did (checked again later) or it expires now. Returns the events.
    pub fn due(
        &mut self,
        at: Timestamp,
        matched_since: impl FnOnce(Timestamp) -> bool,
    ) -> Vec<EventDraft> {
        let mut events = Vec::new();
        if self.expires_at <= at {
            return events;
        }
        if !self.told("started") && self.starts_at <= at {
            self.told.push("started".into());
            events.push(self.event("started"));
        }
        if !self.told("expiring") && self.warning_at().is_some_and(|w| w <= at) {
            self.told.push("expiring".into());
            events.push(self.event("expiring"));
        }
        if let Some(check) = self.unmatched_check_at().filter(|c| *c <= at) {
            let since = self.last_matched_at.unwrap_or(self.starts_at);
            if matched_since(since) {
                self.last_matched_at = Some(at);
            } else {
                self.expires_at = check.min(at);
                self.told.push("unmatched".into());
                events.push(self.event("unmatched"));
            }
        }
        if !events.is_empty() || self.last_matched_at == Some(at) {
            self.version += 1;
        }
        events
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Downtime {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub comment: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub selector: String,
    /// `fixed` or `flexible`.
    #[serde(rename = "type")]
    pub kind: String,
    pub start: Timestamp,
    pub end: Timestamp,
    /// A flexible downtime's length, in seconds, from the first problem inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
    /// This long before the window starts, and when it ends, whom the first step of
    /// `escalationPolicy` pages now is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice_before: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    /// The notices given (of a recurring one: for its current window): `starting`, `ended`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub told: Vec<String>,
    /// Recurring (Alertmanager's `time_intervals`): in effect between `start` and `end` only
    /// within these windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_intervals: Vec<TimeInterval>,
    /// A recurring one's windows whose notices were all given end by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told_until: Option<Timestamp>,
    /// An iCalendar feed (RFC 5545) whose events are its windows between `start` and `end`,
    /// read by the main every 15 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar_url: Option<String>,
    /// What the feed last gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<CalendarState>,
    /// A recurring one's next windows as of the answer (up to 5), not stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub occurrences: Vec<Window>,
    /// On a main: the federation sites it is shipped to, in their pulled bundles (by
    /// `selector`: the objects it covers are the site's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<String>,
    /// On a site: it came from the main in the site's bundle, and is changed there only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_main: bool,
    /// Whether a host's downtime covers its services too (the default, and always so for a
    /// selector's): `false` holds the host alone, as Icinga's host downtime without
    /// `all_services`.
    #[serde(default = "covers_services", skip_serializing_if = "is_true")]
    pub services: bool,
}

/// A downtime as a main ships it to a site: the body of a `downtimes` document (named by its
/// id) in the bundle the site pulls. What the site decides of it (notices given, a flexible
/// one's start) stays the site's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShippedDowntime {
    pub comment: String,
    pub selector: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub start: Timestamp,
    pub end: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice_before: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_intervals: Vec<TimeInterval>,
    /// Shown at the site; the site does not read it (the main did: `calendar`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<CalendarState>,
    pub created_at: Timestamp,
    pub created_by: String,
}

impl ShippedDowntime {
    /// What a site checks before it keeps one: the terms its main checked at save.
    pub fn check(&self) -> Result<(), String> {
        self.selector
            .parse::<Selector>()
            .map_err(|e| format!("selector: {e}"))?;
        if self.selector.is_empty() {
            return Err("a shipped downtime covers by selector".into());
        }
        if self.end <= self.start {
            return Err("end must be after start".into());
        }
        match (self.kind.as_str(), self.duration) {
            ("fixed", _) | ("flexible", Some(1..)) => {}
            _ => return Err("type is fixed, or flexible with a duration".into()),
        }
        super::config::check_time_intervals(&self.time_intervals).map_err(|e| e.detail)
    }

    /// The site's downtime `id` with these terms, its own decisions kept from `old`; `None`
    /// when `old` already has them.
    pub fn received(self, tenant: Uuid, id: Uuid, old: Option<&Downtime>) -> Option<Downtime> {
        let mut new = Downtime {
            id,
            tenant_id: tenant,
            comment: self.comment,
            object_id: None,
            selector: self.selector,
            kind: self.kind,
            start: self.start,
            end: self.end,
            duration: self.duration,
            started_at: None,
            created_at: self.created_at,
            created_by: self.created_by,
            version: 1,
            notice_before: self.notice_before,
            escalation_policy: self.escalation_policy,
            told: Vec::new(),
            time_intervals: self.time_intervals,
            told_until: None,
            calendar_url: self.calendar_url,
            calendar: self.calendar,
            occurrences: Vec::new(),
            sites: Vec::new(),
            from_main: true,
            services: true,
        };
        if let Some(old) = old {
            new.started_at = old.started_at.filter(|_| new.kind == old.kind);
            new.told.clone_from(&old.told);
            new.told_until = old.told_until;
            new.version = old.version;
            if new == *old {
                return None;
            }
            new.version += 1;
        }
        Some(new)
    }
}

/// A calendar downtime's feed as last read: its windows (those ending within the next 90
/// days, at most 500), when, and what failed or was not read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CalendarState {
    #[serde(default)]
    pub windows: Vec<Window>,
    /// The read that gave these (a later read giving the same is not stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<Timestamp>,
    /// The last read that failed (the windows are the last read that worked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DowntimeBody {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub object_id: Option<String>,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
    /// Seconds, or a Go duration string (`2h`).
    #[serde(default)]
    pub duration: Option<serde_json::Value>,
    /// A Go duration (`10m`): the notice ahead of the window, to the policy's first step.
    #[serde(default)]
    pub notice_before: Option<String>,
    /// Whose first step is told, with `noticeBefore`.
    #[serde(default)]
    pub escalation_policy: Option<String>,
    /// Recurring windows within `start` to `end` (fixed downtimes only).
    #[serde(default)]
    pub time_intervals: Option<Vec<TimeInterval>>,
    /// An iCalendar feed whose events are its windows (fixed downtimes only).
    #[serde(default)]
    pub calendar_url: Option<String>,
    /// Federation sites to ship it to (by selector), in the bundles they pull.
    #[serde(default)]
    pub sites: Option<Vec<String>>,
    /// A host's downtime: whether it covers the host's services too (default `true`).
    #[serde(default)]
    pub services: Option<bool>,
}

fn covers_services() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Downtime {
    /// Its body as written, ending at `end` instead: what extending it sends through the
    /// update (so an extension is checked and recorded as any edit).
    pub fn body_ending(&self, end: Timestamp) -> DowntimeBody {
        let given = |s: &str| (!s.is_empty()).then(|| s.to_string());
        DowntimeBody {
            comment: given(&self.comment),
            object_id: self.object_id.map(|o| o.to_string()),
            selector: given(&self.selector),
            kind: Some(self.kind.clone()),
            start: Some(self.start.to_string()),
            end: Some(end.to_string()),
            duration: self.duration.map(serde_json::Value::from),
            notice_before: self.notice_before.map(|d| d.to_string()),
            escalation_policy: self.escalation_policy.clone(),
            time_intervals: (!self.time_intervals.is_empty()).then(|| self.time_intervals.clone()),
            calendar_url: self.calendar_url.clone(),
            sites: (!self.sites.is_empty()).then(|| self.sites.clone()),
            services: Some(self.services),
        }
    }

    /// As shipped to the sites it names (`ShippedDowntime`).
    pub fn shipped(&self) -> ShippedDowntime {
        ShippedDowntime {
            comment: self.comment.clone(),
            selector: self.selector.clone(),
            kind: self.kind.clone(),
            start: self.start,
            end: self.end,
            duration: self.duration,
            notice_before: self.notice_before,
            escalation_policy: self.escalation_policy.clone(),
            time_intervals: self.time_intervals.clone(),
            calendar_url: self.calendar_url.clone(),
            calendar: self.calendar.clone(),
            created_at: self.created_at,
            created_by: self.created_by.clone(),
        }
    }

    fn told(&self, notice: &str) -> bool {
        self.told.iter().any(|t| t == notice)
    }

    /// Up to `count` of its windows that end after `from`: its own, or a recurring one's
    /// within its start and end.
    pub fn windows(&self, from: Timestamp, count: usize) -> Vec<Window> {
        if self.calendar_url.is_some() {
            let read = self.calendar.as_ref().map(|c| c.windows.as_slice());
            return read
                .unwrap_or_default()
                .iter()
                .map(|w| Window {
                    start: w.start.max(self.start),
                    end: w.end.min(self.end),
                })
                .filter(|w| w.start < w.end && w.end > from)
                .take(count)
                .collect();
        }
        if self.time_intervals.is_empty() {
            let own = Window {
                start: self.start,
                end: self.end,
            };
            return (own.end > from)
                .then_some(own)
                .into_iter()
                .take(count)
                .collect();
        }
        let mut windows =
            Recurrence::stored(&self.time_intervals).windows(from.max(self.start), count);
        windows.retain(|w| w.start < self.end);
        for w in &mut windows {
            w.start = w.start.max(self.start);
            w.end = w.end.min(self.end);
        }
        windows
    }

    /// Whether it recurs: by its intervals or its calendar's events.
    pub fn recurs(&self) -> bool {
        !self.time_intervals.is_empty() || self.calendar_url.is_some()
    }

    /// As answered at `now`: a recurring one with its next windows.
    pub fn answered(mut self, now: Timestamp) -> Downtime {
        if self.recurs() {
            self.occurrences = self.windows(now, 5);
        }
        self
    }

    /// The window its notices are about: its own, or a recurring one's first whose notices
    /// were not all given (none over before it was created).
    fn current_window(&self) -> Option<Window> {
        let from = self.told_until.unwrap_or(self.created_at);
        self.windows(from, 1).into_iter().next()
    }

    /// Its notices (with `noticeBefore` and a policy) for its current window: ahead of its
    /// start, and at its end.
    fn notices(&self) -> Vec<(&'static str, Timestamp, Window)> {
        match (
            self.notice_before
                .filter(|_| self.escalation_policy.is_some()),
            self.current_window(),
        ) {
            (Some(ahead), Some(w)) => {
                vec![("starting", w.start.minus(ahead.0), w), ("ended", w.end, w)]
            }
            _ => Vec::new(),
        }
    }

    /// When its notices not given yet are due.
    pub fn timers(&self) -> Vec<Timestamp> {
        let notices = self.notices().into_iter();
        notices
            .filter(|(n, _, _)| !self.told(n))
            .map(|(_, at, _)| at)
            .collect()
    }

    /// The notices due by `at`, as `downtime` events (`action: starting`, `ended`, with the
    /// window's `start` and `end`); a recurring one goes on to its next window once both of
    /// a window's are given. A window wholly past by `at` (the server was down) is not
    /// announced as starting, and only the last such is announced as ended.
    pub fn due(&mut self, at: Timestamp) -> Vec<EventDraft> {
        let mut events = Vec::new();
        // Bounded: a server down for long catches up on a few windows' end notices only.
        for _ in 0..16 {
            let notices = self.notices();
            let Some((_, _, window)) = notices.first().copied() else {
                break;
            };
            // A window followed by one that began by `at` too is told of no more.
            let passed = self
                .windows(window.end, 1)
                .first()
                .is_some_and(|next| next.start <= at);
            for (notice, when, w) in notices {
                if when <= at && !self.told(notice) {
                    self.told.push(notice.into());
                    if passed || (notice == "starting" && w.end <= at) {
                        continue;
                    }
                    let mut e = self.event();
                    e.payload["action"] = json!(notice);
                    e.payload["escalationPolicy"] = json!(self.escalation_policy);
                    e.payload["start"] = json!(w.start);
                    e.payload["end"] = json!(w.end);
                    events.push(e);
                }
            }
            let all_told = self.told("starting") && self.told("ended");
            if !self.recurs() || !all_told || self.windows(window.end, 1).is_empty() {
                break;
            }
            self.told_until = Some(window.end);
            self.told.clear();
        }
        events
    }

    /// Whether it is over at `now`: past its end, or, flexible and started, past its
    /// duration.
    pub fn over(&self, now: Timestamp) -> bool {
        match (self.kind.as_str(), self.started_at, self.duration) {
            ("flexible", Some(started), Some(secs)) => {
                started.plus(std::time::Duration::from_secs(secs)) <= now && self.end <= now
            }
            _ => self.end <= now,
        }
    }

    /// When it is in effect: fixed `[start, end)`; flexible from its start (the first problem
    /// inside the window) for `duration`.
    pub fn active(&self, now: Timestamp) -> bool {
        match (self.kind.as_str(), self.started_at, self.duration) {
            ("flexible", Some(started), Some(secs)) => {
                started <= now && now < started.plus(std::time::Duration::from_secs(secs))
            }
            ("flexible", _, _) => false,
            _ => {
                self.start <= now
                    && now < self.end
                    && match (&self.calendar_url, self.time_intervals.is_empty()) {
                        (Some(_), _) => {
                            self.windows(now, 1).first().is_some_and(|w| w.start <= now)
                        }
                        (None, true) => true,
                        (None, false) => Recurrence::stored(&self.time_intervals).contains(now),
                    }
            }
        }
    }

    /// This downtime ended at `now` (`DELETE`): its window closes no later than now, and a
    /// started flexible one lasts only as long as it ran.
    pub fn ended(&self, now: Timestamp) -> Downtime {
        let mut d = self.clone();
        d.end = d.end.min(now);
        d.start = d.start.min(d.end);
        if let Some(started) = d.started_at {
            let ran = now.since(started).as_secs();
            d.duration = d.duration.map(|secs| secs.min(ran));
        }
        d.version += 1;
        d
    }

    /// Whether it covers an object (whose host is `host`): by id, a host's downtime covering
    /// its services, or by `selector` (this downtime's, parsed) on the object's labels.
    pub fn covers(
        &self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &BTreeMap<String, String>,
        selector: &Selector,
    ) -> bool {
        match self.object_id {
            Some(id) => id == object || (self.services && host == Some(id)),
            None => !self.selector.is_empty() && selector.matches(labels),
        }
    }

    pub fn event(&self) -> EventDraft {
        let mut d = EventDraft::new(
            self.tenant_id,
            EventType::Downtime,
            Some(Severity::Info),
            json!({"downtimeId": self.id, "comment": self.comment, "start": self.start, "end": self.end}),
        );
        d.object_id = self.object_id;
        d.source_id = Some(self.id.to_string());
        d
    }
}

/// A saved selector, parsed; one that no longer parses (a grammar change) matches nothing,
/// and says so in the log.
pub fn stored_selector(text: &str) -> Selector {
    text.parse().unwrap_or_else(|e| {
        tracing::error!(selector = text, error = %e, "a saved selector no longer parses; it matches nothing");
        Selector::nothing()
    })
}

/// The downtimes in effect at one moment, each with its selector parsed once: what covers an
/// object, for its live state's `downtimeDepth` and for holding its alerts' notifications.
pub struct ActiveDowntimes(Vec<(Downtime, Selector)>);

impl ActiveDowntimes {
    pub fn new(downtimes: Vec<Downtime>, now: Timestamp) -> Self {
        Self(
            downtimes
                .into_iter()
                .filter(|d| d.active(now))
                .map(|d| {
                    let selector = stored_selector(&d.selector);
                    (d, selector)
                })
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Those covering an object whose host is `host` and whose effective labels are `labels`.
    pub fn covering<'a>(
        &'a self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &'a BTreeMap<String, String>,
    ) -> impl Iterator<Item = &'a Downtime> {
        self.0
            .iter()
            .filter(move |(d, selector)| d.covers(object, host, labels, selector))
            .map(|(d, _)| d)
    }

    /// How many cover that object: its live state's `downtimeDepth`.
    pub fn depth(
        &self,
        object: Uuid,
        host: Option<Uuid>,
        labels: &BTreeMap<String, String>,
    ) -> u32 {
        u32::try_from(self.covering(object, host, labels).count()).unwrap_or(u32::MAX)
    }
}

/// Live states as one read found them, with what their downtime depth is worked out from: the
/// downtimes stored, each state's object's host and own labels (read only when a downtime is
/// stored), and the moment of the read.
pub struct LiveStates {
    pub states: Vec<CheckState>,
    pub downtimes: Vec<Downtime>,
    pub placement: HashMap<Uuid, (Option<Uuid>, BTreeMap<String, String>)>,
    pub at: Timestamp,
}

impl LiveStates {
    /// The states, each with its `downtimeDepth`: how many downtimes in effect at the read
    /// cover its object, on the object's effective labels from `labels`, else its own. A state
    /// whose object is gone keeps depth 0.
    pub fn covered(
        self,
        labels: &dyn Fn(Uuid) -> Option<BTreeMap<String, String>>,
    ) -> Vec<CheckState> {
        let active = ActiveDowntimes::new(self.downtimes, self.at);
        let mut states = self.states;
        if active.is_empty() {
            return states;
        }
        for s in &mut states {
            if let Some((host, own)) = self.placement.get(&s.object_id) {
                let effective = labels(s.object_id);
                s.downtime_depth =
                    active.depth(s.object_id, *host, effective.as_ref().unwrap_or(own));
            }
        }
        states
    }

    /// `covered`, by object id.
    pub fn covered_by_object(
        self,
        labels: &dyn Fn(Uuid) -> Option<BTreeMap<String, String>>,
    ) -> HashMap<Uuid, CheckState> {
        self.covered(labels)
            .into_iter()
            .map(|s| (s.object_id, s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn silence(starts_at: &str, expires_at: &str) -> Silence {
        Silence {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            comment: "maintenance".into(),
            selector: "env=prod".into(),
            text_regex: String::new(),
            starts_at: at(starts_at),
            expires_at: at(expires_at),
            created_at: at("2026-03-01T00:00:00Z"),
            created_by: "ops".into(),
            version: 3,
            user_id: None,
            expire_when_unmatched_for: None,
            last_matched_at: None,
            told: Vec::new(),
        }
    }

    fn downtime(kind: &str, started_at: Option<&str>, duration: Option<u64>) -> Downtime {
        Downtime {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            comment: "patching".into(),
            object_id: Some(Uuid::from_u128(3)),
            selector: String::new(),
            kind: kind.into(),
            start: at("2026-03-01T08:00:00Z"),
            end: at("2026-03-01T12:00:00Z"),
            duration,
            started_at: started_at.map(at),
            created_at: at("2026-03-01T00:00:00Z"),
            created_by: "ops".into(),
            version: 1,
            notice_before: None,
            escalation_policy: None,
            told: Vec::new(),
            time_intervals: Vec::new(),
            told_until: None,
            calendar_url: None,
            calendar: None,
            occurrences: Vec::new(),
            sites: Vec::new(),
            from_main: false,
            services: true,
        }
    }

    /// A site keeps a shipped downtime with what it decided of it (the notices it gave, a
    /// flexible one's start): the same terms again change nothing; new ones are a new version.
    #[test]
    fn a_shipped_downtime_keeps_what_the_site_decided() {
        let mut main = downtime("flexible", Some("2026-03-01T09:00:00Z"), Some(3600));
        main.object_id = None;
        main.selector = "site=lab".into();
        main.sites = vec!["north".into()];
        main.told = vec!["starting".into()];
        let terms = main.shipped();
        assert_eq!(terms.check(), Ok(()));
        let (tenant, id) = (Uuid::from_u128(9), main.id);
        let first = terms.clone().received(tenant, id, None).unwrap();
        assert!(first.from_main && first.sites.is_empty() && first.told.is_empty());
        assert_eq!(
            (first.started_at, first.version),
            (None, 1),
            "the site's own start"
        );
        let mut site = first.clone();
        site.started_at = Some(at("2026-03-01T10:00:00Z"));
        site.told = vec!["starting".into()];
        assert_eq!(terms.clone().received(tenant, id, Some(&site)), None);
        let mut moved = terms.clone();
        moved.end = at("2026-03-01T14:00:00Z");
        let new = moved.received(tenant, id, Some(&site)).unwrap();
        assert_eq!(new.version, 2);
        assert_eq!(new.started_at, site.started_at);
        assert_eq!(new.told, site.told);
        let mut by_nothing = terms;
        by_nothing.selector = String::new();
        assert!(by_nothing.check().is_err());
    }

    /// With `noticeBefore` and a policy, a downtime tells ahead of its start and at its end,
    /// each once; without either, it has no timer.
    #[test]
    fn a_downtime_tells_ahead_of_its_window_and_at_its_end() {
        let mut d = downtime("fixed", None, None);
        assert!(d.timers().is_empty());
        d.notice_before = Some(GoDuration::from_secs(600));
        assert!(d.timers().is_empty(), "nobody to tell");
        d.escalation_policy = Some("page".into());
        assert_eq!(
            d.timers(),
            [at("2026-03-01T07:50:00Z"), at("2026-03-01T12:00:00Z")]
        );
        assert!(d.due(at("2026-03-01T07:49:00Z")).is_empty());
        let ahead = d.due(at("2026-03-01T07:50:00Z"));
        assert_eq!(ahead[0].payload["action"], "starting");
        assert!(d.due(at("2026-03-01T08:00:00Z")).is_empty(), "once");
        assert_eq!(d.timers(), [at("2026-03-01T12:00:00Z")]);
        assert_eq!(
            d.due(at("2026-03-01T12:00:00Z"))[0].payload["action"],
            "ended"
        );
        assert!(d.timers().is_empty());
    }

    /// A recurring downtime is in effect only within its windows, tells ahead of and at the
    /// end of each, and after a long gap tells only the end of the last window missed.
    #[test]
    fn a_recurring_downtime_tells_each_window() {
        let mut d = downtime("fixed", None, None);
        d.start = at("2027-03-01T00:00:00Z");
        d.end = at("2027-04-30T00:00:00Z");
        d.created_at = d.start;
        d.time_intervals = serde_json::from_value(json!([{
            "times": [{"startTime": "22:00", "endTime": "24:00"}],
            "weekdays": ["saturday"],
            "location": "Europe/Berlin"
        }]))
        .unwrap();
        d.notice_before = Some(GoDuration::from_secs(600));
        d.escalation_policy = Some("page".into());
        assert!(!d.active(at("2027-03-06T20:59:00Z")));
        assert!(d.active(at("2027-03-06T21:00:00Z")));
        assert!(d.active(at("2027-04-03T20:00:00Z")), "22:00 in summer time");
        assert_eq!(
            d.timers(),
            [at("2027-03-06T20:50:00Z"), at("2027-03-06T23:00:00Z")]
        );
        let ahead = d.due(at("2027-03-06T20:50:00Z"));
        assert_eq!(ahead[0].payload["action"], "starting");
        assert_eq!(ahead[0].payload["start"], "2027-03-06T21:00:00.000Z");
        assert_eq!(
            d.due(at("2027-03-06T23:00:00Z"))[0].payload["action"],
            "ended"
        );
        assert_eq!(
            d.timers(),
            [at("2027-03-13T20:50:00Z"), at("2027-03-13T23:00:00Z")],
            "the next window's"
        );
        let missed = d.due(at("2027-04-03T19:00:00Z"));
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert_eq!(missed[0].payload["action"], "ended");
        assert_eq!(missed[0].payload["end"], "2027-03-27T23:00:00.000Z");
        assert_eq!(d.timers()[0], at("2027-04-03T19:50:00Z"));
        assert_eq!(
            d.clone()
                .answered(at("2027-04-12T00:00:00Z"))
                .occurrences
                .len(),
            2
        );
    }

    /// A silence's creator is told once when it starts and once 15 minutes before it expires;
    /// `expireWhenUnmatchedFor` keeps it while it matches and ends it once it has not.
    #[test]
    fn a_silence_tells_its_start_and_end_and_expires_unmatched() {
        let actions = |events: &[EventDraft]| -> Vec<String> {
            events
                .iter()
                .map(|e| e.payload["action"].as_str().unwrap().to_string())
                .collect()
        };
        let mut s = silence("2026-03-01T08:00:00Z", "2026-03-01T10:00:00Z");
        s.expire_when_unmatched_for = Some(GoDuration(std::time::Duration::from_secs(1800)));
        let timers = s.timers();
        assert_eq!(
            timers,
            vec![
                at("2026-03-01T08:00:00Z"),
                at("2026-03-01T09:45:00Z"),
                at("2026-03-01T08:30:00Z")
            ]
        );
        let started = s.due(at("2026-03-01T08:00:00Z"), |_| unreachable!());
        assert_eq!(actions(&started), ["started"]);
        assert!(
            s.due(at("2026-03-01T08:00:00Z"), |_| true).is_empty(),
            "once"
        );
        let kept = s.due(at("2026-03-01T08:30:00Z"), |since| {
            assert_eq!(since, at("2026-03-01T08:00:00Z"));
            true
        });
        assert!(kept.is_empty());
        assert_eq!(s.last_matched_at, Some(at("2026-03-01T08:30:00Z")));
        assert!(
            s.timers().contains(&at("2026-03-01T09:00:00Z")),
            "checked again"
        );
        let ended = s.due(at("2026-03-01T09:00:00Z"), |_| false);
        assert_eq!(actions(&ended), ["unmatched"]);
        assert_eq!(s.expires_at, at("2026-03-01T09:00:00Z"));
        assert!(s.timers().is_empty(), "an expired silence has nothing due");

        let mut long = silence("2026-03-01T08:00:00Z", "2026-03-01T10:00:00Z");
        long.told.push("started".into());
        let warned = long.due(at("2026-03-01T09:50:00Z"), |_| true);
        assert_eq!(actions(&warned), ["expiring"]);
        let short = silence("2026-03-01T08:00:00Z", "2026-03-01T08:10:00Z");
        assert_eq!(
            short.timers(),
            vec![at("2026-03-01T08:00:00Z")],
            "too short to warn"
        );
    }

    #[test]
    fn an_expired_silence_ends_now_and_one_not_begun_never_begins() {
        let now = at("2026-03-01T09:00:00Z");
        let running = silence("2026-03-01T08:00:00Z", "2026-03-01T10:00:00Z").expired(now);
        assert_eq!(running.expires_at, now);
        assert_eq!(running.starts_at, at("2026-03-01T08:00:00Z"));
        assert_eq!(running.version, 4);
        assert!(!running.active(now));
        let ahead = silence("2026-03-02T08:00:00Z", "2026-03-02T10:00:00Z").expired(now);
        assert_eq!((ahead.starts_at, ahead.expires_at), (now, now));
        let past = silence("2026-03-01T06:00:00Z", "2026-03-01T07:00:00Z").expired(now);
        assert_eq!(past.expires_at, at("2026-03-01T07:00:00Z"));
    }

    #[test]
    fn an_ended_downtime_closes_its_window_and_keeps_what_a_flexible_one_ran() {
        let now = at("2026-03-01T09:00:00Z");
        let fixed = downtime("fixed", None, None).ended(now);
        assert_eq!((fixed.start, fixed.end), (at("2026-03-01T08:00:00Z"), now));
        assert!(!fixed.active(now));
        assert_eq!(fixed.version, 2);
        let flexible = downtime("flexible", Some("2026-03-01T08:30:00Z"), Some(7200)).ended(now);
        assert_eq!(flexible.duration, Some(1800));
        assert!(!flexible.active(now));
        let early = downtime("fixed", None, None).ended(at("2026-03-01T07:00:00Z"));
        assert_eq!(early.start, early.end);
    }

    #[test]
    fn active_downtimes_count_what_covers_an_object() {
        let now = at("2026-03-01T09:00:00Z");
        let (host, service) = (Uuid::from_u128(3), Uuid::from_u128(4));
        let mut by_selector = downtime("fixed", None, None);
        by_selector.object_id = None;
        by_selector.selector = "site=north".into();
        let mut broken = by_selector.clone();
        broken.selector = "site in (".into();
        let mut later = downtime("fixed", None, None);
        later.start = at("2026-03-01T10:00:00Z");
        let active = ActiveDowntimes::new(
            vec![downtime("fixed", None, None), by_selector, broken, later],
            now,
        );
        let north: BTreeMap<String, String> = [("site".into(), "north".into())].into();
        let south: BTreeMap<String, String> = [("site".into(), "south".into())].into();
        assert_eq!(active.depth(host, None, &north), 2, "by id and by selector");
        assert_eq!(active.depth(service, Some(host), &south), 1, "its host's");
        assert_eq!(active.depth(Uuid::from_u128(9), None, &south), 0);
        assert!(ActiveDowntimes::new(Vec::new(), now).is_empty());
    }

    /// Depth counts on the effective labels where the caller knows them, else the object's
    /// own; a state whose object the read did not find keeps 0.
    #[test]
    fn live_states_are_covered_on_effective_labels() {
        let state = |id: u128| -> CheckState {
            serde_json::from_value(json!({
                "objectId": Uuid::from_u128(id), "state": 1, "stateType": "hard", "attempt": 1,
                "output": "down", "lastCheck": "2026-03-01T08:30:00Z",
                "lastChange": "2026-03-01T08:30:00Z",
            }))
            .unwrap()
        };
        let mut by_selector = downtime("fixed", None, None);
        by_selector.object_id = None;
        by_selector.selector = "site=north".into();
        let own_north: BTreeMap<String, String> = [("site".into(), "north".into())].into();
        let read = LiveStates {
            states: vec![state(5), state(6), state(7)],
            downtimes: vec![by_selector],
            placement: [
                (Uuid::from_u128(5), (None, own_north.clone())),
                (Uuid::from_u128(6), (None, BTreeMap::new())),
            ]
            .into(),
            at: at("2026-03-01T09:00:00Z"),
        };
        let effective = |id: Uuid| (id == Uuid::from_u128(6)).then(|| own_north.clone());
        let depths: Vec<u32> = read
            .covered(&effective)
            .iter()
            .map(|s| s.downtime_depth)
            .collect();
        assert_eq!(depths, [1, 1, 0], "own labels, effective labels, no object");
    }
}
