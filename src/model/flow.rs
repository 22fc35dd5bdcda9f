//! A multi-step HTTP check's steps (`spec.httpFlow`, the `http-flow` built-in; issue 74): the
//! requests in order, what each must answer, and the values it keeps for the steps after it
//! (`${name}` in a later step's URL, headers, body or form).

use crate::model::duration::GoDuration;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most steps a flow has.
pub const MAX_STEPS: usize = 20;
const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpFlow {
    /// 1 to 20 requests, made in order; the first that fails ends the flow.
    pub steps: Vec<FlowStep>,
    /// The whole flow's time (default and at most the check's `timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<GoDuration>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlowStep {
    /// Its name in the output and as its time's metric.
    pub name: String,
    /// GET (default), POST, PUT, PATCH, DELETE or HEAD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// An http or https URL; `$macros$`, `$SECRET:name$` and `${value}` expanded.
    pub url: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The request body, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A form sent as `application/x-www-form-urlencoded` (instead of `body`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// Values kept for the later steps, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extract: BTreeMap<String, Extract>,
}

/// What a step's answer must be; any miss fails the flow (CRITICAL), but `maxMs`, which makes
/// it WARNING.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Status codes allowed (default any 2xx; redirects are not followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Vec<u16>>,
    /// Text the body must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// A regular expression the body must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// A JSON value the body must hold at a path (`{path: "$.status", equals: "ok"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<JsonEquals>,
    /// The most the step may take, in milliseconds (over it: WARNING).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonEquals {
    pub path: String,
    pub equals: Value,
}

/// Where a kept value comes from: exactly one of a JSON path into the body, a header, or a
/// regular expression's first group (the whole match without one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Extract {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

impl HttpFlow {
    /// Whether the flow can run as written; what is wrong, in words.
    pub fn check(&self) -> Result<(), String> {
        if self.steps.is_empty() || self.steps.len() > MAX_STEPS {
            return Err(format!(
                "httpFlow has 1 to {MAX_STEPS} steps, not {}",
                self.steps.len()
            ));
        }
        for (i, step) in self.steps.iter().enumerate() {
            let at = format!("httpFlow step {} ({:?})", i + 1, step.name);
            if step.name.trim().is_empty() {
                return Err(format!("httpFlow step {} has no name", i + 1));
            }
            if self.steps[..i].iter().any(|s| s.name == step.name) {
                return Err(format!("{at}: the name is taken by an earlier step"));
            }
            if !METHODS.contains(&step.method()) {
                return Err(format!("{at}: method is one of {}", METHODS.join(", ")));
            }
            if !(step.url.starts_with("http://") || step.url.starts_with("https://")) {
                return Err(format!("{at}: url is an http:// or https:// URL"));
            }
            if step.body.is_some() && step.form.is_some() {
                return Err(format!("{at}: body or form, not both"));
            }
            if let Some(expect) = &step.expect {
                if let Some(r) = &expect.regex {
                    regex_lite::Regex::new(r).map_err(|e| format!("{at}: expect.regex: {e}"))?;
                }
                if let Some(j) = &expect.json {
                    json_path(&j.path).map_err(|e| format!("{at}: expect.json.path: {e}"))?;
                }
            }
            for (name, ex) in &step.extract {
                let given = [&ex.json_path, &ex.header, &ex.regex]
                    .iter()
                    .filter(|o| o.is_some())
                    .count();
                if given != 1 {
                    return Err(format!(
                        "{at}: extract.{name} takes one of jsonPath, header or regex"
                    ));
                }
                if let Some(p) = &ex.json_path {
                    json_path(p).map_err(|e| format!("{at}: extract.{name}.jsonPath: {e}"))?;
                }
                if let Some(r) = &ex.regex {
                    regex_lite::Regex::new(r)
                        .map_err(|e| format!("{at}: extract.{name}.regex: {e}"))?;
                }
            }
        }
        Ok(())
    }

    /// Every text of the flow (URLs, headers, bodies, forms), for macros and secrets.
    pub fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        self.steps.iter_mut().flat_map(|s| {
            std::iter::once(&mut s.url)
                .chain(s.headers.values_mut())
                .chain(s.body.iter_mut())
                .chain(s.form.iter_mut().flat_map(|f| f.values_mut()))
        })
    }
}

impl FlowStep {
    pub fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("GET")
    }
}

/// A path of the JSON path subset a flow takes: `$`, then `.key`, `['key']` or `[index]`.
#[derive(Clone, Debug, PartialEq)]
pub enum PathPart {
    Key(String),
    Index(usize),
}

pub fn json_path(path: &str) -> Result<Vec<PathPart>, String> {
    let mut rest = path
        .trim()
        .strip_prefix('$')
        .ok_or("a JSON path starts with $")?;
    let mut parts = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err(format!("an empty key in {path:?}"));
            }
            parts.push(PathPart::Key(after[..end].to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after
                .find(']')
                .ok_or(format!("an unclosed [ in {path:?}"))?;
            let inner = &after[..end];
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|i| i.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|i| i.strip_suffix('"')));
            parts.push(match quoted {
                Some(key) => PathPart::Key(key.to_string()),
                None => PathPart::Index(
                    inner
                        .parse()
                        .map_err(|_| format!("[{inner}] is neither an index nor a quoted key"))?,
                ),
            });
            rest = &after[end + 1..];
        } else {
            return Err(format!("{path:?} goes on with {rest:?}: use .key or [n]"));
        }
    }
    Ok(parts)
}

/// The value at `path` in `doc`.
pub fn at_path<'a>(doc: &'a Value, path: &[PathPart]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, part| match part {
        PathPart::Key(k) => v.get(k),
        PathPart::Index(i) => v.get(i),
    })
}

/// `text` with each `${name}` replaced by the kept value; a name not kept is an error.
pub fn fill(text: &str, values: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("an unclosed ${{ in {text:?}"))?;
        let name = &after[..end];
        out.push_str(
            values
                .get(name)
                .ok_or_else(|| format!("no value {name:?} was kept by an earlier step"))?,
        );
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_paths_reach_keys_and_indexes() {
        let doc = json!({"a": {"b": [10, {"c d": "x"}]}});
        let at = |p: &str| at_path(&doc, &json_path(p).unwrap()).cloned();
        assert_eq!(at("$.a.b[0]"), Some(json!(10)));
        assert_eq!(at("$.a.b[1]['c d']"), Some(json!("x")));
        assert_eq!(at("$"), Some(doc.clone()));
        assert_eq!(at("$.a.z"), None);
        assert!(json_path("a.b").is_err());
        assert!(json_path("$..a").is_err());
        assert!(json_path("$.a[x]").is_err());
    }

    #[test]
    fn kept_values_fill_later_steps() {
        let kept = BTreeMap::from([("token".to_string(), "t-1".to_string())]);
        assert_eq!(fill("Bearer ${token}", &kept).unwrap(), "Bearer t-1");
        assert_eq!(fill("no values", &kept).unwrap(), "no values");
        assert!(fill("${other}", &kept).unwrap_err().contains("other"));
        assert!(fill("${token", &kept).is_err());
    }

    #[test]
    fn flows_are_checked_before_they_are_kept() {
        let step = |name: &str| FlowStep {
            name: name.into(),
            url: "http://192.0.2.1/".into(),
            ..FlowStep::default()
        };
        let ok = HttpFlow {
            steps: vec![step("a"), step("b")],
            budget: None,
        };
        assert!(ok.check().is_ok());
        let twice = HttpFlow {
            steps: vec![step("a"), step("a")],
            budget: None,
        };
        assert!(twice.check().unwrap_err().contains("taken"));
        let mut file = ok.clone();
        file.steps[0].url = "file:///etc/passwd".into();
        assert!(file.check().unwrap_err().contains("http://"));
        let mut two = ok.clone();
        two.steps[1].extract.insert(
            "x".into(),
            Extract {
                header: Some("a".into()),
                regex: Some("b".into()),
                ..Extract::default()
            },
        );
        assert!(two.check().unwrap_err().contains("one of"));
        assert!(HttpFlow::default().check().is_err());
    }
}
