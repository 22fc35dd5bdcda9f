//! Metric queries over the series the pipeline records from performance data: one series of
//! an object over a time range at an automatically chosen resolution, the series an object
//! has, and the hourly sweep that drops what each tier no longer keeps.

use super::catalog::Catalog;
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::health::MetricsStats;
use crate::model::metric::{Agg, AggFn, Tier, plan};
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::metrics::{MetricsStore, Prune};
use crate::store::{Store, StoreError, blocking};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub const DEFAULT_MAX_POINTS: u32 = 500;
pub const MAX_POINTS: u32 = 10_000;
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The object has no series of that name.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> MetricError {
    MetricError::Invalid {
        field,
        message: message.into(),
    }
}

/// `POST /api/v1/metrics/query`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricQuery {
    #[serde(default)]
    pub object_id: Option<Uuid>,
    #[serde(default)]
    pub metric: Option<String>,
    pub from: Timestamp,
    pub to: Timestamp,
    #[serde(default)]
    pub max_points: Option<u32>,
    #[serde(default)]
    pub step_seconds: Option<u32>,
    #[serde(default)]
    pub agg: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Point {
    pub t: Timestamp,
    pub v: f64,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SeriesPoints {
    pub object_id: Uuid,
    pub metric: String,
    pub unit: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// `raw`, `5m` or `1h`: the tier the points were read from.
    pub resolution: Tier,
    /// Width of each point's bucket; 0 for raw samples as recorded.
    pub step_seconds: i64,
    pub agg: AggFn,
    pub points: Vec<Point>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SeriesView {
    pub metric: String,
    pub unit: String,
    pub first_at: Option<Timestamp>,
    pub last_at: Option<Timestamp>,
    pub last_value: f64,
}

/// Groups points into buckets of `step_ms` (aligned to the epoch).
fn regroup(points: Vec<(i64, Agg)>, step_ms: i64) -> Vec<(i64, Agg)> {
    let mut out: Vec<(i64, Agg)> = Vec::new();
    for (ms, agg) in points {
        let bucket = ms - ms.rem_euclid(step_ms.max(1));
        match out.last_mut() {
            Some((b, a)) if *b == bucket => a.merge(&agg),
            _ => out.push((bucket, agg)),
        }
    }
    out
}

pub struct MetricQueries {
    store: Arc<Store>,
    metrics: Arc<MetricsStore>,
    clock: SharedClock,
}

impl MetricQueries {
    pub fn new(store: Arc<Store>, metrics: Arc<MetricsStore>, clock: SharedClock) -> Arc<Self> {
        Arc::new(Self {
            store,
            metrics,
            clock,
        })
    }

    pub fn stats(&self) -> MetricsStats {
        self.metrics.stats()
    }

    /// One series over `[from, to)`. Resolution: the finest tier that still holds `from` and
    /// needs no more than `maxPoints` (default 500, at most 10,000) points of at least
    /// `stepSeconds`; points are grouped further with `agg` (default avg) when the tier is
    /// finer than that step.
    pub async fn query(&self, p: &Principal, q: MetricQuery) -> Result<SeriesPoints, MetricError> {
        let object_id = q
            .object_id
            .ok_or_else(|| invalid("objectId", "objectId is required"))?;
        let metric = q
            .metric
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("metric", "metric is required"))?;
        if q.to <= q.from {
            return Err(invalid("window", "to must be after from"));
        }
        let max_points = q.max_points.unwrap_or(DEFAULT_MAX_POINTS);
        if !(1..=MAX_POINTS).contains(&max_points) {
            return Err(invalid(
                "maxPoints",
                format!("maxPoints must be 1..{MAX_POINTS}"),
            ));
        }
        let agg = match &q.agg {
            Some(a) => a.parse::<AggFn>().map_err(|e| invalid("agg", e))?,
            None => AggFn::Avg,
        };
        self.store.object(p.tenant, object_id).await?;
        let (from, to) = (q.from.as_millis(), q.to.as_millis());
        let min_step = i64::from(q.step_seconds.unwrap_or(0)) * 1000;
        let (tier, step) = plan(self.clock.now().as_millis(), from, to, max_points, min_step);
        self.metrics.settled().await;
        let metrics = self.metrics.clone();
        let (tenant, name) = (p.tenant, metric.clone());
        let found =
            blocking(move || metrics.points(tenant, object_id, &name, tier, from, to)).await?;
        let Some((info, mut points)) = found else {
            return Err(MetricError::NotFound);
        };
        let regroup_raw = tier == Tier::Raw
            && (min_step > 0 || points.len() > usize::try_from(max_points).unwrap_or(usize::MAX));
        let step = if tier != Tier::Raw || regroup_raw {
            if step > tier.step_ms() {
                points = regroup(points, step);
            }
            step
        } else {
            0
        };
        Ok(SeriesPoints {
            object_id,
            metric,
            unit: info.unit,
            from: q.from,
            to: q.to,
            resolution: tier,
            step_seconds: step / 1000,
            agg,
            points: points
                .into_iter()
                .filter_map(|(ms, a)| {
                    Some(Point {
                        t: Timestamp::from_millis(ms)?,
                        v: a.value(agg),
                    })
                })
                .collect(),
        })
    }

    /// The series of one object.
    pub async fn series(
        &self,
        p: &Principal,
        object_id: Uuid,
    ) -> Result<Vec<SeriesView>, StoreError> {
        self.store.object(p.tenant, object_id).await?;
        self.metrics.settled().await;
        let metrics = self.metrics.clone();
        let tenant = p.tenant;
        let series = blocking(move || metrics.series_of(tenant, object_id)).await?;
        Ok(series
            .into_iter()
            .map(|s| SeriesView {
                metric: s.metric,
                unit: s.unit,
                first_at: Timestamp::from_millis(s.first_ms),
                last_at: Timestamp::from_millis(s.last_ms),
                last_value: s.last,
            })
            .collect())
    }
}

/// Drops expired samples and aggregates every hour.
pub struct MetricsRetention {
    pub metrics: Arc<MetricsStore>,
    pub catalog: Arc<Catalog>,
    pub clock: SharedClock,
}

impl Worker for MetricsRetention {
    fn name(&self) -> &'static str {
        "metrics-retention"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            // Series of objects that no longer exist go too; without a catalog, none do. The
            // time is read first: series newer than it are kept whatever the catalog says.
            let now_ms = self.clock.now().as_millis();
            let live = match self.catalog.snapshot().await {
                Ok(snapshot) => Some(
                    snapshot
                        .tenants()
                        .flat_map(|(tenant, c)| c.entries.iter().map(|e| (*tenant, e.object.id)))
                        .collect(),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "metric series of deleted objects kept this time");
                    None
                }
            };
            let prune = Prune { now_ms, live };
            match self.metrics.prune(prune).await {
                Ok(Ok(removed)) if removed > 0 => {
                    tracing::info!(removed, "expired metric samples removed");
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "metric retention failed"),
                _ => {}
            }
            Wait::For(PRUNE_EVERY)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regrouping_merges_buckets() {
        let points = vec![(0, Agg::of(1.0)), (400, Agg::of(3.0)), (1000, Agg::of(5.0))];
        let out = regroup(points, 1000);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].1.value(AggFn::Avg), 2.0);
        assert_eq!(out[1], (1000, Agg::of(5.0)));
    }
}
