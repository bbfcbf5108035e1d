//! A chart of values against a swept parameter: one x position per point of an
//! experiment, labelled with the point's parameter values (not its number), one line per
//! quantity with a marker at each point and a ±1 standard deviation bar where repetitions
//! differ. The y axis is logarithmic when the values span more than two decades (issue 18:
//! report 4's 40 ms shaped points lay flat under SQM off's seconds) and says so in the
//! title. The legend has a column of its own right of the plot area, so it never crosses
//! the data. `bloatlab experiment`'s `report.html` draws every sweep chart with it.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{bold, color, font};
use super::{Caption, DrawResult};
use crate::ReportError;

/// One line: legend text and, per point, `(mean, standard deviation)` or nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSeries {
    /// Legend text.
    pub label: String,
    /// Aligned with [`SweepChart::points`].
    pub values: Vec<Option<(f64, f64)>>,
}

/// Everything a sweep chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepChart {
    /// Caption (` (log scale)` is appended to its title when the axis is logarithmic) and
    /// axis descriptions (x: the swept parameters).
    pub caption: Caption,
    /// Each point's label, in x order (`SQM off`, `6089kbit/737kbit`; several parameters
    /// one per line, `load=one_vs_one\nlab.ecn=all`, drawn on one line joined by `, `).
    pub points: Vec<String>,
    /// The lines.
    pub series: Vec<SweepSeries>,
}

/// Chart size: the usual height, wider for the legend column.
pub const SIZE: (u32, u32) = (1100, 420);

/// Legend column width (px), right of the plot area.
pub const LEGEND_W: u32 = 200;

/// Whether a y axis over these values needs a log scale: the positive ones span more
/// than two decades.
pub fn needs_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    lo.is_finite() && hi / lo > 100.0
}

impl SweepChart {
    fn means(&self) -> impl Iterator<Item = f64> + '_ {
        self.series
            .iter()
            .flat_map(|s| s.values.iter().flatten().map(|(m, _)| *m))
    }

    /// Whether the y axis is logarithmic ([`needs_log`] of the means).
    pub fn log(&self) -> bool {
        needs_log(self.means())
    }

    /// The caption as drawn.
    pub fn caption(&self) -> String {
        if self.log() {
            format!("{} (log scale)", self.caption.title)
        } else {
            self.caption.title.clone()
        }
    }
}

/// The y range: linear from 0 to 5 % above the largest mean + sd (1 when all are 0); log
/// (in decades, `log10` of the values) from the decade below the smallest positive mean to
/// the one above the largest mean + sd.
fn y_range(c: &SweepChart, log: bool) -> (f64, f64) {
    let top = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten().map(|(m, sd)| m + sd))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    if log {
        let lo = c
            .means()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        (lo.log10().floor(), top.log10().ceil())
    } else if top > 0.0 {
        (0.0, top * 1.05)
    } else {
        (0.0, 1.0)
    }
}

/// Draws the chart on `root`.
pub fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &SweepChart) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (w, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(w.saturating_sub(LEGEND_W));
    let log = c.log();
    let (y0, y1) = y_range(c, log);
    // A value as drawn: its decade on a log axis (values at or under 0 sit on the floor).
    let y = move |v: f64| {
        if log {
            v.max(10f64.powf(y0)).log10()
        } else {
            v
        }
    };
    let n = c.points.len().max(1);
    let labels: Vec<String> = c.points.iter().map(|p| p.replace('\n', ", ")).collect();
    let mut chart = ChartBuilder::on(&plot)
        .caption(c.caption(), bold(18))
        .margin(12)
        .x_label_area_size(if n > 8 { 90 } else { 50 })
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, y0..y1)?;
    let x_label = |v: &f64| {
        let i = v.round();
        if (v - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        labels.get(i as usize).cloned().unwrap_or_default()
    };
    let y_label = move |v: &f64| {
        let v = if log { 10f64.powf(*v) } else { *v };
        tick(v)
    };
    chart
        .configure_mesh()
        .x_desc(c.caption.x_desc.as_str())
        .y_desc(c.caption.y_desc.as_str())
        .x_labels(n + 1)
        .y_labels(if log { (y1 - y0) as usize + 1 } else { 6 })
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_label_style(if n > 8 {
            font(12).transform(FontTransform::Rotate270)
        } else {
            font(13)
        })
        .label_style(font(13))
        .axis_desc_style(font(14))
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, s) in c.series.iter().enumerate() {
        let col = color(i);
        // A missing point breaks the line: never bridged.
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (k, v) in s.values.iter().enumerate() {
            match v {
                Some((m, _)) if m.is_finite() => runs
                    .last_mut()
                    .expect("never empty")
                    .push((k as f64, y(*m))),
                _ => runs.push(Vec::new()),
            }
        }
        for r in runs.into_iter().filter(|r| r.len() > 1) {
            chart.draw_series(LineSeries::new(r, col.stroke_width(2)))?;
        }
        let pts = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.filter(|(m, _)| m.is_finite()).map(|(m, sd)| (k, m, sd)));
        for (k, m, sd) in pts {
            let x = k as f64;
            chart.draw_series(std::iter::once(Circle::new((x, y(m)), 4, col.filled())))?;
            if sd > 0.0 {
                let bar = vec![(x, y((m - sd).max(0.0))), (x, y(m + sd))];
                chart.draw_series(std::iter::once(PathElement::new(bar, col.stroke_width(1))))?;
            }
        }
    }
    // The legend column: a swatch and the label per line, top down.
    for (i, s) in c.series.iter().enumerate() {
        let top = 40 + 20 * i as i32;
        legend.draw(&Rectangle::new(
            [(8, top), (20, top + 12)],
            color(i).filled(),
        ))?;
        legend.draw(&Text::new(s.label.clone(), (26, top), font(13)))?;
    }
    root.present()?;
    Ok(())
}

/// An axis label: whole numbers from 100 up, else at most two decimals without trailing
/// zeros (2.5, 0.25, 20; a log axis's 0.1 and 1000 as they are).
pub fn tick(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Draws the chart as an SVG document.
pub fn render_svg(c: &SweepChart) -> Result<String, ReportError> {
    crate::fonts::ensure_registered();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
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

    /// Whether the SVG has a text element reading exactly `s` (plotters writes
    /// `<text ...>\ns\n</text>`).
    fn has_text(svg: &str, s: &str) -> bool {
        svg.contains(&format!(">\n{s}\n</text>"))
    }

    fn chart(values: &[Option<(f64, f64)>]) -> SweepChart {
        SweepChart {
            caption: Caption::new("latency vs shaper", "shaper", "ms"),
            points: (0..values.len()).map(|i| format!("point {i}")).collect(),
            series: vec![SweepSeries {
                label: "loaded median".into(),
                values: values.to_vec(),
            }],
        }
    }

    #[test]
    fn past_two_decades_the_axis_is_logarithmic_and_says_so() {
        let c = chart(&[Some((44.0, 0.0)), Some((4900.0, 0.0))]);
        assert!(c.log());
        let svg = render_svg(&c).unwrap();
        assert!(svg.contains("latency vs shaper (log scale)"), "{svg}");
        // Decades from 10 to 10000.
        for t in ["10", "100", "1000", "10000"] {
            assert!(has_text(&svg, t), "{t}: {svg}");
        }
        let near = chart(&[Some((44.0, 0.0)), Some((300.0, 0.0))]);
        assert!(!near.log());
        assert!(!render_svg(&near).unwrap().contains("(log scale)"));
    }

    #[test]
    fn points_are_labelled_by_value_with_a_marker_and_an_error_bar() {
        let svg = render_svg(&chart(&[Some((1.0, 0.5)), None, Some((2.0, 0.0))])).unwrap();
        assert!(
            has_text(&svg, "point 0") && has_text(&svg, "point 2"),
            "{svg}"
        );
        assert_eq!(
            svg.matches("<circle").count(),
            2,
            "no marker for a missing point"
        );
        assert!(has_text(&svg, "loaded median"), "legend");
    }

    #[test]
    fn the_legend_is_right_of_the_plot_area() {
        let svg = render_svg(&chart(&[Some((1.0, 0.0)), Some((2.0, 0.0))])).unwrap();
        // The legend swatch starts in the legend column (x >= width - LEGEND_W).
        let x0 = SIZE.0 - LEGEND_W;
        assert!(
            svg.contains(&format!(r#"<rect x="{}""#, x0 + 8)),
            "swatch at {}: {svg}",
            x0 + 8
        );
    }

    #[test]
    fn an_all_zero_chart_has_an_axis_to_one() {
        assert_eq!(y_range(&chart(&[Some((0.0, 0.0))]), false), (0.0, 1.0));
        assert!(render_svg(&chart(&[Some((0.0, 0.0))])).is_ok());
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(tick(6.5593), "6.56");
        assert_eq!(tick(16.5), "16.5");
        assert_eq!(tick(20.0), "20");
        assert_eq!(tick(4217.6), "4218");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.1), "0.1");
        assert!(needs_log([0.0, 1.0, 101.0].into_iter()));
        assert!(!needs_log([0.0, 0.0].into_iter()));
    }
}
