//! bloatlab's responsiveness client after draft-ietf-ippm-responsiveness-09 ("RPM").
//!
//! The algorithm is sans-IO and deterministic: [`params`] (the draft's parameters and
//! defaults), [`config`] (the `/.well-known/nq` document), [`schedule`] (probe slots
//! under the MPS and PTC caps), [`stability`] (the standard-deviation rule and the
//! confidence levels), [`aggregate`] (trimmed means, RPM, the P90 figure) and [`run`]
//! (one run: ramp, goodput and responsiveness stages, deadline, errors). docs/rpm.md is
//! the user's guide.

#![forbid(unsafe_code)]

pub mod aggregate;
pub mod client;
pub mod config;
pub mod params;
pub mod results;
pub mod run;
pub mod schedule;
pub mod stability;

pub use params::Params;
pub use run::{Action, Direction, Outcome, Run, RunError};
pub use stability::Confidence;

#[cfg(test)]
mod run_tests;
