//! The transaction a write runs in: redb's write transaction, and the events journaled in it.
//! The committer takes those events once the write commits and files them once its group is
//! durable, so no caller files events by hand and an aborted write's events go nowhere.

use crate::model::event::Journaled;
use redb::WriteTransaction;
use std::cell::RefCell;
use std::ops::Deref;

pub struct Tx<'a> {
    inner: &'a WriteTransaction,
    journaled: RefCell<Vec<Journaled>>,
}

impl<'a> Tx<'a> {
    pub(super) fn new(inner: &'a WriteTransaction) -> Self {
        Self {
            inner,
            journaled: RefCell::default(),
        }
    }

    /// Keeps events journaled in this transaction, in journal order.
    pub(super) fn journaled(&self, events: Vec<Journaled>) {
        self.journaled.borrow_mut().extend(events);
    }

    /// The ids of the events journaled in this transaction so far.
    pub(super) fn journaled_ids(&self) -> Vec<uuid::Uuid> {
        self.journaled.borrow().iter().map(|j| j.event.id).collect()
    }

    /// The events journaled in this transaction.
    pub(super) fn into_journaled(self) -> Vec<Journaled> {
        self.journaled.into_inner()
    }
}

impl Deref for Tx<'_> {
    type Target = WriteTransaction;

    fn deref(&self) -> &WriteTransaction {
        self.inner
    }
}
