//! Tables as kubectl and icingacli print them: aligned columns, short state names, ages.

use crate::model::object::ObjectKind;
use crate::model::state::{CheckState, StateType};
use jiff::Timestamp;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

static COLOUR: AtomicBool = AtomicBool::new(false);

/// Colours state columns from now on (on a terminal, unless `NO_COLOR` is set).
pub fn use_colour(on: bool) {
    COLOUR.store(on, Ordering::Relaxed);
}

/// The columns whose words get a colour.
const COLOURED: [&str; 3] = ["STATE", "STATUS", "SEVERITY"];

/// The ANSI colour of a state word: green for good, yellow for warning, red for bad, magenta
/// for unknown, dim for not yet known or switched off.
fn colour_of(cell: &str) -> Option<&'static str> {
    let word = cell.split_whitespace().next()?;
    Some(match word {
        "OK" | "UP" | "ok" | "connected" => "32",
        "WARN" | "warning" | "acked" => "33",
        "CRIT" | "DOWN" | "FAIL" | "stale" | "critical" | "open" => "31",
        "UNKN" | "UNREACH" => "35",
        "PEND" | "offline" | "disabled" | "resolved" | "expired" | "info" => "2",
        _ => return None,
    })
}

/// Prints rows under a header, each column as wide as its widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let colour = COLOUR.load(Ordering::Relaxed);
    let coloured: Vec<bool> = header
        .iter()
        .map(|h| colour && COLOURED.contains(h))
        .collect();
    let line = |cells: Vec<&str>, body: bool| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            match colour_of(cell).filter(|_| body && coloured[i]) {
                Some(code) => out.push_str(&format!("\x1b[{code}m{cell}\x1b[0m")),
                None => out.push_str(cell),
            }
            if i < last {
                out.push_str(&" ".repeat(w - cell.chars().count() + 3));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.to_vec(), false);
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect(), true));
        out.push('\n');
    }
    out
}

/// The short state name of a live state (`OK WARN CRIT UNKN UP DOWN UNREACH`), or `PEND` for
/// an object never checked.
pub fn state_name(kind: ObjectKind, state: Option<&CheckState>) -> String {
    let Some(state) = state else {
        return "PEND".into();
    };
    let name = match (kind, state.state) {
        (ObjectKind::Host, 0) => "UP",
        (ObjectKind::Host, 1) => "DOWN",
        (ObjectKind::Host, _) => "UNREACH",
        (_, 0) => "OK",
        (_, 1) => "WARN",
        (_, 2) => "CRIT",
        _ => "UNKN",
    };
    if state.state_type == StateType::Soft && state.state != 0 {
        format!("{name} (soft {})", state.attempt)
    } else {
        name.to_string()
    }
}

/// `3m`, `2h`, `5d`: how long ago `at` was; `-` for never.
pub fn since(at: Option<Timestamp>, now: Timestamp) -> String {
    let Some(at) = at else {
        return "-".into();
    };
    let secs = (now.as_second() - at.as_second()).max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A text cell: the string, or `-` when absent; on one line, cut at `max` characters.
pub fn cell(v: &Value, max: usize) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => text(s, max),
        other => text(&other.to_string(), max),
    }
}

/// A cell of what may be absent (`-`), as `text`.
pub fn shown(v: Option<impl ToString>, max: usize) -> String {
    v.map_or_else(|| "-".into(), |v| text(&v.to_string(), max))
}

/// A text cell of a string: `-` when empty; its first line, cut at `max` characters.
pub fn text(s: &str, max: usize) -> String {
    if s.is_empty() {
        return "-".into();
    }
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// `k=v,k=v` of a label map.
pub fn label_map(m: &std::collections::BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_and_states_read_short() {
        let t = table(
            &["NAME", "STATE"],
            &[
                vec!["web01".into(), "UP".into()],
                vec!["db".into(), "DOWN".into()],
            ],
        );
        assert_eq!(t, "NAME    STATE\nweb01   UP\ndb      DOWN\n");
        let state = |state: u8, soft: bool| -> CheckState {
            serde_json::from_value(json!({
                "objectId": uuid::Uuid::nil(), "state": state,
                "stateType": if soft { "soft" } else { "hard" }, "attempt": 2,
                "output": "", "lastCheck": "2026-01-01T12:00:00Z",
                "lastChange": "2026-01-01T12:00:00Z",
            }))
            .unwrap()
        };
        assert_eq!(
            state_name(ObjectKind::Service, Some(&state(2, false))),
            "CRIT"
        );
        assert_eq!(
            state_name(ObjectKind::Service, Some(&state(1, true))),
            "WARN (soft 2)"
        );
        assert_eq!(
            state_name(ObjectKind::Host, Some(&state(2, false))),
            "UNREACH"
        );
        assert_eq!(state_name(ObjectKind::Host, None), "PEND");
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        let at = |t: &str| Some(t.parse::<Timestamp>().unwrap());
        assert_eq!(since(at("2026-01-01T11:57:00Z"), now), "3m");
        assert_eq!(since(at("2026-01-01T10:00:00Z"), now), "2h");
        assert_eq!(cell(&json!("line one\nline two"), 20), "line one");
        assert_eq!(cell(&json!("abcdef"), 4), "abc…");
        assert_eq!(cell(&json!(""), 4), "-");
        assert_eq!(shown(None::<&str>, 4), "-");
        assert_eq!(shown(Some(42), 4), "42");
        assert_eq!(since(None, now), "-");
        let labels = [("b", "2"), ("a", "1")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(label_map(&labels.into_iter().collect()), "a=1,b=2");
    }
}
