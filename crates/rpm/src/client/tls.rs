//! Who the client trusts, and the rustls configuration for it.
//!
//! * [`Trust::System`]: the system's CA bundle (`$SSL_CERT_FILE`, else the first of the
//!   usual Linux paths), verified by webpki with the URL's host name.
//! * [`Trust::Ca`]: only the CA certificates of a PEM file (a self-signed server's own
//!   certificate works as its CA), with the host name checked.
//! * [`Trust::Fingerprint`]: exactly the certificate whose SHA-256 `bloatlab server`
//!   printed (`AB:CD:...`, the form of `bloatlab_http::tls::fingerprint`); the name is not
//!   checked (the pin is stronger), the handshake signature is.
//! * [`Trust::Insecure`]: any certificate (the handshake signature is still checked, so
//!   the peer holds the key of the certificate it shows).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Who the client trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The system's CA bundle.
    System,
    /// The CA certificates in this PEM file.
    Ca(PathBuf),
    /// The certificate with this SHA-256 fingerprint.
    Fingerprint(String),
    /// Anyone.
    Insecure,
}

/// Why no TLS configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A CA file that cannot be used.
    #[error("--ca {path}: {why}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// No system CA bundle.
    #[error(
        "no system CA bundle found (set SSL_CERT_FILE, or use --ca FILE, --fingerprint or --insecure)"
    )]
    NoSystemRoots,
    /// A fingerprint that is not 32 hex bytes.
    #[error(
        "--fingerprint `{0}` is not a SHA-256 fingerprint (32 hex bytes, e.g. AB:CD:... as bloatlab server prints it)"
    )]
    BadFingerprint(String),
    /// rustls refused the configuration.
    #[error("TLS setup: {0}")]
    Rustls(String),
}

const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// A fingerprint in canonical form (upper-case hex pairs joined by `:`), from any of
/// `AB:CD..`, `ab:cd..`, `abcd..`.
pub fn normalize_fingerprint(s: &str) -> Result<String, TlsSetupError> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(TlsSetupError::BadFingerprint(s.to_owned()));
    }
    let up = hex.to_ascii_uppercase();
    Ok(up
        .as_bytes()
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect::<Vec<_>>()
        .join(":"))
}

fn read_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block in the file".into());
    }
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err("none of its certificates can be a trust anchor".into());
    }
    Ok(roots)
}

fn system_roots() -> Result<rustls::RootCertStore, TlsSetupError> {
    let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    for p in env
        .iter()
        .map(PathBuf::as_path)
        .chain(SYSTEM_BUNDLES.iter().map(Path::new))
    {
        if let Ok(r) = read_roots(p) {
            return Ok(r);
        }
    }
    Err(TlsSetupError::NoSystemRoots)
}

/// A rustls client configuration for `trust`, offering these ALPN protocols.
pub fn client_config(
    trust: &Trust,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsSetupError::Rustls(e.to_string()))?;
    let mut config = match trust {
        Trust::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Trust::Ca(path) => builder
            .with_root_certificates(read_roots(path).map_err(|why| TlsSetupError::CaFile {
                path: path.clone(),
                why,
            })?)
            .with_no_client_auth(),
        Trust::Fingerprint(fp) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                fingerprint: Some(normalize_fingerprint(fp)?),
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                fingerprint: None,
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Accepts the certificate with this fingerprint (or any, for `None`), checking the
/// handshake signatures with the provider's algorithms.
#[derive(Debug)]
struct Pinned {
    fingerprint: Option<String>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.fingerprint {
            None => Ok(ServerCertVerified::assertion()),
            Some(want) => {
                let got = bloatlab_http::tls::fingerprint(end_entity);
                if &got == want {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(rustls::Error::General(format!(
                        "the server's certificate has fingerprint {got}, not the pinned {want}"
                    )))
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_normalized_and_checked() {
        let hex = "ab".repeat(32);
        let want = vec!["AB"; 32].join(":");
        assert_eq!(normalize_fingerprint(&hex).unwrap(), want);
        assert_eq!(normalize_fingerprint(&want).unwrap(), want);
        assert!(normalize_fingerprint("AB:CD").is_err());
        assert!(normalize_fingerprint(&"zz".repeat(32)).is_err());
    }

    #[test]
    fn a_ca_file_that_is_not_pem_names_the_file() {
        let p = std::env::temp_dir().join(format!("bloatlab-rpm-ca-{}.pem", std::process::id()));
        std::fs::write(&p, "nothing here\n").unwrap();
        let e = client_config(&Trust::Ca(p.clone()), &[b"h2"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--ca") && e.contains("CERTIFICATE"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let e = client_config(&Trust::Ca("/nonexistent/ca.pem".into()), &[b"h2"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}
