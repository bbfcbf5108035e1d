//! Report 2's check: NetPwr (throughput / RTT) of BBR vs cubic through a bloated uplink.

use super::band::{self, Effect};
use super::{Experiment, Row, Table, expect_f, f1, mean};
use std::fmt::Write as _;

/// Writes report / ours per congestion control into `t`; returns the verdict and its numbers.
/// `lat` names the reference series' column of a statistic and phase.
pub(super) fn judge(
    exp: &Experiment,
    rows: &[Row],
    lat: &dyn Fn(&str, &str) -> String,
    t: &mut Table,
) -> (Option<bool>, String) {
    let mbit = |cc: &str| mean(rows, "test.cc", cc, "tput.loaded.up_mbit");
    let rtt = |cc: &str| mean(rows, "test.cc", cc, &lat("median", "loaded"));
    let netpwr = |cc: &str| {
        let bps = mbit(cc)? * 1e6 / 8.0;
        let rtt_us = rtt(cc)? * 1e3;
        (rtt_us > 0.0).then(|| bps / rtt_us)
    };
    let _ = writeln!(
        t,
        "{:<8}{:>16}{:>12}{:>16}{:>12}{:>12}",
        "cc", "report NetPwr", "ours", "report RTT ms", "ours", "Mbit/s"
    );
    for cc in ["cubic", "bbr"] {
        let (rep_netpwr, rep_rtt) = (
            expect_f(exp, &format!("report_{cc}_netpwr")),
            expect_f(exp, &format!("report_{cc}_rtt_ms")),
        );
        let _ = writeln!(
            t,
            "{cc:<8}{:>16.2}{:>12}{:>16}{:>12}{:>12}",
            rep_netpwr,
            f1(netpwr(cc)),
            format!("~{rep_rtt:.0}"),
            f1(rtt(cc)),
            f1(mbit(cc)),
        );
        t.compare(
            format!("{cc}: NetPwr"),
            "report: the client's summary (bytes/s over TCP's RTT in us); ours: loaded bytes/s over the loaded median probe RTT",
            "",
            rep_netpwr,
            netpwr(cc),
        );
        t.compare(
            format!("{cc}: RTT"),
            "report: ~, TCP's smoothed RTT; ours: loaded median probe RTT",
            "ms",
            rep_rtt,
            rtt(cc),
        );
    }
    let _ = writeln!(
        t,
        "(report: TCP's RTT from TCP_INFO, ~10 s; ours: the median probe RTT under load)"
    );
    let ratio = match (netpwr("bbr"), netpwr("cubic")) {
        (Some(b), Some(c)) if c > 0.0 => Some(b / c),
        _ => None,
    };
    let share = match (mbit("bbr"), mbit("cubic")) {
        (Some(b), Some(c)) if c > 0.0 => Some(b / c),
        _ => None,
    };
    band::judge(
        &[
            Effect::factor2(
                "NetPwr, bbr / cubic",
                expect_f(exp, "report_bbr_netpwr") / expect_f(exp, "report_cubic_netpwr"),
                ratio,
                "x",
            )
            .of("NetPwr as the table's"),
            // "Same throughput": within 20 % either way.
            Effect::band("throughput, bbr / cubic", 1.0, (0.8, 1.2), share, "")
                .of("report: \"same throughput\"; ours: loaded mean"),
        ],
        t,
    )
}

#[cfg(test)]
mod tests {
    use crate::builtin::{check, get};
    use crate::summary::Row;

    fn row(cc: &str, mbit: f64, rtt_ms: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), cc.into()),
                ("test.cc".into(), cc.into()),
                ("tput.loaded.up_mbit".into(), mbit.into()),
                ("lat.udp_be.rtt.loaded.median_ms".into(), rtt_ms.into()),
            ],
        }
    }

    #[test]
    fn report2_judges_the_netpwr_ratio_both_ways() {
        let e = crate::parse("r2", "r2", get("report2-netpwr").unwrap()).unwrap();
        // NetPwr = bytes/s / RTT us: 12.5 Mbit/s at 217 ms is 7.2, at 29 ms 53.9 (7.5x).
        let v = check(&e, &[row("cubic", 12.5, 217.0), row("bbr", 12.5, 29.0)]).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        assert!(v.table.contains("7.56") && v.table.contains("55.36"), "{v}");
        assert!(v.because.contains("report 7.32x"), "{v}");
        // 2x only: too small.
        let v = check(&e, &[row("cubic", 12.5, 60.0), row("bbr", 12.5, 30.0)]).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO SMALL"), "{v}");
        // 40x: too large.
        let v = check(&e, &[row("cubic", 12.5, 1200.0), row("bbr", 12.5, 30.0)]).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("TOO LARGE"), "{v}");
        // The ratio right, but BBR at 60 % of cubic's throughput.
        let v = check(&e, &[row("cubic", 12.5, 217.0), row("bbr", 7.5, 20.0)]).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        // No bbr run: not judged.
        assert_eq!(
            check(&e, &[row("cubic", 12.5, 217.0)]).unwrap().reproduced,
            None
        );
    }
}
