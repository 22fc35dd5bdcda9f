//! Tenants: the default one made at first start, lookups by id and slug.

use super::codec::{decode, encode};

use super::kv::Readable;
use super::tables::{TENANT_SLUGS, TENANTS};
use super::{Store, StoreError, Tx};
use crate::model::{DEFAULT_TENANT_SLUG, Tenant, Timestamp};
use std::sync::Arc;
use uuid::Uuid;

impl Store {
    pub(super) fn ensure_default_tenant_blocking(
        &self,
        id: Uuid,
        now: Timestamp,
    ) -> Result<Tenant, StoreError> {
        self.write_blocking(move |tx| {
            tx.unrecorded("the default tenant, made at the first start");
            let mut slugs = tx.open_table(TENANT_SLUGS)?;
            let mut tenants = tx.open_table(TENANTS)?;
            if let Some(existing) = slugs.get(DEFAULT_TENANT_SLUG)? {
                let id = existing.value();
                let row = tenants.get(id)?.ok_or_else(|| {
                    StoreError::Corrupt("default tenant slug points at no tenant".into())
                })?;
                return decode(row.value());
            }
            let tenant = Tenant {
                id,
                slug: DEFAULT_TENANT_SLUG.into(),
                name: "Default".into(),
                email_domains: Vec::new(),
                created_at: now,
                updated_at: now,
                version: 1,
            };
            tenants.insert(id.as_u128(), encode(&tenant)?.as_slice())?;
            slugs.insert(DEFAULT_TENANT_SLUG, id.as_u128())?;
            tracing::info!(tenant = %id, "default tenant created");
            Ok(tenant)
        })
    }

    pub(crate) async fn default_tenant(self: &Arc<Self>) -> Result<Tenant, StoreError> {
        self.tenant_by_slug(DEFAULT_TENANT_SLUG).await
    }

    async fn tenant_by_slug(self: &Arc<Self>, slug: &str) -> Result<Tenant, StoreError> {
        let slug = slug.to_string();
        self.read(move |tx| {
            let slugs = tx.open_table(TENANT_SLUGS)?;
            let id = slugs
                .get(slug.as_str())?
                .ok_or(StoreError::NotFound)?
                .value();
            let tenants = tx.open_table(TENANTS)?;
            let row = tenants.get(id)?.ok_or(StoreError::NotFound)?;
            decode(row.value())
        })
        .await
    }

    pub(crate) async fn tenant(self: &Arc<Self>, id: Uuid) -> Result<Tenant, StoreError> {
        self.read(move |tx| {
            let tenants = tx.open_table(TENANTS)?;
            let row = tenants.get(id.as_u128())?.ok_or(StoreError::NotFound)?;
            decode(row.value())
        })
        .await
    }

    pub async fn tenants(self: &Arc<Self>) -> Result<Vec<Tenant>, StoreError> {
        self.read(|tx| all_tenants(&tx.open_table(TENANTS)?)).await
    }
}

/// Tenants in a transaction.
impl Tx<'_> {
    /// Saves a new tenant: a slug in use is a `Duplicate`.
    pub(crate) fn insert_tenant(&self, tenant: &Tenant) -> Result<(), StoreError> {
        let mut slugs = self.open_table(TENANT_SLUGS)?;
        if slugs.get(tenant.slug.as_str())?.is_some() {
            return Err(StoreError::Duplicate(format!("tenant {:?}", tenant.slug)));
        }
        slugs.insert(tenant.slug.as_str(), tenant.id.as_u128())?;
        self.save_tenant(tenant)
    }

    /// Saves a changed tenant (its slug stays).
    pub(crate) fn save_tenant(&self, tenant: &Tenant) -> Result<(), StoreError> {
        self.open_table(TENANTS)?
            .insert(tenant.id.as_u128(), encode(tenant)?.as_slice())?;
        Ok(())
    }

    pub(crate) fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        all_tenants(&self.open_table(TENANTS)?)
    }

    pub(crate) fn tenant(&self, id: Uuid) -> Result<Option<Tenant>, StoreError> {
        let tenants = self.open_table(TENANTS)?;
        tenants
            .get(id.as_u128())?
            .map(|row| decode(row.value()))
            .transpose()
    }
}

fn all_tenants(tenants: &impl Readable<u128, &'static [u8]>) -> Result<Vec<Tenant>, StoreError> {
    let mut out = Vec::new();
    for row in tenants.iter()? {
        let (_, v) = row?;
        out.push(decode(v.value())?);
    }
    Ok(out)
}
