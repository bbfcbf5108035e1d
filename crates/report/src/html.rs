//! A self-contained HTML report: metadata, per-phase tables, a comparison table when
//! there are several runs, and every chart as inline SVG.
//!
//! Self-contained means the page makes **no request** when opened: the CSS is inline,
//! charts are inline `<svg>` (text is drawn by the viewer's default sans-serif font),
//! there are no scripts, no images, no web fonts, no links to other resources.
//!
//! Every user-controlled string (titles, labels, series names, metadata, command lines)
//! goes through minijinja's HTML auto-escaping; the only unescaped content is the SVG
//! produced by plotters, which escapes its own text.

use minijinja::Environment;
use minijinja::value::{Serde, Value};
use serde::Serialize;

use crate::ReportError;
use crate::plot::{charts, render_svg};
use crate::run::Run;
use crate::view::{Comparison, RunView};

const TEMPLATE: &str = include_str!("../templates/report.html");

#[derive(Debug, Serialize)]
struct Plot {
    id: String,
    title: String,
    svg: String,
}

#[derive(Debug, Serialize)]
struct Page {
    title: String,
    version: &'static str,
    runs: Vec<RunView>,
    comparison: Option<Comparison>,
    plots: Vec<Plot>,
}

/// Removes the SVG namespace declaration: inline SVG in HTML does not need it, and the
/// page then contains no URL at all that was not in the user's own data.
fn inline_svg(svg: String) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

/// Renders the report for `runs` (one or more).
pub fn render(runs: &[Run]) -> Result<String, ReportError> {
    let plots = charts(runs)
        .into_iter()
        .map(|c| {
            Ok(Plot {
                svg: inline_svg(render_svg(&c, runs)?),
                id: c.id,
                title: c.title,
            })
        })
        .collect::<Result<Vec<_>, ReportError>>()?;
    let title = match runs {
        [one] => format!(
            "bloatlab report: {}",
            one.file.metadata.title.as_deref().unwrap_or(&one.label)
        ),
        _ => format!(
            "bloatlab report: {}",
            runs.iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join(" vs ")
        ),
    };
    let page = Page {
        title,
        version: env!("CARGO_PKG_VERSION"),
        runs: runs.iter().map(RunView::new).collect(),
        comparison: (runs.len() > 1).then(|| Comparison::new(runs)),
        plots,
    };
    let mut env = Environment::new();
    // The `.html` name turns on HTML auto-escaping.
    env.add_template("report.html", TEMPLATE)?;
    Ok(env
        .get_template("report.html")?
        .render(Value::from(Serde(&page)))?)
}
