//! Every option a `[client]` section can hold reaches the `bloatlab client` the runner
//! starts (report1's kind of point): for each flag `client` defines (read from its clap
//! definition, so a new flag fails here until it has a sample), the point typed from a
//! file holding it differs from the point without it, and the child's command line
//! (`to_argv`) parses back to the same typed value. A flag the experiment refuses must be
//! refused.

use super::*;
use bloatlab_invoke::client::to_argv;
use clap::{Args, FromArgMatches};

/// The runner's client for a file whose `[client]` is `section`.
fn runner_client(section: &str) -> Result<ClientConfig, PointError> {
    let exp = crate::parse("t.toml", "t", &format!("[client]\n{section}\n"))
        .unwrap_or_else(|e| panic!("{section}: {e}"));
    let point = crate::matrix::points(&exp).remove(0);
    Ok(client_run(&exp, &point, 5201)?.expect("a [client] point"))
}

/// What the child resolves its command line to (no key: the experiment's server has none).
fn child_client(c: &ClientConfig) -> ClientConfig {
    let argv = to_argv(c);
    let cmd = ClientArgs::augment_args(clap::Command::new("client"));
    let m = cmd
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    ClientArgs::from_arg_matches(&m)
        .unwrap()
        .resolve(None)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

/// `c` with the process-own parts (stop token, writers; compared by identity) of `like`.
fn same_own(mut c: ClientConfig, like: &ClientConfig) -> ClientConfig {
    c.stop = like.stop.clone();
    c.out = like.out.clone();
    c.err = like.err.clone();
    c
}

/// `(key, section with it, the same section without it)`: a value other than the
/// flag's default, with the options it needs.
const CLIENT_SAMPLES: &[(&str, &str, &str)] = &[
    ("interval", "interval = 0.5", ""),
    ("len", "len = \"64K\"", ""),
    ("window", "window = \"256K\"", ""),
    ("enhanced", "enhanced = true", ""),
    ("tcp-congestion", "tcp-congestion = \"reno\"", ""),
    ("tos", "tos = \"ef\"", ""),
    ("bind", "bind = \"10.77.0.1\"", ""),
    ("rx-copy", "rx-copy = true", ""),
    ("zerocopy", "zerocopy = true", ""),
    ("time", "time = 7", ""),
    ("num", "num = \"10M\"", ""),
    ("parallel", "parallel = 3", ""),
    ("bandwidth", "bandwidth = \"50m\"", ""),
    ("reverse", "reverse = true", ""),
    ("full-duplex", "full-duplex = true", ""),
    ("trip-times", "trip-times = true", ""),
    (
        "near-congestion",
        "trip-times = true\nnear-congestion = 0.5",
        "trip-times = true",
    ),
    ("nodelay", "nodelay = true", ""),
    ("peer-detect", "peer-detect = true", ""),
    ("notsent-lowat", "notsent-lowat = \"16K\"", ""),
    ("abort-at-end", "abort-at-end = true", ""),
    ("fwmark", "fwmark = 7", ""),
    ("connect-timeout", "connect-timeout = 3", ""),
];

/// Flags a `[client]` may not hold (the runner sets them, or they would keep it from
/// reading the client's document), with a value that parses.
const CLIENT_REFUSED: &[(&str, &str)] = &[
    ("port", "5002"),
    ("udp", "true"),
    ("json", "true"),
    ("reportstyle", "\"C\""),
    ("permit-key", "\"abcd1234\""),
    // `-V` with the lab's IPv4 server address could not connect.
    ("ipv6_domain", "true"),
];

#[test]
fn every_option_a_client_section_can_hold_reaches_the_client_the_runner_starts() {
    let like = runner_client("").unwrap();
    super::survival_tests::each_flag_survives(
        &ClientArgs::augment_args(clap::Command::new("client")),
        CLIENT_REFUSED,
        CLIENT_SAMPLES,
        |section| {
            runner_client(section).inspect(|c| {
                assert_eq!((c.port, c.format), (5201, OutputFormat::Json), "{section}");
            })
        },
        |c| (child_client(c), to_argv(c)),
        |c| same_own(c, &like),
    );
}
