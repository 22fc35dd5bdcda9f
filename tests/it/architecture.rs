//! Fails on an import the dependency rules of DESIGN.md forbid.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What each top-level module may import (besides itself).
fn allowed(module: &str) -> Option<&'static [&'static str]> {
    const DOMAIN: &[&str] = &[
        "model", "runtime", "store", "auth", "events", "hw", "config",
    ];
    Some(match module {
        "model" => &[],
        "runtime" => &["model"],
        "hw" => &["model", "runtime"],
        "store" => &["model", "runtime"],
        "config" => &["model"],
        "auth" | "events" => &["model", "runtime", "store", "config"],
        "monitor" | "alerting" | "notify" | "ingress" | "federation" | "inventory" | "reports" => {
            DOMAIN
        }
        "web" => &["model", "auth"],
        // The agent reaches the other domains only through the API (its `ToolRunner` port);
        // it seals connection keys with the inventory's secrets.
        "ai" => &[
            "model",
            "runtime",
            "store",
            "auth",
            "events",
            "hw",
            "config",
            "inventory",
        ],
        "api" => &[
            "model",
            "runtime",
            "store",
            "auth",
            "events",
            "hw",
            "config",
            "monitor",
            "alerting",
            "notify",
            "ingress",
            "federation",
            "inventory",
            "reports",
            "web",
            "api",
            "ai",
        ],
        "cli" => &["model"],
        "app" => return None,
        _ => return Some(&[]),
    })
}

/// Top-level modules named after `crate::` in a source text, including `use crate::{a, b}`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each item at depth 0 of the group starts with a top-level module name.
            let mut depth = 0;
            let mut at_item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_item_start = true,
                    c if at_item_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if at_item_start && !name.is_empty() => {
                        found.insert(std::mem::take(&mut name));
                        at_item_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                found.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Top-level modules a file at `rel` (relative to `src/`) reaches through `super::` chains
/// long enough to climb to the crate root (`super::super::alerting` from `notify/channels.rs`).
/// Its test module, one level deeper, is left out.
fn super_imports(rel: &Path, text: &str) -> BTreeSet<String> {
    let text = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
    let parts = rel.components().count();
    let depth = if rel.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    };
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("super::") {
        // Only the start of a chain counts.
        if text[..i].ends_with("super::") {
            continue;
        }
        let mut rest = &text[i..];
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = r;
        }
        if climbs < depth {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            visit(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

#[test]
fn dependency_rules_hold() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut violations: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .to_string();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "main" || module == "lib" {
            continue;
        }
        let Some(ok) = allowed(&module) else { continue };
        let text = std::fs::read_to_string(f).unwrap();
        for imported in imports(&text).into_iter().chain(super_imports(rel, &text)) {
            if imported != module && !ok.contains(&imported.as_str()) {
                violations
                    .entry(rel.display().to_string())
                    .or_default()
                    .push(imported);
            }
        }
        // Handlers reach storage only through domain modules; `mod.rs` (the shared state) and
        // `error.rs` (the one error mapping) may name the store.
        let api_file = rel.to_string_lossy().to_string();
        if module == "api"
            && !["api/mod.rs", "api/error.rs"].contains(&api_file.as_str())
            && imports(&text).contains("store")
        {
            violations
                .entry(api_file.clone())
                .or_default()
                .push("store (from a handler)".into());
        }
        // A module's root names its children; it does not reach up to its parent.
        if rel.file_name().is_some_and(|n| n == "mod.rs") && reaches_up(&text) {
            violations
                .entry(api_file.clone())
                .or_default()
                .push("super:: from a mod.rs".into());
        }
        // No module re-exports a redb type under another name.
        if text
            .lines()
            .any(|l| l.trim_start().starts_with("pub use") && l.contains("redb"))
        {
            violations
                .entry(api_file)
                .or_default()
                .push("re-export of redb".into());
        }
        let names_redb =
            text.contains("redb::") || text.lines().any(|l| l.trim_start().starts_with("use redb"));
        if module != "store" && names_redb {
            violations
                .entry(rel.display().to_string())
                .or_default()
                .push("redb".into());
        }
    }
    assert!(violations.is_empty(), "forbidden imports: {violations:#?}");
}

/// The crate denies `unsafe_code`; the exempt files are the memory release (mi_collect,
/// madvise) and the programs' confinement (the Landlock system calls, in the forked child).
const UNSAFE_ALLOWED_IN: [&str; 2] = ["runtime/memory.rs", "runtime/sandbox.rs"];

/// Whether a file exempts itself from the crate's `unsafe_code` lint.
fn allows_unsafe(text: &str) -> bool {
    text.lines()
        .any(|l| l.contains("allow(unsafe_code)") || l.contains("expect(unsafe_code)"))
}

/// The files under `src/` (paths relative to it, sorted) whose text `holds`.
fn sources_where(holds: impl Fn(&str) -> bool) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|f| holds(&std::fs::read_to_string(f).unwrap()))
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    found.sort();
    found
}

#[test]
fn unsafe_code_stays_in_its_two_files() {
    let exempt = sources_where(allows_unsafe);
    assert_eq!(exempt, UNSAFE_ALLOWED_IN.map(String::from).to_vec());
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(manifest.contains("unsafe_code = \"deny\""));
    assert!(allows_unsafe("#[allow(unsafe_code)]\nfn f() {}\n"));
    assert!(!allows_unsafe("#[allow(clippy::unwrap_used)]\nfn f() {}\n"));
}

/// Issue 68, item 3: what saving an alert implies (its chain disarmed, its object's live state
/// showing the acknowledgement) is `alerting`'s, so every change to an alert goes through
/// `alerting::lifecycle::store_alert`, the one caller of the kernel's row write.
#[test]
fn alerts_are_saved_through_the_alerting_domain() {
    let callers = sources_where(|text| text.contains(".save_alert("));
    assert_eq!(callers, ["alerting/lifecycle.rs"]);
}

/// A user's address is checked against the tenants' claimed e-mail domains in the one
/// function that saves users.
#[test]
fn users_are_saved_through_the_identity_domain() {
    let callers = sources_where(|text| text.contains("tx.save_user("));
    assert_eq!(callers, ["auth/users.rs"]);
}

/// Whether a `mod.rs` imports from its parent outside its test module.
fn reaches_up(text: &str) -> bool {
    let tests_start = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..tests_start].lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("use super::") || l.starts_with("pub use super::")
    })
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert!(reaches_up("use crate::model;\nuse super::Sibling;\n"));
    assert!(!reaches_up(
        "use crate::model;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"
    ));
}

/// An edge through `super::` chains is seen like one through `crate::`: the rules cannot be
/// passed by climbing.
#[test]
fn the_scanner_sees_edges_through_super_chains() {
    let injected = "use super::super::super::alerting::Alerting;\nuse super::Sibling;\n";
    let found = super_imports(Path::new("notify/channels/http.rs"), injected);
    assert_eq!(found, ["alerting".to_string()].into_iter().collect());
    assert!(
        !allowed("notify")
            .unwrap()
            .contains(&found.iter().next().unwrap().as_str()),
        "and the rules refuse it"
    );
    assert!(
        super_imports(Path::new("notify/mod.rs"), "use super::alerting::X;").contains("alerting")
    );
    assert!(
        super_imports(Path::new("notify/courier.rs"), "use super::Notifier;").is_empty(),
        "a sibling is no edge"
    );
}

#[test]
fn the_scanner_sees_grouped_imports() {
    let found =
        imports("use crate::{model::X, store::{Store, StoreError}};\nfn f() { crate::auth::y(); }");
    assert_eq!(
        found,
        ["auth", "model", "store"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}
