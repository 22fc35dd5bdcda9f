//! `svc doctor`: what is wrong with a server, from its health report.

use super::*;

/// Less free space than this (or than 5 %) on the data directory's file system fails `doctor`.
pub(super) const DISK_FREE_MIN: u64 = 256 * 1024 * 1024;
/// A server clock further than this from the operator's fails `doctor`.
pub(super) const CLOCK_SKEW_MAX: f64 = 30.0;

pub(super) async fn doctor(c: &Client, as_json: bool) -> Result<String, CliError> {
    let info = c.get("/api/v1/system/info").await?;
    let asked = now();
    let health = c.get("/api/v1/system/health").await?;
    let answered = now();
    if as_json {
        return Ok(pretty(&json!({"info": info, "health": health})));
    }
    let mut rows = vec![vec![
        "server".to_string(),
        "ok".to_string(),
        format!(
            "reachable, version {}, up {}, storage {}",
            cell(&info["version"], 40),
            cell(&info["uptime"], 20),
            cell(&info["storage"], 20)
        ),
    ]];
    let mut failing = Vec::new();
    for s in health["subsystems"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let ok = s["ok"] == true;
        if !ok {
            failing.push(cell(&s["name"], 40));
        }
        rows.push(vec![
            cell(&s["name"], 40),
            if ok { "ok" } else { "FAIL" }.to_string(),
            cell(&s["info"], 100),
        ]);
    }
    for (name, depth) in health["queues"].as_object().into_iter().flatten() {
        rows.push(vec![
            format!("queue {name}"),
            "ok".into(),
            format!("{depth} queued"),
        ]);
    }
    if let Some(gsm) = health["hardware"]["gsm"].as_object() {
        rows.push(vec![
            "gsm modem".into(),
            if gsm.get("connected") == Some(&Value::Bool(true)) {
                "ok"
            } else {
                "FAIL"
            }
            .into(),
            format!(
                "SIM {}, registration {}, signal {} dBm",
                cell(&gsm["sim"], 20),
                cell(&gsm["registration"], 20),
                cell(&gsm["signalDbm"], 10)
            ),
        ]);
    }
    let disk = &health["disk"];
    if let (Some(free), Some(total)) = (disk["freeBytes"].as_u64(), disk["totalBytes"].as_u64()) {
        let low = free < DISK_FREE_MIN || free.saturating_mul(20) < total;
        if low {
            failing.push("disk".into());
        }
        let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
        rows.push(vec![
            "disk".into(),
            if low { "FAIL" } else { "ok" }.into(),
            format!(
                "{:.1} GiB free of {:.1} GiB on the data directory",
                gib(free),
                gib(total)
            ),
        ]);
    }
    if let Some(server) = health["time"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        // The server read its clock between asking and answering: compare with the middle.
        let middle = (asked.as_millisecond() + answered.as_millisecond()) / 2;
        let skew = (server.as_millisecond() - middle) as f64 / 1000.0;
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
    }
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
