//! Business service views (SEMANTICS 8): the evaluated tree, one service's subtree, its SLA,
//! the services an object affects; and an objective's budget and burn (`slos`).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiPath, path_id};
use super::router::Route;
use crate::model::slo::SloStatus;
use crate::monitor::business::{Node, SlaReport};
use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;

pub fn routes() -> Vec<Route> {
    const NODE: &str = "Nodes `{service, state, causes, children}`: `state` on the service scale (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) from the node's objects (`objectId`, or `selector` on effective labels; hosts DOWN count CRITICAL, UNREACHABLE and never-checked objects UNKNOWN) and child services (`parentId` naming the parent's id or name), under its `rule`: `worst` (default; ranking OK < WARNING < UNKNOWN < CRITICAL), `best`, `quorum` (OK when at least `quorumPct`, default 50, of the inputs are OK, else CRITICAL), `weighted` (the same share by child `weight`); no inputs is UNKNOWN. `causes`: up to 5 non-OK objects.";
    vec![
        Route::get("/api/v1/business-services:tree", tree).permission("objects:read").doc("business-services", "The evaluated business service tree", NODE)
            .ok::<Vec<Node>>(),
        Route::get("/api/v1/business-services/{name}:tree", subtree).permission("objects:read").doc("business-services", "One business service evaluated with its subtree", NODE)
            .ok::<Node>(),
        Route::get("/api/v1/business-services/{name}/sla", sla).permission("objects:read").doc(
            "business-services",
            "SLA budget of a business service",
            "`{service, availability, target, windowDays, budgetTotal, budgetSpent, budgetLeft, burn}` over `slaWindow` (month, quarter, year: 30, 90, 365 days) from the hard state changes of the objects the service binds itself (WARNING and UNKNOWN count as down); with `excludeDowntimes` the time in downtime is not counted, with `excludeDependencies` the time a bound object was held back by a failed dependency (its `dependsOn` or `parents`, as alerts are) is not. Only time with data counts: the availability and the budgets are of the window from the first result of any bound object on (100 with no data at all). Budgets are durations (`1h2m`). `burn` (ours): for each of the service's `burnAlerts` pairs (default the SRE workbook's: 14.4x over 1h and 5m, 6x over 6h and 30m, page; 1x over 72h and 6h, ticket) the error budget's burn rate over its long and short window and `firing` when both reach its `burnRate`.",
        )
            .ok::<SlaReport>(),
        Route::get("/api/v1/slos/{name}/status", slo).permission("objects:read").doc(
            "slos",
            "An objective's error budget and burn",
            "`{name, target, window, source, sli, budgetSpent, budgetLeft, burn}` of an `slos` document of the caller's tenant. `source` `availability`: the indicator is the subject's availability over `window` (a business service's as its SLA counts it, an object's hard non-OK time without its downtimes; only time with data counts); `metric`: `100 × good/total` of the increases of the object's two counters over the window (a drop is a counter reset). `sli` is null without data. `budgetSpent` is the share of the window's error budget (`1 - target/100`) spent, `budgetLeft` `1 - budgetSpent` (negative when overspent). `burn`: each pair of `burnAlerts` (default the SRE workbook's) with its long and short windows' burn rate and `firing`, which is when its alert is open (dedup key `slo/<name>/<long>/<short>`, labels `slo` and `burn`: `page` pairs critical, escalated by the objective's `escalationPolicy`; `ticket` pairs warnings). 404 for an objective the tenant does not have.",
        )
            .ok::<SloStatus>(),
        Route::get("/api/v1/objects/{id}/impact", impact).permission("objects:read").doc(
            "business-services",
            "Business services an object affects",
            "The names of the services that depend on the object, directly or through child services.",
        )
            .ok::<Vec<String>>(),
    ]
}

async fn tree(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.business.tree(&c.principal).await?))
}

async fn subtree(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.business.subtree(&c.principal, &name).await?))
}

async fn sla(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.business.sla(&c.principal, &name).await?))
}

async fn slo(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(name): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.slos.status(&c.principal, &name).await?))
}

async fn impact(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.business.impact(&c.principal, path_id(&id)?).await?))
}
