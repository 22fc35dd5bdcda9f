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

/// The kind of the documents in which a main ships downtimes to a site
/// (`suppression::ShippedDowntime`), each named by its id; only a site's pull carries them.
pub const SHIPPED_DOWNTIMES: &str = "downtimes";

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
    /// Create or replace a configuration document (`body` is its JSON text), with the
    /// credentials it carried in plain text, sealed as the secrets it now names.
    PutDoc {
        kind: &'static str,
        name: String,
        body: String,
        secrets: Vec<super::secret::StoredSecret>,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PlanAction {
    /// `create`, `update`, `unchanged` or `delete`.
    pub action: String,
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlanResult {
    pub plan: Vec<PlanAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply_token: Option<String>,
    pub warnings: Vec<String>,
    /// Whether the plan was carried out.
    pub applied: bool,
}

/// Flow collections (`[`, `{`) one YAML document, and a whole YAML bundle, may open. The YAML
/// scanner's work grows with the square of flow nesting (100,000 nested brackets hold a core for
/// 20 s), and brackets are counted wherever they stand, quoted or not, so the bound holds
/// whatever the text; nested this deep a document costs milliseconds. JSON is parsed as JSON
/// and needs no such bound.
pub const MAX_FLOW_PER_DOCUMENT: usize = 2_000;
pub const MAX_FLOW_PER_BUNDLE: usize = 50_000;

fn check_flow(text: &str) -> Result<(), String> {
    let (mut in_doc, mut total, mut doc) = (0usize, 0usize, 1usize);
    for line in text.lines() {
        // A document marker ends any flow collection (YAML forbids it inside one).
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            in_doc = 0;
            doc += 1;
        }
        let opens = line.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
        in_doc += opens;
        total += opens;
        if in_doc > MAX_FLOW_PER_DOCUMENT {
            return Err(format!(
                "document {doc}: more than {MAX_FLOW_PER_DOCUMENT} flow collections ([ or {{); split it into documents or send JSON"
            ));
        }
        if total > MAX_FLOW_PER_BUNDLE {
            return Err(format!(
                "more than {MAX_FLOW_PER_BUNDLE} flow collections ([ or {{) in YAML; send JSON"
            ));
        }
    }
    Ok(())
}

fn document(value: serde_json::Value, i: usize) -> Result<BundleDoc, String> {
    super::input::from_value(value).map_err(|e| format!("document {}: {e}", i + 1))
}

/// Parses the documents of a bundle: a JSON array (or one JSON object), else YAML documents
/// separated by `---` (a YAML sequence of documents too).
pub fn parse(text: &str) -> Result<Vec<BundleDoc>, String> {
    if text.trim_start().starts_with(['[', '{']) {
        // serde_json is linear and limits nesting to 128; text that is not JSON is YAML.
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Array(items)) => {
                return items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| document(v, i))
                    .collect();
            }
            Ok(object @ serde_json::Value::Object(_)) => return Ok(vec![document(object, 0)?]),
            Ok(_) | Err(_) => {}
        }
    }
    check_flow(text)?;
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
        .map(|d| super::fault::encoded("a bundle document", serde_yaml_ng::to_string(d)))
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

    proptest::proptest! {
        /// Fuzz: any bundle text is documents or an error.
        #[test]
        fn any_text_parses_or_is_refused(input in ".{0,200}") {
            let _ = parse(&input);
        }

        #[test]
        fn yaml_soup_parses_or_is_refused(
            tokens in proptest::collection::vec(
                proptest::sample::select(vec!["kind: host\n", "name: a\n", "body:", " {", "}", "[", "]", "---\n", "- ", "&a ", "*a", "!!map ", ": ", "\n  ", "\"", "'", "spec", ","]),
                0..80,
            )
        ) {
            let _ = parse(&tokens.concat());
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_the_yaml_scanner() {
        for open in ["[", "{a: ", "&a [*a, ", "- "] {
            let text = format!("kind: host\nname: a\nbody: {}", open.repeat(100_000));
            assert!(parse(&text).is_err(), "{open}");
        }
        let json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&json).unwrap_err().contains("flow collections"));
        // Spread over documents it is still bounded, per document and per bundle.
        let doc = format!("kind: host\nname: a\nbody: {}\n", "[".repeat(1_900));
        assert!(parse(&doc).is_err(), "too deep for the parser, but cheap");
        let many = vec![doc; 40].join("---\n");
        assert!(parse(&many).unwrap_err().contains("more than 50000"));
        let wide = format!(
            "kind: host\nname: a\nbody: {{labels: {{{}}}}}\n",
            (0..2_100)
                .map(|i| format!("k{i}: [x]"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(
            parse(&wide)
                .unwrap_err()
                .contains("document 1: more than 2000")
        );
        // JSON has no such bound.
        let items: Vec<String> = (0..3_000)
            .map(|i| {
                format!(r#"{{"kind": "host", "name": "h{i}", "body": {{"labels": {{"a": "b"}}}}}}"#)
            })
            .collect();
        assert_eq!(
            parse(&format!("[{}]", items.join(","))).unwrap().len(),
            3_000
        );
    }
}
