//! `report.html`: the summary table and two plots against the swept parameters (latency
//! percentiles of the reference series under load; throughput up and down), one x position
//! per point, repetitions as mean with a +-1 standard deviation error bar. Self-contained
//! (inline SVG, no scripts), readable with tens of points: the x labels are the point
//! numbers and a legend table maps them to parameter values.

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

/// A line chart: `series` of (label, per-point (mean, sd)) over `points` x positions.
fn chart(title: &str, y_label: &str, points: &[String], series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (900.0, 320.0, 70.0, 20.0, 30.0, 60.0);
    let n = points.len().max(1);
    let ymax = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().map(|(m, s)| m + s))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let x = |i: usize| left + (w - left - right) * (i as f64 + 0.5) / n as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / ymax);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="14">{}</text>"#,
        esc(title)
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{v:.1}</text>"##,
            w - right,
            left - 5.0,
            y(v) + 4.0,
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
        if i % step == 0 {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="end" transform="rotate(-45 {:.1} {})">{}</text>"#,
                x(i),
                h - bottom + 14.0,
                x(i),
                h - bottom + 14.0,
                esc(p)
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
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            w - right - 160.0,
            top + 14.0 * si as f64,
            w - right - 145.0,
            top + 9.0 + 14.0 * si as f64,
            esc(label)
        );
    }
    s.push_str("</svg>");
    s
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
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{0}</title><style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}</style></head><body><h1>experiment {0}</h1><p>{1} runs, {2} points.</p>",
        esc(name),
        rows.len(),
        points.len()
    );
    if let Some(series) = summary::reference_series(rows) {
        let lat: Vec<Series> = ["median", "p90", "p99"]
            .iter()
            .map(|s| {
                (
                    format!("loaded {s}"),
                    stat(rows, &points, &format!("lat.{series}.loaded.{s}_ms")),
                )
            })
            .collect();
        html.push_str(&chart(
            &format!("latency under load ({series}) vs point"),
            "ms",
            &short,
            &lat,
        ));
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
        "throughput under load vs point",
        "Mbit/s",
        &short,
        &tput,
    ));
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
