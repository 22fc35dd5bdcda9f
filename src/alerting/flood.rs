//! Alarm floods (ISA-18.2): each alert that pages counts toward its scope; once
//! `enterAt.alerts` opened within `enterAt.within` the scope floods, the first of them is its
//! first-out, and from then on the pages of the scope's alerts to people are held for the
//! digests (`notify::digests`), which also end the flood once it is calm.

use super::lifecycle::store_alert;
use crate::model::Timestamp;
use crate::model::alert::{Alert, rank};
use crate::model::event::{EventDraft, EventType, Severity};
use crate::model::flood::{Flood, FloodSettings, calm_at};
use crate::store::{StoreError, Tx};
use serde_json::json;
use uuid::Uuid;

/// The `STORM_INDEX` pair of a scope's opens: it starts with a NUL, which no label key has.
fn opens_pair(scope: &str) -> String {
    format!("\0flood:{scope}")
}

/// Counts `alert`, which pages, toward its scope at `now`: a flood under way grows and its
/// calm moves on; a scope reaching its limit floods (`flood_started`).
pub(super) fn count_open(
    tx: &Tx,
    alert: &Alert,
    now: Timestamp,
    settings: &FloodSettings,
) -> Result<Option<EventDraft>, StoreError> {
    let scope = settings.scope_of(&alert.labels);
    let limits = settings.limits_of(&scope);
    if limits.enter_at.alerts == 0 {
        return Ok(None);
    }
    let pair = opens_pair(&scope);
    tx.record_open(alert, &pair, now.minus(limits.window()))?;
    // When the scope is calm again: the `leaveAt.alerts`-th newest open's time plus its window.
    let leave_at = |tx: &Tx| -> Result<Timestamp, StoreError> {
        let newest = tx.newest_opens(
            alert.tenant_id,
            &pair,
            now.minus(limits.leave_at.within.0),
            limits.leave_at.alerts,
        )?;
        let times: Vec<Timestamp> = newest.iter().rev().map(|(t, _)| *t).collect();
        Ok(calm_at(&times, limits.leave_at, now))
    };
    let tenant = alert.tenant_id;
    if let Some(mut flood) = tx.flood(tenant, &scope)? {
        flood.alerts += 1;
        if rank(alert.severity) > rank(flood.worst) {
            flood.worst = alert.severity;
        }
        flood.leave_at = leave_at(tx)?;
        tx.put_flood(&flood)?;
        return Ok(None);
    }
    // Not flooding: fewer than `enterAt.alerts` opened within its window before this one, so
    // this read is short, unless this open floods the scope.
    let since = now.minus(limits.enter_at.within.0);
    let entering: Vec<Uuid> = tx
        .newest_opens(tenant, &pair, since, usize::MAX)?
        .into_iter()
        .filter(|(t, _)| *t > since)
        .map(|(_, id)| id)
        .collect();
    if entering.len() < limits.enter_at.alerts {
        return Ok(None);
    }
    let mut started = Vec::new();
    for id in entering.iter().rev() {
        started.extend(tx.alert(tenant, *id)?);
    }
    let worst = started
        .iter()
        .map(|a| a.severity)
        .max_by_key(|s| rank(*s))
        .unwrap_or(alert.severity);
    let mut first = started.into_iter().next().unwrap_or_else(|| alert.clone());
    first.first_out = true;
    store_alert(tx, &first)?;
    let flood = Flood {
        tenant_id: tenant,
        scope,
        started_at: now,
        first_out: first.id,
        first_out_title: first.title.clone(),
        alerts: u32::try_from(entering.len()).unwrap_or(u32::MAX),
        worst,
        digest_due: now.plus(limits.digest_every.0),
        leave_at: leave_at(tx)?,
        digests: 0,
    };
    tx.put_flood(&flood)?;
    let mut event = EventDraft::new(
        tenant,
        EventType::FloodStarted,
        Some(Severity::Warning),
        json!({
            "scope": flood.scope,
            "alerts": flood.alerts,
            "within": limits.enter_at.within,
            "firstOut": first.id,
            "firstOutTitle": first.title,
            "digestEvery": limits.digest_every,
            "leaveAt": flood.leave_at,
        }),
    );
    event.source_id = Some(first.id.to_string());
    Ok(Some(event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::duration::GoDuration;
    use crate::model::flood::Rate;
    use crate::runtime::{Clock, TestClock};
    use crate::store::{Store, TxResult, Wrote};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use uuid::Uuid;

    /// Three alerts within a minute flood a site (the limit); the first of them is its
    /// first-out, the worst severity among them is the flood's, a fourth grows it and moves its
    /// calm on; another site's alert counts toward its own scope.
    #[tokio::test]
    async fn a_scope_floods_at_its_limit_with_the_first_alert_as_first_out() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let settings = FloodSettings {
            enter_at: Rate {
                alerts: 3,
                within: GoDuration::from_secs(60),
            },
            leave_at: Rate {
                alerts: 2,
                within: GoDuration::from_secs(120),
            },
            scope_label: "site".into(),
            ..FloodSettings::default()
        };
        let start = clock.now();
        let alert = |n: u128, secs: u64, site: &str, severity: Severity| {
            let mut a = Alert::open(
                Uuid::from_u128(n),
                Uuid::from_u128(7),
                "r".into(),
                format!("k{n}"),
                severity,
                format!("alert {n}"),
                start.plus(std::time::Duration::from_secs(secs)),
            );
            a.labels = BTreeMap::from([("site".to_string(), site.to_string())]);
            a
        };
        let opens = [
            alert(1, 0, "north", Severity::Warning),
            alert(2, 10, "north", Severity::Critical),
            alert(3, 20, "south", Severity::Warning),
            alert(4, 30, "north", Severity::Warning),
            alert(5, 40, "north", Severity::Warning),
        ];
        let (events, floods) = store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                let mut events = Vec::new();
                let mut floods = Vec::new();
                for a in opens {
                    store_alert(tx, &a)?;
                    events.push(count_open(tx, &a, a.opened_at, &settings)?);
                    floods.push(tx.flood(a.tenant_id, "site=north")?);
                }
                Ok(Wrote::Changed((events, floods)))
            })
            .await
            .unwrap();
        let started: Vec<usize> = (0..events.len()).filter(|i| events[*i].is_some()).collect();
        assert_eq!(
            started,
            [3],
            "the third alert at north within a minute floods it"
        );
        assert!(
            floods[2].is_none(),
            "an alert at south does not count toward north"
        );
        let at_start = floods[3].clone().unwrap();
        assert_eq!(at_start.first_out, Uuid::from_u128(1));
        assert_eq!(at_start.alerts, 3);
        assert_eq!(at_start.worst, Severity::Critical);
        // Calm once fewer than 2 opened within 2 minutes: the second-newest (10 s) + 120 s.
        assert_eq!(
            at_start.leave_at,
            start.plus(std::time::Duration::from_secs(130))
        );
        let grown = floods[4].clone().unwrap();
        assert_eq!(grown.alerts, 4);
        assert_eq!(
            grown.leave_at,
            start.plus(std::time::Duration::from_secs(150))
        );
        let first = store.alert(Uuid::from_u128(7), Uuid::from_u128(1)).await;
        assert!(first.unwrap().first_out);
        let other = store.alert(Uuid::from_u128(7), Uuid::from_u128(4)).await;
        assert!(!other.unwrap().first_out);
    }
}
