//! The combined results: one row per run, written as `summary.csv` and `summary.json`, and
//! shown as a terminal table.
//!
//! Columns, in order: `run`, `point`, `rep`, the parameters (as named in `[matrix]`); then per
//! latency series and phase `lat.SERIES.KIND.PHASE.{min,p10,mean,median,p90,p99,max}_ms`,
//! `.count` and `.loss`; per throughput phase `tput.PHASE.{up,down}_mbit` and per flow
//! `tput.PHASE.FLOW.bytes`; per flow `tcp.FLOW.retransmits` (sender's TCP_INFO, when
//! sampled); and per lab direction and emulator stage
//! `emu.DIR.STAGE.{drops,ce_marks}` (a single-link direction's stage is `link`); per lab
//! direction and phase the emulator's release lateness
//! `late.DIR.PHASE.{packets,p50_ms,p99_ms,max_ms,over_1ms}` ([`push_lateness`]). Rows read
//! results through `bloatlab_results` types; a column a run does not have is empty.
//! `[client]` runs have their own measurement columns ([`client_row`], [`client`]).

pub mod client;

use bloatlab_results::ResultsFile;
use bloatlab_results::lab::PhaseLatenessRecord;
use serde_json::Value;
use std::collections::BTreeMap;

/// One run's row: ordered (column, value) pairs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Column name -> value (numbers as JSON numbers, text as strings).
    pub cells: Vec<(String, Value)>,
}

impl Row {
    /// The value of `column`, if the row has it.
    pub fn get(&self, column: &str) -> Option<&Value> {
        self.cells.iter().find(|(k, _)| k == column).map(|(_, v)| v)
    }

    fn push(&mut self, k: impl Into<String>, v: impl Into<Value>) {
        self.cells.push((k.into(), v.into()));
    }
}

fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

fn mbit(bps: u64) -> f64 {
    (bps as f64 / 1e3).round() / 1e3
}

/// Builds a run's row from its identity, parameters, results file and the lab's counters
/// (`lab status --json`'s `counters`, or `Null`).
pub fn row(
    run: &str,
    point: &str,
    rep: u32,
    params: &[(String, crate::file::Scalar)],
    file: &ResultsFile,
    lab_counters: &Value,
) -> Row {
    let mut r = head(run, point, rep, params);
    r.push("interrupted", file.metadata.interrupted);
    if let Some(d) = &file.derived {
        for s in &d.latency {
            let kind = serde_json::to_value(s.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            for p in &s.phases {
                let base = format!("lat.{}.{kind}.{}", s.name, p.phase);
                if let Some(x) = &p.delay {
                    r.push(format!("{base}.min_ms"), ms(x.min_ns));
                    r.push(format!("{base}.p10_ms"), ms(x.p10_ns));
                    r.push(format!("{base}.mean_ms"), ms(x.mean_ns));
                    r.push(format!("{base}.median_ms"), ms(x.median_ns));
                    r.push(format!("{base}.p90_ms"), ms(x.p90_ns));
                    r.push(format!("{base}.p99_ms"), ms(x.p99_ns));
                    r.push(format!("{base}.max_ms"), ms(x.max_ns));
                }
                r.push(format!("{base}.count"), p.received);
                // In flight when the run ended (not lost): the loss fraction leaves them out.
                if p.unfinished > 0 {
                    r.push(format!("{base}.unfinished"), p.unfinished);
                }
                if let Some(l) = p.loss_fraction {
                    r.push(format!("{base}.loss"), l);
                }
            }
        }
        for t in &d.throughput {
            let base = format!("tput.{}", t.phase);
            r.push(format!("{base}.up_mbit"), mbit(t.up_bps));
            r.push(format!("{base}.down_mbit"), mbit(t.down_bps));
            for f in &t.flows {
                r.push(format!("{base}.{}.bytes", f.name), f.bytes);
            }
        }
    }
    push_completeness_facts(&mut r, file);
    push_lateness(&mut r, file);
    // TCP retransmits per flow, from the sender's TCP_INFO (absent when not sampled).
    for f in &file.raw.throughput {
        if let Some(n) = f.tcp.sender.and_then(|t| t.retransmits) {
            r.push(format!("tcp.{}.retransmits", f.name), n);
        }
    }
    push_emu(&mut r, lab_counters);
    r
}

/// The facts [`crate::completeness`] judges that only the results file knows: per load flow
/// that failed (`metadata.extra.flow_failures`), `failed.FLOW` = why; per planned probe
/// stream, `probe.SERIES` = the phases its plan spans (`idle,loaded,recovery`), so a prober
/// that left nothing is seen; per loaded phase in which the test's flows moved no byte,
/// `nodata.PHASE`.
fn push_completeness_facts(r: &mut Row, file: &ResultsFile) {
    for p in file.metadata.plan.iter().flat_map(|p| &p.probes) {
        let phases: Vec<&str> = file
            .raw
            .phases
            .iter()
            .filter(|ph| p.start_ns < ph.end_ns && ph.start_ns < p.stop_ns)
            .map(|ph| ph.name.as_str())
            .collect();
        if !phases.is_empty() {
            r.push(format!("probe.{}", p.name), phases.join(","));
        }
    }
    for f in file
        .metadata
        .extra
        .get("flow_failures")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let flow = f["flow"].as_str().unwrap_or("?");
        let why = f["why"].as_str().unwrap_or("failed");
        r.push(format!("failed.{flow}"), why);
    }
    if file.raw.throughput.is_empty() {
        return;
    }
    let Some(d) = &file.derived else { return };
    for p in &file.raw.phases {
        if p.kind != bloatlab_results::schema::PhaseKindRecord::Loaded {
            continue;
        }
        let moved = d
            .throughput
            .iter()
            .find(|t| t.phase == p.name)
            .is_some_and(|t| t.flows.iter().any(|f| f.bytes > 0));
        if !moved {
            r.push(format!("nodata.{}", p.name), "the flows moved no byte");
        }
    }
}

/// The emulator's release lateness per phase and direction (`metadata.lab.phases`), which
/// [`crate::completeness`] judges: `late.DIR.PHASE.{packets,p50_ms,p99_ms,max_ms}` and
/// `late.DIR.PHASE.over_1ms`, the fraction of the phase's packets released more than 1 ms
/// after their due time. Absent outside a lab and in files written before it was recorded.
fn push_lateness(r: &mut Row, file: &ResultsFile) {
    for p in file.metadata.lab.iter().flat_map(|l| &l.phases) {
        let Some(l) = &p.lateness else { continue };
        let dir = serde_json::to_value(p.direction)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        push_late_cells(r, &dir, &p.phase, l);
    }
}

/// One phase and direction's `late.DIR.PHASE.*` cells.
fn push_late_cells(r: &mut Row, dir: &str, phase: &str, l: &PhaseLatenessRecord) {
    let base = format!("late.{dir}.{phase}");
    let pc = &l.percentiles;
    r.push(format!("{base}.packets"), pc.count);
    for (stat, v) in [("p50", pc.p50_ns), ("p99", pc.p99_ns), ("max", pc.max_ns)] {
        if let Some(ns) = v {
            r.push(format!("{base}.{stat}_ms"), ms(ns));
        }
    }
    if let Some(f) = l.late_fraction() {
        r.push(format!("{base}.over_1ms"), (f * 1e4).round() / 1e4);
    }
}

/// The emulator's release lateness per direction over a `[client]` run, from the lab's
/// counters before and after it (`lab status --json` documents; `Null` or unreadable
/// counters give nothing). The run is one `loaded` phase ([`client`]), so its cells are
/// `late.DIR.loaded.*`, judged as a test run's are.
pub fn client_lateness(before: &Value, after: &Value) -> Vec<(String, PhaseLatenessRecord)> {
    let read = |v: &Value| serde_json::from_value::<bloatlab_lab::LabStatus>(v["counters"].clone());
    match (read(before), read(after)) {
        (Ok(a), Ok(b)) => bloatlab_suite::lab::lateness_window(&a, &b),
        _ => Vec::new(),
    }
}

/// A `[client]` run's row: its identity, parameters, the client's `--json` document
/// ([`client::cells`]), the emulator's release lateness over the run per direction
/// ([`client_lateness`]: `late.DIR.loaded.*`) and the lab's counters.
pub fn client_row(
    run: &str,
    point: &str,
    rep: u32,
    params: &[(String, crate::file::Scalar)],
    doc: &bloatlab_metrics::json::Document,
    lateness: &[(String, PhaseLatenessRecord)],
    lab_counters: &Value,
) -> Row {
    let mut r = head(run, point, rep, params);
    r.push("interrupted", false);
    r.cells.extend(client::cells(doc));
    for (dir, l) in lateness {
        push_late_cells(&mut r, dir, "loaded", l);
    }
    push_emu(&mut r, lab_counters);
    r
}

/// The identity columns: `run`, `point`, `rep` and the parameters.
fn head(run: &str, point: &str, rep: u32, params: &[(String, crate::file::Scalar)]) -> Row {
    let mut r = Row { cells: Vec::new() };
    r.push("run", run);
    r.push("point", point);
    r.push("rep", rep);
    for (k, v) in params {
        r.push(k.clone(), serde_json::to_value(v).unwrap_or(Value::Null));
    }
    r
}

/// The emulator's drops and CE marks per direction and stage (`lab status --json` counters).
fn push_emu(r: &mut Row, lab_counters: &Value) {
    for d in lab_counters["directions"].as_array().into_iter().flatten() {
        let dir = d[0].as_str().unwrap_or("?");
        let link = &d[1]["link"];
        let pk = |c: &Value, a: &str, b: &str| c[a][b]["packets"].as_u64().unwrap_or(0);
        let stage_row = |r: &mut Row, name: &str, c: &Value| {
            let drops =
                pk(c, "dropped", "overflow") + pk(c, "dropped", "aqm") + pk(c, "dropped", "loss");
            r.push(format!("emu.{dir}.{name}.drops"), drops);
            r.push(
                format!("emu.{dir}.{name}.ce_marks"),
                c["ce_marked"]["packets"].as_u64().unwrap_or(0),
            );
        };
        match link["stages"].as_array() {
            Some(stages) => {
                for s in stages {
                    stage_row(r, s["name"].as_str().unwrap_or("?"), &s["link"]);
                }
            }
            None if link.is_object() => stage_row(r, "link", link),
            None => {}
        }
    }
}

/// Every column in the rows, in order of first appearance.
pub fn columns(rows: &[Row]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for r in rows {
        for (k, _) in &r.cells {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    cols
}

fn csv_cell(v: Option<&Value>) -> String {
    let s = match v {
        None | Some(Value::Null) => return String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// `summary.csv`: a header and one line per row (RFC 4180 quoting).
pub fn to_csv(rows: &[Row]) -> String {
    let cols = columns(rows);
    let mut out = cols
        .iter()
        .map(|c| csv_cell(Some(&Value::String(c.clone()))))
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for r in rows {
        let line: Vec<String> = cols.iter().map(|c| csv_cell(r.get(c))).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// `summary.json`: `{"experiment": .., "columns": [..], "rows": [{column: value}]}`.
pub fn to_json(experiment: &str, rows: &[Row]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            Value::Object(
                r.cells
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        })
        .collect();
    serde_json::json!({
        "experiment": experiment,
        "columns": columns_of_json(&rows),
        "rows": rows,
    })
}

fn columns_of_json(rows: &[Value]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for r in rows {
        for k in r.as_object().into_iter().flat_map(|o| o.keys()) {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    cols
}

/// The latency series a table shows: among the round-trip series, the one a run is graded on
/// (`bloatlab_stats::reference_name`: `udp_be` first, the same rule as the grade), else the
/// first series (a `[client]` run's write-to-read latency). Series are `NAME.KIND` here.
pub fn reference_series(rows: &[Row]) -> Option<String> {
    let series: Vec<String> = columns(rows)
        .into_iter()
        .filter_map(|c| {
            let r = c.strip_prefix("lat.")?;
            r.strip_suffix(".loaded.median_ms")
                .or_else(|| r.strip_suffix(".loaded.mean_ms"))
                .map(str::to_string)
        })
        .fold(Vec::new(), |mut v, s| {
            if !v.contains(&s) {
                v.push(s);
            }
            v
        });
    let rtt: Vec<&str> = series
        .iter()
        .filter_map(|s| s.strip_suffix(".rtt"))
        .collect();
    let graded = bloatlab_stats::reference_name(&rtt).map(|n| format!("{n}.rtt"));
    graded.or_else(|| series.into_iter().next())
}

/// The terminal table: parameters, repetition, the reference series' loaded latency
/// (min / p10 / mean / median / p90 / max / count) and loaded throughput.
pub fn table(rows: &[Row], params: &[String]) -> String {
    use std::fmt::Write as _;
    let series = reference_series(rows);
    let lat = |r: &Row, stat: &str| -> String {
        let Some(s) = &series else { return "-".into() };
        match r.get(&format!("lat.{s}.loaded.{stat}")) {
            Some(Value::Number(n)) if stat == "count" => n.to_string(),
            Some(Value::Number(n)) => format!("{:.1}", n.as_f64().unwrap_or(0.0)),
            _ => "-".into(),
        }
    };
    let num = |r: &Row, c: &str| match r.get(c).and_then(Value::as_f64) {
        Some(v) => format!("{v:.2}"),
        None => "-".into(),
    };
    let mut head: Vec<String> = params.to_vec();
    head.push("rep".into());
    for h in [
        "min",
        "10pct",
        "avg",
        "median",
        "90pct",
        "max",
        "count",
        "up Mbit/s",
        "down Mbit/s",
    ] {
        head.push(h.into());
    }
    // Completeness, once rows are annotated (crate::completeness): the causes follow the
    // table.
    let annotated = rows
        .iter()
        .any(|r| r.get(crate::completeness::COMPLETE).is_some());
    if annotated {
        head.push("complete".into());
    }
    let mut causes: Vec<String> = Vec::new();
    let mut body: Vec<Vec<String>> = Vec::new();
    for r in rows {
        let mut line: Vec<String> = params
            .iter()
            .map(|p| r.get(p).map_or("-".into(), |v| csv_cell(Some(v))))
            .collect();
        line.push(r.get("rep").map_or("-".into(), |v| v.to_string()));
        for s in [
            "min_ms",
            "p10_ms",
            "mean_ms",
            "median_ms",
            "p90_ms",
            "max_ms",
            "count",
        ] {
            line.push(lat(r, s));
        }
        line.push(num(r, "tput.loaded.up_mbit"));
        line.push(num(r, "tput.loaded.down_mbit"));
        if annotated {
            let complete = r
                .get(crate::completeness::COMPLETE)
                .and_then(Value::as_bool);
            line.push(match complete {
                Some(true) => "yes".into(),
                Some(false) => {
                    causes.push(format!(
                        "{}: {}",
                        r.get("run").and_then(Value::as_str).unwrap_or("?"),
                        r.get(crate::completeness::INCOMPLETE_BECAUSE)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    ));
                    "NO".into()
                }
                None => "-".into(),
            });
        }
        body.push(line);
    }
    let mut out = String::new();
    if let Some(s) = &series {
        let _ = writeln!(out, "latency under load (ms), series {s}, loaded phase:");
    }
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    out.push_str(&bloatlab_report::table::render_right(&head, &body));
    for c in causes {
        let _ = writeln!(out, "incomplete {c}");
    }
    out
}

/// Mean and sample standard deviation of `column` per point (for repetitions), keyed by the
/// point name, in the order points first appear.
pub fn per_point(rows: &[Row], column: &str) -> Vec<(String, f64, f64, usize)> {
    let mut order: Vec<String> = Vec::new();
    let mut vals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows {
        let Some(p) = r.get("point").and_then(Value::as_str) else {
            continue;
        };
        if !order.iter().any(|o| o == p) {
            order.push(p.to_string());
        }
        if let Some(v) = r.get(column).and_then(Value::as_f64) {
            vals.entry(p.to_string()).or_default().push(v);
        }
    }
    order
        .into_iter()
        .filter_map(|p| {
            let v = vals.get(&p)?;
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            let sd = if v.len() > 1 {
                (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            Some((p, mean, sd, v.len()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(point: &str, rep: u32, v: f64) -> Row {
        Row {
            cells: vec![
                ("run".into(), format!("{point}_r{rep}").into()),
                ("point".into(), point.into()),
                ("rep".into(), rep.into()),
                ("rate".into(), "6mbit".into()),
                ("lat.udp.rtt.loaded.median_ms".into(), v.into()),
            ],
        }
    }

    #[test]
    fn csv_has_the_union_of_columns_and_quotes() {
        let mut a = r("p001", 1, 30.0);
        a.cells.push(("note".into(), "a,b".into()));
        let b = r("p001", 2, 32.0);
        let csv = to_csv(&[a, b]);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "run,point,rep,rate,lat.udp.rtt.loaded.median_ms,note"
        );
        assert_eq!(lines.next().unwrap(), "p001_r1,p001,1,6mbit,30.0,\"a,b\"");
        assert_eq!(lines.next().unwrap(), "p001_r2,p001,2,6mbit,32.0,");
        assert_eq!(
            reference_series(&[r("p", 1, 1.0)]).as_deref(),
            Some("udp.rtt")
        );
    }

    /// The table shows the series the grade is computed on, not the first column: `udp_be`
    /// over an earlier ICMP or `udp_ef` series.
    #[test]
    fn the_table_shows_the_graded_series() {
        let mut row = r("p", 1, 1.0);
        row.cells.retain(|(k, _)| !k.starts_with("lat."));
        for s in ["icmp.rtt", "udp_ef.rtt", "udp_be.owd_up", "udp_be.rtt"] {
            row.cells
                .push((format!("lat.{s}.loaded.median_ms"), 1.0.into()));
        }
        assert_eq!(reference_series(&[row]).as_deref(), Some("udp_be.rtt"));
    }

    #[test]
    fn rows_carry_phases_throughput_retransmits_and_stage_counters() {
        use bloatlab_results::schema::{
            DirectionRecord, FlowRecord, FlowTcpRecord, PhaseKindRecord, PhaseRecord,
            TcpInfoRecord, TransferRecord,
        };
        use bloatlab_results::{Metadata, Raw, ResultsFile};
        let raw = Raw {
            phases: vec![PhaseRecord {
                kind: PhaseKindRecord::Loaded,
                name: "loaded".into(),
                start_ns: 0,
                end_ns: 2_000_000_000,
            }],
            latency: vec![],
            throughput: vec![FlowRecord {
                name: "tcp_up_1".into(),
                ecn: None,
                direction: DirectionRecord::Up,
                samples: vec![TransferRecord {
                    start_ns: 0,
                    end_ns: 2_000_000_000,
                    bytes: 2_500_000,
                }],
                tcp: FlowTcpRecord {
                    sender: Some(TcpInfoRecord {
                        retransmits: Some(7),
                        ..TcpInfoRecord::default()
                    }),
                    receiver: None,
                },
            }],
        };
        let meta = Metadata::new("tcp_upload", vec![], Default::default());
        let file = ResultsFile::new(meta, raw).with_derived().unwrap();
        let lab = serde_json::json!({"directions": [["up", {"link": {"stages": [
            {"name": "router", "link": {"dropped": {"aqm": {"packets": 3}}, "ce_marked": {"packets": 2}}}
        ]}}]]});
        let r = row("p001_r1", "p001", 1, &[], &file, &lab);
        // 2.5 MB over 2 s = 10 Mbit/s.
        assert_eq!(r.get("tput.loaded.up_mbit"), Some(&Value::from(10.0)));
        assert_eq!(
            r.get("tput.loaded.tcp_up_1.bytes"),
            Some(&Value::from(2_500_000))
        );
        assert_eq!(r.get("tcp.tcp_up_1.retransmits"), Some(&Value::from(7)));
        assert_eq!(r.get("emu.up.router.drops"), Some(&Value::from(3)));
        assert_eq!(r.get("emu.up.router.ce_marks"), Some(&Value::from(2)));
    }

    /// 1 s idle, then 2 s loaded.
    fn idle_then_loaded() -> Vec<bloatlab_results::schema::PhaseRecord> {
        use bloatlab_results::schema::{PhaseKindRecord, PhaseRecord};
        let phase = |kind, name: &str, a: u64, b: u64| PhaseRecord {
            kind,
            name: name.into(),
            start_ns: a,
            end_ns: b,
        };
        vec![
            phase(PhaseKindRecord::Idle, "idle", 0, 1_000_000_000),
            phase(
                PhaseKindRecord::Loaded,
                "loaded",
                1_000_000_000,
                3_000_000_000,
            ),
        ]
    }

    #[test]
    fn rows_carry_flow_failures_and_loaded_phases_without_bytes() {
        use bloatlab_results::schema::{
            DirectionRecord, FlowRecord, FlowTcpRecord, TransferRecord,
        };
        use bloatlab_results::{Metadata, Raw, ResultsFile};
        let raw = Raw {
            phases: idle_then_loaded(),
            latency: vec![],
            throughput: vec![FlowRecord {
                name: "tcp_up_1".into(),
                ecn: None,
                direction: DirectionRecord::Up,
                // Bytes in the idle phase only: the loaded phase moved nothing.
                samples: vec![TransferRecord {
                    start_ns: 0,
                    end_ns: 900_000_000,
                    bytes: 1000,
                }],
                tcp: FlowTcpRecord::default(),
            }],
        };
        let mut meta = Metadata::new("tcp_upload", vec![], Default::default());
        meta.extra.insert(
            "flow_failures".into(),
            serde_json::json!([{"flow": "tcp_up_1", "why": "stalled: x"}]),
        );
        let file = ResultsFile::new(meta, raw).with_derived().unwrap();
        let r = row("p001_r1", "p001", 1, &[], &file, &Value::Null);
        assert_eq!(r.get("failed.tcp_up_1"), Some(&Value::from("stalled: x")));
        assert!(r.get("nodata.loaded").is_some(), "{r:?}");
        assert!(r.get("nodata.idle").is_none(), "idle is not a loaded phase");
    }

    #[test]
    fn rows_name_each_planned_probe_so_a_silent_prober_is_an_empty_phase() {
        use bloatlab_results::schema::{
            DelayKindRecord, LatencyRecord, PlanProbeRecord, PlanRecord, ProbeModeRecord,
            ProbeRecord,
        };
        use bloatlab_results::{Metadata, Raw, ResultsFile};
        let probe = |name: &str, start_ns: u64| PlanProbeRecord {
            name: name.into(),
            mode: ProbeModeRecord::Udp,
            start_ns,
            stop_ns: 3_000_000_000,
            interval_ns: 100_000_000,
            tos: None,
            size_bytes: None,
            voip: false,
            family: None,
            address: None,
        };
        // udp_be answered in both phases; udp_bk (planned from 0 s) printed nothing; udp_ef
        // starts 0.5 s in, still within idle.
        let samples = (0..30)
            .map(|i| ProbeRecord {
                sent_ns: i * 100_000_000,
                delay_ns: Some(20_000_000),
                duplicates: 0,
                late: false,
                unfinished: false,
            })
            .collect::<Vec<_>>();
        let raw = Raw {
            phases: idle_then_loaded(),
            latency: vec![
                LatencyRecord {
                    name: "udp_be".into(),
                    kind: DelayKindRecord::Rtt,
                    samples: samples.clone(),
                },
                LatencyRecord {
                    name: "udp_ef".into(),
                    kind: DelayKindRecord::Rtt,
                    samples: samples[5..].to_vec(),
                },
            ],
            throughput: vec![],
        };
        let mut meta = Metadata::new("rrul", vec![], Default::default());
        meta.plan = Some(PlanRecord {
            probes: vec![
                probe("udp_be", 0),
                probe("udp_bk", 0),
                probe("udp_ef", 500_000_000),
            ],
            ..PlanRecord::default()
        });
        let file = ResultsFile::new(meta, raw).with_derived().unwrap();
        let r = row("p001_r1", "p001", 1, &[], &file, &Value::Null);
        assert_eq!(r.get("probe.udp_be"), Some(&Value::from("idle,loaded")));
        assert_eq!(r.get("probe.udp_ef"), Some(&Value::from("idle,loaded")));
        let causes: Vec<String> = crate::completeness::assess(&r, 0.05)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            causes,
            [
                "phase idle: probe udp_bk left no result",
                "phase loaded: probe udp_bk left no result"
            ]
        );
    }

    #[test]
    fn repetitions_give_mean_and_spread() {
        let rows = [r("p001", 1, 30.0), r("p001", 2, 34.0), r("p002", 1, 50.0)];
        let s = per_point(&rows, "lat.udp.rtt.loaded.median_ms");
        assert_eq!(s[0].0, "p001");
        assert_eq!((s[0].1, s[0].3), (32.0, 2));
        assert!((s[0].2 - 2.828).abs() < 0.01);
        assert_eq!((s[1].1, s[1].2), (50.0, 0.0));
        let t = table(&rows, &["rate".into()]);
        assert!(t.contains("udp.rtt"), "{t}");
        assert!(t.lines().nth(2).unwrap().contains("30.0"), "{t}");
        assert!(!t.contains("complete"), "not annotated: {t}");
    }

    #[test]
    fn the_table_shows_each_runs_completeness_and_why_not() {
        let mut rows = vec![r("p001", 1, 30.0), r("p002", 1, 50.0)];
        rows[1].cells.push((
            "failed.tcp_up_1".into(),
            "stalled: the server read nothing".into(),
        ));
        crate::completeness::annotate(&mut rows, &0.05.into());
        let t = table(&rows, &["rate".into()]);
        assert!(t.lines().next().unwrap().contains("udp.rtt"), "{t}");
        assert!(t.lines().nth(1).unwrap().ends_with("complete"), "{t}");
        assert!(t.lines().nth(2).unwrap().ends_with("yes"), "{t}");
        assert!(t.lines().nth(3).unwrap().ends_with("NO"), "{t}");
        assert!(
            t.contains("incomplete p002_r1: flow tcp_up_1 failed: stalled"),
            "{t}"
        );
    }
}
