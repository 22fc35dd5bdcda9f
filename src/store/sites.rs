//! Federation: what the main knows of each site's connection (heartbeats, pulls, forwarded
//! events, staleness), and the counts an edge reports of itself.

use super::codec::{decode, encode, tenant_values};
use super::keys::{past_prefix, scoped, tenant_range};
use super::kv::Readable;
use super::migrations::PlannedRow;
use super::tables::{
    ACTIVE_ALERT_KEYS, CONFIG_DOCS, OBJECTS, SITE_MIRROR_IDS, SITE_MIRRORS, SITE_PROBLEMS,
    SITE_STATUS,
};
use super::{Store, StoreError, Tx};
use crate::model::config::ConfigDoc;
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

    /// Takes a batch site `site` forwarded (`sent`): `take` is given the site's document (none
    /// when there is no such site) and its status, updates the status with the batch, and
    /// answers the batch's events as the main keeps them; they fold into the site's mirrors,
    /// in their order (a batch sent again folds to the same). The mirrors' indexes are kept
    /// (`mirror_index`): a record's id row is written when it appears and removed when it
    /// goes, its problem row when its problem state changes, so a state change within OK or
    /// within a problem writes the mirror alone. The document, the status and the batch's
    /// records are read in one round trip on PostgreSQL; `take` must keep each event's
    /// mirrored record (its kind, object and alert).
    pub(crate) fn take_site_batch<E: From<StoreError>>(
        &self,
        tenant: Uuid,
        site: &str,
        sent: &[Event],
        take: impl FnOnce(Option<ConfigDoc>, &mut SiteStatus) -> Result<Vec<Event>, E>,
    ) -> Result<Vec<Event>, E> {
        let docs = self.open_table(CONFIG_DOCS)?;
        let doc_key = super::config::doc_key(tenant, "sites", site);
        docs.prefetch(&[doc_key.as_slice()])?;
        let mut t = self.open_table(SITE_MIRRORS)?;
        let mut ids = self.open_table(SITE_MIRROR_IDS)?;
        let mut problems = self.open_table(SITE_PROBLEMS)?;
        let key = |e: &Event| {
            let (kind, id) = mirror::key_of(e)?;
            Some((kind, id, mirror_key(tenant, kind, site, id)))
        };
        let sent_keys: Vec<Vec<u8>> = sent.iter().filter_map(|e| Some(key(e)?.2)).collect();
        t.prefetch(&sent_keys.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
        self.open_table(SITE_STATUS)?
            .prefetch(&[scoped(tenant, site.as_bytes()).as_slice()])?;
        let doc: Option<ConfigDoc> = docs
            .get(doc_key.as_slice())?
            .map(|v| decode(v.value()))
            .transpose()?;
        let mut status = self.site_status(tenant, site)?;
        let events = take(doc, &mut status)?;
        self.save_site_status(&status)?;
        let keyed: Vec<(&Event, MirrorKind, Uuid, Vec<u8>)> = events
            .iter()
            .filter_map(|e| {
                let (kind, id, key) = key(e)?;
                Some((e, kind, id, key))
            })
            .collect();
        for (e, kind, id, key) in keyed {
            let old: Option<Mirror> = t
                .get(key.as_slice())?
                .map(|v| decode(v.value()))
                .transpose()?;
            let was_problem = old.as_ref().is_some_and(Mirror::is_problem);
            let existed = old.is_some();
            let new = mirror::fold(tenant, site, old, e);
            match &new {
                Some(m) => {
                    t.insert(key.as_slice(), encode(m)?.as_slice())?;
                    if !existed {
                        ids.insert(mirror_id_key(tenant, kind, id).as_slice(), key.as_slice())?;
                    }
                }
                None => {
                    t.remove(key.as_slice())?;
                    ids.remove(mirror_id_key(tenant, kind, id).as_slice())?;
                }
            }
            let is_problem = new.as_ref().is_some_and(Mirror::is_problem);
            if is_problem && !was_problem {
                problems.insert(key.as_slice(), [].as_slice())?;
            } else if was_problem && !is_problem {
                problems.remove(key.as_slice())?;
            }
        }
        Ok(events)
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

/// The key of a mirrored record's row in `SITE_MIRROR_IDS`: tenant, `a` or `o`, the site's id.
fn mirror_id_key(tenant: Uuid, kind: MirrorKind, id: Uuid) -> Vec<u8> {
    let mut key = mirror_prefix(tenant, kind, None);
    key.extend_from_slice(id.as_bytes());
    key
}

/// The index rows of the mirror stored as `value` under `key` in `SITE_MIRRORS` (its id's row,
/// its problem row while it is one): what the migrations of both backends write for the
/// mirrors stored before the indexes were. A row that no longer reads gets none, with a
/// warning: it is the site's copy, and the site's next event for it writes it anew.
pub(super) fn mirror_index(key: &[u8], value: &[u8]) -> Result<Vec<PlannedRow>, StoreError> {
    let mirror: Mirror = match decode(value) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "a site's mirror no longer reads; it is not indexed");
            return Ok(Vec::new());
        }
    };
    let tenant = super::keys::stored_uuid(&key[..16.min(key.len())], "a mirror's tenant")?;
    let id = super::keys::stored_uuid(&key[key.len().saturating_sub(16)..], "a mirror's id")?;
    let kind = match mirror {
        Mirror::Object { .. } => MirrorKind::Object,
        Mirror::Alert { .. } => MirrorKind::Alert,
    };
    let mut rows = vec![PlannedRow {
        table: SITE_MIRROR_IDS,
        key: mirror_id_key(tenant, kind, id),
        value: key.to_vec(),
    }];
    if mirror.is_problem() {
        rows.push(PlannedRow {
            table: SITE_PROBLEMS,
            key: key.to_vec(),
            value: Vec::new(),
        });
    }
    Ok(rows)
}

/// Migration 25: the mirrors stored before their indexes get their rows (`mirror_index`).
pub(super) fn index_mirrors(tx: &super::kv::WriteTx) -> Result<(), StoreError> {
    let mut planned = Vec::new();
    {
        let t = tx.open_table(SITE_MIRRORS)?;
        for row in t.iter()? {
            let (k, v) = row?;
            planned.extend(mirror_index(k.value(), v.value())?);
        }
    }
    tx.open_table(SITE_MIRROR_IDS)?;
    tx.open_table(SITE_PROBLEMS)?;
    for r in planned {
        r.write(tx)?;
    }
    Ok(())
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

    /// The tenant's mirror of `kind` with the site's id `id`, whichever site keeps it.
    pub(crate) async fn site_mirror(
        self: &Arc<Self>,
        tenant: Uuid,
        kind: MirrorKind,
        id: Uuid,
    ) -> Result<Option<Mirror>, StoreError> {
        self.read(move |tx| {
            let ids = tx.open_table(SITE_MIRROR_IDS)?;
            let Some(key) = ids.get(mirror_id_key(tenant, kind, id).as_slice())? else {
                return Ok(None);
            };
            let t = tx.open_table(SITE_MIRRORS)?;
            t.get(key.value())?.map(|v| decode(v.value())).transpose()
        })
        .await
    }

    /// The tenant's mirrored objects in a problem state, every site's, in key order.
    pub(crate) async fn site_problem_mirrors(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Mirror>, StoreError> {
        self.read(move |tx| {
            let problems = tx.open_table(SITE_PROBLEMS)?;
            let t = tx.open_table(SITE_MIRRORS)?;
            let lo = mirror_prefix(tenant, MirrorKind::Object, None);
            let hi = past_prefix(&lo);
            let mut out = Vec::new();
            for row in problems.range(lo.as_slice()..hi.as_slice())? {
                if let Some(v) = t.get(row?.0.value())? {
                    out.push(decode(v.value())?);
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kv::{ReadTx, WriteTx};
    use crate::store::migrations::{MIGRATIONS, apply};
    use redb::{Database, ReadableDatabase};

    fn event(id: u128, kind: &str, object: u128, payload: serde_json::Value) -> Event {
        serde_json::from_value(serde_json::json!({
            "id": Uuid::from_u128(id), "tenantId": Uuid::nil(), "ts": "2026-12-06T06:00:00Z",
            "type": kind, "objectId": Uuid::from_u128(object), "payload": payload,
        }))
        .unwrap()
    }

    /// A store whose mirrors were kept before their indexes gets their rows from migration 25:
    /// each record's id row, and a problem row for the object in a problem state alone; a row
    /// that no longer reads is passed over.
    #[test]
    fn the_mirrors_kept_before_their_indexes_are_indexed_by_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("m.redb")).unwrap();
        let before = MIGRATIONS.iter().position(|m| m.version == 25).unwrap();
        apply(&db, &MIGRATIONS[..before]).unwrap();
        let tenant = Uuid::nil();
        let records = [
            event(1, "state_change", 10, serde_json::json!({"toState": 2})),
            event(2, "state_change", 11, serde_json::json!({"toState": 0})),
            event(
                3,
                "alert_opened",
                10,
                serde_json::json!({"alertId": Uuid::from_u128(12)}),
            ),
        ];
        let tx = WriteTx::from_redb(db.begin_write().unwrap());
        {
            let mut t = tx.open_table(SITE_MIRRORS).unwrap();
            for e in &records {
                let (kind, id) = mirror::key_of(e).unwrap();
                let m = mirror::fold(tenant, "north", None, e).unwrap();
                let key = mirror_key(tenant, kind, "north", id);
                t.insert(key.as_slice(), encode(&m).unwrap().as_slice())
                    .unwrap();
            }
            // A row that no longer reads does not stop the migration; it gets no index row.
            let broken = mirror_key(tenant, MirrorKind::Object, "north", Uuid::from_u128(13));
            t.insert(broken.as_slice(), b"not a mirror".as_slice())
                .unwrap();
        }
        tx.commit().unwrap();

        apply(&db, MIGRATIONS).unwrap();
        let read = ReadTx::from_redb(db.begin_read().unwrap());
        let ids = read.open_table(SITE_MIRROR_IDS).unwrap();
        for (kind, id) in [
            (MirrorKind::Object, 10),
            (MirrorKind::Object, 11),
            (MirrorKind::Alert, 12),
        ] {
            let at = ids
                .get(mirror_id_key(tenant, kind, Uuid::from_u128(id)).as_slice())
                .unwrap()
                .map(|v| v.value().to_vec());
            assert_eq!(
                at,
                Some(mirror_key(tenant, kind, "north", Uuid::from_u128(id)))
            );
        }
        let broken = mirror_id_key(tenant, MirrorKind::Object, Uuid::from_u128(13));
        assert!(ids.get(broken.as_slice()).unwrap().is_none());
        let problems: Vec<Vec<u8>> = read
            .open_table(SITE_PROBLEMS)
            .unwrap()
            .iter()
            .unwrap()
            .map(|r| r.unwrap().0.value().to_vec())
            .collect();
        assert_eq!(
            problems,
            vec![mirror_key(
                tenant,
                MirrorKind::Object,
                "north",
                Uuid::from_u128(10)
            )]
        );
    }
}
