//! CEL expressions (alert rules' `match` and `clear`) made safe to accept from any client: the
//! `cel` crate parses and checks recursively, so an expression deep enough overflows the stack
//! and aborts the process, and some malformed ones panic. Expressions are bounded in length,
//! nesting and operator count before the crate sees them, compiled on a thread with a known
//! stack, and a panic there is an ordinary error. The cost of running one is bounded too: at
//! most `MAX_COMPREHENSIONS` comprehension macros (`all`, `exists`, `exists_one`, `map`,
//! `filter`), nested at most `MAX_COMPREHENSION_NESTING` deep, over events whose lists and
//! maps ingress bounds (`event::MAX_MEMBERS`), and the alert engine runs rules under a
//! wall-clock budget besides.

/// Longest accepted expression, in bytes.
pub const MAX_LEN: usize = 4096;
/// Deepest accepted nesting of `(`, `[` and `{`.
pub const MAX_NESTING: usize = 32;
/// Most operator characters (`.`, `+`, `==` counts two, `in`...) in one expression: each can add
/// a level to the parse tree, so this bounds its depth.
pub const MAX_OPERATORS: usize = 1000;
/// Most comprehension macros in one expression.
pub const MAX_COMPREHENSIONS: usize = 8;
/// Deepest nesting of comprehension macros (one inside another's body is 2).
pub const MAX_COMPREHENSION_NESTING: usize = 2;
/// The macros that loop over a list or map.
const COMPREHENSIONS: [&str; 5] = ["all", "exists", "exists_one", "map", "filter"];
/// Stack of the compiling thread. The crate's parser needs about 130 KiB per nesting level in
/// debug builds; with the bounds above the deepest accepted tree uses a fraction of this.
const COMPILE_STACK: usize = 16 << 20;

/// The standard functions and macros every expression runs with, built once: building them
/// (what `cel::Context::default` does) cost more than running a batch's rules.
static STANDARD: std::sync::LazyLock<std::sync::Arc<::cel::Env>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(::cel::Env::stdlib()));

/// A context to run an expression in: the standard library, no variables yet.
pub fn context() -> ::cel::Context<'static, 'static> {
    ::cel::Context::with_env(STANDARD.clone())
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("expression is {0} bytes long; at most {MAX_LEN} are accepted")]
    TooLong(usize),
    #[error("expression nests brackets more than {MAX_NESTING} deep")]
    TooDeep,
    #[error("expression has more than {MAX_OPERATORS} operators")]
    TooManyOperators,
    #[error(
        "expression has more than {MAX_COMPREHENSIONS} comprehensions (all, exists, exists_one, map, filter) or nests them more than {MAX_COMPREHENSION_NESTING} deep"
    )]
    TooCostly,
    #[error("{0}")]
    Syntax(String),
    #[error("expression could not be parsed")]
    Unparseable,
}

/// Checks the bounds with a lexical scan that skips string literals and comments.
pub fn check_bounds(source: &str) -> Result<(), CelError> {
    if source.len() > MAX_LEN {
        return Err(CelError::TooLong(source.len()));
    }
    let chars: Vec<char> = source.chars().collect();
    let (mut depth, mut operators, mut i) = (0usize, 0usize, 0usize);
    // Per open bracket, whether it opened a comprehension macro's arguments.
    let mut open: Vec<bool> = Vec::new();
    let mut comprehensions = 0usize;
    // Whether the last word read was a comprehension macro called as a member (`.all`).
    let mut macro_name = false;
    while i < chars.len() {
        let c = chars[i];
        let after_macro = std::mem::take(&mut macro_name);
        match c {
            '"' | '\'' => i = skip_string(&chars, i),
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                operators += 1;
                if depth > MAX_NESTING {
                    return Err(CelError::TooDeep);
                }
                let comprehension = c == '(' && after_macro;
                if comprehension {
                    comprehensions += 1;
                    let nesting = open.iter().filter(|o| **o).count() + 1;
                    if comprehensions > MAX_COMPREHENSIONS || nesting > MAX_COMPREHENSION_NESTING {
                        return Err(CelError::TooCostly);
                    }
                }
                open.push(comprehension);
                i += 1;
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                open.pop();
                i += 1;
            }
            '.' | '+' | '-' | '*' | '/' | '%' | '!' | '?' | '<' | '>' | '=' | '&' | '|' => {
                operators += 1;
                i += 1;
            }
            c if c.is_alphanumeric() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                // A string prefix (r, b, rb...) directly before a quote.
                if matches!(chars.get(i), Some('"' | '\''))
                    && chars[start..i]
                        .iter()
                        .all(|c| matches!(c, 'r' | 'R' | 'b' | 'B'))
                {
                    i = skip_string(&chars, i);
                } else if word == "in" {
                    operators += 1;
                } else {
                    let member =
                        chars[..start].iter().rev().find(|c| !c.is_whitespace()) == Some(&'.');
                    macro_name = member && COMPREHENSIONS.contains(&word.as_str());
                }
            }
            c if c.is_whitespace() => {
                macro_name = after_macro;
                i += 1;
            }
            _ => i += 1,
        }
        if operators > MAX_OPERATORS {
            return Err(CelError::TooManyOperators);
        }
    }
    Ok(())
}

/// The index after the string literal opening at `start` (single or triple quoted; a backslash
/// escapes the next character). An unterminated literal runs to the end.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let triple = chars.get(start + 1) == Some(&quote) && chars.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            if !triple {
                return i + 1;
            }
            if chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        }
        i += 1;
    }
    chars.len()
}

/// Whether `source` is an expression the engine can run: within the bounds, and compiling.
pub fn check(source: &str) -> Result<(), CelError> {
    compile(source).map(|_| ())
}

/// The program of an expression within the bounds.
pub fn compile(source: &str) -> Result<cel::Program, CelError> {
    check_bounds(source)?;
    on_cel_stack(|| cel::Program::compile(source).map_err(|e| CelError::Syntax(e.to_string())))
        .unwrap_or(Err(CelError::Unparseable))
}

/// Runs `f` (parsing or evaluating expressions, both recursive in the crate) on a thread with
/// a stack the bounds fit in; `None` if it panicked.
pub fn on_cel_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(scope, || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            })
            .ok()?
            .join()
            .ok()?
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ordinary_expressions_pass() {
        for ok in [
            "event.severity == 'critical'",
            "event.type == \"state_change\" && event.payload.toState >= 2",
            "event.labels['a.b'] in ['x', 'y(', \"z[\"] || !(event.attempt > 3)",
            "r'raw\\d+((((' == b\"bytes\" // a comment ((((",
            "'''triple ' quoted ((( ''' != ''",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn syntax_errors_are_errors() {
        assert!(matches!(
            check("event.severity =="),
            Err(CelError::Syntax(_))
        ));
    }

    #[test]
    fn hostile_expressions_are_refused_before_the_parser() {
        let long = format!("event{}", ".a".repeat(5_000));
        assert_eq!(check(&long), Err(CelError::TooLong(long.len())));
        let chain = format!("event{}", ".a".repeat(1_200));
        assert_eq!(check(&chain), Err(CelError::TooManyOperators));
        let sum = format!("1{}", "+1".repeat(1_100));
        assert_eq!(check(&sum), Err(CelError::TooManyOperators));
        let nested = format!("{}1{}", "size(".repeat(40), ")".repeat(40));
        assert_eq!(check(&nested), Err(CelError::TooDeep));
        let map = format!("{}1{}", "{'a':".repeat(33), "}".repeat(33));
        assert_eq!(check(&map), Err(CelError::TooDeep));
        // Brackets inside strings and comments do not count.
        assert_eq!(check_bounds(&format!("'{}'", "(".repeat(100))), Ok(()));
        // Comprehensions: two deep and eight in all at most.
        let two = "event.labels.all(k, event.labels.exists(j, j == k))";
        assert_eq!(check(two), Ok(()));
        let three = "event.labels.all(k, event.labels.all(j, event.labels.all(i, i == j)))";
        assert_eq!(check(three), Err(CelError::TooCostly));
        let many = ["event.labels.exists(k, k == 'a')"; MAX_COMPREHENSIONS + 1].join(" || ");
        assert_eq!(check(&many), Err(CelError::TooCostly));
        assert_eq!(
            check("event.labels.map (k, k).size() > 0 && 'all(' != 'x'"),
            Ok(())
        );
        let calls = ["all(1)"; MAX_COMPREHENSIONS + 1].join(" || ");
        assert_eq!(check_bounds(&calls), Ok(()), "only member macros loop");
    }

    #[test]
    fn the_deepest_accepted_expressions_compile() {
        let nested = format!(
            "{}1{}",
            "size(".repeat(MAX_NESTING),
            ")".repeat(MAX_NESTING)
        );
        assert!(matches!(check(&nested), Ok(()) | Err(CelError::Syntax(_))));
        let chain = format!("event{}", ".a".repeat(MAX_OPERATORS / 2 - 1));
        assert_eq!(check(&chain), Ok(()));
        let sum = format!("1{}", "+1".repeat(MAX_OPERATORS - 1));
        assert_eq!(check(&sum), Ok(()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Fuzz: any text, and any text built from CEL's own tokens, gets an answer.
        #[test]
        fn never_crashes(input in ".{0,200}") {
            let _ = check(&input);
        }

        #[test]
        fn never_crashes_on_token_soup(tokens in proptest::collection::vec(
            prop_oneof![
                Just("("), Just(")"), Just("["), Just("]"), Just("{"), Just("}"), Just("."),
                Just("event"), Just("a"), Just("1"), Just("'s'"), Just("+"), Just("=="),
                Just("&&"), Just("||"), Just("!"), Just("?"), Just(":"), Just(","), Just(" in "),
                Just("size"), Just("\""), Just("r'"), Just("-"), Just("1.5"), Just("u"),
            ],
            0..120,
        )) {
            let _ = check(&tokens.concat());
        }
    }
}
