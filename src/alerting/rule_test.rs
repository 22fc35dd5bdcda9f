//! `POST /alert-rules:test` and `/alert-rules/{name}:test`: what a rule would have done with
//! demo events or the stored history (SEMANTICS 3: the last 24 hours by default, at most
//! 1000 events).

use super::rules::{RuleTest, test_rule};
use super::{AlertError, Alerting, invalid};
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::alert::RuleTestRequest;
use crate::model::cel::on_cel_stack;
use crate::model::event::{MAX_LABELS, check_payload};

/// How long a rule test may evaluate.
const TEST_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);
use crate::model::config::AlertRule;
use crate::model::event::{Event, EventFilter, EventType};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// Most events a test reads from history.
const HISTORY_MAX: usize = 1000;
const HISTORY_DEFAULT: Duration = Duration::from_secs(24 * 3600);

/// A demo event as a client writes it: `type` required, the rest optional.
fn demo_event(tenant: Uuid, v: Value, id: Uuid, now: Timestamp) -> Result<Event, AlertError> {
    let bad = |why: &str| invalid("demoEvents", why.to_string());
    let kind: EventType = serde_json::from_value(v.get("type").cloned().unwrap_or_default())
        .map_err(|_| bad("each demo event needs a known type"))?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    // Demo events are held to the bounds of inbound ones: rules are sized for those.
    check_payload(&v).map_err(|e| bad(&e))?;
    if let Some(labels) = v.pointer("/payload/labels").and_then(Value::as_object)
        && labels.len() > MAX_LABELS
    {
        return Err(bad(&format!(
            "{} labels; at most {MAX_LABELS} are accepted",
            labels.len()
        )));
    }
    Ok(Event {
        id: text("id").and_then(|s| s.parse().ok()).unwrap_or(id),
        tenant_id: tenant,
        ts: text("ts").and_then(|s| s.parse().ok()).unwrap_or(now),
        kind,
        object_id: text("objectId").and_then(|s| s.parse().ok()),
        source_id: text("sourceId").or_else(|| text("source")),
        severity: text("severity").and_then(|s| s.parse().ok()),
        payload: v
            .get("payload")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()))
            .into(),
        site: None,
    })
}

impl Alerting {
    /// A rule from the request, tried on demo events or on history.
    pub async fn test_rule(
        &self,
        p: &Principal,
        req: RuleTestRequest,
    ) -> Result<RuleTest, AlertError> {
        let raw = req
            .rule
            .ok_or_else(|| invalid("rule", "rule is required"))?;
        let name = raw
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("test")
            .to_string();
        let rule = AlertRule::from_request(raw).map_err(AlertError::Invalid)?;
        let now = self.clock.now();
        let events = match req.demo_events {
            Some(demo) => demo
                .into_iter()
                .map(|v| demo_event(p.tenant, v, self.clock.new_id(), now))
                .collect::<Result<Vec<_>, _>>()?,
            None => self.history(p, req.from, req.to).await?,
        };
        self.run_test(name, rule, events).await
    }

    /// A stored rule tried on history.
    pub async fn test_stored_rule(
        &self,
        p: &Principal,
        name: String,
        req: RuleTestRequest,
    ) -> Result<RuleTest, AlertError> {
        let doc = self
            .store
            .doc(p.tenant, "alert-rules", name.clone(), false)
            .await?;
        let rule = AlertRule::parse(&doc.body)
            .ok_or_else(|| invalid("rule", "the stored rule cannot be read"))?;
        let events = self.history(p, req.from, req.to).await?;
        self.run_test(name, rule, events).await
    }

    /// Runs the test off the async workers, within `TEST_BUDGET`: past it the answer is 422.
    /// No rule runs on an event its bound (`model::cel_cost`) is past the budget on, so no
    /// evaluation outlives the answer by more than that budget.
    async fn run_test(
        &self,
        name: String,
        rule: AlertRule,
        events: Vec<Event>,
    ) -> Result<RuleTest, AlertError> {
        let (clock, now) = (self.clock.clone(), self.clock.now());
        let run = tokio::task::spawn_blocking(move || {
            on_cel_stack(move || test_rule(&name, rule, &events, &mut || clock.new_id(), now))
        });
        match tokio::time::timeout(TEST_BUDGET, run).await {
            Ok(Ok(Some(Ok(result)))) => Ok(result),
            Ok(Ok(Some(Err((event, over))))) => Err(invalid(
                "rule",
                format!("the rule is not run on event {event}: it {over}"),
            )),
            Ok(_) => Err(invalid("rule", "the rule could not be evaluated")),
            Err(_) => Err(invalid(
                "rule",
                format!(
                    "the rule ran past the test's {}s budget on these events",
                    TEST_BUDGET.as_secs()
                ),
            )),
        }
    }

    /// The tenant's stored events in the window, oldest first, at most 1000.
    async fn history(
        &self,
        p: &Principal,
        from: Option<String>,
        to: Option<String>,
    ) -> Result<Vec<Event>, AlertError> {
        let now = self.clock.now();
        let from = from
            .and_then(|s| s.parse::<Timestamp>().ok())
            .unwrap_or_else(|| {
                Timestamp::from_millis(now.as_millis() - HISTORY_DEFAULT.as_millis() as i64)
                    .unwrap_or(now)
            });
        let to = to.and_then(|s| s.parse::<Timestamp>().ok());
        let filter = EventFilter {
            tenant_id: p.tenant,
            from: Some(from),
            to,
            ..Default::default()
        };
        Ok(self.history.ascending(filter, None, HISTORY_MAX).await?)
    }
}
