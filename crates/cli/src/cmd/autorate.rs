//! `bloatlab autorate`: an adaptive shaper controller (cake-autorate class) for a real link
//! (`--set-rate-cmd` + `--iface`) or a lab stage (`--lab NAME --stage STAGE`).
//!
//! The algorithm is `bloatlab_autorate::Controller` (sans-IO); this module resolves the
//! flags into a plan (every problem names its flag, exit 2), then runs the loop: delay
//! samples from the probe threads and load readings feed the controller, and its
//! decisions go to the shaper ([`crate::cmd::autorate_io`]). Every change is logged on
//! stderr; `-o` writes the run as JSON (crates/autorate `log`); `--emit` prints a
//! configuration to paste. A rate that cannot be applied stops the run: the last rate
//! that was applied stays (it is within min/max), and the exit status is 1.
//! docs/autorate.md documents the command.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bloatlab_autorate::emit::{Deploy, Format, Framing};
use bloatlab_autorate::log::{ChangeRecord, End, RunLog, Tick};
use bloatlab_autorate::{Bounds, Change, Controller, Direction, Params};
use bloatlab_lab::state::StateDir;
use bloatlab_probe::client::Mode;
use bloatlab_units::BitRate;
use clap::Args;

use crate::cmd::autorate_io::{self as io, LoadSource, Msg, Prober, RateSink};
use crate::cmd::emit;
use crate::cmd::tune::Which;
use crate::exit::{self, Exit};

/// Arguments of `bloatlab autorate`.
#[derive(Debug, Args)]
pub struct AutorateArgs {
    /// Control a stage of this running lab (`lab up NAME --stage ...`): rates go to the
    /// stage through `lab set --stage-rate`, the load is the stage's own counters, and the
    /// reflector is a responder autorate starts in the lab's host `server`, probed from
    /// host `client`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["set_rate_cmd", "iface"])]
    lab: Option<String>,
    /// With --lab: the stage, by name or 1-based position (as `lab set` takes it).
    #[arg(long, value_name = "STAGE", default_value = "1")]
    stage: String,
    /// A real link: the command that applies a rate, run with `sh -c`; `{kbit}` becomes
    /// the rate in whole kbit/s, `{bps}` in bit/s, `{dir}` `down` or `up`. E.g.
    /// 'tc qdisc change dev ifb4eth0 root cake bandwidth {kbit}kbit'.
    #[arg(long, value_name = "CMD", requires = "iface")]
    set_rate_cmd: Option<String>,
    /// A real link: the interface whose counters give the load (rx = down, tx = up).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// A reflector, HOST or HOST:PORT: a `bloatlab server` (one-way delays when the clocks
    /// are shared, else RTT), or any host with --icmp. Repeat for several.
    #[arg(long = "reflector", value_name = "HOST[:PORT]")]
    reflectors: Vec<String>,
    /// Probe reflectors with ICMP echo (RTT only; root or CAP_NET_RAW).
    #[arg(long)]
    icmp: bool,
    /// Reflector port when HOST has none.
    #[arg(short = 'p', long, default_value_t = 5001)]
    port: u16,
    /// Time between probes to each reflector.
    #[arg(long, value_name = "TIME", default_value = "100ms")]
    interval: String,
    /// Which direction(s) to control.
    #[arg(long, value_enum, default_value = "both")]
    direction: Which,
    /// Lowest rate: RATE for both directions, or DOWN/UP (e.g. 5mbit/1mbit).
    #[arg(long, value_name = "RATE")]
    min: String,
    /// Steady-state rate, where autorate starts and drifts back to when idle (RATE or
    /// DOWN/UP).
    #[arg(long, value_name = "RATE")]
    base: String,
    /// Highest rate (RATE or DOWN/UP).
    #[arg(long, value_name = "RATE")]
    max: String,
    /// Delay above baseline that makes a sample "delayed".
    #[arg(long, value_name = "TIME", default_value = "30ms")]
    delay_thr: String,
    /// Bloat when this many of the last --bloat-window samples are delayed (k).
    #[arg(long, value_name = "K", default_value_t = 3)]
    bloat_count: usize,
    /// The detection window, samples (n).
    #[arg(long, value_name = "N", default_value_t = 6)]
    bloat_window: usize,
    /// Delay above baseline at which a cut is deepest (--cut-max).
    #[arg(long, value_name = "TIME", default_value = "60ms")]
    cut_full_delay: String,
    /// The deepest cut: the rate is multiplied by this at --cut-full-delay and above.
    #[arg(long, value_name = "FACTOR", default_value_t = 0.75)]
    cut_max: f64,
    /// Where a cut starts: the lower of the shaper rate and SHARE x the achieved rate (what
    /// the link delivered lately), so one cut gets under a line that just slowed; `off`:
    /// from the shaper rate only. An achieved rate below --min is not used.
    #[arg(long, value_name = "SHARE|off", default_value = "1")]
    cut_achieved: String,
    /// After a cut, no other cut and no raise for this long.
    #[arg(long, value_name = "TIME", default_value = "300ms")]
    bloat_refractory: String,
    /// The largest raise per sample, when loaded and the delay is low.
    #[arg(long, value_name = "FACTOR", default_value_t = 1.04)]
    raise_max: f64,
    /// Loaded: achieved rate at least this share of the shaper rate.
    #[arg(long, value_name = "SHARE", default_value_t = 0.75)]
    high_load: f64,
    /// Share of the rate moved toward --base per --decay-every when not loaded.
    #[arg(long, value_name = "SHARE", default_value_t = 0.01)]
    decay_step: f64,
    /// Time between decay steps.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    decay_every: String,
    /// Time between load readings.
    #[arg(long, value_name = "TIME", default_value = "200ms")]
    load_interval: String,
    /// Stop after this long (e.g. 10s, 2h; a bare number is seconds). Default: until
    /// Ctrl-C / SIGTERM.
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Write the run as JSON (schema in docs/autorate.md), atomically, at the end.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// At the end, print a configuration to paste: sqm (OpenWrt sqm-scripts), tc or
    /// cake-autorate (min/base/max from the rates autorate applied). Repeatable.
    #[arg(long, value_name = "FORMAT")]
    emit: Vec<String>,
    /// The WAN interface named in --emit output (default: --iface, else eth0).
    #[arg(long, value_name = "IF")]
    emit_iface: Option<String>,
}

/// Where rates go and load comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A lab stage.
    Lab {
        /// The lab.
        lab: String,
        /// The stage (name or position).
        stage: String,
    },
    /// The user's command and interface.
    Command {
        /// The template.
        template: String,
        /// The interface.
        iface: String,
    },
}

/// The resolved flags.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where.
    pub place: Place,
    /// Thresholds.
    pub params: Params,
    /// Bounds of the controlled directions.
    pub down: Option<Bounds>,
    /// See `down`.
    pub up: Option<Bounds>,
    /// Reflectors as given (resolved later).
    pub reflectors: Vec<String>,
    /// UDP or ICMP.
    pub mode: Mode,
    /// Probe interval per reflector.
    pub interval: Duration,
    /// Load reading interval.
    pub load_interval: Duration,
    /// Run length (`None`: until a signal).
    pub duration: Option<Duration>,
    /// `--emit`.
    pub emit: Vec<Format>,
    /// The interface in emitted configurations.
    pub emit_iface: String,
}

fn time(flag: &str, v: &str) -> Result<Duration, String> {
    let d = match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
        Ok(_) => return Err(format!("--{flag} {v:?}: not a time")),
        Err(_) => bloatlab_emu::parse_time(v).map_err(|e| format!("--{flag} {v:?}: {e}"))?,
    };
    if d.is_zero() {
        return Err(format!("--{flag} {v:?}: must be above zero"));
    }
    Ok(d)
}

/// `RATE` or `DOWN/UP`: (down, up).
fn rate_pair(flag: &str, v: &str) -> Result<(BitRate, BitRate), String> {
    let one = |s: &str| {
        let r = bloatlab_emu::parse_rate(s.trim()).map_err(|e| format!("--{flag} {v:?}: {e}"))?;
        if r.0 == 0 {
            return Err(format!("--{flag} {v:?}: must be greater than zero"));
        }
        Ok(r)
    };
    match v.split_once('/') {
        Some((d, u)) => Ok((one(d)?, one(u)?)),
        None => {
            let r = one(v)?;
            Ok((r, r))
        }
    }
}

/// Resolves the flags into a plan without touching anything.
pub fn resolve(a: &AutorateArgs) -> Result<Plan, String> {
    let place = match (&a.lab, &a.set_rate_cmd, &a.iface) {
        (Some(lab), _, _) => {
            bloatlab_lab::names::validate(lab).map_err(|e| format!("--lab: {e}"))?;
            if a.stage.trim().is_empty() {
                return Err("--stage: give a stage name or 1-based position".into());
            }
            Place::Lab {
                lab: lab.clone(),
                stage: a.stage.clone(),
            }
        }
        (None, Some(t), Some(iface)) => {
            io::check_template(t)?;
            Place::Command {
                template: t.clone(),
                iface: iface.clone(),
            }
        }
        (None, None, Some(_)) => {
            return Err("--iface: give --set-rate-cmd too (where the rates go)".into());
        }
        _ => {
            return Err(
                "give --lab NAME [--stage STAGE], or --set-rate-cmd CMD with --iface IF".into(),
            );
        }
    };
    if matches!(place, Place::Command { .. }) && a.reflectors.is_empty() {
        return Err(
            "--reflector: give at least one (a `bloatlab server`, or any host with --icmp)".into(),
        );
    }
    let params = Params {
        delay_thr: time("delay-thr", &a.delay_thr)?,
        bloat_count: a.bloat_count,
        bloat_window: a.bloat_window,
        cut_full_delay: time("cut-full-delay", &a.cut_full_delay)?,
        cut_max: a.cut_max,
        raise_max: a.raise_max,
        high_load: a.high_load,
        decay_step: a.decay_step,
        decay_refractory: time("decay-every", &a.decay_every)?,
        bloat_refractory: time("bloat-refractory", &a.bloat_refractory)?,
        cut_achieved: match a.cut_achieved.trim() {
            "off" => None,
            v => Some(
                v.parse::<f64>()
                    .map_err(|_| format!("--cut-achieved {v:?}: a share (0 to 1) or off"))?,
            ),
        },
        ..Params::default()
    };
    // The defaults' cut_min (0.99) must not exceed a user's --cut-max above it.
    let params = Params {
        cut_min: params.cut_min.max(params.cut_max),
        ..params
    };
    params.validate().map_err(|e| e.to_string())?;
    let (min, base, max) = (
        rate_pair("min", &a.min)?,
        rate_pair("base", &a.base)?,
        rate_pair("max", &a.max)?,
    );
    let bounds = |pick: fn((BitRate, BitRate)) -> BitRate, d: Direction| {
        let b = Bounds {
            min: pick(min),
            base: pick(base),
            max: pick(max),
        };
        b.validate(d.name()).map(|()| b).map_err(|e| e.to_string())
    };
    let down = bounds(|p| p.0, Direction::Down)?;
    let up = bounds(|p| p.1, Direction::Up)?;
    let (down, up) = match a.direction {
        Which::Down => (Some(down), None),
        Which::Up => (None, Some(up)),
        Which::Both => (Some(down), Some(up)),
    };
    let interval = time("interval", &a.interval)?;
    if interval < Duration::from_millis(10) || interval > Duration::from_secs(10) {
        return Err(format!("--interval {}: must be 10ms to 10s", a.interval));
    }
    let load_interval = time("load-interval", &a.load_interval)?;
    if load_interval < Duration::from_millis(50) || load_interval > Duration::from_secs(10) {
        return Err(format!(
            "--load-interval {}: must be 50ms to 10s",
            a.load_interval
        ));
    }
    let duration = a
        .duration
        .as_deref()
        .map(|v| time("duration", v))
        .transpose()?;
    let emit_iface = a
        .emit_iface
        .clone()
        .or_else(|| a.iface.clone())
        .unwrap_or_else(|| "eth0".into());
    emit::check_iface_name(&emit_iface)?;
    Ok(Plan {
        place,
        params,
        down,
        up,
        reflectors: a.reflectors.clone(),
        mode: if a.icmp { Mode::Icmp } else { Mode::Udp },
        interval,
        load_interval,
        duration,
        emit: emit::formats(&a.emit)?,
        emit_iface,
    })
}

/// `HOST`, `HOST:PORT`, `IP`, `[IPv6]:PORT` with `port` as the default.
fn reflector_addr(v: &str, port: u16) -> Result<SocketAddr, String> {
    if let Ok(a) = v.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bare = v.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let (host, port) = match v.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("--reflector {v:?}: {p:?} is not a port"))?,
        ),
        None => (v, port),
    };
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !valid {
        return Err(format!("--reflector {v:?}: not a host name or address"));
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("--reflector {v:?}: cannot resolve: {e}"))?
        .next()
        .ok_or_else(|| format!("--reflector {v:?}: no addresses"))
}

/// Everything the loop needs besides the plan.
struct Setup {
    sink: RateSink,
    load: LoadSource,
    probers: Vec<Prober>,
    reflectors: Vec<String>,
    target: String,
    framing: Option<Framing>,
    responder: Option<bloatlab_probe::responder::ResponderHandle>,
}

fn failure(message: String) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: exit::FAILURE,
        message,
    })
}

fn setup(plan: &Plan, port: u16) -> anyhow::Result<Setup> {
    match &plan.place {
        Place::Command { template, iface } => {
            io::check_iface(iface).map_err(exit::usage)?;
            let mut probers = Vec::new();
            for (i, r) in plan.reflectors.iter().enumerate() {
                let addr = reflector_addr(r, port).map_err(exit::usage)?;
                probers.push(Prober {
                    index: i,
                    cfg: io::probe_config(addr, plan.mode, plan.interval),
                    netns: None,
                });
            }
            Ok(Setup {
                sink: RateSink::Command {
                    template: template.clone(),
                },
                load: LoadSource::Iface {
                    name: iface.clone(),
                    last: None,
                },
                probers,
                reflectors: plan.reflectors.clone(),
                target: format!("--set-rate-cmd {template:?} --iface {iface}"),
                framing: None,
                responder: None,
            })
        }
        Place::Lab { lab, stage } => {
            let dir = StateDir::default();
            let report =
                bloatlab_lab::status::read(&dir, lab).map_err(|e| exit::usage(e.to_string()))?;
            if let Some(p) = &report.problem {
                return Err(failure(p.clone()));
            }
            let mut names = [None, None];
            let mut framing = None;
            for (i, d) in Direction::BOTH.into_iter().enumerate() {
                let controlled = match d {
                    Direction::Down => plan.down.is_some(),
                    Direction::Up => plan.up.is_some(),
                };
                if !controlled {
                    continue;
                }
                let (name, f) = emit::lab_stage(&report, d.name(), stage).map_err(exit::usage)?;
                names[i] = Some(name);
                framing = framing.or(f);
            }
            if !bloatlab_os::process::is_root() {
                return Err(anyhow::Error::new(Exit {
                    code: exit::PRIVILEGE,
                    message: "bloatlab autorate --lab changes the lab's emulator and needs root"
                        .into(),
                }));
            }
            let host = |side: bloatlab_lab::spec::Side, name: &str| {
                report
                    .hosts
                    .iter()
                    .find(|h| h.name == name)
                    .or_else(|| report.hosts.iter().find(|h| h.side == side))
                    .cloned()
                    .ok_or_else(|| failure(format!("lab {lab} has no {name} host")))
            };
            let client = host(bloatlab_lab::spec::Side::Client, "client")?;
            let server = host(bloatlab_lab::spec::Side::Server, "server")?;
            let mut probers = Vec::new();
            let mut reflectors = Vec::new();
            let mut responder = None;
            if plan.reflectors.is_empty() {
                let bind = SocketAddr::new(IpAddr::V4(server.addr), 0);
                let h = bloatlab_lab::netns::run_in(&server.netns, || {
                    bloatlab_probe::responder::spawn(bind).map_err(|e| {
                        bloatlab_lab::LabError::Sys {
                            op: format!("probe responder in {}", server.netns),
                            source: std::io::Error::other(e.to_string()),
                        }
                    })
                })
                .map_err(|e| failure(e.to_string()))?;
                let addr = h.local_addr();
                reflectors.push(format!("{addr} (responder in lab host {})", server.name));
                probers.push(Prober {
                    index: 0,
                    cfg: io::probe_config(addr, plan.mode, plan.interval),
                    netns: Some(client.netns.clone()),
                });
                responder = Some(h);
            } else {
                for (i, r) in plan.reflectors.iter().enumerate() {
                    let addr = reflector_addr(r, port).map_err(exit::usage)?;
                    reflectors.push(r.clone());
                    probers.push(Prober {
                        index: i,
                        cfg: io::probe_config(addr, plan.mode, plan.interval),
                        netns: Some(client.netns.clone()),
                    });
                }
            }
            Ok(Setup {
                sink: RateSink::Lab {
                    dir: dir.clone(),
                    lab: lab.clone(),
                    stage: stage.clone(),
                },
                load: LoadSource::Lab {
                    dir,
                    lab: lab.clone(),
                    stage: names,
                    last: [None, None],
                },
                probers,
                reflectors,
                target: format!("lab {lab} stage {stage}"),
                framing,
                responder,
            })
        }
    }
}

/// Runs `bloatlab autorate`.
pub fn run(a: AutorateArgs) -> anyhow::Result<()> {
    let plan = resolve(&a).map_err(exit::usage)?;
    if let Some(f) = &a.output {
        let parent = f.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) {
            return Err(exit::usage(format!(
                "-o {}: the directory does not exist",
                f.display()
            )));
        }
    }
    let ctl =
        Controller::new(plan.params, plan.down, plan.up).map_err(|e| exit::usage(e.to_string()))?;
    let mut s = setup(&plan, a.port)?;
    let stop = crate::cmd::stop_on_interrupt()?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let bounds: Vec<(Direction, Bounds)> = ctl
        .directions()
        .into_iter()
        .filter_map(|d| ctl.bounds(d).map(|b| (d, b)))
        .collect();
    // One-way delays are known only when the prober and reflector share a clock (a lab);
    // the log says which it turned out to be.
    let mut log = RunLog::new(
        started,
        s.target.clone(),
        s.reflectors.clone(),
        false,
        &plan.params,
        &bounds,
    );
    let quit = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let probers = std::mem::take(&mut s.probers);
    let outcome = std::thread::scope(|scope| {
        for p in &probers {
            let tx = tx.clone();
            let quit = &quit;
            scope.spawn(move || io::run_prober(p, quit, &tx));
        }
        drop(tx);
        let r = control_loop(&plan, ctl, &mut s, &mut log, &rx, stop.flag());
        quit.store(true, Ordering::Relaxed);
        r
    });
    if let Some(h) = s.responder.take() {
        h.stop();
    }
    log.summarise();
    if let Some(f) = &a.output {
        let bytes = serde_json::to_vec_pretty(&log)?;
        bloatlab_results::write_atomic(f, |w| w.write_all(&bytes))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    let end = log.end.clone();
    for d in log.bounds.keys() {
        let sm = &log.summary[d];
        // A direction that never got a rate (the first command failed) has nothing to say.
        let Some(now) = end.as_ref().and_then(|e| e.rates.get(d)).copied() else {
            continue;
        };
        let n = |r: &str| sm.changes.get(r).copied().unwrap_or(0);
        println!(
            "autorate {d}: rate now {}; over the run min {} median {} max {} (p5/p50/max); {} bloat cuts, {} raises, {} decay steps",
            mbit(now),
            mbit(sm.min_bit_s),
            mbit(sm.median_bit_s),
            mbit(sm.max_bit_s),
            n("bloat"),
            n("load"),
            n("decay"),
        );
    }
    if !plan.emit.is_empty() && outcome.is_ok() {
        let measured = |d: Direction| {
            log.measured(d).map(|m| {
                // The bounds autorate ran with hold the measured ones.
                let b = log.bounds[d.name()];
                let clampb = |v: BitRate| BitRate(v.0.clamp(b.min_bit_s, b.max_bit_s));
                Bounds {
                    min: clampb(m.min),
                    base: clampb(m.base),
                    max: clampb(m.max),
                }
            })
        };
        let secs = end.as_ref().map_or(0.0, |e| e.seconds);
        let deploy = Deploy {
            source: format!(
                "bloatlab autorate ({}, {secs:.0} s): rates are the 5th percentile, median and highest rate it applied",
                s.target
            ),
            iface: plan.emit_iface.clone(),
            down: measured(Direction::Down),
            up: measured(Direction::Up),
            framing: s.framing,
            params: Some(plan.params),
        };
        println!();
        emit::print(&plan.emit, &deploy);
    }
    outcome
}

/// `12.345 Mbit/s`.
fn mbit(bps: u64) -> String {
    format!("{:.3} Mbit/s", bps as f64 / 1e6)
}

fn idx(d: Direction) -> usize {
    match d {
        Direction::Down => 0,
        Direction::Up => 1,
    }
}

/// Merges a change into the one waiting to be applied: the first `from`, the last decision.
fn merge(pending: &mut [Option<Change>; 2], c: Change) {
    let slot = &mut pending[idx(c.direction)];
    *slot = Some(match slot.take() {
        Some(p) => Change { from: p.from, ..c },
        None => c,
    });
}

fn line(t: Duration, c: &ChangeRecord) -> String {
    format!(
        "autorate {:8.3}s {:>4}: {} -> {} {} (delay +{:.1} ms, {} delayed, load {})",
        t.as_secs_f64(),
        c.direction.name(),
        mbit(c.from_bit_s),
        mbit(c.to_bit_s),
        c.reason,
        c.delta_ms,
        c.delayed,
        mbit(c.load_bit_s)
    )
}

/// How long without any delay sample at the start before autorate gives up.
const FIRST_SAMPLE_WITHIN: Duration = Duration::from_secs(10);
/// Load readings that may fail in a row before autorate gives up.
const LOAD_FAILURES: u32 = 10;

fn control_loop(
    plan: &Plan,
    mut ctl: Controller,
    s: &mut Setup,
    log: &mut RunLog,
    rx: &mpsc::Receiver<Msg>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut applied: [Option<BitRate>; 2] = [None, None];
    let finish =
        |log: &mut RunLog, applied: &[Option<BitRate>; 2], reason: &str, msg: Option<String>| {
            log.end = Some(End {
                reason: reason.into(),
                message: msg,
                seconds: t0.elapsed().as_secs_f64(),
                rates: Direction::BOTH
                    .into_iter()
                    .filter_map(|d| applied[idx(d)].map(|r| (d.name().to_string(), r.0)))
                    .collect(),
            });
        };
    // Start every direction at its base rate.
    for d in ctl.directions() {
        let base = ctl.view(d).map(|v| v.rate).unwrap_or(BitRate(0));
        if let Err(e) = s.sink.set(d, base) {
            finish(log, &applied, "set_rate_failed", Some(e.clone()));
            let kept = kept_rates(&applied);
            return Err(failure(format!("autorate stopped: {e}; {kept}")));
        }
        applied[idx(d)] = Some(base);
        let rec = ChangeRecord {
            t_s: t0.elapsed().as_secs_f64(),
            direction: d,
            from_bit_s: 0,
            to_bit_s: base.0,
            reason: "start".into(),
            load_bit_s: 0,
            delta_ms: 0.0,
            delayed: 0,
        };
        eprintln!("{}", line(t0.elapsed(), &rec));
        log.changes.push(rec);
    }
    let mut next_tick = Instant::now();
    let mut load_failures = 0u32;
    let mut samples = 0u64;
    let mut one_way_seen = false;
    let mut pending: [Option<Change>; 2] = [None, None];
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            finish(log, &applied, "interrupted", None);
            return Ok(());
        }
        if plan.duration.is_some_and(|d| now.duration_since(t0) >= d) {
            finish(log, &applied, "duration", None);
            return Ok(());
        }
        if samples == 0 && now.duration_since(t0) >= FIRST_SAMPLE_WITHIN {
            let msg = format!(
                "no reflector answered within {FIRST_SAMPLE_WITHIN:?} ({})",
                s.reflectors.join(", ")
            );
            finish(log, &applied, "probes_failed", Some(msg.clone()));
            return Err(failure(format!(
                "autorate stopped: {msg}; {}",
                kept_rates(&applied)
            )));
        }
        let wait = next_tick
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        let first = match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let msg = "every probe thread ended".to_string();
                finish(log, &applied, "probes_failed", Some(msg.clone()));
                return Err(failure(format!(
                    "autorate stopped: {msg}; {}",
                    kept_rates(&applied)
                )));
            }
        };
        for m in first.into_iter().chain(rx.try_iter()) {
            match m {
                Msg::Sample {
                    reflector,
                    at,
                    rtt,
                    one_way,
                } => {
                    samples += 1;
                    let t = at.saturating_duration_since(t0);
                    for d in ctl.directions() {
                        let delay = match (one_way, d) {
                            (Some((up, _)), Direction::Up) => up,
                            (Some((_, down)), Direction::Down) => down,
                            (None, _) => rtt,
                        };
                        if let Some(c) = ctl.on_delay(t, d, reflector, delay) {
                            merge(&mut pending, c);
                        }
                    }
                    if one_way.is_some() && !one_way_seen {
                        one_way_seen = true;
                        log.delay = "one_way".into();
                    }
                }
                Msg::Failed { reflector, message } => {
                    eprintln!(
                        "autorate: reflector {}: {message} (retrying)",
                        s.reflectors.get(reflector).map_or("?", |r| r.as_str())
                    );
                }
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            // No catching up after a slow rate command: the next reading is one interval on.
            next_tick += plan.load_interval;
            if next_tick <= now {
                next_tick = now + plan.load_interval;
            }
            match s.load.poll() {
                Ok(loads) => {
                    load_failures = 0;
                    for (d, r) in loads {
                        ctl.on_load(d, r);
                    }
                }
                Err(e) => {
                    load_failures += 1;
                    if load_failures >= LOAD_FAILURES {
                        finish(log, &applied, "load_failed", Some(e.clone()));
                        return Err(failure(format!(
                            "autorate stopped: {e}; {}",
                            kept_rates(&applied)
                        )));
                    }
                }
            }
            let t = t0.elapsed().as_secs_f64();
            for d in ctl.directions() {
                if let (Some(v), Some(r)) = (ctl.view(d), applied[idx(d)]) {
                    log.ticks.push(Tick {
                        t_s: t,
                        direction: d,
                        rate_bit_s: r.0,
                        load_bit_s: v.load.0,
                        delta_ms: v.delta_s * 1e3,
                    });
                }
            }
        }
        for slot in &mut pending {
            let Some(c) = slot.take() else { continue };
            if applied[idx(c.direction)] == Some(c.to) {
                continue;
            }
            if let Err(e) = s.sink.set(c.direction, c.to) {
                finish(log, &applied, "set_rate_failed", Some(e.clone()));
                return Err(failure(format!(
                    "autorate stopped: {e}; {}",
                    kept_rates(&applied)
                )));
            }
            let mut rec = ChangeRecord::of(&c);
            rec.from_bit_s = applied[idx(c.direction)].map_or(0, |r| r.0);
            applied[idx(c.direction)] = Some(c.to);
            eprintln!("{}", line(c.at, &rec));
            log.changes.push(rec);
        }
    }
}

/// `the last rates applied stay: down 9.000 Mbit/s, up 2.000 Mbit/s`.
fn kept_rates(applied: &[Option<BitRate>; 2]) -> String {
    let v: Vec<String> = Direction::BOTH
        .into_iter()
        .filter_map(|d| applied[idx(d)].map(|r| format!("{} {}", d.name(), mbit(r.0))))
        .collect();
    if v.is_empty() {
        "no rate was changed".into()
    } else {
        format!("the last rates applied stay: {}", v.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        a: AutorateArgs,
    }

    fn resolved(argv: &[&str]) -> Result<Plan, String> {
        let mut v = vec!["autorate"];
        v.extend_from_slice(argv);
        let m = <Cli as clap::CommandFactory>::command()
            .try_get_matches_from(v)
            .map_err(|e| e.to_string())?;
        let c = Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
        resolve(&c.a)
    }

    const RATES: [&str; 6] = ["--min", "2mbit", "--base", "10mbit", "--max", "20mbit"];

    fn with(extra: &[&'static str]) -> Vec<&'static str> {
        let mut v = vec!["--lab", "h23t"];
        v.extend_from_slice(&RATES);
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn flags_resolve_into_a_plan() {
        let p = resolved(&with(&["--stage", "router", "--duration", "10s"])).unwrap();
        assert_eq!(
            p.place,
            Place::Lab {
                lab: "h23t".into(),
                stage: "router".into()
            }
        );
        assert_eq!(p.duration, Some(Duration::from_secs(10)));
        assert_eq!(p.down.unwrap().base, BitRate(10_000_000));
        assert_eq!(p.params, Params::default());
        let p = resolved(&[
            "--set-rate-cmd",
            "echo {dir} {kbit}",
            "--iface",
            "lo",
            "--reflector",
            "192.0.2.1",
            "--min",
            "5mbit/1mbit",
            "--base",
            "20mbit/5mbit",
            "--max",
            "80mbit/10mbit",
            "--direction",
            "up",
            "--duration",
            "2.5",
            "--delay-thr",
            "15ms",
            "--cut-full-delay",
            "40ms",
            "--cut-achieved",
            "0.9",
            "--bloat-refractory",
            "150ms",
            "--emit",
            "sqm,cake-autorate",
        ])
        .unwrap();
        assert!(p.down.is_none());
        let up = p.up.unwrap();
        assert_eq!(
            (up.min.0, up.base.0, up.max.0),
            (1_000_000, 5_000_000, 10_000_000)
        );
        assert_eq!(p.duration, Some(Duration::from_millis(2500)));
        assert_eq!(p.params.delay_thr, Duration::from_millis(15));
        assert_eq!(p.params.cut_achieved, Some(0.9));
        assert_eq!(p.params.bloat_refractory, Duration::from_millis(150));
        let off = resolved(&with(&["--cut-achieved", "off"])).unwrap();
        assert_eq!(off.params.cut_achieved, None);
        assert_eq!(p.emit, [Format::Sqm, Format::CakeAutorate]);
        assert_eq!(p.emit_iface, "lo");
    }

    #[test]
    fn bad_input_names_the_flag() {
        for (argv, want) in [
            (with(&["--duration", "0s"]), "--duration"),
            (with(&["--duration", "soon"]), "--duration"),
            (with(&["--delay-thr", "0ms"]), "--delay-thr"),
            (with(&["--bloat-count", "9"]), "--bloat-count"),
            (with(&["--bloat-window", "0"]), "--bloat-window"),
            (with(&["--high-load", "2"]), "--high-load"),
            (with(&["--cut-max", "1.5"]), "--cut-max"),
            (with(&["--raise-max", "0.5"]), "--raise-max"),
            (with(&["--cut-achieved", "1.5"]), "--cut-achieved"),
            (with(&["--cut-achieved", "never"]), "--cut-achieved"),
            (with(&["--bloat-refractory", "0ms"]), "--bloat-refractory"),
            (with(&["--bloat-refractory", "61s"]), "--bloat-refractory"),
            (with(&["--interval", "1ms"]), "--interval"),
            (with(&["--emit", "openwrt"]), "--emit"),
            (with(&["--emit-iface", "a b"]), "--emit-iface"),
            (
                vec![
                    "--lab",
                    "Bad Name!",
                    "--min",
                    "1mbit",
                    "--base",
                    "2mbit",
                    "--max",
                    "3mbit",
                ],
                "--lab",
            ),
        ] {
            let e = resolved(&argv).unwrap_err();
            assert!(e.contains(want), "{argv:?}: {e}");
        }
        let rates = |min: &'static str, base: &'static str, max: &'static str| {
            vec!["--lab", "h23t", "--min", min, "--base", base, "--max", max]
        };
        for (argv, want) in [
            (rates("0mbit", "1mbit", "2mbit"), "--min"),
            (rates("fast", "1mbit", "2mbit"), "--min"),
            (rates("3mbit", "1mbit", "5mbit"), "--base down"),
            (rates("1mbit", "4mbit", "3mbit"), "--max down"),
            (rates("1mbit", "4mbit", "9mbit/3mbit"), "--max up"),
        ] {
            let e = resolved(&argv).unwrap_err();
            assert!(e.contains(want), "{argv:?}: {e}");
        }
        let mut v = vec![
            "--set-rate-cmd",
            "tc ... {rate}",
            "--iface",
            "lo",
            "--reflector",
            "h",
        ];
        v.extend_from_slice(&RATES);
        let e = resolved(&v).unwrap_err();
        assert!(e.contains("--set-rate-cmd") && e.contains("{rate}"), "{e}");
        let mut v = vec!["--set-rate-cmd", "echo {kbit}", "--iface", "lo"];
        v.extend_from_slice(&RATES);
        assert!(resolved(&v).unwrap_err().contains("--reflector"));
        // clap: the command needs --iface; --lab excludes both.
        let mut v = vec!["--set-rate-cmd", "echo {kbit}"];
        v.extend_from_slice(&RATES);
        assert!(resolved(&v).unwrap_err().contains("--iface"));
        let e = resolved(&with(&["--iface", "lo"])).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        let e = resolved(&RATES).unwrap_err();
        assert!(e.contains("--lab") && e.contains("--set-rate-cmd"), "{e}");
        assert!(resolved(&["--lab", "x"]).unwrap_err().contains("--min"));
    }

    #[test]
    fn reflectors_take_host_port_forms() {
        assert_eq!(
            reflector_addr("192.0.2.1", 5001).unwrap(),
            "192.0.2.1:5001".parse().unwrap()
        );
        assert_eq!(
            reflector_addr("192.0.2.1:7", 5001).unwrap(),
            "192.0.2.1:7".parse().unwrap()
        );
        assert_eq!(
            reflector_addr("[::1]", 9).unwrap(),
            "[::1]:9".parse().unwrap()
        );
        assert_eq!(reflector_addr("localhost:5", 9).unwrap().port(), 5);
        for bad in ["host:port", "a b", ""] {
            assert!(
                reflector_addr(bad, 1)
                    .unwrap_err()
                    .starts_with("--reflector"),
                "{bad}"
            );
        }
    }

    #[test]
    fn merged_changes_keep_the_first_from_and_the_last_decision() {
        let c = |from: u64, to: u64, reason| Change {
            direction: Direction::Down,
            at: Duration::ZERO,
            from: BitRate(from),
            to: BitRate(to),
            reason,
            load: BitRate(0),
            delta_s: 0.0,
            delayed: 0,
        };
        let mut p = [None, None];
        merge(&mut p, c(10, 11, bloatlab_autorate::Reason::Load));
        merge(&mut p, c(11, 8, bloatlab_autorate::Reason::Bloat));
        let m = p[0].unwrap();
        assert_eq!(
            (m.from, m.to, m.reason),
            (BitRate(10), BitRate(8), bloatlab_autorate::Reason::Bloat)
        );
        assert!(p[1].is_none());
    }
}
