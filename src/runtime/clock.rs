//! Time as a parameter: domain code asks a `Clock`, so tests can move time instead of sleeping.

use super::locks::Locked;
use crate::model::{Timestamp, fault};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;

    /// A UUIDv7 whose time part is this clock's now, after every id this clock minted before.
    fn new_id(&self) -> Uuid;
}

pub type SharedClock = Arc<dyn Clock>;

/// Mints UUIDv7s (RFC 9562, 6.2 method 1): the millisecond, then a 42-bit counter seeded at
/// random on each new millisecond and counted up within it, then 32 random bits. Each clock
/// has its own minter, which never goes back in time: a clock that steps back keeps stamping
/// the newest millisecond it minted in, so ids stay in minting order.
///
/// The random bits come from the system's source a pool at a time, not a `getrandom` call per
/// id: the writer thread mints one per event, and the request path one per request.
struct IdMinter(Mutex<Minting>);

impl std::fmt::Debug for IdMinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdMinter")
    }
}

struct Minting {
    ms: u64,
    counter: u64,
    pool: [u8; POOL],
    used: usize,
}

/// Random bytes fetched at once: a new millisecond takes 6 bytes for its counter's seed, and
/// every id 4, so one fetch lasts about a hundred ids.
const POOL: usize = 512;
const COUNTER_BITS: u32 = 42;

impl IdMinter {
    const fn new() -> Self {
        Self(Mutex::new(Minting {
            ms: 0,
            counter: 0,
            pool: [0; POOL],
            used: POOL,
        }))
    }

    fn mint(&self, at: Timestamp) -> Uuid {
        let now = u64::try_from(at.as_millis()).unwrap_or(0);
        let mut m = self.0.locked();
        if now > m.ms {
            m.ms = now;
            m.reseed();
        } else {
            m.counter += 1;
            if m.counter >> COUNTER_BITS != 0 {
                // The counter ran out within one millisecond: borrow the next one.
                m.ms += 1;
                m.reseed();
            }
        }
        let (ms, c) = (m.ms, m.counter);
        let tail = m.take::<4>();
        let mut random = [0u8; 10];
        // rand_a (12 bits) and the first 30 bits of rand_b carry the counter; the builder
        // overwrites the version and variant bits around them.
        random[0] = (c >> 38) as u8 & 0x0f;
        random[1] = (c >> 30) as u8;
        random[2] = (c >> 24) as u8 & 0x3f;
        random[3] = (c >> 16) as u8;
        random[4] = (c >> 8) as u8;
        random[5] = c as u8;
        random[6..].copy_from_slice(&tail);
        uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid()
    }
}

impl Minting {
    /// A fresh counter with its top bit clear, so at least 2^41 ids fit in its millisecond.
    fn reseed(&mut self) {
        let seed = self.take::<6>();
        let mut wide = [0u8; 8];
        wide[2..].copy_from_slice(&seed);
        self.counter = u64::from_be_bytes(wide) >> (48 - (COUNTER_BITS - 1));
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        if self.used + N > POOL {
            if let Err(e) = getrandom::fill(&mut self.pool) {
                // Ids stay unique by their counter; only their random tail repeats.
                fault::internal("the random source for ids", &e.to_string());
            }
            self.used = 0;
        }
        let mut out = [0u8; N];
        out.copy_from_slice(&self.pool[self.used..self.used + N]);
        self.used += N;
        out
    }
}

static SYSTEM_IDS: IdMinter = IdMinter::new();

/// The real wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> Timestamp {
        Timestamp(jiff::Timestamp::now())
    }

    fn new_id(&self) -> Uuid {
        SYSTEM_IDS.mint(self.now())
    }
}

/// A clock that only moves when a test advances it.
#[derive(Debug)]
pub struct TestClock(Mutex<Timestamp>, IdMinter);

impl TestClock {
    pub fn new(start: Timestamp) -> Self {
        Self(Mutex::new(start), IdMinter::new())
    }

    pub fn advance(&self, d: Duration) {
        let mut t = self.0.locked();
        *t = t.plus(d);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        *self.0.locked()
    }

    fn new_id(&self) -> Uuid {
        self.1.mint(self.now())
    }
}

/// Woken each time a shifted clock moves: every worker's wait ends then, so its timers look
/// at the new time (never in a release build, which has no shifted clock).
pub fn moved() -> &'static tokio::sync::Notify {
    static MOVED: tokio::sync::Notify = tokio::sync::Notify::const_new();
    &MOVED
}

/// The wall clock moved on by what a test asked, for a spawned server's timers to run through
/// hours and days without sleeping. Debug builds only, and only when started with
/// `SVC_TEST_CLOCK=<file>`: the file keeps the offset in milliseconds, so a server started
/// again (after a kill -9) goes on at the same time.
#[cfg(debug_assertions)]
pub struct ShiftedClock {
    file: std::path::PathBuf,
    offset: Mutex<Duration>,
}

#[cfg(debug_assertions)]
impl ShiftedClock {
    /// The process's shifted clock, made on first use from `SVC_TEST_CLOCK`; `None` without it.
    pub fn from_env() -> Option<Arc<ShiftedClock>> {
        static SHIFTED: std::sync::OnceLock<Option<Arc<ShiftedClock>>> = std::sync::OnceLock::new();
        SHIFTED
            .get_or_init(|| {
                let file = std::path::PathBuf::from(std::env::var_os("SVC_TEST_CLOCK")?);
                let ms = std::fs::read_to_string(&file)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                Some(Arc::new(ShiftedClock {
                    file,
                    offset: Mutex::new(Duration::from_millis(ms)),
                }))
            })
            .clone()
    }

    /// Moves the clock on by `by`, keeps the offset, and wakes every worker.
    pub fn advance(&self, by: Duration) -> std::io::Result<Timestamp> {
        {
            let mut offset = self.offset.locked();
            *offset += by;
            std::fs::write(&self.file, offset.as_millis().to_string())?;
        }
        moved().notify_waiters();
        Ok(self.now())
    }
}

#[cfg(debug_assertions)]
impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        SystemClock.now().plus(*self.offset.locked())
    }

    fn new_id(&self) -> Uuid {
        SYSTEM_IDS.mint(self.now())
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

    /// Ids keep minting order when the clock steps back, and when one millisecond runs out of
    /// counter they borrow the next; each is a v7 of RFC 9562's variant, ids of one
    /// millisecond differ in their random bits too, and the pool is fetched again once used up.
    #[test]
    fn ids_keep_their_order_whatever_the_clock_does() {
        let at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let minter = IdMinter::new();
        let first: Vec<Uuid> = (0..2 * POOL).map(|_| minter.mint(at)).collect();
        assert!(first.windows(2).all(|w| w[0] < w[1]));
        for id in &first {
            assert_eq!(id.get_version_num(), 7);
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
            let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
            assert_eq!(
                (secs * 1000) as i64 + i64::from(nanos / 1_000_000),
                at.as_millis()
            );
        }
        let tails: std::collections::HashSet<[u8; 4]> = first
            .iter()
            .map(|id| id.as_bytes()[12..].try_into().unwrap())
            .collect();
        assert!(tails.len() > first.len() - 4, "random tails");
        let earlier = minter.mint("2025-12-31T23:59:00Z".parse().unwrap());
        assert!(
            earlier > *first.last().unwrap(),
            "a clock stepping back keeps the order"
        );
        minter.0.lock().unwrap().counter = (1 << COUNTER_BITS) - 1;
        let borrowed = minter.mint(at);
        assert!(borrowed > earlier);
        let (secs, nanos) = borrowed.get_timestamp().unwrap().to_unix();
        assert_eq!(
            (secs * 1000) as i64 + i64::from(nanos / 1_000_000),
            at.as_millis() + 1,
            "the next millisecond"
        );
        let later = minter.mint(at.plus(Duration::from_secs(1)));
        assert!(later > borrowed);
    }
}
