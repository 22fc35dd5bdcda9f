//! What the storage writes and how long the card lasts at that pace (issue 72): the bytes the
//! process made the kernel write (`/proc/self/io`'s `write_bytes`, what wears a card), today,
//! in each of the last days and since install, and the card's projected life given its rated
//! endurance.

use super::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Complete days kept for the pace.
pub const DAYS_KEPT: usize = 7;
/// A pace is projected only from this much counting: a start writes more than a day does.
pub const PACE_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// The counts as kept in the data directory (`wear.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WearCounts {
    /// When counting began (the first start on this data directory).
    pub since: Option<Timestamp>,
    pub total: u64,
    /// The UTC day `today` counts.
    pub day: String,
    pub today: u64,
    /// The last complete days, oldest first: `(day, bytes)`.
    pub days: VecDeque<(String, u64)>,
    /// How long counting has run, in seconds, across restarts (the pace's denominator).
    pub counted_secs: u64,
}

impl WearCounts {
    /// Adds `bytes` written over `secs` seconds ending at `now`; a new day moves today's count
    /// into the days kept.
    pub fn add(&mut self, now: Timestamp, bytes: u64, secs: u64) {
        self.since.get_or_insert(now);
        let day = now.0.to_zoned(jiff::tz::TimeZone::UTC).date().to_string();
        if day != self.day {
            if !self.day.is_empty() {
                self.days
                    .push_back((std::mem::take(&mut self.day), self.today));
                while self.days.len() > DAYS_KEPT {
                    self.days.pop_front();
                }
            }
            self.day = day;
            self.today = 0;
        }
        self.today += bytes;
        self.total += bytes;
        self.counted_secs += secs;
    }

    /// Bytes a day at the pace counted so far (none before `PACE_AFTER` of counting).
    pub fn per_day(&self) -> Option<u64> {
        (self.counted_secs >= PACE_AFTER.as_secs())
            .then(|| (self.total as u128 * 86_400 / u128::from(self.counted_secs)) as u64)
    }

    /// The report, with the card's projected life when its endurance is known.
    pub fn report(&self, endurance: Option<u64>) -> WearReport {
        let per_day = self.per_day();
        let projected_years = match (endurance, per_day) {
            (Some(e), Some(d)) if d > 0 => {
                Some(e.saturating_sub(self.total) as f64 / d as f64 / 365.25)
            }
            _ => None,
        };
        WearReport {
            since: self.since,
            written_total: self.total,
            written_today: self.today,
            days: self
                .days
                .iter()
                .map(|(day, bytes)| WrittenDay {
                    day: day.clone(),
                    bytes: *bytes,
                })
                .collect(),
            per_day,
            endurance,
            projected_years: projected_years.map(|y| (y * 10.0).round() / 10.0),
        }
    }
}

/// `wear` in `GET /system/health`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WearReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    pub written_total: u64,
    pub written_today: u64,
    /// The last complete days (UTC), oldest first.
    pub days: Vec<WrittenDay>,
    /// Bytes a day at the pace counted so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_day: Option<u64>,
    /// The card's rated endurance (`storage.wear.endurance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endurance: Option<u64>,
    /// Years until the endurance is written at that pace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_years: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WrittenDay {
    pub day: String,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// The card: 32 GB of TLC at 500 cycles and a write amplification of 10 takes
    /// 1.6 TB of host writes; at 440 MB a day that is ten years.
    #[test]
    fn a_card_lasts_its_endurance_over_the_daily_pace() {
        let mut c = WearCounts::default();
        c.add(at("2026-12-05T10:00:00Z"), 10_000_000, 600);
        assert_eq!(c.per_day(), None, "not before an hour of counting");
        c.add(at("2026-12-05T23:59:00Z"), 430_000_000, 86_400 - 600);
        assert_eq!(c.per_day(), Some(440_000_000));
        let r = c.report(Some(1_600_000_000_000));
        assert_eq!(r.projected_years, Some(10.0));
        c.add(at("2026-12-06T00:01:00Z"), 1_000, 120);
        assert_eq!(c.today, 1_000);
        assert_eq!(c.days, [("2026-12-05".to_string(), 440_000_000)]);
        assert_eq!(c.report(None).projected_years, None);
        for d in 7..20 {
            c.add(at(&format!("2026-12-{d:02}T12:00:00Z")), 1, 1);
        }
        assert_eq!(c.days.len(), DAYS_KEPT);
    }
}
