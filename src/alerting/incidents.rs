//! Incidents through the API (CONTRACT 3): create, list, get, update under `If-Match`.

use super::{AlertError, Alerting, invalid};
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::event::Severity;
use crate::model::event::{Event, EventDraft, EventFilter};
use crate::model::identity::Actor;
use crate::model::incident::{Incident, IncidentBody, IncidentDetail, STATUSES};
use crate::store::{StoreError, Tx, check_version};
use crate::store::{TxResult, Wrote};
use serde_json::json;
use uuid::Uuid;

/// Alerts whose events a detail's timeline reads at most, and the events it shows.
const TIMELINE_ALERTS: usize = 20;
const TIMELINE_EVENTS: usize = 200;

/// Resolves the incident's open and acknowledged alerts in `tx` (their chains stop, their keys
/// free): an `alert_resolved` event and an audit entry each.
fn resolve_alerts(
    tx: &Tx,
    incident: &Incident,
    now: Timestamp,
    actor: &Actor,
) -> Result<(Vec<AuditDraft>, Vec<EventDraft>), StoreError> {
    let (mut audits, mut events) = (Vec::new(), Vec::new());
    for id in &incident.alert_ids {
        let Some(old) = tx.alert(incident.tenant_id, *id)? else {
            continue;
        };
        let mut new = old.clone();
        // Resolved or expired already: nothing to do.
        let Ok(event) = new.resolve(now) else {
            continue;
        };
        super::lifecycle::store_alert(tx, &new)?;
        let audit = AuditDraft::new(
            now,
            incident.tenant_id,
            actor,
            "alert.resolve",
            format!("alert/{id}"),
        );
        audits.push(audit.before(&old).after(&new));
        events.push(event);
    }
    Ok((audits, events))
}

/// Saves an incident with its alerts pointed at it; one naming an alert the tenant does not
/// have is refused.
fn save_incident(tx: &Tx, incident: &Incident) -> Result<(), AlertError> {
    match tx.save_incident(incident)?.first() {
        None => Ok(()),
        Some(id) => Err(invalid("alertIds", format!("alert {id} does not exist"))),
    }
}

fn severity(raw: Option<&str>) -> Result<Option<Severity>, AlertError> {
    match raw {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| invalid("severity", "severity must be critical, warning or info")),
    }
}

/// Refuses a status that is none of open, acked and resolved.
fn check_status(status: Option<&str>) -> Result<(), AlertError> {
    match status {
        Some(s) if !STATUSES.contains(&s) => {
            Err(invalid("status", "status must be open, acked or resolved"))
        }
        _ => Ok(()),
    }
}

/// `old` with the fields `body` names replaced (`severity` parsed from it) at `now`: status
/// `resolved` stamps `resolvedAt` once, any other status clears it.
fn changed(
    old: &Incident,
    body: IncidentBody,
    severity: Option<Severity>,
    now: Timestamp,
) -> Incident {
    let mut i = old.clone();
    if let Some(t) = body.title {
        i.title = t.trim().to_string();
    }
    if let Some(s) = body.summary {
        i.summary = s;
    }
    if let Some(s) = severity {
        i.severity = s;
    }
    if let Some(l) = body.labels {
        i.labels = l;
    }
    if let Some(x) = body.impact {
        i.impact = x;
    }
    if let Some(x) = body.ticket_url {
        i.ticket_url = x;
    }
    if let Some(ids) = body.alert_ids {
        i.alert_ids = ids;
    }
    if let Some(s) = body.status {
        i.resolved_at = (s == "resolved").then_some(i.resolved_at.unwrap_or(now));
        i.status = s;
    }
    i.updated_at = now;
    i.version = old.version + 1;
    i
}

impl Alerting {
    /// Every listed alert must be the tenant's.
    fn incident_audit(&self, p: &Principal, actor: &Actor, verb: &str, id: Uuid) -> AuditDraft {
        AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            &format!("incident.{verb}"),
            format!("incident/{id}"),
        )
    }

    pub async fn create_incident(
        &self,
        p: &Principal,
        actor: &Actor,
        body: IncidentBody,
    ) -> Result<Incident, AlertError> {
        let title = body
            .title
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| invalid("title", "title is required"))?;
        check_status(body.status.as_deref())?;
        let status = body.status.unwrap_or_else(|| "open".into());
        let alert_ids = body.alert_ids.unwrap_or_default();
        let now = self.clock.now();
        let incident = Incident {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            title,
            summary: body.summary.unwrap_or_default(),
            severity: severity(body.severity.as_deref())?.unwrap_or(Severity::Critical),
            resolved_at: (status == "resolved").then_some(now),
            status,
            labels: body.labels.unwrap_or_default(),
            impact: body.impact.unwrap_or_default(),
            ticket_url: body.ticket_url.unwrap_or_default(),
            alert_ids,
            created_by: p.name.clone(),
            opened_at: now,
            updated_at: now,
            version: 1,
        };
        let audit = self.incident_audit(p, actor, "create", incident.id);
        let incident = self
            .store
            .transact(move |tx| -> TxResult<_, AlertError> {
                save_incident(tx, &incident)?;
                let event = incident.update_event("created");
                tx.record([audit.after(&incident)], vec![event])?;
                Ok(Wrote::Changed(incident))
            })
            .await?;
        Ok(incident)
    }

    /// Replaces the fields the body names; `status` `resolved` stamps `resolvedAt`.
    pub async fn update_incident(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        body: IncidentBody,
    ) -> Result<Incident, AlertError> {
        if let Some(t) = &body.title
            && t.trim().is_empty()
        {
            return Err(invalid("title", "title must not be empty"));
        }
        check_status(body.status.as_deref())?;
        let severity = severity(body.severity.as_deref())?;
        let now = self.clock.now();
        let audit = self.incident_audit(p, actor, "update", id);
        let tenant = p.tenant;
        let actor = actor.clone();
        let incident = self
            .store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.incident(tenant, id)?.ok_or(AlertError::NotFound)?;
                check_version(old.version, expected)?;
                let new = changed(&old, body, severity, now);
                save_incident(tx, &new)?;
                // Resolving an incident resolves its alerts, as `:resolve` does.
                let (mut audits, mut events) =
                    if new.status == "resolved" && old.status != "resolved" {
                        resolve_alerts(tx, &new, now, &actor)?
                    } else {
                        (Vec::new(), Vec::new())
                    };
                audits.insert(0, audit.before(&old).after(&new));
                events.insert(0, new.update_event("updated"));
                tx.record(audits, events)?;
                Ok(Wrote::Changed(new))
            })
            .await?;
        Ok(incident)
    }

    /// `:resolve`: the incident and its open or acknowledged alerts, in one transaction; an
    /// incident resolved already is answered as it is.
    pub async fn resolve_incident(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<Incident, AlertError> {
        let now = self.clock.now();
        let audit = self.incident_audit(p, actor, "resolve", id);
        let (tenant, actor) = (p.tenant, actor.clone());
        let incident = self
            .store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.incident(tenant, id)?.ok_or(AlertError::NotFound)?;
                let (mut audits, mut events) = resolve_alerts(tx, &old, now, &actor)?;
                if old.status == "resolved" && audits.is_empty() {
                    return Ok(Wrote::Unchanged(old));
                }
                let mut new = old.clone();
                new.status = "resolved".into();
                new.resolved_at = Some(old.resolved_at.unwrap_or(now));
                new.updated_at = now;
                new.version = old.version + 1;
                save_incident(tx, &new)?;
                audits.insert(0, audit.before(&old).after(&new));
                events.insert(0, new.update_event("resolved"));
                tx.record(audits, events)?;
                Ok(Wrote::Changed(new))
            })
            .await?;
        Ok(incident)
    }

    /// `:merge`: the alerts of the `sources` move into incident `id`, and the sources are
    /// resolved; the timelines of both say so. One transaction.
    pub async fn merge_incidents(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        sources: Vec<Uuid>,
    ) -> Result<Incident, AlertError> {
        if sources.is_empty() {
            return Err(invalid(
                "sourceIds",
                "sourceIds names the incidents to merge",
            ));
        }
        if sources.contains(&id) {
            return Err(invalid("sourceIds", "an incident cannot merge into itself"));
        }
        let now = self.clock.now();
        let audit = self.incident_audit(p, actor, "merge", id);
        let (tenant, actor) = (p.tenant, actor.clone());
        let incident = self
            .store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let old = tx.incident(tenant, id)?.ok_or(AlertError::NotFound)?;
                let mut target = old.clone();
                let (mut audits, mut events) = (Vec::new(), Vec::new());
                for source_id in &sources {
                    // A source the tenant does not have answers as the target would: 404.
                    let source = tx
                        .incident(tenant, *source_id)?
                        .ok_or(AlertError::NotFound)?;
                    for alert in &source.alert_ids {
                        if !target.alert_ids.contains(alert) {
                            target.alert_ids.push(*alert);
                        }
                    }
                    let mut closed = source.clone();
                    closed.alert_ids.clear();
                    closed.status = "resolved".into();
                    closed.resolved_at = Some(source.resolved_at.unwrap_or(now));
                    closed.updated_at = now;
                    closed.version = source.version + 1;
                    save_incident(tx, &closed)?;
                    let mut event = closed.update_event("merged");
                    event.payload["mergedInto"] = json!(id);
                    events.push(event);
                    audits.push(
                        AuditDraft::new(
                            now,
                            tenant,
                            &actor,
                            "incident.merge",
                            format!("incident/{source_id}"),
                        )
                        .before(&source)
                        .after(&closed),
                    );
                }
                target.updated_at = now;
                target.version = old.version + 1;
                // Points the moved alerts at the target.
                save_incident(tx, &target)?;
                let mut event = target.update_event("merged");
                event.payload["merged"] = json!(sources);
                events.insert(0, event);
                audits.insert(0, audit.before(&old).after(&target));
                tx.record(audits, events)?;
                Ok(Wrote::Changed(target))
            })
            .await?;
        Ok(incident)
    }

    /// The incident with its alerts and its timeline: its own `incident_update` events and
    /// its first alerts' events, newest first.
    pub async fn incident_detail(
        &self,
        p: &Principal,
        id: Uuid,
    ) -> Result<IncidentDetail, AlertError> {
        let incident = self.store.incident(p.tenant, id).await?;
        let mut alerts = Vec::new();
        for a in &incident.alert_ids {
            // An alert removed by retention is left out.
            if let Ok(alert) = self.store.alert(p.tenant, *a).await {
                alerts.push(alert);
            }
        }
        let of = |source: String, from: Timestamp| EventFilter {
            tenant_id: p.tenant,
            source_id: Some(source),
            from: Some(from),
            ..Default::default()
        };
        let mut timeline: Vec<Event> = self
            .history
            .list_committed(
                &self.store,
                of(id.to_string(), incident.opened_at),
                None,
                TIMELINE_EVENTS,
            )
            .await?;
        for a in alerts.iter().take(TIMELINE_ALERTS) {
            timeline.extend(
                self.history
                    .list_committed(
                        &self.store,
                        of(a.id.to_string(), a.opened_at),
                        None,
                        TIMELINE_EVENTS,
                    )
                    .await?,
            );
        }
        timeline.sort_by(|a, b| b.ts.cmp(&a.ts).then(b.id.cmp(&a.id)));
        timeline.truncate(TIMELINE_EVENTS);
        Ok(IncidentDetail {
            incident,
            alerts,
            timeline,
        })
    }

    pub async fn incident(&self, p: &Principal, id: Uuid) -> Result<Incident, AlertError> {
        Ok(self.store.incident(p.tenant, id).await?)
    }

    pub async fn incidents(
        &self,
        p: &Principal,
        open_only: bool,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Incident>, AlertError> {
        Ok(self
            .store
            .incidents(p.tenant, open_only, before, limit)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incident() -> Incident {
        let at: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        Incident {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            title: "Core switch down".into(),
            summary: String::new(),
            severity: Severity::Critical,
            status: "open".into(),
            labels: Default::default(),
            impact: String::new(),
            ticket_url: String::new(),
            alert_ids: vec![Uuid::from_u128(3)],
            created_by: "ops".into(),
            opened_at: at,
            updated_at: at,
            resolved_at: None,
            version: 4,
        }
    }

    #[test]
    fn a_change_replaces_only_what_the_body_names_and_resolving_stamps_once() {
        let old = incident();
        let now: Timestamp = "2026-03-01T09:00:00Z".parse().unwrap();
        let body = IncidentBody {
            title: Some("  Core switch flapping ".into()),
            status: Some("resolved".into()),
            ..Default::default()
        };
        let new = changed(&old, body, Some(Severity::Warning), now);
        assert_eq!(new.title, "Core switch flapping");
        assert_eq!(new.severity, Severity::Warning);
        assert_eq!(new.alert_ids, old.alert_ids);
        assert_eq!(
            (new.resolved_at, new.updated_at, new.version),
            (Some(now), now, 5)
        );
        let later: Timestamp = "2026-03-01T10:00:00Z".parse().unwrap();
        let again = IncidentBody {
            status: Some("resolved".into()),
            ..Default::default()
        };
        assert_eq!(changed(&new, again, None, later).resolved_at, Some(now));
        let reopen = IncidentBody {
            status: Some("open".into()),
            ..Default::default()
        };
        assert_eq!(changed(&new, reopen, None, later).resolved_at, None);
    }
}
