//! One logical read taken as several small `recv()` calls.
//!
//! iperf 2's receiver issues `read(-l)` (128 KiB by default) and its
//! Reads=Dist histogram records what each read returned: how much data was
//! waiting, capped at `-l`. Reading 128 KiB at a time is, however, slow on
//! Linux loopback: on the 2-vCPU reference VM (docs/benchmarks.md, "read
//! size") a receiver taking 8 KiB per `recv()` moved 30-45 Gbit/s where one
//! taking 128 KiB moved 16-22, with the sender's core saturated in both cases
//! (smaller copies keep the receiver's buffer and the freed socket memory
//! cache-hot and release receive-window space sooner).
//!
//! So a logical read here is: one blocking `recv()` of up to [`READ_PIECE`]
//! bytes, then non-blocking ones while each piece comes back full and the
//! logical read is under `want`. A short piece or `EAGAIN` means the socket's
//! queue is empty, which is exactly where iperf 2's single `read()` would
//! have returned. The sum is what Reads=Dist records, so the histogram keeps
//! its meaning (the data waiting per read, in bins of `-l`/8), and a logical
//! read never takes more than `want` bytes, so trip-times de-framing still
//! stops at burst ends.

use std::io;
use std::net::TcpStream;

/// Bytes per `recv()`; see the module docs for the measurement behind it.
pub const READ_PIECE: usize = 8 * 1024;

/// Where pieces come from: a socket, or a script in tests.
pub trait PieceSource {
    /// A `recv()` that waits for data (up to the socket's receive timeout).
    fn recv_wait(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// A `recv()` that returns `WouldBlock` at once when nothing is queued.
    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

impl PieceSource for &TcpStream {
    fn recv_wait(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        io::Read::read(self, buf)
    }

    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        bloatlab_os::fdio::recv(*self, buf, libc::MSG_DONTWAIT)
    }
}

/// Reads logical reads in pieces, keeping an error that ended a logical
/// read early for the next call (so no error is ever swallowed).
#[derive(Debug)]
pub struct PieceReader {
    buf: Vec<u8>,
    pending: Option<io::Error>,
}

impl PieceReader {
    /// A reader whose pieces are at most `piece` bytes (at least 1).
    pub fn new(piece: usize) -> PieceReader {
        PieceReader {
            buf: vec![0; piece.max(1)],
            pending: None,
        }
    }

    /// One logical read of at most `want` bytes (at least 1). Each piece is
    /// handed to `each` in order. `Ok(0)` is end of stream, as for `read()`.
    pub fn read(
        &mut self,
        src: &mut impl PieceSource,
        want: usize,
        mut each: impl FnMut(&[u8]),
    ) -> io::Result<usize> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let want = want.max(1);
        let first = want.min(self.buf.len());
        let n = src.recv_wait(&mut self.buf[..first])?;
        each(&self.buf[..n]);
        let (mut got, mut full) = (n, n == first);
        while full && got < want {
            let piece = (want - got).min(self.buf.len());
            match src.recv_now(&mut self.buf[..piece]) {
                Ok(0) => break, // EOF: the next call's wait returns 0 at once
                Ok(n) => {
                    each(&self.buf[..n]);
                    got += n;
                    full = n == piece;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pending = Some(e);
                    break;
                }
            }
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// What the socket queue holds at each call: `Data(n)` = n bytes are
    /// there (a recv takes min(n, len) and the rest stays), `Empty`
    /// (`WouldBlock` for recv_now), `Eof`, `Fail`.
    #[derive(Debug, Clone, Copy)]
    enum Q {
        Data(usize),
        Empty,
        Eof,
        Fail,
    }

    struct Script {
        q: VecDeque<Q>,
        next_byte: u8,
        calls: Vec<(bool, usize)>,
    }

    impl Script {
        fn new(q: &[Q]) -> Script {
            Script {
                q: q.iter().copied().collect(),
                next_byte: 0,
                calls: Vec::new(),
            }
        }

        fn take(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.q.pop_front() {
                Some(Q::Data(n)) => {
                    let k = n.min(buf.len());
                    for b in &mut buf[..k] {
                        *b = self.next_byte;
                        self.next_byte = self.next_byte.wrapping_add(1);
                    }
                    if n > k {
                        self.q.push_front(Q::Data(n - k));
                    }
                    Ok(k)
                }
                Some(Q::Empty) | None => Err(io::ErrorKind::WouldBlock.into()),
                Some(Q::Eof) => {
                    self.q.push_front(Q::Eof);
                    Ok(0)
                }
                Some(Q::Fail) => Err(io::ErrorKind::ConnectionReset.into()),
            }
        }
    }

    impl PieceSource for Script {
        fn recv_wait(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls.push((true, buf.len()));
            self.take(buf)
        }
        fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls.push((false, buf.len()));
            self.take(buf)
        }
    }

    fn read(r: &mut PieceReader, s: &mut Script, want: usize) -> (io::Result<usize>, Vec<u8>) {
        let mut seen = Vec::new();
        let res = r.read(s, want, |p| seen.extend_from_slice(p));
        (res, seen)
    }

    #[test]
    fn a_full_queue_is_one_logical_read_capped_at_want() {
        let mut s = Script::new(&[Q::Data(100)]);
        let mut r = PieceReader::new(8);
        let (res, seen) = read(&mut r, &mut s, 30);
        assert_eq!(res.unwrap(), 30);
        assert_eq!(seen, (0..30).collect::<Vec<u8>>(), "pieces in order");
        assert_eq!(s.calls, [(true, 8), (false, 8), (false, 8), (false, 6)]);
        // The rest stays queued for the next logical read.
        let (res, seen) = read(&mut r, &mut s, 30);
        assert_eq!(res.unwrap(), 30);
        assert_eq!(seen[0], 30);
    }

    #[test]
    fn a_short_piece_ends_the_read_without_another_syscall() {
        let mut s = Script::new(&[Q::Data(13)]);
        let mut r = PieceReader::new(8);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 13);
        assert_eq!(s.calls, [(true, 8), (false, 8)]);
        let mut s = Script::new(&[Q::Data(5)]);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 5);
        assert_eq!(s.calls, [(true, 8)]);
    }

    #[test]
    fn an_empty_queue_at_a_piece_boundary_ends_the_read() {
        let mut s = Script::new(&[Q::Data(16), Q::Empty, Q::Data(4)]);
        let mut r = PieceReader::new(8);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 16);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 4);
    }

    #[test]
    fn eof_after_data_returns_the_data_then_zero() {
        let mut s = Script::new(&[Q::Data(8), Q::Eof]);
        let mut r = PieceReader::new(8);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 8);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 0);
    }

    #[test]
    fn an_error_after_data_is_kept_for_the_next_call() {
        let mut s = Script::new(&[Q::Data(8), Q::Fail, Q::Data(8)]);
        let mut r = PieceReader::new(8);
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 8);
        let (res, seen) = read(&mut r, &mut s, 128);
        assert_eq!(res.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert!(seen.is_empty());
        assert_eq!(read(&mut r, &mut s, 128).0.unwrap(), 8);
    }

    #[test]
    fn errors_of_the_waiting_recv_pass_through() {
        let mut s = Script::new(&[]);
        let mut r = PieceReader::new(8);
        let (res, _) = read(&mut r, &mut s, 128);
        assert_eq!(res.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn want_smaller_than_a_piece_reads_exactly_want() {
        let mut s = Script::new(&[Q::Data(100)]);
        let mut r = PieceReader::new(8 * 1024);
        assert_eq!(read(&mut r, &mut s, 92).0.unwrap(), 92);
        assert_eq!(s.calls, [(true, 92)]);
        assert_eq!(read(&mut r, &mut s, 0).0.unwrap(), 1, "want 0 reads 1");
    }
}
