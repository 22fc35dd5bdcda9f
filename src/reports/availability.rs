//! `availability` and `sla`: the time each object the selector picks spent in a hard non-OK
//! state over the window, against the report's target; with `excludeDependencies`, without
//! the time a failed dependency held it back.

use super::{ReportError, Reports, duration, invalid};
use crate::model::Timestamp;
use crate::model::availability::{DownSpans, availability, subtract, union_length};
use crate::model::dependency::{Group, ParentState, Timeline, failed_spans, member_kind};
use crate::model::event::{EventFilter, EventType};
use crate::model::object::ObjectKind;
use crate::model::report::{ReportParams, ReportRow, ReportTable};
use crate::model::selector::Selector;
use crate::store::events::Position;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use uuid::Uuid;

/// Rows an availability report covers at most.
const MAX_OBJECTS: usize = 10_000;
/// Events read per page while summing availability.
const EVENT_PAGE: usize = 10_000;

/// One object's time down over the window.
struct Down {
    name: String,
    kind: ObjectKind,
    down_ms: i64,
    /// The time the object had data in the window.
    measured_ms: i64,
}

impl Reports {
    pub(super) async fn availability(
        &self,
        tenant: Uuid,
        params: &ReportParams,
        table: &mut ReportTable,
    ) -> Result<(), ReportError> {
        let selector: Option<Selector> = match params.selector.as_str() {
            "" => None,
            s => Some(
                s.parse()
                    .map_err(|e| invalid("selector", format!("params.selector: {e}")))?,
            ),
        };
        let labels = self.labels.labels_of(tenant).await;
        let effective = labels.clone();
        let objects = self
            .store
            .objects(tenant, None, MAX_OBJECTS, move |o| {
                selector
                    .as_ref()
                    .is_none_or(|s| s.matches(&effective(o.id).unwrap_or_else(|| o.labels.clone())))
            })
            .await?;
        let hosts = self
            .store
            .host_names(tenant, objects.iter().filter_map(|o| o.host_id).collect())
            .await?;
        let states = self
            .store
            .all_states(tenant)
            .await?
            .covered_by_object(&*labels);
        let now = table.generated_at.as_millis();
        let window_ms = i64::from(params.window_days) * 86_400_000;
        let from = now - window_ms;
        let mut trackers: HashMap<Uuid, DownSpans> = objects
            .iter()
            .map(|o| (o.id, DownSpans::new(from)))
            .collect();
        // With `excludeDependencies`, the objects' dependency groups and their parents'
        // states over the window.
        let groups: HashMap<Uuid, Arc<[Group]>> = if params.exclude_dependencies {
            let of = self.dependencies.dependencies().await;
            objects
                .iter()
                .filter_map(|o| Some((o.id, of(tenant, o.id)?)))
                .collect()
        } else {
            HashMap::new()
        };
        let mut parents: HashMap<Uuid, (ObjectKind, Timeline)> = groups
            .values()
            .flat_map(|g| g.iter().flat_map(|g| &g.members))
            .map(|m| (m.object, (member_kind(&m.name), Timeline::default())))
            .collect();
        let filter = EventFilter {
            tenant_id: tenant,
            types: vec![EventType::StateChange],
            from: Timestamp::from_millis(from),
            ..Default::default()
        };
        let mut after = None;
        loop {
            let page = self
                .events
                .ascending(filter.clone(), after, EVENT_PAGE)
                .await?;
            for e in &page {
                if let Some(t) = e.object_id.and_then(|o| trackers.get_mut(&o)) {
                    t.observe(e);
                }
                if let Some((kind, t)) = e.object_id.and_then(|o| parents.get_mut(&o)) {
                    t.observe(*kind, e, from);
                }
            }
            match page.last() {
                Some(last) if page.len() == EVENT_PAGE => after = Position::of_id(last.id),
                _ => break,
            }
        }
        for (id, (_, t)) in parents.iter_mut() {
            t.finish(states.get(id).map(ParentState::of), from);
        }
        let timeline = |o: Uuid| parents.get(&o).map(|(_, t)| t.clone());
        let downs = objects
            .iter()
            .map(|o| {
                let mut coverage = trackers
                    .remove(&o.id)
                    .map(|t| t.finish(states.get(&o.id), now))
                    .unwrap_or_default();
                if let Some(groups) = groups.get(&o.id) {
                    for held in failed_spans(groups, &timeline, from, now) {
                        coverage.down = subtract(&coverage.down, held);
                    }
                }
                Down {
                    name: match o.host_id.and_then(|h| hosts.get(&h)) {
                        Some(host) => format!("{host}/{}", o.name),
                        None => o.name.clone(),
                    },
                    kind: o.kind,
                    down_ms: union_length(coverage.down.clone()),
                    measured_ms: coverage.measured_ms(window_ms),
                }
            })
            .collect();
        fill(table, params.target, downs);
        Ok(())
    }
}

/// The table of `downs` against `target` percent: one row per object, its availability over
/// the time it had data (an `sla` report adds the error budget of that time), and the totals.
fn fill(table: &mut ReportTable, target: f64, downs: Vec<Down>) {
    let sla = table.kind == "sla";
    table.columns = vec!["object".into(), "kind".into(), "availability %".into()];
    if sla {
        table
            .columns
            .extend(["target %", "budget", "down", "budget left"].map(String::from));
    } else {
        table.columns.push("down".into());
    }
    let (mut below, mut sum) = (0, 0.0);
    let count = downs.len();
    for d in downs {
        let budget_ms = (d.measured_ms as f64 * (1.0 - target / 100.0)).round() as i64;
        let availability = availability(d.down_ms, d.measured_ms);
        sum += availability;
        let met = availability >= target;
        if !met {
            below += 1;
        }
        let kind = d.kind.as_str();
        // Floored, so that 100.000 means never down.
        let shown = (availability * 1000.0).floor() / 1000.0;
        let mut values = vec![kind.to_string(), format!("{shown:.3}")];
        if sla {
            values.push(format!("{target}"));
            values.push(duration(budget_ms));
            values.push(duration(d.down_ms));
            values.push(duration((budget_ms - d.down_ms).max(0)));
        } else {
            values.push(duration(d.down_ms));
        }
        table.rows.push(ReportRow {
            name: d.name,
            values,
            class: if met { "ok" } else { "critical" }.into(),
        });
    }
    let mean = if count == 0 {
        100.0
    } else {
        sum / count as f64
    };
    table.totals.insert("objects".into(), json!(count));
    table.totals.insert("belowTarget".into(), json!(below));
    table.totals.insert("target".into(), json!(target));
    table.totals.insert(
        "meanAvailability".into(),
        json!((mean * 1000.0).round() / 1000.0),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::empty_table;

    const DAY_MS: i64 = 86_400_000;

    fn down(name: &str, kind: ObjectKind, down_ms: i64, measured_ms: i64) -> Down {
        Down {
            name: name.into(),
            kind,
            down_ms,
            measured_ms,
        }
    }

    #[test]
    fn availability_is_floored_and_the_mean_and_misses_are_totalled() {
        let mut table = empty_table("availability");
        let downs = vec![
            down("web", ObjectKind::Host, 0, DAY_MS),
            down("web/http", ObjectKind::Service, 60_000, DAY_MS),
        ];
        fill(&mut table, 99.9, downs);
        assert_eq!(table.columns.last().unwrap(), "down");
        assert_eq!(table.rows[0].values, ["host", "100.000", "0s"]);
        // 1 minute of a day: 99.93055…, shown floored.
        assert_eq!(table.rows[1].values, ["service", "99.930", "1m0s"]);
        assert_eq!(table.rows[1].class, "ok");
        assert_eq!(table.totals["belowTarget"], 0);
        assert_eq!(table.totals["meanAvailability"], 99.965);
    }

    #[test]
    fn an_sla_row_spends_the_error_budget_and_never_shows_it_negative() {
        let mut table = empty_table("sla");
        // 99 % of 30 days leaves 7h12m of budget.
        let downs = vec![
            down("db", ObjectKind::Host, 3_600_000, 30 * DAY_MS),
            down("db/disk", ObjectKind::Service, 10 * 3_600_000, 30 * DAY_MS),
            // Made a day before the end, down an hour of it: its budget is of that day.
            down("db/new", ObjectKind::Service, 3_600_000, DAY_MS),
            // No data at all: nothing measured, nothing down.
            down("db/quiet", ObjectKind::Service, 0, 0),
        ];
        fill(&mut table, 99.0, downs);
        assert_eq!(
            table.columns,
            [
                "object",
                "kind",
                "availability %",
                "target %",
                "budget",
                "down",
                "budget left"
            ]
        );
        assert_eq!(
            table.rows[0].values[2..],
            ["99", "7h12m0s", "1h0m0s", "6h12m0s"]
        );
        assert_eq!(table.rows[1].values[5], "0s");
        assert_eq!(table.rows[1].class, "critical");
        assert_eq!(table.rows[2].values[1], "95.833");
        assert_eq!(table.rows[2].values[3], "14m24s");
        assert_eq!(table.rows[3].values[1], "100.000");
        assert_eq!(table.totals["belowTarget"], 2);
    }

    #[test]
    fn no_objects_is_a_full_mean() {
        let mut table = empty_table("availability");
        fill(&mut table, 99.0, Vec::new());
        assert!(table.rows.is_empty());
        assert_eq!(table.totals["meanAvailability"], 100.0);
        assert_eq!(table.totals["objects"], 0);
    }
}
