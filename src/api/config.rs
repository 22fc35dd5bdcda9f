//! The generic configuration routes (SPEC 4.3), five per kind, generated from the kind table.

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::etag::{IfMatch, etag};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::pagination::{CONFIG_KINDS, Page, PageQuery};
use super::router::{JSON, Route};
use super::schemas;
use crate::model::config::{ConfigDoc, KINDS, Kind};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ListQuery {
    /// Matches the name or any text of the document, any case.
    q: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

fn one(doc: &ConfigDoc) -> impl IntoResponse + use<> {
    (etag(doc.version), Json(doc.to_json()))
}

pub fn routes() -> Vec<Route> {
    KINDS.iter().flat_map(kind_routes).collect()
}

fn kind_routes(kind: &'static Kind) -> Vec<Route> {
    let list_path = format!("/api/v1/{}", kind.name);
    let item_path = format!("/api/v1/{}/{{name}}", kind.name);
    let list = move |State(st): State<AppState>, c: Caller, ApiQuery(q): ApiQuery<ListQuery>| async move {
        let page = q.page.resolve(CONFIG_KINDS);
        let docs = st
            .inventory
            .list(&c.principal, kind, q.q, page.cursor.clone(), page.limit)
            .await?;
        let page = Page::new(docs, &page, |d| d.name.clone());
        Ok::<_, Problem>(Json(Page {
            items: page.items.iter().map(ConfigDoc::to_json).collect(),
            next_cursor: page.next_cursor,
        }))
    };
    let create = move |State(st): State<AppState>, c: Caller, ApiJson(body): ApiJson<Value>| async move {
        let doc = st
            .inventory
            .create(&c.principal, &c.actor, kind, body)
            .await?;
        Ok::<_, Problem>((StatusCode::CREATED, one(&doc)))
    };
    let get = move |State(st): State<AppState>, c: Caller, ApiPath(name): ApiPath<String>| async move {
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        Ok::<_, Problem>(one(&doc))
    };
    let put = move |State(st): State<AppState>,
                    c: Caller,
                    ApiPath(name): ApiPath<String>,
                    IfMatch(v): IfMatch,
                    ApiJson(body): ApiJson<Value>| async move {
        let doc = st
            .inventory
            .update(&c.principal, &c.actor, kind, name, v, body)
            .await?;
        Ok::<_, Problem>(one(&doc))
    };
    let delete = move |State(st): State<AppState>, c: Caller, ApiPath(name): ApiPath<String>| async move {
        st.inventory
            .delete(&c.principal, &c.actor, kind, name, None)
            .await?;
        Ok::<_, Problem>(StatusCode::NO_CONTENT)
    };
    let mut list = Route::get(list_path.clone(), list).permission(kind.read).doc(kind.name, "List documents", "Ordered by name; `q` matches the name or any text of the document (any case); limit 500 by default, at most 2000; `cursor` is the last name of the previous page.")
        .query::<ListQuery>()
        .answers_as(200, JSON, schemas::config_page(kind));
    if kind.name == "schedules" {
        list = list.tool(
            "schedules_list",
            "On-call schedules with their layers.",
            &[("limit", "integer", "at most this many")],
        );
    }
    vec![
        list,
        Route::post(list_path, create).permission(kind.write).doc(kind.name, "Create a document", "201 with `ETag`; a taken name is 409 `svc:conflict/duplicate`.")
            .body_as(JSON, schemas::config_document(kind, false), false)
            .answers_as(201, JSON, schemas::config_document(kind, true))
            .example(move || example(kind.name)),
        Route::get(item_path.clone(), get).permission(kind.read).doc(kind.name, "Get a document", if kind.name == "templates" { "By name or by id; `ETag` is the version." } else { "`ETag` is the version." })
            .answers_as(200, JSON, schemas::config_document(kind, true)),
        Route::put(item_path.clone(), put).permission(kind.write).doc(kind.name, "Replace a document", "`If-Match` required (428 without, 409 `svc:conflict/version` when stale); the name in the path wins over the body's.")
            .body_as(JSON, schemas::config_document(kind, false), false)
            .answers_as(200, JSON, schemas::config_document(kind, true)),
        Route::delete(item_path, delete).permission(kind.write).doc(kind.name, "Delete a document", "204.")
            .answers_empty(204),
    ]
}

/// Example documents of the main kinds, as the OpenAPI document shows them.
fn example(kind: &str) -> Option<Value> {
    Some(match kind {
        "templates" => {
            json!({"name": "linux-server", "kind": "host", "labels": {"os": "linux"}, "spec": {"checkCommand": "ping", "interval": "1m", "maxCheckAttempts": 3}})
        }
        "check-commands" => {
            json!({"name": "disk", "type": "plugin", "line": ["/usr/lib/nagios/plugins/check_disk", "-w", "$ARG1$", "-c", "$ARG2$", "-p", "/"], "timeout": 10})
        }
        "alert-rules" => {
            json!({"name": "critical-services", "match": "event.type == 'state_change' && event.state == 'CRITICAL'", "severity": "critical", "resolveOnOk": true, "escalationPolicy": "ops-default"})
        }
        "escalation-policies" => {
            json!({"name": "ops-default", "steps": [{"after": "0s", "notify": {"schedule": "ops"}}, {"after": "15m", "notify": {"contactGroup": "ops-leads"}}]})
        }
        "schedules" => {
            json!({"name": "ops", "timeZone": "Europe/Berlin", "layers": [{"unit": "weekly", "anchor": "2026-01-05T08:00:00+01:00", "participants": ["ada", "grace"]}]})
        }
        "contacts" => {
            json!({"name": "ada", "email": "ada@example.org", "phone": "+49 170 1234567", "timeZone": "Europe/Berlin", "preferences": [{"channels": ["email", "sms"]}]})
        }
        "channels" => {
            json!({"name": "ops-webhook", "type": "webhook", "config": {"url": "https://hooks.example.org/svc"}})
        }
        "event-sources" => {
            json!({"name": "prometheus", "type": "alertmanager", "authMode": "token", "secretRef": "prometheus-token"})
        }
        _ => return None,
    })
}
