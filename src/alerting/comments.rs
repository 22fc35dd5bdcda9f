//! Comments on alerts, objects and incidents: a `comment` event with its audit entry, in one
//! transaction that finds the subject in the caller's tenant.

use super::{AlertError, Alerting, invalid};
use crate::auth::Principal;
use crate::model::audit::AuditDraft;
use crate::model::comment::{Comment, CommentOn};
use crate::model::event::{EventFilter, EventType};
use crate::model::identity::Actor;
use crate::store::{TxResult, Wrote};

/// The most comments a subject lists.
pub const COMMENTS_LISTED: usize = 500;

impl Alerting {
    /// Writes `text` as a comment by the caller on `on`: 404 when the tenant has no such
    /// subject, 422 `svc:validation/text` when the text is empty or too long.
    pub async fn comment(
        &self,
        p: &Principal,
        actor: &Actor,
        on: CommentOn,
        text: &str,
    ) -> Result<Comment, AlertError> {
        let now = self.clock.now();
        let comment = Comment::new(self.clock.new_id(), now, on, &p.name, text)
            .map_err(|e| invalid("text", e))?;
        let audit = AuditDraft::new(
            now,
            p.tenant,
            actor,
            &format!("{}.comment", on.resource()),
            format!("{}/{}", on.resource(), on.id()),
        )
        .after(&comment);
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, AlertError> {
                let object = match on {
                    CommentOn::Alert(id) => {
                        tx.alert(tenant, id)?.ok_or(AlertError::NotFound)?.object_id
                    }
                    CommentOn::Object(id) => {
                        tx.object(tenant, id)?.ok_or(AlertError::NotFound)?;
                        Some(id)
                    }
                    CommentOn::Incident(id) => {
                        tx.incident(tenant, id)?.ok_or(AlertError::NotFound)?;
                        None
                    }
                };
                let event = comment.event(tenant, on, object);
                tx.record([audit], vec![event])?;
                Ok(Wrote::Changed(comment))
            })
            .await
    }

    /// The comments on `on`, newest first: 404 when the tenant has no such subject.
    pub async fn comments(&self, p: &Principal, on: CommentOn) -> Result<Vec<Comment>, AlertError> {
        match on {
            CommentOn::Alert(id) => {
                self.store.alert(p.tenant, id).await?;
            }
            CommentOn::Incident(id) => {
                self.store.incident(p.tenant, id).await?;
            }
            CommentOn::Object(id) => {
                self.store.object(p.tenant, id).await?;
            }
        }
        let filter = EventFilter {
            tenant_id: p.tenant,
            types: vec![EventType::Comment],
            source_id: Some(on.id().to_string()),
            ..Default::default()
        };
        let events = self
            .history
            .list_committed(&self.store, filter, None, COMMENTS_LISTED)
            .await?;
        Ok(events
            .iter()
            .filter_map(|e| Comment::from_event(e, on))
            .collect())
    }
}
