//! Report 4's check: RRUL latency against the SQM shaper's rate in front of a 7616/864 kbit/s
//! ATM line. Three effects, each the report's within a factor of 2 (its induced latency is
//! the statistic minus its minimum, ~28.8 ms; ours the statistic minus our idle median):
//!
//! * at the lowest shaper rate the AQM holds the queue: induced median 38.0 - 28.9 = 9.1 ms;
//! * the knee: at the rate nearest the line (judged against both directions' line rates, the
//!   larger of down/7616 and up/864) latency rises: induced 90th percentile
//!   (81.8 - 28.8) / (52.6 - 28.9) = 2.24x the lowest rate's;
//! * SQM off, the modem's FIFO holds seconds: induced median 2051.3 - 28.7 = 2022.6 ms.

use super::band::{self, Effect};
use super::{Experiment, Row, Table, expect_f, f1, in_matrix, mean};
use std::fmt::Write as _;

/// The report's RRUL table (ms): min, 10pct, avg, median, 90pct, max, pings.
const REPORT: [(&str, [f64; 7]); 5] = [
    (
        "6089kbit/737kbit",
        [28.9, 29.1, 40.5, 38.0, 52.6, 77.2, 77.0],
    ),
    (
        "6400kbit/800kbit",
        [28.7, 29.1, 39.6, 38.4, 52.4, 69.5, 78.0],
    ),
    (
        "7000kbit/830kbit",
        [28.9, 29.3, 44.3, 45.3, 58.0, 85.0, 78.0],
    ),
    (
        "7600kbit/850kbit",
        [28.8, 29.1, 55.4, 46.1, 81.8, 277.8, 84.0],
    ),
    (
        "SQM off",
        [28.7, 29.1, 1802.5, 2051.3, 2762.9, 4217.6, 78.0],
    ),
];

/// Column index of a statistic in [`REPORT`].
const MIN: usize = 0;
const MEDIAN: usize = 3;
const P90: usize = 4;

/// `(down, up)` kbit/s of a shaper label (`None` for SQM off).
fn rates(label: &str) -> Option<(f64, f64)> {
    let (d, u) = label.split_once('/')?;
    Some((
        d.strip_suffix("kbit")?.parse().ok()?,
        u.strip_suffix("kbit")?.parse().ok()?,
    ))
}

/// Writes the report's table beside ours into `t`; returns the verdict and its numbers.
/// `col` names a column of the reference series (`"loaded.median_ms"`).
pub(super) fn judge(
    exp: &Experiment,
    rows: &[Row],
    col: &dyn Fn(&str) -> String,
    t: &mut Table,
) -> (Option<bool>, String) {
    let points: Vec<&(&str, [f64; 7])> = REPORT
        .iter()
        .filter(|(label, _)| in_matrix(exp, "shaper", label))
        .collect();
    let stats = ["min", "p10", "mean", "median", "p90", "max"];
    // The report's names of the statistics (its ping script's columns).
    let names = ["min", "10pct", "avg", "median", "90pct", "max"];
    let ours = |label: &str, c: &str| mean(rows, "shaper", label, &col(c));
    let _ = writeln!(t, "RRUL latency under load (ms), report / ours:");
    let _ = writeln!(
        t,
        "{:<18}{:>14}{:>14}{:>16}{:>16}{:>16}{:>16}{:>12}{:>8}",
        "rate", "min", "10pct", "avg", "median", "90pct", "max", "pings", "lost"
    );
    for &&(label, rep) in &points {
        let mut line = format!("{label:<18}");
        for (i, s) in stats.iter().enumerate() {
            let o = ours(label, &format!("loaded.{s}_ms"));
            let _ = write!(line, "{:>16}", format!("{:.1} / {}", rep[i], f1(o)));
            t.compare(
                format!("{label}: RRUL ping"),
                format!("{} (ours: loaded phase)", names[i]),
                "ms",
                rep[i],
                o,
            );
        }
        let count = ours(label, "loaded.count");
        t.compare(
            format!("{label}: pings"),
            "count (the report: ~78 a minute, idle included; ours: every 200 ms, loaded phase)",
            "",
            rep[6],
            count,
        );
        let _ = write!(
            line,
            "{:>12}",
            format!(
                "{:.0} / {}",
                rep[6],
                count.map_or("-".into(), |c| format!("{c:.0}"))
            )
        );
        let lost = ours(label, "loaded.loss").map_or("-".into(), |l| format!("{:.1} %", l * 100.0));
        let _ = write!(line, "{lost:>8}");
        let _ = writeln!(t, "{line}");
    }
    let _ = writeln!(
        t,
        "(the report's pings: ~78 per minute over the whole test, idle included, none lost; \
         ours: the RRUL probes every 200 ms in the loaded phase only, so our min and \
         10pct are loaded values where the report's are near idle)"
    );
    // Induced: the statistic over the base (the report's minimum, our idle median).
    let idle = |label: &str| ours(label, "idle.median_ms");
    let induced = |label: &str, stat: &str| Some(ours(label, stat)? - idle(label)?);
    let report_induced = |rep: &[f64; 7], i: usize| rep[i] - rep[MIN];
    let mut effects = Vec::new();
    let shaped: Vec<_> = points
        .iter()
        .filter_map(|p| rates(p.0).map(|r| (*p, r)))
        .collect();
    let (line_down, line_up) = (
        expect_f(exp, "line_down_kbit"),
        expect_f(exp, "line_up_kbit"),
    );
    let share = |(d, u): (f64, f64)| (d / line_down).max(u / line_up);
    let lowest = shaped
        .iter()
        .min_by(|a, b| share(a.1).total_cmp(&share(b.1)));
    let nearest = shaped
        .iter()
        .max_by(|a, b| share(a.1).total_cmp(&share(b.1)));
    if let Some(&(&(label, rep), r)) = lowest {
        effects.push(
            Effect::factor2(
                format!(
                    "{label} ({:.0} % of the line): induced median",
                    share(r) * 100.0
                ),
                report_induced(&rep, MEDIAN),
                induced(label, "loaded.median_ms"),
                " ms",
            )
            .of("median - min (ours: - idle median)"),
        );
    }
    if let (Some(&(&(lo, lrep), _)), Some(&(&(hi, hrep), r))) = (lowest, nearest)
        && lo != hi
    {
        let ratio = match (induced(hi, "loaded.p90_ms"), induced(lo, "loaded.p90_ms")) {
            (Some(h), Some(l)) if l > 0.0 => Some(h / l),
            _ => None,
        };
        effects.push(
            Effect::factor2(
                format!(
                    "knee: induced 90pct at {hi} ({:.1} % of the line) / at {lo}",
                    share(r) * 100.0
                ),
                report_induced(&hrep, P90) / report_induced(&lrep, P90),
                ratio,
                "x",
            )
            .of("90pct - min (ours: - idle median)"),
        );
    }
    if let Some(&&(label, rep)) = points.iter().find(|p| rates(p.0).is_none()) {
        effects.push(
            Effect::factor2(
                format!("{label}: induced median"),
                report_induced(&rep, MEDIAN),
                induced(label, "loaded.median_ms"),
                " ms",
            )
            .of("median - min (ours: - idle median)"),
        );
    }
    band::judge(&effects, t)
}

#[cfg(test)]
mod tests {
    use crate::builtin::{check, get};
    use crate::summary::Row;

    /// A point with idle median 33 ms and the given loaded median and 90th percentile.
    fn row(label: &str, median: f64, p90: f64) -> Row {
        let c = |s: &str| format!("lat.udp_be.rtt.{s}");
        Row {
            cells: vec![
                ("point".into(), label.into()),
                ("shaper".into(), label.into()),
                (c("idle.median_ms"), 33.0.into()),
                (c("loaded.median_ms"), median.into()),
                (c("loaded.p90_ms"), p90.into()),
                (c("loaded.count"), 300.into()),
                (c("loaded.loss"), 0.02.into()),
            ],
        }
    }

    fn sweep(knee_p90: f64, off_median: f64) -> Vec<Row> {
        vec![
            row("6089kbit/737kbit", 42.0, 55.0),
            row("6400kbit/800kbit", 42.0, 55.0),
            row("7000kbit/830kbit", 45.0, 60.0),
            row("7600kbit/850kbit", 50.0, knee_p90),
            row("SQM off", off_median, off_median * 1.3),
        ]
    }

    #[test]
    fn report4_judges_the_knee_against_both_lines_and_sqm_off_both_ways() {
        let e = crate::parse("r4", "r4", get("report4-sqm-sweep").unwrap()).unwrap();
        // Knee: induced 90pct (80 - 33) / (55 - 33) = 2.1x; SQM off +2000 ms.
        let v = check(&e, &sweep(80.0, 2033.0)).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        assert!(
            v.because.contains("7600kbit/850kbit (99.8 % of the line)"),
            "{v}"
        );
        assert!(v.because.contains("report 2.24x"), "{v}");
        assert!(v.table.contains("2051.3 / 2033.0"), "{v}");
        assert!(v.table.contains("2.0 %"), "the loss column: {v}");
        // No knee (the run: 54.4 ms at 7600/850): too small.
        let v = check(&e, &sweep(56.0, 2033.0)).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO SMALL"), "{v}");
        // SQM off 2.4x the report's (a 1000-packet modem): too large.
        let v = check(&e, &sweep(80.0, 4989.0)).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO LARGE"), "{v}");
        // SQM off barely bloated: too small.
        let v = check(&e, &sweep(80.0, 400.0)).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        // The lowest rate 40 ms over idle: too large.
        let mut rows = sweep(80.0, 2033.0);
        rows[0] = row("6089kbit/737kbit", 73.0, 90.0);
        assert_eq!(check(&e, &rows).unwrap().reproduced, Some(false));
        // A point missing: not judged.
        assert_eq!(
            check(&e, &sweep(80.0, 2033.0)[1..]).unwrap().reproduced,
            None
        );
    }

    #[test]
    fn report4_quick_judges_only_its_two_ends() {
        let e = crate::parse("r4", "r4", get("report4-sqm-sweep").unwrap()).unwrap();
        let ends = [
            row("6089kbit/737kbit", 42.0, 55.0),
            row("SQM off", 2033.0, 2600.0),
        ];
        let v = check(&e.quick(), &ends).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        assert!(!v.table.contains("7000kbit"), "{v}");
        assert!(!v.because.contains("knee"), "{v}");
    }
}
