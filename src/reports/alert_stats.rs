//! `alert-stats`: the alerts opened in the window, counted, with the mean time to acknowledge
//! and to resolve, by severity and for the most frequent titles.

use super::{ReportError, Reports, duration};
use crate::model::alert::Alert;
use crate::model::report::{ReportParams, ReportRow, ReportTable};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use uuid::Uuid;

/// Titles an alert-stats report lists.
const TOP_TITLES: usize = 20;
/// Alerts read per page.
const PAGE: usize = 500;

#[derive(Default)]
struct Tally {
    count: u64,
    acked: u64,
    ack_ms: i64,
    resolved: u64,
    resolve_ms: i64,
}

impl Tally {
    fn add(&mut self, a: &Alert) {
        self.count += 1;
        if let Some(at) = a.acked_at {
            self.acked += 1;
            self.ack_ms += at.as_millis() - a.opened_at.as_millis();
        }
        if let Some(at) = a.resolved_at {
            self.resolved += 1;
            self.resolve_ms += at.as_millis() - a.opened_at.as_millis();
        }
    }

    /// The mean of `total` over `n`, or `-` for none.
    fn mean(total: i64, n: u64) -> String {
        match i64::try_from(n) {
            Ok(n) if n > 0 => duration(total / n),
            _ => "-".into(),
        }
    }
}

/// The tallies of alerts, in any order.
#[derive(Default)]
struct Stats {
    all: Tally,
    by_title: HashMap<String, Tally>,
    by_severity: BTreeMap<String, u64>,
}

impl Stats {
    fn add(&mut self, a: &Alert) {
        self.all.add(a);
        self.by_title.entry(a.title.clone()).or_default().add(a);
        *self
            .by_severity
            .entry(a.severity.as_str().to_string())
            .or_default() += 1;
    }
}

impl Reports {
    pub(super) async fn alert_stats(
        &self,
        tenant: Uuid,
        params: &ReportParams,
        table: &mut ReportTable,
    ) -> Result<(), ReportError> {
        let from = table.generated_at.as_millis() - i64::from(params.window_days) * 86_400_000;
        let mut stats = Stats::default();
        let mut before = None;
        'pages: loop {
            let page = self
                .store
                .alerts(tenant, Default::default(), before, PAGE)
                .await?;
            for a in &page {
                if a.opened_at.as_millis() < from {
                    break 'pages;
                }
                stats.add(a);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => before = Some(last.id),
                _ => break,
            }
        }
        fill(table, stats);
        Ok(())
    }
}

/// The table: the most frequent titles (ties by title), and the totals.
fn fill(table: &mut ReportTable, stats: Stats) {
    let mut titles: Vec<(String, Tally)> = stats.by_title.into_iter().collect();
    titles.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
    table.columns = [
        "title",
        "alerts",
        "acknowledged",
        "resolved",
        "mtta",
        "mttr",
    ]
    .map(String::from)
    .to_vec();
    for (title, t) in titles.into_iter().take(TOP_TITLES) {
        table.rows.push(ReportRow {
            name: title,
            values: vec![
                t.count.to_string(),
                t.acked.to_string(),
                t.resolved.to_string(),
                Tally::mean(t.ack_ms, t.acked),
                Tally::mean(t.resolve_ms, t.resolved),
            ],
            class: String::new(),
        });
    }
    let all = stats.all;
    table.totals.insert("alerts".into(), json!(all.count));
    table.totals.insert("acknowledged".into(), json!(all.acked));
    table.totals.insert("resolved".into(), json!(all.resolved));
    table
        .totals
        .insert("mtta".into(), json!(Tally::mean(all.ack_ms, all.acked)));
    table.totals.insert(
        "mttr".into(),
        json!(Tally::mean(all.resolve_ms, all.resolved)),
    );
    table
        .totals
        .insert("bySeverity".into(), json!(stats.by_severity));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;
    use crate::model::event::Severity;
    use crate::reports::empty_table;

    fn alert(title: &str, severity: Severity, ack_s: Option<i64>, resolve_s: Option<i64>) -> Alert {
        let opened: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let after = |s: i64| Timestamp::from_millis(opened.as_millis() + s * 1000).unwrap();
        let mut a: Alert = serde_json::from_value(json!({
            "id": Uuid::from_u128(1), "tenantId": Uuid::from_u128(2), "ruleId": "r",
            "dedupKey": title, "title": title, "severity": severity, "status": "open",
            "openedAt": opened, "version": 1
        }))
        .unwrap();
        a.acked_at = ack_s.map(after);
        a.resolved_at = resolve_s.map(after);
        a
    }

    #[test]
    fn means_count_only_the_alerts_that_got_there_and_titles_rank_by_count() {
        let mut stats = Stats::default();
        for a in [
            alert("disk full", Severity::Warning, Some(60), Some(600)),
            alert("disk full", Severity::Warning, Some(180), None),
            alert("link down", Severity::Critical, None, None),
        ] {
            stats.add(&a);
        }
        let mut table = empty_table("alert-stats");
        fill(&mut table, stats);
        assert_eq!(table.rows[0].name, "disk full");
        assert_eq!(table.rows[0].values, ["2", "2", "1", "2m0s", "10m0s"]);
        assert_eq!(table.rows[1].values, ["1", "0", "0", "-", "-"]);
        assert_eq!(table.totals["alerts"], 3);
        assert_eq!(table.totals["mtta"], "2m0s");
        assert_eq!(
            table.totals["bySeverity"],
            json!({"critical": 1, "warning": 2})
        );
    }

    #[test]
    fn only_the_most_frequent_titles_are_listed() {
        let mut stats = Stats::default();
        for i in 0..TOP_TITLES + 5 {
            stats.add(&alert(&format!("t{i:02}"), Severity::Info, None, None));
        }
        let mut table = empty_table("alert-stats");
        fill(&mut table, stats);
        assert_eq!(table.rows.len(), TOP_TITLES);
        assert_eq!(table.rows[0].name, "t00", "ties in title order");
        assert_eq!(table.totals["alerts"], TOP_TITLES + 5);
    }
}
