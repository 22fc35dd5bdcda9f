//! TLS: the configured certificate and key, or a self-signed pair made with rcgen on first start
//! and kept in the data dir so clients can pin it.

use super::AppError;
use crate::config::Config;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> AppError {
    AppError::Tls(format!("{what} {}: {e}", path.display()))
}

/// Makes the self-signed pair in `dir` unless it is already there; returns (cert, key) paths.
pub fn ensure_self_signed(dir: &Path) -> Result<(PathBuf, PathBuf), AppError> {
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    if cert_path.is_file() && key_path.is_file() {
        return Ok((cert_path, key_path));
    }
    std::fs::create_dir_all(dir).map_err(|e| tls_err("creating", dir, e))?;
    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let generated =
        rcgen::generate_simple_self_signed(names).map_err(|e| AppError::Tls(e.to_string()))?;
    write_private(&key_path, generated.signing_key.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, generated.cert.pem())
        .map_err(|e| tls_err("writing", &cert_path, e))?;
    tracing::info!(cert = %cert_path.display(), "generated a self-signed TLS certificate");
    Ok((cert_path, key_path))
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

pub fn acceptor(config: &Config) -> Result<TlsAcceptor, AppError> {
    let (cert_path, key_path) = match (&config.tls.cert_file, &config.tls.key_file) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ => ensure_self_signed(&config.data_dir.join("tls"))?,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| tls_err("reading", &cert_path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| tls_err("parsing", &cert_path, e))?;
    if certs.is_empty() {
        return Err(tls_err("reading", &cert_path, "no certificate found"));
    }
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
    Ok(TlsAcceptor::from(Arc::new(server)))
}
