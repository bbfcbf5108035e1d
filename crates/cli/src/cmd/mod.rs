//! One module per subcommand: its clap arguments and its `run`.

pub mod client;
pub mod lab;
pub mod ping;
pub mod report;
pub mod server;
