//! Fixtures shared by the tests of several bloatlab crates. Only ever a dev-dependency: no
//! library exposes them in its API.
//!
//! * [`sample`]: deterministic synthetic results files (an RRUL-like run through a deep FIFO
//!   or an AQM) for the report and CLI tests.
//! * [`tier`]: the test tiers (skip a root-only test for a normal user, fail it under the
//!   README's test command).

#![forbid(unsafe_code)]

pub mod sample;
pub mod tier;
