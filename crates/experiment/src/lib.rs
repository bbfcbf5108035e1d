//! bloatlab-experiment: experiments declared in a TOML file and run in labs.
//!
//! * [`file`]: the file format, parsed with the line of every key kept, so a bad key, a
//!   parameter that is not an option or an empty matrix is reported with its line before
//!   anything starts.
//! * [`matrix`]: points (the cartesian product of the parameters), names, order with
//!   repetitions, shards, and each point's `lab up` / `test` (or `client`) / `server` options.
//! * [`points`]: those options typed ([`points::check`]) with the commands' own flags
//!   (`bloatlab_invoke`), an error naming the option's TOML key and line; [`during`]: the
//!   `[during]` sidecar typed the same way (`bloatlab autorate`'s plan).
//! * [`runner`]: runs (or resumes) the experiment in labs through the `bloatlab` binary and
//!   writes `DIR/runs/*`, `DIR/summary.csv`, `DIR/summary.json` and `DIR/report.html`;
//!   [`runner::merge`] joins shard directories.
//! * [`summary`], [`html`]: the combined results.
//! * [`builtin`]: the field reports as built-in experiments, with their criteria.
//! * [`completeness`]: whether each run and point happened as asked (stalled flows, lost
//!   probes, empty phases); [`verdict`]: the verdict with its criterion, table and each
//!   point's completeness, as written to `verdict.txt`, `summary.json` and `report.html`.
//!
//! The format is documented in docs/experiments.md.

#![forbid(unsafe_code)]

pub mod builtin;
pub mod completeness;
pub mod during;
pub mod file;
pub mod html;
pub mod matrix;
pub mod points;
pub mod runner;
mod sidecar;
pub mod summary;
pub mod tune;
pub mod verdict;

pub use file::{Experiment, FileError, parse};
pub use matrix::{Point, Run, Shard};
