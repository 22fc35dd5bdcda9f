//! Notification routes (SPEC 4.3, 4.5; CONTRACT 3): on call now, schedule overrides,
//! timeline, stats and iCalendar feed, policy simulation, dead letters, channel tests and ack
//! links.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{DEAD_LETTERS, Page, PageQuery};
use super::router::{JSON, Route};
use super::schemas;
use crate::model::alert::AlertStatus;
use crate::model::notify::{ContactDisclosure, Delivery, OverrideBody, TestSend};
use crate::model::notify::{OnCallNow, OnCallShift, Override};
use crate::notify::AckLink;
use crate::runtime::AlertAction;
use crate::web::escape;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/oncall/now", on_call_now).permission("oncall:read").tool("oncall_now", "Who is on call now, per schedule.", &[]).doc(
            "oncall",
            "Who is on call",
            "A JSON array with one entry per schedule: `{schedule, shifts: [{contactId, contact, start, end, layer, override}], contacts: [Contact]}`; `shifts` is empty when nobody is on call. Resolution: the first override covering now, else the first layer whose restriction covers now.",
        )
            .ok::<Vec<OnCallNow>>(),
        Route::get("/api/v1/schedules/{name}/overrides", overrides).permission("oncall:read").doc(
            "schedules",
            "List overrides of a schedule",
            "`{items: [Override]}` by start, without paging.",
        )
            .ok::<Page<Override>>(),
        Route::post("/api/v1/schedules/{name}/overrides", create_override).permission("oncall:write").doc(
            "schedules",
            "Create an override",
            "`{contactId (a contact id or name), start, end, reason?}` (RFC 3339; `schedule` in the body is ignored, the path names it). 200 with the Override, as the reference answers; an unknown contact, a missing time or `end` not after `start` is 422 `svc:validation/override`.",
        )
            .body::<OverrideBody>().ok::<Override>(),
        Route::delete("/api/v1/schedules/{name}/overrides/{id}", delete_override).permission("oncall:write").doc(
            "schedules",
            "Delete an override",
            "204; an unknown override is 404.",
        )
            .answers_empty(204),
        Route::get("/api/v1/schedules/{name}/timeline", timeline).permission("oncall:read").doc(
            "schedules",
            "Resolved shifts for a range",
            "`from`, `to` (RFC 3339; default now and 14 days later; at most 366 days): the shifts as `OnCallShift`s, overrides and restrictions applied, gaps left out.",
        )
            .query::<RangeQuery>().ok::<Vec<OnCallShift>>(),
        Route::get("/api/v1/schedules/{name}/stats", stats).permission("oncall:read").doc(
            "schedules",
            "On-call hours per person",
            "`from`, `to` (default now and 30 days later): `[{contactId, contact, hours, weekendHours, overrides}]`, weekend hours counted in the schedule's time zone.",
        )
            .query::<RangeQuery>().answers_as(200, JSON, schemas::literal(schemas::open_array)),
        Route::get("/api/v1/schedules/{name}/ics", ics).permission("oncall:read").doc(
            "schedules",
            "iCalendar feed",
            "`text/calendar` (RFC 5545), one event per shift from 7 days ago to 60 days ahead, for calendar applications to subscribe to.",
        )
            .answers_text(200, "text/calendar"),
        Route::post("/api/v1/escalation-policies/{name}:simulate", simulate).permission("alerts:read").doc(
            "escalation-policies",
            "Dry-run: who would be notified when",
            "Optional `{severity}` (default critical). `{policy, steps: [{step, after, at, contacts: [{contactId, contact, channels, fallbacks}], repeats: [times], unlessAcked, action?, error?, held?, timeIntervals?}]}` for an alert opened now and never acknowledged. A step the policy's `muteTimeIntervals` or `activeTimeIntervals` hold has `held` (`mute` or `inactive`) and the intervals, and its `at` is when they let it fire; the later steps count from then.",
        )
            .optional_body::<SimulateBody>().answers_as(200, JSON, schemas::literal(schemas::open_object)),
        Route::get("/api/v1/notifications/dead-letters", dead_letters).permission("alerts:read").doc(
            "notifications",
            "Dead-letter queue",
            "Deliveries that ran out of attempts or were refused for good, newest first: `{id, tenantId, channelId, channel, kind, payload, attempts, nextTry, dead, lastError, createdAt, target?, contactId?}`; limit 100 by default, at most 1000; `cursor` is the last id of the previous page.",
        )
            .query::<PageQuery>().ok::<Page<Delivery>>(),
        Route::post("/api/v1/notifications/dead-letters/{id}:replay", replay).permission("alerts:ack").doc(
            "notifications",
            "Requeue a dead letter",
            "202 with the delivery: attempts reset, due now; an unknown id is 404.",
        )
            .no_body().answers::<Delivery>(202),
        Route::get("/api/v1/contacts/{name}:data-export", contact_data).permission("admin:audit").doc("contacts", "A contact's data disclosure", "Everything held about the contact (by name or id), as a data subject may ask for it: `{generatedAt, contact, audit, schedules, notifications}`: the contact document, the audit entries of its changes (newest first), the schedules whose layers or overrides name it, and the `notification` events of deliveries to it (newest first, among the tenant's latest 100,000 notification events).")
            .ok::<ContactDisclosure>(),
        Route::post("/api/v1/channels/{name}:test-notification", test_notification).permission("config:write").doc(
            "channels",
            "Send a test notification",
            "Optional `{target}` (required for e-mail, SMS and voice channels: the address or number). Sends at once: 200 `{result: \"sent\", detail}`, or 502 `svc:notify/test-failed` with the provider's error as detail.",
        )
            .optional_body::<TestSend>().answers_as(200, JSON, schemas::literal(schemas::open_object)),
        Route::get("/api/v1/ack/{token}", ack_page).raw().doc(
            "notifications",
            "Ack link: what it acknowledges",
            "The link of a notification (HMAC-signed for this use only; valid 24 h and while its alert is open or acknowledged; no credential needed). `text/html`: a page naming the alert, its severity and status and who the link was sent to, with a button that POSTs to the same URL. GET and HEAD never act, so a mail scanner that fetches links acknowledges nothing. 404 for a link that is invalid, expired or whose alert is resolved.",
        )
            .answers_text(200, "text/html").page(),
        Route::post("/api/v1/ack/{token}", ack_link).raw().no_body().doc(
            "notifications",
            "Acknowledge by link",
            "The confirmation page's button. `text/html`: 200 when it acknowledged the alert or the alert was acknowledged already (it says which); 404 for a link that is invalid, expired or whose alert is resolved.",
        )
            .answers_text(200, "text/html").page(),
    ]
}

async fn on_call_now(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.notify.on_call_now(&c.principal).await?))
}

async fn overrides(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let items = st.notify.overrides(&c.principal, &name).await?;
    Ok(Json(Page::all(items)))
}

async fn create_override(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<OverrideBody>,
) -> Result<impl IntoResponse, Problem> {
    let o = st
        .notify
        .create_override(&c.principal, &c.actor, &name, body)
        .await?;
    Ok(Json(o))
}

async fn delete_override(
    State(st): State<AppState>,
    c: Caller,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, Problem> {
    st.notify
        .delete_override(&c.principal, &c.actor, &name, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct RangeQuery {
    from: Option<String>,
    to: Option<String>,
}

async fn timeline(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<RangeQuery>,
) -> Result<impl IntoResponse, Problem> {
    let shifts = st
        .notify
        .timeline(&c.principal, &name, q.from.as_deref(), q.to.as_deref())
        .await?;
    Ok(Json(shifts))
}

async fn stats(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<RangeQuery>,
) -> Result<impl IntoResponse, Problem> {
    let rows = st
        .notify
        .stats(&c.principal, &name, q.from.as_deref(), q.to.as_deref())
        .await?;
    Ok(Json(rows))
}

async fn ics(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let feed = st.notify.ics(&c.principal, &name).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/calendar; charset=utf-8")],
        feed,
    ))
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct SimulateBody {
    severity: Option<String>,
}

async fn simulate(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<Option<SimulateBody>>,
) -> Result<impl IntoResponse, Problem> {
    let severity = body.and_then(|b| b.severity);
    Ok(Json(
        st.notify.simulate(&c.principal, name, severity).await?,
    ))
}

async fn dead_letters(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.resolve(DEAD_LETTERS);
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = st
        .notify
        .dead_letters(&c.principal, cursor, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |d: &Delivery| {
        d.id.to_string()
    })))
}

async fn replay(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let d = st
        .notify
        .replay(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(d)))
}

async fn test_notification(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<Option<TestSend>>,
) -> Result<impl IntoResponse, Problem> {
    let result = st
        .notify
        .test_channel(&c.principal, &c.actor, name, body.unwrap_or_default())
        .await?;
    Ok(Json(result))
}

/// A small page; `form` is markup of ours (already escaped where it quotes anything).
fn page(status: StatusCode, title: &str, text: &str, form: &str) -> axum::response::Response {
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title><style>body{{font-family:sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}button{{padding:.6em 1.4em;font-size:1.1em}}</style></head><body><h1>{t}</h1><p>{x}</p>{form}</body></html>",
        t = escape(title),
        x = escape(text)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The valid ack link `token` is, or the page (or problem) that says why not.
async fn claim(st: &AppState, token: &str) -> Result<AckLink, axum::response::Response> {
    match st.notify.ack_claim(token).await {
        Ok(Some(link)) => Ok(link),
        Ok(None) => Err(page(
            StatusCode::NOT_FOUND,
            "Link not valid",
            "This acknowledgement link is invalid or has expired, or its alert is resolved.",
            "",
        )),
        Err(e) => Err(Problem::from(e).into_response()),
    }
}

/// GET (and HEAD): what the link acknowledges, and the button that does it.
async fn ack_page(
    State(st): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> axum::response::Response {
    let link = match claim(&st, &token).await {
        Ok(link) => link,
        Err(answer) => return answer,
    };
    let a = &link.alert;
    let status = match &a.acked_by {
        Some(by) if a.status == AlertStatus::Acked => format!("acknowledged by {by}"),
        _ => "open".to_string(),
    };
    let text = format!(
        "{} alert \"{}\", opened {}, {status}. This link was sent to {}.",
        a.severity.as_str().to_uppercase(),
        a.title,
        a.opened_at,
        link.by
    );
    let form = if a.status == AlertStatus::Open {
        "<form method=\"post\"><button type=\"submit\">Acknowledge</button></form>"
    } else {
        "<p>It is acknowledged already; nothing is left to do here.</p>"
    };
    page(StatusCode::OK, "Acknowledge this alert?", &text, form)
}

/// POST: acknowledges the link's alert.
async fn ack_link(
    State(st): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> axum::response::Response {
    let link = match claim(&st, &token).await {
        Ok(link) => link,
        Err(answer) => return answer,
    };
    let alert = &link.alert;
    match st
        .alerting
        .act_for(alert.tenant_id, alert.id, AlertAction::Ack, link.by, "link")
        .await
    {
        Ok(Some(a)) => page(
            StatusCode::OK,
            "Acknowledged",
            &format!(
                "The alert \"{}\" is acknowledged; its escalation has stopped.",
                a.title
            ),
            "",
        ),
        Ok(None) => page(
            StatusCode::OK,
            "Nothing to acknowledge",
            "The alert is no longer open: it was acknowledged, snoozed or resolved already.",
            "",
        ),
        Err(e) => Problem::from(e).into_response(),
    }
}

async fn contact_data(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.notify
            .contact_disclosure(&c.principal, &name, &st.events)
            .await?,
    ))
}
