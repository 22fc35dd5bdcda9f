//! A consumer spread over the processes of one database (the alert engine): the event stream
//! is cut into `PARTITIONS` partitions by tenant and object, so one object's events stay in
//! one partition and in order; each partition has its own saved position, and each is led by
//! one process at a time. A process leads a partition under its advisory lock
//! (`kv::pg::PartitionLocks`) and at a generation counted up by each taking: the fence every
//! commit of its work checks in its transaction, so a process that lost a partition (its
//! session ended, or it gave the partition up) cannot commit for it once the next holder has
//! taken it, and the next holder reads the position after the last commit that did.
//!
//! The processes share the partitions out evenly: each checks every `CHECK_EVERY` how many
//! processes serve (their member locks) and gives up what it holds over its share or takes free
//! partitions up to it. A process killed loses its locks with its session, so its partitions
//! are taken within a check. On redb one process holds the one whole partition, at generation 0,
//! under the consumer's own name: nothing is fenced, nothing checked.

use super::kv::Readable;
use super::tables::{CONSUMER_POSITIONS, META};
use super::{Store, StoreError, Tx, TxResult, Wrote};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;
use uuid::Uuid;

/// Partitions of a consumer spread over processes.
pub const PARTITIONS: u16 = 16;

/// How often a process looks whether the processes serving changed.
#[cfg(feature = "postgres")]
const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The partitions of consumer `consumer` this process leads, each with the generation it took
/// it at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    consumer: &'static str,
    /// Partitions the stream is cut into (1: not cut).
    count: u16,
    held: BTreeMap<u16, u64>,
}

/// The partition, of `count`, of an event of `tenant` about `object` (of the tenant alone
/// without one): FNV-1a over both ids, stable across processes and builds.
pub fn partition_of(count: u16, tenant: Uuid, object: Option<Uuid>) -> u16 {
    if count <= 1 {
        return 0;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in tenant
        .as_bytes()
        .iter()
        .chain(object.unwrap_or_default().as_bytes())
    {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(count)) as u16
}

impl Holding {
    /// The whole stream, unfenced: one process alone on its store.
    pub fn whole(consumer: &'static str) -> Self {
        Self {
            consumer,
            count: 1,
            held: BTreeMap::from([(0, 0)]),
        }
    }

    #[cfg(any(feature = "postgres", test))]
    fn none(consumer: &'static str, count: u16) -> Self {
        Self {
            consumer,
            count,
            held: BTreeMap::new(),
        }
    }

    /// `partitions` of the stream cut into `PARTITIONS`, each at generation 0: what a test of
    /// the work that follows the partitions holds.
    #[cfg(test)]
    pub(crate) fn cut(consumer: &'static str, partitions: impl IntoIterator<Item = u16>) -> Self {
        Self {
            held: partitions.into_iter().map(|p| (p, 0)).collect(),
            ..Self::none(consumer, PARTITIONS)
        }
    }

    /// The partition of an event of `tenant` about `object` (of the tenant alone without one),
    /// the same in every process.
    pub fn partition_of(&self, tenant: Uuid, object: Option<Uuid>) -> u16 {
        partition_of(self.count, tenant, object)
    }

    /// Whether this process leads the partition of `tenant`'s `object`.
    pub fn holds(&self, tenant: Uuid, object: Option<Uuid>) -> bool {
        self.held.contains_key(&self.partition_of(tenant, object))
    }

    /// The partitions held, in order.
    pub fn partitions(&self) -> impl Iterator<Item = u16> + '_ {
        self.held.keys().copied()
    }

    /// How many partitions the stream is cut into.
    pub fn count(&self) -> u16 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Where partition `partition`'s position is saved: the consumer's own name when the
    /// stream is whole.
    fn position_name(&self, partition: u16) -> Cow<'static, str> {
        if self.count <= 1 {
            Cow::Borrowed(self.consumer)
        } else {
            Cow::Owned(format!("{}/{partition}", self.consumer))
        }
    }

    /// Where partition `partition`'s generation is kept in META.
    fn generation_key(&self, partition: u16) -> String {
        format!("partition.{}.{partition}", self.consumer)
    }
}

impl Tx<'_> {
    /// Saves the position of every partition `holding` holds at `through`, with the work done
    /// for them in this transaction; refused (`Conflict`) if another process took one since.
    pub(crate) fn save_held_positions(
        &self,
        holding: &Holding,
        through: Uuid,
    ) -> Result<(), StoreError> {
        if holding.count > 1 {
            let meta = self.open_table(META)?;
            let keys: Vec<String> = holding
                .partitions()
                .map(|p| holding.generation_key(p))
                .collect();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            // One query for all on PostgreSQL.
            let stored = meta.get_each(&keys)?;
            for ((partition, generation), now) in holding.held.iter().zip(stored) {
                if now.map(|v| generation_of(v.value())) != Some(*generation) {
                    return Err(StoreError::Conflict(format!(
                        "partition {partition} of {} is led by another process now",
                        holding.consumer
                    )));
                }
            }
        }
        for partition in holding.partitions() {
            self.save_position(&holding.position_name(partition), through)?;
        }
        Ok(())
    }
}

fn generation_of(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or_default()
}

impl Store {
    /// The partitions of `consumer` this process leads, as they change: the whole stream at
    /// once where no other process can serve (redb); on PostgreSQL its share, taken and given
    /// up as processes come and go (a thread of its own, for as long as the store lives).
    pub(crate) fn hold_partitions(
        self: &Arc<Self>,
        consumer: &'static str,
    ) -> Result<watch::Receiver<Arc<Holding>>, StoreError> {
        #[cfg(feature = "postgres")]
        if let super::Backing::Postgres(target) = &self.backing {
            let (tell, held) = watch::channel(Arc::new(Holding::none(consumer, PARTITIONS)));
            let store = Arc::downgrade(self);
            let target = target.clone();
            let runtime = tokio::runtime::Handle::current();
            std::thread::Builder::new()
                .name("svc-partitions".into())
                .spawn(move || share_partitions(&store, &target, &runtime, consumer, &tell))
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            return Ok(held);
        }
        Ok(watch::channel(Arc::new(Holding::whole(consumer))).1)
    }

    /// The saved position of every partition `holding` holds. A partition's first position is
    /// the consumer's own (saved before the stream was cut), else the journal's head.
    pub(crate) async fn held_positions(
        self: &Arc<Self>,
        holding: Arc<Holding>,
    ) -> Result<BTreeMap<u16, Uuid>, StoreError> {
        let whole = self.consumer_position(holding.consumer).await?;
        if holding.count <= 1 {
            return Ok(BTreeMap::from([(0, whole)]));
        }
        self.transact(move |tx| -> TxResult<_> {
            let mut positions = BTreeMap::new();
            let mut first = false;
            for partition in holding.partitions() {
                let name = holding.position_name(partition);
                let saved = tx
                    .open_table(CONSUMER_POSITIONS)?
                    .get(name.as_ref())?
                    .and_then(|v| Uuid::from_slice(v.value()).ok());
                let at = match saved {
                    Some(at) => at,
                    None => {
                        tx.save_position(&name, whole)?;
                        first = true;
                        whole
                    }
                };
                positions.insert(partition, at);
            }
            Ok(if first {
                Wrote::Changed(positions)
            } else {
                Wrote::Unchanged(positions)
            })
        })
        .await
    }

    /// Saves the position of every partition `holding` holds at `through` (work that wrote
    /// nothing else), fenced as `Tx::save_held_positions`.
    pub(crate) async fn save_held_positions(
        &self,
        holding: Arc<Holding>,
        through: Uuid,
    ) -> Result<(), StoreError> {
        self.transact(move |tx| -> TxResult<_> {
            tx.save_held_positions(&holding, through)?;
            Ok(Wrote::Changed(()))
        })
        .await
    }

    /// Takes partition `partition` of `holding`'s consumer at the next generation: from this
    /// commit on, a commit for it at an older one is refused.
    #[cfg(feature = "postgres")]
    async fn take_partition(&self, holding: &Holding, partition: u16) -> Result<u64, StoreError> {
        let key = holding.generation_key(partition);
        self.transact(move |tx| -> TxResult<_> {
            tx.unrecorded("a partition's lead");
            let mut meta = tx.open_table(META)?;
            let next = meta
                .get(key.as_str())?
                .map_or(0, |v| generation_of(v.value()))
                + 1;
            meta.insert(key.as_str(), next.to_be_bytes().as_slice())?;
            Ok(Wrote::Changed(next))
        })
        .await
    }
}

/// Joins the processes sharing `consumer`'s partitions and keeps this process's share,
/// telling each change through `tell`, until the store or every receiver is gone.
#[cfg(feature = "postgres")]
fn share_partitions(
    store: &std::sync::Weak<Store>,
    target: &super::kv::pg::Target,
    runtime: &tokio::runtime::Handle,
    consumer: &'static str,
    tell: &watch::Sender<Arc<Holding>>,
) {
    let mut retry = std::time::Duration::from_secs(1);
    loop {
        match super::kv::pg::PartitionLocks::join(target) {
            Ok(mut locks) => {
                retry = std::time::Duration::from_secs(1);
                let mut holding = Holding::none(consumer, PARTITIONS);
                loop {
                    let Some(store) = store.upgrade() else { return };
                    if tell.is_closed() {
                        return;
                    }
                    match rebalance(&store, runtime, &mut locks, &mut holding) {
                        Ok(()) => {
                            tell.send_if_modified(|told| {
                                let changed = **told != holding;
                                if changed {
                                    tracing::info!(consumer, partitions = ?holding.held.keys().collect::<Vec<_>>(), "partitions led");
                                    *told = Arc::new(holding.clone());
                                }
                                changed
                            });
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, consumer, "sharing partitions failed; joining again");
                            break;
                        }
                    }
                    drop(store);
                    if !locks.wait(CHECK_EVERY) {
                        tracing::warn!(consumer, "the partitions' session ended; joining again");
                        break;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, ?retry, consumer, "cannot join the processes sharing partitions; trying again")
            }
        }
        // What was held went with the session.
        tell.send_replace(Arc::new(Holding::none(consumer, PARTITIONS)));
        if super::kv::pg::pause(retry).is_err() {
            return;
        }
        retry = (retry * 2).min(std::time::Duration::from_secs(30));
    }
}

/// Gives up what `holding` holds over this process's share, or takes free partitions up to it.
#[cfg(feature = "postgres")]
fn rebalance(
    store: &Store,
    runtime: &tokio::runtime::Handle,
    locks: &mut super::kv::pg::PartitionLocks,
    holding: &mut Holding,
) -> Result<(), StoreError> {
    let members = locks.members()?;
    let share = usize::from(holding.count).div_ceil(members);
    while holding.held.len() > share {
        let Some((partition, _)) = holding.held.pop_last() else {
            break;
        };
        locks.release(partition)?;
    }
    for partition in 0..holding.count {
        if holding.held.len() >= share {
            break;
        }
        if holding.held.contains_key(&partition) || !locks.try_take(partition)? {
            continue;
        }
        match runtime.block_on(store.take_partition(holding, partition)) {
            Ok(generation) => {
                holding.held.insert(partition, generation);
            }
            Err(e) => {
                locks.release(partition)?;
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's partition depends on its tenant and object only, and spreads objects over
    /// every partition; the whole stream is one partition under the consumer's own name.
    #[test]
    fn one_objects_events_stay_in_one_partition() {
        let cut = Holding::none("engine", PARTITIONS);
        let tenant = Uuid::from_u128(1);
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..1000u128 {
            let object = Some(Uuid::from_u128(n * 7919));
            let p = cut.partition_of(tenant, object);
            assert_eq!(p, cut.partition_of(tenant, object));
            assert!(p < PARTITIONS);
            seen.insert(p);
        }
        assert_eq!(seen.len(), usize::from(PARTITIONS), "every partition used");
        assert_eq!(cut.position_name(3), "engine/3");
        let whole = Holding::whole("engine");
        assert_eq!(whole.partition_of(tenant, Some(Uuid::from_u128(5))), 0);
        assert_eq!(whole.partitions().collect::<Vec<_>>(), [0]);
        assert_eq!(whole.position_name(0), "engine");
    }

    /// A commit for a partition at an older generation than the stored one is refused, and
    /// saves nothing; at the current one it saves the position of each partition held.
    #[tokio::test]
    async fn a_commit_for_a_partition_taken_since_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(crate::runtime::clock::SystemClock)).unwrap();
        let mut holding = Holding::none("engine", PARTITIONS);
        holding.held.insert(2, 1);
        holding.held.insert(5, 1);
        let key = holding.generation_key(5);
        let set_generation = |generation: u64| {
            let key = key.clone();
            store.transact(move |tx| -> TxResult<_> {
                tx.unrecorded("a test generation");
                let mut meta = tx.open_table(META)?;
                meta.insert(key.as_str(), generation.to_be_bytes().as_slice())?;
                Ok(Wrote::Changed(()))
            })
        };
        let key2 = holding.generation_key(2);
        store
            .transact(move |tx| -> TxResult<_> {
                tx.unrecorded("a test generation");
                tx.open_table(META)?
                    .insert(key2.as_str(), 1u64.to_be_bytes().as_slice())?;
                Ok(Wrote::Changed(()))
            })
            .await
            .unwrap();
        set_generation(1).await.unwrap();
        let holding = Arc::new(holding);
        let through = Uuid::from_u128(42);
        store
            .save_held_positions(holding.clone(), through)
            .await
            .unwrap();
        let positions = store.held_positions(holding.clone()).await.unwrap();
        assert_eq!(positions, BTreeMap::from([(2, through), (5, through)]));

        set_generation(2).await.unwrap();
        let refused = store
            .save_held_positions(holding.clone(), Uuid::from_u128(43))
            .await
            .unwrap_err();
        assert!(matches!(refused, StoreError::Conflict(_)), "{refused}");
        let positions = store.held_positions(holding).await.unwrap();
        assert_eq!(positions[&2], through, "nothing saved");
        store.close();
    }
}
