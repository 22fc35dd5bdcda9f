//! Network discovery routes (the reference's `/discovery/scans`).

use super::AppState;
use super::access::Caller;
use super::error::Problem;
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{DISCOVERY_SCANS, Page, PageQuery};
use super::router::Route;
use crate::model::discovery::{DiscoveryScan, ScanRequest};
use crate::monitor::discovery::ScanError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;
use uuid::Uuid;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/discovery/scans", list).permission("objects:read").doc(
            "discovery",
            "List scans",
            "The tenant's scans, newest first (the newest 50 are kept).",
        )
            .query::<PageQuery>().ok::<Page<DiscoveryScan>>(),
        Route::post("/api/v1/discovery/scans", start).permission("config:write").doc(
            "discovery",
            "Start a network discovery scan",
            "202 with the scan, `running`: a TCP connect sweep of `cidr` (at most a /20, IPv6 a /116) on `ports` (default 22, 23, 80, 161, 443, 502, 8080, 8443), 1 s per attempt, 256 at once; port 161 is probed with SNMP over UDP instead (a v2c GET with `snmpCommunity`, default `public`, used for the scan only and never stored; else an SNMPv3 engine discovery), and an agent that answers gets `snmp` checks suggested, one per interface when the community answered. `found` lists the addresses that accepted a connection with their open ports and suggested checks; `probed` of `probes` tells the progress (kept at most once a second, `updatedAt`) until `status` is `done`; a scan whose process stopped before it finished reads as `failed`, with `error`.",
        )
            .body::<ScanRequest>()
            .example(|| json!({"cidr": "192.168.10.0/24", "ports": [22, 80, 443, 502]}))
            .answers::<DiscoveryScan>(202),
        Route::get("/api/v1/discovery/scans/{id}", get).permission("objects:read").doc(
            "discovery",
            "Scan status and suggestions",
            "One scan; another tenant's or a forgotten one is 404.",
        )
            .ok::<DiscoveryScan>(),
    ]
}

async fn list(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.resolve(DISCOVERY_SCANS);
    let cursor = page.cursor.as_deref().and_then(|c| Uuid::parse_str(c).ok());
    let items = st
        .discovery
        .list(c.principal.tenant, cursor, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |s: &DiscoveryScan| {
        s.id.to_string()
    })))
}

async fn start(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<ScanRequest>,
) -> Result<impl IntoResponse, Problem> {
    let scan = st
        .discovery
        .start(c.principal.tenant, req)
        .await
        .map_err(|e| match e {
            ScanError::Invalid(i) => Problem::validation(i.field, i.detail),
            ScanError::Store(e) => e.into(),
        })?;
    Ok((StatusCode::ACCEPTED, Json(scan)))
}

async fn get(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.discovery
        .get(c.principal.tenant, path_id(&raw)?)
        .await?
        .map(Json)
        .ok_or_else(Problem::not_found)
}
