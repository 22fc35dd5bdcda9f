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
    let cross_site = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    if bearer.is_none() && session.is_some() && cross_site && !access.csrf_exempt {
        return Problem::new(Code::AuthCsrf, "cross-site request with a session cookie")
            .into_response();
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
    next.run(req).await
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
    req.extensions().get::<DirectTls>().is_some_and(|t| t.0)
        || (st.config.trust_proxy
            && req
                .headers()
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
