//! Accounts of an identity provider (SPEC 5.10) and, by the same rules, of a directory (SPEC
//! 5.11): the roles of a member of some groups, and the account provisioned or brought up to
//! date at each sign-in, in one transaction with its session and audit entries.

use super::sessions::{NewSession, SESSION_TTL};
use super::{Auth, AuthError};
use crate::model::audit::AuditDraft;
use crate::model::identity::{Actor, ActorType, Session, StoredUser, User};
use crate::store::StoreError;
use crate::store::{TxResult, Wrote};
use uuid::Uuid;

/// How a role's `idpGroups` entry (or the admin group) is compared with a user's group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupMatch {
    /// The same string (OIDC group claims).
    Exact,
    /// Lower-cased, against the group's whole DN or the value of its first RDN (LDAP).
    Directory,
}

impl GroupMatch {
    pub fn matches(self, configured: &str, group: &str) -> bool {
        match self {
            GroupMatch::Exact => configured == group,
            GroupMatch::Directory => {
                let (configured, group) = (configured.to_lowercase(), group.to_lowercase());
                configured == group || first_rdn_value(&group) == configured
            }
        }
    }
}

/// The value of a DN's first RDN (`uid=ada,ou=people` → `ada`); a string that is no DN is
/// its own value.
pub(super) fn first_rdn_value(dn: &str) -> &str {
    dn.split(',')
        .next()
        .and_then(|rdn| rdn.split_once('='))
        .map_or(dn, |(_, v)| v.trim())
}

/// The roles of a member of `groups`: every role (name, its `idpGroups`) naming one of them,
/// `admin` when one is the admin group, and `fallback` when none matched.
pub fn roles_for(
    defined: &[(String, Vec<String>)],
    groups: &[String],
    admin_group: Option<&str>,
    how: GroupMatch,
    fallback: &[String],
) -> Vec<String> {
    let member = |configured: &str| groups.iter().any(|g| how.matches(configured, g));
    let mut roles: Vec<String> = defined
        .iter()
        .filter(|(_, idp)| idp.iter().any(|c| member(c)))
        .map(|(name, _)| name.clone())
        .collect();
    if admin_group.is_some_and(member) && !roles.iter().any(|r| r == "admin") {
        roles.push("admin".into());
    }
    if roles.is_empty() {
        roles = fallback.to_vec();
    }
    roles
}

/// A person as an identity provider or a directory has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalAccount {
    /// `issuer|sub`, or `ldap|dn`
    pub subject: String,
    pub email: String,
    pub name: String,
    pub groups: Vec<String>,
}

/// The account of an external person as a sign-in or a sync leaves it: `existing` brought up
/// to date (its version moved only when something changed), or a new one, not local and
/// without a password, with id `new_id` in `tenant`.
pub(super) fn provisioned(
    existing: Option<&StoredUser>,
    account: &ExternalAccount,
    roles: &[String],
    new_id: Uuid,
    tenant: Uuid,
    now: crate::model::Timestamp,
) -> StoredUser {
    match existing {
        Some(old) => {
            let mut user = old.clone();
            let changed = user.user.email != account.email
                || user.user.name != account.name
                || user.user.roles != roles;
            if changed {
                user.user.email = account.email.clone();
                user.user.name = account.name.clone();
                user.user.roles = roles.to_vec();
                user.user.updated_at = now;
                user.user.version += 1;
            }
            user
        }
        None => StoredUser {
            user: User {
                id: new_id,
                tenant_id: tenant,
                email: account.email.clone(),
                name: account.name.clone(),
                roles: roles.to_vec(),
                local: false,
                subject: account.subject.clone(),
                disabled: false,
                disabled_by_directory: false,
                last_seen_at: None,
                created_at: now,
                updated_at: now,
                version: 1,
            },
            password_hash: None,
        },
    }
}

impl Auth {
    /// The default tenant's roles with their `idpGroups`.
    pub(super) async fn idp_roles(
        &self,
        tenant: Uuid,
    ) -> Result<Vec<(String, Vec<String>)>, AuthError> {
        let docs = self
            .store
            .docs(tenant, "roles", None, usize::MAX, |_| true)
            .await?;
        Ok(docs
            .into_iter()
            .map(|doc| {
                let groups = doc.to_json()["idpGroups"]
                    .as_array()
                    .map(|g| {
                        g.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                (doc.name, groups)
            })
            .collect())
    }

    /// Signs in an identity provider's account (SPEC 5.10): roles recomputed from its groups,
    /// the account created in the default tenant (not local, no password) or brought up to
    /// date, a 12 h session; audit `user.provision` or `user.update` (with the roles before
    /// and after) when the account changed, and `login.oidc`. A disabled account, or an e-mail
    /// address another account holds, is refused.
    pub async fn sign_in_sso(
        &self,
        account: ExternalAccount,
        admin_group: Option<&str>,
        source_ip: &str,
    ) -> Result<NewSession, AuthError> {
        let tenant = self.store.default_tenant().await?.id;
        let roles = roles_for(
            &self.idp_roles(tenant).await?,
            &account.groups,
            admin_group,
            GroupMatch::Exact,
            &["viewer".to_string()],
        );
        let now = self.clock.now();
        let new_id = self.clock.new_id();
        let session_id = super::sessions::new_session_id()
            .ok_or_else(|| AuthError::Internal("no randomness available".into()))?;
        let id = session_id.clone();
        let ip = source_ip.to_string();
        self.store
            .transact(move |tx| -> TxResult<_, AuthError> {
                let known = tx.users(tenant)?;
                let existing = match known.iter().find(|u| u.subject == account.subject) {
                    Some(u) => tx.user(tenant, u.id)?,
                    None => None,
                };
                if existing.as_ref().is_some_and(|u| u.user.disabled) {
                    return Err(AuthError::Invalid("this account is disabled".into()));
                }
                let user = provisioned(existing.as_ref(), &account, &roles, new_id, tenant, now);
                let actor = Actor {
                    actor_type: ActorType::User,
                    actor_id: user.user.id.to_string(),
                    source_ip: ip,
                    request_id: String::new(),
                };
                let resource = format!("user/{}", user.user.id);
                let mut audits = Vec::new();
                match &existing {
                    None => audits.push(
                        AuditDraft::new(now, tenant, &actor, "user.provision", resource.clone())
                            .after(&user.user),
                    ),
                    Some(old) if old != &user => audits.push(
                        AuditDraft::new(now, tenant, &actor, "user.update", resource.clone())
                            .before(&old.user)
                            .after(&user.user),
                    ),
                    Some(_) => {}
                }
                let mut events = Vec::new();
                if !audits.is_empty() {
                    super::users::save_user(tx, &user)?;
                    events.push(crate::model::event::EventDraft::config(
                        tenant,
                        &["users"],
                        &audits[0].action,
                        &resource,
                    ));
                }
                audits.push(AuditDraft::new(now, tenant, &actor, "login.oidc", resource));
                tx.save_session(&Session {
                    id: session_id,
                    user_id: user.user.id,
                    tenant_id: tenant,
                    roles: user.user.roles.clone(),
                    groups: account.groups,
                    created_at: now,
                    expires_at: now.plus(SESSION_TTL),
                    last_seen_at: None,
                })?;
                tx.record(audits, events)?;
                Ok(Wrote::Changed(()))
            })
            .await
            .map_err(|e| match e {
                AuthError::Store(StoreError::EmailInUse) => AuthError::Invalid(
                    "another account has this e-mail address; an administrator can remove or change it".into(),
                ),
                AuthError::Validation { detail, .. } => AuthError::Invalid(detail),
                e => e,
            })?;
        Ok(NewSession {
            id,
            ttl: SESSION_TTL,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defined() -> Vec<(String, Vec<String>)> {
        vec![
            (
                "noc".into(),
                vec!["NOC".into(), "cn=noc,ou=groups,dc=example,dc=org".into()],
            ),
            ("field".into(), vec!["field-techs".into()]),
        ]
    }

    #[test]
    fn every_matching_role_is_granted_and_the_admin_group_adds_admin() {
        let groups = vec![
            "NOC".to_string(),
            "field-techs".to_string(),
            "ops".to_string(),
        ];
        assert_eq!(
            roles_for(
                &defined(),
                &groups,
                Some("ops"),
                GroupMatch::Exact,
                &["viewer".into()]
            ),
            vec!["noc", "field", "admin"]
        );
    }

    #[test]
    fn no_match_gives_the_fallback_and_exact_means_exact() {
        let groups = vec!["noc".to_string()];
        assert_eq!(
            roles_for(
                &defined(),
                &groups,
                Some("ops"),
                GroupMatch::Exact,
                &["viewer".into()]
            ),
            vec!["viewer"]
        );
        assert_eq!(
            roles_for(&defined(), &[], None, GroupMatch::Exact, &[]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_first_rdn_names_a_group() {
        assert_eq!(first_rdn_value("cn=NOC,ou=groups,dc=x"), "NOC");
        assert_eq!(first_rdn_value("plain"), "plain");
    }

    #[test]
    fn directory_groups_match_lower_cased_by_dn_or_first_rdn() {
        assert!(GroupMatch::Directory.matches("NOC", "CN=noc,OU=Groups,DC=example,DC=org"));
        assert!(GroupMatch::Directory.matches(
            "cn=noc,ou=groups,dc=example,dc=org",
            "CN=NOC,OU=Groups,DC=example,DC=org"
        ));
        assert!(!GroupMatch::Directory.matches("groups", "cn=noc,ou=groups,dc=example,dc=org"));
        let groups = vec!["cn=Field-Techs,ou=groups,dc=example,dc=org".to_string()];
        assert_eq!(
            roles_for(
                &defined(),
                &groups,
                Some("cn=admins,ou=groups,dc=example,dc=org"),
                GroupMatch::Directory,
                &["viewer".into()]
            ),
            vec!["field"]
        );
    }

    #[test]
    fn a_returning_account_changes_only_when_something_did() {
        let tenant = Uuid::nil();
        let now = crate::model::Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let account = ExternalAccount {
            subject: "https://idp|1".into(),
            email: "a@example.org".into(),
            name: "A".into(),
            groups: vec![],
        };
        let first = provisioned(None, &account, &["viewer".into()], Uuid::max(), tenant, now);
        assert!(!first.user.local && first.password_hash.is_none());
        assert_eq!(first.user.subject, "https://idp|1");
        let same = provisioned(
            Some(&first),
            &account,
            &["viewer".into()],
            Uuid::nil(),
            tenant,
            now,
        );
        assert_eq!(same, first);
        let promoted = provisioned(
            Some(&first),
            &account,
            &["admin".into()],
            Uuid::nil(),
            tenant,
            now,
        );
        assert_eq!(promoted.user.roles, vec!["admin"]);
        assert_eq!(promoted.user.id, first.user.id);
        assert_eq!(promoted.user.version, 2);
    }
}
