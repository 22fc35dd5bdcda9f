//! `svc token`: create, list and revoke API tokens.

use super::*;

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
            let body = if personal {
                json!({"name": name, "expiresAt": expires_at})
            } else {
                json!({"name": name, "scopes": scopes, "roles": roles, "expiresAt": expires_at})
            };
            let v = c
                .json(Method::POST, mine(personal), Body::Json(body))
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!(
                    "token {} ({}) created; its secret, shown once:\n{}\n",
                    cell(&v["meta"]["name"], 80),
                    cell(&v["meta"]["id"], 40),
                    cell(&v["token"], 80)
                )
            }
        }
        TokenCommand::List { mine: personal } => {
            let v = c.get(mine(personal)).await?;
            if as_json { pretty(&v) } else { tokens(&v) }
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
