//! Status pages (issue 74, part 3): the public page, its feeds and summary, subscribing and the
//! links of its mails (no credential: anyone who can reach the server, as a status page is
//! meant to be), and for the tenant's people its subscribers and an incident's public updates.

use super::AppState;
use super::access::{Caller, peer_ip};
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::Page;
use super::router::{HTML, Route};
use crate::model::identity::Actor;
use crate::model::status::{
    Board, PageIncident, StatusUpdate, StatusUpdateBody, Subscriber, incidents,
};
use crate::notify::NotifyError;
use crate::notify::status::{LinkOutcome, LinkPurpose, PageDoc, Subscribed};
use crate::web::views::status as view;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

const SUMMARY: &str = "No sign-in: a status page is for anyone who can reach the server. 404 for a name no tenant has as a `status-pages` document.";

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/status/{name}", show).raw().doc("status-pages", "A status page", "Server-rendered HTML, no script, style inline, under 40 KB with 30 components: the overall status, each component's state (`operational`, `degraded`, `outage`, `maintenance` while a downtime covers what it binds, `unknown`) with its availability on each of the last 90 UTC days (hard non-OK time, WARNING and UNKNOWN included, out of the time with data, downtimes taken out), active and past incidents of the last 90 days with their public updates, maintenance running or starting within 14 days (the downtimes on what the components bind), and a subscription form when the page has an `emailChannel`. No sign-in: a status page is for anyone who can reach the server. 404 for a name no tenant has as a `status-pages` document.")
            .answers_text(200, HTML).page(),
        Route::get("/status/{name}/summary.json", summary).raw().doc("status-pages", "A status page as JSON", "`{name, title, status, components, maintenance, incidents}`: what the page shows. No sign-in: a status page is for anyone who can reach the server. 404 for a name no tenant has as a `status-pages` document.")
            .ok::<StatusSummary>(),
        Route::get("/status/{name}/feed.atom", atom).raw().doc("status-pages", "A status page's updates as Atom", SUMMARY)
            .answers_text(200, "application/atom+xml"),
        Route::get("/status/{name}/feed.rss", rss).raw().doc("status-pages", "A status page's updates as RSS", SUMMARY)
            .answers_text(200, "application/rss+xml"),
        Route::post("/status/{name}/subscribe", subscribe).raw().doc("status-pages", "Subscribe by e-mail", "Form `email`. Double opt-in: a pending subscription and a mail with its confirmation link (through the page's `emailChannel`), whose link must be followed; a pending one lapses after 7 days. The answer is the same whether the address was new, pending or confirmed, so the page does not tell who is subscribed; one confirmation mail an hour per address, 10,000 subscribers a page. Per client address 5 requests, then one each 10 minutes: 429 with `Retry-After: 600`. A malformed address is 422 (a page saying so); a page without an `emailChannel` is 404.")
            .form::<SubscribeForm>().answers_text(200, HTML).answers_text(429, HTML).page(),
        Route::get("/status/{name}/confirm", confirm_page).raw().doc("status-pages", "A confirmation link: what it confirms", "Query `s` (the subscription) and `t` (its MAC under the installation's key). A page with a button that POSTs to the same address; opening the link does nothing, so a mail scanner that fetches it confirms nothing. 404 for a link that is not genuine or whose subscription is gone or lapsed.")
            .query::<LinkQuery>().answers_text(200, HTML).page(),
        Route::post("/status/{name}/confirm", confirm).raw().no_body().doc("status-pages", "Confirm a subscription", "The confirmation page's button: the subscription becomes active. 200 HTML (also when it was confirmed already); 404 as the page.")
            .query::<LinkQuery>().answers_text(200, HTML).page(),
        Route::get("/status/{name}/unsubscribe", unsubscribe_page).raw().doc("status-pages", "An unsubscribe link: what it ends", "Query `s` and `t` as every mail's link carries them (and its `List-Unsubscribe` header). A page with a button that POSTs to the same address. 404 for a link that is not genuine or whose subscription is gone.")
            .query::<LinkQuery>().answers_text(200, HTML).page(),
        Route::post("/status/{name}/unsubscribe", unsubscribe).raw().no_body().doc("status-pages", "Unsubscribe", "The page's button, or a mail client's one-click POST (RFC 8058, body `List-Unsubscribe=One-Click`): the subscription ends. 200 HTML; 404 as the page.")
            .query::<LinkQuery>().answers_text(200, HTML).page(),
        Route::get("/api/v1/status-pages/{name}/subscribers", subscribers).permission("config:write").doc("status-pages", "A status page's subscribers", "Pending and confirmed (`confirmedAt`), in id order; the page's tenant's only (another's page is 404). `config:write`: the addresses are personal data.")
            .ok::<Page<Subscriber>>(),
        Route::delete("/api/v1/status-pages/{name}/subscribers/{id}", remove_subscriber).permission("config:write").doc("status-pages", "Remove a subscriber", "204; 404 for one the page does not have. Audited.")
            .answers_empty(204),
        Route::post("/api/v1/incidents/{id}/status-updates", post_update).permission("incidents:write").doc("incidents", "Post a public update of an incident", "`{status: investigating | identified | monitoring | resolved, message, pages: [status page names], components?: [component names on those pages], notify?: true}`: shown on the pages and in their feeds, and mailed to each confirmed subscriber of the pages (once per address) through each page's `emailChannel`, in one transaction with an `incident_update` event (`action: status-update`, `statusUpdate`) and an audit entry. 201 with the update (`mailed`: how many mails were queued). A page or component the tenant does not have, or a bad status or message, is 422 `svc:validation/statusUpdate`. The incident's own status is not changed.")
            .body::<StatusUpdateBody>().answers::<StatusUpdate>(201),
    ]
}

/// `GET /status/{name}/summary.json`.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct StatusSummary {
    name: String,
    title: String,
    /// The worst component's status.
    status: &'static str,
    #[serde(flatten)]
    board: Board,
    incidents: Vec<PageIncident>,
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct SubscribeForm {
    email: String,
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct LinkQuery {
    #[serde(default)]
    s: String,
    #[serde(default)]
    t: String,
}

/// A page route's answer: a failure (no such page) is an HTML page too, as the route's
/// document says.
fn as_page(answer: Result<Response, Problem>) -> Response {
    answer.unwrap_or_else(super::ui::failed)
}

/// The page, what it shows and its updates.
async fn gathered(
    st: &AppState,
    name: &str,
) -> Result<(PageDoc, Board, Vec<StatusUpdate>), Problem> {
    let page = st.notify.status_page(name).await?;
    let board = st
        .business
        .board(page.tenant, &page.body.components)
        .await?;
    let updates = st.notify.status_updates(&page, st.clock.now()).await?;
    Ok((page, board, updates))
}

/// A public answer: cacheable for a short while by whoever is in between.
fn public(media: &'static str, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, media),
            (header::CACHE_CONTROL, "public, max-age=30"),
        ],
        body,
    )
        .into_response()
}

async fn show(State(st): State<AppState>, ApiPath(name): ApiPath<String>) -> Response {
    as_page(shown(&st, &name).await)
}

async fn shown(st: &AppState, name: &str) -> Result<Response, Problem> {
    let (page, board, updates) = gathered(st, name).await?;
    let heading = page.body.heading(&page.doc.name);
    let html = view::page(&view::StatusView {
        name: &page.doc.name,
        heading,
        description: &page.body.description,
        board: &board,
        incidents: &incidents(updates),
        subscribe: page.body.email_channel.is_some(),
        now: st.clock.now(),
    });
    Ok(public("text/html; charset=utf-8", html))
}

async fn summary(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, Problem> {
    let (page, board, updates) = gathered(&st, &name).await?;
    let summary = StatusSummary {
        title: page.body.heading(&page.doc.name).to_string(),
        name: page.doc.name,
        status: board.overall(),
        board,
        incidents: incidents(updates),
    };
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=30")],
        Json(summary),
    )
        .into_response())
}

async fn feed(st: &AppState, name: &str, atom: bool) -> Result<Response, Problem> {
    let page = st.notify.status_page(name).await?;
    let now = st.clock.now();
    let updates = st.notify.status_updates(&page, now).await?;
    let url = st.notify.page_url(&page.doc.name);
    let heading = page.body.heading(&page.doc.name);
    Ok(if atom {
        public(
            "application/atom+xml",
            view::atom(&url, heading, &updates, now),
        )
    } else {
        public(
            "application/rss+xml",
            view::rss(&url, heading, &updates, now),
        )
    })
}

async fn atom(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, Problem> {
    feed(&st, &name, true).await
}

async fn rss(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, Problem> {
    feed(&st, &name, false).await
}

/// A page of the status page's own, never cached (it answers one visitor's action).
fn notice(
    status: StatusCode,
    page: &PageDoc,
    title: &str,
    text: &str,
    button: Option<(&str, &str)>,
) -> Response {
    let heading = page.body.heading(&page.doc.name);
    let html = view::notice(&page.doc.name, heading, title, text, button);
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

fn visitor(req: &Request) -> (Actor, std::net::IpAddr) {
    let ip = peer_ip(req.extensions());
    (Actor::visitor("status-page visitor", ip.to_string()), ip)
}

async fn subscribe(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
    req: Request,
) -> Response {
    as_page(subscribed(&st, &name, req).await)
}

async fn subscribed(st: &AppState, name: &str, req: Request) -> Result<Response, Problem> {
    let (actor, ip) = visitor(&req);
    let page = st.notify.status_page(name).await?;
    let f: SubscribeForm = super::pages::form(st, req).await;
    Ok(
        match st.notify.subscribe(&page, &f.email, &actor, ip).await {
            Err(NotifyError::Invalid(why)) if why.field == "email" => notice(
                StatusCode::UNPROCESSABLE_ENTITY,
                &page,
                "Not an e-mail address",
                &format!(
                    "{:?} is not an address mail can go to: {}.",
                    f.email, why.detail
                ),
                None,
            ),
            Err(e) => return Err(e.into()),
            Ok(Some(Subscribed::Asked | Subscribed::Quiet)) => notice(
                StatusCode::OK,
                &page,
                "Check your e-mail",
                "If the address can be subscribed, a mail with a confirmation link is on its way to it. Nothing more is sent until that link is followed.",
                None,
            ),
            Ok(None) => {
                let mut res = notice(
                    StatusCode::TOO_MANY_REQUESTS,
                    &page,
                    "Too many requests",
                    "Too many subscription requests came from your address. Please try again in a few minutes.",
                    None,
                );
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("600"));
                res
            }
        },
    )
}

/// What a link's page says before its button is pressed.
fn link_page(page: &PageDoc, purpose: LinkPurpose, q: &LinkQuery) -> Response {
    let action = format!(
        "/status/{}/{}?s={}&t={}",
        crate::model::input::path_segment(&page.doc.name),
        match purpose {
            LinkPurpose::Confirm => "confirm",
            LinkPurpose::Unsubscribe => "unsubscribe",
        },
        crate::model::input::path_segment(&q.s),
        crate::model::input::path_segment(&q.t),
    );
    let heading = page.body.heading(&page.doc.name);
    match purpose {
        LinkPurpose::Confirm => notice(
            StatusCode::OK,
            page,
            "Confirm your subscription",
            &format!(
                "Press the button to be told by e-mail about incidents and maintenance on {heading}."
            ),
            Some((&action, "Confirm")),
        ),
        LinkPurpose::Unsubscribe => notice(
            StatusCode::OK,
            page,
            "Unsubscribe",
            &format!("Press the button to get no more mail about {heading}."),
            Some((&action, "Unsubscribe")),
        ),
    }
}

async fn follow(
    st: &AppState,
    name: &str,
    purpose: LinkPurpose,
    q: LinkQuery,
    req: Option<Request>,
) -> Result<Response, Problem> {
    let page = st.notify.status_page(name).await?;
    let not_found = |page: &PageDoc| {
        notice(
            StatusCode::NOT_FOUND,
            page,
            "Link not valid",
            "This link is not valid, or its subscription has ended or lapsed.",
            None,
        )
    };
    let Ok(id) = q.s.parse::<Uuid>() else {
        return Ok(not_found(&page));
    };
    let Some(req) = req else {
        return Ok(link_page(&page, purpose, &q));
    };
    let (actor, _) = visitor(&req);
    let heading = page.body.heading(&page.doc.name);
    Ok(
        match st
            .notify
            .follow_link(&page, purpose, id, &q.t, &actor)
            .await
        {
            Ok(LinkOutcome::Confirmed | LinkOutcome::AlreadyConfirmed) => notice(
                StatusCode::OK,
                &page,
                "Subscribed",
                &format!(
                    "You will be told by e-mail about incidents and maintenance on {heading}. Every mail has a link to unsubscribe."
                ),
                None,
            ),
            Ok(LinkOutcome::Unsubscribed) => notice(
                StatusCode::OK,
                &page,
                "Unsubscribed",
                &format!("You will get no more mail about {heading}."),
                None,
            ),
            Err(NotifyError::NotFound) => not_found(&page),
            Err(e) => return Err(e.into()),
        },
    )
}

async fn confirm_page(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<LinkQuery>,
) -> Response {
    as_page(follow(&st, &name, LinkPurpose::Confirm, q, None).await)
}

async fn confirm(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<LinkQuery>,
    req: Request,
) -> Response {
    as_page(follow(&st, &name, LinkPurpose::Confirm, q, Some(req)).await)
}

async fn unsubscribe_page(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<LinkQuery>,
) -> Response {
    as_page(follow(&st, &name, LinkPurpose::Unsubscribe, q, None).await)
}

async fn unsubscribe(
    State(st): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<LinkQuery>,
    req: Request,
) -> Response {
    as_page(follow(&st, &name, LinkPurpose::Unsubscribe, q, Some(req)).await)
}

async fn subscribers(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(
        st.notify.subscribers(&c.principal, &name).await?,
    )))
}

async fn remove_subscriber(
    State(st): State<AppState>,
    c: Caller,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, Problem> {
    st.notify
        .remove_subscriber(&c.principal, &c.actor, &name, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn post_update(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<StatusUpdateBody>,
) -> Result<impl IntoResponse, Problem> {
    let incident = st.alerting.incident(&c.principal, path_id(&id)?).await?;
    let update = st
        .notify
        .post_status_update(&c.principal, &c.actor, &incident, body)
        .await?;
    Ok((StatusCode::CREATED, Json(update)))
}
