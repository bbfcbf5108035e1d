//! bloatlab's measurement and reporting core: iperf 2.1.8 compatible
//! accumulators and console/CSV/JSON output, **sans-IO**.
//!
//! # Contract
//! Nothing here reads a clock or touches a socket. Every timestamp is an
//! argument: either an offset from the test start (`Duration`, for report
//! spans), or a point on a clock shared by both ends expressed as a
//! `Duration` since that clock's epoch (for one-way delays: the UNIX epoch of
//! `CLOCK_REALTIME`, as iperf 2's `--trip-times` does). One-way delays are
//! [`Transit`]s, which can be negative under clock skew; they are counted,
//! never a panic.
//!
//! # Flow
//! 1. The engine owns one accumulator per stream and direction:
//!    [`TcpSendStats`], [`TcpRecvStats`], [`UdpSendStats`], [`UdpRecvStats`].
//!    It feeds events (`on_write`, `on_read`, `on_burst_complete`,
//!    `on_tcp_info`, `on_datagram`, ...).
//! 2. At each `-i` boundary ([`IntervalClock`]) it calls `take_interval(span)`
//!    and gets a plain snapshot ([`TcpSendSnapshot`], [`TcpRecvSnapshot`],
//!    [`UdpSendSnapshot`], [`UdpRecvSnapshot`]); at the end `total(span)`.
//!    Snapshots of parallel streams add up with `Snapshot::sum`.
//! 3. Snapshots are rendered by [`Console`] (iperf 2.1.8 lines, byte for
//!    byte), [`csv`] (`-y C`) or turned into the versioned JSON [`json`]
//!    document. A bloatlab server sends a [`ServerSideReport`] to a bloatlab
//!    client at the end of a test (JSON inside the wire crate's `BLXR` frame).
//!
//! ```
//! use bloatlab_metrics::{Console, Span, StreamLabel, TcpSendStats, TcpInfoSample};
//! use bloatlab_units::Bytes;
//! use std::time::Duration;
//!
//! let mut s = TcpSendStats::new();
//! for _ in 0..11_240 {
//!     s.on_write(Bytes(131_072));
//! }
//! s.on_tcp_info(TcpInfoSample {
//!     snd_cwnd: 148,
//!     snd_mss: 32_741,
//!     rtt: Duration::from_micros(251),
//!     rttvar: Duration::from_micros(272),
//!     total_retrans: 29,
//!     delivered_ce: None,
//!     bytes_acked: None,
//! });
//! let snap = s.take_interval(Span::new(Duration::ZERO, Duration::from_secs(1)));
//! assert_eq!(
//!     Console::default().tcp_send_line(StreamLabel::Id(1), &snap),
//!     "[  1] 0.0000-1.0000 sec  1.37 GBytes  11.8 Gbits/sec  11240/0         29     4732K/251(272) us  5869519"
//! );
//! ```
//!
//! Formulas and formats (as iperf 2.1.8's `src/ReportOutputs.c` and `src/Locale.c` compute
//! and print them) and the user-facing contract: `docs/metrics.md`.

#![forbid(unsafe_code)]

pub mod ack_fin;
pub mod cfmt;
pub mod console;
pub mod csv;
pub mod formulas;
pub mod histogram;
pub mod interval;
pub mod json;
pub mod reads;
pub mod seq;
pub mod tcp_recv;
pub mod tcp_send;
pub mod transit;
pub mod udp_recv;
pub mod udp_send;
pub mod welford;

pub use cfmt::ByteFormat;
pub use console::{Console, HeaderOnce, StreamLabel};
pub use histogram::LatencyHistogram;
pub use interval::{IntervalClock, Span};
pub use json::{Document, SchemaError, ServerSideReport};
pub use reads::ReadsDist;
pub use seq::{SeqEvent, SeqTracker};
pub use tcp_recv::{BurstLatency, TcpRecvSnapshot, TcpRecvStats};
pub use tcp_send::{PacedWaits, TcpInfoSample, TcpSendSnapshot, TcpSendStats};
pub use transit::Transit;
pub use udp_recv::{UdpRecvSnapshot, UdpRecvStats};
pub use udp_send::{UdpSendSnapshot, UdpSendStats};
pub use welford::{LatencyStats, Welford};
