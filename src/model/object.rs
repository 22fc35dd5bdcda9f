//! Monitored objects (SPEC 2.2): hosts and the services that belong to them.

use super::Timestamp;
use super::config::ObjectSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Host,
    Service,
}

impl ObjectKind {
    pub fn code(&self) -> u8 {
        match self {
            ObjectKind::Host => 0,
            ObjectKind::Service => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub kind: ObjectKind,
    pub name: String,
    pub folder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<Uuid>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub spec: ObjectSpec,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

/// The create payload (SPEC 2.2) and the item of `objects:batch`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectBody {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub folder: Option<String>,
    /// For services: the owning host's name.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Kept as JSON so an unknown spec field is a `svc:validation/spec`, not a body error.
    #[serde(default)]
    pub spec: Option<serde_json::Value>,
}

/// An object as lists show it: with its host's name, and its live state once it has one.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
    #[serde(flatten)]
    pub object: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_name: Option<String>,
    /// Absent until the first result (shown as PEND), or when `withState=false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<super::state::CheckState>,
}

/// `GET /api/v1/objects/{id}/effective-config`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveConfig {
    pub spec: ObjectSpec,
    pub template_chain: Vec<String>,
}

/// Filters of the object lists.
#[derive(Clone, Debug, Default)]
pub struct ObjectFilter {
    pub kind: Option<ObjectKind>,
    pub selector: super::Selector,
    pub host_id: Option<Uuid>,
    pub folder: Option<String>,
    pub q: Option<String>,
}

impl ObjectFilter {
    pub fn matches(&self, o: &Object) -> bool {
        self.kind.is_none_or(|k| o.kind == k)
            && self.host_id.is_none_or(|h| o.host_id == Some(h))
            && self.folder.as_ref().is_none_or(|f| {
                let f = f.trim_end_matches('/');
                f.is_empty() || o.folder == f || o.folder.starts_with(&format!("{f}/"))
            })
            && self
                .q
                .as_ref()
                .is_none_or(|q| o.name.to_lowercase().contains(&q.to_lowercase()))
            && self.selector.matches(&o.labels)
    }
}

/// Later specs override earlier ones field by field; `vars` maps merge key by key.
pub fn overlay(base: &mut ObjectSpec, top: &ObjectSpec) {
    macro_rules! take {
        ($($f:ident),*) => { $( if top.$f.is_some() { base.$f = top.$f.clone(); } )* };
    }
    take!(
        address,
        args,
        check_command,
        check_period,
        contact_groups,
        contacts,
        enable_checks,
        enable_flap_detection,
        enable_notifications,
        flap_threshold_high,
        flap_threshold_low,
        interval,
        max_check_attempts,
        notification_period,
        notify_on,
        parents,
        retry_interval,
        runbook,
        staleness_after,
        staleness_text,
        templates,
        threshold_mode,
        timeout,
        zone
    );
    if let Some(vars) = &top.vars {
        base.vars
            .get_or_insert_with(BTreeMap::new)
            .extend(vars.clone());
    }
}

/// Resolves a spec through its templates: depth first in the order named (each template after
/// the ones it imports, each once), later ones overriding earlier ones, the spec itself last.
/// `template` looks a template's spec up by name; an unknown one or a cycle is an error.
pub fn resolve(
    spec: &ObjectSpec,
    template: &impl Fn(&str) -> Option<ObjectSpec>,
) -> Result<EffectiveConfig, String> {
    fn walk(
        names: &[String],
        template: &impl Fn(&str) -> Option<ObjectSpec>,
        path: &mut Vec<String>,
        out: &mut Vec<(String, ObjectSpec)>,
    ) -> Result<(), String> {
        for name in names {
            if path.contains(name) {
                return Err(format!("template cycle: {} → {name}", path.join(" → ")));
            }
            if out.iter().any(|(n, _)| n == name) {
                continue;
            }
            let spec = template(name).ok_or_else(|| format!("unknown template {name:?}"))?;
            path.push(name.clone());
            walk(
                spec.templates.as_deref().unwrap_or_default(),
                template,
                path,
                out,
            )?;
            path.pop();
            out.push((name.clone(), spec));
        }
        Ok(())
    }
    let mut chain = Vec::new();
    walk(
        spec.templates.as_deref().unwrap_or_default(),
        template,
        &mut Vec::new(),
        &mut chain,
    )?;
    let mut effective = ObjectSpec::default();
    for (_, s) in &chain {
        overlay(&mut effective, s);
    }
    overlay(&mut effective, spec);
    effective.templates = spec.templates.clone();
    Ok(EffectiveConfig {
        spec: effective,
        template_chain: chain.into_iter().map(|(n, _)| n).collect(),
    })
}

/// Whether a template named `name` importing `spec`'s templates would close a cycle.
pub fn check_imports(
    name: &str,
    spec: &ObjectSpec,
    template: &impl Fn(&str) -> Option<ObjectSpec>,
) -> Result<(), String> {
    let mut probe = spec.clone();
    probe.templates = Some(vec![name.to_string()]);
    let lookup = |n: &str| {
        if n == name {
            Some(spec.clone())
        } else {
            template(n)
        }
    };
    resolve(&probe, &lookup).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_overrides_fields_and_merges_vars() {
        let mut base: ObjectSpec = serde_json::from_value(
            serde_json::json!({"interval": 60, "timeout": 10, "vars": {"a": "1", "b": "1"}}),
        )
        .unwrap();
        let top: ObjectSpec =
            serde_json::from_value(serde_json::json!({"interval": 30, "vars": {"b": "2"}}))
                .unwrap();
        overlay(&mut base, &top);
        let v = serde_json::to_value(&base).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"interval": "30s", "timeout": "10s", "vars": {"a": "1", "b": "2"}})
        );
    }

    #[test]
    fn folder_filter_includes_subfolders() {
        let o = |folder: &str| Object {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            kind: ObjectKind::Host,
            name: "h".into(),
            folder: folder.into(),
            host_id: None,
            labels: BTreeMap::new(),
            spec: ObjectSpec::default(),
            created_at: Timestamp(jiff::Timestamp::UNIX_EPOCH),
            updated_at: Timestamp(jiff::Timestamp::UNIX_EPOCH),
            version: 1,
        };
        let f = ObjectFilter {
            folder: Some("/plant".into()),
            ..Default::default()
        };
        assert!(f.matches(&o("/plant")));
        assert!(f.matches(&o("/plant/line1")));
        assert!(!f.matches(&o("/plantx")));
    }
}
