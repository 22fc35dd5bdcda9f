//! The stored form of an event, the same in the journal, the month files and PostgreSQL's
//! partitions: its fields by position, its time in milliseconds, its type and severity as small
//! codes, and a state change's payload by position too. A result's state change took about 300
//! bytes by name, half of them field names, written twice (journal, then month file) and read
//! back for every consumer behind; by position it takes about 120. Rows written by name before
//! read the same (`decode_event`): a positional row is a MessagePack array, a named one a map.

use super::StoreError;
use super::codec::{decode, encode_positional_into};
use crate::model::Timestamp;
use crate::model::event::{Event, EventType, Payload, Severity};
use crate::model::object::ObjectKind;
use crate::model::state::{StateChangePayload, StateType};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use uuid::Uuid;

const SEVERITIES: [Severity; 4] = [
    Severity::Critical,
    Severity::Warning,
    Severity::Info,
    Severity::Ok,
];
const OBJECT_KINDS: [ObjectKind; 2] = [ObjectKind::Host, ObjectKind::Service];
const STATE_TYPES: [StateType; 2] = [StateType::Soft, StateType::Hard];
/// Room a row starts with: a result's state change fits.
pub const ROW_GUESS: usize = 160;

/// Fields by position (`encode_positional`): none is skipped, and a new one goes at the end
/// with `#[serde(default)]`, so rows written before it read with its default.
#[derive(Serialize, Deserialize)]
struct EventRow<'a> {
    id: Uuid,
    tenant_id: Uuid,
    ts_ms: i64,
    kind: u8,
    object_id: Option<Uuid>,
    source_id: Option<Cow<'a, str>>,
    severity: Option<u8>,
    /// An open payload (a JSON object), unless `state_change` holds it.
    payload: Option<Cow<'a, Value>>,
    state_change: Option<StateChangeRow<'a>>,
    site: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
struct StateChangeRow<'a> {
    object: Cow<'a, str>,
    kind: u8,
    from: Option<u8>,
    to: u8,
    state_type: u8,
    attempt: u32,
    output: Cow<'a, str>,
    labels: Cow<'a, BTreeMap<String, String>>,
    metric: Cow<'a, str>,
    host: Option<Cow<'a, str>>,
}

fn code_of<T: PartialEq>(all: &[T], v: &T) -> u8 {
    all.iter().position(|x| x == v).unwrap_or(0) as u8
}

fn of_code<T: Copy>(all: &[T], code: u8, what: &str) -> Result<T, StoreError> {
    all.get(usize::from(code))
        .copied()
        .ok_or_else(|| StoreError::Corrupt(format!("event row: {what} code {code}")))
}

/// An event's stored row.
pub(crate) fn encode_event(e: &Event) -> Result<Vec<u8>, StoreError> {
    let mut row = Vec::with_capacity(ROW_GUESS);
    encode_event_into(&mut row, e)?;
    Ok(row)
}

/// An event's stored row, appended to `buf`.
pub(crate) fn encode_event_into(buf: &mut Vec<u8>, e: &Event) -> Result<(), StoreError> {
    let state_change = e.payload.as_state_change().map(|p| StateChangeRow {
        object: Cow::Borrowed(&p.object),
        kind: code_of(&OBJECT_KINDS, &p.kind),
        from: p.from,
        to: p.to,
        state_type: code_of(&STATE_TYPES, &p.state_type),
        attempt: p.attempt,
        output: Cow::Borrowed(&p.output),
        labels: Cow::Borrowed(&p.labels),
        metric: Cow::Borrowed(&p.metric),
        host: p.host.as_deref().map(Cow::Borrowed),
    });
    encode_positional_into(
        buf,
        &EventRow {
            id: e.id,
            tenant_id: e.tenant_id,
            ts_ms: e.ts.as_millis(),
            kind: e.kind.code(),
            object_id: e.object_id,
            source_id: e.source_id.as_deref().map(Cow::Borrowed),
            severity: e.severity.map(|s| code_of(&SEVERITIES, &s)),
            payload: state_change.is_none().then(|| Cow::Borrowed(&*e.payload)),
            state_change,
            site: e.site.as_deref().map(Cow::Borrowed),
        },
    )
}

/// Whether a row is positional: a MessagePack array (fixarray, array 16, array 32).
fn positional(row: &[u8]) -> bool {
    matches!(row.first(), Some(0x90..=0x9f | 0xdc | 0xdd))
}

/// An event from its stored row, positional or by name.
pub(crate) fn decode_event(row: &[u8]) -> Result<Event, StoreError> {
    if !positional(row) {
        return decode(row);
    }
    let r: EventRow = decode(row)?;
    let payload = match (r.state_change, r.payload) {
        (Some(p), _) => Payload::state_change(StateChangePayload {
            object: p.object.into_owned(),
            kind: of_code(&OBJECT_KINDS, p.kind, "object kind")?,
            from: p.from,
            to: p.to,
            state_type: of_code(&STATE_TYPES, p.state_type, "state type")?,
            attempt: p.attempt,
            output: p.output.into_owned(),
            labels: p.labels.into_owned(),
            metric: p.metric.into_owned(),
            host: p.host.map(Cow::into_owned),
        }),
        (None, payload) => Payload::from(payload.map_or(Value::Null, Cow::into_owned)),
    };
    Ok(Event {
        id: r.id,
        tenant_id: r.tenant_id,
        ts: Timestamp::from_millis(r.ts_ms)
            .ok_or_else(|| StoreError::Corrupt(format!("event time {} out of range", r.ts_ms)))?,
        kind: of_code(&EventType::ALL, r.kind, "event type")?,
        object_id: r.object_id,
        source_id: r.source_id.map(Cow::into_owned),
        severity: r
            .severity
            .map(|c| of_code(&SEVERITIES, c, "severity"))
            .transpose()?,
        payload,
        site: r.site.map(Cow::into_owned),
    })
}

/// The id of an event's stored row, read without decoding the rest: a positional row's first
/// field (a 16-byte MessagePack bin after the array's header).
pub(crate) fn event_id(row: &[u8]) -> Result<Uuid, StoreError> {
    if positional(row) {
        let header = match row[0] {
            0xdc => 3,
            0xdd => 5,
            _ => 1,
        };
        return row
            .get(header..header + 18)
            .filter(|b| b[..2] == [0xc4, 0x10])
            .and_then(|b| Uuid::from_slice(&b[2..]).ok())
            .ok_or_else(|| StoreError::Corrupt("event row without its id".into()));
    }
    #[derive(Deserialize)]
    struct Id {
        id: Uuid,
    }
    decode::<Id>(row).map(|e| e.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventDraft;
    use serde_json::json;

    fn state_change(host: Option<&str>) -> Event {
        let payload = StateChangePayload {
            object: "disk".into(),
            kind: ObjectKind::Service,
            from: None,
            to: 2,
            state_type: StateType::Hard,
            attempt: 3,
            output: "DISK CRITICAL".into(),
            labels: BTreeMap::from([("env".into(), "prod".into())]),
            metric: "used=91%;80;90".into(),
            host: host.map(str::to_string),
        };
        let mut draft = EventDraft::new(
            Uuid::from_u128(1),
            EventType::StateChange,
            Some(Severity::Critical),
            Payload::state_change(payload),
        );
        draft.object_id = Some(Uuid::from_u128(2));
        draft.stamped(
            Uuid::from_u128(0x019a_b6a0_047b_7000_8000_0000_0000_0003),
            Timestamp::from_millis(1_764_000_000_123).unwrap(),
        )
    }

    fn open(payload: Value) -> Event {
        let mut draft = EventDraft::new(Uuid::from_u128(1), EventType::Ingress, None, payload);
        draft.source_id = Some("src-1".into());
        let mut e = draft.stamped(
            Uuid::from_u128(0x019a_b6a0_05c8_7000_8000_0000_0000_0004),
            Timestamp::from_millis(1_764_000_000_456).unwrap(),
        );
        e.site = Some("edge-1".into());
        e
    }

    /// Both payload forms, and every optional field set or not, come back as they went in,
    /// and the id is read from the row's head; a state change keeps its typed fields.
    #[test]
    fn events_round_trip_by_position() {
        let events = [
            state_change(Some("web1")),
            state_change(None),
            open(json!({"labels": {"a": "b"}, "n": [1, 2.5, null]})),
            open(json!({})),
        ];
        for e in events {
            let row = encode_event(&e).unwrap();
            assert!(positional(&row));
            let back = decode_event(&row).unwrap();
            assert_eq!(
                serde_json::to_value(&back).unwrap(),
                serde_json::to_value(&e).unwrap()
            );
            assert_eq!(back.payload.as_state_change(), e.payload.as_state_change());
            assert_eq!(event_id(&row).unwrap(), e.id);
        }
        let row = encode_event(&state_change(Some("web1"))).unwrap();
        assert!(
            row.len() < 140,
            "a state change's row is {} bytes",
            row.len()
        );
    }

    /// A row written by name (every row before positions) reads as it did, id included.
    #[test]
    fn rows_by_name_read_alike() {
        for e in [state_change(Some("web1")), open(json!({"x": 1}))] {
            let row = super::super::codec::encode(&e).unwrap();
            assert!(!positional(&row));
            let back = decode_event(&row).unwrap();
            assert_eq!(
                serde_json::to_value(&back).unwrap(),
                serde_json::to_value(&e).unwrap()
            );
            assert_eq!(event_id(&row).unwrap(), e.id);
        }
    }

    #[test]
    fn damaged_rows_are_corrupt_not_a_panic() {
        let row = encode_event(&open(json!({}))).unwrap();
        for cut in [1, 5, row.len() - 1] {
            assert!(matches!(
                decode_event(&row[..cut]),
                Err(StoreError::Corrupt(_))
            ));
        }
        assert!(matches!(event_id(&[0x91]), Err(StoreError::Corrupt(_))));
        let mut bad_type = row.clone();
        // The type code follows the array header, two ids (18 bytes each) and the time (9).
        bad_type[1 + 18 + 18 + 9] = 0x7f;
        assert!(matches!(
            decode_event(&bad_type),
            Err(StoreError::Corrupt(_))
        ));
    }
}
