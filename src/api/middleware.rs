//! Cross-cutting request handling, in one layer (`around`): request id and span, security
//! headers, metrics, problem rendering, page compression, panic recovery; and the per-route
//! request deadline (`within_deadline`, applied with access control).

use super::AppState;
use super::error::{Problem, ProblemDoc};
use super::router::documented_path;
use crate::model::fault;
use crate::runtime::Stopwatch;
use crate::runtime::metrics::{HttpLabels, RouteLabels};
use axum::body::Body;
use axum::extract::{MatchedPath, OriginalUri, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tracing::Instrument;
use uuid::Uuid;

pub const REQUEST_ID: &str = "x-request-id";

/// Per-request deadline (SPEC 8); routes such as `events:export` opt out.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// The request's id, also available to handlers (audit entries carry it).
#[derive(Clone, Copy, Debug)]
pub struct RequestId(pub Uuid);

/// Everything every request goes through, in one layer: a `from_fn` layer clones its inner
/// service and boxes a future on every request, so six of them cost a request more than its
/// access check. In order: the request gets its id and runs in a `request` span carrying it,
/// so everything it logs and every transaction it commits can be followed back to it
/// (`SVC_LOG_SPANS`); the server is marked busy (probes aside), so memory is given back only
/// once requests stop; a panicking handler becomes 500 (`caught`); an HTML page is gzipped for
/// a client that takes it (`gzip_page`); a `Problem` gets its body (`render_problem`); the
/// request is counted and timed; the answer carries the id and the security headers
/// (`secure`).
pub async fn around(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let route = route_of(&req);
    if !PROBES.contains(&route.as_str()) {
        st.activity.note();
    }
    let id = st.clock.new_id();
    req.extensions_mut().insert(RequestId(id));
    let span = tracing::info_span!("request", id = %id, method = %req.method(), route = %route);
    // The path as the client sent it, before any `:verb` rewrite.
    let path = req
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| req.uri().path().to_string(), |o| o.0.path().to_string());
    let method = req.method().clone();
    let page = is_page_request(&req, &path);
    let gzip = accepts_gzip(req.headers());
    let watch = Stopwatch::start();
    async move {
        let res = caught(next.run(req)).await;
        let res = if gzip { gzip_page(res).await } else { res };
        let mut res = render_problem(&st, res, &method, &path, page);
        let labels = HttpLabels {
            method: method.to_string(),
            route: route.clone(),
            status: res.status().as_u16(),
        };
        st.metrics.http_requests.get_or_create(&labels).inc();
        st.metrics
            .http_duration
            .get_or_create(&RouteLabels {
                method: labels.method,
                route,
            })
            .observe(watch.elapsed().as_secs_f64());
        if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
            res.headers_mut().insert(REQUEST_ID, v);
        }
        secure(res)
    }
    .instrument(span)
    .await
}

/// Routes a load balancer, a supervisor or Prometheus polls: they do not keep the server busy,
/// or a probe every 15 s would keep its memory from ever being given back.
const PROBES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The documented path of the route `req` matched, as metrics and spans name it.
fn route_of(req: &Request) -> String {
    req.extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| documented_path(m.as_str()))
}

/// What every HTML page may load and do: its own scripts and styles (inline styles too: the
/// ack pages and reports carry one, a history bar's segments their widths), forms posting
/// back here, no framing anywhere.
const PAGE_POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// Headers that keep answers from being turned against their readers: no content sniffing and
/// no `Referer` (an ack link's token is in its path) on every answer; on HTML pages a content
/// security policy that forbids framing.
fn secure(mut res: Response) -> Response {
    let html = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if html {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_POLICY),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    res
}

/// Writes the body of a `Problem` response (an HTML page for a browser's page request), and
/// logs a 5xx once.
fn render_problem(
    st: &AppState,
    mut res: Response,
    method: &Method,
    path: &str,
    page: bool,
) -> Response {
    let Some(p) = res.extensions_mut().remove::<Problem>() else {
        return res;
    };
    if p.status.is_server_error() {
        tracing::error!(%method, %path, code = %p.code.as_str(), internal = p.internal.as_deref().unwrap_or(""), "request failed");
    }
    res.headers_mut().remove(header::CONTENT_LENGTH);
    if page {
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        *res.body_mut() = Body::from(crate::web::error(p.status.as_u16(), p.title(), &p.detail));
        return res;
    }
    let code = p.code.as_str();
    let doc = ProblemDoc {
        kind: format!("{}/{}", st.problem_base, code.replace(':', "/")),
        title: p.title(),
        status: p.status.as_u16(),
        code: &code,
        detail: &p.detail,
        instance: path,
    };
    let body = fault::encoded("a problem document", serde_json::to_vec(&doc));
    *res.body_mut() = Body::from(body);
    res
}

/// Whether the client takes `Content-Encoding: gzip`.
pub fn accepts_gzip(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',').any(|e| {
                let mut parts = e.split(';');
                parts.next().map(str::trim) == Some("gzip")
                    && !parts.any(|q| q.trim().replace(' ', "") == "q=0")
            })
        })
}

/// Pages are gzipped for clients that take it: a list of 50 problems is 28 KB of HTML and a
/// few KB gzipped, which is what a phone on a slow link waits for. Pages carry no secret for a
/// compression side channel to recover (the session is a cookie; the forms' token is masked
/// afresh for every page, `auth::crypto::form_token`); the one page that shows a secret (a
/// token just minted, marked `no-store` alone) goes uncompressed all the same. So do a site's
/// bundles (YAML), over what may be a metered cellular uplink; they reflect nothing a request
/// sent.
async fn gzip_page(res: Response) -> Response {
    let html = res.headers().get(header::CONTENT_TYPE).is_some_and(|v| {
        v.as_bytes().starts_with(b"text/html") || v.as_bytes() == b"application/yaml"
    });
    let secret = res
        .headers()
        .get(header::CACHE_CONTROL)
        .is_some_and(|v| v.as_bytes() == b"no-store");
    if !html || secret || res.headers().contains_key(header::CONTENT_ENCODING) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let bytes = match axum::body::to_bytes(body, PAGE_LIMIT).await {
        Ok(b) => b,
        Err(e) => {
            return Problem::internal(format!("reading a page to compress it: {e}"))
                .into_response();
        }
    };
    if bytes.len() < GZIP_FROM {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zipped = std::io::Write::write_all(&mut z, &bytes).and_then(|()| z.finish());
    match zipped {
        Ok(zipped) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            parts
                .headers
                .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
            Response::from_parts(parts, Body::from(zipped))
        }
        Err(e) => Problem::internal(format!("compressing a page: {e}")).into_response(),
    }
}

/// Pages are read whole to be compressed; none comes near this.
const PAGE_LIMIT: usize = 16 * 1024 * 1024;
/// Smaller pages go as they are: the gzip frame would eat most of the gain.
const GZIP_FROM: usize = 1024;

/// A browser's request for a page of the UI (not the API, not `/mcp`), which a refusal answers
/// with an HTML page instead of a problem document: it accepts HTML, or it posts a form.
fn is_page_request(req: &Request, path: &str) -> bool {
    let headers = req.headers();
    let says = |name: header::HeaderName, what: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains(what))
    };
    !path.starts_with("/api/")
        && path != "/mcp"
        && (says(header::ACCEPT, "text/html")
            || says(header::CONTENT_TYPE, "application/x-www-form-urlencoded"))
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// A panicking handler answers 500 `svc:internal`; the process keeps serving.
async fn caught(handling: impl Future<Output = Response>) -> Response {
    match AssertUnwindSafe(handling).catch_unwind().await {
        Ok(res) => res,
        Err(p) => Problem::internal(format!("handler panicked: {}", panic_text(p.as_ref())))
            .into_response(),
    }
}

/// 503 with the plain text `request timeout` once the deadline passes (not a problem document).
pub async fn within_deadline(handling: impl Future<Output = Response>) -> Response {
    match tokio::time::timeout(REQUEST_DEADLINE, handling).await {
        Ok(res) => res,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "request timeout",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deadline_answers_503_request_timeout() {
        let slow = within_deadline(async {
            tokio::time::sleep(Duration::from_secs(31)).await;
            "late".into_response()
        })
        .await;
        assert_eq!(slow.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(slow.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"request timeout");
        let quick = within_deadline(async { "on time".into_response() }).await;
        assert_eq!(quick.status(), StatusCode::OK);
    }

    async fn boom() -> Response {
        let v: Vec<u8> = Vec::new();
        if v.is_empty() {
            std::panic::panic_any("handler exploded");
        }
        "unreachable".into_response()
    }

    #[tokio::test]
    async fn a_panic_becomes_500_internal() {
        let res = caught(boom()).await;
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let p = res.extensions().get::<Problem>().unwrap();
        assert_eq!(p.code.as_str(), "svc:internal");
        assert_eq!(p.detail, "", "internals never reach the client");
        assert!(p.internal.as_deref().unwrap().contains("handler exploded"));
    }

    #[test]
    fn gzip_is_taken_unless_refused() {
        let with = |v: &'static str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
            accepts_gzip(&h)
        };
        assert!(with("gzip, deflate, br"));
        assert!(with("br;q=1.0, gzip;q=0.8"));
        assert!(!with("gzip;q=0"));
        assert!(!with("deflate, br"));
        assert!(!with("x-gzip-ish"));
        assert!(!accepts_gzip(&axum::http::HeaderMap::new()));
    }
}
