//! The UI's people: on call and taking a shift over, one's account and its look, users,
//! API tokens and the audit log.

use super::*;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get("/oncall", on_call).permission("oncall:read").doc("ui", "On-call page", "The caller's shifts of the next 7 days (theirs: the contact whose `userId` is the caller), who is on call now in each schedule and until when, with call and e-mail links, and each schedule's next 7 days, overrides marked.")
            .answers_text(200, HTML).page(),
        Route::get("/oncall/{schedule}/calendar", schedule_calendar).permission("oncall:read").doc("ui", "A schedule's calendar", "Who is on call in the schedule, day by day for the next 14 days, overrides marked, with absolute times in the caller's time zone (their `timeZone` preference, else UTC). An unknown schedule is 404.")
            .answers_text(200, HTML).answers_text(404, HTML).page(),
        Route::post("/oncall/{schedule}/take-over", take_over).permission("oncall:write").doc("ui", "Take a shift over", "Form: `start`, `end` (the shift's). An override of the schedule for the caller's contact from the shift's start (now, if it has begun) to its end, as `POST /api/v1/schedules/{name}/overrides`; 303 to `/oncall`; 422 when no contact names the caller.")
            .form::<TakeOverForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/audit", audit).permission("admin:audit").doc("ui", "Audit page", "The tenant's audit entries, newest first, 50 a page.")
            .query::<CursorQuery>().answers_text(200, HTML).page(),
        Route::post("/account/password", change_password).identity().doc("ui", "Change the password", "Form: `oldPassword`, `newPassword`. As `POST /api/v1/users/me:change-password` (a signed-in local user only); 303 to `/account`; a wrong current password or a weak new one shows the page again with the reason.")
            .form::<ChangePassword>().answers_empty(303).answers_text(403, HTML).page(),
        Route::get("/users", users).permission("admin:users").doc("ui", "Users page", "The tenant's users: roles, local or single sign-on, last seen; enable, disable (not oneself), add.")
            .answers_text(200, HTML).page(),
        Route::post("/users", create_user).permission("admin:users").doc("ui", "Add a user", "Form: `name`, `email`, `role`, optional `password`. As `POST /api/v1/users`; 303 to `/users`; a refusal shows the page again with the reason.")
            .form::<AccountsForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::post("/users/{id}/disable", disable_user).permission("admin:users").doc("ui", "Disable a user", "Form: `confirm` (`on`: the box that asks first; without it 422). As `PUT /api/v1/users/{id}` with `disabled: true` (the last administrator stays); 303 to `/users`.")
            .form::<DisableForm>().answers_empty(303).answers_text(409, HTML).answers_text(422, HTML).page(),
        Route::post("/users/{id}/enable", enable_user).permission("admin:users").doc("ui", "Enable a user", "As `PUT /api/v1/users/{id}` with `disabled: false`; 303 to `/users`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::get("/tokens", tokens).permission("admin:tokens").doc("ui", "API tokens page", "The tenant's API tokens without their secrets: roles, scopes, last use, expiry; rotate, revoke, mint.")
            .answers_text(200, HTML).page(),
        Route::post("/tokens", mint_token).permission("admin:tokens").doc("ui", "Mint an API token", "Form: `name`, `role`, optional `days` to expiry. As `POST /api/v1/api-tokens`; 200 with a page that shows the secret once (`Cache-Control: no-store`).")
            .form::<AccountsForm>().answers_text(200, HTML).answers_text(422, HTML).page(),
        Route::post("/tokens/{id}/rotate", rotate_token).permission("admin:tokens").doc("ui", "Rotate an API token", "As `POST /api/v1/api-tokens/{id}:rotate`; 200 with a page that shows the new secret once (`Cache-Control: no-store`).")
            .form::<ActionForm>().answers_text(200, HTML).page(),
        Route::post("/tokens/{id}/revoke", revoke_token).permission("admin:tokens").doc("ui", "Revoke an API token", "As `DELETE /api/v1/api-tokens/{id}`; 303 to `/tokens`.")
            .form::<ActionForm>().answers_empty(303).page(),
        Route::post("/account/preferences", set_preferences).identity().doc("ui", "Set the look of one's pages", "Form: `theme` (`light`, `dark`, or empty: the device's), `live` (`on`, `off`), `timeZone` (an IANA zone absolute times are shown in; empty: UTC; an unknown one shows the page again with the reason). Kept in the caller's preferences (`extra.theme`, `extra.live`, `extra.timeZone`, as `PUT /api/v1/users/me/preferences`); 303 to `/account`.")
            .form::<LookForm>().answers_empty(303).page(),
        Route::post("/account/branding", set_branding).permission("config:write").doc("ui", "Set the instance's branding", "A `multipart/form-data` form: `mode` (`light`, `dark`, or empty: each device's; a user's own theme wins over it), `name`, `accent` (`on` to colour the header) with `accentColor`, a `logo` file (PNG, JPEG or WebP, at most 64 KiB; none chosen keeps the current one), `removeLogo` (`on`). As `PUT /api/v1/branding` (the default tenant only); 303 to `/account`.")
            .multipart::<BrandingForm>().answers_empty(303).answers_text(422, HTML).page(),
        Route::get("/me", me).identity().doc("ui", "Me", "What is the caller's: the alerts they acknowledged that are still acknowledged (with `alerts:read`), their shifts of the next 7 days (with `oncall:read`, through the contact linked to their user), the open incidents they opened (with `incidents:read`); and every section they may read, their account and signing out. The bottom bar of a phone's screen (Problems, Alerts, On call, Me) leads here; live.")
            .answers_text(200, HTML).page(),
        Route::get("/account", account).identity().doc("ui", "Account page", "Who is signed in: name, tenant and permissions.")
            .answers_text(200, HTML).page(),
    ]
}

/// Who is on call now in each schedule, and each schedule's shifts of the next 7 days.
async fn week_ahead(
    st: &AppState,
    c: &Caller,
) -> Result<(Vec<crate::model::notify::OnCallNow>, Vec<views::Upcoming>), Problem> {
    let now_on = st.notify.on_call_now(&c.principal).await?;
    let week = st
        .clock
        .now()
        .plus(std::time::Duration::from_secs(7 * 86_400))
        .to_string();
    let mut upcoming = Vec::new();
    for s in &now_on {
        let shifts = st
            .notify
            .timeline(&c.principal, &s.schedule, None, Some(&week))
            .await?;
        upcoming.push(views::Upcoming {
            schedule: s.schedule.clone(),
            shifts,
        });
    }
    Ok((now_on, upcoming))
}

/// At most this many of the caller's alerts and incidents are read for their page.
const MINE_READ: usize = 500;

/// `/me`: what is the caller's, and the way to every section (a phone's bottom bar leads here).
async fn me(State(st): State<AppState>, c: Visitor) -> Response {
    let found = async {
        let p = &c.principal;
        let alerts = if p.allows("alerts:read") {
            let filter = AlertFilter {
                statuses: vec![AlertStatus::Acked],
                ..Default::default()
            };
            let acked = st.alerting.list(p, filter, None, MINE_READ).await?;
            acked
                .into_iter()
                .filter(|a| match (a.ack.as_ref().and_then(|t| t.user_id), p.user) {
                    (Some(by), Some(me)) => by == me,
                    _ => a.acked_by.as_deref() == Some(p.name.as_str()),
                })
                .collect()
        } else {
            Vec::new()
        };
        let shifts = if p.allows("oncall:read") {
            let (_, upcoming) = week_ahead(&st, &c).await?;
            match st.notify.own_contact(p).await? {
                Some((name, _)) => upcoming
                    .into_iter()
                    .flat_map(|u| {
                        let schedule = u.schedule;
                        u.shifts
                            .into_iter()
                            .filter(|s| s.contact == name)
                            .map(move |s| (schedule.clone(), s))
                            .collect::<Vec<_>>()
                    })
                    .collect(),
                None => Vec::new(),
            }
        } else {
            Vec::new()
        };
        let incidents = if p.allows("incidents:read") {
            st.alerting
                .incidents(p, true, None, MINE_READ)
                .await?
                .into_iter()
                .filter(|i| i.created_by == p.name)
                .collect()
        } else {
            Vec::new()
        };
        Ok::<_, Problem>(views::MinePage {
            alerts,
            shifts,
            incidents,
            sections: web::sections(p),
            reads_alerts: p.allows("alerts:read"),
            reads_on_call: p.allows("oncall:read"),
            reads_incidents: p.allows("incidents:read"),
        })
    };
    match found.await {
        Ok(mine) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Me,
                    "Me".into(),
                    &["ack", "alert_resolved", "incident_update"],
                    None,
                ),
                views::mine(&c.now(&st), &mine),
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn on_call(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    let found = async {
        let (now_on, upcoming) = week_ahead(&st, &c).await?;
        let me = st.notify.own_contact(&c.principal).await?;
        Ok::<_, Problem>((now_on, upcoming, me))
    };
    match found.await {
        Ok((now_on, upcoming, me)) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::OnCall,
                    "On call now".into(),
                    &[],
                    q.did.as_deref(),
                ),
                views::on_call(
                    &c.now(&st),
                    &now_on,
                    &upcoming,
                    me.as_ref().map(|(name, _)| name.as_str()),
                    me.as_ref().and_then(|(_, c)| c.handoff_notices.as_ref()),
                    c.principal.allows("oncall:write"),
                ),
            ),
        ),
        Err(p) => failed(p),
    }
}

/// Days the schedule calendar shows.
const CALENDAR_DAYS: i16 = 14;

async fn schedule_calendar(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(schedule): ApiPath<String>,
) -> Response {
    let now = st.clock.now();
    let to = now
        .plus(std::time::Duration::from_secs(
            u64::try_from(CALENDAR_DAYS).unwrap_or(14) * 86_400 + 86_400,
        ))
        .to_string();
    let from = now
        .minus(std::time::Duration::from_secs(86_400))
        .to_string();
    match st
        .notify
        .timeline(&c.principal, &schedule, Some(&from), Some(&to))
        .await
    {
        Ok(shifts) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::OnCall,
                    format!("Calendar of {schedule}"),
                    &[],
                    None,
                ),
                views::schedule_calendar(&c.now(&st), &schedule, &shifts, CALENDAR_DAYS),
            ),
        ),
        Err(e) => failed(Problem::from(e)),
    }
}

/// The take-over form: the shift's times as the page showed them.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct TakeOverForm {
    start: Option<String>,
    end: Option<String>,
}

/// An override putting the caller's contact on the shift, from now if it has begun.
async fn take_over(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(schedule): ApiPath<String>,
    body: Bytes,
) -> Acted {
    let f: TakeOverForm = form(&body)?;
    let (me, _) = st.notify.own_contact(&c.principal).await?.ok_or_else(|| {
        Problem::validation(
            "override",
            "no contact names you (its userId): ask an editor to add one",
        )
    })?;
    let now = st.clock.now();
    let start = match f.start.as_deref().and_then(|s| s.parse::<Timestamp>().ok()) {
        Some(s) if s > now => s,
        _ => now,
    };
    let body = OverrideBody {
        schedule: None,
        contact_id: Some(me),
        start: Some(start.to_string()),
        end: f.end,
        reason: Some(format!("taken over by {} in the UI", c.principal.name)),
    };
    st.notify
        .create_override(&c.principal, &c.actor, &schedule, body)
        .await?;
    Ok(Done::to("/oncall", "takeover"))
}

/// The account page's content: who, the look, the password form.
async fn account_content(st: &AppState, c: &Visitor) -> Result<Markup, Problem> {
    let p = &c.principal;
    let prefs = st.auth.preferences(p, "me").await?;
    let branding = if p.allows("config:write") && p.instance {
        Some(st.auth.branding().await?)
    } else {
        None
    };
    let looks = views::Looks {
        theme: prefs.extra.get(THEME).map_or("", String::as_str),
        live: c.live,
        time_zone: prefs.extra.get(TIME_ZONE).map_or("", String::as_str),
        branding: branding.as_ref(),
    };
    Ok(views::account(
        &p.name,
        p.tenant,
        &p.permissions.to_vec(),
        c.actor.actor_type == ActorType::User,
        &looks,
    ))
}

async fn account(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    match account_content(&st, &c).await {
        Ok(content) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Account,
                    "Account".into(),
                    &[],
                    q.did.as_deref(),
                ),
                content,
            ),
        ),
        Err(p) => failed(p),
    }
}

async fn change_password(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let req: ChangePassword = form(&body)?;
        st.auth.change_password(&c.principal, &c.actor, req).await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/account", "password").into_response(),
        Err(p) => match account_content(&st, &c).await {
            Ok(form) => form_again(&c, Section::Account, "Account", p, form),
            Err(_) => failed(p),
        },
    }
}

/// The look forms: a user's theme and live updates, the instance's mode.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct LookForm {
    /// `light`, `dark`, or empty: as the device is set.
    theme: Option<String>,
    /// `on` or `off`.
    live: Option<String>,
    /// An IANA time zone for absolute times; empty: UTC.
    #[serde(rename = "timeZone")]
    time_zone: Option<String>,
}

/// A scheme as stored: `light`, `dark`, or `system` for the device's.
fn scheme(raw: Option<&str>) -> &'static str {
    match raw.and_then(Theme::named) {
        Some(Theme::Light) => "light",
        Some(Theme::Dark) => "dark",
        None => "system",
    }
}

async fn set_preferences(State(st): State<AppState>, c: Visitor, body: Bytes) -> Acted {
    let f = form::<LookForm>(&body)?;
    let mut prefs = st.auth.preferences(&c.principal, "me").await?;
    prefs
        .extra
        .insert(THEME.into(), scheme(f.theme.as_deref()).into());
    let live = if f.live.as_deref() == Some("off") {
        "off"
    } else {
        "on"
    };
    prefs.extra.insert(LIVE.into(), live.into());
    match f
        .time_zone
        .as_deref()
        .map(str::trim)
        .filter(|z| !z.is_empty())
    {
        Some(zone) => {
            jiff::tz::TimeZone::get(zone).map_err(|_| {
                Problem::validation("timeZone", format!("unknown time zone {zone:?}"))
            })?;
            prefs.extra.insert(TIME_ZONE.into(), zone.into());
        }
        None => {
            prefs.extra.remove(TIME_ZONE);
        }
    }
    let body = serde_json::to_value(&prefs)
        .map_err(|e| Problem::internal(format!("preferences as JSON: {e}")))?;
    st.auth
        .set_preferences(&c.principal, &c.actor, "me", body)
        .await?;
    Ok(Done::to("/account", "look"))
}

/// The account page's branding form.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
struct BrandingForm {
    mode: Option<String>,
    name: Option<String>,
    /// `on`: the header takes `accentColor`.
    accent: Option<String>,
    accent_color: Option<String>,
    /// The image file; read as its `data:` URI.
    #[cfg_attr(test, schemars(extend("format" = "binary")))]
    logo: Option<String>,
    /// `on`: the logo goes.
    remove_logo: Option<String>,
}

async fn set_branding(
    State(st): State<AppState>,
    c: Visitor,
    headers: HeaderMap,
    body: Bytes,
) -> Acted {
    let f: BrandingForm = multipart_form(&headers, &body)?;
    let mut branding = st.auth.branding().await?;
    branding.mode = Some(scheme(f.mode.as_deref()).into());
    branding.name = f.name;
    branding.accent_color = f.accent_color.filter(|_| f.accent.as_deref() == Some("on"));
    if f.remove_logo.as_deref() == Some("on") {
        branding.logo = None;
    } else if f.logo.is_some() {
        branding.logo = f.logo;
    }
    let body = serde_json::to_value(&branding)
        .map_err(|e| Problem::internal(format!("branding as JSON: {e}")))?;
    st.auth.set_branding(&c.principal, &c.actor, body).await?;
    Ok(Done::to("/account", "look"))
}

/// The forms that add a user or mint a token.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct AccountsForm {
    name: Option<String>,
    email: Option<String>,
    /// One role, built in (`viewer`, `operator`, `editor`, `admin`) or the tenant's own.
    role: Option<String>,
    password: Option<String>,
    /// A token's days to expiry; empty: it does not expire.
    days: Option<String>,
}

impl AccountsForm {
    fn roles(&self) -> Vec<String> {
        self.role
            .iter()
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect()
    }
}

async fn users_page(
    st: &AppState,
    c: &Visitor,
    did: Option<&str>,
    failure: Option<Problem>,
) -> Response {
    let items = match st.auth.users(&c.principal).await {
        Ok(items) => items,
        Err(e) => return failed(e),
    };
    let content = views::users(&c.now(st), &items, c.principal.user);
    match failure {
        Some(p) => form_again(c, Section::Users, "Users", p, content),
        None => html(
            StatusCode::OK,
            web::page(frame(c, Section::Users, "Users".into(), &[], did), content),
        ),
    }
}

async fn users(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    users_page(&st, &c, q.did.as_deref(), None).await
}

async fn create_user(State(st): State<AppState>, c: Visitor, body: Bytes) -> Response {
    let result = async {
        let f = form::<AccountsForm>(&body)?;
        let req = CreateUser {
            email: f.email.clone().unwrap_or_default(),
            name: f.name.clone().unwrap_or_default(),
            password: f.password.clone().filter(|p| !p.is_empty()),
            roles: Some(f.roles()),
            disabled: false,
        };
        st.auth.create_user(&c.principal, &c.actor, req).await?;
        Ok::<_, Problem>(())
    };
    match result.await {
        Ok(()) => Done::to("/users", "user").into_response(),
        Err(p) => users_page(&st, &c, None, Some(p)).await,
    }
}

async fn set_disabled(st: &AppState, c: &Caller, id: &str, disabled: bool) -> Acted {
    let req = UpdateUser {
        disabled: Some(disabled),
        ..Default::default()
    };
    st.auth
        .update_user(&c.principal, &c.actor, path_id(id)?, req)
        .await?;
    Ok(Done::to(
        "/users",
        if disabled { "disable" } else { "enable" },
    ))
}

/// The disable form: its ticked confirmation.
#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct DisableForm {
    confirm: Option<String>,
}

async fn disable_user(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Acted {
    if form::<DisableForm>(&body)?.confirm.as_deref() != Some("on") {
        return Err(
            Problem::validation("confirm", "tick the box to confirm disabling the user").into(),
        );
    }
    set_disabled(&st, &c, &id, true).await
}

async fn enable_user(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
) -> Acted {
    set_disabled(&st, &c, &id, false).await
}

async fn tokens(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<DidQuery>,
) -> Response {
    match st.auth.tokens(&c.principal).await {
        Ok(items) => html(
            StatusCode::OK,
            web::page(
                frame(
                    &c,
                    Section::Tokens,
                    "API tokens".into(),
                    &[],
                    q.did.as_deref(),
                ),
                views::tokens(&c.now(&st), &items),
            ),
        ),
        Err(e) => failed(e),
    }
}

/// A page showing a secret once: never kept by a cache or the browser's history.
fn secret_page(c: &Visitor, minted: &MintedToken) -> Response {
    let mut res = html(
        StatusCode::OK,
        web::page(
            frame(c, Section::Tokens, "API token".into(), &[], None),
            views::token_secret(minted),
        ),
    );
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn mint_token(
    State(st): State<AppState>,
    c: Visitor,
    body: Bytes,
) -> Result<Response, Refused> {
    let f = form::<AccountsForm>(&body)?;
    let days: Option<u64> = match f.days.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) => Some(d.parse().map_err(|_| {
            Problem::validation("expiresAt", format!("{d:?} is not a number of days"))
        })?),
        None => None,
    };
    let expires_at = days.map(|d| {
        st.clock
            .now()
            .plus(std::time::Duration::from_secs(d.saturating_mul(86_400)))
            .to_string()
    });
    let req = TokenRequest {
        name: f.name.clone().unwrap_or_default(),
        roles: f.roles(),
        expires_at,
        ..Default::default()
    };
    let minted = st.auth.mint(&c.principal, &c.actor, req).await?;
    Ok(secret_page(&c, &minted))
}

async fn rotate_token(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, Refused> {
    let minted = st
        .auth
        .rotate(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(secret_page(&c, &minted))
}

async fn revoke_token(
    State(st): State<AppState>,
    c: Visitor,
    ApiPath(id): ApiPath<String>,
) -> Acted {
    st.auth
        .revoke(&c.principal, &c.actor, path_id(&id)?)
        .await?;
    Ok(Done::to("/tokens", "revoke"))
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
struct CursorQuery {
    cursor: Option<String>,
}

async fn audit(
    State(st): State<AppState>,
    c: Visitor,
    ApiQuery(q): ApiQuery<CursorQuery>,
) -> Response {
    let req = ui_page(q.cursor, UI_PAGE, AUDIT);
    let filter = AuditFilter {
        before_seq: req.cursor.as_deref().and_then(|s| s.parse().ok()),
        ..Default::default()
    };
    match st.auth.audit_entries(&c.principal, filter, req.limit).await {
        Ok(items) => {
            let page = Page::new(items, &req, |e| e.seq.to_string());
            html(
                StatusCode::OK,
                web::page(
                    frame(&c, Section::Audit, "Audit log".into(), &[], None),
                    views::audit(&page.items, page.next_cursor.as_deref()),
                ),
            )
        }
        Err(e) => failed(e),
    }
}
