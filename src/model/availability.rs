//! Availability from state changes: the spans an object spent in a hard non-OK state over a
//! window (business-service SLAs, availability reports), and their arithmetic.

use super::event::Event;
use super::state::CheckState;
use serde_json::Value;

/// The spans in `[from, to)` an object was in a hard non-OK state, fed its state changes in
/// order (the state before the first hard one is its `from`; with none, its live state held
/// throughout).
pub struct DownSpans {
    from: i64,
    /// Set by the first hard change.
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
            down_since: None,
            spans: Vec::new(),
        }
    }

    pub fn observe(&mut self, e: &Event) {
        if e.payload.get("stateType").and_then(Value::as_str) != Some("hard") {
            return;
        }
        let label = |key: &str| e.payload.get(key).and_then(Value::as_str);
        let since = *self
            .down_since
            .get_or_insert_with(|| bad(label("from")).then_some(self.from));
        let at = e.ts.as_millis();
        match (since, bad(label("to"))) {
            (None, true) => self.down_since = Some(Some(at)),
            (Some(since), false) => {
                self.spans.push((since, at));
                self.down_since = Some(None);
            }
            _ => {}
        }
    }

    pub fn finish(mut self, live: Option<&CheckState>, to: i64) -> Vec<(i64, i64)> {
        let since = match self.down_since {
            Some(since) => since,
            None => live.is_some_and(|s| s.state != 0).then_some(self.from),
        };
        if let Some(since) = since {
            self.spans.push((since, to));
        }
        self.spans
    }
}

/// [`DownSpans`] over a list of changes.
pub fn down_spans(
    changes: &[Event],
    live: Option<&CheckState>,
    from: i64,
    to: i64,
) -> Vec<(i64, i64)> {
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

/// The total length of the union of spans.
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

    #[test]
    fn spans_add_up_without_overlap_or_downtime() {
        let spans = vec![(0, 10), (5, 20), (30, 40)];
        assert_eq!(union_length(spans.clone()), 30);
        assert_eq!(subtract(&spans, (8, 35)), vec![(0, 8), (5, 8), (35, 40)]);
    }
}
