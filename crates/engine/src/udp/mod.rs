//! UDP traffic: an iperf 2.1.8 compatible client and server.
//!
//! # Entry points
//! * [`run_client`]`(&ClientConfig) -> Result<Collected, UdpError>`: runs
//!   `-P` streams, prints per `cfg.format` (console lines, `-y C` rows, or
//!   one `--json` document at the end) and returns what was reported.
//! * [`run_server`]`(&ServerConfig)` serves until the process ends (or one
//!   test with `one_off`); [`run_server_until`] also stops when a flag is set.
//!
//! # Structure
//! Sans-IO cores, unit-tested with virtual time: [`crate::pacer`] (when may the
//! next datagram leave), [`flows`] (which flow a datagram belongs to, FIN
//! and AckFIN retransmission rules), [`server::ServerCore`] (per-flow
//! statistics, intervals, AckFIN building), [`server_report`] (the AckFIN's
//! `server_hdr` both ways). Thin drivers: [`clock`] (CLOCK_REALTIME /
//! MONOTONIC, absolute-deadline sleeps), [`mmsg`] (`sendmmsg`/`recvmmsg`,
//! kernel receive timestamps), [`sock`] (socket options), and the
//! [`client`] and [`server_loop`] loops. Wire layouts come from `bloatlab-wire`,
//! statistics and console formatting from `bloatlab-metrics`.
//!
//! # Reverse (`-R`)
//! The client sends its header until data arrives, then receives and
//! computes the statistics itself ([`reverse_client`], with the same
//! `RecvFlow` accounting as the server's forward flows); the server starts a
//! sender thread per reverse header (`reverse_server`, with the same paced
//! send loop as the client's forward streams) that ends with one FIN and no
//! AckFIN, as iperf 2.1.8 does. `--full-duplex` runs both at once on one
//! socket (the server's flow receives as usual and also gets a sender; the
//! client sends and receives on two threads); neither end sends an AckFIN.
//!
//! # Clocks
//! Send timestamps on the wire and kernel receive timestamps are
//! CLOCK_REALTIME, as in iperf 2: one-way latency is exact on one host and
//! as good as NTP/PTP sync across hosts (negative values are counted, not
//! hidden). Pacing and client intervals use CLOCK_MONOTONIC; server
//! intervals use the receive-timestamp clock.
//!
//! # bloatlab extension
//! Our client marks its header with "BLAB" (`client_hdrext.type`). Only then
//! does our server append a "BLXR" report frame (JSON with the server's UDP
//! receive statistics and latency percentiles) after the 128 AckFIN bytes,
//! in the same datagram: the frame arrives atomically with the AckFIN and is
//! retransmitted with it. A real iperf 2 client never sends the magic, so it
//! always gets exactly the 128-byte AckFIN.

#[cfg(test)]
mod budget_tests;
pub mod client;
pub mod clock;
mod conn;
pub mod cookie;
pub mod datagram;
#[cfg(test)]
mod deadline_tests;
mod error;
pub mod flows;
#[doc(hidden)]
pub mod fuzzing;
mod json;
pub mod mmsg;
pub mod rate_watch;
mod recv_flow;
pub mod recv_sum;
pub mod report;
pub mod reverse_client;
mod reverse_server;
mod sender;
pub mod server;
pub mod server_loop;
pub mod server_report;
pub mod sock;
#[cfg(test)]
mod tests;

pub use client::run_client;
pub use conn::ConnInfo;
pub use error::UdpError;
pub use report::Collected;
pub use server_loop::{run_server, run_server_until};
