//! Why the HTTP service could not start. Everything after start (a peer's
//! bad request, a reset) is answered or logged per connection, never fatal.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("--{flag} {addr}: cannot listen: {source}")]
    Bind {
        flag: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("--tls-cert {path}: {reason}")]
    CertFile { path: PathBuf, reason: String },
    #[error("--tls-key {path}: {reason}")]
    KeyFile { path: PathBuf, reason: String },
    #[error("--tls-cert {cert} / --tls-key {key}: {reason}")]
    CertKey {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("making a self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    #[error("starting the HTTP service's runtime: {0}")]
    Runtime(std::io::Error),
}
