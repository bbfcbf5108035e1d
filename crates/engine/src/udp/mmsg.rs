//! Batched datagram I/O: `recvmmsg` with kernel receive timestamps and
//! `sendmmsg` from preallocated buffers, and the waits around them.
//!
//! The code (and its `unsafe`) lives in `bloatlab_os::mmsg`: buffers, iovecs,
//! address and control storage are allocated once and every call re-points
//! the `mmsghdr`s at them, so no allocation or copy happens per datagram,
//! which is what lets the 64-byte full-speed benchmark run at kernel speed.
//! This module names what the UDP driver uses.

pub use bloatlab_os::mmsg::{Received, RecvBatch, SendBatch};
pub use bloatlab_os::poll::wait_readable;
pub use bloatlab_os::sockmsg::{enable_pktinfo, enable_rx_timestamps};

/// One datagram from `sock` if one is waiting, without blocking and
/// without touching the socket's blocking mode (senders share it);
/// returns the datagram's real length (it may exceed `buf`).
pub fn recv_now(sock: &impl std::os::fd::AsRawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    bloatlab_os::fdio::recv(sock, buf, libc::MSG_DONTWAIT | libc::MSG_TRUNC)
}
