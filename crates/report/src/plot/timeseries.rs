//! Drawing of time series shared by the throughput and latency charts.
//!
//! * A line is a list of `(t, Option<value>)` points. `None` means "no data here": the
//!   line is **broken** there, never bridged or interpolated, and a run of one point
//!   between two gaps is drawn as a dot so it stays visible.
//! * Marks (e.g. lost probes) are drawn as `x` markers in a strip just below zero, so
//!   they never hide a measured value.
//! * Phases are shaded (idle green, loaded orange, recovery blue) and named at the top.

use bloatlab_results::schema::PhaseRecord;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::DrawResult;
use super::style::{bold, font, phase_fill};

/// One line of a time series chart.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub color: RGBColor,
    /// Stroke width in pixels.
    pub width: u32,
    /// `(seconds since run start, value)`; `None` = missing, leave a gap.
    pub points: Vec<(f64, Option<f64>)>,
}

/// Event markers along the time axis.
#[derive(Debug, Clone)]
pub struct Marks {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub color: RGBColor,
    /// Event times, seconds since run start.
    pub times: Vec<f64>,
}

/// Everything one time series chart shows.
#[derive(Debug, Clone)]
pub struct TimeSeries<'a> {
    /// Caption.
    pub title: String,
    /// Y axis description (with unit).
    pub y_desc: &'static str,
    /// X axis end, seconds.
    pub x_end: f64,
    /// Phases to shade.
    pub phases: &'a [PhaseRecord],
    /// Lines.
    pub lines: Vec<Line>,
    /// Markers.
    pub marks: Vec<Marks>,
}

/// Splits points into maximal runs of present values.
pub fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for &(x, y) in points {
        match y {
            Some(y) if y.is_finite() => cur.push((x, y)),
            _ => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Draws `ts` on `root`.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, ts: &TimeSeries) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let y_max = ts
        .lines
        .iter()
        .flat_map(|l| l.points.iter().filter_map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };
    // The strip below zero holds the markers.
    let y_min = -y_max * 0.06;
    let x_end = if ts.x_end > 0.0 { ts.x_end } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption(&ts.title, bold(18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_end, y_min..y_max)?;

    for p in ts.phases {
        let (a, b) = (p.start_ns as f64 / 1e9, p.end_ns as f64 / 1e9);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(a, y_min), (b, y_max)],
            phase_fill(p.kind).filled(),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            p.name.clone(),
            (a + x_end * 0.004, y_max * 0.96),
            font(12).color(&RGBColor(90, 90, 90)),
        )))?;
    }
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc(ts.y_desc)
        .label_style(font(13))
        .axis_desc_style(font(14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(210, 210, 210))
        // Negative ticks would sit in the marker strip; they mean nothing.
        .y_label_formatter(&|v| {
            if *v < -1e-9 {
                String::new()
            } else {
                format!("{v}")
            }
        })
        .draw()?;
    // Zero line separating values from the marker strip.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 0.0), (x_end, 0.0)],
        RGBColor(150, 150, 150).stroke_width(1),
    )))?;

    for line in &ts.lines {
        let style = line.color.stroke_width(line.width);
        let segs = segments(&line.points);
        let color = line.color;
        let legend = move |(x, y): (i32, i32)| {
            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
        };
        let mut labelled = false;
        for seg in segs {
            let anno = if seg.len() == 1 {
                chart.draw_series(std::iter::once(Circle::new(seg[0], 2, color.filled())))?
            } else {
                chart.draw_series(LineSeries::new(seg, style))?
            };
            if !labelled {
                anno.label(line.label.clone()).legend(legend);
                labelled = true;
            }
        }
        if !labelled {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                .label(format!("{} (no data)", line.label))
                .legend(legend);
        }
    }
    let y_mark = y_min / 2.0;
    for m in &ts.marks {
        let color = m.color;
        let anno = chart.draw_series(
            m.times
                .iter()
                .map(|&t| Cross::new((t, y_mark), 4, color.stroke_width(2))),
        )?;
        anno.label(m.label.clone())
            .legend(move |(x, y)| Cross::new((x + 10, y), 4, color.stroke_width(2)));
    }
    super::finish(root, &mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_split_lines_and_are_never_bridged() {
        let pts = [
            (0.0, Some(1.0)),
            (1.0, Some(2.0)),
            (2.0, None),
            (3.0, Some(5.0)),
            (4.0, None),
            (5.0, Some(f64::NAN)),
            (6.0, Some(7.0)),
            (7.0, Some(8.0)),
        ];
        assert_eq!(
            segments(&pts),
            vec![
                vec![(0.0, 1.0), (1.0, 2.0)],
                vec![(3.0, 5.0)],
                vec![(6.0, 7.0), (7.0, 8.0)]
            ]
        );
        assert!(segments(&[(0.0, None)]).is_empty());
    }
}
