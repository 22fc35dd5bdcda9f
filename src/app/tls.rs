//! TLS: the configured certificate and key, or a self-signed pair made with rcgen and kept in
//! the data dir so clients can pin it: named for this machine (CN and SANs: the `baseUrl` host,
//! the host name, `localhost` and the loopback addresses), valid for a year and replaced at a
//! start within 30 days of its end. Its SHA-256 fingerprint is printed at every start.

use super::AppError;
use crate::config::Config;
use crate::model::Timestamp;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> AppError {
    AppError::Tls(format!("{what} {}: {e}", path.display()))
}

const VALIDITY_DAYS: i64 = 365;
const RENEW_BEFORE_DAYS: i64 = 30;
/// Beside the generated certificate: when it ends (RFC 3339), so a start knows to replace it
/// without parsing X.509.
const EXPIRES_FILE: &str = "cert.expires";

/// The host of a URL (`https://gw.example:8443/x` → `gw.example`, `https://[::1]` → `::1`).
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

/// This machine's name.
fn host_name() -> Option<String> {
    nix::unistd::gethostname()
        .ok()?
        .into_string()
        .ok()
        .filter(|h| !h.is_empty())
}

/// The names a generated certificate is for, its own name first.
fn certificate_names(base_url: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in url_host(base_url)
        .map(str::to_string)
        .into_iter()
        .chain(host_name())
        .chain(["localhost", "127.0.0.1", "::1"].map(String::from))
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// A UTC day as rcgen takes it.
fn ymd(t: Timestamp) -> (i32, u8, u8) {
    let d = t.0.to_zoned(jiff::tz::TimeZone::UTC).date();
    (i32::from(d.year()), d.month() as u8, d.day() as u8)
}

/// Makes the self-signed pair in `dir` unless a current one is there; returns (cert, key) paths.
pub fn ensure_self_signed(
    dir: &Path,
    base_url: &str,
    now: Timestamp,
) -> Result<(PathBuf, PathBuf), AppError> {
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    let expires = std::fs::read_to_string(dir.join(EXPIRES_FILE))
        .ok()
        .and_then(|t| t.trim().parse::<Timestamp>().ok());
    let renew_at =
        |end: Timestamp| Timestamp::from_millis(end.as_millis() - RENEW_BEFORE_DAYS * 86_400_000);
    if cert_path.is_file()
        && key_path.is_file()
        && expires.and_then(renew_at).is_some_and(|at| now < at)
    {
        return Ok((cert_path, key_path));
    }
    std::fs::create_dir_all(dir).map_err(|e| tls_err("creating", dir, e))?;
    let names = certificate_names(base_url);
    let mut params =
        rcgen::CertificateParams::new(names.clone()).map_err(|e| AppError::Tls(e.to_string()))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0].clone());
    let end = Timestamp::from_millis(now.as_millis() + VALIDITY_DAYS * 86_400_000)
        .ok_or_else(|| AppError::Tls("the clock is beyond any certificate's end".into()))?;
    // From yesterday: a client whose clock is a little behind still accepts it.
    let (y, m, d) = ymd(Timestamp::from_millis(now.as_millis() - 86_400_000).unwrap_or(now));
    params.not_before = rcgen::date_time_ymd(y, m, d);
    let (y, m, d) = ymd(end);
    params.not_after = rcgen::date_time_ymd(y, m, d);
    let key = rcgen::KeyPair::generate().map_err(|e| AppError::Tls(e.to_string()))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| AppError::Tls(e.to_string()))?;
    write_private(&key_path, key.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, cert.pem()).map_err(|e| tls_err("writing", &cert_path, e))?;
    std::fs::write(dir.join(EXPIRES_FILE), end.to_string())
        .map_err(|e| tls_err("writing", &dir.join(EXPIRES_FILE), e))?;
    tracing::info!(cert = %cert_path.display(), names = ?names, until = %end, "generated a self-signed TLS certificate");
    Ok((cert_path, key_path))
}

/// A certificate's SHA-256 as `AB:CD:…`, the form `openssl x509 -fingerprint` prints and
/// `site.fingerprint` takes.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    Sha256::digest(cert.as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Writes a file only its owner can read.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AppError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| tls_err("writing", path, e))?;
    f.write_all(bytes).map_err(|e| tls_err("writing", path, e))
}

/// The acceptor, and the SHA-256 fingerprint of the certificate it presents.
pub fn acceptor(config: &Config, now: Timestamp) -> Result<(TlsAcceptor, String), AppError> {
    let (cert_path, key_path) = match (&config.tls.cert_file, &config.tls.key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => ensure_self_signed(&config.data_dir.join("tls"), &config.base_url, now)?,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| tls_err("reading", &cert_path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| tls_err("parsing", &cert_path, e))?;
    let Some(presented) = certs.first().map(fingerprint) else {
        return Err(tls_err("reading", &cert_path, "no certificate found"));
    };
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(|e| tls_err("reading", &key_path, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AppError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| AppError::Tls(e.to_string()))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(server)), presented))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_base_url_then_the_machine() {
        assert_eq!(url_host("https://gw.example:8443/x"), Some("gw.example"));
        assert_eq!(url_host("https://[fd00::1]:8443"), Some("fd00::1"));
        assert_eq!(url_host("http://10.0.0.5"), Some("10.0.0.5"));
        assert_eq!(url_host("https://"), None);
        let names = certificate_names("https://gw.example:8443");
        assert_eq!(names[0], "gw.example");
        assert!(names.ends_with(&["localhost".into(), "127.0.0.1".into(), "::1".into()]));
        let local = certificate_names("https://localhost:8443");
        assert_eq!(local.iter().filter(|n| *n == "localhost").count(), 1);
    }

    #[test]
    fn a_certificate_is_kept_until_30_days_before_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        let read = || std::fs::read(dir.path().join("cert.pem")).unwrap();
        ensure_self_signed(dir.path(), "https://gw.example:8443", now).unwrap();
        let first = read();
        let later = Timestamp::from_millis(now.as_millis() + 300 * 86_400_000).unwrap();
        ensure_self_signed(dir.path(), "https://gw.example:8443", later).unwrap();
        assert_eq!(read(), first, "kept while more than 30 days remain");
        let late = Timestamp::from_millis(now.as_millis() + 340 * 86_400_000).unwrap();
        ensure_self_signed(dir.path(), "https://gw.example:8443", late).unwrap();
        assert_ne!(read(), first, "replaced within 30 days of its end");
    }
}
