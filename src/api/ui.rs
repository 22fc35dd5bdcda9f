//! The UI's pages and form actions (issue 36). Each route is in the one route table with the
//! permission of the API operation it stands for, so the same authorisation and cross-site
//! check run first; a handler parses, calls the same domain function as the API, and renders
//! (`web`). Actions are form POSTs answered with 303 to the page they came from; a refused one
//! answers an HTML page with the problem's status and detail.

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::extract::path_id;
use super::pagination::{ALERTS, AUDIT, EVENTS, INCIDENTS, OBJECTS, Page, PageQuery};
use super::router::{HTML, Route};
use crate::model::alert::{AlertFilter, AlertStatus, SnoozeRequest};
use crate::model::audit::AuditFilter;
use crate::model::config::{ConfigDoc, KINDS, Kind, kind_by_name};
use crate::model::event::{Event, EventFilter, EventType};
use crate::model::identity::{
    ActorType, ChangePassword, CreateUser, MintedToken, TokenRequest, UpdateUser,
};
use crate::model::identity::{Branding, Preferences};
use crate::model::incident::IncidentBody;
use crate::model::notify::OverrideBody;
use crate::model::object::{ObjectFilter, ObjectKind, ObjectView};
use crate::model::suppression::{DowntimeBody, SilenceBody};
use crate::model::{GoDuration, Timestamp};
use crate::monitor::metrics::MetricQuery;
use crate::web::views::{self, Can, OpenAlert, SuppressionDraft};
use crate::web::{self, Frame, Notice, Section, Theme, assets};
use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, LOCATION, VARY};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::Markup;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/", problems).permission("objects:read").doc("ui", "Problems page", "The UI's start page: objects not OK or UP, unhandled first (acknowledged or in downtime is handled; `handled=1` lists those too), worst first, each with its open alert's acknowledge button; the count in the title; live. An anonymous browser is redirected to `/login`.")
            .query::<ProblemsQuery>().answers_text(200, HTML).answers_empty(302).page(),
        Route::get("/alerts", alerts).permission("alerts:read").doc("ui", "Alerts page", "`status` (`open`, `acked`, `resolved,expired`), `cursor`; newest first, 50 a page; open alerts can be acknowledged one by one or selected and acknowledged together; live.")
            .query::<AlertsQuery>().answers_text(200, HTML).page(),
        Route::post("/alerts/ack", ack_many).permission("alerts:ack").doc("ui", "Acknowledge selected alerts", "Form: `id` repeated, `back`. Each alert is acknowledged as by `POST /api/v1/alerts/{id}:ack` (one audit entry and `ack` event each); those no longer open are left. 303 to `back`.")
            .form::<BulkForm>().answers_empty(303).page(),
        Route::get("/alerts/{id}", alert).permission("alerts:read").doc("ui", "Alert page", "The alert, its facts and labels, acknowledge (with a comment), snooze, resolve, and its timeline (opened, acknowledged, escalations, notifications, resolved); live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/ack", ack).permission("alerts:ack").doc("ui", "Acknowledge an alert", "Form: optional `comment`, `back`. As `POST /api/v1/alerts/{id}:ack`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/snooze", snooze).permission("alerts:ack").doc("ui", "Snooze an alert", "Form: `duration` (`30m`, `1h`...), `back`. As `POST /api/v1/alerts/{id}:snooze`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/alerts/{id}/resolve", resolve).permission("alerts:ack").doc("ui", "Resolve an alert", "Form: `back`. As `POST /api/v1/alerts/{id}:resolve`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(409, HTML).page(),
        Route::post("/alerts/{id}/incident", assign_incident).permission("incidents:write").doc("ui", "Add an alert to an incident", "Form: `incident` (an open incident's id, or `new` for an incident of its own titled as the alert). As `PUT /api/v1/incidents/{id}` with the alert added (or `POST /api/v1/incidents`); 303 to the incident.")
            .form::<IncidentForm>().answers_empty(303).answers_text(409, HTML).page(),
        Route::get("/incidents", incidents).permission("incidents:read").doc("ui", "Incidents page", "Open incidents, or all with `all=1`; newest first, 50 a page.")
            .query::<IncidentsQuery>().answers_text(200, HTML).page(),
        Route::get("/incidents/{id}", incident).permission("incidents:read").doc("ui", "Incident page", "The incident, its alerts, its timeline (`incident_update` events), its status to change; live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/incidents/{id}/status", incident_status).permission("incidents:write").doc("ui", "Change an incident's status", "Form: `status` (open, acked, resolved), `version` (the version the page showed: a stale one is 409, as `If-Match` on `PUT /api/v1/incidents/{id}`); 303 back.")
            .form::<IncidentForm>().answers_empty(303).answers_text(409, HTML).page(),
        Route::get("/objects", objects).permission("objects:read").doc("ui", "Objects page", "`q` (name contains), `selector` (labels), `cursor`; hosts and services with their state, 100 a page.")
            .query::<ObjectsQuery>().answers_text(200, HTML).page(),
        Route::get("/objects/{id}", object).permission("objects:read").doc("ui", "Object page", "State, output, long output and performance data, a host's services, the object's recent events, check now; live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/objects/{id}/check-now", check_now).permission("checks:run").doc("ui", "Check an object now", "Form: `back`. As `POST /api/v1/objects/{id}/check-now`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/oncall", on_call).permission("oncall:read").doc("ui", "On-call page", "The caller's shifts of the next 7 days (theirs: the contact whose `userId` is the caller), who is on call now in each schedule and until when, with call and e-mail links, and each schedule's next 7 days, overrides marked.")
            .answers_text(200, HTML).page(),
        Route::post("/oncall/{schedule}/take-over", take_over).permission("oncall:write").doc("ui", "Take a shift over", "Form: `start`, `end` (the shift's). An override of the schedule for the caller's contact from the shift's start (now, if it has begun) to its end, as `POST /api/v1/schedules/{name}/overrides`; 303 to `/oncall`; 422 when no contact names the caller.")
            .form::<TakeOverForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/events", events).permission("events:read").doc("ui", "Events page", "The tenant's events, newest first, 50 a page, `types` filter, `cursor`; live.")
            .query::<EventsQuery>().answers_text(200, HTML).page(),
        Route::get("/silences", silences).permission("objects:read").doc("ui", "Silences page", "Active silences with how many active alerts each matches now and a warning when one ends within the hour, upcoming ones, the last 50 expired; expire.")
            .answers_text(200, HTML).page(),
        Route::get("/silences/new", new_silence).permission("silences:write").doc("ui", "New silence form", "Pre-filled from the query: `selector`, `textRegex` (the alert page links it with the alert's labels and title).")
            .query::<SilenceDraftQuery>().answers_text(200, HTML).page(),
        Route::post("/silences", create_silence).permission("silences:write").doc("ui", "Create a silence", "Form: `selector`, `textRegex`, `duration` (from now), `comment`. As `POST /api/v1/silences`; 303 to `/silences`; a refusal shows the form again with the reason (422).")
            .form::<SuppressionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/silences/{id}/expire", expire_silence).permission("silences:write").doc("ui", "Expire a silence", "Form: `back`. As `DELETE /api/v1/silences/{id}`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/downtimes", downtimes).permission("objects:read").doc("ui", "Downtimes page", "Active downtimes (flagged when ending within the hour), upcoming or waiting ones, the last 50 ended; end now.")
            .answers_text(200, HTML).page(),
        Route::get("/downtimes/new", new_downtime).permission("downtimes:write").doc("ui", "New downtime form", "`object` (an object id: the object page links it) or a selector field.")
            .query::<DowntimeDraftQuery>().answers_text(200, HTML).page(),
        Route::post("/downtimes", create_downtime).permission("downtimes:write").doc("ui", "Start a downtime", "Form: `objectId` or `selector`, `duration` (from now), `comment`. As `POST /api/v1/downtimes` (fixed); 303 to `/downtimes`; a refusal shows the form again with the reason (422).")
            .form::<SuppressionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/downtimes/{id}/end", end_downtime).permission("downtimes:write").doc("ui", "End a downtime", "Form: `back`. As `DELETE /api/v1/downtimes/{id}`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/sites", sites).permission("objects:read").doc("ui", "Sites page", "Each field site as the main sees it: connected, quiet or stale, its last heartbeat, version, bundle, apply error, open alerts forwarded; live.")
            .answers_text(200, HTML).page(),
        Route::get("/audit", audit).permission("admin:audit").doc("ui", "Audit page", "The tenant's audit entries, newest first, 50 a page.")
            .query::<CursorQuery>().answers_text(200, HTML).page(),
        Route::post("/account/password", change_password).identity().doc("ui", "Change the password", "Form: `oldPassword`, `newPassword`. As `POST /api/v1/users/me:change-password` (a signed-in local user only); 303 to `/account`; a wrong current password or a weak new one shows the page again with the reason.")
            .form::<ChangePassword>().answers_empty(303).answers_text(403, HTML).page(),
        Route::get("/users", users).permission("admin:users").doc("ui", "Users page", "The tenant's users: roles, local or single sign-on, last seen; enable, disable (not oneself), add.")
            .answers_text(200, HTML).page(),
        Route::post("/users", create_user).permission("admin:users").doc("ui", "Add a user", "Form: `name`, `email`, `role`, optional `password`. As `POST /api/v1/users`; 303 to `/users`; a refusal shows the page again with the reason.")
            .form::<AccountsForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/users/{id}/disable", disable_user).permission("admin:users").doc("ui", "Disable a user", "As `PUT /api/v1/users/{id}` with `disabled: true` (the last administrator stays); 303 to `/users`.")
            .form::<ActionForm>().answers_empty(303).answers_text(409, HTML).page(),
        Route::post("/users/{id}/enable", enable_user).permission("admin:users").doc("ui", "Enable a user", "As `PUT /api/v1/users/{id}` with `disabled: false`; 303 to `/users`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/tokens", tokens).permission("admin:tokens").doc("ui", "API tokens page", "The tenant's API tokens without their secrets: roles, scopes, last use, expiry; rotate, revoke, mint.")
            .answers_text(200, HTML).page(),
        Route::post("/tokens", mint_token).permission("admin:tokens").doc("ui", "Mint an API token", "Form: `name`, `role`, optional `days` to expiry. As `POST /api/v1/api-tokens`; 200 with a page that shows the secret once (`Cache-Control: no-store`).")
            .form::<AccountsForm>().answers_text(200, HTML).answers_text(422, HTML).page(),
        Route::post("/tokens/{id}/rotate", rotate_token).permission("admin:tokens").doc("ui", "Rotate an API token", "As `POST /api/v1/api-tokens/{id}:rotate`; 200 with a page that shows the new secret once (`Cache-Control: no-store`).")
            .form::<ActionForm>().answers_text(200, HTML).page(),
        Route::post("/tokens/{id}/revoke", revoke_token).permission("admin:tokens").doc("ui", "Revoke an API token", "As `DELETE /api/v1/api-tokens/{id}`; 303 to `/tokens`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/config", config_kinds).identity().doc("ui", "Configuration page", "The kinds of configuration document the caller may read (each kind's `read` permission).")
            .answers_text(200, HTML).page(),
        Route::get("/config/{kind}", config_list).identity().doc("ui", "Documents of a kind", "By name, 500 at most. Needs the kind's `read` permission (it depends on the kind, so the page checks it: 403 without).")
            .answers_text(200, HTML).answers_text(403, HTML).answers_text(404, HTML).page(),
        Route::get("/config/{kind}/{name}", config_doc).identity().doc("ui", "A configuration document", "The document's own fields as YAML; with the kind's `write` permission, a form to change it, planned before it is applied. Needs the kind's `read` permission.")
            .answers_text(200, HTML).answers_text(403, HTML).answers_text(404, HTML).page(),
        Route::post("/config/{kind}/{name}/plan", config_plan).identity().doc("ui", "Plan a change", "Form: `yaml`, `version`. The change as removed and added lines against the stored document, and a form that applies exactly this text at that version; YAML that does not read is 422. Needs the kind's `write` permission.")
            .form::<ConfigForm>().answers_text(200, HTML).answers_text(403, HTML).answers_text(422, HTML).page(),
        Route::post("/config/{kind}/{name}", config_apply).identity().doc("ui", "Apply a planned change", "Form: `yaml`, `version`. As `PUT /api/v1/{kind}/{name}` with `If-Match: version` (a change made since the plan is 409; an invalid document is 422 with the reason); 303 to the document. Needs the kind's `write` permission.")
            .form::<ConfigForm>().answers_empty(303).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/account/preferences", set_preferences).identity().doc("ui", "Set the look of one's pages", "Form: `theme` (`light`, `dark`, or empty: the device's), `live` (`on`, `off`). Kept in the caller's preferences (`extra.theme`, `extra.live`, as `PUT /api/v1/users/me/preferences`); 303 to `/account`.")
            .form::<LookForm>().answers_empty(303).page(),
        Route::post("/account/branding", set_branding).permission("config:write").doc("ui", "Set the instance's colours", "Form: `mode` (`light`, `dark`, or empty: each device's). As `PUT /api/v1/branding` with `mode`; a user's own theme wins over it; 303 to `/account`.")
            .form::<LookForm>().answers_empty(303).page(),
        Route::get("/account", account).identity().doc("ui", "Account page", "Who is signed in: name, tenant and permissions.")
            .answers_text(200, HTML).page(),
        Route::get("/assets/{file}", asset).doc("ui", "UI assets", "The stylesheet and the live-update module under names that carry their content's hash: `Cache-Control: public, max-age=31536000, immutable`, gzipped for clients that accept it; any other name is 404.")
            .answers_text(200, "text/css").answers_text(404, "text/plain").page(),
    ]
}

/// Items on one page of a UI list.
const UI_PAGE: usize = 50;

fn html(status: StatusCode, body: String) -> Response {
    (status, [(CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A refused action or a failed page as an HTML page, through the one error map.
fn failed(e: impl Into<Problem>) -> Response {
    let p: Problem = e.into();
    if p.status.is_server_error() {
        tracing::error!(code = %p.code.as_str(), internal = p.internal.as_deref().unwrap_or(""), "a UI request failed");
    }
    html(
        p.status,
        web::error(p.status.as_u16(), p.title(), &p.detail),
    )
}

/// Where an action returns: a path of this server only (never `//host` or a URL), else `/`.
fn back_to(back: Option<&str>) -> String {
    match back {
        Some(b) if b.starts_with('/') && !b.starts_with("//") && !b.contains('\\') => b.to_string(),
        _ => "/".to_string(),
    }
}

/// 303 to `back` with what was done, shown once by the page.
fn done(back: Option<&str>, did: &str) -> Response {
    let to = back_to(back);
    let sep = if to.contains('?') { '&' } else { '?' };
    let location = format!("{to}{sep}did={did}");
    match HeaderValue::from_str(&location) {
        Ok(v) => (StatusCode::SEE_OTHER, [(LOCATION, v)]).into_response(),
        Err(_) => (
            StatusCode::SEE_OTHER,
            [(LOCATION, HeaderValue::from_static("/"))],
        )
            .into_response(),
    }
}

/// The line a page shows after an action redirected to it (`did=`), from a fixed list: the
/// query never puts its own text on the page.
fn notice(did: Option<&str>) -> Option<Notice> {
    let text = match did? {
        "ack" => "Acknowledged.",
        "ack-some" => "Acknowledged the selected alerts that were still open.",
        "snooze" => "Snoozed.",
        "resolve" => "Resolved.",
        "check" => "Check scheduled.",
        "silence" => "Silence created.",
        "expire" => "Silence expired.",
        "downtime" => "Downtime started.",
        "end" => "Downtime ended.",
        "assign" => "Added to the incident.",
        "status" => "Status changed.",
        "password" => "Password changed.",
        "user" => "User added.",
        "disable" => "User disabled.",
        "enable" => "User enabled.",
        "revoke" => "Token revoked.",
        "takeover" => "The shift is yours.",
        "saved" => "Saved.",
        "look" => "Saved: your pages look so from now on.",
        _ => return None,
    };
    Some(Notice::Done(text.into()))
}

fn frame<'a>(
    c: &'a Visitor,
    section: Section,
    title: String,
    live: &'a [&'a str],
    did: Option<&str>,
) -> Frame<'a> {
    Frame {
        principal: &c.principal,
        section,
        title,
        live: if c.live { live } else { &[] },
        notice: notice(did),
        theme: c.theme,
    }
}

/// The caller of a page, with how their pages look: their theme (else the instance's
/// branding mode; `None` follows the browser) and whether lists update live.
struct Visitor {
    caller: Caller,
    theme: Option<Theme>,
    live: bool,
}

impl std::ops::Deref for Visitor {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.caller
    }
}

/// The `extra` preference that sets a user's theme (`light`, `dark`; anything else: auto).
const THEME: &str = "theme";
/// The `extra` preference that turns live updates off (`off`).
const LIVE: &str = "live";

impl FromRequestParts<AppState> for Visitor {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Problem> {
        let caller = Caller::from_request_parts(parts, st).await?;
        // The look is a courtesy: when it cannot be read the page follows the browser.
        let prefs = match st.auth.preferences(&caller.principal, "me").await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "could not read a user's preferences");
                Preferences::default()
            }
        };
        let branding = match st.auth.branding().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the branding");
                Branding::default()
            }
        };
        let theme = prefs
            .extra
            .get(THEME)
            .and_then(|t| Theme::named(t))
            .or_else(|| branding.mode.as_deref().and_then(Theme::named));
        let live = prefs.extra.get(LIVE).map(String::as_str) != Some("off");
        Ok(Visitor {
            caller,
            theme,
            live,
        })
    }
}

fn can(c: &Caller) -> Can {
    Can {
        ack: c.principal.allows("alerts:ack"),
        check_now: c.principal.allows("checks:run"),
        silence: c.principal.allows("silences:write"),
        downtime: c.principal.allows("downtimes:write"),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct ProblemsQuery {
    handled: Option<String>,
    did: Option<String>,
}

/// Types whose events change what the problems and alert pages show.
const ALERT_LIVE: &[&str] = &[
    "state_change",
    "alert_opened",
    "alert_resolved",
    "ack",
    "escalation",
    "downtime",
];

/// The problems, and each problem object's open alert with whether a silence holds it.
async fn problems_with_alerts(
    st: &AppState,
    c: &Caller,
) -> Result<(Vec<crate::model::state::Problem>, HashMap<Uuid, OpenAlert>), Problem> {
    let items = st.results.problems(&c.principal, true, 500).await?;
    let mut open = HashMap::new();
    if c.principal.allows("alerts:read") {
        let filter = AlertFilter {
            statuses: vec![AlertStatus::Open],
            ..Default::default()
        };
        let alerts = st.alerting.list(&c.principal, filter, None, 1000).await?;
        let silenced = st.alerting.silenced(&c.principal, &alerts).await?;
        for a in alerts {
            if let Some(o) = a.object_id {
                open.entry(o).or_insert(OpenAlert {
                    id: a.id,
                    silenced: silenced.contains(&a.id),
                });
            }
        }
    }
    Ok((items, open))
}

async fn problems(
    State(st): State<AppState>,
    c: Visitor,
    Query(q): Query<ProblemsQuery>,
) -> Response {
    let handled_shown = q
        .handled
        .as_deref()
        .is_some_and(|h| h == "1" || h == "true");
    let (mut items, open) = match problems_with_alerts(&st, &c).await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let unhandled = items.iter().filter(|p| !views::handled(p, &open)).count();
    if !handled_shown {
        items.retain(|p| !views::handled(p, &open));
    }
    let title = if unhandled > 0 {
        format!("({unhandled}) Problems")
    } else {
        "Problems".to_string()
    };
    let content = views::problems(st.clock.now(), &items, handled_shown, &open, can(&c));
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Problems, title, ALERT_LIVE, q.did.as_deref()),
            content,
        ),
    )
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct AlertsQuery {
    status: Option<String>,
    cursor: Option<String>,
    did: Option<String>,
}

async fn alerts(State(st): State<AppState>, c: Visitor, Query(q): Query<AlertsQuery>) -> Response {
    let status = match q.status.as_deref() {
        Some("acked") => "acked",
        Some("resolved,expired") => "resolved,expired",
        _ => "open",
    };
    let filter = AlertFilter {
        statuses: status.split(',').filter_map(|s| s.parse().ok()).collect(),
        ..Default::default()
    };
    let req = PageQuery {
        limit: Some(UI_PAGE.to_string()),
        cursor: q.cursor.clone(),
    }
    .resolve(ALERTS);
    let cursor = req.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = match st
        .alerting
        .list(&c.principal, filter, cursor, req.limit)
        .await
    {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let page = Page::new(items, &req, |a| a.id.to_string());
    let title = match status {
        "open" => format!("({}) Open alerts", page.items.len()),
        "acked" => "Acknowledged alerts".to_string(),
        _ => "Closed alerts".to_string(),
    };
    let content = views::alerts(
        st.clock.now(),
        &page.items,
        status,
        page.next_cursor.as_deref(),
        can(&c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Alerts, title, ALERT_LIVE, q.did.as_deref()),
            content,
        ),
    )
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct DidQuery {
    did: Option<String>,
}

/// The events of an alert's life (opened, acknowledged, escalated, notified, resolved), newest
/// first, from its opening on.
async fn alert_timeline(
    st: &AppState,
    c: &Caller,
    alert: &crate::model::alert::Alert,
) -> Result<Vec<crate::model::event::Event>, Problem> {
    let filter = EventFilter {
        tenant_id: c.principal.tenant,
        types: vec![
            EventType::AlertOpened,
            EventType::Ack,
            EventType::Escalation,
            EventType::Notification,
            EventType::AlertResolved,
        ],
        from: Some(alert.opened_at),
        ..Default::default()
    };
    let id = alert.id.to_string();
    let events = st
        .events
        .list_committed(&st.store, filter, None, 1000)
        .await?;
    Ok(events
        .into_iter()
        .filter(|e| e.payload.get("alertId").and_then(|v| v.as_str()) == Some(id.as_str()))
        .take(UI_PAGE)
        .collect())
}

async fn alert(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    Query(q): Query<DidQuery>,
) -> Response {
    let found = async {
        let alert = st.alerting.get(&c.principal, path_id(&id)?).await?;
        let events = alert_timeline(&st, &c, &alert).await?;
        // An alert may outlive its object: then it is named without it.
        let object = match alert.object_id {
            Some(o) => object_view(&st, &c, o)
                .await
                .ok()
                .map(|v| views::view_name(&v)),
            None => None,
        };
        let incidents = if c.principal.allows("incidents:write") {
            Some(
                st.alerting
                    .incidents(&c.principal, true, None, UI_PAGE)
                    .await?,
            )
        } else {
            None
        };
        Ok::<_, Problem>((alert, events, object, incidents))
    };
    let (alert, events, object, incidents) = match found.await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let content = views::alert(
        st.clock.now(),
        &alert,
        object.as_deref(),
        incidents.as_deref(),
        &events,
        can(&c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Alerts,
                alert.title.clone(),
                ALERT_LIVE,
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

/// A UI action's form.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct ActionForm {
    /// The page to return to: a path of this server.
    back: Option<String>,
    /// Acknowledge: an optional comment.
    comment: Option<String>,
    /// Snooze: how long (`30m`, `1h`...).
    duration: Option<String>,
}

impl ActionForm {
    fn parse(body: &Bytes) -> Result<Self, Problem> {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
    }
}

/// The bulk acknowledge form (`id` repeated, which a plain form decoder does not keep).
#[derive(Default, schemars::JsonSchema)]
struct BulkForm {
    /// An alert id, once per selected alert.
    id: Vec<String>,
    back: Option<String>,
}

impl BulkForm {
    fn parse(body: &Bytes) -> Self {
        let mut form = BulkForm::default();
        for (k, v) in form_urlencoded::parse(body) {
            match k.as_ref() {
                "id" => form.id.push(v.into_owned()),
                "back" => form.back = Some(v.into_owned()),
                _ => {}
            }
        }
        form
    }
}

async fn ack(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        let comment = f
            .comment
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        st.alerting
            .ack(&c.principal, &c.actor, path_id(&id)?, comment)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "ack"),
        Err(p) => failed(p),
    }
}

async fn ack_many(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let f = BulkForm::parse(&body);
    for raw in f.id.iter().take(ALERTS.max.unwrap_or(1000)) {
        let Ok(id) = Uuid::parse_str(raw) else {
            return failed(Problem::not_found());
        };
        match st.alerting.ack(&c.principal, &c.actor, id, None).await {
            Ok(_) => {}
            // Acknowledged or closed meanwhile (by someone else, or escalation): left as it is.
            Err(e) => {
                let p = Problem::from(e);
                if p.status != StatusCode::NOT_FOUND {
                    return failed(p);
                }
            }
        }
    }
    done(f.back.as_deref(), "ack-some")
}

async fn snooze(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        let req = SnoozeRequest {
            until: None,
            duration: Some(f.duration.unwrap_or_else(|| "1h".into())),
        };
        st.alerting
            .snooze(&c.principal, &c.actor, path_id(&id)?, req)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "snooze"),
        Err(p) => failed(p),
    }
}

async fn resolve(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        st.alerting
            .resolve(&c.principal, &c.actor, path_id(&id)?)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "resolve"),
        Err(p) => failed(p),
    }
}

/// The incident forms: which incident (`new` for one of its own), or a status and the version
/// it was shown at.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct IncidentForm {
    incident: Option<String>,
    status: Option<String>,
    version: Option<u64>,
}

impl IncidentForm {
    fn parse(body: &Bytes) -> Result<Self, Problem> {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
    }
}

/// 303 to an incident's page, saying what was done.
fn to_incident(id: Uuid, did: &str) -> Response {
    done(Some(&format!("/incidents/{id}")), did)
}

async fn assign_incident(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = IncidentForm::parse(&body)?;
        let alert = st.alerting.get(&c.principal, path_id(&id)?).await?;
        let incident = match f.incident.as_deref() {
            Some("new") => {
                let body = IncidentBody {
                    title: Some(alert.title.clone()),
                    severity: Some(alert.severity.as_str().into()),
                    alert_ids: Some(vec![alert.id]),
                    ..Default::default()
                };
                st.alerting
                    .create_incident(&c.principal, &c.actor, body)
                    .await?
            }
            Some(raw) => {
                let old = st.alerting.incident(&c.principal, path_id(raw)?).await?;
                let mut ids = old.alert_ids.clone();
                if !ids.contains(&alert.id) {
                    ids.push(alert.id);
                }
                let body = IncidentBody {
                    alert_ids: Some(ids),
                    ..Default::default()
                };
                st.alerting
                    .update_incident(&c.principal, &c.actor, old.id, old.version, body)
                    .await?
            }
            None => return Err(Problem::validation("incident", "choose an incident")),
        };
        Ok::<_, Problem>(incident.id)
    };
    match result.await {
        Ok(incident) => to_incident(incident, "assign"),
        Err(p) => failed(p),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct IncidentsQuery {
    all: Option<String>,
    cursor: Option<String>,
}

async fn incidents(
    State(st): State<AppState>,
    c: Visitor,
    Query(q): Query<IncidentsQuery>,
) -> Response {
    let all = q.all.as_deref() == Some("1");
    let req = PageQuery {
        limit: Some(UI_PAGE.to_string()),
        cursor: q.cursor.clone(),
    }
    .resolve(INCIDENTS);
    let cursor = req.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = match st
        .alerting
        .incidents(&c.principal, !all, cursor, req.limit)
        .await
    {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let page = Page::new(items, &req, |i| i.id.to_string());
    let content = views::incidents(
        st.clock.now(),
        &page.items,
        all,
        page.next_cursor.as_deref(),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Incidents,
                "Incidents".into(),
                &["incident_update"],
                None,
            ),
            content,
        ),
    )
}

async fn incident(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    Query(q): Query<DidQuery>,
) -> Response {
    let found = async {
        let incident = st.alerting.incident(&c.principal, path_id(&id)?).await?;
        let mut alerts = Vec::new();
        for a in incident.alert_ids.iter().take(ALERTS.default) {
            // An alert removed by retention is left out.
            if let Ok(alert) = st.alerting.get(&c.principal, *a).await {
                alerts.push(alert);
            }
        }
        let filter = EventFilter {
            tenant_id: c.principal.tenant,
            types: vec![EventType::IncidentUpdate],
            from: Some(incident.opened_at),
            ..Default::default()
        };
        let key = incident.id.to_string();
        let events: Vec<Event> = st
            .events
            .list_committed(&st.store, filter, None, 1000)
            .await?
            .into_iter()
            .filter(|e| e.payload.get("incidentId").and_then(|v| v.as_str()) == Some(key.as_str()))
            .take(UI_PAGE)
            .collect();
        Ok::<_, Problem>((incident, alerts, events))
    };
    let (incident, alerts, events) = match found.await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let content = views::incident(
        st.clock.now(),
        &incident,
        &alerts,
        &events,
        c.principal.allows("incidents:write"),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Incidents,
                incident.title.clone(),
                &["incident_update", "alert_resolved", "ack"],
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

async fn incident_status(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = IncidentForm::parse(&body)?;
        let id = path_id(&id)?;
        let body = IncidentBody {
            status: f.status,
            ..Default::default()
        };
        st.alerting
            .update_incident(&c.principal, &c.actor, id, f.version.unwrap_or(0), body)
            .await?;
        Ok::<_, Problem>(id)
    };
    match result.await {
        Ok(id) => to_incident(id, "status"),
        Err(p) => failed(p),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct ObjectsQuery {
    q: Option<String>,
    selector: Option<String>,
    cursor: Option<String>,
}

async fn objects(
    State(st): State<AppState>,
    c: Visitor,
    Query(q): Query<ObjectsQuery>,
) -> Response {
    let text = q.q.clone().unwrap_or_default();
    let raw_selector = q.selector.clone().unwrap_or_default();
    let selector = match raw_selector.parse() {
        Ok(s) => s,
        Err(e) => {
            let e: crate::model::SelectorError = e;
            return failed(Problem::validation("selector", e.to_string()));
        }
    };
    let filter = ObjectFilter {
        selector,
        q: Some(text.trim().to_string()).filter(|s| !s.is_empty()),
        ..Default::default()
    };
    let req = PageQuery {
        limit: Some("100".into()),
        cursor: q.cursor.clone(),
    }
    .resolve(OBJECTS);
    let after = req.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = match st
        .inventory
        .objects(&c.principal, filter, after, req.limit, true)
        .await
    {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let page = Page::new(items, &req, |v| v.object.id.to_string());
    let content = views::objects(
        st.clock.now(),
        &page.items,
        &text,
        &raw_selector,
        page.next_cursor.as_deref(),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Objects, "Objects".into(), &[], None),
            content,
        ),
    )
}

/// One object with its state, found the way the lists find it (by kind, host and name).
async fn object_view(st: &AppState, c: &Caller, id: Uuid) -> Result<ObjectView, Problem> {
    let o = st.inventory.object(&c.principal, id).await?;
    let filter = ObjectFilter {
        kind: Some(o.kind),
        host_id: o.host_id,
        name: Some(o.name.clone()),
        ..Default::default()
    };
    let views = st
        .inventory
        .objects(&c.principal, filter, None, 10, true)
        .await?;
    views
        .into_iter()
        .find(|v| v.object.id == id)
        .ok_or_else(Problem::not_found)
}

async fn object(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    Query(q): Query<DidQuery>,
) -> Response {
    let id = match path_id(&id) {
        Ok(id) => id,
        Err(p) => return failed(p),
    };
    let view = match object_view(&st, &c, id).await {
        Ok(v) => v,
        Err(p) => return failed(p),
    };
    let services = if view.object.kind == ObjectKind::Host {
        let filter = ObjectFilter {
            kind: Some(ObjectKind::Service),
            host_id: Some(id),
            ..Default::default()
        };
        match st
            .inventory
            .objects(
                &c.principal,
                filter,
                None,
                OBJECTS.max.unwrap_or(5000),
                true,
            )
            .await
        {
            Ok(s) => s,
            Err(e) => return failed(e),
        }
    } else {
        Vec::new()
    };
    let (changes, events) = match object_events(&st, &c, id).await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let graphs = match object_graphs(&st, &c, id).await {
        Ok(g) => g,
        Err(p) => return failed(p),
    };
    let title = views::view_name(&view);
    let content = views::object(
        st.clock.now(),
        &view,
        &services,
        &changes,
        &graphs,
        &events,
        can(&c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Objects,
                title,
                &["state_change", "downtime", "ack"],
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

/// An object's state changes of the last day (for its history bar) and its latest events;
/// none without `events:read`.
async fn object_events(
    st: &AppState,
    c: &Caller,
    id: Uuid,
) -> Result<(Vec<Event>, Vec<Event>), Problem> {
    if !c.principal.allows("events:read") {
        return Ok((Vec::new(), Vec::new()));
    }
    let now = st.clock.now();
    let day = EventFilter {
        tenant_id: c.principal.tenant,
        object_id: Some(id),
        types: vec![EventType::StateChange],
        from: Timestamp::from_millis(now.as_millis() - views::HISTORY_SECS * 1000),
        ..Default::default()
    };
    let changes = st.events.list_committed(&st.store, day, None, 1000).await?;
    let latest = EventFilter {
        tenant_id: c.principal.tenant,
        object_id: Some(id),
        ..Default::default()
    };
    let events = st
        .events
        .list_committed(&st.store, latest, None, 20)
        .await?;
    Ok((changes, events))
}

/// Graphs of an object's metric series over the last day (at most four); none without
/// `metrics:read`.
async fn object_graphs(st: &AppState, c: &Caller, id: Uuid) -> Result<Vec<views::Graph>, Problem> {
    if !c.principal.allows("metrics:read") {
        return Ok(Vec::new());
    }
    let now = st.clock.now();
    let mut graphs = Vec::new();
    for s in st
        .metric_queries
        .series(&c.principal, id)
        .await?
        .into_iter()
        .take(4)
    {
        let q = MetricQuery {
            object_id: Some(id),
            metric: Some(s.metric.clone()),
            from: Timestamp::from_millis(now.as_millis() - views::HISTORY_SECS * 1000)
                .unwrap_or(now),
            to: now.plus(std::time::Duration::from_secs(1)),
            max_points: Some(120),
            step_seconds: None,
            agg: None,
        };
        // A series retention emptied since it was listed has nothing to draw.
        let points = match st
            .metric_queries
            .query(&c.principal, q)
            .await
            .map_err(Problem::from)
        {
            Ok(p) => p,
            Err(p) if p.status == StatusCode::NOT_FOUND => continue,
            Err(p) => return Err(p),
        };
        graphs.push(views::Graph {
            metric: s.metric,
            unit: s.unit,
            points: points.points.into_iter().map(|p| (p.t, p.v)).collect(),
        });
    }
    Ok(graphs)
}

async fn check_now(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        st.scheduler
            .check_now(c.principal.tenant, path_id(&id)?)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "check"),
        Err(p) => failed(p),
    }
}

async fn on_call(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    let found = async {
        let now_on = st.notify.on_call_now(&c.principal).await?;
        let week = st
            .clock
            .now()
            .plus(std::time::Duration::from_secs(7 * 86_400))
            .to_string();
        let mut upcoming = Vec::new();
        for s in &now_on {
            let shifts = st
                .notify
                .timeline(&c.principal, &s.schedule, None, Some(&week))
                .await?;
            upcoming.push(views::Upcoming {
                schedule: s.schedule.clone(),
                shifts,
            });
        }
        let me = st.notify.own_contact(&c.principal).await?;
        Ok::<_, Problem>((now_on, upcoming, me))
    };
    match found.await {
        Ok((now_on, upcoming, me)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::OnCall,
                    "On call now".into(),
                    &[],
                    q.did.as_deref(),
                ),
                views::on_call(
                    st.clock.now(),
                    &now_on,
                    &upcoming,
                    me.as_deref(),
                    c.principal.allows("oncall:write"),
                ),
            ),
        ),
        Err(p) => failed(p),
    }
}

/// The take-over form: the shift's times as the page showed them.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct TakeOverForm {
    start: Option<String>,
    end: Option<String>,
}

/// An override putting the caller's contact on the shift, from now if it has begun.
async fn take_over(
    State(st): State<AppState>,
    c: Visitor,
    Path(schedule): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f: TakeOverForm = serde_urlencoded::from_bytes(&body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))?;
        let me = st.notify.own_contact(&c.principal).await?.ok_or_else(|| {
            Problem::validation(
                "override",
                "no contact names you (its userId): ask an editor to add one",
            )
        })?;
        let now = st.clock.now();
        let start = match f.start.as_deref().and_then(|s| s.parse::<Timestamp>().ok()) {
            Some(s) if s > now => s,
            _ => now,
        };
        let body = OverrideBody {
            schedule: None,
            contact_id: Some(me),
            start: Some(start.to_string()),
            end: f.end,
            reason: Some(format!("taken over by {} in the UI", c.principal.name)),
        };
        st.notify
            .create_override(&c.principal, &c.actor, &schedule, body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/oncall"), "takeover"),
        Err(p) => failed(p),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct EventsQuery {
    types: Option<String>,
    cursor: Option<String>,
}

async fn events(State(st): State<AppState>, c: Visitor, Query(q): Query<EventsQuery>) -> Response {
    let kind = q
        .types
        .as_deref()
        .and_then(|t| EventType::ALL.into_iter().find(|k| k.as_str() == t));
    let filter = EventFilter {
        tenant_id: c.principal.tenant,
        types: kind.into_iter().collect(),
        ..Default::default()
    };
    let req = PageQuery {
        limit: Some(UI_PAGE.to_string()),
        cursor: q.cursor.clone(),
    }
    .resolve(EVENTS);
    let cursor = req.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = match st
        .events
        .list_committed(&st.store, filter, cursor, req.limit)
        .await
    {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let page = Page::new(items, &req, |e| e.id.to_string());
    let live: &[&str] = if page.next_cursor.is_none() || req.cursor.is_none() {
        &[
            "state_change",
            "alert_opened",
            "alert_resolved",
            "ack",
            "escalation",
            "notification",
            "ingress",
            "downtime",
            "silence",
            "config",
            "system",
            "heartbeat_missed",
            "incident_update",
        ]
    } else {
        &[]
    };
    let content = views::events(
        st.clock.now(),
        &page.items,
        kind.map_or("", |k| k.as_str()),
        page.next_cursor.as_deref(),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Events, "Events".into(), live, None),
            content,
        ),
    )
}

async fn silences(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    let result = async {
        let all = st.alerting.silences(&c.principal, false).await?;
        let reach = st.alerting.silence_reach(&c.principal, &all).await?;
        Ok::<_, Problem>(all.into_iter().zip(reach).collect::<Vec<_>>())
    };
    match result.await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Silences,
                    "Silences".into(),
                    &["silence", "alert_opened", "alert_resolved"],
                    q.did.as_deref(),
                ),
                views::silences(st.clock.now(), &items, c.principal.allows("silences:write")),
            ),
        ),
        Err(p) => failed(p),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SilenceDraftQuery {
    selector: Option<String>,
    text_regex: Option<String>,
}

async fn new_silence(c: Visitor, Query(q): Query<SilenceDraftQuery>) -> Response {
    let draft = SuppressionDraft {
        selector: q.selector.unwrap_or_default(),
        text_regex: q.text_regex.unwrap_or_default(),
        ..Default::default()
    };
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Silences, "New silence".into(), &[], None),
            views::silence_form(&draft),
        ),
    )
}

/// The new silence and new downtime forms.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SuppressionForm {
    selector: Option<String>,
    text_regex: Option<String>,
    /// A downtime of one object.
    object_id: Option<String>,
    /// How long from now: `2h`, `24h`...
    duration: Option<String>,
    comment: Option<String>,
}

impl SuppressionForm {
    fn parse(body: &Bytes) -> Self {
        serde_urlencoded::from_bytes(body).unwrap_or_default()
    }

    /// The end of the suppression: now plus the chosen duration.
    fn end(&self, now: Timestamp) -> Result<Timestamp, Problem> {
        let raw = self.duration.as_deref().unwrap_or("2h");
        let d: GoDuration = raw
            .parse()
            .map_err(|_| Problem::validation("duration", format!("{raw:?} is not a duration")))?;
        Ok(now.plus(d.0))
    }

    fn draft(&self, object: Option<(Uuid, String)>) -> SuppressionDraft {
        SuppressionDraft {
            selector: self.selector.clone().unwrap_or_default(),
            text_regex: self.text_regex.clone().unwrap_or_default(),
            comment: self.comment.clone().unwrap_or_default(),
            duration: self.duration.clone().unwrap_or_default(),
            object,
        }
    }
}

/// A refused form shown again with its fields and the reason.
fn form_again(c: &Visitor, section: Section, title: &str, p: Problem, form: Markup) -> Response {
    if p.status.is_server_error() {
        return failed(p);
    }
    let frame = Frame {
        notice: Some(Notice::Failed(p.detail.clone())),
        ..frame(c, section, title.into(), &[], None)
    };
    html(p.status, web::page(frame, form))
}

async fn create_silence(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let f = SuppressionForm::parse(&body);
    let result = async {
        let body = SilenceBody {
            comment: f.comment.clone(),
            selector: f.selector.clone(),
            text_regex: f.text_regex.clone(),
            starts_at: None,
            expires_at: Some(f.end(st.clock.now())?.to_string()),
        };
        st.alerting
            .create_silence(&c.principal, &c.actor, body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/silences"), "silence"),
        Err(p) => form_again(
            &c,
            Section::Silences,
            "New silence",
            p,
            views::silence_form(&f.draft(None)),
        ),
    }
}

async fn expire_silence(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        st.alerting
            .expire_silence(&c.principal, &c.actor, path_id(&id)?)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "expire"),
        Err(p) => failed(p),
    }
}

async fn downtimes(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    match st.alerting.downtimes(&c.principal, false).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Downtimes,
                    "Downtimes".into(),
                    &["downtime"],
                    q.did.as_deref(),
                ),
                views::downtimes(
                    st.clock.now(),
                    &items,
                    c.principal.allows("downtimes:write"),
                ),
            ),
        ),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct DowntimeDraftQuery {
    /// The object the downtime is for.
    object: Option<String>,
}

/// The object a downtime form is for, by id, with the name its page shows.
async fn downtime_object(
    st: &AppState,
    c: &Caller,
    raw: Option<&str>,
) -> Result<Option<(Uuid, String)>, Problem> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let v = object_view(st, c, path_id(raw)?).await?;
    Ok(Some((v.object.id, views::view_name(&v))))
}

async fn new_downtime(
    State(st): State<AppState>,
    c: Visitor,
    Query(q): Query<DowntimeDraftQuery>,
) -> Response {
    let object = match downtime_object(&st, &c, q.object.as_deref()).await {
        Ok(o) => o,
        Err(p) => return failed(p),
    };
    let draft = SuppressionDraft {
        object,
        ..Default::default()
    };
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Downtimes, "New downtime".into(), &[], None),
            views::downtime_form(&draft),
        ),
    )
}

async fn create_downtime(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let f = SuppressionForm::parse(&body);
    let object = match downtime_object(&st, &c, f.object_id.as_deref()).await {
        Ok(o) => o,
        Err(p) => return failed(p),
    };
    let result = async {
        let now = st.clock.now();
        let body = DowntimeBody {
            comment: f.comment.clone(),
            object_id: object.as_ref().map(|(id, _)| id.to_string()),
            selector: if object.is_some() {
                None
            } else {
                f.selector.clone()
            },
            kind: Some("fixed".into()),
            start: Some(now.to_string()),
            end: Some(f.end(now)?.to_string()),
            duration: None,
        };
        st.alerting
            .create_downtime(&c.principal, &c.actor, body, None)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/downtimes"), "downtime"),
        Err(p) => {
            let form = views::downtime_form(&f.draft(object));
            form_again(&c, Section::Downtimes, "New downtime", p, form)
        }
    }
}

async fn end_downtime(
    State(st): State<AppState>,
    c: Visitor,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let result = async {
        let f = ActionForm::parse(&body)?;
        st.alerting
            .end_downtime(&c.principal, &c.actor, path_id(&id)?)
            .await?;
        Ok::<_, Problem>(f.back)
    };
    match result.await {
        Ok(back) => done(back.as_deref(), "end"),
        Err(p) => failed(p),
    }
}

/// The account page's content: who, the look, the password form.
async fn account_content(st: &AppState, c: &Visitor) -> Result<Markup, Problem> {
    let p = &c.principal;
    let prefs = st.auth.preferences(p, "me").await?;
    let branding = if p.allows("config:write") {
        Some(st.auth.branding().await?.mode.unwrap_or_default())
    } else {
        None
    };
    let looks = views::Looks {
        theme: prefs.extra.get(THEME).map_or("", String::as_str),
        live: c.live,
        branding: branding.as_deref(),
    };
    Ok(views::account(
        &p.name,
        p.tenant,
        &p.permissions.to_vec(),
        c.actor.actor_type == ActorType::User,
        &looks,
    ))
}

async fn account(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    match account_content(&st, &c).await {
        Ok(content) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Account,
                    "Account".into(),
                    &[],
                    q.did.as_deref(),
                ),
                content,
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn change_password(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let req: ChangePassword = serde_urlencoded::from_bytes(&body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))?;
        st.auth.change_password(&c.principal, &c.actor, req).await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/account"), "password"),
        Err(p) => match account_content(&st, &c).await {
            Ok(form) => form_again(&c, Section::Account, "Account", p, form),
            Err(_) => failed(p),
        },
    }
}

/// The look forms: a user's theme and live updates, the instance's mode.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct LookForm {
    /// `light`, `dark`, or empty: as the device is set.
    theme: Option<String>,
    /// `on` or `off`.
    live: Option<String>,
    /// The instance's: `light`, `dark`, or empty.
    mode: Option<String>,
}

impl LookForm {
    fn parse(body: &Bytes) -> Result<Self, Problem> {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
    }
}

/// A scheme as stored: `light`, `dark`, or `system` for the device's.
fn scheme(raw: Option<&str>) -> &'static str {
    match raw.and_then(Theme::named) {
        Some(Theme::Light) => "light",
        Some(Theme::Dark) => "dark",
        None => "system",
    }
}

async fn set_preferences(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let f = LookForm::parse(&body)?;
        let mut prefs = st.auth.preferences(&c.principal, "me").await?;
        prefs
            .extra
            .insert(THEME.into(), scheme(f.theme.as_deref()).into());
        let live = if f.live.as_deref() == Some("off") {
            "off"
        } else {
            "on"
        };
        prefs.extra.insert(LIVE.into(), live.into());
        let body = serde_json::to_value(&prefs)
            .map_err(|e| Problem::internal(format!("preferences as JSON: {e}")))?;
        st.auth
            .set_preferences(&c.principal, &c.actor, "me", body)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/account"), "look"),
        Err(p) => failed(p),
    }
}

async fn set_branding(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let f = LookForm::parse(&body)?;
        let mut branding = st.auth.branding().await?;
        branding.mode = Some(scheme(f.mode.as_deref()).into());
        let body = serde_json::to_value(&branding)
            .map_err(|e| Problem::internal(format!("branding as JSON: {e}")))?;
        st.auth.set_branding(&c.principal, &c.actor, body).await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/account"), "look"),
        Err(p) => failed(p),
    }
}

/// The forms that add a user or mint a token.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct AccountsForm {
    name: Option<String>,
    email: Option<String>,
    /// One role, built in (`viewer`, `operator`, `editor`, `admin`) or the tenant's own.
    role: Option<String>,
    password: Option<String>,
    /// A token's days to expiry; empty: it does not expire.
    days: Option<String>,
}

impl AccountsForm {
    fn parse(body: &Bytes) -> Result<Self, Problem> {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
    }

    fn roles(&self) -> Vec<String> {
        self.role
            .iter()
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect()
    }
}

async fn users_page(
    st: &AppState,
    c: &Visitor,
    did: Option<&str>,
    failure: Option<Problem>,
) -> Response {
    let items = match st.auth.users(&c.principal).await {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let content = views::users(st.clock.now(), &items, c.principal.user);
    match failure {
        Some(p) => form_again(c, Section::Users, "Users", p, content),
        None => html(
            StatusCode::OK,
            web::page(frame(c, Section::Users, "Users".into(), &[], did), content),
        ),
    }
}

async fn users(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    users_page(&st, &c, q.did.as_deref(), None).await
}

async fn create_user(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let f = AccountsForm::parse(&body)?;
        let req = CreateUser {
            email: f.email.clone().unwrap_or_default(),
            name: f.name.clone().unwrap_or_default(),
            password: f.password.clone().filter(|p| !p.is_empty()),
            roles: Some(f.roles()),
            disabled: false,
        };
        st.auth.create_user(&c.principal, &c.actor, req).await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/users"), "user"),
        Err(p) => users_page(&st, &c, None, Some(p)).await,
    }
}

async fn set_disabled(st: &AppState, c: &Caller, id: &str, disabled: bool) -> Response {
    let result = async {
        let req = UpdateUser {
            disabled: Some(disabled),
            ..Default::default()
        };
        st.auth
            .update_user(&c.principal, &c.actor, path_id(id)?, req)
            .await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => done(Some("/users"), if disabled { "disable" } else { "enable" }),
        Err(p) => failed(p),
    }
}

async fn disable_user(State(st): State<AppState>, c: Visitor, Path(id): Path<String>) -> Response {
    set_disabled(&st, &c, &id, true).await
}

async fn enable_user(State(st): State<AppState>, c: Visitor, Path(id): Path<String>) -> Response {
    set_disabled(&st, &c, &id, false).await
}

async fn tokens(State(st): State<AppState>, c: Visitor, Query(q): Query<DidQuery>) -> Response {
    match st.auth.tokens(&c.principal).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Tokens,
                    "API tokens".into(),
                    &[],
                    q.did.as_deref(),
                ),
                views::tokens(st.clock.now(), &items),
            ),
        ),
        Err(e) => failed(e),
    }
}

/// A page showing a secret once: never kept by a cache or the browser's history.
fn secret_page(c: &Visitor, minted: &MintedToken) -> Response {
    let mut res = html(
        StatusCode::OK,
        web::page(
            frame(c, Section::Tokens, "API token".into(), &[], None),
            views::token_secret(minted),
        ),
    );
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn mint_token(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let f = AccountsForm::parse(&body)?;
        let days: Option<u64> = match f.days.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
            Some(d) => Some(d.parse().map_err(|_| {
                Problem::validation("expiresAt", format!("{d:?} is not a number of days"))
            })?),
            None => None,
        };
        let expires_at = days.map(|d| {
            st.clock
                .now()
                .plus(std::time::Duration::from_secs(d.saturating_mul(86_400)))
                .to_string()
        });
        let req = TokenRequest {
            name: f.name.clone().unwrap_or_default(),
            roles: f.roles(),
            expires_at,
            ..Default::default()
        };
        Ok::<_, Problem>(st.auth.mint(&c.principal, &c.actor, req).await?)
    };
    match result.await {
        Ok(minted) => secret_page(&c, &minted),
        Err(p) => failed(p),
    }
}

async fn rotate_token(State(st): State<AppState>, c: Visitor, Path(id): Path<String>) -> Response {
    let result = async {
        Ok::<_, Problem>(
            st.auth
                .rotate(&c.principal, &c.actor, path_id(&id)?)
                .await?,
        )
    };
    match result.await {
        Ok(minted) => secret_page(&c, &minted),
        Err(p) => failed(p),
    }
}

async fn revoke_token(State(st): State<AppState>, c: Visitor, Path(id): Path<String>) -> Response {
    let result = async {
        Ok::<_, Problem>(
            st.auth
                .revoke(&c.principal, &c.actor, path_id(&id)?)
                .await?,
        )
    };
    match result.await {
        Ok(_) => done(Some("/tokens"), "revoke"),
        Err(p) => failed(p),
    }
}

/// A kind by its URL segment, if the caller holds `permission(kind)`.
fn config_kind(
    c: &Caller,
    name: &str,
    permission: fn(&Kind) -> &'static str,
) -> Result<&'static Kind, Problem> {
    let kind = kind_by_name(name).ok_or_else(Problem::not_found)?;
    let wanted = permission(kind);
    if !c.principal.allows(wanted) {
        return Err(Problem::new(Code::AuthForbidden, wanted));
    }
    Ok(kind)
}

fn read_permission(k: &Kind) -> &'static str {
    k.read
}

fn write_permission(k: &Kind) -> &'static str {
    k.write
}

/// A document's own fields (the service's metadata left out) as YAML.
fn doc_yaml(d: &ConfigDoc) -> Result<String, Problem> {
    let mut body = d.to_json();
    if let Some(m) = body.as_object_mut() {
        for meta in ["id", "tenantId", "createdAt", "updatedAt", "version"] {
            m.remove(meta);
        }
    }
    serde_yaml_ng::to_string(&body)
        .map_err(|e| Problem::internal(format!("a document as YAML: {e}")))
}

async fn config_kinds(c: Visitor) -> Response {
    let kinds: Vec<&str> = KINDS
        .iter()
        .filter(|k| c.principal.allows(k.read))
        .map(|k| k.name)
        .collect();
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Config, "Configuration".into(), &[], None),
            views::config_kinds(&kinds),
        ),
    )
}

async fn config_list(State(st): State<AppState>, c: Visitor, Path(kind): Path<String>) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, read_permission)?;
        let docs = st
            .inventory
            .list(&c.principal, kind, None, None, 500)
            .await?;
        Ok::<_, Problem>((kind, docs))
    };
    match found.await {
        Ok((kind, docs)) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Config, kind.name.into(), &["config"], None),
                views::config_list(st.clock.now(), kind.name, &docs),
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn config_doc(
    State(st): State<AppState>,
    c: Visitor,
    Path((kind, name)): Path<(String, String)>,
    Query(q): Query<DidQuery>,
) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, read_permission)?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let yaml = doc_yaml(&doc)?;
        Ok::<_, Problem>((kind, doc, yaml))
    };
    match found.await {
        Ok((kind, doc, yaml)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Config,
                    format!("{} {}", kind.name, doc.name),
                    &[],
                    q.did.as_deref(),
                ),
                views::config_doc(kind.name, &doc, &yaml, c.principal.allows(kind.write)),
            ),
        ),
        Err(p) => failed(p),
    }
}

/// The change form: the YAML as typed, and the version it was made against.
#[derive(Deserialize, Default, schemars::JsonSchema)]
struct ConfigForm {
    yaml: Option<String>,
    version: Option<u64>,
}

impl ConfigForm {
    fn parse(body: &Bytes) -> Result<(String, u64, Value), Problem> {
        let f: ConfigForm = serde_urlencoded::from_bytes(body)
            .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))?;
        let text = f.yaml.unwrap_or_default().replace("\r\n", "\n");
        let value: Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| Problem::validation("body", format!("the YAML does not read: {e}")))?;
        Ok((text, f.version.unwrap_or(0), value))
    }
}

async fn config_plan(
    State(st): State<AppState>,
    c: Visitor,
    Path((kind, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, write_permission)?;
        let (text, version, _) = ConfigForm::parse(&body)?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let old = doc_yaml(&doc)?;
        Ok::<_, Problem>((kind, doc, old, text, version))
    };
    match found.await {
        Ok((kind, doc, old, new, version)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Config,
                    format!("Plan: {} {}", kind.name, doc.name),
                    &[],
                    None,
                ),
                views::config_plan(kind.name, &doc.name, &old, &new, version),
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn config_apply(
    State(st): State<AppState>,
    c: Visitor,
    Path((kind, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let result = async {
        let kind = config_kind(&c, &kind, write_permission)?;
        let (_, version, value) = ConfigForm::parse(&body)?;
        let doc = st
            .inventory
            .update(&c.principal, &c.actor, kind, name, version, value)
            .await?;
        Ok::<_, Problem>(format!("/config/{}/{}", kind.name, doc.name))
    };
    match result.await {
        Ok(to) => done(Some(&to), "saved"),
        Err(p) => failed(p),
    }
}

async fn sites(State(st): State<AppState>, c: Visitor) -> Response {
    match st.sites.overview(&c.principal).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(&c, Section::Sites, "Sites".into(), &["system"], None),
                views::sites(st.clock.now(), &items),
            ),
        ),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
struct CursorQuery {
    cursor: Option<String>,
}

async fn audit(State(st): State<AppState>, c: Visitor, Query(q): Query<CursorQuery>) -> Response {
    let req = PageQuery {
        limit: Some(UI_PAGE.to_string()),
        cursor: q.cursor,
    }
    .resolve(AUDIT);
    let filter = AuditFilter {
        before_seq: req.cursor.as_deref().and_then(|s| s.parse().ok()),
        ..Default::default()
    };
    match st.auth.audit_entries(&c.principal, filter, req.limit).await {
        Ok(items) => {
            let page = Page::new(items, &req, |e| e.seq.to_string());
            html(
                StatusCode::OK,
                web::page(
                    frame(&c, Section::Audit, "Audit log".into(), &[], None),
                    views::audit(&page.items, page.next_cursor.as_deref()),
                ),
            )
        }
        Err(e) => failed(e),
    }
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(a) = assets::by_path(&format!("/assets/{file}")) else {
        return super::router::not_found();
    };
    let gzip_ok = super::middleware::accepts_gzip(&headers);
    let cache = (
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    let media = (CONTENT_TYPE, HeaderValue::from_static(a.media));
    let vary = (VARY, HeaderValue::from_static("Accept-Encoding"));
    match (&a.gzipped, gzip_ok) {
        (Some(z), true) => (
            [
                media,
                cache,
                vary,
                (CONTENT_ENCODING, HeaderValue::from_static("gzip")),
            ],
            z.clone(),
        )
            .into_response(),
        _ => ([media, cache, vary], a.bytes).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_return_only_to_paths_of_this_server() {
        assert_eq!(back_to(Some("/alerts?status=open")), "/alerts?status=open");
        assert_eq!(back_to(Some("//evil.example/")), "/");
        assert_eq!(back_to(Some("https://evil.example/")), "/");
        assert_eq!(back_to(Some("/\\evil.example")), "/");
        assert_eq!(back_to(None), "/");
    }

    #[test]
    fn a_notice_is_one_of_the_fixed_lines() {
        assert!(notice(Some("ack")).is_some());
        assert!(notice(Some("<script>")).is_none());
        assert!(notice(None).is_none());
    }

    #[test]
    fn repeated_form_fields_are_all_kept() {
        let f = BulkForm::parse(&Bytes::from_static(b"id=a&id=b&back=%2Falerts&other=x"));
        assert_eq!(f.id, ["a", "b"]);
        assert_eq!(f.back.as_deref(), Some("/alerts"));
    }
}
