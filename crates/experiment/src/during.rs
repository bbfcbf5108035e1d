//! `[during]`: the command run beside each test (a sidecar, docs/experiments.md), typed when
//! the file is checked. `args` stays text in the file (`"{arm.during}"` with the command in a
//! zipped matrix field); at each point its words, placeholders filled in, are parsed once by
//! `bloatlab autorate`'s own flag definitions and resolved into its
//! [`Plan`](bloatlab_invoke::autorate::Plan). A run starts the plan written back by
//! [`bloatlab_invoke::autorate::to_argv`] with the run's lab and output file, never the
//! file's words.
//!
//! The sidecar is `autorate` on the run's lab: `--lab {lab}` (the runner names each run's
//! lab), `-o {out}` or no `-o` (each run's `runs/RUN.during.json`), and no `--duration`
//! (the runner stops it after the test). An error names the file, the line of the word at
//! fault (the `[matrix]` line when the word came from a swept value, else `args`'s) and that
//! line's TOML key, like [`crate::points`]' errors.

use crate::file::Experiment;
use crate::matrix::{self, Point};
use crate::points::{PointError, clap_flags, with_aliases};
use bloatlab_invoke::autorate::{AutorateArgs, Place, Plan, to_argv};
use clap::{Args, FromArgMatches};
use std::path::Path;

/// The lab name the plan is checked with; a run puts its own lab in its place.
const CHECK_LAB: &str = "check";

/// A point's sidecar: `bloatlab autorate` on the run's lab.
#[derive(Debug, Clone, PartialEq)]
pub struct During {
    /// The resolved flags, with [`CHECK_LAB`] for the lab and no output file.
    plan: Plan,
    /// `-o {out}` was given: the run's `runs/RUN.during.json` is the output.
    output: bool,
}

impl During {
    /// The plan as it is checked (the lab named `check`, no output file).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The command line (after the program name) of one run's sidecar: on `lab`, writing
    /// `out` when the file asked for `{out}`.
    pub fn to_argv(&self, lab: &str, out: &Path) -> Vec<String> {
        let mut plan = self.plan.clone();
        if let Place::Lab { lab: l, .. } = &mut plan.place {
            *l = lab.to_owned();
        }
        plan.output = self.output.then(|| out.to_path_buf());
        to_argv(&plan)
    }
}

/// One word of `args` at a point, with where it came from.
struct Word {
    text: String,
    line: usize,
    /// The TOML key at `line`: `args`, or the matrix parameter (`arm`).
    key: String,
}

/// `args`' words at `point`: each raw word's placeholders filled in (a swept value may
/// give several words), from the line of the `[matrix]` parameter it used, else `args`'s.
/// `{lab}` and `{out}` stay words of their own for [`of_point`] to check.
fn words(exp: &Experiment, point: &Point, args: &str, line: usize) -> Vec<Word> {
    let mut out = Vec::new();
    for raw in args.split_whitespace() {
        let source = exp
            .matrix
            .iter()
            .find(|p| {
                point.params.iter().any(|(k, _)| {
                    (k == &p.name || k.starts_with(&format!("{}.", p.name)))
                        && raw.contains(&format!("{{{k}}}"))
                })
            })
            .map_or((line, "args".to_owned()), |p| (p.line, p.name.clone()));
        for text in matrix::substitute(raw, point).split_whitespace() {
            out.push(Word {
                text: text.to_owned(),
                line: source.0,
                key: source.1.clone(),
            });
        }
    }
    out
}

/// `[during]` of `point`, typed; `None` when the point has none (no `[during]`, or its
/// words come out empty).
pub fn of_point(exp: &Experiment, point: &Point) -> Result<Option<During>, PointError> {
    resolve(exp, point, None)
}

/// [`of_point`], and its `--stage` found in the point's lab `lab` for every direction it
/// controls (as autorate will look it up when it starts), so a stage the lab does not have
/// is refused with the file, not when the run starts.
pub fn of_point_in(
    exp: &Experiment,
    point: &Point,
    lab: &bloatlab_lab::LabSpec,
) -> Result<Option<During>, PointError> {
    resolve(exp, point, Some(lab))
}

fn resolve(
    exp: &Experiment,
    point: &Point,
    lab: Option<&bloatlab_lab::LabSpec>,
) -> Result<Option<During>, PointError> {
    let Some((args, args_line)) = &exp.during else {
        return Ok(None);
    };
    let words = words(exp, point, args, *args_line);
    let Some(first) = words.first() else {
        return Ok(None);
    };
    // The word of the first of `flags` the command has, else the first word.
    let error = |flags: &[String], message: &str| {
        let at = flags
            .iter()
            .find_map(|f| {
                words
                    .iter()
                    .find(|w| w.text.split('=').next() == Some(f.as_str()))
            })
            .unwrap_or(first);
        let message = message.lines().find(|l| !l.trim().is_empty());
        let message = message.unwrap_or_default().trim();
        let quick = if exp.quick_variant {
            " under --quick"
        } else {
            ""
        };
        PointError {
            file: exp.file.clone(),
            line: at.line,
            key: Some(at.key.clone()),
            context: format!(
                "[during] of point {} ({}){quick}",
                point.name(),
                point.label()
            ),
            message: message.trim_start_matches("error: ").to_owned(),
        }
    };
    if first.text != "autorate" {
        return Err(error(
            &[],
            &format!(
                "{:?}: the command run beside a test is `autorate` (its options are checked \
                 with the file)",
                first.text
            ),
        ));
    }
    let cmd = AutorateArgs::augment_args(clap::Command::new("autorate"));
    let mut a = cmd
        .clone()
        .try_get_matches_from(words.iter().map(|w| w.text.as_str()))
        .and_then(|m| AutorateArgs::from_arg_matches(&m))
        .map_err(|e| error(&clap_flags(&cmd, &e), &e.to_string()))?;
    let names = |flags: &[&str]| with_aliases(&cmd, flags);
    if a.lab.as_deref() != Some("{lab}") {
        return Err(error(
            &names(&["--lab", "--set-rate-cmd", "--iface"]),
            "--lab: the sidecar controls the run's lab: write --lab {lab}",
        ));
    }
    let output = match &a.output {
        None => false,
        Some(o) if o == Path::new("{out}") => true,
        Some(_) => {
            return Err(error(
                &names(&["--output"]),
                "-o/--output: write -o {out} (each run's runs/RUN.during.json)",
            ));
        }
    };
    if a.duration.is_some() {
        return Err(error(
            &names(&["--duration"]),
            "--duration: the sidecar runs until the test ends (the runner stops it)",
        ));
    }
    a.lab = Some(CHECK_LAB.to_owned());
    a.output = None;
    let plan = a
        .resolve()
        .map_err(|e| error(&names(&e.flags), &e.message))?;
    if let (Some(spec), Place::Lab { stage, .. }) = (lab, &plan.place) {
        for (dir, controlled) in [("down", plan.down.is_some()), ("up", plan.up.is_some())] {
            if controlled {
                bloatlab_lab::stages::controllable_stage(spec, dir, stage)
                    .map_err(|m| error(&names(&["--stage"]), &m))?;
            }
        }
    }
    Ok(Some(During { plan, output }))
}

#[cfg(test)]
mod tests;
