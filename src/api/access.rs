//! Per-route access control in the order of SPEC 4.5: CSRF check, authentication, permission,
//! then the handler. Invalid credentials are rejected on every route, public ones included.

use super::AppState;
use super::error::{Code, Problem};
use super::middleware::{RequestId, within_deadline};
use super::router::PUBLIC;
use crate::auth::{AuthError, Principal};
use crate::model::identity::Actor;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{ACCEPT, AUTHORIZATION, COOKIE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub const SESSION_COOKIE: &str = "svc_session";

/// Whether the request arrived over TLS (set per connection by the server; decides `Secure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectTls(pub bool);
pub const TENANT_HEADER: &str = "x-service-tenant";

/// What a route requires, attached to it by the router.
#[derive(Clone)]
pub struct Access {
    pub state: AppState,
    pub permission: &'static str,
    /// A route with no permission that still needs a caller (whoami, change-password...).
    pub identity: bool,
    /// A sign-in page: an invalid session cookie is ignored and cleared.
    pub sign_in: bool,
    /// A raw route (SPEC 5.7): the session cookie is not read, so there is no CSRF check.
    pub raw: bool,
    /// Reads the session but is not CSRF-checked (`/mcp`).
    pub csrf_exempt: bool,
    /// Whether the request deadline applies (to the access check and the handler alike).
    pub deadline: bool,
}

/// The value of `Authorization: Bearer`, whatever it is.
pub fn bearer_value(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    Some(
        value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))?
            .trim(),
    )
}

/// An API token: a bearer value starting `svc_`. Other bearer values belong to event
/// sources' own authentication.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    bearer_value(headers).filter(|t| t.starts_with("svc_"))
}

pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

pub fn peer_ip(extensions: &axum::http::Extensions) -> IpAddr {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// A request the service makes to its own API for a caller it already authenticated (a tool
/// call of `/mcp` or the agent): it acts as that principal, in its acting tenant. Only the
/// service can attach it; no header or cookie can.
#[derive(Clone, Debug)]
pub struct Delegated(pub Principal);

/// Access control, then the handler, within the request deadline where the route has one.
pub async fn authorize(State(access): State<Access>, req: Request, next: Next) -> Response {
    if access.deadline {
        within_deadline(authorized(access, req, next)).await
    } else {
        authorized(access, req, next).await
    }
}

async fn authorized(access: Access, mut req: Request, next: Next) -> Response {
    if let Some(Delegated(principal)) = req.extensions_mut().remove::<Delegated>() {
        if access.permission != PUBLIC && !principal.allows(access.permission) {
            return Problem::new(Code::AuthForbidden, access.permission).into_response();
        }
        req.extensions_mut().insert(principal);
        return next.run(req).await;
    }
    let headers = req.headers();
    let bearer = bearer_token(headers).map(str::to_string);
    let session = cookie(headers, SESSION_COOKIE)
        .filter(|_| !access.raw)
        .map(str::to_string);
    if bearer.is_none()
        && session.is_some()
        && let Err(refused) = cookie_request_allowed(&access, &req)
    {
        return refused.into_response();
    }
    let form_session = session
        .clone()
        .filter(|_| bearer.is_none() && is_ui_form_route(&access, &req));
    if let Some(id) = &form_session
        && is_unsafe(req.method())
    {
        req = match with_form_token(req, id).await {
            Ok(req) => req,
            Err(refused) => return refused.into_response(),
        };
    }
    let auth = &access.state.auth;
    let principal: Option<Principal> = if let Some(secret) = bearer {
        match auth
            .authenticate_token(&secret, peer_ip(req.extensions()))
            .await
        {
            Ok(p) => Some(p),
            Err(e) => return Problem::from(e).into_response(),
        }
    } else if let Some(id) = session {
        match auth.session_principal(&id).await {
            Ok(p) => Some(p),
            Err(AuthError::Invalid(_)) if access.sign_in => {
                let secure = secure_request(&access.state, &req);
                let mut res = next.run(req).await;
                if !sets_session_cookie(&res) {
                    res.headers_mut()
                        .append(SET_COOKIE, clear_session_cookie(secure));
                }
                return res;
            }
            Err(AuthError::Invalid(_)) if is_document_navigation(&req) => {
                let mut res = to_login();
                let secure = secure_request(&access.state, &req);
                res.headers_mut()
                    .append(SET_COOKIE, clear_session_cookie(secure));
                return res;
            }
            Err(_) if is_document_navigation(&req) => return to_login(),
            Err(e) => return Problem::from(e).into_response(),
        }
    } else {
        None
    };
    let needs_caller = access.permission != PUBLIC || access.identity;
    let Some(mut principal) = principal else {
        if !needs_caller {
            return next.run(req).await;
        }
        if is_document_navigation(&req) {
            return to_login();
        }
        return Problem::new(
            Code::AuthRequired,
            "this route needs an API token or a session",
        )
        .into_response();
    };
    if access.permission != PUBLIC && !principal.allows(access.permission) {
        return Problem::new(Code::AuthForbidden, access.permission).into_response();
    }
    let tenant_header = req
        .headers()
        .get(TENANT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Err(e) = auth
        .select_tenant(&mut principal, tenant_header.as_deref())
        .await
    {
        return Problem::from(e).into_response();
    }
    req.extensions_mut().insert(principal);
    let if_none_match = req
        .headers()
        .get(axum::http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.trim()
                .trim_start_matches("W/")
                .trim_matches('"')
                .to_string()
        });
    let res = next.run(req).await;
    match form_session {
        Some(id) => with_form_tokens_in_page(res, &id, if_none_match).await,
        None => res,
    }
}

/// Methods that change something: what a page of another origin must not make a browser send
/// with its session.
fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A route of the UI's pages and forms (not the API, not `/mcp`, not a sign-in form, which
/// SPEC 5.7 leaves to `SameSite`).
fn is_ui_form_route(access: &Access, req: &Request) -> bool {
    let path = req.uri().path();
    !access.raw && !access.sign_in && !path.starts_with("/api/") && path != "/mcp"
}

/// A request made with a session cookie (issue 67): refused when its fetch metadata says
/// `cross-site` (SPEC 5.1), when it carries an `Origin` that is not this server's (another
/// port of the host, a sibling subdomain, `null`), and, on the API and `/mcp`, when it sends a
/// body that is not JSON (a form or plain text, which a page of another origin may send
/// without asking first). A request without `Origin` or fetch metadata (an old browser, a
/// script) passes, as SPEC's table implies.
fn cookie_request_allowed(access: &Access, req: &Request) -> Result<(), Problem> {
    let headers = req.headers();
    let cross_site = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    if cross_site && !access.csrf_exempt {
        return Err(Problem::new(
            Code::AuthCsrf,
            "cross-site request with a session cookie",
        ));
    }
    // Our own `Referrer-Policy: no-referrer` makes a browser send `Origin: null` with a form
    // posted from our page (Fetch, "serializing a request origin"); its fetch metadata, which no
    // page can set, says whether that post came from this origin.
    let same_origin = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"same-origin"));
    if let Some(origin) = headers.get(axum::http::header::ORIGIN)
        && !(same_origin && origin.as_bytes() == b"null")
        && !own_origin(
            &access.state,
            headers,
            secure_request(&access.state, req),
            origin.to_str().unwrap_or("null"),
        )
    {
        return Err(Problem::new(
            Code::AuthCsrf,
            "a request with a session cookie from another origin",
        ));
    }
    let path = req.uri().path();
    if is_unsafe(req.method())
        && (path.starts_with("/api/") || path == "/mcp")
        && !json_body(headers)
    {
        return Err(Problem::new(
            Code::MediaType,
            "a request with a session cookie sends JSON (Content-Type: application/json)",
        ));
    }
    Ok(())
}

/// Whether a request's body, if it has one, is declared JSON (`application/json`,
/// `application/*+json`) or another type no page of another origin can send unasked (YAML);
/// a form, plain text, or a body without a type is not.
fn json_body(headers: &HeaderMap) -> bool {
    use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
    let Some(kind) = headers.get(CONTENT_TYPE) else {
        let empty = headers
            .get(CONTENT_LENGTH)
            .is_none_or(|l| l.as_bytes() == b"0");
        return empty && !headers.contains_key(TRANSFER_ENCODING);
    };
    let essence = kind
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    !matches!(
        essence.as_str(),
        "" | "text/plain" | "application/x-www-form-urlencoded" | "multipart/form-data"
    )
}

/// Whether `origin` is this server's own: its `baseUrl`'s origin, or the scheme and host the
/// request reached it by (`secure`: over TLS). `null` and anything unparsable are not.
pub fn own_origin(st: &AppState, headers: &HeaderMap, secure: bool, origin: &str) -> bool {
    let key = |u: &url::Url| {
        (
            u.scheme().to_string(),
            u.host_str().map(str::to_ascii_lowercase),
            u.port_or_known_default(),
        )
    };
    let Some(given) = url::Url::parse(origin)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .map(|u| key(&u))
    else {
        return false;
    };
    if url::Url::parse(&st.config.base_url).is_ok_and(|b| key(&b) == given) {
        return true;
    }
    let scheme = if secure { "https" } else { "http" };
    headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| url::Url::parse(&format!("{scheme}://{h}")).ok())
        .is_some_and(|reached| key(&reached) == given)
}

/// Largest UI form read to find its token (a branding logo is the largest field).
const FORM_LIMIT: usize = 8 * 1024 * 1024;
/// The field the UI's forms carry their token in; the form handlers never see it.
pub const FORM_TOKEN: &str = "csrf";

/// A UI form posted with a session must carry the token its page was given
/// (`with_form_tokens_in_page`); the request goes on without it (a multipart form's parser
/// passes it over).
async fn with_form_token(req: Request, session: &str) -> Result<Request, Problem> {
    let (parts, body) = req.into_parts();
    let bytes = super::extract::read_body(
        Request::from_parts(parts.clone(), body),
        FORM_LIMIT,
        Code::ValidationSize,
    )
    .await?;
    let content_type = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (given, rest) = if content_type.starts_with("multipart/form-data") {
        let given = super::multipart::parse(content_type, &bytes)
            .ok()
            .and_then(|parts| parts.into_iter().find(|p| p.name == FORM_TOKEN))
            .map(|p| String::from_utf8_lossy(&p.data).trim().to_string());
        (given, bytes)
    } else {
        let mut given = None;
        let mut rest = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(&bytes) {
            if k == FORM_TOKEN {
                given = Some(v.into_owned());
            } else {
                rest.append_pair(&k, &v);
            }
        }
        (given, bytes::Bytes::from(rest.finish()))
    };
    if !given.is_some_and(|t| crate::auth::crypto::form_token_ok(session, &t)) {
        return Err(Problem::new(
            Code::AuthCsrf,
            "the form does not carry its page's token; reload the page and try again",
        ));
    }
    let mut parts = parts;
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Ok(Request::from_parts(parts, axum::body::Body::from(rest)))
}

/// Every `<form method="post">` of an HTML page served to a session gets that session's token
/// as a hidden field, so each form the UI renders carries it without each view knowing; the
/// page is marked for no cache to keep. A live page's content carries its version
/// (`data-version` on its `<main>`, `web::page`): it is the page's `ETag`, and a live refresh
/// that names it in `If-None-Match` is answered 304 without the page when nothing changed.
async fn with_form_tokens_in_page(
    res: Response,
    session: &str,
    if_none_match: Option<String>,
) -> Response {
    let html = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !html {
        return res;
    }
    let Some(token) = crate::auth::crypto::form_token(session) else {
        return res;
    };
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, FORM_LIMIT * 2).await else {
        return Problem::internal("reading a page to give its forms their token").into_response();
    };
    let page = String::from_utf8_lossy(&bytes);
    let version = (parts.status == StatusCode::OK)
        .then(|| crate::web::page_version(&page))
        .flatten();
    if let Some(v) = version {
        if let Ok(etag) = HeaderValue::from_str(&format!("\"{v}\"")) {
            parts.headers.insert(axum::http::header::ETAG, etag);
        }
        if if_none_match.as_deref() == Some(v) {
            parts.status = StatusCode::NOT_MODIFIED;
            parts.headers.remove(axum::http::header::CONTENT_TYPE);
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            parts.headers.insert(
                axum::http::header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            );
            return Response::from_parts(parts, axum::body::Body::empty());
        }
    }
    let field = format!("<input type=\"hidden\" name=\"{FORM_TOKEN}\" value=\"{token}\">");
    let mut out = String::with_capacity(page.len() + 256);
    let mut rest: &str = &page;
    while let Some(at) = rest.find("<form") {
        let Some(end) = rest[at..].find('>').map(|e| at + e + 1) else {
            break;
        };
        out.push_str(&rest[..end]);
        if rest[at..end].contains("method=\"post\"") {
            out.push_str(&field);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    // A signed-in page is that person's: no cache keeps it (a page showing a minted token
    // says `no-store` already, which page compression reads).
    parts
        .headers
        .entry(axum::http::header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("private, no-store"));
    Response::from_parts(parts, axum::body::Body::from(out))
}

/// What no route names (SPEC 5.7, 7): a browser's page load without a valid session goes to
/// `/login`; everything else gets the plain-text 404.
pub async fn unrouted(State(st): State<AppState>, req: Request) -> Response {
    if is_document_navigation(&req) {
        let signed_in = match cookie(req.headers(), SESSION_COOKIE) {
            Some(id) => st.auth.session_principal(id).await.is_ok(),
            None => false,
        };
        if !signed_in {
            return to_login();
        }
    }
    super::router::not_found()
}

/// A browser loading a page (SPEC 5.7): GET or HEAD accepting HTML, outside the API and assets.
fn is_document_navigation(req: &Request) -> bool {
    let path = req.uri().path();
    (req.method() == Method::GET || req.method() == Method::HEAD)
        && !path.starts_with("/api/")
        && !path.starts_with("/assets/")
        && req
            .headers()
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

/// Whether cookies must carry `Secure`: direct TLS, or a trusted proxy saying it terminated TLS.
pub fn secure_request(st: &AppState, req: &Request) -> bool {
    let direct = req.extensions().get::<DirectTls>().is_some_and(|t| t.0);
    reached_securely(st, direct, req.headers())
}

/// `secure_request` for a handler that has the connection's `DirectTls` and the headers.
pub fn reached_securely(st: &AppState, direct_tls: bool, headers: &HeaderMap) -> bool {
    direct_tls
        || (st.config.trust_proxy
            && headers
                .get("x-forwarded-proto")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https")))
}

/// The `Set-Cookie` value that removes the session cookie from the browser.
pub fn clear_session_cookie(secure: bool) -> HeaderValue {
    let attrs = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}=; Path=/; Max-Age=-1; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax{attrs}"
    ))
    .unwrap_or(HeaderValue::from_static(""))
}

fn sets_session_cookie(res: &Response) -> bool {
    res.headers().get_all(SET_COOKIE).iter().any(|v| {
        v.as_bytes()
            .starts_with(format!("{SESSION_COOKIE}=").as_bytes())
    })
}

fn to_login() -> Response {
    (StatusCode::FOUND, [(LOCATION, "/login")]).into_response()
}

/// The authenticated caller and the audit actor of this request.
pub struct Caller {
    pub principal: Principal,
    pub actor: Actor,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| {
                Problem::new(
                    Code::AuthRequired,
                    "this route needs an API token or a session",
                )
            })?;
        let request_id = parts
            .extensions
            .get::<RequestId>()
            .map(|r| r.0.to_string())
            .unwrap_or_default();
        let actor = principal.actor(peer_ip(&parts.extensions).to_string(), request_id);
        Ok(Caller { principal, actor })
    }
}
