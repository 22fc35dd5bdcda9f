//! The pages problem `type` URLs name (`{problemBase}/svc/…`, CONTRACT 2): one short page
//! per code.

use super::error::Code;
use super::router::{HTML, Route, not_found};
use crate::web;
use axum::extract::Path;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

pub fn routes() -> Vec<Route> {
    const WHAT: &str = "An HTML page describing the code `svc:<group>/<name>` (or `svc:<name>`): its status and what it means. 404 for codes this build does not produce.";
    vec![
        Route::get("/problems/svc/{name}", one_part)
            .doc("problems", "Describe a problem code", WHAT)
            .answers_text(200, HTML)
            .answers_text(404, "text/plain")
            .page(),
        Route::get("/problems/svc/{group}/{name}", two_parts)
            .doc("problems", "Describe a problem code", WHAT)
            .answers_text(200, HTML)
            .answers_text(404, "text/plain")
            .page(),
    ]
}

fn describe(code: &str) -> Response {
    match Code::parse(code) {
        Some(c) => {
            let (status, title) = c.classify();
            (
                [(CONTENT_TYPE, "text/html; charset=utf-8")],
                web::problem(&c.as_str(), status.as_u16(), title, &c.explain()),
            )
                .into_response()
        }
        None => not_found(),
    }
}

async fn one_part(Path(name): Path<String>) -> Response {
    describe(&format!("svc:{name}"))
}

async fn two_parts(Path((group, name)): Path<(String, String)>) -> Response {
    describe(&format!("svc:{group}/{name}"))
}
