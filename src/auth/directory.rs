//! The LDAP directory (SPEC 5.11): a sync that brings the default tenant's directory accounts in
//! line with the people under `baseDn` (created, updated, disabled when gone), at boot and every
//! `syncInterval` as a supervised worker or on demand, and the directory step of the password
//! sign-in (SPEC 5.4 step 3: search, then bind as the person found).
//!
//! What a sync changes is decided by `plan`, a pure function of the stored accounts and the
//! directory's entries; `Auth::sync_directory` commits it in one transaction with an audit
//! entry per account changed and one for the sync, and writes nothing when nothing changed, so
//! a directory at rest costs the disk nothing.

use super::sso::{ExternalAccount, GroupMatch, first_rdn_value, provisioned, roles_for};
use super::{Auth, AuthError};
use crate::config::LdapConfig;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::event::EventDraft;
use crate::model::identity::{Actor, ActorType, DIRECTORY_SUBJECT, User};
use crate::runtime::Locked;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::store::{TxResult, Wrote};
use ldap3::adapters::{EntriesOnly, PagedResults};
use ldap3::{Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry, ldap_escape};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

const PAGE_SIZE: i32 = 500;
const DEFAULT_USER_FILTER: &str = "(&(objectClass=person)(mail=*))";
const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// Connecting, binding and each search page: a directory that hangs fails the sync instead.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(15);
/// After a failed sync, the next try comes sooner than the interval.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(60);

/// The outcome of one sync, as the reference reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SyncResult {
    pub created: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub disabled: u64,
    /// Entries without an e-mail address.
    pub skipped: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `GET /api/v1/directory/status`.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DirectoryStatus {
    pub configured: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_interval: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<SyncResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Why the directory could not be read; the text names no secret.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DirectoryError(String);

fn ldap_error(what: &str, e: ldap3::LdapError) -> DirectoryError {
    DirectoryError(format!("{what}: {e}"))
}

/// `ldap.*` with SPEC 5.11's defaults filled in.
struct Settings {
    url: String,
    start_tls: bool,
    insecure: bool,
    bind_dn: String,
    bind_password: String,
    base_dn: String,
    user_filter: String,
    user_attr: String,
    name_attr: String,
    id_attr: String,
    group_attr: String,
    group_filter: Option<String>,
    group_base_dn: String,
    sync_interval: Duration,
    default_roles: Vec<String>,
    admin_group: Option<String>,
    disable_missing: bool,
}

fn or_default(value: &Option<String>, default: &str) -> String {
    value
        .clone()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_string())
}

impl Settings {
    fn of(c: &LdapConfig) -> Self {
        Settings {
            url: c.url.clone(),
            start_tls: c.start_tls,
            insecure: c.insecure_skip_verify,
            bind_dn: c.bind_dn.clone(),
            bind_password: c.bind_password.0.clone(),
            base_dn: c.base_dn.clone(),
            user_filter: or_default(&c.user_filter, DEFAULT_USER_FILTER),
            user_attr: or_default(&c.user_attr, "mail"),
            name_attr: or_default(&c.name_attr, "cn"),
            id_attr: or_default(&c.id_attr, ""),
            group_attr: or_default(&c.group_attr, "memberOf"),
            group_filter: c.group_filter.clone().filter(|f| !f.trim().is_empty()),
            group_base_dn: or_default(&c.group_base_dn, &c.base_dn),
            sync_interval: c
                .sync_interval
                .map(|d| d.0)
                .filter(|d| !d.is_zero())
                .unwrap_or(DEFAULT_SYNC_INTERVAL),
            default_roles: c
                .default_roles
                .clone()
                .unwrap_or_else(|| vec!["viewer".into()]),
            admin_group: c.admin_group.clone().filter(|g| !g.trim().is_empty()),
            disable_missing: c.disable_missing.unwrap_or(true),
        }
    }
}

/// An attribute's values, its name matched without regard to case.
fn values<'e>(entry: &'e SearchEntry, attr: &str) -> Vec<&'e str> {
    entry
        .attrs
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(attr))
        .flat_map(|(_, v)| v.iter().map(String::as_str))
        .collect()
}

/// What a sync does to one account.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    Create(ExternalAccount, Vec<String>),
    Update {
        id: Uuid,
        person: ExternalAccount,
        roles: Vec<String>,
    },
    Disable(Uuid),
}

/// What a sync changes: accounts to create for people not yet known, to update where the
/// e-mail, name or roles differ or where a sync had disabled them (the person is back), and,
/// with `disable_missing`, to disable where a directory account's person is gone. Accounts are
/// matched by subject; everyone else is left alone.
pub fn plan(
    stored: &[User],
    people: &[(ExternalAccount, Vec<String>)],
    disable_missing: bool,
) -> (Vec<Change>, u64) {
    let by_subject: HashMap<&str, &User> = stored
        .iter()
        .filter(|u| u.is_directory_account())
        .map(|u| (u.subject.as_str(), u))
        .collect();
    let mut changes = Vec::new();
    let mut unchanged = 0;
    for (person, roles) in people {
        match by_subject.get(person.subject.as_str()) {
            None => changes.push(Change::Create(person.clone(), roles.clone())),
            Some(u)
                if u.email != person.email
                    || u.name != person.name
                    || &u.roles != roles
                    || (u.disabled && u.disabled_by_directory) =>
            {
                changes.push(Change::Update {
                    id: u.id,
                    person: person.clone(),
                    roles: roles.clone(),
                })
            }
            Some(_) => unchanged += 1,
        }
    }
    if disable_missing {
        let present: std::collections::HashSet<&str> =
            people.iter().map(|(p, _)| p.subject.as_str()).collect();
        for u in by_subject.values() {
            if !u.disabled && !present.contains(u.subject.as_str()) {
                changes.push(Change::Disable(u.id));
            }
        }
    }
    (changes, unchanged)
}

/// The configured directory.
pub struct Directory {
    settings: Settings,
    tls: Arc<rustls::ClientConfig>,
    status: Mutex<DirectoryStatus>,
    /// One sync at a time; a second asked for meanwhile waits for it.
    running: tokio::sync::Mutex<()>,
}

impl Directory {
    /// The directory of `config`, or `None` when `ldap.url` is empty.
    pub fn new(config: &LdapConfig) -> Result<Option<Arc<Self>>, String> {
        if config.url.is_empty() {
            return Ok(None);
        }
        let settings = Settings::of(config);
        let tls = crate::runtime::tls::trusting(None, settings.insecure)
            .map_err(|e| format!("ldap: {e}"))?;
        let status = DirectoryStatus {
            configured: true,
            url: settings.url.clone(),
            sync_interval: crate::model::duration::GoDuration(settings.sync_interval).to_string(),
            ..Default::default()
        };
        Ok(Some(Arc::new(Directory {
            settings,
            tls: Arc::new(tls),
            status: Mutex::new(status),
            running: tokio::sync::Mutex::new(()),
        })))
    }

    pub fn status(&self) -> DirectoryStatus {
        self.status.locked().clone()
    }

    /// A connection, bound as `dn` (anonymous when empty).
    async fn bind(&self, dn: &str, password: &str) -> Result<Ldap, DirectoryError> {
        let settings = LdapConnSettings::new()
            .set_conn_timeout(OPERATION_TIMEOUT)
            .set_starttls(self.settings.start_tls)
            .set_no_tls_verify(self.settings.insecure)
            .set_config(self.tls.clone());
        let (conn, mut ldap) = LdapConnAsync::with_settings(settings, &self.settings.url)
            .await
            .map_err(|e| ldap_error(&format!("connecting to {}", self.settings.url), e))?;
        ldap3::drive!(conn);
        if !dn.is_empty() {
            ldap.with_timeout(OPERATION_TIMEOUT)
                .simple_bind(dn, password)
                .await
                .and_then(|r| r.success())
                .map_err(|e| ldap_error(&format!("binding as {dn}"), e))?;
        }
        Ok(ldap)
    }

    /// Every entry of a subtree search, 500 a page.
    async fn search(
        ldap: &mut Ldap,
        base: &str,
        filter: &str,
        attrs: Vec<String>,
    ) -> Result<Vec<SearchEntry>, DirectoryError> {
        let what = |e| ldap_error(&format!("searching {base} for {filter}"), e);
        let adapters: Vec<Box<dyn ldap3::adapters::Adapter<'_, String, Vec<String>>>> = vec![
            Box::new(EntriesOnly::new()),
            Box::new(PagedResults::new(PAGE_SIZE)),
        ];
        let mut stream = ldap
            .with_timeout(OPERATION_TIMEOUT)
            .streaming_search_with(adapters, base, Scope::Subtree, filter, attrs)
            .await
            .map_err(what)?;
        let mut entries = Vec::new();
        while let Some(entry) = stream.next().await.map_err(what)? {
            entries.push(SearchEntry::construct(entry));
        }
        stream.finish().await.success().map_err(what)?;
        Ok(entries)
    }

    /// The groups of a person: their `groupAttr` values, or the DNs of the groups
    /// `groupFilter` finds under `groupBaseDn` (`{dn}` the person's DN, `{user}` the value of
    /// its first RDN, both escaped).
    async fn groups_of(
        &self,
        ldap: &mut Ldap,
        entry: &SearchEntry,
    ) -> Result<Vec<String>, DirectoryError> {
        let Some(filter) = &self.settings.group_filter else {
            return Ok(values(entry, &self.settings.group_attr)
                .into_iter()
                .map(str::to_string)
                .collect());
        };
        let filter = filter
            .replace("{dn}", &ldap_escape(entry.dn.as_str()))
            .replace("{user}", &ldap_escape(first_rdn_value(&entry.dn)));
        let groups = Self::search(
            ldap,
            &self.settings.group_base_dn,
            &filter,
            vec!["1.1".into()],
        )
        .await?;
        Ok(groups.into_iter().map(|g| g.dn).collect())
    }

    fn person(&self, entry: &SearchEntry, groups: Vec<String>) -> Option<ExternalAccount> {
        let email = values(entry, &self.settings.user_attr)
            .first()?
            .trim()
            .to_lowercase();
        if email.is_empty() {
            return None;
        }
        let id = if self.settings.id_attr.is_empty() {
            Some(entry.dn.as_str())
        } else {
            values(entry, &self.settings.id_attr).first().copied()
        }?;
        let name = values(entry, &self.settings.name_attr)
            .first()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| email.clone());
        Some(ExternalAccount {
            subject: format!("{DIRECTORY_SUBJECT}{}", id.to_lowercase()),
            email,
            name,
            groups,
        })
    }

    /// Everyone under `baseDn` that `userFilter` matches; those without an e-mail are counted
    /// as skipped.
    async fn people(&self) -> Result<(Vec<ExternalAccount>, u64), DirectoryError> {
        let s = &self.settings;
        let mut ldap = self.bind(&s.bind_dn, &s.bind_password).await?;
        let mut attrs = vec![
            s.user_attr.clone(),
            s.name_attr.clone(),
            s.group_attr.clone(),
        ];
        if !s.id_attr.is_empty() {
            attrs.push(s.id_attr.clone());
        }
        let entries = Self::search(&mut ldap, &s.base_dn, &s.user_filter, attrs).await?;
        let mut people = Vec::new();
        let mut skipped = 0;
        for entry in &entries {
            let groups = self.groups_of(&mut ldap, entry).await?;
            match self.person(entry, groups) {
                Some(p) => people.push(p),
                None => skipped += 1,
            }
        }
        let _ = ldap.unbind().await;
        Ok((people, skipped))
    }

    /// Search, then bind (SPEC 5.4 step 3): finds the person with this e-mail address as the
    /// configured account, then binds as them with `password`. An empty password is refused
    /// before anything is sent: many directories take it as an anonymous bind and succeed.
    pub async fn verify(&self, email: &str, password: &str) -> Result<bool, DirectoryError> {
        if password.is_empty() {
            return Ok(false);
        }
        let s = &self.settings;
        let mut ldap = self.bind(&s.bind_dn, &s.bind_password).await?;
        let filter = format!(
            "(&{}({}={}))",
            s.user_filter,
            s.user_attr,
            ldap_escape(email)
        );
        let found = Self::search(&mut ldap, &s.base_dn, &filter, vec!["1.1".into()]).await?;
        let _ = ldap.unbind().await;
        let [entry] = found.as_slice() else {
            return Ok(false);
        };
        match self.bind(&entry.dn, password).await {
            Ok(mut as_person) => {
                let _ = as_person.unbind().await;
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    fn record(&self, at: Timestamp, outcome: &Result<SyncResult, AuthError>) {
        let mut status = self.status.locked();
        status.last_sync_at = Some(at);
        match outcome {
            Ok(result) => {
                status.last_result = Some(result.clone());
                status.last_error = None;
            }
            Err(e) => status.last_error = Some(e.to_string()),
        }
    }
}

impl Auth {
    /// Reads the directory and brings the default tenant's directory accounts in line (SPEC
    /// 5.11). `actor` is who asked (the sync worker, or a user through the API); a sync asked
    /// for by someone is audited even when it changed nothing.
    pub async fn sync_directory(
        &self,
        directory: &Directory,
        actor: &Actor,
        always_audit: bool,
    ) -> Result<SyncResult, AuthError> {
        let _one_at_a_time = directory.running.lock().await;
        let outcome = self.sync_once(directory, actor, always_audit).await;
        directory.record(self.clock.now(), &outcome);
        outcome
    }

    /// One sync: the directory's failures are `Directory` (502), the store's are its own.
    async fn sync_once(
        &self,
        directory: &Directory,
        actor: &Actor,
        always_audit: bool,
    ) -> Result<SyncResult, AuthError> {
        let (found, skipped) = directory
            .people()
            .await
            .map_err(|e| AuthError::Directory(e.to_string()))?;
        let tenant = self.store.default_tenant().await?.id;
        let defined = self.idp_roles(tenant).await?;
        let s = &directory.settings;
        let people: Vec<(ExternalAccount, Vec<String>)> = found
            .into_iter()
            .map(|p| {
                let roles = roles_for(
                    &defined,
                    &p.groups,
                    s.admin_group.as_deref(),
                    GroupMatch::Directory,
                    &s.default_roles,
                );
                (p, roles)
            })
            .collect();
        let stored = self.store.users(tenant).await?;
        let (changes, unchanged) = plan(&stored, &people, s.disable_missing);
        if changes.is_empty() && !always_audit {
            return Ok(SyncResult {
                unchanged,
                skipped,
                ..Default::default()
            });
        }
        let now = self.clock.now();
        let ids: Vec<Uuid> = changes.iter().map(|_| self.clock.new_id()).collect();
        let actor = actor.clone();
        let result = self
            .store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let mut audits = Vec::new();
                let mut warnings = Vec::new();
                let mut counts = BTreeMap::<&str, u64>::new();
                for (change, new_id) in changes.into_iter().zip(ids) {
                    let (before, after, action) = match change {
                        Change::Create(person, roles) => (
                            None,
                            provisioned(None, &person, &roles, new_id, tenant, now),
                            "user.provision",
                        ),
                        Change::Update { id, person, roles } => {
                            let Some(old) = tx.user(tenant, id)? else {
                                continue;
                            };
                            let mut user =
                                provisioned(Some(&old), &person, &roles, id, tenant, now);
                            if user.user.disabled && user.user.disabled_by_directory {
                                // The person is back in the directory.
                                user.user.disabled = false;
                                user.user.disabled_by_directory = false;
                                user.user.updated_at = now;
                                user.user.version = old.user.version + 1;
                            }
                            (Some(old), user, "user.update")
                        }
                        Change::Disable(id) => {
                            let Some(old) = tx.user(tenant, id)? else {
                                continue;
                            };
                            let mut user = old.clone();
                            user.user.disabled = true;
                            user.user.disabled_by_directory = true;
                            user.user.updated_at = now;
                            user.user.version += 1;
                            (Some(old), user, "user.disable")
                        }
                    };
                    match super::users::save_user(tx, &after) {
                        Ok(()) => {}
                        Err(AuthError::Store(crate::store::StoreError::EmailInUse)) => {
                            warnings.push(format!(
                                "{}: another account has the e-mail address {}",
                                after.user.subject, after.user.email
                            ));
                            continue;
                        }
                        Err(AuthError::Validation { detail, .. }) => {
                            warnings.push(format!("{}: {detail}", after.user.subject));
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                    *counts.entry(action).or_default() += 1;
                    let resource = format!("user/{}", after.user.id);
                    let draft = AuditDraft::new(now, tenant, &actor, action, resource);
                    audits.push(match before {
                        Some(b) => draft.before(&b.user).after(&after.user),
                        None => draft.after(&after.user),
                    });
                }
                let result = SyncResult {
                    created: counts.get("user.provision").copied().unwrap_or(0),
                    updated: counts.get("user.update").copied().unwrap_or(0),
                    disabled: counts.get("user.disable").copied().unwrap_or(0),
                    unchanged,
                    skipped,
                    warnings,
                };
                let changed = !audits.is_empty();
                audits.push(
                    AuditDraft::new(now, tenant, &actor, "directory.sync", "directory".into())
                        .after(&result),
                );
                let events = if changed {
                    vec![EventDraft::config(
                        tenant,
                        &["users"],
                        "directory.sync",
                        "directory",
                    )]
                } else {
                    Vec::new()
                };
                tx.record(audits, events)?;
                Ok(Wrote::Changed(result))
            })
            .await?;
        Ok(result)
    }

    /// The directory step of the password sign-in (SPEC 5.4 step 3) for a directory account:
    /// whether the directory takes this password for this e-mail address.
    pub(super) async fn verify_in_directory(
        &self,
        directory: &Directory,
        email: &str,
        password: &str,
    ) -> Result<bool, AuthError> {
        directory.verify(email, password).await.map_err(|e| {
            tracing::warn!(error = %e, "directory sign-in could not be checked");
            AuthError::Directory(e.to_string())
        })
    }
}

/// Who a scheduled sync is audited as.
fn worker_actor() -> Actor {
    Actor {
        actor_type: ActorType::System,
        actor_id: "directory-sync".into(),
        source_ip: String::new(),
        request_id: String::new(),
    }
}

/// Syncs the directory at boot and every `syncInterval` (a minute after a failure); a sync
/// through the API does not move its schedule.
pub struct DirectorySync {
    pub auth: Arc<Auth>,
    pub directory: Arc<Directory>,
}

impl Worker for DirectorySync {
    fn name(&self) -> &'static str {
        "directory-sync"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self
                .auth
                .sync_directory(&self.directory, &worker_actor(), false)
                .await
            {
                Ok(r) => {
                    if r.created + r.updated + r.disabled > 0 {
                        tracing::info!(
                            created = r.created,
                            updated = r.updated,
                            disabled = r.disabled,
                            "directory synced"
                        );
                    }
                    Wait::For(self.directory.settings.sync_interval)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "directory sync failed");
                    Wait::For(RETRY_AFTER_FAILURE.min(self.directory.settings.sync_interval))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: u128, subject: &str, email: &str, roles: &[&str], disabled: bool) -> User {
        let now = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        User {
            id: Uuid::from_u128(n),
            tenant_id: Uuid::nil(),
            email: email.into(),
            name: email.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            local: !subject.starts_with(DIRECTORY_SUBJECT),
            subject: subject.into(),
            disabled,
            disabled_by_directory: false,
            last_seen_at: None,
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }

    fn person(dn: &str, email: &str) -> ExternalAccount {
        ExternalAccount {
            subject: format!("ldap|{dn}"),
            email: email.into(),
            name: email.into(),
            groups: vec![],
        }
    }

    #[test]
    fn a_sync_creates_updates_and_disables_only_directory_accounts() {
        let kept = user(1, "ldap|uid=kept,dc=x", "kept@x", &["viewer"], false);
        let moved = user(2, "ldap|uid=moved,dc=x", "moved@x", &["viewer"], false);
        let gone = user(3, "ldap|uid=gone,dc=x", "gone@x", &["viewer"], false);
        let gone_already = user(4, "ldap|uid=old,dc=x", "old@x", &["viewer"], true);
        let local = user(5, "", "admin@x", &["admin"], false);
        let oidc = user(6, "https://idp|7", "sso@x", &["viewer"], false);
        let stored = vec![
            kept.clone(),
            moved.clone(),
            gone.clone(),
            gone_already,
            local,
            oidc,
        ];
        let people = vec![
            (
                person("uid=kept,dc=x", "kept@x"),
                vec!["viewer".to_string()],
            ),
            (person("uid=moved,dc=x", "moved@x"), vec!["noc".to_string()]),
            (person("uid=new,dc=x", "new@x"), vec!["viewer".to_string()]),
        ];
        let (changes, unchanged) = plan(&stored, &people, true);
        assert_eq!(unchanged, 1);
        assert_eq!(
            changes,
            vec![
                Change::Update {
                    id: moved.id,
                    person: people[1].0.clone(),
                    roles: vec!["noc".into()]
                },
                Change::Create(people[2].0.clone(), vec!["viewer".into()]),
                Change::Disable(gone.id),
            ]
        );
        let (changes, _) = plan(&stored, &people, false);
        assert!(!changes.iter().any(|c| matches!(c, Change::Disable(_))));
    }

    #[test]
    fn a_person_back_in_the_directory_is_enabled_unless_an_administrator_disabled_them() {
        let mut left = user(1, "ldap|uid=left,dc=x", "left@x", &["viewer"], true);
        left.disabled_by_directory = true;
        let barred = user(2, "ldap|uid=barred,dc=x", "barred@x", &["viewer"], true);
        let people = vec![
            (
                person("uid=left,dc=x", "left@x"),
                vec!["viewer".to_string()],
            ),
            (
                person("uid=barred,dc=x", "barred@x"),
                vec!["viewer".to_string()],
            ),
        ];
        let (changes, unchanged) = plan(&[left.clone(), barred], &people, true);
        assert_eq!(
            changes,
            vec![Change::Update {
                id: left.id,
                person: people[0].0.clone(),
                roles: vec!["viewer".into()]
            }]
        );
        assert_eq!(
            unchanged, 1,
            "the account an administrator disabled stays disabled"
        );
    }

    #[test]
    fn settings_default_as_spec_says() {
        let s = Settings::of(&LdapConfig {
            url: "ldap://dir".into(),
            base_dn: "dc=x".into(),
            sync_interval: Some(crate::model::duration::GoDuration(Duration::ZERO)),
            ..Default::default()
        });
        assert_eq!(s.user_filter, DEFAULT_USER_FILTER);
        assert_eq!(
            (
                s.user_attr.as_str(),
                s.name_attr.as_str(),
                s.group_attr.as_str()
            ),
            ("mail", "cn", "memberOf")
        );
        assert_eq!(s.group_base_dn, "dc=x");
        assert_eq!(s.sync_interval, DEFAULT_SYNC_INTERVAL);
        assert_eq!(s.default_roles, vec!["viewer"]);
        assert!(s.disable_missing && !s.start_tls && !s.insecure);
    }
}
