//! Status pages' rows: the people subscribed to a page by e-mail (by tenant, page and id) and
//! the public updates incidents post. `notify` decides what they hold.

use super::codec::{decode, encode, tenant_values_newest};
use super::kv::Readable;
use super::tables::{STATUS_SUBSCRIBERS, STATUS_UPDATES};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::status::{StatusUpdate, Subscriber};
use std::sync::Arc;
use uuid::Uuid;

/// Tenant + page + 0: a page's subscribers in one range, each by its id.
fn page_prefix(tenant: Uuid, page: &str) -> Vec<u8> {
    let mut k = super::keys::scoped(tenant, page.as_bytes());
    k.push(0);
    k
}

fn subscriber_key(s: &Subscriber) -> Vec<u8> {
    let mut k = page_prefix(s.tenant_id, &s.page);
    k.extend_from_slice(s.id.as_bytes());
    k
}

fn page_rows(
    table: &impl Readable<&'static [u8], &'static [u8]>,
    tenant: Uuid,
    page: &str,
) -> Result<Vec<Subscriber>, StoreError> {
    let lo = page_prefix(tenant, page);
    let hi = super::keys::past_prefix(&lo);
    let mut out = Vec::new();
    for row in table.range(lo.as_slice()..hi.as_slice())? {
        out.push(decode(row?.1.value())?);
    }
    Ok(out)
}

impl Tx<'_> {
    pub(crate) fn status_subscribers(
        &self,
        tenant: Uuid,
        page: &str,
    ) -> Result<Vec<Subscriber>, StoreError> {
        page_rows(&self.open_table(STATUS_SUBSCRIBERS)?, tenant, page)
    }

    pub(crate) fn put_status_subscriber(&self, s: &Subscriber) -> Result<(), StoreError> {
        self.open_table(STATUS_SUBSCRIBERS)?
            .insert(subscriber_key(s).as_slice(), encode(s)?.as_slice())?;
        Ok(())
    }

    pub(crate) fn remove_status_subscriber(&self, s: &Subscriber) -> Result<(), StoreError> {
        self.open_table(STATUS_SUBSCRIBERS)?
            .remove(subscriber_key(s).as_slice())?;
        Ok(())
    }

    pub(crate) fn put_status_update(&self, u: &StatusUpdate) -> Result<(), StoreError> {
        self.open_table(STATUS_UPDATES)?.insert(
            super::keys::scoped(u.tenant_id, u.id.as_bytes()).as_slice(),
            encode(u)?.as_slice(),
        )?;
        Ok(())
    }
}

impl Store {
    pub(crate) async fn status_subscribers(
        self: &Arc<Self>,
        tenant: Uuid,
        page: String,
    ) -> Result<Vec<Subscriber>, StoreError> {
        self.read(move |tx| page_rows(&tx.open_table(STATUS_SUBSCRIBERS)?, tenant, &page))
            .await
    }

    /// The updates posted on `page` since `since`, newest first, at most `limit`.
    pub(crate) async fn status_updates(
        self: &Arc<Self>,
        tenant: Uuid,
        page: String,
        since: Timestamp,
        limit: usize,
    ) -> Result<Vec<StatusUpdate>, StoreError> {
        self.read(move |tx| {
            tenant_values_newest(
                &tx.open_table(STATUS_UPDATES)?,
                tenant,
                None,
                limit,
                |u: &StatusUpdate| u.posted_at >= since && u.pages.contains(&page),
            )
        })
        .await
    }
}
