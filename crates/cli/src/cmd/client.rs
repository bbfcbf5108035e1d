//! `bloatlab client HOST` (also `bloatlab -c HOST`): iperf 2's client options.

use bloatlab_engine::config::{ClientConfig, Protocol};

/// The flags, and their resolution into the engine's config, are defined once in
/// `bloatlab_invoke::client` (with `to_argv`, which `bloatlab test` uses for its flows).
pub use bloatlab_invoke::client::ClientArgs;

/// After a stop by signal the run exits with 128 + the signal number (130
/// for SIGINT, 143 for SIGTERM), after the final report was printed.
fn interrupted(stop: &bloatlab_os::StopToken) -> anyhow::Result<()> {
    match stop.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "a signal",
            };
            Err(anyhow::Error::new(crate::exit::Exit {
                code: u8::try_from(128 + sig).unwrap_or(crate::exit::FAILURE),
                message: format!("interrupted by {name}; the report covers the time until then"),
            }))
        }
        None => Ok(()),
    }
}

pub fn run(args: ClientArgs) -> anyhow::Result<()> {
    let mut cfg = args
        .resolve(super::opts::permit_key_env()?)
        .map_err(|e| crate::exit::usage(e.message))?;
    let lab = crate::cmd::inlab::InLab::start()?;
    // SIGINT/SIGTERM ask the engine to stop: it ends the test early, shuts the connection
    // down and prints the final report with what was measured.
    cfg.stop = crate::cmd::stop_on_interrupt()?;
    let result = run_protocol(&cfg);
    // A dead emulator is the cause of whatever else went wrong.
    lab.check()?;
    interrupted(&cfg.stop)?;
    result
}

fn run_protocol(cfg: &ClientConfig) -> anyhow::Result<()> {
    match cfg.protocol {
        Protocol::Tcp => {
            let out = bloatlab_engine::tcp::client::run(cfg)?;
            failed(&out.failures, cfg.parallel)
        }
        Protocol::Udp => {
            let out = bloatlab_engine::udp::run_client(cfg)?;
            failed(&out.failures, cfg.parallel)
        }
    }
}

/// A run with a failed stream did not happen as asked: exit 1, naming
/// the first reason (each stream's own line is already on stderr or in
/// the report).
fn failed(failures: &[(u32, String)], parallel: u32) -> anyhow::Result<()> {
    match failures.first() {
        None => Ok(()),
        Some((stream, why)) => anyhow::bail!(
            "{} of {} stream(s) failed; stream {stream}: {why}",
            failures.len(),
            parallel
        ),
    }
}
