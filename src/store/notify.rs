//! Notification records: escalation timers (indexed by alert and by due time), deliveries
//! (the outbox, indexed by next try; dead letters by tenant), schedule overrides, handoffs,
//! and the alerts whose chain waits for their suppression to lift. `notify/` decides what a
//! firing, an attempt or a handoff writes and commits it in a `Tx` with its events; this file
//! keeps the rows and their due-time indexes true and reads them.

use super::codec::{decode, encode, tenant_values_newest};
use super::keys::{scoped, tenant_range};
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{
    CHANNEL_FAILURES, DEAD_LETTERS, DELIVERIES, DELIVERIES_DUE, ESCALATIONS, ESCALATIONS_DUE,
    HANDOFFS, META, OVERRIDES, SUPPRESSED_ALERTS,
};
use super::{Holding, Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::notify::{ChannelFailures, Delivery, EscalationTimer, Override};
use crate::store::{TxResult, Wrote};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use uuid::Uuid;

fn timer_key(alert: Uuid, step: u32) -> Vec<u8> {
    let mut k = alert.as_bytes().to_vec();
    k.extend_from_slice(&step.to_be_bytes());
    k
}

/// A channel's failures row: tenant, then the channel's name (or bare URL).
fn failures_key(tenant: Uuid, channel: &str) -> Vec<u8> {
    let mut k = tenant.as_bytes().to_vec();
    k.extend_from_slice(channel.as_bytes());
    k
}

fn failures_in(
    table: &impl Readable<&'static [u8], &'static [u8]>,
    tenant: Uuid,
    channel: &str,
) -> Result<Option<ChannelFailures>, StoreError> {
    table
        .get(failures_key(tenant, channel).as_slice())?
        .map(|v| decode(v.value()))
        .transpose()
}

fn due_key(at: Timestamp, id: &[u8]) -> Vec<u8> {
    let mut k = at.as_millis().to_be_bytes().to_vec();
    k.extend_from_slice(id);
    k
}

/// Sets (or replaces) an escalation timer.
fn put_timer(tx: &WriteTx, t: &EscalationTimer) -> Result<(), StoreError> {
    let key = timer_key(t.alert_id, t.step);
    drop_timer(tx, &key)?;
    tx.open_table(ESCALATIONS)?
        .insert(key.as_slice(), encode(t)?.as_slice())?;
    tx.open_table(ESCALATIONS_DUE)?
        .insert(due_key(t.due, &key).as_slice(), ())?;
    Ok(())
}

/// A schedule's row of the handoffs table for the notice `mark` (the handover's is the
/// schedule's id alone, as before marks).
fn handoff_key(tenant: Uuid, schedule: Uuid, mark: &str) -> Vec<u8> {
    let mut key = schedule.as_bytes().to_vec();
    key.extend_from_slice(mark.as_bytes());
    scoped(tenant, &key)
}

/// Removes the timer at `key` and its due entry; returns it.
fn drop_timer(tx: &WriteTx, key: &[u8]) -> Result<Option<EscalationTimer>, StoreError> {
    let old: Option<EscalationTimer> = tx
        .open_table(ESCALATIONS)?
        .take(key)?
        .map(|v| decode(v.value()))
        .transpose()?;
    if let Some(old) = &old {
        tx.open_table(ESCALATIONS_DUE)?
            .remove(due_key(old.due, key).as_slice())?;
    }
    Ok(old)
}

/// Stops an alert's chain: ack, resolve, snooze, expiry, incident resolve.
pub(super) fn disarm_escalation(tx: &WriteTx, alert: Uuid) -> Result<(), StoreError> {
    let keys: Vec<Vec<u8>> = {
        let t = tx.open_table(ESCALATIONS)?;
        let lo = timer_key(alert, 0);
        let hi = timer_key(alert, u32::MAX);
        let mut keys = Vec::new();
        for row in t.range(lo.as_slice()..=hi.as_slice())? {
            keys.push(row?.0.value().to_vec());
        }
        keys
    };
    for key in keys {
        drop_timer(tx, &key)?;
    }
    Ok(())
}

/// Notes an alert that opened suppressed, so its chain starts when the suppression lifts.
pub(super) fn hold_suppressed(tx: &WriteTx, tenant: Uuid, alert: Uuid) -> Result<(), StoreError> {
    tx.open_table(SUPPRESSED_ALERTS)?
        .insert(scoped(tenant, alert.as_bytes()).as_slice(), ())?;
    Ok(())
}

/// The alerts waiting for their suppression to lift: (tenant, alert id).
pub(super) fn suppressed_alerts(tx: &WriteTx) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
    let t = tx.open_table(SUPPRESSED_ALERTS)?;
    let mut out = Vec::new();
    for row in t.iter()? {
        let key = row?.0.value().to_vec();
        if let (Ok(tenant), Ok(id)) = (Uuid::from_slice(&key[..16]), Uuid::from_slice(&key[16..])) {
            out.push((tenant, id));
        }
    }
    Ok(out)
}

pub(super) fn release_suppressed(
    tx: &WriteTx,
    tenant: Uuid,
    alert: Uuid,
) -> Result<(), StoreError> {
    tx.open_table(SUPPRESSED_ALERTS)?
        .remove(scoped(tenant, alert.as_bytes()).as_slice())?;
    Ok(())
}

/// Writes a delivery to the outbox (due at its `next_try`) or, dead, to the dead letters.
pub(super) fn put_delivery(tx: &WriteTx, d: &Delivery) -> Result<(), StoreError> {
    if d.dead {
        tx.open_table(DEAD_LETTERS)?.insert(
            scoped(d.tenant_id, d.id.as_bytes()).as_slice(),
            encode(d)?.as_slice(),
        )?;
        return Ok(());
    }
    tx.open_table(DELIVERIES)?
        .insert(d.id.as_bytes().as_slice(), encode(d)?.as_slice())?;
    tx.open_table(DELIVERIES_DUE)?
        .insert(due_key(d.next_try, d.id.as_bytes()).as_slice(), ())?;
    Ok(())
}

/// Takes a delivery out of the outbox; `None` when it is no longer there.
fn take_delivery(tx: &WriteTx, id: Uuid) -> Result<Option<Delivery>, StoreError> {
    let old: Option<Delivery> = tx
        .open_table(DELIVERIES)?
        .take(id.as_bytes().as_slice())?
        .map(|v| decode(v.value()))
        .transpose()?;
    if let Some(old) = &old {
        tx.open_table(DELIVERIES_DUE)?
            .remove(due_key(old.next_try, old.id.as_bytes()).as_slice())?;
    }
    Ok(old)
}

/// How many outbox rows a look for claimable deliveries reads at most: rows ahead of them that
/// this process cannot send are another process's to claim.
const CLAIM_SCAN_MAX: usize = 1000;

/// How long a claim keeps other processes from a delivery while its process lives: past the
/// longest send (a call's minute on the modem, behind another). A process that dies lets go of
/// its claims with its database session.
pub const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(180);

/// How soon a courier looks again at a delivery another claimed: the claim lapses the moment
/// its database session ends (a process killed mid-send), and then another process sends it.
pub const CLAIM_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Which deliveries a courier may claim (the kinds its process can send).
pub type Claimable = Arc<dyn Fn(&Delivery) -> bool + Send + Sync>;

/// What a look at the outbox knows of the claims in it.
enum Claims<'a> {
    /// Claims hold while their session is among these (a claim's write knows them).
    Live(&'a HashSet<i64>),
    /// Unknown (a read): a claimed delivery may be free, so it is looked at again soon.
    Unknown,
}

/// A look at the outbox in the order it is due.
#[derive(Default)]
struct Due {
    /// The deliveries due that may be claimed (at most the look's `max`), earliest first.
    due: Vec<Delivery>,
    /// A claimed delivery was seen whose claim may have lapsed (its session is not known).
    doubtful: bool,
    /// When to look again: the first claimable delivery not taken is due, or a claim is to be
    /// checked.
    next: Option<Timestamp>,
}

/// Looks at the outbox in the order it is due for the deliveries `claimable` accepts: those due
/// by `now` and not held by a live claim (one whose session ended is due at once). It reads on
/// past the first one not yet due as far as a claim made now would last, since claims that
/// lapsed wait there.
fn claimable_due(
    due: &impl Readable<&'static [u8], ()>,
    items: &impl Readable<&'static [u8], &'static [u8]>,
    now: Timestamp,
    max: usize,
    claimable: &dyn Fn(&Delivery) -> bool,
    claims: Claims,
) -> Result<Due, StoreError> {
    let horizon = now.plus(CLAIM_LEASE);
    let mut look = Due::default();
    let again = |at: Timestamp, look: &mut Due| {
        look.next = Some(look.next.map_or(at, |next| next.min(at)));
    };
    for row in due.range::<&[u8]>(..)?.take(CLAIM_SCAN_MAX) {
        let key = row?.0.value().to_vec();
        let Some(value) = items.get(&key[8..])? else {
            continue;
        };
        let d: Delivery = decode(value.value())?;
        if !claimable(&d) {
            continue;
        }
        let due_at = match (d.claimed_by, &claims) {
            (None, _) => d.next_try,
            (Some(session), Claims::Live(live)) if !live.contains(&session) => now,
            (Some(_), Claims::Live(_)) => continue,
            (Some(_), Claims::Unknown) => {
                look.doubtful = true;
                again(d.next_try.min(now.plus(CLAIM_CHECK)), &mut look);
                continue;
            }
        };
        if due_at <= now && look.due.len() < max {
            look.due.push(d);
            continue;
        }
        again(due_at, &mut look);
        // Full, or past where any claim ends.
        if due_at <= now || due_at > horizon {
            break;
        }
    }
    Ok(look)
}

/// The rows of `items` whose `ms + key` entry in `due` is at or before `now`, earliest first,
/// at most `max`.
fn due_rows<T: serde::de::DeserializeOwned>(
    tx: &ReadTx,
    due: redb::TableDefinition<&[u8], ()>,
    items: redb::TableDefinition<&[u8], &[u8]>,
    now: Timestamp,
    max: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, StoreError> {
    let due = tx.open_table(due)?;
    let items = tx.open_table(items)?;
    let end = (now.as_millis() + 1).to_be_bytes();
    let mut out = Vec::new();
    for row in due.range(..end.as_slice())? {
        let key = row?.0.value().to_vec();
        if let Some(v) = items.get(&key[8..])? {
            let item = decode(v.value())?;
            if keep(&item) {
                out.push(item);
            }
        }
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// The due time of the first escalation timer whose alert's partition `holding` holds.
fn first_held_escalation(tx: &ReadTx, holding: &Holding) -> Result<Option<Timestamp>, StoreError> {
    if holding.is_empty() {
        return Ok(None);
    }
    let last = Timestamp(jiff::Timestamp::MAX);
    let first = due_rows(
        tx,
        ESCALATIONS_DUE,
        ESCALATIONS,
        last,
        1,
        |t: &EscalationTimer| holding.holds(t.tenant_id, t.object_id),
    )?;
    Ok(first.first().map(|t| t.due))
}

/// What the notifier writes in its transactions.
impl Tx<'_> {
    /// A channel's failures in a row, if it has any.
    pub(crate) fn channel_failures(
        &self,
        tenant: Uuid,
        channel: &str,
    ) -> Result<Option<ChannelFailures>, StoreError> {
        failures_in(&self.open_table(CHANNEL_FAILURES)?, tenant, channel)
    }

    /// Sets a channel's failures in a row; `None` clears them (it worked).
    pub(crate) fn set_channel_failures(
        &self,
        tenant: Uuid,
        channel: &str,
        failures: Option<&ChannelFailures>,
    ) -> Result<(), StoreError> {
        let key = failures_key(tenant, channel);
        let mut table = self.open_table(CHANNEL_FAILURES)?;
        match failures {
            Some(f) => {
                table.insert(key.as_slice(), encode(f)?.as_slice())?;
            }
            None => {
                table.remove(key.as_slice())?;
            }
        }
        Ok(())
    }

    /// The armed timer of an alert's escalation step.
    pub(crate) fn escalation_timer(
        &self,
        alert: Uuid,
        step: u32,
    ) -> Result<Option<EscalationTimer>, StoreError> {
        self.open_table(ESCALATIONS)?
            .get(timer_key(alert, step).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// The armed timers of an alert's escalation, by step.
    pub(crate) fn escalation_timers(
        &self,
        alert: Uuid,
    ) -> Result<Vec<EscalationTimer>, StoreError> {
        let t = self.open_table(ESCALATIONS)?;
        let (lo, hi) = (timer_key(alert, 0), timer_key(alert, u32::MAX));
        let mut out = Vec::new();
        for row in t.range(lo.as_slice()..=hi.as_slice())? {
            out.push(decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Sets (or replaces) an escalation timer.
    pub(crate) fn put_escalation_timer(&self, timer: &EscalationTimer) -> Result<(), StoreError> {
        put_timer(self, timer)
    }

    /// Removes an escalation timer.
    pub(crate) fn drop_escalation_timer(&self, alert: Uuid, step: u32) -> Result<(), StoreError> {
        drop_timer(self, &timer_key(alert, step)).map(drop)
    }

    /// Writes a delivery to the outbox (due at its `next_try`) or, dead, to the dead letters.
    pub(crate) fn put_override(&self, o: &Override) -> Result<(), StoreError> {
        let mut key = scoped(o.tenant_id, o.schedule_id.as_bytes());
        key.extend_from_slice(o.id.as_bytes());
        self.open_table(OVERRIDES)?
            .insert(key.as_slice(), encode(o)?.as_slice())?;
        Ok(())
    }

    /// Removes a schedule's override; the override, when there was one.
    pub(crate) fn remove_override(
        &self,
        tenant: Uuid,
        schedule: Uuid,
        id: Uuid,
    ) -> Result<Option<Override>, StoreError> {
        let mut key = scoped(tenant, schedule.as_bytes());
        key.extend_from_slice(id.as_bytes());
        self.open_table(OVERRIDES)?
            .take(key.as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    pub(crate) fn put_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        put_delivery(self, delivery)
    }

    /// Claims the deliveries due by `now` that `claimable` accepts (at most `max`, earliest
    /// first) until `until`, for this write's database session: each one's next try moves
    /// there, so no other process's courier takes it while the claim holds. It holds until
    /// then or until the session ends (a process killed mid-send), whichever comes first.
    /// The deliveries as claimed; none where no other process may serve (redb).
    pub(crate) fn claim_deliveries(
        &self,
        now: Timestamp,
        until: Timestamp,
        max: usize,
        claimable: &dyn Fn(&Delivery) -> bool,
    ) -> Result<Vec<Delivery>, StoreError> {
        let Some((session, live)) = self.sessions()? else {
            return Ok(Vec::new());
        };
        let look = claimable_due(
            &self.open_table(DELIVERIES_DUE)?,
            &self.open_table(DELIVERIES)?,
            now,
            max,
            claimable,
            Claims::Live(&live),
        )?;
        look.due
            .into_iter()
            .map(|d| {
                take_delivery(self, d.id)?;
                let claimed = Delivery {
                    next_try: until,
                    claimed_by: Some(session),
                    ..d
                };
                put_delivery(self, &claimed)?;
                Ok(claimed)
            })
            .collect()
    }

    /// Takes a claimed delivery out of the outbox; `None` when it is no longer there or is no
    /// longer as `claimed` left it (its claim lapsed and another process claimed it since).
    pub(crate) fn take_claimed_delivery(
        &self,
        claimed: &Delivery,
    ) -> Result<Option<Delivery>, StoreError> {
        let stored: Option<Delivery> = self
            .open_table(DELIVERIES)?
            .get(claimed.id.as_bytes().as_slice())?
            .map(|v| decode(v.value()))
            .transpose()?;
        match stored {
            Some(d) if d.next_try == claimed.next_try && d.claimed_by == claimed.claimed_by => {
                take_delivery(self, claimed.id)
            }
            _ => Ok(None),
        }
    }

    /// Takes a dead letter out of the tenant's dead letters.
    pub(crate) fn take_dead_letter(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<Delivery>, StoreError> {
        self.open_table(DEAD_LETTERS)?
            .take(scoped(tenant, id.as_bytes()).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    /// Notes that the incoming person of the schedule's shift starting at `start` was told.
    /// Notes what of a schedule's shifts was told: `mark` names which notice (empty: the
    /// handover), `at` the shift time it was about.
    pub(crate) fn set_handoff(
        &self,
        tenant: Uuid,
        schedule: Uuid,
        mark: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.open_table(HANDOFFS)?.insert(
            handoff_key(tenant, schedule, mark).as_slice(),
            at.as_millis(),
        )?;
        Ok(())
    }
}

impl Store {
    /// The failures in a row of those of `channels` (tenant, name or bare URL) that have any.
    pub(crate) async fn channel_failures(
        self: &Arc<Self>,
        channels: HashSet<(Uuid, String)>,
    ) -> Result<HashMap<(Uuid, String), ChannelFailures>, StoreError> {
        self.read(move |tx| {
            let table = tx.open_table(CHANNEL_FAILURES)?;
            let mut found = HashMap::new();
            for (tenant, channel) in channels {
                if let Some(f) = failures_in(&table, tenant, &channel)? {
                    found.insert((tenant, channel), f);
                }
            }
            Ok(found)
        })
        .await
    }

    /// When the next escalation timer is due.
    /// When the first escalation timer of the partitions `holding` holds falls due.
    pub(crate) async fn next_escalation_due(
        self: &Arc<Self>,
        holding: Arc<Holding>,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.read(move |tx| first_held_escalation(tx, &holding))
            .await
    }

    /// How many escalation timers are armed, deliveries wait in the outbox, and dead letters
    /// are kept.
    pub(crate) async fn notify_counts(self: &Arc<Self>) -> Result<(u64, u64, u64), StoreError> {
        self.read(|tx| {
            let len = |t: redb::TableDefinition<&[u8], &[u8]>| tx.open_table(t)?.len();
            Ok((len(ESCALATIONS)?, len(DELIVERIES)?, len(DEAD_LETTERS)?))
        })
        .await
    }

    /// Escalation timers of the partitions `holding` holds due by `now`, earliest first, at
    /// most `max`.
    pub(crate) async fn escalations_due(
        self: &Arc<Self>,
        now: Timestamp,
        max: usize,
        holding: Arc<Holding>,
    ) -> Result<Vec<EscalationTimer>, StoreError> {
        self.read(move |tx| {
            due_rows(
                tx,
                ESCALATIONS_DUE,
                ESCALATIONS,
                now,
                max,
                |t: &EscalationTimer| holding.holds(t.tenant_id, t.object_id),
            )
        })
        .await
    }

    /// Deliveries due by `now`, earliest first, at most `max`.
    #[cfg(test)]
    pub(crate) async fn deliveries_due(
        self: &Arc<Self>,
        now: Timestamp,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |tx| {
            due_rows(tx, DELIVERIES_DUE, DELIVERIES, now, max, |_: &Delivery| {
                true
            })
        })
        .await
    }

    /// Claims the deliveries due by `now` that `claimable` accepts, at most `max`, earliest
    /// first, for `CLAIM_LEASE` (see `Tx::claim_deliveries`). Only beside other processes does a
    /// claim write: alone (redb) nobody else takes from the outbox, and a restart after a crash
    /// finds every delivery due as it was.
    pub(crate) async fn claim_deliveries(
        self: &Arc<Self>,
        now: Timestamp,
        max: usize,
        claimable: Claimable,
    ) -> Result<Vec<Delivery>, StoreError> {
        let seen = claimable.clone();
        let look = self
            .read(move |tx| {
                claimable_due(
                    &tx.open_table(DELIVERIES_DUE)?,
                    &tx.open_table(DELIVERIES)?,
                    now,
                    max,
                    &*seen,
                    Claims::Unknown,
                )
            })
            .await?;
        if !self.is_shared() {
            return Ok(look.due);
        }
        // The writers' turn only when something may be claimed; the claim looks again in it.
        if look.due.is_empty() && !look.doubtful {
            return Ok(Vec::new());
        }
        self.transact_ahead(move |tx| -> TxResult<_> {
            let claimed = tx.claim_deliveries(now, now.plus(CLAIM_LEASE), max, &*claimable)?;
            tx.unrecorded("a courier's claim on the deliveries it sends");
            let changed = !claimed.is_empty();
            Ok(Wrote::new(claimed, changed))
        })
        .await
    }

    /// When a courier that claims what `claimable` accepts looks at the outbox again: the
    /// first such delivery is due (maybe already), or a claim on one is to be checked.
    pub(crate) async fn next_claimable_delivery(
        self: &Arc<Self>,
        claimable: Claimable,
    ) -> Result<Option<Timestamp>, StoreError> {
        let now = self.clock.now();
        self.read(move |tx| {
            // Taking none, the look answers when the first claimable one is due.
            let look = claimable_due(
                &tx.open_table(DELIVERIES_DUE)?,
                &tx.open_table(DELIVERIES)?,
                now,
                0,
                &*claimable,
                Claims::Unknown,
            )?;
            Ok(look.next)
        })
        .await
    }

    /// The start of the last shift of a schedule whose incoming person was told.
    /// The shift time the notice `mark` of a schedule was last told about (see `set_handoff`).
    pub(crate) async fn handoff_announced(
        self: &Arc<Self>,
        tenant: Uuid,
        schedule: Uuid,
        mark: String,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(HANDOFFS)?;
            Ok(t.get(handoff_key(tenant, schedule, &mark).as_slice())?
                .and_then(|v| Timestamp::from_millis(v.value())))
        })
        .await
    }

    /// Dead letters, newest first, strictly before `before`.
    pub(crate) async fn dead_letters(
        self: &Arc<Self>,
        tenant: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(DEAD_LETTERS)?;
            tenant_values_newest(&t, tenant, before, limit, |_: &Delivery| true)
        })
        .await
    }

    /// Every override of a tenant (for on-call resolution across its schedules).
    pub(crate) async fn tenant_overrides(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Override>, StoreError> {
        self.read(move |tx| {
            let t = tx.open_table(OVERRIDES)?;
            let (lo, hi) = tenant_range(tenant);
            let mut out: Vec<Override> = Vec::new();
            for row in t.range(lo.as_slice()..hi.as_slice())? {
                out.push(decode(row?.1.value())?);
            }
            out.sort_by_key(|o| (o.start, o.id));
            Ok(out)
        })
        .await
    }

    /// A 32-byte key of this installation stored under `name`, made on first use (for
    /// signing ack links).
    pub(crate) async fn install_key(
        self: &Arc<Self>,
        name: &'static str,
    ) -> Result<Vec<u8>, StoreError> {
        self.transact(move |tx| -> TxResult<_> {
            let mut meta = tx.open_table(META)?;
            if let Some(v) = meta.get(name)? {
                return Ok(Wrote::Unchanged(v.value().to_vec()));
            }
            let mut key = vec![0u8; 32];
            getrandom::fill(&mut key).map_err(|e| StoreError::Internal(e.to_string()))?;
            meta.insert(name, key.as_slice())?;
            tx.unrecorded("an installation key, made on first use");
            Ok(Wrote::Changed(key))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Clock, TestClock};
    use std::time::Duration;

    /// A look at the outbox takes what is due and claimable, earliest first: a delivery a live
    /// session claimed is held, one whose session ended is due at once (behind deliveries not
    /// due yet); a read, which does not know the sessions, looks again soon. An attempt whose
    /// claim another took over since takes nothing out of the outbox.
    #[tokio::test]
    async fn claims_hold_while_their_session_lives() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now) = (Uuid::from_u128(7), clock.now());
        let at = |secs: u64| now.plus(Duration::from_secs(secs));
        let notice = |due: Timestamp, kind: &str| Delivery {
            kind: kind.into(),
            ..Delivery::test_notice(clock.new_id(), tenant, due)
        };
        let claimed = |d: Delivery, until: Timestamp, by: i64| Delivery {
            next_try: until,
            claimed_by: Some(by),
            ..d
        };
        let queued = [
            notice(at(0), "sms"),
            notice(at(1), "webhook"),
            notice(at(60), "webhook"),
            claimed(notice(at(0), "webhook"), at(180), 7),
            claimed(notice(at(0), "webhook"), at(180), 9),
            notice(at(400), "webhook"),
        ];
        let outbox = queued.to_vec();
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test setup");
                for d in &outbox {
                    tx.put_delivery(d)?;
                }
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        let id = |i: usize| queued[i].id;
        let look = |max: usize, live: Option<HashSet<i64>>| {
            let now = at(5);
            store.read(move |tx| {
                let no_sms = |d: &Delivery| d.kind != "sms";
                let look = claimable_due(
                    &tx.open_table(DELIVERIES_DUE)?,
                    &tx.open_table(DELIVERIES)?,
                    now,
                    max,
                    &no_sms,
                    live.as_ref().map_or(Claims::Unknown, Claims::Live),
                )?;
                let ids: Vec<Uuid> = look.due.iter().map(|d| d.id).collect();
                Ok((ids, look.doubtful, look.next))
            })
        };
        let session_7 = || Some(HashSet::from([7]));
        assert_eq!(
            look(10, session_7()).await.unwrap(),
            (vec![id(1), id(4)], false, Some(at(60))),
            "due, and the one whose session ended; 7's held"
        );
        assert_eq!(
            look(1, session_7()).await.unwrap(),
            (vec![id(1)], false, Some(at(5))),
            "full: the rest is due now"
        );
        assert_eq!(
            look(10, None).await.unwrap(),
            (vec![id(1)], true, Some(at(10))),
            "a read looks at the claims again soon"
        );
        let every: Claimable = Arc::new(|_: &Delivery| true);
        let webhooks: Claimable = Arc::new(|d: &Delivery| d.kind == "webhook");
        let next = |claimable: &Claimable| store.next_claimable_delivery(claimable.clone());
        assert_eq!(next(&every).await.unwrap(), Some(at(0)), "the SMS");
        assert_eq!(next(&webhooks).await.unwrap(), Some(at(1)));
        assert!(
            store
                .claim_deliveries(at(5), 10, webhooks.clone())
                .await
                .unwrap()
                .iter()
                .all(|d| d.claimed_by.is_none()),
            "alone (redb) a claim writes nothing"
        );

        // Session 9's claim, taken over by session 8: the attempt under 9's is not recorded.
        let stale = queued[4].clone();
        let current = claimed(stale.clone(), at(185), 8);
        let over = current.clone();
        let taken = store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("test attempts");
                take_delivery(tx, over.id)?;
                tx.put_delivery(&over)?;
                let stale = tx.take_claimed_delivery(&stale)?;
                let current = tx.take_claimed_delivery(&over)?;
                Ok(Wrote::Changed((stale.is_some(), current.map(|d| d.id))))
            })
            .await
            .unwrap();
        assert_eq!(taken, (false, Some(current.id)));
        let left: Vec<Uuid> = store
            .deliveries_due(at(400), 10)
            .await
            .unwrap()
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(left, [id(0), id(1), id(2), id(3), id(5)]);
    }
}
