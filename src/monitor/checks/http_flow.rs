//! `http-flow`: the steps of the object's `spec.httpFlow` (`model::flow`) in order, as a
//! person's browser would make them: cookies kept per host, values taken from one answer into
//! the next request, each answer judged, redirects not followed. The first step that fails
//! ends the flow, CRITICAL, named in the output; a step over its `maxMs` makes it WARNING; each
//! step's time is a metric under its name, and the whole flow's as `total`. A link-local host
//! (a cloud's metadata service) is never reached.

use super::{Builtin, Outcome, perf_label, status_word};
use crate::model::flow::{FlowStep, at_path, fill, json_path};
use crate::runtime::{Stopwatch, outbound};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// A body is read up to this size; an answer larger is a failed step.
const BODY_LIMIT: usize = 1024 * 1024;

/// Cookies by host, then name: a cookie goes back only to the host that set it.
type Jar = BTreeMap<String, BTreeMap<String, String>>;

/// What a step's answer was.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

/// Whether `ip` is link-local (169.254/16, fe80::/10): where cloud instances answer their
/// metadata and credentials, which no flow may carry to a later step's host.
fn link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
    }
}

/// The clients of one run of a flow, by host and port: each made on the first step to its
/// host, which is resolved then and refused when link-local, its requests pinned to that
/// address (a second lookup cannot move them).
type Clients = BTreeMap<(String, u16), reqwest::Client>;

async fn client_for<'a>(
    clients: &'a mut Clients,
    url: &reqwest::Url,
    budget: Duration,
) -> Result<&'a reqwest::Client, String> {
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let key = (host.to_string(), port);
    if !clients.contains_key(&key) {
        let client = pinned_client(host, port, budget).await?;
        clients.insert(key.clone(), client);
    }
    clients
        .get(&key)
        .ok_or_else(|| format!("no client for {host}"))
}

async fn pinned_client(host: &str, port: u16, budget: Duration) -> Result<reqwest::Client, String> {
    let bare = host.trim_matches(['[', ']']);
    let addr = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    if link_local(addr.ip()) {
        return Err(format!("{host} is link-local ({}): not reached", addr.ip()));
    }
    outbound::client(budget)
        .resolve(bare, addr)
        .build()
        .map_err(|e| outbound::error_text(&e))
}

async fn send(
    clients: &mut Clients,
    budget: Duration,
    step: &FlowStep,
    kept: &BTreeMap<String, String>,
    jar: &Jar,
    left: Duration,
) -> Result<(Answer, String), String> {
    let url = fill(&step.url, kept)?;
    let parsed = reqwest::Url::parse(&url).map_err(|e| format!("{url:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} is not an http or https URL"));
    }
    let host = parsed.host_str().unwrap_or_default().to_string();
    let http = client_for(clients, &parsed, budget).await?;
    let method = reqwest::Method::from_bytes(step.method().as_bytes())
        .map_err(|_| format!("{} is not a method", step.method()))?;
    let mut request = http.request(method, parsed).timeout(left);
    for (name, value) in &step.headers {
        request = request.header(name.as_str(), fill(value, kept)?);
    }
    if let Some(cookies) = jar.get(&host).filter(|c| !c.is_empty()) {
        let line: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        request = request.header("cookie", line.join("; "));
    }
    if let Some(body) = &step.body {
        request = request.body(fill(body, kept)?);
    }
    if let Some(form) = &step.form {
        let mut fields = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            fields.append_pair(k, &fill(v, kept)?);
        }
        request = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body(fields.finish());
    }
    let mut res = request.send().await.map_err(|e| outbound::error_text(&e))?;
    let mut body = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(|e| outbound::error_text(&e))? {
        if body.len() + chunk.len() > BODY_LIMIT {
            return Err(format!("the answer is over {BODY_LIMIT} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((
        Answer {
            status: res.status().as_u16(),
            headers: res.headers().clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        },
        host,
    ))
}

/// The cookies an answer set (`Set-Cookie: name=value; attributes`); an empty value or a
/// past `Max-Age` drops the cookie.
fn keep_cookies(jar: &mut Jar, host: &str, headers: &reqwest::header::HeaderMap) {
    for line in headers.get_all("set-cookie") {
        let Ok(line) = line.to_str() else { continue };
        let mut parts = line.split(';');
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
            continue;
        };
        let expired = parts.any(|a| {
            a.trim().split_once('=').is_some_and(|(k, v)| {
                k.eq_ignore_ascii_case("max-age") && v.trim().starts_with(['0', '-'])
            })
        });
        let cookies = jar.entry(host.to_string()).or_default();
        if expired || value.trim().is_empty() {
            cookies.remove(name.trim());
        } else {
            cookies.insert(name.trim().to_string(), value.trim().to_string());
        }
    }
}

/// Why `answer` fails `step`'s expectations, if it does.
fn judge(step: &FlowStep, answer: &Answer) -> Option<String> {
    let expect = step.expect.clone().unwrap_or_default();
    let allowed = match &expect.status {
        Some(codes) => codes.contains(&answer.status),
        None => (200..300).contains(&answer.status),
    };
    if !allowed {
        let wanted = expect.status.map_or("a 2xx".to_string(), |c| {
            c.iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        });
        return Some(format!("status {} (expected {wanted})", answer.status));
    }
    if let Some(text) = &expect.contains
        && !answer.body.contains(text.as_str())
    {
        return Some(format!("the body does not contain {text:?}"));
    }
    if let Some(pattern) = &expect.regex {
        let matched = regex_lite::Regex::new(pattern).is_ok_and(|r| r.is_match(&answer.body));
        if !matched {
            return Some(format!("the body does not match {pattern:?}"));
        }
    }
    if let Some(j) = &expect.json {
        let doc: serde_json::Value = match serde_json::from_str(&answer.body) {
            Ok(d) => d,
            Err(_) => return Some("the body is not JSON".into()),
        };
        let found = json_path(&j.path)
            .ok()
            .and_then(|p| at_path(&doc, &p).cloned());
        if found.as_ref() != Some(&j.equals) {
            return Some(format!(
                "{} is {} (expected {})",
                j.path,
                found.map_or("missing".to_string(), |v| v.to_string()),
                j.equals
            ));
        }
    }
    None
}

/// The values `step` keeps from `answer`; what could not be found, in words.
fn extract(
    step: &FlowStep,
    answer: &Answer,
    kept: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for (name, from) in &step.extract {
        let value = if let Some(path) = &from.json_path {
            let doc: serde_json::Value = serde_json::from_str(&answer.body)
                .map_err(|_| "the body is not JSON".to_string())?;
            let parts = json_path(path)?;
            match at_path(&doc, &parts) {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(serde_json::Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            }
        } else if let Some(header) = &from.header {
            answer
                .headers
                .get(header.as_str())
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        } else if let Some(pattern) = &from.regex {
            let r = regex_lite::Regex::new(pattern).map_err(|e| e.to_string())?;
            r.captures(&answer.body)
                .and_then(|c| c.get(1).or_else(|| c.get(0)))
                .map(|m| m.as_str().to_string())
        } else {
            None
        };
        let value = value.ok_or_else(|| format!("no value for {name} in the answer"))?;
        kept.insert(name.clone(), value);
    }
    Ok(())
}

fn perf_item(name: &str, seconds: f64, warn: Option<f64>) -> String {
    let warn = warn.map(|w| format!("{w:.3}")).unwrap_or_default();
    format!("{}={seconds:.3}s;{warn};;0", perf_label(name))
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let Some(flow) = ctx.flow.as_ref() else {
        return Outcome::unknown("HTTP-FLOW", "the object has no spec.httpFlow");
    };
    if let Err(e) = flow.check() {
        return Outcome::unknown("HTTP-FLOW", e);
    }
    let budget = flow.budget.map_or(ctx.timeout, |b| b.0.min(ctx.timeout));
    let whole = Stopwatch::start();
    let (mut kept, mut jar, mut clients) = (BTreeMap::new(), Jar::new(), Clients::new());
    let (mut code, mut perf, mut slow) = (0u8, Vec::new(), Vec::new());
    for (i, step) in flow.steps.iter().enumerate() {
        let failed = |why: String, perf: &[String]| {
            Outcome::new(
                2,
                format!(
                    "HTTP-FLOW CRITICAL - step {} {:?}: {why} | {}",
                    i + 1,
                    step.name,
                    perf.join(" ")
                ),
            )
        };
        let Some(left) = budget.checked_sub(whole.elapsed()).filter(|l| !l.is_zero()) else {
            return failed(
                format!("the flow's budget of {} ms ran out", budget.as_millis()),
                &perf,
            );
        };
        let took = Stopwatch::start();
        let (answer, host) = match send(&mut clients, budget, step, &kept, &jar, left).await {
            Ok(a) => a,
            Err(e) if whole.elapsed() >= budget => {
                return failed(
                    format!(
                        "the flow's budget of {} ms ran out ({e})",
                        budget.as_millis()
                    ),
                    &perf,
                );
            }
            Err(e) => return failed(e, &perf),
        };
        let seconds = took.elapsed().as_secs_f64();
        let max = step.expect.as_ref().and_then(|e| e.max_ms);
        perf.push(perf_item(
            &step.name,
            seconds,
            max.map(|m| m as f64 / 1000.0),
        ));
        keep_cookies(&mut jar, &host, &answer.headers);
        if let Some(why) = judge(step, &answer) {
            return failed(why, &perf);
        }
        if let Err(why) = extract(step, &answer, &mut kept) {
            return failed(why, &perf);
        }
        if max.is_some_and(|m| seconds * 1000.0 > m as f64) {
            code = 1;
            slow.push(format!("{:?} took {:.0} ms", step.name, seconds * 1000.0));
        }
    }
    let total = whole.elapsed().as_secs_f64();
    perf.push(perf_item("total", total, None));
    let mut text = format!("{} steps in {total:.3}s", flow.steps.len());
    if !slow.is_empty() {
        text = format!("{text}; over their time: {}", slow.join(", "));
    }
    Outcome::new(
        code,
        format!(
            "HTTP-FLOW {} - {text} | {}",
            status_word(code),
            perf.join(" ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_addresses_are_known_in_both_families() {
        for ip in ["169.254.169.254", "fe80::1", "::ffff:169.254.1.1"] {
            assert!(link_local(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["127.0.0.1", "10.0.0.1", "::1", "2001:db8::1"] {
            assert!(!link_local(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn cookies_go_back_to_the_host_that_set_them() {
        let mut jar = Jar::new();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append(
            "set-cookie",
            "session=abc; Path=/; HttpOnly".parse().unwrap(),
        );
        headers.append("set-cookie", "theme=dark".parse().unwrap());
        keep_cookies(&mut jar, "plc.local", &headers);
        assert_eq!(jar["plc.local"]["session"], "abc");
        assert!(!jar.contains_key("other.local"));
        let mut gone = reqwest::header::HeaderMap::new();
        gone.append("set-cookie", "session=; Max-Age=0".parse().unwrap());
        keep_cookies(&mut jar, "plc.local", &gone);
        assert!(!jar["plc.local"].contains_key("session"));
        assert_eq!(jar["plc.local"]["theme"], "dark");
    }
}
