//! The field reports (each quoted in its experiment file; `docs/experiments.md`) as built-in
//! experiments. Each is an ordinary experiment file (`src/builtin/*.toml`, `experiment run NAME`) whose `[expect]`
//! states the report's result as `criterion` and carries the report's numbers; [`check`]
//! measures the report's effects on the summary rows, each within a band around the report's
//! (`band`: an effect too small and one too large are both NOT REPRODUCED), and prints the
//! report's numbers beside ours (one module per report).

mod band;
mod report1;
mod report2;
mod report3;
mod report4;
mod report5;
pub mod variable_link;
pub mod variable_link_plot;

use crate::file::{Experiment, Scalar};
use crate::summary::{self, Row};

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
    ("variable-link", include_str!("builtin/variable-link.toml")),
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

/// One quantity of the report beside ours, for the files (`summary.json`'s `verdict`,
/// `verdict.txt`, the HTML's verdict block): a number the report printed beside ours, or an
/// effect the verdict judges (then with its band and whether ours is within it).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Compared {
    /// What is compared, e.g. `6089kbit/737kbit: RRUL ping` or `NetPwr, bbr / cubic`.
    pub quantity: String,
    /// The statistic, named as the report names it (`median`, `max`, `mean`, ...), and ours
    /// where it differs.
    pub statistic: String,
    /// Unit of both numbers (`ms`, `Mbit/s`, `MiB`; empty for a ratio).
    pub unit: String,
    /// The report's number, quoted exactly (or, for an effect, computed from its numbers).
    pub report: Option<f64>,
    /// Ours (`None`: not measured).
    pub ours: Option<f64>,
    /// For a judged effect: the band `[lo, hi]` ours must fall in (`lo` null: at most
    /// `hi`); `None` for a number shown but not judged by itself.
    pub band: Option<(Option<f64>, f64)>,
    /// For a judged effect: `within`, `too_small`, `too_large` or `not_measured`.
    pub fit: Option<String>,
    /// For a judged effect: whether ours is within the band (`None`: not measured).
    pub pass: Option<bool>,
}

/// What a check writes: the report's numbers beside ours as text (it is a [`std::fmt::Write`],
/// so `writeln!` goes to the text) and, entry by entry, as [`Compared`].
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// The text table.
    pub text: String,
    /// The same numbers, and the judged effects ([`band::judge`] adds them).
    pub comparison: Vec<Compared>,
}

impl std::fmt::Write for Table {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

impl Table {
    /// Records a number of the report beside ours (shown, not judged by itself).
    fn compare(
        &mut self,
        quantity: impl Into<String>,
        statistic: impl Into<String>,
        unit: &str,
        report: f64,
        ours: Option<f64>,
    ) {
        self.comparison.push(Compared {
            quantity: quantity.into(),
            statistic: statistic.into(),
            unit: unit.to_string(),
            report: report.is_finite().then_some(report),
            ours: ours.filter(|v| v.is_finite()),
            ..Compared::default()
        });
    }
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
            None => "NOT JUDGED (an effect not measured: runs missing, or a note above says why)",
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
    let mut t = Table::default();
    let (reproduced, because) = match exp.name.as_str() {
        "report1-near-congestion" => report1::judge(exp, rows, &mut t),
        "report2-netpwr" => report2::judge(exp, rows, &lat, &mut t),
        "report3-ecn" => report3::judge(exp, rows, &mut t),
        "report4-sqm-sweep" => {
            let col = |c: &str| format!("lat.{series}.{c}");
            report4::judge(exp, rows, &col, &mut t)
        }
        "report5-directions" => report5::judge(exp, rows, &lat, &mut t),
        "variable-link" => variable_link::judge(exp, rows, &lat, &mut t),
        _ => return None,
    };
    Some(Verdict {
        table: t.text,
        comparison: t.comparison,
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

    #[test]
    fn reports_2_to_5_have_a_quick_variant_with_fewer_or_as_many_runs() {
        for name in [
            "report2-netpwr",
            "report3-ecn",
            "report4-sqm-sweep",
            "report5-directions",
            "variable-link",
        ] {
            let e = crate::parse(name, name, get(name).unwrap()).unwrap();
            assert!(e.quick.is_some(), "{name}: no [quick]");
            let full = crate::matrix::point_count(&e) * e.repetitions as usize;
            let q = e.quick();
            assert!(crate::matrix::point_count(&q) * q.repetitions as usize <= full);
            assert!(check(&q, &[]).is_some(), "{name}");
        }
    }
}
