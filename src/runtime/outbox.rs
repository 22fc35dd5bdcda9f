//! The seam through which a domain has `notify` mail what it produced without importing it:
//! a report run's mails. `app` hands it the notifier as `Outbox`.

use super::PortFuture;
use crate::model::notify::Delivery;
use uuid::Uuid;

/// What to mail: the notification's kind (`report`), its subject, its text and the link it
/// points to.
#[derive(Clone)]
pub struct Mail {
    pub kind: &'static str,
    pub subject: String,
    pub text: String,
    pub link: String,
}

pub trait Outbox: Send + Sync + 'static {
    /// One delivery of `mail` to each address of `to` through `channel`, an `email` channel
    /// of `tenant`: composed by `notify`, queued by the caller in the transaction of the change
    /// it reports, so both commit or neither. Refused, saying why, when the tenant has no such
    /// channel or it is not an e-mail channel.
    fn compose_mails(
        &self,
        tenant: Uuid,
        channel: String,
        to: Vec<String>,
        mail: Mail,
    ) -> PortFuture<'_, Vec<Delivery>>;
}
