//! The process driver: runs a [`Plan`]'s runners as subprocesses of the `bloatlab`
//! binary (`client ... --json`, `ping ... --json`), as flent runs netperf and fping, and
//! hands back their raw output with the offsets at which each was spawned.
//!
//! Children get their own process group, so a Ctrl-C at the terminal reaches only us;
//! on a stop request we forward SIGINT to each child by PID (ping then prints what it
//! measured), wait up to [`STOP_GRACE`], and SIGKILL what is left. Every child is reaped
//! on every path (a [`Drop`] guard kills stragglers).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::plan::{Amount, Plan, ProbeMode, Runner, RunnerKind, TcpFlow};
use bloatlab_stats::Direction;

/// How long children get to exit after SIGINT before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// Where the runners go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The `bloatlab` executable to run (normally `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Server host.
    pub host: String,
    /// Server port (TCP for the flows, UDP for the probes).
    pub port: u16,
    /// `--ecn mix`: the SO_MARK (client `--fwmark`) of flows that ask for ECN; a policy
    /// rule routes marked sockets through a route with `features ecn` ([`crate::ecn`]).
    pub ecn_fwmark: Option<u32>,
}

/// One finished subprocess.
#[derive(Debug, Clone)]
pub struct Output {
    /// When it was spawned, from the run start.
    pub spawned: Duration,
    /// When it was seen to exit, from the run start.
    pub exited: Duration,
    /// Exit status (`None`: killed by a signal).
    pub status: Option<i32>,
    /// Its stdout.
    pub stdout: Vec<u8>,
    /// Its stderr.
    pub stderr: Vec<u8>,
}

impl Output {
    /// The last non-empty line of stderr (the error message of a failed runner).
    pub fn error_line(&self) -> String {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_owned()
    }
}

/// Everything one runner produced (several outputs for a pulse train).
#[derive(Debug, Clone)]
pub struct RunnerResult {
    /// The plan's runner.
    pub runner: Runner,
    /// One per subprocess, in start order.
    pub outputs: Vec<Output>,
}

/// The result of driving a plan.
#[derive(Debug)]
pub struct DriveResult {
    /// Per runner, in plan order.
    pub runners: Vec<RunnerResult>,
    /// The stop flag was raised before the plan finished.
    pub interrupted: bool,
}

/// The command line of one subprocess of `runner`.
pub fn runner_args(target: &Target, runner: &Runner, sample_interval: Duration) -> Vec<String> {
    let port = target.port.to_string();
    match &runner.kind {
        RunnerKind::Tcp(flow) => tcp_args(target, runner, flow, sample_interval),
        RunnerKind::Probe(p) => {
            let len = runner.stop.saturating_sub(runner.start);
            let mut a = vec![
                "ping".to_owned(),
                target.host.clone(),
                "-p".into(),
                port,
                "-i".into(),
                format!("{}us", p.interval.as_micros().max(1)),
                "-t".into(),
                secs_arg(len),
                // A floor only: the prober waits up to 3 x the largest RTT seen.
                "--timeout".into(),
                "1".into(),
                "--json".into(),
            ];
            if p.mode == ProbeMode::Icmp {
                a.push("--icmp".into());
            }
            if let Some(t) = p.tos {
                a.extend(["--tos".into(), t.to_arg()]);
            }
            if let Some(s) = p.size {
                a.extend(["-s".into(), s.to_string()]);
            }
            a
        }
    }
}

/// TCP_NOTSENT_LOWAT of load flows: at most about this much unsent data
/// waits in a sender's socket buffer (13 ms at 20 Mbit/s), so what a sender
/// counts as written has nearly all entered the network, and the load stops
/// when its phase ends instead of draining a deep socket buffer.
pub const LOAD_NOTSENT_LOWAT: &str = "32K";

fn tcp_args(target: &Target, runner: &Runner, flow: &TcpFlow, sample: Duration) -> Vec<String> {
    let mut a = vec![
        "client".to_owned(),
        target.host.clone(),
        "-p".into(),
        target.port.to_string(),
        "-i".into(),
        secs_arg(sample),
        "--json".into(),
        // TCP_INFO on the sender: retransmits, RTT, CE deliveries per interval.
        "-e".into(),
        "--notsent-lowat".into(),
        LOAD_NOTSENT_LOWAT.into(),
    ];
    match flow.amount {
        Amount::UntilStop => {
            a.extend([
                "-t".into(),
                secs_arg(runner.stop.saturating_sub(runner.start)),
                // Clean phase end: an RST when the loaded phase ends, no drain
                // of queued data into the recovery phase (docs/tests.md).
                "--abort-at-end".into(),
            ]);
        }
        Amount::Pulses { bytes, .. } => a.extend(["-n".into(), bytes.0.to_string()]),
    }
    if flow.direction == Direction::Down {
        a.push("-R".into());
    }
    if let Some(t) = flow.tos {
        a.extend(["-S".into(), t.to_arg()]);
    }
    if let Some(cc) = &flow.cc {
        a.extend(["-Z".into(), cc.clone()]);
    }
    if let Some(mark) = target.ecn_fwmark.filter(|_| flow.ecn) {
        a.extend(["--fwmark".into(), mark.to_string()]);
    }
    a
}

/// Seconds with millisecond precision, as the CLIs accept them (`2.5`).
pub fn secs_arg(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{}.{:03}", ms / 1000, ms % 1000)
    }
}

/// A running subprocess with threads draining its pipes.
struct Proc {
    child: Child,
    spawned: Duration,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

impl Proc {
    fn spawn(exe: &Path, args: &[String], spawned: Duration) -> std::io::Result<Proc> {
        let mut child = crate::orphan::die_with_parent(&mut Command::new(exe))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Ok(Proc {
            child,
            spawned,
            out,
            err,
        })
    }

    fn signal(&self, sig: libc::c_int) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: plain syscall on the PID of a child we have not reaped yet.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// `Some(output)` once the child has exited.
    fn poll(&mut self, now: Duration) -> Option<Output> {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(_) => {
                let _ = self.child.kill();
                self.child.wait().ok()?
            }
        };
        Some(self.finish(now, status.code()))
    }

    fn finish(&mut self, now: Duration, status: Option<i32>) -> Output {
        let join =
            |h: Option<JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        Output {
            spawned: self.spawned,
            exited: now,
            status,
            stdout: join(self.out.take()),
            stderr: join(self.err.take()),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Per-runner driving state.
struct Slot {
    result: RunnerResult,
    running: Option<Proc>,
    started: u32,
    done: bool,
}

impl Slot {
    fn max_starts(&self) -> u32 {
        match &self.result.runner.kind {
            RunnerKind::Tcp(TcpFlow {
                amount: Amount::Pulses { count, .. },
                ..
            }) => *count,
            _ => 1,
        }
    }
}

/// Runs `plan` against `target`. Returns when every runner has finished, when `stop` is
/// raised (then children are interrupted and what they printed is kept), or at the plan's
/// end plus `grace` (stragglers are killed). `on_tick` is called about every 50 ms with
/// the elapsed time (progress display, CPU sampling).
pub fn drive(
    target: &Target,
    plan: &Plan,
    sample_interval: Duration,
    grace: Duration,
    stop: &AtomicBool,
    mut on_tick: impl FnMut(Duration),
) -> std::io::Result<DriveResult> {
    let t0 = Instant::now();
    let mut slots: Vec<Slot> = plan
        .runners
        .iter()
        .map(|r| Slot {
            result: RunnerResult {
                runner: r.clone(),
                outputs: Vec::new(),
            },
            running: None,
            started: 0,
            done: false,
        })
        .collect();
    let deadline = plan.end() + grace;
    let mut interrupted = false;
    loop {
        let now = t0.elapsed();
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        for s in slots.iter_mut().filter(|s| !s.done) {
            if let Some(p) = s.running.as_mut()
                && let Some(out) = p.poll(now)
            {
                s.running = None;
                let failed = out.status != Some(0);
                s.result.outputs.push(out);
                // A failed pulse ends the train: the next one would fail the same way.
                if failed || s.started >= s.max_starts() {
                    s.done = true;
                    continue;
                }
            }
            if s.running.is_none() && !s.done {
                let r = &s.result.runner;
                if now >= r.stop && s.started > 0 {
                    s.done = true;
                } else if now >= r.start {
                    // A flow spawned late (this loop polls every 20 ms) still ends
                    // at its planned stop: the loaded phase's end.
                    let late = Runner {
                        start: now.max(r.start),
                        ..r.clone()
                    };
                    let args = runner_args(target, &late, sample_interval);
                    tracing::debug!(runner = %r.name, ?args, "spawning");
                    s.running = Some(Proc::spawn(&target.exe, &args, now)?);
                    s.started += 1;
                }
            }
        }
        if slots.iter().all(|s| s.done) {
            break;
        }
        if now >= deadline {
            tracing::warn!("runners still going {grace:?} after the planned end; killing them");
            for s in slots.iter_mut() {
                if let Some(p) = s.running.as_mut() {
                    p.signal(libc::SIGKILL);
                }
            }
            break;
        }
        on_tick(now);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Interrupt what is still running and collect its output.
    for s in slots.iter_mut() {
        if let Some(p) = s.running.as_ref() {
            p.signal(libc::SIGINT);
        }
    }
    let stop_at = Instant::now();
    for s in slots.iter_mut() {
        if let Some(mut p) = s.running.take() {
            let out = loop {
                if let Some(o) = p.poll(t0.elapsed()) {
                    break o;
                }
                if stop_at.elapsed() > STOP_GRACE {
                    p.signal(libc::SIGKILL);
                    let status = p.child.wait().ok().and_then(|st| st.code());
                    break p.finish(t0.elapsed(), status);
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            s.result.outputs.push(out);
        }
    }
    Ok(DriveResult {
        runners: slots.into_iter().map(|s| s.result).collect(),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TestName;
    use crate::plan::{TestParams, plan};

    #[test]
    fn command_lines() {
        let params = TestParams {
            loaded: Duration::from_millis(2500),
            idle_before: Duration::from_secs(1),
            idle_after: Duration::from_secs(1),
            cc: vec!["reno".into()],
            ..TestParams::default()
        };
        let p = plan(TestName::Rrul, &params).unwrap();
        let mut t = Target {
            exe: "bloatlab".into(),
            host: "10.77.0.2".into(),
            port: 5001,
            ecn_fwmark: None,
        };
        let by = |name: &str| p.runners.iter().find(|r| r.name == name).unwrap();
        let a = runner_args(&t, by("tcp_down_ef"), Duration::from_millis(200));
        assert_eq!(
            a.join(" "),
            "client 10.77.0.2 -p 5001 -i 0.200 --json -e --notsent-lowat 32K -t 2.500 \
             --abort-at-end -R -S 0xb8 -Z reno"
        );
        let a = runner_args(&t, by("udp_bk"), Duration::from_millis(200));
        assert_eq!(
            a.join(" "),
            "ping 10.77.0.2 -p 5001 -i 10000us -t 4.500 --timeout 1 --json --tos 0x20"
        );
        let a = runner_args(&t, by("icmp"), Duration::from_millis(200));
        assert!(a.contains(&"--icmp".to_owned()));
        let pulses = plan(TestName::OneVsPulses, &params).unwrap();
        let r = pulses
            .runners
            .iter()
            .find(|r| r.name == "tcp_up_pulses")
            .unwrap();
        let a = runner_args(&t, r, Duration::from_millis(200));
        assert!(a.join(" ").contains("-n 1048576"), "{a:?}");
        // --ecn mix: the first flow of each pair per direction carries the mark.
        let mix = plan(
            TestName::Rrul,
            &TestParams {
                ecn_mix: true,
                ..params
            },
        )
        .unwrap();
        t.ecn_fwmark = Some(4242);
        let marked: Vec<&str> = mix
            .runners
            .iter()
            .filter(|r| runner_args(&t, r, Duration::from_millis(200)).contains(&"4242".into()))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            marked,
            ["tcp_up_be", "tcp_up_cs5", "tcp_down_be", "tcp_down_cs5"],
            "{:?}",
            mix.runners.iter().map(|r| &r.name).collect::<Vec<_>>()
        );
    }

    #[test]
    fn seconds_arguments() {
        assert_eq!(secs_arg(Duration::from_secs(60)), "60");
        assert_eq!(secs_arg(Duration::from_millis(2500)), "2.500");
        assert_eq!(secs_arg(Duration::ZERO), "0.001");
    }
}
