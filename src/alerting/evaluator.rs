//! Alert rules under a budget. The engine hands a batch of events (each with its tenant's rules)
//! to an evaluation thread with a CEL-sized stack and awaits the results against deadlines: a
//! rule still running `RULE_BUDGET` after it began on one event, or an event whose rules
//! together run past `EVENT_BUDGET`, is over budget. That thread is left to end on its own (its
//! results are dropped; the bounds of `model::cel` and of inbound events bound how long), the
//! rule is skipped in its tenant for `QUARANTINE` or until the rules change, and the rest of
//! the batch goes on at the same event on a fresh thread. No event, however it is shaped,
//! holds the engine, and so every other tenant's alerts, for longer than one budget.

use super::lifecycle::AlertMatch;
use super::rules::{OverCost, RuleSet, Subject, decide_rule};
use crate::model::Timestamp;
use crate::model::event::Event;
use crate::runtime::Stopwatch;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

/// The longest one rule may run on one event.
pub const RULE_BUDGET: Duration = Duration::from_millis(500);
/// The longest a tenant's rules together may run on one event.
pub const EVENT_BUDGET: Duration = Duration::from_secs(2);
/// How long a rule that ran over its budget is skipped (unless the rules change first).
pub const QUARANTINE: Duration = Duration::from_secs(600);
/// Evaluation threads left running past their budget at once; past it the engine waits for
/// one to end rather than start another.
const MAX_ABANDONED: usize = 4;
/// Stack of an evaluation thread (see `model::cel`).
const STACK: usize = 16 << 20;
/// Progress value of "nothing started yet".
const IDLE: u64 = u64::MAX;

/// One event and the rules of its tenant.
pub struct Work {
    pub rules: Arc<RuleSet>,
    pub event: Arc<Event>,
}

/// A rule that ran over its budget on an event, or whose bound on it was past the budget
/// (`bound`: then it did not run at all).
#[derive(Clone, Debug)]
pub struct Overrun {
    pub tenant: Uuid,
    pub rule: String,
    pub event: Uuid,
    pub budget: Duration,
    pub bound: Option<OverCost>,
}

/// What a batch decided, and the rules that ran over their budget in it.
#[derive(Default)]
pub struct Decided {
    pub matches: Vec<AlertMatch>,
    pub overruns: Vec<Overrun>,
}

/// Where an evaluation thread is: the item and rule it runs, and since when (milliseconds on
/// the batch's stopwatch), each item's start too.
struct Progress {
    item: AtomicUsize,
    rule: AtomicUsize,
    rule_since: AtomicU64,
    item_since: AtomicU64,
}

/// What an evaluation thread reports: each item's decisions in order, a rule not run on an
/// item for its bound, then the end of its work.
enum Report {
    Item(Vec<AlertMatch>),
    OverCost {
        item: usize,
        rule: usize,
        bound: OverCost,
    },
    Done,
}

/// Counts a live evaluation thread; wakes the engine when it ends.
struct Live(Arc<(AtomicUsize, Notify)>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }
}

pub struct Evaluator {
    /// Rules skipped until then, by tenant and rule name.
    quarantine: HashMap<(Uuid, String), Timestamp>,
    live: Arc<(AtomicUsize, Notify)>,
}

impl Default for Evaluator {
    fn default() -> Self {
        Self::new()
    }
}

impl Evaluator {
    pub fn new() -> Self {
        Self {
            quarantine: HashMap::new(),
            live: Arc::new((AtomicUsize::new(0), Notify::new())),
        }
    }

    /// Forgets every quarantine (the rules changed; the engine restores the skips it kept for
    /// rules that are as they were).
    pub fn rules_changed(&mut self) {
        self.quarantine.clear();
    }

    /// Skips `rule` of `tenant` until `until` (a skip kept from before a restart).
    pub fn skip(&mut self, tenant: Uuid, rule: String, until: Timestamp) {
        self.quarantine.insert((tenant, rule), until);
    }

    /// Runs every item's rules, in order, under the budgets.
    pub async fn decide(
        &mut self,
        work: Vec<Work>,
        new_id: Arc<dyn Fn() -> Uuid + Send + Sync>,
        now: Timestamp,
    ) -> Decided {
        self.quarantine.retain(|_, until| *until > now);
        let work = Arc::new(work);
        let mut decided = Decided::default();
        let mut from = 0;
        while from < work.len() {
            self.wait_for_room().await;
            let skipped: Arc<HashSet<(Uuid, String)>> =
                Arc::new(self.quarantine.keys().cloned().collect());
            let (progress, watch, mut reports) =
                self.spawn(work.clone(), from, skipped.clone(), new_id.clone(), now);
            let stopped_at = loop {
                let deadline = deadline(&progress, &watch);
                match tokio::time::timeout(deadline, reports.recv()).await {
                    Ok(Some(Report::Item(matches))) => decided.matches.extend(matches),
                    Ok(Some(Report::OverCost { item, rule, bound })) => {
                        let over = self.skip_over(&work[item], rule, RULE_BUDGET, Some(bound), now);
                        decided.overruns.push(over);
                    }
                    Ok(Some(Report::Done) | None) => break None,
                    Err(_) => {
                        if let Some(over) = over_budget(&progress, &watch) {
                            break Some(over);
                        }
                    }
                }
            };
            let Some((item, rule, budget)) = stopped_at else {
                // Done, or the thread died (a panic outside a rule): what is left is dropped.
                break;
            };
            // The thread is abandoned: dropping the receiver leaves it to end on its own.
            let over = self.skip_over(&work[item], rule, budget, None, now);
            decided.overruns.push(over);
            from = item;
        }
        decided
    }

    /// Skips rule `rule` of an item's tenant for `QUARANTINE`: it ran past `budget`, or its
    /// `bound` was past the budget and it did not run.
    fn skip_over(
        &mut self,
        w: &Work,
        rule: usize,
        budget: Duration,
        bound: Option<OverCost>,
        now: Timestamp,
    ) -> Overrun {
        let name = w
            .rules
            .get(rule)
            .map(|r| r.name.clone())
            .unwrap_or_default();
        let why = bound.map_or_else(
            || format!("ran past {budget:?}"),
            |b| format!("not run: it {b}"),
        );
        tracing::warn!(
            tenant = %w.event.tenant_id, rule = %name, event = %w.event.id, %why,
            "alert rule over its evaluation budget; skipped for a while"
        );
        self.quarantine
            .insert((w.event.tenant_id, name.clone()), now.plus(QUARANTINE));
        Overrun {
            tenant: w.event.tenant_id,
            rule: name,
            event: w.event.id,
            budget,
            bound,
        }
    }

    /// Waits while too many abandoned threads still run.
    async fn wait_for_room(&self) {
        loop {
            let ended = self.live.1.notified();
            if self.live.0.load(Ordering::SeqCst) <= MAX_ABANDONED {
                return;
            }
            ended.await;
        }
    }

    /// Starts a thread on `work[from..]`.
    fn spawn(
        &self,
        work: Arc<Vec<Work>>,
        from: usize,
        skipped: Arc<HashSet<(Uuid, String)>>,
        new_id: Arc<dyn Fn() -> Uuid + Send + Sync>,
        now: Timestamp,
    ) -> (Arc<Progress>, Stopwatch, mpsc::UnboundedReceiver<Report>) {
        let progress = Arc::new(Progress {
            item: AtomicUsize::new(from),
            rule: AtomicUsize::new(0),
            rule_since: AtomicU64::new(IDLE),
            item_since: AtomicU64::new(IDLE),
        });
        let watch = Stopwatch::start();
        let (tx, rx) = mpsc::unbounded_channel();
        self.live.0.fetch_add(1, Ordering::SeqCst);
        let live = Live(self.live.clone());
        let shared = progress.clone();
        let spawned = std::thread::Builder::new()
            .name("cel".into())
            .stack_size(STACK)
            .spawn(move || {
                let _live = live;
                let ms = || u64::try_from(watch.elapsed().as_millis()).unwrap_or(IDLE - 1);
                // Rules this thread found past the budget: reported once, then passed over.
                let mut over: HashSet<(Uuid, String)> = HashSet::new();
                for (i, w) in work.iter().enumerate().skip(from) {
                    shared.item.store(i, Ordering::SeqCst);
                    shared.item_since.store(ms(), Ordering::SeqCst);
                    let mut matches = Vec::new();
                    let subject = Subject::new(&w.event);
                    for (j, rule) in w.rules.iter().enumerate() {
                        if w.rules.decided_unrun(rule, &subject) {
                            continue;
                        }
                        // Skips are rare: no key is built for a rule while there are none.
                        let skip = || (w.event.tenant_id, rule.name.clone());
                        if (!skipped.is_empty() || !over.is_empty())
                            && (skipped.contains(&skip()) || over.contains(&skip()))
                        {
                            continue;
                        }
                        shared.rule.store(j, Ordering::SeqCst);
                        shared.rule_since.store(ms(), Ordering::SeqCst);
                        // An expression that panics the evaluator is no match.
                        let one = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            decide_rule(rule, &subject, &mut || new_id(), now)
                        }));
                        match one {
                            Ok(Ok(d)) => matches.extend(d),
                            Ok(Err(bound)) => {
                                over.insert(skip());
                                let _ = tx.send(Report::OverCost {
                                    item: i,
                                    rule: j,
                                    bound,
                                });
                            }
                            Err(_) => tracing::warn!(
                                event = %w.event.id, rule = %rule.name,
                                "rule evaluation failed; no match"
                            ),
                        }
                    }
                    matches.extend(w.rules.object_clear(&subject));
                    shared.rule_since.store(IDLE, Ordering::SeqCst);
                    if tx.send(Report::Item(matches)).is_err() {
                        // Abandoned: nobody wants the rest.
                        return;
                    }
                }
                let _ = tx.send(Report::Done);
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "no evaluation thread");
        }
        (progress, watch, rx)
    }
}

/// How long to wait for the next report: until the running rule's or item's budget ends.
fn deadline(p: &Progress, watch: &Stopwatch) -> Duration {
    let now = watch.elapsed();
    let ends = |since: &AtomicU64, budget: Duration| match since.load(Ordering::SeqCst) {
        IDLE => budget,
        ms => (Duration::from_millis(ms) + budget).saturating_sub(now),
    };
    ends(&p.rule_since, RULE_BUDGET)
        .min(ends(&p.item_since, EVENT_BUDGET))
        .max(Duration::from_millis(1))
}

/// The item and rule running past a budget, with that budget.
fn over_budget(p: &Progress, watch: &Stopwatch) -> Option<(usize, usize, Duration)> {
    let now = watch.elapsed();
    let past = |since: &AtomicU64, budget: Duration| match since.load(Ordering::SeqCst) {
        IDLE => false,
        ms => now >= Duration::from_millis(ms) + budget,
    };
    let (item, rule) = (p.item.load(Ordering::SeqCst), p.rule.load(Ordering::SeqCst));
    if past(&p.rule_since, RULE_BUDGET) {
        Some((item, rule, RULE_BUDGET))
    } else if past(&p.item_since, EVENT_BUDGET) && p.rule_since.load(Ordering::SeqCst) != IDLE {
        Some((item, rule, EVENT_BUDGET))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerting::rules::compile;
    use crate::model::event::{EventDraft, EventType, Severity};
    use crate::runtime::{Clock, TestClock};
    use serde_json::json;

    fn event(clock: &TestClock, tenant: Uuid, labels: usize) -> Arc<Event> {
        let labels: serde_json::Map<String, serde_json::Value> = (0..labels)
            .map(|i| (format!("l{i:05}"), json!(format!("v{i}"))))
            .collect();
        let draft = EventDraft::new(
            tenant,
            EventType::Ingress,
            Some(Severity::Critical),
            json!({"source": "hooks", "summary": "x", "labels": labels}),
        );
        Arc::new(draft.stamped(clock.new_id(), clock.now()))
    }

    fn rules(docs: &[(&str, &str)]) -> Arc<RuleSet> {
        let docs = docs
            .iter()
            .map(|(n, m)| {
                (
                    n.to_string(),
                    json!({"match": m, "severity": "critical"}).to_string(),
                )
            })
            .collect();
        Arc::new(crate::model::cel::on_cel_stack(|| compile(docs)).unwrap())
    }

    /// A rule that loops over a large event past its budget is skipped and named; the other
    /// rules of that event and the later events are decided as usual, and the rule stays
    /// skipped for the next batch.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_rule_over_its_budget_is_skipped_and_the_rest_decided() {
        let (slow_tenant, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let clock = Arc::new(TestClock::new(now));
        let ids = clock.clone();
        let new_id: Arc<dyn Fn() -> Uuid + Send + Sync> = Arc::new(move || ids.new_id());
        let slow = rules(&[
            ("first", "event.type == 'ingress'"),
            (
                "quadratic",
                "event.labels.all(k, event.labels.all(j, j + k != ''))",
            ),
            ("last", "event.severity == 'critical'"),
        ]);
        let plain = rules(&[("plain", "event.type == 'ingress'")]);
        let mut evaluator = Evaluator::new();
        let work = vec![
            Work {
                rules: slow.clone(),
                event: event(&clock, slow_tenant, 5_000),
            },
            Work {
                rules: plain.clone(),
                event: event(&clock, other, 3),
            },
        ];
        let decided = evaluator.decide(work, new_id.clone(), now).await;
        assert_eq!(decided.overruns.len(), 1, "{:?}", decided.overruns);
        assert_eq!(decided.overruns[0].rule, "quadratic");
        assert_eq!(decided.overruns[0].tenant, slow_tenant);
        let fired: Vec<String> = decided
            .matches
            .iter()
            .filter_map(|m| match m {
                AlertMatch::Fire { alert, .. } => Some(alert.rule_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(fired, ["first", "last", "plain"]);
        let again = evaluator
            .decide(
                vec![Work {
                    rules: slow,
                    event: event(&clock, slow_tenant, 5_000),
                }],
                new_id,
                now,
            )
            .await;
        assert!(again.overruns.is_empty(), "quarantined: not run again");
        assert_eq!(again.matches.len(), 2);
    }
}
