//! `audit`: the tenant's users, their roles and how they sign in, for an access review.

use super::{ReportError, Reports};
use crate::model::identity::User;
use crate::model::report::{ReportRow, ReportTable};
use serde_json::json;
use uuid::Uuid;

impl Reports {
    pub(super) async fn audit(
        &self,
        tenant: Uuid,
        table: &mut ReportTable,
    ) -> Result<(), ReportError> {
        fill(table, self.store.users(tenant).await?);
        Ok(())
    }
}

/// The table of `users` by e-mail address; a disabled user is a warning.
fn fill(table: &mut ReportTable, mut users: Vec<User>) {
    users.sort_by(|a, b| a.email.cmp(&b.email));
    table.columns = ["user", "name", "roles", "sign-in", "disabled", "last seen"]
        .map(String::from)
        .to_vec();
    let admins = users.iter().filter(|u| u.is_enabled_admin()).count();
    table.totals.insert("users".into(), json!(users.len()));
    table.totals.insert("enabledAdmins".into(), json!(admins));
    table.totals.insert(
        "disabled".into(),
        json!(users.iter().filter(|u| u.disabled).count()),
    );
    for u in users {
        table.rows.push(ReportRow {
            values: vec![
                u.name.clone(),
                u.roles.join(", "),
                if u.local { "local" } else { "directory" }.into(),
                if u.disabled { "yes" } else { "no" }.into(),
                u.last_seen_at.map(|t| t.to_string()).unwrap_or_default(),
            ],
            class: if u.disabled { "warning" } else { "" }.into(),
            name: u.email,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::reports::empty_table;

    fn user(email: &str, roles: &[&str], local: bool, disabled: bool) -> User {
        let at: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        User {
            id: Uuid::from_u128(1),
            tenant_id: Uuid::from_u128(2),
            email: email.into(),
            name: email.split('@').next().unwrap().into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            local,
            subject: String::new(),
            disabled,
            disabled_by_directory: false,
            last_seen_at: local.then_some(at),
            created_at: at,
            updated_at: at,
            version: 1,
        }
    }

    #[test]
    fn users_by_address_with_enabled_admins_and_disabled_counted() {
        let mut table = empty_table("audit");
        fill(
            &mut table,
            vec![
                user("zoe@example.org", &["admin"], true, false),
                user("al@example.org", &["admin", "editor"], false, true),
                user("mo@example.org", &["viewer"], true, false),
            ],
        );
        let names: Vec<&str> = table.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["al@example.org", "mo@example.org", "zoe@example.org"]
        );
        assert_eq!(
            table.rows[0].values,
            ["al", "admin, editor", "directory", "yes", ""]
        );
        assert_eq!(table.rows[0].class, "warning");
        assert_eq!(table.rows[2].values[4], "2026-03-01T08:00:00.000Z");
        assert_eq!(table.totals["enabledAdmins"], 1);
        assert_eq!(table.totals["disabled"], 1);
    }
}
