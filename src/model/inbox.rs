//! The operator's inbox (issue 71): the problems of objects and the open alerts no problem
//! stands for (from events: webhooks, traps, e-mail, SMS), as one list a person works
//! through; narrowed by text, severity, labels and age, sorted and grouped.

use super::Timestamp;
use super::alert::{Alert, AlertStatus};
use super::event::Severity;
use super::object::ObjectView;
use super::selector::Selector;
use super::state::{Problem, badness, label};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use uuid::Uuid;

/// One line of the inbox.
#[derive(Clone, Debug)]
pub struct Entry {
    pub subject: Subject,
    /// A silence holds its alert.
    pub silenced: bool,
}

/// What a line of the inbox stands for.
#[derive(Clone, Debug)]
pub enum Subject {
    /// An object's problem, with the object's open (else acknowledged) alert.
    Problem(Box<Problem>, Option<Box<Alert>>),
    /// An alert no problem stands for.
    Alert(Box<Alert>),
}

/// How bad an entry is, worst first: critical, unknown (a service's UNKNOWN, a host's
/// UNREACHABLE), warning, info.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
    Warning,
    Unknown,
    Critical,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Critical, Level::Unknown, Level::Warning, Level::Info];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Critical => "critical",
            Level::Unknown => "unknown",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// An alert's severity as a level.
    pub fn of(severity: Severity) -> Level {
        match severity {
            Severity::Critical => Level::Critical,
            Severity::Warning => Level::Warning,
            Severity::Info | Severity::Ok => Level::Info,
        }
    }
}

/// Someone has the alert in hand: acknowledged, shelved, held back by a failed dependency,
/// or snoozed.
fn alert_handled(a: &Alert, now: Timestamp) -> bool {
    a.status == AlertStatus::Acked
        || a.shelved.is_some()
        || a.suppressed_by.is_some()
        || a.snoozed_until.is_some_and(|u| u > now)
}

/// The host an alert names: its `host` or `instance` label.
fn alert_host(a: &Alert) -> Option<String> {
    a.labels.get("host").or(a.labels.get("instance")).cloned()
}

impl Entry {
    pub fn problem(&self) -> Option<&Problem> {
        match &self.subject {
            Subject::Problem(p, _) => Some(p),
            Subject::Alert(_) => None,
        }
    }

    /// The problem object's alert, or the alert this entry is.
    pub fn alert(&self) -> Option<&Alert> {
        match &self.subject {
            Subject::Problem(_, a) => a.as_deref(),
            Subject::Alert(a) => Some(a),
        }
    }

    /// Someone has it in hand: acknowledged, in downtime, silenced, shelved, snoozed, or held
    /// back by a failed dependency.
    pub fn handled(&self, now: Timestamp) -> bool {
        let object = self
            .problem()
            .is_some_and(|p| p.state.acked_by.is_some() || p.state.downtime_depth > 0);
        let alert = self.alert().is_some_and(|a| alert_handled(a, now));
        object || alert || self.silenced
    }

    pub fn level(&self) -> Level {
        match &self.subject {
            Subject::Problem(p, _) => match badness(p.object.kind, p.state.state) {
                3 => Level::Critical,
                2 => Level::Unknown,
                _ => Level::Warning,
            },
            Subject::Alert(a) => Level::of(a.severity),
        }
    }

    /// Since when it stands: the object's hard change, or when the alert opened.
    pub fn since(&self) -> Timestamp {
        match &self.subject {
            Subject::Problem(p, _) => p.state.last_hard_change.unwrap_or(p.state.last_change),
            Subject::Alert(a) => a.opened_at,
        }
    }

    /// `host / service`, a host's name, or the alert's title.
    pub fn name(&self) -> String {
        match &self.subject {
            Subject::Problem(p, _) => p.object.full_name(p.host_name.as_deref()),
            Subject::Alert(a) => a.title.clone(),
        }
    }

    /// The alert's labels, then the object's effective ones over them.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        if let Some(a) = self.alert() {
            labels.extend(a.labels.clone());
        }
        if let Some(p) = self.problem() {
            labels.extend(p.labels.clone());
        }
        labels
    }

    /// The host it is on: the object's host (or itself), an alert's `host` or `instance`
    /// label.
    pub fn host(&self) -> Option<String> {
        match &self.subject {
            Subject::Problem(p, _) => Some(p.host_name.clone().unwrap_or(p.object.name.clone())),
            Subject::Alert(a) => alert_host(a),
        }
    }

    /// The words a search looks in: name, output, alert title, labels as `key=value`.
    fn text(&self) -> String {
        let mut words = vec![self.name()];
        if let Some(p) = self.problem() {
            words.push(p.state.output.clone());
        }
        if let Some(a) = self.alert() {
            words.push(a.title.clone());
        }
        words.extend(self.labels().iter().map(|(k, v)| format!("{k}={v}")));
        words.join("\n").to_lowercase()
    }
}

/// The inbox's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    /// Unhandled first, worst first, then the longest-standing.
    #[default]
    Severity,
    Newest,
    Oldest,
    Name,
}

impl Sort {
    pub const ALL: [Sort; 4] = [Sort::Severity, Sort::Newest, Sort::Oldest, Sort::Name];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Severity => "severity",
            Sort::Newest => "newest",
            Sort::Oldest => "oldest",
            Sort::Name => "name",
        }
    }

    pub fn parse(s: &str) -> Option<Sort> {
        Sort::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// What the inbox is grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Host,
    Site,
    Severity,
}

impl Group {
    pub const ALL: [Group; 3] = [Group::Host, Group::Site, Group::Severity];

    pub fn as_str(self) -> &'static str {
        match self {
            Group::Host => "host",
            Group::Site => "site",
            Group::Severity => "severity",
        }
    }

    pub fn parse(s: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The group a line belongs to, by name (`no site` where it has none).
    pub fn of(self, e: &impl Listed) -> String {
        match self {
            Group::Host => e.host().unwrap_or_else(|| "no host".into()),
            Group::Site => e
                .labels()
                .get("site")
                .cloned()
                .unwrap_or_else(|| "no site".into()),
            Group::Severity => e.severity(),
        }
    }
}

/// How old an entry is: started within a time, or standing for at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Age {
    Within(Duration),
    Over(Duration),
}

/// What narrows the inbox, and its order.
#[derive(Clone, Debug, Default)]
pub struct Narrowing {
    /// Looked for, lowercase, in the name, output, title and labels.
    pub text: String,
    pub levels: Vec<Level>,
    pub selector: Selector,
    pub age: Option<Age>,
    /// Handled entries too.
    pub handled: bool,
    pub sort: Sort,
}

impl Narrowing {
    fn keeps(&self, e: &Entry, now: Timestamp) -> bool {
        let age_ms = u128::try_from(now.as_millis() - e.since().as_millis()).unwrap_or(0);
        (self.handled || !e.handled(now))
            && (self.text.is_empty() || e.text().contains(&self.text))
            && (self.levels.is_empty() || self.levels.contains(&e.level()))
            && self.selector.matches(&e.labels())
            && match self.age {
                None => true,
                Some(Age::Within(d)) => age_ms <= d.as_millis(),
                Some(Age::Over(d)) => age_ms >= d.as_millis(),
            }
    }
}

/// The inbox: one entry for each problem (with its object's open alert) and one for each
/// open or acknowledged alert that no problem stands for. `alerts` are the tenant's open
/// and acknowledged ones; `silenced` the ids a silence holds.
pub fn entries(problems: Vec<Problem>, alerts: Vec<Alert>, silenced: &HashSet<Uuid>) -> Vec<Entry> {
    let mut by_object: BTreeMap<Uuid, Alert> = BTreeMap::new();
    let mut own = Vec::new();
    let objects: HashSet<Uuid> = problems.iter().map(|p| p.object.id).collect();
    for a in alerts {
        match a.object_id.filter(|o| objects.contains(o)) {
            // An object's open alert stands before an acknowledged one.
            Some(o) => {
                let first = by_object
                    .get(&o)
                    .is_none_or(|b| b.status != AlertStatus::Open);
                if first {
                    by_object.insert(o, a);
                }
            }
            None => own.push(a),
        }
    }
    let mut out: Vec<Entry> = problems
        .into_iter()
        .map(|p| {
            let alert = by_object.remove(&p.object.id);
            Entry {
                silenced: alert.as_ref().is_some_and(|a| silenced.contains(&a.id)),
                subject: Subject::Problem(Box::new(p), alert.map(Box::new)),
            }
        })
        .collect();
    out.extend(own.into_iter().map(|a| Entry {
        silenced: silenced.contains(&a.id),
        subject: Subject::Alert(Box::new(a)),
    }));
    out
}

/// How many entries need a person: those not handled.
pub fn unhandled(entries: &[Entry], now: Timestamp) -> usize {
    entries.iter().filter(|e| !e.handled(now)).count()
}

/// The entries `n` keeps, in its order.
pub fn narrowed(entries: Vec<Entry>, n: &Narrowing, now: Timestamp) -> Vec<Entry> {
    let mut out: Vec<Entry> = entries.into_iter().filter(|e| n.keeps(e, now)).collect();
    sort(&mut out, n.sort, now);
    out
}

/// What a list's order and groups read of its lines: the inbox's entries, the alerts list's
/// alerts and the objects list's objects are sorted and grouped the same way.
pub trait Listed {
    /// How bad it is: worse is greater, 0 is fine.
    fn badness(&self) -> u8;
    /// Someone has it in hand.
    fn handled(&self, now: Timestamp) -> bool;
    /// Since when it stands as it is.
    fn since(&self) -> Timestamp;
    fn name(&self) -> String;
    /// The host it is on, if any.
    fn host(&self) -> Option<String>;
    fn labels(&self) -> BTreeMap<String, String>;
    /// Its group under `Group::Severity`: a severity, or an object's state.
    fn severity(&self) -> String;
}

impl Listed for Entry {
    fn badness(&self) -> u8 {
        self.level() as u8
    }
    fn handled(&self, now: Timestamp) -> bool {
        Entry::handled(self, now)
    }
    fn since(&self) -> Timestamp {
        Entry::since(self)
    }
    fn name(&self) -> String {
        Entry::name(self)
    }
    fn host(&self) -> Option<String> {
        Entry::host(self)
    }
    fn labels(&self) -> BTreeMap<String, String> {
        Entry::labels(self)
    }
    fn severity(&self) -> String {
        self.level().as_str().into()
    }
}

impl Listed for Alert {
    fn badness(&self) -> u8 {
        Level::of(self.severity) as u8
    }
    /// A silence is not known here: the alerts list reads alerts alone.
    fn handled(&self, now: Timestamp) -> bool {
        alert_handled(self, now)
    }
    fn since(&self) -> Timestamp {
        self.opened_at
    }
    fn name(&self) -> String {
        self.title.clone()
    }
    fn host(&self) -> Option<String> {
        alert_host(self)
    }
    fn labels(&self) -> BTreeMap<String, String> {
        self.labels.clone()
    }
    fn severity(&self) -> String {
        Level::of(self.severity).as_str().into()
    }
}

/// A line of the objects list: the object with its effective labels (its templates', its
/// host's, its own), which its groups by label read.
pub struct ListedObject {
    pub view: ObjectView,
    pub labels: BTreeMap<String, String>,
}

impl Listed for ListedObject {
    fn badness(&self) -> u8 {
        let v = &self.view;
        v.state
            .as_ref()
            .map_or(0, |s| badness(v.object.kind, s.state))
    }
    fn handled(&self, _now: Timestamp) -> bool {
        self.view
            .state
            .as_ref()
            .is_some_and(|s| s.acked_by.is_some() || s.downtime_depth > 0)
    }
    fn since(&self) -> Timestamp {
        let v = &self.view;
        v.state.as_ref().map_or(v.object.created_at, |s| {
            s.last_hard_change.unwrap_or(s.last_change)
        })
    }
    fn name(&self) -> String {
        self.view.object.full_name(self.view.host_name.as_deref())
    }
    fn host(&self) -> Option<String> {
        let v = &self.view;
        Some(v.host_name.clone().unwrap_or(v.object.name.clone()))
    }
    fn labels(&self) -> BTreeMap<String, String> {
        self.labels.clone()
    }
    fn severity(&self) -> String {
        let v = &self.view;
        label(v.object.kind, v.state.as_ref().map(|s| s.state)).into()
    }
}

/// Sorts `items` in `order`.
pub fn sort<T: Listed>(items: &mut [T], order: Sort, now: Timestamp) {
    match order {
        Sort::Severity => items.sort_by_key(|e| {
            (
                e.handled(now),
                std::cmp::Reverse(e.badness()),
                e.since(),
                e.name(),
            )
        }),
        Sort::Newest => items.sort_by_key(|e| (std::cmp::Reverse(e.since()), e.name())),
        Sort::Oldest => items.sort_by_key(|e| (e.since(), e.name())),
        Sort::Name => items.sort_by_key(|e| (e.name().to_lowercase(), e.since())),
    }
}

/// Consecutive runs of `items` by `group`, each group where its first item stands (so the
/// order's first items lead), items in order within it.
pub fn grouped<T: Listed>(items: Vec<T>, group: Group) -> Vec<(String, Vec<T>)> {
    let mut groups: Vec<(String, Vec<T>)> = Vec::new();
    for e in items {
        let key = group.of(&e);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(e),
            None => groups.push((key, vec![e])),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn problem(id: u128, host: Option<&str>, name: &str, state: u8, since: &str) -> Problem {
        let kind = if host.is_some() { "service" } else { "host" };
        serde_json::from_value(json!({
            "object": {"id": Uuid::from_u128(id), "tenantId": Uuid::nil(), "kind": kind,
                "name": name, "folder": "/", "spec": {}, "createdAt": since, "updatedAt": since,
                "version": 1},
            "labels": {"site": if id.is_multiple_of(2) { "north" } else { "south" }},
            "hostName": host,
            "state": {"objectId": Uuid::from_u128(id), "state": state, "stateType": "hard",
                "attempt": 1, "output": format!("{name} output"), "lastCheck": since,
                "lastChange": since, "lastHardChange": since},
        }))
        .unwrap()
    }

    fn alert(id: u128, object: Option<u128>, severity: &str, title: &str, opened: &str) -> Alert {
        serde_json::from_value(json!({
            "id": Uuid::from_u128(id), "tenantId": Uuid::nil(), "ruleId": "r", "dedupKey": title,
            "status": "open", "severity": severity, "title": title,
            "objectId": object.map(Uuid::from_u128), "labels": {"source": "scada"},
            "openedAt": opened,
        }))
        .unwrap()
    }

    /// Event alerts stand in the inbox beside the problems, an object's alert on its
    /// problem's line; the count and the order take both; handled ones leave by default.
    #[test]
    fn alerts_from_events_stand_with_the_problems() {
        let now = at("2026-03-01T12:00:00Z");
        let problems = vec![
            problem(1, Some("plc"), "modbus", 1, "2026-03-01T10:00:00Z"),
            problem(2, None, "router", 1, "2026-03-01T11:00:00Z"),
        ];
        let pump = alert(
            10,
            None,
            "critical",
            "pump station 3 pressure",
            "2026-03-01T11:30:00Z",
        );
        let mut on_router = alert(
            11,
            Some(2),
            "critical",
            "router is DOWN",
            "2026-03-01T11:00:00Z",
        );
        on_router.status = AlertStatus::Open;
        let info = alert(12, None, "info", "door opened", "2026-03-01T11:59:00Z");
        let mut shelved = alert(13, None, "warning", "chatty valve", "2026-03-01T09:00:00Z");
        shelved.shelved = Some(
            serde_json::from_value(json!({"mode": "oneShot", "reason": "chatters",
                "by": "ada", "at": "2026-03-01T09:00:00Z"}))
            .unwrap(),
        );
        let all = entries(
            problems,
            vec![pump, on_router, info, shelved],
            &HashSet::new(),
        );
        assert_eq!(all.len(), 5, "two problems, three alerts of their own");
        assert_eq!(unhandled(&all, now), 4);
        let names: Vec<String> = narrowed(all.clone(), &Narrowing::default(), now)
            .iter()
            .map(Entry::name)
            .collect();
        assert_eq!(
            names,
            [
                "router",
                "pump station 3 pressure",
                "plc / modbus",
                "door opened"
            ]
        );
        let router = all.iter().find(|e| e.name() == "router").unwrap();
        assert_eq!(router.alert().unwrap().id, Uuid::from_u128(11));

        let only = |n: Narrowing| -> Vec<String> {
            narrowed(all.clone(), &n, now)
                .iter()
                .map(Entry::name)
                .collect()
        };
        let text = Narrowing {
            text: "pressure".into(),
            ..Default::default()
        };
        assert_eq!(only(text), ["pump station 3 pressure"]);
        let by_label = Narrowing {
            text: "source=scada".into(),
            levels: vec![Level::Info],
            ..Default::default()
        };
        assert_eq!(only(by_label), ["door opened"]);
        let site = Narrowing {
            selector: "site=north".parse().unwrap(),
            ..Default::default()
        };
        assert_eq!(only(site), ["router"]);
        let recent = Narrowing {
            age: Some(Age::Within(Duration::from_secs(3600))),
            sort: Sort::Newest,
            ..Default::default()
        };
        assert_eq!(
            only(recent),
            ["door opened", "pump station 3 pressure", "router"]
        );
        let handled_too = Narrowing {
            handled: true,
            age: Some(Age::Over(Duration::from_secs(2 * 3600))),
            sort: Sort::Name,
            ..Default::default()
        };
        assert_eq!(only(handled_too), ["chatty valve", "plc / modbus"]);

        let groups = grouped(narrowed(all, &Narrowing::default(), now), Group::Severity);
        let keys: Vec<&str> = groups.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["critical", "warning", "info"]);
        assert_eq!(groups[0].1.len(), 2);
    }
}
