//! Host and service routes (SPEC 4.2 object rows, CONTRACT 3).

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::etag::{IfMatch, etag};
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{OBJECTS, Page, PageQuery};
use super::router::{JSON, Route};
use super::schemas;
use crate::ai::tools::LIST_ARGS;
use crate::federation::SiteError;
use crate::inventory::InventoryError;
use crate::inventory::objects::BatchRequest;
use crate::inventory::objects::BatchResult;
use crate::model::Selector;
use crate::model::config::{AgentChecks, BUILTIN_CHECKS};
use crate::model::fault;
use crate::model::object::{EffectiveConfig, ObjectBody, ObjectView};
use crate::model::object::{Object, ObjectFilter, ObjectKind};
use crate::model::state::{SnmpInterfaces, SnmpInterfacesRequest, TestCheck, TestCheckResult};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    const LIST: &str = "Filters `selector` (labels), `hostId`, `folder` (the folder and its subfolders), `q` (name substring, any case), `name` (the exact name), `state` (state labels, comma-separated: `CRITICAL,WARNING`, `DOWN`, `PENDING` before the first result; any case; implies `withState`), `withState` (live state per item once the check pipeline has one; absent means PEND); id ascending; limit 200 by default, at most 5000; `cursor` is the last id of the previous page. `site` (a federation site's name) lists that site's mirrors instead: its objects as the events it forwarded last told them, with the site's ids, labelled `site`, and `stale: {reason: uplink, since}` while its heartbeat is overdue (their state is then the last it told).";
    vec![
        Route::get("/api/v1/objects", list_all).permission("objects:read").tool("objects_list", "Hosts and services with their current state.", LIST_ARGS).doc("objects", "List hosts and services", LIST)
            .query::<ListQuery>().ok::<Page<ObjectView>>(),
        Route::get("/api/v1/hosts", list_hosts).permission("objects:read").doc("objects", "List hosts", LIST)
            .query::<ListQuery>().ok::<Page<ObjectView>>(),
        Route::get("/api/v1/services", list_services).permission("objects:read").doc("objects", "List services", LIST)
            .query::<ListQuery>().ok::<Page<ObjectView>>(),
        Route::post("/api/v1/hosts", create_host).permission("objects:write").doc(
            "objects",
            "Create a host",
            "Body `{name, folder?, host?, labels?, spec}`; with `host` it creates a service of that host. Unknown spec fields are 422 `svc:validation/spec`, as are unknown templates and template cycles. 201 with `ETag`.",
        )
            .body::<ObjectBody>().answers::<Object>(201)
            .example(|| json!({"name": "web01", "folder": "/berlin", "labels": {"site": "berlin", "team": "ops"}, "spec": {"address": "192.0.2.10", "checkCommand": "ping", "interval": "1m", "maxCheckAttempts": 3}})),
        Route::post("/api/v1/services", create_service).permission("objects:write").doc("objects", "Create a service", "As `POST /hosts`, with `host` (the host's name) required: 422 `svc:validation/host` without it or for an unknown host.")
            .body::<ObjectBody>().answers::<Object>(201)
            .example(|| json!({"name": "https", "host": "web01", "labels": {"tier": "gold"}, "spec": {"checkCommand": "http", "args": ["443", "/health"], "interval": "30s", "retryInterval": "10s"}})),
        Route::get("/api/v1/objects/{id}", get).permission("objects:read").tool("object_get", "One host or service with its state.", &[("id", "string", "the object's id")]).doc("objects", "Get an object", "The object with its host's name (a service) and its live `state` once it has one, as the lists show it; `ETag` is the version. An object a federation site forwarded is answered as the site's mirror (`/objects?site=`): the site's id, labelled `site`, `stale` while the site's uplink is lost, version 0; it cannot be changed here.")
            .ok::<ObjectView>(),
        Route::put("/api/v1/objects/{id}", update).permission("objects:write").doc("objects", "Replace an object", "`If-Match` required; `name` cannot change (422 `svc:validation/name`), nor a service's host.")
            .body::<ObjectBody>().ok::<Object>(),
        Route::delete("/api/v1/objects/{id}", delete).permission("objects:write").doc("objects", "Delete an object", "204; a host's services go with it.")
            .answers_empty(204),
        Route::get("/api/v1/objects/{id}/effective-config", effective)
            .permission("objects:read")
            .doc("objects", "Resolved spec and template chain", "`{spec, templateChain}`: templates apply depth first in the order named, later ones override earlier ones, the object's own spec overrides them all; `vars` merge key by key.")
            .ok::<EffectiveConfig>(),
        Route::get("/api/v1/objects/{id}/observers", observers)
            .permission("objects:read")
            .doc("objects", "Who observes the object and the verdict", "For an object with `spec.observers` (`{sites: <selector over the sites' labels and site>, minFailing: n | failingPct: p, for: <duration>, missingObserver: abstain | failing | ok}`): each observer site's vote (`failing`, `ok` or `abstains`) with the state and output the site forwarded of its own object of the same name (a service: of the same host name) and since when; `voting`, `failing`, `needed`, `agreedSince` (enough observers fail), `down` (they have for `for`) and `downAt`. An observer fails on a hard problem state; one whose uplink is lost votes as `missingObserver` says (abstaining by default), one that has not reported the object yet abstains. The verdict is the object's passive result (DOWN or CRITICAL once down, UP or OK once not enough fail; nobody voting keeps the state). An object without observers is 404.")
            .ok::<crate::model::observers::Verdict>(),
        Route::get("/api/v1/check-commands:builtins", builtins).permission("objects:read").doc("check-commands", "List the built-in checks", "The names a check command's or a service's `builtin` may take.")
            .ok::<Vec<String>>(),
        Route::post("/api/v1/check-commands:test", test_check).permission("checks:run").doc("check-commands", "Run a built-in check once", "`{builtin, address, args}`: the check runs now against `address` with `args` (no macros, no secrets; the default 30 s timeout) and answers `{label, state, output, perfdata, longOutput, tookMs}` (`longOutput`: the lines after the first, as a walk's rows); nothing is stored. An unknown `builtin` is 422 `svc:validation/builtin`; an empty `address` (except for `gsm`) 422 `svc:validation/address`.")
            .body::<TestCheck>().ok::<TestCheckResult>()
            .example(|| json!({"builtin": "tcp", "address": "192.0.2.10", "args": ["-p", "502"]})),
        Route::get("/api/v1/agent/checks", agent_checks).permission("objects:read").doc("agent", "A host's agent checks", "`host` (required): the services of that host whose `checkCommand` is `agent:exec:<plugin>`, which the server never runs: `{host, checks: [{service, command, args, intervalSeconds, timeoutSeconds}]}`, `command` the plugin, `args` with macros expanded except `$SECRET:name$`. The host's agent polls this and reports the results with `POST /results`. No such host: 404.")
            .query::<AgentQuery>().ok::<AgentChecks>(),
        Route::post("/api/v1/hosts/{id}/snmp-interfaces", snmp_interfaces).permission("objects:write").doc(
            "objects",
            "A host's SNMP interfaces, a service each",
            "Walks the interfaces table of the host's SNMP agent (issue 74) with `args`, an `snmp` check's flags for the agent (`-C $SECRET:snmp-community$`, `-P 3 -U … -A $SECRET:… -X $SECRET:…`; macros and secrets as in a check's, the host's address unless `-H`), and answers 200 `{interfaces: [{index, name, status, service, args}]}`: each interface with the service that watches it (`if <name>`, `snmp` with `args` and `--interface <name>`). With `create: true` each service is made (as `POST /objects:batch`, with `interval` seconds if given), with its `id`, or `error` where the name exists. An agent that does not answer or refuses the credentials is 502 `svc:checks/failed` with what happened; a host that is not the tenant's is 404.",
        )
            .body::<SnmpInterfacesRequest>().ok::<SnmpInterfaces>(),
        Route::post("/api/v1/objects/{id}/check-now", check_now).permission("checks:run").tool("check_now", "Run an object's check at once.", &[("id", "string", "the object's id")]).doc(
            "objects",
            "Run the object's check now",
            "202; the check runs at once (its regular cadence is unchanged) and its result goes through the state machine like any other.",
        )
            .no_body().answers_as(202, JSON, schemas::literal(schemas::status)),
        Route::post("/api/v1/objects:batch", batch).permission("objects:write").doc(
            "objects",
            "Create many objects",
            "Body `{hosts, services, mode}`; `mode` is `create` (default; an existing name is an item error) or `upsert`. Hosts are written first, in transactions of 500 items. 200 `{created, failed, results: [{name, id?, error?}]}`.",
        )
            .body::<BatchRequest>().ok::<BatchResult>(),
    ]
}

/// The object lists' query, also the UI's and a saved filter's.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListQuery {
    pub selector: Option<String>,
    pub host_id: Option<String>,
    pub folder: Option<String>,
    pub q: Option<String>,
    pub name: Option<String>,
    /// State labels, comma-separated (`CRITICAL,WARNING`, `DOWN`, `PENDING`), any case.
    pub state: Option<String>,
    pub with_state: Option<String>,
    /// A federation site: its mirrored objects instead of the tenant's own.
    pub site: Option<String>,
    #[serde(flatten)]
    pub page: PageQuery,
}

/// One page of the tenant's own objects (with their live state if `with_state`), or (with
/// `site`) of that federation site's as mirrored here: in id order, after `after`.
pub(crate) async fn object_page(
    st: &AppState,
    c: &Caller,
    site: Option<&str>,
    filter: ObjectFilter,
    after: Option<Uuid>,
    limit: usize,
    with_state: bool,
) -> Result<Vec<ObjectView>, Problem> {
    Ok(match site {
        Some(site) => {
            st.sites
                .mirrored_object_page(&c.principal, site, &filter, after, limit)
                .await?
        }
        None => {
            st.inventory
                .objects(&c.principal, filter, after, limit, with_state)
                .await?
        }
    })
}

impl ListQuery {
    /// The federation site named, if any.
    pub(crate) fn site(&self) -> Option<&str> {
        self.site
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The filter this query asks for over objects of `kind` (any when `None`).
    pub(crate) fn filter(&self, kind: Option<ObjectKind>) -> Result<ObjectFilter, Problem> {
        let given = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let selector: Selector = self.selector.as_deref().unwrap_or("").parse().map_err(
            |e: crate::model::SelectorError| Problem::validation("selector", e.to_string()),
        )?;
        let host_id = match given(&self.host_id) {
            Some(h) => Some(
                Uuid::parse_str(&h)
                    .map_err(|_| Problem::validation("host", "hostId is not an id"))?,
            ),
            None => None,
        };
        Ok(ObjectFilter {
            kind,
            selector,
            host_id,
            folder: given(&self.folder),
            q: given(&self.q).map(|q| q.trim().to_string()),
            name: given(&self.name),
            states: self
                .state
                .as_deref()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_uppercase)
                .collect(),
        })
    }
}

async fn list(
    st: AppState,
    c: Caller,
    q: ListQuery,
    kind: Option<ObjectKind>,
) -> Result<Json<Page<Value>>, Problem> {
    let page = q.page.resolve(OBJECTS);
    let filter = q.filter(kind)?;
    let after = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let with_state = q.with_state.as_deref() != Some("false");
    let views = object_page(&st, &c, q.site(), filter, after, page.limit, with_state).await?;
    let page = Page::new(views, &page, |v| v.object.id.to_string());
    Ok(Json(Page {
        items: page
            .items
            .iter()
            .map(|v| fault::encoded("an object", serde_json::to_value(v)))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

async fn list_all(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<impl IntoResponse, Problem> {
    list(st, c, q, None).await
}

async fn list_hosts(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<impl IntoResponse, Problem> {
    list(st, c, q, Some(ObjectKind::Host)).await
}

async fn list_services(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<impl IntoResponse, Problem> {
    list(st, c, q, Some(ObjectKind::Service)).await
}

fn one(o: &Object) -> impl IntoResponse + use<> {
    (
        etag(o.version),
        Json(fault::encoded("an object", serde_json::to_value(o))),
    )
}

/// `POST /hosts` makes a service when the body names a host; `POST /services` requires one.
async fn create(
    st: AppState,
    c: Caller,
    body: Value,
    service_route: bool,
) -> Result<impl IntoResponse, Problem> {
    let o = st
        .inventory
        .create_object(&c.principal, &c.actor, body, service_route)
        .await?;
    Ok((StatusCode::CREATED, one(&o)))
}

async fn create_host(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    create(st, c, body, false).await
}

async fn create_service(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    create(st, c, body, true).await
}

async fn get(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let id = path_id(&raw)?;
    let view = match st.inventory.view(&c.principal, id).await {
        Err(InventoryError::NotFound) => match st.sites.mirrored_object(&c.principal, id).await {
            Err(SiteError::NotFound) => return Err(InventoryError::NotFound.into()),
            mirrored => mirrored?.1,
        },
        own => own?,
    };
    Ok((
        etag(view.object.version),
        Json(fault::encoded("an object", serde_json::to_value(&view))),
    ))
}

async fn update(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
    IfMatch(v): IfMatch,
    ApiJson(body): ApiJson<Value>,
) -> Result<impl IntoResponse, Problem> {
    Ok(one(&st
        .inventory
        .update_object(&c.principal, &c.actor, path_id(&raw)?, v, body)
        .await?))
}

async fn delete(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.inventory
        .delete_object(&c.principal, &c.actor, path_id(&raw)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn effective(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.inventory.effective(&c.principal, path_id(&raw)?).await?,
    ))
}

async fn observers(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    let verdict = st.votes.verdict(&c.principal, path_id(&raw)?).await?;
    Ok(Json(verdict.ok_or_else(Problem::not_found)?))
}

async fn batch(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<BatchRequest>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.inventory.batch(&c.principal, &c.actor, req).await?))
}

async fn check_now(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.scheduler
        .check_now(&c.principal, &c.actor, path_id(&raw)?)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"status": "scheduled"})),
    ))
}

async fn snmp_interfaces(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
    ApiJson(req): ApiJson<SnmpInterfacesRequest>,
) -> Result<impl IntoResponse, Problem> {
    let (host, found) = st
        .scheduler
        .snmp_interfaces(&c.principal, &c.actor, path_id(&raw)?, &req.args)
        .await?;
    let mut interfaces = found.map_err(|why| Problem::new(Code::CheckFailed, why))?;
    if req.create {
        let services = interfaces
            .iter()
            .map(|i| i.service_body(&host, req.interval))
            .collect();
        let made = st
            .inventory
            .batch(
                &c.principal,
                &c.actor,
                BatchRequest {
                    hosts: Vec::new(),
                    services,
                    mode: None,
                },
            )
            .await?;
        for (i, r) in interfaces.iter_mut().zip(made.results) {
            (i.id, i.error) = (r.id, r.error);
        }
    }
    Ok(Json(SnmpInterfaces { interfaces }))
}

async fn builtins() -> impl IntoResponse {
    Json(BUILTIN_CHECKS)
}

async fn test_check(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<TestCheck>,
) -> Result<impl IntoResponse, Problem> {
    if !BUILTIN_CHECKS.contains(&req.builtin.as_str()) {
        return Err(Problem::validation(
            "builtin",
            format!("builtin must be one of {}", BUILTIN_CHECKS.join(", ")),
        ));
    }
    let address = req.address.trim();
    if address.is_empty() && req.builtin != "gsm" {
        return Err(Problem::validation("address", "address is required"));
    }
    let (outcome, took) = st
        .scheduler
        .test_builtin(&c.principal, &c.actor, &req.builtin, address, &req.args)
        .await?;
    let (output, long_output, perfdata) = crate::monitor::results::split_output(&outcome.output);
    Ok(Json(TestCheckResult {
        label: req.builtin,
        state: outcome.code,
        output,
        perfdata,
        long_output,
        took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    }))
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct AgentQuery {
    /// The host's name.
    host: Option<String>,
}

async fn agent_checks(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<AgentQuery>,
) -> Result<impl IntoResponse, Problem> {
    let host = q.host.unwrap_or_default();
    if host.trim().is_empty() {
        return Err(Problem::validation("host", "host names the agent's host"));
    }
    st.scheduler
        .agent_checks(c.principal.tenant, host.trim())
        .await?
        .map(Json)
        .ok_or_else(Problem::not_found)
}
