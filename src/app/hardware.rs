//! Starts the configured paging devices (GSM modem, ESPA line) and the workers that turn what
//! arrives on them into alert actions and ingress events.

use crate::config::Config;
use crate::hw::Devices;
use crate::hw::espa::{EspaSettings, Pager, Received};
use crate::hw::gsm::{Inbound, Modem, ModemSettings, Profile};
use crate::hw::serial::LineSettings;
use crate::ingress::Ingress;
use crate::ingress::espa::EspaListener;
use crate::ingress::phone::PhoneInbound;
use crate::runtime::clock::SharedClock;
use crate::runtime::{SecretSource, Supervisor};
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The SIM PIN: a `$SECRET:name$` of the default tenant, or the PIN itself.
async fn pin(
    configured: &str,
    store: &Arc<Store>,
    secrets: &Arc<dyn SecretSource>,
) -> Option<String> {
    let name = configured
        .strip_prefix("$SECRET:")
        .and_then(|r| r.strip_suffix('$'));
    match name {
        None => Some(configured.to_string()).filter(|p| !p.is_empty()),
        Some(name) => {
            let tenant = store.default_tenant().await.ok()?.id;
            let pin = secrets.secret(tenant, name).await;
            if pin.is_none() {
                tracing::error!(
                    secret = name,
                    "hardware.gsm.pin names a secret that is not set"
                );
            }
            pin
        }
    }
}

/// The started devices, and what arrives on them until [`Hardware::listen`] hands it on.
pub struct Hardware {
    pub devices: Devices,
    inbound: Option<mpsc::Receiver<Inbound>>,
    calls: Option<mpsc::Receiver<Received>>,
}

/// Opens the devices `config` names; their drivers run (and reopen their ports) as workers of
/// `supervisor`.
pub async fn start(
    config: &Config,
    store: &Arc<Store>,
    secrets: &Arc<dyn SecretSource>,
    clock: &SharedClock,
    supervisor: &Supervisor,
) -> Hardware {
    let mut devices = Devices {
        modbus_lines: config
            .hardware
            .modbus
            .iter()
            .filter_map(|m| m.device.clone())
            .collect(),
        ..Devices::default()
    };
    let mut sms_in = None;
    let mut calls_in = None;
    if let Some(g) = &config.hardware.gsm {
        let settings = ModemSettings {
            device: g.device.clone(),
            line: LineSettings::new(g.baud_rate.unwrap_or(115_200), "8N1").unwrap_or(
                LineSettings {
                    baud: 115_200,
                    data_bits: 8,
                    parity: 'N',
                    stop_bits: 1,
                },
            ),
            pin: pin(&g.pin.0, store, secrets).await,
            profile: g
                .profile
                .as_deref()
                .unwrap_or_default()
                .parse()
                .unwrap_or(Profile::Generic),
            ring_timeout: g.ring_timeout.map_or(Duration::from_secs(45), |d| d.0),
            key_timeout: g.key_timeout.map_or(Duration::from_secs(30), |d| d.0),
            refresh_every: Duration::from_secs(60),
        };
        let (modem, inbound, driver) = Modem::start(settings, clock.clone());
        supervisor.spawn(driver);
        devices.modem = Some(modem);
        sms_in = Some(inbound);
    }
    if let Some(e) = &config.hardware.espa {
        let byte = |a: &Option<String>, default: u8| {
            a.as_deref()
                .and_then(|a| a.bytes().next())
                .unwrap_or(default)
        };
        let settings = EspaSettings {
            device: e.device.clone(),
            line: LineSettings::new(
                e.baud_rate.unwrap_or(9600),
                e.framing.as_deref().unwrap_or("7E1"),
            )
            .unwrap_or(LineSettings {
                baud: 9600,
                data_bits: 7,
                parity: 'E',
                stop_bits: 1,
            }),
            address: byte(&e.address, b'1'),
            peer: byte(&e.peer_address, b'2'),
            reply_timeout: e.reply_timeout.map_or(Duration::from_secs(3), |d| d.0),
            attempts: e.attempts.unwrap_or(3),
        };
        let (pager, calls, driver) = Pager::start(settings, clock.clone());
        supervisor.spawn(driver);
        devices.pager = Some(pager);
        calls_in = Some(calls);
    }
    Hardware {
        devices,
        inbound: sms_in,
        calls: calls_in,
    }
}

impl Hardware {
    /// Spawns the workers that listen to the devices.
    pub fn listen(self, supervisor: &Supervisor, ingress: &Arc<Ingress>) {
        if let (Some(modem), Some(inbound)) = (&self.devices.modem, self.inbound) {
            supervisor.spawn(PhoneInbound {
                ingress: ingress.clone(),
                modem: modem.clone(),
                inbound,
            });
        }
        if let Some(calls) = self.calls {
            supervisor.spawn(EspaListener {
                ingress: ingress.clone(),
                calls,
            });
        }
    }
}
