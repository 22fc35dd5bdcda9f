//! Channels that are one HTTP request, in each provider's real format: `webhook` (JSON, signed
//! with HMAC-SHA256 in `X-Svc-Signature: sha256=<hex>` when `config.secret` is set, extra
//! headers from `config.header.<Name>`), Slack and Teams incoming webhooks, ntfy, Gotify and
//! the ServiceNow Table API.

use super::{Outgoing, SendError, Sent};
use crate::model::channel::{GotifyConfig, NtfyConfig, ServicenowConfig, WebhookConfig};
use crate::model::fault;
use crate::model::notify::Message;
use crate::model::template;
use hmac::{Hmac, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use sha2::Sha256;

/// Provider answers are quoted in errors up to this many characters.
const QUOTED: usize = 300;

/// The signature header of webhook deliveries.
pub const SIGNATURE_HEADER: &str = "X-Svc-Signature";

/// `sha256=<hex>` of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    format!(
        "sha256={}",
        super::super::acklink::hex(&mac.finalize().into_bytes())
    )
}

/// The default webhook body (SEMANTICS 6: version 1, the alert, the links).
pub fn webhook_body(m: &Message) -> Value {
    if let Some(event) = &m.event {
        return json!({"version": 1, "kind": "event", "event": event});
    }
    json!({
        "version": 1,
        "kind": m.kind,
        "alert": {
            "id": m.alert_id,
            "shortId": m.short_id,
            "title": m.title,
            "summary": m.summary,
            "severity": m.severity,
            "status": m.status,
            "labels": m.labels,
            "objectId": m.object_id,
        },
        "contact": m.contact,
        "policy": m.policy,
        "step": m.step,
        "repeat": m.repeat,
        "params": m.params,
        "ackUrl": m.ack_url,
        "alertUrl": m.alert_url,
        "at": m.at,
    })
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
    basic: Option<(&str, &str)>,
) -> Result<Sent, SendError> {
    let mut req = client.post(url).headers(headers).body(body);
    if let Some((user, password)) = basic {
        req = req.basic_auth(user, Some(password));
    }
    let resp = req.send().await.map_err(|e| {
        let what = if e.is_timeout() {
            "timed out"
        } else {
            "failed"
        };
        SendError::retry(format!(
            "request to {} {what}: {e}",
            crate::model::notify::mask(url)
        ))
    })?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let quoted: String = text.chars().take(QUOTED).collect();
    if status.is_success() {
        return Ok(Sent {
            detail: format!("HTTP {}: {quoted}", status.as_u16()),
            answer: text,
            ..Sent::default()
        });
    }
    if status.is_redirection() {
        return Err(SendError::permanent(format!(
            "HTTP {}: redirects are not followed",
            status.as_u16()
        )));
    }
    let message = format!("HTTP {}: {quoted}", status.as_u16());
    if status.is_server_error() || matches!(status.as_u16(), 408 | 429) {
        Err(SendError::retry(message))
    } else {
        Err(SendError::permanent(message))
    }
}

fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h
}

fn header(h: &mut HeaderMap, name: &str, value: &str) -> Result<(), SendError> {
    let name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| SendError::permanent(format!("{name:?} is not a header name")))?;
    let value = HeaderValue::from_str(value)
        .map_err(|_| SendError::permanent(format!("the value of header {name} is not valid")))?;
    h.insert(name, value);
    Ok(())
}

pub async fn webhook(
    client: &reqwest::Client,
    out: &Outgoing<'_>,
    config: &WebhookConfig,
) -> Result<Sent, SendError> {
    let url = out.url()?;
    let m = &out.delivery.payload;
    let mut headers = json_headers();
    let body = match out.template {
        Some(t) => {
            let text = template::render(t, &template::context(m));
            if serde_json::from_str::<Value>(&text).is_err() {
                header(&mut headers, "content-type", "text/plain; charset=utf-8")?;
            }
            text.into_bytes()
        }
        None => fault::encoded("a webhook body", serde_json::to_vec(&webhook_body(m))),
    };
    for (name, value) in &config.headers {
        header(&mut headers, name, value)?;
    }
    if let Some(secret) = &config.secret {
        header(&mut headers, SIGNATURE_HEADER, &signature(secret, &body))?;
    }
    header(&mut headers, "X-Svc-Delivery", &out.delivery.id.to_string())?;
    post(client, url, headers, body, None).await
}

pub async fn slack(client: &reqwest::Client, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let m = &out.delivery.payload;
    let mut text = out.text();
    if out.template.is_none() && !m.ack_url.is_empty() {
        text = format!(
            "*[{}] {}*\n{}\n<{}|Acknowledge> · <{}|Open>",
            m.severity.to_uppercase(),
            m.title,
            m.summary,
            m.ack_url,
            m.alert_url
        );
    }
    let body = json!({"text": text});
    post(
        client,
        out.url()?,
        json_headers(),
        fault::encoded("a request body", serde_json::to_vec(&body)),
        None,
    )
    .await
}

fn colour(severity: &str) -> &'static str {
    match severity {
        "critical" => "D32F2F",
        "warning" => "F9A825",
        "ok" => "2E7D32",
        _ => "1565C0",
    }
}

pub async fn teams(client: &reqwest::Client, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let m = &out.delivery.payload;
    let mut actions = Vec::new();
    for (name, uri) in [("Acknowledge", &m.ack_url), ("Open", &m.alert_url)] {
        if !uri.is_empty() {
            actions.push(json!({"@type": "OpenUri", "name": name,
                "targets": [{"os": "default", "uri": uri}]}));
        }
    }
    let body = json!({
        "@type": "MessageCard",
        "@context": "https://schema.org/extensions",
        "themeColor": colour(&m.severity),
        "summary": m.title,
        "title": format!("[{}] {}", m.severity.to_uppercase(), m.title),
        "text": out.text(),
        "potentialAction": actions,
    });
    post(
        client,
        out.url()?,
        json_headers(),
        fault::encoded("a request body", serde_json::to_vec(&body)),
        None,
    )
    .await
}

fn priority(severity: &str) -> u8 {
    match severity {
        "critical" => 5,
        "warning" => 4,
        _ => 3,
    }
}

/// ntfy: the text is the body of a POST to the topic URL; title, priority, click and an
/// acknowledge action in headers; `config.token` as a bearer token, or `username`/`password`.
pub async fn ntfy(
    client: &reqwest::Client,
    out: &Outgoing<'_>,
    config: &NtfyConfig,
) -> Result<Sent, SendError> {
    let m = &out.delivery.payload;
    let mut headers = HeaderMap::new();
    header(
        &mut headers,
        "Title",
        &format!("[{}] {}", m.severity.to_uppercase(), m.title),
    )?;
    header(&mut headers, "Priority", &priority(&m.severity).to_string())?;
    header(&mut headers, "Tags", &m.severity)?;
    if !m.alert_url.is_empty() {
        header(&mut headers, "Click", &m.alert_url)?;
    }
    if !m.ack_url.is_empty() {
        header(
            &mut headers,
            "Actions",
            &format!("http, Acknowledge, {}, method=POST, clear=true", m.ack_url),
        )?;
    }
    if let Some(token) = &config.token {
        header(&mut headers, "Authorization", &format!("Bearer {token}"))?;
    }
    let basic = config
        .login
        .as_ref()
        .map(|l| (l.username.as_str(), l.password.as_str()));
    post(client, out.url()?, headers, out.text().into_bytes(), basic).await
}

/// Gotify: `POST <url>/message` with the application token in `X-Gotify-Key`.
pub async fn gotify(
    client: &reqwest::Client,
    out: &Outgoing<'_>,
    config: &GotifyConfig,
) -> Result<Sent, SendError> {
    let m = &out.delivery.payload;
    let url = format!("{}/message", out.url()?.trim_end_matches('/'));
    let mut headers = json_headers();
    let token = config
        .token
        .as_deref()
        .ok_or_else(|| SendError::permanent("gotify channel has no token"))?;
    header(&mut headers, "X-Gotify-Key", token)?;
    let body = json!({
        "title": format!("[{}] {}", m.severity.to_uppercase(), m.title),
        "message": out.text(),
        "priority": priority(&m.severity) * 2,
        "extras": {"client::notification": {"click": {"url": m.ack_url}}},
    });
    post(
        client,
        &url,
        headers,
        fault::encoded("a request body", serde_json::to_vec(&body)),
        None,
    )
    .await
}

/// ServiceNow: an incident through the Table API (`POST <url>/api/now/table/<table>`,
/// default `incident`) with basic authentication; the answer's `sys_id` is the provider id.
pub async fn servicenow(
    client: &reqwest::Client,
    out: &Outgoing<'_>,
    config: &ServicenowConfig,
) -> Result<Sent, SendError> {
    let m = &out.delivery.payload;
    let table = &config.table;
    let url = format!("{}/api/now/table/{table}", out.url()?.trim_end_matches('/'));
    let urgency = match m.severity.as_str() {
        "critical" => "1",
        "warning" => "2",
        _ => "3",
    };
    let mut body = json!({
        "short_description": m.title,
        "description": out.text(),
        "urgency": urgency,
        "impact": urgency,
        "correlation_id": m.alert_id,
        "correlation_display": "svc",
    });
    let group = m
        .params
        .get("assignmentGroup")
        .map(String::as_str)
        .or(config.assignment_group.as_deref());
    if let Some(group) = group {
        body["assignment_group"] = json!(group);
    }
    let login = config
        .login
        .as_ref()
        .ok_or_else(|| SendError::permanent("servicenow channel has no username"))?;
    let basic = Some((login.username.as_str(), login.password.as_str()));
    let mut sent = post(
        client,
        &url,
        json_headers(),
        fault::encoded("a request body", serde_json::to_vec(&body)),
        basic,
    )
    .await?;
    let answer: Value = serde_json::from_str(&sent.answer).unwrap_or_default();
    sent.provider_id = answer["result"]["sys_id"].as_str().map(str::to_string);
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
