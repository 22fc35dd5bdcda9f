//! A tenant's people and channels, read once per batch: contacts, contact groups, schedules
//! with their overrides, channels and time periods. Answers who a step notifies and on which
//! channels (SEMANTICS 4): the step's `channels`, else the contact's first preference whose
//! minimum severity the alert reaches and whose period contains now (in the contact's zone;
//! else the first such preference without a period), else e-mail. The contact's other
//! eligible preferences' channels are the fallbacks when a channel fails for good.

use super::schedule::{Member, Roster};
use crate::model::alert::rank;
use crate::model::event::Severity;
use crate::model::interval::{IntervalNames, NamedTimeIntervals, Recurrence};
use crate::model::notify::{
    Channel, Contact, ContactGroup, EscalationPolicy, EscalationTarget, Override, Schedule,
};
use crate::model::timeperiod::TimePeriod;
use crate::model::{Timestamp, fault};
use crate::store::{Store, StoreError};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// A configuration document's id, name and typed body.
#[derive(Clone, Debug)]
pub struct Named<T> {
    pub id: Uuid,
    pub name: String,
    pub body: T,
    /// The document as the API shows it.
    pub doc: serde_json::Value,
}

pub struct Directory {
    pub contacts: Vec<Named<Contact>>,
    groups: Vec<Named<ContactGroup>>,
    pub schedules: Vec<Named<Schedule>>,
    /// By name, so "the first enabled channel of a type" is the first by name.
    channels: Vec<Named<Channel>>,
    policies: Vec<Named<EscalationPolicy>>,
    periods: BTreeMap<String, TimePeriod>,
    overrides: Vec<Override>,
    /// `tts-profiles` documents, for voice channels that name one.
    tts_profiles: Vec<Named<serde_json::Value>>,
    /// The `time-intervals` documents, by name.
    intervals: BTreeMap<String, Recurrence>,
    /// What each rule names of them (read only when the tenant has any).
    rule_intervals: BTreeMap<String, IntervalNames>,
}

/// Why an escalation step waits, and until when.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// `mute` (in a mute interval) or `inactive` (outside every active interval).
    pub why: &'static str,
    /// The intervals that hold it.
    pub intervals: Vec<String>,
    pub until: Timestamp,
}

async fn named<T: DeserializeOwned + Send + 'static>(
    store: &Arc<Store>,
    tenant: Uuid,
    kind: &'static str,
) -> Result<Vec<Named<T>>, StoreError> {
    let docs = store.docs(tenant, kind, None, usize::MAX, |_| true).await?;
    Ok(docs
        .into_iter()
        .filter_map(|d| {
            let body = fault::readable(kind, serde_json::from_str(&d.body))?;
            Some(Named {
                id: d.id,
                doc: d.to_json(),
                name: d.name,
                body,
            })
        })
        .collect())
}

/// Channel types whose target is the contact's e-mail address, phone number, pager or user
/// (whose browsers' push subscriptions a push goes to).
pub fn contact_target(kind: &str, contact: &Contact) -> Option<Option<String>> {
    match kind {
        "email" => Some(contact.email.clone()),
        "sms" | "voice" => Some(contact.phone.clone()),
        "espa" => Some(contact.pager.clone()),
        "push" => Some(contact.user_id.clone()),
        _ => None,
    }
}

/// `worktime`/`arbeitszeit` (Monday to Friday 08:00-18:00) and `night`/`nacht` (the rest).
fn builtin_period(name: &str, tz: &str) -> Option<TimePeriod> {
    let work = ["08:00-18:00"];
    let rest = ["00:00-08:00", "18:00-24:00"];
    let days = |weekday: &[&str], weekend: &[&str]| -> BTreeMap<String, Vec<String>> {
        crate::model::timeperiod::WEEKDAYS
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let ranges = if i < 5 { weekday } else { weekend };
                (
                    d.to_string(),
                    ranges.iter().map(|r| r.to_string()).collect(),
                )
            })
            .collect()
    };
    let days = match name {
        "worktime" | "arbeitszeit" => days(&work, &[]),
        "night" | "nacht" => days(&rest, &["00:00-24:00"]),
        _ => return None,
    };
    Some(TimePeriod {
        time_zone: Some(tz.to_string()),
        days,
        ..TimePeriod::default()
    })
}

impl Directory {
    pub async fn load(store: &Arc<Store>, tenant: Uuid) -> Result<Directory, StoreError> {
        let periods = named::<TimePeriod>(store, tenant, "time-periods")
            .await?
            .into_iter()
            .map(|p| (p.name, p.body))
            .collect();
        let intervals: BTreeMap<String, Recurrence> =
            named::<NamedTimeIntervals>(store, tenant, "time-intervals")
                .await?
                .into_iter()
                .map(|i| (i.name, Recurrence::stored(&i.body.time_intervals)))
                .collect();
        let rule_intervals = if intervals.is_empty() {
            BTreeMap::new()
        } else {
            named::<IntervalNames>(store, tenant, "alert-rules")
                .await?
                .into_iter()
                .filter(|r| !r.body.is_empty())
                .map(|r| (r.name, r.body))
                .collect()
        };
        Ok(Directory {
            intervals,
            rule_intervals,
            contacts: named(store, tenant, "contacts").await?,
            groups: named(store, tenant, "contact-groups").await?,
            schedules: named(store, tenant, "schedules").await?,
            channels: named(store, tenant, "channels").await?,
            policies: named(store, tenant, "escalation-policies").await?,
            periods,
            overrides: store.tenant_overrides(tenant).await?,
            tts_profiles: named(store, tenant, "tts-profiles").await?,
        })
    }

    pub fn tts_profile(&self, name: &str) -> Option<&serde_json::Value> {
        self.tts_profiles
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.body)
    }

    /// A contact by name, else by id.
    pub fn contact(&self, reference: &str) -> Option<&Named<Contact>> {
        self.contacts
            .iter()
            .find(|c| c.name == reference)
            .or_else(|| self.contacts.iter().find(|c| c.id.to_string() == reference))
    }

    pub fn member(&self, reference: &str) -> Member {
        match self.contact(reference) {
            Some(c) => Member {
                id: c.id.to_string(),
                name: c.name.clone(),
            },
            None => Member {
                id: reference.to_string(),
                name: reference.to_string(),
            },
        }
    }

    pub fn schedule(&self, reference: &str) -> Option<&Named<Schedule>> {
        self.schedules
            .iter()
            .find(|s| s.name == reference || s.id.to_string() == reference)
    }

    /// A schedule's overrides, by start.
    pub fn overrides(&self, schedule: Uuid) -> Vec<Override> {
        self.overrides
            .iter()
            .filter(|o| o.schedule_id == schedule)
            .cloned()
            .collect()
    }

    pub fn roster(&self, schedule: &Named<Schedule>) -> Roster {
        Roster::new(&schedule.body, &self.overrides(schedule.id), &|r| {
            self.member(r)
        })
    }

    pub fn policy(&self, name: &str) -> Option<&Named<EscalationPolicy>> {
        self.policies.iter().find(|p| p.name == name)
    }

    /// Whether a step of `policy` for an alert of the rule `rule` waits at `now`, and until
    /// when (Alertmanager's mute and active time intervals, of the rule and of the policy): in
    /// one of their mute intervals, or outside all the active intervals of either. A name no
    /// document has is ignored; a hold with no end within the intervals' horizon (five years)
    /// does not hold, so a window that never opens again cannot stop paging for good.
    pub fn held(&self, rule: &str, policy: &EscalationPolicy, now: Timestamp) -> Option<Held> {
        let policy_names = IntervalNames {
            mute_time_intervals: policy.mute_time_intervals.clone(),
            active_time_intervals: policy.active_time_intervals.clone(),
        };
        let named = [self.rule_intervals.get(rule), Some(&policy_names)];
        let known = |names: &[String]| -> Vec<(String, &Recurrence)> {
            names
                .iter()
                .filter_map(|n| self.intervals.get(n).map(|r| (n.clone(), r)))
                .collect()
        };
        let mutes: Vec<_> = named
            .iter()
            .flatten()
            .flat_map(|n| known(&n.mute_time_intervals))
            .collect();
        let actives: Vec<Vec<_>> = named
            .iter()
            .flatten()
            .map(|n| known(&n.active_time_intervals))
            .filter(|a| !a.is_empty())
            .collect();
        // What holds at `at`, and when that may change.
        let holding = |at: Timestamp| -> Option<(&'static str, Vec<String>, Option<Timestamp>)> {
            if let Some((name, r)) = mutes.iter().find(|(_, r)| r.contains(at)) {
                return Some(("mute", vec![name.clone()], r.next_change(at)));
            }
            actives
                .iter()
                .find(|set| !set.iter().any(|(_, r)| r.contains(at)))
                .map(|set| {
                    let opens = set.iter().filter_map(|(_, r)| r.next_change(at)).min();
                    (
                        "inactive",
                        set.iter().map(|(n, _)| n.clone()).collect(),
                        opens,
                    )
                })
        };
        let (why, intervals, mut until) = holding(now)?;
        // A mute may end into another mute or outside the active windows: follow on.
        for _ in 0..16 {
            match holding(until?) {
                None => {
                    return Some(Held {
                        why,
                        intervals,
                        until: until?,
                    });
                }
                Some((_, _, next)) => until = next,
            }
        }
        None
    }

    /// The names of the policies a step of which pages the schedule `schedule`.
    pub fn policies_serving(&self, schedule: &str) -> Vec<&str> {
        self.policies
            .iter()
            .filter(|p| {
                p.body.steps.iter().any(|s| {
                    s.notify
                        .as_ref()
                        .and_then(|t| t.schedule.as_deref())
                        .is_some_and(|n| n == schedule)
                })
            })
            .map(|p| p.name.as_str())
            .collect()
    }

    /// A channel by its name only (a delivery's channel).
    pub fn channel_named(&self, name: &str) -> Option<&Named<Channel>> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// Who a step's `notify` names at `at`: the schedule's on-call person (or the backup),
    /// else the group's members, else the contact. An `Err` says what names nothing.
    pub fn targets(
        &self,
        target: &EscalationTarget,
        at: Timestamp,
    ) -> Result<Vec<&Named<Contact>>, String> {
        if let Some(name) = &target.schedule {
            let schedule = self
                .schedule(name)
                .ok_or_else(|| format!("schedule {name:?} does not exist"))?;
            let backup = target.escalate_to.as_deref() == Some("backup");
            let shift = self
                .roster(schedule)
                .at(at, backup)
                .ok_or_else(|| format!("nobody is on call in schedule {name:?}"))?;
            let contact = self
                .contact(&shift.contact_id)
                .ok_or_else(|| format!("on-call contact {:?} does not exist", shift.contact))?;
            return Ok(vec![contact]);
        }
        if let Some(name) = &target.contact_group {
            let group = self
                .groups
                .iter()
                .find(|g| &g.name == name || g.id.to_string() == *name)
                .ok_or_else(|| format!("contact group {name:?} does not exist"))?;
            return Ok(group
                .body
                .members
                .iter()
                .filter_map(|m| self.contact(m))
                .collect());
        }
        if let Some(name) = &target.contact {
            return self
                .contact(name)
                .map(|c| vec![c])
                .ok_or_else(|| format!("contact {name:?} does not exist"));
        }
        Ok(Vec::new())
    }

    /// A channel by name, else the first enabled channel of that type.
    pub fn channel(&self, reference: &str) -> Option<&Named<Channel>> {
        self.channel_named(reference).or_else(|| {
            self.channels
                .iter()
                .find(|c| c.body.kind == reference && c.body.enabled)
        })
    }

    fn in_period(&self, period: &str, tz: &str, at: Timestamp) -> bool {
        let stored = self.periods.get(period).cloned().map(|mut p| {
            if p.time_zone.is_none() {
                p.time_zone = Some(tz.to_string());
            }
            p
        });
        match stored.or_else(|| builtin_period(period, tz)) {
            Some(p) => p.contains(at, &|n| self.periods.get(n).cloned()),
            None => false,
        }
    }

    /// The channels to send on now and, in order, the ones to fall back on.
    pub fn channel_plan(
        &self,
        contact: &Contact,
        severity: Severity,
        step_channels: &[String],
        at: Timestamp,
    ) -> (Vec<String>, Vec<String>) {
        if !step_channels.is_empty() {
            return (step_channels.to_vec(), Vec::new());
        }
        let tz = contact.time_zone.as_deref().unwrap_or("UTC");
        let eligible: Vec<_> = contact
            .preferences
            .iter()
            .filter(|p| {
                p.severity
                    .as_deref()
                    .and_then(|s| s.parse::<Severity>().ok())
                    .is_none_or(|min| rank(severity) >= rank(min))
            })
            .collect();
        let chosen = eligible
            .iter()
            .position(|p| {
                p.period
                    .as_deref()
                    .is_some_and(|n| self.in_period(n, tz, at))
            })
            .or_else(|| eligible.iter().position(|p| p.period.is_none()));
        let Some(chosen) = chosen else {
            return (vec!["email".into()], Vec::new());
        };
        let send = eligible[chosen].channels.clone();
        let mut fallbacks = Vec::new();
        for (i, p) in eligible.iter().enumerate() {
            if i != chosen {
                for c in &p.channels {
                    if !send.contains(c) && !fallbacks.contains(c) {
                        fallbacks.push(c.clone());
                    }
                }
            }
        }
        (send, fallbacks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::interval::TimeInterval;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn directory(intervals: &[(&str, serde_json::Value)], rule: IntervalNames) -> Directory {
        let interval = |v: &serde_json::Value| {
            let list: Vec<TimeInterval> = serde_json::from_value(v.clone()).unwrap();
            Recurrence::new(&list).unwrap()
        };
        Directory {
            contacts: Vec::new(),
            groups: Vec::new(),
            schedules: Vec::new(),
            channels: Vec::new(),
            policies: Vec::new(),
            periods: BTreeMap::new(),
            overrides: Vec::new(),
            tts_profiles: Vec::new(),
            intervals: intervals
                .iter()
                .map(|(n, v)| (n.to_string(), interval(v)))
                .collect(),
            rule_intervals: [("r".to_string(), rule)].into_iter().collect(),
        }
    }

    fn policy(v: serde_json::Value) -> EscalationPolicy {
        serde_json::from_value(v).unwrap()
    }

    /// A mute that ends outside the active windows waits on until they open; a name no
    /// document has is ignored; an active interval that never opens again holds nothing.
    #[test]
    fn a_step_waits_for_mutes_to_end_and_active_windows_to_open() {
        let dir = directory(
            &[
                (
                    "night",
                    serde_json::json!([{"times": [{"startTime": "00:00", "endTime": "06:00"}]}]),
                ),
                (
                    "office",
                    serde_json::json!([{"weekdays": ["monday:friday"],
                        "times": [{"startTime": "08:00", "endTime": "18:00"}]}]),
                ),
                ("past", serde_json::json!([{"years": ["2020"]}])),
            ],
            IntervalNames {
                mute_time_intervals: vec!["night".into(), "missing".into()],
                active_time_intervals: Vec::new(),
            },
        );
        let steps = serde_json::json!([{"after": 0, "notify": {"contact": "ada"}}]);
        let office = policy(serde_json::json!({"steps": steps, "activeTimeIntervals": ["office"]}));
        // Saturday 2027-03-06 03:00 UTC: muted by the rule's night, then the weekend is outside
        // the policy's office hours until Monday 08:00.
        let held = dir.held("r", &office, at("2027-03-06T03:00:00Z")).unwrap();
        assert_eq!(held.why, "mute");
        assert_eq!(held.intervals, ["night"]);
        assert_eq!(held.until, at("2027-03-08T08:00:00Z"));
        assert!(dir.held("r", &office, at("2027-03-08T09:00:00Z")).is_none());
        assert!(
            dir.held("other", &office, at("2027-03-08T07:00:00Z"))
                .is_some_and(|h| h.why == "inactive" && h.until == at("2027-03-08T08:00:00Z"))
        );
        // The dry run says the same: step 0 waits for Monday 08:00, step 1 follows 10m later.
        let two = serde_json::json!([{"after": 0}, {"after": "10m"}]);
        let chain = policy(serde_json::json!({"steps": two, "activeTimeIntervals": ["office"]}));
        let dry = super::super::escalation::simulate(
            &dir,
            &chain,
            Severity::Critical,
            at("2027-03-06T03:00:00Z"),
        );
        assert_eq!(dry[0]["held"], "inactive");
        assert_eq!(dry[0]["at"], "2027-03-08T08:00:00.000Z");
        assert_eq!(dry[1]["at"], "2027-03-08T08:10:00.000Z");
        assert!(dry[1].get("held").is_none());
        let past = policy(serde_json::json!({"steps": steps, "activeTimeIntervals": ["past"]}));
        assert!(
            dir.held("other", &past, at("2027-03-08T07:00:00Z"))
                .is_none()
        );
    }
}
