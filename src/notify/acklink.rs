//! Ack links (SEMANTICS 6): `<baseUrl>/api/v1/ack/<alertId>.<contactId>.<expiry>.<mac>`, an
//! HMAC-SHA256 under the installation's key (truncated to 128 bits) of the purpose (`ack`) and
//! the rest, so a link's token serves no other use; valid 24 h, and only while its alert is
//! open or acknowledged. Opening a link shows what it acknowledges; only a POST from that page
//! acts, so a mail scanner fetching links acknowledges nothing.

use crate::auth::crypto::constant_time_eq;
use crate::model::Timestamp;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::Duration;
use uuid::Uuid;

pub const VALID_FOR: Duration = Duration::from_secs(24 * 3600);
/// The META entry of the key.
pub const KEY_NAME: &str = "ack_link_key";

/// Who a valid link acknowledges for.
#[derive(Debug, PartialEq, Eq)]
pub struct AckClaim {
    pub alert: Uuid,
    pub contact: Option<Uuid>,
}

/// What a token is for, bound into its MAC.
const PURPOSE: &[u8] = b"ack-link\0";

fn mac(key: &[u8], body: &str) -> String {
    mac_for(key, PURPOSE, body)
}

/// The MAC of a link's `body` for `purpose` (`ack-link\0`, `status-confirm\0`…) under the
/// installation's key, 128 bits in hex; empty only for a key HMAC cannot take.
pub fn mac_for(key: &[u8], purpose: &[u8], body: &str) -> String {
    let mut m = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    m.update(purpose);
    m.update(body.as_bytes());
    hex(&m.finalize().into_bytes()[..16])
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The token of a link for `alert` (sent to `contact`) made at `now`.
pub fn sign(key: &[u8], alert: Uuid, contact: Option<Uuid>, now: Timestamp) -> String {
    let expiry = now.plus(VALID_FOR).as_millis() / 1000;
    let contact = contact.map_or("-".to_string(), |c| c.to_string());
    let body = format!("{alert}.{contact}.{expiry}");
    let mac = mac(key, &body);
    format!("{body}.{mac}")
}

/// The claim of a token that is genuine and unexpired at `now`.
pub fn verify(key: &[u8], token: &str, now: Timestamp) -> Option<AckClaim> {
    let (body, given) = token.rsplit_once('.')?;
    let expected = mac(key, body);
    if expected.is_empty() || !constant_time_eq(expected.as_bytes(), given.as_bytes()) {
        return None;
    }
    let mut parts = body.split('.');
    let alert = Uuid::parse_str(parts.next()?).ok()?;
    let contact = match parts.next()? {
        "-" => None,
        c => Some(Uuid::parse_str(c).ok()?),
    };
    let expiry: i64 = parts.next()?.parse().ok()?;
    (now.as_millis() / 1000 <= expiry).then_some(AckClaim { alert, contact })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_verify_until_they_expire() {
        let key = [7u8; 32];
        let now: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
        let alert = Uuid::from_u128(1);
        let contact = Some(Uuid::from_u128(2));
        let token = sign(&key, alert, contact, now);
        assert_eq!(
            verify(&key, &token, now.plus(Duration::from_secs(3600))),
            Some(AckClaim { alert, contact })
        );
        assert_eq!(
            verify(
                &key,
                &token,
                now.plus(VALID_FOR).plus(Duration::from_secs(1))
            ),
            None
        );
        assert_eq!(verify(&[8u8; 32], &token, now), None, "another key");
        let forged = token.replace(&alert.to_string(), &Uuid::from_u128(3).to_string());
        assert_eq!(verify(&key, &forged, now), None);
        assert_eq!(verify(&key, "garbage", now), None);
        let anonymous = sign(&key, alert, None, now);
        assert_eq!(verify(&key, &anonymous, now).unwrap().contact, None);
    }
}
