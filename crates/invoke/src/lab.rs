//! `bloatlab lab up NAME`: the lab's flags (links, stages, hosts, the emulator's
//! driver), [`UpArgs::resolve`]d into the lab crate's [`LabSpec`] and checked as its
//! backend will check it. The flag values are parsed by the emulator's own parsers
//! (`bloatlab_emu::TcValue`), so a bad value is a clap error naming its flag.

use bloatlab_emu::{Limit, LinkRate, LossModel, Qdisc, QdiscParam, Spelled, StageSpec, TcValue};
use bloatlab_lab::spec::{Backend, DriverSpec, LabSpec, LinkSpec};
use bloatlab_lab::{LabError, SpecField, names};
use bloatlab_units::CongestionControl;
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
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
pub struct LinkArgs {
    /// Bottleneck rate, e.g. `20mbit` (omit for an unshaped link); or a
    /// rate that changes: `schedule:0s/20mbit,10s/5mbit` (looping) or
    /// `trace:FILE` (mahimahi's format, looping; see docs/emulator.md).
    #[arg(long, allow_hyphen_values = true, value_parser = rate_value)]
    pub rate: Option<Spelled<LinkRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = rate_value)]
    pub up_rate: Option<Spelled<LinkRate>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = rate_value)]
    pub down_rate: Option<Spelled<LinkRate>>,
    /// One-way propagation delay, e.g. `20ms` (RTT = up + down delay). A
    /// delay schedule goes in a stage: `--stage 'delay=schedule:0s/20ms,10s/200ms'`.
    #[arg(long, allow_hyphen_values = true, value_parser = delay_value)]
    pub delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = delay_value)]
    pub up_delay: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = delay_value)]
    pub down_delay: Option<Spelled<Duration>>,
    /// Delay jitter, e.g. `1ms`.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Duration>)]
    pub jitter: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    pub up_jitter: Option<Spelled<Duration>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Duration>)]
    pub down_jitter: Option<Spelled<Duration>>,
    /// Random loss, e.g. `0.5%`.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    pub loss: Option<Spelled<LossModel>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    pub up_loss: Option<Spelled<LossModel>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<LossModel>)]
    pub down_loss: Option<Spelled<LossModel>>,
    /// Queue limit in packets (`1000p`) or bytes (`64kb`).
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Limit>)]
    pub limit: Option<Spelled<Limit>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Limit>)]
    pub up_limit: Option<Spelled<Limit>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Limit>)]
    pub down_limit: Option<Spelled<Limit>>,
    /// Queue discipline: fifo, codel, fq_codel, pie or cake.
    #[arg(long, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    pub qdisc: Option<Spelled<Qdisc>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    pub up_qdisc: Option<Spelled<Qdisc>>,
    #[arg(long, hide_short_help = true, allow_hyphen_values = true, value_parser = value::<Qdisc>)]
    pub down_qdisc: Option<Spelled<Qdisc>>,
    /// Queue discipline parameter as tc names it, repeatable:
    /// `target=5ms`, `interval=100ms`, `ecn`, `noecn`, `flows=1024`, ...
    #[arg(long = "qdisc-param", value_name = "KEY[=VALUE]", value_parser = qdisc_param)]
    pub qdisc_param: Vec<Spelled<QdiscParam>>,
    #[arg(
        long = "up-qdisc-param",
        value_name = "KEY[=VALUE]",
        hide_short_help = true,
        value_parser = qdisc_param
    )]
    pub up_qdisc_param: Vec<Spelled<QdiscParam>>,
    #[arg(
        long = "down-qdisc-param",
        value_name = "KEY[=VALUE]",
        hide_short_help = true,
        value_parser = qdisc_param
    )]
    pub down_qdisc_param: Vec<Spelled<QdiscParam>>,
    /// A stage of a chained link, repeatable, in the order packets cross
    /// them: `key=value` words, e.g. `--stage 'rate=9mbit qdisc=fq_codel'
    /// --stage 'rate=10mbit qdisc=fifo limit=1000p'` (a shaper in front of a
    /// bloated modem). Keys: name, rate, delay, jitter, loss, limit, qdisc,
    /// overhead, mpu, framing and the qdisc's parameters. With stages,
    /// --delay/--jitter/--loss add a final stage `path`; --rate, --limit,
    /// --qdisc and --qdisc-param are refused. Userspace backend only.
    #[arg(long = "stage", value_name = "KEY=VALUE ...", value_parser = stage_words)]
    pub stage: Vec<Spelled<StageSpec>>,
    /// Stages of the up direction only (replace --stage there).
    #[arg(
        long = "up-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = stage_words
    )]
    pub up_stage: Vec<Spelled<StageSpec>>,
    /// Stages of the down direction only (replace --stage there).
    #[arg(
        long = "down-stage",
        value_name = "KEY=VALUE ...",
        hide_short_help = true,
        value_parser = stage_words
    )]
    pub down_stage: Vec<Spelled<StageSpec>>,
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
pub fn absolute_traces(s: &str) -> String {
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
    /// The link of one direction: its own flags, else the shared ones.
    pub fn direction(&self, up: bool) -> LinkSpec {
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
pub struct UpArgs {
    /// Lab name: 1-16 characters of a-z, 0-9 and '-'.
    pub name: String,
    /// Emulation backend.
    #[arg(long, value_enum, default_value = "userspace")]
    pub backend: BackendArg,
    /// Run in this process until Ctrl-C instead of in the background.
    #[arg(long)]
    pub foreground: bool,
    /// Number of client hosts (client, client2, ...).
    #[arg(long, default_value_t = 1)]
    pub clients: u32,
    /// Add a third host `peer` on the server side.
    #[arg(long)]
    pub peer: bool,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Hosts with TCP ECN on (net.ipv4.tcp_ecn=1): comma-separated names or `all`. Repeatable.
    #[arg(long, value_name = "HOSTS")]
    pub ecn: Vec<String>,
    /// Default TCP congestion control: `ALGO` for every host or `HOST=ALGO`. Repeatable.
    #[arg(long, value_name = "[HOST=]ALGO")]
    pub cc: Vec<String>,
    /// MTU of the lab's interfaces, bytes.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Longest busy-wait before a release. Timer sleeps end early by the
    /// timer lateness the emulator measures (up to this) and the rest is
    /// busy-waited, from a budget of 25 % of wall time so a saturated link
    /// never starves the hosts. Without it a VM's ~100 us timer wake-up
    /// latency adds up to ~0.3 ms to every emulated RTT; `0` turns it off.
    #[arg(long, default_value = "200us", value_parser = value::<Duration>)]
    pub spin: Spelled<Duration>,
    /// Run the forwarding threads with normal priority instead of SCHED_FIFO
    /// (SCHED_FIFO cuts the p99 timing error on a busy host from ms to ~0.2 ms).
    #[arg(long)]
    pub no_realtime: bool,
    /// Write every packet's fate (time, flow, size, sojourn, verdict) to
    /// PREFIX.up.csv and PREFIX.down.csv (userspace backend).
    #[arg(long, value_name = "PREFIX")]
    pub trace: Option<std::path::PathBuf>,
    /// Let the hosts hand the emulator TCP super-packets (TSO) and receive
    /// the segments that are due together as one (like a NIC's GRO). The
    /// emulated link still queues, shapes, marks and drops wire-sized
    /// packets; the hosts' stacks run per 64 KB instead of per packet, which
    /// a 1 Gbit/s link needs on a small machine. Off by default: packet
    /// captures inside a host then show super-packets (userspace backend).
    #[arg(long)]
    pub offload: bool,
    /// Seed of the emulator's random numbers.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the configured delay as it is. By default the emulator measures
    /// the hosts' path overhead (at `lab up`) and its own release lateness
    /// (continuously) and takes them out of the delay, so an idle ping or
    /// irtt round trip matches the configured one (userspace backend).
    #[arg(long)]
    pub no_calibrate: bool,
}

impl UpArgs {
    /// The lab spec these flags ask for, checked as the backend will check it
    /// ([`bloatlab_lab::lab::check`]) without building anything. A bad value names its
    /// flags in [`LabError::Spec`]'s typed field.
    pub fn resolve(&self) -> Result<LabSpec, LabError> {
        let a = self;
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

/// The `bloatlab lab up NAME` command line (after the program name) whose
/// [`UpArgs::resolve`] is `s`: every link value per direction (`--up-rate`,
/// `--down-stage`, ...) in the user's spelling, which the emulator's parsers read back to
/// the same value; the driver's values in tc's spellings; options at their defaults left
/// out. Trace paths in `s` are absolute already (resolve made them so).
pub fn to_argv(s: &LabSpec) -> Vec<String> {
    let mut a = vec!["lab".to_owned(), "up".to_owned(), s.name.clone()];
    let mut opt = |flag: &str, value: &str| a.push(format!("--{flag}={value}"));
    if s.backend == Backend::Kernel {
        opt("backend", "kernel");
    }
    if s.clients != 1 {
        opt("clients", &s.clients.to_string());
    }
    for (dir, l) in [("up", &s.up), ("down", &s.down)] {
        let values = [
            ("rate", l.rate.as_ref().map(Spelled::text)),
            ("delay", l.delay.as_ref().map(Spelled::text)),
            ("jitter", l.jitter.as_ref().map(Spelled::text)),
            ("loss", l.loss.as_ref().map(Spelled::text)),
            ("limit", l.limit.as_ref().map(Spelled::text)),
            ("qdisc", l.qdisc.as_ref().map(Spelled::text)),
        ];
        for (key, v) in values {
            if let Some(v) = v {
                opt(&format!("{dir}-{key}"), v);
            }
        }
        for p in &l.params {
            opt(&format!("{dir}-qdisc-param"), p.text());
        }
        for st in &l.stages {
            opt(&format!("{dir}-stage"), st.text());
        }
    }
    if !s.ecn_hosts.is_empty() {
        opt("ecn", &s.ecn_hosts.join(","));
    }
    for (host, cc) in &s.cc {
        opt("cc", &format!("{host}={cc}"));
    }
    let d = &s.driver;
    let defaults = DriverSpec::default();
    if s.mtu != 1500 {
        opt("mtu", &s.mtu.to_string());
    }
    opt("spin", &bloatlab_emu::spec::format_time(d.spin));
    if d.seed != defaults.seed {
        opt("seed", &d.seed.to_string());
    }
    if let Some(t) = &d.trace {
        opt("trace", &t.display().to_string());
    }
    let flags = [
        (s.peer, "--peer"),
        (!d.realtime, "--no-realtime"),
        (d.offload, "--offload"),
        (
            !d.calibrate && s.backend == Backend::Userspace,
            "--no-calibrate",
        ),
    ];
    crate::push_switches(&mut a, &flags);
    a
}

#[cfg(test)]
mod tests;
