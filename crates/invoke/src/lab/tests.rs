use super::*;
use clap::Parser;
use proptest::prelude::*;

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    a: UpArgs,
}

fn parse<S: AsRef<str>>(args: &[S]) -> Result<UpArgs, clap::Error> {
    T::try_parse_from(args.iter().map(AsRef::as_ref)).map(|t| t.a)
}

#[test]
fn shared_values_are_written_per_direction() {
    let s = parse(&[
        "up",
        "x",
        "--rate",
        "20mbit",
        "--down-rate",
        "5mbit",
        "--qdisc",
        "codel",
        "--qdisc-param",
        "target=5ms",
        "--spin",
        "200us",
    ])
    .unwrap()
    .resolve()
    .unwrap();
    assert_eq!(
        to_argv(&s).join(" "),
        "lab up x --up-rate=20mbit --up-qdisc=codel --up-qdisc-param=target=5ms \
         --down-rate=5mbit --down-qdisc=codel --down-qdisc-param=target=5ms --spin=200us"
    );
}

/// One option of `lab up`: the flag (shared, or one direction's) and a value from a pool
/// of valid spellings.
fn link_opt(
    key: &'static str,
    pool: &'static [&'static str],
) -> impl Strategy<Value = Vec<String>> {
    proptest::option::of((0..3usize, proptest::sample::select(pool))).prop_map(move |o| {
        o.map(|(dir, v)| format!("--{}{key}={v}", ["", "up-", "down-"][dir]))
            .into_iter()
            .collect()
    })
}

/// The command lines of specs `resolve` accepts: options drawn from pools of valid
/// spellings, combined freely; the ones the backend's check refuses are discarded.
fn up_argv() -> impl Strategy<Value = Vec<String>> {
    let link = (
        link_opt("rate", &["20mbit", "1gbit", "schedule:0s/20mbit,5s/5mbit"]),
        link_opt("delay", &["10ms", "0ms", "1.5ms"]),
        link_opt("jitter", &["1ms", "250us"]),
        link_opt("loss", &["0.5%", "gemodel 1% 10%"]),
        link_opt("limit", &["1000p", "64kb"]),
        link_opt("qdisc", &["fifo", "fq_codel", "cake", "pie", "codel"]),
        link_opt("qdisc-param", &["target=5ms", "ecn"]),
        link_opt(
            "stage",
            &[
                "rate=9mbit qdisc=fq_codel",
                "delay=5ms",
                "rate=10mbit qdisc=fifo limit=1000p",
            ],
        ),
    );
    let host = (
        proptest::sample::select(&["userspace", "kernel"][..]),
        1u32..=3,
        any::<bool>(),
        proptest::sample::subsequence(&["all", "client", "server"][..], 0..=2),
        proptest::sample::subsequence(&["reno", "server=bbr", "client=cubic"][..], 0..=2),
        proptest::sample::select(&[1500u32, 9000, 1280][..]),
    );
    let driver = (
        proptest::sample::select(&["200us", "0", "1ms", "1500ns"][..]),
        any::<bool>(),
        any::<u64>(),
        any::<bool>(),
        any::<bool>(),
    );
    (link, host, driver).prop_map(|(l, h, d)| {
        let mut a = vec!["up".to_owned(), "lab-x".to_owned()];
        for o in [l.0, l.1, l.2, l.3, l.4, l.5, l.6, l.7] {
            a.extend(o);
        }
        let (backend, clients, peer, ecn, cc, mtu) = h;
        a.push(format!("--backend={backend}"));
        a.push(format!("--clients={clients}"));
        if peer {
            a.push("--peer".into());
        }
        a.extend(ecn.iter().map(|e| format!("--ecn={e}")));
        a.extend(cc.iter().map(|c| format!("--cc={c}")));
        a.push(format!("--mtu={mtu}"));
        let (spin, no_rt, seed, offload, no_cal) = d;
        a.push(format!("--spin={spin}"));
        a.push(format!("--seed={seed}"));
        for (on, f) in [
            (no_rt, "--no-realtime"),
            (offload, "--offload"),
            (no_cal, "--no-calibrate"),
        ] {
            if on {
                a.push(f.into());
            }
        }
        a
    })
}

proptest! {
    // Free combinations often ask for what a backend refuses (stages with --rate, stages on
    // the kernel backend): those cases are discarded, so allow many.
    #![proptest_config(ProptestConfig { max_global_rejects: 20_000, ..ProptestConfig::default() })]
    #[test]
    fn resolve_of_parse_of_to_argv_is_the_identity(argv in up_argv()) {
        let spec = parse(&argv).map_err(|e| TestCaseError::fail(format!("{argv:?}: {e}")))?;
        let Ok(spec) = spec.resolve() else {
            return Err(TestCaseError::reject("the backend refuses this combination"));
        };
        let back = to_argv(&spec);
        prop_assert_eq!(&back[..2], ["lab", "up"]);
        let again = parse(&back[1..]).map_err(|e| TestCaseError::fail(format!("{back:?}: {e}")))?;
        prop_assert_eq!(again.resolve().map_err(|e| TestCaseError::fail(e.to_string()))?, spec);
    }
}
