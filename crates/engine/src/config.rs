//! Typed test configuration shared by the TCP and UDP drivers.
//!
//! The CLI parses iperf 2 spellings (see [`crate::suffix`]) and builds a
//! [`ClientConfig`] or [`ServerConfig`]; the drivers never see strings. Every
//! field documents its unit and its iperf 2 option.

pub use crate::console::Out;
pub use bloatlab_os::StopToken;
use bloatlab_units::CongestionControl;
pub use bloatlab_units::{BitRate, Bytes};
use std::net::SocketAddr;
use std::time::Duration;

/// iperf 2's default port for TCP and UDP (`-p`).
pub const DEFAULT_PORT: u16 = 5001;
/// iperf 2's default TCP read/write length (`-l`): 128 KiB.
pub const DEFAULT_TCP_LEN: Bytes = Bytes(128 * 1024);
/// iperf 2's default UDP datagram length over IPv4 (`-l`).
pub const DEFAULT_UDP_LEN_V4: Bytes = Bytes(1470);
/// iperf 2's default UDP datagram length over IPv6 (`-l`).
pub const DEFAULT_UDP_LEN_V6: Bytes = Bytes(1450);
/// iperf 2's default UDP rate (`-b`): 1 Mbit/s with iperf's 1024-based `M`.
pub const DEFAULT_UDP_RATE: BitRate = BitRate(1024 * 1024);
/// iperf 2's default test duration (`-t`).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// iperf 2's default `--near-congestion` weight.
pub const DEFAULT_NEAR_CONGESTION_WEIGHT: f64 = 0.5;
/// How long a server waits for a client's test header (iperf 2.1.8 uses 4 s).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a server lets a connection or flow go without a byte moving, in
/// any phase, before it ends it (iperf 3's `--rcv-timeout` default).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default `--first-data-timeout`: a TCP test whose client sent a valid
/// header and then nothing is ended after this long (issue 19, attack 3:
/// stalled-after-header connections held every slot for the idle timeout).
pub const DEFAULT_FIRST_DATA_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client waits for `connect()` to complete.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Transport protocol (`-u` selects UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

/// How long a client sends: `-t` seconds or `-n` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// Send for this long (`-t`).
    Time(Duration),
    /// Send this many bytes (`-n`), the test header included (as in iperf 2).
    Bytes(Bytes),
}

impl Default for Amount {
    fn default() -> Self {
        Amount::Time(DEFAULT_DURATION)
    }
}

/// Which way the data flows on the one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Client sends, server receives (iperf 2's default).
    #[default]
    Forward,
    /// Server sends, client receives (`-R` / `--reverse`).
    Reverse,
    /// Both send at once on the same socket (`--full-duplex`).
    FullDuplex,
}

/// What goes to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// iperf 2's console lines.
    #[default]
    Console,
    /// iperf 2's `-y C` CSV rows.
    Csv,
    /// One JSON document at the end (`--json`).
    Json,
}

/// Options that apply to every socket either role opens.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SocketOptions {
    /// `-w`: SO_SNDBUF and SO_RCVBUF; `None` keeps the kernel default.
    pub window: Option<Bytes>,
    /// `-Z` / `--tcp-congestion`: TCP_CONGESTION name (e.g. `cubic`, `bbr`, `reno`).
    pub congestion: Option<CongestionControl>,
    /// `-S` / `--tos`: IP_TOS (IPv4) or IPV6_TCLASS (IPv6) byte.
    pub tos: Option<u8>,
    /// `-V`: use IPv6 (the server listens on `::`).
    pub ipv6: bool,
    /// `-B`: local address (and optional port, 0 = any) to bind.
    pub bind: Option<SocketAddr>,
    /// `-N`: TCP_NODELAY (Nagle off).
    pub nodelay: bool,
    /// `--fwmark N`: SO_MARK, set before `connect()`, so policy routing can pick a route
    /// per socket, e.g. one with `features ecn` to negotiate ECN on this flow only
    /// (Linux has no per-socket ECN switch; needs CAP_NET_ADMIN).
    pub mark: Option<u32>,
    /// `--rx-copy`: copy every received TCP byte into the program. Off (the default), a
    /// receiver drops the bytes it never looks at in the kernel (`MSG_TRUNC`, as iperf
    /// 3.16's `--skip-rx-copy`) and copies only what it parses (trip-times burst
    /// headers); see docs/engine.md, "Reads".
    pub rx_copy: bool,
    /// `--zerocopy`: a TCP sender without `--trip-times` hands the kernel pages
    /// instead of copying its buffer on every write (`sendfile` from a memory file,
    /// as iperf 3's `-Z`); see docs/engine.md, "Zero-copy sends".
    pub zerocopy: bool,
}

/// Everything a client run needs. Build with [`ClientConfig::new`] and adjust fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Server host name or address (resolved by the driver).
    pub host: String,
    /// `-p`: server port.
    pub port: u16,
    /// `-u` selects UDP.
    pub protocol: Protocol,
    /// `-t` or `-n`.
    pub amount: Amount,
    /// `-i`: interval between reports; `None` prints only the final report.
    pub interval: Option<Duration>,
    /// `-l`: length of each write (TCP) or datagram (UDP); `None` is the protocol default.
    pub buffer_len: Option<Bytes>,
    /// `-P`: number of parallel streams (at least 1).
    pub parallel: u32,
    /// `-b`: target rate per stream (UDP pacing); `None` is the default (1 Mbit/s for UDP).
    pub rate: Option<BitRate>,
    /// `-e`: enhanced reports.
    pub enhanced: bool,
    /// `-R`, `--full-duplex`.
    pub direction: Direction,
    /// `--trip-times`: frame writes with the 92-byte burst header carrying write timestamps.
    pub trip_times: bool,
    /// `--near-congestion[=w]`: pause `w` x sampled RTT after each `-l` write. `None` = off.
    pub near_congestion: Option<f64>,
    /// `-X`: ask the server for its ack and print the peer version.
    pub peer_detect: bool,
    /// `-w -Z -S -V -B`.
    pub socket: SocketOptions,
    /// Console, `-y C` or `--json`.
    pub format: OutputFormat,
    /// Bound on `connect()`.
    pub connect_timeout: Duration,
    /// `--notsent-lowat BYTES`: TCP_NOTSENT_LOWAT on whichever end sends
    /// (the bloatlab server is asked through the wire extension block), so
    /// at most about this much unsent data waits in a sender's socket buffer.
    pub notsent_lowat: Option<Bytes>,
    /// `--abort-at-end`: when `-t` ends, close at once with an RST
    /// (SO_LINGER 0) instead of `shutdown()` and waiting for the peer to
    /// drain; the receiving side stops reading at `-t` too. No server-side
    /// report arrives then.
    pub abort_at_end: bool,
    /// `--permit-key`: sent after the TCP test header (iperf 2's KEYCHECK);
    /// 4 to 128 bytes ([`bloatlab_wire::permit_key`]).
    pub permit_key: Option<String>,
    /// Raised (by the caller, e.g. on SIGINT) to end the test early as if its amount were
    /// reached: the streams shut down, collect the peer's report and report what they
    /// measured. Data loops check it at least every 250 ms.
    pub stop: StopToken,
    /// Where the report goes (stdout by default).
    pub out: Out,
    /// Where warnings and per-stream errors go (stderr by default), so `--json` on `out`
    /// stays clean and an embedding program sees them too.
    pub err: Out,
}

impl ClientConfig {
    /// iperf 2's defaults for a client of `host`.
    pub fn new(host: impl Into<String>) -> Self {
        ClientConfig {
            host: host.into(),
            port: DEFAULT_PORT,
            protocol: Protocol::Tcp,
            amount: Amount::default(),
            interval: None,
            buffer_len: None,
            parallel: 1,
            rate: None,
            enhanced: false,
            direction: Direction::Forward,
            trip_times: false,
            near_congestion: None,
            peer_detect: false,
            socket: SocketOptions::default(),
            format: OutputFormat::Console,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            notsent_lowat: None,
            abort_at_end: false,
            permit_key: None,
            stop: StopToken::new(),
            out: Out::stdout(),
            err: Out::stderr(),
        }
    }

    /// The `--json` test description of this client run, started at `start_wall`
    /// (CLOCK_REALTIME since the epoch) against `remote`: what TCP and UDP share. The
    /// drivers add their own fields (TCP: congestion control and near-congestion weight;
    /// UDP: the rate and datagram length in effect).
    pub(crate) fn test_info(
        &self,
        start_wall: Duration,
        remote: String,
    ) -> bloatlab_metrics::json::TestInfo {
        bloatlab_metrics::json::TestInfo {
            start_unix_us: u64::try_from(start_wall.as_micros()).ok(),
            clock: Some("realtime".into()),
            interval_s: self.interval.map(|d| d.as_secs_f64()),
            duration_s: match self.amount {
                Amount::Time(d) => Some(d.as_secs_f64()),
                Amount::Bytes(_) => None,
            },
            amount_bytes: match self.amount {
                Amount::Bytes(b) => Some(b.0),
                Amount::Time(_) => None,
            },
            buffer_bytes: Some(self.effective_len().0),
            target_bits_per_second: self.rate.map(|r| r.0),
            parallel: self.parallel,
            trip_times: self.trip_times,
            reverse: self.direction == Direction::Reverse,
            full_duplex: self.direction == Direction::FullDuplex,
            remote: Some(remote),
            ..Default::default()
        }
    }

    /// The effective `-l`: the explicit value or the protocol's default.
    pub fn effective_len(&self) -> Bytes {
        self.buffer_len
            .unwrap_or(match (self.protocol, self.socket.ipv6) {
                (Protocol::Tcp, _) => DEFAULT_TCP_LEN,
                (Protocol::Udp, false) => DEFAULT_UDP_LEN_V4,
                (Protocol::Udp, true) => DEFAULT_UDP_LEN_V6,
            })
    }

    /// The effective `-b` for UDP (TCP is unpaced unless `-b` is given).
    pub fn effective_rate(&self) -> Option<BitRate> {
        match self.protocol {
            Protocol::Udp => Some(self.rate.unwrap_or(DEFAULT_UDP_RATE)),
            Protocol::Tcp => self.rate,
        }
    }
}

/// Everything a server run needs. Build with [`ServerConfig::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// `-p`: port to listen on.
    pub port: u16,
    /// `-u` selects UDP.
    pub protocol: Protocol,
    /// `-i`: interval between reports.
    pub interval: Option<Duration>,
    /// `-l`: read length; `None` is the protocol default (128 KiB for TCP).
    pub buffer_len: Option<Bytes>,
    /// `-e`: enhanced reports.
    pub enhanced: bool,
    /// `-w -Z -S -V -B` (`-B` is the listen address).
    pub socket: SocketOptions,
    /// Console, `-y C` or `--json` (one document per test).
    pub format: OutputFormat,
    /// `-1` / `--one-off`: exit after one test.
    pub one_off: bool,
    /// How long to wait for a test header before dropping a connection.
    pub header_timeout: Duration,
    /// `--no-reverse`: refuse tests that make the server send (`-R`,
    /// `--full-duplex`). A UDP `-R` header names the rate and duration the
    /// server sends at, to the datagram's source address, which may be
    /// spoofed: on a public host this turns the server into a reflector.
    pub no_reverse: bool,
    /// `--idle-timeout`: a connection (or UDP flow) with no byte received
    /// or sent for this long is ended, in every phase.
    pub idle_timeout: Duration,
    /// `--first-data-timeout`: a forward or full-duplex TCP test whose
    /// client sends no byte after its header for this long is ended.
    pub first_data_timeout: Duration,
    /// `--max-connections`: concurrent TCP connections; more are closed at once.
    pub max_connections: usize,
    /// `--max-per-source`: concurrent TCP connections from one source
    /// (IPv4 address or IPv6 /64).
    pub max_per_source: usize,
    /// Caps on what a test may ask for (`--max-duration` ...).
    pub limits: crate::limits::ServerLimits,
    /// `--permit-key`: refuse TCP tests whose header does not carry this key
    /// (and, as iperf 2 does, tests that carry a key when this is `None`).
    pub permit_key: Option<String>,
    /// Where the reports go (stdout by default).
    pub out: Out,
    /// Where warnings, refusals and per-stream errors go (stderr by default).
    pub err: Out,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            port: DEFAULT_PORT,
            protocol: Protocol::Tcp,
            interval: None,
            buffer_len: None,
            enhanced: false,
            socket: SocketOptions::default(),
            format: OutputFormat::Console,
            one_off: false,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            no_reverse: false,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            first_data_timeout: DEFAULT_FIRST_DATA_TIMEOUT,
            max_connections: crate::limits::DEFAULT_MAX_CONNECTIONS,
            max_per_source: crate::limits::DEFAULT_MAX_PER_SOURCE,
            limits: crate::limits::ServerLimits::default(),
            permit_key: None,
            out: Out::stdout(),
            err: Out::stderr(),
        }
    }
}

impl ServerConfig {
    /// The effective `-l`: the explicit value or the protocol's default.
    pub fn effective_len(&self) -> Bytes {
        self.buffer_len
            .unwrap_or(match (self.protocol, self.socket.ipv6) {
                (Protocol::Tcp, _) => DEFAULT_TCP_LEN,
                (Protocol::Udp, false) => DEFAULT_UDP_LEN_V4,
                (Protocol::Udp, true) => DEFAULT_UDP_LEN_V6,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_info_describes_the_run_for_json() {
        let mut c = ClientConfig::new("h");
        c.amount = Amount::Bytes(Bytes(5000));
        c.interval = Some(Duration::from_millis(500));
        c.direction = Direction::FullDuplex;
        c.parallel = 3;
        let t = c.test_info(
            Duration::from_micros(1_700_000_000_000_001),
            "h:5001".into(),
        );
        assert_eq!(t.start_unix_us, Some(1_700_000_000_000_001));
        assert_eq!(t.clock.as_deref(), Some("realtime"));
        assert_eq!((t.duration_s, t.amount_bytes), (None, Some(5000)));
        assert_eq!(t.interval_s, Some(0.5));
        assert_eq!(t.buffer_bytes, Some(DEFAULT_TCP_LEN.0));
        assert_eq!((t.parallel, t.reverse, t.full_duplex), (3, false, true));
        assert_eq!(t.remote.as_deref(), Some("h:5001"));
        assert_eq!(t.target_bits_per_second, None);
        c.amount = Amount::Time(Duration::from_secs(2));
        let t = c.test_info(Duration::ZERO, String::new());
        assert_eq!((t.duration_s, t.amount_bytes), (Some(2.0), None));
    }

    #[test]
    fn defaults_follow_iperf2() {
        let c = ClientConfig::new("h");
        assert_eq!(c.port, 5001);
        assert_eq!(c.effective_len(), Bytes(131_072));
        assert_eq!(c.effective_rate(), None);
        let mut u = c.clone();
        u.protocol = Protocol::Udp;
        assert_eq!(u.effective_len(), Bytes(1470));
        assert_eq!(u.effective_rate(), Some(BitRate(1_048_576)));
        u.socket.ipv6 = true;
        assert_eq!(u.effective_len(), Bytes(1450));
        assert_eq!(ServerConfig::default().effective_len(), Bytes(131_072));
    }
}
