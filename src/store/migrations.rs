//! Forward-only schema migrations: each in its own transaction together with the new
//! `schema_version`, so a failing migration stops start-up and leaves the last committed one.

use super::StoreError;
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{
    ACTIVE_ALERT_KEYS, ALERT_TIMERS, ALERTS, AUDIT, CHANNEL_FAILURES, CONFIG_DOCS, CONFIG_IDS,
    CONSUMER_POSITIONS, DEAD_LETTERS, DELIVERIES, DELIVERIES_DUE, DISCOVERY_SCANS, DOWNTIMES,
    ESCALATIONS, ESCALATIONS_DUE, EVENT_JOURNAL, FLOOD_HELD, FLOODS, HANDOFFS, HEARTBEATS,
    IDEMPOTENT_ANSWERS, INCIDENTS, META, OBJECT_CHILDREN, OBJECT_NAMES, OBJECTS, OVERRIDES,
    PENDING_ALERTS, RATE_BUCKETS, RECENTLY_CLEARED_ALERT_KEYS, REPORT_ARCHIVE, REPORT_CONTENT,
    RULE_BEATS, SECRETS, SESSIONS, SETTINGS, SILENCES, SITE_MIRRORS, SITE_STATUS, STATES,
    STATUS_SUBSCRIBERS, STATUS_UPDATES, STORM_INCIDENTS, STORM_INDEX, SUPPRESSED_ALERTS,
    TENANT_SLUGS, TENANTS, TOKEN_PREFIXES, TOKENS, USER_EMAILS, USERS,
};
use redb::{Database, ReadableDatabase, TableDefinition};

pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub apply: fn(&WriteTx) -> Result<(), StoreError>,
}

pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "base tables",
        apply: create_base_tables,
    },
    Migration {
        version: 2,
        name: "identity and audit tables",
        apply: create_identity_tables,
    },
    Migration {
        version: 3,
        name: "configuration documents",
        apply: create_config_tables,
    },
    Migration {
        version: 4,
        name: "hosts and services",
        apply: create_object_tables,
    },
    Migration {
        version: 5,
        name: "secrets",
        apply: create_secret_table,
    },
    Migration {
        version: 6,
        name: "heartbeats",
        apply: create_heartbeat_table,
    },
    Migration {
        version: 7,
        name: "live states",
        apply: create_state_table,
    },
    Migration {
        version: 8,
        name: "compact live states with flap history",
        apply: super::states::compact_rows,
    },
    Migration {
        version: 9,
        name: "event journal",
        apply: create_event_journal,
    },
    Migration {
        version: 10,
        name: "durable event consumers",
        apply: create_consumer_positions,
    },
    Migration {
        version: 11,
        name: "alerts",
        apply: create_alert_tables,
    },
    Migration {
        version: 12,
        name: "alert timers and pending alerts",
        apply: create_alert_timer_tables,
    },
    Migration {
        version: 13,
        name: "incidents, silences, downtimes",
        apply: create_suppression_tables,
    },
    Migration {
        version: 14,
        name: "escalation timers, deliveries, overrides",
        apply: create_notify_tables,
    },
    Migration {
        version: 15,
        name: "shift handoffs",
        apply: create_handoff_table,
    },
    Migration {
        version: 16,
        name: "settings",
        apply: create_settings_table,
    },
    Migration {
        version: 17,
        name: "federation site status",
        apply: create_site_status_table,
    },
    Migration {
        version: 18,
        name: "report archive",
        apply: create_report_tables,
    },
    Migration {
        version: 19,
        name: "rate-limit buckets and discovery scans",
        apply: create_bucket_and_scan_tables,
    },
    Migration {
        version: 20,
        name: "channel failures",
        apply: create_channel_failures_table,
    },
    Migration {
        version: 21,
        name: "AI records in tables of their own",
        apply: super::ai::move_out_of_settings,
    },
    Migration {
        version: 22,
        name: "recently cleared alert keys",
        apply: create_recently_cleared_alert_keys,
    },
    Migration {
        version: 23,
        name: "alarm floods",
        apply: create_flood_tables,
    },
    Migration {
        version: 24,
        name: "federation site mirrors",
        apply: create_site_mirror_table,
    },
    Migration {
        version: 25,
        name: "federation site mirrors by id and problem",
        apply: super::sites::index_mirrors,
    },
    Migration {
        version: 26,
        name: "status page subscribers and updates",
        apply: create_status_tables,
    },
];

pub const SCHEMA_VERSION: &str = "schema_version";

/// A row a migration writes, planned once for both backends (an old AI record moved, a
/// mirror's index row).
pub(super) struct PlannedRow {
    pub table: TableDefinition<'static, &'static [u8], &'static [u8]>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl PlannedRow {
    /// Writes the row in a redb migration's transaction (PostgreSQL's: `kv::pg`).
    pub(super) fn write(&self, tx: &WriteTx) -> Result<(), StoreError> {
        tx.open_table(self.table)?
            .insert(self.key.as_slice(), self.value.as_slice())?;
        Ok(())
    }
}

/// The version the latest migration brings a store to.
#[cfg(feature = "postgres")]
pub(crate) fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

fn create_base_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(META)?;
    tx.open_table(TENANTS)?;
    tx.open_table(TENANT_SLUGS)?;
    Ok(())
}

fn create_identity_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(AUDIT)?;
    tx.open_table(TOKENS)?;
    tx.open_table(TOKEN_PREFIXES)?;
    tx.open_table(USERS)?;
    tx.open_table(USER_EMAILS)?;
    tx.open_table(SESSIONS)?;
    Ok(())
}

fn create_config_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(CONFIG_DOCS)?;
    tx.open_table(CONFIG_IDS)?;
    Ok(())
}

fn create_object_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(OBJECTS)?;
    tx.open_table(OBJECT_NAMES)?;
    tx.open_table(OBJECT_CHILDREN)?;
    Ok(())
}

fn create_secret_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(SECRETS)?;
    Ok(())
}

fn create_heartbeat_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(HEARTBEATS)?;
    Ok(())
}

fn create_event_journal(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(EVENT_JOURNAL)?;
    Ok(())
}

fn create_consumer_positions(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(CONSUMER_POSITIONS)?;
    Ok(())
}

fn create_alert_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(ALERTS)?;
    tx.open_table(ACTIVE_ALERT_KEYS)?;
    Ok(())
}

fn create_alert_timer_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(ALERT_TIMERS)?;
    tx.open_table(PENDING_ALERTS)?;
    tx.open_table(RULE_BEATS)?;
    Ok(())
}

fn create_suppression_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(INCIDENTS)?;
    tx.open_table(STORM_INDEX)?;
    tx.open_table(STORM_INCIDENTS)?;
    tx.open_table(SILENCES)?;
    tx.open_table(DOWNTIMES)?;
    tx.open_table(IDEMPOTENT_ANSWERS)?;
    Ok(())
}

fn create_notify_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(ESCALATIONS)?;
    tx.open_table(ESCALATIONS_DUE)?;
    tx.open_table(DELIVERIES)?;
    tx.open_table(DELIVERIES_DUE)?;
    tx.open_table(DEAD_LETTERS)?;
    tx.open_table(OVERRIDES)?;
    tx.open_table(SUPPRESSED_ALERTS)?;
    Ok(())
}

fn create_handoff_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(HANDOFFS)?;
    Ok(())
}

fn create_settings_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(SETTINGS)?;
    Ok(())
}

fn create_site_status_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(SITE_STATUS)?;
    Ok(())
}

fn create_site_mirror_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(SITE_MIRRORS)?;
    Ok(())
}

fn create_report_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(REPORT_ARCHIVE)?;
    tx.open_table(REPORT_CONTENT)?;
    Ok(())
}

fn create_bucket_and_scan_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(RATE_BUCKETS)?;
    tx.open_table(DISCOVERY_SCANS)?;
    Ok(())
}

fn create_channel_failures_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(CHANNEL_FAILURES)?;
    Ok(())
}

fn create_recently_cleared_alert_keys(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(RECENTLY_CLEARED_ALERT_KEYS)?;
    Ok(())
}

fn create_flood_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(FLOODS)?;
    tx.open_table(FLOOD_HELD)?;
    Ok(())
}

fn create_status_tables(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(STATUS_SUBSCRIBERS)?;
    tx.open_table(STATUS_UPDATES)?;
    Ok(())
}

fn create_state_table(tx: &WriteTx) -> Result<(), StoreError> {
    tx.open_table(STATES)?;
    Ok(())
}

/// The schema version a store's tables are at (0: none yet). PostgreSQL's tables are made at
/// the latest version and say so here too, so a backup of either restores alike.
pub(crate) fn current_version(tx: &ReadTx) -> Result<u32, StoreError> {
    let Some(meta) = tx.open_existing(META)? else {
        return Ok(0);
    };
    let Some(v) = meta.get(SCHEMA_VERSION)? else {
        return Ok(0);
    };
    let bytes: [u8; 4] = v
        .value()
        .try_into()
        .map_err(|_| StoreError::Corrupt("schema_version is not 4 bytes".into()))?;
    Ok(u32::from_be_bytes(bytes))
}

pub(crate) fn apply(db: &Database, migrations: &[Migration]) -> Result<(), StoreError> {
    let read = ReadTx::from_redb(db.begin_read().map_err(StoreError::from_redb)?);
    let version = current_version(&read)?;
    drop(read);
    let supported = migrations.last().map_or(0, |m| m.version);
    if version > supported {
        tracing::warn!(
            found = version,
            supported,
            "the store was written by a newer svc; running against a newer schema is not supported long-term"
        );
    }
    for m in migrations.iter().filter(|m| m.version > version) {
        let fail = |reason: String| StoreError::Migration {
            version: m.version,
            name: m.name,
            reason,
        };
        let mut tx = db.begin_write().map_err(StoreError::from_redb)?;
        tx.set_quick_repair(true);
        let tx = WriteTx::from_redb(tx);
        (m.apply)(&tx).map_err(|e| fail(e.to_string()))?;
        tx.open_table(META)?
            .insert(SCHEMA_VERSION, &m.version.to_be_bytes()[..])?;
        tx.commit().map_err(|e| fail(e.to_string()))?;
        tracing::info!(
            version = m.version,
            name = m.name,
            "schema migration applied"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(db: &Database) -> u32 {
        current_version(&ReadTx::from_redb(db.begin_read().unwrap())).unwrap()
    }

    fn broken(_: &WriteTx) -> Result<(), StoreError> {
        Err(StoreError::Internal("boom".into()))
    }

    fn second(tx: &WriteTx) -> Result<(), StoreError> {
        tx.open_table(META)?.insert("second", &b"yes"[..])?;
        Ok(())
    }

    #[test]
    fn a_failing_migration_keeps_the_last_committed_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("m.redb")).unwrap();
        assert_eq!(version(&db), 0);
        let failing = [
            Migration {
                version: 1,
                name: "base",
                apply: create_base_tables,
            },
            Migration {
                version: 2,
                name: "broken",
                apply: broken,
            },
        ];
        let err = apply(&db, &failing).unwrap_err();
        assert!(
            matches!(err, StoreError::Migration { version: 2, .. }),
            "{err}"
        );
        assert_eq!(version(&db), 1);
        let fixed = [
            Migration {
                version: 1,
                name: "base",
                apply: broken,
            },
            Migration {
                version: 2,
                name: "second",
                apply: second,
            },
        ];
        apply(&db, &fixed).unwrap();
        assert_eq!(version(&db), 2, "version 1 is not applied again");
        apply(&db, &fixed).unwrap();
        let tx = db.begin_read().unwrap();
        let meta = tx.open_table(META).unwrap();
        assert_eq!(meta.get("second").unwrap().unwrap().value(), b"yes");
    }
}
