//! Errors of the UDP drivers. Each names what failed and where.

use std::net::SocketAddr;

/// Why a UDP server may not answer. UDP has no refusal message: a server that refuses a
/// test (iperf 2 or bloatlab) says nothing, so the client names the likely causes.
pub const UDP_REFUSAL_HINT: &str = "the server refused the test or never got it (a bloatlab \
server refuses -R and --full-duplex with --no-reverse and any request above its caps, such as \
-b above --max-rate or -t above --max-duration; its log says which)";

/// A UDP client or server failure.
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    /// Resolution or a shared socket set-up step failed.
    #[error(transparent)]
    Sock(#[from] crate::sock::SockError),
    /// `socket()` failed.
    #[error("cannot create a UDP socket: {source}")]
    Socket {
        #[source]
        source: std::io::Error,
    },
    /// A socket option was refused (`option` names the flag or sockopt).
    #[error("cannot apply {option}: {source}")]
    SocketOption {
        option: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// `bind()` failed (port in use, address not local).
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// `connect()` failed (no route).
    #[error("cannot connect UDP socket to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Every stream's datagrams drew ICMP port unreachable: no UDP server.
    #[error("no UDP server at {addr}: connection refused (ICMP port unreachable)")]
    Refused { addr: SocketAddr },
    /// A socket call failed mid-test.
    #[error(
        "no reply from the UDP server at {addr} to {tries} reverse-test header datagrams; \
         {UDP_REFUSAL_HINT} (also -R from a client that cannot prove its address, e.g. with \
         -l under 180 bytes, unless the server opts in with --unverified-reverse-rate)"
    )]
    NoReverseData { addr: SocketAddr, tries: u32 },
    #[error("the UDP server at {addr} sent no data in the reverse direction; {UDP_REFUSAL_HINT}")]
    NoData { addr: SocketAddr },
    #[error("UDP {op} failed: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The configuration cannot be run (e.g. a datagram length too small).
    #[error("invalid UDP configuration: {0}")]
    Config(String),
    /// A worker thread died.
    #[error("UDP stream thread panicked")]
    ThreadPanicked,
}
