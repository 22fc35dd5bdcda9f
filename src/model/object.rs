//! Monitored objects (SPEC 2.2): hosts and the services that belong to them.

use super::Timestamp;
use super::config::ObjectSpec;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Host,
    Service,
}

impl ObjectKind {
    /// The wire name (`host`, `service`).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Host => "host",
            ObjectKind::Service => "service",
        }
    }

    pub fn code(&self) -> u8 {
        match self {
            ObjectKind::Host => 0,
            ObjectKind::Service => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    #[cfg_attr(test, schemars(with = "Option<super::config::ObjectSpec>"))]
    pub spec: Option<serde_json::Value>,
}

/// An object as lists show it: with its host's name, and its live state once it has one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
    #[serde(flatten)]
    pub object: Object,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_name: Option<String>,
    /// Absent until the first result (shown as PEND), or when `withState=false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<super::state::CheckState>,
    /// A site's mirrored object whose site stopped reporting: its state is the last it told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale: Option<super::mirror::Stale>,
}

impl Object {
    /// `host / service` for a service on a host, else its own name.
    pub fn full_name(&self, host_name: Option<&str>) -> String {
        match (host_name, self.kind) {
            (Some(host), ObjectKind::Service) => format!("{host} / {}", self.name),
            _ => self.name.clone(),
        }
    }
}

/// `GET /api/v1/objects/{id}/effective-config`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EffectiveConfig {
    pub spec: ObjectSpec,
    pub template_chain: Vec<String>,
    /// The object's effective labels (see `effective_labels`), where an object is known.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// An object's labels for every selector and event: its templates' labels in chain order,
/// then for a service its host's effective labels, then its own; later ones win.
pub fn effective_labels(
    chain: &[String],
    template_labels: &HashMap<String, BTreeMap<String, String>>,
    host: Option<&BTreeMap<String, String>>,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for name in chain {
        if let Some(l) = template_labels.get(name) {
            labels.extend(l.clone());
        }
    }
    if let Some(h) = host {
        labels.extend(h.clone());
    }
    labels.extend(own.clone());
    labels
}

/// Filters of the object lists.
#[derive(Clone, Debug, Default)]
pub struct ObjectFilter {
    pub kind: Option<ObjectKind>,
    pub selector: super::Selector,
    pub host_id: Option<Uuid>,
    pub folder: Option<String>,
    pub q: Option<String>,
    /// The exact name.
    pub name: Option<String>,
    /// State labels (`CRITICAL`, `DOWN`, `PENDING`...; see `state::label`), any when empty.
    /// The state lives apart from the object, so the inventory applies this one after
    /// `matches`.
    pub states: Vec<String>,
}

impl ObjectFilter {
    /// Whether `o` is listed by its own facts (all but `states`); the selector matches the
    /// object's effective `labels`, asked for only when every other filter passed and there is
    /// a selector.
    pub fn matches(&self, o: &Object, labels: impl FnOnce() -> BTreeMap<String, String>) -> bool {
        self.kind.is_none_or(|k| o.kind == k)
            && self.host_id.is_none_or(|h| o.host_id == Some(h))
            && self.folder.as_ref().is_none_or(|f| {
                // Folders are stored as `/north/pumps`; `north` names the same one.
                let f = f.trim().trim_matches('/');
                let folder = o.folder.trim_start_matches('/');
                f.is_empty() || folder == f || folder.starts_with(&format!("{f}/"))
            })
            && self
                .q
                .as_ref()
                .is_none_or(|q| o.name.to_lowercase().contains(&q.to_lowercase()))
            && self.name.as_ref().is_none_or(|n| o.name == *n)
            && (self.selector.is_empty() || self.selector.matches(&labels()))
    }

    /// Whether `v`'s state is one `states` names (any when empty).
    pub fn state_matches(&self, v: &ObjectView) -> bool {
        let state = super::state::label(v.object.kind, v.state.as_ref().map(|s| s.state));
        self.states.is_empty() || self.states.iter().any(|s| s.eq_ignore_ascii_case(state))
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
        depends_on,
        enable_checks,
        enable_flap_detection,
        enable_notifications,
        flap_threshold_high,
        flap_threshold_low,
        http_flow,
        interval,
        max_check_attempts,
        notification_period,
        notify_on,
        observers,
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

/// How deep template imports may nest: a template importing one that imports another, and so
/// on, at most this many templates from the object down.
pub const TEMPLATE_DEPTH_LIMIT: usize = 32;

fn templates_of(spec: &ObjectSpec) -> Vec<String> {
    spec.templates.clone().unwrap_or_default()
}

/// Resolves a spec through its templates: depth first in the order named (each template after
/// the ones it imports, each once), later ones overriding earlier ones, the spec itself last.
/// `template` looks a template's spec up by name; an unknown one, a cycle or a chain deeper
/// than `TEMPLATE_DEPTH_LIMIT` is an error naming the chain. Iterative, so no stored graph can
/// exhaust the stack.
pub fn resolve(
    spec: &ObjectSpec,
    template: &impl Fn(&str) -> Option<ObjectSpec>,
) -> Result<EffectiveConfig, String> {
    /// A template being walked: its imports and how many of them are done.
    struct Frame {
        name: String,
        spec: ObjectSpec,
        imports: Vec<String>,
        next: usize,
    }
    let roots = templates_of(spec);
    let mut next_root = 0;
    let mut stack: Vec<Frame> = Vec::new();
    let mut done = std::collections::HashSet::new();
    let mut chain: Vec<(String, ObjectSpec)> = Vec::new();
    let path = |stack: &[Frame], last: &str| {
        let mut names: Vec<&str> = stack.iter().map(|f| f.name.as_str()).collect();
        names.push(last);
        names.join(" → ")
    };
    loop {
        let name = match stack.last_mut() {
            Some(top) if top.next < top.imports.len() => {
                top.next += 1;
                top.imports[top.next - 1].clone()
            }
            Some(_) => {
                if let Some(f) = stack.pop() {
                    done.insert(f.name.clone());
                    chain.push((f.name, f.spec));
                }
                continue;
            }
            None if next_root < roots.len() => {
                next_root += 1;
                roots[next_root - 1].clone()
            }
            None => break,
        };
        if stack.iter().any(|f| f.name == name) {
            return Err(format!("template cycle: {}", path(&stack, &name)));
        }
        if done.contains(&name) {
            continue;
        }
        if stack.len() >= TEMPLATE_DEPTH_LIMIT {
            return Err(format!(
                "template chain deeper than {TEMPLATE_DEPTH_LIMIT}: {}",
                path(&stack, &name)
            ));
        }
        let spec = template(&name).ok_or_else(|| format!("unknown template {name:?}"))?;
        stack.push(Frame {
            imports: templates_of(&spec),
            name,
            spec,
            next: 0,
        });
    }
    let mut effective = ObjectSpec::default();
    for (_, s) in &chain {
        overlay(&mut effective, s);
    }
    overlay(&mut effective, spec);
    effective.templates = spec.templates.clone();
    Ok(EffectiveConfig {
        spec: effective,
        template_chain: chain.into_iter().map(|(n, _)| n).collect(),
        labels: BTreeMap::new(),
    })
}

/// Checks a tenant's whole template graph, as it would be with `name` set to `spec`: that
/// template's imports resolve, and no template anywhere sits in a cycle or heads a chain deeper
/// than `TEMPLATE_DEPTH_LIMIT` (a save lower down can deepen the chains above it). Imports of
/// other templates that name nothing are left to their own saves. Iterative and linear in the
/// graph's size.
pub fn check_template_graph(
    templates: &std::collections::HashMap<String, ObjectSpec>,
    changed: Option<(&str, &ObjectSpec)>,
) -> Result<(), String> {
    use std::collections::HashMap;
    let imports = |n: &str| -> Vec<String> {
        match changed {
            Some((c, spec)) if c == n => templates_of(spec),
            _ => templates.get(n).map(templates_of).unwrap_or_default(),
        }
    };
    let exists = |n: &str| changed.is_some_and(|(c, _)| c == n) || templates.contains_key(n);
    if let Some((name, spec)) = changed {
        for t in templates_of(spec) {
            if !exists(&t) {
                return Err(format!("unknown template {t:?} imported by {name:?}"));
            }
        }
    }
    // Per finished template: its depth and the import its deepest chain goes through.
    let mut depth: HashMap<String, (usize, Option<String>)> = HashMap::new();
    let mut names: Vec<String> = templates.keys().cloned().collect();
    if let Some((c, _)) = changed {
        names.push(c.to_string());
    }
    for root in names {
        if depth.contains_key(&root) {
            continue;
        }
        // (name, its imports, how many are done); the stack is the path from `root`.
        let mut stack: Vec<(String, Vec<String>, usize)> = vec![(root.clone(), imports(&root), 0)];
        while let Some((_, imps, next)) = stack.last_mut() {
            if let Some(child) = imps.get(*next).cloned() {
                *next += 1;
                if !exists(&child) || depth.contains_key(&child) {
                    continue;
                }
                if let Some(at) = stack.iter().position(|(n, _, _)| *n == child) {
                    let mut cycle: Vec<&str> =
                        stack[at..].iter().map(|(n, _, _)| n.as_str()).collect();
                    cycle.push(&child);
                    return Err(format!("template cycle: {}", cycle.join(" → ")));
                }
                let imps = imports(&child);
                stack.push((child, imps, 0));
                continue;
            }
            let Some((name, imps, _)) = stack.pop() else {
                break;
            };
            let deepest = imps
                .iter()
                .filter_map(|i| depth.get(i).map(|(d, _)| (*d, i)))
                .max_by_key(|(d, _)| *d);
            let (d, via) = deepest.map_or((1, None), |(d, i)| (d + 1, Some(i.clone())));
            if d > TEMPLATE_DEPTH_LIMIT {
                let mut chain = vec![name];
                let mut at = via;
                while let Some(n) = at {
                    at = depth.get(&n).and_then(|(_, v)| v.clone());
                    chain.push(n);
                }
                return Err(format!(
                    "template chain deeper than {TEMPLATE_DEPTH_LIMIT}: {}",
                    chain.join(" → ")
                ));
            }
            depth.insert(name, (d, via));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_folder_filter_takes_the_folder_and_its_subfolders_with_or_without_slashes() {
        let object = |folder: &str| -> Object {
            serde_json::from_value(serde_json::json!({
                "id": Uuid::nil(), "tenantId": Uuid::nil(), "kind": "service", "name": "disk",
                "folder": folder, "spec": {}, "createdAt": "2026-01-01T00:00:00Z",
                "updatedAt": "2026-01-01T00:00:00Z", "version": 1,
            }))
            .unwrap()
        };
        let in_folder = |filter: &str, folder: &str| {
            ObjectFilter {
                folder: Some(filter.into()),
                ..ObjectFilter::default()
            }
            .matches(&object(folder), BTreeMap::new)
        };
        for filter in ["north", "/north", "north/", " /north/ "] {
            assert!(in_folder(filter, "/north"), "{filter:?}");
            assert!(in_folder(filter, "/north/pumps"), "{filter:?}");
            assert!(!in_folder(filter, "/northeast"), "{filter:?}");
            assert!(!in_folder(filter, "/south/north"), "{filter:?}");
        }
        assert!(in_folder("/", "/south"), "the root holds every folder");
        assert!(in_folder("north/pumps", "/north/pumps/7"));
        assert!(!in_folder("north/pumps", "/north"));
    }

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

    fn importing(names: &[&str]) -> ObjectSpec {
        ObjectSpec {
            templates: Some(names.iter().map(|n| n.to_string()).collect()),
            ..ObjectSpec::default()
        }
    }

    /// `t-0` imports `t-1`, which imports `t-2`, ... down to `t-{n-1}`.
    fn chain(n: usize) -> HashMap<String, ObjectSpec> {
        (0..n)
            .map(|i| {
                let imports: Vec<String> = (i + 1 < n)
                    .then(|| format!("t-{}", i + 1))
                    .into_iter()
                    .collect();
                let spec = ObjectSpec {
                    templates: Some(imports),
                    interval: Some(crate::model::GoDuration(std::time::Duration::from_secs(
                        i as u64 + 1,
                    ))),
                    ..ObjectSpec::default()
                };
                (format!("t-{i}"), spec)
            })
            .collect()
    }

    #[test]
    fn chains_resolve_up_to_the_limit_and_no_deeper() {
        let ok = chain(TEMPLATE_DEPTH_LIMIT);
        let e = resolve(&importing(&["t-0"]), &|n: &str| ok.get(n).cloned()).unwrap();
        assert_eq!(e.template_chain.len(), TEMPLATE_DEPTH_LIMIT);
        assert_eq!(e.template_chain.first().map(String::as_str), Some("t-31"));
        assert_eq!(check_template_graph(&ok, None), Ok(()));

        let deep = chain(TEMPLATE_DEPTH_LIMIT + 1);
        let err = resolve(&importing(&["t-0"]), &|n: &str| deep.get(n).cloned()).unwrap_err();
        assert!(
            err.starts_with("template chain deeper than 32: t-0 → t-1"),
            "{err}"
        );
        assert!(err.ends_with("t-32"), "{err}");
        let err = check_template_graph(&deep, None).unwrap_err();
        assert!(err.contains("t-0 → t-1") && err.ends_with("t-32"), "{err}");
    }

    #[test]
    fn a_stored_graph_of_any_depth_is_refused_without_overflowing() {
        let deep = chain(5_000);
        assert!(resolve(&importing(&["t-0"]), &|n: &str| deep.get(n).cloned()).is_err());
        assert!(check_template_graph(&deep, None).is_err());
    }

    #[test]
    fn a_save_low_in_the_graph_is_checked_against_the_chains_above_it() {
        // The probe of issue 13: the chain grows by making its last link import a new template.
        let mut graph = chain(TEMPLATE_DEPTH_LIMIT);
        graph.insert("new".into(), ObjectSpec::default());
        let err = check_template_graph(&graph, Some(("t-31", &importing(&["new"])))).unwrap_err();
        assert!(
            err.contains("t-0 → ") && err.ends_with("t-31 → new"),
            "{err}"
        );
        assert_eq!(
            check_template_graph(&graph, Some(("t-31", &importing(&[])))),
            Ok(())
        );
        let err = check_template_graph(&graph, Some(("t-31", &importing(&["t-5"])))).unwrap_err();
        assert!(
            err.starts_with("template cycle: ") && err.contains("t-31 → t-5"),
            "{err}"
        );
        let err =
            check_template_graph(&graph, Some(("t-31", &importing(&["nothing"])))).unwrap_err();
        assert!(err.contains("unknown template \"nothing\""), "{err}");
    }

    #[test]
    fn cycles_are_named() {
        let graph: HashMap<String, ObjectSpec> = [
            ("a".to_string(), importing(&["b"])),
            ("b".to_string(), importing(&["a"])),
        ]
        .into();
        let err = resolve(&importing(&["a"]), &|n: &str| graph.get(n).cloned()).unwrap_err();
        assert_eq!(err, "template cycle: a → b → a");
        assert!(
            check_template_graph(&graph, None)
                .unwrap_err()
                .starts_with("template cycle")
        );
    }

    proptest::proptest! {
        /// Fuzz: any graph of templates is either refused or resolves every template, and
        /// whatever the graph check accepts resolves.
        #[test]
        fn any_graph_resolves_or_is_refused(
            edges in proptest::collection::vec(proptest::collection::vec(0usize..60, 0..4), 1..60)
        ) {
            let graph: HashMap<String, ObjectSpec> = edges
                .iter()
                .enumerate()
                .map(|(i, to)| {
                    let names: Vec<String> = to.iter().map(|t| format!("t-{t}")).collect();
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    (format!("t-{i}"), importing(&refs))
                })
                .collect();
            let accepted = check_template_graph(&graph, None).is_ok();
            for name in graph.keys() {
                let resolved = resolve(&importing(&[name]), &|n: &str| graph.get(n).cloned());
                if accepted {
                    // Only unknown imports (left to their own saves) may still fail here.
                    if let Err(e) = resolved {
                        proptest::prop_assert!(e.starts_with("unknown template"), "{}", e);
                    }
                }
            }
        }
    }

    #[test]
    fn folder_filter_includes_subfolders_and_name_is_exact() {
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
        assert!(f.matches(&o("/plant"), BTreeMap::new));
        assert!(f.matches(&o("/plant/line1"), BTreeMap::new));
        assert!(!f.matches(&o("/plantx"), BTreeMap::new));
        let named = |name: &str| ObjectFilter {
            name: Some(name.into()),
            ..Default::default()
        };
        let web = Object {
            name: "web01".into(),
            ..o("/")
        };
        assert!(named("web01").matches(&web, || web.labels.clone()));
        assert!(
            !named("web0").matches(&web, || web.labels.clone()),
            "exact, not a substring"
        );
        assert!(!named("WEB01").matches(&web, || web.labels.clone()));
    }
}
