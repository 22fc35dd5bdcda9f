//! Error-budget burn (the Google SRE workbook's multi-window, multi-burn-rate alerts; issue
//! 74): how fast an objective's budget burns over a window is the share of that window spent
//! down over the share the objective allows (`1 - target`); a pair of windows alerts when both
//! burn at least its rate, the long one so that a short blip does not, the short one so that
//! the alert ends soon after the burning does.

use crate::model::availability::union_length;
use crate::model::duration::GoDuration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One pair of windows and the burn rate both must reach.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BurnAlert {
    pub long: GoDuration,
    pub short: GoDuration,
    /// Times the rate that spends the whole budget in the objective's window.
    pub burn_rate: f64,
    /// `page` or `ticket`.
    pub severity: String,
}

/// The workbook's pairs: 2 % of a 30-day budget in an hour and 5 % in six hours page, 10 % in
/// three days is a ticket.
pub fn workbook() -> Vec<BurnAlert> {
    let h = |hours: u64| GoDuration(Duration::from_secs(hours * 3600));
    let m = |minutes: u64| GoDuration(Duration::from_secs(minutes * 60));
    vec![
        BurnAlert {
            long: h(1),
            short: m(5),
            burn_rate: 14.4,
            severity: "page".into(),
        },
        BurnAlert {
            long: h(6),
            short: m(30),
            burn_rate: 6.0,
            severity: "page".into(),
        },
        BurnAlert {
            long: h(72),
            short: h(6),
            burn_rate: 1.0,
            severity: "ticket".into(),
        },
    ]
}

impl BurnAlert {
    /// Whether the pair can be evaluated; what is wrong, in words.
    pub fn check(&self) -> Result<(), String> {
        if self.short.0.is_zero() || self.short.0 >= self.long.0 {
            return Err("a pair's short window is shorter than its long one, and not zero".into());
        }
        if !(self.burn_rate.is_finite() && self.burn_rate > 0.0) {
            return Err("burnRate is a positive number".into());
        }
        if !["page", "ticket"].contains(&self.severity.as_str()) {
            return Err("severity is page or ticket".into());
        }
        Ok(())
    }

    /// The share of the objective's budget the pair's long window spends at its rate.
    pub fn budget_share(&self, objective_window: Duration) -> f64 {
        self.burn_rate * self.long.0.as_secs_f64() / objective_window.as_secs_f64()
    }
}

/// What is known of an objective's subject up to `now` (ms): its down spans and when it first
/// had data.
pub struct Record<'a> {
    pub down: &'a [(i64, i64)],
    pub data_from: i64,
    pub now: i64,
    /// Percent, as `slaTarget`.
    pub target: f64,
}

impl Record<'_> {
    /// The burn rate over the last `window`: the share of its time with data spent down over
    /// the share the target allows; 0 without data.
    pub fn burn(&self, window: Duration) -> f64 {
        let from =
            (self.now - i64::try_from(window.as_millis()).unwrap_or(i64::MAX)).max(self.data_from);
        let measured = self.now - from;
        let allowed = 1.0 - self.target / 100.0;
        if measured <= 0 || allowed <= 0.0 {
            return 0.0;
        }
        let clipped: Vec<(i64, i64)> = self
            .down
            .iter()
            .map(|(s, e)| ((*s).max(from), (*e).min(self.now)))
            .filter(|(s, e)| s < e)
            .collect();
        union_length(clipped) as f64 / measured as f64 / allowed
    }

    /// Each pair with its windows' burn and whether it alerts.
    pub fn pairs(&self, alerts: &[BurnAlert]) -> Vec<BurnState> {
        alerts
            .iter()
            .map(|a| {
                let (long, short) = (self.burn(a.long.0), self.burn(a.short.0));
                BurnState {
                    alert: a.clone(),
                    long_burn: round(long),
                    short_burn: round(short),
                    firing: long >= a.burn_rate && short >= a.burn_rate,
                }
            })
            .collect()
    }
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A pair as evaluated now.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct BurnState {
    #[serde(flatten)]
    pub alert: BurnAlert,
    pub long_burn: f64,
    pub short_burn: f64,
    /// Both windows burn at least `burnRate`.
    pub firing: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const THIRTY_DAYS: Duration = Duration::from_secs(30 * 86_400);

    /// The workbook's table for a 99.9 % objective over 30 days: its pairs spend 2 %, 5 % and
    /// 10 % of the budget.
    #[test]
    fn the_workbook_pairs_spend_its_shares_of_the_budget() {
        let shares: Vec<f64> = workbook()
            .iter()
            .map(|a| (a.budget_share(THIRTY_DAYS) * 1000.0).round() / 1000.0)
            .collect();
        assert_eq!(shares, [0.02, 0.05, 0.1]);
        assert!(workbook().iter().all(|a| a.check().is_ok()));
    }

    /// A complete outage at 99.9 % burns at 1,000x while it lasts: four minutes of it fire both
    /// page pairs and not yet the ticket (under 10 % of three days' budget); the 1-hour window
    /// reaches 14.4x after 0.864 minutes (14.4 × 0.1 % of an hour).
    #[test]
    fn an_outage_fires_the_pairs_its_windows_reach() {
        let now = 100 * HOUR;
        let started = now - 4 * 60_000;
        let down = [(started, now)];
        let record = Record {
            down: &down,
            data_from: 0,
            now,
            target: 99.9,
        };
        assert_eq!(round(record.burn(Duration::from_secs(300))), 800.0);
        assert_eq!(round(record.burn(Duration::from_secs(3600))), 66.667);
        let states = record.pairs(&workbook());
        assert_eq!(
            states.iter().map(|s| s.firing).collect::<Vec<_>>(),
            [true, true, false],
            "{states:?}"
        );
        assert!(states[2].long_burn < 1.0, "{states:?}");
        // The 1-hour window at 14.4x: 14.4 × 0.001 × 60 minutes of outage.
        let threshold = 14.4 * 0.001 * 60.0 * 60_000.0;
        let at = |outage_ms: f64| {
            let down = [(now - outage_ms as i64, now)];
            Record {
                down: &down,
                data_from: 0,
                now,
                target: 99.9,
            }
            .burn(Duration::from_secs(3600))
        };
        assert!(at(threshold + 100.0) >= 14.4);
        assert!(at(threshold - 100.0) < 14.4);
        assert_eq!(threshold.round(), 51_840.0, "0.864 minutes");
    }

    /// Only the time with data counts, and the spans are clipped to the window; a target of
    /// 100 % has no budget to burn.
    #[test]
    fn burn_counts_the_window_with_data() {
        let now = 10 * HOUR;
        let down = [
            (now - 2 * HOUR, now - HOUR),
            (now - 90 * 60_000, now - 30 * 60_000),
        ];
        let record = Record {
            down: &down,
            data_from: now - 4 * HOUR,
            now,
            target: 99.0,
        };
        // 1.5 h down of 4 h measured (the 6 h window starts before the data): 37.5 % / 1 %.
        assert_eq!(round(record.burn(Duration::from_secs(6 * 3600))), 37.5);
        // The last hour holds 30 minutes of the second span.
        assert_eq!(round(record.burn(Duration::from_secs(3600))), 50.0);
        let perfect = Record {
            target: 100.0,
            ..record
        };
        assert_eq!(perfect.burn(Duration::from_secs(3600)), 0.0);
        let bad = BurnAlert {
            short: GoDuration(Duration::from_secs(7200)),
            ..workbook()[0].clone()
        };
        assert!(bad.check().is_err());
    }
}
