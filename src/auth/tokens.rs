//! API tokens: `svc_` + 48 hex characters; authentication with the verified-token cache, and
//! mint, rotate, revoke, list, bootstrap.

use super::service::Verified;
use super::{Auth, AuthError, Principal};
use crate::model::Timestamp;
use crate::model::audit::hex;
use crate::model::identity::is_permission;
use crate::model::identity::{
    Actor, ActorType, ApiToken, MintedToken, PersonalTokenRequest, StoredToken, TokenRequest,
};
use crate::store::{TxResult, Wrote};
use std::net::IpAddr;
use uuid::Uuid;

pub const TOKEN_PREFIX: &str = "svc_";
const SECRET_HEX_LEN: usize = 48;
const LOOKUP_LEN: usize = 8;

fn well_formed(secret: &str) -> bool {
    secret
        .strip_prefix(TOKEN_PREFIX)
        .is_some_and(|h| h.len() == SECRET_HEX_LEN && h.chars().all(|c| c.is_ascii_hexdigit()))
}

fn new_secret() -> Option<String> {
    let bytes = super::crypto::random_bytes::<24>()?;
    Some(format!("{TOKEN_PREFIX}{}", hex(&bytes)))
}

fn lookup_prefix(secret: &str) -> String {
    secret[TOKEN_PREFIX.len()..TOKEN_PREFIX.len() + LOOKUP_LEN].to_string()
}

fn ip_allowed(binds: &[String], peer: IpAddr) -> bool {
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    binds.is_empty()
        || binds.iter().any(|b| {
            b.parse::<ipnet::IpNet>().is_ok_and(|n| n.contains(&peer))
                || b.parse::<IpAddr>().is_ok_and(|a| a == peer)
        })
}

impl Auth {
    /// Resolves a bearer secret to a principal: cache or argon2, then expiry and IP binding,
    /// which are checked on every request, cached or not.
    pub async fn authenticate_token(
        &self,
        secret: &str,
        peer: IpAddr,
    ) -> Result<Principal, AuthError> {
        if !well_formed(secret) {
            return Err(AuthError::Invalid("malformed API token".into()));
        }
        let key = self.digest(secret);
        let generation = self.store.credentials_generation();
        let meta = match self.cache_get(&key) {
            Some(v) if v.generation == generation => v.token,
            cached => {
                let unknown = || AuthError::Invalid("unknown API token".into());
                let candidates = self.store.tokens_by_prefix(lookup_prefix(secret)).await?;
                // Verified before another process changed tokens, and its row unchanged since
                // (not deleted, not rotated): no hash again.
                let known = cached.and_then(|v| {
                    candidates
                        .iter()
                        .position(|c| c.meta.id == v.token.id && c.secret_hash == v.secret_hash)
                });
                let found = match known {
                    Some(i) => candidates.into_iter().nth(i),
                    None => {
                        if candidates.is_empty() {
                            return Err(unknown());
                        }
                        // Only a real token's prefix costs a hash; past the failures allowed
                        // from this address, no hash at all.
                        let now = self.clock.now();
                        if !self.token_failures.has_token(peer, now).await? {
                            return Err(AuthError::Throttled(self.token_failures.refill_every()));
                        }
                        let mut found = None;
                        for candidate in candidates {
                            if self
                                .verify_secret(secret.to_string(), candidate.secret_hash.clone())
                                .await?
                            {
                                found = Some(candidate);
                                break;
                            }
                        }
                        if found.is_none() {
                            self.token_failures.allow(peer, now).await?;
                        }
                        found
                    }
                };
                let Some(found) = found else {
                    return Err(unknown());
                };
                self.cache_put(
                    key,
                    Verified {
                        token: found.meta.clone(),
                        secret_hash: found.secret_hash,
                        generation,
                    },
                );
                found.meta
            }
        };
        if meta.expires_at.is_some_and(|at| self.clock.now() >= at) {
            return Err(AuthError::Invalid("API token expired".into()));
        }
        if !ip_allowed(&meta.ip_bind, peer) {
            return Err(AuthError::Invalid(
                "API token not valid from this address".into(),
            ));
        }
        // A personal token is its user: their current roles, and nothing once they are gone.
        let roles = match meta.owner {
            None => meta.roles.clone(),
            Some(owner) => match self.store.user(meta.tenant_id, owner).await {
                Ok(u) if !u.user.disabled => u.user.roles,
                Ok(_) | Err(crate::store::StoreError::NotFound) => {
                    return Err(AuthError::Invalid(
                        "the API token's user is disabled or deleted".into(),
                    ));
                }
                Err(e) => return Err(e.into()),
            },
        };
        self.mark_used(meta.tenant_id, meta.id);
        Ok(Principal {
            actor_type: if meta.ai_agent {
                ActorType::AiAgent
            } else {
                ActorType::Token
            },
            actor_id: meta.id.to_string(),
            name: meta.name.clone(),
            home_tenant: meta.tenant_id,
            instance: self.is_instance(meta.tenant_id).await?,
            tenant: meta.tenant_id,
            permissions: self.permissions(meta.tenant_id, &meta.scopes, &roles).await,
            site: meta.site.clone(),
            user: meta.owner,
        })
    }

    async fn validate(
        &self,
        tenant: Uuid,
        creator: Option<&Principal>,
        req: &TokenRequest,
    ) -> Result<Option<Timestamp>, AuthError> {
        if req.name.trim().is_empty() {
            return Err(AuthError::validation("name", "name is required"));
        }
        if req.scopes.is_empty() && req.roles.is_empty() {
            return Err(AuthError::validation(
                "token",
                "scopes or roles are required",
            ));
        }
        if let Some(bad) = req.scopes.iter().find(|s| !is_permission(s)) {
            return Err(AuthError::validation(
                "token",
                format!("scope {bad:?} is not of the form resource:action"),
            ));
        }
        self.check_roles(tenant, &req.roles, "token").await?;
        if let Some(site) = &req.site {
            crate::model::config::check_name(site.trim())
                .map_err(|i| AuthError::validation("site", i.detail))?;
        }
        if let Some(bad) = req
            .ip_bind
            .iter()
            .find(|c| c.parse::<ipnet::IpNet>().is_err() && c.parse::<IpAddr>().is_err())
        {
            return Err(AuthError::validation(
                "cidr",
                format!("{bad:?} is not a CIDR or address"),
            ));
        }
        let expires_at = match req.expires_at.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                let at: Timestamp = s
                    .parse()
                    .map_err(|e: String| AuthError::validation("expiresAt", e))?;
                if at <= self.clock.now() {
                    return Err(AuthError::validation(
                        "expiresAt",
                        "expiresAt must be in the future",
                    ));
                }
                Some(at)
            }
        };
        if let Some(creator) = creator {
            let wanted = self.permissions(tenant, &req.scopes, &req.roles).await;
            if !creator.permissions.covers(&wanted) {
                return Err(AuthError::Forbidden(
                    "a token cannot carry permissions its creator lacks".into(),
                ));
            }
        }
        Ok(expires_at)
    }

    async fn mint_in(
        &self,
        tenant: Uuid,
        created_by: String,
        actor: &Actor,
        creator: Option<&Principal>,
        req: TokenRequest,
        owner: Option<Uuid>,
    ) -> Result<MintedToken, AuthError> {
        let expires_at = self.validate(tenant, creator, &req).await?;
        let secret =
            new_secret().ok_or_else(|| AuthError::Invalid("no randomness available".into()))?;
        let secret_hash = self.hash_secret(secret.clone()).await?;
        let meta = ApiToken {
            id: self.clock.new_id(),
            tenant_id: tenant,
            name: req.name.trim().to_string(),
            prefix: lookup_prefix(&secret),
            scopes: req.scopes,
            roles: req.roles,
            ip_bind: req.ip_bind,
            expires_at,
            last_used_at: None,
            ai_agent: req.ai_agent,
            site: req.site.map(|s| s.trim().to_string()),
            owner,
            created_at: self.clock.now(),
            created_by,
            version: 1,
        };
        let audit = crate::model::audit::AuditDraft::new(
            self.clock.now(),
            tenant,
            actor,
            "token.create",
            format!("api-token/{}", meta.id),
        );
        let record = Self::record("api-tokens", audit);
        let token = StoredToken {
            meta: meta.clone(),
            secret_hash,
        };
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.insert_token(&token)?;
                tx.record([record.audit.after(&token.meta)], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(MintedToken {
            token: secret,
            meta,
        })
    }

    /// `POST /api/v1/api-tokens`: bound to the creator's effective tenant.
    pub async fn mint(
        &self,
        p: &Principal,
        actor: &Actor,
        req: TokenRequest,
    ) -> Result<MintedToken, AuthError> {
        self.mint_in(p.tenant, p.actor_id.clone(), actor, Some(p), req, None)
            .await
    }

    /// The user a personal-token route acts for: a signed-in user, or a personal token's.
    fn me(p: &Principal) -> Result<Uuid, AuthError> {
        p.user.ok_or_else(|| {
            AuthError::SessionRequired(
                "personal tokens belong to users: sign in, or use a personal token".into(),
            )
        })
    }

    /// `POST /api/v1/users/me/api-tokens`: a token that acts as the caller's user, with their
    /// roles as they are at each request.
    pub async fn mint_personal(
        &self,
        p: &Principal,
        actor: &Actor,
        req: PersonalTokenRequest,
    ) -> Result<MintedToken, AuthError> {
        let user = Self::me(p)?;
        let roles = self
            .store
            .user(p.home_tenant, user)
            .await
            .map_err(super::users::user_errors)?
            .user
            .roles;
        let req = TokenRequest {
            name: req.name,
            roles,
            expires_at: req.expires_at,
            ..Default::default()
        };
        self.mint_in(
            p.home_tenant,
            user.to_string(),
            actor,
            Some(p),
            req,
            Some(user),
        )
        .await
    }

    /// The caller's personal tokens.
    pub async fn personal_tokens(&self, p: &Principal) -> Result<Vec<ApiToken>, AuthError> {
        let user = Self::me(p)?;
        let mut tokens = self.store.tokens(p.home_tenant).await?;
        tokens.retain(|t| t.owner == Some(user));
        Ok(tokens)
    }

    /// Revokes one of the caller's personal tokens (another's is 404).
    pub async fn revoke_personal(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), AuthError> {
        if !self.personal_tokens(p).await?.iter().any(|t| t.id == id) {
            return Err(AuthError::NotFound);
        }
        let mut owner = p.clone();
        owner.tenant = p.home_tenant;
        self.revoke(&owner, actor, id).await
    }

    /// `svc bootstrap`: `bootstrap-admin` with `*:*` in the default tenant.
    pub async fn mint_bootstrap(&self) -> Result<MintedToken, AuthError> {
        let tenant = self.store.default_tenant().await?;
        let req = TokenRequest {
            name: "bootstrap-admin".into(),
            scopes: vec!["*:*".into()],
            ..Default::default()
        };
        self.mint_in(
            tenant.id,
            "bootstrap".into(),
            &Actor::system("bootstrap"),
            None,
            req,
            None,
        )
        .await
    }

    pub async fn tokens(&self, p: &Principal) -> Result<Vec<ApiToken>, AuthError> {
        Ok(self.store.tokens(p.tenant).await?)
    }

    pub async fn rotate(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<MintedToken, AuthError> {
        let secret =
            new_secret().ok_or_else(|| AuthError::Invalid("no randomness available".into()))?;
        let secret_hash = self.hash_secret(secret.clone()).await?;
        let audit = self.audit(p, actor, "token.rotate", format!("api-token/{id}"));
        let record = Self::record("api-tokens", audit);
        let prefix = lookup_prefix(&secret);
        let tenant = p.tenant;
        let meta = self
            .store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let old = tx.remove_token(tenant, id)?.ok_or(AuthError::NotFound)?;
                let mut meta = old.meta.clone();
                meta.prefix = prefix;
                meta.version += 1;
                tx.insert_token(&StoredToken {
                    meta: meta.clone(),
                    secret_hash,
                })?;
                tx.record([record.audit.before(&old.meta).after(&meta)], record.events)?;
                Ok(Wrote::Changed(meta))
            })
            .await?;
        self.cache_forget(id);
        Ok(MintedToken {
            token: secret,
            meta,
        })
    }

    pub async fn revoke(&self, p: &Principal, actor: &Actor, id: Uuid) -> Result<(), AuthError> {
        let audit = self.audit(p, actor, "token.delete", format!("api-token/{id}"));
        let record = Self::record("api-tokens", audit);
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let old = tx.remove_token(tenant, id)?.ok_or(AuthError::NotFound)?;
                tx.record([record.audit.before(&old.meta)], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        self.cache_forget(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_format() {
        let s = new_secret().unwrap();
        assert!(well_formed(&s));
        assert_eq!(s.len(), 4 + 48);
        assert_eq!(lookup_prefix(&s).len(), 8);
        assert!(!well_formed("svc_abc"));
        assert!(!well_formed(&s.replace("svc_", "np_x")));
    }

    #[test]
    fn ip_binding() {
        let peer: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(ip_allowed(&[], peer));
        assert!(ip_allowed(&["10.0.0.0/8".into()], peer));
        assert!(!ip_allowed(&["192.168.0.0/16".into()], peer));
        assert!(ip_allowed(&["10.1.2.3".into()], peer));
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert!(ip_allowed(&["10.0.0.0/8".into()], mapped));
    }
}
