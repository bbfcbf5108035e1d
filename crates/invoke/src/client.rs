//! `bloatlab client HOST` (also `bloatlab -c HOST`): iperf 2's client options,
//! [`ClientArgs::resolve`]d into the engine's [`ClientConfig`], and
//! [`to_argv`] back for a child process.

use crate::UsageError;
use crate::common::CommonArgs;
use crate::opts;
use bloatlab_engine::config::{
    Amount, BitRate, Bytes, ClientConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PORT, Direction,
    OutputFormat, Protocol, SocketOptions,
};
use std::time::Duration;

/// Arguments of `bloatlab client`, spelled as iperf 2 spells them.
#[derive(Debug, clap::Args)]
#[command(disable_version_flag = true)]
pub struct ClientArgs {
    /// Server to connect to.
    pub host: String,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Seconds to send (default 10).
    #[arg(short = 't', long = "time", value_parser = opts::positive_seconds, conflicts_with = "num")]
    pub time: Option<Duration>,
    /// Bytes to send instead of a time (e.g. 100M; K/M/G = 1024-based, k/m/g = 1000-based).
    #[arg(short = 'n', long = "num", value_parser = opts::nonzero_bytes)]
    pub num: Option<Bytes>,
    /// Number of parallel streams.
    #[arg(short = 'P', long = "parallel", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=128))]
    pub parallel: u32,
    /// Target rate (bits/s, e.g. 10m; UDP default 1M).
    #[arg(short = 'b', long = "bandwidth", value_parser = opts::rate)]
    pub bandwidth: Option<BitRate>,
    /// The server sends, the client receives, on the same connection.
    #[arg(short = 'R', long = "reverse", conflicts_with = "full_duplex")]
    pub reverse: bool,
    /// Both ends send at once on the same connection.
    #[arg(long = "full-duplex")]
    pub full_duplex: bool,
    /// Timestamp every write so the server measures write-to-read latency.
    #[arg(long = "trip-times")]
    pub trip_times: bool,
    /// Pause weight x sampled RTT after each write (default weight 0.5).
    #[arg(long = "near-congestion", num_args = 0..=1, require_equals = true,
          default_missing_value = "0.5", value_parser = opts::weight)]
    pub near_congestion: Option<f64>,
    /// TCP_NODELAY: turn Nagle's algorithm off.
    #[arg(short = 'N', long = "nodelay")]
    pub nodelay: bool,
    /// Detect the peer: wait for the server's ack and print its version.
    #[arg(short = 'X', long = "peer-detect")]
    pub peer_detect: bool,
    /// TCP_NOTSENT_LOWAT on whichever end sends (a bloatlab server is asked):
    /// at most about this much unsent data waits in the sender's buffer.
    #[arg(long = "notsent-lowat", value_parser = opts::nonzero_bytes)]
    pub notsent_lowat: Option<Bytes>,
    /// When -t ends, close at once with an RST instead of waiting for the
    /// connection to drain (no server-side report then).
    #[arg(long = "abort-at-end", conflicts_with = "num")]
    pub abort_at_end: bool,
    /// SO_MARK on the client's sockets (policy routing per flow, e.g. a route with
    /// `features ecn` for ECN on this flow only; needs CAP_NET_ADMIN).
    #[arg(long = "fwmark")]
    pub fwmark: Option<u32>,
    /// Give up connecting after this many seconds.
    #[arg(long = "connect-timeout", default_value = "5", value_parser = opts::positive_seconds)]
    pub connect_timeout: Duration,
    /// Send this key (4 to 128 characters) to a server started with
    /// --permit-key (iperf 2's KEYCHECK; TCP only, as in iperf 2).
    /// Or in $BLOATLAB_PERMIT_KEY, which keeps it out of the command line (world-readable
    /// in /proc/PID/cmdline).
    #[arg(long = "permit-key", value_parser = opts::permit_key)]
    pub permit_key: Option<String>,
}

impl ClientArgs {
    /// Resolves the arguments into the engine's configuration. `env_key` is the
    /// permit key from [`opts::PERMIT_KEY_ENV`] (already checked, `None` when unset),
    /// used when `--permit-key` is absent on a TCP test.
    pub fn resolve(&self, env_key: Option<String>) -> Result<ClientConfig, UsageError> {
        let usage = |flags: &[&'static str], m: &str| Err(UsageError::about(flags, m));
        let mut c = ClientConfig::new(self.host.clone());
        let common = &self.common;
        c.port = common.port;
        c.protocol = common.protocol();
        c.amount = match (self.time, self.num) {
            (_, Some(n)) => Amount::Bytes(n),
            (Some(t), None) => Amount::Time(t),
            (None, None) => Amount::default(),
        };
        c.interval = common.interval;
        c.buffer_len = common.len;
        c.parallel = self.parallel;
        c.rate = self.bandwidth;
        c.enhanced = common.enhanced;
        c.direction = if self.full_duplex {
            Direction::FullDuplex
        } else if self.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        c.trip_times = self.trip_times;
        c.near_congestion = self.near_congestion;
        c.peer_detect = self.peer_detect;
        c.socket = SocketOptions {
            nodelay: self.nodelay,
            mark: self.fwmark,
            ..common.socket()
        };
        c.format = common.format();
        c.connect_timeout = self.connect_timeout;
        c.notsent_lowat = self.notsent_lowat;
        c.abort_at_end = self.abort_at_end;
        if (c.notsent_lowat.is_some() || c.abort_at_end) && common.udp {
            let given = [
                (c.notsent_lowat.is_some(), "--notsent-lowat"),
                (c.abort_at_end, "--abort-at-end"),
                (true, "--udp"),
            ];
            let flags: Vec<&'static str> = given.iter().filter(|g| g.0).map(|g| g.1).collect();
            return usage(
                &flags,
                "--notsent-lowat and --abort-at-end are TCP options (not with -u/--udp)",
            );
        }
        if c.notsent_lowat.is_some_and(|b| b.0 > u64::from(u32::MAX)) {
            return usage(&["--notsent-lowat"], "--notsent-lowat must be below 4G");
        }
        c.permit_key = match &self.permit_key {
            Some(k) => Some(k.clone()),
            // A UDP test has no key: an exported variable is for the TCP ones.
            None if !common.udp => env_key,
            None => None,
        };
        if c.permit_key.is_some() && common.udp {
            return usage(
                &["--permit-key", "--udp"],
                "--permit-key is not supported with -u/--udp (as in iperf 2: the key is a TCP header field)",
            );
        }
        if c.near_congestion.is_some() && (common.udp || self.bandwidth.is_some()) {
            return usage(
                &["--near-congestion", "--bandwidth", "--udp"],
                "--near-congestion cannot be combined with -u/--udp or -b/--bandwidth",
            );
        }
        if c.trip_times && c.protocol == Protocol::Tcp && c.effective_len().0 < 92 {
            return usage(
                &["--len", "--trip-times"],
                "-l/--len must be at least 92 bytes with --trip-times (the burst header)",
            );
        }
        Ok(c)
    }
}

/// The `bloatlab client` command line (after the program name) that resolves to `c`.
///
/// The permit key is never written: a command line is world-readable in
/// `/proc/PID/cmdline`, so a parent passes `c.permit_key` in
/// [`opts::PERMIT_KEY_ENV`] and the child's `resolve` takes it from there. The
/// stop token and the output writers are the child's own. Values are written
/// in plain units (bytes, bits/s, decimal seconds) that the iperf 2 spellings
/// read back exactly; options at their defaults are left out.
pub fn to_argv(c: &ClientConfig) -> Vec<String> {
    let mut a = vec!["client".to_owned(), c.host.clone()];
    let mut opt = |flag: &str, value: String| a.extend([flag.to_owned(), value]);
    if c.port != DEFAULT_PORT {
        opt("-p", c.port.to_string());
    }
    if let Some(i) = c.interval {
        opt("-i", secs(i));
    }
    match c.amount {
        amount if amount == Amount::default() => {}
        Amount::Time(t) => opt("-t", secs(t)),
        Amount::Bytes(b) => opt("-n", b.0.to_string()),
    }
    if let Some(l) = c.buffer_len {
        opt("-l", l.0.to_string());
    }
    if c.parallel != 1 {
        opt("-P", c.parallel.to_string());
    }
    if let Some(r) = c.rate {
        opt("-b", r.0.to_string());
    }
    let s = &c.socket;
    if let Some(w) = s.window {
        opt("-w", w.0.to_string());
    }
    if let Some(cc) = &s.congestion {
        opt("-Z", cc.to_string());
    }
    if let Some(t) = s.tos {
        opt("-S", format!("{t:#x}"));
    }
    if let Some(b) = s.bind {
        opt("-B", b.to_string());
    }
    if let Some(m) = s.mark {
        opt("--fwmark", m.to_string());
    }
    if let Some(n) = c.notsent_lowat {
        opt("--notsent-lowat", n.0.to_string());
    }
    if c.connect_timeout != DEFAULT_CONNECT_TIMEOUT {
        opt("--connect-timeout", secs(c.connect_timeout));
    }
    if c.format == OutputFormat::Csv {
        opt("-y", "C".into());
    }
    let flags = [
        (c.format == OutputFormat::Json, "--json"),
        (c.protocol == Protocol::Udp, "-u"),
        (c.enhanced, "-e"),
        (c.direction == Direction::Reverse, "-R"),
        (c.direction == Direction::FullDuplex, "--full-duplex"),
        (c.trip_times, "--trip-times"),
        (c.peer_detect, "-X"),
        (c.abort_at_end, "--abort-at-end"),
        (s.nodelay, "-N"),
        (s.ipv6, "-V"),
        (s.rx_copy, "--rx-copy"),
        (s.zerocopy, "--zerocopy"),
    ];
    crate::push_switches(&mut a, &flags);
    if let Some(w) = c.near_congestion {
        // `{w}` is the shortest decimal that reads back as the same f64.
        a.push(format!("--near-congestion={w}"));
    }
    a
}

/// Decimal seconds, exact to the nanosecond (`2.5`, `0.2`, `10`).
pub fn secs(d: Duration) -> String {
    let (s, ns) = (d.as_secs(), d.subsec_nanos());
    if ns == 0 {
        return s.to_string();
    }
    let frac = format!("{ns:09}");
    format!("{s}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests;
