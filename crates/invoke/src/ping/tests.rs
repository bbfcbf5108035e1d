use super::*;
use clap::Parser;
use proptest::prelude::*;

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: PingArgs,
}

fn parse(argv: &[&str]) -> Result<PingArgs, String> {
    T::try_parse_from(std::iter::once("ping").chain(argv.iter().copied()))
        .map(|t| t.a)
        .map_err(|e| e.to_string())
}

fn cfg(argv: &[&str], env_key: Option<&str>) -> PingConfig {
    match parse(argv).unwrap().resolve(env_key.map(str::to_owned)) {
        Ok(Ping::Probe(c)) => c,
        other => panic!("{argv:?}: {other:?}"),
    }
}

#[test]
fn defaults() {
    let c = cfg(&["10.0.0.2"], None);
    assert_eq!(c, PingConfig::new("10.0.0.2"));
    assert_eq!(c.port, 5001);
    assert_eq!(c.interval, Duration::from_millis(10));
    assert_eq!(c.limit, Limit::Duration(Duration::from_secs(10)));
    assert_eq!((c.size, c.timeout), (80, Duration::from_secs(3)));
    assert_eq!(cfg(&["h", "--icmp"], None).size, 64);
}

#[test]
fn interval_units() {
    assert_eq!(interval("10ms"), Ok(Duration::from_millis(10)));
    assert_eq!(interval("20"), Ok(Duration::from_millis(20)));
    assert_eq!(interval("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(interval("500us"), Ok(Duration::from_micros(500)));
    assert_eq!(interval("0.5s"), Ok(Duration::from_millis(500)));
    assert!(interval("0ms").is_err());
    assert!(interval("fast").is_err());
    assert!(interval("10 parsecs").is_err());
    let e = parse(&["h", "--interval", "0"]).unwrap_err();
    assert!(e.contains("--interval") && e.contains("`0`"), "{e}");
}

#[test]
fn count_and_time_conflict_and_count_is_positive() {
    assert!(parse(&["h", "-c", "5", "-t", "2"]).is_err());
    assert!(parse(&["h", "-c", "0"]).is_err());
    assert_eq!(cfg(&["h", "-c", "5"], None).limit, Limit::Count(5));
    assert_eq!(
        cfg(&["h", "-t", "2.5"], None).limit,
        Limit::Duration(Duration::from_millis(2500))
    );
}

#[test]
fn host_is_required_unless_serving() {
    assert!(parse(&[]).is_err());
    let a = parse(&["--serve", "127.0.0.1:0", "--permit-key", "abcd"]).unwrap();
    assert_eq!(
        a.resolve(None),
        Ok(Ping::Serve {
            bind: "127.0.0.1:0".parse().unwrap(),
            permit_key: Some("abcd".into())
        })
    );
    let a = parse(&["--serve", "7000"]).unwrap();
    assert_eq!(a.serve, Some("0.0.0.0:7000".parse().unwrap()));
    let e = parse(&["--serve", "nowhere"]).unwrap_err();
    assert!(e.contains("--serve") && e.contains("`nowhere`"), "{e}");
}

#[test]
fn tos_accepts_hex_and_max_loss_a_percentage() {
    assert_eq!(cfg(&["h", "--tos", "0xb8"], None).tos, Some(0xb8));
    assert_eq!(cfg(&["h", "--max-loss", "5%"], None).max_loss, 5.0);
    let e = parse(&["h", "--max-loss", "101"]).unwrap_err();
    assert!(e.contains("--max-loss") && e.contains("`101`"), "{e}");
}

#[test]
fn a_key_makes_room_for_the_tag_and_icmp_takes_none() {
    // The flag wins over the environment; the environment is for UDP probes only.
    let c = cfg(&["h"], Some("from-env"));
    assert_eq!(c.permit_key.as_deref(), Some("from-env"));
    assert_eq!(c.size, auth::MIN_LEN);
    let c = cfg(
        &["h", "--permit-key", "flag", "-s", "200"],
        Some("from-env"),
    );
    assert_eq!((c.permit_key.as_deref(), c.size), (Some("flag"), 200));
    let a = parse(&["h", "--icmp"]).unwrap();
    assert!(!a.wants_env_key());
    assert_eq!(cfg(&["h", "--icmp"], Some("from-env")).permit_key, None);
    assert!(parse(&["h", "--icmp", "--permit-key", "abcd"]).is_err());
}

#[test]
fn the_probe_config_is_the_resolved_one_at_the_looked_up_address() {
    let c = cfg(
        &["h", "-i", "20ms", "-c", "7", "-s", "100", "--tos", "0x20"],
        None,
    );
    let target: SocketAddr = "10.0.0.2:5001".parse().unwrap();
    let p = c.probe(target);
    assert_eq!(p.target, target);
    assert_eq!(p.mode, Mode::Udp);
    assert_eq!(p.interval, Duration::from_millis(20));
    assert_eq!(p.limit, Limit::Count(7));
    assert_eq!((p.size, p.tos), (100, Some(0x20)));
    assert_eq!(p.timeout, Duration::from_secs(3));
}

#[test]
fn a_probe_stream_is_written_as_the_suite_asks_for_it() {
    let mut c = PingConfig::new("10.77.0.2");
    c.interval = Duration::from_millis(10);
    c.limit = Limit::Duration(Duration::from_millis(4500));
    c.timeout = Duration::from_secs(1);
    c.json = true;
    c.tos = Some(0x20);
    c.permit_key = Some("not-on-the-command-line".into());
    c.set_size(None);
    assert_eq!(
        to_argv(&c).join(" "),
        "ping 10.77.0.2 -t 4.5 --tos 0x20 --timeout 1 --json"
    );
}

// --- resolve(parse(to_argv(x))) == x ---------------------------------------

fn duration(max_secs: u64) -> impl Strategy<Value = Duration> {
    (0..max_secs, 0u32..1_000_000_000)
        .prop_map(|(s, n)| Duration::new(s, n))
        .prop_filter("positive", |d| !d.is_zero())
}

/// Any config `resolve` can produce: the raw choices, then the rules that span
/// options applied as `resolve` applies them (ICMP echo takes no key, a key makes
/// room for its tag).
fn ping_config() -> impl Strategy<Value = PingConfig> {
    (
        (
            "[a-z0-9][a-z0-9.:-]{0,20}",
            any::<u16>(),
            any::<bool>(),
            // `--interval` reads at most an hour.
            duration(3600).prop_filter("at most an hour", |d| *d <= Duration::from_secs(3600)),
            prop_oneof![
                (1u64..).prop_map(Limit::Count),
                duration(100_000).prop_map(Limit::Duration)
            ],
            proptest::option::of(0usize..=65_507),
        ),
        (
            duration(100_000),
            proptest::option::of(any::<u8>()),
            proptest::option::of("[!-~]{4,128}"),
            any::<bool>(),
            any::<bool>(),
            0.0f64..=100.0,
        ),
    )
        .prop_map(|(h, t)| {
            let (host, port, icmp, interval, limit, size) = h;
            let (timeout, tos, key, json, per_probe, max_loss) = t;
            let mut c = PingConfig::new(host);
            c.port = port;
            c.mode = if icmp { Mode::Icmp } else { Mode::Udp };
            c.interval = interval;
            c.limit = limit;
            c.timeout = timeout;
            c.tos = tos;
            c.permit_key = key.filter(|_| !icmp);
            c.set_size(size);
            c.json = json;
            c.per_probe = per_probe;
            c.max_loss = max_loss;
            c
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(x in ping_config()) {
        let argv = to_argv(&x);
        prop_assert_eq!(argv[0].as_str(), "ping");
        // The key travels in the environment, never on the command line.
        prop_assert!(!argv.iter().any(|a| a == "--permit-key"));
        let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let parsed = parse(&args).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        let env_key = x.permit_key.clone().filter(|_| parsed.wants_env_key());
        let y = parsed
            .resolve(env_key)
            .map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        prop_assert_eq!(y, Ping::Probe(x), "{:?}", argv);
    }
}
