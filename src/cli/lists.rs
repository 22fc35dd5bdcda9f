//! The tables `list`, `get`, `oncall`, `sites`, `audit`, `plan` and `describe` print.

use super::*;
use crate::model::alert::Alert;
use crate::model::audit::AuditEntry;
use crate::model::bundle::PlanResult;
use crate::model::event::Event;
use crate::model::identity::ApiToken;
use crate::model::incident::Incident;
use crate::model::notify::OnCallNow;
use crate::model::object::{EffectiveConfig, Object, ObjectView};
use crate::model::page::Page;
use crate::model::site::{EdgeStatus, SiteOverview};
use crate::model::state::Problem;
use crate::model::suppression::{Downtime, Silence};

/// A list as a table; `wide` adds columns and keeps long text whole. Lists of the wire types
/// `model` shares with the server are read as those types.
pub(super) type Render = fn(&Value, bool) -> Result<String, CliError>;

/// How much of a long text a column shows.
pub(super) fn text_width(wide: bool) -> usize {
    if wide { 1000 } else { 60 }
}

/// Adds the wide-only columns to a table's header and rows.
pub(super) fn widen(
    header: &mut Vec<&'static str>,
    rows: &mut [Vec<String>],
    extra: &[&'static str],
    cells: impl Fn(usize) -> Vec<String>,
) {
    header.extend_from_slice(extra);
    for (i, row) in rows.iter_mut().enumerate() {
        row.extend(cells(i));
    }
}

pub(super) fn hosts(v: &Value, wide: bool) -> Result<String, CliError> {
    let list = wire::<Page<ObjectView>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|h| {
            vec![
                text(&h.object.name, 40),
                state_name(h.object.kind, h.state.as_ref()),
                shown(h.object.spec.address.as_deref(), 40),
                label_map(&h.object.labels),
                shown(
                    h.state.as_ref().map(|s| s.output.as_str()),
                    text_width(wide),
                ),
            ]
        })
        .collect();
    let mut header = vec!["NAME", "STATE", "ADDRESS", "LABELS", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["FOLDER", "CHECK", "ID"], |i| {
            let h = &list[i].object;
            vec![
                text(&h.folder, 60),
                shown(h.spec.check_command.as_deref(), 40),
                h.id.to_string(),
            ]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn services(v: &Value, wide: bool) -> Result<String, CliError> {
    let list = wire::<Page<ObjectView>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                shown(s.host_name.as_deref(), 40),
                text(&s.object.name, 40),
                state_name(s.object.kind, s.state.as_ref()),
                shown(
                    s.state.as_ref().map(|s| s.output.as_str()),
                    text_width(wide),
                ),
            ]
        })
        .collect();
    let mut header = vec!["HOST", "SERVICE", "STATE", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["LABELS", "CHECK", "ID"], |i| {
            let s = &list[i].object;
            vec![
                label_map(&s.labels),
                shown(s.spec.check_command.as_deref(), 40),
                s.id.to_string(),
            ]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn problems(v: &Value, wide: bool) -> Result<String, CliError> {
    let now = now();
    let list = wire::<Page<Problem>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            let o = &p.object;
            let name = match &p.host_name {
                Some(host) => format!("{}/{}", text(host, 60), text(&o.name, 60)),
                None => text(&o.name, 60),
            };
            vec![
                name,
                o.kind.as_str().into(),
                state_name(o.kind, Some(&p.state)),
                since(Some(p.state.last_change.0), now),
                if p.state.acked_by.is_some() {
                    "acked".into()
                } else {
                    "-".into()
                },
                text(&p.state.output, text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["OBJECT", "KIND", "STATE", "SINCE", "HANDLED", "OUTPUT"];
    if wide {
        widen(&mut header, &mut rows, &["ID"], |i| {
            vec![list[i].object.id.to_string()]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn alerts(v: &Value, wide: bool) -> Result<String, CliError> {
    let now = now();
    let list = wire::<Page<Alert>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|a| {
            vec![
                a.id.to_string(),
                a.status.as_str().into(),
                a.severity.as_str().into(),
                since(Some(a.opened_at.0), now),
                text(&a.title, text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["ID", "STATUS", "SEVERITY", "AGE", "TITLE"];
    if wide {
        widen(
            &mut header,
            &mut rows,
            &["DEDUP KEY", "ACKED BY", "OBJECT"],
            |i| {
                let a = &list[i];
                vec![
                    text(&a.dedup_key, 80),
                    shown(a.acked_by.as_deref(), 40),
                    shown(a.object_id, 40),
                ]
            },
        );
    }
    Ok(table(&header, &rows))
}

pub(super) fn incidents(v: &Value, wide: bool) -> Result<String, CliError> {
    let now = now();
    let list = wire::<Page<Incident>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|i| {
            vec![
                i.id.to_string(),
                text(&i.status, 12),
                since(Some(i.opened_at.0), now),
                text(&i.title, text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["ID", "STATUS", "AGE", "TITLE"];
    if wide {
        widen(&mut header, &mut rows, &["LABELS", "SUMMARY"], |i| {
            vec![label_map(&list[i].labels), text(&list[i].summary, 1000)]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn silences(v: &Value, wide: bool) -> Result<String, CliError> {
    let list = wire::<Page<Silence>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                text(&s.selector, 40),
                text(&s.text_regex, 30),
                s.expires_at.to_string(),
                text(&s.comment, if wide { 1000 } else { 40 }),
            ]
        })
        .collect();
    let mut header = vec!["ID", "SELECTOR", "TEXT", "EXPIRES", "COMMENT"];
    if wide {
        widen(&mut header, &mut rows, &["STARTS", "CREATED BY"], |i| {
            vec![list[i].starts_at.to_string(), text(&list[i].created_by, 40)]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn downtimes(v: &Value, wide: bool) -> Result<String, CliError> {
    let list = wire::<Page<Downtime>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let target = d
                .object_id
                .map_or_else(|| text(&d.selector, 40), |o| o.to_string());
            vec![
                d.id.to_string(),
                text(&d.kind, 10),
                target,
                d.start.to_string(),
                d.end.to_string(),
                text(&d.comment, if wide { 1000 } else { 40 }),
            ]
        })
        .collect();
    let mut header = vec!["ID", "TYPE", "TARGET", "START", "END", "COMMENT"];
    if wide {
        widen(&mut header, &mut rows, &["DURATION", "CREATED BY"], |i| {
            vec![
                shown(list[i].duration.map(|s| format!("{s}s")), 20),
                text(&list[i].created_by, 40),
            ]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn events(v: &Value, wide: bool) -> Result<String, CliError> {
    let list = wire::<Page<Event>>(v)?.items;
    let mut rows: Vec<Vec<String>> = list
        .iter()
        .map(|e| {
            let p = &e.payload;
            let what = [&p["title"], &p["output"], &p["summary"], &p["name"]]
                .into_iter()
                .find(|x| x.is_string())
                .unwrap_or(&Value::Null);
            vec![
                e.ts.to_string(),
                e.kind.as_str().into(),
                shown(e.severity.map(|s| s.as_str()), 10),
                shown(e.object_id, 40),
                cell(what, text_width(wide)),
            ]
        })
        .collect();
    let mut header = vec!["TIME", "TYPE", "SEVERITY", "OBJECT", "WHAT"];
    if wide {
        widen(&mut header, &mut rows, &["SOURCE", "ID"], |i| {
            vec![
                shown(list[i].source_id.as_deref(), 40),
                list[i].id.to_string(),
            ]
        });
    }
    Ok(table(&header, &rows))
}

pub(super) fn oncall(v: &Value) -> Result<String, CliError> {
    let rows: Vec<Vec<String>> = wire::<Vec<OnCallNow>>(v)?
        .iter()
        .map(|s| {
            let names: Vec<String> = s.shifts.iter().map(|sh| text(&sh.contact, 40)).collect();
            vec![
                text(&s.schedule, 40),
                if names.is_empty() {
                    "-".into()
                } else {
                    names.join(", ")
                },
                shown(s.shifts.first().map(|sh| sh.end), 30),
            ]
        })
        .collect();
    Ok(table(&["SCHEDULE", "ON CALL", "UNTIL"], &rows))
}

pub(super) fn tokens(v: &Value) -> Result<String, CliError> {
    let now = now();
    let rows: Vec<Vec<String>> = wire::<Page<ApiToken>>(v)?
        .items
        .iter()
        .map(|t| {
            let access = if t.owner.is_some() {
                "as its user".to_string()
            } else {
                [t.scopes.join(","), t.roles.join(",")]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .map(|s| text(&s, 200))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            vec![
                t.id.to_string(),
                text(&t.name, 40),
                text(&t.prefix, 10),
                access,
                shown(t.expires_at, 30),
                since(t.last_used_at.map(|at| at.0), now),
            ]
        })
        .collect();
    Ok(table(
        &["ID", "NAME", "PREFIX", "ACCESS", "EXPIRES", "USED"],
        &rows,
    ))
}

pub(super) fn sites(v: &Value) -> Result<String, CliError> {
    let now = now();
    let stat = |s: &SiteOverview, k: &str| shown(s.stats.get(k), 8);
    let rows: Vec<Vec<String>> = wire::<Page<SiteOverview>>(v)?
        .items
        .iter()
        .map(|s| {
            let connection = if s.disabled {
                "disabled"
            } else if s.stale {
                "stale"
            } else if s.connected {
                "connected"
            } else {
                "offline"
            };
            vec![
                text(&s.name, 40),
                connection.to_string(),
                since(s.last_heartbeat_at.map(|t| t.0), now),
                text(&s.version, 20),
                stat(s, "hosts"),
                stat(s, "services"),
                stat(s, "alertsOpen"),
                if s.bundle_current {
                    "current"
                } else {
                    "behind"
                }
                .into(),
                text(&s.apply_error, 60),
            ]
        })
        .collect();
    Ok(table(
        &[
            "NAME",
            "STATUS",
            "SEEN",
            "VERSION",
            "HOSTS",
            "SERVICES",
            "ALERTS",
            "BUNDLE",
            "APPLY ERROR",
        ],
        &rows,
    ))
}

pub(super) fn site_status(v: &Value) -> Result<String, CliError> {
    let status: EdgeStatus = wire(v)?;
    if !status.enabled {
        return Err(CliError::Failed(
            "this instance is not a federation site (site.mainUrl is not set)".into(),
        ));
    }
    let now = now();
    let f = &status.forward;
    let rows = [
        ("site", text(&status.name, 80)),
        ("main", text(&status.main_url, 80)),
        ("last pull", since(status.last_pull_at.map(|t| t.0), now)),
        (
            "last heartbeat",
            since(status.last_heartbeat_at.map(|t| t.0), now),
        ),
        ("bundle", text(&status.bundle_etag, 40)),
        ("apply error", text(&status.apply_error, 200)),
        ("last error", text(&status.last_error, 200)),
        ("queue depth", f.pending.to_string()),
        ("oldest unsent", since(f.oldest_unsent.map(|t| t.0), now)),
        ("forwarded through", shown(f.position, 40)),
    ];
    Ok(rows.iter().map(|(k, v)| format!("{k:<18} {v}\n")).collect())
}

pub(super) fn audit(v: &Value) -> Result<String, CliError> {
    let rows: Vec<Vec<String>> = wire::<Page<AuditEntry>>(v)?
        .items
        .iter()
        .map(|e| {
            vec![
                e.seq.to_string(),
                e.ts.to_string(),
                format!("{}:{}", e.actor_type.as_str(), text(&e.actor_id, 40)),
                text(&e.action, 40),
                text(&e.resource, 60),
            ]
        })
        .collect();
    Ok(table(
        &["SEQ", "TIME", "ACTOR", "ACTION", "RESOURCE"],
        &rows,
    ))
}

pub(super) fn plan(v: &Value) -> Result<String, CliError> {
    let result: PlanResult = wire(v)?;
    let rows: Vec<Vec<String>> = result
        .plan
        .iter()
        .map(|a| vec![text(&a.action, 10), text(&a.kind, 24), text(&a.name, 60)])
        .collect();
    let mut out = table(&["ACTION", "KIND", "NAME"], &rows);
    for w in &result.warnings {
        out.push_str(&format!("warning: {}\n", text(w, 400)));
    }
    out.push_str(if result.applied {
        "applied\n"
    } else {
        "not applied (dry run)\n"
    });
    Ok(out)
}

pub(super) fn describe(o: &Value, effective: &Value) -> Result<String, CliError> {
    let o: Object = wire(o)?;
    let effective: EffectiveConfig = wire(effective)?;
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<16}{v}\n"));
    line("Name:", text(&o.name, 200));
    line("Kind:", o.kind.as_str().into());
    line("Id:", o.id.to_string());
    if let Some(host) = o.host_id {
        line("Host:", host.to_string());
    }
    line("Folder:", text(&o.folder, 200));
    line("Labels:", label_map(&o.labels));
    line("Version:", o.version.to_string());
    let chain: Vec<String> = effective
        .template_chain
        .iter()
        .map(|t| text(t, 80))
        .collect();
    line(
        "Templates:",
        if chain.is_empty() {
            "-".into()
        } else {
            chain.join(" → ")
        },
    );
    out.push_str("Effective spec:\n");
    let spec = serde_json::to_value(&effective.spec)
        .map_err(|e| CliError::Failed(format!("cannot show the spec: {e}")))?;
    for (k, v) in spec.as_object().into_iter().flatten() {
        if v.is_null() {
            continue;
        }
        out.push_str(&format!(
            "  {k:<20}{}\n",
            if v.is_string() {
                cell(v, 200)
            } else {
                v.to_string()
            }
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long title is cut to its column unless `wide`, which adds the alert's key, who
    /// acknowledged it and its object. (Control characters never get here: the client drops
    /// them from every answer, `http::printable`.)
    #[test]
    fn an_alert_list_cuts_long_titles_unless_wide() {
        let list = json!({"items": [{
            "id": "0190f000-0000-7000-8000-000000000001", "tenantId": uuid::Uuid::nil(),
            "ruleId": "pumps", "dedupKey": "pump/1", "status": "open", "severity": "critical",
            "openedAt": "2026-03-01T08:00:00Z", "title": format!("pump hot {}", "x".repeat(80)),
            "version": 1,
        }]});
        let narrow = alerts(&list, false).unwrap();
        let header: Vec<&str> = narrow.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["ID", "STATUS", "SEVERITY", "AGE", "TITLE"]);
        assert!(
            narrow.contains("pump hot") && narrow.contains('…'),
            "{narrow}"
        );
        let wide = alerts(&list, true).unwrap();
        assert!(
            wide.contains("DEDUP KEY") && wide.contains("ACKED BY"),
            "{wide}"
        );
        assert!(!wide.contains('…'), "whole with --wide: {wide}");
    }

    /// A list is read as the wire type the server writes: an answer of another shape is an
    /// error that says so, not a table of dashes.
    #[test]
    fn an_answer_of_another_shape_is_an_error() {
        let list = json!({"items": [{"id": "a1", "title": "no status, no key"}]});
        match alerts(&list, false) {
            Err(CliError::Transport(why)) => assert!(why.contains("another version"), "{why}"),
            other => panic!("expected a transport error, got {other:?}"),
        }
    }

    #[test]
    fn an_incident_list_shows_its_age_from_when_it_opened() {
        let list = json!({"items": [{
            "id": "0190f000-0000-7000-8000-000000000002", "tenantId": uuid::Uuid::nil(),
            "title": "Core switch down", "summary": "", "severity": "critical",
            "status": "open", "labels": {"site": "north"}, "impact": "", "ticketUrl": "",
            "alertIds": [], "createdBy": "ops", "openedAt": "2026-03-01T08:00:00Z",
            "updatedAt": "2026-03-01T08:00:00Z", "version": 1,
        }]});
        let narrow = incidents(&list, false).unwrap();
        let row = narrow.lines().nth(1).unwrap();
        assert!(
            row.contains("open") && row.contains("Core switch down"),
            "{narrow}"
        );
        assert!(!row.contains(" - "), "the age is known: {narrow}");
        assert!(incidents(&list, true).unwrap().contains("site=north"));
    }

    #[test]
    fn a_host_list_has_its_columns_and_more_when_wide() {
        let at = "2026-03-01T08:00:00Z";
        let list = json!({"items": [{
            "id": "0190f000-0000-7000-8000-000000000003", "tenantId": uuid::Uuid::nil(),
            "name": "plc", "kind": "host", "folder": "/north", "labels": {"site": "north"},
            "spec": {"address": "10.0.0.5", "checkCommand": "ping"},
            "createdAt": at, "updatedAt": at, "version": 1,
            "state": {
                "objectId": "0190f000-0000-7000-8000-000000000003", "state": 0,
                "stateType": "hard", "attempt": 1, "output": "PING OK",
                "lastCheck": at, "lastChange": at,
            },
        }]});
        let narrow = hosts(&list, false).unwrap();
        let header: Vec<&str> = narrow.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["NAME", "STATE", "ADDRESS", "LABELS", "OUTPUT"]);
        assert!(
            narrow.contains("10.0.0.5") && narrow.contains("site=north") && narrow.contains("UP"),
            "{narrow}"
        );
        let wide = hosts(&list, true).unwrap();
        let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header[5..], ["FOLDER", "CHECK", "ID"]);
        assert!(wide.contains("/north") && wide.contains("ping"));
    }
}
