//! `snmp` and `snmp-walk`: polling a device's agent (SNMP v1, v2c, v3 with USM), with the
//! flags of the monitoring-plugins' `check_snmp`: `-H`, `-p` (161), `-P 1|2c|3` (2c), `-C`
//! community (public), `-o OID[,OID…]` (numeric, or a name of the common MIBs: `sysUpTime.0`,
//! `IF-MIB::ifOperStatus.2`), `-n` GETNEXT instead of GET, `-w`/`-c` ranges (one per OID, or one
//! for all), `-s` string and `-r` regex to match, `-l` labels, `-u` units, `--rate` (counters
//! as a rate a second, `--rate-multiplier`), `-U`/`-L`/`-a`/`-A`/`-x`/`-X` and `-N` context for
//! v3, `-e` retries (2), `-t` seconds (the check's timeout at most). `--interface NAME|INDEX`
//! reads one row of the interfaces table (status, traffic, errors). `snmp-walk -o ROOT` walks a
//! subtree with GETBULK (GETNEXT on v1), at most `--max-rows` rows (1,000, up to 10,000), and
//! `snmp-walk --interfaces` lists the interfaces with the check that watches each.
//!
//! A device that does not answer in time is CRITICAL (as `modbus`); an agent that refuses the
//! credentials, or a value the agent does not have, is UNKNOWN: the device is up, the check is
//! wrong. Counters become rates between two readings kept in memory (`Counters`), with a
//! Counter32's or Counter64's wrap undone; the first reading has no rate and is OK, as
//! check_snmp assumes.

use super::{Builtin, Limits, Outcome, perf_label, status_word};
use crate::model::Timestamp;
use crate::model::state::worse;
use crate::runtime::Locked;
use snmp2::{AsyncSession, Error as SnmpError, MessageType, Oid, Value, v3};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Mutex;
use std::time::Duration;

const DEFAULT_PORT: u16 = 161;
const DEFAULT_RETRIES: u32 = 2;
const DEFAULT_ROWS: usize = 1_000;
/// The most rows a walk reads, however many are asked: a walk is one check, not an export.
const MAX_ROWS: usize = 10_000;
/// Rows asked for in one GETBULK: Net-SNMP's snmpbulkwalk asks for 10; more rows a round
/// trip, well within a datagram of values of common sizes.
const BULK_ROWS: u32 = 50;
/// Rows a walk prints in its long output; the rest are counted.
const ROWS_SHOWN: usize = 50;
/// Readings kept for rates; past it the oldest are forgotten.
const COUNTERS_KEPT: usize = 65_536;

/// Names of the common MIBs' objects (SNMPv2-MIB, IF-MIB, HOST-RESOURCES-MIB, UPS-MIB, UCD-SNMP-MIB).
const NAMES: &[(&str, &str)] = &[
    ("system", "1.3.6.1.2.1.1"),
    ("sysDescr", "1.3.6.1.2.1.1.1"),
    ("sysObjectID", "1.3.6.1.2.1.1.2"),
    ("sysUpTime", "1.3.6.1.2.1.1.3"),
    ("sysContact", "1.3.6.1.2.1.1.4"),
    ("sysName", "1.3.6.1.2.1.1.5"),
    ("sysLocation", "1.3.6.1.2.1.1.6"),
    ("ifNumber", "1.3.6.1.2.1.2.1"),
    ("ifTable", "1.3.6.1.2.1.2.2"),
    ("ifEntry", "1.3.6.1.2.1.2.2.1"),
    ("ifIndex", "1.3.6.1.2.1.2.2.1.1"),
    ("ifDescr", "1.3.6.1.2.1.2.2.1.2"),
    ("ifType", "1.3.6.1.2.1.2.2.1.3"),
    ("ifMtu", "1.3.6.1.2.1.2.2.1.4"),
    ("ifSpeed", "1.3.6.1.2.1.2.2.1.5"),
    ("ifPhysAddress", "1.3.6.1.2.1.2.2.1.6"),
    ("ifAdminStatus", "1.3.6.1.2.1.2.2.1.7"),
    ("ifOperStatus", "1.3.6.1.2.1.2.2.1.8"),
    ("ifLastChange", "1.3.6.1.2.1.2.2.1.9"),
    ("ifInOctets", "1.3.6.1.2.1.2.2.1.10"),
    ("ifInUcastPkts", "1.3.6.1.2.1.2.2.1.11"),
    ("ifInDiscards", "1.3.6.1.2.1.2.2.1.13"),
    ("ifInErrors", "1.3.6.1.2.1.2.2.1.14"),
    ("ifOutOctets", "1.3.6.1.2.1.2.2.1.16"),
    ("ifOutUcastPkts", "1.3.6.1.2.1.2.2.1.17"),
    ("ifOutDiscards", "1.3.6.1.2.1.2.2.1.19"),
    ("ifOutErrors", "1.3.6.1.2.1.2.2.1.20"),
    ("ifXTable", "1.3.6.1.2.1.31.1.1"),
    ("ifName", "1.3.6.1.2.1.31.1.1.1.1"),
    ("ifHCInOctets", "1.3.6.1.2.1.31.1.1.1.6"),
    ("ifHCOutOctets", "1.3.6.1.2.1.31.1.1.1.10"),
    ("ifHighSpeed", "1.3.6.1.2.1.31.1.1.1.15"),
    ("ifAlias", "1.3.6.1.2.1.31.1.1.1.18"),
    ("hrSystemUptime", "1.3.6.1.2.1.25.1.1"),
    ("hrSystemNumUsers", "1.3.6.1.2.1.25.1.5"),
    ("hrSystemProcesses", "1.3.6.1.2.1.25.1.6"),
    ("hrMemorySize", "1.3.6.1.2.1.25.2.2"),
    ("hrStorageTable", "1.3.6.1.2.1.25.2.3"),
    ("hrStorageDescr", "1.3.6.1.2.1.25.2.3.1.3"),
    ("hrStorageAllocationUnits", "1.3.6.1.2.1.25.2.3.1.4"),
    ("hrStorageSize", "1.3.6.1.2.1.25.2.3.1.5"),
    ("hrStorageUsed", "1.3.6.1.2.1.25.2.3.1.6"),
    ("hrProcessorLoad", "1.3.6.1.2.1.25.3.3.1.2"),
    ("hrSWRunName", "1.3.6.1.2.1.25.4.2.1.2"),
    ("upsIdentModel", "1.3.6.1.2.1.33.1.1.2"),
    ("upsBatteryStatus", "1.3.6.1.2.1.33.1.2.1"),
    ("upsSecondsOnBattery", "1.3.6.1.2.1.33.1.2.2"),
    ("upsEstimatedMinutesRemaining", "1.3.6.1.2.1.33.1.2.3"),
    ("upsEstimatedChargeRemaining", "1.3.6.1.2.1.33.1.2.4"),
    ("upsBatteryVoltage", "1.3.6.1.2.1.33.1.2.5"),
    ("upsBatteryTemperature", "1.3.6.1.2.1.33.1.2.7"),
    ("upsInputLineBads", "1.3.6.1.2.1.33.1.3.1"),
    ("upsInputVoltage", "1.3.6.1.2.1.33.1.3.3.1.3"),
    ("upsOutputSource", "1.3.6.1.2.1.33.1.4.1"),
    ("upsOutputVoltage", "1.3.6.1.2.1.33.1.4.4.1.2"),
    ("upsOutputPercentLoad", "1.3.6.1.2.1.33.1.4.4.1.5"),
    ("upsAlarmsPresent", "1.3.6.1.2.1.33.1.6.1"),
    ("laLoad", "1.3.6.1.4.1.2021.10.1.3"),
    ("memTotalReal", "1.3.6.1.4.1.2021.4.5"),
    ("memAvailReal", "1.3.6.1.4.1.2021.4.6"),
];

/// An OID as its arcs.
type Arcs = Vec<u64>;

/// `name[.suffix]` (a `MODULE::` prefix ignored) or a numeric OID, as arcs.
fn resolve(text: &str) -> Result<Arcs, String> {
    let bare = text.trim().trim_start_matches('.');
    let bare = bare.rsplit_once("::").map_or(bare, |(_, name)| name);
    let (head, suffix) = bare.split_once('.').unwrap_or((bare, ""));
    let numeric = match NAMES.iter().find(|(n, _)| *n == head) {
        Some((_, oid)) if suffix.is_empty() => (*oid).to_string(),
        Some((_, oid)) => format!("{oid}.{suffix}"),
        None => bare.to_string(),
    };
    let arcs: Option<Arcs> = numeric.split('.').map(|a| a.parse().ok()).collect();
    match arcs {
        Some(a) if a.len() >= 2 => Ok(a),
        _ => Err(format!(
            "{text:?} is neither a numeric OID nor a known name"
        )),
    }
}

/// The OID's best name: the longest known prefix and the rest of the arcs.
fn name_of(arcs: &[u64]) -> String {
    let dotted = dotted(arcs);
    NAMES
        .iter()
        .filter(|(_, oid)| dotted == *oid || dotted.starts_with(&format!("{oid}.")))
        .max_by_key(|(_, oid)| oid.len())
        .map_or(dotted.clone(), |(name, oid)| {
            format!("{name}{}", &dotted[oid.len()..])
        })
}

fn dotted(arcs: &[u64]) -> String {
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// A value the agent answered, owned.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Int(i64),
    Counter32(u32),
    Counter64(u64),
    Gauge(u32),
    Ticks(u32),
    Text(String),
    Missing(&'static str),
    End,
}

impl Val {
    fn of(v: &Value<'_>) -> Val {
        match v {
            Value::Integer(n) => Val::Int(*n),
            Value::Counter32(n) => Val::Counter32(*n),
            Value::Counter64(n) => Val::Counter64(*n),
            Value::Unsigned32(n) => Val::Gauge(*n),
            Value::Timeticks(n) => Val::Ticks(*n),
            Value::OctetString(s) => Val::Text(String::from_utf8_lossy(s).into_owned()),
            Value::ObjectIdentifier(o) => Val::Text(o.to_string()),
            Value::IpAddress(a) => Val::Text(format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])),
            Value::Boolean(b) => Val::Int(i64::from(*b)),
            Value::NoSuchObject => Val::Missing("no such object"),
            Value::NoSuchInstance => Val::Missing("no such instance"),
            Value::EndOfMibView => Val::End,
            Value::Null => Val::Missing("null"),
            _ => Val::Missing("a value of an unknown type"),
        }
    }

    /// The number it reads as: a string holding a number counts, as with check_snmp.
    fn number(&self) -> Option<f64> {
        match self {
            Val::Int(n) => Some(*n as f64),
            Val::Counter32(n) | Val::Gauge(n) | Val::Ticks(n) => Some(f64::from(*n)),
            Val::Counter64(n) => Some(*n as f64),
            Val::Text(s) => s.trim().parse().ok(),
            Val::Missing(_) | Val::End => None,
        }
    }

    /// A counter's raw reading and where it wraps.
    fn counter(&self) -> Option<(u128, u128)> {
        match self {
            Val::Counter32(n) => Some((u128::from(*n), 1 << 32)),
            Val::Counter64(n) => Some((u128::from(*n), 1 << 64)),
            _ => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Val::Text(s) => s.clone(),
            Val::Missing(why) => (*why).to_string(),
            Val::End => "end of the MIB".to_string(),
            v => v.number().map(|n| n.to_string()).unwrap_or_default(),
        }
    }
}

/// Counter readings of earlier runs, for rates: (agent, OID) → (raw, when). Kept in memory: a
/// restart costs one run without a rate, which check_snmp's state file would save.
#[derive(Default)]
pub struct Counters(Mutex<HashMap<String, (u128, Timestamp)>>);

impl Counters {
    /// The rate a second since the last reading of `key`, if there was one; a counter that
    /// went back by less than its wrap wrapped, one that went back further was reset (no rate).
    fn rate(&self, key: &str, raw: u128, wrap: u128, now: Timestamp) -> Option<f64> {
        let mut kept = self.0.locked();
        let before = kept.insert(key.to_string(), (raw, now));
        if kept.len() > COUNTERS_KEPT {
            let oldest = kept.values().map(|(_, t)| *t).min()?;
            kept.retain(|_, (_, t)| *t > oldest);
        }
        let (last, at) = before?;
        let secs = (now.as_millis() - at.as_millis()) as f64 / 1000.0;
        if secs <= 0.0 {
            return None;
        }
        let delta = if raw >= last {
            raw - last
        } else {
            let wrapped = wrap - last + raw;
            // A counter that jumped back by most of its range restarted rather than wrapped.
            (wrapped < wrap / 2).then_some(wrapped)?
        };
        Some(delta as f64 / secs)
    }
}

/// Why a request got no values.
enum Failure {
    /// Nothing came back in time.
    Silent(String),
    /// The agent answered, but not with values: refused credentials, an error status.
    Refused(String),
}

impl Failure {
    fn text(self) -> String {
        match self {
            Failure::Silent(why) | Failure::Refused(why) => why,
        }
    }

    fn outcome(self, check: &str) -> Outcome {
        match self {
            Failure::Silent(why) => Outcome::new(2, format!("{check} CRITICAL - {why}")),
            Failure::Refused(why) => Outcome::unknown(check, why),
        }
    }
}

/// How to reach the agent.
struct Agent {
    host: String,
    port: u16,
    version: Version,
    tries: u32,
    deadline: tokio::time::Instant,
    per_try: Duration,
    session: Option<AsyncSession>,
}

enum Version {
    V1(Vec<u8>),
    V2c(Vec<u8>),
    V3(Box<v3::Security>),
}

fn security(ctx: &Builtin<'_>) -> Result<v3::Security, String> {
    let user = ctx
        .args
        .get(&["-U", "--secname"])
        .ok_or("-P 3 needs a user (-U)")?;
    let auth_pass = ctx.args.get(&["-A", "--authpasswd"]).unwrap_or_default();
    let level = ctx
        .args
        .get(&["-L", "--seclevel"])
        .unwrap_or("authPriv")
        .to_ascii_lowercase();
    let protocol = match ctx
        .args
        .get(&["-a", "--authproto"])
        .unwrap_or("SHA")
        .to_ascii_uppercase()
        .as_str()
    {
        "MD5" => v3::AuthProtocol::Md5,
        "SHA" | "SHA1" | "SHA-1" => v3::AuthProtocol::Sha1,
        "SHA-224" | "SHA224" => v3::AuthProtocol::Sha224,
        "SHA-256" | "SHA256" => v3::AuthProtocol::Sha256,
        "SHA-384" | "SHA384" => v3::AuthProtocol::Sha384,
        "SHA-512" | "SHA512" => v3::AuthProtocol::Sha512,
        p => return Err(format!("-a {p:?} is not MD5, SHA or SHA-224..SHA-512")),
    };
    let mut key_extension = None;
    let auth = match level.as_str() {
        "noauthnopriv" => v3::Auth::NoAuthNoPriv,
        "authnopriv" => v3::Auth::AuthNoPriv,
        "authpriv" => {
            let cipher = match ctx
                .args
                .get(&["-x", "--privproto"])
                .unwrap_or("AES")
                .to_ascii_uppercase()
                .as_str()
            {
                "DES" => v3::Cipher::Des,
                "AES" | "AES128" | "AES-128" => v3::Cipher::Aes128,
                "AES192" | "AES-192" => v3::Cipher::Aes192,
                "AES256" | "AES-256" => v3::Cipher::Aes256,
                p => return Err(format!("-x {p:?} is not DES, AES, AES192 or AES256")),
            };
            if cipher.priv_key_needs_extension(&protocol) {
                // What Net-SNMP does for AES-192/256 (draft-reeder); the other is tried too.
                key_extension = Some(v3::KeyExtension::Reeder);
            }
            let privacy = ctx
                .args
                .get(&["-X", "--privpasswd"])
                .ok_or("authPriv needs a privacy passphrase (-X)")?;
            v3::Auth::AuthPriv {
                cipher,
                privacy_password: privacy.as_bytes().to_vec(),
            }
        }
        l => {
            return Err(format!(
                "-L {l:?} is not noAuthNoPriv, authNoPriv or authPriv"
            ));
        }
    };
    if !matches!(auth, v3::Auth::NoAuthNoPriv) && auth_pass.len() < 8 {
        return Err("-A needs an authentication passphrase of at least 8 characters".into());
    }
    let mut security = v3::Security::new(user.as_bytes(), auth_pass.as_bytes())
        .with_auth_protocol(protocol)
        .with_auth(auth);
    if let Some(method) = key_extension {
        security = security.with_key_extension_method(method);
    }
    if let Some(context) = ctx.args.get(&["-N", "--context"]) {
        security = security.with_context_name(context);
    }
    Ok(security)
}

impl Agent {
    fn of(ctx: &Builtin<'_>) -> Result<Agent, String> {
        let host = ctx.target().ok_or("no address (-H)")?;
        let community = || {
            ctx.args
                .get(&["-C", "--community"])
                .unwrap_or("public")
                .as_bytes()
                .to_vec()
        };
        let version = match ctx.args.get(&["-P", "--protocol"]).unwrap_or("2c") {
            "1" => Version::V1(community()),
            "2c" | "2" => Version::V2c(community()),
            "3" => Version::V3(Box::new(security(ctx)?)),
            p => return Err(format!("-P {p:?} is not 1, 2c or 3")),
        };
        let retries: u32 = ctx.number(&["-e", "--retries"], DEFAULT_RETRIES)?;
        let tries = retries.min(10) + 1;
        let own: f64 = ctx.number(&["-t", "--timeout"], ctx.timeout.as_secs_f64())?;
        if !(own.is_finite() && own > 0.0) {
            return Err(format!("-t {own} is not a number of seconds"));
        }
        let timeout = Duration::from_secs_f64(own).min(ctx.timeout);
        Ok(Agent {
            host,
            port: ctx.number(&["-p", "--port"], DEFAULT_PORT)?,
            version,
            tries,
            deadline: tokio::time::Instant::now() + timeout,
            per_try: timeout / tries,
            session: None,
        })
    }

    fn uses_bulk(&self) -> bool {
        !matches!(self.version, Version::V1(_))
    }

    /// Who the agent is, for the rates kept: one device's counter, however many checks read it.
    fn key(&self, oid: &[u64]) -> String {
        let context = match &self.version {
            Version::V3(s) => String::from_utf8_lossy(s.username()).into_owned(),
            _ => String::new(),
        };
        format!("{}:{}/{context}/{}", self.host, self.port, dotted(oid))
    }

    async fn session(&self) -> Result<AsyncSession, Failure> {
        let target = (self.host.as_str(), self.port);
        // Unguessable, so a forged answer has to guess it as well as the socket's port.
        let request_id = (RandomState::new().build_hasher().finish() >> 33) as i32;
        let unreachable = |e: std::io::Error| Failure::Silent(format!("{}: {e}", self.host));
        match &self.version {
            Version::V1(c) => AsyncSession::new_v1(target, c, request_id)
                .await
                .map_err(unreachable),
            Version::V2c(c) => AsyncSession::new_v2c(target, c, request_id)
                .await
                .map_err(unreachable),
            Version::V3(security) => {
                let mut session =
                    AsyncSession::new_v3(target, request_id, security.as_ref().clone())
                        .await
                        .map_err(unreachable)?;
                within(
                    self.left(),
                    self.per_try,
                    &self.host,
                    self.port,
                    session.init(),
                )
                .await?;
                Ok(session)
            }
        }
    }

    fn left(&self) -> Duration {
        self.deadline
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// One request, tried again on silence with a new socket (so a late answer to the last
    /// try is not taken for this one's); the session is kept while the agent answers.
    async fn request(&mut self, request: &Request<'_>) -> Result<Vec<(Arcs, Val)>, Failure> {
        let mut last = Failure::Silent("no try".into());
        for _ in 0..self.tries {
            if tokio::time::Instant::now() >= self.deadline {
                break;
            }
            match self.try_once(request).await {
                Err(Failure::Silent(why)) => {
                    self.session = None;
                    last = Failure::Silent(why);
                }
                done => return done,
            }
        }
        Err(match last {
            Failure::Silent(why) if self.tries > 1 => {
                Failure::Silent(format!("{why} ({} tries)", self.tries))
            }
            other => other,
        })
    }

    async fn try_once(&mut self, request: &Request<'_>) -> Result<Vec<(Arcs, Val)>, Failure> {
        let oids: Vec<Oid<'static>> = request
            .oids()
            .iter()
            .map(|a| Oid::from(a).map_err(|_| Failure::Refused(format!("{a:?} is not an OID"))))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Oid<'_>> = oids.iter().collect();
        if self.session.is_none() {
            self.session = Some(self.session().await?);
        }
        let (left, per_try) = (self.left(), self.per_try);
        let (host, port) = (self.host.clone(), self.port);
        let Some(session) = self.session.as_mut() else {
            return Err(Failure::Silent("no session".into()));
        };
        let pdu = match request {
            Request::Get(_) => within(left, per_try, &host, port, session.get_many(&refs)).await?,
            Request::Next(_) if refs.len() == 1 => {
                within(left, per_try, &host, port, session.getnext(refs[0])).await?
            }
            Request::Next(_) => {
                return Err(Failure::Refused("-n takes one OID at a time".into()));
            }
            Request::Bulk(_, rows) => {
                within(left, per_try, &host, port, session.getbulk(&refs, 0, *rows)).await?
            }
        };
        if pdu.message_type == MessageType::Report {
            return Err(Failure::Refused(report(&pdu)));
        }
        if pdu.error_status != 0 {
            return Err(Failure::Refused(error_status(
                pdu.error_status,
                pdu.error_index,
            )));
        }
        Ok(pdu
            .varbinds
            .map(|(oid, value)| {
                let arcs = oid.iter().map(|a| a.collect()).unwrap_or_default();
                (arcs, Val::of(&value))
            })
            .collect())
    }
}

/// `step` under one try's time (at most what is `left`).
async fn within<T>(
    left: Duration,
    per_try: Duration,
    host: &str,
    port: u16,
    step: impl Future<Output = Result<T, SnmpError>>,
) -> Result<T, Failure> {
    let limit = per_try.min(left);
    match tokio::time::timeout(limit, step).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(refusal(&e)),
        Err(_) => Err(Failure::Silent(format!(
            "no answer from {host}:{port} in {:.1}s",
            limit.as_secs_f64()
        ))),
    }
}

enum Request<'a> {
    Get(&'a [Arcs]),
    Next(&'a [Arcs]),
    Bulk(&'a [Arcs], u32),
}

impl Request<'_> {
    fn oids(&self) -> &[Arcs] {
        match self {
            Request::Get(o) | Request::Next(o) | Request::Bulk(o, _) => o,
        }
    }
}

fn refusal(e: &SnmpError) -> Failure {
    match e {
        SnmpError::AuthFailure(kind) => Failure::Refused(format!(
            "the agent refused the v3 credentials: the user or its passphrases ({kind})"
        )),
        SnmpError::Send | SnmpError::Receive => {
            Failure::Silent(format!("the agent could not be reached ({e:?})"))
        }
        other => Failure::Refused(format!("the agent's answer was not understood ({other:?})")),
    }
}

/// A v3 report names what the agent's security refused (RFC 3414's usmStats counters).
fn report(pdu: &snmp2::Pdu<'_>) -> String {
    let named = pdu.varbinds.clone().find_map(|(oid, _)| {
        let arcs: Arcs = oid.iter()?.collect();
        let prefix = [1, 3, 6, 1, 6, 3, 15, 1, 1];
        (arcs.starts_with(&prefix)).then(|| match arcs.get(prefix.len()) {
            Some(1) => "an unsupported security level",
            Some(2) => "a message outside the time window",
            Some(3) => "an unknown user",
            Some(4) => "an unknown engine",
            Some(5) => "a wrong authentication passphrase",
            Some(6) => "a wrong privacy passphrase",
            _ => "its security",
        })
    });
    format!(
        "the agent refused the v3 credentials: {}",
        named.unwrap_or("a report")
    )
}

fn error_status(status: u32, index: u32) -> String {
    let name = match status {
        1 => "tooBig",
        2 => "noSuchName",
        3 => "badValue",
        4 => "readOnly",
        5 => "genErr",
        6 => "noAccess",
        16 => "authorizationError",
        _ => "an error",
    };
    format!("the agent answered {name} (status {status}) for varbind {index}")
}

/// Walks the subtree under `root`: its rows in order, at most `limit`; `true` when more were
/// left.
async fn walk(
    agent: &mut Agent,
    root: &[u64],
    limit: usize,
) -> Result<(Vec<(Arcs, Val)>, bool), Failure> {
    let mut rows = Vec::new();
    let mut from = root.to_vec();
    loop {
        let ask = [from.clone()];
        let answer = if agent.uses_bulk() {
            agent.request(&Request::Bulk(&ask, BULK_ROWS)).await?
        } else {
            agent.request(&Request::Next(&ask)).await?
        };
        if answer.is_empty() {
            return Ok((rows, false));
        }
        for (oid, value) in answer {
            if !oid.starts_with(root) || value == Val::End {
                return Ok((rows, false));
            }
            if oid <= from {
                return Err(Failure::Refused(format!(
                    "the agent went back to {} after {} (not increasing)",
                    dotted(&oid),
                    dotted(&from)
                )));
            }
            if rows.len() == limit {
                return Ok((rows, true));
            }
            from.clone_from(&oid);
            rows.push((oid, value));
        }
    }
}

/// Each of a comma-separated list, the last one for those beyond it (`-w 10` for all OIDs).
fn nth(list: Option<&str>, i: usize) -> Option<String> {
    let items: Vec<&str> = list?.split(',').collect();
    items
        .get(i)
        .or(if items.len() == 1 {
            items.first()
        } else {
            None
        })
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let mut agent = match Agent::of(ctx) {
        Ok(a) => a,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    if let Some(interface) = ctx.args.get(&["--interface"]) {
        return interface_check(ctx, &mut agent, interface).await;
    }
    let oids: Vec<String> = ctx
        .args
        .all(&["-o", "--oid"])
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if oids.is_empty() {
        return Outcome::unknown("SNMP", "no OID (-o)");
    }
    let arcs: Vec<Arcs> = match oids.iter().map(|o| resolve(o)).collect() {
        Ok(a) => a,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let answer = if ctx.args.has(&["-n", "--next"]) {
        let mut all = Vec::new();
        for oid in &arcs {
            match agent
                .request(&Request::Next(std::slice::from_ref(oid)))
                .await
            {
                Ok(mut one) => all.append(&mut one),
                Err(f) => return f.outcome("SNMP"),
            }
        }
        all
    } else {
        match agent.request(&Request::Get(&arcs)).await {
            Ok(a) => a,
            Err(f) => return f.outcome("SNMP"),
        }
    };
    let (warn, crit) = (
        ctx.args.get(&["-w", "--warning"]),
        ctx.args.get(&["-c", "--critical"]),
    );
    let rate = ctx.args.has(&["--rate"]);
    let multiplier: f64 = match ctx.number(&["--rate-multiplier"], 1.0) {
        Ok(m) => m,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let expected = ctx.args.get(&["-s", "--string"]);
    let pattern = match ctx.args.get(&["-r", "--ereg", "-R", "--eregi"]) {
        Some(p) => {
            let insensitive = ctx.args.get(&["-R", "--eregi"]).is_some();
            match regex_lite::RegexBuilder::new(p)
                .case_insensitive(insensitive)
                .build()
            {
                Ok(r) => Some(r),
                Err(e) => return Outcome::unknown("SNMP", format!("-r {p:?}: {e}")),
            }
        }
        None => None,
    };
    let (mut code, mut texts, mut perf) = (0u8, Vec::new(), Vec::new());
    for (i, (oid, value)) in answer.iter().enumerate() {
        let label = nth(ctx.args.get(&["-l", "--label"]), i).unwrap_or_else(|| {
            oids.get(i)
                .filter(|_| !ctx.args.has(&["-n", "--next"]))
                .cloned()
                .unwrap_or_else(|| name_of(oid))
        });
        let unit = nth(ctx.args.get(&["-u", "--units"]), i).unwrap_or_default();
        if let Val::Missing(why) = value {
            code = worse(code, 3);
            texts.push(format!("{label}: {why}"));
            continue;
        }
        if *value == Val::End {
            code = worse(code, 3);
            texts.push(format!("{label}: nothing after it (end of the MIB)"));
            continue;
        }
        if expected.is_some() || pattern.is_some() {
            let text = value.text();
            let matched = expected.is_none_or(|s| s == text)
                && pattern.as_ref().is_none_or(|r| r.is_match(&text));
            if !matched {
                code = worse(code, 2);
            }
            texts.push(format!("{label} = {text:?}"));
            continue;
        }
        let Some(mut number) = value.number() else {
            texts.push(format!("{label} = {:?}", value.text()));
            continue;
        };
        let mut uom = String::new();
        if rate {
            let Some((raw, wrap)) = value.counter().or_else(|| {
                let n = value.number()?;
                (n >= 0.0).then_some((n as u128, u128::MAX))
            }) else {
                texts.push(format!("{label}: a negative value has no rate"));
                continue;
            };
            match ctx.counters.rate(&agent.key(oid), raw, wrap, ctx.now) {
                Some(r) => number = r * multiplier,
                None => {
                    texts.push(format!("{label}: no earlier reading for a rate yet"));
                    continue;
                }
            }
        } else if value.counter().is_some() {
            uom.push('c');
        }
        let limits = Limits::from_text(nth(warn, i), nth(crit, i));
        let limits = match limits {
            Ok(l) => l,
            Err(e) => return Outcome::unknown("SNMP", e),
        };
        code = worse(code, limits.grade(number));
        texts.push(format!("{label} = {}{unit}", shown(number)));
        if perf_unit(&unit) {
            uom = unit.clone();
        }
        perf.push(format!(
            "{}={}{uom};{}",
            perf_label(&label),
            shown(number),
            limits.perf()
        ));
    }
    let mut out = format!("SNMP {} - {}", status_word(code), texts.join(", "));
    if !perf.is_empty() {
        out.push_str(" | ");
        out.push_str(&perf.join(" "));
    }
    Outcome::new(code, out)
}

/// A unit performance data knows (the plugin guidelines' `s`, `%`, `B` and its multiples, `c`).
fn perf_unit(unit: &str) -> bool {
    matches!(
        unit,
        "s" | "ms" | "us" | "%" | "B" | "KB" | "MB" | "GB" | "TB" | "c"
    )
}

/// A number as printed: whole numbers without a fraction, others to three places.
fn shown(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        format!("{n:.3}")
    }
}

/// Bits a second, readable: `1.5 Mb/s`.
fn bits(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.2} Gb/s", n / 1e9),
        n if n >= 1e6 => format!("{:.2} Mb/s", n / 1e6),
        n if n >= 1e3 => format!("{:.1} kb/s", n / 1e3),
        n => format!("{n:.0} b/s"),
    }
}

const IF_DESCR: [u64; 10] = [1, 3, 6, 1, 2, 1, 2, 2, 1, 2];
const IF_NAME: [u64; 11] = [1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1];
const IF_OPER: [u64; 10] = [1, 3, 6, 1, 2, 1, 2, 2, 1, 8];

/// The row of the interface named `wanted` (its index, ifDescr or ifName).
async fn interface_index(agent: &mut Agent, wanted: &str) -> Result<Option<u64>, Failure> {
    if let Ok(index) = wanted.parse::<u64>() {
        return Ok(Some(index));
    }
    for column in [&IF_DESCR[..], &IF_NAME[..]] {
        let (rows, _) = walk(agent, column, MAX_ROWS).await?;
        if let Some((oid, _)) = rows.iter().find(|(_, v)| v.text() == wanted) {
            return Ok(oid.last().copied());
        }
    }
    Ok(None)
}

fn oper_status(n: i64) -> (&'static str, u8) {
    match n {
        1 => ("up", 0),
        2 => ("down", 2),
        3 => ("testing", 1),
        5 => ("dormant", 0),
        6 => ("notPresent", 2),
        7 => ("lowerLayerDown", 2),
        _ => ("unknown", 3),
    }
}

/// One row of an agent's interfaces table.
#[derive(Clone, Debug)]
pub(super) struct Interface {
    /// Its ifIndex.
    pub index: u64,
    /// Its ifDescr, control characters blanked.
    pub name: String,
    /// Its ifOperStatus by name (`up`, `down`, `lowerLayerDown`, …).
    pub status: &'static str,
}

/// The interfaces table's rows (ifDescr and ifOperStatus), at most `limit`; `true` when more
/// were left.
async fn interface_rows(
    agent: &mut Agent,
    limit: usize,
) -> Result<(Vec<Interface>, bool), Failure> {
    let (names, more) = walk(agent, &IF_DESCR, limit).await?;
    let (status, _) = walk(agent, &IF_OPER, limit).await?;
    let rows = names
        .into_iter()
        .map(|(oid, descr)| {
            let index = oid.last().copied().unwrap_or_default();
            let oper = status
                .iter()
                .find(|(o, _)| o.last() == Some(&index))
                .and_then(|(_, v)| v.number())
                .unwrap_or(0.0) as i64;
            Interface {
                index,
                name: one_line(&descr.text()),
                status: oper_status(oper).0,
            }
        })
        .collect();
    Ok((rows, more))
}

/// The agent's interfaces, every one (up to `MAX_ROWS`), for services made from them.
pub(super) async fn interfaces(ctx: &Builtin<'_>) -> Result<Vec<Interface>, String> {
    let mut agent = Agent::of(ctx)?;
    match interface_rows(&mut agent, MAX_ROWS).await {
        Ok((_, true)) => Err(format!("the agent has more than {MAX_ROWS} interfaces")),
        Ok((rows, false)) => Ok(rows),
        Err(f) => Err(f.text()),
    }
}

/// One interface: CRITICAL when it is administratively up and not operationally, its traffic
/// (bits a second) and errors (a second) as rates, `-w`/`-c` on its utilisation in percent.
async fn interface_check(ctx: &Builtin<'_>, agent: &mut Agent, wanted: &str) -> Outcome {
    let index = match interface_index(agent, wanted).await {
        Ok(Some(i)) => i,
        Ok(None) => return Outcome::unknown("SNMP", format!("no interface {wanted:?}")),
        Err(f) => return f.outcome("SNMP"),
    };
    let column = |name: &str| {
        let mut arcs = resolve(name).unwrap_or_default();
        arcs.push(index);
        arcs
    };
    let mut names = vec![
        "ifDescr",
        "ifAdminStatus",
        "ifOperStatus",
        "ifInOctets",
        "ifOutOctets",
        "ifInErrors",
        "ifOutErrors",
        "ifSpeed",
    ];
    if agent.uses_bulk() {
        // A v1 GET fails whole on one missing object; v2c answers noSuchObject for it.
        names.extend(["ifHCInOctets", "ifHCOutOctets", "ifHighSpeed"]);
    }
    let oids: Vec<Arcs> = names.iter().map(|n| column(n)).collect();
    let answer = match agent.request(&Request::Get(&oids)).await {
        Ok(a) => a,
        Err(f) => return f.outcome("SNMP"),
    };
    let value = |name: &str| {
        let at = names.iter().position(|n| *n == name)?;
        answer
            .get(at)
            .map(|(_, v)| v.clone())
            .filter(|v| !matches!(v, Val::Missing(_) | Val::End))
    };
    let Some(descr) = value("ifDescr") else {
        return Outcome::unknown("SNMP", format!("no interface with index {index}"));
    };
    let descr = one_line(&descr.text());
    let admin = value("ifAdminStatus")
        .and_then(|v| v.number())
        .unwrap_or(0.0) as i64;
    let oper = value("ifOperStatus")
        .and_then(|v| v.number())
        .unwrap_or(0.0) as i64;
    let (status, mut code) = oper_status(oper);
    if admin == 2 {
        return Outcome::new(
            0,
            format!("SNMP OK - {descr} is administratively down | 'oper_status'={oper};;"),
        );
    }
    // The first of the columns the agent has (the 64-bit one before the 32-bit one).
    let counter = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| Some((column(n), value(n)?.counter()?)))
    };
    let speed = value("ifHighSpeed")
        .and_then(|v| v.number())
        .filter(|s| *s > 0.0)
        .map(|mbits| mbits * 1e6)
        .or_else(|| value("ifSpeed").and_then(|v| v.number()))
        .filter(|s| *s > 0.0);
    let rate = |names: &[&str], scale: f64| {
        let (oid, (raw, wrap)) = counter(names)?;
        Some(ctx.counters.rate(&agent.key(&oid), raw, wrap, ctx.now)? * scale)
    };
    let rates = [
        ("in_bps", rate(&["ifHCInOctets", "ifInOctets"], 8.0)),
        ("out_bps", rate(&["ifHCOutOctets", "ifOutOctets"], 8.0)),
        ("in_errors", rate(&["ifInErrors"], 1.0)),
        ("out_errors", rate(&["ifOutErrors"], 1.0)),
    ];
    let limits = match ctx.limits() {
        Ok(l) => l,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let mut text = format!("{descr} is {status}");
    let mut perf = vec![format!("'oper_status'={oper};;")];
    match (&rates[0].1, &rates[1].1) {
        (Some(i), Some(o)) => {
            let _ = write!(text, ", in {}, out {}", bits(*i), bits(*o));
            if let Some(speed) = speed {
                let util = i.max(*o) / speed * 100.0;
                code = worse(code, limits.grade(util));
                let _ = write!(text, ", {util:.1}% of {}", bits(speed));
                perf.push(format!("'util'={util:.2}%;{};0;100", limits.perf()));
            }
        }
        _ => text.push_str(", no earlier reading for traffic rates yet"),
    }
    if let (Some(i), Some(o)) = (&rates[2].1, &rates[3].1) {
        let _ = write!(text, ", errors {}/s in, {}/s out", shown(*i), shown(*o));
    }
    for (label, r) in &rates {
        if let Some(r) = r {
            perf.push(format!("{}={r:.2};;;0", perf_label(label)));
        }
    }
    Outcome::new(
        code,
        format!("SNMP {} - {text} | {}", status_word(code), perf.join(" ")),
    )
}

/// `snmp-walk`: the rows under `-o` (their count judged by `-w`/`-c`), or with `--interfaces`
/// each interface's status and the check that watches it.
pub(super) async fn walk_check(ctx: &Builtin<'_>) -> Outcome {
    let mut agent = match Agent::of(ctx) {
        Ok(a) => a,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let interfaces = ctx.args.has(&["--interfaces"]);
    let root = match (interfaces, ctx.args.get(&["-o", "--oid"])) {
        (true, _) => IF_DESCR.to_vec(),
        (false, Some(o)) => match resolve(o) {
            Ok(a) => a,
            Err(e) => return Outcome::unknown("SNMP", e),
        },
        (false, None) => return Outcome::unknown("SNMP", "no OID (-o) to walk"),
    };
    let limit = match ctx.number(&["--max-rows"], DEFAULT_ROWS) {
        Ok(n) if (1..=MAX_ROWS).contains(&n) => n,
        Ok(n) => {
            return Outcome::unknown(
                "SNMP",
                format!("--max-rows {n} is not between 1 and {MAX_ROWS}"),
            );
        }
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let what = name_of(&root);
    let mut long = String::new();
    let count = if interfaces {
        let (rows, more) = match interface_rows(&mut agent, limit).await {
            Ok(r) => r,
            Err(f) => return f.outcome("SNMP"),
        };
        if more {
            return over_limit(&what, limit);
        }
        for i in rows.iter().take(ROWS_SHOWN) {
            let _ = write!(
                long,
                "\n{} {} {}: snmp --interface {}",
                i.index, i.name, i.status, i.name
            );
        }
        rows.len()
    } else {
        let (rows, more) = match walk(&mut agent, &root, limit).await {
            Ok(r) => r,
            Err(f) => return f.outcome("SNMP"),
        };
        if more {
            return over_limit(&what, limit);
        }
        for (oid, value) in rows.iter().take(ROWS_SHOWN) {
            let _ = write!(long, "\n{} = {}", name_of(oid), one_line(&value.text()));
        }
        rows.len()
    };
    if count > ROWS_SHOWN {
        let _ = write!(long, "\n… {} more", count - ROWS_SHOWN);
    }
    let limits = match ctx.limits() {
        Ok(l) => l,
        Err(e) => return Outcome::unknown("SNMP", e),
    };
    let code = limits.grade(count as f64);
    let noun = if interfaces {
        "interfaces"
    } else {
        "rows under"
    };
    let subject = if interfaces {
        String::new()
    } else {
        format!(" {what}")
    };
    Outcome::new(
        code,
        format!(
            "SNMP {} - {count} {noun}{subject} | 'rows'={count};{}{long}",
            status_word(code),
            limits.perf()
        ),
    )
}

fn over_limit(what: &str, limit: usize) -> Outcome {
    Outcome::unknown(
        "SNMP",
        format!("{what} has more than {limit} rows (--max-rows); walk a narrower subtree"),
    )
}

/// A device's text on one line of the plugin output: its control characters (line breaks
/// among them, which would start long output) blanked; where the output lands (a page, a
/// terminal) escapes the rest.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Interfaces a discovery suggests a check for, at most.
const DISCOVERED_INTERFACES: usize = 32;

/// What `host` answers on SNMP's port, for a discovery: the checks to suggest, or `None` when
/// nothing answered within `timeout`. A GET with `community` (v2c) first, and the interfaces'
/// names when it answers; else an SNMPv3 engine discovery, which any v3 agent answers without
/// credentials (RFC 3414, 4), for a v3 check to fill in.
pub(crate) async fn discover(
    host: std::net::IpAddr,
    community: Option<&str>,
    timeout: Duration,
) -> Option<Vec<String>> {
    let mut agent = Agent {
        host: host.to_string(),
        port: DEFAULT_PORT,
        version: Version::V2c(community.unwrap_or("public").as_bytes().to_vec()),
        tries: 1,
        deadline: tokio::time::Instant::now() + timeout * 2,
        per_try: timeout,
        session: None,
    };
    let flag = if community.is_some() {
        " -C $SECRET:snmp-community$"
    } else {
        ""
    };
    let uptime = [resolve("sysUpTime.0").ok()?];
    if agent.request(&Request::Get(&uptime)).await.is_ok() {
        let mut suggest = vec![format!("snmp{flag} -o sysUpTime.0")];
        if let Ok((rows, _)) = walk(&mut agent, &IF_DESCR, DISCOVERED_INTERFACES).await {
            for (oid, descr) in rows {
                let name = descr.text();
                let usable = !name.is_empty()
                    && !name.contains(|c: char| c.is_whitespace() || c.is_control() || c == '$');
                let which = if usable {
                    name
                } else {
                    oid.last().copied().unwrap_or_default().to_string()
                };
                suggest.push(format!("snmp{flag} --interface {which}"));
            }
        }
        return Some(suggest);
    }
    let security = v3::Security::new(b"", b"").with_auth(v3::Auth::NoAuthNoPriv);
    let mut session = AsyncSession::new_v3((host, DEFAULT_PORT), 1, security)
        .await
        .ok()?;
    match tokio::time::timeout(timeout, session.init()).await {
        Ok(Ok(())) | Ok(Err(SnmpError::AuthFailure(_))) => Some(vec![
            "snmp -P 3 -U USER -A $SECRET:snmp-auth$ -X $SECRET:snmp-priv$ -o sysUpTime.0".into(),
        ]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_resolve_to_the_same_arcs() {
        assert_eq!(resolve("sysUpTime.0").unwrap(), [1, 3, 6, 1, 2, 1, 1, 3, 0]);
        assert_eq!(
            resolve("IF-MIB::ifOperStatus.2").unwrap(),
            resolve(".1.3.6.1.2.1.2.2.1.8.2").unwrap()
        );
        assert_eq!(
            resolve("upsEstimatedChargeRemaining.0").unwrap(),
            [1, 3, 6, 1, 2, 1, 33, 1, 2, 4, 0]
        );
        assert!(resolve("sysUptime.0").is_err(), "names are case-sensitive");
        assert!(resolve("1").is_err());
        assert!(resolve("1.3.x").is_err());
        assert_eq!(
            name_of(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 2]),
            "ifOperStatus.2"
        );
        assert_eq!(name_of(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 99, 2]), "ifEntry.99.2");
        assert_eq!(name_of(&[1, 3, 6, 1, 4, 1, 9]), "1.3.6.1.4.1.9");
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + secs * 1000).unwrap()
    }

    #[test]
    fn counters_become_rates_across_their_wrap() {
        let c = Counters::default();
        let wrap32 = 1u128 << 32;
        assert_eq!(
            c.rate("a", 1_000, wrap32, at(0)),
            None,
            "no earlier reading"
        );
        assert_eq!(c.rate("a", 11_000, wrap32, at(10)), Some(1_000.0));
        // Past 2^32 it starts again from zero: 4,294,967,000 to 704 is 1,000 on.
        assert_eq!(
            c.rate("a", 4_294_967_000, wrap32, at(20)),
            Some(429_495_600.0)
        );
        assert_eq!(c.rate("a", 704, wrap32, at(21)), Some(1_000.0));
        // A counter back near zero from low in its range restarted: no rate this time.
        assert_eq!(c.rate("a", 5, wrap32, at(22)), None);
        assert_eq!(c.rate("a", 10, wrap32, at(22)), None, "no time passed");
        let wrap64 = 1u128 << 64;
        assert_eq!(c.rate("b", u128::from(u64::MAX - 9), wrap64, at(0)), None);
        assert_eq!(c.rate("b", 10, wrap64, at(2)), Some(10.0));
    }

    #[test]
    fn threshold_lists_apply_in_order_or_one_for_all() {
        assert_eq!(nth(Some("10,20"), 1).as_deref(), Some("20"));
        assert_eq!(nth(Some("10"), 3).as_deref(), Some("10"));
        assert_eq!(nth(Some("10,20"), 2), None);
        assert_eq!(nth(Some(",5"), 0), None);
        assert_eq!(nth(None, 0), None);
    }

    #[test]
    fn values_read_as_numbers_where_they_are_numbers() {
        assert_eq!(Val::Text(" 0.25 ".into()).number(), Some(0.25));
        assert_eq!(Val::Text("eth0".into()).number(), None);
        assert_eq!(Val::Counter64(7).counter(), Some((7, 1 << 64)));
        assert_eq!(Val::Gauge(7).counter(), None);
        assert_eq!(shown(2.0), "2");
        assert_eq!(shown(0.12345), "0.123");
        assert_eq!(bits(1_500_000.0), "1.50 Mb/s");
        assert_eq!(one_line("a\u{1b}[2Jb\n"), "a [2Jb ");
    }
}
