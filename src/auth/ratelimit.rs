//! Per client IP (the TCP peer) token buckets: the sign-in throttle of SPEC 8 (burst 8, one
//! token back every 15 s) and the failed-token-verification throttle. Alone on its store (redb)
//! a process keeps the buckets in memory, dropping those idle over an hour once the map holds
//! more than 4096; beside other processes (PostgreSQL) they are in the store, so an address has
//! one bucket across the processes, and only a token taken writes. Idle buckets go with the
//! session purge.

use crate::model::Timestamp;
use crate::model::identity::RateBucket;
use crate::runtime::Locked;
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const IDLE: Duration = Duration::from_secs(3600);
const MAX_BUCKETS: usize = 4096;

pub struct RateLimiter {
    /// The limiter's name in the store.
    name: &'static str,
    burst: f64,
    refill_every: Duration,
    buckets: Buckets,
}

enum Buckets {
    /// One process serves the store: its buckets in memory.
    Local(Mutex<HashMap<IpAddr, RateBucket>>),
    /// Several may: the buckets in the store.
    Shared(Arc<Store>),
}

/// `bucket` (full when there is none) refilled for the time since it was last touched.
fn refilled(bucket: Option<RateBucket>, burst: f64, every: Duration, now: Timestamp) -> f64 {
    bucket.map_or(burst, |b| {
        let refill = now.since(b.last).as_secs_f64() / every.as_secs_f64();
        (b.tokens + refill).min(burst)
    })
}

impl RateLimiter {
    /// `burst` tokens per address, one back every `refill_every`; in the store when `store`
    /// may be served by other processes too.
    pub fn new(name: &'static str, burst: u32, refill_every: Duration, store: &Arc<Store>) -> Self {
        let buckets = if store.is_shared() {
            Buckets::Shared(store.clone())
        } else {
            Buckets::Local(Mutex::default())
        };
        Self {
            name,
            burst: f64::from(burst),
            refill_every,
            buckets,
        }
    }

    /// The sign-in throttle of SPEC 8.
    pub fn sign_in(store: &Arc<Store>) -> Self {
        Self::new("sign-in", 8, Duration::from_secs(15), store)
    }

    /// Takes one token for `ip` at `now`; false when the bucket is empty. A bucket in a store
    /// that cannot be reached is an error, not a refusal: the caller answers as the store is
    /// (503), not as a throttle.
    pub async fn allow(&self, ip: IpAddr, now: Timestamp) -> Result<bool, StoreError> {
        self.bucket(ip, now, true).await
    }

    /// Whether `ip` has a token at `now`, without taking it.
    pub async fn has_token(&self, ip: IpAddr, now: Timestamp) -> Result<bool, StoreError> {
        self.bucket(ip, now, false).await
    }

    /// How long an emptied bucket takes to give a token back.
    pub fn refill_every(&self) -> Duration {
        self.refill_every
    }

    /// Drops the buckets idle over an hour (full again by then).
    pub async fn forget_idle(&self, now: Timestamp) {
        match &self.buckets {
            Buckets::Local(map) => map.locked().retain(|_, b| now.since(b.last) < IDLE),
            Buckets::Shared(store) => {
                let idle_ms = i64::try_from(IDLE.as_millis()).unwrap_or(i64::MAX);
                let idle_since = Timestamp::from_millis(now.as_millis() - idle_ms).unwrap_or(now);
                if let Err(e) = store.forget_rate_buckets(idle_since).await {
                    tracing::warn!(error = %e, "forgetting idle rate-limit buckets failed");
                }
            }
        }
    }

    async fn bucket(&self, ip: IpAddr, now: Timestamp, take: bool) -> Result<bool, StoreError> {
        let (name, burst, every) = (self.name, self.burst, self.refill_every);
        let store = match &self.buckets {
            Buckets::Local(map) => {
                let mut map = map.locked();
                if map.len() > MAX_BUCKETS {
                    map.retain(|_, b| now.since(b.last) < IDLE);
                }
                let tokens = refilled(map.get(&ip).copied(), burst, every, now);
                let allowed = tokens >= 1.0;
                let tokens = if allowed && take {
                    tokens - 1.0
                } else {
                    tokens
                };
                map.insert(ip, RateBucket { tokens, last: now });
                return Ok(allowed);
            }
            Buckets::Shared(store) => store,
        };
        if take {
            store
                .transact(move |tx| -> TxResult<_> {
                    let tokens = refilled(tx.rate_bucket(name, ip)?, burst, every, now);
                    if tokens < 1.0 {
                        return Ok(Wrote::Unchanged(false));
                    }
                    let left = RateBucket {
                        tokens: tokens - 1.0,
                        last: now,
                    };
                    tx.put_rate_bucket(name, ip, &left)?;
                    tx.unrecorded("a rate limit's token, taken");
                    Ok(Wrote::Changed(true))
                })
                .await
        } else {
            store
                .rate_bucket(name, ip)
                .await
                .map(|b| refilled(b, burst, every, now) >= 1.0)
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        match &self.buckets {
            Buckets::Local(map) => map.locked().len(),
            Buckets::Shared(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::TestClock;

    fn store(t0: Timestamp) -> (Arc<Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Arc::new(TestClock::new(t0))).unwrap();
        (store, dir)
    }

    /// Either kind of bucket: in memory, or in the store (as beside other processes).
    async fn burst_then_one_per_15s(l: RateLimiter, t0: Timestamp) {
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..8 {
            assert!(l.allow(ip, t0).await.unwrap());
        }
        assert!(!l.allow(ip, t0).await.unwrap());
        assert!(!l.allow(ip, t0.plus(Duration::from_secs(14))).await.unwrap());
        // 30 s after running dry: two tokens back.
        assert!(l.allow(ip, t0.plus(Duration::from_secs(30))).await.unwrap());
        assert!(l.allow(ip, t0.plus(Duration::from_secs(30))).await.unwrap());
        assert!(
            !l.has_token(ip, t0.plus(Duration::from_secs(30)))
                .await
                .unwrap()
        );
        assert!(!l.allow(ip, t0.plus(Duration::from_secs(30))).await.unwrap());
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(l.allow(other, t0).await.unwrap(), "per IP");
    }

    #[tokio::test]
    async fn burst_then_one_per_15s_in_memory_and_in_the_store() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (store, _dir) = store(t0);
        let local = RateLimiter::sign_in(&store);
        assert!(matches!(local.buckets, Buckets::Local(_)), "alone on redb");
        burst_then_one_per_15s(local, t0).await;
        let shared = RateLimiter {
            buckets: Buckets::Shared(store.clone()),
            ..RateLimiter::sign_in(&store)
        };
        burst_then_one_per_15s(shared, t0).await;
        // The store's buckets outlive the limiter (another process's limiter reads them), and
        // go once idle for an hour.
        let again = RateLimiter {
            buckets: Buckets::Shared(store.clone()),
            ..RateLimiter::sign_in(&store)
        };
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(
            !again
                .has_token(ip, t0.plus(Duration::from_secs(31)))
                .await
                .unwrap()
        );
        again.forget_idle(t0.plus(Duration::from_secs(3599))).await;
        assert!(store.rate_bucket("sign-in", ip).await.unwrap().is_some());
        again.forget_idle(t0.plus(Duration::from_secs(3631))).await;
        assert_eq!(store.rate_bucket("sign-in", ip).await.unwrap(), None);
    }

    /// A bucket in a store that cannot be reached is the store's error (the caller answers 503),
    /// not a refusal that reads as a throttle (429).
    #[tokio::test]
    async fn a_store_out_of_reach_is_an_error_not_a_refusal() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (store, _dir) = store(t0);
        let shared = RateLimiter {
            buckets: Buckets::Shared(store.clone()),
            ..RateLimiter::sign_in(&store)
        };
        store.close();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(matches!(
            shared.allow(ip, t0).await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            shared.has_token(ip, t0).await,
            Err(StoreError::Unavailable(_))
        ));
    }

    #[tokio::test]
    async fn looking_takes_nothing() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (store, _dir) = store(t0);
        let l = RateLimiter::new("test", 1, Duration::from_secs(10), &store);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(l.has_token(ip, t0).await.unwrap());
        assert!(l.has_token(ip, t0).await.unwrap());
        assert!(l.allow(ip, t0).await.unwrap());
        assert!(!l.has_token(ip, t0).await.unwrap());
        assert!(
            l.has_token(ip, t0.plus(Duration::from_secs(10)))
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn idle_buckets_are_pruned_past_4096() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (store, _dir) = store(t0);
        let l = RateLimiter::sign_in(&store);
        for i in 0..=MAX_BUCKETS as u32 {
            l.allow(IpAddr::from(i.to_be_bytes()), t0).await.unwrap();
        }
        assert_eq!(l.len(), MAX_BUCKETS + 1);
        let later = t0.plus(Duration::from_secs(3601));
        l.allow("198.51.100.1".parse().unwrap(), later)
            .await
            .unwrap();
        assert_eq!(l.len(), 1, "only the fresh bucket is left");
    }
}
