//! Channel types: how a delivery becomes a request to a provider. Each send says whether a
//! failure is worth retrying (network errors, timeouts, HTTP 408, 429 and 5xx) or permanent
//! (any other refusal), which decides between the retry policy and the contact's next channel.

mod email;
pub mod http;
mod pager;
pub mod phone;
mod script;
pub mod webpush;

use crate::hw::Devices;
use crate::hw::espa::Pager;
use crate::hw::gsm::Modem;
use crate::model::channel::ChannelConfig;
use crate::model::notify::{ChannelKind, Delivery, Message};
use crate::model::secret::{REFERENCE_PREFIX, mask_values, reference_allowed};
use crate::model::template;
use crate::runtime::paths::AllowedDirs;
use crate::runtime::{AlertAction, SecretSource};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one send may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendError {
    pub retryable: bool,
    pub message: String,
}

impl SendError {
    pub fn retry(message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            message: message.into(),
        }
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            retryable: false,
            message: message.into(),
        }
    }
}

/// A successful send: the provider's id for it, if it gave one, and what it said.
#[derive(Debug, Default)]
pub struct Sent {
    pub provider_id: Option<String>,
    pub detail: String,
    /// The provider's whole answer.
    pub answer: String,
    /// What the person reached asked for (a key pressed on a call).
    pub action: Option<AlertAction>,
}

/// What channels send through: the HTTP client, and the local devices when configured.
#[derive(Clone)]
pub struct Senders {
    pub http: reqwest::Client,
    pub modem: Option<Modem>,
    pub pager: Option<Pager>,
    /// Where script channels may run programs from.
    pub scripts: AllowedDirs,
    /// Where an e-mail channel's `caFile` may be.
    pub ca_files: AllowedDirs,
    /// The push services a `push` channel may reach (`notify.pushServices`).
    pub push_services: Vec<String>,
}

impl Senders {
    /// The HTTP client (no redirects followed, every request under a deadline) and the local
    /// devices and scripts. Fails when the client cannot be built (no TLS roots): a default
    /// client would follow redirects.
    pub fn new(
        devices: Devices,
        scripts: AllowedDirs,
        ca_files: AllowedDirs,
        push_services: Vec<String>,
    ) -> Result<Self, reqwest::Error> {
        let http = crate::runtime::outbound::client(SEND_TIMEOUT).build()?;
        Ok(Self {
            http,
            modem: devices.modem,
            pager: devices.pager,
            scripts,
            ca_files,
            push_services,
        })
    }
}

impl Senders {
    /// Whether this process can send a channel type's deliveries: SMS and calls need its
    /// modem, ESPA its pager; the rest go over the network.
    pub fn can_send(&self, kind: ChannelKind) -> bool {
        match kind {
            ChannelKind::Sms | ChannelKind::Voice => self.modem.is_some(),
            ChannelKind::Espa => self.pager.is_some(),
            ChannelKind::Email
            | ChannelKind::Push
            | ChannelKind::Webhook
            | ChannelKind::Slack
            | ChannelKind::Teams
            | ChannelKind::Ntfy
            | ChannelKind::Gotify
            | ChannelKind::Servicenow
            | ChannelKind::Script => true,
        }
    }
}

/// What a channel needs to send: its type, its configuration with secrets opened, its
/// template.
pub struct Outgoing<'a> {
    pub config: &'a ChannelConfig,
    pub template: Option<&'a str>,
    pub delivery: &'a Delivery,
    /// A voice channel's text-to-speech profile.
    pub speech: Option<&'a phone::Speech>,
    /// A push channel's key and the subscriptions of the contact's user.
    pub push: Option<&'a webpush::Recipient>,
}

impl Outgoing<'_> {
    pub fn kind(&self) -> ChannelKind {
        self.config.kind()
    }

    /// The channel's URL: the delivery's own (a bare action URL), else `config.url`.
    pub fn url(&self) -> Result<&str, SendError> {
        if !self.delivery.url.is_empty() {
            return Ok(&self.delivery.url);
        }
        self.config.url().ok_or_else(|| {
            SendError::permanent(format!("channel {:?} has no url", self.delivery.channel))
        })
    }

    /// The message as text: the channel's template, else the default for its type.
    pub fn text(&self) -> String {
        match self.template {
            // A status page's mail is written whole by its page, to people outside: a
            // channel's template (written for the on-call) does not apply.
            Some(t) if self.delivery.payload.kind != "status" => {
                template::render(t, &template::context(&self.delivery.payload))
            }
            _ => default_text(&self.delivery.payload),
        }
    }
}

/// The default text of a message: severity and title, the summary, and the ack link.
pub fn default_text(m: &Message) -> String {
    match m.kind.as_str() {
        "test" => format!("svc test notification: {}", m.title),
        "event" => m.title.clone(),
        "status" => m.summary.clone(),
        _ => {
            let mut out = format!("[{}] {}", m.severity.to_uppercase(), m.title);
            if !m.summary.is_empty() {
                out.push('\n');
                out.push_str(&m.summary);
            }
            if !m.ack_url.is_empty() {
                out.push_str("\nAcknowledge: ");
                out.push_str(&m.ack_url);
            }
            out
        }
    }
}

/// A channel's configuration with its secrets opened, and the values opened, to be masked in
/// whatever the send brings back.
pub struct Opened {
    pub config: BTreeMap<String, String>,
    values: Vec<String>,
}

impl Opened {
    /// A send's outcome with every opened secret value masked in its texts.
    pub fn masked(&self, outcome: Result<Sent, SendError>) -> Result<Sent, SendError> {
        let mask = |text: &str| mask_values(text, self.values.iter().map(String::as_str));
        match outcome {
            Ok(sent) => Ok(Sent {
                detail: mask(&sent.detail),
                answer: mask(&sent.answer),
                ..sent
            }),
            Err(e) => Err(SendError {
                message: mask(&e.message),
                ..e
            }),
        }
    }
}

/// Replaces every `$SECRET:name$` in the channel's configuration with the tenant's secret;
/// one that is not set, or stands where no secret may (a URL's host, say), is a permanent
/// failure.
pub async fn open_secrets(
    secrets: &Arc<dyn SecretSource>,
    tenant: uuid::Uuid,
    config: &BTreeMap<String, String>,
) -> Result<Opened, SendError> {
    let mut out = BTreeMap::new();
    let mut values = Vec::new();
    for (k, v) in config {
        if !reference_allowed(k, v) {
            return Err(SendError::permanent(format!(
                "config.{k} names a secret where none may stand"
            )));
        }
        let mut value = String::new();
        let mut rest = v.as_str();
        while let Some(start) = rest.find(REFERENCE_PREFIX) {
            let tail = &rest[start + REFERENCE_PREFIX.len()..];
            let Some(end) = tail.find('$') else {
                break;
            };
            let name = &tail[..end];
            let secret = secrets
                .secret(tenant, name)
                .await
                .ok_or_else(|| SendError::permanent(format!("secret {name:?} is not set")))?;
            value.push_str(&rest[..start]);
            value.push_str(&secret);
            values.push(secret);
            rest = &tail[end + 1..];
        }
        value.push_str(rest);
        out.insert(k.clone(), value);
    }
    Ok(Opened {
        config: out,
        values,
    })
}

/// Sends one delivery on its channel.
pub async fn send(senders: &Senders, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let client = &senders.http;
    match out.config {
        ChannelConfig::Webhook(c) => http::webhook(client, out, c).await,
        ChannelConfig::Slack(_) => http::slack(client, out).await,
        ChannelConfig::Teams(_) => http::teams(client, out).await,
        ChannelConfig::Ntfy(c) => http::ntfy(client, out, c).await,
        ChannelConfig::Gotify(c) => http::gotify(client, out, c).await,
        ChannelConfig::Servicenow(c) => http::servicenow(client, out, c).await,
        ChannelConfig::Script(c) => script::run(&senders.scripts, out, c).await,
        ChannelConfig::Email(c) => email::send(&senders.ca_files, out, c).await,
        ChannelConfig::Sms(_) => phone::sms(senders, out).await,
        ChannelConfig::Voice(_) => phone::voice(senders, out).await,
        ChannelConfig::Espa => pager::espa(senders, out).await,
        ChannelConfig::Push(c) => match out.push {
            Some(to) => webpush::send(client, out, c, to).await,
            None => Err(SendError::permanent(
                "a push needs a contact with a user (userId) and the instance's VAPID key, made when a browser first subscribes",
            )),
        },
    }
}

/// A channel's configuration with its secrets opened, read as its kind takes it; one that does
/// not read (a document saved before a check was added) cannot be sent.
pub fn config_of(kind: ChannelKind, opened: &Opened) -> Result<ChannelConfig, SendError> {
    ChannelConfig::parse(kind, &opened.config).map_err(SendError::permanent)
}

/// The kind a channel's (or a bare delivery's) `type` names; a type no kind has cannot be
/// sent (a document saved by a later version, say).
pub fn kind_of(name: &str) -> Result<ChannelKind, SendError> {
    ChannelKind::parse(name).ok_or_else(|| {
        SendError::permanent(format!("channel type {name:?} has no sender in this build"))
    })
}
