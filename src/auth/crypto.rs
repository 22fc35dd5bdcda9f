//! Secret hashing (SPEC 5.5): argon2id, time 1, memory 64 MiB, 4 lanes, 32-byte output, 16-byte
//! random salt, stored as `hex(salt)$hex(hash)`, compared in constant time. Tests run the same
//! code with a fast preset.

use crate::model::audit::hex;
use argon2::{Algorithm, Argon2, Params, Version};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CryptoPolicy {
    memory_kib: u32,
    time: u32,
    lanes: u32,
}

impl CryptoPolicy {
    pub const PRODUCTION: CryptoPolicy = CryptoPolicy {
        memory_kib: 64 * 1024,
        time: 1,
        lanes: 4,
    };
    /// For tests only (`SVC_CRYPTO_POLICY=fast`): the same algorithm with 8 KiB.
    pub const FAST_TEST: CryptoPolicy = CryptoPolicy {
        memory_kib: 8,
        time: 1,
        lanes: 1,
    };

    /// `fast` selects the test preset; anything else the production one.
    pub fn named(name: Option<&str>) -> Self {
        match name {
            Some("fast") => Self::FAST_TEST,
            _ => Self::PRODUCTION,
        }
    }

    fn argon(&self) -> Option<Argon2<'static>> {
        let params = Params::new(self.memory_kib, self.time, self.lanes, Some(32)).ok()?;
        Some(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
    }

    fn derive(&self, secret: &[u8], salt: &[u8]) -> Option<[u8; 32]> {
        let mut out = [0u8; 32];
        self.argon()?
            .hash_password_into(secret, salt, &mut out)
            .ok()?;
        Some(out)
    }

    /// Blocking and memory-hungry: call through `Auth`'s bounded pool.
    pub fn hash(&self, secret: &[u8]) -> Option<String> {
        let salt = random_bytes::<16>()?;
        let out = self.derive(secret, &salt)?;
        Some(format!("{}${}", hex(&salt), hex(&out)))
    }

    /// Blocking: whether `secret` matches `stored`, compared in constant time.
    pub fn verify(&self, secret: &[u8], stored: &str) -> bool {
        let Some((salt, expected)) = stored.split_once('$') else {
            return false;
        };
        let (Some(salt), Some(expected)) = (unhex(salt), unhex(expected)) else {
            return false;
        };
        match self.derive(secret, &salt) {
            Some(out) => constant_time_eq(&out, &expected),
            None => false,
        }
    }
}

pub fn random_bytes<const N: usize>() -> Option<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).ok()?;
    Some(b)
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a session's form token is made from: a hash of the session's secret id, so only a
/// page served to that session can hold it (SHA-256 gives no way back to the id).
fn form_token_base(session: &str) -> [u8; 16] {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"svc form token\0")
        .chain_update(session.as_bytes())
        .finalize();
    let mut base = [0u8; 16];
    base.copy_from_slice(&digest[..16]);
    base
}

/// The token the UI's forms carry for `session`, masked afresh for each page (a random pad and
/// the token XOR the pad), so a compressed page never repeats it for a length side channel to
/// recover. `None` without randomness.
pub fn form_token(session: &str) -> Option<String> {
    let pad: [u8; 16] = random_bytes()?;
    let base = form_token_base(session);
    let mut out = pad.to_vec();
    out.extend(pad.iter().zip(base).map(|(p, b)| p ^ b));
    Some(hex(&out))
}

/// Whether `given` is a form token of `session` (any masking of it).
pub fn form_token_ok(session: &str, given: &str) -> bool {
    let Some(raw) = unhex(given).filter(|r| r.len() == 32) else {
        return false;
    };
    let unmasked: Vec<u8> = raw[..16]
        .iter()
        .zip(&raw[16..])
        .map(|(p, m)| p ^ m)
        .collect();
    constant_time_eq(&unmasked, &form_token_base(session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let p = CryptoPolicy::FAST_TEST;
        let h = p.hash(b"correct horse battery").unwrap();
        let (salt, out) = h.split_once('$').unwrap();
        assert_eq!(salt.len(), 32);
        assert_eq!(out.len(), 64);
        assert!(p.verify(b"correct horse battery", &h));
        assert!(!p.verify(b"correct horse battery!", &h));
        assert!(!p.verify(b"x", "garbage"));
        assert_ne!(p.hash(b"same").unwrap(), p.hash(b"same").unwrap(), "salted");
    }

    #[test]
    fn production_parameters_are_the_specs() {
        let p = CryptoPolicy::PRODUCTION;
        assert!(p.argon().is_some());
        assert_eq!((p.memory_kib, p.time, p.lanes), (65536, 1, 4));
    }

    #[test]
    fn form_tokens_are_masked_per_page_and_bound_to_their_session() {
        let (a, b) = (form_token("s1").unwrap(), form_token("s1").unwrap());
        assert_ne!(a, b, "each page gets its own masking");
        assert!(form_token_ok("s1", &a) && form_token_ok("s1", &b));
        assert!(!form_token_ok("s2", &a), "another session's token");
        for bad in ["", "zz", &a[..62], &format!("{a}00")] {
            assert!(!form_token_ok("s1", bad), "{bad:?}");
        }
    }
}
