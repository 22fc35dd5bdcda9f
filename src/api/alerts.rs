//! Alert routes (SPEC 4.4, CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{ALERTS, Page, PageQuery};
use super::router::Route;
use crate::alerting::AlertError;
use crate::alerting::rules::RuleTest;
use crate::federation::SiteError;
use crate::model::Timestamp;
use crate::model::alert::{
    AckRequest, Alert, AlertFilter, ManualAlarm, RuleTestRequest, ShelveRequest, SnoozeRequest,
};
use crate::model::flood::Flood;
use crate::model::noise::{AlertingSettings, NoiseOverrides};
use crate::model::site::SiteAction;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/alerts", list).permission("alerts:read").tool("alerts_list", "Alerts, newest first; filter by status (open, acked, resolved), severity or object.", &[("status", "string", "open, acked, resolved or expired"), ("severity", "string", "critical, warning or info"), ("objectId", "string", "the alert's object"), ("limit", "integer", "at most this many"), ("cursor", "string", "the nextCursor of the previous page")]).doc(
            "alerts",
            "List alerts",
            "Filters `objectId`, `ruleId`, `incidentId`, `status` (CSV of open, acked, resolved, expired), `severity` (CSV), `since` (opened at or after); newest first; limit 100 by default, at most 1000; `cursor` is the last alert id of the previous page. An unknown status or severity matches nothing. `site` (a federation site's name) lists that site's mirrors instead: its open and acknowledged alerts as the events it forwarded told them, with the site's ids, labelled `site`; one resolved there leaves the list (its history stays in `/events?site=`).",
        )
            .query::<AlertQuery>().ok::<Page<Alert>>(),
        Route::post("/api/v1/alerts", raise).permission("alerts:write").doc(
            "alerts",
            "Raise a manual alarm",
            "`{title (required), message (alias summary), severity (default critical), escalationPolicy (must exist), labels, objectId, dedupKey}`. 201 with the alert and an `alert_opened` event; 200 with the active alert when an open or acked alert holds the same `dedupKey` (the alarm folds into it). `ruleId` is `manual`.",
        )
            .body::<ManualAlarm>().answers::<Alert>(201).ok::<Alert>()
            .example(|| json!({"title": "Fire alarm hall 2", "summary": "smoke detector 7", "severity": "critical", "dedupKey": "fire-hall-2", "labels": {"site": "north"}, "escalationPolicy": "site-north"})),
        Route::post("/api/v1/alert-rules:test", test_rule).permission("alerts:read").doc(
            "alert-rules",
            "Test a rule",
            "`{rule (an alert rule as for create), demoEvents?, from?, to?}`: runs the rule as the engine would over the demo events, or else over the tenant's stored events in `from`..`to` (default the last 24 hours, at most 1000). 200 `{matched, wouldOpen[{dedupKey, title, severity, labels, objectId, eventId}], sampleViews[≤5]}` (the `event` variable of the first matched events). An invalid rule is 422 as on create; a rule whose cost bound on one of the events is past the budget (100,000,000 steps or 32 MiB built, docs/security.md) is not run and is 422 `svc:validation/rule` naming the event.",
        )
            .body::<RuleTestRequest>().ok::<RuleTest>(),
        Route::post("/api/v1/alert-rules/{name}:test", test_stored_rule).permission("alerts:read").doc(
            "alert-rules",
            "Test a stored rule against history",
            "Optional `{from, to}` (default the last 24 hours, at most 1000 events); the answer as for `alert-rules:test`; an unknown rule is 404.",
        )
            .optional_body::<RuleTestRequest>().ok::<RuleTest>(),
        Route::get("/api/v1/floods", floods).permission("alerts:read").doc(
            "alerts",
            "List alarm floods",
            "The tenant's scopes in flood (issue 69; `alerting.flood` in the configuration): `{items[{scope (label=value, or empty for the whole tenant), startedAt, firstOut, firstOutTitle, alerts, worst, digestDue, leaveAt, digests}]}`. While a scope floods, pages to people about its alerts are held and sent as one digest per contact and channel every `digestEvery`. Empty when nothing floods.",
        )
            .ok::<Page<Flood>>(),
        Route::get("/api/v1/alerting/settings", settings).permission("alerts:read").doc(
            "alerts",
            "Get the tenant's noise controls",
            "The noise controls in force for the tenant (issue 69): `maxShelve` (the longest timed shelf), `chatter {flips, within, shelveFor}` (flips: 0 turns it off), `flood {enterAt {alerts, within}, leaveAt {alerts, within}, digestEvery, scopeLabel, overrides {<label value>: {enterAt, leaveAt, digestEvery}}}` (enterAt.alerts: 0 turns it off); `tenant`, the fields the tenant set itself (the rest follow `alerting` in the configuration); `version` (0 while it set nothing) and `updatedAt`.",
        )
            .ok::<AlertingSettings>(),
        Route::put("/api/v1/alerting/settings", set_settings).permission("config:write").doc(
            "alerts",
            "Set the tenant's noise controls",
            "`{maxShelve?, chatter?, flood?}`: each field given replaces the configuration's for this tenant, as a whole; a field left out or null follows the configuration again (`{}` sets nothing). No If-Match (as `/branding`); `version` counts the changes. Takes effect for what happens next: a flood under way ends by the new `leaveAt`, a running shelf keeps its end. A value out of range is 422 `svc:validation/<field>` (maxShelve 1s to 720h, chatter.flips at most 1000, flood.enterAt.alerts at most 10000 and leaveAt.alerts 1 to enterAt.alerts, overrides need scopeLabel), an unknown field 422. Audited (`alerting.settings.update`, before and after) with a `config` event.",
        )
            .body::<NoiseOverrides>().ok::<AlertingSettings>(),
        Route::get("/api/v1/alerts/{id}", get).permission("alerts:read").tool("alert_get", "One alert with its labels, status and times.", &[("id", "string", "the alert's id")]).doc(
            "alerts",
            "Get an alert",
            "The alert with `eventIds`, the last 50 triggering event ids, oldest first. An open or acknowledged alert a federation site forwarded is answered as the site's mirror (`/alerts?site=`): the site's id, labelled `site`.",
        )
            .ok::<Alert>(),
        Route::post("/api/v1/alerts/{id}:ack", ack).permission("alerts:ack").tool("alert_ack", "Acknowledge an open alert: escalation stops.", &[("id", "string", "the alert's id"), ("comment", "string", "why")]).doc(
            "alerts",
            "Acknowledge an alert",
            "Optional `{comment, sticky, expiresIn}`: `sticky` (default true) holds the ack until the alert resolves, false lets its next state or severity change clear it; `expiresIn` (at least 1s, else 422 `svc:validation/expiresIn`) lets it lapse, by default after the policy's `ackTimeout`. The alert shows the terms as `ack`, and its escalation resumes at the acknowledged step when the ack lapses, is withdrawn after an unanswered `ackReminder`, or is cleared. Only from `open`: an alert in any other status is 404 `svc:not-found`, except an acked alert whose reminder waits for an answer, which this is (`action: confirmed`). Writes an `ack` event and the audit entry with the change. An alert a federation site forwarded (`/alerts?site=`) is the site's: the ack is queued for the site in order (202 with the queued action, `site.alert.ack` audited) and carried out there, so the site's escalation stops and the ack comes back as its event.",
        )
            .optional_body::<AckRequest>().ok::<Alert>().answers::<SiteAction>(202),
        Route::post("/api/v1/alerts/{id}:snooze", snooze).permission("alerts:ack").tool("alert_snooze", "Snooze an alert until a time or for a duration; it re-arms then.", &[("id", "string", "the alert's id"), ("duration", "string", "e.g. 30m"), ("until", "string", "RFC 3339 time")]).doc(
            "alerts",
            "Snooze an alert",
            "`{until}` (RFC 3339, in the future, else 422 `svc:validation/until`) or `{duration}` (`30m`). From `open` or `acked`: the alert becomes `acked` with `snoozedUntil` and an `ack` event whose comment states the wake time. At expiry (to the millisecond; CONTRACT 3 allows 5 s) it is `open` again with an `escalation` event, comment \"snooze expired — alarm re-armed\".",
        )
            .body::<SnoozeRequest>().ok::<Alert>(),
        Route::post("/api/v1/alerts/{id}:shelve", shelve).permission("alerts:ack").tool("alert_shelve", "Shelve an alert: it does not page until the shelf ends (timed, or oneShot: until it clears).", &[("id", "string", "the alert's id"), ("mode", "string", "timed or oneShot"), ("duration", "string", "for timed, e.g. 2h"), ("reason", "string", "why")]).doc(
            "alerts",
            "Shelve an alert",
            "`{mode: timed|oneShot, duration?, reason}` (OPC UA Part 9 `TimedShelve`/`OneShotShelve`). From `open` or `acked` (else 404 `svc:not-found`); the status is kept and the alert shows `shelved {mode, until?, reason, by, at}`. While shelved it does not page: its escalation stops. A `timed` shelf needs `duration`, at most `alerting.maxShelve` (default 8h; beyond, or none, 422 `svc:validation/duration`) and ends at `until`; 15 minutes before, a `shelve` event with `action: expiring` names the shelver. A `oneShot` shelf (no `duration`) ends when the alert clears. `reason` is required (422 `svc:validation/reason`), `mode` must be one of the two (422 `svc:validation/mode`). Shelving a shelved alert replaces its shelf. Writes a `shelve` event (`action: shelved`) and the audit entry `alert.shelve`. An alert a federation site forwarded (mirrored here) is carried to that site: 202 with the queued action `{id, alertId, action: shelve, by, comment, at, shelf}` (audit `site.alert.shelve`; `reason` is still required here, the site judges the rest by its own limits).",
        )
            .body::<ShelveRequest>().ok::<Alert>().answers::<SiteAction>(202),
        Route::post("/api/v1/alerts/{id}:unshelve", unshelve).permission("alerts:ack").tool("alert_unshelve", "Take an alert off its shelf: it pages again if still open.", &[("id", "string", "the alert's id")]).doc(
            "alerts",
            "Unshelve an alert",
            "Ends the alert's shelf now: if it is still `open`, its escalation starts again from the first step. An alert not shelved, resolved or expired is 404 `svc:not-found`. Writes a `shelve` event (`action: unshelved`) and the audit entry `alert.unshelve`; a timed shelf that runs out does the same by itself, `by: shelf expired`.",
        )
            .no_body().ok::<Alert>(),
        Route::post("/api/v1/alerts/{id}:resolve", resolve).permission("alerts:ack").tool("alert_resolve", "Resolve an open or acknowledged alert.", &[("id", "string", "the alert's id")]).doc(
            "alerts",
            "Resolve an alert",
            "From `open` or `acked`; an alert already resolved or expired is 404 `svc:not-found`, as one acknowledged when not open (CONTRACT 3). Writes an `alert_resolved` event and the audit entry with the change. An alert a federation site forwarded is the site's: the resolve is queued for the site (202 with the queued action) and carried out there.",
        )
            .no_body().ok::<Alert>().answers::<SiteAction>(202),
    ]
}

/// The alert list's query, also the UI's and a saved filter's.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub(crate) struct AlertQuery {
    pub object_id: Option<String>,
    pub rule_id: Option<String>,
    pub incident_id: Option<String>,
    pub status: Option<String>,
    pub severity: Option<String>,
    pub since: Option<String>,
    /// A federation site: its mirrored open and acknowledged alerts instead of the tenant's
    /// own.
    pub site: Option<String>,
    #[serde(flatten)]
    pub page: PageQuery,
}

/// Every value of a CSV parsed, or `None` when one names nothing (the list is then empty).
fn csv<T: std::str::FromStr>(raw: Option<&str>) -> Option<Vec<T>> {
    raw.filter(|s| !s.trim().is_empty())
        .map_or(Some(Vec::new()), |s| {
            s.split(',').map(|v| v.trim().parse().ok()).collect()
        })
}

/// One page of the tenant's own alerts, or (with `site`) of that federation site's as
/// mirrored here: newest first, strictly before `before`.
pub(crate) async fn alert_page(
    st: &AppState,
    c: &Caller,
    site: Option<&str>,
    filter: AlertFilter,
    before: Option<Uuid>,
    limit: usize,
) -> Result<Vec<Alert>, Problem> {
    Ok(match site {
        Some(site) => {
            st.sites
                .mirrored_alert_page(&c.principal, site, &filter, before, limit)
                .await?
        }
        None => {
            st.alerting
                .list(&c.principal, filter, before, limit)
                .await?
        }
    })
}

impl AlertQuery {
    /// The federation site named, if any.
    pub(crate) fn site(&self) -> Option<&str> {
        self.site
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The filter this query asks for, or `None` when it can match nothing.
    pub(crate) fn filter(&self) -> Option<AlertFilter> {
        let id = |raw: &Option<String>| -> Option<Option<Uuid>> {
            match raw.as_deref().filter(|s| !s.is_empty()) {
                None => Some(None),
                Some(s) => Uuid::parse_str(s).ok().map(Some),
            }
        };
        Some(AlertFilter {
            object_id: id(&self.object_id)?,
            rule_id: self.rule_id.clone().filter(|s| !s.is_empty()),
            incident_id: id(&self.incident_id)?,
            statuses: csv(self.status.as_deref())?,
            severities: csv(self.severity.as_deref())?,
            since: self
                .since
                .as_deref()
                .and_then(|s| s.parse::<Timestamp>().ok()),
        })
    }
}

async fn list(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<AlertQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.page.resolve(ALERTS);
    let Some(f) = q.filter() else {
        return Ok(Json(Page::all(Vec::new())));
    };
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = alert_page(&st, &c, q.site(), f, cursor, page.limit).await?;
    Ok(Json(Page::new(items, &page, |a: &Alert| a.id.to_string())))
}

async fn raise(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<ManualAlarm>,
) -> Result<impl IntoResponse, Problem> {
    let (alert, opened) = st.alerting.raise(&c.principal, &c.actor, body).await?;
    let status = if opened {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(alert)))
}

async fn floods(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page {
        items: st.alerting.floods(&c.principal).await?,
        next_cursor: None,
    }))
}

async fn settings(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.alerting.settings(&c.principal).await?))
}

async fn set_settings(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<NoiseOverrides>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.alerting
            .set_settings(&c.principal, &c.actor, body)
            .await?,
    ))
}

async fn get(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let id = path_id(&id)?;
    match st.alerting.get(&c.principal, id).await {
        Err(AlertError::NotFound) => match st.sites.mirrored_alert(&c.principal, id).await {
            Err(SiteError::NotFound) => Err(AlertError::NotFound.into()),
            mirrored => Ok(Json(mirrored?.1)),
        },
        own => Ok(Json(own?)),
    }
}

async fn ack(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Option<AckRequest>>,
) -> Result<impl IntoResponse, Problem> {
    let id = path_id(&id)?;
    let terms = body.unwrap_or_default();
    let comment = terms.comment.clone();
    match st
        .alerting
        .ack(&c.principal, &c.actor, id, terms, "api")
        .await
    {
        Err(AlertError::NotFound) => carried(&st, &c, id, "ack", comment).await,
        done => Ok(Json(done?).into_response()),
    }
}

/// An action on an alert the main does not own: one a federation site forwarded is queued for
/// that site; none is 404 as for any alert not found.
pub(crate) async fn carry(
    st: &AppState,
    c: &Caller,
    id: Uuid,
    action: &str,
    comment: Option<String>,
    shelf: Option<ShelveRequest>,
) -> Result<SiteAction, Problem> {
    match st
        .sites
        .carry(&c.principal, &c.actor, id, action, comment, shelf)
        .await
    {
        Err(SiteError::NotFound) => Err(AlertError::NotFound.into()),
        carried => Ok(carried?),
    }
}

/// A shelf on an alert the main does not own: queued for the site that forwarded it, which
/// keeps it by its own limits (`maxShelve`); one without a reason is refused here already.
pub(crate) async fn carry_shelf(
    st: &AppState,
    c: &Caller,
    id: Uuid,
    shelf: ShelveRequest,
) -> Result<SiteAction, Problem> {
    if shelf.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(Problem::validation("reason", "a shelf needs a reason"));
    }
    let reason = shelf.reason.clone();
    carry(st, c, id, "shelve", reason, Some(shelf)).await
}

/// 202 with the action queued for the site that owns the alert.
async fn carried(
    st: &AppState,
    c: &Caller,
    id: Uuid,
    action: &str,
    comment: Option<String>,
) -> Result<Response, Problem> {
    let queued = carry(st, c, id, action, comment, None).await?;
    Ok((StatusCode::ACCEPTED, Json(queued)).into_response())
}

async fn test_rule(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<RuleTestRequest>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.alerting.test_rule(&c.principal, body).await?))
}

async fn test_stored_rule(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<Option<RuleTestRequest>>,
) -> Result<impl IntoResponse, Problem> {
    let result = st
        .alerting
        .test_stored_rule(&c.principal, name, body.unwrap_or_default())
        .await?;
    Ok(Json(result))
}

async fn snooze(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<SnoozeRequest>,
) -> Result<impl IntoResponse, Problem> {
    let alert = st
        .alerting
        .snooze(&c.principal, &c.actor, path_id(&id)?, body)
        .await?;
    Ok(Json(alert))
}

async fn shelve(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ShelveRequest>,
) -> Result<Response, Problem> {
    let id = path_id(&id)?;
    match st
        .alerting
        .shelve(&c.principal, &c.actor, id, body.clone())
        .await
    {
        Err(AlertError::NotFound) => {
            let queued = carry_shelf(&st, &c, id, body).await?;
            Ok((StatusCode::ACCEPTED, Json(queued)).into_response())
        }
        done => Ok(Json(done?).into_response()),
    }
}

async fn unshelve(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let alert = st
        .alerting
        .unshelve(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(Json(alert))
}

async fn resolve(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let id = path_id(&id)?;
    match st.alerting.resolve(&c.principal, &c.actor, id).await {
        Err(AlertError::NotFound) => carried(&st, &c, id, "resolve", None).await,
        done => Ok(Json(done?).into_response()),
    }
}
