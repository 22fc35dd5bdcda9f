//! Process runtime: the clock (the only reader of real time), the shutdown token, background
//! workers and their supervisor, and the metric registry.

pub mod alerts;
pub mod bundles;
pub mod clock;
pub mod dependencies;
pub mod intake;
pub mod labels;
pub mod locks;
pub mod memory;
pub mod metrics;
pub mod oncall;
pub mod outbound;
pub mod outbox;
pub mod paths;
pub mod port;
pub mod recount;
pub mod sandbox;
pub mod secrets;
pub mod shutdown;
pub mod systemd;
pub mod tls;
pub mod worker;

pub use alerts::{AlertAction, AlertActions, HeldAlert};
pub use bundles::SiteBundles;
pub use clock::{Clock, Stopwatch, SystemClock, TestClock};
pub use dependencies::{DependenciesOf, ObjectDependencies};
pub use intake::Intake;
pub use labels::{LabelsOf, ObjectLabels};
pub use locks::{Locked, RwLocked};
pub use metrics::Metrics;
pub use oncall::{OnCall, OnCallRoster};
pub use outbox::{Mail, Outbox};
pub use port::{PortError, PortFuture};
pub use secrets::SecretSource;
pub use shutdown::Shutdown;
pub use worker::{Supervisor, Wait, Worker};
