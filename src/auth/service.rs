//! The `Auth` service: the bounded hashing pool, the verified-token cache, `lastUsedAt`
//! bookkeeping, and the tenant and audit operations.

use super::permissions::builtin_role;
use super::ratelimit::RateLimiter;
use super::{AuthError, CryptoPolicy, Permissions, Principal};
use crate::model::audit::{AuditDraft, AuditEntry, AuditFilter, AuditVerification};
use crate::model::event::EventDraft;
use crate::model::identity::{Actor, ApiToken, TenantChange, TenantRequest};
use crate::model::input::is_hidden_format;
use crate::model::tenant::parse_email_domains;
use crate::model::{Tenant, Timestamp};
use crate::runtime::Locked;
use crate::runtime::Stopwatch;
use crate::runtime::clock::SharedClock;
use crate::runtime::memory::return_free_heap;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::journal::Record;
use crate::store::{Store, Tx};
use crate::store::{TxResult, Wrote};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

/// At most this many hashings wait for or hold a slot (`auth.hashConcurrency` of them run at
/// once, 64 MiB each); past it a caller is answered busy at once, so a flood cannot queue
/// requests past their deadline.
pub(super) const HASH_QUEUE: usize = 128;
/// Failed token verifications (a real token's prefix with a wrong secret, each costing an
/// argon2 run) allowed per client address: a burst of 20, then one per 5 s.
const TOKEN_FAILURE_BURST: u32 = 20;
const TOKEN_FAILURE_REFILL: Duration = Duration::from_secs(5);
/// The verified-token cache is dropped whole past this many entries (bounded memory).
const CACHE_MAX: usize = 10_000;
/// How often `lastUsedAt` is written back.
const LAST_USED_FLUSH: Duration = Duration::from_secs(5);

/// A place in the hashing queue, given back when dropped.
pub(super) struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A token whose secret was verified: its stored hash (a rotation changes it) and the store's
/// credentials generation it was read at (another process's change to tokens moves it on).
#[derive(Clone)]
pub(super) struct Verified {
    pub token: ApiToken,
    pub secret_hash: String,
    pub generation: u64,
}

pub struct Auth {
    pub(super) store: Arc<Store>,
    pub(super) clock: SharedClock,
    policy: CryptoPolicy,
    hash_slots: Semaphore,
    hash_queue: AtomicUsize,
    /// Random per process: cache keys are digests of secrets under it, so the cache never holds
    /// a secret and its keys are useless outside this process.
    cache_key: [u8; 32],
    pub(super) verified: Mutex<HashMap<[u8; 32], Verified>>,
    last_used: Mutex<HashMap<(Uuid, Uuid), Timestamp>>,
    /// Notified when a token is used with none waiting to be written back.
    used: Arc<Notify>,
    pub(super) dummy: tokio::sync::OnceCell<String>,
    /// The default tenant's id, read once (it never changes).
    default_tenant: tokio::sync::OnceCell<Uuid>,
    pub(super) setup_lock: tokio::sync::Mutex<()>,
    /// Setup POSTs being handled: one that begins while another is handled races it.
    pub(super) setup_posts: AtomicUsize,
    pub limiter: RateLimiter,
    pub(super) token_failures: RateLimiter,
}

impl Auth {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        policy: CryptoPolicy,
        hash_slots: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            limiter: RateLimiter::sign_in(&store),
            token_failures: RateLimiter::new(
                "token-failures",
                TOKEN_FAILURE_BURST,
                TOKEN_FAILURE_REFILL,
                &store,
            ),
            store,
            clock,
            policy,
            hash_slots: Semaphore::new(hash_slots.max(1)),
            hash_queue: AtomicUsize::new(0),
            cache_key: super::crypto::random_bytes::<32>().unwrap_or_else(|| {
                tracing::error!("no randomness for the token cache's key; it is all zeros");
                [0; 32]
            }),
            verified: Mutex::new(HashMap::new()),
            last_used: Mutex::new(HashMap::new()),
            used: Arc::new(Notify::new()),
            dummy: tokio::sync::OnceCell::new(),
            default_tenant: tokio::sync::OnceCell::new(),
            setup_lock: tokio::sync::Mutex::new(()),
            setup_posts: AtomicUsize::new(0),
        })
    }

    pub(super) fn digest(&self, secret: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.cache_key);
        h.update(secret.as_bytes());
        h.finalize().into()
    }

    pub(super) fn cache_get(&self, key: &[u8; 32]) -> Option<Verified> {
        self.verified.locked().get(key).cloned()
    }

    /// Keeps a verification, as of the store's credentials generation read before the token
    /// was (so a change made meanwhile by another process has it checked again).
    pub(super) fn cache_put(&self, key: [u8; 32], verified: Verified) {
        let mut c = self.verified.locked();
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(key, verified);
    }

    /// Drops every cached verification of a token (rotate, delete).
    pub(super) fn cache_forget(&self, token_id: Uuid) {
        self.verified.locked().retain(|_, v| v.token.id != token_id);
    }

    /// A place in the hashing queue, or `Busy` when it is full.
    pub(super) fn queue_for_hashing(&self) -> Result<Queued<'_>, AuthError> {
        if self.hash_queue.fetch_add(1, Ordering::SeqCst) >= HASH_QUEUE {
            self.hash_queue.fetch_sub(1, Ordering::SeqCst);
            return Err(AuthError::Busy);
        }
        Ok(Queued(&self.hash_queue))
    }

    /// Runs argon2 off the async runtime, at most `auth.hashConcurrency` at once, and returns its
    /// 64 MiB to the system at once.
    pub(super) async fn hash_secret(&self, secret: String) -> Result<String, AuthError> {
        let _queued = self.queue_for_hashing()?;
        let _slot = self
            .hash_slots
            .acquire()
            .await
            .map_err(|_| AuthError::Invalid("shutting down".into()))?;
        let policy = self.policy;
        tokio::task::spawn_blocking(move || {
            let hashed = policy.hash(secret.as_bytes());
            return_free_heap();
            hashed
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| {
            AuthError::Store(crate::store::StoreError::Internal(
                "secret hashing failed".into(),
            ))
        })
    }

    /// Whether `secret` matches `stored`; `Busy` when the hashing queue is full.
    pub(super) async fn verify_secret(
        &self,
        secret: String,
        stored: String,
    ) -> Result<bool, AuthError> {
        let _queued = self.queue_for_hashing()?;
        let Ok(_slot) = self.hash_slots.acquire().await else {
            return Ok(false);
        };
        let policy = self.policy;
        Ok(tokio::task::spawn_blocking(move || {
            let matched = policy.verify(secret.as_bytes(), &stored);
            return_free_heap();
            matched
        })
        .await
        .unwrap_or(false))
    }

    pub(super) fn mark_used(&self, tenant: Uuid, id: Uuid) {
        let now = self.clock.now();
        let mut used = self.last_used.locked();
        if used.is_empty() {
            self.used.notify_one();
        }
        used.insert((tenant, id), now);
    }

    fn take_used(&self) -> Vec<(Uuid, Uuid, Timestamp)> {
        let mut m = self.last_used.locked();
        m.drain().map(|((t, i), at)| (t, i, at)).collect()
    }

    /// An identity change's audit entry with its `config` event (for the kind named `kind`).
    pub(super) fn record(kind: &str, audit: AuditDraft) -> Record {
        let event = EventDraft::config(audit.tenant_id, &[kind], &audit.action, &audit.resource);
        Record::new(audit, vec![event])
    }

    pub(super) fn draft(
        &self,
        tenant: Uuid,
        actor: &Actor,
        action: &str,
        resource: String,
    ) -> AuditDraft {
        AuditDraft::new(self.clock.now(), tenant, actor, action, resource)
    }

    pub(super) fn audit(
        &self,
        p: &Principal,
        actor: &Actor,
        action: &str,
        resource: String,
    ) -> AuditDraft {
        self.draft(p.tenant, actor, action, resource)
    }

    /// Scopes plus the permissions of the roles: built-in ones, and the tenant's custom roles
    /// (the `roles` configuration kind), read on every call so a role change applies at once.
    pub(super) async fn permissions(
        &self,
        tenant: Uuid,
        scopes: &[String],
        roles: &[String],
    ) -> Permissions {
        let mut perms = Permissions::from_scopes_and_roles(scopes, roles);
        for role in roles.iter().filter(|r| builtin_role(r).is_none()) {
            if let Ok(doc) = self.store.doc(tenant, "roles", role.clone(), false).await {
                let granted = doc.to_json()["permissions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                perms.extend(granted.iter().filter_map(|p| p.as_str().map(String::from)));
            }
        }
        perms
    }

    /// Fails naming the first role that is neither built in nor defined in the tenant.
    pub(super) async fn check_roles(
        &self,
        tenant: Uuid,
        roles: &[String],
        field: &'static str,
    ) -> Result<(), AuthError> {
        for role in roles.iter().filter(|r| builtin_role(r).is_none()) {
            if self
                .store
                .doc(tenant, "roles", role.clone(), false)
                .await
                .is_err()
            {
                return Err(AuthError::validation(
                    field,
                    format!("unknown role {role:?}"),
                ));
            }
        }
        Ok(())
    }

    /// Audits a read that reaches past one tenant (a backup download) in the caller's home
    /// tenant, before anything is handed out.
    pub async fn audit_instance_read(
        &self,
        p: &Principal,
        actor: &Actor,
        action: &str,
        resource: String,
    ) -> Result<(), AuthError> {
        let audit = self.draft(p.home_tenant, actor, action, resource);
        self.store
            .record_only(Record::new(audit, Vec::new()))
            .await?;
        Ok(())
    }

    /// Whether `tenant` is the default tenant, whose principals alone hold instance-wide
    /// permissions.
    pub(super) async fn is_instance(&self, tenant: Uuid) -> Result<bool, AuthError> {
        let default = self
            .default_tenant
            .get_or_try_init(|| async { self.store.default_tenant().await.map(|t| t.id) })
            .await?;
        Ok(*default == tenant)
    }

    /// Resolves `X-Service-Tenant`: honoured for holders of `admin:tenants` in the default
    /// tenant; another tenant's holder naming a tenant not its own is refused (403); callers
    /// without the permission are not asking, and the header is ignored (SPEC 5.3).
    pub async fn select_tenant(
        &self,
        p: &mut Principal,
        header: Option<&str>,
    ) -> Result<(), AuthError> {
        let Some(raw) = header.filter(|h| !h.trim().is_empty()) else {
            return Ok(());
        };
        if !p.permissions.allows("admin:tenants") {
            return Ok(());
        }
        let id = Uuid::parse_str(raw.trim()).map_err(|_| {
            AuthError::validation("tenant", "X-Service-Tenant must be a tenant UUID")
        })?;
        if id == p.home_tenant {
            return Ok(());
        }
        if !p.allows("admin:tenants") {
            return Err(AuthError::Forbidden(
                "X-Service-Tenant: only the default tenant's administrators act in another tenant"
                    .into(),
            ));
        }
        self.store.tenant(id).await.map_err(|e| match e {
            crate::store::StoreError::NotFound => {
                AuthError::validation("tenant", format!("no tenant {id}"))
            }
            other => other.into(),
        })?;
        p.tenant = id;
        Ok(())
    }

    pub async fn tenants(&self) -> Result<Vec<Tenant>, AuthError> {
        Ok(self.store.tenants().await?)
    }

    pub async fn create_tenant(
        &self,
        actor: &Actor,
        req: TenantRequest,
    ) -> Result<Tenant, AuthError> {
        let slug = req.slug.trim().to_string();
        let slug_ok = !slug.is_empty()
            && slug.len() <= 63
            && slug
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !slug.starts_with('-');
        if !slug_ok {
            return Err(AuthError::validation(
                "tenant",
                "slug must be 1-63 lower-case letters, digits or '-'",
            ));
        }
        let now = self.clock.now();
        let tenant = Tenant {
            id: self.clock.new_id(),
            slug,
            name: tenant_name(&req.name)?,
            email_domains: email_domains(&req.email_domains)?,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        // The new tenant's creation is recorded in the tenant it creates.
        let audit = self.draft(
            tenant.id,
            actor,
            "tenant.create",
            format!("tenant/{}", tenant.id),
        );
        let record = Self::record("tenants", audit);
        let created = self
            .store
            .transact(move |tx| -> TxResult<_, AuthError> {
                claim_email_domains(tx, &tenant)?;
                tx.insert_tenant(&tenant)?;
                tx.record([record.audit.after(&tenant)], record.events)?;
                Ok(Wrote::Changed(tenant))
            })
            .await?;
        Ok(created)
    }

    /// Changes a tenant's name or e-mail domains (the fields given).
    pub async fn change_tenant(
        &self,
        actor: &Actor,
        id: Uuid,
        req: TenantChange,
    ) -> Result<Tenant, AuthError> {
        let name = req.name.as_deref().map(tenant_name).transpose()?;
        let domains = req
            .email_domains
            .as_deref()
            .map(email_domains)
            .transpose()?;
        let now = self.clock.now();
        let audit = self.draft(id, actor, "tenant.update", format!("tenant/{id}"));
        let record = Self::record("tenants", audit);
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let old = tx.tenant(id)?.ok_or(AuthError::NotFound)?;
                let mut new = old.clone();
                new.name = name.unwrap_or(new.name);
                new.email_domains = domains.unwrap_or(new.email_domains);
                if new == old {
                    return Ok(Wrote::Unchanged(old));
                }
                new.updated_at = now;
                new.version += 1;
                claim_email_domains(tx, &new)?;
                tx.save_tenant(&new)?;
                tx.record([record.audit.before(&old).after(&new)], record.events)?;
                Ok(Wrote::Changed(new))
            })
            .await
    }

    pub async fn audit_entries(
        &self,
        p: &Principal,
        mut filter: AuditFilter,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, AuthError> {
        filter.tenant_id = Some(p.tenant);
        Ok(self.store.audit_entries(filter, limit).await?)
    }

    pub async fn audit_page(
        &self,
        p: &Principal,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, AuthError> {
        Ok(self
            .store
            .audit_page_ascending(p.tenant, after_seq, limit)
            .await?)
    }

    pub async fn verify_audit(&self) -> Result<AuditVerification, AuthError> {
        Ok(self.store.verify_audit().await?)
    }
}

/// Writes `lastUsedAt` of recently used tokens back in batches, off the request path: at most
/// once per `LAST_USED_FLUSH`, and not at all while no token is used.
pub struct LastUsedWorker {
    auth: Arc<Auth>,
    last_flush: Option<Stopwatch>,
}

impl LastUsedWorker {
    pub fn new(auth: Arc<Auth>) -> Self {
        Self {
            auth,
            last_flush: None,
        }
    }
}

impl Worker for LastUsedWorker {
    fn name(&self) -> &'static str {
        "token-last-used"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.auth.used.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if let Some(since) = self.last_flush.as_ref().map(Stopwatch::elapsed)
                && since < LAST_USED_FLUSH
            {
                return Wait::For(LAST_USED_FLUSH - since);
            }
            let used = self.auth.take_used();
            if used.is_empty() {
                return Wait::UntilWoken;
            }
            self.last_flush = Some(Stopwatch::start());
            if let Err(e) = self.auth.store.touch_tokens(used).await {
                tracing::warn!(error = %e, "could not record token use");
            }
            Wait::For(LAST_USED_FLUSH)
        })
    }
}

/// A tenant's display name: not empty, one line, no character that hides how it reads (the
/// name heads every page of the tenant's console).
fn tenant_name(name: &str) -> Result<String, AuthError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(AuthError::validation("name", "name is required"));
    }
    if name.chars().any(|c| c.is_control() || is_hidden_format(c)) {
        return Err(AuthError::validation(
            "name",
            "a name has no control, bidi or zero-width character",
        ));
    }
    Ok(name.to_string())
}

fn email_domains(domains: &[String]) -> Result<Vec<String>, AuthError> {
    parse_email_domains(domains).map_err(|why| AuthError::validation("emailDomains", why))
}

/// Refuses a claim on a domain another tenant claims or holds addresses at, so that every
/// address at a claimed domain stays its tenant's.
fn claim_email_domains(tx: &Tx, tenant: &Tenant) -> Result<(), AuthError> {
    let others: Vec<Tenant> = tx
        .tenants()?
        .into_iter()
        .filter(|t| t.id != tenant.id)
        .collect();
    let slug = |id: Uuid| {
        others
            .iter()
            .find(|t| t.id == id)
            .map_or_else(|| id.to_string(), |t| t.slug.clone())
    };
    for domain in &tenant.email_domains {
        if let Some(owner) = others.iter().find(|t| t.email_domains.contains(domain)) {
            return Err(AuthError::Claimed(format!(
                "tenant {:?} claims {domain:?}",
                owner.slug
            )));
        }
        if let Some(holder) = tx
            .tenants_with_addresses_at(domain)?
            .into_iter()
            .find(|t| *t != tenant.id)
        {
            return Err(AuthError::Claimed(format!(
                "users of tenant {:?} have addresses at {domain:?}",
                slug(holder)
            )));
        }
    }
    Ok(())
}
