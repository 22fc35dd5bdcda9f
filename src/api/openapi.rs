//! The OpenAPI 3.1 document. The tests generate it from the route table and keep
//! `docs/openapi.json` equal to it (`the_committed_document_is_current`); every build serves
//! that copy, gzipped by `build.rs` with the build's version in `info.version`. So the schema
//! code (schemars and what it derives) is in the tests only, not in the binary a gateway runs.

use super::error::Problem;
use super::middleware::accepts_gzip;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::io::Read;

/// `docs/openapi.json`, gzipped by `build.rs`.
static GZIPPED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.gz"));

/// The document: gzipped for a client that takes it, else inflated.
pub fn response(headers: &HeaderMap) -> Response {
    let json = (
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let vary = (header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if accepts_gzip(headers) {
        let gzip = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return ([json, vary, gzip], GZIPPED).into_response();
    }
    match inflated() {
        Ok(text) => ([json, vary], text).into_response(),
        Err(e) => Problem::internal(format!("the embedded OpenAPI document: {e}")).into_response(),
    }
}

fn inflated() -> std::io::Result<Vec<u8>> {
    let mut text = Vec::with_capacity(GZIPPED.len() * 10);
    flate2::read::GzDecoder::new(GZIPPED).read_to_end(&mut text)?;
    Ok(text)
}

/// Builds the document from the route table.
#[cfg(test)]
mod generator {
    use super::super::router::{Body, PROBLEM, PUBLIC, Route, SchemaFn};
    use super::super::schemas::SCHEMAS;
    use crate::model::DEV_VERSION;
    use schemars::SchemaGenerator;
    use schemars::generate::{Contract, SchemaSettings};
    use schemars::transform::ReplaceBoolSchemas;
    use serde_json::{Map, Value, json};
    use std::collections::HashMap;

    fn path_params(path: &str) -> Vec<Value> {
        path.split('{')
        .skip(1)
        .filter_map(|s| s.split('}').next())
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
    }

    /// The query parameters of an operation: one per field of its query schema.
    fn query_params(schema: Option<&SchemaFn>, inline: &mut SchemaGenerator) -> Vec<Value> {
        let Some(schema) = schema else {
            return Vec::new();
        };
        let schema = schema(inline).to_value();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(fields) = schema["properties"].as_object() else {
            return Vec::new();
        };
        fields
            .iter()
            .map(|(name, field)| {
                let mut field = field.clone();
                let description = field.as_object_mut().and_then(|f| f.remove("description"));
                let mut param = json!({
                    "name": name,
                    "in": "query",
                    "required": required.contains(&name.as_str()),
                    "schema": field,
                });
                if let Some(d) = description {
                    param["description"] = d;
                }
                param
            })
            .collect()
    }

    fn content(body: &Body, g: &mut SchemaGenerator) -> Value {
        let schema = match (body.schema)(g).to_value() {
            Value::Bool(true) => json!({}),
            schema => schema,
        };
        json!({ body.media: {"schema": schema} })
    }

    fn problem(description: &str) -> Value {
        json!({
            "description": description,
            "content": {PROBLEM: {"schema": {"$ref": format!("{SCHEMAS}problemDoc")}}}
        })
    }

    fn status_text(status: u16) -> &'static str {
        axum::http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Answer")
    }

    /// The problem documents an operation can answer, from what it reads and who may call it;
    /// an answer the route declares for the same status wins.
    fn problems(r: &Route, responses: &mut Map<String, Value>) {
        let mut add = |status: &str, what: &str| {
            responses
                .entry(status.to_string())
                .or_insert_with(|| problem(what));
        };
        for (status, what) in &r.doc.failures {
            add(&status.to_string(), what);
        }
        let guarded = r.permission != PUBLIC || r.identity;
        if guarded {
            add(
                "401",
                "No credential, or one that is not valid (`svc:auth/required`, `svc:auth/invalid`)",
            );
        }
        if r.permission != PUBLIC {
            add(
                "403",
                "The credential lacks the permission (`svc:auth/forbidden`)",
            );
        }
        let with_params = r.path.contains('{');
        if with_params {
            add(
                "404",
                "No such resource in the acting tenant (`svc:not-found`)",
            );
        }
        if r.doc.request.is_some() {
            add("413", "The body is over its cap");
        }
        if r.doc.request.is_some() || r.doc.query.is_some() || with_params {
            add("422", "The input does not fit (`svc:validation/<field>`)");
        }
        add("default", "Problem Details (RFC 9457)");
    }

    fn operation(
        r: &Route,
        requests: &mut SchemaGenerator,
        answers: &mut SchemaGenerator,
        inline: &mut SchemaGenerator,
    ) -> Value {
        let mut responses = Map::new();
        for a in &r.doc.responses {
            // Answers of one status in several media types (a report in HTML, CSV or JSON) share
            // its entry.
            let answer = responses
                .entry(a.status.to_string())
                .or_insert_with(|| json!({"description": status_text(a.status)}));
            if let Some(body) = &a.body {
                let media = content(body, answers);
                match (
                    answer.get_mut("content").and_then(Value::as_object_mut),
                    media,
                ) {
                    (Some(existing), Value::Object(more)) => existing.extend(more),
                    (_, media) => answer["content"] = media,
                }
            }
        }
        let guarded = r.permission != PUBLIC || r.identity;
        if r.page {
            let refused = responses.entry("401").or_insert_with(|| {
            problem("A bearer credential that is not valid (`svc:auth/invalid`), or a form posted without a session (an HTML page)")
        });
            if let Some(content) = refused.get_mut("content").and_then(Value::as_object_mut) {
                content.insert("text/html".into(), json!({"schema": {"type": "string"}}));
            }
            responses.insert(
            "default".into(),
            json!({"description": "An HTML page saying what went wrong", "content": {"text/html": {"schema": {"type": "string"}}}}),
        );
        } else {
            problems(r, &mut responses);
        }
        let mut op = json!({
            "operationId": format!("{}_{}", r.method.as_str().to_lowercase(), r.path.trim_start_matches('/').replace(['/', '{', '}', ':', '.', '-'], "_")),
            "summary": r.doc.summary,
            "tags": [r.doc.tag],
            "x-required-permission": r.permission,
            "responses": responses,
        });
        if !r.doc.description.is_empty() {
            op["description"] = json!(r.doc.description);
        }
        if crate::auth::permissions::is_instance_wide(r.permission) {
            op["x-instance-wide"] = json!(true);
        }
        if let Some(body) = &r.doc.request {
            let mut content = content(body, requests);
            if let Some(example) = &r.doc.example {
                content[body.media]["example"] = example.clone();
            }
            op["requestBody"] = json!({"required": !body.optional, "content": content});
        }
        let mut params = path_params(&r.path);
        params.extend(query_params(r.doc.query.as_ref(), inline));
        params.extend(r.doc.headers.iter().map(|(name, meaning)| {
        json!({"name": name, "in": "header", "required": false, "description": meaning, "schema": {"type": "string"}})
    }));
        if !params.is_empty() {
            op["parameters"] = Value::Array(params);
        }
        if !guarded {
            op["security"] = json!([]);
        }
        // The AI tool the route is offered as (`/mcp`, `GET /api/v1/ai/tools`).
        if let Some(tool) = &r.tool {
            op["x-svc-tool"] = json!(tool.name);
        }
        op
    }

    fn generator(contract: Contract, inline: bool) -> SchemaGenerator {
        SchemaSettings::draft2020_12()
            .with(|s| {
                s.definitions_path = "/components/schemas".into();
                s.meta_schema = None;
                s.contract = contract;
                s.inline_subschemas = inline;
            })
            // `true` (any JSON) as `{}`: client generators read only object schemas.
            .with_transform({
                let mut t = ReplaceBoolSchemas::default();
                t.skip_additional_properties = true;
                t
            })
            .into_generator()
    }

    /// Points `$ref`s at renamed definitions.
    fn rename_refs(v: &mut Value, renamed: &HashMap<String, String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match (k.as_str(), &*x) {
                        ("$ref", Value::String(r)) => {
                            if let Some(new) = r.strip_prefix(SCHEMAS).and_then(|n| renamed.get(n))
                            {
                                *x = Value::String(format!("{SCHEMAS}{new}"));
                            }
                        }
                        _ => rename_refs(x, renamed),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| rename_refs(x, renamed)),
            _ => {}
        }
    }

    fn mentions_any(v: &Value, names: &HashMap<String, String>) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, x)| match (k.as_str(), x) {
                ("$ref", Value::String(r)) => r
                    .strip_prefix(SCHEMAS)
                    .is_some_and(|n| names.contains_key(n)),
                _ => mentions_any(x, names),
            }),
            Value::Array(a) => a.iter().any(|x| mentions_any(x, names)),
            _ => false,
        }
    }

    /// Joins the definitions of request bodies (how they are read) and answers (how they are
    /// written). A type whose two forms differ keeps its name for the request form and gets an
    /// `Out` suffix for the answer form; answer schemas are renamed to match.
    fn join_definitions(
        requests: Map<String, Value>,
        mut answers: Map<String, Value>,
        answer_schemas: &mut [&mut Value],
    ) -> Map<String, Value> {
        let mut renamed: HashMap<String, String> = HashMap::new();
        loop {
            let before = renamed.len();
            for (name, schema) in &answers {
                let differs = requests
                    .get(name)
                    .is_some_and(|r| r != schema || mentions_any(schema, &renamed));
                if differs && !renamed.contains_key(name) {
                    renamed.insert(name.clone(), format!("{name}Out"));
                }
            }
            if renamed.len() == before {
                break;
            }
        }
        for schema in answers.values_mut() {
            rename_refs(schema, &renamed);
        }
        for schema in answer_schemas.iter_mut() {
            rename_refs(schema, &renamed);
        }
        let mut all = requests;
        for (name, schema) in answers {
            let name = renamed.get(&name).cloned().unwrap_or(name);
            all.insert(name, schema);
        }
        all
    }

    pub fn build(routes: &[Route]) -> Value {
        let mut requests = generator(Contract::Deserialize, false);
        let mut answers = generator(Contract::Serialize, false);
        let mut inline = generator(Contract::Deserialize, true);
        let mut paths = Map::new();
        for r in routes {
            let entry = paths.entry(r.path.clone()).or_insert_with(|| json!({}));
            entry[r.method.as_str().to_lowercase()] =
                operation(r, &mut requests, &mut answers, &mut inline);
        }
        let mut answer_schemas: Vec<&mut Value> = paths
            .values_mut()
            .filter_map(Value::as_object_mut)
            .flat_map(|ops| ops.values_mut())
            .map(|op| &mut op["responses"])
            .collect();
        let mut schemas = join_definitions(
            requests.take_definitions(true),
            answers.take_definitions(true),
            &mut answer_schemas,
        );
        schemas.insert("problemDoc".into(), problem_doc());
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "svc",
                "version": DEV_VERSION,
                "description": "Monitoring and alerting appliance. Errors are RFC 9457 problem documents; lists are {items, nextCursor?} with keyset pagination; versioned resources use ETag / If-Match; durations are Go duration strings (\"5m0s\") and accept bare integer seconds. A repeated query parameter takes its first value; a path segment that is not UTF-8 once percent-decoded is 404 `svc:not-found`. Limits: templates import at most 32 deep, checked over the whole template graph at every save and in bundles (422 `svc:validation/spec`, or `svc:validation/bundle`, naming the chain or the cycle); alert-rule `match` and `clear` are CEL of at most 4096 bytes, brackets nested at most 32 deep and at most 1000 operators (422 `svc:validation/match` / `svc:validation/clear`). Failed API-token verifications (a real token's prefix with a wrong secret) are limited per client address to a burst of 20, then one per 5 s: past that 429 `svc:auth/throttled` with `Retry-After`, without verifying; when 16 credential hashings already wait, another is answered at once with 503 `svc:auth/busy` and `Retry-After: 1`."
            },
            "servers": [{"url": "/"}],
            "security": [{"bearerToken": []}],
            "paths": paths,
            "components": {
                "securitySchemes": {
                    "bearerToken": {"type": "http", "scheme": "bearer", "description": "API token (svc_…) or the svc_session cookie of the embedded UI"}
                },
                "schemas": schemas
            }
        })
    }

    fn problem_doc() -> Value {
        json!({
            "type": "object",
            "required": ["type", "title", "status", "code", "instance"],
            "properties": {
                "type": {"type": "string", "description": "A URL describing the code (an HTML page of this server)"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "code": {"type": "string", "description": "svc:… code; clients branch on it"},
                "detail": {"type": "string"},
                "instance": {"type": "string"}
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::generator::build;
    use super::*;
    use crate::api::router::routes;
    use crate::api::schemas::SCHEMAS;
    use axum::http::Method;
    use serde_json::Value;

    const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json");

    fn document() -> Value {
        build(&routes())
    }

    /// The served document is the routes' own: a route, body or answer changed without the
    /// committed copy fails here. `SVC_BLESS=1 cargo test --lib openapi` writes it anew.
    #[test]
    fn the_committed_document_is_current() {
        let generated = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        if std::env::var_os("SVC_BLESS").is_some() {
            std::fs::write(COMMITTED, &generated).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json is not the document the routes describe: run `SVC_BLESS=1 cargo test --lib openapi` and commit it"
        );
    }

    /// What a build serves is the committed copy, with the build's version.
    #[test]
    fn the_served_document_is_the_committed_one() {
        let mut served: Value = serde_json::from_slice(&inflated().unwrap()).unwrap();
        let committed: Value =
            serde_json::from_str(&std::fs::read_to_string(COMMITTED).unwrap()).unwrap();
        assert_eq!(served["info"]["version"], crate::model::VERSION);
        served["info"]["version"] = committed["info"]["version"].clone();
        assert!(served == committed, "build.rs serves docs/openapi.json");
    }

    /// New operations cannot drift: each one documents its answers, and every POST and PUT its
    /// body (or says it reads none).
    #[test]
    fn every_operation_has_schemas() {
        for r in routes() {
            let op = format!("{} {}", r.method, r.path);
            assert!(!r.doc.responses.is_empty(), "{op} documents no answer");
            if r.method == Method::POST || r.method == Method::PUT {
                assert!(
                    r.doc.request.is_some() != r.doc.reads_nothing,
                    "{op} must document its body, or say it reads none"
                );
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        let doc = &document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(schemas.contains_key(name), "dangling reference to {name}");
        }
        let hosts = &doc["paths"]["/api/v1/hosts"];
        assert_eq!(
            hosts["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ObjectBody"
        );
        assert!(
            hosts["post"]["responses"]["201"]["content"]["application/json"]["schema"].is_object()
        );
        let rules = &doc["paths"]["/api/v1/alert-rules"]["post"];
        let input = rules["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap();
        let input = &schemas[input.trim_start_matches(SCHEMAS)];
        assert!(input["properties"]["match"].is_object(), "{input}");
        assert_eq!(
            input["required"].as_array().unwrap().last().unwrap(),
            "name"
        );
    }
}
