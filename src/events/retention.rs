//! Event retention (SPEC 8): whole month files older than `storage.eventRetentionMonths` are
//! removed once a night, between 02:00 and 03:59 local time. 0 keeps everything.

use super::Events;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use std::sync::Arc;
use std::time::Duration;

/// The oldest month (`YYYYMM`) kept when `months` months are kept, counting the current one.
pub fn keep_from(current: u32, months: u32) -> u32 {
    let total = i64::from(current / 100) * 12 + i64::from(current % 100)
        - 1
        - i64::from(months.saturating_sub(1));
    let year = total.div_euclid(12);
    let month = total.rem_euclid(12) + 1;
    u32::try_from(year * 100 + month).unwrap_or(0)
}

pub struct RetentionWorker {
    events: Arc<Events>,
    clock: SharedClock,
    months: u32,
    tz: TimeZone,
    last_run: Option<Date>,
}

impl RetentionWorker {
    pub fn new(events: Arc<Events>, clock: SharedClock, months: u32, tz: TimeZone) -> Self {
        Self {
            events,
            clock,
            months,
            tz,
            last_run: None,
        }
    }

    /// Removes expired month files if tonight's window is open and it has not run today;
    /// returns the months removed.
    pub fn sweep_if_due(&mut self) -> Vec<u32> {
        if self.months == 0 {
            return Vec::new();
        }
        let now = self.clock.now().0.to_zoned(self.tz.clone());
        let today = now.date();
        if !(2..=3).contains(&now.hour()) || self.last_run == Some(today) {
            return Vec::new();
        }
        self.last_run = Some(today);
        let current = crate::store::events::month_of(self.clock.now());
        let keep = keep_from(current, self.months);
        let expiring: Vec<u32> = self
            .events
            .store()
            .months()
            .into_iter()
            .filter(|m| *m < keep)
            .collect();
        // A consumer behind retention (a site's uplink after a long outage) loses these.
        self.events.count_lost_before_removal(&expiring);
        let removed = self.events.store().remove_months_before(keep);
        if !removed.is_empty() {
            tracing::info!(?removed, "expired event months removed");
        }
        removed
    }
}

impl Worker for RetentionWorker {
    fn name(&self) -> &'static str {
        "event-retention"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if self.months == 0 {
                return Wait::Done;
            }
            self.sweep_if_due();
            // Checking every quarter hour finds the two-hour window whatever the clock does
            // (daylight-saving jumps included).
            Wait::For(Duration::from_secs(900))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::event::{EventDraft, EventType};
    use crate::runtime::{Clock, Metrics, TestClock};
    use crate::store::events::EventStore;

    #[test]
    fn month_arithmetic() {
        assert_eq!(keep_from(202611, 12), 202512);
        assert_eq!(keep_from(202601, 1), 202601);
        assert_eq!(keep_from(202603, 3), 202601);
        assert_eq!(keep_from(202603, 4), 202512);
    }

    #[tokio::test]
    async fn removes_whole_old_months_only_in_the_night_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = EventStore::open(dir.path()).unwrap();
        let clock = Arc::new(TestClock::new("2026-01-15T12:00:00Z".parse().unwrap()));
        let main = crate::store::Store::open(dir.path(), clock.clone()).unwrap();
        let events = Events::new(store.clone(), clock.clone(), Arc::new(Metrics::new()));
        main.file_with(events.clone(), tokio::runtime::Handle::current());
        for month in [
            "2026-01-15T12:00:00Z",
            "2026-02-15T12:00:00Z",
            "2026-03-15T12:00:00Z",
            "2026-04-15T12:00:00Z",
        ] {
            clock.advance(month.parse::<Timestamp>().unwrap().since(clock.now()));
            let draft = EventDraft::new(
                uuid::Uuid::nil(),
                EventType::System,
                None,
                serde_json::json!({}),
            );
            main.journal_events(vec![draft]).await.unwrap();
        }
        assert_eq!(store.months(), vec![202601, 202602, 202603, 202604]);
        // A consumer that read only January's event loses February's to retention.
        let january = store
            .oldest(&crate::model::event::EventFilter::default(), None, 1)
            .unwrap()[0]
            .id;
        events.report_lag("behind", january, None);
        events.report_lag("current", uuid::Uuid::max(), None);
        let mut w = RetentionWorker::new(events.clone(), clock.clone(), 2, TimeZone::UTC);
        // 2026-04-15 12:00: outside the window.
        assert!(w.sweep_if_due().is_empty());
        clock.advance(Duration::from_secs(14 * 3600 + 30 * 60)); // 2026-04-16 02:30
        assert_eq!(w.sweep_if_due(), vec![202601, 202602]);
        assert_eq!(store.months(), vec![202603, 202604]);
        let lags = events.consumer_lags();
        assert_eq!(lags["behind"].lost, 1, "February's event was never read");
        assert_eq!(lags["current"].lost, 0);
        events.report_lag("behind", january, None);
        assert_eq!(
            events.consumer_lags()["behind"].lost,
            1,
            "kept across reports"
        );
        clock.advance(Duration::from_secs(3600)); // 03:30, same night: not again
        assert!(w.sweep_if_due().is_empty());
        let mut keep_all = RetentionWorker::new(events, clock, 0, TimeZone::UTC);
        assert!(keep_all.sweep_if_due().is_empty());
        store.close();
    }
}
