//! The objects whose observers' votes are to be counted again (`monitor::observers`), marked by
//! whoever learns of a change: the vote counter from the forwarded events it reads, the
//! federation's stale-site sweep when a site goes stale or comes back.

use super::locks::Locked;
use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

/// What is to be counted again, marked by whoever learns of a change.
#[derive(Default)]
pub struct Recount {
    marks: Mutex<Marks>,
    wake: Notify,
}

#[derive(Default)]
pub struct Marks {
    pub all: bool,
    pub objects: BTreeSet<(Uuid, Uuid)>,
}

impl Recount {
    /// Marks that count every observed object (at start: what was missed before).
    pub fn everything_at_start() -> Self {
        Self {
            marks: Mutex::new(Marks {
                all: true,
                ..Default::default()
            }),
            wake: Notify::new(),
        }
    }

    /// Wakes the counter when something is marked.
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }

    /// Every observed object (a site went stale or came back).
    pub fn everything(&self) {
        self.marks.locked().all = true;
        self.wake.notify_one();
    }

    pub fn object(&self, tenant: Uuid, id: Uuid) {
        self.marks.locked().objects.insert((tenant, id));
    }

    pub fn take(&self) -> Marks {
        std::mem::take(&mut *self.marks.locked())
    }
}
