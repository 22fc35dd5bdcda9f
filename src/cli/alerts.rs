//! `svc ack`, `resolve`, `downtime`, `silence` and `check-now`: acting on alerts and objects.

use super::config::object_id;
use super::*;
use crate::model::interval::{TimeInterval, TimeOfDayRange};

pub(super) async fn ack(
    c: &Client,
    as_json: bool,
    id: &str,
    request: AckRequest,
) -> Result<String, CliError> {
    let empty =
        request.comment.is_none() && request.sticky.is_none() && request.expires_in.is_none();
    let request = if empty { Body::None } else { body(&request)? };
    let v = c
        .json(
            Method::POST,
            &format!("/api/v1/alerts/{}:ack", alert_id(c, id).await?),
            request,
        )
        .await?;
    Ok(if as_json {
        pretty(&v)
    } else {
        format!("alert {} acknowledged\n", wire::<Alert>(&v)?.id)
    })
}

pub(super) async fn resolve(c: &Client, as_json: bool, id: &str) -> Result<String, CliError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/v1/alerts/{}:resolve", alert_id(c, id).await?),
            Body::None,
        )
        .await?;
    Ok(if as_json {
        pretty(&v)
    } else {
        format!("alert {} resolved\n", wire::<Alert>(&v)?.id)
    })
}

/// When a downtime starts, and the windows it recurs in (each a list, comma-separated).
#[derive(clap::Args, Debug, Default)]
pub struct DowntimeWindow {
    /// Its start (RFC 3339) [default: now]; `--hours` counts from it.
    #[arg(long)]
    start: Option<String>,
    /// Days it recurs on: `saturday`, `monday:friday`.
    #[arg(long, value_delimiter = ',')]
    weekdays: Vec<String>,
    /// Times of day it recurs in: `22:00-24:00`.
    #[arg(long, value_delimiter = ',')]
    times: Vec<String>,
    /// Days of the month: `1`, `-1` (the last), `1:7`.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    days_of_month: Vec<String>,
    /// Months: `march:april`, `12`.
    #[arg(long, value_delimiter = ',')]
    months: Vec<String>,
    /// The time zone its times and days are read in: `Europe/Berlin` [default: UTC].
    #[arg(long)]
    location: Option<String>,
    /// An iCalendar feed whose events are its windows (needs `config:write`).
    #[arg(long)]
    calendar_url: Option<String>,
    /// Federation sites (of a main) to ship it to, by selector: `--site north,south` (needs
    /// `config:write`).
    #[arg(long = "site", value_delimiter = ',')]
    sites: Vec<String>,
}

impl DowntimeWindow {
    /// The recurrence as one interval, if any of its fields is given.
    fn intervals(&self) -> Option<Vec<TimeInterval>> {
        if self.weekdays.is_empty()
            && self.times.is_empty()
            && self.days_of_month.is_empty()
            && self.months.is_empty()
        {
            return None;
        }
        Some(vec![TimeInterval {
            times: self
                .times
                .iter()
                .map(|t| TimeOfDayRange::from(t.as_str()))
                .collect(),
            weekdays: self.weekdays.clone(),
            days_of_month: self.days_of_month.clone(),
            months: self.months.clone(),
            years: Vec::new(),
            location: self.location.clone(),
        }])
    }
}

/// A fixed downtime from now or `--start` for `hours`, of an object (by id or name) or of
/// what a selector picks; recurring within that span when `window` names days or times.
pub(super) async fn downtime(
    c: &Client,
    as_json: bool,
    selector: Option<String>,
    object: Option<String>,
    (hours, window): (f64, DowntimeWindow),
    message: String,
) -> Result<String, CliError> {
    let from = match &window.start {
        Some(raw) => raw
            .parse::<jiff::Timestamp>()
            .map_err(|e| CliError::Failed(format!("--start {raw}: {e}")))?,
        None => now(),
    };
    let (start, end) = hours_from(from, hours)?;
    let time_intervals = window.intervals();
    let object_id = match object {
        Some(o) => Some(object_id(c, &o).await?),
        None => None,
    };
    let request = DowntimeBody {
        comment: Some(message),
        object_id,
        selector,
        kind: Some("fixed".into()),
        start: Some(start),
        end: Some(end),
        duration: None,
        notice_before: None,
        escalation_policy: None,
        time_intervals,
        calendar_url: window.calendar_url,
        sites: Some(window.sites).filter(|s| !s.is_empty()),
        services: None,
    };
    let v = c
        .json(Method::POST, "/api/v1/downtimes", body(&request)?)
        .await?;
    Ok(if as_json {
        pretty(&v)
    } else {
        let d: Downtime = wire(&v)?;
        let mut out = format!("downtime {} until {}\n", d.id, d.end);
        if !d.sites.is_empty() {
            out.push_str(&format!("  shipped to {}\n", d.sites.join(", ")));
        }
        for w in &d.occurrences {
            out.push_str(&format!("  in effect {} to {}\n", w.start, w.end));
        }
        out
    })
}

pub(super) async fn silence(
    c: &Client,
    as_json: bool,
    selector: String,
    hours: f64,
    message: String,
) -> Result<String, CliError> {
    let (start, end) = hours_from_now(hours)?;
    let request = SilenceBody {
        comment: Some(message),
        selector: Some(selector),
        text_regex: None,
        starts_at: Some(start),
        expires_at: Some(end),
        expire_when_unmatched_for: None,
    };
    let v = c
        .json(Method::POST, "/api/v1/silences", body(&request)?)
        .await?;
    Ok(if as_json {
        pretty(&v)
    } else {
        let s: Silence = wire(&v)?;
        format!("silence {} until {}\n", s.id, s.expires_at)
    })
}

/// `svc silence --selector S --preview`: what a silence would hold now.
pub(super) async fn silence_preview(
    c: &Client,
    as_json: bool,
    selector: String,
) -> Result<String, CliError> {
    let request = SilenceBody {
        selector: Some(selector),
        ..SilenceBody::default()
    };
    let v = c
        .json(Method::POST, "/api/v1/silences:preview", body(&request)?)
        .await?;
    if as_json {
        return Ok(pretty(&v));
    }
    let items: Vec<Alert> = wire(&v["items"])?;
    let mut out = format!("a silence would hold {} alerts now\n", items.len());
    for a in items {
        out.push_str(&format!(
            "{}  {}  {}\n",
            a.short_id(),
            a.severity.as_str(),
            text(&a.title, 80)
        ));
    }
    Ok(out)
}

pub(super) async fn check_now(c: &Client, as_json: bool, id: &str) -> Result<String, CliError> {
    let v = c
        .json(
            Method::POST,
            &format!("/api/v1/objects/{}/check-now", object_id(c, id).await?),
            Body::None,
        )
        .await?;
    Ok(if as_json {
        pretty(&v)
    } else {
        format!("check of {id} scheduled\n")
    })
}

/// An alert's id, or the id of the open (else acknowledged) alert of the object a name names.
async fn alert_id(c: &Client, arg: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(arg).is_ok() {
        return Ok(arg.to_string());
    }
    let object = object_id(c, arg).await?;
    let v = c
        .get(&format!(
            "/api/v1/alerts?objectId={object}&status=open,acked"
        ))
        .await?;
    let mut alerts: Vec<&Value> = items(&v).iter().collect();
    alerts.sort_by_key(|a| a["status"] != "open");
    alerts
        .first()
        .map(|a| cell(&a["id"], 40))
        .ok_or_else(|| CliError::Failed(format!("{arg} has no open or acknowledged alert")))
}

/// From now for `hours` (more than 0, at most a leap year), as RFC 3339 times.
fn hours_from_now(hours: f64) -> Result<(String, String), CliError> {
    hours_from(now(), hours)
}

/// From `start` for `hours` (more than 0, at most a leap year), as RFC 3339 times.
fn hours_from(start: jiff::Timestamp, hours: f64) -> Result<(String, String), CliError> {
    if !(hours > 0.0 && hours <= 24.0 * 366.0) {
        return Err(CliError::Failed(format!(
            "--hours {hours}: expected a positive number of hours"
        )));
    }
    let span = jiff::SignedDuration::from_secs_f64(hours * 3600.0);
    let end = start
        .checked_add(span)
        .map_err(|e| CliError::Failed(format!("--hours {hours}: {e}")))?;
    Ok((start.to_string(), end.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_are_positive_and_at_most_a_leap_year() {
        for bad in [0.0, -1.0, f64::NAN, 24.0 * 366.0 + 1.0] {
            assert!(
                matches!(hours_from_now(bad), Err(CliError::Failed(_))),
                "{bad}"
            );
        }
        let (start, end) = hours_from_now(1.5).unwrap();
        let (start, end): (jiff::Timestamp, jiff::Timestamp) =
            (start.parse().unwrap(), end.parse().unwrap());
        assert_eq!((end - start).get_seconds(), 5400);
    }
}
