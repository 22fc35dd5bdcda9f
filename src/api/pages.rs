//! Browser sign-in routes: `/login`, `/setup`, `/register`, `/auth/logout`, and OpenID Connect
//! sign-in at `/auth/oidc` and `/auth/callback` (501 until `oidc.issuer` is set).

use super::AppState;
use super::access::{SESSION_COOKIE, clear_session_cookie, cookie, peer_ip, secure_request};
use super::error::Problem;
use super::router::{HTML, Route, not_found};
use super::ui::look;
use crate::auth::oidc::{self, OidcError};
use crate::auth::sessions::NewAccount;
use crate::auth::{AuthError, NewSession};
use crate::web;
use axum::extract::{Form, FromRequest, Request, State};
use axum::http::header::{CONTENT_TYPE, LOCATION, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{AppendHeaders, IntoResponse, Response};
use serde::Deserialize;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/login", login_page).sign_in().doc("pages", "Sign-in form", "HTML.")
            .answers_text(200, HTML).page(),
        Route::post("/login", login).sign_in().doc(
            "pages",
            "Sign in",
            "Form `email`, `password`, optional `remember=1`: 302 to `/` with the `svc_session` cookie; 401 HTML on failure; throttled per client IP (burst 8, one attempt per 15 s) with `Retry-After: 30`.",
        )
            .form::<LoginForm>().answers_empty(302).answers_text(401, HTML).answers_text(429, HTML).page(),
        Route::get("/setup", setup_page).sign_in().doc("pages", "First-run setup form", "Served only while the setup gate is open; otherwise 302 to `/login`.")
            .answers_text(200, HTML).answers_empty(302).page(),
        Route::post("/setup", setup).sign_in().doc("pages", "Create the first administrator", "Form `name`, `email`, `password` (at least 12), `confirmation`: 302 to `/`; 302 to `/login` once setup is completed (409 only for a POST racing the one that completes it).")
            .form::<AccountForm>().answers_empty(302).page(),
        Route::get("/register", register_page).sign_in().doc("pages", "Self-registration form", "404 unless `allowSignup`; 302 to `/setup` while the setup gate is open.")
            .answers_text(200, HTML).answers_empty(302).answers_text(404, "text/plain").page(),
        Route::post("/register", register).sign_in().doc("pages", "Register", "Creates a viewer in the default tenant and signs it in.")
            .form::<AccountForm>().answers_empty(302).answers_text(404, "text/plain").page(),
        Route::get("/auth/logout", logout).sign_in().doc("pages", "Sign out", "Deletes the session, clears the cookie, 302 to `/login`.")
            .answers_empty(302).page(),
        Route::get("/auth/oidc", oidc_start).sign_in().doc("pages", "Start SSO sign-in", "302 to the identity provider's authorization endpoint (Authorization Code with PKCE S256), setting `svc_oidc_state` and `svc_oidc_verifier` (Path=/auth, HttpOnly, SameSite=Lax, Secure on HTTPS, Max-Age=600); the sign-in page with a message, 502, when the provider cannot be reached; 501 `SSO not configured` without `oidc.issuer`.")
            .answers_empty(302).answers_text(502, HTML).answers_text(501, "text/plain").page(),
        Route::get("/auth/callback", oidc_callback).sign_in().doc("pages", "SSO callback", "Query `code` and `state` (or `error`) from the identity provider: the state checked against its cookie, the code exchanged with the PKCE verifier, the id_token verified (signature, issuer, audience, expiry, nonce); the account provisioned or updated by subject `issuer|sub` with roles from its groups, then 302 to `/` with a 12 h `svc_session`. Any failure: the sign-in page with the reason, 401 (502 when the provider cannot be reached); both flow cookies are cleared either way. 501 `SSO not configured` without `oidc.issuer`.")
            .answers_empty(302).answers_text(401, HTML).answers_text(502, HTML).answers_text(501, "text/plain").page(),
    ]
}

fn html(status: StatusCode, body: String) -> Response {
    (status, [(CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn redirect(to: &'static str) -> Response {
    (StatusCode::FOUND, [(LOCATION, to)]).into_response()
}

fn set_cookie(value: String) -> [(axum::http::HeaderName, HeaderValue); 1] {
    [(
        SET_COOKIE,
        HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("")),
    )]
}

fn signed_in(session: NewSession, secure: bool) -> Response {
    let attrs = if secure { "; Secure" } else { "" };
    let value = format!(
        "{SESSION_COOKIE}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{attrs}",
        session.id,
        session.ttl.as_secs()
    );
    (
        StatusCode::FOUND,
        [(LOCATION, HeaderValue::from_static("/"))],
        set_cookie(value),
    )
        .into_response()
}

fn throttled(page: String) -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (RETRY_AFTER, "30"),
        ],
        page,
    )
        .into_response()
}

/// The request parts the sign-in handlers need besides the form.
struct Origin {
    ip: std::net::IpAddr,
    secure: bool,
}

fn origin(st: &AppState, req: &Request) -> Origin {
    Origin {
        ip: peer_ip(req.extensions()),
        secure: secure_request(st, req),
    }
}

/// A form body; one that does not read is the form's defaults (the page then says what is
/// missing).
pub(super) async fn form<T: serde::de::DeserializeOwned + Default>(
    st: &AppState,
    req: Request,
) -> T {
    Form::<T>::from_request(req, st)
        .await
        .map(|f| f.0)
        .unwrap_or_default()
}

/// The sign-in page, with the identity provider's button when OIDC is on.
fn login_html(st: &AppState, look: &web::Look, msg: Option<&str>, email: &str) -> String {
    let sso = st.oidc.as_ref().map(|o| o.provider_name.as_str());
    web::login(look, msg, email, sso)
}

async fn login_page(State(st): State<AppState>) -> Response {
    html(
        StatusCode::OK,
        login_html(&st, &look(&st, None).await, None, ""),
    )
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct LoginForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    remember: String,
}

async fn login(State(st): State<AppState>, req: Request) -> Response {
    let o = origin(&st, &req);
    let f: LoginForm = form(&st, req).await;
    let look = look(&st, None).await;
    match st.auth.limiter.allow(o.ip, st.clock.now()).await {
        Ok(true) => {}
        Ok(false) => {
            return throttled(login_html(
                &st,
                &look,
                Some("Too many sign-in attempts. Try again in 30 seconds."),
                &f.email,
            ));
        }
        Err(e) => return sign_in_unavailable(&st, &look, &f.email, &e.into()),
    }
    let remember = f.remember == "1" || f.remember == "on" || f.remember == "true";
    match st
        .auth
        .login(
            &f.email,
            &f.password,
            remember,
            &o.ip.to_string(),
            st.directory.as_deref(),
        )
        .await
    {
        Ok(session) => signed_in(session, o.secure),
        Err(AuthError::Invalid(_)) => html(
            StatusCode::UNAUTHORIZED,
            login_html(&st, &look, Some("Invalid e-mail or password."), &f.email),
        ),
        Err(e) => sign_in_unavailable(&st, &look, &f.email, &e),
    }
}

/// The sign-in page again, 503: what failed is the server's part, logged.
fn sign_in_unavailable(st: &AppState, look: &web::Look, email: &str, e: &AuthError) -> Response {
    tracing::error!(error = %e, "sign-in failed");
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        login_html(
            st,
            look,
            Some("Sign-in is unavailable; try again later."),
            email,
        ),
    )
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct AccountForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirmation: String,
}

/// A failed account creation as the page's status and message, through the one error mapping;
/// a server-side failure is logged and shown as unavailable.
fn account_error(e: AuthError) -> (StatusCode, String) {
    let p = Problem::from(e);
    if p.status.is_server_error() {
        tracing::error!(code = %p.code.as_str(), internal = p.internal.as_deref().unwrap_or(""), "account creation failed");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable; try again later.".into(),
        );
    }
    (p.status, p.detail)
}

async fn setup_page(State(st): State<AppState>) -> Response {
    if !st.auth.setup_open().await {
        return redirect("/login");
    }
    html(StatusCode::OK, web::setup(None, "", ""))
}

/// Which account form a submission came from.
#[derive(Clone, Copy)]
enum AccountPage {
    Setup,
    Register,
}

impl AccountPage {
    fn render(self, msg: Option<&str>, f: &AccountForm) -> String {
        match self {
            AccountPage::Setup => web::setup(msg, &f.name, &f.email),
            AccountPage::Register => web::register(msg, &f.name, &f.email),
        }
    }
}

/// Setup and registration: throttle, create the account, sign it in or re-render the form.
async fn open_account(st: &AppState, req: Request, page: AccountPage) -> Response {
    let o = origin(st, &req);
    let f: AccountForm = form(st, req).await;
    match st.auth.limiter.allow(o.ip, st.clock.now()).await {
        Ok(true) => {}
        Ok(false) => {
            return throttled(page.render(Some("Too many attempts. Try again in 30 seconds."), &f));
        }
        Err(e) => {
            let (status, msg) = account_error(e.into());
            return html(status, page.render(Some(&msg), &f));
        }
    }
    let ip = o.ip.to_string();
    let account = NewAccount {
        name: &f.name,
        email: &f.email,
        password: &f.password,
        confirmation: &f.confirmation,
        source_ip: &ip,
    };
    let result = match page {
        AccountPage::Setup => st.auth.setup(account).await,
        AccountPage::Register => st.auth.register(account).await,
    };
    match result {
        Ok(session) => signed_in(session, o.secure),
        Err(e) => {
            let (status, msg) = account_error(e);
            html(status, page.render(Some(&msg), &f))
        }
    }
}

/// A POST after setup completed goes to the sign-in page (SPEC 4); a POST that began while
/// another was being handled races it, goes on to the gate re-checked under the mutex, and
/// gets 409 if it lost.
async fn setup(State(st): State<AppState>, req: Request) -> Response {
    let attempt = st.auth.setup_attempt();
    if !attempt.racing() && !st.auth.setup_open().await {
        return redirect("/login");
    }
    open_account(&st, req, AccountPage::Setup).await
}

async fn register_page(State(st): State<AppState>) -> Response {
    if !st.config.allow_signup {
        return not_found();
    }
    if st.auth.setup_open().await {
        return redirect("/setup");
    }
    html(StatusCode::OK, web::register(None, "", ""))
}

async fn register(State(st): State<AppState>, req: Request) -> Response {
    if !st.config.allow_signup {
        return not_found();
    }
    if st.auth.setup_open().await {
        return redirect("/setup");
    }
    open_account(&st, req, AccountPage::Register).await
}

async fn logout(State(st): State<AppState>, req: Request) -> Response {
    if let Some(id) = cookie(req.headers(), SESSION_COOKIE)
        && let Err(e) = st.auth.logout(id).await
    {
        tracing::warn!(error = %e, "could not delete the session");
    }
    (
        StatusCode::FOUND,
        [
            (LOCATION, HeaderValue::from_static("/login")),
            (SET_COOKIE, clear_session_cookie(secure_request(&st, &req))),
        ],
    )
        .into_response()
}

async fn sso_unconfigured() -> Response {
    (
        StatusCode::NOT_IMPLEMENTED,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        "SSO not configured",
    )
        .into_response()
}

/// A cookie of the OIDC flow: scoped to `/auth`, gone after `max_age` seconds (0 clears it).
fn flow_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let attrs = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/auth; Max-Age={max_age}; HttpOnly; SameSite=Lax{attrs}"
    ))
    .unwrap_or(HeaderValue::from_static(""))
}

/// Both flow cookies cleared.
fn clear_flow(secure: bool) -> [(axum::http::HeaderName, HeaderValue); 2] {
    [
        (SET_COOKIE, flow_cookie(oidc::STATE_COOKIE, "", 0, secure)),
        (
            SET_COOKIE,
            flow_cookie(oidc::VERIFIER_COOKIE, "", 0, secure),
        ),
    ]
}

/// The sign-in page telling why SSO failed: 502 when the provider was out of reach, else 401.
async fn sso_failed(st: &AppState, e: &OidcError, secure: bool) -> Response {
    tracing::warn!(error = %e, "SSO sign-in failed");
    let status = match e {
        OidcError::Unreachable(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::UNAUTHORIZED,
    };
    let page = login_html(
        st,
        &look(st, None).await,
        Some(&format!("Single sign-on failed: {e}.")),
        "",
    );
    (
        status,
        AppendHeaders(clear_flow(secure)),
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

async fn oidc_start(State(st): State<AppState>, req: Request) -> Response {
    let Some(oidc) = st.oidc.clone() else {
        return sso_unconfigured().await;
    };
    let secure = secure_request(&st, &req);
    match oidc.start().await {
        Ok(start) => {
            let ttl = oidc::FLOW_TTL.as_secs();
            let mut res = (StatusCode::FOUND, [(LOCATION, start.url)]).into_response();
            let headers = res.headers_mut();
            headers.append(
                SET_COOKIE,
                flow_cookie(oidc::STATE_COOKIE, &start.state, ttl, secure),
            );
            headers.append(
                SET_COOKIE,
                flow_cookie(oidc::VERIFIER_COOKIE, &start.verifier, ttl, secure),
            );
            res
        }
        Err(e) => sso_failed(&st, &e, secure).await,
    }
}

/// What the identity provider sends the browser back with (RFC 6749 4.1.2).
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    error: String,
}

async fn oidc_callback(State(st): State<AppState>, req: Request) -> Response {
    let Some(oidc) = st.oidc.clone() else {
        return sso_unconfigured().await;
    };
    // Not throttled like the password form: nothing can be guessed here. A forged state fails
    // before any request leaves, and a code is the provider's to check, once.
    let o = origin(&st, &req);
    let q: CallbackQuery =
        serde_urlencoded::from_str(req.uri().query().unwrap_or("")).unwrap_or_default();
    let identity = if q.error.is_empty() {
        oidc.finish(
            &q.code,
            &q.state,
            cookie(req.headers(), oidc::STATE_COOKIE),
            cookie(req.headers(), oidc::VERIFIER_COOKIE),
        )
        .await
    } else {
        // Only the error code is shown: it is short and from a fixed set, where a description
        // would be any text whoever crafted the link chose.
        let code: String = q
            .error
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        Err(OidcError::Refused(code))
    };
    let account = match identity {
        Ok(a) => a,
        Err(e) => return sso_failed(&st, &e, o.secure).await,
    };
    match st
        .auth
        .sign_in_sso(account, oidc.admin_group.as_deref(), &o.ip.to_string())
        .await
    {
        Ok(session) => {
            let mut res = signed_in(session, o.secure);
            for (name, value) in clear_flow(o.secure) {
                res.headers_mut().append(name, value);
            }
            res
        }
        Err(AuthError::Invalid(reason)) => {
            sso_failed(&st, &OidcError::Rejected(reason), o.secure).await
        }
        Err(e) => {
            tracing::error!(error = %e, "SSO sign-in failed");
            let page = login_html(
                &st,
                &look(&st, None).await,
                Some("Sign-in is unavailable; try again later."),
                "",
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                AppendHeaders(clear_flow(o.secure)),
                [(CONTENT_TYPE, "text/html; charset=utf-8")],
                page,
            )
                .into_response()
        }
    }
}
