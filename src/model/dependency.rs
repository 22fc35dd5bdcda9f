//! Dependencies between objects (Icinga 2's `Dependency`, Centreon's "all parents down"): an
//! object's `dependsOn` names the hosts, services or label selectors it needs; while one of
//! them has failed the object keeps its own state, but its alerts do not page (and with
//! `effect: checks` its active checks pause). Members of one `redundancyGroup` fail only
//! together. A host's `parents` are one such group with `effect: notifications`.
//!
//! Evaluation is one level deep: a child looks at its parents' own states, never at theirs'
//! parents, so a loop stored before the save-time check cannot make it spin.

use super::object::ObjectKind;
use super::selector::Selector;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use uuid::Uuid;

/// One entry of a spec's `dependsOn`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DependsOn {
    /// A host (`h`) or a service (`h/s`) by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// A label selector: every object it matches (but the child itself) is a parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Entries naming the same group fail only when all their parents have failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redundancy_group: Option<String>,
    /// The parent's states that count as failed (default: a host not UP, a service CRITICAL
    /// or UNKNOWN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<Vec<String>>,
    /// Default true: a parent's soft state fails nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_soft: Option<bool>,
    /// What a failed dependency holds back (default `notifications`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// The child's alerts do not page.
    #[default]
    Notifications,
    /// The child's active checks pause.
    Checks,
    Both,
}

impl Effect {
    fn notifications(self) -> bool {
        matches!(self, Effect::Notifications | Effect::Both)
    }

    fn checks(self) -> bool {
        matches!(self, Effect::Checks | Effect::Both)
    }
}

/// What a failed dependency holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    Notifications,
    Checks,
}

/// The state number a name means for a parent of `kind` (`None`: not a state of that kind).
fn state_number(kind: ObjectKind, name: &str) -> Option<u8> {
    let name = name.trim().to_ascii_uppercase();
    match kind {
        ObjectKind::Host => ["UP", "DOWN", "UNREACHABLE"]
            .iter()
            .position(|s| *s == name),
        ObjectKind::Service => ["OK", "WARNING", "CRITICAL", "UNKNOWN"]
            .iter()
            .position(|s| *s == name),
    }
    .and_then(|n| u8::try_from(n).ok())
}

/// Checks a spec's `dependsOn` as written: each entry names an object or a selector (not
/// both), its selector parses and its states are states.
pub fn check(entries: &[DependsOn]) -> Result<(), String> {
    for (i, d) in entries.iter().enumerate() {
        let at = format!("dependsOn[{i}]");
        match (d.object.as_deref(), d.selector.as_deref()) {
            (Some(o), None) => {
                let (host, service) = split_name(o);
                if host.is_empty() || service.is_some_and(str::is_empty) {
                    return Err(format!(
                        "{at}.object: {o:?} is not `host` or `host/service`"
                    ));
                }
            }
            (None, Some(s)) => {
                let parsed: Selector = s.parse().map_err(|e| format!("{at}.selector: {e}"))?;
                if parsed.is_empty() {
                    return Err(format!("{at}.selector: an empty selector names everything"));
                }
            }
            _ => return Err(format!("{at}: name one `object` or one `selector`")),
        }
        for s in d.states.iter().flatten() {
            if state_number(ObjectKind::Host, s).is_none()
                && state_number(ObjectKind::Service, s).is_none()
            {
                return Err(format!("{at}.states: {s:?} is not a state"));
            }
        }
        if d.redundancy_group.as_deref().is_some_and(str::is_empty) {
            return Err(format!("{at}.redundancyGroup: empty"));
        }
    }
    Ok(())
}

/// `h` → (`h`, None); `h/s` → (`h`, Some(`s`)).
fn split_name(name: &str) -> (&str, Option<&str>) {
    match name.split_once('/') {
        Some((h, s)) => (h, Some(s)),
        None => (name, None),
    }
}

/// One parent as evaluation sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub object: Uuid,
    /// `h` or `h/s`.
    pub name: String,
    /// The parent's states that count as failed, a bit per state number.
    states: u8,
    ignore_soft: bool,
}

impl Member {
    fn failed(&self, state: Option<ParentState>) -> bool {
        state.is_some_and(|s| {
            (s.hard || !self.ignore_soft) && s.state < 8 && self.states & (1 << s.state) != 0
        })
    }
}

/// Parents that fail together: a redundancy group, or one parent alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub redundancy_group: Option<String>,
    pub members: Vec<Member>,
    notifications: bool,
    checks: bool,
}

impl Group {
    pub fn holds(&self, what: Holds) -> bool {
        match what {
            Holds::Notifications => self.notifications,
            Holds::Checks => self.checks,
        }
    }
}

/// A parent's live state: its number and whether it is hard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParentState {
    pub state: u8,
    pub hard: bool,
}

/// The first group holding `what` back whose every member has failed, with the member
/// reported as its cause; `None` while every such group has a member that has not.
pub fn failed<'g>(
    groups: &'g [Group],
    what: Holds,
    state: &impl Fn(Uuid) -> Option<ParentState>,
) -> Option<(&'g Group, &'g Member)> {
    groups
        .iter()
        .filter(|g| g.holds(what) && !g.members.is_empty())
        .find(|g| g.members.iter().all(|m| m.failed(state(m.object))))
        .and_then(|g| Some((g, g.members.first()?)))
}

impl ParentState {
    /// A live state as a parent's.
    pub fn of(live: &super::state::CheckState) -> Self {
        Self {
            state: live.state,
            hard: live.state_type == super::state::StateType::Hard,
        }
    }
}

/// The kind of a parent by its name: `h/s` is a service, `h` a host.
pub fn member_kind(name: &str) -> ObjectKind {
    match split_name(name).1 {
        Some(_) => ObjectKind::Service,
        None => ObjectKind::Host,
    }
}

/// A parent's states over a window, for leaving the time its children were held back out of
/// their availability (`excludeDependencies`): its state at the window's start and each
/// change, in order.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    steps: Vec<(i64, Option<ParentState>)>,
}

impl Timeline {
    /// Takes the `state_change` event `e` of a parent of `kind`, at `from` or later.
    pub fn observe(&mut self, kind: ObjectKind, e: &super::event::Event, from: i64) {
        let label = |key: &str| e.payload.get(key).and_then(serde_json::Value::as_str);
        let state = |key: &str| label(key).and_then(|l| state_number(kind, l));
        if self.steps.is_empty() {
            let before = state("from").map(|state| ParentState { state, hard: true });
            self.steps.push((from, before));
        }
        let hard = label("stateType") == Some("hard");
        let now = state("to").map(|state| ParentState { state, hard });
        self.steps.push((e.ts.as_millis().max(from), now));
    }

    /// Without a change in the window, the live state held throughout.
    pub fn finish(&mut self, live: Option<ParentState>, from: i64) {
        if self.steps.is_empty() {
            self.steps.push((from, live));
        }
    }

    fn at(&self, t: i64) -> Option<ParentState> {
        self.steps
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .and_then(|(_, s)| *s)
    }
}

/// The spans of `[from, to)` in which a group of `groups` that holds notifications back had
/// failed (as `failed` decides live), given each parent's timeline.
pub fn failed_spans(
    groups: &[Group],
    timeline: &impl Fn(Uuid) -> Option<Timeline>,
    from: i64,
    to: i64,
) -> Vec<(i64, i64)> {
    let timelines: HashMap<Uuid, Timeline> = groups
        .iter()
        .flat_map(|g| &g.members)
        .filter_map(|m| Some((m.object, timeline(m.object)?)))
        .collect();
    let mut times: Vec<i64> = timelines
        .values()
        .flat_map(|t| t.steps.iter().map(|(at, _)| *at))
        .filter(|at| (from..to).contains(at))
        .chain([from])
        .collect();
    times.sort_unstable();
    times.dedup();
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for (i, start) in times.iter().enumerate() {
        let end = times.get(i + 1).copied().unwrap_or(to);
        let state = |o: Uuid| timelines.get(&o).and_then(|t| t.at(*start));
        if failed(groups, Holds::Notifications, &state).is_none() {
            continue;
        }
        match spans.last_mut() {
            Some(last) if last.1 == *start => last.1 = end,
            _ => spans.push((*start, end)),
        }
    }
    spans
}

/// An object as dependency resolution sees it.
pub struct Node<'a> {
    pub id: Uuid,
    pub kind: ObjectKind,
    /// `h` or `h/s`.
    pub name: String,
    pub labels: &'a BTreeMap<String, String>,
    pub depends_on: &'a [DependsOn],
    pub parents: &'a [String],
}

/// Every object's dependency groups, by object id: the `dependsOn` entries resolved against
/// the objects (a name that names nothing and the object itself are left out; a selector's
/// objects are parents each on its own unless the entry names a group) and the host `parents`
/// as one group. Objects without dependencies are absent.
pub fn resolve(nodes: &[Node<'_>]) -> HashMap<Uuid, Vec<Group>> {
    let by_name: HashMap<&str, &Node<'_>> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut selectors: HashMap<&str, Option<Selector>> = HashMap::new();
    let mut out = HashMap::new();
    for node in nodes {
        let mut groups: Vec<Group> = Vec::new();
        let mut named: BTreeMap<&str, usize> = BTreeMap::new();
        for d in node.depends_on {
            let effect = d.effect.unwrap_or_default();
            let matched: Vec<&Node<'_>> = match (&d.object, &d.selector) {
                (Some(o), _) => by_name.get(o.as_str()).copied().into_iter().collect(),
                (None, Some(s)) => {
                    let selector = selectors
                        .entry(s.as_str())
                        .or_insert_with(|| s.parse().ok().filter(|s: &Selector| !s.is_empty()));
                    match selector {
                        Some(sel) => nodes.iter().filter(|n| sel.matches(n.labels)).collect(),
                        None => Vec::new(),
                    }
                }
                (None, None) => Vec::new(),
            };
            let members = matched.into_iter().filter(|p| p.id != node.id).map(|p| {
                let states = match &d.states {
                    Some(names) => names
                        .iter()
                        .filter_map(|n| state_number(p.kind, n))
                        .fold(0u8, |acc, n| acc | (1 << n)),
                    None => default_states(p.kind),
                };
                Member {
                    object: p.id,
                    name: p.name.clone(),
                    states,
                    ignore_soft: d.ignore_soft.unwrap_or(true),
                }
            });
            match d.redundancy_group.as_deref() {
                Some(group) => {
                    let at = *named.entry(group).or_insert_with(|| {
                        groups.push(Group {
                            redundancy_group: Some(group.to_string()),
                            members: Vec::new(),
                            notifications: false,
                            checks: false,
                        });
                        groups.len() - 1
                    });
                    let g = &mut groups[at];
                    g.members.extend(members);
                    g.notifications |= effect.notifications();
                    g.checks |= effect.checks();
                }
                None => groups.extend(members.map(|m| Group {
                    redundancy_group: None,
                    members: vec![m],
                    notifications: effect.notifications(),
                    checks: effect.checks(),
                })),
            }
        }
        let parents: Vec<Member> = node
            .parents
            .iter()
            .filter_map(|p| by_name.get(p.as_str()))
            .filter(|p| p.kind == ObjectKind::Host && p.id != node.id)
            .map(|p| Member {
                object: p.id,
                name: p.name.clone(),
                states: default_states(ObjectKind::Host),
                ignore_soft: true,
            })
            .collect();
        // Today's rule: a host is held back only when every parent named exists and is down.
        if !parents.is_empty() && parents.len() == node.parents.len() {
            groups.push(Group {
                redundancy_group: Some("parents".into()),
                members: parents,
                notifications: true,
                checks: false,
            });
        }
        groups.retain(|g| !g.members.is_empty());
        if !groups.is_empty() {
            out.insert(node.id, groups);
        }
    }
    out
}

/// A host parent not UP; a service parent CRITICAL or UNKNOWN.
fn default_states(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Host => (1 << 1) | (1 << 2),
        ObjectKind::Service => (1 << 2) | (1 << 3),
    }
}

/// A path of dependencies from `start` back to itself, by name (`a → b → a`), if there is one.
pub fn loop_through(start: Uuid, resolved: &HashMap<Uuid, Vec<Group>>) -> Option<String> {
    let parents_of = |id: Uuid| -> Vec<(Uuid, String)> {
        resolved
            .get(&id)
            .into_iter()
            .flatten()
            .flat_map(|g| g.members.iter().map(|m| (m.object, m.name.clone())))
            .collect()
    };
    let mut seen = HashSet::new();
    // Depth first, iteratively: each frame is an object on the path and its parents left.
    let mut path: Vec<(Uuid, String)> = Vec::new();
    let mut stack: Vec<Vec<(Uuid, String)>> = vec![parents_of(start)];
    while let Some(frame) = stack.last_mut() {
        let Some((next, name)) = frame.pop() else {
            stack.pop();
            path.pop();
            continue;
        };
        if next == start {
            let mut names: Vec<String> = Vec::with_capacity(path.len() + 2);
            let start_name = resolved
                .values()
                .flatten()
                .flat_map(|g| &g.members)
                .find(|m| m.object == start)
                .map(|m| m.name.clone())
                .unwrap_or_else(|| name.clone());
            names.push(start_name.clone());
            names.extend(path.iter().map(|(_, n)| n.clone()));
            names.push(start_name);
            return Some(names.join(" → "));
        }
        if seen.insert(next) {
            path.push((next, name));
            stack.push(parents_of(next));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    struct World {
        names: Vec<(&'static str, ObjectKind, BTreeMap<String, String>)>,
        deps: Vec<Vec<DependsOn>>,
        parents: Vec<Vec<String>>,
    }

    impl World {
        fn new(objects: &[(&'static str, &[(&str, &str)])]) -> Self {
            let names = objects
                .iter()
                .map(|(n, labels)| {
                    let kind = if n.contains('/') {
                        ObjectKind::Service
                    } else {
                        ObjectKind::Host
                    };
                    let labels = labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    (*n, kind, labels)
                })
                .collect();
            World {
                names,
                deps: vec![Vec::new(); objects.len()],
                parents: vec![Vec::new(); objects.len()],
            }
        }

        fn id(&self, name: &str) -> Uuid {
            let at = self.names.iter().position(|(n, ..)| *n == name).unwrap();
            Uuid::from_u128(at as u128 + 1)
        }

        fn resolve(&self) -> HashMap<Uuid, Vec<Group>> {
            let nodes: Vec<Node<'_>> = self
                .names
                .iter()
                .enumerate()
                .map(|(i, (name, kind, labels))| Node {
                    id: Uuid::from_u128(i as u128 + 1),
                    kind: *kind,
                    name: name.to_string(),
                    labels,
                    depends_on: &self.deps[i],
                    parents: &self.parents[i],
                })
                .collect();
            resolve(&nodes)
        }
    }

    fn on(object: &str) -> DependsOn {
        DependsOn {
            object: Some(object.into()),
            ..DependsOn::default()
        }
    }

    fn hard(state: u8) -> Option<ParentState> {
        Some(ParentState { state, hard: true })
    }

    #[test]
    fn an_entry_names_one_object_or_one_selector_and_real_states() {
        assert!(check(&[on("router"), on("router/ping")]).is_ok());
        let both = DependsOn {
            selector: Some("role=router".into()),
            ..on("router")
        };
        assert!(check(&[both]).unwrap_err().contains("dependsOn[0]"));
        assert!(check(&[DependsOn::default()]).is_err());
        let bad_state = DependsOn {
            states: Some(vec!["BROKEN".into()]),
            ..on("router")
        };
        assert!(check(&[bad_state]).unwrap_err().contains("BROKEN"));
        assert!(check(&[on("/ping")]).is_err());
    }

    /// A pump behind a redundancy group of two uplinks: the world and the pump's groups.
    fn uplinks() -> (World, Vec<Group>) {
        let mut w = World::new(&[("uplink-a", &[]), ("uplink-b", &[]), ("pump", &[])]);
        w.deps[2] = ["uplink-a", "uplink-b"]
            .map(|u| DependsOn {
                redundancy_group: Some("uplinks".into()),
                ..on(u)
            })
            .to_vec();
        let groups = w.resolve().remove(&w.id("pump")).unwrap();
        (w, groups)
    }

    /// A redundancy group of two uplinks held its child back only while both were down (hard):
    /// from the second going down to the first coming back; a soft DOWN counts for nothing.
    #[test]
    fn the_time_held_back_is_when_every_member_of_a_group_had_failed() {
        let (w, groups) = uplinks();
        let change = |at: i64, from: &str, to: &str, kind: &str| crate::model::event::Event {
            id: Uuid::nil(),
            tenant_id: Uuid::nil(),
            ts: crate::model::Timestamp::from_millis(at).unwrap(),
            kind: crate::model::event::EventType::StateChange,
            object_id: None,
            source_id: None,
            severity: None,
            payload: serde_json::json!({"from": from, "to": to, "stateType": kind}).into(),
            site: None,
        };
        let mut a = Timeline::default();
        for e in [
            change(10, "UP", "DOWN", "soft"),
            change(20, "DOWN", "DOWN", "hard"),
            change(60, "DOWN", "UP", "hard"),
        ] {
            a.observe(ObjectKind::Host, &e, 0);
        }
        let mut b = Timeline::default();
        b.observe(ObjectKind::Host, &change(40, "UP", "DOWN", "hard"), 0);
        let (ia, ib) = (w.id("uplink-a"), w.id("uplink-b"));
        let timeline = |o: Uuid| match o {
            o if o == ia => Some(a.clone()),
            o if o == ib => Some(b.clone()),
            _ => None,
        };
        assert_eq!(failed_spans(&groups, &timeline, 0, 100), [(40, 60)]);
        let mut quiet = Timeline::default();
        quiet.finish(hard(1), 0);
        let both = |_| Some(quiet.clone());
        assert_eq!(failed_spans(&groups, &both, 0, 100), [(0, 100)]);
    }

    #[test]
    fn a_redundancy_group_fails_only_when_every_member_has() {
        let (w, groups) = uplinks();
        assert_eq!(groups.len(), 1);
        let (a, b) = (w.id("uplink-a"), w.id("uplink-b"));
        let one_down = |id: Uuid| if id == a { hard(1) } else { hard(0) };
        assert!(failed(&groups, Holds::Notifications, &one_down).is_none());
        let both_down = |_| hard(1);
        let (g, m) = failed(&groups, Holds::Notifications, &both_down).unwrap();
        assert_eq!(g.redundancy_group.as_deref(), Some("uplinks"));
        assert!(m.object == a || m.object == b);
        assert!(
            failed(&groups, Holds::Checks, &both_down).is_none(),
            "notifications only by default"
        );
    }

    #[test]
    fn soft_states_and_other_states_fail_nothing_unless_asked() {
        let mut w = World::new(&[("db/disk", &[]), ("app", &[])]);
        w.deps[1] = vec![on("db/disk")];
        let groups = w.resolve().remove(&w.id("app")).unwrap();
        let soft_critical = |_| {
            Some(ParentState {
                state: 2,
                hard: false,
            })
        };
        assert!(failed(&groups, Holds::Notifications, &soft_critical).is_none());
        assert!(failed(&groups, Holds::Notifications, &|_| hard(1)).is_none());
        assert!(failed(&groups, Holds::Notifications, &|_| hard(3)).is_some());
        w.deps[1] = vec![DependsOn {
            states: Some(vec!["WARNING".into()]),
            ignore_soft: Some(false),
            effect: Some(Effect::Both),
            ..on("db/disk")
        }];
        let groups = w.resolve().remove(&w.id("app")).unwrap();
        let soft_warning = |_| {
            Some(ParentState {
                state: 1,
                hard: false,
            })
        };
        assert!(failed(&groups, Holds::Checks, &soft_warning).is_some());
        assert!(failed(&groups, Holds::Notifications, &|_| None).is_none());
    }

    #[test]
    fn a_selector_names_each_match_but_the_child_and_parents_are_one_group() {
        let mut w = World::new(&[
            ("r1", &[("role", "router")]),
            ("r2", &[("role", "router")]),
            ("edge", &[("role", "router")]),
        ]);
        w.deps[2] = vec![DependsOn {
            selector: Some("role=router".into()),
            ..DependsOn::default()
        }];
        let groups = w.resolve().remove(&w.id("edge")).unwrap();
        assert_eq!(groups.len(), 2, "each matched router but itself");
        let r1 = w.id("r1");
        let r1_down = |id: Uuid| if id == r1 { hard(1) } else { hard(0) };
        assert_eq!(
            failed(&groups, Holds::Notifications, &r1_down)
                .unwrap()
                .1
                .name,
            "r1"
        );
        w.deps[2].clear();
        w.parents[2] = vec!["r1".into(), "r2".into()];
        let groups = w.resolve().remove(&w.id("edge")).unwrap();
        assert!(failed(&groups, Holds::Notifications, &r1_down).is_none());
        assert!(failed(&groups, Holds::Notifications, &|_| hard(2)).is_some());
        w.parents[2] = vec!["r1".into(), "gone".into()];
        assert!(!w.resolve().contains_key(&w.id("edge")));
    }

    #[test]
    fn a_loop_is_named_from_the_object_saved() {
        let mut w = World::new(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[])]);
        w.deps[0] = vec![on("b")];
        w.deps[1] = vec![on("c")];
        w.deps[3] = vec![on("a")];
        assert_eq!(loop_through(w.id("a"), &w.resolve()), None);
        w.deps[2] = vec![on("a")];
        assert_eq!(
            loop_through(w.id("a"), &w.resolve()).as_deref(),
            Some("a → b → c → a")
        );
        assert_eq!(
            loop_through(w.id("d"), &w.resolve()),
            None,
            "d only leads in"
        );
    }
}
