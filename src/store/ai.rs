//! The AI agent's records, typed, in tables of their own: chats and conversations (threads)
//! without their messages, each message a row by thread and id (UUIDv7, so key order is the
//! order they were written in), tool calls waiting for a person, and each month's token use.

use super::codec::{decode, encode, tenant_value, tenant_values};
use super::keys::{scoped, stored_uuid};
use super::kv::{Readable, WriteTx};
use super::migrations::PlannedRow;
use super::tables::{AI_ACTIONS, AI_CHATS, AI_CONVERSATIONS, AI_MESSAGES, AI_USAGE, SETTINGS};
use super::{Store, StoreError, Tx};
use crate::model::Timestamp;
use crate::model::ai::{Action, Chat, Conversation, Message, TokenUse};
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

/// Tenant + thread: the prefix of a thread's messages.
fn thread_key(tenant: Uuid, thread: Uuid) -> Vec<u8> {
    scoped(tenant, thread.as_bytes())
}

fn message_key(tenant: Uuid, thread: Uuid, message: Uuid) -> Vec<u8> {
    let mut k = thread_key(tenant, thread);
    k.extend_from_slice(message.as_bytes());
    k
}

/// The keys of a thread's message rows, in order.
fn message_keys<R: Readable<&'static [u8], &'static [u8]>>(
    t: &R,
    tenant: Uuid,
    thread: Uuid,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let lo = thread_key(tenant, thread);
    let hi = thread_key(tenant, Uuid::from_u128(thread.as_u128().wrapping_add(1)));
    let mut keys = Vec::new();
    for row in t.range(lo.as_slice()..hi.as_slice())? {
        keys.push(row?.0.value().to_vec());
    }
    Ok(keys)
}

fn messages<R: Readable<&'static [u8], &'static [u8]>>(
    t: &R,
    tenant: Uuid,
    thread: Uuid,
) -> Result<Vec<Message>, StoreError> {
    let lo = thread_key(tenant, thread);
    let hi = thread_key(tenant, Uuid::from_u128(thread.as_u128().wrapping_add(1)));
    let mut out = Vec::new();
    for row in t.range(lo.as_slice()..hi.as_slice())? {
        out.push(decode(row?.1.value())?);
    }
    Ok(out)
}

/// Removes a thread's messages.
fn drop_messages(tx: &WriteTx, tenant: Uuid, thread: Uuid) -> Result<(), StoreError> {
    let mut t = tx.open_table(AI_MESSAGES)?;
    for key in message_keys(&t, tenant, thread)? {
        t.remove(key.as_slice())?;
    }
    Ok(())
}

fn month_key(tenant: Uuid, month: &str) -> Vec<u8> {
    scoped(tenant, month.as_bytes())
}

/// A thread as stored: its messages are rows of their own.
fn without_messages<T: Clone>(thread: &T, clear: impl FnOnce(&mut T)) -> T {
    let mut row = thread.clone();
    clear(&mut row);
    row
}

fn put_chat(tx: &WriteTx, tenant: Uuid, chat: &Chat) -> Result<(), StoreError> {
    let row = without_messages(chat, |c| c.messages.clear());
    tx.open_table(AI_CHATS)?.insert(
        scoped(tenant, chat.id.as_bytes()).as_slice(),
        encode(&row)?.as_slice(),
    )?;
    Ok(())
}

fn put_conversation(tx: &WriteTx, tenant: Uuid, c: &Conversation) -> Result<(), StoreError> {
    let row = without_messages(c, |c| {
        c.messages.clear();
        c.reply = None;
    });
    tx.open_table(AI_CONVERSATIONS)?.insert(
        scoped(tenant, c.id.as_bytes()).as_slice(),
        encode(&row)?.as_slice(),
    )?;
    Ok(())
}

/// Makes a thread's stored messages `wanted`: writes the messages not stored yet and removes
/// those no longer wanted (trimmed, regenerated, deleted); the others are left as they are,
/// so a turn writes what it added.
fn sync_messages(
    tx: &WriteTx,
    tenant: Uuid,
    thread: Uuid,
    wanted: &[Message],
) -> Result<(), StoreError> {
    let mut t = tx.open_table(AI_MESSAGES)?;
    let stored: HashSet<Uuid> = message_keys(&t, tenant, thread)?
        .iter()
        .map(|k| stored_uuid(&k[32..], "a message id"))
        .collect::<Result<_, _>>()?;
    let keep: HashSet<Uuid> = wanted.iter().map(|m| m.id).collect();
    for gone in stored.difference(&keep) {
        t.remove(message_key(tenant, thread, *gone).as_slice())?;
    }
    for m in wanted.iter().filter(|m| !stored.contains(&m.id)) {
        t.insert(
            message_key(tenant, thread, m.id).as_slice(),
            encode(m)?.as_slice(),
        )?;
    }
    Ok(())
}

fn put_action(tx: &WriteTx, tenant: Uuid, action: &Action) -> Result<(), StoreError> {
    tx.open_table(AI_ACTIONS)?.insert(
        scoped(tenant, action.id.as_bytes()).as_slice(),
        encode(action)?.as_slice(),
    )?;
    Ok(())
}

fn put_token_use(
    tx: &WriteTx,
    tenant: Uuid,
    month: &str,
    used: &TokenUse,
) -> Result<(), StoreError> {
    tx.open_table(AI_USAGE)?.insert(
        month_key(tenant, month).as_slice(),
        encode(used)?.as_slice(),
    )?;
    Ok(())
}

impl Tx<'_> {
    pub(crate) fn ai_chat(&self, tenant: Uuid, id: Uuid) -> Result<Option<Chat>, StoreError> {
        tenant_value(&self.open_table(AI_CHATS)?, tenant, id)
    }

    /// Saves a chat's own fields; its messages are `sync_ai_messages`'.
    pub(crate) fn put_ai_chat(&self, tenant: Uuid, chat: &Chat) -> Result<(), StoreError> {
        put_chat(self, tenant, chat)
    }

    /// Removes a chat with its messages.
    pub(crate) fn drop_ai_chat(&self, tenant: Uuid, id: Uuid) -> Result<(), StoreError> {
        self.open_table(AI_CHATS)?
            .remove(scoped(tenant, id.as_bytes()).as_slice())?;
        drop_messages(self, tenant, id)
    }

    pub(crate) fn ai_conversation(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<Conversation>, StoreError> {
        tenant_value(&self.open_table(AI_CONVERSATIONS)?, tenant, id)
    }

    /// Saves a conversation's own fields; its messages are `sync_ai_messages`'.
    pub(crate) fn put_ai_conversation(
        &self,
        tenant: Uuid,
        c: &Conversation,
    ) -> Result<(), StoreError> {
        put_conversation(self, tenant, c)
    }

    /// Removes the tenant's conversations last changed before `before`, with their messages,
    /// at most `max`; answers how many.
    pub(crate) fn drop_ai_conversations_before(
        &self,
        tenant: Uuid,
        before: Timestamp,
        max: usize,
    ) -> Result<usize, StoreError> {
        let old: Vec<Uuid> = {
            let t = self.open_table(AI_CONVERSATIONS)?;
            tenant_values::<Conversation, _>(&t, tenant)?
                .into_iter()
                .filter(|c| c.updated_at < before)
                .take(max)
                .map(|c| c.id)
                .collect()
        };
        for id in &old {
            self.open_table(AI_CONVERSATIONS)?
                .remove(scoped(tenant, id.as_bytes()).as_slice())?;
            drop_messages(self, tenant, *id)?;
        }
        Ok(old.len())
    }

    /// A thread's (chat's or conversation's) messages, oldest first.
    #[cfg(test)]
    pub(crate) fn ai_messages(
        &self,
        tenant: Uuid,
        thread: Uuid,
    ) -> Result<Vec<Message>, StoreError> {
        messages(&self.open_table(AI_MESSAGES)?, tenant, thread)
    }

    /// Makes a thread's stored messages `wanted` (`sync_messages`).
    pub(crate) fn sync_ai_messages(
        &self,
        tenant: Uuid,
        thread: Uuid,
        wanted: &[Message],
    ) -> Result<(), StoreError> {
        sync_messages(self, tenant, thread, wanted)
    }

    pub(crate) fn put_ai_action(&self, tenant: Uuid, action: &Action) -> Result<(), StoreError> {
        put_action(self, tenant, action)
    }

    /// The tenant's token use in `month` (`2026-12`); none yet is zero.
    pub(crate) fn ai_token_use(&self, tenant: Uuid, month: &str) -> Result<TokenUse, StoreError> {
        Ok(self
            .open_table(AI_USAGE)?
            .get(month_key(tenant, month).as_slice())?
            .map(|v| decode(v.value()))
            .transpose()?
            .unwrap_or_default())
    }

    pub(crate) fn put_ai_token_use(
        &self,
        tenant: Uuid,
        month: &str,
        used: &TokenUse,
    ) -> Result<(), StoreError> {
        put_token_use(self, tenant, month, used)
    }
}

impl Store {
    /// The tenant's chats, without their messages, oldest first.
    pub(crate) async fn ai_chats(self: &Arc<Self>, tenant: Uuid) -> Result<Vec<Chat>, StoreError> {
        self.read(move |tx| tenant_values(&tx.open_table(AI_CHATS)?, tenant))
            .await
    }

    /// A chat with its messages, from one snapshot.
    pub(crate) async fn ai_chat(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<Chat>, StoreError> {
        self.read(move |tx| {
            let Some(mut chat) = tenant_value::<Chat, _>(&tx.open_table(AI_CHATS)?, tenant, id)?
            else {
                return Ok(None);
            };
            chat.messages = messages(&tx.open_table(AI_MESSAGES)?, tenant, id)?;
            Ok(Some(chat))
        })
        .await
    }

    /// The tenant's conversations, without their messages.
    pub(crate) async fn ai_conversations(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Conversation>, StoreError> {
        self.read(move |tx| tenant_values(&tx.open_table(AI_CONVERSATIONS)?, tenant))
            .await
    }

    /// A conversation with its messages, from one snapshot.
    pub(crate) async fn ai_conversation(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<Conversation>, StoreError> {
        self.read(move |tx| {
            let Some(mut c) =
                tenant_value::<Conversation, _>(&tx.open_table(AI_CONVERSATIONS)?, tenant, id)?
            else {
                return Ok(None);
            };
            c.messages = messages(&tx.open_table(AI_MESSAGES)?, tenant, id)?;
            Ok(Some(c))
        })
        .await
    }

    /// The tenant's actions, oldest first.
    pub(crate) async fn ai_actions(
        self: &Arc<Self>,
        tenant: Uuid,
    ) -> Result<Vec<Action>, StoreError> {
        self.read(move |tx| tenant_values(&tx.open_table(AI_ACTIONS)?, tenant))
            .await
    }

    pub(crate) async fn ai_action(
        self: &Arc<Self>,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<Action>, StoreError> {
        self.read(move |tx| tenant_value(&tx.open_table(AI_ACTIONS)?, tenant, id))
            .await
    }

    /// The tenant's token use in `month`.
    pub(crate) async fn ai_token_use(
        self: &Arc<Self>,
        tenant: Uuid,
        month: String,
    ) -> Result<TokenUse, StoreError> {
        self.read(move |tx| {
            Ok(tx
                .open_table(AI_USAGE)?
                .get(month_key(tenant, &month).as_slice())?
                .map(|v| decode(v.value()))
                .transpose()?
                .unwrap_or_default())
        })
        .await
    }
}

/// The settings keys the agent kept its records under before they had tables.
const OLD_PREFIXES: [&str; 4] = ["ai/chat/", "ai/conversation/", "ai/action/", "ai/usage/"];

/// Whether a settings key (after its tenant) is one of the agent's old records.
pub(super) fn is_old_record(local: &str) -> bool {
    OLD_PREFIXES.iter().any(|p| local.starts_with(p))
}

/// The rows an old record (JSON under `ai/chat/<id>`, `ai/conversation/<id>`,
/// `ai/action/<id>`, `ai/usage/<month>`) becomes, a thread's messages a row each; the reason
/// when it no longer reads. Both backends' migrations write what this plans.
pub(super) fn moved_rows(
    tenant: Uuid,
    local: &str,
    value: serde_json::Value,
) -> Result<Vec<PlannedRow>, String> {
    let typed = |e: serde_json::Error| e.to_string();
    let row = |table, key: Vec<u8>, value: Result<Vec<u8>, StoreError>| {
        Ok(PlannedRow {
            table,
            key,
            value: value.map_err(|e| e.to_string())?,
        })
    };
    let thread_rows = |id: Uuid, messages: &[Message]| -> Result<Vec<PlannedRow>, String> {
        messages
            .iter()
            .map(|m| row(AI_MESSAGES, message_key(tenant, id, m.id), encode(m)))
            .collect()
    };
    if let Some(month) = local.strip_prefix("ai/usage/") {
        let used: TokenUse = serde_json::from_value(value).map_err(typed)?;
        Ok(vec![row(
            AI_USAGE,
            month_key(tenant, month),
            encode(&used),
        )?])
    } else if local.starts_with("ai/action/") {
        let action: Action = serde_json::from_value(value).map_err(typed)?;
        let key = scoped(tenant, action.id.as_bytes());
        Ok(vec![row(AI_ACTIONS, key, encode(&action))?])
    } else if local.starts_with("ai/chat/") {
        let chat: Chat = serde_json::from_value(value).map_err(typed)?;
        let mut rows = thread_rows(chat.id, &chat.messages)?;
        let own = without_messages(&chat, |c| c.messages.clear());
        rows.push(row(
            AI_CHATS,
            scoped(tenant, chat.id.as_bytes()),
            encode(&own),
        )?);
        Ok(rows)
    } else {
        let c: Conversation = serde_json::from_value(value).map_err(typed)?;
        let mut rows = thread_rows(c.id, &c.messages)?;
        let own = without_messages(&c, |c| {
            c.messages.clear();
            c.reply = None;
        });
        rows.push(row(
            AI_CONVERSATIONS,
            scoped(tenant, c.id.as_bytes()),
            encode(&own),
        )?);
        Ok(rows)
    }
}

/// Migration: moves the agent's old records from the settings table into their tables
/// (`moved_rows`). A record that no longer reads is left where it was, and said so.
pub(super) fn move_out_of_settings(tx: &WriteTx) -> Result<(), StoreError> {
    for table in [
        AI_CHATS,
        AI_CONVERSATIONS,
        AI_MESSAGES,
        AI_ACTIONS,
        AI_USAGE,
    ] {
        tx.open_table(table)?;
    }
    let mut old = Vec::new();
    {
        let settings = tx.open_table(SETTINGS)?;
        for row in settings.iter()? {
            let (k, v) = row?;
            let key = k.value();
            let Some(local) = key.get(16..).and_then(|l| std::str::from_utf8(l).ok()) else {
                continue;
            };
            if is_old_record(local) {
                let tenant = stored_uuid(&key[..16], "a setting's tenant")?;
                let value: serde_json::Value = decode(v.value())?;
                old.push((key.to_vec(), tenant, local.to_string(), value));
            }
        }
    }
    for (key, tenant, local, value) in old {
        match moved_rows(tenant, &local, value) {
            Ok(rows) => {
                for r in rows {
                    r.write(tx)?;
                }
                tx.open_table(SETTINGS)?.remove(key.as_slice())?;
            }
            Err(why) => {
                tracing::warn!(setting = local, %why, "an AI record no longer reads; it stays in the settings");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ai::Role;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-03-01T08:00:00Z".parse().unwrap();
        let clock = Arc::new(crate::runtime::clock::TestClock::new(now));
        let store = Store::open(dir.path(), clock).unwrap();
        (dir, store)
    }

    fn message(n: u128, text: &str) -> Message {
        Message {
            id: Uuid::from_u128(n),
            role: Role::User,
            content: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            created_at: "2026-03-01T08:00:00Z".parse().unwrap(),
        }
    }

    /// A thread's messages are rows: a sync writes what is new, removes what is no longer
    /// wanted and leaves the rest; deleting the chat deletes its messages.
    #[tokio::test]
    async fn messages_are_rows_of_their_thread() {
        let (_dir, store) = store();
        let (tenant, chat_id) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let chat: Chat = serde_json::from_value(json!({
            "id": chat_id, "title": "New chat", "owner": "user:1",
            "createdAt": "2026-03-01T08:00:00Z", "updatedAt": "2026-03-01T08:00:00Z",
        }))
        .unwrap();
        let stored = chat.clone();
        store
            .write(move |tx| {
                tx.unrecorded("a test's rows");
                tx.put_ai_chat(tenant, &stored)?;
                tx.sync_ai_messages(tenant, chat_id, &[message(10, "a"), message(11, "b")])?;
                // Trimmed to the last one and a reply added.
                tx.sync_ai_messages(tenant, chat_id, &[message(11, "b"), message(12, "c")])?;
                // Another thread's messages are its own.
                tx.sync_ai_messages(tenant, Uuid::from_u128(3), &[message(13, "x")])
            })
            .await
            .unwrap();
        let read = store.ai_chat(tenant, chat_id).await.unwrap().unwrap();
        let texts: Vec<&str> = read.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["b", "c"]);
        assert!(store.ai_chats(tenant).await.unwrap()[0].messages.is_empty());
        store
            .write(move |tx| {
                tx.unrecorded("a test's rows");
                tx.drop_ai_chat(tenant, chat_id)?;
                Ok((
                    tx.ai_messages(tenant, chat_id)?,
                    tx.ai_messages(tenant, Uuid::from_u128(3))?,
                ))
            })
            .await
            .map(|(gone, other)| {
                assert!(gone.is_empty());
                assert_eq!(other.len(), 1);
            })
            .unwrap();
        assert!(store.ai_chat(tenant, chat_id).await.unwrap().is_none());
    }

    /// Conversations past their retention go with their messages, newer ones stay.
    #[tokio::test]
    async fn old_conversations_go_with_their_messages() {
        let (_dir, store) = store();
        let tenant = Uuid::from_u128(1);
        let conversation = |id: u128, at: &str| -> Conversation {
            serde_json::from_value(json!({
                "id": Uuid::from_u128(id), "title": "t", "owner": "user:1",
                "createdAt": at, "updatedAt": at,
            }))
            .unwrap()
        };
        let (old, new) = (
            conversation(5, "2026-01-01T00:00:00Z"),
            conversation(6, "2026-02-27T00:00:00Z"),
        );
        let dropped = store
            .write(move |tx| {
                tx.unrecorded("a test's rows");
                for c in [&old, &new] {
                    tx.put_ai_conversation(tenant, c)?;
                    tx.sync_ai_messages(tenant, c.id, &[message(c.id.as_u128() * 10, "q")])?;
                }
                let cut: Timestamp = "2026-02-01T00:00:00Z".parse().unwrap();
                let n = tx.drop_ai_conversations_before(tenant, cut, 100)?;
                Ok((n, tx.ai_messages(tenant, Uuid::from_u128(5))?.len()))
            })
            .await
            .unwrap();
        assert_eq!(dropped, (1, 0));
        let left = store.ai_conversations(tenant).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].id, Uuid::from_u128(6));
    }

    /// Migration 21: the records the agent kept under settings keys move to their tables, a
    /// thread's messages as rows; other settings and a record that no longer reads stay.
    #[tokio::test]
    async fn the_records_move_out_of_the_settings() {
        let (_dir, store) = store();
        let tenant = Uuid::from_u128(1);
        let chat = json!({
            "id": Uuid::from_u128(2), "title": "Pumps", "owner": "user:1",
            "createdAt": "2026-03-01T08:00:00Z", "updatedAt": "2026-03-01T08:00:00Z",
            "messages": [
                {"id": Uuid::from_u128(20), "role": "user", "content": "why?", "createdAt": "2026-03-01T08:00:00Z"},
                {"id": Uuid::from_u128(21), "role": "assistant", "content": "dry run", "createdAt": "2026-03-01T08:00:01Z"},
            ],
        });
        let action = json!({
            "id": Uuid::from_u128(3), "tool": "alert_ack", "arguments": {"id": "x"},
            "route": "POST /api/v1/alerts/{id}:ack", "status": "pending", "proposedBy": "user:1",
            "createdAt": "2026-03-01T08:00:00Z",
        });
        let rows = [
            ("ai/chat/00000000-0000-0000-0000-000000000002", chat),
            ("ai/action/00000000-0000-0000-0000-000000000003", action),
            ("ai/usage/2026-03", json!({"tokens": 1200, "warned": false})),
            ("ai/conversation/broken", json!({"id": "not a uuid"})),
            ("ai/policy", json!({"maxRounds": 4})),
        ];
        let kept = store
            .write(move |tx| {
                tx.unrecorded("a test's rows");
                for (key, value) in &rows {
                    tx.put_setting(tenant, key, Some(value))?;
                }
                move_out_of_settings(tx)?;
                Ok((
                    tx.setting(tenant, "ai/policy")?,
                    tx.setting(tenant, "ai/conversation/broken")?,
                    tx.setting(tenant, "ai/usage/2026-03")?,
                    tx.ai_token_use(tenant, "2026-03")?,
                ))
            })
            .await
            .unwrap();
        assert!(kept.0.is_some(), "other settings stay");
        assert!(kept.1.is_some(), "what does not read stays");
        assert!(kept.2.is_none(), "moved");
        assert_eq!(kept.3.tokens, 1200);
        let chat = store
            .ai_chat(tenant, Uuid::from_u128(2))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(chat.title, "Pumps");
        assert_eq!(chat.messages.len(), 2);
        assert_eq!(chat.messages[1].content, "dry run");
        let action = store
            .ai_action(tenant, Uuid::from_u128(3))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(action.arguments, json!({"id": "x"}));
    }
}
