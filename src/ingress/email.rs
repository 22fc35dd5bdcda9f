//! E-mail (`event-sources` of type `email`): one poller per source reads an IMAP mailbox over
//! TLS every `config.pollInterval` (default 1m). `config.url` is `imaps://host[:993]` (TLS from
//! the start) or `imap://host[:143]` (STARTTLS; the session never goes on in the clear);
//! `config.username` and the password from `secretRef` (opened for each poll, so a changed
//! secret takes effect at the next) sign in; `config.mailbox` (default
//! INBOX) is read. Unseen mails (the first 1 MiB of each, at most 256 a poll) become one event
//! each, stored in one transaction, and only then are marked seen (and moved to `config.moveTo`).
//! A crash between the two reads them again: at least once, and the alert engine folds repeats
//! by dedup key. A mail the mapping cannot read is counted as refused and marked like the rest,
//! so it is not read forever. The server's certificate is checked against the system roots or
//! `config.caFile`; `tlsInsecure: "true"` skips the check. Each mail is the document
//! `{subject, from, to, date, messageId, text}` for the mapping; without a `summary` mapping
//! the subject is the summary, and the sender is the `from` label.

use super::mapping::Mapping;
use super::webhook::{map_document, severity_named};
use super::{Ingress, Normalized, Outcome, Source, trust};
use crate::model::event::Severity;
use crate::model::source_config::ImapConfig;
use crate::runtime::worker::Task;
use futures_util::TryStreamExt;
use rustls_pki_types::ServerName;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The most of a mail that is read, as for a webhook body (SPEC 8).
const MAIL_MAX: usize = 1 << 20;
/// Mails read in one poll at most; the rest wait for the next.
const PER_POLL: usize = 256;
/// One whole poll (connect, sign in, read, store, mark) at most.
const POLL_TIMEOUT: Duration = Duration::from_secs(120);

/// Where to read and how, from a source's `config`, with the trust for its server.
struct Mailbox {
    imap: ImapConfig,
    tls: TlsConnector,
}

fn mailbox(source: &Source, secret_ref: &Option<String>) -> Result<Mailbox, String> {
    Ok(Mailbox {
        imap: ImapConfig::of(&source.config, secret_ref)?,
        tls: TlsConnector::from(Arc::new(trust(source)?)),
    })
}

type Session = async_imap::Session<TlsStream<TcpStream>>;

/// A signed-in session on the mailbox's server.
async fn sign_in(m: &Mailbox, password: &str) -> Result<Session, String> {
    let tcp = TcpStream::connect((m.imap.host.as_str(), m.imap.port))
        .await
        .map_err(|e| format!("connect {}:{}: {e}", m.imap.host, m.imap.port))?;
    let name = ServerName::try_from(m.imap.host.clone()).map_err(|e| e.to_string())?;
    let tcp = if m.imap.starttls {
        let mut plain = async_imap::Client::new(tcp);
        greeting(&mut plain).await?;
        plain
            .run_command_and_check_ok("STARTTLS", None)
            .await
            .map_err(|e| format!("STARTTLS: {e}"))?;
        plain.into_inner()
    } else {
        tcp
    };
    let tls = m
        .tls
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let mut client = async_imap::Client::new(tls);
    if !m.imap.starttls {
        greeting(&mut client).await?;
    }
    client
        .login(&m.imap.username, password)
        .await
        .map_err(|(e, _)| format!("login as {}: {e}", m.imap.username))
}

async fn greeting<T>(client: &mut async_imap::Client<T>) -> Result<(), String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + std::fmt::Debug + Send,
{
    match client.read_response().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("the server closed the connection".into()),
        Err(e) => Err(format!("greeting: {e}")),
    }
}

/// One mail as an event.
fn mail_event(source: &Source, mapping: &Mapping, raw: &[u8]) -> Result<Normalized, String> {
    let mail = mail_parser::MessageParser::default()
        .parse(raw)
        .ok_or("not an e-mail message")?;
    let from = mail
        .from()
        .and_then(|a| a.first())
        .and_then(|a| a.address())
        .unwrap_or_default()
        .to_string();
    let to: Vec<&str> = mail
        .to()
        .map(|list| list.iter().filter_map(|a| a.address()).collect())
        .unwrap_or_default();
    let subject = mail.subject().unwrap_or_default().trim().to_string();
    let doc = json!({
        "subject": subject,
        "from": from,
        "to": to,
        "date": mail.date().map(|d| d.to_rfc3339()),
        "messageId": mail.message_id(),
        "text": mail.body_text(0).map(|t| t.trim().to_string()).unwrap_or_default(),
    });
    let default = source
        .config
        .get("severity")
        .and_then(|s| severity_named(s))
        .unwrap_or(Severity::Warning);
    let mut event =
        map_document(&doc, mapping, &source.name, default).map_err(|e| e.to_string())?;
    if !mapping.maps("summary") && !subject.is_empty() {
        event.summary = subject;
    }
    if !from.is_empty() {
        event.labels.entry("from".into()).or_insert(from);
    }
    Ok(event)
}

impl Ingress {
    /// Polls one source until the task is aborted; a failed poll is retried sooner (1 s
    /// doubling up to the interval, with jitter).
    async fn poll_mailbox(self: Arc<Self>, source: Source, mapping: Arc<Mapping>, m: Arc<Mailbox>) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let wait = match tokio::time::timeout(
                POLL_TIMEOUT,
                self.read_mails(&source, &mapping, &m),
            )
            .await
            .unwrap_or_else(|_| Err("the poll timed out".into()))
            {
                Ok(more) => {
                    backoff = Duration::from_secs(1);
                    if more { Duration::ZERO } else { m.imap.every }
                }
                Err(why) => {
                    tracing::warn!(source = %source.name, host = %m.imap.host, %why, "mailbox not read");
                    let jitter = f64::from(getrandom::u32().unwrap_or(0) % 1000) / 1000.0;
                    let wait = backoff.min(m.imap.every).mul_f64(0.75 + jitter / 2.0);
                    backoff = (backoff * 2).min(m.imap.every);
                    wait
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// Reads, stores and marks the unseen mails once; whether more are waiting.
    async fn read_mails(
        &self,
        source: &Source,
        mapping: &Mapping,
        m: &Mailbox,
    ) -> Result<bool, String> {
        let password = self
            .secrets
            .secret(source.tenant, &m.imap.secret_ref)
            .await
            .ok_or_else(|| format!("the secret {:?} is not set", m.imap.secret_ref))?;
        let mut session = sign_in(m, &password).await?;
        session
            .select(&m.imap.folder)
            .await
            .map_err(|e| format!("select {}: {e}", m.imap.folder))?;
        let mut uids: Vec<u32> = session
            .uid_search("UNSEEN")
            .await
            .map_err(|e| format!("search: {e}"))?
            .into_iter()
            .collect();
        uids.sort_unstable();
        let more = uids.len() > PER_POLL;
        uids.truncate(PER_POLL);
        if !uids.is_empty() {
            let set = uids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let fetched: Vec<_> = session
                .uid_fetch(&set, format!("(UID BODY.PEEK[]<0.{MAIL_MAX}>)"))
                .await
                .map_err(|e| format!("fetch: {e}"))?
                .try_collect()
                .await
                .map_err(|e| format!("fetch: {e}"))?;
            let mut events = Vec::with_capacity(fetched.len());
            for mail in &fetched {
                match mail
                    .body()
                    .ok_or_else(|| "no body".to_string())
                    .and_then(|raw| mail_event(source, mapping, raw))
                {
                    Ok(event) => events.push(event),
                    Err(why) => {
                        self.count(&source.name, Outcome::Refused);
                        tracing::warn!(source = %source.name, uid = ?mail.uid, %why, "mail not read");
                    }
                }
            }
            if !events.is_empty() {
                self.record_all(source, events)
                    .await
                    .map_err(|e| format!("store: {e}"))?;
            }
            session
                .uid_store(&set, "+FLAGS.SILENT (\\Seen)")
                .await
                .map_err(|e| format!("mark seen: {e}"))?
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| format!("mark seen: {e}"))?;
            if let Some(folder) = &m.imap.move_to {
                session
                    .uid_mv(&set, folder)
                    .await
                    .map_err(|e| format!("move to {folder}: {e}"))?;
            }
        }
        session.logout().await.map_err(|e| format!("logout: {e}"))?;
        Ok(more)
    }
}

/// The poller of an `email` source, as a worker.
pub(super) fn start(
    ingress: &Arc<Ingress>,
    source: Source,
    mapping: &BTreeMap<String, String>,
    secret_ref: &Option<String>,
) -> Result<Task, String> {
    let m = Arc::new(mailbox(&source, secret_ref)?);
    let mapping = Arc::new(Mapping::compile(mapping)?);
    let ingress = ingress.clone();
    Ok(super::listeners::task(&source.clone(), move || {
        Box::pin(
            ingress
                .clone()
                .poll_mailbox(source.clone(), mapping.clone(), m.clone()),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(config: &[(&str, &str)]) -> Source {
        Source::configured("vendor", config)
    }

    #[test]
    fn a_mail_is_summarised_by_its_subject_and_labelled_by_its_sender() {
        let raw = b"From: PLC <plc@plant.example>\r\nTo: ops@example.org\r\n\
            Subject: =?UTF-8?Q?Pumpe_=C3=BCberhitzt?=\r\nMessage-ID: <1@plant>\r\n\r\nPump 1 at 95 C\r\n";
        let e = mail_event(&source(&[]), &Mapping::default(), raw).unwrap();
        assert_eq!(e.summary, "Pumpe überhitzt");
        assert_eq!(e.labels["from"], "plc@plant.example");
        assert_eq!(e.severity, Severity::Warning);
        assert_eq!(e.original["text"], "Pump 1 at 95 C");
        assert_eq!(e.original["to"], json!(["ops@example.org"]));
        assert_eq!(e.original["messageId"], "1@plant");
    }
}
