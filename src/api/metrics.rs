//! Metric series: the query with automatic resolution and an object's series list.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, path_id};
use super::pagination::Page;
use super::router::Route;
use crate::monitor::metrics::MetricQuery;
use crate::monitor::metrics::{SeriesPoints, SeriesView};
use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/metrics/query", query).permission("metrics:read").tool("metrics_query", "Query stored metric samples (the body of POST /api/v1/metrics/query).", &[("query", "string", "the series, e.g. rta{host=\"web1\"}"), ("from", "string", "RFC 3339 time"), ("to", "string", "RFC 3339 time"), ("step", "string", "bucket width, e.g. 5m")]).doc(
            "metrics",
            "Query one metric series",
            "Body `{objectId, metric, from, to, maxPoints?, stepSeconds?, agg?}`; `metric` is a performance-data label of the object's check output. 200 `{objectId, metric, unit, from, to, resolution, stepSeconds, agg, points: [{t, v}]}`. Resolution is automatic: raw samples (kept 30 days) when `from` is within 30 days and the range needs buckets under 5 minutes, else 5-minute aggregates (400 days), else 1-hour aggregates (5 years); the bucket is the range divided by `maxPoints` (default 500, at most 10,000), at least `stepSeconds`, rounded up to the tier's width. Points in one bucket are combined with `agg`: avg (default), min, max, sum, last or count. Raw samples are returned as recorded (`stepSeconds` 0) unless a step is asked for or they outnumber `maxPoints`. 404 for an unknown object or series; 422 `svc:validation/objectId|metric|window|maxPoints|agg`. Series: at most 100,000; samples of a further new series are refused and counted in `/api/v1/system/health` (`tsdb.refusedSamples`).",
        )
            .body::<MetricQuery>().ok::<SeriesPoints>(),
        Route::get("/api/v1/objects/{id}/metrics", series).permission("metrics:read").doc(
            "objects",
            "List the metric series of an object",
            "`{items: [{metric, unit, firstAt, lastAt, lastValue}]}`, one per performance-data label seen in the object's results.",
        )
            .ok::<Page<SeriesView>>(),
    ]
}

async fn query(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(q): ApiJson<MetricQuery>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.metric_queries.query(&c.principal, q).await?))
}

async fn series(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(
        st.metric_queries
            .series(&c.principal, path_id(&raw)?)
            .await?,
    )))
}
