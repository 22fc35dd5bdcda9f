//! Configuration documents by tenant, kind and name, with an id index (templates are also
//! addressed by UUID); a name in use, or for some kinds used in another tenant, is refused.

use super::codec::{decode, encode};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::secrets::put_sealed;
use super::tables::{CONFIG_DOCS, CONFIG_IDS, TENANTS};
use super::{Store, StoreError, Tx};
use crate::model::config::{ConfigDoc, unique_across_tenants};
use crate::model::secret::StoredSecret;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// tenant + kind length + kind, the prefix of every document of a kind.
pub(super) fn kind_prefix(tenant: Uuid, kind: &str) -> Vec<u8> {
    let mut local = vec![u8::try_from(kind.len()).unwrap_or(u8::MAX)];
    local.extend_from_slice(kind.as_bytes());
    scoped(tenant, &local)
}

pub(super) fn doc_key(tenant: Uuid, kind: &str, name: &str) -> Vec<u8> {
    let mut k = kind_prefix(tenant, kind);
    k.extend_from_slice(name.as_bytes());
    k
}

pub(super) fn load(tx: &WriteTx, key: &[u8]) -> Result<Option<ConfigDoc>, StoreError> {
    let docs = tx.open_table(CONFIG_DOCS)?;
    docs.get(key)?.map(|v| decode(v.value())).transpose()
}

pub(super) fn put(tx: &WriteTx, doc: &ConfigDoc) -> Result<(), StoreError> {
    let key = doc_key(doc.tenant_id, &doc.kind, &doc.name);
    tx.open_table(CONFIG_DOCS)?
        .insert(key.as_slice(), encode(doc)?.as_slice())?;
    tx.open_table(CONFIG_IDS)?.insert(
        scoped(doc.tenant_id, doc.id.as_bytes()).as_slice(),
        key.as_slice(),
    )?;
    Ok(())
}

/// A document of a kind whose names are unique across tenants may not take a name another
/// tenant holds (a duplicate, as within one tenant).
/// Removes a document and its id; the document, when there was one.
fn remove(
    tx: &WriteTx,
    tenant: Uuid,
    kind: &str,
    name: &str,
) -> Result<Option<ConfigDoc>, StoreError> {
    let key = doc_key(tenant, kind, name);
    let Some(old) = load(tx, &key)? else {
        return Ok(None);
    };
    tx.open_table(CONFIG_DOCS)?.remove(key.as_slice())?;
    tx.open_table(CONFIG_IDS)?
        .remove(scoped(tenant, old.id.as_bytes()).as_slice())?;
    Ok(Some(old))
}

/// Configuration documents in a transaction.
impl Tx<'_> {
    /// Saves a document (created or changed) with its id index.
    pub fn put_config_doc(&self, doc: &ConfigDoc) -> Result<(), StoreError> {
        put(self, doc)
    }

    /// Saves a new document: a name the tenant has (or, for kinds named across tenants, any
    /// tenant has) is a `Duplicate`.
    pub fn insert_config_doc(&self, doc: &ConfigDoc) -> Result<(), StoreError> {
        if load(self, &doc_key(doc.tenant_id, &doc.kind, &doc.name))?.is_some() {
            return Err(StoreError::Duplicate(format!(
                "{} {:?}",
                doc.kind, doc.name
            )));
        }
        check_unique_across_tenants(self, doc.tenant_id, &doc.kind, &doc.name)?;
        put(self, doc)
    }

    /// Refuses a new document whose name another tenant uses, for kinds named across tenants.
    pub(crate) fn check_doc_name_free(
        &self,
        tenant: Uuid,
        kind: &str,
        name: &str,
    ) -> Result<(), StoreError> {
        check_unique_across_tenants(self, tenant, kind, name)
    }

    /// Removes a document; the document, when there was one.
    pub(crate) fn remove_config_doc(
        &self,
        tenant: Uuid,
        kind: &str,
        name: &str,
    ) -> Result<Option<ConfigDoc>, StoreError> {
        remove(self, tenant, kind, name)
    }

    /// Seals and saves a secret a document names.
    pub(crate) fn put_secret(&self, secret: &mut StoredSecret) -> Result<(), StoreError> {
        put_sealed(self, secret)
    }
}

pub(super) fn check_unique_across_tenants(
    tx: &WriteTx,
    tenant: Uuid,
    kind: &str,
    name: &str,
) -> Result<(), StoreError> {
    if !unique_across_tenants(kind) {
        return Ok(());
    }
    let tenants = tx.open_table(TENANTS)?;
    for row in tenants.iter()? {
        let other = Uuid::from_u128(row?.0.value());
        if other != tenant && load(tx, &doc_key(other, kind, name))?.is_some() {
            return Err(StoreError::Duplicate(format!(
                "{kind} {name:?} (in another tenant: {kind} names are unique across tenants)"
            )));
        }
    }
    Ok(())
}

impl Store {
    /// The document of a kind named across tenants (`unique_across_tenants`) and its tenant.
    /// Should an older data directory hold one name twice, the default tenant's wins, then the
    /// oldest tenant's.
    pub(crate) async fn doc_in_any_tenant(
        self: &Arc<Self>,
        kind: &'static str,
        name: &str,
    ) -> Result<Option<(Uuid, ConfigDoc)>, StoreError> {
        let default = self.default_tenant().await?.id;
        let mut tenants: Vec<Uuid> = self.tenants().await?.into_iter().map(|t| t.id).collect();
        tenants.sort_by_key(|t| (*t != default, *t));
        for t in tenants {
            match self.doc(t, kind, name.to_string(), false).await {
                Ok(doc) => return Ok(Some((t, doc))),
                Err(StoreError::NotFound) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// A document by name, or by id when `by_id` allows it (templates).
    pub(crate) async fn doc(
        self: &Arc<Self>,
        tenant: Uuid,
        kind: &'static str,
        name: String,
        by_id: bool,
    ) -> Result<ConfigDoc, StoreError> {
        self.read(move |tx| {
            let docs = tx.open_table(CONFIG_DOCS)?;
            if let Some(v) = docs.get(doc_key(tenant, kind, &name).as_slice())? {
                return decode(v.value());
            }
            let Some(id) = by_id.then(|| Uuid::parse_str(&name).ok()).flatten() else {
                return Err(StoreError::NotFound);
            };
            let ids = tx.open_table(CONFIG_IDS)?;
            let key = ids
                .get(scoped(tenant, id.as_bytes()).as_slice())?
                .ok_or(StoreError::NotFound)?;
            let doc: ConfigDoc =
                decode(docs.get(key.value())?.ok_or(StoreError::NotFound)?.value())?;
            if doc.kind == kind {
                Ok(doc)
            } else {
                Err(StoreError::NotFound)
            }
        })
        .await
    }

    /// Documents of a kind by name ascending, after `cursor`, keeping those `keep` accepts.
    pub(crate) async fn docs(
        self: &Arc<Self>,
        tenant: Uuid,
        kind: &'static str,
        cursor: Option<String>,
        limit: usize,
        keep: impl Fn(&ConfigDoc) -> bool + Send + 'static,
    ) -> Result<Vec<ConfigDoc>, StoreError> {
        self.read(move |tx| {
            let docs = tx.open_table(CONFIG_DOCS)?;
            let prefix = kind_prefix(tenant, kind);
            let start = match &cursor {
                Some(c) => {
                    let mut k = doc_key(tenant, kind, c);
                    k.push(0);
                    k
                }
                None => prefix.clone(),
            };
            let mut out = Vec::new();
            for row in docs.range(start.as_slice()..)? {
                let (k, v) = row?;
                if !k.value().starts_with(&prefix) {
                    break;
                }
                let doc: ConfigDoc = decode(v.value())?;
                if keep(&doc) {
                    out.push(doc);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}

impl Store {
    /// Every template of a tenant by name, with its labels (for effective labels).
    pub(crate) async fn template_labels(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<HashMap<String, BTreeMap<String, String>>, StoreError> {
        let docs = self
            .docs(tenant, "templates", None, usize::MAX, |_| true)
            .await?;
        Ok(docs
            .into_iter()
            .map(|d| {
                let labels = crate::model::config::template_labels(&d.body);
                (d.name, labels)
            })
            .collect())
    }

    /// Every template of a tenant by name, with its object spec (for resolving chains).
    pub(crate) async fn template_specs(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<HashMap<String, crate::model::config::ObjectSpec>, StoreError> {
        let docs = self
            .docs(tenant, "templates", None, usize::MAX, |_| true)
            .await?;
        Ok(docs
            .into_iter()
            .map(|d| {
                let spec = crate::model::config::template_spec(&d.body);
                (d.name, spec)
            })
            .collect())
    }
}
