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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bloatlab_autorate::emit::{Deploy, Framing};
use bloatlab_autorate::log::{ChangeRecord, End, RunLog, Tick};
use bloatlab_autorate::{Bounds, Change, Controller, Direction};
use bloatlab_lab::state::StateDir;
use bloatlab_units::BitRate;

use crate::cmd::autorate_io::{self as io, LoadSource, Msg, Prober, RateSink};
use crate::cmd::emit;
use crate::exit::{self, Exit};

/// The flags, their resolution into a [`Plan`] (every problem names its flag, exit 2)
/// and `to_argv` are defined once in `bloatlab_invoke::autorate`.
pub use bloatlab_invoke::autorate::{AutorateArgs, Place, Plan};

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
    let plan = a.resolve().map_err(|e| exit::usage(e.message))?;
    if let Some(f) = &plan.output {
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
    let mut s = setup(&plan, plan.port)?;
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
    if let Some(f) = &plan.output {
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
