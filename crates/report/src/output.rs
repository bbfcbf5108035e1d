//! Writing outputs atomically: every file is written to a temporary file in the same
//! directory and renamed over the target (`bloatlab_results::write_atomic`), so an
//! interrupted or failed report leaves either the old file or the complete new one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ReportError;
use crate::plot::{charts, render_png, render_svg};
use crate::run::Run;

/// Image format of chart files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// PNG, RGB 8 bit.
    Png,
    /// SVG 1.1.
    Svg,
}

/// Writes `bytes` to `path` atomically.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    bloatlab_results::write_atomic(path, |f| f.write_all(bytes)).map_err(|source| {
        ReportError::Write {
            path: path.to_owned(),
            source,
        }
    })
}

/// Renders every chart in memory, then writes them into `dir` (created if missing) as
/// `<chart id>.png` or `.svg`. Returns the files written, in chart order. If a chart
/// cannot be drawn, nothing is written.
pub fn write_charts(
    dir: &Path,
    runs: &[Run],
    format: ImageFormat,
) -> Result<Vec<PathBuf>, ReportError> {
    let rendered = charts(runs)
        .iter()
        .map(|c| {
            Ok(match format {
                ImageFormat::Png => (format!("{}.png", c.id), render_png(c, runs)?),
                ImageFormat::Svg => (format!("{}.svg", c.id), render_svg(c, runs)?.into_bytes()),
            })
        })
        .collect::<Result<Vec<_>, ReportError>>()?;
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_owned(),
        source,
    })?;
    rendered
        .into_iter()
        .map(|(name, bytes)| {
            let path = dir.join(name);
            write_file(&path, &bytes)?;
            Ok(path)
        })
        .collect()
}

/// Renders the HTML report for `runs` and writes it to `path` atomically (for callers
/// such as `bloatlab demo` that hold runs in memory).
pub fn write_html(path: &Path, runs: &[Run]) -> Result<(), ReportError> {
    let page = crate::html::render(runs)?;
    write_file(path, page.as_bytes())
}
