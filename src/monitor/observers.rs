//! Objects at the main whose state is the verdict of several sites (`spec.observers`,
//! `model::observers`). The votes are the sites' mirrors of their own object of the same name
//! and their staleness; the verdict is submitted as the object's passive result, so the
//! main's rules, alerts and history treat it as any other state.
//!
//! What is counted again: an object whose observer forwarded a state change (from the bus,
//! which a main of several processes relays), every observed object when the catalog changes,
//! a site goes stale or comes back, or the bus dropped deliveries, and an object whose hold
//! runs out. The verdict is a function of what is stored, so counting everything again at
//! start makes up for any wake missed before.

use super::catalog::{Catalog, Entry, Snapshot};
use super::pipeline::Pipeline;
use super::results::Job;
use crate::auth::Principal;
use crate::events::Events;
use crate::events::bus::{Delivery, Subscription};
use crate::model::Timestamp;
use crate::model::config::SiteBody;
use crate::model::event::{Event, EventType};
use crate::model::mirror::{Mirror, MirrorKind};
use crate::model::object::ObjectKind;
use crate::model::observers::{Outcome, Report, Seen, Verdict, verdict};
use crate::model::state::StateType;
use crate::runtime::clock::SharedClock;
use crate::runtime::recount::{Marks, Recount};
use crate::runtime::worker::StepFuture;
use crate::runtime::{Wait, Worker};
use crate::store::{Store, StoreError};
use futures_util::FutureExt;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Deliveries a counter may fall behind by before it counts everything again.
const BUFFER: usize = 1024;
/// The longest a counter sleeps with no hold running out.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// The verdicts of observed objects.
pub struct Votes {
    store: Arc<Store>,
    catalog: Arc<Catalog>,
    clock: SharedClock,
    recount: Arc<Recount>,
}

/// One tenant's observer sites: name, labels with `site`, and since when it is stale.
type SiteRows = Vec<(String, BTreeMap<String, String>, Option<Timestamp>)>;

impl Votes {
    pub fn new(store: Arc<Store>, catalog: Arc<Catalog>, clock: SharedClock) -> Arc<Self> {
        Arc::new(Self {
            store,
            catalog,
            clock,
            recount: Arc::new(Recount::everything_at_start()),
        })
    }

    pub fn recount(&self) -> Arc<Recount> {
        self.recount.clone()
    }

    /// `GET /objects/{id}/observers`: who sees what of object `id`, and the verdict; `None`
    /// when the tenant has no such object with observers.
    pub async fn verdict(&self, p: &Principal, id: Uuid) -> Result<Option<Verdict>, StoreError> {
        let snapshot = self.catalog.snapshot().await?;
        let Some(entry) = snapshot
            .tenant(p.tenant)
            .and_then(|c| c.get(id))
            .filter(|e| e.spec.observers.is_some())
        else {
            return Ok(None);
        };
        let mut verdicts = self.tally(p.tenant, vec![entry.clone()]).await?;
        Ok(verdicts.pop().map(|(_, v)| v))
    }

    /// The verdicts of `entries` (of `tenant`) as the stored mirrors and statuses stand; an
    /// entry whose observers no longer parse is left out.
    async fn tally(
        &self,
        tenant: Uuid,
        entries: Vec<Arc<Entry>>,
    ) -> Result<Vec<(Arc<Entry>, Verdict)>, StoreError> {
        let now = self.clock.now();
        let stale: HashMap<String, Option<Timestamp>> = self
            .store
            .site_statuses(tenant)
            .await?
            .into_iter()
            .map(|s| (s.name, s.stale_since))
            .collect();
        let sites: SiteRows = self
            .store
            .docs(tenant, "sites", None, usize::MAX, |_| true)
            .await?
            .into_iter()
            .filter_map(|doc| {
                let site = SiteBody::parse(&doc.body);
                let mut labels = site.labels;
                labels.insert("site".into(), doc.name.clone());
                let since = stale.get(&doc.name).copied().flatten();
                (!site.disabled).then_some((doc.name, labels, since))
            })
            .collect();
        let mut mirrors: HashMap<String, Vec<Mirror>> = HashMap::new();
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Some(observers) = entry.spec.observers.clone() else {
                continue;
            };
            let Ok(selector) = observers.check() else {
                continue;
            };
            let mut seen = Vec::new();
            for (name, _, stale_since) in sites.iter().filter(|(_, l, _)| selector.matches(l)) {
                if !mirrors.contains_key(name) {
                    let read = self
                        .store
                        .site_mirrors(tenant, MirrorKind::Object, Some(name.clone()))
                        .await?;
                    mirrors.insert(name.clone(), read);
                }
                seen.push(Seen {
                    site: name.clone(),
                    stale_since: *stale_since,
                    report: mirrors[name].iter().find_map(|m| report_of(m, &entry)),
                });
            }
            out.push((entry, verdict(&observers, seen, now)));
        }
        Ok(out)
    }

    /// The observed objects `marks` names, per tenant, in `snapshot`.
    fn marked(&self, snapshot: &Snapshot, marks: Marks) -> BTreeMap<Uuid, Vec<Arc<Entry>>> {
        let mut out: BTreeMap<Uuid, Vec<Arc<Entry>>> = BTreeMap::new();
        if marks.all {
            for (tenant, c) in snapshot.tenants() {
                let observed = c.entries.iter().filter(|e| e.spec.observers.is_some());
                out.entry(*tenant).or_default().extend(observed.cloned());
            }
            return out;
        }
        for (tenant, id) in marks.objects {
            if let Some(e) = snapshot.tenant(tenant).and_then(|c| c.get(id)) {
                out.entry(tenant).or_default().push(e.clone());
            }
        }
        out
    }
}

/// What observer mirror `m` reports of `entry`: the site's object of the same kind and name
/// (and host, for a service).
fn report_of(m: &Mirror, entry: &Entry) -> Option<Report> {
    let Mirror::Object {
        view,
        failing_since,
        ..
    } = m
    else {
        return None;
    };
    let o = &view.object;
    let same = o.kind == entry.object.kind
        && o.name == entry.object.name
        && (o.kind == ObjectKind::Host || view.host_name.as_deref() == Some(&entry.host.name));
    let state = view.state.as_ref().filter(|_| same)?;
    Some(Report {
        state: state.state,
        hard: state.state_type == StateType::Hard,
        output: state.output.clone(),
        failing_since: *failing_since,
        last_change: state.last_change,
    })
}

/// The observed object a forwarded state change is of, by its names.
fn observed_by(snapshot: &Snapshot, e: &Event) -> Option<Uuid> {
    if e.site.is_none() || e.kind != EventType::StateChange {
        return None;
    }
    let text = |k: &str| e.payload.get(k).and_then(Value::as_str);
    let name = text("object")?;
    let catalog = snapshot.tenant(e.tenant_id)?;
    let entry = match text("kind") {
        Some("host") => catalog.by_name(name, None),
        _ => catalog.by_name(text("host")?, Some(name)),
    }?;
    entry.spec.observers.is_some().then_some(entry.object.id)
}

/// Counts the votes of observed objects as they change and submits each verdict that moves
/// an object's state as its result; led (one process of several counts).
pub struct VoteCounter {
    votes: Arc<Votes>,
    pipeline: Arc<Pipeline>,
    deliveries: Subscription,
    /// When each waiting object's hold runs out.
    holds: BTreeMap<(Uuid, Uuid), Timestamp>,
    generation: Option<u64>,
}

impl VoteCounter {
    pub fn new(votes: Arc<Votes>, pipeline: Arc<Pipeline>, events: &Events) -> Self {
        Self {
            votes,
            pipeline,
            deliveries: events.subscribe("observers", BUFFER),
            holds: BTreeMap::new(),
            generation: None,
        }
    }

    /// Counts what is marked or whose hold ran out.
    async fn count(&mut self) -> Result<(), StoreError> {
        let snapshot = self.votes.catalog.snapshot().await?;
        let mut marks = self.votes.recount.take();
        if self.generation != Some(snapshot.generation()) {
            self.generation = Some(snapshot.generation());
            marks.all = true;
        }
        let now = self.votes.clock.now();
        let ran_out: Vec<(Uuid, Uuid)> = self
            .holds
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| *k)
            .collect();
        marks.objects.extend(ran_out);
        if marks.all {
            self.holds.clear();
        }
        for (tenant, entries) in self.votes.marked(&snapshot, marks) {
            let counted = self.votes.tally(tenant, entries).await?;
            let ids: Vec<Uuid> = counted.iter().map(|(e, _)| e.object.id).collect();
            let states = self.votes.store.states(tenant, ids).await?.states;
            let mut jobs = Vec::new();
            for (entry, v) in counted {
                let key = (tenant, entry.object.id);
                match v.down_at {
                    Some(at) => self.holds.insert(key, at),
                    None => self.holds.remove(&key),
                };
                let outcome = v.outcome();
                if outcome == Outcome::Keep {
                    continue;
                }
                let state = Verdict::state(entry.object.kind, outcome);
                let job = Job::new(entry.clone(), state, &v.output(), 1);
                let unchanged = states.iter().any(|s| {
                    s.object_id == entry.object.id
                        && s.state == state
                        && s.output == job.obs.output
                        && s.long_output == job.obs.long_output
                });
                if !unchanged {
                    jobs.push(job);
                }
            }
            if !jobs.is_empty()
                && let Err(e) = self.pipeline.submit(jobs).await
            {
                tracing::warn!(error = %e, "observer verdicts not submitted");
                self.votes.recount.everything();
            }
        }
        Ok(())
    }

    /// Marks what a delivery changes.
    async fn mark(&self, delivery: Delivery) -> Result<(), StoreError> {
        match delivery {
            Delivery::Resync => self.votes.recount.everything(),
            Delivery::Event(e) => {
                if e.site.is_some() && e.kind == EventType::StateChange {
                    let snapshot = self.votes.catalog.snapshot().await?;
                    if let Some(id) = observed_by(&snapshot, &e) {
                        self.votes.recount.object(e.tenant_id, id);
                    }
                }
            }
        }
        Ok(())
    }
}

impl Worker for VoteCounter {
    fn name(&self) -> &'static str {
        "observer-votes"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            if let Err(e) = self.count().await {
                tracing::warn!(error = %e, "observer votes not counted");
                self.votes.recount.everything();
                return Wait::For(Duration::from_secs(5));
            }
            let now = self.votes.clock.now();
            let sleep = self
                .holds
                .values()
                .min()
                .map_or(MAX_SLEEP, |at| at.since(now).min(MAX_SLEEP));
            let recount = self.votes.recount.clone();
            let moved = crate::runtime::clock::moved();
            tokio::select! {
                d = self.deliveries.recv() => {
                    let Some(mut d) = d else {
                        return Wait::Done;
                    };
                    // What else arrived meanwhile is marked before one count.
                    loop {
                        if let Err(e) = self.mark(d).await {
                            tracing::warn!(error = %e, "observer vote not marked");
                            recount.everything();
                        }
                        match self.deliveries.recv().now_or_never() {
                            Some(Some(next)) => d = next,
                            _ => break,
                        }
                    }
                }
                _ = recount.woken() => {}
                _ = moved.notified() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
            Wait::For(Duration::ZERO)
        })
    }
}
