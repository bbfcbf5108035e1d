//! bloatlab reports: redraw any saved run without re-running it.
//!
//! Input is one or more results files (`bloatlab-results`), loaded into [`Run`]s. Every
//! number is recomputed from the raw samples with `bloatlab-stats` (the file's `derived`
//! section is never trusted), so a report always matches the current definitions in
//! `docs/statistics.md`.
//!
//! * [`run`]: a loaded run, its label, timeline, series and derived figures.
//! * [`view`]: the figures formatted for people (one formatting for terminal and HTML).
//! * [`meta`]: the typed metadata records as text.
//! * [`table`]: plain-text tables for the terminal, one run or a side-by-side comparison.
//! * [`plot`]: PNG and SVG charts with embedded DejaVu fonts (no system fonts needed):
//!   throughput and latency time series (gaps left open, loss marked, phases shaded),
//!   latency CDFs overlaying runs, box plots per run and phase.
//! * [`html`]: a self-contained HTML report (inline CSS and SVG, no scripts, no fetches).
//! * [`flent`]: flent's `.flent.gz` data format (FILEFORMAT_VERSION 4).
//! * [`output`]: atomic writing of every output file (temp file + rename).
//!
//! Plot and layout conventions are documented in `docs/report.md`.

#![forbid(unsafe_code)]

pub mod flent;
pub mod fonts;
pub mod html;
pub mod lab;
pub mod meta;
pub mod output;
pub mod plot;
pub mod run;
pub mod table;
pub mod view;

pub use bloatlab_results as results;
pub use run::{Run, load_runs};

use std::path::PathBuf;

/// The reason part of a load error, without the path the I/O variant repeats.
fn load_reason(e: &bloatlab_results::LoadError) -> String {
    match e {
        bloatlab_results::LoadError::Io { source, .. } => format!("cannot read: {source}"),
        other => other.to_string(),
    }
}

/// Why a report could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file could not be loaded. The message names the file (once).
    #[error("{}: {}", path.display(), load_reason(source))]
    Load {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: bloatlab_results::LoadError,
    },
    /// A loaded file's raw data is inconsistent.
    #[error("{label}: {source}")]
    Raw {
        /// The run.
        label: String,
        /// The problem.
        source: bloatlab_results::RawError,
    },
    /// plotters failed to draw a chart.
    #[error("cannot draw the {chart} chart: {message}")]
    Draw {
        /// Which chart.
        chart: String,
        /// plotters' description.
        message: String,
    },
    /// The HTML template failed to render.
    #[error("cannot render the HTML report: {0}")]
    Template(#[from] minijinja::Error),
    /// An output file could not be written (nothing was left half-written).
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The target file.
        path: PathBuf,
        /// The filesystem error.
        source: bloatlab_results::SaveError,
    },
    /// An output directory could not be created.
    #[error("cannot create directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Encoding a PNG or gzip stream failed.
    #[error("cannot encode {what}: {message}")]
    Encode {
        /// `PNG` or `gzip`.
        what: &'static str,
        /// The encoder's description.
        message: String,
    },
}
