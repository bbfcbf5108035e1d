//! Plain-text tables for the terminal.

use crate::view::{Comparison, RunView};

/// Left-aligned first column (a name), right-aligned others, two spaces between columns.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    layout(header, rows, true)
}

/// Every column right-aligned (tables whose leading columns are numbers too, such as an
/// experiment's swept parameters), two spaces between columns.
pub fn render_right(header: &[&str], rows: &[Vec<String>]) -> String {
    layout(header, rows, false)
}

fn layout(header: &[&str], rows: &[Vec<String>], first_left: bool) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = width[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if i == 0 && first_left {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// The per-phase summary of one run.
pub fn run_summary(v: &RunView) -> String {
    let mut out = format!("== {} ({})", v.label, v.test);
    if let Some(t) = &v.title {
        out.push_str(&format!(": {t}"));
    }
    out.push('\n');
    if v.interrupted {
        out.push_str("note: the run was interrupted; figures cover what was measured\n");
    }
    out.push_str(&format!("phases: {}\n", v.phases.join(", ")));
    out.push_str(&format!(
        "bufferbloat grade: {} ({})\n\n",
        v.grade, v.grade_reason
    ));
    if !v.responsiveness.is_empty() {
        out.push_str("responsiveness (bloatlab rpm)\n");
        let rows: Vec<Vec<String>> = v
            .responsiveness
            .iter()
            .map(|r| vec![r.key.clone(), r.value.clone()])
            .collect();
        out.push_str(&render(&["figure", "value"], &rows));
        out.push('\n');
    }
    if v.latency.is_empty() {
        out.push_str("no latency series\n");
    } else {
        out.push_str("latency (ms)\n");
        let rows: Vec<Vec<String>> = v
            .latency
            .iter()
            .map(|r| {
                vec![
                    format!("{} ({})", r.series, r.kind),
                    r.phase.clone(),
                    r.min.clone(),
                    r.p10.clone(),
                    r.mean.clone(),
                    r.median.clone(),
                    r.p90.clone(),
                    r.max.clone(),
                    r.count.clone(),
                    r.p99.clone(),
                    r.loss.clone(),
                    r.induced.clone(),
                    r.grade.clone(),
                    r.probe_rpm.clone(),
                ]
            })
            .collect();
        out.push_str(&render(
            &[
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
                "probe RPM",
            ],
            &rows,
        ));
    }
    if !v.throughput.is_empty() {
        out.push_str("\nthroughput (Mbit/s)\n");
        let mut rows = Vec::new();
        for t in &v.throughput {
            for f in &t.flows {
                rows.push(vec![
                    t.phase.clone(),
                    format!("{} ({})", f.name, f.direction),
                    f.mbps.clone(),
                    f.coverage.clone(),
                ]);
            }
            rows.push(vec![
                t.phase.clone(),
                "up".into(),
                t.up.clone(),
                format!("fairness {}", t.fairness_up),
            ]);
            rows.push(vec![
                t.phase.clone(),
                "down".into(),
                t.down.clone(),
                format!("fairness {}", t.fairness_down),
            ]);
            rows.push(vec![
                t.phase.clone(),
                "total".into(),
                t.total.clone(),
                format!("fairness {}", t.fairness_all),
            ]);
        }
        out.push_str(&render(
            &["phase", "flow", "Mbit/s", "coverage / Jain"],
            &rows,
        ));
    }
    if !v.flows.is_empty() {
        out.push_str("\nflows, whole run\n");
        let rows: Vec<Vec<String>> = v
            .flows
            .iter()
            .map(|f| {
                vec![
                    format!("{} ({})", f.name, f.direction),
                    f.megabytes.clone(),
                    f.congestion_control.clone(),
                    f.retransmits.clone(),
                    f.ecn.clone(),
                    f.ce_marks.clone(),
                ]
            })
            .collect();
        out.push_str(&render(
            &[
                "flow",
                "MB",
                "congestion control",
                "retransmits",
                "ECN",
                "CE-echoed segments",
            ],
            &rows,
        ));
    }
    out
}

/// Several runs side by side.
pub fn comparison(c: &Comparison) -> String {
    let mut header = vec!["metric"];
    header.extend(c.runs.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            let mut v = vec![r.metric.clone()];
            v.extend(r.values.iter().cloned());
            v
        })
        .collect();
    format!("== comparison\n{}", render(&header, &rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let t = render(
            &["a", "bb"],
            &[
                vec!["long name".into(), "1".into()],
                vec!["x".into(), "123".into()],
            ],
        );
        assert_eq!(t, "a           bb\nlong name    1\nx          123\n");
    }

    #[test]
    fn right_aligned_tables_align_every_column_right() {
        let t = render_right(
            &["rate", "rep", "median"],
            &[
                vec!["9mbit".into(), "1".into(), "38.0".into()],
                vec!["10000kbit".into(), "12".into(), "-".into()],
            ],
        );
        assert_eq!(
            t,
            "     rate  rep  median\n    9mbit    1    38.0\n10000kbit   12       -\n"
        );
    }
}
