//! The one keyset pagination helper (SPEC 8): `limit` and `cursor` in, `{items, nextCursor?}` out.

use serde::Deserialize;

/// Per-endpoint defaults and maxima.
#[derive(Clone, Copy, Debug)]
pub struct PageRules {
    pub default: usize,
    /// `None`: no maximum beyond the default's own semantics.
    pub max: Option<usize>,
}

pub const OBJECTS: PageRules = PageRules {
    default: 200,
    max: Some(5000),
};
pub const ALERTS: PageRules = PageRules {
    default: 100,
    max: Some(1000),
};
pub const INCIDENTS: PageRules = PageRules {
    default: 50,
    max: Some(500),
};
pub const EVENTS: PageRules = PageRules {
    default: 200,
    max: Some(1000),
};
pub const CONFIG_KINDS: PageRules = PageRules {
    default: 500,
    max: Some(2000),
};
pub const PROBLEMS: PageRules = PageRules {
    default: 500,
    max: None,
};
pub const DEAD_LETTERS: PageRules = PageRules {
    default: 100,
    max: Some(1000),
};
pub const REPORT_ARCHIVE: PageRules = PageRules {
    default: 100,
    max: Some(1000),
};
pub const DISCOVERY_SCANS: PageRules = PageRules {
    default: 50,
    max: Some(50),
};
pub const AUDIT: PageRules = PageRules {
    default: 200,
    max: Some(5000),
};

/// The raw query parameters; `limit` stays a string because non-integers are ignored, not errors.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PageQuery {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// A request for one page: at most `limit` items after `cursor` (exclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: usize,
    pub cursor: Option<String>,
}

impl PageQuery {
    /// Non-integer, non-positive or above-maximum limits fall back to the default.
    pub fn resolve(&self, rules: PageRules) -> PageRequest {
        let limit = self
            .limit
            .as_deref()
            .and_then(|l| l.trim().parse::<usize>().ok())
            .filter(|&l| l > 0 && rules.max.is_none_or(|m| l <= m))
            .unwrap_or(rules.default);
        let cursor = self.cursor.clone().filter(|c| !c.is_empty());
        PageRequest { limit, cursor }
    }
}

pub use crate::model::page::Page;

impl<T> Page<T> {
    /// A page of items fetched with `req.limit`; `nextCursor` is the last item's key when the
    /// page is full (a full last page may still carry one, as SPEC 8 allows).
    pub fn new(items: Vec<T>, req: &PageRequest, key: impl Fn(&T) -> String) -> Self {
        let next_cursor = if items.len() == req.limit {
            items.last().map(key)
        } else {
            None
        };
        Self { items, next_cursor }
    }

    /// A page of a list held whole, in its order: the items after the one whose key is
    /// `req.cursor` (all of them when no item has it), at most `req.limit`.
    pub fn after(items: Vec<T>, req: &PageRequest, key: impl Fn(&T) -> String) -> Self {
        let start = req
            .cursor
            .as_ref()
            .and_then(|c| items.iter().position(|i| &key(i) == c))
            .map_or(0, |at| at + 1);
        let page: Vec<T> = items.into_iter().skip(start).take(req.limit).collect();
        Self::new(page, req, key)
    }

    /// A list without paging.
    pub fn all(items: Vec<T>) -> Self {
        Self {
            items,
            next_cursor: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(limit: Option<&str>) -> PageQuery {
        PageQuery {
            limit: limit.map(String::from),
            cursor: None,
        }
    }

    #[test]
    fn limit_rules() {
        assert_eq!(q(None).resolve(OBJECTS).limit, 200);
        assert_eq!(q(Some("10")).resolve(OBJECTS).limit, 10);
        assert_eq!(q(Some("5000")).resolve(OBJECTS).limit, 5000);
        assert_eq!(
            q(Some("5001")).resolve(OBJECTS).limit,
            200,
            "above max falls back"
        );
        assert_eq!(
            q(Some("ten")).resolve(OBJECTS).limit,
            200,
            "non-integer ignored"
        );
        assert_eq!(q(Some("2.5")).resolve(EVENTS).limit, 200);
        assert_eq!(q(Some("0")).resolve(ALERTS).limit, 100);
        assert_eq!(q(Some("-3")).resolve(INCIDENTS).limit, 50);
    }

    #[test]
    fn next_cursor_only_on_full_pages() {
        let req = PageRequest {
            limit: 2,
            cursor: None,
        };
        let full = Page::new(vec!["a", "b"], &req, |s| s.to_string());
        assert_eq!(full.next_cursor.as_deref(), Some("b"));
        let short = Page::new(vec!["a"], &req, |s| s.to_string());
        assert_eq!(short.next_cursor, None);
        let json = serde_json::to_value(&short).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"items": ["a"]}),
            "nextCursor omitted"
        );
    }
}
