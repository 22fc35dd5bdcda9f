//! The command-line client (SPEC 4.6): a thin client of the HTTP API, configured by flags or
//! the environment. Tables for people, the API's JSON unchanged with `--json`.

mod doctor;
mod http;
mod lists;
mod login;
mod output;
mod tokens;

use doctor::*;
use lists::*;
use tokens::*;

use crate::model::alert::{AckRequest, Alert};
use crate::model::audit::AuditVerification;
use crate::model::suppression::{Downtime, DowntimeBody, Silence, SilenceBody};
pub use http::CliError;
use http::{Body, Client};
use output::{cell, label_map, shown, since, state_name, table, text};
use reqwest::Method;
use serde_json::{Value, json};

/// The global flags; they precede the command.
#[derive(clap::Args, Debug)]
pub struct Global {
    /// The server's URL [default: the one `svc login` signed in to, else https://localhost:8443].
    #[arg(long, env = "SVC_SERVER")]
    pub server: Option<String>,
    /// An API token (`svc_…`) [default: the one `svc login` stored, for its server].
    #[arg(long, env = "SVC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the API's JSON unchanged.
    #[arg(long)]
    pub json: bool,
    /// Accept any server certificate (the self-signed one of a fresh install).
    #[arg(long)]
    pub insecure: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum ClientCommand {
    /// List resources: `svc get hosts`, `svc get problems`, `svc get alerts` ...
    Get {
        #[arg(value_enum)]
        what: Listing,
        /// A label selector (`site=lab,tier in (gold,silver)`), for hosts and services.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Keep following: new events as they happen, problems and alerts again on each change.
        #[arg(short = 'w', long)]
        watch: bool,
        /// `wide`: more columns (ids, folders, check commands, dedup keys) and whole outputs;
        /// `json`: as `--json`.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
    /// Show an object and its effective configuration: `svc describe <id|host|host/service>`.
    /// (`svc describe host web01` and `svc describe service web01/disk` read the same.)
    Describe {
        /// `host` or `service` (optional), then the id or name.
        #[arg(num_args = 1..=2, required = true)]
        target: Vec<String>,
    },
    /// Apply a configuration bundle: `svc apply -f site.yaml` (`-f -` reads stdin).
    Apply {
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: String,
        /// Delete documents of the bundle's kinds that it does not name.
        #[arg(long)]
        prune: bool,
        /// Show the plan without applying it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the configuration as a bundle (YAML).
    Export,
    /// Acknowledge an alert: `svc ack <alert-id> -m "on it"`, or the alert of `web01/disk`.
    Ack {
        id: String,
        #[arg(short = 'm', long = "message")]
        message: Option<String>,
    },
    /// Resolve an alert.
    Resolve { id: String },
    /// Schedule a fixed downtime from now: `svc downtime --object <id> --hours 2 -m "patching"`.
    #[command(group = clap::ArgGroup::new("target").required(true).args(["selector", "object"]))]
    Downtime {
        #[arg(long)]
        selector: Option<String>,
        #[arg(long)]
        object: Option<String>,
        #[arg(long, default_value_t = 2.0)]
        hours: f64,
        #[arg(short = 'm', long = "message", required = true)]
        message: String,
    },
    /// Silence notifications of matching alerts: `svc silence --selector site=lab -m "tests"`.
    Silence {
        #[arg(long, required = true)]
        selector: String,
        #[arg(long, default_value_t = 2.0)]
        hours: f64,
        #[arg(short = 'm', long = "message", required = true)]
        message: String,
    },
    /// Run an object's check now.
    CheckNow { id: String },
    /// Who is on call now, per schedule.
    Oncall,
    /// The audit log: `svc audit verify`, `svc audit tail`.
    Audit {
        #[command(subcommand)]
        what: AuditCommand,
    },
    /// Check the appliance: reachable, version, subsystems, queues, paging hardware.
    Doctor,
    /// Save a consistent backup of the running server (needs `admin:backup` in the default
    /// tenant): `svc backup --out site.tar`. Restore it with `svc restore`.
    Backup {
        /// The archive to write (owner-only).
        #[arg(long)]
        out: std::path::PathBuf,
        /// Leave the event history out.
        #[arg(long)]
        no_events: bool,
    },
    /// On a main instance: the federation sites with their connection (`svc sites`).
    Sites,
    /// On an edge: this instance as a site (`svc site status`).
    Site {
        #[command(subcommand)]
        what: SiteCommand,
    },
    /// Sign in with e-mail and password and keep a personal token for this machine:
    /// `svc --server https://gw:8443 login` (prompts; or reads both lines from stdin).
    Login {
        #[arg(long)]
        email: Option<String>,
    },
    /// Revoke the token `svc login` stored, and forget it.
    Logout,
    /// API tokens: `svc token create ci --scope objects:read`, `svc token list`, `svc token revoke <id>`.
    Token {
        #[command(subcommand)]
        what: TokenCommand,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum TokenCommand {
    /// Mint a token and print its secret once. With neither `--scope` nor `--role` it is a
    /// personal token that acts as you; otherwise a tenant token (needs `admin:tokens`).
    Create {
        name: String,
        /// A permission (`resource:action`); repeat for more.
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// A role name; repeat for more.
        #[arg(long = "role")]
        roles: Vec<String>,
        /// When it stops working (RFC 3339).
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// The tenant's tokens (`admin:tokens`), or with `--mine` your personal ones.
    List {
        #[arg(long)]
        mine: bool,
    },
    /// Revoke a token by id (`--mine`: one of your personal tokens).
    Revoke {
        id: String,
        #[arg(long)]
        mine: bool,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum SiteCommand {
    /// The last pull and heartbeat, the applied bundle, and the forward queue.
    Status,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Listing {
    Hosts,
    Services,
    Problems,
    Alerts,
    Incidents,
    Silences,
    Downtimes,
    Events,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Wide,
    Json,
}

#[derive(clap::Subcommand, Debug)]
pub enum AuditCommand {
    /// Verify the audit log's hash chain.
    Verify,
    /// The 30 newest entries.
    Tail,
}

/// Runs one client command; what it prints goes to stdout.
pub fn run(global: Global, command: ClientCommand) -> Result<(), CliError> {
    let stored = login::Credentials::load();
    let server = global
        .server
        .clone()
        .or_else(|| stored.as_ref().map(|c| c.server.clone()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    // A stored token goes only to the server that minted it.
    let token = global.token.clone().or_else(|| {
        stored
            .filter(|c| c.server == server.trim_end_matches('/'))
            .map(|c| c.token)
    });
    let mut client = Client::new(&server, token, global.insecure)?;
    output::use_colour(
        !global.json
            && std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Transport(format!("cannot start: {e}")))?;
    let out = rt.block_on(execute(&mut client, global.json, command))?;
    print!("{out}");
    Ok(())
}

const DEFAULT_SERVER: &str = "https://localhost:8443";

fn pretty(v: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default())
}

/// The server's JSON read as the wire type client and server share (`model`).
fn wire<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, CliError> {
    serde_json::from_value(v.clone()).map_err(|e| {
        CliError::Transport(format!(
            "the server's answer is not what this client reads (another version?): {e}"
        ))
    })
}

/// A request body as the wire type client and server share (`model`).
fn body(v: &impl serde::Serialize) -> Result<Body, CliError> {
    serde_json::to_value(v)
        .map(Body::Json)
        .map_err(|e| CliError::Failed(format!("cannot write the request: {e}")))
}

fn items(v: &Value) -> &[Value] {
    v["items"].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The operator's wall clock: the client has no server clock to follow (`runtime::Clock`
/// exists for the server's tests and is out of the client's reach by DESIGN).
#[allow(clippy::disallowed_methods)]
fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn hours_from_now(hours: f64) -> Result<(String, String), CliError> {
    if !(hours > 0.0 && hours <= 24.0 * 366.0) {
        return Err(CliError::Failed(format!(
            "--hours {hours}: expected a positive number of hours"
        )));
    }
    let start = now();
    let span = jiff::SignedDuration::from_secs_f64(hours * 3600.0);
    let end = start
        .checked_add(span)
        .map_err(|e| CliError::Failed(format!("--hours {hours}: {e}")))?;
    Ok((start.to_string(), end.to_string()))
}

async fn execute(
    c: &mut Client,
    as_json: bool,
    command: ClientCommand,
) -> Result<String, CliError> {
    Ok(match command {
        ClientCommand::Get {
            what,
            selector,
            watch,
            output,
        } => {
            let as_json = as_json || output == Some(OutputFormat::Json);
            let wide = output == Some(OutputFormat::Wide);
            let (path, render): (&str, Render) = match what {
                Listing::Hosts => ("/api/v1/hosts?limit=500", hosts),
                Listing::Services => ("/api/v1/services?limit=500", services),
                Listing::Problems => ("/api/v1/problems", problems),
                Listing::Alerts => ("/api/v1/alerts?status=open,acked", alerts),
                Listing::Incidents => ("/api/v1/incidents?open=true", incidents),
                Listing::Silences => ("/api/v1/silences", silences),
                Listing::Downtimes => ("/api/v1/downtimes", downtimes),
                Listing::Events => ("/api/v1/events?limit=50", events),
            };
            let path = match (selector, what) {
                (None, _) => path.to_string(),
                (Some(sel), Listing::Hosts | Listing::Services) => {
                    format!("{path}&selector={}", path_segment(&sel))
                }
                (Some(_), _) => {
                    return Err(CliError::Failed(
                        "--selector applies to hosts and services".into(),
                    ));
                }
            };
            let v = c.get(&path).await?;
            let first = if as_json {
                pretty(&v)
            } else {
                render(&v, wide)?
            };
            if !watch {
                return Ok(first);
            }
            print!("{first}");
            watch_changes(c, as_json, wide, what, &path, render).await?;
            String::new()
        }
        ClientCommand::Describe { target } => {
            let id = match target.as_slice() {
                [kind, name] if matches!(kind.as_str(), "host" | "service" | "object") => {
                    name.clone()
                }
                [one] => one.clone(),
                _ => {
                    return Err(CliError::Failed(
                        "describe takes an id or name, optionally after `host` or `service`".into(),
                    ));
                }
            };
            let id = object_id(c, &id).await?;
            let object = c.get(&format!("/api/v1/objects/{id}")).await?;
            let effective = c
                .get(&format!("/api/v1/objects/{id}/effective-config"))
                .await?;
            if as_json {
                format!("{}{}", pretty(&object), pretty(&effective))
            } else {
                describe(&object, &effective)?
            }
        }
        ClientCommand::Apply {
            file,
            prune,
            dry_run,
        } => {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(&file)
            }
            .map_err(|e| CliError::Failed(format!("cannot read {file}: {e}")))?;
            let path = format!("/api/v1/config/bundles:apply?prune={prune}&dryRun={dry_run}");
            let v = c
                .json(Method::POST, &path, Body::Text("application/yaml", text))
                .await?;
            if as_json { pretty(&v) } else { plan(&v)? }
        }
        ClientCommand::Export => {
            c.send(Method::GET, "/api/v1/config/bundles:export", Body::None)
                .await?
        }
        ClientCommand::Ack { id, message } => {
            let request = match message {
                Some(comment) => body(&AckRequest {
                    comment: Some(comment),
                })?,
                None => Body::None,
            };
            let v = c
                .json(
                    Method::POST,
                    &format!("/api/v1/alerts/{}:ack", alert_id(c, &id).await?),
                    request,
                )
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!("alert {} acknowledged\n", wire::<Alert>(&v)?.id)
            }
        }
        ClientCommand::Resolve { id } => {
            let v = c
                .json(
                    Method::POST,
                    &format!("/api/v1/alerts/{}:resolve", alert_id(c, &id).await?),
                    Body::None,
                )
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!("alert {} resolved\n", wire::<Alert>(&v)?.id)
            }
        }
        ClientCommand::Downtime {
            selector,
            object,
            hours,
            message,
        } => {
            let (start, end) = hours_from_now(hours)?;
            let object_id = match object {
                Some(o) => Some(object_id(c, &o).await?),
                None => None,
            };
            let request = DowntimeBody {
                comment: Some(message),
                object_id,
                selector,
                kind: Some("fixed".into()),
                start: Some(start),
                end: Some(end),
                duration: None,
            };
            let v = c
                .json(Method::POST, "/api/v1/downtimes", body(&request)?)
                .await?;
            if as_json {
                pretty(&v)
            } else {
                let d: Downtime = wire(&v)?;
                format!("downtime {} until {}\n", d.id, d.end)
            }
        }
        ClientCommand::Silence {
            selector,
            hours,
            message,
        } => {
            let (start, end) = hours_from_now(hours)?;
            let request = SilenceBody {
                comment: Some(message),
                selector: Some(selector),
                text_regex: None,
                starts_at: Some(start),
                expires_at: Some(end),
            };
            let v = c
                .json(Method::POST, "/api/v1/silences", body(&request)?)
                .await?;
            if as_json {
                pretty(&v)
            } else {
                let s: Silence = wire(&v)?;
                format!("silence {} until {}\n", s.id, s.expires_at)
            }
        }
        ClientCommand::CheckNow { id } => {
            let v = c
                .json(
                    Method::POST,
                    &format!("/api/v1/objects/{}/check-now", object_id(c, &id).await?),
                    Body::None,
                )
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!("check of {id} scheduled\n")
            }
        }
        ClientCommand::Oncall => {
            let v = c.get("/api/v1/oncall/now").await?;
            if as_json { pretty(&v) } else { oncall(&v)? }
        }
        ClientCommand::Audit {
            what: AuditCommand::Verify,
        } => {
            let v = c
                .json(Method::POST, "/api/v1/audit:verify", Body::None)
                .await?;
            let verification: AuditVerification = wire(&v)?;
            if as_json {
                pretty(&v)
            } else if verification.intact {
                format!(
                    "audit chain intact: {} entries verified\n",
                    verification.verified
                )
            } else {
                return Err(CliError::Failed(format!(
                    "audit chain broken after {} entries: {}",
                    verification.verified,
                    shown(verification.error, 400)
                )));
            }
        }
        ClientCommand::Audit {
            what: AuditCommand::Tail,
        } => {
            let v = c.get("/api/v1/audit?limit=30").await?;
            if as_json { pretty(&v) } else { audit(&v)? }
        }
        ClientCommand::Doctor => doctor(c, as_json).await?,
        ClientCommand::Backup { out, no_events } => {
            let path = format!("/api/v1/system/backup?events={}", !no_events);
            let bytes = c.download(&path, &out).await?;
            format!("wrote {} ({bytes} bytes)\n", out.display())
        }
        ClientCommand::Login { email } => login::login(c, email).await?,
        ClientCommand::Logout => login::logout(c).await?,
        ClientCommand::Token { what } => token(c, as_json, what).await?,
        ClientCommand::Sites => {
            let v = c.get("/api/v1/sites:overview").await?;
            if as_json { pretty(&v) } else { sites(&v)? }
        }
        ClientCommand::Site {
            what: SiteCommand::Status,
        } => {
            let v = c.get("/api/v1/site:status").await?;
            if as_json {
                pretty(&v)
            } else {
                site_status(&v)?
            }
        }
    })
}

/// Follows the event stream after the first listing: each new event as a line (`get events`),
/// or the list printed again when an event that changes it arrives.
async fn watch_changes(
    c: &Client,
    as_json: bool,
    wide: bool,
    what: Listing,
    path: &str,
    render: Render,
) -> Result<(), CliError> {
    use std::io::Write;
    let types = match what {
        Listing::Events => "",
        Listing::Problems => "state_change,ack,downtime",
        Listing::Alerts => "alert_opened,alert_resolved,ack,escalation",
        _ => {
            return Err(CliError::Failed(
                "--watch follows problems, alerts and events".into(),
            ));
        }
    };
    let stream = if types.is_empty() {
        "/api/v1/stream".to_string()
    } else {
        format!("/api/v1/stream?types={types}")
    };
    c.follow(&stream, async |event: Value| {
        let text = match (what, as_json) {
            (Listing::Events, true) => format!(
                "{event}
"
            ),
            (Listing::Events, false) => {
                let mut rows = events(&json!({"items": [event]}), wide)?;
                rows.drain(..rows.find('\n').map_or(0, |i| i + 1));
                rows
            }
            _ => {
                let v = c.get(path).await?;
                let body = if as_json {
                    pretty(&v)
                } else {
                    render(&v, wide)?
                };
                format!("\n{body}")
            }
        };
        print!("{text}");
        let _ = std::io::stdout().flush();
        Ok(())
    })
    .await
}

/// An object's id, or the id of the object a name names: `web01` (a host) or `web01/disk` (a
/// service of it).
async fn object_id(c: &Client, arg: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(arg).is_ok() {
        return Ok(arg.to_string());
    }
    let (list, name, host) = match arg.split_once('/') {
        Some((host, service)) => ("/api/v1/services", service, Some(host)),
        None => ("/api/v1/hosts", arg, None),
    };
    let v = c
        .get(&format!(
            "{list}?limit=5000&withState=false&name={}",
            path_segment(name)
        ))
        .await?;
    let found: Vec<&Value> = items(&v)
        .iter()
        .filter(|o| o["name"] == name && host.is_none_or(|h| o["hostName"] == h))
        .collect();
    match found.as_slice() {
        [one] => Ok(cell(&one["id"], 40)),
        [] => Err(CliError::Failed(format!(
            "no {} named {arg:?}",
            if host.is_some() { "service" } else { "host" }
        ))),
        _ => Err(CliError::Failed(format!(
            "{arg:?} names more than one object; give its id"
        ))),
    }
}

/// An alert's id, or the id of the open (else acknowledged) alert of the object a name names.
async fn alert_id(c: &Client, arg: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(arg).is_ok() {
        return Ok(arg.to_string());
    }
    let object = object_id(c, arg).await?;
    let v = c
        .get(&format!(
            "/api/v1/alerts?objectId={object}&status=open,acked"
        ))
        .await?;
    let mut alerts: Vec<&Value> = items(&v).iter().collect();
    alerts.sort_by_key(|a| a["status"] != "open");
    alerts
        .first()
        .map(|a| cell(&a["id"], 40))
        .ok_or_else(|| CliError::Failed(format!("{arg} has no open or acknowledged alert")))
}

/// An id or name as one path segment.
fn path_segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
