//! `report.html`: the summary table and plots against the swept parameters (latency of the
//! reference series idle and under load, on a log axis when it spans more than two decades;
//! its probes lost idle, loaded and in recovery, when it is a probe series; NetPwr for a
//! NetPwr experiment; throughput up and down; each flow's MiB when two to four flows
//! compete), one x position
//! per point labelled with the point's parameter values, repetitions as mean with a +-1
//! standard deviation error bar, legends beside the plot area. Self-contained (inline SVG, no
//! scripts); the points table maps point numbers to parameter values.

use crate::summary::{self, Row};
use std::fmt::Write as _;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A plotted line: its label and, per point, (mean, standard deviation).
type Series = (String, Vec<Option<(f64, f64)>>);

const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// iperf's MBytes: 2^20 bytes.
const MIB: f64 = 1024.0 * 1024.0;

/// Whether a y axis over positive `values` needs a log scale: they span more than two
/// decades (issue 18: report 4's 40 ms shaped points lay flat under SQM off's seconds).
fn needs_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    lo.is_finite() && hi / lo > 100.0
}

/// The round step (1, 2, 2.5 or 5 times a power of ten) nearest above `raw`.
fn round_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw * 0.999)
        .unwrap_or(10.0 * p)
}

/// An axis label: whole numbers from 100 up, at most two decimals below without trailing
/// zeros (a round step's 2.5, 0.25, 20), a log axis's powers of ten as they are.
fn tick(v: f64, log: bool) -> String {
    if v == 0.0 || v.abs() >= 100.0 || (log && v >= 1.0) {
        format!("{v:.0}")
    } else if log {
        format!("{v}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Legend column width (px), right of the plot area: entries never cross the data.
const LEGEND_W: f64 = 180.0;

/// A line chart: `series` of (label, per-point (mean, sd)) over `points` x positions, one
/// category per point labelled with its parameter values; a log y axis when the values span
/// more than two decades.
fn chart(title: &str, y_label: &str, points: &[String], series: &[Series]) -> String {
    let (w, h, left, top, bottom) = (900.0 + LEGEND_W, 340.0, 70.0, 30.0, 90.0);
    let right = LEGEND_W + 10.0;
    let n = points.len().max(1);
    let all = || series.iter().flat_map(|(_, v)| v.iter().flatten());
    let log = needs_log(all().map(|(m, _)| *m));
    // A linear axis ticks at a round step (1, 2, 2.5 or 5 times a power of ten) and ends on
    // a tick above the largest value; nothing above zero (no probe lost): an axis to 1.
    let top_value = all().map(|(m, s)| m + s).fold(0.0f64, f64::max);
    let step = round_step(if top_value > 0.0 { top_value } else { 1.0 } / 4.0);
    let ymax = if top_value > 0.0 {
        (top_value / step).floor() * step + step
    } else {
        1.0
    };
    // Log axis: from the decade below the smallest positive value to the one above the largest.
    let (lmin, lmax) = if log {
        let lo = all()
            .map(|(m, _)| *m)
            .filter(|m| *m > 0.0)
            .fold(f64::INFINITY, f64::min);
        (lo.log10().floor(), ymax.log10().ceil())
    } else {
        (0.0, 1.0)
    };
    let x = |i: usize| left + (w - left - right) * (i as f64 + 0.5) / n as f64;
    let y = |v: f64| {
        let f = if log {
            (v.max(10f64.powf(lmin)).log10() - lmin) / (lmax - lmin)
        } else {
            v / ymax
        };
        top + (h - top - bottom) * (1.0 - f)
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="14">{}{}</text>"#,
        esc(title),
        if log { " (log scale)" } else { "" }
    );
    let ticks: Vec<f64> = if log {
        (lmin as i32..=lmax as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        let n = (ymax / step).round() as i32;
        (0..=n).map(|k| step * f64::from(k)).collect()
    };
    for v in ticks {
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            w - right,
            left - 5.0,
            y(v) + 4.0,
            tick(v, log),
            y = y(v)
        );
    }
    let _ = write!(
        s,
        r#"<text transform="rotate(-90)" x="{}" y="14" text-anchor="middle">{}</text>"#,
        -(top + (h - top - bottom) / 2.0),
        esc(y_label)
    );
    let step = n.div_ceil(30);
    for (i, p) in points.iter().enumerate() {
        if i % step != 0 {
            continue;
        }
        if n <= 8 {
            // Few points: upright under the point, one line per `name=value`.
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">"#,
                x(i),
                h - bottom + 16.0
            );
            for (k, part) in p.split('\n').enumerate() {
                let dy = if k == 0 { 0.0 } else { 13.0 };
                let _ = write!(
                    s,
                    r#"<tspan x="{:.1}" dy="{dy}">{}</tspan>"#,
                    x(i),
                    esc(part)
                );
            }
            s.push_str("</text>");
        } else {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="end" transform="rotate(-30 {:.1} {})">{}</text>"#,
                x(i),
                h - bottom + 14.0,
                x(i),
                h - bottom + 14.0,
                esc(&p.replace('\n', " "))
            );
        }
    }
    for (si, (label, vals)) in series.iter().enumerate() {
        let c = COLORS[si % COLORS.len()];
        let pts: Vec<String> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|(m, _)| format!("{:.1},{:.1}", x(i), y(m))))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
            pts.join(" ")
        );
        for (i, v) in vals.iter().enumerate() {
            if let Some((m, sd)) = v {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#,
                    x(i),
                    y(*m)
                );
                if *sd > 0.0 {
                    let _ = write!(
                        s,
                        r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"/>"#,
                        y(m + sd),
                        y((m - sd).max(0.0)),
                        x = x(i)
                    );
                }
            }
        }
        // The legend sits right of the plot area, outside every line.
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            w - LEGEND_W,
            top + 14.0 * si as f64,
            w - LEGEND_W + 15.0,
            top + 9.0 + 14.0 * si as f64,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
}

/// Each point's x label: its parameters' values (`SQM off`, or with several parameters one
/// line each: `load=one_vs_one` / `lab.ecn=all`). A parameter's own fields (`shaper.down` of
/// `shaper`) are left out: the parameter's label already names the point.
fn point_labels(rows: &[Row], points: &[String], params: &[String]) -> Vec<String> {
    let shown: Vec<&String> = params
        .iter()
        .filter(|p| {
            !params.iter().any(|q| {
                p.len() > q.len() && p.starts_with(q.as_str()) && p[q.len()..].starts_with('.')
            })
        })
        .collect();
    points
        .iter()
        .map(|p| {
            let row = rows
                .iter()
                .find(|r| r.get("point").and_then(|v| v.as_str()) == Some(p));
            let parts: Vec<String> = shown
                .iter()
                .filter_map(|k| {
                    let v = row?.get(k)?;
                    let v = match v {
                        serde_json::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    Some(if shown.len() == 1 {
                        v
                    } else {
                        format!("{k}={v}")
                    })
                })
                .collect();
            if parts.is_empty() {
                p.split('_').next().unwrap_or(p).to_string()
            } else {
                parts.join("\n")
            }
        })
        .collect()
}

/// Per point, (mean, sd) of `column`, aligned with `points`.
fn stat(rows: &[Row], points: &[String], column: &str) -> Vec<Option<(f64, f64)>> {
    let s = summary::per_point(rows, column);
    points
        .iter()
        .map(|p| {
            s.iter()
                .find(|(q, ..)| q == p)
                .map(|(_, m, sd, _)| (*m, *sd))
        })
        .collect()
}

/// `html` with `block` (the verdict, [`crate::verdict::Judgement::to_html`]) at the top of
/// the body, right under the title.
pub fn with_top_block(mut html: String, block: &str) -> String {
    match html.find("</h1>") {
        Some(i) => html.insert_str(i + "</h1>".len(), block),
        None => match html.find("<body>") {
            Some(i) => html.insert_str(i + "<body>".len(), block),
            None => html.insert_str(0, block),
        },
    }
    html
}

/// The whole report.
pub fn report(name: &str, rows: &[Row], params: &[String]) -> String {
    let mut points: Vec<String> = Vec::new();
    for r in rows {
        if let Some(p) = r.get("point").and_then(|v| v.as_str())
            && !points.iter().any(|q| q == p)
        {
            points.push(p.to_string());
        }
    }
    let short: Vec<String> = points
        .iter()
        .map(|p| p.split('_').next().unwrap_or(p).to_string())
        .collect();
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{0}</title><style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}}pre{{white-space:pre-wrap}}</style></head><body><h1>experiment {0}</h1><p>{1} runs, {2} points.</p>",
        esc(name),
        rows.len(),
        points.len()
    );
    let labels = point_labels(rows, &points, params);
    let x_desc = params
        .iter()
        .filter(|p| !p.contains('.') || !params.iter().any(|q| p.starts_with(&format!("{q}."))))
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(series) = summary::reference_series(rows) {
        let col = |phase: &str, s: &str| format!("lat.{series}.{phase}.{s}_ms");
        let mut lat: Vec<Series> = vec![(
            "idle median".into(),
            stat(rows, &points, &col("idle", "median")),
        )];
        lat.extend(["median", "p90", "p99"].iter().map(|s| {
            (
                format!("loaded {s}"),
                stat(rows, &points, &col("loaded", s)),
            )
        }));
        html.push_str(&chart(
            &format!("latency ({series}) vs {x_desc}"),
            "ms",
            &labels,
            &lat,
        ));
        // Lost probes, so a point whose latency looks fine but lost its probes shows it; the
        // recovery phase too (report 4's probes were lost after the load as well). A series
        // without loss cells (a [client] run's write-to-read latency) has no loss chart.
        let loss: Vec<Series> = ["idle", "loaded", "recovery"]
            .iter()
            .map(|ph| {
                let v = stat(rows, &points, &format!("lat.{series}.{ph}.loss"));
                let pct = v
                    .into_iter()
                    .map(|o| o.map(|(m, sd)| (m * 100.0, sd * 100.0)));
                (format!("{ph} probes lost"), pct.collect::<Vec<_>>())
            })
            .filter(|(_, v)| v.iter().any(Option::is_some))
            .collect();
        if !loss.is_empty() {
            html.push_str("<br>");
            html.push_str(&chart(
                &format!("probe loss ({series}) vs {x_desc}"),
                "% lost",
                &labels,
                &loss,
            ));
        }
        // NetPwr (iperf 2: bytes/s over RTT in us) of the upload, the quantity report 2 is about.
        if name.contains("netpwr") {
            let mbit = stat(rows, &points, "tput.loaded.up_mbit");
            let rtt = stat(rows, &points, &col("loaded", "median"));
            let np: Vec<Option<(f64, f64)>> = mbit
                .iter()
                .zip(&rtt)
                .map(|(m, r)| match (m, r) {
                    (Some((m, _)), Some((r, _))) if *r > 0.0 => {
                        Some((m * 1e6 / 8.0 / (r * 1e3), 0.0))
                    }
                    _ => None,
                })
                .collect();
            html.push_str("<br>");
            html.push_str(&chart(
                &format!("NetPwr (upload bytes/s / loaded median RTT in us) vs {x_desc}"),
                "NetPwr",
                &labels,
                &[("NetPwr up".into(), np)],
            ));
        }
    }
    let tput: Vec<Series> = [
        ("up", "tput.loaded.up_mbit"),
        ("down", "tput.loaded.down_mbit"),
    ]
    .iter()
    .map(|(l, c)| (format!("throughput {l}"), stat(rows, &points, c)))
    .collect();
    html.push_str("<br>");
    html.push_str(&chart(
        &format!("throughput under load vs {x_desc}"),
        "Mbit/s",
        &labels,
        &tput,
    ));
    // Competing flows (report 3's one vs one): each flow's MiB (2^20 bytes, as iperf prints
    // MBytes), so an uneven split shows.
    let flows: Vec<String> = summary::columns(rows)
        .into_iter()
        .filter_map(|c| {
            c.strip_prefix("tput.loaded.")?
                .strip_suffix(".bytes")
                .map(str::to_string)
        })
        .collect();
    // Flows compete when one run has several (report 5's upload and download are one flow
    // each, at different points: nothing to compare).
    let most_in_a_run = rows
        .iter()
        .map(|r| {
            r.cells
                .iter()
                .filter(|(k, _)| k.starts_with("tput.loaded.") && k.ends_with(".bytes"))
                .count()
        })
        .max()
        .unwrap_or(0);
    if most_in_a_run >= 2 && flows.len() <= COLORS.len() {
        let per_flow: Vec<Series> = flows
            .iter()
            .map(|f| {
                let v = stat(rows, &points, &format!("tput.loaded.{f}.bytes"));
                let mib = v.into_iter().map(|o| o.map(|(m, sd)| (m / MIB, sd / MIB)));
                (format!("{f} MiB"), mib.collect())
            })
            .collect();
        html.push_str("<br>");
        html.push_str(&chart(
            &format!("transferred per flow under load vs {x_desc}"),
            "MiB",
            &labels,
            &per_flow,
        ));
    }
    html.push_str("<h2>points</h2><table><tr><th>point</th>");
    for p in params {
        let _ = write!(html, "<th>{}</th>", esc(p));
    }
    html.push_str("</tr>");
    for (p, s) in points.iter().zip(&short) {
        let _ = write!(html, "<tr><td>{}</td>", esc(s));
        let row = rows
            .iter()
            .find(|r| r.get("point").and_then(|v| v.as_str()) == Some(p));
        for k in params {
            let v = row.and_then(|r| r.get(k)).map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            });
            let _ = write!(html, "<td>{}</td>", esc(&v.unwrap_or_default()));
        }
        html.push_str("</tr>");
    }
    html.push_str("</table><h2>runs</h2><pre>");
    html.push_str(&esc(&summary::table(rows, params)));
    html.push_str("</pre></body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(point: &str, shaper: &str, median: f64, loss: f64) -> Row {
        Row {
            cells: vec![
                ("point".into(), point.into()),
                ("shaper".into(), shaper.into()),
                ("shaper.down".into(), "1gbit".into()),
                ("lat.udp_ef.rtt.idle.median_ms".into(), 33.0.into()),
                ("lat.udp_ef.rtt.loaded.median_ms".into(), median.into()),
                ("lat.udp_ef.rtt.loaded.loss".into(), loss.into()),
                ("tput.loaded.up_mbit".into(), 0.5.into()),
            ],
        }
    }

    #[test]
    fn sweep_plots_label_points_by_value_use_a_log_axis_past_two_decades_and_show_loss() {
        let params = vec!["shaper".to_string(), "shaper.down".to_string()];
        let rows = [
            row("p001_a", "6089kbit/737kbit", 44.0, 0.2),
            row("p005_b", "SQM off", 4900.0, 0.0),
        ];
        let html = report("r4", &rows, &params);
        assert!(
            html.contains(">6089kbit/737kbit</tspan>"),
            "x label by value"
        );
        assert!(html.contains(">SQM off</tspan>"));
        assert!(!html.contains(">p001</tspan>"), "not the point number");
        assert!(html.contains("latency (udp_ef.rtt) vs shaper (log scale)"));
        assert!(html.contains("probes lost"), "loss chart");
        assert!(
            !html.contains("recovery probes lost"),
            "no recovery cells, no line"
        );
        // 20 % lost: the loss axis ticks every 5 % up to 25.
        assert!(
            html.contains(">5</text>") && html.contains(">25</text>"),
            "20 % lost"
        );
        assert!(!html.contains("NetPwr"), "only a NetPwr experiment");
        // Within two decades: linear.
        let near = [
            row("p001_a", "a", 44.0, 0.0),
            row("p002_b", "b", 300.0, 0.0),
        ];
        assert!(!report("x", &near, &params).contains("(log scale)"));
        assert!(report("report2-netpwr", &near, &params).contains("NetPwr up"));
    }

    #[test]
    fn several_parameters_make_one_labelled_category_per_point() {
        let rows = [Row {
            cells: vec![
                ("point".into(), "p001_x".into()),
                ("load".into(), "one_vs_one".into()),
                ("lab.ecn".into(), "all".into()),
            ],
        }];
        let params = vec!["load".to_string(), "lab.ecn".to_string()];
        let l = point_labels(&rows, &["p001_x".to_string()], &params);
        assert_eq!(l, ["load=one_vs_one\nlab.ecn=all"]);
    }

    #[test]
    fn an_all_zero_chart_has_an_axis_to_one() {
        let s = chart(
            "t",
            "%",
            &["a".into()],
            &[("l".into(), vec![Some((0.0, 0.0))])],
        );
        assert!(
            s.contains(">1</text>") && s.contains(">0.25</text>") && s.contains(">0</text>"),
            "{s}"
        );
    }

    #[test]
    fn linear_axes_tick_at_round_steps() {
        assert_eq!(round_step(6.42), 10.0);
        assert_eq!(round_step(5.0), 5.0);
        assert_eq!(round_step(1.64), 2.0);
        assert_eq!(round_step(0.25), 0.25);
        assert_eq!(round_step(2.2), 2.5);
        // Report 4's loss chart: 23.3 % at most gives 0, 10, 20, 30 rather than quarters of
        // 25.7 (6.42, 12.8, 19.2).
        let s = chart(
            "t",
            "%",
            &["a".into()],
            &[("l".into(), vec![Some((23.3, 0.0))])],
        );
        for t in [">0</text>", ">10</text>", ">20</text>", ">30</text>"] {
            assert!(s.contains(t), "{t}: {s}");
        }
        assert!(!s.contains(">6.42</text>"), "{s}");
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(tick(6.5593, false), "6.56");
        assert_eq!(tick(4.919475, false), "4.92");
        assert_eq!(tick(16.5, false), "16.5");
        assert_eq!(tick(2.5, false), "2.5");
        assert_eq!(tick(20.0, false), "20");
        assert_eq!(tick(0.1 * 3.0, false), "0.3");
        assert_eq!(tick(4217.6, false), "4218");
        assert_eq!(tick(0.0, false), "0");
        assert_eq!(tick(0.1, true), "0.1");
        assert_eq!(tick(1000.0, true), "1000");
    }

    #[test]
    fn the_legend_is_right_of_the_plot_area() {
        let s = chart(
            "t",
            "ms",
            &["a".into(), "b".into()],
            &[("line".into(), vec![Some((1.0, 0.0)), Some((2.0, 0.0))])],
        );
        // Plot area ends at w - LEGEND_W - 10; the legend starts at w - LEGEND_W.
        assert!(s.contains(&format!(r#"<rect x="{}""#, 900.0)), "{s}");
    }

    #[test]
    fn the_loss_chart_has_the_recovery_phase_and_is_left_out_without_loss_cells() {
        let params = vec!["shaper".to_string()];
        let mut r = row("p001_a", "6089kbit/737kbit", 44.0, 0.2);
        r.cells
            .push(("lat.udp_ef.rtt.recovery.loss".into(), 0.28.into()));
        let html = report("r4", &[r], &params);
        assert!(html.contains(">recovery probes lost</text>"), "{html}");
        // A [client] run: write-to-read latency, no probes, so no loss chart.
        let client = Row {
            cells: vec![
                ("point".into(), "p001_w".into()),
                ("weight".into(), "0.4".into()),
                ("lat.tcp_up_1.owd_up.loaded.mean_ms".into(), 2.9.into()),
                ("tput.loaded.up_mbit".into(), 940.0.into()),
            ],
        };
        let html = report("report1", &[client], &["weight".to_string()]);
        assert!(!html.contains("probe loss"), "{html}");
        assert!(html.contains("throughput under load"), "{html}");
    }

    #[test]
    fn competing_flows_get_a_chart_of_their_mib() {
        let r = |point: &str, ecn: &str, a: f64, b: f64| Row {
            cells: vec![
                ("point".into(), point.into()),
                ("lab.ecn".into(), ecn.into()),
                ("tput.loaded.tcp_up_1.bytes".into(), (a * MIB).into()),
                ("tput.loaded.tcp_up_2.bytes".into(), (b * MIB).into()),
            ],
        };
        let rows = [r("p001", "false", 10.5, 10.4), r("p002", "all", 16.0, 4.0)];
        let html = report("report3-ecn", &rows, &["lab.ecn".to_string()]);
        assert!(html.contains("transferred per flow under load"), "{html}");
        assert!(
            html.contains(">tcp_up_1 MiB</text>") && html.contains(">tcp_up_2 MiB</text>"),
            "{html}"
        );
        // The axis is in MiB: 16 MiB, ticks every 5 up to 20.
        assert!(html.contains(">20</text>"), "{html}");
        // One flow per run, even if different ones: no such chart.
        let apart = [
            Row {
                cells: vec![
                    ("point".into(), "p001".into()),
                    ("tput.loaded.tcp_up_1.bytes".into(), MIB.into()),
                ],
            },
            Row {
                cells: vec![
                    ("point".into(), "p002".into()),
                    ("tput.loaded.tcp_down_1.bytes".into(), MIB.into()),
                ],
            },
        ];
        assert!(!report("x", &apart, &[]).contains("transferred per flow"));
        // One flow: no such chart (the throughput chart has it).
        let one = [Row {
            cells: vec![
                ("point".into(), "p001".into()),
                ("tput.loaded.tcp_up_1.bytes".into(), MIB.into()),
            ],
        }];
        assert!(!report("x", &one, &[]).contains("transferred per flow"));
    }
}
