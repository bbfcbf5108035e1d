//! `bloatlab test NAME HOST`: the RRUL family and friends (crates/suite, docs/tests.md).
//!
//! Runs the test's flows and probes as subprocesses of this binary, prints the per-phase
//! summary (or, with `--json`, the results document) and writes the results file
//! atomically. Ctrl-C stops the runners, saves what was measured (marked interrupted)
//! and exits non-zero. While it runs, `FILE.journal` holds what it has learnt
//! (`bloatlab_suite::journal`); `--recover FILE.journal` rebuilds a run that died.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use bloatlab_suite::journal::{self, JournalWriter};
use bloatlab_suite::{RpmClient, RunConfig, RunError, RunOutcome, Target, TestName};

use crate::exit;

use bloatlab_invoke::test::RpmTestOptions;
/// The flags of `bloatlab test`, defined once in `bloatlab_invoke::test` (the experiment
/// crate checks its points with them too).
pub use bloatlab_invoke::test::TestArgs;
use bloatlab_rpm::client::Trust;

/// The `bloatlab rpm` child's URL and options; exit 2 for a bad value, or for an
/// option given to a test other than `rpm`.
fn rpm_client(rpm: &RpmTestOptions, test: TestName) -> anyhow::Result<RpmClient> {
    match &rpm.trust {
        Trust::Ca(ca) if !ca.is_file() => {
            return Err(exit::usage(format!(
                "--ca {}: no such file (a PEM file of CA certificates)",
                ca.display()
            )));
        }
        Trust::Fingerprint(fp) => {
            bloatlab_rpm::client::tls::normalize_fingerprint(fp)
                .map_err(|e| exit::usage(format!("--fingerprint: {e}")))?;
        }
        _ => {}
    }
    let url = match &rpm.url {
        Some(u) => {
            let uri = bloatlab_rpm::config::config_url(u)
                .map_err(|e| exit::usage(format!("--rpm-url: {e}")))?;
            Some(uri.to_string())
        }
        None => None,
    };
    let given = rpm.given();
    if test != TestName::Rpm && !given.is_empty() {
        return Err(exit::usage(format!(
            "{} {} for the rpm test (the draft's responsiveness run); {test} does not run it",
            given.join(", "),
            if given.len() > 1 { "are" } else { "is" }
        )));
    }
    Ok(RpmClient {
        url,
        port: rpm.port.unwrap_or(bloatlab_suite::driver::DEFAULT_RPM_PORT),
        options: rpm.clone(),
    })
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
    if let Some(journal) = &args.recover {
        return recover(journal, args.output.as_deref(), args.json);
    }
    // Neither --list nor --recover: clap required NAME.
    let Some(run) = args.invocation() else {
        return Err(exit::usage(
            "NAME is required (the test to run; --list shows them)",
        ));
    };
    let test: TestName = run
        .test
        .parse()
        .map_err(|e: bloatlab_suite::UnknownTest| exit::usage(e.to_string()))?;
    let host = match &run.host {
        Some(h) => h.clone(),
        None => match bloatlab_lab::LabEnv::from_env().addr("server") {
            Some(addr) => addr.to_string(),
            None => {
                return Err(exit::usage(
                    "HOST is required (the host running `bloatlab server`); inside a lab, \
                     `lab exec` sets BLOATLAB_SERVER, which is the default",
                ));
            }
        },
    };
    bloatlab_suite::plan(test, &run.params).map_err(|e| exit::usage(e.to_string()))?;
    let rpm = rpm_client(&run.rpm, test)?;
    let (host, host6) = endpoints(test, host, run.v6.as_deref())?;
    // Check the output path before any traffic: an unwritable directory must not
    // cost a whole run (issue 11).
    let path = run.output.clone().unwrap_or_else(|| default_output(test));
    check_writable(&path)?;
    // Inside a lab, a dead emulator ends the run before it starts (and after it ends).
    let lab = crate::cmd::inlab::InLab::start()?;
    let mut journal = open_journal(&path)?;
    let exe = std::env::current_exe().context("cannot find the bloatlab executable")?;
    let cfg = RunConfig {
        test,
        params: run.params.clone(),
        target: Target {
            exe,
            host,
            host6,
            port: run.port,
            permit_key: run.permit_key.clone(),
            ecn_fwmark: None,
            rpm,
        },
        command_line: redact_key(std::env::args()),
        title: run.title.clone(),
        preflight: run.preflight,
        lab: bloatlab_suite::lab::LabContext::from_env(),
        ecn: run.ecn,
    };
    let stop = crate::cmd::stop_on_interrupt()?;
    let show_progress = !run.json && std::io::stderr().is_terminal();
    let outcome =
        bloatlab_suite::run_journaled(&cfg, stop.flag(), Some(&mut journal), |now, total| {
            if show_progress {
                eprint!("\r{} ", progress_line(&test.to_string(), now, total));
                let _ = std::io::stderr().flush();
            }
        });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // Nothing was measured (no server, every flow failed): nothing to recover.
            let _ = journal.remove();
            // A lab emulator that died is the cause of whatever failed.
            lab.check()?;
            return Err(map_run_error(e));
        }
    };
    if show_progress {
        eprintln!();
    }
    finish(&path, &outcome, run.json, Some(journal))?;
    lab.check()?;
    if outcome.interrupted() {
        return Err(anyhow::anyhow!(
            "interrupted; what was measured is saved (marked interrupted) in {}",
            path.display()
        ));
    }
    Ok(())
}

/// Creates the run's journal next to `path` before any traffic (exit 2 if it cannot be,
/// or if one is left from a run that died: that is data to recover first).
fn open_journal(path: &Path) -> anyhow::Result<JournalWriter> {
    let jpath = journal::path_for(path);
    JournalWriter::create(&jpath).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            exit::usage(format!(
                "{} exists: a run that wrote {} died before saving it. Recover it with \
                 `bloatlab test --recover {}` (or remove it) first",
                jpath.display(),
                path.display(),
                jpath.display()
            ))
        } else {
            exit::usage(format!(
                "-o/--output {}: cannot create its journal {}: {e} (checked before the run)",
                path.display(),
                jpath.display()
            ))
        }
    })
}

/// `--json` on stdout (first: it never depends on the save), the atomic save, then the
/// journal's removal (it is kept when the save fails), then the summary.
/// Where a results file goes when `path` cannot be written (its directory was removed
/// mid-run, the disk filled): `$TMPDIR/bloatlab-rescue-PID-NAME`, unique to this process so
/// it never replaces another run's file.
fn rescue_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(
        || "results.json".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    std::env::temp_dir().join(format!("bloatlab-rescue-{}-{name}", std::process::id()))
}

fn finish(
    path: &Path,
    outcome: &RunOutcome,
    json: bool,
    journal: Option<JournalWriter>,
) -> anyhow::Result<()> {
    if json {
        let bytes = bloatlab_results::to_vec(&outcome.file).context("serialising the results")?;
        let mut out = std::io::stdout().lock();
        out.write_all(&bytes)?;
        if !bytes.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    if let Err(e) = bloatlab_results::save(path, &outcome.file) {
        // The directory was writable before the run (it may have been removed since):
        // keep the data anyway, under a name no other run uses.
        let rescue = rescue_path(path);
        let saved = bloatlab_results::save(&rescue, &outcome.file).is_ok();
        let kept = journal
            .as_ref()
            .filter(|j| j.path().exists())
            .map(|j| format!("; the journal {} is kept", j.path().display()))
            .unwrap_or_default();
        // Name the cause a user can act on: the directory went away during the run.
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let gone = if dir.is_dir() {
            String::new()
        } else {
            format!(
                " (its directory {} was removed during the run)",
                dir.display()
            )
        };
        return Err(anyhow::Error::new(e).context(if saved {
            format!(
                "cannot write the results file {}{gone}; the run's results were saved to {} \
                 instead{kept}",
                path.display(),
                rescue.display()
            )
        } else {
            format!(
                "cannot write the results file {}{gone}{kept}",
                path.display()
            )
        }));
    }
    if let Some(j) = journal
        && let Err(e) = j.remove()
    {
        tracing::warn!("results saved, but the journal could not be removed: {e}");
    }
    if !json {
        print!("{}", bloatlab_suite::summary::render(outcome));
        println!("results written to {}", path.display());
    }
    Ok(())
}

/// `bloatlab test --recover JOURNAL [-o FILE]`: the results file of a run that died,
/// rebuilt from its journal and marked incomplete; the journal is removed once saved.
fn recover(jpath: &Path, output: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let path = match output {
        Some(p) => p.to_owned(),
        None => jpath
            .to_str()
            .and_then(|s| s.strip_suffix(journal::SUFFIX))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                exit::usage(format!(
                    "--recover {}: the name does not end in {}; say where the results go with -o FILE",
                    jpath.display(),
                    journal::SUFFIX
                ))
            })?,
    };
    if path.exists() {
        return Err(exit::usage(format!(
            "{} exists; recover into another file with -o FILE",
            path.display()
        )));
    }
    check_writable(&path)?;
    let j = journal::read(jpath)
        .map_err(|e| exit::usage(format!("--recover {}: {e}", jpath.display())))?;
    let exe = std::env::current_exe().context("cannot find the bloatlab executable")?;
    let cfg = journal::config(&j, exe)
        .map_err(|e| exit::usage(format!("--recover {}: {e}", jpath.display())))?;
    let outcome = bloatlab_suite::recover(&cfg, &j).map_err(map_run_error)?;
    finish(&path, &outcome, json, None)?;
    if let Err(e) = journal::remove(jpath) {
        tracing::warn!("recovered, but the journal could not be removed: {e}");
    }
    if !json {
        println!("recovered from {} (removed)", jpath.display());
    }
    Ok(())
}

/// The server's address per family: a dual-stack test (`rrul46`) settles an IPv4 and
/// an IPv6 address before any traffic (crates/suite/src/endpoints.rs); other tests take
/// HOST as given and refuse `--v6`.
fn endpoints(
    test: TestName,
    host: String,
    v6: Option<&str>,
) -> anyhow::Result<(String, Option<String>)> {
    if !test.dual_stack() {
        return match v6 {
            Some(_) => Err(exit::usage(format!(
                "--v6 is for tests over both IP families (rrul46); {test} runs over HOST's \
                 family only (give HOST as an IPv6 address to run it over IPv6)"
            ))),
            None => Ok((host, None)),
        };
    }
    let d = bloatlab_suite::endpoints::dual_stack(test.as_str(), &host, v6)
        .map_err(|e| exit::usage(e.to_string()))?;
    Ok((d.v4.to_string(), Some(d.v6.to_string())))
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

/// The command line as recorded in results files and journals, which get shared: the
/// permit key is a secret, so its value is replaced.
fn redact_key(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in args {
        if out.last().is_some_and(|p| p == "--permit-key") {
            out.push("REDACTED".into());
        } else if a.starts_with("--permit-key=") {
            out.push("--permit-key=REDACTED".into());
        } else {
            out.push(a);
        }
    }
    out
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
    use bloatlab_suite::ecn::EcnMode;

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
    fn the_permit_key_is_not_recorded() {
        let argv = [
            "bloatlab",
            "test",
            "rrul",
            "h",
            "--permit-key",
            "sekrit12",
            "--permit-key=sekrit34",
        ];
        let got = redact_key(argv.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            [
                "bloatlab",
                "test",
                "rrul",
                "h",
                "--permit-key",
                "REDACTED",
                "--permit-key=REDACTED"
            ]
        );
        let a = parse(&["rrul", "h", "--permit-key", "sekrit12"]).unwrap();
        assert_eq!(a.permit_key.as_deref(), Some("sekrit12"));
        assert!(
            parse(&["rrul", "h", "--permit-key=abc"])
                .unwrap_err()
                .contains("--permit-key")
        );
        let r = parse(&["--recover", "x.json.journal"]).unwrap();
        assert!(r.recover.is_some() && r.name.is_none());
        assert!(parse(&["rrul", "h", "--recover", "x.json.journal"]).is_err());
    }

    #[test]
    fn v6_is_refused_outside_dual_stack_tests_and_resolved_for_rrul46() {
        let e = endpoints(TestName::Rrul, "10.0.0.2".into(), Some("fd00::2")).unwrap_err();
        assert!(e.to_string().contains("--v6"), "{e}");
        assert_eq!(
            endpoints(TestName::Rrul, "10.0.0.2".into(), None).unwrap(),
            ("10.0.0.2".into(), None)
        );
        assert_eq!(
            endpoints(TestName::Rrul46, "10.0.0.2".into(), Some("[fd00::2]")).unwrap(),
            ("10.0.0.2".into(), Some("fd00::2".into()))
        );
    }

    #[test]
    fn rpm_options_reach_the_drafts_client_and_only_the_rpm_test_takes_them() {
        let a = parse(&["rpm", "10.0.0.2"]).unwrap();
        let c = rpm_client(&a.rpm.resolve(), TestName::Rpm).unwrap();
        assert_eq!(
            c,
            RpmClient {
                url: None,
                port: 8443,
                options: RpmTestOptions::default()
            }
        );
        let a = parse(&[
            "rpm",
            "10.0.0.2",
            "--rpm-port",
            "9443",
            "--insecure",
            "--sequential",
            "--max-connections",
            "4",
            "--rpm-interval",
            "1s",
            "--h1",
        ])
        .unwrap();
        let c = rpm_client(&a.rpm.resolve(), TestName::Rpm).unwrap();
        assert_eq!(c.port, 9443);
        assert_eq!(
            c.options,
            RpmTestOptions {
                url: None,
                port: Some(9443),
                trust: Trust::Insecure,
                mode: bloatlab_rpm::client::Mode::Sequential,
                protocol: bloatlab_rpm::client::Protocol::H1,
                max_connections: Some(4),
                interval: Some(Duration::from_secs(1)),
            }
        );
        let a = parse(&["rpm", "h", "--rpm-url", "nq.example:4443"]).unwrap();
        assert_eq!(
            rpm_client(&a.rpm.resolve(), TestName::Rpm)
                .unwrap()
                .url
                .as_deref(),
            Some("https://nq.example:4443/.well-known/nq")
        );
        // Refused: both a URL and a port, two trusts, a bad fingerprint, a missing CA
        // file, a bad URL, and rpm options on another test.
        assert!(parse(&["rpm", "h", "--rpm-url", "x", "--rpm-port", "1"]).is_err());
        assert!(parse(&["rpm", "h", "--insecure", "--fingerprint", "AB"]).is_err());
        assert!(parse(&["rpm", "h", "--max-connections", "0"]).is_err());
        let client = |argv: &[&str], t| {
            rpm_client(&parse(argv).unwrap().rpm.resolve(), t)
                .unwrap_err()
                .to_string()
        };
        assert!(
            client(&["rpm", "h", "--fingerprint", "AB:CD"], TestName::Rpm)
                .contains("--fingerprint")
        );
        assert!(client(&["rpm", "h", "--ca", "/nonexistent.pem"], TestName::Rpm).contains("--ca"));
        assert!(
            client(&["rpm", "h", "--rpm-url", "ftp://h/"], TestName::Rpm).contains("--rpm-url")
        );
        let e = client(
            &["rrul", "h", "--insecure", "--rpm-port", "1"],
            TestName::Rrul,
        );
        assert!(
            e.contains("--insecure, --rpm-port are for the rpm test"),
            "{e}"
        );
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
        assert_eq!(
            parse(&["rrul46", "10.0.0.2", "--v6", "fd00::2"])
                .unwrap()
                .v6
                .as_deref(),
            Some("fd00::2")
        );
        let e = parse(&["rrul", "h", "--ecn", "maybe"]).unwrap_err();
        assert!(e.contains("--ecn") && e.contains("maybe"), "{e}");
        assert_eq!(
            parse(&["rrul", "h", "--ecn", "on"]).unwrap().ecn,
            Some(EcnMode::On)
        );
        let mix = parse(&["rrul", "h", "--ecn", "mix"]).unwrap();
        assert_eq!(mix.ecn, Some(EcnMode::Mix));
        assert!(mix.resolve().ecn_mix);
    }
}
