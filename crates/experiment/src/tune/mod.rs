//! `bloatlab tune`: the highest shaper rate that keeps latency under load within a budget.
//!
//! * [`search`]: the bisection with repeats, sans-IO (rates in, verdicts out).
//! * [`measure`]: one measurement: a single-direction `bloatlab test` load with latency
//!   probes; induced latency = loaded p50/p90 minus the idle median of the RTT series.
//! * [`rate`]: how a rate is applied: a lab's stage (`lab set --stage-rate`, the emulator's
//!   control path, no rebuild) or the user's command (`--set-rate-cmd`), and restored.
//! * [`driver`]: runs the search per direction, with progress and Ctrl-C.
//! * [`output`]: the terminal table, `--json` and `--html`.
//!
//! docs/experiments.md ("tune") documents the command.

pub mod driver;
pub mod measure;
pub mod output;
pub mod rate;
pub mod search;

pub use search::{CurvePoint, Measurement, Rule, Search, SearchConfig, Step, Verdict};
