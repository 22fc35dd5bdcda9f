//! The seam through which domain modules that may not import `events` still emit events: `app`
//! hands them the events service as an `EventSink`.

use crate::model::event::Journaled;
use std::future::Future;
use std::pin::Pin;

pub type EmitFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

pub trait EventSink: Send + Sync + 'static {
    /// Stores events journaled with their cause in the event store, then publishes them;
    /// their journal rows are forgotten once stored. A failed store leaves them journaled for
    /// the event filer (and is counted). The append is queued by the call itself, so the
    /// events of successive calls are stored and published in call order even when their
    /// futures are awaited later.
    fn file(&self, journaled: Vec<Journaled>) -> EmitFuture<'_>;
}

/// A sink that keeps nothing, for tests about something else than events.
#[cfg(test)]
pub struct DiscardSink;

#[cfg(test)]
impl EventSink for DiscardSink {
    fn file(&self, _: Vec<Journaled>) -> EmitFuture<'_> {
        Box::pin(async {})
    }
}
