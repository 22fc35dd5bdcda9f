//! The seam through which the federation edge applies the bundle it pulled without importing
//! `inventory`: `app` hands it the inventory as `SiteBundles`.

use super::PortFuture;

pub trait SiteBundles: Send + Sync + 'static {
    /// Applies a bundle (the text `config/bundles:apply` takes) to the default tenant without
    /// prune, all or nothing; a refusal says why (the document that failed).
    fn apply_site_bundle(&self, text: String) -> PortFuture<'_, ()>;
}
