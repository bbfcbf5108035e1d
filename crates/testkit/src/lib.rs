//! Fixtures shared by the tests of several bloatlab crates. Only ever a dev-dependency: no
//! library exposes them in its API.
//!
//! * [`sample`]: deterministic synthetic results files (an RRUL-like run through a deep FIFO
//!   or an AQM) for the report and CLI tests.

#![forbid(unsafe_code)]

pub mod sample;
