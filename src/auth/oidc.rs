//! OpenID Connect sign-in (SPEC 5.10): the Authorization Code flow with PKCE S256 against the
//! configured issuer, on svc's own HTTP client (rustls, no redirects followed, a deadline on
//! every request, answers capped at 1 MiB), with the id_token verified by `jws` (on `ring`):
//! OpenID Connect Core 1.0, 3.1.3.7, for a confidential or public client.
//!
//! The flow keeps no server-side state: `start` hands the browser a random `state` and PKCE
//! verifier for two short-lived cookies; the nonce the provider must echo in the id_token is
//! derived from the verifier, so it is bound to that browser's cookie and never appears in the
//! authorization URL next to the challenge. The provider's discovery document and keys are
//! cached for five minutes; a token signed with a key the cache lacks fetches them again once.

use super::crypto::{constant_time_eq, random_bytes};
use super::jws::{Compact, JwkSet, JwsError};
use super::sso::ExternalAccount;
use crate::config::OidcConfig;
use crate::model::{Timestamp, base64};
use crate::runtime::clock::SharedClock;
use crate::runtime::outbound::error_text;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// The cookies that carry a sign-in from `/auth/oidc` to `/auth/callback` (SPEC 5.10).
pub const STATE_COOKIE: &str = "svc_oidc_state";
pub const VERIFIER_COOKIE: &str = "svc_oidc_verifier";
/// How long a started sign-in stays valid: the cookies' Max-Age.
pub const FLOW_TTL: Duration = Duration::from_secs(600);
/// The scopes asked for when `oidc.scopes` is not given; an empty list asks for the minimum.
const DEFAULT_SCOPES: &[&str] = &["openid", "profile", "email", "groups"];
const MINIMUM_SCOPES: &[&str] = &["openid", "profile", "email"];
const DISCOVERY_TTL: Duration = Duration::from_secs(300);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ANSWER: usize = 1 << 20;
/// How far the provider's clock may be ahead of or behind ours for `exp` and `iat`.
const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// A sign-in to send the browser on: the provider's authorization URL and the two cookies'
/// values.
#[derive(Debug)]
pub struct Start {
    pub url: String,
    pub state: String,
    pub verifier: String,
}

/// Why a sign-in failed; the text is shown on the sign-in page, so it names no secret.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the sign-in was not started here or took longer than 10 minutes; start again")]
    NoFlow,
    #[error("the sign-in's state does not match the one this browser started; start again")]
    StateMismatch,
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
    #[error("the identity provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the identity provider's answer was rejected: {0}")]
    Rejected(String),
    #[error("the identity provider gave no e-mail address for this account")]
    NoEmail,
}

/// The provider's discovery document (OpenID Connect Discovery 1.0, 3), as far as it is used.
#[derive(Clone, Debug, Deserialize)]
struct Metadata {
    issuer: String,
    authorization_endpoint: String,
    #[serde(default)]
    token_endpoint: Option<String>,
    #[serde(default)]
    userinfo_endpoint: Option<String>,
    jwks_uri: String,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// The provider as discovered: its metadata and its keys.
struct Discovered {
    meta: Metadata,
    keys: JwkSet,
}

/// The token endpoint's answer (RFC 6749, 5.1), or its error (5.2).
#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    id_token: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// The relying party of one configured provider.
pub struct Oidc {
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    redirect: String,
    scopes: Vec<String>,
    groups_claim: String,
    /// The group whose members are also `admin` (`oidc.adminGroup`).
    pub admin_group: Option<String>,
    /// The issuer's host, for the sign-in page's button.
    pub provider_name: String,
    http: reqwest::Client,
    clock: SharedClock,
    discovered: tokio::sync::Mutex<Option<(Timestamp, Arc<Discovered>)>>,
}

/// The nonce of a flow: derived from its PKCE verifier, which only this browser's cookie holds.
fn nonce_of(verifier: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"svc oidc nonce\0");
    h.update(verifier.as_bytes());
    base64::encode_url(&h.finalize())
}

/// The PKCE S256 challenge of a verifier (RFC 7636, 4.2).
fn challenge_of(verifier: &str) -> String {
    base64::encode_url(&Sha256::digest(verifier.as_bytes()))
}

/// `N` random bytes, base64url: a state or a PKCE verifier (43 characters for 32 bytes).
fn random_text<const N: usize>() -> Result<String, OidcError> {
    random_bytes::<N>()
        .map(|b| base64::encode_url(&b))
        .ok_or_else(|| OidcError::Unreachable("no randomness from the system".into()))
}

/// The groups in a claim: a list of strings, or one string.
fn groups_in(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(g)) => vec![g.clone()],
        _ => Vec::new(),
    }
}

/// A text claim.
fn text<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    claims.get(name).and_then(Value::as_str)
}

/// The id_token's claims checked as OpenID Connect Core 1.0, 3.1.3.7 says (its signature is
/// checked before): issuer, audience (and `azp` when there are several), expiry, issue time,
/// nonce. `now` in seconds since the epoch.
fn check_claims(
    claims: &Map<String, Value>,
    issuer: &str,
    client_id: &str,
    nonce: &str,
    now: i64,
) -> Result<(), String> {
    let iss = text(claims, "iss").unwrap_or_default();
    if iss != issuer {
        return Err(format!("the id_token's issuer {iss:?} is not {issuer:?}"));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences.contains(&client_id) {
        return Err("the id_token's audience does not include this client".into());
    }
    if audiences.len() > 1 && text(claims, "azp") != Some(client_id) {
        return Err(
            "the id_token has several audiences and is not authorized for this client (azp)".into(),
        );
    }
    let skew = CLOCK_SKEW.as_secs() as i64;
    let seconds = |name: &str| claims.get(name).and_then(Value::as_i64);
    match seconds("exp") {
        Some(exp) if exp + skew > now => {}
        Some(_) => return Err("the id_token expired".into()),
        None => return Err("the id_token has no expiry (exp)".into()),
    }
    match seconds("iat") {
        Some(iat) if iat - skew <= now => {}
        Some(_) => return Err("the id_token was issued in the future (iat)".into()),
        None => return Err("the id_token has no issue time (iat)".into()),
    }
    let given = text(claims, "nonce").unwrap_or_default();
    if !constant_time_eq(given.as_bytes(), nonce.as_bytes()) {
        return Err("the id_token's nonce is not this sign-in's".into());
    }
    if text(claims, "sub").is_none_or(str::is_empty) {
        return Err("the id_token names no subject (sub)".into());
    }
    Ok(())
}

impl Oidc {
    /// The relying party for `config`, or `None` when OIDC is off (no issuer). `base_url` is the
    /// configuration's `baseUrl`; the redirect URL is it with `/auth/callback`.
    pub fn new(
        config: &OidcConfig,
        base_url: &str,
        clock: SharedClock,
    ) -> Result<Option<Self>, String> {
        if config.issuer.is_empty() {
            return Ok(None);
        }
        let issuer_url =
            url::Url::parse(&config.issuer).map_err(|e| format!("oidc.issuer: {e}"))?;
        if !matches!(issuer_url.scheme(), "http" | "https") {
            return Err("oidc.issuer: an http or https URL".into());
        }
        let redirect = format!("{}/auth/callback", base_url.trim_end_matches('/'));
        url::Url::parse(&redirect).map_err(|e| format!("baseUrl: {e}"))?;
        let provider_name = issuer_url
            .host_str()
            .unwrap_or("the identity provider")
            .to_string();
        let scopes = match &config.scopes {
            None => DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect(),
            Some(s) if s.is_empty() => MINIMUM_SCOPES.iter().map(|s| s.to_string()).collect(),
            Some(s) => s.clone(),
        };
        let http = crate::runtime::outbound::client(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("oidc: no HTTP client: {e}"))?;
        Ok(Some(Self {
            issuer: config.issuer.clone(),
            client_id: config.client_id.clone(),
            client_secret: (!config.client_secret.is_empty())
                .then(|| config.client_secret.0.clone()),
            redirect,
            scopes,
            groups_claim: config
                .groups_claim
                .clone()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "groups".into()),
            admin_group: config.admin_group.clone().filter(|g| !g.is_empty()),
            provider_name,
            http,
            clock,
            discovered: tokio::sync::Mutex::new(None),
        }))
    }

    /// A JSON answer of the provider, read to at most 1 MiB; a status other than 2xx is the
    /// error `refused` makes of the body.
    async fn answer<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
        refused: impl FnOnce(&[u8]) -> Option<OidcError>,
    ) -> Result<T, OidcError> {
        let mut res = request
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(format!("{what}: {}", error_text(&e))))?;
        let mut body = Vec::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| OidcError::Unreachable(format!("{what}: {}", error_text(&e))))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(OidcError::Rejected(format!("{what}: larger than 1 MiB")));
            }
            body.extend_from_slice(&chunk);
        }
        let status = res.status();
        if !status.is_success() {
            return Err(refused(&body).unwrap_or_else(|| {
                OidcError::Unreachable(format!("{what}: HTTP {}", status.as_u16()))
            }));
        }
        serde_json::from_slice(&body)
            .map_err(|e| OidcError::Rejected(format!("{what}: not the JSON expected: {e}")))
    }

    /// The provider's metadata and keys: cached, or fetched when stale or when `refresh`.
    async fn discovered(&self, refresh: bool) -> Result<Arc<Discovered>, OidcError> {
        let mut cached = self.discovered.lock().await;
        let now = self.clock.now();
        if let Some((at, found)) = cached.as_ref()
            && !refresh
            && now.since(*at) < DISCOVERY_TTL
        {
            return Ok(found.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let meta: Metadata = self
            .answer(self.http.get(&url), "discovery", |_| None)
            .await?;
        // Discovery 1.0, 4.3: the document is the issuer's own.
        if meta.issuer != self.issuer {
            return Err(OidcError::Rejected(format!(
                "the discovery document's issuer {:?} is not {:?}",
                meta.issuer, self.issuer
            )));
        }
        let keys: JwkSet = self
            .answer(self.http.get(&meta.jwks_uri), "the provider's keys", |_| {
                None
            })
            .await?;
        let found = Arc::new(Discovered { meta, keys });
        *cached = Some((now, found.clone()));
        Ok(found)
    }

    /// Starts a sign-in: where to send the browser, and what its cookies keep.
    pub async fn start(&self) -> Result<Start, OidcError> {
        let found = self.discovered(false).await?;
        let state = random_text::<16>()?;
        let verifier = random_text::<32>()?;
        let mut url = url::Url::parse(&found.meta.authorization_endpoint).map_err(|e| {
            OidcError::Rejected(format!("the authorization endpoint is not a URL: {e}"))
        })?;
        let scope = std::iter::once("openid")
            .chain(
                self.scopes
                    .iter()
                    .map(String::as_str)
                    .filter(|s| *s != "openid"),
            )
            .collect::<Vec<_>>()
            .join(" ");
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge_of(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", &self.redirect)
            .append_pair("scope", &scope)
            .append_pair("nonce", &nonce_of(&verifier));
        Ok(Start {
            url: url.to_string(),
            state,
            verifier,
        })
    }

    /// The code exchanged at the token endpoint with the PKCE verifier, the client
    /// authenticated as the provider supports (`client_secret_basic` unless it only names
    /// `client_secret_post`; a public client sends its id).
    async fn exchange(
        &self,
        meta: &Metadata,
        code: &str,
        verifier: &str,
    ) -> Result<TokenAnswer, OidcError> {
        let endpoint = meta
            .token_endpoint
            .as_deref()
            .ok_or_else(|| OidcError::Rejected("the provider names no token endpoint".into()))?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect.as_str()),
            ("code_verifier", verifier),
        ];
        let mut request = self.http.post(endpoint);
        let post_only = meta
            .token_endpoint_auth_methods_supported
            .as_ref()
            .is_some_and(|m| {
                m.iter().any(|m| m == "client_secret_post")
                    && !m.iter().any(|m| m == "client_secret_basic")
            });
        match &self.client_secret {
            Some(secret) if post_only => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", secret));
            }
            // RFC 6749, 2.3.1: each part form-encoded before they are joined.
            Some(secret) => {
                let encode =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                let basic = base64::encode(
                    format!("{}:{}", encode(&self.client_id), encode(secret)).as_bytes(),
                );
                request = request.header(reqwest::header::AUTHORIZATION, format!("Basic {basic}"));
            }
            None => form.push(("client_id", &self.client_id)),
        }
        let body =
            serde_urlencoded::to_string(&form).map_err(|e| OidcError::Rejected(e.to_string()))?;
        let request = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        self.answer(request, "the token endpoint", |body| {
            // Only the error code is shown (from RFC 6749's fixed set), not the description.
            let answer: TokenAnswer = serde_json::from_slice(body).ok()?;
            let code: String = answer
                .error?
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect();
            Some(OidcError::Refused(code))
        })
        .await
    }

    /// The id_token's claims once its signature verifies with the provider's keys, fetched
    /// again once when none of the cached ones fits or verifies (the keys rotated).
    async fn verified_claims(
        &self,
        found: &Discovered,
        token: &Compact<'_>,
    ) -> Result<Map<String, Value>, OidcError> {
        let secret = self.client_secret.as_deref().map(str::as_bytes);
        let verified = match token.verify(&found.keys, secret) {
            Err(JwsError::NoKey | JwsError::Signature) => {
                let fresh = self.discovered(true).await?;
                token.verify(&fresh.keys, secret)
            }
            other => other,
        };
        verified.map_err(|e| OidcError::Rejected(e.to_string()))?;
        serde_json::from_slice(&token.payload)
            .map_err(|_| OidcError::Rejected("the id_token's claims are not a JSON object".into()))
    }

    /// Finishes a sign-in at the callback: the state checked against the cookie's, the code
    /// exchanged with the verifier, the id_token verified (signature by the provider's keys,
    /// issuer, audience, expiry, nonce), the claims completed from the userinfo endpoint.
    pub async fn finish(
        &self,
        code: &str,
        state: &str,
        state_cookie: Option<&str>,
        verifier_cookie: Option<&str>,
    ) -> Result<ExternalAccount, OidcError> {
        let (Some(expected), Some(verifier)) = (state_cookie, verifier_cookie) else {
            return Err(OidcError::NoFlow);
        };
        if state.is_empty() || !constant_time_eq(state.as_bytes(), expected.as_bytes()) {
            return Err(OidcError::StateMismatch);
        }
        let found = self.discovered(false).await?;
        let tokens = self.exchange(&found.meta, code, verifier).await?;
        let raw = tokens
            .id_token
            .ok_or_else(|| OidcError::Rejected("no id_token in the token answer".into()))?;
        let token = Compact::parse(&raw).map_err(|e| OidcError::Rejected(e.to_string()))?;
        let claims = self.verified_claims(&found, &token).await?;
        let now = self.clock.now().as_millis() / 1000;
        check_claims(
            &claims,
            &self.issuer,
            &self.client_id,
            &nonce_of(verifier),
            now,
        )
        .map_err(OidcError::Rejected)?;
        let subject = text(&claims, "sub").unwrap_or_default().to_string();
        let mut email = text(&claims, "email").map(str::to_string);
        let mut name = text(&claims, "name").map(str::to_string);
        let mut groups = claims.get(&self.groups_claim).cloned();
        if (email.is_none() || name.is_none() || groups.is_none())
            && let (Some(endpoint), Some(access)) = (
                found.meta.userinfo_endpoint.as_deref(),
                &tokens.access_token,
            )
        {
            let info: Map<String, Value> = self
                .answer(
                    self.http.get(endpoint).bearer_auth(access),
                    "userinfo",
                    |_| None,
                )
                .await?;
            // Core 1.0, 5.3.2: the answer is about the id_token's subject, or not used.
            if text(&info, "sub") != Some(subject.as_str()) {
                return Err(OidcError::Rejected(
                    "userinfo: the answer is about another subject".into(),
                ));
            }
            email = email.or_else(|| text(&info, "email").map(str::to_string));
            name = name.or_else(|| text(&info, "name").map(str::to_string));
            groups = groups.or_else(|| info.get(&self.groups_claim).cloned());
        }
        let email = email
            .map(|e| e.trim().to_lowercase())
            .filter(|e| !e.is_empty())
            .ok_or(OidcError::NoEmail)?;
        Ok(ExternalAccount {
            subject: format!("{}|{subject}", self.issuer),
            name: name
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| email.clone()),
            email,
            groups: groups_in(groups.as_ref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nonce_is_bound_to_the_verifier_and_is_not_its_challenge() {
        let verifier = "a".repeat(43);
        assert_eq!(nonce_of(&verifier), nonce_of(&"a".repeat(43)));
        assert_ne!(nonce_of(&verifier), nonce_of(&"b".repeat(43)));
        assert_ne!(nonce_of(&verifier), challenge_of(&verifier));
        // RFC 7636, appendix B.
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    /// Core 1.0, 3.1.3.7: one wrong claim each, refused and named.
    #[test]
    fn claims_are_checked_as_the_core_spec_says() {
        let now = 1_800_000_000;
        let good = serde_json::json!({
            "iss": "https://idp.example", "aud": "svc", "sub": "u1", "nonce": "n",
            "exp": now + 300, "iat": now - 5,
        });
        let check = |change: Value| {
            let mut claims = good.as_object().unwrap().clone();
            for (k, v) in change.as_object().unwrap() {
                if v.is_null() {
                    claims.remove(k);
                } else {
                    claims.insert(k.clone(), v.clone());
                }
            }
            check_claims(&claims, "https://idp.example", "svc", "n", now)
        };
        assert_eq!(check(serde_json::json!({})), Ok(()));
        assert_eq!(check(serde_json::json!({"aud": ["svc"]})), Ok(()));
        for (change, says) in [
            (serde_json::json!({"iss": "https://evil.example"}), "issuer"),
            (serde_json::json!({"aud": "other"}), "audience"),
            (serde_json::json!({"aud": ["svc", "other"]}), "azp"),
            (serde_json::json!({"exp": now - 61}), "expired"),
            (serde_json::json!({"exp": null}), "exp"),
            (serde_json::json!({"iat": now + 3600}), "future"),
            (serde_json::json!({"nonce": "m"}), "nonce"),
            (serde_json::json!({"nonce": null}), "nonce"),
            (serde_json::json!({"sub": ""}), "subject"),
        ] {
            let refused = check(change.clone()).expect_err(&change.to_string());
            assert!(refused.contains(says), "{change}: {refused}");
        }
        assert_eq!(
            check(serde_json::json!({"aud": ["svc", "other"], "azp": "svc"})),
            Ok(())
        );
    }

    #[test]
    fn groups_are_a_list_or_one_string() {
        assert_eq!(
            groups_in(Some(&serde_json::json!(["ops", 3, "noc"]))),
            vec!["ops".to_string(), "noc".to_string()]
        );
        assert_eq!(
            groups_in(Some(&serde_json::json!("ops"))),
            vec!["ops".to_string()]
        );
        assert!(groups_in(None).is_empty());
        assert!(groups_in(Some(&serde_json::json!({"a": 1}))).is_empty());
    }

    #[test]
    fn states_compare_whole() {
        let same = |a: &str, b: &str| constant_time_eq(a.as_bytes(), b.as_bytes());
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
    }
}
