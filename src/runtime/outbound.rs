//! The one way the server's outbound HTTP clients are made: no redirect is ever followed (a
//! redirect could carry a request to a host nobody configured), every request has a deadline,
//! and svc names itself.

use std::time::Duration;

/// A client builder for requests the server makes on its own (channels, single sign-on, a
/// site's link to its main); the caller adds its trust settings and builds.
pub fn client(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("svc/", env!("CARGO_PKG_VERSION")))
}

/// An error of an outbound request with its causes, in one line (`a: b: c`): reqwest's own
/// text alone says little more than "error sending request".
pub fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
