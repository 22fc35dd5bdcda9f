//! Browser sign-in (SPEC 5.4, 5.6, 5.8, 5.9): sessions, local login with constant-time failures,
//! the setup gate, self-registration, default administrator seeding, and session purging.

use super::users::{check_password, insert_user};
use super::{Auth, AuthError, Principal};
use crate::model::audit::{AuditDraft, hex};
use crate::model::identity::{Actor, ActorType, Session, StoredUser};
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{StoreError, Tx};
use crate::store::{TxResult, Wrote};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
pub const REMEMBER_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
const LAST_SEEN_EVERY: Duration = Duration::from_secs(60);
const PURGE_EVERY: Duration = Duration::from_secs(600);

/// Base64url (with padding) of the hex of 24 random bytes, as SPEC 5.6 describes the id.
pub(super) fn new_session_id() -> Option<String> {
    let raw = hex(&super::crypto::random_bytes::<24>()?);
    Some(crate::model::base64::encode_url_padded(raw.as_bytes()))
}

/// A minted session: the cookie value and how long it lives.
#[derive(Debug)]
pub struct NewSession {
    pub id: String,
    pub ttl: Duration,
}

/// Values of the `SVC_DEFAULT_ADMIN_*` environment variables.
#[derive(Clone, Debug, Default)]
pub struct SeedSettings {
    pub disabled: Option<String>,
    pub email: Option<String>,
    pub name: Option<String>,
    pub password: Option<String>,
}

pub const DEFAULT_ADMIN_EMAIL: &str = "admin@localhost";

/// The setup gate (SPEC 3): open while no local user exists and the tenant has no API token.
fn gate_open(local_user: bool, tenant_tokens: bool) -> bool {
    !local_user && !tenant_tokens
}

/// The setup gate inside a write, so a racing second setup finds it closed.
fn setup_gate_open(tx: &Tx, tenant: Uuid) -> Result<bool, StoreError> {
    Ok(gate_open(
        tx.any_local_user()?,
        tx.tenant_has_tokens(tenant)?,
    ))
}

impl Auth {
    /// A session for `user`; an empty role list means `admin` for a local account (the legacy
    /// rule of SPEC 5.4) and `viewer` for a directory account (SPEC 5.4 step 3).
    fn session(&self, user: &StoredUser, ttl: Duration) -> Result<Session, AuthError> {
        let now = self.clock.now();
        let roles = match (user.user.roles.is_empty(), user.user.local) {
            (false, _) => user.user.roles.clone(),
            (true, true) => vec!["admin".to_string()],
            (true, false) => vec!["viewer".to_string()],
        };
        Ok(Session {
            id: new_session_id()
                .ok_or_else(|| AuthError::Invalid("no randomness available".into()))?,
            user_id: user.user.id,
            tenant_id: user.user.tenant_id,
            roles,
            groups: Vec::new(),
            created_at: now,
            expires_at: now.plus(ttl),
            last_seen_at: None,
        })
    }

    fn user_actor(user: &StoredUser, source_ip: &str) -> Actor {
        Actor {
            actor_type: ActorType::User,
            actor_id: user.user.id.to_string(),
            source_ip: source_ip.to_string(),
            request_id: String::new(),
        }
    }

    /// The hash unknown accounts are checked against, so a failure costs the same either way.
    async fn dummy_hash(&self) -> Result<String, AuthError> {
        self.dummy
            .get_or_try_init(|| self.hash_secret("not a real password".into()))
            .await
            .cloned()
    }

    /// Password sign-in (SPEC 5.4 steps 2-6): a directory account (when `directory` is
    /// configured) is checked by the directory, search then bind, with the roles of the last
    /// sync; everyone else against the stored hash, or a dummy one for unknown and SSO
    /// accounts. Every failure is the same `Invalid`.
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        remember: bool,
        source_ip: &str,
        directory: Option<&super::directory::Directory>,
    ) -> Result<NewSession, AuthError> {
        let failed = || AuthError::Invalid("invalid e-mail or password".into());
        let user = self
            .store
            .user_by_email(email.to_string())
            .await?
            .filter(|u| !u.user.disabled);
        let in_directory = user.as_ref().is_some_and(|u| u.user.is_directory_account());
        let candidate = user
            .as_ref()
            .filter(|u| u.user.local)
            .and_then(|u| u.password_hash.clone());
        let (ok, action) = match (directory.filter(|_| in_directory), candidate) {
            (Some(dir), _) => (
                self.verify_in_directory(dir, email, password).await?,
                "login.ldap",
            ),
            (None, Some(hash)) => (
                self.verify_secret(password.to_string(), hash).await?,
                "login.local",
            ),
            (None, None) => {
                let dummy = self.dummy_hash().await?;
                self.verify_secret(password.to_string(), dummy).await?;
                (false, "login.local")
            }
        };
        let user = match user {
            Some(u) if ok => u,
            _ => return Err(failed()),
        };
        let ttl = if remember { REMEMBER_TTL } else { SESSION_TTL };
        let session = self.session(&user, ttl)?;
        let id = session.id.clone();
        let audit = AuditDraft::new(
            self.clock.now(),
            user.user.tenant_id,
            &Self::user_actor(&user, source_ip),
            action,
            format!("user/{}", user.user.id),
        );
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.save_session(&session)?;
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(NewSession { id, ttl })
    }

    /// The principal of a session cookie; the user row is re-read, so disabling takes effect at once.
    pub async fn session_principal(&self, id: &str) -> Result<Principal, AuthError> {
        let Some((session, user)) = self.store.session_with_user(id.to_string()).await? else {
            return Err(AuthError::Invalid("session is invalid or expired".into()));
        };
        let now = self.clock.now();
        if session.expires_at <= now {
            return Err(AuthError::Invalid("session expired".into()));
        }
        let Some(user) = user.filter(|u| !u.user.disabled) else {
            return Err(AuthError::Invalid("user is disabled".into()));
        };
        if session
            .last_seen_at
            .is_none_or(|seen| now.since(seen) >= LAST_SEEN_EVERY)
        {
            let store = self.store.clone();
            let sid = session.id.clone();
            tokio::spawn(async move {
                if let Err(e) = store.touch_session(sid, now).await {
                    tracing::debug!(error = %e, "could not stamp session last_seen");
                }
            });
        }
        Ok(Principal {
            actor_type: ActorType::User,
            actor_id: user.user.id.to_string(),
            name: user.user.name.clone(),
            home_tenant: session.tenant_id,
            instance: self.is_instance(session.tenant_id).await?,
            tenant: session.tenant_id,
            permissions: self
                .permissions(session.tenant_id, &[], &session.roles)
                .await,
            site: None,
            user: Some(user.user.id),
        })
    }

    pub async fn logout(&self, id: &str) -> Result<(), AuthError> {
        Ok(self.store.delete_session(id.to_string()).await?)
    }

    /// Whether the setup gate is open; a storage error counts as closed.
    pub async fn setup_open(&self) -> bool {
        match self.store.default_tenant().await {
            Ok(t) => self
                .store
                .users_and_tokens(t.id)
                .await
                .is_ok_and(|(users, tokens)| gate_open(users, tokens)),
            Err(_) => false,
        }
    }
}

/// A new local account with its first session: the first administrator at setup, or a
/// self-registered viewer.
#[derive(Clone, Copy)]
pub struct NewAccount<'a> {
    pub name: &'a str,
    pub email: &'a str,
    pub password: &'a str,
    pub confirmation: &'a str,
    pub source_ip: &'a str,
}

/// A setup POST being handled. One that began while another was races it: finding the gate
/// closed, it is told 409 (SPEC 5: "a racing second POST gets 409"), not sent to sign in.
pub struct SetupAttempt<'a> {
    auth: &'a Auth,
    racing: bool,
}

impl SetupAttempt<'_> {
    pub fn racing(&self) -> bool {
        self.racing
    }
}

impl Drop for SetupAttempt<'_> {
    fn drop(&mut self) {
        self.auth
            .setup_posts
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Auth {
    async fn open_account(
        &self,
        form: NewAccount<'_>,
        role: &str,
        action: &str,
        only_while_setup_open: bool,
    ) -> Result<NewSession, AuthError> {
        if form.password != form.confirmation {
            return Err(AuthError::validation(
                "password",
                "the passwords do not match",
            ));
        }
        let tenant = self.store.default_tenant().await?;
        let user = self
            .new_local_user(
                tenant.id,
                form.email,
                form.name,
                vec![role.into()],
                Some(form.password),
            )
            .await?;
        let session = self.session(&user, SESSION_TTL)?;
        let id = session.id.clone();
        let actor = Self::user_actor(&user, form.source_ip);
        let audit = AuditDraft::new(
            self.clock.now(),
            tenant.id,
            &actor,
            action,
            format!("user/{}", user.user.id),
        );
        let record = Self::record("users", audit);
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                if only_while_setup_open && !setup_gate_open(tx, user.user.tenant_id)? {
                    return Err(AuthError::SetupClosed);
                }
                insert_user(tx, &user, record)?;
                tx.save_session(&session)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(NewSession {
            id,
            ttl: SESSION_TTL,
        })
    }

    /// First-run setup: an admin and a 12 h session, if the gate is still open. The mutex and
    /// the gate re-checked inside the transaction make a racing second request a `Conflict`.
    pub async fn setup(&self, form: NewAccount<'_>) -> Result<NewSession, AuthError> {
        let _one_at_a_time = self.setup_lock.lock().await;
        self.open_account(form, "admin", "setup.admin", true).await
    }

    /// Counts a setup POST while it is handled; whether it began while another was.
    pub fn setup_attempt(&self) -> SetupAttempt<'_> {
        let before = self
            .setup_posts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        SetupAttempt {
            auth: self,
            racing: before > 0,
        }
    }

    /// Self-registration: a viewer in the default tenant with a 12 h session.
    pub async fn register(&self, form: NewAccount<'_>) -> Result<NewSession, AuthError> {
        self.open_account(form, "viewer", "user.register", false)
            .await
    }
    /// Default administrator seeding (SPEC 5.8), run at every start. Returns the generated
    /// password when one was made, for the caller to log once.
    pub async fn seed_default_admin(
        &self,
        settings: SeedSettings,
    ) -> Result<Option<(String, String)>, AuthError> {
        if settings.disabled.is_some_and(|d| !d.is_empty())
            || settings.password.as_deref() == Some("")
        {
            return Ok(None);
        }
        if self.store.has_enabled_local_admin().await? {
            return Ok(None);
        }
        let email = settings
            .email
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ADMIN_EMAIL.into());
        if self.store.user_by_email(email.clone()).await?.is_some() {
            return Ok(None);
        }
        let (password, generated) = match settings.password {
            Some(p) => (p, false),
            // Without randomness there is no password to make: seeding fails rather than
            // seeding a guessable one.
            None => match super::crypto::random_bytes::<16>() {
                Some(bytes) => (hex(&bytes), true),
                None => {
                    return Err(AuthError::Store(crate::store::StoreError::Internal(
                        "no randomness for the default administrator's password".into(),
                    )));
                }
            },
        };
        check_password(&password)?;
        let tenant = self.store.default_tenant().await?;
        let name = settings
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "Administrator".into());
        let user = self
            .new_local_user(
                tenant.id,
                &email,
                &name,
                vec!["admin".into()],
                Some(&password),
            )
            .await?;
        let audit = AuditDraft::new(
            self.clock.now(),
            tenant.id,
            &Actor::system("seed"),
            "user.seed",
            format!("user/{}", user.user.id),
        );
        match self.insert_user(user, Self::record("users", audit)).await {
            Ok(_) => Ok(generated.then_some((email, password))),
            Err(AuthError::Store(StoreError::EmailInUse)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Purges expired sessions every 10 minutes.
pub struct SessionPurgeWorker(pub Arc<Auth>);

impl Worker for SessionPurgeWorker {
    fn name(&self) -> &'static str {
        "session-purge"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.0.store.purge_sessions(self.0.clock.now()).await {
                Ok(n) if n > 0 => tracing::info!(purged = n, "expired sessions removed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "session purge failed"),
            }
            let now = self.0.clock.now();
            self.0.limiter.forget_idle(now).await;
            self.0.token_failures.forget_idle(now).await;
            Wait::For(PURGE_EVERY)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_base64url_of_hex() {
        let id = new_session_id().unwrap();
        assert_eq!(id.len(), 64);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }
}

#[cfg(test)]
mod expiry_tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::runtime::{Clock, TestClock};
    use crate::store::Store;

    /// Two setups at once: the gate re-checked under the mutex lets exactly one through; the
    /// other is the conflict a racing POST answers with 409. A setup attempt that begins while
    /// another is handled is marked racing (the handler then skips its early redirect).
    #[tokio::test]
    async fn racing_setups_make_one_admin_and_one_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let auth = Auth::new(store, clock, crate::auth::CryptoPolicy::FAST_TEST, 2);
        let first = auth.setup_attempt();
        let second = auth.setup_attempt();
        assert!(!first.racing() && second.racing());
        drop((first, second));
        assert!(!auth.setup_attempt().racing(), "none in flight any more");
        let form = NewAccount {
            name: "Ada",
            email: "ada@example.org",
            password: "a good long password",
            confirmation: "a good long password",
            source_ip: "127.0.0.1",
        };
        let (a, b) = tokio::join!(auth.setup(form), auth.setup(form));
        let (won, lost) = if a.is_ok() { (a, b) } else { (b, a) };
        assert!(won.is_ok());
        let lost = lost.expect_err("one of two setups loses");
        assert!(
            matches!(lost, AuthError::SetupClosed),
            "the loser is the conflict a racing POST answers with 409: {lost}"
        );
    }

    /// Sessions expire after their TTL and are purged; driven by a test clock, no sleeping.
    #[tokio::test]
    async fn sessions_expire_and_are_purged() {
        let dir = tempfile::tempdir().unwrap();
        let start: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let clock = Arc::new(TestClock::new(start));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let auth = Auth::new(
            store.clone(),
            clock.clone(),
            crate::auth::CryptoPolicy::FAST_TEST,
            1,
        );
        let seed = SeedSettings {
            password: Some("a long enough password".into()),
            ..Default::default()
        };
        auth.seed_default_admin(seed).await.unwrap();
        let short = auth
            .login(
                DEFAULT_ADMIN_EMAIL,
                "a long enough password",
                false,
                "127.0.0.1",
                None,
            )
            .await
            .unwrap();
        let long = auth
            .login(
                DEFAULT_ADMIN_EMAIL,
                "a long enough password",
                true,
                "127.0.0.1",
                None,
            )
            .await
            .unwrap();
        assert_eq!(short.ttl, SESSION_TTL);
        assert_eq!(long.ttl, REMEMBER_TTL);
        assert!(auth.session_principal(&short.id).await.is_ok());

        clock.advance(SESSION_TTL + Duration::from_secs(1));
        match auth.session_principal(&short.id).await {
            Err(AuthError::Invalid(why)) => assert!(why.contains("expired"), "{why}"),
            other => panic!("expected an expired session, got {other:?}"),
        }
        assert!(
            auth.session_principal(&long.id).await.is_ok(),
            "remember-me lasts 30 days"
        );
        assert_eq!(store.purge_sessions(clock.now()).await.unwrap(), 1);
        assert!(matches!(
            auth.session_principal(&short.id).await,
            Err(AuthError::Invalid(_))
        ));

        clock.advance(REMEMBER_TTL);
        assert!(auth.session_principal(&long.id).await.is_err());
    }

    /// With the hashing queue full, a sign-in is answered busy at once instead of queueing.
    #[tokio::test]
    async fn a_full_hashing_queue_answers_busy() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let auth = Auth::new(
            store,
            clock.clone(),
            crate::auth::CryptoPolicy::FAST_TEST,
            1,
        );
        let password = "a long enough password";
        let seed = SeedSettings {
            password: Some(password.into()),
            ..Default::default()
        };
        auth.seed_default_admin(seed).await.unwrap();
        let held: Vec<_> = std::iter::from_fn(|| auth.queue_for_hashing().ok()).collect();
        assert_eq!(held.len(), crate::auth::service::HASH_QUEUE);
        assert!(matches!(
            auth.login(DEFAULT_ADMIN_EMAIL, password, false, "127.0.0.1", None)
                .await,
            Err(AuthError::Busy)
        ));
        drop(held);
        assert!(
            auth.login(DEFAULT_ADMIN_EMAIL, password, false, "127.0.0.1", None)
                .await
                .is_ok()
        );
    }
}
