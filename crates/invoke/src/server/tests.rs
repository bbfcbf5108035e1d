use super::*;
use bloatlab_engine::config::{Out, SocketOptions};
use bloatlab_units::CongestionControl;
use clap::Parser;
use proptest::prelude::*;
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: ServerArgs,
}

fn parse(args: &[String]) -> Result<ServerArgs, clap::Error> {
    T::try_parse_from(args).map(|t| t.a)
}

/// `c` with writers that compare equal: a config's writers are the process's own and
/// compare by identity, which no command line carries.
fn same_writers(c: ServerConfig, w: &Out) -> ServerConfig {
    ServerConfig {
        out: w.clone(),
        err: w.clone(),
        ..c
    }
}

#[test]
fn the_flags_defaults_resolve_to_the_engines_and_write_back() {
    let c = parse(&["server".into()]).unwrap().resolve();
    let back = parse(&to_argv(&c)).unwrap().resolve();
    let w = Out::stdout();
    assert_eq!(same_writers(back, &w), same_writers(c.clone(), &w));
    assert_eq!(c.port, 5001);
    let argv = to_argv(&ServerConfig {
        permit_key: Some(String::new()),
        ..c.clone()
    });
    assert!(argv.contains(&"--permit-key".to_owned()), "{argv:?}");
}

fn positive() -> impl Strategy<Value = Duration> {
    (0u64..100_000, 0u32..1_000_000_000)
        .prop_filter("positive", |&(s, n)| s > 0 || n > 0)
        .prop_map(|(s, n)| Duration::new(s, n))
}

fn rate() -> impl Strategy<Value = BitRate> {
    (0u64..(1 << 53)).prop_map(BitRate)
}

fn nonzero_bytes() -> impl Strategy<Value = Bytes> {
    (1u64..(1 << 53)).prop_map(Bytes)
}

/// Any config `resolve` can produce (the server sets neither TCP_NODELAY nor SO_MARK).
fn server_config() -> impl Strategy<Value = ServerConfig> {
    let socket = (
        proptest::option::of(nonzero_bytes()),
        proptest::option::of("[a-z0-9_]{1,15}".prop_map(|s| CongestionControl::new(&s).unwrap())),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::option::of(
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, p)| SocketAddr::new(IpAddr::from(ip), p)),
        ),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(window, congestion, tos, ipv6, bind, rx_copy, zerocopy)| SocketOptions {
                window,
                congestion,
                tos,
                ipv6,
                bind,
                nodelay: false,
                mark: None,
                rx_copy,
                zerocopy,
            },
        );
    let head = (
        any::<u16>(),
        any::<bool>(),
        proptest::option::of(positive()),
        proptest::option::of(nonzero_bytes()),
        any::<bool>(),
        socket,
        prop_oneof![
            Just(OutputFormat::Console),
            Just(OutputFormat::Csv),
            Just(OutputFormat::Json)
        ],
        any::<bool>(),
        (positive(), positive(), positive()),
        any::<bool>(),
    );
    let limits = (
        (positive(), nonzero_bytes(), 1u32..=u32::MAX),
        proptest::array::uniform4(proptest::option::of(rate())),
        (
            (0u64..100_000).prop_map(Duration::from_secs),
            rate(),
            positive(),
        ),
    )
        .prop_map(
            |((max_duration, max_bytes, max_streams), rates, (source, unverified, time))| {
                ServerLimits {
                    max_duration,
                    max_bytes,
                    max_streams,
                    max_rate: rates[0],
                    max_total_rate: rates[1],
                    max_reverse_rate: rates[2],
                    max_total_reverse_rate: rates[3],
                    max_source_time: source,
                    unverified_reverse_rate: unverified,
                    unverified_reverse_time: time,
                }
            },
        );
    let tail = (
        1usize..=u32::MAX as usize,
        1usize..=u32::MAX as usize,
        limits,
        proptest::option::of(prop_oneof![Just(String::new()), "[!-~]{4,128}"]),
    );
    (head, tail).prop_map(|(h, t)| {
        let (port, udp, interval, buffer_len, enhanced, socket, format, one_off, timeouts, no_rev) =
            h;
        let (max_connections, max_per_source, limits, permit_key) = t;
        ServerConfig {
            port,
            protocol: if udp { Protocol::Udp } else { Protocol::Tcp },
            interval,
            buffer_len,
            enhanced,
            socket,
            format,
            one_off,
            header_timeout: timeouts.0,
            no_reverse: no_rev,
            idle_timeout: timeouts.1,
            first_data_timeout: timeouts.2,
            max_connections,
            max_per_source,
            limits,
            permit_key,
            out: Out::stdout(),
            err: Out::stderr(),
        }
    })
}

proptest! {
    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(c in server_config()) {
        let argv = to_argv(&c);
        let a = parse(&argv).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        let w = Out::stdout();
        prop_assert_eq!(same_writers(a.resolve(), &w), same_writers(c, &w));
    }
}
