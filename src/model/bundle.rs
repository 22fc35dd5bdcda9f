//! Configuration bundles: multi-document YAML (JSON accepted) describing hosts, services and
//! configuration documents. Each document is
//!
//! ```yaml
//! kind: host          # host | service | a configuration kind (templates, alert-rules, ...)
//! name: web1
//! host: web1          # services only: the owning host
//! body: {...}         # hosts/services: folder, labels, spec; configuration kinds: their fields
//! ```

use super::config::ObjectSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Cap on bundle bodies (SPEC 8).
pub const BUNDLE_LIMIT: usize = 8 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleDoc {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default)]
    pub body: serde_json::Value,
}

/// The body of a host or service document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectDocBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub spec: ObjectSpec,
}

/// One change of an apply, in the order applied.
#[derive(Clone, Debug, PartialEq)]
pub enum BundleOp {
    /// Create or replace a configuration document (`body` is its JSON text).
    PutDoc {
        kind: &'static str,
        name: String,
        body: String,
    },
    DeleteDoc {
        kind: &'static str,
        name: String,
    },
    /// Create or replace a host or service (a service names its host).
    PutObject {
        host: Option<String>,
        name: String,
        folder: String,
        labels: BTreeMap<String, String>,
        spec: Box<ObjectSpec>,
    },
    DeleteObject {
        host: Option<String>,
        name: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanAction {
    /// `create`, `update`, `unchanged` or `delete`.
    pub action: &'static str,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanResult {
    pub plan: Vec<PlanAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_token: Option<String>,
    pub warnings: Vec<String>,
    /// Whether the plan was carried out.
    pub applied: bool,
}

/// Parses the documents of a bundle: YAML documents separated by `---`, or a JSON array.
pub fn parse(text: &str) -> Result<Vec<BundleDoc>, String> {
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml_ng::Value::deserialize(doc)
            .map_err(|e| format!("document {}: {e}", i + 1))?;
        match value {
            serde_yaml_ng::Value::Null => {}
            serde_yaml_ng::Value::Sequence(items) => {
                for (j, item) in items.into_iter().enumerate() {
                    docs.push(
                        serde_yaml_ng::from_value(item)
                            .map_err(|e| format!("document {}: {e}", j + 1))?,
                    );
                }
            }
            other => docs.push(
                serde_yaml_ng::from_value(other).map_err(|e| format!("document {}: {e}", i + 1))?,
            ),
        }
    }
    Ok(docs)
}

/// Writes documents as a multi-document YAML bundle.
pub fn render(docs: &[BundleDoc]) -> String {
    docs.iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_json_and_round_trip() {
        let docs = parse("kind: host\nname: a\nbody: {spec: {interval: 60}}\n---\nkind: templates\nname: t\nbody: {spec: {}}\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].kind, "templates");
        let json = parse(r#"[{"kind": "host", "name": "a", "body": {}}]"#).unwrap();
        assert_eq!(json[0].name, "a");
        assert_eq!(parse(&render(&docs)).unwrap(), docs);
        assert!(
            parse("kind: host\nname: a\ncolour: red\n")
                .unwrap_err()
                .contains("colour")
        );
        assert!(parse("").unwrap().is_empty());
    }
}
