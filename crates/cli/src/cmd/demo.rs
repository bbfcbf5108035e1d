//! `bloatlab demo`: a lab at 20 Mbit/s and 80 ms RTT, RRUL against a deep FIFO and then
//! against FQ-CoDel, side by side, with an HTML report; the lab is removed on every exit
//! path (crates/suite/src/demo.rs). Needs root.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bloatlab_invoke::lab::UpArgs;
use bloatlab_lab::LabSpec;
use bloatlab_suite::demo::{DemoConfig, DemoError, DemoLabs, run_demo, side_by_side};
use clap::{Args, FromArgMatches};

use crate::cmd::opts;
use crate::exit;

/// Arguments of `bloatlab demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Loaded seconds of each RRUL run (30 keeps the whole demo under 3 minutes).
    #[arg(short = 'l', long = "length", default_value = "30", value_parser = opts::positive_seconds)]
    pub length: Duration,
    /// Idle seconds before and after each load.
    #[arg(long = "idle", default_value = "2", value_parser = opts::seconds)]
    pub idle: Duration,
    /// Bottleneck rate (tc spelling).
    #[arg(long = "rate", default_value = "20mbit")]
    pub rate: String,
    /// One-way delay (tc spelling); the RTT is twice this.
    #[arg(long = "delay", default_value = "40ms")]
    pub delay: String,
    /// Queue limit of the deep FIFO.
    #[arg(long = "fifo-limit", default_value = "1000p")]
    pub fifo_limit: String,
    /// Directory for the results files and demo.html (default: bloatlab-demo-TIME).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Lab name (default: demo-PID).
    #[arg(long = "lab", hide = true)]
    pub lab: Option<String>,
}

/// The demo's two labs as `lab up` resolves them, before anything starts: a bad `--rate`,
/// `--delay` or `--fifo-limit` is a usage error naming the demo's flag.
fn demo_labs(name: &str, a: &DemoArgs) -> anyhow::Result<DemoLabs> {
    let spec = |qdisc: &[&str]| -> Result<LabSpec, String> {
        let mut argv = vec!["up", name, "--rate", &a.rate, "--delay", &a.delay];
        argv.extend_from_slice(qdisc);
        UpArgs::augment_args(clap::Command::new("up"))
            .try_get_matches_from(argv)
            .and_then(|m| UpArgs::from_arg_matches(&m))
            .map_err(|e| {
                // clap's own sentence ("invalid value 'x' for '--rate <RATE>': why"),
                // without its "error: " prefix and usage lines.
                let text = e.to_string();
                let line = text.lines().next().unwrap_or_default();
                line.strip_prefix("error: ").unwrap_or(line).to_owned()
            })?
            .resolve()
            .map_err(|e| e.to_string())
    };
    // The FQ-CoDel lab has no --limit: when only the FIFO's fails, the limit is at fault.
    let fq_codel = spec(&["--qdisc", "fq_codel"]).map_err(|e| exit::usage(format!("demo: {e}")))?;
    let fifo = spec(&["--qdisc", "fifo", "--limit", &a.fifo_limit])
        .map_err(|e| exit::usage(format!("demo: --fifo-limit {}: {e}", a.fifo_limit)))?;
    Ok(DemoLabs { fifo, fq_codel })
}

/// Runs `bloatlab demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let stop = crate::cmd::stop_on_interrupt()?;
    if !bloatlab_os::process::is_root() {
        return Err(anyhow::Error::new(exit::Exit {
            code: exit::PRIVILEGE,
            message:
                "bloatlab demo builds a network lab and needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
                    .into(),
        }));
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H%M%SZ")
            .to_string();
        PathBuf::from(format!("bloatlab-demo-{now}"))
    });
    let lab = args
        .lab
        .clone()
        .unwrap_or_else(|| format!("demo-{}", std::process::id()));
    let cfg = DemoConfig {
        exe: std::env::current_exe().context("cannot find the bloatlab executable")?,
        labs: demo_labs(&lab, &args)?,
        lab,
        rate: args.rate.clone(),
        delay: args.delay.clone(),
        loaded: args.length,
        idle: args.idle,
        port: 5001,
        out_dir,
    };
    let mut say = |s: &str| eprintln!("demo: {s}");
    let outcome = match run_demo(&cfg, stop.flag(), &mut say) {
        Ok(o) => o,
        Err(DemoError::Interrupted) => {
            return Err(anyhow::anyhow!("interrupted; the lab was taken down"));
        }
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    for r in &outcome.runs {
        println!("=== rrul against {} ===", r.label);
        print!("{}", r.summary);
    }
    println!(
        "=== side by side: {} bottleneck, {} one-way delay, RRUL ({} s loaded) ===",
        cfg.rate,
        cfg.delay,
        cfg.loaded.as_secs_f64()
    );
    let runs: Vec<(&str, &bloatlab_results::ResultsFile)> = outcome
        .runs
        .iter()
        .map(|r| (r.label.as_str(), &r.file))
        .collect();
    print!("{}", side_by_side(&runs));
    match &outcome.html {
        Ok(p) => println!("HTML report: {}", p.display()),
        Err(e) => println!(
            "HTML report not written ({e}); results files: {}",
            outcome
                .runs
                .iter()
                .map(|r| r.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    Ok(())
}
