//! Report 1's check: near-congestion weight 0.4 vs 0, write-to-read latency of one cubic flow.

use super::band::{self, Effect};
use super::{Experiment, Row, Table, expect_f, mean};
use std::fmt::Write as _;

/// The flow whose latency the report measured (the client's one stream).
const FLOW: &str = "tcp_up_1";

/// A lab rate (`1gbit`, `100mbit`, `500kbit`) in Mbit/s.
fn mbit_of(rate: &str) -> Option<f64> {
    let (num, scale) = [("gbit", 1e3), ("mbit", 1.0), ("kbit", 1e-3)]
        .iter()
        .find_map(|(u, k)| rate.strip_suffix(u).map(|n| (n, *k)))?;
    Some(num.parse::<f64>().ok()? * scale)
}

/// Writes report / ours per weight into `t`; returns the verdict and its numbers.
pub(super) fn judge(exp: &Experiment, rows: &[Row], t: &mut Table) -> (Option<bool>, String) {
    let col = |w: &str, c: &str| mean(rows, "weight", w, c);
    let mbit = |w: &str| col(w, "tput.loaded.up_mbit");
    let w2r = |w: &str| col(w, &format!("lat.{FLOW}.owd_up.loaded.mean_ms"));
    let _ = writeln!(
        t,
        "{:<8}{:>20}{:>26}{:>24}{:>22}",
        "weight", "Mbit/s", "write-to-read mean ms", "inP", "NetPwr (client)"
    );
    let _ = writeln!(
        t,
        "{:<8}{:>20}{:>26}{:>24}{:>22}",
        "", "report / ours", "report / ours", "report / ours", "report / ours"
    );
    // inP in the unit the report's server line printed it: 408 KByte at weight 0.4, 3.37
    // MByte at weight 0 (iperf's K and M are 2^10 and 2^20).
    for (w, key, (inp_unit, inp_scale, inp_digits)) in [
        ("0.4", "04", ("KByte", 1024.0, 0)),
        ("0", "0", ("MByte", 1024.0 * 1024.0, 2)),
    ] {
        let rep = |k: &str| expect_f(exp, &format!("report_{key}_{k}"));
        let inp_key = format!("inp_{}", inp_unit.to_lowercase());
        let inp = col(w, &format!("w2r.{FLOW}.inp_bytes")).map(|b| b / inp_scale);
        let netpwr = col(w, &format!("tcp.{FLOW}.netpwr"));
        let cell = |k: &str, ours: Option<f64>, digits: usize| {
            let ours = ours.map_or("-".into(), |v| format!("{v:.*}", digits.min(1)));
            format!("{:.*} / {ours}", digits, rep(k))
        };
        let _ = writeln!(
            t,
            "{w:<8}{:>20}{:>26}{:>24}{:>22}",
            cell("mbit", mbit(w), 0),
            cell("w2r_ms", w2r(w), 2),
            format!(
                "{:.*} / {} {inp_unit}",
                inp_digits,
                rep(&inp_key),
                inp.map_or("-".into(), |v| format!("{v:.*}", inp_digits))
            ),
            cell("netpwr", netpwr, 0),
        );
        let q = |what: &str| format!("weight {w}: {what}");
        t.compare(
            q("throughput"),
            "the client's 0-10 s summary",
            "Mbit/s",
            rep("mbit"),
            mbit(w),
        );
        t.compare(
            q("write-to-read latency"),
            "mean (the server's summary)",
            "ms",
            rep("w2r_ms"),
            w2r(w),
        );
        t.compare(
            q("inP"),
            "the server's summary",
            inp_unit,
            rep(&inp_key),
            inp,
        );
        t.compare(
            q("NetPwr"),
            "the client's summary (-e)",
            "",
            rep("netpwr"),
            netpwr,
        );
    }
    // The lab's rate, so the output says what the report's GigE became here.
    let rate = exp
        .lab
        .iter()
        .find(|o| o.key == "rate")
        .and_then(|o| o.values.first())
        .map_or("?".into(), ToString::to_string);
    let _ = writeln!(
        t,
        "lab: {rate} FIFO (the report: wired GigE); inP and NetPwr scale with the rate"
    );
    // A lab that did not carry the report's rate (a loaded machine's emulator falls behind at
    // 1 Gbit/s) is not the report's setup: say so beside the verdict.
    if let (Some(cap), Some(m0)) = (mbit_of(&rate), mbit("0"))
        && m0 < 0.9 * cap
    {
        let _ = writeln!(
            t,
            "note: weight 0 moved {m0:.0} Mbit/s through the {rate} lab: the emulator did not \
             sustain the report's rate (CPU load?), so the throughput comparison is not the report's"
        );
    }
    let report_ratio = expect_f(exp, "report_0_w2r_ms") / expect_f(exp, "report_04_w2r_ms");
    let report_share = expect_f(exp, "report_04_mbit") / expect_f(exp, "report_0_mbit");
    let ratio = match (w2r("0.4"), w2r("0")) {
        (Some(l4), Some(l0)) if l4 > 0.0 => Some(l0 / l4),
        _ => None,
    };
    let share = match (mbit("0.4"), mbit("0")) {
        (Some(m4), Some(m0)) if m0 > 0.0 => Some(m4 / m0),
        _ => None,
    };
    let share = host_took(share, col("0.4", &format!("pace.{FLOW}.late_share")), t);
    band::judge(
        &[
            Effect::factor2(
                "mean write-to-read latency, weight 0 / weight 0.4",
                report_ratio,
                ratio,
                "x",
            )
            .of("mean"),
            // "About 1 % of throughput traded": within 10 % either way (a ratio near 1, where a
            // factor of 2 would mean nothing).
            Effect::band(
                "throughput, weight 0.4 / weight 0",
                report_share,
                (SHARE_LO, 1.1),
                share,
                "",
            )
            .of("the client's 0-10 s summary"),
        ],
        t,
    )
}

/// The lowest throughput ratio, weight 0.4 / weight 0, that reproduces the report.
const SHARE_LO: f64 = 0.9;

/// Weight 0.4's throughput ratio, or `None` (not judged) when it fell short of the band by no
/// more than the host took: weight 0.4 pauses ~1 ms after each 128 KByte write, so every
/// wake-up the host delays is time the sender did not send (at most `late_share` of its run,
/// `pace.FLOW.late_share`). On a busy host that alone took 20 % (issue 18: 0.80 with the
/// emulator on time), which is the host's finding, not the report's; a shortfall larger than
/// the lateness explains is still judged (TOO SMALL). Says which beside the table.
fn host_took(share: Option<f64>, late_share: Option<f64>, t: &mut Table) -> Option<f64> {
    let (Some(s), Some(late)) = (share, late_share) else {
        return share;
    };
    if s >= SHARE_LO || !(0.0..1.0).contains(&late) {
        return share;
    }
    // What weight 0.4 would have moved had every pause ended on time (the link idle for
    // the whole lateness: the most the host can have taken).
    let on_time = s / (1.0 - late);
    if on_time < SHARE_LO {
        let _ = writeln!(
            t,
            "note: weight 0.4's sender woke {:.1} % of its run late from its pauses; even \
             without that its throughput would be {on_time:.2} of weight 0's: judged",
            late * 100.0
        );
        return share;
    }
    let _ = writeln!(
        t,
        "note: weight 0.4's sender woke {:.1} % of its run late from its near-congestion \
         pauses (a busy host), enough to explain its throughput of {s:.2} of weight 0's \
         (at most {on_time:.2} had every pause ended on time): the throughput is not \
         judged; run it on a quiet machine (docs/experiments.md)",
        late * 100.0
    );
    None
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
    fn report1_judges_the_latency_ratio_both_ways() {
        let e = crate::parse("r1", "r1", get("report1-near-congestion").unwrap()).unwrap();
        // The 1 Gbit/s lab's numbers: 2.7 vs 29.2 ms, 947.7 vs 959.4 Mbit/s (10.8x).
        let yes = check(&e, &[row("0.4", 947.7, 2.7), row("0", 959.4, 29.2)]).unwrap();
        assert_eq!(yes.reproduced, Some(true), "{yes}");
        let text = yes.to_string();
        // The report's numbers beside ours, and the lab's rate.
        for want in [
            "934 / 948",
            "3.58 / 2.7",
            "30.00 / 29.2",
            "34322 / 4248",
            "408 / 40",
            "lab: 1gbit FIFO (the report: wired GigE)",
            "ours 10.8x, report 8.38x, band 4.19x..16.8x: within",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }
        // The 100 Mbit/s lab's 43x: too large.
        let big = check(&e, &[row("0.4", 94.0, 2.85), row("0", 97.5, 123.3)]).unwrap();
        assert_eq!(big.reproduced, Some(false), "{big}");
        assert!(big.because.contains("TOO LARGE"), "{big}");
        // Latency only 3x lower: too small.
        let small = check(&e, &[row("0.4", 940.0, 10.0), row("0", 950.0, 30.0)]).unwrap();
        assert_eq!(small.reproduced, Some(false), "{small}");
        assert!(small.because.contains("TOO SMALL"), "{small}");
        assert!(!text.contains("note:"), "{text}");
        // A loaded machine's lab at 667 / 816 Mbit/s: not the report's rate, and said so.
        let slow_lab = check(&e, &[row("0.4", 667.0, 5.7), row("0", 816.0, 45.3)]).unwrap();
        assert_eq!(slow_lab.reproduced, Some(false), "{slow_lab}");
        assert!(
            slow_lab
                .table
                .contains("weight 0 moved 816 Mbit/s through the 1gbit lab"),
            "{slow_lab}"
        );
        // Latency cut, but 20 % of the throughput given up: not reproduced either.
        let slow = check(&e, &[row("0.4", 760.0, 2.9), row("0", 950.0, 29.0)]).unwrap();
        assert_eq!(slow.reproduced, Some(false), "{slow}");
        // A weight without runs: not judged.
        let none = check(&e, &[row("0.4", 940.0, 2.9)]).unwrap();
        assert_eq!(none.reproduced, None, "{none}");
    }

    /// Weight 0.4's row with its sender's late wake-ups (`pace.tcp_up_1.late_share`).
    fn paced(mbit: f64, w2r_ms: f64, late_share: f64) -> Row {
        let mut r = row("0.4", mbit, w2r_ms);
        r.cells
            .push(("pace.tcp_up_1.late_share".into(), late_share.into()));
        r
    }

    #[test]
    fn report1_does_not_blame_near_congestion_for_what_a_busy_host_took() {
        let e = crate::parse("r1", "r1", get("report1-near-congestion").unwrap()).unwrap();
        // The busy host of 6 December: 756.0 vs 946.1 Mbit/s (0.80), 6.2 vs 39.2 ms, the
        // emulator on time. Had weight 0.4's sender woken 25 % of its run late, the host
        // alone can have taken the 20 %: not judged, and said why.
        let host = check(&e, &[paced(756.0, 6.2, 0.25), row("0", 946.1, 39.2)]).unwrap();
        assert_eq!(host.reproduced, None, "{host}");
        assert!(
            host.table.contains("woke 25.0 % of its run late")
                && host.table.contains("the throughput is not judged"),
            "{host}"
        );
        // Woken 3 % late: at most 0.82 on time, still short: judged, TOO SMALL.
        let short = check(&e, &[paced(756.0, 6.2, 0.03), row("0", 946.1, 39.2)]).unwrap();
        assert_eq!(short.reproduced, Some(false), "{short}");
        assert!(short.because.contains("TOO SMALL"), "{short}");
        assert!(
            short
                .table
                .contains("its throughput would be 0.82 of weight 0's: judged"),
            "{short}"
        );
        // Within the band, lateness changes nothing (a quiet machine's few percent).
        let quiet = check(&e, &[paced(947.7, 2.7, 0.04), row("0", 959.4, 29.2)]).unwrap();
        assert_eq!(quiet.reproduced, Some(true), "{quiet}");
        assert!(!quiet.table.contains("note:"), "{quiet}");
        // The latency ratio is still judged on a busy host: 3x is TOO SMALL (the verdict
        // stays not judged while the throughput is, as for any effect not judged).
        let lat = check(&e, &[paced(756.0, 13.0, 0.25), row("0", 946.1, 39.2)]).unwrap();
        assert_eq!(lat.reproduced, None, "{lat}");
        assert!(lat.because.contains("TOO SMALL"), "{lat}");
    }
}
