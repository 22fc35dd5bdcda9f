//! Permissions are `resource:action`; `*`, `*:*` and `resource:*` (e.g. `admin:*`) imply their
//! families. Built-in roles: admin, operator, editor, viewer.
//!
//! Instance-wide permissions act on every tenant at once (managing tenants, selecting one with
//! `X-Service-Tenant`, backups). They hold only for principals whose home tenant is the
//! default tenant, the instance's own: another tenant's `admin` governs that tenant only.

use std::collections::BTreeSet;

const VIEWER: &[&str] = &[
    "objects:read",
    "alerts:read",
    "incidents:read",
    "events:read",
    "oncall:read",
    "metrics:read",
];

const OPERATOR: &[&str] = &[
    "objects:read",
    "objects:write",
    "alerts:read",
    "alerts:write",
    "alerts:ack",
    "incidents:read",
    "incidents:write",
    "events:read",
    "oncall:read",
    "metrics:read",
    "checks:run",
    "downtimes:write",
    "silences:write",
    "reports:render",
];

/// The editor has the operator's permissions and these.
const EDITOR_EXTRA: &[&str] = &["oncall:write", "config:write"];

const ADMIN: &[&str] = &["*:*"];

/// The permissions that reach past one tenant.
pub const INSTANCE_WIDE: &[&str] = &["admin:tenants", "admin:backup"];

/// Whether `permission` acts on the whole instance.
pub fn is_instance_wide(permission: &str) -> bool {
    INSTANCE_WIDE.contains(&permission)
}

/// The permissions of a built-in role.
pub fn builtin_role(name: &str) -> Option<Vec<&'static str>> {
    match name {
        "admin" => Some(ADMIN.to_vec()),
        "operator" => Some(OPERATOR.to_vec()),
        "editor" => Some([OPERATOR, EDITOR_EXTRA].concat()),
        "viewer" => Some(VIEWER.to_vec()),
        _ => None,
    }
}

/// Whether `granted` covers `wanted`.
pub fn implies(granted: &str, wanted: &str) -> bool {
    if granted == "*" || granted == "*:*" || granted == wanted {
        return true;
    }
    match (granted.split_once(':'), wanted.split_once(':')) {
        (Some((gr, "*")), Some((wr, _))) => gr == wr,
        _ => false,
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions(BTreeSet<String>);

impl Permissions {
    pub fn new(items: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self(items.into_iter().map(Into::into).collect())
    }

    /// Scopes plus the permissions of the named roles; unknown roles add nothing.
    pub fn from_scopes_and_roles(scopes: &[String], roles: &[String]) -> Self {
        let mut set: BTreeSet<String> = scopes.iter().cloned().collect();
        for r in roles {
            if let Some(perms) = builtin_role(r) {
                set.extend(perms.iter().map(|p| p.to_string()));
            }
        }
        Self(set)
    }

    pub fn extend(&mut self, more: impl IntoIterator<Item = String>) {
        self.0.extend(more);
    }

    pub fn allows(&self, wanted: &str) -> bool {
        self.0.iter().any(|g| implies(g, wanted))
    }

    /// Whether everything `other` grants is granted here too (no privilege escalation).
    pub fn covers(&self, other: &Permissions) -> bool {
        other.0.iter().all(|p| {
            // A wildcard is covered only by an equal or wider wildcard.
            self.0.iter().any(|g| implies(g, p))
        })
    }

    pub fn to_vec(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_imply_their_families() {
        assert!(implies("*", "admin:users"));
        assert!(implies("*:*", "objects:read"));
        assert!(implies("admin:*", "admin:users"));
        assert!(!implies("admin:*", "objects:read"));
        assert!(!implies("objects:read", "objects:write"));
        assert!(implies("objects:read", "objects:read"));
        assert!(
            !implies("admin:*", "*:*"),
            "a family does not cover everything"
        );
    }

    #[test]
    fn roles_expand() {
        let viewer = Permissions::from_scopes_and_roles(&[], &["viewer".into()]);
        assert!(viewer.allows("objects:read"));
        assert!(!viewer.allows("objects:write"));
        let admin = Permissions::from_scopes_and_roles(&[], &["admin".into()]);
        assert!(admin.allows("admin:tenants"));
        assert!(admin.covers(&viewer));
        assert!(!viewer.covers(&admin));
        let fam = Permissions::new(["admin:*"]);
        assert!(!fam.covers(&Permissions::new(["*:*"])));
    }
}
