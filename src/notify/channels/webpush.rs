//! The `push` channel: Web Push (RFC 8030) to the browsers a contact's user subscribed,
//! each message encrypted for its subscription (RFC 8291: ECDH P-256, HKDF-SHA-256, one
//! `aes128gcm` record of RFC 8188) and signed for the push service with the instance's VAPID
//! key (RFC 8292). Only push services the configuration file names are reached.

use super::{Outgoing, SendError, Sent};
use crate::auth::push::Vapid;
use crate::model::base64;
use crate::model::channel::PushConfig;
use crate::model::identity::PushSubscription;
use crate::runtime::Locked;
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::agreement::{ECDH_P256, EphemeralPrivateKey, UnparsedPublicKey, agree_ephemeral};
use ring::hkdf::{HKDF_SHA256, KeyType, Salt};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;

/// The record size the header announces: one record holds the whole message.
const RECORD_SIZE: u32 = 4096;
/// The most plaintext one record carries (RFC 8291 section 4: 4096 less header, padding
/// delimiter and tag).
const PLAINTEXT_MAX: usize = 3993;
/// How long a push service keeps a message for a browser that is offline, by default.
const TTL_SECS: u64 = 24 * 3600;

/// Whom a push goes to: the instance's key, and the subscriptions of the contact's user.
pub struct Recipient {
    pub vapid: Vapid,
    pub subscriptions: Vec<PushSubscription>,
    /// Push service origins the configuration file allows (`https://fcm.googleapis.com`,
    /// `https://*.push.services.mozilla.com`).
    pub services: Vec<String>,
    /// Unix seconds now, for the token's expiry.
    pub now: i64,
    /// Endpoints the push service said are gone (404, 410), for the courier to forget.
    pub gone: std::sync::Mutex<Vec<String>>,
}

/// Whether `endpoint` belongs to one of the allowed push services: same scheme and port, and
/// the host equal or, for a `*.` pattern, under it.
pub fn allowed(endpoint: &str, services: &[String]) -> bool {
    let Ok(url) = url::Url::parse(endpoint) else {
        return false;
    };
    let host = url.host_str().unwrap_or_default();
    services.iter().any(|pattern| {
        let Some((scheme, rest)) = pattern.split_once("://") else {
            return false;
        };
        let (pattern_host, port) = match rest.trim_end_matches('/').rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok()),
            None => (rest.trim_end_matches('/'), None),
        };
        let host_ok = match pattern_host.strip_prefix("*.") {
            Some(parent) => host.len() > parent.len() && host.ends_with(&format!(".{parent}")),
            None => host.eq_ignore_ascii_case(pattern_host),
        };
        scheme == url.scheme()
            && host_ok
            && port.or(default_port(scheme)) == url.port_or_known_default()
    })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    }
}

/// The keys of a subscription: the browser's public key and its authentication secret.
fn keys_of(sub: &PushSubscription) -> Result<(Vec<u8>, Vec<u8>), String> {
    let key = |name: &str| {
        sub.keys
            .get(name)
            .and_then(|v| v.as_str())
            .and_then(base64::decode)
            .ok_or_else(|| format!("the subscription has no {name} key"))
    };
    let (public, auth) = (key("p256dh")?, key("auth")?);
    if public.len() != 65 || auth.len() != 16 {
        return Err("the subscription's keys are not a P-256 key and a 16-byte secret".into());
    }
    Ok((public, auth))
}

/// A length for HKDF-Expand.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf(salt: &[u8], ikm: &[u8], info: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // Lengths here are 12, 16 and 32: always within HKDF-SHA-256's limit.
    let filled = Salt::new(HKDF_SHA256, salt)
        .extract(ikm)
        .expand(&[info], Len(len))
        .and_then(|okm| okm.fill(&mut out));
    debug_assert!(filled.is_ok());
    out
}

/// The message body for a browser from the ECDH secret on (RFC 8291 section 3.4): the
/// `aes128gcm` header (salt, record size, the sender's public key) and the one record.
fn seal(
    ecdh_secret: &[u8],
    auth: &[u8],
    ua_public: &[u8],
    as_public: &[u8],
    salt: &[u8; 16],
    plaintext: &[u8],
) -> Result<Vec<u8>, String> {
    let mut key_info = b"WebPush: info\0".to_vec();
    key_info.extend_from_slice(ua_public);
    key_info.extend_from_slice(as_public);
    let ikm = hkdf(auth, ecdh_secret, &key_info, 32);
    let cek = hkdf(salt, &ikm, b"Content-Encoding: aes128gcm\0", 16);
    let nonce = hkdf(salt, &ikm, b"Content-Encoding: nonce\0", 12);
    let key = LessSafeKey::new(
        UnboundKey::new(&AES_128_GCM, &cek).map_err(|_| "the content key is unusable")?,
    );
    let nonce = Nonce::try_assume_unique_for_key(&nonce).map_err(|_| "the nonce is unusable")?;
    // The last (and only) record ends with the delimiter 2 and no padding.
    let mut record = plaintext.to_vec();
    record.push(2);
    key.seal_in_place_append_tag(nonce, Aad::empty(), &mut record)
        .map_err(|_| "encryption failed")?;
    let mut body = Vec::with_capacity(86 + record.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(as_public);
    body.extend_from_slice(&record);
    Ok(body)
}

/// `plaintext` encrypted for one subscription with a fresh key pair and salt.
fn encrypt(sub: &PushSubscription, plaintext: &[u8]) -> Result<Vec<u8>, String> {
    let (ua_public, auth) = keys_of(sub)?;
    let rng = SystemRandom::new();
    let private = EphemeralPrivateKey::generate(&ECDH_P256, &rng)
        .map_err(|_| "no randomness for a key pair")?;
    let as_public = private
        .compute_public_key()
        .map_err(|_| "the key pair is unusable")?;
    let mut salt = [0u8; 16];
    rng.fill(&mut salt)
        .map_err(|_| "no randomness for a salt")?;
    let peer = UnparsedPublicKey::new(&ECDH_P256, &ua_public);
    let secret = agree_ephemeral(private, &peer, |s| s.to_vec())
        .map_err(|_| "the subscription's public key is not on P-256")?;
    seal(
        &secret,
        &auth,
        &ua_public,
        as_public.as_ref(),
        &salt,
        plaintext,
    )
}

/// What the service worker shows: title, text, where a tap goes, the ack link for the
/// notification's action, and a tag so a repeat replaces the earlier one.
fn notification(out: &Outgoing<'_>) -> Vec<u8> {
    let m = &out.delivery.payload;
    let title = match m.kind.as_str() {
        "alert" => format!("[{}] {}", m.severity.to_uppercase(), m.title),
        _ => m.title.clone(),
    };
    let mut shown = json!({
        "title": title,
        "body": if out.template.is_some() { out.text() } else { m.summary.clone() },
        "url": m.alert_url,
        "ackUrl": m.ack_url,
        "tag": m.alert_id.map(|a| a.to_string()).unwrap_or_else(|| out.delivery.id.to_string()),
        "severity": m.severity,
    });
    let mut bytes = shown.to_string().into_bytes();
    // A long text is cut, not refused: the title and the links matter more.
    while bytes.len() > PLAINTEXT_MAX {
        let body = shown["body"].as_str().unwrap_or_default();
        let keep = body
            .chars()
            .count()
            .saturating_sub(bytes.len() - PLAINTEXT_MAX + 8)
            / 2;
        shown["body"] = json!(body.chars().take(keep).collect::<String>());
        if keep == 0 {
            shown["title"] = json!(title.chars().take(200).collect::<String>());
        }
        bytes = shown.to_string().into_bytes();
    }
    bytes
}

/// Sends to every subscription of the contact's user; it went out when one push service took
/// it. A push service's 404 or 410 says that subscription is gone.
pub async fn send(
    client: &reqwest::Client,
    out: &Outgoing<'_>,
    config: &PushConfig,
    to: &Recipient,
) -> Result<Sent, SendError> {
    if to.subscriptions.is_empty() {
        return Err(SendError::permanent(
            "the contact's user has no push subscription (notifications are turned on in the UI's account page)",
        ));
    }
    let plaintext = notification(out);
    let subject = config.subject.as_deref();
    let ttl = config.ttl.map_or(TTL_SECS, u64::from);
    let urgency = match out.delivery.payload.severity.as_str() {
        "critical" => "high",
        "warning" => "normal",
        _ => "low",
    };
    let (mut delivered, mut failures, mut retry) = (0, Vec::new(), false);
    for sub in &to.subscriptions {
        let host = url::Url::parse(&sub.endpoint)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        if !allowed(&sub.endpoint, &to.services) {
            failures.push(format!(
                "{host}: not a push service the configuration allows (notify.pushServices)"
            ));
            continue;
        }
        let request = encrypt(sub, &plaintext).and_then(|body| {
            to.vapid
                .authorization(&sub.endpoint, subject, to.now)
                .map(|auth| (body, auth))
        });
        let (body, authorization) = match request {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{host}: {e}"));
                continue;
            }
        };
        let res = client
            .post(&sub.endpoint)
            .header("Content-Encoding", "aes128gcm")
            .header("Content-Type", "application/octet-stream")
            .header("TTL", ttl.to_string())
            .header("Urgency", urgency)
            .header("Authorization", authorization)
            .body(body)
            .send()
            .await;
        match res {
            Ok(r) if r.status().is_success() => delivered += 1,
            Ok(r) => {
                let status = r.status().as_u16();
                retry |= status == 429 || status == 408 || status >= 500;
                let gone = if matches!(status, 404 | 410) {
                    to.gone.locked().push(sub.endpoint.clone());
                    " (the subscription is gone and is forgotten)"
                } else {
                    ""
                };
                failures.push(format!("{host}: HTTP {status}{gone}"));
            }
            Err(e) => {
                retry = true;
                failures.push(format!("{host}: {e}"));
            }
        }
    }
    let detail = format!(
        "pushed to {delivered} of {} subscriptions{}{}",
        to.subscriptions.len(),
        if failures.is_empty() { "" } else { "; " },
        failures.join("; ")
    );
    match (delivered, retry) {
        (0, true) => Err(SendError::retry(detail)),
        (0, false) => Err(SendError::permanent(detail)),
        _ => Ok(Sent {
            detail,
            ..Sent::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> Vec<u8> {
        base64::decode(s).unwrap()
    }

    /// RFC 8291 appendix A: from the ECDH secret on, the derived keys and the record layout.
    #[test]
    fn the_keys_are_derived_as_rfc_8291_appendix_a_shows() {
        let ua_public = b64(
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
        );
        let as_public = b64(
            "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
        );
        let auth = b64("BTBZMqHH6r4Tts7J_aSIgg");
        let ecdh = b64("kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs");
        let salt: [u8; 16] = b64("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let mut key_info = b"WebPush: info\0".to_vec();
        key_info.extend_from_slice(&ua_public);
        key_info.extend_from_slice(&as_public);
        let ikm = hkdf(&auth, &ecdh, &key_info, 32);
        assert_eq!(
            base64::encode_url(&ikm),
            "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
        );
        let cek = hkdf(&salt, &ikm, b"Content-Encoding: aes128gcm\0", 16);
        assert_eq!(base64::encode_url(&cek), "oIhVW04MRdy2XN9CiKLxTg");
        let nonce = hkdf(&salt, &ikm, b"Content-Encoding: nonce\0", 12);
        assert!(base64::encode_url(&nonce).starts_with("4h_95klXJ5E"));

        let plaintext = b"When I grow up, I want to be a watermelon";
        let body = seal(&ecdh, &auth, &ua_public, &as_public, &salt, plaintext).unwrap();
        assert_eq!(&body[..16], &salt);
        assert_eq!(&body[16..20], &4096u32.to_be_bytes());
        assert_eq!(body[20], 65);
        assert_eq!(&body[21..86], as_public.as_slice());
        assert_eq!(body.len(), 86 + plaintext.len() + 1 + 16);
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).unwrap());
        let mut record = body[86..].to_vec();
        let opened = key
            .open_in_place(
                Nonce::try_assume_unique_for_key(&nonce).unwrap(),
                Aad::empty(),
                &mut record,
            )
            .unwrap();
        assert_eq!(opened, [plaintext.as_slice(), &[2]].concat());
    }

    #[test]
    fn only_the_configured_push_services_are_reached() {
        let services: Vec<String> = [
            "https://fcm.googleapis.com",
            "https://*.push.services.mozilla.com",
            "http://127.0.0.1:8080",
        ]
        .map(String::from)
        .to_vec();
        for (endpoint, ok) in [
            ("https://fcm.googleapis.com/fcm/send/abc", true),
            ("https://updates.push.services.mozilla.com/wpush/v2/x", true),
            ("https://push.services.mozilla.com/x", false),
            ("https://evil.example/push.services.mozilla.com", false),
            ("https://fcm.googleapis.com.evil.example/x", false),
            ("http://fcm.googleapis.com/fcm/send/abc", false),
            ("https://fcm.googleapis.com:8443/x", false),
            ("http://127.0.0.1:8080/push/1", true),
            ("http://127.0.0.1:8081/push/1", false),
            ("http://10.0.0.1/admin", false),
            ("not a url", false),
        ] {
            assert_eq!(allowed(endpoint, &services), ok, "{endpoint}");
        }
    }
}
