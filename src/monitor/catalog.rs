//! The monitoring catalog: every object with its resolved spec and the host its checks run
//! against, the check commands and the time periods, per tenant, held in memory and rebuilt
//! only when the store's catalog generation moves. Results, the scheduler and the staleness
//! sweep read it instead of scanning the store on every request or tick.

use super::checks::{Command, HostInfo};
use crate::model::config::{BUILTIN_CHECKS, ObjectSpec};
use crate::model::dependency::{Group, Node, resolve as resolve_dependencies};
use crate::model::fault;
use crate::model::object::{Object, ObjectKind, effective_labels, resolve};
use crate::model::timeperiod::TimePeriod;
use crate::model::{GoDuration, Timestamp};
use crate::runtime::ObjectLabels;
use crate::runtime::RwLocked;
use crate::runtime::dependencies::{DependenciesFuture, DependenciesOf, ObjectDependencies};
use crate::runtime::labels::{LabelsFuture, own_labels};
use crate::store::{Store, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use uuid::Uuid;

/// One object as monitoring sees it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub object: Object,
    /// The spec with its templates applied (the object's own spec if they cannot be resolved).
    pub spec: ObjectSpec,
    /// Why the templates could not be resolved (a store written before a limit existed can
    /// hold a chain over it); the scheduler reports it as the object's UNKNOWN state.
    pub config_error: Option<String>,
    /// The host the object's checks run against: itself, or a service's host.
    pub host: HostInfo,
    /// The parent hosts' ids, when every parent named exists.
    pub parents: Option<Vec<Uuid>>,
    /// Effective labels: templates', then a service's host's, then its own.
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub struct TenantCatalog {
    pub entries: Vec<Arc<Entry>>,
    hosts: HashMap<String, Arc<Entry>>,
    /// Services by host id, then name: a result names its service by `&str`, found without
    /// building a key (a `String` a lookup was 6 % of the request threads at batches of 500).
    services: HashMap<Uuid, HashMap<String, Arc<Entry>>>,
    by_id: HashMap<Uuid, Arc<Entry>>,
    commands: HashMap<String, Command>,
    periods: HashMap<String, TimePeriod>,
    /// Each object's dependency groups (`model::dependency`), for those that have any.
    dependencies: HashMap<Uuid, Arc<[Group]>>,
    /// Hosts by each of their parents, for re-deriving an UNREACHABLE child once a parent is
    /// back.
    children: HashMap<Uuid, Vec<Arc<Entry>>>,
}

impl TenantCatalog {
    /// Resolves every object's `dependsOn` and `parents` against the objects loaded.
    fn resolve_dependencies(&mut self) {
        let no_parents = Vec::new();
        let no_deps = Vec::new();
        let nodes: Vec<Node<'_>> = self
            .entries
            .iter()
            .map(|e| Node {
                id: e.object.id,
                kind: e.object.kind,
                name: match e.object.kind {
                    ObjectKind::Host => e.object.name.clone(),
                    ObjectKind::Service => format!("{}/{}", e.host.name, e.object.name),
                },
                labels: &e.labels,
                depends_on: e.spec.depends_on.as_ref().unwrap_or(&no_deps),
                parents: match e.object.kind {
                    ObjectKind::Host => e.spec.parents.as_ref().unwrap_or(&no_parents),
                    ObjectKind::Service => &no_parents,
                },
            })
            .collect();
        let resolved = resolve_dependencies(&nodes);
        for e in &self.entries {
            for parent in e.parents.iter().flatten() {
                self.children.entry(*parent).or_default().push(e.clone());
            }
        }
        self.dependencies = resolved
            .into_iter()
            .map(|(id, groups)| (id, Arc::from(groups)))
            .collect();
    }

    /// The object a result names: a host, or a service of that host.
    pub fn by_name(&self, host: &str, service: Option<&str>) -> Option<&Arc<Entry>> {
        let h = self.hosts.get(host)?;
        match service {
            None => Some(h),
            Some(s) => self.services.get(&h.object.id)?.get(s),
        }
    }

    pub fn get(&self, id: Uuid) -> Option<&Arc<Entry>> {
        self.by_id.get(&id)
    }

    /// An object's dependency groups.
    pub fn dependencies(&self, id: Uuid) -> Option<&Arc<[Group]>> {
        self.dependencies.get(&id)
    }

    /// The hosts naming `host` among their parents.
    pub fn children(&self, host: Uuid) -> &[Arc<Entry>] {
        self.children.get(&host).map_or(&[], Vec::as_slice)
    }

    /// A spec's check command: a built-in by name or a `check-commands` document.
    pub fn command(&self, name: &str) -> Option<Command> {
        if BUILTIN_CHECKS.contains(&name) {
            return Some(Command::Builtin(name.to_string()));
        }
        self.commands.get(name).cloned()
    }

    /// Whether checks may run at `at` under `period` (no period, or an unknown one: always).
    pub fn in_period(&self, period: Option<&str>, at: Timestamp) -> bool {
        match period
            .filter(|p| !p.is_empty())
            .and_then(|p| self.periods.get(p))
        {
            Some(p) => p.contains(at, &|n: &str| self.periods.get(n).cloned()),
            None => true,
        }
    }
}

#[derive(Debug, Default)]
pub struct Snapshot {
    generation: u64,
    tenants: HashMap<Uuid, TenantCatalog>,
}

impl Snapshot {
    /// The store's catalog generation this snapshot was loaded at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The effective labels of a tenant's objects, for the store's downtime selectors.
    pub fn labels_of(self: &Arc<Self>, tenant: Uuid) -> crate::runtime::LabelsOf {
        let snapshot = self.clone();
        Arc::new(move |id| {
            snapshot
                .tenant(tenant)
                .and_then(|c| c.get(id))
                .map(|e| e.labels.clone())
        })
    }

    pub fn tenant(&self, id: Uuid) -> Option<&TenantCatalog> {
        self.tenants.get(&id)
    }

    pub fn tenants(&self) -> impl Iterator<Item = (&Uuid, &TenantCatalog)> {
        self.tenants.iter()
    }
}

pub struct Catalog {
    store: Arc<Store>,
    current: RwLock<Arc<Snapshot>>,
    rebuilding: tokio::sync::Mutex<()>,
}

fn command_of(doc: &serde_json::Value) -> Command {
    let line: Vec<String> = match &doc["line"] {
        serde_json::Value::Null => Vec::new(),
        line => fault::decoded(
            "a check command's line",
            serde_json::from_value(line.clone()),
        ),
    };
    if doc["type"] == "builtin" {
        return Command::Builtin(line.first().cloned().unwrap_or_default());
    }
    let timeout = doc["timeout"]
        .as_str()
        .and_then(|t| t.parse::<GoDuration>().ok())
        .map(|d| d.0);
    Command::Plugin { line, timeout }
}

impl ObjectDependencies for Catalog {
    fn dependencies(&self) -> DependenciesFuture<'_> {
        Box::pin(async move {
            match self.snapshot().await {
                Ok(snapshot) => Arc::new(move |tenant, object| {
                    snapshot.tenant(tenant)?.dependencies(object).cloned()
                }) as DependenciesOf,
                Err(e) => {
                    tracing::warn!(error = %e, "catalog unreadable; no dependency holds back");
                    crate::runtime::dependencies::no_dependencies()
                }
            }
        })
    }
}

impl ObjectLabels for Catalog {
    fn labels_of(&self, tenant: Uuid) -> LabelsFuture<'_> {
        Box::pin(async move {
            match self.snapshot().await {
                Ok(snapshot) => snapshot.labels_of(tenant),
                Err(e) => {
                    tracing::warn!(error = %e, "catalog unreadable; selectors match own labels");
                    own_labels()
                }
            }
        })
    }
}

impl Catalog {
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            store,
            current: RwLock::new(Arc::new(Snapshot::default())),
            rebuilding: tokio::sync::Mutex::new(()),
        })
    }

    fn cached(&self) -> Arc<Snapshot> {
        self.current.read_now().clone()
    }

    /// The catalog as of the latest committed catalog write.
    pub async fn snapshot(&self) -> Result<Arc<Snapshot>, StoreError> {
        let cached = self.cached();
        if cached.generation == self.store.catalog_generation() {
            return Ok(cached);
        }
        let _one_at_a_time = self.rebuilding.lock().await;
        let cached = self.cached();
        // Read before loading: a write racing the load moves it again and forces a rebuild.
        let generation = self.store.catalog_generation();
        if cached.generation == generation {
            return Ok(cached);
        }
        let mut tenants = HashMap::new();
        for tenant in self.store.tenants().await? {
            tenants.insert(tenant.id, self.load(tenant.id).await?);
        }
        let fresh = Arc::new(Snapshot {
            generation,
            tenants,
        });
        *self.current.write_now() = fresh.clone();
        Ok(fresh)
    }

    async fn load(&self, tenant: Uuid) -> Result<TenantCatalog, StoreError> {
        let templates = self.store.template_specs(tenant).await?;
        let template_labels = self.store.template_labels(tenant).await?;
        let objects = self
            .store
            .objects(tenant, None, usize::MAX, |_| true)
            .await?;
        let docs = |kind| self.store.docs(tenant, kind, None, usize::MAX, |_| true);
        let commands = docs("check-commands")
            .await?
            .into_iter()
            .map(|d| (d.name.clone(), command_of(&d.to_json())))
            .collect();
        let periods = docs("time-periods")
            .await?
            .into_iter()
            .filter_map(|d| {
                let period = fault::readable("a time period", serde_json::from_str(&d.body))?;
                Some((d.name.clone(), period))
            })
            .collect();
        let resolved: Vec<(Object, ObjectSpec, Option<String>, Vec<String>)> = objects
            .into_iter()
            .map(|o| match resolve(&o.spec, &|n: &str| templates.get(n).cloned()) {
                Ok(e) => (o, e.spec, None, e.template_chain),
                Err(why) => {
                    tracing::warn!(object = %o.id, name = %o.name, error = %why, "object's templates do not resolve");
                    let spec = o.spec.clone();
                    (o, spec, Some(why), Vec::new())
                }
            })
            .collect();
        // Hosts' effective labels first: a service's include its host's.
        let host_labels: HashMap<Uuid, BTreeMap<String, String>> = resolved
            .iter()
            .filter(|(o, ..)| o.kind == ObjectKind::Host)
            .map(|(o, _, _, chain)| {
                (
                    o.id,
                    effective_labels(chain, &template_labels, None, &o.labels),
                )
            })
            .collect();
        // Hosts by name (for parents) and by id (a service's checks run against its host,
        // at the host's resolved address).
        let hosts: HashMap<&str, (Uuid, HostInfo)> = resolved
            .iter()
            .filter(|(o, ..)| o.kind == ObjectKind::Host)
            .map(|(o, spec, ..)| {
                let info = HostInfo {
                    name: o.name.clone(),
                    address: spec.address.clone(),
                };
                (o.name.as_str(), (o.id, info))
            })
            .collect();
        let host_info: HashMap<Uuid, &HostInfo> = hosts.values().map(|(id, i)| (*id, i)).collect();
        let mut catalog = TenantCatalog {
            commands,
            periods,
            ..TenantCatalog::default()
        };
        for (o, spec, config_error, chain) in &resolved {
            let labels = effective_labels(
                chain,
                &template_labels,
                o.host_id.and_then(|h| host_labels.get(&h)),
                &o.labels,
            );
            let host = match o.host_id {
                Some(h) => host_info.get(&h).map(|i| (*i).clone()).unwrap_or_default(),
                None => HostInfo {
                    name: o.name.clone(),
                    address: spec.address.clone(),
                },
            };
            let parents = spec
                .parents
                .as_ref()
                .filter(|p| !p.is_empty())
                .and_then(|p| {
                    p.iter()
                        .map(|n| hosts.get(n.as_str()).map(|h| h.0))
                        .collect()
                });
            let entry = Arc::new(Entry {
                object: o.clone(),
                spec: spec.clone(),
                config_error: config_error.clone(),
                host,
                parents,
                labels,
            });
            let o = &entry.object;
            match o.host_id {
                Some(h) => catalog
                    .services
                    .entry(h)
                    .or_default()
                    .insert(o.name.clone(), entry.clone()),
                None => catalog.hosts.insert(o.name.clone(), entry.clone()),
            };
            catalog.by_id.insert(o.id, entry.clone());
            catalog.entries.push(entry);
        }
        catalog.resolve_dependencies();
        Ok(catalog)
    }
}
