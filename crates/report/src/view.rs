//! The figures of a run formatted for people, shared by the terminal tables and the
//! HTML report so both always show the same digits.
//!
//! Delays are shown in milliseconds, rates in Mbit/s (10^6 bit/s), loss in percent.
//! A missing value (no probe arrived, no idle baseline, …) is shown as `-`.

use std::collections::BTreeMap;

use bloatlab_results::derived::{
    DelayDerived, Derived, LatencyPhaseDerived, RunGradeDerived, ThroughputDerived,
};
use bloatlab_results::schema::{DelayKindRecord, DirectionRecord, PhaseKindRecord};
use serde::Serialize;

use crate::run::Run;

/// What an absent value prints as.
pub const NONE: &str = "-";

/// Milliseconds from nanoseconds, with precision that suits the magnitude.
pub fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v < 1.0 {
        format!("{v:.3}")
    } else if v < 100.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// Signed milliseconds (for induced latency, which can be negative).
pub fn signed_ms(ns: i64) -> String {
    if ns == 0 {
        return "0".into();
    }
    let s = ms(ns.unsigned_abs());
    if ns < 0 {
        format!("-{s}")
    } else {
        format!("+{s}")
    }
}

/// Mbit/s from bit/s, two decimals.
pub fn mbps(bps: u64) -> String {
    format!("{:.2}", bps as f64 / 1e6)
}

/// A fraction as a percentage, two decimals.
pub fn percent(f: f64) -> String {
    format!("{:.2}%", f * 100.0)
}

/// Jain's index, three decimals.
pub fn index(f: f64) -> String {
    format!("{f:.3}")
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| NONE.to_owned())
}

/// `rtt`, `owd up`, `owd down`.
pub fn kind_name(k: DelayKindRecord) -> &'static str {
    match k {
        DelayKindRecord::Rtt => "rtt",
        DelayKindRecord::OwdUp => "owd up",
        DelayKindRecord::OwdDown => "owd down",
    }
}

/// A latency series as people see it: its name and what it measures, `udp_be (rtt)`,
/// `udp_be (owd down)`. Two series of one name are different series (docs/report.md).
pub fn series_label(name: &str, kind: DelayKindRecord) -> String {
    format!("{name} ({})", kind_name(kind))
}

/// `up` or `down`.
pub fn direction_name(d: DirectionRecord) -> &'static str {
    match d {
        DirectionRecord::Up => "up",
        DirectionRecord::Down => "down",
    }
}

/// One key/value line of metadata.
#[derive(Debug, Clone, Serialize)]
pub struct MetaRow {
    /// Field name.
    pub key: String,
    /// Value as text (free-form maps as compact JSON).
    pub value: String,
}

/// One latency series in one phase.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // Column names; units in the module docs.
pub struct LatencyRow {
    pub series: String,
    pub kind: String,
    pub phase: String,
    pub min: String,
    pub p10: String,
    pub median: String,
    pub mean: String,
    pub p90: String,
    pub p99: String,
    pub max: String,
    pub count: String,
    pub sent: String,
    pub loss: String,
    pub induced: String,
    pub grade: String,
    /// 60000 / trimmed mean of the probe RTTs ("probe RPM", not the draft's).
    pub probe_rpm: String,
}

/// One flow in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct FlowRow {
    /// Flow name.
    pub name: String,
    /// `up` or `down`.
    pub direction: String,
    /// Mean rate over the covered part of the phase, Mbit/s.
    pub mbps: String,
    /// Covered fraction of the phase, percent.
    pub coverage: String,
}

/// One flow over the whole run: what it moved and what its TCP said.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummaryRow {
    /// Flow name.
    pub name: String,
    /// `up` or `down`.
    pub direction: String,
    /// Bytes moved over the whole run, in MB (10^6 bytes).
    pub megabytes: String,
    /// Congestion control the sender used, or "not measured".
    pub congestion_control: String,
    /// The sender's retransmits, or "not measured" (TCP_INFO not sampled).
    pub retransmits: String,
    /// ECN of the flow: whether it asked and what it negotiated, or "not measured".
    pub ecn: String,
    /// CE marks the flow met (its ECN record, else the sender's `delivered_ce`, else
    /// the receiver's `received_ce`), or "not measured".
    pub ce_marks: String,
}

/// "asked, negotiated", "not asked, not negotiated", ... for a flow's ECN record.
fn ecn_text(e: Option<bloatlab_results::schema::FlowEcnRecord>) -> String {
    let Some(e) = e else {
        return crate::meta::NOT_MEASURED.to_owned();
    };
    let asked = e.requested.map(|a| if a { "asked" } else { "not asked" });
    let negotiated = match e.negotiated {
        Some(true) => "negotiated",
        Some(false) => "not negotiated",
        None => "negotiation not measured",
    };
    match asked {
        Some(a) => format!("{a}, {negotiated}"),
        None => negotiated.to_owned(),
    }
}

/// Throughput over one phase.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)] // Column names; units in the module docs.
pub struct ThroughputView {
    pub phase: String,
    pub flows: Vec<FlowRow>,
    pub up: String,
    pub down: String,
    pub total: String,
    pub fairness_up: String,
    pub fairness_down: String,
    pub fairness_all: String,
}

/// Everything a report shows about one run, as text.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    /// The run's label.
    pub label: String,
    /// The test name.
    pub test: String,
    /// The user's title, if any.
    pub title: Option<String>,
    /// The run was cut short.
    pub interrupted: bool,
    /// The lab's emulator was late during the run (shown with the latency figures).
    pub emulator_late: Option<String>,
    /// The headline bufferbloat grade, `A+`..`F`, or `-`: the worst loaded phase of the
    /// reference series (`derived.run_grade`; the rule in `bloatlab_stats::grade`).
    pub grade: String,
    /// What the grade is of: `udp_be (rtt) rose 55.00 ms in upload, the worst loaded
    /// phase`, or why there is none.
    pub grade_reason: String,
    /// Metadata lines.
    pub meta: Vec<MetaRow>,
    /// Phases as `name (kind): start-end s`.
    pub phases: Vec<String>,
    /// Per latency series and phase.
    pub latency: Vec<LatencyRow>,
    /// Per phase.
    pub throughput: Vec<ThroughputView>,
    /// Per flow, whole run.
    pub flows: Vec<FlowSummaryRow>,
    /// The draft's responsiveness of a `bloatlab rpm` run (`metadata.rpm`); empty
    /// otherwise.
    pub responsiveness: Vec<MetaRow>,
}

fn parts_text(p: &bloatlab_results::schema::RpmPartsRecord) -> String {
    format!(
        "tcp_f {}  tls_f {}  http_f {}  http_l {}",
        ms(p.tcp_f_ns),
        opt(p.tls_f_ns, ms),
        ms(p.http_f_ns),
        ms(p.http_l_ns)
    )
}

/// The rows of a `bloatlab rpm` session: how it ran, idle latency, capacities, and per
/// run the draft's RPM (trimmed means) beside the P90 figure, with their parts in ms. For
/// a `bloatlab test rpm` run (each run names its test phase) also the probe RPM of each
/// probe series in that phase, from `derived`: the two figures side by side.
pub fn responsiveness_rows(
    r: &bloatlab_results::schema::RpmRecord,
    derived: &Derived,
) -> Vec<MetaRow> {
    let mut rows = vec![(
        "method".to_owned(),
        format!(
            "draft-ietf-ippm-responsiveness-09, {} ({}), {}, self probes: {}",
            r.protocol,
            r.tls.as_deref().unwrap_or("no TLS"),
            r.mode,
            r.self_probes
        ),
    )];
    if let Some(i) = &r.idle {
        rows.push((
            "idle latency (ms)".into(),
            format!("{} ({} GETs)", ms(i.latency_ns), i.samples),
        ));
    }
    for (dir, c) in [("download", &r.download), ("upload", &r.upload)] {
        if let Some(c) = c {
            rows.push((
                format!("{dir} capacity (Mbit/s)"),
                format!(
                    "{}, confidence {}, {} connections",
                    mbps(c.capacity_bps),
                    c.confidence,
                    c.connections
                ),
            ));
        }
    }
    for x in &r.responsiveness {
        let rpm = |v: Option<f64>, b: &Option<String>| match (v, b) {
            (Some(v), Some(b)) => format!("{v:.0} ({b})"),
            _ => NONE.to_owned(),
        };
        rows.push((
            format!("{} RPM (draft, trimmed mean)", x.run),
            format!("{}, confidence {}", rpm(x.rpm, &x.band), x.confidence),
        ));
        rows.push((
            format!("{} RPM (draft, P90)", x.run),
            rpm(x.p90_rpm, &x.p90_band),
        ));
        if let Some(phase) = &x.phase {
            let probes: Vec<String> = derived
                .latency
                .iter()
                .filter(|s| s.kind == DelayKindRecord::Rtt)
                .filter_map(|s| {
                    let p = s.phases.iter().find(|p| &p.phase == phase)?;
                    Some(format!(
                        "{} {}",
                        s.name,
                        opt(p.probe_rpm, |v| format!("{v:.0}"))
                    ))
                })
                .collect();
            rows.push((
                format!("{} probe RPM (phase {phase}, UDP/ICMP probes)", x.run),
                if probes.is_empty() {
                    NONE.to_owned()
                } else {
                    probes.join(", ")
                },
            ));
        }
        if let Some(t) = &x.trimmed {
            rows.push((format!("{} trimmed means (ms)", x.run), parts_text(t)));
        }
        if let Some(t) = &x.p90 {
            rows.push((format!("{} P90 (ms)", x.run), parts_text(t)));
        }
    }
    rows.into_iter()
        .map(|(key, value)| MetaRow { key, value })
        .collect()
}

fn flow_rows(run: &Run) -> Vec<FlowSummaryRow> {
    let not_measured = || crate::meta::NOT_MEASURED.to_owned();
    run.file
        .raw
        .throughput
        .iter()
        .zip(&run.flows)
        .map(|(rec, series)| {
            let sender = rec.tcp.sender;
            FlowSummaryRow {
                name: rec.name.clone(),
                direction: direction_name(rec.direction).into(),
                megabytes: format!("{:.2}", series.transferred().0 as f64 / 1e6),
                congestion_control: run
                    .file
                    .metadata
                    .congestion_control
                    .per_flow
                    .iter()
                    .find(|c| c.flow == rec.name)
                    .and_then(|c| c.used.clone())
                    .unwrap_or_else(not_measured),
                retransmits: sender
                    .and_then(|t| t.retransmits)
                    .map_or_else(not_measured, |r| r.to_string()),
                ecn: ecn_text(rec.ecn),
                ce_marks: rec
                    .ecn
                    .and_then(|e| e.ce_marks)
                    .or(sender.and_then(|t| t.delivered_ce))
                    .or(rec.tcp.receiver.and_then(|t| t.received_ce))
                    .map_or_else(not_measured, |r| r.to_string()),
            }
        })
        .collect()
}

fn delay_cells(d: Option<&DelayDerived>) -> [String; 8] {
    match d {
        Some(d) => [
            ms(d.min_ns),
            ms(d.p10_ns),
            ms(d.median_ns),
            ms(d.mean_ns),
            ms(d.p90_ns),
            ms(d.p99_ns),
            ms(d.max_ns),
            d.count.to_string(),
        ],
        None => std::array::from_fn(|i| if i == 7 { "0".into() } else { NONE.into() }),
    }
}

fn latency_row(series: &str, kind: DelayKindRecord, p: &LatencyPhaseDerived) -> LatencyRow {
    let [min, p10, median, mean, p90, p99, max, count] = delay_cells(p.delay.as_ref());
    LatencyRow {
        series: series.to_owned(),
        kind: kind_name(kind).to_owned(),
        phase: p.phase.clone(),
        min,
        p10,
        median,
        mean,
        p90,
        p99,
        max,
        count,
        sent: p.sent.to_string(),
        loss: opt(p.loss_fraction, percent),
        induced: opt(p.induced_ns, signed_ms),
        grade: p.grade.map_or_else(|| NONE.into(), |g| g.to_string()),
        probe_rpm: match (&p.probe_rpm, &p.probe_rpm_class) {
            (Some(r), Some(c)) => format!("{r:.0} ({c})"),
            (Some(r), None) => format!("{r:.0}"),
            _ => NONE.into(),
        },
    }
}

fn throughput_view(t: &ThroughputDerived) -> ThroughputView {
    // No sample at all in the phase (e.g. idle): "no data", not 0 Mbit/s.
    let covered = |d: Option<DirectionRecord>| {
        t.flows
            .iter()
            .any(|f| f.coverage > 0.0 && d.is_none_or(|d| f.direction == d))
    };
    let sum = |bps: u64, d| if covered(d) { mbps(bps) } else { NONE.into() };
    ThroughputView {
        phase: t.phase.clone(),
        flows: t
            .flows
            .iter()
            .map(|f| FlowRow {
                name: f.name.clone(),
                direction: direction_name(f.direction).into(),
                mbps: if f.coverage > 0.0 {
                    mbps(f.mean_bps)
                } else {
                    NONE.into()
                },
                coverage: percent(f.coverage),
            })
            .collect(),
        up: sum(t.up_bps, Some(DirectionRecord::Up)),
        down: sum(t.down_bps, Some(DirectionRecord::Down)),
        total: sum(t.total_bps, None),
        fairness_up: opt(t.fairness_up, index),
        fairness_down: opt(t.fairness_down, index),
        fairness_all: opt(t.fairness_all, index),
    }
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// This host's CPU use in the loaded phases, as numbers: median and peak of the samples.
fn cpu_use(m: &bloatlab_results::Metadata) -> Option<String> {
    let (median, max) = m.cpu_median_max()?;
    let n = m.cpu_utilisation.len();
    Some(format!(
        "median {:.0} %, max {:.0} % of this host during loaded phases ({n} sample{}, one per 500 ms)",
        median * 100.0,
        max * 100.0,
        if n == 1 { "" } else { "s" }
    ))
}

fn incomplete(inc: &bloatlab_results::schema::IncompleteRecord) -> String {
    let mut s = format!(
        "recovered from its journal: reached phase {} at {:.1} s; {}",
        inc.phase_reached.as_deref().unwrap_or("?"),
        inc.reached_ns as f64 / 1e9,
        inc.reason
    );
    if !inc.runners_missing.is_empty() {
        s.push_str(&format!(
            "; no data from: {}",
            inc.runners_missing.join(", ")
        ));
    }
    s
}

fn meta_rows(run: &Run) -> Vec<MetaRow> {
    let m = &run.file.metadata;
    let mut rows = vec![
        ("test", m.test.clone()),
        ("start time", m.start_time.to_string()),
        ("command line", m.command_line.join(" ")),
        ("bloatlab version", m.bloatlab_version.clone()),
    ];
    if let Some(src) = &run.source {
        rows.push(("file", src.display().to_string()));
    }
    if m.interrupted {
        rows.push(("interrupted", "yes: the run was cut short".into()));
    }
    let records = [
        ("hosts", crate::meta::hosts(&m.hosts)),
        ("kernel", crate::meta::kernel(&m.kernel)),
        (
            "sysctls",
            (!m.sysctls.is_empty()).then(|| {
                m.sysctls
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
        ),
        (
            "congestion control",
            crate::meta::congestion_control(&m.congestion_control),
        ),
        ("qdisc", crate::meta::qdiscs(&m.qdisc)),
        ("link", m.link.as_ref().map(crate::meta::link)),
        ("lab emulator", m.lab.as_ref().map(crate::lab::summary)),
        ("plan", m.plan.as_ref().map(crate::meta::plan)),
        ("CPU use", cpu_use(m)),
        ("notes", (!m.notes.is_empty()).then(|| m.notes.join("; "))),
        ("incomplete", m.incomplete.as_ref().map(incomplete)),
        ("extra", (!m.extra.is_empty()).then(|| json_text(&m.extra))),
    ];
    for (k, v) in records {
        if let Some(v) = v {
            rows.push((k, v));
        }
    }
    rows.into_iter()
        .map(|(k, v)| MetaRow {
            key: k.into(),
            value: v,
        })
        .collect()
}

/// The headline grade and what it is of (see [`RunView::grade`]).
pub fn run_grade(g: Option<&RunGradeDerived>) -> (String, String) {
    match g {
        Some(g) => (
            g.grade.to_string(),
            format!(
                "{} rose {} ms in {}, the worst loaded phase",
                series_label(&g.series, DelayKindRecord::Rtt),
                ms(g.increase_ns),
                g.phase
            ),
        ),
        None => (
            NONE.to_owned(),
            "no idle and loaded probe replies to compare".to_owned(),
        ),
    }
}

impl RunView {
    /// Formats one run.
    pub fn new(run: &Run) -> RunView {
        let latency = run
            .derived
            .latency
            .iter()
            .flat_map(|s| s.phases.iter().map(|p| latency_row(&s.name, s.kind, p)))
            .collect();
        let (grade, grade_reason) = run_grade(run.derived.run_grade.as_ref());
        RunView {
            grade,
            grade_reason,
            label: run.label.clone(),
            test: run.file.metadata.test.clone(),
            title: run.file.metadata.title.clone(),
            interrupted: run.file.metadata.interrupted,
            emulator_late: run
                .file
                .metadata
                .lab
                .as_ref()
                .and_then(crate::lab::late_warning),
            meta: meta_rows(run),
            phases: run
                .timeline
                .phases()
                .iter()
                .map(|p| {
                    format!(
                        "{} ({}): {:.1}-{:.1} s",
                        p.name,
                        p.kind,
                        p.start.as_secs_f64(),
                        p.end.as_secs_f64()
                    )
                })
                .collect(),
            latency,
            throughput: run.derived.throughput.iter().map(throughput_view).collect(),
            flows: flow_rows(run),
            responsiveness: run
                .file
                .metadata
                .rpm
                .as_ref()
                .map(|r| responsiveness_rows(r, &run.derived))
                .unwrap_or_default(),
        }
    }
}

/// One row of the side-by-side comparison: a metric and its value per run.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonRow {
    /// What the row shows, with its unit.
    pub metric: String,
    /// One cell per run, in run order.
    pub values: Vec<String>,
}

/// Several runs side by side: the idle baseline and the loaded phases.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Run labels (column headers).
    pub runs: Vec<String>,
    /// Rows.
    pub rows: Vec<ComparisonRow>,
}

/// A comparison row: its name and how to format it from one series' phase figures.
type Figure<'a> = (&'a str, &'a dyn Fn(&LatencyPhaseDerived) -> String);

/// Items in first-seen order, without repeats.
fn union<T: PartialEq>(lists: impl Iterator<Item = Vec<T>>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for l in lists {
        for n in l {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// A latency series' identity: its name and its kind.
type SeriesKey<'a> = (&'a str, DelayKindRecord);

/// One run's figures: (series name, kind order) -> phase name -> figures.
type SeriesFigures<'a> = BTreeMap<(&'a str, u8), BTreeMap<&'a str, &'a LatencyPhaseDerived>>;

impl Comparison {
    /// Compares runs phase by phase (phases matched by name, latency series by name
    /// **and** kind, round-trip series first). For every latency series: the idle
    /// median, then per loaded phase the median, p90, p99 and loss; round-trip series
    /// also get the headline figures (induced latency, grade, probe RPM), one-way series do
    /// not. Then per loaded phase the throughput and Jain's index per direction.
    pub fn new(runs: &[Run]) -> Comparison {
        let mut rows = Vec::new();
        let loaded = union(runs.iter().map(|r| {
            r.file
                .raw
                .phases
                .iter()
                .filter(|p| p.kind == PhaseKindRecord::Loaded)
                .map(|p| p.name.as_str())
                .collect()
        }));
        let idle = union(runs.iter().map(|r| {
            r.file
                .raw
                .phases
                .iter()
                .filter(|p| p.kind == PhaseKindRecord::Idle)
                .map(|p| p.name.as_str())
                .take(1)
                .collect()
        }));
        let mut series: Vec<SeriesKey> = union(runs.iter().map(|r| {
            r.derived
                .latency
                .iter()
                .map(|s| (s.name.as_str(), s.kind))
                .collect()
        }));
        // Stable: round trips first, each kind in first-seen order.
        series.sort_by_key(|(_, k)| *k != DelayKindRecord::Rtt);
        // run index -> (series name, kind) -> phase name -> figures
        let lookup: Vec<SeriesFigures> = runs
            .iter()
            .map(|r| {
                r.derived
                    .latency
                    .iter()
                    .map(|s| {
                        (
                            (s.name.as_str(), kind_order(s.kind)),
                            s.phases.iter().map(|p| (p.phase.as_str(), p)).collect(),
                        )
                    })
                    .collect()
            })
            .collect();
        let cell = |i: usize, s: SeriesKey, p: &str, f: &dyn Fn(&LatencyPhaseDerived) -> String| {
            lookup[i]
                .get(&(s.0, kind_order(s.1)))
                .and_then(|m| m.get(p))
                .map_or_else(|| NONE.to_owned(), |d| f(d))
        };
        let mut push = |metric: String, f: &dyn Fn(usize) -> String| {
            rows.push(ComparisonRow {
                metric,
                values: (0..runs.len()).map(f).collect(),
            });
        };
        for &s in &series {
            let label = series_label(s.0, s.1);
            for p in &idle {
                push(format!("{label}: {p} median (ms)"), &|i| {
                    cell(i, s, p, &|d| opt(d.delay.map(|x| x.median_ns), ms))
                });
            }
            for p in &loaded {
                let mut figures: Vec<Figure> = vec![
                    ("median (ms)", &|d| opt(d.delay.map(|x| x.median_ns), ms)),
                    ("p90 (ms)", &|d| opt(d.delay.map(|x| x.p90_ns), ms)),
                    ("p99 (ms)", &|d| opt(d.delay.map(|x| x.p99_ns), ms)),
                    ("loss", &|d| opt(d.loss_fraction, percent)),
                ];
                if s.1 == DelayKindRecord::Rtt {
                    figures.extend::<[Figure; 3]>([
                        ("induced (ms)", &|d| opt(d.induced_ns, signed_ms)),
                        ("grade", &|d| {
                            d.grade.map_or_else(|| NONE.into(), |g| g.to_string())
                        }),
                        ("probe RPM", &|d| opt(d.probe_rpm, |r| format!("{r:.0}"))),
                    ]);
                }
                for (name, f) in figures {
                    push(format!("{label}: {p} {name}"), &|i| cell(i, s, p, f));
                }
            }
        }
        // The draft's RPM of the runs that have one (`bloatlab test rpm`), beside the
        // probe RPM rows above, per loaded phase.
        let draft = |i: usize, p: &str| {
            runs[i]
                .file
                .metadata
                .rpm
                .iter()
                .flat_map(|r| &r.responsiveness)
                .find(|x| x.phase.as_deref() == Some(p))
                .map_or_else(|| NONE.to_owned(), |x| opt(x.rpm, |v| format!("{v:.0}")))
        };
        if runs.iter().any(|r| {
            r.file
                .metadata
                .rpm
                .as_ref()
                .is_some_and(|r| r.responsiveness.iter().any(|x| x.phase.is_some()))
        }) {
            for p in &loaded {
                push(format!("{p} RPM (draft)"), &|i| draft(i, p));
            }
        }
        for p in &loaded {
            let tp = |i: usize, f: &dyn Fn(&ThroughputDerived) -> String| {
                runs[i]
                    .derived
                    .throughput
                    .iter()
                    .find(|t| t.phase == *p)
                    .map_or_else(|| NONE.to_owned(), f)
            };
            push(format!("throughput {p} up (Mbit/s)"), &|i| {
                tp(i, &|t| mbps(t.up_bps))
            });
            push(format!("throughput {p} down (Mbit/s)"), &|i| {
                tp(i, &|t| mbps(t.down_bps))
            });
            push(format!("throughput {p} total (Mbit/s)"), &|i| {
                tp(i, &|t| mbps(t.total_bps))
            });
            push(format!("fairness {p} (Jain, up flows)"), &|i| {
                tp(i, &|t| opt(t.fairness_up, index))
            });
            push(format!("fairness {p} (Jain, down flows)"), &|i| {
                tp(i, &|t| opt(t.fairness_down, index))
            });
            push(format!("fairness {p} (Jain, all flows)"), &|i| {
                tp(i, &|t| opt(t.fairness_all, index))
            });
        }
        // Last, the headline: each run's grade, of its worst loaded phase (named, since the
        // phase that sets it may differ between runs).
        push(
            "bufferbloat grade (worst loaded phase)".into(),
            &|i| match runs[i].derived.run_grade.as_ref() {
                Some(g) => format!(
                    "{} ({}, {})",
                    g.grade,
                    g.phase,
                    signed_ms(i64::try_from(g.increase_ns).unwrap_or(i64::MAX))
                ),
                None => NONE.to_owned(),
            },
        );
        Comparison {
            runs: runs.iter().map(|r| r.label.clone()).collect(),
            rows,
        }
    }
}

impl Comparison {
    /// The headline figures of `runs` side by side (`bloatlab demo`): of [`Comparison::new`]'s
    /// rows, those of the reference round-trip series (the one the headline grade is of:
    /// idle median; per loaded phase median, p90, p99, loss, induced latency, grade, probe
    /// RPM), the throughput sums and the headline grade. The same cells as `bloatlab report
    /// A B`, fewer rows.
    pub fn headline(runs: &[Run]) -> Comparison {
        let full = Comparison::new(runs);
        let reference = runs.iter().find_map(|r| {
            r.derived
                .run_grade
                .as_ref()
                .map(|g| g.series.clone())
                .or_else(|| bloatlab_stats::reference_series(&r.latency).map(|s| s.name.clone()))
        });
        let series = reference.map(|n| format!("{}: ", series_label(&n, DelayKindRecord::Rtt)));
        let keep = |m: &str| {
            series.as_deref().is_some_and(|p| m.starts_with(p))
                || (m.starts_with("throughput ") && !m.ends_with(" total (Mbit/s)"))
                || m.starts_with("bufferbloat grade")
        };
        Comparison {
            runs: full.runs,
            rows: full.rows.into_iter().filter(|r| keep(&r.metric)).collect(),
        }
    }
}

/// A total order on kinds, for map keys.
fn kind_order(k: DelayKindRecord) -> u8 {
    match k {
        DelayKindRecord::Rtt => 0,
        DelayKindRecord::OwdUp => 1,
        DelayKindRecord::OwdDown => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run with idle and loaded phases, a `udp_be` series (1 ms idle, 80 ms loaded: probe
    /// RPM 750) and, for `bloatlab test rpm`, the draft's run in the loaded phase.
    fn run(label: &str, draft_rpm: Option<f64>) -> Run {
        use bloatlab_results::{Metadata, ResultsFile};
        const S: u64 = 1_000_000_000;
        let ms = std::time::Duration::from_millis;
        let raw = bloatlab_testkit::sample::idle_then_loaded(ms(1), ms(80), ms(2000));
        let mut meta = Metadata::new("rpm", vec![], jiff::Timestamp::UNIX_EPOCH);
        meta.rpm = draft_rpm.map(|rpm| {
            serde_json::from_value(serde_json::json!({
                "config_url": "https://h:8443/.well-known/nq", "address": "10.77.0.2:8443",
                "protocol": "h2", "tls": "TLSv1.3", "mode": "concurrent",
                "self_probes": "h2_stream",
                "parameters": {"mad": 4, "interval_ns": 1_000_000_000u64, "trim_fraction": 0.05,
                    "stdev_tolerance": 0.05, "max_connections": 16, "max_probes_per_second": 100,
                    "probe_capacity": 0.05, "duration_ns": S, "stall_timeout_ns": S},
                "responsiveness": [{"run": "concurrent", "start_ns": 0, "end_ns": S,
                    "ended": "stable", "intervals": 8, "rpm": rpm, "confidence": "High",
                    "band": "Fair", "p90_rpm": 355.0, "p90_band": "Fair",
                    "samples": {"tcp_f": 1, "tls_f": 1, "http_f": 1, "http_l": 1},
                    "phase": "loaded"}],
                "elapsed_ns": S
            }))
            .unwrap()
        });
        Run::new(label, ResultsFile::new(meta, raw)).unwrap()
    }

    #[test]
    fn cpu_use_notes_and_incomplete_are_text_not_raw_json() {
        let mut r = run("cpu", None);
        let m = &mut r.file.metadata;
        m.cpu_utilisation = vec![0.5, 0.25, 0.75, 0.5];
        m.notes = vec!["flow tcp_up_1: refused".into()];
        m.incomplete = Some(bloatlab_results::schema::IncompleteRecord {
            phase_reached: Some("loaded".into()),
            reached_ns: 3_000_000_000,
            runners_missing: vec!["tcp_up_1".into()],
            reason: "killed".into(),
        });
        let rows = RunView::new(&r).meta;
        let row = |key: &str| rows.iter().find(|r| r.key == key).map(|r| r.value.clone());
        assert_eq!(
            row("CPU use").as_deref(),
            Some(
                "median 50 %, max 75 % of this host during loaded phases (4 samples, one per 500 ms)"
            )
        );
        assert_eq!(row("notes").as_deref(), Some("flow tcp_up_1: refused"));
        assert_eq!(
            row("incomplete").as_deref(),
            Some(
                "recovered from its journal: reached phase loaded at 3.0 s; killed; no data from: tcp_up_1"
            )
        );
        // Nothing of it is left for the free-form row.
        assert_eq!(row("extra"), None);
        // No samples: no row.
        r.file.metadata.cpu_utilisation.clear();
        assert!(!RunView::new(&r).meta.iter().any(|r| r.key == "CPU use"));
    }

    #[test]
    fn the_drafts_rpm_sits_beside_the_probe_rpm_of_its_phase() {
        let a = run("fq", Some(391.4));
        let rows = RunView::new(&a).responsiveness;
        let row = |key: &str| {
            rows.iter()
                .find(|r| r.key == key)
                .map(|r| r.value.clone())
                .unwrap_or_else(|| panic!("no {key} in {rows:?}"))
        };
        assert_eq!(
            row("concurrent RPM (draft, trimmed mean)"),
            "391 (Fair), confidence High"
        );
        assert_eq!(
            row("concurrent probe RPM (phase loaded, UDP/ICMP probes)"),
            "udp_be 750"
        );
        // Compared with a run without the draft's figure: its own row, "-" for the other.
        let c = Comparison::new(&[a, run("rrul", None)]);
        let draft = c.rows.iter().find(|r| r.metric == "loaded RPM (draft)");
        assert_eq!(draft.unwrap().values, ["391", NONE]);
        let probe = c
            .rows
            .iter()
            .find(|r| r.metric.ends_with("loaded probe RPM"))
            .unwrap();
        assert_eq!(probe.values, ["750", "750"]);
        // Without any draft run, no such row.
        let c = Comparison::new(&[run("a", None), run("b", None)]);
        assert!(!c.rows.iter().any(|r| r.metric.contains("(draft)")));
    }

    /// A speed test whose download rose 1 ms and upload 55 ms: a mean (28 ms) would be
    /// an A; the headline is the upload's B, in the run's view and the comparison.
    #[test]
    fn the_headline_grade_is_the_worst_loaded_phase() {
        use bloatlab_results::{Metadata, ResultsFile};
        let ms = std::time::Duration::from_millis;
        let raw = bloatlab_testkit::sample::speedtest_probes(ms(20), ms(21), ms(75));
        let meta = Metadata::new("speedtest", vec![], jiff::Timestamp::UNIX_EPOCH);
        let r = Run::new("st", ResultsFile::new(meta, raw)).unwrap();
        let v = RunView::new(&r);
        assert_eq!(v.grade, "B");
        assert_eq!(
            v.grade_reason,
            "udp_be (rtt) rose 55.00 ms in upload, the worst loaded phase"
        );
        assert!(crate::table::run_summary(&v).contains(
            "bufferbloat grade: B (udp_be (rtt) rose 55.00 ms in upload, the worst loaded phase)"
        ));
        let c = Comparison::new(&[r, run("rrul", None)]);
        let row = c
            .rows
            .iter()
            .find(|r| r.metric == "bufferbloat grade (worst loaded phase)")
            .unwrap();
        assert_eq!(row.values, ["B (upload, +55.00)", "C (loaded, +79.00)"]);
    }

    #[test]
    fn number_formats() {
        assert_eq!(ms(20_000_000), "20.00");
        assert_eq!(ms(147_500_000), "147.5");
        assert_eq!(ms(52_000), "0.052");
        assert_eq!(signed_ms(-1_000_000), "-1.00");
        assert_eq!(signed_ms(0), "0");
        assert_eq!(signed_ms(126_500_000), "+126.5");
        assert_eq!(mbps(19_876_543), "19.88");
        assert_eq!(percent(0.1), "10.00%");
        assert_eq!(index(0.99999), "1.000");
    }
}
