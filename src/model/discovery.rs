//! Network discovery scans (the reference's `scanRequest`, `discoveryScan`, `discoveryHit`):
//! which addresses of a range answer on which TCP ports (and SNMP), and what to monitor there.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `POST /discovery/scans`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScanRequest {
    /// The range, at most a /20 (4,096 addresses; IPv6 at most a /116).
    pub cidr: String,
    /// Ports to try on each address (at most 64); default 22, 23, 80, 161, 443, 502, 8080,
    /// 8443. TCP connects, but 161 is SNMP's (UDP): a GET of sysUpTime.0 (v2c), else an SNMPv3
    /// engine discovery.
    #[serde(default)]
    pub ports: Option<Vec<u16>>,
    /// The v2c community the SNMP probe uses (default `public`); used for this scan only,
    /// never stored or shown.
    #[serde(default)]
    pub snmp_community: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryScan {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub cidr: String,
    pub ports: Vec<u16>,
    /// `running`, then `done`; `failed` (with `error`) when the process running it stopped
    /// first.
    pub status: String,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<Timestamp>,
    /// Why a `failed` scan did not finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Addresses with at least one open port, in address order.
    pub found: Vec<DiscoveryHit>,
    /// Probes made so far of `addresses × ports`.
    pub probed: usize,
    pub probes: usize,
    /// When the scan last recorded its progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Timestamp>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryHit {
    pub address: String,
    pub open_ports: Vec<u16>,
    /// Checks to add for it, in the form of a service's `checkCommand` and `args`
    /// (`http -S`, `tcp -p 22`, `modbus`, `snmp -o sysUpTime.0`, `snmp --interface eth0`).
    pub suggest: Vec<String>,
}
