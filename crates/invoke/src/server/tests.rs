use super::*;
use crate::opts::PERMIT_KEY_ENV;
use bloatlab_engine::config::{Out, SocketOptions};
use bloatlab_http::RecordConfig;
use bloatlab_http::deadlines::Limits as HttpDeadlines;
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

/// `s` with writers that compare equal: a config's writers are the process's own and
/// compare by identity, which no command line carries.
fn same_writers(mut s: ServerInvocation, w: &Out) -> ServerInvocation {
    s.engine.out = w.clone();
    s.engine.err = w.clone();
    s
}

/// What the child of `to_argv(s)` resolves to, given `child_env(s)`'s key.
fn child_resolves(s: &ServerInvocation) -> Result<ServerInvocation, String> {
    let argv = to_argv(s);
    let (_, key) = child_env(s);
    let a = parse(&argv).map_err(|e| format!("{argv:?}: {e}"))?;
    a.resolve(key.map(str::to_owned))
        .map_err(|e| format!("{argv:?}: {e}"))
}

#[test]
fn the_flags_defaults_resolve_to_the_engines_and_write_back() {
    let s = parse(&["server".into()]).unwrap().resolve(None).unwrap();
    let w = Out::stdout();
    assert_eq!(
        same_writers(child_resolves(&s).unwrap(), &w),
        same_writers(s.clone(), &w)
    );
    assert_eq!(s.engine.port, 5001);
    assert!(s.iperf && s.probes && s.http.is_none());
    assert_eq!(s.browser.caps, TestCaps::default());
    assert_eq!(
        same_writers(ServerInvocation::on_port(5001), &w),
        same_writers(s.clone(), &w)
    );
    assert_eq!(ServerInvocation::on_port(6001).engine.port, 6001);
    let mut generate = s.clone();
    generate.engine.permit_key = Some(String::new());
    let argv = to_argv(&generate);
    assert!(argv.contains(&"--permit-key".to_owned()), "{argv:?}");
    assert_eq!(child_env(&generate), (PERMIT_KEY_ENV, None));
}

#[test]
fn the_permit_key_goes_by_environment_never_on_the_command_line() {
    let mut s = ServerInvocation::on_port(5001);
    s.engine.permit_key = Some("sekrit-key-1234".into());
    let argv = to_argv(&s);
    assert!(
        !argv
            .iter()
            .any(|a| a.contains("sekrit") || a.starts_with("--permit-key")),
        "{argv:?}"
    );
    assert_eq!(child_env(&s), (PERMIT_KEY_ENV, Some("sekrit-key-1234")));
    let w = Out::stdout();
    assert_eq!(
        same_writers(child_resolves(&s).unwrap(), &w),
        same_writers(s, &w)
    );
    // The flag wins over the environment; a UDP server takes no key from it (iperf 2's
    // key is a TCP header field), as `client` does.
    let a = parse(&["server".into(), "--permit-key=flagkey1".into()]).unwrap();
    let s = a.resolve(Some("envkey12".into())).unwrap();
    assert_eq!(s.engine.permit_key.as_deref(), Some("flagkey1"));
    let a = parse(&["server".into(), "-u".into()]).unwrap();
    assert_eq!(
        a.resolve(Some("envkey12".into()))
            .unwrap()
            .engine
            .permit_key,
        None
    );
}

#[test]
fn options_that_exclude_each_other_are_typed_errors_naming_their_flags() {
    let err = |argv: &[&str]| {
        let v: Vec<String> = std::iter::once("server")
            .chain(argv.iter().copied())
            .map(str::to_owned)
            .collect();
        parse(&v).unwrap().resolve(None).unwrap_err()
    };
    assert_eq!(err(&["--no-iperf"]), ServerError::NothingServed);
    assert_eq!(
        err(&["--results-dir=/tmp"]),
        ServerError::ResultsWithoutHttp
    );
    assert_eq!(
        err(&["--tls-cert=c", "--tls-key=k"]),
        ServerError::TlsWithoutHttps
    );
    assert_eq!(
        err(&["--https=1", "--tls-cert=c"]),
        ServerError::CertWithoutKey
    );
    assert_eq!(
        err(&["--https=1", "--tls-key=k"]),
        ServerError::KeyWithoutCert
    );
    assert_eq!(err(&["-u", "--permit-key=abcd"]), ServerError::KeyWithUdp);
    assert_eq!(ServerError::KeyWithUdp.flags(), ["--permit-key"]);
    assert!(
        ServerError::NothingServed
            .to_string()
            .starts_with("--no-iperf needs --http PORT or --https PORT")
    );
    let ok = parse(&["server".into(), "--https=8443".into(), "--no-iperf".into()])
        .unwrap()
        .resolve(None)
        .unwrap();
    assert_eq!(
        ok.http,
        Some(HttpService {
            http: None,
            https: Some(Https {
                port: 8443,
                tls: None
            })
        })
    );
    assert!(!ok.iperf);
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

/// Any engine config `resolve` can produce (the server sets neither TCP_NODELAY nor
/// SO_MARK; a UDP server has no key).
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
            permit_key: permit_key.filter(|_| !udp),
            out: Out::stdout(),
            err: Out::stderr(),
        }
    })
}

fn path() -> impl Strategy<Value = PathBuf> {
    "/[a-zA-Z0-9._/-]{0,20}".prop_map(PathBuf::from)
}

/// Any HTTP service (at least one port).
fn http_service() -> impl Strategy<Value = HttpService> {
    let tls = proptest::option::of((path(), path()).prop_map(|(cert, key)| TlsFiles { cert, key }));
    let https =
        proptest::option::of((any::<u16>(), tls).prop_map(|(port, tls)| Https { port, tls }));
    (proptest::option::of(any::<u16>()), https)
        .prop_filter("a port", |(h, s)| h.is_some() || s.is_some())
        .prop_map(|(http, https)| HttpService { http, https })
}

/// Any invocation `resolve` can produce: `--no-iperf` and `--results-dir` only with an
/// HTTP service.
fn server_invocation() -> impl Strategy<Value = ServerInvocation> {
    let deadlines = (positive(), positive(), positive()).prop_map(|(h, r, w)| HttpDeadlines {
        handshake_stall: h,
        head_stall: r,
        wait_max: w,
    });
    let caps = (
        1u32..=u32::MAX,
        1u32..=u32::MAX,
        positive(),
        1u64..(1 << 53),
    )
        .prop_map(
            |(per_source_per_hour, concurrent, max_duration, max_result_bytes)| TestCaps {
                per_source_per_hour,
                concurrent,
                max_duration,
                max_result_bytes,
            },
        );
    (
        server_config(),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(http_service()),
        deadlines,
        proptest::option::of(path()),
        caps,
    )
        .prop_map(
            |(engine, no_iperf, probes, http, http_deadlines, dir, caps)| ServerInvocation {
                engine,
                iperf: !(no_iperf && http.is_some()),
                probes,
                browser: RecordConfig {
                    results_dir: dir.filter(|_| http.is_some()),
                    caps,
                },
                http,
                http_deadlines,
            },
        )
}

proptest! {
    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(s in server_invocation()) {
        let back = child_resolves(&s).map_err(TestCaseError::fail)?;
        let w = Out::stdout();
        prop_assert_eq!(same_writers(back, &w), same_writers(s.clone(), &w));
        let argv = to_argv(&s);
        prop_assert!(!argv.iter().any(|a| a.starts_with("--permit-key=")), "{:?}", argv);
    }
}
