//! The report archive: each rendering's entry by (tenant, report, id) and its content by id,
//! and the scheduled slot each report last ran for.

use super::codec::{decode, encode};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::{REPORT_ARCHIVE, REPORT_CONTENT, SETTINGS};
use super::{Store, StoreError, Tx};
use crate::model::report::ArchivedReport;
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

/// The report archive in a transaction.
impl Tx<'_> {
    /// Archives one rendering of a report: its entry and its content.
    pub(crate) fn archive_report(
        &self,
        entry: &ArchivedReport,
        content: &[u8],
    ) -> Result<(), StoreError> {
        self.open_table(REPORT_ARCHIVE)?.insert(
            archive_key(entry.tenant_id, &entry.report, entry.id).as_slice(),
            encode(entry)?.as_slice(),
        )?;
        self.open_table(REPORT_CONTENT)?
            .insert(entry.id.as_bytes().as_slice(), content)?;
        Ok(())
    }

    /// Keeps the newest `keep` renderings of each format of a report.
    pub(crate) fn prune_report_archive(
        &self,
        tenant: Uuid,
        report: &str,
        keep: u32,
    ) -> Result<(), StoreError> {
        prune(self, tenant, report, keep)
    }

    /// Records the scheduled slot a report ran for, so that slot runs once.
    pub(crate) fn set_report_slot(
        &self,
        tenant: Uuid,
        report: &str,
        slot: &str,
    ) -> Result<(), StoreError> {
        self.open_table(SETTINGS)?.insert(
            slot_setting(tenant, report).as_slice(),
            encode(&slot)?.as_slice(),
        )?;
        Ok(())
    }
}

impl Store {
    /// The slot a report's schedule last ran for.
    pub(crate) async fn report_slot(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
    ) -> Result<Option<String>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SETTINGS)?;
            t.get(slot_setting(tenant, &report).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    /// A report's renderings, newest first, strictly older than `before`.
    pub(crate) async fn archived_reports(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ArchivedReport>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(REPORT_ARCHIVE)?;
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
            for row in t.range(lo.as_slice()..hi.as_slice())?.rev().take(limit) {
                out.push(decode(row?.1.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// One archived rendering and its content.
    pub(crate) async fn archived_report(
        self: &Arc<Self>,
        tenant: Uuid,
        report: String,
        id: Uuid,
    ) -> Result<(ArchivedReport, Vec<u8>), StoreError> {
        self.read(move |tx| {
            let entry: ArchivedReport = tx
                .open_table(REPORT_ARCHIVE)?
                .get(archive_key(tenant, &report, id).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()?
                .ok_or(StoreError::NotFound)?;
            let content = tx
                .open_table(REPORT_CONTENT)?
                .get(id.as_bytes().as_slice())?
                .map(|v| v.value().to_vec())
                .ok_or(StoreError::NotFound)?;
            Ok((entry, content))
        })
        .await
    }
}

/// Keeps the newest `keep` renderings of each format of a report.
fn prune(tx: &WriteTx, tenant: Uuid, report: &str, keep: u32) -> Result<(), StoreError> {
    let mut archive = tx.open_table(REPORT_ARCHIVE)?;
    let lo = report_prefix(tenant, report);
    let mut hi = scoped(tenant, report.as_bytes());
    hi.push(1);
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut doomed = Vec::new();
    for row in archive.range(lo.as_slice()..hi.as_slice())?.rev() {
        let (k, v) = row?;
        let entry: ArchivedReport = decode(v.value())?;
        let n = seen.entry(entry.format.clone()).or_default();
        *n += 1;
        if *n > keep {
            doomed.push((k.value().to_vec(), entry.id));
        }
    }
    let mut content = tx.open_table(REPORT_CONTENT)?;
    for (key, id) in doomed {
        archive.remove(key.as_slice())?;
        content.remove(id.as_bytes().as_slice())?;
    }
    Ok(())
}
