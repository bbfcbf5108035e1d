//! One logical read taken as several `recv()` calls, copying only the bytes
//! the receiver looks at.
//!
//! iperf 2's receiver issues `read(-l)` (128 KiB by default) and its
//! Reads=Dist histogram records what each read returned: how much data was
//! waiting, capped at `-l`. A logical read here is one blocking `recv()`,
//! then non-blocking ones while each comes back full and the logical read is
//! under `want`. A short one or `EAGAIN` means the socket's queue is empty,
//! which is exactly where iperf 2's single `read()` would have returned. The
//! sum is what Reads=Dist records, so the histogram keeps its meaning (the
//! data waiting per read, in bins of `-l`/8), and a logical read never takes
//! more than `want` bytes, so trip-times de-framing still stops at burst ends.
//!
//! What each `recv()` does depends on the [`Consumer`] (issue 24):
//! * bytes nobody looks at (the body of every write; everything without
//!   `--trip-times`) are dropped in the kernel with `MSG_TRUNC`
//!   ([`bloatlab_os::fdio::recv_discard`], iperf 3.16's `--skip-rx-copy`):
//!   no copy, and one syscall for the whole logical read;
//! * bytes that must be parsed (a trip-times burst header, 92 bytes) are
//!   copied into our buffer, exactly that many;
//! * with `--rx-copy` every byte is copied, in pieces of at most the
//!   buffer's size, [`READ_PIECE`]. On the 2-vCPU reference VM
//!   (docs/benchmarks.md, "read size") 8 KiB pieces once moved 30-45 Gbit/s
//!   where 128 KiB reads moved 16-22; on today's kernel they no longer help
//!   (ibid., issue 24), and the default skips the copy altogether.

use std::io;
use std::net::TcpStream;

/// Bytes per copying `recv()` (`--rx-copy`, trip-times headers); see the module docs.
pub const READ_PIECE: usize = 8 * 1024;

/// Where pieces come from: a socket, or a script in tests.
pub trait PieceSource {
    /// A `recv()` that waits for data (up to the socket's receive timeout).
    fn recv_wait(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// A `recv()` that returns `WouldBlock` at once when nothing is queued.
    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Drops up to `len` bytes without copying them (`MSG_TRUNC`); waits
    /// for data when `wait`, else `WouldBlock` at once when nothing is queued.
    fn discard(&mut self, len: usize, wait: bool) -> io::Result<usize>;
}

impl PieceSource for &TcpStream {
    fn recv_wait(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        io::Read::read(self, buf)
    }

    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        bloatlab_os::fdio::recv(*self, buf, libc::MSG_DONTWAIT)
    }

    fn discard(&mut self, len: usize, wait: bool) -> io::Result<usize> {
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        bloatlab_os::fdio::recv_discard(*self, len, flags)
    }
}

/// What the receiver needs of the bytes to come.
pub trait Consumer {
    /// How many of the next bytes must be copied and handed to [`Consumer::bytes`]
    /// (0: the next bytes may be dropped unseen).
    fn must_copy(&self) -> usize;
    /// When [`Consumer::must_copy`] is 0: how many bytes may be dropped before one
    /// must be copied again (`usize::MAX`: all of them).
    fn may_skip(&self) -> usize;
    /// Bytes copied, in stream order.
    fn bytes(&mut self, piece: &[u8]);
    /// `n` bytes dropped unseen, in stream order.
    fn skipped(&mut self, n: usize);
}

/// Needs no byte: everything is dropped in the kernel.
#[derive(Debug, Default)]
pub struct SkipAll;

impl Consumer for SkipAll {
    fn must_copy(&self) -> usize {
        0
    }
    fn may_skip(&self) -> usize {
        usize::MAX
    }
    fn bytes(&mut self, _: &[u8]) {}
    fn skipped(&mut self, _: usize) {}
}

/// Copies every byte (`--rx-copy`), handing each piece to the inner consumer.
#[derive(Debug)]
pub struct CopyAll<C>(pub C);

impl<C: Consumer> Consumer for CopyAll<C> {
    fn must_copy(&self) -> usize {
        usize::MAX
    }
    fn may_skip(&self) -> usize {
        0
    }
    fn bytes(&mut self, piece: &[u8]) {
        self.0.bytes(piece);
    }
    fn skipped(&mut self, n: usize) {
        self.0.skipped(n);
    }
}

/// A closure over every copied piece, copying all (the tests' reader).
struct EachPiece<F>(F);

impl<F: FnMut(&[u8])> Consumer for EachPiece<F> {
    fn must_copy(&self) -> usize {
        usize::MAX
    }
    fn may_skip(&self) -> usize {
        0
    }
    fn bytes(&mut self, piece: &[u8]) {
        (self.0)(piece);
    }
    fn skipped(&mut self, _: usize) {}
}

/// Reads logical reads in pieces, keeping an error that ended a logical
/// read early for the next call (so no error is ever swallowed).
#[derive(Debug)]
pub struct PieceReader {
    buf: Vec<u8>,
    pending: Option<io::Error>,
}

impl PieceReader {
    /// A reader whose copied pieces are at most `piece` bytes (at least 1).
    pub fn new(piece: usize) -> PieceReader {
        PieceReader {
            buf: vec![0; piece.max(1)],
            pending: None,
        }
    }

    /// One logical read of at most `want` bytes (at least 1), copying
    /// everything: each piece is handed to `each` in order. `Ok(0)` is end
    /// of stream, as for `read()`.
    pub fn read(
        &mut self,
        src: &mut impl PieceSource,
        want: usize,
        each: impl FnMut(&[u8]),
    ) -> io::Result<usize> {
        self.read_into(src, want, &mut EachPiece(each))
    }

    /// One logical read of at most `want` bytes (at least 1), copying what
    /// `c` must see and dropping the rest in the kernel. `Ok(0)` is end of
    /// stream, as for `read()`.
    pub fn read_into(
        &mut self,
        src: &mut impl PieceSource,
        want: usize,
        c: &mut impl Consumer,
    ) -> io::Result<usize> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        let want = want.max(1);
        let mut got = 0;
        loop {
            let wait = got == 0;
            let copy = c.must_copy().min(want - got);
            let (res, asked) = if copy > 0 {
                let piece = copy.min(self.buf.len());
                let r = if wait {
                    src.recv_wait(&mut self.buf[..piece])
                } else {
                    src.recv_now(&mut self.buf[..piece])
                };
                if let Ok(n) = r {
                    c.bytes(&self.buf[..n]);
                }
                (r, piece)
            } else {
                // A consumer that needs nothing now may still say 0 to skip
                // (a broken one): skip at least a byte, never spin.
                let skip = c.may_skip().min(want - got).max(1);
                let r = src.discard(skip, wait);
                if let Ok(n) = r {
                    c.skipped(n);
                }
                (r, skip)
            };
            match res {
                Ok(0) => break, // EOF: at once, or on the next call's wait
                Ok(n) => {
                    got += n;
                    if n < asked || got >= want {
                        break;
                    }
                }
                Err(e) if wait => return Err(e),
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
        discards: Vec<(bool, usize)>,
    }

    impl Script {
        fn new(q: &[Q]) -> Script {
            Script {
                q: q.iter().copied().collect(),
                next_byte: 0,
                calls: Vec::new(),
                discards: Vec::new(),
            }
        }

        /// Takes up to `len` bytes, writing them into `buf` when copying.
        fn take(&mut self, mut buf: Option<&mut [u8]>, len: usize) -> io::Result<usize> {
            match self.q.pop_front() {
                Some(Q::Data(n)) => {
                    let k = n.min(len);
                    for i in 0..k {
                        if let Some(b) = buf.as_deref_mut() {
                            b[i] = self.next_byte;
                        }
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
            let n = buf.len();
            self.take(Some(buf), n)
        }
        fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls.push((false, buf.len()));
            let n = buf.len();
            self.take(Some(buf), n)
        }
        fn discard(&mut self, len: usize, wait: bool) -> io::Result<usize> {
            self.discards.push((wait, len));
            self.take(None, len)
        }
    }

    /// A toy framing: every 14-byte record opens with a 4-byte header to copy.
    #[derive(Default)]
    struct Records {
        hdr_left: usize,
        body_left: usize,
        seen: Vec<u8>,
        skipped: usize,
    }

    impl Consumer for Records {
        fn must_copy(&self) -> usize {
            if self.body_left == 0 {
                4 - self.hdr_left
            } else {
                0
            }
        }
        fn may_skip(&self) -> usize {
            self.body_left
        }
        fn bytes(&mut self, p: &[u8]) {
            self.seen.extend_from_slice(p);
            self.hdr_left += p.len();
            if self.hdr_left == 4 {
                (self.hdr_left, self.body_left) = (0, 10);
            }
        }
        fn skipped(&mut self, n: usize) {
            self.skipped += n;
            self.body_left -= n;
        }
    }

    #[test]
    fn skipping_takes_a_whole_logical_read_in_one_uncopied_recv() {
        let mut s = Script::new(&[Q::Data(100)]);
        let mut r = PieceReader::new(8);
        assert_eq!(r.read_into(&mut s, 30, &mut SkipAll).unwrap(), 30);
        assert_eq!(s.discards, [(true, 30)]);
        assert!(s.calls.is_empty(), "nothing copied");
        // Less queued than wanted: one call, no second one to learn the queue is empty.
        let mut s = Script::new(&[Q::Data(13)]);
        assert_eq!(r.read_into(&mut s, 128, &mut SkipAll).unwrap(), 13);
        assert_eq!(s.discards, [(true, 128)]);
        let mut s = Script::new(&[Q::Eof]);
        assert_eq!(r.read_into(&mut s, 128, &mut SkipAll).unwrap(), 0);
    }

    #[test]
    fn only_the_bytes_a_consumer_must_see_are_copied() {
        let mut s = Script::new(&[Q::Data(28), Q::Empty]);
        let mut r = PieceReader::new(8);
        let mut c = Records::default();
        assert_eq!(r.read_into(&mut s, 100, &mut c).unwrap(), 28);
        assert_eq!(
            c.seen,
            [0, 1, 2, 3, 14, 15, 16, 17],
            "both headers, in order"
        );
        assert_eq!(c.skipped, 20);
        // The last copy finds the queue empty and ends the logical read.
        assert_eq!(s.calls, [(true, 4), (false, 4), (false, 4)]);
        assert_eq!(s.discards, [(false, 10), (false, 10)]);
        // A header split across reads: the rest of it is copied first.
        let mut s = Script::new(&[Q::Data(2), Q::Data(12)]);
        let mut c = Records::default();
        assert_eq!(r.read_into(&mut s, 100, &mut c).unwrap(), 2);
        assert_eq!(r.read_into(&mut s, 100, &mut c).unwrap(), 12);
        assert_eq!(c.seen, [0, 1, 2, 3]);
        assert_eq!(s.calls, [(true, 4), (true, 2), (false, 4)]);
        assert_eq!(c.body_left, 0);
        // --rx-copy: the same consumer sees every byte.
        let mut s = Script::new(&[Q::Data(14)]);
        let mut c = CopyAll(Records::default());
        assert_eq!(r.read_into(&mut s, 14, &mut c).unwrap(), 14);
        assert_eq!(c.0.seen.len(), 14);
        assert!(s.discards.is_empty());
    }

    #[test]
    fn an_error_after_skipped_data_is_kept_for_the_next_call() {
        let mut s = Script::new(&[Q::Data(4), Q::Fail]);
        let mut r = PieceReader::new(8);
        let mut c = Records::default();
        assert_eq!(r.read_into(&mut s, 100, &mut c).unwrap(), 4);
        let e = r.read_into(&mut s, 100, &mut c).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
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
