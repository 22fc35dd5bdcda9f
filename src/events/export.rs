//! The NDJSON export (SPEC 6.4): oldest first, read from the store in pages of 1000, stopping
//! after 100,000 events.

use super::Events;
use crate::model::event::{Event, EventFilter};
use crate::model::fault;
use crate::store::events::Position;
use bytes::Bytes;
use futures_util::Stream;
use std::sync::Arc;

const EXPORT_PAGE: usize = 1000;
const EXPORT_MAX: usize = 100_000;

fn ndjson_line(e: &Event) -> Vec<u8> {
    let mut line = fault::encoded("an event", serde_json::to_vec(e));
    line.push(b'\n');
    line
}

/// The export of the events `filter` keeps (`None`: nothing), one chunk per page.
pub fn ndjson(
    events: Arc<Events>,
    filter: Option<EventFilter>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    // State: the position after which the next page starts, and how many were sent.
    futures_util::stream::unfold(
        filter.map(|f| (f, None::<Position>, 0usize)),
        move |state| {
            let events = events.clone();
            async move {
                let (f, after, sent) = state?;
                let want = EXPORT_PAGE.min(EXPORT_MAX - sent);
                if want == 0 {
                    return None;
                }
                match events.ascending(f.clone(), after, want).await {
                    Ok(page) if page.is_empty() => None,
                    Ok(page) => {
                        let next = page.last().and_then(|e| Position::of_id(e.id));
                        let chunk: Vec<u8> = page.iter().flat_map(ndjson_line).collect();
                        let sent = sent + page.len();
                        let more = page.len() == want && sent < EXPORT_MAX;
                        Some((Ok(Bytes::from(chunk)), more.then_some((f, next, sent))))
                    }
                    Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
                }
            }
        },
    )
}
