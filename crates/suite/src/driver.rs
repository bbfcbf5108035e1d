//! The process driver: runs a [`Plan`]'s runners as subprocesses of the `bloatlab`
//! binary (`client ... --json`, `ping ... --json`), as flent runs netperf and fping, and
//! hands back their raw output with the offsets at which each was spawned.
//!
//! **Why subprocesses, now that the engine can be embedded** (its config carries the stop
//! token and the output writer): a runner is a separate process so that a flow stuck in a
//! syscall, or a prober waiting out a multi-second queue, can be ended by PID without ending
//! the test that measures it (a thread cannot be killed), so that one runner's crash or
//! memory cannot take the others' samples with it, and so that the kernel ends the runners
//! if the test itself dies (`PR_SET_PDEATHSIG`, `orphan.rs`). The price is the time axis:
//! each runner reports times since its own start, which `collect::align` moves onto the
//! run's axis by the runner's reported CLOCK_REALTIME start (checked against the spawn
//! offset below, which is used when the report is missing or implausible).
//!
//! Children get their own process group, so a Ctrl-C at the terminal reaches only us;
//! on a stop request we forward SIGINT to each child by PID (ping then prints what it
//! measured), wait up to [`STOP_GRACE`], and SIGKILL what is left. Every child is reaped
//! on every path (a [`Drop`] guard kills stragglers).

use bloatlab_os::child::ChildGuard;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::plan::{Amount, Family, Plan, Probe, ProbeMode, Runner, RunnerKind, TcpFlow};
use bloatlab_engine::config::{
    Amount as ClientAmount, ClientConfig, Direction as ClientDirection, OutputFormat,
};
use bloatlab_invoke::ping::{Limit, Mode, PingConfig};
use bloatlab_invoke::test::RpmTestOptions;
use bloatlab_stats::Direction;
use bloatlab_units::Bytes;

/// How long children get to exit after SIGINT before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// Where the runners go.
#[derive(Debug, Clone)]
pub struct Target {
    /// The `bloatlab` executable to run (normally `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Server host.
    pub host: String,
    /// The server's IPv6 address for runners pinned to IPv6 (`rrul46`); `None` = `host`.
    pub host6: Option<String>,
    /// Server port (TCP for the flows, UDP for the probes).
    pub port: u16,
    /// The server's `--permit-key`, passed to every flow and UDP probe stream (ICMP
    /// echo has no key: it does not reach the server's responder).
    pub permit_key: Option<String>,
    /// `--ecn mix`: the SO_MARK (client `--fwmark`) of flows that ask for ECN; a policy
    /// rule routes marked sockets through a route with `features ecn` ([`crate::ecn`]).
    pub ecn_fwmark: Option<u32>,
    /// Where and how the `rpm` test's draft client runs (unused by the other tests).
    pub rpm: RpmClient,
}

/// The `rpm` test's `bloatlab rpm` child: its config URL and its typed options.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmClient {
    /// `--rpm-url`: a config URL or `HOST[:PORT]`, as `bloatlab rpm` takes it; `None` =
    /// `https://HOST:PORT/.well-known/nq` with the test's host and [`Self::port`].
    pub url: Option<String>,
    /// `--rpm-port`: the server's HTTPS port when `url` is not given.
    pub port: u16,
    /// The options the child runs with (trust, mode, protocol, MNP, ID), checked by
    /// `bloatlab test`; its command line is [`bloatlab_invoke::rpm::to_argv`] of
    /// [`RpmTestOptions::child`].
    pub options: RpmTestOptions,
}

impl Default for RpmClient {
    fn default() -> Self {
        RpmClient {
            url: None,
            port: DEFAULT_RPM_PORT,
            options: RpmTestOptions::default(),
        }
    }
}

/// `bloatlab server --https`'s port in the docs and the default of `--rpm-port`.
pub const DEFAULT_RPM_PORT: u16 = 8443;

impl Target {
    /// The config URL the `rpm` test's child fetches.
    pub fn rpm_url(&self) -> String {
        match &self.rpm.url {
            Some(u) => u.clone(),
            None if self.host.contains(':') => {
                format!("https://[{}]:{}/.well-known/nq", self.host, self.rpm.port)
            }
            None => format!("https://{}:{}/.well-known/nq", self.host, self.rpm.port),
        }
    }
}

/// The environment variable that carries the permit key to the `client`, `ping` and
/// `rpm` children (their `--permit-key` reads it): a command line is world-readable in
/// `/proc/PID/cmdline`, a process's environment only by its owner (issue 19). Defined
/// once, beside the flags that read it.
pub use bloatlab_invoke::opts::PERMIT_KEY_ENV;

impl Target {
    /// Gives `cmd` the key in [`PERMIT_KEY_ENV`] when `keyed` and the target has one, and
    /// removes an inherited one otherwise (an ICMP prober takes no key).
    pub fn key_env<'c>(
        &self,
        cmd: &'c mut std::process::Command,
        keyed: bool,
    ) -> &'c mut std::process::Command {
        match self.permit_key.as_deref().filter(|_| keyed) {
            Some(k) => cmd.env(PERMIT_KEY_ENV, k),
            None => cmd.env_remove(PERMIT_KEY_ENV),
        }
    }
}

/// Does a subprocess of `runner` send the key: every TCP flow and UDP probe stream (ICMP
/// echo has no key: it does not reach the server's responder).
pub fn runner_keyed(runner: &Runner) -> bool {
    match &runner.kind {
        RunnerKind::Tcp(_) | RunnerKind::Rpm => true,
        RunnerKind::Probe(p) => p.mode != ProbeMode::Icmp,
    }
}

impl Target {
    /// Where a runner of `family` goes: `host6` for IPv6 when set, else `host` (a
    /// dual-stack test resolves `host` to its IPv4 address first, [`crate::endpoints`]).
    pub fn host_for(&self, family: Option<Family>) -> &str {
        match (family, &self.host6) {
            (Some(Family::V6), Some(h)) => h,
            _ => &self.host,
        }
    }

    /// This target with `host` set to the one for `family` (the pre-flight check of each
    /// family).
    pub fn for_family(&self, family: Option<Family>) -> Target {
        Target {
            host: self.host_for(family).to_owned(),
            ..self.clone()
        }
    }
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
    /// Where an interrupted run's phases are cut; `None`: where its last runner exited
    /// (a run recovered from its journal knows better: the last progress it recorded).
    pub stopped_at: Option<Duration>,
}

/// What [`drive`] reports while it runs.
#[derive(Debug)]
pub enum DriveEvent<'a> {
    /// About every 50 ms, with the elapsed time (progress display, CPU sampling).
    Tick(Duration),
    /// A subprocess of `runner` was started, writing to `spool` (a journaled run).
    Spawned {
        /// The plan's runner.
        runner: &'a Runner,
        /// When, from the run start.
        spawned: Duration,
        /// Its output files.
        spool: &'a Spool,
    },
    /// A subprocess of `runner` has exited (or was stopped) and this is its output.
    Finished {
        /// The plan's runner.
        runner: &'a Runner,
        /// What it produced.
        output: &'a Output,
    },
}

/// The command line of one subprocess of `runner`.
pub fn runner_args(target: &Target, runner: &Runner, sample_interval: Duration) -> Vec<String> {
    match &runner.kind {
        RunnerKind::Tcp(flow) => tcp_args(target, runner, flow, sample_interval),
        // The draft's run ends when its responsiveness is stable or, at the latest, when
        // the loaded phase does (`--duration`); its JSON is read by `crate::rpm`.
        RunnerKind::Rpm => rpm_args(target, runner),
        RunnerKind::Probe(p) => bloatlab_invoke::ping::to_argv(&probe_config(target, runner, p)),
    }
}

/// The `rpm` runner's `bloatlab rpm` command line: [`bloatlab_invoke::rpm::to_argv`] of
/// the target's options, for the loaded phase at most (at least 1 ms).
fn rpm_args(target: &Target, runner: &Runner) -> Vec<String> {
    let url = target.rpm_url();
    let duration = runner
        .stop
        .saturating_sub(runner.start)
        .max(Duration::from_millis(1));
    match target.rpm.options.child(&url, duration) {
        Ok(c) => bloatlab_invoke::rpm::to_argv(&c),
        // `bloatlab test` checked `--rpm-url`; a default URL that does not read (a host
        // name no URL can hold) goes as it is, for the child to refuse with its reason.
        Err(_) => {
            let ok = "https://localhost/.well-known/nq";
            let mut a = target
                .rpm
                .options
                .child(ok, duration)
                .map(|c| bloatlab_invoke::rpm::to_argv(&c))
                .unwrap_or_default();
            if let Some(u) = a.get_mut(1) {
                *u = url;
            }
            a
        }
    }
}

/// What the `ping` child of a probe stream runs with (its command line is this,
/// [`bloatlab_invoke::ping::to_argv`]; the key goes by [`Target::key_env`]).
pub fn probe_config(target: &Target, runner: &Runner, p: &Probe) -> PingConfig {
    let mut c = PingConfig::new(target.host_for(runner.family));
    c.port = target.port;
    c.interval =
        Duration::from_micros(u64::try_from(p.interval.as_micros().max(1)).unwrap_or(u64::MAX));
    c.limit = Limit::Duration(millis(runner.stop.saturating_sub(runner.start)));
    // A floor only: the prober waits up to 3 x the largest RTT seen.
    c.timeout = Duration::from_secs(1);
    c.json = true;
    if p.mode == ProbeMode::Icmp {
        c.mode = Mode::Icmp;
    }
    c.tos = p.tos.map(|t| t.0);
    c.permit_key = target.permit_key.clone().filter(|_| runner_keyed(runner));
    c.set_size(p.size);
    c
}

/// TCP_NOTSENT_LOWAT of load flows: at most about this much unsent data
/// waits in a sender's socket buffer (13 ms at 20 Mbit/s), so what a sender
/// counts as written has nearly all entered the network, and the load stops
/// when its phase ends instead of draining a deep socket buffer.
pub const LOAD_NOTSENT_LOWAT: Bytes = Bytes(32 * 1024);

fn tcp_args(target: &Target, runner: &Runner, flow: &TcpFlow, sample: Duration) -> Vec<String> {
    bloatlab_invoke::client::to_argv(&tcp_config(target, runner, flow, sample))
}

/// What the `client` child of a load flow runs with (its command line is this,
/// [`bloatlab_invoke::client::to_argv`]; the key goes by [`Target::key_env`]).
pub fn tcp_config(
    target: &Target,
    runner: &Runner,
    flow: &TcpFlow,
    sample: Duration,
) -> ClientConfig {
    let mut c = ClientConfig::new(target.host_for(runner.family));
    c.port = target.port;
    c.interval = Some(millis(sample));
    c.format = OutputFormat::Json;
    // TCP_INFO on the sender: retransmits, RTT, CE deliveries per interval.
    c.enhanced = true;
    c.notsent_lowat = Some(LOAD_NOTSENT_LOWAT);
    match flow.amount {
        Amount::UntilStop => {
            c.amount = ClientAmount::Time(millis(runner.stop.saturating_sub(runner.start)));
            // Clean phase end: an RST when the loaded phase ends, no drain
            // of queued data into the recovery phase (docs/tests.md).
            c.abort_at_end = true;
        }
        Amount::Pulses { bytes, .. } => c.amount = ClientAmount::Bytes(bytes),
    }
    if flow.direction == Direction::Down {
        c.direction = ClientDirection::Reverse;
    }
    c.socket.tos = flow.tos.map(|t| t.0);
    c.socket.congestion = flow.cc.clone();
    c.socket.mark = target.ecn_fwmark.filter(|_| flow.ecn);
    c.permit_key = target.permit_key.clone();
    c
}

/// `d` in whole milliseconds, at least one: the precision runners are given.
pub fn millis(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis().max(1)).unwrap_or(u64::MAX))
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
    /// Killed by PID and reaped if the driver unwinds with it still running.
    child: ChildGuard,
    spawned: Duration,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
    /// Where its stdout and stderr go instead of pipes (a journaled run).
    spool: Option<Spool>,
    /// Our own handles on the spool files, read back through them rather than by path:
    /// the output survives its directory being removed mid-run (issue 19: deleting the
    /// `-o` directory lost every runner's output and the run ended "every load flow
    /// failed").
    spooled: Option<(std::fs::File, std::fs::File)>,
}

/// The files a runner writes its stdout and stderr to in a journaled run: unlike a
/// pipe, a file still takes the report a runner writes after the test died.
#[derive(Debug, Clone)]
pub struct Spool {
    /// Its stdout.
    pub stdout: PathBuf,
    /// Its stderr.
    pub stderr: PathBuf,
}

impl Spool {
    /// The files of the `n`th subprocess of `runner` in `dir`.
    pub fn new(dir: &Path, runner: &str, n: u32) -> Spool {
        Spool {
            stdout: dir.join(format!("{runner}-{n}.out")),
            stderr: dir.join(format!("{runner}-{n}.err")),
        }
    }

    /// Reads both (at most [`MAX_SPOOL_BYTES`] each; a missing file is empty).
    pub fn read(&self) -> (Vec<u8>, Vec<u8>) {
        let read = |p: &Path| {
            std::fs::File::open(p)
                .and_then(|f| {
                    let mut v = Vec::new();
                    f.take(MAX_SPOOL_BYTES).read_to_end(&mut v).map(|_| v)
                })
                .unwrap_or_default()
        };
        (read(&self.stdout), read(&self.stderr))
    }

    /// Removes both.
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.stdout);
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Most of a spooled output read back: a client document of a one-hour run at 0.2 s
/// intervals is about 20 MB.
pub const MAX_SPOOL_BYTES: u64 = 64 << 20;

/// Reads a spool file from its start through an open handle (at most
/// [`MAX_SPOOL_BYTES`]); empty if it cannot.
fn read_back(f: &mut std::fs::File) -> Vec<u8> {
    use std::io::{Seek, SeekFrom};
    let mut v = Vec::new();
    if f.seek(SeekFrom::Start(0)).is_ok() {
        let _ = f.take(MAX_SPOOL_BYTES).read_to_end(&mut v);
    }
    v
}

fn drain(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

impl Proc {
    fn spawn(
        exe: &Path,
        args: &[String],
        spawned: Duration,
        spool: Option<Spool>,
        key: impl FnOnce(&mut Command) -> &mut Command,
    ) -> std::io::Result<Proc> {
        let mut cmd = Command::new(exe);
        key(&mut cmd);
        let mut spooled = None;
        match &spool {
            Some(sp) => {
                let open = |p: &Path| {
                    std::fs::File::options()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(p)
                };
                let (out, err) = (open(&sp.stdout)?, open(&sp.stderr)?);
                crate::orphan::stop_with_parent(&mut cmd)
                    .stdout(out.try_clone()?)
                    .stderr(err.try_clone()?);
                spooled = Some((out, err));
            }
            None => {
                crate::orphan::die_with_parent(&mut cmd)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
            }
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()?;
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Ok(Proc {
            child: ChildGuard(child),
            spawned,
            out,
            err,
            spool,
            spooled,
        })
    }

    /// `Some(output)` once the child has exited.
    fn poll(&mut self, now: Duration) -> Option<Output> {
        let child = &mut self.child.0;
        let status = match child.try_wait() {
            Ok(Some(s)) => s,
            Ok(None) => return None,
            Err(_) => {
                let _ = child.kill();
                child.wait().ok()?
            }
        };
        Some(self.finish(now, status.code()))
    }

    fn finish(&mut self, now: Duration, status: Option<i32>) -> Output {
        let join =
            |h: Option<JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        let (stdout, stderr) = match self.spool.take() {
            Some(sp) => {
                // Its output is journaled next (or the run's results are assembled
                // from it): the files are only for a test that dies first. Read through
                // our handles, which outlive the directory (the path is the fallback).
                let both = match self.spooled.take() {
                    Some((mut out, mut err)) => (read_back(&mut out), read_back(&mut err)),
                    None => sp.read(),
                };
                sp.remove();
                both
            }
            None => (join(self.out.take()), join(self.err.take())),
        };
        Output {
            spawned: self.spawned,
            exited: now,
            status,
            stdout,
            stderr,
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
/// end plus `grace` (stragglers are interrupted the same way, and killed if they are still
/// running [`STOP_GRACE`] later). `on_event` is called about every 50 ms with
/// the elapsed time (progress display, CPU sampling), and with each runner output as soon
/// as it exists (the journal). With `spool`, runners write to files in that directory
/// instead of pipes and get SIGTERM, not SIGKILL, if this process dies ([`Spool`]).
pub fn drive(
    target: &Target,
    plan: &Plan,
    sample_interval: Duration,
    grace: Duration,
    stop: &AtomicBool,
    spool: Option<&Path>,
    mut on_event: impl FnMut(DriveEvent<'_>),
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
                on_event(DriveEvent::Finished {
                    runner: &s.result.runner,
                    output: &out,
                });
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
                    let files = spool.map(|d| Spool::new(d, &r.name, s.started));
                    if let Some(f) = &files {
                        on_event(DriveEvent::Spawned {
                            runner: r,
                            spawned: now,
                            spool: f,
                        });
                    }
                    let keyed = runner_keyed(r);
                    s.running = Some(Proc::spawn(&target.exe, &args, now, files, |c| {
                        target.key_env(c, keyed)
                    })?);
                    s.started += 1;
                }
            }
        }
        if slots.iter().all(|s| s.done) {
            break;
        }
        if now >= deadline {
            // Interrupted below like a stopped run, so they print what they measured: a
            // prober still waiting for late replies (it waits up to 3 x the largest RTT,
            // seconds behind a bloated FIFO) would lose its whole series to SIGKILL.
            tracing::warn!(
                "runners still going {grace:?} after the planned end; interrupting them"
            );
            break;
        }
        on_event(DriveEvent::Tick(now));
        std::thread::sleep(Duration::from_millis(20));
    }
    // Interrupt what is still running, all at once, and collect its output.
    let mut still: Vec<(&mut RunnerResult, Proc)> = slots
        .iter_mut()
        .filter_map(|s| Some((&mut s.result, s.running.take()?)))
        .collect();
    let stopped = {
        let mut children: Vec<&mut std::process::Child> =
            still.iter_mut().map(|(_, p)| &mut p.child.0).collect();
        bloatlab_os::child::stop_all(&mut children, STOP_GRACE)
    };
    for ((result, mut p), st) in still.into_iter().zip(stopped) {
        let exited = st.at.saturating_duration_since(t0);
        let out = p.finish(exited, st.status.and_then(|s| s.code()));
        on_event(DriveEvent::Finished {
            runner: &result.runner,
            output: &out,
        });
        result.outputs.push(out);
    }
    Ok(DriveResult {
        runners: slots.into_iter().map(|s| s.result).collect(),
        interrupted,
        stopped_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TestName;
    use crate::plan::{TestParams, plan};

    /// A runner still going at the plan's end + grace is interrupted, not killed, so what it
    /// prints on SIGINT (a prober's JSON) is kept.
    #[test]
    fn stragglers_are_interrupted_and_their_output_kept() {
        let dir = std::env::temp_dir().join(format!("bl-drive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("straggler.sh");
        std::fs::write(
            &exe,
            "#!/bin/sh\ntrap 'echo measured; exit 0' INT\nwhile :; do sleep 0.05; done\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let params = TestParams {
            loaded: Duration::from_millis(300),
            idle_before: Duration::ZERO,
            idle_after: Duration::ZERO,
            ..TestParams::default()
        };
        let mut p = plan(TestName::Ping, &params).unwrap();
        p.runners.truncate(1);
        let t = Target {
            exe: exe.clone(),
            host: "10.77.0.2".into(),
            host6: None,
            port: 5001,
            permit_key: None,
            ecn_fwmark: None,
            rpm: RpmClient::default(),
        };
        let stop = AtomicBool::new(false);
        let r = drive(
            &t,
            &p,
            Duration::from_millis(200),
            Duration::from_millis(200),
            &stop,
            None,
            |_| {},
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let out = &r.runners[0].outputs[0];
        assert_eq!(String::from_utf8_lossy(&out.stdout), "measured\n");
        assert_eq!(out.status, Some(0));
    }

    #[test]
    fn command_lines() {
        let params = TestParams {
            loaded: Duration::from_millis(2500),
            idle_before: Duration::from_secs(1),
            idle_after: Duration::from_secs(1),
            cc: vec![bloatlab_units::CongestionControl::new("reno").unwrap()],
            ..TestParams::default()
        };
        let p = plan(TestName::Rrul, &params).unwrap();
        let mut t = Target {
            exe: "bloatlab".into(),
            host: "10.77.0.2".into(),
            host6: None,
            port: 5001,
            permit_key: None,
            ecn_fwmark: None,
            rpm: RpmClient::default(),
        };
        let by = |name: &str| p.runners.iter().find(|r| r.name == name).unwrap();
        let a = runner_args(&t, by("tcp_down_ef"), Duration::from_millis(200));
        assert_eq!(
            a.join(" "),
            "client 10.77.0.2 -i 0.2 -t 2.5 -Z reno -S 0xb8 --notsent-lowat 32768 --json -e -R \
             --abort-at-end"
        );
        let a = runner_args(&t, by("udp_bk"), Duration::from_millis(200));
        assert_eq!(
            a.join(" "),
            "ping 10.77.0.2 -t 4.5 --tos 0x20 --timeout 1 --json"
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
        // A keyed server: every flow and UDP probe stream sends the key, ICMP cannot; the
        // key goes by environment, never on a command line (/proc/PID/cmdline).
        let keyed = Target {
            permit_key: Some("abcd1234".into()),
            ..t
        };
        for r in &p.runners {
            let a = runner_args(&keyed, r, Duration::from_millis(200));
            assert!(
                !a.iter().any(|x| x.contains("abcd1234")),
                "{}: {a:?}",
                r.name
            );
            let icmp = a.contains(&"--icmp".to_owned());
            assert_eq!(runner_keyed(r), !icmp, "{}", r.name);
            let mut c = std::process::Command::new("true");
            keyed.key_env(&mut c, runner_keyed(r));
            let env: Vec<_> = c.get_envs().collect();
            let want = (!icmp).then_some(std::ffi::OsStr::new("abcd1234"));
            assert_eq!(
                env,
                [(std::ffi::OsStr::new(PERMIT_KEY_ENV), want)],
                "{}",
                r.name
            );
        }
    }

    #[test]
    fn rrul46_runners_go_to_their_family_s_address() {
        let params = TestParams {
            loaded: Duration::from_secs(2),
            idle_before: Duration::from_secs(1),
            idle_after: Duration::from_secs(1),
            ..TestParams::default()
        };
        let p = plan(TestName::Rrul46, &params).unwrap();
        let t = Target {
            exe: "bloatlab".into(),
            host: "10.77.0.2".into(),
            host6: Some("fd00:77::2".into()),
            port: 5001,
            permit_key: None,
            ecn_fwmark: None,
            rpm: RpmClient::default(),
        };
        let sample = Duration::from_millis(200);
        let host_of = |name: &str| {
            let r = p.runners.iter().find(|r| r.name == name).unwrap();
            runner_args(&t, r, sample)[1].clone()
        };
        assert_eq!(host_of("tcp_up_be_v4"), "10.77.0.2");
        assert_eq!(host_of("tcp_down_bk_v4"), "10.77.0.2");
        assert_eq!(host_of("tcp_up_ef_v6"), "fd00:77::2");
        assert_eq!(host_of("tcp_down_cs5_v6"), "fd00:77::2");
        assert_eq!(host_of("udp_bk_v4"), "10.77.0.2");
        assert_eq!(host_of("udp_be_v6"), "fd00:77::2");
        assert_eq!(host_of("icmp_v6"), "fd00:77::2");
        assert_eq!(host_of("icmp_v4"), "10.77.0.2");
        // Unpinned runners and targets without an IPv6 host use `host`.
        assert_eq!(t.host_for(None), "10.77.0.2");
        let v4_only = Target { host6: None, ..t };
        assert_eq!(v4_only.host_for(Some(Family::V6)), "10.77.0.2");
    }

    #[test]
    fn the_rpm_runner_runs_the_drafts_client_for_the_loaded_phase() {
        let params = TestParams {
            loaded: Duration::from_millis(12_500),
            idle_before: Duration::from_secs(2),
            idle_after: Duration::from_secs(2),
            ..TestParams::default()
        };
        let p = plan(TestName::Rpm, &params).unwrap();
        let mut t = Target {
            exe: "bloatlab".into(),
            host: "10.77.0.2".into(),
            host6: None,
            port: 5001,
            permit_key: Some("abcd1234".into()),
            ecn_fwmark: None,
            rpm: RpmClient {
                url: None,
                port: DEFAULT_RPM_PORT,
                options: RpmTestOptions {
                    trust: bloatlab_rpm::client::Trust::Insecure,
                    mode: bloatlab_rpm::client::Mode::Sequential,
                    ..RpmTestOptions::default()
                },
            },
        };
        let r = p.rpm().unwrap();
        assert_eq!(
            runner_args(&t, r, Duration::from_millis(200)).join(" "),
            "rpm https://10.77.0.2:8443/.well-known/nq --duration 12.5 --sequential --insecure \
             --json"
        );
        // The key goes by environment, as to every other keyed runner.
        assert!(runner_keyed(r));
        t.host = "fd00:77::2".into();
        t.rpm.port = 9443;
        assert_eq!(t.rpm_url(), "https://[fd00:77::2]:9443/.well-known/nq");
        t.rpm.url = Some("https://nq.example/.well-known/nq".into());
        assert_eq!(
            runner_args(&t, r, Duration::ZERO)[1],
            t.rpm.url.clone().unwrap()
        );
    }

    #[test]
    fn seconds_arguments() {
        assert_eq!(secs_arg(Duration::from_secs(60)), "60");
        assert_eq!(secs_arg(Duration::from_millis(2500)), "2.500");
        assert_eq!(secs_arg(Duration::ZERO), "0.001");
    }
}
