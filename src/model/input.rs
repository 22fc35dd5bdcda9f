//! Reading JSON input with errors a user can act on: the field's path and the expected form
//! in JSON's terms (`spec.maxCheckAttempts: invalid type: string "x", expected an integer`),
//! never Rust's type names.

use regex_lite::Regex;
use serde::de::DeserializeOwned;
use std::sync::OnceLock;

/// An id or name as one path segment of a URL.
pub fn path_segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// Reads `T` from a JSON value.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    from_value_at("", value)
}

/// Reads `T` from a JSON value found at `at` (a field path such as `spec`) of the input.
pub fn from_value_at<T: DeserializeOwned>(at: &str, value: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| readable(at, e.path(), e.inner()))
}

/// Reads `T` from JSON text. Tracking the path slows every parse, so it is done
/// only for the message, after the plain parse failed.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value =
        serde_path_to_error::deserialize(&mut de).map_err(|e| readable("", e.path(), e.inner()))?;
    de.end().map_err(|e| plain(&e))?;
    Ok(value)
}

fn readable(prefix: &str, path: &serde_path_to_error::Path, e: &serde_json::Error) -> String {
    let text = plain(e);
    let mut inner = path.to_string();
    if inner == "." {
        inner.clear();
    }
    if text.starts_with("unknown field") {
        // The path ends with the unknown key itself; name where it was found.
        inner = inner
            .rsplit_once('.')
            .map(|(head, _)| head.to_string())
            .unwrap_or_default();
    }
    let at = match (prefix.is_empty(), inner.is_empty()) {
        (_, true) => prefix.to_string(),
        (true, false) => inner,
        (false, false) => format!("{prefix}.{inner}"),
    };
    if at.is_empty() {
        text
    } else {
        format!("{at}: {text}")
    }
}

/// The error's text with Rust's type names put in JSON's terms and no position.
fn plain(e: &serde_json::Error) -> String {
    static RUST_NAMES: OnceLock<[(Regex, &str); 7]> = OnceLock::new();
    let names = RUST_NAMES.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|_| unreachable!("a fixed pattern"));
        [
            (
                re(r"expected (u8|u16|u32|u64|u128|usize)\b"),
                "expected an integer of at least 0",
            ),
            (
                re(r"expected (i8|i16|i32|i64|i128|isize)\b"),
                "expected an integer",
            ),
            (re(r"expected (f32|f64)\b"), "expected a number"),
            (re(r"expected a sequence"), "expected a list"),
            (
                re(r"expected (a map|struct \w+|a \w+ map)"),
                "expected an object",
            ),
            (re(r"expected a borrowed string"), "expected a string"),
            (re(r" at line \d+ column \d+$"), ""),
        ]
    });
    let mut text = e.to_string();
    for (pattern, json_terms) in names {
        text = pattern.replace_all(&text, *json_terms).into_owned();
    }
    text
}

/// Characters that change how text around them reads without showing themselves: the bidi
/// controls (U+202E turns `exe.txt` into `txt.exe` on screen) and the zero-width ones (two
/// names that look the same). Refused in names, dropped by the command-line client.
pub fn is_hidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// Whether `address` reads as one e-mail address (`local@domain`, at most 254 characters): no
/// white space or control character, which in a mail header would start another header.
pub fn check_email(address: &str) -> Result<(), String> {
    let ok = address.len() <= 254
        && !address
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || is_hidden_format(c))
        && matches!(address.split_once('@'),
            Some((l, d)) if !l.is_empty() && !d.is_empty() && !d.contains('@'));
    if ok {
        Ok(())
    } else {
        Err(format!("{address:?} is not an e-mail address"))
    }
}

/// Text as HTML or XML character data (a feed, a report's page): markup escaped, and the
/// characters XML 1.0 cannot carry left out.
pub fn markup_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_path_segment() {
        assert_eq!(
            path_segment("web 01/disk?x=1&y"),
            "web%2001%2Fdisk%3Fx%3D1%26y"
        );
        assert_eq!(path_segment("plain"), "plain");
    }
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Spec {
        max_check_attempts: Option<u32>,
        ratio: Option<f64>,
        args: Option<Vec<String>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        spec: Spec,
    }

    #[test]
    fn errors_name_the_path_and_the_json_form() {
        let e = from_slice::<Body>(br#"{"spec": {"maxCheckAttempts": "three"}}"#).unwrap_err();
        assert_eq!(
            e,
            r#"spec.maxCheckAttempts: invalid type: string "three", expected an integer of at least 0"#
        );
        let e = from_slice::<Body>(br#"{"spec": {"ratio": "x"}}"#).unwrap_err();
        assert!(e.ends_with("expected a number"), "{e}");
        let e = from_slice::<Body>(br#"{"spec": {"args": "x"}}"#).unwrap_err();
        assert!(e.ends_with("expected a list"), "{e}");
        let e = from_slice::<Body>(br#"{"spec": 5}"#).unwrap_err();
        assert!(e.ends_with("expected an object"), "{e}");
        let e = from_value::<Body>(serde_json::json!({"specs": {}})).unwrap_err();
        assert!(
            e.starts_with("unknown field `specs`, expected `spec`"),
            "{e}"
        );
        let e = from_value::<Body>(serde_json::json!({"spec": {"colour": 1}})).unwrap_err();
        assert!(e.starts_with("spec: unknown field `colour`"), "{e}");
        let e = from_value_at::<Spec>("spec", serde_json::json!({"ratio": true})).unwrap_err();
        assert!(
            e.starts_with("spec.ratio: invalid type: boolean `true`"),
            "{e}"
        );
        let e = from_value_at::<Spec>("spec", serde_json::json!({"colour": 1})).unwrap_err();
        assert!(e.starts_with("spec: unknown field `colour`"), "{e}");
        let e = from_slice::<Body>(b"{}").unwrap_err();
        assert_eq!(e, "missing field `spec`");
        let e = from_slice::<Body>(br#"{"spec": {}} x"#).unwrap_err();
        assert_eq!(e, "trailing characters");
    }

    #[test]
    fn addresses_are_one_line_and_names_show_what_they_are() {
        assert!(check_email("ops@example.org").is_ok());
        for bad in [
            "ops@example.org\r\nBcc: x@y",
            "a b@c",
            "@c",
            "a@",
            "a@b@c",
            "a\u{202E}@b",
        ] {
            assert!(check_email(bad).is_err(), "{bad:?}");
        }
        assert!(is_hidden_format('\u{202E}') && is_hidden_format('\u{200B}'));
        assert!(!is_hidden_format('a') && !is_hidden_format('\u{00E9}'));
    }
}
