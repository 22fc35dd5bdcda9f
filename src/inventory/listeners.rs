//! Addresses event sources listen on (`snmp` sources' `config.listen`, UDP): one tenant's
//! listener must not take another's traps, nor a privileged port the operator did not hand out.

use super::{Inventory, InventoryError};
use crate::model::config::Invalid;
use serde_json::{Map, Value};
use std::net::SocketAddr;
use uuid::Uuid;

/// Where an `snmp` source listens when its document does not say.
pub const DEFAULT_TRAP_LISTEN: &str = "0.0.0.0:162";

/// The UDP address a document of `kind` listens on, if it is a listening source.
fn listen_of(kind: &str, body: &Map<String, Value>) -> Option<Result<SocketAddr, String>> {
    if kind != "event-sources" || body.get("type").and_then(Value::as_str) != Some("snmp") {
        return None;
    }
    let listen = body
        .get("config")
        .and_then(|c| c.get("listen"))
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_TRAP_LISTEN);
    Some(
        listen
            .parse::<SocketAddr>()
            .map_err(|_| format!("config.listen {listen:?} is not an address:port")),
    )
}

/// Whether two sockets would receive each other's datagrams: the same port, and the same
/// address or either the unspecified one.
fn overlap(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

impl Inventory {
    /// A listening source's address must parse, be a port above 1023 unless
    /// `ingress.privilegedPorts` hands it out, and overlap no other source's in any tenant
    /// (409, as a duplicate name is).
    pub(super) async fn check_listen(
        &self,
        tenant: Uuid,
        kind: &str,
        name: &str,
        body: &Map<String, Value>,
    ) -> Result<(), InventoryError> {
        let Some(listen) = listen_of(kind, body) else {
            return Ok(());
        };
        let invalid = |detail: String| {
            InventoryError::Invalid(Invalid {
                field: "config".into(),
                detail,
            })
        };
        let addr = listen.map_err(invalid)?;
        if addr.port() < 1024 && !self.privileged_ports.contains(&addr.port()) {
            return Err(invalid(format!(
                "config.listen: port {} is below 1024; the configuration hands out {:?} (ingress.privilegedPorts)",
                addr.port(),
                self.privileged_ports
            )));
        }
        for other in self.store.tenants().await? {
            let docs = self
                .store
                .docs(other.id, "event-sources", None, usize::MAX, |_| true)
                .await?;
            for doc in docs {
                if other.id == tenant && doc.name == name {
                    continue;
                }
                let Ok(Value::Object(theirs)) = serde_json::from_str(&doc.body) else {
                    continue;
                };
                if let Some(Ok(taken)) = listen_of("event-sources", &theirs)
                    && overlap(addr, taken)
                {
                    let whose = if other.id == tenant {
                        ""
                    } else {
                        " in another tenant"
                    };
                    return Err(InventoryError::Taken(format!(
                        "config.listen {addr}: an event source{whose} listens on {taken}"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_overlap_on_one_port_and_a_shared_or_unspecified_address() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(overlap(a("0.0.0.0:162"), a("127.0.0.1:162")));
        assert!(overlap(a("127.0.0.1:1162"), a("127.0.0.1:1162")));
        assert!(overlap(a("[::]:162"), a("10.0.0.1:162")));
        assert!(!overlap(a("127.0.0.1:162"), a("127.0.0.2:162")));
        assert!(!overlap(a("0.0.0.0:162"), a("0.0.0.0:163")));
        let snmp = |config: Value| {
            let Value::Object(m) = serde_json::json!({"type": "snmp", "config": config}) else {
                unreachable!()
            };
            listen_of("event-sources", &m)
        };
        assert_eq!(
            snmp(serde_json::json!({})),
            Some(Ok(a(DEFAULT_TRAP_LISTEN)))
        );
        assert!(matches!(
            snmp(serde_json::json!({"listen": "nowhere"})),
            Some(Err(_))
        ));
        assert_eq!(listen_of("channels", &Map::new()), None);
    }
}
