//! Hosts and services: create (one or a batch), update under If-Match with the rename guard,
//! delete (a host takes its services), lists, and the effective configuration through the
//! template chain.

use super::{Inventory, InventoryError, check_secret_use, named_secrets};
use crate::auth::Principal;
use crate::model::audit::AuditDraft;
use crate::model::config::{Invalid, ObjectSpec, check_name, spec_references};
use crate::model::dependency;
use crate::model::event::EventDraft;
use crate::model::event::check_labels;
use crate::model::identity::Actor;
use crate::model::object::{
    EffectiveConfig, Object, ObjectBody, ObjectFilter, ObjectKind, ObjectView,
    check_template_graph, effective_labels, resolve,
};
use crate::store::journal::Record;
use crate::store::{StoreError, Tx, check_version};
use crate::store::{TxResult, Wrote};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// Items per transaction of a batch: bounded so one batch never holds the writer for long.
const BATCH_CHUNK: usize = 500;

/// What `config` events of changes to hosts and services name as their kind.
const OBJECTS: &str = "objects";

fn invalid(field: &str, detail: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        detail: detail.into(),
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchRequest {
    #[serde(default)]
    pub hosts: Vec<serde_json::Value>,
    #[serde(default)]
    pub services: Vec<serde_json::Value>,
    /// `create` (default: an existing name is an item error) or `upsert` (replace it).
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BatchItemResult {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BatchResult {
    pub created: usize,
    pub failed: usize,
    pub results: Vec<BatchItemResult>,
}

/// What building objects reads from the store, read once per request: a batch of a thousand
/// objects makes a few reads, not a few thousand (each a round trip on PostgreSQL).
#[derive(Default)]
struct Lookups {
    templates: HashMap<String, ObjectSpec>,
    /// References found to exist (see `check_references`).
    found: HashSet<(&'static str, String)>,
    /// Hosts found, by name.
    hosts: HashMap<String, Uuid>,
    /// The tenant's objects and their effective labels, read once the first object with
    /// dependencies is checked for a loop.
    graph: Option<(Vec<Object>, crate::runtime::LabelsOf)>,
}

/// The template chain of a spec and the spec resolved through `templates`.
pub(super) fn resolve_through(
    templates: &HashMap<String, ObjectSpec>,
    spec: &ObjectSpec,
) -> Result<EffectiveConfig, Invalid> {
    resolve(spec, &|n: &str| templates.get(n).cloned()).map_err(|e| invalid("spec", e))
}

fn parse_spec(spec: Option<serde_json::Value>) -> Result<ObjectSpec, Invalid> {
    let spec = spec.ok_or_else(|| invalid("spec", "spec is required"))?;
    crate::model::input::from_value_at("spec", spec).map_err(|e| invalid("spec", e))
}

pub(super) fn normal_folder(folder: Option<String>) -> String {
    let f = folder.unwrap_or_default();
    let f = f.trim().trim_end_matches('/');
    if f.starts_with('/') {
        f.to_string()
    } else {
        format!("/{f}")
    }
}

/// Applies the writes in one transaction: each object is created, or with `upsert` replaces
/// the fields of the object of its name. Each item succeeds or fails on its own (a taken name,
/// a missing host), other errors abort the whole transaction. Each written item's audit entry,
/// and the events `events` makes of the outcomes, are recorded in that transaction.
fn write_objects(
    tx: &Tx,
    writes: Vec<(Object, AuditDraft)>,
    upsert: bool,
    events: impl FnOnce(&[Result<Object, StoreError>]) -> Vec<EventDraft>,
) -> Result<Vec<Result<Object, StoreError>>, StoreError> {
    tx.read_ahead_objects(&writes.iter().map(|(o, _)| o).collect::<Vec<_>>())?;
    let mut out = Vec::with_capacity(writes.len());
    let mut audits = Vec::new();
    for (o, audit) in writes {
        let named = match upsert {
            true => tx.object_named(o.tenant_id, o.kind, o.host_id, &o.name)?,
            false => None,
        };
        let existing = named
            .map(|id| tx.object(o.tenant_id, id))
            .transpose()?
            .flatten();
        let result = match existing {
            Some(old) => {
                let new = Object {
                    id: old.id,
                    created_at: old.created_at,
                    version: old.version + 1,
                    ..o
                };
                tx.put_object(&new)?;
                audits.push(audit.before(&old).after(&new));
                Ok(new)
            }
            None => match tx.insert_object(&o) {
                Ok(()) => {
                    audits.push(audit.after(&o));
                    Ok(o)
                }
                Err(e @ (StoreError::Duplicate(_) | StoreError::NotFound)) => Err(e),
                Err(e) => return Err(e),
            },
        };
        out.push(result);
    }
    if audits.is_empty() {
        tx.unrecorded("a batch none of whose items was written");
    }
    tx.record(audits, events(&out))?;
    Ok(out)
}

impl Inventory {
    /// The template chain of a spec and the spec resolved through it.
    pub async fn resolve(
        &self,
        tenant: Uuid,
        spec: &ObjectSpec,
    ) -> Result<EffectiveConfig, InventoryError> {
        let templates = self.store.template_specs(tenant).await?;
        Ok(resolve_through(&templates, spec)?)
    }

    /// A template's imports must exist, and with it saved no template may sit in a cycle or head
    /// a chain deeper than the limit.
    pub(super) async fn check_template_imports(
        &self,
        tenant: Uuid,
        name: &str,
        spec: &ObjectSpec,
    ) -> Result<(), InventoryError> {
        let templates = self.store.template_specs(tenant).await?;
        check_template_graph(&templates, Some((name, spec))).map_err(|e| invalid("spec", e).into())
    }

    /// An object whose check sends a secret (in its arguments, its templates' or its check
    /// command's line) decides where the secret goes (its address, its arguments), so saving
    /// one needs `admin:secrets` as saving a document that names a secret does.
    pub(super) async fn check_object_secret_use(
        &self,
        p: &Principal,
        effective: &EffectiveConfig,
    ) -> Result<(), InventoryError> {
        if p.allows(super::SECRET_USE) {
            return Ok(());
        }
        let spec = serde_json::to_string(&effective.spec).unwrap_or_default();
        check_secret_use(p, &named_secrets(&spec), &[])?;
        if let Some(command) = effective.spec.check_command.clone() {
            match self
                .store
                .doc(p.tenant, "check-commands", command, false)
                .await
            {
                Ok(doc) => check_secret_use(p, &named_secrets(&doc.body), &[])?,
                Err(StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn lookups(&self, tenant: Uuid) -> Result<Lookups, InventoryError> {
        Ok(Lookups {
            templates: self.store.template_specs(tenant).await?,
            ..Lookups::default()
        })
    }

    /// Builds a new object from a payload; `kind` is decided by the route and the `host` field.
    async fn new_object(
        &self,
        p: &Principal,
        value: serde_json::Value,
        service_route: bool,
        lookups: &mut Lookups,
    ) -> Result<Object, InventoryError> {
        let body: ObjectBody =
            crate::model::input::from_value(value).map_err(|e| invalid("body", e))?;
        check_name(&body.name)?;
        check_labels(&body.labels).map_err(|e| invalid("labels", e))?;
        let spec = parse_spec(body.spec)?;
        let effective = resolve_through(&lookups.templates, &spec)?;
        self.check_object_secret_use(p, &effective).await?;
        self.check_references(p.tenant, spec_references(&spec), &mut lookups.found)
            .await?;
        let (kind, host_id) = match body.host.filter(|h| !h.is_empty()) {
            Some(host) => {
                let id = match lookups.hosts.get(&host) {
                    Some(id) => *id,
                    None => {
                        let h = self
                            .store
                            .host_by_name(p.tenant, host.clone())
                            .await?
                            .ok_or_else(|| invalid("host", format!("no host {host:?}")))?;
                        lookups.hosts.insert(host, h.id);
                        h.id
                    }
                };
                (ObjectKind::Service, Some(id))
            }
            None if service_route => return Err(invalid("host", "a service needs its host").into()),
            None => (ObjectKind::Host, None),
        };
        let now = self.clock.now();
        let object = Object {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            kind,
            name: body.name,
            folder: normal_folder(body.folder),
            host_id,
            labels: body.labels,
            spec,
            created_at: now,
            updated_at: now,
            version: 1,
        };
        self.check_dependencies(&object, lookups).await?;
        Ok(object)
    }

    /// A spec's `dependsOn`, `observers` and `httpFlow` must be well formed, and with the object saved no
    /// dependency (nor host parent) may lead back to it: the loop is named.
    async fn check_dependencies(
        &self,
        object: &Object,
        lookups: &mut Lookups,
    ) -> Result<(), InventoryError> {
        let effective = resolve_through(&lookups.templates, &object.spec)?;
        if let Some(observers) = &effective.spec.observers {
            observers.check().map_err(|e| invalid("spec", e))?;
        }
        if let Some(flow) = &effective.spec.http_flow {
            flow.check().map_err(|e| invalid("httpFlow", e))?;
        }
        let depends_on = effective.spec.depends_on.clone().unwrap_or_default();
        dependency::check(&depends_on).map_err(|e| invalid("spec", e))?;
        if depends_on.is_empty() && effective.spec.parents.as_ref().is_none_or(Vec::is_empty) {
            return Ok(());
        }
        if lookups.graph.is_none() {
            let tenant = object.tenant_id;
            let objects = self
                .store
                .objects(tenant, None, usize::MAX, |_| true)
                .await?;
            lookups.graph = Some((objects, self.labels.labels_of(tenant).await));
        }
        let Some((stored, labels_of)) = lookups.graph.as_ref() else {
            return Ok(());
        };
        let same = |o: &Object| {
            o.kind == object.kind && o.host_id == object.host_id && o.name == object.name
        };
        // The object as saved, under its stored id when it replaces one.
        let id = stored.iter().find(|o| same(o)).map_or(object.id, |o| o.id);
        let saved = Object {
            id,
            ..object.clone()
        };
        let objects: Vec<&Object> = stored
            .iter()
            .filter(|o| !same(o))
            .chain(std::iter::once(&saved))
            .collect();
        let host_names: HashMap<Uuid, &str> = objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Host)
            .map(|o| (o.id, o.name.as_str()))
            .collect();
        let specs: Vec<(ObjectSpec, std::collections::BTreeMap<String, String>)> = objects
            .iter()
            .map(|o| {
                let spec = resolve_through(&lookups.templates, &o.spec)
                    .map(|e| e.spec)
                    .unwrap_or_else(|_| o.spec.clone());
                let labels = if o.id == id {
                    let mut l = labels_of(id).unwrap_or_default();
                    l.extend(o.labels.clone());
                    l
                } else {
                    labels_of(o.id).unwrap_or_else(|| o.labels.clone())
                };
                (spec, labels)
            })
            .collect();
        let (no_deps, no_parents) = (Vec::new(), Vec::new());
        let nodes: Vec<dependency::Node<'_>> = objects
            .iter()
            .zip(&specs)
            .map(|(o, (spec, labels))| dependency::Node {
                id: o.id,
                kind: o.kind,
                name: match o.host_id {
                    Some(h) => format!("{}/{}", host_names.get(&h).unwrap_or(&""), o.name),
                    None => o.name.clone(),
                },
                labels,
                depends_on: spec.depends_on.as_ref().unwrap_or(&no_deps),
                parents: match o.kind {
                    ObjectKind::Host => spec.parents.as_ref().unwrap_or(&no_parents),
                    ObjectKind::Service => &no_parents,
                },
            })
            .collect();
        match dependency::loop_through(id, &dependency::resolve(&nodes)) {
            Some(path) => Err(invalid("spec", format!("dependency loop: {path}")).into()),
            None => Ok(()),
        }
    }

    fn object_audit(&self, p: &Principal, actor: &Actor, o: &Object, verb: &str) -> AuditDraft {
        let kind = o.kind.as_str();
        AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            &format!("{kind}.{verb}"),
            format!("{kind}/{}", o.id),
        )
    }

    /// The audit entry and the `config` event of a change to an object.
    fn object_record(&self, p: &Principal, actor: &Actor, o: &Object, verb: &str) -> Record {
        self.record_of(self.object_audit(p, actor, o, verb), OBJECTS)
    }

    pub async fn create_object(
        &self,
        p: &Principal,
        actor: &Actor,
        value: serde_json::Value,
        service_route: bool,
    ) -> Result<Object, InventoryError> {
        let mut lookups = self.lookups(p.tenant).await?;
        let o = self
            .new_object(p, value, service_route, &mut lookups)
            .await?;
        let audit = self.object_audit(p, actor, &o, "create");
        let event = EventDraft::config(p.tenant, &[OBJECTS], &audit.action, &audit.resource);
        let mut results = self
            .store
            .transact(move |tx| -> TxResult<_> {
                write_objects(tx, vec![(o, audit)], false, |out| {
                    out.iter()
                        .any(Result::is_ok)
                        .then_some(event)
                        .into_iter()
                        .collect()
                })
                .map(Wrote::Changed)
            })
            .await?;
        // One result per object written: the only one.
        match results.pop() {
            Some(Ok(created)) => Ok(created),
            Some(Err(StoreError::NotFound)) => {
                Err(InventoryError::Invalid(invalid("host", "the host is gone")))
            }
            Some(Err(e)) => Err(e.into()),
            None => Err(InventoryError::NotFound),
        }
    }

    /// Hosts first (so services can name hosts of the same batch), in bounded transactions.
    pub async fn batch(
        &self,
        p: &Principal,
        actor: &Actor,
        req: BatchRequest,
    ) -> Result<BatchResult, InventoryError> {
        let upsert = match req.mode.as_deref().unwrap_or("create") {
            "create" => false,
            "upsert" => true,
            other => {
                return Err(
                    invalid("batch", format!("mode {other:?} must be create or upsert")).into(),
                );
            }
        };
        let mut result = BatchResult::default();
        let mut lookups = self.lookups(p.tenant).await?;
        for (items, service_route) in [(req.hosts, false), (req.services, true)] {
            for chunk in items.chunks(BATCH_CHUNK) {
                let mut writes = Vec::new();
                let mut names = Vec::new();
                for value in chunk {
                    let name = value
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or_default()
                        .to_string();
                    match self
                        .new_object(p, value.clone(), service_route, &mut lookups)
                        .await
                    {
                        Ok(o) => {
                            let audit = self.object_audit(
                                p,
                                actor,
                                &o,
                                if upsert { "upsert" } else { "create" },
                            );
                            writes.push((o, audit));
                            names.push(Some(name));
                        }
                        Err(e) => {
                            result.failed += 1;
                            result.results.push(BatchItemResult {
                                name,
                                id: None,
                                error: Some(e.to_string()),
                            });
                            names.push(None);
                        }
                    }
                }
                // One `config` event per transaction, naming how many objects it wrote.
                let tenant = p.tenant;
                let outcomes = self
                    .store
                    .transact(move |tx| -> TxResult<_> {
                        write_objects(tx, writes, upsert, |out| {
                            let written = out.iter().filter(|r| r.is_ok()).count();
                            (written > 0)
                                .then(|| {
                                    EventDraft::config(
                                        tenant,
                                        &[OBJECTS],
                                        "objects.batch",
                                        &format!("objects/{written}"),
                                    )
                                })
                                .into_iter()
                                .collect()
                        })
                        .map(Wrote::Changed)
                    })
                    .await?;
                let mut outcomes = outcomes.into_iter();
                for name in names.into_iter().flatten() {
                    match outcomes.next() {
                        Some(Ok(o)) => {
                            result.created += 1;
                            result.results.push(BatchItemResult {
                                name,
                                id: Some(o.id),
                                error: None,
                            });
                        }
                        Some(Err(e)) => {
                            result.failed += 1;
                            let error = match e {
                                StoreError::Duplicate(_) => format!("{name:?} already exists"),
                                StoreError::NotFound => "the host is gone".to_string(),
                                other => other.to_string(),
                            };
                            result.results.push(BatchItemResult {
                                name,
                                id: None,
                                error: Some(error),
                            });
                        }
                        None => {}
                    }
                }
            }
        }
        Ok(result)
    }

    pub async fn object(&self, p: &Principal, id: Uuid) -> Result<Object, InventoryError> {
        Ok(self.store.object(p.tenant, id).await?)
    }

    /// One object as the lists show it: with its host's name and its live state.
    /// The object with its live state; `NotFound` when the tenant has none with that id.
    pub async fn view(&self, p: &Principal, id: Uuid) -> Result<ObjectView, InventoryError> {
        let object = match self.store.object(p.tenant, id).await {
            Err(StoreError::NotFound) => return Err(InventoryError::NotFound),
            found => found?,
        };
        let host_name = match object.host_id {
            Some(h) => self.store.host_names(p.tenant, vec![h]).await?.remove(&h),
            None => None,
        };
        let labels = self.labels.labels_of(p.tenant).await;
        let state = self
            .store
            .states(p.tenant, vec![id])
            .await?
            .covered(&*labels)
            .pop();
        Ok(ObjectView {
            object,
            host_name,
            state,
            stale: None,
        })
    }

    pub async fn effective(
        &self,
        p: &Principal,
        id: Uuid,
    ) -> Result<EffectiveConfig, InventoryError> {
        let o = self.store.object(p.tenant, id).await?;
        let mut effective = self.resolve(p.tenant, &o.spec).await?;
        let template_labels = self.store.template_labels(p.tenant).await?;
        let host = match o.host_id {
            Some(h) => {
                let host = self.store.object(p.tenant, h).await?;
                let chain = self
                    .resolve(p.tenant, &host.spec)
                    .await
                    .map(|c| c.template_chain)
                    .unwrap_or_default();
                Some(effective_labels(
                    &chain,
                    &template_labels,
                    None,
                    &host.labels,
                ))
            }
            None => None,
        };
        effective.labels = effective_labels(
            &effective.template_chain,
            &template_labels,
            host.as_ref(),
            &o.labels,
        );
        Ok(effective)
    }

    /// Replaces folder, labels and spec; the name and host cannot change.
    pub async fn update_object(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
        expected: u64,
        value: serde_json::Value,
    ) -> Result<Object, InventoryError> {
        let body: ObjectBody =
            crate::model::input::from_value(value).map_err(|e| invalid("body", e))?;
        let current = self.store.object(p.tenant, id).await?;
        if !body.name.is_empty() && body.name != current.name {
            return Err(invalid("name", "an object cannot be renamed").into());
        }
        if let Some(host) = body.host.as_deref().filter(|h| !h.is_empty()) {
            let owner = match current.host_id {
                Some(h) => self.store.host_names(p.tenant, vec![h]).await?.remove(&h),
                None => None,
            };
            if owner.as_deref() != Some(host) {
                return Err(invalid("host", "a service cannot move to another host").into());
            }
        }
        check_labels(&body.labels).map_err(|e| invalid("labels", e))?;
        let spec = parse_spec(body.spec)?;
        let effective = self.resolve(p.tenant, &spec).await?;
        self.check_object_secret_use(p, &effective).await?;
        self.check_references(p.tenant, spec_references(&spec), &mut HashSet::new())
            .await?;
        let candidate = Object {
            labels: body.labels.clone(),
            spec: spec.clone(),
            ..current.clone()
        };
        self.check_dependencies(&candidate, &mut self.lookups(p.tenant).await?)
            .await?;
        let record = self.object_record(p, actor, &current, "update");
        let (folder, labels, now) = (normal_folder(body.folder), body.labels, self.clock.now());
        let tenant = p.tenant;
        let updated = self
            .store
            .transact(move |tx| -> TxResult<_, InventoryError> {
                let old = tx.object(tenant, id)?.ok_or(InventoryError::NotFound)?;
                check_version(old.version, expected)?;
                let new = Object {
                    folder,
                    labels,
                    spec,
                    updated_at: now,
                    version: old.version + 1,
                    ..old.clone()
                };
                tx.put_object(&new)?;
                tx.record([record.audit.before(&old).after(&new)], record.events)?;
                Ok(Wrote::Changed(new))
            })
            .await?;
        Ok(updated)
    }

    pub async fn delete_object(
        &self,
        p: &Principal,
        actor: &Actor,
        id: Uuid,
    ) -> Result<(), InventoryError> {
        let current = self.store.object(p.tenant, id).await?;
        let record = self.object_record(p, actor, &current, "delete");
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_> {
                let old = tx.delete_object(tenant, id)?;
                tx.record([record.audit.before(&old)], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// The effective labels of the caller's tenant's objects, as the lists' selectors see
    /// them.
    pub async fn labels_of(&self, p: &Principal) -> crate::runtime::labels::LabelsOf {
        self.labels.labels_of(p.tenant).await
    }

    /// One page in id order, with host names for services and, if asked, live states (always
    /// when the filter names states).
    pub async fn objects(
        &self,
        p: &Principal,
        filter: ObjectFilter,
        after: Option<Uuid>,
        limit: usize,
        with_state: bool,
    ) -> Result<Vec<ObjectView>, InventoryError> {
        if filter.states.is_empty() {
            return self.views(p, &filter, after, limit, with_state).await;
        }
        // The state is stored apart from the object: read on in chunks past the objects in
        // other states until a page is full or the objects end.
        const CHUNK: usize = 500;
        let mut found = Vec::new();
        let mut after = after;
        loop {
            let chunk = self.views(p, &filter, after, CHUNK, true).await?;
            let ended = chunk.len() < CHUNK;
            for v in chunk {
                after = Some(v.object.id);
                if filter.state_matches(&v) {
                    found.push(v);
                    if found.len() == limit {
                        return Ok(found);
                    }
                }
            }
            if ended {
                return Ok(found);
            }
        }
    }

    /// One page of the objects the filter's own facts match.
    async fn views(
        &self,
        p: &Principal,
        filter: &ObjectFilter,
        after: Option<Uuid>,
        limit: usize,
        with_state: bool,
    ) -> Result<Vec<ObjectView>, InventoryError> {
        let labels = self.labels.labels_of(p.tenant).await;
        let effective = labels.clone();
        let filter = filter.clone();
        let objects = self
            .store
            .objects(p.tenant, after, limit, move |o| {
                filter.matches(o, || effective(o.id).unwrap_or_else(|| o.labels.clone()))
            })
            .await?;
        let hosts: Vec<Uuid> = objects.iter().filter_map(|o| o.host_id).collect();
        let names = self.store.host_names(p.tenant, hosts).await?;
        let mut states = if with_state {
            self.store
                .states(p.tenant, objects.iter().map(|o| o.id).collect())
                .await?
                .covered_by_object(&*labels)
        } else {
            Default::default()
        };
        Ok(objects
            .into_iter()
            .map(|o| {
                let host_name = o.host_id.and_then(|h| names.get(&h).cloned());
                let state = states.remove(&o.id);
                ObjectView {
                    object: o,
                    host_name,
                    state,
                    stale: None,
                }
            })
            .collect())
    }
}
