//! `bloatlab lab`: build, use, inspect and remove an emulated network lab.
//!
//! `lab up` validates the options, claims the name (`/run/bloatlab/NAME.json`),
//! then starts the emulator as a background process (this binary again, as
//! the hidden `lab __daemon NAME`) and waits until it reports that the lab
//! is built, or why it is not. `--foreground` builds and runs the lab in
//! this process until Ctrl-C. Every other subcommand works from the state
//! file, so they also work after the emulator died.

use crate::exit::{Exit, FAILURE, PRIVILEGE, USAGE};
use bloatlab_emu::{Limit, LossModel, Qdisc, QdiscParam, Spelled, StageSpec, TcValue};
use bloatlab_lab::driver::direction::DirectionReport;
use bloatlab_lab::driver::path_probe;
use bloatlab_lab::lab::{Lab, check_privilege, remove_by_name};
use bloatlab_lab::spec::{Backend, DriverSpec, LabSpec, LinkSpec};
use bloatlab_lab::state::{LabState, Phase, StateDir, process_start};
use bloatlab_lab::status::StatusReport;
use bloatlab_lab::{LabError, names, netns, signals};
use bloatlab_units::BitRate;
use clap::{Args, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `bloatlab lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Debug, Subcommand)]
enum LabCmd {
    /// Create lab NAME and start its emulator in the background.
    Up(Box<UpArgs>),
    /// Run CMD inside HOST's namespace of lab NAME.
    Exec(ExecArgs),
    /// Show the lab's hosts, emulator health and counters.
    Status(StatusArgs),
    /// Change a running lab's host settings (TCP ECN) without rebuilding it.
    Set(SetArgs),
    /// Stop the emulator and remove every object of lab NAME (also after a crash).
    Down(NameArg),
    /// List labs (and leftover lab namespaces without a state file).
    List(ListArgs),
    /// Internal: the background emulator started by `lab up`.
    #[command(name = "__daemon", hide = true)]
    Daemon(NameArg),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// The bloatlab emulator in userspace between TUN devices.
    Userspace,
    /// veth pairs through a router namespace with kernel qdiscs (htb/tbf + bfifo).
    Kernel,
}

/// Link options. Each value applies to both directions; `--up-X` / `--down-X`
/// override it for one direction. *up* is client -> server, *down* is
/// server -> client. Values are written as tc writes them and parsed here
/// by the emulator's parser for each (a bad one is a usage error naming
/// its flag).
#[derive(Debug, Args)]
struct LinkArgs {
    /// Bottleneck rate, e.g. `20mbit` (omit for an unshaped link).
    #[arg(long, allow_hyphen_values = true, value_parser = value::<BitRate>)]
    rate: Option<Spelled<BitRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<BitRate>)]
    up_rate: Option<Spelled<BitRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<BitRate>)]
    down_rate: Option<Spelled<BitRate>>,
    /// One-way propagation delay, e.g. `20ms` (RTT = up + down delay).
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Duration>)]
    delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    up_delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    down_delay: Option<Spelled<Duration>>,
    /// Delay jitter, e.g. `1ms`.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Duration>)]
    jitter: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    up_jitter: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    down_jitter: Option<Spelled<Duration>>,
    /// Random loss, e.g. `0.5%`.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    loss: Option<Spelled<LossModel>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    up_loss: Option<Spelled<LossModel>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    down_loss: Option<Spelled<LossModel>>,
    /// Queue limit in packets (`1000p`) or bytes (`64kb`).
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Limit>)]
    limit: Option<Spelled<Limit>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Limit>)]
    up_limit: Option<Spelled<Limit>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Limit>)]
    down_limit: Option<Spelled<Limit>>,
    /// Queue discipline: fifo, codel, fq_codel, pie or cake.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    qdisc: Option<Spelled<Qdisc>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    up_qdisc: Option<Spelled<Qdisc>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    down_qdisc: Option<Spelled<Qdisc>>,
    /// Queue discipline parameter as tc names it, repeatable:
    /// `target=5ms`, `interval=100ms`, `ecn`, `noecn`, `flows=1024`, ...
    #[arg(long = "qdisc-param", value_name = "KEY[=VALUE]", value_parser = qdisc_param)]
    qdisc_param: Vec<Spelled<QdiscParam>>,
    #[arg(
        long = "up-qdisc-param",
        value_name = "KEY[=VALUE]",
        hide_short_help = true,
        value_parser = qdisc_param
    )]
    up_qdisc_param: Vec<Spelled<QdiscParam>>,
    #[arg(
        long = "down-qdisc-param",
        value_name = "KEY[=VALUE]",
        hide_short_help = true,
        value_parser = qdisc_param
    )]
    down_qdisc_param: Vec<Spelled<QdiscParam>>,
    /// A stage of a chained link, repeatable, in the order packets cross
    /// them: `key=value` words, e.g. `--stage 'rate=9mbit qdisc=fq_codel'
    /// --stage 'rate=10mbit qdisc=fifo limit=1000p'` (a shaper in front of a
    /// bloated modem). Keys: name, rate, delay, jitter, loss, limit, qdisc,
    /// overhead, mpu, framing and the qdisc's parameters. With stages,
    /// --delay/--jitter/--loss add a final stage `path`; --rate, --limit,
    /// --qdisc and --qdisc-param are refused. Userspace backend only.
    #[arg(long = "stage", value_name = "KEY=VALUE ...", value_parser = words::<StageSpec>)]
    stage: Vec<Spelled<StageSpec>>,
    /// Stages of the up direction only (replace --stage there).
    #[arg(
        long = "up-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = words::<StageSpec>
    )]
    up_stage: Vec<Spelled<StageSpec>>,
    /// Stages of the down direction only (replace --stage there).
    #[arg(
        long = "down-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = words::<StageSpec>
    )]
    down_stage: Vec<Spelled<StageSpec>>,
}

/// clap's parser for a single link value: the emulator's parser of `T`,
/// reporting what is wrong with the value (clap names the flag and value).
fn value<T: TcValue>(s: &str) -> Result<Spelled<T>, String> {
    Spelled::parse(s).map_err(|e| e.problem.to_string())
}

/// clap's parser for a value made of keys (`--stage`, `--qdisc-param`):
/// the emulator's message names the key at fault.
fn words<T: TcValue>(s: &str) -> Result<Spelled<T>, String> {
    Spelled::parse(s).map_err(|e| e.to_string())
}

/// `--qdisc-param`: the link's own values have flags of their own.
fn qdisc_param(s: &str) -> Result<Spelled<QdiscParam>, String> {
    let p = words::<QdiscParam>(s)?;
    match p.get().key.as_str() {
        k @ ("rate" | "delay" | "jitter" | "loss" | "qdisc") => Err(format!("use --{k} for {k}")),
        _ => Ok(p),
    }
}

impl LinkArgs {
    fn direction(&self, up: bool) -> LinkSpec {
        fn pick<T: Clone>(both: &Option<T>, u: &Option<T>, d: &Option<T>, up: bool) -> Option<T> {
            if up { u } else { d }.clone().or_else(|| both.clone())
        }
        let mut params = self.qdisc_param.clone();
        params.extend_from_slice(if up {
            &self.up_qdisc_param
        } else {
            &self.down_qdisc_param
        });
        LinkSpec {
            rate: pick(&self.rate, &self.up_rate, &self.down_rate, up),
            delay: pick(&self.delay, &self.up_delay, &self.down_delay, up),
            jitter: pick(&self.jitter, &self.up_jitter, &self.down_jitter, up),
            loss: pick(&self.loss, &self.up_loss, &self.down_loss, up),
            limit: pick(&self.limit, &self.up_limit, &self.down_limit, up),
            qdisc: pick(&self.qdisc, &self.up_qdisc, &self.down_qdisc, up),
            params,
            stages: match (up, &self.up_stage, &self.down_stage) {
                (true, u, _) if !u.is_empty() => u.clone(),
                (false, _, d) if !d.is_empty() => d.clone(),
                _ => self.stage.clone(),
            },
        }
    }
}

#[derive(Debug, Args)]
struct UpArgs {
    /// Lab name: 1-16 characters of a-z, 0-9 and '-'.
    name: String,
    /// Emulation backend.
    #[arg(long, value_enum, default_value = "userspace")]
    backend: BackendArg,
    /// Run in this process until Ctrl-C instead of in the background.
    #[arg(long)]
    foreground: bool,
    /// Number of client hosts (client, client2, ...).
    #[arg(long, default_value_t = 1)]
    clients: u32,
    /// Add a third host `peer` on the server side.
    #[arg(long)]
    peer: bool,
    #[command(flatten)]
    link: LinkArgs,
    /// Hosts with TCP ECN on (net.ipv4.tcp_ecn=1): comma-separated names or `all`. Repeatable.
    #[arg(long, value_name = "HOSTS")]
    ecn: Vec<String>,
    /// Default TCP congestion control: `ALGO` for every host or `HOST=ALGO`. Repeatable.
    #[arg(long, value_name = "[HOST=]ALGO")]
    cc: Vec<String>,
    /// MTU of the lab's interfaces, bytes.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Longest busy-wait before a release. Timer sleeps end early by the
    /// timer lateness the emulator measures (up to this) and the rest is
    /// busy-waited, from a budget of 25 % of wall time so a saturated link
    /// never starves the hosts. Without it a VM's ~100 us timer wake-up
    /// latency adds up to ~0.3 ms to every emulated RTT; `0` turns it off.
    #[arg(long, default_value = "200us", value_parser = value::<Duration>)]
    spin: Spelled<Duration>,
    /// Run the forwarding threads with normal priority instead of SCHED_FIFO
    /// (SCHED_FIFO cuts the p99 timing error on a busy host from ms to ~0.2 ms).
    #[arg(long)]
    no_realtime: bool,
    /// Write every packet's fate (time, flow, size, sojourn, verdict) to
    /// PREFIX.up.csv and PREFIX.down.csv (userspace backend).
    #[arg(long, value_name = "PREFIX")]
    trace: Option<std::path::PathBuf>,
    /// Let the hosts hand the emulator TCP super-packets (TSO) and receive
    /// the segments that are due together as one (like a NIC's GRO). The
    /// emulated link still queues, shapes, marks and drops wire-sized
    /// packets; the hosts' stacks run per 64 KB instead of per packet, which
    /// a 1 Gbit/s link needs on a small machine. Off by default: packet
    /// captures inside a host then show super-packets (userspace backend).
    #[arg(long)]
    offload: bool,
    /// Seed of the emulator's random numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep the configured delay as it is. By default the emulator measures
    /// the hosts' path overhead (at `lab up`) and its own release lateness
    /// (continuously) and takes them out of the delay, so an idle ping or
    /// irtt round trip matches the configured one (userspace backend).
    #[arg(long)]
    no_calibrate: bool,
}

#[derive(Debug, Args)]
struct ExecArgs {
    /// Lab name.
    name: String,
    /// Host: client, client2.., server or peer.
    host: String,
    /// Command and arguments.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Lab name.
    name: String,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SetArgs {
    /// Lab name.
    name: String,
    /// TCP ECN of a host (net.ipv4.tcp_ecn 1 = on, 2 = off, the kernel default):
    /// `HOST=on|off` or `all=on|off`. Repeatable. Applies to connections opened afterwards.
    #[arg(
        long,
        value_name = "HOST=on|off",
        required_unless_present = "stage_rate"
    )]
    ecn: Vec<String>,
    /// Rate of a stage of a chained link (`lab up --stage`), by name or
    /// 1-based position: `1=9mbit`, `router=8500kbit`. Repeatable. Applies
    /// to packets serialized from now on; the queues are kept. Both
    /// directions unless `--up` or `--down` is given.
    #[arg(long, value_name = "STAGE=RATE")]
    stage_rate: Vec<String>,
    /// `--stage-rate` applies to the up direction (client to server) only.
    #[arg(long, conflicts_with = "down")]
    up: bool,
    /// `--stage-rate` applies to the down direction (server to client) only.
    #[arg(long)]
    down: bool,
}

#[derive(Debug, Args)]
struct NameArg {
    /// Lab name.
    name: String,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: LabArgs) -> anyhow::Result<()> {
    let dir = StateDir::default();
    match args.cmd {
        LabCmd::Up(a) => up(&dir, *a),
        LabCmd::Exec(a) => exec(&dir, a),
        LabCmd::Status(a) => status(&dir, a),
        LabCmd::Set(a) => set(&dir, a),
        LabCmd::Down(a) => down(&dir, &a.name),
        LabCmd::List(a) => list(&dir, a),
        LabCmd::Daemon(a) => daemon(&dir, &a.name),
    }
}

/// Exit code of a lab error: 2 for bad input, 3 for a missing privilege.
fn code_of(e: &LabError) -> u8 {
    match e {
        LabError::Spec { .. } | LabError::InvalidName { .. } | LabError::NoSuchHost { .. } => USAGE,
        e if e.is_permission() => PRIVILEGE,
        _ => FAILURE,
    }
}

fn lab_err(e: LabError) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: code_of(&e),
        message: e.to_string(),
    })
}

fn build_spec(a: &UpArgs) -> Result<LabSpec, LabError> {
    names::validate(&a.name)?;
    let mut spec = LabSpec::new(&a.name);
    spec.backend = match a.backend {
        BackendArg::Userspace => Backend::Userspace,
        BackendArg::Kernel => Backend::Kernel,
    };
    spec.clients = a.clients;
    spec.peer = a.peer;
    spec.up = a.link.direction(true);
    spec.down = a.link.direction(false);
    spec.mtu = a.mtu;
    let hosts: Vec<String> = spec.hosts().into_iter().map(|h| h.name).collect();
    for list in &a.ecn {
        for h in list.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            if h == "all" {
                spec.ecn_hosts.extend(hosts.iter().cloned());
            } else {
                spec.ecn_hosts.push(h.to_string());
            }
        }
    }
    spec.ecn_hosts.sort();
    spec.ecn_hosts.dedup();
    let mut cc = BTreeMap::new();
    for v in &a.cc {
        match v.split_once('=') {
            Some((h, algo)) => {
                cc.insert(h.to_string(), algo.to_string());
            }
            None => {
                for h in &hosts {
                    cc.insert(h.clone(), v.clone());
                }
            }
        }
    }
    spec.cc = cc;
    spec.driver = DriverSpec {
        spin: *a.spin.get(),
        realtime: !a.no_realtime,
        seed: a.seed,
        trace: a.trace.as_deref().map(trace_prefix).transpose()?,
        offload: a.offload,
        calibrate: !a.no_calibrate && a.backend == BackendArg::Userspace,
    };
    bloatlab_lab::lab::check(&spec)?;
    Ok(spec)
}

/// Why `check_up_args` refused the options.
#[derive(Debug)]
pub struct UpArgsError {
    /// The flags at fault, when known: clap's argument (`--down-loss`), or the
    /// lab spec's field (`--rate/--up-rate` gives both).
    pub flags: Vec<String>,
    /// The message as `lab up` prints it (clap's starts with `error: `).
    pub message: String,
}

/// Checks the options of `lab up NAME ARGS...` as `lab up` would (clap with the emulator's
/// value parsers, then the lab spec and its backend's check), without building anything.
/// For `experiment run`, which checks every point before it starts.
pub fn check_up_args(name: &str, args: &[String]) -> Result<(), UpArgsError> {
    use clap::Parser;
    use clap::error::{ContextKind, ContextValue};
    #[derive(Debug, Parser)]
    struct Up {
        #[command(flatten)]
        up: UpArgs,
    }
    let mut argv = vec!["up".to_string(), name.to_string()];
    argv.extend(args.iter().cloned());
    let a = Up::try_parse_from(argv).map_err(|e| UpArgsError {
        // `--down-loss <DOWN_LOSS>`: the flag is the first word.
        flags: match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(arg)) => arg
                .split_whitespace()
                .next()
                .map(str::to_string)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        },
        message: e.to_string(),
    })?;
    build_spec(&a.up).map(|_| ()).map_err(|e| UpArgsError {
        // `--rate/--up-rate`, `--stage/--up-stage 2 key name`: the flags are the first word.
        flags: match &e {
            LabError::Spec { field, .. } => field
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .split('/')
                .filter(|f| f.starts_with("--"))
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        },
        message: e.to_string(),
    })
}

/// `--trace PREFIX` made absolute (the emulator may run in the background
/// from another directory); its directory must exist.
fn trace_prefix(p: &std::path::Path) -> Result<std::path::PathBuf, LabError> {
    let bad = |why: String| LabError::Spec {
        field: "--trace".into(),
        value: p.display().to_string(),
        why,
    };
    let abs = std::env::current_dir()
        .map_err(|e| bad(e.to_string()))?
        .join(p);
    if abs.file_name().is_none() {
        return Err(bad("give a file name prefix, not a directory".into()));
    }
    match abs.parent() {
        Some(d) if d.is_dir() => Ok(abs),
        _ => Err(bad("its directory does not exist".into())),
    }
}

/// Refuses a name whose state file or namespaces exist.
fn check_free(dir: &StateDir, name: &str) -> Result<(), LabError> {
    if dir.state(name).exists() {
        return Err(LabError::NameInUse {
            name: name.into(),
            what: format!("{} exists", dir.state(name).display()),
        });
    }
    if let Some(ns) = netns::list()
        .into_iter()
        .find(|ns| names::is_lab_netns(name, ns))
    {
        return Err(LabError::NameInUse {
            name: name.into(),
            what: format!("namespace {ns} exists"),
        });
    }
    Ok(())
}

fn up(dir: &StateDir, a: UpArgs) -> anyhow::Result<()> {
    let spec = build_spec(&a).map_err(lab_err)?;
    check_privilege("bloatlab lab up").map_err(lab_err)?;
    check_free(dir, &spec.name).map_err(lab_err)?;
    let st = LabState::new(&spec, dir);
    dir.claim(&st).map_err(lab_err)?;
    if a.foreground {
        return run_lab(dir, st, None).map_err(lab_err);
    }
    match spawn_daemon(dir, &spec.name) {
        Ok(()) => {
            print_summary(&spec);
            Ok(())
        }
        Err(e) => {
            // The daemon cleans up after itself; this covers a daemon that
            // died before it could.
            if let Ok(Some(st)) = dir.read(&spec.name)
                && !st.emulator_alive()
            {
                let _ = remove_by_name(&spec.name, &st.namespaces);
                dir.remove(&spec.name);
            }
            Err(e)
        }
    }
}

/// From this rate on, the default (no offload) emulator can run out of CPU
/// on a small machine: 1 Gbit/s gave 807-995 Mbit/s on a 2-vCPU VM
/// (docs/benchmarks.md).
const OFFLOAD_HINT_BPS: f64 = 500e6;

/// A note for `lab up` when a direction is fast enough to want `--offload`.
fn offload_hint(spec: &LabSpec) -> Option<String> {
    if spec.driver.offload || spec.backend != Backend::Userspace {
        return None;
    }
    let fast = [&spec.up, &spec.down]
        .into_iter()
        .filter_map(|l| l.rate.as_ref().map(|r| *r.get()))
        .any(|r| r.bits_per_sec_f64() >= OFFLOAD_HINT_BPS);
    fast.then(|| {
        "note: at 500 Mbit/s and above the emulator may run short of CPU without offloads \
         (rate errors, TUN ring drops in `lab status`); `--offload` keeps emulated packets \
         wire-sized and cuts that cost (docs/lab.md, Offloads)"
            .to_string()
    })
}

fn print_summary(spec: &LabSpec) {
    println!("lab {} is up ({:?} backend)", spec.name, spec.backend);
    if let Some(note) = offload_hint(spec) {
        eprintln!("{note}");
    }
    for h in spec.hosts() {
        println!(
            "  {:<9} {:<12} {:<12} netns {}",
            h.name, h.addr, h.addr6, h.netns
        );
    }
    println!(
        "run commands with: bloatlab lab exec {} HOST -- CMD; remove with: bloatlab lab down {}",
        spec.name, spec.name
    );
}

/// Starts `bloatlab lab __daemon NAME` in its own session and waits for
/// its one-line readiness report on a pipe.
fn spawn_daemon(dir: &StateDir, name: &str) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let log = std::fs::File::create(dir.log(name))?;
    let mut child = Command::new(exe);
    child
        .args(["lab", "__daemon", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    // Its own session, none of our fds: see bloatlab_os::process::detach_on_exec.
    bloatlab_os::process::detach_on_exec(&mut child);
    let mut child = child.spawn()?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no pipe"))?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let report: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_default();
    if report["ok"].as_bool() == Some(true) {
        // The daemon keeps running; it is not our child to wait for.
        std::mem::forget(child);
        return Ok(());
    }
    let _ = child.wait();
    let message = report["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            let tail = std::fs::read_to_string(dir.log(name)).unwrap_or_default();
            format!("the emulator exited during setup: {}", tail.trim())
        });
    let code = report["code"].as_u64().map_or(FAILURE, |c| c as u8);
    Err(anyhow::Error::new(Exit { code, message }))
}

/// The background emulator: builds the lab, reports on stdout, runs.
fn daemon(dir: &StateDir, name: &str) -> anyhow::Result<()> {
    let st = dir
        .read(name)
        .map_err(lab_err)?
        .ok_or_else(|| lab_err(LabError::NoSuchLab(name.into())))?;
    let mut ready = std::io::stdout();
    let report = move |v: serde_json::Value| {
        let _ = writeln!(ready, "{v}");
        let _ = ready.flush();
        // Nobody reads our stdout any more: point it at /dev/null.
        let _ = bloatlab_os::process::stdout_to_dev_null();
    };
    run_lab(dir, st, Some(Box::new(report))).map_err(lab_err)
}

type Ready = Box<dyn FnOnce(serde_json::Value)>;

/// Builds the lab, records it as running, runs until a signal, tears down.
fn run_lab(dir: &StateDir, mut st: LabState, ready: Option<Ready>) -> Result<(), LabError> {
    signals::install();
    let pid = std::process::id();
    st.pid = pid;
    st.pid_start = process_start(pid).unwrap_or(0);
    let name = st.name.clone();
    let result = (|| -> Result<Lab, LabError> {
        dir.write(&st)?;
        let lab = Lab::build(&st.spec)?;
        st.phase = Phase::Running;
        dir.write(&st)?;
        Ok(lab)
    })();
    let mut lab = match result {
        Ok(lab) => lab,
        Err(e) => {
            dir.remove(&name);
            if let Some(r) = ready {
                r(serde_json::json!({"ok": false, "code": code_of(&e), "message": e.to_string()}));
            }
            return Err(e);
        }
    };
    lab.publish_status(dir);
    match ready {
        Some(r) => r(serde_json::json!({"ok": true})),
        None => {
            print_summary(&st.spec);
            eprintln!("running in the foreground; Ctrl-C tears the lab down");
        }
    }
    tracing::info!("lab {name} running (pid {pid})");
    let outcome = lab.run(dir, signals::stop_requested);
    stop_exec_processes(dir, &name);
    drop(lab);
    dir.remove(&name);
    tracing::info!("lab {name} removed");
    outcome
}

fn exec(dir: &StateDir, a: ExecArgs) -> anyhow::Result<()> {
    names::validate(&a.name).map_err(lab_err)?;
    let st = dir
        .read(&a.name)
        .map_err(lab_err)?
        .ok_or_else(|| lab_err(LabError::NoSuchLab(a.name.clone())))?;
    let Some(host) = st.hosts.iter().find(|h| h.name == a.host) else {
        let known = st
            .hosts
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(lab_err(LabError::NoSuchHost {
            lab: a.name,
            host: a.host,
            known,
        }));
    };
    check_privilege("bloatlab lab exec").map_err(lab_err)?;
    // A dead lab forwards nothing: running a command there would only measure that.
    st.check_emulator().map_err(|e| {
        anyhow::Error::new(Exit {
            code: FAILURE,
            message: format!(
                "{e}: nothing would reach the other hosts; `bloatlab lab down {}` removes it",
                a.name
            ),
        })
    })?;
    // exec() keeps our PID: record it so `lab down` can end the command.
    if let Err(e) = dir.register_exec(&a.name, std::process::id()) {
        tracing::warn!("{e}; `lab down` will not be able to stop this command");
    }
    let fd = netns::open(&host.netns).map_err(lab_err)?;
    netns::enter(&fd).map_err(lab_err)?;
    remount_sys();
    let mut cmd = Command::new(&a.cmd[0]);
    cmd.args(&a.cmd[1..])
        .env("BLOATLAB_LAB", &a.name)
        .env("BLOATLAB_HOST", &host.name);
    for h in &st.hosts {
        cmd.env(
            format!("BLOATLAB_{}", h.name.to_uppercase()),
            h.addr.to_string(),
        );
        // Labs recorded before IPv6 have no IPv6 address.
        if !h.addr6.is_unspecified() {
            cmd.env(
                format!("BLOATLAB_{}6", h.name.to_uppercase()),
                h.addr6.to_string(),
            );
        }
    }
    let err = cmd.exec();
    Err(anyhow::Error::new(Exit {
        code: if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
        message: format!("cannot run {:?}: {err}", a.cmd[0]),
    }))
}

/// Gives the command a /sys of its own namespace, as `ip netns exec` does,
/// so tools reading /sys/class/net see the lab's interfaces. Best effort.
fn remount_sys() {
    bloatlab_os::process::private_sysfs();
}

fn set(dir: &StateDir, a: SetArgs) -> anyhow::Result<()> {
    use bloatlab_lab::{hostctl, ratectl};
    names::validate(&a.name).map_err(lab_err)?;
    let st = dir
        .read(&a.name)
        .map_err(lab_err)?
        .ok_or_else(|| lab_err(LabError::NoSuchLab(a.name.clone())))?;
    let mut settings = Vec::new();
    for v in &a.ecn {
        settings.extend(hostctl::parse_ecn_setting(&st, v).map_err(lab_err)?);
    }
    let directions: &[&str] = match (a.up, a.down) {
        (true, _) => &["up"],
        (_, true) => &["down"],
        _ => &["up", "down"],
    };
    let mut rates = Vec::new();
    for v in &a.stage_rate {
        rates.extend(ratectl::parse(&st, v, directions).map_err(lab_err)?);
    }
    check_privilege("bloatlab lab set").map_err(lab_err)?;
    if !rates.is_empty() {
        let done = ratectl::request(dir, &a.name, &rates, std::time::Duration::from_secs(5))
            .map_err(lab_err)?;
        for (stage, r) in done.iter().zip(&rates) {
            println!(
                "lab {}: stage {stage} rate {}",
                a.name,
                bloatlab_units::BitRate(r.rate_bit_s)
            );
        }
    }
    if settings.is_empty() {
        return Ok(());
    }
    hostctl::set_ecn(dir, &a.name, &settings).map_err(lab_err)?;
    for (host, on) in &settings {
        println!(
            "lab {}: {host} ECN {} (net.ipv4.tcp_ecn={})",
            a.name,
            if *on { "on" } else { "off" },
            hostctl::ecn_value(*on)
        );
    }
    Ok(())
}

fn status(dir: &StateDir, a: StatusArgs) -> anyhow::Result<()> {
    let report = bloatlab_lab::status::read(dir, &a.name).map_err(lab_err)?;
    if a.json {
        print_json(&serde_json::to_value(&report)?)?;
    } else {
        print!("{}", status_text(&report));
    }
    match report.problem {
        Some(p) => Err(anyhow::Error::new(Exit {
            code: FAILURE,
            message: p,
        })),
        None => Ok(()),
    }
}

/// JSON on stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(v)?;
    let _ = writeln!(std::io::stdout(), "{text}");
    Ok(())
}

/// `lab status` as text, from the same record `--json` prints.
fn status_text(r: &StatusReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab {}: {:?} backend, emulator pid {} {}",
        r.name,
        r.backend,
        r.pid,
        if r.emulator_alive {
            "running"
        } else {
            "NOT RUNNING (the lab is dead)"
        }
    );
    for h in &r.hosts {
        let _ = writeln!(
            out,
            "  {:<9} {:<12} {:<12} netns {}",
            h.name, h.addr, h.addr6, h.netns
        );
    }
    fn f<T>(o: &Option<Spelled<T>>) -> String {
        o.as_ref().map_or_else(|| "-".into(), |v| v.to_string())
    }
    for (dir, l) in [("up", &r.spec.up), ("down", &r.spec.down)] {
        if l.stages.is_empty() {
            let _ = writeln!(
                out,
                "  {dir:<4} rate {} delay {} jitter {} loss {} limit {} qdisc {} {}",
                f(&l.rate),
                f(&l.delay),
                f(&l.jitter),
                f(&l.loss),
                f(&l.limit),
                f(&l.qdisc),
                Spelled::join(&l.params, " ")
            );
            continue;
        }
        for (i, st) in l.stages.iter().enumerate() {
            let _ = writeln!(out, "  {dir:<4} stage {}: {st}", i + 1);
        }
        if l.delay.is_some() || l.jitter.is_some() || l.loss.is_some() {
            let _ = writeln!(
                out,
                "  {dir:<4} path: delay {} jitter {} loss {}",
                f(&l.delay),
                f(&l.jitter),
                f(&l.loss)
            );
        }
    }
    if !r.spec.ecn_hosts.is_empty() {
        let _ = writeln!(out, "  TCP ECN on: {}", r.spec.ecn_hosts.join(", "));
    }
    let Some(c) = &r.counters else {
        return out;
    };
    for (name, d) in &c.directions {
        let _ = writeln!(
            out,
            "  {:<4} forwarded {} pkts / {} B, unroutable {}, lateness p50 {:.0} us p99 {:.0} us max {:.0} us, {}",
            name,
            d.io.tx_packets,
            d.io.tx_bytes,
            d.io.unroutable,
            d.lateness.p50_us,
            d.lateness.p99_us,
            d.lateness.max_us,
            scheduling(d),
        );
        if d.io.rx_super > 0 || d.io.tx_coalesced > 0 {
            let _ = writeln!(
                out,
                "       offload: {} TSO super-packets cut into wire packets, {} coalesced writes",
                d.io.rx_super, d.io.tx_coalesced
            );
        }
        if let Some(line) = d
            .calibration
            .and_then(|cal| serde_json::to_value(cal).ok())
            .and_then(|v| calibration_line(&v))
        {
            let _ = writeln!(out, "       {line}");
        }
        if d.link.stages.is_empty() {
            let _ = writeln!(out, "       {}", link_counters_text(&d.link.total));
        } else {
            // The whole chain: a packet's queueing summed over the stages it crossed.
            let _ = writeln!(
                out,
                "       chain (sojourn per packet, all stages): {}",
                link_counters_text(&d.link.total)
            );
        }
        for st in &d.link.stages {
            let rate = st.rate_bit_s.map_or("unlimited".to_string(), |r| {
                bloatlab_units::BitRate(r).to_string()
            });
            let _ = writeln!(
                out,
                "       stage {:<8} {rate}: {}",
                st.name,
                link_counters_text(&st.link)
            );
        }
    }
    match &c.calibration {
        Some(cal) => {
            let us = |ns: u64| ns as f64 / 1e3;
            let _ = writeln!(
                out,
                "  calibration at lab up: {}/{} echo requests client -> server through {} ms + {} ms: \
                 RTT p50 {:.3} ms p90 {:.3} ms, overhead {:.1} us (of it release lateness {:.1} us), \
                 {:.1} us taken out of each direction",
                cal.answered,
                cal.probes,
                path_probe::PROBE_DELAY.as_millis(),
                path_probe::PROBE_DELAY.as_millis(),
                us(cal.rtt_p50_ns) / 1e3,
                us(cal.rtt_p90_ns) / 1e3,
                us(cal.overhead_ns),
                us(cal.lateness_ns),
                us(cal.share_ns),
            );
        }
        None if r.spec.backend == Backend::Userspace && !r.spec.driver.calibrate => {
            let _ = writeln!(
                out,
                "  delay calibration off (--no-calibrate): idle RTTs include the emulator's overhead"
            );
        }
        None => {}
    }
    if let Some(t) = &c.host_tracking {
        let _ = writeln!(out, "  {}", host_tracking_line(t));
    }
    for (dir, q) in &c.qdiscs {
        let _ = writeln!(
            out,
            "  {:<4} qdisc {} {:x}: sent {} B / {} pkts, dropped {}, overlimits {}, backlog {} B / {} pkts",
            dir,
            q.kind,
            q.handle >> 16,
            q.bytes,
            q.packets,
            q.drops,
            q.overlimits,
            q.backlog_bytes,
            q.qlen,
        );
    }
    if c.tun_ring_drops > 0 {
        let _ = writeln!(
            out,
            "  WARNING: emulator overloaded: {} packets dropped in TUN rings before emulation",
            c.tun_ring_drops
        );
    }
    out
}

/// One line of a link model's counters: what entered, left, was dropped
/// (by whom) or marked, what waits, and the sojourn percentiles.
fn link_counters_text(l: &bloatlab_emu::Counters) -> String {
    let ms = |ns: Option<u64>| ns.map_or("-".to_string(), |v| format!("{:.2}", v as f64 / 1e6));
    let s = l.sojourn.summary();
    format!(
        "link: enqueued {} pkts, dequeued {}, dropped {} (overflow {}, aqm {}, loss {}), CE-marked {}, backlog {} pkts / {} B, sojourn ms p50 {} p99 {} max {}",
        l.enqueued.packets,
        l.dequeued.packets,
        l.dropped.total().packets,
        l.dropped.overflow.packets,
        l.dropped.aqm.packets,
        l.dropped.loss.packets,
        l.ce_marked.packets,
        l.backlog.packets,
        l.backlog.bytes.0,
        ms(s.p50_ns),
        ms(s.p99_ns),
        ms(s.max_ns),
    )
}

/// The hosts' share as idle probes track it after lab up, for `lab status`.
fn host_tracking_line(t: &bloatlab_lab::driver::host_track::HostTrackReport) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let measured = match t.probes {
        0 => "no idle probe yet".to_string(),
        _ => format!("host overhead median {:.1} us", us(t.measured_ns)),
    };
    let unremoved = match t.unremoved_ns {
        0 => String::new(),
        n => format!("; not removed {:.1} us each way", us(n)),
    };
    format!(
        "host path tracked since lab up: {} idle probes ({} discarded for traffic), {measured}; \
         {:.1} us taken out of each direction (lab up: {:.1} us; {} changes){unremoved}",
        t.probes,
        t.discarded,
        us(t.share_ns),
        us(t.initial_ns),
        t.updates,
    )
}

/// One direction's delay calibration, for `lab status`: what was
/// configured, what is applied, and what could not be taken out.
fn calibration_line(c: &serde_json::Value) -> Option<String> {
    let ms = |k: &str| c[k].as_f64().map(|v| v / 1e6);
    let us = |k: &str| c[k].as_f64().map(|v| v / 1e3).unwrap_or(0.0);
    let (configured, applied) = (ms("configured_ns")?, ms("applied_ns")?);
    let unremoved = match us("unremoved_ns") {
        0.0 => "nothing".to_string(),
        u => format!("{u:.1} us"),
    };
    Some(format!(
        "calibrated delay: configured {configured:.3} ms, applied {applied:.3} ms \
         (path {:.1} us + release lateness p50 {:.1} us of the last {} packets); \
         not removed: {unremoved}, nor the spread above the lateness p50",
        us("host_path_ns"),
        us("forwarding_ns"),
        c["samples"],
    ))
}

/// How a forwarding thread is scheduled, for `lab status`.
fn scheduling(r: &DirectionReport) -> String {
    let policy = if r.realtime {
        "SCHED_FIFO"
    } else {
        "normal priority"
    };
    match r.demotions {
        0 => policy.to_string(),
        n => format!("{policy} (left SCHED_FIFO {n}x: busy enough to starve the hosts)"),
    }
}

/// Stops the emulator (SIGTERM, then SIGKILL after 10 s) and removes
/// everything left by name.
fn down(dir: &StateDir, name: &str) -> anyhow::Result<()> {
    names::validate(name).map_err(lab_err)?;
    check_privilege("bloatlab lab down").map_err(lab_err)?;
    let st = dir.read(name).unwrap_or_else(|e| {
        tracing::warn!("{e}; removing by name");
        None
    });
    let ended = stop_exec_processes(dir, name);
    let listed = st
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    // Before the emulator goes: its teardown removes the namespace names.
    warn_about_stragglers(&listed);
    let mut stopped = false;
    if let Some(st) = &st
        && st.emulator_alive()
    {
        let pid = st.pid as libc::pid_t;
        // A PID verified by its start time.
        let _ = bloatlab_os::process::signal(st.pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while st.emulator_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if st.emulator_alive() {
            tracing::warn!("emulator pid {pid} ignored SIGTERM; killing it");
            let _ = bloatlab_os::process::signal(st.pid, libc::SIGKILL);
            while st.emulator_alive() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        stopped = true;
    }
    let removed = remove_by_name(name, &listed).map_err(lab_err)?;
    dir.remove(name);
    if st.is_none() && removed.is_empty() {
        return Err(lab_err(LabError::NoSuchLab(name.into())));
    }
    let what = if removed.is_empty() {
        String::new()
    } else {
        format!(" (leftover namespaces removed: {})", removed.join(", "))
    };
    let ended = match ended {
        0 => String::new(),
        n => format!(", {n} `lab exec` process(es) ended"),
    };
    println!(
        "lab {name} removed{}{ended}{what}",
        if stopped { ", emulator stopped" } else { "" }
    );
    Ok(())
}

/// Names processes still inside the lab's namespaces (started with plain
/// `ip netns exec`, or children of `lab exec` commands): they are not ours
/// to end, but they keep a namespace alive after its name is removed.
fn warn_about_stragglers(namespaces: &[String]) {
    for ns in namespaces {
        let procs = netns::processes_in(ns);
        if procs.is_empty() {
            continue;
        }
        let list = procs
            .iter()
            .map(|(pid, comm)| format!("{pid} ({comm})"))
            .collect::<Vec<_>>()
            .join(", ");
        eprintln!(
            "bloatlab: warning: still running in {ns}: {list}; they keep the namespace alive after it is removed, end them yourself"
        );
    }
}

/// Ends the commands `lab exec` started in lab `name` (SIGTERM, SIGKILL
/// after 2 s), by their recorded PIDs only: not their children, which may
/// have left for other process groups. Returns how many there were.
fn stop_exec_processes(dir: &StateDir, name: &str) -> usize {
    let pids = dir.exec_processes(name);
    for &pid in &pids {
        // A PID verified by its start time.
        let _ = bloatlab_os::process::signal(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !dir.exec_processes(name).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for pid in dir.exec_processes(name) {
        tracing::warn!("lab exec process {pid} ignored SIGTERM; killing it");
        let _ = bloatlab_os::process::signal(pid, libc::SIGKILL);
    }
    pids.len()
}

fn list(dir: &StateDir, a: ListArgs) -> anyhow::Result<()> {
    let list = bloatlab_lab::status::list(dir, netns::list());
    if a.json {
        print_json(&serde_json::to_value(&list)?)?;
        return Ok(());
    }
    if list.labs.is_empty() {
        println!("no labs");
    }
    for l in &list.labs {
        println!(
            "{:<16} {:<9} {:<8} {}",
            l.name,
            serde_json::to_value(l.backend)?.as_str().unwrap_or("?"),
            if l.emulator_alive { "running" } else { "DEAD" },
            l.hosts.join(",")
        );
    }
    let orphans = &list.orphan_namespaces;
    if !orphans.is_empty() {
        println!(
            "leftover namespaces without a lab (remove with `bloatlab lab down NAME`): {}",
            orphans.join(" ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        cmd: LabCmd,
    }

    fn up_args(argv: &[&str]) -> UpArgs {
        let mut v = vec!["t", "up"];
        v.extend_from_slice(argv);
        match T::try_parse_from(v).unwrap().cmd {
            LabCmd::Up(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn direction_flags_override_shared_ones() {
        let a = up_args(&[
            "x",
            "--rate",
            "20mbit",
            "--down-rate",
            "5mbit",
            "--delay",
            "10ms",
            "--qdisc",
            "fq_codel",
            "--qdisc-param",
            "target=5ms",
            "--up-qdisc-param",
            "ecn",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(s.up.rate.as_ref().map(|r| r.get().0), Some(20_000_000));
        assert_eq!(s.down.rate.as_ref().map(Spelled::text), Some("5mbit"));
        assert_eq!(s.down.delay, Some(Duration::from_millis(10).into()));
        assert_eq!(Spelled::join(&s.up.params, " "), "target=5ms ecn");
        assert_eq!(Spelled::join(&s.down.params, " "), "target=5ms");
    }

    #[test]
    fn stages_apply_to_both_directions_unless_one_is_given() {
        let a = up_args(&[
            "x",
            "--delay",
            "15ms",
            "--stage",
            "rate=9mbit qdisc=fq_codel",
            "--stage",
            "rate=10mbit qdisc=fifo limit=1000p",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(
            Spelled::join(&s.up.stages, " | "),
            "rate=9mbit qdisc=fq_codel | rate=10mbit qdisc=fifo limit=1000p"
        );
        assert_eq!(s.down.stages, s.up.stages);
        assert_eq!(s.down.delay.as_ref().map(Spelled::text), Some("15ms"));
        let a = up_args(&["x", "--stage", "rate=9mbit", "--down-stage", "rate=2mbit"]);
        let s = build_spec(&a).unwrap();
        assert_eq!(Spelled::join(&s.up.stages, " | "), "rate=9mbit");
        assert_eq!(Spelled::join(&s.down.stages, " | "), "rate=2mbit");
        for (argv, field, value) in [
            (
                vec![
                    "x",
                    "--stage",
                    "rate=9mbit qdisc=fq_codel",
                    "--rate",
                    "5mbit",
                ],
                "--rate",
                "5mbit",
            ),
            (
                vec!["x", "--stage", "rate=9mbit", "--backend", "kernel"],
                "--up-stage",
                "rate=9mbit",
            ),
        ] {
            let e = build_spec(&up_args(&argv)).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{argv:?}");
            let m = e.to_string();
            assert!(m.contains(field) && m.contains(value), "{argv:?}: {m}");
        }
    }

    #[test]
    fn ecn_and_cc_expand_to_hosts() {
        let a = up_args(&[
            "x",
            "--clients",
            "2",
            "--ecn",
            "all",
            "--cc",
            "reno",
            "--cc",
            "server=bbr",
        ]);
        let s = build_spec(&a).unwrap();
        assert_eq!(s.ecn_hosts, ["client", "client2", "server"]);
        assert_eq!(s.cc["client2"], "reno");
        assert_eq!(s.cc["server"], "bbr");
    }

    #[test]
    fn offload_is_off_unless_asked_for() {
        assert!(!build_spec(&up_args(&["x"])).unwrap().driver.offload);
        assert!(
            build_spec(&up_args(&["x", "--offload"]))
                .unwrap()
                .driver
                .offload
        );
    }

    #[test]
    fn fast_links_without_offload_get_a_note() {
        let hint = |argv: &[&str]| offload_hint(&build_spec(&up_args(argv)).unwrap());
        assert!(
            hint(&["x", "--rate", "1gbit"])
                .unwrap()
                .contains("--offload")
        );
        assert!(hint(&["x", "--down-rate", "500mbit"]).is_some());
        assert!(hint(&["x", "--rate", "1gbit", "--offload"]).is_none());
        assert!(hint(&["x", "--rate", "100mbit"]).is_none());
        assert!(hint(&["x"]).is_none(), "unshaped");
        assert!(hint(&["x", "--rate", "1gbit", "--backend", "kernel"]).is_none());
    }

    #[test]
    fn bad_values_are_usage_errors_naming_the_field() {
        for (argv, field, value) in [
            (vec!["x", "--ecn", "nobody"], "--ecn", "nobody"),
            (
                vec!["x", "--backend", "kernel", "--offload"],
                "--offload",
                "userspace",
            ),
            (vec!["Bad"], "name", "Bad"),
        ] {
            let e = build_spec(&up_args(&argv)).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{argv:?}");
            let m = e.to_string();
            assert!(m.contains(field) && m.contains(value), "{argv:?}: {m}");
        }
    }

    /// Every link flag's value is parsed by clap with the emulator's parser:
    /// a bad one is a clap usage error naming that exact flag and the
    /// emulator's reason, before any spec exists.
    #[test]
    fn bad_link_values_are_refused_by_clap_naming_the_exact_flag() {
        for (flag, value, why) in [
            ("--rate", "0mbit", "must be greater than zero"),
            ("--up-rate", "20mbits", "unknown unit"),
            ("--up-delay", "5q", "unknown unit"),
            ("--delay", "-5ms", "must not be negative"),
            ("--down-jitter", "1 fortnight", "unknown unit"),
            ("--down-loss", "150%", "out of range"),
            ("--loss", "bursty 1%", "not known"),
            ("--up-limit", "0p", "greater than zero"),
            ("--qdisc", "sfq", "not known"),
            ("--down-qdisc", "red", "not known"),
            ("--qdisc-param", "bogus=1", "\"bogus\" is not known"),
            (
                "--up-qdisc-param",
                "target=-1ms",
                "target: \"-1ms\" must not be negative",
            ),
            ("--down-qdisc-param", "delay=5ms", "use --delay for delay"),
            ("--stage", "rate=9mbit wat=1", "wat"),
            ("--up-stage", "rate=9mbit limit=0p", "limit: \"0p\""),
            ("--down-stage", "name=a/b rate=1mbit", "name"),
            ("--spin", "fast", "not a number"),
        ] {
            let e = T::try_parse_from(["t", "up", "x", flag, value]).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag}");
            assert_eq!(e.exit_code(), i32::from(USAGE));
            let m = e.to_string();
            let head = m.lines().next().unwrap_or_default();
            assert!(
                head.contains(&format!("'{value}' for '{flag} <")) && head.contains(why),
                "{flag} {value}: {m}"
            );
        }
        // check_up_args (experiment run) reports the same, and the flags at fault.
        let e = check_up_args("x", &["--down-loss".into(), "150%".into()]).unwrap_err();
        assert_eq!(e.flags, ["--down-loss"]);
        assert!(
            e.message
                .starts_with("error: invalid value '150%' for '--down-loss"),
            "{e:?}"
        );
        let argv = ["--stage=rate=9mbit", "--up-limit=10p"].map(String::from);
        let e = check_up_args("x", &argv).unwrap_err();
        assert_eq!(e.flags, ["--limit", "--up-limit"], "{e:?}");
        let e = check_up_args("x", &["--lenght=5".into()]).unwrap_err();
        assert_eq!(e.flags, ["--lenght"], "{e:?}");
    }
}
