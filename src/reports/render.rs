//! A report's table as HTML (a page that prints well), CSV (RFC 4180) or JSON.

use crate::model::input::markup_text as escape;
use crate::model::report::ReportTable;

pub fn html(t: &ReportTable) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         th,td{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}\
         tr.critical td{{background:#fdd}}tr.warning td{{background:#ffd}}tr.ok td{{background:#efe}}</style>\n\
         </head><body>\n<h1>{title}</h1>\n<p>{kind} report, the last {days} days, generated {at}.</p>\n<table>\n<tr>",
        title = escape(&t.title),
        kind = escape(&t.kind),
        days = t.window_days,
        at = t.generated_at,
    );
    for c in &t.columns {
        out.push_str(&format!("<th>{}</th>", escape(c)));
    }
    out.push_str("</tr>\n");
    for r in &t.rows {
        if r.class.is_empty() {
            out.push_str("<tr>");
        } else {
            out.push_str(&format!("<tr class=\"{}\">", escape(&r.class)));
        }
        out.push_str(&format!("<td>{}</td>", escape(&r.name)));
        for v in &r.values {
            out.push_str(&format!("<td>{}</td>", escape(v)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    if !t.totals.is_empty() {
        out.push_str("<h2>Totals</h2>\n<dl>\n");
        for (k, v) in &t.totals {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(k), escape(&v)));
        }
        out.push_str("</dl>\n");
    }
    out.push_str("</body></html>\n");
    out
}

/// A CSV cell: quoted when it holds a separator, a quote or a line break; a cell that a
/// spreadsheet would read as a formula (starting `=`, `+`, `-`, `@`, tab or carriage return)
/// gets a leading `'` so it stays text.
fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

pub fn csv(t: &ReportTable) -> String {
    let line = |fields: Vec<&str>| {
        fields
            .into_iter()
            .map(csv_field)
            .collect::<Vec<_>>()
            .join(",")
            + "\r\n"
    };
    let mut out = line(t.columns.iter().map(String::as_str).collect());
    for r in &t.rows {
        let mut fields = vec![r.name.as_str()];
        fields.extend(r.values.iter().map(String::as_str));
        out.push_str(&line(fields));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::report::ReportRow;

    fn table() -> ReportTable {
        ReportTable {
            title: "Web <tier>".into(),
            kind: "availability".into(),
            generated_at: Timestamp::from_millis(0).unwrap(),
            window_days: 7,
            columns: vec!["object".into(), "availability %".into()],
            rows: vec![ReportRow {
                name: "web1/http, \"main\"".into(),
                values: vec!["99.500".into()],
                class: "critical".into(),
            }],
            totals: serde_json::Map::new(),
        }
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(
            csv(&table()),
            "object,availability %\r\n\"web1/http, \"\"main\"\"\",99.500\r\n"
        );
        assert_eq!(
            csv_field("=HYPERLINK(\"http://evil\",\"x\")"),
            "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""
        );
        for formula in ["+1", "-2", "@SUM(A1)", "\tx"] {
            assert!(
                csv_field(formula).trim_start_matches('"').starts_with('\''),
                "{formula}"
            );
        }
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn html_escapes_names() {
        let page = html(&table());
        assert!(page.contains("<h1>Web &lt;tier&gt;</h1>"));
        assert!(page.contains(
            "<tr class=\"critical\"><td>web1/http, &quot;main&quot;</td><td>99.500</td></tr>"
        ));
    }
}
