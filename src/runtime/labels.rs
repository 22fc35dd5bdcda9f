//! The seam through which the object lists filter by effective labels without importing
//! `monitor`: `app` hands them the monitor's catalog as `ObjectLabels`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use uuid::Uuid;

/// An object's effective labels (templates', its host's, its own), where the caller knows
/// them; `None` falls back to the object's own.
pub type LabelsOf = Arc<dyn Fn(Uuid) -> Option<BTreeMap<String, String>> + Send + Sync>;

pub type LabelsFuture<'a> = Pin<Box<dyn Future<Output = LabelsOf> + Send + 'a>>;

pub trait ObjectLabels: Send + Sync + 'static {
    /// The effective labels of a tenant's objects; a lookup that knows none when they cannot
    /// be read, so callers fall back to own labels.
    fn labels_of(&self, tenant: Uuid) -> LabelsFuture<'_>;
}

/// A lookup that knows no object: every object keeps its own labels.
pub fn own_labels() -> LabelsOf {
    Arc::new(|_| None)
}
