//! Calls from a nurse-call or fire panel over ESPA 4.4.4: each block the line driver receives
//! becomes an `ingress` event of the `espa` event source, with the call address as dedup key
//! (`espa/<address>`), the display message as summary, the priority as severity (3 alarm →
//! critical, 2 high → warning, else info) and every record archived.

use super::{Ingress, Normalized};
use crate::hw::espa::Received;
use crate::model::event::Severity;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a step waits for a call before it lets the supervisor look at shutdown.
const LISTEN: Duration = Duration::from_secs(1);

pub fn normalize(call: &Received) -> Normalized {
    let address = call.record('1').unwrap_or_default().trim().to_string();
    let message = call.record('2').unwrap_or_default().trim().to_string();
    let priority = call.record('6').map(str::trim).unwrap_or_default();
    let severity = match priority {
        "3" => Severity::Critical,
        "2" => Severity::Warning,
        _ => Severity::Info,
    };
    let records: Map<String, Value> = call
        .records
        .iter()
        .map(|(id, v)| (id.to_string(), json!(v)))
        .collect();
    let summary = if message.is_empty() {
        format!("ESPA call {address}")
    } else {
        message.clone()
    };
    Normalized {
        severity,
        summary,
        dedup_key: (!address.is_empty()).then(|| format!("espa/{address}")),
        labels: BTreeMap::from([("callAddress".to_string(), address.clone())]),
        original: json!({
            "header": call.header.to_string(),
            "callAddress": address,
            "message": message,
            "priority": priority,
            "records": records,
        }),
        resolve: false,
    }
}

pub struct EspaListener {
    pub ingress: Arc<Ingress>,
    pub calls: mpsc::Receiver<Received>,
}

impl Worker for EspaListener {
    fn name(&self) -> &'static str {
        "espa-listener"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            let call = match tokio::time::timeout(LISTEN, self.calls.recv()).await {
                Ok(Some(call)) => call,
                Ok(None) => return Wait::Done,
                Err(_) => return Wait::For(Duration::ZERO),
            };
            let event = normalize(&call);
            let stored = match self.ingress.sources("espa", None).await {
                Ok(sources) => match sources.first() {
                    Some(source) => self.ingress.record(source, event).await,
                    None => Ok(()),
                },
                Err(e) => Err(e),
            };
            if let Err(e) = stored {
                tracing::error!(error = %e, "an ESPA call could not be stored and is lost");
            }
            Wait::For(Duration::ZERO)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_call_maps_priority_to_severity() {
        let call = Received {
            header: '1',
            records: vec![
                ('1', "204".into()),
                ('2', "FIRE ZONE 4".into()),
                ('6', "3".into()),
            ],
        };
        let n = normalize(&call);
        assert_eq!(n.severity, Severity::Critical);
        assert_eq!(n.summary, "FIRE ZONE 4");
        assert_eq!(n.dedup_key.as_deref(), Some("espa/204"));
        assert_eq!(n.original["records"]["2"], "FIRE ZONE 4");
    }
}
