//! Network discovery scans by tenant + id (ids grow with time), so every process serving the
//! store answers for every scan. `monitor::discovery` runs them and decides what they hold.

use super::codec::{encode, tenant_value, tenant_values_newest};
use super::keys::{scoped, tenant_range};
use super::kv::Readable;
use super::tables::DISCOVERY_SCANS;
use super::{Store, StoreError, Tx};
use crate::model::discovery::DiscoveryScan;
use crate::store::{TxResult, Wrote};
use std::sync::Arc;
use uuid::Uuid;

fn put_scan(tx: &Tx, scan: &DiscoveryScan) -> Result<(), StoreError> {
    tx.open_table(DISCOVERY_SCANS)?.insert(
        scoped(scan.tenant_id, scan.id.as_bytes()).as_slice(),
        encode(scan)?.as_slice(),
    )?;
    tx.unrecorded("a discovery scan: suggestions, not configuration");
    Ok(())
}

impl Store {
    /// Keeps a scan that starts, and drops the tenant's older scans past the newest `keep`
    /// (this one counted).
    pub(crate) async fn start_discovery_scan(
        self: &Arc<Self>,
        scan: DiscoveryScan,
        keep: usize,
    ) -> Result<(), StoreError> {
        self.transact(move |tx| -> TxResult<_> {
            let mut table = tx.open_table(DISCOVERY_SCANS)?;
            let key = scoped(scan.tenant_id, scan.id.as_bytes());
            let (lo, _) = tenant_range(scan.tenant_id);
            let older: Vec<Vec<u8>> = {
                let mut keys = Vec::new();
                let past = keep.saturating_sub(1);
                for row in table.range(lo.as_slice()..key.as_slice())?.rev().skip(past) {
                    keys.push(row?.0.value().to_vec());
                }
                keys
            };
            for old in older {
                table.remove(old.as_slice())?;
            }
            drop(table);
            put_scan(tx, &scan)?;
            Ok(Wrote::Changed(()))
        })
        .await
    }

    /// Keeps a scan's progress.
    pub(crate) async fn save_discovery_scan(
        self: &Arc<Self>,
        scan: DiscoveryScan,
    ) -> Result<(), StoreError> {
        self.transact(move |tx| put_scan(tx, &scan).map(Wrote::Changed))
            .await
    }

    /// The tenant's scans, newest first, older than `before`, at most `limit`.
    pub(crate) async fn discovery_scans(
        self: &Arc<Self>,
        tenant: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<DiscoveryScan>, StoreError> {
        self.read(move |tx| {
            let table = tx.open_table(DISCOVERY_SCANS)?;
            tenant_values_newest(&table, tenant, before, limit, |_: &DiscoveryScan| true)
        })
        .await
    }

    /// One of the tenant's scans.
    pub(crate) async fn discovery_scan(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<DiscoveryScan>, StoreError> {
        self.read(move |tx| tenant_value(&tx.open_table(DISCOVERY_SCANS)?, tenant, id))
            .await
    }
}
