//! Service-level objectives (`slos` documents, issue 74): an objective's indicator (its
//! subject's availability, or the ratio of two of an object's counters), its error budget and
//! how fast that burns, and the watcher that holds one alert for each pair that fires.

use super::business::{BusinessError, BusinessServices};
use crate::auth::Principal;
use crate::events::{Delivery, Events, Subscription};
use crate::model::Timestamp;
use crate::model::alert::ManualAlarm;
use crate::model::availability::{availability, union_length};
use crate::model::config::ConfigDoc;
use crate::model::event::EventType;
use crate::model::metric::{DAY_MS, Tier};
use crate::model::slo::{
    BurnAlert, BurnState, Record, SloBody, SloStatus, evaluate, increase, ratio_burn,
};
use crate::model::status::Component;
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{AlertActions, HeldAlert};
use crate::store::metrics::MetricsStore;
use crate::store::{Store, StoreError, blocking};
use futures_util::FutureExt;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How often an objective on counters is evaluated: new samples wake nothing, so it is
/// looked at as a rule engine looks at a ratio of rates (Prometheus's default interval).
const METRIC_EVERY: Duration = Duration::from_secs(60);

/// An objective as measured now.
struct Measured {
    sli: Option<f64>,
    burn: Vec<BurnState>,
    /// The longest time nothing can change without a wake.
    next: Option<Duration>,
    /// The object the alerts are on, when the subject is one.
    object: Option<Uuid>,
    /// The objects whose state changes can change it (`None`: any of its tenant's).
    watches: Option<BTreeSet<Uuid>>,
}

pub struct Slos {
    store: Arc<Store>,
    business: Arc<BusinessServices>,
    metrics: Arc<MetricsStore>,
    clock: SharedClock,
}

impl Slos {
    pub fn new(
        store: Arc<Store>,
        business: Arc<BusinessServices>,
        metrics: Arc<MetricsStore>,
        clock: SharedClock,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            business,
            metrics,
            clock,
        })
    }

    /// The objective `name` of the caller's tenant: its indicator over its window, budget and
    /// burn.
    pub async fn status(&self, p: &Principal, name: &str) -> Result<SloStatus, BusinessError> {
        let doc = match self
            .store
            .doc(p.tenant, "slos", name.to_string(), false)
            .await
        {
            Err(StoreError::NotFound) => return Err(BusinessError::NotFound),
            other => other?,
        };
        self.status_of(p.tenant, doc)
            .await?
            .ok_or(BusinessError::NotFound)
    }

    /// Every objective of the caller's tenant with its status, by name.
    pub async fn list(&self, p: &Principal) -> Result<Vec<SloStatus>, BusinessError> {
        let docs = self
            .store
            .docs(p.tenant, "slos", None, usize::MAX, |_| true)
            .await?;
        let mut out = Vec::with_capacity(docs.len());
        for doc in docs {
            out.extend(self.status_of(p.tenant, doc).await?);
        }
        Ok(out)
    }

    /// A stored objective's status (`None`: a body this build cannot read).
    async fn status_of(
        &self,
        tenant: Uuid,
        doc: ConfigDoc,
    ) -> Result<Option<SloStatus>, StoreError> {
        let Ok(body) = serde_json::from_str::<SloBody>(&doc.body) else {
            return Ok(None);
        };
        let measured = self.measure(tenant, &body, true).await?;
        let allowed = 1.0 - body.target / 100.0;
        let sli = measured.as_ref().and_then(|m| m.sli);
        let spent = sli.map(|s| round((1.0 - s / 100.0) / allowed));
        Ok(Some(SloStatus {
            name: doc.name,
            target: body.target,
            window: body.window.clone().unwrap_or_else(|| "30d".into()),
            source: if body.metric.is_some() {
                "metric"
            } else {
                "availability"
            },
            sli: sli.map(round),
            budget_spent: spent,
            budget_left: spent.map(|s| round(1.0 - s)),
            burn: measured.map_or_else(|| evaluate(&body.burn_alerts(), |_| 0.0), |m| m.burn),
        }))
    }

    /// The objective measured now: over its whole window with `whole` (the indicator), else
    /// over its pairs' longest window only. `None`: its subject does not exist.
    async fn measure(
        &self,
        tenant: Uuid,
        body: &SloBody,
        whole: bool,
    ) -> Result<Option<Measured>, StoreError> {
        let pairs = body.burn_alerts();
        let longest = pairs.iter().map(|a| a.long.0).max().unwrap_or_default();
        let span = if whole {
            body.window().max(longest)
        } else {
            longest
        };
        let subject = Component {
            business_service: body.business_service.clone(),
            object_id: body.object_id,
            object: body.object.clone(),
            ..Component::default()
        };
        if let Some(counters) = &body.metric {
            let Some(object) = self.business.subject_object(tenant, &subject).await? else {
                return Ok(None);
            };
            let now = self.clock.now().as_millis();
            let good = self
                .counter(tenant, object, &counters.good, span, now)
                .await?;
            let total = self
                .counter(tenant, object, &counters.total, span, now)
                .await?;
            let within = |points: &[(i64, f64)], window: Duration| {
                let from = now - i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
                let values: Vec<f64> = points
                    .iter()
                    .filter(|(ms, _)| *ms >= from)
                    .map(|(_, v)| *v)
                    .collect();
                increase(&values)
            };
            let burn = |w: Duration| ratio_burn(within(&good, w), within(&total, w), body.target);
            let sli = whole.then(|| {
                let total = within(&total, body.window());
                (total > 0.0).then(|| 100.0 * (within(&good, body.window()) / total).min(1.0))
            });
            return Ok(Some(Measured {
                sli: sli.flatten(),
                burn: evaluate(&pairs, burn),
                next: Some(METRIC_EVERY),
                object: Some(object),
                watches: Some(BTreeSet::from([object])),
            }));
        }
        let Some(subject) = self.business.subject_down(tenant, &subject, span).await? else {
            return Ok(None);
        };
        let record = Record {
            down: &subject.down,
            data_from: subject.data_from,
            now: subject.now_ms,
            target: body.target,
        };
        let sli = whole.then(|| {
            let from = subject.now_ms - i64::try_from(body.window().as_millis()).unwrap_or(0);
            let from = from.max(subject.data_from);
            let measured = subject.now_ms - from;
            let down = subject
                .down
                .iter()
                .map(|&(s, e)| (s.max(from), e))
                .filter(|(s, e)| s < e)
                .collect();
            (measured > 0).then(|| availability(union_length(down), measured))
        });
        Ok(Some(Measured {
            sli: sli.flatten(),
            burn: record.pairs(&pairs),
            next: record.next_change(&pairs),
            object: subject.object,
            watches: subject.watches,
        }))
    }

    /// A counter's samples over the last `span` (oldest first): raw where the raw tier still
    /// keeps them, else the five-minute tier's last values.
    async fn counter(
        &self,
        tenant: Uuid,
        object: Uuid,
        metric: &str,
        span: Duration,
        now: i64,
    ) -> Result<Vec<(i64, f64)>, StoreError> {
        let span_ms = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        let tier = if span_ms <= 30 * DAY_MS {
            Tier::Raw
        } else {
            Tier::FiveMinutes
        };
        self.metrics.settled().await;
        let (metrics, name) = (self.metrics.clone(), metric.to_string());
        let found =
            blocking(move || metrics.points(tenant, object, &name, tier, now - span_ms, now + 1))
                .await?;
        Ok(found
            .map(|(_, points)| points.into_iter().map(|(ms, a)| (ms, a.last)).collect())
            .unwrap_or_default())
    }
}

fn round(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

/// Holds one alert for each pair of each objective that fires (dedup key
/// `slo/<name>/<long>/<short>`), resolves it when the pair stops firing or goes away. It
/// evaluates every objective at its start, when a state change, downtime or configuration
/// event comes (the bus only wakes it: an objective is measured from what is stored), and
/// when the earliest a pair could change falls due; nothing else. The leading process runs
/// it.
pub struct SloWatch {
    slos: Arc<Slos>,
    alerts: Arc<dyn AlertActions>,
    deliveries: Subscription,
    held: HashMap<(Uuid, String), HeldAlert>,
    /// Each objective (tenant, name) as last measured.
    watched: HashMap<(Uuid, String), Watched>,
    /// What changed since the last round.
    changed: Changed,
    /// The alerts an earlier process left open are held (so those of objectives deleted
    /// meanwhile resolve).
    adopted: bool,
}

/// An objective as the last round measured it.
struct Watched {
    watches: Option<BTreeSet<Uuid>>,
    /// When it must be measured again with nothing else changing.
    due: Option<Timestamp>,
    /// Its alerts' dedup keys.
    keys: Vec<String>,
}

/// What a round measures again: everything, or the objectives watching these (tenant,
/// object)s, beside those due.
enum Changed {
    Everything,
    Objects(HashSet<(Uuid, Uuid)>),
}

impl Changed {
    fn touches(&self, tenant: Uuid, w: &Watched) -> bool {
        match (self, &w.watches) {
            (Changed::Everything, _) => true,
            (Changed::Objects(changed), None) => changed.iter().any(|(t, _)| *t == tenant),
            (Changed::Objects(changed), Some(objects)) => {
                objects.iter().any(|o| changed.contains(&(tenant, *o)))
            }
        }
    }

    /// Notes what an event may change.
    fn mark(&mut self, d: Delivery) {
        let Changed::Objects(objects) = self else {
            return;
        };
        match d {
            Delivery::Event(e) if e.kind == EventType::StateChange => match e.object_id {
                Some(o) => {
                    objects.insert((e.tenant_id, o));
                }
                None => *self = Changed::Everything,
            },
            Delivery::Event(e) if !matches!(e.kind, EventType::Downtime | EventType::Config) => {}
            _ => *self = Changed::Everything,
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Changed::Objects(o) if o.is_empty())
    }
}

impl SloWatch {
    pub fn new(slos: Arc<Slos>, alerts: Arc<dyn AlertActions>, events: &Events) -> Self {
        Self {
            slos,
            alerts,
            deliveries: events.subscribe("slos", 1024),
            held: HashMap::new(),
            watched: HashMap::new(),
            changed: Changed::Everything,
            adopted: false,
        }
    }

    /// Measures the objectives that changed or fell due (every one of every tenant after a
    /// configuration change, a downtime or a start) and holds their alerts; the time until one
    /// is next due.
    async fn round(&mut self) -> Result<Option<Duration>, StoreError> {
        let now = self.slos.clock.now();
        let changed = std::mem::replace(&mut self.changed, Changed::Objects(HashSet::new()));
        let mut watched = HashMap::new();
        let tenants = self.slos.store.tenants().await?;
        if !self.adopted {
            for tenant in &tenants {
                let open = self
                    .slos
                    .store
                    .active_keys_under(tenant.id, "slo/".into())
                    .await?;
                for key in open {
                    self.held
                        .entry((tenant.id, key.clone()))
                        .or_insert_with(|| HeldAlert::new(key));
                }
            }
            self.adopted = true;
        }
        for tenant in tenants {
            let docs = self
                .slos
                .store
                .docs(tenant.id, "slos", None, usize::MAX, |_| true)
                .await?;
            for doc in docs {
                let id = (tenant.id, doc.name.clone());
                if let Some(w) = self.watched.remove(&id)
                    && !changed.touches(tenant.id, &w)
                    && w.due.is_none_or(|due| due > now)
                {
                    watched.insert(id, w);
                    continue;
                }
                let Ok(body) = serde_json::from_str::<SloBody>(&doc.body) else {
                    continue;
                };
                let Some(m) = self.slos.measure(tenant.id, &body, false).await? else {
                    continue;
                };
                let mut keys = Vec::with_capacity(m.burn.len());
                for state in &m.burn {
                    let key = dedup_key(&doc.name, &state.alert);
                    keys.push(key.clone());
                    let raise = || alarm(&doc.name, &body, state, m.object);
                    self.hold(tenant.id, key, state.firing, raise).await;
                }
                let w = Watched {
                    watches: m.watches,
                    due: m.next.map(|d| now.plus(d)),
                    keys,
                };
                watched.insert(id, w);
            }
        }
        self.watched = watched;
        // Pairs that went away (the objective deleted or its pairs changed) end their alerts.
        let kept: HashSet<(Uuid, &str)> = self
            .watched
            .iter()
            .flat_map(|((t, _), w)| w.keys.iter().map(|k| (*t, k.as_str())))
            .collect();
        let gone: Vec<(Uuid, String)> = self
            .held
            .keys()
            .filter(|(t, k)| !kept.contains(&(*t, k.as_str())))
            .cloned()
            .collect();
        for (tenant, key) in gone {
            self.hold(tenant, key.clone(), false, ManualAlarm::default)
                .await;
            self.held.remove(&(tenant, key));
        }
        Ok(self
            .watched
            .values()
            .filter_map(|w| w.due)
            .min()
            .map(|due| due.since(now)))
    }

    async fn hold(
        &mut self,
        tenant: Uuid,
        key: String,
        firing: bool,
        raise: impl FnOnce() -> ManualAlarm,
    ) {
        let alerts = self.alerts.clone();
        let held = self
            .held
            .entry((tenant, key.clone()))
            .or_insert_with(|| HeldAlert::new(key));
        if let Err(e) = held
            .hold(&*alerts, tenant, firing, raise, "slo", "slo")
            .await
        {
            tracing::warn!(error = %e, "an objective's burn alert was not raised or resolved");
        }
    }
}

fn dedup_key(slo: &str, pair: &BurnAlert) -> String {
    format!("slo/{slo}/{}/{}", pair.long, pair.short)
}

/// The alert of a firing pair: `page` pairs critical and escalated by the objective's policy,
/// `ticket` pairs a warning that pages nobody.
fn alarm(name: &str, body: &SloBody, state: &BurnState, object: Option<Uuid>) -> ManualAlarm {
    let pair = &state.alert;
    let page = pair.severity == "page";
    let mut labels = body.labels.clone();
    labels.insert("slo".into(), name.to_string());
    labels.insert("burn".into(), pair.severity.clone());
    ManualAlarm {
        title: Some(format!(
            "SLO {name}: error budget burning at {}x",
            state.long_burn
        )),
        message: Some(format!(
            "{}x over {} and {}x over {} (alert at {}x; target {} % over {})",
            state.long_burn,
            pair.long,
            state.short_burn,
            pair.short,
            pair.burn_rate,
            body.target,
            body.window.as_deref().unwrap_or("30d"),
        )),
        severity: Some(if page { "critical" } else { "warning" }.into()),
        escalation_policy: body.escalation_policy.clone().filter(|_| page),
        labels,
        object_id: object,
        dedup_key: None,
    }
}

impl Worker for SloWatch {
    fn name(&self) -> &'static str {
        "slo-watch"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            // Listening before the round: a clock moved while it runs wakes the next one.
            let moved = crate::runtime::clock::moved().notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let next = match self.round().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "objectives not evaluated");
                    self.changed = Changed::Everything;
                    return Wait::For(Duration::from_secs(5));
                }
            };
            let sleep = next.unwrap_or(Duration::from_secs(86_400 * 365));
            let due = tokio::time::sleep(sleep);
            tokio::pin!(due);
            while self.changed.is_empty() {
                tokio::select! {
                    d = self.deliveries.recv() => match d {
                        None => return Wait::Done,
                        Some(d) => self.changed.mark(d),
                    },
                    // The test clock: every due time may have passed.
                    _ = &mut moved => self.changed = Changed::Everything,
                    _ = &mut due => break,
                }
            }
            // What a burst brought meanwhile is covered by the one round that follows.
            while let Some(Some(d)) = self.deliveries.recv().now_or_never() {
                self.changed.mark(d);
            }
            Wait::For(Duration::ZERO)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_alerts_under_its_windows_key_with_its_severity() {
        let body = SloBody {
            target: 99.9,
            escalation_policy: Some("oncall".into()),
            labels: [("team".to_string(), "web".to_string())].into(),
            ..SloBody::default()
        };
        let pairs = crate::model::slo::workbook();
        let states = evaluate(&pairs, |_| 20.0);
        assert_eq!(dedup_key("shop", &pairs[0]), "slo/shop/1h0m0s/5m0s");
        let page = alarm("shop", &body, &states[0], None);
        assert_eq!(page.severity.as_deref(), Some("critical"));
        assert_eq!(page.escalation_policy.as_deref(), Some("oncall"));
        assert_eq!(page.labels["slo"], "shop");
        assert_eq!(page.labels["team"], "web");
        let ticket = alarm("shop", &body, &states[2], None);
        assert_eq!(ticket.severity.as_deref(), Some("warning"));
        assert_eq!(ticket.escalation_policy, None, "a ticket pages nobody");
        assert_eq!(ticket.labels["burn"], "ticket");
    }
}
