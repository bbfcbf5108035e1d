//! `bloatlab experiment`: run an experiment declared in a TOML file (crates/experiment,
//! docs/experiments.md), list its points, or merge shard directories.
//!
//! Before anything starts, the file is parsed and every point's `lab up` and `test` options
//! are checked exactly as those commands would check them; a problem is reported with the
//! key and the file line, exit 2.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bloatlab_experiment::matrix::{self, Section, Shard};
use bloatlab_experiment::runner::{self, Event, RunStatus, RunnerConfig};
use bloatlab_experiment::{Experiment, summary};
use clap::{Args, FromArgMatches, Subcommand};

use crate::exit::{self, Exit};

/// Arguments of `bloatlab experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    #[command(subcommand)]
    cmd: ExperimentCmd,
}

#[derive(Debug, Subcommand)]
enum ExperimentCmd {
    /// Run (or resume) the experiment in FILE.toml; results go to DIR (needs root).
    Run(RunArgs),
    /// Join the output directories of shards into one summary and report.
    Merge(MergeArgs),
    /// List the built-in experiments (the field reports).
    List,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The experiment file (TOML), or the name of a built-in (`experiment list`).
    file: PathBuf,
    /// The experiment's `[quick]` variant (shorter runs, maybe fewer points); without a
    /// `[quick]` section: 2 s loaded, 0.5 s idle, 3 pulses, one repetition (a smoke test).
    #[arg(long = "quick")]
    quick: bool,
    /// Output directory: results files, summary.csv, summary.json, report.html. Running
    /// again with the same DIR resumes: complete runs are kept.
    #[arg(
        short = 'o',
        long = "out",
        value_name = "DIR",
        required_unless_present = "list_points"
    )]
    out: Option<PathBuf>,
    /// Run only shard K of N (0 <= K < N): the points whose number is K modulo N.
    #[arg(long = "shard", value_name = "K/N")]
    shard: Option<Shard>,
    /// Print the runs (of the shard) and exit without running anything.
    #[arg(long = "list-points")]
    list_points: bool,
    /// Server port inside the lab.
    #[arg(long = "port", default_value_t = 5001, hide = true)]
    port: u16,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// Shard output directories.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where the merged summary.csv, summary.json and report.html go.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: ExperimentArgs) -> anyhow::Result<()> {
    match args.cmd {
        ExperimentCmd::Run(a) => run_file(a),
        ExperimentCmd::Merge(a) => merge(a),
        ExperimentCmd::List => {
            for (name, text) in bloatlab_experiment::builtin::BUILTINS {
                let e = bloatlab_experiment::parse(name, name, text)
                    .map_err(|e| anyhow::anyhow!("built-in {e}"))?;
                println!("{name:<20} {}", e.description);
            }
            Ok(())
        }
    }
}

/// Follows a point in messages about the quick variant.
const QUICK: &str = " under --quick";

/// Reads and checks an experiment file: syntax, keys, matrix, and every point's options.
fn load(path: &std::path::Path) -> anyhow::Result<Experiment> {
    let builtin = path
        .to_str()
        .filter(|_| !path.exists())
        .and_then(bloatlab_experiment::builtin::get);
    let text = match builtin {
        Some(t) => t.to_string(),
        None => std::fs::read_to_string(path).map_err(|e| {
            exit::usage(format!(
                "cannot read {}: {e} (built-ins: `bloatlab experiment list`)",
                path.display()
            ))
        })?,
    };
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "experiment".into());
    let exp = bloatlab_experiment::parse(&path.display().to_string(), &stem, &text)
        .map_err(|e| exit::usage(e.to_string()))?;
    check_file(&exp).map_err(exit::usage)?;
    Ok(exp)
}

/// Checks every point of the experiment and of its `[quick]` variant: a bad `[quick]` is
/// refused by every run, not only by the first `--quick` one.
fn check_file(exp: &Experiment) -> Result<(), String> {
    check_points(exp, "")?;
    if exp.quick.is_some() {
        check_points(&exp.clone().quick(), QUICK)?;
    }
    Ok(())
}

/// The line of the option a command-line error is about: the longest `--option` of `args`
/// that the message names, else `fallback`.
fn line_of(message: &str, args: &[(String, usize)], fallback: usize) -> usize {
    args.iter()
        .map(|(a, l)| (a.split('=').next().unwrap_or(a), l))
        .filter(|(a, _)| a.starts_with("--") && message.contains(a))
        .max_by_key(|(a, _)| a.len())
        .map_or(fallback, |(_, l)| *l)
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

/// Checks every point's `lab up` and `test` options as those commands would. `variant` follows
/// the point in messages (`" under --quick"` for the quick variant).
fn check_points(exp: &Experiment, variant: &str) -> Result<(), String> {
    let lab_line = exp.lab.first().map_or(0, |o| o.line);
    for p in matrix::points(exp) {
        let name = matrix::test_name(exp, &p);
        let test: bloatlab_suite::TestName =
            name.parse().map_err(|e: bloatlab_suite::UnknownTest| {
                format!("{}:{}: test.name: {e}", exp.file, exp.test.1)
            })?;
        let lab = matrix::argv(exp, Section::Lab, &p);
        let words: Vec<String> = lab.iter().map(|(s, _)| s.clone()).collect();
        if let Err(e) = crate::cmd::lab::check_up_args("check", &words) {
            let line = line_of(&e, &lab, lab_line);
            return Err(format!(
                "{}:{line}: [lab] of point {} ({}): {}",
                exp.file,
                p.name(),
                p.label(),
                first_line(&e).trim_start_matches("error: ")
            ));
        }
        let t = matrix::argv(exp, Section::Test, &p);
        let mut argv = vec!["test".to_string(), name.clone(), "10.77.0.2".to_string()];
        argv.extend(t.iter().map(|(s, _)| s.clone()));
        let cmd = <crate::cmd::test::TestArgs as Args>::augment_args(clap::Command::new("test"));
        let parsed = cmd
            .try_get_matches_from(&argv)
            .and_then(|m| crate::cmd::test::TestArgs::from_arg_matches(&m));
        let bad = |e: String| {
            let line = line_of(&e, &t, exp.test.1);
            format!(
                "{}:{line}: [test] of point {} ({}){variant}: {}",
                exp.file,
                p.name(),
                p.label(),
                first_line(&e).trim_start_matches("error: ")
            )
        };
        let args = parsed.map_err(|e| bad(e.to_string()))?;
        bloatlab_suite::plan(test, &args.params()).map_err(|e| bad(e.to_string()))?;
        for (k, _) in &t {
            let k = k.split('=').next().unwrap_or(k);
            if k == "--output" || k == "--json" {
                return Err(bad(format!(
                    "{k}: the experiment chooses each run's results file; leave it out"
                )));
            }
        }
    }
    Ok(())
}

/// A progress line on stderr: rewritten in place on a terminal, one line each otherwise.
pub(crate) fn progress_line(tty: bool, line: &str) {
    if tty {
        eprint!("\r\x1b[K{line}");
        let _ = std::io::stderr().flush();
    } else {
        eprintln!("{line}");
    }
}

fn fmt_left(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

fn run_file(a: RunArgs) -> anyhow::Result<()> {
    let mut exp = load(&a.file)?;
    if a.quick {
        exp = exp.quick();
        check_points(&exp, QUICK).map_err(exit::usage)?;
    }
    if a.list_points {
        for r in matrix::runs(&exp, a.shard) {
            println!("{}\t{}", r.name(), r.point.label());
        }
        return Ok(());
    }
    let out = a.out.clone().unwrap_or_default();
    if !bloatlab_os::process::is_root() {
        return Err(anyhow::Error::new(Exit {
            code: exit::PRIVILEGE,
            message: "bloatlab experiment run builds network labs and needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)".into(),
        }));
    }
    let stop = crate::cmd::stop_on_interrupt()?;
    let cfg = RunnerConfig {
        exe: std::env::current_exe().context("cannot find the bloatlab executable")?,
        out: out.clone(),
        lab: format!("ex{}", std::process::id()),
        port: a.port,
        shard: a.shard,
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = |ev: Event<'_>| match ev {
        Event::Start {
            n,
            total,
            run,
            left,
        } => {
            const W: usize = 20;
            let filled = (n - 1) * W / total.max(1);
            let bar = format!("{}{}", "#".repeat(filled), ".".repeat(W - filled));
            let left = left.map_or("?".into(), fmt_left);
            let line = format!(
                "[{bar}] {n}/{total} {} rep {} (left ~{left})",
                run.point.label(),
                run.rep
            );
            progress_line(tty, &line);
        }
        Event::End { run, status } => {
            if let RunStatus::Failed(e) = status {
                if tty {
                    eprintln!();
                }
                eprintln!("bloatlab: run {} failed: {e}", run.name());
            }
        }
    };
    let result = runner::run(&exp, &cfg, stop.flag(), &mut progress);
    if tty {
        eprintln!();
    }
    let outcome = result.map_err(|e| {
        anyhow::Error::new(Exit {
            code: match e {
                runner::RunError::OtherExperiment { .. }
                | runner::RunError::OtherVariant { .. } => exit::USAGE,
                _ => exit::FAILURE,
            },
            message: e.to_string(),
        })
    })?;
    print!(
        "{}",
        summary::table(&outcome.rows, &runner::param_names(&exp))
    );
    if let Some(v) = bloatlab_experiment::builtin::check(&exp, &outcome.rows) {
        println!("=== {}: the report's numbers beside ours ===", exp.name);
        print!("{v}");
    }
    let kept = outcome
        .runs
        .iter()
        .filter(|(_, s)| *s == RunStatus::Kept)
        .count();
    let failed: Vec<String> = outcome
        .runs
        .iter()
        .filter(|(_, s)| matches!(s, RunStatus::Failed(_)))
        .map(|(r, _)| r.name())
        .collect();
    println!(
        "{} runs complete ({kept} kept from before); summary: {}, {}; report: {}",
        outcome.rows.len(),
        out.join("summary.csv").display(),
        out.join("summary.json").display(),
        out.join("report.html").display()
    );
    if !failed.is_empty() {
        return Err(anyhow::anyhow!(
            "{} runs failed ({}); run the same command again to redo them",
            failed.len(),
            failed.join(", ")
        ));
    }
    Ok(())
}

fn merge(a: MergeArgs) -> anyhow::Result<()> {
    let (name, rows, params) = runner::merge(&a.dirs).map_err(|e| exit::usage(e.to_string()))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    runner::write_summary(&a.out, &name, &rows, &params).map_err(anyhow::Error::new)?;
    print!("{}", summary::table(&rows, &params));
    println!(
        "{} runs of experiment {name} merged into {}",
        rows.len(),
        a.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(), String> {
        let e = bloatlab_experiment::parse("t.toml", "t", text).map_err(|e| e.to_string())?;
        check_file(&e)
    }

    #[test]
    fn every_point_is_checked_as_lab_up_and_test_would() {
        let ok = "[lab]\ndelay = \"15ms\"\nstage = [\"rate={r} qdisc=fq_codel\", \"rate=10mbit qdisc=fifo limit=1000p\"]\n[test]\nname = \"tcp_upload\"\nlength = 5\n[matrix]\nr = [\"9mbit\", \"11mbit\"]\n\"test.cc\" = [\"cubic\", \"bbr\"]\n";
        check(ok).unwrap();
        // An unknown lab option: named with its line.
        let e = check("[lab]\ndelay = \"15ms\"\nbogus = 1\n[test]\nname = \"tcp_upload\"\n")
            .unwrap_err();
        assert!(e.starts_with("t.toml:3:") && e.contains("--bogus"), "{e}");
        // A stage that cannot be built, at the second point only.
        let e = check("[lab]\nstage = [\"rate={r}\"]\n[test]\nname = \"tcp_upload\"\n[matrix]\nr = [\"9mbit\", \"0mbit\"]\n").unwrap_err();
        assert!(
            e.starts_with("t.toml:2:") && e.contains("p002") && e.contains("0mbit"),
            "{e}"
        );
        // A swept test option with a bad value: the matrix line.
        let e = check("[test]\nname = \"tcp_upload\"\n[matrix]\n\"test.length\" = [5, -1]\n")
            .unwrap_err();
        assert!(e.starts_with("t.toml:4:") && e.contains("length"), "{e}");
        let e = check("[test]\nname = \"nosuch\"\n").unwrap_err();
        assert!(e.starts_with("t.toml:2:"), "{e}");
        let e = check("[test]\nname = \"tcp_upload\"\noutput = \"x.json\"\n").unwrap_err();
        assert!(e.starts_with("t.toml:3:"), "{e}");
    }

    #[test]
    fn the_quick_variant_is_checked_with_the_file() {
        let base = "[test]\nname = \"tcp_upload\"\nlength = 30\n[quick]\n";
        check(&format!("{base}length = 5\nidle = 1\n")).unwrap();
        // An unknown option in [quick]: its line, the option, and that it is the quick variant.
        let e = check(&format!("{base}lenght = 5\n")).unwrap_err();
        assert!(
            e.starts_with("t.toml:5:") && e.contains("--lenght") && e.contains("--quick"),
            "{e}"
        );
        // A bad value in [quick]: refused although the full variant is fine.
        let e = check(&format!("{base}length = -1\n")).unwrap_err();
        assert!(e.starts_with("t.toml:5:") && e.contains("length"), "{e}");
        let e = check(&format!("{base}json = true\n")).unwrap_err();
        assert!(e.starts_with("t.toml:5:"), "{e}");
    }
}
