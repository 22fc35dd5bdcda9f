//! `oncall`: who is on call now, per schedule; a schedule nobody covers is critical.

use super::{ReportError, Reports};
use crate::model::report::{ReportRow, ReportTable};
use crate::runtime::OnCallRoster;
use serde_json::json;
use uuid::Uuid;

impl Reports {
    pub(super) async fn on_call(
        &self,
        tenant: Uuid,
        table: &mut ReportTable,
    ) -> Result<(), ReportError> {
        let roster = self.oncall.on_call_now(tenant).await?;
        fill(table, roster);
        Ok(())
    }
}

/// The table of (schedule, who is on call) pairs.
fn fill(table: &mut ReportTable, roster: OnCallRoster) {
    table.columns = vec!["schedule".into(), "on call now".into()];
    let uncovered = roster.iter().filter(|(_, who)| who.is_empty()).count();
    table.totals.insert("schedules".into(), json!(roster.len()));
    table.totals.insert("uncovered".into(), json!(uncovered));
    for (schedule, who) in roster {
        table.rows.push(ReportRow {
            name: schedule,
            class: if who.is_empty() { "critical" } else { "ok" }.into(),
            values: vec![if who.is_empty() {
                "nobody".into()
            } else {
                who.join(", ")
            }],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::empty_table;

    #[test]
    fn an_uncovered_schedule_is_critical_and_counted() {
        let mut table = empty_table("oncall");
        fill(
            &mut table,
            vec![
                ("network".into(), vec!["Ana".into(), "Bo".into()]),
                ("night".into(), Vec::new()),
            ],
        );
        assert_eq!(table.rows[0].values, ["Ana, Bo"]);
        assert_eq!(table.rows[0].class, "ok");
        assert_eq!(
            (
                table.rows[1].values[0].as_str(),
                table.rows[1].class.as_str()
            ),
            ("nobody", "critical")
        );
        assert_eq!(table.totals["schedules"], 2);
        assert_eq!(table.totals["uncovered"], 1);
    }
}
