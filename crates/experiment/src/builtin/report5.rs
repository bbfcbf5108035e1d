//! Report 5's check: ping under load from the bloated side of a 36 Mbit/s link vs from its
//! debloated side. The report (notes, no statistic named): idle ~0.7-1.3 ms, under load from
//! the bloated side ~147 ms, from the debloated side 1.8-3.6 ms (a range).

use super::band::{self, Effect};
use super::{Experiment, Row, Table, expect_f, f1, mean};
use std::fmt::Write as _;

/// Writes report / ours per direction into `t`; returns the verdict and its numbers.
pub(super) fn judge(
    exp: &Experiment,
    rows: &[Row],
    lat: &dyn Fn(&str, &str) -> String,
    t: &mut Table,
) -> (Option<bool>, String) {
    let loaded = |load: &str| mean(rows, "load", load, &lat("median", "loaded"));
    let induced =
        |load: &str| Some(loaded(load)? - mean(rows, "load", load, &lat("median", "idle"))?);
    let (bloated, lo, hi) = (
        expect_f(exp, "report_bloated_ms"),
        expect_f(exp, "report_debloated_min_ms"),
        expect_f(exp, "report_debloated_max_ms"),
    );
    let _ = writeln!(
        t,
        "{:<30}{:>34}{:>16}",
        "ping under load from", "report ms", "ours median ms"
    );
    let _ = writeln!(
        t,
        "{:<30}{:>34}{:>16}",
        "the bloated side (upload)",
        format!("~{bloated:.0} (statistic not named)"),
        f1(loaded("tcp_upload"))
    );
    let _ = writeln!(
        t,
        "{:<30}{:>34}{:>16}",
        "the debloated side (download)",
        format!("{lo:.1}-{hi:.1} (a range, no median)"),
        f1(loaded("tcp_download"))
    );
    t.compare(
        "the bloated side (upload): ping under load",
        "report: ~, statistic not named; ours: loaded median",
        "ms",
        bloated,
        loaded("tcp_upload"),
    );
    t.compare(
        "the debloated side (download): ping under load",
        format!(
            "report: the top of its range {lo:.1}-{hi:.1} (no median given); ours: loaded median"
        ),
        "ms",
        hi,
        loaded("tcp_download"),
    );
    let idle = expect_f(exp, "report_idle_ms");
    let debloated = hi - idle;
    band::judge(
        &[
            Effect::factor2(
                "bloated side: induced median",
                bloated - idle,
                induced("tcp_upload"),
                " ms",
            )
            .of("report: ~147 - ~1.0 idle; ours: loaded median - idle median"),
            // The report gives the debloated side as a range; its top over idle (3.6 - 1.0 =
            // 2.6 ms) is as wide as its idle spread (0.7-1.3 ms), so only "too large" can be
            // told from it: at most twice that.
            Effect::band(
                "debloated side: induced median",
                debloated,
                (f64::NEG_INFINITY, 2.0 * debloated),
                induced("tcp_download"),
                " ms",
            )
            .of("report: top of the range 1.8-3.6 - ~1.0 idle; ours: loaded median - idle median"),
        ],
        t,
    )
}

#[cfg(test)]
mod tests {
    use crate::builtin::{check, get};
    use crate::summary::Row;

    fn row(load: &str, idle: f64, loaded: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), load.into()),
                ("load".into(), load.into()),
                ("lat.udp_be.rtt.idle.median_ms".into(), idle.into()),
                ("lat.udp_be.rtt.loaded.median_ms".into(), loaded.into()),
            ],
        }
    }

    #[test]
    fn report5_judges_both_sides_both_ways() {
        let e = crate::parse("r5", "r5", get("report5-directions").unwrap()).unwrap();
        let judge = |up: f64, down: f64| {
            check(
                &e,
                &[row("tcp_upload", 2.0, up), row("tcp_download", 2.0, down)],
            )
            .unwrap()
        };
        let v = judge(130.0, 3.0);
        assert_eq!(v.reproduced, Some(true), "{v}");
        // The report's numbers as it gives them: "~147", and a range (no median).
        assert!(
            v.table.contains("~147 (statistic not named)")
                && v.table.contains("1.8-3.6 (a range, no median)")
                && !v.table.contains("2.73"),
            "{v}"
        );
        assert!(
            v.because.contains("report 146 ms, band 73.0 ms..292 ms"),
            "{v}"
        );
        assert!(
            v.because
                .contains("report 2.60 ms, at most 5.20 ms: within"),
            "{v}"
        );
        let hi = &v.comparison[1];
        assert_eq!((hi.report, hi.ours), (Some(3.6), Some(3.0)), "{v:?}");
        assert!(hi.statistic.contains("no median"), "{hi:?}");
        // The bloated side too small (+30 ms) or too large (+400 ms).
        let v = judge(32.0, 3.0);
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO SMALL"), "{v}");
        let v = judge(402.0, 3.0);
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO LARGE"), "{v}");
        // The debloated side +6 ms: too large.
        let v = judge(130.0, 8.0);
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.to_string().contains("NOT REPRODUCED"));
        // A direction without runs: not judged.
        assert_eq!(
            check(&e, &[row("tcp_upload", 2.0, 130.0)])
                .unwrap()
                .reproduced,
            None
        );
    }
}
