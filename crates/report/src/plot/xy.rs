//! A chart of values against a numeric x (not time): lines with a marker at every measured
//! point, optional horizontal reference lines (a budget) and vertical ones (a chosen x).
//! `bloatlab tune` draws its measured curve with it: induced latency and throughput against
//! the shaper rate.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{bold, color, font};
use super::{Caption, DrawResult};
use crate::ReportError;

/// One line: legend text and its points (sorted by x when drawn).
#[derive(Debug, Clone, PartialEq)]
pub struct XySeries {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points.
    pub points: Vec<(f64, f64)>,
}

/// A reference line at a value, with its legend text.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    /// Legend text.
    pub label: String,
    /// Where.
    pub at: f64,
}

/// Everything an x-y chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct XyChart {
    /// Caption and axis descriptions.
    pub caption: Caption,
    /// Lines.
    pub series: Vec<XySeries>,
    /// Horizontal reference lines (dashed).
    pub hlines: Vec<RefLine>,
    /// Vertical reference lines (dashed).
    pub vlines: Vec<RefLine>,
}

/// Axis range covering `values`, padded 5 %; y ranges include zero.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    (
        lo - if from_zero && lo == 0.0 { 0.0 } else { pad },
        hi + pad,
    )
}

fn dashed(
    from: (f64, f64),
    to: (f64, f64),
    style: ShapeStyle,
) -> impl Iterator<Item = PathElement<(f64, f64)>> {
    const N: usize = 40;
    (0..N).step_by(2).map(move |i| {
        let at = |k: usize| {
            let f = k as f64 / N as f64;
            (from.0 + (to.0 - from.0) * f, from.1 + (to.1 - from.1) * f)
        };
        PathElement::new(vec![at(i), at(i + 1)], style)
    })
}

/// Draws the chart.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &XyChart) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x0, x1) = range(xs.chain(c.vlines.iter().map(|l| l.at)), false);
    let ys = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (y0, y1) = range(ys.chain(c.hlines.iter().map(|l| l.at)), true);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.caption.title, bold(18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(c.caption.x_desc.as_str())
        .y_desc(c.caption.y_desc.as_str())
        .label_style(font(13))
        .axis_desc_style(font(14))
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, s) in c.series.iter().enumerate() {
        let col = color(i);
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))?;
    }
    let refs = c
        .hlines
        .iter()
        .map(|l| (l, (x0, l.at), (x1, l.at)))
        .chain(c.vlines.iter().map(|l| (l, (l.at, y0), (l.at, y1))));
    for (k, (l, a, b)) in refs.enumerate() {
        let col = color(c.series.len() + k);
        chart
            .draw_series(dashed(a, b, col.stroke_width(2)))?
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], col.stroke_width(2)));
    }
    super::finish(root, &mut chart, SeriesLabelPosition::UpperLeft)
}

/// Draws the chart as an SVG document.
pub fn render_svg(c: &XyChart) -> Result<String, ReportError> {
    crate::fonts::ensure_registered();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, super::style::SIZE).into_drawing_area();
        draw(&root, c).map_err(|e| ReportError::Draw {
            chart: c.caption.title.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_values_and_zero() {
        assert_eq!(range([2.0, 4.0].into_iter(), true), (0.0, 4.2));
        let (a, b) = range([2.0, 4.0].into_iter(), false);
        assert!((a - 1.9).abs() < 1e-9 && (b - 4.1).abs() < 1e-9);
        assert_eq!(range(std::iter::empty(), true), (0.0, 1.05));
        let (a, _) = range([-3.0, 1.0].into_iter(), true);
        assert!(a < -3.0);
    }

    #[test]
    fn a_chart_renders_its_labels_and_every_point() {
        let c = XyChart {
            caption: Caption::new(
                "up: induced latency vs shaper rate",
                "shaper rate (Mbit/s)",
                "induced latency (ms)",
            ),
            series: vec![XySeries {
                label: "induced p90".into(),
                points: vec![(20.0, 300.0), (1.0, 2.0), (10.5, 40.0)],
            }],
            hlines: vec![RefLine {
                label: "budget 15 ms".into(),
                at: 15.0,
            }],
            vlines: vec![RefLine {
                label: "recommended".into(),
                at: 9.9,
            }],
        };
        let svg = render_svg(&c).unwrap();
        for want in [
            "induced p90",
            "budget 15 ms",
            "recommended",
            "shaper rate (Mbit/s)",
        ] {
            assert!(svg.contains(want), "{want}");
        }
        assert_eq!(svg.matches("<circle").count(), 3);
    }
}
