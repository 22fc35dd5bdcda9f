//! Users (by tenant and id, with an instance-wide e-mail index) and sessions (by id).

use super::codec::{decode, encode, tenant_values};
use super::journal::Record;
use super::keys::{scoped, tenant_range};
use super::tables::{SESSIONS, TOKENS, USER_EMAILS, USERS};
use super::{Store, StoreError};
use crate::model::Timestamp;
use crate::model::identity::{Session, StoredUser, User};
use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::sync::Arc;
use uuid::Uuid;

fn user_key(tenant: Uuid, id: Uuid) -> Vec<u8> {
    scoped(tenant, id.as_bytes())
}

fn email_key(email: &str) -> String {
    email.trim().to_lowercase()
}

fn users_of(tx: &WriteTransaction, tenant: Uuid) -> Result<Vec<User>, StoreError> {
    let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
    Ok(tenant_values::<StoredUser, _>(&users, tenant)?
        .into_iter()
        .map(|u| u.user)
        .collect())
}

fn put_user(
    tx: &WriteTransaction,
    u: &StoredUser,
    old_email: Option<&str>,
) -> Result<(), StoreError> {
    let key = user_key(u.user.tenant_id, u.user.id);
    let mut emails = tx.open_table(USER_EMAILS).map_err(StoreError::from_redb)?;
    let new_email = email_key(&u.user.email);
    if old_email.map(email_key).as_deref() != Some(new_email.as_str()) {
        if emails
            .get(new_email.as_str())
            .map_err(StoreError::from_redb)?
            .is_some()
        {
            return Err(StoreError::EmailInUse);
        }
        if let Some(old) = old_email {
            emails
                .remove(email_key(old).as_str())
                .map_err(StoreError::from_redb)?;
        }
        emails
            .insert(new_email.as_str(), key.as_slice())
            .map_err(StoreError::from_redb)?;
    }
    tx.open_table(USERS)
        .map_err(StoreError::from_redb)?
        .insert(key.as_slice(), encode(u)?.as_slice())
        .map_err(StoreError::from_redb)?;
    Ok(())
}

fn get_user(tx: &WriteTransaction, tenant: Uuid, id: Uuid) -> Result<StoredUser, StoreError> {
    let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
    let row = users
        .get(user_key(tenant, id).as_slice())
        .map_err(StoreError::from_redb)?;
    decode(row.ok_or(StoreError::NotFound)?.value())
}

/// Fails when a change leaves a tenant that had an enabled administrator without one.
fn guard_last_admin(before: &[User], after: &[User]) -> Result<(), StoreError> {
    let had = before.iter().any(User::is_enabled_admin);
    let has = after.iter().any(User::is_enabled_admin);
    if had && !has {
        return Err(StoreError::LastAdmin);
    }
    Ok(())
}

fn read_user(tx: &ReadTransaction, key: &[u8]) -> Result<Option<StoredUser>, StoreError> {
    let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
    users
        .get(key)
        .map_err(StoreError::from_redb)?
        .map(|v| decode(v.value()))
        .transpose()
}

impl Store {
    pub async fn insert_user(
        self: &Arc<Self>,
        user: StoredUser,
        record: Record,
    ) -> Result<User, StoreError> {
        self.mutate(record, move |tx, audit| {
            put_user(tx, &user, None)?;
            let audit = audit.after(&user.user);
            Ok((user.user, audit))
        })
        .await
    }

    /// The setup gate (SPEC 3): open while no local user exists and the tenant has no API token.
    fn setup_gate_open(&self, tx: &WriteTransaction, tenant: Uuid) -> Result<bool, StoreError> {
        let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
        for row in users.iter().map_err(StoreError::from_redb)? {
            if decode::<StoredUser>(row.map_err(StoreError::from_redb)?.1.value())?
                .user
                .local
            {
                return Ok(false);
            }
        }
        let tokens = tx.open_table(TOKENS).map_err(StoreError::from_redb)?;
        let (lo, hi) = tenant_range(tenant);
        Ok(tokens
            .range(lo.as_slice()..hi.as_slice())
            .map_err(StoreError::from_redb)?
            .next()
            .is_none())
    }

    /// The gate as a read; a storage error counts as closed.
    pub async fn setup_open(self: &Arc<Self>, tenant: Uuid) -> bool {
        let store = self.clone();
        self.transact(move |tx| Ok((store.setup_gate_open(tx, tenant)?, false)))
            .await
            .unwrap_or(false)
    }

    pub async fn user(self: &Arc<Self>, tenant: Uuid, id: Uuid) -> Result<StoredUser, StoreError> {
        self.read(move |tx| read_user(tx, &user_key(tenant, id))?.ok_or(StoreError::NotFound))
            .await
    }

    pub async fn user_by_email(
        self: &Arc<Self>,
        email: String,
    ) -> Result<Option<StoredUser>, StoreError> {
        self.read(move |tx| {
            let emails = tx.open_table(USER_EMAILS).map_err(StoreError::from_redb)?;
            let key = emails
                .get(email_key(&email).as_str())
                .map_err(StoreError::from_redb)?
                .map(|k| k.value().to_vec());
            match key {
                Some(k) => read_user(tx, &k),
                None => Ok(None),
            }
        })
        .await
    }

    pub async fn users(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<User>, StoreError> {
        self.read(move |tx| {
            let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
            Ok(tenant_values::<StoredUser, _>(&users, tenant)?
                .into_iter()
                .map(|u| u.user)
                .collect())
        })
        .await
    }

    /// Whether any enabled local administrator exists, in any tenant (default admin seeding).
    pub async fn has_enabled_local_admin(self: &Arc<Self>) -> Result<bool, StoreError> {
        self.read(|tx| {
            let users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
            for row in users.iter().map_err(StoreError::from_redb)? {
                let u = decode::<StoredUser>(row.map_err(StoreError::from_redb)?.1.value())?.user;
                if u.local && u.is_enabled_admin() {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await
    }

    /// Applies `change` to a user under the e-mail and last-administrator guards.
    pub async fn update_user(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        record: Record,
        change: impl FnOnce(&mut StoredUser) + Send + 'static,
    ) -> Result<User, StoreError> {
        self.mutate(record, move |tx, audit| {
            let before = users_of(tx, tenant)?;
            let old = get_user(tx, tenant, id)?;
            let mut new = old.clone();
            change(&mut new);
            new.user.version = old.user.version + 1;
            put_user(tx, &new, Some(&old.user.email))?;
            guard_last_admin(&before, &users_of(tx, tenant)?)?;
            let audit = audit.before(&old.user).after(&new.user);
            Ok((new.user, audit))
        })
        .await
    }

    pub async fn delete_user(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
        record: Record,
    ) -> Result<(), StoreError> {
        self.mutate(record, move |tx, audit| {
            let before = users_of(tx, tenant)?;
            let old = get_user(tx, tenant, id)?;
            tx.open_table(USERS)
                .map_err(StoreError::from_redb)?
                .remove(user_key(tenant, id).as_slice())
                .map_err(StoreError::from_redb)?;
            tx.open_table(USER_EMAILS)
                .map_err(StoreError::from_redb)?
                .remove(email_key(&old.user.email).as_str())
                .map_err(StoreError::from_redb)?;
            guard_last_admin(&before, &users_of(tx, tenant)?)?;
            Ok(((), audit.before(&old.user)))
        })
        .await
    }

    /// Stores a session; `audit` records the sign-in that minted it.
    pub async fn insert_session(
        self: &Arc<Self>,
        session: Session,
        record: Record,
    ) -> Result<(), StoreError> {
        self.mutate(record, move |tx, audit| {
            tx.open_table(SESSIONS)
                .map_err(StoreError::from_redb)?
                .insert(session.id.as_str(), encode(&session)?.as_slice())
                .map_err(StoreError::from_redb)?;
            Ok(((), audit))
        })
        .await
    }

    /// A new user and its first session in one transaction (setup, registration). For setup,
    /// the gate is re-checked inside the transaction, so a racing second request conflicts.
    pub async fn insert_user_with_session(
        self: &Arc<Self>,
        user: StoredUser,
        session: Session,
        record: Record,
        only_while_setup_open: bool,
    ) -> Result<User, StoreError> {
        let store = self.clone();
        self.mutate(record, move |tx, audit| {
            if only_while_setup_open && !store.setup_gate_open(tx, user.user.tenant_id)? {
                return Err(StoreError::Conflict("setup already completed".into()));
            }
            put_user(tx, &user, None)?;
            tx.open_table(SESSIONS)
                .map_err(StoreError::from_redb)?
                .insert(session.id.as_str(), encode(&session)?.as_slice())
                .map_err(StoreError::from_redb)?;
            let audit = audit.after(&user.user);
            Ok((user.user, audit))
        })
        .await
    }

    /// The session and its user, re-read on every request.
    pub async fn session_with_user(
        self: &Arc<Self>,
        id: String,
    ) -> Result<Option<(Session, Option<StoredUser>)>, StoreError> {
        self.read(move |tx| {
            let sessions = tx.open_table(SESSIONS).map_err(StoreError::from_redb)?;
            let Some(row) = sessions.get(id.as_str()).map_err(StoreError::from_redb)? else {
                return Ok(None);
            };
            let s: Session = decode(row.value())?;
            let user = read_user(tx, &user_key(s.tenant_id, s.user_id))?;
            Ok(Some((s, user)))
        })
        .await
    }

    pub async fn delete_session(self: &Arc<Self>, id: String) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.unrecorded("a session ended");
            tx.open_table(SESSIONS)
                .map_err(StoreError::from_redb)?
                .remove(id.as_str())
                .map_err(StoreError::from_redb)?;
            Ok(())
        })
        .await
    }

    /// Stamps `lastSeenAt` on a session and its user.
    pub async fn touch_session(
        self: &Arc<Self>,
        id: String,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.unrecorded("a session's last use");
            let mut sessions = tx.open_table(SESSIONS).map_err(StoreError::from_redb)?;
            let current = sessions
                .get(id.as_str())
                .map_err(StoreError::from_redb)?
                .map(|v| decode::<Session>(v.value()));
            let Some(s) = current else { return Ok(()) };
            let mut s = s?;
            s.last_seen_at = Some(at);
            sessions
                .insert(id.as_str(), encode(&s)?.as_slice())
                .map_err(StoreError::from_redb)?;
            let mut users = tx.open_table(USERS).map_err(StoreError::from_redb)?;
            let key = user_key(s.tenant_id, s.user_id);
            let current = users
                .get(key.as_slice())
                .map_err(StoreError::from_redb)?
                .map(|v| decode::<StoredUser>(v.value()));
            if let Some(u) = current {
                let mut u = u?;
                u.user.last_seen_at = Some(at);
                users
                    .insert(key.as_slice(), encode(&u)?.as_slice())
                    .map_err(StoreError::from_redb)?;
            }
            Ok(())
        })
        .await
    }

    /// Removes sessions expired before `now`; returns how many.
    pub async fn purge_sessions(self: &Arc<Self>, now: Timestamp) -> Result<u64, StoreError> {
        self.write(move |tx| {
            tx.unrecorded("expired sessions purged");
            let mut sessions = tx.open_table(SESSIONS).map_err(StoreError::from_redb)?;
            let before = sessions.len().map_err(StoreError::from_redb)?;
            sessions
                .retain(|_, v| {
                    decode::<Session>(v)
                        .map(|s| s.expires_at > now)
                        .unwrap_or(false)
                })
                .map_err(StoreError::from_redb)?;
            Ok(before - sessions.len().map_err(StoreError::from_redb)?)
        })
        .await
    }
}
