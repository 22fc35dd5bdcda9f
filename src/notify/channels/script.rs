//! `script`: runs `config.command` (with `config.args`, split on whitespace) with the
//! rendered message on stdin and the alert in `SVC_*` environment variables. Exit 0 is sent;
//! exit 75 (`EX_TEMPFAIL`) or a timeout is retried; any other exit is permanent.

use super::{Outgoing, SendError, Sent};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const TIMEOUT: Duration = Duration::from_secs(30);
const EX_TEMPFAIL: i32 = 75;

pub async fn run(out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let command = out
        .get("command")
        .ok_or_else(|| SendError::permanent("script channel has no command"))?;
    let m = &out.delivery.payload;
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(out.get("args").unwrap_or_default().split_whitespace())
        .env(
            "SVC_ALERT_ID",
            m.alert_id.map(|a| a.to_string()).unwrap_or_default(),
        )
        .env("SVC_ALERT_TITLE", &m.title)
        .env("SVC_ALERT_SEVERITY", &m.severity)
        .env("SVC_CONTACT", &m.contact)
        .env("SVC_TARGET", &out.delivery.target)
        .env("SVC_ACK_URL", &m.ack_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| SendError::permanent(format!("cannot run {command:?}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let text = out.text();
        // A script that does not read its input is its own business.
        let _ = stdin.write_all(text.as_bytes()).await;
    }
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| SendError::retry(format!("{command:?} ran longer than {TIMEOUT:?}")))?
        .map_err(|e| SendError::retry(format!("{command:?} failed: {e}")))?;
    let said = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .chars()
            .take(300)
            .collect::<String>()
    };
    match output.status.code() {
        Some(0) => Ok(Sent {
            detail: said(&output.stdout),
            answer: String::from_utf8_lossy(&output.stdout).into_owned(),
            ..Sent::default()
        }),
        Some(EX_TEMPFAIL) => Err(SendError::retry(format!(
            "{command:?} exited 75: {}",
            said(&output.stderr)
        ))),
        code => Err(SendError::permanent(format!(
            "{command:?} exited {}: {}",
            code.map_or("by a signal".to_string(), |c| c.to_string()),
            said(&output.stderr)
        ))),
    }
}
