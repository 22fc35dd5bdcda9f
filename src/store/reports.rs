//! The report archive: each rendering's entry by (tenant, report, id) and its content by id.
//! A run archives its renderings, prunes each format to the report's `keep`, records the
//! scheduled slot it ran for and queues the mails, with its audit entry, in one transaction.

use super::codec::{decode, encode};
use super::keys::scoped;
use super::notify::put_delivery;
use super::tables::{REPORT_ARCHIVE, REPORT_CONTENT, SETTINGS};
use super::{Store, StoreError};
use crate::model::audit::AuditDraft;
use crate::model::notify::Delivery;
use crate::model::report::ArchivedReport;
use redb::{ReadableTable, WriteTransaction};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// The key range of one report's archive (ids are time-ordered, so the range is by age).
fn report_prefix(tenant: Uuid, report: &str) -> Vec<u8> {
    let mut k = scoped(tenant, report.as_bytes());
    k.push(0);
    k
}

fn archive_key(tenant: Uuid, report: &str, id: Uuid) -> Vec<u8> {
    let mut k = report_prefix(tenant, report);
    k.extend_from_slice(id.as_bytes());
    k
}

/// The settings key of the last scheduled slot a report ran for.
fn slot_setting(tenant: Uuid, report: &str) -> Vec<u8> {
    scoped(tenant, format!("report-slot:{report}").as_bytes())
}

/// One run of a report: what it archives and mails.
pub struct ReportRun {
    pub tenant: Uuid,
    pub report: String,
    pub renderings: Vec<(ArchivedReport, Vec<u8>)>,
    pub keep: u32,
    /// The scheduled slot this run is for, recorded so it runs once.
    pub scheduled_slot: Option<String>,
    pub mails: Vec<Delivery>,
}

impl Store {
    pub async fn archive_report_run(
        self: &Arc<Self>,
        run: ReportRun,
        audit: AuditDraft,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        self.write(move |tx| {
            for (entry, content) in &run.renderings {
                tx.open_table(REPORT_ARCHIVE)
                    .map_err(StoreError::from_redb)?
                    .insert(
                        archive_key(run.tenant, &run.report, entry.id).as_slice(),
                        encode(entry)?.as_slice(),
                    )
                    .map_err(StoreError::from_redb)?;
                tx.open_table(REPORT_CONTENT)
                    .map_err(StoreError::from_redb)?
                    .insert(entry.id.as_bytes().as_slice(), content.as_slice())
                    .map_err(StoreError::from_redb)?;
            }
            prune(tx, run.tenant, &run.report, run.keep)?;
            if let Some(slot) = &run.scheduled_slot {
                tx.open_table(SETTINGS)
                    .map_err(StoreError::from_redb)?
                    .insert(
                        slot_setting(run.tenant, &run.report).as_slice(),
                        encode(slot)?.as_slice(),
                    )
                    .map_err(StoreError::from_redb)?;
            }
            for mail in &run.mails {
                put_delivery(tx, mail)?;
            }
            let entries: Vec<&ArchivedReport> = run.renderings.iter().map(|(e, _)| e).collect();
            store.record(tx, [audit.after(&entries)], Vec::new())
        })
        .await
    }

    /// The slot a report's schedule last ran for.
    pub async fn report_slot(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
    ) -> Result<Option<String>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SETTINGS).map_err(StoreError::from_redb)?;
            t.get(slot_setting(tenant, &report).as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    /// A report's renderings, newest first, strictly older than `before`.
    pub async fn archived_reports(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ArchivedReport>, StoreError> {
        self.read(move |tx| {
            let t = tx
                .open_table(REPORT_ARCHIVE)
                .map_err(StoreError::from_redb)?;
            let lo = report_prefix(tenant, &report);
            let hi = match before {
                Some(b) => archive_key(tenant, &report, b),
                None => {
                    let mut hi = scoped(tenant, report.as_bytes());
                    hi.push(1);
                    hi
                }
            };
            let mut out = Vec::new();
            for row in t
                .range(lo.as_slice()..hi.as_slice())
                .map_err(StoreError::from_redb)?
                .rev()
                .take(limit)
            {
                out.push(decode(row.map_err(StoreError::from_redb)?.1.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// One archived rendering and its content.
    pub async fn archived_report(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
        id: Uuid,
    ) -> Result<(ArchivedReport, Vec<u8>), StoreError> {
        self.read(move |tx| {
            let entry: ArchivedReport = tx
                .open_table(REPORT_ARCHIVE)
                .map_err(StoreError::from_redb)?
                .get(archive_key(tenant, &report, id).as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode(v.value()))
                .transpose()?
                .ok_or(StoreError::NotFound)?;
            let content = tx
                .open_table(REPORT_CONTENT)
                .map_err(StoreError::from_redb)?
                .get(id.as_bytes().as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| v.value().to_vec())
                .ok_or(StoreError::NotFound)?;
            Ok((entry, content))
        })
        .await
    }
}

/// Keeps the newest `keep` renderings of each format of a report.
fn prune(tx: &WriteTransaction, tenant: Uuid, report: &str, keep: u32) -> Result<(), StoreError> {
    let mut archive = tx
        .open_table(REPORT_ARCHIVE)
        .map_err(StoreError::from_redb)?;
    let lo = report_prefix(tenant, report);
    let mut hi = scoped(tenant, report.as_bytes());
    hi.push(1);
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut doomed = Vec::new();
    for row in archive
        .range(lo.as_slice()..hi.as_slice())
        .map_err(StoreError::from_redb)?
        .rev()
    {
        let (k, v) = row.map_err(StoreError::from_redb)?;
        let entry: ArchivedReport = decode(v.value())?;
        let n = seen.entry(entry.format.clone()).or_default();
        *n += 1;
        if *n > keep {
            doomed.push((k.value().to_vec(), entry.id));
        }
    }
    let mut content = tx
        .open_table(REPORT_CONTENT)
        .map_err(StoreError::from_redb)?;
    for (key, id) in doomed {
        archive
            .remove(key.as_slice())
            .map_err(StoreError::from_redb)?;
        content
            .remove(id.as_bytes().as_slice())
            .map_err(StoreError::from_redb)?;
    }
    Ok(())
}
