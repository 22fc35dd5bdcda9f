//! Public status pages (issue 74, part 3): the `status-pages` document, its components'
//! evaluated state with their daily availability, the public updates an incident posts, and
//! the people subscribed by e-mail. Statuspage's and Uptime Kuma's vocabulary: components,
//! incidents with updates (`investigating`, `identified`, `monitoring`, `resolved`) and
//! scheduled maintenance.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// At most this many components on a page: the page stays under 40 KB.
pub const MAX_COMPONENTS: usize = 30;
/// The days of availability a page shows.
pub const HISTORY_DAYS: usize = 90;
/// The statuses of an update, in the order an incident usually moves through them.
pub const UPDATE_STATUSES: [&str; 4] = ["investigating", "identified", "monitoring", "resolved"];
/// A status update's message, at most this many characters.
pub const MAX_MESSAGE: usize = 5000;

/// The body of a `status-pages` document. Its name is the page's address
/// (`/status/{name}`), unique across tenants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusPageBody {
    /// The heading; the name when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// What the page shows, in order: 1 to 30.
    pub components: Vec<Component>,
    /// The `email` channel that mails subscribers; without one, nobody can subscribe by
    /// e-mail (the feeds still work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_channel: Option<String>,
}

/// One row of a page: a business service (by name) or one object (by id, or by name as
/// `host` or `host/service`), under the name the public sees.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

impl StatusPageBody {
    pub fn check(&self) -> Result<(), String> {
        if self.components.is_empty() || self.components.len() > MAX_COMPONENTS {
            return Err(format!("components: 1 to {MAX_COMPONENTS}"));
        }
        if self.title.chars().count() > 200 || self.description.chars().count() > 2000 {
            return Err("title: at most 200 characters; description: at most 2000".into());
        }
        for c in &self.components {
            if c.name.trim().is_empty() || c.name.chars().count() > 200 {
                return Err("a component's name: 1 to 200 characters".into());
            }
            let named = [
                c.business_service.is_some(),
                c.object_id.is_some(),
                c.object.is_some(),
            ];
            if named.iter().filter(|n| **n).count() != 1 {
                return Err(format!(
                    "component {:?}: exactly one of businessService, objectId, object",
                    c.name
                ));
            }
        }
        Ok(())
    }

    pub fn heading<'a>(&'a self, name: &'a str) -> &'a str {
        if self.title.is_empty() {
            name
        } else {
            &self.title
        }
    }
}

/// A component as the page shows it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub name: String,
    pub description: String,
    /// `operational`, `degraded`, `outage`, `maintenance` or `unknown` (nothing it binds
    /// exists, or nothing was checked yet).
    pub status: &'static str,
    /// Availability in percent over the days shown (those with data).
    pub availability: Option<f64>,
    /// Each day's availability in percent, oldest first, ending today (UTC days); null for
    /// a day without data.
    pub days: Vec<Option<f64>>,
}

/// A window of maintenance on the page: a downtime on something a component binds, running or
/// starting within 14 days.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    pub title: String,
    pub start: Timestamp,
    pub end: Timestamp,
    pub components: Vec<String>,
}

/// What a page shows of its components.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Board {
    pub components: Vec<ComponentStatus>,
    pub maintenance: Vec<Maintenance>,
}

impl Board {
    /// The page's headline: the worst component's.
    pub fn overall(&self) -> &'static str {
        let rank = |s: &str| match s {
            "outage" => 4,
            "degraded" => 3,
            "unknown" => 2,
            "maintenance" => 1,
            _ => 0,
        };
        self.components
            .iter()
            .map(|c| c.status)
            .max_by_key(|s| rank(s))
            .unwrap_or("unknown")
    }
}

/// `POST /api/v1/incidents/{id}/status-updates`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusUpdateBody {
    /// investigating, identified, monitoring or resolved.
    pub status: String,
    pub message: String,
    /// The pages it is posted on: 1 or more of the tenant's `status-pages`.
    pub pages: Vec<String>,
    /// The components it affects, by their names on the pages (shown with the update).
    #[serde(default)]
    pub components: Vec<String>,
    /// Whether the pages' subscribers are mailed (default true).
    #[serde(default)]
    pub notify: Option<bool>,
}

/// A public update of an incident.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub incident_id: Uuid,
    /// The incident's title when the update was posted.
    pub title: String,
    pub status: String,
    pub message: String,
    pub pages: Vec<String>,
    #[serde(default)]
    pub components: Vec<String>,
    pub posted_at: Timestamp,
    pub posted_by: String,
    /// How many subscribers it was mailed to.
    #[serde(default)]
    pub mailed: usize,
}

/// One incident as a page shows it: its updates, newest first.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PageIncident {
    pub incident_id: Uuid,
    pub title: String,
    /// The status of its newest update.
    pub status: String,
    pub updates: Vec<StatusUpdate>,
}

/// Groups updates (newest first) by incident, the incident with the newest update first.
pub fn incidents(updates: Vec<StatusUpdate>) -> Vec<PageIncident> {
    let mut out: Vec<PageIncident> = Vec::new();
    for u in updates {
        match out.iter_mut().find(|i| i.incident_id == u.incident_id) {
            Some(i) => i.updates.push(u),
            None => out.push(PageIncident {
                incident_id: u.incident_id,
                title: u.title.clone(),
                status: u.status.clone(),
                updates: vec![u],
            }),
        }
    }
    out
}

/// A person subscribed to a page by e-mail. The links of their mails are signed with the
/// installation's key, so nothing in the store serves as one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Subscriber {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub page: String,
    pub email: String,
    pub created_at: Timestamp,
    /// When the link in the confirmation mail was followed; `None` while pending.
    #[serde(default)]
    pub confirmed_at: Option<Timestamp>,
    /// When the last confirmation mail went out (one an hour per address at most).
    pub asked_at: Timestamp,
}

/// An address a subscriber may give: one `@`, a dot in the domain, no spaces or control
/// characters, at most 254 characters (RFC 5321's path limit).
pub fn plausible_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    email.len() <= 254
        && !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && !email
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>\",;()[]\\".contains(c))
}

/// The status an update may take.
pub fn check_update(body: &StatusUpdateBody) -> Result<(), String> {
    if !UPDATE_STATUSES.contains(&body.status.as_str()) {
        return Err(format!(
            "status {:?} must be one of {}",
            body.status,
            UPDATE_STATUSES.join(", ")
        ));
    }
    if body.message.trim().is_empty() || body.message.chars().count() > MAX_MESSAGE {
        return Err(format!("message: 1 to {MAX_MESSAGE} characters"));
    }
    if body.pages.is_empty() {
        return Err("pages: name at least one status page".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for ok in ["a@example.com", "first.last+tag@sub.example.org"] {
            assert!(plausible_email(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "a@b",
            "@example.com",
            "a@.com",
            "a b@example.com",
            "a@example.com\r\nBcc: x@y.z",
            "a@b@example.com",
            "<a@example.com>",
        ] {
            assert!(!plausible_email(bad), "{bad:?}");
        }
    }

    #[test]
    fn components_name_one_thing() {
        let mut page = StatusPageBody {
            components: vec![Component {
                name: "API".into(),
                ..Component::default()
            }],
            ..StatusPageBody::default()
        };
        assert!(page.check().is_err(), "a component binds nothing");
        page.components[0].object = Some("web1".into());
        assert!(page.check().is_ok());
        page.components[0].business_service = Some("shop".into());
        assert!(page.check().is_err(), "two bindings");
    }

    #[test]
    fn updates_group_by_incident_newest_first() {
        let at = Timestamp::from_millis(0).unwrap();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let update = |incident, status: &str| StatusUpdate {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            incident_id: incident,
            title: format!("{incident}"),
            status: status.into(),
            message: String::new(),
            pages: Vec::new(),
            components: Vec::new(),
            posted_at: at,
            posted_by: String::new(),
            mailed: 0,
        };
        let grouped = incidents(vec![
            update(a, "resolved"),
            update(b, "investigating"),
            update(a, "investigating"),
        ]);
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].incident_id, a);
        assert_eq!(grouped[0].status, "resolved");
        assert_eq!(grouped[0].updates.len(), 2);
    }
}
