//! The seam through which domain modules that may not import `events` still emit events: `app`
//! hands them the events service as an `EventSink`.

use crate::model::event::EventDraft;
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
}
