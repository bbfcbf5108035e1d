//! The verdict as it is written to the files: `verdict.txt`, `summary.json`'s `verdict` and
//! `points`, and the block at the top of `report.html`.
//!
//! A built-in's check ([`crate::builtin::check`]) fills a [`crate::builtin::Verdict`]: its
//! criterion, the report-vs-ours table (as text and as [`Compared`] rows) and whether our
//! numbers meet it. [`judge`] adds each point's completeness ([`crate::completeness`]):
//! **an experiment with an incomplete point is never judged** — its outcome is
//! [`Outcome::NotJudged`] ("not judged: N points incomplete"), whatever the numbers say,
//! because a run that went wrong cannot reproduce anything.

use crate::builtin::{self, Compared};
use crate::completeness::{self, Planned, PointCompleteness};
use crate::file::Experiment;
use crate::summary::Row;
use std::fmt::Write as _;

/// What the verdict says.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every point complete, and the criterion met.
    Reproduced,
    /// Every point complete, and the criterion not met.
    NotReproduced,
    /// Not judged: points incomplete or missing (the reason says which).
    NotJudged,
}

/// The experiment's verdict with everything it rests on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Judgement {
    /// The experiment's name.
    pub experiment: String,
    /// `--quick` variant.
    pub quick: bool,
    /// Reproduced, not reproduced or not judged.
    pub outcome: Outcome,
    /// The verdict as one line: `REPRODUCED`, `NOT REPRODUCED`, `NOT JUDGED: 2 points
    /// incomplete`, ...
    pub headline: String,
    /// The criterion, as the experiment file states it (empty: not a built-in).
    pub criterion: String,
    /// Why, in numbers (the check's own words; for an incomplete experiment what the
    /// numbers would have said).
    pub because: String,
    /// The report's numbers beside ours, as printed.
    pub table: String,
    /// The same comparison, one entry per quantity (may be empty where a check only
    /// prints its table).
    pub comparison: Vec<Compared>,
    /// The probe-loss bound the completeness rule used, a fraction (the points of
    /// [`Self::max_probe_loss_where`] excepted).
    pub max_probe_loss: f64,
    /// The points the experiment file bounds on their own (`[expect]
    /// max_probe_loss_where`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub max_probe_loss_where: Vec<completeness::PointLossBound>,
    /// Each point's completeness.
    pub points: Vec<PointCompleteness>,
    /// Shards were missing or incomplete and merged anyway (`experiment merge
    /// --allow-partial`): never judged.
    pub partial: bool,
}

impl Judgement {
    /// Points that are not complete.
    pub fn incomplete(&self) -> usize {
        self.points.iter().filter(|p| !p.complete).count()
    }

    /// `verdict.txt`: the headline, criterion, reasons, table and every point's
    /// completeness.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let variant = if self.quick { " (--quick)" } else { "" };
        let _ = writeln!(s, "experiment {}{variant}", self.experiment);
        let _ = writeln!(s, "verdict: {}", self.headline);
        if !self.criterion.is_empty() {
            let _ = writeln!(s, "criterion: {}", self.criterion);
        }
        if !self.because.is_empty() {
            let _ = writeln!(s, "numbers: {}", self.because);
        }
        if !self.table.is_empty() {
            let _ = writeln!(s, "\nthe report's numbers beside ours:");
            s.push_str(&self.table);
        }
        if !self.comparison.is_empty() {
            let _ = writeln!(
                s,
                "\ncomparison (quantity | statistic | report | ours | band | result):"
            );
            for c in &self.comparison {
                let [report, ours, band, result] = compared_cells(c);
                let _ = writeln!(
                    s,
                    "  {} | {} | {report} | {ours} | {band} | {result}",
                    c.quantity, c.statistic
                );
            }
        }
        s.push_str(&self.points_text());
        s
    }

    /// The probe-loss bounds the completeness rule used.
    pub fn loss_bound(&self) -> completeness::LossBound {
        completeness::LossBound {
            default: self.max_probe_loss,
            points: self.max_probe_loss_where.clone(),
        }
    }

    /// The completeness of every point, one line each, with the causes below.
    pub fn points_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\ncompleteness ({} of {} points complete; probe loss bound {}):",
            self.points.len() - self.incomplete(),
            self.points.len(),
            self.loss_bound().describe()
        );
        for p in &self.points {
            let word = if p.complete { "complete" } else { "INCOMPLETE" };
            let missing = if p.missing > 0 {
                format!(", {} without a result", p.missing)
            } else {
                String::new()
            };
            let _ = writeln!(s, "  {:<40} {word} ({} runs{missing})", p.point, p.runs);
            for c in &p.causes {
                let _ = writeln!(s, "      {c}");
            }
        }
        if self.partial {
            let _ = writeln!(s, "  (partial merge: shards were missing or incomplete)");
        }
        s
    }

    /// The block at the top of `report.html`.
    pub fn to_html(&self) -> String {
        let esc = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let color = match self.outcome {
            Outcome::Reproduced => "#2ca02c",
            Outcome::NotReproduced => "#d62728",
            Outcome::NotJudged => "#ff7f0e",
        };
        let mut h = format!(
            "<div id=\"verdict\" style=\"border:2px solid {color};padding:0.5em 1em;margin-bottom:1em\"><h2 style=\"color:{color};margin:0.2em 0\">{}</h2>",
            esc(&self.headline)
        );
        if !self.criterion.is_empty() {
            let _ = write!(h, "<p><b>criterion:</b> {}</p>", esc(&self.criterion));
        }
        if !self.because.is_empty() {
            let _ = write!(h, "<p><b>numbers:</b> {}</p>", esc(&self.because));
        }
        if !self.table.is_empty() {
            let _ = write!(
                h,
                "<pre style=\"white-space:pre-wrap\">{}</pre>",
                esc(&self.table)
            );
        }
        // The judged effects as a table; the numbers shown beside the report's (the text table
        // above has them too) folded below it.
        let (judged, shown): (Vec<&Compared>, Vec<&Compared>) =
            self.comparison.iter().partition(|c| c.band.is_some());
        for (rows, head) in [
            (judged, None),
            (shown, Some("every number beside the report's")),
        ] {
            if rows.is_empty() {
                continue;
            }
            if let Some(summary) = head {
                let _ = write!(h, "<details><summary>{summary} ({})</summary>", rows.len());
            }
            h.push_str(
                "<table class=\"comparison\"><tr><th>quantity</th><th>statistic</th><th>report</th><th>ours</th><th>band</th><th>result</th></tr>",
            );
            for c in rows {
                let cells = compared_cells(c);
                let style = match c.pass {
                    Some(true) => " style=\"color:#2ca02c\"",
                    Some(false) => " style=\"color:#d62728;font-weight:bold\"",
                    None => "",
                };
                let left = "style=\"text-align:left;white-space:normal\"";
                let _ = write!(
                    h,
                    "<tr><td {left}>{}</td><td {left}>{}</td><td>{}</td><td>{}</td><td>{}</td><td{style}>{}</td></tr>",
                    esc(&c.quantity),
                    esc(&c.statistic),
                    esc(&cells[0]),
                    esc(&cells[1]),
                    esc(&cells[2]),
                    esc(&cells[3])
                );
            }
            h.push_str("</table>");
            if head.is_some() {
                h.push_str("</details>");
            }
        }
        let _ = write!(
            h,
            "<p><b>completeness:</b> {} of {} points complete (probe loss bound {})</p>",
            self.points.len() - self.incomplete(),
            self.points.len(),
            esc(&self.loss_bound().describe())
        );
        if self.incomplete() > 0 || self.partial {
            h.push_str("<ul>");
            for p in self.points.iter().filter(|p| !p.complete) {
                let _ = write!(
                    h,
                    "<li>{} INCOMPLETE: {}</li>",
                    esc(&p.point),
                    esc(&p.causes.join("; "))
                );
            }
            if self.partial {
                h.push_str("<li>partial merge: shards were missing or incomplete</li>");
            }
            h.push_str("</ul>");
        }
        h.push_str("</div>");
        h
    }
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.table)?;
        if !self.criterion.is_empty() {
            writeln!(f, "criterion: {}", self.criterion)?;
        }
        if self.incomplete() > 0 {
            for p in self.points.iter().filter(|p| !p.complete) {
                writeln!(f, "incomplete point {}: {}", p.point, p.causes.join("; "))?;
            }
        }
        match (&self.outcome, self.because.is_empty()) {
            (_, true) => writeln!(f, "{}", self.headline),
            (Outcome::NotJudged, false) => {
                writeln!(f, "{} (the numbers alone: {})", self.headline, self.because)
            }
            _ => writeln!(f, "{}: {}", self.headline, self.because),
        }
    }
}

/// A compared quantity's report, ours, band and result cells as printed (`-` where empty).
fn compared_cells(c: &Compared) -> [String; 4] {
    let num = |v: Option<f64>| match v {
        None => "-".to_string(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    };
    let unit = |s: String| {
        if c.unit.is_empty() || s == "-" {
            s
        } else {
            format!("{s} {}", c.unit)
        }
    };
    let band = match c.band {
        None => "-".to_string(),
        Some((None, hi)) => format!("at most {}", num(Some(hi))),
        // A lower bound alone (variable-link's "bloated: at least 100 ms").
        Some((Some(lo), hi)) if hi == f64::INFINITY => format!("at least {}", num(Some(lo))),
        Some((Some(lo), hi)) => format!("{}..{}", num(Some(lo)), num(Some(hi))),
    };
    let result = c
        .fit
        .as_deref()
        .map_or_else(|| "shown".to_string(), |f| f.replace('_', " "));
    [unit(num(c.report)), unit(num(c.ours)), band, result]
}

/// Judges `rows` of `exp`: the built-in's check (if `exp` is one) and every point's
/// completeness, against `planned`, the runs the plan asked for (a planned run without a row
/// makes its point incomplete; empty: the rows alone). `partial`: a merge that lacks shards.
/// For an experiment that is not a built-in the outcome is [`Outcome::NotJudged`] with "no
/// criterion".
pub fn judge(exp: &Experiment, rows: &[Row], planned: &[Planned], partial: bool) -> Judgement {
    let bound = completeness::probe_loss_bound(exp);
    let points = completeness::points(rows, planned, &bound);
    let incomplete = points.iter().filter(|p| !p.complete).count();
    let check = builtin::check(exp, rows);
    let (mut outcome, mut headline) = match check.as_ref().map(|v| v.reproduced) {
        None => (
            Outcome::NotJudged,
            "NO VERDICT: not a built-in (no criterion to judge)".to_string(),
        ),
        Some(None) => (
            Outcome::NotJudged,
            "NOT JUDGED: an effect not measured (runs missing, or a note above says why)"
                .to_string(),
        ),
        Some(Some(true)) => (Outcome::Reproduced, "REPRODUCED".to_string()),
        Some(Some(false)) => (Outcome::NotReproduced, "NOT REPRODUCED".to_string()),
    };
    if check.is_some() && incomplete > 0 {
        outcome = Outcome::NotJudged;
        headline = format!(
            "NOT JUDGED: {incomplete} point{} incomplete",
            if incomplete == 1 { "" } else { "s" }
        );
    } else if check.is_some() && partial {
        outcome = Outcome::NotJudged;
        headline = "NOT JUDGED: partial merge (shards missing or incomplete)".into();
    }
    let (criterion, because, table, comparison) = match check {
        Some(v) => (v.criterion, v.because, v.table, v.comparison),
        None => Default::default(),
    };
    Judgement {
        experiment: exp.name.clone(),
        quick: exp.quick_variant,
        outcome,
        headline,
        criterion,
        because,
        table,
        comparison,
        max_probe_loss: bound.default,
        max_probe_loss_where: bound.points,
        points,
        partial,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn row(load: &str, idle: f64, loaded: f64, extra: &[(&str, Value)]) -> Row {
        let mut cells: Vec<(String, Value)> = vec![
            ("run".into(), format!("{load}_r1").into()),
            ("point".into(), load.into()),
            ("load".into(), load.into()),
            ("interrupted".into(), false.into()),
            ("lat.udp_be.rtt.idle.median_ms".into(), idle.into()),
            ("lat.udp_be.rtt.loaded.median_ms".into(), loaded.into()),
            ("lat.udp_be.rtt.loaded.count".into(), 300.into()),
            ("lat.udp_be.rtt.loaded.loss".into(), 0.0.into()),
        ];
        cells.extend(extra.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
        Row { cells }
    }

    fn r5() -> Experiment {
        crate::parse("r5", "r5", builtin::get("report5-directions").unwrap()).unwrap()
    }

    #[test]
    fn complete_points_are_judged_both_ways() {
        let yes = judge(
            &r5(),
            &[
                row("tcp_upload", 2.0, 150.0, &[]),
                row("tcp_download", 2.0, 4.0, &[]),
            ],
            &[],
            false,
        );
        assert_eq!(yes.outcome, Outcome::Reproduced, "{yes}");
        assert_eq!(yes.incomplete(), 0);
        let no = judge(
            &r5(),
            &[
                row("tcp_upload", 2.0, 20.0, &[]),
                row("tcp_download", 2.0, 4.0, &[]),
            ],
            &[],
            false,
        );
        assert_eq!(no.outcome, Outcome::NotReproduced, "{no}");
    }

    #[test]
    fn a_stalled_flow_or_lost_probes_mean_not_judged_rather_than_reproduced() {
        let stalled = [
            row(
                "tcp_upload",
                2.0,
                150.0,
                &[(
                    "failed.tcp_up_1",
                    "stalled: the server read nothing for 3 s".into(),
                )],
            ),
            row(
                "tcp_download",
                2.0,
                4.0,
                &[("lat.udp_be.rtt.loaded.loss", 0.23.into())],
            ),
        ];
        let j = judge(&r5(), &stalled, &[], false);
        assert_eq!(j.outcome, Outcome::NotJudged, "{j}");
        assert_eq!(j.headline, "NOT JUDGED: 2 points incomplete");
        // What the numbers alone would have said is kept, with the causes.
        assert!(j.because.contains("ours 148 ms"), "{j}");
        let text = j.to_text();
        assert!(
            text.contains("verdict: NOT JUDGED: 2 points incomplete"),
            "{text}"
        );
        assert!(text.contains("flow tcp_up_1 failed: stalled"), "{text}");
        assert!(text.contains("lost 23.0 % of its probes"), "{text}");
        assert!(j.to_html().contains("INCOMPLETE"), "{}", j.to_html());
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["outcome"], "not_judged");
        assert_eq!(v["points"][0]["complete"], false);
        // A partial merge is not judged either.
        let ok = [
            row("tcp_upload", 2.0, 150.0, &[]),
            row("tcp_download", 2.0, 4.0, &[]),
        ];
        assert_eq!(judge(&r5(), &ok, &[], true).outcome, Outcome::NotJudged);
    }

    #[test]
    fn an_experiment_without_criterion_has_no_verdict_but_its_completeness() {
        let e = crate::parse("x", "x", "[test]\nname = \"tcp_upload\"\n").unwrap();
        let j = judge(&e, &[row("p001", 1.0, 2.0, &[])], &[], false);
        assert_eq!(j.outcome, Outcome::NotJudged);
        assert!(j.headline.starts_with("NO VERDICT"), "{}", j.headline);
        assert_eq!(j.points.len(), 1);
    }

    #[test]
    fn a_failed_run_makes_its_point_incomplete_rather_than_dropping_it() {
        // Upload and download complete; a third planned run (a repetition of the upload)
        // failed and left no row: before, its point was simply judged on the other rows.
        let rows = [
            row("tcp_upload", 2.0, 150.0, &[]),
            row("tcp_download", 2.0, 4.0, &[]),
        ];
        let plan = [
            Planned::new("tcp_upload_r1", "tcp_upload", "not run"),
            Planned::new(
                "tcp_upload_r2",
                "tcp_upload",
                "test tcp_upload: lab up: no such device",
            ),
            Planned::new("tcp_download_r1", "tcp_download", "not run"),
        ];
        let j = judge(&r5(), &rows, &plan, false);
        assert_eq!(j.outcome, Outcome::NotJudged, "{j}");
        assert_eq!(j.headline, "NOT JUDGED: 1 point incomplete");
        let text = j.to_text();
        assert!(
            text.contains("tcp_upload_r2: no result: test tcp_upload: lab up: no such device"),
            "{text}"
        );
        assert!(text.contains("(1 runs, 1 without a result)"), "{text}");
        // Every planned run with a row: judged.
        let all = judge(&r5(), &rows, &[plan[0].clone(), plan[2].clone()], false);
        assert_eq!(all.outcome, Outcome::Reproduced, "{all}");
    }

    #[test]
    fn the_comparison_is_in_the_json_the_text_and_the_html() {
        let j = judge(
            &r5(),
            &[
                row("tcp_upload", 2.0, 150.0, &[]),
                row("tcp_download", 2.0, 4.0, &[]),
            ],
            &[],
            false,
        );
        // Two numbers shown beside the report's, two judged effects.
        assert_eq!(j.comparison.len(), 4, "{:?}", j.comparison);
        let v = serde_json::to_value(&j).unwrap();
        let c = &v["comparison"];
        assert_eq!(c[0]["report"], 147.0);
        assert_eq!(c[0]["ours"], 150.0);
        assert_eq!(c[0]["unit"], "ms");
        assert!(c[0]["band"].is_null() && c[0]["pass"].is_null(), "{c}");
        assert_eq!(c[2]["quantity"], "bloated side: induced median");
        assert_eq!(c[2]["band"], serde_json::json!([73.0, 292.0]));
        assert_eq!(
            (&c[2]["fit"], &c[2]["pass"]),
            (&"within".into(), &true.into())
        );
        assert_eq!(c[3]["band"][0], Value::Null, "at most: {c}");
        let text = j.to_text();
        assert!(
            text.contains(
                "  bloated side: induced median | report: ~147 - ~1.0 idle; ours: loaded median - idle median | 146 ms | 148 ms | 73.0..292 | within"
            ),
            "{text}"
        );
        let html = j.to_html();
        assert!(html.contains("<table class=\"comparison\">"), "{html}");
        assert!(html.contains("<td>73.0..292</td>"), "{html}");
        // The judged effects first, the shown numbers folded below.
        let judged = html.find("73.0..292").unwrap();
        let folded = html.find("<details>").unwrap();
        assert!(judged < folded, "{html}");
        assert!(
            html.contains("every number beside the report's (2)"),
            "{html}"
        );
    }
}
