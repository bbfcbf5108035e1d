//! `bloatlab lab`: build, use, inspect and remove an emulated network lab.
//!
//! The flags, the lab spec built from them, and exit codes for the lab's
//! typed errors. What the subcommands do lives in the lab crate
//! (`bloatlab_lab::control`): `lab up` claims the name
//! (`/run/bloatlab/NAME.json`), then starts the emulator as a background
//! process (this binary again, as the hidden `lab __daemon NAME`) and waits
//! until it reports that the lab is built, or why it is not.
//! `--foreground` builds and runs the lab in this process until Ctrl-C.
//! Every other subcommand works from the state file, so they also work
//! after the emulator died.

use crate::exit::{Exit, FAILURE, PRIVILEGE, USAGE};
use bloatlab_emu::{Limit, LinkRate, LossModel, Qdisc, QdiscParam, Spelled, StageSpec, TcValue};
use bloatlab_lab::control::{self, daemon::SpawnError, exec::ExecError, set::SetRequest};
use bloatlab_lab::spec::{Backend, DriverSpec, LabSpec, LinkSpec};
use bloatlab_lab::state::StateDir;
use bloatlab_lab::{LabError, SpecField, names, status_text};
use bloatlab_units::CongestionControl;
use clap::{Args, Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

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
    /// Change a running lab's host settings (TCP ECN) and stage rates and
    /// delays without rebuilding it.
    Set(SetArgs),
    /// Write a capacity trace (mahimahi's format) for `rate=trace:FILE`: a
    /// step, an LTE-like random walk or a Starlink-like trace.
    TraceGen(super::trace_gen::TraceGenArgs),
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
    /// Bottleneck rate, e.g. `20mbit` (omit for an unshaped link); or a
    /// rate that changes: `schedule:0s/20mbit,10s/5mbit` (looping) or
    /// `trace:FILE` (mahimahi's format, looping; see docs/emulator.md).
    #[arg(long, allow_hyphen_values = true, value_parser = rate_value)]
    rate: Option<Spelled<LinkRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = rate_value)]
    up_rate: Option<Spelled<LinkRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = rate_value)]
    down_rate: Option<Spelled<LinkRate>>,
    /// One-way propagation delay, e.g. `20ms` (RTT = up + down delay). A
    /// delay schedule goes in a stage: `--stage 'delay=schedule:0s/20ms,10s/200ms'`.
    #[arg(long, allow_hyphen_values = true, value_parser = delay_value)]
    delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = delay_value)]
    up_delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = delay_value)]
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
    #[arg(long = "stage", value_name = "KEY=VALUE ...", value_parser = stage_words)]
    stage: Vec<Spelled<StageSpec>>,
    /// Stages of the up direction only (replace --stage there).
    #[arg(
        long = "up-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = stage_words
    )]
    up_stage: Vec<Spelled<StageSpec>>,
    /// Stages of the down direction only (replace --stage there).
    #[arg(
        long = "down-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = stage_words
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

/// `--rate`: a rate, a schedule or a trace, the trace's path made absolute
/// (the lab's state keeps it, and is read from other directories).
fn rate_value(s: &str) -> Result<Spelled<LinkRate>, String> {
    Spelled::parse(&absolute_traces(s)).map_err(|e| e.problem.to_string())
}

/// `--delay`: a time; a schedule is refused saying where it goes.
fn delay_value(s: &str) -> Result<Spelled<Duration>, String> {
    if s.trim().starts_with("schedule:") {
        return Err(
            "a delay schedule is a stage's: --stage 'delay=schedule:...' (or lab set \
             --stage-delay on a running lab)"
                .into(),
        );
    }
    value(s)
}

/// `--stage`: as [`words`], trace paths made absolute.
fn stage_words(s: &str) -> Result<Spelled<StageSpec>, String> {
    words(&absolute_traces(s))
}

/// `s` with the path after each `trace:` made absolute (relative to the
/// current directory); everything else as it is.
fn absolute_traces(s: &str) -> String {
    let Ok(cwd) = std::env::current_dir() else {
        return s.to_string();
    };
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("trace:") {
        let (head, tail) = rest.split_at(i + "trace:".len());
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(tail.len());
        let path = std::path::Path::new(&tail[..end]);
        if path.is_relative() && !tail[..end].is_empty() {
            out.push_str(&cwd.join(path).display().to_string());
        } else {
            out.push_str(&tail[..end]);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
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
        required_unless_present_any = ["stage_rate", "stage_delay", "stage_qdisc"]
    )]
    ecn: Vec<String>,
    /// Rate of a stage of a chained link (`lab up --stage`), by name or
    /// 1-based position: `1=9mbit`, `router=8500kbit`. Repeatable. Applies
    /// to packets serialized from now on; the queues are kept. Both
    /// directions unless `--up` or `--down` is given.
    /// The rate may also be a schedule or a trace (`1=schedule:0s/20mbit,5s/5mbit`,
    /// `1=trace:FILE`), whose time starts now.
    #[arg(long, value_name = "STAGE=RATE")]
    stage_rate: Vec<String>,
    /// One-way delay of a stage, by name or 1-based position (`path` is the
    /// stage `lab up --delay` adds to a chain): `path=40ms`, or a schedule
    /// starting now, `1=schedule:0s/20ms,10s/200ms`. Repeatable. Applies to
    /// packets leaving the stage's serializer from now on; a calibrated lab
    /// keeps its calibration.
    #[arg(long, value_name = "STAGE=DELAY")]
    stage_delay: Vec<String>,
    /// A new queue discipline for a stage, with its parameters as a stage
    /// writes them: `'1=fq_codel target=5ms'`, `router=cake`. Repeatable.
    /// Packets queued in the old one are sent first, under its rules; new
    /// arrivals queue in the new one.
    #[arg(long, value_name = "STAGE=QDISC [KEY=VALUE ...]")]
    stage_qdisc: Vec<String>,
    /// `--stage-rate`/`--stage-delay` apply to the up direction (client to server) only.
    #[arg(long, conflicts_with = "down")]
    up: bool,
    /// `--stage-rate`/`--stage-delay` apply to the down direction (server to client) only.
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
        LabCmd::TraceGen(a) => super::trace_gen::run(a),
        LabCmd::Daemon(a) => control::daemon::serve(&dir, &a.name, code_of).map_err(lab_err),
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
        let (host, algo) = match v.split_once('=') {
            Some((h, algo)) => (Some(h), algo),
            None => (None, v.as_str()),
        };
        let algo = CongestionControl::new(algo).map_err(|e| LabError::Spec {
            field: SpecField::flag("--cc"),
            value: algo.into(),
            why: e.to_string(),
        })?;
        match host {
            Some(h) => {
                cc.insert(h.to_string(), algo);
            }
            None => {
                for h in &hosts {
                    cc.insert(h.clone(), algo.clone());
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
        flags: match &e {
            LabError::Spec { field, .. } => field.flags.clone(),
            _ => Vec::new(),
        },
        message: e.to_string(),
    })
}

/// `--trace PREFIX` made absolute (the emulator may run in the background
/// from another directory); its directory must exist.
fn trace_prefix(p: &std::path::Path) -> Result<std::path::PathBuf, LabError> {
    let bad = |why: String| LabError::Spec {
        field: SpecField::flag("--trace"),
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

/// `lab up`: the spec, the name claimed, then the emulator in the
/// background (it reports when the lab works) or in this process.
fn up(dir: &StateDir, a: UpArgs) -> anyhow::Result<()> {
    let spec = build_spec(&a).map_err(lab_err)?;
    let st = control::up::claim(dir, &spec).map_err(lab_err)?;
    if a.foreground {
        return control::daemon::run(dir, st, |built| {
            if built.is_ok() {
                print_summary(&spec);
                eprintln!("running in the foreground; Ctrl-C tears the lab down");
            }
        })
        .map_err(lab_err);
    }
    control::daemon::spawn(dir, &spec.name, &["lab", "__daemon", &spec.name]).map_err(
        |e| match e {
            SpawnError::Io(e) => anyhow::Error::new(e),
            SpawnError::NotReady { code, message } => anyhow::Error::new(Exit {
                code: code.unwrap_or(FAILURE),
                message,
            }),
        },
    )?;
    print_summary(&spec);
    Ok(())
}

fn print_summary(spec: &LabSpec) {
    control::up::write_summary(spec, &mut std::io::stdout(), &mut std::io::stderr());
}

/// `lab exec`: becomes the command, or exits 127 (not found) / 126 (cannot
/// run) as a shell would, or with the lab error's code.
fn exec(dir: &StateDir, a: ExecArgs) -> anyhow::Result<()> {
    let e = control::exec::exec(dir, &a.name, &a.host, &a.cmd);
    let code = match &e {
        ExecError::Lab(l) => code_of(l),
        ExecError::EmulatorDead { .. } => FAILURE,
        ExecError::Run { .. } if e.is_not_found() => 127,
        ExecError::Run { .. } => 126,
    };
    Err(anyhow::Error::new(Exit {
        code,
        message: e.to_string(),
    }))
}

fn set(dir: &StateDir, a: SetArgs) -> anyhow::Result<()> {
    let req = SetRequest {
        ecn: a.ecn,
        stage_rate: a.stage_rate.iter().map(|v| absolute_traces(v)).collect(),
        stage_delay: a.stage_delay,
        stage_qdisc: a.stage_qdisc,
        up: a.up,
        down: a.down,
    };
    control::set::set(dir, &a.name, &req, &mut std::io::stdout()).map_err(lab_err)
}

/// `lab status`: text or JSON of one record; exits 1 naming the problem
/// when the lab is dead.
fn status(dir: &StateDir, a: StatusArgs) -> anyhow::Result<()> {
    let report = bloatlab_lab::status::read(dir, &a.name).map_err(lab_err)?;
    if a.json {
        print_json(&serde_json::to_value(&report)?)?;
    } else {
        print!("{}", status_text::render(&report));
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

fn down(dir: &StateDir, name: &str) -> anyhow::Result<()> {
    let removed = control::teardown::down(dir, name, &mut std::io::stderr()).map_err(lab_err)?;
    println!("{removed}");
    Ok(())
}

fn list(dir: &StateDir, a: ListArgs) -> anyhow::Result<()> {
    let list = control::list::read(dir);
    if a.json {
        return print_json(&serde_json::to_value(&list)?);
    }
    print!("{}", control::list::render(&list));
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
        assert_eq!(
            s.up.rate.as_ref().map(|r| r.get().nominal.0),
            Some(20_000_000)
        );
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
        for bad in ["cu bic", "server=a-b"] {
            let e = build_spec(&up_args(&["x", "--cc", bad])).unwrap_err();
            assert_eq!(code_of(&e), USAGE, "{bad}");
            assert!(e.to_string().contains("--cc"), "{e}");
        }
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
        use bloatlab_lab::control::up::offload_hint;
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
    /// A relative trace path is made absolute (the lab's state is read from other
    /// directories); everything else is left as written.
    #[test]
    fn trace_paths_are_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            absolute_traces("name=a rate=trace:t/x.trace,qdisc=fifo"),
            format!("name=a rate=trace:{}/t/x.trace,qdisc=fifo", cwd.display())
        );
        assert_eq!(absolute_traces("trace:/abs/x"), "trace:/abs/x");
        assert_eq!(
            absolute_traces("rate=schedule:0s/1mbit,1s/2mbit"),
            "rate=schedule:0s/1mbit,1s/2mbit"
        );
        assert_eq!(absolute_traces("trace:"), "trace:");
    }

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
            ("--down-rate", "schedule:0s/1mbit,1s/0mbit", "step 2"),
            (
                "--rate",
                "trace:/nonexistent/h23r.trace",
                "/nonexistent/h23r.trace",
            ),
            ("--delay", "schedule:0s/20ms", "a stage's"),
            (
                "--stage",
                "rate=schedule:0s/1mbit,1s/-1mbit",
                "must not be negative",
            ),
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
