//! The one value codec: MessagePack with field names, compact and self-describing, so records
//! gain optional fields without a migration and open JSON payloads round-trip. The rows every
//! result writes (live states, events: `event_rows.rs`) are written by position instead
//! (`encode_positional`); one `decode` reads both forms.

use super::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Room an encoding starts with: most rows fit, so they are not copied as they grow.
const ROW_START: usize = 256;

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    let mut row = Vec::with_capacity(ROW_START);
    rmp_serde::encode::write_named(&mut row, value)
        .map_err(|e| StoreError::Internal(format!("encode: {e}")))?;
    Ok(row)
}

/// The same values by position instead of by name, for the rows every result writes (live
/// states, events), where the names were half of each row and so half of the pages each group
/// of results writes. Only for a struct none of whose fields is skipped when empty and whose
/// new fields go at its end with `#[serde(default)]`: `decode` reads either form, so rows
/// written by name stay readable, and a row shorter than the struct takes the defaults.
pub(crate) fn encode_positional<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    let mut row = Vec::with_capacity(ROW_START);
    encode_positional_into(&mut row, value)?;
    Ok(row)
}

/// `encode_positional` appended to `buf`.
pub(crate) fn encode_positional_into<T: Serialize>(
    buf: &mut Vec<u8>,
    value: &T,
) -> Result<(), StoreError> {
    rmp_serde::encode::write(buf, value).map_err(|e| StoreError::Internal(format!("encode: {e}")))
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    rmp_serde::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("decode: {e}")))
}

/// Every value of one tenant in a table with tenant-scoped keys, decoded, in key order.
pub(crate) fn tenant_values<T, R>(table: &R, tenant: uuid::Uuid) -> Result<Vec<T>, StoreError>
where
    T: DeserializeOwned,
    R: super::kv::Readable<&'static [u8], &'static [u8]>,
{
    let (lo, hi) = super::keys::tenant_range(tenant);
    let mut out = Vec::new();
    for row in table.range(lo.as_slice()..hi.as_slice())? {
        out.push(decode(row?.1.value())?);
    }
    Ok(out)
}

/// One value of a table keyed by tenant + id.
pub(crate) fn tenant_value<T, R>(
    table: &R,
    tenant: uuid::Uuid,
    id: uuid::Uuid,
) -> Result<Option<T>, StoreError>
where
    T: DeserializeOwned,
    R: super::kv::Readable<&'static [u8], &'static [u8]>,
{
    table
        .get(super::keys::scoped(tenant, id.as_bytes()).as_slice())?
        .map(|v| decode(v.value()))
        .transpose()
}

/// One tenant's values keyed by time-ordered ids, newest first, strictly before id `before`:
/// at most `limit` that `keep` accepts.
pub(crate) fn tenant_values_newest<T, R>(
    table: &R,
    tenant: uuid::Uuid,
    before: Option<uuid::Uuid>,
    limit: usize,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, StoreError>
where
    T: DeserializeOwned,
    R: super::kv::Readable<&'static [u8], &'static [u8]>,
{
    let (lo, hi) = super::keys::tenant_range(tenant);
    let hi = before.map_or(hi, |b| super::keys::scoped(tenant, b.as_bytes()));
    let mut out = Vec::new();
    for row in table.range(lo.as_slice()..hi.as_slice())?.rev() {
        let value: T = decode(row?.1.value())?;
        if keep(&value) {
            out.push(value);
            if out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_json_round_trips() {
        let v = serde_json::json!({"a": [1, "two", {"three": null}], "b": 2.5});
        let back: serde_json::Value = decode(&encode(&v).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        let r: Result<serde_json::Value, _> = decode(&[0xc1, 0xff]);
        assert!(matches!(r, Err(StoreError::Corrupt(_))));
    }
}
