//! Drivers for local devices: transports and wire protocols only, no business rules.

pub mod modbus;
