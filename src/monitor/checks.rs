//! Running one active check: the `tcp` built-in, and plugin commands (the `check-commands`
//! kind) with the Nagios plugin conventions: exit 0..3, first output line the status text, `|`
//! performance data, further lines long output, anything else (signal, timeout, bad exit) UNKNOWN.

use crate::model::config::ObjectSpec;
use crate::model::object::{Object, ObjectKind};
use crate::runtime::Stopwatch;
use std::time::Duration;

/// What a check produced, before mapping to the object's states.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Plugin exit code semantics: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    pub code: u8,
    pub output: String,
}

/// A check command as the scheduler runs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// A built-in check by name, with the object's `args`.
    Builtin(String),
    /// A plugin: argv with `$macro$`s, the command's timeout.
    Plugin {
        line: Vec<String>,
        timeout: Option<Duration>,
    },
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The host a check runs against: its name and address (a service's `$address$` is its
/// host's, as in Icinga).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInfo {
    pub name: String,
    pub address: Option<String>,
}

/// Replaces `$address$`, `$hostname$`, `$servicename$`, `$ARGn$` and `$vars.NAME$`.
pub fn expand(arg: &str, o: &Object, host: &HostInfo, spec: &ObjectSpec) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('$') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        let value = match name {
            "address" => address(spec, host),
            "hostname" => host.name.clone(),
            "servicename" if o.kind == ObjectKind::Service => o.name.clone(),
            n if n.starts_with("ARG") => n[3..]
                .parse::<usize>()
                .ok()
                .and_then(|i| spec.args.as_ref()?.get(i.checked_sub(1)?).cloned())
                .unwrap_or_default(),
            n if n.starts_with("vars.") => spec
                .vars
                .as_ref()
                .and_then(|v| v.get(&n[5..]).cloned())
                .unwrap_or_default(),
            _ => format!("${name}$"),
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn address(spec: &ObjectSpec, host: &HostInfo) -> String {
    spec.address
        .clone()
        .or_else(|| host.address.clone())
        .unwrap_or_default()
}

/// `tcp`: connects to `address` on the port in `args[0]` (or `vars.port`).
async fn tcp(spec: &ObjectSpec, host: &HostInfo, timeout: Duration) -> Outcome {
    let address = address(spec, host);
    let port = spec
        .args
        .as_ref()
        .and_then(|a| a.first().cloned())
        .or_else(|| spec.vars.as_ref().and_then(|v| v.get("port").cloned()));
    let Some(port) = port.and_then(|p| p.parse::<u16>().ok()) else {
        return Outcome {
            code: 3,
            output: "TCP UNKNOWN - no port (args[0] or vars.port)".into(),
        };
    };
    if address.is_empty() {
        return Outcome {
            code: 3,
            output: "TCP UNKNOWN - no address".into(),
        };
    }
    let watch = Stopwatch::start();
    match tokio::time::timeout(
        timeout,
        tokio::net::TcpStream::connect((address.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => {
            let secs = watch.elapsed().as_secs_f64();
            Outcome {
                code: 0,
                output: format!(
                    "TCP OK - {secs:.3} second response time on {address} port {port} | time={secs:.6}s"
                ),
            }
        }
        Ok(Err(e)) => Outcome {
            code: 2,
            output: format!("TCP CRITICAL - {e} on {address} port {port}"),
        },
        Err(_) => Outcome {
            code: 2,
            output: format!(
                "TCP CRITICAL - no answer within {}s on {address} port {port}",
                timeout.as_secs()
            ),
        },
    }
}

/// Runs a plugin; its process is killed at the timeout.
async fn plugin(argv: Vec<String>, timeout: Duration) -> Outcome {
    let Some((program, args)) = argv.split_first() else {
        return Outcome {
            code: 3,
            output: "UNKNOWN - empty command line".into(),
        };
    };
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(timeout, child).await {
        Err(_) => Outcome {
            code: 3,
            output: format!("UNKNOWN - plugin timed out after {}s", timeout.as_secs()),
        },
        Ok(Err(e)) => Outcome {
            code: 3,
            output: format!("UNKNOWN - cannot run {program}: {e}"),
        },
        Ok(Ok(out)) => {
            // Output is capped at 64 KiB as monitoring plugins expect.
            let text = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(64 * 1024)])
                .trim_end()
                .to_string();
            match out.status.code() {
                Some(c @ 0..=3) => Outcome {
                    code: c as u8,
                    output: text,
                },
                Some(c) => Outcome {
                    code: 3,
                    output: format!("UNKNOWN - plugin exited {c}: {text}"),
                },
                None => Outcome {
                    code: 3,
                    output: format!("UNKNOWN - plugin killed by a signal: {text}"),
                },
            }
        }
    }
}

/// Runs one check of `o` with its resolved `spec`.
pub async fn run(command: &Command, o: &Object, host: &HostInfo, spec: &ObjectSpec) -> Outcome {
    let timeout = spec.timeout.map_or(DEFAULT_TIMEOUT, |t| t.0);
    match command {
        Command::Builtin(name) if name == "tcp" => tcp(spec, host, timeout).await,
        Command::Builtin(name) => Outcome {
            code: 3,
            output: format!("UNKNOWN - the built-in check {name:?} is not available in this build"),
        },
        Command::Plugin { line, timeout: own } => {
            let argv = line.iter().map(|a| expand(a, o, host, spec)).collect();
            plugin(argv, own.unwrap_or(timeout)).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use uuid::Uuid;

    #[test]
    fn macros() {
        let spec: ObjectSpec = serde_json::from_value(serde_json::json!({"address": "10.0.0.5", "args": ["80", "/health"], "vars": {"community": "public"}})).unwrap();
        let t = Timestamp(jiff::Timestamp::UNIX_EPOCH);
        let o = Object {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            kind: ObjectKind::Service,
            name: "http".into(),
            folder: "/".into(),
            host_id: None,
            labels: Default::default(),
            spec: spec.clone(),
            created_at: t,
            updated_at: t,
            version: 1,
        };
        let host = HostInfo {
            name: "web1".into(),
            address: Some("10.9.9.9".into()),
        };
        assert_eq!(
            expand("-H $address$ -p $ARG1$ -u $ARG2$", &o, &host, &spec),
            "-H 10.0.0.5 -p 80 -u /health"
        );
        assert_eq!(
            expand(
                "$hostname$/$servicename$ $vars.community$ $ARG9$ $nope$",
                &o,
                &host,
                &spec
            ),
            "web1/http public  $nope$"
        );
        assert_eq!(expand("100$", &o, &host, &spec), "100$");
        let bare = ObjectSpec::default();
        assert_eq!(
            expand("$address$", &o, &host, &bare),
            "10.9.9.9",
            "a service uses its host's address"
        );
    }
}
