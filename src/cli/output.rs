//! Tables as kubectl and icingacli print them: aligned columns, short state names, ages.

use jiff::Timestamp;
use serde_json::Value;

/// Prints rows under a header, each column as wide as its widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(w - cell.chars().count() + 3));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// The short state name of a live state (`OK WARN CRIT UNKN UP DOWN UNREACH`), or `PEND` for
/// an object never checked.
pub fn state_name(kind: &str, state: &Value) -> String {
    let Some(n) = state["state"].as_u64() else {
        return "PEND".into();
    };
    let name = match (kind, n) {
        ("host", 0) => "UP",
        ("host", 1) => "DOWN",
        ("host", _) => "UNREACH",
        (_, 0) => "OK",
        (_, 1) => "WARN",
        (_, 2) => "CRIT",
        _ => "UNKN",
    };
    if state["stateType"] == "soft" && n != 0 {
        format!("{name} (soft {})", state["attempt"].as_u64().unwrap_or(0))
    } else {
        name.to_string()
    }
}

/// `3m`, `2h`, `5d`: how long ago `at` (RFC 3339) was.
pub fn age(at: &Value, now: Timestamp) -> String {
    let Some(at) = at.as_str().and_then(|t| t.parse::<Timestamp>().ok()) else {
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
    let text = match v {
        Value::Null => return "-".into(),
        Value::String(s) if s.is_empty() => return "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// `k=v,k=v` of a labels object.
pub fn labels(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".into(),
    }
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
        assert_eq!(
            state_name("service", &json!({"state": 2, "stateType": "hard"})),
            "CRIT"
        );
        assert_eq!(
            state_name(
                "service",
                &json!({"state": 1, "stateType": "soft", "attempt": 2})
            ),
            "WARN (soft 2)"
        );
        assert_eq!(
            state_name("host", &json!({"state": 2, "stateType": "hard"})),
            "UNREACH"
        );
        assert_eq!(state_name("host", &Value::Null), "PEND");
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        assert_eq!(age(&json!("2026-01-01T11:57:00Z"), now), "3m");
        assert_eq!(age(&json!("2026-01-01T10:00:00Z"), now), "2h");
        assert_eq!(cell(&json!("line one\nline two"), 20), "line one");
        assert_eq!(cell(&json!("abcdef"), 4), "abc…");
    }
}
