//! `bloatlab server` (also `bloatlab -s`): iperf 2's server options.

use super::opts;
use bloatlab_engine::config::{BitRate, Bytes, OutputFormat, Protocol, ServerConfig};
use bloatlab_engine::limits::{self, ServerLimits};
use bloatlab_invoke::common::CommonArgs;
use std::net::SocketAddr;
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
    /// Not available with -u, as in iperf 2.
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
    /// PEM certificate chain (leaf first) for --https.
    #[arg(long = "tls-cert", value_name = "FILE", requires_all = ["https", "tls_key"])]
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) for --tls-cert.
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve only --http / --https, not the iperf-compatible service.
    #[arg(long = "no-iperf")]
    pub no_iperf: bool,
    /// The browser test's record and caps (--results-dir, --browser-*).
    #[command(flatten)]
    pub browser: super::server_browser::BrowserArgs,
    /// Accepted for iperf 2 habits; client-only, ignored with a warning.
    #[arg(long = "near-congestion", num_args = 0..=1, require_equals = true,
          default_missing_value = "0.5", value_parser = opts::weight, hide = true)]
    pub near_congestion: Option<f64>,
}

impl ServerArgs {
    /// Resolves the arguments into the engine's configuration.
    pub fn to_config(&self) -> ServerConfig {
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

pub fn run(args: ServerArgs) -> anyhow::Result<()> {
    if args.near_congestion.is_some() {
        eprintln!("WARN: option of --near-congestion not supported on the server");
    }
    if args.no_iperf && args.http.is_none() && args.https.is_none() {
        return Err(crate::exit::usage(
            "--no-iperf needs --http PORT or --https PORT (otherwise nothing would be served)",
        ));
    }
    if args.browser.results_dir.is_some() && args.http.is_none() && args.https.is_none() {
        return Err(crate::exit::usage(
            "--results-dir needs --http PORT or --https PORT (it keeps the browser tests' results)",
        ));
    }
    let mut cfg = args.to_config();
    if let Some(key) = &mut cfg.permit_key {
        if cfg.protocol == Protocol::Udp {
            return Err(crate::exit::usage(
                "--permit-key is not supported with -u/--udp (as in iperf 2: the key is a TCP header field)",
            ));
        }
        if key.is_empty() {
            *key = generate_key()?;
        }
        // iperf 2 prints the key the same way; stdout stays JSON/CSV-only otherwise.
        let line = format!("Permit key is '{key}' (no timeout)");
        if cfg.format == OutputFormat::Console {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    }
    let http = super::server_http::start(&args, &cfg)?;
    if args.no_iperf {
        if let Some(service) = http {
            super::server_http::serve_until_interrupted(service, &cfg)?;
        }
        return Ok(());
    }
    match cfg.protocol {
        Protocol::Tcp => {
            // The TCP server also answers latency probes on UDP at the same
            // port, so `bloatlab ping` and the test suites need one server.
            let _probes = (!args.no_probes)
                .then(|| start_probe_responder(&cfg))
                .flatten();
            Ok(bloatlab_engine::tcp::server::run(&cfg)?)
        }
        Protocol::Udp => Ok(bloatlab_engine::udp::run_server(&cfg)?),
    }
}

/// A 16-character key from the kernel's random source (iperf 2's default
/// key length), letters and digits only so it survives shells and URLs.
fn generate_key() -> anyhow::Result<String> {
    use std::io::Read;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut raw = [0u8; 64];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|e| anyhow::anyhow!("generating a permit key: /dev/urandom: {e}"))?;
    // Rejection sampling keeps every character equally likely (248 = 4 x 62).
    let key: String = raw
        .iter()
        .filter(|&&b| b < 248)
        .take(16)
        .map(|&b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect();
    anyhow::ensure!(
        key.len() == 16,
        "generating a permit key: not enough random bytes"
    );
    Ok(key)
}

/// Starts the probe responder on UDP at the TCP server's address and port.
/// A busy UDP port is not fatal: the traffic server still runs, and the
/// warning says why probes will go unanswered.
fn start_probe_responder(cfg: &ServerConfig) -> Option<bloatlab_probe::responder::ResponderHandle> {
    let bind = cfg.socket.bind.unwrap_or_else(|| {
        let any: std::net::IpAddr = if cfg.socket.ipv6 {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        };
        SocketAddr::new(any, cfg.port)
    });
    let bind = SocketAddr::new(bind.ip(), cfg.port);
    // With --permit-key the probes must carry an HMAC tag of the same key.
    let key = cfg.permit_key.as_ref().map(|k| k.as_bytes().to_vec());
    match bloatlab_probe::responder::spawn_keyed(bind, key) {
        Ok(handle) => Some(handle),
        Err(e) => {
            eprintln!("WARN: latency probes will not be answered: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: ServerArgs,
    }

    #[test]
    fn iperf_spellings_map_to_config() {
        let c = T::try_parse_from(["t", "-p", "5002", "-e", "-i", "1", "-1", "-V", "-l", "64K"])
            .unwrap()
            .a
            .to_config();
        assert_eq!(c.port, 5002);
        assert!(c.enhanced && c.one_off && c.socket.ipv6);
        assert_eq!(c.interval, Some(Duration::from_secs(1)));
        assert_eq!(c.buffer_len, Some(Bytes(65_536)));
    }

    #[test]
    fn caps_have_documented_defaults_and_parse_iperf_units() {
        let c = T::try_parse_from(["t"]).unwrap().a.to_config();
        assert_eq!(c.limits, ServerLimits::default());
        assert_eq!(c.idle_timeout, Duration::from_secs(120));
        assert_eq!(c.max_connections, 256);
        assert_eq!(c.max_per_source, 128);
        let c = T::try_parse_from([
            "t",
            "--max-duration",
            "60",
            "--max-bytes",
            "1G",
            "--max-streams",
            "4",
            "--max-rate",
            "100m",
            "--max-reverse-rate",
            "50m",
            "--max-total-rate",
            "300m",
            "--max-source-time",
            "0",
            "--unverified-reverse-rate",
            "3m",
            "--idle-timeout",
            "5",
            "--max-connections",
            "10",
            "--max-per-source",
            "2",
        ])
        .unwrap()
        .a
        .to_config();
        assert_eq!(c.limits.max_duration, Duration::from_secs(60));
        assert_eq!(c.limits.max_bytes, Bytes(1 << 30));
        assert_eq!(c.limits.max_streams, 4);
        assert_eq!(c.limits.max_rate, Some(BitRate(100_000_000)));
        assert_eq!(c.limits.max_reverse_rate, Some(BitRate(50_000_000)));
        assert_eq!(
            c.limits.receive_budget(),
            Some((BitRate(100_000_000), BitRate(300_000_000)))
        );
        assert_eq!(
            c.limits.send_budget(),
            Some((BitRate(50_000_000), BitRate(200_000_000))),
            "the total defaults to 4x"
        );
        assert_eq!(c.limits.max_source_time, Duration::ZERO);
        assert_eq!(c.limits.unverified_reverse_rate, BitRate(3_000_000));
        assert_eq!((c.max_connections, c.max_per_source), (10, 2));
        assert_eq!(c.idle_timeout, Duration::from_secs(5));
        let e = T::try_parse_from(["t", "--max-connections", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-connections"), "{e}");
    }

    #[test]
    fn http_service_flags_parse_and_tls_files_need_https_and_each_other() {
        let a = T::try_parse_from(["t", "--http", "8080", "--https", "8443", "--no-iperf"])
            .unwrap()
            .a;
        assert_eq!(
            (a.http, a.https, a.no_iperf),
            (Some(8080), Some(8443), true)
        );
        assert!(a.tls_cert.is_none());
        let a = T::try_parse_from(["t", "--https", "0", "--tls-cert", "c", "--tls-key", "k"])
            .unwrap()
            .a;
        assert_eq!(a.tls_key.as_deref(), Some(std::path::Path::new("k")));
        for bad in [
            &["t", "--https", "1", "--tls-cert", "c"][..],
            &["t", "--https", "1", "--tls-key", "k"],
            &["t", "--tls-cert", "c", "--tls-key", "k"],
        ] {
            assert!(T::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn http_deadlines_default_apart_from_the_iperf_header_timeout_and_must_be_positive() {
        let a = T::try_parse_from(["t", "--header-timeout", "30"])
            .unwrap()
            .a;
        // --header-timeout is the iperf service's only.
        assert_eq!(a.header_timeout, Duration::from_secs(30));
        assert_eq!(a.handshake_timeout, Duration::from_secs(15));
        assert_eq!(a.http_header_timeout, Duration::from_secs(10));
        assert_eq!(a.http_wait_max, Duration::from_secs(60));
        let a = T::try_parse_from([
            "t",
            "--handshake-timeout",
            "1",
            "--http-header-timeout",
            "0.5",
            "--http-wait-max",
            "2",
        ])
        .unwrap()
        .a;
        assert_eq!(a.handshake_timeout, Duration::from_secs(1));
        assert_eq!(a.http_header_timeout, Duration::from_millis(500));
        assert_eq!(a.http_wait_max, Duration::from_secs(2));
        for flag in [
            "--handshake-timeout",
            "--http-header-timeout",
            "--http-wait-max",
        ] {
            for bad in ["0", "-1", "x", "1e300"] {
                let arg = format!("{flag}={bad}");
                let e = T::try_parse_from(["t", &arg]).unwrap_err();
                assert_eq!(e.exit_code(), 2, "{flag} {bad}");
                assert!(e.to_string().contains(flag), "{e}");
            }
        }
    }

    #[test]
    fn bad_port_names_the_option() {
        let e = T::try_parse_from(["t", "-p", "99999"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--port"), "{e}");
    }
}
