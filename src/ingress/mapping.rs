//! A source's `mapping`, compiled: per normalised field (`severity`, `summary`, `dedupKey`,
//! `labels`, `resolve`) a JSON path into the original document (`$.alert.level`), or, prefixed
//! `cel:`, a CEL expression over it as `body` (`cel:body.level >= 3 ? 'critical' : 'warning'`).
//! Expressions are checked at save and compiled once per version of the source.

use super::webhook::IngestError;
use crate::model::cel;
use crate::model::config::CEL_MAPPING_PREFIX;
use crate::model::config::EventSource;
use crate::runtime::Locked;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

enum Rule {
    Path(String),
    Cel {
        source: String,
        program: Arc<::cel::Program>,
    },
}

#[derive(Default)]
pub struct Mapping(BTreeMap<String, Rule>);

/// Why a document could not be mapped: the field and the reason, for the 422.
pub type Unmapped = String;

impl Mapping {
    /// Compiles `raw`; an expression that does not compile names its field.
    pub fn compile(raw: &BTreeMap<String, String>) -> Result<Mapping, Unmapped> {
        let mut rules = BTreeMap::new();
        for (field, value) in raw {
            let rule = match value.trim().strip_prefix(CEL_MAPPING_PREFIX) {
                Some(expr) => Rule::Cel {
                    source: expr.trim().to_string(),
                    program: Arc::new(cel::compile(expr).map_err(|e| format!("{field}: {e}"))?),
                },
                None => Rule::Path(value.clone()),
            };
            rules.insert(field.clone(), rule);
        }
        Ok(Mapping(rules))
    }

    /// Whether `field` has a rule of its own.
    pub fn maps(&self, field: &str) -> bool {
        self.0.contains_key(field)
    }

    /// The value of every mapped field in `doc`. A path that is not in the document, or an
    /// expression that fails (a key the document lacks, say), is the reason it cannot be mapped.
    pub fn resolve(&self, doc: &Value) -> Result<BTreeMap<String, Value>, Unmapped> {
        let mut out = BTreeMap::new();
        let mut expressions = Vec::new();
        for (field, rule) in &self.0 {
            match rule {
                Rule::Path(p) => {
                    let v = super::webhook::path(doc, p)
                        .ok_or_else(|| format!("{field}: {p} is not in the body"))?;
                    out.insert(field.clone(), v.clone());
                }
                Rule::Cel { source, program } => expressions.push((field, source, program)),
            }
        }
        if expressions.is_empty() {
            return Ok(out);
        }
        // The interpreter recurses: run it where the bounded expressions fit (model::cel).
        let evaluated = cel::on_cel_stack(|| {
            let mut ctx = crate::model::cel::context();
            let body = ::cel::to_value(doc).map_err(|e| format!("the body: {e}"))?;
            ctx.add_variable_from_value("body", body);
            expressions
                .iter()
                .map(|(field, source, program)| {
                    let value = program
                        .execute(&ctx)
                        .map_err(|e| format!("{field}: {source}: {e}"))?;
                    let json = value
                        .json()
                        .map_err(|e| format!("{field}: {source}: {e}"))?;
                    Ok(((*field).clone(), json))
                })
                .collect::<Result<Vec<_>, Unmapped>>()
        })
        .ok_or_else(|| "an expression of the mapping failed".to_string())??;
        out.extend(evaluated);
        Ok(out)
    }
}

/// Compiled mappings by source and version (a change makes a new version; old ones are
/// dropped whole past `COMPILED_MAX`, so memory stays bounded).
#[derive(Default)]
pub struct Compiled(Mutex<HashMap<(Uuid, String, u64), Arc<Mapping>>>);

const COMPILED_MAX: usize = 1024;

impl super::Ingress {
    /// The compiled mapping of a source's stored version.
    pub(super) fn mapping_of(
        &self,
        tenant: Uuid,
        name: &str,
        version: u64,
        source: &EventSource,
    ) -> Result<Arc<Mapping>, IngestError> {
        let key = (tenant, name.to_string(), version);
        let mut compiled = self.mappings.0.locked();
        if let Some(m) = compiled.get(&key) {
            return Ok(m.clone());
        }
        let mapping = Arc::new(Mapping::compile(&source.mapping).map_err(IngestError::Mapping)?);
        if compiled.len() >= COMPILED_MAX {
            compiled.clear();
        }
        compiled.insert(key, mapping.clone());
        Ok(mapping)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapping(pairs: &[(&str, &str)]) -> Result<Mapping, Unmapped> {
        Mapping::compile(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn paths_and_expressions_map_fields() {
        let m = mapping(&[
            ("severity", "cel: body.level >= 3 ? 'critical' : 'warning'"),
            ("summary", "cel:body.plant + ': ' + body.alarm.text"),
            (
                "labels",
                "cel:{'plant': body.plant, 'line': string(body.line)}",
            ),
            ("resolve", "cel:body.state == 'gone'"),
            ("dedupKey", "$.alarm.id"),
        ])
        .unwrap();
        let doc = json!({"level": 4, "plant": "north", "line": 2, "state": "come",
                         "alarm": {"id": "A-17", "text": "pump dry"}});
        let got = m.resolve(&doc).unwrap();
        assert_eq!(got["severity"], "critical");
        assert_eq!(got["summary"], "north: pump dry");
        assert_eq!(got["labels"], json!({"plant": "north", "line": "2"}));
        assert_eq!(got["resolve"], false);
        assert_eq!(got["dedupKey"], "A-17");
    }

    #[test]
    fn what_cannot_be_mapped_names_its_field() {
        let err = mapping(&[("severity", "cel:body.level >=")]).err().unwrap();
        assert!(err.starts_with("severity: "), "{err}");
        let m = mapping(&[("summary", "cel:body.missing.text")]).unwrap();
        let err = m.resolve(&json!({"level": 1})).unwrap_err();
        assert!(err.starts_with("summary: body.missing.text: "), "{err}");
        let m = mapping(&[("dedupKey", "$.id")]).unwrap();
        assert_eq!(
            m.resolve(&json!({})).unwrap_err(),
            "dedupKey: $.id is not in the body"
        );
    }
}
