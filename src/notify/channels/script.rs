//! `script`: runs `config.command`, an executable in `notify.scriptDir` (none configured: script
//! channels are off), with `config.args` split on whitespace into argv elements (never a shell
//! line), the rendered message on stdin and the alert in `SVC_*` environment variables (nothing
//! else of the service's environment). Exit 0 is sent; exit 75 (`EX_TEMPFAIL`) or a timeout is
//! retried; any other exit is permanent.

use super::{Outgoing, SendError, Sent};
use crate::model::channel::ScriptConfig;
use crate::runtime::paths::{self as programs, AllowedDirs, Run, RunError};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
const EX_TEMPFAIL: i32 = 75;
/// What a script may print that is kept (its answer and its error text).
const OUTPUT_CAP: usize = 16 * 1024;
/// Of that, what an error or detail quotes.
const QUOTED: usize = 300;

pub async fn run(
    scripts: &AllowedDirs,
    out: &Outgoing<'_>,
    config: &ScriptConfig,
) -> Result<Sent, SendError> {
    let (command, args) = (config.command.as_str(), &config.args);
    let program = scripts.resolve(command).map_err(SendError::permanent)?;
    let m = &out.delivery.payload;
    if let Some(why) = programs::runs_its_arguments(command, args) {
        return Err(SendError::permanent(why));
    }
    let finished = scripts
        .run(Run {
            program: &program,
            args,
            env: vec![
                (
                    "SVC_ALERT_ID",
                    m.alert_id.map(|a| a.to_string()).unwrap_or_default(),
                ),
                ("SVC_ALERT_TITLE", m.title.clone()),
                ("SVC_ALERT_SEVERITY", m.severity.clone()),
                ("SVC_CONTACT", m.contact.clone()),
                ("SVC_TARGET", out.delivery.target.clone()),
                ("SVC_ACK_URL", m.ack_url.clone()),
            ],
            stdin: Some(out.text()),
            timeout: TIMEOUT,
            output_cap: OUTPUT_CAP,
        })
        .await;
    let output = match finished {
        Ok(o) => o,
        Err(e @ RunError::Timeout(_)) => {
            return Err(SendError::retry(format!("{command:?} {e}")));
        }
        Err(e) => return Err(SendError::permanent(e.to_string())),
    };
    let said = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .chars()
            .take(QUOTED)
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
