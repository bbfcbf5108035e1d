//! `bloatlab autorate`: the flags of the adaptive shaper controller, resolved into a
//! [`Plan`] (where rates go, the controller's [`Params`] and [`Bounds`], the probing),
//! and [`to_argv`] back for the processes that start it (the experiment's
//! variable-link arm). Every problem names its flag and value; the binary exits 2.

use crate::UsageError;
use bloatlab_autorate::emit::Format;
use bloatlab_autorate::{Bounds, Direction, Params};
use bloatlab_probe::client::Mode;
use bloatlab_units::BitRate;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// The reflectors' port when one has none (a `bloatlab server`'s).
pub const DEFAULT_PORT: u16 = 5001;
/// Time between probes to each reflector.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);
/// Time between load readings.
pub const DEFAULT_LOAD_INTERVAL: Duration = Duration::from_millis(200);

/// `--direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// Client to server (uploads).
    Up,
    /// Server to client (downloads).
    Down,
    /// Up, then down.
    Both,
}

/// Arguments of `bloatlab autorate`.
#[derive(Debug, Args)]
pub struct AutorateArgs {
    /// Control a stage of this running lab (`lab up NAME --stage ...`): rates go to the
    /// stage through `lab set --stage-rate`, the load is the stage's own counters, and the
    /// reflector is a responder autorate starts in the lab's host `server`, probed from
    /// host `client`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["set_rate_cmd", "iface"])]
    pub lab: Option<String>,
    /// With --lab: the stage, by name or 1-based position (as `lab set` takes it).
    #[arg(long, value_name = "STAGE", default_value = "1")]
    pub stage: String,
    /// A real link: the command that applies a rate, run with `sh -c`; `{kbit}` becomes
    /// the rate in whole kbit/s, `{bps}` in bit/s, `{dir}` `down` or `up`. E.g.
    /// 'tc qdisc change dev ifb4eth0 root cake bandwidth {kbit}kbit'.
    #[arg(long, value_name = "CMD", requires = "iface")]
    pub set_rate_cmd: Option<String>,
    /// A real link: the interface whose counters give the load (rx = down, tx = up).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// A reflector, HOST or HOST:PORT: a `bloatlab server` (one-way delays when the clocks
    /// are shared, else RTT), or any host with --icmp. Repeat for several.
    #[arg(long = "reflector", value_name = "HOST[:PORT]")]
    pub reflectors: Vec<String>,
    /// Probe reflectors with ICMP echo (RTT only; root or CAP_NET_RAW).
    #[arg(long)]
    pub icmp: bool,
    /// Reflector port when HOST has none.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Time between probes to each reflector.
    #[arg(long, value_name = "TIME", default_value = "100ms")]
    pub interval: String,
    /// Which direction(s) to control.
    #[arg(long, value_enum, default_value = "both")]
    pub direction: Which,
    /// Lowest rate: RATE for both directions, or DOWN/UP (e.g. 5mbit/1mbit).
    #[arg(long, value_name = "RATE")]
    pub min: String,
    /// Steady-state rate, where autorate starts and drifts back to when idle (RATE or
    /// DOWN/UP).
    #[arg(long, value_name = "RATE")]
    pub base: String,
    /// Highest rate (RATE or DOWN/UP).
    #[arg(long, value_name = "RATE")]
    pub max: String,
    /// Delay above baseline that makes a sample "delayed".
    #[arg(long, value_name = "TIME", default_value = "30ms")]
    pub delay_thr: String,
    /// Bloat when this many of the last --bloat-window samples are delayed (k).
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub bloat_count: usize,
    /// The detection window, samples (n).
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub bloat_window: usize,
    /// Delay above baseline at which a cut is deepest (--cut-max).
    #[arg(long, value_name = "TIME", default_value = "60ms")]
    pub cut_full_delay: String,
    /// The deepest cut: the rate is multiplied by this at --cut-full-delay and above.
    #[arg(long, value_name = "FACTOR", default_value_t = 0.75)]
    pub cut_max: f64,
    /// Where a cut starts: the lower of the shaper rate and SHARE x the achieved rate (what
    /// the link delivered lately), so one cut gets under a line that just slowed; `off`:
    /// from the shaper rate only. An achieved rate below --min is not used.
    #[arg(long, value_name = "SHARE|off", default_value = "1")]
    pub cut_achieved: String,
    /// After a cut, no other cut and no raise for this long.
    #[arg(long, value_name = "TIME", default_value = "300ms")]
    pub bloat_refractory: String,
    /// The largest raise per sample, when loaded and the delay is low.
    #[arg(long, value_name = "FACTOR", default_value_t = 1.04)]
    pub raise_max: f64,
    /// Loaded: achieved rate at least this share of the shaper rate.
    #[arg(long, value_name = "SHARE", default_value_t = 0.75)]
    pub high_load: f64,
    /// Share of the rate moved toward --base per --decay-every when not loaded.
    #[arg(long, value_name = "SHARE", default_value_t = 0.01)]
    pub decay_step: f64,
    /// Time between decay steps.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub decay_every: String,
    /// Time between load readings.
    #[arg(long, value_name = "TIME", default_value = "200ms")]
    pub load_interval: String,
    /// Stop after this long (e.g. 10s, 2h; a bare number is seconds). Default: until
    /// Ctrl-C / SIGTERM.
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Write the run as JSON (schema in docs/autorate.md), atomically, at the end.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// At the end, print a configuration to paste: sqm (OpenWrt sqm-scripts), tc or
    /// cake-autorate (min/base/max from the rates autorate applied). Repeatable.
    #[arg(long, value_name = "FORMAT")]
    pub emit: Vec<String>,
    /// The WAN interface named in --emit output (default: --iface, else eth0).
    #[arg(long, value_name = "IF")]
    pub emit_iface: Option<String>,
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
#[derive(Debug, Clone, PartialEq)]
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
    /// The reflectors' port when one has none.
    pub port: u16,
    /// `-o`: where the run's JSON goes.
    pub output: Option<PathBuf>,
}

/// A time flag's value (`flag` is its long name, `--delay-thr`).
fn time(flag: &'static str, v: &str) -> Result<Duration, UsageError> {
    let bad = |why: String| UsageError::about(&[flag], format!("{flag} {v:?}: {why}"));
    let d = match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
        Ok(_) => return Err(bad("not a time".into())),
        Err(_) => bloatlab_emu::parse_time(v).map_err(|e| bad(e.to_string()))?,
    };
    if d.is_zero() {
        return Err(bad("must be above zero".into()));
    }
    Ok(d)
}

/// `RATE` or `DOWN/UP`: (down, up).
fn rate_pair(flag: &'static str, v: &str) -> Result<(BitRate, BitRate), UsageError> {
    let bad = |why: String| UsageError::about(&[flag], format!("{flag} {v:?}: {why}"));
    let one = |s: &str| {
        let r = bloatlab_emu::parse_rate(s.trim()).map_err(|e| bad(e.to_string()))?;
        if r.0 == 0 {
            return Err(bad("must be greater than zero".into()));
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

impl AutorateArgs {
    /// Resolves the flags into a plan without touching anything; every error names its
    /// flag and value.
    pub fn resolve(&self) -> Result<Plan, UsageError> {
        resolve_flags(self)
    }
}

/// The flag of a [`Params`] or [`Bounds`] field that [`ParamError::field`] names: the
/// field the user sets through it (`cut_min` follows `--cut-max`, `raise_full_delay`
/// must stay under `--delay-thr`).
///
/// [`ParamError::field`]: bloatlab_autorate::ParamError
fn field_flag(field: &str) -> Option<&'static str> {
    Some(match field {
        "delay_thr" | "raise_full_delay" => "--delay-thr",
        "bloat_refractory" => "--bloat-refractory",
        "cut_full_delay" => "--cut-full-delay",
        "bloat_window" => "--bloat-window",
        "bloat_count" => "--bloat-count",
        "cut_max" | "cut_min" => "--cut-max",
        "cut_achieved" => "--cut-achieved",
        "raise_max" => "--raise-max",
        "high_load" => "--high-load",
        "decay_step" => "--decay-step",
        "decay_refractory" => "--decay-every",
        "min" => "--min",
        "base" => "--base",
        "max" => "--max",
        _ => return None,
    })
}

fn param_error(e: &bloatlab_autorate::ParamError) -> UsageError {
    let flags: Vec<&'static str> = field_flag(e.field).into_iter().collect();
    UsageError::about(&flags, e.to_string())
}

fn resolve_flags(a: &AutorateArgs) -> Result<Plan, UsageError> {
    let usage = |flags: &[&'static str], m: &str| Err(UsageError::about(flags, m));
    let place = match (&a.lab, &a.set_rate_cmd, &a.iface) {
        (Some(lab), _, _) => {
            bloatlab_lab::names::validate(lab)
                .map_err(|e| UsageError::about(&["--lab"], format!("--lab: {e}")))?;
            if a.stage.trim().is_empty() {
                return usage(
                    &["--stage"],
                    "--stage: give a stage name or 1-based position",
                );
            }
            Place::Lab {
                lab: lab.clone(),
                stage: a.stage.clone(),
            }
        }
        (None, Some(t), Some(iface)) => {
            check_template(t).map_err(|m| UsageError::about(&["--set-rate-cmd"], m))?;
            Place::Command {
                template: t.clone(),
                iface: iface.clone(),
            }
        }
        (None, None, Some(_)) => {
            return usage(
                &["--iface", "--set-rate-cmd"],
                "--iface: give --set-rate-cmd too (where the rates go)",
            );
        }
        _ => {
            return usage(
                &["--lab", "--set-rate-cmd", "--iface"],
                "give --lab NAME [--stage STAGE], or --set-rate-cmd CMD with --iface IF",
            );
        }
    };
    if matches!(place, Place::Command { .. }) && a.reflectors.is_empty() {
        return usage(
            &["--reflector"],
            "--reflector: give at least one (a `bloatlab server`, or any host with --icmp)",
        );
    }
    let params = Params {
        delay_thr: time("--delay-thr", &a.delay_thr)?,
        bloat_count: a.bloat_count,
        bloat_window: a.bloat_window,
        cut_full_delay: time("--cut-full-delay", &a.cut_full_delay)?,
        cut_max: a.cut_max,
        raise_max: a.raise_max,
        high_load: a.high_load,
        decay_step: a.decay_step,
        decay_refractory: time("--decay-every", &a.decay_every)?,
        bloat_refractory: time("--bloat-refractory", &a.bloat_refractory)?,
        cut_achieved: match a.cut_achieved.trim() {
            "off" => None,
            v => Some(v.parse::<f64>().map_err(|_| {
                UsageError::about(
                    &["--cut-achieved"],
                    format!("--cut-achieved {v:?}: a share (0 to 1) or off"),
                )
            })?),
        },
        ..Params::default()
    };
    // The defaults' cut_min (0.99) must not exceed a user's --cut-max above it.
    let params = Params {
        cut_min: params.cut_min.max(params.cut_max),
        ..params
    };
    params.validate().map_err(|e| param_error(&e))?;
    let (min, base, max) = (
        rate_pair("--min", &a.min)?,
        rate_pair("--base", &a.base)?,
        rate_pair("--max", &a.max)?,
    );
    let bounds = |pick: fn((BitRate, BitRate)) -> BitRate, d: Direction| {
        let b = Bounds {
            min: pick(min),
            base: pick(base),
            max: pick(max),
        };
        b.validate(d.name())
            .map(|()| b)
            .map_err(|e| param_error(&e))
    };
    let down = bounds(|p| p.0, Direction::Down)?;
    let up = bounds(|p| p.1, Direction::Up)?;
    let (down, up) = match a.direction {
        Which::Down => (Some(down), None),
        Which::Up => (None, Some(up)),
        Which::Both => (Some(down), Some(up)),
    };
    let interval = time("--interval", &a.interval)?;
    if interval < Duration::from_millis(10) || interval > Duration::from_secs(10) {
        let m = format!("--interval {}: must be 10ms to 10s", a.interval);
        return usage(&["--interval"], &m);
    }
    let load_interval = time("--load-interval", &a.load_interval)?;
    if load_interval < Duration::from_millis(50) || load_interval > Duration::from_secs(10) {
        let m = format!("--load-interval {}: must be 50ms to 10s", a.load_interval);
        return usage(&["--load-interval"], &m);
    }
    let duration = a
        .duration
        .as_deref()
        .map(|v| time("--duration", v))
        .transpose()?;
    let emit_iface = a
        .emit_iface
        .clone()
        .or_else(|| a.iface.clone())
        .unwrap_or_else(|| "eth0".into());
    check_iface_name(&emit_iface).map_err(|m| UsageError::about(&["--emit-iface"], m))?;
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
        emit: formats(&a.emit).map_err(|m| UsageError::about(&["--emit"], m))?,
        port: a.port,
        output: a.output.clone(),
        emit_iface,
    })
}

/// The placeholders a `--set-rate-cmd` may use.
pub const PLACEHOLDERS: [&str; 3] = ["{dir}", "{kbit}", "{bps}"];

/// Checks a template: a rate placeholder, and no unknown `{...}`.
pub fn check_template(t: &str) -> Result<(), String> {
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        let tail = &rest[i..];
        let end = tail.find('}').map_or(tail.len(), |j| j + 1);
        let word = &tail[..end];
        if !PLACEHOLDERS.contains(&word) {
            return Err(format!(
                "--set-rate-cmd {t:?}: unknown placeholder {word:?} (use {{dir}}, {{kbit}}, {{bps}})"
            ));
        }
        rest = &tail[end..];
    }
    if !t.contains("{kbit}") && !t.contains("{bps}") {
        return Err(format!(
            "--set-rate-cmd {t:?} has no {{kbit}} or {{bps}}: write where the rate goes, e.g. \
             'tc qdisc change dev eth0 root cake bandwidth {{kbit}}kbit'"
        ));
    }
    Ok(())
}

/// `--emit` values: each a format, repeatable or comma-separated.
pub fn formats(values: &[String]) -> Result<Vec<Format>, String> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')) {
        let f = v
            .trim()
            .parse::<Format>()
            .map_err(|e| format!("--emit: {e}"))?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// `--emit-iface`: an interface name as `ip link` takes it.
pub fn check_iface_name(v: &str) -> Result<(), String> {
    let ok = !v.is_empty()
        && v.len() < 16
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("--emit-iface {v:?}: not an interface name"))
    }
}

mod argv;
pub use argv::to_argv;

#[cfg(test)]
mod tests;
