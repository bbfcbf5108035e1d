//! `variable-link` (issue 23): a shaper in front of a line whose rate follows the step trace
//! (20/5 Mbit/s every 5 s, a deep FIFO), RRUL, three arms: no shaper, a static shaper at the
//! trace's median rate, `bloatlab autorate`. Not a field report: the "report" column holds
//! the physics' bound, and each arm's effects are judged within their bands (a measurement
//! outside on either side is NOT REPRODUCED: an unshaped line that is not bloated, a static
//! shaper that carries more than the line can at its rate, an autorate that bloats or
//! starves). The plots are [`super::variable_link_plot`].

use super::band::{self, Effect};
use super::{Experiment, Row, Table, expect_f, in_matrix, mean};
use std::fmt::Write as _;

/// The arms, as the file labels them.
pub const ARMS: [&str; 3] = ["no shaper", "static", "autorate"];

/// One arm's numbers (means over its repetitions).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ArmNumbers {
    /// Download throughput in the loaded phase, Mbit/s.
    pub tput_mbit: Option<f64>,
    /// That as a share of the trace's mean capacity.
    pub share: Option<f64>,
    /// Loaded latency percentiles, ms.
    pub p50: Option<f64>,
    /// 90th.
    pub p90: Option<f64>,
    /// 99th.
    pub p99: Option<f64>,
    /// Loaded p90 minus idle median, ms.
    pub induced_p90: Option<f64>,
}

/// The numbers of `arm` in `rows`; `lat(stat, phase)` names a latency column.
pub fn numbers(
    exp: &Experiment,
    rows: &[Row],
    arm: &str,
    lat: &dyn Fn(&str, &str) -> String,
) -> ArmNumbers {
    let m = |col: &str| mean(rows, "arm", arm, col);
    let tput = m("tput.loaded.down_mbit");
    let cap = expect_f(exp, "mean_capacity_mbit");
    let p90 = m(&lat("p90", "loaded"));
    let idle = m(&lat("median", "idle"));
    ArmNumbers {
        tput_mbit: tput,
        share: tput.map(|t| t / cap).filter(|s| s.is_finite()),
        p50: m(&lat("median", "loaded")),
        p90,
        p99: m(&lat("p99", "loaded")),
        induced_p90: p90.zip(idle).map(|(l, i)| l - i),
    }
}

fn f(x: Option<f64>, d: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.d$}"))
}

/// Writes the table per arm into `t`; returns the verdict and its numbers.
pub(super) fn judge(
    exp: &Experiment,
    rows: &[Row],
    lat: &dyn Fn(&str, &str) -> String,
    t: &mut Table,
) -> (Option<bool>, String) {
    let cap = expect_f(exp, "mean_capacity_mbit");
    let _ = writeln!(
        t,
        "{:<10}{:>12}{:>10}{:>12}{:>9}{:>9}{:>14}",
        "arm", "tput Mbit/s", "of mean", "loaded p50", "p90", "p99", "induced p90"
    );
    let n: Vec<ArmNumbers> = ARMS.iter().map(|a| numbers(exp, rows, a, lat)).collect();
    for (a, x) in ARMS.iter().zip(&n) {
        let _ = writeln!(
            t,
            "{:<10}{:>12}{:>10}{:>12}{:>9}{:>9}{:>14}",
            a,
            f(x.tput_mbit, 2),
            x.share
                .map_or("-".into(), |s| format!("{:.0} %", s * 100.0)),
            f(x.p50, 1),
            f(x.p90, 1),
            f(x.p99, 1),
            f(x.induced_p90, 1),
        );
        t.compare(
            format!("{a}: download throughput"),
            format!("loaded mean; the trace's mean capacity {cap} Mbit/s beside it"),
            "Mbit/s",
            cap,
            x.tput_mbit,
        );
    }
    let _ = writeln!(
        t,
        "(latency in ms, the reference probe series' round trip; induced = loaded p90 - idle median; mean capacity {cap} Mbit/s)"
    );
    let bloated = expect_f(exp, "bloated_ms");
    let at_most = |x: f64| (f64::NEG_INFINITY, x);
    let at_least = |x: f64| (x, f64::INFINITY);
    // More than the line carries is a measurement error, whatever the arm.
    let over = 1.10;
    let ar_bound = expect_f(exp, "delay_thr_ms") + expect_f(exp, "autorate_margin_ms");
    let share = |a: usize| n[a].share;
    let induced = |a: usize| n[a].induced_p90;
    let mut effects = Vec::new();
    let arm_in = |a: &str| in_matrix(exp, "arm", a);
    if arm_in(ARMS[0]) {
        effects.push(
            Effect::band(
                "no shaper: induced p90",
                bloated,
                at_least(bloated),
                induced(0),
                " ms",
            )
            .of("bloated whenever the line slows: at least the bound"),
        );
        let lo = expect_f(exp, "unshaped_min_share");
        effects.push(
            Effect::band(
                "no shaper: throughput / mean capacity",
                lo,
                (lo, over),
                share(0),
                "x",
            )
            .of("it uses the line"),
        );
    }
    if arm_in(ARMS[1]) {
        effects.push(
            Effect::band(
                "static: induced p90",
                bloated,
                at_least(bloated),
                induced(1),
                " ms",
            )
            .of("bloated when the line drops below the shaper"),
        );
        let hi = expect_f(exp, "static_max_share");
        // At least the low rate's share: the line carries that whatever the shaper.
        let lo = expect_f(exp, "low_mbit") / cap;
        effects.push(
            Effect::band(
                "static: throughput / mean capacity",
                hi,
                (lo, hi),
                share(1),
                "x",
            )
            .of("wastes the capacity above the shaper: at most the bound"),
        );
    }
    if arm_in(ARMS[2]) {
        effects.push(
            Effect::band(
                "autorate: induced p90",
                ar_bound,
                at_most(ar_bound),
                induced(2),
                " ms",
            )
            .of("within autorate's threshold + margin"),
        );
        let lo = expect_f(exp, "autorate_min_share");
        effects.push(
            Effect::band(
                "autorate: throughput / mean capacity",
                lo,
                (lo, over),
                share(2),
                "x",
            )
            .of("at least the bound"),
        );
    }
    band::judge(&effects, t)
}

#[cfg(test)]
mod tests {
    use crate::builtin::{check, get};
    use crate::summary::Row;

    fn row(arm: &str, idle: f64, p90: f64, tput: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), arm.into()),
                ("arm".into(), arm.into()),
                ("lat.udp_be.rtt.idle.median_ms".into(), idle.into()),
                ("lat.udp_be.rtt.loaded.median_ms".into(), (p90 * 0.6).into()),
                ("lat.udp_be.rtt.loaded.p90_ms".into(), p90.into()),
                ("lat.udp_be.rtt.loaded.p99_ms".into(), (p90 * 1.3).into()),
                ("tput.loaded.down_mbit".into(), tput.into()),
            ],
        }
    }

    /// The physics as the issue states it, then each arm wrong both ways.
    #[test]
    fn variable_link_judges_every_arm_both_ways() {
        let e = crate::parse("v", "v", get("variable-link").unwrap()).unwrap();
        let judge = |none: (f64, f64), stat: (f64, f64), ar: (f64, f64)| {
            check(
                &e,
                &[
                    row("no shaper", 20.0, 20.0 + none.0, none.1),
                    row("static", 20.0, 20.0 + stat.0, stat.1),
                    row("autorate", 20.0, 20.0 + ar.0, ar.1),
                ],
            )
            .unwrap()
        };
        let good = ((400.0, 12.0), (300.0, 8.5), (35.0, 9.5));
        let v = judge(good.0, good.1, good.2);
        assert_eq!(v.reproduced, Some(true), "{v}");
        // A lower bound alone reads as such, in the text and the files' cells.
        assert!(v.because.contains("at least 100 ms: within"), "{v}");
        let bloat = &v.comparison[3];
        assert_eq!(bloat.band, Some((Some(100.0), f64::INFINITY)), "{bloat:?}");
        assert!(v.table.contains("no shaper"), "{v}");
        assert!(v.table.contains("76 %"), "{v}");
        // No shaper not bloated; or not using the line; or more than the line.
        for none in [(40.0, 12.0), (400.0, 8.0), (400.0, 14.5)] {
            let v = judge(none, good.1, good.2);
            assert_eq!(v.reproduced, Some(false), "{none:?}: {v}");
        }
        // Static not bloated; or carrying more than its rate lets it; or less than the low rate.
        for stat in [(30.0, 8.5), (300.0, 11.0), (300.0, 4.0)] {
            let v = judge(good.0, stat, good.2);
            assert_eq!(v.reproduced, Some(false), "{stat:?}: {v}");
        }
        // Autorate bloated (over 30 + 20 ms), or starving the line (under 70 %).
        for ar in [(55.0, 9.5), (35.0, 8.0), (35.0, 14.5)] {
            let v = judge(good.0, good.1, ar);
            assert_eq!(v.reproduced, Some(false), "{ar:?}: {v}");
            assert!(v.to_string().contains("NOT REPRODUCED"), "{v}");
        }
        // An arm without runs: not judged.
        let v = check(&e, &[row("no shaper", 20.0, 420.0, 12.0)]).unwrap();
        assert_eq!(v.reproduced, None, "{v}");
    }
}
