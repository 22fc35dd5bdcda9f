//! `email`: SMTP with STARTTLS (`config.tls: starttls`, the default, port 587), implicit TLS
//! (`tls`, port 465) or plain (`none`, port 25, for a trusted local relay), authenticated
//! with `username`/`password` when set, from `from` to the contact's address. The server's
//! certificate is checked against the system roots and `caFile` (a PEM file in `tls.caDirs`, for a private
//! CA); `tlsInsecure: "true"` skips the check. A template's first line `Subject: ...` is the
//! subject. SMTP 4xx answers and connection failures are retried; 5xx answers and TLS
//! failures are permanent.

use super::{Outgoing, SendError, Sent};
use crate::model::channel::{EmailConfig, SmtpTls};
use crate::runtime::paths::AllowedDirs;
use lettre::message::Mailbox;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(20);

/// The subject and body of the message: a template's `Subject:` first line, else the
/// severity and title.
fn subject_and_body(out: &Outgoing<'_>) -> (String, String) {
    let m = &out.delivery.payload;
    let text = out.text();
    if let Some(rest) = text.strip_prefix("Subject:") {
        let (subject, body) = rest.split_once('\n').unwrap_or((rest, ""));
        return (
            subject.trim().to_string(),
            body.trim_start_matches('\n').to_string(),
        );
    }
    let subject = match m.kind.as_str() {
        "test" => format!("svc test notification: {}", m.title),
        "status" => m.title.clone(),
        _ => format!("[{}] {}", m.severity.to_uppercase(), m.title),
    };
    (subject, text)
}

fn classify(e: &lettre::transport::smtp::Error) -> SendError {
    let message = format!("SMTP: {e}");
    if e.is_permanent() || e.is_tls() {
        SendError::permanent(message)
    } else {
        SendError::retry(message)
    }
}

pub async fn send(
    ca_files: &AllowedDirs,
    out: &Outgoing<'_>,
    config: &EmailConfig,
) -> Result<Sent, SendError> {
    let host = config.host.as_str();
    let from: Mailbox = config
        .from
        .as_deref()
        .ok_or_else(|| SendError::permanent("email channel has no from address"))?
        .parse()
        .map_err(|e| SendError::permanent(format!("from address: {e}")))?;
    let to: Mailbox = out
        .delivery
        .target
        .parse()
        .map_err(|e| SendError::permanent(format!("address {:?}: {e}", out.delivery.target)))?;
    let mut params = TlsParameters::builder(host.to_string())
        .dangerous_accept_invalid_certs(config.tls_insecure);
    if let Some(path) = &config.ca_file {
        let real = ca_files
            .resolve_file(path)
            .map_err(|why| SendError::permanent(format!("caFile: {why}")))?;
        let pem = tokio::fs::read(real)
            .await
            .map_err(|e| SendError::permanent(format!("caFile {path:?}: {e}")))?;
        let cert = Certificate::from_pem(&pem)
            .map_err(|e| SendError::permanent(format!("caFile {path:?}: {e}")))?;
        params = params.add_root_certificate(cert);
    }
    let params = || {
        params
            .clone()
            .build_rustls()
            .map_err(|e| SendError::permanent(format!("TLS: {e}")))
    };
    let tls = match config.tls {
        SmtpTls::None => Tls::None,
        SmtpTls::Tls => Tls::Wrapper(params()?),
        SmtpTls::Starttls => Tls::Required(params()?),
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(config.port)
        .tls(tls)
        .timeout(Some(TIMEOUT));
    if let Some(login) = &config.login {
        builder = builder.credentials(Credentials::new(
            login.username.clone(),
            login.password.clone(),
        ));
    }
    let (subject, body) = subject_and_body(out);
    let mut message = Message::builder()
        .from(from)
        .to(to)
        .subject(subject)
        .header(ContentType::TEXT_PLAIN);
    // A status page's mail to a subscriber: RFC 2369's link to leave, which RFC 8058's
    // one-click POST may follow without a page.
    if out.delivery.payload.kind == "status" && !out.delivery.payload.alert_url.is_empty() {
        let unsubscribe = format!("<{}>", out.delivery.payload.alert_url);
        for (name, value) in [
            ("List-Unsubscribe", unsubscribe.as_str()),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ] {
            message = message.raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str(name),
                value.to_string(),
            ));
        }
    }
    let message = message
        .body(body)
        .map_err(|e| SendError::permanent(format!("message: {e}")))?;
    let answer = builder
        .build()
        .send(message)
        .await
        .map_err(|e| classify(&e))?;
    let said = answer.message().collect::<Vec<_>>().join(" ");
    Ok(Sent {
        detail: format!("SMTP {}: {said}", answer.code()),
        answer: said,
        ..Sent::default()
    })
}
