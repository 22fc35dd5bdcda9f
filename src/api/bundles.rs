//! Bundle routes: plan, apply, export (SPEC 4.3).

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::extract::{ApiQuery, read_body};
use super::router::Route;
use super::schemas;
use crate::inventory::bundles::BundleSource;
use crate::model::bundle::BUNDLE_LIMIT;
use crate::model::bundle::PlanResult;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde::Deserialize;

/// The bundle format, for the OpenAPI descriptions.
macro_rules! bundle_format {
    () => {
        "Multi-document YAML (JSON accepted, also as an array). Each document: `kind` (`host`, `service` or a configuration kind such as `templates`), `name`, `host` (services), `body` (hosts and services: `folder`, `labels`, `spec`; configuration kinds: their fields). At most 8 MiB (413 `svc:bundle/size`). Validation problems of all documents are joined with `; ` in one 422 `svc:validation/bundle`."
    };
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/config/bundles:plan", plan).permission("objects:read").doc(
            "config",
            "Dry-run diff of a bundle",
            concat!(
                "`{plan: [{action: create|update|unchanged|delete, kind, name, host?}], applyToken, warnings}`; `prune=true` plans deleting what the bundle lacks. The token applies exactly this plan for 15 minutes (plans are kept up to 32 MiB of bundles in all; past it the oldest tokens are forgotten). Plans, applies and exports run at most 2 at a time; a request that waits 10 s for its turn gets 503 `svc:bundle/busy` with `Retry-After: 5`. ",
                bundle_format!()
            ),
        )
            .query::<Flags>().text_body("application/yaml").ok::<PlanResult>(),
        Route::post("/api/v1/config/bundles:apply", apply).permission("config:write").doc(
            "config",
            "Apply a bundle",
            "The bundle as the body, or `{\"applyToken\": \"...\"}` from `:plan` (409 `svc:bundle/token` when unknown, expired or of another tenant, or when the state changed so that the same bundle now plans differently). `dryRun=true` only plans; `prune=true` deletes what the bundle lacks. All or nothing: a failing document is 422 `svc:bundle/apply` naming it, and nothing changes. Answers the plan with `applied`.",
        )
            .query::<Flags>().text_body("application/yaml").ok::<PlanResult>(),
        Route::get("/api/v1/config/bundles:export", export).permission("objects:read").doc(
            "config",
            "Export configuration as bundle YAML",
            "`application/yaml`: every configuration document, host and service of the tenant, without ids, times or versions; applying it to an empty instance and exporting again gives the same text.",
        )
            .answers_as(200, "application/yaml", schemas::literal(schemas::yaml)),
    ]
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct Flags {
    prune: Option<String>,
    dry_run: Option<String>,
}

fn on(flag: &Option<String>) -> bool {
    matches!(flag.as_deref(), Some("true" | "1"))
}

async fn text(req: Request) -> Result<String, Problem> {
    let body = read_body(req, BUNDLE_LIMIT, Code::BundleSize).await?;
    String::from_utf8(body.to_vec())
        .map_err(|_| Problem::validation("bundle", "the bundle is not UTF-8"))
}

async fn plan(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(f): ApiQuery<Flags>,
    req: Request,
) -> Result<impl IntoResponse, Problem> {
    let _slot = st.inventory.bundle_slot().await?;
    let text = text(req).await?;
    Ok(Json(
        st.inventory
            .plan_bundle(&c.principal, &text, on(&f.prune))
            .await?,
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokenBody {
    apply_token: String,
}

async fn apply(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(f): ApiQuery<Flags>,
    req: Request,
) -> Result<impl IntoResponse, Problem> {
    let _slot = st.inventory.bundle_slot().await?;
    let text = text(req).await?;
    let source = match serde_json::from_str::<TokenBody>(&text) {
        Ok(t) => BundleSource::Token(t.apply_token),
        Err(_) => BundleSource::Text(text),
    };
    Ok(Json(
        st.inventory
            .apply_bundle(&c.principal, &c.actor, source, on(&f.prune), on(&f.dry_run))
            .await?,
    ))
}

async fn export(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    let _slot = st.inventory.bundle_slot().await?;
    let yaml = st.inventory.export_bundle(&c.principal).await?;
    Ok(([(CONTENT_TYPE, "application/yaml")], yaml))
}
