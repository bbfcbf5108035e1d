//! `bloatlab test NAME HOST`: the flags of the RRUL family's runs, [`TestArgs::resolve`]d
//! into the suite's [`TestParams`] (defined here, below the suite, so that `suite` and
//! `experiment` both see it), and [`to_argv`] back for a child process.

use crate::client::secs;
use crate::opts;
use bloatlab_engine::config::Bytes as EngineBytes;
use bloatlab_units::tos::{Tos, parse_marking};
use bloatlab_units::{Bytes, CongestionControl};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `bloatlab test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test to run (`--list` shows them): rrul, rrul_be, rrul46, tcp_upload, tcp_download,
    /// tcp_bidirectional, tcp_nup, tcp_ndown, speedtest, ping, one_vs_one, one_vs_pulses, voip,
    /// rpm.
    #[arg(required_unless_present_any = ["list", "recover"])]
    pub name: Option<String>,
    /// Host running `bloatlab server`. Inside a lab (`lab exec`) it defaults to
    /// $BLOATLAB_SERVER.
    pub host: Option<String>,
    /// rrul46: the server's IPv6 address (or a name with one) for the IPv6 half. Default:
    /// HOST's own IPv6 address, else in a lab the one `lab exec` pairs with HOST
    /// ($BLOATLAB_SERVER6).
    #[arg(long = "v6", value_name = "HOST6")]
    pub v6: Option<String>,
    /// Loaded length in seconds (each loaded phase; for `ping`, the whole run).
    #[arg(short = 'l', long = "length", default_value = "60", value_parser = opts::positive_seconds)]
    pub length: Duration,
    /// Idle seconds before and after the load (baseline and recovery).
    #[arg(long = "idle", default_value = "5", value_parser = opts::seconds)]
    pub idle: Duration,
    /// Idle seconds before the load (overrides --idle).
    #[arg(long = "idle-before", value_parser = opts::seconds)]
    pub idle_before: Option<Duration>,
    /// Idle seconds after the load (overrides --idle).
    #[arg(long = "idle-after", value_parser = opts::seconds)]
    pub idle_after: Option<Duration>,
    /// Server port (TCP for the flows, UDP for the probes).
    #[arg(short = 'p', long = "port", default_value_t = 5001)]
    pub port: u16,
    /// Print the results document (JSON) on stdout instead of the summary.
    #[arg(long = "json")]
    pub json: bool,
    /// Results file to write (atomically). Default: bloatlab-TEST-TIME.json here. While
    /// the test runs, FILE.journal records what it has measured (removed once FILE is saved).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Rebuild the results file of a run that died (killed, crashed) from its journal
    /// FILE.json.journal; writes FILE.json (or -o), marked incomplete, and removes the journal.
    #[arg(long = "recover", value_name = "JOURNAL", conflicts_with_all = ["name", "host", "list"])]
    pub recover: Option<PathBuf>,
    /// The server's permit key (`bloatlab server --permit-key=KEY`): sent by every flow
    /// and UDP probe stream of the test.
    /// Or in $BLOATLAB_PERMIT_KEY. The test passes it to its `client` and `ping` children
    /// in that variable, never on their command lines.
    #[arg(long = "permit-key", value_parser = opts::permit_key,
        env = opts::PERMIT_KEY_ENV,
        hide_env_values = true)]
    pub permit_key: Option<String>,
    /// Congestion control per TCP flow, comma-separated, cycled over the flows (e.g. bbr or reno,bbr).
    #[arg(long = "cc", value_delimiter = ',', value_parser = CongestionControl::new)]
    pub cc: Vec<CongestionControl>,
    /// DSCP marking per TCP flow in each direction, comma-separated, cycled (e.g. ef or cs0,cs1,cs5,ef).
    #[arg(long = "markings", alias = "dscp", value_delimiter = ',', value_parser = marking)]
    pub markings: Vec<Tos>,
    /// Flows per direction for tcp_nup, tcp_ndown and speedtest.
    #[arg(long = "flows", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub flows: u32,
    /// Seconds between latency probes of each probe stream (e.g. 0.01 = 100 Hz, 0.2 as flent).
    #[arg(long = "probe-interval", default_value = "0.01", value_parser = opts::positive_seconds)]
    pub probe_interval: Duration,
    /// Throughput sampling interval of the flows, seconds.
    #[arg(long = "sample-interval", default_value = "0.2", value_parser = opts::positive_seconds)]
    pub sample_interval: Duration,
    /// one_vs_pulses: number of sequential uploads.
    #[arg(long = "pulses", default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pulses: u32,
    /// one_vs_pulses: size of each upload (1M = 1 MiB).
    #[arg(long = "pulse-size", default_value = "1M", value_parser = opts::nonzero_bytes)]
    pub pulse_size: EngineBytes,
    /// TCP ECN for the run's connections: `on`, `off` or `mix`. Needs a lab: the test sets
    /// net.ipv4.tcp_ecn of its lab host for the run (the client opens every connection,
    /// so this decides what each flow negotiates) and restores it afterwards. `mix`: the
    /// first flow of each pair per direction asks for ECN (a marked route with
    /// `features ecn`), the other does not.
    #[arg(long = "ecn", value_parser = ecn_mode)]
    pub ecn: Option<EcnMode>,
    /// A title stored in the results file.
    #[arg(long = "title")]
    pub title: Option<String>,
    #[command(flatten)]
    pub rpm: RpmTestArgs,
    /// List the available tests and exit.
    #[arg(long = "list")]
    pub list: bool,
    /// Skip the check that the server answers TCP and probes before the run.
    #[arg(long = "no-preflight", hide = true)]
    pub no_preflight: bool,
}

/// The `rpm` test's options: where the draft's server is and what its `bloatlab rpm`
/// child is given (docs/tests.md, "rpm"). The binary checks them against the rpm
/// client's own rules (a fingerprint's form, a config URL) before a run.
#[derive(Debug, Default, clap::Args)]
pub struct RpmTestArgs {
    /// rpm: the server's config URL (https://HOST:PORT/.well-known/nq) or HOST[:PORT], as
    /// `bloatlab rpm` takes it. Default: https://HOST:8443/.well-known/nq.
    #[arg(
        id = "rpm_url",
        long = "rpm-url",
        value_name = "URL",
        conflicts_with = "rpm_port"
    )]
    pub url: Option<String>,
    /// rpm: the HTTPS port of `bloatlab server --https PORT` on HOST (default 8443).
    #[arg(id = "rpm_port", long = "rpm-port", value_name = "PORT")]
    pub port: Option<u16>,
    /// rpm: accept any certificate.
    #[arg(long = "insecure", group = "rpm_trust")]
    pub insecure: bool,
    /// rpm: trust only the CA certificates in this PEM file.
    #[arg(long = "ca", value_name = "FILE", group = "rpm_trust")]
    pub ca: Option<PathBuf>,
    /// rpm: trust exactly the certificate with this SHA-256 fingerprint (as `bloatlab
    /// server --https` prints it).
    #[arg(long = "fingerprint", value_name = "SHA256", group = "rpm_trust")]
    pub fingerprint: Option<String>,
    /// rpm: download, then upload, each with its own RPM (phases `download` and `upload`).
    #[arg(long = "sequential")]
    pub sequential: bool,
    /// rpm: the draft's MNP, most load connections per direction (default 16).
    #[arg(long = "max-connections", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub max_connections: Option<u16>,
    /// rpm: the draft's ID, the interval of its stability checks (default 5s; 1s as
    /// networkQuality).
    #[arg(id = "rpm_interval", long = "rpm-interval", value_name = "D", value_parser = crate::rpm::duration)]
    pub interval: Option<Duration>,
    /// rpm: HTTP/1.1 instead of HTTP/2.
    #[arg(long = "h1")]
    pub h1: bool,
}

/// What `--ecn` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnMode {
    /// Every connection of the host asks for ECN (`tcp_ecn=1`).
    On,
    /// No connection asks (`tcp_ecn=2`: accept only).
    Off,
    /// Half the load flows ask (the plan's `TcpFlow::ecn`), through a marked route; the
    /// host accepts only.
    Mix,
}

impl EcnMode {
    /// `on`, `off` or `mix`.
    pub fn parse(s: &str) -> Option<EcnMode> {
        match s {
            "on" => Some(EcnMode::On),
            "off" => Some(EcnMode::Off),
            "mix" => Some(EcnMode::Mix),
            _ => None,
        }
    }

    /// The host's `tcp_ecn` during the run: asking (`true`) only with `on`.
    pub fn host_asks(self) -> bool {
        self == EcnMode::On
    }
}

fn ecn_mode(s: &str) -> Result<EcnMode, String> {
    EcnMode::parse(s).ok_or_else(|| format!("{s:?} is not on, off or mix"))
}

fn marking(s: &str) -> Result<Tos, String> {
    parse_marking(s).map_err(|e| e.to_string())
}

/// Knobs of a test run (the command-line options that shape its plan).
#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    /// Loaded length (`-l`), per loaded phase.
    pub loaded: Duration,
    /// Idle time before the load (baseline).
    pub idle_before: Duration,
    /// Idle time after the load (recovery).
    pub idle_after: Duration,
    /// Flows per direction for `tcp_nup`, `tcp_ndown`, `speedtest`.
    pub flows: u32,
    /// Congestion control per TCP flow, cycled over the flows in plan order; empty = the
    /// system default.
    pub cc: Vec<CongestionControl>,
    /// Markings per TCP flow within each direction, cycled; empty = the test's default.
    pub markings: Vec<Tos>,
    /// Time between probes of each probe stream.
    pub probe_interval: Duration,
    /// Throughput sampling interval of the TCP flows (client `-i`).
    pub sample_interval: Duration,
    /// `one_vs_pulses`: number of sequential uploads.
    pub pulses: u32,
    /// `one_vs_pulses`: bytes per pulse.
    pub pulse_size: Bytes,
    /// `--ecn mix`: the first flow of each pair within a direction asks for ECN (the
    /// plan's `TcpFlow::ecn`), the second does not.
    pub ecn_mix: bool,
}

impl Default for TestParams {
    /// flent's defaults: 60 s loaded, 5 s idle either side; 100 Hz probes; 0.2 s
    /// throughput samples (flent's STEP_SIZE); 4 flows; 40 × 1 MiB pulses. The flags'
    /// defaults are these (a test below checks it).
    fn default() -> Self {
        TestParams {
            loaded: Duration::from_secs(60),
            idle_before: Duration::from_secs(5),
            idle_after: Duration::from_secs(5),
            flows: 4,
            cc: Vec::new(),
            markings: Vec::new(),
            probe_interval: Duration::from_millis(10),
            sample_interval: Duration::from_millis(200),
            pulses: 40,
            pulse_size: Bytes(1 << 20),
            ecn_mix: false,
        }
    }
}

impl TestArgs {
    /// The plan's knobs. Every value was checked by its parser; the checks that need the
    /// test's name (`suite::plan`) come after.
    pub fn resolve(&self) -> TestParams {
        TestParams {
            loaded: self.length,
            idle_before: self.idle_before.unwrap_or(self.idle),
            idle_after: self.idle_after.unwrap_or(self.idle),
            flows: self.flows,
            cc: self.cc.clone(),
            markings: self.markings.clone(),
            probe_interval: self.probe_interval,
            sample_interval: self.sample_interval,
            pulses: self.pulses,
            pulse_size: Bytes(self.pulse_size.0),
            ecn_mix: self.ecn == Some(EcnMode::Mix),
        }
    }
}

/// The `bloatlab test NAME HOST` command line (after the program name) whose
/// [`TestArgs::resolve`] is `p`. Values are written in plain units (decimal seconds,
/// bytes, TOS bytes) that the flags read back exactly; options at their defaults are
/// left out. `ecn_mix` is written as `--ecn mix`; `--ecn on|off`, which leave the plan
/// alone, are the caller's to add.
pub fn to_argv(test: &str, host: &str, p: &TestParams) -> Vec<String> {
    let mut a = vec!["test".to_owned(), test.to_owned(), host.to_owned()];
    push_params(&mut a, p);
    if p.ecn_mix {
        a.extend(["--ecn".to_owned(), "mix".to_owned()]);
    }
    a
}

/// Appends the flags of `p` that differ from the defaults (all but `ecn_mix`, which is
/// `--ecn`'s).
fn push_params(a: &mut Vec<String>, p: &TestParams) {
    let d = TestParams::default();
    let mut opt = |on: bool, flag: &str, value: String| {
        if on {
            a.extend([flag.to_owned(), value]);
        }
    };
    opt(p.loaded != d.loaded, "-l", secs(p.loaded));
    opt(
        p.idle_before != d.idle_before,
        "--idle-before",
        secs(p.idle_before),
    );
    opt(
        p.idle_after != d.idle_after,
        "--idle-after",
        secs(p.idle_after),
    );
    opt(p.flows != d.flows, "--flows", p.flows.to_string());
    let join = |v: Vec<String>| v.join(",");
    opt(
        !p.cc.is_empty(),
        "--cc",
        join(p.cc.iter().map(ToString::to_string).collect()),
    );
    opt(
        !p.markings.is_empty(),
        "--markings",
        join(p.markings.iter().map(|t| t.to_arg()).collect()),
    );
    opt(
        p.probe_interval != d.probe_interval,
        "--probe-interval",
        secs(p.probe_interval),
    );
    opt(
        p.sample_interval != d.sample_interval,
        "--sample-interval",
        secs(p.sample_interval),
    );
    opt(p.pulses != d.pulses, "--pulses", p.pulses.to_string());
    opt(
        p.pulse_size != d.pulse_size,
        "--pulse-size",
        p.pulse_size.0.to_string(),
    );
}

mod invocation;
mod rpm_options;
pub use invocation::{TestInvocation, child_env};
pub use rpm_options::RpmTestOptions;

#[cfg(test)]
mod tests;
