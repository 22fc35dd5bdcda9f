//! `svc token`: create, list and revoke API tokens.

use super::*;
use crate::model::identity::{MintedToken, PersonalTokenRequest, TokenRequest};

pub(super) async fn token(
    c: &Client,
    as_json: bool,
    what: TokenCommand,
) -> Result<String, CliError> {
    let mine = |yes: bool| {
        if yes {
            "/api/v1/users/me/api-tokens"
        } else {
            "/api/v1/api-tokens"
        }
    };
    Ok(match what {
        TokenCommand::Create {
            name,
            scopes,
            roles,
            expires_at,
        } => {
            let personal = scopes.is_empty() && roles.is_empty();
            let request = if personal {
                body(&PersonalTokenRequest { name, expires_at })?
            } else {
                body(&TokenRequest {
                    name,
                    scopes,
                    roles,
                    expires_at,
                    ..TokenRequest::default()
                })?
            };
            let v = c.json(Method::POST, mine(personal), request).await?;
            if as_json {
                pretty(&v)
            } else {
                let minted: MintedToken = wire(&v)?;
                format!(
                    "token {} ({}) created; its secret, shown once:\n{}\n",
                    text(&minted.meta.name, 80),
                    minted.meta.id,
                    text(&minted.token, 80)
                )
            }
        }
        TokenCommand::List { mine: personal } => {
            let v = c.get(mine(personal)).await?;
            if as_json { pretty(&v) } else { tokens(&v)? }
        }
        TokenCommand::Revoke { id, mine: personal } => {
            c.send(
                Method::DELETE,
                &format!("{}/{id}", mine(personal)),
                Body::None,
            )
            .await?;
            if as_json {
                pretty(&json!({"revoked": id}))
            } else {
                format!("token {id} revoked\n")
            }
        }
    })
}
