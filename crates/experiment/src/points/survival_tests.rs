//! Every option a `[server]` or `[test]` section can hold reaches the child the runner
//! starts: for each flag the command defines (read from its clap definition, so a new
//! flag fails here until it has a sample), the point typed from a file holding it differs
//! from the point without it, and the child's command line (`to_argv`) parses back to the
//! same typed value. A flag the experiment refuses must be refused.

use super::*;
use bloatlab_engine::config::Out;
use bloatlab_invoke::server::{child_env, to_argv};
use clap::{Args, FromArgMatches};

fn experiment(text: &str) -> Experiment {
    crate::parse("t.toml", "t", text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The runner's server for a file whose `[server]` is `section`.
fn runner_server(section: &str) -> Result<ServerInvocation, PointError> {
    let exp = experiment(&format!("[server]\n{section}\n[test]\nname = \"rrul\"\n"));
    let point = crate::matrix::points(&exp).remove(0);
    crate::runner::point_server(&exp, &point, 5201)
}

/// What the child resolves its command line and environment to.
fn child_server(s: &ServerInvocation) -> ServerInvocation {
    let argv = to_argv(s);
    let cmd = ServerArgs::augment_args(clap::Command::new("server"));
    let m = cmd
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let (_, key) = child_env(s);
    ServerArgs::from_arg_matches(&m)
        .unwrap()
        .resolve(key.map(str::to_owned))
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

/// `s` with writers that compare equal to `w`'s (writers compare by identity, which no
/// command line carries).
fn same_writers(mut s: ServerInvocation, w: &Out) -> ServerInvocation {
    s.engine.out = w.clone();
    s.engine.err = w.clone();
    s
}

/// `(key, section with it, the same section without it)`: a value other than the
/// flag's default, with the options it needs.
const SERVER_SAMPLES: &[(&str, &str, &str)] = &[
    ("interval", "interval = 0.5", ""),
    ("len", "len = \"64K\"", ""),
    ("window", "window = \"256K\"", ""),
    ("enhanced", "enhanced = true", ""),
    ("tcp-congestion", "tcp-congestion = \"reno\"", ""),
    ("tos", "tos = \"ef\"", ""),
    ("ipv6_domain", "ipv6_domain = true", ""),
    ("bind", "bind = \"10.77.0.2\"", ""),
    ("reportstyle", "reportstyle = \"C\"", ""),
    ("json", "json = true", ""),
    ("rx-copy", "rx-copy = true", ""),
    ("zerocopy", "zerocopy = true", ""),
    ("header-timeout", "header-timeout = 9", ""),
    ("handshake-timeout", "handshake-timeout = 3", ""),
    ("http-wait-max", "http-wait-max = 7", ""),
    ("http-header-timeout", "http-header-timeout = 2.5", ""),
    ("no-reverse", "no-reverse = true", ""),
    ("idle-timeout", "idle-timeout = 30", ""),
    ("first-data-timeout", "first-data-timeout = 2", ""),
    ("max-connections", "max-connections = 12", ""),
    ("max-per-source", "max-per-source = 3", ""),
    ("max-duration", "max-duration = 90", ""),
    ("max-bytes", "max-bytes = \"2G\"", ""),
    ("max-streams", "max-streams = 5", ""),
    ("max-rate", "max-rate = \"100m\"", ""),
    ("max-total-rate", "max-total-rate = \"300m\"", ""),
    ("max-reverse-rate", "max-reverse-rate = \"50m\"", ""),
    (
        "max-total-reverse-rate",
        "max-total-reverse-rate = \"150m\"",
        "",
    ),
    ("max-source-time", "max-source-time = 0", ""),
    (
        "unverified-reverse-rate",
        "unverified-reverse-rate = \"3m\"",
        "",
    ),
    (
        "unverified-reverse-time",
        "unverified-reverse-time = 10",
        "",
    ),
    ("http", "http = 8080", ""),
    ("https", "https = 8443", ""),
    (
        "tls-cert",
        "https = 8443\ntls-cert = \"/etc/c.pem\"\ntls-key = \"/etc/k.pem\"",
        "https = 8443",
    ),
    (
        "tls-key",
        "https = 8443\ntls-cert = \"/etc/c.pem\"\ntls-key = \"/etc/k.pem\"",
        "https = 8443",
    ),
    (
        "results-dir",
        "http = 8080\nresults-dir = \"/var/results\"",
        "http = 8080",
    ),
    ("browser-tests-per-hour", "browser-tests-per-hour = 3", ""),
    ("browser-max-tests", "browser-max-tests = 2", ""),
    ("browser-max-duration", "browser-max-duration = 60", ""),
    ("browser-max-result", "browser-max-result = \"64K\"", ""),
];

/// Flags a `[server]` may not hold (the runner sets them, or they would keep it from
/// talking to the server), with a value that parses.
const SERVER_REFUSED: &[(&str, &str)] = &[
    ("port", "5002"),
    ("one-off", "true"),
    ("udp", "true"),
    ("no-probes", "true"),
    ("no-iperf", "true"),
    ("permit-key", "\"abcd1234\""),
    ("near-congestion", "0.5"),
];

/// The survival check of one section kind. Every long flag of `cmd` is either refused
/// (`refused`: the error names its key and says to leave it out) or has a sample in
/// `samples` whose typed value (`typed`; `own` makes the process-own parts, writers and stop
/// token, compare equal) differs from the same section without it and comes back unchanged
/// from the child's command line (`child`). Every sample must name a flag.
pub(super) fn each_flag_survives<T: Clone + PartialEq + std::fmt::Debug>(
    cmd: &clap::Command,
    refused: &[(&str, &str)],
    samples: &[(&str, &str, &str)],
    typed: impl Fn(&str) -> Result<T, PointError>,
    child: impl Fn(&T) -> (T, Vec<String>),
    own: impl Fn(T) -> T,
) {
    let section = cmd.get_name();
    let mut seen = 0;
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if let Some((_, v)) = refused.iter().find(|(k, _)| *k == long) {
            let e = typed(&format!("{long} = {v}")).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(long), "{e}");
            assert!(e.message.contains("leave it out"), "{e}");
            continue;
        }
        let Some((_, with, without)) = samples.iter().find(|(k, _, _)| *k == long) else {
            panic!("--{long}: add a sample for [{section}] (or refuse it in points::{section})");
        };
        let t = typed(with).unwrap_or_else(|e| panic!("--{long}: {e}"));
        let base = typed(without).unwrap_or_else(|e| panic!("--{long}: {e}"));
        assert_ne!(
            own(t.clone()),
            own(base),
            "--{long} is lost between the file and the typed [{section}]"
        );
        let (back, argv) = child(&t);
        assert_eq!(
            own(back),
            own(t),
            "--{long} is lost between the typed [{section}] and its child: {argv:?}"
        );
        seen += 1;
    }
    assert_eq!(seen, samples.len(), "a sample names no flag");
}

#[test]
fn every_option_a_server_section_can_hold_reaches_the_server_the_runner_starts() {
    let w = &Out::stdout();
    each_flag_survives(
        &ServerArgs::augment_args(clap::Command::new("server")),
        SERVER_REFUSED,
        SERVER_SAMPLES,
        |section| runner_server(section).inspect(|s| assert_eq!(s.engine.port, 5201, "{section}")),
        |s| (child_server(s), to_argv(s)),
        |s| same_writers(s, w),
    );
}

#[test]
fn a_server_section_s_conflicts_name_their_key_and_line() {
    let e = runner_server("enhanced = true\ntls-cert = \"/c.pem\"").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (3, Some("tls-cert")), "{e}");
    assert!(e.message.contains("--tls-cert needs --tls-key"), "{e}");
    let e = runner_server("results-dir = \"/r\"").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("results-dir"), "{e}");
}

/// The runner's run for a file whose `[test]` is `name` and `section`.
fn runner_test(name: &str, section: &str) -> Result<TestInvocation, PointError> {
    let exp = experiment(&format!("[test]\nname = \"{name}\"\n{section}\n"));
    let point = crate::matrix::points(&exp).remove(0);
    crate::points::test_run(&exp, &point, 5201, "/r/p001_r1.json".into(), "t".into())
        .map(|r| r.expect("a [test] point"))
}

/// `(key, test, section with it, the same section without it)`.
const TEST_SAMPLES: &[(&str, &str, &str, &str)] = &[
    ("v6", "rrul46", "v6 = \"fd00:77::2\"", ""),
    ("length", "rrul", "length = 5", ""),
    ("idle", "rrul", "idle = 1", ""),
    ("idle-before", "rrul", "idle-before = 2", ""),
    ("idle-after", "rrul", "idle-after = 3", ""),
    ("cc", "rrul", "cc = \"reno,bbr\"", ""),
    ("markings", "rrul", "markings = \"ef,cs1\"", ""),
    ("flows", "tcp_nup", "flows = 2", ""),
    ("probe-interval", "rrul", "probe-interval = 0.2", ""),
    ("sample-interval", "rrul", "sample-interval = 0.5", ""),
    ("pulses", "one_vs_pulses", "pulses = 3", ""),
    ("pulse-size", "one_vs_pulses", "pulse-size = \"64K\"", ""),
    ("ecn", "rrul", "ecn = \"off\"", ""),
    ("rpm-url", "rpm", "rpm-url = \"nq.example:4443\"", ""),
    ("rpm-port", "rpm", "rpm-port = 9443", ""),
    ("insecure", "rpm", "insecure = true", ""),
    ("ca", "rpm", "ca = \"/etc/ca.pem\"", ""),
    ("fingerprint", "rpm", "fingerprint = \"AB:CD\"", ""),
    ("sequential", "rpm", "sequential = true", ""),
    ("max-connections", "rpm", "max-connections = 4", ""),
    ("rpm-interval", "rpm", "rpm-interval = \"1s\"", ""),
    ("h1", "rpm", "h1 = true", ""),
    ("no-preflight", "rrul", "no-preflight = true", ""),
];

/// Flags a `[test]` may not hold, with a value that parses.
const TEST_REFUSED: &[(&str, &str)] = &[
    ("port", "5002"),
    ("json", "true"),
    ("output", "\"x.json\""),
    ("title", "\"mine\""),
    ("permit-key", "\"abcd1234\""),
    ("list", "true"),
];

#[test]
fn every_option_a_test_section_can_hold_reaches_the_test_the_runner_starts() {
    let cmd = TestArgs::augment_args(clap::Command::new("test"));
    let mut seen = 0;
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        // `--recover` excludes a test's name: clap refuses it before the experiment does.
        if long == "recover" {
            assert!(runner_test("rrul", "recover = \"j\"").is_err());
            continue;
        }
        if let Some((_, v)) = TEST_REFUSED.iter().find(|(k, _)| *k == long) {
            let e = runner_test("rrul", &format!("{long} = {v}")).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(long), "{e}");
            assert!(e.message.contains("leave it out"), "{e}");
            continue;
        }
        let Some((_, name, with, without)) = TEST_SAMPLES.iter().find(|(k, ..)| *k == long) else {
            panic!("--{long}: add a sample to TEST_SAMPLES (or refuse it in points::test)");
        };
        let typed = runner_test(name, with).unwrap_or_else(|e| panic!("--{long}: {e}"));
        let base = runner_test(name, without).unwrap_or_else(|e| panic!("--{long}: {e}"));
        assert_eq!((typed.port, typed.title.as_deref()), (5201, Some("t")));
        assert_ne!(
            typed, base,
            "--{long} is lost between the file and the typed run"
        );
        let argv = typed.to_argv();
        let m = cmd
            .clone()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let back = TestArgs::from_arg_matches(&m).unwrap().invocation();
        assert_eq!(
            back.as_ref(),
            Some(&typed),
            "--{long} is lost between the typed run and its child: {argv:?}"
        );
        seen += 1;
    }
    assert_eq!(seen, TEST_SAMPLES.len(), "a sample names no flag");
}
