//! The audit chain: appended inside the mutation's own transaction, verified end to end and
//! against a checkpoint file beside the database (so rewriting the whole chain is detected too).

use super::codec::{decode, encode};
use super::kv::{ReadTx, Readable, WriteTx};
use super::tables::{AUDIT, META};
use super::{Store, StoreError};
use crate::model::audit::{
    AuditDraft, AuditEntry, AuditFilter, AuditVerification, GENESIS_HASH, chain_hash,
};
use crate::runtime::Locked;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

const HEAD: &str = "audit_head";
/// A checkpoint is written every this many entries, and at shutdown.
const CHECKPOINT_EVERY: u64 = 1000;
pub(super) const CHECKPOINT_FILE: &str = "audit.checkpoint";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    pub seq: u64,
    pub hash: String,
}

fn read_head(tx: &WriteTx) -> Result<ChainHead, StoreError> {
    let meta = tx.open_table(META)?;
    let head = meta.get(HEAD)?;
    match head {
        Some(v) => decode(v.value()),
        None => Ok(ChainHead {
            seq: 0,
            hash: GENESIS_HASH.into(),
        }),
    }
}

pub(super) fn read_head_ro(tx: &ReadTx) -> Result<ChainHead, StoreError> {
    let meta = tx.open_table(META)?;
    match meta.get(HEAD)? {
        Some(v) => decode(v.value()),
        None => Ok(ChainHead {
            seq: 0,
            hash: GENESIS_HASH.into(),
        }),
    }
}

impl Store {
    fn checkpoint_path(&self) -> PathBuf {
        self.path.with_file_name(CHECKPOINT_FILE)
    }

    /// Appends one entry in `tx`; the caller's commit makes it durable with the change it records.
    pub(super) fn append_audit(
        &self,
        tx: &WriteTx,
        draft: AuditDraft,
    ) -> Result<AuditEntry, StoreError> {
        let head = read_head(tx)?;
        let mut entry = AuditEntry {
            seq: head.seq + 1,
            ts: draft.ts,
            tenant_id: draft.tenant_id,
            actor_type: draft.actor.actor_type,
            actor_id: draft.actor.actor_id,
            action: draft.action,
            resource: draft.resource,
            source_ip: draft.actor.source_ip,
            request_id: draft.actor.request_id,
            before: draft.before,
            after: draft.after,
            prev_hash: head.hash,
            hash: String::new(),
        };
        entry.hash = chain_hash(&entry);
        let new_head = ChainHead {
            seq: entry.seq,
            hash: entry.hash.clone(),
        };
        tx.open_table(AUDIT)?
            .insert(entry.seq, encode(&entry)?.as_slice())?;
        tx.open_table(META)?
            .insert(HEAD, encode(&new_head)?.as_slice())?;
        if entry.seq.is_multiple_of(CHECKPOINT_EVERY) {
            *self.pending_checkpoint.locked() = Some(new_head);
        }
        Ok(entry)
    }

    /// Called after each transaction: the checkpoint it asked for, to write once it is durable
    /// (or to drop, when it did not commit).
    pub(super) fn take_pending_checkpoint(&self) -> Option<ChainHead> {
        self.pending_checkpoint.locked().take()
    }

    pub(super) fn write_checkpoint(&self, head: &ChainHead) {
        let path = self.checkpoint_path();
        let tmp = path.with_extension("tmp");
        // A head that cannot be written out leaves the last checkpoint, never an empty one.
        let result = serde_json::to_vec(head)
            .map_err(std::io::Error::other)
            .and_then(|body| std::fs::write(&tmp, body))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = result {
            tracing::error!(error = %e, "could not write the audit checkpoint");
        }
    }

    /// Writes the current chain head as the checkpoint (at shutdown).
    pub(super) fn checkpoint_now(&self) {
        match self.read_blocking(read_head_ro) {
            Ok(head) if head.seq > 0 => self.write_checkpoint(&head),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "could not read the audit head for a checkpoint"),
        }
    }

    /// Newest first, at most `limit` entries matching `filter`.
    pub(crate) async fn audit_entries(
        self: &Arc<Self>,
        filter: AuditFilter,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.read(move |tx| {
            let table = tx.open_table(AUDIT)?;
            let upper = filter.before_seq.unwrap_or(u64::MAX);
            let mut out = Vec::new();
            for row in table.range(..upper)?.rev() {
                let (k, v) = row?;
                if filter.after_seq.is_some_and(|s| k.value() <= s) {
                    break;
                }
                let e: AuditEntry = decode(v.value())?;
                if filter.matches(&e) {
                    out.push(e);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// Oldest first, `limit` entries of a tenant after `after_seq`: the export's pages.
    pub(crate) async fn audit_page_ascending(
        self: &Arc<Self>,
        tenant: uuid::Uuid,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.read(move |tx| {
            let table = tx.open_table(AUDIT)?;
            let mut out = Vec::new();
            for row in table.range(after_seq.saturating_add(1)..)? {
                let (_, v) = row?;
                let e: AuditEntry = decode(v.value())?;
                if e.tenant_id == tenant {
                    out.push(e);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    /// Walks the whole chain: contiguous seqs from 1, each `prevHash` the previous `hash`, each
    /// `hash` recomputed, the head matching the last entry, and the checkpoint matching its entry.
    pub(crate) async fn verify_audit(self: &Arc<Self>) -> Result<AuditVerification, StoreError> {
        let checkpoint: Option<ChainHead> = std::fs::read(self.checkpoint_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        self.read(move |tx| {
            let table = tx.open_table(AUDIT)?;
            let head = read_head_ro(tx)?;
            let broken = |verified: u64, why: String| AuditVerification {
                intact: false,
                verified,
                error: Some(why),
            };
            let mut prev = GENESIS_HASH.to_string();
            let mut verified = 0u64;
            for row in table.iter()? {
                let (k, v) = row?;
                let seq = k.value();
                let e: AuditEntry = match decode(v.value()) {
                    Ok(e) => e,
                    Err(_) => {
                        return Ok(broken(verified, format!("entry {seq} cannot be decoded")));
                    }
                };
                if seq != verified + 1 || e.seq != seq {
                    return Ok(broken(
                        verified,
                        format!("entry {} is missing or out of order", verified + 1),
                    ));
                }
                if e.prev_hash != prev {
                    return Ok(broken(
                        verified,
                        format!("entry {seq} does not link to entry {}", seq - 1),
                    ));
                }
                if chain_hash(&e) != e.hash {
                    return Ok(broken(verified, format!("entry {seq} was altered")));
                }
                if let Some(cp) = &checkpoint
                    && cp.seq == seq
                    && cp.hash != e.hash
                {
                    return Ok(broken(
                        verified,
                        format!("entry {seq} differs from the checkpoint"),
                    ));
                }
                prev = e.hash;
                verified = seq;
            }
            if head.seq != verified || head.hash != prev {
                return Ok(broken(
                    verified,
                    format!("chain ends at {verified} but its head says {}", head.seq),
                ));
            }
            if let Some(cp) = &checkpoint
                && cp.seq > verified
            {
                return Ok(broken(
                    verified,
                    format!(
                        "chain ends at {verified} before the checkpoint at {}",
                        cp.seq
                    ),
                ));
            }
            Ok(AuditVerification {
                intact: true,
                verified,
                error: None,
            })
        })
        .await
    }
}
