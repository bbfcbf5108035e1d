//! Report 1's check: near-congestion weight 0.4 vs 0, write-to-read latency of one cubic flow.

use super::{Experiment, Row, expect_f, f1, mean};
use std::fmt::Write as _;

/// The flow whose latency the report measured (the client's one stream).
const FLOW: &str = "tcp_up_1";

/// Writes report / ours per weight into `t`; returns the verdict and its numbers.
pub(super) fn judge(exp: &Experiment, rows: &[Row], t: &mut String) -> (Option<bool>, String) {
    let col = |w: &str, c: &str| mean(rows, "weight", w, c);
    let mbit = |w: &str| col(w, "tput.loaded.up_mbit");
    let w2r = |w: &str| col(w, &format!("lat.{FLOW}.owd_up.loaded.mean_ms"));
    let _ = writeln!(
        t,
        "{:<8}{:>20}{:>26}{:>20}{:>22}",
        "weight", "Mbit/s", "write-to-read mean ms", "inP KByte", "NetPwr (client)"
    );
    let _ = writeln!(
        t,
        "{:<8}{:>20}{:>26}{:>20}{:>22}",
        "", "report / ours", "report / ours", "report / ours", "report / ours"
    );
    for (w, key) in [("0.4", "04"), ("0", "0")] {
        let inp = col(w, &format!("w2r.{FLOW}.inp_bytes")).map(|b| b / 1024.0);
        let cell = |k: &str, ours: Option<f64>, digits: usize| {
            let ours = match ours {
                Some(v) if digits == 0 => format!("{v:.0}"),
                v => f1(v),
            };
            format!(
                "{:.*} / {ours}",
                digits,
                expect_f(exp, &format!("report_{key}_{k}"))
            )
        };
        let _ = writeln!(
            t,
            "{w:<8}{:>20}{:>26}{:>20}{:>22}",
            cell("mbit", mbit(w), 0),
            cell("w2r_ms", w2r(w), 2),
            cell("inp_kbyte", inp, 0),
            cell("netpwr", col(w, &format!("tcp.{FLOW}.netpwr")), 0),
        );
    }
    match (w2r("0.4"), w2r("0"), mbit("0.4"), mbit("0")) {
        (Some(l4), Some(l0), Some(m4), Some(m0)) if l4 > 0.0 && m0 > 0.0 => (
            Some(l0 >= 4.0 * l4 && (m4 - m0).abs() <= 0.1 * m0),
            format!(
                "mean write-to-read latency {l4:.2} ms (weight 0.4) vs {l0:.2} ms (weight 0): {:.1}x lower; throughput {m4:.1} vs {m0:.1} Mbit/s ({:+.1} %)",
                l0 / l4,
                (m4 - m0) / m0 * 100.0
            ),
        ),
        _ => (
            None,
            "no complete run with write-to-read latency for weight 0.4 or 0".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::builtin::{check, get};
    use crate::summary::Row;

    fn row(weight: &str, mbit: f64, w2r_ms: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), weight.into()),
                ("weight".into(), weight.into()),
                ("tput.loaded.up_mbit".into(), mbit.into()),
                ("lat.tcp_up_1.owd_up.loaded.mean_ms".into(), w2r_ms.into()),
                ("w2r.tcp_up_1.inp_bytes".into(), 40960.0.into()),
                ("tcp.tcp_up_1.netpwr".into(), 4248.0.into()),
            ],
        }
    }

    #[test]
    fn report1_verdict_follows_the_numbers() {
        let e = crate::parse("r1", "r1", get("report1-near-congestion").unwrap()).unwrap();
        let yes = check(&e, &[row("0.4", 94.0, 2.9), row("0", 97.5, 122.0)]).unwrap();
        assert_eq!(yes.reproduced, Some(true), "{yes}");
        let text = yes.to_string();
        // The report's numbers beside ours.
        for want in [
            "934 / 94",
            "3.58 / 2.9",
            "30.00 / 122.0",
            "34322 / 4248",
            "408 / 40",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
        assert!(text.contains("42.1x lower"), "{text}");
        // Latency only 3x lower: not reproduced.
        let no = check(&e, &[row("0.4", 94.0, 40.0), row("0", 97.5, 122.0)]).unwrap();
        assert_eq!(no.reproduced, Some(false), "{no}");
        assert!(no.to_string().contains("NOT REPRODUCED"), "{no}");
        // Latency cut, but 20 % of the throughput given up: not reproduced either.
        let slow = check(&e, &[row("0.4", 78.0, 2.9), row("0", 97.5, 122.0)]).unwrap();
        assert_eq!(slow.reproduced, Some(false), "{slow}");
        // A weight without runs: not judged.
        let none = check(&e, &[row("0.4", 94.0, 2.9)]).unwrap();
        assert_eq!(none.reproduced, None, "{none}");
    }
}
