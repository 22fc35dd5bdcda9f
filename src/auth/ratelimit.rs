//! The sign-in throttle (SPEC 8): per client IP (the TCP peer), burst 8, one token back every
//! 15 s; buckets idle over an hour are dropped once the map holds more than 4096.

use crate::model::Timestamp;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

const BURST: f64 = 8.0;
const REFILL_EVERY: Duration = Duration::from_secs(15);
const IDLE: Duration = Duration::from_secs(3600);
const MAX_BUCKETS: usize = 4096;

#[derive(Default)]
pub struct LoginLimiter {
    buckets: Mutex<HashMap<IpAddr, (f64, Timestamp)>>,
}

impl LoginLimiter {
    /// Takes one token for `ip` at `now`; false when the bucket is empty.
    pub fn allow(&self, ip: IpAddr, now: Timestamp) -> bool {
        let mut map = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > MAX_BUCKETS {
            map.retain(|_, (_, last)| now.since(*last) < IDLE);
        }
        let (tokens, last) = map.entry(ip).or_insert((BURST, now));
        let refill = now.since(*last).as_secs_f64() / REFILL_EVERY.as_secs_f64();
        *tokens = (*tokens + refill).min(BURST);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
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
        let l = LoginLimiter::default();
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
    fn idle_buckets_are_pruned_past_4096() {
        let l = LoginLimiter::default();
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
