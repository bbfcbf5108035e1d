//! `variable-link`'s plots: per arm (its first complete run), the shaper's rate over time
//! drawn over the line's capacity (the step trace) with the measured download, and the
//! latency over time, as inline SVG in `report.html`.
//!
//! Clocks: the line's schedule starts when the lab's emulator starts; the runner records
//! the wall-clock times `lab up` started and returned (`runs/RUN.clock.json`); the emulator
//! starts in between, and the start is used (the capacity line may lag the truth by up to
//! the time `lab up` took, see docs/experiments.md, variable-link); the test's
//! results file has its own start time, and autorate's log (`runs/RUN.during.json`) its
//! start and the time of each tick. All are placed on the test's time axis.

use crate::summary::Row;
use bloatlab_report::plot::timeseries::{Line, TimeSeries};
use bloatlab_report::plot::{latency, render_timeseries_svg, style, throughput};
use std::path::Path;

/// The line's capacity, Mbit/s, `since_origin_s` after the schedule started: `high` for
/// `half_s`, then `low` for `half_s`, looping.
pub fn capacity_mbit(high: f64, low: f64, half_s: f64, since_origin_s: f64) -> f64 {
    if half_s <= 0.0 {
        return high;
    }
    let k = (since_origin_s / half_s).floor();
    if (k as i64).rem_euclid(2) == 0 {
        high
    } else {
        low
    }
}

/// A rate as the file writes it (`12500kbit`, `20mbit`, `1gbit`, bare bit/s), in Mbit/s.
pub fn rate_mbit(s: &str) -> Option<f64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e3), ("mbit", 1.0), ("kbit", 1e-3), ("bit", 1e-6)]
        .iter()
        .find_map(|(u, m)| s.strip_suffix(u).map(|n| (n.to_string(), *m)))
        .unwrap_or((s.clone(), 1e-6));
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// The down direction's applied rate at each tick of an autorate log
/// (`bloatlab-autorate/1`), as `(seconds since the test started, Mbit/s)`.
pub fn autorate_rates(log: &serde_json::Value, test_start_unix_s: f64) -> Vec<(f64, f64)> {
    let start = log["started_unix_s"].as_f64().unwrap_or(f64::NAN);
    log["ticks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["direction"].as_str() == Some("down"))
        .filter_map(|t| {
            let at = start + t["t_s"].as_f64()? - test_start_unix_s;
            Some((at, t["rate_bit_s"].as_f64()? / 1e6))
        })
        .filter(|(t, _)| t.is_finite())
        .collect()
}

fn read_json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The charts of one run, or why not.
fn arm_charts(
    exp: &crate::Experiment,
    runs: &Path,
    arm: &str,
    row: &Row,
) -> Result<(String, String), String> {
    let run = row
        .get("run")
        .and_then(|v| v.as_str())
        .ok_or("no run name")?;
    let file = bloatlab_results::load(&runs.join(format!("{run}.json")))
        .map_err(|e| format!("{run}.json: {e}"))?;
    let test_start_s = file.metadata.start_time.as_nanosecond() as f64 / 1e9;
    let r = bloatlab_report::Run::new(arm, file).map_err(|e| e.to_string())?;
    let end = r.end().as_secs_f64();
    let f = |k: &str| super::expect_f(exp, k);
    // The links start while `lab up` runs: its start is the nearer bound (the rest of
    // `lab up`, after the emulator is running, is the hosts' setup).
    let lab_up_s = read_json(&runs.join(format!("{run}.clock.json")))
        .and_then(|v| v["lab_up_start_unix_s"].as_f64())
        .ok_or_else(|| format!("{run}.clock.json: no lab_up_start_unix_s"))?;
    let offset = test_start_s - lab_up_s;
    let steps = (end / 0.05).ceil() as usize;
    let cap: Vec<(f64, Option<f64>)> = (0..=steps)
        .map(|i| {
            let t = i as f64 * 0.05;
            let c = capacity_mbit(
                f("high_mbit"),
                f("low_mbit"),
                f("half_period_s"),
                t + offset,
            );
            (t, Some(c))
        })
        .collect();
    let mut lines = vec![Line {
        label: "line capacity (trace)".into(),
        color: style::color(7),
        width: 4,
        points: cap,
    }];
    let shaper: Vec<(f64, Option<f64>)> = match read_json(&runs.join(format!("{run}.during.json")))
    {
        Some(log) => autorate_rates(&log, test_start_s)
            .into_iter()
            .filter(|(t, _)| (0.0..=end).contains(t))
            .map(|(t, v)| (t, Some(v)))
            .collect(),
        None => match row
            .get("arm.rate")
            .and_then(|v| v.as_str())
            .and_then(rate_mbit)
        {
            // An unshaped arm's 1 Gbit/s would flatten the chart: not drawn.
            Some(v) if v <= 2.0 * f("high_mbit") => vec![(0.0, Some(v)), (end, Some(v))],
            _ => Vec::new(),
        },
    };
    if !shaper.is_empty() {
        lines.push(Line {
            label: "shaper rate".into(),
            color: style::color(3),
            width: 2,
            points: shaper,
        });
    }
    if let Some(tp) = throughput::chart(&r)
        && let Some(mut down) = tp.lines.into_iter().find(|l| l.label == "download")
    {
        down.label = "download (measured)".into();
        down.color = style::color(0);
        lines.push(down);
    }
    let ts = TimeSeries {
        title: format!("{arm}: rates over the line capacity"),
        y_desc: "rate (Mbit/s)",
        x_end: end,
        phases: &r.file.raw.phases,
        lines,
        marks: Vec::new(),
    };
    let rate_svg = render_timeseries_svg(&ts).map_err(|e| e.to_string())?;
    let mut lat = latency::chart(&r).ok_or("no latency probes")?;
    lat.title = format!("{arm}: latency");
    let lat_svg = render_timeseries_svg(&lat).map_err(|e| e.to_string())?;
    Ok((rate_svg, lat_svg))
}

/// The report's block: per arm, its rate and latency charts (or why they are missing).
pub fn html_block(exp: &crate::Experiment, out: &Path, rows: &[Row]) -> String {
    let runs = crate::runner::runs_dir(out);
    let mut s = String::from(
        "<h2>Rate and latency over time, per arm</h2><p>The first complete run of each arm. Grey: the line's capacity (the step trace, placed from when <code>lab up</code> started; the line's real steps may come up to the time <code>lab up</code> took later); the shaper's rate (autorate's applied rate per tick, or the static rate); the download measured.</p>",
    );
    for arm in super::variable_link::ARMS {
        let Some(row) = rows
            .iter()
            .find(|r| r.get("arm").and_then(|v| v.as_str()) == Some(arm))
        else {
            continue;
        };
        s.push_str(&format!("<h3>{}</h3>", esc(arm)));
        match arm_charts(exp, &runs, arm, row) {
            Ok((a, b)) => {
                s.push_str(&format!("<div>{a}</div><div>{b}</div>"));
            }
            Err(e) => s.push_str(&format!("<p>not drawn: {}</p>", esc(&e))),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_capacity_loops_high_then_low() {
        let c = |t| capacity_mbit(20.0, 5.0, 5.0, t);
        assert_eq!(
            [c(0.0), c(4.99), c(5.0), c(9.99), c(10.0), c(27.0)],
            [20.0, 20.0, 5.0, 5.0, 20.0, 5.0]
        );
        // Before the origin (a test clock a little behind the lab's): the previous half.
        assert_eq!(c(-0.1), 5.0);
    }

    #[test]
    fn rates_read_as_the_file_writes_them() {
        assert_eq!(rate_mbit("12500kbit"), Some(12.5));
        assert_eq!(rate_mbit("1gbit"), Some(1000.0));
        assert_eq!(rate_mbit("20Mbit"), Some(20.0));
        assert_eq!(rate_mbit("nope"), None);
    }

    #[test]
    fn autorate_ticks_are_placed_on_the_test_clock() {
        let log = serde_json::json!({
            "started_unix_s": 100.0,
            "ticks": [
                {"t_s": 0.2, "direction": "down", "rate_bit_s": 10e6},
                {"t_s": 0.2, "direction": "up", "rate_bit_s": 3e6},
                {"t_s": 2.0, "direction": "down", "rate_bit_s": 7.5e6}
            ]
        });
        let r = autorate_rates(&log, 101.0);
        assert_eq!(r.len(), 2, "{r:?}");
        assert!((r[0].0 + 0.8).abs() < 1e-9 && r[0].1 == 10.0, "{r:?}");
        assert!((r[1].0 - 1.0).abs() < 1e-9 && r[1].1 == 7.5, "{r:?}");
    }
}
