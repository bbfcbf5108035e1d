//! TCP client and server, wire-compatible with iperf 2.1.8.
//!
//! Threads: one per stream (and a second per full-duplex stream for the
//! receiving half), plus one reporter that formats lines. Data loops never
//! print: they send [`Event`]s to the reporter over a channel.
//!
//! Protocol (README section 5): the client sends the test header in its own
//! `send()`, then data; `--trip-times` frames every `-l` write with a 92-byte
//! burst header; the test ends with `shutdown(SHUT_WR)` and a drain to EOF.

#[cfg(test)]
mod bounds_tests;
pub mod client;
pub mod csv;
pub mod duplex;
pub mod flow_query;
pub mod group;
pub mod handshake;
pub mod io;
pub mod json;
#[cfg(test)]
mod loops_tests;
pub mod pieces;
pub mod recv;
pub mod report;
pub mod send;
pub mod server;
pub mod stats;
pub mod stream_error;

use bloatlab_metrics::tcp_recv::TcpRecvSnapshot;
use bloatlab_metrics::tcp_send::TcpSendSnapshot;
use std::sync::mpsc;

/// Which end of the connection we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// A connection as the `connected with` line describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnInfo {
    pub local: std::net::SocketAddr,
    pub peer: std::net::SocketAddr,
    /// `(trip-times)`, `(reverse)`, `(full-duplex)`, `(peer 2.1.8)` ... in print order.
    pub tags: Vec<String>,
    /// Congestion control in effect on the socket.
    pub congestion: Option<String>,
    /// `icwnd/mss/irtt` right after connect/accept.
    pub initial: Option<crate::tcpinfo::TcpInfoSample>,
    /// `connect()` time (client only).
    pub connect_time: Option<std::time::Duration>,
    /// ECN negotiated on the connection (`TCP_INFO` options; `None`: unknown).
    pub ecn: Option<bool>,
}

/// What data loops and stream threads tell the reporter.
// A few events per interval per stream: moving a few hundred bytes is cheaper
// than boxing them.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Event {
    Connected {
        stream: u32,
        info: ConnInfo,
    },
    SendInterval {
        stream: u32,
        snap: TcpSendSnapshot,
    },
    RecvInterval {
        stream: u32,
        snap: TcpRecvSnapshot,
    },
    SendFinal {
        stream: u32,
        partial: Option<TcpSendSnapshot>,
        total: TcpSendSnapshot,
    },
    RecvFinal {
        stream: u32,
        partial: Option<TcpRecvSnapshot>,
        total: TcpRecvSnapshot,
    },
    /// The peer's end-of-test report (bloatlab extension), JSON text.
    PeerReport {
        stream: u32,
        json: String,
    },
    /// A bloatlab server's hello on a reverse/full-duplex stream: what its
    /// sending socket uses (bloatlab extension).
    PeerSender {
        stream: u32,
        hello: bloatlab_metrics::json::SenderHello,
    },
    /// A bloatlab server's sending socket's final TCP_INFO (flow query).
    PeerSenderInfo {
        stream: u32,
        summary: bloatlab_wire::SenderSummary,
    },
    /// The receiving socket's TCP_INFO at the end of a stream.
    RecvTcpInfo {
        stream: u32,
        info: bloatlab_metrics::json::RecvTcpInfoRecord,
    },
    /// A stream failed; the message names what.
    Failed {
        stream: u32,
        error: String,
    },
}

/// Where data loops send their events.
pub type Sink = mpsc::Sender<Event>;
