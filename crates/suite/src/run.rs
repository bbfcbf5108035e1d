//! One test run end to end: pre-flight check, driving the plan, turning runner output
//! into a results file, and the working-condition findings.

use bloatlab_emu::{Framing, Overhead};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bloatlab_engine::config::{Amount as ClientAmount, ClientConfig, OutputFormat};
use bloatlab_invoke::ping::{Limit, PingConfig};
use bloatlab_results::ResultsFile;
use bloatlab_results::lab::LabRecord;
use bloatlab_results::schema::{
    DelayKindRecord, DirectionRecord, FlowEcnRecord, FlowTcpRecord, IncompleteRecord,
    TransferRecord,
};
use bloatlab_stats::conditions::{
    CongestionSignals, EMULATOR_LATE_P99, Finding, MAX_PROBE_SHARE, check_emulator,
    check_probe_load,
};
use bloatlab_stats::emodel::{VoipAssessment, VoipConfig, assess_voip};
use bloatlab_stats::{DelayKind, Direction, LatencySeries, Phase, PhaseKind, Timeline};
use bloatlab_units::BitRate;
use serde_json::json;

use crate::catalog::TestName;
use crate::collect::{self, ClientRun};
use crate::driver::{self, DriveEvent, DriveResult, Output, RunnerResult, Target};
use crate::ecn::EcnMode;
use crate::host;
use crate::journal::{Journal, JournalWriter};
use crate::lab::{LabContext, LabWatch};
use crate::plan::{Family, Plan, PlanError, ProbeMode, RunnerKind, TestParams, plan};

mod assemble;
use assemble::assemble;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The test.
    pub test: TestName,
    /// Its parameters.
    pub params: TestParams,
    /// The server and the binary to run.
    pub target: Target,
    /// Recorded in the metadata.
    pub command_line: Vec<String>,
    /// Optional title.
    pub title: Option<String>,
    /// Check the server answers TCP and probes before starting (on by default).
    pub preflight: bool,
    /// The lab this run goes through (`lab exec` sets the environment), if any: its
    /// emulator's counters are recorded and checked.
    pub lab: Option<LabContext>,
    /// TCP ECN for the run's connections (`--ecn on|off|mix`); needs a lab. `None` = as set.
    pub ecn: Option<EcnMode>,
}

/// Why a run could not produce results.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad parameters.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A subprocess could not be started.
    #[error("cannot start {exe}: {source}")]
    Spawn {
        /// The executable.
        exe: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Nothing accepted the TCP connection.
    #[error("no server at {addr}: {detail} (start one there with `bloatlab server -p PORT`)")]
    NoServer {
        /// host:port.
        addr: String,
        /// The client's message.
        detail: String,
    },
    /// A server is there but refused the pre-flight test (a permit key, its caps).
    #[error(
        "the server at {addr} refused the test: {detail}{}",
        if *keyed {
            " (is --permit-key the server's key?)"
        } else {
            " (a server started with --permit-key=KEY needs `bloatlab test ... --permit-key=KEY`)"
        }
    )]
    Refused {
        /// host:port.
        addr: String,
        /// The client's message.
        detail: String,
        /// The test sent a key.
        keyed: bool,
    },
    /// TCP works but the probes are not answered.
    #[error(
        "{addr} accepts TCP but did not answer any of bloatlab's UDP latency probes: the server \
         is not bloatlab (e.g. iperf 2) or is too old to answer probes, or UDP port {port} is \
         blocked. Run `bloatlab server -p {port}` there"
    )]
    NotBloatlab {
        /// host:port.
        addr: String,
        /// The port.
        port: u16,
    },
    /// Every load flow failed.
    #[error("every load flow failed; first error: {0}")]
    AllFlowsFailed(String),
    /// The `rpm` test's draft run (`bloatlab rpm`) failed: its load is the test's load.
    #[error(
        "the draft's responsiveness run (bloatlab rpm {url}) failed: {detail} (the rpm test \
         needs `bloatlab server --https PORT` there; --rpm-port or --rpm-url say where, \
         --fingerprint, --ca or --insecure whom to trust)"
    )]
    Rpm {
        /// The config URL it fetched.
        url: String,
        /// The client's message.
        detail: String,
    },
    /// The phases could not be stored (a bug).
    #[error(transparent)]
    Raw(#[from] bloatlab_results::RawError),
    /// `--ecn` outside a lab.
    #[error(
        "--ecn needs a lab: run the test with `bloatlab lab exec LAB HOST -- bloatlab test ...` \
         (outside a lab, set net.ipv4.tcp_ecn yourself)"
    )]
    EcnNeedsLab,
    /// The lab could not be read or changed.
    #[error("lab: {0}")]
    Lab(#[from] bloatlab_lab::LabError),
    /// A journal could not be read.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// `--ecn mix` could not route the ECN flows.
    #[error(transparent)]
    EcnRoute(#[from] crate::ecn::EcnRouteError),
}

/// A VoIP stream assessed over one phase and direction.
#[derive(Debug, Clone, PartialEq)]
pub struct VoipRow {
    /// Phase name.
    pub phase: String,
    /// `up` or `down`.
    pub direction: &'static str,
    /// The E-model assessment.
    pub assessment: VoipAssessment,
}

/// A finished (or interrupted) run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The results file, `derived` filled in.
    pub file: ResultsFile,
    /// Working-condition findings (tagged with their loaded phase) and host findings
    /// (whole run, `None`).
    pub findings: Vec<(Option<String>, Finding)>,
    /// Problems with individual runners (a flow that failed, ICMP not permitted, ...).
    pub notes: Vec<String>,
    /// VoIP assessments (voip test only).
    pub voip: Vec<VoipRow>,
    /// Durations of the pulses (one_vs_pulses only).
    pub pulses: Vec<Duration>,
    /// The series used for grading and working-condition checks.
    pub reference: Option<String>,
}

impl RunOutcome {
    /// Whether the run was cut short.
    pub fn interrupted(&self) -> bool {
        self.file.metadata.interrupted
    }
}

fn addr(t: &Target) -> String {
    if t.host.contains(':') {
        format!("[{}]:{}", t.host, t.port)
    } else {
        format!("{}:{}", t.host, t.port)
    }
}

/// Checks, in about a second, that `target` runs a bloatlab server: a short TCP transfer
/// and five UDP probes, in parallel.
pub fn preflight(target: &Target) -> Result<(), RunError> {
    // The key goes by environment to both (never on a command line: /proc/PID/cmdline).
    let spawn = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&target.exe);
        target.key_env(&mut cmd, true);
        crate::orphan::die_with_parent(&mut cmd)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| RunError::Spawn {
                exe: target.exe.display().to_string(),
                source,
            })
    };
    let host = target.host.as_str();
    let mut client = ClientConfig::new(host);
    client.port = target.port;
    client.amount = ClientAmount::Time(Duration::from_millis(200));
    client.format = OutputFormat::Json;
    client.connect_timeout = Duration::from_secs(3);
    client.permit_key = target.permit_key.clone();
    let tcp_args = bloatlab_invoke::client::to_argv(&client);
    let tcp_args: Vec<&str> = tcp_args.iter().map(String::as_str).collect();
    let mut ping = PingConfig::new(host);
    ping.port = target.port;
    ping.limit = Limit::Count(5);
    ping.interval = Duration::from_millis(50);
    ping.timeout = Duration::from_secs(1);
    ping.json = true;
    ping.permit_key = target.permit_key.clone();
    ping.set_size(None);
    let udp_args = bloatlab_invoke::ping::to_argv(&ping);
    let udp_args: Vec<&str> = udp_args.iter().map(String::as_str).collect();
    let (tcp, udp) = std::thread::scope(|s| {
        let tcp = s.spawn(|| spawn(&tcp_args));
        let udp = s.spawn(|| spawn(&udp_args));
        (tcp.join(), udp.join())
    });
    let tcp = tcp.map_err(|_| RunError::AllFlowsFailed("pre-flight thread panicked".into()))??;
    let udp = udp.map_err(|_| RunError::AllFlowsFailed("pre-flight thread panicked".into()))??;
    if !tcp.status.success() {
        let o = Output {
            spawned: Duration::ZERO,
            exited: Duration::ZERO,
            status: tcp.status.code(),
            stdout: tcp.stdout,
            stderr: tcp.stderr,
        };
        let detail = o
            .error_line()
            .trim_start_matches("bloatlab: error: ")
            .to_owned();
        // The client's words for a server that closed the test unanswered at once
        // (bloatlab_engine's reset_message): a server is there, and said no.
        if detail.contains("the server refused the test") {
            return Err(RunError::Refused {
                addr: addr(target),
                detail,
                keyed: target.permit_key.is_some(),
            });
        }
        return Err(RunError::NoServer {
            addr: addr(target),
            detail,
        });
    }
    let answered = collect::parse_ping(&udp.stdout)
        .map(|p| {
            p.series
                .iter()
                .filter(|s| s.kind == DelayKindRecord::Rtt)
                .flat_map(|s| &s.samples)
                .any(|x| x.delay_ns.is_some())
        })
        .unwrap_or(false);
    if !answered {
        return Err(RunError::NotBloatlab {
            addr: addr(target),
            port: target.port,
        });
    }
    Ok(())
}

/// Runs a test. `stop` cuts it short (Ctrl-C): what was measured is kept and the file is
/// marked `interrupted`. `progress(elapsed, total)` is called about every 50 ms.
pub fn run(
    cfg: &RunConfig,
    stop: &AtomicBool,
    progress: impl FnMut(Duration, Duration),
) -> Result<RunOutcome, RunError> {
    run_journaled(cfg, stop, None, progress)
}

/// [`run`], appending what it learns to `journal` as it goes (crate::journal).
pub fn run_journaled(
    cfg: &RunConfig,
    stop: &AtomicBool,
    journal: Option<&mut JournalWriter>,
    mut progress: impl FnMut(Duration, Duration),
) -> Result<RunOutcome, RunError> {
    let mix = cfg.ecn == Some(EcnMode::Mix);
    let params = TestParams {
        ecn_mix: mix,
        ..cfg.params.clone()
    };
    let plan = plan(cfg.test, &params)?;
    if cfg.ecn.is_some() && cfg.lab.is_none() {
        return Err(RunError::EcnNeedsLab);
    }
    // ECN is set before the pre-flight check, so its connections negotiate what the run's do.
    let ecn_was = match (&cfg.lab, cfg.ecn) {
        (Some(ctx), Some(m)) => Some(ctx.set_ecn(m.host_asks())?),
        _ => None,
    };
    // --ecn mix: the flows that ask for ECN get a mark routed with `features ecn`; the
    // rule and route go when `route` is dropped, before tcp_ecn is restored.
    let route = if mix {
        crate::ecn::server_ip(&cfg.target.host, cfg.target.port)
            .and_then(crate::ecn::EcnRoute::add)
            .map(Some)
            .map_err(RunError::from)
    } else {
        Ok(None)
    };
    let result = match route {
        Ok(route) => {
            let mut run_cfg = cfg.clone();
            run_cfg.target.ecn_fwmark = route.as_ref().map(|r| r.mark);
            let r = run_in_lab(&run_cfg, &plan, stop, journal, &mut progress);
            drop(route);
            r
        }
        Err(e) => Err(e),
    };
    if let (Some(ctx), Some(was)) = (&cfg.lab, ecn_was)
        && let Err(e) = ctx.set_ecn(was)
    {
        tracing::warn!("could not restore TCP ECN of {}: {e}", ctx.host);
    }
    result
}

fn unix_s(t: jiff::Timestamp) -> f64 {
    t.as_nanosecond() as f64 / 1e9
}

/// Pre-flight, the drive and the assembly, with the lab (if any) watched throughout.
fn run_in_lab(
    cfg: &RunConfig,
    plan: &Plan,
    stop: &AtomicBool,
    mut journal: Option<&mut JournalWriter>,
    progress: &mut impl FnMut(Duration, Duration),
) -> Result<RunOutcome, RunError> {
    if cfg.preflight {
        // Once per server address: a dual-stack test checks both families.
        let mut checked: Vec<String> = Vec::new();
        for r in &plan.runners {
            let t = cfg.target.for_family(r.family);
            if !checked.contains(&t.host) {
                preflight(&t)?;
                checked.push(t.host);
            }
        }
    }
    let mut watch = match &cfg.lab {
        Some(ctx) => Some(LabWatch::start(
            ctx.clone(),
            unix_s(jiff::Timestamp::now()),
        )?),
        None => None,
    };
    let total = plan.end();
    let mut cpu = CpuSampler::default();
    let run_start = jiff::Timestamp::now();
    if let Some(w) = &mut watch {
        w.set_origin(unix_s(run_start));
    }
    if let Some(j) = journal.as_deref_mut() {
        j.start(crate::journal::Header::new(cfg, run_start));
    }
    let spool = journal.as_deref().map(JournalWriter::spool_dir);
    let mut last = Duration::ZERO;
    // The drive stops on the user's stop or when the `rpm` test's draft run fails: its
    // load is the test's, so the run could not measure anything more.
    let abort = AtomicBool::new(false);
    let mut rpm_failed = None;
    let drove = driver::drive(
        &cfg.target,
        plan,
        cfg.params.sample_interval,
        Duration::from_secs(10),
        &abort,
        spool.as_deref(),
        |ev| match ev {
            DriveEvent::Tick(now) => {
                if stop.load(Ordering::Relaxed) {
                    abort.store(true, Ordering::Relaxed);
                }
                last = now;
                cpu.tick(now, &plan.timeline);
                if let Some(w) = &mut watch {
                    w.tick(now);
                }
                if let Some(j) = journal.as_deref_mut() {
                    let phase = plan.timeline.phase_at(now).map_or("end", |p| &p.name);
                    j.progress(now, phase);
                }
                progress(now, total);
            }
            DriveEvent::Spawned {
                runner,
                spawned,
                spool,
            } => {
                if let Some(j) = journal.as_deref_mut() {
                    j.spawn(&runner.name, spawned, spool);
                }
            }
            DriveEvent::Finished { runner, output } => {
                if let Some(j) = journal.as_deref_mut() {
                    j.output(&runner.name, output, last);
                }
                if runner.kind == RunnerKind::Rpm
                    && !abort.load(Ordering::Relaxed)
                    && let Err(why) = crate::rpm::read(output)
                {
                    rpm_failed = Some(why);
                    abort.store(true, Ordering::Relaxed);
                }
            }
        },
    )
    .map_err(|source| RunError::Spawn {
        exe: cfg.target.exe.display().to_string(),
        source,
    })?;
    if let Some(w) = &mut watch {
        w.finish();
    }
    if let Some(detail) = rpm_failed {
        // Nothing half-written: no results file, and the journal goes (test.rs).
        return Err(RunError::Rpm {
            url: cfg.target.rpm_url(),
            detail,
        });
    }
    let drove = DriveResult {
        interrupted: stop.load(Ordering::Relaxed),
        ..drove
    };
    if let Some(j) = journal {
        j.end(last, drove.interrupted);
    }
    assemble(cfg, plan, drove, run_start, cpu.samples, watch.as_ref())
}

/// Rebuilds the results of a run from its journal (crate::journal): the plan from its
/// start entry, each runner's finished outputs, the phases up to where the run got. A
/// journal without its end entry (or a full one) gives a file marked `interrupted`, with
/// `metadata.incomplete` ([`IncompleteRecord`]); every
/// recovered file has `extra.recovered_from_journal` = true. The lab's counters and the
/// CPU samples are not journaled: a recovered lab run has no `metadata.lab`.
pub fn recover(cfg: &RunConfig, journal: &Journal) -> Result<RunOutcome, RunError> {
    let plan = plan(cfg.test, &cfg.params)?;
    let reached = journal.reached();
    let complete = journal.complete();
    let mut missing = Vec::new();
    let mut all = journal.outputs.clone();
    all.extend(journal.spooled_outputs(reached));
    let runners = plan
        .runners
        .iter()
        .map(|r| {
            let outputs: Vec<Output> = all
                .iter()
                .filter(|o| o.runner == r.name)
                .map(|o| o.output())
                .collect();
            let silent = outputs.iter().all(|o| o.stdout.is_empty());
            if silent && r.start < reached.max(Duration::from_nanos(1)) {
                missing.push(r.name.clone());
            }
            RunnerResult {
                runner: r.clone(),
                outputs,
            }
        })
        .collect();
    let drove = DriveResult {
        runners,
        interrupted: !complete,
        stopped_at: Some(reached),
    };
    let mut out = assemble(
        cfg,
        &plan,
        drove,
        journal.header.run_start,
        Vec::new(),
        None,
    )?;
    // The host check would judge CPU samples and probe timers that were not journaled.
    out.findings.retain(|(phase, _)| phase.is_some());
    let extra = &mut out.file.metadata.extra;
    extra.insert("recovered_from_journal".into(), json!(true));
    if !complete {
        let phase = plan
            .timeline
            .phase_at(reached)
            .or(plan.timeline.phases().last())
            .map(|p| p.name.clone());
        let reason = if journal.full.is_some() {
            "the journal reached its size bound; later runner outputs were not journaled"
        } else {
            "the test process stopped before the run ended (killed or crashed); the runners \
             then running stopped with it and reported up to that moment"
        };
        out.file.metadata.incomplete = Some(IncompleteRecord {
            phase_reached: phase,
            reached_ns: bloatlab_results::convert::nanos(reached),
            runners_missing: missing,
            reason: reason.to_owned(),
        });
    }
    Ok(out)
}

/// Samples whole-machine CPU utilisation every 500 ms during loaded phases.
#[derive(Debug, Default)]
struct CpuSampler {
    last: Option<(Duration, host::CpuTimes)>,
    samples: Vec<f64>,
}

impl CpuSampler {
    fn tick(&mut self, now: Duration, timeline: &Timeline) {
        if self
            .last
            .is_some_and(|(t, _)| now.saturating_sub(t) < Duration::from_millis(500))
        {
            return;
        }
        let Some(c) = host::read_cpu() else { return };
        let loaded = timeline
            .phase_at(now)
            .is_some_and(|p| p.kind == PhaseKind::Loaded);
        if let (Some((_, prev)), true) = (self.last, loaded)
            && let Some(u) = host::utilisation(prev, c)
        {
            self.samples.push(u);
        }
        self.last = Some((now, c));
    }
}

/// The phases actually covered when a run stopped at `at`.
fn cut_timeline(timeline: &Timeline, at: Duration) -> Vec<Phase> {
    let mut out: Vec<Phase> = timeline
        .phases()
        .iter()
        .filter(|p| p.start < at)
        .cloned()
        .collect();
    match out.last_mut() {
        Some(p) => p.end = p.end.min(at),
        None => {
            if let Some(first) = timeline.phases().first() {
                let mut p = first.clone();
                p.end = p.start + Duration::from_nanos(1);
                out.push(p);
            }
        }
    }
    out
}

fn dir_record(d: Direction) -> DirectionRecord {
    match d {
        Direction::Up => DirectionRecord::Up,
        Direction::Down => DirectionRecord::Down,
    }
}

/// A client stopped by the suite's forwarded SIGINT/SIGTERM exits 130/143
/// after printing its report of the time until then (docs/engine.md): on an
/// interrupted run, that report is data to keep, not a failure.
fn reported_on_stop(interrupted: bool, code: i32) -> bool {
    interrupted && (code == 128 + libc::SIGINT || code == 128 + libc::SIGTERM)
}

/// How much the load flows' own RTT (the mean of their senders' `tcpi_rtt` samples, over
/// the flows that ran in `phase`) exceeds the idle median round trip of the probes.
/// `None` when no flow's sender sampled TCP_INFO or there is no idle baseline.
fn flow_rtt_rise(
    windows: &[(Duration, Duration, Duration)],
    phase: &Phase,
    idle: Option<&bloatlab_stats::LatencySummary>,
) -> Option<Duration> {
    let base = idle?.delay.as_ref()?.median;
    let rtts: Vec<Duration> = windows
        .iter()
        .filter(|(a, b, _)| *a < phase.end && phase.start < *b)
        .map(|(_, _, r)| *r)
        .collect();
    if rtts.is_empty() {
        return None;
    }
    let mean = rtts.iter().sum::<Duration>() / rtts.len() as u32;
    Some(mean.saturating_sub(base))
}

/// The emulator's evidence for one loaded phase: congestion drops and CE marks summed
/// over both directions, and the higher utilisation of the two.
fn lab_signals(signals: &mut CongestionSignals, lab: &LabRecord, phase: &str) {
    let rows: Vec<_> = lab.phases.iter().filter(|p| p.phase == phase).collect();
    if rows.is_empty() {
        return;
    }
    signals.bottleneck_drops = Some(rows.iter().map(|p| p.drops).sum());
    signals.bottleneck_marks = Some(rows.iter().map(|p| p.ce_marked).sum());
    signals.utilisation = rows
        .iter()
        .filter_map(|p| p.utilisation)
        .max_by(f64::total_cmp);
}

/// Findings only a lab run can have: the emulator was late, or the probes take more than
/// 5 % of a direction's rate.
fn lab_findings(lab: &LabRecord, plan: &Plan) -> Vec<Finding> {
    let late: Vec<(String, Duration, Duration)> = lab
        .directions
        .iter()
        .filter_map(|d| {
            let p99 = Duration::from_nanos(d.lateness.p99_ns?);
            let max = Duration::from_nanos(d.lateness.max_ns.unwrap_or(0));
            Some((direction_name(d.direction).to_owned(), p99, max))
        })
        .collect();
    // Per phase: the emulator fell behind (the rule that makes an experiment's point
    // incomplete); a direction flagged so is not flagged again for its whole-run p99.
    let behind: Vec<Finding> = lab
        .phases
        .iter()
        .filter_map(|p| {
            let l = p.lateness.as_ref()?;
            l.fell_behind().then(|| Finding::EmulatorBehind {
                direction: direction_name(p.direction).to_owned(),
                phase: p.phase.clone(),
                late_fraction: l.late_fraction().unwrap_or(0.0),
                p99: l.percentiles.p99_ns.map(Duration::from_nanos),
                bound: bloatlab_results::lab::MAX_LATE_FRACTION,
            })
        })
        .collect();
    let flagged = |dir: &str| {
        behind
            .iter()
            .any(|f| matches!(f, Finding::EmulatorBehind { direction, .. } if direction == dir))
    };
    let late: Vec<_> = late.into_iter().filter(|(d, _, _)| !flagged(d)).collect();
    let mut out = behind.clone();
    out.extend(check_emulator(&late, EMULATOR_LATE_P99));
    for d in &lab.directions {
        // Every shaped stage of a chain (or the single link): the probes' share of the
        // one they load most, each packet costed as that stage frames it (issue 18: ATM
        // cells double a small packet's cost).
        let share = link_stages(&d.link)
            .into_iter()
            .filter_map(|(rate, framing)| {
                let probes = probe_wire_rate(plan, &framing);
                (rate > 0).then_some((probes, BitRate(rate)))
            })
            .max_by(|a, b| (a.0.0 as f64 / a.1.0 as f64).total_cmp(&(b.0.0 as f64 / b.1.0 as f64)));
        if let Some((probes, rate)) = share {
            out.extend(check_probe_load(
                direction_name(d.direction),
                probes,
                rate,
                MAX_PROBE_SHARE,
            ));
        }
    }
    out
}

/// The shaped parts of one direction: each chain stage with a rate, or the single
/// link, with the framing its rate is computed on.
fn link_stages(l: &bloatlab_results::schema::LinkDirectionRecord) -> Vec<(u64, Overhead)> {
    let framing = |overhead: Option<i64>, mpu: Option<u64>, framing: Option<&str>| Overhead {
        bytes: overhead.and_then(|o| i32::try_from(o).ok()).unwrap_or(0),
        mpu: mpu.and_then(|m| u32::try_from(m).ok()).unwrap_or(0),
        framing: match framing {
            Some("atm") => Framing::Atm,
            Some("ptm") => Framing::Ptm,
            _ => Framing::None,
        },
    };
    if l.stages.is_empty() {
        return l
            .rate_bps
            .map(|r| {
                (
                    r,
                    framing(l.overhead_bytes, l.mpu_bytes, l.framing.as_deref()),
                )
            })
            .into_iter()
            .collect();
    }
    l.stages
        .iter()
        .filter_map(|s| {
            let f = framing(s.overhead_bytes, s.mpu_bytes, s.framing.as_deref());
            Some((s.rate_bps?, f))
        })
        .collect()
}

/// The plan's probe traffic in one direction as a link with this framing counts it
/// ([`probe_rate`] with each packet's wire bytes instead of its IP length).
pub fn probe_wire_rate(plan: &Plan, framing: &Overhead) -> BitRate {
    let bps: f64 = plan
        .probes()
        .map(|(r, q)| {
            let ip = probe_ip_len(r.family, q.mode, q.size);
            (framing.wire_bytes(ip as u64) * 8) as f64 / q.interval.as_secs_f64()
        })
        .sum();
    BitRate(bps.round() as u64)
}

/// One probe's IP packet length: the payload plus IPv4 20 or IPv6 40 (RFC 8200) and,
/// for UDP, 8 (the ICMP header is in the size).
fn probe_ip_len(family: Option<Family>, mode: ProbeMode, size: Option<usize>) -> usize {
    let payload = size.unwrap_or(DEFAULT_PROBE_SIZE);
    let ip = if family == Some(Family::V6) { 40 } else { 20 };
    payload
        + match mode {
            ProbeMode::Udp => ip + 8,
            ProbeMode::Icmp => ip,
        }
}

fn direction_name(d: DirectionRecord) -> &'static str {
    match d {
        DirectionRecord::Up => "up",
        DirectionRecord::Down => "down",
    }
}

/// Default probe sizes (`bloatlab ping`): 80 bytes of UDP payload or of ICMP message.
const DEFAULT_PROBE_SIZE: usize = 80;

/// The plan's probe traffic in one direction on the wire (IP packets): requests go up,
/// replies of the same size come down.
pub fn probe_rate(plan: &Plan) -> BitRate {
    let bps: f64 = plan
        .probes()
        .map(|(r, q)| {
            (probe_ip_len(r.family, q.mode, q.size) * 8) as f64 / q.interval.as_secs_f64()
        })
        .sum();
    BitRate(bps.round() as u64)
}

/// Adds one client run's TCP_INFO to its flow's record (a pulse flow has several runs):
/// the client is an upload's sender and a download's receiver; a download's sender is
/// the bloatlab server, whose record the client fetched (flow query). An end that was
/// not measured (an upload's receiver, an iperf 2 server) stays `null`.
fn add_flow_tcp(rec: &mut FlowTcpRecord, c: &ClientRun, direction: Direction) {
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    let ns = |d: Option<Duration>| d.map(bloatlab_results::convert::nanos);
    let sender = match direction {
        Direction::Up => Some(&c.sender_tcp),
        Direction::Down => {
            Some(&c.peer_sender_tcp).filter(|t| **t != crate::flow::SenderTcpInfo::default())
        }
    };
    if let Some(t) = sender {
        let s = rec.sender.get_or_insert_default();
        s.retransmits = sum(s.retransmits, t.retransmits);
        s.delivered_ce = sum(s.delivered_ce, t.delivered_ce);
        s.min_rtt_ns = match (s.min_rtt_ns, ns(t.rtt_min)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        s.max_rtt_ns = s.max_rtt_ns.max(ns(t.rtt_max));
        s.mean_rtt_ns = s.mean_rtt_ns.or(ns(t.rtt_mean));
    }
    if direction == Direction::Down {
        let t = &c.receiver_tcp;
        let r = rec.receiver.get_or_insert_default();
        r.received_ce = sum(r.received_ce, t.received_ce);
        r.out_of_order_packets = sum(r.out_of_order_packets, t.out_of_order_packets);
        r.rcv_rtt_ns = r.rcv_rtt_ns.or(ns(t.rcv_rtt));
    }
}

/// Adds one client run's ECN view to its flow's record: negotiated only if every
/// connection negotiated it; CE marks from the sender (an upload's client, a download's
/// bloatlab server), else from the receiving client.
fn add_flow_ecn(rec: &mut FlowEcnRecord, c: &ClientRun, direction: Direction) {
    if let Some(n) = c.ecn_negotiated {
        rec.negotiated = Some(rec.negotiated.unwrap_or(true) && n);
    }
    let ce = match direction {
        Direction::Up => c.sender_tcp.delivered_ce,
        Direction::Down => c
            .peer_sender_tcp
            .delivered_ce
            .or(c.receiver_tcp.received_ce),
    };
    if let Some(n) = ce {
        rec.ce_marks = Some(rec.ce_marks.unwrap_or(0) + n);
    }
}

fn add_client(
    samples: &mut Vec<bloatlab_results::schema::TransferRecord>,
    c: &ClientRun,
    o: &Output,
    run_start: jiff::Timestamp,
) {
    let offset = collect::align(collect::client_start(c), run_start, o.spawned);
    for s in collect::shift(&c.samples, offset) {
        samples.push(TransferRecord {
            start_ns: bloatlab_results::convert::nanos(s.start),
            end_ns: bloatlab_results::convert::nanos(s.end),
            bytes: s.bytes.0,
        });
    }
}

fn voip_rows(series: &[LatencySeries], name: &str, timeline: &Timeline) -> Vec<VoipRow> {
    let mut out = Vec::new();
    for ph in timeline.phases() {
        for (kind, dir) in [(DelayKind::OneWayUp, "up"), (DelayKind::OneWayDown, "down")] {
            let Some(s) = series.iter().find(|s| s.name == name && s.kind == kind) else {
                continue;
            };
            let mut in_phase: Vec<_> = s.in_phase(ph).copied().collect();
            in_phase.sort_by_key(|p| p.sent);
            if let Some(a) = assess_voip(&in_phase, &VoipConfig::default()) {
                out.push(VoipRow {
                    phase: ph.name.clone(),
                    direction: dir,
                    assessment: a,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn interrupted_timeline_is_cut_where_the_run_stopped() {
        let t = Timeline::idle_loaded_recovery(s(5), s(60), s(5));
        let cut = cut_timeline(&t, s(20));
        assert_eq!(cut.len(), 2);
        assert_eq!((cut[1].start, cut[1].end), (s(5), s(20)));
        let cut = cut_timeline(&t, s(3));
        assert_eq!(cut.len(), 1);
        assert_eq!(cut[0].end, s(3));
        let cut = cut_timeline(&t, Duration::ZERO);
        assert_eq!(cut.len(), 1, "never an empty timeline");
        assert!(Timeline::new(cut).is_ok());
    }

    #[test]
    fn flow_rtt_rise_is_the_flows_mean_rtt_over_the_idle_median() {
        use bloatlab_stats::latency::{DelayStats, LatencySummary};
        let ms = Duration::from_millis;
        let idle = LatencySummary {
            sent: 3,
            received: 3,
            lost: 0,
            unfinished: 0,
            duplicates: 0,
            late: 0,
            delay: DelayStats::from_delays(&[ms(80), ms(80), ms(81)]),
        };
        let loaded = Phase {
            kind: PhaseKind::Loaded,
            name: "loaded".into(),
            start: s(5),
            end: s(65),
        };
        // Two flows in the phase (86 and 88 ms), one after it (ignored).
        let w = [
            (s(5), s(65), ms(86)),
            (s(5), s(65), ms(88)),
            (s(70), s(80), ms(200)),
        ];
        assert_eq!(flow_rtt_rise(&w, &loaded, Some(&idle)), Some(ms(7)));
        assert_eq!(flow_rtt_rise(&w[2..], &loaded, Some(&idle)), None);
        assert_eq!(flow_rtt_rise(&w, &loaded, None), None);
    }

    #[test]
    fn probe_rate_of_rrul_at_100_hz_is_what_issue_9_measured() {
        // 3 UDP streams (108-byte packets) + ICMP (100 bytes) at 100 Hz: 339.2 kbit/s,
        // 46 % of a 737 kbit/s uplink.
        let p = plan(TestName::Rrul, &TestParams::default()).unwrap();
        assert_eq!(probe_rate(&p), BitRate(3 * 100 * 108 * 8 + 100 * 100 * 8));
        let slow = TestParams {
            probe_interval: Duration::from_millis(200),
            ..TestParams::default()
        };
        let p = plan(TestName::Rrul, &slow).unwrap();
        assert_eq!(probe_rate(&p).0, (3 * 108 * 8 + 100 * 8) * 5);
        // rrul46: UDP BE and BK and ICMP over each family; IPv6 headers are 20 B longer.
        let p = plan(TestName::Rrul46, &TestParams::default()).unwrap();
        let v4 = 2 * 108 + 100;
        let v6 = 2 * 128 + 120;
        assert_eq!(probe_rate(&p), BitRate((v4 + v6) * 8 * 100));
    }

    /// issue 18: on a chain the probes' share is judged on its shaped stages, each
    /// packet costed with the stage's framing. RRUL's probes at 100 Hz on ATM + 44: a
    /// 108-byte UDP probe is 152 bytes, 4 cells, 212 on the wire; the 100-byte ICMP probe
    /// 144 bytes, 3 cells, 159 (not the 108 and 100 IP bytes).
    #[test]
    fn probe_share_on_a_chain_counts_atm_cells_on_its_bottleneck() {
        use bloatlab_results::schema::{LinkDirectionRecord, StageRecord};
        let p = plan(TestName::Rrul, &TestParams::default()).unwrap();
        let atm = Overhead {
            bytes: 44,
            mpu: 0,
            framing: Framing::Atm,
        };
        assert_eq!(
            probe_wire_rate(&p, &atm),
            BitRate(3 * 100 * 212 * 8 + 100 * 159 * 8)
        );
        assert_eq!(probe_wire_rate(&p, &Overhead::default()), probe_rate(&p));
        let stage = |name: &str, rate: u64, framing: Option<&str>| StageRecord {
            name: name.into(),
            rate_bps: Some(rate),
            overhead_bytes: framing.map(|_| 44),
            framing: framing.map(str::to_owned),
            qdisc: "fifo".into(),
            ..StageRecord::default()
        };
        // A 10 Mbit/s ATM shaper in front of a 12 Mbit/s modem: the probes' 339.2 kbit/s
        // of IP packets are 3.4 % of the shaper (not flagged), but 636 kbit/s of cells,
        // 6.4 %: flagged, on the shaper.
        let link = LinkDirectionRecord {
            rate_bps: Some(10_000_000),
            stages: vec![
                stage("shaper", 10_000_000, Some("atm")),
                stage("modem", 12_000_000, None),
            ],
            ..LinkDirectionRecord::default()
        };
        let stages = link_stages(&link);
        assert_eq!(stages.len(), 2);
        assert_eq!(stages[0], (10_000_000, atm));
        let none = bloatlab_results::lab::PercentilesRecord::default();
        let record = |link: LinkDirectionRecord| LabRecord {
            name: "l".into(),
            host: "client".into(),
            backend: "userspace".into(),
            ecn: Default::default(),
            tun_ring_drops: None,
            directions: vec![bloatlab_results::lab::EmulatorRecord {
                direction: DirectionRecord::Up,
                link,
                start_ns: 0,
                end_ns: 0,
                enqueued_packets: 0,
                dequeued_packets: 0,
                dequeued_bytes: 0,
                drops: Default::default(),
                ce_marked: 0,
                backlog: Default::default(),
                sojourn: none,
                lateness: none,
                stages: vec![],
            }],
            phases: vec![],
        };
        let lab = record(link.clone());
        let f = lab_findings(&lab, &p);
        let text: Vec<String> = f.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.contains("take 6 % of the up link")),
            "{text:?}"
        );
        // Without the framing the same chain is not flagged.
        let mut plain = link;
        plain.stages[0].framing = None;
        plain.stages[0].overhead_bytes = None;
        let f = lab_findings(&record(plain), &p);
        assert!(!f.iter().any(|f| f.to_string().contains("probes")), "{f:?}");
    }

    /// issue 18: a phase in which the emulator fell behind (more than 2 % of its packets
    /// released over 1 ms late) is named in the findings, with the experiments' wording;
    /// an on-time phase, and a phase of a few packets, are not.
    #[test]
    fn a_phase_where_the_emulator_fell_behind_is_a_finding() {
        use bloatlab_results::lab::{EmulatorPhaseRecord, PercentilesRecord, PhaseLatenessRecord};
        let phase = |name: &str, dir, count, late_packets| EmulatorPhaseRecord {
            phase: name.into(),
            direction: dir,
            start_ns: 0,
            end_ns: 1,
            dequeued_bytes: 0,
            drops: 0,
            ce_marked: 0,
            utilisation: None,
            lateness: Some(PhaseLatenessRecord {
                percentiles: PercentilesRecord {
                    count,
                    p99_ns: Some(7_200_000),
                    ..PercentilesRecord::default()
                },
                late_packets,
            }),
        };
        let lab = |phases| LabRecord {
            name: "l".into(),
            host: "client".into(),
            backend: "userspace".into(),
            ecn: Default::default(),
            tun_ring_drops: None,
            directions: vec![],
            phases,
        };
        let p = plan(TestName::Rrul, &TestParams::default()).unwrap();
        let on_time = lab(vec![
            phase("loaded", DirectionRecord::Up, 3000, 60),
            phase("idle", DirectionRecord::Up, 20, 10),
        ]);
        assert!(lab_findings(&on_time, &p).is_empty());
        let busy = lab(vec![phase("loaded", DirectionRecord::Down, 3000, 195)]);
        let text: Vec<String> = lab_findings(&busy, &p)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            text,
            [
                "the lab's emulator released 6.5 % of the down packets more than 1 ms late in \
              phase loaded (bound 2.0 %, p99 7.2 ms): the host was too busy, latency figures \
              include host delay"
            ]
        );
    }
}
