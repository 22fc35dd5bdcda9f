//! The UI's problems, alerts and incidents: the pages, and acknowledging, snoozing,
//! resolving and assigning from them.

use super::*;
use crate::alerting::AlertError;
use crate::model::alert::AckRequest;
use crate::model::selector::SelectorError;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/", problems).identity().doc("ui", "Problems page", "The UI's start page, the operator's inbox (`objects:read`; a caller without it is sent to the first page of the navigation it may read, 302): objects not OK or UP and (with `alerts:read`) the open and acknowledged alerts no problem stands for (from events, and those the federation sites mirror here), unhandled first (acknowledged, in downtime, silenced, shelved, snoozed or held back by a failed dependency is handled; `handled=1` lists those too), worst first, 100 a page (`from`: how many earlier pages showed); narrowed by `q` (name, output, title, `label=value`), `severity` (`critical`, `unknown`, `warning`, `info`), `selector` (labels), `age` (`<1h`: started within, `>24h`: standing at least), sorted by `sort` (`severity`, `newest`, `oldest`, `name`), grouped by `group` (`host`, `site`, `severity`); a value it does not know is 422. Each open alert's acknowledge button, and a box to select it for acknowledging or shelving together (`select=all` ticks them all); the count of what needs a person in the title; live. An anonymous browser is redirected to `/login`.")
            .query::<ProblemsQuery>().answers_text(200, HTML).answers_empty(302).answers_text(422, HTML).page(),
        Route::get("/alerts", alerts).permission("alerts:read").doc("ui", "Alerts page", "The filters of `GET /api/v1/alerts`, `status` being one tab (`open`, `acked`, `resolved,expired`; open otherwise), the form's `severity` and `ruleId`, and `q` (words every alert shown has in its title or labels as `label=value`; a search reads at most 5000 alerts a page), `cursor`; newest first, 50 a page; `sort` (`severity`: worst first, unhandled before handled; `newest`; `oldest`; `name`: the title) and `group` (`host`: the `host` or `instance` label, `site`: the `site` label, `severity`) read the whole list (at most 5000 alerts), sort it and page it by `from`; a value it does not know is 422; `site` lists a federation site's alerts as mirrored here. Open alerts can be acknowledged one by one or selected and acknowledged together (a site's: carried out at the site); live.")
            .query::<AlertsQuery>().answers_text(200, HTML).answers_text(422, HTML).page(),
        Route::post("/alerts/ack", ack_many).permission("alerts:ack").doc("ui", "Acknowledge selected alerts", "Form: `id` repeated, `back`. Each alert is acknowledged as by `POST /api/v1/alerts/{id}:ack` (one audit entry and `ack` event each); those no longer open are left. 303 to `back`.")
            .form::<BulkForm>().answers_empty(303).page(),
        Route::post("/alerts/shelve", shelve_many).permission("alerts:ack").doc("ui", "Shelve selected alerts", "Form: `id` repeated, `duration` (`1h`, `4h`...), `back`. Each alert is shelved for that long as by `POST /api/v1/alerts/{id}:shelve` (`mode: timed`, reason \"shelved from the problems page\"; one audit entry and event each); those closed meanwhile are left. 303 to `back`.")
            .form::<BulkForm>().answers_empty(303).page(),
        Route::post("/alerts/silence", silence_many).permission("silences:write").doc("ui", "Silence selected alerts", "Form: `id` repeated, `duration` (`2h` by default), `comment` (required), `back`. For each alert a silence of alerts like it (its plain labels as the selector, its exact title as the pattern, as \"Silence alerts like this\" pre-fills), from now for that long, as by `POST /api/v1/silences`; those gone meanwhile are left. 303 to `back`; no comment is 422.")
            .form::<BulkForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/objects/downtime", downtime_many).permission("downtimes:write").doc("ui", "Downtime for the selected problems", "Form: `id` repeated (alerts: their objects), `object` repeated (objects), `duration` (`2h` by default), `comment` (required), `back`. A fixed downtime from now for that long on each object, once, as by `POST /api/v1/downtimes`. 303 to `back`; no comment is 422.")
            .form::<BulkForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/alerts/{id}", alert).permission("alerts:read").doc("ui", "Alert page", "The alert, its facts and labels, its object now (state, output, performance data) and runbook (with `objects:read`), its rule's expression (with the rule kind's read permission), its incident by title and the related alerts of its object and incident; acknowledge (with a comment and the ack options), snooze, resolve, comment; and its timeline as the paging trail (opened, acknowledged and how, escalations, each notification's fate, comments, resolved); live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/ack", ack).permission("alerts:ack").doc("ui", "Acknowledge an alert", "Form: optional `comment`, `expires_in` (`4h`; empty: the policy's `ackTimeout`), `loose` (present: not sticky), `back`. As `POST /api/v1/alerts/{id}:ack`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/snooze", snooze).permission("alerts:ack").doc("ui", "Snooze an alert", "Form: `duration` (`30m`, `1h`...), `back`. As `POST /api/v1/alerts/{id}:snooze`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/alerts/{id}/shelve", shelve).permission("alerts:ack").doc("ui", "Shelve an alert", "Form: `mode` (`timed` or `oneShot`), `duration` (timed only; `30m`, `1h`...), `reason`, `back`. As `POST /api/v1/alerts/{id}:shelve`; 303 to `back`.")
            .form::<ShelveForm>().answers_empty(303).answers_text(404, HTML).answers_text(422, HTML).page(),
        Route::post("/alerts/{id}/unshelve", unshelve).permission("alerts:ack").doc("ui", "Unshelve an alert", "Form: `back`. As `POST /api/v1/alerts/{id}:unshelve`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/resolve", resolve).permission("alerts:ack").doc("ui", "Resolve an alert", "Form: `back`. As `POST /api/v1/alerts/{id}:resolve`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).page(),
        Route::post("/alerts/{id}/incident", assign_incident).permission("incidents:write").doc("ui", "Add an alert to an incident", "Form: `incident` (an open incident's id, or `new` for an incident of its own titled as the alert). As `PUT /api/v1/incidents/{id}` with the alert added (or `POST /api/v1/incidents`); 303 to the incident.")
            .form::<IncidentForm>().answers_empty(303).answers_text(409, HTML).page(),
        Route::get("/approvals", approvals).permission("alerts:read").doc("ui", "AI actions page", "The write tool calls the tenant's tool policy made wait (`GET /api/v1/ai/actions`): waiting ones with approve (`config:write`) and deny (`alerts:ack`), and the last 50 decided.")
            .query::<DidQuery>().answers_text(200, HTML).page(),
        Route::post("/approvals/{id}/approve", approve_action).permission("config:write").doc("ui", "Approve an AI action", "Form: `back`. As `POST /api/v1/ai/actions/{id}:approve` (the call runs as the approver); 303 to `back`; a failed call is its page (502).")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).answers_text(502, HTML).page(),
        Route::post("/approvals/{id}/deny", deny_action).permission("alerts:ack").doc("ui", "Deny an AI action", "Form: `back`. As `POST /api/v1/ai/actions/{id}:deny`; 303 to `back`.")
            .form::<ActionForm>().answers_empty(303).answers_text(404, HTML).answers_text(409, HTML).page(),
        Route::get("/incidents", incidents).permission("incidents:read").doc("ui", "Incidents page", "Open incidents, or all with `all=1`; newest first, 50 a page.")
            .query::<IncidentsQuery>().answers_text(200, HTML).page(),
        Route::get("/incidents/{id}", incident).permission("incidents:read").doc("ui", "Incident page", "The incident, its alerts, its timeline (`incident_update` events), its status to change; live.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/incidents/{id}/status", incident_status).permission("incidents:write").doc("ui", "Change an incident's status", "Form: `status` (open, acked, resolved), `version` (the version the page showed: a stale one is 409, as `If-Match` on `PUT /api/v1/incidents/{id}`); 303 back.")
            .form::<IncidentForm>().answers_empty(303).answers_text(409, HTML).page(),
    ]
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ProblemsQuery {
    handled: Option<String>,
    /// How many entries the earlier pages showed; anything but a count reads as 0.
    from: Option<String>,
    did: Option<String>,
    /// Text looked for in the name, output, title and labels (`key=value`).
    q: Option<String>,
    /// `critical`, `unknown`, `warning` or `info`; comma-separated.
    severity: Option<String>,
    /// A label selector over the object's and the alert's labels.
    selector: Option<String>,
    /// `<1h` (started within), `>24h` (standing at least).
    age: Option<String>,
    /// `severity` (default), `newest`, `oldest`, `name`.
    sort: Option<String>,
    /// `host`, `site` or `severity`.
    group: Option<String>,
    /// `all`: every open alert's box ticked.
    select: Option<String>,
}

/// Entries on one page of the problems list.
const PROBLEMS_PAGE: usize = 100;

impl ProblemsQuery {
    /// The narrowing as typed, for the page.
    fn typed(&self) -> views::InboxQuery {
        let text = |v: &Option<String>| v.as_deref().unwrap_or_default().trim().to_string();
        views::InboxQuery {
            q: text(&self.q),
            severity: text(&self.severity),
            selector: text(&self.selector),
            age: text(&self.age),
            sort: text(&self.sort),
            group: text(&self.group),
            handled: self
                .handled
                .as_deref()
                .is_some_and(|h| h == "1" || h == "true"),
            select_all: self.select.as_deref() == Some("all"),
        }
    }
}

/// What `typed` narrows the inbox to, and how it groups it; a value it does not know is 422
/// naming the field.
pub(super) fn narrowing(
    typed: &views::InboxQuery,
) -> Result<(inbox::Narrowing, Option<inbox::Group>), Problem> {
    let levels = typed
        .severity
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| inbox::Level::parse(s).ok_or_else(|| not_a_choice("severity", s)))
        .collect::<Result<Vec<_>, _>>()?;
    let selector = typed
        .selector
        .parse()
        .map_err(|e: SelectorError| Problem::validation("selector", e.to_string()))?;
    let age = match typed.age.split_at_checked(1) {
        None => None,
        Some((op, d)) => {
            let d: GoDuration = d.parse().map_err(|_| not_a_choice("age", &typed.age))?;
            Some(match op {
                "<" => inbox::Age::Within(d.0),
                ">" => inbox::Age::Over(d.0),
                _ => return Err(not_a_choice("age", &typed.age)),
            })
        }
    };
    let (sort, group) = list_order(&typed.sort, &typed.group)?;
    let narrowing = inbox::Narrowing {
        text: typed.q.to_lowercase(),
        levels,
        selector,
        age,
        handled: typed.handled,
        sort: sort.unwrap_or_default(),
    };
    Ok((narrowing, group))
}

/// The caller's inbox: the problems, and (to whom may read alerts) the open and
/// acknowledged alerts with the silences holding them.
pub(super) async fn inbox_entries(st: &AppState, c: &Caller) -> Result<Vec<inbox::Entry>, Problem> {
    let mut problems = st.results.problems(&c.principal, true, 500).await?;
    // The fleet's: the sites' objects in a problem state, as they mirror here.
    problems.extend(st.sites.mirrored_problems(&c.principal).await?);
    let (alerts, silenced) = if c.principal.allows("alerts:read") {
        let filter = AlertFilter {
            statuses: vec![AlertStatus::Open, AlertStatus::Acked],
            ..Default::default()
        };
        let mut alerts = st.alerting.list(&c.principal, filter, None, 1000).await?;
        let silenced = st.alerting.silenced(&c.principal, &alerts).await?;
        // The fleet's too: the sites' open alerts, as they mirror here.
        alerts.extend(st.sites.mirrored_alerts(&c.principal, None).await?);
        (alerts, silenced)
    } else {
        Default::default()
    };
    Ok(inbox::entries(problems, alerts, &silenced))
}

async fn problems(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<ProblemsQuery>,
) -> Response {
    if !c.principal.allows("objects:read") {
        return (
            StatusCode::FOUND,
            [(
                LOCATION,
                HeaderValue::from_static(web::first_page(&c.principal)),
            )],
        )
            .into_response();
    }
    let typed = q.typed();
    let (narrowing, group) = match narrowing(&typed) {
        Ok(n) => n,
        Err(p) => return failed(p),
    };
    let entries = match inbox_entries(&st, &c).await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let now = st.clock.now();
    let unhandled = inbox::unhandled(&entries, now);
    let items = inbox::narrowed(entries, &narrowing, now);
    let title = if unhandled > 0 {
        format!("({unhandled}) Problems")
    } else {
        "Problems".to_string()
    };
    let from = q
        .from
        .as_deref()
        .and_then(|f| f.parse::<usize>().ok())
        .unwrap_or(0);
    let (groups, offsets) = offset_page(items, group, from, PROBLEMS_PAGE);
    let content = views::problems(
        &c.now(&st),
        views::InboxPage {
            groups: &groups,
            offsets,
            query: &typed,
        },
        can(&c),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Problems, title, ALERT_LIVE, q.did.as_deref()),
            content,
        ),
    )
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct AlertsQuery {
    #[serde(flatten)]
    list: AlertQuery,
    did: Option<String>,
    /// Words every alert shown has in its title or labels (`label=value`).
    q: Option<String>,
    /// `severity`, `newest`, `oldest` or `name`: the list is read whole (at most 5000
    /// alerts), sorted, and paged by `from`.
    sort: Option<String>,
    /// `host`, `site` or `severity`: as `sort`, in groups.
    group: Option<String>,
    /// How many alerts earlier pages of a sorted list showed.
    from: Option<String>,
}

/// Whether `a` has every word (lower-cased) in its title or its labels as `key=value`.
fn alert_has_words(a: &crate::model::alert::Alert, words: &[String]) -> bool {
    let mut text = a.title.to_lowercase();
    for (k, v) in &a.labels {
        text.push(' ');
        text.push_str(&format!("{k}={v}").to_lowercase());
    }
    words.iter().all(|w| text.contains(w.as_str()))
}

async fn alerts(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(mut q): ApiQuery<AlertsQuery>,
) -> Response {
    let status = match q.list.status.as_deref() {
        Some("acked") => "acked",
        Some("resolved,expired") => "resolved,expired",
        _ => "open",
    };
    q.list.status = Some(status.into());
    let text = |v: &Option<String>| v.as_deref().unwrap_or_default().trim().to_string();
    let (sort_by, group_by) = (text(&q.sort), text(&q.group));
    let (sort, group) = match list_order(&sort_by, &group_by) {
        Ok(order) => order,
        Err(p) => return failed(p),
    };
    let shown = views::AlertsFilter {
        status,
        severity: q.list.severity.as_deref().unwrap_or_default(),
        rule_id: q.list.rule_id.as_deref().unwrap_or_default(),
        object_id: q.list.object_id.as_deref().unwrap_or_default(),
        q: q.q.as_deref().unwrap_or_default(),
        sort: &sort_by,
        group: &group_by,
        site: q.list.site().unwrap_or_default(),
    };
    let words: Vec<String> =
        q.q.as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
    // Sorted or grouped, the list is read whole (up to its bound) and paged by offset.
    let ordered = sort.is_some() || group.is_some();
    let cursor = q.list.page.cursor.clone().filter(|_| !ordered);
    let req = ui_page(cursor, UI_PAGE, ALERTS);
    let (batch, want) = if ordered {
        (SORT_BATCH, SEARCHED)
    } else {
        (req.limit, req.limit)
    };
    // A filter naming an unknown severity or a malformed id matches nothing, as in the API.
    let items = match q.list.filter() {
        None => Vec::new(),
        Some(filter) => {
            let (st, c) = (&st, &c);
            let site = q.list.site();
            let read = |cursor, limit| {
                let filter = filter.clone();
                async move { crate::api::alerts::alert_page(st, c, site, filter, cursor, limit).await }
            };
            let found = search_pages(
                id_cursor(&req),
                batch,
                want,
                |a: &crate::model::alert::Alert| a.id,
                |a| alert_has_words(a, &words),
                read,
            );
            match found.await {
                Ok(items) => items,
                Err(p) => return failed(p),
            }
        }
    };
    let (groups, paging) = if ordered {
        let mut items = items;
        inbox::sort(&mut items, sort.unwrap_or_default(), st.clock.now());
        let from = q.from.as_deref().and_then(|f| f.parse().ok()).unwrap_or(0);
        let (groups, offsets) = offset_page(items, group, from, UI_PAGE);
        (groups, views::Paging::Offsets(offsets))
    } else {
        let page = Page::new(items, &req, |a| a.id.to_string());
        let paging = views::Paging::Cursor(page.next_cursor);
        (vec![(String::new(), page.items)], paging)
    };
    let title = match status {
        "open" => format!("({}) Open alerts", paging.count(&groups)),
        "acked" => "Acknowledged alerts".to_string(),
        _ => "Closed alerts".to_string(),
    };
    let content = views::alerts(&c.now(&st), &groups, &paging, &shown, can(&c));
    html(
        StatusCode::OK,
        web::page(
            frame(&c, Section::Alerts, title, ALERT_LIVE, q.did.as_deref()),
            content,
        ),
    )
}

/// The events of an alert's life (opened, acknowledged, escalated, notified, resolved), newest
/// first, from its opening on.
async fn alert_timeline(
    st: &AppState,
    c: &Caller,
    alert: &crate::model::alert::Alert,
) -> Result<Vec<crate::model::event::Event>, Problem> {
    let filter = EventFilter {
        tenant_id: c.principal.tenant,
        types: vec![
            EventType::AlertOpened,
            EventType::Ack,
            EventType::Escalation,
            EventType::Notification,
            EventType::AlertResolved,
            EventType::Comment,
        ],
        from: Some(alert.opened_at),
        ..Default::default()
    };
    let id = alert.id.to_string();
    let events = st
        .events
        .list_committed(&st.store, filter, None, 1000)
        .await?;
    Ok(events
        .into_iter()
        .filter(|e| e.payload.get("alertId").and_then(|v| v.as_str()) == Some(id.as_str()))
        .take(UI_PAGE)
        .collect())
}

/// At most this many related alerts stand on an alert's page.
const RELATED_ALERTS: usize = 10;

/// What an alert's page tells beside the alert: its object now, the object's runbook, the
/// rule's expression, its incident, the other alerts of its object and incident. Each part
/// is a courtesy of the caller's permissions and of the part still existing.
/// A site's alert as the main mirrors it, with the actions taken here that wait for the site;
/// 404 when no site mirrors it either.
async fn mirrored_alert(
    st: &AppState,
    c: &Caller,
    id: Uuid,
) -> Result<(crate::model::alert::Alert, views::AlertStory), Problem> {
    let (site, alert) = match st.sites.mirrored_alert(&c.principal, id).await {
        Err(crate::federation::SiteError::NotFound) => return Err(AlertError::NotFound.into()),
        found => found?,
    };
    let waiting = st
        .sites
        .waiting(&c.principal, &site)
        .await?
        .into_iter()
        .filter(|w| w.alert_id == id)
        .collect();
    let story = views::AlertStory {
        object: None,
        runbook: None,
        rule_match: None,
        incident: None,
        related: Vec::new(),
        site: Some((site, waiting)),
    };
    Ok((alert, story))
}

async fn alert_story(
    st: &AppState,
    c: &Caller,
    alert: &crate::model::alert::Alert,
) -> Result<views::AlertStory, Problem> {
    let (object, runbook) = match alert.object_id {
        Some(o) if c.principal.allows("objects:read") => {
            let view = st.inventory.view(&c.principal, o).await.ok();
            let runbook = match &view {
                Some(_) => st
                    .inventory
                    .effective(&c.principal, o)
                    .await
                    .ok()
                    .and_then(|e| e.spec.runbook),
                None => None,
            };
            (view, runbook)
        }
        _ => (None, None),
    };
    let rule_match = match kind_by_name("alert-rules") {
        Some(kind) if c.principal.allows(kind.read) => st
            .inventory
            .get(&c.principal, kind, alert.rule_id.clone())
            .await
            .ok()
            .and_then(|doc| {
                doc.to_json()
                    .get("match")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
        _ => None,
    };
    let incident = match alert.incident_id {
        Some(i) if c.principal.allows("incidents:read") => {
            st.alerting.incident(&c.principal, i).await.ok()
        }
        _ => None,
    };
    let mut related: Vec<crate::model::alert::Alert> = Vec::new();
    let filters = [
        alert.object_id.map(|o| AlertFilter {
            object_id: Some(o),
            ..Default::default()
        }),
        alert.incident_id.map(|i| AlertFilter {
            incident_id: Some(i),
            ..Default::default()
        }),
    ];
    for f in filters.into_iter().flatten() {
        for a in st
            .alerting
            .list(&c.principal, f, None, RELATED_ALERTS + 1)
            .await?
        {
            if a.id != alert.id && !related.iter().any(|r| r.id == a.id) {
                related.push(a);
            }
        }
    }
    related.sort_by_key(|a| std::cmp::Reverse(a.opened_at));
    related.truncate(RELATED_ALERTS);
    Ok(views::AlertStory {
        object,
        runbook,
        rule_match,
        incident,
        related,
        site: None,
    })
}

async fn alert(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let found = async {
        let id = path_id(&id)?;
        let (alert, story) = match st.alerting.get(&c.principal, id).await {
            // One a site forwarded: the site's, as it mirrors it.
            Err(AlertError::NotFound) => mirrored_alert(&st, &c, id).await?,
            found => {
                let alert = found?;
                let story = alert_story(&st, &c, &alert).await?;
                (alert, story)
            }
        };
        let events = alert_timeline(&st, &c, &alert).await?;
        let incidents = if c.principal.allows("incidents:write") {
            Some(
                st.alerting
                    .incidents(&c.principal, true, None, UI_PAGE)
                    .await?,
            )
        } else {
            None
        };
        Ok::<_, Problem>((alert, events, story, incidents))
    };
    let (alert, events, story, incidents) = match found.await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let content = views::alert(
        &c.now(&st),
        &alert,
        &story,
        incidents.as_deref(),
        &events,
        can(&c),
    );
    // Its timeline says what became of each page, as it happens.
    let live = [ALERT_LIVE, &["notification", "comment"]].concat();
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Alerts,
                alert.title.clone(),
                &live,
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

/// The bulk acknowledge form (`id` repeated, which a plain form decoder does not keep).
#[derive(Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct BulkForm {
    /// An alert id, once per selected alert.
    id: Vec<String>,
    /// An object id, once per selected problem that has no open alert.
    object: Vec<String>,
    back: Option<String>,
    /// Shelve, silence, downtime: for how long.
    duration: Option<String>,
    /// Silence, downtime: why.
    comment: Option<String>,
}

impl BulkForm {
    /// The selected alerts' ids, at most a list page's worth.
    fn ids(&self) -> Result<Vec<Uuid>, Problem> {
        self.id
            .iter()
            .take(ALERTS.max.unwrap_or(1000))
            .map(|raw| Uuid::parse_str(raw).map_err(|_| Problem::not_found()))
            .collect()
    }

    /// The selected problems' objects that have no open alert, as many.
    fn objects(&self) -> Result<Vec<Uuid>, Problem> {
        self.object
            .iter()
            .take(ALERTS.max.unwrap_or(1000))
            .map(|raw| Uuid::parse_str(raw).map_err(|_| Problem::not_found()))
            .collect()
    }

    /// Why a silence or downtime is set: required for both.
    fn reason(&self) -> Result<String, Problem> {
        self.comment
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                Problem::validation("comment", "say why: a silence or downtime needs a comment")
            })
    }

    /// From now for `duration` (default 2h).
    fn window(&self, now: Timestamp) -> Result<(Timestamp, Timestamp), Problem> {
        let raw = self.duration.as_deref().unwrap_or("2h");
        let d: GoDuration = raw
            .parse()
            .map_err(|_| Problem::validation("duration", format!("{raw:?} is not a duration")))?;
        Ok((now, now.plus(d.0)))
    }

    fn parse(body: &Bytes) -> Self {
        let mut form = BulkForm::default();
        for (k, v) in form_urlencoded::parse(body) {
            match k.as_ref() {
                "id" => form.id.push(v.into_owned()),
                "object" => form.object.push(v.into_owned()),
                "back" => form.back = Some(v.into_owned()),
                "duration" => form.duration = Some(v.into_owned()),
                "comment" => form.comment = Some(v.into_owned()),
                _ => {}
            }
        }
        form
    }
}

async fn ack(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    let comment = f
        .comment
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let expires_in = match f.expires_in.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(d) => Some(
            d.parse()
                .map_err(|_| Problem::validation("expiresIn", "expiresIn must be like 4h"))?,
        ),
    };
    let request = AckRequest {
        comment: comment.clone(),
        sticky: f.loose.is_some().then_some(false),
        expires_in,
    };
    let id = path_id(&id)?;
    match st
        .alerting
        .ack(&c.principal, &c.actor, id, request, "ui")
        .await
    {
        Err(AlertError::NotFound) => {
            crate::api::alerts::carry(&st, &c, id, "ack", comment, None).await?;
            Ok(Done::back(f.back.as_deref(), "site-ack"))
        }
        acked => {
            acked?;
            Ok(Done::back(f.back.as_deref(), "ack"))
        }
    }
}

async fn ack_many(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = BulkForm::parse(&body);
    for id in f.ids()? {
        let acked = st
            .alerting
            .ack(&c.principal, &c.actor, id, AckRequest::default(), "ui")
            .await;
        left_if_gone(acked)?;
    }
    Ok(Done::back(f.back.as_deref(), "ack-some"))
}

async fn shelve_many(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = BulkForm::parse(&body);
    for id in f.ids()? {
        let req = ShelveRequest {
            duration: Some(f.duration.clone().unwrap_or_else(|| "1h".into())),
            mode: Some("timed".into()),
            reason: Some("shelved from the problems page".into()),
        };
        left_if_gone(st.alerting.shelve(&c.principal, &c.actor, id, req).await)?;
    }
    Ok(Done::back(f.back.as_deref(), "shelve-some"))
}

/// A bulk action's answer for one alert: one gone meanwhile (closed, or acknowledged by
/// someone else) is left as it is; any other refusal stops the action there.
/// Silences each selected alert's like (its plain labels and exact title, as "Silence alerts
/// like this" does) from now for the form's duration, with its comment.
async fn silence_many(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = BulkForm::parse(&body);
    let comment = f.reason()?;
    let (start, end) = f.window(st.clock.now())?;
    for id in f.ids()? {
        let alert = match st.alerting.get(&c.principal, id).await {
            Ok(a) => a,
            Err(e) => {
                left_if_gone::<()>(Err(e))?;
                continue;
            }
        };
        let (selector, text_regex) = alert.silence_matchers();
        let body = SilenceBody {
            comment: Some(comment.clone()),
            selector: Some(selector),
            text_regex: Some(text_regex),
            starts_at: Some(start.to_string()),
            expires_at: Some(end.to_string()),
            expire_when_unmatched_for: None,
        };
        st.alerting
            .create_silence(&c.principal, &c.actor, body)
            .await?;
    }
    Ok(Done::back(f.back.as_deref(), "silence-some"))
}

/// A fixed downtime from now for the form's duration on each selected problem's object: the
/// selected alerts' objects and the selected objects.
async fn downtime_many(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = BulkForm::parse(&body);
    let comment = f.reason()?;
    let (start, end) = f.window(st.clock.now())?;
    let mut objects = f.objects()?;
    for id in f.ids()? {
        match st.alerting.get(&c.principal, id).await {
            Ok(a) => objects.extend(a.object_id),
            Err(e) => left_if_gone::<()>(Err(e))?,
        }
    }
    objects.sort();
    objects.dedup();
    for object in objects {
        let body = DowntimeBody {
            comment: Some(comment.clone()),
            object_id: Some(object.to_string()),
            kind: Some("fixed".into()),
            start: Some(start.to_string()),
            end: Some(end.to_string()),
            ..Default::default()
        };
        left_if_gone(
            st.alerting
                .create_downtime(&c.principal, &c.actor, body, None)
                .await,
        )?;
    }
    Ok(Done::back(f.back.as_deref(), "downtime-some"))
}

fn left_if_gone<T>(r: Result<T, AlertError>) -> Result<(), Problem> {
    match r.map_err(Problem::from) {
        Ok(_) => Ok(()),
        Err(p) if p.status == StatusCode::NOT_FOUND || p.status == StatusCode::CONFLICT => Ok(()),
        Err(p) => Err(p),
    }
}

async fn snooze(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    let req = SnoozeRequest {
        until: None,
        duration: Some(f.duration.unwrap_or_else(|| "1h".into())),
    };
    st.alerting
        .snooze(&c.principal, &c.actor, path_id(&id)?, req)
        .await?;
    Ok(Done::back(f.back.as_deref(), "snooze"))
}

/// The shelve form.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct ShelveForm {
    back: Option<String>,
    mode: Option<String>,
    duration: Option<String>,
    reason: Option<String>,
}

async fn shelve(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ShelveForm>(&body)?;
    // The form sends its duration whichever mode is chosen; only a timed shelf has one.
    let timed = f.mode.as_deref() != Some("oneShot");
    let req = ShelveRequest {
        duration: f.duration.filter(|_| timed),
        mode: f.mode,
        reason: f.reason,
    };
    let id = path_id(&id)?;
    match st
        .alerting
        .shelve(&c.principal, &c.actor, id, req.clone())
        .await
    {
        Err(AlertError::NotFound) => {
            crate::api::alerts::carry_shelf(&st, &c, id, req).await?;
            Ok(Done::back(f.back.as_deref(), "site-shelve"))
        }
        shelved => {
            shelved?;
            Ok(Done::back(f.back.as_deref(), "shelve"))
        }
    }
}

async fn unshelve(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    st.alerting
        .unshelve(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(Done::back(f.back.as_deref(), "unshelve"))
}

async fn resolve(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    let id = path_id(&id)?;
    match st.alerting.resolve(&c.principal, &c.actor, id).await {
        Err(AlertError::NotFound) => {
            crate::api::alerts::carry(&st, &c, id, "resolve", None, None).await?;
            Ok(Done::back(f.back.as_deref(), "site-resolve"))
        }
        resolved => {
            resolved?;
            Ok(Done::back(f.back.as_deref(), "resolve"))
        }
    }
}

/// The incident forms: which incident (`new` for one of its own), or a status and the version
/// it was shown at.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct IncidentForm {
    incident: Option<String>,
    status: Option<String>,
    version: Option<u64>,
}

async fn assign_incident(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<IncidentForm>(&body)?;
    let alert = st.alerting.get(&c.principal, path_id(&id)?).await?;
    let incident = match f.incident.as_deref() {
        Some("new") => {
            let body = IncidentBody {
                title: Some(alert.title.clone()),
                severity: Some(alert.severity.as_str().into()),
                alert_ids: Some(vec![alert.id]),
                ..Default::default()
            };
            st.alerting
                .create_incident(&c.principal, &c.actor, body)
                .await?
        }
        Some(raw) => {
            let old = st.alerting.incident(&c.principal, path_id(raw)?).await?;
            let mut ids = old.alert_ids.clone();
            if !ids.contains(&alert.id) {
                ids.push(alert.id);
            }
            let body = IncidentBody {
                alert_ids: Some(ids),
                ..Default::default()
            };
            st.alerting
                .update_incident(&c.principal, &c.actor, old.id, old.version, body)
                .await?
        }
        None => return Err(Problem::validation("incident", "choose an incident").into()),
    };
    Ok(Done::to(format!("/incidents/{}", incident.id), "assign"))
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct IncidentsQuery {
    all: Option<String>,
    cursor: Option<String>,
}

async fn incidents(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<IncidentsQuery>,
) -> Response {
    let all = q.all.as_deref() == Some("1");
    let req = ui_page(q.cursor.clone(), UI_PAGE, INCIDENTS);
    let cursor = id_cursor(&req);
    let items = match st
        .alerting
        .incidents(&c.principal, !all, cursor, req.limit)
        .await
    {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let page = Page::new(items, &req, |i| i.id.to_string());
    let content = views::incidents(&c.now(&st), &page.items, all, page.next_cursor.as_deref());
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Incidents,
                "Incidents".into(),
                &["incident_update"],
                None,
            ),
            content,
        ),
    )
}

async fn incident(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let found = async {
        let id = path_id(&id)?;
        Ok::<_, Problem>(st.alerting.incident_detail(&c.principal, id).await?)
    };
    let detail = match found.await {
        Ok(found) => found,
        Err(p) => return failed(p),
    };
    let incident = &detail.incident;
    let content = views::incident(
        &c.now(&st),
        incident,
        &detail.alerts,
        &detail.timeline,
        c.principal.allows("incidents:write"),
    );
    html(
        StatusCode::OK,
        web::page(
            frame(
                &c,
                Section::Incidents,
                incident.title.clone(),
                &["incident_update", "alert_resolved", "ack", "comment"],
                q.did.as_deref(),
            ),
            content,
        ),
    )
}

async fn incident_status(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<IncidentForm>(&body)?;
    let id = path_id(&id)?;
    let body = IncidentBody {
        status: f.status,
        ..Default::default()
    };
    st.alerting
        .update_incident(&c.principal, &c.actor, id, f.version.unwrap_or(0), body)
        .await?;
    Ok(Done::to(format!("/incidents/{id}"), "status"))
}

async fn approvals(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    match st.ai.actions(c.principal.tenant, None).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Approvals,
                    "Approvals".into(),
                    &[],
                    q.did.as_deref(),
                ),
                views::approvals(
                    &c.now(&st),
                    &items,
                    c.principal.allows("config:write"),
                    c.principal.allows("alerts:ack"),
                ),
            ),
        ),
        Err(e) => failed(Problem::from(e)),
    }
}

async fn approve_action(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    st.ai.approve(&c.principal, &c.actor, &id).await?;
    Ok(Done::back(f.back.as_deref(), "approve"))
}

async fn deny_action(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f = form::<ActionForm>(&body)?;
    st.ai.deny(&c.principal, &c.actor, &id).await?;
    Ok(Done::back(f.back.as_deref(), "deny"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_form_fields_are_all_kept() {
        let f = BulkForm::parse(&Bytes::from_static(b"id=a&id=b&back=%2Falerts&other=x"));
        assert_eq!(f.id, ["a", "b"]);
        assert_eq!(f.back.as_deref(), Some("/alerts"));
    }
}
