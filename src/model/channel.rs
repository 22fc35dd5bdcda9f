//! A channel's configuration by its kind. A channel document carries `config` as the
//! reference's map of strings (numbers and booleans are taken as well); it is read once into
//! one typed struct per kind, which the checks at save and the sender take. A kind added to
//! `ChannelKind` without its arm here, or without its sender, does not compile.

use super::notify::ChannelKind;
use super::secret::reference_allowed;
use std::collections::BTreeMap;

/// Headers that say where a request goes and how it is framed: the sender's, never a
/// channel's `header.<Name>`.
const FRAMING_HEADERS: [&str; 7] = [
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Upgrade",
    "TE",
    "Trailer",
];

/// A channel's configuration, parsed by its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ChannelConfig {
    Email(EmailConfig),
    Push(PushConfig),
    Webhook(WebhookConfig),
    Slack(PostConfig),
    Teams(PostConfig),
    Ntfy(NtfyConfig),
    Gotify(GotifyConfig),
    Servicenow(ServicenowConfig),
    Sms(PhoneConfig),
    Voice(VoiceConfig),
    Espa,
    Script(ScriptConfig),
}

/// `email`: the SMTP relay and how to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct EmailConfig {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    pub from: Option<String>,
    /// `tlsInsecure`: accept any certificate (a test relay).
    pub tls_insecure: bool,
    /// `caFile`: a root certificate, in a directory the configuration file allows.
    pub ca_file: Option<String>,
    pub login: Option<Login>,
}

/// How an SMTP session is protected (`tls`): STARTTLS (the default, port 587), implicit TLS
/// (465) or none (25).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpTls {
    Starttls,
    Tls,
    None,
}

impl SmtpTls {
    fn default_port(self) -> u16 {
        match self {
            Self::Starttls => 587,
            Self::Tls => 465,
            Self::None => 25,
        }
    }
}

/// A user name with its password (empty when not given).
#[derive(Clone, Debug, PartialEq)]
pub struct Login {
    pub username: String,
    pub password: String,
}

/// `push`: the VAPID subject and how long a push service keeps an undelivered message.
#[derive(Clone, Debug, PartialEq)]
pub struct PushConfig {
    /// `subject`: a `mailto:` or `https:` address of the operator.
    pub subject: Option<String>,
    /// `ttl` in seconds.
    pub ttl: Option<u32>,
}

/// `webhook`: a JSON POST, signed with `secret`, with extra `header.<Name>` headers.
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookConfig {
    pub url: Option<String>,
    pub secret: Option<String>,
    pub headers: Vec<(String, String)>,
}

/// `slack`, `teams`: an incoming webhook's URL.
#[derive(Clone, Debug, PartialEq)]
pub struct PostConfig {
    pub url: Option<String>,
}

/// `ntfy`: the topic URL, with a bearer `token` or a login.
#[derive(Clone, Debug, PartialEq)]
pub struct NtfyConfig {
    pub url: Option<String>,
    pub token: Option<String>,
    pub login: Option<Login>,
}

/// `gotify`: the server's URL and the application token.
#[derive(Clone, Debug, PartialEq)]
pub struct GotifyConfig {
    pub url: Option<String>,
    pub token: Option<String>,
}

/// `servicenow`: the instance's URL, the table (default `incident`), the assignment group and
/// the login.
#[derive(Clone, Debug, PartialEq)]
pub struct ServicenowConfig {
    pub url: Option<String>,
    pub table: String,
    pub assignment_group: Option<String>,
    pub login: Option<Login>,
}

/// `sms`: through the local modem (`provider: modem`, the only one and the default).
#[derive(Clone, Debug, PartialEq)]
pub struct PhoneConfig;

/// `voice`: through the local modem, spoken as the `tts-profiles` document `ttsProfile` says.
#[derive(Clone, Debug, PartialEq)]
pub struct VoiceConfig {
    pub tts_profile: Option<String>,
}

/// `script`: a program in the scripts directory and its arguments (split on whitespace, never
/// by a shell).
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptConfig {
    pub command: String,
    pub args: Vec<String>,
}

impl ChannelConfig {
    /// Reads a channel's `config` as its kind takes it; the error names the field
    /// (`config.port: ...`). Keys a kind does not read are kept in the document and ignored.
    pub fn parse(kind: ChannelKind, config: &BTreeMap<String, String>) -> Result<Self, String> {
        let headers = check_keys(config)?;
        let given = |key: &str| {
            config
                .get(key)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let text = |key: &str| given(key).map(str::to_string);
        let url = match given("url") {
            Some(url) => {
                super::config::check_url(url).map_err(|e| format!("config.url: {e}"))?;
                Some(url.to_string())
            }
            None => None,
        };
        let login = || {
            given("username").map(|username| Login {
                username: username.to_string(),
                password: given("password").unwrap_or_default().to_string(),
            })
        };
        let port = given("port")
            .map(|port| match port.parse::<u16>() {
                Ok(p) if p > 0 => Ok(p),
                _ => Err(format!("config.port: {port:?} is not a port (1-65535)")),
            })
            .transpose()?;
        let provider = || match given("provider") {
            None | Some("modem") => Ok(()),
            Some(other) => Err(format!(
                "config.provider: {} provider {other:?} is not supported; use modem",
                kind.as_str()
            )),
        };
        Ok(match kind {
            ChannelKind::Email => {
                let host = given("host").ok_or("config.host: the SMTP relay is required")?;
                if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '$') {
                    return Err(format!("config.host: {host:?} is not a host name"));
                }
                let tls = match given("tls") {
                    None | Some("starttls") => SmtpTls::Starttls,
                    Some("tls") => SmtpTls::Tls,
                    Some("none") => SmtpTls::None,
                    Some(other) => {
                        return Err(format!(
                            "config.tls: {other:?} must be one of starttls, tls, none"
                        ));
                    }
                };
                Self::Email(EmailConfig {
                    host: host.to_string(),
                    port: port.unwrap_or(tls.default_port()),
                    tls,
                    from: text("from"),
                    tls_insecure: flag(given("tlsInsecure"), "tlsInsecure")?,
                    ca_file: text("caFile"),
                    login: login(),
                })
            }
            ChannelKind::Push => {
                let subject = text("subject");
                if let Some(s) = &subject
                    && !(s.starts_with("mailto:") || s.starts_with("https://"))
                {
                    return Err(format!(
                        "config.subject: {s:?} is a mailto: or https: address of the operator"
                    ));
                }
                let ttl = given("ttl")
                    .map(|t| {
                        t.parse::<u32>()
                            .map_err(|_| format!("config.ttl: {t:?} is not a number of seconds"))
                    })
                    .transpose()?;
                Self::Push(PushConfig { subject, ttl })
            }
            ChannelKind::Webhook => Self::Webhook(WebhookConfig {
                url,
                secret: text("secret"),
                headers,
            }),
            ChannelKind::Slack => Self::Slack(PostConfig { url }),
            ChannelKind::Teams => Self::Teams(PostConfig { url }),
            ChannelKind::Ntfy => Self::Ntfy(NtfyConfig {
                url,
                token: text("token"),
                login: login(),
            }),
            ChannelKind::Gotify => Self::Gotify(GotifyConfig {
                url,
                token: text("token"),
            }),
            ChannelKind::Servicenow => Self::Servicenow(ServicenowConfig {
                url,
                table: text("table").unwrap_or_else(|| "incident".into()),
                assignment_group: text("assignmentGroup"),
                login: login(),
            }),
            ChannelKind::Sms => {
                provider()?;
                Self::Sms(PhoneConfig)
            }
            ChannelKind::Voice => {
                provider()?;
                Self::Voice(VoiceConfig {
                    tts_profile: text("ttsProfile"),
                })
            }
            ChannelKind::Espa => Self::Espa,
            ChannelKind::Script => {
                let command =
                    given("command").ok_or("config.command: the program to run is required")?;
                if command.contains('$') {
                    return Err(format!(
                        "config.command: {command:?} is written out in full, without macros or secrets"
                    ));
                }
                Self::Script(ScriptConfig {
                    command: command.to_string(),
                    args: given("args")
                        .unwrap_or_default()
                        .split_whitespace()
                        .map(String::from)
                        .collect(),
                })
            }
        })
    }

    pub fn kind(&self) -> ChannelKind {
        match self {
            Self::Email(_) => ChannelKind::Email,
            Self::Push(_) => ChannelKind::Push,
            Self::Webhook(_) => ChannelKind::Webhook,
            Self::Slack(_) => ChannelKind::Slack,
            Self::Teams(_) => ChannelKind::Teams,
            Self::Ntfy(_) => ChannelKind::Ntfy,
            Self::Gotify(_) => ChannelKind::Gotify,
            Self::Servicenow(_) => ChannelKind::Servicenow,
            Self::Sms(_) => ChannelKind::Sms,
            Self::Voice(_) => ChannelKind::Voice,
            Self::Espa => ChannelKind::Espa,
            Self::Script(_) => ChannelKind::Script,
        }
    }

    /// The URL it posts to, for the kinds that post to one.
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::Webhook(WebhookConfig { url, .. })
            | Self::Slack(PostConfig { url })
            | Self::Teams(PostConfig { url })
            | Self::Ntfy(NtfyConfig { url, .. })
            | Self::Gotify(GotifyConfig { url, .. })
            | Self::Servicenow(ServicenowConfig { url, .. }) => url.as_deref(),
            Self::Email(_)
            | Self::Push(_)
            | Self::Sms(_)
            | Self::Voice(_)
            | Self::Espa
            | Self::Script(_) => None,
        }
    }
}

/// How a channel's deliveries are retried and when it counts as down, where the channel says
/// (any kind): `retryMaxAttempts`, `retryBackoffSeconds`, `retryBackoffCapSeconds`,
/// `failoverAfter`, each a whole number from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RetrySettings {
    pub max_attempts: Option<u32>,
    pub backoff_secs: Option<u32>,
    pub backoff_cap_secs: Option<u32>,
    pub failover_after: Option<u32>,
}

impl RetrySettings {
    pub fn parse(config: &BTreeMap<String, String>) -> Result<Self, String> {
        let number = |key: &str| {
            config
                .get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| match v.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!("config.{key}: {v:?} is not a whole number from 1")),
                })
                .transpose()
        };
        Ok(Self {
            max_attempts: number("retryMaxAttempts")?,
            backoff_secs: number("retryBackoffSeconds")?,
            backoff_cap_secs: number("retryBackoffCapSeconds")?,
            failover_after: number("failoverAfter")?,
        })
    }
}

/// Reads a channel's `config`: each value text, a number or a boolean, kept as text.
pub fn settings<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    use serde::Deserialize;
    use serde_json::Value;
    BTreeMap::<String, Value>::deserialize(d)?
        .into_iter()
        .map(|(key, value)| match value {
            Value::String(s) => Ok((key, s)),
            Value::Number(n) => Ok((key, n.to_string())),
            Value::Bool(b) => Ok((key, b.to_string())),
            _ => Err(serde::de::Error::custom(format!(
                "config.{key}: a setting is text, a number or true/false"
            ))),
        })
        .collect()
}

/// What holds for every kind: a secret only where one may stand, and `header.<Name>` keys
/// that name a header the sender does not own, with a one-line value; answers the headers.
fn check_keys(config: &BTreeMap<String, String>) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for (key, value) in config {
        if !reference_allowed(key, value) {
            return Err(format!(
                "config.{key}: $SECRET:name$ may stand only in credential fields, headers, script arguments and a URL's path"
            ));
        }
        let Some(header) = key.strip_prefix("header.") else {
            continue;
        };
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if header.is_empty() || !header.bytes().all(token) {
            return Err(format!("config.{key}: {header:?} is not a header name"));
        }
        if FRAMING_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(header))
        {
            return Err(format!(
                "config.{key}: {header} is the request's own (where it goes and how it is framed), not a channel's to set"
            ));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("config.{key}: a header value is one line"));
        }
        headers.push((header.to_string(), value.clone()));
    }
    Ok(headers)
}

/// A yes-or-no setting: `true` or `false`; not given is false.
fn flag(value: Option<&str>, key: &str) -> Result<bool, String> {
    match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(format!("config.{key}: {other:?} must be true or false")),
    }
}

/// Settings as the documents hold them, from pairs (the tests' shorthand).
#[cfg(test)]
pub fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_its_own_struct() {
        for kind in ChannelKind::ALL {
            let given = match kind {
                ChannelKind::Email => config(&[("host", "smtp.example")]),
                ChannelKind::Script => config(&[("command", "page.sh")]),
                _ => config(&[]),
            };
            let parsed = ChannelConfig::parse(kind, &given).unwrap();
            assert_eq!(parsed.kind(), kind);
        }
    }

    #[test]
    fn numbers_and_choices_are_typed() {
        let email = ChannelConfig::parse(
            ChannelKind::Email,
            &config(&[
                ("host", "smtp.example"),
                ("tls", "tls"),
                ("tlsInsecure", "true"),
            ]),
        )
        .unwrap();
        let ChannelConfig::Email(email) = email else {
            panic!("{email:?}")
        };
        assert_eq!(
            (email.port, email.tls, email.tls_insecure),
            (465, SmtpTls::Tls, true)
        );
        let on_port = ChannelConfig::parse(
            ChannelKind::Email,
            &config(&[("host", "smtp.example"), ("port", "2525")]),
        )
        .unwrap();
        assert!(matches!(
            on_port,
            ChannelConfig::Email(EmailConfig { port: 2525, .. })
        ));
        for (key, value, says) in [
            ("port", "0", "config.port"),
            ("port", "many", "config.port"),
            ("tls", "ssl", "config.tls"),
            ("tlsInsecure", "yes", "config.tlsInsecure"),
            ("host", "a b", "config.host"),
        ] {
            let mut given = config(&[("host", "smtp.example")]);
            given.insert(key.into(), value.into());
            let e = ChannelConfig::parse(ChannelKind::Email, &given).unwrap_err();
            assert!(e.starts_with(says), "{key}={value}: {e}");
        }
        let push = ChannelConfig::parse(ChannelKind::Push, &config(&[("ttl", "60")])).unwrap();
        assert_eq!(
            push,
            ChannelConfig::Push(PushConfig {
                subject: None,
                ttl: Some(60)
            })
        );
        assert!(ChannelConfig::parse(ChannelKind::Push, &config(&[("ttl", "-1")])).is_err());
        let retries = RetrySettings::parse(&config(&[("retryMaxAttempts", "3")])).unwrap();
        assert_eq!(retries.max_attempts, Some(3));
        assert_eq!(retries.failover_after, None);
        for bad in ["0", "-2", "1.5", "soon"] {
            let e = RetrySettings::parse(&config(&[("failoverAfter", bad)])).unwrap_err();
            assert!(e.starts_with("config.failoverAfter"), "{bad}: {e}");
        }
    }

    #[test]
    fn settings_take_numbers_and_booleans_as_text() {
        let channel: crate::model::notify::Channel = serde_json::from_value(serde_json::json!({
            "type": "email",
            "config": {"host": "smtp.example", "port": 2525, "tlsInsecure": true},
        }))
        .unwrap();
        assert_eq!(channel.config["port"], "2525");
        assert_eq!(channel.config["tlsInsecure"], "true");
        let nested = serde_json::from_value::<crate::model::notify::Channel>(serde_json::json!({
            "type": "email", "config": {"host": {"name": "x"}},
        }));
        assert!(nested.unwrap_err().to_string().contains("config.host"));
    }

    #[test]
    fn headers_secrets_and_providers_are_checked() {
        let hook = ChannelConfig::parse(
            ChannelKind::Webhook,
            &config(&[
                ("url", "https://hooks.example/$SECRET:path$"),
                ("header.X-Token", "$SECRET:tok$"),
            ]),
        )
        .unwrap();
        let ChannelConfig::Webhook(hook) = hook else {
            panic!("{hook:?}")
        };
        assert_eq!(hook.headers, [("X-Token".into(), "$SECRET:tok$".into())]);
        for (kind, pairs) in [
            (ChannelKind::Webhook, vec![("header.Host", "evil")]),
            (ChannelKind::Webhook, vec![("header.X", "a\nb")]),
            (ChannelKind::Webhook, vec![("url", "https://$SECRET:h$/x")]),
            (ChannelKind::Webhook, vec![("url", "file:///etc/passwd")]),
            (ChannelKind::Email, vec![("host", "$SECRET:h$")]),
            (ChannelKind::Sms, vec![("provider", "twilio")]),
            (ChannelKind::Script, vec![("command", "$HOME/x")]),
            (ChannelKind::Script, vec![]),
        ] {
            assert!(
                ChannelConfig::parse(kind, &config(&pairs)).is_err(),
                "{kind:?} {pairs:?}"
            );
        }
        let script = ChannelConfig::parse(
            ChannelKind::Script,
            &config(&[("command", "page.sh"), ("args", " -v  --to ops ")]),
        )
        .unwrap();
        assert_eq!(
            script,
            ChannelConfig::Script(ScriptConfig {
                command: "page.sh".into(),
                args: vec!["-v".into(), "--to".into(), "ops".into()],
            })
        );
    }
}
