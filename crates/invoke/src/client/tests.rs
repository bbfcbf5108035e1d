use super::*;
use bloatlab_units::CongestionControl;
use clap::Parser;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: ClientArgs,
}

fn parse(args: &[&str]) -> Result<ClientArgs, clap::Error> {
    let mut v = vec!["t"];
    v.extend_from_slice(args);
    T::try_parse_from(v).map(|t| t.a)
}

fn cfg(args: &[&str]) -> ClientConfig {
    parse(args).unwrap().resolve(None).unwrap()
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
fn a_bad_congestion_control_names_the_option() {
    let e = parse(&["h", "-Z", "cu bic"]).unwrap_err().to_string();
    assert!(
        e.contains("--tcp-congestion") && e.contains("not a congestion control name"),
        "{e}"
    );
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
    let e = parse(&["h", "--near-congestion=-1"])
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
    assert!(parse(&["h", "-n", "1M", "--abort-at-end"]).is_err());
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
        let c = cfg(&["h", "-u", extra, "-b", "2M", "-l", "400"]);
        assert_eq!(c.protocol, Protocol::Udp);
        assert_eq!(c.direction, dir);
        assert_eq!(c.effective_len(), Bytes(400));
    }
}

#[test]
fn bad_values_name_the_option() {
    let e = parse(&["h", "-l", "abc"]).unwrap_err().to_string();
    assert!(e.contains("--len"), "{e}");
    let e = parse(&["h", "-P", "0"]).unwrap_err().to_string();
    assert!(e.contains("--parallel"), "{e}");
}

/// Each error names its flags, the one to change first leading (an experiment file
/// points at that option's line from them).
#[test]
fn combinations_that_cannot_run_are_usage_errors() {
    for (args, lead) in [
        (
            &["h", "-u", "--notsent-lowat", "16K"][..],
            "--notsent-lowat",
        ),
        (&["h", "-u", "--abort-at-end"], "--abort-at-end"),
        (&["h", "-u", "--permit-key", "abcd"], "--permit-key"),
        (&["h", "-b", "1m", "--near-congestion"], "--near-congestion"),
        (&["h", "--trip-times", "-l", "91"], "--len"),
        (&["h", "--notsent-lowat", "5G"], "--notsent-lowat"),
    ] {
        let e = parse(args).unwrap().resolve(None).unwrap_err();
        assert_eq!(e.flags.first().copied(), Some(lead), "{args:?}: {e}");
        // Every flag given that the message names is among the error's flags.
        for a in args.iter().filter(|a| a.starts_with("--")) {
            assert!(e.flags.contains(a), "{args:?}: {a} not in {:?}", e.flags);
        }
    }
    let e = parse(&["h", "--trip-times", "-l", "91"])
        .unwrap()
        .resolve(None)
        .unwrap_err();
    assert_eq!(e.flags, ["--len", "--trip-times"]);
    // Display is the message alone, as before the flags were carried.
    assert_eq!(
        e.to_string(),
        "-l/--len must be at least 92 bytes with --trip-times (the burst header)"
    );
}

#[test]
fn the_environment_key_is_for_tcp_only_and_the_flag_wins() {
    let key = Some("from-env".to_owned());
    let c = parse(&["h"]).unwrap().resolve(key.clone()).unwrap();
    assert_eq!(c.permit_key.as_deref(), Some("from-env"));
    let c = parse(&["h", "--permit-key", "flag"])
        .unwrap()
        .resolve(key.clone())
        .unwrap();
    assert_eq!(c.permit_key.as_deref(), Some("flag"));
    let c = parse(&["h", "-u"]).unwrap().resolve(key).unwrap();
    assert_eq!(c.permit_key, None);
}

#[test]
fn a_load_flow_is_written_as_the_suite_asks_for_it() {
    let mut c = ClientConfig::new("10.77.0.2");
    c.interval = Some(Duration::from_millis(200));
    c.format = OutputFormat::Json;
    c.enhanced = true;
    c.notsent_lowat = Some(Bytes(32 * 1024));
    c.amount = Amount::Time(Duration::from_millis(2500));
    c.abort_at_end = true;
    c.direction = Direction::Reverse;
    c.socket.tos = Some(0xb8);
    c.socket.congestion = Some(CongestionControl::new("reno").unwrap());
    c.permit_key = Some("not-on-the-command-line".into());
    assert_eq!(
        to_argv(&c).join(" "),
        "client 10.77.0.2 -i 0.2 -t 2.5 -Z reno -S 0xb8 --notsent-lowat 32768 --json -e -R \
         --abort-at-end"
    );
}

#[test]
fn seconds_are_exact_decimals() {
    assert_eq!(secs(Duration::from_secs(10)), "10");
    assert_eq!(secs(Duration::from_millis(2500)), "2.5");
    assert_eq!(secs(Duration::from_millis(1)), "0.001");
    assert_eq!(secs(Duration::from_nanos(1_000_000_007)), "1.000000007");
}

// --- resolve(parse(to_argv(x))) == x ---------------------------------------

fn duration() -> impl Strategy<Value = Duration> {
    // Positive, to the nanosecond, up to about 28 hours.
    (0u64..100_000, 0u32..1_000_000_000)
        .prop_filter("positive", |&(s, n)| s > 0 || n > 0)
        .prop_map(|(s, n)| Duration::new(s, n))
}

fn nonzero_bytes() -> impl Strategy<Value = Bytes> {
    // f64 carries the suffix parser's arithmetic: integers up to 2^53 are exact.
    (1u64..(1 << 53)).prop_map(Bytes)
}

fn congestion() -> impl Strategy<Value = CongestionControl> {
    "[a-z0-9_]{1,15}".prop_map(|s| CongestionControl::new(&s).unwrap())
}

fn bind() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::new(IpAddr::from(ip), p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), p)),
    ]
}

fn socket() -> impl Strategy<Value = SocketOptions> {
    (
        proptest::option::of(nonzero_bytes()),
        proptest::option::of(congestion()),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::option::of(bind()),
        any::<bool>(),
        proptest::option::of(any::<u32>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(window, congestion, tos, ipv6, bind, nodelay, mark, rx_copy, zerocopy)| {
                SocketOptions {
                    window,
                    congestion,
                    tos,
                    ipv6,
                    bind,
                    nodelay,
                    mark,
                    rx_copy,
                    zerocopy,
                }
            },
        )
}

/// Any config `resolve` can produce: the raw choices, then the rules that span
/// options applied as `resolve` applies them (a UDP test drops TCP-only options, ...).
fn client_config() -> impl Strategy<Value = ClientConfig> {
    let head = (
        "[a-z][a-z0-9.-]{0,20}",
        any::<u16>(),
        any::<bool>(),
        prop_oneof![
            duration().prop_map(Amount::Time),
            nonzero_bytes().prop_map(Amount::Bytes)
        ],
        proptest::option::of(duration()),
        proptest::option::of(nonzero_bytes()),
        1u32..=128,
        proptest::option::of((0u64..(1 << 53)).prop_map(BitRate)),
        any::<bool>(),
        prop_oneof![
            Just(Direction::Forward),
            Just(Direction::Reverse),
            Just(Direction::FullDuplex)
        ],
    );
    let tail = (
        any::<bool>(),
        proptest::option::of(0.0f64..=100.0),
        any::<bool>(),
        socket(),
        prop_oneof![
            Just(OutputFormat::Console),
            Just(OutputFormat::Csv),
            Just(OutputFormat::Json)
        ],
        duration(),
        proptest::option::of((1u64..=u64::from(u32::MAX)).prop_map(Bytes)),
        any::<bool>(),
        proptest::option::of("[!-~]{4,128}"),
    );
    (head, tail).prop_map(|(h, t)| {
        let (host, port, udp, amount, interval, buffer_len, parallel, rate, enhanced, direction) =
            h;
        let (trip_times, near, peer_detect, socket, format, connect_timeout, lowat, abort, key) = t;
        let mut c = ClientConfig::new(host);
        c.port = port;
        c.protocol = if udp { Protocol::Udp } else { Protocol::Tcp };
        c.amount = amount;
        c.interval = interval;
        c.buffer_len = buffer_len;
        c.parallel = parallel;
        c.rate = rate;
        c.enhanced = enhanced;
        c.direction = direction;
        c.trip_times = trip_times;
        c.near_congestion = near.filter(|_| !udp && rate.is_none());
        c.peer_detect = peer_detect;
        c.socket = socket;
        c.format = format;
        c.connect_timeout = connect_timeout;
        c.notsent_lowat = lowat.filter(|_| !udp);
        c.abort_at_end = abort && !udp && matches!(amount, Amount::Time(_));
        c.permit_key = key.filter(|_| !udp);
        if c.trip_times && !udp && c.effective_len().0 < 92 {
            c.buffer_len = Some(Bytes(92));
        }
        c
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(x in client_config()) {
        let argv = to_argv(&x);
        prop_assert_eq!(argv[0].as_str(), "client");
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let parsed = parse(&args).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        // The key travels in the environment, never on the command line.
        prop_assert!(!argv.iter().any(|a| a == "--permit-key"));
        let mut y = parsed
            .resolve(x.permit_key.clone())
            .map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        // The stop token and the writers are the process's own, compared by identity.
        y.stop = x.stop.clone();
        y.out = x.out.clone();
        y.err = x.err.clone();
        prop_assert_eq!(y, x, "{:?}", argv);
    }
}
