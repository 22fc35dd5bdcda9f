//! Monitoring: check results and the state machine, active checks and their scheduler,
//! heartbeats.

pub mod checks;
pub mod heartbeats;
pub mod results;
pub mod scheduler;
