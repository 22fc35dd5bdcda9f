//! Passive results and the problem list (SPEC 4.2, CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiQuery};
use super::pagination::{PROBLEMS, Page, PageQuery};
use super::router::Route;
use crate::monitor::pipeline::AnswerWhen;
use crate::monitor::results::Accepted;
use crate::monitor::results::ResultBatch;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::json;

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/results", submit).permission("objects:write").doc(
            "results",
            "Submit passive check results",
            "`{results: [{host, service?, state, output}]}`; `state` is 0..3 or a name (OK, WARNING/WARN, CRITICAL/CRIT, UNKNOWN/UNKN, UP, DOWN, UNREACHABLE); a host's DOWN is down. `output`: first line text, `|` starts performance data, further lines long output. All results of a batch are applied in one transaction, or none if one is malformed (422). Unknown hosts or services are listed in `rejected`, the others applied. 202 `{accepted, rejected}`. A passive result is hard at once unless the object's resolved spec sets `maxCheckAttempts`; a DOWN host whose parents are all hard non-UP becomes UNREACHABLE. The batch joins the results queue (8192 results; active check results share it) and the answer comes once its states are durably committed (its events and metric samples commit right after; any event or metrics read that begins after the answer waits for them), or once it is queued with `Prefer: respond-async`; 503 `svc:pipeline/stalled` when the queue stays full for 5 s or its oldest entry has waited 10 s. Performance data becomes metric series (see `/api/v1/metrics/query`).",
        )
            .header("Prefer", "`respond-async` (RFC 7240): answer once the results are queued, as Icinga 2's API and NSCA do, not once their states are durably committed; the answer then carries `Preference-Applied: respond-async`. A group of such results commits without waiting for its sync, which follows within 50 ms: a crash loses what was queued or committed in the last 50 ms, and a read right after the answer may not show them yet. Other preferences are ignored.")
            .body::<ResultBatch>().answers::<Accepted>(202)
            .example(|| json!({"results": [{"host": "web01", "service": "disk", "state": "WARNING", "output": "DISK WARNING - 91% used | used=91%;90;95"}]})),
        Route::get("/api/v1/problems", problems).permission("objects:read").tool("problems_list", "Hosts and services not OK, worst first, unhandled before handled.", &[("selector", "string", "label selector")]).doc(
            "results",
            "Objects not OK/UP",
            "Items `{object, hostName, state}` (`hostName` for services): unhandled before handled (acknowledged or in downtime; listed only with `includeHandled=true`), worst state first (CRITICAL/DOWN, UNKNOWN/UNREACHABLE, WARNING), then the oldest hard change; limit 500 by default.",
        )
            .query::<ProblemQuery>().ok::<Page<crate::model::state::Problem>>(),
    ]
}

async fn submit(
    State(st): State<AppState>,
    c: Caller,
    headers: HeaderMap,
    ApiJson(batch): ApiJson<ResultBatch>,
) -> Result<impl IntoResponse, Problem> {
    let answer = if prefers_respond_async(&headers) {
        AnswerWhen::Queued
    } else {
        AnswerWhen::Applied
    };
    let accepted = st
        .pipeline
        .submit_results(&c.principal, batch, answer)
        .await?;
    let applied = (answer == AnswerWhen::Queued)
        .then_some([(PREFERENCE_APPLIED, HeaderValue::from_static(RESPOND_ASYNC))]);
    Ok((StatusCode::ACCEPTED, applied, Json(accepted)))
}

const RESPOND_ASYNC: &str = "respond-async";
const PREFERENCE_APPLIED: HeaderName = HeaderName::from_static("preference-applied");

/// Whether a `Prefer` header (RFC 7240: comma-separated preferences, each a token with an
/// optional `=value` and `;` parameters, names case-insensitive) asks for `respond-async`.
fn prefers_respond_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.split([';', '=']).next())
        .any(|name| name.trim().eq_ignore_ascii_case(RESPOND_ASYNC))
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct ProblemQuery {
    include_handled: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

async fn problems(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ProblemQuery>,
) -> Result<impl IntoResponse, Problem> {
    let include = q.include_handled.as_deref() == Some("true");
    let limit = q.page.resolve(PROBLEMS).limit;
    Ok(Json(Page::all(
        st.results.problems(&c.principal, include, limit).await?,
    )))
}
