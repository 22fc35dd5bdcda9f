//! Client TLS that judges the server's certificate itself (a check that reports expiry on its
//! own terms, an edge that pins its main's certificate) while rustls still verifies the
//! handshake signatures, so the peer holds the key of the certificate it showed.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::sync::Arc;

/// Decides on the server's end-entity certificate: `Err` says why it is refused.
pub type Judge = dyn Fn(&CertificateDer<'_>) -> Result<(), String> + Send + Sync;

struct OwnJudgement {
    provider: Arc<CryptoProvider>,
    judge: Box<Judge>,
}

impl std::fmt::Debug for OwnJudgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnJudgement")
    }
}

impl ServerCertVerifier for OwnJudgement {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        (self.judge)(end_entity)
            .map(|()| ServerCertVerified::assertion())
            .map_err(rustls::Error::General)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client configuration (ring) that accepts the certificates `judge` accepts.
pub fn client_config(
    judge: impl Fn(&CertificateDer<'_>) -> Result<(), String> + Send + Sync + 'static,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(OwnJudgement {
                provider,
                judge: Box::new(judge),
            }))
            .with_no_client_auth(),
    )
}

/// A client configuration (ring) for a peer configured by the operator (an IMAP server, an MQTT
/// broker): trusts the PEM certificates of `ca_file` (a private CA), else the system roots;
/// with `insecure`, any certificate.
pub fn trusting(ca_file: Option<&str>, insecure: bool) -> Result<rustls::ClientConfig, String> {
    if insecure {
        return client_config(|_| Ok(()));
    }
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let unreadable = |e: &dyn std::fmt::Display| format!("caFile {path:?}: {e}");
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
                roots
                    .add(cert.map_err(|e| unreadable(&e))?)
                    .map_err(|e| unreadable(&e))?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
