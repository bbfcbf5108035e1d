//! Labs for the tests: unique lab names, a guard that always runs `lab down`, and
//! wrappers around the binary.

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use super::{BIN, stderr, stdout, wait_until};
use super::{Listen, Proc, load};

static N: AtomicU32 = AtomicU32::new(0);

/// A lab name unique to this process and call: `b<pid>-<tag><n>`.
pub fn unique(tag: &str) -> String {
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("b{}-{tag}{n}", std::process::id() % 1_000_000);
    assert!(name.len() <= 16, "test lab name too long: {name}");
    name
}

/// Runs `bloatlab ARGS...` and returns its output.
pub fn bl(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bloatlab")
}

/// A lab brought up by a test; `lab down` runs when it is dropped, on every
/// exit path including a failed assertion. Holds a shared [`load`] guard.
pub struct LabGuard {
    pub name: String,
    _load: load::Guard<'static>,
}

impl LabGuard {
    /// A guard for lab `name`, which the test brings up itself.
    pub fn adopt(name: &str) -> LabGuard {
        LabGuard {
            name: name.to_string(),
            _load: load::shared(),
        }
    }

    /// `lab up NAME ARGS...`, asserting success.
    pub fn up(tag: &str, args: &[&str]) -> LabGuard {
        let name = unique(tag);
        let g = LabGuard::adopt(&name);
        let mut v = vec!["lab", "up", &name];
        v.extend_from_slice(args);
        let o = bl(&v);
        assert!(
            o.status.success(),
            "lab up {name} {args:?} failed: {}{}",
            stdout(&o),
            stderr(&o)
        );
        g
    }

    /// `lab exec NAME HOST -- CMD...`.
    pub fn exec(&self, host: &str, cmd: &[&str]) -> Output {
        let mut v = vec!["lab", "exec", &self.name, host, "--"];
        v.extend_from_slice(cmd);
        bl(&v)
    }

    /// Starts `lab exec NAME HOST -- CMD...` in the background, its output drained,
    /// killed (by PID) when the guard drops.
    pub fn bg(&self, host: &str, cmd: &[&str]) -> Proc {
        let mut v = vec!["lab", "exec", &self.name, host, "--"];
        v.extend_from_slice(cmd);
        Proc::bloatlab(&v)
    }

    /// [`LabGuard::bg`], then waits (10 s at most) until `host` has the sockets `listen`
    /// names open on `port` (read with `ss` inside the host, so nothing connects).
    pub fn serve(&self, host: &str, cmd: &[&str], listen: Listen, port: u16) -> Proc {
        let p = self.bg(host, cmd);
        let open = |flags: &str| {
            stdout(&self.exec(host, &["ss", flags, &format!("sport = :{port}")]))
                .contains(&port.to_string())
        };
        let ok = wait_until(Duration::from_secs(10), || match listen {
            Listen::Tcp => open("-Hltn"),
            Listen::Udp => open("-Hlun"),
            Listen::Both => open("-Hltn") && open("-Hlun"),
        });
        assert!(
            ok,
            "{cmd:?} did not open port {port} ({listen:?}) in lab {}\n{}",
            self.name,
            p.transcript()
        );
        p
    }

    /// `iperf3 -s -1` on the `server` host, once it listens on 5201.
    pub fn iperf3_server(&self) -> Proc {
        self.serve("server", &["iperf3", "-s", "-1"], Listen::Tcp, 5201)
    }

    /// Starts `lab exec NAME HOST -- CMD...` in the background; the caller reaps it
    /// (`wait_with_output`).
    pub fn spawn(&self, host: &str, cmd: &[&str]) -> std::process::Child {
        let mut v = vec!["lab", "exec", &self.name, host, "--"];
        v.extend_from_slice(cmd);
        Command::new(BIN)
            .args(&v)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lab exec")
    }

    /// `lab status NAME --json`, parsed. The output must be a
    /// `bloatlab_lab::status::StatusReport` (the producer's own type), so
    /// every test reading it checks that producer and consumer agree.
    pub fn status(&self) -> serde_json::Value {
        match self.status_typed() {
            Some(r) => serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
            None => serde_json::Value::Null,
        }
    }

    /// `lab status NAME --json` as the typed record; `None` when the
    /// command printed nothing (no such lab). Panics when it printed JSON
    /// that is not a `StatusReport`.
    pub fn status_typed(&self) -> Option<bloatlab_lab::status::StatusReport> {
        let o = bl(&["lab", "status", &self.name, "--json"]);
        if o.stdout.is_empty() {
            return None;
        }
        Some(serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "lab status --json is not a StatusReport: {e}: {}",
                stdout(&o)
            )
        }))
    }

    /// Namespaces of this lab under /run/netns.
    pub fn namespaces(&self) -> Vec<String> {
        lab_namespaces(&self.name)
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = bl(&["lab", "down", &self.name]);
    }
}

/// `/run/netns` entries that belong to lab `name`.
pub fn lab_namespaces(name: &str) -> Vec<String> {
    let prefix = format!("bl-{name}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.strip_prefix(&prefix).is_some_and(|h| !h.contains('-')))
                .collect()
        })
        .unwrap_or_default()
}

/// Round-trip times in ms reported by `fping -C N` run inside `host`.
pub fn fping_rtts(
    lab: &LabGuard,
    host: &str,
    target: &str,
    count: u32,
    period_ms: u32,
) -> Vec<f64> {
    let c = count.to_string();
    let p = period_ms.to_string();
    let o = lab.exec(host, &["fping", "-C", &c, "-p", &p, "-q", target]);
    // fping -C prints "target : 40.12 40.20 - 40.11" on stderr.
    let text = stderr(&o);
    let line = text
        .lines()
        .find(|l| l.starts_with(target))
        .unwrap_or_else(|| panic!("no fping output: {text}"));
    // " : " (an IPv6 target has colons of its own).
    line.split(" : ")
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect()
}

pub fn median(v: &mut [f64]) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The RTTs (ms) in the summary lines of `ping` runs (`rtt min/avg/max/mdev = a/b/c/d ms`: the
/// average of each run, with microseconds, where per-reply lines round to three digits).
pub fn ping_summary_rtts(o: &Output) -> Vec<f64> {
    stdout(o)
        .lines()
        .filter_map(|l| l.split(" = ").nth(1))
        .filter_map(|v| v.split('/').nth(1)?.parse().ok())
        .collect()
}

/// The absolute value of one `nstat` counter in `host`'s namespace.
pub fn nstat(lab: &LabGuard, host: &str, counter: &str) -> u64 {
    let text = stdout(&lab.exec(host, &["nstat", "-asz", counter]));
    text.lines()
        .find_map(|l| l.strip_prefix(counter))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {counter} in nstat output: {text}"))
}

/// The `up` direction's report in `lab status --json`, once counters have been published
/// after the traffic (the forwarding threads publish every 200 ms; 1.2 s is a safe margin).
pub fn up_report(lab: &LabGuard) -> serde_json::Value {
    std::thread::sleep(Duration::from_millis(1200));
    let st = lab.status();
    let up = &st["counters"]["directions"][0];
    assert_eq!(up[0], "up", "{st}");
    up[1].clone()
}

/// Runs an iperf3 client from `client` and returns the receiver's goodput
/// in bit/s (first second omitted: slow start is not the steady state).
pub fn iperf3_goodput(lab: &LabGuard, extra: &[&str]) -> f64 {
    let mut args = vec![
        "iperf3",
        "-c",
        "10.77.0.2",
        "-t",
        "3",
        "-O",
        "1",
        "-J",
        "-C",
        "cubic",
    ];
    args.extend_from_slice(extra);
    let o = lab.exec("client", &args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("iperf3 JSON: {e}: {}{}", stdout(&o), stderr(&o)));
    let sum = if extra.contains(&"-u") {
        &v["end"]["sum"]
    } else {
        &v["end"]["sum_received"]
    };
    sum["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no goodput in {v}"))
}

/// The rate (bit/s) of the first stream of a successful `bloatlab client
/// ... --json` run.
pub fn client_bps(o: &Output) -> f64 {
    assert!(o.status.success(), "client: {}{}", stdout(o), stderr(o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("client JSON: {e}: {}", stdout(o)));
    v["streams"][0]["summary"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no rate in {v}"))
}

/// Starts `bloatlab server -p 5001` on the lab's `server` host and waits (10 s at most) until
/// the `client` host's probes to `server_ip` get answers; the returned guard ends it.
pub fn serve_and_wait(lab: &LabGuard, server_ip: &str) -> Proc {
    let server = lab.bg("server", &[BIN, "server", "-p", "5001"]);
    assert!(
        wait_until(Duration::from_secs(10), || {
            lab.exec(
                "client",
                &[BIN, "ping", server_ip, "-p", "5001", "-t", "0.2", "--json"],
            )
            .status
            .success()
        }),
        "the server in lab {} never answered",
        lab.name
    );
    server
}

/// `bloatlab ping 10.77.0.2 -p 5001 -i INTERVAL -t SECS --json` from the `client` host (a
/// [`serve_and_wait`] server answers), asserting success; the results document.
pub fn bloatlab_ping_json(lab: &LabGuard, interval: &str, secs: &str) -> serde_json::Value {
    let args = [
        BIN,
        "ping",
        "10.77.0.2",
        "-p",
        "5001",
        "-i",
        interval,
        "-t",
        secs,
        "--json",
    ];
    let o = lab.exec("client", &args);
    assert!(o.status.success(), "ping: {}{}", stdout(&o), stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("ping JSON: {e}: {}", stdout(&o)))
}
