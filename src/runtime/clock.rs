//! Time as a parameter: domain code asks a `Clock`, so tests can move time instead of sleeping.

use crate::model::Timestamp;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;

    /// A UUIDv7 whose time part is this clock's now.
    fn new_id(&self) -> Uuid {
        let ms = u64::try_from(self.now().as_millis()).unwrap_or(0);
        let ts = uuid::Timestamp::from_unix(
            uuid::NoContext,
            ms / 1000,
            ((ms % 1000) * 1_000_000) as u32,
        );
        Uuid::new_v7(ts)
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// A UUIDv7 for `at` under `ctx`, whose counter keeps ids of one millisecond in minting order.
/// Each clock has its own context: a context never goes back in time, so sharing one between
/// clocks that disagree would stamp ids with the other clock's time.
fn id_at(ctx: &Mutex<uuid::ContextV7>, at: Timestamp) -> Uuid {
    let ms = u64::try_from(at.as_millis()).unwrap_or(0);
    let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
    let ts = uuid::Timestamp::from_unix(&*ctx, ms / 1000, ((ms % 1000) * 1_000_000) as u32);
    Uuid::new_v7(ts)
}

static SYSTEM_IDS: Mutex<uuid::ContextV7> = Mutex::new(uuid::ContextV7::new());

/// The real wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> Timestamp {
        Timestamp(jiff::Timestamp::now())
    }

    fn new_id(&self) -> Uuid {
        id_at(&SYSTEM_IDS, self.now())
    }
}

/// A clock that only moves when a test advances it.
#[derive(Debug)]
pub struct TestClock(Mutex<Timestamp>, Mutex<uuid::ContextV7>);

impl TestClock {
    pub fn new(start: Timestamp) -> Self {
        Self(Mutex::new(start), Mutex::new(uuid::ContextV7::new()))
    }

    pub fn advance(&self, d: Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t = t.plus(d);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_id(&self) -> Uuid {
        id_at(&self.1, self.now())
    }
}

/// Monotonic elapsed time, for latencies and deadlines. Tokio's clock, so tests with paused
/// time control it too.
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch(tokio::time::Instant);

impl Stopwatch {
    pub fn start() -> Self {
        Self(tokio::time::Instant::now())
    }

    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_moves_only_when_told() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let c = TestClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(Duration::from_secs(90));
        assert_eq!(c.now().to_string(), "2026-01-01T00:01:30.000Z");
        let id = c.new_id();
        assert_eq!(id.get_version_num(), 7);
        let (secs, _) = id.get_timestamp().unwrap().to_unix();
        assert_eq!(secs as i64 * 1000, c.now().as_millis());
        let ids: Vec<Uuid> = (0..1000).map(|_| c.new_id()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "monotonic within one millisecond"
        );
    }
}
