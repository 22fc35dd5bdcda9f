//! Users (by tenant and id, with an instance-wide e-mail index) and sessions (by id).

use super::codec::{decode, encode, tenant_values};
use super::keys::{scoped, tenant_range};
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{SESSIONS, TOKENS, USER_EMAILS, USERS};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::identity::{Session, StoredUser, User};
use crate::model::tenant::email_domain;
use std::collections::BTreeSet;
use std::sync::Arc;
use uuid::Uuid;

fn user_key(tenant: Uuid, id: Uuid) -> Vec<u8> {
    scoped(tenant, id.as_bytes())
}

fn email_key(email: &str) -> String {
    email.trim().to_lowercase()
}

fn put_user(tx: &WriteTx, u: &StoredUser, old_email: Option<&str>) -> Result<(), StoreError> {
    let key = user_key(u.user.tenant_id, u.user.id);
    let mut emails = tx.open_table(USER_EMAILS)?;
    let new_email = email_key(&u.user.email);
    if old_email.map(email_key).as_deref() != Some(new_email.as_str()) {
        if emails.get(new_email.as_str())?.is_some() {
            return Err(StoreError::EmailInUse);
        }
        if let Some(old) = old_email {
            emails.remove(email_key(old).as_str())?;
        }
        emails.insert(new_email.as_str(), key.as_slice())?;
    }
    tx.open_table(USERS)?
        .insert(key.as_slice(), encode(u)?.as_slice())?;
    Ok(())
}

fn read_user(tx: &ReadTx, key: &[u8]) -> Result<Option<StoredUser>, StoreError> {
    let users = tx.open_table(USERS)?;
    users.get(key)?.map(|v| decode(v.value())).transpose()
}

/// Users and sessions in a transaction. E-mail addresses are unique across the instance: a
/// save that would reuse one fails with `EmailInUse`.
impl Tx<'_> {
    pub(crate) fn users(&self, tenant: Uuid) -> Result<Vec<User>, StoreError> {
        let users = self.open_table(USERS)?;
        Ok(tenant_values::<StoredUser, _>(&users, tenant)?
            .into_iter()
            .map(|u| u.user)
            .collect())
    }

    pub(crate) fn user(&self, tenant: Uuid, id: Uuid) -> Result<Option<StoredUser>, StoreError> {
        let users = self.open_table(USERS)?;
        users
            .get(user_key(tenant, id).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// Saves a new or changed user with its e-mail index.
    pub(crate) fn save_user(&self, user: &StoredUser) -> Result<(), StoreError> {
        let old = self.user(user.user.tenant_id, user.user.id)?;
        put_user(self, user, old.as_ref().map(|o| o.user.email.as_str()))
    }

    /// Removes a user; the user, when there was one.
    pub(crate) fn remove_user(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<StoredUser>, StoreError> {
        let Some(old) = self
            .open_table(USERS)?
            .take(user_key(tenant, id).as_slice())?
            .map(|v| decode::<StoredUser>(v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        self.open_table(USER_EMAILS)?
            .remove(email_key(&old.user.email).as_str())?;
        Ok(Some(old))
    }

    pub(crate) fn save_session(&self, session: &Session) -> Result<(), StoreError> {
        self.open_table(SESSIONS)?
            .insert(session.id.as_str(), encode(session)?.as_slice())?;
        Ok(())
    }

    /// The tenants whose users hold addresses at `domain` (`tenant::email_domain`'s form).
    pub(crate) fn tenants_with_addresses_at(
        &self,
        domain: &str,
    ) -> Result<BTreeSet<Uuid>, StoreError> {
        let mut out = BTreeSet::new();
        for row in self.open_table(USER_EMAILS)?.iter()? {
            let (email, key) = row?;
            if email_domain(email.value()) == domain
                && let Some(tenant) = key.value().get(..16)
            {
                out.insert(
                    Uuid::from_slice(tenant).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                );
            }
        }
        Ok(out)
    }

    /// Whether any tenant has a local (password) user.
    pub(crate) fn any_local_user(&self) -> Result<bool, StoreError> {
        any_user(&self.open_table(USERS)?, |u| u.local)
    }

    /// Whether the tenant has an API token.
    pub(crate) fn tenant_has_tokens(&self, tenant: Uuid) -> Result<bool, StoreError> {
        has_tokens(&self.open_table(TOKENS)?, tenant)
    }
}

/// Whether any user, of any tenant, is one `wanted` accepts.
fn any_user(
    users: &impl Readable<&'static [u8], &'static [u8]>,
    wanted: impl Fn(&User) -> bool,
) -> Result<bool, StoreError> {
    for row in users.iter()? {
        if wanted(&decode::<StoredUser>(row?.1.value())?.user) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn has_tokens(
    tokens: &impl Readable<&'static [u8], &'static [u8]>,
    tenant: Uuid,
) -> Result<bool, StoreError> {
    let (lo, hi) = tenant_range(tenant);
    Ok(tokens.range(lo.as_slice()..hi.as_slice())?.next().is_some())
}

impl Store {
    pub(crate) async fn user(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<StoredUser, StoreError> {
        self.read(move |tx| read_user(tx, &user_key(tenant, id))?.ok_or(StoreError::NotFound))
            .await
    }

    pub(crate) async fn user_by_email(
        self: &Arc<Self>,
        email: String,
    ) -> Result<Option<StoredUser>, StoreError> {
        self.read(move |tx| {
            let emails = tx.open_table(USER_EMAILS)?;
            let key = emails
                .get(email_key(&email).as_str())?
                .map(|k| k.value().to_vec());
            match key {
                Some(k) => read_user(tx, &k),
                None => Ok(None),
            }
        })
        .await
    }

    pub(crate) async fn users(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<User>, StoreError> {
        self.read(move |tx| {
            let users = tx.open_table(USERS)?;
            Ok(tenant_values::<StoredUser, _>(&users, tenant)?
                .into_iter()
                .map(|u| u.user)
                .collect())
        })
        .await
    }

    /// Whether any enabled local administrator exists, in any tenant (default admin seeding).
    pub(crate) async fn has_enabled_local_admin(self: &Arc<Self>) -> Result<bool, StoreError> {
        self.read(|tx| {
            let users = tx.open_table(USERS)?;
            any_user(&users, |u| u.local && u.is_enabled_admin())
        })
        .await
    }

    /// Whether any tenant has a local user, and whether `tenant` has an API token: what the
    /// setup gate is decided on, read without a write.
    pub(crate) async fn users_and_tokens(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<(bool, bool), StoreError> {
        self.read(move |tx| {
            let users = tx.open_table(USERS)?;
            let tokens = tx.open_table(TOKENS)?;
            Ok((any_user(&users, |u| u.local)?, has_tokens(&tokens, tenant)?))
        })
        .await
    }

    /// The session and its user, re-read on every request.
    pub(crate) async fn session_with_user(
        self: &Arc<Self>,
        id: String,
    ) -> Result<Option<(Session, Option<StoredUser>)>, StoreError> {
        self.read(move |tx| {
            let sessions = tx.open_table(SESSIONS)?;
            let Some(row) = sessions.get(id.as_str())? else {
                return Ok(None);
            };
            let s: Session = decode(row.value())?;
            let user = read_user(tx, &user_key(s.tenant_id, s.user_id))?;
            Ok(Some((s, user)))
        })
        .await
    }

    pub(crate) async fn delete_session(self: &Arc<Self>, id: String) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.unrecorded("a session ended");
            tx.open_table(SESSIONS)?.remove(id.as_str())?;
            Ok(())
        })
        .await
    }

    /// Stamps `lastSeenAt` on a session and its user.
    pub(crate) async fn touch_session(
        self: &Arc<Self>,
        id: String,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.unrecorded("a session's last use");
            let mut sessions = tx.open_table(SESSIONS)?;
            let current = sessions
                .get(id.as_str())?
                .map(|v| decode::<Session>(v.value()));
            let Some(s) = current else { return Ok(()) };
            let mut s = s?;
            s.last_seen_at = Some(at);
            sessions.insert(id.as_str(), encode(&s)?.as_slice())?;
            let mut users = tx.open_table(USERS)?;
            let key = user_key(s.tenant_id, s.user_id);
            let current = users
                .get(key.as_slice())?
                .map(|v| decode::<StoredUser>(v.value()));
            if let Some(u) = current {
                let mut u = u?;
                u.user.last_seen_at = Some(at);
                users.insert(key.as_slice(), encode(&u)?.as_slice())?;
            }
            Ok(())
        })
        .await
    }

    /// Removes sessions expired before `now`; returns how many.
    pub(crate) async fn purge_sessions(
        self: &Arc<Self>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        self.write(move |tx| {
            tx.unrecorded("expired sessions purged");
            let mut sessions = tx.open_table(SESSIONS)?;
            let before = sessions.len()?;
            sessions.retain(|_, v| {
                decode::<Session>(v)
                    .map(|s| s.expires_at > now)
                    .unwrap_or(false)
            })?;
            Ok(before - sessions.len()?)
        })
        .await
    }
}
