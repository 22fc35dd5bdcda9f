//! The SSE hub's side of one client (SPEC 6.4): persisted events it missed since
//! `Last-Event-ID`, then live ones from the lossy bus, filtered by type and label selector, a
//! ping every 15 s, and `event: resync` when the bus dropped frames for it.

use super::{Delivery, Events, SSE_BUFFER, SseClient, Subscription};
use crate::model::event::{Event, EventFilter};
use crate::model::fault;
use crate::model::selector::Selector;
use crate::store::StoreError;
use bytes::Bytes;
use futures_util::Stream;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

const PING_EVERY: Duration = Duration::from_secs(15);

fn frame(e: &Event) -> Bytes {
    let data = fault::encoded("an event", serde_json::to_string(e));
    Bytes::from(format!(
        "event: {}\nid: {}\ndata: {data}\n\n",
        e.kind.as_str(),
        e.id
    ))
}

struct Live {
    sub: Subscription,
    replay: VecDeque<Event>,
    replayed: HashSet<Uuid>,
    filter: EventFilter,
    selector: Selector,
    ping: tokio::time::Interval,
    _client: SseClient,
}

impl Live {
    fn wanted(&self, e: &Event) -> bool {
        let labels_match = match e.labels() {
            Some(labels) => self.selector.matches(labels),
            None => self.selector.matches(&serde_json::Map::new()),
        };
        self.filter.matches(e) && labels_match
    }

    async fn next_frame(&mut self) -> Option<Bytes> {
        if let Some(e) = self.replay.pop_front() {
            return Some(frame(&e));
        }
        loop {
            tokio::select! {
                _ = self.ping.tick() => return Some(Bytes::from_static(b": ping\n\n")),
                d = self.sub.recv() => match d? {
                    Delivery::Resync => return Some(Bytes::from_static(b"event: resync\ndata: {}\n\n")),
                    Delivery::Event(e) if self.wanted(&e) && !self.replayed.contains(&e.id) => return Some(frame(&e)),
                    Delivery::Event(_) => {}
                },
            }
        }
    }
}

/// The frames of one client's stream.
pub async fn stream(
    events: &Arc<Events>,
    filter: EventFilter,
    selector: Selector,
    last_event_id: Option<Uuid>,
) -> Result<impl Stream<Item = Result<Bytes, std::io::Error>> + use<>, StoreError> {
    // Subscribe before reading the replay, so nothing falls between the two.
    let sub = events.subscribe("sse", SSE_BUFFER);
    let client = events.sse_client();
    let replay = match last_event_id {
        Some(id) => events.replay(filter.clone(), id).await?,
        None => Vec::new(),
    };
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut live = Live {
        sub,
        replayed: replay.iter().map(|e| e.id).collect(),
        replay: VecDeque::new(),
        filter,
        selector,
        ping,
        _client: client,
    };
    live.replay = replay.into_iter().filter(|e| live.wanted(e)).collect();
    Ok(futures_util::stream::unfold(live, |mut live| async move {
        let f = live.next_frame().await?;
        Some((Ok::<_, std::io::Error>(f), live))
    }))
}
