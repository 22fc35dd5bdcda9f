//! Per-channel templates (SEMANTICS 6): Go `text/template` actions over the message context,
//! the subset channel templates use: `{{.Field}}` and dotted paths (`{{.Labels.site}}`,
//! `{{.Alert.title}}`; keys match case-insensitively), the functions `upper`, `lower`,
//! `trunc N` and `json`, called as `{{upper .Title}}` or piped (`{{.Title | upper}}`). A
//! missing key renders as nothing (`missingkey=zero`).

use super::notify::Message;
use serde_json::{Value, json};

/// The context a template sees: `.Alert .Contact .Severity` (upper case) `.Title .Summary
/// .Labels .Step .Repeat .Policy .AlertURL .AckURL .ShortID .Status .Event .Now`.
pub fn context(m: &Message) -> Value {
    json!({
        "Alert": m,
        "Contact": m.contact,
        "Severity": m.severity.to_uppercase(),
        "Title": m.title,
        "Summary": m.summary,
        "Labels": m.labels,
        "Step": m.step,
        "Repeat": m.repeat,
        "Policy": m.policy,
        "AlertURL": m.alert_url,
        "AckURL": m.ack_url,
        "ShortID": m.short_id,
        "Status": m.status,
        "Params": m.params,
        "Event": m.event,
        "Now": m.at,
    })
}

fn lookup<'a>(ctx: &'a Value, path: &str) -> Option<&'a Value> {
    let mut v = ctx;
    for key in path.split('.').filter(|k| !k.is_empty()) {
        let obj = v.as_object()?;
        v = obj.get(key).or_else(|| {
            obj.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })?;
    }
    Some(v)
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One command: a value (`.Path`, a quoted string, a number) or a function with arguments;
/// `piped` is the previous command's result, passed as the last argument.
fn command(words: &[&str], piped: Option<Value>, ctx: &Value) -> Value {
    let arg = |w: &str| -> Value {
        if let Some(path) = w.strip_prefix('.') {
            lookup(ctx, path).cloned().unwrap_or(Value::Null)
        } else if let Some(s) = w.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
            Value::String(s.to_string())
        } else {
            w.parse::<i64>().map(Value::from).unwrap_or(Value::Null)
        }
    };
    let Some((first, rest)) = words.split_first() else {
        return piped.unwrap_or(Value::Null);
    };
    let mut args: Vec<Value> = rest.iter().map(|w| arg(w)).collect();
    args.extend(piped);
    let last = || args.last().cloned().unwrap_or(Value::Null);
    match *first {
        "upper" => Value::String(text(&last()).to_uppercase()),
        "lower" => Value::String(text(&last()).to_lowercase()),
        "json" => Value::String(last().to_string()),
        "trunc" => {
            let n = args.first().and_then(Value::as_u64).unwrap_or(0) as usize;
            Value::String(text(&last()).chars().take(n).collect())
        }
        value => arg(value),
    }
}

pub fn render(template: &str, ctx: &Value) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let mut before = &rest[..open];
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        let mut action = &rest[open + 2..open + close];
        let mut after = &rest[open + close + 2..];
        if let Some(a) = action.strip_prefix('-') {
            before = before.trim_end();
            action = a;
        }
        if let Some(a) = action.strip_suffix('-') {
            after = after.trim_start();
            action = a;
        }
        out.push_str(before);
        let mut value = None;
        for stage in action.split('|') {
            let words: Vec<&str> = stage.split_whitespace().collect();
            value = Some(command(&words, value, ctx));
        }
        out.push_str(&text(&value.unwrap_or(Value::Null)));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The functions a template may call.
const FUNCTIONS: [&str; 4] = ["upper", "lower", "json", "trunc"];

/// Whether a template is one `render` understands: every `{{` closed, every action a path
/// (`.Title`), a quoted string, a number or a known function, `trunc` with a length.
pub fn check(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            return Err(format!(
                "{:?} opens an action that is never closed with }}}}",
                excerpt(&rest[open..])
            ));
        };
        let action = rest[open + 2..open + close]
            .trim_start_matches('-')
            .trim_end_matches('-');
        for stage in action.split('|') {
            let words: Vec<&str> = stage.split_whitespace().collect();
            let Some(first) = words.first() else {
                return Err(format!("{{{{{action}}}}} has an empty command"));
            };
            let value = first.starts_with('.')
                || (first.len() >= 2 && first.starts_with('"') && first.ends_with('"'))
                || first.parse::<i64>().is_ok();
            if !value && !FUNCTIONS.contains(first) {
                return Err(format!(
                    "{{{{{action}}}}}: {first:?} is neither a field such as .Title nor one of the functions {}",
                    FUNCTIONS.join(", ")
                ));
            }
            if *first == "trunc" && words.get(1).is_none_or(|n| n.parse::<u32>().is_err()) {
                return Err(format!("{{{{{action}}}}}: trunc takes a length first"));
            }
        }
        rest = &rest[open + close + 2..];
    }
    Ok(())
}

fn excerpt(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_templates_are_named() {
        assert!(
            check("[{{.Severity}}] {{trunc 9 .Title | upper}} {{\"x\"}} {{- .Step -}}").is_ok()
        );
        for (bad, why) in [
            ("{{.Title", "never closed"),
            ("{{}}", "empty command"),
            ("{{ .Title | }}", "empty command"),
            ("{{exec .Title}}", "neither a field"),
            ("{{trunc .Title}}", "takes a length"),
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn actions_paths_functions_and_pipes() {
        let ctx = json!({"Title": "Disk full on db1", "Severity": "CRITICAL",
            "Labels": {"site": "lab"}, "Alert": {"shortId": "0195ab12"}, "Step": 2});
        assert_eq!(
            render(
                "[{{.Severity}}] {{trunc 9 .Title}} ({{.Labels.site}}) #{{.Step}}",
                &ctx
            ),
            "[CRITICAL] Disk full (lab) #2"
        );
        assert_eq!(render("{{ .Title | upper }}", &ctx), "DISK FULL ON DB1");
        assert_eq!(
            render("{{lower .Severity}}-{{.alert.ShortID}}", &ctx),
            "critical-0195ab12"
        );
        assert_eq!(render("{{json .Labels}}", &ctx), r#"{"site":"lab"}"#);
        assert_eq!(render("x{{.Missing.Key}}y", &ctx), "xy");
        assert_eq!(render("a  {{- .Step -}}  b", &ctx), "a2b");
        assert_eq!(render("unclosed {{.Title", &ctx), "unclosed {{.Title");
    }
}
