//! One lab session for the commands that orchestrate `bloatlab` subprocesses in a lab
//! (`demo`, `experiment`, `tune`): bring the lab up, start a server in host `server`, wait
//! until it answers, run commands quietly or stoppably, and always tear everything down.
//!
//! The contract, the same for every caller:
//!
//! * **Teardown is owned by the guard.** [`LabSession::up`] creates the guard *before*
//!   `lab up` runs, so even a half-built lab is removed. Dropping the session first kills
//!   the server (by its PID) and then, for a lab it brought up, runs `lab down NAME`: on
//!   success, error and Ctrl-C alike. A session over a lab someone else owns
//!   ([`LabSession::existing`], `tune --lab`) only kills its server.
//! * **Children die with us** ([`crate::orphan::die_with_parent`]), except `lab down`,
//!   which must finish even when we are being killed.
//! * **Ctrl-C.** Background and stoppable children run in their own process group, so a
//!   terminal's SIGINT reaches only us; a stoppable child then gets SIGINT from us (a
//!   `bloatlab test` saves what it measured, marked interrupted) and SIGKILL
//!   [`STOP_GRACE`] later.
//! * **The server is ready** when a one-probe `bloatlab ping` from host `client` gets an
//!   answer (polled every 300 ms, at most [`SERVER_WAIT`]).

use bloatlab_invoke::ping::{Limit, PingConfig};
use bloatlab_invoke::server::ServerInvocation;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use bloatlab_os::child::{ChildGuard, last_line};

/// How long a stopped run gets to save what it measured before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long the lab's server gets to answer its first probe.
pub const SERVER_WAIT: Duration = Duration::from_secs(15);

/// How often the server is probed while waiting for it.
const SERVER_POLL: Duration = Duration::from_millis(300);

/// Why a session step failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A step failed: `lab up`, `starting the server`, `waiting for the server`.
    #[error("{step}: {detail}")]
    Step {
        /// What was being done.
        step: &'static str,
        /// What went wrong (the subprocess's last line of stderr, or why it did not run).
        detail: String,
    },
    /// The stop flag was raised (Ctrl-C); the guard tears down what was built.
    #[error("interrupted")]
    Interrupted,
}

fn cannot_run(exe: &Path, e: std::io::Error) -> String {
    format!("cannot run {}: {e}", exe.display())
}

/// Runs `exe ARGS` to completion with its output captured (stdin from /dev/null).
pub fn run_quiet(exe: &Path, args: &[&str]) -> Result<Output, String> {
    crate::orphan::die_with_parent(&mut Command::new(exe))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| cannot_run(exe, e))
}

/// Starts `exe ARGS` in the background in its own process group, output discarded; it is
/// killed by PID when the returned guard drops.
pub fn spawn_quiet(exe: &Path, args: &[&str]) -> Result<ChildGuard, String> {
    spawn_quiet_with(exe, args, |c| c)
}

/// [`spawn_quiet`], with `setup` applied to the command first (its environment).
fn spawn_quiet_with(
    exe: &Path,
    args: &[&str],
    setup: impl FnOnce(&mut Command) -> &mut Command,
) -> Result<ChildGuard, String> {
    let mut cmd = Command::new(exe);
    setup(crate::orphan::die_with_parent(&mut cmd))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(ChildGuard)
        .map_err(|e| cannot_run(exe, e))
}

/// Runs `exe ARGS` with its output captured; once `stop` is raised the child gets SIGINT,
/// and SIGKILL [`STOP_GRACE`] later if it is still running.
pub fn run_stoppable(exe: &Path, args: &[&str], stop: &AtomicBool) -> Result<Output, String> {
    let mut cmd = Command::new(exe);
    crate::orphan::die_with_parent(&mut cmd)
        .args(args)
        .process_group(0);
    bloatlab_os::child::run_stoppable(&mut cmd, stop, STOP_GRACE).map_err(|e| cannot_run(exe, e))
}

/// The address of a lab's host `server`, from the lab's address plan (the same in every
/// lab; `lab exec` gives it to commands as `BLOATLAB_SERVER`).
pub fn server_addr() -> Ipv4Addr {
    bloatlab_lab::LabSpec::new("addr")
        .hosts()
        .into_iter()
        .find(|h| h.name == "server")
        .map(|h| h.addr)
        .expect("every lab has a host named server")
}

/// `bloatlab ping --json` output that holds at least one answered probe.
pub fn ping_answered(o: &Output) -> bool {
    o.status.success()
        && crate::collect::parse_ping(&o.stdout).is_ok_and(|p| {
            p.series
                .iter()
                .any(|s| s.samples.iter().any(|x| x.delay_ns.is_some()))
        })
}

/// A lab and the server in it, for as long as this value lives (see the module docs).
#[derive(Debug)]
pub struct LabSession {
    exe: PathBuf,
    name: String,
    /// Brought up by us: taken down when dropped.
    owned: bool,
    server: Option<ChildGuard>,
}

impl LabSession {
    /// `lab up NAME ARGS`, with the teardown guard in place before it runs. `Interrupted`
    /// when `stop` was raised meanwhile (the lab is then taken down).
    pub fn up(
        exe: &Path,
        name: &str,
        args: &[&str],
        stop: &AtomicBool,
    ) -> Result<LabSession, SessionError> {
        let session = LabSession {
            exe: exe.to_path_buf(),
            name: name.to_owned(),
            owned: true,
            server: None,
        };
        let mut up = vec!["lab", "up", name];
        up.extend_from_slice(args);
        let step = |detail| SessionError::Step {
            step: "lab up",
            detail,
        };
        let o = run_quiet(exe, &up).map_err(step)?;
        if !o.status.success() {
            return Err(step(last_line(&o.stderr)));
        }
        if stop.load(Ordering::Relaxed) {
            return Err(SessionError::Interrupted);
        }
        Ok(session)
    }

    /// A session in lab `name`, which someone else brought up and takes down.
    pub fn existing(exe: &Path, name: &str) -> LabSession {
        LabSession {
            exe: exe.to_path_buf(),
            name: name.to_owned(),
            owned: false,
            server: None,
        }
    }

    /// The lab's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `lab exec NAME HOST -- EXE ARGS`: `bloatlab ARGS` run in host `host`.
    pub fn exec_argv(&self, host: &str, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = ["lab", "exec", &self.name, host, "--"]
            .map(str::to_owned)
            .to_vec();
        v.push(self.exe.to_string_lossy().into_owned());
        v.extend(args.iter().map(|s| (*s).to_owned()));
        v
    }

    /// Starts `server` in host `server` (its command line is
    /// [`bloatlab_invoke::server::to_argv`], its permit key, if any, goes in
    /// [`bloatlab_invoke::server::child_env`]'s variable, and an inherited one is
    /// removed) and waits until it answers a latency probe on its port.
    pub fn start_server(
        &mut self,
        server: &ServerInvocation,
        stop: &AtomicBool,
    ) -> Result<(), SessionError> {
        let args = bloatlab_invoke::server::to_argv(server);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let argv = self.exec_argv("server", &args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (var, key) = bloatlab_invoke::server::child_env(server);
        let child = spawn_quiet_with(&self.exe, &argv, |c| match key {
            Some(k) => c.env(var, k),
            None => c.env_remove(var),
        })
        .map_err(|detail| SessionError::Step {
            step: "starting the server",
            detail,
        })?;
        self.server = Some(child);
        self.wait_for_server(server.engine.port, SERVER_WAIT, stop)
    }

    /// Probes the server from host `client` until it answers, for at most `limit`.
    fn wait_for_server(
        &self,
        port: u16,
        limit: Duration,
        stop: &AtomicBool,
    ) -> Result<(), SessionError> {
        let step = |detail| SessionError::Step {
            step: "waiting for the server",
            detail,
        };
        let mut ping = PingConfig::new(server_addr().to_string());
        ping.port = port;
        ping.limit = Limit::Count(1);
        ping.timeout = Duration::from_secs(1);
        ping.json = true;
        let ping = bloatlab_invoke::ping::to_argv(&ping);
        let argv = self.exec_argv(
            "client",
            &ping.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(SessionError::Interrupted);
            }
            let o = run_quiet(&self.exe, &argv).map_err(step)?;
            if ping_answered(&o) {
                return Ok(());
            }
            if t0.elapsed() > limit {
                return Err(step(format!(
                    "the server in the lab did not answer probes within {} s",
                    limit.as_secs()
                )));
            }
            std::thread::sleep(SERVER_POLL);
        }
    }

    /// Runs `bloatlab ARGS` in host `host`, stoppable by `stop` ([`run_stoppable`]).
    pub fn run_in(&self, host: &str, args: &[&str], stop: &AtomicBool) -> Result<Output, String> {
        let argv = self.exec_argv(host, args);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        run_stoppable(&self.exe, &argv, stop)
    }

    /// `lab status NAME --json`, or `null` when it cannot be read.
    pub fn status_json(&self) -> serde_json::Value {
        run_quiet(&self.exe, &["lab", "status", &self.name, "--json"])
            .ok()
            .and_then(|o| serde_json::from_slice(&o.stdout).ok())
            .unwrap_or_default()
    }
}

impl Drop for LabSession {
    fn drop(&mut self) {
        // The server first: it runs in the lab's namespace.
        drop(self.server.take());
        if !self.owned {
            return;
        }
        // Not tied to our life: the lab must go even while we are being killed.
        let out = Command::new(&self.exe)
            .args(["lab", "down", &self.name])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if !o.status.success() => {
                tracing::warn!("lab down {}: {}", self.name, last_line(&o.stderr));
            }
            Err(e) => tracing::warn!("lab down {}: {e}", self.name),
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests;
