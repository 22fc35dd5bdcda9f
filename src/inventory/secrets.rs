//! Secrets: values encrypted at rest with XChaCha20-Poly1305 under the master key, bound to
//! their tenant and name (the associated data), never returned by the API. Without a usable
//! master key every secret operation answers 503 `svc:secrets/nokey`.

use super::{Inventory, InventoryError};
use crate::auth::Principal;
use crate::model::audit::AuditDraft;
use crate::model::config::{Invalid, check_name};
use crate::model::identity::Actor;
use crate::model::secret::{SecretMeta, StoredSecret};
use crate::runtime::secrets::{SecretFuture, SecretSource};
use crate::store::{TxResult, Wrote};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::Deserialize;
use uuid::Uuid;

/// The 32-byte master key; `Debug` never shows it.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey([redacted])")
    }
}

impl MasterKey {
    /// Parses the key file's text: 64 hex characters.
    pub fn from_hex(text: &str) -> Option<Self> {
        let t = text.trim();
        if t.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(key))
    }

    /// A short digest that names the key without giving it away (the database keeps it).
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::new()
            .chain_update(b"svc master key fingerprint\0")
            .chain_update(self.0)
            .finalize();
        crate::model::audit::hex(&digest[..16])
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.0.into())
    }
}

/// `PUT /api/v1/secrets/{name}`.
#[derive(Clone, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SecretBody {
    #[serde(default)]
    pub value: Option<String>,
}

fn aad(tenant: Uuid, name: &str) -> Vec<u8> {
    let mut a = tenant.as_bytes().to_vec();
    a.extend_from_slice(name.as_bytes());
    a
}

fn seal(key: &MasterKey, tenant: Uuid, name: &str, value: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut nonce = [0u8; 24];
    getrandom::fill(&mut nonce).ok()?;
    let sealed = key
        .cipher()
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: value.as_bytes(),
                aad: &aad(tenant, name),
            },
        )
        .ok()?;
    Some((nonce.to_vec(), sealed))
}

/// Opens a sealed value: for check commands' `$SECRET:name$`, never for the API.
fn open(key: &MasterKey, s: &StoredSecret) -> Option<String> {
    if s.nonce.len() != 24 {
        return None;
    }
    let plain = key
        .cipher()
        .decrypt(
            XNonce::from_slice(&s.nonce),
            Payload {
                msg: &s.sealed,
                aad: &aad(s.meta.tenant_id, &s.meta.name),
            },
        )
        .ok()?;
    String::from_utf8(plain).ok()
}

impl SecretSource for Inventory {
    fn secret(&self, tenant: Uuid, name: &str) -> SecretFuture<'_> {
        let name = name.to_string();
        Box::pin(async move {
            let key = self.master_key.as_ref()?;
            let stored = self.store.secret(tenant, name).await.ok()??;
            open(key, &stored)
        })
    }
}

impl Inventory {
    fn key(&self) -> Result<&MasterKey, InventoryError> {
        self.master_key.as_ref().ok_or(InventoryError::NoKey)
    }

    /// Seals the credentials a document carried in plain text as the tenant's secrets.
    pub(super) fn seal_all(
        &self,
        tenant: Uuid,
        credentials: Vec<(String, String)>,
    ) -> Result<Vec<StoredSecret>, InventoryError> {
        if credentials.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.key()?;
        let now = self.clock.now();
        credentials
            .into_iter()
            .map(|(name, value)| {
                let (nonce, sealed) =
                    seal(key, tenant, &name, &value).ok_or(InventoryError::NoKey)?;
                Ok(StoredSecret {
                    meta: SecretMeta {
                        tenant_id: tenant,
                        name,
                        created_at: now,
                        updated_at: now,
                    },
                    nonce,
                    sealed,
                })
            })
            .collect()
    }

    /// Seals one value as the tenant's secret `name`, for a domain to store in its own
    /// transaction (an AI connection's key).
    pub fn seal(
        &self,
        tenant: Uuid,
        name: &str,
        value: &str,
    ) -> Result<StoredSecret, InventoryError> {
        self.seal_all(tenant, vec![(name.to_string(), value.to_string())])?
            .pop()
            .ok_or(InventoryError::NoKey)
    }

    /// Whether the tenant's secrets hold these values already.
    pub(super) async fn holds(&self, tenant: Uuid, credentials: &[(String, String)]) -> bool {
        for (name, value) in credentials {
            if self.secret(tenant, name).await.as_ref() != Some(value) {
                return false;
            }
        }
        true
    }

    /// Stores (or replaces) a secret's value.
    pub async fn put_secret(
        &self,
        p: &Principal,
        actor: &Actor,
        name: String,
        body: SecretBody,
    ) -> Result<(), InventoryError> {
        let key = self.key()?.clone();
        check_name(&name)?;
        let value = body.value.ok_or_else(|| Invalid {
            field: "body".into(),
            detail: "value is required".into(),
        })?;
        let (nonce, sealed) = seal(&key, p.tenant, &name, &value).ok_or(InventoryError::NoKey)?;
        let now = self.clock.now();
        let audit = AuditDraft::new(now, p.tenant, actor, "secret.put", format!("secret/{name}"));
        let meta = SecretMeta {
            tenant_id: p.tenant,
            name,
            created_at: now,
            updated_at: now,
        };
        let record = self.record_of(audit, "secrets");
        let mut secret = StoredSecret {
            meta,
            nonce,
            sealed,
        };
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_secret(&mut secret)?;
                tx.record([record.audit.after(&secret.meta)], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    pub async fn delete_secret(
        &self,
        p: &Principal,
        actor: &Actor,
        name: String,
    ) -> Result<(), InventoryError> {
        self.key()?;
        let audit = AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            "secret.delete",
            format!("secret/{name}"),
        );
        let record = self.record_of(audit, "secrets");
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, InventoryError> {
                if !tx.remove_secret(tenant, &name)? {
                    return Err(InventoryError::NotFound);
                }
                tx.record([record.audit], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// Names and times; never values.
    pub async fn secrets(&self, p: &Principal) -> Result<Vec<SecretMeta>, InventoryError> {
        self.key()?;
        Ok(self.store.secrets(p.tenant).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;

    #[test]
    fn sealed_values_are_bound_to_their_slot() {
        let key = MasterKey::from_hex(&"ab".repeat(32)).unwrap();
        let t = Uuid::from_u128(1);
        let (nonce, sealed) = seal(&key, t, "db", "hunter2").unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let mut s = StoredSecret {
            meta: SecretMeta {
                tenant_id: t,
                name: "db".into(),
                created_at: now,
                updated_at: now,
            },
            nonce,
            sealed,
        };
        assert_eq!(open(&key, &s).as_deref(), Some("hunter2"));
        s.meta.name = "other".into();
        assert_eq!(
            open(&key, &s),
            None,
            "moved to another name, it no longer opens"
        );
        assert!(MasterKey::from_hex("short").is_none());
        assert!(!format!("{key:?}").contains("ab"));
    }
}
