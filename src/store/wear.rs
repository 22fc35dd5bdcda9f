//! The storage's wear counter (issue 72): the bytes this process made the kernel write
//! (`/proc/self/io`'s `write_bytes`: the store, the event and metric files, everything that
//! wears a gateway's SD card), counted per day and since install in `wear.json` of the data
//! directory, with the card's projected life from its rated endurance and an alert when that
//! falls under `storage.wear.alertUnderYears`. Sampled when asked (`/system/health`) and on the
//! hour; the counts are written only when something else was, so an idle box writes nothing.

use super::Store;
use crate::model::Timestamp;
use crate::model::alert::ManualAlarm;
use crate::model::wear::{WearCounts, WearReport};
use crate::runtime::clock::SharedClock;
use crate::runtime::locks::Locked;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{AlertActions, HeldAlert};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bytes this process has caused to be written to storage, where the kernel tells.
pub fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

struct Sampled {
    counts: WearCounts,
    /// `write_bytes` and the time at the last sample.
    seen: u64,
    at: Option<Timestamp>,
    /// The total when the counts were last written to the file.
    saved_total: Option<u64>,
}

pub struct Wear {
    file: PathBuf,
    clock: SharedClock,
    endurance: Option<u64>,
    alert_under_years: f64,
    state: Mutex<Sampled>,
    store: Arc<Store>,
    alerts: Arc<dyn AlertActions>,
}

impl Wear {
    /// The counter of the data directory `data_dir`, with the card's rated `endurance` in bytes
    /// (if known) and the projected life under which it raises an alert.
    pub fn open(
        data_dir: &std::path::Path,
        clock: SharedClock,
        endurance: Option<u64>,
        alert_under_years: f64,
        store: Arc<Store>,
        alerts: Arc<dyn AlertActions>,
    ) -> Arc<Self> {
        let file = data_dir.join("wear.json");
        let counts = std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Arc::new(Self {
            file,
            clock,
            endurance,
            alert_under_years,
            state: Mutex::new(Sampled {
                counts,
                seen: 0,
                at: None,
                saved_total: None,
            }),
            store,
            alerts,
        })
    }

    /// The counts as of now; `None` where the kernel does not tell.
    pub fn report(&self) -> Option<WearReport> {
        let written = write_bytes()?;
        let mut s = self.state.locked();
        self.sample(&mut s, written);
        Some(s.counts.report(self.endurance))
    }

    fn sample(&self, s: &mut Sampled, written: u64) {
        let now = self.clock.now();
        let secs = s.at.map_or(0, |at| now.since(at).as_secs());
        s.counts.add(now, written.saturating_sub(s.seen), secs);
        s.seen = written;
        s.at = Some(now);
    }

    /// Samples, writes the counts when something was written since they last were, and holds
    /// the wear `alert` as the projection stands.
    async fn watch(&self, alert: &mut HeldAlert) {
        let Some(written) = write_bytes() else {
            return;
        };
        let (counts, save) = {
            let mut s = self.state.locked();
            self.sample(&mut s, written);
            let save = s.saved_total != Some(s.counts.total);
            (s.counts.clone(), save)
        };
        if save {
            let tmp = self.file.with_extension("json.new");
            let saved = serde_json::to_vec(&counts)
                .map_err(std::io::Error::other)
                .and_then(|b| std::fs::write(&tmp, b))
                .and_then(|()| std::fs::rename(&tmp, &self.file));
            match saved {
                Ok(()) => self.state.locked().saved_total = Some(counts.total),
                Err(e) => tracing::warn!(error = %e, "the wear counts were not saved"),
            }
        }
        let years = counts.report(self.endurance).projected_years;
        let short = years.is_some_and(|y| y < self.alert_under_years);
        let Ok(tenant) = self.store.default_tenant().await.map(|t| t.id) else {
            return;
        };
        let raise = || {
            let years = years.unwrap_or_default();
            ManualAlarm {
                title: Some(format!("The storage wears out in {years:.1} years")),
                message: Some(format!(
                    "at {} bytes a day the card's rated endurance of {} bytes is written in {years:.1} years (alert under {} years)",
                    counts.per_day().unwrap_or_default(),
                    self.endurance.unwrap_or_default(),
                    self.alert_under_years
                )),
                severity: Some("warning".into()),
                labels: [("subsystem".to_string(), "storage".to_string())].into(),
                ..ManualAlarm::default()
            }
        };
        if let Err(e) = alert
            .hold(&*self.alerts, tenant, short, raise, "wear", "wear")
            .await
        {
            tracing::warn!(error = %e, "the wear alert was not raised or resolved");
        }
    }
}

/// Samples on the hour (a timer to the next one, no tick between), and keeps the wear alert.
pub struct WearWatch {
    wear: Arc<Wear>,
    alert: HeldAlert,
}

impl WearWatch {
    pub fn new(wear: Arc<Wear>) -> Self {
        Self {
            wear,
            alert: HeldAlert::new("storage-wear"),
        }
    }
}

impl Worker for WearWatch {
    fn name(&self) -> &'static str {
        "storage-wear"
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            self.wear.watch(&mut self.alert).await;
            let now = self.wear.clock.now().as_millis();
            let hour = 3_600_000;
            let next = (now / hour + 1) * hour;
            Wait::For(Duration::from_millis((next - now).max(1) as u64))
        })
    }
}
