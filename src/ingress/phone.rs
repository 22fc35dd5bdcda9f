//! What reaches the GSM modem: short messages and calls. From a known contact's number,
//! `ACK <short id>` and `RES <short id>` act on that alert (and are answered with what
//! happened); other texts raise a manual alarm when the `sms` event source says
//! `config.manualAlarm: "true"`; everything else becomes an `ingress` event of the `sms`
//! source. A call from a known contact gets the tenant's IVR menu: the greeting and the
//! options are spoken, and the key pressed acknowledges or resolves the newest open alert or
//! raises a manual alarm. Each message is deleted from the SIM once acted on.

use super::{Ingress, Normalized, Source};
use crate::hw::gsm::{Inbound, Modem};
use crate::model::alert::{AlertFilter, AlertStatus, ManualAlarm};
use crate::model::event::Severity;
use crate::model::fault;
use crate::model::notify::Contact;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{AlertAction, PortError};
use crate::store::StoreError;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

const LISTEN: Duration = Duration::from_secs(1);

/// The digits of a phone number.
fn digits(number: &str) -> String {
    number.chars().filter(char::is_ascii_digit).collect()
}

/// Whether two numbers name the same line: the same digits, or the same last nine (a
/// national `0170...` and an international `+49170...` spelling).
pub fn same_number(a: &str, b: &str) -> bool {
    let (a, b) = (digits(a), digits(b));
    if a.len() < 6 || b.len() < 6 {
        return !a.is_empty() && a == b;
    }
    let n = a.len().min(b.len()).min(9);
    a[a.len() - n..] == b[b.len() - n..]
}

/// `ACK <id>` / `RES <id>` (also `RESOLVE`), any case, with the 8 hex digits of a short id.
pub fn keyword(text: &str) -> Option<(AlertAction, String)> {
    let mut words = text.split_whitespace();
    let action = match words.next()?.to_ascii_uppercase().as_str() {
        "ACK" => AlertAction::Ack,
        "RES" | "RESOLVE" => AlertAction::Resolve,
        _ => return None,
    };
    let id = words
        .next()?
        .trim_matches(|c: char| !c.is_ascii_alphanumeric());
    (id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (action, id.to_ascii_lowercase()))
}

pub struct PhoneInbound {
    pub ingress: Arc<Ingress>,
    pub modem: Modem,
    pub inbound: mpsc::Receiver<Inbound>,
}

impl PhoneInbound {
    /// The contact (tenant, name) whose phone is `number`.
    async fn contact(&self, number: &str) -> Result<Option<(Uuid, String)>, StoreError> {
        let store = &self.ingress.store;
        for tenant in store.tenants().await? {
            for doc in store
                .docs(tenant.id, "contacts", None, usize::MAX, |_| true)
                .await?
            {
                let Ok(c) = serde_json::from_str::<Contact>(&doc.body) else {
                    continue;
                };
                if c.phone.as_deref().is_some_and(|p| same_number(p, number)) {
                    return Ok(Some((tenant.id, doc.name)));
                }
            }
        }
        Ok(None)
    }

    async fn reply(&self, to: &str, text: &str) {
        if let Err(e) = self.modem.send_sms(to, text).await {
            tracing::warn!(error = %e, "the answer to an SMS reply was not sent");
        }
    }

    /// Acts on one message; `Err` only when it could not be handled and should stay on the
    /// SIM for the next sweep.
    async fn message(&self, from: &str, text: &str) -> Result<(), PortError> {
        let contact = self.contact(from).await?;
        let alerts = &self.ingress.alerts;
        if let (Some((tenant, name)), Some((action, short))) = (&contact, keyword(text)) {
            let found = alerts.by_short_id(*tenant, short.clone()).await?;
            let answer = match found {
                None => format!("No open alert {short}."),
                Some(alert) => match alerts
                    .act(*tenant, alert.id, action, name.clone(), "sms")
                    .await
                {
                    Ok(Some(a)) => format!("{} {short}: {}", past(action), a.title),
                    Ok(None) => format!("Alert {short} is no longer open."),
                    // Asked again it fails again: answered, not kept for the next sweep.
                    Err(PortError::Refused(why)) => format!("Alert {short}: {why}."),
                    Err(e) => return Err(e),
                },
            };
            self.reply(from, &answer).await;
            return Ok(());
        }
        let tenant = contact.as_ref().map(|(t, _)| *t);
        let sources = self.ingress.sources("sms", tenant).await?;
        let Some(source) = sources.first() else {
            return Ok(());
        };
        if let Some((tenant, name)) = &contact
            && source.flag("manualAlarm")
        {
            let alarm = manual_alarm(source, text, name);
            match alerts.alarm(*tenant, alarm, name.clone(), "sms").await {
                Ok(a) => {
                    let hint = format!(
                        "Alarm raised: {}. ACK {} to acknowledge.",
                        a.title,
                        a.short_id()
                    );
                    self.reply(from, &hint).await;
                }
                Err(e) => tracing::warn!(error = %e, "a manual alarm by SMS was refused"),
            }
            return Ok(());
        }
        let event = Normalized {
            severity: Severity::Info,
            summary: text.lines().next().unwrap_or_default().to_string(),
            dedup_key: None,
            labels: contact
                .as_ref()
                .map(|(_, name)| BTreeMap::from([("contact".to_string(), name.clone())]))
                .unwrap_or_default(),
            original: json!({"from": from, "text": text}),
            resolve: false,
        };
        Ok(self.ingress.record(source, event).await?)
    }

    /// A call: the IVR menu for a known caller, else hung up.
    async fn call(&self, from: &str) -> Result<(), StoreError> {
        let Some((tenant, name)) = self.contact(from).await? else {
            self.modem.hang_up().await;
            return Ok(());
        };
        let store = &self.ingress.store;
        let menus = store.docs(tenant, "ivr-menus", None, 1, |_| true).await?;
        let Some(menu) = menus
            .first()
            .and_then(|d| fault::readable("an IVR menu", serde_json::from_str::<Value>(&d.body)))
        else {
            self.modem.hang_up().await;
            return Ok(());
        };
        let options = menu["options"].as_array().cloned().unwrap_or_default();
        let mut speech = menu["greeting"]
            .as_str()
            .unwrap_or("svc alerting.")
            .to_string();
        for o in &options {
            let label = o["label"]
                .as_str()
                .or(o["title"].as_str())
                .or(o["action"].as_str());
            if let (Some(digit), Some(label)) = (o["digit"].as_str(), label) {
                speech.push_str(&format!(" Press {digit} to {label}."));
            }
        }
        let key = match self.modem.answer(&speech).await {
            Ok(Some(key)) => key.to_string(),
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, "an IVR call failed");
                return Ok(());
            }
        };
        let Some(option) = options
            .iter()
            .find(|o| o["digit"].as_str() == Some(key.as_str()))
        else {
            return Ok(());
        };
        let alerts = &self.ingress.alerts;
        let action = match option["action"].as_str().unwrap_or_default() {
            "ack" | "acknowledge" => AlertAction::Ack,
            "resolve" => AlertAction::Resolve,
            "alarm" | "manual-alarm" | "raise" => {
                let alarm = ManualAlarm {
                    title: option["title"]
                        .as_str()
                        .map(str::to_string)
                        .or(Some(format!("Alarm by phone from {name}"))),
                    message: option["text"].as_str().map(str::to_string),
                    severity: option["severity"].as_str().map(str::to_string),
                    escalation_policy: option["escalationPolicy"].as_str().map(str::to_string),
                    labels: match &option["labels"] {
                        Value::Null => Default::default(),
                        l => fault::decoded(
                            "a menu option's labels",
                            serde_json::from_value(l.clone()),
                        ),
                    },
                    ..ManualAlarm::default()
                };
                if let Err(e) = alerts.alarm(tenant, alarm, name, "ivr").await {
                    tracing::warn!(error = %e, "a manual alarm by phone was refused");
                }
                return Ok(());
            }
            other => {
                tracing::warn!(action = other, "IVR option with an unknown action");
                return Ok(());
            }
        };
        let statuses = match action {
            AlertAction::Ack => vec![AlertStatus::Open],
            AlertAction::Resolve => vec![AlertStatus::Open, AlertStatus::Acked],
        };
        let filter = AlertFilter {
            statuses,
            ..AlertFilter::default()
        };
        if let Some(newest) = store.alerts(tenant, filter, None, 1).await?.first()
            && let Err(e) = alerts.act(tenant, newest.id, action, name, "ivr").await
        {
            tracing::warn!(error = %e, "an IVR action failed");
        }
        Ok(())
    }
}

fn past(action: AlertAction) -> &'static str {
    match action {
        AlertAction::Ack => "Acknowledged",
        AlertAction::Resolve => "Resolved",
    }
}

fn manual_alarm(source: &Source, text: &str, contact: &str) -> ManualAlarm {
    let title = text.lines().next().unwrap_or_default().trim().to_string();
    ManualAlarm {
        title: Some(if title.is_empty() {
            format!("Alarm by SMS from {contact}")
        } else {
            title
        }),
        message: Some(text.to_string()),
        severity: source.config.get("severity").cloned(),
        escalation_policy: source.config.get("escalationPolicy").cloned(),
        labels: BTreeMap::from([("source".to_string(), source.name.clone())]),
        ..ManualAlarm::default()
    }
}

impl Worker for PhoneInbound {
    fn name(&self) -> &'static str {
        "gsm-inbound"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let inbound = match tokio::time::timeout(LISTEN, self.inbound.recv()).await {
                Ok(Some(i)) => i,
                Ok(None) => return Wait::Done,
                Err(_) => return Wait::For(Duration::ZERO),
            };
            match inbound {
                Inbound::Sms { index, from, text } => match self.message(&from, &text).await {
                    Ok(()) => self.modem.delete_sms(index).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "an SMS was not handled; it stays on the SIM");
                    }
                },
                Inbound::Call { from } => {
                    if let Err(e) = self.call(&from).await {
                        tracing::warn!(error = %e, "an incoming call was not handled");
                        self.modem.hang_up().await;
                    }
                }
            }
            Wait::For(Duration::ZERO)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_name_an_action_and_a_short_id() {
        assert_eq!(
            keyword(" ack 1A2B3C4D thanks"),
            Some((AlertAction::Ack, "1a2b3c4d".into()))
        );
        assert_eq!(
            keyword("RES 1a2b3c4d"),
            Some((AlertAction::Resolve, "1a2b3c4d".into()))
        );
        assert_eq!(keyword("ACK 1a2b"), None);
        assert_eq!(keyword("hello ACK 1a2b3c4d"), None);
    }

    #[test]
    fn numbers_match_across_national_and_international_spelling() {
        assert!(same_number("+49 170 1234567", "01701234567"));
        assert!(same_number("+491701234567", "+49 (170) 123-4567"));
        assert!(!same_number("+491701234567", "+491701234568"));
        assert!(!same_number("", ""));
    }
}
