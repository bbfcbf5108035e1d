//! `bloatlab experiment`: run an experiment declared in a TOML file (crates/experiment,
//! docs/experiments.md), list its points, or merge shard directories.
//!
//! Before anything starts, the file is parsed and every point's `lab up`, `test` (or
//! `client`) and `server` options are typed with those commands' own flags
//! (`bloatlab_experiment::points`); a problem is reported with the key's file line, exit 2.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bloatlab_experiment::matrix::{self, Shard};
use bloatlab_experiment::runner::{self, Event, RunStatus, RunnerConfig};
use bloatlab_experiment::{Experiment, points, summary};
use clap::{Args, Subcommand};

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
    /// `[quick]` section: 2 s loaded, 0.5 s idle, 3 pulses, 2 s client runs, one repetition
    /// (a smoke test).
    #[arg(long = "quick")]
    quick: bool,
    /// Output directory: results files, summary.csv, summary.json, verdict.txt,
    /// report.html. Running again with the same DIR resumes: complete runs are kept.
    /// Default: `./NAME` (`./NAME-quick` with --quick, `./NAME-shardK-of-N` with --shard),
    /// said on stderr before the first run.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
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
    /// Where the merged summary.csv, summary.json, verdict.txt and report.html go.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: PathBuf,
    /// Merge even if shards are missing or hold incomplete runs: the summary is marked
    /// partial and the experiment is not judged.
    #[arg(long = "allow-partial")]
    allow_partial: bool,
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

/// Reads and checks an experiment file: syntax, keys, matrix, and every point's options.
fn load(path: &std::path::Path) -> anyhow::Result<Experiment> {
    let builtin = path
        .to_str()
        .filter(|_| !path.exists())
        .and_then(bloatlab_experiment::builtin::resolve);
    // A built-in is named by its full name, also when given by its short one (`report1`).
    let path = match builtin {
        Some((name, _)) => std::path::Path::new(name),
        None => path,
    };
    let builtin = builtin.map(|(_, t)| t);
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

/// Checks every point of the experiment and of its `[quick]` variant: each point's options
/// are typed by `bloatlab_experiment::points`, which names the TOML key and line of a bad one.
fn check_file(exp: &Experiment) -> Result<(), String> {
    points::check(exp).map(|_| ()).map_err(|e| e.to_string())
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
        points::typed_points(&exp).map_err(|e| exit::usage(e.to_string()))?;
    }
    if a.list_points {
        let runs =
            matrix::runs(&exp, a.shard).map_err(|e| exit::usage(format!("{}: {e}", exp.file)))?;
        for r in runs {
            println!("{}\t{}", r.name(), r.point.label());
        }
        return Ok(());
    }
    let out = match a.out.clone() {
        Some(o) => o,
        None => {
            let o = default_out(&exp, a.shard);
            eprintln!(
                "bloatlab: writing to {} (no --out given; the same command resumes there)",
                o.display()
            );
            o
        }
    };
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
    print_judgement(&outcome.judgement);
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
        "{} runs complete ({kept} kept from before); summary: {}, {}; verdict: {}; report: {}",
        outcome.rows.len(),
        out.join("summary.csv").display(),
        out.join("summary.json").display(),
        out.join("verdict.txt").display(),
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

/// The default output directory: `./NAME`, `./NAME-quick`, `./NAME-shardK-of-N`.
fn default_out(exp: &Experiment, shard: Option<Shard>) -> PathBuf {
    let mut d = exp.name.clone();
    if exp.quick_variant {
        d.push_str("-quick");
    }
    if let Some(s) = shard {
        d.push_str(&format!("-shard{}-of-{}", s.k, s.n));
    }
    PathBuf::from(d)
}

/// The built-in's verdict (with the report's numbers beside ours), or for any experiment
/// its incomplete points.
fn print_judgement(j: &bloatlab_experiment::verdict::Judgement) {
    if j.criterion.is_empty() {
        if j.incomplete() > 0 || j.partial {
            print!("{}", j.points_text());
        }
        return;
    }
    println!("=== {}: the report's numbers beside ours ===", j.experiment);
    print!("{j}");
}

fn merge(a: MergeArgs) -> anyhow::Result<()> {
    let m = runner::merge(&a.dirs, a.allow_partial).map_err(|e| exit::usage(e.to_string()))?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let (rows, judgement) = runner::write_summary(
        &a.out,
        &m.experiment,
        &m.rows,
        &m.planned,
        &m.params,
        !m.partial.is_empty(),
    )
    .map_err(anyhow::Error::new)?;
    print!("{}", summary::table(&rows, &m.params));
    print_judgement(&judgement);
    for p in &m.partial {
        eprintln!("bloatlab: partial merge: {p}");
    }
    println!(
        "{} runs of experiment {} merged into {}{}",
        rows.len(),
        m.experiment.name,
        a.out.display(),
        if m.partial.is_empty() {
            ""
        } else {
            " (partial)"
        }
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
    fn without_out_a_run_writes_to_a_directory_named_after_the_experiment() {
        let e = load(std::path::Path::new("report1")).unwrap();
        assert_eq!(e.name, "report1-near-congestion", "short name resolved");
        assert_eq!(
            default_out(&e, None),
            PathBuf::from("report1-near-congestion")
        );
        let q = e.quick();
        let shard = "1/2".parse().ok();
        assert_eq!(
            default_out(&q, shard),
            PathBuf::from("report1-near-congestion-quick-shard1-of-2")
        );
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

    /// Issue 23: rates that follow a trace or a schedule, in `[lab]` and in stages; a bad
    /// trace names the TOML line and the trace's own file and line.
    #[test]
    fn trace_and_schedule_rates_are_checked_in_experiment_files() {
        let dir = std::env::temp_dir().join(format!("h23r-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.trace");
        let bad = dir.join("bad.trace");
        std::fs::write(&good, "1\n2\n").unwrap();
        std::fs::write(&bad, "1\n3\n2\n").unwrap();
        let test = "[test]\nname = \"tcp_upload\"\n";
        check(&format!(
            "[lab]\ndown-rate = \"trace:{}\"\nup-rate = \"schedule:0s/20mbit,5s/5mbit\"\n{test}",
            good.display()
        ))
        .unwrap();
        check(&format!(
            "[lab]\nstage = [\"name=sky rate=trace:{} qdisc=fifo\", \"delay=schedule:0s/10ms,15s/40ms\"]\n{test}",
            good.display()
        ))
        .unwrap();
        let e = check(&format!(
            "[lab]\ndelay = \"5ms\"\ndown-rate = \"trace:{}\"\n{test}",
            bad.display()
        ))
        .unwrap_err();
        assert!(
            e.starts_with("t.toml:3:") && e.contains(&format!("{}:3: 2 ms", bad.display())),
            "{e}"
        );
        let e = check(&format!(
            "[lab]\nstage = [\"rate=schedule:0s/20mbit,5s/0mbit\"]\n{test}"
        ))
        .unwrap_err();
        assert!(e.starts_with("t.toml:2:") && e.contains("step 2"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn client_and_server_options_are_checked_as_those_commands_would() {
        let ok = "[server]\nenhanced = true\n[client]\ntime = 10\nlen = \"16K\"\ntrip-times = true\nenhanced = true\ntcp-congestion = \"cubic\"\nnear-congestion = \"{w}\"\n[matrix]\nw = [\"0.4\", \"0\"]\n\"server.window\" = [\"256K\", \"1M\"]\n";
        check(ok).unwrap();
        check(bloatlab_experiment::builtin::get("report1-near-congestion").unwrap()).unwrap();
        // An unknown client key: named with its line.
        let e = check("[client]\ntime = 10\nbogus = 1\n").unwrap_err();
        assert!(
            e.starts_with("t.toml:3: [client]") && e.contains("--bogus"),
            "{e}"
        );
        let e = check("[server]\nenhanced = true\nnosuch = \"x\"\n[client]\n").unwrap_err();
        assert!(
            e.starts_with("t.toml:3: [server]") && e.contains("--nosuch"),
            "{e}"
        );
        // A bad swept value, at the second point only: the matrix line.
        let e = check("[client]\n[matrix]\n\"client.near-congestion\" = [0.4, -1]\n").unwrap_err();
        assert!(
            e.starts_with("t.toml:3:") && e.contains("p002") && e.contains("near-congestion"),
            "{e}"
        );
        // Options that only resolve badly (to_config), and options the runner sets itself.
        let e = check("[client]\ntrip-times = true\nlen = 50\n").unwrap_err();
        assert!(e.contains("92 bytes"), "{e}");
        let e = check("[client]\ntime = 3\njson = true\n").unwrap_err();
        assert!(e.starts_with("t.toml:3:") && e.contains("--json"), "{e}");
        let e = check("[server]\nport = 5002\n[client]\n").unwrap_err();
        assert!(e.starts_with("t.toml:2:") && e.contains("--port"), "{e}");
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
