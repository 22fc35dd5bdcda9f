//! Server-rendered sign-in pages: small, accessible, no JavaScript. The embedded UI will be
//! served from here too.

use crate::model::VERSION;

/// HTML text: the characters that could open markup or leave an attribute, escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} · svc</title>\
<style>body{{font-family:system-ui,sans-serif;max-width:24rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}}label{{display:block;margin:.8rem 0 .2rem}}input[type=email],input[type=password],input[type=text]{{width:100%;padding:.5rem;box-sizing:border-box}}button{{margin-top:1rem;padding:.5rem 1.2rem}}.message{{padding:.6rem;border:1px solid #b00;color:#b00}}footer{{margin-top:3rem;color:#666;font-size:.8rem}}</style></head>\
<body><main><h1>{title}</h1>{body}</main><footer>svc {version}</footer></body></html>\n",
        title = escape(title),
        version = escape(VERSION),
    )
}

fn message(msg: Option<&str>) -> String {
    msg.map(|m| format!("<p class=\"message\" role=\"alert\">{}</p>", escape(m)))
        .unwrap_or_default()
}

pub fn login(msg: Option<&str>, email: &str) -> String {
    page(
        "Sign in",
        &format!(
            "{}<form method=\"post\" action=\"/login\">\
<label for=\"email\">E-mail</label><input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"username\" required value=\"{}\">\
<label for=\"password\">Password</label><input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required>\
<label><input name=\"remember\" type=\"checkbox\" value=\"1\"> Keep me signed in for 30 days</label>\
<button type=\"submit\">Sign in</button></form>",
            message(msg),
            escape(email)
        ),
    )
}

fn account_form(action: &str, button: &str, msg: Option<&str>, name: &str, email: &str) -> String {
    format!(
        "{}<form method=\"post\" action=\"{action}\">\
<label for=\"name\">Name</label><input id=\"name\" name=\"name\" type=\"text\" autocomplete=\"name\" required value=\"{}\">\
<label for=\"email\">E-mail</label><input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"username\" required value=\"{}\">\
<label for=\"password\">Password (at least 12 characters)</label><input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required>\
<label for=\"confirmation\">Repeat the password</label><input id=\"confirmation\" name=\"confirmation\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required>\
<button type=\"submit\">{button}</button></form>",
        message(msg),
        escape(name),
        escape(email)
    )
}

pub fn setup(msg: Option<&str>, name: &str, email: &str) -> String {
    page(
        "Set up svc",
        &format!(
            "<p>Create the first administrator.</p>{}",
            account_form("/setup", "Create administrator", msg, name, email)
        ),
    )
}

pub fn register(msg: Option<&str>, name: &str, email: &str) -> String {
    page(
        "Create an account",
        &account_form("/register", "Create account", msg, name, email),
    )
}

pub fn home(name: &str) -> String {
    page(
        "svc",
        &format!(
            "<p>Signed in as {}.</p><p><a href=\"/api/openapi.json\">API description</a> · <a href=\"/auth/logout\">Sign out</a></p>",
            escape(name)
        ),
    )
}

/// The page a problem document's `type` URL names: what the code means and what to do.
pub fn problem(code: &str, status: u16, title: &str, explanation: &str) -> String {
    page(
        title,
        &format!(
            "<p><code>{}</code> · HTTP {status}</p><p>{}</p><p>Clients branch on <code>code</code>; <code>detail</code> says what was wrong with the request at hand.</p>",
            escape(code),
            escape(explanation)
        ),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_are_escaped() {
        let html = super::login(Some("<b>x</b>"), "\"><script>");
        assert!(!html.contains("<script>") && !html.contains("<b>"));
        assert!(
            html.contains(crate::model::VERSION),
            "footer carries the version"
        );
    }
}
