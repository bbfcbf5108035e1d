//! `bloatlab report FILE...`: redraw saved runs without re-running them.
//!
//! Loads every results file first (a missing, corrupt, foreign or too-new file stops
//! the command before anything is written, with a message naming the file), prints the
//! per-phase summary of each run (and a side-by-side comparison when there are several)
//! on stdout, then renders every requested output in memory and writes each file
//! atomically (temp file + rename), so no output is ever left half-written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bloatlab_report::output::{ImageFormat, write_charts, write_file};
use bloatlab_report::view::{Comparison, RunView};
use bloatlab_report::{ReportError, Run, flent, html, load_runs, table};
use clap::Args;

use crate::exit::{Exit, FAILURE, usage};

/// Export formats understood by `--export`.
const EXPORT_FORMATS: &[&str] = &["flent"];

/// Arguments of `bloatlab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results files written by `bloatlab test` (several: compared side by side).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Write a self-contained HTML report (tables and charts, no network fetches).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Write the charts as PNG files into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// Write the charts as SVG files into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Export one run to another tool's format: `--export flent OUT.flent.gz`.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "OUT"])]
    pub export: Option<Vec<String>>,
    /// Do not print the summary tables.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `--export` asked for, validated.
struct Export {
    out: PathBuf,
}

fn parse_export(args: &ReportArgs) -> anyhow::Result<Option<Export>> {
    let Some(v) = &args.export else {
        return Ok(None);
    };
    let (format, out) = match v.as_slice() {
        [f, o] => (f.as_str(), o.as_str()),
        _ => {
            return Err(usage(
                "--export takes a format and an output file, e.g. --export flent run.flent.gz",
            ));
        }
    };
    if !EXPORT_FORMATS.contains(&format) {
        return Err(usage(format!(
            "--export: unknown format {format:?}; available: {}",
            EXPORT_FORMATS.join(", ")
        )));
    }
    if args.files.len() != 1 {
        return Err(usage(format!(
            "--export flent writes one run; {} results files were given",
            args.files.len()
        )));
    }
    Ok(Some(Export { out: out.into() }))
}

fn failure(e: ReportError) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: FAILURE,
        message: e.to_string(),
    })
}

/// Runs `bloatlab report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let export = parse_export(&args)?;
    let runs = load_runs(&args.files).map_err(failure)?;
    if !args.quiet {
        print!("{}", summary(&runs));
    }
    // Render everything before writing anything.
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    if let Some(path) = &args.html {
        files.push((
            path.clone(),
            html::render(&runs).map_err(failure)?.into_bytes(),
        ));
    }
    if let Some(e) = &export {
        let name = e
            .out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push((
            e.out.clone(),
            flent::to_gzip(&runs[0], &name).map_err(failure)?,
        ));
    }
    for (path, bytes) in &files {
        write_file(path, bytes).map_err(failure)?;
        eprintln!("wrote {}", path.display());
    }
    for (dir, format) in [(&args.png, ImageFormat::Png), (&args.svg, ImageFormat::Svg)] {
        if let Some(dir) = dir {
            let written = write_charts(dir, &runs, format)
                .map_err(failure)
                .with_context(|| format!("writing charts into {}", display(dir)))?;
            eprintln!("wrote {} charts into {}", written.len(), display(dir));
        }
    }
    Ok(())
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// The terminal summary: every run's tables, then the comparison if there are several.
fn summary(runs: &[Run]) -> String {
    let mut out = String::new();
    for r in runs {
        out.push_str(&table::run_summary(&RunView::new(r)));
        out.push('\n');
    }
    if runs.len() > 1 {
        out.push_str(&table::comparison(&Comparison::new(runs)));
    }
    out
}
