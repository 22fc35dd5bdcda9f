//! OpenID Connect sign-in (SPEC 5.10): the Authorization Code flow with PKCE S256 against the
//! configured issuer, through the `openidconnect` crate on svc's own HTTP client (rustls, no
//! redirects followed, a deadline on every request, answers capped at 1 MiB).
//!
//! The flow keeps no server-side state: `start` hands the browser a random `state` and PKCE
//! verifier for two short-lived cookies; the nonce the provider must echo in the id_token is
//! derived from the verifier, so it is bound to that browser's cookie and never appears in the
//! authorization URL next to the challenge. The provider's discovery document and keys are
//! cached for five minutes; a token signed with a key the cache lacks fetches them again once.

use super::crypto::constant_time_eq;
use super::sso::ExternalAccount;
use crate::config::OidcConfig;
use crate::model::Timestamp;
use crate::runtime::clock::SharedClock;
use crate::runtime::outbound::error_text;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreGenderClaim, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AdditionalClaims, AsyncHttpClient, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IdToken, IssuerUrl,
    Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    TokenResponse, UserInfoClaims,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::pin::Pin;
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

/// Claims beyond the standard ones (the groups claim among them), as the provider sent them.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct OtherClaims {
    #[serde(flatten)]
    claims: Map<String, Value>,
}

impl AdditionalClaims for OtherClaims {}

/// A client made from the provider's discovery document: its authorization endpoint is
/// known, its token and userinfo endpoints may be.
type DiscoveredClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

type ProviderIdToken = IdToken<
    OtherClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

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

/// svc's HTTP client as the crate's: the request goes out as built, no redirect is followed.
struct Http(reqwest::Client);

impl<'c> AsyncHttpClient<'c> for Http {
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, std::io::Error>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request).map_err(std::io::Error::other)?;
            let mut answer = self
                .0
                .execute(request)
                .await
                .map_err(std::io::Error::other)?;
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await.map_err(std::io::Error::other)? {
                if body.len() + chunk.len() > MAX_ANSWER {
                    return Err(std::io::Error::other("the answer is larger than 1 MiB"));
                }
                body.extend_from_slice(&chunk);
            }
            let mut out = openidconnect::http::Response::new(body);
            *out.status_mut() = answer.status();
            *out.headers_mut() = std::mem::take(answer.headers_mut());
            Ok(out)
        })
    }
}

/// The relying party of one configured provider.
pub struct Oidc {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    scopes: Vec<String>,
    groups_claim: String,
    /// The group whose members are also `admin` (`oidc.adminGroup`).
    pub admin_group: Option<String>,
    /// The issuer's host, for the sign-in page's button.
    pub provider_name: String,
    http: Http,
    clock: SharedClock,
    discovered: tokio::sync::Mutex<Option<(Timestamp, CoreProviderMetadata)>>,
}

/// The nonce of a flow: derived from its PKCE verifier, which only this browser's cookie holds.
fn nonce_of(verifier: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"svc oidc nonce\0");
    h.update(verifier.as_bytes());
    crate::model::base64::encode_url(&h.finalize())
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
        let issuer =
            IssuerUrl::new(config.issuer.clone()).map_err(|e| format!("oidc.issuer: {e}"))?;
        let redirect =
            RedirectUrl::new(format!("{}/auth/callback", base_url.trim_end_matches('/')))
                .map_err(|e| format!("baseUrl: {e}"))?;
        let provider_name = issuer
            .url()
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
            issuer,
            client_id: ClientId::new(config.client_id.clone()),
            client_secret: (!config.client_secret.is_empty())
                .then(|| ClientSecret::new(config.client_secret.0.clone())),
            redirect,
            scopes,
            groups_claim: config
                .groups_claim
                .clone()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "groups".into()),
            admin_group: config.admin_group.clone().filter(|g| !g.is_empty()),
            provider_name,
            http: Http(http),
            clock,
            discovered: tokio::sync::Mutex::new(None),
        }))
    }

    /// The provider's metadata and keys: cached, or fetched when stale or when `refresh`.
    async fn metadata(&self, refresh: bool) -> Result<CoreProviderMetadata, OidcError> {
        let mut cached = self.discovered.lock().await;
        let now = self.clock.now();
        if let Some((at, meta)) = cached.as_ref()
            && !refresh
            && now.since(*at) < DISCOVERY_TTL
        {
            return Ok(meta.clone());
        }
        let meta = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| OidcError::Unreachable(error_text(&e)))?;
        *cached = Some((now, meta.clone()));
        Ok(meta)
    }

    fn client(&self, meta: CoreProviderMetadata) -> DiscoveredClient {
        CoreClient::from_provider_metadata(meta, self.client_id.clone(), self.client_secret.clone())
            .set_redirect_uri(self.redirect.clone())
    }

    /// Starts a sign-in: where to send the browser, and what its cookies keep.
    pub async fn start(&self) -> Result<Start, OidcError> {
        let client = self.client(self.metadata(false).await?);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let nonce = nonce_of(verifier.secret());
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                move || Nonce::new(nonce),
            )
            .set_pkce_challenge(challenge);
        for scope in self.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, _) = request.url();
        Ok(Start {
            url: url.to_string(),
            state: state.secret().clone(),
            verifier: verifier.secret().clone(),
        })
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
        let meta = self.metadata(false).await?;
        let client = self.client(meta);
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| OidcError::Rejected(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|e| OidcError::Refused(error_text(&e)))?;
        let raw = tokens
            .id_token()
            .ok_or_else(|| OidcError::Rejected("no id_token in the token answer".into()))?
            .to_string();
        let id_token: ProviderIdToken = raw
            .parse()
            .map_err(|e: serde_json::Error| OidcError::Rejected(e.to_string()))?;
        let nonce = Nonce::new(nonce_of(verifier));
        let claims = match id_token.claims(&client.id_token_verifier(), &nonce) {
            Ok(c) => c.clone(),
            // A key the cached set lacks: the provider may have rotated its keys.
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
                let fresh = self.client(self.metadata(true).await?);
                id_token
                    .claims(&fresh.id_token_verifier(), &nonce)
                    .map_err(|e| OidcError::Rejected(e.to_string()))?
                    .clone()
            }
            Err(e) => return Err(OidcError::Rejected(e.to_string())),
        };
        let mut email = claims.email().map(|e| e.as_str().to_string());
        let mut name = claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.as_str().to_string());
        let mut groups = claims
            .additional_claims()
            .claims
            .get(&self.groups_claim)
            .cloned();
        if (email.is_none() || name.is_none() || groups.is_none())
            && let Ok(request) = client.user_info(
                tokens.access_token().clone(),
                Some(claims.subject().clone()),
            )
        {
            let info: UserInfoClaims<OtherClaims, CoreGenderClaim> = request
                .request_async(&self.http)
                .await
                .map_err(|e| OidcError::Rejected(format!("userinfo: {}", error_text(&e))))?;
            email = email.or_else(|| info.email().map(|e| e.as_str().to_string()));
            name = name.or_else(|| {
                info.name()
                    .and_then(|n| n.get(None))
                    .map(|n| n.as_str().to_string())
            });
            groups = groups.or_else(|| {
                info.additional_claims()
                    .claims
                    .get(&self.groups_claim)
                    .cloned()
            });
        }
        let email = email
            .map(|e| e.trim().to_lowercase())
            .filter(|e| !e.is_empty())
            .ok_or(OidcError::NoEmail)?;
        Ok(ExternalAccount {
            subject: format!("{}|{}", claims.issuer().as_str(), claims.subject().as_str()),
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
        let verifier = PkceCodeVerifier::new("a".repeat(43));
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&verifier);
        assert_eq!(nonce_of(verifier.secret()), nonce_of(&"a".repeat(43)));
        assert_ne!(nonce_of(verifier.secret()), nonce_of(&"b".repeat(43)));
        assert_ne!(nonce_of(verifier.secret()), challenge.as_str());
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
