//! Drivers for local devices: transports and wire protocols only, no business rules.

pub mod espa;
pub mod gsm;
pub mod modbus;
pub mod serial;
pub mod sms;

/// The paging devices this instance drives, when configured.
#[derive(Clone, Default)]
pub struct Devices {
    pub modem: Option<gsm::Modem>,
    pub pager: Option<espa::Pager>,
}
