//! Hosts and services by tenant and id (so id order is creation order), a name index (host
//! names per tenant, service names per host) and a host → services index for cascades.

use super::codec::{decode, encode};
use super::keys::{as_keys, scoped, stored_uuid, tenant_range};
use super::kv::{Readable, WriteTx};
use super::tables::{OBJECT_CHILDREN, OBJECT_NAMES, OBJECTS, STATES};
use super::{Store, StoreError, Tx};
use crate::model::object::{Object, ObjectKind};
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

pub(super) fn name_key(tenant: Uuid, kind: ObjectKind, host: Option<Uuid>, name: &str) -> Vec<u8> {
    let mut local = vec![kind.code()];
    local.extend_from_slice(host.unwrap_or_else(Uuid::nil).as_bytes());
    local.extend_from_slice(name.as_bytes());
    scoped(tenant, &local)
}

fn child_key(tenant: Uuid, host: Uuid, service: Uuid) -> Vec<u8> {
    let mut local = host.as_bytes().to_vec();
    local.extend_from_slice(service.as_bytes());
    scoped(tenant, &local)
}

pub(super) fn get(tx: &WriteTx, tenant: Uuid, id: Uuid) -> Result<Option<Object>, StoreError> {
    let t = tx.open_table(OBJECTS)?;
    t.get(scoped(tenant, id.as_bytes()).as_slice())?
        .map(|v| decode(v.value()))
        .transpose()
}

pub(super) fn put(tx: &WriteTx, o: &Object) -> Result<(), StoreError> {
    tx.open_table(OBJECTS)?.insert(
        scoped(o.tenant_id, o.id.as_bytes()).as_slice(),
        encode(o)?.as_slice(),
    )?;
    Ok(())
}

fn remove(tx: &WriteTx, o: &Object) -> Result<(), StoreError> {
    tx.open_table(STATES)?
        .remove(scoped(o.tenant_id, o.id.as_bytes()).as_slice())?;
    tx.open_table(OBJECTS)?
        .remove(scoped(o.tenant_id, o.id.as_bytes()).as_slice())?;
    tx.open_table(OBJECT_NAMES)?
        .remove(name_key(o.tenant_id, o.kind, o.host_id, &o.name).as_slice())?;
    if let Some(h) = o.host_id {
        tx.open_table(OBJECT_CHILDREN)?
            .remove(child_key(o.tenant_id, h, o.id).as_slice())?;
    }
    Ok(())
}

/// Inserts a new object; a taken name is `Duplicate`.
pub(super) fn insert(tx: &WriteTx, o: &Object) -> Result<(), StoreError> {
    let mut names = tx.open_table(OBJECT_NAMES)?;
    let key = name_key(o.tenant_id, o.kind, o.host_id, &o.name);
    if names.get(key.as_slice())?.is_some() {
        return Err(StoreError::Duplicate(format!("{:?}", o.name)));
    }
    if let Some(h) = o.host_id {
        if get(tx, o.tenant_id, h)?.is_none() {
            return Err(StoreError::NotFound);
        }
        tx.open_table(OBJECT_CHILDREN)?
            .insert(child_key(o.tenant_id, h, o.id).as_slice(), ())?;
    }
    names.insert(key.as_slice(), o.id.as_bytes().as_slice())?;
    drop(names);
    put(tx, o)
}

/// Hosts and services in a transaction.
impl Tx<'_> {
    /// Reads ahead, in a few queries, what writing `objects` reads one at a time: their name
    /// index entries, the objects those name (an upsert replaces them) and their hosts. On
    /// PostgreSQL a batch of a thousand then costs a few round trips, not thousands; nothing on
    /// redb, whose reads are local.
    pub(crate) fn read_ahead_objects(&self, objects: &[&Object]) -> Result<(), StoreError> {
        if !self.reads_are_remote() || objects.is_empty() {
            return Ok(());
        }
        let names: Vec<Vec<u8>> = objects
            .iter()
            .map(|o| name_key(o.tenant_id, o.kind, o.host_id, &o.name))
            .collect();
        let index = self.open_table(OBJECT_NAMES)?;
        let named = index.get_each(&as_keys(&names))?;
        let mut wanted: Vec<Vec<u8>> = objects
            .iter()
            .zip(named)
            .filter_map(|(o, id)| Some(scoped(o.tenant_id, id?.value())))
            .collect();
        wanted.extend(
            objects
                .iter()
                .filter_map(|o| Some(scoped(o.tenant_id, o.host_id?.as_bytes()))),
        );
        wanted.sort();
        wanted.dedup();
        self.open_table(OBJECTS)?.prefetch(&as_keys(&wanted))
    }

    /// The id of the tenant's host (`host` none) or of a host's service named `name`.
    pub(crate) fn object_named(
        &self,
        tenant: Uuid,
        kind: ObjectKind,
        host: Option<Uuid>,
        name: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        self.open_table(OBJECT_NAMES)?
            .get(name_key(tenant, kind, host, name).as_slice())?
            .map(|v| stored_uuid(v.value(), "an object name's id"))
            .transpose()
    }

    /// Saves a new object with its name index; a name in use is refused.
    pub(crate) fn insert_object(&self, object: &Object) -> Result<(), StoreError> {
        insert(self, object)
    }

    /// Saves a changed object (its name and host unchanged).
    pub(crate) fn put_object(&self, object: &Object) -> Result<(), StoreError> {
        put(self, object)
    }

    /// Deletes an object, and a host's services with it; the object.
    pub(crate) fn delete_object(&self, tenant: Uuid, id: Uuid) -> Result<Object, StoreError> {
        delete_cascade(self, tenant, id)
    }
}

fn delete_cascade(tx: &WriteTx, tenant: Uuid, id: Uuid) -> Result<Object, StoreError> {
    let old = get(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
    let children: Vec<Uuid> = {
        let c = tx.open_table(OBJECT_CHILDREN)?;
        let lo = child_key(tenant, id, Uuid::nil());
        let hi = child_key(tenant, id, Uuid::max());
        let mut ids = Vec::new();
        for row in c.range(lo.as_slice()..=hi.as_slice())? {
            let (k, _) = row?;
            ids.push(stored_uuid(&k.value()[32..], "a child's id")?);
        }
        ids
    };
    for child in &children {
        if let Some(s) = get(tx, tenant, *child)? {
            remove(tx, &s)?;
        }
    }
    remove(tx, &old)?;
    Ok(old)
}

/// Every object of a tenant, in a write transaction.
pub(super) fn tenant_objects(tx: &WriteTx, tenant: Uuid) -> Result<Vec<Object>, StoreError> {
    let t = tx.open_table(OBJECTS)?;
    super::codec::tenant_values(&t, tenant)
}

impl Store {
    pub(crate) async fn object(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Object, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS)?;
            let v = t
                .get(scoped(tenant, id.as_bytes()).as_slice())?
                .ok_or(StoreError::NotFound)?;
            decode(v.value())
        })
        .await
    }

    pub(crate) async fn host_by_name(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
    ) -> Result<Option<Object>, StoreError> {
        self.read(move |tx| {
            let names = tx.open_table(OBJECT_NAMES)?;
            let Some(id) = names
                .get(name_key(tenant, ObjectKind::Host, None, &name).as_slice())?
                .map(|v| stored_uuid(v.value(), "a host name's id"))
                .transpose()?
            else {
                return Ok(None);
            };
            let t = tx.open_table(OBJECTS)?;
            t.get(scoped(tenant, id.as_bytes()).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    /// Objects in id order after `after`, at most `limit` that `keep` accepts.
    pub(crate) async fn objects(
        self: &Arc<Self>,
        tenant: Uuid,
        after: Option<Uuid>,
        limit: usize,
        keep: impl Fn(&Object) -> bool + Send + 'static,
    ) -> Result<Vec<Object>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS)?;
            let (lo, hi) = tenant_range(tenant);
            let start = match after {
                Some(a) => {
                    let mut k = scoped(tenant, a.as_bytes());
                    k.push(0);
                    k
                }
                None => lo,
            };
            let mut out = Vec::new();
            for row in t.range(start.as_slice()..hi.as_slice())? {
                let o: Object = decode(row?.1.value())?;
                if keep(&o) {
                    out.push(o);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// Names of the given hosts.
    pub(crate) async fn host_names(
        self: &Arc<Self>,
        tenant: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<HashMap<Uuid, String>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS)?;
            let mut out = HashMap::new();
            for id in ids {
                if let Some(v) = t.get(scoped(tenant, id.as_bytes()).as_slice())? {
                    out.insert(id, decode::<Object>(v.value())?.name);
                }
            }
            Ok(out)
        })
        .await
    }
}
