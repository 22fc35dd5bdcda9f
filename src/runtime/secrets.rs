//! The seam through which checks resolve `$SECRET:name$` without importing `inventory`: `app`
//! hands them the inventory as a `SecretSource`.

use std::future::Future;
use std::pin::Pin;
use uuid::Uuid;

pub type SecretFuture<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

pub trait SecretSource: Send + Sync + 'static {
    /// The plain value of a tenant's secret; `None` when it is not set or cannot be opened
    /// (no master key, or sealed under another one).
    fn secret(&self, tenant: Uuid, name: &str) -> SecretFuture<'_>;
}
