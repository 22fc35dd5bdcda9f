//! The escalation engine's decisions (SEMANTICS 4): what one due step timer does. A step's
//! first firing waits until `base + after`; when step N first fires, step N+1 is armed at
//! `base + after` (now, if that has passed), and step N repeats every `repeatEvery` up to
//! `maxRepeats` times alongside later steps. Each firing writes an `escalation` event and one
//! outbox delivery per contact and channel, each with its `pending` `notification` event; while
//! the alert's scope is flooded, a contact's delivery is `held` for the flood's digest instead.

use super::directory::{Directory, Held, contact_target};
use crate::model::Timestamp;
use crate::model::alert::{Alert, AlertStatus};
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::flood::FloodSettings;
use crate::model::noise::NoiseSettings;
use crate::model::notify::{
    Contact, Delivery, EscalationPolicy, EscalationStep, EscalationTimer, Message,
};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use serde_json::{Value, json};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// What one firing of an escalation step commits: the timers that follow it, the deliveries
/// it makes and its events (those of the deliveries are written as they are committed).
pub struct Firing {
    pub next: Vec<EscalationTimer>,
    pub deliveries: Vec<Delivery>,
    pub events: Vec<EventDraft>,
}

/// Commits firings of timers in one transaction, ahead of queued requests; a timer that
/// changed or went away since it was read (the alert was acked, or the chain re-armed) has its
/// firing dropped. A delivery to a person about an alert whose scope is in flood is held for
/// the flood's digest.
pub async fn commit(
    store: &Arc<Store>,
    firings: Vec<(EscalationTimer, Firing)>,
    noise: Arc<NoiseSettings>,
) -> Result<(), StoreError> {
    store
        .transact_ahead(move |tx| -> TxResult<_> {
            let mut events = Vec::new();
            let mut changed = false;
            // One read per tenant and per scope a batch pages people in (a round trip each
            // on PostgreSQL).
            let mut floods: HashMap<Uuid, FloodSettings> = HashMap::new();
            let mut flooded: HashMap<(Uuid, String), bool> = HashMap::new();
            for (timer, firing) in firings {
                if tx.escalation_timer(timer.alert_id, timer.step)?.as_ref() != Some(&timer) {
                    continue;
                }
                changed = true;
                tx.drop_escalation_timer(timer.alert_id, timer.step)?;
                if firing.events.is_empty() {
                    tx.unrecorded("a chain that ended: its timer goes");
                }
                for next in &firing.next {
                    tx.put_escalation_timer(next)?;
                }
                events.extend(firing.events);
                for d in &firing.deliveries {
                    let to_person = d.contact_id.is_some() && d.payload.kind == "alert";
                    let mut held = None;
                    if to_person {
                        let settings = match floods.entry(d.tenant_id) {
                            Entry::Occupied(known) => known.into_mut(),
                            Entry::Vacant(new) => {
                                let tenant = tx.tenant_noise(d.tenant_id)?.overrides;
                                new.insert(noise.with(&tenant).flood)
                            }
                        };
                        let scope = settings.scope_of(&d.payload.labels);
                        let in_flood = match flooded.entry((d.tenant_id, scope.clone())) {
                            Entry::Occupied(known) => *known.get(),
                            Entry::Vacant(new) => {
                                *new.insert(tx.flood(d.tenant_id, &scope)?.is_some())
                            }
                        };
                        held = in_flood.then_some(scope);
                    }
                    if let Some(scope) = held {
                        tx.hold_for_digest(&scope, d)?;
                        events.push(d.digest_event("held", "flood", json!(scope)));
                    } else {
                        tx.put_delivery(d)?;
                        events.push(d.attempt_event("pending", None, None));
                    }
                }
            }
            tx.journal(events)?;
            Ok(Wrote::new((), changed))
        })
        .await
}

/// Where links in messages point: the service's base URL and the ack-link key.
#[derive(Clone)]
pub struct Links {
    pub base_url: String,
    pub key: Vec<u8>,
}

impl Links {
    pub fn ack_url(&self, alert: Uuid, contact: Option<Uuid>, now: Timestamp) -> String {
        format!(
            "{}/api/v1/ack/{}",
            self.base_url.trim_end_matches('/'),
            super::acklink::sign(&self.key, alert, contact, now)
        )
    }

    /// The alerts page of what opened since `since` and is still open (a flood's digest).
    pub fn list_url(&self, since: Timestamp) -> String {
        format!(
            "{}/alerts?status=open&since={since}",
            self.base_url.trim_end_matches('/')
        )
    }

    pub fn alert_url(&self, alert: Uuid) -> String {
        format!(
            "{}/api/v1/alerts/{alert}",
            self.base_url.trim_end_matches('/')
        )
    }
}

/// The message of a firing for one contact (or none, for actions).
pub fn message(
    alert: &Alert,
    policy: &str,
    timer: &EscalationTimer,
    contact: Option<(Uuid, &str)>,
    links: &Links,
    now: Timestamp,
) -> Message {
    let summary = alert
        .payload
        .get("message")
        .or_else(|| alert.payload.get("summary"))
        .or_else(|| alert.payload.get("output"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Message {
        kind: "alert".into(),
        alert_id: Some(alert.id),
        short_id: alert.short_id(),
        title: match alert.dependents {
            0 => alert.title.clone(),
            1 => format!("{} (and 1 dependent)", alert.title),
            n => format!("{} (and {n} dependents)", alert.title),
        },
        summary,
        severity: alert.severity.as_str().to_string(),
        status: alert.status.as_str().to_string(),
        labels: alert.labels.clone(),
        object_id: alert.object_id,
        policy: policy.to_string(),
        step: timer.step,
        repeat: timer.repeat,
        contact: contact.map(|(_, n)| n.to_string()).unwrap_or_default(),
        ack_url: links.ack_url(alert.id, contact.map(|(id, _)| id), now),
        alert_url: links.alert_url(alert.id),
        params: BTreeMap::new(),
        event: None,
        at: now,
    }
}

/// A delivery on channel `reference` (a name or type) for `contact`, or why there is none.
/// The delivery is due at the message's time.
pub fn delivery(
    dir: &Directory,
    reference: &str,
    contact: Option<(Uuid, &Contact)>,
    payload: Message,
    fallbacks: Vec<String>,
    id: Uuid,
    tenant: Uuid,
) -> Result<Delivery, String> {
    let (channel_id, channel, kind, url) =
        if reference.starts_with("http://") || reference.starts_with("https://") {
            (
                None,
                String::new(),
                "webhook".to_string(),
                reference.to_string(),
            )
        } else {
            let c = dir
                .channel(reference)
                .filter(|c| c.body.enabled)
                .ok_or_else(|| format!("no enabled channel {reference:?}"))?;
            (
                Some(c.id),
                c.name.clone(),
                c.body.kind.clone(),
                String::new(),
            )
        };
    let target = match contact.and_then(|(_, c)| contact_target(&kind, c)) {
        Some(Some(t)) if !t.trim().is_empty() => t,
        Some(_) => {
            let what = match kind.as_str() {
                "email" => "e-mail address",
                "espa" => "pager call address",
                "push" => "user (userId) whose browsers to push to",
                _ => "phone number",
            };
            return Err(format!(
                "contact {:?} has no {what} for channel {reference:?}",
                payload.contact
            ));
        }
        None => String::new(),
    };
    Ok(Delivery {
        channel_id,
        channel,
        target,
        contact_id: contact.map(|(id, _)| id),
        url,
        fallbacks,
        ..Delivery::new(id, tenant, &kind, payload)
    })
}

fn failed_event(alert: &Alert, timer: &EscalationTimer, channel: &str, error: &str) -> EventDraft {
    let mut draft = EventDraft::new(
        alert.tenant_id,
        EventType::Notification,
        Some(Severity::Info),
        json!({
            "alertId": alert.id,
            "stepIndex": timer.step,
            "repeat": timer.repeat,
            "channel": channel,
            "status": "failed",
            "attempt": 0,
            "error": error,
            "labels": alert.labels,
        }),
    );
    draft.object_id = alert.object_id;
    draft.source_id = Some(alert.id.to_string());
    draft
}

/// What a firing is decided with: the tenant's directory, the links, the time and ids.
pub struct Ctx<'a> {
    pub dir: &'a Directory,
    pub links: &'a Links,
    pub now: Timestamp,
    pub new_id: &'a (dyn Fn() -> Uuid + Sync),
}

/// The deliveries one firing of `step` makes, with the names notified, the channels used
/// and a `failed` event for each contact or channel that could not be reached.
fn fan_out(
    ctx: &Ctx<'_>,
    alert: &Alert,
    policy: &str,
    step: &EscalationStep,
    timer: &EscalationTimer,
) -> (Vec<Delivery>, Vec<String>, Vec<String>, Vec<EventDraft>) {
    let (dir, links, now) = (ctx.dir, ctx.links, ctx.now);
    let (mut deliveries, mut names, mut used, mut failures) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let contacts = match &step.notify {
        Some(target) => dir.targets(target, now).unwrap_or_else(|e| {
            failures.push(failed_event(alert, timer, "", &e));
            Vec::new()
        }),
        None => Vec::new(),
    };
    let mut take = |made: Result<Delivery, String>, reference: &str| match made {
        Ok(d) => {
            // The channel used by its name; a bare URL's by its type.
            used.push(if d.channel.is_empty() {
                d.kind.clone()
            } else {
                d.channel.clone()
            });
            deliveries.push(d);
        }
        Err(e) => failures.push(failed_event(alert, timer, reference, &e)),
    };
    for c in contacts {
        names.push(c.name.clone());
        let (send, fallbacks) = dir.channel_plan(&c.body, alert.severity, &step.channels, now);
        for reference in send {
            let payload = message(alert, policy, timer, Some((c.id, &c.name)), links, now);
            let made = delivery(
                dir,
                &reference,
                Some((c.id, &c.body)),
                payload,
                fallbacks.clone(),
                (ctx.new_id)(),
                alert.tenant_id,
            );
            take(made, &reference);
        }
    }
    if let Some(action) = &step.action {
        let mut actions: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        if let Some(w) = &action.webhook {
            actions.push((w.clone(), BTreeMap::new()));
        }
        if let Some(t) = &action.ticket {
            let mut params = t.params.clone();
            params.insert("autoClose".into(), t.auto_close.to_string());
            actions.push((t.channel.clone(), params));
        }
        if let Some(s) = &action.servicenow {
            let params = BTreeMap::from([
                ("assignmentGroup".to_string(), s.assignment_group.clone()),
                ("autoClose".to_string(), s.auto_close.to_string()),
            ]);
            actions.push(("servicenow".into(), params));
        }
        for (reference, params) in actions {
            let mut payload = message(alert, policy, timer, None, links, now);
            payload.params = params;
            let made = delivery(
                dir,
                &reference,
                None,
                payload,
                Vec::new(),
                (ctx.new_id)(),
                alert.tenant_id,
            );
            take(made, &reference);
        }
    }
    used.dedup();
    (deliveries, names, used, failures)
}

/// What a due timer does: wait for its step's time, fire it, or (the alert no longer open,
/// the policy or step gone) end.
pub fn plan(
    ctx: &Ctx<'_>,
    alert: Option<&Alert>,
    policy: Option<&EscalationPolicy>,
    timer: &EscalationTimer,
) -> Firing {
    let now = ctx.now;
    let nothing = Firing {
        next: Vec::new(),
        deliveries: Vec::new(),
        events: Vec::new(),
    };
    let (Some(alert), Some(policy)) = (alert, policy) else {
        return nothing;
    };
    let Some(step) = policy.steps.get(timer.step as usize) else {
        return nothing;
    };
    // Ack, snooze and resolve disarm the chain; a timer read before that finds the alert
    // no longer open and ends.
    if alert.status != AlertStatus::Open {
        return nothing;
    }
    let first_due = timer.base.plus(step.after.0);
    if timer.repeat == 0 && first_due > now {
        return Firing {
            next: vec![EscalationTimer {
                due: first_due,
                ..timer.clone()
            }],
            ..nothing
        };
    }
    let policy_name = alert.escalation_policy.clone().unwrap_or_default();
    if let Some(held) = ctx.dir.held(&alert.rule_id, policy, now) {
        return held_step(alert, &policy_name, step, timer, held);
    }
    let (deliveries, names, channels, failures) = fan_out(ctx, alert, &policy_name, step, timer);
    let mut next = Vec::new();
    if timer.repeat == 0
        && let Some(following) = policy.steps.get(timer.step as usize + 1)
    {
        next.push(EscalationTimer {
            step: timer.step + 1,
            repeat: 0,
            due: timer.base.plus(following.after.0).max(now),
            ..timer.clone()
        });
    }
    if let Some(every) = step.repeat_every
        && step.max_repeats.is_none_or(|max| timer.repeat < max)
    {
        next.push(EscalationTimer {
            repeat: timer.repeat + 1,
            due: now.plus(every.0),
            ..timer.clone()
        });
    }
    let mut escalation = EventDraft::new(
        alert.tenant_id,
        EventType::Escalation,
        Some(Severity::Info),
        json!({
            "alertId": alert.id,
            "policy": policy_name,
            "step": timer.step,
            "repeat": timer.repeat,
            "contacts": names,
            "channels": channels,
            "labels": alert.labels,
        }),
    );
    escalation.object_id = alert.object_id;
    escalation.source_id = Some(alert.id.to_string());
    let mut events = vec![escalation];
    events.extend(failures);
    Firing {
        next,
        deliveries,
        events,
    }
}

/// A step that waits for a mute interval to end or an active one to begin: it fires then,
/// the chain's later steps counted from then (not all at once), with an `escalation` event
/// saying so now.
fn held_step(
    alert: &Alert,
    policy: &str,
    step: &EscalationStep,
    timer: &EscalationTimer,
    held: Held,
) -> Firing {
    let base = if timer.repeat == 0 {
        held.until.minus(step.after.0)
    } else {
        timer.base
    };
    let mut event = EventDraft::new(
        alert.tenant_id,
        EventType::Escalation,
        Some(Severity::Info),
        json!({
            "alertId": alert.id,
            "policy": policy,
            "step": timer.step,
            "repeat": timer.repeat,
            "held": held.why,
            "timeIntervals": held.intervals,
            "until": held.until,
            "summary": format!(
                "step {} waits until {} ({} {})",
                timer.step,
                held.until,
                if held.why == "mute" { "muted by" } else { "outside" },
                held.intervals.join(", ")
            ),
            "labels": alert.labels,
        }),
    );
    event.object_id = alert.object_id;
    event.source_id = Some(alert.id.to_string());
    Firing {
        next: vec![EscalationTimer {
            due: held.until,
            base,
            ..timer.clone()
        }],
        deliveries: Vec::new(),
        events: vec![event],
    }
}

/// `:simulate`: who each step would notify, on which channels, and when, for an alert of
/// `severity` opened at `now` and never acknowledged (repeats listed up to 10 per step); a
/// step the policy's time intervals hold says so and fires when they let it.
pub fn simulate(
    dir: &Directory,
    policy: &EscalationPolicy,
    severity: Severity,
    now: Timestamp,
) -> Vec<Value> {
    // Steps count from here; a step the policy's time intervals hold fires when the hold
    // ends, and the later steps count from then, as a real chain does.
    let mut base = now;
    policy
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut at = base.plus(step.after.0);
            let held = dir.held("", policy, at);
            if let Some(h) = &held {
                at = h.until;
                base = h.until.minus(step.after.0);
            }
            let (contacts, error) = match &step.notify {
                Some(t) => match dir.targets(t, at) {
                    Ok(cs) => (cs, None),
                    Err(e) => (Vec::new(), Some(e)),
                },
                None => (Vec::new(), None),
            };
            let contacts: Vec<Value> = contacts
                .iter()
                .map(|c| {
                    let (send, fallbacks) = dir.channel_plan(&c.body, severity, &step.channels, at);
                    json!({"contactId": c.id, "contact": c.name, "channels": send, "fallbacks": fallbacks})
                })
                .collect();
            let mut repeats = Vec::new();
            if let Some(every) = step.repeat_every {
                let count = step.max_repeats.unwrap_or(10).min(10);
                let mut t = at;
                for _ in 0..count {
                    t = t.plus(every.0);
                    repeats.push(t);
                }
            }
            let mut out = json!({
                "step": i,
                "after": step.after,
                "at": at,
                "contacts": contacts,
                "repeats": repeats,
                "unlessAcked": step.unless_acked,
            });
            if let Some(a) = &step.action {
                out["action"] = json!(a);
            }
            if let Some(e) = error {
                out["error"] = json!(e);
            }
            if let Some(h) = held {
                out["held"] = json!(h.why);
                out["timeIntervals"] = json!(h.intervals);
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Clock, TestClock};
    use crate::store::Holding;
    use std::time::Duration;

    /// A firing commits only while its timer is as it was read: then the timer goes, the next
    /// ones are armed and the deliveries enter the outbox, with the firing's events.
    #[tokio::test]
    async fn a_firing_commits_only_for_the_timer_it_was_planned_for() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now) = (Uuid::from_u128(7), clock.now());
        let timer = EscalationTimer {
            tenant_id: tenant,
            alert_id: clock.new_id(),
            object_id: None,
            step: 0,
            repeat: 0,
            base: now,
            due: now,
        };
        let armed = timer.clone();
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                Ok(Wrote::Changed(tx.put_escalation_timer(&armed)?))
            })
            .await
            .unwrap();
        let firing = |delivery: Uuid| Firing {
            next: vec![EscalationTimer {
                step: 1,
                due: now.plus(Duration::from_secs(300)),
                ..timer.clone()
            }],
            deliveries: vec![Delivery::test_notice(delivery, tenant, now)],
            events: Vec::new(),
        };
        // Re-armed since it was read: the stale firing is dropped.
        let stale = EscalationTimer {
            repeat: 1,
            ..timer.clone()
        };
        commit(
            &store,
            vec![(stale, firing(clock.new_id()))],
            Default::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            store.escalations_due(now, 10, whole()).await.unwrap(),
            std::slice::from_ref(&timer)
        );
        assert!(store.deliveries_due(now, 10).await.unwrap().is_empty());
        let delivery = clock.new_id();
        commit(
            &store,
            vec![(timer.clone(), firing(delivery))],
            Default::default(),
        )
        .await
        .unwrap();
        assert!(
            store
                .escalations_due(now, 10, whole())
                .await
                .unwrap()
                .is_empty()
        );
        let later = now.plus(Duration::from_secs(300));
        let next = store.escalations_due(later, 10, whole()).await.unwrap();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].step, 1);
        let outbox = store.deliveries_due(now, 10).await.unwrap();
        assert_eq!(outbox.iter().map(|d| d.id).collect::<Vec<_>>(), [delivery]);
    }

    fn whole() -> Arc<Holding> {
        Arc::new(Holding::whole("alert-engine"))
    }

    /// Processes that share the stream's partitions share the timers: each reads only those of
    /// the alerts whose partitions it holds, together all of them, none twice, and sleeps until
    /// its own next one; a process holding none reads none.
    #[tokio::test]
    async fn each_process_fires_the_timers_of_its_partitions() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now) = (Uuid::from_u128(7), clock.now());
        let timers: Vec<EscalationTimer> = (0..40u64)
            .map(|n| EscalationTimer {
                tenant_id: tenant,
                alert_id: clock.new_id(),
                object_id: (n % 5 != 0).then(|| Uuid::from_u128(u128::from(n) * 7919)),
                step: 0,
                repeat: 0,
                base: now,
                due: now.plus(Duration::from_secs(n)),
            })
            .collect();
        let armed = timers.clone();
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                for t in &armed {
                    tx.put_escalation_timer(t)?;
                }
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        let later = now.plus(Duration::from_secs(60));
        let low = Arc::new(Holding::cut("alert-engine", 0..8));
        let high = Arc::new(Holding::cut("alert-engine", 8..16));
        let mut seen = Vec::new();
        for holding in [&low, &high] {
            let own = store
                .escalations_due(later, 100, holding.clone())
                .await
                .unwrap();
            assert!(!own.is_empty() && own.len() < timers.len(), "{}", own.len());
            assert!(own.iter().all(|t| holding.holds(t.tenant_id, t.object_id)));
            let first = own.iter().map(|t| t.due).min();
            assert_eq!(
                store.next_escalation_due(holding.clone()).await.unwrap(),
                first,
                "it sleeps until its own next timer"
            );
            seen.extend(own.into_iter().map(|t| t.alert_id));
        }
        seen.sort();
        let mut all: Vec<Uuid> = timers.iter().map(|t| t.alert_id).collect();
        all.sort();
        assert_eq!(seen, all, "together all, none twice");
        let none = Arc::new(Holding::cut("alert-engine", []));
        assert!(
            store
                .escalations_due(later, 100, none.clone())
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.next_escalation_due(none).await.unwrap(), None);
        store.close();
    }
}
