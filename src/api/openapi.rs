//! The OpenAPI 3.1 document, generated from the route table at first request.

use super::router::{PUBLIC, Route, routes};
use crate::model::VERSION;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

fn path_params(path: &str) -> Vec<Value> {
    path.split('{')
        .skip(1)
        .filter_map(|s| s.split('}').next())
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

fn operation(r: &Route) -> Value {
    let mut op = json!({
        "operationId": format!("{}_{}", r.method.as_str().to_lowercase(), r.path.trim_start_matches('/').replace(['/', '{', '}', ':', '.', '-'], "_")),
        "summary": r.summary,
        "tags": [r.tag],
        "x-required-permission": r.permission,
        "responses": {
            "200": {"description": "OK"},
            "default": {
                "description": "Problem Details (RFC 9457)",
                "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/problemDoc"}}}
            }
        }
    });
    if !r.description.is_empty() {
        op["description"] = json!(r.description);
    }
    let params = path_params(&r.path);
    if !params.is_empty() {
        op["parameters"] = Value::Array(params);
    }
    if r.permission == PUBLIC && !r.identity {
        op["security"] = json!([]);
    }
    op
}

pub fn build(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for r in routes {
        let entry = paths.entry(r.path.clone()).or_insert_with(|| json!({}));
        entry[r.method.as_str().to_lowercase()] = operation(r);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "svc",
            "version": VERSION,
            "description": "Monitoring and alerting appliance. Errors are RFC 9457 problem documents; lists are {items, nextCursor?} with keyset pagination; versioned resources use ETag / If-Match; durations are Go duration strings (\"5m0s\") and accept bare integer seconds."
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerToken": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerToken": {"type": "http", "scheme": "bearer", "description": "API token (svc_…) or the svc_session cookie of the embedded UI"}
            },
            "schemas": {
                "problemDoc": {
                    "type": "object",
                    "required": ["type", "title", "status", "code", "instance"],
                    "properties": {
                        "type": {"type": "string"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "code": {"type": "string", "description": "svc:… code; clients branch on it"},
                        "detail": {"type": "string"},
                        "instance": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// The document of this build's routes.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| build(&routes()))
}
