//! Credentials like `gh auth login`: `svc login` signs in with e-mail and password, mints a
//! personal token named after the machine and keeps server and token in the user's config
//! file (mode 0600), used when neither `--token` nor `SVC_TOKEN` is given; `svc logout`
//! revokes the token and forgets it.

use super::http::{Body, CliError, Client};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// What `svc login` keeps.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    pub server: String,
    pub token: String,
    pub token_id: String,
}

/// `$XDG_CONFIG_HOME/svc/config`, else `~/.config/svc/config`.
fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("svc").join("config"))
}

impl Credentials {
    /// The stored credentials, if `svc login` left any.
    pub fn load() -> Option<Credentials> {
        serde_json::from_slice(&std::fs::read(path()?).ok()?).ok()
    }

    fn save(&self) -> Result<PathBuf, CliError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path =
            path().ok_or_else(|| CliError::Failed("no HOME to keep credentials in".into()))?;
        let failed =
            |e: std::io::Error| CliError::Failed(format!("cannot write {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        // Written beside the file, then renamed: never a half-written or readable token.
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(failed)?;
        let text = serde_json::to_vec_pretty(self).map_err(|e| CliError::Failed(e.to_string()))?;
        file.write_all(&text).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&tmp, &path).map_err(failed)?;
        Ok(path)
    }

    fn forget() -> Result<(), CliError> {
        match path() {
            Some(p) => match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CliError::Failed(
                    format!("cannot remove {}: {e}", p.display()),
                )),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }
}

/// One line from stdin after a prompt on stderr; a terminal does not echo a secret.
fn ask(prompt: &str, secret: bool) -> Result<String, CliError> {
    let stdin = std::io::stdin();
    let echo_off = secret && stdin.is_terminal() && stty("-echo");
    eprint!("{prompt}");
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if echo_off {
        stty("echo");
        eprintln!();
    }
    match read {
        Ok(0) => Err(CliError::Failed(format!(
            "no answer to {prompt:?} on stdin"
        ))),
        Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_string()),
        Err(e) => Err(CliError::Failed(format!("cannot read stdin: {e}"))),
    }
}

fn stty(arg: &str) -> bool {
    std::process::Command::new("stty")
        .arg(arg)
        .stdin(std::process::Stdio::inherit())
        .status()
        .is_ok_and(|s| s.success())
}

/// The token's name: this machine, so `svc token list` tells a user's devices apart.
fn machine() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into())
}

/// Signs in, mints the personal token, ends the session and keeps the token.
pub async fn login(client: &mut Client, email: Option<String>) -> Result<String, CliError> {
    let email = match email {
        Some(e) => e,
        None => ask("E-mail: ", false)?,
    };
    let password = ask("Password: ", true)?;
    client.sign_in(&email, &password).await?;
    let minted = client
        .json(
            Method::POST,
            "/api/v1/users/me/api-tokens",
            Body::Json(json!({"name": format!("svc-cli on {}", machine())})),
        )
        .await?;
    // The token is what the client keeps; the session is not needed any more.
    let _ = client.send(Method::GET, "/auth/logout", Body::None).await;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let credentials = Credentials {
        server: client.base().to_string(),
        token: text(&minted["token"]),
        token_id: text(&minted["meta"]["id"]),
    };
    let path = credentials.save()?;
    Ok(format!(
        "signed in to {} as {email}; token {} saved in {}\n",
        credentials.server,
        text(&minted["meta"]["name"]),
        path.display()
    ))
}

/// Revokes the stored token and forgets it; a token the server no longer knows is forgotten too.
pub async fn logout(client: &Client) -> Result<String, CliError> {
    let Some(stored) = Credentials::load() else {
        return Err(CliError::Failed(
            "not signed in: no stored credentials".into(),
        ));
    };
    let revoked = client
        .send(
            Method::DELETE,
            &format!("/api/v1/users/me/api-tokens/{}", stored.token_id),
            Body::None,
        )
        .await;
    Credentials::forget()?;
    match revoked {
        Ok(_) => Ok(format!("signed out of {}; token revoked\n", stored.server)),
        Err(CliError::Problem {
            status: 401 | 404, ..
        }) => Ok(format!(
            "signed out of {}; the server no longer knew the token\n",
            stored.server
        )),
        Err(e) => Err(e),
    }
}
