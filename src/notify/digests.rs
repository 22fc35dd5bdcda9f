//! Flood digests (ISA-18.2 practice, Alertmanager grouping): while a scope is flooded, the
//! deliveries to people about its alerts are held (`escalation::commit`); every `digestEvery`
//! each contact's channel gets one digest of what was held for it: the count, the first-out
//! alert, the worst severity and a link to the list. Each held delivery is recorded against
//! its alert as `digested` with the digest's id. When the scope is calm (`leaveAt`) the flood
//! ends with a last digest of anything still held and a `flood_ended` event.
//!
//! The worker sleeps until the next digest or end is due; a flood starting or growing wakes it
//! (`Change::Floods`). Everything it does for one flood is one transaction.

use super::Notifier;
use super::escalation::Links;
use crate::model::Timestamp;
use crate::model::alert::rank;
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::flood::{Flood, FloodSettings};
use crate::model::notify::{Delivery, Message};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{StoreError, Tx};
use crate::store::{TxResult, Wrote};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// What fits one GSM-7 SMS part: a digest's first lines are cut to it.
const SMS_PART: usize = 160;

/// The digest of `held` (deliveries to one contact over one channel) for `flood`.
fn digest_message(flood: &Flood, held: &[Delivery], links: &Links, now: Timestamp) -> Message {
    let alerts: BTreeSet<Uuid> = held.iter().filter_map(|d| d.payload.alert_id).collect();
    let worst = held
        .iter()
        .filter_map(|d| d.payload.severity.parse::<Severity>().ok())
        .max_by_key(|s| rank(*s))
        .unwrap_or(flood.worst);
    let title = match flood.scope.as_str() {
        "" => format!("Flood: {} alerts", alerts.len()),
        scope => format!("Flood: {} alerts at {scope}", alerts.len()),
    };
    // "CRITICAL: <title>\nFirst out: <title>", as an SMS shows it, within one part.
    let room = SMS_PART.saturating_sub(worst.as_str().len() + 3 + title.chars().count());
    let summary: String = format!("First out: {}", flood.first_out_title)
        .chars()
        .take(room)
        .collect();
    let labels = flood
        .scope
        .split_once('=')
        .map(|(k, v)| BTreeMap::from([(k.to_string(), v.to_string())]))
        .unwrap_or_default();
    let first = &held[0].payload;
    Message {
        kind: "digest".into(),
        alert_id: None,
        short_id: String::new(),
        title,
        summary,
        severity: worst.as_str().into(),
        status: "open".into(),
        labels,
        object_id: None,
        policy: first.policy.clone(),
        step: 0,
        repeat: 0,
        contact: first.contact.clone(),
        ack_url: String::new(),
        alert_url: links.list_url(flood.started_at),
        params: BTreeMap::from([
            ("count".to_string(), alerts.len().to_string()),
            ("scope".to_string(), flood.scope.clone()),
            ("firstOut".to_string(), flood.first_out.to_string()),
            ("firstOutTitle".to_string(), flood.first_out_title.clone()),
            ("floodStartedAt".to_string(), flood.started_at.to_string()),
        ]),
        event: None,
        at: now,
    }
}

/// Sends the digests of what `flood` holds: one delivery per contact and channel, each held
/// delivery recorded against its alert.
fn send_digests(
    tx: &Tx,
    flood: &mut Flood,
    links: &Links,
    now: Timestamp,
    new_id: &dyn Fn() -> Uuid,
) -> Result<Vec<EventDraft>, StoreError> {
    let mut groups: BTreeMap<(Option<Uuid>, String, String), Vec<Delivery>> = BTreeMap::new();
    for d in tx.take_held(flood.tenant_id, &flood.scope)? {
        let key = (d.contact_id, d.channel.clone(), d.target.clone());
        groups.entry(key).or_default().push(d);
    }
    let mut events = Vec::new();
    for held in groups.into_values() {
        let first = &held[0];
        let digest = Delivery {
            channel_id: first.channel_id,
            channel: first.channel.clone(),
            target: first.target.clone(),
            contact_id: first.contact_id,
            url: first.url.clone(),
            fallbacks: first.fallbacks.clone(),
            ..Delivery::new(
                new_id(),
                flood.tenant_id,
                &first.kind,
                digest_message(flood, &held, links, now),
            )
        };
        tx.put_delivery(&digest)?;
        events.push(digest.attempt_event("pending", None, None));
        events.extend(
            held.iter()
                .map(|d| d.digest_event("digested", "digestId", json!(digest.id))),
        );
        flood.digests += 1;
    }
    Ok(events)
}

/// What is due of the flood of `scope` at `now`: its digests, and its end once calm; `None`
/// when nothing is (it ended, or moved on, since it was read).
fn run_flood(
    tx: &Tx,
    tenant: Uuid,
    scope: &str,
    settings: &FloodSettings,
    links: &Links,
    now: Timestamp,
    new_id: &dyn Fn() -> Uuid,
) -> Result<Option<Vec<EventDraft>>, StoreError> {
    let Some(mut flood) = tx.flood(tenant, scope)? else {
        return Ok(None);
    };
    let ending = flood.leave_at <= now;
    if !ending && flood.digest_due > now {
        return Ok(None);
    }
    let mut events = send_digests(tx, &mut flood, links, now, new_id)?;
    if !ending {
        flood.digest_due = now.plus(settings.limits_of(scope).digest_every.0);
        tx.put_flood(&flood)?;
        if events.is_empty() {
            tx.unrecorded("a flood's digest with nothing held: the next is due later");
        }
        return Ok(Some(events));
    }
    tx.drop_flood(tenant, scope)?;
    let mut ended = EventDraft::new(
        tenant,
        EventType::FloodEnded,
        Some(Severity::Info),
        json!({
            "scope": flood.scope,
            "alerts": flood.alerts,
            "startedAt": flood.started_at,
            "firstOut": flood.first_out,
            "firstOutTitle": flood.first_out_title,
            "digests": flood.digests,
            "worst": flood.worst,
        }),
    );
    ended.source_id = Some(flood.first_out.to_string());
    events.push(ended);
    Ok(Some(events))
}

pub struct Digests {
    notifier: Arc<Notifier>,
    wake: Arc<Notify>,
}

impl Digests {
    pub fn new(notifier: Arc<Notifier>) -> Self {
        let wake = Arc::new(Notify::new());
        notifier
            .store
            .watch_commits(crate::store::Change::Floods, wake.clone());
        Self { notifier, wake }
    }

    /// Runs the floods due now, each in its transaction; returns when the next is due.
    async fn run_once(&self) -> Result<Option<Timestamp>, StoreError> {
        let n = &self.notifier;
        let now = n.clock.now();
        let floods = n.store.all_floods().await?;
        let (due, later): (Vec<Flood>, Vec<Flood>) =
            floods.into_iter().partition(|f| f.next_due() <= now);
        if !due.is_empty() {
            let links = n.links().await?.clone();
            for f in due {
                let (noise, links, clock) = (n.noise.clone(), links.clone(), n.clock.clone());
                n.store
                    .transact(move |tx| -> TxResult<_> {
                        let new_id = || clock.new_id();
                        let tenant = tx.tenant_noise(f.tenant_id)?.overrides;
                        let settings = noise.with(&tenant).flood;
                        let ran =
                            run_flood(tx, f.tenant_id, &f.scope, &settings, &links, now, &new_id)?;
                        let changed = ran.is_some();
                        tx.journal(ran.unwrap_or_default())?;
                        Ok(Wrote::new((), changed))
                    })
                    .await?;
            }
            return Ok(Some(now));
        }
        Ok(later.iter().map(Flood::next_due).min())
    }
}

impl Worker for Digests {
    fn name(&self) -> &'static str {
        "flood-digests"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.run_once().await {
                Ok(Some(next)) => Wait::For(next.since(self.notifier.clock.now())),
                Ok(None) => Wait::UntilWoken,
                Err(e) => {
                    tracing::warn!(error = %e, "flood digests failed; retrying");
                    Wait::For(Duration::from_secs(1))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(alert: u128, severity: &str, now: Timestamp) -> Delivery {
        let mut d = Delivery::test_notice(Uuid::from_u128(100 + alert), Uuid::from_u128(7), now);
        d.payload.kind = "alert".into();
        d.payload.alert_id = Some(Uuid::from_u128(alert));
        d.payload.severity = severity.into();
        d.payload.contact = "ada".into();
        d
    }

    /// A digest counts the alerts it stands for (a repeat of one counts once), says the worst
    /// severity and the first-out, links the list of what opened since the flood started, and
    /// keeps an SMS of it within one part however long the first-out's title.
    #[test]
    fn a_digest_counts_its_alerts_and_fits_one_sms_part() {
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let flood = Flood {
            tenant_id: Uuid::from_u128(7),
            scope: "site=north".into(),
            started_at: now,
            first_out: Uuid::from_u128(1),
            first_out_title: "breaker Q1 tripped ".repeat(20),
            alerts: 3,
            worst: Severity::Warning,
            digest_due: now,
            leave_at: now,
            digests: 0,
        };
        let links = Links {
            base_url: "https://svc.example/".into(),
            key: Vec::new(),
        };
        let held = [
            held(1, "warning", now),
            held(2, "critical", now),
            held(2, "critical", now),
        ];
        let m = digest_message(&flood, &held, &links, now);
        assert_eq!(m.kind, "digest");
        assert_eq!(m.title, "Flood: 2 alerts at site=north");
        assert_eq!(m.severity, "critical");
        assert!(m.summary.starts_with("First out: breaker Q1 tripped"));
        assert_eq!(m.params["count"], "2");
        assert_eq!(m.labels["site"], "north");
        assert_eq!(
            m.alert_url,
            format!("https://svc.example/alerts?status=open&since={now}")
        );
        let sms = format!("{}: {}\n{}", m.severity.to_uppercase(), m.title, m.summary);
        assert_eq!(sms.chars().count(), SMS_PART, "{sms}");
    }
}
