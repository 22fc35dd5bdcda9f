//! Running one active check: the built-ins (`tcp`, `http`, `http-flow`, `dns`, `ping`, `modbus`,
//! `gsm`, `snmp` and `snmp-walk`; one file
//! each) and plugin commands (the `check-commands` kind) with the Nagios plugin conventions:
//! exit 0..3, first output line the status text, `|` performance data, further lines long
//! output, anything else (signal, timeout, bad exit) UNKNOWN. Built-ins take monitoring-plugins
//! style flags in `args` (one token per element, `$macros$` expanded) and answer in the same
//! output format, so their performance data feeds metric series like a plugin's.

mod dns;
mod gsm;
mod http;
mod http_flow;
mod modbus;
mod ping;
mod snmp;
mod tcp;

pub use snmp::Counters;
pub(crate) use snmp::discover as discover_snmp;

use crate::hw::Devices;
use crate::model::Timestamp;
use crate::model::config::{BuiltinCheck, ObjectSpec};
use crate::model::flow::HttpFlow;
use crate::model::metric::Range;
use crate::model::object::{Object, ObjectKind};
use crate::model::secret::mask_values;
use crate::model::state::SnmpInterface;
use crate::runtime::SecretSource;
use crate::runtime::paths::{self as programs, AllowedDirs, Run, RunError};
use std::collections::HashMap;
use std::sync::Arc;
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

/// Secret names used as `$SECRET:name$` in these arguments.
pub(crate) fn secret_names<'a>(args: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for arg in args {
        for (i, part) in arg.split('$').enumerate() {
            // Odd parts lie between a pair of `$`.
            if let Some(name) = part.strip_prefix("SECRET:").filter(|_| i % 2 == 1)
                && !names.iter().any(|n| n == name)
            {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// Replaces each `$name$` in `arg` with what `resolve` gives for it; a name it does not know
/// stays as written.
fn substitute(arg: &str, resolve: impl Fn(&str) -> Option<String>) -> String {
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
        match resolve(name) {
            Some(value) => out.push_str(&value),
            None => {
                out.push('$');
                out.push_str(name);
                out.push('$');
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Replaces `$address$`, `$hostname$`, `$servicename$`, `$ARGn$`, `$vars.NAME$` and
/// `$SECRET:name$` (from `secrets`, resolved beforehand; also inside an `$ARGn$` value).
pub fn expand(
    arg: &str,
    o: &Object,
    host: &HostInfo,
    spec: &ObjectSpec,
    secrets: &HashMap<String, String>,
) -> String {
    let secret = |name: &str| {
        let name = name.strip_prefix("SECRET:")?;
        Some(secrets.get(name).cloned().unwrap_or_default())
    };
    substitute(arg, |name| {
        Some(match name {
            "address" => address(spec, host),
            "hostname" => host.name.clone(),
            "servicename" if o.kind == ObjectKind::Service => o.name.clone(),
            n if n.starts_with("ARG") => n[3..]
                .parse::<usize>()
                .ok()
                .and_then(|i| spec.args.as_ref()?.get(i.checked_sub(1)?).cloned())
                .map(|v| substitute(&v, secret))
                .unwrap_or_default(),
            n if n.starts_with("vars.") => spec
                .vars
                .as_ref()
                .and_then(|v| v.get(&n[5..]).cloned())
                .unwrap_or_default(),
            n => secret(n)?,
        })
    })
}

fn address(spec: &ObjectSpec, host: &HostInfo) -> String {
    spec.address
        .clone()
        .or_else(|| host.address.clone())
        .unwrap_or_default()
}

/// A plugin's output is capped as monitoring plugins expect.
const PLUGIN_OUTPUT: usize = 64 * 1024;

/// Runs a plugin found in `checks.pluginDirs`; one found nowhere there never runs (UNKNOWN).
async fn plugin(plugins: &AllowedDirs, argv: Vec<String>, timeout: Duration) -> Outcome {
    let Some((program, args)) = argv.split_first() else {
        return Outcome::new(3, "UNKNOWN - empty command line");
    };
    if let Some(why) = programs::runs_its_arguments(program, args) {
        return Outcome::new(3, format!("UNKNOWN - not run: {why}"));
    }
    let program = match plugins.resolve(program) {
        Ok(p) => p,
        Err(why) => return Outcome::new(3, format!("UNKNOWN - not run: {why}")),
    };
    let finished = plugins
        .run(Run {
            program: &program,
            args,
            env: Vec::new(),
            stdin: None,
            timeout,
            output_cap: PLUGIN_OUTPUT,
        })
        .await;
    match finished {
        Err(RunError::Timeout(_)) => Outcome::new(
            3,
            format!("UNKNOWN - plugin timed out after {}s", timeout.as_secs()),
        ),
        Err(e) => Outcome::new(3, format!("UNKNOWN - {e}")),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
            match out.status.code() {
                Some(c @ 0..=3) => Outcome::new(c as u8, text),
                Some(c) => Outcome::new(3, format!("UNKNOWN - plugin exited {c}: {text}")),
                None => Outcome::new(3, format!("UNKNOWN - plugin killed by a signal: {text}")),
            }
        }
    }
}

/// What checks run with: the tenant's secrets, the paging devices (the `gsm` check) and where
/// plugins may come from.
pub struct Runners {
    pub secrets: Arc<dyn SecretSource>,
    pub devices: Devices,
    pub plugins: AllowedDirs,
    /// Counter readings of the `snmp` checks, for rates.
    pub counters: Counters,
}

/// Runs one check of `o` with its resolved `spec`; a `$SECRET:name$` that is not set makes
/// the result UNKNOWN without running anything.
pub async fn run(
    command: &Command,
    o: &Object,
    host: &HostInfo,
    spec: &ObjectSpec,
    runners: &Runners,
    now: Timestamp,
) -> Outcome {
    let (secrets, devices) = (&runners.secrets, &runners.devices);
    let timeout = spec.timeout.map_or(DEFAULT_TIMEOUT, |t| t.0);
    // A flow's texts take macros and secrets as its arguments do.
    let mut flow = spec.http_flow.clone().filter(
        |_| matches!(command, Command::Builtin(name) if name == BuiltinCheck::HttpFlow.as_str()),
    );
    let flow_texts: Vec<String> = flow
        .iter_mut()
        .flat_map(|f| f.texts_mut().map(|t| t.clone()).collect::<Vec<_>>())
        .collect();
    let templates = match command {
        Command::Builtin(_) => secret_names(spec.args.iter().flatten().chain(&flow_texts)),
        Command::Plugin { line, .. } => secret_names(line.iter().chain(spec.args.iter().flatten())),
    };
    let values = match secret_values(secrets.as_ref(), o.tenant_id, templates).await {
        Ok(v) => v,
        Err(why) => return Outcome::new(3, format!("UNKNOWN - {why}")),
    };
    let outcome = match command {
        Command::Builtin(name) => {
            let args: Vec<String> = spec
                .args
                .iter()
                .flatten()
                .map(|a| expand(a, o, host, spec, &values))
                .collect();
            for text in flow.iter_mut().flat_map(|f| f.texts_mut()) {
                *text = expand(text, o, host, spec, &values);
            }
            let ctx = Builtin {
                args: Args::parse(&args),
                address: address(spec, host),
                spec,
                timeout,
                now,
                devices,
                counters: &runners.counters,
                flow,
            };
            builtin(name, &ctx).await
        }
        Command::Plugin { line, timeout: own } => {
            let argv = line
                .iter()
                .map(|a| expand(a, o, host, spec, &values))
                .collect();
            plugin(&runners.plugins, argv, own.unwrap_or(timeout)).await
        }
    };
    // A secret the check used does not come back in its output, which viewers read.
    Outcome {
        output: mask_values(&outcome.output, values.values().map(String::as_str)),
        ..outcome
    }
}

/// The values of the secrets `names` of `tenant`; `Err` naming the first that is not set.
async fn secret_values(
    secrets: &dyn SecretSource,
    tenant: uuid::Uuid,
    names: Vec<String>,
) -> Result<HashMap<String, String>, String> {
    let mut values = HashMap::new();
    for name in names {
        match secrets.secret(tenant, &name).await {
            Some(value) => values.insert(name, value),
            None => return Err(format!("secret {name:?} is not set")),
        };
    }
    Ok(values)
}

/// The interfaces of the SNMP agent of host `o`, asked with `args` as an `snmp` check's flags
/// (macros and secrets expanded as for its checks; a secret's value never in the answer),
/// each with the service that would watch it.
pub async fn snmp_interfaces(
    o: &Object,
    host: &HostInfo,
    spec: &ObjectSpec,
    args: &[String],
    runners: &Runners,
    now: Timestamp,
) -> Result<Vec<SnmpInterface>, String> {
    let values = secret_values(runners.secrets.as_ref(), o.tenant_id, secret_names(args)).await?;
    let expanded: Vec<String> = args
        .iter()
        .map(|a| expand(a, o, host, spec, &values))
        .collect();
    let ctx = Builtin {
        args: Args::parse(&expanded),
        address: address(spec, host),
        spec,
        timeout: spec.timeout.map_or(DEFAULT_TIMEOUT, |t| t.0),
        now,
        devices: &runners.devices,
        counters: &runners.counters,
        flow: None,
    };
    let found = snmp::interfaces(&ctx)
        .await
        .map_err(|why| mask_values(&why, values.values().map(String::as_str)))?;
    Ok(found
        .into_iter()
        .map(|i| {
            // The services keep the flags as written: a secret by its name.
            let mut service_args = args.to_vec();
            service_args.extend(["--interface".to_string(), i.name.clone()]);
            SnmpInterface {
                index: i.index,
                service: format!("if {}", i.name.replace('/', "-")),
                name: i.name,
                status: i.status.to_string(),
                args: service_args,
                id: None,
                error: None,
            }
        })
        .collect())
}

async fn builtin(name: &str, ctx: &Builtin<'_>) -> Outcome {
    let Some(check) = BuiltinCheck::parse(name) else {
        return Outcome::new(3, format!("UNKNOWN - no built-in check {name:?}"));
    };
    match check {
        BuiltinCheck::Tcp => tcp::check(ctx).await,
        BuiltinCheck::Http => http::check(ctx).await,
        BuiltinCheck::Dns => dns::check(ctx).await,
        BuiltinCheck::Ping => ping::check(ctx).await,
        BuiltinCheck::Modbus => modbus::check(ctx).await,
        BuiltinCheck::Gsm => gsm::check(ctx),
        BuiltinCheck::Snmp => snmp::check(ctx).await,
        BuiltinCheck::SnmpWalk => snmp::walk_check(ctx).await,
        BuiltinCheck::HttpFlow => http_flow::check(ctx).await,
    }
}

/// `check-commands:test`: built-in check `name` run once against `address` with `args` as
/// given (no macros, no secrets), under the default timeout (30 s).
pub async fn run_builtin(
    name: &str,
    address: &str,
    args: &[String],
    runners: &Runners,
    now: Timestamp,
) -> Outcome {
    let spec = ObjectSpec::default();
    let ctx = Builtin {
        args: Args::parse(args),
        address: address.to_string(),
        spec: &spec,
        timeout: DEFAULT_TIMEOUT,
        now,
        devices: &runners.devices,
        counters: &runners.counters,
        flow: None,
    };
    builtin(name, &ctx).await
}

/// What a built-in check gets: its parsed flags, the object's address, its spec, its timeout.
pub(crate) struct Builtin<'a> {
    pub args: Args,
    pub address: String,
    pub spec: &'a ObjectSpec,
    pub timeout: Duration,
    pub now: Timestamp,
    pub devices: &'a Devices,
    pub counters: &'a Counters,
    /// The object's `httpFlow`, its macros and secrets expanded (`http-flow` only).
    pub flow: Option<HttpFlow>,
}

impl Builtin<'_> {
    /// `-H`/`--host`, else the object's (or its host's) address.
    pub fn target(&self) -> Option<String> {
        self.args
            .get(&["-H", "--host", "--hostname"])
            .map(str::to_string)
            .or_else(|| Some(self.address.clone()))
            .filter(|a| !a.is_empty())
    }

    /// A numeric flag, else the default; `Err` with a message when it does not parse.
    pub fn number<T: std::str::FromStr>(&self, names: &[&str], default: T) -> Result<T, String> {
        match self.args.get(names) {
            Some(v) => v
                .parse()
                .map_err(|_| format!("{} {v:?} is not a number", names[0])),
            None => Ok(default),
        }
    }

    /// The `-w`/`-c` ranges.
    pub fn limits(&self) -> Result<Limits, String> {
        let text = |names: &[&str]| self.args.get(names).map(str::to_string);
        Limits::from_text(text(&["-w", "--warning"]), text(&["-c", "--critical"]))
    }
}

/// A built-in's warning and critical ranges, and their text for performance data.
pub(crate) struct Limits {
    warn: Option<Range>,
    crit: Option<Range>,
    text: (String, String),
}

impl Limits {
    /// The ranges written as `warn` and `crit`.
    pub fn from_text(warn: Option<String>, crit: Option<String>) -> Result<Limits, String> {
        Ok(Limits {
            warn: warn.as_deref().map(Range::parse).transpose()?,
            crit: crit.as_deref().map(Range::parse).transpose()?,
            text: (warn.unwrap_or_default(), crit.unwrap_or_default()),
        })
    }

    /// 2 when the critical range alerts, else 1 when the warning range does, else 0.
    pub fn grade(&self, v: f64) -> u8 {
        if self.crit.is_some_and(|c| c.alerts(v)) {
            2
        } else if self.warn.is_some_and(|w| w.alerts(v)) {
            1
        } else {
            0
        }
    }

    /// `warn;crit` as given, for a performance-data item.
    pub fn perf(&self) -> String {
        format!("{};{}", self.text.0, self.text.1)
    }
}

/// Monitoring-plugins style flags: `-x value`, `--long value`, `--long=value`, bare switches,
/// and positional words.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Args {
    flags: Vec<(String, Option<String>)>,
    pub positional: Vec<String>,
}

fn is_flag(t: &str) -> bool {
    t.starts_with('-') && t.len() > 1 && t.parse::<f64>().is_err()
}

impl Args {
    pub fn parse(tokens: &[String]) -> Args {
        let mut out = Args::default();
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            if !is_flag(t) {
                out.positional.push(t.clone());
            } else if let Some((name, value)) = t.split_once('=').filter(|_| t.starts_with("--")) {
                out.flags.push((name.to_string(), Some(value.to_string())));
            } else if tokens.get(i + 1).is_some_and(|n| !is_flag(n)) {
                out.flags.push((t.clone(), tokens.get(i + 1).cloned()));
                i += 1;
            } else {
                out.flags.push((t.clone(), None));
            }
            i += 1;
        }
        out
    }

    /// The value of the last of these flags given.
    pub fn get(&self, names: &[&str]) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| names.contains(&n.as_str()))
            .and_then(|(_, v)| v.as_deref())
    }

    /// The values of every one of these flags given, in order (`-o a -o b`).
    pub fn all<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a str> {
        self.flags
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.as_deref())
    }

    pub fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|(n, _)| names.contains(&n.as_str()))
    }
}

/// A performance-data label, quoted as the plugin guidelines want (`'` doubled inside).
pub(crate) fn perf_label(label: &str) -> String {
    format!("'{}'", label.replace('\'', "''"))
}

pub(crate) fn status_word(code: u8) -> &'static str {
    match code {
        0 => "OK",
        1 => "WARNING",
        2 => "CRITICAL",
        _ => "UNKNOWN",
    }
}

impl Outcome {
    pub fn new(code: u8, output: impl Into<String>) -> Self {
        Outcome {
            code,
            output: output.into(),
        }
    }

    /// A check that could not run as configured.
    pub fn unknown(check: &str, why: impl std::fmt::Display) -> Self {
        Outcome::new(3, format!("{check} UNKNOWN - {why}"))
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
        let none = HashMap::new();
        assert_eq!(
            expand("-H $address$ -p $ARG1$ -u $ARG2$", &o, &host, &spec, &none),
            "-H 10.0.0.5 -p 80 -u /health"
        );
        assert_eq!(
            expand(
                "$hostname$/$servicename$ $vars.community$ $ARG9$ $nope$",
                &o,
                &host,
                &spec,
                &none
            ),
            "web1/http public  $nope$"
        );
        assert_eq!(expand("100$", &o, &host, &spec, &none), "100$");
        let bare = ObjectSpec::default();
        assert_eq!(
            expand("$address$", &o, &host, &bare, &none),
            "10.9.9.9",
            "a service uses its host's address"
        );
        let with_secret: ObjectSpec =
            serde_json::from_value(serde_json::json!({"args": ["$SECRET:pin$"]})).unwrap();
        let line = ["-p".to_string(), "$ARG1$:$SECRET:user$".to_string()];
        assert_eq!(
            secret_names(line.iter().chain(with_secret.args.iter().flatten())),
            ["user", "pin"]
        );
        let secrets = HashMap::from([("pin".to_string(), "1234".to_string())]);
        assert_eq!(
            expand("$ARG1$/$SECRET:pin$", &o, &host, &with_secret, &secrets),
            "1234/1234",
            "a secret inside an argument is filled in too"
        );
        assert_eq!(
            secret_names(&["$x$SECRET:no$".to_string()]),
            Vec::<String>::new()
        );
    }
}
