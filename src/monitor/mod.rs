//! Monitoring: the catalog of what is monitored, the results pipeline and the state machine,
//! active checks and their scheduler, heartbeats, metric series.

pub mod business;
pub mod catalog;
pub mod checks;
pub mod discovery;
pub mod heartbeats;
pub mod metrics;
pub mod observers;
pub mod pipeline;
pub mod results;
pub mod scheduler;
pub mod slo;
