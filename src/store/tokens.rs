//! API tokens: by tenant and id, and a prefix index for lookup by secret.

use super::codec::{decode, encode, tenant_values};
use super::keys::scoped;
use super::kv::{Readable, WriteTx};
use super::tables::{TOKEN_PREFIXES, TOKENS};
use super::{Promise, Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::identity::{ApiToken, StoredToken};
use std::sync::Arc;
use uuid::Uuid;

fn token_key(tenant: Uuid, id: Uuid) -> Vec<u8> {
    scoped(tenant, id.as_bytes())
}

fn prefix_key(prefix: &str, id: Uuid) -> Vec<u8> {
    let mut k = prefix.as_bytes().to_vec();
    k.extend_from_slice(id.as_bytes());
    k
}

fn put(tx: &WriteTx, t: &StoredToken) -> Result<(), StoreError> {
    let key = token_key(t.meta.tenant_id, t.meta.id);
    tx.open_table(TOKENS)?
        .insert(key.as_slice(), encode(t)?.as_slice())?;
    tx.open_table(TOKEN_PREFIXES)?.insert(
        prefix_key(&t.meta.prefix, t.meta.id).as_slice(),
        key.as_slice(),
    )?;
    Ok(())
}

/// Removes a token and its prefix index entry; the token, when there was one.
fn take(tx: &WriteTx, tenant: Uuid, id: Uuid) -> Result<Option<StoredToken>, StoreError> {
    let removed = tx
        .open_table(TOKENS)?
        .take(token_key(tenant, id).as_slice())?
        .map(|row| decode::<StoredToken>(row.value()))
        .transpose()?;
    if let Some(old) = &removed {
        tx.open_table(TOKEN_PREFIXES)?
            .remove(prefix_key(&old.meta.prefix, id).as_slice())?;
    }
    Ok(removed)
}

/// API tokens in a transaction.
impl Tx<'_> {
    /// Saves a new token with its prefix index.
    pub(crate) fn insert_token(&self, token: &StoredToken) -> Result<(), StoreError> {
        put(self, token)
    }

    /// Removes a token and its prefix index entry; the token, when there was one.
    pub(crate) fn remove_token(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<StoredToken>, StoreError> {
        take(self, tenant, id)
    }
}

impl Store {
    /// Every token whose secret starts with `prefix` (collisions are possible, if rare).
    pub(crate) async fn tokens_by_prefix(
        self: &Arc<Self>,
        prefix: String,
    ) -> Result<Vec<StoredToken>, StoreError> {
        self.read(move |tx| {
            let index = tx.open_table(TOKEN_PREFIXES)?;
            let tokens = tx.open_table(TOKENS)?;
            let mut out = Vec::new();
            let lo = prefix_key(&prefix, Uuid::nil());
            let hi = prefix_key(&prefix, Uuid::max());
            for row in index.range(lo.as_slice()..=hi.as_slice())? {
                let (_, key) = row?;
                if let Some(t) = tokens.get(key.value())? {
                    out.push(decode(t.value())?);
                }
            }
            Ok(out)
        })
        .await
    }

    pub(crate) async fn tokens(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<ApiToken>, StoreError> {
        self.read(move |tx| {
            let tokens = tx.open_table(TOKENS)?;
            Ok(tenant_values::<StoredToken, _>(&tokens, tenant)?
                .into_iter()
                .map(|t| t.meta)
                .collect())
        })
        .await
    }

    /// Records `lastUsedAt` for tokens used since the last flush; no audit entry (not a mutation
    /// by anyone). Only a refresh: made durable with the next sync, so a stream of requests
    /// costs the card no sync of its own (a power cut may lose the last minutes of it).
    pub(crate) async fn touch_tokens(
        self: &Arc<Self>,
        used: Vec<(Uuid, Uuid, Timestamp)>,
    ) -> Result<(), StoreError> {
        self.write_filing_later(Promise::Refreshing, move |tx| {
            tx.unrecorded("tokens' last use");
            let mut tokens = tx.open_table(TOKENS)?;
            for (tenant, id, at) in used {
                let key = token_key(tenant, id);
                let current = tokens
                    .get(key.as_slice())?
                    .map(|v| decode::<StoredToken>(v.value()));
                if let Some(t) = current {
                    let mut t = t?;
                    t.meta.last_used_at = Some(at);
                    tokens.insert(key.as_slice(), encode(&t)?.as_slice())?;
                }
            }
            Ok(())
        })
        .await
        .map(|((), _)| ())
    }
}
