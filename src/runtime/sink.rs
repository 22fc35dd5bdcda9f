//! The seam through which domain modules that may not import `events` still emit events: `app`
//! hands them the events service as an `EventSink`.

use crate::model::event::{Event, EventDraft, Journaled};
use std::future::Future;
use std::pin::Pin;

pub type EmitFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

pub trait EventSink: Send + Sync + 'static {
    /// Appends to the event store (best effort, failures counted) and publishes on the bus,
    /// several events with one durable append. The append is queued by the call itself, so
    /// the events of successive calls are stored and published in call order even when their
    /// futures are awaited later.
    fn emit_all(&self, drafts: Vec<EventDraft>) -> EmitFuture<'_>;

    fn emit(&self, draft: EventDraft) -> EmitFuture<'_> {
        self.emit_all(vec![draft])
    }

    /// Gives a draft its id and time, for a producer that journals the event in the
    /// transaction of its cause; stamped inside that transaction, ids follow commit order.
    fn stamp(&self, draft: EventDraft) -> Event;

    /// Stores events journaled with their cause in the event store, then
    /// publishes them; their journal rows are forgotten once stored. A failed store leaves
    /// them journaled for the event filer. Queued by the call itself, like `emit_all`.
    fn file(&self, journaled: Vec<Journaled>) -> EmitFuture<'_>;
}

/// A sink that keeps nothing, for tests about something else than events.
#[cfg(test)]
pub struct DiscardSink;

#[cfg(test)]
impl EventSink for DiscardSink {
    fn emit_all(&self, _: Vec<EventDraft>) -> EmitFuture<'_> {
        Box::pin(async {})
    }

    fn stamp(&self, draft: EventDraft) -> Event {
        draft.stamped(
            uuid::Uuid::nil(),
            crate::model::Timestamp(jiff::Timestamp::UNIX_EPOCH),
        )
    }

    fn file(&self, _: Vec<Journaled>) -> EmitFuture<'_> {
        Box::pin(async {})
    }
}
