//! The client's one HTTP path: bearer token, 60 s timeout, 16 MiB read limit, problem
//! documents turned into errors that print as title, code and detail (SPEC 4.6), and every text
//! the server sends made safe for a terminal before anything prints it.

use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::fmt;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);
const READ_LIMIT: usize = 16 * 1024 * 1024;

/// How a command failed; every one exits 1.
#[derive(Debug)]
pub enum CliError {
    /// The server answered with a problem document (or another error status).
    Problem {
        status: u16,
        title: String,
        code: String,
        detail: String,
    },
    /// The request did not get an answer, or the answer could not be read.
    Transport(String),
    /// The command could not do what was asked: its input was wrong, a name named nothing, or
    /// what it checks is not well.
    Failed(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Problem {
                status,
                title,
                code,
                detail,
            } => {
                write!(f, "{title} ({status})")?;
                if !code.is_empty() {
                    write!(f, "\n  code:   {code}")?;
                }
                if !detail.is_empty() {
                    write!(f, "\n  detail: {detail}")?;
                }
                Ok(())
            }
            CliError::Transport(why) | CliError::Failed(why) => f.write_str(why),
        }
    }
}

pub struct Client {
    http: reqwest::Client,
    /// For the event stream, which has no end: only connecting is bounded.
    streaming: reqwest::Client,
    base: String,
    token: Option<String>,
    /// A session cookie, while `svc login` mints its token.
    session: Option<String>,
}

/// A request body.
pub enum Body {
    None,
    Json(Value),
    Text(&'static str, String),
}

impl Client {
    pub fn new(server: &str, token: Option<String>, insecure: bool) -> Result<Client, CliError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let build = |b: reqwest::ClientBuilder| {
            b.danger_accept_invalid_certs(insecure)
                .build()
                .map_err(|e| CliError::Transport(format!("cannot set up HTTPS: {e}")))
        };
        // The API never redirects; the sign-in form answers a redirect with the session cookie.
        let http = build(
            reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::none()),
        )?;
        let streaming = build(reqwest::Client::builder().connect_timeout(TIMEOUT))?;
        Ok(Client {
            http,
            streaming,
            base: server.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
            session: None,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Signs in through the login form; the client then acts with the session, not a token.
    pub async fn sign_in(&mut self, email: &str, password: &str) -> Result<(), CliError> {
        let form = serde_urlencoded::to_string([("email", email), ("password", password)])
            .map_err(|e| CliError::Failed(e.to_string()))?;
        let res = self
            .http
            .post(format!("{}/login", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|c| {
                c.split(';')
                    .next()
                    .filter(|kv| kv.starts_with("svc_session="))
            })
            .map(str::to_string);
        match cookie {
            Some(c) if res.status().is_redirection() => {
                self.session = Some(c);
                self.token = None;
                Ok(())
            }
            _ if res.status() == StatusCode::TOO_MANY_REQUESTS => Err(CliError::Failed(
                "too many sign-in attempts; try again in a minute".into(),
            )),
            _ => Err(CliError::Failed(format!(
                "sign-in to {} refused: wrong e-mail or password",
                self.base
            ))),
        }
    }

    fn request(
        &self,
        http: &reqwest::Client,
        method: Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let req = http.request(method, format!("{}{path}", self.base));
        match (&self.token, &self.session) {
            (Some(t), _) => req.bearer_auth(t),
            (None, Some(cookie)) => req.header("cookie", cookie),
            (None, None) => req,
        }
    }

    /// Follows the server-sent event stream at `path`, handing each event's data to `on_event`
    /// until the stream ends or `on_event` fails.
    pub async fn follow(
        &self,
        path: &str,
        mut on_event: impl AsyncFnMut(Value) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let mut res = self.open_stream(path, "text/event-stream").await?;
        let mut pending = String::new();
        let mut data = String::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| CliError::Transport(format!("the event stream broke: {e}")))?
        {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                let line = line.trim_end_matches(['\r', '\n']);
                if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                } else if line.is_empty()
                    && !data.is_empty()
                    && let Ok(mut event) = serde_json::from_str(&std::mem::take(&mut data))
                {
                    clean(&mut event);
                    on_event(event).await?;
                }
            }
        }
        Ok(())
    }

    fn unreachable(&self, e: &reqwest::Error) -> CliError {
        CliError::Transport(format!(
            "cannot connect to {}: {}",
            self.base,
            root_cause(e)
        ))
    }

    /// A successful answer to GET `path` whose body is read as it comes (no time or size limit).
    async fn open_stream(&self, path: &str, accept: &str) -> Result<reqwest::Response, CliError> {
        let res = self
            .request(&self.streaming, Method::GET, path)
            .header("accept", accept)
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        if !res.status().is_success() {
            let status = res.status();
            let text = res.text().await.unwrap_or_default();
            return Err(problem(status, &text));
        }
        Ok(res)
    }

    /// Saves the body of GET `path` to `out` (owner-only; written beside it, then renamed, so
    /// a broken transfer leaves no partial file under the name); the bytes written.
    pub async fn download(&self, path: &str, out: &std::path::Path) -> Result<u64, CliError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut res = self.open_stream(path, "*/*").await?;
        let partial = out.with_extension("part");
        let local = |e: std::io::Error| CliError::Failed(format!("{}: {e}", partial.display()));
        let saved = async {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&partial)
                .map_err(local)?;
            let mut written = 0u64;
            while let Some(chunk) = res
                .chunk()
                .await
                .map_err(|e| CliError::Transport(format!("the transfer broke: {e}")))?
            {
                file.write_all(&chunk).map_err(local)?;
                written += chunk.len() as u64;
            }
            file.sync_all().map_err(local)?;
            std::fs::rename(&partial, out).map_err(local)?;
            Ok(written)
        }
        .await;
        if saved.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        saved
    }

    /// Sends a request and reads the answer's text (at most 16 MiB); an error status is an error.
    pub async fn send(&self, method: Method, path: &str, body: Body) -> Result<String, CliError> {
        let mut req = self.request(&self.http, method, path);
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("content-type", "application/json")
                .body(v.to_string()),
            Body::Text(media, text) => req.header("content-type", media).body(text),
        };
        let mut res = req.send().await.map_err(|e| {
            let why = if e.is_connect() {
                "cannot connect"
            } else if e.is_timeout() {
                "no answer within 60 s"
            } else {
                "the request failed"
            };
            CliError::Transport(format!("{why} to {}: {}", self.base, root_cause(&e)))
        })?;
        let status = res.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| CliError::Transport(format!("reading the answer failed: {e}")))?
        {
            if bytes.len() + chunk.len() > READ_LIMIT {
                return Err(CliError::Transport(
                    "the answer is larger than 16 MiB".into(),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = printable(&String::from_utf8_lossy(&bytes));
        if status.is_success() {
            Ok(text)
        } else {
            Err(problem(status, &text))
        }
    }

    pub async fn json(&self, method: Method, path: &str, body: Body) -> Result<Value, CliError> {
        let text = self.send(method, path, body).await?;
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        let mut v: Value = serde_json::from_str(&text)
            .map_err(|e| CliError::Transport(format!("the server's answer is not JSON: {e}")))?;
        clean(&mut v);
        Ok(v)
    }

    pub async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.json(Method::GET, path, Body::None).await
    }
}

/// Whether a terminal shows `c` as itself: not a control character (an escape sequence, a
/// carriage return that rewrites a line, a bell) bar line breaks and tabs, nor a bidi or
/// zero-width one (U+202E reverses what follows).
fn shows(c: char) -> bool {
    (!c.is_control() || matches!(c, '\n' | '\t')) && !crate::model::input::is_hidden_format(c)
}

/// Server text made safe for a terminal: what does not show as itself is dropped.
pub fn printable(text: &str) -> String {
    text.chars().filter(|c| shows(*c)).collect()
}

/// `printable` over every string (and key) of a JSON answer.
fn clean(v: &mut Value) {
    match v {
        Value::String(s) if !s.chars().all(shows) => {
            *s = printable(s);
        }
        Value::Array(items) => items.iter_mut().for_each(clean),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            *map = entries
                .into_iter()
                .map(|(k, mut v)| {
                    clean(&mut v);
                    (printable(&k), v)
                })
                .collect();
        }
        _ => {}
    }
}

fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

fn problem(status: StatusCode, text: &str) -> CliError {
    let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let field = |k: &str| printable(doc[k].as_str().unwrap_or_default());
    let title = match field("title") {
        t if t.is_empty() => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_string(),
        t => t,
    };
    let detail = match field("detail") {
        d if d.is_empty() && doc.is_null() => text.trim().to_string(),
        d => d,
    };
    CliError::Problem {
        status: status.as_u16(),
        title,
        code: field("code"),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_cannot_drive_the_terminal() {
        assert_eq!(
            printable("Disk \u{1b}[2J\u{1b}]0;owned\u{7}full\r\n\tok\u{9b}31m"),
            "Disk [2J]0;ownedfull\n\tok31m"
        );
        assert_eq!(
            printable("invoice\u{202E}fdp.exe\u{200B}"),
            "invoicefdp.exe"
        );
        let mut v =
            serde_json::json!({"items": [{"title": "a\u{1b}[31mb", "labels": {"k\u{1b}": "v"}}]});
        clean(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"items": [{"title": "a[31mb", "labels": {"k": "v"}}]})
        );
    }
}
