//! Configuration documents: kinds, lists, YAML, a planned change.

use super::*;

/// `/config`: the kinds of configuration document the caller may read.
pub fn config_kinds(kinds: &[&str]) -> Markup {
    html! {
        ul.list {
            @for k in kinds {
                li { span.what { a href=(format!("/config/{k}")) { (k) } } }
            }
        }
        p.muted { "Whole configurations move as YAML bundles: " code { "svc apply -f" } "." }
    }
}

/// `/config/{kind}`: its documents by name, and the form that creates one (`Some`: the caller
/// may write the kind; the name and YAML typed before, if any).
pub fn config_list(now: &Now, kind: &str, docs: &[ConfigDoc], new: Option<(&str, &str)>) -> Markup {
    html! {
        @if docs.is_empty() { p { "No documents of this kind." } }
        ul.list {
            @for d in docs {
                li {
                    span.what {
                        a href=(format!("/config/{kind}/{}", encode_segment(&d.name))) { (d.name) }
                        br; small { "version " (d.version) " · changed " (when(now, d.updated_at)) }
                    }
                }
            }
        }
        @if let Some((name, yaml)) = new { (new_doc_form(kind, name, yaml)) }
    }
}

/// The form that creates a document of `kind`.
pub fn new_doc_form(kind: &str, name: &str, yaml: &str) -> Markup {
    html! {
        h2 #new { "New document" }
        form method="post" action=(format!("/config/{kind}")) {
            label for="name" { "Name" }
            input #name type="text" name="name" required value=(name);
            label for="yaml" { "The document's fields (YAML; the reference's body without the name)" }
            textarea #yaml name="yaml" rows="12" spellcheck="false" { (yaml) }
            p { button.primary type="submit" { "Create" } }
        }
    }
}

/// `/config/{kind}/{name}`: the document as YAML, and a form to change it (planned first).
pub fn config_doc(kind: &str, d: &ConfigDoc, yaml: &str, can_write: bool) -> Markup {
    let here = format!("/config/{kind}/{}", encode_segment(&d.name));
    html! {
        p.muted { "version " (d.version) " · id " code { (d.id) } }
        @if can_write {
            form method="post" action=(format!("{here}/plan")) {
                input type="hidden" name="version" value=(d.version);
                label for="yaml" { "The document (YAML; the name and the service's fields are kept)" }
                textarea #yaml name="yaml" rows="20" spellcheck="false" { (yaml) }
                p { button.primary type="submit" { "Plan the change" } }
            }
            h2 { "Delete" }
            form method="post" action=(format!("{here}/delete")) {
                input type="hidden" name="version" value=(d.version);
                label.check { input type="checkbox" name="confirm" value="on" required; "Delete " (kind) " " (d.name) " for good" }
                p { button.danger type="submit" { "Delete" } }
            }
        } @else {
            pre { (yaml) }
        }
    }
}

/// The lines of `new` against `old`: `' '` kept, `'-'` removed, `'+'` added, in order (the
/// longest common subsequence of lines; documents are short).
pub fn diff_lines<'a>(old: &'a str, new: &'a str) -> Vec<(char, &'a str)> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(('-', a[i]));
            i += 1;
        } else {
            out.push(('+', b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| ('-', *l)));
    out.extend(b[j..].iter().map(|l| ('+', *l)));
    out
}

/// The plan of a change: the difference, and the form that applies exactly this text at the
/// version it was planned against.
pub fn config_plan(kind: &str, name: &str, old: &str, new: &str, version: u64) -> Markup {
    let here = format!("/config/{kind}/{}", encode_segment(name));
    let diff = diff_lines(old, new);
    let changed = diff.iter().any(|(c, _)| *c != ' ');
    html! {
        @if changed {
            pre.diff aria-label="The change" {
                @for (c, line) in &diff {
                    @match c {
                        '+' => ins { "+ " (line) "\n" },
                        '-' => del { "- " (line) "\n" },
                        _ => span { "  " (line) "\n" },
                    }
                }
            }
            form method="post" action=(here) {
                input type="hidden" name="version" value=(version);
                input type="hidden" name="yaml" value=(new);
                button.primary type="submit" { "Apply" }
                " "
                a.button href=(here) { "Cancel" }
            }
        } @else {
            p { "Nothing changes." }
            p { a.button href=(here) { "Back" } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_shows_removed_and_added_lines_in_order() {
        let old = "a: 1\nb: 2\nc: 3";
        let new = "a: 1\nb: 20\nc: 3\nd: 4";
        assert_eq!(
            diff_lines(old, new),
            [
                (' ', "a: 1"),
                ('-', "b: 2"),
                ('+', "b: 20"),
                (' ', "c: 3"),
                ('+', "d: 4")
            ]
        );
        assert!(diff_lines(old, old).iter().all(|(c, _)| *c == ' '));
        assert_eq!(diff_lines("", "x"), [('+', "x")]);
    }
}
