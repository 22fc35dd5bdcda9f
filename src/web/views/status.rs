//! A public status page (issue 74, part 3) and its feeds: one self-contained HTML document
//! with its style inline and no script, readable on a phone, under 40 KB with 30 components;
//! the updates as Atom (RFC 4287) and RSS 2.0. Nothing of the UI's layout: no navigation, no
//! sign-in, nothing of the operators'.

use super::local;
use crate::model::Timestamp;
use crate::model::input::markup_text;
use crate::model::status::{Board, ComponentStatus, PageIncident, StatusUpdate};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use std::fmt::Write;

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1d1f24;background:#f6f7f9}main{max-width:46rem;margin:auto;padding:1rem}h1{font-size:1.6rem;margin:.5rem 0}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}h3{font-size:1rem;margin:0}ul,ol{list-style:none;padding:0;margin:0}section>ul>li,article,.banner,form{background:#fff;border:1px solid #d9dce1;border-radius:6px;padding:.75rem;margin:.5rem 0}.row{display:flex;justify-content:space-between;gap:1rem;flex-wrap:wrap}.muted,.ticks{color:#5b6270;font-size:.875rem}.ticks{display:flex;justify-content:space-between}svg{display:block;width:100%;height:2rem;margin-top:.5rem}.banner{font-weight:600;font-size:1.1rem}.s-operational,.d-ok{color:#0a6b2d;fill:#1f9d55}.s-degraded,.d-minor{color:#8a5300;fill:#e0a100}.s-outage,.d-major{color:#a4161a;fill:#d64545}.s-maintenance{color:#1d4ed8}.s-unknown,.d-none{color:#5b6270;fill:#c4c8cf}.banner.s-operational{border-left:6px solid #1f9d55}.banner.s-degraded{border-left:6px solid #e0a100}.banner.s-outage{border-left:6px solid #d64545}.banner.s-maintenance{border-left:6px solid #1d4ed8}ol li{margin:.5rem 0}input{font:inherit;padding:.4rem;max-width:100%}button{font:inherit;padding:.4rem .9rem;border-radius:4px;border:1px solid #1d4ed8;background:#1d4ed8;color:#fff}a{color:#1d4ed8}label{display:block}footer{color:#5b6270;font-size:.8rem;padding:1rem 0}@media (prefers-color-scheme:dark){body{background:#111318;color:#e6e7ea}section>ul>li,article,.banner,form{background:#1b1e25;border-color:#2e323b}.muted,.ticks,footer,.s-unknown{color:#a3a9b5}.s-operational{color:#5fd38d}.s-degraded{color:#f2c14e}.s-outage{color:#ff8080}.s-maintenance,a{color:#8fb0ff}}";

/// A component's or the page's status in words.
fn label(status: &str) -> &'static str {
    match status {
        "operational" => "Operational",
        "degraded" => "Degraded performance",
        "outage" => "Major outage",
        "maintenance" => "Under maintenance",
        _ => "Unknown",
    }
}

fn update_label(status: &str) -> &str {
    match status {
        "investigating" => "Investigating",
        "identified" => "Identified",
        "monitoring" => "Monitoring",
        "resolved" => "Resolved",
        other => other,
    }
}

fn headline(status: &str) -> &'static str {
    match status {
        "operational" => "All systems operational",
        "degraded" => "Some systems are degraded",
        "outage" => "Major outage",
        "maintenance" => "Maintenance in progress",
        _ => "Status unknown",
    }
}

/// `12.345` as `12.35 %`; 100 stays `100 %`.
fn percent(p: f64) -> String {
    if p >= 100.0 {
        "100 %".into()
    } else {
        format!("{:.2} %", (p * 100.0).floor() / 100.0)
    }
}

fn utc(at: Timestamp) -> String {
    local(at, &jiff::tz::TimeZone::UTC)
}

/// The 90 days as bars, 4 units wide with a gap of 1, drawn as one path per class; a day below
/// 100 % also gets a rectangle with its date and figure as its title (a tooltip, and what a
/// screen reader can reach beside the summary).
fn bars(c: &ComponentStatus, today: Timestamp) -> Markup {
    let mut paths: [(&str, String); 4] = [
        ("d-ok", String::new()),
        ("d-minor", String::new()),
        ("d-major", String::new()),
        ("d-none", String::new()),
    ];
    let mut marked = Vec::new();
    let n = c.days.len();
    for (i, day) in c.days.iter().enumerate() {
        let class = match day {
            None => 3,
            Some(p) if *p >= 100.0 => 0,
            Some(p) if *p >= 99.0 => 1,
            Some(_) => 2,
        };
        let _ = write!(paths[class].1, "M{} 0h4v24h-4z", i * 5);
        if let Some(p) = day.filter(|p| *p < 100.0) {
            let back = std::time::Duration::from_secs((n - 1 - i) as u64 * 86_400);
            let date = today.minus(back).0.strftime("%Y-%m-%d").to_string();
            marked.push((i * 5, format!("{date}: {}", percent(p))));
        }
    }
    let summary = match c.availability {
        Some(p) => format!("{} available over the last {n} days", percent(p)),
        None => format!("no data over the last {n} days"),
    };
    html! {
        svg viewBox=(format!("0 0 {} 24", n * 5)) preserveAspectRatio="none" role="img" aria-label=(summary) {
            @for (class, d) in &paths {
                @if !d.is_empty() { path class=(class) d=(d) {} }
            }
            @for (x, title) in &marked {
                rect x=(x) width="4" height="24" fill-opacity="0" { title { (title) } }
            }
        }
        p.ticks { span { (n) " days ago" } span { (summary) } span { "Today" } }
    }
}

fn update(u: &StatusUpdate) -> Markup {
    html! {
        li {
            strong { (update_label(&u.status)) } " — " (u.message)
            br;
            span.muted {
                time datetime=(u.posted_at) { (utc(u.posted_at)) }
                @if !u.components.is_empty() { " · " (u.components.join(", ")) }
            }
        }
    }
}

fn incident(i: &PageIncident) -> Markup {
    html! {
        article id=(format!("i-{}", i.incident_id)) {
            h3 { (i.title) }
            ol { @for u in &i.updates { (update(u)) } }
        }
    }
}

/// What the page shows.
pub struct StatusView<'a> {
    pub name: &'a str,
    pub heading: &'a str,
    pub description: &'a str,
    pub board: &'a Board,
    pub incidents: &'a [PageIncident],
    /// Whether people can subscribe by e-mail (the page has an e-mail channel).
    pub subscribe: bool,
    pub now: Timestamp,
}

fn document(title: &str, feeds: Option<&str>, content: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width,initial-scale=1";
                title { (title) }
                @if let Some(base) = feeds {
                    link rel="alternate" type="application/atom+xml" title="Atom" href=(format!("{base}/feed.atom"));
                    link rel="alternate" type="application/rss+xml" title="RSS" href=(format!("{base}/feed.rss"));
                }
                style { (PreEscaped(STYLE)) }
            }
            body { main { (content) } }
        }
    }
    .into_string()
}

/// The status page.
pub fn page(v: &StatusView<'_>) -> String {
    let base = format!("/status/{}", super::encode_segment(v.name));
    let (active, past): (Vec<&PageIncident>, Vec<&PageIncident>) =
        v.incidents.iter().partition(|i| i.status != "resolved");
    let overall = v.board.overall();
    document(
        &format!("{} status", v.heading),
        Some(&base),
        html! {
            h1 { (v.heading) }
            @if !v.description.is_empty() { p { (v.description) } }
            p.banner.(format!("s-{overall}")) role="status" { (headline(overall)) }
            @if !active.is_empty() {
                section aria-labelledby="active" {
                    h2 #active { "Active incidents" }
                    @for i in &active { (incident(i)) }
                }
            }
            section aria-labelledby="components" {
                h2 #components { "Components" }
                ul {
                    @for c in &v.board.components {
                        li {
                            div.row {
                                strong { (c.name) }
                                span.(format!("s-{}", c.status)) { (label(c.status)) }
                            }
                            @if !c.description.is_empty() { span.muted { (c.description) } }
                            (bars(c, v.now))
                        }
                    }
                }
            }
            @if !v.board.maintenance.is_empty() {
                section aria-labelledby="maintenance" {
                    h2 #maintenance { "Scheduled maintenance" }
                    ul {
                        @for m in &v.board.maintenance {
                            li {
                                strong { @if m.title.is_empty() { "Maintenance" } @else { (m.title) } }
                                br;
                                span.muted {
                                    time datetime=(m.start) { (utc(m.start)) } " to "
                                    time datetime=(m.end) { (utc(m.end)) } " · " (m.components.join(", "))
                                }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="past" {
                h2 #past { "Past incidents" }
                @if past.is_empty() { p.muted { "No incidents in the last 90 days." } }
                @for i in &past { (incident(i)) }
            }
            section aria-labelledby="subscribe" {
                h2 #subscribe { "Get updates" }
                @if v.subscribe {
                    form method="post" action=(format!("{base}/subscribe")) {
                        label for="email" { "E-mail address" }
                        input #email type="email" name="email" required autocomplete="email" maxlength="254";
                        " "
                        button type="submit" { "Subscribe" }
                    }
                }
                p { "Follow the " a href=(format!("{base}/feed.atom")) { "Atom" } " or " a href=(format!("{base}/feed.rss")) { "RSS" } " feed." }
            }
            footer { "Updated " (utc(v.now)) }
        },
    )
}

/// A short page of the page's own: what a subscription request or a link did, with a button
/// to press where the link alone must not act (a mail scanner opening it).
pub fn notice(
    name: &str,
    heading: &str,
    title: &str,
    text: &str,
    button: Option<(&str, &str)>,
) -> String {
    let base = format!("/status/{}", super::encode_segment(name));
    document(
        title,
        None,
        html! {
            h1 { (title) }
            p { (text) }
            @if let Some((action, press)) = button {
                form method="post" action=(action) { button type="submit" { (press) } }
            }
            p { a href=(base) { "Back to " (heading) } }
        },
    )
}

fn entry_title(u: &StatusUpdate) -> String {
    format!("{}: {}", u.title, u.status)
}

/// The updates as an Atom feed; `url` is the page's absolute address.
pub fn atom(url: &str, heading: &str, updates: &[StatusUpdate], now: Timestamp) -> String {
    let updated = updates.first().map_or(now, |u| u.posted_at);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\"><title>{} status</title><id>{}</id><link rel=\"alternate\" href=\"{}\"/><link rel=\"self\" href=\"{}/feed.atom\"/><updated>{updated}</updated><author><name>{}</name></author>",
        markup_text(heading),
        markup_text(url),
        markup_text(url),
        markup_text(url),
        markup_text(heading)
    );
    for u in updates {
        let _ = write!(
            out,
            "<entry><id>urn:uuid:{}</id><title>{}</title><updated>{}</updated><link href=\"{}#i-{}\"/><content type=\"text\">{}</content></entry>",
            u.id,
            markup_text(&entry_title(u)),
            u.posted_at,
            markup_text(url),
            u.incident_id,
            markup_text(&u.message)
        );
    }
    out.push_str("</feed>\n");
    out
}

/// The updates as an RSS 2.0 feed.
pub fn rss(url: &str, heading: &str, updates: &[StatusUpdate], now: Timestamp) -> String {
    let date = |at: Timestamp| at.0.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string();
    let updated = updates.first().map_or(now, |u| u.posted_at);
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<rss version=\"2.0\"><channel><title>{} status</title><link>{}</link><description>Incidents and maintenance of {}</description><lastBuildDate>{}</lastBuildDate>",
        markup_text(heading),
        markup_text(url),
        markup_text(heading),
        date(updated)
    );
    for u in updates {
        let _ = write!(
            out,
            "<item><title>{}</title><link>{}#i-{}</link><guid isPermaLink=\"false\">{}</guid><pubDate>{}</pubDate><description>{}</description></item>",
            markup_text(&entry_title(u)),
            markup_text(url),
            u.incident_id,
            u.id,
            date(u.posted_at),
            markup_text(&u.message)
        );
    }
    out.push_str("</channel></rss>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_escapes_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(
            markup_text("a<b>&\"c'\u{1}\u{7}d\n"),
            "a&lt;b&gt;&amp;&quot;c&apos;d\n"
        );
    }

    #[test]
    fn percentages_round_down_so_an_outage_never_reads_as_100() {
        assert_eq!(percent(100.0), "100 %");
        assert_eq!(percent(99.999), "99.99 %");
        assert_eq!(percent(12.345), "12.34 %");
    }
}
