//! Dashboards, roles, report definitions and saved filters.

use super::*;

pub(super) fn validate_dashboard(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_as::<DashboardBody>(body)?;
    match body.get("spec").and_then(Value::as_str) {
        Some(s) if is_base64(s) => Ok(()),
        _ => Err(invalid("dashboard", "spec must be base64")),
    }
}

#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RoleBody {
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    idp_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

pub(super) fn validate_role(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_as::<RoleBody>(body)?;
    let perms = body
        .get("permissions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for p in perms {
        let p = p.as_str().unwrap_or_default();
        if !crate::model::identity::is_permission(p) {
            return Err(invalid(
                "role",
                format!("permission {p:?} is not of the form resource:action"),
            ));
        }
    }
    Ok(())
}

pub(super) fn validate_report(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    use crate::model::report::{REPORT_TYPES, ReportParams, ReportSchedule};
    validate_with(body, |r: &ReportBody| {
        one_of("type", &r.kind, REPORT_TYPES)?;
        ReportParams::of(&r.params).map_err(|e| invalid("params", e))?;
        if let Some(s) = &r.schedule {
            s.parse::<ReportSchedule>()
                .map_err(|e| invalid("schedule", e))?;
        }
        if r.keep == Some(0) {
            return Err(invalid("keep", "keep must be at least 1"));
        }
        for address in &r.email {
            crate::model::input::check_email(address).map_err(|e| invalid("email", e))?;
        }
        Ok(())
    })
}

/// A saved list filter of the UI: which list and its query parameters.
#[derive(Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SavedFilterBody {
    resource: String,
    #[serde(default)]
    query: BTreeMap<String, String>,
    #[serde(default)]
    shared: bool,
}

pub(super) fn validate_saved_filter(body: &mut Map<String, Value>) -> Result<(), Invalid> {
    validate_with(body, |f: &SavedFilterBody| {
        one_of(
            "resource",
            &f.resource,
            &[
                "objects",
                "hosts",
                "services",
                "problems",
                "alerts",
                "incidents",
                "events",
            ],
        )?;
        check_selector(f.query.get("selector").map(String::as_str))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dashboards_and_roles_are_checked() {
        assert!(
            checked(
                "dashboards",
                json!({"shared": true, "spec": "eyJhIjoxfQ=="})
            )
            .is_ok()
        );
        assert_eq!(
            checked("dashboards", json!({"spec": "not base64!"}))
                .unwrap_err()
                .field,
            "dashboard"
        );
        assert_eq!(
            checked("roles", json!({"permissions": ["bad"]}))
                .unwrap_err()
                .field,
            "role"
        );
    }
}
