//! Shift handoffs: when the person a schedule puts on call changes (a rotation's handover, an
//! override starting or ending), the incoming person is told through their preferred channel,
//! as PagerDuty does and the reference never built. A contact's `handoffNotices` (issue 70)
//! add: notices `advance` of each shift, one when a shift ends (`offCall`), one when a
//! schedule change moves their shifts in the next 14 days (`scheduleChanged`), and the
//! handover digest on the handover notices (`digest`). Each notice is recorded with its
//! deliveries in one transaction (the handoffs table keeps which shift each kind of notice
//! was last about), so a restart neither repeats nor loses one; a notice more than `GRACE`
//! late (the service was down through it) is recorded without a message.

use super::directory::{Directory, Named};
use super::{IDLE, Notifier};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertFilter, AlertStatus};
use crate::model::event::Severity;
use crate::model::notify::{Contact, Delivery, HANDOFF_HORIZON, Message, OnCallShift, Schedule};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::StoreError;
use crate::store::{TxResult, Wrote};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

const GRACE: Duration = Duration::from_secs(600);
const DAY: Duration = Duration::from_secs(86_400);
/// The settings key of a schedule's shifts as last told (`scheduleChanged`).
fn shifts_key(schedule: Uuid) -> String {
    format!("oncall/shifts/{schedule}")
}

/// One schedule's look at `now`: its tenant's directory and its shifts from a day back to
/// the horizon.
struct Pass<'a> {
    dir: &'a Directory,
    tenant: Uuid,
    schedule: &'a Named<Schedule>,
    shifts: &'a [OnCallShift],
    now: Timestamp,
}

/// What one pass decided for a schedule: the deliveries, the marks to keep, the shifts to
/// remember.
#[derive(Default)]
struct Told {
    deliveries: Vec<Delivery>,
    marks: Vec<(String, Timestamp)>,
    shifts: Option<Value>,
}

/// A contact's shifts as remembered for `scheduleChanged`: `[start, end]` in milliseconds.
fn spans(shifts: &[OnCallShift], contact: &str, from: Timestamp, to: Timestamp) -> Vec<[i64; 2]> {
    let mut out: Vec<[i64; 2]> = Vec::new();
    for s in shifts
        .iter()
        .filter(|s| s.contact_id == contact && s.end > from && s.start < to)
    {
        let span = [s.start.max(from).as_millis(), s.end.min(to).as_millis()];
        match out.last_mut() {
            // A shift split by layers or an override that keeps the same person is one.
            Some(last) if last[1] == span[0] => last[1] = span[1],
            _ => out.push(span),
        }
    }
    out
}

/// A shift notice (kind `handoff`).
fn handoff_message(title: String, text: String, now: Timestamp) -> Message {
    Message::notice("handoff", title, text, Severity::Info.as_str(), now)
}

/// Whether `s` starts a stretch on call for its person (the shift before it is someone
/// else's, or there is a gap).
fn going_on(shifts: &[OnCallShift], i: usize) -> bool {
    i == 0
        || shifts[i - 1].contact_id != shifts[i].contact_id
        || shifts[i - 1].end < shifts[i].start
}

impl Notifier {
    /// The handover digest of `schedule` for a shift ending at `until`: the open and
    /// acknowledged alerts of the policies it serves, their shelves, the silences and
    /// downtimes that expire during the shift, the sites whose uplink is lost.
    async fn digest(
        &self,
        dir: &Directory,
        tenant: Uuid,
        schedule: &str,
        until: Timestamp,
    ) -> Result<String, StoreError> {
        let policies = dir.policies_serving(schedule);
        let filter = AlertFilter {
            statuses: vec![AlertStatus::Open, AlertStatus::Acked],
            ..AlertFilter::default()
        };
        let alerts: Vec<Alert> = self
            .store
            .alerts(tenant, filter, None, 1000)
            .await?
            .into_iter()
            .filter(|a| {
                a.escalation_policy
                    .as_ref()
                    .is_some_and(|p| policies.contains(&p.as_str()))
            })
            .collect();
        let count = |s: AlertStatus| alerts.iter().filter(|a| a.status == s).count();
        let mut lines = vec![format!(
            "{} open and {} acknowledged alerts",
            count(AlertStatus::Open),
            count(AlertStatus::Acked)
        )];
        for a in alerts.iter().take(5) {
            lines.push(format!(
                "- {} ({}, {})",
                a.title,
                a.severity.as_str(),
                a.status.as_str()
            ));
        }
        let shelved = alerts.iter().filter(|a| a.shelved.is_some()).count();
        if shelved > 0 {
            lines.push(format!("{shelved} shelved"));
        }
        let silences = self.store.silences(tenant).await?;
        let ending = silences
            .iter()
            .filter(|s| s.expires_at <= until && s.expires_at > self.clock.now())
            .count();
        let downtimes = self.store.downtimes(tenant).await?;
        let downtimes_ending = downtimes
            .iter()
            .filter(|d| d.end <= until && d.end > self.clock.now())
            .count();
        if ending + downtimes_ending > 0 {
            lines.push(format!(
                "{ending} silences and {downtimes_ending} downtimes expire during the shift"
            ));
        }
        let lost: Vec<String> = self
            .store
            .site_statuses(tenant)
            .await?
            .into_iter()
            .filter(|s| s.stale_since.is_some())
            .map(|s| s.name)
            .collect();
        if !lost.is_empty() {
            lines.push(format!("uplink lost: {}", lost.join(", ")));
        }
        Ok(lines.join("\n"))
    }

    /// Tells every incoming on-call person not told yet, and what the contacts'
    /// `handoffNotices` ask for; returns when the next is due, if within a day.
    pub async fn announce_handoffs(&self) -> Result<Option<Timestamp>, StoreError> {
        let now = self.clock.now();
        let mut next: Option<Timestamp> = None;
        let mut wake_at = |t: Timestamp| {
            if t > now && t <= now.plus(DAY) {
                next = Some(next.map_or(t, |n: Timestamp| n.min(t)));
            }
        };
        for tenant in self.store.tenants().await? {
            let dir = self.directory(tenant.id).await?;
            for schedule in &dir.schedules {
                let roster = dir.roster(schedule);
                let back = Timestamp(now.0 - DAY);
                let shifts = roster.timeline(back, now.plus(HANDOFF_HORIZON));
                for s in &shifts {
                    wake_at(s.start);
                    wake_at(s.end);
                }
                let mut told = Told::default();
                let pass = Pass {
                    dir: &dir,
                    tenant: tenant.id,
                    schedule,
                    shifts: &shifts,
                    now,
                };
                self.handover(&pass, &mut told).await?;
                self.advance(&pass, &mut told, &mut wake_at).await?;
                self.changed(&pass, &mut told).await?;
                if told.marks.is_empty() && told.shifts.is_none() {
                    continue;
                }
                let events: Vec<_> = told
                    .deliveries
                    .iter()
                    .map(|d| d.attempt_event("pending", None, None))
                    .collect();
                let (tenant, id) = (tenant.id, schedule.id);
                self.store
                    .transact(move |tx| -> TxResult<_> {
                        if events.is_empty() {
                            tx.unrecorded("a shift notice with nobody to tell");
                        }
                        for (mark, at) in &told.marks {
                            tx.set_handoff(tenant, id, mark, *at)?;
                        }
                        if let Some(shifts) = &told.shifts {
                            tx.put_setting(tenant, &shifts_key(id), Some(shifts))?;
                        }
                        for d in &told.deliveries {
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

    /// The handover: the incoming person is told (with the digest if they want it), and the
    /// outgoing one, if they want to be; the handover's mark covers both.
    async fn handover(&self, pass: &Pass<'_>, told: &mut Told) -> Result<(), StoreError> {
        let (dir, tenant, schedule, shifts, now) =
            (pass.dir, pass.tenant, pass.schedule, pass.shifts, pass.now);
        let back = Timestamp(now.0 - DAY);
        let Some(at) = shifts.iter().rposition(|s| s.start <= now && s.end > now) else {
            return Ok(());
        };
        let current = &shifts[at];
        let announced = self
            .store
            .handoff_announced(tenant, schedule.id, String::new())
            .await?;
        // A shift older than the day looked back is clipped to its start: told already.
        if announced.is_some_and(|a| a >= current.start || current.start <= back) {
            return Ok(());
        }
        told.marks.push((String::new(), current.start));
        if current.start.plus(GRACE) < now {
            return Ok(());
        }
        if let Some(c) = dir.contact(&current.contact_id) {
            let mut text = format!(
                "Your shift on schedule {} started at {}{}.",
                schedule.name,
                current.start,
                if current.is_override {
                    " (an override)"
                } else {
                    ""
                }
            );
            if c.body.handoff_notices.as_ref().is_some_and(|n| n.digest) {
                text.push('\n');
                text.push_str(
                    &self
                        .digest(dir, tenant, &schedule.name, current.end)
                        .await?,
                );
            }
            let title = format!(
                "You are on call for {} until {}",
                schedule.name, current.end
            );
            let notice = handoff_message(title, text, now);
            told.deliveries
                .extend(self.notice_to(dir, tenant, c, &[], notice, now));
        }
        let outgoing = at
            .checked_sub(1)
            .map(|i| &shifts[i])
            .filter(|p| p.contact_id != current.contact_id && p.end == current.start);
        if let Some(c) = outgoing.and_then(|p| dir.contact(&p.contact_id)) {
            let wants = c.body.handoff_notices.clone().unwrap_or_default();
            if wants.off_call {
                let mut text =
                    format!("{} is on call now, until {}.", current.contact, current.end);
                if wants.digest {
                    text.push('\n');
                    text.push_str(
                        &self
                            .digest(dir, tenant, &schedule.name, current.end)
                            .await?,
                    );
                }
                let title = format!("You are off call for {}", schedule.name);
                let notice = handoff_message(title, text, now);
                told.deliveries
                    .extend(self.notice_to(dir, tenant, c, &[], notice, now));
            }
        }
        Ok(())
    }

    /// Notices ahead of each shift, as far ahead as the contact's `advance` asks.
    async fn advance(
        &self,
        pass: &Pass<'_>,
        told: &mut Told,
        wake_at: &mut impl FnMut(Timestamp),
    ) -> Result<(), StoreError> {
        let (dir, tenant, schedule, shifts, now) =
            (pass.dir, pass.tenant, pass.schedule, pass.shifts, pass.now);
        for (i, s) in shifts.iter().enumerate() {
            if s.start <= now || !going_on(shifts, i) {
                continue;
            }
            let Some(c) = dir.contact(&s.contact_id) else {
                continue;
            };
            let ahead = c.body.handoff_notices.as_ref().map(|n| n.advance.clone());
            for lead in ahead.unwrap_or_default() {
                let due = Timestamp(s.start.0 - lead.0);
                if due > now {
                    wake_at(due);
                    continue;
                }
                let mark = format!("/advance/{}", lead.0.as_secs());
                let announced = self
                    .store
                    .handoff_announced(tenant, schedule.id, mark.clone())
                    .await?;
                if announced.is_some_and(|a| a >= s.start) {
                    continue;
                }
                told.marks.push((mark, s.start));
                if due.plus(GRACE) < now {
                    continue;
                }
                let title = format!(
                    "You go on call for {} at {} (in {lead})",
                    schedule.name, s.start
                );
                let text = format!(
                    "Your shift on schedule {} runs from {} to {}{}.",
                    schedule.name,
                    s.start,
                    s.end,
                    if s.is_override { " (an override)" } else { "" }
                );
                let notice = handoff_message(title, text, now);
                told.deliveries
                    .extend(self.notice_to(dir, tenant, c, &[], notice, now));
            }
        }
        Ok(())
    }

    /// A change that moves a contact's shifts within the next 14 days tells them (those with
    /// `scheduleChanged`), against the shifts as last remembered; the first look only
    /// remembers.
    async fn changed(&self, pass: &Pass<'_>, told: &mut Told) -> Result<(), StoreError> {
        let (dir, tenant, schedule, shifts, now) =
            (pass.dir, pass.tenant, pass.schedule, pass.shifts, pass.now);
        let watchers: Vec<&Named<Contact>> = dir
            .contacts
            .iter()
            .filter(|c| {
                c.body
                    .handoff_notices
                    .as_ref()
                    .is_some_and(|n| n.schedule_changed)
            })
            .collect();
        if watchers.is_empty() {
            return Ok(());
        }
        let horizon = now.plus(HANDOFF_HORIZON);
        let remembered = self.store.setting(tenant, shifts_key(schedule.id)).await?;
        let until = remembered
            .as_ref()
            .and_then(|r| r.get("until"))
            .and_then(Value::as_i64)
            .and_then(Timestamp::from_millis);
        let mut now_spans = serde_json::Map::new();
        let mut moved = Vec::new();
        for c in &watchers {
            let id = c.id.to_string();
            let mine = spans(shifts, &id, now, horizon);
            if let (Some(r), Some(until)) = (&remembered, until) {
                let before: Vec<[i64; 2]> = r["contacts"]
                    .get(&id)
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .unwrap_or_default();
                let clip = |v: &[[i64; 2]]| -> Vec<[i64; 2]> {
                    let (lo, hi) = (now.as_millis(), until.as_millis());
                    v.iter()
                        .filter(|s| s[1] > lo && s[0] < hi)
                        .map(|s| [s[0].max(lo), s[1].min(hi)])
                        .collect()
                };
                if clip(&before) != clip(&mine) {
                    moved.push((*c, mine.clone()));
                }
            }
            now_spans.insert(id, json!(mine));
        }
        // Compared only up to where they were remembered, so they are remembered again once a
        // day: a change to a shift that came within 14 days since is told too.
        let stale = until.is_none_or(|u| u.plus(DAY) < horizon);
        if remembered.is_some() && moved.is_empty() && !stale {
            return Ok(());
        }
        told.shifts = Some(json!({"until": horizon.as_millis(), "contacts": now_spans}));
        for (c, mine) in moved {
            let list: Vec<String> = mine
                .iter()
                .take(3)
                .filter_map(|s| {
                    let (a, b) = (Timestamp::from_millis(s[0])?, Timestamp::from_millis(s[1])?);
                    Some(format!("{a} to {b}"))
                })
                .collect();
            let title = format!("Your shifts on {} changed", schedule.name);
            let text = if list.is_empty() {
                "You have no shift in the next 14 days.".to_string()
            } else {
                format!("Your next shifts: {}.", list.join("; "))
            };
            told.deliveries.extend(self.notice_to(
                dir,
                tenant,
                c,
                &[],
                handoff_message(title, text, now),
                now,
            ));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shift(contact: &str, start: i64, end: i64) -> OnCallShift {
        OnCallShift {
            contact_id: contact.into(),
            contact: contact.into(),
            start: Timestamp::from_millis(start).unwrap(),
            end: Timestamp::from_millis(end).unwrap(),
            layer: None,
            is_override: false,
        }
    }

    #[test]
    fn a_person_goes_on_call_once_per_stretch_and_their_spans_join() {
        let shifts = [
            shift("a", 0, 10),
            shift("a", 10, 20),
            shift("b", 20, 30),
            shift("a", 40, 50),
        ];
        let on: Vec<bool> = (0..shifts.len()).map(|i| going_on(&shifts, i)).collect();
        assert_eq!(on, [true, false, true, true]);
        let t = |ms| Timestamp::from_millis(ms).unwrap();
        assert_eq!(spans(&shifts, "a", t(5), t(45)), [[5, 20], [40, 45]]);
        assert!(spans(&shifts, "c", t(0), t(50)).is_empty());
    }
}
