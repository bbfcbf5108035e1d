//! `report.html`: the summary table and plots against the swept parameters (latency of the
//! reference series idle and under load, on a log axis when it spans more than two decades;
//! its probes lost idle, loaded and in recovery, when it is a probe series; NetPwr for a
//! NetPwr experiment; throughput up and down; each flow's MiB when two to four flows
//! compete), one x position
//! per point labelled with the point's parameter values, repetitions as mean with a +-1
//! standard deviation error bar, legends beside the plot area. The charts are drawn by
//! `bloatlab_report::plot::sweep` (plotters, like every other bloatlab chart), inline SVG;
//! no scripts. The points table maps point numbers to parameter values.

use crate::summary::{self, Row};
use bloatlab_report::plot::Caption;
use bloatlab_report::plot::sweep::{self, SweepChart, SweepSeries};
use std::fmt::Write as _;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A plotted line: its label and, per point, (mean, standard deviation).
type Series = (String, Vec<Option<(f64, f64)>>);

/// Competing flows get their own chart up to this many (one colour each, legible legend).
const MAX_FLOWS: usize = 4;

/// iperf's MBytes: 2^20 bytes.
const MIB: f64 = 1024.0 * 1024.0;

/// A sweep chart of `series` over the points (labelled `points`), drawn by
/// [`bloatlab_report::plot::sweep`] (log axis past two decades, legend in its own column,
/// ±1 sd bars); a line saying why when it cannot be drawn.
fn chart(title: &str, y_label: &str, x_desc: &str, points: &[String], series: &[Series]) -> String {
    let c = SweepChart {
        caption: Caption::new(title, x_desc, y_label),
        points: points.to_vec(),
        series: series
            .iter()
            .map(|(label, values)| SweepSeries {
                label: label.clone(),
                values: values.clone(),
            })
            .collect(),
    };
    match sweep::render_svg(&c) {
        Ok(svg) => svg,
        Err(e) => format!("<p>{}</p>", esc(&e.to_string())),
    }
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
            &x_desc,
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
                &x_desc,
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
                &x_desc,
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
        &x_desc,
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
    if most_in_a_run >= 2 && flows.len() <= MAX_FLOWS {
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
            &x_desc,
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

    /// Whether the SVG has a text element reading exactly `s` (plotters writes
    /// `<text ...>\ns\n</text>`).
    fn has_text(svg: &str, s: &str) -> bool {
        svg.contains(&format!(">\n{s}\n</text>"))
    }

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
        assert!(has_text(&html, "6089kbit/737kbit"), "x label by value");
        assert!(has_text(&html, "SQM off"));
        assert!(!has_text(&html, "p001"), "not the point number");
        assert!(html.contains("latency (udp_ef.rtt) vs shaper (log scale)"));
        assert!(has_text(&html, "loaded probes lost"), "loss chart");
        assert!(
            !html.contains("recovery probes lost"),
            "no recovery cells, no line"
        );
        // 20 % lost: the loss axis is in percent.
        assert!(html.contains("probe loss (udp_ef.rtt) vs shaper"), "{html}");
        assert!(has_text(&html, "% lost"), "{html}");
        assert!(!html.contains("NetPwr"), "only a NetPwr experiment");
        // Within two decades: linear.
        let near = [
            row("p001_a", "a", 44.0, 0.0),
            row("p002_b", "b", 300.0, 0.0),
        ];
        assert!(!report("x", &near, &params).contains("(log scale)"));
        assert!(has_text(
            &report("report2-netpwr", &near, &params),
            "NetPwr up"
        ));
        // Every chart is plotters' SVG, none hand-written.
        assert_eq!(html.matches("<svg").count(), 3, "latency, loss, throughput");
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
        // Drawn on one line.
        assert!(has_text(
            &report("x", &rows, &params),
            "load=one_vs_one, lab.ecn=all"
        ));
    }

    #[test]
    fn the_loss_chart_has_the_recovery_phase_and_is_left_out_without_loss_cells() {
        let params = vec!["shaper".to_string()];
        let mut r = row("p001_a", "6089kbit/737kbit", 44.0, 0.2);
        r.cells
            .push(("lat.udp_ef.rtt.recovery.loss".into(), 0.28.into()));
        let html = report("r4", &[r], &params);
        assert!(has_text(&html, "recovery probes lost"), "{html}");
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
            has_text(&html, "tcp_up_1 MiB") && has_text(&html, "tcp_up_2 MiB"),
            "{html}"
        );
        assert!(has_text(&html, "MiB"), "the axis is in MiB: {html}");
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
