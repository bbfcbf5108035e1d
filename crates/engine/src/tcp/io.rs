//! Blocking reads with an overall deadline, and reads that tolerate the
//! receive timeout the data loops set (so they can notice interval ends).

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why an exact read stopped short.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("timed out after {waited_ms} ms with {got} of {want} bytes")]
    Timeout {
        got: usize,
        want: usize,
        waited_ms: u128,
    },
    #[error("peer closed after {got} of {want} bytes")]
    Closed { got: usize, want: usize },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Fills `buf` completely before `deadline`. The socket's read timeout is
/// changed; callers set their own afterwards.
pub fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<(), ReadError> {
    let start = Instant::now();
    let mut got = 0;
    while got < buf.len() {
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(ReadError::Timeout {
                got,
                want: buf.len(),
                waited_ms: start.elapsed().as_millis(),
            });
        }
        stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(ReadError::Closed {
                    got,
                    want: buf.len(),
                });
            }
            Ok(n) => got += n,
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// EAGAIN / EWOULDBLOCK (a socket timeout expired) or EINTR: try again.
pub fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The peer went away (reset, broken pipe): the end of a test, not a failure.
pub fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}
