//! Embedded fonts for the charts.
//!
//! plotters is built without its `ttf` feature, so it never looks at system fonts
//! (fontconfig); text is laid out and rasterised with `ab_glyph` from the DejaVu fonts
//! compiled into the binary. Registration must happen before any chart draws text,
//! otherwise plotters fails with `FontUnavailable`; [`ensure_registered`] does it once.

use std::sync::OnceLock;

use plotters::style::{FontStyle, register_font};

/// The family name charts use.
pub const FAMILY: &str = "sans-serif";

/// Registers DejaVu Sans (normal and bold) as `sans-serif`, once per process.
/// Returns `false` if the embedded font data were rejected (cannot happen with the
/// `dejavu` crate's fonts, but the API is fallible).
pub fn ensure_registered() -> bool {
    static DONE: OnceLock<bool> = OnceLock::new();
    *DONE.get_or_init(|| {
        let normal = register_font(FAMILY, FontStyle::Normal, dejavu::sans::regular()).is_ok();
        let bold = register_font(FAMILY, FontStyle::Bold, dejavu::sans::bold()).is_ok();
        normal && bold
    })
}
