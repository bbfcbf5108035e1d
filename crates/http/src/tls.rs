//! TLS for the HTTPS listener: TLS 1.3 only, ALPN `h2` then `http/1.1`, with
//! the ring provider (no cmake needed). The certificate comes from PEM files
//! or is made at start (self-signed); either way its SHA-256 fingerprint is
//! reported so a client can pin it (`curl --pinnedpubkey` pins keys, but
//! `openssl x509 -fingerprint -sha256` prints this very form).

use crate::error::HttpError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the HTTPS certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files: the chain (leaf first) and its private key.
    Files { cert: PathBuf, key: PathBuf },
    /// A certificate made at start for these names (DNS names or IP
    /// addresses), valid until the process ends.
    SelfSigned { names: Vec<String> },
}

/// A ready TLS configuration and what to tell the operator about it.
#[derive(Debug)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// SHA-256 of the leaf certificate's DER, `AB:CD:...` (openssl's form).
    pub fingerprint: String,
    pub self_signed: bool,
}

/// The ALPN identifiers offered, in order of preference (RFC 7301; `h2` is
/// RFC 9113 section 3.2).
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

impl Tls {
    /// Loads or makes the certificate and builds the server configuration.
    pub fn new(source: &TlsSource) -> Result<Tls, HttpError> {
        let (chain, key, self_signed) = match source {
            TlsSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?, false),
            TlsSource::SelfSigned { names } => {
                let made = rcgen::generate_simple_self_signed(names.clone())
                    .map_err(|e| HttpError::SelfSigned(e.to_string()))?;
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                    made.signing_key.serialize_der(),
                ));
                (vec![made.cert.der().clone()], key, true)
            }
        };
        let fingerprint = fingerprint(&chain[0]);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| HttpError::TlsConfig(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| match source {
                TlsSource::Files { cert, key } => HttpError::CertKey {
                    cert: cert.clone(),
                    key: key.clone(),
                    reason: e.to_string(),
                },
                TlsSource::SelfSigned { .. } => HttpError::SelfSigned(e.to_string()),
            })?;
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(Tls {
            config: Arc::new(config),
            fingerprint,
            self_signed,
        })
    }
}

/// SHA-256 of a certificate's DER as colon-separated upper-case hex.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = sha2::Sha256::digest(cert.as_ref());
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, HttpError> {
    let bad = |reason: String| HttpError::CertFile {
        path: path.to_path_buf(),
        reason,
    };
    // Read first so a missing file says so (the PEM iterator's error would
    // only say "I/O error").
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read the certificate: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file: {e}")))?;
    if chain.is_empty() {
        return Err(bad("no CERTIFICATE block in the file".into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, HttpError> {
    let bad = |reason: String| HttpError::KeyFile {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read the key: {e}")))?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        bad(format!(
            "no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_offers_h2_then_http11_and_reports_a_sha256_fingerprint() {
        let tls = Tls::new(&TlsSource::SelfSigned {
            names: vec!["localhost".into()],
        })
        .unwrap();
        assert!(tls.self_signed);
        assert_eq!(
            tls.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        // 32 bytes: 64 hex digits and 31 colons.
        assert_eq!(tls.fingerprint.len(), 95, "{}", tls.fingerprint);
    }

    #[test]
    fn fingerprint_matches_a_known_sha256() {
        // SHA-256("abc") from FIPS 180-2, appendix B.1.
        let fp = fingerprint(&CertificateDer::from(b"abc".to_vec()));
        assert!(fp.starts_with("BA:78:16:BF:8F:01:CF:EA"), "{fp}");
        assert!(fp.ends_with("F2:00:15:AD"), "{fp}");
    }

    #[test]
    fn missing_and_garbage_files_name_the_file_and_the_problem() {
        let dir = std::env::temp_dir().join(format!("bloatlab-http-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, "this is not PEM\n").unwrap();
        let missing = dir.join("missing.pem");
        let e = Tls::new(&TlsSource::Files {
            cert: missing.clone(),
            key: garbage.clone(),
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("missing.pem") && e.contains("certificate"),
            "{e}"
        );
        let e = Tls::new(&TlsSource::Files {
            cert: garbage.clone(),
            key: garbage.clone(),
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("garbage.pem") && e.contains("CERTIFICATE"),
            "{e}"
        );
        // A real certificate with a key that is not its own.
        let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
        let b = rcgen::KeyPair::generate().unwrap();
        let (cert, key) = (dir.join("a.pem"), dir.join("b-key.pem"));
        std::fs::write(&cert, a.cert.pem()).unwrap();
        std::fs::write(&key, b.serialize_pem()).unwrap();
        let e = Tls::new(&TlsSource::Files { cert, key })
            .unwrap_err()
            .to_string();
        assert!(e.contains("b-key.pem"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
