//! Secrets as stored and as listed: the value exists only sealed. Documents name a secret as
//! `$SECRET:name$`, and only in fields meant for credentials.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What `GET /api/v1/secrets` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecretMeta {
    pub tenant_id: Uuid,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSecret {
    pub meta: SecretMeta,
    pub nonce: Vec<u8>,
    pub sealed: Vec<u8>,
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSecret")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// How a document names a secret.
pub const REFERENCE_PREFIX: &str = "$SECRET:";

/// `$SECRET:name$`.
pub fn reference(name: &str) -> String {
    format!("{REFERENCE_PREFIX}{name}$")
}

/// Whether a value names a secret anywhere in it.
pub fn has_reference(value: &str) -> bool {
    value.contains(REFERENCE_PREFIX)
}

/// Whether a channel configuration key holds a credential: its plain value is stored as a
/// secret, and `$SECRET:name$` may be used in it. Header names that carry credentials
/// (`header.Authorization`, `header.X-Api-Key`...) count too.
pub fn is_credential_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    match k.strip_prefix("header.") {
        Some(header) => ["auth", "token", "key", "secret", "password", "cookie"]
            .iter()
            .any(|w| header.contains(w)),
        None => matches!(
            k.as_str(),
            "secret" | "password" | "token" | "apikey" | "api_key" | "authtoken" | "pin"
        ),
    }
}

/// Whether `$SECRET:name$` may stand in a channel configuration value under `key`: credentials,
/// headers and script arguments take it anywhere, a URL only past its host (a token in a
/// webhook path), nothing else.
pub fn reference_allowed(key: &str, value: &str) -> bool {
    if !has_reference(value) {
        return true;
    }
    if is_credential_key(key) || key.starts_with("header.") || key == "args" {
        return true;
    }
    key == "url" && !has_reference(url_authority(value))
}

/// The scheme and authority of a URL (`https://user@host:port`), the part a secret may not reach.
pub fn url_authority(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let end = url[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after_scheme + i);
    &url[..end]
}

/// Replaces every occurrence of the values in `text` with `********`, so a secret a check or a
/// channel used does not come back in what it printed. Values shorter than 4 characters are
/// left alone: masking them would garble text without protecting anything.
pub fn mask_values<'a>(text: &str, values: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = text.to_string();
    for v in values {
        if v.chars().count() >= 4 {
            out = out.replace(v, MASK);
        }
    }
    out
}

pub const MASK: &str = "********";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_stay_in_credential_fields() {
        assert!(is_credential_key("password"));
        assert!(is_credential_key("header.Authorization"));
        assert!(is_credential_key("header.X-Api-Key"));
        assert!(!is_credential_key("header.X-Env"));
        assert!(!is_credential_key("url"));
        assert!(reference_allowed(
            "url",
            "https://hooks.example/T/$SECRET:slack$"
        ));
        assert!(!reference_allowed("url", "https://$SECRET:host$/x"));
        assert!(!reference_allowed(
            "url",
            "https://example.org:$SECRET:p$/x"
        ));
        assert!(!reference_allowed("host", "$SECRET:relay$"));
        assert!(reference_allowed("header.X-Env", "$SECRET:env$"));
        assert_eq!(
            url_authority("https://a.example:8443/x?y"),
            "https://a.example:8443"
        );
        assert_eq!(url_authority("https://a.example"), "https://a.example");
        assert_eq!(
            mask_values("string TOPSECRET not found; pin 12", ["TOPSECRET", "12"]),
            "string ******** not found; pin 12"
        );
    }
}
