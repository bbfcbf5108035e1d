//! Errors of the probe drivers.

use std::io;
use std::net::SocketAddr;

use thiserror::Error;

/// Why a probe run or the responder failed.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// A socket call failed.
    #[error("{what} ({addr}): {source}")]
    Io {
        /// The operation (`bind UDP socket`, `send probe`, ...).
        what: &'static str,
        /// The local or remote address involved.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Nothing answered with a bloatlab probe reply.
    #[error(
        "{addr} did not answer bloatlab probes (is `bloatlab server` running there?){}",
        if *.refused { " [port unreachable]" } else { "" }
    )]
    NoAnswer {
        /// The target.
        addr: SocketAddr,
        /// The kernel reported "connection refused" (ICMP port unreachable).
        refused: bool,
    },
    /// Raw ICMP sockets need root or CAP_NET_RAW.
    #[error("ICMP mode needs root or CAP_NET_RAW to open a raw socket: {source}")]
    Privilege {
        /// The OS error (EPERM / EACCES).
        #[source]
        source: io::Error,
    },
    /// The request cannot be served as given.
    #[error("{0}")]
    Unsupported(String),
    /// The probe size is out of range.
    #[error("probe size {size} bytes is outside {min}..={max}")]
    BadSize {
        /// Requested size.
        size: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
}

impl ProbeError {
    pub(crate) fn io(what: &'static str, addr: SocketAddr) -> impl FnOnce(io::Error) -> ProbeError {
        move |source| ProbeError::Io { what, addr, source }
    }
}
