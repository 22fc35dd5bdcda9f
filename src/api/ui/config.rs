//! The UI's configuration documents: kinds, lists, a document as YAML, a change planned as a
//! line diff and applied at the planned version.

use super::*;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/config", config_kinds).identity().doc("ui", "Configuration page", "The kinds of configuration document the caller may read (each kind's `read` permission).")
            .answers_text(200, HTML).page(),
        Route::get("/config/{kind}", config_list).identity().doc("ui", "Documents of a kind", "By name, 500 at most. Needs the kind's `read` permission (it depends on the kind, so the page checks it: 403 without).")
            .answers_text(200, HTML).answers_text(403, HTML).answers_text(404, HTML).page(),
        Route::post("/config/{kind}", config_create).identity().doc("ui", "Create a configuration document", "Form: `name`, `yaml` (the document's fields). As `POST /api/v1/{kind}`; 303 to the new document; a refusal shows the form again with the reason and the text as typed (409 taken name, 422 invalid). Needs the kind's `write` permission.")
            .form::<NewDocForm>().answers_empty(303).answers_text(403, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/config/{kind}/{name}/delete", config_delete).identity().doc("ui", "Delete a configuration document", "Form: `confirm` (`on`), `version` (the version the page showed: a change since is 409). As `DELETE /api/v1/{kind}/{name}`; 303 to the kind's list. Needs the kind's `write` permission.")
            .form::<DeleteForm>().answers_empty(303).answers_text(403, HTML).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::get("/config/{kind}/{name}", config_doc).identity().doc("ui", "A configuration document", "The document's own fields as YAML; with the kind's `write` permission, a form to change it, planned before it is applied. Needs the kind's `read` permission.")
            .answers_text(200, HTML).answers_text(403, HTML).answers_text(404, HTML).page(),
        Route::post("/config/{kind}/{name}/plan", config_plan).identity().doc("ui", "Plan a change", "Form: `yaml`, `version`. The change as removed and added lines against the stored document, and a form that applies exactly this text at that version; YAML that does not read is 422. Needs the kind's `write` permission.")
            .form::<ConfigForm>().answers_text(200, HTML).answers_text(403, HTML).answers_text(422, HTML).page(),
        Route::post("/config/{kind}/{name}", config_apply).identity().doc("ui", "Apply a planned change", "Form: `yaml`, `version`. As `PUT /api/v1/{kind}/{name}` with `If-Match: version` (a change made since the plan is 409; an invalid document is 422 with the reason); 303 to the document. Needs the kind's `write` permission.")
            .form::<ConfigForm>().answers_empty(303).answers_text(409, HTML).answers_text(422, HTML).page(),
    ]
}

/// A kind by its URL segment, if the caller holds `permission(kind)`.
fn config_kind(
    c: &Caller,
    name: &str,
    permission: fn(&Kind) -> &'static str,
) -> Result<&'static Kind, Problem> {
    let kind = kind_by_name(name).ok_or_else(Problem::not_found)?;
    let wanted = permission(kind);
    if !c.principal.allows(wanted) {
        return Err(Problem::new(Code::AuthForbidden, wanted));
    }
    Ok(kind)
}

fn read_permission(k: &Kind) -> &'static str {
    k.read
}

fn write_permission(k: &Kind) -> &'static str {
    k.write
}

/// A document's own fields (the service's metadata left out) as YAML.
fn doc_yaml(d: &ConfigDoc) -> Result<String, Problem> {
    let mut body = d.to_json();
    if let Some(m) = body.as_object_mut() {
        for meta in ["id", "tenantId", "createdAt", "updatedAt", "version"] {
            m.remove(meta);
        }
    }
    serde_yaml_ng::to_string(&body)
        .map_err(|e| Problem::internal(format!("a document as YAML: {e}")))
}

async fn config_kinds(c: Visitor) -> Response {
    let kinds: Vec<&str> = KINDS
        .iter()
        .filter(|k| c.principal.allows(k.read))
        .map(|k| k.name)
        .collect();
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Config, "Configuration".into(), &[], None),
            views::config_kinds(&kinds),
        ),
    )
}

async fn config_list(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(kind): ApiPath<String>,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, read_permission)?;
        let docs = st
            .inventory
            .list(&c.principal, kind, None, None, 500)
            .await?;
        Ok::<_, Problem>((kind, docs))
    };
    match found.await {
        Ok((kind, docs)) => {
            let new = c.principal.allows(kind.write).then_some(("", ""));
            html(
                StatusCode::OK,
                web::page(
                    frame(
                        &c,
                        Section::Config,
                        kind.name.into(),
                        &["config"],
                        q.did.as_deref(),
                    ),
                    views::config_list(&c.now(&st), kind.name, &docs, new),
                ),
            )
        }
        Err(p) => failed(p),
    }
}

async fn config_doc(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, read_permission)?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let yaml = doc_yaml(&doc)?;
        Ok::<_, Problem>((kind, doc, yaml))
    };
    match found.await {
        Ok((kind, doc, yaml)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Config,
                    format!("{} {}", kind.name, doc.name),
                    &[],
                    q.did.as_deref(),
                ),
                views::config_doc(kind.name, &doc, &yaml, c.principal.allows(kind.write)),
            ),
        ),
        Err(p) => failed(p),
    }
}

/// The change form: the YAML as typed, and the version it was made against.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ConfigForm {
    yaml: Option<String>,
    version: Option<u64>,
}

impl ConfigForm {
    fn parse(body: &Bytes) -> Result<(String, u64, Value), Problem> {
        let f: ConfigForm = form(body)?;
        let text = f.yaml.unwrap_or_default().replace("\r\n", "\n");
        let value: Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| Problem::validation("body", format!("the YAML does not read: {e}")))?;
        Ok((text, f.version.unwrap_or(0), value))
    }
}

async fn config_plan(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    body: Bytes,
) -> Response {
    let found = async {
        let kind = config_kind(&c, &kind, write_permission)?;
        let (text, version, _) = ConfigForm::parse(&body)?;
        let doc = st.inventory.get(&c.principal, kind, name).await?;
        let old = doc_yaml(&doc)?;
        Ok::<_, Problem>((kind, doc, old, text, version))
    };
    match found.await {
        Ok((kind, doc, old, new, version)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Config,
                    format!("Plan: {} {}", kind.name, doc.name),
                    &[],
                    None,
                ),
                views::config_plan(kind.name, &doc.name, &old, &new, version),
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn config_apply(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    body: Bytes,
) -> Acted {
    let kind = config_kind(&c, &kind, write_permission)?;
    let (_, version, value) = ConfigForm::parse(&body)?;
    let doc = st
        .inventory
        .update(&c.principal, &c.actor, kind, name, version, value)
        .await?;
    let to = format!("/config/{}/{}", kind.name, doc.name);
    Ok(Done::to(to, "saved"))
}

/// The new-document form.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct NewDocForm {
    name: Option<String>,
    yaml: Option<String>,
}

async fn config_create(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(kind): ApiPath<String>,
    body: Bytes,
) -> Response {
    let kind = match config_kind(&c, &kind, write_permission) {
        Ok(k) => k,
        Err(p) => return failed(p),
    };
    let f: NewDocForm = match form(&body) {
        Ok(f) => f,
        Err(p) => return failed(p),
    };
    let name = f.name.unwrap_or_default().trim().to_string();
    let text = f.yaml.unwrap_or_default().replace("\r\n", "\n");
    let result = async {
        let mut value: Value = if text.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_yaml_ng::from_str(&text)
                .map_err(|e| Problem::validation("body", format!("the YAML does not read: {e}")))?
        };
        let Some(fields) = value.as_object_mut() else {
            return Err(Problem::validation(
                "body",
                "the YAML is not a mapping of fields",
            ));
        };
        fields.insert("name".into(), Value::String(name.clone()));
        let doc = st
            .inventory
            .create(&c.principal, &c.actor, kind, value)
            .await?;
        Ok(format!(
            "/config/{}/{}",
            kind.name,
            views::encode_segment(&doc.name)
        ))
    };
    match result.await {
        Ok(to) => Done::to(to, "created").into_response(),
        Err(p) => form_again(
            &c,
            Section::Config,
            kind.name,
            p,
            views::new_doc_form(kind.name, &name, &text),
        ),
    }
}

/// The delete form: a ticked confirmation, and the version the page showed.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct DeleteForm {
    confirm: Option<String>,
    version: Option<u64>,
}

async fn config_delete(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath((kind, name)): ApiPath<(String, String)>,
    body: Bytes,
) -> Acted {
    let kind = config_kind(&c, &kind, write_permission)?;
    let f: DeleteForm = form(&body)?;
    if f.confirm.as_deref() != Some("on") {
        return Err(Problem::validation("body", "tick the box to confirm the deletion").into());
    }
    st.inventory
        .delete(
            &c.principal,
            &c.actor,
            kind,
            name,
            Some(f.version.unwrap_or(0)),
        )
        .await?;
    let to = format!("/config/{}", kind.name);
    Ok(Done::to(to, "deleted"))
}
