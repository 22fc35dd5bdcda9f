//! The one integration test binary: every test starts the real `svc` server on an ephemeral port
//! with a temporary data directory and talks HTTP to it.

// Test helpers fail loudly by design, and tests read the real clock to build inputs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod acks;
mod ai;
mod alerts;
mod architecture;
mod bundles;
mod checks;
mod cli;
mod config;
mod contract;
mod directory;
mod durability;
mod espa_peer;
mod events;
mod federation;
mod flows;
mod hardening;
mod hardware;
mod heartbeats;
mod identity;
mod ingest;
mod modem_sim;
mod noise;
mod notify;
mod objects;
mod oncall;
mod platform;
mod postgres;
mod pty;
mod receiver;
mod reports;
mod results;
mod security;
mod signin;
mod slo;
mod snmp;
mod sso;
mod status;
mod support;
mod ui;
mod windows;
