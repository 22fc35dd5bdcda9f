//! The command-line client (SPEC 4.6): a thin client of the HTTP API, configured by flags or
//! the environment. Tables for people, the API's JSON unchanged with `--json`.

mod http;
mod login;
mod output;

pub use http::CliError;
use http::{Body, Client};
use output::{age, cell, labels, state_name, table};
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
                render(&v, wide)
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
                describe(&object, &effective)
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
            if as_json { pretty(&v) } else { plan(&v) }
        }
        ClientCommand::Export => {
            c.send(Method::GET, "/api/v1/config/bundles:export", Body::None)
                .await?
        }
        ClientCommand::Ack { id, message } => {
            let body = message.map_or(Body::None, |m| Body::Json(json!({"comment": m})));
            let v = c
                .json(
                    Method::POST,
                    &format!("/api/v1/alerts/{}:ack", alert_id(c, &id).await?),
                    body,
                )
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!("alert {} acknowledged\n", cell(&v["id"], 40))
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
                format!("alert {} resolved\n", cell(&v["id"], 40))
            }
        }
        ClientCommand::Downtime {
            selector,
            object,
            hours,
            message,
        } => {
            let (start, end) = hours_from_now(hours)?;
            let mut body = json!({"type": "fixed", "start": start, "end": end, "comment": message});
            if let Some(s) = selector {
                body["selector"] = json!(s);
            }
            if let Some(o) = object {
                body["objectId"] = json!(object_id(c, &o).await?);
            }
            let v = c
                .json(Method::POST, "/api/v1/downtimes", Body::Json(body))
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!(
                    "downtime {} until {}\n",
                    cell(&v["id"], 40),
                    cell(&v["end"], 40)
                )
            }
        }
        ClientCommand::Silence {
            selector,
            hours,
            message,
        } => {
            let (start, end) = hours_from_now(hours)?;
            let body = json!({"selector": selector, "startsAt": start, "expiresAt": end, "comment": message});
            let v = c
                .json(Method::POST, "/api/v1/silences", Body::Json(body))
                .await?;
            if as_json {
                pretty(&v)
            } else {
                format!(
                    "silence {} until {}\n",
                    cell(&v["id"], 40),
                    cell(&v["expiresAt"], 40)
                )
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
            if as_json { pretty(&v) } else { oncall(&v) }
        }
        ClientCommand::Audit {
            what: AuditCommand::Verify,
        } => {
            let v = c
                .json(Method::POST, "/api/v1/audit:verify", Body::None)
                .await?;
            if as_json {
                pretty(&v)
            } else if v["intact"] == true {
                format!("audit chain intact: {} entries verified\n", v["verified"])
            } else {
                return Err(CliError::Failed(format!(
                    "audit chain broken after {} entries: {}",
                    v["verified"],
                    cell(&v["error"], 400)
                )));
            }
        }
        ClientCommand::Audit {
            what: AuditCommand::Tail,
        } => {
            let v = c.get("/api/v1/audit?limit=30").await?;
            if as_json { pretty(&v) } else { audit(&v) }
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
            if as_json { pretty(&v) } else { sites(&v) }
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
                let mut rows = events(&json!({"items": [event]}), wide);
                rows.drain(..rows.find('\n').map_or(0, |i| i + 1));
                rows
            }
            _ => {
                let v = c.get(path).await?;
                let body = if as_json {
                    pretty(&v)
                } else {
                    render(&v, wide)
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

/// A list as a table; `wide` adds columns and keeps long text whole.
type Render = fn(&Value, bool) -> String;

/// How much of a long text a column shows.
fn text_width(wide: bool) -> usize {
    if wide { 1000 } else { 60 }
}

/// Adds the wide-only columns to a table's header and rows.
fn widen(
    header: &mut Vec<&'static str>,
    rows: &mut [Vec<String>],
    extra: &[&'static str],
    cells: impl Fn(usize) -> Vec<String>,
) {
    header.extend_from_slice(extra);
    for (i, row) in rows.iter_mut().enumerate() {
        row.extend(cells(i));
    }
}

fn live(o: &Value) -> String {
    state_name(o["kind"].as_str().unwrap_or("service"), &o["state"])
}

fn hosts(v: &Value, wide: bool) -> String {
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|h| {
            vec![
                cell(&h["name"], 40),
                live(h),
                cell(&h["spec"]["address"], 40),
                labels(&h["labels"]),
                cell(&h["state"]["output"], text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["NAME", "STATE", "ADDRESS", "LABELS", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["FOLDER", "CHECK", "ID"], |i| {
            let h = &list[i];
            vec![
                cell(&h["folder"], 60),
                cell(&h["spec"]["checkCommand"], 40),
                cell(&h["id"], 40),
            ]
        });
    }
    table(&header, &rows)
}

fn services(v: &Value, wide: bool) -> String {
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                cell(&s["hostName"], 40),
                cell(&s["name"], 40),
                live(s),
                cell(&s["state"]["output"], text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["HOST", "SERVICE", "STATE", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["LABELS", "CHECK", "ID"], |i| {
            let s = &list[i];
            vec![
                labels(&s["labels"]),
                cell(&s["spec"]["checkCommand"], 40),
                cell(&s["id"], 40),
            ]
        });
    }
    table(&header, &rows)
}

fn problems(v: &Value, wide: bool) -> String {
    let now = now();
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            let o = &p["object"];
            let name = match p["hostName"].as_str() {
                Some(host) => format!("{host}/{}", cell(&o["name"], 60)),
                None => cell(&o["name"], 60),
            };
            vec![
                name,
                cell(&o["kind"], 10),
                state_name(o["kind"].as_str().unwrap_or("service"), &p["state"]),
                age(&p["state"]["lastChange"], now),
                if p["state"]["ackedBy"].is_string() {
                    "acked".into()
                } else {
                    "-".into()
                },
                cell(&p["state"]["output"], text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["OBJECT", "KIND", "STATE", "SINCE", "HANDLED", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["ID"], |i| {
            vec![cell(&list[i]["object"]["id"], 40)]
        });
    }
    table(&header, &rows)
}

fn alerts(v: &Value, wide: bool) -> String {
    let now = now();
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|a| {
            vec![
                cell(&a["id"], 40),
                cell(&a["status"], 10),
                cell(&a["severity"], 10),
                age(&a["openedAt"], now),
                cell(&a["title"], text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["ID", "STATUS", "SEVERITY", "AGE", "TITLE"];
    if wide {
        widen(
            &mut header,
            &mut rows,
            &["DEDUP KEY", "ACKED BY", "OBJECT"],
            |i| {
                let a = &list[i];
                vec![
                    cell(&a["dedupKey"], 80),
                    cell(&a["ackedBy"], 40),
                    cell(&a["objectId"], 40),
                ]
            },
        );
    }
    table(&header, &rows)
}

fn incidents(v: &Value, wide: bool) -> String {
    let now = now();
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|i| {
            vec![
                cell(&i["id"], 40),
                cell(&i["status"], 12),
                age(&i["createdAt"], now),
                cell(&i["title"], text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["ID", "STATUS", "AGE", "TITLE"];
    if wide {
        widen(&mut header, &mut rows, &["LABELS", "SUMMARY"], |i| {
            vec![labels(&list[i]["labels"]), cell(&list[i]["summary"], 1000)]
        });
    }
    table(&header, &rows)
}

fn silences(v: &Value, wide: bool) -> String {
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                cell(&s["id"], 40),
                cell(&s["selector"], 40),
                cell(&s["textRegex"], 30),
                cell(&s["expiresAt"], 30),
                cell(&s["comment"], if wide { 1000 } else { 40 }),
            ]
        })
        .collect();
    let mut header = vec!["ID", "SELECTOR", "TEXT", "EXPIRES", "COMMENT"];
    if wide {
        widen(&mut header, &mut rows, &["STARTS", "CREATED BY"], |i| {
            vec![
                cell(&list[i]["startsAt"], 30),
                cell(&list[i]["createdBy"], 40),
            ]
        });
    }
    table(&header, &rows)
}

fn downtimes(v: &Value, wide: bool) -> String {
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let target = if d["objectId"].is_string() {
                &d["objectId"]
            } else {
                &d["selector"]
            };
            vec![
                cell(&d["id"], 40),
                cell(&d["type"], 10),
                cell(target, 40),
                cell(&d["start"], 30),
                cell(&d["end"], 30),
                cell(&d["comment"], if wide { 1000 } else { 40 }),
            ]
        })
        .collect();
    let mut header = vec!["ID", "TYPE", "TARGET", "START", "END", "COMMENT"];
    if wide {
        widen(&mut header, &mut rows, &["DURATION", "CREATED BY"], |i| {
            vec![
                cell(&list[i]["duration"], 20),
                cell(&list[i]["createdBy"], 40),
            ]
        });
    }
    table(&header, &rows)
}

fn events(v: &Value, wide: bool) -> String {
    let list = items(v);
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|e| {
            let p = &e["payload"];
            let what = [&p["title"], &p["output"], &p["summary"], &p["name"]]
                .into_iter()
                .find(|x| x.is_string())
                .unwrap_or(&Value::Null);
            vec![
                cell(&e["ts"], 30),
                cell(&e["type"], 24),
                cell(&e["severity"], 10),
                cell(&e["objectId"], 40),
                cell(what, text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["TIME", "TYPE", "SEVERITY", "OBJECT", "WHAT"];
    if wide {
        widen(&mut header, &mut rows, &["SOURCE", "ID"], |i| {
            vec![cell(&list[i]["sourceId"], 40), cell(&list[i]["id"], 40)]
        });
    }
    table(&header, &rows)
}

fn oncall(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let names: Vec<String> = s["contacts"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|c| cell(&c["name"], 40))
                .collect();
            let until = s["shifts"][0]["end"].clone();
            vec![
                cell(&s["schedule"], 40),
                if names.is_empty() {
                    "-".into()
                } else {
                    names.join(", ")
                },
                cell(&until, 30),
            ]
        })
        .collect();
    table(&["SCHEDULE", "ON CALL", "UNTIL"], &rows)
}

async fn token(c: &Client, as_json: bool, what: TokenCommand) -> Result<String, CliError> {
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

fn tokens(v: &Value) -> String {
    let now = now();
    let joined = |list: &Value| {
        list.as_array()
            .map(|a| a.iter().map(|s| cell(s, 40)).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    };
    let rows: Vec<Vec<String>> = items(v)
        .iter()
        .map(|t| {
            let access = if t["owner"].is_string() {
                "as its user".to_string()
            } else {
                [joined(&t["scopes"]), joined(&t["roles"])]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            vec![
                cell(&t["id"], 40),
                cell(&t["name"], 40),
                cell(&t["prefix"], 10),
                access,
                cell(&t["expiresAt"], 30),
                age(&t["lastUsedAt"], now),
            ]
        })
        .collect();
    table(
        &["ID", "NAME", "PREFIX", "ACCESS", "EXPIRES", "USED"],
        &rows,
    )
}

fn sites(v: &Value) -> String {
    let now = now();
    let rows: Vec<Vec<String>> = items(v)
        .iter()
        .map(|s| {
            let connection = if s["disabled"] == true {
                "disabled"
            } else if s["stale"] == true {
                "stale"
            } else if s["connected"] == true {
                "connected"
            } else {
                "offline"
            };
            vec![
                cell(&s["name"], 40),
                connection.to_string(),
                age(&s["lastHeartbeatAt"], now),
                cell(&s["version"], 20),
                cell(&s["stats"]["hosts"], 8),
                cell(&s["stats"]["services"], 8),
                cell(&s["stats"]["alertsOpen"], 8),
                if s["bundleCurrent"] == true {
                    "current".into()
                } else {
                    "behind".into()
                },
                cell(&s["applyError"], 60),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "STATUS",
            "SEEN",
            "VERSION",
            "HOSTS",
            "SERVICES",
            "ALERTS",
            "BUNDLE",
            "APPLY ERROR",
        ],
        &rows,
    )
}

fn site_status(v: &Value) -> Result<String, CliError> {
    if v["enabled"] != true {
        return Err(CliError::Failed(
            "this instance is not a federation site (site.mainUrl is not set)".into(),
        ));
    }
    let now = now();
    let f = &v["forward"];
    let rows = [
        ("site", cell(&v["name"], 80)),
        ("main", cell(&v["mainUrl"], 80)),
        ("last pull", age(&v["lastPullAt"], now)),
        ("last heartbeat", age(&v["lastHeartbeatAt"], now)),
        ("bundle", cell(&v["bundleEtag"], 40)),
        ("apply error", cell(&v["applyError"], 200)),
        ("last error", cell(&v["lastError"], 200)),
        ("queue depth", cell(&f["pending"], 20)),
        ("oldest unsent", age(&f["oldestUnsent"], now)),
        ("forwarded through", cell(&f["position"], 40)),
    ];
    Ok(rows.iter().map(|(k, v)| format!("{k:<18} {v}\n")).collect())
}

fn audit(v: &Value) -> String {
    let rows: Vec<Vec<String>> = items(v)
        .iter()
        .map(|e| {
            vec![
                cell(&e["seq"], 12),
                cell(&e["ts"], 30),
                format!("{}:{}", cell(&e["actorType"], 10), cell(&e["actorId"], 40)),
                cell(&e["action"], 40),
                cell(&e["resource"], 60),
            ]
        })
        .collect();
    table(&["SEQ", "TIME", "ACTOR", "ACTION", "RESOURCE"], &rows)
}

fn plan(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v["plan"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|a| {
            vec![
                cell(&a["action"], 10),
                cell(&a["kind"], 24),
                cell(&a["name"], 60),
            ]
        })
        .collect();
    let mut out = table(&["ACTION", "KIND", "NAME"], &rows);
    for w in v["warnings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        out.push_str(&format!("warning: {}\n", cell(w, 400)));
    }
    out.push_str(if v["applied"] == true {
        "applied\n"
    } else {
        "not applied (dry run)\n"
    });
    out
}

fn describe(o: &Value, effective: &Value) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<16}{v}\n"));
    line("Name:", cell(&o["name"], 200));
    line("Kind:", cell(&o["kind"], 20));
    line("Id:", cell(&o["id"], 40));
    if o["hostId"].is_string() {
        line("Host:", cell(&o["hostId"], 40));
    }
    line("Folder:", cell(&o["folder"], 200));
    line("Labels:", labels(&o["labels"]));
    line("Version:", cell(&o["version"], 20));
    let chain: Vec<String> = effective["templateChain"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|t| cell(t, 80))
        .collect();
    line(
        "Templates:",
        if chain.is_empty() {
            "-".into()
        } else {
            chain.join(" → ")
        },
    );
    out.push_str("Effective spec:\n");
    for (k, v) in effective["spec"].as_object().into_iter().flatten() {
        out.push_str(&format!(
            "  {k:<20}{}\n",
            if v.is_string() {
                cell(v, 200)
            } else {
                v.to_string()
            }
        ));
    }
    out
}

/// Less free space than this (or than 5 %) on the data directory's file system fails `doctor`.
const DISK_FREE_MIN: u64 = 256 * 1024 * 1024;
/// A server clock further than this from the operator's fails `doctor`.
const CLOCK_SKEW_MAX: f64 = 30.0;

async fn doctor(c: &Client, as_json: bool) -> Result<String, CliError> {
    let info = c.get("/api/v1/system/info").await?;
    let asked = now();
    let health = c.get("/api/v1/system/health").await?;
    let answered = now();
    if as_json {
        return Ok(pretty(&json!({"info": info, "health": health})));
    }
    let mut rows = vec![vec![
        "server".to_string(),
        "ok".to_string(),
        format!(
            "reachable, version {}, up {}, storage {}",
            cell(&info["version"], 40),
            cell(&info["uptime"], 20),
            cell(&info["storage"], 20)
        ),
    ]];
    let mut failing = Vec::new();
    for s in health["subsystems"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let ok = s["ok"] == true;
        if !ok {
            failing.push(cell(&s["name"], 40));
        }
        rows.push(vec![
            cell(&s["name"], 40),
            if ok { "ok" } else { "FAIL" }.to_string(),
            cell(&s["info"], 100),
        ]);
    }
    for (name, depth) in health["queues"].as_object().into_iter().flatten() {
        rows.push(vec![
            format!("queue {name}"),
            "ok".into(),
            format!("{depth} queued"),
        ]);
    }
    if let Some(gsm) = health["hardware"]["gsm"].as_object() {
        rows.push(vec![
            "gsm modem".into(),
            if gsm.get("connected") == Some(&Value::Bool(true)) {
                "ok"
            } else {
                "FAIL"
            }
            .into(),
            format!(
                "SIM {}, registration {}, signal {} dBm",
                cell(&gsm["sim"], 20),
                cell(&gsm["registration"], 20),
                cell(&gsm["signalDbm"], 10)
            ),
        ]);
    }
    let disk = &health["disk"];
    if let (Some(free), Some(total)) = (disk["freeBytes"].as_u64(), disk["totalBytes"].as_u64()) {
        let low = free < DISK_FREE_MIN || free.saturating_mul(20) < total;
        if low {
            failing.push("disk".into());
        }
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        rows.push(vec![
            "disk".into(),
            if low { "FAIL" } else { "ok" }.into(),
            format!(
                "{:.1} GiB free of {:.1} GiB on the data directory",
                gib(free),
                gib(total)
            ),
        ]);
    }
    if let Some(server) = health["time"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        // The server read its clock between asking and answering: compare with the middle.
        let middle = (asked.as_millisecond() + answered.as_millisecond()) / 2;
        let skew = (server.as_millisecond() - middle) as f64 / 1000.0;
        let off = skew.abs() > CLOCK_SKEW_MAX;
        if off {
            failing.push("clock".into());
        }
        rows.push(vec![
            "clock".into(),
            if off { "FAIL" } else { "ok" }.into(),
            format!(
                "the server's clock is {:.1} s {} this machine's",
                skew.abs(),
                if skew >= 0.0 { "ahead of" } else { "behind" }
            ),
        ]);
    }
    let out = table(&["CHECK", "STATUS", "INFO"], &rows);
    if failing.is_empty() {
        Ok(out)
    } else {
        print!("{out}");
        Err(CliError::Failed(format!(
            "not ready: {}",
            failing.join(", ")
        )))
    }
}
