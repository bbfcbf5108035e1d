//! Why one TCP stream (a client's or a server's connection) did not run as asked, as a type:
//! the driver reports it as the stream's failure, a program embedding the engine can match on
//! it.

use super::handshake::HandshakeError;
use super::io::ReadError;
use crate::sock::SockError;

/// A stream's failure.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Connecting or setting a socket option failed.
    #[error(transparent)]
    Sock(#[from] SockError),
    /// A socket call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The test header exchange failed (a peer that is not iperf 2 or bloatlab, a refusal).
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    /// Reading a header failed (timeout, EOF, a header that does not parse).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A header could not be built from the test's options.
    #[error(transparent)]
    Wire(#[from] bloatlab_wire::WireError),
    /// The data phase ended in a way the test did not ask for (a stall, a reset, a refusal
    /// without a word); the message says which and when.
    #[error("{0}")]
    NotAsAsked(String),
    /// A bloatlab server's report of what it received cannot be true for what was sent.
    #[error("the server's report is impossible ({0}); not used")]
    ImpossibleReport(String),
    /// A thread of the stream could not be started or died.
    #[error("{0}")]
    Thread(&'static str),
}

impl From<String> for StreamError {
    fn from(why: String) -> StreamError {
        StreamError::NotAsAsked(why)
    }
}

impl From<&'static str> for StreamError {
    fn from(why: &'static str) -> StreamError {
        StreamError::NotAsAsked(why.to_owned())
    }
}
