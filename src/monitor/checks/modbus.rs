//! `modbus`: reads registers of a Modbus device and compares the value with Nagios ranges.
//! Flags: `-H` host and `-p` port (502) for Modbus TCP, or `-D` serial device with `-b` baud
//! (9600) and `-P` parity (N, E, O) for RTU; `-u` unit id (1); `-r` register address
//! (required); `-T holding|input` (holding); `-f u16|i16|u32|i32|f32` (u16; 32-bit values are
//! two registers, high word first); `-s` scale factor (1); `-l` label (`value`); `-w`/`-c`.

use super::{Builtin, Limits, Outcome, perf_label, status_word};
use crate::hw::modbus::{self, Link, Registers};
use std::net::SocketAddr;

/// Decodes the registers as `format`.
fn decode(format: &str, words: &[u16]) -> Option<f64> {
    let wide = || Some((u32::from(*words.first()?) << 16) | u32::from(*words.get(1)?));
    Some(match format {
        "u16" => f64::from(*words.first()?),
        "i16" => f64::from(*words.first()? as i16),
        "u32" => f64::from(wide()?),
        "i32" => f64::from(wide()? as i32),
        "f32" => f64::from(f32::from_bits(wide()?)),
        _ => return None,
    })
}

async fn link(ctx: &Builtin<'_>) -> Result<Link, String> {
    if let Some(device) = ctx.args.get(&["-D", "--device"]) {
        // Checked by name before anything is opened: whether some other path exists is not
        // the check's to tell.
        if !ctx.devices.modbus_lines.iter().any(|l| l == device) {
            return Err(format!(
                "-D {device:?} is not the serial line the configuration names (hardware.modbus.device)"
            ));
        }
        let parity = ctx
            .args
            .get(&["-P", "--parity"])
            .unwrap_or("N")
            .chars()
            .next()
            .unwrap_or('N')
            .to_ascii_uppercase();
        if !matches!(parity, 'N' | 'E' | 'O') {
            return Err("-P must be N, E or O".into());
        }
        return Ok(Link::Rtu {
            device: device.to_string(),
            baud: ctx.number(&["-b", "--baud"], 9600)?,
            parity,
        });
    }
    let host = ctx
        .target()
        .ok_or("no address (-H) or serial device (-D)")?;
    let port: u16 = ctx.number(&["-p", "--port"], 502)?;
    let addr: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    Ok(Link::Tcp(addr))
}

/// What to read and how to judge it.
struct Reading {
    link: Link,
    unit: u8,
    kind: Registers,
    register: u16,
    format: String,
    count: u16,
    scale: f64,
    limits: Limits,
}

async fn reading(ctx: &Builtin<'_>) -> Result<Reading, String> {
    let register: u16 = ctx
        .args
        .get(&["-r", "--register"])
        .ok_or("no register (-r)")?
        .parse()
        .map_err(|_| "-r is not a register address")?;
    let kind = match ctx.args.get(&["-T", "--type"]).unwrap_or("holding") {
        "holding" => Registers::Holding,
        "input" => Registers::Input,
        t => return Err(format!("-T {t:?} is not holding or input")),
    };
    let format = ctx
        .args
        .get(&["-f", "--format"])
        .unwrap_or("u16")
        .to_string();
    let count = match format.as_str() {
        "u16" | "i16" => 1,
        "u32" | "i32" | "f32" => 2,
        f => return Err(format!("-f {f:?} is not u16, i16, u32, i32 or f32")),
    };
    Ok(Reading {
        unit: ctx.number(&["-u", "--unit"], 1)?,
        scale: ctx.number(&["-s", "--scale"], 1.0)?,
        limits: ctx.limits()?,
        link: link(ctx).await?,
        kind,
        register,
        format,
        count,
    })
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let r = match reading(ctx).await {
        Ok(r) => r,
        Err(e) => return Outcome::unknown("MODBUS", e),
    };
    let label = ctx.args.get(&["-l", "--label"]).unwrap_or("value");
    let words = match modbus::read(&r.link, r.unit, r.kind, r.register, r.count, ctx.timeout).await
    {
        Ok(w) => w,
        Err(e) => return Outcome::new(2, format!("MODBUS CRITICAL - {e}")),
    };
    let Some(raw) = decode(&r.format, &words) else {
        return Outcome::unknown(
            "MODBUS",
            format!("the device sent {} registers", words.len()),
        );
    };
    let value = raw * r.scale;
    let code = r.limits.grade(value);
    Outcome::new(
        code,
        format!(
            "MODBUS {} - {label} = {value} | {}={value};{}",
            status_word(code),
            perf_label(label),
            r.limits.perf(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_formats() {
        assert_eq!(decode("u16", &[65535]), Some(65535.0));
        assert_eq!(decode("i16", &[65535]), Some(-1.0));
        assert_eq!(decode("u32", &[1, 2]), Some(65538.0));
        assert_eq!(decode("i32", &[0xffff, 0xfffe]), Some(-2.0));
        assert_eq!(decode("f32", &[0x41a4, 0x0000]), Some(20.5));
        assert_eq!(decode("u32", &[1]), None);
        assert_eq!(decode("x", &[1]), None);
    }
}
