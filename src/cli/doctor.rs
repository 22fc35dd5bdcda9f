//! `svc doctor`: what is wrong with a server, from its health report.

use super::*;
use crate::model::health::{DiskSpace, HealthReport, SystemInfo};

/// Less free space than this (or than 5 %) on the data directory's file system fails `doctor`.
pub(super) const DISK_FREE_MIN: u64 = 256 * 1024 * 1024;
/// A server clock further than this from the operator's fails `doctor`.
pub(super) const CLOCK_SKEW_MAX: f64 = 30.0;

pub(super) async fn doctor(c: &Client, as_json: bool) -> Result<String, CliError> {
    let info_body = c.get("/api/v1/system/info").await?;
    let asked = now();
    let health_body = c.get("/api/v1/system/health").await?;
    let answered = now();
    if as_json {
        return Ok(pretty(&json!({"info": info_body, "health": health_body})));
    }
    let info: SystemInfo = wire(&info_body)?;
    let health: HealthReport = wire(&health_body)?;
    let mut rows = vec![vec![
        "server".to_string(),
        "ok".to_string(),
        format!(
            "reachable, version {}, up {}, storage {}",
            text(&info.version, 40),
            info.uptime,
            text(&info.storage, 20)
        ),
    ]];
    let mut failing = Vec::new();
    if let Some(programs) = &info.programs {
        rows.push(vec![
            "programs".into(),
            if programs.confined { "ok" } else { "WARN" }.into(),
            format!("plugins and scripts run {}", text(&programs.how, 120)),
        ]);
    }
    for s in &health.subsystems {
        if !s.ok {
            failing.push(text(&s.name, 40));
        }
        rows.push(vec![
            text(&s.name, 40),
            if s.ok { "ok" } else { "FAIL" }.to_string(),
            text(s.info.as_deref().unwrap_or_default(), 100),
        ]);
    }
    for (name, depth) in &health.queues {
        rows.push(vec![
            format!("queue {}", text(name, 40)),
            "ok".into(),
            format!("{depth} queued"),
        ]);
    }
    if let Some(gsm) = &health.hardware.gsm {
        rows.push(vec![
            "gsm modem".into(),
            if gsm.connected { "ok" } else { "FAIL" }.into(),
            format!(
                "SIM {}, registration {}, signal {}",
                text(&gsm.sim, 20),
                text(&gsm.registration, 20),
                gsm.signal_dbm
                    .map_or_else(|| "unknown".to_string(), |d| format!("{d} dBm"))
            ),
        ]);
    }
    if let Some(disk) = health.disk {
        let low = disk_low(disk);
        if low {
            failing.push("disk".into());
        }
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        rows.push(vec![
            "disk".into(),
            if low { "FAIL" } else { "ok" }.into(),
            format!(
                "{:.1} GiB free of {:.1} GiB on the data directory",
                gib(disk.free_bytes),
                gib(disk.total_bytes)
            ),
        ]);
    }
    // The server read its clock between asking and answering: compare with the middle.
    let middle = (asked.as_millisecond() + answered.as_millisecond()) / 2;
    let skew = (health.time.as_millis() - middle) as f64 / 1000.0;
    let off = skew.abs() > CLOCK_SKEW_MAX;
    if off {
        failing.push("clock".into());
    }
    rows.push(vec![
        "clock".into(),
        if off { "FAIL" } else { "ok" }.into(),
        format!(
            "the server's clock is {:.1} s {} this machine's",
            skew.abs(),
            if skew >= 0.0 { "ahead of" } else { "behind" }
        ),
    ]);
    let out = table(&["CHECK", "STATUS", "INFO"], &rows);
    if failing.is_empty() {
        Ok(out)
    } else {
        print!("{out}");
        Err(CliError::Failed(format!(
            "not ready: {}",
            failing.join(", ")
        )))
    }
}

/// Less than `DISK_FREE_MIN` or 5 % free.
fn disk_low(disk: DiskSpace) -> bool {
    disk.free_bytes < DISK_FREE_MIN || disk.free_bytes.saturating_mul(20) < disk.total_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_is_low_under_the_floor_or_five_percent() {
        let gib = 1u64 << 30;
        let low = |free, total| {
            disk_low(DiskSpace {
                free_bytes: free,
                total_bytes: total,
            })
        };
        assert!(low(100 << 20, 2 * gib), "under 256 MiB");
        assert!(low(4 * gib, 100 * gib), "4 % of the disk");
        assert!(!low(6 * gib, 100 * gib));
        assert!(!low(300 << 20, 4 * gib), "7 % and over the floor");
    }
}
