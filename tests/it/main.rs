//! The one integration test binary: every test starts the real `svc` server on an ephemeral port
//! with a temporary data directory and talks HTTP to it.

mod architecture;
mod platform;
mod support;
