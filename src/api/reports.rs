//! Report routes (SPEC 4.5): render now, run into the archive, list and download renderings.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiPath, ApiQuery, path_id};
use super::pagination::{Page, PageQuery, REPORT_ARCHIVE};
use super::router::Route;
use crate::model::report::{ArchivedReport, ReportTable};
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/reports/{name}:render", render).permission("reports:render").doc(
            "reports",
            "Render a report now",
            "Query `format`: `html` (default), `csv` or `json` (`{title, type, generatedAt, windowDays, columns, rows: [{name, values, class}], totals}`, `values` one per column after the name); `pdf` is 501 `svc:reports/pdf`. Types: `availability` and `sla` (each object `params.selector` picks, at most 10,000: its time in a hard non-OK state over `params.windowDays`, default 30, against `params.target`, default 99.9; with `params.excludeDependencies: true` the time a failed dependency held the object back is not counted down), `alert-stats` (alerts opened in the window: counts, MTTA, MTTR, the 20 most frequent titles), `oncall` (who is on call now per schedule), `audit` (users and their roles; rendering it or reading its archive also takes `admin:users`, else 403). Nothing is stored.",
        )
            .query::<RenderQuery>()
            .no_body()
            .answers_text(200, "text/html")
            .answers_text(200, "text/csv")
            .ok::<ReportTable>(),
        Route::post("/api/v1/reports/{name}:run", run).permission("config:write").doc(
            "reports",
            "Render, archive and mail a report now",
            "Renders HTML and CSV into the archive in slot `manual-<ms>` (keeping the report's newest `keep` per format, default 12) and, when the report lists `email` addresses, queues one mail per address through the `email` channel `params.channel` (the outbox retries it like any notification). 200 `{renderings}`. Scheduled reports (`schedule`) are run the same way by the minute sweep, once per slot.",
        )
            .no_body()
            .ok::<RunResult>(),
        Route::get("/api/v1/reports/{name}/archive", archive).permission("objects:read").doc(
            "reports",
            "Archived renderings",
            "Newest first, 100 by default (at most 1000); `cursor` is the last id of the previous page. A report that does not exist is 404.",
        )
            .query::<PageQuery>()
            .ok::<Page<ArchivedReport>>(),
        Route::get("/api/v1/reports/{name}/archive/{id}", download).permission("objects:read").doc(
            "reports",
            "Download an archived rendering",
            "The rendering as it was made, in its content type (`text/html` or `text/csv`).",
        )
            .answers_text(200, "text/html")
            .answers_text(200, "text/csv"),
    ]
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
struct RenderQuery {
    /// `html` (default), `csv`, `json`; `pdf` is 501.
    format: Option<String>,
}

/// What a run archived.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct RunResult {
    renderings: Vec<ArchivedReport>,
}

async fn render(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<RenderQuery>,
) -> Result<impl IntoResponse, Problem> {
    let out = st
        .reports
        .render(&c.principal, &name, q.format.as_deref())
        .await?;
    Ok(([(header::CONTENT_TYPE, out.content_type)], out.body))
}

async fn run(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let renderings = st.reports.run(&c.principal, &c.actor, &name).await?;
    Ok(Json(RunResult { renderings }))
}

async fn archive(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.resolve(REPORT_ARCHIVE);
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = st
        .reports
        .archive(&c.principal, &name, cursor, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |a: &ArchivedReport| {
        a.id.to_string()
    })))
}

async fn download(
    State(st): State<AppState>,
    c: Caller,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<impl IntoResponse, Problem> {
    let (entry, body) = st
        .reports
        .archived(&c.principal, &name, path_id(&id)?)
        .await?;
    Ok(([(header::CONTENT_TYPE, entry.content_type)], body))
}
