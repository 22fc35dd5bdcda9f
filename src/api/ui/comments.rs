//! The UI's comments: a note on an alert, an object or an incident from its page, without
//! acting on it.

use super::*;
use crate::model::comment::CommentOn;

const FORM: &str = "Form: `text` (1 to 4000 characters), `back`. As `POST /api/v1/{subject}/{id}/comments`; 303 to `back`; empty or too long text is 422 with the reason.";

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::post("/alerts/{id}/comment", on_alert)
            .permission("alerts:ack")
            .doc("ui", "Comment on an alert", FORM)
            .form::<CommentForm>()
            .answers_empty(303)
            .answers_text(404, HTML)
            .answers_text(422, HTML)
            .page(),
        Route::post("/objects/{id}/comment", on_object)
            .permission("objects:write")
            .doc("ui", "Comment on an object", FORM)
            .form::<CommentForm>()
            .answers_empty(303)
            .answers_text(404, HTML)
            .answers_text(422, HTML)
            .page(),
        Route::post("/incidents/{id}/comment", on_incident)
            .permission("incidents:write")
            .doc("ui", "Comment on an incident", FORM)
            .form::<CommentForm>()
            .answers_empty(303)
            .answers_text(404, HTML)
            .answers_text(422, HTML)
            .page(),
    ]
}

/// A comment's form.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct CommentForm {
    text: Option<String>,
    /// The page to return to: a path of this server.
    back: Option<String>,
}

async fn write(st: &AppState, c: &Visitor, on: CommentOn, body: &Bytes) -> Acted {
    let f = form::<CommentForm>(body)?;
    st.alerting
        .comment(
            &c.principal,
            &c.actor,
            on,
            f.text.as_deref().unwrap_or_default(),
        )
        .await?;
    Ok(Done::back(f.back.as_deref(), "comment"))
}

async fn on_alert(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    write(&st, &c, CommentOn::Alert(path_id(&id)?), &body).await
}

async fn on_object(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    write(&st, &c, CommentOn::Object(path_id(&id)?), &body).await
}

async fn on_incident(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    write(&st, &c, CommentOn::Incident(path_id(&id)?), &body).await
}
