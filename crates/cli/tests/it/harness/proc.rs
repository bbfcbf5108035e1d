//! [`Proc`]: one guard for every child process a test starts.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::load;

/// How long a readiness check waits by default: generous, the machine has 2 cores
/// shared with parallel builds.
pub const READY: Duration = Duration::from_secs(20);

/// Which sockets a server must have open before it counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    Tcp,
    Udp,
    /// A TCP listener and a UDP socket on the same port (`bloatlab server`: flows and
    /// latency probes).
    Both,
}

/// A child process killed by PID and reaped when the guard drops, on every exit path.
/// Its stdout and stderr are drained by two threads into buffers, so it never blocks
/// on a full pipe and a test can read everything it printed. It holds a shared
/// [`load`] guard while it runs.
pub struct Proc {
    pub name: String,
    child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    _load: load::Guard<'static>,
}

fn drain(r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            let mut s = into.lock().unwrap_or_else(|e| e.into_inner());
            s.push_str(&line);
            s.push('\n');
        }
    });
}

impl Proc {
    /// Starts `program ARGS...` with stdin from /dev/null.
    pub fn spawn<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Proc {
        let mut cmd = Command::new(program);
        cmd.args(args);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        Proc::start(format!("{program} {}", shown.join(" ")), cmd)
    }

    /// [`Proc::spawn`], named `LABEL (PROGRAM ARGS...)` in assertion messages.
    pub fn spawn_labelled<S: AsRef<OsStr>>(label: &str, program: &str, args: &[S]) -> Proc {
        let mut p = Proc::spawn(program, args);
        p.name = format!("{label} ({})", p.name);
        p
    }

    /// Starts `bloatlab ARGS...`.
    pub fn bloatlab<S: AsRef<OsStr>>(args: &[S]) -> Proc {
        Proc::spawn(super::BIN, args)
    }

    /// Starts `cmd` (its stdin becomes /dev/null, stdout and stderr are drained).
    pub fn start(name: String, mut cmd: Command) -> Proc {
        let load = load::shared();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let out = Arc::new(Mutex::new(String::new()));
        let err = Arc::new(Mutex::new(String::new()));
        if let Some(o) = child.stdout.take() {
            drain(o, out.clone());
        }
        if let Some(e) = child.stderr.take() {
            drain(e, err.clone());
        }
        Proc {
            name,
            child,
            out,
            err,
            _load: load,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything printed on stdout so far.
    pub fn out(&self) -> String {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Everything printed on stderr so far.
    pub fn err(&self) -> String {
        self.err.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Both streams, for assertion messages.
    pub fn transcript(&self) -> String {
        format!(
            "--- {} stdout:\n{}--- stderr:\n{}",
            self.name,
            self.out(),
            self.err()
        )
    }

    /// Polls stdout every 20 ms until `pred` holds (`Ok`) or `within` passes (`Err`
    /// with the last text).
    pub fn poll_out(
        &self,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        self.poll(within, Self::out, pred)
    }

    /// As [`Proc::poll_out`] for stderr.
    pub fn poll_err(
        &self,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        self.poll(within, Self::err, pred)
    }

    fn poll(
        &self,
        within: Duration,
        read: fn(&Proc) -> String,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            let s = read(self);
            if pred(&s) {
                return Ok(s);
            }
            if t0.elapsed() > within {
                return Err(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (up to `within`) until `pred(stdout)` holds and returns stdout; panics
    /// naming `what` with the transcript otherwise.
    pub fn wait_out(&self, what: &str, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        self.poll_out(within, pred)
            .unwrap_or_else(|_| panic!("timed out waiting for {what}\n{}", self.transcript()))
    }

    /// As [`Proc::wait_out`] for stderr.
    pub fn wait_err(&self, what: &str, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        self.poll_err(within, pred)
            .unwrap_or_else(|_| panic!("timed out waiting for {what}\n{}", self.transcript()))
    }

    /// Waits (up to [`READY`]) until the sockets `listen` names are open on `port`.
    /// Reads /proc, so checking does not start a test on the server.
    pub fn wait_listening(&self, port: u16, listen: Listen) -> &Proc {
        let ready = || match listen {
            Listen::Tcp => port_bound(false, port),
            Listen::Udp => port_bound(true, port),
            Listen::Both => port_bound(false, port) && port_bound(true, port),
        };
        let t0 = Instant::now();
        while !ready() {
            assert!(
                t0.elapsed() < READY,
                "{} never bound port {port} ({listen:?})\n{}",
                self.name,
                self.transcript()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self
    }

    /// `Some(status)` once the process has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn alive(&mut self) -> bool {
        self.try_wait().is_none()
    }

    /// Waits (up to `within`) for the process to exit and gives its pipes 100 ms to
    /// drain; kills it and panics with the transcript when it does not exit.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                return st;
            }
            if t0.elapsed() > within {
                let _ = self.child.kill();
                panic!(
                    "{} did not exit within {within:?}\n{}",
                    self.name,
                    self.transcript()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Exactly the process we started (its PID), then reap it. The drain threads end
        // on EOF.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True once something listens on `port` (TCP, state LISTEN) or has it bound (UDP),
/// on IPv4 or IPv6.
pub fn port_bound(udp: bool, port: u16) -> bool {
    let files: &[&str] = if udp {
        &["/proc/net/udp", "/proc/net/udp6"]
    } else {
        &["/proc/net/tcp", "/proc/net/tcp6"]
    };
    let hex = format!(":{port:04X}");
    files.iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&hex) && (udp || cols[3] == "0A")
            })
    })
}
