//! Metric series: Nagios performance data parsing, aggregate points, the three retention
//! tiers and how a query picks one.

use serde::Serialize;

/// One performance-data value: `'label'=value[UOM];[warn];[crit];[min];[max]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfValue {
    pub label: String,
    pub value: f64,
    pub unit: String,
    pub warn: Option<String>,
    pub crit: Option<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// Parses a performance-data string; malformed items and `U` (unknown) values are skipped, as
/// Icinga does.
pub fn parse_perfdata(perf: &str) -> Vec<PerfValue> {
    let mut out = Vec::new();
    let mut rest = perf.trim_start();
    while !rest.is_empty() {
        // The label: quoted ('' is a quote inside) or up to '='.
        let (label, after) = if let Some(quoted) = rest.strip_prefix('\'') {
            let mut label = String::new();
            let mut chars = quoted.char_indices().peekable();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                if c == '\'' {
                    if chars.peek().map(|(_, n)| *n) == Some('\'') {
                        label.push('\'');
                        chars.next();
                        continue;
                    }
                    end = Some(i + 1);
                    break;
                }
                label.push(c);
            }
            match end {
                Some(e) if label.trim().len() == label.len() => (label, &quoted[e..]),
                Some(e) => (label.trim().to_string(), &quoted[e..]),
                None => break,
            }
        } else {
            // An unquoted label has no blanks: a token without '=' is skipped.
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            match rest[..end].find('=') {
                Some(i) => (rest[..i].trim().to_string(), &rest[i..]),
                None => {
                    rest = rest[end..].trim_start();
                    continue;
                }
            }
        };
        let Some(after) = after.strip_prefix('=') else {
            // Skip the malformed token.
            rest = after
                .find(char::is_whitespace)
                .map_or("", |i| &after[i..])
                .trim_start();
            continue;
        };
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        let (token, tail) = after.split_at(end);
        rest = tail.trim_start();
        let mut fields = token.split(';');
        let first = fields.next().unwrap_or_default();
        let split = first
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(first.len());
        let (number, unit) = first.split_at(split);
        // A decimal comma (some plugins' locales) reads as a point.
        let parsed = if number.contains(',') {
            number.replace(',', ".").parse::<f64>()
        } else {
            number.parse::<f64>()
        };
        let Ok(value) = parsed else {
            continue;
        };
        if !value.is_finite() || label.is_empty() {
            continue;
        }
        let mut field = || {
            fields
                .next()
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_string)
        };
        let warn = field();
        let crit = field();
        let min = field().and_then(|f| f.parse().ok());
        let max = field().and_then(|f| f.parse().ok());
        out.push(PerfValue {
            label,
            value,
            unit: unit.to_string(),
            warn,
            crit,
            min,
            max,
        });
    }
    out
}

/// A Nagios threshold range: `10` (outside 0..10), `10:` (below 10), `~:10` (above 10),
/// `10:20` (outside), `@10:20` (inside alerts). Unit suffixes are stripped, not scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    start: f64,
    end: f64,
    inside: bool,
}

impl Range {
    pub fn parse(text: &str) -> Result<Range, String> {
        let bad = || format!("{text:?} is not a threshold range");
        let number = |s: &str| -> Result<f64, String> {
            let digits = s
                .trim()
                .trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
            digits.parse::<f64>().map_err(|_| bad())
        };
        let (inside, body) = match text.trim().strip_prefix('@') {
            Some(b) => (true, b),
            None => (false, text.trim()),
        };
        let (start, end) = match body.split_once(':') {
            Some((a, b)) => {
                let start = match a {
                    "~" => f64::NEG_INFINITY,
                    "" => 0.0,
                    a => number(a)?,
                };
                let end = if b.is_empty() {
                    f64::INFINITY
                } else {
                    number(b)?
                };
                (start, end)
            }
            None => (0.0, number(body)?),
        };
        if start > end {
            return Err(bad());
        }
        Ok(Range { start, end, inside })
    }

    pub fn alerts(&self, v: f64) -> bool {
        let within = self.start <= v && v <= self.end;
        within == self.inside
    }

    /// Its finite ends, where a graph draws its threshold lines.
    pub fn bounds(&self) -> impl Iterator<Item = f64> {
        [self.start, self.end]
            .into_iter()
            .filter(|b| b.is_finite())
            .filter(move |b| *b != 0.0 || self.start != 0.0 || self.inside)
    }
}

/// Count, sum, minimum, maximum and last value of the samples in a bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agg {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub last: f64,
}

impl Agg {
    pub fn of(v: f64) -> Self {
        Agg {
            count: 1,
            sum: v,
            min: v,
            max: v,
            last: v,
        }
    }

    /// Folds `later` (samples after these) into this aggregate.
    pub fn merge(&mut self, later: &Agg) {
        self.count += later.count;
        self.sum += later.sum;
        self.min = self.min.min(later.min);
        self.max = self.max.max(later.max);
        self.last = later.last;
    }

    pub fn value(&self, f: AggFn) -> f64 {
        match f {
            AggFn::Avg => self.sum / self.count.max(1) as f64,
            AggFn::Min => self.min,
            AggFn::Max => self.max,
            AggFn::Sum => self.sum,
            AggFn::Last => self.last,
            AggFn::Count => self.count as f64,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AggFn {
    Avg,
    Min,
    Max,
    Sum,
    Last,
    Count,
}

impl std::str::FromStr for AggFn {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "avg" | "mean" => AggFn::Avg,
            "min" => AggFn::Min,
            "max" => AggFn::Max,
            "sum" => AggFn::Sum,
            "last" => AggFn::Last,
            "count" => AggFn::Count,
            _ => {
                return Err(format!(
                    "agg {s:?} is not avg, min, max, sum, last or count"
                ));
            }
        })
    }
}

/// The retention tiers: raw samples, 5-minute and 1-hour aggregates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum Tier {
    #[serde(rename = "raw")]
    Raw,
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}

pub const DAY_MS: i64 = 86_400_000;

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Raw, Tier::FiveMinutes, Tier::OneHour];

    /// Bucket width in milliseconds (raw samples: none).
    pub fn step_ms(self) -> i64 {
        match self {
            Tier::Raw => 0,
            Tier::FiveMinutes => 300_000,
            Tier::OneHour => 3_600_000,
        }
    }

    /// How long the tier keeps data: 30 days, 400 days, 5 years.
    pub fn retention_ms(self) -> i64 {
        match self {
            Tier::Raw => 30 * DAY_MS,
            Tier::FiveMinutes => 400 * DAY_MS,
            Tier::OneHour => 5 * 365 * DAY_MS,
        }
    }

    /// The bucket a sample at `ms` falls into.
    pub fn bucket(self, ms: i64) -> i64 {
        match self.step_ms() {
            0 => ms,
            s => ms - ms.rem_euclid(s),
        }
    }
}

/// Automatic resolution: the finest tier that still holds `from` and whose points need no more
/// than `max_points` buckets of at least `min_step_ms`; returns it with the step the points are
/// grouped by (0: raw samples as they are).
pub fn plan(
    now_ms: i64,
    from_ms: i64,
    to_ms: i64,
    max_points: u32,
    min_step_ms: i64,
) -> (Tier, i64) {
    let span = (to_ms - from_ms).max(1);
    let wanted = (span + i64::from(max_points.max(1)) - 1) / i64::from(max_points.max(1));
    let wanted = wanted.max(min_step_ms);
    let tier =
        if from_ms >= now_ms - Tier::Raw.retention_ms() && wanted < Tier::FiveMinutes.step_ms() {
            Tier::Raw
        } else if from_ms >= now_ms - Tier::FiveMinutes.retention_ms()
            && wanted < Tier::OneHour.step_ms()
        {
            Tier::FiveMinutes
        } else {
            Tier::OneHour
        };
    let step = match tier.step_ms() {
        // Raw samples are grouped only when a step is asked for or they would be too many;
        // the caller groups by `wanted` when there are more samples than points.
        0 => wanted,
        s => ((wanted + s - 1) / s).max(1) * s,
    };
    (tier, step)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph draws a threshold where its range begins to alert.
    #[test]
    fn a_thresholds_lines_are_its_finite_ends() {
        let ends = |r: &str| Range::parse(r).unwrap().bounds().collect::<Vec<_>>();
        assert_eq!(ends("90"), [90.0]);
        assert_eq!(ends("10:"), [10.0]);
        assert_eq!(ends("~:90"), [90.0]);
        assert_eq!(ends("10:20"), [10.0, 20.0]);
        assert_eq!(ends("@0:10"), [0.0, 10.0]);
        assert!(Range::parse("20:10").is_err());
    }

    #[test]
    fn perfdata() {
        let p = parse_perfdata(
            "rta=0.052000ms;200.000000;500.000000;0.000000 pl=0%;40;80;0 'disk /var'=42.5GB;80;90;0;100 bad novalue= x=U ''quoted''=1",
        );
        let labels: Vec<&str> = p.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["rta", "pl", "disk /var"]);
        assert_eq!(p[0].value, 0.052);
        assert_eq!(p[0].unit, "ms");
        assert_eq!(p[0].warn.as_deref(), Some("200.000000"));
        assert_eq!(p[0].min, Some(0.0));
        assert_eq!(p[1].unit, "%");
        assert_eq!(p[2].value, 42.5);
        assert_eq!(p[2].max, Some(100.0));
        assert_eq!(parse_perfdata("time=0.001s size=512B")[1].value, 512.0);
        assert!(parse_perfdata("").is_empty());
        assert_eq!(parse_perfdata("'it''s'=3")[0].label, "it's");
    }

    #[test]
    fn aggregates_merge() {
        let mut a = Agg::of(2.0);
        a.merge(&Agg::of(6.0));
        a.merge(&Agg::of(1.0));
        assert_eq!(a.value(AggFn::Avg), 3.0);
        assert_eq!(a.value(AggFn::Min), 1.0);
        assert_eq!(a.value(AggFn::Max), 6.0);
        assert_eq!(a.value(AggFn::Last), 1.0);
        assert_eq!(a.value(AggFn::Count), 3.0);
    }

    #[test]
    fn resolution_follows_range_and_retention() {
        let now = 1_000 * DAY_MS;
        let hour = 3_600_000;
        assert_eq!(plan(now, now - hour, now, 500, 0).0, Tier::Raw);
        assert_eq!(
            plan(now, now - 7 * DAY_MS, now, 500, 0),
            (Tier::FiveMinutes, 1_500_000)
        );
        assert_eq!(
            plan(now, now - 60 * DAY_MS, now, 2000, 0).0,
            Tier::FiveMinutes,
            "raw expired"
        );
        assert_eq!(
            plan(now, now - 500 * DAY_MS, now, 100_000, 0).0,
            Tier::OneHour
        );
        assert_eq!(
            plan(now, now - hour, now, 500, 300_000),
            (Tier::FiveMinutes, 300_000)
        );
        assert_eq!(Tier::FiveMinutes.bucket(299_999), 0);
        assert_eq!(Tier::OneHour.bucket(3_600_001), 3_600_000);
    }

    proptest::proptest! {
        /// Fuzz: performance data from any plugin output is parsed or skipped, never a crash.
        #[test]
        fn any_perfdata_is_parsed_or_skipped(input in ".{0,120}") {
            for v in parse_perfdata(&input) {
                proptest::prop_assert!(!v.label.is_empty());
            }
        }

        #[test]
        fn perfdata_soup_is_parsed_or_skipped(
            tokens in proptest::collection::vec(
                proptest::sample::select(vec!["'", "''", "=", ";", " ", "1", "-2.5", "e9", "U", "ms", "%", "label", "NaN", "inf", "."]),
                0..60,
            )
        ) {
            let _ = parse_perfdata(&tokens.concat());
        }
    }
}
