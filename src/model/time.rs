//! Timestamps: RFC 3339 UTC with millisecond precision on output; offsets and fractions accepted on input.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub jiff::Timestamp);

impl Timestamp {
    pub fn from_millis(ms: i64) -> Option<Self> {
        jiff::Timestamp::from_millisecond(ms).ok().map(Self)
    }

    pub fn as_millis(&self) -> i64 {
        self.0.as_millisecond()
    }

    /// `self - earlier`, zero when `earlier` is later.
    pub fn since(&self, earlier: Timestamp) -> std::time::Duration {
        let ms = self.as_millis().saturating_sub(earlier.as_millis());
        std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// `self + d`, saturating at the latest representable time (never wrapping to now).
    pub fn plus(&self, d: std::time::Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_millis(self.as_millis().saturating_add(ms))
            .unwrap_or(Timestamp(jiff::Timestamp::MAX))
    }

    /// `self - d`, saturating at the earliest representable time.
    pub fn minus(&self, d: std::time::Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp::from_millis(self.as_millis().saturating_sub(ms))
            .unwrap_or(Timestamp(jiff::Timestamp::MIN))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millisecond();
        let truncated = jiff::Timestamp::from_millisecond(ms).unwrap_or(self.0);
        write!(f, "{truncated:.3}")
    }
}

impl FromStr for Timestamp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<jiff::Timestamp>()
            .map(Timestamp)
            .map_err(|e| format!("not an RFC 3339 timestamp: {e}"))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "RFC 3339; written in UTC with milliseconds"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_utc_with_millis() {
        let t: Timestamp = "2026-03-01T12:00:00.123456+02:00".parse().unwrap();
        assert_eq!(t.to_string(), "2026-03-01T10:00:00.123Z");
        let t: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
        assert_eq!(t.to_string(), "2026-03-01T12:00:00.000Z");
    }

    #[test]
    fn rejects_garbage() {
        assert!("yesterday".parse::<Timestamp>().is_err());
    }
}
