//! Identity routes: whoami, API tokens, tenants, the audit log.

use super::AppState;
use super::access::Caller;
use super::error::{Code, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, path_id};
use super::pagination::{AUDIT, Page, PageQuery};
use super::router::{PROBLEM, Route};
use super::schemas;
use crate::auth::directory::{Directory, DirectoryStatus, SyncResult};
use crate::model::Tenant;
use crate::model::audit::AuditFilter;
use crate::model::audit::{AuditEntry, AuditVerification};
use crate::model::identity::{ApiToken, MintedToken, Whoami};
use crate::model::identity::{PersonalTokenRequest, TenantChange, TenantRequest, TokenRequest};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/whoami", whoami)
            .identity()
            .doc("identity", "Who am I", "`{actorType, actorId, name, tenantId, permissions[]}`; `tenantId` is the home tenant.")
            .ok::<Whoami>(),
        Route::get("/api/v1/api-tokens", list_tokens)
            .permission("admin:tokens")
            .doc("api-tokens", "List API tokens (no secrets)", "All tokens of the acting tenant, without paging.")
            .ok::<Page<ApiToken>>(),
        Route::post("/api/v1/api-tokens", mint_token).permission("admin:tokens").doc(
            "api-tokens",
            "Create API token (secret shown once)",
            "Body `{name, scopes?, roles?, ipBind?, expiresAt?, aiAgent?, site?}`; scopes or roles are required (422 `svc:validation/token`); `ipBind` entries are CIDRs or addresses (422 `svc:validation/cidr`); `site` binds the token to one federation site (its `sites:connect` routes for other sites are 403). A token cannot carry permissions its creator lacks (403). 201 `{token, meta}`.",
        )
            .body::<TokenRequest>().answers::<MintedToken>(201)
            .example(|| json!({"name": "ci-deploy", "scopes": ["objects:read", "objects:write"], "expiresAt": "2027-01-01T00:00:00Z"})),
        Route::delete("/api/v1/api-tokens/{id}", revoke_token)
            .permission("admin:tokens")
            .doc("api-tokens", "Revoke API token", "204; the secret stops working at once.")
            .answers_empty(204),
        Route::post("/api/v1/api-tokens/{id}:rotate", rotate_token)
            .permission("admin:tokens")
            .doc("api-tokens", "Rotate token (new secret, old revoked)", "200 `{token, meta}`; the old secret dies at once.")
            .no_body().ok::<MintedToken>(),
        Route::get("/api/v1/users/me/api-tokens", list_personal_tokens)
            .identity()
            .doc("api-tokens", "List my personal tokens", "The tokens that act as the caller's user (a signed-in user, or one of their personal tokens); 401 for other credentials. Without paging.")
            .ok::<Page<ApiToken>>(),
        Route::post("/api/v1/users/me/api-tokens", mint_personal_token).identity().doc(
            "api-tokens",
            "Create a personal token (secret shown once)",
            "Body `{name, expiresAt?}`: a token that acts as the caller's user, with the user's roles as they are at each request; it stops working when the user is disabled or deleted. For a signed-in user or one of their personal tokens (`svc login` uses it); 401 for other credentials. 201 `{token, meta}` with `meta.owner`.",
        )
            .body::<PersonalTokenRequest>().answers::<MintedToken>(201)
            .example(|| json!({"name": "svc-cli on gw-north"})),
        Route::delete("/api/v1/users/me/api-tokens/{id}", revoke_personal_token)
            .identity()
            .doc("api-tokens", "Revoke one of my personal tokens", "204; another user's token is 404 (`svc logout` revokes its own this way).")
            .answers_empty(204),
        Route::get("/api/v1/tenants", list_tenants)
            .permission("admin:tenants")
            .doc("tenants", "List tenants", "All tenants, without paging.")
            .ok::<Page<Tenant>>(),
        Route::post("/api/v1/tenants", create_tenant)
            .permission("admin:tenants")
            .doc("tenants", "Create tenant", "Body `{name, slug, emailDomains?}`; slug of lower-case letters, digits and '-'; 409 `svc:conflict/duplicate` for a taken slug. `emailDomains` (an addition) claims e-mail domains for the tenant: an address at a claimed domain may be held only by the claiming tenant's users, and a tenant that claims domains holds addresses at them only (422 `svc:validation/email` otherwise). A domain another tenant claims or has users at is 409 `svc:conflict/duplicate`.")
            .body::<TenantRequest>().answers::<Tenant>(201),
        Route::put("/api/v1/tenants/{id}", change_tenant)
            .permission("admin:tenants")
            .doc("tenants", "Update tenant", "An addition. Body `{name?, emailDomains?}`: the fields given change; no If-Match (last write wins). `emailDomains` as on create; users already holding addresses outside a tenant's new claims keep them.")
            .body::<TenantChange>().ok::<Tenant>(),
        Route::get("/api/v1/directory/status", directory_status).permission("admin:users").doc(
            "directory",
            "Directory (LDAP) sync status",
            "`{configured, url, syncInterval, lastSyncAt, lastResult, lastError}` of the last sync since the server started. The directory's accounts are the default tenant's: in another tenant 403. 501 `svc:directory/unconfigured` without `ldap.url`.",
        )
            .ok::<DirectoryStatus>()
            .answers_as(501, PROBLEM, schemas::literal(schemas::problem)),
        Route::post("/api/v1/directory:sync", directory_sync).permission("admin:users").doc(
            "directory",
            "Run a directory (LDAP) sync now",
            "Reads every person under `ldap.baseDn` and brings the default tenant's directory accounts in line: `{created, updated, unchanged, disabled, skipped, warnings}`; audited as `directory.sync` with each account's change. 502 `svc:directory/sync` when the directory cannot be reached or read (nothing is changed); in another tenant 403; 501 `svc:directory/unconfigured` without `ldap.url`.",
        )
            .no_body()
            .ok::<SyncResult>()
            .answers_as(501, PROBLEM, schemas::literal(schemas::problem))
            .answers_as(502, PROBLEM, schemas::literal(schemas::problem)),
        Route::get("/api/v1/audit", audit_list).permission("admin:audit").doc(
            "audit",
            "Search audit log",
            "Filters actorId, actorType, action, resource, afterSeq (only newer entries); seq descending; limit 200 by default, at most 5000; `cursor` is the last seq of the previous page.",
        )
            .query::<AuditQuery>().ok::<Page<AuditEntry>>(),
        Route::get("/api/v1/audit:export", audit_export)
            .permission("admin:audit")
            .no_deadline()
            .doc("audit", "NDJSON audit export (SIEM)", "The acting tenant's entries, oldest first, one JSON object per line.")
            .answers_text(200, "application/x-ndjson"),
        Route::post("/api/v1/audit:verify", audit_verify).permission("admin:audit").doc(
            "audit",
            "Verify the audit hash chain",
            "`{intact, verified, error?}`: walks the whole chain and compares it with the checkpoint file beside the database.",
        )
            .no_body().ok::<AuditVerification>(),
    ]
}

/// The directory, for a caller acting in the default tenant, whose accounts it holds.
fn directory_for(st: &AppState, c: &Caller) -> Result<Arc<Directory>, Problem> {
    let Some(directory) = st.directory.clone() else {
        return Err(Problem::new(
            Code::DirectoryUnconfigured,
            "LDAP is not configured (ldap.url)",
        ));
    };
    if !(c.principal.instance && c.principal.tenant == c.principal.home_tenant) {
        return Err(Problem::new(
            Code::AuthForbidden,
            "the directory's accounts belong to the default tenant",
        ));
    }
    Ok(directory)
}

async fn directory_status(
    State(st): State<AppState>,
    c: Caller,
) -> Result<Json<DirectoryStatus>, Problem> {
    Ok(Json(directory_for(&st, &c)?.status()))
}

async fn directory_sync(
    State(st): State<AppState>,
    c: Caller,
) -> Result<Json<SyncResult>, Problem> {
    let directory = directory_for(&st, &c)?;
    Ok(Json(
        st.auth.sync_directory(&directory, &c.actor, true).await?,
    ))
}

async fn whoami(c: Caller) -> impl IntoResponse {
    Json(c.principal.whoami())
}

async fn list_tokens(State(st): State<AppState>, c: Caller) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.auth.tokens(&c.principal).await?)))
}

async fn mint_token(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<TokenRequest>,
) -> Result<impl IntoResponse, Problem> {
    let minted = st.auth.mint(&c.principal, &c.actor, req).await?;
    Ok((StatusCode::CREATED, Json(minted)))
}

async fn revoke_token(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.auth
        .revoke(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_personal_tokens(
    State(st): State<AppState>,
    c: Caller,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(
        st.auth.personal_tokens(&c.principal).await?,
    )))
}

async fn mint_personal_token(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<PersonalTokenRequest>,
) -> Result<impl IntoResponse, Problem> {
    let minted = st.auth.mint_personal(&c.principal, &c.actor, req).await?;
    Ok((StatusCode::CREATED, Json(minted)))
}

async fn revoke_personal_token(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    st.auth
        .revoke_personal(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn rotate_token(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.auth
            .rotate(&c.principal, &c.actor, path_id(&id)?)
            .await?,
    ))
}

async fn list_tenants(State(st): State<AppState>) -> Result<impl IntoResponse, Problem> {
    Ok(Json(Page::all(st.auth.tenants().await?)))
}

async fn create_tenant(
    State(st): State<AppState>,
    c: Caller,
    ApiJson(req): ApiJson<TenantRequest>,
) -> Result<impl IntoResponse, Problem> {
    let tenant = st.auth.create_tenant(&c.actor, req).await?;
    Ok((StatusCode::CREATED, Json(tenant)))
}

async fn change_tenant(
    State(st): State<AppState>,
    c: Caller,
    ApiPath(raw): ApiPath<String>,
    ApiJson(req): ApiJson<TenantChange>,
) -> Result<impl IntoResponse, Problem> {
    Ok(Json(
        st.auth.change_tenant(&c.actor, path_id(&raw)?, req).await?,
    ))
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct AuditQuery {
    actor_id: Option<String>,
    actor_type: Option<String>,
    action: Option<String>,
    resource: Option<String>,
    after_seq: Option<String>,
    #[serde(flatten)]
    page: PageQuery,
}

async fn audit_list(
    State(st): State<AppState>,
    c: Caller,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<impl IntoResponse, Problem> {
    let page = q.page.resolve(AUDIT);
    let filter = AuditFilter {
        actor_id: q.actor_id,
        actor_type: q.actor_type,
        action: q.action,
        resource: q.resource,
        after_seq: q.after_seq.and_then(|s| s.parse().ok()),
        before_seq: page.cursor.as_deref().and_then(|s| s.parse().ok()),
        tenant_id: None,
    };
    let items = st
        .auth
        .audit_entries(&c.principal, filter, page.limit)
        .await?;
    Ok(Json(Page::new(items, &page, |e| e.seq.to_string())))
}

/// Streams the export page by page so a long log is never held in memory whole.
async fn audit_export(State(st): State<AppState>, c: Caller) -> Response {
    const PAGE: usize = 1000;
    let stream = futures_util::stream::unfold(Some(0u64), move |after| {
        let st = st.clone();
        let principal = c.principal.clone();
        async move {
            let after = after?;
            match st.auth.audit_page(&principal, after, PAGE).await {
                Ok(entries) if entries.is_empty() => None,
                Ok(entries) => {
                    let last = entries.last().map(|e| e.seq);
                    let mut chunk = Vec::new();
                    for e in &entries {
                        if serde_json::to_writer(&mut chunk, e).is_ok() {
                            chunk.push(b'\n');
                        }
                    }
                    let next = if entries.len() < PAGE { None } else { last };
                    Some((Ok::<_, std::io::Error>(chunk), next))
                }
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response()
}

async fn audit_verify(State(st): State<AppState>) -> Result<impl IntoResponse, Problem> {
    Ok(Json(st.auth.verify_audit().await?))
}
