//! Colours, fonts and sizes shared by every chart.

use bloatlab_results::schema::PhaseKindRecord;
use plotters::style::{FontStyle, RGBColor, TextStyle};

use crate::fonts::FAMILY;

/// Chart size in pixels (PNG) or user units (SVG).
pub const SIZE: (u32, u32) = (1000, 420);

/// Tableau 10: distinguishable, colour-blind-friendlier than the default palette.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The `i`-th series colour (cycles).
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Background of a phase in time-series charts, and box fill in box plots.
pub fn phase_fill(kind: PhaseKindRecord) -> RGBColor {
    match kind {
        PhaseKindRecord::Idle => RGBColor(228, 240, 228),
        PhaseKindRecord::Loaded => RGBColor(252, 228, 208),
        PhaseKindRecord::Recovery => RGBColor(222, 232, 248),
    }
}

/// A darker version of [`phase_fill`], for box outlines and legend swatches.
pub fn phase_stroke(kind: PhaseKindRecord) -> RGBColor {
    match kind {
        PhaseKindRecord::Idle => RGBColor(60, 140, 60),
        PhaseKindRecord::Loaded => RGBColor(210, 100, 20),
        PhaseKindRecord::Recovery => RGBColor(50, 100, 190),
    }
}

/// Text of `size` pixels in the embedded font.
pub fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size))
}

/// Bold text. Goes through the `(family, size, style)` tuple: `.style(Bold)` on an
/// existing font keeps the normal glyphs in PNGs (plotters with the ab_glyph backend).
pub fn bold(size: u32) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size, FontStyle::Bold))
}

/// Makes a name safe and short for a file name: `[A-Za-z0-9._-]`, others become `_`.
pub fn file_stem(s: &str) -> String {
    let v: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    // A leading dot would hide the file.
    v.trim_start_matches('.').to_owned()
}
