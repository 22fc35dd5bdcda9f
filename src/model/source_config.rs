//! The connection settings of the event sources that connect out (an IMAP mailbox, an MQTT
//! broker), read from a source's `config`: when it is saved (a mistake is a 422) and again when
//! its listener starts.

use super::GoDuration;
use std::collections::BTreeMap;
use std::time::Duration;

/// `scheme://host[:port][/]` for one of `schemes` (each with its default port); answers which
/// scheme, the host and the port.
fn endpoint<'a>(url: &str, schemes: &[(&'a str, u16)]) -> Result<(&'a str, String, u16), String> {
    let (scheme, rest, default_port) = schemes
        .iter()
        .find_map(|(scheme, port)| {
            url.strip_prefix(scheme)
                .and_then(|r| r.strip_prefix("://"))
                .map(|rest| (*scheme, rest, *port))
        })
        .ok_or_else(|| {
            let names: Vec<String> = schemes.iter().map(|(s, _)| format!("{s}://")).collect();
            format!("config.url {url:?}: expected {}", names.join(" or "))
        })?;
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse()
                .map_err(|_| format!("config.url {url:?}: the port is not a number"))?,
        ),
        None => (rest, default_port),
    };
    if host.is_empty() || host.contains('/') {
        return Err(format!("config.url {url:?}: expected a host name"));
    }
    Ok((scheme, host.to_string(), port))
}

/// An `email` source's mailbox.
#[derive(Clone, Debug, PartialEq)]
pub struct ImapConfig {
    pub host: String,
    pub port: u16,
    /// `imap://`: STARTTLS; `imaps://`: TLS from the start.
    pub starttls: bool,
    pub username: String,
    /// The secret holding the password.
    pub secret_ref: String,
    pub folder: String,
    pub move_to: Option<String>,
    pub every: Duration,
}

pub const IMAP_DEFAULT_EVERY: Duration = Duration::from_secs(60);

impl ImapConfig {
    pub fn of(
        config: &BTreeMap<String, String>,
        secret_ref: &Option<String>,
    ) -> Result<Self, String> {
        let url = config
            .get("url")
            .ok_or("config.url is required (imaps://host:port or imap://host:port)")?;
        let (scheme, host, port) = endpoint(url, &[("imaps", 993), ("imap", 143)])?;
        let every = match config.get("pollInterval") {
            Some(text) => {
                text.parse::<GoDuration>()
                    .map_err(|e| format!("config.pollInterval {text:?}: {e}"))?
                    .0
            }
            None => IMAP_DEFAULT_EVERY,
        };
        Ok(Self {
            host,
            port,
            starttls: scheme == "imap",
            username: config
                .get("username")
                .cloned()
                .ok_or("config.username is required")?,
            secret_ref: secret_ref
                .clone()
                .filter(|s| !s.is_empty())
                .ok_or("secretRef must name the mailbox password's secret")?,
            folder: config
                .get("mailbox")
                .cloned()
                .unwrap_or_else(|| "INBOX".into()),
            move_to: config.get("moveTo").cloned(),
            every: every.max(Duration::from_secs(1)),
        })
    }
}

/// An `mqtt` source's broker and topics.
#[derive(Clone, Debug, PartialEq)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    /// `mqtts://`.
    pub tls: bool,
    pub topics: Vec<String>,
    pub client_id: Option<String>,
    pub username: Option<String>,
}

impl MqttConfig {
    pub fn of(config: &BTreeMap<String, String>) -> Result<Self, String> {
        let url = config
            .get("url")
            .ok_or("config.url is required (mqtt://host:port)")?;
        let (scheme, host, port) =
            endpoint(url, &[("mqtts", 8883), ("mqtt", 1883), ("tcp", 1883)])?;
        let topics: Vec<String> = config
            .get("topics")
            .map(|t| {
                t.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if topics.is_empty() {
            return Err("config.topics is required (comma-separated)".into());
        }
        Ok(Self {
            host,
            port,
            tls: scheme == "mqtts",
            topics,
            client_id: config.get("clientId").cloned(),
            username: config.get("username").cloned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::channel::config;

    #[test]
    fn a_mailbox_needs_an_imap_url_a_user_and_a_secret() {
        let pw = Some("mailbox".to_string());
        let m = ImapConfig::of(
            &config(&[
                ("url", "imaps://mail.example"),
                ("username", "ops"),
                ("pollInterval", "30s"),
            ]),
            &pw,
        )
        .unwrap();
        assert_eq!(
            (m.host.as_str(), m.port, m.starttls),
            ("mail.example", 993, false)
        );
        assert_eq!(
            (m.folder.as_str(), m.every),
            ("INBOX", Duration::from_secs(30))
        );
        let m = ImapConfig::of(
            &config(&[("url", "imap://mail.example:1143"), ("username", "ops")]),
            &pw,
        )
        .unwrap();
        assert_eq!(
            (m.port, m.starttls, m.every),
            (1143, true, IMAP_DEFAULT_EVERY)
        );
        for (pairs, secret, why) in [
            (
                vec![("url", "pop3://m"), ("username", "u")],
                &pw,
                "expected imaps:// or imap://",
            ),
            (vec![("url", "imaps://m")], &pw, "config.username"),
            (
                vec![("url", "imaps://m"), ("username", "u")],
                &None,
                "secretRef",
            ),
            (vec![("url", "imaps://m:x"), ("username", "u")], &pw, "port"),
            (vec![("username", "u")], &pw, "config.url is required"),
            (
                vec![
                    ("url", "imaps://m"),
                    ("username", "u"),
                    ("pollInterval", "often"),
                ],
                &pw,
                "pollInterval",
            ),
        ] {
            let err = ImapConfig::of(&config(&pairs), secret).unwrap_err();
            assert!(err.contains(why), "{pairs:?}: {err}");
        }
    }

    #[test]
    fn a_broker_needs_an_mqtt_url_and_topics() {
        let s = MqttConfig::of(&config(&[
            ("url", "mqtt://broker:1884"),
            ("topics", "a/+/b, c/#"),
        ]))
        .unwrap();
        assert_eq!((s.host.as_str(), s.port, s.tls), ("broker", 1884, false));
        assert_eq!(s.topics, vec!["a/+/b", "c/#"]);
        let s = MqttConfig::of(&config(&[("url", "mqtts://b"), ("topics", "x")])).unwrap();
        assert_eq!((s.port, s.tls), (8883, true));
        assert!(
            MqttConfig::of(&config(&[("url", "mqtt://b")]))
                .unwrap_err()
                .contains("topics")
        );
        assert!(MqttConfig::of(&config(&[("url", "ws://b"), ("topics", "x")])).is_err());
        assert!(MqttConfig::of(&config(&[("url", "mqtt://"), ("topics", "x")])).is_err());
    }
}
