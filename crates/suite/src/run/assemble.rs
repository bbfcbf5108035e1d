//! Turning a driven plan into a [`RunOutcome`], in named steps: collect what every runner
//! reported ([`collect_outputs`]), refuse a run in which no flow moved anything
//! ([`ensure_some_flow_ran`]), fix the phases the run covered ([`covered_phases`]), write the
//! metadata ([`metadata`]), compute the file with its derived figures, then the findings
//! ([`queue_findings`], [`host_and_lab_findings`]) and the VoIP rows.

use std::time::Duration;

use bloatlab_results::schema::{
    FlowCongestionControl, FlowEcnRecord, FlowRecord, FlowTcpRecord, LatencyRecord, PhaseRecord,
    RpmRecord, TransferRecord,
};
use bloatlab_results::{Metadata, Raw, ResultsFile};
use bloatlab_stats::conditions::{
    CongestionSignals, Finding, HostCheckConfig, QueueCheckConfig, check_host, check_queue,
};
use bloatlab_stats::{Direction, LatencySeries, Phase, PhaseKind, Timeline};
use serde_json::json;

use super::{
    RunConfig, RunError, RunOutcome, add_client, add_flow_ecn, add_flow_tcp, cut_timeline,
    dir_record, flow_rtt_rise, lab_findings, lab_signals, reported_on_stop, voip_rows,
};
use crate::collect::{self, ClientRun};
use crate::driver::{DriveResult, Output, RunnerResult};
use crate::ecn::EcnMode;
use crate::host;
use crate::lab::LabWatch;
use crate::plan::{Plan, Probe, ProbeMode, RunnerKind, TcpFlow};

/// `(start, stop, value)`: a runner's planned window and what it counted in it, so each
/// loaded phase is credited only with the runners that ran in it (speedtest's upload
/// retransmits are not its download's).
type Window<T> = (Duration, Duration, T);

/// What the runners' outputs amount to, before anything is written.
#[derive(Debug, Default)]
struct Collected {
    /// Problems with individual runners, one line each.
    notes: Vec<String>,
    /// One record per TCP runner.
    flows: Vec<FlowRecord>,
    /// Every probe series.
    latency: Vec<LatencyRecord>,
    /// The senders' retransmits summed; `None`: no sender sampled TCP_INFO.
    retransmits: Option<u64>,
    /// Per client run whose sender counted retransmits.
    retrans_windows: Vec<Window<u64>>,
    /// Per client run with CE marks (upload: `tcpi_delivered_ce` at the sender; download:
    /// `tcpi_received_ce` at the receiving client).
    ce_windows: Vec<Window<u64>>,
    /// Per upload whose sender sampled TCP_INFO: its mean smoothed RTT.
    rtt_windows: Vec<Window<Duration>>,
    /// The congestion control of each flow's sender, as read back.
    per_flow_cc: Vec<FlowCongestionControl>,
    /// The server's version and software, from the first client that heard them.
    peer_version: Option<String>,
    peer_software: Option<String>,
    /// The UDP probers' send lateness (host check).
    lateness: Vec<Duration>,
    /// How long each pulse took (one_vs_pulses).
    pulses: Vec<Duration>,
    /// The first flow failure's message (the error when every flow failed).
    first_flow_error: Option<String>,
    /// `{"flow", "why"}` of every load runner that did not run as asked (not counting an
    /// interrupted run's stop): readers judge the run incomplete (docs/experiments.md).
    flow_failures: Vec<serde_json::Value>,
    /// TCP runners that reported any transfer.
    flows_with_data: usize,
    /// The last runner exit seen, from the run start.
    end_seen: Duration,
    /// The `rpm` test's draft run and its child's spawn offset.
    draft: Option<(RpmRecord, Duration)>,
}

/// What one TCP runner's client runs add up to (a pulse flow has several).
#[derive(Debug, Default)]
struct FlowParts {
    samples: Vec<TransferRecord>,
    /// The client's own TCP_INFO: an upload's sender, a download's receiver.
    tcp: FlowTcpRecord,
    ecn: FlowEcnRecord,
}

/// The run's results: every step below, in order.
pub(super) fn assemble(
    cfg: &RunConfig,
    plan: &Plan,
    drove: DriveResult,
    run_start: jiff::Timestamp,
    cpu: Vec<f64>,
    watch: Option<&LabWatch>,
) -> Result<RunOutcome, RunError> {
    let mut c = collect_outputs(cfg, &drove, run_start)?;
    ensure_some_flow_ran(plan, &c, drove.interrupted)?;
    let phases = covered_phases(plan, &mut c, &drove);
    let raw = Raw {
        phases: phases.iter().map(PhaseRecord::from).collect(),
        latency: std::mem::take(&mut c.latency),
        throughput: std::mem::take(&mut c.flows),
    };
    let meta = metadata(
        cfg,
        plan,
        run_start,
        drove.interrupted,
        &mut c,
        &cpu,
        watch,
        &phases,
    );
    let file = ResultsFile::new(meta, raw).with_derived()?;
    let timeline = file.raw.timeline()?;
    let series = file.raw.latency_series();
    // The headline grade is `derived.run_grade`, computed with the file (its worst loaded
    // phase, bloatlab_stats::analysis::run_grade); the findings judge the same series.
    let reference = bloatlab_stats::reference_series(&series);
    let lab = file.metadata.lab.as_ref();
    let mut findings = queue_findings(reference, &timeline, &c, lab);
    findings.extend(host_and_lab_findings(&c.lateness, &cpu, lab, plan));
    let voip = plan
        .probes()
        .filter(|(_, q)| q.voip)
        .flat_map(|(r, _)| voip_rows(&series, &r.name, &timeline))
        .collect();
    Ok(RunOutcome {
        reference: reference.map(|s| s.name.clone()),
        file,
        findings,
        notes: c.notes,
        voip,
        pulses: c.pulses,
    })
}

/// Reads every runner's outputs. Fails only when the `rpm` test's draft run failed on a
/// run that was not stopped (its load is the test's load).
fn collect_outputs(
    cfg: &RunConfig,
    drove: &DriveResult,
    run_start: jiff::Timestamp,
) -> Result<Collected, RunError> {
    let mut c = Collected::default();
    for r in &drove.runners {
        for o in &r.outputs {
            c.end_seen = c.end_seen.max(o.exited);
        }
        match &r.runner.kind {
            RunnerKind::Tcp(flow) => c.add_tcp(cfg, r, flow, drove.interrupted, run_start),
            RunnerKind::Rpm => c.add_rpm(cfg, r, drove.interrupted)?,
            RunnerKind::Probe(p) => c.add_probe(r, p, run_start),
        }
    }
    Ok(c)
}

impl Collected {
    /// One TCP runner: its client runs' transfers, TCP_INFO, ECN and failures.
    fn add_tcp(
        &mut self,
        cfg: &RunConfig,
        r: &RunnerResult,
        flow: &TcpFlow,
        interrupted: bool,
        run_start: jiff::Timestamp,
    ) {
        let mut parts = FlowParts {
            ecn: FlowEcnRecord {
                requested: cfg.ecn.map(|m| match m {
                    EcnMode::On => true,
                    EcnMode::Off => false,
                    EcnMode::Mix => flow.ecn,
                }),
                ..FlowEcnRecord::default()
            },
            ..FlowParts::default()
        };
        for o in &r.outputs {
            match (o.status, collect::parse_client(&o.stdout)) {
                // A client that failed after it measured (a stall, a reset) still printed
                // what it moved until then: those bytes are kept, and the failure is
                // recorded so the run counts as incomplete (`flow_failures` in the
                // metadata's extra).
                (Some(code), Ok(client)) => {
                    if code != 0 && !reported_on_stop(interrupted, code) {
                        self.flow_failed(&r.runner.name, o.error_line(), true);
                    }
                    add_client(&mut parts.samples, &client, o, run_start);
                    self.add_client_run(r, flow, o, &client, &mut parts);
                }
                (status, parsed) => {
                    let why = match (status, parsed) {
                        (None, _) => "interrupted before it reported".to_owned(),
                        (Some(0), Err(e)) => e.to_string(),
                        _ => o.error_line(),
                    };
                    self.flow_failed(&r.runner.name, why, !interrupted);
                }
            }
        }
        if !parts.samples.is_empty() {
            self.flows_with_data += 1;
        }
        self.flows.push(FlowRecord {
            name: r.runner.name.clone(),
            direction: dir_record(flow.direction),
            samples: parts.samples,
            tcp: parts.tcp,
            ecn: (parts.ecn != FlowEcnRecord::default()).then_some(parts.ecn),
        });
    }

    /// A flow that did not run as asked: a note, and (`counts`) a `flow_failures` entry.
    fn flow_failed(&mut self, flow: &str, why: String, counts: bool) {
        self.first_flow_error.get_or_insert_with(|| why.clone());
        self.notes.push(format!("flow {flow}: {why}"));
        if counts {
            self.flow_failures.push(json!({"flow": flow, "why": why}));
        }
    }

    /// What one client run's report says beyond its transfers: the sender's retransmits,
    /// CE marks, the flow's TCP_INFO and ECN, congestion control, the server's name, the
    /// upload's RTT and a pulse's length.
    fn add_client_run(
        &mut self,
        r: &RunnerResult,
        flow: &TcpFlow,
        o: &Output,
        c: &ClientRun,
        parts: &mut FlowParts,
    ) {
        let window = |v| (r.runner.start, r.runner.stop, v);
        // The flow's sender: the client for uploads, the bloatlab server for downloads
        // (its record, fetched by the client's flow query; not measured from an iperf 2
        // server).
        let sender = match flow.direction {
            Direction::Up => &c.sender_tcp,
            Direction::Down => &c.peer_sender_tcp,
        };
        if let Some(n) = sender.retransmits {
            self.retransmits = Some(self.retransmits.unwrap_or(0) + n);
            self.retrans_windows.push(window(n));
        }
        add_flow_tcp(&mut parts.tcp, c, flow.direction);
        // CE marks: an upload's sender counts those echoed back, a download's receiving
        // client those that arrived (Linux 6.18+), else the server's sender those echoed
        // back to it.
        let ce = match flow.direction {
            Direction::Up => c.sender_tcp.delivered_ce,
            Direction::Down => c
                .receiver_tcp
                .received_ce
                .or(c.peer_sender_tcp.delivered_ce),
        };
        if let Some(n) = ce {
            self.ce_windows.push(window(n));
        }
        add_flow_ecn(&mut parts.ecn, c, flow.direction);
        // The congestion control of the flow's sender, read back from its socket (a
        // download's sender is the server, which says in its hello; unknown when it is
        // not bloatlab).
        if !self.per_flow_cc.iter().any(|f| f.flow == r.runner.name) {
            self.per_flow_cc.push(crate::meta::flow_cc(
                &r.runner.name,
                flow,
                c.sender_congestion_control.as_deref(),
            ));
        }
        if self.peer_version.is_none() {
            self.peer_version = c.peer_version.clone();
        }
        if self.peer_software.is_none() {
            self.peer_software = c.peer_software.clone();
        }
        if flow.direction == Direction::Up
            && let Some(rtt) = c.sender_tcp.rtt_mean
        {
            self.rtt_windows.push((r.runner.start, r.runner.stop, rtt));
        }
        if matches!(flow.amount, crate::plan::Amount::Pulses { .. }) {
            self.pulses.push(o.exited.saturating_sub(o.spawned));
        }
    }

    /// The `rpm` test's draft run. Its failure fails the run, unless the user stopped it
    /// before it reported (the file then says interrupted).
    fn add_rpm(
        &mut self,
        cfg: &RunConfig,
        r: &RunnerResult,
        interrupted: bool,
    ) -> Result<(), RunError> {
        match r.outputs.first().map(|o| (o.spawned, crate::rpm::read(o))) {
            Some((spawned, Ok(rec))) => self.draft = Some((rec, spawned)),
            other => {
                let why = match other {
                    Some((_, Err(e))) => e,
                    _ => "it did not start".to_owned(),
                };
                if !interrupted {
                    return Err(RunError::Rpm {
                        url: cfg.target.rpm_url(),
                        detail: why,
                    });
                }
                self.notes.push(format!("rpm: {why}"));
            }
        }
        Ok(())
    }

    /// One probe stream: its series on the run's axis, and a UDP prober's lateness.
    fn add_probe(&mut self, r: &RunnerResult, p: &Probe, run_start: jiff::Timestamp) {
        let Some(o) = r.outputs.first() else { return };
        match collect::parse_ping(&o.stdout) {
            Ok(ping) => {
                let offset = collect::align(Some(ping.start), run_start, o.spawned);
                if p.mode == ProbeMode::Udp {
                    self.lateness.extend(ping.lateness());
                }
                self.latency.extend(ping.series_at(&r.runner.name, offset));
            }
            Err(e) => {
                let why = if o.stdout.is_empty() {
                    o.error_line()
                } else {
                    e.to_string()
                };
                self.notes.push(format!("probe {}: {why}", r.runner.name));
            }
        }
    }
}

/// A run with TCP flows of which none moved a byte has nothing to report (unless it was
/// stopped: then what was measured is kept).
fn ensure_some_flow_ran(plan: &Plan, c: &Collected, interrupted: bool) -> Result<(), RunError> {
    let has_tcp = plan.tcp().next().is_some();
    if has_tcp && c.flows_with_data == 0 && !interrupted {
        return Err(RunError::AllFlowsFailed(
            c.first_flow_error
                .clone()
                .unwrap_or_else(|| "no output".into()),
        ));
    }
    Ok(())
}

/// The phases the run covered: the plan's, or for the `rpm` test the draft's runs
/// (crate::rpm, which also sets each run's phase in the draft's record), cut where an
/// interrupted run stopped (else where its last runner exited).
fn covered_phases(plan: &Plan, c: &mut Collected, drove: &DriveResult) -> Vec<Phase> {
    let timeline = match &mut c.draft {
        Some((rec, spawned)) => crate::rpm::phases(&plan.timeline, rec, *spawned),
        None => None,
    }
    .unwrap_or_else(|| plan.timeline.clone());
    if drove.interrupted {
        cut_timeline(&timeline, drove.stopped_at.unwrap_or(c.end_seen))
    } else {
        timeline.phases().to_vec()
    }
}

/// The metadata: the command, this host, the server, congestion control, the plan, the
/// draft's record, CPU samples, pulses, notes, flow failures and the lab's view.
#[allow(clippy::too_many_arguments)] // One step of `assemble`, fed what it gathered.
fn metadata(
    cfg: &RunConfig,
    plan: &Plan,
    run_start: jiff::Timestamp,
    interrupted: bool,
    c: &mut Collected,
    cpu: &[f64],
    watch: Option<&LabWatch>,
    phases: &[Phase],
) -> Metadata {
    let mut meta = Metadata::new(cfg.test.as_str(), cfg.command_line.clone(), run_start);
    meta.title = cfg.title.clone();
    meta.interrupted = interrupted;
    meta.hosts = crate::meta::hosts(
        host::node_name(),
        &cfg.target.host,
        cfg.target.port,
        c.peer_software.as_deref(),
        c.peer_version.as_deref(),
    );
    meta.kernel = host::kernel();
    meta.sysctls = host::sysctls();
    meta.congestion_control = crate::meta::congestion_control(
        meta.sysctls.get("net.ipv4.tcp_congestion_control").cloned(),
        &cfg.params,
        std::mem::take(&mut c.per_flow_cc),
    );
    meta.plan = Some(crate::meta::plan_record(&cfg.params, plan, &cfg.target));
    meta.rpm = c.draft.take().map(|(rec, _)| rec);
    meta.cpu_utilisation = cpu.to_vec();
    if !c.pulses.is_empty() {
        let ns: Vec<u64> = c
            .pulses
            .iter()
            .map(|d| bloatlab_results::convert::nanos(*d))
            .collect();
        meta.extra.insert("pulse_durations_ns".into(), json!(ns));
    }
    meta.notes = c.notes.clone();
    if !c.flow_failures.is_empty() {
        meta.extra
            .insert("flow_failures".into(), json!(c.flow_failures));
    }
    if let Some(w) = watch {
        lab_metadata(&mut meta, w, phases);
    }
    meta
}

/// The lab's record of the run (per phase and direction), and its link and qdisc
/// settings in the general metadata fields.
fn lab_metadata(meta: &mut Metadata, w: &LabWatch, phases: &[Phase]) {
    let mut per_phase = Vec::new();
    for ph in phases {
        for dir in ["up", "down"] {
            per_phase.extend(w.phase(ph, dir));
        }
    }
    let rec = w.record(per_phase);
    let link = w.link_record();
    meta.qdisc.extend(
        [&link.up, &link.down]
            .into_iter()
            .filter_map(|d| d.qdisc.clone()),
    );
    meta.link = Some(link);
    meta.lab = Some(rec);
}

/// Per loaded phase of the reference series: did the load build a queue (its median
/// against the idle median, with the flows' retransmits, CE marks and RTT rise and the
/// lab's drops, marks and utilisation in that phase). None without an idle phase.
fn queue_findings(
    reference: Option<&LatencySeries>,
    timeline: &Timeline,
    c: &Collected,
    lab: Option<&bloatlab_results::lab::LabRecord>,
) -> Vec<(Option<String>, Finding)> {
    let Some(rs) = reference else {
        return Vec::new();
    };
    let Some(idle) = timeline.first(PhaseKind::Idle).map(|p| rs.summarize(p)) else {
        return Vec::new();
    };
    let in_phase = |w: &[Window<u64>], ph: &Phase| -> u64 {
        w.iter()
            .filter(|(a, b, _)| *a < ph.end && ph.start < *b)
            .map(|(_, _, n)| n)
            .sum()
    };
    timeline
        .phases()
        .iter()
        .filter(|p| p.kind == PhaseKind::Loaded)
        .map(|ph| {
            let mut signals = CongestionSignals {
                retransmits: c.retransmits.map(|_| in_phase(&c.retrans_windows, ph)),
                ecn_marks: (!c.ce_windows.is_empty()).then(|| in_phase(&c.ce_windows, ph)),
                flow_rtt_rise: flow_rtt_rise(&c.rtt_windows, ph, Some(&idle)),
                ..CongestionSignals::default()
            };
            if let Some(lab) = lab {
                lab_signals(&mut signals, lab, &ph.name);
            }
            let loaded = rs.summarize(ph);
            let f = check_queue(&idle, &loaded, signals, &QueueCheckConfig::default());
            (Some(ph.name.clone()), f)
        })
        .collect()
}

/// Whole-run findings: was this host too busy (probe timer lateness, CPU), and in a lab,
/// was the emulator late or the probes a large share of a link.
fn host_and_lab_findings(
    lateness: &[Duration],
    cpu: &[f64],
    lab: Option<&bloatlab_results::lab::LabRecord>,
    plan: &Plan,
) -> Vec<(Option<String>, Finding)> {
    let mut out: Vec<_> = check_host(lateness, cpu, &HostCheckConfig::default())
        .into_iter()
        .map(|f| (None, f))
        .collect();
    if let Some(lab) = lab {
        out.extend(lab_findings(lab, plan).into_iter().map(|f| (None, f)));
    }
    out
}
