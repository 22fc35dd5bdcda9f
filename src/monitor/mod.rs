//! Monitoring: heartbeats today; the check pipeline (results, state machine, scheduler,
//! checks, metrics) joins this module with its issue.

pub mod heartbeats;
pub mod results;
