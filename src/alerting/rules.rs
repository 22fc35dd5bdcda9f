//! Alert rules at run time (SEMANTICS 3): each enabled `alert-rules` document compiled once,
//! the `event` variable rules see, and what a rule decides for one event.

use super::lifecycle::AlertMatch;
use crate::model::Timestamp;
use crate::model::alert::Alert;
use crate::model::cel as bounds;
use crate::model::cel_cost::{self, Cost};
use crate::model::config::AlertRule;
use crate::model::event::{Event, EventType, Severity};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// The events rules see (SPEC 6.2): incident updates only as created through the API; the
/// lifecycle events never re-enter rules.
pub fn reaches_rules(e: &Event) -> bool {
    match e.kind {
        EventType::StateChange
        | EventType::FlappingStart
        | EventType::FlappingEnd
        | EventType::Ingress
        | EventType::HeartbeatMissed => true,
        EventType::IncidentUpdate => {
            e.payload.get("action").and_then(Value::as_str) == Some("created")
        }
        _ => false,
    }
}

pub struct CompiledRule {
    pub name: String,
    pub rule: AlertRule,
    /// `None` for a heartbeat rule without `match`.
    matches: Option<::cel::Program>,
    /// The `match` expression's `event.<path> == '<text>'` conjuncts, checked before it runs.
    requires: Vec<(Vec<String>, String)>,
    clear: Option<::cel::Program>,
}

/// The `event.<path> == '<text>'` (or `'<text>' == event.<path>`) conjuncts at the top level
/// of a `&&` chain. When one does not hold for an event the whole expression is false or an
/// error (a missing key, another type), both no match, so the rule need not run: most rules
/// test the event type and a label or two, and most events fail them.
fn required_equalities(source: &str) -> Vec<(Vec<String>, String)> {
    let mut conjuncts = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0usize);
    let bytes: Vec<(usize, char)> = source.char_indices().collect();
    let mut i = 0;
    while i < bytes.len() {
        let (at, c) = bytes[i];
        match (quote, c) {
            (Some(_), '\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, '|' | '?') if depth == 0 => return Vec::new(),
            (None, '&') if depth == 0 && bytes.get(i + 1).is_some_and(|(_, n)| *n == '&') => {
                conjuncts.push(&source[start..at]);
                start = at + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    conjuncts.push(&source[start..]);
    let path = |s: &str| -> Option<Vec<String>> {
        let p = s.trim().strip_prefix("event.")?;
        let ok = !p.is_empty()
            && p.split('.')
                .all(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        ok.then(|| p.split('.').map(str::to_string).collect())
    };
    let literal = |s: &str| -> Option<String> {
        let s = s.trim();
        let q = s.chars().next().filter(|q| *q == '\'' || *q == '"')?;
        let inner = s.strip_prefix(q)?.strip_suffix(q)?;
        (!inner.contains(q) && !inner.contains('\\')).then(|| inner.to_string())
    };
    conjuncts
        .into_iter()
        .filter_map(|c| {
            let (l, r) = c.split_once("==")?;
            match (path(l), literal(r)) {
                (Some(p), Some(v)) => Some((p, v)),
                _ => Some((path(r)?, literal(l)?)),
            }
        })
        .collect()
}

/// Whether the view's value at `path` is the string `value`.
fn has(view: &Value, path: &[String], value: &str) -> bool {
    path.iter()
        .try_fold(view, |v, k| v.get(k))
        .and_then(Value::as_str)
        == Some(value)
}

/// Whether an event comes from a heartbeat rule's source: its source id, an ingress event's
/// `source`, or its object's id.
fn from_source(e: &Event, source: &str) -> bool {
    e.source_id.as_deref() == Some(source)
        || e.payload.get("source").and_then(Value::as_str) == Some(source)
        || e.object_id.is_some_and(|o| o.to_string() == source)
}

/// A tenant's compiled rules, and those an object's clear event clears without running them.
pub struct RuleSet {
    rules: Vec<CompiledRule>,
    /// The rules that clear `{objectId}/{rule}` on every clear event of an object, whatever
    /// the event holds (`CompiledRule::clears_by_object`), with their reopen windows: one
    /// `ClearObject` stands for them all, rather than a clear per rule on each OK event.
    object_clears: Arc<HashMap<String, Duration>>,
}

impl std::ops::Deref for RuleSet {
    type Target = [CompiledRule];

    fn deref(&self) -> &[CompiledRule] {
        &self.rules
    }
}

impl RuleSet {
    fn new(rules: Vec<CompiledRule>) -> Self {
        let object_clears = rules
            .iter()
            .filter(|r| r.clears_by_object())
            .map(|r| (r.name.clone(), r.rule.reopen_window()))
            .collect();
        Self {
            rules,
            object_clears: Arc::new(object_clears),
        }
    }

    /// Whether `rule` need not run on `subject`: its decision is in `object_clear`'s.
    pub fn decided_unrun(&self, rule: &CompiledRule, subject: &Subject<'_>) -> bool {
        subject.cleared_object().is_some() && rule.clears_by_object()
    }

    /// The clears of the rules `decided_unrun` passed over, as one match (`None` on any
    /// other event).
    pub fn object_clear(&self, subject: &Subject<'_>) -> Option<AlertMatch> {
        let object = subject.cleared_object()?;
        (!self.object_clears.is_empty()).then(|| AlertMatch::ClearObject {
            tenant: subject.event.tenant_id,
            object,
            event: subject.event.id,
            rules: self.object_clears.clone(),
        })
    }
}

impl CompiledRule {
    /// Whether the rule's decision on an object's clear event is a clear of `{objectId}/{rule}`
    /// whatever the event holds: it resolves on OK (the default), has no `clear` expression
    /// and no heartbeat, and keys its alerts by object (no `dedupKey` template).
    fn clears_by_object(&self) -> bool {
        self.matches.is_some()
            && self.clear.is_none()
            && self.rule.heartbeat.is_none()
            && self.rule.resolve_on_ok.unwrap_or(true)
            && self.rule.dedup_key.as_deref().is_none_or(str::is_empty)
    }
}

/// Compiles a tenant's enabled rules; a rule that no longer compiles is skipped with a warning.
pub fn compile(docs: Vec<(String, String)>) -> RuleSet {
    let mut out = Vec::new();
    for (name, body) in docs {
        let Some(rule) = AlertRule::parse(&body) else {
            tracing::warn!(rule = %name, "alert rule unreadable; skipped");
            continue;
        };
        if rule.disabled {
            continue;
        }
        let compiled = compile_one(&name, rule);
        if compiled.is_empty() {
            tracing::warn!(rule = %name, "alert rule does not compile; skipped");
        }
        out.extend(compiled);
    }
    RuleSet::new(out)
}

fn state_word(s: Option<Severity>) -> &'static str {
    match s {
        Some(Severity::Critical) => "CRITICAL",
        Some(Severity::Warning) => "WARNING",
        Some(Severity::Ok) => "OK",
        Some(Severity::Info) | None => "INFO",
    }
}

/// The `event` variable of SEMANTICS 3.
pub fn event_view(e: &Event) -> Value {
    let p = &e.payload;
    let get = |k: &str| p.get(k).cloned();
    let mut v = Map::new();
    v.insert("type".into(), json!(e.kind));
    v.insert("severity".into(), json!(e.severity));
    v.insert("ts".into(), json!(e.ts));
    if let Some(o) = e.object_id {
        v.insert("objectId".into(), json!(o));
    }
    // Rules name an ingress source as its ingest URL does, by name; `sourceId` is its id.
    let source_name = (e.kind == EventType::Ingress)
        .then(|| p.get("source").and_then(Value::as_str))
        .flatten();
    if let Some(s) = source_name.or(e.source_id.as_deref()) {
        v.insert("source".into(), json!(s));
    }
    if let Some(s) = &e.source_id {
        v.insert("sourceId".into(), json!(s));
    }
    v.insert("labels".into(), get("labels").unwrap_or_else(|| json!({})));
    let payload = match e.kind {
        // Ingress: the original document's keys, hoisted.
        EventType::Ingress => get("payload").unwrap_or_else(|| Value::clone(p)),
        _ => Value::clone(p),
    };
    v.insert("payload".into(), payload);
    if e.kind == EventType::StateChange {
        for (to, from) in [("object", "object"), ("host", "host"), ("kind", "kind")] {
            if let Some(x) = get(from) {
                v.insert(to.into(), x);
            }
        }
        v.insert("fromState".into(), get("from").unwrap_or(Value::Null));
        v.insert("state".into(), get("to").unwrap_or(Value::Null));
        for k in ["stateType", "attempt", "output", "metric"] {
            if let Some(x) = get(k) {
                v.insert(k.into(), x);
            }
        }
    } else {
        v.insert("state".into(), json!(state_word(e.severity)));
        if let Some(x) = get("object") {
            v.insert("object".into(), x);
        }
    }
    for k in ["summary", "dedupKey"] {
        if let Some(x) = get(k) {
            v.insert(k.into(), x);
        }
    }
    Value::Object(v)
}

/// A clear: severity ok, state OK or UP, or `resolve: true` (SEMANTICS 3).
fn is_clear(e: &Event, view: &Value) -> bool {
    e.severity == Some(Severity::Ok)
        || matches!(view.get("state").and_then(Value::as_str), Some("OK" | "UP"))
        || e.payload.get("resolve").and_then(Value::as_bool) == Some(true)
}

/// A rule whose expressions could cost more on an event than `model::cel_cost` allows: it is
/// not run on it.
#[derive(Clone, Copy, Debug)]
pub struct OverCost(pub Cost);

impl std::fmt::Display for OverCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "could take {:.0} steps and build {:.0} bytes on it, past the budget of {:.0} steps and {:.0} bytes",
            self.0.steps,
            self.0.bytes,
            cel_cost::STEP_BUDGET,
            cel_cost::BYTE_BUDGET
        )
    }
}

/// The bound of running `programs` on `view`, within the budget or not.
fn within_budget<'p>(
    programs: impl Iterator<Item = &'p ::cel::Program>,
    view: &Value,
) -> Result<(), OverCost> {
    let bound = programs
        .map(|p| cel_cost::cost(p.expression(), view))
        .fold(Cost::default(), Cost::plus);
    if bound.within_budget() {
        Ok(())
    } else {
        Err(OverCost(bound))
    }
}

/// Renders `{{ .event.a.b }}` (also `{{ .a.b }}`) against the event view; unknown paths
/// render empty.
pub fn render(template: &str, view: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let path = rest[start + 2..start + end].trim();
        let path = path.strip_prefix(".event").unwrap_or(path);
        let mut at = Some(view);
        for part in path.split('.').filter(|p| !p.is_empty()) {
            at = at.and_then(|v| v.get(part));
        }
        match at {
            Some(Value::String(s)) => out.push_str(s),
            Some(Value::Null) | None => {}
            Some(other) => out.push_str(&other.to_string()),
        }
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The dedup key: the rule's template, else `<objectId>/<rule>`, `<rule>/<dedupKey>`,
/// `<rule>/<sourceId>` (SEMANTICS 3).
fn dedup_key(r: &CompiledRule, e: &Event, view: &Value) -> String {
    if let Some(t) = r.rule.dedup_key.as_deref().filter(|t| !t.is_empty()) {
        return render(t, view);
    }
    if let Some(o) = e.object_id {
        return format!("{o}/{}", r.name);
    }
    match view.get("dedupKey").and_then(Value::as_str) {
        Some(k) => format!("{}/{k}", r.name),
        None => format!("{}/{}", r.name, e.source_id.clone().unwrap_or_default()),
    }
}

fn default_title(r: &CompiledRule, view: &Value) -> String {
    let text = |k: &str| view.get(k).and_then(Value::as_str).map(str::to_string);
    match (text("object"), text("state")) {
        (Some(object), Some(state)) => match text("host") {
            Some(host) => format!("{host}/{object} is {state}"),
            None => format!("{object} is {state}"),
        },
        _ => text("summary").unwrap_or_else(|| r.name.clone()),
    }
}

/// One event as rules see it: its `event` view and the CEL context holding it (built once,
/// shared by every rule, and only once a rule runs an expression: most rules' prefilters
/// refuse most events, and an object's clear event may run none).
pub struct Subject<'e> {
    event: &'e Event,
    view: Value,
    /// `None` inside when the view cannot become a CEL value (then no expression holds).
    ctx: std::cell::OnceCell<Option<::cel::Context<'static, 'static>>>,
    clear: bool,
}

impl<'e> Subject<'e> {
    pub fn new(e: &'e Event) -> Self {
        let view = event_view(e);
        let clear = is_clear(e, &view);
        Self {
            event: e,
            view,
            ctx: std::cell::OnceCell::new(),
            clear,
        }
    }

    /// Whether `program` holds for the event: a boolean `true`; a missing key or any other
    /// result is no match.
    fn holds(&self, program: &::cel::Program) -> bool {
        let ctx = self.ctx.get_or_init(|| {
            let mut ctx = crate::model::cel::context();
            ctx.add_variable_from_value("event", ::cel::to_value(&self.view).ok()?);
            Some(ctx)
        });
        ctx.as_ref()
            .is_some_and(|ctx| matches!(program.execute(ctx), Ok(::cel::Value::Bool(true))))
    }

    /// The object a clear event is of (`None` for any other event).
    fn cleared_object(&self) -> Option<Uuid> {
        self.event.object_id.filter(|_| self.clear)
    }
}

/// What the tenant's rules decide for one event: an alert to open or refresh, or a key to
/// clear, per rule. Runs the expressions; call it on the CEL stack.
pub fn decide(
    rules: &RuleSet,
    e: &Event,
    new_id: &mut dyn FnMut() -> Uuid,
    now: Timestamp,
) -> Result<Vec<AlertMatch>, OverCost> {
    let subject = Subject::new(e);
    let mut out = Vec::new();
    for r in rules.iter().filter(|r| !rules.decided_unrun(r, &subject)) {
        out.extend(decide_rule(r, &subject, new_id, now)?);
    }
    out.extend(rules.object_clear(&subject));
    Ok(out)
}

/// What one rule decides for one event. Runs its expressions, unless their bound on this event
/// is past the budget (`OverCost`, nothing run); call it on the CEL stack.
pub fn decide_rule(
    r: &CompiledRule,
    subject: &Subject<'_>,
    new_id: &mut dyn FnMut() -> Uuid,
    now: Timestamp,
) -> Result<Vec<AlertMatch>, OverCost> {
    let (e, view, clear_event) = (subject.event, &subject.view, subject.clear);
    let mut out = Vec::new();
    if r.rule
        .heartbeat
        .as_ref()
        .is_some_and(|h| from_source(e, &h.source))
    {
        out.push(AlertMatch::Beat {
            tenant: e.tenant_id,
            rule: r.name.clone(),
            at: e.ts,
            event: e.id,
        });
    }
    let Some(matches) = &r.matches else {
        return Ok(out);
    };
    let required = r.requires.iter().all(|(p, v)| has(view, p, v));
    within_budget(
        required.then_some(matches).into_iter().chain(&r.clear),
        view,
    )?;
    let matched = required && subject.holds(matches);
    let cleared = r.clear.as_ref().is_some_and(|c| subject.holds(c))
        || (clear_event && (matched || r.rule.resolve_on_ok.unwrap_or(true)));
    if cleared {
        out.push(AlertMatch::Clear {
            tenant: e.tenant_id,
            dedup_key: dedup_key(r, e, view),
            event: e.id,
            reopen_window: r.rule.reopen_window(),
        });
    } else if matched {
        let mut labels: BTreeMap<String, String> = view
            .get("labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_string),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        labels.extend(r.rule.set_labels.clone());
        let severity = r
            .rule
            .severity
            .parse()
            .ok()
            .or(e.severity)
            .unwrap_or(Severity::Warning);
        let title = match r.rule.title.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => render(t, view),
            None => default_title(r, view),
        };
        out.push(AlertMatch::Fire {
            alert: Box::new(Alert {
                object_id: e.object_id,
                labels,
                payload: Value::clone(&e.payload),
                escalation_policy: r.rule.escalation_policy.clone(),
                auto_close_at: r.rule.auto_close_after.map(|d| now.plus(d.0)),
                group_id: r.rule.group_id.clone().filter(|g| !g.is_empty()),
                ..Alert::open(
                    new_id(),
                    e.tenant_id,
                    r.name.clone(),
                    dedup_key(r, e, view),
                    severity,
                    title,
                    now,
                )
            }),
            event: e.id,
            pending_for: r.rule.pending_for.map(|d| d.0).filter(|d| !d.is_zero()),
        });
    }
    Ok(out)
}

/// What a rule would have done with some events (`POST /alert-rules:test`).
#[derive(Debug, Default, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuleTest {
    /// Events the rule matched (opens, refreshes or clears).
    pub matched: usize,
    /// The alerts it would have opened, one per dedup key, in event order.
    pub would_open: Vec<Value>,
    /// The `event` variable of the first five matched events.
    pub sample_views: Vec<Value>,
}

/// Runs one rule over `events` the way the engine would; call it on the CEL stack. An event
/// the rule's bound is past the budget on ends the test, with that event's id.
pub fn test_rule(
    name: &str,
    rule: AlertRule,
    events: &[Event],
    new_id: &mut dyn FnMut() -> Uuid,
    now: Timestamp,
) -> Result<RuleTest, (Uuid, OverCost)> {
    let rules = RuleSet::new(compile_one(name, rule));
    let mut out = RuleTest::default();
    let mut opened = std::collections::HashSet::new();
    for e in events.iter().filter(|e| reaches_rules(e)) {
        let decided = decide(&rules, e, new_id, now).map_err(|over| (e.id, over))?;
        if decided.is_empty() {
            continue;
        }
        out.matched += 1;
        if out.sample_views.len() < 5 {
            out.sample_views.push(event_view(e));
        }
        for d in decided {
            match d {
                AlertMatch::Fire { alert, event, .. } => {
                    if opened.insert(alert.dedup_key.clone()) {
                        out.would_open.push(json!({
                            "dedupKey": alert.dedup_key,
                            "title": alert.title,
                            "severity": alert.severity,
                            "labels": alert.labels,
                            "objectId": alert.object_id,
                            "eventId": event,
                        }));
                    }
                }
                AlertMatch::Clear { dedup_key, .. } => {
                    opened.remove(&dedup_key);
                }
                AlertMatch::ClearObject { object, rules, .. } => {
                    let prefix = format!("{object}/");
                    opened.retain(|k: &String| {
                        k.strip_prefix(&prefix)
                            .is_none_or(|rule| !rules.contains_key(rule))
                    });
                }
                AlertMatch::Beat { .. } => {}
            }
        }
    }
    Ok(out)
}

fn compile_one(name: &str, rule: AlertRule) -> Vec<CompiledRule> {
    let matches = match rule.matches.as_str() {
        "" if rule.heartbeat.is_some() => Ok(None),
        m => bounds::compile(m).map(Some),
    };
    let clear = rule.clear.as_deref().map(bounds::compile).transpose();
    match (matches, clear) {
        (Ok(matches), Ok(clear)) => vec![CompiledRule {
            name: name.to_string(),
            requires: required_equalities(&rule.matches),
            rule,
            matches,
            clear,
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_equalities_are_required_before_a_rule_runs() {
        let eq = |s: &str| -> Vec<(String, String)> {
            required_equalities(s)
                .into_iter()
                .map(|(p, v)| (p.join("."), v))
                .collect()
        };
        assert_eq!(
            eq("event.type == 'state_change' && event.labels.shard == \"7\" && event.attempt > 2"),
            [
                ("type".into(), "state_change".into()),
                ("labels.shard".into(), "7".into())
            ]
        );
        assert_eq!(
            eq("'CRITICAL' == event.state"),
            [("state".into(), "CRITICAL".into())]
        );
        assert!(
            eq("event.type == 'a' || event.type == 'b'").is_empty(),
            "a disjunction"
        );
        assert!(eq("event.x == 'a' ? true : false").is_empty());
        assert_eq!(
            eq("(event.type == 'a' || true) && event.kind == 'service'"),
            [("kind".into(), "service".into())]
        );
        assert_eq!(
            eq("event.summary == 'a && b'"),
            [("summary".into(), "a && b".into())]
        );
        assert!(
            eq("event.summary == 'it\\'s'").is_empty(),
            "escapes are left to CEL"
        );
        assert!(eq("event.payload.n == 3").is_empty());
        let view = json!({"type": "state_change", "labels": {"shard": "7"}, "attempt": 3});
        let rules = compile(vec![(
            "r".into(),
            json!({"match": "event.type == 'state_change' && event.labels.shard == '7'", "severity": "critical"}).to_string(),
        )]);
        assert!(rules[0].requires.iter().all(|(p, v)| has(&view, p, v)));
        let other = json!({"type": "state_change", "labels": {"shard": "8"}});
        assert!(!rules[0].requires.iter().all(|(p, v)| has(&other, p, v)));
    }

    /// On an object's OK event the rules that clear by object are not run: one `ClearObject`
    /// names them; a rule with its own key, its own `clear` or no `resolveOnOk` still runs.
    /// Any other event runs every rule.
    #[test]
    fn an_objects_clear_event_clears_by_object_without_running_those_rules() {
        let rule = |name: &str, extra: Value| {
            let mut doc = json!({"match": "event.type == 'state_change'", "severity": "critical"});
            doc.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            (name.to_string(), doc.to_string())
        };
        let rules = bounds::on_cel_stack(|| {
            compile(vec![
                rule("plain", json!({})),
                rule("resolving", json!({"resolveOnOk": true, "reopenWindow": "1m"})),
                rule("keyed", json!({"dedupKey": "{{ .event.host }}"})),
                rule("own-clear", json!({"clear": "event.state == 'OK'"})),
                rule(
                    "sticky",
                    json!({"resolveOnOk": false, "match": "event.type == 'state_change' && event.state != 'OK'"}),
                ),
            ])
        })
        .unwrap();
        let (tenant, object) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let event = |severity: Severity| {
            let to = if severity == Severity::Ok {
                "OK"
            } else {
                "CRITICAL"
            };
            let draft = crate::model::event::EventDraft::new(
                tenant,
                EventType::StateChange,
                Some(severity),
                json!({"host": "edge", "object": "boiler", "to": to}),
            );
            Event {
                object_id: Some(object),
                ..draft.stamped(Uuid::from_u128(99), "2026-03-01T08:00:00Z".parse().unwrap())
            }
        };
        let mut ids = 0u128;
        let mut new_id = || {
            ids += 1;
            Uuid::from_u128(ids)
        };
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let decided = bounds::on_cel_stack(|| {
            decide(&rules, &event(Severity::Ok), &mut new_id, now).unwrap()
        })
        .unwrap();
        let mut cleared = Vec::new();
        let mut by_object = None;
        for m in &decided {
            match m {
                AlertMatch::Clear { dedup_key, .. } => cleared.push(dedup_key.clone()),
                AlertMatch::ClearObject {
                    object: o, rules, ..
                } => {
                    let mut names: Vec<(String, Duration)> =
                        rules.iter().map(|(n, d)| (n.clone(), *d)).collect();
                    names.sort();
                    by_object = Some((*o, names));
                }
                _ => panic!("only clears on an OK event"),
            }
        }
        assert_eq!(cleared, ["edge", format!("{object}/own-clear").as_str()]);
        assert_eq!(
            by_object,
            Some((
                object,
                vec![
                    ("plain".to_string(), Duration::from_secs(15 * 60)),
                    ("resolving".to_string(), Duration::from_secs(60)),
                ]
            ))
        );
        let fired = bounds::on_cel_stack(|| {
            decide(&rules, &event(Severity::Critical), &mut new_id, now).unwrap()
        })
        .unwrap();
        assert_eq!(fired.len(), 5, "every rule runs on a problem");
        assert!(fired.iter().all(|m| matches!(m, AlertMatch::Fire { .. })));
    }

    #[test]
    fn templates_render_event_paths() {
        let view = json!({"object": "disk", "labels": {"site": "north"}, "attempt": 3});
        assert_eq!(
            render(
                "{{ .event.object }} at {{.event.labels.site}} #{{ .attempt }}{{ .nope }}",
                &view
            ),
            "disk at north #3"
        );
        assert_eq!(render("open {{ brace", &view), "open {{ brace");
    }
}
