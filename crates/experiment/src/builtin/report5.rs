//! Report 5's check: ping under load from the bloated side of a 36 Mbit/s link vs from its
//! debloated side. The report: idle ~0.7-1.3 ms, ~147 ms under load from the bloated side,
//! 1.8-3.6 ms (median 2.73) from the debloated side.

use super::band::{self, Effect};
use super::{Experiment, Row, expect_f, f1, mean};
use std::fmt::Write as _;

/// Writes report / ours per direction into `t`; returns the verdict and its numbers.
pub(super) fn judge(
    exp: &Experiment,
    rows: &[Row],
    lat: &dyn Fn(&str, &str) -> String,
    t: &mut String,
) -> (Option<bool>, String) {
    let loaded = |load: &str| mean(rows, "load", load, &lat("median", "loaded"));
    let induced =
        |load: &str| Some(loaded(load)? - mean(rows, "load", load, &lat("median", "idle"))?);
    let _ = writeln!(
        t,
        "{:<30}{:>30}{:>14}",
        "ping under load from", "report ms", "ours median ms"
    );
    let _ = writeln!(
        t,
        "{:<30}{:>30}{:>14}",
        "the bloated side (upload)",
        format!(
            "~{:.0} (statistic not named)",
            expect_f(exp, "report_bloated_ms")
        ),
        f1(loaded("tcp_upload"))
    );
    let _ = writeln!(
        t,
        "{:<30}{:>30}{:>14}",
        "the debloated side (download)",
        format!(
            "median {:.2} (1.8-3.6)",
            expect_f(exp, "report_debloated_median_ms")
        ),
        f1(loaded("tcp_download"))
    );
    let idle = expect_f(exp, "report_idle_ms");
    let debloated = expect_f(exp, "report_debloated_median_ms") - idle;
    band::judge(&[
        Effect::factor2(
            "bloated side: induced median",
            expect_f(exp, "report_bloated_ms") - idle,
            induced("tcp_upload"),
            " ms",
        ),
        // The debloated side's effect (~1.7 ms) is as wide as the report's idle spread
        // (0.7-1.3 ms): only "too large" can be told from it.
        Effect::band(
            "debloated side: induced median",
            debloated,
            (f64::NEG_INFINITY, 2.0 * debloated),
            induced("tcp_download"),
            " ms",
        ),
    ])
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
        assert!(
            v.table.contains("median 2.73"),
            "the report's median, named: {v}"
        );
        assert!(
            v.because.contains("report 146 ms, band 73.0 ms..292 ms"),
            "{v}"
        );
        assert!(
            v.because
                .contains("report 1.73 ms, at most 3.46 ms: within"),
            "{v}"
        );
        // The bloated side too small (+30 ms) or too large (+400 ms).
        let v = judge(32.0, 3.0);
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO SMALL"), "{v}");
        let v = judge(402.0, 3.0);
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO LARGE"), "{v}");
        // The debloated side +10 ms: too large.
        let v = judge(130.0, 12.0);
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
