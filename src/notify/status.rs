//! Status pages' people (issue 74, part 3): subscribing by e-mail with double opt-in (a
//! confirmation mail whose link must be followed, one an hour per address, requests throttled
//! per client address), leaving by the link every mail carries (and by RFC 8058's one-click
//! `List-Unsubscribe-Post`), and an incident's public updates, stored and mailed to the pages'
//! confirmed subscribers in one transaction. A link names the subscription and carries a MAC
//! of it for its purpose under the installation's key (as ack links do), so the store holds
//! nothing that serves as one, and a confirmation link cannot unsubscribe or the reverse.

use super::{Notifier, NotifyError, invalid};
use crate::auth::Principal;
use crate::auth::crypto::constant_time_eq;
use crate::model::Timestamp;
use crate::model::audit::AuditDraft;
use crate::model::config::ConfigDoc;
use crate::model::identity::Actor;
use crate::model::incident::Incident;
use crate::model::input::path_segment;
use crate::model::notify::{Delivery, Message};
use crate::model::status::{
    StatusPageBody, StatusUpdate, StatusUpdateBody, Subscriber, check_update, plausible_email,
};
use crate::runtime::{Mail, PortError};
use crate::store::{StoreError, TxResult, Wrote};
use serde_json::json;
use std::net::IpAddr;
use std::time::Duration;
use uuid::Uuid;

/// A confirmation mail goes to one address at most once in this long.
const ASK_EVERY: Duration = Duration::from_secs(3600);
/// A subscription not confirmed within this long is dropped (at the next request for the page).
const PENDING_FOR: Duration = Duration::from_secs(7 * 86_400);
/// Subscribers a page may have, pending ones included.
const MAX_SUBSCRIBERS: usize = 10_000;

/// What a subscription request came to. The visitor is told the same in each case, so the
/// page does not say who is subscribed.
#[derive(Debug, PartialEq, Eq)]
pub enum Subscribed {
    /// A confirmation mail was queued.
    Asked,
    /// Asked within the hour, or confirmed already: nothing sent.
    Quiet,
}

/// What following a link did.
#[derive(Debug, PartialEq, Eq)]
pub enum LinkOutcome {
    Confirmed,
    AlreadyConfirmed,
    Unsubscribed,
}

/// A status page found by its public name: its tenant, document and body.
pub struct PageDoc {
    pub tenant: Uuid,
    pub doc: ConfigDoc,
    pub body: StatusPageBody,
}

/// What a link does: bound into its MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkPurpose {
    Confirm,
    Unsubscribe,
}

impl LinkPurpose {
    fn tag(self) -> &'static [u8] {
        match self {
            LinkPurpose::Confirm => b"status-confirm\0",
            LinkPurpose::Unsubscribe => b"status-unsubscribe\0",
        }
    }

    fn path(self) -> &'static str {
        match self {
            LinkPurpose::Confirm => "confirm",
            LinkPurpose::Unsubscribe => "unsubscribe",
        }
    }
}

fn link_mac(key: &[u8], purpose: LinkPurpose, s: &Subscriber) -> String {
    let body = format!("{}.{}.{}", s.tenant_id, s.page, s.id);
    super::acklink::mac_for(key, purpose.tag(), &body)
}

impl Notifier {
    /// The status page named `name`, in whichever tenant has it; `NotFound` otherwise.
    pub async fn status_page(&self, name: &str) -> Result<PageDoc, NotifyError> {
        let (tenant, doc) = self
            .store
            .doc_in_any_tenant("status-pages", name)
            .await?
            .ok_or(NotifyError::NotFound)?;
        let body = serde_json::from_str(&doc.body).map_err(|_| NotifyError::NotFound)?;
        Ok(PageDoc { tenant, doc, body })
    }

    /// The page's public address.
    pub fn page_url(&self, page: &str) -> String {
        format!("{}/status/{}", self.base_url, path_segment(page))
    }

    /// The updates `page` shows: those of the last 90 days, newest first, at most 200.
    pub async fn status_updates(
        &self,
        page: &PageDoc,
        now: Timestamp,
    ) -> Result<Vec<StatusUpdate>, NotifyError> {
        let since = now.minus(Duration::from_secs(90 * 86_400));
        Ok(self
            .store
            .status_updates(page.tenant, page.doc.name.clone(), since, 200)
            .await?)
    }

    /// The link of `purpose` for subscription `s`.
    async fn link(&self, purpose: LinkPurpose, s: &Subscriber) -> Result<String, StoreError> {
        let key = &self.links().await?.key;
        Ok(format!(
            "{}/{}?s={}&t={}",
            self.page_url(&s.page),
            purpose.path(),
            s.id,
            link_mac(key, purpose, s)
        ))
    }

    /// Subscribes `email` to `page`: a pending subscription and its confirmation mail, in one
    /// transaction. Throttled per client address (5, then one each 10 minutes): `Ok(None)`
    /// when over. A page without an e-mail channel takes no subscriptions (`NotFound`).
    pub async fn subscribe(
        &self,
        page: &PageDoc,
        email: &str,
        actor: &Actor,
        ip: IpAddr,
    ) -> Result<Option<Subscribed>, NotifyError> {
        let email = email.trim().to_string();
        if !plausible_email(&email) {
            return Err(invalid(
                "email",
                "an e-mail address, such as ops@example.com",
            ));
        }
        let Some(channel) = page.body.email_channel.clone() else {
            return Err(NotifyError::NotFound);
        };
        let now = self.clock.now();
        if !self.subscribe_limit.allow(ip, now).await? {
            return Ok(None);
        }
        let (tenant, name) = (page.tenant, page.doc.name.clone());
        let rows = self.store.status_subscribers(tenant, name.clone()).await?;
        let lapsed =
            |s: &Subscriber| s.confirmed_at.is_none() && s.asked_at.plus(PENDING_FOR) < now;
        let known = rows
            .iter()
            .find(|s| s.email.eq_ignore_ascii_case(&email) && !lapsed(s));
        let subscriber = match known {
            Some(s) if s.confirmed_at.is_some() || now < s.asked_at.plus(ASK_EVERY) => {
                return Ok(Some(Subscribed::Quiet));
            }
            Some(s) => Subscriber {
                asked_at: now,
                ..s.clone()
            },
            None if rows.iter().filter(|s| !lapsed(s)).count() >= MAX_SUBSCRIBERS => {
                return Ok(Some(Subscribed::Quiet));
            }
            None => Subscriber {
                id: self.clock.new_id(),
                tenant_id: tenant,
                page: name.clone(),
                email: email.clone(),
                created_at: now,
                confirmed_at: None,
                asked_at: now,
            },
        };
        let heading = page.body.heading(&name).to_string();
        let confirm = self.link(LinkPurpose::Confirm, &subscriber).await?;
        let leave = self.link(LinkPurpose::Unsubscribe, &subscriber).await?;
        let mail = Mail {
            kind: "status",
            subject: format!("Confirm your subscription to {heading}"),
            text: format!(
                "Someone, probably you, asked to be told by e-mail about incidents on {heading} ({}).\n\nTo confirm, open this link and press the button:\n{confirm}\n\nIf it was not you, ignore this mail: nothing more is sent unless the link is followed.\nUnsubscribe: {leave}\n",
                self.page_url(&name),
            ),
            link: leave,
        };
        let deliveries = self
            .email_deliveries(tenant, channel, vec![(email, mail)])
            .await
            .map_err(|e| invalid("emailChannel", e.to_string()))?;
        let audit = AuditDraft::new(
            now,
            tenant,
            actor,
            "status.subscribe",
            format!("status-pages/{name}/subscribers/{}", subscriber.id),
        );
        let gone: Vec<Subscriber> = rows.into_iter().filter(|s| lapsed(s)).collect();
        self.store
            .transact(move |tx| -> TxResult<_> {
                for s in &gone {
                    tx.remove_status_subscriber(s)?;
                }
                tx.put_status_subscriber(&subscriber)?;
                for d in &deliveries {
                    tx.put_delivery(d)?;
                }
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(Some(Subscribed::Asked))
    }

    /// Follows a link of a mail: confirming makes the subscription active, unsubscribing ends
    /// it. `NotFound` for a link that is not genuine, a subscription that is gone, or a pending
    /// one that lapsed.
    pub async fn follow_link(
        &self,
        page: &PageDoc,
        purpose: LinkPurpose,
        id: Uuid,
        mac: &str,
        actor: &Actor,
    ) -> Result<LinkOutcome, NotifyError> {
        let key = self.links().await?.key.clone();
        let (tenant, name) = (page.tenant, page.doc.name.clone());
        let now = self.clock.now();
        let actor = actor.clone();
        let mac = mac.to_string();
        self.store
            .transact(move |tx| -> TxResult<_, NotifyError> {
                let Some(mut s) = tx
                    .status_subscribers(tenant, &name)?
                    .into_iter()
                    .find(|s| s.id == id)
                else {
                    return Err(NotifyError::NotFound);
                };
                let expected = link_mac(&key, purpose, &s);
                let lapsed = s.confirmed_at.is_none() && s.asked_at.plus(PENDING_FOR) < now;
                if expected.is_empty()
                    || !constant_time_eq(expected.as_bytes(), mac.as_bytes())
                    || (purpose == LinkPurpose::Confirm && lapsed)
                {
                    return Err(NotifyError::NotFound);
                }
                let resource = format!("status-pages/{name}/subscribers/{id}");
                if purpose == LinkPurpose::Unsubscribe {
                    tx.remove_status_subscriber(&s)?;
                    let audit =
                        AuditDraft::new(now, tenant, &actor, "status.unsubscribe", resource);
                    tx.record([audit], Vec::new())?;
                    return Ok(Wrote::Changed(LinkOutcome::Unsubscribed));
                }
                if s.confirmed_at.is_some() {
                    return Ok(Wrote::Unchanged(LinkOutcome::AlreadyConfirmed));
                }
                s.confirmed_at = Some(now);
                tx.put_status_subscriber(&s)?;
                let audit = AuditDraft::new(now, tenant, &actor, "status.confirm", resource);
                tx.record([audit], Vec::new())?;
                Ok(Wrote::Changed(LinkOutcome::Confirmed))
            })
            .await
    }

    /// A page's subscribers, for the people who run it.
    pub async fn subscribers(
        &self,
        p: &Principal,
        page: &str,
    ) -> Result<Vec<Subscriber>, NotifyError> {
        self.store
            .doc(p.tenant, "status-pages", page.to_string(), false)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => NotifyError::NotFound,
                e => e.into(),
            })?;
        Ok(self
            .store
            .status_subscribers(p.tenant, page.to_string())
            .await?)
    }

    /// Removes a subscriber by id.
    pub async fn remove_subscriber(
        &self,
        p: &Principal,
        actor: &Actor,
        page: &str,
        id: Uuid,
    ) -> Result<(), NotifyError> {
        let (tenant, page) = (p.tenant, page.to_string());
        let audit = self.audit(
            p,
            actor,
            "status.unsubscribe",
            format!("status-pages/{page}/subscribers/{id}"),
        );
        self.store
            .transact(move |tx| -> TxResult<_, NotifyError> {
                let s = tx
                    .status_subscribers(tenant, &page)?
                    .into_iter()
                    .find(|s| s.id == id)
                    .ok_or(NotifyError::NotFound)?;
                tx.remove_status_subscriber(&s)?;
                tx.record([audit.before(&s)], Vec::new())?;
                Ok(Wrote::Changed(()))
            })
            .await
    }

    /// Posts a public update of `incident` on its pages: stored, its `incident_update` event
    /// and audit entry, and a mail to each confirmed subscriber of the pages (one per address),
    /// in one transaction.
    pub async fn post_status_update(
        &self,
        p: &Principal,
        actor: &Actor,
        incident: &Incident,
        body: StatusUpdateBody,
    ) -> Result<StatusUpdate, NotifyError> {
        check_update(&body).map_err(|e| invalid("statusUpdate", e))?;
        let mut pages = Vec::new();
        for name in &body.pages {
            let doc = self
                .store
                .doc(p.tenant, "status-pages", name.clone(), false)
                .await
                .map_err(|e| match e {
                    StoreError::NotFound => {
                        invalid("statusUpdate", format!("no status page {name:?}"))
                    }
                    e => e.into(),
                })?;
            let page: StatusPageBody = serde_json::from_str(&doc.body)
                .map_err(|e| StoreError::Corrupt(format!("status page {name:?}: {e}")))?;
            pages.push((doc.name, page));
        }
        if let Some(unknown) = body.components.iter().find(|c| {
            !pages
                .iter()
                .any(|(_, page)| page.components.iter().any(|pc| &pc.name == *c))
        }) {
            return Err(invalid(
                "statusUpdate",
                format!("no component {unknown:?} on the pages named"),
            ));
        }
        let now = self.clock.now();
        let mut update = StatusUpdate {
            id: self.clock.new_id(),
            tenant_id: p.tenant,
            incident_id: incident.id,
            title: incident.title.clone(),
            status: body.status,
            message: body.message,
            pages: pages.iter().map(|(n, _)| n.clone()).collect(),
            components: body.components,
            posted_at: now,
            posted_by: p.name.clone(),
            mailed: 0,
        };
        let mut mails = Vec::new();
        if body.notify.unwrap_or(true) {
            let mut mailed: Vec<String> = Vec::new();
            for (name, page) in &pages {
                let Some(channel) = page.email_channel.clone() else {
                    continue;
                };
                let mut to = Vec::new();
                for s in self
                    .store
                    .status_subscribers(p.tenant, name.clone())
                    .await?
                {
                    let address = s.email.to_lowercase();
                    if s.confirmed_at.is_none() || mailed.contains(&address) {
                        continue;
                    }
                    mailed.push(address);
                    let leave = self.link(LinkPurpose::Unsubscribe, &s).await?;
                    to.push((s.email, self.update_mail(name, page, &update, leave)));
                }
                if !to.is_empty() {
                    mails.extend(
                        self.email_deliveries(p.tenant, channel, to)
                            .await
                            .map_err(|e| invalid("emailChannel", e.to_string()))?,
                    );
                }
            }
        }
        update.mailed = mails.len();
        let mut event = incident.update_event("status-update");
        event.payload["statusUpdate"] = json!({
            "id": update.id, "status": update.status, "message": update.message,
            "pages": update.pages, "components": update.components, "mailed": update.mailed,
        });
        let audit = self.audit(
            p,
            actor,
            "incident.status-update",
            format!("incidents/{}/status-updates/{}", incident.id, update.id),
        );
        let saved = update.clone();
        self.store
            .transact(move |tx| -> TxResult<_> {
                tx.put_status_update(&saved)?;
                for d in &mails {
                    tx.put_delivery(d)?;
                }
                tx.record([audit.after(&saved)], vec![event])?;
                Ok(Wrote::Changed(()))
            })
            .await?;
        Ok(update)
    }

    /// The mail of an update to one subscriber, with their link to leave.
    fn update_mail(
        &self,
        name: &str,
        page: &StatusPageBody,
        u: &StatusUpdate,
        leave: String,
    ) -> Mail {
        let heading = page.heading(name);
        let status = u.status.to_uppercase();
        let mut text = format!("{heading}: {}\n{status}: {}\n", u.title, u.message);
        if !u.components.is_empty() {
            text.push_str(&format!("Affects: {}\n", u.components.join(", ")));
        }
        text.push_str(&format!(
            "\n{}\n\nYou get this because you subscribed to {heading}.\nUnsubscribe: {leave}\n",
            self.page_url(name)
        ));
        Mail {
            kind: "status",
            subject: format!("[{heading}] {} ({})", u.title, u.status),
            text,
            link: leave,
        }
    }

    /// One e-mail delivery per `(address, mail)` through `channel`, an `email` channel of
    /// `tenant`. Refused, saying why, when there is no such channel or it is not for e-mail.
    pub(super) async fn email_deliveries(
        &self,
        tenant: Uuid,
        channel: String,
        mails: Vec<(String, Mail)>,
    ) -> Result<Vec<Delivery>, PortError> {
        let doc = match self
            .store
            .doc(tenant, "channels", channel.clone(), false)
            .await
        {
            Ok(doc) => doc,
            Err(StoreError::NotFound) => {
                return Err(PortError::refused(format!("no channel {channel:?}")));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(body) = crate::model::fault::readable::<crate::model::notify::Channel, _>(
            "a channel",
            serde_json::from_str(&doc.body),
        ) else {
            return Err(PortError::unavailable(format!(
                "channel {channel:?} does not read"
            )));
        };
        if body.kind != "email" {
            return Err(PortError::refused(format!(
                "{channel:?} is a {} channel, not email",
                body.kind
            )));
        }
        let now = self.clock.now();
        Ok(mails
            .into_iter()
            .map(|(target, mail)| {
                let mut message = Message::notice(mail.kind, mail.subject, mail.text, "info", now);
                message.alert_url = mail.link;
                Delivery {
                    channel_id: Some(doc.id),
                    channel: doc.name.clone(),
                    target,
                    ..Delivery::new(self.clock.new_id(), tenant, "email", message)
                }
            })
            .collect())
    }
}
