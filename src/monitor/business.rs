//! Business services (SEMANTICS 8) evaluated live: each node's state from its objects (by id
//! or by selector on effective labels) and its child services, under its rule; the objects a
//! node depends on (impact); its SLA over its window from hard state changes, with planned
//! downtimes taken out when `excludeDowntimes` is set (the reference ignores it).

use super::catalog::Catalog;
use crate::auth::Principal;
use crate::events::Events;
use crate::model::availability::{availability, coverage, subtract, union_length};
use crate::model::config::{BusinessService, ConfigDoc};
use crate::model::dependency::{ParentState, Timeline, failed_spans, member_kind};
use crate::model::event::{EventFilter, EventType};
use crate::model::object::ObjectKind;
use crate::model::selector::Selector;
use crate::model::slo::{BurnState, Record};
use crate::model::state::{CheckState, service_rank as rank};
use crate::model::status::{Board, Component, ComponentStatus, HISTORY_DAYS, Maintenance};
use crate::model::suppression::Downtime;
use crate::model::{GoDuration, Timestamp};
use crate::runtime::ObjectDependencies;
use crate::runtime::clock::SharedClock;
use crate::store::{Store, StoreError};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Why a business service view was not answered.
#[derive(Debug, thiserror::Error)]
pub enum BusinessError {
    /// The tenant has no business service of that name.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Service states as numbers (OK, WARNING, CRITICAL, UNKNOWN).
const OK: u8 = 0;
const CRITICAL: u8 = 2;
const UNKNOWN: u8 = 3;
/// Nodes deeper than this (or in a `parentId` cycle) are not evaluated.
const MAX_DEPTH: usize = 32;
/// Causes a node carries up.
const MAX_CAUSES: usize = 5;
/// State changes read per object for an SLA.
const SLA_EVENTS: usize = 100_000;

/// An evaluated node (the reference's `BSNode`).
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Node {
    pub service: Value,
    pub state: u8,
    pub causes: Vec<String>,
    pub children: Vec<Node>,
}

/// `GET /business-services/{name}/sla` (the reference's `slaResponse`).
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlaReport {
    pub service: String,
    pub availability: f64,
    pub target: f64,
    pub window_days: u64,
    pub budget_total: GoDuration,
    pub budget_spent: GoDuration,
    pub budget_left: GoDuration,
    /// How fast the budget burns over each pair of windows (`burnAlerts`, default the SRE
    /// workbook's), and whether both reach the pair's rate.
    pub burn: Vec<BurnState>,
}

/// An objective's subject's record over its window (`BusinessServices::subject_down`).
pub struct SubjectDown {
    pub down: Vec<(i64, i64)>,
    pub data_from: i64,
    pub now_ms: i64,
    /// The object, when the subject is one.
    pub object: Option<Uuid>,
    /// The objects whose state changes can change the record; `None`: any of the tenant's
    /// (a service that leaves out the time its dependencies held it back).
    pub watches: Option<BTreeSet<Uuid>>,
}

struct Doc {
    doc: ConfigDoc,
    bs: BusinessService,
}

/// One tenant's business services with what evaluating them needs.
struct Forest {
    docs: Vec<Doc>,
    /// Object id → (display name, kind, effective labels).
    objects: HashMap<
        Uuid,
        (
            String,
            ObjectKind,
            std::collections::BTreeMap<String, String>,
        ),
    >,
    states: HashMap<Uuid, CheckState>,
}

impl Forest {
    /// The service called `name`.
    fn named(&self, name: &str) -> Result<&Doc, BusinessError> {
        self.docs
            .iter()
            .find(|d| d.doc.name == name)
            .ok_or(BusinessError::NotFound)
    }

    fn children(&self, parent: &Doc) -> impl Iterator<Item = &Doc> {
        let (id, name) = (parent.doc.id.to_string(), parent.doc.name.clone());
        self.docs.iter().filter(move |d| {
            d.bs.parent_id
                .as_deref()
                .is_some_and(|p| p == id || p == name)
        })
    }

    fn is_root(&self, d: &Doc) -> bool {
        match d.bs.parent_id.as_deref().filter(|p| !p.is_empty()) {
            None => true,
            Some(p) => !self
                .docs
                .iter()
                .any(|o| o.doc.id.to_string() == p || o.doc.name == p),
        }
    }

    /// The objects a node binds by itself.
    fn bound(&self, d: &Doc) -> BTreeSet<Uuid> {
        let mut out = BTreeSet::new();
        if let Some(id) = d.bs.object_id.as_deref().and_then(|s| s.parse().ok())
            && self.objects.contains_key(&id)
        {
            out.insert(id);
        }
        if let Some(sel) = d.bs.selector.as_deref().filter(|s| !s.is_empty())
            && let Ok(sel) = sel.parse::<Selector>()
        {
            for (id, (_, _, labels)) in &self.objects {
                if sel.matches(labels) {
                    out.insert(*id);
                }
            }
        }
        out
    }

    /// An object's state on the service scale: hosts DOWN is CRITICAL, UNREACHABLE UNKNOWN;
    /// never checked is UNKNOWN.
    fn object_state(&self, id: Uuid) -> u8 {
        let kind = self.objects.get(&id).map(|o| o.1);
        match (kind, self.states.get(&id).map(|s| s.state)) {
            (_, None) => UNKNOWN,
            (Some(ObjectKind::Host), Some(0)) => OK,
            (Some(ObjectKind::Host), Some(1)) => CRITICAL,
            (Some(ObjectKind::Host), Some(_)) => UNKNOWN,
            (_, Some(s)) => s.min(UNKNOWN),
        }
    }

    fn evaluate(&self, d: &Doc, depth: usize) -> Node {
        let mut inputs: Vec<(u8, f64, Vec<String>)> = self
            .bound(d)
            .into_iter()
            .map(|id| {
                let state = self.object_state(id);
                let name = self
                    .objects
                    .get(&id)
                    .map(|o| o.0.clone())
                    .unwrap_or_default();
                (
                    state,
                    1.0,
                    if state == OK { Vec::new() } else { vec![name] },
                )
            })
            .collect();
        let children: Vec<Node> = if depth < MAX_DEPTH {
            self.children(d)
                .map(|c| self.evaluate(c, depth + 1))
                .collect()
        } else {
            Vec::new()
        };
        for (child, doc) in children.iter().zip(self.children(d)) {
            let weight = doc.bs.weight.unwrap_or(1.0).max(0.0);
            inputs.push((child.state, weight, child.causes.clone()));
        }
        let state = combine(&d.bs, &inputs);
        let causes = inputs
            .iter()
            .filter(|(s, _, _)| *s != OK)
            .flat_map(|(_, _, c)| c.iter().cloned())
            .take(MAX_CAUSES)
            .collect();
        Node {
            service: d.doc.to_json(),
            state,
            causes,
            children,
        }
    }

    /// A status page component's state (none when what it names does not exist) and the
    /// objects it depends on.
    fn component(&self, c: &Component) -> (Option<u8>, BTreeSet<Uuid>) {
        if let Some(name) = &c.business_service {
            return match self.named(name).ok() {
                Some(d) => (Some(self.evaluate(d, 0).state), self.depends_on(d, 0)),
                None => (None, BTreeSet::new()),
            };
        }
        let id = c.object_id.or_else(|| {
            let name = c.object.as_deref()?;
            self.objects
                .iter()
                .find(|(_, (n, _, _))| n == name)
                .map(|(id, _)| *id)
        });
        match id.filter(|id| self.objects.contains_key(id)) {
            Some(id) => (Some(self.object_state(id)), BTreeSet::from([id])),
            None => (None, BTreeSet::new()),
        }
    }

    /// Whether downtime `dt` covers `object`: by id, or by its selector on the object's
    /// effective labels.
    fn downtime_covers(&self, dt: &Downtime, object: Uuid) -> bool {
        dt.object_id == Some(object)
            || (dt.object_id.is_none()
                && !dt.selector.is_empty()
                && self.objects.get(&object).is_some_and(|(_, _, labels)| {
                    dt.selector
                        .parse::<Selector>()
                        .is_ok_and(|s| s.matches(labels))
                }))
    }

    /// Every object a node depends on, itself or through its children.
    fn depends_on(&self, d: &Doc, depth: usize) -> BTreeSet<Uuid> {
        let mut out = self.bound(d);
        if depth < MAX_DEPTH {
            for c in self.children(d) {
                out.extend(self.depends_on(c, depth + 1));
            }
        }
        out
    }
}

/// The span a downtime was in force, in milliseconds: a started flexible one's run, else its
/// window.
fn in_force(dt: &Downtime) -> (i64, i64) {
    match (dt.started_at, dt.duration) {
        (Some(s), Some(secs)) => (s.as_millis(), s.as_millis() + secs as i64 * 1000),
        _ => (dt.start.as_millis(), dt.end.as_millis()),
    }
}

/// A node's state from its inputs (state, weight) under its rule; no inputs is UNKNOWN.
fn combine(bs: &BusinessService, inputs: &[(u8, f64, Vec<String>)]) -> u8 {
    if inputs.is_empty() {
        return UNKNOWN;
    }
    let by_rank = |pick: fn(u8, u8) -> u8| {
        inputs
            .iter()
            .map(|(s, _, _)| *s)
            .reduce(|a, b| {
                if pick(rank(a), rank(b)) == rank(a) {
                    a
                } else {
                    b
                }
            })
            .unwrap_or(UNKNOWN)
    };
    let quorum = bs.quorum_pct.unwrap_or(50.0) / 100.0;
    match bs.rule.as_str() {
        "best" | "any" => by_rank(u8::min),
        "quorum" => {
            let ok = inputs.iter().filter(|(s, _, _)| *s == OK).count() as f64;
            if ok / inputs.len() as f64 >= quorum {
                OK
            } else {
                CRITICAL
            }
        }
        "weighted" => {
            let total: f64 = inputs.iter().map(|(_, w, _)| w).sum();
            let ok: f64 = inputs
                .iter()
                .filter(|(s, _, _)| *s == OK)
                .map(|(_, w, _)| w)
                .sum();
            if total > 0.0 && ok / total >= quorum {
                OK
            } else {
                CRITICAL
            }
        }
        _ => by_rank(u8::max),
    }
}

pub struct BusinessServices {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    events: Arc<Events>,
    clock: SharedClock,
}

impl BusinessServices {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<Catalog>,
        events: Arc<Events>,
        clock: SharedClock,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            catalog,
            events,
            clock,
        })
    }

    async fn forest(&self, tenant: Uuid) -> Result<Forest, StoreError> {
        let docs = self
            .store
            .docs(tenant, "business-services", None, usize::MAX, |_| true)
            .await?
            .into_iter()
            .filter_map(|doc| {
                let bs = BusinessService::parse(&doc.body)?;
                Some(Doc { doc, bs })
            })
            .collect();
        let snapshot = self.catalog.snapshot().await?;
        let objects = snapshot
            .tenant(tenant)
            .map(|c| {
                c.entries
                    .iter()
                    .map(|e| {
                        let o = &e.object;
                        let name = match o.kind {
                            ObjectKind::Host => o.name.clone(),
                            ObjectKind::Service => format!("{}/{}", e.host.name, o.name),
                        };
                        (o.id, (name, o.kind, e.labels.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let states = self
            .store
            .all_states(tenant)
            .await?
            .covered_by_object(&*snapshot.labels_of(tenant));
        Ok(Forest {
            docs,
            objects,
            states,
        })
    }

    /// Every root service (no parent, or a parent that does not exist) evaluated with its
    /// subtree.
    pub async fn tree(&self, p: &Principal) -> Result<Vec<Node>, StoreError> {
        let f = self.forest(p.tenant).await?;
        Ok(f.docs
            .iter()
            .filter(|d| f.is_root(d))
            .map(|d| f.evaluate(d, 0))
            .collect())
    }

    /// One service evaluated with its subtree.
    pub async fn subtree(&self, p: &Principal, name: &str) -> Result<Node, BusinessError> {
        let f = self.forest(p.tenant).await?;
        let d = f.named(name)?;
        Ok(f.evaluate(d, 0))
    }

    /// The names of the services that depend on an object.
    pub async fn impact(&self, p: &Principal, object: Uuid) -> Result<Vec<String>, StoreError> {
        self.store.object(p.tenant, object).await?;
        let f = self.forest(p.tenant).await?;
        Ok(f.docs
            .iter()
            .filter(|d| f.depends_on(d, 0).contains(&object))
            .map(|d| d.doc.name.clone())
            .collect())
    }

    /// An object's spans in a hard non-OK state within `(from, to)` (milliseconds), without
    /// the time `downtimes` covering it were in force, and when its data starts (its first
    /// result, or `from`).
    async fn object_down(
        &self,
        tenant: Uuid,
        f: &Forest,
        object: Uuid,
        (from_ms, to_ms): (i64, i64),
        downtimes: &[Downtime],
    ) -> Result<(Vec<(i64, i64)>, i64), StoreError> {
        let filter = EventFilter {
            tenant_id: tenant,
            types: vec![EventType::StateChange],
            object_id: Some(object),
            from: Timestamp::from_millis(from_ms),
            ..Default::default()
        };
        let changes = self.events.ascending(filter, None, SLA_EVENTS).await?;
        let covered = coverage(&changes, f.states.get(&object), from_ms, to_ms);
        let mut spans = covered.down;
        for dt in downtimes.iter().filter(|dt| f.downtime_covers(dt, object)) {
            spans = subtract(&spans, in_force(dt));
        }
        Ok((spans, from_ms + covered.no_data_ms))
    }

    /// A service's down spans within `(from, to)` (milliseconds): the time any object it binds
    /// itself was in a hard non-OK state (WARNING and UNKNOWN count as down), minus downtimes
    /// with `excludeDowntimes` and the time a failed dependency held it back with
    /// `excludeDependencies`; and when its data starts (the first result of any object it
    /// binds).
    async fn service_down(
        &self,
        tenant: Uuid,
        f: &Forest,
        d: &Doc,
        (from_ms, to_ms): (i64, i64),
    ) -> Result<(Vec<(i64, i64)>, i64), StoreError> {
        let downtimes = if d.bs.exclude_downtimes {
            self.store.downtimes(tenant).await?
        } else {
            Vec::new()
        };
        let held_by = match d.bs.exclude_dependencies {
            true => Some(self.catalog.dependencies().await),
            false => None,
        };
        let mut down: Vec<(i64, i64)> = Vec::new();
        // The service has data from when the first of its objects had: time before is
        // neither up nor down.
        let mut data_from = to_ms;
        for object in f.bound(d) {
            let (mut spans, object_from) = self
                .object_down(tenant, f, object, (from_ms, to_ms), &downtimes)
                .await?;
            data_from = data_from.min(object_from);
            if let Some(groups) = held_by.as_ref().and_then(|of| of(tenant, object)) {
                let mut parents = HashMap::new();
                for m in groups.iter().flat_map(|g| &g.members) {
                    let filter = EventFilter {
                        tenant_id: tenant,
                        types: vec![EventType::StateChange],
                        object_id: Some(m.object),
                        from: Timestamp::from_millis(from_ms),
                        ..Default::default()
                    };
                    let kind = member_kind(&m.name);
                    let mut timeline = Timeline::default();
                    for e in self.events.ascending(filter, None, SLA_EVENTS).await? {
                        timeline.observe(kind, &e, from_ms);
                    }
                    timeline.finish(f.states.get(&m.object).map(ParentState::of), from_ms);
                    parents.insert(m.object, timeline);
                }
                let timeline = |o: Uuid| parents.get(&o).cloned();
                for held in failed_spans(&groups, &timeline, from_ms, to_ms) {
                    spans = subtract(&spans, held);
                }
            }
            down.extend(spans);
        }
        Ok((down, data_from))
    }

    /// Availability over the service's window (`service_down`), its error budget and burn.
    pub async fn sla(&self, p: &Principal, name: &str) -> Result<SlaReport, BusinessError> {
        let f = self.forest(p.tenant).await?;
        let d = f.named(name)?;
        let now = self.clock.now();
        let window = d.bs.window();
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1);
        let from_ms = now.as_millis() - window_ms;
        let (down, data_from) = self
            .service_down(p.tenant, &f, d, (from_ms, now.as_millis()))
            .await?;
        let target = d.bs.sla_target.unwrap_or(99.9);
        let burn = Record {
            down: &down,
            data_from,
            now: now.as_millis(),
            target,
        }
        .pairs(&d.bs.burn_alerts());
        let down_ms = union_length(down);
        let measured_ms = now.as_millis() - data_from;
        let availability = availability(down_ms, measured_ms);
        let total =
            Duration::from_millis((measured_ms as f64 * (1.0 - target / 100.0)).round() as u64);
        let spent = Duration::from_millis(u64::try_from(down_ms).unwrap_or(0));
        Ok(SlaReport {
            service: d.doc.name.clone(),
            availability,
            target,
            window_days: window.as_secs() / 86_400,
            budget_total: GoDuration(total),
            budget_spent: GoDuration(spent),
            budget_left: GoDuration(total.saturating_sub(spent)),
            burn,
        })
    }

    /// The object a subject names (by id or name), if it names one that exists.
    pub async fn subject_object(
        &self,
        tenant: Uuid,
        subject: &Component,
    ) -> Result<Option<Uuid>, StoreError> {
        if subject.business_service.is_some() {
            return Ok(None);
        }
        let f = self.forest(tenant).await?;
        Ok(f.component(subject).1.first().copied())
    }

    /// What an objective's subject (a business service or an object, as a status page's
    /// component names it) was down within the last `window`: its down spans (a business
    /// service's as its SLA counts them; an object's without its downtimes), when its data
    /// starts, and the object it is if it is one. `None`: what it names does not exist.
    pub async fn subject_down(
        &self,
        tenant: Uuid,
        subject: &Component,
        window: Duration,
    ) -> Result<Option<SubjectDown>, StoreError> {
        let f = self.forest(tenant).await?;
        let now_ms = self.clock.now().as_millis();
        let span = (
            now_ms - i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            now_ms,
        );
        if let Some(name) = &subject.business_service {
            let Ok(d) = f.named(name) else {
                return Ok(None);
            };
            let (down, data_from) = self.service_down(tenant, &f, d, span).await?;
            return Ok(Some(SubjectDown {
                down,
                data_from,
                now_ms,
                object: None,
                watches: (!d.bs.exclude_dependencies).then(|| f.bound(d)),
            }));
        }
        let Some(&object) = f.component(subject).1.first() else {
            return Ok(None);
        };
        let downtimes = self.store.downtimes(tenant).await?;
        let (down, data_from) = self
            .object_down(tenant, &f, object, span, &downtimes)
            .await?;
        Ok(Some(SubjectDown {
            down,
            data_from,
            now_ms,
            object: Some(object),
            watches: Some(BTreeSet::from([object])),
        }))
    }

    /// What a status page shows of `components` at now: each one's state, its availability
    /// on each of the last 90 UTC days (hard non-OK time, WARNING and UNKNOWN included, out of
    /// the time with data; planned downtimes taken out), and the maintenance running or
    /// starting within 14 days on what they bind.
    pub async fn board(&self, tenant: Uuid, components: &[Component]) -> Result<Board, StoreError> {
        const DAY_MS: i64 = 86_400_000;
        let f = self.forest(tenant).await?;
        let now = self.clock.now();
        let now_ms = now.as_millis();
        let first_day = (now_ms.div_euclid(DAY_MS) - HISTORY_DAYS as i64 + 1) * DAY_MS;
        let downtimes = self.store.downtimes(tenant).await?;
        let mut rows = Vec::new();
        let mut maintenance: Vec<Maintenance> = Vec::new();
        for c in components {
            let (state, objects) = f.component(c);
            let mut down = Vec::new();
            let mut data_from = now_ms;
            for &object in &objects {
                let (spans, from) = self
                    .object_down(tenant, &f, object, (first_day, now_ms), &downtimes)
                    .await?;
                down.extend(spans);
                data_from = data_from.min(from);
            }
            let days: Vec<Option<f64>> = (0..HISTORY_DAYS as i64)
                .map(|i| {
                    let day = (
                        first_day + i * DAY_MS,
                        (first_day + (i + 1) * DAY_MS).min(now_ms),
                    );
                    let measured = day.1 - day.0.max(data_from);
                    let in_day = down
                        .iter()
                        .map(|&(a, b)| (a.max(day.0), b.min(day.1)))
                        .filter(|(a, b)| a < b)
                        .collect();
                    (measured > 0).then(|| availability(union_length(in_day), measured))
                })
                .collect();
            let measured = now_ms - data_from.max(first_day);
            let total = (measured > 0).then(|| availability(union_length(down), measured));
            let touching: Vec<&Downtime> = downtimes
                .iter()
                .filter(|dt| objects.iter().any(|&o| f.downtime_covers(dt, o)))
                .collect();
            let in_maintenance = touching.iter().any(|dt| dt.active(now));
            for dt in touching {
                let soon = now.plus(Duration::from_secs(14 * 86_400));
                for w in dt.windows(now, 3).into_iter().filter(|w| w.start < soon) {
                    match maintenance
                        .iter_mut()
                        .find(|m| m.start == w.start && m.end == w.end && m.title == dt.comment)
                    {
                        Some(m) if !m.components.contains(&c.name) => {
                            m.components.push(c.name.clone())
                        }
                        Some(_) => {}
                        None => maintenance.push(Maintenance {
                            title: dt.comment.clone(),
                            start: w.start,
                            end: w.end,
                            components: vec![c.name.clone()],
                        }),
                    }
                }
            }
            let status = match state {
                _ if in_maintenance => "maintenance",
                Some(OK) => "operational",
                Some(1) => "degraded",
                Some(CRITICAL) => "outage",
                _ => "unknown",
            };
            rows.push(ComponentStatus {
                name: c.name.clone(),
                description: c.description.clone(),
                status,
                availability: total,
                days,
            });
        }
        maintenance.sort_by_key(|m| m.start);
        Ok(Board {
            components: rows,
            maintenance,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(rule: &str, quorum: Option<f64>) -> BusinessService {
        BusinessService {
            selector: None,
            object_id: None,
            parent_id: None,
            rule: rule.into(),
            quorum_pct: quorum,
            weight: None,
            sla_target: None,
            sla_window: None,
            exclude_downtimes: false,
            exclude_dependencies: false,
            burn_alerts: None,
        }
    }

    #[test]
    fn rules_combine_inputs() {
        let inputs = |v: &[(u8, f64)]| -> Vec<(u8, f64, Vec<String>)> {
            v.iter().map(|(s, w)| (*s, *w, Vec::new())).collect()
        };
        let mixed = inputs(&[(0, 1.0), (1, 1.0), (3, 1.0)]);
        assert_eq!(
            combine(&service("worst", None), &mixed),
            3,
            "UNKNOWN ranks over WARNING"
        );
        assert_eq!(combine(&service("best", None), &mixed), 0);
        assert_eq!(combine(&service("quorum", Some(30.0)), &mixed), 0);
        assert_eq!(combine(&service("quorum", Some(50.0)), &mixed), 2);
        let heavy = inputs(&[(0, 8.0), (2, 1.0), (2, 1.0)]);
        assert_eq!(
            combine(&service("weighted", Some(75.0)), &heavy),
            0,
            "80 % of the weight is OK"
        );
        assert_eq!(combine(&service("weighted", Some(90.0)), &heavy), 2);
        assert_eq!(
            combine(&service("worst", None), &[]),
            3,
            "no inputs: UNKNOWN"
        );
    }
}
