//! The seam through which `alerting` and `reports` see the objects' dependencies without
//! importing `monitor`: `app` hands them the monitor's catalog as `ObjectDependencies`.

use crate::model::dependency::Group;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use uuid::Uuid;

/// The dependency groups of (tenant, object), resolved against the catalog they were read
/// from; `None` for an object without dependencies.
pub type DependenciesOf = Arc<dyn Fn(Uuid, Uuid) -> Option<Arc<[Group]>> + Send + Sync>;

pub type DependenciesFuture<'a> = Pin<Box<dyn Future<Output = DependenciesOf> + Send + 'a>>;

pub trait ObjectDependencies: Send + Sync + 'static {
    /// Every tenant's dependencies as of the latest catalog; none when it cannot be read.
    fn dependencies(&self) -> DependenciesFuture<'_>;
}

/// A lookup that knows no dependency.
pub fn no_dependencies() -> DependenciesOf {
    Arc::new(|_, _| None)
}

/// Dependencies of a service without a catalog (tests, tools): none.
pub struct NoDependencies;

impl ObjectDependencies for NoDependencies {
    fn dependencies(&self) -> DependenciesFuture<'_> {
        Box::pin(async { no_dependencies() })
    }
}
