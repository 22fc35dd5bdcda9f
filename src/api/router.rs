//! The one route table. The axum router and the OpenAPI document are both built from it, so a
//! route cannot exist without being documented with its required permission.

use super::AppState;
use super::access::{Access, authorize};
use super::middleware::around;
use super::{
    account, ai, alerts, bundles, business, config, discovery, events, heartbeats, identity,
    incidents, ingest, mcp, metrics, notify, objects, pages, problem_pages, reports, results,
    secrets, sites, suppressions, system, ui, users,
};
use axum::Router;
use axum::extract::Request;
use axum::handler::Handler;
use axum::http::Uri;
use axum::http::{Method, StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::MethodRouter;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tower::ServiceExt;

/// No permission and no identity needed.
pub const PUBLIC: &str = "";

pub struct Route {
    pub method: Method,
    pub path: String,
    /// `resource:action`, or `PUBLIC`.
    pub permission: &'static str,
    /// With `PUBLIC`: the route still needs an authenticated caller.
    pub identity: bool,
    /// A sign-in page (`/login`, `/setup`, `/register`, `/auth/logout`): an invalid session
    /// cookie is ignored and cleared instead of refused, so a stale cookie locks nobody out.
    pub sign_in: bool,
    /// A raw route of SPEC 5.7 (ingest, ack links): no CSRF check and no session, whatever
    /// cookie a browser sends along; it authenticates by its own means.
    pub raw: bool,
    /// Reads the session cookie but is not CSRF-checked (`/mcp`, SPEC 5.7): it takes only
    /// JSON bodies, which no cross-site form can send, and checks `Origin` itself.
    pub csrf_exempt: bool,
    pub tag: &'static str,
    pub summary: &'static str,
    /// Longer text for the OpenAPI document: our choices where the spec is silent.
    pub description: &'static str,
    /// Whether the 30 s request deadline applies.
    pub deadline: bool,
    /// A browser page: its failures are HTML pages, not problem documents.
    pub page: bool,
    /// The request body, if it reads one.
    pub request: Option<Body>,
    /// A POST or PUT that reads no body says so (the OpenAPI test holds the others to a body).
    pub reads_nothing: bool,
    /// An example request body for the OpenAPI document.
    pub example: Option<serde_json::Value>,
    /// The query parameters, as the fields of one schema.
    pub query: Option<SchemaFn>,
    /// Optional request headers the route reads beyond the API-wide ones: name and meaning.
    pub headers: Vec<(&'static str, &'static str)>,
    /// The documented answers (the problem documents are derived in `openapi`).
    pub responses: Vec<Answer>,
    /// Problem documents the route answers beyond those its access and input imply: status
    /// and what it means (with the code).
    pub failures: Vec<(u16, &'static str)>,
    handler: MethodRouter<AppState>,
}

/// Writes the JSON Schema of a body into the OpenAPI document's generator.
pub type SchemaFn = Arc<dyn Fn(&mut SchemaGenerator) -> Schema + Send + Sync>;

fn schema_of<T: JsonSchema>() -> SchemaFn {
    Arc::new(|g: &mut SchemaGenerator| g.subschema_for::<T>())
}

fn text() -> SchemaFn {
    Arc::new(|_: &mut SchemaGenerator| schemars::json_schema!({"type": "string"}))
}

pub const JSON: &str = "application/json";
pub const PROBLEM: &str = "application/problem+json";
pub const HTML: &str = "text/html";
pub const FORM: &str = "application/x-www-form-urlencoded";

/// A body of a request or an answer: its media type and schema.
#[derive(Clone)]
pub struct Body {
    pub media: &'static str,
    pub schema: SchemaFn,
    /// With a request: whether it may be left out.
    pub optional: bool,
}

/// One documented answer: a status and its body, if any (success answers, and a page's own
/// failure pages).
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Option<Body>,
}

impl Route {
    fn new(method: Method, path: impl Into<String>, handler: MethodRouter<AppState>) -> Self {
        Self {
            method,
            path: path.into(),
            permission: PUBLIC,
            identity: false,
            sign_in: false,
            raw: false,
            csrf_exempt: false,
            tag: "system",
            summary: "",
            description: "",
            deadline: true,
            page: false,
            request: None,
            reads_nothing: false,
            example: None,
            query: None,
            headers: Vec::new(),
            responses: Vec::new(),
            failures: Vec::new(),
            handler,
        }
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(path: impl Into<String>, h: H) -> Self {
        Self::new(Method::GET, path, axum::routing::get(h))
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(path: impl Into<String>, h: H) -> Self {
        Self::new(Method::POST, path, axum::routing::post(h))
    }

    pub fn put<H: Handler<T, AppState>, T: 'static>(path: impl Into<String>, h: H) -> Self {
        Self::new(Method::PUT, path, axum::routing::put(h))
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(path: impl Into<String>, h: H) -> Self {
        Self::new(Method::DELETE, path, axum::routing::delete(h))
    }

    pub fn permission(mut self, p: &'static str) -> Self {
        self.permission = p;
        self
    }

    pub fn identity(mut self) -> Self {
        self.identity = true;
        self
    }

    pub fn sign_in(mut self) -> Self {
        self.sign_in = true;
        self
    }

    /// A problem document the route may answer with `status`, described with its code.
    pub fn fails(mut self, status: u16, what: &'static str) -> Self {
        self.failures.push((status, what));
        self
    }

    pub fn raw(mut self) -> Self {
        self.raw = true;
        self
    }

    pub fn csrf_exempt(mut self) -> Self {
        self.csrf_exempt = true;
        self
    }

    pub fn doc(
        mut self,
        tag: &'static str,
        summary: &'static str,
        description: &'static str,
    ) -> Self {
        self.tag = tag;
        self.summary = summary;
        self.description = description;
        self
    }

    pub fn no_deadline(mut self) -> Self {
        self.deadline = false;
        self
    }

    /// A JSON request body of type `T`.
    pub fn body<T: JsonSchema>(self) -> Self {
        self.body_as(JSON, schema_of::<T>(), false)
    }

    /// A JSON request body of type `T` that may be left out (empty reads as none).
    pub fn optional_body<T: JsonSchema>(self) -> Self {
        self.body_as(JSON, schema_of::<T>(), true)
    }

    /// A request body of another media type (a form, YAML text).
    pub fn body_as(mut self, media: &'static str, schema: SchemaFn, optional: bool) -> Self {
        self.request = Some(Body {
            media,
            schema,
            optional,
        });
        self
    }

    /// A request body of plain text in `media` (YAML bundles, raw ingest documents).
    pub fn text_body(self, media: &'static str) -> Self {
        self.body_as(media, text(), false)
    }

    /// A form body of type `T` (the sign-in pages).
    pub fn form<T: JsonSchema>(self) -> Self {
        self.body_as(FORM, schema_of::<T>(), false)
    }

    /// A `multipart/form-data` body whose fields are those of `T` (a form with a file).
    pub fn multipart<T: JsonSchema>(self) -> Self {
        self.body_as("multipart/form-data", schema_of::<T>(), false)
    }

    /// Marks a browser page (failures answer HTML).
    pub fn page(mut self) -> Self {
        self.page = true;
        self
    }

    /// Says the operation reads no body (a POST whose verb says it all).
    pub fn no_body(mut self) -> Self {
        self.reads_nothing = true;
        self
    }

    /// An example of the request body (or none).
    pub fn example(mut self, example: impl Into<Option<serde_json::Value>>) -> Self {
        self.example = example.into();
        self
    }

    /// Query parameters: the fields of `T`.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        self.query = Some(schema_of::<T>());
        self
    }

    /// An optional request header the route reads, with what it means.
    pub fn header(mut self, name: &'static str, meaning: &'static str) -> Self {
        self.headers.push((name, meaning));
        self
    }

    /// A success answer with a JSON body of type `T`.
    pub fn answers<T: JsonSchema>(self, status: u16) -> Self {
        self.answers_as(status, JSON, schema_of::<T>())
    }

    /// 200 with a JSON body of type `T`.
    pub fn ok<T: JsonSchema>(self) -> Self {
        self.answers::<T>(200)
    }

    /// A success answer of another media type, described by `schema`.
    pub fn answers_as(mut self, status: u16, media: &'static str, schema: SchemaFn) -> Self {
        self.responses.push(Answer {
            status,
            body: Some(Body {
                media,
                schema,
                optional: false,
            }),
        });
        self
    }

    /// A success answer of text in `media` (HTML pages, YAML, NDJSON, event streams).
    pub fn answers_text(self, status: u16, media: &'static str) -> Self {
        self.answers_as(status, media, text())
    }

    /// A success answer without a body (204, 302, 304).
    pub fn answers_empty(mut self, status: u16) -> Self {
        self.responses.push(Answer { status, body: None });
        self
    }
}

/// Every route of the service.
pub fn routes() -> Vec<Route> {
    let mut all = Vec::new();
    all.extend(system::routes());
    all.extend(identity::routes());
    all.extend(users::routes());
    all.extend(account::routes());
    all.extend(pages::routes());
    all.extend(ui::routes());
    all.extend(problem_pages::routes());
    all.extend(events::routes());
    all.extend(config::routes());
    all.extend(objects::routes());
    all.extend(secrets::routes());
    all.extend(bundles::routes());
    all.extend(heartbeats::routes());
    all.extend(discovery::routes());
    all.extend(reports::routes());
    all.extend(sites::routes());
    all.extend(alerts::routes());
    all.extend(incidents::routes());
    all.extend(suppressions::routes());
    all.extend(notify::routes());
    all.extend(ingest::routes());
    all.extend(business::routes());
    all.extend(results::routes());
    all.extend(metrics::routes());
    all.extend(ai::routes());
    all.extend(mcp::routes());
    all
}

/// The plain-text 404 of SPEC 7 for what no route, page or code names.
pub fn not_found() -> axum::response::Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "404 page not found\n",
    )
        .into_response()
}

async fn method_not_allowed() -> impl IntoResponse {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "405 method not allowed\n",
    )
}

/// The router's form of a documented path: a `:verb` suffix of the last segment becomes a
/// segment of its own (`/tokens/{id}:rotate` → `/tokens/{id}/:rotate`), since the router cannot
/// match a parameter followed by a suffix.
pub fn routed_path(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((head, last)) => match last.rsplit_once(':') {
            Some((name, verb)) if !name.is_empty() && !verb.is_empty() => {
                format!("{head}/{name}/:{verb}")
            }
            _ => path.to_string(),
        },
        None => path.to_string(),
    }
}

/// The documented form of a routed path (the inverse of `routed_path`), for metric labels.
pub fn documented_path(routed: &str) -> String {
    routed.replace("/:", ":")
}

/// Rewrites a request for `.../<x>:<verb>` to the routed form when `verb` is a known one, so
/// names that merely contain a colon are left alone.
fn split_verb(verbs: &HashSet<String>, mut req: Request) -> Request {
    let path = req.uri().path();
    let verb_known = path
        .rsplit_once('/')
        .and_then(|(_, last)| last.rsplit_once(':'))
        .is_some_and(|(name, verb)| !name.is_empty() && verbs.contains(verb));
    if verb_known {
        let routed = routed_path(path);
        let pq = match req.uri().query() {
            Some(q) => format!("{routed}?{q}"),
            None => routed,
        };
        if let Ok(uri) = pq.parse::<Uri>() {
            *req.uri_mut() = uri;
        }
    }
    req
}

pub fn build_router(state: AppState) -> Router {
    let mut by_path: BTreeMap<String, MethodRouter<AppState>> = BTreeMap::new();
    let mut verbs = HashSet::new();
    for r in routes() {
        let access = Access {
            state: state.clone(),
            permission: r.permission,
            identity: r.identity,
            sign_in: r.sign_in,
            raw: r.raw,
            csrf_exempt: r.csrf_exempt,
            deadline: r.deadline,
        };
        let handler = r.handler.layer(from_fn_with_state(access, authorize));
        let routed = routed_path(&r.path);
        if let Some((_, verb)) = routed.rsplit_once("/:") {
            verbs.insert(verb.to_string());
        }
        let merged = match by_path.remove(&routed) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        by_path.insert(routed, merged);
    }
    // `/:verb` segments are literal here, not the old capture syntax.
    let mut router = Router::new().without_v07_checks();
    for (path, handler) in by_path {
        router = router.route(&path, handler);
    }
    let inner = router
        .fallback(super::access::unrouted)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), around))
        .with_state(state.clone());
    let verbs = Arc::new(verbs);
    let router =
        Router::new().fallback_service(inner.map_request(move |req| split_verb(&verbs, req)));
    state.ai.set_runner(Arc::new(ai::ApiRunner {
        router: router.clone(),
    }));
    router
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    #[test]
    fn verb_paths() {
        assert_eq!(
            routed_path("/api/v1/api-tokens/{id}:rotate"),
            "/api/v1/api-tokens/{id}/:rotate"
        );
        assert_eq!(routed_path("/api/v1/audit:verify"), "/api/v1/audit/:verify");
        assert_eq!(routed_path("/api/v1/audit"), "/api/v1/audit");
        assert_eq!(
            documented_path("/api/v1/api-tokens/{id}/:rotate"),
            "/api/v1/api-tokens/{id}:rotate"
        );
        let verbs: HashSet<String> = ["rotate".to_string()].into();
        let req = split_verb(
            &verbs,
            Request::get("/x/abc:rotate?a=1")
                .body(Body::empty())
                .unwrap(),
        );
        assert_eq!(req.uri(), "/x/abc/:rotate?a=1");
        let req = split_verb(
            &verbs,
            Request::get("/x/disk:root").body(Body::empty()).unwrap(),
        );
        assert_eq!(req.uri(), "/x/disk:root", "unknown verbs are names");
    }
}
