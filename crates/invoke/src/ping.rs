//! `bloatlab ping HOST`: the flags of the latency prober, [`PingArgs::resolve`]d into
//! a [`PingConfig`] (the probe client's settings with the host still a name: the CLI
//! looks it up and calls [`PingConfig::probe`]), and [`to_argv`] back for the children
//! that `bloatlab test` starts.

use crate::UsageError;
use crate::client::secs;
use crate::opts;
use bloatlab_probe::client::ClientConfig as ProbeConfig;
use bloatlab_probe::{auth, packet};
/// The probe client's choices, re-exported for the parents that write a [`PingConfig`].
pub use bloatlab_probe::{client::Mode, session::Limit};
use std::net::SocketAddr;
use std::time::Duration;

/// The probe responder's port (the same number as the server's TCP port).
pub const DEFAULT_PORT: u16 = 5001;
/// Probes for this long when neither `-c` nor `-t` is given.
pub const DEFAULT_TIME: Duration = Duration::from_secs(10);
/// Time between probes (100 Hz).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);
/// The reply timeout's floor.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
/// `--max-loss`, in percent.
pub const DEFAULT_MAX_LOSS: f64 = 50.0;
/// An ICMP echo message's size when `-s` is not given (as ping(8)'s 56 + 8).
pub const DEFAULT_ICMP_SIZE: usize = 64;

/// Arguments of `bloatlab ping`.
#[derive(Debug, clap::Args)]
pub struct PingArgs {
    /// The host running `bloatlab server` (or any host with --icmp).
    #[arg(required_unless_present = "serve")]
    pub host: Option<String>,
    /// Server port (UDP; the same number as the server's TCP port).
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Time between probes, e.g. 10ms (100 Hz), 20ms, 1s, 500us.
    #[arg(short = 'i', long = "interval", default_value = "10ms", value_parser = interval)]
    pub interval: Duration,
    /// Send this many probes.
    #[arg(short = 'c', long = "count", conflicts_with = "time",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Send probes for this many seconds (default 10 unless -c is given).
    #[arg(short = 't', long = "time", value_parser = opts::positive_seconds)]
    pub time: Option<Duration>,
    /// Datagram size in bytes: UDP payload (80..=65507, default 80) or ICMP message
    /// (32..=65507, default 64).
    #[arg(short = 's', long = "size")]
    pub size: Option<usize>,
    /// ICMP echo instead of UDP probes (RTT only; needs root or CAP_NET_RAW; IPv4).
    #[arg(long = "icmp")]
    pub icmp: bool,
    /// Print one JSON results document (raw samples and summary) on stdout.
    #[arg(long = "json")]
    pub json: bool,
    /// IP TOS byte of the probes (e.g. 0xb8 for DSCP EF).
    #[arg(long = "tos", value_parser = opts::tos)]
    pub tos: Option<u8>,
    /// Seconds to wait for a reply before counting a probe lost (at least; grows to
    /// 3 x the largest RTT seen).
    #[arg(long = "timeout", default_value = "3", value_parser = opts::positive_seconds)]
    pub timeout: Duration,
    /// Exit 1 (after the report) when more than this percentage of probes was lost:
    /// a run that mostly failed (a dead link or emulator) is not a measurement.
    #[arg(long = "max-loss", default_value_t = DEFAULT_MAX_LOSS, value_parser = max_loss)]
    pub max_loss: f64,
    /// Print a line per reply (seq, RTT, one-way delays when the clocks are shared).
    #[arg(short = 'v', long = "per-probe")]
    pub per_probe: bool,
    /// Tag every probe with an HMAC of this key and accept only tagged replies: what a
    /// `bloatlab server --permit-key=KEY` answers (UDP probes; at least 96 bytes each).
    /// With --serve: answer only probes tagged with this key.
    /// Or in $BLOATLAB_PERMIT_KEY, which keeps it out of the command line.
    #[arg(long = "permit-key", value_parser = opts::permit_key, conflicts_with = "icmp")]
    pub permit_key: Option<String>,
    /// Run only the UDP probe responder on PORT or HOST:PORT (what `bloatlab server`
    /// runs alongside its TCP port) until killed.
    #[arg(
        long = "serve",
        value_name = "ADDR",
        hide = true,
        conflicts_with = "host",
        value_parser = serve_addr
    )]
    pub serve: Option<SocketAddr>,
}

/// What `bloatlab ping` was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Ping {
    /// Probe a host.
    Probe(PingConfig),
    /// `--serve`: run the probe responder on `bind`, answering only probes tagged with
    /// `permit_key` when there is one.
    Serve {
        /// Where to listen (UDP).
        bind: SocketAddr,
        /// The key probes must be tagged with.
        permit_key: Option<String>,
    },
}

/// A probe run: the probe client's settings ([`PingConfig::probe`]) with the host as
/// given, and what the command does with the result.
#[derive(Debug, Clone, PartialEq)]
pub struct PingConfig {
    /// The host as given (a name or an address): shown, stored in the results file,
    /// and looked up by the command, never by this crate.
    pub host: String,
    /// The responder's UDP port (ignored by ICMP echo).
    pub port: u16,
    /// UDP probes or ICMP echo.
    pub mode: Mode,
    /// Time between probes.
    pub interval: Duration,
    /// Count or duration.
    pub limit: Limit,
    /// Datagram size in bytes (see [`PingConfig::set_size`]); the probe client checks
    /// its range for the mode.
    pub size: usize,
    /// The reply timeout's floor.
    pub timeout: Duration,
    /// IP TOS byte of the probes.
    pub tos: Option<u8>,
    /// The key every UDP probe is tagged with (never with ICMP echo).
    pub permit_key: Option<String>,
    /// Print a results document instead of the summary.
    pub json: bool,
    /// Print a line per reply.
    pub per_probe: bool,
    /// Exit 1 when more than this percentage of probes was lost (0..=100).
    pub max_loss: f64,
}

impl PingConfig {
    /// UDP probes to `host` with every default (no key).
    pub fn new(host: impl Into<String>) -> PingConfig {
        PingConfig {
            host: host.into(),
            port: DEFAULT_PORT,
            mode: Mode::Udp,
            interval: DEFAULT_INTERVAL,
            limit: Limit::Duration(DEFAULT_TIME),
            size: packet::HEADER_LEN,
            timeout: DEFAULT_TIMEOUT,
            tos: None,
            permit_key: None,
            json: false,
            per_probe: false,
            max_loss: DEFAULT_MAX_LOSS,
        }
    }

    /// Sets `size` to `asked` (`-s`), or to the mode's default, raised to room for the
    /// tag ([`auth::MIN_LEN`]) when probes carry a key. Call after `mode` and
    /// `permit_key` are set.
    pub fn set_size(&mut self, asked: Option<usize>) {
        let size = asked.unwrap_or(match self.mode {
            Mode::Udp => packet::HEADER_LEN,
            Mode::Icmp => DEFAULT_ICMP_SIZE,
        });
        self.size = if self.permit_key.is_some() {
            size.max(auth::MIN_LEN)
        } else {
            size
        };
    }

    /// The probe client's config, once `host` has been looked up as `target` (whose
    /// port is `self.port`).
    pub fn probe(&self, target: SocketAddr) -> ProbeConfig {
        let mut c = ProbeConfig::new(target, self.limit);
        c.mode = self.mode;
        c.interval = self.interval;
        c.size = self.size;
        c.timeout = self.timeout;
        c.tos = self.tos;
        c
    }
}

impl PingArgs {
    /// Does this command line read the key from [`opts::PERMIT_KEY_ENV`] (no
    /// `--permit-key`, and not ICMP echo, which takes no key).
    pub fn wants_env_key(&self) -> bool {
        self.permit_key.is_none() && !self.icmp
    }

    /// Resolves the arguments. `env_key` is the checked key from
    /// [`opts::PERMIT_KEY_ENV`], read only when [`PingArgs::wants_env_key`].
    pub fn resolve(&self, env_key: Option<String>) -> Result<Ping, UsageError> {
        let permit_key = match &self.permit_key {
            Some(k) => Some(k.clone()),
            None if self.wants_env_key() => env_key,
            None => None,
        };
        if let Some(bind) = self.serve {
            return Ok(Ping::Serve { bind, permit_key });
        }
        let Some(host) = &self.host else {
            return Err(UsageError::new("a HOST to probe is required"));
        };
        let mut c = PingConfig::new(host.clone());
        c.port = self.port;
        c.mode = if self.icmp { Mode::Icmp } else { Mode::Udp };
        c.interval = self.interval;
        c.limit = match (self.count, self.time) {
            (Some(n), _) => Limit::Count(n),
            (None, Some(t)) => Limit::Duration(t),
            (None, None) => Limit::Duration(DEFAULT_TIME),
        };
        c.timeout = self.timeout;
        c.tos = self.tos;
        c.permit_key = permit_key;
        c.set_size(self.size);
        c.json = self.json;
        c.per_probe = self.per_probe;
        c.max_loss = self.max_loss;
        Ok(Ping::Probe(c))
    }
}

/// The `bloatlab ping` command line (after the program name) that resolves to `c`.
///
/// The key is never written (a command line is world-readable in
/// `/proc/PID/cmdline`): a parent passes `c.permit_key` in [`opts::PERMIT_KEY_ENV`].
/// Durations are written as exact decimal seconds; options at their defaults are left out.
pub fn to_argv(c: &PingConfig) -> Vec<String> {
    let mut a = vec!["ping".to_owned(), c.host.clone()];
    let mut opt = |flag: &str, value: String| a.extend([flag.to_owned(), value]);
    if c.port != DEFAULT_PORT {
        opt("-p", c.port.to_string());
    }
    if c.interval != DEFAULT_INTERVAL {
        opt("-i", format!("{}s", secs(c.interval)));
    }
    match c.limit {
        Limit::Duration(DEFAULT_TIME) => {}
        Limit::Duration(t) => opt("-t", secs(t)),
        Limit::Count(n) => opt("-c", n.to_string()),
    }
    let mut default = PingConfig {
        mode: c.mode,
        permit_key: c.permit_key.clone(),
        ..PingConfig::new("")
    };
    default.set_size(None);
    if c.size != default.size {
        opt("-s", c.size.to_string());
    }
    if let Some(t) = c.tos {
        opt("--tos", format!("{t:#x}"));
    }
    if c.timeout != DEFAULT_TIMEOUT {
        opt("--timeout", secs(c.timeout));
    }
    if c.max_loss != DEFAULT_MAX_LOSS {
        // `{}` is the shortest decimal that reads back as the same f64.
        opt("--max-loss", c.max_loss.to_string());
    }
    let flags = [
        (c.mode == Mode::Icmp, "--icmp"),
        (c.json, "--json"),
        (c.per_probe, "-v"),
    ];
    crate::push_switches(&mut a, &flags);
    a
}

/// `--max-loss`: a percentage in 0..=100 (`5` or `5%`).
pub fn max_loss(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a percentage in 0..=100")),
    }
}

/// `--interval`: a positive duration with a unit (ns, us, ms, s), at most an hour; a
/// bare number is ms.
pub fn interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (e.g. 10ms, 1s, 500us)"))?;
    let scale = match unit.trim() {
        "" | "ms" => 1e-3,
        "s" => 1.0,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        u => return Err(format!("unknown unit `{u}` in `{s}` (use ns, us, ms or s)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!("`{s}` must be more than 0 and at most 1 hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--serve PORT` (on every IPv4 address) or `--serve HOST:PORT`.
pub fn serve_addr(s: &str) -> Result<SocketAddr, String> {
    match s.parse::<u16>() {
        Ok(port) => Ok(SocketAddr::from(([0, 0, 0, 0], port))),
        Err(_) => s
            .parse()
            .map_err(|_| format!("`{s}` is not PORT or HOST:PORT")),
    }
}

#[cfg(test)]
mod tests;
