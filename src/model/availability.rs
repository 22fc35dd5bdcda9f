//! Availability from state changes: the spans an object spent in a hard non-OK state over a
//! window (business-service SLAs, availability reports), the time it had no data, and their
//! arithmetic. Time without data (before an object's first result) is neither up nor down:
//! availability is the share of the time with data, as Icinga and the reference count it.

use super::event::Event;
use super::state::CheckState;
use serde_json::Value;

/// How an object spent `[from, to)`: when it was down, and how long it had no data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coverage {
    /// Spans in a hard non-OK state (WARNING and UNKNOWN count as down).
    pub down: Vec<(i64, i64)>,
    /// Time before the first result, within the window.
    pub no_data_ms: i64,
}

impl Coverage {
    /// The time with data in a window of `window_ms`.
    pub fn measured_ms(&self, window_ms: i64) -> i64 {
        (window_ms - self.no_data_ms).max(0)
    }

    /// Percent of the time with data spent up; 100 with no data at all.
    pub fn availability(&self, window_ms: i64) -> f64 {
        availability(union_length(self.down.clone()), self.measured_ms(window_ms))
    }
}

/// Percent of `measured_ms` not in `down_ms`; 100 when nothing was measured.
pub fn availability(down_ms: i64, measured_ms: i64) -> f64 {
    if measured_ms <= 0 {
        return 100.0;
    }
    100.0 * (1.0 - down_ms.min(measured_ms) as f64 / measured_ms as f64)
}

/// Builds a [`Coverage`] from an object's state changes in the window, in order.
pub struct DownSpans {
    from: i64,
    /// Known from the first change: when the object's data starts (the window's start when it
    /// had data before).
    data_since: Option<i64>,
    /// Set by the first hard change: since when it is down, if it is.
    down_since: Option<Option<i64>>,
    spans: Vec<(i64, i64)>,
}

fn bad(label: Option<&str>) -> bool {
    !matches!(label, Some("OK" | "UP" | "PENDING") | None)
}

impl DownSpans {
    pub fn new(from: i64) -> Self {
        Self {
            from,
            data_since: None,
            down_since: None,
            spans: Vec::new(),
        }
    }

    pub fn observe(&mut self, e: &Event) {
        let label = |key: &str| e.payload.get(key).and_then(Value::as_str);
        let at = e.ts.as_millis().max(self.from);
        // The first change says whether there was data before it: a change from PENDING is
        // the first result.
        let data_since = *self
            .data_since
            .get_or_insert(if label("from") == Some("PENDING") {
                at
            } else {
                self.from
            });
        if e.payload.get("stateType").and_then(Value::as_str) != Some("hard") {
            return;
        }
        let since = *self
            .down_since
            .get_or_insert_with(|| bad(label("from")).then_some(data_since));
        match (since, bad(label("to"))) {
            (None, true) => self.down_since = Some(Some(at)),
            (Some(since), false) => {
                self.spans.push((since, at));
                self.down_since = Some(None);
            }
            _ => {}
        }
    }

    /// The coverage up to `to`, given the object's live state: without any change in the
    /// window, the live state held throughout (no data at all when there is none).
    pub fn finish(mut self, live: Option<&CheckState>, to: i64) -> Coverage {
        let data_since = match self.data_since {
            Some(since) => since,
            None if live.is_some() => self.from,
            None => to,
        };
        let since = match self.down_since {
            Some(since) => since,
            None => live.is_some_and(|s| s.state != 0).then_some(data_since),
        };
        if let Some(since) = since.filter(|s| *s < to) {
            self.spans.push((since, to));
        }
        Coverage {
            down: self.spans,
            no_data_ms: (data_since - self.from).clamp(0, (to - self.from).max(0)),
        }
    }
}

/// [`DownSpans`] over a list of changes.
pub fn coverage(changes: &[Event], live: Option<&CheckState>, from: i64, to: i64) -> Coverage {
    let mut spans = DownSpans::new(from);
    for e in changes {
        spans.observe(e);
    }
    spans.finish(live, to)
}

/// `spans` without `cut`.
pub fn subtract(spans: &[(i64, i64)], cut: (i64, i64)) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &(a, b) in spans {
        if cut.1 <= a || cut.0 >= b {
            out.push((a, b));
            continue;
        }
        if cut.0 > a {
            out.push((a, cut.0));
        }
        if cut.1 < b {
            out.push((cut.1, b));
        }
    }
    out
}

/// The time `spans` cover, overlaps counted once.
pub fn union_length(mut spans: Vec<(i64, i64)>) -> i64 {
    spans.sort_unstable();
    let mut total = 0;
    let mut current: Option<(i64, i64)> = None;
    for (a, b) in spans {
        match current {
            Some((ca, cb)) if a <= cb => current = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                current = Some((a, b));
            }
            None => current = Some((a, b)),
        }
    }
    if let Some((a, b)) = current {
        total += b - a;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::event::{EventType, Severity};
    use serde_json::json;
    use uuid::Uuid;

    const HOUR: i64 = 3_600_000;

    /// A state change at `at` from `from` to `to` (labels), soft or hard.
    fn change(at: i64, from: &str, to: &str, hard: bool) -> Event {
        Event {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            ts: Timestamp::from_millis(at).unwrap(),
            kind: EventType::StateChange,
            object_id: None,
            source_id: None,
            severity: Some(Severity::Info),
            payload:
                json!({"from": from, "to": to, "stateType": if hard { "hard" } else { "soft" }})
                    .into(),
            site: None,
        }
    }

    fn live(state: u8) -> CheckState {
        serde_json::from_value(json!({
            "objectId": Uuid::nil(), "state": state, "stateType": "hard", "attempt": 1,
            "output": "", "lastCheck": "2026-01-01T00:00:00Z", "lastChange": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn time_before_the_first_result_is_no_data_not_down() {
        // Made at hour 10 of a 30-day window: soft CRITICAL, hard CRITICAL 2 s later, OK 2 s
        // after that (issue 37's case: it reported 0 % and 720 h down).
        let window = 720 * HOUR;
        let t0 = 10 * HOUR;
        let c = coverage(
            &[
                change(t0, "PENDING", "CRITICAL", false),
                change(t0 + 2_000, "CRITICAL", "CRITICAL", true),
                change(t0 + 4_000, "CRITICAL", "OK", true),
            ],
            Some(&live(0)),
            0,
            window,
        );
        assert_eq!(c.no_data_ms, t0);
        assert_eq!(c.down, vec![(t0, t0 + 4_000)]);
        let a = c.availability(window);
        assert!(a > 99.999 && a < 100.0, "{a}");
    }

    #[test]
    fn soft_problems_are_up_and_flapping_counts_each_hard_span() {
        let c = coverage(
            &[
                change(HOUR, "OK", "WARNING", false),
                change(2 * HOUR, "WARNING", "OK", false),
                change(3 * HOUR, "OK", "CRITICAL", true),
                change(4 * HOUR, "CRITICAL", "OK", true),
                change(5 * HOUR, "OK", "CRITICAL", true),
                change(6 * HOUR, "CRITICAL", "OK", true),
            ],
            Some(&live(0)),
            0,
            10 * HOUR,
        );
        assert_eq!(c.no_data_ms, 0, "data before the window");
        assert_eq!(c.down, vec![(3 * HOUR, 4 * HOUR), (5 * HOUR, 6 * HOUR)]);
        assert_eq!(c.availability(10 * HOUR), 80.0);
    }

    #[test]
    fn no_data_at_all_is_full_availability_and_a_quiet_live_state_holds() {
        let none = coverage(&[], None, 0, 10 * HOUR);
        assert_eq!(none.no_data_ms, 10 * HOUR);
        assert!(none.down.is_empty());
        assert_eq!(none.availability(10 * HOUR), 100.0);
        let down_all_along = coverage(&[], Some(&live(2)), 0, 10 * HOUR);
        assert_eq!(down_all_along.down, vec![(0, 10 * HOUR)]);
        assert_eq!(down_all_along.availability(10 * HOUR), 0.0);
        // Created mid-window and still down since its first result.
        let c = coverage(
            &[change(6 * HOUR, "PENDING", "DOWN", true)],
            Some(&live(1)),
            0,
            10 * HOUR,
        );
        assert_eq!(c.no_data_ms, 6 * HOUR);
        assert_eq!(c.down, vec![(6 * HOUR, 10 * HOUR)]);
        assert_eq!(c.availability(10 * HOUR), 0.0);
    }

    #[test]
    fn downtime_is_cut_out_of_the_down_spans() {
        let c = coverage(
            &[
                change(HOUR, "PENDING", "OK", true),
                change(2 * HOUR, "OK", "CRITICAL", true),
                change(6 * HOUR, "CRITICAL", "OK", true),
            ],
            Some(&live(0)),
            0,
            10 * HOUR,
        );
        let cut = subtract(&c.down, (3 * HOUR, 5 * HOUR));
        assert_eq!(union_length(cut.clone()), 2 * HOUR);
        let a = availability(union_length(cut), c.measured_ms(10 * HOUR));
        assert!((a - 100.0 * 7.0 / 9.0).abs() < 1e-9, "{a}");
    }

    #[test]
    fn spans_add_up_without_overlap_or_downtime() {
        let spans = vec![(0, 10), (5, 20), (30, 40)];
        assert_eq!(union_length(spans.clone()), 30);
        assert_eq!(subtract(&spans, (8, 35)), vec![(0, 8), (5, 8), (35, 40)]);
    }
}
