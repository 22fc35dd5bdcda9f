//! Federation: what the main knows of each site's connection (heartbeats, pulls, forwarded
//! events, staleness), and the counts an edge reports of itself.

use super::codec::{decode, encode, tenant_values};
use super::keys::{past_prefix, scoped, tenant_range};
use super::kv::Readable;
use super::tables::{ACTIVE_ALERT_KEYS, OBJECTS, SITE_MIRRORS, SITE_STATUS};
use super::{Store, StoreError, Tx};
use crate::model::event::Event;
use crate::model::mirror::{self, Mirror, MirrorKind};
use crate::model::object::{Object, ObjectKind};
use crate::model::site::SiteStatus;
use std::sync::Arc;
use uuid::Uuid;

/// Hosts, services and active alerts of a tenant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteCounts {
    pub hosts: i64,
    pub services: i64,
    pub alerts_open: i64,
}

/// Site statuses in a transaction.
impl Tx<'_> {
    /// A site's status; a site never heard of starts empty.
    pub(crate) fn site_status(&self, tenant: Uuid, name: &str) -> Result<SiteStatus, StoreError> {
        let t = self.open_table(SITE_STATUS)?;
        match t.get(scoped(tenant, name.as_bytes()).as_slice())? {
            Some(v) => decode(v.value()),
            None => Ok(SiteStatus {
                tenant_id: tenant,
                name: name.to_string(),
                ..Default::default()
            }),
        }
    }

    /// Folds the events site `site` forwarded into its mirrors, in their order (a batch sent
    /// again folds to the same).
    pub(crate) fn fold_site_mirrors(
        &self,
        tenant: Uuid,
        site: &str,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let mut t = self.open_table(SITE_MIRRORS)?;
        for e in events {
            let Some((kind, id)) = mirror::key_of(e) else {
                continue;
            };
            let key = mirror_key(tenant, kind, site, id);
            let old: Option<Mirror> = t
                .get(key.as_slice())?
                .map(|v| decode(v.value()))
                .transpose()?;
            match mirror::fold(tenant, site, old, e) {
                Some(m) => {
                    t.insert(key.as_slice(), encode(&m)?.as_slice())?;
                }
                None => {
                    t.remove(key.as_slice())?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn save_site_status(&self, status: &SiteStatus) -> Result<(), StoreError> {
        self.open_table(SITE_STATUS)?.insert(
            scoped(status.tenant_id, status.name.as_bytes()).as_slice(),
            encode(status)?.as_slice(),
        )?;
        Ok(())
    }
}

/// The key of a site's mirrored record: tenant, `a` (an alert) or `o` (an object), site
/// name, 0, the site's id. So the alerts of every site are read without their objects.
fn mirror_key(tenant: Uuid, kind: MirrorKind, site: &str, id: Uuid) -> Vec<u8> {
    let mut key = mirror_prefix(tenant, kind, Some(site));
    key.extend_from_slice(id.as_bytes());
    key
}

/// What every key of a tenant's mirrors of `kind` (of one site's, given) starts with.
fn mirror_prefix(tenant: Uuid, kind: MirrorKind, site: Option<&str>) -> Vec<u8> {
    let mut local = vec![match kind {
        MirrorKind::Alert => b'a',
        MirrorKind::Object => b'o',
    }];
    if let Some(site) = site {
        local.extend_from_slice(site.as_bytes());
        local.push(0);
    }
    scoped(tenant, &local)
}

impl Store {
    /// A tenant's mirrors of `kind`, of one site (of every site: `None`), in key order.
    pub(crate) async fn site_mirrors(
        self: &Arc<Self>,
        tenant: Uuid,
        kind: MirrorKind,
        site: Option<String>,
    ) -> Result<Vec<Mirror>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SITE_MIRRORS)?;
            // The prefix ends in a kind letter or the 0 that ends a name.
            let lo = mirror_prefix(tenant, kind, site.as_deref());
            let hi = past_prefix(&lo);
            let mut out = Vec::new();
            for row in t.range(lo.as_slice()..hi.as_slice())? {
                out.push(decode(row?.1.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// A site's status; a site never heard of is empty.
    pub(crate) async fn site_status(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
    ) -> Result<SiteStatus, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SITE_STATUS)?;
            match t.get(scoped(tenant, name.as_bytes()).as_slice())? {
                Some(v) => decode(v.value()),
                None => Ok(SiteStatus {
                    tenant_id: tenant,
                    name,
                    ..Default::default()
                }),
            }
        })
        .await
    }

    pub(crate) async fn site_statuses(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<SiteStatus>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(SITE_STATUS)?;
            tenant_values(&t, tenant)
        })
        .await
    }

    /// Every tenant's site statuses, for the stale-site sweep.
    pub(crate) async fn all_site_statuses(self: &Arc<Self>) -> Result<Vec<SiteStatus>, StoreError> {
        self.read(|tx| {
            let t = tx.open_table(SITE_STATUS)?;
            let mut out = Vec::new();
            for row in t.iter()? {
                out.push(decode(row?.1.value())?);
            }
            Ok(out)
        })
        .await
    }

    /// The counts an edge reports in its heartbeat.
    pub(crate) async fn site_counts(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<SiteCounts, StoreError> {
        self.read(move |tx| {
            let (lo, hi) = tenant_range(tenant);
            let mut counts = SiteCounts::default();
            let objects = tx.open_table(OBJECTS)?;
            for row in objects.range(lo.as_slice()..hi.as_slice())? {
                let o: Object = decode(row?.1.value())?;
                match o.kind {
                    ObjectKind::Host => counts.hosts += 1,
                    ObjectKind::Service => counts.services += 1,
                }
            }
            let active = tx.open_table(ACTIVE_ALERT_KEYS)?;
            for row in active.range(lo.as_slice()..hi.as_slice())? {
                row?;
                counts.alerts_open += 1;
            }
            Ok(counts)
        })
        .await
    }
}
