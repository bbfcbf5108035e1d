//! `bloatlab`: measure, reproduce and fix bufferbloat.
//!
//! The binary is thin: it parses arguments (one module per subcommand under
//! [`cmd`]), calls into the library crates, and maps their typed errors to
//! messages and exit codes (see [`exit`]).

#![forbid(unsafe_code)]

mod cmd;
mod exit;
mod iperf_compat;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Measure, reproduce and fix bufferbloat.
#[derive(Debug, Parser)]
#[command(name = "bloatlab", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a traffic server (iperf 2 compatible; `bloatlab -s` works too).
    Server(cmd::server::ServerArgs),
    /// Run a traffic client against HOST (iperf 2 compatible; `bloatlab -c HOST` works too).
    Client(cmd::client::ClientArgs),
    /// Build, inspect and tear down an emulated network lab on this machine.
    Lab(cmd::lab::LabArgs),
    /// Isochronous latency probes to a bloatlab server (RTT, one-way delay, loss per direction).
    Ping(cmd::ping::PingArgs),
    /// Responsiveness (RPM) the way draft-ietf-ippm-responsiveness measures it, against an
    /// HTTP/2 test server (`bloatlab server --https`, networkQuality servers, nginx).
    Rpm(cmd::rpm::RpmArgs),
    /// Redraw saved runs: summary tables, plots, HTML report, flent export.
    Report(cmd::report::ReportArgs),
    /// Run a latency-under-load test (rrul, tcp_upload, speedtest, voip, ...) against HOST.
    Test(cmd::test::TestArgs),
    /// Build a lab, run RRUL against a deep FIFO and FQ-CoDel, compare them (needs root).
    Demo(cmd::demo::DemoArgs),
    /// Run an experiment declared in a TOML file (sweeps, repetitions, shards); merge shards.
    Experiment(cmd::experiment::ExperimentArgs),
    /// Find the highest shaper rate that keeps latency under load within a budget (a lab's
    /// stage, or a real link through your own set-rate command).
    Tune(cmd::tune::TuneArgs),
    /// Adapt a shaper's rate to a link whose capacity changes (cake-autorate class): probe
    /// delay, cut on bloat, raise under load (a lab's stage, or a real link through your
    /// own set-rate command).
    Autorate(cmd::autorate::AutorateArgs),
}

fn main() -> ExitCode {
    exit::init_logging();
    let argv = iperf_compat::rewrite_args(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints its own message; usage errors exit 2, --help/--version 0.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Server(args) => cmd::server::run(args),
        Command::Client(args) => cmd::client::run(args),
        Command::Lab(args) => cmd::lab::run(args),
        Command::Ping(args) => cmd::ping::run(args),
        Command::Rpm(args) => cmd::rpm::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Test(args) => cmd::test::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Experiment(args) => cmd::experiment::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::Autorate(args) => cmd::autorate::run(args),
    };
    exit::finish(result)
}
