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
    /// The serial lines Modbus checks may open (`hardware.modbus.device`): a check naming any
    /// other is not run, so a check's arguments cannot probe the file system.
    pub modbus_lines: Vec<String>,
}
