//! Results being taken in (`monitor`'s pipeline counts a `POST /results` submission from its
//! parsed body until its events are stored), so work that may lag a little behind a burst of
//! them (the alert engine) lets it have the cores and the store's writer first: the burst is
//! answered as fast with alert rules as without, and the rules decide its state changes right
//! after it, a bounded while later. A few results taken in now and then are no burst: nothing
//! waits for them.

use super::locks::Locked;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A run of intake is over once nothing was taken in for this long: longer than the gap
/// between a client's answer and its next request of a burst.
const QUIET_FOR: Duration = Duration::from_millis(20);
/// A run of intake of this many results or more is a burst: more than the alert engine
/// decides in one transaction.
const BURST_RESULTS: usize = 1024;

/// Submissions of results in progress, and the run of intake they belong to.
#[derive(Default)]
pub struct Intake {
    run: Mutex<Run>,
    ended: Notify,
}

#[derive(Default)]
struct Run {
    /// Submissions in progress.
    taking: usize,
    /// Results taken in since the run began (no pause of `QUIET_FOR` with nothing in
    /// progress), those in progress too.
    results: usize,
    last_ended: Option<Instant>,
}

impl Run {
    /// How long nothing has been in progress (`None` while something is).
    fn quiet_for(&self) -> Option<Duration> {
        match (self.taking, self.last_ended) {
            (0, Some(at)) => Some(at.elapsed()),
            (0, None) => Some(Duration::MAX),
            _ => None,
        }
    }

    fn over(&self) -> bool {
        self.quiet_for().is_some_and(|quiet| quiet >= QUIET_FOR)
    }
}

/// One submission in progress; it ends when dropped.
pub struct Taking(Arc<Intake>);

impl Drop for Taking {
    fn drop(&mut self) {
        let mut run = self.0.run.locked();
        run.taking = run.taking.saturating_sub(1);
        run.last_ended = Some(Instant::now());
        if run.taking == 0 {
            self.0.ended.notify_waiters();
        }
    }
}

impl Intake {
    /// A submission of `results` begins.
    pub fn begin(self: &Arc<Self>, results: usize) -> Taking {
        let mut run = self.run.locked();
        if run.over() {
            run.results = 0;
        }
        run.taking += 1;
        run.results += results;
        Taking(self.clone())
    }

    /// Whether a burst is being taken in (`BURST_RESULTS` in a run that is not over).
    pub fn bursting(&self) -> bool {
        let run = self.run.locked();
        !run.over() && run.results >= BURST_RESULTS
    }

    /// Waits until the run of intake is over, or for `at_most`.
    pub async fn quiet(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.run_over()).await;
    }

    async fn run_over(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let quiet = self.run.locked().quiet_for();
            match quiet {
                None => ended.await,
                Some(quiet) if quiet < QUIET_FOR => tokio::time::sleep(QUIET_FOR - quiet).await,
                Some(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_lasts_until_a_pause_after_its_last_submission() {
        let intake = Arc::new(Intake::default());
        // Nothing taken in: no burst, quiet at once.
        assert!(!intake.bursting());
        let waited = Instant::now();
        intake.quiet(Duration::from_secs(1)).await;
        assert_eq!(waited.elapsed(), Duration::ZERO);

        // A result now and then is no burst.
        drop(intake.begin(1));
        assert!(!intake.bursting());

        let first = intake.begin(BURST_RESULTS / 2);
        assert!(!intake.bursting(), "half a burst");
        let ends = {
            let intake = intake.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                drop(first);
                // A next request right after the answer keeps the run going.
                tokio::time::sleep(Duration::from_millis(2)).await;
                let next = intake.begin(BURST_RESULTS / 2);
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(next);
            })
        };
        tokio::time::sleep(Duration::from_millis(31)).await;
        assert!(!intake.bursting(), "the first half ended");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(intake.bursting(), "both halves in one run");
        let waited = Instant::now();
        intake.quiet(Duration::from_secs(1)).await;
        assert_eq!(waited.elapsed(), Duration::from_millis(9) + QUIET_FOR);
        ends.await.unwrap();
        assert!(!intake.bursting());

        // A run that never ends is waited for no longer than asked, and a pause begins anew.
        let _stuck = intake.begin(BURST_RESULTS);
        assert!(intake.bursting());
        let waited = Instant::now();
        intake.quiet(Duration::from_millis(250)).await;
        assert_eq!(waited.elapsed(), Duration::from_millis(250));
    }
}
