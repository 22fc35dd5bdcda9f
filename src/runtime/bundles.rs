//! The seam through which the federation edge applies the bundle it pulled without importing
//! `inventory`: `app` hands it the inventory as `SiteBundles`.

use super::alerts::ActFuture;

pub trait SiteBundles: Send + Sync + 'static {
    /// Applies a bundle (the text `config/bundles:apply` takes) to the default tenant without
    /// prune, all or nothing; the error says why it was refused.
    fn apply_site_bundle(&self, text: String) -> ActFuture<'_, ()>;
}
