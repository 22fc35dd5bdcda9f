//! Metric series in their own file (`metrics.redb`) beside the main database: series by
//! tenant + object + metric name, raw samples, and 5-minute and 1-hour aggregates updated as
//! each sample arrives (incremental rollups, no batch job). One writer thread group-commits the
//! samples of many check results; reads run on any thread. At most `MAX_SERIES` series: the
//! samples of a further new series are refused and counted.

use super::StoreError;
use super::codec::{decode, encode};
use super::writer::{Inbox, Writer};
use crate::model::metric::{Agg, Tier};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;
use uuid::Uuid;

pub const FILE: &str = "metrics.redb";
pub const MAX_SERIES: u64 = 100_000;

/// Series by tenant + object + metric name.
const SERIES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("series_by_tenant_object_metric");
/// `series_count`, `next_series_id`.
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counter_by_name");
/// (series id, ms) → value.
const RAW: TableDefinition<(u64, i64), f64> = TableDefinition::new("sample_by_series_ts");
/// An aggregate as stored: (count, sum, min, max, last).
type AggRow = (u64, f64, f64, f64, f64);
/// (series id, bucket start ms) → aggregate.
const FIVE_MINUTES: TableDefinition<(u64, i64), AggRow> =
    TableDefinition::new("agg5m_by_series_bucket");
const ONE_HOUR: TableDefinition<(u64, i64), AggRow> =
    TableDefinition::new("agg1h_by_series_bucket");

/// A series and its points (bucket start or sample ms, aggregate), oldest first.
pub type SeriesPoints = (SeriesInfo, Vec<(i64, Agg)>);

const MAX_BATCH: usize = 20_000;
const CACHE_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub tenant: Uuid,
    pub object: Uuid,
    pub metric: String,
    pub unit: String,
    pub ms: i64,
    pub value: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeriesInfo {
    pub id: u64,
    pub metric: String,
    pub unit: String,
    pub first_ms: i64,
    pub last_ms: i64,
    pub last: f64,
}

enum Msg {
    /// Acknowledged once committed (or refused).
    Samples(Vec<Sample>, oneshot::Sender<()>),
    /// Drops data older than each tier's retention at `now_ms`; acknowledged with the count.
    Prune(i64, oneshot::Sender<Result<u64, StoreError>>),
}

pub struct MetricsStore {
    db: Arc<Database>,
    writer: Writer<Msg>,
    series: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

fn series_key(tenant: Uuid, object: Uuid, metric: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + metric.len());
    k.extend_from_slice(tenant.as_bytes());
    k.extend_from_slice(object.as_bytes());
    k.extend_from_slice(metric.as_bytes());
    k
}

fn agg_of(t: AggRow) -> Agg {
    Agg {
        count: t.0,
        sum: t.1,
        min: t.2,
        max: t.3,
        last: t.4,
    }
}

fn tuple_of(a: &Agg) -> AggRow {
    (a.count, a.sum, a.min, a.max, a.last)
}

fn counter(tx: &WriteTransaction, name: &str) -> Result<u64, StoreError> {
    let t = tx.open_table(COUNTERS).map_err(StoreError::from_redb)?;
    Ok(t.get(name)
        .map_err(StoreError::from_redb)?
        .map_or(0, |v| v.value()))
}

/// Stats for the health endpoint.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsStats {
    pub series: u64,
    pub max_series: u64,
    /// Samples refused because the series cap was reached.
    pub refused_samples: u64,
    /// Sample batches that failed to commit.
    pub failed_batches: u64,
}

impl MetricsStore {
    pub fn open(dir: &Path) -> Result<Arc<MetricsStore>, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(e.to_string()))?;
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        let db = Arc::new(
            builder
                .create(dir.join(FILE))
                .map_err(StoreError::from_open)?,
        );
        let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        tx.open_table(SERIES).map_err(StoreError::from_redb)?;
        tx.open_table(RAW).map_err(StoreError::from_redb)?;
        tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
        tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
        let series = counter(&tx, "series_count")?;
        tx.commit().map_err(StoreError::from_redb)?;
        let (writer, inbox) = Writer::new(1024);
        let store = Arc::new(MetricsStore {
            db,
            writer,
            series: AtomicU64::new(series),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        });
        let worker = store.clone();
        store
            .writer
            .spawn("metrics-writer", move || worker.write_loop(inbox))?;
        Ok(store)
    }

    /// Queues samples for the next group commit and resolves once they are stored; blocks
    /// while the writer is 1024 batches behind (backpressure, never a silent drop). Reads
    /// that begin after this returns wait for them (`settled`).
    pub fn record(&self, samples: Vec<Sample>) -> oneshot::Receiver<()> {
        let (ack, done) = oneshot::channel();
        if self.writer.send(Msg::Samples(samples, ack)).is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        done
    }

    /// Removes what each tier no longer keeps at `now_ms`; resolves with the rows removed.
    pub fn prune(&self, now_ms: i64) -> oneshot::Receiver<Result<u64, StoreError>> {
        let (ack, done) = oneshot::channel();
        let _ = self.writer.send(Msg::Prune(now_ms, ack));
        done
    }

    /// Resolves once every sample batch queued before this call is stored (or failed).
    pub async fn settled(&self) {
        self.writer.settled().await;
    }

    pub fn stats(&self) -> MetricsStats {
        MetricsStats {
            series: self.series.load(Ordering::Relaxed),
            max_series: MAX_SERIES,
            refused_samples: self.refused.load(Ordering::Relaxed),
            failed_batches: self.failed.load(Ordering::Relaxed),
        }
    }

    fn write_loop(&self, mut inbox: Inbox<Msg>) {
        while let Some(first) = inbox.recv() {
            let mut samples = Vec::new();
            let mut acks = Vec::new();
            let mut prune = None;
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                match msg {
                    Msg::Samples(s, ack) => {
                        samples.extend(s);
                        acks.push(ack);
                    }
                    Msg::Prune(now, ack) => {
                        prune = Some((now, ack));
                        break;
                    }
                }
                if samples.len() < MAX_BATCH {
                    next = inbox.try_recv();
                }
            }
            if !samples.is_empty() {
                if let Err(e) = self.commit(&samples) {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %e, samples = samples.len(), "metric samples not stored");
                }
            }
            for ack in acks {
                let _ = ack.send(());
            }
            if let Some((now, ack)) = prune {
                let _ = ack.send(self.remove_expired(now));
            }
            inbox.finished();
        }
    }

    fn commit(&self, samples: &[Sample]) -> Result<(), StoreError> {
        let mut tx = self.db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        let mut count = counter(&tx, "series_count")?;
        let mut next_id = counter(&tx, "next_series_id")?;
        let mut refused = 0;
        {
            let mut series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
            let mut raw = tx.open_table(RAW).map_err(StoreError::from_redb)?;
            let mut five = tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
            let mut hour = tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
            for s in samples {
                let key = series_key(s.tenant, s.object, &s.metric);
                let known: Option<SeriesInfo> = series
                    .get(key.as_slice())
                    .map_err(StoreError::from_redb)?
                    .map(|v| decode(v.value()))
                    .transpose()?;
                let mut info = match known {
                    Some(i) => i,
                    None if count >= MAX_SERIES => {
                        refused += 1;
                        continue;
                    }
                    None => {
                        count += 1;
                        next_id += 1;
                        SeriesInfo {
                            id: next_id,
                            metric: s.metric.clone(),
                            unit: s.unit.clone(),
                            first_ms: s.ms,
                            last_ms: s.ms,
                            last: s.value,
                        }
                    }
                };
                raw.insert((info.id, s.ms), s.value)
                    .map_err(StoreError::from_redb)?;
                for (tier, table) in [(Tier::FiveMinutes, &mut five), (Tier::OneHour, &mut hour)] {
                    let at = (info.id, tier.bucket(s.ms));
                    let agg = table.get(at).map_err(StoreError::from_redb)?.map_or(
                        Agg::of(s.value),
                        |v| {
                            let mut a = agg_of(v.value());
                            a.merge(&Agg::of(s.value));
                            a
                        },
                    );
                    table
                        .insert(at, tuple_of(&agg))
                        .map_err(StoreError::from_redb)?;
                }
                if s.ms >= info.last_ms {
                    info.last_ms = s.ms;
                    info.last = s.value;
                    info.unit.clone_from(&s.unit);
                }
                series
                    .insert(key.as_slice(), encode(&info)?.as_slice())
                    .map_err(StoreError::from_redb)?;
            }
            let mut counters = tx.open_table(COUNTERS).map_err(StoreError::from_redb)?;
            counters
                .insert("series_count", count)
                .map_err(StoreError::from_redb)?;
            counters
                .insert("next_series_id", next_id)
                .map_err(StoreError::from_redb)?;
        }
        tx.commit().map_err(StoreError::from_redb)?;
        self.series.store(count, Ordering::Relaxed);
        self.refused.fetch_add(refused, Ordering::Relaxed);
        Ok(())
    }

    fn remove_expired(&self, now_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self.db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        let last_id = counter(&tx, "next_series_id")?;
        let mut removed = 0u64;
        {
            let mut raw = tx.open_table(RAW).map_err(StoreError::from_redb)?;
            let mut five = tx.open_table(FIVE_MINUTES).map_err(StoreError::from_redb)?;
            let mut hour = tx.open_table(ONE_HOUR).map_err(StoreError::from_redb)?;
            let cutoff = |tier: Tier| now_ms - tier.retention_ms();
            for id in 1..=last_id {
                raw.retain_in((id, i64::MIN)..(id, cutoff(Tier::Raw)), |_, _| {
                    removed += 1;
                    false
                })
                .map_err(StoreError::from_redb)?;
                for (tier, table) in [(Tier::FiveMinutes, &mut five), (Tier::OneHour, &mut hour)] {
                    table
                        .retain_in((id, i64::MIN)..(id, cutoff(tier)), |_, _| {
                            removed += 1;
                            false
                        })
                        .map_err(StoreError::from_redb)?;
                }
            }
        }
        tx.commit().map_err(StoreError::from_redb)?;
        Ok(removed)
    }

    /// The series of one object, by metric name.
    pub fn series_of(&self, tenant: Uuid, object: Uuid) -> Result<Vec<SeriesInfo>, StoreError> {
        let tx = self.db.begin_read().map_err(StoreError::from_redb)?;
        let t = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
        let lo = series_key(tenant, object, "");
        let mut hi = lo.clone();
        hi.push(0xff);
        let mut out = Vec::new();
        for row in t
            .range(lo.as_slice()..hi.as_slice())
            .map_err(StoreError::from_redb)?
        {
            let (_, v) = row.map_err(StoreError::from_redb)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    /// The points of one series in `[from_ms, to_ms)` from one tier, oldest first (`None`:
    /// no such series).
    pub fn points(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        tier: Tier,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<SeriesPoints>, StoreError> {
        let tx = self.db.begin_read().map_err(StoreError::from_redb)?;
        let series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
        let Some(info) = series
            .get(series_key(tenant, object, metric).as_slice())
            .map_err(StoreError::from_redb)?
            .map(|v| decode::<SeriesInfo>(v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        let range = (info.id, tier.bucket(from_ms))..(info.id, to_ms);
        let mut out = Vec::new();
        match tier {
            Tier::Raw => {
                let t = tx.open_table(RAW).map_err(StoreError::from_redb)?;
                for row in t.range(range).map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    out.push((k.value().1, Agg::of(v.value())));
                }
            }
            Tier::FiveMinutes | Tier::OneHour => {
                let def = if tier == Tier::FiveMinutes {
                    FIVE_MINUTES
                } else {
                    ONE_HOUR
                };
                let t = tx.open_table(def).map_err(StoreError::from_redb)?;
                for row in t.range(range).map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    out.push((k.value().1, agg_of(v.value())));
                }
            }
        }
        Ok(Some((info, out)))
    }

    /// Commits what is queued and stops the writer thread.
    pub fn close(&self) {
        self.writer.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metric::DAY_MS;

    #[tokio::test]
    async fn samples_roll_up_and_expire_per_tier() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetricsStore::open(dir.path()).unwrap();
        let (tenant, object) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = 1_000 * DAY_MS;
        let sample = |ms: i64, value: f64| Sample {
            tenant,
            object,
            metric: "rta".into(),
            unit: "ms".into(),
            ms,
            value,
        };
        // Four samples one minute apart in one 5-minute bucket, one in the next.
        let first = store.record((0..4).map(|i| sample(now + i * 60_000, i as f64)).collect());
        store
            .record(vec![sample(now + 300_000, 10.0)])
            .await
            .unwrap();
        first.await.unwrap();
        let (info, raw) = store
            .points(tenant, object, "rta", Tier::Raw, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!((info.last, info.unit.as_str()), (10.0, "ms"));
        assert_eq!(raw.len(), 5);
        let (_, five) = store
            .points(tenant, object, "rta", Tier::FiveMinutes, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!(five.len(), 2);
        assert_eq!(
            (five[0].1.count, five[0].1.sum, five[0].1.max),
            (4, 6.0, 3.0)
        );
        let (_, hour) = store
            .points(tenant, object, "rta", Tier::OneHour, now, now + DAY_MS)
            .unwrap()
            .unwrap();
        assert_eq!((hour.len(), hour[0].1.count, hour[0].1.last), (1, 5, 10.0));
        assert!(
            store
                .points(tenant, object, "pl", Tier::Raw, 0, i64::MAX)
                .unwrap()
                .is_none()
        );
        assert_eq!(store.series_of(tenant, object).unwrap().len(), 1);
        // 31 days on, raw samples are gone and the aggregates stay.
        store.prune(now + 31 * DAY_MS).await.unwrap().unwrap();
        let raw = store
            .points(tenant, object, "rta", Tier::Raw, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        let five = store
            .points(tenant, object, "rta", Tier::FiveMinutes, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        assert_eq!((raw.len(), five.len()), (0, 2));
        store.prune(now + 401 * DAY_MS).await.unwrap().unwrap();
        let five = store
            .points(tenant, object, "rta", Tier::FiveMinutes, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        let hour = store
            .points(tenant, object, "rta", Tier::OneHour, 0, i64::MAX)
            .unwrap()
            .unwrap()
            .1;
        assert_eq!((five.len(), hour.len()), (0, 1));
        store.close();
    }

    #[tokio::test]
    async fn the_series_cap_refuses_new_series_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetricsStore::open(dir.path()).unwrap();
        let tenant = Uuid::from_u128(1);
        let samples: Vec<Sample> = (0..=MAX_SERIES)
            .map(|i| Sample {
                tenant,
                object: Uuid::from_u128(u128::from(i / 4)),
                metric: format!("m{}", i % 4),
                unit: String::new(),
                ms: 1,
                value: 1.0,
            })
            .collect();
        store.record(samples).await.unwrap();
        let stats = store.stats();
        assert_eq!((stats.series, stats.refused_samples), (MAX_SERIES, 1));
        // Known series still take samples.
        store
            .record(vec![Sample {
                tenant,
                object: Uuid::from_u128(0),
                metric: "m0".into(),
                unit: String::new(),
                ms: 2,
                value: 2.0,
            }])
            .await
            .unwrap();
        assert_eq!(store.stats().refused_samples, 1);
        store.close();
        drop(store);
        let reopened = MetricsStore::open(dir.path()).unwrap();
        assert_eq!(
            reopened.stats().series,
            MAX_SERIES,
            "the count survives a restart"
        );
    }
}
