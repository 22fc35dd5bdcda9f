//! svc: monitoring and alerting appliance. The module tree; see DESIGN.md for the layering.

pub mod ai;
pub mod alerting;
pub mod api;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod events;
pub mod federation;
pub mod hw;
pub mod ingress;
pub mod inventory;
pub mod model;
pub mod monitor;
pub mod notify;
pub mod reports;
pub mod runtime;
pub mod store;
pub mod web;
