//! Schemas of bodies that have no Rust type of their own: configuration documents (a kind's
//! body plus the service's fields) and the few answers built as open JSON. They are written
//! only where the OpenAPI document is generated (the tests, `api::openapi`); elsewhere each
//! writer here is a stand-in of the same name that writes nothing.

use super::router::SchemaFn;
use crate::model::config::Kind;
#[cfg(test)]
use crate::model::config::METADATA;
#[cfg(test)]
use schemars::{Schema, SchemaGenerator, json_schema};
#[cfg(test)]
use serde_json::{Value, json};
#[cfg(test)]
use std::sync::Arc;

/// Where the OpenAPI document keeps its named schemas.
#[cfg(test)]
pub const SCHEMAS: &str = "#/components/schemas/";

/// `alert-rule` → `AlertRule`.
#[cfg(test)]
fn pascal(code: &str) -> String {
    code.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Registers `schema` as a named definition and answers a reference to it.
#[cfg(test)]
fn define(g: &mut SchemaGenerator, name: &str, schema: Value) -> Schema {
    g.definitions_mut().insert(name.to_string(), schema);
    Schema::new_ref(format!("{SCHEMAS}{name}"))
}

/// A configuration document of `kind`: its body's fields and the service's own. As a request
/// (`answer` false) `name` is required and the service's fields are ignored; as an answer they
/// are all present.
#[cfg(test)]
pub fn config_document(kind: &'static Kind, answer: bool) -> SchemaFn {
    Arc::new(move |g: &mut SchemaGenerator| {
        let body = (kind.schema)(g).to_value();
        let mut doc = body["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix(SCHEMAS))
            .and_then(|name| g.definitions().get(name).cloned())
            .unwrap_or(body);
        let ignored = json!({"description": "the service's own; ignored in a request"});
        let meta = [
            ("id", json!({"type": "string", "format": "uuid"})),
            (
                "name",
                json!({"type": "string", "minLength": 1, "maxLength": 200}),
            ),
            ("tenantId", json!({"type": "string", "format": "uuid"})),
            (
                "createdAt",
                json!({"type": "string", "format": "date-time"}),
            ),
            (
                "updatedAt",
                json!({"type": "string", "format": "date-time"}),
            ),
            ("version", json!({"type": "integer", "minimum": 1})),
        ];
        if let Some(obj) = doc.as_object_mut() {
            let mut props = obj
                .get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (key, schema) in &meta {
                props.insert(
                    (*key).to_string(),
                    if answer {
                        schema.clone()
                    } else {
                        ignored.clone()
                    },
                );
            }
            if !answer {
                props.insert("name".into(), meta[1].1.clone());
            }
            obj.insert("properties".into(), Value::Object(props));
            let mut required: Vec<Value> = obj
                .get("required")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ours: &[&str] = if answer { &METADATA } else { &["name"] };
            required.extend(ours.iter().map(|k| json!(k)));
            obj.insert("required".into(), Value::Array(required));
        }
        let suffix = if answer { "Document" } else { "Input" };
        define(g, &format!("{}{suffix}", pascal(kind.code)), doc)
    })
}

/// `{items, nextCursor?}` of configuration documents.
#[cfg(test)]
pub fn config_page(kind: &'static Kind) -> SchemaFn {
    let item = config_document(kind, true);
    Arc::new(move |g: &mut SchemaGenerator| {
        let item = item(g);
        json_schema!({
            "type": "object",
            "required": ["items"],
            "properties": {"items": {"type": "array", "items": item}, "nextCursor": {"type": "string"}}
        })
    })
}

/// An answer described by a literal schema.
#[cfg(test)]
pub fn literal(schema: LiteralFn) -> SchemaFn {
    Arc::new(move |_: &mut SchemaGenerator| schema())
}

#[cfg(not(test))]
pub fn config_document(_: &'static Kind, _: bool) -> SchemaFn {
    SchemaFn
}

#[cfg(not(test))]
pub fn config_page(_: &'static Kind) -> SchemaFn {
    SchemaFn
}

/// A literal schema's writer.
#[cfg(test)]
pub type LiteralFn = fn() -> Schema;
#[cfg(not(test))]
pub type LiteralFn = fn();

#[cfg(not(test))]
pub fn literal(_: LiteralFn) -> SchemaFn {
    SchemaFn
}

/// Literal schemas: each a function answering its schema (nothing outside the tests).
macro_rules! literals {
    ($($(#[doc = $doc:literal])* $name:ident => $schema:expr;)*) => {$(
        $(#[doc = $doc])*
        #[cfg(test)]
        pub fn $name() -> Schema {
            $schema
        }
        #[cfg(not(test))]
        pub fn $name() {}
    )*};
}

literals! {
    /// `{status}`: an acknowledgement without data.
    status => json_schema!({"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}});
    /// Bytes of a file (an archive).
    binary => json_schema!({"type": "string", "contentMediaType": "application/octet-stream"});
    /// A JSON object whose members the operation's description lists.
    open_object => json_schema!({"type": "object"});
    /// A list of JSON objects whose members the operation's description lists.
    open_array => json_schema!({"type": "array", "items": {"type": "object"}});
    /// A problem document (for operations that answer only with one).
    problem => Schema::new_ref(format!("{SCHEMAS}problemDoc"));
    /// `{accepted, eventIds}` of an ingest.
    ingest_accepted => json_schema!({
        "type": "object",
        "required": ["accepted", "eventIds"],
        "properties": {
            "accepted": {"type": "integer", "minimum": 0},
            "eventIds": {"type": "array", "items": {"type": "string", "format": "uuid"}}
        }
    });
    /// Multi-document YAML text (any documents, or none).
    yaml => json_schema!({"description": "multi-document YAML"});
}
