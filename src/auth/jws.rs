//! Verifying a JSON Web Signature in compact form (RFC 7515) against a JSON Web Key Set
//! (RFC 7517): what an OpenID Connect relying party needs of an id_token, on `ring`, which the
//! TLS stack links anyway. The algorithms are those OpenID providers sign with (RFC 7518:
//! RS256/384/512, PS256/384/512, ES256/384, and EdDSA with Ed25519, RFC 8037); HS256/384/512
//! only with the client's secret as the key. `none` and any other algorithm are refused.

use crate::model::base64;
use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use serde::Deserialize;
use serde_json::{Map, Value};

/// One key of a key set, as published (the members each key type uses).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Jwk {
    #[serde(default)]
    pub kty: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default, rename = "use")]
    pub usage: Option<String>,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default)]
    pub crv: Option<String>,
    #[serde(default)]
    pub n: Option<String>,
    #[serde(default)]
    pub e: Option<String>,
    #[serde(default)]
    pub x: Option<String>,
    #[serde(default)]
    pub y: Option<String>,
}

/// A key set (`jwks_uri`'s document).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct JwkSet {
    #[serde(default)]
    pub keys: Vec<Jwk>,
}

/// Why a token's signature was not accepted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    #[error("the token is not a signed JWT in compact form")]
    Malformed,
    #[error("the token's signature algorithm {0:?} is not accepted")]
    Algorithm(String),
    /// No key of the set fits the token's header: the provider may have rotated its keys.
    #[error("no key of the provider's key set verifies the token's signature")]
    NoKey,
    #[error("the token's signature does not verify")]
    Signature,
}

/// A compact JWS: its header and payload, verified or not yet.
pub struct Compact<'t> {
    signed: &'t str,
    signature: Vec<u8>,
    pub header: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl<'t> Compact<'t> {
    pub fn parse(token: &'t str) -> Result<Self, JwsError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwsError::Malformed);
        };
        let decode = |s: &str| base64::decode(s).ok_or(JwsError::Malformed);
        let header: Map<String, Value> =
            serde_json::from_slice(&decode(header)?).map_err(|_| JwsError::Malformed)?;
        Ok(Self {
            signed: &token[..token.len() - signature.len() - 1],
            signature: decode(signature)?,
            header,
            payload: decode(payload)?,
        })
    }

    fn alg(&self) -> &str {
        self.header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Verifies the signature with a key of `keys` that fits the header (its `kid` when the
    /// header names one, else every key of the algorithm's type), or, for HS*, with `secret`.
    pub fn verify(&self, keys: &JwkSet, secret: Option<&[u8]>) -> Result<(), JwsError> {
        let alg = self.alg();
        if let Some(hmac) = hmac_of(alg) {
            let secret = secret.ok_or_else(|| JwsError::Algorithm(alg.to_string()))?;
            let key = ring::hmac::Key::new(hmac, secret);
            return ring::hmac::verify(&key, self.signed.as_bytes(), &self.signature)
                .map_err(|_| JwsError::Signature);
        }
        let kty = match alg {
            "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512" => "RSA",
            "ES256" | "ES384" => "EC",
            "EdDSA" => "OKP",
            other => return Err(JwsError::Algorithm(other.to_string())),
        };
        let kid = self.header.get("kid").and_then(Value::as_str);
        let fitting = keys.keys.iter().filter(|k| {
            k.kty == kty
                && k.usage.as_deref().is_none_or(|u| u == "sig")
                && k.alg.as_deref().is_none_or(|a| a == alg)
                && kid.is_none_or(|kid| k.kid.as_deref() == Some(kid))
        });
        let mut tried = false;
        for key in fitting {
            tried = true;
            if verify_with(alg, key, self.signed.as_bytes(), &self.signature) {
                return Ok(());
            }
        }
        Err(if tried {
            JwsError::Signature
        } else {
            JwsError::NoKey
        })
    }
}

fn hmac_of(alg: &str) -> Option<ring::hmac::Algorithm> {
    Some(match alg {
        "HS256" => ring::hmac::HMAC_SHA256,
        "HS384" => ring::hmac::HMAC_SHA384,
        "HS512" => ring::hmac::HMAC_SHA512,
        _ => return None,
    })
}

/// Whether `key` verifies `signature` over `signed` with `alg` (a key unusable for it does not).
fn verify_with(alg: &str, key: &Jwk, signed: &[u8], signature: &[u8]) -> bool {
    let part = |v: &Option<String>| v.as_deref().and_then(base64::decode);
    match key.kty.as_str() {
        "RSA" => {
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                _ => return false,
            };
            let (Some(n), Some(e)) = (part(&key.n), part(&key.e)) else {
                return false;
            };
            signature::RsaPublicKeyComponents { n, e }
                .verify(params, signed, signature)
                .is_ok()
        }
        "EC" => {
            let (algorithm, curve): (&'static dyn VerificationAlgorithm, _) = match alg {
                "ES256" => (&signature::ECDSA_P256_SHA256_FIXED, "P-256"),
                "ES384" => (&signature::ECDSA_P384_SHA384_FIXED, "P-384"),
                _ => return false,
            };
            let (Some(x), Some(y)) = (part(&key.x), part(&key.y)) else {
                return false;
            };
            if key.crv.as_deref() != Some(curve) {
                return false;
            }
            let point = [&[4u8][..], &x, &y].concat();
            UnparsedPublicKey::new(algorithm, point)
                .verify(signed, signature)
                .is_ok()
        }
        "OKP" if key.crv.as_deref() == Some("Ed25519") => part(&key.x).is_some_and(|x| {
            UnparsedPublicKey::new(&signature::ED25519, x)
                .verify(signed, signature)
                .is_ok()
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair as _};

    fn token(header: Value, payload: &str, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let signed = format!(
            "{}.{}",
            base64::encode_url(header.to_string().as_bytes()),
            base64::encode_url(payload.as_bytes())
        );
        let signature = sign(signed.as_bytes());
        format!("{signed}.{}", base64::encode_url(&signature))
    }

    fn ec_key() -> (EcdsaKeyPair, Jwk) {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        let public = pair.public_key().as_ref();
        let jwk = Jwk {
            kty: "EC".into(),
            kid: Some("ec-1".into()),
            crv: Some("P-256".into()),
            x: Some(base64::encode_url(&public[1..33])),
            y: Some(base64::encode_url(&public[33..])),
            ..Jwk::default()
        };
        (pair, jwk)
    }

    /// ES256 and EdDSA tokens verify with their published key and fail with a tampered
    /// payload, another key, or a key set that lacks theirs (the provider rotated: `NoKey`).
    #[test]
    fn signatures_verify_with_the_published_key_only() {
        let rng = SystemRandom::new();
        let (ec, ec_jwk) = ec_key();
        let es256 = token(
            serde_json::json!({"alg": "ES256", "kid": "ec-1"}),
            r#"{"sub":"a"}"#,
            |m| ec.sign(&rng, m).unwrap().as_ref().to_vec(),
        );
        let keys = JwkSet {
            keys: vec![ec_jwk.clone()],
        };
        let parsed = Compact::parse(&es256).unwrap();
        assert_eq!(parsed.payload, br#"{"sub":"a"}"#);
        assert_eq!(parsed.verify(&keys, None), Ok(()));

        let (_, other) = ec_key();
        let other = JwkSet { keys: vec![other] };
        assert_eq!(
            Compact::parse(&es256).unwrap().verify(&other, None),
            Err(JwsError::Signature)
        );
        assert_eq!(
            Compact::parse(&es256)
                .unwrap()
                .verify(&JwkSet::default(), None),
            Err(JwsError::NoKey)
        );
        let mut parts: Vec<&str> = es256.split('.').collect();
        let forged = base64::encode_url(br#"{"sub":"b"}"#);
        parts[1] = &forged;
        assert_eq!(
            Compact::parse(&parts.join("."))
                .unwrap()
                .verify(&keys, None),
            Err(JwsError::Signature)
        );

        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let ed = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let ed_jwk = Jwk {
            kty: "OKP".into(),
            crv: Some("Ed25519".into()),
            x: Some(base64::encode_url(ed.public_key().as_ref())),
            ..Jwk::default()
        };
        let eddsa = token(serde_json::json!({"alg": "EdDSA"}), "{}", |m| {
            ed.sign(m).as_ref().to_vec()
        });
        let both = JwkSet {
            keys: vec![ec_jwk, ed_jwk],
        };
        assert_eq!(Compact::parse(&eddsa).unwrap().verify(&both, None), Ok(()));
    }

    /// `none`, unknown algorithms and HS* without the client's secret are refused; HS256 with
    /// it verifies.
    #[test]
    fn only_the_accepted_algorithms() {
        let unsigned = format!(
            "{}.{}.",
            base64::encode_url(br#"{"alg":"none"}"#),
            base64::encode_url(b"{}")
        );
        assert_eq!(
            Compact::parse(&unsigned)
                .unwrap()
                .verify(&JwkSet::default(), None),
            Err(JwsError::Algorithm("none".into()))
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"client secret");
        let hs = token(serde_json::json!({"alg": "HS256"}), "{}", |m| {
            ring::hmac::sign(&key, m).as_ref().to_vec()
        });
        let parsed = Compact::parse(&hs).unwrap();
        assert_eq!(
            parsed.verify(&JwkSet::default(), None),
            Err(JwsError::Algorithm("HS256".into()))
        );
        assert_eq!(
            parsed.verify(&JwkSet::default(), Some(b"client secret")),
            Ok(())
        );
        assert_eq!(
            parsed.verify(&JwkSet::default(), Some(b"another")),
            Err(JwsError::Signature)
        );
        assert_eq!(Compact::parse("a.b").err(), Some(JwsError::Malformed));
    }
}
