//! What `bloatlab tune` prints and writes: the terminal summary and curve table, `--json`
//! and `--html` (charts drawn with crates/report's plotting).
//!
//! JSON schema (version 1):
//!
//! ```text
//! {"version": 1, "budget_ms", "rule": "median"|"all", "repeats",
//!  "range": {"min_kbit", "max_kbit", "resolution_kbit"}, "interrupted": bool,
//!  "restored": ["up: rate set back to ..."],
//!  "directions": [{"direction": "up"|"down",
//!                  "verdict": "found"|"always_within"|"never_within"|null (interrupted),
//!                  "recommended_kbit": n|null, "original_bit_s": n|null,
//!                  "best_throughput_mbit", "recommended_throughput_mbit",
//!                  "given_up_mbit", "given_up_fraction",
//!                  "curve": [{"rate_kbit", "within": bool|null, "repeats",
//!                             "induced_p50_ms", "induced_p90_ms", "throughput_mbit",
//!                             "runs": [{"induced_p50_ms", "induced_p90_ms",
//!                                       "idle_median_ms", "throughput_mbit"}]}]}]}
//! ```
//!
//! Curve aggregates are the median of the repeats' induced latencies and the mean of their
//! throughputs; the curve is sorted by rate.

use super::driver::{DirectionResult, Outcome};
use super::search::{CurvePoint, Rule, SearchConfig, Verdict};
use bloatlab_report::plot::Caption;
use bloatlab_report::plot::xy::{RefLine, XyChart, XySeries, render_svg};
use serde_json::{Value, json};
use std::fmt::Write as _;

fn round3(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 1e3).round() / 1e3)
    } else {
        Value::Null
    }
}

fn mbit(kbit: u64) -> String {
    format!("{:.3}", kbit as f64 / 1e3)
}

/// The curve sorted by rate.
fn sorted(r: &DirectionResult) -> Vec<&CurvePoint> {
    let mut v: Vec<&CurvePoint> = r.curve.iter().collect();
    v.sort_by_key(|p| p.rate_kbit);
    v
}

/// The `--json` document.
pub fn to_json(cfg: &SearchConfig, o: &Outcome) -> Value {
    let dirs: Vec<Value> = o
        .results
        .iter()
        .map(|r| {
            let given = r.given_up();
            json!({
                "direction": r.direction,
                "verdict": r.verdict,
                "recommended_kbit": r.recommended_kbit,
                "original_bit_s": r.original_bps,
                "best_throughput_mbit": r.top().map(|p| round3(p.throughput_mbit())),
                "recommended_throughput_mbit": r.recommended().map(|p| round3(p.throughput_mbit())),
                "given_up_mbit": given.map(|g| round3(g.0)),
                "given_up_fraction": given.map(|g| round3(g.1)),
                "curve": sorted(r).iter().map(|p| json!({
                    "rate_kbit": p.rate_kbit,
                    "within": p.within,
                    "repeats": p.runs.len(),
                    "induced_p50_ms": round3(p.induced_p50_ms()),
                    "induced_p90_ms": round3(p.induced_p90_ms()),
                    "throughput_mbit": round3(p.throughput_mbit()),
                    "runs": p.runs.iter().map(|m| json!({
                        "induced_p50_ms": round3(m.induced_p50_ms),
                        "induced_p90_ms": round3(m.induced_p90_ms),
                        "idle_median_ms": round3(m.idle_median_ms),
                        "throughput_mbit": round3(m.throughput_mbit),
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "version": 1,
        "budget_ms": round3(cfg.budget.as_secs_f64() * 1e3),
        "rule": cfg.rule,
        "repeats": cfg.repeats,
        "range": {
            "min_kbit": cfg.min_bps / 1000,
            "max_kbit": cfg.max_bps / 1000,
            "resolution_kbit": cfg.resolution_bps / 1000,
        },
        "interrupted": o.interrupted,
        "restored": o.restored,
        "directions": dirs,
    })
}

/// One line per direction: the recommendation and the throughput given up.
pub fn summary_line(cfg: &SearchConfig, r: &DirectionResult) -> String {
    let budget = cfg.budget.as_secs_f64() * 1e3;
    let d = r.direction.name();
    match (r.verdict, r.recommended_kbit) {
        (None, _) => format!("{d}: interrupted before the search ended"),
        (Some(Verdict::NeverWithin), _) | (_, None) => format!(
            "{d}: no rate in the range keeps induced p90 within {budget} ms (even {} Mbit/s: {:.1} ms); lower --min",
            mbit(cfg.min_bps / 1000),
            r.curve
                .iter()
                .min_by_key(|p| p.rate_kbit)
                .map_or(f64::NAN, CurvePoint::induced_p90_ms)
        ),
        (Some(v), Some(k)) => {
            let p90 = r.recommended().map_or(f64::NAN, CurvePoint::induced_p90_ms);
            let mut s = format!(
                "{d}: recommended {} Mbit/s (induced p90 {p90:.1} ms <= {budget} ms)",
                mbit(k)
            );
            if v == Verdict::AlwaysWithin {
                s.push_str(", the top of the range: raise --max to look higher");
            }
            if let (Some((lost, frac)), Some(top)) = (r.given_up(), r.top()) {
                let _ = write!(
                    s,
                    "; throughput given up {lost:.2} Mbit/s ({:.1} %) vs {:.2} Mbit/s at {} Mbit/s",
                    frac * 100.0,
                    top.throughput_mbit(),
                    mbit(top.rate_kbit)
                );
            }
            s
        }
    }
}

/// The measured curve as a terminal table.
pub fn curve_table(r: &DirectionResult) -> String {
    let header = [
        "rate Mbit/s",
        "repeats",
        "induced p50 ms",
        "induced p90 ms",
        "throughput Mbit/s",
        "within",
    ];
    let rows: Vec<Vec<String>> = sorted(r)
        .iter()
        .map(|p| {
            vec![
                mbit(p.rate_kbit),
                p.runs.len().to_string(),
                format!("{:.1}", p.induced_p50_ms()),
                format!("{:.1}", p.induced_p90_ms()),
                format!("{:.2}", p.throughput_mbit()),
                match p.within {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
                .to_string(),
            ]
        })
        .collect();
    bloatlab_report::table::render(&header, &rows)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The `--html` report: per direction, the summary, latency and throughput against the rate
/// (plots), and the curve table.
pub fn to_html(cfg: &SearchConfig, o: &Outcome) -> Result<String, bloatlab_report::ReportError> {
    let budget = cfg.budget.as_secs_f64() * 1e3;
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>bloatlab tune</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\
         <h1>bloatlab tune</h1>",
    );
    let _ = write!(
        h,
        "<p>Budget: induced p90 &lt;= {budget} ms; rule {}; up to {} repeats per rate; range {} to {} Mbit/s, resolution {} Mbit/s.{}</p>",
        match cfg.rule {
            Rule::Median => "median",
            Rule::All => "all",
        },
        cfg.repeats,
        mbit(cfg.min_bps / 1000),
        mbit(cfg.max_bps / 1000),
        mbit(cfg.resolution_bps / 1000),
        if o.interrupted {
            " <b>Interrupted.</b>"
        } else {
            ""
        }
    );
    for r in &o.results {
        let d = r.direction.name();
        let _ = write!(h, "<h2>{d}</h2><p>{}</p>", esc(&summary_line(cfg, r)));
        let pts = sorted(r);
        let x = |p: &CurvePoint| p.rate_kbit as f64 / 1e3;
        let rec: Vec<RefLine> = r
            .recommended_kbit
            .map(|k| RefLine {
                label: format!("recommended {} Mbit/s", mbit(k)),
                at: k as f64 / 1e3,
            })
            .into_iter()
            .collect();
        let latency = XyChart {
            caption: Caption::new(
                format!("{d}: induced latency vs shaper rate"),
                "shaper rate (Mbit/s)",
                "induced latency (ms)",
            ),
            series: vec![
                XySeries {
                    label: "induced p50".into(),
                    points: pts.iter().map(|p| (x(p), p.induced_p50_ms())).collect(),
                },
                XySeries {
                    label: "induced p90".into(),
                    points: pts.iter().map(|p| (x(p), p.induced_p90_ms())).collect(),
                },
            ],
            hlines: vec![RefLine {
                label: format!("budget {budget} ms"),
                at: budget,
            }],
            vlines: rec.clone(),
        };
        let tput = XyChart {
            caption: Caption::new(
                format!("{d}: throughput vs shaper rate"),
                "shaper rate (Mbit/s)",
                "throughput (Mbit/s)",
            ),
            series: vec![XySeries {
                label: "throughput".into(),
                points: pts.iter().map(|p| (x(p), p.throughput_mbit())).collect(),
            }],
            hlines: Vec::new(),
            vlines: rec,
        };
        h.push_str(&render_svg(&latency)?);
        h.push_str(&render_svg(&tput)?);
        h.push_str("<table><tr><th>rate Mbit/s</th><th>repeats</th><th>induced p50 ms</th><th>induced p90 ms</th><th>throughput Mbit/s</th><th>within budget</th></tr>");
        for p in pts {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td></tr>",
                mbit(p.rate_kbit),
                p.runs.len(),
                p.induced_p50_ms(),
                p.induced_p90_ms(),
                p.throughput_mbit(),
                match p.within {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
            );
        }
        h.push_str("</table>");
    }
    if !o.restored.is_empty() {
        let _ = write!(h, "<p>{}</p>", esc(&o.restored.join("; ")));
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::measure::Direction;
    use crate::tune::search::{Measurement, Search, Step};
    use std::time::Duration;

    /// A finished search over a synthetic 10 Mbit/s line, as the driver would produce it.
    fn outcome() -> (SearchConfig, Outcome) {
        let cfg = SearchConfig {
            min_bps: 2_000_000,
            max_bps: 16_000_000,
            resolution_bps: 500_000,
            repeats: 1,
            budget: Duration::from_millis(15),
            rule: Rule::Median,
        };
        let mut s = Search::new(cfg).unwrap();
        let (verdict, rec) = loop {
            match s.next() {
                Step::Measure { rate_kbit, .. } => {
                    let r = rate_kbit as f64;
                    let over = (r - 10_000.0).max(0.0);
                    s.record(Measurement {
                        induced_p50_ms: 1.0 + over * 0.05,
                        induced_p90_ms: 3.0 + over * 0.1,
                        idle_median_ms: 30.0,
                        throughput_mbit: r.min(10_000.0) / 1e3 * 0.95,
                    });
                }
                Step::Done {
                    verdict,
                    recommended_kbit,
                } => break (verdict, recommended_kbit),
            }
        };
        let r = DirectionResult {
            direction: Direction::Up,
            verdict: Some(verdict),
            recommended_kbit: rec,
            original_bps: Some(50_000_000),
            curve: s.curve().to_vec(),
        };
        let o = Outcome {
            results: vec![r],
            interrupted: false,
            restored: vec!["up: rate set back to 50.000 Mbit/s".into()],
        };
        (cfg, o)
    }

    #[test]
    fn json_has_the_recommendation_the_loss_and_the_sorted_curve() {
        let (cfg, o) = outcome();
        let v = to_json(&cfg, &o);
        let d = &v["directions"][0];
        assert_eq!(d["direction"], "up");
        assert_eq!(d["verdict"], "found");
        let rec = d["recommended_kbit"].as_u64().unwrap();
        assert!((9_500..=10_000).contains(&rec), "{rec}");
        let rates: Vec<u64> = d["curve"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["rate_kbit"].as_u64().unwrap())
            .collect();
        assert!(rates.windows(2).all(|w| w[0] < w[1]), "{rates:?}");
        assert_eq!(rates.first(), Some(&2_000));
        assert_eq!(rates.last(), Some(&16_000));
        // 9.5 Mbit/s at the top (capped by the line), 0.95 x rec at the recommendation.
        let lost = d["given_up_mbit"].as_f64().unwrap();
        let want = 9.5 - rec as f64 / 1e3 * 0.95;
        assert!((lost - want).abs() < 0.002, "{lost} vs {want}");
        assert_eq!(v["budget_ms"], 15.0);
        assert_eq!(v["range"]["resolution_kbit"], 500);
    }

    #[test]
    fn the_terminal_and_html_show_recommendation_curve_and_plots() {
        let (cfg, o) = outcome();
        let r = &o.results[0];
        let line = summary_line(&cfg, r);
        assert!(
            line.starts_with("up: recommended ") && line.contains("given up"),
            "{line}"
        );
        let t = curve_table(r);
        assert!(
            t.contains("induced p90 ms") && t.contains("16.000") && t.contains("no"),
            "{t}"
        );
        let h = to_html(&cfg, &o).unwrap();
        assert_eq!(h.matches("<svg").count(), 2);
        assert!(
            h.contains("budget 15 ms") && h.contains("recommended "),
            "html"
        );
        assert_eq!(h.matches("<tr>").count(), r.curve.len() + 1);
    }

    #[test]
    fn never_within_budget_says_so() {
        let (cfg, mut o) = outcome();
        o.results[0].verdict = Some(Verdict::NeverWithin);
        o.results[0].recommended_kbit = None;
        let line = summary_line(&cfg, &o.results[0]);
        assert!(
            line.contains("no rate in the range") && line.contains("--min"),
            "{line}"
        );
        let v = to_json(&cfg, &o);
        assert_eq!(v["directions"][0]["given_up_mbit"], Value::Null);
    }
}
