//! The command-line client (SPEC 4.6): a thin client of the HTTP API, configured by flags or
//! the environment. Tables for people, the API's JSON unchanged with `--json`.

mod alerts;
mod config;
mod doctor;
mod http;
mod lists;
mod login;
mod output;
mod tokens;

use alerts::*;
use config::*;
use doctor::*;
use lists::*;
use tokens::*;

use crate::model::alert::{AckRequest, Alert};
use crate::model::audit::AuditVerification;
use crate::model::input::path_segment;
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
        /// A federation site: its hosts, services or alerts as the main mirrors them.
        #[arg(long)]
        site: Option<String>,
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
    /// Acknowledge an alert: `svc ack <alert-id> -m "on it"`, or the alert of `web01/disk`;
    /// `--expires-in 2h` lets the ack lapse, `--not-sticky` lets the next change clear it.
    Ack {
        id: String,
        #[arg(short = 'm', long = "message")]
        message: Option<String>,
        #[arg(long)]
        expires_in: Option<crate::model::GoDuration>,
        #[arg(long)]
        not_sticky: bool,
    },
    /// Resolve an alert.
    Resolve { id: String },
    /// Schedule a fixed downtime: `svc downtime --object <id> --hours 2 -m "patching"`; from
    /// `--start` on; recurring within `--hours` with `--weekdays`, `--times`, `--days-of-month`,
    /// `--months` and `--location` (Alertmanager's `time_intervals`):
    /// `svc downtime --selector site=lab --hours 2160 --weekdays saturday --times 22:00-24:00
    /// --location Europe/Berlin -m "weekly backup"`.
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
        #[command(flatten)]
        window: DowntimeWindow,
    },
    /// Silence notifications of matching alerts: `svc silence --selector site=lab -m "tests"`.
    Silence {
        #[arg(long, required = true)]
        selector: String,
        #[arg(long, default_value_t = 2.0)]
        hours: f64,
        #[arg(short = 'm', long = "message", required_unless_present = "preview")]
        message: Option<String>,
        /// List the open and acknowledged alerts it would hold now, and make nothing.
        #[arg(long)]
        preview: bool,
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

async fn execute(
    c: &mut Client,
    as_json: bool,
    command: ClientCommand,
) -> Result<String, CliError> {
    Ok(match command {
        ClientCommand::Get {
            what,
            selector,
            site,
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
            let path = match (site, what) {
                (None, _) => path,
                (Some(site), Listing::Hosts | Listing::Services | Listing::Alerts) => {
                    format!("{path}&site={}", path_segment(&site))
                }
                (Some(_), _) => {
                    return Err(CliError::Failed(
                        "--site applies to hosts, services and alerts".into(),
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
        ClientCommand::Describe { target } => describe_object(c, as_json, &target).await?,
        ClientCommand::Apply {
            file,
            prune,
            dry_run,
        } => apply(c, as_json, &file, prune, dry_run).await?,
        ClientCommand::Export => export(c).await?,
        ClientCommand::Ack {
            id,
            message,
            expires_in,
            not_sticky,
        } => {
            let request = AckRequest {
                comment: message,
                sticky: not_sticky.then_some(false),
                expires_in,
            };
            ack(c, as_json, &id, request).await?
        }
        ClientCommand::Resolve { id } => resolve(c, as_json, &id).await?,
        ClientCommand::Downtime {
            selector,
            object,
            hours,
            message,
            window,
        } => downtime(c, as_json, selector, object, (hours, window), message).await?,
        ClientCommand::Silence {
            selector,
            preview: true,
            ..
        } => silence_preview(c, as_json, selector).await?,
        ClientCommand::Silence {
            selector,
            hours,
            message,
            ..
        } => silence(c, as_json, selector, hours, message.unwrap_or_default()).await?,
        ClientCommand::CheckNow { id } => check_now(c, as_json, &id).await?,
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
