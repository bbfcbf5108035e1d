//! One module per subcommand: its clap arguments and its `run`.

pub mod autorate;
pub mod autorate_io;
pub mod client;
pub mod demo;
pub mod emit;
pub mod experiment;
pub mod inlab;
pub mod lab;
pub mod opts;
pub mod ping;
pub mod report;
pub mod rpm;
pub mod server;
pub mod server_browser;
pub mod server_http;
pub mod test;
pub mod trace_gen;
pub mod tune;

/// From now on SIGINT and SIGTERM raise the returned token instead of ending the process, so
/// the command can stop its children, keep what was measured and clean up.
pub fn stop_on_interrupt() -> anyhow::Result<bloatlab_os::StopToken> {
    bloatlab_os::StopToken::on_signals(&bloatlab_os::stop::INTERRUPT)
        .map_err(|e| anyhow::anyhow!("cannot install the SIGINT/SIGTERM handlers: {e}"))
}
