//! `bloatlab client HOST` (also `bloatlab -c HOST`): iperf 2's client options.

use super::common::CommonArgs;
use super::opts;
use bloatlab_engine::config::{Amount, ClientConfig, Direction, Protocol, SocketOptions};
use bloatlab_engine::config::{BitRate, Bytes};
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
    /// Resolves the arguments into the engine's configuration.
    pub fn to_config(&self) -> anyhow::Result<ClientConfig> {
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
            return Err(crate::exit::usage(
                "--notsent-lowat and --abort-at-end are TCP options (not with -u/--udp)",
            ));
        }
        if c.notsent_lowat.is_some_and(|b| b.0 > u64::from(u32::MAX)) {
            return Err(crate::exit::usage("--notsent-lowat must be below 4G"));
        }
        c.permit_key = match &self.permit_key {
            Some(k) => Some(k.clone()),
            // A UDP test has no key: an exported variable is for the TCP ones.
            None if !common.udp => opts::permit_key_env()?,
            None => None,
        };
        if c.permit_key.is_some() && common.udp {
            return Err(crate::exit::usage(
                "--permit-key is not supported with -u/--udp (as in iperf 2: the key is a TCP header field)",
            ));
        }
        if c.near_congestion.is_some() && (common.udp || self.bandwidth.is_some()) {
            return Err(crate::exit::usage(
                "--near-congestion cannot be combined with -u/--udp or -b/--bandwidth",
            ));
        }
        if c.trip_times && c.protocol == Protocol::Tcp && c.effective_len().0 < 92 {
            return Err(crate::exit::usage(
                "-l/--len must be at least 92 bytes with --trip-times (the burst header)",
            ));
        }
        Ok(c)
    }
}

/// After a stop by signal the run exits with 128 + the signal number (130
/// for SIGINT, 143 for SIGTERM), after the final report was printed.
fn interrupted(stop: &bloatlab_os::StopToken) -> anyhow::Result<()> {
    match stop.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "a signal",
            };
            Err(anyhow::Error::new(crate::exit::Exit {
                code: u8::try_from(128 + sig).unwrap_or(crate::exit::FAILURE),
                message: format!("interrupted by {name}; the report covers the time until then"),
            }))
        }
        None => Ok(()),
    }
}

pub fn run(args: ClientArgs) -> anyhow::Result<()> {
    let mut cfg = args.to_config()?;
    let lab = crate::cmd::inlab::InLab::start()?;
    // SIGINT/SIGTERM ask the engine to stop: it ends the test early, shuts the connection
    // down and prints the final report with what was measured.
    cfg.stop = crate::cmd::stop_on_interrupt()?;
    let result = run_protocol(&cfg);
    // A dead emulator is the cause of whatever else went wrong.
    lab.check()?;
    interrupted(&cfg.stop)?;
    result
}

fn run_protocol(cfg: &ClientConfig) -> anyhow::Result<()> {
    match cfg.protocol {
        Protocol::Tcp => {
            let out = bloatlab_engine::tcp::client::run(cfg)?;
            failed(&out.failures, cfg.parallel)
        }
        Protocol::Udp => {
            let out = bloatlab_engine::udp::run_client(cfg)?;
            failed(&out.failures, cfg.parallel)
        }
    }
}

/// A run with a failed stream did not happen as asked: exit 1, naming
/// the first reason (each stream's own line is already on stderr or in
/// the report).
fn failed(failures: &[(u32, String)], parallel: u32) -> anyhow::Result<()> {
    match failures.first() {
        None => Ok(()),
        Some((stream, why)) => anyhow::bail!(
            "{} of {} stream(s) failed; stream {stream}: {why}",
            failures.len(),
            parallel
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_engine::config::OutputFormat;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: ClientArgs,
    }

    fn cfg(args: &[&str]) -> ClientConfig {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).unwrap().a.to_config().unwrap()
    }

    #[test]
    fn iperf_spellings_map_to_config() {
        let c = cfg(&[
            "h",
            "-t",
            "2",
            "-i",
            "0.5",
            "-l",
            "64K",
            "-P",
            "3",
            "-e",
            "-R",
            "-Z",
            "reno",
            "-S",
            "0x10",
            "--trip-times",
        ]);
        assert_eq!(c.amount, Amount::Time(Duration::from_secs(2)));
        assert_eq!(c.interval, Some(Duration::from_millis(500)));
        assert_eq!(c.buffer_len, Some(Bytes(65_536)));
        assert_eq!(c.parallel, 3);
        assert_eq!(c.direction, Direction::Reverse);
        assert_eq!(c.socket.congestion.as_deref(), Some("reno"));
        assert_eq!(c.socket.tos, Some(0x10));
        assert!(c.enhanced && c.trip_times);
    }

    #[test]
    fn near_congestion_default_and_explicit_weight() {
        assert_eq!(cfg(&["h", "--near-congestion"]).near_congestion, Some(0.5));
        assert_eq!(
            cfg(&["h", "--near-congestion=0.4"]).near_congestion,
            Some(0.4)
        );
        assert_eq!(cfg(&["h"]).near_congestion, None);
    }

    #[test]
    fn near_congestion_zero_is_accepted_as_iperf_2_1_8_does() {
        // 2.1.8 keeps any weight >= 0 (Settings.cpp: atof(optarg) >= 0.0).
        assert_eq!(
            cfg(&["h", "--near-congestion=0"]).near_congestion,
            Some(0.0)
        );
        let e = T::try_parse_from(["t", "h", "--near-congestion=-1"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--near-congestion"), "{e}");
    }

    #[test]
    fn clean_end_options() {
        let c = cfg(&["h", "-t", "3", "--notsent-lowat", "16K", "--abort-at-end"]);
        assert_eq!(c.notsent_lowat, Some(Bytes(16384)));
        assert!(c.abort_at_end);
        assert_eq!(cfg(&["h", "--fwmark", "7"]).socket.mark, Some(7));
        // An abortive end needs a time to end at.
        assert!(T::try_parse_from(["t", "h", "-n", "1M", "--abort-at-end"]).is_err());
    }

    #[test]
    fn output_formats() {
        assert_eq!(cfg(&["h", "-y", "C"]).format, OutputFormat::Csv);
        assert_eq!(cfg(&["h", "--json"]).format, OutputFormat::Json);
        assert_eq!(
            cfg(&["h", "-n", "100M"]).amount,
            Amount::Bytes(Bytes(104_857_600))
        );
    }

    #[test]
    fn udp_with_reverse_or_full_duplex_is_allowed() {
        for (extra, dir) in [
            ("-R", Direction::Reverse),
            ("--full-duplex", Direction::FullDuplex),
        ] {
            let c = T::try_parse_from(["t", "h", "-u", extra, "-b", "2M", "-l", "400"])
                .unwrap()
                .a
                .to_config()
                .unwrap();
            assert_eq!(c.protocol, Protocol::Udp);
            assert_eq!(c.direction, dir);
            assert_eq!(c.effective_len(), Bytes(400));
        }
    }

    #[test]
    fn bad_values_name_the_option() {
        let e = T::try_parse_from(["t", "h", "-l", "abc"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--len"), "{e}");
        let e = T::try_parse_from(["t", "h", "-P", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--parallel"), "{e}");
    }
}
