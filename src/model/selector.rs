//! The label selector of SPEC 2.1: comma-separated terms joined by AND, with `=`/`==`, `!=`,
//! `in (a,b)`, `notin (a,b)`, bare `key` (exists) and `!key` (does not exist). One parser, used by
//! every list filter, silence, downtime, business service, dashboard and the SSE filter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    pub terms: Vec<Term>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector: {0}")]
pub struct SelectorError(pub String);

/// Anything labels can be looked up in.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for HashMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for serde_json::Map<String, serde_json::Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(serde_json::Value::as_str)
    }
}

impl Term {
    pub fn matches(&self, labels: &impl Labels) -> bool {
        match self {
            Term::Eq(k, v) => labels.label(k) == Some(v.as_str()),
            Term::NotEq(k, v) => labels.label(k) != Some(v.as_str()),
            Term::In(k, set) => labels.label(k).is_some_and(|v| set.contains(v)),
            Term::NotIn(k, set) => !labels.label(k).is_some_and(|v| set.contains(v)),
            Term::Exists(k) => labels.label(k).is_some(),
            Term::NotExists(k) => labels.label(k).is_none(),
        }
    }
}

impl Selector {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// A selector that matches nothing: what a saved selector that no longer parses (a damaged
    /// row, a stricter parser after an upgrade) stands for, so that it silences or covers
    /// nothing rather than everything.
    pub fn nothing() -> Selector {
        Selector {
            terms: vec![Term::In(String::new(), BTreeSet::new())],
        }
    }

    pub fn matches(&self, labels: &impl Labels) -> bool {
        self.terms.iter().all(|t| t.matches(labels))
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')
}

fn is_value_char(c: char) -> bool {
    !(c.is_whitespace() || matches!(c, ',' | '(' | ')' | '=' | '!'))
}

fn check_key(key: &str, term: &str) -> Result<String, SelectorError> {
    if key.is_empty() || !key.chars().all(is_key_char) {
        return Err(SelectorError(format!("invalid label key in {term:?}")));
    }
    Ok(key.to_string())
}

fn check_value(value: &str, term: &str) -> Result<String, SelectorError> {
    if !value.chars().all(is_value_char) {
        return Err(SelectorError(format!("invalid label value in {term:?}")));
    }
    Ok(value.to_string())
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => {
                if depth > 0 {
                    return Err(SelectorError("nested parentheses".into()));
                }
                depth += 1;
            }
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| SelectorError("unbalanced ')'".into()))?;
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError("missing ')'".into()));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_set(rest: &str, term: &str) -> Result<BTreeSet<String>, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("expected a parenthesised list in {term:?}")))?;
    let mut set = BTreeSet::new();
    for v in inner.split(',') {
        let v = v.trim();
        if v.is_empty() {
            return Err(SelectorError(format!("empty value in list of {term:?}")));
        }
        set.insert(check_value(v, term)?);
    }
    Ok(set)
}

fn parse_term(raw: &str) -> Result<Term, SelectorError> {
    let term = raw.trim();
    if term.is_empty() {
        return Err(SelectorError("empty term".into()));
    }
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Term::NotExists(check_key(key.trim(), term)?));
    }
    let key_end = term.find(|c: char| !is_key_char(c)).unwrap_or(term.len());
    let key = check_key(&term[..key_end], term)?;
    let rest = term[key_end..].trim_start();
    if rest.is_empty() {
        return Ok(Term::Exists(key));
    }
    if let Some(v) = rest.strip_prefix("!=") {
        return Ok(Term::NotEq(key, check_value(v.trim(), term)?));
    }
    if let Some(v) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
        return Ok(Term::Eq(key, check_value(v.trim(), term)?));
    }
    // `in`/`notin` must be separated from the key by white space.
    if key_end < term.len() && term[key_end..].starts_with(char::is_whitespace) {
        if let Some(r) = rest.strip_prefix("notin")
            && r.starts_with(|c: char| c.is_whitespace() || c == '(')
        {
            return Ok(Term::NotIn(key, parse_set(r, term)?));
        }
        if let Some(r) = rest.strip_prefix("in")
            && r.starts_with(|c: char| c.is_whitespace() || c == '(')
        {
            return Ok(Term::In(key, parse_set(r, term)?));
        }
    }
    Err(SelectorError(format!("unknown operator in {term:?}")))
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Ok(Selector::default());
        }
        let terms = split_terms(s)?
            .into_iter()
            .map(parse_term)
            .collect::<Result<_, _>>()?;
        Ok(Selector { terms })
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Term::Eq(k, v) => write!(f, "{k}={v}"),
            Term::NotEq(k, v) => write!(f, "{k}!={v}"),
            Term::In(k, s) => write!(f, "{k} in ({})", join(s)),
            Term::NotIn(k, s) => write!(f, "{k} notin ({})", join(s)),
            Term::Exists(k) => write!(f, "{k}"),
            Term::NotExists(k) => write!(f, "!{k}"),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.terms.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> Selector {
        s.parse().unwrap()
    }

    #[test]
    fn every_operator() {
        let l = labels(&[("env", "prod"), ("tier", "web"), ("site", "")]);
        assert!(sel("env=prod").matches(&l));
        assert!(sel("env==prod").matches(&l));
        assert!(!sel("env!=prod").matches(&l));
        assert!(sel("env!=dev").matches(&l));
        assert!(sel("missing!=x").matches(&l));
        assert!(sel("env in (dev, prod)").matches(&l));
        assert!(!sel("env notin (dev,prod)").matches(&l));
        assert!(sel("missing notin (a)").matches(&l));
        assert!(!sel("missing in (a)").matches(&l));
        assert!(sel("tier").matches(&l));
        assert!(sel("!missing").matches(&l));
        assert!(!sel("!tier").matches(&l));
        assert!(sel("env=prod, tier in (web,db), !gone").matches(&l));
        assert!(!sel("env=prod,tier=db").matches(&l));
        assert!(sel("").matches(&l));
        assert!(sel("site=").matches(&l));
        assert!(sel("team.io/owner=a").matches(&labels(&[("team.io/owner", "a")])));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "env=prod,",
            ",",
            "env in prod",
            "env in (a",
            "env in ()",
            "a)",
            "=x",
            "env ~ x",
            "env=a b",
            "env in ((a))",
            "env notin",
            "!",
            "e nv=x",
            "env=(x)",
            "env=a,,b=c",
        ] {
            assert!(
                bad.parse::<Selector>().is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    fn key() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9._/-]{0,8}".prop_filter("in/notin are keywords", |k| k != "in" && k != "notin")
    }

    fn value() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._:-]{1,8}"
    }

    fn term() -> impl Strategy<Value = Term> {
        prop_oneof![
            (key(), value()).prop_map(|(k, v)| Term::Eq(k, v)),
            (key(), value()).prop_map(|(k, v)| Term::NotEq(k, v)),
            (key(), proptest::collection::btree_set(value(), 1..4))
                .prop_map(|(k, s)| Term::In(k, s)),
            (key(), proptest::collection::btree_set(value(), 1..4))
                .prop_map(|(k, s)| Term::NotIn(k, s)),
            key().prop_map(Term::Exists),
            key().prop_map(Term::NotExists),
        ]
    }

    proptest! {
        #[test]
        fn display_parses_back(terms in proptest::collection::vec(term(), 1..5)) {
            let s = Selector { terms };
            prop_assert_eq!(s.to_string().parse::<Selector>().unwrap(), s);
        }

        #[test]
        fn never_panics(input in ".{0,40}") {
            let _ = input.parse::<Selector>();
        }

        #[test]
        fn negations_are_complements(
            t in term(),
            pairs in proptest::collection::btree_map(key(), value(), 0..4),
        ) {
            let negated = match &t {
                Term::Eq(k, v) => Term::NotEq(k.clone(), v.clone()),
                Term::NotEq(k, v) => Term::Eq(k.clone(), v.clone()),
                Term::In(k, s) => Term::NotIn(k.clone(), s.clone()),
                Term::NotIn(k, s) => Term::In(k.clone(), s.clone()),
                Term::Exists(k) => Term::NotExists(k.clone()),
                Term::NotExists(k) => Term::Exists(k.clone()),
            };
            prop_assert_ne!(t.matches(&pairs), negated.matches(&pairs));
        }

        #[test]
        fn conjunction_is_and(a in term(), b in term(), pairs in proptest::collection::btree_map(key(), value(), 0..4)) {
            let both = Selector { terms: vec![a.clone(), b.clone()] };
            prop_assert_eq!(both.matches(&pairs), a.matches(&pairs) && b.matches(&pairs));
        }
    }
}
