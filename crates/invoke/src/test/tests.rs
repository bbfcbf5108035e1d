use super::*;
use clap::Parser;
use proptest::prelude::*;
use std::path::PathBuf;

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: TestArgs,
}

fn parse<S: AsRef<str>>(args: &[S]) -> Result<TestArgs, clap::Error> {
    let v = std::iter::once("t").chain(args.iter().map(AsRef::as_ref));
    T::try_parse_from(v).map(|t| t.a)
}

#[test]
fn defaults_are_flent_s_and_test_params_default() {
    let a = parse(&["rrul", "h"]).unwrap();
    let p = a.resolve();
    assert_eq!(p, TestParams::default());
    assert_eq!(p.loaded, Duration::from_secs(60));
    assert_eq!(
        (p.idle_before, p.idle_after),
        (Duration::from_secs(5), Duration::from_secs(5))
    );
    assert_eq!((a.port, p.flows), (5001, 4));
    assert_eq!(to_argv("rrul", "h", &p), ["test", "rrul", "h"]);
}

#[test]
fn lengths_idle_cc_and_markings() {
    let a = parse(&[
        "tcp_nup",
        "h",
        "-l",
        "2",
        "--idle",
        "1",
        "--idle-after",
        "0",
        "--cc",
        "reno,bbr",
        "--markings",
        "ef,cs1",
        "--flows",
        "3",
        "-p",
        "6000",
    ])
    .unwrap();
    let p = a.resolve();
    assert_eq!(p.loaded, Duration::from_secs(2));
    assert_eq!(
        (p.idle_before, p.idle_after),
        (Duration::from_secs(1), Duration::ZERO)
    );
    assert_eq!(p.cc, ["reno", "bbr"]);
    assert_eq!(p.markings, [Tos::EF, Tos::CS1]);
    assert_eq!((p.flows, a.port), (3, 6000));
    assert_eq!(
        to_argv("tcp_nup", "h", &p).join(" "),
        "test tcp_nup h -l 2 --idle-before 1 --idle-after 0 --flows 3 --cc reno,bbr \
         --markings 0xb8,0x20"
    );
}

#[test]
fn bad_values_name_the_option_in_claps_context() {
    use clap::error::{ContextKind, ContextValue};
    let flag = |argv: &[&str]| match parse(argv).unwrap_err().get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split_whitespace().next().unwrap().to_owned(),
        other => panic!("{other:?}"),
    };
    assert_eq!(flag(&["rrul", "h", "-l", "0"]), "--length");
    assert_eq!(flag(&["rrul", "h", "--markings", "cs9"]), "--markings");
    assert_eq!(flag(&["rrul", "h", "--flows", "0"]), "--flows");
    assert_eq!(flag(&["rrul", "h", "--ecn", "maybe"]), "--ecn");
    assert!(parse(&["--list"]).is_ok());
    let mix = parse(&["rrul", "h", "--ecn", "mix"]).unwrap();
    assert_eq!(mix.ecn, Some(EcnMode::Mix));
    assert!(mix.resolve().ecn_mix);
    assert!(
        !parse(&["rrul", "h", "--ecn", "on"])
            .unwrap()
            .resolve()
            .ecn_mix
    );
    assert!(EcnMode::On.host_asks() && !EcnMode::Mix.host_asks());
    assert!(crate::rpm::duration("500ms").is_ok() && crate::rpm::duration("0").is_err());
}

// --- resolve(parse(to_argv(x))) == x ---------------------------------------

fn positive() -> impl Strategy<Value = Duration> {
    (0u64..100_000, 0u32..1_000_000_000)
        .prop_filter("positive", |&(s, n)| s > 0 || n > 0)
        .prop_map(|(s, n)| Duration::new(s, n))
}

fn any_duration() -> impl Strategy<Value = Duration> {
    (0u64..100_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n))
}

fn congestion() -> impl Strategy<Value = CongestionControl> {
    "[a-z0-9_]{1,15}".prop_map(|s| CongestionControl::new(&s).unwrap())
}

/// Any params `resolve` can produce.
fn test_params() -> impl Strategy<Value = TestParams> {
    (
        (positive(), any_duration(), any_duration(), 1u32..=64),
        proptest::collection::vec(congestion(), 0..4),
        proptest::collection::vec(any::<u8>().prop_map(Tos), 0..5),
        (positive(), positive(), 1u32..=10_000),
        // f64 carries the suffix parser's arithmetic: integers up to 2^53 are exact.
        ((1u64..(1 << 53)).prop_map(Bytes), any::<bool>()),
    )
        .prop_map(
            |(
                (loaded, idle_before, idle_after, flows),
                cc,
                markings,
                (probe_interval, sample_interval, pulses),
                (pulse_size, ecn_mix),
            )| TestParams {
                loaded,
                idle_before,
                idle_after,
                flows,
                cc,
                markings,
                probe_interval,
                sample_interval,
                pulses,
                pulse_size,
                ecn_mix,
            },
        )
}

proptest! {
    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(p in test_params()) {
        let argv = to_argv("rrul", "h", &p);
        prop_assert_eq!(&argv[..3], ["test", "rrul", "h"]);
        let a = parse(&argv[1..]).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        prop_assert_eq!(a.resolve(), p);
    }
}

// --- the whole run: resolve(parse(to_argv(x))) == x ---------------------------

/// Any rpm options the flags give (`--rpm-url` and `--rpm-port` exclude each other).
fn rpm_options() -> impl Strategy<Value = RpmTestOptions> {
    use bloatlab_rpm::client::{Mode, Protocol, Trust};
    let place = prop_oneof![
        Just((None, None)),
        "[!-~]{1,30}".prop_map(|u| (Some(u), None)),
        any::<u16>().prop_map(|p| (None, Some(p))),
    ];
    (
        place,
        prop_oneof![
            Just(Trust::System),
            Just(Trust::Insecure),
            "[a-z/]{1,12}\\.pem".prop_map(|f| Trust::Ca(PathBuf::from(f))),
            "[!-~]{1,64}".prop_map(Trust::Fingerprint),
        ],
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(1u16..=256),
        proptest::option::of((100u64..=60_000).prop_map(Duration::from_millis)),
    )
        .prop_map(
            |((url, port), trust, sequential, h1, max_connections, interval)| RpmTestOptions {
                url,
                port,
                trust,
                mode: if sequential {
                    Mode::Sequential
                } else {
                    Mode::Concurrent
                },
                protocol: if h1 { Protocol::H1 } else { Protocol::H2 },
                max_connections,
                interval,
            },
        )
}

/// Any run `TestArgs::invocation` can produce.
fn test_invocation() -> impl Strategy<Value = TestInvocation> {
    let ecn = proptest::option::of(prop_oneof![
        Just(EcnMode::On),
        Just(EcnMode::Off),
        Just(EcnMode::Mix)
    ]);
    (
        (
            "[a-z0-9_]{1,12}",
            proptest::option::of("[a-zA-Z0-9.:]{1,20}"),
            proptest::option::of("[!-~]{1,20}"),
            any::<u16>(),
        ),
        test_params(),
        ecn,
        (
            proptest::option::of("[!-~][ -~]{0,30}".prop_map(PathBuf::from)),
            any::<bool>(),
            proptest::option::of("[ -~]{0,30}"),
        ),
        rpm_options(),
        (proptest::option::of("[!-~]{4,128}"), any::<bool>()),
    )
        .prop_map(
            |((test, host, v6, port), params, ecn, (output, json, title), rpm, (key, pf))| {
                TestInvocation {
                    test,
                    host,
                    v6,
                    port,
                    params: TestParams {
                        ecn_mix: ecn == Some(EcnMode::Mix),
                        ..params
                    },
                    ecn,
                    output,
                    json,
                    title,
                    rpm,
                    permit_key: key,
                    preflight: pf,
                }
            },
        )
}

proptest! {
    #[test]
    fn a_whole_run_survives_its_command_line(t in test_invocation()) {
        let argv = t.to_argv();
        prop_assert!(!argv.iter().any(|a| a.starts_with("--permit-key")), "{:?}", argv);
        let a = parse(&argv[1..]).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        let mut back = a.invocation().expect("a run");
        // The key comes by the environment `child_env` names.
        let (var, key) = child_env(&t);
        prop_assert_eq!(var, crate::opts::PERMIT_KEY_ENV);
        back.permit_key = back.permit_key.or(key.map(str::to_owned));
        prop_assert_eq!(back, t);
    }
}

#[test]
fn a_run_at_the_defaults_is_its_name_and_host_and_list_is_no_run() {
    let t = TestInvocation::new("rrul", Some("10.77.0.2"));
    assert_eq!(t.to_argv(), ["test", "rrul", "10.77.0.2"]);
    assert_eq!(parse(&["rrul", "10.77.0.2"]).unwrap().invocation(), Some(t));
    assert_eq!(parse(&["--list"]).unwrap().invocation(), None);
    let mut t = TestInvocation::new("rpm", None);
    t.title = Some("-a title with spaces".into());
    t.rpm.trust = bloatlab_rpm::client::Trust::Insecure;
    t.rpm.interval = Some(Duration::from_millis(1500));
    t.permit_key = Some("sekrit-1234".into());
    assert_eq!(
        t.to_argv().join(" "),
        "test rpm --title=-a title with spaces --rpm-interval=1.5s --insecure"
    );
    assert_eq!(child_env(&t).1, Some("sekrit-1234"));
}

#[test]
fn the_rpm_child_is_the_rpm_clients_own_command_line() {
    let a = parse(&[
        "rpm",
        "h",
        "--sequential",
        "--max-connections",
        "8",
        "--rpm-interval",
        "1s",
        "--h1",
        "--fingerprint",
        "AB:CD",
    ])
    .unwrap();
    let o = a.rpm.resolve();
    assert_eq!(
        o.given(),
        [
            "--sequential",
            "--h1",
            "--fingerprint",
            "--max-connections",
            "--rpm-interval"
        ]
    );
    let c = o
        .child("https://h:8443/.well-known/nq", Duration::from_secs(30))
        .unwrap();
    assert_eq!(
        crate::rpm::to_argv(&c).join(" "),
        "rpm https://h:8443/.well-known/nq --interval 1s --max-connections 8 \
         --fingerprint AB:CD --duration 30 --sequential --h1 --json"
    );
    assert!(o.child("ftp://h/", Duration::from_secs(1)).is_err());
    assert!(RpmTestOptions::default().given().is_empty());
}
