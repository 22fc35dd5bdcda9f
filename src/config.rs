//! The YAML configuration file (CONTRACT 2) with flag and environment overrides, validated once.
//! Precedence: command-line flag, then environment variable, then file, then built-in default.

use crate::model::GoDuration;
use crate::model::flood::FloodSettings;
use crate::model::hardware::{LineSettings, Profile};
use crate::model::noise::{Chatter, NoiseSettings};
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A configured secret: usable, but never printed by `Debug`.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct SecretString(pub String);

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "\"[redacted]\""
        })
    }
}

impl SecretString {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    pub base_url: String,
    pub listen: String,
    pub data_dir: PathBuf,
    pub tls: TlsConfig,
    pub trust_proxy: bool,
    pub allow_signup: bool,
    pub problem_base: Option<String>,
    pub storage: StorageConfig,
    pub oidc: OidcConfig,
    pub ldap: LdapConfig,
    pub site: SiteConfig,
    pub hardware: HardwareConfig,
    pub ai: AiConfig,
    pub secrets: SecretsConfig,
    pub auth: AuthConfig,
    pub checks: ChecksConfig,
    pub programs: ProgramsConfig,
    pub ingress: IngressConfig,
    pub memory: MemoryConfig,
    pub notify: NotifyConfig,
    pub alerting: AlertingConfig,
    /// A host, service, template, alert rule or escalation policy that names a check command,
    /// check period, escalation policy or time interval nothing defines is refused at save
    /// (422), as Icinga refuses such a config. Off by default: the reference saves such names as written, and its clients may
    /// create what they name afterwards.
    pub strict_references: bool,
    /// A bearer token `/metrics` then requires (`Authorization: Bearer <token>`), and with
    /// which it names each event source in its series; without one, `/metrics` answers anyone
    /// and sums the event sources' counters (their names are what a sender of events needs).
    pub metrics_token: SecretString,
    /// The file this configuration was read from, if any: programs may not read it.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            base_url: "https://localhost:8443".into(),
            listen: "0.0.0.0:8443".into(),
            data_dir: PathBuf::from("./svc-data"),
            tls: TlsConfig::default(),
            trust_proxy: false,
            allow_signup: false,
            problem_base: None,
            storage: StorageConfig::default(),
            oidc: OidcConfig::default(),
            ldap: LdapConfig::default(),
            site: SiteConfig::default(),
            hardware: HardwareConfig::default(),
            ai: AiConfig::default(),
            secrets: SecretsConfig::default(),
            auth: AuthConfig::default(),
            checks: ChecksConfig::default(),
            programs: ProgramsConfig::default(),
            ingress: IngressConfig::default(),
            memory: MemoryConfig::default(),
            notify: NotifyConfig::default(),
            alerting: AlertingConfig::default(),
            strict_references: false,
            metrics_token: SecretString::default(),
            source: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TlsConfig {
    /// `auto`: serve HTTPS with the configured files, else a self-signed certificate kept in the
    /// data dir; `off`: plain HTTP.
    pub mode: String,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The only directories a channel's or event source's `caFile` may name a file in
    /// (absolute paths).
    pub ca_dirs: Vec<PathBuf>,
}

/// Where Debian keeps CA certificates, and the service's own configuration directory.
pub const DEFAULT_CA_DIRS: [&str; 3] = [
    "/etc/ssl/certs",
    "/usr/local/share/ca-certificates",
    "/etc/svc",
];

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            mode: "auto".into(),
            cert_file: None,
            key_file: None,
            ca_dirs: DEFAULT_CA_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StorageConfig {
    pub backend: String,
    pub event_retention_months: u32,
    pub postgres: PostgresConfig,
    pub wear: WearConfig,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            backend: "redb".into(),
            event_retention_months: 12,
            postgres: PostgresConfig::default(),
            wear: WearConfig::default(),
        }
    }
}

/// The card's rated endurance, for its projected life (`runtime::wear`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WearConfig {
    /// The bytes the card takes from the host over its life: its TBW rating, or its size
    /// times its erase cycles over the write amplification (32GB × 500 / 10 = 1.6TB).
    pub endurance: Option<crate::model::size::ByteSize>,
    /// An alert when the projected life falls under this many years.
    pub alert_under_years: f64,
}

impl Default for WearConfig {
    fn default() -> Self {
        Self {
            endurance: None,
            alert_under_years: 5.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/database` (`SERVICE_STORAGE_POSTGRES_URL`, so the
    /// password need not be in the file).
    pub url: SecretString,
    /// `disable`, `prefer` or `require`; unset, the URL's `sslmode` (else `prefer`). TLS
    /// (rustls) always checks the server's certificate and name.
    pub tls_mode: String,
    /// A private CA's PEM certificates for the server's certificate; else the system roots.
    pub ca_file: Option<String>,
    /// Connections kept for reads, beside the writer's one.
    pub pool_size: usize,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            url: SecretString::default(),
            tls_mode: String::new(),
            ca_file: None,
            pool_size: 8,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OidcConfig {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: SecretString,
    pub scopes: Option<Vec<String>>,
    pub groups_claim: Option<String>,
    pub admin_group: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LdapConfig {
    pub url: String,
    pub start_tls: bool,
    pub insecure_skip_verify: bool,
    pub bind_dn: String,
    pub bind_password: SecretString,
    pub base_dn: String,
    pub user_filter: Option<String>,
    pub user_attr: Option<String>,
    pub name_attr: Option<String>,
    pub id_attr: Option<String>,
    pub group_attr: Option<String>,
    pub group_filter: Option<String>,
    pub group_base_dn: Option<String>,
    pub sync_interval: Option<GoDuration>,
    pub default_roles: Option<Vec<String>>,
    pub admin_group: Option<String>,
    pub disable_missing: Option<bool>,
}

/// This instance as a federation site of a main instance.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SiteConfig {
    pub main_url: String,
    pub name: String,
    pub token: SecretString,
    pub pull_interval: Option<GoDuration>,
    pub heartbeat_interval: Option<GoDuration>,
    /// A PEM file of the CA(s) that sign the main's certificate, instead of the system roots.
    pub ca_file: String,
    /// The SHA-256 of the main's certificate (hex, colons allowed): only that certificate is
    /// accepted, whoever signed it.
    pub fingerprint: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HardwareConfig {
    pub gsm: Option<GsmConfig>,
    pub espa: Option<EspaConfig>,
    pub modbus: Option<ModbusConfig>,
}

/// The GSM modem: its port, the SIM PIN (a `$SECRET:name$` of the default tenant, or the PIN),
/// the modem family (`generic`, `simcom`, `quectel`) and call timing.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GsmConfig {
    pub device: String,
    /// Default 115200.
    pub baud_rate: Option<u32>,
    pub pin: SecretString,
    pub profile: Option<String>,
    /// How long a call may ring (default 45s).
    pub ring_timeout: Option<GoDuration>,
    /// How long a key press is awaited once the message was spoken (default 30s).
    pub key_timeout: Option<GoDuration>,
}

/// The ESPA 4.4.4 line: a serial port or `tcp://host:port`, 9600 baud 7E1 by default; our
/// station address (`1`) and the paging system's (`2`); the answer timeout (3s) and
/// transmissions per block (3).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EspaConfig {
    pub device: String,
    pub baud_rate: Option<u32>,
    pub framing: Option<String>,
    pub address: Option<String>,
    pub peer_address: Option<String>,
    pub reply_timeout: Option<GoDuration>,
    pub attempts: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModbusConfig {
    /// RTU line shared by Modbus checks, when they use one.
    pub device: Option<String>,
    pub baud_rate: Option<u32>,
}

/// The AI agent. Off unless `provider` names one; then nothing leaves the box except to the
/// endpoints named here (the instance's own and `endpoints`), whatever an API user stores.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AiConfig {
    /// `none` (AI off), `openai` (an OpenAI-compatible chat-completions API) or `anthropic`
    /// (an Anthropic-compatible messages API): the instance connection's wire format.
    pub provider: String,
    /// The instance connection's base URL (`https://api.openai.com/v1` for `openai`,
    /// `https://api.anthropic.com/v1` for `anthropic`, when left out).
    pub endpoint: Option<String>,
    /// The instance connection's model.
    pub model: Option<String>,
    /// The instance connection's API key (`SERVICE_AI_API_KEY`).
    pub api_key: SecretString,
    /// Further base URLs connections made through the API may use (a local model server, a
    /// gateway); a connection elsewhere is refused, so a stored URL cannot aim the server at
    /// an internal address.
    pub endpoints: Vec<String>,
    /// Tokens a tenant may spend a calendar month (UTC); a `system` warning event at 80 %,
    /// and turns are refused once it is spent.
    pub monthly_token_budget: u64,
    /// Days a conversation (`/ai/conversations`, which no route deletes) is kept after its last
    /// turn; older ones go, with their messages, in a later conversation turn of the tenant.
    pub conversation_retention_days: u32,
    /// Agent turns running at once in the whole instance; more are refused (503), as AI work
    /// is the first to give way.
    pub max_concurrent_turns: usize,
}

impl Default for AiConfig {
    fn default() -> Self {
        Self {
            provider: "none".into(),
            endpoint: None,
            model: None,
            api_key: SecretString::default(),
            endpoints: Vec::new(),
            monthly_token_budget: 50_000_000,
            conversation_retention_days: 90,
            max_concurrent_turns: 4,
        }
    }
}

impl AiConfig {
    pub fn enabled(&self) -> bool {
        self.provider != "none"
    }

    /// The base URL of the instance connection.
    pub fn instance_endpoint(&self) -> Option<String> {
        let default = match self.provider.as_str() {
            "openai" => "https://api.openai.com/v1",
            "anthropic" => "https://api.anthropic.com/v1",
            _ => return None,
        };
        Some(
            self.endpoint
                .clone()
                .unwrap_or_else(|| default.to_string())
                .trim_end_matches('/')
                .to_string(),
        )
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SecretsConfig {
    /// Default: `master.key` in the data dir, generated on first start.
    pub master_key_file: Option<PathBuf>,
}

/// Credential hashing.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Password and token hashes (argon2id, 64 MiB each) computed at once, 1..=64; others
    /// wait. Default: the number of cores. It bounds the memory a burst of sign-ins takes.
    pub hash_concurrency: Option<usize>,
}

impl AuthConfig {
    pub fn hash_slots(&self) -> usize {
        self.hash_concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}

/// Resident memory.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// After this long without a request, the server returns its allocator's free memory and
    /// its code pages (read again from the binary as they run) to the kernel; `0s` never.
    pub release_after: GoDuration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            release_after: GoDuration::from_secs(30),
        }
    }
}

/// Active checks.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChecksConfig {
    /// Checks (built-in or plugin processes) running at once, 1..=1024.
    pub max_concurrent: usize,
    /// The only directories plugin check commands may run programs from (absolute paths).
    /// Default: the Debian monitoring-plugins directories.
    pub plugin_dirs: Vec<PathBuf>,
}

/// How the programs API users name (plugin checks, script channels) are confined
/// (`runtime/sandbox.rs`, docs/security.md).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProgramsConfig {
    /// Programs, or directories of programs, that plugins and scripts may run besides
    /// themselves (absolute paths): the helpers some plugins call, such as `/usr/bin/ping`
    /// for `check_ping` or `/usr/bin/ssh` for `check_by_ssh`. None by default.
    pub allow_exec: Vec<PathBuf>,
    /// A user to run plugins and scripts as (the server must start as root); with Landlock,
    /// besides it, without (kernels before 5.13), instead of it.
    pub run_as: Option<String>,
    /// Landlock confinement where the kernel has it (default true).
    pub landlock: bool,
}

impl Default for ProgramsConfig {
    fn default() -> Self {
        Self {
            allow_exec: Vec::new(),
            run_as: None,
            landlock: true,
        }
    }
}

/// Event sources.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct IngressConfig {
    /// The ports below 1024 an event source may listen on (default `[162]`, SNMP traps'): any
    /// other is refused at save, so an editor cannot take a port the operator did not hand out.
    pub privileged_ports: Vec<u16>,
}

impl Default for IngressConfig {
    fn default() -> Self {
        Self {
            privileged_ports: vec![162],
        }
    }
}

/// Where Debian's monitoring-plugins packages install their plugins.
pub const DEBIAN_PLUGIN_DIRS: [&str; 2] =
    ["/usr/lib/nagios/plugins", "/usr/lib/monitoring-plugins"];

impl Default for ChecksConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 32,
            plugin_dirs: DEBIAN_PLUGIN_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// Notification.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NotifyConfig {
    /// The only directory script channels may run programs from (an absolute path); none, the
    /// default, turns script channels off.
    pub script_dir: Option<PathBuf>,
    /// The push services `push` channels reach, as origins (`https://host[:port]`, `*.` for
    /// any subdomain): a subscription's endpoint elsewhere is not sent to, so a registered
    /// URL cannot aim the server at an internal address. The default: the push services of
    /// Chrome, Firefox, Safari and Edge.
    pub push_services: Vec<String>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            script_dir: None,
            push_services: [
                "https://fcm.googleapis.com",
                "https://*.push.services.mozilla.com",
                "https://web.push.apple.com",
                "https://*.notify.windows.com",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// Alert correlation, and the noise controls of every tenant that does not set its own.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AlertingConfig {
    /// Alerts opened within `stormWindow` sharing one label pair that make an alarm storm
    /// incident, 2..=1000.
    pub storm_threshold: usize,
    pub storm_window: GoDuration,
    /// The longest a timed shelf may hold an alert (OPC UA's `MaxTimeShelved`).
    pub max_shelve: GoDuration,
    /// When an alert chatters and shelves itself (ISA-18.2).
    pub chatter: Chatter,
    /// Alarm floods: when a tenant's (or a label value's) alerts open too fast, people get a
    /// digest instead of a page per alert.
    pub flood: FloodSettings,
}

impl AlertingConfig {
    /// The noise controls of a tenant that sets none of its own.
    pub fn noise(&self) -> NoiseSettings {
        NoiseSettings {
            max_shelve: self.max_shelve,
            chatter: self.chatter,
            flood: self.flood.clone(),
        }
    }
}

impl Default for AlertingConfig {
    fn default() -> Self {
        let noise = NoiseSettings::default();
        Self {
            storm_threshold: 5,
            storm_window: GoDuration::from_secs(120),
            max_shelve: noise.max_shelve,
            chatter: noise.chatter,
            flood: noise.flood,
        }
    }
}

/// Values given on the command line; they win over everything else.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<String>,
    pub tls: Option<String>,
}

/// Everything wrong with a configuration, one line per problem.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n  {}", .0.join("\n  "))]
pub struct ConfigError(pub Vec<String>);

impl Config {
    /// Reads the file (if any), applies environment and flag overrides, and validates.
    pub fn load(
        overrides: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let path = overrides
            .config
            .clone()
            .or_else(|| env("SVC_CONFIG").map(PathBuf::from));
        let (cfg, mut problems) = match &path {
            Some(p) => Self::read_file(p),
            None => (Some(Config::default()), Vec::new()),
        };
        let Some(mut cfg) = cfg else {
            return Err(ConfigError(problems));
        };
        cfg.source = path.clone();
        cfg.apply_env(env);
        if let Some(d) = overrides
            .data_dir
            .clone()
            .or_else(|| env("SVC_DATA_DIR").map(PathBuf::from))
        {
            cfg.data_dir = d;
        }
        if let Some(l) = overrides.listen.clone().or_else(|| env("SVC_LISTEN")) {
            cfg.listen = l;
        }
        if let Some(t) = overrides.tls.clone().or_else(|| env("SVC_TLS")) {
            cfg.tls.mode = t;
        }
        problems.extend(cfg.problems());
        if problems.is_empty() {
            Ok(cfg)
        } else {
            Err(ConfigError(problems))
        }
    }

    /// The file's configuration as far as it reads, and its problems, each naming the file.
    fn read_file(path: &Path) -> (Option<Config>, Vec<String>) {
        let (cfg, problems) = match std::fs::read_to_string(path) {
            Ok(text) => Self::read_yaml(&text),
            Err(e) => (None, vec![e.to_string()]),
        };
        let named = problems
            .into_iter()
            .map(|p| format!("{}: {p}", path.display()))
            .collect();
        (cfg, named)
    }

    /// The configuration of `text`, or what is wrong with it (the first problem).
    pub fn from_yaml(text: &str) -> Result<Config, String> {
        match Self::read_yaml(text) {
            (Some(cfg), problems) if problems.is_empty() => Ok(cfg),
            (_, problems) => Err(problems.join("\n")),
        }
    }

    /// Reads `text`, naming every key that does not fit rather than stopping at the first:
    /// each line a problem is found on is set aside (with the lines nested under it) and the
    /// rest read again, so `svc config check` lists them all. Returns the configuration
    /// without them, when the rest reads, and the problems, each with its key and line
    /// (`dataDirr: unknown field ... (line 1)`).
    fn read_yaml(text: &str) -> (Option<Config>, Vec<String>) {
        if text.trim().is_empty() {
            return (Some(Config::default()), Vec::new());
        }
        // The lines still read, each with its number in the file.
        let mut lines: Vec<(usize, &str)> =
            text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
        let mut problems = Vec::new();
        // Each round sets a line aside; a file has far fewer problems.
        for _ in 0..100 {
            let current = lines.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
            let de = serde_yaml_ng::Deserializer::from_str(&current);
            let e = match serde_path_to_error::deserialize::<_, Config>(de) {
                Ok(cfg) => return (Some(cfg), problems),
                Err(e) => e,
            };
            let mut at: Vec<String> = e
                .path()
                .iter()
                .map(|seg| seg.to_string())
                .filter(|seg| seg != "?")
                .collect();
            let inner = e.into_inner();
            let message = inner.to_string();
            // The message's own position counts the lines still read; the file's is added.
            let message = message
                .split_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            // The parser names the path (or its parent) itself in nested errors; it is said
            // once, in front.
            let message = (1..=at.len())
                .rev()
                .find_map(|n| message.strip_prefix(&format!("{}: ", at[..n].join("."))))
                .unwrap_or(message)
                .to_string();
            if let Some(field) = message
                .strip_prefix("unknown field `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(field, _)| field.to_string())
                && at.last() != Some(&field)
            {
                at.push(field);
            }
            let key = if at.is_empty() {
                "(the file)".to_string()
            } else {
                at.join(".")
            };
            let Some(index) = inner
                .location()
                .map(|l| l.line().saturating_sub(1))
                .filter(|i| *i < lines.len())
            else {
                problems.push(format!("{key}: {message}"));
                return (None, problems);
            };
            problems.push(format!("{key}: {message} (line {})", lines[index].0));
            let indent = |l: &str| l.len() - l.trim_start().len();
            let own = indent(lines[index].1);
            let nested = lines[index + 1..]
                .iter()
                .take_while(|(_, l)| l.trim().is_empty() || indent(l) > own)
                .count();
            lines.drain(index..=index + nested);
        }
        (None, problems)
    }

    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) {
        if let Some(v) = env("SERVICE_ALLOW_SIGNUP") {
            self.allow_signup = v == "true" || v == "1";
        }
        let set = |target: &mut String, key: &str| {
            if let Some(v) = env(key) {
                *target = v;
            }
        };
        set(&mut self.oidc.issuer, "SERVICE_OIDC_ISSUER");
        set(&mut self.oidc.client_id, "SERVICE_OIDC_CLIENT_ID");
        set(&mut self.oidc.client_secret.0, "SERVICE_OIDC_CLIENT_SECRET");
        set(&mut self.ldap.url, "SERVICE_LDAP_URL");
        set(&mut self.ldap.bind_dn, "SERVICE_LDAP_BIND_DN");
        set(&mut self.ldap.bind_password.0, "SERVICE_LDAP_BIND_PASSWORD");
        set(&mut self.ldap.base_dn, "SERVICE_LDAP_BASE_DN");
        set(&mut self.ai.api_key.0, "SERVICE_AI_API_KEY");
        set(&mut self.metrics_token.0, "SVC_METRICS_TOKEN");
        set(&mut self.storage.backend, "SERVICE_STORAGE_BACKEND");
        set(
            &mut self.storage.postgres.url.0,
            "SERVICE_STORAGE_POSTGRES_URL",
        );
    }

    /// Every problem of a parsed configuration, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.listen.parse::<SocketAddr>().is_err() {
            p.push(format!(
                "listen: {:?} is not an address such as 0.0.0.0:8443",
                self.listen
            ));
        }
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            p.push(format!(
                "baseUrl: {:?} must start with http:// or https://",
                self.base_url
            ));
        }
        if let Some(pb) = &self.problem_base
            && !(pb.starts_with("http://") || pb.starts_with("https://") || pb.starts_with('/'))
        {
            p.push(format!(
                "problemBase: {pb:?} must be an absolute URL or path"
            ));
        }
        if self.data_dir.as_os_str().is_empty() {
            p.push("dataDir: must not be empty".into());
        }
        match self.tls.mode.as_str() {
            "auto" | "off" => {}
            other => p.push(format!("tls.mode: {other:?} must be auto or off")),
        }
        match (&self.tls.cert_file, &self.tls.key_file) {
            (Some(_), None) => p.push("tls.keyFile: required when tls.certFile is set".into()),
            (None, Some(_)) => p.push("tls.certFile: required when tls.keyFile is set".into()),
            (Some(c), Some(k)) => {
                for (key, f) in [("tls.certFile", c), ("tls.keyFile", k)] {
                    if !f.is_file() {
                        p.push(format!("{key}: {} is not a readable file", f.display()));
                    }
                }
            }
            (None, None) => {}
        }
        if !(2..=1000).contains(&self.alerting.storm_threshold) {
            p.push(format!(
                "alerting.stormThreshold: {} must be 2..1000",
                self.alerting.storm_threshold
            ));
        }
        if self.alerting.storm_window.0.is_zero() {
            p.push("alerting.stormWindow: must be positive".into());
        }
        p.extend(self.alerting.noise().problems("alerting."));
        let release_after = self.memory.release_after.0;
        if !release_after.is_zero() && release_after < Duration::from_secs(1) {
            p.push(format!(
                "memory.releaseAfter: {} must be 0s (never) or at least 1s",
                self.memory.release_after
            ));
        }
        if let Some(n) = self.auth.hash_concurrency
            && !(1..=64).contains(&n)
        {
            p.push(format!("auth.hashConcurrency: {n} must be 1..64"));
        }
        let program_dirs = self
            .checks
            .plugin_dirs
            .iter()
            .map(|d| ("checks.pluginDirs", d))
            .chain(
                self.notify
                    .script_dir
                    .iter()
                    .map(|d| ("notify.scriptDir", d)),
            )
            .chain(
                self.programs
                    .allow_exec
                    .iter()
                    .map(|d| ("programs.allowExec", d)),
            );
        for (key, dir) in program_dirs {
            if !dir.is_absolute() {
                p.push(format!("{key}: {} must be an absolute path", dir.display()));
            }
        }
        if self.metrics_token.0.starts_with("svc_")
            || self.metrics_token.0.contains(char::is_whitespace)
        {
            p.push("metricsToken: must not start with svc_ (an API token's prefix) nor hold white space".into());
        }
        if !(1..=1024).contains(&self.checks.max_concurrent) {
            p.push(format!(
                "checks.maxConcurrent: {} must be 1..1024",
                self.checks.max_concurrent
            ));
        }
        match self.storage.backend.as_str() {
            "redb" => {}
            "postgres" if !cfg!(feature = "postgres") => p.push(
                "storage.backend: postgres is not available in this build (built without the postgres feature); use redb".into(),
            ),
            "postgres" => {
                let pg = &self.storage.postgres;
                let url = &pg.url.0;
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    p.push("storage.postgres.url: required with storage.backend postgres: postgres://user:password@host:port/database (or SERVICE_STORAGE_POSTGRES_URL)".into());
                }
                if !["", "disable", "prefer", "require"].contains(&pg.tls_mode.as_str()) {
                    p.push(format!(
                        "storage.postgres.tlsMode: {:?} must be disable, prefer or require",
                        pg.tls_mode
                    ));
                }
                if !(1..=64).contains(&pg.pool_size) {
                    p.push(format!(
                        "storage.postgres.poolSize: {} must be 1..64",
                        pg.pool_size
                    ));
                }
            }
            other => p.push(format!(
                "storage.backend: {other:?} must be redb or postgres"
            )),
        }
        let oidc = &self.oidc;
        if !(oidc.issuer.is_empty() && oidc.client_id.is_empty() && oidc.client_secret.is_empty()) {
            if oidc.client_id.is_empty() {
                p.push("oidc.clientId: required when any oidc key is set".into());
            }
            if !oidc.issuer.starts_with("http") {
                p.push("oidc.issuer: required (the discovery URL) when any oidc key is set".into());
            }
        }
        let ldap = &self.ldap;
        if !ldap.url.is_empty() {
            if !(ldap.url.starts_with("ldap://") || ldap.url.starts_with("ldaps://")) {
                p.push(format!(
                    "ldap.url: {:?} must start with ldap:// or ldaps://",
                    ldap.url
                ));
            }
            if ldap.base_dn.is_empty() {
                p.push("ldap.baseDn: required when ldap.url is set".into());
            }
            if !ldap.bind_dn.is_empty() && ldap.bind_password.is_empty() {
                p.push("ldap.bindPassword: required when ldap.bindDn is set".into());
            }
        }
        let site = &self.site;
        if !(site.main_url.is_empty() && site.name.is_empty() && site.token.is_empty()) {
            for (key, empty) in [
                ("site.mainUrl", site.main_url.is_empty()),
                ("site.name", site.name.is_empty()),
                ("site.token", site.token.is_empty()),
            ] {
                if empty {
                    p.push(format!("{key}: required when this instance is a site"));
                }
            }
            if !site.fingerprint.is_empty()
                && crate::model::site::parse_fingerprint(&site.fingerprint).is_none()
            {
                p.push(format!(
                    "site.fingerprint: {}",
                    crate::model::site::FINGERPRINT_FORM
                ));
            }
            if !site.ca_file.is_empty() && !std::path::Path::new(&site.ca_file).is_file() {
                p.push(format!(
                    "site.caFile: {} is not a readable file",
                    site.ca_file
                ));
            }
        }
        let gsm = self.hardware.gsm.as_ref().map(|g| (&g.device, g.baud_rate));
        let espa = self
            .hardware
            .espa
            .as_ref()
            .map(|e| (&e.device, e.baud_rate));
        for (key, dev) in [("hardware.gsm", gsm), ("hardware.espa", espa)] {
            if let Some((device, baud)) = dev {
                if device.is_empty() {
                    p.push(format!(
                        "{key}.device: required (a serial port such as /dev/ttyUSB0)"
                    ));
                }
                if baud == Some(0) {
                    p.push(format!("{key}.baudRate: must be positive"));
                }
            }
        }
        if let Some(g) = &self.hardware.gsm
            && let Err(e) = g.profile.as_deref().unwrap_or_default().parse::<Profile>()
        {
            p.push(format!("hardware.gsm.profile: {e}"));
        }
        if let Some(e) = &self.hardware.espa {
            if let Err(why) = LineSettings::new(9600, e.framing.as_deref().unwrap_or("7E1")) {
                p.push(format!("hardware.espa.framing: {why}"));
            }
            for (key, a) in [("address", &e.address), ("peerAddress", &e.peer_address)] {
                if a.as_deref()
                    .is_some_and(|a| !(a.len() == 1 && a.as_bytes()[0].is_ascii_digit()))
                {
                    p.push(format!("hardware.espa.{key}: one digit, 0 to 9"));
                }
            }
        }
        if !["none", "openai", "anthropic"].contains(&self.ai.provider.as_str()) {
            p.push(format!(
                "ai.provider: {:?} is not one of none, openai, anthropic",
                self.ai.provider
            ));
        }
        for e in self.ai.endpoint.iter().chain(&self.ai.endpoints) {
            if !(e.starts_with("https://") || e.starts_with("http://"))
                || url::Url::parse(e).is_err()
            {
                p.push(format!("ai.endpoints: {e:?} is not an http(s) URL"));
            }
        }
        if self.ai.max_concurrent_turns == 0 {
            p.push("ai.maxConcurrentTurns: at least 1".into());
        }
        if self.ai.conversation_retention_days == 0 {
            p.push("ai.conversationRetentionDays: at least 1".into());
        }
        p
    }

    /// Base of problem `type` URIs, without a trailing slash.
    pub fn problem_base(&self) -> String {
        self.problem_base
            .clone()
            .unwrap_or_else(|| format!("{}/problems", self.base_url.trim_end_matches('/')))
            .trim_end_matches('/')
            .to_string()
    }

    pub fn master_key_file(&self) -> PathBuf {
        self.secrets
            .master_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("master.key"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn every_key_that_does_not_fit_is_named_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svc.yaml");
        std::fs::write(
            &file,
            "dataDirr: /x\nlisten: nowhere\ntls:\n  mode: off\n  bogus: 1\nnotify:\n  scriptDir: [1, 2]\nalerting: {stormThreshold: many}\n",
        )
        .unwrap();
        let ConfigError(problems) = Config::load(
            &Overrides {
                config: Some(file),
                ..Default::default()
            },
            &no_env,
        )
        .unwrap_err();
        let all = problems.join("\n");
        for key in [
            "dataDirr: unknown field",
            "tls.bogus: unknown field",
            "notify.scriptDir: invalid type",
            "alerting.stormThreshold: invalid type",
        ] {
            assert!(all.contains(key), "{key} missing from:\n{all}");
        }
        assert!(all.contains("listen: \"nowhere\""), "and the values: {all}");
        assert_eq!(problems.len(), 5, "{all}");
        let (_, broken) = Config::read_yaml("listen: [unclosed\n");
        assert_eq!(broken.len(), 1, "YAML that does not read is one problem");
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_postgres_backend_needs_a_url_and_a_known_tls_mode() {
        let problems = |yaml: &str| Config::from_yaml(yaml).unwrap().problems().join("\n");
        let all = problems(
            "storage: {backend: postgres, postgres: {tlsMode: verify-full, poolSize: 0}}\n",
        );
        for key in [
            "storage.postgres.url: required",
            "storage.postgres.tlsMode: \"verify-full\"",
            "storage.postgres.poolSize: 0",
        ] {
            assert!(all.contains(key), "{key} missing from:\n{all}");
        }
        let url = "storage: {backend: postgres, postgres: {url: 'postgres://svc@db/svc'}}\n";
        assert_eq!(problems(url), "");
    }

    #[test]
    fn defaults_are_valid() {
        let c = Config::load(&Overrides::default(), &no_env).unwrap();
        assert_eq!(c.listen, "0.0.0.0:8443");
        assert_eq!(c.data_dir, PathBuf::from("./svc-data"));
        assert_eq!(c.tls.mode, "auto");
        assert_eq!(c.storage.event_retention_months, 12);
        assert_eq!(c.problem_base(), "https://localhost:8443/problems");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e =
            Config::from_yaml("listen: 0.0.0.0:1\ntls:\n  mode: off\n  bogus: 1\n").unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        let e = Config::from_yaml("dataDirr: /x\n").unwrap_err();
        assert!(e.contains("dataDirr"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let c = Config::from_yaml(
            "listen: nowhere\ntls: {mode: sometimes}\nldap: {url: 'ldap://x', bindDn: cn=a}\nstorage: {backend: mysql}\nauth: {hashConcurrency: 0}\nchecks: {maxConcurrent: 0}\nmemory: {releaseAfter: 10ms}\nsite: {mainUrl: 'https://main:8443', fingerprint: 'AB:CD', caFile: /nowhere/ca.pem}\n",
        )
        .unwrap();
        let p = c.problems().join("\n");
        for key in [
            "listen:",
            "tls.mode:",
            "ldap.baseDn:",
            "ldap.bindPassword:",
            "storage.backend:",
            "auth.hashConcurrency:",
            "checks.maxConcurrent:",
            "memory.releaseAfter:",
            "site.name:",
            "site.token:",
            "site.fingerprint:",
            "site.caFile:",
        ] {
            assert!(p.contains(key), "{key} missing from {p}");
        }
        let e = Config::from_yaml("storage: {eventRetentionMonths: -1}\n").unwrap_err();
        assert!(e.contains("eventRetentionMonths"), "{e}");
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svc.yaml");
        std::fs::write(
            &file,
            "listen: 127.0.0.1:1000\ndataDir: /from-file\nallowSignup: false\n",
        )
        .unwrap();
        let env: HashMap<&str, &str> = [
            ("SVC_LISTEN", "127.0.0.1:2000"),
            ("SVC_DATA_DIR", "/from-env"),
            ("SERVICE_ALLOW_SIGNUP", "true"),
            ("SERVICE_LDAP_BIND_PASSWORD", "hunter2hunter2"),
        ]
        .into();
        let env = |k: &str| env.get(k).map(|v| v.to_string());
        let o = Overrides {
            config: Some(file),
            data_dir: Some(PathBuf::from("/from-flag")),
            ..Default::default()
        };
        let c = Config::load(&o, &env).unwrap();
        assert_eq!(c.listen, "127.0.0.1:2000");
        assert_eq!(c.data_dir, PathBuf::from("/from-flag"));
        assert!(c.allow_signup);
        assert!(
            !format!("{c:?}").contains("hunter2"),
            "secrets are redacted in Debug"
        );
    }
}
