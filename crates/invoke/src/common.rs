//! The options `bloatlab client` and `bloatlab server` share, defined once and flattened
//! into both (iperf 2 spells them the same on either side).

use crate::opts;
use bloatlab_engine::config::{Bytes, OutputFormat, Protocol, SocketOptions};
use bloatlab_units::CongestionControl;
use std::net::SocketAddr;
use std::time::Duration;

/// Options of both roles.
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    /// Port (the client connects to it, the server listens on it).
    #[arg(short = 'p', long = "port", default_value_t = 5001)]
    pub port: u16,
    /// Seconds between periodic reports.
    #[arg(short = 'i', long = "interval", value_parser = opts::positive_seconds)]
    pub interval: Option<Duration>,
    /// Length of each write or read (TCP, default 128K; the server's Reads=Dist bin width is
    /// 1/8 of it) or of each datagram (UDP, default 1470).
    #[arg(short = 'l', long = "len", value_parser = opts::nonzero_bytes)]
    pub len: Option<Bytes>,
    /// Socket buffer size (SO_SNDBUF/SO_RCVBUF).
    #[arg(short = 'w', long = "window", value_parser = opts::nonzero_bytes)]
    pub window: Option<Bytes>,
    /// Use UDP.
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
    /// Enhanced reports (client: Write/Err, Rtry, Cwnd/RTT, NetPwr; server: Reads=Dist,
    /// burst latency, inP, NetPwr, peer version).
    #[arg(
        short = 'e',
        long = "enhanced",
        alias = "enhancedreports",
        alias = "enhanced-reports"
    )]
    pub enhanced: bool,
    /// TCP congestion control algorithm (e.g. cubic, reno, bbr); on a server, for accepted
    /// connections (reverse tests send with it).
    #[arg(short = 'Z', long = "tcp-congestion", value_parser = CongestionControl::new)]
    pub congestion: Option<CongestionControl>,
    /// IP TOS byte (0x10, 16, ef, af41, cs1, ...).
    #[arg(short = 'S', long = "tos", value_parser = opts::tos)]
    pub tos: Option<u8>,
    /// Use IPv6 (a server listens on ::).
    #[arg(short = 'V', long = "ipv6_domain", alias = "ipv6")]
    pub ipv6: bool,
    /// Bind to this local address (host or host:port).
    #[arg(short = 'B', long = "bind", value_parser = opts::bind)]
    pub bind: Option<SocketAddr>,
    /// Report style: C for iperf 2's CSV.
    #[arg(short = 'y', long = "reportstyle", value_parser = opts::report_style, conflicts_with = "json")]
    pub report_style: Option<OutputFormat>,
    /// Print JSON (the client: one document at the end; the server: one per test); stdout
    /// then holds only JSON.
    #[arg(long = "json")]
    pub json: bool,
    /// TCP receive: copy every byte into the program. Without it, bytes nothing looks at
    /// are dropped in the kernel (MSG_TRUNC, like iperf 3's --skip-rx-copy); trip-times
    /// headers are always read.
    #[arg(long = "rx-copy")]
    pub rx_copy: bool,
    /// TCP send: zero-copy writes (sendfile from a memory file, like iperf 3's -Z); not
    /// with --trip-times, whose writes carry a fresh header each.
    #[arg(long = "zerocopy")]
    pub zerocopy: bool,
}

impl CommonArgs {
    /// TCP or UDP.
    pub fn protocol(&self) -> Protocol {
        if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        }
    }

    /// The output format: `--json`, else `-y`, else iperf 2's console.
    pub fn format(&self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else {
            self.report_style.unwrap_or_default()
        }
    }

    /// The socket options these flags set (the role adds its own: TCP_NODELAY, SO_MARK).
    pub fn socket(&self) -> SocketOptions {
        SocketOptions {
            window: self.window,
            congestion: self.congestion.clone(),
            tos: self.tos,
            ipv6: self.ipv6,
            bind: self.bind,
            nodelay: false,
            mark: None,
            rx_copy: self.rx_copy,
            zerocopy: self.zerocopy,
        }
    }
}
