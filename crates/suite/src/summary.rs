//! The terminal summary of a run: per phase, the latency table (min, p10, median, mean,
//! p90, p99, max, count, loss, induced latency, grade, probe RPM), throughput per flow,
//! direction and total with Jain's index, the grade, and the findings. Every number comes
//! from the one view of a run that `bloatlab report` shows too (`bloatlab_report::Run`:
//! recomputed from `raw` with `bloatlab-stats`); the grade line is worded as the report
//! words it.

use std::fmt::Write as _;
use std::time::Duration;

use bloatlab_results::derived::{Derived, LatencyPhaseDerived};
use bloatlab_results::lab::LabRecord;
use bloatlab_results::schema::{
    CongestionControlRecord, DelayKindRecord, DirectionRecord, IpFamilyRecord, PhaseKindRecord,
    RpmRecord,
};
use bloatlab_stats::conditions::Severity;
use bloatlab_stats::jain_fairness;
use bloatlab_units::BitRate;

use crate::run::RunOutcome;

fn ms_ns(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn mbit(bps: u64) -> String {
    format!("{:.2}", bps as f64 / 1e6)
}

fn latency_row(name: &str, p: &LatencyPhaseDerived) -> String {
    let loss = match p.loss_fraction {
        Some(f) => format!("{:.1}%", f * 100.0),
        None => "-".into(),
    };
    let cells = match &p.delay {
        // Report 4's columns (min, p10, mean, median, p90, max, count), then p99.
        Some(d) => [
            d.min_ns,
            d.p10_ns,
            d.mean_ns,
            d.median_ns,
            d.p90_ns,
            d.max_ns,
        ]
        .map(|v| format!("{:>8}", ms_ns(v)))
        .concat(),
        None => format!("{:>8}{}", "-", " ".repeat(8 * 5)),
    };
    let count = p.delay.map_or(0, |d| d.count);
    let p99 = p.delay.map_or("-".into(), |d| ms_ns(d.p99_ns));
    let induced = p
        .induced_ns
        .map_or("-".into(), |v| format!("{:+.2}", v as f64 / 1e6));
    let rpm = p.probe_rpm.map_or("-".into(), |r| format!("{r:.0}"));
    format!(
        "{name:<10} {:<9}{cells}{count:>7}{p99:>8}{loss:>7}{induced:>9} {:>5}{rpm:>10}",
        p.phase,
        p.grade.map_or("-", |g| g.as_str()),
    )
}

fn latency_table(out: &mut String, d: &Derived) {
    if !d.latency.iter().any(|s| s.kind == DelayKindRecord::Rtt) {
        let _ = writeln!(out, "Latency: no probe series were recorded");
        return;
    }
    let _ = writeln!(
        out,
        "Latency, round trip (ms; induced = phase median - idle median)\n{:<10} {:<9}{:>8}{:>8}{:>8}{:>8}{:>8}{:>8}{:>7}{:>8}{:>7}{:>9} {:>5}{:>10}",
        "series",
        "phase",
        "min",
        "p10",
        "mean",
        "median",
        "p90",
        "max",
        "count",
        "p99",
        "loss",
        "induced",
        "grade",
        "probe RPM"
    );
    for s in d.latency.iter().filter(|s| s.kind == DelayKindRecord::Rtt) {
        for p in &s.phases {
            let _ = writeln!(out, "{}", latency_row(&s.name, p));
        }
    }
}

/// The `rpm` test: per loaded phase, the draft's RPM of the run that made it beside the
/// probe RPM of each probe series in that phase, then the parts and capacities. The two
/// measure different round trips (docs/tests.md, "rpm"), so both are named.
fn rpm_section(out: &mut String, rec: &RpmRecord, d: Option<&Derived>) {
    let _ = writeln!(
        out,
        "RPM (draft) = draft-ietf-ippm-responsiveness by bloatlab rpm {} ({}, {}, {}); \
         probe RPM = 60000 / trimmed mean of the probes' round trips",
        rec.config_url,
        rec.protocol,
        rec.tls.as_deref().unwrap_or("no TLS"),
        rec.mode
    );
    let band = |v: Option<f64>, b: &Option<String>| match (v, b) {
        (Some(v), Some(b)) => format!("{v:.0} ({b})"),
        (Some(v), None) => format!("{v:.0}"),
        _ => "-".into(),
    };
    for r in &rec.responsiveness {
        let phase = r.phase.as_deref().unwrap_or(&r.run);
        let probes: Vec<String> = d
            .into_iter()
            .flat_map(|d| &d.latency)
            .filter(|s| s.kind == DelayKindRecord::Rtt)
            .filter_map(|s| {
                let p = s.phases.iter().find(|p| p.phase == phase)?;
                Some(format!(
                    "{} {}",
                    s.name,
                    p.probe_rpm.map_or("-".into(), |v| format!("{v:.0}"))
                ))
            })
            .collect();
        let _ = writeln!(
            out,
            "  phase {phase}: RPM (draft) {}, confidence {}, P90 {}; probe RPM {}",
            band(r.rpm, &r.band),
            r.confidence,
            band(r.p90_rpm, &r.p90_band),
            if probes.is_empty() {
                "-".to_owned()
            } else {
                probes.join(", ")
            }
        );
        if let Some(t) = &r.trimmed {
            let _ = writeln!(
                out,
                "    draft's parts (trimmed means, ms): tcp_f {} tls_f {} http_f {} http_l {}; \
                 foreign {}, loaded {}; {} intervals, ended {}",
                ms_ns(t.tcp_f_ns),
                opt_ms(t.tls_f_ns),
                ms_ns(t.http_f_ns),
                ms_ns(t.http_l_ns),
                band(r.foreign_rpm, &None),
                band(r.loaded_rpm, &None),
                r.intervals,
                r.ended
            );
        }
    }
    let caps: Vec<String> = [("download", &rec.download), ("upload", &rec.upload)]
        .into_iter()
        .filter_map(|(dir, c)| {
            let c = c.as_ref()?;
            Some(format!(
                "{dir} {} Mbit/s (confidence {}, {} connections)",
                mbit(c.capacity_bps),
                c.confidence,
                c.connections
            ))
        })
        .collect();
    if !caps.is_empty() {
        let _ = writeln!(out, "  draft's capacity: {}", caps.join(", "));
    }
}

fn jain(v: Option<f64>) -> String {
    v.map_or("-".into(), |j| format!("{j:.3}"))
}

/// Each flow's IP family, from the plan (`rrul46` pins one per flow).
type Families<'a> = std::collections::BTreeMap<&'a str, IpFamilyRecord>;

/// ECN per flow, when the run set it (`--ecn`) or some flow negotiated it: whether each
/// flow asked, what it negotiated, and the CE marks it met.
fn ecn_table(out: &mut String, flows: &[bloatlab_results::schema::FlowRecord]) {
    let shown = |f: &&bloatlab_results::schema::FlowRecord| {
        f.ecn
            .is_some_and(|e| e.requested.is_some() || e.negotiated == Some(true))
    };
    if !flows.iter().any(|f| shown(&f)) {
        return;
    }
    let yes_no = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "not measured",
    };
    let _ = writeln!(out, "ECN per flow");
    for f in flows {
        let e = f.ecn.unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<16}asked {:<4} negotiated {:<4} CE-echoed segments {}",
            f.name,
            yes_no(e.requested),
            yes_no(e.negotiated),
            e.ce_marks
                .map_or_else(|| "not measured".to_owned(), |n| n.to_string())
        );
    }
}

fn throughput_table(
    out: &mut String,
    d: &Derived,
    loaded: &[&str],
    retransmits: &std::collections::BTreeMap<&str, Option<u64>>,
    families: &Families<'_>,
) {
    // Only loaded phases: idle and recovery hold at most the edges of the flows (a flow
    // starts a few ms after its phase and its last interval spills over).
    for t in d
        .throughput
        .iter()
        .filter(|t| loaded.contains(&t.phase.as_str()))
    {
        if t.flows.iter().all(|f| f.bytes == 0) {
            continue;
        }
        let _ = writeln!(
            out,
            "Throughput in phase {} (Mbit/s, mean over the time each flow reported)",
            t.phase
        );
        // A flow covering a sliver of the phase is the edge of a neighbouring phase's
        // flow (speedtest: the download's last interval spills into the upload phase);
        // its "mean over covered time" is noise, so it is left out of the sums here.
        let (shown, edges): (Vec<_>, Vec<_>) =
            t.flows.iter().partition(|f| f.coverage >= MIN_COVERAGE);
        for f in &shown {
            let _ = writeln!(
                out,
                "  {:<16}{:>10}   coverage {:>3.0}%   {:>8.2} MB   retransmits {}",
                f.name,
                mbit(f.mean_bps),
                f.coverage * 100.0,
                f.bytes as f64 / 1e6,
                retransmits
                    .get(f.name.as_str())
                    .copied()
                    .flatten()
                    .map_or_else(|| "not measured".to_owned(), |r| r.to_string()),
            );
        }
        let rates = |dir: Option<DirectionRecord>| -> Vec<BitRate> {
            shown
                .iter()
                .filter(|f| dir.is_none_or(|d| f.direction == d))
                .map(|f| BitRate(f.mean_bps))
                .collect()
        };
        let sum = |v: &[BitRate]| v.iter().map(|r| r.0).sum::<u64>();
        let fair = |v: &[BitRate]| jain(jain_fairness(v).ok());
        let (up, down) = (
            rates(Some(DirectionRecord::Up)),
            rates(Some(DirectionRecord::Down)),
        );
        // Sums only where they add something: a direction with one flow repeats that
        // flow's line, a total over one direction repeats the direction (tcp_upload and
        // tcp_download print their rate once).
        let mut parts = Vec::new();
        for (name, v) in [("up", &up), ("down", &down)] {
            if v.len() > 1 {
                parts.push(format!("{name} {} (Jain {})", mbit(sum(v)), fair(v)));
            }
        }
        if !up.is_empty() && !down.is_empty() {
            let all = rates(None);
            parts.push(format!("total {} (Jain {})", mbit(sum(&all)), fair(&all)));
        }
        if !parts.is_empty() {
            let _ = writeln!(out, "  {}", parts.join(", "));
        }
        // A mixed-family run (rrul46): what each family carried.
        let mut by_family: std::collections::BTreeMap<IpFamilyRecord, [u64; 2]> =
            std::collections::BTreeMap::new();
        for f in &shown {
            if let Some(fam) = families.get(f.name.as_str()) {
                let e = by_family.entry(*fam).or_default();
                e[usize::from(f.direction == DirectionRecord::Down)] += f.mean_bps;
            }
        }
        if by_family.len() > 1 {
            let fams: Vec<String> = by_family
                .iter()
                .map(|(fam, [u, d])| format!("{} up {} down {}", fam.label(), mbit(*u), mbit(*d)))
                .collect();
            let _ = writeln!(out, "  by family: {}", fams.join(", "));
        }
        let edges: Vec<&str> = edges
            .iter()
            .filter(|f| f.bytes > 0)
            .map(|f| f.name.as_str())
            .collect();
        if !edges.is_empty() {
            let _ = writeln!(
                out,
                "  (left out, covering < {:.0} % of the phase: {})",
                MIN_COVERAGE * 100.0,
                edges.join(", ")
            );
        }
    }
}

fn opt_ms(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e6))
}

/// The lab's view of the run: per direction (stage) of the emulated link, its settings and
/// what the emulator counted while the test ran.
fn lab_section(out: &mut String, lab: &LabRecord) {
    let ecn: Vec<String> = lab.ecn.iter().map(|(h, v)| format!("{h}={v}")).collect();
    let _ = writeln!(
        out,
        "Lab {} (this test on host {}; net.ipv4.tcp_ecn {}): the emulator during the run",
        lab.name,
        lab.host,
        if ecn.is_empty() {
            "not read".to_string()
        } else {
            ecn.join(" ")
        }
    );
    for d in &lab.directions {
        let l = &d.link;
        let q = l.qdisc.as_ref();
        let params: Vec<String> = q
            .map(|q| {
                q.parameters
                    .iter()
                    .map(|(k, v)| format!(" {k}={v}"))
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<4} rate {} delay {} qdisc {}{}: delivered {} pkts, dropped {} (overflow {}, aqm {}, loss {}), CE-marked {}",
            match d.direction {
                DirectionRecord::Up => "up",
                DirectionRecord::Down => "down",
            },
            l.rate_bps
                .map_or("-".into(), |r| format!("{:.3} Mbit/s", r as f64 / 1e6)),
            l.delay_ns
                .map_or("-".into(), |v| format!("{:.1} ms", v as f64 / 1e6)),
            q.map_or("fifo", |q| q.kind.as_str()),
            params.concat(),
            d.dequeued_packets,
            d.drops.overflow + d.drops.aqm + d.drops.loss,
            d.drops.overflow,
            d.drops.aqm,
            d.drops.loss,
            d.ce_marked,
        );
        let _ = writeln!(
            out,
            "       queue sojourn ms p50 {} p99 {} max {}; backlog pkts p50 {} max {}; emulator lateness ms p99 {} max {}",
            opt_ms(d.sojourn.p50_ns),
            opt_ms(d.sojourn.p99_ns),
            opt_ms(d.sojourn.max_ns),
            d.backlog.p50_packets.map_or("-".into(), |v| v.to_string()),
            d.backlog.max_packets.map_or("-".into(), |v| v.to_string()),
            opt_ms(d.lateness.p99_ns),
            opt_ms(d.lateness.max_ns),
        );
        stage_lines(out, d);
    }
    if let Some(n) = lab.tun_ring_drops.filter(|&n| n > 0) {
        let _ = writeln!(
            out,
            "  WARNING: {n} packets were dropped in the TUN rings before emulation (emulator overloaded)"
        );
    }
}

/// A chained direction (issue 18): the rate above is its bottleneck's; each stage's
/// settings and what it did, in the order packets cross them.
fn stage_lines(out: &mut String, d: &bloatlab_results::lab::EmulatorRecord) {
    for st in &d.link.stages {
        let c = d.stages.iter().find(|c| c.name == st.name);
        let rate = c
            .and_then(|c| c.rate_bps)
            .or(st.rate_bps)
            .map_or("unlimited".into(), |r| {
                format!("{:.3} Mbit/s", r as f64 / 1e6)
            });
        let framing = st
            .framing
            .as_deref()
            .map_or(String::new(), |f| format!(" framing {f}"));
        let overhead = st
            .overhead_bytes
            .map_or(String::new(), |o| format!(" overhead {o}"));
        let _ = write!(
            out,
            "       stage {:<8} rate {rate} qdisc {}{overhead}{framing}",
            st.name, st.qdisc
        );
        if let Some(c) = c {
            let _ = write!(
                out,
                ": delivered {} pkts, dropped {} (overflow {}, aqm {}, loss {}), CE-marked {}, sojourn ms p50 {} max {}",
                c.dequeued_packets,
                c.drops.overflow + c.drops.aqm + c.drops.loss,
                c.drops.overflow,
                c.drops.aqm,
                c.drops.loss,
                c.ce_marked,
                opt_ms(c.sojourn.p50_ns),
                opt_ms(c.sojourn.max_ns),
            );
        }
        out.push('\n');
    }
}

/// Flows covering less of a phase than this are left out of its throughput table.
const MIN_COVERAGE: f64 = 0.1;

/// `Load congestion control: cubic x4, bbr x4`: what each load flow's sender read back
/// from its socket (a download's sender is the server; unknown when it is not bloatlab).
fn load_cc_line(cc: &CongestionControlRecord) -> Option<String> {
    let mut by: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for f in &cc.per_flow {
        *by.entry(f.used.as_deref().unwrap_or("unknown (sender not bloatlab)"))
            .or_default() += 1;
    }
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    (!parts.is_empty()).then(|| format!("Load congestion control: {}", parts.join(", ")))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The headline grade (`derived.run_grade`: the worst loaded phase of the reference
/// series, the rule in `bloatlab_stats::grade`), worded as `bloatlab report` words it
/// (`bloatlab_report::view::run_grade`), with the table it was read on.
fn grade_line(d: Option<&Derived>) -> String {
    let (grade, reason) = bloatlab_report::view::run_grade(d.and_then(|d| d.run_grade.as_ref()));
    if d.and_then(|d| d.run_grade.as_ref()).is_none() {
        return format!("Bufferbloat grade: {grade} ({reason})");
    }
    let table: Vec<String> = bloatlab_stats::grade::BLOAT_GRADES
        .iter()
        .map(|(g, below)| format!("{g} < {}", below.as_millis()))
        .collect();
    format!(
        "Bufferbloat grade: {grade} ({reason}; {} ms, else F)",
        table.join(", ")
    )
}

/// The whole summary, ending with a newline.
/// `server: IPv4 10.77.0.2 (tcp_up_be_v4, ...), IPv6 fd00:77::2 (...)` for a run over
/// both families; `None` for a single-family run.
fn servers_line(plan: Option<&bloatlab_results::schema::PlanRecord>) -> Option<String> {
    let plan = plan?;
    let mut by: std::collections::BTreeMap<IpFamilyRecord, (Option<&str>, Vec<&str>)> =
        std::collections::BTreeMap::new();
    let runners = plan
        .flows
        .iter()
        .map(|f| (f.family, f.address.as_deref(), f.name.as_str()))
        .chain(
            plan.probes
                .iter()
                .map(|q| (q.family, q.address.as_deref(), q.name.as_str())),
        );
    for (fam, addr, name) in runners {
        if let Some(fam) = fam {
            let e = by.entry(fam).or_default();
            e.0 = e.0.or(addr);
            e.1.push(name);
        }
    }
    (by.len() > 1).then(|| {
        let parts: Vec<String> = by
            .iter()
            .map(|(fam, (addr, names))| {
                format!(
                    "{} {} ({})",
                    fam.label(),
                    addr.unwrap_or("?"),
                    names.join(", ")
                )
            })
            .collect();
        format!("server: {}", parts.join("; "))
    })
}

pub fn render(o: &RunOutcome) -> String {
    let mut out = String::new();
    let m = &o.file.metadata;
    let phases: Vec<String> = o
        .file
        .raw
        .phases
        .iter()
        .map(|p| {
            format!(
                "{} {:.1}-{:.1} s",
                p.name,
                p.start_ns as f64 / 1e9,
                p.end_ns as f64 / 1e9
            )
        })
        .collect();
    let _ = writeln!(out, "bloatlab test {}: {}", m.test, phases.join(", "));
    if m.interrupted {
        let _ = writeln!(
            out,
            "INTERRUPTED: the run was cut short; phases end where it stopped"
        );
    }
    if let Some(inc) = &m.incomplete {
        let missing = if inc.runners_missing.is_empty() {
            String::new()
        } else {
            format!("; no data from: {}", inc.runners_missing.join(", "))
        };
        let _ = writeln!(
            out,
            "INCOMPLETE (recovered from its journal): reached phase {} at {:.1} s; {}{missing}",
            inc.phase_reached.as_deref().unwrap_or("?"),
            inc.reached_ns as f64 / 1e9,
            inc.reason,
        );
    }
    if let Some(servers) = servers_line(m.plan.as_ref()) {
        let _ = writeln!(out, "{servers}");
    }
    // The one view of the run: every figure recomputed from raw as `bloatlab report`
    // does (report::Run), never the file's stored `derived`.
    let run = bloatlab_report::Run::new("run", o.file.clone()).ok();
    let derived = run.as_ref().map(|r| &r.derived);
    if let Some(d) = derived {
        latency_table(&mut out, d);
        let loaded: Vec<&str> = o
            .file
            .raw
            .phases
            .iter()
            .filter(|p| p.kind == PhaseKindRecord::Loaded)
            .map(|p| p.name.as_str())
            .collect();
        // The sender's retransmits over the whole flow (TCP_INFO), `None`: not sampled.
        let retransmits = o
            .file
            .raw
            .throughput
            .iter()
            .map(|f| (f.name.as_str(), f.tcp.sender.and_then(|t| t.retransmits)))
            .collect();
        let families: Families<'_> = m
            .plan
            .iter()
            .flat_map(|p| &p.flows)
            .filter_map(|f| Some((f.name.as_str(), f.family?)))
            .collect();
        throughput_table(&mut out, d, &loaded, &retransmits, &families);
    }
    if let Some(rec) = &m.rpm {
        rpm_section(&mut out, rec, derived);
    }
    ecn_table(&mut out, &o.file.raw.throughput);
    if let Some(l) = load_cc_line(&m.congestion_control) {
        let _ = writeln!(out, "{l}");
    }
    if let Some(lab) = &m.lab {
        lab_section(&mut out, lab);
    }
    for v in &o.voip {
        let a = &v.assessment;
        let _ = writeln!(
            out,
            "VoIP {} {:<5} MOS {:.2} (R {:.1}): mean one-way {}, jitter buffer {}, loss {:.1}% ({} lost, {} late)",
            v.phase,
            v.direction,
            a.mos,
            a.r,
            ms(a.mean_delay),
            ms(a.jitter_buffer),
            a.effective_loss * 100.0,
            a.network_lost,
            a.late_discarded
        );
    }
    if !o.pulses.is_empty() {
        let mut p = o.pulses.clone();
        p.sort();
        let _ = writeln!(
            out,
            "Pulses: {} completed, each took {} (min) / {} (median) / {} (max)",
            p.len(),
            ms(p[0]),
            ms(p[p.len() / 2]),
            ms(p[p.len() - 1])
        );
    }
    let _ = writeln!(out, "{}", grade_line(derived));
    let several_loaded = o.findings.iter().filter(|(p, _)| p.is_some()).count() > 1;
    for (phase, f) in &o.findings {
        let tag = match f.severity() {
            Severity::Ok => "ok",
            Severity::Warning => "WARNING",
        };
        match phase {
            Some(p) if several_loaded => {
                let _ = writeln!(out, "{tag} ({p}): {f}");
            }
            _ => {
                let _ = writeln!(out, "{tag}: {f}");
            }
        }
    }
    for n in &o.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run with `file` (its derived numbers filled in by the caller) and
    /// nothing else.
    fn outcome(file: ResultsFile) -> RunOutcome {
        RunOutcome {
            file,
            findings: vec![],
            notes: vec![],
            voip: vec![],
            pulses: vec![],
            reference: None,
        }
    }
    use bloatlab_results::schema::{FlowRecord, PhaseRecord, TransferRecord};
    use bloatlab_results::{Metadata, Raw, ResultsFile};

    const S: u64 = 1_000_000_000;

    fn flow(name: &str, direction: DirectionRecord, spans: &[(u64, u64, u64)]) -> FlowRecord {
        FlowRecord {
            name: name.into(),
            ecn: None,
            direction,
            tcp: Default::default(),
            samples: spans
                .iter()
                .map(|&(start_ns, end_ns, bytes)| TransferRecord {
                    start_ns,
                    end_ns,
                    bytes,
                })
                .collect(),
        }
    }

    #[test]
    fn the_rpm_test_shows_the_drafts_rpm_beside_each_probe_series_rpm() {
        use bloatlab_results::schema::RpmCapacityRecord;
        // udp_be: 1 ms idle, 40 ms loaded (probe RPM 1500).
        let ms = std::time::Duration::from_millis;
        let raw = bloatlab_testkit::sample::idle_then_loaded(ms(1), ms(40), ms(4000));
        let mut meta = Metadata::new("rpm", vec![], jiff::Timestamp::UNIX_EPOCH);
        let mut rec = crate::rpm::tests::record(vec![crate::rpm::tests::run(
            "concurrent",
            0.0,
            3.0,
            Some(812.4),
        )]);
        rec.responsiveness[0].phase = Some("loaded".into());
        rec.download = Some(RpmCapacityRecord {
            run: "concurrent".into(),
            capacity_bps: 19_100_000,
            confidence: "High".into(),
            connections: 4,
            saturated_at_interval: Some(3),
            moving_averages_bps: vec![],
        });
        meta.rpm = Some(rec);
        let file = ResultsFile::new(meta, raw).with_derived().unwrap();
        let text = render(&outcome(file));
        assert!(
            text.contains(
                "  phase loaded: RPM (draft) 812 (Good), confidence High, P90 406; \
                 probe RPM udp_be 1500\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("RPM (draft) = draft-ietf-ippm-responsiveness"),
            "{text}"
        );
        assert!(
            text.contains(
                "draft's capacity: download 19.10 Mbit/s (confidence High, 4 connections)"
            ),
            "{text}"
        );
    }

    #[test]
    fn ecn_table_shows_each_flow_and_stays_away_without_ecn() {
        use bloatlab_results::schema::FlowEcnRecord;
        let mut a = flow("tcp_up_be", DirectionRecord::Up, &[]);
        a.ecn = Some(FlowEcnRecord {
            requested: Some(true),
            negotiated: Some(true),
            ce_marks: Some(412),
        });
        let mut b = flow("tcp_up_bk", DirectionRecord::Up, &[]);
        b.ecn = Some(FlowEcnRecord {
            requested: Some(false),
            negotiated: Some(false),
            ce_marks: Some(0),
        });
        let c = flow("tcp_down_be", DirectionRecord::Down, &[]);
        let mut out = String::new();
        ecn_table(&mut out, &[a.clone(), b.clone(), c.clone()]);
        assert_eq!(
            out,
            "ECN per flow\n  tcp_up_be       asked yes  negotiated yes  CE-echoed segments 412\n  \
             tcp_up_bk       asked no   negotiated no   CE-echoed segments 0\n  \
             tcp_down_be     asked not measured negotiated not measured CE-echoed segments not measured\n"
        );
        // A run without --ecn where nothing negotiated ECN prints nothing.
        b.ecn = Some(FlowEcnRecord {
            requested: None,
            ..b.ecn.unwrap()
        });
        let mut out = String::new();
        ecn_table(&mut out, &[b, c]);
        assert_eq!(out, "");
    }

    #[test]
    fn load_congestion_control_is_counted_per_sender() {
        use bloatlab_results::schema::{FlowCongestionControl, FlowEnd};
        let mut cc = CongestionControlRecord::default();
        assert_eq!(load_cc_line(&cc), None);
        let flow = |name: &str, sender, used: Option<&str>| FlowCongestionControl {
            flow: name.into(),
            sender,
            requested: None,
            used: used.map(str::to_owned),
        };
        cc.per_flow = vec![
            flow("tcp_up_1", FlowEnd::Local, Some("cubic")),
            flow("tcp_up_2", FlowEnd::Local, Some("cubic")),
            flow("tcp_down_1", FlowEnd::Remote, Some("bbr")),
            flow("tcp_down_2", FlowEnd::Remote, None),
        ];
        assert_eq!(
            load_cc_line(&cc).unwrap(),
            "Load congestion control: bbr x1, cubic x2, unknown (sender not bloatlab) x1"
        );
    }

    #[test]
    fn speedtest_edges_are_left_out_of_the_upload_phase() {
        let ph = |kind, name: &str, a, b| PhaseRecord {
            kind,
            name: name.into(),
            start_ns: a,
            end_ns: b,
        };
        let raw = Raw {
            phases: vec![
                ph(PhaseKindRecord::Idle, "idle", 0, S),
                ph(PhaseKindRecord::Loaded, "download", S, 3 * S),
                ph(PhaseKindRecord::Loaded, "upload", 3 * S, 5 * S),
            ],
            latency: vec![],
            throughput: vec![
                // 10 Mbit/s for 2 s, then a 50 ms spill into the upload phase.
                flow(
                    "tcp_down_1",
                    DirectionRecord::Down,
                    &[(S, 3 * S, 2_500_000), (3 * S, 3 * S + S / 20, 500_000)],
                ),
                // 4 Mbit/s for 2 s.
                flow(
                    "tcp_up_1",
                    DirectionRecord::Up,
                    &[(3 * S, 5 * S, 1_000_000)],
                ),
            ],
        };
        let file = ResultsFile::new(
            Metadata::new("speedtest", vec![], jiff::Timestamp::UNIX_EPOCH),
            raw,
        )
        .with_derived()
        .unwrap();
        let text = render(&outcome(file));
        let upload = text.split("phase upload").nth(1).unwrap();
        // One upload flow: its rate once, no sums repeating it.
        let block: Vec<&str> = upload
            .lines()
            .take_while(|l| !l.starts_with("Latency"))
            .collect();
        assert!(
            block
                .iter()
                .any(|l| l.contains("tcp_up_1") && l.contains("4.00")),
            "{text}"
        );
        assert_eq!(upload.matches("4.00").count(), 1, "{text}");
        assert!(!upload.contains("total"), "{text}");
        // Retransmits were not sampled in this file: said so, not 0.
        assert!(
            block.iter().any(|l| l.contains("retransmits not measured")),
            "{text}"
        );
        assert!(
            upload.contains("left out, covering < 10 % of the phase: tcp_down_1"),
            "{text}"
        );
        let download = text.split("phase download").nth(1).unwrap();
        assert!(download.contains("tcp_down_1           10.00"), "{text}");
        assert!(
            text.contains("Latency: no probe series were recorded"),
            "{text}"
        );
    }

    #[test]
    fn sums_are_printed_where_they_add_something() {
        let raw = Raw {
            phases: vec![
                PhaseRecord {
                    kind: PhaseKindRecord::Idle,
                    name: "idle".into(),
                    start_ns: 0,
                    end_ns: S,
                },
                PhaseRecord {
                    kind: PhaseKindRecord::Loaded,
                    name: "loaded".into(),
                    start_ns: S,
                    end_ns: 3 * S,
                },
            ],
            latency: vec![],
            throughput: vec![
                flow("tcp_up_1", DirectionRecord::Up, &[(S, 3 * S, 1_000_000)]),
                flow("tcp_up_2", DirectionRecord::Up, &[(S, 3 * S, 3_000_000)]),
                flow(
                    "tcp_down_1",
                    DirectionRecord::Down,
                    &[(S, 3 * S, 2_500_000)],
                ),
            ],
        };
        let mut file = ResultsFile::new(
            Metadata::new("rrul", vec![], jiff::Timestamp::UNIX_EPOCH),
            raw,
        );
        file.raw.throughput[0].tcp.sender = Some(bloatlab_results::schema::TcpInfoRecord {
            retransmits: Some(12),
            ..Default::default()
        });
        let o = outcome(file.with_derived().unwrap());
        let text = render(&o);
        // Two up flows: 4 + 12 Mbit/s, Jain 16^2 / (2 * 160) = 0.8; one down flow: no
        // down sum; both directions: a total.
        assert!(
            text.contains("  up 16.00 (Jain 0.800), total 26.00 (Jain "),
            "{text}"
        );
        assert!(!text.contains("down 10.00"), "{text}");
        assert!(text.contains("1.00 MB   retransmits 12"), "{text}");
        assert!(
            text.contains("3.00 MB   retransmits not measured"),
            "{text}"
        );
    }

    #[test]
    fn a_mixed_family_run_shows_each_family_s_address_and_load() {
        use bloatlab_results::schema::{PlanFlowRecord, PlanRecord};
        let raw = Raw {
            phases: vec![PhaseRecord {
                kind: PhaseKindRecord::Loaded,
                name: "loaded".into(),
                start_ns: 0,
                end_ns: 2 * S,
            }],
            latency: vec![],
            throughput: vec![
                flow(
                    "tcp_up_be_v4",
                    DirectionRecord::Up,
                    &[(0, 2 * S, 1_000_000)],
                ),
                flow(
                    "tcp_up_ef_v6",
                    DirectionRecord::Up,
                    &[(0, 2 * S, 3_000_000)],
                ),
                flow(
                    "tcp_down_ef_v6",
                    DirectionRecord::Down,
                    &[(0, 2 * S, 500_000)],
                ),
            ],
        };
        let mut meta = Metadata::new("rrul46", vec![], jiff::Timestamp::UNIX_EPOCH);
        let pf = |name: &str, dir, fam, addr: &str| PlanFlowRecord {
            name: name.into(),
            direction: dir,
            start_ns: 0,
            stop_ns: 2 * S,
            tos: None,
            congestion_control: None,
            pulses: None,
            family: Some(fam),
            address: Some(addr.into()),
        };
        let (v4, v6) = (IpFamilyRecord::Ipv4, IpFamilyRecord::Ipv6);
        meta.plan = Some(PlanRecord {
            flows: vec![
                pf("tcp_up_be_v4", DirectionRecord::Up, v4, "10.77.0.2"),
                pf("tcp_up_ef_v6", DirectionRecord::Up, v6, "fd00:77::2"),
                pf("tcp_down_ef_v6", DirectionRecord::Down, v6, "fd00:77::2"),
            ],
            ..PlanRecord::default()
        });
        let o = outcome(ResultsFile::new(meta, raw).with_derived().unwrap());
        let text = render(&o);
        assert!(
            text.contains(
                "server: IPv4 10.77.0.2 (tcp_up_be_v4); IPv6 fd00:77::2 (tcp_up_ef_v6, tcp_down_ef_v6)"
            ),
            "{text}"
        );
        // 1 MB and 3 MB up, 0.5 MB down over 2 s.
        assert!(
            text.contains("by family: IPv4 up 4.00 down 0.00, IPv6 up 12.00 down 2.00"),
            "{text}"
        );
    }

    /// The headline is the worst loaded phase, not a mean: rises of 1 ms (download) and
    /// 55 ms (upload) average to 28 ms, an A; the line says B and names the upload.
    #[test]
    fn the_grade_line_is_the_worst_loaded_phase() {
        let ms = std::time::Duration::from_millis;
        let raw = bloatlab_testkit::sample::speedtest_probes(ms(20), ms(21), ms(75));
        let meta = Metadata::new("speedtest", vec![], jiff::Timestamp::UNIX_EPOCH);
        let text = render(&outcome(
            ResultsFile::new(meta, raw).with_derived().unwrap(),
        ));
        assert!(
            text.contains(
                "Bufferbloat grade: B (udp_be (rtt) rose 55.00 ms in upload, the worst loaded \
                 phase; A+ < 5, A < 30, B < 60, C < 200, D < 400 ms, else F)\n"
            ),
            "{text}"
        );
        let text = render(&outcome(ResultsFile::new(
            Metadata::new("speedtest", vec![], jiff::Timestamp::UNIX_EPOCH),
            Raw::default(),
        )));
        assert!(
            text.contains("Bufferbloat grade: - (no idle and loaded probe replies to compare)"),
            "{text}"
        );
    }
}
