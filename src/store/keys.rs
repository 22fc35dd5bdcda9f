//! Key codecs: big-endian so byte order is key order, and every key scoped by tenant.

use super::StoreError;
use crate::model::Timestamp;
use uuid::Uuid;

/// A tenant-scoped key: the tenant's 16 id bytes, then the local part.
pub(crate) fn scoped(tenant: Uuid, local: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + local.len());
    k.extend_from_slice(tenant.as_bytes());
    k.extend_from_slice(local);
    k
}

/// Owned keys as the slices a table's `get_each` and `prefetch` take.
pub(crate) fn as_keys(keys: &[Vec<u8>]) -> Vec<&[u8]> {
    keys.iter().map(Vec::as_slice).collect()
}

/// The range of all keys of one tenant, for scans.
pub(crate) fn tenant_range(tenant: Uuid) -> (Vec<u8>, Vec<u8>) {
    let start = tenant.as_bytes().to_vec();
    let end = Uuid::from_u128(tenant.as_u128().wrapping_add(1))
        .as_bytes()
        .to_vec();
    (start, end)
}

/// The first key past every key that starts with `prefix`, for a range read of them: the
/// prefix with its last byte one more. The prefix's callers end it below 255 (a separator or
/// a kind letter).
pub(crate) fn past_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = last.saturating_add(1);
    }
    end
}

/// A uuid kept in an index row or a key (`what` names it): one of another length is a corrupt
/// row, reported as every other decode failure is rather than read as "none".
pub(crate) fn stored_uuid(bytes: &[u8], what: &str) -> Result<Uuid, StoreError> {
    Uuid::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// The time a due-time index key starts with (milliseconds, big-endian), or `Corrupt`: a
/// corrupt key must not read as "nothing due", which would leave its timer asleep for good.
pub(crate) fn stored_due_time(key: &[u8], what: &str) -> Result<Timestamp, StoreError> {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .and_then(|b| Timestamp::from_millis(i64::from_be_bytes(b)))
        .ok_or_else(|| StoreError::Corrupt(format!("{what}: a key of {} bytes", key.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_prefix_orders_and_bounds() {
        let t = Uuid::from_u128(7);
        let k = scoped(t, b"abc");
        let (lo, hi) = tenant_range(t);
        assert!(lo.as_slice() <= k.as_slice() && k.as_slice() < hi.as_slice());
        assert!(scoped(Uuid::from_u128(8), b"").as_slice() >= hi.as_slice());
    }

    #[test]
    fn a_corrupt_due_time_key_is_reported_not_read_as_nothing_due() {
        let mut key = 1_700_000_000_000i64.to_be_bytes().to_vec();
        key.extend_from_slice(Uuid::from_u128(1).as_bytes());
        assert_eq!(
            stored_due_time(&key, "a timer").unwrap(),
            Timestamp::from_millis(1_700_000_000_000).unwrap()
        );
        assert!(matches!(
            stored_due_time(&key[..5], "a timer"),
            Err(StoreError::Corrupt(why)) if why.contains("5 bytes")
        ));
    }
}
