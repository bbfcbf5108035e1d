//! The field reports (each quoted in its experiment file; `docs/experiments.md`) as built-in
//! experiments. Each is an ordinary experiment file (`src/builtin/*.toml`, `experiment run NAME`) whose `[expect]`
//! states the report's qualitative result as `criterion` and carries the report's numbers;
//! [`check`] measures that criterion on the summary rows and prints the report's numbers beside
//! ours.

mod report1;

use crate::file::{Experiment, Scalar};
use crate::summary::{self, Row};
use std::fmt::Write as _;

/// `(name, file text)` of every built-in.
pub const BUILTINS: &[(&str, &str)] = &[
    (
        "report1-near-congestion",
        include_str!("builtin/report1-near-congestion.toml"),
    ),
    (
        "report2-netpwr",
        include_str!("builtin/report2-netpwr.toml"),
    ),
    ("report3-ecn", include_str!("builtin/report3-ecn.toml")),
    (
        "report4-sqm-sweep",
        include_str!("builtin/report4-sqm-sweep.toml"),
    ),
    (
        "report5-directions",
        include_str!("builtin/report5-directions.toml"),
    ),
];

/// The file text of built-in `name`.
pub fn get(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The built-in named `name` or by its short name (`report1` for
/// `report1-near-congestion`): its full name and file text.
pub fn resolve(name: &str) -> Option<(&'static str, &'static str)> {
    BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .or_else(|| {
            BUILTINS
                .iter()
                .find(|(n, _)| n.split_once('-').is_some_and(|(short, _)| short == name))
        })
        .copied()
}

/// One quantity of the report beside ours, for the files (`summary.json`'s `verdict`).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Compared {
    /// What is compared, e.g. `induced latency, upload side` or `NetPwr bbr`.
    pub quantity: String,
    /// The statistic, named as the report names it (`median`, `max`, `mean`, ...).
    pub statistic: String,
    /// Unit of both numbers (`ms`, `Mbit/s`, `MiB`, ...).
    pub unit: String,
    /// The report's number, quoted exactly.
    pub report: Option<f64>,
    /// Ours (`None`: not measured).
    pub ours: Option<f64>,
}

/// The outcome of a built-in's check: what the check fills. Completeness is not its
/// business: [`crate::verdict::judge`] adds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The report's numbers beside ours, as a text table.
    pub table: String,
    /// The same comparison, one entry per quantity.
    pub comparison: Vec<Compared>,
    /// The criterion, as the file states it.
    pub criterion: String,
    /// Whether our numbers meet it (`None`: not enough complete runs to judge).
    pub reproduced: Option<bool>,
    /// Why, in numbers.
    pub because: String,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.table)?;
        writeln!(f, "criterion: {}", self.criterion)?;
        let word = match self.reproduced {
            Some(true) => "REPRODUCED",
            Some(false) => "NOT REPRODUCED",
            None => "NOT JUDGED (runs missing)",
        };
        writeln!(f, "{word}: {}", self.because)
    }
}

fn expect_f(exp: &Experiment, k: &str) -> f64 {
    match exp.expect.get(k).map(|(v, _)| v) {
        Some(Scalar::Int(i)) => *i as f64,
        Some(Scalar::Float(x)) => *x,
        _ => f64::NAN,
    }
}

/// Mean of `column` over the rows whose parameter `param` has the text `value`.
fn mean(rows: &[Row], param: &str, value: &str, column: &str) -> Option<f64> {
    let v: Vec<f64> = rows
        .iter()
        .filter(|r| {
            r.get(param).map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            }) == Some(value.to_string())
        })
        .filter_map(|r| r.get(column).and_then(|x| x.as_f64()))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Sum over the row's columns matching `prefix*suffix`.
fn sum_cols(r: &Row, prefix: &str, suffix: &str) -> f64 {
    r.cells
        .iter()
        .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(suffix))
        .filter_map(|(_, v)| v.as_f64())
        .sum()
}

/// Whether `value` is one of matrix parameter `param`'s values (a `[quick]` subset may have
/// left it out: such points are not judged).
fn in_matrix(exp: &Experiment, param: &str, value: &str) -> bool {
    exp.matrix
        .iter()
        .find(|p| p.name == param)
        .is_some_and(|p| p.values.iter().any(|v| v.to_string() == value))
}

fn f1(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Checks built-in `exp` against `rows`. `None` for an experiment that is not a built-in.
pub fn check(exp: &Experiment, rows: &[Row]) -> Option<Verdict> {
    let criterion = match exp.expect.get("criterion") {
        Some((Scalar::Str(s), _)) => s.clone(),
        _ => String::new(),
    };
    let series = summary::reference_series(rows).unwrap_or_else(|| "udp_be.rtt".into());
    let lat = |stat: &str, phase: &str| format!("lat.{series}.{phase}.{stat}_ms");
    let mut t = String::new();
    let (reproduced, because) = match exp.name.as_str() {
        "report1-near-congestion" => report1::judge(exp, rows, &mut t),
        "report2-netpwr" => {
            let netpwr = |cc: &str| {
                let bps = mean(rows, "test.cc", cc, "tput.loaded.up_mbit")? * 1e6 / 8.0;
                let rtt_us = mean(rows, "test.cc", cc, &lat("median", "loaded"))? * 1e3;
                Some(bps / rtt_us)
            };
            let _ = writeln!(
                t,
                "{:<8}{:>16}{:>12}{:>16}{:>12}{:>12}",
                "cc", "report NetPwr", "ours", "report RTT ms", "ours", "Mbit/s"
            );
            for cc in ["cubic", "bbr"] {
                let _ = writeln!(
                    t,
                    "{cc:<8}{:>16.2}{:>12}{:>16.0}{:>12}{:>12}",
                    expect_f(exp, &format!("report_{cc}_netpwr")),
                    f1(netpwr(cc)),
                    expect_f(exp, &format!("report_{cc}_rtt_ms")),
                    f1(mean(rows, "test.cc", cc, &lat("median", "loaded"))),
                    f1(mean(rows, "test.cc", cc, "tput.loaded.up_mbit")),
                );
            }
            match (
                netpwr("cubic"),
                netpwr("bbr"),
                mean(rows, "test.cc", "cubic", "tput.loaded.up_mbit"),
                mean(rows, "test.cc", "bbr", "tput.loaded.up_mbit"),
            ) {
                (Some(c), Some(b), Some(tc), Some(tb)) => (
                    Some(b >= 2.0 * c && (tb - tc).abs() <= 0.2 * tc),
                    format!(
                        "NetPwr bbr {b:.1} vs cubic {c:.1} ({:.1}x), throughput {tb:.2} vs {tc:.2} Mbit/s",
                        b / c
                    ),
                ),
                _ => (None, "no complete run for cubic or bbr".into()),
            }
        }
        "report3-ecn" => {
            let mut ok = Some(true);
            let mut why = Vec::new();
            let _ = writeln!(
                t,
                "{:<15}{:<5}{:>12}{:>12}{:>10}{:>10}",
                "test", "ECN", "report MB", "ours MB", "CE marks", "drops"
            );
            for load in ["one_vs_one", "one_vs_pulses"] {
                if !in_matrix(exp, "load", load) {
                    continue;
                }
                let mut mb = [None, None];
                for (i, ecn) in ["false", "all"].iter().enumerate() {
                    let r = rows.iter().find(|r| {
                        r.get("load").and_then(|v| v.as_str()) == Some(load)
                            && r.get("lab.ecn").map(|v| match v {
                                serde_json::Value::String(s) => s.clone(),
                                v => v.to_string(),
                            }) == Some(ecn.to_string())
                    });
                    let Some(r) = r else {
                        ok = None;
                        continue;
                    };
                    // One vs one: both flows; one vs pulses: the long flow (the largest).
                    let total = sum_cols(r, "tput.loaded.", ".bytes") / 1e6;
                    let largest = r
                        .cells
                        .iter()
                        .filter(|(k, _)| k.starts_with("tput.loaded.") && k.ends_with(".bytes"))
                        .filter_map(|(_, v)| v.as_f64())
                        .fold(0.0, f64::max)
                        / 1e6;
                    let ours = if load == "one_vs_one" { total } else { largest };
                    mb[i] = Some(ours);
                    let marks = r
                        .get("emu.up.middlebox.ce_marks")
                        .and_then(|v| v.as_f64())
                        .unwrap_or(0.0);
                    let drops = r
                        .get("emu.up.middlebox.drops")
                        .and_then(|v| v.as_f64())
                        .unwrap_or(0.0);
                    let key = if load == "one_vs_one" {
                        "report_one_vs_one_mb"
                    } else {
                        "report_pulses_long_flow_mb"
                    };
                    let on = i == 1;
                    let _ = writeln!(
                        t,
                        "{load:<15}{:<5}{:>12.1}{:>12.1}{marks:>10}{drops:>10}",
                        if on { "on" } else { "off" },
                        expect_f(exp, &format!("{key}_{}", if on { "on" } else { "off" })),
                        ours
                    );
                    if on && marks == 0.0 {
                        ok = ok.map(|_| false);
                        why.push(format!("{load}: no CE marks with ECN on"));
                    }
                    if !on && (marks > 0.0 || drops == 0.0) {
                        ok = ok.map(|_| false);
                        why.push(format!(
                            "{load}: ECN off marked {marks} and dropped {drops}"
                        ));
                    }
                }
                if let [Some(a), Some(b)] = mb
                    && (a - b).abs() > 0.15 * a.max(b)
                {
                    ok = ok.map(|_| false);
                    why.push(format!("{load}: {a:.1} MB off vs {b:.1} MB on"));
                }
            }
            let because = if why.is_empty() {
                "marks only with ECN on, drops only with it off, MB within 15 %".to_string()
            } else {
                why.join("; ")
            };
            (ok, because)
        }
        "report4-sqm-sweep" => {
            let report = [
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
            let report: Vec<_> = report
                .into_iter()
                .filter(|(label, _)| in_matrix(exp, "shaper", label))
                .collect();
            let stats = ["min", "p10", "mean", "median", "p90", "max"];
            let _ = writeln!(t, "RRUL latency under load (ms), report / ours:");
            let _ = writeln!(
                t,
                "{:<18}{:>14}{:>14}{:>16}{:>16}{:>16}{:>16}{:>12}",
                "rate", "min", "10pct", "avg", "median", "90pct", "max", "pings"
            );
            for &(label, rep) in &report {
                let mut line = format!("{label:<18}");
                for (i, s) in stats.iter().enumerate() {
                    let _ = write!(
                        line,
                        "{:>16}",
                        format!(
                            "{:.1} / {}",
                            rep[i],
                            f1(mean(rows, "shaper", label, &lat(s, "loaded")))
                        )
                    );
                }
                let count = rows
                    .iter()
                    .find(|r| r.get("shaper").and_then(|v| v.as_str()) == Some(label))
                    .and_then(|r| {
                        r.get(&format!("lat.{series}.loaded.count"))
                            .and_then(|v| v.as_u64())
                    });
                let _ = write!(
                    line,
                    "{:>12}",
                    format!(
                        "{:.0} / {}",
                        rep[6],
                        count.map_or("-".into(), |c| c.to_string())
                    )
                );
                let _ = writeln!(t, "{line}");
            }
            let line = expect_f(exp, "line_down_kbit");
            let induced = |label: &str| {
                Some(
                    mean(rows, "shaper", label, &lat("median", "loaded"))?
                        - mean(rows, "shaper", label, &lat("median", "idle"))?,
                )
            };
            let mut ok = Some(true);
            let mut why = Vec::new();
            for &(label, _) in &report {
                let down_kbit: Option<f64> =
                    label.split("kbit").next().and_then(|x| x.parse().ok());
                let Some(d) = induced(label) else {
                    ok = None;
                    continue;
                };
                match down_kbit {
                    Some(k) if k <= 0.92 * line => {
                        if d > 20.0 {
                            ok = ok.map(|_| false);
                        }
                        why.push(format!("{label} +{d:.1} ms"));
                    }
                    None => {
                        if d < 100.0 {
                            ok = ok.map(|_| false);
                        }
                        why.push(format!("{label} +{d:.1} ms"));
                    }
                    Some(_) => why.push(format!("{label} +{d:.1} ms (not judged)")),
                }
            }
            (ok, format!("induced median latency: {}", why.join(", ")))
        }
        "report5-directions" => {
            let induced = |load: &str| {
                Some(
                    mean(rows, "load", load, &lat("median", "loaded"))?
                        - mean(rows, "load", load, &lat("median", "idle"))?,
                )
            };
            let _ = writeln!(
                t,
                "{:<30}{:>14}{:>14}",
                "ping under load from", "report ms", "ours ms"
            );
            for (load, what, key) in [
                (
                    "tcp_upload",
                    "the bloated side (upload)",
                    "report_bloated_ms",
                ),
                (
                    "tcp_download",
                    "the debloated side (download)",
                    "report_debloated_ms",
                ),
            ] {
                let _ = writeln!(
                    t,
                    "{what:<30}{:>14.1}{:>14}",
                    expect_f(exp, key),
                    f1(mean(rows, "load", load, &lat("median", "loaded")))
                );
            }
            match (induced("tcp_upload"), induced("tcp_download")) {
                (Some(b), Some(d)) => (
                    Some(b > 50.0 && d <= 10.0),
                    format!(
                        "induced median latency: bloated side +{b:.1} ms, debloated side +{d:.1} ms"
                    ),
                ),
                _ => (None, "a direction has no complete run".into()),
            }
        }
        _ => return None,
    };
    Some(Verdict {
        table: t,
        comparison: Vec::new(),
        criterion,
        reproduced,
        because,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_states_a_criterion() {
        for (name, text) in BUILTINS {
            let e = crate::parse(&format!("<built-in {name}>"), name, text).unwrap();
            assert_eq!(e.name, *name);
            assert!(
                matches!(e.expect.get("criterion"), Some((Scalar::Str(s), _)) if !s.is_empty()),
                "{name}"
            );
            assert!(check(&e, &[]).is_some(), "{name}");
            assert_eq!(
                check(&e, &[]).unwrap().reproduced,
                None,
                "{name}: judged without runs"
            );
        }
        assert!(get("report4-sqm-sweep").is_some());
        assert!(get("nope").is_none());
    }

    #[test]
    fn builtins_are_found_by_their_short_names() {
        assert_eq!(
            resolve("report1").map(|b| b.0),
            Some("report1-near-congestion")
        );
        assert_eq!(resolve("report4").map(|b| b.0), Some("report4-sqm-sweep"));
        assert_eq!(resolve("report3-ecn").map(|b| b.0), Some("report3-ecn"));
        assert!(resolve("report").is_none());
        assert!(resolve("report9").is_none());
    }

    fn row(param: &str, value: &str, idle: f64, loaded: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), value.into()),
                (param.into(), value.into()),
                ("lat.udp_be.rtt.idle.median_ms".into(), idle.into()),
                ("lat.udp_be.rtt.loaded.median_ms".into(), loaded.into()),
            ],
        }
    }

    #[test]
    fn report5_verdict_follows_the_numbers() {
        let e = crate::parse("r5", "r5", get("report5-directions").unwrap()).unwrap();
        let yes = check(
            &e,
            &[
                row("load", "tcp_upload", 2.0, 150.0),
                row("load", "tcp_download", 2.0, 4.0),
            ],
        )
        .unwrap();
        assert_eq!(yes.reproduced, Some(true), "{yes}");
        assert!(yes.to_string().contains("REPRODUCED"));
        let no = check(
            &e,
            &[
                row("load", "tcp_upload", 2.0, 20.0),
                row("load", "tcp_download", 2.0, 4.0),
            ],
        )
        .unwrap();
        assert_eq!(no.reproduced, Some(false), "{no}");
        assert!(no.to_string().contains("NOT REPRODUCED"));
    }

    #[test]
    fn reports_2_to_5_have_a_quick_variant_with_fewer_or_as_many_runs() {
        for name in [
            "report2-netpwr",
            "report3-ecn",
            "report4-sqm-sweep",
            "report5-directions",
        ] {
            let e = crate::parse(name, name, get(name).unwrap()).unwrap();
            assert!(e.quick.is_some(), "{name}: no [quick]");
            let full = crate::matrix::point_count(&e) * e.repetitions as usize;
            let q = e.quick();
            assert!(crate::matrix::point_count(&q) * q.repetitions as usize <= full);
            assert!(check(&q, &[]).is_some(), "{name}");
        }
    }

    fn ecn_row(ecn: &str, mb: [f64; 2], marks: f64, drops: f64) -> Row {
        Row {
            cells: vec![
                ("load".into(), "one_vs_one".into()),
                ("lab.ecn".into(), ecn.into()),
                ("tput.loaded.tcp_up_1.bytes".into(), (mb[0] * 1e6).into()),
                ("tput.loaded.tcp_up_2.bytes".into(), (mb[1] * 1e6).into()),
                ("emu.up.middlebox.ce_marks".into(), marks.into()),
                ("emu.up.middlebox.drops".into(), drops.into()),
            ],
        }
    }

    #[test]
    fn report3_quick_judges_only_its_points() {
        let e = crate::parse("r3", "r3", get("report3-ecn").unwrap()).unwrap();
        let rows = [
            ecn_row("false", [12.9, 12.7], 0.0, 37.0),
            ecn_row("all", [12.6, 12.7], 28.0, 0.0),
        ];
        // The full experiment misses its one vs pulses runs: not judged.
        assert_eq!(check(&e, &rows).unwrap().reproduced, None);
        // The quick variant runs one vs one only: judged on it, both ways.
        let q = e.quick();
        let v = check(&q, &rows).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        assert!(!v.table.contains("one_vs_pulses"), "{v}");
        let fewer = [rows[0].clone(), ecn_row("all", [9.0, 9.0], 28.0, 0.0)];
        let v = check(&q, &fewer).unwrap();
        assert_eq!(v.reproduced, Some(false), "{v}");
        assert!(v.because.contains("25.6 MB off vs 18.0 MB on"), "{v}");
        let unmarked = [rows[0].clone(), ecn_row("all", [12.6, 12.7], 0.0, 30.0)];
        assert_eq!(check(&q, &unmarked).unwrap().reproduced, Some(false));
    }

    #[test]
    fn report4_quick_judges_only_its_two_ends() {
        let e = crate::parse("r4", "r4", get("report4-sqm-sweep").unwrap()).unwrap();
        let ends = [
            row("shaper", "6089kbit/737kbit", 30.0, 31.0),
            row("shaper", "SQM off", 30.0, 2000.0),
        ];
        assert_eq!(check(&e, &ends).unwrap().reproduced, None, "points missing");
        let v = check(&e.quick(), &ends).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        assert!(!v.table.contains("7000kbit"), "{v}");
    }

    #[test]
    fn report4_judges_rates_up_to_92_percent_and_sqm_off() {
        let e = crate::parse("r4", "r4", get("report4-sqm-sweep").unwrap()).unwrap();
        let mut rows: Vec<Row> = ["6089kbit/737kbit", "6400kbit/800kbit", "7000kbit/830kbit"]
            .iter()
            .map(|l| row("shaper", l, 30.0, 45.0))
            .collect();
        rows.push(row("shaper", "7600kbit/850kbit", 30.0, 300.0));
        rows.push(row("shaper", "SQM off", 30.0, 2000.0));
        let v = check(&e, &rows).unwrap();
        assert_eq!(v.reproduced, Some(true), "{v}");
        rows[2] = row("shaper", "7000kbit/830kbit", 30.0, 60.0);
        assert_eq!(check(&e, &rows).unwrap().reproduced, Some(false));
    }
}
