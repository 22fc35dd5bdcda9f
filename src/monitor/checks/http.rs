//! `http`: one HTTP/1.1 request, as monitoring-plugins' check_http does. Flags: `-H` host (or
//! a URL as the first positional argument), `-p` port, `-S` TLS, `-u` path, `-e` expected status
//! codes (comma list; without it 5xx/4xx are CRITICAL and 3xx WARNING), `-s` a string the body
//! must contain, `-w`/`-c` response-time ranges in seconds, `-C warn[,crit]` days the TLS
//! certificate must still be valid. The chain is not verified (field devices are often
//! self-signed; check_http does not verify either) but the handshake signature is, and the
//! certificate's expiry is read from it.

use super::{Builtin, Outcome, status_word};
use crate::runtime::Stopwatch;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use rustls_pki_types::ServerName;
use std::sync::Arc;

/// Bodies are read up to this size for `-s`; a larger one is not searched.
const BODY_LIMIT: usize = 1024 * 1024;

struct Target {
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

fn target(ctx: &Builtin<'_>) -> Result<Target, String> {
    if let Some(url) = ctx
        .args
        .positional
        .first()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
    {
        let uri: hyper::Uri = url.parse().map_err(|_| format!("{url:?} is not a URL"))?;
        let tls = uri.scheme_str() == Some("https");
        return Ok(Target {
            tls,
            host: uri
                .host()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_string(),
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            path: uri
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string()),
        });
    }
    let tls = ctx.args.has(&["-S", "--ssl"]);
    Ok(Target {
        tls,
        host: ctx.target().ok_or("no address")?,
        port: ctx.number(&["-p", "--port"], if tls { 443 } else { 80 })?,
        path: ctx.args.get(&["-u", "--url"]).unwrap_or("/").to_string(),
    })
}

/// Any chain: expiry is judged by the check itself.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    crate::runtime::tls::client_config(|_| Ok(()))
}

/// One TLV of DER: (tag, content).
fn der(buf: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *buf.first()?;
    let first = *buf.get(1)? as usize;
    let (len, head) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let len = buf
            .get(2..2 + n)?
            .iter()
            .fold(0usize, |l, b| (l << 8) | *b as usize);
        (len, 2 + n)
    };
    let content = buf.get(head..head + len)?;
    Some((tag, content, &buf[head + len..]))
}

/// The notAfter of an X.509 certificate.
fn not_after(cert: &[u8]) -> Option<jiff::Timestamp> {
    let (_, certificate, _) = der(cert)?;
    let (_, tbs, _) = der(certificate)?;
    let mut rest = tbs;
    // [0] version is optional.
    if rest.first() == Some(&0xa0) {
        rest = der(rest)?.2;
    }
    let rest = der(rest)?.2; // serial
    let rest = der(rest)?.2; // signature algorithm
    let rest = der(rest)?.2; // issuer
    let (_, validity, _) = der(rest)?;
    let after = der(validity)?.2;
    let (tag, time, _) = der(after)?;
    let text = std::str::from_utf8(time).ok()?.trim_end_matches('Z');
    let full = match tag {
        // UTCTime: YYMMDDHHMMSS, years 50..99 are 19xx.
        0x17 => {
            let yy: u32 = text.get(0..2)?.parse().ok()?;
            format!("{}{text}", if yy >= 50 { "19" } else { "20" })
        }
        0x18 => text.to_string(),
        _ => return None,
    };
    let civil = jiff::civil::DateTime::strptime("%Y%m%d%H%M%S", full.get(0..14)?).ok()?;
    civil
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

struct Response {
    status: hyper::StatusCode,
    version: hyper::Version,
    body: Bytes,
    /// Days until the server certificate expires (TLS only).
    cert_days: Option<i64>,
}

async fn request(t: &Target, now: jiff::Timestamp) -> Result<Response, String> {
    let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| format!("{e} on {}:{}", t.host, t.port))?;
    let authority = if (t.tls && t.port == 443) || (!t.tls && t.port == 80) {
        t.host.clone()
    } else {
        format!("{}:{}", t.host, t.port)
    };
    let req = hyper::Request::get(t.path.as_str())
        .header(hyper::header::HOST, authority)
        .header(
            hyper::header::USER_AGENT,
            format!("svc/{} (check_http)", crate::model::VERSION),
        )
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    if t.tls {
        let name = ServerName::try_from(t.host.clone()).map_err(|e| e.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_config()?));
        let stream = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        let cert_days = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| not_after(c))
            .map(|after| after.duration_since(now).as_secs() / 86_400);
        let mut response = send(stream, req).await?;
        response.cert_days = cert_days;
        Ok(response)
    } else {
        send(tcp, req).await
    }
}

async fn send<S>(stream: S, req: hyper::Request<Empty<Bytes>>) -> Result<Response, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let (parts, body) = res.into_parts();
    // A body over the limit is not searched (`-s` finds nothing in it); a body the server
    // broke off is the check's failure, not an empty page.
    let body = match Limited::new(body, BODY_LIMIT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Default::default(),
        Err(e) => return Err(format!("reading the body: {e}")),
    };
    Ok(Response {
        status: parts.status,
        version: parts.version,
        body,
        cert_days: None,
    })
}

pub(super) async fn check(ctx: &Builtin<'_>) -> Outcome {
    let t = match target(ctx) {
        Ok(t) => t,
        Err(e) => return Outcome::unknown("HTTP", e),
    };
    let limits = match ctx.limits() {
        Ok(l) => l,
        Err(e) => return Outcome::unknown("HTTP", e),
    };
    let cert_limits: Option<(i64, i64)> = match ctx.args.get(&["-C", "--certificate"]) {
        None => None,
        Some(v) => {
            let mut days = v.split(',').map(|d| d.trim().parse::<i64>());
            match (days.next(), days.next()) {
                (Some(Ok(w)), None) => Some((w, 0)),
                (Some(Ok(w)), Some(Ok(c))) => Some((w, c)),
                _ => return Outcome::unknown("HTTP", format!("-C {v:?} is not days[,days]")),
            }
        }
    };
    let expected: Option<Vec<u16>> = ctx.args.get(&["-e", "--expect"]).map(|e| {
        e.split(',')
            .filter_map(|c| c.trim().get(..3)?.parse().ok())
            .collect()
    });
    let watch = Stopwatch::start();
    let response = match tokio::time::timeout(ctx.timeout, request(&t, ctx.now.0)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Outcome::new(2, format!("HTTP CRITICAL - {e}")),
        Err(_) => {
            return Outcome::new(
                2,
                format!(
                    "HTTP CRITICAL - no response within {}s from {}:{}",
                    ctx.timeout.as_secs(),
                    t.host,
                    t.port
                ),
            );
        }
    };
    let secs = watch.elapsed().as_secs_f64();
    let status = response.status.as_u16();
    let mut code = match &expected {
        Some(list) if !list.contains(&status) => 2,
        Some(_) => 0,
        None if status >= 400 => 2,
        None if status >= 300 => 1,
        None => 0,
    };
    let mut notes = Vec::new();
    if let Some(needle) = ctx.args.get(&["-s", "--string"])
        && !String::from_utf8_lossy(&response.body).contains(needle)
    {
        code = 2;
        notes.push(format!("string {needle:?} not found"));
    }
    code = code.max(limits.grade(secs));
    let mut perf = format!(
        "time={secs:.6}s;{};0 size={}B;;;0",
        limits.perf(),
        response.body.len()
    );
    if let Some(days) = response.cert_days {
        let (w, c) = cert_limits.unwrap_or((0, 0));
        if cert_limits.is_some() {
            let cert_code = if days < c {
                2
            } else if days < w {
                1
            } else {
                0
            };
            code = code.max(cert_code);
        }
        notes.push(format!("certificate expires in {days} days"));
        perf.push_str(&format!(
            " cert_days={days};{};{}",
            if w > 0 { w.to_string() } else { String::new() },
            if c > 0 { c.to_string() } else { String::new() }
        ));
    } else if cert_limits.is_some() {
        return Outcome::unknown("HTTP", "-C needs a TLS connection (-S or an https URL)");
    }
    let reason = response.status.canonical_reason().unwrap_or_default();
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" - {}", notes.join(", "))
    };
    Outcome::new(
        code,
        format!(
            "HTTP {}: {:?} {status} {reason} - {} bytes in {secs:.3} second response time{notes} |{perf}",
            status_word(code),
            response.version,
            response.body.len(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_expiry_is_read_from_der() {
        let mut params = rcgen::CertificateParams::new(vec!["svc.test".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 17);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let after = not_after(cert.der()).unwrap();
        assert_eq!(after.to_string(), "2031-05-17T00:00:00Z");
        assert!(not_after(b"\x30\x03\x02\x01").is_none());
    }
}
