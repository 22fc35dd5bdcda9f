//! Modbus client over TCP or RTU (a serial line), through tokio-modbus: reads holding or
//! input registers of one unit.

use super::serial::{self, LineSettings};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_modbus::client::{Client, Context, Reader, rtu, tcp};
use tokio_modbus::slave::Slave;

/// Where the device is.
#[derive(Clone, Debug, PartialEq)]
pub enum Link {
    Tcp(SocketAddr),
    /// A serial device path, baud rate and parity (`N`, `E` or `O`), 8 data bits, 1 stop bit.
    Rtu {
        device: String,
        baud: u32,
        parity: char,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registers {
    Holding,
    Input,
}

#[derive(Debug, thiserror::Error)]
pub enum ModbusError {
    #[error("cannot reach the device: {0}")]
    Connect(String),
    #[error("the device did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the device answered with exception {0}")]
    Exception(String),
    #[error("{0}")]
    Protocol(String),
}

async fn connect(link: &Link, unit: u8) -> Result<Context, ModbusError> {
    match link {
        Link::Tcp(addr) => tcp::connect_slave(*addr, Slave(unit))
            .await
            .map_err(|e| ModbusError::Connect(e.to_string())),
        Link::Rtu {
            device,
            baud,
            parity,
        } => {
            let settings = LineSettings {
                baud: *baud,
                data_bits: 8,
                parity: parity.to_ascii_uppercase(),
                stop_bits: 1,
            };
            let port = serial::open_port(device, settings)
                .map_err(|e| ModbusError::Connect(e.to_string()))?;
            Ok(rtu::attach_slave(port, Slave(unit)))
        }
    }
}

/// Reads `count` registers from `address` of `unit`; the whole exchange is bounded by
/// `timeout`.
pub async fn read(
    link: &Link,
    unit: u8,
    kind: Registers,
    address: u16,
    count: u16,
    timeout: Duration,
) -> Result<Vec<u16>, ModbusError> {
    // One exchange at a time on a serial line: the port's owner lock is held throughout.
    let owner = match link {
        Link::Rtu { device, .. } => Some(serial::owner(device)),
        Link::Tcp(_) => None,
    };
    let exchange = async {
        let _line = match &owner {
            Some(o) => Some(o.lock().await),
            None => None,
        };
        let mut ctx = connect(link, unit).await?;
        let answer = match kind {
            Registers::Holding => ctx.read_holding_registers(address, count).await,
            Registers::Input => ctx.read_input_registers(address, count).await,
        };
        let _ = ctx.disconnect().await;
        match answer {
            Ok(Ok(words)) => Ok(words),
            Ok(Err(exception)) => Err(ModbusError::Exception(format!("{exception:?}"))),
            Err(e) => Err(ModbusError::Protocol(e.to_string())),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ModbusError::Timeout(timeout))?
}
