use super::*;
use clap::{FromArgMatches, Parser};
use proptest::prelude::*;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    a: AutorateArgs,
}

fn resolved(argv: &[&str]) -> Result<Plan, String> {
    let mut v = vec!["autorate"];
    v.extend_from_slice(argv);
    let m = <Cli as clap::CommandFactory>::command()
        .try_get_matches_from(v)
        .map_err(|e| e.to_string())?;
    let c = Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
    c.a.resolve().map_err(|e| {
        // The flag the message leads with is the one the error names first: a caller
        // (an experiment's `[during]`) finds the option at fault from `flags`.
        let lead = e.message.split([' ', ':']).next().unwrap_or_default();
        if lead.starts_with("--") {
            assert_eq!(e.flags.first().copied(), Some(lead), "{e}");
        }
        assert!(!e.flags.is_empty(), "no flag named: {e}");
        e.message
    })
}

const RATES: [&str; 6] = ["--min", "2mbit", "--base", "10mbit", "--max", "20mbit"];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["--lab", "h23t"];
    v.extend_from_slice(&RATES);
    v.extend_from_slice(extra);
    v
}

#[test]
fn flags_resolve_into_a_plan() {
    let p = resolved(&with(&["--stage", "router", "--duration", "10s"])).unwrap();
    assert_eq!(
        p.place,
        Place::Lab {
            lab: "h23t".into(),
            stage: "router".into()
        }
    );
    assert_eq!(p.duration, Some(Duration::from_secs(10)));
    assert_eq!(p.down.unwrap().base, BitRate(10_000_000));
    assert_eq!(p.params, Params::default());
    let p = resolved(&[
        "--set-rate-cmd",
        "echo {dir} {kbit}",
        "--iface",
        "lo",
        "--reflector",
        "192.0.2.1",
        "--min",
        "5mbit/1mbit",
        "--base",
        "20mbit/5mbit",
        "--max",
        "80mbit/10mbit",
        "--direction",
        "up",
        "--duration",
        "2.5",
        "--delay-thr",
        "15ms",
        "--cut-full-delay",
        "40ms",
        "--cut-achieved",
        "0.9",
        "--bloat-refractory",
        "150ms",
        "--emit",
        "sqm,cake-autorate",
    ])
    .unwrap();
    assert!(p.down.is_none());
    let up = p.up.unwrap();
    assert_eq!(
        (up.min.0, up.base.0, up.max.0),
        (1_000_000, 5_000_000, 10_000_000)
    );
    assert_eq!(p.duration, Some(Duration::from_millis(2500)));
    assert_eq!(p.params.delay_thr, Duration::from_millis(15));
    assert_eq!(p.params.cut_achieved, Some(0.9));
    assert_eq!(p.params.bloat_refractory, Duration::from_millis(150));
    let off = resolved(&with(&["--cut-achieved", "off"])).unwrap();
    assert_eq!(off.params.cut_achieved, None);
    assert_eq!(p.emit, [Format::Sqm, Format::CakeAutorate]);
    assert_eq!(p.emit_iface, "lo");
}

#[test]
fn bad_input_names_the_flag() {
    for (argv, want) in [
        (with(&["--duration", "0s"]), "--duration"),
        (with(&["--duration", "soon"]), "--duration"),
        (with(&["--delay-thr", "0ms"]), "--delay-thr"),
        (with(&["--bloat-count", "9"]), "--bloat-count"),
        (with(&["--bloat-window", "0"]), "--bloat-window"),
        (with(&["--high-load", "2"]), "--high-load"),
        (with(&["--cut-max", "1.5"]), "--cut-max"),
        (with(&["--raise-max", "0.5"]), "--raise-max"),
        (with(&["--cut-achieved", "1.5"]), "--cut-achieved"),
        (with(&["--cut-achieved", "never"]), "--cut-achieved"),
        (with(&["--bloat-refractory", "0ms"]), "--bloat-refractory"),
        (with(&["--bloat-refractory", "61s"]), "--bloat-refractory"),
        (with(&["--interval", "1ms"]), "--interval"),
        (with(&["--emit", "openwrt"]), "--emit"),
        (with(&["--emit-iface", "a b"]), "--emit-iface"),
        (
            vec![
                "--lab",
                "Bad Name!",
                "--min",
                "1mbit",
                "--base",
                "2mbit",
                "--max",
                "3mbit",
            ],
            "--lab",
        ),
    ] {
        let e = resolved(&argv).unwrap_err();
        assert!(e.contains(want), "{argv:?}: {e}");
    }
    let rates = |min: &'static str, base: &'static str, max: &'static str| {
        vec!["--lab", "h23t", "--min", min, "--base", base, "--max", max]
    };
    for (argv, want) in [
        (rates("0mbit", "1mbit", "2mbit"), "--min"),
        (rates("fast", "1mbit", "2mbit"), "--min"),
        (rates("3mbit", "1mbit", "5mbit"), "--base down"),
        (rates("1mbit", "4mbit", "3mbit"), "--max down"),
        (rates("1mbit", "4mbit", "9mbit/3mbit"), "--max up"),
    ] {
        let e = resolved(&argv).unwrap_err();
        assert!(e.contains(want), "{argv:?}: {e}");
    }
    let mut v = vec![
        "--set-rate-cmd",
        "tc ... {rate}",
        "--iface",
        "lo",
        "--reflector",
        "h",
    ];
    v.extend_from_slice(&RATES);
    let e = resolved(&v).unwrap_err();
    assert!(e.contains("--set-rate-cmd") && e.contains("{rate}"), "{e}");
    let mut v = vec!["--set-rate-cmd", "echo {kbit}", "--iface", "lo"];
    v.extend_from_slice(&RATES);
    assert!(resolved(&v).unwrap_err().contains("--reflector"));
    // clap: the command needs --iface; --lab excludes both.
    let mut v = vec!["--set-rate-cmd", "echo {kbit}"];
    v.extend_from_slice(&RATES);
    assert!(resolved(&v).unwrap_err().contains("--iface"));
    let e = resolved(&with(&["--iface", "lo"])).unwrap_err();
    assert!(e.contains("cannot be used with"), "{e}");
    let e = resolved(&RATES).unwrap_err();
    assert!(e.contains("--lab") && e.contains("--set-rate-cmd"), "{e}");
    assert!(resolved(&["--lab", "x"]).unwrap_err().contains("--min"));
}

#[test]
fn the_variable_link_arm_is_written_as_its_toml_spells_it() {
    let p = resolved(&[
        "--lab",
        "lab1",
        "--stage",
        "shaper",
        "--direction",
        "down",
        "--min",
        "2mbit",
        "--base",
        "10mbit",
        "--max",
        "20mbit",
        "--delay-thr",
        "30ms",
        "--interval",
        "25ms",
        "--bloat-window",
        "3",
        "--bloat-count",
        "1",
        "--cut-max",
        "0.3",
        "--raise-max",
        "1.03",
        "--load-interval",
        "100ms",
        "--bloat-refractory",
        "150ms",
        "-o",
        "o.json",
    ])
    .unwrap();
    assert_eq!(
        to_argv(&p).join(" "),
        "autorate --lab lab1 --stage shaper --interval 0.025 --direction down \
         --min 2000000bit --base 10000000bit --max 20000000bit --bloat-refractory 0.15 \
         --cut-max 0.3 --raise-max 1.03 --bloat-count 1 --bloat-window 3 --load-interval 0.1 \
         -o o.json"
    );
}

// --- resolve(parse(to_argv(x))) == x ---------------------------------------

fn duration(lo_ms: u64, hi_ms: u64) -> impl Strategy<Value = Duration> {
    (lo_ms * 1_000_000..=hi_ms * 1_000_000).prop_map(Duration::from_nanos)
}

fn rate() -> impl Strategy<Value = BitRate> {
    (1u64..(1 << 40)).prop_map(BitRate)
}

/// Any plan `resolve` can produce: raw choices, kept when the controller's own checks
/// ([`Params::validate`], [`Bounds::validate`]) accept them, with `cut_min` raised to
/// `cut_max` as `resolve` does.
fn plan() -> impl Strategy<Value = Plan> {
    let place = prop_oneof![
        ("[a-z][a-z0-9]{0,8}", "[a-z1-9][a-z0-9]{0,6}")
            .prop_map(|(lab, stage)| Place::Lab { lab, stage }),
        ("tc [a-z ]{0,10}\\{kbit\\}kbit", "[a-z][a-z0-9]{0,8}")
            .prop_map(|(template, iface)| Place::Command { template, iface }),
    ];
    let params = (
        duration(1, 1000),
        (1usize..=10, 1usize..=10),
        duration(1, 2000),
        (0.01f64..1.0, 1.0f64..2.0, 0.01f64..1.0, 0.0f64..0.5),
        proptest::option::of(0.01f64..=1.0),
        duration(1, 60_000),
        duration(1, 60_000),
    );
    let bounds = (rate(), rate(), rate(), rate(), rate(), rate());
    let rest = (
        prop_oneof![Just(Which::Down), Just(Which::Up), Just(Which::Both)],
        proptest::collection::vec("[a-z0-9.:]{1,12}", 0..3),
        any::<bool>(),
        any::<u16>(),
        duration(10, 10_000),
        duration(50, 10_000),
        proptest::option::of(duration(1, 100_000_000)),
        proptest::option::of("[a-z][a-z0-9/.]{0,12}".prop_map(PathBuf::from)),
        proptest::sample::subsequence(vec![Format::Sqm, Format::Tc, Format::CakeAutorate], 0..=3),
        proptest::option::of("[a-z][a-z0-9]{0,8}"),
    );
    (place, params, bounds, rest).prop_filter_map("resolvable", |(place, q, b, r)| {
        let (delay_thr, (count, window), cut_full, (cut_max, raise_max, high, decay), ach, br, de) =
            q;
        let (which, reflectors, icmp, port, interval, load_interval, duration, output, emit, ei) =
            r;
        let params = Params {
            delay_thr,
            bloat_count: count,
            bloat_window: window,
            cut_full_delay: cut_full,
            cut_max,
            raise_max,
            high_load: high,
            decay_step: decay,
            decay_refractory: de,
            bloat_refractory: br,
            cut_achieved: ach,
            ..Params::default()
        };
        let params = Params {
            cut_min: params.cut_min.max(params.cut_max),
            ..params
        };
        params.validate().ok()?;
        let mut sorted = [b.0, b.1, b.2];
        sorted.sort();
        let down = Bounds {
            min: sorted[0],
            base: sorted[1],
            max: sorted[2],
        };
        let mut sorted = [b.3, b.4, b.5];
        sorted.sort();
        let up = Bounds {
            min: sorted[0],
            base: sorted[1],
            max: sorted[2],
        };
        down.validate("down").ok()?;
        up.validate("up").ok()?;
        let (down, up) = match which {
            Which::Down => (Some(down), None),
            Which::Up => (None, Some(up)),
            Which::Both => (Some(down), Some(up)),
        };
        if matches!(place, Place::Command { .. }) && reflectors.is_empty() {
            return None;
        }
        let emit_iface = ei.unwrap_or_else(|| match &place {
            Place::Command { iface, .. } => iface.clone(),
            Place::Lab { .. } => "eth0".into(),
        });
        Some(Plan {
            place,
            params,
            down,
            up,
            reflectors,
            mode: if icmp { Mode::Icmp } else { Mode::Udp },
            interval,
            load_interval,
            duration,
            emit,
            emit_iface,
            port,
            output,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(x in plan()) {
        let argv = to_argv(&x);
        prop_assert_eq!(argv[0].as_str(), "autorate");
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let y = resolved(&args).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        prop_assert_eq!(y, x, "{:?}", argv);
    }
}
