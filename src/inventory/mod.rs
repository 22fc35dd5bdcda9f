//! Inventory and configuration: hosts and services, and the configuration documents of the
//! twenty-three kinds with one implementation of their CRUD shape.

pub mod bundles;
pub mod listeners;
pub mod objects;
pub mod secrets;

use crate::auth::Principal;
use crate::model::audit::AuditDraft;
use crate::model::config::{
    ConfigDoc, Invalid, Kind, METADATA, Reference, check_name, doc_references, take_credentials,
};
use crate::model::event::EventDraft;
use crate::model::fault;
use crate::model::identity::Actor;
use crate::runtime::ObjectLabels;
use crate::runtime::clock::SharedClock;
use crate::runtime::paths::{Allowed, runs_its_arguments};
use crate::store::journal::Record;
use crate::store::{Store, StoreError, check_version};
use crate::store::{TxResult, Wrote};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// The document, object or secret a change names does not exist in the tenant.
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No usable master key: secrets can be neither sealed nor opened.
    #[error("no usable master key")]
    NoKey,
    /// A bundle's `applyToken` is unknown, expired or another tenant's.
    #[error("unknown or expired apply token")]
    Token,
    /// A bundle failed at a document; nothing was applied.
    #[error("{0}")]
    Apply(String),
    /// Bundle work is at its concurrency limit.
    #[error("bundle work is at its limit of {} at once", bundles::BUNDLE_WORK)]
    Busy,
    /// The change needs a permission the caller lacks (a document naming a secret needs
    /// `admin:secrets`).
    #[error("needs {0}")]
    Forbidden(&'static str),
    /// What the document claims another one holds (a listening address): a conflict, as a
    /// name in use is.
    #[error("{0}")]
    Taken(String),
}

impl From<InventoryError> for crate::runtime::PortError {
    fn from(e: InventoryError) -> Self {
        match e {
            InventoryError::Store(e) => e.into(),
            e @ (InventoryError::NoKey | InventoryError::Busy) => Self::unavailable(e),
            refusal => Self::refused(refusal),
        }
    }
}

impl crate::store::TxAbort for InventoryError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            InventoryError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// The permission a document naming a secret needs: whoever saves one chooses where the value
/// goes (a URL, a header, a plugin's arguments and the host they reach), so only those who may
/// set secrets may (docs/security.md).
pub const SECRET_USE: &str = "admin:secrets";

/// The secrets `text` names (`$SECRET:name$`), in order of appearance.
pub(super) fn named_secrets(text: &str) -> Vec<String> {
    let prefix = crate::model::secret::REFERENCE_PREFIX;
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        let end = rest.find('$').unwrap_or(rest.len());
        names.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    names
}

/// The secrets a document of `kind` sends somewhere: those its text names, and the `secretRef`
/// of an MQTT or IMAP event source (the password it logs in with on the host its document
/// names; a webhook source's only checks what comes in).
pub fn document_secrets(kind: &str, body: &Map<String, Value>) -> Vec<String> {
    let mut names = named_secrets(&Value::Object(body.clone()).to_string());
    let logs_in = matches!(
        body.get("type").and_then(Value::as_str),
        Some("mqtt" | "email")
    );
    if kind == "event-sources"
        && logs_in
        && let Some(name) = body.get("secretRef").and_then(Value::as_str)
    {
        names.push(name.to_string());
    }
    names
}

/// Refuses a caller without `admin:secrets` the use of the secrets `names`, except those the
/// same request seals from plain text (`sealed_here`): their values are the caller's own.
pub fn check_secret_use(
    p: &Principal,
    names: &[String],
    sealed_here: &[&str],
) -> Result<(), InventoryError> {
    if p.allows(SECRET_USE) {
        return Ok(());
    }
    if names
        .iter()
        .any(|name| !sealed_here.contains(&name.as_str()))
    {
        return Err(InventoryError::Forbidden(SECRET_USE));
    }
    Ok(())
}

/// A secret is named `$SECRET:name$`: a lookalike (`${secret:name}`, the syntax of other
/// tools) would be sent as written, so it is refused, naming its field.
fn check_secret_syntax(body: &Map<String, Value>) -> Result<(), Invalid> {
    match body
        .iter()
        .find(|(_, v)| v.to_string().to_ascii_lowercase().contains("${secret:"))
    {
        Some((field, _)) => Err(Invalid {
            field: field.clone(),
            detail: format!(
                "{field}: a secret is named $SECRET:name$ here; ${{secret:...}} would be sent as written"
            ),
        }),
        None => Ok(()),
    }
}

/// 16 random bytes (apply tokens); without randomness, no token rather than a guessable one.
fn random_token() -> Result<[u8; 16], InventoryError> {
    let mut t = [0u8; 16];
    getrandom::fill(&mut t)
        .map_err(|e| StoreError::Internal(format!("no randomness for a token: {e}")))?;
    Ok(t)
}

impl From<Invalid> for InventoryError {
    fn from(i: Invalid) -> Self {
        InventoryError::Invalid(i)
    }
}

pub struct Inventory {
    store: Arc<Store>,
    clock: SharedClock,
    master_key: Option<secrets::MasterKey>,
    /// Effective labels for the object lists' selector and states.
    labels: Arc<dyn ObjectLabels>,
    plans: std::sync::Mutex<std::collections::HashMap<String, bundles::Planned>>,
    /// Bundle plans, applies and exports running at once (see `bundles::BUNDLE_WORK`).
    bundle_slots: tokio::sync::Semaphore,
    /// Where plugin check commands and script channels may run programs from.
    programs: Allowed,
    /// `strictReferences`: a save that names a document nothing defines is refused.
    strict_references: bool,
    /// `ingress.privilegedPorts`: the ports below 1024 an event source may listen on.
    privileged_ports: Vec<u16>,
}

/// A document ready to be saved: its body in normal form, and the credentials it carried in
/// plain text (secret name, value), which the body now names as secrets.
struct Admitted {
    body: Map<String, Value>,
    credentials: Vec<(String, String)>,
}

/// The body of a document: a JSON object without the service-owned metadata.
fn body_of(value: Value) -> Result<Map<String, Value>, Invalid> {
    let Value::Object(mut map) = value else {
        return Err(Invalid {
            field: "body".into(),
            detail: "a document is a JSON object".into(),
        });
    };
    for key in METADATA {
        map.remove(key);
    }
    Ok(map)
}

impl Inventory {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        master_key: Option<secrets::MasterKey>,
        labels: Arc<dyn ObjectLabels>,
        programs: Allowed,
        strict_references: bool,
        privileged_ports: Vec<u16>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            clock,
            master_key,
            labels,
            plans: Default::default(),
            bundle_slots: tokio::sync::Semaphore::new(bundles::BUNDLE_WORK),
            programs,
            strict_references,
            privileged_ports,
        })
    }

    /// Under `strictReferences`, the first name of `references` that no document of its kind
    /// holds refuses the save (422 naming the field), as Icinga refuses such a config. `found`
    /// holds the references already found (a batch reads each name once) and gains these.
    async fn check_references(
        &self,
        tenant: Uuid,
        references: Vec<Reference>,
        found: &mut HashSet<(&'static str, String)>,
    ) -> Result<(), InventoryError> {
        if !self.strict_references {
            return Ok(());
        }
        for r in references {
            if found.contains(&(r.kind, r.name.clone())) {
                continue;
            }
            match self.store.doc(tenant, r.kind, r.name.clone(), false).await {
                Ok(_) => {
                    found.insert((r.kind, r.name));
                }
                Err(StoreError::NotFound) => {
                    return Err(Invalid {
                        field: r.field().into(),
                        detail: format!("{}: {}", r.path, r.dangling()),
                    }
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Checks a document of `kind` for saving (create, replace, bundles): the kind's own rules,
    /// the programs and files it names (inside the directories the configuration file names,
    /// else refused), and its plain-text credentials, taken out to be sealed as secrets.
    fn admit(
        &self,
        kind: &Kind,
        name: &str,
        mut body: Map<String, Value>,
    ) -> Result<Admitted, Invalid> {
        kind.validate(&mut body)?;
        check_secret_syntax(&body)?;
        self.check_paths(kind, &body)?;
        let credentials = take_credentials(kind.name, name, &mut body);
        Ok(Admitted { body, credentials })
    }

    /// What a document to be saved (created or replaced) must hold to beyond its kind's own
    /// rules: the caller may use the secrets it names, they are set, its listening address is
    /// its own, its imports and the documents it names exist.
    async fn check_saving(
        &self,
        p: &Principal,
        kind: &Kind,
        name: &str,
        body: &Map<String, Value>,
        credentials: &[(String, String)],
    ) -> Result<(), InventoryError> {
        let sealed: Vec<&str> = credentials.iter().map(|(n, _)| n.as_str()).collect();
        let named = document_secrets(kind.name, body);
        check_secret_use(p, &named, &sealed)?;
        self.check_secrets_exist(p.tenant, body, &named, &sealed)
            .await?;
        self.check_listen(p.tenant, kind.name, name, body).await?;
        self.check_imports(p, kind, name, body).await?;
        self.check_references(
            p.tenant,
            doc_references(kind.name, body),
            &mut HashSet::new(),
        )
        .await
    }

    /// The secrets a document names (`named`, less those it seals itself) must be set: one
    /// that is not would fail every send (422 naming the field that names it).
    async fn check_secrets_exist(
        &self,
        tenant: uuid::Uuid,
        body: &Map<String, Value>,
        named: &[String],
        sealed_here: &[&str],
    ) -> Result<(), InventoryError> {
        let wanted: Vec<&String> = named
            .iter()
            .filter(|n| !sealed_here.contains(&n.as_str()))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let set = self.store.secrets(tenant).await?;
        for name in wanted {
            if !set.iter().any(|s| &s.name == name) {
                let reference = crate::model::secret::reference(name);
                let field = body
                    .iter()
                    .find(|(_, v)| v.to_string().contains(&reference) || v.as_str() == Some(name))
                    .map_or_else(|| "body".to_string(), |(k, _)| k.clone());
                return Err(InventoryError::Invalid(Invalid {
                    detail: format!(
                        "{field}: the secret {name:?} is not set (PUT /api/v1/secrets/{name} first)"
                    ),
                    field,
                }));
            }
        }
        Ok(())
    }

    /// The paths a document names must lie inside the directories the configuration file
    /// names: a plugin check command's program (`checks.pluginDirs`), a script channel's
    /// command (`notify.scriptDir`), a channel's or event source's `caFile` (`tls.caDirs`). One
    /// not there yet may be saved; it is used once it is.
    fn check_paths(&self, kind: &Kind, body: &Map<String, Value>) -> Result<(), Invalid> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let kind_is = |t: &str| body.get("type").and_then(Value::as_str) == Some(t);
        let config = body.get("config");
        let fail = |field: &str, label: &str, why: String| Invalid {
            field: field.into(),
            detail: format!("{label}: {why}"),
        };
        if kind.name == "check-commands" && kind_is("plugin") {
            let line: Vec<String> = body
                .get("line")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .map(|a| text(Some(a)).unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default();
            let (program, args) = match line.split_first() {
                Some((program, args)) => (program.as_str(), args),
                None => ("", &[][..]),
            };
            self.programs
                .plugins
                .admissible(program)
                .map_err(|why| fail("line", "line[0]", why))?;
            if let Some(why) = runs_its_arguments(program, args) {
                return Err(fail("line", "line", why));
            }
        }
        if kind.name == "channels" && kind_is("script") {
            let command = text(config.and_then(|c| c.get("command"))).unwrap_or_default();
            self.programs
                .scripts
                .admissible(&command)
                .map_err(|why| fail("config", "config.command", why))?;
            if let Some(why) = runs_its_arguments(&command, &[]) {
                return Err(fail("config", "config.command", why));
            }
        }
        if matches!(kind.name, "channels" | "event-sources")
            && let Some(ca) = text(config.and_then(|c| c.get("caFile")))
        {
            self.programs
                .ca_files
                .admissible_file(&ca)
                .map_err(|why| fail("config", "config.caFile", why))?;
        }
        Ok(())
    }

    /// The audit entry and the `config` event of a change to a document of `kind`.
    fn record(&self, p: &Principal, actor: &Actor, kind: &Kind, verb: &str, name: &str) -> Record {
        let audit = AuditDraft::new(
            self.clock.now(),
            p.tenant,
            actor,
            &format!("{}.{verb}", kind.code),
            format!("{}/{name}", kind.name),
        );
        self.record_of(audit, kind.name)
    }

    /// A change's audit entry with its `config` event (for the kind named `kinds`).
    fn record_of(&self, audit: AuditDraft, kinds: &str) -> Record {
        let event = EventDraft::config(audit.tenant_id, &[kinds], &audit.action, &audit.resource);
        Record::new(audit, vec![event])
    }

    pub async fn create(
        &self,
        p: &Principal,
        actor: &Actor,
        kind: &'static Kind,
        value: Value,
    ) -> Result<ConfigDoc, InventoryError> {
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let body = body_of(value)?;
        check_name(&name)?;
        let Admitted { body, credentials } = self.admit(kind, &name, body)?;
        self.check_saving(p, kind, &name, &body, &credentials)
            .await?;
        let secrets = self.seal_all(p.tenant, credentials)?;
        let now = self.clock.now();
        let doc = ConfigDoc {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            kind: kind.name.to_string(),
            name: name.clone(),
            created_at: now,
            updated_at: now,
            version: 1,
            body: Value::Object(body).to_string(),
        };
        let record = self.record(p, actor, kind, "create", &name);
        let doc = self
            .store
            .transact(move |tx| -> TxResult<_> {
                tx.insert_config_doc(&doc)?;
                for mut secret in secrets {
                    tx.put_secret(&mut secret)?;
                }
                tx.record([record.audit.after(doc.to_json())], record.events)?;
                Ok(Wrote::Changed(doc))
            })
            .await?;
        Ok(doc)
    }

    /// A saved template keeps the template graph within bounds (see `check_template_imports`).
    async fn check_imports(
        &self,
        p: &Principal,
        kind: &Kind,
        name: &str,
        body: &Map<String, Value>,
    ) -> Result<(), InventoryError> {
        if kind.name != "templates" {
            return Ok(());
        }
        let spec: crate::model::config::ObjectSpec = match body.get("spec") {
            Some(spec) => fault::decoded("a template's spec", serde_json::from_value(spec.clone())),
            None => Default::default(),
        };
        self.check_template_imports(p.tenant, name, &spec).await
    }

    /// Replaces a document; the name in the path wins over the body's.
    pub async fn update(
        &self,
        p: &Principal,
        actor: &Actor,
        kind: &'static Kind,
        name: String,
        expected: u64,
        value: Value,
    ) -> Result<ConfigDoc, InventoryError> {
        let Admitted { body, credentials } = self.admit(kind, &name, body_of(value)?)?;
        self.check_saving(p, kind, &name, &body, &credentials)
            .await?;
        let secrets = self.seal_all(p.tenant, credentials)?;
        let now = self.clock.now();
        let record = self.record(p, actor, kind, "update", &name);
        let body = Value::Object(body).to_string();
        let tenant = p.tenant;
        let doc = self
            .store
            .transact(move |tx| -> TxResult<_, InventoryError> {
                let old = tx
                    .config_doc(tenant, kind.name, &name)?
                    .ok_or(InventoryError::NotFound)?;
                check_version(old.version, expected)?;
                let new = ConfigDoc {
                    body,
                    updated_at: now,
                    version: old.version + 1,
                    ..old.clone()
                };
                tx.put_config_doc(&new)?;
                for mut secret in secrets {
                    tx.put_secret(&mut secret)?;
                }
                let audit = record.audit.before(old.to_json()).after(new.to_json());
                tx.record([audit], record.events)?;
                Ok(Wrote::Changed(new))
            })
            .await?;
        Ok(doc)
    }

    /// Deletes the document; at `expected` only, when given (a page that showed a version).
    pub async fn delete(
        &self,
        p: &Principal,
        actor: &Actor,
        kind: &'static Kind,
        name: String,
        expected: Option<u64>,
    ) -> Result<(), InventoryError> {
        let record = self.record(p, actor, kind, "delete", &name);
        let tenant = p.tenant;
        self.store
            .transact(move |tx| -> TxResult<_, InventoryError> {
                let old = tx
                    .remove_config_doc(tenant, kind.name, &name)?
                    .ok_or(InventoryError::NotFound)?;
                if let Some(expected) = expected {
                    check_version(old.version, expected)?;
                }
                // A status page's subscribers go with it: a page made again under the name
                // (by anyone) starts with none.
                if kind.name == "status-pages" {
                    for s in tx.status_subscribers(tenant, &name)? {
                        tx.remove_status_subscriber(&s)?;
                    }
                }
                tx.record([record.audit.before(old.to_json())], record.events)?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(())
    }

    /// By name; templates also by id.
    pub async fn get(
        &self,
        p: &Principal,
        kind: &'static Kind,
        name: String,
    ) -> Result<ConfigDoc, InventoryError> {
        Ok(self
            .store
            .doc(p.tenant, kind.name, name, kind.name == "templates")
            .await?)
    }

    /// By name ascending; `q` keeps documents whose name or text contains it (any case).
    pub async fn list(
        &self,
        p: &Principal,
        kind: &'static Kind,
        q: Option<String>,
        cursor: Option<String>,
        limit: usize,
    ) -> Result<Vec<ConfigDoc>, InventoryError> {
        let needle = q.filter(|q| !q.is_empty()).map(|q| q.to_lowercase());
        let keep = move |d: &ConfigDoc| {
            needle.as_ref().is_none_or(|n| {
                d.name.to_lowercase().contains(n) || d.body.to_lowercase().contains(n)
            })
        };
        Ok(self
            .store
            .docs(p.tenant, kind.name, cursor, limit, keep)
            .await?)
    }
}
