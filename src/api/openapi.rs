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
            "description": "Monitoring and alerting appliance. Errors are RFC 9457 problem documents; lists are {items, nextCursor?} with keyset pagination; versioned resources use ETag / If-Match; durations are Go duration strings (\"5m0s\") and accept bare integer seconds. A repeated query parameter takes its first value; a path segment that is not UTF-8 once percent-decoded is 404 `svc:not-found`. Limits: templates import at most 32 deep, checked over the whole template graph at every save and in bundles (422 `svc:validation/spec`, or `svc:validation/bundle`, naming the chain or the cycle); alert-rule `match` and `clear` are CEL of at most 4096 bytes, brackets nested at most 32 deep and at most 1000 operators (422 `svc:validation/match` / `svc:validation/clear`). Failed API-token verifications (a real token's prefix with a wrong secret) are limited per client address to a burst of 20, then one per 5 s: past that 429 `svc:auth/throttled` with `Retry-After`, without verifying; when 16 credential hashings already wait, another is answered at once with 503 `svc:auth/busy` and `Retry-After: 1`."
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
