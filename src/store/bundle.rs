//! A bundle apply: every change of the plan in one transaction with its audit entries, so a
//! bundle applies all or nothing.

use super::config::{check_unique_across_tenants, doc_key, load, put as put_doc};
use super::keys::scoped;
use super::objects::{delete_cascade, get as get_object, insert, name_key, put as put_object};
use super::secrets::put_sealed;
use super::tables::{CONFIG_DOCS, CONFIG_IDS, OBJECT_NAMES};
use super::{Store, StoreError};
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::bundle::BundleOp;
use crate::model::config::ConfigDoc;
use crate::model::event::EventDraft;
use crate::model::identity::Actor;
use crate::model::object::{Object, ObjectKind};
use redb::{ReadableTable, WriteTransaction};
use std::sync::Arc;
use uuid::Uuid;

fn object_id(
    tx: &WriteTransaction,
    tenant: Uuid,
    kind: ObjectKind,
    host: Option<Uuid>,
    name: &str,
) -> Result<Option<Uuid>, StoreError> {
    let names = tx.open_table(OBJECT_NAMES).map_err(StoreError::from_redb)?;
    Ok(names
        .get(name_key(tenant, kind, host, name).as_slice())
        .map_err(StoreError::from_redb)?
        .and_then(|v| Uuid::from_slice(v.value()).ok()))
}

/// The host a service names, which must exist by now (earlier operations included).
fn host_id(
    tx: &WriteTransaction,
    tenant: Uuid,
    host: &Option<String>,
) -> Result<Option<Uuid>, StoreError> {
    match host {
        None => Ok(None),
        Some(h) => object_id(tx, tenant, ObjectKind::Host, None, h)?
            .map(Some)
            .ok_or_else(|| StoreError::Conflict(format!("no host {h:?}"))),
    }
}

impl Store {
    /// Applies `ops` in order in one transaction, with an audit entry per document and
    /// `events` journaled; `ids` supplies ids for what is created. An error names the
    /// operation and leaves everything as it was.
    pub async fn apply_bundle(
        self: &Arc<Self>,
        tenant: Uuid,
        ops: Vec<BundleOp>,
        ids: Vec<Uuid>,
        now: Timestamp,
        actor: Actor,
        events: Vec<EventDraft>,
    ) -> Result<usize, StoreError> {
        let store = self.clone();
        self.write_catalog(move |tx| {
            let mut audits = Vec::new();
            let mut ids = ids.into_iter();
            let mut fresh = || {
                ids.next()
                    .ok_or_else(|| StoreError::Internal("ran out of ids".into()))
            };
            let count = ops.len();
            for (i, op) in ops.into_iter().enumerate() {
                let audit = |action: &str, resource: String| {
                    AuditDraft::new(now, tenant, &actor, action, resource)
                };
                let fail = |e: StoreError, what: &str| {
                    StoreError::Conflict(format!("document {} ({what}): {e}", i + 1))
                };
                match op {
                    BundleOp::PutDoc {
                        kind,
                        name,
                        body,
                        secrets,
                    } => {
                        let what = format!("{kind} {name:?}");
                        let doc = match load(tx, &doc_key(tenant, kind, &name))? {
                            Some(old) => ConfigDoc {
                                body,
                                updated_at: now,
                                version: old.version + 1,
                                ..old
                            },
                            None => {
                                check_unique_across_tenants(tx, tenant, kind, &name)
                                    .map_err(|e| fail(e, &what))?;
                                ConfigDoc {
                                    id: fresh()?,
                                    tenant_id: tenant,
                                    kind: kind.to_string(),
                                    name: name.clone(),
                                    created_at: now,
                                    updated_at: now,
                                    version: 1,
                                    body,
                                }
                            }
                        };
                        put_doc(tx, &doc).map_err(|e| fail(e, &what))?;
                        for mut secret in secrets {
                            put_sealed(tx, &mut secret).map_err(|e| fail(e, &what))?;
                        }
                        audits.push(
                            audit("bundle.apply", format!("{kind}/{name}")).after(doc.to_json()),
                        );
                    }
                    BundleOp::DeleteDoc { kind, name } => {
                        let key = doc_key(tenant, kind, &name);
                        if let Some(old) = load(tx, &key)? {
                            tx.open_table(CONFIG_DOCS)
                                .map_err(StoreError::from_redb)?
                                .remove(key.as_slice())
                                .map_err(StoreError::from_redb)?;
                            tx.open_table(CONFIG_IDS)
                                .map_err(StoreError::from_redb)?
                                .remove(scoped(tenant, old.id.as_bytes()).as_slice())
                                .map_err(StoreError::from_redb)?;
                            audits.push(
                                audit("bundle.prune", format!("{kind}/{name}"))
                                    .before(old.to_json()),
                            );
                        }
                    }
                    BundleOp::PutObject {
                        host,
                        name,
                        folder,
                        labels,
                        spec,
                    } => {
                        let what = format!(
                            "{} {name:?}",
                            if host.is_some() { "service" } else { "host" }
                        );
                        let owner = host_id(tx, tenant, &host).map_err(|e| fail(e, &what))?;
                        let kind = if owner.is_some() {
                            ObjectKind::Service
                        } else {
                            ObjectKind::Host
                        };
                        let existing = match object_id(tx, tenant, kind, owner, &name)? {
                            Some(id) => get_object(tx, tenant, id)?,
                            None => None,
                        };
                        let object = match existing {
                            Some(old) => {
                                let new = Object {
                                    folder,
                                    labels,
                                    spec: *spec,
                                    updated_at: now,
                                    version: old.version + 1,
                                    ..old
                                };
                                put_object(tx, &new)?;
                                new
                            }
                            None => {
                                let new = Object {
                                    id: fresh()?,
                                    tenant_id: tenant,
                                    kind,
                                    name: name.clone(),
                                    folder,
                                    host_id: owner,
                                    labels,
                                    spec: *spec,
                                    created_at: now,
                                    updated_at: now,
                                    version: 1,
                                };
                                insert(tx, &new).map_err(|e| fail(e, &what))?;
                                new
                            }
                        };
                        audits.push(audit("bundle.apply", what.clone()).after(&object));
                    }
                    BundleOp::DeleteObject { host, name } => {
                        let owner = match &host {
                            Some(h) => match object_id(tx, tenant, ObjectKind::Host, None, h)? {
                                Some(id) => Some(id),
                                None => continue,
                            },
                            None => None,
                        };
                        let kind = if host.is_some() {
                            ObjectKind::Service
                        } else {
                            ObjectKind::Host
                        };
                        if let Some(id) = object_id(tx, tenant, kind, owner, &name)? {
                            let (old, _) = delete_cascade(tx, tenant, id)?;
                            audits.push(
                                audit("bundle.prune", format!("object/{}", old.id)).before(&old),
                            );
                        }
                    }
                }
            }
            store.record(tx, audits, events)?;
            Ok(count)
        })
        .await
    }
}
