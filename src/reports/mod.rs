//! Reports (SPEC 4.5, the reference's SEMANTICS 9): a `reports` document rendered on request
//! as HTML, CSV or JSON, run now or on its schedule into the archive (the newest `keep` per
//! format), and mailed through an `email` channel's outbox.
//!
//! Types: `availability` and `sla` (time in a hard non-OK state over the window, of the objects
//! the selector picks), `alert-stats` (alerts opened in the window: counts, MTTA, MTTR, the 20
//! most frequent titles), `oncall` (who is on call now per schedule) and `audit` (users and
//! their roles).

mod alert_stats;
mod audit;
mod availability;
mod on_call;
pub mod render;

use crate::auth::Principal;
use crate::events::Events;
use crate::model::audit::AuditDraft;
use crate::model::config::{ConfigDoc, Invalid};
use crate::model::identity::Actor;
use crate::model::notify::Delivery;
use crate::model::report::{
    ArchivedReport, DEFAULT_KEEP, FORMATS, ReportBody, ReportParams, ReportSchedule, ReportTable,
};
use crate::model::{GoDuration, Timestamp};
use crate::runtime::clock::SharedClock;
use crate::runtime::worker::{StepFuture, Wait, Worker};
use crate::runtime::{Mail, ObjectDependencies, ObjectLabels, OnCall, Outbox, PortError};
use crate::store::{Store, StoreError};
use crate::store::{TxResult, Wrote};
use serde_json::Map;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use uuid::Uuid;

/// The longest the schedule sweep sleeps (it is woken by configuration changes and wakes
/// at the next due run).
const SWEEP: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}", .0.detail)]
    Invalid(Invalid),
    /// `format=pdf` (501 `svc:reports/pdf`).
    #[error("PDF rendering is not available; ask for html, csv or json")]
    Pdf,
    /// The report shows what the caller may not read (403, naming the permission).
    #[error("{0}")]
    Forbidden(&'static str),
    /// `notify` could not answer (who is on call, a run's mails).
    #[error("notification: {0}")]
    Notify(#[from] PortError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What reading an `audit` report takes besides the route's own permission.
const AUDIT_REPORT_PERMISSION: &str = "admin:users";

fn invalid(field: &str, detail: impl Into<String>) -> ReportError {
    ReportError::Invalid(Invalid {
        field: field.into(),
        detail: detail.into(),
    })
}

/// A rendering: its content type and bytes.
pub struct Rendered {
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

pub struct Reports {
    store: Arc<Store>,
    events: Arc<Events>,
    labels: Arc<dyn ObjectLabels>,
    dependencies: Arc<dyn ObjectDependencies>,
    oncall: Arc<dyn OnCall>,
    outbox: Arc<dyn Outbox>,
    clock: SharedClock,
    /// The server's base URL, for the download link in mails.
    base_url: String,
    /// Schedules are in the server's local time.
    tz: jiff::tz::TimeZone,
}

pub struct ReportsParts {
    pub store: Arc<Store>,
    pub events: Arc<Events>,
    pub labels: Arc<dyn ObjectLabels>,
    pub dependencies: Arc<dyn ObjectDependencies>,
    pub oncall: Arc<dyn OnCall>,
    pub outbox: Arc<dyn Outbox>,
    pub clock: SharedClock,
    pub base_url: String,
}

impl Reports {
    pub fn new(parts: ReportsParts) -> Arc<Self> {
        Arc::new(Self {
            store: parts.store,
            events: parts.events,
            labels: parts.labels,
            dependencies: parts.dependencies,
            oncall: parts.oncall,
            outbox: parts.outbox,
            clock: parts.clock,
            base_url: parts.base_url.trim_end_matches('/').to_string(),
            tz: jiff::tz::TimeZone::system(),
        })
    }

    async fn report(
        &self,
        tenant: Uuid,
        name: &str,
    ) -> Result<(ConfigDoc, ReportBody), ReportError> {
        let doc = self
            .store
            .doc(tenant, "reports", name.to_string(), false)
            .await?;
        let body: ReportBody = serde_json::from_str(&doc.body)
            .map_err(|e| invalid("report", format!("the stored report cannot be read: {e}")))?;
        Ok((doc, body))
    }

    /// A report of users and their roles (`audit`) shows what `GET /users` does, so reading it
    /// (rendering, or its archive) takes that route's permission too.
    fn check_readable(p: &Principal, body: &ReportBody) -> Result<(), ReportError> {
        if body.kind == "audit" && !p.allows(AUDIT_REPORT_PERMISSION) {
            return Err(ReportError::Forbidden(AUDIT_REPORT_PERMISSION));
        }
        Ok(())
    }

    /// The report rendered now in `format` (`html` by default).
    pub async fn render(
        &self,
        p: &Principal,
        name: &str,
        format: Option<&str>,
    ) -> Result<Rendered, ReportError> {
        let format = format.filter(|f| !f.is_empty()).unwrap_or("html");
        let (doc, body) = self.report(p.tenant, name).await?;
        Self::check_readable(p, &body)?;
        let content_type = content_type(format)?;
        let table = self.table(p.tenant, &doc.name, &body).await?;
        Ok(Rendered {
            content_type,
            body: encode(&table, format)?,
        })
    }

    /// Renders the report as HTML and CSV, archives both in slot `manual-<ms>` and queues
    /// the mails.
    pub async fn run(
        &self,
        p: &Principal,
        actor: &Actor,
        name: &str,
    ) -> Result<Vec<ArchivedReport>, ReportError> {
        let (doc, body) = self.report(p.tenant, name).await?;
        Self::check_readable(p, &body)?;
        let slot = format!("manual-{}", self.clock.now().as_millis());
        self.archive_run(p.tenant, &doc, &body, slot, false, actor)
            .await
    }

    async fn archive_run(
        &self,
        tenant: Uuid,
        doc: &ConfigDoc,
        body: &ReportBody,
        slot: String,
        scheduled: bool,
        actor: &Actor,
    ) -> Result<Vec<ArchivedReport>, ReportError> {
        let params = ReportParams::of(&body.params).map_err(|e| invalid("params", e))?;
        let table = self.table(tenant, &doc.name, body).await?;
        let mut renderings = Vec::new();
        for format in ["html", "csv"] {
            let bytes = encode(&table, format)?;
            let entry = ArchivedReport {
                id: self.clock.new_id(),
                tenant_id: tenant,
                report: doc.name.clone(),
                slot: slot.clone(),
                format: format.into(),
                content_type: content_type(format)?.into(),
                generated_at: table.generated_at,
                bytes: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                mailed_to: Vec::new(),
            };
            renderings.push((entry, bytes));
        }
        let mails = self
            .mails(tenant, &params, body, &table, &renderings[0].0)
            .await?;
        for (entry, _) in &mut renderings {
            entry.mailed_to = mails.iter().map(|m| m.target.clone()).collect();
        }
        let entries: Vec<ArchivedReport> = renderings.iter().map(|(e, _)| e.clone()).collect();
        let audit = AuditDraft::new(
            self.clock.now(),
            tenant,
            actor,
            "report.run",
            format!("reports/{}", doc.name),
        );
        // One transaction: the renderings archived and pruned to `keep`, the scheduled slot
        // recorded so it runs once, the mails queued, and the audit entry.
        let report = doc.name.clone();
        let keep = body.keep.unwrap_or(DEFAULT_KEEP).max(1);
        let archived = entries.clone();
        self.store
            .transact(move |tx| -> TxResult<_> {
                for (entry, content) in &renderings {
                    tx.archive_report(entry, content)?;
                }
                tx.prune_report_archive(tenant, &report, keep)?;
                if scheduled {
                    tx.set_report_slot(tenant, &report, &slot)?;
                }
                for mail in &mails {
                    tx.put_delivery(mail)?;
                }
                tx.record([audit.after(&archived)], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(entries)
    }

    /// One mail per address through `params.channel`, an `email` channel, composed by
    /// `notify` (the `Outbox` port); none without an address.
    async fn mails(
        &self,
        tenant: Uuid,
        params: &ReportParams,
        body: &ReportBody,
        table: &ReportTable,
        html: &ArchivedReport,
    ) -> Result<Vec<Delivery>, ReportError> {
        if body.email.is_empty() {
            return Ok(Vec::new());
        }
        if params.channel.is_empty() {
            return Err(invalid(
                "params",
                "params.channel must name the email channel that mails the report",
            ));
        }
        let link = format!(
            "{}/api/v1/reports/{}/archive/{}",
            self.base_url, html.report, html.id
        );
        let mut text = render::csv(table);
        text.push_str("\nThe report: ");
        text.push_str(&link);
        let mail = Mail {
            kind: "report",
            subject: format!("Report {} ({})", table.title, html.slot),
            text,
            link,
        };
        self.outbox
            .compose_mails(tenant, params.channel.clone(), body.email.clone(), mail)
            .await
            .map_err(|e| match e {
                PortError::Refused(why) => invalid("params", format!("params.channel: {why}")),
                e => e.into(),
            })
    }

    /// Archived renderings, newest first; 404 for a report that does not exist.
    pub async fn archive(
        &self,
        p: &Principal,
        name: &str,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ArchivedReport>, ReportError> {
        let (doc, body) = self.report(p.tenant, name).await?;
        Self::check_readable(p, &body)?;
        Ok(self
            .store
            .archived_reports(p.tenant, doc.name, before, limit)
            .await?)
    }

    pub async fn archived(
        &self,
        p: &Principal,
        name: &str,
        id: Uuid,
    ) -> Result<(ArchivedReport, Vec<u8>), ReportError> {
        let (_, body) = self.report(p.tenant, name).await?;
        Self::check_readable(p, &body)?;
        Ok(self
            .store
            .archived_report(p.tenant, name.to_string(), id)
            .await?)
    }

    async fn table(
        &self,
        tenant: Uuid,
        name: &str,
        body: &ReportBody,
    ) -> Result<ReportTable, ReportError> {
        let params = ReportParams::of(&body.params).map_err(|e| invalid("params", e))?;
        let now = self.clock.now();
        let mut table = ReportTable {
            title: name.to_string(),
            kind: body.kind.clone(),
            generated_at: now,
            window_days: params.window_days,
            columns: Vec::new(),
            rows: Vec::new(),
            totals: Map::new(),
        };
        match body.kind.as_str() {
            "availability" | "sla" => self.availability(tenant, &params, &mut table).await?,
            "alert-stats" => self.alert_stats(tenant, &params, &mut table).await?,
            "oncall" => self.on_call(tenant, &mut table).await?,
            "audit" => self.audit(tenant, &mut table).await?,
            other => {
                return Err(invalid(
                    "report",
                    format!("type {other:?} is not a report type this server renders"),
                ));
            }
        }
        Ok(table)
    }

    /// Runs every scheduled report whose current slot has not run yet (a slot missed while
    /// the server was down runs once when it is back, older ones not at all); returns when
    /// the next one is due.
    pub async fn run_due(&self) -> Result<Option<Timestamp>, ReportError> {
        let now = self.clock.now();
        let mut next: Option<Timestamp> = None;
        for tenant in self.store.tenants().await? {
            let docs = self
                .store
                .docs(tenant.id, "reports", None, usize::MAX, |d| {
                    d.body.contains("\"schedule\"")
                })
                .await?;
            for doc in docs {
                let Ok(body) = serde_json::from_str::<ReportBody>(&doc.body) else {
                    continue;
                };
                let Some(schedule) = body
                    .schedule
                    .as_deref()
                    .and_then(|s| s.parse::<ReportSchedule>().ok())
                else {
                    continue;
                };
                if let Some(due) = schedule.next_due(now, &self.tz) {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
                let Some((slot, due)) = schedule.slot(now, &self.tz) else {
                    continue;
                };
                // A report made after its slot was due waits for the next one.
                if due < doc.created_at {
                    continue;
                }
                let last = self.store.report_slot(tenant.id, doc.name.clone()).await?;
                if last.as_deref() == Some(slot.as_str()) {
                    continue;
                }
                let actor = Actor::system("report-schedule");
                if let Err(e) = self
                    .archive_run(tenant.id, &doc, &body, slot, true, &actor)
                    .await
                {
                    tracing::warn!(report = %doc.name, error = %e, "a scheduled report failed");
                }
            }
        }
        Ok(next)
    }
}

fn content_type(format: &str) -> Result<&'static str, ReportError> {
    if format == "pdf" {
        return Err(ReportError::Pdf);
    }
    FORMATS
        .iter()
        .find(|(f, _)| *f == format)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            invalid(
                "format",
                format!("format {format:?} must be html, csv, json or pdf"),
            )
        })
}

fn encode(table: &ReportTable, format: &str) -> Result<Vec<u8>, ReportError> {
    Ok(match format {
        "csv" => render::csv(table).into_bytes(),
        "json" => serde_json::to_vec(table)
            .map_err(|e| ReportError::Store(StoreError::Internal(e.to_string())))?,
        _ => render::html(table).into_bytes(),
    })
}

/// Milliseconds as a Go duration (`1h2m3s`), to the second.
fn duration(ms: i64) -> String {
    GoDuration(Duration::from_secs(u64::try_from(ms / 1000).unwrap_or(0))).to_string()
}

/// A table with no columns, rows or totals yet, for the report types' unit tests.
#[cfg(test)]
fn empty_table(kind: &str) -> ReportTable {
    ReportTable {
        title: "test".into(),
        kind: kind.into(),
        generated_at: "2026-03-01T08:00:00Z".parse().unwrap(),
        window_days: 30,
        columns: Vec::new(),
        rows: Vec::new(),
        totals: Map::new(),
    }
}

/// The schedule sweep: at the next due run, or when the configuration changed.
pub struct ReportScheduler {
    reports: Arc<Reports>,
    wake: Arc<Notify>,
}

impl ReportScheduler {
    pub fn new(reports: Arc<Reports>) -> Self {
        let wake = Arc::new(Notify::new());
        reports
            .store
            .watch_commits(crate::store::Change::Catalog, wake.clone());
        Self { reports, wake }
    }
}

impl Worker for ReportScheduler {
    fn name(&self) -> &'static str {
        "reports"
    }

    fn waker(&self) -> Option<Arc<Notify>> {
        Some(self.wake.clone())
    }

    fn step(&mut self) -> StepFuture<'_> {
        Box::pin(async move {
            match self.reports.run_due().await {
                Ok(next) => {
                    let now = self.reports.clock.now();
                    Wait::For(next.map_or(SWEEP, |at| {
                        Duration::from_millis(
                            u64::try_from(at.as_millis() - now.as_millis()).unwrap_or(0),
                        )
                        .min(SWEEP)
                    }))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the report schedule sweep failed");
                    Wait::For(Duration::from_secs(60))
                }
            }
        })
    }
}
