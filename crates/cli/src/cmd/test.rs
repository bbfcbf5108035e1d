//! `bloatlab test NAME HOST`: the RRUL family and friends (crates/suite, docs/tests.md).
//!
//! Runs the test's flows and probes as subprocesses of this binary, prints the per-phase
//! summary (or, with `--json`, the results document) and writes the results file
//! atomically. Ctrl-C stops the runners, saves what was measured (marked interrupted)
//! and exits non-zero.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bloatlab_suite::ecn::EcnMode;
use bloatlab_suite::{RunConfig, RunError, Target, TestName, TestParams, Tos};

use crate::cmd::opts;
use crate::exit;

/// Arguments of `bloatlab test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test to run (`--list` shows them): rrul, rrul_be, tcp_upload, tcp_download,
    /// tcp_bidirectional, tcp_nup, tcp_ndown, speedtest, ping, one_vs_one, one_vs_pulses, voip.
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// Host running `bloatlab server`.
    #[arg(required_unless_present = "list")]
    pub host: Option<String>,
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
    /// Results file to write (atomically). Default: bloatlab-TEST-TIME.json here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Congestion control per TCP flow, comma-separated, cycled over the flows (e.g. bbr or reno,bbr).
    #[arg(long = "cc", value_delimiter = ',', value_parser = opts::congestion)]
    pub cc: Vec<String>,
    /// DSCP marking per TCP flow in each direction, comma-separated, cycled (e.g. ef or cs0,cs1,cs5,ef).
    #[arg(long = "markings", alias = "dscp", value_delimiter = ',', value_parser = marking)]
    pub markings: Vec<Tos>,
    /// Flows per direction for tcp_nup, tcp_ndown and speedtest.
    #[arg(long = "flows", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub flows: u32,
    /// Time between latency probes of each probe stream (e.g. 10ms = 100 Hz, 200ms as flent).
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
    pub pulse_size: bloatlab_engine::config::Bytes,
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
    /// List the available tests and exit.
    #[arg(long = "list")]
    pub list: bool,
    /// Skip the check that the server answers TCP and probes before the run.
    #[arg(long = "no-preflight", hide = true)]
    pub no_preflight: bool,
}

fn ecn_mode(s: &str) -> Result<EcnMode, String> {
    EcnMode::parse(s).ok_or_else(|| format!("{s:?} is not on, off or mix"))
}

fn marking(s: &str) -> Result<Tos, String> {
    bloatlab_suite::parse_marking(s).map_err(|e| e.to_string())
}

/// SIGINT/SIGTERM raise the returned token: stop and keep what was measured.
fn install_stop_handler() -> anyhow::Result<bloatlab_os::StopToken> {
    bloatlab_os::StopToken::on_signals(&bloatlab_os::stop::INTERRUPT)
        .context("cannot install the SIGINT/SIGTERM handlers")
}

impl TestArgs {
    pub(crate) fn params(&self) -> TestParams {
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
            pulse_size: bloatlab_units::Bytes(self.pulse_size.0),
            ecn_mix: self.ecn == Some(EcnMode::Mix),
        }
    }
}

fn map_run_error(e: RunError) -> anyhow::Error {
    match e {
        RunError::Plan(p) => exit::usage(p.to_string()),
        e @ RunError::EcnNeedsLab => exit::usage(e.to_string()),
        e => anyhow::Error::new(e),
    }
}

fn default_output(test: TestName) -> PathBuf {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H%M%SZ")
        .to_string();
    PathBuf::from(format!("bloatlab-{test}-{now}.json"))
}

/// Runs `bloatlab test`.
pub fn run(args: TestArgs) -> anyhow::Result<()> {
    if args.list {
        println!("{}", bloatlab_suite::list_tests());
        return Ok(());
    }
    let name = args.name.as_deref().unwrap_or_default();
    let test: TestName = name
        .parse()
        .map_err(|e: bloatlab_suite::UnknownTest| exit::usage(e.to_string()))?;
    let host = args.host.clone().unwrap_or_default();
    let params = args.params();
    bloatlab_suite::plan(test, &params).map_err(|e| exit::usage(e.to_string()))?;
    // Check the output path before any traffic: an unwritable directory must not
    // cost a whole run (issue 11).
    let path = args.output.clone().unwrap_or_else(|| default_output(test));
    check_writable(&path)?;
    let exe = std::env::current_exe().context("cannot find the bloatlab executable")?;
    let cfg = RunConfig {
        test,
        params,
        target: Target {
            exe,
            host,
            port: args.port,
            ecn_fwmark: None,
        },
        command_line: std::env::args().collect(),
        title: args.title.clone(),
        preflight: !args.no_preflight,
        lab: bloatlab_suite::lab::LabContext::from_env(),
        ecn: args.ecn,
    };
    let stop = install_stop_handler()?;
    let show_progress = !args.json && std::io::stderr().is_terminal();
    let outcome = bloatlab_suite::run(&cfg, stop.flag(), |now, total| {
        if show_progress {
            eprint!("\r{} ", progress_line(&test.to_string(), now, total));
            let _ = std::io::stderr().flush();
        }
    })
    .map_err(map_run_error)?;
    if show_progress {
        eprintln!();
    }
    // --json goes to stdout first: it never depends on the save.
    if args.json {
        let bytes = bloatlab_results::to_vec(&outcome.file).context("serialising the results")?;
        let mut out = std::io::stdout().lock();
        out.write_all(&bytes)?;
        if !bytes.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    if let Err(e) = bloatlab_results::save(&path, &outcome.file) {
        // The directory was writable before the run; keep the data anyway.
        let rescue = std::env::temp_dir().join(
            path.file_name()
                .map_or_else(|| "bloatlab-results.json".into(), |n| n.to_owned()),
        );
        let saved = bloatlab_results::save(&rescue, &outcome.file).is_ok();
        return Err(anyhow::Error::new(e).context(if saved {
            format!(
                "cannot write the results file {}; saved it as {} instead",
                path.display(),
                rescue.display()
            )
        } else {
            format!("cannot write the results file {}", path.display())
        }));
    }
    if !args.json {
        print!("{}", bloatlab_suite::summary::render(&outcome));
        println!("results written to {}", path.display());
    }
    if outcome.interrupted() {
        return Err(anyhow::anyhow!(
            "interrupted; what was measured is saved (marked interrupted) in {}",
            path.display()
        ));
    }
    Ok(())
}

/// Fails with a usage error (exit 2) unless a file can be created next to
/// `path` (where the atomic save puts its temporary file) and `path` is not a
/// directory.
fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| exit::usage(format!("-o/--output {}: not a file name", path.display())))?;
    let probe = dir.join(format!(
        ".{}.{}.check",
        name.to_string_lossy(),
        std::process::id()
    ));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match created {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
        }
        Err(e) => {
            return Err(exit::usage(format!(
                "-o/--output {}: cannot create files in {}: {e} (checked before the run)",
                path.display(),
                dir.display()
            )));
        }
    }
    // The save renames a temporary file over `path`: that needs the directory
    // (checked above), and `path` not to be a directory.
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(exit::usage(format!(
            "-o/--output {}: is a directory (checked before the run)",
            path.display()
        )));
    }
    Ok(())
}

/// `rrul [########............]  12.3 / 70.0 s`: the terminal progress bar.
fn progress_line(test: &str, now: Duration, total: Duration) -> String {
    const WIDTH: usize = 30;
    let frac = if total.is_zero() {
        1.0
    } else {
        (now.as_secs_f64() / total.as_secs_f64()).clamp(0.0, 1.0)
    };
    let done = (frac * WIDTH as f64).round() as usize;
    format!(
        "{test} [{}{}] {:>6.1} / {:.1} s",
        "#".repeat(done),
        ".".repeat(WIDTH - done),
        now.as_secs_f64(),
        total.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bar_fills_with_elapsed_time_and_never_overflows() {
        let total = Duration::from_secs(70);
        assert_eq!(
            progress_line("rrul", Duration::ZERO, total),
            format!("rrul [{}]    0.0 / 70.0 s", ".".repeat(30))
        );
        let half = progress_line("rrul", Duration::from_secs(35), total);
        assert!(
            half.contains(&format!("[{}{}]", "#".repeat(15), ".".repeat(15))),
            "{half}"
        );
        let over = progress_line("rrul", Duration::from_secs(99), total);
        assert!(over.contains(&format!("[{}]", "#".repeat(30))), "{over}");
        assert!(progress_line("x", Duration::ZERO, Duration::ZERO).contains(&"#".repeat(30)));
    }
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: TestArgs,
    }

    fn parse(argv: &[&str]) -> Result<TestArgs, String> {
        Cli::try_parse_from(std::iter::once("test").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_flent_s() {
        let a = parse(&["rrul", "h"]).unwrap();
        let p = a.params();
        assert_eq!(p.loaded, Duration::from_secs(60));
        assert_eq!(
            (p.idle_before, p.idle_after),
            (Duration::from_secs(5), Duration::from_secs(5))
        );
        assert_eq!(a.port, 5001);
        assert_eq!(p.flows, 4);
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
        let p = a.params();
        assert_eq!(p.loaded, Duration::from_secs(2));
        assert_eq!(
            (p.idle_before, p.idle_after),
            (Duration::from_secs(1), Duration::ZERO)
        );
        assert_eq!(p.cc, ["reno", "bbr"]);
        assert_eq!(p.markings, [Tos::EF, Tos::CS1]);
        assert_eq!((p.flows, a.port), (3, 6000));
    }

    #[test]
    fn bad_values_name_the_option() {
        assert!(
            parse(&["rrul", "h", "-l", "0"])
                .unwrap_err()
                .contains("--length")
        );
        assert!(
            parse(&["rrul", "h", "--markings", "cs9"])
                .unwrap_err()
                .contains("--markings")
        );
        assert!(
            parse(&["rrul", "h", "--flows", "0"])
                .unwrap_err()
                .contains("--flows")
        );
        assert!(parse(&["--list"]).is_ok());
        let e = parse(&["rrul", "h", "--ecn", "maybe"]).unwrap_err();
        assert!(e.contains("--ecn") && e.contains("maybe"), "{e}");
        assert_eq!(
            parse(&["rrul", "h", "--ecn", "on"]).unwrap().ecn,
            Some(EcnMode::On)
        );
        let mix = parse(&["rrul", "h", "--ecn", "mix"]).unwrap();
        assert_eq!(mix.ecn, Some(EcnMode::Mix));
        assert!(mix.params().ecn_mix);
    }
}
