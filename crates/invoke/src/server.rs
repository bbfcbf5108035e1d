//! `bloatlab server` (also `bloatlab -s`): iperf 2's server options and the HTTP
//! service's ([`BrowserArgs`] among them), [`ServerArgs::resolve`]d into one
//! [`ServerInvocation`] (the engine's [`ServerConfig`] and the rest), and [`to_argv`]
//! back (`invocation.rs`). The binary checks the results directory and generates a key.

use crate::client::secs;
use crate::common::CommonArgs;
use crate::opts;
use bloatlab_engine::config::{BitRate, Bytes, OutputFormat, Protocol, ServerConfig};
use bloatlab_engine::limits::{self, ServerLimits};
use bloatlab_http::TestCaps;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `bloatlab server`, spelled as iperf 2 spells them.
#[derive(Debug, clap::Args)]
#[command(disable_version_flag = true)]
pub struct ServerArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Exit after one test (all of its -P streams).
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// Seconds to wait for a client's test header before dropping it (the
    /// iperf-compatible service only; the HTTP service has --http-header-timeout).
    #[arg(long = "header-timeout", default_value = "4", value_parser = opts::positive_seconds)]
    pub header_timeout: Duration,
    /// --https: seconds a TLS handshake may stall (the client owing us bytes
    /// and sending none) before the connection is cut. The clock starts again
    /// at each byte or ACK from the client and while our own bytes are
    /// unacknowledged (a handshake through a loaded, bloated link takes
    /// several of its long round trips); up to --http-wait-max in all.
    #[arg(long = "handshake-timeout", value_name = "S", default_value = "15",
          value_parser = opts::positive_seconds)]
    pub handshake_timeout: Duration,
    /// --http / --https: seconds a TLS handshake or a wait for a request head
    /// may take in all, however the client progresses (the bound on one that
    /// trickles bytes).
    #[arg(long = "http-wait-max", value_name = "S", default_value = "60",
          value_parser = opts::positive_seconds)]
    pub http_wait_max: Duration,
    /// --http / --https: seconds a wait for a request head (the first one after
    /// accept or the TLS handshake; on HTTP/1.1 each next one after a response)
    /// may stall, as --handshake-timeout, before the connection is cut.
    /// --header-timeout never applies here.
    #[arg(long = "http-header-timeout", value_name = "S", default_value = "10",
          value_parser = opts::positive_seconds)]
    pub http_header_timeout: Duration,
    /// Refuse tests that make this server send (-R, --full-duplex), TCP and UDP:
    /// a UDP -R request from a spoofed address would aim our traffic at a third party.
    #[arg(long = "no-reverse")]
    pub no_reverse: bool,
    /// End a connection or UDP flow after this many seconds without a byte
    /// moving, in any phase (iperf 3's --rcv-timeout is 120 s too).
    #[arg(long = "idle-timeout", default_value = "120", value_parser = opts::positive_seconds)]
    pub idle_timeout: Duration,
    /// End a TCP test whose client sent a valid header and then no data for
    /// this many seconds (instead of holding a slot for --idle-timeout).
    #[arg(long = "first-data-timeout", default_value = "5", value_parser = opts::positive_seconds)]
    pub first_data_timeout: Duration,
    /// Concurrent TCP connections in all; more are closed at once.
    #[arg(long = "max-connections", default_value_t = limits::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Concurrent TCP connections from one source (IPv4 address or IPv6 /64).
    #[arg(long = "max-per-source", default_value_t = limits::DEFAULT_MAX_PER_SOURCE as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_per_source: u32,
    /// Longest test (-t) a client may ask for, in seconds; also ends -n tests.
    #[arg(long = "max-duration", default_value = "3600", value_parser = opts::positive_seconds)]
    pub max_duration: Duration,
    /// Largest -n a client may ask for (K/M/G = 1024-based, k/m/g = 1000-based).
    #[arg(long = "max-bytes", default_value = "1000g", value_parser = opts::nonzero_bytes)]
    pub max_bytes: Bytes,
    /// Largest -P a client may ask for, and most TCP tests one source
    /// (IPv4 address or IPv6 /64) may run at once, counted by connection.
    #[arg(long = "max-streams", default_value_t = limits::DEFAULT_MAX_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: u32,
    /// Largest -b a client may announce for what it sends, and what this server
    /// receives from one source (IPv4 address or IPv6 /64) in all (default: no cap).
    #[arg(long = "max-rate", value_parser = opts::rate)]
    pub max_rate: Option<BitRate>,
    /// What this server receives from all sources together (default: 4 x --max-rate).
    #[arg(long = "max-total-rate", value_parser = opts::rate)]
    pub max_total_rate: Option<BitRate>,
    /// Largest -b this server sends at on -R / --full-duplex tests, and what it
    /// sends to one source in all; with a cap, requests without -b (full speed)
    /// are refused (default: no cap).
    #[arg(long = "max-reverse-rate", value_parser = opts::rate)]
    pub max_reverse_rate: Option<BitRate>,
    /// What this server sends to all sources together (default: 4 x --max-reverse-rate).
    #[arg(long = "max-total-reverse-rate", value_parser = opts::rate)]
    pub max_total_reverse_rate: Option<BitRate>,
    /// Seconds one source may keep this server busy (moving data, its tests
    /// counted once however many run at once), refilled at that much per 24 h;
    /// 0: no budget (a lab server serving one address for hours).
    #[arg(long = "max-source-time", default_value = "7200", value_parser = opts::seconds)]
    pub max_source_time: Duration,
    /// Opt-in: largest UDP -R / --full-duplex rate for a client that cannot
    /// prove it receives at its address (iperf 2 clients). Default 0 refuses
    /// them: a forged source would make the server a reflector.
    #[arg(long = "unverified-reverse-rate", default_value = "0", value_parser = opts::rate)]
    pub unverified_reverse_rate: BitRate,
    /// Longest UDP -R / --full-duplex test for such a client, in seconds.
    #[arg(long = "unverified-reverse-time", default_value = "30", value_parser = opts::positive_seconds)]
    pub unverified_reverse_time: Duration,
    /// Do not answer `bloatlab ping` probes on UDP at the same port (TCP server only).
    #[arg(long = "no-probes")]
    pub no_probes: bool,
    /// Refuse TCP tests that do not send this key (iperf 2's --permit-key;
    /// 4 to 128 characters; without =KEY a random key is generated and
    /// printed). Latency probes on the same port then need an HMAC of this key
    /// (`bloatlab ping --permit-key`).
    /// Not available with -u, as in iperf 2. Or in $BLOATLAB_PERMIT_KEY (a TCP server
    /// without --permit-key reads it, as `client` does; `bloatlab experiment` gives its
    /// server the key there, off the command line).
    #[arg(long = "permit-key", num_args = 0..=1, require_equals = true,
          default_missing_value = "", value_parser = opts::server_permit_key)]
    pub permit_key: Option<String>,
    /// Also serve HTTP/1.1 and h2c (prior knowledge) on this TCP port: the
    /// responsiveness (RPM) test endpoints, config at /.well-known/nq
    /// (docs/http.md).
    #[arg(long = "http", value_name = "PORT")]
    pub http: Option<u16>,
    /// Also serve HTTPS (TLS 1.3, ALPN h2 and http/1.1) on this TCP port; without
    /// --tls-cert a self-signed certificate is made and its SHA-256 fingerprint printed.
    #[arg(long = "https", value_name = "PORT")]
    pub https: Option<u16>,
    /// PEM certificate chain (leaf first) for --https (with --tls-key).
    #[arg(long = "tls-cert", value_name = "FILE")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) for --tls-cert.
    #[arg(long = "tls-key", value_name = "FILE")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve only --http / --https, not the iperf-compatible service.
    #[arg(long = "no-iperf")]
    pub no_iperf: bool,
    /// The browser test's record and caps (--results-dir, --browser-*).
    #[command(flatten)]
    pub browser: BrowserArgs,
    /// Accepted for iperf 2 habits; client-only, ignored with a warning.
    #[arg(long = "near-congestion", num_args = 0..=1, require_equals = true,
          default_missing_value = "0.5", value_parser = opts::weight, hide = true)]
    pub near_congestion: Option<f64>,
}

impl ServerArgs {
    /// The engine's part of the command line, as given (the permit key from the flag
    /// only; [`ServerArgs::resolve`] adds the environment's and checks the rest).
    fn engine(&self) -> ServerConfig {
        ServerConfig {
            port: self.common.port,
            protocol: self.common.protocol(),
            interval: self.common.interval,
            buffer_len: self.common.len,
            enhanced: self.common.enhanced,
            socket: self.common.socket(),
            format: self.common.format(),
            one_off: self.one_off,
            header_timeout: self.header_timeout,
            no_reverse: self.no_reverse,
            idle_timeout: self.idle_timeout,
            first_data_timeout: self.first_data_timeout,
            max_connections: self.max_connections as usize,
            max_per_source: self.max_per_source as usize,
            limits: ServerLimits {
                max_duration: self.max_duration,
                max_bytes: self.max_bytes,
                max_streams: self.max_streams,
                max_rate: self.max_rate,
                max_total_rate: self.max_total_rate,
                max_reverse_rate: self.max_reverse_rate,
                max_total_reverse_rate: self.max_total_reverse_rate,
                max_source_time: self.max_source_time,
                unverified_reverse_rate: self.unverified_reverse_rate,
                unverified_reverse_time: self.unverified_reverse_time,
            },
            permit_key: self.permit_key.clone(),
            out: bloatlab_engine::config::Out::stdout(),
            err: bloatlab_engine::config::Out::stderr(),
        }
    }
}

/// The browser test flags of `bloatlab server`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrowserArgs {
    /// --http / --https: keep every completed browser test as the bloatlab
    /// results file DIR/ID.json (`bloatlab report` reads it) and show it to
    /// the user at /result/ID. The directory must exist and be writable.
    #[arg(long = "results-dir", value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// Browser tests one source (IPv4 address or IPv6 /64) may start in any hour.
    #[arg(long = "browser-tests-per-hour", value_name = "N", default_value_t = TestCaps::default().per_source_per_hour,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub browser_tests_per_hour: u32,
    /// Browser tests running at once, all sources together.
    #[arg(long = "browser-max-tests", value_name = "N", default_value_t = TestCaps::default().concurrent,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub browser_max_tests: u32,
    /// Longest browser test in seconds, from its start to its result; a page
    /// asking for a longer ?duration= is refused, a later result too.
    #[arg(long = "browser-max-duration", value_name = "S", default_value = "300",
          value_parser = opts::positive_seconds)]
    pub browser_max_duration: Duration,
    /// Largest result a browser test may post (K/M = 1024-based).
    #[arg(long = "browser-max-result", value_name = "BYTES", default_value = "1M",
          value_parser = opts::nonzero_bytes)]
    pub browser_max_result: Bytes,
}

/// `server` and the engine's options of `c` (all but the permit key): every limit and
/// timeout is written, so the child does not depend on the flags' defaults matching
/// `ServerConfig::default()`; values are in plain units.
fn engine_argv(c: &ServerConfig) -> Vec<String> {
    let mut a = vec!["server".to_owned()];
    let mut opt = |flag: &str, value: String| a.push(format!("{flag}={value}"));
    opt("--port", c.port.to_string());
    if let Some(i) = c.interval {
        opt("--interval", secs(i));
    }
    if let Some(l) = c.buffer_len {
        opt("--len", l.0.to_string());
    }
    let s = &c.socket;
    if let Some(w) = s.window {
        opt("--window", w.0.to_string());
    }
    if let Some(cc) = &s.congestion {
        opt("--tcp-congestion", cc.to_string());
    }
    if let Some(t) = s.tos {
        opt("--tos", format!("{t:#x}"));
    }
    if let Some(b) = s.bind {
        opt("--bind", b.to_string());
    }
    if c.format == OutputFormat::Csv {
        opt("--reportstyle", "C".into());
    }
    opt("--header-timeout", secs(c.header_timeout));
    opt("--idle-timeout", secs(c.idle_timeout));
    opt("--first-data-timeout", secs(c.first_data_timeout));
    opt("--max-connections", c.max_connections.to_string());
    opt("--max-per-source", c.max_per_source.to_string());
    let l = &c.limits;
    opt("--max-duration", secs(l.max_duration));
    opt("--max-bytes", l.max_bytes.0.to_string());
    opt("--max-streams", l.max_streams.to_string());
    for (flag, rate) in [
        ("--max-rate", l.max_rate),
        ("--max-total-rate", l.max_total_rate),
        ("--max-reverse-rate", l.max_reverse_rate),
        ("--max-total-reverse-rate", l.max_total_reverse_rate),
    ] {
        if let Some(r) = rate {
            opt(flag, r.0.to_string());
        }
    }
    opt("--max-source-time", secs(l.max_source_time));
    opt(
        "--unverified-reverse-rate",
        l.unverified_reverse_rate.0.to_string(),
    );
    opt("--unverified-reverse-time", secs(l.unverified_reverse_time));
    let flags = [
        (c.format == OutputFormat::Json, "--json"),
        (c.protocol == Protocol::Udp, "--udp"),
        (c.enhanced, "--enhanced"),
        (c.one_off, "--one-off"),
        (c.no_reverse, "--no-reverse"),
        (s.ipv6, "--ipv6_domain"),
        (s.rx_copy, "--rx-copy"),
        (s.zerocopy, "--zerocopy"),
    ];
    crate::push_switches(&mut a, &flags);
    a
}

mod invocation;
pub use invocation::{
    HttpService, Https, ServerError, ServerInvocation, TlsFiles, child_env, to_argv,
};

#[cfg(test)]
mod tests;
