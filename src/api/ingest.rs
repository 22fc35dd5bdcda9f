//! `POST /api/v1/ingest/{source}`: inbound webhooks, authenticated by the event source itself.

use super::AppState;
use super::access::bearer_value;
use super::error::{Code, Problem};
use super::extract::{JSON_BODY_LIMIT, read_body};
use super::router::{JSON, Route};
use super::schemas;
use crate::ingress::webhook::Credentials;
use crate::model::base64;
use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

pub fn routes() -> Vec<Route> {
    vec![Route::post("/api/v1/ingest/{source}", ingest).raw().doc(
        "ingress",
        "Ingest an event",
        "Inbound webhook of the `event-sources` document `{source}` (types `webhook`, `alertmanager`; others take the webhook shape). Event-source names are unique across tenants (a name another tenant holds is 409 `svc:conflict/duplicate` at save), so the name alone finds the source. Authenticated by the source's `authMode`, by the source's own secret only (an API token of the tenant does not pass): `token` (`Authorization: Bearer <secret>` or `X-Svc-Token`), `hmac` (`X-Svc-Signature: sha256=<hex HMAC-SHA256 of the body>`), `basic` (the secret as password, `config.username` if set), `none`; the secret is the tenant secret named by `secretRef`. Body: JSON up to 1 MiB, an object or an array of objects mapped by the source's `mapping` (JSON paths for `severity`, `summary`, `dedupKey`, `labels`, `resolve`; without one the same-named keys, `title`/`message`/`text` for the summary), or an Alertmanager version 4 payload (one event per alert: labels, `annotations.summary`, `fingerprint` as dedup key, `resolved` as resolve). 202 `{accepted, eventIds}`: one `ingress` event each, all stored or none. 404 `svc:ingress/unknown-source`, 403 `svc:ingress/disabled`, 401 `svc:ingress/auth`, 413 `svc:ingress/size`, 422 `svc:ingress/format` (not JSON, not an Alertmanager payload) or `svc:ingress/mapping` (the reason), 429 `svc:ingress/rate` with `Retry-After: 5` (token bucket per source: `rateLimit`/s, `burst`, 50 and 200 by default).",
    )
            .body::<serde_json::Value>().answers_as(202, JSON, schemas::literal(schemas::ingest_accepted))]
}

fn credentials(headers: &HeaderMap) -> Credentials {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let authorization = get(header::AUTHORIZATION.as_str()).unwrap_or_default();
    let bearer = bearer_value(headers).filter(|t| !t.starts_with("svc_"));
    let basic = authorization
        .strip_prefix("Basic ")
        .and_then(base64::decode)
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|pair| {
            pair.split_once(':')
                .map(|(u, p)| (u.to_string(), p.to_string()))
        });
    Credentials {
        token: bearer.or(get("x-svc-token")).map(str::to_string),
        basic,
        signature: get("x-svc-signature")
            .or(get("x-hub-signature-256"))
            .map(str::to_string),
    }
}

async fn ingest(
    State(st): State<AppState>,
    Path(source): Path<String>,
    req: Request,
) -> Result<impl IntoResponse, Problem> {
    let creds = credentials(req.headers());
    let body = read_body(req, JSON_BODY_LIMIT, Code::IngressSize).await?;
    let ids = st.ingress.ingest(&source, creds, &body).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"accepted": ids.len(), "eventIds": ids})),
    ))
}
