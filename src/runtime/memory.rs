//! Giving memory back once the server has gone quiet.
//!
//! Two kinds of memory stay resident after work that an idle server no longer needs:
//!
//! - **Freed heap.** mimalloc keeps freed memory for a second (its `purge_delay`, which keeps
//!   a busy server from faulting its buffers in again: a third more results per second in
//!   batches than purging at once) and purges it when later frees pass by, which a quiet
//!   server never has: a burst of 64 MiB password hashes would stay resident.
//! - **Code pages.** The kernel maps a binary's code 64 KiB around every page that runs, so
//!   after a start or a burst most of the code segment stays resident (about 20 MiB of the
//!   glibc release build), whatever an idle server still runs. They are clean: the kernel can
//!   read them again from the binary.
//!
//! Once no request has come for a quarter of `memory.releaseAfter`, `MemoryRelease` has
//! mimalloc return what is free (`mi_collect`); after the whole spell it also asks the kernel
//! to reclaim the binary's read-only mappings (`madvise(MADV_PAGEOUT)`), and what is resident
//! again is the code that then runs. Start-up's code (opening the store, migrations, seeding
//! the administrator) runs once, so both go `START_SETTLE` after start unless a request came
//! first. The first request after a quiet spell reads its code back from the file (or the
//! page cache).

use super::worker::{StepFuture, Wait, Worker};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// Whether requests came since the release worker last looked. A request writes the shared
/// flag only when it is not set yet, so a busy server does not contend on it.
#[derive(Default)]
pub struct Activity {
    seen: AtomicBool,
    parked: AtomicBool,
    wake: Arc<Notify>,
}

impl Activity {
    /// A request came: the quiet spell starts again, and a parked worker wakes to time it.
    pub fn note(&self) {
        if !self.seen.load(Ordering::Relaxed) {
            self.seen.store(true, Ordering::SeqCst);
            if self.parked.swap(false, Ordering::SeqCst) {
                self.wake.notify_one();
            }
        }
    }

    fn take_seen(&self) -> bool {
        self.seen.swap(false, Ordering::SeqCst)
    }

    /// Parks the worker unless a request came meanwhile (then it times a quiet spell again).
    fn park(&self) -> bool {
        self.parked.store(true, Ordering::SeqCst);
        if self.seen.load(Ordering::SeqCst) {
            self.parked.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }
}

/// Looks this many times a quiet spell, so the code is released between one and one and a
/// quarter spells after the last request, and a busy server wakes the worker four times a
/// spell. The free heap goes at the first quiet look: returning it costs a busy server nothing
/// it would keep (its buffers are taken again within the purge delay), and a quiet one holds
/// a burst's buffers for a quarter to half a spell, not a whole one.
const LOOKS_PER_SPELL: u32 = 4;

/// How long after start, with no request, start-up's code and heap are given back (at most a
/// spell).
const START_SETTLE: Duration = Duration::from_secs(2);

/// Where the worker is in the server's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Not stepped yet: it waits `START_SETTLE`.
    Due,
    /// It waited: with no request meanwhile it releases everything, otherwise times a spell.
    Settled,
    /// Spells only from here on.
    Over,
}

/// What a release gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The allocator's free memory.
    Heap,
    /// That and the binary's code pages.
    HeapAndCode,
}

/// What releasing does: the real one is `release_memory`; tests count calls.
pub type Release = fn(Scope) -> std::io::Result<u64>;

/// The worker that gives memory back after `quiet` without a request, once per quiet spell;
/// parked (no wake-ups) from then until the next request.
pub struct MemoryRelease {
    activity: Arc<Activity>,
    start: Start,
    look_every: Duration,
    quiet_looks: u32,
    /// A request came since the last release (a start counts as one).
    due: bool,
    /// False once the kernel refused to page out code (before Linux 5.4): the heap is still
    /// returned each spell.
    code_releasable: bool,
    release: Release,
}

impl MemoryRelease {
    pub fn new(activity: Arc<Activity>, quiet: Duration, release: Release) -> Self {
        Self {
            activity,
            start: Start::Due,
            look_every: quiet / LOOKS_PER_SPELL,
            quiet_looks: 0,
            due: true,
            code_releasable: true,
            release,
        }
    }

    fn next(&mut self) -> Wait {
        match self.start {
            Start::Due => {
                self.start = Start::Settled;
                return Wait::For(START_SETTLE.min(self.look_every * LOOKS_PER_SPELL));
            }
            Start::Settled => {
                self.start = Start::Over;
                if !self.activity.take_seen() {
                    return self.end_spell();
                }
                return Wait::For(self.look_every);
            }
            Start::Over => {}
        }
        if self.activity.take_seen() {
            self.due = true;
            self.quiet_looks = 0;
            return Wait::For(self.look_every);
        }
        if !self.due {
            return self.park();
        }
        self.quiet_looks += 1;
        if self.quiet_looks < LOOKS_PER_SPELL {
            if self.quiet_looks == 1 {
                // Returning the heap cannot fail; only `HeapAndCode` has an error to tell.
                let _ = (self.release)(Scope::Heap);
            }
            return Wait::For(self.look_every);
        }
        self.end_spell()
    }

    /// Releases what a quiet spell gives back (the code too, where the kernel can), then parks.
    fn end_spell(&mut self) -> Wait {
        self.due = false;
        self.quiet_looks = 0;
        let scope = if self.code_releasable {
            Scope::HeapAndCode
        } else {
            Scope::Heap
        };
        match (self.release)(scope) {
            Ok(bytes) => tracing::debug!(code_mib = bytes >> 20, "memory released"),
            Err(e) => {
                // A kernel before 5.4 has no MADV_PAGEOUT: later spells return the heap only.
                tracing::info!(error = %e, "code pages cannot be released; not trying again");
                self.code_releasable = false;
            }
        }
        self.park()
    }

    fn park(&self) -> Wait {
        if self.activity.park() {
            Wait::UntilWoken
        } else {
            Wait::For(self.look_every)
        }
    }
}

impl Worker for MemoryRelease {
    fn name(&self) -> &'static str {
        "memory-release"
    }

    fn step(&mut self) -> StepFuture<'_> {
        let wait = self.next();
        Box::pin(async move { wait })
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.activity.wake.clone())
    }
}

/// Returns the allocator's free memory to the system, then (`HeapAndCode`) pages out the clean
/// pages of the running binary's read-only mappings (code, constants); returns the code bytes
/// advised.
pub fn release_memory(scope: Scope) -> std::io::Result<u64> {
    return_free_heap();
    if scope == Scope::Heap {
        return Ok(0);
    }
    let exe = std::fs::read_link("/proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut advised = 0;
    for (start, end) in read_only_ranges(&maps, &exe) {
        page_out(start, end - start)?;
        advised += (end - start) as u64;
    }
    Ok(advised)
}

/// The address ranges of `exe`'s mappings without write permission, from `/proc/self/maps`
/// (`start-end perms offset dev inode   path`).
fn read_only_ranges(maps: &str, exe: &Path) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?.trim_start();
            if perms.contains('w') || Path::new(path) != exe {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

/// Returns the allocator's free memory to the system now: this thread's, and every arena's
/// whichever thread freed it. Also called after each password hash, so a burst of them holds
/// `auth.hashConcurrency` × 64 MiB at most, not what mimalloc's purge delay would keep.
/// This file holds the crate's only unsafe calls (`tests/it/architecture.rs` keeps it so).
#[allow(unsafe_code)]
pub fn return_free_heap() {
    // SAFETY: `mi_collect` takes no pointers; it frees what the allocator itself holds unused,
    // and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[allow(unsafe_code)]
fn page_out(start: usize, len: usize) -> std::io::Result<()> {
    let Some(addr) = std::ptr::NonNull::new(std::ptr::with_exposed_provenance_mut(start)) else {
        return Ok(());
    };
    // SAFETY: MADV_PAGEOUT only reclaims. The range is one of this binary's own read-only file
    // mappings, whose pages the kernel reads again from the file when they are next touched,
    // so nothing this process reads or runs changes.
    unsafe { nix::sys::mman::madvise(addr, len, nix::sys::mman::MmapAdvise::MADV_PAGEOUT) }
        .map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RELEASES: AtomicUsize = AtomicUsize::new(0);
    static HEAP_RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn counted(scope: Scope) -> std::io::Result<u64> {
        match scope {
            Scope::Heap => HEAP_RELEASES.fetch_add(1, Ordering::SeqCst),
            Scope::HeapAndCode => RELEASES.fetch_add(1, Ordering::SeqCst),
        };
        Ok(4096)
    }

    #[test]
    fn releases_once_after_a_quiet_spell_and_parks_until_the_next_request() {
        let activity = Arc::new(Activity::default());
        let mut worker = MemoryRelease::new(activity.clone(), Duration::from_secs(40), counted);
        let look = Wait::For(Duration::from_secs(10));
        let before = RELEASES.load(Ordering::SeqCst);
        let heap_before = HEAP_RELEASES.load(Ordering::SeqCst);
        // A request during start-up's settle: the heap at the first quiet look after it, the
        // code at the fourth.
        assert_eq!(worker.next(), Wait::For(START_SETTLE));
        activity.note();
        assert_eq!(worker.next(), look);
        assert_eq!(HEAP_RELEASES.load(Ordering::SeqCst), heap_before);
        assert_eq!(worker.next(), look);
        assert_eq!(HEAP_RELEASES.load(Ordering::SeqCst), heap_before + 1);
        for _ in 0..2 {
            assert_eq!(worker.next(), look);
        }
        assert_eq!(RELEASES.load(Ordering::SeqCst), before);
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(RELEASES.load(Ordering::SeqCst), before + 1);
        assert_eq!(HEAP_RELEASES.load(Ordering::SeqCst), heap_before + 1);

        // Requests keep the spell from ending; the release waits four quiet looks after them.
        activity.note();
        assert_eq!(worker.next(), look);
        assert_eq!(worker.next(), look);
        activity.note();
        activity.note();
        assert_eq!(worker.next(), look);
        for _ in 0..3 {
            assert_eq!(worker.next(), look);
        }
        assert_eq!(RELEASES.load(Ordering::SeqCst), before + 1);
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(RELEASES.load(Ordering::SeqCst), before + 2);

        // Parked, a wake-up without a request releases nothing.
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(RELEASES.load(Ordering::SeqCst), before + 2);
    }

    static REFUSED_CODE: AtomicUsize = AtomicUsize::new(0);
    static HEAP_ONLY: AtomicUsize = AtomicUsize::new(0);

    fn without_pageout(scope: Scope) -> std::io::Result<u64> {
        match scope {
            Scope::Heap => {
                HEAP_ONLY.fetch_add(1, Ordering::SeqCst);
                Ok(0)
            }
            Scope::HeapAndCode => {
                REFUSED_CODE.fetch_add(1, Ordering::SeqCst);
                Err(std::io::Error::from_raw_os_error(22))
            }
        }
    }

    #[test]
    fn a_kernel_without_pageout_still_gets_the_heap_back_each_spell() {
        let activity = Arc::new(Activity::default());
        let mut worker =
            MemoryRelease::new(activity.clone(), Duration::from_secs(40), without_pageout);
        // A quiet start: the code is asked for once, and refused.
        assert_eq!(worker.next(), Wait::For(START_SETTLE));
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(REFUSED_CODE.load(Ordering::SeqCst), 1);
        assert_eq!(HEAP_ONLY.load(Ordering::SeqCst), 0);

        // The next spell returns the heap at its first quiet look and at its end, and does not
        // ask for the code again.
        activity.note();
        for _ in 0..4 {
            worker.next();
        }
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(REFUSED_CODE.load(Ordering::SeqCst), 1);
        assert_eq!(HEAP_ONLY.load(Ordering::SeqCst), 2);
    }

    static START_RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn counted_at_start(scope: Scope) -> std::io::Result<u64> {
        assert_eq!(scope, Scope::HeapAndCode);
        START_RELEASES.fetch_add(1, Ordering::SeqCst);
        Ok(4096)
    }

    #[test]
    fn start_ups_memory_goes_soon_after_a_quiet_start() {
        let activity = Arc::new(Activity::default());
        let mut worker =
            MemoryRelease::new(activity.clone(), Duration::from_secs(30), counted_at_start);
        assert_eq!(worker.next(), Wait::For(Duration::from_secs(2)));
        assert_eq!(START_RELEASES.load(Ordering::SeqCst), 0);
        // Probes do not note activity: nothing came, so heap and code go, and it parks.
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(START_RELEASES.load(Ordering::SeqCst), 1);
        assert_eq!(worker.next(), Wait::UntilWoken);
        assert_eq!(START_RELEASES.load(Ordering::SeqCst), 1);

        // A spell shorter than the settle bounds it.
        let mut short = MemoryRelease::new(activity, Duration::from_secs(1), counted_at_start);
        assert_eq!(short.next(), Wait::For(Duration::from_secs(1)));
    }

    #[test]
    fn a_request_wakes_a_parked_worker_once() {
        use futures_util::FutureExt;
        let activity = Activity::default();
        assert!(activity.park());
        activity.note();
        activity.note();
        assert!(activity.wake.notified().now_or_never().is_some());
        assert!(activity.wake.notified().now_or_never().is_none());
        // A request that came before the park keeps the worker timing.
        assert!(!activity.park());
    }

    #[test]
    fn finds_the_binarys_read_only_mappings() {
        let maps = "\
5600-5700 r--p 00000000 08:01 42                         /usr/bin/svc
5700-5900 r-xp 00100000 08:01 42                         /usr/bin/svc
5900-5a00 rw-p 00300000 08:01 42                         /usr/bin/svc
7f00-7f10 r-xp 00000000 08:01 7                          /usr/lib/libc.so.6
7f20-7f30 r-xp 00000000 08:01 43                         /opt/my svc/svc
7ff0-7ff8 rw-p 00000000 00:00 0                          [stack]
";
        assert_eq!(
            read_only_ranges(maps, Path::new("/usr/bin/svc")),
            vec![(0x5600, 0x5700), (0x5700, 0x5900)]
        );
        assert_eq!(
            read_only_ranges(maps, Path::new("/opt/my svc/svc")),
            vec![(0x7f20, 0x7f30)]
        );
    }

    #[test]
    fn this_process_can_release_its_own_code() {
        assert_eq!(release_memory(Scope::Heap).unwrap(), 0);
        let advised =
            release_memory(Scope::HeapAndCode).expect("MADV_PAGEOUT (Linux 5.4 or later)");
        assert!(advised > 0, "the test binary maps its code read-only");
    }
}
