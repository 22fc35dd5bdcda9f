//! Comments: what a person notes on an alert, an object or an incident without acting on it
//! (Icinga's comments, PagerDuty's notes). Each is a `comment` event of its subject, so it
//! stands in the subject's timeline beside what happened to it.

use super::Timestamp;
use super::event::{Event, EventDraft, EventType, Severity};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

/// The longest comment, in characters.
pub const MAX_TEXT: usize = 4000;

/// What a comment is written on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommentOn {
    Alert(Uuid),
    Object(Uuid),
    Incident(Uuid),
}

impl CommentOn {
    /// The payload field naming the subject, as the subject's other events name it.
    fn field(self) -> &'static str {
        match self {
            CommentOn::Alert(_) => "alertId",
            CommentOn::Object(_) => "objectId",
            CommentOn::Incident(_) => "incidentId",
        }
    }

    pub fn id(self) -> Uuid {
        match self {
            CommentOn::Alert(id) | CommentOn::Object(id) | CommentOn::Incident(id) => id,
        }
    }

    /// `alert`, `object`, `incident`: the audit's resource.
    pub fn resource(self) -> &'static str {
        match self {
            CommentOn::Alert(_) => "alert",
            CommentOn::Object(_) => "object",
            CommentOn::Incident(_) => "incident",
        }
    }
}

/// `POST …/comments`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentRequest {
    /// What is noted: 1 to 4000 characters.
    pub text: String,
}

/// A comment as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: Uuid,
    pub created_at: Timestamp,
    /// Who wrote it.
    pub by: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incident_id: Option<Uuid>,
}

impl Comment {
    /// A new comment by `by`, its text trimmed; the reason when the text is empty or too long.
    pub fn new(
        id: Uuid,
        at: Timestamp,
        on: CommentOn,
        by: &str,
        text: &str,
    ) -> Result<Comment, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("text must not be empty".into());
        }
        let chars = text.chars().count();
        if chars > MAX_TEXT {
            return Err(format!(
                "text has {chars} characters; at most {MAX_TEXT} are accepted"
            ));
        }
        let id_of = |want: fn(Uuid) -> CommentOn| (want(on.id()) == on).then_some(on.id());
        Ok(Comment {
            id,
            created_at: at,
            by: by.to_string(),
            text: text.to_string(),
            alert_id: id_of(CommentOn::Alert),
            object_id: id_of(CommentOn::Object),
            incident_id: id_of(CommentOn::Incident),
        })
    }

    /// Its `comment` event: of its subject (`sourceId`) and, where there is one, of the object
    /// it concerns (`object`: an alert's object), so it shows in that object's events too.
    pub fn event(&self, tenant: Uuid, on: CommentOn, object: Option<Uuid>) -> EventDraft {
        let mut payload = json!({
            "commentId": self.id,
            "createdAt": self.created_at,
            "by": self.by,
            "text": self.text,
        });
        payload[on.field()] = json!(on.id());
        let mut draft = EventDraft::new(tenant, EventType::Comment, Some(Severity::Info), payload);
        draft.source_id = Some(on.id().to_string());
        draft.object_id = object;
        draft
    }

    /// The comment a `comment` event on `on` holds.
    pub fn from_event(e: &Event, on: CommentOn) -> Option<Comment> {
        if e.kind != EventType::Comment {
            return None;
        }
        let p = &e.payload;
        let text = |k: &str| p.get(k).and_then(|v| v.as_str());
        let subject = text(on.field()).and_then(|s| Uuid::parse_str(s).ok())?;
        if subject != on.id() {
            return None;
        }
        Comment::new(
            text("commentId").and_then(|s| Uuid::parse_str(s).ok())?,
            text("createdAt")
                .and_then(|s| s.parse().ok())
                .unwrap_or(e.ts),
            on,
            text("by").unwrap_or_default(),
            text("text")?,
        )
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A comment goes into its event and comes back the same; empty or overlong text is
    /// refused with the reason; a comment on another subject is not this one's.
    #[test]
    fn a_comment_is_its_subjects_event() {
        let at = Timestamp::from_millis(1_000).unwrap();
        let alert = Uuid::from_u128(7);
        let on = CommentOn::Alert(alert);
        let c = Comment::new(Uuid::from_u128(1), at, on, "ada", "  valve replaced  ").unwrap();
        assert_eq!(c.text, "valve replaced");
        assert_eq!(c.alert_id, Some(alert));
        assert_eq!(c.object_id, None);
        let draft = c.event(Uuid::nil(), on, Some(Uuid::from_u128(9)));
        assert_eq!(draft.source_id.as_deref(), Some(alert.to_string().as_str()));
        assert_eq!(draft.object_id, Some(Uuid::from_u128(9)));
        let e = draft.stamped(Uuid::from_u128(2), at);
        assert_eq!(Comment::from_event(&e, on), Some(c));
        assert_eq!(
            Comment::from_event(&e, CommentOn::Alert(Uuid::from_u128(8))),
            None
        );
        assert_eq!(Comment::from_event(&e, CommentOn::Object(alert)), None);
        assert!(Comment::new(Uuid::nil(), at, on, "ada", "  ").is_err());
        let long = "x".repeat(MAX_TEXT + 1);
        assert!(
            Comment::new(Uuid::nil(), at, on, "ada", &long)
                .unwrap_err()
                .contains("4001 characters")
        );
        assert!(Comment::new(Uuid::nil(), at, on, "ada", &"é".repeat(MAX_TEXT)).is_ok());
    }
}
