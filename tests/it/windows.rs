//! Recurring windows (issue 70): downtimes in Alertmanager's `time_intervals` shape, on the
//! wall clock of their location across a DST change, and named `time-intervals` that rules
//! and escalation policies mute by or page only within; driven by the clock the tests move,
//! across a kill -9.

use crate::receiver::Receiver;
use crate::support::*;
use jiff::tz::TimeZone;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A webhook channel to `/hook`, a contact `ada` paged on it, a policy `page` (`policy`'s
/// fields added) paging her at once and bob ten minutes later, and a rule `problems` (`rule`'s
/// fields added) paging every service problem through it.
fn paging(hooks: &Receiver, policy: Value, rule: Value) -> Vec<(&'static str, Value)> {
    let mut p = json!({"name": "page", "steps": [
        {"after": 0, "notify": {"contact": "ada"}},
        {"after": "10m", "notify": {"contact": "bob"}}]});
    p.as_object_mut()
        .unwrap()
        .extend(policy.as_object().unwrap().clone());
    let mut r = json!({"name": "problems", "severity": "critical", "escalationPolicy": "page",
        "match": "event.type == 'state_change' && event.state == 'CRITICAL'"});
    r.as_object_mut()
        .unwrap()
        .extend(rule.as_object().unwrap().clone());
    vec![
        (
            "/api/v1/channels",
            json!({"name": "hook", "type": "webhook", "config": {"url": hooks.url("/hook")}}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "ada", "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        ),
        (
            "/api/v1/contacts",
            json!({"name": "bob", "preferences": [{"channels": ["webhook"], "profile": "default"}]}),
        ),
        ("/api/v1/escalation-policies", p),
        ("/api/v1/alert-rules", r),
        (
            "/api/v1/hosts",
            json!({"name": "plc", "labels": {"site": "lab"}, "spec": {}}),
        ),
        (
            "/api/v1/services",
            json!({"name": "pump", "host": "plc", "spec": {}}),
        ),
    ]
}

fn title(b: &Value) -> &str {
    b["alert"]["title"].as_str().unwrap_or_default()
}

/// A server on the clock the test moves with `paging`'s documents, `policy`'s and `rule`'s
/// fields added, after those `first` makes of the time (documents the others name), and the
/// pump's first result OK.
struct Rig {
    clocked: Clocked,
    s: Server,
    token: String,
    hooks: Receiver,
    /// The server's time when the documents were made.
    now: jiff::Timestamp,
}

impl Rig {
    async fn start(
        first: impl FnOnce(jiff::Timestamp) -> Vec<(&'static str, Value)>,
        policy: Value,
        rule: Value,
    ) -> Rig {
        let clocked = Clocked::new();
        let token = clocked.token.clone();
        let s = clocked.start();
        let hooks = Receiver::start().await;
        let now = advance(&s, &token, "1s").await;
        let mut docs = first(now);
        docs.extend(paging(&hooks, policy, rule));
        create_all(&s, &token, docs).await;
        pump(&s, &token, "OK").await;
        Rig {
            clocked,
            s,
            token,
            hooks,
            now,
        }
    }
}

async fn pump(s: &Server, token: &str, state: &str) {
    let res = send(s, token, Method::POST, "/api/v1/results",
        json!({"results": [{"host": "plc", "service": "pump", "state": state, "output": format!("pump {state}")}]})).await;
    assert_eq!(res.status().as_u16(), 202);
}

/// The pump's live `downtimeDepth`.
async fn depth(s: &Server, token: &str) -> u64 {
    let listed = get(s, token, "/api/v1/services?selector=site%3Dlab").await;
    listed["items"][0]["state"]["downtimeDepth"]
        .as_u64()
        .unwrap_or(0)
}

/// Moves the server's clock on to `to`; its time after.
async fn advance_to(s: &Server, token: &str, to: jiff::Timestamp) -> jiff::Timestamp {
    let now = advance(s, token, "1s").await;
    let secs = to.duration_since(now).as_secs().max(1);
    advance(s, token, &format!("{secs}s")).await
}

fn ts(v: &Value) -> jiff::Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

/// A downtime every Saturday 22:00 to midnight in Europe/Berlin, in March and April only (the
/// last Saturdays of March and the first days of April, so its next five windows always hold
/// both sides of the change to summer time): each window is 22:00 on Berlin's wall clock, so
/// 21:00 UTC in winter and 20:00 UTC in summer. On the clock the tests move, the pump is in
/// downtime at 22:30 summer time (outside, were the window an hour off); its problem raised
/// then does not page; across a kill -9, the window's end pages it once; the policy's first
/// step was told ten minutes before the window and at its end.
#[tokio::test]
async fn a_recurring_downtime_follows_berlin_across_the_dst_change() {
    let Rig {
        clocked,
        s,
        token,
        hooks,
        now,
    } = Rig::start(|_| Vec::new(), json!({}), json!({})).await;
    let end = now + jiff::SignedDuration::from_hours(24 * 500);
    let res = send(
        &s,
        &token,
        Method::POST,
        "/api/v1/downtimes",
        json!({
        "comment": "weekly PLC backup", "selector": "site=lab",
        "start": now.to_string(), "end": end.to_string(),
        "noticeBefore": "10m", "escalationPolicy": "page",
        "timeIntervals": [{
            "times": [{"startTime": "22:00", "endTime": "24:00"}],
            "weekdays": ["saturday"],
            "daysOfMonth": ["22:-1", "1:7"],
            "months": ["march:april"],
            "location": "Europe/Berlin"}]}),
    )
    .await;
    let downtime = json(res, 201).await;
    let windows = downtime["occurrences"].as_array().unwrap().clone();
    assert_eq!(windows.len(), 5, "{downtime}");
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    let mut utc_hours = Vec::new();
    for w in &windows {
        let (start, end) = (ts(&w["start"]), ts(&w["end"]));
        let local = start.to_zoned(berlin.clone());
        assert_eq!(local.weekday(), jiff::civil::Weekday::Saturday, "{w}");
        assert_eq!((local.hour(), local.minute()), (22, 0), "{w}");
        assert_eq!(end.duration_since(start).as_secs(), 7200, "{w}");
        utc_hours.push(start.to_zoned(TimeZone::UTC).hour());
    }
    assert!(
        utc_hours.contains(&21) && utc_hours.contains(&20),
        "winter and summer windows: {utc_hours:?}"
    );
    // The first window in summer time.
    let summer = windows
        .iter()
        .find(|w| ts(&w["start"]).to_zoned(TimeZone::UTC).hour() == 20)
        .unwrap();
    let (start, end) = (ts(&summer["start"]), ts(&summer["end"]));

    advance_to(&s, &token, start - jiff::SignedDuration::from_mins(30)).await;
    assert_eq!(depth(&s, &token).await, 0, "21:30 summer time is outside");
    // Windows the clock skipped are told of once: the last one's end.
    let told_before = usize::from(windows[0] != *summer);
    if told_before == 1 {
        let missed = hooks.until_bodies("/hook", "notice", "ada", 1).await;
        assert_eq!(title(&missed[0]), "Maintenance ended: weekly PLC backup");
    }
    advance(&s, &token, "25m").await;
    let notices = hooks
        .until_bodies("/hook", "notice", "ada", told_before + 1)
        .await;
    assert_eq!(
        title(&notices[told_before]),
        format!(
            "Maintenance starts at {}: weekly PLC backup",
            summer["start"].as_str().unwrap()
        ),
        "{notices:?}"
    );
    advance(&s, &token, "35m").await;
    assert_eq!(depth(&s, &token).await, 1, "22:30 summer time is inside");
    pump(&s, &token, "CRITICAL").await;
    polled(&s, &token, "/api/v1/alerts?status=open", |v| {
        (v["items"].as_array()?.len() == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        hooks.bodies("/hook", "alert", "ada").is_empty(),
        "held in the window"
    );

    s.crash();
    let s = clocked.start();
    advance_to(&s, &token, end + jiff::SignedDuration::from_secs(1)).await;
    assert_eq!(depth(&s, &token).await, 0, "00:00 Sunday ends it");
    let pages = hooks.until_bodies("/hook", "alert", "ada", 1).await;
    assert_eq!(
        pages[0]["alert"]["title"], "plc/pump is CRITICAL",
        "{pages:?}"
    );
    let notices = hooks
        .until_bodies("/hook", "notice", "ada", told_before + 2)
        .await;
    assert_eq!(
        title(&notices[told_before + 1]),
        "Maintenance ended: weekly PLC backup"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hooks.bodies("/hook", "alert", "ada").len(), 1, "paged once");
    let listed = get(&s, &token, "/api/v1/downtimes").await;
    let next = ts(&listed["items"][0]["occurrences"][0]["start"]);
    assert!(next > end, "the next window is listed: {listed}");
}

/// The UTC date of `t` as Alertmanager's `daysOfMonth`, `months` and `years` of one whole day.
fn day_of(t: jiff::Timestamp) -> Value {
    let d = t.to_zoned(TimeZone::UTC).date();
    json!({"daysOfMonth": [d.day().to_string()], "months": [d.month().to_string()],
        "years": [d.year().to_string()]})
}

/// Midnight UTC after `t`.
fn next_midnight(t: jiff::Timestamp) -> jiff::Timestamp {
    let d = t.to_zoned(TimeZone::UTC).date().tomorrow().unwrap();
    d.to_zoned(TimeZone::UTC).unwrap().timestamp()
}

/// Waits for the `escalation` events that say a step waits; returns them.
async fn until_held(s: &Server, token: &str) -> Vec<Value> {
    polled(s, token, "/api/v1/events?types=escalation&limit=100", |v| {
        let held: Vec<Value> = v["items"]
            .as_array()?
            .iter()
            .filter(|e| e["payload"]["held"].is_string())
            .cloned()
            .collect();
        (!held.is_empty()).then_some(held)
    })
    .await
}

/// Reads `path` until `pick` finds what it looks for in the answer; returns that.
async fn polled<T>(s: &Server, token: &str, path: &str, pick: impl Fn(&Value) -> Option<T>) -> T {
    read_until(s, token, path, None, pick).await
}

/// Reads `path` until `pick` finds what it looks for, moving the server's clock by `step`
/// before each read when one is given.
async fn read_until<T>(
    s: &Server,
    token: &str,
    path: &str,
    step: Option<&str>,
    pick: impl Fn(&Value) -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(step) = step {
            advance(s, token, step).await;
        }
        let v = get(s, token, path).await;
        if let Some(found) = pick(&v) {
            return found;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{path}: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A policy that pages only within `tomorrow` (Alertmanager's `active_time_intervals`): an
/// alert today waits, its hold in the timeline; at midnight ada is paged, and bob ten minutes
/// after that (the chain counted from when paging began, not all at once).
#[tokio::test]
async fn a_policy_pages_only_within_its_active_interval() {
    let tomorrow = |now| {
        let day = day_of(next_midnight(now));
        vec![(
            "/api/v1/time-intervals",
            json!({"name": "tomorrow", "timeIntervals": [day]}),
        )]
    };
    let Rig {
        clocked,
        s,
        token,
        hooks,
        now,
    } = Rig::start(
        tomorrow,
        json!({"activeTimeIntervals": ["tomorrow"]}),
        json!({}),
    )
    .await;
    let tomorrow = next_midnight(now);
    pump(&s, &token, "CRITICAL").await;
    let held = until_held(&s, &token).await;
    assert_eq!(held[0]["payload"]["held"], "inactive", "{held:?}");
    assert_eq!(held[0]["payload"]["timeIntervals"], json!(["tomorrow"]));
    assert_eq!(ts(&held[0]["payload"]["until"]), tomorrow);
    assert!(hooks.bodies("/hook", "alert", "ada").is_empty());

    s.crash();
    let s = clocked.start();
    advance_to(&s, &token, tomorrow + jiff::SignedDuration::from_secs(1)).await;
    hooks.until_bodies("/hook", "alert", "ada", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        hooks.bodies("/hook", "alert", "bob").is_empty(),
        "bob only after 10m"
    );
    advance(&s, &token, "10m").await;
    hooks.until_bodies("/hook", "alert", "bob", 1).await;
}

/// A rule muted `today` (Alertmanager's `mute_time_intervals`): its alert opens and waits;
/// paged at midnight. An interval with a wrong field and a flexible recurring downtime are
/// refused, naming the field.
#[tokio::test]
async fn a_rule_muted_by_an_interval_pages_when_it_ends_and_wrong_intervals_are_refused() {
    let today = |now| {
        vec![(
            "/api/v1/time-intervals",
            json!({"name": "today", "timeIntervals": [day_of(now)]}),
        )]
    };
    let Rig {
        s,
        token,
        hooks,
        now,
        clocked: _dir,
    } = Rig::start(today, json!({}), json!({"muteTimeIntervals": ["today"]})).await;
    pump(&s, &token, "CRITICAL").await;
    let held = until_held(&s, &token).await;
    assert_eq!(held[0]["payload"]["held"], "mute");
    assert_eq!(ts(&held[0]["payload"]["until"]), next_midnight(now));
    advance_to(
        &s,
        &token,
        next_midnight(now) + jiff::SignedDuration::from_secs(1),
    )
    .await;
    hooks.until_bodies("/hook", "alert", "ada", 1).await;

    for (body, field) in [
        (
            json!({"name": "bad", "timeIntervals": [{"weekdays": ["friday:monday"]}]}),
            "timeIntervals",
        ),
        (
            json!({"name": "bad", "timeIntervals": [{"times": [{"startTime": "22:00", "endTime": "06:00"}]}]}),
            "timeIntervals",
        ),
        (
            json!({"name": "bad", "timeIntervals": [{"location": "Mars/Olympus"}]}),
            "timeIntervals",
        ),
        (json!({"name": "bad", "timeIntervals": []}), "timeIntervals"),
    ] {
        let res = send(&s, &token, Method::POST, "/api/v1/time-intervals", body).await;
        assert_problem(res, 422, &format!("svc:validation/{field}")).await;
    }
    let res = send(
        &s,
        &token,
        Method::POST,
        "/api/v1/downtimes",
        json!({
        "comment": "x", "selector": "site=lab", "type": "flexible", "duration": "1h",
        "start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(48)).to_string(),
        "timeIntervals": [{"weekdays": ["saturday"]}]}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/timeIntervals").await;
}

/// An iCalendar feed as a test server would publish it: one event `hours` from `now` for an
/// hour, repeated daily three times.
fn feed(now: jiff::Timestamp, hours: i64) -> String {
    let start = now + jiff::SignedDuration::from_hours(hours);
    let end = start + jiff::SignedDuration::from_hours(1);
    let ics = |t: jiff::Timestamp| t.strftime("%Y%m%dT%H%M%SZ").to_string();
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//svc tests//EN\r\nBEGIN:VEVENT\r\nUID:w@test\r\n\
SUMMARY:PLC firmware\r\nDTSTART:{}\r\nDTEND:{}\r\nRRULE:FREQ=DAILY;COUNT=3\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        ics(start),
        ics(end)
    )
}

/// The downtime's answer once `done` holds for it.
async fn downtime_until(s: &Server, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    polled(s, token, "/api/v1/downtimes", |v| {
        Some(v["items"][0].clone()).filter(|d| done(d))
    })
    .await
}

/// A downtime whose windows are an iCalendar feed's events: the main reads the feed (served
/// by the test) at once, lists the next windows and holds the pump's problem inside one; a
/// feed that changes moves the windows at the next read (15 minutes on); a feed that fails
/// keeps the windows it gave and says why. Only whom may write the configuration may name a
/// feed, and only an http or https one.
#[tokio::test]
async fn a_calendar_feed_becomes_a_downtimes_windows() {
    let Rig {
        clocked: _dir,
        s,
        token,
        hooks,
        now,
    } = Rig::start(|_| Vec::new(), json!({}), json!({})).await;
    hooks.reply(
        "/maintenance.ics",
        &[("content-type", "text/calendar")],
        feed(now, 2).as_bytes(),
    );
    let res = send(&s, &token, Method::POST, "/api/v1/downtimes", json!({
        "comment": "vendor maintenance", "selector": "site=lab",
        "start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(24 * 10)).to_string(),
        "calendarUrl": hooks.url("/maintenance.ics")})).await;
    json(res, 201).await;
    let d = downtime_until(&s, &token, |d| {
        d["occurrences"].as_array().is_some_and(|o| o.len() == 3)
    })
    .await;
    let first = ts(&d["occurrences"][0]["start"]);
    // Feeds name whole seconds.
    assert!(
        (7199..=7200).contains(&first.duration_since(now).as_secs()),
        "{d}"
    );
    assert_eq!(d["calendar"]["windows"].as_array().unwrap().len(), 3);

    advance(&s, &token, "2h30m").await;
    assert_eq!(depth(&s, &token).await, 1, "inside the feed's window");
    advance(&s, &token, "1h").await;
    assert_eq!(depth(&s, &token).await, 0, "after it");

    // The feed moves its events; the next read, 15 minutes on, takes them.
    let moved = advance(&s, &token, "1s").await;
    hooks.reply(
        "/maintenance.ics",
        &[("content-type", "text/calendar")],
        feed(moved, 5).as_bytes(),
    );
    advance(&s, &token, "15m").await;
    let d = downtime_until(&s, &token, |d| {
        (5 * 3600 - 1..=5 * 3600).contains(
            &ts(&d["occurrences"][0]["start"])
                .duration_since(moved)
                .as_secs(),
        )
    })
    .await;
    assert!(d["calendar"]["error"].is_null(), "{d}");
    // A feed that fails keeps the windows and says why.
    hooks.answer("/maintenance.ics", 503);
    hooks.reply("/maintenance.ics", &[], b"down");
    advance(&s, &token, "15m").await;
    let d = downtime_until(&s, &token, |d| d["calendar"]["error"].is_string()).await;
    assert_eq!(d["calendar"]["error"], "the feed answered 503");
    assert_eq!(d["occurrences"].as_array().unwrap().len(), 3, "{d}");
    let events = get(&s, &token, "/api/v1/events?types=downtime&limit=20").await;
    let reads = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["payload"]["action"] == "calendar")
        .count();
    assert_eq!(
        reads, 3,
        "one event per read that changed something: {events}"
    );

    let (operator, _) = mint(&s, &token, json!({"name": "ops", "roles": ["operator"]})).await;
    let res = send(
        &s,
        &operator,
        Method::POST,
        "/api/v1/downtimes",
        json!({
        "comment": "x", "selector": "site=lab", "start": now.to_string(),
        "end": (now + jiff::SignedDuration::from_hours(48)).to_string(),
        "calendarUrl": hooks.url("/maintenance.ics")}),
    )
    .await;
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let res = send(
        &s,
        &token,
        Method::POST,
        "/api/v1/downtimes",
        json!({
        "comment": "x", "selector": "site=lab", "start": now.to_string(),
        "end": (now + jiff::SignedDuration::from_hours(48)).to_string(),
        "calendarUrl": "file:///etc/passwd"}),
    )
    .await;
    assert_problem(res, 422, "svc:validation/calendarUrl").await;
}

/// What site `north` runs: `paging`'s channel, contact, policy, rule and pump, as a bundle.
fn site_bundle(hooks: &Receiver) -> String {
    format!(
        "kind: channels\nname: hook\nbody: {{type: webhook, config: {{url: '{}'}}}}\n---\n\
kind: contacts\nname: ada\nbody: {{preferences: [{{channels: [webhook], profile: default}}]}}\n---\n\
kind: escalation-policies\nname: page\nbody: {{steps: [{{after: 0, notify: {{contact: ada}}}}]}}\n---\n\
kind: alert-rules\nname: problems\nbody: {{severity: critical, escalationPolicy: page, match: \"event.type == 'state_change' && event.state == 'CRITICAL'\"}}\n---\n\
kind: host\nname: plc\nbody: {{labels: {{site: lab}}, spec: {{}}}}\n---\n\
kind: service\nhost: plc\nname: pump\nbody: {{spec: {{}}}}\n",
        hooks.url("/hook")
    )
}

/// Moves the edge's clock a second at a time (its pulls and heartbeats are due each second
/// of it) until `pick` finds what it looks for at `path`.
async fn synced<T>(s: &Server, token: &str, path: &str, pick: impl Fn(&Value) -> Option<T>) -> T {
    read_until(s, token, path, Some("1s"), pick).await
}

/// A main's calendar downtime shipped to its site (issue 70): the main reads the feed (served
/// by the test) and serves its windows in the bundle site `north` pulls; the site keeps them
/// as its own, unchangeable there, and then loses its uplink (the main killed) and is itself
/// killed: inside the window its pump's problem is held, and at the window's end it pages
/// once, on the site's clock (which the test moves). A downtime the main ends leaves the site.
#[tokio::test]
async fn a_calendar_downtime_travels_to_a_site_that_then_loses_its_uplink() {
    use crate::federation::{Trust, create_site, edge_config, fingerprint};
    let main = Admin::start_with(Opts {
        tls: true,
        ..Default::default()
    });
    let (m, admin) = (&main.s, main.token.as_str());
    let hooks = Receiver::start().await;
    create_site(
        m,
        admin,
        json!({"name": "north", "bundle": site_bundle(&hooks)}),
    )
    .await;
    create_site(m, admin, json!({"name": "south"})).await;
    let (site_token, _) = mint(
        m,
        admin,
        json!({"name": "north-edge", "scopes": ["sites:connect"], "site": "north"}),
    )
    .await;
    let served = |token: String| async move {
        let res = call(m, &token, Method::GET, "/api/v1/sites/north:pull")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    let before = served(site_token.clone()).await;
    assert_eq!(before, site_bundle(&hooks), "served as written");

    let now = jiff::Timestamp::now();
    hooks.reply(
        "/maintenance.ics",
        &[("content-type", "text/calendar")],
        feed(now, 2).as_bytes(),
    );
    let terms = |sites: Value| {
        json!({"comment": "vendor maintenance", "selector": "site=lab",
            "start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(24 * 10)).to_string(),
            "calendarUrl": hooks.url("/maintenance.ics"), "sites": sites})
    };
    // Shipped by selector to sites that exist, by whom may change what they run.
    let res = send(
        m,
        admin,
        Method::POST,
        "/api/v1/downtimes",
        terms(json!(["nowhere"])),
    )
    .await;
    assert_problem(res, 422, "svc:validation/sites").await;
    let (operator, _) = mint(m, admin, json!({"name": "ops", "roles": ["operator"]})).await;
    let mut by_operator = terms(json!(["north"]));
    by_operator.as_object_mut().unwrap().remove("calendarUrl");
    let res = send(m, &operator, Method::POST, "/api/v1/downtimes", by_operator).await;
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let host = json(
        send(
            m,
            admin,
            Method::POST,
            "/api/v1/hosts",
            json!({"name": "main-host", "spec": {}}),
        )
        .await,
        201,
    )
    .await;
    let mut by_object = terms(json!(["north"]));
    by_object["objectId"] = host["id"].clone();
    by_object.as_object_mut().unwrap().remove("selector");
    let res = send(m, admin, Method::POST, "/api/v1/downtimes", by_object).await;
    assert_problem(res, 422, "svc:validation/sites").await;

    let created = json(
        send(
            m,
            admin,
            Method::POST,
            "/api/v1/downtimes",
            terms(json!(["north"])),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["sites"], json!(["north"]));
    let id = created["id"].as_str().unwrap().to_string();
    polled(m, admin, "/api/v1/downtimes", |v| {
        (v["items"][0]["occurrences"].as_array()?.len() == 3).then_some(())
    })
    .await;
    let text = served(site_token.clone()).await;
    assert!(
        text.starts_with("kind: channels")
            && text.contains(&format!("kind: downtimes\nname: {id}")),
        "{text}"
    );

    // The site pulls it in its bundle and keeps it as its own, on its own clock.
    let clocked = Clocked::new();
    let dir = tempfile::tempdir().unwrap();
    let config = edge_config(
        dir.path(),
        &m.base,
        &site_token,
        Trust::Pinned(&fingerprint(&m.data)),
    );
    let site_opts = || Opts {
        args: vec!["--config".into(), config.clone()],
        ..Default::default()
    };
    let e = clocked.start_with(site_opts());
    let local = clocked.token.clone();
    let shipped = synced(&e, &local, "/api/v1/downtimes", |v| {
        let d = &v["items"][0];
        (d["occurrences"].as_array().is_some_and(|o| o.len() == 3)).then(|| d.clone())
    })
    .await;
    assert_eq!(shipped["id"], id.as_str());
    assert_eq!(shipped["fromMain"], true, "{shipped}");
    assert!(shipped["calendar"]["readAt"].is_string(), "{shipped}");
    let first = shipped["occurrences"][0].clone();
    let events = get(&e, &local, "/api/v1/events?types=downtime").await;
    assert_eq!(events["items"][0]["payload"]["fromMain"], true, "{events}");
    // It is the main's to change.
    let res = call(&e, &local, Method::PUT, &format!("/api/v1/downtimes/{id}"))
        .header("If-Match", "1")
        .json(&json!({"comment": "mine", "selector": "site=lab",
            "start": now.to_string(), "end": (now + jiff::SignedDuration::from_hours(1)).to_string()}))
        .send()
        .await
        .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    let res = call(
        &e,
        &local,
        Method::DELETE,
        &format!("/api/v1/downtimes/{id}"),
    )
    .send()
    .await
    .unwrap();
    assert_problem(res, 403, "svc:auth/forbidden").await;
    // Its heartbeat (each second of its clock) tells the main it runs the served bundle.
    let started = Instant::now();
    loop {
        advance(&e, &local, "1s").await;
        let overview = get(m, admin, "/api/v1/sites:overview").await;
        let north = overview["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "north")
            .cloned()
            .unwrap();
        if north["bundleCurrent"] == true {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{north}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A downtime the main ends leaves the site.
    let mut firmware = terms(json!(["north"]));
    firmware.as_object_mut().unwrap().remove("calendarUrl");
    firmware["comment"] = json!("firmware");
    let firmware = json(
        send(m, admin, Method::POST, "/api/v1/downtimes", firmware).await,
        201,
    )
    .await;
    let other = firmware["id"].as_str().unwrap().to_string();
    let in_effect = |v: &Value, id: &str| {
        v["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|d| d["id"] == id && d["fromMain"] == true))
    };
    synced(&e, &local, "/api/v1/downtimes?active=true", |v| {
        in_effect(v, &other).then_some(())
    })
    .await;
    let res = call(
        m,
        admin,
        Method::DELETE,
        &format!("/api/v1/downtimes/{other}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 204);
    synced(&e, &local, "/api/v1/downtimes?active=true", |v| {
        (!in_effect(v, &other)).then_some(())
    })
    .await;
    let withdrawn = get(&e, &local, "/api/v1/events?types=downtime").await;
    assert_eq!(
        withdrawn["items"][0]["payload"]["action"], "withdrawn",
        "{withdrawn}"
    );
    assert_eq!(
        withdrawn["items"][0]["payload"]["downtimeId"],
        other.as_str()
    );
    pump(&e, &local, "OK").await;

    // The uplink is lost; the site, killed too, keeps the windows.
    let Admin { s: main_server, .. } = main;
    main_server.crash();
    e.crash();
    let e = clocked.start_with(site_opts());
    advance_to(
        &e,
        &local,
        ts(&first["start"]) + jiff::SignedDuration::from_mins(30),
    )
    .await;
    assert_eq!(depth(&e, &local).await, 1, "inside the shipped window");
    pump(&e, &local, "CRITICAL").await;
    polled(&e, &local, "/api/v1/alerts?status=open", |v| {
        (v["items"].as_array()?.len() == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        hooks.bodies("/hook", "alert", "ada").is_empty(),
        "held in the window"
    );
    polled(&e, &local, "/api/v1/site:status", |v| {
        v["lastError"]
            .as_str()?
            .contains("unreachable")
            .then_some(())
    })
    .await;
    advance_to(
        &e,
        &local,
        ts(&first["end"]) + jiff::SignedDuration::from_secs(1),
    )
    .await;
    assert_eq!(depth(&e, &local).await, 0, "after the window");
    let pages = hooks.until_bodies("/hook", "alert", "ada", 1).await;
    assert_eq!(
        pages[0]["alert"]["title"], "plc/pump is CRITICAL",
        "{pages:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hooks.bodies("/hook", "alert", "ada").len(), 1, "paged once");
}
