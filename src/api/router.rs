//! The one route table. The axum router and the OpenAPI document are both built from it, so a
//! route cannot exist without being documented with its required permission.

use super::AppState;
use super::middleware::{catch_panic, deadline, record_metrics, render_problems, request_id};
use super::system;
use axum::Router;
use axum::handler::Handler;
use axum::http::{Method, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::IntoResponse;
use axum::routing::MethodRouter;
use std::collections::BTreeMap;

/// No permission and no identity needed.
pub const PUBLIC: &str = "";

pub struct Route {
    pub method: Method,
    pub path: &'static str,
    /// `resource:action`, or `PUBLIC`.
    pub permission: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    /// Longer text for the OpenAPI document: our choices where the spec is silent.
    pub description: &'static str,
    /// Whether the 30 s request deadline applies.
    pub deadline: bool,
    handler: MethodRouter<AppState>,
}

impl Route {
    fn new(method: Method, path: &'static str, handler: MethodRouter<AppState>) -> Self {
        Self {
            method,
            path,
            permission: PUBLIC,
            tag: "system",
            summary: "",
            description: "",
            deadline: true,
            handler,
        }
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(path: &'static str, h: H) -> Self {
        Self::new(Method::GET, path, axum::routing::get(h))
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(path: &'static str, h: H) -> Self {
        Self::new(Method::POST, path, axum::routing::post(h))
    }

    pub fn put<H: Handler<T, AppState>, T: 'static>(path: &'static str, h: H) -> Self {
        Self::new(Method::PUT, path, axum::routing::put(h))
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(path: &'static str, h: H) -> Self {
        Self::new(Method::DELETE, path, axum::routing::delete(h))
    }

    pub fn permission(mut self, p: &'static str) -> Self {
        self.permission = p;
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
}

/// Every route of the service.
pub fn routes() -> Vec<Route> {
    let mut all = Vec::new();
    all.extend(system::routes());
    all
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "404 page not found\n",
    )
}

async fn method_not_allowed() -> impl IntoResponse {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "405 method not allowed\n",
    )
}

pub fn build_router(state: AppState) -> Router {
    let mut by_path: BTreeMap<&'static str, MethodRouter<AppState>> = BTreeMap::new();
    for r in routes() {
        let handler = if r.deadline {
            r.handler.layer(from_fn(deadline))
        } else {
            r.handler
        };
        let merged = match by_path.remove(r.path) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        by_path.insert(r.path, merged);
    }
    let mut router = Router::new();
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn(catch_panic))
        .layer(from_fn_with_state(state.clone(), render_problems))
        .layer(from_fn_with_state(state.clone(), record_metrics))
        .layer(from_fn_with_state(state.clone(), request_id))
        .with_state(state)
}
