//! The UI's pages and form actions (issue 36). Each route is in the one route table with the
//! permission of the API operation it stands for, so the same authorisation and cross-site
//! check run first; a handler parses, calls the same domain function as the API, and renders
//! (`web`). Actions are form POSTs answered with 303 to the page they came from; a refused one
//! answers an HTML page with the problem's status and detail. One file per group of pages;
//! the helpers they share are here.

mod alerts;
mod comments;
mod config;
mod dashboards;
mod objects;
mod people;

use crate::api::AppState;
use crate::api::access::Caller;
use crate::api::alerts::AlertQuery;
use crate::api::error::{Code, Problem};
use crate::api::extract::{ApiPath, ApiQuery, path_id};
use crate::api::objects::ListQuery;
use crate::api::pagination::{
    ALERTS, AUDIT, EVENTS, INCIDENTS, OBJECTS, Page, PageQuery, PageRequest, PageRules,
};
use crate::api::router::{HTML, Route};
use crate::model::alert::{AlertFilter, AlertStatus, ShelveRequest, SnoozeRequest};
use crate::model::audit::AuditFilter;
use crate::model::config::{ConfigDoc, KINDS, Kind, kind_by_name};
use crate::model::event::{Event, EventFilter, EventType};
use crate::model::flood::Flood;
use crate::model::identity::{
    ActorType, ChangePassword, CreateUser, MintedToken, TokenRequest, UpdateUser,
};
use crate::model::identity::{Branding, Preferences};
use crate::model::inbox::{self, Group, Listed, Sort};
use crate::model::incident::IncidentBody;
use crate::model::notify::OverrideBody;
use crate::model::object::{ObjectFilter, ObjectKind, ObjectView};
use crate::model::suppression::{Downtime, DowntimeBody, SilenceBody};
use crate::model::{GoDuration, Timestamp};
use crate::monitor::metrics::MetricQuery;
use crate::web::views::{self, Can, SuppressionDraft};
use crate::web::{self, Frame, Look, Notice, Section, Theme, assets};
use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::State;
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
    let mut all = vec![
        Route::get("/assets/{file}", asset).doc("ui", "UI assets", "The stylesheet and the live-update module under names that carry their content's hash: `Cache-Control: public, max-age=31536000, immutable`, gzipped for clients that accept it; any other name is 404.")
            .answers_text(200, "text/css").answers_text(404, "text/plain").page(),
        Route::get("/sw.js", service_worker).doc("ui", "The service worker", "Shows Web Push messages as notifications, with an Acknowledge action that POSTs the alert's ack link; served at the root so its scope is the whole UI (`Service-Worker-Allowed: /`, `Cache-Control: no-cache`). Needs no identity: browsers fetch it on their own.")
            .answers_text(200, "text/javascript").page(),
        Route::get("/favicon.ico", favicon).doc("ui", "The favicon", "The UI's icon (SVG; pages link it under its hashed name) for clients that ask the conventional address; `Cache-Control: public, max-age=86400`. Needs no identity.")
            .answers_text(200, "image/svg+xml").page(),
        Route::get("/branding/logo", logo).doc("ui", "The instance's logo", "The branding's logo image (PNG, JPEG or WebP) for the header and the sign-in page, so it needs no identity; 404 when there is none. `v` as pages link it (a digest of the logo) makes it `immutable`, otherwise `no-cache`.")
            .query::<LogoQuery>().answers_text(200, "image/png").answers_text(404, HTML).page(),
    ];
    all.extend(alerts::routes());
    all.extend(comments::routes());
    all.extend(objects::routes());
    all.extend(people::routes());
    all.extend(config::routes());
    all.extend(dashboards::routes());
    all
}

/// Items on one page of a UI list.
const UI_PAGE: usize = 50;

fn html(status: StatusCode, body: String) -> Response {
    (status, [(CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A refused action or a failed page as an HTML page, through the one error map.
pub(super) fn failed(e: impl Into<Problem>) -> Response {
    let p: Problem = e.into();
    if p.status.is_server_error() {
        tracing::error!(code = %p.code.as_str(), internal = p.internal.as_deref().unwrap_or(""), "a UI request failed");
    }
    html(
        p.status,
        web::error(p.status.as_u16(), p.title(), &p.detail),
    )
}

/// Where an action returns: a path of this server only (one `/` first; never `//host`, a URL,
/// a backslash or a control character, which browsers drop: `/\t/host` is `//host` to
/// them), else `/`.
fn back_to(back: Option<&str>) -> String {
    match back {
        Some(b)
            if b.starts_with('/')
                && !b.starts_with("//")
                && !b.contains('\\')
                && !b.chars().any(char::is_control) =>
        {
            b.to_string()
        }
        _ => "/".to_string(),
    }
}

/// A submitted form as `T`; one that does not read is 422.
fn form<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, Problem> {
    serde_urlencoded::from_bytes(body)
        .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
}

/// A multipart form's fields: text as it came (trimmed), a chosen file as its `data:` URI;
/// an empty field or a file input with no file is left out, as are a repeated name and the
/// form's token (checked before the handler).
fn multipart_form<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, Problem> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let parts = crate::api::multipart::parse(content_type, body)
        .map_err(|e| Problem::validation("body", e))?;
    let mut fields = serde_json::Map::new();
    for part in parts {
        let value = match &part.filename {
            Some(_) => {
                let media = part
                    .content_type
                    .as_deref()
                    .unwrap_or("application/octet-stream");
                format!(
                    "data:{media};base64,{}",
                    crate::model::base64::encode(&part.data)
                )
            }
            None => String::from_utf8_lossy(&part.data).trim().to_string(),
        };
        if !part.data.is_empty() && !value.is_empty() && part.name != super::access::FORM_TOKEN {
            fields.entry(part.name).or_insert(Value::String(value));
        }
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| Problem::validation("body", format!("the form does not read: {e}")))
}

/// One page of a UI list: `size` items after `cursor`, within the list's rules.
fn ui_page(cursor: Option<String>, size: usize, rules: PageRules) -> PageRequest {
    PageQuery {
        limit: Some(size.to_string()),
        cursor,
    }
    .resolve(rules)
}

/// The cursor of a list keyed by id.
fn id_cursor(req: &PageRequest) -> Option<Uuid> {
    req.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok())
}

/// A form action's answer: 303 to where the browser goes next, or the page that says why not.
/// A handler returns it and puts `?` after the form's parsing and each domain call.
type Acted = Result<Done, Refused>;

/// 303 to a page of this server with what was done (`did=`), shown once by that page.
struct Done {
    to: String,
    did: &'static str,
}

impl Done {
    /// Back to the page the form came from (its `back`, checked by `back_to`).
    fn back(back: Option<&str>, did: &'static str) -> Self {
        Done {
            to: back_to(back),
            did,
        }
    }

    /// To a page the server chose.
    fn to(path: impl Into<String>, did: &'static str) -> Self {
        Done::back(Some(&path.into()), did)
    }
}

impl IntoResponse for Done {
    fn into_response(self) -> Response {
        let sep = if self.to.contains('?') { '&' } else { '?' };
        let location = format!("{}{sep}did={}", self.to, self.did);
        let location = HeaderValue::from_str(&location).unwrap_or(HeaderValue::from_static("/"));
        (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
    }
}

/// A refused action's page (`failed`), from any error the one error map knows.
struct Refused(Problem);

impl<E: Into<Problem>> From<E> for Refused {
    fn from(e: E) -> Self {
        Refused(e.into())
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        failed(self.0)
    }
}

/// The line a page shows after an action redirected to it (`did=`), from a fixed list: the
/// query never puts its own text on the page.
fn notice(did: Option<&str>) -> Option<Notice> {
    let text = match did? {
        "ack" => "Acknowledged.",
        "comment" => "Comment added.",
        "ack-some" => "Acknowledged the selected alerts that were still open.",
        "shelve-some" => "Shelved the selected alerts that were still open.",
        "saved-filter" => "Filter saved: dashboards can show it.",
        "silence-some" => "Silenced alerts like the selected ones.",
        "downtime-some" => "Downtime started for the selected problems' objects.",
        "snooze" => "Snoozed.",
        "shelve" => "Shelved: it does not page until the shelf ends.",
        "unshelve" => "Unshelved: it pages again while open.",
        "resolve" => "Resolved.",
        "site-ack" => {
            "Sent to the alert's site, which acknowledges it there; it waits while the site is out of reach."
        }
        "site-resolve" => {
            "Sent to the alert's site, which resolves it there; it waits while the site is out of reach."
        }
        "site-shelve" => {
            "Sent to the alert's site, which shelves it there by its own limits; it waits while the site is out of reach."
        }
        "check" => "Check scheduled.",
        "check-passive" => "Nothing runs: this object takes passive results only.",
        "check-agent" => "Nothing runs here: its host's agent runs the check and reports it.",
        "check-off" => "Nothing runs: its checks are off (enableChecks: false).",
        "silence" => "Silence created.",
        "silence-saved" => "Silence saved.",
        "downtime-saved" => "Downtime saved.",
        "expire" => "Silence expired.",
        "extend" => "Extended.",
        "downtime" => "Downtime started.",
        "end" => "Downtime ended.",
        "assign" => "Added to the incident.",
        "approve" => "Approved: the call ran.",
        "deny" => "Denied: nothing ran.",
        "status" => "Status changed.",
        "password" => "Password changed.",
        "user" => "User added.",
        "disable" => "User disabled.",
        "enable" => "User enabled.",
        "revoke" => "Token revoked.",
        "takeover" => "The shift is yours.",
        "saved" => "Saved.",
        "created" => "Created.",
        "deleted" => "Deleted.",
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
        look: &c.look,
        floods: &c.floods,
        uplink_lost: c.uplink_lost.as_ref(),
        kiosk: false,
    }
}

/// The caller of a page, with how their pages look (their theme, else the instance's
/// branding mode; the branding's name, colours and logo) and whether lists update live.
struct Visitor {
    caller: Caller,
    look: Look,
    live: bool,
    /// The time zone absolute times are shown in (their `timeZone` preference, else UTC).
    zone: jiff::tz::TimeZone,
    /// The tenant's scopes in flood, for the banner (none without `alerts:read`).
    floods: Vec<Flood>,
    /// This instance is a site whose uplink is lost, for the banner.
    uplink_lost: Option<web::UplinkLost>,
}

impl Visitor {
    /// Now, read in the visitor's time zone.
    fn now(&self, st: &AppState) -> views::Now {
        views::Now {
            at: st.clock.now(),
            zone: self.zone.clone(),
        }
    }
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
/// The `extra` preference naming the time zone a user reads absolute times in.
const TIME_ZONE: &str = "timeZone";

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
        let theme = prefs.extra.get(THEME).and_then(|t| Theme::named(t));
        let live = prefs.extra.get(LIVE).map(String::as_str) != Some("off");
        let zone = prefs
            .extra
            .get(TIME_ZONE)
            .and_then(|z| jiff::tz::TimeZone::get(z).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC);
        // The banner is a courtesy too: a page shows without it when floods cannot be read.
        let floods = if caller.principal.allows("alerts:read") {
            st.alerting
                .floods(&caller.principal)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "could not read the floods");
                    Vec::new()
                })
        } else {
            Vec::new()
        };
        let edge = st.sites.edge_status();
        let uplink_lost = edge.uplink_lost_since.map(|since| web::UplinkLost {
            since: views::Now {
                at: st.clock.now(),
                zone: zone.clone(),
            }
            .clock(since),
            waiting: edge.forward.pending,
        });
        Ok(Visitor {
            caller,
            look: look(st, theme).await,
            live,
            zone,
            floods,
            uplink_lost,
        })
    }
}

/// How the instance's pages look to someone whose own colour scheme is `theme` (`None`: the
/// branding's mode, else the browser's).
pub(in crate::api) async fn look(st: &AppState, theme: Option<Theme>) -> Look {
    let branding = match st.auth.branding().await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the branding");
            Branding::default()
        }
    };
    Look {
        theme: theme.or_else(|| branding.mode.as_deref().and_then(Theme::named)),
        name: branding.name.clone().filter(|n| !n.trim().is_empty()),
        header: branding.header_colours(),
        logo: branding
            .logo
            .as_deref()
            .map(|l| format!("/branding/logo?v={}", logo_version(l))),
    }
}

/// A short digest of the logo: its address changes with it, so browsers may keep it forever.
fn logo_version(logo: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(logo.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct LogoQuery {
    /// The logo's version as pages link it; the current one makes the answer cacheable for good.
    v: Option<String>,
}

async fn logo(State(st): State<AppState>, ApiQuery(q): ApiQuery<LogoQuery>) -> Response {
    let branding = match st.auth.branding().await {
        Ok(b) => b,
        Err(e) => return failed(e),
    };
    let (Some(uri), Ok((media, bytes))) = (&branding.logo, branding.logo_image()) else {
        return failed(Problem::new(Code::NotFound, "there is no logo"));
    };
    let cache = if q.v.as_deref() == Some(logo_version(uri).as_str()) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(media)),
            (CACHE_CONTROL, HeaderValue::from_static(cache)),
        ],
        bytes,
    )
        .into_response()
}

fn can(c: &Caller) -> Can {
    Can {
        alerts: c.principal.allows("alerts:read"),
        ack: c.principal.allows("alerts:ack"),
        check_now: c.principal.allows("checks:run"),
        silence: c.principal.allows("silences:write"),
        downtime: c.principal.allows("downtimes:write"),
        objects_write: c.principal.allows("objects:write"),
        save_filters: kind_by_name("saved-filters").is_some_and(|k| c.principal.allows(k.write)),
    }
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct DidQuery {
    did: Option<String>,
}

/// A UI action's form.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ActionForm {
    /// The page to return to: a path of this server.
    back: Option<String>,
    /// Acknowledge: an optional comment.
    comment: Option<String>,
    /// Acknowledge: how long it lasts (`4h`; empty: the policy's `ackTimeout`).
    expires_in: Option<String>,
    /// Acknowledge: present when the next change clears it (not sticky).
    loose: Option<String>,
    /// Snooze: how long (`30m`, `1h`...).
    duration: Option<String>,
}

/// At most this many rows are read to fill one page of a search by words.
const SEARCHED: usize = 5000;

/// What a list the store pages by id but cannot search or sort keeps: the batches of `batch`
/// rows after `cursor` are read until `want` rows are kept, the list ends, or `SEARCHED` rows
/// were read.
async fn search_pages<T, Fut>(
    mut cursor: Option<Uuid>,
    batch: usize,
    want: usize,
    id: impl Fn(&T) -> Uuid,
    keep: impl Fn(&T) -> bool,
    mut read: impl FnMut(Option<Uuid>, usize) -> Fut,
) -> Result<Vec<T>, Problem>
where
    Fut: std::future::Future<Output = Result<Vec<T>, Problem>>,
{
    let mut items = Vec::new();
    let mut seen = 0;
    loop {
        let rows = read(cursor, batch).await?;
        let exhausted = rows.len() < batch;
        seen += rows.len();
        cursor = rows.last().map(&id);
        items.extend(rows.into_iter().filter(|x| keep(x)));
        if items.len() >= want || exhausted || seen >= SEARCHED {
            break;
        }
    }
    items.truncate(want);
    Ok(items)
}

/// The order and groups a list page asks for by `sort` and `group`; a value it does not know
/// is 422 naming the field.
fn list_order(sort: &str, group: &str) -> Result<(Option<Sort>, Option<Group>), Problem> {
    let sort = match sort {
        "" => None,
        s => Some(Sort::parse(s).ok_or_else(|| not_a_choice("sort", s))?),
    };
    let group = match group {
        "" => None,
        g => Some(Group::parse(g).ok_or_else(|| not_a_choice("group", g))?),
    };
    Ok((sort, group))
}

/// 422 for a `field` whose `value` is not one of the form's choices.
fn not_a_choice(field: &'static str, value: &str) -> Problem {
    Problem::validation(
        field,
        format!("{field} {value:?} is not one of the choices"),
    )
}

/// Rows read at a time to sort a list the store pages by id.
const SORT_BATCH: usize = 500;

/// The page of `items` (all a list holds, in its order; `capped` when the read stopped at
/// `SEARCHED`) that starts at `from`, in `group`'s groups (one unnamed group without).
fn offset_page<T: Listed>(
    items: Vec<T>,
    group: Option<Group>,
    from: usize,
    size: usize,
) -> (Vec<(String, Vec<T>)>, views::Offsets) {
    let total = items.len();
    let from = from.min(total);
    let page: Vec<T> = items.into_iter().skip(from).take(size).collect();
    let offsets = views::Offsets {
        from,
        shown: page.len(),
        total,
        size,
        capped: total >= SEARCHED,
    };
    let groups = match group {
        Some(g) => inbox::grouped(page, g),
        None => vec![(String::new(), page)],
    };
    (groups, offsets)
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

/// Graphs of an object's metric series over `window` (at most four; `only` one metric), none
/// without `metrics:read`. `perfdata` is the object's last result's: the current value and the
/// thresholds of each metric it reported.
async fn object_graphs(
    st: &AppState,
    c: &Caller,
    id: Uuid,
    only: Option<&str>,
    perfdata: &str,
    window: views::GraphWindow,
) -> Result<Vec<views::Graph>, Problem> {
    if !c.principal.allows("metrics:read") {
        return Ok(Vec::new());
    }
    let (from, to) = window.bounds(st.clock.now());
    let reported = crate::model::metric::parse_perfdata(perfdata);
    let mut graphs = Vec::new();
    for s in st
        .metric_queries
        .series(&c.principal, id)
        .await?
        .into_iter()
        .filter(|s| only.is_none_or(|m| s.metric == m))
        .take(4)
    {
        let q = MetricQuery {
            object_id: Some(id),
            metric: Some(s.metric.clone()),
            from,
            to: to.plus(std::time::Duration::from_secs(1)),
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
        let now = reported.iter().find(|p| p.label == s.metric);
        let starts = |range: Option<&String>| -> Vec<f64> {
            range
                .and_then(|r| crate::model::metric::Range::parse(r).ok())
                .map(|r| r.bounds().collect())
                .unwrap_or_default()
        };
        graphs.push(views::Graph {
            label: s.metric,
            unit: s.unit,
            points: points.points.into_iter().map(|p| (p.t, p.v)).collect(),
            from,
            to,
            current: now.map(|p| p.value),
            warn: starts(now.and_then(|p| p.warn.as_ref())),
            crit: starts(now.and_then(|p| p.crit.as_ref())),
        });
    }
    Ok(graphs)
}

async fn service_worker() -> Response {
    let Some(sw) = assets::by_name("sw.js") else {
        return crate::api::router::not_found();
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(sw.media)),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                axum::http::HeaderName::from_static("service-worker-allowed"),
                HeaderValue::from_static("/"),
            ),
        ],
        sw.bytes,
    )
        .into_response()
}

async fn favicon() -> Response {
    let Some(icon) = assets::by_name("favicon.svg") else {
        return crate::api::router::not_found();
    };
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(icon.media)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
        ],
        icon.bytes,
    )
        .into_response()
}

async fn asset(ApiPath(file): ApiPath<String>, headers: HeaderMap) -> Response {
    let Some(a) = assets::by_path(&format!("/assets/{file}")) else {
        return crate::api::router::not_found();
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

/// Types whose events change what the problems, alert and dashboard pages show (a flood's
/// banner included).
const ALERT_LIVE: &[&str] = &[
    "state_change",
    "alert_opened",
    "alert_resolved",
    "ack",
    "escalation",
    "downtime",
    "shelve",
    "flood_started",
    "flood_ended",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_return_only_to_paths_of_this_server() {
        assert_eq!(back_to(Some("/alerts?status=open")), "/alerts?status=open");
        assert_eq!(back_to(Some("//evil.example/")), "/");
        assert_eq!(back_to(Some("https://evil.example/")), "/");
        assert_eq!(back_to(Some("/\\evil.example")), "/");
        assert_eq!(back_to(Some("/\t/evil.example")), "/");
        assert_eq!(back_to(Some("/\n/evil.example")), "/");
        assert_eq!(back_to(None), "/");
    }

    #[test]
    fn a_notice_is_one_of_the_fixed_lines() {
        assert!(notice(Some("ack")).is_some());
        assert!(notice(Some("<script>")).is_none());
        assert!(notice(None).is_none());
    }
}
