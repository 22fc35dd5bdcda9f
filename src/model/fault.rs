//! Faults that must not pass silently: a stored value that no longer decodes (corruption, or a
//! bug that wrote it), a value of ours that does not encode (a bug). Where the caller carries
//! on with an empty value rather than fail a whole listing, the fault is logged at ERROR and
//! counted by kind; `/metrics` shows the counts as `np_faults`. The one place `model` logs.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};

static DECODE: AtomicU64 = AtomicU64::new(0);
static ENCODE: AtomicU64 = AtomicU64::new(0);
static INTERNAL: AtomicU64 = AtomicU64::new(0);

/// `result`'s value; when `what` (a stored value) did not decode, the fault is logged and
/// counted and the empty value stands in.
pub fn decoded<T: Default, E: Display>(what: &str, result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| {
        DECODE.fetch_add(1, Ordering::Relaxed);
        tracing::error!(what, error = %e, "a stored value does not decode; using an empty one");
        T::default()
    })
}

/// `result`'s value; when `what` (a stored value) did not decode, the fault is logged and
/// counted and the caller skips it.
pub fn readable<T, E: Display>(what: &str, result: Result<T, E>) -> Option<T> {
    result
        .inspect_err(|e| {
            DECODE.fetch_add(1, Ordering::Relaxed);
            tracing::error!(what, error = %e, "a stored value does not decode; skipping it");
        })
        .ok()
}

/// `result`'s value; when `what` did not encode, the fault is logged and counted and the
/// empty value stands in.
pub fn encoded<T: Default, E: Display>(what: &str, result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| {
        ENCODE.fetch_add(1, Ordering::Relaxed);
        tracing::error!(what, error = %e, "a value does not encode; using an empty one");
        T::default()
    })
}

/// A step that cannot fail but did (a helper thread that did not start, a panic caught):
/// logged and counted; the caller says what it does instead.
pub fn internal(what: &str, detail: &str) {
    INTERNAL.fetch_add(1, Ordering::Relaxed);
    tracing::error!(what, detail, "an internal step failed");
}

/// The faults since start, by kind (`decode`, `encode`, `internal`).
pub fn counts() -> [(&'static str, u64); 3] {
    [
        ("decode", DECODE.load(Ordering::Relaxed)),
        ("encode", ENCODE.load(Ordering::Relaxed)),
        ("internal", INTERNAL.load(Ordering::Relaxed)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_counted_and_the_empty_value_stands_in() {
        let [(_, decode_before), (_, encode_before), (_, internal_before)] = counts();
        let labels: std::collections::BTreeMap<String, String> =
            decoded("labels", serde_json::from_str("[1, 2"));
        assert!(labels.is_empty());
        assert_eq!(decoded("number", "7".parse::<u8>()), 7);
        let bytes: Vec<u8> = encoded("body", Err::<Vec<u8>, _>("no"));
        assert!(bytes.is_empty());
        internal("a helper thread", "did not start");
        let [(_, decode_after), (_, encode_after), (_, internal_after)] = counts();
        assert!(
            decode_after > decode_before,
            "counters only grow; tests run in parallel"
        );
        assert!(encode_after > encode_before);
        assert!(internal_after > internal_before);
    }
}
