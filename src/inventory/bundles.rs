//! Bundles: plan (what would change), apply (all or nothing, from the body or a plan's
//! `applyToken`), and export (YAML that applies back to an identical state).

use super::{Inventory, InventoryError};
use crate::auth::Principal;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::bundle::{
    BundleDoc, BundleOp, ObjectDocBody, PlanAction, PlanResult, SHIPPED_DOWNTIMES, parse, render,
};
use crate::model::config::{
    ConfigDoc, Invalid, KINDS, Kind, METADATA, ObjectSpec, Reference, check_name, doc_references,
    spec_references, template_spec,
};
use crate::model::event::EventDraft;
use crate::model::fault;
use crate::model::identity::Actor;
use crate::model::object::{Object, ObjectKind, check_template_graph};
use crate::model::suppression::ShippedDowntime;
use crate::runtime::Locked;
use crate::store::{StoreError, Tx};
use crate::store::{TxResult, Wrote};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use uuid::Uuid;

/// How long a plan's `applyToken` stays good.
const TOKEN_TTL: Duration = Duration::from_secs(15 * 60);
/// Bundle plans, applies and exports at once (each may hold a bundle of up to 8 MiB and what
/// it parses into); more wait up to `BUNDLE_WAIT`, then get 503 `svc:bundle/busy`.
pub const BUNDLE_WORK: usize = 2;
const BUNDLE_WAIT: Duration = Duration::from_secs(10);
/// Plans kept for their `applyToken`: at most this many bundle bytes in all; the oldest go
/// first (their tokens are then unknown).
const KEPT_PLAN_BYTES: usize = 32 << 20;

/// A plan kept for `:apply` by token: the bundle's text and a digest of what it planned, not the
/// parsed documents (several times the text's size), so what tokens hold is what
/// `KEPT_PLAN_BYTES` counts. Applying plans the text again and applies only if the plan is the
/// same one.
pub struct Planned {
    tenant: Uuid,
    expires: Timestamp,
    prune: bool,
    text: String,
    digest: [u8; 32],
}

/// What identifies a plan: its actions, in order.
fn plan_digest(result: &PlanResult) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(fault::encoded(
        "a bundle plan",
        serde_json::to_vec(&result.plan),
    ));
    h.finalize().into()
}

/// Where an apply takes its changes from.
pub enum BundleSource {
    Text(String),
    Token(String),
}

fn bundle_error(detail: impl Into<String>) -> InventoryError {
    InventoryError::Invalid(Invalid {
        field: "bundle".into(),
        detail: detail.into(),
    })
}

fn config_kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name || k.code == name)
}

/// A validated document: what it is and its normal form.
enum Checked {
    Doc {
        kind: &'static Kind,
        name: String,
        body: String,
        /// The documents it names (see `doc_references`).
        references: Vec<Reference>,
        /// The credentials it carried in plain text, now secrets it names.
        credentials: Vec<(String, String)>,
    },
    Object {
        host: Option<String>,
        name: String,
        body: Box<ObjectDocBody>,
    },
}

/// Names the bundle's documents use that neither the bundle nor the tenant defines: a check
/// command that never runs, a check period that restricts nothing, an escalation policy that
/// pages no one. Warnings by default (saved as written, as the reference does); under
/// `strictReferences` what `:apply` refuses. With `prune` only the bundle's documents remain.
fn dangling_references(
    docs_now: &BTreeMap<(&'static str, String), String>,
    checked: &[Checked],
    prune: bool,
) -> Vec<String> {
    let in_bundle: BTreeSet<(&str, &str)> = checked
        .iter()
        .filter_map(|c| match c {
            Checked::Doc { kind, name, .. } => Some((kind.name, name.as_str())),
            Checked::Object { .. } => None,
        })
        .collect();
    let defined = |r: &Reference| {
        in_bundle.contains(&(r.kind, r.name.as_str()))
            || !prune && docs_now.contains_key(&(r.kind, r.name.clone()))
    };
    let mut dangling = Vec::new();
    for c in checked {
        let (label, references) = match c {
            Checked::Object {
                host: Some(host),
                name,
                body,
            } => (
                format!("service {host}/{name}"),
                spec_references(&body.spec),
            ),
            Checked::Object { name, body, .. } => {
                (format!("host {name}"), spec_references(&body.spec))
            }
            Checked::Doc {
                kind,
                name,
                references,
                ..
            } => (format!("{} {name}", kind.code), references.clone()),
        };
        for r in references.iter().filter(|r| !defined(r)) {
            dangling.push(format!("{label}: {}", r.dangling()));
        }
    }
    dangling
}

/// Checks one document of a bundle as a single save would be checked.
fn check(inventory: &Inventory, doc: BundleDoc) -> Result<Checked, String> {
    check_name(&doc.name).map_err(|e| e.detail)?;
    match doc.kind.as_str() {
        "host" | "service" => {
            let body: ObjectDocBody = crate::model::input::from_value(if doc.body.is_null() {
                Value::Object(Default::default())
            } else {
                doc.body
            })?;
            crate::model::event::check_labels(&body.labels)?;
            match (doc.kind.as_str(), &doc.host) {
                ("service", None) => return Err("a service needs its host".into()),
                ("host", Some(_)) => return Err("a host has no host".into()),
                _ => {}
            }
            let folder = super::objects::normal_folder(body.folder.clone());
            Ok(Checked::Object {
                host: doc.host,
                name: doc.name,
                body: Box::new(ObjectDocBody {
                    folder: Some(folder),
                    ..body
                }),
            })
        }
        SHIPPED_DOWNTIMES => Err(
            "downtimes come in a site's bundle from its main only: create one at /api/v1/downtimes"
                .into(),
        ),
        other => {
            let kind = config_kind(other).ok_or_else(|| format!("unknown kind {other:?}"))?;
            let Value::Object(mut map) = (if doc.body.is_null() {
                Value::Object(Default::default())
            } else {
                doc.body
            }) else {
                return Err("body must be an object".into());
            };
            for key in METADATA {
                map.remove(key);
            }
            let admitted = inventory
                .admit(kind, &doc.name, map)
                .map_err(|e| e.detail)?;
            Ok(Checked::Doc {
                kind,
                name: doc.name,
                references: doc_references(kind.name, &admitted.body),
                body: Value::Object(admitted.body).to_string(),
                credentials: admitted.credentials,
            })
        }
    }
}

/// The tenant's templates as they would be once the bundle is applied.
fn templates_after(
    docs_now: &BTreeMap<(&'static str, String), String>,
    checked: &[Checked],
    prune: bool,
) -> HashMap<String, ObjectSpec> {
    let kept = docs_now
        .iter()
        .filter(|_| !prune)
        .filter(|((k, _), _)| *k == "templates")
        .map(|((_, n), body)| (n.clone(), template_spec(body)));
    let bundled = checked.iter().filter_map(|c| match c {
        Checked::Doc {
            kind, name, body, ..
        } if kind.name == "templates" => Some((name.clone(), template_spec(body))),
        _ => None,
    });
    kept.chain(bundled).collect()
}

/// Applies a plan's operations in order in `tx` (all or nothing: an error names the operation
/// and the transaction is aborted); the audit entry of each change.
fn apply_ops(
    tx: &Tx,
    tenant: Uuid,
    ops: Vec<BundleOp>,
    now: Timestamp,
    actor: &Actor,
) -> Result<Vec<AuditDraft>, InventoryError> {
    let mut audits = Vec::new();
    let audit =
        |action: &str, resource: String| AuditDraft::new(now, tenant, actor, action, resource);
    for (i, op) in ops.into_iter().enumerate() {
        let refused = |what: &str, why: &dyn std::fmt::Display| {
            InventoryError::Apply(format!("document {} ({what}): {why}", i + 1))
        };
        // A refusal names its document; the store's own failure stays one (the kernel takes
        // the store offline on it).
        let fail = |e: StoreError, what: &str| match e {
            StoreError::Duplicate(_)
            | StoreError::NotFound
            | StoreError::VersionConflict { .. }
            | StoreError::EmailInUse
            | StoreError::Conflict(_)
            | StoreError::Invalid(_) => refused(what, &e),
            failure => InventoryError::Store(failure),
        };
        match op {
            BundleOp::PutDoc {
                kind,
                name,
                body,
                secrets,
            } => {
                let what = format!("{kind} {name:?}");
                let doc = match tx.config_doc(tenant, kind, &name)? {
                    Some(old) => ConfigDoc {
                        body,
                        updated_at: now,
                        version: old.version + 1,
                        ..old
                    },
                    None => {
                        tx.check_doc_name_free(tenant, kind, &name)
                            .map_err(|e| fail(e, &what))?;
                        ConfigDoc {
                            id: tx.new_id(),
                            tenant_id: tenant,
                            kind: kind.to_string(),
                            name: name.clone(),
                            created_at: now,
                            updated_at: now,
                            version: 1,
                            body,
                        }
                    }
                };
                tx.put_config_doc(&doc).map_err(|e| fail(e, &what))?;
                for mut secret in secrets {
                    tx.put_secret(&mut secret).map_err(|e| fail(e, &what))?;
                }
                audits.push(audit("bundle.apply", format!("{kind}/{name}")).after(doc.to_json()));
            }
            BundleOp::DeleteDoc { kind, name } => {
                if let Some(old) = tx.remove_config_doc(tenant, kind, &name)? {
                    audits.push(
                        audit("bundle.prune", format!("{kind}/{name}")).before(old.to_json()),
                    );
                }
            }
            BundleOp::PutObject {
                host,
                name,
                folder,
                labels,
                spec,
            } => {
                let what = format!(
                    "{} {name:?}",
                    if host.is_some() { "service" } else { "host" }
                );
                // The host a service names must exist by now (earlier operations included).
                let owner = match &host {
                    None => None,
                    Some(h) => Some(
                        tx.object_named(tenant, ObjectKind::Host, None, h)?
                            .ok_or_else(|| refused(&what, &format!("no host {h:?}")))?,
                    ),
                };
                let kind = if owner.is_some() {
                    ObjectKind::Service
                } else {
                    ObjectKind::Host
                };
                let existing = match tx.object_named(tenant, kind, owner, &name)? {
                    Some(id) => tx.object(tenant, id)?,
                    None => None,
                };
                let object = match existing {
                    Some(old) => {
                        let new = Object {
                            folder,
                            labels,
                            spec: *spec,
                            updated_at: now,
                            version: old.version + 1,
                            ..old
                        };
                        tx.put_object(&new)?;
                        new
                    }
                    None => {
                        let new = Object {
                            id: tx.new_id(),
                            tenant_id: tenant,
                            kind,
                            name: name.clone(),
                            folder,
                            host_id: owner,
                            labels,
                            spec: *spec,
                            created_at: now,
                            updated_at: now,
                            version: 1,
                        };
                        tx.insert_object(&new).map_err(|e| fail(e, &what))?;
                        new
                    }
                };
                audits.push(audit("bundle.apply", what.clone()).after(&object));
            }
            BundleOp::DeleteObject { host, name } => {
                let owner = match &host {
                    Some(h) => match tx.object_named(tenant, ObjectKind::Host, None, h)? {
                        Some(id) => Some(id),
                        None => continue,
                    },
                    None => None,
                };
                let kind = if host.is_some() {
                    ObjectKind::Service
                } else {
                    ObjectKind::Host
                };
                if let Some(id) = tx.object_named(tenant, kind, owner, &name)? {
                    let old = tx.delete_object(tenant, id)?;
                    audits.push(audit("bundle.prune", format!("object/{}", old.id)).before(&old));
                }
            }
        }
    }
    Ok(audits)
}

impl Inventory {
    /// Everything the tenant has, as (kind, name) → body text and (host, name) → object.
    async fn current(
        &self,
        tenant: Uuid,
    ) -> Result<
        (
            BTreeMap<(&'static str, String), String>,
            BTreeMap<(Option<String>, String), Object>,
        ),
        InventoryError,
    > {
        let mut docs = BTreeMap::new();
        for kind in &KINDS {
            for d in self
                .store
                .docs(tenant, kind.name, None, usize::MAX, |_| true)
                .await?
            {
                docs.insert((kind.name, d.name), d.body);
            }
        }
        let objects = self
            .store
            .objects(tenant, None, usize::MAX, |_| true)
            .await?;
        let hosts: HashMap<Uuid, String> = objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Host)
            .map(|o| (o.id, o.name.clone()))
            .collect();
        let objects = objects
            .into_iter()
            .map(|o| {
                (
                    (
                        o.host_id.and_then(|h| hosts.get(&h).cloned()),
                        o.name.clone(),
                    ),
                    o,
                )
            })
            .collect();
        Ok((docs, objects))
    }

    /// Validates a bundle against the tenant's state and works out what applying it changes.
    async fn plan(
        &self,
        tenant: Uuid,
        text: &str,
        prune: bool,
    ) -> Result<(Vec<BundleOp>, PlanResult), InventoryError> {
        self.plan_docs(tenant, parse(text).map_err(bundle_error)?, prune)
            .await
    }

    async fn plan_docs(
        &self,
        tenant: Uuid,
        docs: Vec<BundleDoc>,
        prune: bool,
    ) -> Result<(Vec<BundleOp>, PlanResult), InventoryError> {
        let mut errors = Vec::new();
        let mut checked = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, doc) in docs.into_iter().enumerate() {
            let label = format!("document {} ({} {:?})", i + 1, doc.kind, doc.name);
            if !seen.insert((doc.kind.clone(), doc.host.clone(), doc.name.clone())) {
                errors.push(format!("{label}: appears twice"));
                continue;
            }
            match check(self, doc) {
                Ok(c) => checked.push(c),
                Err(e) => errors.push(format!("{label}: {e}")),
            }
        }
        let (docs_now, objects_now) = self.current(tenant).await?;
        let templates: BTreeSet<String> = docs_now
            .keys()
            .filter(|(k, _)| *k == "templates")
            .map(|(_, n)| n.clone())
            .chain(checked.iter().filter_map(|c| match c {
                Checked::Doc { kind, name, .. } if kind.name == "templates" => Some(name.clone()),
                _ => None,
            }))
            .collect();
        for c in &checked {
            let (name, imports) = match c {
                Checked::Object { name, body, .. } => (name, body.spec.templates.clone()),
                Checked::Doc {
                    kind, name, body, ..
                } if kind.name == "templates" => (name, template_spec(body).templates),
                Checked::Doc { .. } => continue,
            };
            for t in imports.iter().flatten() {
                if !templates.contains(t) {
                    errors.push(format!("{name:?}: unknown template {t:?}"));
                }
            }
        }
        if let Err(e) = check_template_graph(&templates_after(&docs_now, &checked, prune), None) {
            errors.push(e);
        }
        let mut warnings = dangling_references(&docs_now, &checked, prune);
        if self.strict_references {
            errors.append(&mut warnings);
        }
        if !errors.is_empty() {
            return Err(bundle_error(errors.join("; ")));
        }
        // Templates first, then the other kinds, hosts and services: references resolve in order.
        checked.sort_by_key(|c| match c {
            Checked::Doc { kind, .. } => (
                KINDS.iter().position(|k| k.name == kind.name).unwrap_or(0),
                0,
            ),
            Checked::Object { host: None, .. } => (KINDS.len(), 0),
            Checked::Object { .. } => (KINDS.len(), 1),
        });
        let mut ops = Vec::new();
        let mut plan = Vec::new();
        let mut keep_docs = BTreeSet::new();
        let mut keep_objects = BTreeSet::new();
        for c in checked {
            match c {
                Checked::Doc {
                    kind,
                    name,
                    body,
                    credentials,
                    ..
                } => {
                    let action = match docs_now.get(&(kind.name, name.clone())) {
                        None => "create",
                        Some(b) if *b == body && self.holds(tenant, &credentials).await => {
                            "unchanged"
                        }
                        Some(_) => "update",
                    };
                    keep_docs.insert((kind.name, name.clone()));
                    plan.push(PlanAction {
                        action: action.into(),
                        kind: kind.name.into(),
                        name: name.clone(),
                        host: None,
                    });
                    if action != "unchanged" {
                        ops.push(BundleOp::PutDoc {
                            kind: kind.name,
                            name,
                            body,
                            secrets: self.seal_all(tenant, credentials)?,
                        });
                    }
                }
                Checked::Object { host, name, body } => {
                    let folder = body.folder.clone().unwrap_or_else(|| "/".into());
                    let action = match objects_now.get(&(host.clone(), name.clone())) {
                        None => "create",
                        Some(o)
                            if o.folder == folder
                                && o.labels == body.labels
                                && o.spec == body.spec =>
                        {
                            "unchanged"
                        }
                        Some(_) => "update",
                    };
                    keep_objects.insert((host.clone(), name.clone()));
                    let kind = if host.is_some() { "service" } else { "host" };
                    plan.push(PlanAction {
                        action: action.into(),
                        kind: kind.into(),
                        name: name.clone(),
                        host: host.clone(),
                    });
                    if action != "unchanged" {
                        ops.push(BundleOp::PutObject {
                            host,
                            name,
                            folder,
                            labels: body.labels,
                            spec: Box::new(body.spec),
                        });
                    }
                }
            }
        }
        if prune {
            // Services before hosts, objects before the documents they may refer to.
            let mut gone: Vec<&(Option<String>, String)> = objects_now
                .keys()
                .filter(|k| !keep_objects.contains(*k))
                .collect();
            gone.sort_by_key(|(host, _)| host.is_none());
            for (host, name) in gone {
                plan.push(PlanAction {
                    action: "delete".into(),
                    kind: if host.is_some() { "service" } else { "host" }.into(),
                    name: name.clone(),
                    host: host.clone(),
                });
                ops.push(BundleOp::DeleteObject {
                    host: host.clone(),
                    name: name.clone(),
                });
            }
            for (kind, name) in docs_now.keys().filter(|k| !keep_docs.contains(*k)) {
                plan.push(PlanAction {
                    action: "delete".into(),
                    kind: (*kind).into(),
                    name: name.clone(),
                    host: None,
                });
                ops.push(BundleOp::DeleteDoc {
                    kind,
                    name: name.clone(),
                });
            }
        }
        Ok((
            ops,
            PlanResult {
                plan,
                apply_token: None,
                warnings,
                applied: false,
            },
        ))
    }

    /// A place among the `BUNDLE_WORK` bundle jobs running at once, held while the request
    /// reads its body and works; `Busy` after waiting `BUNDLE_WAIT` for one.
    pub async fn bundle_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, InventoryError> {
        match tokio::time::timeout(BUNDLE_WAIT, self.bundle_slots.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(InventoryError::Busy),
        }
    }

    /// `:plan`: the changes, and a token that applies exactly them within 15 minutes.
    pub async fn plan_bundle(
        &self,
        p: &Principal,
        text: &str,
        prune: bool,
    ) -> Result<PlanResult, InventoryError> {
        let (_, mut result) = self.plan(p.tenant, text, prune).await?;
        let token = crate::model::audit::hex(&super::random_token()?);
        result.apply_token = Some(token.clone());
        let now = self.clock.now();
        let mut plans = self.plans.locked();
        plans.retain(|_, planned| planned.expires > now);
        let mut kept: usize = plans.values().map(|p| p.text.len()).sum::<usize>() + text.len();
        while kept > KEPT_PLAN_BYTES {
            let Some(oldest) = plans
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(t, _)| t.clone())
            else {
                break;
            };
            kept -= plans.remove(&oldest).map_or(0, |p| p.text.len());
        }
        plans.insert(
            token,
            Planned {
                tenant: p.tenant,
                expires: now.plus(TOKEN_TTL),
                prune,
                text: text.to_string(),
                digest: plan_digest(&result),
            },
        );
        Ok(result)
    }

    /// `:apply`: plans (or takes a token's plan) and, unless `dry_run`, applies all of it in
    /// one transaction.
    pub async fn apply_bundle(
        &self,
        p: &Principal,
        actor: &Actor,
        source: BundleSource,
        prune: bool,
        dry_run: bool,
    ) -> Result<PlanResult, InventoryError> {
        let (ops, mut result) = match source {
            BundleSource::Text(text) => self.plan(p.tenant, &text, prune).await?,
            BundleSource::Token(token) => {
                let planned = {
                    let now = self.clock.now();
                    let mut plans = self.plans.locked();
                    match plans.remove(&token) {
                        Some(planned) if planned.tenant == p.tenant && planned.expires > now => {
                            planned
                        }
                        Some(planned) => {
                            if planned.tenant != p.tenant {
                                // Another tenant's token stays usable by its owner.
                                plans.insert(token, planned);
                            }
                            return Err(InventoryError::Token);
                        }
                        None => return Err(InventoryError::Token),
                    }
                };
                let (ops, result) = self.plan(p.tenant, &planned.text, planned.prune).await?;
                // What changed since the plan makes it another plan: its token applies nothing.
                if plan_digest(&result) != planned.digest {
                    return Err(InventoryError::Token);
                }
                (ops, result)
            }
        };
        result.apply_token = None;
        if !dry_run {
            self.check_bundle_saves(p, &ops).await?;
        }
        if dry_run || ops.is_empty() {
            result.applied = !dry_run;
            return Ok(result);
        }
        let event = applied_event(p.tenant, &ops);
        let (tenant, now, actor) = (p.tenant, self.clock.now(), actor.clone());
        self.store
            .transact(move |tx| -> TxResult<_, InventoryError> {
                let audits = apply_ops(tx, tenant, ops, now, &actor)?;
                tx.record(audits, vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        result.applied = true;
        Ok(result)
    }

    /// A bundle saves documents and objects as their own routes do: one that names a secret,
    /// or whose check sends one, needs `admin:secrets` (secrets it seals from its own plain
    /// text aside), the secrets it names must be set, and a listening source's address is
    /// checked as at its route.
    async fn check_bundle_saves(
        &self,
        p: &Principal,
        ops: &[BundleOp],
    ) -> Result<(), InventoryError> {
        // The objects resolve through the templates as the bundle leaves them.
        let mut templates = self.store.template_specs(p.tenant).await?;
        for op in ops {
            if let BundleOp::PutDoc {
                kind: "templates",
                name,
                body,
                ..
            } = op
            {
                templates.insert(name.clone(), template_spec(body));
            }
        }
        for op in ops {
            match op {
                BundleOp::PutDoc {
                    kind,
                    name,
                    body,
                    secrets,
                } => {
                    let sealed: Vec<&str> = secrets.iter().map(|s| s.meta.name.as_str()).collect();
                    let body = match serde_json::from_str(body) {
                        Ok(Value::Object(body)) => body,
                        _ => Default::default(),
                    };
                    let named = super::document_secrets(kind, &body);
                    super::check_secret_use(p, &named, &sealed)?;
                    self.check_secrets_exist(p.tenant, &body, &named, &sealed)
                        .await?;
                    self.check_listen(p.tenant, kind, name, &body).await?;
                }
                BundleOp::PutObject { spec, .. } => {
                    let effective = super::objects::resolve_through(&templates, spec)?;
                    self.check_object_secret_use(p, &effective).await?;
                }
                BundleOp::DeleteDoc { .. } | BundleOp::DeleteObject { .. } => {}
            }
        }
        Ok(())
    }

    /// The tenant's configuration as a bundle: documents by kind and name, then hosts and
    /// services by name; no ids, times or versions, so it applies back to an identical state.
    pub async fn export_bundle(&self, p: &Principal) -> Result<String, InventoryError> {
        let (docs, objects) = self.current(p.tenant).await?;
        let mut out: Vec<BundleDoc> = Vec::new();
        for kind in &KINDS {
            for ((_, name), body) in docs
                .range((kind.name, String::new())..)
                .take_while(|((k, _), _)| *k == kind.name)
            {
                out.push(BundleDoc {
                    kind: kind.name.into(),
                    name: name.clone(),
                    host: None,
                    body: fault::decoded("a configuration document", serde_json::from_str(body)),
                });
            }
        }
        let mut objects: Vec<(&(Option<String>, String), &Object)> = objects.iter().collect();
        objects.sort_by(|a, b| {
            (a.0.0.is_some(), &a.0.0, &a.0.1).cmp(&(b.0.0.is_some(), &b.0.0, &b.0.1))
        });
        for ((host, name), o) in objects {
            let body = ObjectDocBody {
                folder: Some(o.folder.clone()),
                labels: o.labels.clone(),
                spec: o.spec.clone(),
            };
            out.push(BundleDoc {
                kind: if host.is_some() { "service" } else { "host" }.into(),
                name: name.clone(),
                host: host.clone(),
                body: fault::encoded("an object", serde_json::to_value(body)),
            });
        }
        Ok(render(&out))
    }
}

/// The `config` event of an apply: the kinds it changed.
fn applied_event(tenant: Uuid, ops: &[BundleOp]) -> EventDraft {
    let kinds: BTreeSet<String> = ops
        .iter()
        .map(|op| match op {
            BundleOp::PutDoc { kind, .. } | BundleOp::DeleteDoc { kind, .. } => (*kind).to_string(),
            BundleOp::PutObject { .. } | BundleOp::DeleteObject { .. } => "objects".to_string(),
        })
        .collect();
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    EventDraft::config(tenant, &kinds, "bundle.apply", "bundle")
}

/// A site's pulled bundle: its configuration documents, and the downtimes its main ships.
struct SiteBundle {
    docs: Vec<BundleDoc>,
    downtimes: Vec<(Uuid, ShippedDowntime)>,
}

/// A site's pulled bundle split, the shipped downtimes checked.
fn split_site_bundle(text: &str) -> Result<SiteBundle, InventoryError> {
    let (shipped, docs): (Vec<BundleDoc>, Vec<BundleDoc>) = parse(text)
        .map_err(bundle_error)?
        .into_iter()
        .partition(|d| d.kind == SHIPPED_DOWNTIMES);
    let mut errors = Vec::new();
    let mut downtimes = Vec::new();
    for doc in shipped {
        let read = Uuid::parse_str(&doc.name)
            .map_err(|_| "its name is not an id".to_string())
            .and_then(|id| {
                let d: ShippedDowntime =
                    serde_json::from_value(doc.body).map_err(|e| e.to_string())?;
                d.check()?;
                Ok((id, d))
            });
        match read {
            Ok(d) => downtimes.push(d),
            Err(e) => errors.push(format!("downtime {:?}: {e}", doc.name)),
        }
    }
    if !errors.is_empty() {
        return Err(bundle_error(errors.join("; ")));
    }
    Ok(SiteBundle { docs, downtimes })
}

/// Keeps the downtimes the main ships as the site's (`fromMain`), each change with its audit
/// entry and `downtime` event: new ones created, changed ones updated (the notices the site
/// gave kept), and those the main no longer ships ended now (`action: withdrawn`).
fn receive_downtimes(
    tx: &Tx,
    tenant: Uuid,
    shipped: Vec<(Uuid, ShippedDowntime)>,
    now: Timestamp,
    actor: &Actor,
) -> Result<(Vec<AuditDraft>, Vec<EventDraft>), InventoryError> {
    let (mut audits, mut events) = (Vec::new(), Vec::new());
    let audit = |action: &str, id: Uuid| {
        AuditDraft::new(now, tenant, actor, action, format!("downtime/{id}"))
    };
    let mut kept = BTreeSet::new();
    for (id, terms) in shipped {
        kept.insert(id);
        let old = tx.downtime(tenant, id)?;
        if old.as_ref().is_some_and(|o| !o.from_main) {
            return Err(InventoryError::Apply(format!(
                "downtime {id}: the site has one of its own by that id"
            )));
        }
        let Some(new) = terms.received(tenant, id, old.as_ref()) else {
            continue;
        };
        tx.save_downtime(&new)?;
        let mut event = new.event();
        audits.push(match &old {
            Some(old) => {
                event.payload["action"] = serde_json::json!("updated");
                audit("downtime.update", id).before(old).after(&new)
            }
            None => audit("downtime.create", id).after(&new),
        });
        event.payload["fromMain"] = serde_json::json!(true);
        events.push(event);
    }
    for old in tx.tenant_downtimes(tenant)? {
        if !old.from_main || kept.contains(&old.id) || old.over(now) {
            continue;
        }
        let new = old.ended(now);
        tx.save_downtime(&new)?;
        let mut event = new.event();
        event.payload["action"] = serde_json::json!("withdrawn");
        event.payload["fromMain"] = serde_json::json!(true);
        events.push(event);
        audits.push(audit("downtime.delete", old.id).before(&old).after(&new));
    }
    Ok((audits, events))
}

impl crate::runtime::SiteBundles for Inventory {
    /// The configuration of the site's bundle (without prune) and the downtimes its main
    /// ships, in one transaction: all of it, or none.
    fn apply_site_bundle(&self, text: String) -> crate::runtime::PortFuture<'_, ()> {
        Box::pin(async move {
            let tenant = self.store.default_tenant().await?.id;
            let p = Principal::system(tenant, "federation".into());
            let actor = Actor::system("federation");
            let SiteBundle { docs, downtimes } = split_site_bundle(&text)?;
            let (ops, _) = self.plan_docs(tenant, docs, false).await?;
            self.check_bundle_saves(&p, &ops).await?;
            let now = self.clock.now();
            self.store
                .transact(move |tx| -> TxResult<_, InventoryError> {
                    let changed = !ops.is_empty();
                    let event = applied_event(tenant, &ops);
                    let mut audits = apply_ops(tx, tenant, ops, now, &actor)?;
                    let (more, mut events) = receive_downtimes(tx, tenant, downtimes, now, &actor)?;
                    if !changed && events.is_empty() {
                        return Ok(Wrote::Unchanged(()));
                    }
                    audits.extend(more);
                    if changed {
                        events.push(event);
                    }
                    tx.record(audits, events)?;
                    Ok(Wrote::Changed(()))
                })
                .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Clock, TestClock};
    use crate::store::Store;
    use std::sync::Arc;

    fn object(host: Option<&str>, name: &str) -> BundleOp {
        BundleOp::PutObject {
            host: host.map(String::from),
            name: name.into(),
            folder: "/".into(),
            labels: BTreeMap::new(),
            spec: Box::default(),
        }
    }

    fn host(name: &str) -> BundleOp {
        object(None, name)
    }

    fn service(host: &str, name: &str) -> BundleOp {
        object(Some(host), name)
    }

    /// Operations apply in order in one transaction, each with its audit entry; one that
    /// fails names itself and leaves nothing of the others behind.
    #[tokio::test]
    async fn a_plan_applies_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::new("2026-03-01T08:00:00Z".parse().unwrap()));
        let store = Store::open(dir.path(), clock.clone()).unwrap();
        let (tenant, now, actor) = (Uuid::from_u128(7), clock.now(), Actor::system("test"));
        let apply = |ops: Vec<BundleOp>| {
            let actor = actor.clone();
            store.transact(move |tx| -> TxResult<_, InventoryError> {
                let audits = apply_ops(tx, tenant, ops, now, &actor)?;
                tx.record(audits.clone(), Vec::new())?;
                Ok(Wrote::Changed(audits))
            })
        };
        let names = || {
            store.transact(move |tx| -> TxResult<_> {
                let host = tx.object_named(tenant, ObjectKind::Host, None, "plc")?;
                let service = match host {
                    Some(h) => tx.object_named(tenant, ObjectKind::Service, Some(h), "modbus")?,
                    None => None,
                };
                let doc = tx.config_doc(tenant, "contacts", "ops")?;
                Ok(Wrote::Unchanged((
                    host.is_some(),
                    service.is_some(),
                    doc.is_some(),
                )))
            })
        };
        let contact = || BundleOp::PutDoc {
            kind: "contacts",
            name: "ops".into(),
            body: r#"{"email":"ops@example.org"}"#.into(),
            secrets: Vec::new(),
        };
        let refused = apply(vec![contact(), host("plc"), service("missing", "modbus")])
            .await
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("document 3 (service \"modbus\")"),
            "{refused}"
        );
        assert_eq!(names().await.unwrap(), (false, false, false));

        let audits = apply(vec![contact(), host("plc"), service("plc", "modbus")])
            .await
            .unwrap();
        let actions: Vec<&str> = audits.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(actions, ["bundle.apply"; 3]);
        assert_eq!(names().await.unwrap(), (true, true, true));

        let pruned = apply(vec![
            BundleOp::DeleteObject {
                host: None,
                name: "plc".into(),
            },
            BundleOp::DeleteDoc {
                kind: "contacts",
                name: "ops".into(),
            },
        ])
        .await
        .unwrap();
        assert_eq!(pruned.len(), 2);
        assert!(pruned.iter().all(|a| a.action == "bundle.prune"));
        assert_eq!(
            names().await.unwrap(),
            (false, false, false),
            "the host took its service"
        );
    }
}
