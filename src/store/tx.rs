//! The transaction a write runs in, and the kernel's face to the domains: `Store::transact`
//! hands domain code a `Tx` in which it reads and writes rows through typed operations (each
//! aggregate's file of `store/` adds its own), records audit entries and journals events. The
//! transaction keeps the events journaled in it; the committer takes them once the write
//! commits and files them once its group is durable, so no caller files events by hand and an
//! aborted write's events go nowhere. redb stays behind it: domain code names no table.

use super::kv::WriteTx;
use super::{Store, StoreError};
use crate::model::audit::AuditDraft;
use crate::model::event::{EventDraft, Journaled};
use std::cell::{Cell, RefCell};
use std::ops::Deref;
use uuid::Uuid;

/// What a transaction's body did: `Changed` is committed, `Unchanged` aborted at no sync (a
/// timer sweep with nothing due), each with the value the caller gets.
#[derive(Debug)]
pub enum Wrote<T> {
    Changed(T),
    Unchanged(T),
}

impl<T> Wrote<T> {
    /// `Changed` when `changed`, else `Unchanged`.
    pub(crate) fn new(value: T, changed: bool) -> Self {
        if changed {
            Wrote::Changed(value)
        } else {
            Wrote::Unchanged(value)
        }
    }

    pub(super) fn changed(&self) -> bool {
        matches!(self, Wrote::Changed(_))
    }

    pub(super) fn into_inner(self) -> T {
        match self {
            Wrote::Changed(v) | Wrote::Unchanged(v) => v,
        }
    }
}

/// What a transaction's body answers: what it did, or its error: a domain's own refusal, or
/// the store's failure carried in it (`?` on a `Tx` operation).
pub type TxResult<T, E = StoreError> = Result<Wrote<T>, E>;

/// An error a transaction's body may end with: the caller's own (a domain's error type), which
/// carries the store's errors so `?` works on every `Tx` operation, and hands one back to the
/// kernel, which takes the store offline after an I/O failure whoever's error carried it.
pub trait TxAbort: From<StoreError> + Send + 'static {
    /// The store's failure this error carries, if it is one.
    fn store_error(&self) -> Option<&StoreError>;
}

impl TxAbort for StoreError {
    fn store_error(&self) -> Option<&StoreError> {
        Some(self)
    }
}

pub struct Tx<'a> {
    store: &'a Store,
    inner: &'a WriteTx,
    journaled: RefCell<Vec<Journaled>>,
    /// An audit entry was appended in this transaction.
    audited: Cell<bool>,
    /// Why this transaction's changes are not recorded, when it says so (see `unrecorded`).
    unrecorded: Cell<Option<&'static str>>,
}

impl<'a> Tx<'a> {
    pub(super) fn new(store: &'a Store, inner: &'a WriteTx) -> Self {
        Self {
            store,
            inner,
            journaled: RefCell::default(),
            audited: Cell::new(false),
            unrecorded: Cell::new(None),
        }
    }

    /// Says that this transaction's changes carry no audit entry and no event, and why:
    /// bookkeeping (a consumer's position, a token's last use, a purge), or a change the
    /// reference makes silently. Every other change records itself (`record`, `journal`); the
    /// committer refuses one that does neither, in builds with debug assertions (the tests).
    pub(crate) fn unrecorded(&self, why: &'static str) {
        self.unrecorded.set(Some(why));
    }

    pub(super) fn audited(&self) {
        self.audited.set(true);
    }

    /// Whether this transaction recorded its changes or said why not.
    pub(super) fn accounted_for(&self) -> bool {
        self.audited.get() || !self.journaled.borrow().is_empty() || self.unrecorded.get().is_some()
    }

    /// Keeps events journaled in this transaction, in journal order.
    pub(super) fn journaled(&self, events: Vec<Journaled>) {
        self.journaled.borrow_mut().extend(events);
    }

    /// The ids of the events journaled in this transaction so far.
    pub(crate) fn journaled_ids(&self) -> Vec<Uuid> {
        self.journaled.borrow().iter().map(|j| j.event.id).collect()
    }

    /// The events journaled in this transaction.
    pub(super) fn into_journaled(self) -> Vec<Journaled> {
        self.journaled.into_inner()
    }

    /// Stamps `drafts` and journals them in this transaction (filed once it is durable).
    pub(crate) fn journal(&self, drafts: Vec<EventDraft>) -> Result<(), StoreError> {
        self.store.journal(self, drafts)
    }

    /// Appends audit entries and journals events in this transaction: the one way a change
    /// records itself.
    pub fn record(
        &self,
        audits: impl IntoIterator<Item = AuditDraft>,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        self.store.record(self, audits, events)
    }

    /// Saves durable consumer `name`'s position with the work it did in this transaction:
    /// work for events already recorded, which needs no record of its own.
    pub(crate) fn save_position(&self, name: &str, through: Uuid) -> Result<(), StoreError> {
        super::journal::save_position(self, name, through)
    }

    /// A new id (UUIDv7) from the store's clock.
    pub(crate) fn new_id(&self) -> Uuid {
        self.store.clock.new_id()
    }

    /// The time on the store's clock.
    pub(crate) fn now(&self) -> crate::model::Timestamp {
        self.store.clock.now()
    }
}

impl Deref for Tx<'_> {
    type Target = WriteTx;

    fn deref(&self) -> &WriteTx {
        self.inner
    }
}
