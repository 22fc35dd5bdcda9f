//! The metric store on PostgreSQL: the metric file's tables as columns (`metric_series`,
//! `metric_raw`, `metric_5m`, `metric_1h`), so every process that serves the database sees one
//! history. A batch of samples is one transaction of a few statements: new series, raw
//! samples, both tiers' aggregates folded in by `ON CONFLICT … DO UPDATE`, and each series'
//! last value. Nothing is filed late: the database's own write-ahead log does what the file's
//! journal does for an SD card.

use super::{
    AggRow, COUNTERS, FIVE_MINUTES, MAX_SERIES, ONE_HOUR, Point, Prune, RAW, SERIES, Sample,
    SeriesIndex, SeriesInfo, SeriesPoints, UNFILED, owner, rollup, series_key,
};
use crate::model::metric::{Agg, Tier};
use crate::store::StoreError;
use crate::store::codec::{decode, encode};
use crate::store::kv::pg::{Conn, Connections, Target};
use redb::{ReadableDatabase, ReadableTable};
use std::collections::HashMap;
use std::path::Path;
use uuid::Uuid;

/// Rows per round trip while copying a table.
const PAGE: i64 = 10_000;

const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

pub(super) struct Tables {
    db: Connections,
}

/// The aggregate table of a tier (raw samples have none).
fn aggregates(tier: Tier) -> &'static str {
    match tier {
        Tier::OneHour => "metric_1h",
        Tier::FiveMinutes | Tier::Raw => "metric_5m",
    }
}

fn id_of(id: i64) -> u64 {
    u64::try_from(id).unwrap_or_default()
}

fn sql_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

const SERIES_COLUMNS: &str = "s.id, s.metric, s.unit, s.first_ms, s.last_ms, s.last";

/// A series from the columns `SERIES_COLUMNS` name, at `at` onwards.
fn info(row: &tokio_postgres::Row, at: usize) -> SeriesInfo {
    SeriesInfo {
        id: id_of(row.get(at)),
        metric: row.get(at + 1),
        unit: row.get(at + 2),
        first_ms: row.get(at + 3),
        last_ms: row.get(at + 4),
        last: row.get(at + 5),
    }
}

/// An aggregate from (count, sum, min, max, last) columns at `at` onwards.
fn agg(row: &tokio_postgres::Row, at: usize) -> Agg {
    Agg {
        count: id_of(row.get(at)),
        sum: row.get(at + 1),
        min: row.get(at + 2),
        max: row.get(at + 3),
        last: row.get(at + 4),
    }
}

/// Aggregates as the columns of one `unnest`.
#[derive(Default)]
struct AggColumns {
    series: Vec<i64>,
    buckets: Vec<i64>,
    counts: Vec<i64>,
    sums: Vec<f64>,
    mins: Vec<f64>,
    maxes: Vec<f64>,
    lasts: Vec<f64>,
}

impl AggColumns {
    fn push(&mut self, series: u64, bucket: i64, a: &Agg) {
        self.series.push(sql_id(series));
        self.buckets.push(bucket);
        self.counts.push(sql_id(a.count));
        self.sums.push(a.sum);
        self.mins.push(a.min);
        self.maxes.push(a.max);
        self.lasts.push(a.last);
    }

    /// Adds these to the tier's table: a bucket stored before folds them in, as `Agg::merge`
    /// folds later samples (the stored ones are older).
    fn upsert(&self, c: &mut Conn, table: &str) -> Result<(), StoreError> {
        if self.series.is_empty() {
            return Ok(());
        }
        c.execute(
            &format!(
                "INSERT INTO {table} AS t (series, bucket, count, sum, min, max, last) \
                 SELECT * FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[]) \
                 ON CONFLICT (series, bucket) DO UPDATE SET count = t.count + EXCLUDED.count, \
                 sum = t.sum + EXCLUDED.sum, min = LEAST(t.min, EXCLUDED.min), \
                 max = GREATEST(t.max, EXCLUDED.max), last = EXCLUDED.last"
            ),
            &[
                &self.series,
                &self.buckets,
                &self.counts,
                &self.sums,
                &self.mins,
                &self.maxes,
                &self.lasts,
            ],
        )
        .map(drop)
    }
}

/// The series a batch brings that the index does not know yet: the first sample of each
/// (its first time and value), with the unit of its last.
#[derive(Default)]
struct NewSeries<'a> {
    first: Vec<&'a Sample>,
    units: Vec<&'a str>,
    by_key: HashMap<Vec<u8>, usize>,
}

impl Tables {
    /// Connects nothing yet: a database that is down is the store's to report.
    pub(super) fn open(target: &Target) -> Result<Tables, StoreError> {
        Ok(Tables {
            db: Connections::open(target)?,
        })
    }

    /// Inserts the new series (another process may have made one meanwhile: then its id);
    /// their keys and ids.
    fn create(c: &mut Conn, new: &NewSeries<'_>) -> Result<HashMap<Vec<u8>, u64>, StoreError> {
        if new.first.is_empty() {
            return Ok(HashMap::new());
        }
        let tenants: Vec<Uuid> = new.first.iter().map(|s| s.tenant).collect();
        let objects: Vec<Uuid> = new.first.iter().map(|s| s.object).collect();
        let metrics: Vec<&str> = new.first.iter().map(|s| s.metric.as_str()).collect();
        let times: Vec<i64> = new.first.iter().map(|s| s.ms).collect();
        let values: Vec<f64> = new.first.iter().map(|s| s.value).collect();
        let rows = c.query(
            "INSERT INTO metric_series (tenant, object, metric, unit, first_ms, last_ms, last) \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[], $5::int8[], $6::float8[]) \
             ON CONFLICT (tenant, object, metric) DO UPDATE SET unit = EXCLUDED.unit \
             RETURNING id, tenant, object, metric",
            &[&tenants, &objects, &metrics, &new.units, &times, &values],
        )?;
        Ok(rows
            .iter()
            .map(|r| (series_key(r.get(1), r.get(2), r.get(3)), id_of(r.get(0))))
            .collect())
    }

    /// Raw rows, aggregates and last values of points sorted by (series, time).
    fn store_points(c: &mut Conn, points: &[Point]) -> Result<(), StoreError> {
        if points.is_empty() {
            return Ok(());
        }
        // One row per (series, ms): a statement may not update a row twice.
        let (mut series, mut times, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for same in points.chunk_by(|a, b| (a.series, a.ms) == (b.series, b.ms)) {
            let p = same[same.len() - 1];
            series.push(sql_id(p.series));
            times.push(p.ms);
            values.push(p.value);
        }
        c.execute(
            "INSERT INTO metric_raw (series, ms, value) \
             SELECT * FROM unnest($1::int8[], $2::int8[], $3::float8[]) \
             ON CONFLICT (series, ms) DO UPDATE SET value = EXCLUDED.value",
            &[&series, &times, &values],
        )?;
        let (mut five, mut hour) = (AggColumns::default(), AggColumns::default());
        let (mut last_ids, mut last_times, mut last_values) = (Vec::new(), Vec::new(), Vec::new());
        for run in points.chunk_by(|a, b| a.series == b.series) {
            let id = run[0].series;
            for (tier, columns) in [(Tier::FiveMinutes, &mut five), (Tier::OneHour, &mut hour)] {
                for (bucket, a) in rollup(run, tier) {
                    columns.push(id, bucket, &a);
                }
            }
            let newest = run[run.len() - 1];
            last_ids.push(sql_id(id));
            last_times.push(newest.ms);
            last_values.push(newest.value);
        }
        five.upsert(c, aggregates(Tier::FiveMinutes))?;
        hour.upsert(c, aggregates(Tier::OneHour))?;
        c.execute(
            "UPDATE metric_series s SET last_ms = u.ms, last = u.value \
             FROM unnest($1::int8[], $2::int8[], $3::float8[]) AS u(id, ms, value) \
             WHERE s.id = u.id AND u.ms >= s.last_ms",
            &[&last_ids, &last_times, &last_values],
        )
        .map(drop)
    }

    /// Removes what each tier no longer keeps and the series of deleted objects, in one
    /// transaction; the rows removed.
    pub(super) fn remove_expired(
        &self,
        p: &Prune,
        index: &mut SeriesIndex,
    ) -> Result<u64, StoreError> {
        let orphans: Vec<i64> = index
            .keys
            .iter()
            .filter(|(_, k)| {
                owner(k).is_some_and(|o| p.live.as_ref().is_some_and(|l| !l.contains(&o)))
            })
            .map(|(id, _)| sql_id(*id))
            .collect();
        let all: Vec<i64> = index.keys.keys().map(|id| sql_id(*id)).collect();
        let (removed, gone) = self.db.with(|c| {
            c.transaction("BEGIN", |c| {
                let gone: Vec<i64> = c
                    .query(
                        "DELETE FROM metric_series WHERE id = ANY($1) AND first_ms < $2 RETURNING id",
                        &[&orphans, &p.now_ms],
                    )?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let mut removed = 0;
                for (table, key, tier) in [
                    ("metric_raw", "ms", Tier::Raw),
                    (aggregates(Tier::FiveMinutes), "bucket", Tier::FiveMinutes),
                    (aggregates(Tier::OneHour), "bucket", Tier::OneHour),
                ] {
                    // Series by series, so each delete reads one range of the primary key.
                    removed += c.execute(
                        &format!(
                            "DELETE FROM {table} t USING unnest($1::int8[]) AS s(id) \
                             WHERE t.series = s.id AND t.{key} < $2"
                        ),
                        &[&all, &(p.now_ms - tier.retention_ms())],
                    )?;
                    removed += c.execute(
                        &format!("DELETE FROM {table} WHERE series = ANY($1)"),
                        &[&gone],
                    )?;
                }
                Ok((removed, gone))
            })
        })?;
        for id in gone {
            if let Some(key) = index.keys.remove(&id_of(id)) {
                index.by_key.remove(&key);
            }
        }
        Ok(removed)
    }

    /// Writes the tables into a metric file at `path`, as a data directory keeps it, from one
    /// snapshot of the database (a backup).
    pub(super) fn write_file(&self, path: &Path) -> Result<(), StoreError> {
        let file = redb::Database::create(path).map_err(StoreError::from_open)?;
        let tx = file.begin_write().map_err(StoreError::from_redb)?;
        self.db.with(|c| {
            c.transaction(SNAPSHOT, |c| {
                let mut last_id = 0;
                let mut series = tx.open_table(SERIES).map_err(StoreError::from_redb)?;
                let rows = c.query(
                    &format!("SELECT s.tenant, s.object, {SERIES_COLUMNS} FROM metric_series s"),
                    &[],
                )?;
                for r in &rows {
                    let info = info(r, 2);
                    last_id = last_id.max(info.id);
                    series
                        .insert(
                            series_key(r.get(0), r.get(1), &info.metric).as_slice(),
                            encode(&info)?.as_slice(),
                        )
                        .map_err(StoreError::from_redb)?;
                }
                tx.open_table(COUNTERS)
                    .map_err(StoreError::from_redb)?
                    .insert("next_series_id", last_id)
                    .map_err(StoreError::from_redb)?;
                tx.open_table(UNFILED).map_err(StoreError::from_redb)?;
                let mut raw = tx.open_table(RAW).map_err(StoreError::from_redb)?;
                each_page(c, "metric_raw", "ms", "value", |r| {
                    raw.insert((id_of(r.get(0)), r.get::<_, i64>(1)), r.get::<_, f64>(2))
                        .map(drop)
                        .map_err(StoreError::from_redb)
                })?;
                for (tier, def) in [(Tier::FiveMinutes, FIVE_MINUTES), (Tier::OneHour, ONE_HOUR)] {
                    let mut t = tx.open_table(def).map_err(StoreError::from_redb)?;
                    let columns = "count, sum, min, max, last";
                    each_page(c, aggregates(tier), "bucket", columns, |r| {
                        t.insert(
                            (id_of(r.get(0)), r.get::<_, i64>(1)),
                            super::tuple_of(&agg(r, 2)),
                        )
                        .map(drop)
                        .map_err(StoreError::from_redb)
                    })?;
                }
                Ok(())
            })
        })?;
        tx.commit().map_err(StoreError::from_redb)
    }
}

/// Runs `each` on every row of `table` (`series`, `key`, then `columns`), a page at a time in
/// key order.
fn each_page(
    c: &mut Conn,
    table: &str,
    key: &str,
    columns: &str,
    mut each: impl FnMut(&tokio_postgres::Row) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let sql = format!(
        "SELECT series, {key}, {columns} FROM {table} WHERE (series, {key}) > ($1, $2) \
         ORDER BY series, {key} LIMIT $3"
    );
    let mut after = (i64::MIN, i64::MIN);
    loop {
        let rows = c.query(&sql, &[&after.0, &after.1, &PAGE])?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = (last.get(0), last.get(1));
        for r in &rows {
            each(r)?;
        }
    }
}

/// Copies the metric file of `dir` into the tables of `target` (`svc migrate`), its ids kept;
/// the number of series copied. The file's unfiled samples are filed first.
pub(in crate::store) fn copy_file(dir: &Path, target: &Target) -> Result<u64, StoreError> {
    if !dir.join(super::FILE).exists() {
        return Ok(0);
    }
    super::MetricsStore::open(dir)?.close();
    let file = redb::Database::open(dir.join(super::FILE)).map_err(StoreError::from_open)?;
    let from = file.begin_read().map_err(StoreError::from_redb)?;
    let db = Connections::open(target)?;
    db.with(|c| {
        c.transaction("BEGIN", |c| {
            let mut copied = 0;
            let series = from.open_table(SERIES).map_err(StoreError::from_redb)?;
            for row in series.iter().map_err(StoreError::from_redb)? {
                let (k, v) = row.map_err(StoreError::from_redb)?;
                let info: SeriesInfo = decode(v.value())?;
                let (tenant, object) = owner(k.value())
                    .ok_or_else(|| StoreError::Corrupt("a metric series key is cut short".into()))?;
                c.execute(
                    "INSERT INTO metric_series (id, tenant, object, metric, unit, first_ms, last_ms, last) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        &sql_id(info.id),
                        &tenant,
                        &object,
                        &info.metric,
                        &info.unit,
                        &info.first_ms,
                        &info.last_ms,
                        &info.last,
                    ],
                )?;
                copied += 1;
            }
            c.batch(
                "SELECT setval(pg_get_serial_sequence('metric_series', 'id'), \
                 (SELECT coalesce(max(id), 0) + 1 FROM metric_series), false)",
            )?;
            let raw = from.open_table(RAW).map_err(StoreError::from_redb)?;
            let mut page: Vec<Point> = Vec::new();
            for row in raw.iter().map_err(StoreError::from_redb)? {
                let (k, v) = row.map_err(StoreError::from_redb)?;
                let (series, ms) = k.value();
                page.push(Point {
                    series,
                    ms,
                    value: v.value(),
                });
                if page.len() as i64 == PAGE {
                    insert_raw(c, &page)?;
                    page.clear();
                }
            }
            insert_raw(c, &page)?;
            for (tier, def) in [(Tier::FiveMinutes, FIVE_MINUTES), (Tier::OneHour, ONE_HOUR)] {
                let t = from.open_table(def).map_err(StoreError::from_redb)?;
                let mut columns = AggColumns::default();
                for row in t.iter().map_err(StoreError::from_redb)? {
                    let (k, v) = row.map_err(StoreError::from_redb)?;
                    let (series, bucket) = k.value();
                    let a: AggRow = v.value();
                    columns.push(series, bucket, &super::agg_of(a));
                    if columns.series.len() as i64 == PAGE {
                        columns.upsert(c, aggregates(tier))?;
                        columns = AggColumns::default();
                    }
                }
                columns.upsert(c, aggregates(tier))?;
            }
            Ok(copied)
        })
    })
}

fn insert_raw(c: &mut Conn, points: &[Point]) -> Result<(), StoreError> {
    let series: Vec<i64> = points.iter().map(|p| sql_id(p.series)).collect();
    let times: Vec<i64> = points.iter().map(|p| p.ms).collect();
    let values: Vec<f64> = points.iter().map(|p| p.value).collect();
    c.execute(
        "INSERT INTO metric_raw (series, ms, value) SELECT * FROM unnest($1::int8[], $2::int8[], $3::float8[])",
        &[&series, &times, &values],
    )
    .map(drop)
}
impl super::SeriesStore for Tables {
    /// The series index, read once as the store opens.
    fn load(&self) -> Result<SeriesIndex, StoreError> {
        let rows = self.db.with(|c| {
            c.query(
                "SELECT id, tenant, object, metric, unit FROM metric_series",
                &[],
            )
        })?;
        let mut index = SeriesIndex::default();
        for r in rows {
            let id = id_of(r.get(0));
            let key = series_key(r.get(1), r.get(2), r.get(3));
            index.keys.insert(id, key.clone());
            index.by_key.insert(key, (id, r.get(4)));
        }
        Ok(index)
    }

    /// Stores one batch in one transaction: new series up to the cap, raw samples (a later
    /// sample of the same millisecond replaces an earlier), both tiers' aggregates and each
    /// series' last value. The samples the cap refused.
    fn commit(&self, samples: &[Sample], index: &mut SeriesIndex) -> Result<u64, StoreError> {
        let mut new = NewSeries::default();
        let mut units: HashMap<u64, &str> = HashMap::new();
        let mut refused = 0;
        let keys: Vec<Vec<u8>> = samples
            .iter()
            .map(|s| series_key(s.tenant, s.object, &s.metric))
            .collect();
        for (s, key) in samples.iter().zip(&keys) {
            if let Some((id, _)) = index.by_key.get(key) {
                units.insert(*id, &s.unit);
            } else if let Some(at) = new.by_key.get(key) {
                new.units[*at] = &s.unit;
            } else if (index.by_key.len() + new.first.len()) as u64 >= MAX_SERIES {
                refused += 1;
            } else {
                new.by_key.insert(key.clone(), new.first.len());
                new.first.push(s);
                new.units.push(&s.unit);
            }
        }
        units.retain(|id, unit| {
            index
                .keys
                .get(id)
                .and_then(|k| index.by_key.get(k))
                .is_some_and(|(_, known)| known.as_str() != *unit)
        });
        let created = self.db.with(|c| {
            c.transaction("BEGIN", |c| {
                let created = Self::create(c, &new)?;
                let id_of_key = |key: &Vec<u8>| {
                    index
                        .by_key
                        .get(key)
                        .map(|(id, _)| *id)
                        .or_else(|| created.get(key).copied())
                };
                let mut points: Vec<Point> = samples
                    .iter()
                    .zip(&keys)
                    .filter_map(|(s, key)| {
                        id_of_key(key).map(|series| Point {
                            series,
                            ms: s.ms,
                            value: s.value,
                        })
                    })
                    .collect();
                // Stable: samples of one series keep their arrival order within a millisecond.
                points.sort_by_key(|p| (p.series, p.ms));
                Self::store_points(c, &points)?;
                if !units.is_empty() {
                    let (ids, names): (Vec<i64>, Vec<&str>) =
                        units.iter().map(|(id, unit)| (sql_id(*id), *unit)).unzip();
                    c.execute(
                        "UPDATE metric_series s SET unit = u.unit \
                         FROM unnest($1::int8[], $2::text[]) AS u(id, unit) WHERE s.id = u.id",
                        &[&ids, &names],
                    )?;
                }
                Ok(created)
            })
        })?;
        for (key, id) in created {
            let unit = new.by_key.get(&key).map(|at| new.units[*at]).unwrap_or("");
            index.keys.insert(id, key.clone());
            index.by_key.insert(key, (id, unit.to_string()));
        }
        for (id, unit) in units {
            if let Some(entry) = index.keys.get(&id).and_then(|k| index.by_key.get_mut(k)) {
                entry.1 = unit.to_string();
            }
        }
        Ok(refused)
    }

    /// Each commit is durable: PostgreSQL syncs it.
    fn durable_later(&self) -> bool {
        false
    }

    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Samples go to their tables as they are committed.
    fn unfiled(&self) -> usize {
        0
    }

    fn file_unfiled(&self, _index: &SeriesIndex) -> Result<(), StoreError> {
        Ok(())
    }

    fn remove_expired(&self, p: &Prune, index: &mut SeriesIndex) -> Result<u64, StoreError> {
        Tables::remove_expired(self, p, index)
    }

    /// The series of one object, by metric name.
    fn series_of(&self, tenant: Uuid, object: Uuid) -> Result<Vec<SeriesInfo>, StoreError> {
        let rows = self.db.with(|c| {
            c.query(
                &format!(
                    "SELECT {SERIES_COLUMNS} FROM metric_series s \
                     WHERE s.tenant = $1 AND s.object = $2 ORDER BY s.metric"
                ),
                &[&tenant, &object],
            )
        })?;
        Ok(rows.iter().map(|r| info(r, 0)).collect())
    }

    /// The points of one series in `[from_ms, to_ms)` from one tier, oldest first: one
    /// statement, so the series and its points are one snapshot.
    fn points(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        tier: Tier,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Option<SeriesPoints>, StoreError> {
        let join = match tier {
            Tier::Raw => "LEFT JOIN LATERAL (SELECT ms AS k, 1::int8 AS count, value AS sum, \
                 value AS min, value AS max, value AS last FROM metric_raw \
                 WHERE series = s.id AND ms >= $4 AND ms < $5) p ON true"
                .to_string(),
            _ => format!(
                "LEFT JOIN LATERAL (SELECT bucket AS k, count, sum, min, max, last FROM {} \
                 WHERE series = s.id AND bucket >= $4 AND bucket < $5) p ON true",
                aggregates(tier)
            ),
        };
        let rows = self.db.with(|c| {
            c.query(
                &format!(
                    "SELECT {SERIES_COLUMNS}, p.k, p.count, p.sum, p.min, p.max, p.last \
                     FROM metric_series s {join} \
                     WHERE s.tenant = $1 AND s.object = $2 AND s.metric = $3 ORDER BY p.k"
                ),
                &[&tenant, &object, &metric, &tier.bucket(from_ms), &to_ms],
            )
        })?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let points = rows
            .iter()
            .filter_map(|r| r.get::<_, Option<i64>>(6).map(|k| (k, agg(r, 7))))
            .collect();
        Ok(Some((info(first, 0), points)))
    }

    /// A backup restores into a data directory: the tables become `metrics.redb`.
    fn snapshot(&self, dir: &Path) -> Result<Option<String>, StoreError> {
        self.write_file(&dir.join(super::FILE))?;
        Ok(Some(super::FILE.to_string()))
    }
}
