//! `bloatlab server` (also `bloatlab -s`): iperf 2's server options.

use bloatlab_engine::config::{OutputFormat, Protocol, ServerConfig};
use std::net::SocketAddr;

/// The flags of `bloatlab server`, defined once in `bloatlab_invoke::server` (the
/// experiment crate checks its points with them too).
pub use bloatlab_invoke::server::ServerArgs;

pub fn run(args: ServerArgs) -> anyhow::Result<()> {
    if args.near_congestion.is_some() {
        eprintln!("WARN: option of --near-congestion not supported on the server");
    }
    let env_key = super::opts::permit_key_env()?;
    let mut server = args
        .resolve(env_key)
        .map_err(|e| crate::exit::usage(e.to_string()))?;
    let cfg = &mut server.engine;
    if let Some(key) = &mut cfg.permit_key {
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
    let http = super::server_http::start(&server)?;
    let cfg = &server.engine;
    if !server.iperf {
        if let Some(service) = http {
            super::server_http::serve_until_interrupted(service, cfg)?;
        }
        return Ok(());
    }
    match cfg.protocol {
        Protocol::Tcp => {
            // The TCP server also answers latency probes on UDP at the same
            // port, so `bloatlab ping` and the test suites need one server.
            let _probes = server.probes.then(|| start_probe_responder(cfg)).flatten();
            Ok(bloatlab_engine::tcp::server::run(cfg)?)
        }
        Protocol::Udp => Ok(bloatlab_engine::udp::run_server(cfg)?),
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
    use bloatlab_engine::config::{BitRate, Bytes};
    use bloatlab_engine::limits::ServerLimits;
    use clap::Parser;
    use std::time::Duration;

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
            .resolve(None)
            .unwrap()
            .engine;
        assert_eq!(c.port, 5002);
        assert!(c.enhanced && c.one_off && c.socket.ipv6);
        assert_eq!(c.interval, Some(Duration::from_secs(1)));
        assert_eq!(c.buffer_len, Some(Bytes(65_536)));
    }

    #[test]
    fn caps_have_documented_defaults_and_parse_iperf_units() {
        let c = T::try_parse_from(["t"])
            .unwrap()
            .a
            .resolve(None)
            .unwrap()
            .engine;
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
        .resolve(None)
        .unwrap()
        .engine;
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
        // The pairing rule is resolve's (typed errors naming the flag, exit status 2).
        for bad in [
            &["t", "--https", "1", "--tls-cert", "c"][..],
            &["t", "--https", "1", "--tls-key", "k"],
            &["t", "--tls-cert", "c", "--tls-key", "k"],
        ] {
            let e = T::try_parse_from(bad).unwrap().a.resolve(None).unwrap_err();
            assert!(e.to_string().contains("--tls-"), "{bad:?}: {e}");
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
