//! The one tool catalog, shared by `/mcp`, `GET /ai/tools` and the agent. A tool is an API
//! route and nothing more: the route declares it (`Route::tool`), the API builds the catalog
//! from its route table and hands it over with the `ToolRunner` port, and calling a tool is a
//! request to that route as the caller, so the route's permission, tenant and audit apply
//! unchanged.

use crate::model::ai::{ToolInfo, ToolPolicy};
use serde_json::{Map, Value, json};

/// An argument of a tool: its name, JSON type and what it is; path parts are required.
pub type Arg = (&'static str, &'static str, &'static str);

/// What a route declares to be offered as a tool (`Route::tool` in `api/router.rs`): its name,
/// what it does for the model, and its arguments. The route gives the rest.
#[derive(Clone, Copy, Debug)]
pub struct ToolDecl {
    pub name: &'static str,
    pub description: &'static str,
    pub args: &'static [Arg],
}

/// The arguments of a listing route: selector, limit and cursor.
pub const LIST_ARGS: &[Arg] = &[
    (
        "selector",
        "string",
        "label selector, e.g. env=prod,site=s3",
    ),
    ("limit", "integer", "at most this many"),
    ("cursor", "string", "the nextCursor of the previous page"),
];

/// A tool: a route the API declared as one.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub method: &'static str,
    /// The route, with `{name}` parts filled from the arguments of the same name.
    pub path: String,
    /// The route's permission (checked again by the route itself on every call).
    pub permission: &'static str,
    /// Whether it changes anything: every tool whose permission is not a `:read` one. A policy
    /// asks before a write by default.
    pub write: bool,
    pub args: &'static [Arg],
}

/// Every tool, in the route table's order: what `/mcp`, `GET /ai/tools` and the agent offer.
#[derive(Clone, Debug, Default)]
pub struct Catalog(Vec<Tool>);

impl Catalog {
    pub fn new(tools: Vec<Tool>) -> Self {
        Self(tools)
    }

    pub fn find(&self, name: &str) -> Option<&Tool> {
        self.0.iter().find(|t| t.name == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.0.iter()
    }
}

impl Tool {
    /// The tool a route declares: `method` and `path` are the route's, as is `permission`.
    pub fn of(
        decl: ToolDecl,
        method: &'static str,
        path: impl Into<String>,
        permission: &'static str,
    ) -> Tool {
        Tool {
            name: decl.name,
            description: decl.description,
            method,
            path: path.into(),
            permission,
            write: !permission.ends_with(":read"),
            args: decl.args,
        }
    }

    pub fn route(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    fn path_params(&self) -> impl Iterator<Item = &str> {
        self.path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(name, _)| name))
    }

    /// The JSON Schema of the arguments.
    pub fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        for (name, kind, description) in self.args {
            let mut p = json!({"type": kind, "description": description});
            if *kind == "array" {
                p["items"] = json!({"type": "string"});
            }
            properties.insert((*name).to_string(), p);
        }
        let required: Vec<&str> = self.path_params().collect();
        json!({"type": "object", "properties": properties, "required": required})
    }

    pub fn info(&self, policy: &ToolPolicy, permitted: bool) -> ToolInfo {
        ToolInfo {
            name: self.name.into(),
            description: self.description.into(),
            permission: self.permission.into(),
            write: self.write,
            policy: policy.mode(self.name, self.write),
            permitted,
            route: self.route(),
            input_schema: self.input_schema(),
        }
    }

    /// The request a call with `args` makes: method, path with query, JSON body. Path parts
    /// are percent-encoded, so an argument cannot reach another route.
    pub fn request(&self, args: &Value) -> Result<ApiCall, String> {
        let empty = Map::new();
        let args = match args {
            Value::Object(m) => m,
            Value::Null => &empty,
            _ => return Err("the arguments must be an object".into()),
        };
        let mut path = self.path.clone();
        for name in self.path_params() {
            let value = match args.get(name) {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return Err(format!("the argument {name} is required")),
            };
            let encoded =
                url::form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>();
            path = path.replace(&format!("{{{name}}}"), &encoded);
        }
        let rest: Map<String, Value> = args
            .iter()
            .filter(|(k, v)| !self.path_params().any(|p| p == k.as_str()) && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if self.method == "GET" {
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &rest {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                query.append_pair(k, &text);
            }
            let query = query.finish();
            if !query.is_empty() {
                path = format!("{path}?{query}");
            }
            Ok(ApiCall {
                method: self.method,
                path,
                body: None,
            })
        } else {
            Ok(ApiCall {
                method: self.method,
                path,
                body: Some(Value::Object(rest)),
            })
        }
    }
}

/// One request to the API on behalf of a caller.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiCall {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
}

/// The answer of an `ApiCall`: its status and JSON body (or the text, as a JSON string).
#[derive(Clone, Debug)]
pub struct ApiAnswer {
    pub status: u16,
    pub body: Value,
}

impl ApiAnswer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &[Arg] = &[
        ("id", "string", "the alert's id"),
        ("comment", "string", "why"),
    ];

    fn tool(
        name: &'static str,
        method: &'static str,
        path: &str,
        permission: &'static str,
    ) -> Tool {
        let decl = ToolDecl {
            name,
            description: "",
            args: ID,
        };
        Tool::of(decl, method, path, permission)
    }

    #[test]
    fn a_call_becomes_its_route() {
        let ack = tool("alert_ack", "POST", "/api/v1/alerts/{id}:ack", "alerts:ack");
        let call = ack
            .request(&json!({"id": "0193/../x", "comment": "on it"}))
            .unwrap();
        assert_eq!(call.method, "POST");
        assert_eq!(call.path, "/api/v1/alerts/0193%2F..%2Fx:ack");
        assert_eq!(call.body, Some(json!({"comment": "on it"})));
        assert!(ack.request(&json!({})).is_err(), "the id is required");
        let list = tool("alerts_list", "GET", "/api/v1/alerts", "alerts:read");
        let call = list
            .request(&json!({"status": "open", "limit": 5}))
            .unwrap();
        assert_eq!(call.path, "/api/v1/alerts?limit=5&status=open");
        assert_eq!(call.body, None);
        assert!(list.request(&json!([1])).is_err());
        assert_eq!(ack.input_schema()["required"], json!(["id"]));
    }

    /// A tool writes unless its route's permission is a reading one, whatever its method (a
    /// metric query is a POST that reads).
    #[test]
    fn writes_are_the_routes_that_need_more_than_reading() {
        assert!(tool("ack", "POST", "/a", "alerts:ack").write);
        assert!(!tool("query", "POST", "/q", "metrics:read").write);
        assert!(!tool("list", "GET", "/l", "alerts:read").write);
        let catalog = Catalog::new(vec![tool("ack", "POST", "/a", "alerts:ack")]);
        assert_eq!(catalog.find("ack").map(|t| t.path.as_str()), Some("/a"));
        assert!(catalog.find("nack").is_none());
    }
}
