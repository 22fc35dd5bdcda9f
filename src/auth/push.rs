//! Web Push on the identity side: the instance's VAPID key pair (RFC 8292), which browsers
//! subscribe with, and the subscriptions a user's browsers registered, which the `push`
//! channel sends to.

use super::{Auth, AuthError, Principal};
use crate::model::base64;
use crate::model::fault;
use crate::model::identity::{Actor, PushSubscription};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// Where the key pair is kept: a setting of the instance (the nil tenant).
const VAPID: &str = "push/vapid";

/// The instance's VAPID key pair: it signs the token each push request carries, and its
/// public half is the `applicationServerKey` browsers subscribe with.
pub struct Vapid {
    pair: EcdsaKeyPair,
}

impl Vapid {
    fn from_pkcs8(pkcs8: &[u8]) -> Result<Vapid, String> {
        EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &SystemRandom::new(),
        )
        .map(|pair| Vapid { pair })
        .map_err(|e| format!("the VAPID key does not read: {e}"))
    }

    /// The public key as browsers take it: the uncompressed point, base64url.
    pub fn public_key(&self) -> String {
        base64::encode_url(self.pair.public_key().as_ref())
    }

    /// The `Authorization` header of a push to `endpoint` (RFC 8292 section 3): a JWT for
    /// the endpoint's origin, valid 12 hours from `now` (Unix seconds), naming `subject` (a
    /// `mailto:` or `https:` address of the operator) when there is one.
    pub fn authorization(
        &self,
        endpoint: &str,
        subject: Option<&str>,
        now: i64,
    ) -> Result<String, String> {
        let url = url::Url::parse(endpoint).map_err(|e| format!("the endpoint: {e}"))?;
        let audience = url.origin().ascii_serialization();
        let mut claims = json!({"aud": audience, "exp": now + 12 * 3600});
        if let Some(sub) = subject {
            claims["sub"] = Value::String(sub.to_string());
        }
        let signing_input = format!(
            "{}.{}",
            base64::encode_url(br#"{"typ":"JWT","alg":"ES256"}"#),
            base64::encode_url(claims.to_string().as_bytes())
        );
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| "signing the VAPID token failed".to_string())?;
        Ok(format!(
            "vapid t={signing_input}.{}, k={}",
            base64::encode_url(signature.as_ref()),
            self.public_key()
        ))
    }
}

/// Where a subscription is kept: under its owner's `push/<actor type>:<id>` prefix, by a digest
/// of its endpoint (registering the same endpoint again replaces it).
pub(super) fn subscription_key(owner: &str, endpoint: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(endpoint.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{owner}/{hex}")
}

/// Forgets the subscriptions of `user` whose push service said they are gone (404 or 410,
/// RFC 8030 section 7.3), each with an audit entry by the service.
pub async fn forget_gone(
    store: &Arc<Store>,
    now: crate::model::Timestamp,
    tenant: Uuid,
    user: Uuid,
    endpoints: Vec<String>,
) -> Result<(), StoreError> {
    if endpoints.is_empty() {
        return Ok(());
    }
    let actor = Actor::system("push");
    let keys: Vec<String> = endpoints
        .iter()
        .map(|e| subscription_key(&format!("push/user:{user}"), e))
        .collect();
    store
        .transact(move |tx| -> TxResult<_> {
            let mut audits = Vec::new();
            for key in keys {
                let Some(old) = tx.setting(tenant, &key)? else {
                    continue;
                };
                tx.put_setting(tenant, &key, None)?;
                audits.push(
                    crate::model::audit::AuditDraft::new(
                        now,
                        tenant,
                        &actor,
                        "push-subscription.gone",
                        key,
                    )
                    .before(&old),
                );
            }
            let changed = !audits.is_empty();
            tx.record(audits, Vec::new())?;
            Ok(Wrote::new((), changed))
        })
        .await
}

/// The kept key pair, if one was made.
pub async fn vapid(store: &Arc<Store>) -> Result<Option<Vapid>, StoreError> {
    let kept = store.setting(Uuid::nil(), VAPID.into()).await?;
    Ok(kept.and_then(|v| {
        let pkcs8 = base64::decode(v["pkcs8"].as_str().unwrap_or_default())?;
        fault::readable("the VAPID key", Vapid::from_pkcs8(&pkcs8))
    }))
}

/// The subscriptions the browsers of `user` registered in `tenant`.
pub async fn subscriptions_of(
    store: &Arc<Store>,
    tenant: Uuid,
    user: Uuid,
) -> Result<Vec<PushSubscription>, StoreError> {
    let kept = store
        .settings_under(tenant, format!("push/user:{user}/"))
        .await?;
    Ok(kept
        .into_iter()
        .filter_map(|v| fault::readable("a push subscription", serde_json::from_value(v)))
        .collect())
}

impl Auth {
    /// The public key browsers subscribe with; the key pair is made on the first call and kept
    /// for good (changing it would orphan every subscription).
    pub async fn push_public_key(&self, p: &Principal, actor: &Actor) -> Result<String, AuthError> {
        if let Some(v) = vapid(&self.store).await? {
            return Ok(v.public_key());
        }
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|_| AuthError::Internal("no randomness for the VAPID key".into()))?;
        let made = Vapid::from_pkcs8(pkcs8.as_ref()).map_err(AuthError::Internal)?;
        let value = json!({"pkcs8": base64::encode(pkcs8.as_ref())});
        let record = Self::record(
            "push",
            self.draft(p.home_tenant, actor, "push.vapid-key.create", VAPID.into()),
        );
        // Two first calls at once: the one that commits first makes the key, the other
        // answers with it.
        let kept = self
            .store
            .transact(move |tx| -> TxResult<_> {
                if let Some(kept) = tx.setting(Uuid::nil(), VAPID)? {
                    return Ok(Wrote::Unchanged(kept));
                }
                tx.put_setting(Uuid::nil(), VAPID, Some(&value))?;
                tx.record([record.audit], record.events)?;
                Ok(Wrote::Changed(value))
            })
            .await?;
        let pkcs8 = base64::decode(kept["pkcs8"].as_str().unwrap_or_default())
            .ok_or_else(|| StoreError::Corrupt("the VAPID key is not base64".into()))?;
        Ok(Vapid::from_pkcs8(&pkcs8).map_or(made.public_key(), |v| v.public_key()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn the_vapid_token_is_an_es256_jwt_for_the_endpoints_origin() {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let vapid = Vapid::from_pkcs8(pkcs8.as_ref()).unwrap();
        let header = vapid
            .authorization(
                "https://push.example.net:8443/wpush/v2/abc?x=1",
                Some("mailto:ops@example.org"),
                1_700_000_000,
            )
            .unwrap();
        let (token, key) = header
            .strip_prefix("vapid t=")
            .and_then(|rest| rest.split_once(", k="))
            .unwrap();
        assert_eq!(key, vapid.public_key());
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: Value = serde_json::from_slice(&base64::decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            json!({"aud": "https://push.example.net:8443", "exp": 1_700_043_200i64, "sub": "mailto:ops@example.org"})
        );
        let public = base64::decode(key).unwrap();
        assert_eq!(public.len(), 65);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
            .verify(
                format!("{}.{}", parts[0], parts[1]).as_bytes(),
                &base64::decode(parts[2]).unwrap(),
            )
            .expect("the signature verifies with the public key");
    }
}
