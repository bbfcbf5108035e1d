//! The I/O of `bloatlab autorate`, around the sans-IO controller (crates/autorate):
//!
//! * [`spawn_prober`]: one thread per reflector running the probe client (crates/probe)
//!   in sessions of [`SESSION`], optionally inside a lab host's namespace, sending every
//!   answered probe to the main loop as a [`Msg::Sample`].
//! * [`LoadSource`]: achieved rates per direction from an interface's counters
//!   (/sys/class/net/IF/statistics) or a lab stage's counters (`lab status`).
//! * [`RateSink`]: applies a rate through the user's command template or a lab stage
//!   (`lab set --stage-rate`, the live emulator control path).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use bloatlab_autorate::Direction;
use bloatlab_lab::state::StateDir;
use bloatlab_probe::client::{self, ClientConfig, Mode, ProbeLine};
use bloatlab_probe::session::{Limit, ReplyEvent};
use bloatlab_units::BitRate;

/// Length of one probe session: a session keeps every probe's result, so a long run is cut
/// into sessions to keep memory flat (as cake-autorate restarts irtt).
pub const SESSION: Duration = Duration::from_secs(600);

/// What the probe threads tell the main loop.
#[derive(Debug)]
pub enum Msg {
    /// An answered probe.
    Sample {
        /// The reflector's index.
        reflector: usize,
        /// When the reply arrived.
        at: Instant,
        /// Round-trip time.
        rtt: Duration,
        /// One-way delays (up, down) when both ends share a clock.
        one_way: Option<(Duration, Duration)>,
    },
    /// A session failed (no answer, an unreachable port); the thread retries.
    Failed {
        /// The reflector's index.
        reflector: usize,
        /// Why.
        message: String,
    },
}

/// One reflector's prober: where, how, and the namespace to run in (a lab host's).
#[derive(Debug, Clone)]
pub struct Prober {
    /// The reflector's index in the log.
    pub index: usize,
    /// Probe settings (the limit is replaced per session).
    pub cfg: ClientConfig,
    /// Run inside this network namespace (lab mode).
    pub netns: Option<String>,
}

fn sessions(p: &Prober, stop: &AtomicBool, tx: &Sender<Msg>) {
    while !stop.load(Ordering::Relaxed) {
        let mut cfg = p.cfg;
        cfg.limit = Limit::Duration(SESSION);
        let r = client::run(&cfg, stop, |l: &ProbeLine| {
            if let ReplyEvent::Answered { rtt, .. } = l.event {
                let one_way = l.one_way.map(|(up, down)| {
                    // Shared clocks: exact, so never meaningfully negative.
                    let pos = |d: bloatlab_probe::SignedDuration| {
                        d.to_duration().unwrap_or(Duration::ZERO)
                    };
                    (pos(up), pos(down))
                });
                let _ = tx.send(Msg::Sample {
                    reflector: p.index,
                    at: Instant::now(),
                    rtt,
                    one_way,
                });
            }
        });
        if let Err(e) = r {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let _ = tx.send(Msg::Failed {
                reflector: p.index,
                message: e.to_string(),
            });
            // Retry after a pause, watching for the stop.
            for _ in 0..10 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Runs prober `p` until `stop` (in its namespace, if any).
pub fn run_prober(p: &Prober, stop: &AtomicBool, tx: &Sender<Msg>) {
    match &p.netns {
        None => sessions(p, stop, tx),
        Some(ns) => {
            let r = bloatlab_lab::netns::run_in(ns, || {
                sessions(p, stop, tx);
                Ok(())
            });
            if let Err(e) = r {
                let _ = tx.send(Msg::Failed {
                    reflector: p.index,
                    message: format!("netns {ns}: {e}"),
                });
            }
        }
    }
}

/// A UDP probe config for `target` every `interval`.
pub fn probe_config(target: SocketAddr, mode: Mode, interval: Duration) -> ClientConfig {
    let mut cfg = ClientConfig::new(target, Limit::Duration(SESSION));
    cfg.mode = mode;
    cfg.interval = interval;
    if mode == Mode::Icmp {
        cfg.size = 64;
    }
    // Autorate must see bloat of seconds as samples, not as silence.
    cfg.timeout = Duration::from_secs(5);
    cfg.no_answer_after = Duration::from_secs(5);
    cfg
}

/// Where achieved rates come from.
#[derive(Debug)]
pub enum LoadSource {
    /// An interface's byte counters: rx = download, tx = upload.
    Iface {
        /// Its name.
        name: String,
        /// The last reading: when, rx bytes, tx bytes.
        last: Option<(Instant, u64, u64)>,
    },
    /// A lab stage's dequeued bytes, per direction, with the emulator's own timestamps.
    Lab {
        /// The state directory.
        dir: StateDir,
        /// The lab.
        lab: String,
        /// The stage's name in each direction (down, up).
        stage: [Option<String>; 2],
        /// The last reading per direction: emulator time (s), bytes.
        last: [Option<(f64, u64)>; 2],
    },
}

fn read_counter(iface: &str, which: &str) -> Result<u64, String> {
    let p = PathBuf::from(format!("/sys/class/net/{iface}/statistics/{which}"));
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    s.trim()
        .parse()
        .map_err(|_| format!("{}: not a number: {s:?}", p.display()))
}

/// Checks that `iface`'s counters can be read.
pub fn check_iface(iface: &str) -> Result<(), String> {
    let ok = !iface.is_empty()
        && iface.len() < 16
        && !iface.contains('/')
        && iface != "."
        && iface != "..";
    if !ok {
        return Err(format!("--iface {iface:?}: not an interface name"));
    }
    read_counter(iface, "rx_bytes")
        .map(|_| ())
        .map_err(|e| format!("--iface {iface}: cannot read its counters ({e})"))
}

fn idx(d: Direction) -> usize {
    match d {
        Direction::Down => 0,
        Direction::Up => 1,
    }
}

impl LoadSource {
    /// The achieved rates since the last call, for the directions that have a new reading.
    pub fn poll(&mut self) -> Result<Vec<(Direction, BitRate)>, String> {
        match self {
            LoadSource::Iface { name, last } => {
                let now = Instant::now();
                let rx = read_counter(name, "rx_bytes")?;
                let tx = read_counter(name, "tx_bytes")?;
                let out = match last {
                    Some((t, rx0, tx0)) => {
                        let s = now.duration_since(*t).as_secs_f64();
                        if s <= 0.0 {
                            return Ok(Vec::new());
                        }
                        let rate =
                            |a: u64, b: u64| BitRate((a.saturating_sub(b) as f64 * 8.0 / s) as u64);
                        vec![
                            (Direction::Down, rate(rx, *rx0)),
                            (Direction::Up, rate(tx, *tx0)),
                        ]
                    }
                    None => Vec::new(),
                };
                *last = Some((now, rx, tx));
                Ok(out)
            }
            LoadSource::Lab {
                dir,
                lab,
                stage,
                last,
            } => {
                let Some(st) = bloatlab_lab::status::read_counters(dir, lab) else {
                    return Err(format!("lab {lab}: cannot read its counters (is it up?)"));
                };
                let mut out = Vec::new();
                for d in Direction::BOTH {
                    let Some(name) = &stage[idx(d)] else { continue };
                    let Some(rep) = st.direction(d.name()) else {
                        continue;
                    };
                    let Some(s) = rep.link.stages.iter().find(|s| &s.name == name) else {
                        continue;
                    };
                    let bytes = s.link.dequeued.bytes.0;
                    let now = rep.at_s;
                    if let Some((t, b)) = last[idx(d)]
                        && now > t
                    {
                        let r = bytes.saturating_sub(b) as f64 * 8.0 / (now - t);
                        out.push((d, BitRate(r as u64)));
                    }
                    if last[idx(d)].is_none_or(|(t, _)| now > t) {
                        last[idx(d)] = Some((now, bytes));
                    }
                }
                Ok(out)
            }
        }
    }
}

/// Where rates go.
#[derive(Debug, Clone)]
pub enum RateSink {
    /// `sh -c` of the template with `{dir}`, `{kbit}`, `{bps}` replaced.
    Command {
        /// The template.
        template: String,
    },
    /// A lab stage, through `lab set --stage-rate`.
    Lab {
        /// The state directory.
        dir: StateDir,
        /// The lab.
        lab: String,
        /// The stage as the user gave it (name or 1-based position).
        stage: String,
    },
}

/// The command for `rate` in `dir`: `{kbit}` whole kbit/s (rounded down, at least 1, so
/// never above the rate decided), `{bps}` bits per second, `{dir}` `down`/`up`.
pub fn expand(t: &str, d: Direction, rate: BitRate) -> String {
    t.replace("{dir}", d.name())
        .replace("{kbit}", &(rate.0 / 1000).max(1).to_string())
        .replace("{bps}", &rate.0.to_string())
}

impl RateSink {
    /// Applies `rate` to `d`; the error says what failed, in one line.
    pub fn set(&self, d: Direction, rate: BitRate) -> Result<(), String> {
        match self {
            RateSink::Command { template } => {
                let cmd = expand(template, d, rate);
                let o = Command::new("sh")
                    .args(["-c", &cmd])
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("--set-rate-cmd `{cmd}` could not start: {e}"))?;
                if o.status.success() {
                    return Ok(());
                }
                let status = match o.status.code() {
                    Some(c) => format!("exited with status {c}"),
                    None => "was killed by a signal".into(),
                };
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                Err(format!("--set-rate-cmd `{cmd}` {status}: {}", last.trim()))
            }
            RateSink::Lab { dir, lab, stage } => {
                let req = bloatlab_lab::control::set::SetRequest {
                    stage_rate: vec![format!("{stage}={}bit", rate.0)],
                    up: d == Direction::Up,
                    down: d == Direction::Down,
                    ..Default::default()
                };
                bloatlab_lab::control::set::set(dir, lab, &req, &mut std::io::sink())
                    .map_err(|e| format!("lab {lab} stage {stage} ({}): {e}", d.name()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // Defined with `--set-rate-cmd` in bloatlab_invoke::autorate.
    use bloatlab_invoke::autorate::check_template;

    #[test]
    fn templates_take_dir_kbit_and_bps() {
        let t = "tc qdisc change dev eth0 root cake bandwidth {kbit}kbit # {dir} {bps}";
        check_template(t).unwrap();
        assert_eq!(
            expand(t, Direction::Up, BitRate(9_500_999)),
            "tc qdisc change dev eth0 root cake bandwidth 9500kbit # up 9500999"
        );
        let e = check_template("tc ... bandwidth {rate}").unwrap_err();
        assert!(e.contains("--set-rate-cmd") && e.contains("{rate}"), "{e}");
        let e = check_template("echo {dir}").unwrap_err();
        assert!(e.contains("{kbit}"), "{e}");
    }

    #[test]
    fn a_failing_command_says_how_it_failed() {
        let s = RateSink::Command {
            template: "echo broken >&2; exit 3 # {kbit}".into(),
        };
        let e = s.set(Direction::Down, BitRate(2_000_000)).unwrap_err();
        assert!(
            e.contains("# 2000") && e.contains("status 3") && e.contains("broken"),
            "{e}"
        );
        let ok = RateSink::Command {
            template: "true {kbit}".into(),
        };
        ok.set(Direction::Up, BitRate(1)).unwrap();
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(check_iface("lo").is_ok());
        for bad in ["", "../x", "a/b", "x234567890123456", "bl-no-such-if0"] {
            let e = check_iface(bad).unwrap_err();
            assert!(e.starts_with("--iface"), "{bad}: {e}");
        }
    }
}
