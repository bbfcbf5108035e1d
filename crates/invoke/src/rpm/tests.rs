use super::*;
use clap::Parser;
use proptest::prelude::*;

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: RpmArgs,
}

fn parse(argv: &[&str]) -> Result<RpmArgs, String> {
    T::try_parse_from(std::iter::once("rpm").chain(argv.iter().copied()))
        .map(|t| t.a)
        .map_err(|e| e.to_string())
}

fn options(argv: &[&str]) -> Result<Options, UsageError> {
    parse(argv).unwrap().resolve(None).map(|c| c.options)
}

#[test]
fn defaults_are_the_drafts_parameters() {
    let o = options(&["nq.example"]).unwrap();
    assert_eq!(o.params, Params::default());
    assert_eq!(o.mode, Mode::Concurrent);
    assert_eq!(o.protocol, Protocol::H2);
    assert_eq!(o.trust, Trust::System);
    assert_eq!(o.duration, Duration::from_secs(60));
    assert_eq!(o.config_url, "https://nq.example/.well-known/nq");
    assert_eq!(o.stall_timeout, Duration::from_secs(30));
}

#[test]
fn each_parameter_flag_sets_its_parameter() {
    let o = options(&[
        "https://h:8443/.well-known/nq",
        "--mad",
        "6",
        "--interval",
        "1s",
        "--trim",
        "90",
        "--stdev-tolerance",
        "10%",
        "--max-connections",
        "8",
        "--max-probes",
        "50",
        "--probe-capacity",
        "2",
        "--sequential",
        "--h1",
        "--insecure",
    ])
    .unwrap();
    let p = o.params;
    assert_eq!(p.mad, 6);
    assert_eq!(p.interval, Duration::from_secs(1));
    assert!((p.trim - 0.10).abs() < 1e-12);
    assert!((p.stdev_tolerance - 0.10).abs() < 1e-12);
    assert_eq!(p.max_connections, 8);
    assert_eq!(p.max_probes_per_second, 50);
    assert!((p.probe_capacity - 0.02).abs() < 1e-12);
    assert_eq!(o.mode, Mode::Sequential);
    assert_eq!(o.duration, Duration::from_secs(120));
    assert_eq!(o.protocol, Protocol::H1);
    assert_eq!(o.trust, Trust::Insecure);
    assert_eq!(
        parse(&["h", "--interval", "500ms"]).unwrap().interval,
        Duration::from_millis(500)
    );
    assert_eq!(parse(&["h", "--trim", "95"]).unwrap().trim, 0.05);
}

#[test]
fn conflicting_and_bad_values_are_refused() {
    assert!(parse(&["h", "--sequential", "--upload-only"]).is_err());
    assert!(parse(&["h", "--insecure", "--ca", "x.pem"]).is_err());
    assert!(parse(&["h", "--mad", "1"]).is_err());
    assert!(parse(&["h", "--trim", "0"]).is_err());
    let e = parse(&["h", "--probe-capacity", "101"]).unwrap_err();
    assert!(e.contains("--probe-capacity") && e.contains("`101`"), "{e}");
    let e = parse(&["h", "--interval", "fast"]).unwrap_err();
    assert!(e.contains("--interval") && e.contains("`fast`"), "{e}");
    assert!(parse(&["h", "--max-connections", "0"]).is_err());
    // TMP 40 % keeps less than half: refused by the range check.
    let e = options(&["h", "--trim", "40"]).unwrap_err();
    assert!(e.to_string().contains("TMP"), "{e}");
    let e = options(&["h", "--fingerprint", "AB:CD"]).unwrap_err();
    assert!(e.to_string().contains("SHA-256"), "{e}");
    let e = options(&["ftp://h/"]).unwrap_err();
    assert!(e.to_string().contains("http"), "{e}");
}

#[test]
fn the_flag_key_wins_over_the_environment() {
    let c = parse(&["h"])
        .unwrap()
        .resolve(Some("from-env".into()))
        .unwrap();
    assert_eq!(c.options.permit_key.as_deref(), Some("from-env"));
    let a = parse(&["h", "--permit-key", "flag"]).unwrap();
    assert!(!a.wants_env_key());
    let c = a.resolve(Some("from-env".into())).unwrap();
    assert_eq!(c.options.permit_key.as_deref(), Some("flag"));
}

#[test]
fn a_drafts_run_is_written_with_its_non_default_options() {
    let c = parse(&[
        "10.77.0.2:8443",
        "--json",
        "--duration",
        "12.5",
        "--insecure",
    ])
    .unwrap()
    .resolve(Some("not-on-the-command-line".into()))
    .unwrap();
    assert_eq!(
        to_argv(&c).join(" "),
        "rpm https://10.77.0.2:8443/.well-known/nq --duration 12.5 --insecure --json"
    );
}

// --- resolve(parse(to_argv(x))) == x ---------------------------------------

/// A percentage as a user types it, with up to 6 decimals, in [lo, hi] (whole percent).
fn percent_text(lo: u64, hi: u64) -> impl Strategy<Value = String> {
    (0u32..=6).prop_flat_map(move |scale| {
        let unit = 10u64.pow(scale);
        (lo * unit..=hi * unit).prop_map(move |m| {
            let (int, frac) = (m / unit, m % unit);
            if scale == 0 {
                int.to_string()
            } else {
                format!("{int}.{frac:0w$}", w = scale as usize)
            }
        })
    })
}

fn duration(max_secs: u64) -> impl Strategy<Value = Duration> {
    (0..max_secs, 0u32..1_000_000_000)
        .prop_map(|(s, n)| Duration::new(s, n))
        .prop_filter("positive", |d| !d.is_zero())
}

/// Any config `resolve` can produce: the options built from values as the flags read
/// them, kept when [`Params::validate`] accepts them.
fn rpm_config() -> impl Strategy<Value = RpmConfig> {
    let url = prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5})?(:[0-9]{1,5})?",
        "https?://[a-z][a-z0-9.-]{0,10}(:[0-9]{1,5})?/[a-z/]{0,12}",
    ];
    let params = (
        2usize..=100,
        (100u64..=60_000).prop_map(Duration::from_millis),
        percent_text(50, 100),
        percent_text(0, 99),
        1usize..=256,
        2u32..=10_000,
        percent_text(0, 100),
    );
    let rest = (
        prop_oneof![
            Just(Mode::Concurrent),
            Just(Mode::Sequential),
            Just(Mode::DownloadOnly),
            Just(Mode::UploadOnly)
        ],
        any::<bool>(),
        prop_oneof![
            Just(Trust::System),
            Just(Trust::Insecure),
            "[a-z/]{1,12}\\.pem".prop_map(|f| Trust::Ca(PathBuf::from(f))),
            "[0-9A-F]{64}".prop_map(Trust::Fingerprint),
        ],
        proptest::option::of(duration(100_000)),
        proptest::option::of("[!-~]{4,128}"),
        any::<bool>(),
        proptest::option::of("[a-z][a-z0-9/.]{0,12}".prop_map(PathBuf::from)),
    );
    (url, params, rest).prop_filter_map("resolvable", |(url, p, r)| {
        let (mad, interval, trim, sdt, mnp, mps, ptc) = p;
        let (mode, h1, trust, duration, key, json, output) = r;
        let params = Params {
            mad,
            interval,
            trim: dropped_by_trim(&trim).ok()?,
            stdev_tolerance: percent(&sdt).ok()?,
            max_connections: mnp,
            max_probes_per_second: mps,
            probe_capacity: percent(&ptc).ok()?,
            ..Params::default()
        };
        params.validate().ok()?;
        let options = Options {
            config_url: bloatlab_rpm::config::config_url(&url).ok()?,
            params,
            mode,
            protocol: if h1 { Protocol::H1 } else { Protocol::H2 },
            trust,
            duration: duration.unwrap_or(default_duration(mode)),
            permit_key: key,
            stall_timeout: STALL_TIMEOUT,
        };
        Some(RpmConfig {
            options,
            json,
            output,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(x in rpm_config()) {
        let argv = to_argv(&x);
        prop_assert_eq!(argv[0].as_str(), "rpm");
        prop_assert!(!argv.iter().any(|a| a == "--permit-key"));
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let parsed = parse(&args).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        let y = parsed
            .resolve(x.options.permit_key.clone())
            .map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        prop_assert_eq!(y, x, "{:?}", argv);
    }
}
