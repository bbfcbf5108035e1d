//! `bloatlab tune`: the highest shaper rate whose induced latency under load stays within a
//! budget, per direction (crates/experiment `tune`, docs/experiments.md "tune").
//!
//! Every option is checked before anything starts (budget, range, resolution, repeats, the
//! lab and its stage, the `{rate}` in `--set-rate-cmd`): a problem names the flag, exit 2.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use bloatlab_autorate::Bounds;
use bloatlab_autorate::emit::{Deploy, Format, Framing};
use bloatlab_experiment::tune::driver::{self, Event, Place, TuneConfig};
use bloatlab_experiment::tune::measure::{Direction, Load};
use bloatlab_experiment::tune::output;
use bloatlab_experiment::tune::rate::{self, RateControl, Target};
use bloatlab_experiment::tune::{Rule, SearchConfig};
use bloatlab_units::{BitRate, CongestionControl};
use clap::Args;

use crate::cmd::experiment::progress_line;
use crate::exit::{self, Exit};

/// `--direction`, shared with `bloatlab autorate`.
pub use bloatlab_invoke::autorate::Which;

/// Arguments of `bloatlab tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Tune a stage of this running lab (`lab up NAME --stage ...`); the load runs from its
    /// host `client` to a server tune starts in host `server`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["server", "set_rate_cmd", "restore_rate"], required_unless_present = "server")]
    lab: Option<String>,
    /// With --lab: the shaper stage, by name or 1-based position.
    #[arg(long, value_name = "STAGE", default_value = "1")]
    stage: String,
    /// A real link: the `bloatlab server` to load the link against.
    #[arg(long, value_name = "HOST", requires_all = ["set_rate_cmd", "restore_rate"])]
    server: Option<String>,
    /// A real link: the command that applies a rate, run with `sh -c`; `{rate}` becomes the
    /// rate in kbit/s (`9500kbit`), `{direction}` `up` or `down`. E.g.
    /// 'tc qdisc change dev eth0 root cake bandwidth {rate}' or the same over ssh.
    #[arg(long, value_name = "CMD")]
    set_rate_cmd: Option<String>,
    /// A real link: the rate to put back at the end and on Ctrl-C (tune cannot read it).
    #[arg(long, value_name = "RATE")]
    restore_rate: Option<String>,
    /// Which direction(s) to tune.
    #[arg(long, value_enum, default_value = "both")]
    direction: Which,
    /// Induced p90 latency allowed (loaded p90 minus idle median RTT).
    #[arg(long, value_name = "TIME", default_value = "15ms")]
    budget: String,
    /// Lowest rate to try.
    #[arg(long, value_name = "RATE", default_value = "1mbit")]
    min: String,
    /// Highest rate to try (tried first).
    #[arg(long, value_name = "RATE", default_value = "100mbit")]
    max: String,
    /// Stop bisecting when the highest rate within budget and the lowest over it are this
    /// close.
    #[arg(long, value_name = "RATE", default_value = "500kbit")]
    resolution: String,
    /// Measurements per rate (at most: a rate stops as soon as its verdict is decided).
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeats: u32,
    /// How repeats combine: `median` (more than half within budget) or `all`.
    #[arg(long, value_name = "RULE", default_value = "median")]
    rule: String,
    /// Loaded seconds of each measurement.
    #[arg(short = 'l', long, value_name = "SECONDS", default_value_t = 5.0)]
    length: f64,
    /// Idle seconds before each load (the baseline).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    idle: f64,
    /// TCP congestion control of the load (cubic fills buffers as most traffic does).
    #[arg(long, value_name = "CC", default_value = "cubic", value_parser = CongestionControl::new)]
    cc: CongestionControl,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = 5001)]
    port: u16,
    /// At the end, leave the recommended rate applied (default: put the original back).
    #[arg(long)]
    apply: bool,
    /// Write the result as JSON (schema in docs/experiments.md).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write an HTML report (plots and the curve table).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// At the end, print a configuration to paste: sqm (OpenWrt sqm-scripts), tc, or
    /// cake-autorate (base = the recommendation; docs/autorate.md). Repeatable.
    #[arg(long, value_name = "FORMAT")]
    emit: Vec<String>,
    /// The WAN interface named in --emit output.
    #[arg(long, value_name = "IF", default_value = "eth0")]
    emit_iface: String,
}

/// What `--emit` deploys from a tune: per direction with a recommendation, base = the
/// recommendation; max = the highest goodput measured (about the unshaped link's capacity,
/// at least base); min = half the recommendation (tune does not see how low the link goes;
/// at least --min, at most base).
fn tune_deploy(
    search: &SearchConfig,
    outcome: &driver::Outcome,
    iface: &str,
    framing: Option<Framing>,
    source: String,
) -> Deploy {
    let bounds = |d: Direction| {
        let r = outcome.results.iter().find(|r| r.direction == d)?;
        let base = r.recommended_kbit? * 1000;
        let top = r
            .curve
            .iter()
            .flat_map(|p| &p.runs)
            .map(|m| (m.throughput_mbit * 1e6) as u64)
            .max()
            .unwrap_or(0);
        Some(Bounds {
            min: BitRate((base / 2).max(search.min_bps).min(base)),
            base: BitRate(base),
            max: BitRate(top.max(base)),
        })
    };
    Deploy {
        source,
        iface: iface.to_string(),
        down: bounds(Direction::Down),
        up: bounds(Direction::Up),
        framing,
        params: None,
    }
}

fn rate_of(flag: &str, v: &str) -> Result<u64, String> {
    let r = bloatlab_emu::parse_rate(v).map_err(|e| format!("--{flag}: {e}"))?;
    if r.0 == 0 {
        return Err(format!("--{flag} {v:?}: must be greater than zero"));
    }
    Ok(r.0)
}

fn seconds(flag: &str, v: f64) -> Result<Duration, String> {
    if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
        return Err(format!(
            "--{flag} {v}: must be above 0 and at most 3600 seconds"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Resolves the arguments into a plan, without touching anything (lab and stage are checked
/// later, by reading the lab's status).
fn resolve(a: &TuneArgs, exe: PathBuf) -> Result<TuneConfig, String> {
    let budget = bloatlab_emu::parse_time(&a.budget).map_err(|e| format!("--budget: {e}"))?;
    let search = SearchConfig {
        min_bps: rate_of("min", &a.min)?,
        max_bps: rate_of("max", &a.max)?,
        resolution_bps: rate_of("resolution", &a.resolution)?,
        repeats: a.repeats,
        budget,
        rule: a.rule.parse::<Rule>().map_err(|e| format!("--rule: {e}"))?,
    };
    search.validate().map_err(|e| e.to_string())?;
    let load = Load {
        load: seconds("length", a.length)?,
        idle: seconds("idle", a.idle)?,
        cc: a.cc.clone(),
    };
    let (place, target, restore_bps) = match (&a.lab, &a.server) {
        (Some(lab), _) => {
            bloatlab_lab::names::validate(lab).map_err(|e| format!("--lab: {e}"))?;
            (
                Place::Lab(lab.clone()),
                Target::Lab {
                    lab: lab.clone(),
                    stage: a.stage.clone(),
                },
                None,
            )
        }
        (None, Some(server)) => {
            let template = a.set_rate_cmd.clone().unwrap_or_default();
            rate::check_template(&template)?;
            let restore = rate_of("restore-rate", a.restore_rate.as_deref().unwrap_or(""))?;
            (
                Place::Server(server.clone()),
                Target::Command { template },
                Some(restore),
            )
        }
        (None, None) => return Err("give --lab NAME, or --server HOST with --set-rate-cmd".into()),
    };
    Ok(TuneConfig {
        exe,
        place,
        target,
        directions: match a.direction {
            Which::Up => vec![Direction::Up],
            Which::Down => vec![Direction::Down],
            Which::Both => vec![Direction::Up, Direction::Down],
        },
        search,
        load,
        port: a.port,
        restore_bps,
        apply: a.apply,
    })
}

pub fn run(a: TuneArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the bloatlab executable")?;
    let cfg = resolve(&a, exe).map_err(exit::usage)?;
    let emit: Vec<Format> = crate::cmd::emit::formats(&a.emit).map_err(exit::usage)?;
    crate::cmd::emit::check_iface_name(&a.emit_iface).map_err(exit::usage)?;
    // The stage's framing (overhead, ATM/PTM) goes into the emitted configuration.
    let framing = match (&cfg.target, emit.is_empty()) {
        (Target::Lab { lab, stage }, false) => {
            let report = bloatlab_lab::status::read(&bloatlab_lab::state::StateDir::default(), lab)
                .map_err(|e| exit::usage(e.to_string()))?;
            let d = cfg.directions[0].name();
            crate::cmd::emit::lab_stage(&report, d, stage)
                .map_err(exit::usage)?
                .1
        }
        _ => None,
    };
    for f in [&a.json, &a.html].into_iter().flatten() {
        let parent = f.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) {
            return Err(exit::usage(format!(
                "{}: the directory does not exist",
                f.display()
            )));
        }
    }
    // The lab and its stage exist (in every direction tuned) before anything changes.
    let control = RateControl {
        exe: cfg.exe.clone(),
        target: cfg.target.clone(),
    };
    for &d in &cfg.directions {
        let now = control.current(d).map_err(|e| exit::usage(e.to_string()))?;
        if let (Target::Lab { stage, .. }, None) = (&cfg.target, now) {
            // Nothing to put back afterwards: `lab set` sets rates, not "unlimited".
            return Err(exit::usage(format!(
                "--stage {stage}: the {} stage has no rate (unlimited); give it one in lab up --stage 'rate=...'",
                d.name()
            )));
        }
    }
    if matches!(cfg.place, Place::Lab(_)) && !bloatlab_os::process::is_root() {
        return Err(anyhow::Error::new(Exit {
            code: exit::PRIVILEGE,
            message: "bloatlab tune --lab changes the lab's emulator and needs root".into(),
        }));
    }
    let stop = crate::cmd::stop_on_interrupt()?;
    let tty = std::io::stderr().is_terminal();
    let mut progress = |ev: Event<'_>| {
        let line = match ev {
            Event::Probe {
                direction,
                n,
                rate_kbit,
                rep,
                repeats,
            } => format!(
                "tune {}: measurement {n} at {:.3} Mbit/s (repeat {rep} of at most {repeats})",
                direction.name(),
                rate_kbit as f64 / 1e3
            ),
            Event::Measured {
                direction,
                rate_kbit,
                m,
            } => format!(
                "tune {}: {:.3} Mbit/s: induced p50 {:.1} ms p90 {:.1} ms, {:.2} Mbit/s",
                direction.name(),
                rate_kbit as f64 / 1e3,
                m.induced_p50_ms,
                m.induced_p90_ms,
                m.throughput_mbit
            ),
        };
        progress_line(tty, &line);
    };
    let result = driver::run(&cfg, stop.flag(), &mut progress);
    if tty {
        eprintln!();
    }
    let outcome = result.map_err(|e| {
        anyhow::Error::new(Exit {
            code: exit::FAILURE,
            message: format!("tune: {e} (the original rates were put back)"),
        })
    })?;
    for r in &outcome.results {
        println!("{}", output::summary_line(&cfg.search, r));
    }
    for r in &outcome.results {
        println!("\n{} curve:", r.direction.name());
        print!("{}", output::curve_table(r));
    }
    for l in &outcome.restored {
        println!("{l}");
    }
    if let Some(f) = &a.json {
        let v = output::to_json(&cfg.search, &outcome);
        let bytes = serde_json::to_vec_pretty(&v)?;
        bloatlab_results::write_atomic(f, |w| w.write_all(&bytes))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    if let Some(f) = &a.html {
        let html = output::to_html(&cfg.search, &outcome)?;
        bloatlab_results::write_atomic(f, |w| w.write_all(html.as_bytes()))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    if !emit.is_empty() && !outcome.interrupted {
        let source = match &cfg.target {
            Target::Lab { lab, stage } => format!(
                "bloatlab tune --lab {lab} --stage {stage}, budget {:?}: base = the recommended rate",
                cfg.search.budget
            ),
            Target::Command { .. } => format!(
                "bloatlab tune --server {}, budget {:?}: base = the recommended rate",
                match &cfg.place {
                    Place::Server(s) | Place::Lab(s) => s,
                },
                cfg.search.budget
            ),
        };
        let d = tune_deploy(&cfg.search, &outcome, &a.emit_iface, framing, source);
        println!();
        crate::cmd::emit::print(&emit, &d);
    }
    if outcome.interrupted {
        return Err(anyhow::Error::new(Exit {
            code: exit::FAILURE,
            message: "tune: interrupted; the original rates were put back".into(),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        a: TuneArgs,
    }

    fn resolved(argv: &[&str]) -> Result<TuneConfig, String> {
        let mut v = vec!["tune"];
        v.extend_from_slice(argv);
        let m = <Cli as clap::CommandFactory>::command()
            .try_get_matches_from(v)
            .map_err(|e| e.to_string())?;
        let c = Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
        resolve(&c.a, "bloatlab".into())
    }

    #[test]
    fn defaults_and_flags_resolve_into_a_plan() {
        let c = resolved(&["--lab", "h12x", "--stage", "router"]).unwrap();
        assert_eq!(c.directions, [Direction::Up, Direction::Down]);
        assert_eq!(c.search.budget, Duration::from_millis(15));
        assert_eq!(
            (c.search.min_bps, c.search.max_bps),
            (1_000_000, 100_000_000)
        );
        assert_eq!(c.search.repeats, 3);
        assert_eq!(
            c.target,
            Target::Lab {
                lab: "h12x".into(),
                stage: "router".into()
            }
        );
        let c = resolved(&[
            "--server",
            "192.0.2.1",
            "--set-rate-cmd",
            "tc qdisc change dev eth0 root cake bandwidth {rate}",
            "--restore-rate",
            "20mbit",
            "--direction",
            "down",
            "--budget",
            "10ms",
            "--rule",
            "all",
        ])
        .unwrap();
        assert_eq!(c.directions, [Direction::Down]);
        assert_eq!(c.restore_bps, Some(20_000_000));
        assert_eq!(c.search.rule, Rule::All);
        assert_eq!(c.place, Place::Server("192.0.2.1".into()));
    }

    #[test]
    fn emitted_rates_come_from_the_recommendation_and_the_curve() {
        use bloatlab_experiment::tune::{CurvePoint, Measurement};
        let c = resolved(&["--lab", "h23t"]).unwrap();
        let point = |kbit: u64, mbit: f64| CurvePoint {
            rate_kbit: kbit,
            runs: vec![Measurement {
                induced_p50_ms: 1.0,
                induced_p90_ms: 2.0,
                idle_median_ms: 1.0,
                throughput_mbit: mbit,
            }],
            within: Some(true),
        };
        let outcome = driver::Outcome {
            results: vec![driver::DirectionResult {
                direction: Direction::Up,
                verdict: None,
                recommended_kbit: Some(9000),
                original_bps: None,
                curve: vec![point(100_000, 9.6), point(9000, 8.5)],
            }],
            interrupted: false,
            restored: vec![],
        };
        let d = tune_deploy(&c.search, &outcome, "wan", None, "t".into());
        let up = d.up.unwrap();
        assert_eq!(
            (up.min.0, up.base.0, up.max.0),
            (4_500_000, 9_000_000, 9_600_000)
        );
        assert!(d.down.is_none(), "not tuned: not deployed");
        let text = bloatlab_autorate::emit::render(Format::Sqm, &d);
        assert!(text.contains("option upload '9000'") && text.contains("option download '0'"));
    }

    #[test]
    fn bad_input_names_the_flag() {
        let cmd = ["--set-rate-cmd", "tc ... {rate}", "--restore-rate", "9mbit"];
        let with = |extra: &[&'static str]| {
            let mut v = vec!["--lab", "h12x"];
            v.extend_from_slice(extra);
            v
        };
        for (argv, want) in [
            (with(&["--budget", "0ms"]), "--budget"),
            (with(&["--budget", "fast"]), "--budget"),
            (with(&["--min", "10mbit", "--max", "10mbit"]), "--min"),
            (with(&["--min", "20mbit", "--max", "10mbit"]), "--min"),
            (with(&["--max", "0kbit"]), "--max"),
            (with(&["--resolution", "10bit"]), "--resolution"),
            (with(&["--repeats", "0"]), "--repeats"),
            (with(&["--rule", "most"]), "--rule"),
            (with(&["--length", "0"]), "--length"),
            (with(&["--cc", "cu bic"]), "--cc"),
            (vec!["--lab", "Bad Name!"], "--lab"),
        ] {
            let e = resolved(&argv).unwrap_err();
            assert!(e.contains(want), "{argv:?}: {e}");
        }
        let e = resolved(&[
            "--server",
            "192.0.2.1",
            "--set-rate-cmd",
            "tc qdisc change dev eth0 root cake",
            "--restore-rate",
            "9mbit",
        ])
        .unwrap_err();
        assert!(e.contains("--set-rate-cmd") && e.contains("{rate}"), "{e}");
        // clap: --server needs the command and the restore rate; --lab excludes them.
        let e = resolved(&["--server", "192.0.2.1"]).unwrap_err();
        assert!(
            e.contains("--set-rate-cmd") || e.contains("--restore-rate"),
            "{e}"
        );
        let mut v = vec!["--lab", "h12x"];
        v.extend_from_slice(&cmd);
        assert!(resolved(&v).unwrap_err().contains("cannot be used with"));
        assert!(resolved(&[]).unwrap_err().contains("--lab"));
    }
}
