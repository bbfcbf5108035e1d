//! Charts as PNG or SVG, drawn with plotters and the embedded DejaVu fonts.
//!
//! [`charts`] lists what a report draws for a set of runs: per run a throughput chart
//! (if it has flows) and a latency chart (if it has probes), then one latency CDF and
//! one box plot over all runs. [`render_png`] / [`render_svg`] draw one chart in memory;
//! writing files is [`crate::output`]'s job, so a failure never leaves half a file.

pub mod boxplot;
pub mod cdf;
pub mod grid;
pub mod latency;
pub mod style;
pub mod sweep;
pub mod throughput;
pub mod timeseries;
pub mod xy;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::ReportError;
use crate::run::Run;

/// Which chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    /// Throughput over time of run `n`.
    Throughput(usize),
    /// Latency over time of run `n`.
    Latency(usize),
    /// Latency CDFs of every run.
    Cdf,
    /// Box plots of every run.
    Box,
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    /// File stem (`throughput`, `fifo-latency`, …), unique within a report.
    pub id: String,
    /// What it shows, for people.
    pub title: String,
    /// What to draw.
    pub kind: ChartKind,
}

/// The words around a chart with numeric axes ([`xy::XyChart`], [`sweep::SweepChart`]):
/// its caption and what each axis shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caption {
    /// Caption above the plot.
    pub title: String,
    /// X axis description (with its unit, if it has one).
    pub x_desc: String,
    /// Y axis description (with its unit).
    pub y_desc: String,
}

impl Caption {
    /// A caption from its three texts.
    pub fn new(
        title: impl Into<String>,
        x_desc: impl Into<String>,
        y_desc: impl Into<String>,
    ) -> Caption {
        Caption {
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
        }
    }
}

/// The charts of a report on `runs`.
pub fn charts(runs: &[Run]) -> Vec<Chart> {
    let prefix = |r: &Run| {
        if runs.len() > 1 {
            format!("{}-", style::file_stem(&r.label))
        } else {
            String::new()
        }
    };
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        if !r.flows.is_empty() {
            out.push(Chart {
                id: format!("{}throughput", prefix(r)),
                title: format!("{}: throughput over time", r.label),
                kind: ChartKind::Throughput(i),
            });
        }
        if !r.latency.is_empty() {
            out.push(Chart {
                id: format!("{}latency", prefix(r)),
                title: format!("{}: latency over time", r.label),
                kind: ChartKind::Latency(i),
            });
        }
    }
    if runs.iter().any(|r| !r.latency.is_empty()) {
        out.push(Chart {
            id: "latency-cdf".into(),
            title: "latency CDF (loaded phase)".into(),
            kind: ChartKind::Cdf,
        });
        out.push(Chart {
            id: "latency-box".into(),
            title: "latency box plots per phase".into(),
            kind: ChartKind::Box,
        });
    }
    out
}

/// What drawing a chart returns: the backend's error, if any.
pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Every chart's last step: the series legend (same look on every chart) at
/// `position`, then the page is presented.
pub fn finish<'a, DB: DrawingBackend + 'a>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> DrawResult<DB> {
    chart
        .configure_series_labels()
        .label_font(style::font(12))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .position(position)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Pixel size of a chart.
pub fn size(chart: &Chart, runs: &[Run]) -> (u32, u32) {
    match chart.kind {
        ChartKind::Box => (boxplot::width(runs), style::SIZE.1),
        _ => style::SIZE,
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    runs: &[Run],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let run = |i: usize| runs.get(i).ok_or_else(|| format!("no run {i}"));
    match chart.kind {
        ChartKind::Throughput(i) => match throughput::chart(run(i)?) {
            Some(ts) => timeseries::draw(root, &ts).map_err(err),
            None => Err("the run has no load flows".into()),
        },
        ChartKind::Latency(i) => match latency::chart(run(i)?) {
            Some(ts) => timeseries::draw(root, &ts).map_err(err),
            None => Err("the run has no latency probes".into()),
        },
        ChartKind::Cdf => cdf::draw(root, runs).map_err(err),
        ChartKind::Box => boxplot::draw(root, runs).map_err(err),
    }
}

fn draw_error(chart: &Chart, message: String) -> ReportError {
    ReportError::Draw {
        chart: chart.id.clone(),
        message,
    }
}

/// Draws `chart` as an SVG document.
pub fn render_svg(chart: &Chart, runs: &[Run]) -> Result<String, ReportError> {
    crate::fonts::ensure_registered();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size(chart, runs)).into_drawing_area();
        draw(&root, chart, runs).map_err(|m| draw_error(chart, m))?;
    }
    Ok(svg)
}

/// Draws `chart` as a PNG file image (RGB, 8 bit).
pub fn render_png(chart: &Chart, runs: &[Run]) -> Result<Vec<u8>, ReportError> {
    crate::fonts::ensure_registered();
    let (w, h) = size(chart, runs);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, chart, runs).map_err(|m| draw_error(chart, m))?;
    }
    encode_png(&rgb, w, h)
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, ReportError> {
    let err = |e: png::EncodingError| ReportError::Encode {
        what: "PNG",
        message: e.to_string(),
    };
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(rgb).map_err(err)?;
        writer.finish().map_err(err)?;
    }
    Ok(out)
}

/// Draws a time series a caller built (an experiment's own chart, such as `variable-link`'s
/// shaper rate over the line's capacity) as an SVG document of the usual size.
pub fn render_timeseries_svg(ts: &timeseries::TimeSeries<'_>) -> Result<String, ReportError> {
    crate::fonts::ensure_registered();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, style::SIZE).into_drawing_area();
        timeseries::draw(&root, ts).map_err(|e| ReportError::Draw {
            chart: ts.title.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(svg)
}
