//! Users and their passwords (SPEC 4.1, 5.5): create, update, delete, set and change password,
//! with the e-mail and last-administrator guards.

use super::{Auth, AuthError, Principal};
use crate::model::identity::{
    Actor, ActorType, ChangePassword, CreateUser, SetPassword, StoredUser, UpdateUser, User,
};
use crate::model::tenant::email_refusal;
use crate::store::journal::Record;
use crate::store::{StoreError, Tx};
use crate::store::{TxResult, Wrote};
use uuid::Uuid;

/// SPEC 5.5: at least 12 Unicode code points, nothing else.
pub const MIN_PASSWORD_CHARS: usize = 12;

pub fn check_password(pw: &str) -> Result<(), AuthError> {
    if pw.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AuthError::validation(
            "password",
            format!("password must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

pub fn check_email(email: &str) -> Result<String, AuthError> {
    let e = email.trim();
    crate::model::input::check_email(e).map_err(|why| AuthError::validation("user", why))?;
    Ok(e.to_string())
}

pub(super) fn user_errors(e: StoreError) -> AuthError {
    match e {
        StoreError::NotFound => AuthError::NotFound,
        other => other.into(),
    }
}

/// Fails when a change leaves a tenant that had an enabled administrator without one.
fn guard_last_admin(before: &[User], after: &[User]) -> Result<(), AuthError> {
    let had = before.iter().any(User::is_enabled_admin);
    let has = after.iter().any(User::is_enabled_admin);
    if had && !has {
        return Err(AuthError::LastAdmin);
    }
    Ok(())
}

/// Saves a user, refusing a new address its tenant may not hold (`tenant::email_refusal`):
/// the one way users are saved.
pub(super) fn save_user(tx: &Tx, user: &StoredUser) -> Result<(), AuthError> {
    let u = &user.user;
    let old = tx.user(u.tenant_id, u.id)?;
    if old.is_none_or(|o| !o.user.email.eq_ignore_ascii_case(&u.email))
        && let Some(why) = email_refusal(&tx.tenants()?, u.tenant_id, &u.email)
    {
        return Err(AuthError::validation("email", why));
    }
    Ok(tx.save_user(user)?)
}

/// Saves a new user with its record.
pub(super) fn insert_user(tx: &Tx, user: &StoredUser, record: Record) -> Result<(), AuthError> {
    save_user(tx, user)?;
    Ok(tx.record([record.audit.after(&user.user)], record.events)?)
}

impl Auth {
    /// Stores a new user with its record.
    pub(super) async fn insert_user(
        &self,
        user: StoredUser,
        record: Record,
    ) -> Result<User, AuthError> {
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                insert_user(tx, &user, record)?;
                Ok(Wrote::Changed(user.user))
            })
            .await
    }

    /// Applies `change` to a user under the last-administrator guard, with its record.
    async fn change_user(
        &self,
        tenant: Uuid,
        id: Uuid,
        record: Record,
        change: impl FnOnce(&mut StoredUser) + Send + 'static,
    ) -> Result<User, AuthError> {
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let before = tx.users(tenant)?;
                let old = tx.user(tenant, id)?.ok_or(AuthError::NotFound)?;
                let mut new = old.clone();
                change(&mut new);
                new.user.version = old.user.version + 1;
                save_user(tx, &new)?;
                guard_last_admin(&before, &tx.users(tenant)?)?;
                let audit = record.audit.before(&old.user).after(&new.user);
                tx.record([audit], record.events)?;
                Ok(Wrote::Changed(new.user))
            })
            .await
    }

    /// A new local user record (not yet stored).
    pub(super) async fn new_local_user(
        &self,
        tenant: Uuid,
        email: &str,
        name: &str,
        roles: Vec<String>,
        password: Option<&str>,
    ) -> Result<StoredUser, AuthError> {
        let email = check_email(email)?;
        let name = name.trim();
        if name.is_empty() {
            return Err(AuthError::validation("user", "name is required"));
        }
        self.check_roles(tenant, &roles, "user").await?;
        let password_hash = match password {
            Some(pw) => {
                check_password(pw)?;
                Some(self.hash_secret(pw.to_string()).await?)
            }
            None => None,
        };
        let now = self.clock.now();
        Ok(StoredUser {
            user: User {
                id: self.clock.new_id(),
                tenant_id: tenant,
                email,
                name: name.to_string(),
                roles,
                local: true,
                subject: String::new(),
                disabled: false,
                disabled_by_directory: false,
                last_seen_at: None,
                created_at: now,
                updated_at: now,
                version: 1,
            },
            password_hash,
        })
    }

    pub async fn create_user(
        &self,
        p: &Principal,
        actor: &Actor,
        req: CreateUser,
    ) -> Result<User, AuthError> {
        let roles = req.roles.unwrap_or_else(|| vec!["viewer".into()]);
        let mut stored = self
            .new_local_user(
                p.tenant,
                &req.email,
                &req.name,
                roles,
                req.password.as_deref(),
            )
            .await?;
        stored.user.disabled = req.disabled;
        let audit = self.audit(p, actor, "user.create", format!("user/{}", stored.user.id));
        let user = self
            .insert_user(stored, Self::record("users", audit))
            .await?;
        Ok(user)
    }

    pub async fn users(&self, p: &Principal) -> Result<Vec<User>, AuthError> {
        Ok(self.store.users(p.tenant).await?)
    }

    pub async fn user(&self, p: &Principal, id: Uuid) -> Result<User, AuthError> {
        Ok(self
            .store
            .user(p.tenant, id)
            .await
            .map_err(user_errors)?
            .user)
    }

    pub async fn update_user(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        req: UpdateUser,
    ) -> Result<User, AuthError> {
        let email = req.email.as_deref().map(check_email).transpose()?;
        if let Some(roles) = &req.roles {
            self.check_roles(p.tenant, roles, "user").await?;
        }
        if req.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(AuthError::validation("user", "name must not be empty"));
        }
        let now = self.clock.now();
        let audit = self.audit(p, actor, "user.update", format!("user/{id}"));
        let updated = self
            .change_user(p.tenant, id, Self::record("users", audit), move |u| {
                if let Some(e) = email {
                    u.user.email = e;
                }
                if let Some(n) = req.name {
                    u.user.name = n.trim().to_string();
                }
                if let Some(r) = req.roles {
                    u.user.roles = r;
                }
                if let Some(d) = req.disabled {
                    u.user.disabled = d;
                    u.user.disabled_by_directory = false;
                }
                u.user.updated_at = now;
            })
            .await?;
        Ok(updated)
    }

    pub async fn delete_user(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), AuthError> {
        let audit = self.audit(p, actor, "user.delete", format!("user/{id}"));
        let record = Self::record("users", audit);
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let before = tx.users(tenant)?;
                let old = tx.remove_user(tenant, id)?.ok_or(AuthError::NotFound)?;
                guard_last_admin(&before, &tx.users(tenant)?)?;
                tx.record([record.audit.before(&old.user)], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    pub async fn set_password(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        req: SetPassword,
    ) -> Result<(), AuthError> {
        // Another tenant's user is not found, whatever the body says.
        let user = self.store.user(p.tenant, id).await.map_err(user_errors)?;
        if !user.user.local {
            return Err(AuthError::validation(
                "password",
                "this account signs in through its identity provider or directory; it has no password here",
            ));
        }
        check_password(&req.password)?;
        let audit = self.audit(p, actor, "user.set-password", format!("user/{id}"));
        self.replace_password(p.tenant, id, req.password, audit)
            .await
    }

    /// Only for users signed in with a session; existing sessions stay valid.
    pub async fn change_password(
        &self,
        p: &Principal,
        actor: &Actor,
        req: ChangePassword,
    ) -> Result<(), AuthError> {
        if p.actor_type != ActorType::User {
            return Err(AuthError::SessionRequired(
                "only a signed-in user can change their password".into(),
            ));
        }
        let id = Uuid::parse_str(&p.actor_id).map_err(|_| AuthError::NotFound)?;
        let stored = self
            .store
            .user(p.home_tenant, id)
            .await
            .map_err(user_errors)?;
        let matches = match stored.password_hash {
            Some(h) => self.verify_secret(req.old_password, h).await?,
            None => false,
        };
        if !matches {
            return Err(AuthError::BadPassword);
        }
        check_password(&req.new_password)?;
        let audit = crate::model::audit::AuditDraft::new(
            self.clock.now(),
            p.home_tenant,
            actor,
            "user.change-password",
            format!("user/{id}"),
        );
        self.replace_password(p.home_tenant, id, req.new_password, audit)
            .await
    }

    /// Hashes and stores a new password (the policy already checked).
    async fn replace_password(
        &self,
        tenant: Uuid,
        id: Uuid,
        password: String,
        audit: crate::model::audit::AuditDraft,
    ) -> Result<(), AuthError> {
        let hash = self.hash_secret(password).await?;
        let now = self.clock.now();
        self.change_user(tenant, id, Self::record("users", audit), move |u| {
            u.password_hash = Some(hash);
            u.user.updated_at = now;
        })
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_policy_counts_code_points() {
        assert!(check_password("short").is_err());
        assert!(check_password("exactly12chr").is_ok());
        assert!(
            check_password("ääääääääääää").is_ok(),
            "12 code points, 24 bytes"
        );
        assert!(
            check_password("äääääääääää").is_err(),
            "11 code points, 22 bytes"
        );
    }

    #[test]
    fn emails() {
        assert!(check_email("a@b").is_ok());
        assert!(check_email("nobody").is_err());
        assert!(check_email("@x").is_err());
        assert!(check_email("a@b@c").is_err());
    }

    fn user(id: u128, roles: &[&str], disabled: bool) -> User {
        let at: crate::model::Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        User {
            id: Uuid::from_u128(id),
            tenant_id: Uuid::from_u128(9),
            email: format!("u{id}@example.org"),
            name: format!("User {id}"),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            local: true,
            subject: String::new(),
            disabled,
            disabled_by_directory: false,
            last_seen_at: None,
            created_at: at,
            updated_at: at,
            version: 1,
        }
    }

    #[test]
    fn the_last_enabled_administrator_cannot_be_removed_demoted_or_disabled() {
        let admin = user(1, &["admin"], false);
        let viewer = user(2, &["viewer"], false);
        let before = [admin.clone(), viewer.clone()];
        let demoted = user(1, &["viewer"], false);
        let disabled = user(1, &["admin"], true);
        for after in [
            vec![viewer.clone()],
            vec![demoted, viewer.clone()],
            vec![disabled, viewer.clone()],
        ] {
            assert!(matches!(
                guard_last_admin(&before, &after),
                Err(AuthError::LastAdmin)
            ));
        }
        let second = user(3, &["admin"], false);
        assert!(guard_last_admin(&[admin, second.clone()], &[second, viewer.clone()]).is_ok());
        assert!(
            guard_last_admin(std::slice::from_ref(&viewer), &[]).is_ok(),
            "a tenant without an administrator may stay without one"
        );
    }
}
