//! The event store on PostgreSQL: one table `events` range-partitioned by month
//! (`events_YYYYMM`), keyed as the month files are (tenant, time, id), with the same indexes
//! (object, source, type). A month's partition is made when it is first written, the next
//! month's with it; retention drops whole partitions. An event's row is the same encoding the
//! month files and the journal keep, so backups and `svc migrate` copy rows, not meanings.

use super::{EventKey, MonthStore, Position, Scan};
use crate::model::event::{Event, EventFilter};
use crate::runtime::Locked;
use crate::store::StoreError;
use crate::store::event_rows::decode_event;
use crate::store::kv::pg::{Conn, Connections, FORWARDED_CHANNEL, Target};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

/// The advisory lock that makes partitions one process at a time (two processes writing the
/// first event of a month would both try).
const PARTITION_LOCK: i64 = 0x5356_4300_0003;

/// Rows per round trip while copying a month.
const COPY_PAGE: i64 = super::COPY_PAGE as i64;

pub(super) struct Partitions {
    db: Connections,
    /// Months whose partition this process made or found made (`CREATE … IF NOT EXISTS`).
    made: Mutex<BTreeSet<u32>>,
}

/// The first millisecond of a `YYYYMM` month, and of the month after it.
fn bounds(month: u32) -> Result<(i64, i64), StoreError> {
    let start = |y: u32, m: u32| -> Result<i64, StoreError> {
        let y = i16::try_from(y).map_err(|e| StoreError::Internal(e.to_string()))?;
        let m = i8::try_from(m).map_err(|e| StoreError::Internal(e.to_string()))?;
        jiff::civil::date(y, m, 1)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .map(|z| z.timestamp().as_millisecond())
            .map_err(|e| StoreError::Internal(e.to_string()))
    };
    let (y, m) = (month / 100, month % 100);
    let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Ok((start(y, m)?, start(next.0, next.1)?))
}

fn next_month(month: u32) -> u32 {
    if month % 100 == 12 {
        (month / 100 + 1) * 100 + 1
    } else {
        month + 1
    }
}

fn partition(month: u32) -> String {
    format!("events_{month}")
}

impl Partitions {
    /// Connects nothing yet: a database that is down when the server starts is the store's
    /// to report, as it comes back.
    pub(super) fn open(target: &Target) -> Result<Partitions, StoreError> {
        Ok(Partitions {
            db: Connections::open(target)?,
            made: Mutex::default(),
        })
    }

    fn made(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.made.locked()
    }

    /// The months that have a partition, oldest first.
    pub(super) fn months(&self) -> Result<Vec<u32>, StoreError> {
        let rows = self.db.with(|c| {
            c.query(
                "SELECT c.relname::text FROM pg_inherits i \
                 JOIN pg_class c ON c.oid = i.inhrelid \
                 JOIN pg_class p ON p.oid = i.inhparent \
                 WHERE p.relname = 'events' AND p.relnamespace = to_regnamespace(current_schema())::oid",
                &[],
            )
        })?;
        let mut months: Vec<u32> = rows
            .iter()
            .filter_map(|r| r.get::<_, String>(0).strip_prefix("events_")?.parse().ok())
            .collect();
        months.sort_unstable();
        Ok(months)
    }

    /// Makes the partitions of `month` and the month after it, unless known to exist.
    fn make(&self, conn: &mut Conn, month: u32) -> Result<(), StoreError> {
        let wanted: Vec<u32> = [month, next_month(month)]
            .into_iter()
            .filter(|m| !self.made().contains(m))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut ddl = format!("BEGIN; SELECT pg_advisory_xact_lock({PARTITION_LOCK});");
        for m in &wanted {
            let (from, to) = bounds(*m)?;
            ddl.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF events FOR VALUES FROM ({from}) TO ({to});",
                partition(*m)
            ));
        }
        ddl.push_str("COMMIT");
        if let Err(e) = conn.batch(&ddl) {
            let _ = conn.batch("ROLLBACK");
            return Err(e);
        }
        self.made().extend(wanted);
        Ok(())
    }

    /// Stores one month's events in one statement; an event stored before is left as it is.
    pub(super) fn commit(&self, month: u32, events: &[(&Event, &[u8])]) -> Result<(), StoreError> {
        let mut tenants = Vec::with_capacity(events.len());
        let mut times = Vec::with_capacity(events.len());
        let mut ids = Vec::with_capacity(events.len());
        let mut objects = Vec::with_capacity(events.len());
        let mut sources = Vec::with_capacity(events.len());
        let mut types = Vec::with_capacity(events.len());
        let mut severities = Vec::with_capacity(events.len());
        let mut sites = Vec::with_capacity(events.len());
        let mut bodies = Vec::with_capacity(events.len());
        for (e, row) in events {
            tenants.push(e.tenant_id);
            times.push(e.ts.as_millis());
            ids.push(e.id);
            objects.push(e.object_id);
            sources.push(e.source_id.as_deref());
            types.push(i16::from(e.kind.code()));
            severities.push(e.severity.map(|s| s.as_str()));
            sites.push(e.site.as_deref());
            bodies.push(*row);
        }
        self.db.with(|c| {
            self.make(c, month)?;
            c.execute(
                "INSERT INTO events (tenant, ts, id, object_id, source_id, type, severity, site, body) \
                 SELECT * FROM unnest($1::uuid[], $2::int8[], $3::uuid[], $4::uuid[], $5::text[], \
                 $6::int2[], $7::text[], $8::text[], $9::bytea[]) ON CONFLICT DO NOTHING",
                &[
                    &tenants,
                    &times,
                    &ids,
                    &objects,
                    &sources,
                    &types,
                    &severities,
                    &sites,
                    &bodies,
                ],
            )
        })?;
        Ok(())
    }

    /// Announces stored events on `FORWARDED_CHANNEL`: each notice `announcer`'s name, then as
    /// many keys as its payload holds (PostgreSQL takes under 8,000 bytes).
    pub(super) fn announce(&self, announcer: &str, keys: &[EventKey]) -> Result<(), StoreError> {
        const PAYLOAD_MAX: usize = 7_800;
        let mut payloads: Vec<String> = Vec::new();
        for key in keys {
            let text = key.to_text();
            if payloads
                .last()
                .is_none_or(|p| p.len() + 1 + text.len() > PAYLOAD_MAX)
            {
                payloads.push(announcer.to_string());
            }
            if let Some(p) = payloads.last_mut() {
                p.push(' ');
                p.push_str(&text);
            }
        }
        self.db.with(|c| {
            for payload in &payloads {
                c.execute("SELECT pg_notify($1, $2)", &[&FORWARDED_CHANNEL, payload])?;
            }
            Ok(())
        })
    }

    pub(super) fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError> {
        let (tenants, times, ids) = key_columns(keys);
        let rows = self.db.with(|c| {
            c.query(
                "SELECT body FROM events WHERE (tenant, ts, id) IN \
                 (SELECT * FROM unnest($1::uuid[], $2::int8[], $3::uuid[]))",
                &[&tenants, &times, &ids],
            )
        })?;
        rows.iter()
            .map(|r| decode_event(r.get::<_, &[u8]>(0)))
            .collect()
    }

    /// Hands every event of `month` to `each`, a page at a time, in key order.
    pub(super) fn each_of_month(
        &self,
        month: u32,
        each: &mut super::EachPage<'_>,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "SELECT tenant, ts, id, body FROM {} WHERE (tenant, ts, id) > ($1, $2, $3) \
             ORDER BY tenant, ts, id LIMIT $4",
            partition(month)
        );
        let mut after = (Uuid::nil(), i64::MIN, Uuid::nil());
        loop {
            let rows = self
                .db
                .with(|c| c.query(&sql, &[&after.0, &after.1, &after.2, &COPY_PAGE]))?;
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = (last.get(0), last.get(1), last.get(2));
            let page = rows
                .iter()
                .map(|r| {
                    let row = r.get::<_, Vec<u8>>(3);
                    decode_event(&row).map(|e| (e, row))
                })
                .collect::<Result<Vec<_>, _>>()?;
            each(&page)?;
        }
    }
}

/// Copies every month file of `dir` into the partitions of `target` (`svc migrate`); the
/// number of events copied.
pub(in crate::store) fn copy_month_files(
    dir: &std::path::Path,
    target: &Target,
) -> Result<u64, StoreError> {
    let files = super::MonthFiles::new(dir);
    let partitions = Partitions::open(target)?;
    let mut copied = 0;
    for month in files.months() {
        files.each_of_month(month, &mut |page| {
            let rows: Vec<(&Event, &[u8])> =
                page.iter().map(|(e, row)| (e, row.as_slice())).collect();
            copied += rows.len() as u64;
            partitions.commit(month, &rows)
        })?;
    }
    Ok(copied)
}

/// The columns of `keys`, for `unnest`.
fn key_columns(keys: &[EventKey]) -> (Vec<Uuid>, Vec<i64>, Vec<Uuid>) {
    (
        keys.iter().map(|k| k.tenant).collect(),
        keys.iter().map(|k| k.ts.as_millis()).collect(),
        keys.iter().map(|k| k.id).collect(),
    )
}

impl MonthStore for Partitions {
    fn months(&self) -> Vec<u32> {
        Partitions::months(self).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot list the event partitions");
            Vec::new()
        })
    }

    /// Durable once committed: PostgreSQL syncs its commits.
    fn commit(
        &self,
        month: u32,
        events: &[(&Event, &[u8])],
        _durable: bool,
    ) -> Result<(), StoreError> {
        Partitions::commit(self, month, events)
    }

    fn sync(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The partitions' indexes are PostgreSQL's.
    fn has_unfiled_keys(&self) -> bool {
        false
    }

    fn file_object_keys(&self, _force: bool) {}

    fn announce_forwarded(
        &self,
        announcer: &str,
        events: &[Arc<Event>],
    ) -> Result<bool, StoreError> {
        let keys: Vec<EventKey> = events.iter().map(|e| EventKey::of(e)).collect();
        self.announce(announcer, &keys).map(|()| true)
    }

    fn by_keys(&self, keys: &[EventKey]) -> Result<Vec<Event>, StoreError> {
        Partitions::by_keys(self, keys)
    }

    /// One statement for all the keys.
    fn stored(&self, keys: &[EventKey]) -> Result<HashSet<Uuid>, StoreError> {
        let (tenants, times, ids) = key_columns(keys);
        let rows = self.db.with(|c| {
            c.query(
                "SELECT id FROM events WHERE (tenant, ts, id) IN \
                 (SELECT * FROM unnest($1::uuid[], $2::int8[], $3::uuid[]))",
                &[&tenants, &times, &ids],
            )
        })?;
        Ok(rows.iter().map(|r| r.get::<_, Uuid>(0)).collect())
    }

    /// Matching events between the scan's bounds, in its direction: one statement, the
    /// filter's every field a condition, so an index range and the partitions of its months
    /// are all it reads.
    fn read(&self, filter: &EventFilter, scan: Scan) -> Result<Vec<Event>, StoreError> {
        let mut params: Vec<Box<dyn ToSql + Sync>> = vec![Box::new(filter.tenant_id)];
        let mut sql = String::from("SELECT body FROM events WHERE tenant = $1");
        let mut condition = |sql: &mut String, text: &str, value: Box<dyn ToSql + Sync>| {
            params.push(value);
            sql.push_str(&text.replace('#', &format!("${}", params.len())));
        };
        if let Some(o) = filter.object_id {
            condition(&mut sql, " AND object_id = #", Box::new(o));
        }
        if let Some(s) = &filter.source_id {
            condition(&mut sql, " AND source_id = #", Box::new(s.clone()));
        }
        if !filter.types.is_empty() {
            let codes: Vec<i16> = filter.types.iter().map(|t| i16::from(t.code())).collect();
            condition(&mut sql, " AND type = ANY(#)", Box::new(codes));
        }
        if let Some(s) = filter.severity {
            condition(&mut sql, " AND severity = #", Box::new(s.as_str()));
        }
        if let Some(s) = &filter.site {
            condition(&mut sql, " AND site = #", Box::new(s.clone()));
        }
        if let Some(from) = filter.from {
            condition(&mut sql, " AND ts >= #", Box::new(from.as_millis()));
        }
        if let Some(to) = filter.to {
            condition(&mut sql, " AND ts <= #", Box::new(to.as_millis()));
        }
        for (bound, op) in [(scan.lo, ">"), (scan.hi, "<")] {
            if let Some(Position { ms, id }) = bound {
                condition(&mut sql, &format!(" AND (ts, id) {op} (#"), Box::new(ms));
                condition(&mut sql, ", #)", Box::new(id));
            }
        }
        let order = if scan.descending { "DESC" } else { "ASC" };
        let limit = i64::try_from(scan.limit).unwrap_or(i64::MAX);
        condition(
            &mut sql,
            &format!(" ORDER BY ts {order}, id {order} LIMIT #"),
            Box::new(limit),
        );
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        let rows = self.db.with(|c| c.query(&sql, &refs))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let e = decode_event(r.get::<_, &[u8]>(0))?;
            if filter.matches(&e) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// How many events of `month` (all tenants) lie after `after`.
    fn count_after(&self, month: u32, after: Position) -> Result<u64, StoreError> {
        if !self.months()?.contains(&month) {
            return Ok(0);
        }
        let rows = self.db.with(|c| {
            c.query(
                &format!(
                    "SELECT count(*) FROM {} WHERE (ts, id) > ($1, $2)",
                    partition(month)
                ),
                &[&after.ms, &after.id],
            )
        })?;
        Ok(rows
            .first()
            .map_or(0, |r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }

    /// Drops the partitions of the months before `keep_from`; the months dropped.
    fn remove_months_before(&self, keep_from: u32) -> Vec<u32> {
        let months = match self.months() {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "cannot list the event partitions");
                return Vec::new();
            }
        };
        let mut removed = Vec::new();
        for month in months.into_iter().filter(|m| *m < keep_from) {
            let dropped = self.db.with(|c| {
                c.batch(&format!(
                    "BEGIN; SELECT pg_advisory_xact_lock({PARTITION_LOCK}); DROP TABLE IF EXISTS {}; COMMIT",
                    partition(month)
                ))
                .inspect_err(|_| {
                    let _ = c.batch("ROLLBACK");
                })
            });
            match dropped {
                Ok(()) => {
                    self.made().remove(&month);
                    removed.push(month);
                }
                Err(e) => {
                    tracing::error!(month, error = %e, "could not drop an expired event partition")
                }
            }
        }
        removed
    }

    /// A backup restores into a data directory: each partition becomes a month file.
    fn snapshot(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let target = super::MonthFiles::new(dir);
        for month in Partitions::months(self)? {
            self.each_of_month(month, &mut |events| {
                let rows: Vec<(&Event, &[u8])> =
                    events.iter().map(|(e, row)| (e, row.as_slice())).collect();
                target.commit(month, &rows, true)
            })?;
        }
        // Filed, so each file is complete; they close as `target` goes.
        target.file_object_keys(true);
        Ok(target.months().into_iter().map(super::file_name).collect())
    }

    fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::store::events::month_of;

    #[test]
    fn months_bound_their_partitions() {
        let (from, to) = bounds(202612).unwrap();
        assert_eq!(
            from,
            "2026-12-01T00:00:00Z"
                .parse::<jiff::Timestamp>()
                .unwrap()
                .as_millisecond()
        );
        assert_eq!(
            to,
            "2027-01-01T00:00:00Z"
                .parse::<jiff::Timestamp>()
                .unwrap()
                .as_millisecond()
        );
        assert_eq!(bounds(202602).unwrap().1, bounds(202603).unwrap().0);
        assert_eq!(next_month(202612), 202701);
        assert_eq!(next_month(202611), 202612);
        let ts = Timestamp::from_millis(to - 1).unwrap();
        assert_eq!(month_of(ts), 202612, "the last millisecond is the month's");
    }
}
