//! The tactical overview (Icinga's): how many hosts and services are in each state and how many
//! of the bad ones nobody has handled yet, the problems of each site, the open alerts by
//! severity. Counted from the lists the pages already read; a wallboard shows it.

use super::alert::{Alert, AlertStatus};
use super::event::Severity;
use super::object::{ObjectKind, ObjectView};
use super::state::{CheckState, Problem, badness, label};
use std::collections::BTreeMap;

/// Objects of one kind in one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateCount {
    /// `UP`, `CRITICAL`, `PENDING`…
    pub state: &'static str,
    /// 0 (fine or pending) to 3 (down or critical), as the problems page ranks them.
    pub badness: u8,
    pub total: usize,
    /// Of them, neither acknowledged nor in downtime (0 for fine ones).
    pub unhandled: usize,
}

/// One site's problems, by the `site` label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteCount {
    pub site: String,
    /// Down hosts and critical services.
    pub critical: usize,
    pub warning: usize,
    /// Unreachable hosts and unknown services.
    pub unknown: usize,
    pub unhandled: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tactical {
    pub hosts: Vec<StateCount>,
    pub services: Vec<StateCount>,
    /// Sites with problems, worst first; problems without a site under the empty name.
    pub sites: Vec<SiteCount>,
    /// Open (not acknowledged) alerts by severity, worst first; none when they were not read.
    pub alerts: Vec<(Severity, usize)>,
}

fn handled(s: &CheckState) -> bool {
    s.acked_by.is_some() || s.downtime_depth > 0
}

/// The states of `kind` in the order the overview shows them: worst first, pending last.
fn states(kind: ObjectKind) -> &'static [Option<u8>] {
    match kind {
        ObjectKind::Host => &[Some(1), Some(2), Some(0), None],
        ObjectKind::Service => &[Some(2), Some(1), Some(3), Some(0), None],
    }
}

fn counts(kind: ObjectKind, objects: &[ObjectView]) -> Vec<StateCount> {
    let mut seen = Vec::new();
    for &s in states(kind) {
        let of: Vec<&ObjectView> = objects
            .iter()
            .filter(|o| o.object.kind == kind && o.state.as_ref().map(|c| c.state) == s)
            .collect();
        let unhandled = of
            .iter()
            .filter(|o| {
                o.state
                    .as_ref()
                    .is_some_and(|c| badness(kind, c.state) > 0 && !handled(c))
            })
            .count();
        seen.push(StateCount {
            state: label(kind, s),
            badness: s.map_or(0, |s| badness(kind, s)),
            total: of.len(),
            unhandled,
        });
    }
    seen
}

impl Tactical {
    /// The overview of `objects` (with their states), `problems` (with their effective labels,
    /// for the site) and `alerts` (`None`: not read).
    pub fn of(objects: &[ObjectView], problems: &[Problem], alerts: Option<&[Alert]>) -> Tactical {
        let mut sites: BTreeMap<String, SiteCount> = BTreeMap::new();
        for p in problems {
            let site = p.labels.get("site").cloned().unwrap_or_default();
            let count = sites.entry(site.clone()).or_insert_with(|| SiteCount {
                site,
                ..Default::default()
            });
            match badness(p.object.kind, p.state.state) {
                3 => count.critical += 1,
                2 => count.unknown += 1,
                1 => count.warning += 1,
                _ => continue,
            }
            if !handled(&p.state) {
                count.unhandled += 1;
            }
        }
        let mut sites: Vec<SiteCount> = sites.into_values().collect();
        sites.sort_by(|a, b| {
            (b.critical, b.unknown, b.warning)
                .cmp(&(a.critical, a.unknown, a.warning))
                .then(a.site.cmp(&b.site))
        });
        let alerts = match alerts {
            None => Vec::new(),
            Some(alerts) => [Severity::Critical, Severity::Warning, Severity::Info]
                .into_iter()
                .map(|sev| {
                    let open = |a: &&Alert| a.status == AlertStatus::Open && a.severity == sev;
                    (sev, alerts.iter().filter(open).count())
                })
                .collect(),
        };
        Tactical {
            hosts: counts(ObjectKind::Host, objects),
            services: counts(ObjectKind::Service, objects),
            sites,
            alerts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use uuid::Uuid;

    const AT: &str = "2026-12-05T07:00:00Z";

    fn object(id: u128, kind: &str, state: Option<u8>, handled: bool) -> Value {
        let mut v = json!({
            "id": Uuid::from_u128(id), "tenantId": Uuid::nil(), "kind": kind,
            "name": format!("o{id}"), "folder": "/", "spec": {}, "createdAt": AT,
            "updatedAt": AT, "version": 1,
        });
        if let Some(state) = state {
            v["state"] = json!({"objectId": Uuid::from_u128(id), "state": state,
                "stateType": "hard", "attempt": 1, "output": "", "lastCheck": AT,
                "lastChange": AT, "downtimeDepth": u32::from(handled)});
        }
        v
    }

    fn view(id: u128, kind: &str, state: Option<u8>, handled: bool) -> ObjectView {
        serde_json::from_value(object(id, kind, state, handled)).unwrap()
    }

    fn problem(id: u128, kind: &str, state: u8, handled: bool, site: Option<&str>) -> Problem {
        let mut o = object(id, kind, Some(state), handled);
        let state = o["state"].take();
        o.as_object_mut().unwrap().remove("state");
        serde_json::from_value(json!({"object": o, "state": state,
            "labels": site.map_or(json!({}), |s| json!({"site": s}))}))
        .unwrap()
    }

    fn alert(id: u128, severity: &str, status: &str) -> Alert {
        serde_json::from_value(json!({
            "id": Uuid::from_u128(id), "tenantId": Uuid::nil(), "ruleId": "r",
            "dedupKey": format!("k{id}"), "status": status, "severity": severity,
            "title": "t", "labels": {}, "openedAt": AT,
        }))
        .unwrap()
    }

    /// Each state counts its objects and, of the bad ones, those nobody handled; sites are
    /// ranked by their worst problems; only open alerts count.
    #[test]
    fn the_overview_counts_states_handled_sites_and_alerts() {
        let objects = [
            view(1, "host", Some(0), false),
            view(2, "host", Some(1), false),
            view(3, "host", Some(1), true),
            view(4, "host", None, false),
            view(5, "service", Some(2), false),
            view(6, "service", Some(1), true),
            view(7, "service", Some(0), false),
        ];
        let problems = [
            problem(2, "host", 1, false, Some("north")),
            problem(3, "host", 1, true, Some("north")),
            problem(5, "service", 2, false, Some("south")),
            problem(6, "service", 1, true, None),
        ];
        let alerts = [
            alert(1, "critical", "open"),
            alert(2, "critical", "acked"),
            alert(3, "warning", "open"),
        ];
        let t = Tactical::of(&objects, &problems, Some(&alerts));
        assert!(Tactical::of(&objects, &problems, None).alerts.is_empty());
        let host = |s: &str| t.hosts.iter().find(|c| c.state == s).unwrap().clone();
        assert_eq!((host("DOWN").total, host("DOWN").unhandled), (2, 1));
        assert_eq!((host("UP").total, host("UP").unhandled), (1, 0));
        assert_eq!(host("PENDING").total, 1);
        assert_eq!(t.hosts[0].state, "DOWN", "worst first");
        assert_eq!(
            t.services.iter().map(|c| c.state).collect::<Vec<_>>(),
            ["CRITICAL", "WARNING", "UNKNOWN", "OK", "PENDING"]
        );
        assert_eq!(t.services[1].total, 1);
        assert_eq!(t.services[1].unhandled, 0, "the warning is in downtime");
        assert_eq!(
            t.sites,
            [
                SiteCount {
                    site: "north".into(),
                    critical: 2,
                    warning: 0,
                    unknown: 0,
                    unhandled: 1
                },
                SiteCount {
                    site: "south".into(),
                    critical: 1,
                    warning: 0,
                    unknown: 0,
                    unhandled: 1
                },
                SiteCount {
                    site: String::new(),
                    critical: 0,
                    warning: 1,
                    unknown: 0,
                    unhandled: 0
                },
            ]
        );
        assert_eq!(
            t.alerts,
            [
                (Severity::Critical, 1),
                (Severity::Warning, 1),
                (Severity::Info, 0)
            ]
        );
    }
}
