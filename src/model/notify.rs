//! Notification (SPEC 2.4, 2.5; CONTRACT 3; SEMANTICS 4-6): escalation policies, contacts,
//! contact groups, schedules and channels as their documents hold them (the reference's
//! shapes), schedule overrides, escalation timers and deliveries (outbox items; a delivery
//! out of attempts is a dead letter).

use super::event::{EventDraft, EventType, Severity};
use super::{GoDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalationPolicy {
    pub steps: Vec<EscalationStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// An ack lapses after this long unless the `:ack` says otherwise (PagerDuty's
    /// acknowledgement timeout): the alert opens again and its escalation resumes at the step
    /// that was acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeout: Option<GoDuration>,
    /// The one who acked is reminded this often while the alert stays acked (Grafana
    /// OnCall's acknowledge reminder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_reminder: Option<GoDuration>,
    /// A reminder not answered (by an `:ack` again) within this long withdraws the ack; `true`
    /// (Grafana OnCall's switch) is 5 minutes, `false` never.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "unack_wait"
    )]
    pub unack_if_no_response: Option<GoDuration>,
    /// Named `time-intervals` during which this policy does not page (Alertmanager's
    /// `mute_time_intervals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mute_time_intervals: Vec<String>,
    /// Named `time-intervals` outside which this policy does not page (Alertmanager's
    /// `active_time_intervals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_time_intervals: Vec<String>,
}

/// `unackIfNoResponse`: a duration, or a switch (`true`: Grafana OnCall's 5 minutes).
fn unack_wait<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<GoDuration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wait {
        Switch(bool),
        After(GoDuration),
    }
    Ok(match Option::<Wait>::deserialize(d)? {
        None | Some(Wait::Switch(false)) => None,
        Some(Wait::Switch(true)) => Some(GoDuration::from_secs(300)),
        Some(Wait::After(wait)) => Some(wait),
    })
}

impl EscalationPolicy {
    /// A stored policy document's body (validated at save).
    pub fn parse(body: &str) -> Option<EscalationPolicy> {
        super::fault::readable("an escalation policy", serde_json::from_str(body))
    }

    /// What the policy says of its alerts' acknowledgements.
    pub fn ack_policy(&self) -> crate::model::alert::AckPolicy {
        crate::model::alert::AckPolicy {
            timeout: self.ack_timeout,
            reminder: self.ack_reminder,
            unack_if_no_response: self.unack_if_no_response,
        }
    }
}

/// One step (SPEC 2.4): `after` is an offset from the alert's opening.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalationStep {
    pub after: GoDuration,
    /// Channel types (or names): a complete override of the contacts' preferences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// Repeats after the first firing: 3 means four firings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_repeats: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_every: Option<GoDuration>,
    #[serde(default)]
    pub unless_acked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<EscalationTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<EscalationAction>,
}

/// Who a step notifies: a schedule's on-call person, else a contact group, else a contact.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalationTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_group: Option<String>,
    /// `backup`: the schedule's next person in rotation instead of the one on call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EscalationAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servicenow: Option<ServiceNowAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<TicketAction>,
    /// A channel name (of any type), or an `http(s)://` URL posted the webhook body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceNowAction {
    pub assignment_group: String,
    pub auto_close: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TicketAction {
    pub channel: String,
    #[serde(default)]
    pub auto_close: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Contact {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    /// The call address of the contact's pager on the site's ESPA 4.4.4 paging system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pager: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default)]
    pub preferences: Vec<ChannelPreference>,
    /// What the contact is told about their on-call shifts beyond the handover itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_notices: Option<HandoffNotices>,
}

/// Shift-change notices (issue 70; PagerDuty's handoff notification rules, Grafana OnCall's
/// going-on-call push), each over the contact's preferred channel.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffNotices {
    /// Told this long before each shift starts (`[24h, 15m]`).
    #[serde(default)]
    pub advance: Vec<GoDuration>,
    /// Told when a shift ends.
    #[serde(default)]
    pub off_call: bool,
    /// Told when a schedule change moves their shifts in the next 14 days.
    #[serde(default)]
    pub schedule_changed: bool,
    /// The handover notices carry the handover digest.
    #[serde(default)]
    pub digest: bool,
}

/// How far ahead shift notices look (a schedule change moving a shift within it is told).
pub const HANDOFF_HORIZON: std::time::Duration = std::time::Duration::from_secs(14 * 86_400);

/// `GET /api/v1/contacts/{name}:data-export`: what the service holds about a contact (a data
/// subject's disclosure): the contact, the changes to it, the schedules naming it, and the
/// notifications sent to it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactDisclosure {
    pub generated_at: Timestamp,
    /// The contact document as the API shows it.
    pub contact: Value,
    /// The audit entries of changes to the contact, newest first.
    pub audit: Vec<super::audit::AuditEntry>,
    /// The schedules whose layers or overrides name the contact.
    pub schedules: Vec<String>,
    /// The `notification` events of deliveries to the contact, newest first.
    pub notifications: Vec<super::event::Event>,
}

/// A contact's rule for how to reach them: `channels` (types or names, tried in order on
/// permanent failure) when the alert is at least `severity` and now is inside `period`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelPreference {
    pub channels: Vec<String>,
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContactGroup {
    /// Contact names or ids.
    pub members: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp_group: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    pub time_zone: String,
    #[serde(default)]
    pub layers: Vec<Rotation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A layer (the reference's `Rotation`): shifts of one `unit` each, handed over at the
/// anchor's wall-clock time in the schedule's time zone, through `participants` in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rotation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When the first participant's first shift starts.
    pub anchor: Timestamp,
    /// `daily`, `weekly` or `custom` (shifts of `length`).
    pub unit: String,
    /// A custom shift's length (default 24 h); whole days keep the wall-clock handover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<GoDuration>,
    /// Contact ids or names, in rotation order.
    pub participants: Vec<String>,
    /// Weekday (`monday` or `mon`) → `HH:MM-HH:MM` ranges when the layer applies; empty:
    /// always.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub restriction: BTreeMap<String, Vec<String>>,
}

/// A notification channel (the reference's `NotificationChannel`); `config` values may name
/// secrets as `$SECRET:name$`, opened only to send.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Channel {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Settings as text, the reference's shape; a number or `true`/`false` is taken as its
    /// text (`"port": 2525`). What each kind reads is `channel::ChannelConfig`.
    #[serde(default, deserialize_with = "super::channel::settings")]
    pub config: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

fn enabled() -> bool {
    true
}

/// The kinds of channel (a channel's `type`). Each kind's checks at save
/// (`config::check_channel_config`) and its sender (`notify::channels::send`) match on this
/// without a catch-all, so a kind added here without either does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelKind {
    Email,
    Push,
    Webhook,
    Sms,
    Voice,
    Espa,
    Slack,
    Teams,
    Ntfy,
    Gotify,
    Servicenow,
    Script,
}

impl ChannelKind {
    pub const ALL: [ChannelKind; 12] = [
        Self::Email,
        Self::Push,
        Self::Webhook,
        Self::Sms,
        Self::Voice,
        Self::Espa,
        Self::Slack,
        Self::Teams,
        Self::Ntfy,
        Self::Gotify,
        Self::Servicenow,
        Self::Script,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Push => "push",
            Self::Webhook => "webhook",
            Self::Sms => "sms",
            Self::Voice => "voice",
            Self::Espa => "espa",
            Self::Slack => "slack",
            Self::Teams => "teams",
            Self::Ntfy => "ntfy",
            Self::Gotify => "gotify",
            Self::Servicenow => "servicenow",
            Self::Script => "script",
        }
    }

    /// The kind a channel's `type` names, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether it posts to `config.url` (which it then needs).
    pub fn posts_to_url(self) -> bool {
        match self {
            Self::Webhook
            | Self::Slack
            | Self::Teams
            | Self::Ntfy
            | Self::Gotify
            | Self::Servicenow => true,
            Self::Email | Self::Push | Self::Sms | Self::Voice | Self::Espa | Self::Script => false,
        }
    }
}

/// Someone else on call for a while (`/schedules/{name}/overrides`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Override {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub schedule_id: Uuid,
    pub contact_id: String,
    pub start: Timestamp,
    pub end: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub created_at: Timestamp,
    pub created_by: String,
}

/// The reference's `overrideBody`; `contactId` may be a contact's name too.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideBody {
    /// The schedule's name; the path names it already, so it may be left out, and one that
    /// differs from the path's is refused.
    #[serde(default)]
    pub schedule: Option<String>,
    pub contact_id: Option<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// Who is on call from `start` to `end` (the reference's `OnCallShift`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OnCallShift {
    pub contact_id: String,
    /// The contact's name.
    pub contact: String,
    pub start: Timestamp,
    pub end: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    #[serde(rename = "override")]
    pub is_override: bool,
}

/// One schedule of `GET /api/v1/oncall/now`: its shifts now (none when nobody is on call) and
/// the contacts they name, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OnCallNow {
    pub schedule: String,
    pub shifts: Vec<OnCallShift>,
    pub contacts: Vec<serde_json::Value>,
}

/// A persisted escalation step timer: step `step` of the alert's policy fires (for the
/// `repeat`th time) at `due`; `base` is the time `after` counts from (the opening, or the
/// snooze's wake-up). `object_id` is the alert's object: its partition of the stream says which
/// process fires it (none in timers armed before it was kept: they go by their tenant).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EscalationTimer {
    pub tenant_id: Uuid,
    pub alert_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    pub step: u32,
    pub repeat: u32,
    pub base: Timestamp,
    pub due: Timestamp,
}

/// What a delivery says: the alert (or a test, or an event for a `webhooks` subscription)
/// and how to act on it; rendered per channel type when sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// `alert`, `test` or `event`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_id: Option<Uuid>,
    /// The alert's short id (the first 8 hex digits) for `ACK <id>` replies.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub short_id: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    pub severity: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy: String,
    pub step: u32,
    pub repeat: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub contact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ack_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alert_url: String,
    /// An action's parameters (a ticket's `params`, ServiceNow's `assignmentGroup`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// The event of a `webhooks` subscription delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Value>,
    pub at: Timestamp,
}

/// A channel's retryable failures in a row (across deliveries) and when the last was: what
/// makes the courier count it as down. Kept in the store where several processes serve it
/// (PostgreSQL), so a channel one process found down is down for the others too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelFailures {
    pub in_a_row: u32,
    pub last: Timestamp,
}

/// An outbox item (CONTRACT 3's dead-letter shape plus where it goes): sent by the courier
/// with retries; `dead` once its attempts ran out or its channel refused it for good.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub id: Uuid,
    pub tenant_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<Uuid>,
    /// The channel's name (empty for a bare URL).
    pub channel: String,
    /// The channel type.
    pub kind: String,
    pub payload: Message,
    pub attempts: u32,
    pub next_try: Timestamp,
    pub dead: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    /// Where the channel sends it: the contact's address or phone; empty for channels with a
    /// URL of their own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_id: Option<Uuid>,
    /// The `webhooks` subscription this delivers for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<Uuid>,
    /// A bare URL (a step's `action.webhook`) instead of a channel.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// The contact's next channels (types or names), tried in order when this one fails
    /// for good.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
    /// The database session of the courier that claimed it, while it is claimed beside other
    /// processes (PostgreSQL): the claim lapses with that session. Never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(skip))]
    pub claimed_by: Option<i64>,
}

#[cfg(test)]
impl Delivery {
    /// A webhook notice due at `now`, for tests of the outbox.
    pub fn test_notice(id: Uuid, tenant: Uuid, now: Timestamp) -> Delivery {
        Delivery {
            id,
            tenant_id: tenant,
            channel_id: None,
            channel: "ops".into(),
            kind: "webhook".into(),
            payload: Message::notice("test", "t".into(), "s".into(), "info", now),
            attempts: 0,
            next_try: now,
            dead: false,
            last_error: None,
            created_at: now,
            target: String::new(),
            contact_id: None,
            webhook_id: None,
            url: String::new(),
            fallbacks: Vec::new(),
            claimed_by: None,
        }
    }
}

impl Message {
    /// A message about no alert (a test, a handoff, a subscribed event): only what is given.
    pub fn notice(
        kind: &str,
        title: String,
        summary: String,
        severity: &str,
        at: Timestamp,
    ) -> Message {
        Message {
            kind: kind.into(),
            alert_id: None,
            short_id: String::new(),
            title,
            summary,
            severity: severity.into(),
            status: String::new(),
            labels: BTreeMap::new(),
            object_id: None,
            policy: String::new(),
            step: 0,
            repeat: 0,
            contact: String::new(),
            ack_url: String::new(),
            alert_url: String::new(),
            params: BTreeMap::new(),
            event: None,
            at,
        }
    }
}

/// A target shown in events: enough to recognise, not enough to use.
pub fn mask(target: &str) -> String {
    if let Some((user, domain)) = target.split_once('@') {
        let first: String = user.chars().take(1).collect();
        return format!("{first}***@{domain}");
    }
    if let Some(rest) = target
        .strip_prefix("https://")
        .or_else(|| target.strip_prefix("http://"))
    {
        let host = rest.split(['/', '?']).next().unwrap_or_default();
        let scheme = if target.starts_with("https") {
            "https"
        } else {
            "http"
        };
        return format!("{scheme}://{host}/***");
    }
    let chars: Vec<char> = target.chars().collect();
    if chars.len() <= 4 {
        return "***".into();
    }
    let head: String = chars[..3.min(chars.len() - 4)].iter().collect();
    let tail: String = chars[chars.len() - 3..].iter().collect();
    format!("{head}***{tail}")
}

impl Delivery {
    /// A new delivery of `payload` on a channel of type `kind`, due at the message's time;
    /// where it goes is set by the caller.
    pub fn new(id: Uuid, tenant_id: Uuid, kind: &str, payload: Message) -> Delivery {
        Delivery {
            id,
            tenant_id,
            channel_id: None,
            channel: String::new(),
            kind: kind.into(),
            attempts: 0,
            next_try: payload.at,
            dead: false,
            last_error: None,
            created_at: payload.at,
            target: String::new(),
            contact_id: None,
            webhook_id: None,
            url: String::new(),
            fallbacks: Vec::new(),
            claimed_by: None,
            payload,
        }
    }

    /// The `notification` event of one attempt (SPEC 6.2), its target masked.
    pub fn attempt_event(
        &self,
        status: &str,
        error: Option<&str>,
        latency_ms: Option<u64>,
    ) -> EventDraft {
        let mut payload = self.event_payload(status);
        if let Some(e) = error {
            payload["error"] = json!(e);
        }
        if let Some(ms) = latency_ms {
            payload["latencyMs"] = json!(ms);
        }
        self.notification(payload)
    }

    /// The `notification` event of a delivery held for a flood's digest (`held`, with the
    /// flood's `scope`) or sent in one (`digested`, with the digest's `digestId`).
    pub fn digest_event(&self, status: &str, field: &str, value: Value) -> EventDraft {
        let mut payload = self.event_payload(status);
        payload[field] = value;
        self.notification(payload)
    }

    fn event_payload(&self, status: &str) -> Value {
        let mut payload = json!({
            "alertId": self.payload.alert_id,
            "stepIndex": self.payload.step,
            "repeat": self.payload.repeat,
            "channel": if self.channel.is_empty() { &self.kind } else { &self.channel },
            "status": status,
            "attempt": self.attempts,
            "deliveryId": self.id,
        });
        if let Some(id) = self.channel_id {
            payload["channelId"] = json!(id);
        }
        if let Some(id) = self.contact_id {
            payload["contactId"] = json!(id);
            payload["contact"] = json!(self.payload.contact);
        }
        let target = if self.target.is_empty() {
            &self.url
        } else {
            &self.target
        };
        if !target.is_empty() {
            payload["target"] = json!(mask(target));
        }
        if !self.payload.labels.is_empty() {
            payload["labels"] = json!(self.payload.labels);
        }
        payload
    }

    fn notification(&self, payload: Value) -> EventDraft {
        let mut draft = EventDraft::new(
            self.tenant_id,
            EventType::Notification,
            Some(Severity::Info),
            payload,
        );
        draft.object_id = self.payload.object_id;
        draft.source_id = self.payload.alert_id.map(|a| a.to_string());
        draft
    }
}

/// A `webhooks` document: events of `types` (all when empty) whose labels match `selector`,
/// POSTed to `url`, signed with `secret` (which may be `$SECRET:name$`) when set.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookSubscription {
    pub url: String,
    #[serde(default)]
    pub types: Vec<super::event::EventType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(default)]
    pub disabled: bool,
}

/// What `POST /channels/{name}:test-notification` takes (the reference's `testSendRequest`).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSend {
    #[serde(default)]
    pub target: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_kinds_are_named_once() {
        for kind in ChannelKind::ALL {
            assert_eq!(ChannelKind::parse(kind.as_str()), Some(kind));
        }
        let names: std::collections::BTreeSet<&str> =
            ChannelKind::ALL.map(ChannelKind::as_str).into();
        assert_eq!(names.len(), ChannelKind::ALL.len());
        assert_eq!(ChannelKind::parse("pigeon"), None);
        assert!(ChannelKind::Servicenow.posts_to_url() && !ChannelKind::Sms.posts_to_url());
    }

    #[test]
    fn targets_are_masked() {
        assert_eq!(mask("ada@example.com"), "a***@example.com");
        assert_eq!(mask("+4917012345678"), "+49***678");
        assert_eq!(
            mask("https://hooks.example.com/T000/secret?x=1"),
            "https://hooks.example.com/***"
        );
        assert_eq!(mask("1234"), "***");
    }

    #[test]
    fn unack_if_no_response_is_a_duration_or_oncalls_switch() {
        let policy = |v: serde_json::Value| {
            serde_json::from_value::<EscalationPolicy>(json!({"steps": [], "unackIfNoResponse": v}))
                .unwrap()
                .unack_if_no_response
        };
        assert_eq!(policy(json!("10m")), Some(GoDuration::from_secs(600)));
        assert_eq!(policy(json!(true)), Some(GoDuration::from_secs(300)));
        assert_eq!(policy(json!(false)), None);
    }
}
