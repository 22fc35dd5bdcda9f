//! Hosts and services by tenant and id (so id order is creation order), a name index (host
//! names per tenant, service names per host) and a host → services index for cascades.

use super::codec::{decode, encode};
use super::journal::Record;
use super::keys::{scoped, tenant_range};
use super::tables::{OBJECT_CHILDREN, OBJECT_NAMES, OBJECTS, STATES};
use super::{Store, StoreError, Tx};
use crate::model::audit::AuditDraft;
use crate::model::event::EventDraft;
use crate::model::object::{Object, ObjectKind};
use redb::{ReadableTable, WriteTransaction};
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

pub(super) fn get(
    tx: &WriteTransaction,
    tenant: Uuid,
    id: Uuid,
) -> Result<Option<Object>, StoreError> {
    let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
    t.get(scoped(tenant, id.as_bytes()).as_slice())
        .map_err(StoreError::from_redb)?
        .map(|v| decode(v.value()))
        .transpose()
}

pub(super) fn put(tx: &WriteTransaction, o: &Object) -> Result<(), StoreError> {
    tx.open_table(OBJECTS)
        .map_err(StoreError::from_redb)?
        .insert(
            scoped(o.tenant_id, o.id.as_bytes()).as_slice(),
            encode(o)?.as_slice(),
        )
        .map_err(StoreError::from_redb)?;
    Ok(())
}

fn remove(tx: &WriteTransaction, o: &Object) -> Result<(), StoreError> {
    tx.open_table(STATES)
        .map_err(StoreError::from_redb)?
        .remove(scoped(o.tenant_id, o.id.as_bytes()).as_slice())
        .map_err(StoreError::from_redb)?;
    tx.open_table(OBJECTS)
        .map_err(StoreError::from_redb)?
        .remove(scoped(o.tenant_id, o.id.as_bytes()).as_slice())
        .map_err(StoreError::from_redb)?;
    tx.open_table(OBJECT_NAMES)
        .map_err(StoreError::from_redb)?
        .remove(name_key(o.tenant_id, o.kind, o.host_id, &o.name).as_slice())
        .map_err(StoreError::from_redb)?;
    if let Some(h) = o.host_id {
        tx.open_table(OBJECT_CHILDREN)
            .map_err(StoreError::from_redb)?
            .remove(child_key(o.tenant_id, h, o.id).as_slice())
            .map_err(StoreError::from_redb)?;
    }
    Ok(())
}

/// Inserts a new object; a taken name is `Duplicate`.
pub(super) fn insert(tx: &WriteTransaction, o: &Object) -> Result<(), StoreError> {
    let mut names = tx.open_table(OBJECT_NAMES).map_err(StoreError::from_redb)?;
    let key = name_key(o.tenant_id, o.kind, o.host_id, &o.name);
    if names
        .get(key.as_slice())
        .map_err(StoreError::from_redb)?
        .is_some()
    {
        return Err(StoreError::Duplicate(format!("{:?}", o.name)));
    }
    if let Some(h) = o.host_id {
        if get(tx, o.tenant_id, h)?.is_none() {
            return Err(StoreError::NotFound);
        }
        tx.open_table(OBJECT_CHILDREN)
            .map_err(StoreError::from_redb)?
            .insert(child_key(o.tenant_id, h, o.id).as_slice(), ())
            .map_err(StoreError::from_redb)?;
    }
    names
        .insert(key.as_slice(), o.id.as_bytes().as_slice())
        .map_err(StoreError::from_redb)?;
    drop(names);
    put(tx, o)
}

/// Removes an object and, for a host, its services; returns it and how many services went.
/// Hosts and services in a transaction.
impl Tx<'_> {
    /// The id of the tenant's host (`host` none) or of a host's service named `name`.
    pub fn object_named(
        &self,
        tenant: Uuid,
        kind: ObjectKind,
        host: Option<Uuid>,
        name: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        Ok(self
            .open_table(OBJECT_NAMES)
            .map_err(StoreError::from_redb)?
            .get(name_key(tenant, kind, host, name).as_slice())
            .map_err(StoreError::from_redb)?
            .and_then(|v| Uuid::from_slice(v.value()).ok()))
    }

    /// Saves a new object with its name index; a name in use is refused.
    pub fn insert_object(&self, object: &Object) -> Result<(), StoreError> {
        insert(self, object)
    }

    /// Saves a changed object (its name and host unchanged).
    pub fn put_object(&self, object: &Object) -> Result<(), StoreError> {
        put(self, object)
    }

    /// Deletes an object, and a host's services with it; the object.
    pub fn delete_object(&self, tenant: Uuid, id: Uuid) -> Result<Object, StoreError> {
        delete_cascade(self, tenant, id).map(|(old, _)| old)
    }
}

pub(super) fn delete_cascade(
    tx: &WriteTransaction,
    tenant: Uuid,
    id: Uuid,
) -> Result<(Object, usize), StoreError> {
    let old = get(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
    let children: Vec<Uuid> = {
        let c = tx
            .open_table(OBJECT_CHILDREN)
            .map_err(StoreError::from_redb)?;
        let lo = child_key(tenant, id, Uuid::nil());
        let hi = child_key(tenant, id, Uuid::max());
        let mut ids = Vec::new();
        for row in c
            .range(lo.as_slice()..=hi.as_slice())
            .map_err(StoreError::from_redb)?
        {
            let (k, _) = row.map_err(StoreError::from_redb)?;
            ids.extend(Uuid::from_slice(&k.value()[32..]).ok());
        }
        ids
    };
    for child in &children {
        if let Some(s) = get(tx, tenant, *child)? {
            remove(tx, &s)?;
        }
    }
    remove(tx, &old)?;
    Ok((old, children.len()))
}

/// Every object of a tenant, in a write transaction.
pub(super) fn tenant_objects(
    tx: &WriteTransaction,
    tenant: Uuid,
) -> Result<Vec<Object>, StoreError> {
    let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
    super::codec::tenant_values(&t, tenant)
}

/// What one batch item does.
pub enum ObjectWrite {
    Create(Box<Object>, AuditDraft),
    /// Replace an existing object's fields (name and host unchanged).
    Upsert(Box<Object>, AuditDraft),
}

impl Store {
    /// Applies the writes in one transaction; each item succeeds or fails on its own
    /// (a taken name, a missing host), other errors abort the whole transaction. Each
    /// written item's audit entry, and the events `events` makes of the outcomes, are recorded
    /// in that transaction.
    pub async fn write_objects(
        self: &Arc<Self>,
        writes: Vec<ObjectWrite>,
        events: impl FnOnce(&[Result<Object, StoreError>]) -> Vec<EventDraft> + Send + 'static,
    ) -> Result<Vec<Result<Object, StoreError>>, StoreError> {
        let store = self.clone();
        self.transact_catalog(move |tx| {
            let mut out = Vec::with_capacity(writes.len());
            let mut audits = Vec::new();
            for w in writes {
                let result = match w {
                    ObjectWrite::Create(o, audit) => match insert(tx, &o) {
                        Ok(()) => {
                            audits.push(audit.after(&*o));
                            Ok(*o)
                        }
                        Err(e @ (StoreError::Duplicate(_) | StoreError::NotFound)) => Err(e),
                        Err(e) => return Err(e),
                    },
                    ObjectWrite::Upsert(o, audit) => {
                        let key = name_key(o.tenant_id, o.kind, o.host_id, &o.name);
                        let existing = {
                            let names =
                                tx.open_table(OBJECT_NAMES).map_err(StoreError::from_redb)?;
                            names
                                .get(key.as_slice())
                                .map_err(StoreError::from_redb)?
                                .and_then(|v| Uuid::from_slice(v.value()).ok())
                        };
                        match existing
                            .map(|id| get(tx, o.tenant_id, id))
                            .transpose()?
                            .flatten()
                        {
                            Some(old) => {
                                let mut new = *o;
                                new.id = old.id;
                                new.created_at = old.created_at;
                                new.version = old.version + 1;
                                put(tx, &new)?;
                                audits.push(audit.before(&old).after(&new));
                                Ok(new)
                            }
                            None => match insert(tx, &o) {
                                Ok(()) => {
                                    audits.push(audit.after(&*o));
                                    Ok(*o)
                                }
                                Err(e @ (StoreError::Duplicate(_) | StoreError::NotFound)) => {
                                    Err(e)
                                }
                                Err(e) => return Err(e),
                            },
                        }
                    }
                };
                out.push(result);
            }
            if audits.is_empty() {
                tx.unrecorded("a batch none of whose items was written");
            }
            store.record(tx, audits, events(&out))?;
            Ok(out)
        })
        .await
    }

    pub async fn object(self: &Arc<Self>, tenant: Uuid, id: Uuid) -> Result<Object, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
            let v = t
                .get(scoped(tenant, id.as_bytes()).as_slice())
                .map_err(StoreError::from_redb)?
                .ok_or(StoreError::NotFound)?;
            decode(v.value())
        })
        .await
    }

    pub async fn host_by_name(
        self: &Arc<Self>,
        tenant: Uuid,
        name: String,
    ) -> Result<Option<Object>, StoreError> {
        self.read(move |tx| {
            let names = tx.open_table(OBJECT_NAMES).map_err(StoreError::from_redb)?;
            let Some(id) = names
                .get(name_key(tenant, ObjectKind::Host, None, &name).as_slice())
                .map_err(StoreError::from_redb)?
                .and_then(|v| Uuid::from_slice(v.value()).ok())
            else {
                return Ok(None);
            };
            let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
            t.get(scoped(tenant, id.as_bytes()).as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode(v.value()))
                .transpose()
        })
        .await
    }

    /// Replaces an object if `expected` is its stored version, with its record (audit entry,
    /// events) in the same transaction.
    pub async fn update_object(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        expected: u64,
        change: impl FnOnce(&mut Object) + Send + 'static,
        record: Record,
    ) -> Result<Object, StoreError> {
        self.mutate_catalog(record, move |tx, audit| {
            let old = get(tx, tenant, id)?.ok_or(StoreError::NotFound)?;
            super::check_version(old.version, expected)?;
            let mut new = old.clone();
            change(&mut new);
            new.version = old.version + 1;
            put(tx, &new)?;
            let audit = audit.before(&old).after(&new);
            Ok((new, audit))
        })
        .await
    }

    /// Deletes an object, and a host's services with it, with its record in the same
    /// transaction.
    pub async fn delete_object(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        record: Record,
    ) -> Result<(), StoreError> {
        self.mutate_catalog(record, move |tx, audit| {
            let (old, _) = delete_cascade(tx, tenant, id)?;
            Ok(((), audit.before(&old)))
        })
        .await
    }

    /// Objects in id order after `after`, at most `limit` that `keep` accepts.
    pub async fn objects(
        self: &Arc<Self>,
        tenant: Uuid,
        after: Option<Uuid>,
        limit: usize,
        keep: impl Fn(&Object) -> bool + Send + 'static,
    ) -> Result<Vec<Object>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
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
            for row in t
                .range(start.as_slice()..hi.as_slice())
                .map_err(StoreError::from_redb)?
            {
                let o: Object = decode(row.map_err(StoreError::from_redb)?.1.value())?;
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
    pub async fn host_names(
        self: &Arc<Self>,
        tenant: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<HashMap<Uuid, String>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OBJECTS).map_err(StoreError::from_redb)?;
            let mut out = HashMap::new();
            for id in ids {
                if let Some(v) = t
                    .get(scoped(tenant, id.as_bytes()).as_slice())
                    .map_err(StoreError::from_redb)?
                {
                    out.insert(id, decode::<Object>(v.value())?.name);
                }
            }
            Ok(out)
        })
        .await
    }
}
