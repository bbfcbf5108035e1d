use super::*;
use clap::Parser;
use proptest::prelude::*;

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
