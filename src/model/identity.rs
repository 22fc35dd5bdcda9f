//! Who acts: actor types, API tokens, the whoami view, tenants' create payload.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    User,
    Token,
    AiAgent,
    System,
}

impl ActorType {
    pub fn as_str(&self) -> &'static str {
        match self {
            ActorType::User => "user",
            ActorType::Token => "token",
            ActorType::AiAgent => "ai_agent",
            ActorType::System => "system",
        }
    }
}

/// Who performs a mutation, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub actor_type: ActorType,
    pub actor_id: String,
    /// TCP peer address (never X-Forwarded-For).
    pub source_ip: String,
    pub request_id: String,
}

impl Actor {
    /// The service itself (start-up seeding, `svc bootstrap`).
    pub fn system(what: &str) -> Self {
        Self {
            actor_type: ActorType::System,
            actor_id: what.to_string(),
            source_ip: String::new(),
            request_id: String::new(),
        }
    }

    /// Someone without an account acting on a public page (a status page's subscriber),
    /// known only by address.
    pub fn visitor(what: &str, source_ip: String) -> Self {
        Self {
            source_ip,
            ..Self::system(what)
        }
    }
}

/// An API token's metadata; the secret's hash is never part of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    /// The first 8 hex characters of the secret, for lookup and for people to recognise it.
    pub prefix: String,
    pub scopes: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub ip_bind: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    #[serde(default)]
    pub ai_agent: bool,
    /// The federation site this token may pull and report for (`sites:connect`); other
    /// sites' `:pull`, `:heartbeat` and `:events` are 403 to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// A personal token's user: it acts as that user, with the user's current roles, and
    /// stops working when the user is disabled or deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Uuid>,
    pub created_at: Timestamp,
    pub created_by: String,
    pub version: u64,
}

/// `POST /api/v1/api-tokens`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub ip_bind: Vec<String>,
    /// Kept as text so a bad value is a `svc:validation/expiresAt`, not a body error.
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub ai_agent: bool,
    /// Binds the token to one federation site (see `ApiToken::site`).
    #[serde(default)]
    pub site: Option<String>,
}

/// `POST /api/v1/users/me/api-tokens`: a token that acts as the signed-in user.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersonalTokenRequest {
    pub name: String,
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// A freshly minted or rotated token: the secret, shown once, and its metadata.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MintedToken {
    pub token: String,
    pub meta: ApiToken,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Whoami {
    pub actor_type: ActorType,
    pub actor_id: String,
    pub name: String,
    pub tenant_id: Uuid,
    pub permissions: Vec<String>,
}

/// `POST /api/v1/tenants`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantRequest {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    /// E-mail domains the tenant claims (`Tenant::email_domains`).
    #[serde(default)]
    pub email_domains: Vec<String>,
}

/// `PUT /api/v1/tenants/{id}`: the fields given change.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantChange {
    pub name: Option<String>,
    pub email_domains: Option<Vec<String>>,
}

/// A token as stored: its metadata and the argon2id hash of its secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredToken {
    pub meta: ApiToken,
    pub secret_hash: String,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// A person who signs in. `local` users have a password here; others come from SSO or LDAP.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub email: String,
    pub name: String,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub local: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(default)]
    pub disabled: bool,
    /// Disabled by a directory sync because the person had left the directory: the sync that
    /// finds them again enables the account. An administrator's `disabled` clears it, so an
    /// account an administrator disabled stays so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled_by_directory: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

/// What a directory account's subject starts with (SPEC 5.11): `ldap|` and its DN or id.
pub const DIRECTORY_SUBJECT: &str = "ldap|";

impl User {
    pub fn is_enabled_admin(&self) -> bool {
        !self.disabled && self.roles.iter().any(|r| r == "admin")
    }

    /// An account of the LDAP directory (not local, its subject `ldap|…`).
    pub fn is_directory_account(&self) -> bool {
        !self.local && self.subject.starts_with(DIRECTORY_SUBJECT)
    }
}

/// A user as stored, with the password hash the API never shows.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredUser {
    pub user: User,
    #[serde(default)]
    pub password_hash: Option<String>,
}

impl std::fmt::Debug for StoredUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredUser")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// `POST /api/v1/users`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateUser {
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub disabled: bool,
}

/// `PUT /api/v1/users/{id}`: only the fields given change.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateUser {
    pub email: Option<String>,
    pub name: Option<String>,
    pub roles: Option<Vec<String>>,
    pub disabled: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetPassword {
    #[serde(default)]
    pub password: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangePassword {
    pub old_password: String,
    pub new_password: String,
}

/// A browser session, stored server side so it survives restarts.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    pub user_id: Uuid,
    pub tenant_id: Uuid,
    pub roles: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<Timestamp>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("user_id", &self.user_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Whether a permission string is well formed: `*`, or `resource:action` of lower-case words,
/// either side possibly `*`.
pub fn is_permission(p: &str) -> bool {
    if p == "*" {
        return true;
    }
    let word = |s: &str| {
        s == "*" || (!s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
    };
    matches!(p.split_once(':'), Some((r, a)) if word(r) && word(a))
}

#[cfg(test)]
mod tests {
    use super::is_permission;

    #[test]
    fn permission_syntax() {
        for ok in ["*", "*:*", "admin:*", "objects:read", "admin:ai"] {
            assert!(is_permission(ok), "{ok}");
        }
        for bad in [
            "",
            "objects",
            "objects:",
            ":read",
            "Objects:read",
            "a:b:c",
            "a b:c",
        ] {
            assert!(!is_permission(bad), "{bad}");
        }
    }
}

/// The console's look, instance wide (`/api/v1/branding`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Branding {
    /// Colour mode: `light`, `dark`, or `system` (also `auto` or empty): as each device is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Theme name of the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
    /// The name the console shows in its header, page titles and sign-in page instead of
    /// `svc` (at most 64 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The header's colour, `#rrggbb`; its text is black or white, whichever reads better.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accent_color: Option<String>,
    /// The logo as a `data:` URI of a PNG, JPEG or WebP image of at most 64 KiB
    /// (`data:image/png;base64,...`); served to pages at `/branding/logo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo: Option<String>,
}

/// The colour modes a branding may name (`system`, `auto` and empty: as each device is set).
pub const BRANDING_MODES: [&str; 5] = ["light", "dark", "system", "auto", ""];

/// The largest logo, decoded.
pub const LOGO_MAX: usize = 64 * 1024;

/// The image types a logo may have, with the bytes each file starts with. SVG is not among
/// them: it can carry script.
const LOGO_TYPES: [(&str, &[u8]); 3] = [
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/webp", b"RIFF"),
];

impl Branding {
    /// Why the branding cannot be kept, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if let Some(mode) = &self.mode
            && !BRANDING_MODES.contains(&mode.as_str())
        {
            return Err(format!(
                "mode {mode:?} must be one of {}",
                BRANDING_MODES.join(", ")
            ));
        }
        for (field, text, max) in [
            ("mode", &self.mode, 200),
            ("theme", &self.theme, 200),
            ("name", &self.name, 64),
        ] {
            if let Some(text) = text
                && (text.chars().count() > max || text.chars().any(char::is_control))
            {
                return Err(format!(
                    "{field} {text:?} has more than {max} characters or control characters"
                ));
            }
        }
        if let Some(colour) = &self.accent_color
            && parse_colour(colour).is_none()
        {
            return Err(format!("accentColor {colour:?} is not #rrggbb"));
        }
        if self.logo.is_some() {
            self.logo_image()?;
        }
        Ok(())
    }

    /// The logo's media type and bytes; an error names what is wrong with it.
    pub fn logo_image(&self) -> Result<(&'static str, Vec<u8>), String> {
        let uri = self.logo.as_deref().ok_or("there is no logo")?;
        let (head, data) = uri
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
            .ok_or("the logo is not a data: URI with base64 (data:image/png;base64,...)")?;
        let (media, magic) = LOGO_TYPES
            .iter()
            .find(|(media, _)| media.eq_ignore_ascii_case(head.trim()))
            .ok_or_else(|| format!("a logo of type {head:?}: PNG, JPEG or WebP only"))?;
        if data.len() > LOGO_MAX * 4 / 3 + 4 {
            return Err(format!("the logo is larger than {} KiB", LOGO_MAX / 1024));
        }
        let bytes = super::base64::decode(data).ok_or("the logo's base64 does not decode")?;
        if bytes.len() > LOGO_MAX {
            return Err(format!("the logo is larger than {} KiB", LOGO_MAX / 1024));
        }
        if !bytes.starts_with(magic)
            || (*media == "image/webp" && bytes.get(8..12) != Some(b"WEBP"))
        {
            return Err(format!("the logo's bytes are not a {media} image"));
        }
        Ok((media, bytes))
    }

    /// The header's background and the text colour that reads on it (black or white,
    /// whichever contrasts more: at least 4.5:1 for any background).
    pub fn header_colours(&self) -> Option<(String, &'static str)> {
        let (r, g, b) = parse_colour(self.accent_color.as_deref()?)?;
        let linear = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let luminance = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
        let on_black = (luminance + 0.05) / 0.05;
        let on_white = 1.05 / (luminance + 0.05);
        let text = if on_black >= on_white { "#000" } else { "#fff" };
        Some((format!("#{r:02x}{g:02x}{b:02x}"), text))
    }
}

/// `#rrggbb` as its three channels.
fn parse_colour(s: &str) -> Option<(u8, u8, u8)> {
    let hex = s
        .strip_prefix('#')
        .filter(|h| h.len() == 6 && h.is_ascii())?;
    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    Some((channel(0)?, channel(2)?, channel(4)?))
}

/// A user's console preferences (`/api/v1/users/{id}/preferences`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preferences {
    /// How often lists refresh, in milliseconds (0: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval_ms: Option<u64>,
    /// Further settings of the console, by name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub extra: std::collections::BTreeMap<String, String>,
}

/// A browser's Web Push subscription (`/api/v1/push-subscriptions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushSubscription {
    /// The push service URL the browser handed out (`PushSubscription.endpoint`).
    pub endpoint: String,
    /// The subscription's keys: base64 text, or the browser's `{p256dh, auth}` object.
    pub keys: serde_json::Value,
}

/// `GET /api/v1/push-subscriptions/key`: what browsers subscribe with.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PushKey {
    /// The instance's VAPID public key: the uncompressed P-256 point, base64url.
    pub public_key: String,
}

/// `DELETE /api/v1/push-subscriptions`: the subscription to forget, by endpoint.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushUnsubscribe {
    pub endpoint: String,
    /// Ignored: accepted so the subscription object itself can be sent back.
    #[serde(default)]
    pub keys: Option<serde_json::Value>,
}

/// A rate limit's token bucket for one client address: the tokens it held when last touched.
/// Kept in the store where several processes serve it (PostgreSQL), so an address has one
/// bucket across them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateBucket {
    pub tokens: f64,
    pub last: Timestamp,
}
