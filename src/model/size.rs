//! Sizes as people write them: `500MB`, `512MiB`, `1.6TB`.

use serde::{Deserialize, Serialize};

/// A number of bytes, written as a number or with a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ByteSize(pub u64);

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let number: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: a number of bytes, as 500MB or 512MiB"))?;
        let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "mb" => 1000_u64.pow(2),
            "gb" => 1000_u64.pow(3),
            "tb" => 1000_u64.pow(4),
            "kib" => 1024,
            "mib" => 1024_u64.pow(2),
            "gib" => 1024_u64.pow(3),
            "tib" => 1024_u64.pow(4),
            other => return Err(format!("{text:?}: unknown unit {other:?}")),
        };
        Ok(ByteSize((number * scale as f64).round() as u64))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}
