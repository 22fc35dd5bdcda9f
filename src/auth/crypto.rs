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
}
