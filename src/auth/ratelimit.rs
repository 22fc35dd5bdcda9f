//! Per client IP (the TCP peer) token buckets: the sign-in throttle of SPEC 8 (burst 8, one
//! token back every 15 s) and the failed-token-verification throttle. Buckets idle over an hour
//! are dropped once the map holds more than 4096.

use crate::model::Timestamp;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

const IDLE: Duration = Duration::from_secs(3600);
const MAX_BUCKETS: usize = 4096;

pub struct RateLimiter {
    burst: f64,
    refill_every: Duration,
    buckets: Mutex<HashMap<IpAddr, (f64, Timestamp)>>,
}

impl RateLimiter {
    pub fn new(burst: u32, refill_every: Duration) -> Self {
        Self {
            burst: f64::from(burst),
            refill_every,
            buckets: Mutex::default(),
        }
    }

    /// The sign-in throttle of SPEC 8.
    pub fn sign_in() -> Self {
        Self::new(8, Duration::from_secs(15))
    }

    /// Takes one token for `ip` at `now`; false when the bucket is empty.
    pub fn allow(&self, ip: IpAddr, now: Timestamp) -> bool {
        self.bucket(ip, now, true)
    }

    /// Whether `ip` has a token at `now`, without taking it.
    pub fn has_token(&self, ip: IpAddr, now: Timestamp) -> bool {
        self.bucket(ip, now, false)
    }

    /// How long an emptied bucket takes to give a token back.
    pub fn refill_every(&self) -> Duration {
        self.refill_every
    }

    fn bucket(&self, ip: IpAddr, now: Timestamp, take: bool) -> bool {
        let mut map = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > MAX_BUCKETS {
            map.retain(|_, (_, last)| now.since(*last) < IDLE);
        }
        let (tokens, last) = map.entry(ip).or_insert((self.burst, now));
        let refill = now.since(*last).as_secs_f64() / self.refill_every.as_secs_f64();
        *tokens = (*tokens + refill).min(self.burst);
        *last = now;
        if *tokens < 1.0 {
            return false;
        }
        if take {
            *tokens -= 1.0;
        }
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_one_per_15s() {
        let l = RateLimiter::sign_in();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        for _ in 0..8 {
            assert!(l.allow(ip, t0));
        }
        assert!(!l.allow(ip, t0));
        assert!(!l.allow(ip, t0.plus(Duration::from_secs(14))));
        // 30 s after running dry: two tokens back.
        assert!(l.allow(ip, t0.plus(Duration::from_secs(30))));
        assert!(l.allow(ip, t0.plus(Duration::from_secs(30))));
        assert!(!l.allow(ip, t0.plus(Duration::from_secs(30))));
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(l.allow(other, t0), "per IP");
    }

    #[test]
    fn looking_takes_nothing() {
        let l = RateLimiter::new(1, Duration::from_secs(10));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert!(l.has_token(ip, t0));
        assert!(l.has_token(ip, t0));
        assert!(l.allow(ip, t0));
        assert!(!l.has_token(ip, t0));
        assert!(l.has_token(ip, t0.plus(Duration::from_secs(10))));
    }

    #[test]
    fn idle_buckets_are_pruned_past_4096() {
        let l = RateLimiter::sign_in();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        for i in 0..=MAX_BUCKETS as u32 {
            l.allow(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(l.len(), MAX_BUCKETS + 1);
        let later = t0.plus(Duration::from_secs(3601));
        l.allow("198.51.100.1".parse().unwrap(), later);
        assert_eq!(l.len(), 1, "only the fresh bucket is left");
    }
}
