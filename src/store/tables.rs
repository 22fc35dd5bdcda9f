//! Every table of the database, named `key_value` by what it holds.

use super::StoreError;
use super::kv::{ReadTx, WriteTx};
use redb::{TableDefinition, WriteTransaction};

/// Store-wide settings: `schema_version` and the like.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Tenants by id (UUID as u128, so key order is id order).
pub const TENANTS: TableDefinition<u128, &[u8]> = TableDefinition::new("tenant_by_id");
/// Tenant ids by slug.
pub const TENANT_SLUGS: TableDefinition<&str, u128> = TableDefinition::new("tenant_id_by_slug");

/// The audit chain by sequence number.
pub const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_entry_by_seq");
/// API tokens by tenant + token id.
pub const TOKENS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("token_by_tenant_id");
/// Token keys by secret prefix + token id.
pub const TOKEN_PREFIXES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("token_key_by_prefix");

/// Users by tenant + user id.
pub const USERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("user_by_tenant_id");
/// User keys by lower-cased e-mail; e-mail addresses are unique across the instance.
pub const USER_EMAILS: TableDefinition<&str, &[u8]> = TableDefinition::new("user_key_by_email");
/// Sessions by their id: the cookie carries only the id, so this index is instance-wide.
pub const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("session_by_id");

/// Configuration documents by tenant + kind + name.
pub const CONFIG_DOCS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("config_doc_by_tenant_kind_name");
/// Configuration document keys by tenant + document id.
pub const CONFIG_IDS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("config_key_by_tenant_id");

/// Hosts and services by tenant + id.
pub const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("object_by_tenant_id");
/// Object ids by tenant + kind + host id (nil for hosts) + name.
pub const OBJECT_NAMES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("object_id_by_name");
/// tenant + host id + service id → (): a host's services.
pub const OBJECT_CHILDREN: TableDefinition<&[u8], ()> = TableDefinition::new("service_by_host");

/// Sealed secrets by tenant + name.
pub const SECRETS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("secret_by_tenant_name");

/// Heartbeats by tenant + name.
pub const HEARTBEATS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("heartbeat_by_tenant_name");

/// Live check states by tenant + object id.
pub const STATES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("state_by_tenant_object");
/// Events recorded in the transaction of their cause, by journal sequence, until the event
/// filer has stored them in their month file.
pub const EVENT_JOURNAL: TableDefinition<u64, &[u8]> = TableDefinition::new("event_by_journal_seq");

/// The id of the last event each durable consumer has committed the work of, by consumer name.
pub const CONSUMER_POSITIONS: TableDefinition<&str, &[u8]> =
    TableDefinition::new("event_position_by_consumer");

/// Alerts by tenant + id (UUIDv7, so key order is opening order).
pub const ALERTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("alert_by_tenant_id");
/// The id of the active (open or acked) alert holding each tenant + dedup key.
pub const ACTIVE_ALERT_KEYS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("active_alert_id_by_tenant_dedup_key");

/// The id of the resolved alert a tenant + dedup key reopens while its source chatters (its
/// `reopenUntil` not passed yet).
pub const RECENTLY_CLEARED_ALERT_KEYS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("recently_cleared_alert_id_by_tenant_dedup_key");

/// Active alerts by the time of a timer (a snooze's end, `autoCloseAfter`): ms (big-endian) +
/// tenant + id.
pub const ALERT_TIMERS: TableDefinition<&[u8], ()> = TableDefinition::new("alert_by_timer_end");
/// Alerts a rule with `pendingFor` will open once the condition has held long enough, by
/// tenant + dedup key.
pub const PENDING_ALERTS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("pending_alert_by_tenant_dedup_key");

/// When each heartbeat rule's source was last heard (ms), by tenant + rule name.
pub const RULE_BEATS: TableDefinition<&[u8], i64> =
    TableDefinition::new("rule_heartbeat_by_tenant_rule");

/// Alert opens by tenant + label pair (`k=v`, length-prefixed) + open time + alert id, for
/// alarm-storm correlation; entries older than the storm window are pruned as it runs.
pub const STORM_INDEX: TableDefinition<&[u8], ()> =
    TableDefinition::new("alert_open_by_label_pair");

/// The incident of each label pair's current alarm storm, by the `STORM_INDEX` pair prefix.
pub const STORM_INCIDENTS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("storm_incident_by_label_pair");

/// The scopes in flood, by tenant + scope (`label=value`, or empty for the tenant).
pub const FLOODS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("flood_by_tenant_scope");
/// Deliveries held for a flooded scope's next digest, by tenant + scope (length-prefixed) +
/// delivery id.
pub const FLOOD_HELD: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("held_delivery_by_tenant_scope_id");

/// Incidents by tenant + id.
pub const INCIDENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("incident_by_tenant_id");
/// Silences by tenant + id.
pub const SILENCES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("silence_by_tenant_id");
/// Downtimes by tenant + id.
pub const DOWNTIMES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("downtime_by_tenant_id");
/// Answers of `Idempotency-Key` requests by tenant + key.
pub const IDEMPOTENT_ANSWERS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("idempotent_answer_by_tenant_key");

/// Escalation timers by alert id + step (big-endian u32): one per step of an alert's chain.
pub const ESCALATIONS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("escalation_timer_by_alert_step");
/// The same timers by due time: ms (big-endian) + alert id + step.
pub const ESCALATIONS_DUE: TableDefinition<&[u8], ()> =
    TableDefinition::new("escalation_timer_by_due");
/// Deliveries waiting to be sent, by id.
pub const DELIVERIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("delivery_by_id");
/// Deliveries by their next try: ms (big-endian) + id.
pub const DELIVERIES_DUE: TableDefinition<&[u8], ()> = TableDefinition::new("delivery_by_next_try");
/// Deliveries that ran out of attempts, by tenant + id.
pub const DEAD_LETTERS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("dead_delivery_by_tenant_id");
/// Schedule overrides by tenant + schedule id + override id.
pub const OVERRIDES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("override_by_tenant_schedule_id");
/// Alerts with an escalation policy that opened suppressed, by tenant + alert id: their
/// chain starts when the suppression lifts.
pub const SUPPRESSED_ALERTS: TableDefinition<&[u8], ()> =
    TableDefinition::new("suppressed_alert_by_tenant_id");

/// The start (ms) of the last shift whose incoming person was told, by tenant + schedule id.
pub const HANDOFFS: TableDefinition<&[u8], i64> =
    TableDefinition::new("handoff_by_tenant_schedule");

/// Small per-tenant settings by tenant + key: branding, a user's preferences, push
/// subscriptions (`push/<actor>/<endpoint digest>`).
pub const SETTINGS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("setting_by_tenant_key");

/// What the main knows of each federation site's connection, by tenant + site name.
pub const SITE_STATUS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("site_status_by_tenant_name");

/// The main's mirrors of each federation site's objects and open alerts, by tenant + `o`
/// (object) or `a` (alert) + site name + 0 + the site's id.
pub const SITE_MIRRORS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("site_mirror_by_tenant_site_id");

/// Where each mirror is, by tenant + `o` or `a` + the site's id: its key in `SITE_MIRRORS`, so
/// one record is found without reading every site's.
pub const SITE_MIRROR_IDS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("site_mirror_key_by_tenant_kind_id");

/// The mirrored objects in a problem state, by their key in `SITE_MIRRORS` (values empty): the
/// problems inbox reads these, not every mirrored object.
pub const SITE_PROBLEMS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("site_problem_by_mirror_key");

pub const META_LAST_OPEN: &str = "last_open_write";

/// Archived report renderings by (tenant, report name, 0, id); their content by id.
pub const REPORT_ARCHIVE: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("report_by_tenant_name_id");
pub const REPORT_CONTENT: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("report_content_by_id");

/// Rate-limit buckets by limiter name + 0 + client address (text), where several processes
/// serve the store.
pub const RATE_BUCKETS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("rate_bucket_by_limiter_address");

/// A channel's failures in a row by tenant + channel (its name, or a bare URL), where several
/// processes serve the store.
pub const CHANNEL_FAILURES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("channel_failures_by_tenant_channel");

/// Network discovery scans by tenant + scan id.
pub const DISCOVERY_SCANS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("discovery_scan_by_tenant_id");

/// The AI agent's chats and conversations (threads) by tenant + id, without their messages.
pub const AI_CHATS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("ai_chat_by_tenant_id");
pub const AI_CONVERSATIONS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("ai_conversation_by_tenant_id");
/// A thread's messages by tenant + thread id + message id (UUIDv7: the order they were written).
pub const AI_MESSAGES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("ai_message_by_tenant_thread_id");
/// Tool calls proposed to a person by tenant + id.
pub const AI_ACTIONS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("ai_action_by_tenant_id");
/// A tenant's token use by tenant + month (`2026-12`).
pub const AI_USAGE: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("ai_usage_by_tenant_month");

/// Status page subscribers by tenant + page + 0 + id.
pub const STATUS_SUBSCRIBERS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("status_subscriber_by_tenant_page_id");
/// Incidents' public status updates by tenant + id (UUIDv7: posting order).
pub const STATUS_UPDATES: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("status_update_by_tenant_id");

/// Every table of the main database, handed to `$apply!(args…, [TABLES])`: the one list the
/// backups, the copy between backends and the PostgreSQL schema are made from.
macro_rules! every_table {
    ($apply:ident, $($arg:expr),*) => {
        $apply!($($arg,)* [
            META,
            TENANTS,
            TENANT_SLUGS,
            AUDIT,
            TOKENS,
            TOKEN_PREFIXES,
            USERS,
            USER_EMAILS,
            SESSIONS,
            CONFIG_DOCS,
            CONFIG_IDS,
            OBJECTS,
            OBJECT_NAMES,
            OBJECT_CHILDREN,
            SECRETS,
            HEARTBEATS,
            STATES,
            EVENT_JOURNAL,
            CONSUMER_POSITIONS,
            ALERTS,
            ACTIVE_ALERT_KEYS,
            RECENTLY_CLEARED_ALERT_KEYS,
            ALERT_TIMERS,
            PENDING_ALERTS,
            RULE_BEATS,
            STORM_INDEX,
            STORM_INCIDENTS,
            FLOODS,
            FLOOD_HELD,
            INCIDENTS,
            SILENCES,
            DOWNTIMES,
            IDEMPOTENT_ANSWERS,
            ESCALATIONS,
            ESCALATIONS_DUE,
            DELIVERIES,
            DELIVERIES_DUE,
            DEAD_LETTERS,
            OVERRIDES,
            SUPPRESSED_ALERTS,
            HANDOFFS,
            SETTINGS,
            SITE_STATUS,
            SITE_MIRRORS,
            SITE_MIRROR_IDS,
            SITE_PROBLEMS,
            REPORT_ARCHIVE,
            REPORT_CONTENT,
            RATE_BUCKETS,
            DISCOVERY_SCANS,
            CHANNEL_FAILURES,
            AI_CHATS,
            AI_CONVERSATIONS,
            AI_MESSAGES,
            AI_ACTIONS,
            AI_USAGE,
            STATUS_SUBSCRIBERS,
            STATUS_UPDATES
        ])
    };
}

/// Copies every table for a backup (`backup::snapshot_into` refuses a table left off).
pub(crate) fn copy_all(from: &ReadTx, to: &WriteTx) -> Result<Vec<String>, StoreError> {
    use super::backup::copy_tables;
    every_table!(copy_tables, from, to)
}

/// The names of every table.
#[cfg(feature = "postgres")]
pub(crate) fn names() -> Vec<&'static str> {
    macro_rules! names {
        ([$($table:expr),*]) => {
            vec![$(redb::TableHandle::name(&$table)),*]
        };
    }
    every_table!(names,)
}

/// A tiny write that proves the file accepts commits.
pub(crate) fn touch_meta(tx: &WriteTransaction) -> Result<(), StoreError> {
    let mut meta = tx.open_table(META).map_err(StoreError::from_redb)?;
    meta.insert(META_LAST_OPEN, &[1u8][..])
        .map_err(StoreError::from_redb)?;
    Ok(())
}
