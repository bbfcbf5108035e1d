//! bloatlab's test suites (`bloatlab test NAME HOST`, `bloatlab demo`).
//!
//! Like flent, the suite is an orchestrator: it generates no traffic itself. It runs the
//! `bloatlab` binary's own `client ... --json` (TCP flows) and `ping ... --json` (latency
//! probes) as subprocesses and parses their JSON: the client's through the engine's own
//! types (`bloatlab_metrics::json::Document`), ping's as a results file.
//!
//! * [`catalog`]: test names, descriptions, DSCP markings.
//! * [`endpoints`]: the server's IPv4 and IPv6 addresses for a dual-stack test (`rrul46`).
//! * [`plan`]: the sans-IO plan: phases and which runner starts and stops when.
//! * [`driver`]: spawns, watches and interrupts the runner processes.
//! * [`flow`]: a load flow's client document, read through the engine's types.
//! * [`collect`]: runner output to series on the run's time axis (pure).
//! * [`rpm`]: the `rpm` test's draft run (`bloatlab rpm --json`) read and laid onto the
//!   test's phases (pure).
//! * [`run`]: pre-flight, drive, assemble the results file, working-condition findings.
//! * [`summary`]: the terminal summary.
//! * [`journal`]: what a run has learnt so far, on disk, and recovering a run from it.
//! * [`host`]: CPU utilisation, kernel and sysctls of this host.
//! * [`ecn`]: `--ecn on|off|mix`: the host's tcp_ecn and the marked ECN route.
//! * [`lab`]: the lab's view of a run inside a lab (emulator counters, link spec, ECN).
//! * [`meta`]: the typed metadata records of a run (hosts, plan, congestion control).
//! * [`session`]: one lab session (up, server, wait, quiet runs, one stop grace, down) for
//!   `demo`, `experiment` and `tune`.
//! * [`demo`]: `bloatlab demo`: a lab, RRUL against FIFO and FQ-CoDel, side by side.

#![forbid(unsafe_code)]

pub mod catalog;
pub mod collect;
pub mod demo;
pub mod driver;
pub mod ecn;
pub mod endpoints;
pub mod flow;
pub mod host;
pub mod journal;
pub mod lab;
pub mod meta;
pub mod orphan;
pub mod plan;
pub mod rpm;
pub mod run;
pub mod session;
pub mod summary;

pub use catalog::{TestName, Tos, UnknownTest, list_tests, parse_marking};
pub use driver::{RpmClient, Target};
pub use plan::{Plan, PlanError, TestParams, plan};
pub use run::{RunConfig, RunError, RunOutcome, preflight, recover, run, run_journaled};
