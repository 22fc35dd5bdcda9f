//! `espa`: a page through the site's ESPA 4.4.4 paging system to the contact's pager (its call
//! address), the message in the standard's 7-bit set with the reply hint, the alert's
//! severity as the page priority (critical → alarm, warning → high).

use super::{Outgoing, SendError, Senders, Sent};
use crate::hw::espa::{Page, Priority};

pub async fn espa(senders: &Senders, out: &Outgoing<'_>) -> Result<Sent, SendError> {
    let pager = senders.pager.as_ref().ok_or_else(|| {
        SendError::permanent("no ESPA line is configured (hardware.espa in the configuration file)")
    })?;
    let address = out.delivery.target.trim();
    if address.is_empty() {
        return Err(SendError::permanent("no pager call address to page"));
    }
    let m = &out.delivery.payload;
    let text = match out.template {
        Some(_) => out.text(),
        None => {
            let mut t = format!("{} {}", m.severity.to_uppercase(), m.title);
            let hint = super::phone::reply_hint(m);
            if !hint.is_empty() {
                t.push(' ');
                t.push_str(&hint);
            }
            t
        }
    };
    let priority = match m.severity.as_str() {
        "critical" => Priority::Alarm,
        "warning" => Priority::High,
        _ => Priority::Normal,
    };
    pager
        .page(Page {
            address: address.to_string(),
            text,
            priority,
        })
        .await
        .map_err(|e| SendError {
            retryable: e.retryable(),
            message: e.to_string(),
        })?;
    Ok(Sent {
        detail: format!("page to {address} acknowledged by the paging system"),
        ..Sent::default()
    })
}
