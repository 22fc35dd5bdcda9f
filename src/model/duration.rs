//! Durations: accepted as `"30s"`, `"5m"`, `"1h30m"`, `"250ms"` or a bare integer of seconds,
//! written in Go's format (`"30s"`, `"5m0s"`, `"1h30m0s"`), as clients of the interface expect.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    pub fn from_secs(s: u64) -> Self {
        Self(Duration::from_secs(s))
    }
}

/// The longest duration accepted: Go's (`2562047h47m16.854775807s`, about 292 years), which
/// every time the service computes with stays within.
pub const MAX: Duration = Duration::new(9_223_372_036, 854_775_807);

fn bounded(input: &str, d: Duration) -> Result<GoDuration, String> {
    if d > MAX {
        return Err(format!(
            "duration {input:?} is too large (at most 2562047h, about 292 years)"
        ));
    }
    Ok(GoDuration(d))
}

impl FromStr for GoDuration {
    type Err = String;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let s = input.trim();
        if s.is_empty() {
            return Err("empty duration".into());
        }
        if let Ok(secs) = s.parse::<u64>() {
            return bounded(input, Duration::from_secs(secs));
        }
        let mut total: u128 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("duration {input:?} is missing a unit"))?;
            if num_len == 0 {
                return Err(format!("invalid duration {input:?}"));
            }
            let (num, tail) = rest.split_at(num_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_len);
            let nanos_per_unit: u128 = match unit {
                "ns" => 1,
                "us" | "µs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => return Err(format!("unknown unit {unit:?} in duration {input:?}")),
            };
            let value: f64 = num
                .parse()
                .map_err(|_| format!("invalid number {num:?} in duration {input:?}"))?;
            // Whole part exactly, fraction through f64: enough for sub-unit precision.
            let whole = value.trunc() as u128;
            let frac = ((value - value.trunc()) * nanos_per_unit as f64).round() as u128;
            total = total
                .checked_add(whole.saturating_mul(nanos_per_unit) + frac)
                .ok_or_else(|| format!("duration {input:?} is too large"))?;
            rest = next;
        }
        let secs = u64::try_from(total / 1_000_000_000)
            .map_err(|_| format!("duration {input:?} is too large"))?;
        let nanos = (total % 1_000_000_000) as u32;
        bounded(input, Duration::new(secs, nanos))
    }
}

/// Go's `time.Duration.String()` for non-negative durations.
impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let nanos = d.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < 1_000_000_000 {
            let (unit, div) = if nanos < 1_000 {
                ("ns", 1)
            } else if nanos < 1_000_000 {
                ("µs", 1_000)
            } else {
                ("ms", 1_000_000)
            };
            return write!(f, "{}{unit}", fraction(nanos, div));
        }
        let total_secs = d.as_secs();
        let hours = total_secs / 3600;
        let minutes = (total_secs % 3600) / 60;
        let secs = fraction(
            u128::from(total_secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
            1_000_000_000,
        );
        if hours > 0 {
            write!(f, "{hours}h{minutes}m{secs}s")
        } else if minutes > 0 {
            write!(f, "{minutes}m{secs}s")
        } else {
            write!(f, "{secs}s")
        }
    }
}

/// `value / div` with the fraction's trailing zeros removed, as Go prints it.
fn fraction(value: u128, div: u128) -> String {
    let whole = value / div;
    let rem = value % div;
    if rem == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{rem:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as \"30s\", \"5m\" or a number of seconds")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<GoDuration, E> {
                bounded(&v.to_string(), Duration::from_secs(v)).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<GoDuration, E> {
                let secs =
                    u64::try_from(v).map_err(|_| E::custom("a duration cannot be negative"))?;
                self.visit_u64(secs)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
impl schemars::JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A Go duration (\"30s\", \"5m0s\", \"1h30m0s\", \"250ms\"); written in Go's form, read also as whole seconds",
            "oneOf": [
                {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^[0-9]+$"},
                {"type": "integer", "minimum": 0}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Duration {
        s.parse::<GoDuration>().unwrap().0
    }

    #[test]
    fn parses_the_accepted_forms() {
        assert_eq!(p("30s"), Duration::from_secs(30));
        assert_eq!(p("5m"), Duration::from_secs(300));
        assert_eq!(p("1h30m"), Duration::from_secs(5400));
        assert_eq!(p("90"), Duration::from_secs(90));
        assert_eq!(p("250ms"), Duration::from_millis(250));
        assert_eq!(p("1.5h"), Duration::from_secs(5400));
        for bad in ["", "5x", "m", "1h-3m", "abc", "100000000h", "9223372037"] {
            assert!(bad.parse::<GoDuration>().is_err(), "{bad:?} should fail");
        }
        assert_eq!(p("2562047h"), Duration::from_secs(2_562_047 * 3600));
        let huge: Result<GoDuration, _> = serde_json::from_value(serde_json::json!(u64::MAX));
        assert!(huge.is_err(), "a bare number past the bound is refused too");
    }

    #[test]
    fn writes_go_format() {
        let f = |d: Duration| GoDuration(d).to_string();
        assert_eq!(f(Duration::from_secs(30)), "30s");
        assert_eq!(f(Duration::from_secs(300)), "5m0s");
        assert_eq!(f(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(f(Duration::ZERO), "0s");
        assert_eq!(f(Duration::from_millis(1500)), "1.5s");
        assert_eq!(f(Duration::from_millis(300)), "300ms");
        assert_eq!(f(Duration::from_secs(86400)), "24h0m0s");
    }

    #[test]
    fn serde_accepts_integers_and_strings() {
        let d: GoDuration = serde_json::from_str("60").unwrap();
        assert_eq!(d.0, Duration::from_secs(60));
        let d: GoDuration = serde_json::from_str("\"2m\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"2m0s\"");
        assert!(serde_json::from_str::<GoDuration>("-5").is_err());
    }

    proptest::proptest! {
        /// Fuzz: any text is a duration or an error, and what it writes parses back.
        #[test]
        fn any_text_parses_or_is_refused(input in ".{0,40}") {
            let _ = input.parse::<GoDuration>();
        }

        #[test]
        fn numbers_and_units_round_trip(
            parts in proptest::collection::vec(
                ("[0-9]{1,25}(\\.[0-9]{0,12})?", proptest::sample::select(vec!["ns", "us", "µs", "ms", "s", "m", "h", "x", ""])),
                1..6,
            )
        ) {
            let text: String = parts.iter().map(|(n, u)| format!("{n}{u}")).collect();
            if let Ok(d) = text.parse::<GoDuration>() {
                proptest::prop_assert_eq!(d.to_string().parse::<GoDuration>(), Ok(d));
            }
        }
    }
}
