//! The one tool catalog, shared by `/mcp`, `GET /ai/tools` and the agent. A tool is an API
//! route and nothing more: calling it is a request to that route as the caller, so the route's
//! permission, tenant and audit apply unchanged (see `ToolRunner`).

use crate::model::ai::{ToolInfo, ToolPolicy};
use serde_json::{Map, Value, json};

pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub method: &'static str,
    /// The route, with `{name}` parts filled from the arguments of the same name.
    pub path: &'static str,
    /// The route's permission (checked again by the route itself on every call).
    pub permission: &'static str,
    pub write: bool,
    /// Arguments: name, JSON type, description; path parts are required.
    pub args: &'static [(&'static str, &'static str, &'static str)],
}

const LIST: &[(&str, &str, &str)] = &[
    (
        "selector",
        "string",
        "label selector, e.g. env=prod,site=s3",
    ),
    ("limit", "integer", "at most this many"),
    ("cursor", "string", "the nextCursor of the previous page"),
];

pub const CATALOG: &[Tool] = &[
    Tool {
        name: "problems_list",
        description: "Hosts and services not OK, worst first, unhandled before handled.",
        method: "GET",
        path: "/api/v1/problems",
        permission: "objects:read",
        write: false,
        args: &[("selector", "string", "label selector")],
    },
    Tool {
        name: "alerts_list",
        description: "Alerts, newest first; filter by status (open, acked, resolved), severity or object.",
        method: "GET",
        path: "/api/v1/alerts",
        permission: "alerts:read",
        write: false,
        args: &[
            ("status", "string", "open, acked, resolved or expired"),
            ("severity", "string", "critical, warning or info"),
            ("objectId", "string", "the alert's object"),
            ("limit", "integer", "at most this many"),
            ("cursor", "string", "the nextCursor of the previous page"),
        ],
    },
    Tool {
        name: "alert_get",
        description: "One alert with its labels, status and times.",
        method: "GET",
        path: "/api/v1/alerts/{id}",
        permission: "alerts:read",
        write: false,
        args: &[("id", "string", "the alert's id")],
    },
    Tool {
        name: "incidents_list",
        description: "Incidents, newest first.",
        method: "GET",
        path: "/api/v1/incidents",
        permission: "incidents:read",
        write: false,
        args: &[
            ("status", "string", "open or resolved"),
            ("limit", "integer", "at most this many"),
        ],
    },
    Tool {
        name: "incident_get",
        description: "One incident with its alerts and timeline.",
        method: "GET",
        path: "/api/v1/incidents/{id}",
        permission: "incidents:read",
        write: false,
        args: &[("id", "string", "the incident's id")],
    },
    Tool {
        name: "objects_list",
        description: "Hosts and services with their current state.",
        method: "GET",
        path: "/api/v1/objects",
        permission: "objects:read",
        write: false,
        args: LIST,
    },
    Tool {
        name: "object_get",
        description: "One host or service with its state.",
        method: "GET",
        path: "/api/v1/objects/{id}",
        permission: "objects:read",
        write: false,
        args: &[("id", "string", "the object's id")],
    },
    Tool {
        name: "events_list",
        description: "The event journal, newest first: state changes, alerts, notifications.",
        method: "GET",
        path: "/api/v1/events",
        permission: "events:read",
        write: false,
        args: &[
            ("type", "string", "event type, e.g. state_change"),
            ("objectId", "string", "the event's object"),
            ("since", "string", "RFC 3339 time"),
            ("limit", "integer", "at most this many"),
        ],
    },
    Tool {
        name: "metrics_query",
        description: "Query stored metric samples (the body of POST /api/v1/metrics/query).",
        method: "POST",
        path: "/api/v1/metrics/query",
        permission: "metrics:read",
        write: false,
        args: &[
            ("query", "string", "the series, e.g. rta{host=\"web1\"}"),
            ("from", "string", "RFC 3339 time"),
            ("to", "string", "RFC 3339 time"),
            ("step", "string", "bucket width, e.g. 5m"),
        ],
    },
    Tool {
        name: "oncall_now",
        description: "Who is on call now, per schedule.",
        method: "GET",
        path: "/api/v1/oncall/now",
        permission: "oncall:read",
        write: false,
        args: &[],
    },
    Tool {
        name: "schedules_list",
        description: "On-call schedules with their layers.",
        method: "GET",
        path: "/api/v1/schedules",
        permission: "oncall:read",
        write: false,
        args: &[("limit", "integer", "at most this many")],
    },
    Tool {
        name: "silences_list",
        description: "Silences, active and future.",
        method: "GET",
        path: "/api/v1/silences",
        permission: "objects:read",
        write: false,
        args: &[],
    },
    Tool {
        name: "downtimes_list",
        description: "Scheduled downtimes.",
        method: "GET",
        path: "/api/v1/downtimes",
        permission: "objects:read",
        write: false,
        args: &[],
    },
    Tool {
        name: "alert_ack",
        description: "Acknowledge an open alert: escalation stops.",
        method: "POST",
        path: "/api/v1/alerts/{id}:ack",
        permission: "alerts:ack",
        write: true,
        args: &[
            ("id", "string", "the alert's id"),
            ("comment", "string", "why"),
        ],
    },
    Tool {
        name: "alert_resolve",
        description: "Resolve an open or acknowledged alert.",
        method: "POST",
        path: "/api/v1/alerts/{id}:resolve",
        permission: "alerts:ack",
        write: true,
        args: &[("id", "string", "the alert's id")],
    },
    Tool {
        name: "alert_snooze",
        description: "Snooze an alert until a time or for a duration; it re-arms then.",
        method: "POST",
        path: "/api/v1/alerts/{id}:snooze",
        permission: "alerts:ack",
        write: true,
        args: &[
            ("id", "string", "the alert's id"),
            ("duration", "string", "e.g. 30m"),
            ("until", "string", "RFC 3339 time"),
        ],
    },
    Tool {
        name: "silence_create",
        description: "Silence alerts matching a selector until a time.",
        method: "POST",
        path: "/api/v1/silences",
        permission: "silences:write",
        write: true,
        args: &[
            (
                "selector",
                "string",
                "label selector of the alerts silenced",
            ),
            ("expiresAt", "string", "RFC 3339 time"),
            ("comment", "string", "why"),
        ],
    },
    Tool {
        name: "downtime_create",
        description: "Schedule a downtime for an object or a selector.",
        method: "POST",
        path: "/api/v1/downtimes",
        permission: "downtimes:write",
        write: true,
        args: &[
            ("objectId", "string", "the object"),
            ("selector", "string", "or a label selector"),
            ("start", "string", "RFC 3339 time"),
            ("end", "string", "RFC 3339 time"),
            ("comment", "string", "why"),
        ],
    },
    Tool {
        name: "check_now",
        description: "Run an object's check at once.",
        method: "POST",
        path: "/api/v1/objects/{id}/check-now",
        permission: "checks:run",
        write: true,
        args: &[("id", "string", "the object's id")],
    },
    Tool {
        name: "incident_resolve",
        description: "Resolve an incident.",
        method: "POST",
        path: "/api/v1/incidents/{id}:resolve",
        permission: "incidents:write",
        write: true,
        args: &[("id", "string", "the incident's id")],
    },
    Tool {
        name: "incident_merge",
        description: "Merge other incidents into this one.",
        method: "POST",
        path: "/api/v1/incidents/{id}:merge",
        permission: "incidents:write",
        write: true,
        args: &[
            ("id", "string", "the incident kept"),
            ("sourceIds", "array", "the incidents merged into it"),
        ],
    },
];

pub fn find(name: &str) -> Option<&'static Tool> {
    CATALOG.iter().find(|t| t.name == name)
}

impl Tool {
    pub fn route(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    fn path_params(&self) -> impl Iterator<Item = &'static str> {
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
        let mut path = self.path.to_string();
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

    #[test]
    fn a_call_becomes_its_route() {
        let ack = find("alert_ack").unwrap();
        let call = ack
            .request(&json!({"id": "0193/../x", "comment": "on it"}))
            .unwrap();
        assert_eq!(call.method, "POST");
        assert_eq!(call.path, "/api/v1/alerts/0193%2F..%2Fx:ack");
        assert_eq!(call.body, Some(json!({"comment": "on it"})));
        assert!(ack.request(&json!({})).is_err(), "the id is required");
        let list = find("alerts_list").unwrap();
        let call = list
            .request(&json!({"status": "open", "limit": 5}))
            .unwrap();
        assert_eq!(call.path, "/api/v1/alerts?limit=5&status=open");
        assert_eq!(call.body, None);
        assert!(list.request(&json!([1])).is_err());
        assert_eq!(ack.input_schema()["required"], json!(["id"]));
    }

    #[test]
    fn names_are_unique_and_writes_need_write_permissions() {
        let mut names: Vec<&str> = CATALOG.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len());
        for t in CATALOG {
            assert_eq!(
                t.write,
                t.method != "GET" && t.name != "metrics_query",
                "{}",
                t.name
            );
        }
    }
}
