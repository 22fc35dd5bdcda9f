//! Resource types as the API shows them (serde, camelCase), ids, durations, time and selectors; no I/O.

pub mod ai;
pub mod alert;
pub mod audit;
pub mod availability;
pub mod base64;
pub mod bundle;
pub mod cel;
pub mod cel_cost;
pub mod channel;
pub mod comment;
pub mod config;
pub mod dashboard;
pub mod dependency;
pub mod discovery;
pub mod duration;
pub mod event;
pub mod fault;
pub mod flood;
pub mod flow;
pub mod hardware;
pub mod health;
pub mod heartbeat;
pub mod ical;
pub mod identity;
pub mod inbox;
pub mod incident;
pub mod input;
pub mod interval;
pub mod metric;
pub mod mirror;
pub mod noise;
pub mod notify;
pub mod object;
pub mod observers;
pub mod page;
pub mod report;
pub mod secret;
pub mod selector;
pub mod site;
pub mod size;
pub mod slo;
pub mod source_config;
pub mod state;
pub mod status;
pub mod suppression;
pub mod tactical;
pub mod template;
pub mod tenant;
pub mod time;
pub mod timeperiod;
pub mod wear;

/// An entity tag without weakness marker, quotes or spaces (`W/"3"`, `"3"` and `3` are one
/// tag): how `If-Match`, `If-None-Match` and a site's echoed bundle ETag are compared.
pub fn bare_entity_tag(tag: &str) -> String {
    tag.trim()
        .trim_start_matches("W/")
        .chars()
        .filter(|c| *c != '"' && !c.is_whitespace())
        .collect()
}

pub use duration::GoDuration;
pub use selector::{Selector, SelectorError};
pub use tenant::Tenant;
pub use time::Timestamp;

/// The build-time version string (SPEC 9): `SVC_VERSION` at build time, else the development default.
pub const VERSION: &str = match option_env!("SVC_VERSION") {
    Some(v) => v,
    None => DEV_VERSION,
};

/// The version of a build without `SVC_VERSION`, which the committed OpenAPI document carries
/// (`build.rs` puts the build's own in its place).
pub const DEV_VERSION: &str = "0.1.0-dev";

/// The rustc that built this binary, recorded by build.rs.
pub const RUST_VERSION: &str = env!("SVC_RUSTC_VERSION");

/// Slug of the tenant created at first start.
pub const DEFAULT_TENANT_SLUG: &str = "default";
