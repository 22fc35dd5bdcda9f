//! Error-budget burn (the Google SRE workbook's multi-window, multi-burn-rate alerts; issue
//! 74): how fast an objective's budget burns over a window is the share of that window spent
//! down over the share the objective allows (`1 - target`); a pair of windows alerts when both
//! burn at least its rate, the long one so that a short blip does not, the short one so that
//! the alert ends soon after the burning does.

use crate::model::availability::union_length;
use crate::model::duration::GoDuration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// The most burn-rate pairs an objective (or a business service) has.
const MAX_BURN_ALERTS: usize = 10;

/// An `slos` document: an objective on a business service or an object, whose burn-rate pairs
/// open alerts (Sloth's and Pyrra's SLO, the workbook's alerting).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SloBody {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Percent good, above 0 and below 100 (`99.9`).
    pub target: f64,
    /// `30d` (days), or a duration (`720h`); default `30d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// What the objective is of: exactly one of a business service, an object by id, or an
    /// object by name (`host` or `host/service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The indicator from two counters of the object's metrics instead of its availability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<GoodTotal>,
    /// Default the workbook's pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn_alerts: Option<Vec<BurnAlert>>,
    /// The policy the alerts of `page` pairs escalate by; `ticket` pairs' alerts page nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation_policy: Option<String>,
    /// Labels on its alerts, beside `slo` and `burn`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Two counters of an object: good events and all events (Prometheus's ratio of rates).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GoodTotal {
    pub good: String,
    pub total: String,
}

/// The longest objective window.
const MAX_WINDOW: Duration = Duration::from_secs(400 * 86_400);

/// An objective window as written: `<n>d` or a duration.
pub fn parse_window(w: &str) -> Result<Duration, String> {
    let d = match w.strip_suffix('d').map(str::parse::<u64>) {
        Some(Ok(days)) => Duration::from_secs(days.saturating_mul(86_400)),
        _ => w.parse::<GoDuration>()?.0,
    };
    if d < Duration::from_secs(3600) || d > MAX_WINDOW {
        return Err("window is 1h to 400d (`30d`, `720h`)".into());
    }
    Ok(d)
}

impl SloBody {
    pub fn window(&self) -> Duration {
        self.window
            .as_deref()
            .and_then(|w| parse_window(w).ok())
            .unwrap_or(Duration::from_secs(30 * 86_400))
    }

    pub fn burn_alerts(&self) -> Vec<BurnAlert> {
        self.burn_alerts.clone().unwrap_or_else(workbook)
    }

    /// What is wrong with it: the field and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.target > 0.0 && self.target < 100.0) {
            return Err((
                "target",
                "target is a percentage above 0 and below 100".into(),
            ));
        }
        let window = match self.window.as_deref().map(parse_window) {
            Some(Err(why)) => return Err(("window", why)),
            Some(Ok(w)) => w,
            None => self.window(),
        };
        let named = [
            self.business_service.is_some(),
            self.object_id.is_some(),
            self.object.is_some(),
        ];
        if named.iter().filter(|n| **n).count() != 1 {
            return Err((
                "subject",
                "exactly one of businessService, objectId, object".into(),
            ));
        }
        if let Some(m) = &self.metric {
            if self.business_service.is_some() {
                return Err(("metric", "a metric's objective is of an object".into()));
            }
            if m.good.is_empty() || m.total.is_empty() || m.good == m.total {
                return Err(("metric", "good and total name two metrics".into()));
            }
        }
        let pairs = self.burn_alerts();
        check_pairs(&pairs).map_err(|why| ("burnAlerts", why))?;
        if pairs.iter().any(|p| p.long.0 > window) {
            return Err((
                "burnAlerts",
                "each pair's long window is within the objective's window (the workbook's longest is 72h)".into(),
            ));
        }
        if self.description.chars().count() > 2000 {
            return Err(("description", "at most 2000 characters".into()));
        }
        Ok(())
    }
}

/// Whether `pairs` can be evaluated: at most ten, each sound.
pub fn check_pairs(pairs: &[BurnAlert]) -> Result<(), String> {
    if pairs.len() > MAX_BURN_ALERTS {
        return Err(format!("at most {MAX_BURN_ALERTS} pairs"));
    }
    pairs.iter().try_for_each(BurnAlert::check)
}

/// Each pair evaluated by `burn` (the burn rate over a window).
pub fn evaluate(alerts: &[BurnAlert], burn: impl Fn(Duration) -> f64) -> Vec<BurnState> {
    alerts
        .iter()
        .map(|a| {
            let (long, short) = (burn(a.long.0), burn(a.short.0));
            BurnState {
                alert: a.clone(),
                long_burn: round(long),
                short_burn: round(short),
                firing: long >= a.burn_rate && short >= a.burn_rate,
            }
        })
        .collect()
}

/// A counter's increase over its points (oldest first): the rises, a drop read as a reset
/// from zero (Prometheus's `increase` without extrapolation).
pub fn increase(points: &[f64]) -> f64 {
    points
        .windows(2)
        .map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] })
        .sum()
}

/// The burn of a ratio indicator: the share of bad events over the share the target allows;
/// 0 with no events.
pub fn ratio_burn(good: f64, total: f64, target: f64) -> f64 {
    let allowed = 1.0 - target / 100.0;
    if total <= 0.0 || allowed <= 0.0 {
        return 0.0;
    }
    ((1.0 - good / total).clamp(0.0, 1.0)) / allowed
}

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
        evaluate(alerts, |w| self.burn(w))
    }

    /// How long at least until a pair could start or stop firing with nothing else changing
    /// (`None`: never). While the subject is up a window's burn does not rise, while down it
    /// does not fall, and it moves at most 1/(measured × allowed) per millisecond, so its
    /// distance to the rate over that speed is a lower bound.
    pub fn next_change(&self, alerts: &[BurnAlert]) -> Option<Duration> {
        let allowed = 1.0 - self.target / 100.0;
        let down_now = self.down.iter().any(|&(_, end)| end >= self.now);
        alerts
            .iter()
            .flat_map(|a| [(a.long.0, a.burn_rate), (a.short.0, a.burn_rate)])
            .filter_map(|(window, rate)| {
                let burn = self.burn(window);
                if (down_now && burn >= rate) || (!down_now && burn < rate) {
                    return None;
                }
                let from = (self.now - i64::try_from(window.as_millis()).unwrap_or(i64::MAX))
                    .max(self.data_from);
                let measured = (self.now - from).max(1) as f64;
                let ms = ((burn - rate).abs() * measured * allowed).ceil();
                Some(Duration::from_millis(ms.clamp(1_000.0, 1e12) as u64))
            })
            .min()
    }
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// `GET /api/v1/slos/{name}/status`.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SloStatus {
    pub name: String,
    pub target: f64,
    /// The objective's window as written (default `30d`).
    pub window: String,
    /// `availability` (the subject's hard non-OK time) or `metric` (`1 - good/total`).
    pub source: &'static str,
    /// Percent good over the window; null without data (or without events).
    pub sli: Option<f64>,
    /// The share of the window's error budget spent (1: all of it; more when overspent).
    pub budget_spent: Option<f64>,
    /// `1 - budgetSpent`: negative when overspent.
    pub budget_left: Option<f64>,
    /// Each pair (`burnAlerts`, default the workbook's) with its windows' burn and whether it
    /// fires, as the watcher holds its alert.
    pub burn: Vec<BurnState>,
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

    /// The watcher sleeps until a pair could first change: an outage of 4 minutes at 99.9 %
    /// has the ticket pair's 72h window at 1/18 of its rate (4 min of 72 h over 0.1 %), and
    /// none of its other windows can change while the outage lasts.
    #[test]
    fn the_next_change_is_a_lower_bound_on_when_a_pair_flips() {
        let now = 100 * HOUR;
        let down = [(now - 4 * 60_000, now)];
        let record = Record {
            down: &down,
            data_from: 0,
            now,
            target: 99.9,
        };
        let pairs = workbook();
        let next = record.next_change(&pairs).unwrap();
        // Walk forward minute by minute with the outage going on: no pair flips before `next`.
        let before: Vec<bool> = record.pairs(&pairs).iter().map(|s| s.firing).collect();
        let mut flipped = None;
        for minute in 1..=24 * 60 {
            let later = now + minute * 60_000;
            let down = [(now - 4 * 60_000, later)];
            let r = Record {
                down: &down,
                now: later,
                ..record
            };
            let firing: Vec<bool> = r.pairs(&pairs).iter().map(|s| s.firing).collect();
            if firing != before {
                flipped = Some(Duration::from_secs(minute as u64 * 60));
                break;
            }
        }
        let flipped = flipped.expect("the ticket pair fires within a day");
        assert!(next <= flipped, "{next:?} after {flipped:?}");
        assert!(next >= flipped / 100, "not a busy wait: {next:?}");
        // Up and below every rate, nothing changes until something happens.
        let up = Record {
            down: &[],
            ..record
        };
        assert_eq!(up.next_change(&pairs), None);
    }

    #[test]
    fn counters_and_windows() {
        assert_eq!(increase(&[0.0, 100.0, 150.0, 10.0, 4010.0]), 4160.0);
        assert_eq!(increase(&[5.0]), 0.0);
        assert_eq!(round(ratio_burn(150.0, 200.0, 99.0)), 25.0);
        assert_eq!(ratio_burn(0.0, 0.0, 99.0), 0.0, "no events burn nothing");
        assert_eq!(
            parse_window("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(
            parse_window("720h").unwrap(),
            Duration::from_secs(720 * 3600)
        );
        for bad in ["0d", "30m", "401d", "d", "x"] {
            assert!(parse_window(bad).is_err(), "{bad}");
        }
        let slo = SloBody {
            target: 99.9,
            object: Some("plc".into()),
            ..SloBody::default()
        };
        assert!(slo.check().is_ok());
        let short = SloBody {
            window: Some("2d".into()),
            ..slo.clone()
        };
        assert_eq!(short.check().unwrap_err().0, "burnAlerts", "72h > 2d");
        let both = SloBody {
            business_service: Some("shop".into()),
            ..slo
        };
        assert_eq!(both.check().unwrap_err().0, "subject");
    }
}
