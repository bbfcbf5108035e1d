//! iperf 2.1.8's wire formats, plus bloatlab's extension, as zero-copy views.
//!
//! # Contract
//!
//! Every format has (in the style of smoltcp's `wire` module):
//!
//! * a **view** `Foo<T: AsRef<[u8]>>` over a byte slice with big-endian field
//!   accessors (setters when `T: AsMut<[u8]>`), `new_unchecked`, `new_checked`
//!   and `check_len()`; the byte ranges are public consts in `foo::field`;
//! * a **`FooRepr`**, the parsed form, with `parse(&view) -> Result<_, WireError>`,
//!   `buffer_len()` and `emit(&self, &mut view)`.
//!
//! **Nothing here panics on any input.** `check_len` and `parse` return
//! [`WireError`]; accessors on a view built with `new_unchecked` over a short
//! buffer read 0 and drop writes. `emit` writes the first `buffer_len()`
//! bytes and truncates silently if the buffer is shorter, so size buffers
//! with `buffer_len()`. Units are types: [`Bytes`](bloatlab_units::Bytes),
//! [`BitRate`](bloatlab_units::BitRate), [`std::time::Duration`],
//! [`WallTime`] (`CLOCK_REALTIME` seconds + microseconds, as iperf 2 sends),
//! [`SplitDouble`] (iperf 2's integer + fraction x 1e6 pairs).
//!
//! This crate is sans-IO: it never reads a clock or touches a socket.
//!
//! # Formats (iperf 2.1.8's `include/payloads.h` names; docs/wire.md)
//!
//! | module | message | size |
//! |---|---|---|
//! | [`client_hdr`] | test header core `client_hdr_v1` + `client_hdrext`, start-time/fq, isoch settings | 60 (+20, +32) |
//! | [`tcp_header`] | TCP test header; [`header_len_from_flags`] for servers (5.3) | 60/80/112 |
//! | [`ack`] | `client_hdr_ack` (5.4) | 28/52 |
//! | [`burst`] | `TCP_burst_payload` with trip-times (5.5) | 92 |
//! | [`udp`] | UDP datagram prefix + repeated header (5.9) | 16 + 60/92/144 |
//! | [`ack_fin`] | UDP AckFIN (`server_hdr`) (5.9) | 128 |
//! | [`bloatlab`] | our extension marker and report frame | 12 + payload |
//! | [`flow_query`] | bloatlab's query for a finished flow's sender `TCP_INFO`, and its reply | 18 (+key), 64 |
//! | [`permit_key`] | `--permit-key` appended to the TCP test header (5.11) | 2 + 4..128 |
//!
//! [`checksum`] is the Internet checksum (RFC 1071, RFC 1624) the probes, the
//! emulator and the lab's offloads share. [`inet`] has views of the IPv4,
//! IPv6, TCP and UDP headers themselves, which the lab's offloads cut,
//! coalesce and patch in place.
//!
//! Bounceback (`--bounceback`) messages are not parsed here;
//! [`header_len_from_flags`] rejects them explicitly.

#![forbid(unsafe_code)]

pub mod ack;
pub mod ack_fin;
pub mod blab_block;
pub mod bloatlab;
pub mod burst;
pub mod checksum;
pub mod client_hdr;
mod error;
pub mod field;
mod flags;
pub mod flow_query;
pub mod inet;
pub mod permit_key;
pub mod tcp_header;
mod time;
pub mod udp;
mod version;
mod view;

pub use ack::{AckTimes, ClientHdrAck, ClientHdrAckRepr};
pub use ack_fin::{AckFin, ServerFlags, ServerReportExt, ServerReportRepr};
pub use blab_block::{
    BLAB_BLOCK_LEN, BLOATLAB_EXT_VERSION_BLOCK, BLOATLAB_EXT_VERSION_FLOW_ID, BlabBlockFlags,
    BlabBlockRepr, LEN_WITH_BLAB_BLOCK, LEN_WITH_FLOW_ID,
};
pub use bloatlab::{
    BLOATLAB_EXT_MAGIC, BLOATLAB_EXT_VERSION, BlabExt, MAX_REPORT_PAYLOAD, REPORT_MAGIC,
    ReportFrame, ReportFrameRepr, report_frame_bytes_needed,
};
pub use burst::{TcpBurstHeader, TcpBurstRepr};
pub use client_hdr::{
    Amount, ClientHeader, ClientHeaderRepr, IsochSettingsRepr, Rate, StartFqRepr,
};
pub use error::WireError;
pub use flags::{HeaderFlags, UpperFlags};
pub use flow_query::{
    FlowQuery, FlowQueryRepr, FlowReply, FlowReplyRepr, FlowStatus, ReplyFlags, SenderSummary,
};
pub use tcp_header::{TcpTestHeader, TcpTestHeaderRepr, header_len_from_flags};
pub use time::{SplitDouble, WallTime};
pub use udp::{IsochPayloadRepr, UdpDatagram, UdpDatagramRepr, UdpHeaderRepr, UdpTestsRepr};
pub use version::{PeerVersion, VersionKind};
