//! `sms` and `voice` through the local GSM modem (`config.provider: modem`, the only provider
//! and the default). Every message ends with the reply hint (`ACK <short id>` / `RES <short
//! id>`); a call speaks the alert and asks for a key: 4 acknowledges, 6 resolves, and a call
//! nobody answers or no key pressed is a failed attempt the outbox retries.

use super::{Outgoing, SendError, Senders, Sent};
use crate::hw::gsm::{GsmError, Profile};
use crate::model::notify::Message;
use crate::runtime::AlertAction;
use serde_json::Value;

/// How a call speaks, from the `tts-profiles` document a voice channel names in
/// `config.ttsProfile`: `engine` `simcom` or `quectel` picks the modem's speech commands
/// (else the modem's own profile), and `normalize.lexicon` (`from` → `to`, whole words unless
/// `substring`, any case unless `matchCase`) and `normalize.regex` (`pattern` → `replace`)
/// rewrite the text before it is spoken (`disk` → `disc`, `db1` → `D B one`).
#[derive(Clone, Debug, Default)]
pub struct Speech {
    engine: Option<Profile>,
    rewrites: Vec<(regex_lite::Regex, String)>,
}

impl Speech {
    pub fn of(profile: &Value) -> Speech {
        let normalize = &profile["normalize"];
        let lexicon = normalize["lexicon"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let (from, to) = (e["from"].as_str()?, e["to"].as_str()?);
                let mut pattern = regex_lite::escape(from);
                if e["substring"].as_bool() != Some(true) {
                    pattern = format!(r"\b{pattern}\b");
                }
                if e["matchCase"].as_bool() != Some(true) {
                    pattern = format!("(?i){pattern}");
                }
                Some((regex_lite::Regex::new(&pattern).ok()?, to.to_string()))
            });
        let regex = normalize["regex"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let (p, r) = (e["pattern"].as_str()?, e["replace"].as_str()?);
                Some((regex_lite::Regex::new(p).ok()?, r.to_string()))
            });
        Speech {
            engine: profile["engine"].as_str().and_then(|e| match e {
                "simcom" | "quectel" => e.parse().ok(),
                _ => None,
            }),
            rewrites: lexicon.chain(regex).collect(),
        }
    }

    fn apply(&self, text: &str) -> String {
        self.rewrites.iter().fold(text.to_string(), |t, (re, to)| {
            re.replace_all(&t, to.as_str()).into_owned()
        })
    }
}

fn failed(e: GsmError) -> SendError {
    SendError {
        retryable: e.retryable(),
        message: e.to_string(),
    }
}

fn target<'a>(out: &'a Outgoing<'_>) -> Result<&'a str, SendError> {
    let to = out.delivery.target.trim();
    if to.is_empty() {
        return Err(SendError::permanent("no phone number to send to"));
    }
    Ok(to)
}

/// The reply hint that ends every message about an alert.
pub fn reply_hint(m: &Message) -> String {
    if m.short_id.is_empty() {
        String::new()
    } else {
        format!("Reply ACK {0} or RES {0}", m.short_id)
    }
}

/// A short message: severity, title, summary, hint; without links, which cost characters
/// and need a network the reader may not have, and without brackets, which GSM text mode
/// cannot carry.
fn sms_text(out: &Outgoing<'_>) -> String {
    let m = &out.delivery.payload;
    let mut text = match out.template {
        Some(_) => out.text(),
        None if m.kind == "alert" || m.kind == "digest" => {
            let mut t = format!("{}: {}", m.severity.to_uppercase(), m.title);
            if !m.summary.is_empty() {
                t.push('\n');
                t.push_str(&m.summary);
            }
            t
        }
        None => super::default_text(m),
    };
    let hint = reply_hint(m);
    if !hint.is_empty() {
        text.push('\n');
        text.push_str(&hint);
    }
    text
}

pub async fn sms(senders: &Senders, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let modem = senders.modem.as_ref().ok_or_else(|| {
        SendError::permanent("no GSM modem is configured (hardware.gsm in the configuration file)")
    })?;
    let to = target(out)?;
    let reference = modem.send_sms(to, &sms_text(out)).await.map_err(failed)?;
    Ok(Sent {
        provider_id: Some(reference.to_string()),
        detail: format!("SMS to {to} accepted by the network (reference {reference})"),
        ..Sent::default()
    })
}

pub async fn voice(senders: &Senders, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let modem = senders.modem.as_ref().ok_or_else(|| {
        SendError::permanent("no GSM modem is configured (hardware.gsm in the configuration file)")
    })?;
    let to = target(out)?;
    let m = &out.delivery.payload;
    let mut speech = match out.template {
        Some(_) => out.text(),
        None => format!("{} alert. {}. {}", m.severity, m.title, m.summary),
    };
    let asks = m.alert_id.is_some();
    if asks {
        speech.push_str(" Press 4 to acknowledge, 6 to resolve.");
    }
    let (speech, engine) = match out.speech {
        Some(profile) => (profile.apply(&speech), profile.engine),
        None => (speech, None),
    };
    match modem.call(to, &speech, engine).await.map_err(failed)? {
        Some('4') if asks => Ok(Sent {
            detail: format!("call to {to} answered; 4 pressed"),
            action: Some(AlertAction::Ack),
            ..Sent::default()
        }),
        Some('6') if asks => Ok(Sent {
            detail: format!("call to {to} answered; 6 pressed"),
            action: Some(AlertAction::Resolve),
            ..Sent::default()
        }),
        Some(key) if asks => Err(SendError::retry(format!(
            "call to {to} answered but {key} is no action (4 acknowledges, 6 resolves)"
        ))),
        _ if asks => Err(SendError::retry(format!(
            "call to {to} answered but no key was pressed"
        ))),
        _ => Ok(Sent {
            detail: format!("call to {to} answered"),
            ..Sent::default()
        }),
    }
}
